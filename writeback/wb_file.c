// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wb_file.c - per-backing-file data path over the blockstate cache, and
 * synchronous writeback of dirty runs.
 *
 * Reads and writes go to the cache.  Writeback collects dirty runs from
 * blockstate (bs_wb_collect), merges runs that are contiguous in the file
 * (across folios) into one pwritev of at most WB_MAX_IO bytes, and tells
 * blockstate how each run ended: on failure its blocks stay dirty and the
 * error is returned, nothing is dropped.  One writeback of a file runs at
 * a time (wb_file.wb_lock).
 *
 * The backing descriptor may be swapped for one with wider access
 * (wb_file_upgrade) with dup3(), which replaces the descriptor number
 * atomically: I/O in flight on another thread keeps working.
 */
#include "writeback.h"
#include "blockstate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Largest single backing write: merged runs stop here. */
#define WB_MAX_IO (1u << 20)
/* Runs collected per batch. */
#define WB_BATCH 64
/* Largest chunk wb_copy_range moves per read/write pair. */
#define WB_COPY_CHUNK (1u << 20)

struct wb_ctx {
	struct bs_cache *cache;
	pthread_mutex_t files_lock;	/* protects the list; held across need_clean passes */
	struct wb_file *files;
	_Atomic uint64_t backing_write_bytes;
	_Atomic uint64_t backing_write_ios;
	_Atomic uint64_t wb_errors;	/* failed backing writes */
	_Atomic unsigned int lost_files;	/* files freed with unwritten data */
};

struct wb_file {
	struct wb_ctx *ctx;		/* immutable */
	int fd;				/* immutable number; its open file may be replaced by upgrade */
	_Atomic int access;		/* enum wb_access of the open file behind fd */
	struct bs_file *bs;		/* immutable */
	pthread_mutex_t wb_lock;	/* one writeback of this file at a time */
	atomic_bool unsynced;		/* written to the backing file since its last sync */
	_Atomic int64_t mtime_ns;	/* mtime of the last cached write not yet
					 * stamped on the backing file; 0: none */
	struct wb_file *next;		/* ctx files_lock */
	struct wb_file *prev;
};

/* ---- backing I/O ---- */

