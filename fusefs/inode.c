// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * inode.c - the table of backing inodes the kernel knows about, and the
 * reference-counted link from an inode to its data path (writeback.h).
 *
 * The table is a chained hash keyed by (st_dev, st_ino) under one mutex.
 * It is used by lookup, create and forget only; reads and writes reach
 * their inode through the fuse_ino_t and never take it.
 *
 * Lifetime: an inode lives while the kernel holds lookups of it, and after
 * that until its data is written back.  The forget that takes nlookup to
 * zero marks the inode `forgetting` and writes it back with the table lock
 * dropped.  The inode stays in the table meanwhile, so a lookup of the same
 * backing inode in that window gets this inode and its cache again: one
 * file never has two caches, whose older data could land after newer.  A
 * forget of such a lookup finds `forgetting` set and leaves the work to
 * the forget in progress, which writes again when the inode was looked up
 * (and so maybe written) meanwhile.  Once a writeback round passes with no
 * lookup, that forget drops the cache under the inode's lock (an open in
 * the meantime waits, then makes a new cache), and if still nobody looked
 * the inode up, removes it from the table and frees it.  No other path
 * frees an inode before teardown.
 *
 * Descriptors: an inode has an O_PATH descriptor while a request on it is
 * being served or a handle of it is open (ffs_inode_pin), and after that
 * while it stays on the cache of descriptors (ffs_data.fdc_*), least
 * recently used closed first.  Without one, it is found again by the path
 * of names from its nearest ancestor that has one: the daemon sees every
 * rename and unlink, and keeps each inode's parent and name current; an
 * inode whose name is removed keeps its descriptor until it is forgotten.
 * The handle checked after the open (ffs_fh: inode number and generation)
 * makes sure that it is the same inode and not a new one that took its
 * number; one that is not there is stale (ESTALE), as on NFS.  Opening by
 * handle would need CAP_DAC_READ_SEARCH, which a mount by a user lacks,
 * and costs about what a path of a few names does
 * (contrib/bench/bench-refind.c, doc/results.md).
 *
 * A file's data descriptor (in its wb_file) stays while the file is open
 * or holds data not yet durable, and after that on the idle list.  When
 * the budget (see struct ffs_data) is used up, or either cache holds
 * more than ffs_data.fd_cache_max, cached O_PATH descriptors are closed
 * first, then idle data descriptors, least recently used first.  The
 * next open takes one again through the O_PATH descriptor, with O_DIRECT
 * for backing_direct, as the first open did.  The cache and the errseq
 * state stay with the wb_file meanwhile.  So the number of inodes the
 * kernel may keep looked up is not bounded by RLIMIT_NOFILE, and the
 * daemon's descriptors are bounded by its caches and what is open.
 *
 * Why an eviction may write another file.  An open over the budget
 * (ffs_fd_charge) needs a descriptor now, and it can only have one that
 * is closed.  When no O_PATH descriptor is cached and every idle file it
 * looks at is dirty (or holds unsynced data), the only descriptor left
 * to close is a dirty file's, and that one cannot simply be closed: its
 * data would then be written back through no descriptor, and the
 * writeback errors a later fsync of it must report would have none to
 * happen on.  So its data is made durable first, by one writeback call
 * (wb_file_fd_evict: write back, sync, close) on the opener's thread,
 * with that file's lock held so nobody uses it meanwhile.  What bounds
 * it: EVICT_SCAN idle files are looked at, oldest first, and any clean
 * one among them is closed in preference, so only when all of them are
 * dirty is one written, and it is one file per descriptor wanted (the
 * oldest, whose data the flushers would write next anyway).  Lookups
 * never write (ffs_fd_charge_path): they close only what is clean, and
 * the reserve covers them.  A failing writeback leaves the file its
 * descriptor; it goes back on the idle list as the most recent, so the
 * next eviction tries others first, and the open gets ENFILE when none
 * can go.
 */
#include "fusefs.h"
#include "writeback.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <linux/fs.h>

#define ITABLE_MIN_BUCKETS 1024

/*
 * The descriptor reserve: a few for short-lived descriptors (a block
 * device's size, fusermount3 at unmount, syslog reconnecting), and per
 * thread that may start later two (a FUSE worker or flusher makes its
 * io_uring ring on its first writeback; with clone_fd a worker opens
 * /dev/fuse) and three for the O_PATH descriptors its request may need
 * beyond the budget (a rename's two directories and the inode it
 * replaces, ffs_fd_charge_path).  At most a quarter of the limit, so
 * that a small limit leaves files some.
 */
#define FD_RESERVE_MIN 32
#define FD_RESERVE_PER_THREAD 5
/* libfuse's max_threads when not given. */
#define FUSE_DEFAULT_MAX_THREADS 10
/*
 * Idle files looked at, oldest first, for one whose descriptor can simply
 * be closed, before the oldest dirty one is written back to free its own
 * (why it may have to be: the top of this file).
 */
#define EVICT_SCAN 32
/* Largest file handle (MAX_HANDLE_SZ in the kernel). */
#define FH_MAX 128
/*
 * Names walked up from an inode to an ancestor with a descriptor, at
 * most: a path longer than any BACKING can hold (PATH_MAX / 2 one-letter
 * names), so only a cycle of parents (made behind the daemon's back) hits
 * it.
 */
#define REFIND_MAX_DEPTH (PATH_MAX / 2)
/* openat2 said EAGAIN (a rename raced it): tried again this often. */
#define REFIND_TRIES 4

int ffs_blockdev_size(int path_fd, uint64_t *bytes)
{
	struct ffs_procpath p;
	int fd, ret = 0;

	ffs_procpath(&p, path_fd);
	fd = open(p.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, BLKGETSIZE64, bytes) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

void ffs_procpath(struct ffs_procpath *p, int fd)
{
	snprintf(p->path, sizeof(p->path), "/proc/self/fd/%d", fd);
}

static size_t inode_hash(const struct ffs_data *fs, ino_t ino, dev_t dev)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev;

	return (size_t)(h ^ (h >> 29)) & (fs->nbuckets - 1);
}

/* ---- file handles ---- */

union fh_buf {
	struct file_handle fh;
	char bytes[sizeof(struct file_handle) + FH_MAX];
};

/* The handle of @name in @dirfd ("": the inode open as @dirfd) into @buf: 0 or -errno. */
static int fh_read_at(int dirfd, const char *name, union fh_buf *buf, int *mnt_id)
{
	buf->fh.handle_bytes = FH_MAX;
	if (name_to_handle_at(dirfd, name, &buf->fh, mnt_id, *name ? 0 : AT_EMPTY_PATH) < 0)
		return -errno;
	return 0;
}

static int fh_read(int fd, union fh_buf *buf, int *mnt_id)
{
	return fh_read_at(fd, "", buf, mnt_id);
}

int ffs_fh_get(int fd, struct ffs_fh **out)
{
	return ffs_fh_at(fd, "", out);
}

