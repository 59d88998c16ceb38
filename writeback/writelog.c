// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * writelog.c - the write log (-o write_log=FILE): every change the daemon
 * makes to BACKING, in order, with its data, so that a tool
 * (contrib/crashimg.py) can build the states a crash could leave.
 *
 * Format, version 1, all integers little-endian:
 *
 *   file header, 64 bytes:
 *     [0, 8)   magic "FOLIOWLG"
 *     [8, 12)  version (1)
 *     [12, 16) size of this header (64)
 *     [16, 20) size of a record header (88)
 *     [20, 24) 0
 *     [24, 32) CLOCK_MONOTONIC ns when the log was opened
 *     [32, 40) CLOCK_REALTIME ns at the same moment
 *     [40, 60) 0
 *     [60, 64) CRC-32 of [0, 60)
 *   then records, each an 88-byte header, the name, the new name, the
 *   data, and zeros up to a multiple of 8 bytes:
 *     [0, 4)   magic "WREC"
 *     [4, 6)   type (WB_WLOG_T_*, below)
 *     [6, 8)   name_len      [8, 10) newname_len    [10, 12) 0
 *     [12, 16) mode: st_mode (ENTRY, CREATE), fallocate mode, rename
 *              flags, 1 for fdatasync (FSYNC, FSYNCDIR), errno
 *              (WRITE_FAILED)
 *     [16, 24) seq: 0, 1, 2, ... with no gap
 *     [24, 32) CLOCK_MONOTONIC ns, taken with seq (never decreasing)
 *     [32, 40) ino: the backing inode the record is about
 *     [40, 48) dir: the parent directory's inode (ENTRY, CREATE, LINK,
 *              UNLINK, RENAME); the seq of the failed write
 *              (WRITE_FAILED); the first seq not yet given when the sync
 *              began (FSYNC, FSYNCDIR)
 *     [48, 56) newdir (RENAME)
 *     [56, 64) off (WRITE, FALLOCATE), the new size (TRUNCATE)
 *     [64, 72) len (FALLOCATE; WRITE: the data length again)
 *     [72, 80) data_len: bytes of data after the names
 *     [80, 84) CRC-32 of the names and the data
 *     [84, 88) CRC-32 of [0, 84)
 *
 * Files are named by inode number, which a rename keeps; names by the
 * parent directory's inode and the name in it (a path read at logging time
 * could disagree with the order of the log when an ancestor is renamed
 * meanwhile).  The log starts with an ENTRY record for every name under
 * BACKING (the root has dir 0 and an empty name) and one ENTRIES_END: the
 * tool maps the inodes of this mount to the paths of a copy of BACKING
 * taken before it.
 *
 * When a change is recorded, and why that order is a valid order of the
 * real operations:
 * - A data write is recorded when it is issued, before pwritev() or the
 *   io_uring submission: a device may persist a write that has not
 *   completed, so a crash state may hold any write issued before the
 *   crash.  A write that the backing file system refuses gets a
 *   WRITE_FAILED record naming it (it may have been done in part, and a
 *   later sync does not make it durable).  Faults injected by the fault
 *   switch are not failures of the backing file system: the write was
 *   done, and is not marked failed.
 * - fsync/fdatasync of a file or a directory is recorded when it returned
 *   success: only then is it a promise.  It covers the records made
 *   before it began, which it names (its dir field): a flusher may issue
 *   writes to the file while the sync runs, and those it may or may not
 *   have made durable.
 * - truncate, fallocate and namespace changes are recorded once the call
 *   succeeded and before the request is answered; the kernel serialises
 *   the requests that touch the same names until they are answered.
 *
 * The log is written with one writev() per record, under one lock that
 * also assigns seq and time; nothing is buffered in the daemon, so a
 * daemon killed with SIGKILL leaves every record it wrote (the last one
 * possibly cut short: the tool ignores an incomplete last record).
 *
 * If the log cannot be written, every later change to BACKING fails with
 * EIO instead of going unrecorded: writeback keeps the data dirty, fsync
 * and namespace operations fail, and one error line says why.  A change
 * already made when its record failed (a sync, a rename) is reported as
 * failed too.  A crash test would rather stop than build images from a log
 * with holes.
 *
 * Left out, because no crash state of a database depends on them: file
 * times (futimens, utimensat), modes and owners (chmod, chown) and
 * extended attributes.  They are metadata a journaling file system
 * commits with the rest; PostgreSQL's recovery reads none of them.
 */
#include "wb_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define WLOG_MAGIC "FOLIOWLG"
#define WLOG_VERSION 1
#define WLOG_FILE_HDR 64
#define WLOG_REC_HDR 88
#define WLOG_REC_MAGIC 0x43455257u	/* "WREC" little-endian */