static ssize_t pread_all(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return done ? (ssize_t)done : -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* Write all of @iov at @off, resuming short writes; 0 or -errno. */
static int pwritev_all(int fd, struct iovec *iov, int cnt, off_t off)
{
	while (cnt > 0) {
		ssize_t n = pwritev(fd, iov, cnt, off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		off += n;
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

static ssize_t backing_read(void *ctx, void *buf, size_t len, off_t off)
{
	return pread_all(((struct wb_file *)ctx)->fd, buf, len, off);
}

static int backing_truncate(void *ctx, off_t size)
{
	return ftruncate(((struct wb_file *)ctx)->fd, size) < 0 ? -errno : 0;
}

static int backing_fallocate(void *ctx, int mode, off_t off, off_t len)
{
	return fallocate(((struct wb_file *)ctx)->fd, mode, off, len) < 0 ? -errno : 0;
}

static const struct bs_backing_ops wb_backing_ops = {
	.read = backing_read,
	.truncate = backing_truncate,
	.fallocate = backing_fallocate,
};

/* ---- writeback ---- */

static void report(struct wb_file *wbf, const char *what, int err);

/* Write runs[0..n) (contiguous in the file) with one pwritev. */
static int write_group(struct wb_file *wbf, struct bs_wb_run *runs, int n)
{
	struct iovec iov[WB_BATCH];
	size_t bytes = 0;
	int ret;

	for (int i = 0; i < n; i++) {
		iov[i].iov_base = runs[i].data;
		iov[i].iov_len = runs[i].len;
		bytes += runs[i].len;
	}
	ret = pwritev_all(wbf->fd, iov, n, runs[0].off);
	if (!ret) {
		atomic_fetch_add(&wbf->ctx->backing_write_bytes, bytes);
		atomic_store(&wbf->unsynced, true);
	} else {
		atomic_fetch_add(&wbf->ctx->wb_errors, 1);
	}
	atomic_fetch_add(&wbf->ctx->backing_write_ios, 1);
	for (int i = 0; i < n; i++)
		bs_wb_complete(wbf->bs, &runs[i], ret);
	return ret;
}

/* Length of the group of runs starting at runs[0] that one write can take. */
static int group_len(const struct bs_wb_run *runs, int n)
{
	size_t bytes = runs[0].len;
	int i = 1;

	while (i < n && runs[i].off == runs[i - 1].off + (off_t)runs[i - 1].len &&
	       bytes + runs[i].len <= WB_MAX_IO) {
		bytes += runs[i].len;
		i++;
	}
	return i;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Writeback moved the backing file's mtime to now: put back the time of
 * the last cached write, and forget it once nothing is left to write.
 */
static void stamp_mtime(struct wb_file *wbf)
{
	int64_t ns = atomic_load(&wbf->mtime_ns);
	struct timespec tv[2] = {
		{ .tv_nsec = UTIME_OMIT },
		{ .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 },
	};

	if (!ns)
		return;
	if (futimens(wbf->fd, tv) < 0) {
		report(wbf, "setting the modification time of", -errno);
		return;
	}
	if (!bs_file_has_held(wbf->bs))
		atomic_compare_exchange_strong(&wbf->mtime_ns, &ns, 0);
}

/*
 * Write back the dirty runs of [start, end).  Returns 0 or the first
 * -errno; failed runs stay dirty.  Context: may block; no cache lock held.
 */
static int writeback_range(struct wb_file *wbf, off_t start, off_t end)
{
	struct bs_wb_run runs[WB_BATCH];
	off_t pos = start;
	int first_err = 0;
	bool wrote = false;

	pthread_mutex_lock(&wbf->wb_lock);
	for (;;) {
		int n = bs_wb_collect(wbf->bs, &pos, end, runs, WB_BATCH,
				      (size_t)WB_BATCH * WB_MAX_IO);

		if (n == 0)
			break;
		for (int i = 0; i < n; ) {
			int g = group_len(runs + i, n - i);
			int ret = write_group(wbf, runs + i, g);

			if (ret && !first_err)
				first_err = ret;
			wrote |= !ret;
			i += g;
		}
	}
	if (wrote)
		stamp_mtime(wbf);
	pthread_mutex_unlock(&wbf->wb_lock);
	return first_err;
}

static int sync_backing(struct wb_file *wbf, bool datasync)
{
	int ret;

	atomic_store(&wbf->unsynced, false);
	ret = datasync ? fdatasync(wbf->fd) : fsync(wbf->fd);
	if (ret < 0) {
		atomic_store(&wbf->unsynced, true);
		return -errno;
	}
	return 0;
}

/* One line naming the backing file of @wbf in an error message. */
static void report(struct wb_file *wbf, const char *what, int err)
{
	char link[64], path[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", wbf->fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		n = snprintf(path, sizeof(path), "(descriptor %d)", wbf->fd);
	path[n] = '\0';
	fprintf(stderr, "foliofs: error: %s %s: %s\n", what, path, strerror(-err));
}

/* Reclaim found nothing clean: write back every file (a stall). */
static void ctx_need_clean(void *arg)
{
	struct wb_ctx *ctx = arg;

	pthread_mutex_lock(&ctx->files_lock);
	for (struct wb_file *f = ctx->files; f; f = f->next)
		writeback_range(f, 0, INT64_MAX);
	pthread_mutex_unlock(&ctx->files_lock);
}

static const struct bs_cache_ops wb_cache_ops = {
	.need_clean = ctx_need_clean,
};

/* ---- the context ---- */

int wb_ctx_create(const struct bs_config *cfg, struct wb_ctx **out)
{
	struct wb_ctx *ctx = calloc(1, sizeof(*ctx));
	int ret;

	if (!ctx)
		return -ENOMEM;
	pthread_mutex_init(&ctx->files_lock, NULL);
	ret = bs_cache_create(cfg, &wb_cache_ops, ctx, &ctx->cache);
	if (ret) {
		pthread_mutex_destroy(&ctx->files_lock);
		free(ctx);
		return ret;
	}
	*out = ctx;
	return 0;
}

unsigned int wb_ctx_destroy(struct wb_ctx *ctx)
{
	unsigned int lost = atomic_load(&ctx->lost_files);

	bs_cache_destroy(ctx->cache);
	pthread_mutex_destroy(&ctx->files_lock);
	free(ctx);
	return lost;
}

int wb_ctx_check(struct wb_ctx *ctx)
{
	return bs_cache_check(ctx->cache);
}

int wb_ctx_sync_all(struct wb_ctx *ctx)
{
	int first_err = 0;

	pthread_mutex_lock(&ctx->files_lock);
	for (struct wb_file *f = ctx->files; f; f = f->next) {
		int ret = writeback_range(f, 0, INT64_MAX);

		if (!ret && atomic_load(&f->unsynced))
			ret = sync_backing(f, true);
		if (ret) {
			report(f, "writing back", ret);
			if (!first_err)
				first_err = ret;
		}
	}
	pthread_mutex_unlock(&ctx->files_lock);
	return first_err;
}

size_t wb_ctx_stats(struct wb_ctx *ctx, char *buf, size_t size)
{
	const struct bs_config *cfg = bs_cache_config(ctx->cache);
	struct bs_stats st;
	int n;

	bs_cache_stats(ctx->cache, &st);
	n = snprintf(buf, size,
		     "nr_dirty %llu\n" "nr_dirtied %llu\n" "nr_written %llu\n"
		     "dirty_bytes_exact %llu\n" "writeback_bytes %llu\n"
		     "pinned_bytes %llu\n" "app_write_bytes %llu\n"
		     "app_read_bytes %llu\n" "backing_read_bytes %llu\n"
		     "backing_read_ios %llu\n" "backing_write_bytes %llu\n"
		     "backing_write_ios %llu\n" "wb_errors %llu\n"
		     "cache_bytes %llu\n" "cache_size %llu\n" "folios %llu\n"
		     "reclaimed_folios %llu\n" "reclaim_stalls %llu\n"
		     "block_size %u\n" "folio_size %u\n",
		     (unsigned long long)st.nr_dirty, (unsigned long long)st.nr_dirtied,
		     (unsigned long long)st.nr_written,
		     (unsigned long long)st.dirty_bytes_exact,
		     (unsigned long long)st.writeback_bytes,
		     (unsigned long long)st.pinned_bytes,
		     (unsigned long long)st.app_write_bytes,
		     (unsigned long long)st.app_read_bytes,
		     (unsigned long long)st.backing_read_bytes,
		     (unsigned long long)st.backing_read_ios,
		     (unsigned long long)atomic_load(&ctx->backing_write_bytes),
		     (unsigned long long)atomic_load(&ctx->backing_write_ios),
		     (unsigned long long)atomic_load(&ctx->wb_errors),
		     (unsigned long long)st.cache_bytes,
		     (unsigned long long)cfg->cache_size, (unsigned long long)st.folios,
		     (unsigned long long)st.reclaimed_folios,
		     (unsigned long long)st.reclaim_stalls, cfg->block_size,
		     cfg->folio_size);
	if (n < 0)
		return 0;
	return (size_t)n < size ? (size_t)n : size - 1;
}

/* ---- files ---- */

int wb_file_alloc(struct wb_ctx *ctx, int fd, enum wb_access access,
		  struct wb_file **out)
{
	struct wb_file *wbf = calloc(1, sizeof(*wbf));
	struct stat st;
	int ret = -ENOMEM;

	if (!wbf)
		goto out_close;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto out_free;
	}
	wbf->ctx = ctx;
	wbf->fd = fd;
	atomic_init(&wbf->access, access);
	pthread_mutex_init(&wbf->wb_lock, NULL);
	ret = bs_file_create(ctx->cache, &wb_backing_ops, wbf, st.st_size, &wbf->bs);
	if (ret) {
		pthread_mutex_destroy(&wbf->wb_lock);
		goto out_free;
	}
	pthread_mutex_lock(&ctx->files_lock);
	wbf->next = ctx->files;
	if (wbf->next)
		wbf->next->prev = wbf;
	ctx->files = wbf;
	pthread_mutex_unlock(&ctx->files_lock);
	*out = wbf;
	return 0;

out_free:
	free(wbf);
out_close:
	close(fd);
	return ret;
}

int wb_file_upgrade(struct wb_file *wbf, int fd, enum wb_access access)
{
	int ret = 0;

	if (dup3(fd, wbf->fd, O_CLOEXEC) < 0)
		ret = -errno;
	else
		atomic_store(&wbf->access, access);
	close(fd);
	return ret;
}

enum wb_access wb_file_access(const struct wb_file *wbf)
{
	return atomic_load(&wbf->access);
}

int wb_file_free(struct wb_file *wbf)
{
	struct wb_ctx *ctx = wbf->ctx;
	int ret = writeback_range(wbf, 0, INT64_MAX);

	if (!ret && atomic_load(&wbf->unsynced))
		ret = sync_backing(wbf, true);
	if (ret) {
		report(wbf, "writing back", ret);
		atomic_fetch_add(&ctx->lost_files, 1);
	}
	pthread_mutex_lock(&ctx->files_lock);
	if (wbf->prev)
		wbf->prev->next = wbf->next;
	else
		ctx->files = wbf->next;
	if (wbf->next)
		wbf->next->prev = wbf->prev;
	pthread_mutex_unlock(&ctx->files_lock);
	bs_file_destroy(wbf->bs);
	if (close(wbf->fd) < 0 && !ret)
		ret = -errno;
	pthread_mutex_destroy(&wbf->wb_lock);
	free(wbf);
	return ret;
}

off_t wb_file_size(struct wb_file *wbf)
{
	return bs_file_size(wbf->bs);
}

ssize_t wb_read(struct wb_file *wbf, void *buf, size_t len, off_t off)
{
	return bs_read(wbf->bs, buf, len, off);
}

ssize_t wb_write(struct wb_file *wbf, const void *buf, size_t len, off_t off)
{
	ssize_t n = bs_write(wbf->bs, buf, len, off);

	if (n > 0)
		atomic_store(&wbf->mtime_ns, now_ns());
	return n;
}

void wb_file_fix_stat(struct wb_file *wbf, struct stat *st)
{
	int64_t ns = atomic_load(&wbf->mtime_ns);

	st->st_size = bs_file_size(wbf->bs);
	if (ns) {
		struct timespec ts = { ns / 1000000000, ns % 1000000000 };

		st->st_mtim = ts;
		if (ts.tv_sec > st->st_ctim.tv_sec ||
		    (ts.tv_sec == st->st_ctim.tv_sec && ts.tv_nsec > st->st_ctim.tv_nsec))
			st->st_ctim = ts;
	}
}

void wb_file_mtime_set(struct wb_file *wbf, const struct timespec *mtime)
{
	/* Writeback must leave this time on the backing file, not its own. */
	atomic_store(&wbf->mtime_ns, (int64_t)mtime->tv_sec * 1000000000 + mtime->tv_nsec);
}

int wb_fsync(struct wb_file *wbf, bool datasync)
{
	int ret = writeback_range(wbf, 0, INT64_MAX);

	if (ret)
		return ret;
	return sync_backing(wbf, datasync);
}

int wb_truncate(struct wb_file *wbf, off_t size)
{
	if (size < 0)
		return -EINVAL;
	/* ftruncate stamps the backing file itself; a pending time is older. */
	atomic_store(&wbf->mtime_ns, 0);
	return bs_truncate(wbf->bs, size);
}

int wb_fallocate(struct wb_file *wbf, int mode, off_t off, off_t len)
{
	int ret;

	if (off < 0 || len <= 0)
		return -EINVAL;
	if (len > INT64_MAX - off)
		return -EFBIG;
	/* As Linux does: dirty data of the range reaches the disk first. */
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
		ret = writeback_range(wbf, off, off + len);
		if (ret)
			return ret;
	}
	return bs_fallocate(wbf->bs, mode, off, len);
}

off_t wb_lseek(struct wb_file *wbf, off_t off, int whence)
{
	off_t ret;
	int err;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	/* Holes are the backing file's: let it see the cached data first. */
	err = writeback_range(wbf, off, INT64_MAX);
	if (err)
		return err;
	if (off >= bs_file_size(wbf->bs))
		return -ENXIO;
	ret = lseek(wbf->fd, off, whence);
	return ret < 0 ? -errno : ret;
}

static bool ranges_overlap(off_t a, off_t b, size_t len)
{
	return a < b ? b - a < (off_t)len : a - b < (off_t)len;
}

ssize_t wb_copy_range(struct wb_file *src, off_t src_off,
		      struct wb_file *dst, off_t dst_off, size_t len)
{
	size_t chunk = len < WB_COPY_CHUNK ? len : WB_COPY_CHUNK;
	size_t done = 0;
	char *buf;

	if (src_off < 0 || dst_off < 0)
		return -EINVAL;
	if (len > (size_t)(INT64_MAX - src_off) ||
	    len > (size_t)(INT64_MAX - dst_off))
		return -EFBIG;
	if (src == dst && ranges_overlap(src_off, dst_off, len))
		return -EINVAL;
	if (len == 0)
		return 0;
	buf = malloc(chunk);
	if (!buf)
		return -ENOMEM;
	while (done < len) {
		size_t want = len - done < chunk ? len - done : chunk;
		ssize_t got = wb_read(src, buf, want, src_off + (off_t)done);
		ssize_t put;

		if (got <= 0) {
			if (got < 0 && done == 0)
				done = (size_t)got;
			break;
		}
		put = wb_write(dst, buf, (size_t)got, dst_off + (off_t)done);
		if (put < 0) {
			if (done == 0)
				done = (size_t)put;
			break;
		}
		done += (size_t)got;
		if ((size_t)got < want)
			break;
	}
	free(buf);
	return (ssize_t)done;
}