int ffs_fh_at(int dirfd, const char *name, struct ffs_fh **out)
{
	union fh_buf buf;
	struct ffs_fh *fh;
	int mnt_id, ret = fh_read_at(dirfd, name, &buf, &mnt_id);

	*out = NULL;
	/* No handles here (or one larger than any the kernel makes). */
	if (ret == -EOPNOTSUPP || ret == -EOVERFLOW)
		return 0;
	if (ret)
		return ret;
	fh = malloc(sizeof(*fh) + buf.fh.handle_bytes);
	if (!fh)
		return -ENOMEM;
	fh->mnt_id = mnt_id;
	fh->type = buf.fh.handle_type;
	fh->len = buf.fh.handle_bytes;
	memcpy(fh->bytes, buf.fh.f_handle, fh->len);
	*out = fh;
	return 0;
}

/* Whether @fh names the inode whose handle is in @buf (on mount @mnt_id). */
static bool fh_matches(const struct ffs_fh *fh, const union fh_buf *buf, int mnt_id)
{
	return fh->mnt_id == mnt_id && fh->type == buf->fh.handle_type &&
	       fh->len == buf->fh.handle_bytes && !memcmp(fh->bytes, buf->fh.f_handle, fh->len);
}

/* Whether two handles (NULL: unknown) may name the same inode. */
static bool fh_same(const struct ffs_fh *a, const struct ffs_fh *b)
{
	return !a || !b || (a->mnt_id == b->mnt_id && a->type == b->type && a->len == b->len &&
			    !memcmp(a->bytes, b->bytes, a->len));
}

static void inode_init(struct ffs_data *fs, struct ffs_inode *inode, const struct stat *st,
		       int fd, struct ffs_fh *fh)
{
	inode->ops = fs->node_ops;
	inode->fd = fd;
	inode->fh = fh;
	/* Without a handle it could not be told from a new inode: kept. */
	inode->fd_keep = !fh;
	inode->src_ino = st->st_ino;
	inode->src_dev = st->st_dev;
	inode->type = st->st_mode & S_IFMT;
	inode->nlookup = 1;
	pthread_mutex_init(&inode->lock, NULL);
}

void ffs_handle_add(struct ffs_data *fs, struct ffs_handle *h,
		    void (*free_fn)(struct ffs_data *fs, struct ffs_handle *h))
{
	h->free = free_fn;
	pthread_mutex_lock(&fs->handles_lock);
	list_push_front(&fs->handles, &h->link);
	pthread_mutex_unlock(&fs->handles_lock);
}

void ffs_handle_release(struct ffs_data *fs, struct ffs_handle *h)
{
	pthread_mutex_lock(&fs->handles_lock);
	list_unlink(&h->link);
	pthread_mutex_unlock(&fs->handles_lock);
	h->free(fs, h);
}

void ffs_handles_free_all(struct ffs_data *fs)
{
	struct list_node *node;

	while ((node = list_first(&fs->handles))) {
		struct ffs_handle *h = list_entry(node, struct ffs_handle, link);

		list_unlink(node);
		h->free(fs, h);
	}
}