enum {
	WB_WLOG_T_ENTRY = 1,
	WB_WLOG_T_ENTRIES_END = 2,
	WB_WLOG_T_WRITE = 3,
	WB_WLOG_T_WRITE_FAILED = 4,
	WB_WLOG_T_FSYNC = 5,
	WB_WLOG_T_TRUNCATE = 6,
	WB_WLOG_T_FALLOCATE = 7,
	WB_WLOG_T_CREATE = 8,
	WB_WLOG_T_LINK = 9,
	WB_WLOG_T_UNLINK = 10,
	WB_WLOG_T_RENAME = 11,
	WB_WLOG_T_FSYNCDIR = 12,
};

/* One record before it is encoded. */
struct wlog_rec {
	uint16_t type;
	uint32_t mode;
	uint64_t ino, dir, newdir, off, len;
	const char *name, *newname;		/* NULL: none */
	const struct iovec *data;		/* the data, @data_cnt iovecs */
	int data_cnt;
	uint64_t data_len;
};

/*
 * One log per process: the daemon serves one mount.  fd and seq are
 * protected by lock; on is set once, before any request that could change
 * BACKING is served (flusher threads already run and read it); failed is
 * set under lock and read without it to refuse changes early.
 */
static struct {
	pthread_mutex_t lock;
	int fd;
	uint64_t seq;
	atomic_bool on;
	atomic_bool failed;
} wlog = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

/* ---- encoding ---- */

/*
 * CRC-32 as zlib computes it (reflected polynomial 0xEDB88320, the
 * checksum crashimg.py reads with zlib.crc32()): zlib's own crc32().
 */
static uint32_t crc_update(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	/* crc32() of a NULL buffer returns its initial value, not @crc. */
	if (!len)
		return crc;
	/* crc32() takes a uInt length: feed larger buffers in pieces. */
	while (len > UINT_MAX) {
		crc = (uint32_t)crc32(crc, p, UINT_MAX);
		p += UINT_MAX;
		len -= UINT_MAX;
	}
	return (uint32_t)crc32(crc, p, (uInt)len);
}

