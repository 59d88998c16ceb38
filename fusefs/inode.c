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
 * Descriptors: an inode holds its O_PATH descriptor for its whole life;
 * its data descriptor (in its wb_file) only while the file is open, or
 * holds data not yet durable, or descriptors are plentiful.  Files whose
 * last handle was released wait on the idle list, and when the budget
 * (see struct ffs_data) is used up the least recently used of them gives
 * its data descriptor back (wb_file_fd_close; a dirty one is written back
 * and synced first).  The next open takes one again through the O_PATH
 * descriptor, with O_DIRECT for backing_direct, as the first open did.
 * The cache and the errseq state stay with the wb_file meanwhile.  This
 * lets the kernel cache about as many files as RLIMIT_NOFILE, instead of
 * half as many.
 */
#include "fusefs.h"
#include "writeback.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <linux/fs.h>

#define ITABLE_MIN_BUCKETS 1024

/*
 * The descriptor reserve: a few for short-lived descriptors (a block
 * device's size, fusermount3 at unmount, syslog reconnecting), and two per
 * thread that may start later (a FUSE worker or flusher makes its io_uring
 * ring on its first writeback; with clone_fd a worker opens /dev/fuse).
 * At most a quarter of the limit, so that a small limit leaves files some.
 */
#define FD_RESERVE_MIN 32
#define FD_RESERVE_PER_THREAD 2
/* libfuse's max_threads when not given. */
#define FUSE_DEFAULT_MAX_THREADS 10
/*
 * Idle files looked at, oldest first, for one whose descriptor can simply
 * be closed, before the oldest dirty one is written back to free its own.
 */
#define EVICT_SCAN 32

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

static void inode_init(struct ffs_data *fs, struct ffs_inode *inode, const struct stat *st,
		       int fd)
{
	inode->ops = fs->node_ops;
	inode->fd = fd;
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
	h->prev = NULL;
	pthread_mutex_lock(&fs->handles_lock);
	h->next = fs->handles;
	if (h->next)
		h->next->prev = h;
	fs->handles = h;
	pthread_mutex_unlock(&fs->handles_lock);
}

void ffs_handle_release(struct ffs_data *fs, struct ffs_handle *h)
{
	pthread_mutex_lock(&fs->handles_lock);
	if (h->prev)
		h->prev->next = h->next;
	else
		fs->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&fs->handles_lock);
	h->free(fs, h);
}