int ffs_itable_init(struct ffs_data *fs, int root_fd, const struct ffs_node_ops *node_ops)
{
	struct stat st;

	fs->node_ops = node_ops;
	if (fstatat(root_fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	pthread_mutex_init(&fs->itable_lock, NULL);
	pthread_mutex_init(&fs->handles_lock, NULL);
	list_init(&fs->handles);
	pthread_mutex_init(&fs->idle_lock, NULL);
	list_init(&fs->idle);
	pthread_mutex_init(&fs->fdc_lock, NULL);
	list_init(&fs->fdc);
	pthread_cond_init(&fs->fdc_cond, NULL);
	/* No budget until ffs_fd_budget_init() knows the daemon's own descriptors. */
	atomic_init(&fs->fd_budget, LONG_MAX);
	atomic_init(&fs->fd_cache_max, FFS_FD_CACHE_MAX);
	atomic_init(&fs->nr_fds, 1);	/* the root's */
	atomic_init(&fs->path_fds, 1);
	fs->nbuckets = ITABLE_MIN_BUCKETS;
	fs->buckets = calloc(fs->nbuckets, sizeof(struct ffs_inode *));
	if (!fs->buckets)
		return -ENOMEM;
	atomic_init(&fs->prune_high, fs->cfg && fs->cfg->max_inodes ?
				      ffs_prune_high(fs->cfg->max_inodes) : SIZE_MAX);
	/* The root is never found again: it keeps its descriptor. */
	inode_init(fs, &fs->root, &st, root_fd, NULL);
	fs->root.nlookup = 2;	/* never forgotten */
	/* A one-file mount of a block device shows a regular file. */
	if (S_ISBLK(st.st_mode))
		fs->root.type = S_IFREG;
	return 0;
}

/* ---- descriptors: idle data descriptors ---- */

/* The most recently idle. Context: idle_lock held; @inode on no list. */
static void idle_add(struct ffs_data *fs, struct ffs_inode *inode)
{
	list_push_front(&fs->idle, &inode->idle_link);
	inode->idle = true;
	fs->idle_count++;
}

/* Context: idle_lock held; @inode is on the list. */
static void idle_del(struct ffs_data *fs, struct ffs_inode *inode)
{
	list_unlink(&inode->idle_link);
	inode->idle = false;
	fs->idle_count--;
}

/* Context: inode->lock held (or teardown). */
static void idle_leave(struct ffs_data *fs, struct ffs_inode *inode)
{
	if (!inode->idle)
		return;
	pthread_mutex_lock(&fs->idle_lock);
	idle_del(fs, inode);
	pthread_mutex_unlock(&fs->idle_lock);
}

/*
 * Put @inode on the idle list if its data descriptor may be closed when
 * descriptors run short: open, nobody has the file open, and no forget
 * is writing it back.
 * Context: inode->lock held.
 */
static void idle_enter(struct ffs_data *fs, struct ffs_inode *inode)
{
	if (inode->idle || inode->nopen || inode->forget_flushing || !inode->data ||
	    !wb_file_has_fd(inode->data))
		return;
	pthread_mutex_lock(&fs->idle_lock);
	idle_add(fs, inode);
	pthread_mutex_unlock(&fs->idle_lock);
}

void ffs_fd_uncharge(struct ffs_data *fs)
{
	atomic_fetch_sub(&fs->nr_fds, 1);
}

/*
 * Write back and sync the idle file @inode, whose lock is held, and close
 * its data descriptor (wb_file_fd_evict; why at the top of this file):
 * true when closed.  Its lock is held throughout, so an open of this file
 * waits for the writeback, as the forget of an inode does; nobody else
 * waits on it.
 */
static bool evict_dirty(struct ffs_data *fs, struct ffs_inode *inode)
{
	bool closed = !wb_file_fd_evict(inode->data);

	pthread_mutex_lock(&fs->idle_lock);
	if (!closed)
		idle_add(fs, inode);	/* failing: others first next time */
	pthread_mutex_unlock(&fs->idle_lock);
	return closed;
}

/*
 * Close one idle data descriptor: of the EVICT_SCAN least recently used
 * idle files, the oldest that is clean; if none is and @may_write, the
 * oldest dirty one after writing it back.  True when one was closed (and
 * uncharged).  Inode locks are only tried here: the caller may hold its
 * own.
 */
static bool idle_evict(struct ffs_data *fs, bool may_write)
{
	struct ffs_inode *inode, *dirty = NULL;
	struct list_node *node, *prev;
	bool closed = false;
	int seen = 0;

	pthread_mutex_lock(&fs->idle_lock);
	for (node = list_last(&fs->idle); node && seen < EVICT_SCAN; node = prev, seen++) {
		inode = list_entry(node, struct ffs_inode, idle_link);
		prev = list_prev(&fs->idle, node);
		if (pthread_mutex_trylock(&inode->lock))
			continue;
		if (!wb_file_fd_close(inode->data)) {
			idle_del(fs, inode);
			pthread_mutex_unlock(&inode->lock);
			closed = true;
			break;
		}
		if (dirty || !may_write) {
			pthread_mutex_unlock(&inode->lock);
			continue;
		}
		dirty = inode;	/* keeps its lock */
	}
	if (!closed && dirty)
		idle_del(fs, dirty);
	pthread_mutex_unlock(&fs->idle_lock);
	if (dirty) {
		if (!closed)
			closed = evict_dirty(fs, dirty);
		pthread_mutex_unlock(&dirty->lock);
	}
	if (closed) {
		ffs_fd_uncharge(fs);
		atomic_fetch_add(&fs->fd_idle_closed, 1);
	}
	return closed;
}

/* ---- descriptors: the cache of O_PATH descriptors ---- */

/*
 * The most recently used.
 * Context: fdc_lock held; @inode has its fd, no pin and no fd_keep.
 */
static void fdc_add(struct ffs_data *fs, struct ffs_inode *inode)
{
	list_push_front(&fs->fdc, &inode->fdc_link);
	fs->fdc_count++;
}

/* Context: fdc_lock held. */
static void fdc_del(struct ffs_data *fs, struct ffs_inode *inode)
{
	if (!list_linked(&inode->fdc_link))
		return;
	list_unlink(&inode->fdc_link);
	fs->fdc_count--;
}

/*
 * Take the least recently used cached descriptor off its inode: the
 * descriptor to close (after dropping the lock), or -1 when none is cached.
 * Context: fdc_lock held.
 */
static int fdc_pop(struct ffs_data *fs)
{
	struct list_node *node = list_last(&fs->fdc);
	struct ffs_inode *inode;
	int fd;

	if (!node)
		return -1;
	inode = list_entry(node, struct ffs_inode, fdc_link);
	fdc_del(fs, inode);
	fd = inode->fd;
	inode->fd = -1;
	return fd;
}

void ffs_fd_uncharge_path(struct ffs_data *fs)
{
	ffs_fd_uncharge(fs);
	atomic_fetch_sub(&fs->path_fds, 1);
}

void ffs_fd_close_path(struct ffs_data *fs, int fd)
{
	close(fd);
	ffs_fd_uncharge_path(fs);
}

/* Close the least recently used cached O_PATH descriptor: true if there was one. */
static bool path_evict(struct ffs_data *fs)
{
	int fd;

	pthread_mutex_lock(&fs->fdc_lock);
	fd = fdc_pop(fs);
	pthread_mutex_unlock(&fs->fdc_lock);
	if (fd < 0)
		return false;
	ffs_fd_close_path(fs, fd);
	return true;
}

/* Close one cached or idle descriptor (see idle_evict): true if one was. */
static bool fd_evict(struct ffs_data *fs, bool may_write)
{
	return path_evict(fs) || idle_evict(fs, may_write);
}

/* Descriptors open in the daemon now (-1 if /proc cannot tell). */
static long count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	long n = -1;	/* the listing's own */

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/*
 * The budget from RLIMIT_NOFILE as it is now: prlimit(1) may lower it
 * while the daemon runs.  One system call, made only where a descriptor
 * is about to be opened anyway.
 */
static void fd_budget_update(struct ffs_data *fs)
{
	long limit = LONG_MAX / 4, reserve = fs->fd_reserve, budget, cache;
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < (rlim_t)limit)
		limit = (long)rl.rlim_cur;
	if (reserve > limit / 4)
		reserve = limit / 4;
	budget = limit - fs->fd_base - ffs_uring_fds() - reserve;
	cache = budget / 4 < FFS_FD_CACHE_MAX ? budget / 4 : FFS_FD_CACHE_MAX;
	atomic_store(&fs->fd_budget, budget);
	atomic_store(&fs->fd_cache_max, cache > 1 ? cache : 1);
}

void ffs_fd_budget_init(struct ffs_data *fs)
{
	const struct ffs_config *cfg = fs->cfg;
	long open = count_open_fds(), threads = FUSE_DEFAULT_MAX_THREADS;

	if (cfg->singlethread)
		threads = 1;
	else if (cfg->max_threads != UINT_MAX)
		threads = cfg->max_threads;
	threads += cfg->wb.flushers;
	fs->fd_base = open > atomic_load(&fs->nr_fds) ? open - atomic_load(&fs->nr_fds) : 0;
	fs->fd_reserve = FD_RESERVE_MIN + FD_RESERVE_PER_THREAD * threads;
	fd_budget_update(fs);
}

/* Count of the cached and idle descriptors and the open handles, once. */
static void log_refusal(struct ffs_data *fs)
{
	long cached, idle;

	if (atomic_exchange(&fs->fd_refusal_logged, true))
		return;
	pthread_mutex_lock(&fs->fdc_lock);
	cached = fs->fdc_count;
	pthread_mutex_unlock(&fs->fdc_lock);
	pthread_mutex_lock(&fs->idle_lock);
	idle = fs->idle_count;
	pthread_mutex_unlock(&fs->idle_lock);
	fuse_log(FUSE_LOG_NOTICE,
		 "out of descriptors for open files and directories: %ld held of %ld "
		 "(RLIMIT_NOFILE less %ld the daemon had and a reserve), %ld of them "
		 "O_PATH, %ld cached, %ld idle, none of those left to close; opens "
		 "fail with ENFILE until some are closed (logged once, counted in "
		 "fds_refused)\n",
		 atomic_load(&fs->nr_fds), atomic_load(&fs->fd_budget), fs->fd_base,
		 atomic_load(&fs->path_fds), cached, idle);
}

int ffs_fd_charge(struct ffs_data *fs)
{
	fd_budget_update(fs);
	for (;;) {
		if (atomic_fetch_add(&fs->nr_fds, 1) < atomic_load(&fs->fd_budget))
			return 0;
		atomic_fetch_sub(&fs->nr_fds, 1);
		if (!fd_evict(fs, true)) {
			atomic_fetch_add(&fs->fd_refused, 1);
			log_refusal(fs);
			return -ENFILE;
		}
	}
}

void ffs_fd_charge_path(struct ffs_data *fs)
{
	/*
	 * The limit is read again only at the budget, not at every lookup
	 * (a limit lowered meanwhile shows as EMFILE, and ffs_fd_retry()
	 * reads it then).
	 */
	if (atomic_fetch_add(&fs->nr_fds, 1) >= atomic_load(&fs->fd_budget))
		fd_budget_update(fs);
	atomic_fetch_add(&fs->path_fds, 1);
	/* Never waits for a writeback: a lookup must not. */
	while (atomic_load(&fs->nr_fds) > atomic_load(&fs->fd_budget) && fd_evict(fs, false))
		;
}

/*
 * For want of descriptors: descriptors were opened that the budget does
 * not know of, or the system ran out (ENFILE).  Close cached and idle
 * descriptors down to the budget, or one.
 */
bool ffs_fd_retry(struct ffs_data *fs, int err)
{
	bool freed = false;

	if (err != EMFILE && err != ENFILE)
		return false;
	fd_budget_update(fs);
	while (atomic_load(&fs->nr_fds) > atomic_load(&fs->fd_budget) && fd_evict(fs, true))
		freed = true;
	return freed || fd_evict(fs, true);
}

int ffs_fd_open(struct ffs_data *fs, int dirfd, const char *name, int flags, bool path)
{
	int ret = 0;

	if (path)
		ffs_fd_charge_path(fs);
	else
		ret = ffs_fd_charge(fs);
	if (ret)
		return ret;
	for (;;) {
		int fd = openat(dirfd, name, flags);

		if (fd >= 0)
			return fd;
		ret = -errno;
		if (!ffs_fd_retry(fs, -ret))
			break;
	}
	if (path)
		ffs_fd_uncharge_path(fs);
	else
		ffs_fd_uncharge(fs);
	/* The caller's process is not the one out of descriptors. */
	if (ret == -EMFILE || ret == -ENFILE) {
		atomic_fetch_add(&fs->fd_refused, 1);
		log_refusal(fs);
		ret = -ENFILE;
	}
	return ret;
}

void ffs_fd_close(struct ffs_data *fs, int fd)
{
	close(fd);
	ffs_fd_uncharge(fs);
}

/* ---- descriptors: pins and finding inodes again ---- */

/* Whether @inode's fd may change (a backing inode other than the root). */
static bool has_path(const struct ffs_data *fs, const struct ffs_inode *inode)
{
	return inode != &fs->root && inode->ops == fs->node_ops;
}

/* Context: fdc_lock held; @inode has its fd. */
static void pin_locked(struct ffs_data *fs, struct ffs_inode *inode)
{
	inode->fd_pins++;
	fdc_del(fs, inode);
	atomic_store_explicit(&inode->accessed, true, memory_order_relaxed);
}

/*
 * The path of names from the nearest ancestor of @inode that has a
 * descriptor down to @inode, into *@path (malloc'd), and that ancestor,
 * pinned, in *@base.  -ESTALE when @inode or an inode on the way has no
 * name (gone, or a cycle of parents made behind the daemon's back).  1
 * when @inode itself has its descriptor by now (another thread found it
 * meanwhile): then @inode is pinned, and nothing is to be opened.
 * Context: itable_lock held.
 */
static int refind_path(struct ffs_data *fs, struct ffs_inode *inode, char **path,
		       struct ffs_inode **base)
{
	struct ffs_inode *a;
	size_t len = 0, depth = 0, off;
	int ret = 0;
	char *p;

	pthread_mutex_lock(&fs->fdc_lock);
	if (inode->fd >= 0) {
		pin_locked(fs, inode);
		ret = 1;
		goto out_unlock;
	}
	for (a = inode; a != &fs->root && a->fd < 0; a = a->parent) {
		if (!a->name || a->unhashed || ++depth > REFIND_MAX_DEPTH) {
			ret = -ESTALE;
			goto out_unlock;
		}
		len += strlen(a->name) + 1;
	}
	p = malloc(len);
	if (!p) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	/* From the end: the inode's name last, without a trailing '/'. */
	off = len;
	for (a = inode; a != &fs->root && a->fd < 0; a = a->parent) {
		size_t n = strlen(a->name);

		off--;
		p[off] = off + 1 == len ? '\0' : '/';
		off -= n;
		memcpy(p + off, a->name, n);
	}
	if (a != &fs->root)
		pin_locked(fs, a);
	*base = a;
	*path = p;
out_unlock:
	pthread_mutex_unlock(&fs->fdc_lock);
	return ret;
}

/* openat2() beneath @dirfd through no symlink (an O_PATH of the last name). */
static int open_beneath(int dirfd, const char *path)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	return fd < 0 ? -errno : fd;
}