static void put16(unsigned char *p, uint16_t v)
{
	for (int i = 0; i < 2; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t now_realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Write all of @iov; 0 or -errno (a short write that makes no progress is -EIO). */
static int write_all(int fd, struct iovec *iov, int cnt)
{
	while (cnt > 0) {
		ssize_t n = writev(fd, iov, cnt > IOV_MAX ? IOV_MAX : cnt);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		while (cnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

/* The log just failed with @err: refuse every later change.  Context: lock held. */
static void fail_locked(int err)
{
	if (!atomic_exchange(&wlog.failed, true))
		wb_log("error: write_log: cannot write the log (%s); every further change "
		       "to BACKING fails with EIO", strerror(-err));
}

static void fail(int err)
{
	pthread_mutex_lock(&wlog.lock);
	fail_locked(err);
	pthread_mutex_unlock(&wlog.lock);
}

/*
 * Append @r and give its seq in *@seq (when not NULL): 0, or -EIO when the
 * log is broken (now or before).  The seq, the time and the header CRC
 * are made under the lock, the CRC of names and data outside it.
 * Context: any thread; blocks on the log's writev.
 */
static int append(const struct wlog_rec *r, uint64_t *seq)
{
	unsigned char hdr[WLOG_REC_HDR] = { 0 };
	static const unsigned char zeros[8];
	uint16_t name_len = r->name ? (uint16_t)strlen(r->name) : 0;
	uint16_t newname_len = r->newname ? (uint16_t)strlen(r->newname) : 0;
	uint64_t body = (uint64_t)name_len + newname_len + r->data_len;
	struct iovec iov[4 + WB_BATCH];
	uint32_t data_crc = 0;
	int cnt = 0, ret;

	if (r->data_cnt > WB_BATCH)
		return -EINVAL;
	data_crc = crc_update(data_crc, r->name, name_len);
	data_crc = crc_update(data_crc, r->newname, newname_len);
	for (int i = 0; i < r->data_cnt; i++)
		data_crc = crc_update(data_crc, r->data[i].iov_base, r->data[i].iov_len);
	put32(hdr, WLOG_REC_MAGIC);
	put16(hdr + 4, r->type);
	put16(hdr + 6, name_len);
	put16(hdr + 8, newname_len);
	put32(hdr + 12, r->mode);
	put64(hdr + 32, r->ino);
	put64(hdr + 40, r->dir);
	put64(hdr + 48, r->newdir);
	put64(hdr + 56, r->off);
	put64(hdr + 64, r->len);
	put64(hdr + 72, r->data_len);
	put32(hdr + 80, data_crc);
	iov[cnt++] = (struct iovec){ hdr, sizeof(hdr) };
	if (name_len)
		iov[cnt++] = (struct iovec){ (void *)r->name, name_len };
	if (newname_len)
		iov[cnt++] = (struct iovec){ (void *)r->newname, newname_len };
	for (int i = 0; i < r->data_cnt; i++)
		iov[cnt++] = r->data[i];
	if (body % 8)
		iov[cnt++] = (struct iovec){ (void *)zeros, 8 - body % 8 };

	pthread_mutex_lock(&wlog.lock);
	if (atomic_load(&wlog.failed)) {
		pthread_mutex_unlock(&wlog.lock);
		return -EIO;
	}
	put64(hdr + 16, wlog.seq);
	put64(hdr + 24, (uint64_t)wb_now_ns());
	put32(hdr + 84, crc_update(0, hdr, 84));
	ret = write_all(wlog.fd, iov, cnt);
	if (ret)
		fail_locked(ret);
	else if (seq)
		*seq = wlog.seq;
	if (!ret)
		wlog.seq++;
	pthread_mutex_unlock(&wlog.lock);
	return ret ? -EIO : 0;
}

/* The inode of @fd (or of @name in directory @fd): 0 or -errno. */
static int ino_of(int fd, const char *name, struct stat *st)
{
	if (fstatat(fd, name ? name : "", st,
		    (name ? 0 : AT_EMPTY_PATH) | AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

/* ---- the catalog: every name under BACKING when the log starts ---- */

static int catalog_dir(int parent_fd, ino_t dir_ino, unsigned int depth)
{
	struct dirent *de;
	DIR *d;
	int fd, ret = 0;

	if (depth > 4096)
		return -ELOOP;
	fd = openat(parent_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while (!ret && (errno = 0, de = readdir(d))) {
		struct wlog_rec r = { .type = WB_WLOG_T_ENTRY, .dir = dir_ino, .name = de->d_name };
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		ret = ino_of(dirfd(d), de->d_name, &st);
		if (ret)
			break;
		r.ino = st.st_ino;
		r.mode = st.st_mode;
		ret = append(&r, NULL);
		if (!ret && S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub < 0) {
				ret = -errno;
				break;
			}
			ret = catalog_dir(sub, st.st_ino, depth + 1);
			close(sub);
		}
	}
	if (!ret && errno)
		ret = -errno;
	closedir(d);
	return ret;
}

/* The file header, written before the log is published to other threads. */
static int write_header(int fd)
{
	unsigned char hdr[WLOG_FILE_HDR] = { 0 };
	struct iovec iov = { hdr, sizeof(hdr) };

	for (int i = 0; i < 8; i++)
		hdr[i] = (unsigned char)WLOG_MAGIC[i];
	put32(hdr + 8, WLOG_VERSION);
	put32(hdr + 12, WLOG_FILE_HDR);
	put32(hdr + 16, WLOG_REC_HDR);
	put64(hdr + 24, (uint64_t)wb_now_ns());
	put64(hdr + 32, now_realtime_ns());
	put32(hdr + 60, crc_update(0, hdr, 60));
	return write_all(fd, &iov, 1);
}

int wb_wlog_open(const char *path, int root_fd)
{
	struct wlog_rec root = { .type = WB_WLOG_T_ENTRY };
	struct stat st;
	int fd, ret;

	if (atomic_load(&wlog.on))
		return -EBUSY;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ret = fd < 0 ? -errno : write_header(fd);
	pthread_mutex_lock(&wlog.lock);
	wlog.fd = fd;
	/* On from here, even when it failed: a log that cannot be made refuses every change. */
	atomic_store(&wlog.on, true);
	if (ret)
		fail_locked(ret);
	pthread_mutex_unlock(&wlog.lock);
	if (ret)
		return ret;
	ret = ino_of(root_fd, NULL, &st);
	if (!ret) {
		root.ino = st.st_ino;
		root.mode = st.st_mode;
		ret = append(&root, NULL);
	}
	if (!ret && S_ISDIR(st.st_mode))
		ret = catalog_dir(root_fd, st.st_ino, 0);
	if (!ret)
		ret = append(&(struct wlog_rec){ .type = WB_WLOG_T_ENTRIES_END }, NULL);
	if (ret)
		fail(ret);	/* says so only the first time */
	return ret;
}

int wb_wlog_check(void)
{
	return atomic_load(&wlog.failed) ? -EIO : 0;
}

/*
 * Append @r about the file open as @fd (its inode goes in r->ino).  A file
 * that cannot be named breaks the log like a failed write of it.
 */
static int append_fd(int fd, struct wlog_rec *r, uint64_t *seq)
{
	struct stat st;
	int ret = ino_of(fd, NULL, &st);

	if (ret) {
		fail(ret);
		return -EIO;
	}
	r->ino = st.st_ino;
	return append(r, seq);
}

/* ---- data ---- */

int wb_wlog_write(int fd, const struct iovec *iov, int iovcnt, off_t off,
		  size_t len, uint64_t *seq)
{
	struct wlog_rec r = { .type = WB_WLOG_T_WRITE, .off = (uint64_t)off, .len = len,
			      .data = iov, .data_cnt = iovcnt, .data_len = len };

	return atomic_load(&wlog.on) ? append_fd(fd, &r, seq) : 0;
}

void wb_wlog_write_failed(int fd, uint64_t seq, int err)
{
	struct wlog_rec r = { .type = WB_WLOG_T_WRITE_FAILED, .dir = seq, .mode = (uint32_t)-err };

	if (atomic_load(&wlog.on))
		(void)append_fd(fd, &r, NULL);	/* a failure breaks the log: loud already */
}

bool wb_wlog_on(void)
{
	return atomic_load(&wlog.on);
}

uint64_t wb_wlog_seq(void)
{
	uint64_t seq;

	if (!atomic_load(&wlog.on))
		return 0;
	pthread_mutex_lock(&wlog.lock);
	seq = wlog.seq;
	pthread_mutex_unlock(&wlog.lock);
	return seq;
}

int wb_wlog_sync(int fd, bool datasync, bool dir, uint64_t begin)
{
	struct wlog_rec r = { .type = dir ? WB_WLOG_T_FSYNCDIR : WB_WLOG_T_FSYNC,
			      .mode = datasync, .dir = begin };

	return atomic_load(&wlog.on) ? append_fd(fd, &r, NULL) : 0;
}

int wb_wlog_truncate(int fd, off_t size)
{
	struct wlog_rec r = { .type = WB_WLOG_T_TRUNCATE, .off = (uint64_t)size };

	return atomic_load(&wlog.on) ? append_fd(fd, &r, NULL) : 0;
}

int wb_wlog_fallocate(int fd, int mode, off_t off, off_t len)
{
	struct wlog_rec r = { .type = WB_WLOG_T_FALLOCATE, .mode = (uint32_t)mode,
			      .off = (uint64_t)off, .len = (uint64_t)len };

	return atomic_load(&wlog.on) ? append_fd(fd, &r, NULL) : 0;
}

/* ---- names ---- */

/* CREATE or LINK of @name in @dirfd: its inode and mode, a symlink's target. */
static int ns_new_name(struct wlog_rec *r, int dirfd, const char *name)
{
	char target[PATH_MAX];
	struct iovec iov;
	struct stat st;
	ssize_t n;
	int ret = ino_of(dirfd, name, &st);

	if (ret)
		return ret;
	r->ino = st.st_ino;
	r->mode = st.st_mode;
	if (r->type == WB_WLOG_T_CREATE && S_ISLNK(st.st_mode)) {
		n = readlinkat(dirfd, name, target, sizeof(target));
		if (n < 0)
			return -errno;
		iov = (struct iovec){ target, (size_t)n };
		r->data = &iov;
		r->data_cnt = 1;
		r->data_len = (uint64_t)n;
	}
	return append(r, NULL);
}

int wb_wlog_ns(enum wb_wlog_ns op, int dirfd, const char *name,
	       int newdirfd, const char *newname, unsigned int flags)
{
	static const uint16_t types[] = {
		[WB_WLOG_CREATE] = WB_WLOG_T_CREATE, [WB_WLOG_LINK] = WB_WLOG_T_LINK,
		[WB_WLOG_UNLINK] = WB_WLOG_T_UNLINK, [WB_WLOG_RENAME] = WB_WLOG_T_RENAME,
	};
	struct wlog_rec r = { .type = types[op], .mode = flags, .name = name };
	struct stat st;
	int ret;

	if (!atomic_load(&wlog.on))
		return 0;
	ret = ino_of(dirfd, NULL, &st);
	if (!ret)
		r.dir = st.st_ino;
	if (!ret && op == WB_WLOG_RENAME) {
		ret = ino_of(newdirfd, NULL, &st);
		if (!ret)
			r.newdir = st.st_ino;
		r.newname = newname;
	}
	if (!ret)
		ret = op == WB_WLOG_CREATE || op == WB_WLOG_LINK ?
		      ns_new_name(&r, dirfd, name) : append(&r, NULL);
	if (ret)
		fail(ret);	/* says so only the first time */
	return ret ? -EIO : 0;
}