void ffs_handles_free_all(struct ffs_data *fs)
{
	struct ffs_handle *h = fs->handles;

	fs->handles = NULL;
	while (h) {
		struct ffs_handle *next = h->next;

		h->free(fs, h);
		h = next;
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
	pthread_mutex_init(&fs->idle_lock, NULL);
	/* No budget until ffs_fd_budget_init() knows the daemon's own descriptors. */
	atomic_init(&fs->fd_budget, LONG_MAX);
	atomic_init(&fs->nr_fds, 1);	/* the root's */
	fs->nbuckets = ITABLE_MIN_BUCKETS;
	fs->buckets = calloc(fs->nbuckets, sizeof(struct ffs_inode *));
	if (!fs->buckets)
		return -ENOMEM;
	inode_init(fs, &fs->root, &st, root_fd);
	fs->root.nlookup = 2;	/* never forgotten */
	/* A one-file mount of a block device shows a regular file. */
	if (S_ISBLK(st.st_mode))
		fs->root.type = S_IFREG;
	return 0;
}

/* ---- descriptors ---- */

/* Context: idle_lock held. */
static void idle_add(struct ffs_data *fs, struct ffs_inode *inode)
{
	inode->idle = true;
	inode->idle_prev = NULL;
	inode->idle_next = fs->idle_head;
	if (fs->idle_head)
		fs->idle_head->idle_prev = inode;
	else
		fs->idle_tail = inode;
	fs->idle_head = inode;
}

/* Context: idle_lock held; @inode is on the list. */
static void idle_del(struct ffs_data *fs, struct ffs_inode *inode)
{
	if (inode->idle_prev)
		inode->idle_prev->idle_next = inode->idle_next;
	else
		fs->idle_head = inode->idle_next;
	if (inode->idle_next)
		inode->idle_next->idle_prev = inode->idle_prev;
	else
		fs->idle_tail = inode->idle_prev;
	inode->idle = false;
	inode->idle_prev = inode->idle_next = NULL;
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
 * its data descriptor: true when closed.  Its lock is held throughout, so
 * an open of this file waits for the writeback, as the forget of an inode
 * does; nobody else waits on it.
 */
static bool evict_dirty(struct ffs_data *fs, struct ffs_inode *inode)
{
	bool closed = !wb_file_flush(inode->data) && !wb_file_fd_close(inode->data);

	pthread_mutex_lock(&fs->idle_lock);
	if (!closed)
		idle_add(fs, inode);	/* failing: others first next time */
	pthread_mutex_unlock(&fs->idle_lock);
	return closed;
}

/*
 * Close one idle data descriptor: of the EVICT_SCAN least recently used
 * idle files, the oldest that is clean; if none is, the oldest dirty one
 * after writing it back.  True when one was closed (and uncharged).
 * Inode locks are only tried here: the caller may hold its own.
 */
static bool fd_evict(struct ffs_data *fs)
{
	struct ffs_inode *inode, *prev, *dirty = NULL;
	bool closed = false;
	int seen = 0;

	pthread_mutex_lock(&fs->idle_lock);
	for (inode = fs->idle_tail; inode && seen < EVICT_SCAN; inode = prev, seen++) {
		prev = inode->idle_prev;
		if (pthread_mutex_trylock(&inode->lock))
			continue;
		if (!wb_file_fd_close(inode->data)) {
			idle_del(fs, inode);
			pthread_mutex_unlock(&inode->lock);
			closed = true;
			break;
		}
		if (dirty) {
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
	long limit = LONG_MAX / 4, reserve = fs->fd_reserve;
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < (rlim_t)limit)
		limit = (long)rl.rlim_cur;
	if (reserve > limit / 4)
		reserve = limit / 4;
	atomic_store(&fs->fd_budget, limit - fs->fd_base - ffs_uring_fds() - reserve);
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

int ffs_fd_charge(struct ffs_data *fs)
{
	fd_budget_update(fs);
	for (;;) {
		if (atomic_fetch_add(&fs->nr_fds, 1) < atomic_load(&fs->fd_budget))
			return 0;
		atomic_fetch_sub(&fs->nr_fds, 1);
		if (!fd_evict(fs)) {
			atomic_fetch_add(&fs->fd_refused, 1);
			return -EMFILE;
		}
	}
}

/*
 * For want of descriptors: descriptors were opened that the budget does
 * not know of, or the system ran out (ENFILE).  Close idle data
 * descriptors down to the budget, or one.
 */
bool ffs_fd_retry(struct ffs_data *fs, int err)
{
	bool freed = false;

	if (err != EMFILE && err != ENFILE)
		return false;
	fd_budget_update(fs);
	while (atomic_load(&fs->nr_fds) > atomic_load(&fs->fd_budget) && fd_evict(fs))
		freed = true;
	return freed || fd_evict(fs);
}

int ffs_fd_open(struct ffs_data *fs, int dirfd, const char *name, int flags)
{
	int ret = ffs_fd_charge(fs);

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
	ffs_fd_uncharge(fs);
	if (ret == -EMFILE || ret == -ENFILE)
		atomic_fetch_add(&fs->fd_refused, 1);
	return ret;
}

void ffs_fd_close(struct ffs_data *fs, int fd)
{
	close(fd);
	ffs_fd_uncharge(fs);
}

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

/* Writes back and drops the cached data; errors are reported by writeback. */
static void inode_free(struct ffs_data *fs, struct ffs_inode *inode)
{
	if (inode->data)
		data_free(fs, inode, false);
	ffs_fd_close(fs, inode->fd);
	pthread_mutex_destroy(&inode->lock);
	free(inode);
}

void ffs_itable_destroy(struct ffs_data *fs)
{
	ffs_handles_free_all(fs);
	for (size_t i = 0; i < fs->nbuckets; i++) {
		struct ffs_inode *inode = fs->buckets[i];

		while (inode) {
			struct ffs_inode *next = inode->hnext;

			inode_free(fs, inode);
			inode = next;
		}
	}
	free(fs->buckets);
	fs->buckets = NULL;
	if (fs->root.data)
		data_free(fs, &fs->root, false);
	ffs_fd_close(fs, fs->root.fd);
	pthread_mutex_destroy(&fs->root.lock);
	pthread_mutex_destroy(&fs->itable_lock);
	pthread_mutex_destroy(&fs->handles_lock);
	pthread_mutex_destroy(&fs->idle_lock);
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

int ffs_inode_get(struct ffs_data *fs, const struct stat *st, int fd,
		  struct ffs_inode **out)
{
	struct ffs_inode *inode, *fresh = calloc(1, sizeof(*fresh));

	pthread_mutex_lock(&fs->itable_lock);
	inode = itable_find(fs, st->st_ino, st->st_dev);
	if (inode) {
		inode->nlookup++;
		if (inode->forgetting)
			inode->relooked = true;	/* may be opened and written */
	} else if (fresh) {
		size_t h;

		inode = fresh;
		fresh = NULL;
		inode_init(fs, inode, st, fd);
		fd = -1;
		if (fs->ninodes >= fs->nbuckets)
			itable_grow(fs);
		h = inode_hash(fs, st->st_ino, st->st_dev);
		inode->hnext = fs->buckets[h];
		fs->buckets[h] = inode;
		fs->ninodes++;
	}
	pthread_mutex_unlock(&fs->itable_lock);
	free(fresh);
	if (fd >= 0)
		ffs_fd_close(fs, fd);
	if (!inode)
		return -ENOMEM;
	*out = inode;
	return 0;
}

/* Context: itable_lock held; @inode is in the table. */
static void itable_remove(struct ffs_data *fs, struct ffs_inode *inode)
{
	struct ffs_inode **pp;

	pp = &fs->buckets[inode_hash(fs, inode->src_ino, inode->src_dev)];
	while (*pp != inode)
		pp = &(*pp)->hnext;
	*pp = inode->hnext;
	fs->ninodes--;
}

/*
 * Whether the backing file of @inode has no name left.  Its data can then
 * never be read again once nobody has it open, so the kernel's eviction
 * drops such pages unwritten, and so do we.  A failed fstat says no: the
 * data is written as usual.
 */
static bool backing_unlinked(const struct ffs_inode *inode)
{
	struct stat st;

	return fstat(inode->fd, &st) == 0 && st.st_nlink == 0;
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
	*discard = data && !nopen && backing_unlinked(inode);
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
	/* No cache left and unknown to the kernel: nothing can reach it. */
	itable_remove(fs, inode);
	pthread_mutex_unlock(&fs->itable_lock);
	inode_free(fs, inode);
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
				 modes[i].flags | O_CLOEXEC | O_NONBLOCK | extra_flags);
		if (fd < 0 && ffs_direct_refused(fs, extra_flags, -fd)) {
			extra_flags = 0;
			fd = ffs_fd_open(fs, AT_FDCWD, p.path, modes[i].flags | O_CLOEXEC | O_NONBLOCK);
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
	idle_leave(fs, inode);
	*out = inode->data;
out_unlock:
	pthread_mutex_unlock(&inode->lock);
	return ret;
}

void ffs_data_put(struct ffs_data *fs, struct ffs_inode *inode)
{
	pthread_mutex_lock(&inode->lock);
	inode->nopen--;
	idle_enter(fs, inode);
	pthread_mutex_unlock(&inode->lock);
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