/*
 * Open @path beneath @dirfd, in pieces shorter than PATH_MAX where it is
 * longer (each piece's directory opened on the way, and closed): a
 * descriptor or -errno.
 */
static int open_path(int dirfd, char *path)
{
	int fd = dirfd, next;

	while (strlen(path) >= PATH_MAX) {
		char *cut = path + PATH_MAX - 1;

		while (cut > path && *cut != '/')
			cut--;
		*cut = '\0';
		/* A name longer than NAME_MAX is never recorded: cut > path. */
		next = cut > path ? open_beneath(fd, path) : -ENAMETOOLONG;
		*cut = '/';
		if (fd != dirfd)
			close(fd);
		if (next < 0)
			return next;
		fd = next;
		path = cut + 1;
	}
	next = open_beneath(fd, path);
	if (fd != dirfd)
		close(fd);
	return next;
}

/*
 * A descriptor of @inode, found again by its parent and name (charged):
 * 0, or 1 when @inode has its own by now and is pinned, or -errno.
 * Context: no fusefs lock held.
 */
static int refind(struct ffs_data *fs, struct ffs_inode *inode, int *out)
{
	struct ffs_inode *base;
	union fh_buf buf;
	int fd = -1, mnt_id, tries = 0, ret;
	char *path;

	do {
		pthread_mutex_lock(&fs->itable_lock);
		ret = refind_path(fs, inode, &path, &base);
		pthread_mutex_unlock(&fs->itable_lock);
		if (ret)
			break;
		ffs_fd_charge_path(fs);
		do {
			fd = open_path(base->fd, path);
		} while ((fd == -EMFILE || fd == -ENFILE) && ffs_fd_retry(fs, -fd));
		free(path);
		if (base != &fs->root)
			ffs_inode_unpin(fs, base);
		ret = fd < 0 ? fd : 0;
		if (fd < 0)
			ffs_fd_uncharge_path(fs);
	} while (ret == -EAGAIN && ++tries < REFIND_TRIES);
	if (!ret) {
		ret = fh_read(fd, &buf, &mnt_id);
		if (!ret && !fh_matches(inode->fh, &buf, mnt_id))
			ret = -ESTALE;	/* another inode under that name now */
		if (ret)
			ffs_fd_close_path(fs, fd);
	}
	/* The path no longer leads to it. */
	if (ret == -ENOENT || ret == -ENOTDIR || ret == -ELOOP || ret == -EXDEV ||
	    ret == -EAGAIN)
		ret = -ESTALE;
	if (ret == -ESTALE)
		atomic_fetch_add(&fs->inode_stale, 1);
	if (ret)
		return ret;
	atomic_fetch_add(&fs->inode_refinds, 1);
	*out = fd;
	return 0;
}

int ffs_inode_pin(struct ffs_data *fs, struct ffs_inode *inode)
{
	int fd, ret;

	if (!has_path(fs, inode))
		return 0;
	pthread_mutex_lock(&fs->fdc_lock);
	if (inode->fd >= 0) {
		pin_locked(fs, inode);
		pthread_mutex_unlock(&fs->fdc_lock);
		return 0;
	}
	pthread_mutex_unlock(&fs->fdc_lock);
	ret = refind(fs, inode, &fd);
	if (ret)
		return ret > 0 ? 0 : ret;	/* 1: pinned with its own meanwhile */
	pthread_mutex_lock(&fs->fdc_lock);
	if (inode->fd < 0) {
		inode->fd = fd;
		fd = -1;
	}
	pin_locked(fs, inode);
	pthread_mutex_unlock(&fs->fdc_lock);
	if (fd >= 0)
		ffs_fd_close_path(fs, fd);	/* found by another thread meanwhile */
	return 0;
}

void ffs_inode_unpin(struct ffs_data *fs, struct ffs_inode *inode)
{
	int fd = -1;

	if (!has_path(fs, inode))
		return;
	pthread_mutex_lock(&fs->fdc_lock);
	if (--inode->fd_pins == 0) {
		if (inode->dying)
			pthread_cond_broadcast(&fs->fdc_cond);
		else if (!inode->fd_keep)
			fdc_add(fs, inode);
		if (fs->fdc_count > atomic_load(&fs->fd_cache_max))
			fd = fdc_pop(fs);
	}
	pthread_mutex_unlock(&fs->fdc_lock);
	if (fd >= 0)
		ffs_fd_close_path(fs, fd);
}

/* @inode, with its fd, gets one more pin (an open handle). */
static void pin_held(struct ffs_data *fs, struct ffs_inode *inode)
{
	if (!has_path(fs, inode))
		return;
	pthread_mutex_lock(&fs->fdc_lock);
	pin_locked(fs, inode);
	pthread_mutex_unlock(&fs->fdc_lock);
}

/* ---- the table ---- */

/*
 * Free @inode's data path (written back unless @discard): off the idle
 * list, and its descriptor uncharged once it is closed.  A wb_file whose
 * data cannot be written stays with writeback, descriptor and all.
 * Context: inode->lock held, or teardown.
 */
static void data_free(struct ffs_data *fs, struct ffs_inode *inode, bool discard)
{
	struct wb_file *data = inode->data;
	bool had_fd = wb_file_has_fd(data);

	idle_leave(fs, inode);
	inode->data = NULL;
	if (discard)
		wb_file_discard(data);
	else if (wb_file_free(data))
		return;
	if (had_fd)
		ffs_fd_uncharge(fs);
}

/*
 * Writes back and drops the cached data (errors are reported by
 * writeback), waits for the requests that still pin the inode (their
 * handlers have replied; nothing new can pin it), closes its descriptor.
 * Context: the inode is out of the table; no fusefs lock held.
 */
static void inode_free(struct ffs_data *fs, struct ffs_inode *inode)
{
	int fd;

	if (inode->data)
		data_free(fs, inode, false);
	pthread_mutex_lock(&fs->fdc_lock);
	inode->dying = true;
	while (inode->fd_pins)
		pthread_cond_wait(&fs->fdc_cond, &fs->fdc_lock);
	fdc_del(fs, inode);
	fd = inode->fd;
	inode->fd = -1;
	pthread_mutex_unlock(&fs->fdc_lock);
	if (fd >= 0)
		ffs_fd_close_path(fs, fd);
	pthread_mutex_destroy(&inode->lock);
	free(inode->name);
	free(inode->fh);
	free(inode);
}

/* Free a list of inodes (linked by hnext) taken out of the table. */
static void inodes_free(struct ffs_data *fs, struct ffs_inode *list)
{
	while (list) {
		struct ffs_inode *next = list->hnext;

		inode_free(fs, list);
		list = next;
	}
}

void ffs_itable_destroy(struct ffs_data *fs)
{
	ffs_handles_free_all(fs);
	for (size_t i = 0; i < fs->nbuckets; i++) {
		inodes_free(fs, fs->buckets[i]);
		fs->buckets[i] = NULL;
	}
	inodes_free(fs, fs->unhashed);
	fs->unhashed = NULL;
	free(fs->buckets);
	fs->buckets = NULL;
	if (fs->root.data)
		data_free(fs, &fs->root, false);
	ffs_fd_close(fs, fs->root.fd);
	pthread_mutex_destroy(&fs->root.lock);
	pthread_mutex_destroy(&fs->itable_lock);
	pthread_mutex_destroy(&fs->handles_lock);
	pthread_mutex_destroy(&fs->idle_lock);
	pthread_mutex_destroy(&fs->fdc_lock);
	pthread_cond_destroy(&fs->fdc_cond);
}

/* Context: itable_lock held. Doubling failure only costs speed. */
static void itable_grow(struct ffs_data *fs)
{
	size_t old_n = fs->nbuckets;
	struct ffs_inode **old = fs->buckets;
	struct ffs_inode **nb = calloc(old_n * 2, sizeof(struct ffs_inode *));

	if (!nb)
		return;
	fs->buckets = nb;
	fs->nbuckets = old_n * 2;
	for (size_t i = 0; i < old_n; i++) {
		struct ffs_inode *inode = old[i];

		while (inode) {
			struct ffs_inode *next = inode->hnext;
			size_t h = inode_hash(fs, inode->src_ino, inode->src_dev);

			inode->hnext = nb[h];
			nb[h] = inode;
			inode = next;
		}
	}
	free(old);
}

/* Context: itable_lock held. */
static struct ffs_inode *itable_find(struct ffs_data *fs, ino_t ino, dev_t dev)
{
	struct ffs_inode *inode;

	if (fs->root.src_ino == ino && fs->root.src_dev == dev)
		return &fs->root;
	for (inode = fs->buckets[inode_hash(fs, ino, dev)]; inode;
	     inode = inode->hnext) {
		if (inode->src_ino == ino && inode->src_dev == dev)
			return inode;
	}
	return NULL;
}

/* Unlink @inode from the chain at @pp (a bucket or the unhashed list). */
static void chain_remove(struct ffs_inode **pp, struct ffs_inode *inode)
{
	while (*pp != inode)
		pp = &(*pp)->hnext;
	*pp = inode->hnext;
	inode->hnext = NULL;
}

/* Context: itable_lock held; @inode is in the table. */
static void itable_remove(struct ffs_data *fs, struct ffs_inode *inode)
{
	if (inode->unhashed)
		chain_remove(&fs->unhashed, inode);
	else
		chain_remove(&fs->buckets[inode_hash(fs, inode->src_ino, inode->src_dev)], inode);
	fs->ninodes--;
	atomic_fetch_add_explicit(&fs->inodes_forgotten, 1, memory_order_relaxed);
}

/*
 * A directory that only its children's names kept (nobody looks it up,
 * it has no data) and whose last child went: out of the table, onto
 * *@dead (by hnext) to be freed once the lock is dropped.
 */
static void parent_put(struct ffs_data *fs, struct ffs_inode *dir, struct ffs_inode **dead);

/* @inode forgets where it was.  Context: itable_lock held. */
static void name_drop(struct ffs_data *fs, struct ffs_inode *inode, struct ffs_inode **dead)
{
	struct ffs_inode *dir = inode->parent;

	free(inode->name);
	inode->name = NULL;
	inode->parent = NULL;
	if (dir)
		parent_put(fs, dir, dead);
}

static void parent_put(struct ffs_data *fs, struct ffs_inode *dir, struct ffs_inode **dead)
{
	if (--dir->nchild || dir == &fs->root || dir->nlookup || dir->forgetting)
		return;
	itable_remove(fs, dir);
	name_drop(fs, dir, dead);
	dir->hnext = *dead;
	*dead = dir;
}

/* Whether @inode was recorded as @name in @dir.  Context: itable_lock held. */
static bool named(const struct ffs_inode *inode, const struct ffs_inode *dir, const char *name)
{
	return inode && inode->parent == dir && inode->name && strcmp(inode->name, name) == 0;
}

/* Whether @dir is @inode or below it (a cycle if @inode went into @dir). */
static bool is_below(const struct ffs_inode *dir, const struct ffs_inode *inode)
{
	size_t depth = 0;

	for (; dir && depth < REFIND_MAX_DEPTH; dir = dir->parent, depth++) {
		if (dir == inode)
			return true;
	}
	return dir != NULL;	/* too deep to tell: as if it were */
}

/*
 * Record that @inode is at @name (malloc'd, consumed) in @dir.
 * Context: itable_lock held.
 */
static void name_set(struct ffs_data *fs, struct ffs_inode *inode, struct ffs_inode *dir,
		     char *name, struct ffs_inode **dead)
{
	if (!name)
		return;
	if (named(inode, dir, name) || (inode->type == S_IFDIR && is_below(dir, inode))) {
		free(name);
		return;
	}
	dir->nchild++;	/* first: @dir may be the old parent */
	name_drop(fs, inode, dead);
	inode->parent = dir;
	inode->name = name;
}

/* A copy of @name to record, NULL for "." and ".." (and when out of memory). */
static char *name_dup(const char *name)
{
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return NULL;
	return strdup(name);
}

/*
 * @inode's backing inode is gone: a lookup found a new one under its
 * number.  It leaves the hash for the list of unhashed inodes, and its name.
 * Context: itable_lock held.
 */
static void itable_unhash(struct ffs_data *fs, struct ffs_inode *inode, struct ffs_inode **dead)
{
	chain_remove(&fs->buckets[inode_hash(fs, inode->src_ino, inode->src_dev)], inode);
	inode->unhashed = true;
	inode->hnext = fs->unhashed;
	fs->unhashed = inode;
	name_drop(fs, inode, dead);
}

/*
 * Give @inode the descriptor *@fd, when there is one, if it has none (else
 * *@fd stays for the caller to close).  A name regained ends fd_keep.  A
 * descriptor nobody pins goes on the cache; *@evicted: one the cache let
 * go, to close, or -1.  Context: itable_lock held.
 */
static void fd_give(struct ffs_data *fs, struct ffs_inode *inode, int *fd, int *evicted)
{
	*evicted = -1;
	if (!has_path(fs, inode))
		return;
	pthread_mutex_lock(&fs->fdc_lock);
	if (*fd >= 0 && inode->fd < 0) {
		inode->fd = *fd;
		*fd = -1;
	}
	if (inode->fd_keep && inode->fh && inode->name)
		inode->fd_keep = false;
	if (inode->fd >= 0 && !inode->fd_pins && !inode->fd_keep &&
	    !list_linked(&inode->fdc_link)) {
		fdc_add(fs, inode);
		if (fs->fdc_count > atomic_load(&fs->fd_cache_max))
			*evicted = fdc_pop(fs);
	}
	pthread_mutex_unlock(&fs->fdc_lock);
}

int ffs_inode_get(struct ffs_data *fs, const struct stat *st, struct ffs_fh *fh,
		  struct ffs_inode *dir, const char *name, int fd, struct ffs_inode **out)
{
	struct ffs_inode *inode, *dead = NULL, *fresh = calloc(1, sizeof(*fresh));
	char *recorded = name_dup(name);
	int evicted = -1;

	pthread_mutex_lock(&fs->itable_lock);
	inode = itable_find(fs, st->st_ino, st->st_dev);
	if (inode && inode != &fs->root && !fh_same(inode->fh, fh)) {
		itable_unhash(fs, inode, &dead);
		inode = NULL;
	}
	if (inode) {
		inode->nlookup++;
		if (inode->forgetting)
			inode->relooked = true;	/* may be opened and written */
		if (inode != &fs->root)
			name_set(fs, inode, dir, recorded, &dead);
		else
			free(recorded);
		recorded = NULL;
	} else if (fresh) {
		size_t h;

		inode = fresh;
		fresh = NULL;
		inode_init(fs, inode, st, -1, fh);
		fh = NULL;
		name_set(fs, inode, dir, recorded, &dead);
		recorded = NULL;
		if (fs->ninodes >= fs->nbuckets)
			itable_grow(fs);
		h = inode_hash(fs, st->st_ino, st->st_dev);
		inode->hnext = fs->buckets[h];
		fs->buckets[h] = inode;
		fs->ninodes++;
		if (fs->ninodes > atomic_load_explicit(&fs->prune_high, memory_order_relaxed))
			ffs_prune_wake(fs);
	}
	if (inode) {
		atomic_store_explicit(&inode->accessed, true, memory_order_relaxed);
		fd_give(fs, inode, &fd, &evicted);
	}
	pthread_mutex_unlock(&fs->itable_lock);
	free(fresh);
	free(fh);
	free(recorded);
	if (fd >= 0)
		ffs_fd_close_path(fs, fd);
	if (evicted >= 0)
		ffs_fd_close_path(fs, evicted);
	inodes_free(fs, dead);
	if (!inode)
		return -ENOMEM;
	*out = inode;
	return 0;
}

size_t ffs_itable_count(struct ffs_data *fs)
{
	size_t n;

	pthread_mutex_lock(&fs->itable_lock);
	n = fs->ninodes;
	pthread_mutex_unlock(&fs->itable_lock);
	return n;
}

/*
 * Whether the kernel may be asked to forget @inode now (see
 * ffs_itable_cold); clears its accessed bit, as a clock does.
 * Context: itable_lock and fdc_lock held.
 */
static bool cold(struct ffs_data *fs, struct ffs_inode *inode)
{
	bool used = atomic_exchange_explicit(&inode->accessed, false, memory_order_relaxed);

	return !used && inode->nlookup && !inode->forgetting && !inode->nchild &&
	       !inode->fd_pins && inode->pruned_pass != fs->clock_pass;
}

size_t ffs_itable_cold(struct ffs_data *fs, struct ffs_cold *out, size_t n, size_t *budget)
{
	size_t found = 0;

	pthread_mutex_lock(&fs->itable_lock);
	pthread_mutex_lock(&fs->fdc_lock);
	while (found < n && *budget) {
		if (fs->clock_hand >= fs->nbuckets) {
			fs->clock_hand = 0;
			fs->clock_pass++;
		}
		for (struct ffs_inode *inode = fs->buckets[fs->clock_hand]; inode && found < n;
		     inode = inode->hnext) {
			struct ffs_cold *c = &out[found];

			if (*budget)
				(*budget)--;
			if (!cold(fs, inode))
				continue;
			inode->pruned_pass = fs->clock_pass;
			c->nodeid = (uintptr_t)inode;
			c->parent = inode->parent == &fs->root ? FUSE_ROOT_ID
							       : (uintptr_t)inode->parent;
			snprintf(c->name, sizeof(c->name), "%s", inode->name ? inode->name : "");
			found++;
		}
		/* A bucket cut short is looked at again: what it gave is marked. */
		if (found < n)
			fs->clock_hand++;
		if (*budget)
			(*budget)--;	/* empty buckets count too */
	}
	pthread_mutex_unlock(&fs->fdc_lock);
	pthread_mutex_unlock(&fs->itable_lock);
	return found;
}

struct ffs_inode *ffs_inode_at(struct ffs_data *fs, struct ffs_inode *dir, const char *name)
{
	struct ffs_inode *inode;
	struct stat st;

	if (fstatat(dir->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return NULL;
	pthread_mutex_lock(&fs->itable_lock);
	inode = itable_find(fs, st.st_ino, st.st_dev);
	if (inode && (inode == &fs->root || !named(inode, dir, name) || !inode->nlookup))
		inode = NULL;
	pthread_mutex_unlock(&fs->itable_lock);
	/* The kernel holds it (it is removing its name): it stays. */
	if (inode && ffs_inode_pin(fs, inode))
		inode = NULL;
	return inode;
}

void ffs_inode_unnamed(struct ffs_data *fs, struct ffs_inode *inode, struct ffs_inode *dir,
		       const char *name)
{
	struct ffs_inode *dead = NULL;

	pthread_mutex_lock(&fs->itable_lock);
	if (named(inode, dir, name)) {
		name_drop(fs, inode, &dead);
		pthread_mutex_lock(&fs->fdc_lock);
		inode->fd_keep = true;	/* pinned: it has its fd */
		pthread_mutex_unlock(&fs->fdc_lock);
	}
	pthread_mutex_unlock(&fs->itable_lock);
	inodes_free(fs, dead);
}

void ffs_inode_renamed(struct ffs_data *fs, struct ffs_inode *dir, const char *name,
		       struct ffs_inode *newdir, const char *newname, unsigned int flags,
		       struct ffs_inode *other)
{
	struct ffs_inode *moved = NULL, *dead = NULL;
	char *to_new = strdup(newname), *to_old = strdup(name);
	bool moved_here, other_there;
	struct stat st;

	if (fstatat(newdir->fd, newname, &st, AT_SYMLINK_NOFOLLOW) < 0)
		st.st_nlink = 0;	/* moved out of reach behind our back */
	pthread_mutex_lock(&fs->itable_lock);
	if (st.st_nlink)
		moved = itable_find(fs, st.st_ino, st.st_dev);
	if (moved == &fs->root || moved == other)
		moved = NULL;
	moved_here = named(moved, dir, name);
	other_there = (flags & RENAME_EXCHANGE) && named(other, newdir, newname);
	if (moved_here) {
		name_set(fs, moved, newdir, to_new, &dead);
		to_new = NULL;
	}
	if (other_there) {
		name_set(fs, other, dir, to_old, &dead);
		to_old = NULL;
	}
	pthread_mutex_unlock(&fs->itable_lock);
	free(to_new);
	free(to_old);
	inodes_free(fs, dead);
}

/*
 * Whether the backing file of @inode has no name left.  Its data can then
 * never be read again once nobody has it open, so the kernel's eviction
 * drops such pages unwritten, and so do we.  A failed fstat says no: the
 * data is written as usual.  Context: no fusefs lock held.
 */
static bool backing_unlinked(struct ffs_data *fs, struct ffs_inode *inode)
{
	struct stat st;
	bool unlinked;

	if (ffs_inode_pin(fs, inode))
		return false;
	unlinked = fstat(inode->fd, &st) == 0 && st.st_nlink == 0;
	ffs_inode_unpin(fs, inode);
	return unlinked;
}

/*
 * Make a forgotten inode's data safe to drop: write it back and sync it,
 * or, for a file without names or open handles, let *@discard say that it
 * may be dropped unwritten.  0 when the inode may go, -errno while its data
 * cannot be written.
 * Context: the forget that marked @inode forgetting, no lock held; may block.
 */
static int forget_writeback(struct ffs_data *fs, struct ffs_inode *inode, bool *discard)
{
	struct wb_file *data;
	unsigned int nopen;
	int ret = 0;

	/*
	 * A lookup in the window may open the file, setting inode->data.
	 * Off the idle list: its descriptor must not be closed under the
	 * writeback below (forget_keep() puts it back if the inode stays).
	 */
	pthread_mutex_lock(&inode->lock);
	data = inode->data;
	nopen = inode->nopen;
	inode->forget_flushing = true;
	idle_leave(fs, inode);
	pthread_mutex_unlock(&inode->lock);
	*discard = data && !nopen && backing_unlinked(fs, inode);
	if (data && !*discard)
		ret = wb_file_flush(data);
	pthread_mutex_lock(&inode->lock);
	inode->forget_flushing = false;
	pthread_mutex_unlock(&inode->lock);
	return ret;
}

/*
 * A forgotten inode stays, known again or with data that could not be
 * written: back on the idle list if nobody has it open, as
 * forget_writeback() took it off.
 * Context: itable_lock held.
 */
static void forget_keep(struct ffs_data *fs, struct ffs_inode *inode)
{
	pthread_mutex_lock(&inode->lock);
	idle_enter(fs, inode);
	pthread_mutex_unlock(&inode->lock);
}

/*
 * Drop the cache of a forgotten inode whose data is written back (or
 * unreachable, with @discard).  The inode's lock is held throughout, so
 * that an open by a lookup made meanwhile waits and then makes a new
 * cache: one file never has two.  Nothing is dirty, so this does no
 * backing I/O (at most a time stamp) and the lock is held briefly.
 * Context: itable_lock held on entry and on return, dropped in between.
 */
static void forget_drop_data(struct ffs_data *fs, struct ffs_inode *inode,
			     bool discard)
{
	pthread_mutex_lock(&inode->lock);
	pthread_mutex_unlock(&fs->itable_lock);
	if (inode->data)
		data_free(fs, inode, discard);
	pthread_mutex_unlock(&inode->lock);
	pthread_mutex_lock(&fs->itable_lock);
}

void ffs_inode_forget(struct ffs_data *fs, struct ffs_inode *inode,
		      uint64_t n)
{
	struct ffs_inode *dead = NULL;
	bool discard = false;
	int ret;

	if (inode == &fs->root)
		return;
	pthread_mutex_lock(&fs->itable_lock);
	if (n > inode->nlookup) {
		fprintf(stderr, "foliofs: error: forget of %llu lookups, only %llu known\n",
			(unsigned long long)n, (unsigned long long)inode->nlookup);
		n = inode->nlookup;
	}
	inode->nlookup -= n;
	/* A forget already writing it back sees this and finishes for us. */
	if (inode->nlookup || inode->forgetting)
		goto out_unlock;
	/*
	 * The cache goes with the inode once its data is on the backing
	 * file.  While that fails, the inode stays in the table with its
	 * cache, so that a later lookup of the same backing inode finds both
	 * (a second cache of one file would let old data overwrite new); the
	 * flushers keep retrying, and unmount reports what never made it.
	 * Nobody has it open: the kernel forgets only closed inodes.  A
	 * lookup during the writeback may have opened and written it, so it
	 * is written again until a round passes without one.
	 */
	inode->forgetting = true;
	do {
		inode->relooked = false;
		pthread_mutex_unlock(&fs->itable_lock);
		ret = forget_writeback(fs, inode, &discard);
		pthread_mutex_lock(&fs->itable_lock);
		if (!inode->nlookup && !inode->relooked && !ret)
			forget_drop_data(fs, inode, discard);
	} while (!inode->nlookup && inode->relooked);
	inode->forgetting = false;
	if (inode->nlookup || ret)
		forget_keep(fs, inode);
	if (inode->nlookup)
		goto out_unlock;	/* known again: its own forget comes later */
	if (ret) {
		atomic_fetch_add(&fs->kept_inodes, 1);
		goto out_unlock;
	}
	/* The path to inodes below it: stays until they go (parent_put). */
	if (inode->nchild)
		goto out_unlock;
	/* No cache left, unknown to the kernel, nothing below: nothing can reach it. */
	itable_remove(fs, inode);
	name_drop(fs, inode, &dead);
	pthread_mutex_unlock(&fs->itable_lock);
	inode_free(fs, inode);
	inodes_free(fs, dead);
	return;

out_unlock:
	pthread_mutex_unlock(&fs->itable_lock);
}

bool ffs_direct_refused(const struct ffs_data *fs, int flags, int err)
{
	return err == EINVAL && (flags & O_DIRECT) && fs->cfg->backing_direct == FFS_DIRECT_AUTO;
}

/*
 * Open the backing file behind @inode's O_PATH descriptor (charged to the
 * budget): the first time, and again after its descriptor was closed.
 */
static int open_data_fd(struct ffs_data *fs, struct ffs_inode *inode, int need, int *access)
{
	static const struct {
		int flags;
		int access;
	} modes[] = {
		{ O_RDWR, WB_RDWR }, { O_RDONLY, WB_READ }, { O_WRONLY, WB_WRITE },
	};
	int extra_flags = fs->cfg->wb.backing_direct ? O_DIRECT : 0;
	struct ffs_procpath p;
	int err = -EACCES;

	if (inode->type != S_IFREG)
		return -EACCES;
	ffs_procpath(&p, inode->fd);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		int fd;

		if ((modes[i].access & need) != need)
			continue;
		/* O_NONBLOCK: never hang on a FIFO; no effect on regular files. */
		fd = ffs_fd_open(fs, AT_FDCWD, p.path,
				 modes[i].flags | O_CLOEXEC | O_NONBLOCK | extra_flags, false);
		if (fd < 0 && ffs_direct_refused(fs, extra_flags, -fd)) {
			extra_flags = 0;
			fd = ffs_fd_open(fs, AT_FDCWD, p.path, modes[i].flags | O_CLOEXEC | O_NONBLOCK,
					 false);
		}
		if (fd >= 0) {
			*access = modes[i].access;
			return fd;
		}
		err = fd;
		if (err != -EACCES && err != -EPERM && err != -EROFS &&
		    err != -ETXTBSY)
			break;
	}
	return err;
}

/*
 * The largest size the file open as @fd can take.  FUSE lets applications
 * write anywhere below 2^63, but the backing file system stops earlier
 * (ext4 with 4 KiB blocks at 16 TiB - 4 KiB); data cached past that could
 * never be written back and would stay dirty for ever.  lseek(SEEK_SET)
 * fails with EINVAL exactly past that limit (vfs_setpos()), so a binary
 * search finds it; the last limit found is tried first, which costs two
 * calls when the files share a file system.  A one-file mount of a block
 * device has its own end (ENOSPC past it, in writeback) and no probe.
 */
static off_t probe_max_size(struct ffs_data *fs, struct ffs_inode *inode, int fd)
{
	static _Atomic off_t last_found;
	off_t hint = atomic_load(&last_found), lo = 0, hi = INT64_MAX;

	if (inode == &fs->root && fs->backing_type == S_IFBLK)
		return INT64_MAX;
	if (lseek(fd, INT64_MAX, SEEK_SET) >= 0 || errno != EINVAL)
		return INT64_MAX;
	if (hint && lseek(fd, hint, SEEK_SET) == hint) {
		if (lseek(fd, hint + 1, SEEK_SET) < 0)
			return hint;
		lo = hint + 1;
	}
	/* lseek(lo) succeeds, lseek(hi) fails. */
	while (hi - lo > 1) {
		off_t mid = lo + (hi - lo) / 2;

		if (lseek(fd, mid, SEEK_SET) == mid)
			lo = mid;
		else
			hi = mid;
	}
	atomic_store(&last_found, lo);
	return lo;
}

int ffs_data_check_size(const struct ffs_inode *inode, off_t off, size_t *len)
{
	if (off >= inode->max_size)
		return -EFBIG;
	if (*len > (uint64_t)(inode->max_size - off))
		*len = (size_t)(inode->max_size - off);
	return 0;
}

int ffs_data_get(struct ffs_data *fs, struct ffs_inode *inode, int need, int fd,
		 int fd_access, struct wb_file **out)
{
	bool has_fd;
	int ret = 0;

	pthread_mutex_lock(&inode->lock);
	has_fd = inode->data && wb_file_has_fd(inode->data);
	if (has_fd) {
		int have = wb_file_access(inode->data);

		if ((have & need) == need) {
			if (fd >= 0)
				ffs_fd_close(fs, fd);
			goto out_ref;
		}
		need |= have;	/* an upgrade must not lose what others use */
	}
	if (fd < 0 || (fd_access & need) != need) {
		if (fd >= 0)
			ffs_fd_close(fs, fd);
		fd = open_data_fd(fs, inode, need, &fd_access);
		if (fd < 0) {
			ret = fd;
			goto out_unlock;
		}
	}
	if (!inode->max_size)
		inode->max_size = probe_max_size(fs, inode, fd);
	if (has_fd) {
		ret = wb_file_upgrade(inode->data, fd, fd_access);
		ffs_fd_uncharge(fs);	/* @fd is closed, success or not */
	} else if (inode->data) {
		ret = wb_file_fd_reopen(inode->data, fd, fd_access);
		if (!ret)
			atomic_fetch_add(&fs->fd_reopened, 1);
	} else {
		ret = wb_file_alloc(fs->wb, fd, fd_access, &inode->data);
	}
	if (ret) {
		if (!has_fd)
			ffs_fd_uncharge(fs);	/* consumed on failure */
		goto out_unlock;
	}
out_ref:
	inode->nopen++;
	pin_held(fs, inode);	/* the handle's: its fd stays while it is open */
	idle_leave(fs, inode);
	*out = inode->data;
out_unlock:
	pthread_mutex_unlock(&inode->lock);
	return ret;
}

void ffs_data_put(struct ffs_data *fs, struct ffs_inode *inode)
{
	bool over;

	pthread_mutex_lock(&inode->lock);
	inode->nopen--;
	idle_enter(fs, inode);
	pthread_mutex_unlock(&inode->lock);
	ffs_inode_unpin(fs, inode);
	/* Past the cache's size: a clean one goes (a dirty one may stay). */
	pthread_mutex_lock(&fs->idle_lock);
	over = fs->idle_count > atomic_load(&fs->fd_cache_max);
	pthread_mutex_unlock(&fs->idle_lock);
	if (over)
		idle_evict(fs, false);
}

bool ffs_data_attr_sample(struct ffs_inode *inode, struct wb_file_attr *attr)
{
	bool cached;

	if (inode->type != S_IFREG)
		return false;
	pthread_mutex_lock(&inode->lock);
	cached = inode->data;
	if (cached)
		wb_file_attr_sample(inode->data, attr);
	pthread_mutex_unlock(&inode->lock);
	return cached;
}

void ffs_data_mtime_set(struct ffs_inode *inode, const struct timespec *mtime)
{
	pthread_mutex_lock(&inode->lock);
	/*
	 * Without its descriptor the file is clean: no writeback will move
	 * the time just set on the backing file, and none could stamp it.
	 */
	if (inode->data && wb_file_has_fd(inode->data))
		wb_file_mtime_set(inode->data, mtime);
	pthread_mutex_unlock(&inode->lock);
}
