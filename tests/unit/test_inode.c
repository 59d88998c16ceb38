// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The inode table's lifetime rules (fusefs/inode.c) against lookups and
 * forgets racing as the kernel sends them from several worker threads.
 *
 * inode.c is linked with a stand-in for the data path (the wb_file_*
 * functions below) that counts dirty writes, can hold a flush until the
 * test lets it go or make it fail, and never really frees a wb_file, so
 * that every rule can be checked when it would be broken:
 *  - a wb_file is freed or discarded only when no flush of it is running
 *    (a forget writing it back still uses the inode that owns it);
 *  - nothing touches a wb_file after it was freed;
 *  - one backing file never has two live wb_files (two caches of one file:
 *    the older one's writeback could land after the newer data);
 *  - a forgotten file is freed only with all its data written, unless its
 *    backing file has no name left (then it is discarded unwritten).
 * The first scenario is the schedule of issue 9's defect 2: a forget
 * writing back, a lookup and a second forget in its window.  The stress
 * scenario runs the same operations at random from several threads.
 */
#include "fusefs.h"
#include "writeback.h"
#include "test_helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the stand-in data path ---- */

struct wb_file {
	int fd;
	ino_t ino;			/* backing inode */
	_Atomic int access;
	atomic_bool freed;		/* freed or discarded */
	atomic_bool discarded;
	atomic_int flushing;		/* wb_file_flush calls running */
	_Atomic unsigned int flushes;	/* wb_file_flush calls made */
	_Atomic unsigned int dirty;	/* writes not yet flushed */
	atomic_bool fail;		/* flushes fail (-EIO) */
	struct wb_file *next;		/* all_files, under files_lock */
};

static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;
static struct wb_file *all_files;	/* every wb_file ever made */
static atomic_bool tearing_down;	/* ffs_itable_destroy frees what is left */
static atomic_bool stress_delay;	/* flushes take a little time */

/* The next flush waits in it until flush_release(). */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static bool gate_armed, gate_entered, gate_open;

static void flush_gate_arm(void)
{
	pthread_mutex_lock(&gate_lock);
	gate_armed = true;
	gate_entered = false;
	gate_open = false;
	pthread_mutex_unlock(&gate_lock);
}

/* Wait until a flush is held at the gate. */
static void flush_gate_wait_entered(void)
{
	pthread_mutex_lock(&gate_lock);
	while (!gate_entered)
		pthread_cond_wait(&gate_cond, &gate_lock);
	pthread_mutex_unlock(&gate_lock);
}

static void flush_gate_release(void)
{
	pthread_mutex_lock(&gate_lock);
	gate_open = true;
	pthread_cond_broadcast(&gate_cond);
	pthread_mutex_unlock(&gate_lock);
}

static void flush_gate_pass(void)
{
	pthread_mutex_lock(&gate_lock);
	if (gate_armed) {
		gate_armed = false;
		gate_entered = true;
		pthread_cond_broadcast(&gate_cond);
		while (!gate_open)
			pthread_cond_wait(&gate_cond, &gate_lock);
	}
	pthread_mutex_unlock(&gate_lock);
}

static void check_live(struct wb_file *wbf)
{
	if (atomic_load(&wbf->freed)) {
		fprintf(stderr, "wb_file of inode %lu used after it was freed\n",
			(unsigned long)wbf->ino);
		exit(T_EXIT_FAIL);
	}
}

static void check_may_free(struct wb_file *wbf)
{
	check_live(wbf);
	if (atomic_load(&wbf->flushing)) {
		fprintf(stderr, "wb_file of inode %lu freed while a forget is still "
			"writing it back: its inode is freed under that forget\n",
			(unsigned long)wbf->ino);
		exit(T_EXIT_FAIL);
	}
}

int wb_file_alloc(struct wb_ctx *ctx, int fd, enum wb_access access,
		  struct wb_file **out)
{
	struct wb_file *wbf = calloc(1, sizeof(*wbf));
	struct stat st;

	(void)ctx;
	T_CHECK(wbf);
	T_CHECK(fstat(fd, &st) == 0);
	wbf->fd = fd;
	wbf->ino = st.st_ino;
	atomic_init(&wbf->access, access);
	pthread_mutex_lock(&files_lock);
	for (struct wb_file *f = all_files; f; f = f->next) {
		if (f->ino == wbf->ino && !atomic_load(&f->freed)) {
			fprintf(stderr, "two live caches of inode %lu\n",
				(unsigned long)wbf->ino);
			exit(T_EXIT_FAIL);
		}
	}
	wbf->next = all_files;
	all_files = wbf;
	pthread_mutex_unlock(&files_lock);
	*out = wbf;
	return 0;
}

int wb_file_upgrade(struct wb_file *wbf, int fd, enum wb_access access)
{
	check_live(wbf);
	T_CHECK(dup3(fd, wbf->fd, O_CLOEXEC) >= 0);
	close(fd);
	atomic_store(&wbf->access, access);
	return 0;
}

enum wb_access wb_file_access(const struct wb_file *wbf)
{
	return atomic_load(&wbf->access);
}

/* Descriptors are never short here: a stand-in file keeps its own. */
int wb_file_fd_close(struct wb_file *wbf)
{
	check_live(wbf);
	return -EBUSY;
}

int wb_file_fd_evict(struct wb_file *wbf)
{
	check_live(wbf);
	return -EBUSY;
}

bool wb_file_has_fd(const struct wb_file *wbf)
{
	(void)wbf;
	return true;
}

int wb_file_fd_reopen(struct wb_file *wbf, int fd, enum wb_access access)
{
	(void)wbf;
	(void)access;
	close(fd);
	return -EBUSY;
}

int wb_file_flush(struct wb_file *wbf)
{
	unsigned int dirty = atomic_load(&wbf->dirty);
	int ret = 0;

	check_live(wbf);
	atomic_fetch_add(&wbf->flushing, 1);
	atomic_fetch_add(&wbf->flushes, 1);
	flush_gate_pass();
	if (atomic_load(&stress_delay))
		usleep(dirty ? 50 : 5);
	if (atomic_load(&wbf->fail))
		ret = -EIO;
	else
		atomic_fetch_sub(&wbf->dirty, dirty);	/* what was dirty at the start */
	check_live(wbf);
	atomic_fetch_sub(&wbf->flushing, 1);
	return ret;
}

int wb_file_free(struct wb_file *wbf)
{
	check_may_free(wbf);
	if (!atomic_load(&tearing_down) && atomic_load(&wbf->dirty)) {
		fprintf(stderr, "forgotten inode %lu freed with %u writes unwritten\n",
			(unsigned long)wbf->ino, atomic_load(&wbf->dirty));
		exit(T_EXIT_FAIL);
	}
	atomic_store(&wbf->freed, true);
	close(wbf->fd);
	return 0;
}

void wb_file_discard(struct wb_file *wbf)
{
	check_may_free(wbf);
	atomic_store(&wbf->discarded, true);
	atomic_store(&wbf->freed, true);
	close(wbf->fd);
}

void wb_file_attr_sample(struct wb_file *wbf, struct wb_file_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	check_live(wbf);
}

void wb_file_mtime_set(struct wb_file *wbf, const struct timespec *mtime)
{
	(void)mtime;
	check_live(wbf);
}

/* uring.c is not linked: requests come over no ring here. */
long ffs_uring_fds(void)
{
	return 0;
}

static void files_free_all(void)
{
	while (all_files) {
		struct wb_file *next = all_files->next;

		free(all_files);
		all_files = next;
	}
}

/* ---- the table ---- */

static struct ffs_config cfg;
static struct ffs_data fs;
static int dir_fd = -1;
static char dir_path[] = "/tmp/foliofs-test-inode.XXXXXX";

static void fs_init(void)
{
	int root_fd = open(dir_path, O_PATH | O_DIRECTORY | O_CLOEXEC);

	T_CHECK(root_fd >= 0);
	memset(&fs, 0, sizeof(fs));
	fs.cfg = &cfg;
	fs.backing_type = S_IFDIR;
	T_CHECK(ffs_itable_init(&fs, root_fd, NULL) == 0);	/* no request is dispatched here */
	atomic_store(&tearing_down, false);
}

static void fs_destroy(void)
{
	atomic_store(&tearing_down, true);
	ffs_itable_destroy(&fs);
	files_free_all();
}

static void make_file(const char *name)
{
	int fd = openat(dir_fd, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);

	T_CHECK(fd >= 0);
	close(fd);
}

/*
 * A lookup of @name in @dir as ops.c does it (no descriptor: a stat and
 * the handle): one more lookup of the inode.
 */
static struct ffs_inode *lookup_in(struct ffs_inode *dir, const char *name)
{
	struct ffs_inode *inode;
	struct ffs_fh *fh;
	struct stat st;

	T_CHECK(ffs_inode_pin(&fs, dir) == 0);
	T_CHECK(fstatat(dir->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0);
	T_CHECK(ffs_fh_at(dir->fd, name, &fh) == 0 && fh);
	T_CHECK(ffs_inode_get(&fs, &st, fh, dir, name, -1, &inode) == 0);
	ffs_inode_unpin(&fs, dir);
	return inode;
}

static struct ffs_inode *lookup(const char *name)
{
	return lookup_in(&fs.root, name);
}

/*
 * Open, write, close: leaves the inode's cache with one more dirty write.
 * The open is pinned for its request, as dispatch.c does.
 */
static struct wb_file *write_through(struct ffs_inode *inode)
{
	struct wb_file *data;

	T_CHECK(ffs_inode_pin(&fs, inode) == 0);
	T_CHECK(ffs_data_get(&fs, inode, WB_RDWR, -1, 0, &data) == 0);
	ffs_inode_unpin(&fs, inode);
	atomic_fetch_add(&data->dirty, 1);
	ffs_data_put(&fs, inode);
	return data;
}

static size_t ninodes(void)
{
	size_t n;

	pthread_mutex_lock(&fs.itable_lock);
	n = fs.ninodes;
	pthread_mutex_unlock(&fs.itable_lock);
	return n;
}

struct forget_arg {
	pthread_t thread;
	struct ffs_inode *inode;
};

static void *forget_thread(void *p)
{
	struct forget_arg *a = p;

	ffs_inode_forget(&fs, a->inode, 1);
	return NULL;
}

static void forget_start(struct forget_arg *a, struct ffs_inode *inode)
{
	a->inode = inode;
	T_CHECK(pthread_create(&a->thread, NULL, forget_thread, a) == 0);
}

static void forget_join(struct forget_arg *a)
{
	T_CHECK(pthread_join(a->thread, NULL) == 0);
}

/*
 * Issue 9, defect 2: forget A writes the inode back with the table lock
 * dropped; meanwhile the kernel looks the file up again, writes through it
 * and forgets it (forget B).  Only one of the forgets may free the inode,
 * after the other is done with it, and only with the new write on the
 * backing file.
 */
static void test_forget_during_forget(void)
{
	struct forget_arg a, b;
	struct ffs_inode *inode, *again;
	struct wb_file *data, *data2;

	fs_init();
	make_file("f");
	inode = lookup("f");
	data = write_through(inode);

	flush_gate_arm();
	forget_start(&a, inode);
	flush_gate_wait_entered();		/* A is writing back, lock dropped */
	again = lookup("f");
	data2 = write_through(again);
	T_CHECK(data2 == data);			/* one cache for the file */
	forget_start(&b, again);
	forget_join(&b);
	T_CHECK(!atomic_load(&data->freed));	/* A still writes it back */
	flush_gate_release();
	forget_join(&a);

	T_CHECK(atomic_load(&data->freed) && !atomic_load(&data->discarded));
	T_CHECK(atomic_load(&data->dirty) == 0);
	T_CHECK(atomic_load(&data->flushes) >= 2);	/* the second write too */
	T_CHECK(ninodes() == 0);
	T_CHECK(atomic_load(&fs.kept_inodes) == 0);
	fs_destroy();
	T_CHECK(unlinkat(dir_fd, "f", 0) == 0);
}

/* A lookup during the forget's writeback that is not forgotten keeps the inode. */
static void test_lookup_during_forget(void)
{
	struct forget_arg a;
	struct ffs_inode *inode;
	struct wb_file *data;

	fs_init();
	make_file("f");
	inode = lookup("f");
	data = write_through(inode);

	flush_gate_arm();
	forget_start(&a, inode);
	flush_gate_wait_entered();
	T_CHECK(lookup("f") == inode);
	flush_gate_release();
	forget_join(&a);
	T_CHECK(!atomic_load(&data->freed));
	T_CHECK(ninodes() == 1);

	T_CHECK(write_through(inode) == data);
	ffs_inode_forget(&fs, inode, 1);
	T_CHECK(atomic_load(&data->freed) && atomic_load(&data->dirty) == 0);
	T_CHECK(ninodes() == 0);
	fs_destroy();
	T_CHECK(unlinkat(dir_fd, "f", 0) == 0);
}

/* Data that cannot be written keeps the forgotten inode and its cache. */
static void test_kept(void)
{
	struct ffs_inode *inode;
	struct wb_file *data;

	fs_init();
	make_file("f");
	inode = lookup("f");
	data = write_through(inode);
	atomic_store(&data->fail, true);
	ffs_inode_forget(&fs, inode, 1);
	T_CHECK(!atomic_load(&data->freed));
	T_CHECK(atomic_load(&fs.kept_inodes) == 1);
	T_CHECK(ninodes() == 1);

	/* Found again with the data it kept; written once the backing store works. */
	T_CHECK(lookup("f") == inode);
	T_CHECK(write_through(inode) == data);
	atomic_store(&data->fail, false);
	ffs_inode_forget(&fs, inode, 1);
	T_CHECK(atomic_load(&data->freed) && atomic_load(&data->dirty) == 0);
	T_CHECK(ninodes() == 0);
	fs_destroy();
	T_CHECK(unlinkat(dir_fd, "f", 0) == 0);
}

/*
 * Issue 9, defect 7: a forgotten file without a name is dropped unwritten,
 * even when its data could not be written; one with a name left (a hard
 * link) is written back.
 */
static void test_unlinked(void)
{
	struct ffs_inode *gone, *linked;
	struct wb_file *gone_data, *linked_data;

	fs_init();
	make_file("gone");
	make_file("linked");
	T_CHECK(linkat(dir_fd, "linked", dir_fd, "other", 0) == 0);
	gone = lookup("gone");
	linked = lookup("linked");
	gone_data = write_through(gone);
	linked_data = write_through(linked);
	atomic_store(&gone_data->fail, true);	/* would be kept if written */
	T_CHECK(unlinkat(dir_fd, "gone", 0) == 0);
	T_CHECK(unlinkat(dir_fd, "linked", 0) == 0);

	ffs_inode_forget(&fs, gone, 1);
	T_CHECK(atomic_load(&gone_data->discarded));
	T_CHECK(atomic_load(&gone_data->flushes) == 0);
	T_CHECK(atomic_load(&fs.kept_inodes) == 0);

	ffs_inode_forget(&fs, linked, 1);
	T_CHECK(atomic_load(&linked_data->freed));
	T_CHECK(!atomic_load(&linked_data->discarded));
	T_CHECK(atomic_load(&linked_data->flushes) == 1);
	T_CHECK(atomic_load(&linked_data->dirty) == 0);
	T_CHECK(ninodes() == 0);
	fs_destroy();
	T_CHECK(unlinkat(dir_fd, "other", 0) == 0);
}

/* ---- inodes without descriptors: found again by parent and name ---- */

/*
 * Close every cached O_PATH descriptor, as the daemon does when an open
 * fails with EMFILE under a lowered RLIMIT_NOFILE (ffs_fd_retry reads the
 * limit again), then put the limit back.
 */
static void evict_cached(void)
{
	struct rlimit old, low;

	T_CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
	low = old;
	low.rlim_cur = 1;
	T_CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
	ffs_fd_retry(&fs, EMFILE);
	T_CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
	ffs_fd_retry(&fs, EMFILE);	/* the budget as it was: closes no more */
}

/* @inode's fd is closed; pinning finds it again, the inode at @path. */
static void check_refind(struct ffs_inode *inode, const char *path)
{
	struct stat want, got;

	T_CHECK(inode->fd < 0);
	T_CHECK(fstatat(dir_fd, path, &want, AT_SYMLINK_NOFOLLOW) == 0);
	T_CHECK(ffs_inode_pin(&fs, inode) == 0);
	T_CHECK(fstatat(inode->fd, "", &got, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0);
	T_CHECK(got.st_ino == want.st_ino && got.st_dev == want.st_dev);
	ffs_inode_unpin(&fs, inode);
}

/* A rename as ops.c makes it, with both directories pinned. */
static void rename_as_daemon(struct ffs_inode *dir, const char *name, struct ffs_inode *newdir,
			     const char *newname, const char *from, const char *to)
{
	struct ffs_inode *other;

	T_CHECK(ffs_inode_pin(&fs, dir) == 0 && ffs_inode_pin(&fs, newdir) == 0);
	other = ffs_inode_at(&fs, newdir, newname);
	T_CHECK(renameat(dir_fd, from, dir_fd, to) == 0);
	if (other)
		ffs_inode_unnamed(&fs, other, newdir, newname);
	ffs_inode_renamed(&fs, dir, name, newdir, newname, 0, other);
	if (other)
		ffs_inode_unpin(&fs, other);
	ffs_inode_unpin(&fs, newdir);
	ffs_inode_unpin(&fs, dir);
}

/*
 * Inodes with no descriptor are found again: a file, a file renamed into
 * another directory, a file whose directory (and its directory) moved,
 * each checked to be the very inode at its new path.
 */
static void test_refind_renamed(void)
{
	struct ffs_inode *a, *b, *f, *d2, *g;
	uint64_t refinds;

	fs_init();
	T_CHECK(mkdirat(dir_fd, "a", 0755) == 0 && mkdirat(dir_fd, "a/b", 0755) == 0 &&
		mkdirat(dir_fd, "d2", 0755) == 0);
	make_file("a/b/f");
	make_file("a/g");
	a = lookup("a");
	b = lookup_in(a, "b");
	f = lookup_in(b, "f");
	g = lookup_in(a, "g");
	d2 = lookup("d2");
	evict_cached();
	refinds = atomic_load(&fs.inode_refinds);
	check_refind(f, "a/b/f");
	T_CHECK(atomic_load(&fs.inode_refinds) == refinds + 1);

	rename_as_daemon(a, "g", d2, "moved", "a/g", "d2/moved");
	evict_cached();
	check_refind(g, "d2/moved");

	/* a moves below d2: b and f move with it, by pointer. */
	rename_as_daemon(&fs.root, "a", d2, "a2", "a", "d2/a2");
	evict_cached();
	check_refind(f, "d2/a2/b/f");
	check_refind(b, "d2/a2/b");
	T_CHECK(atomic_load(&fs.inode_stale) == 0);

	ffs_inode_forget(&fs, g, 1);
	ffs_inode_forget(&fs, f, 1);
	ffs_inode_forget(&fs, b, 1);
	ffs_inode_forget(&fs, a, 1);
	ffs_inode_forget(&fs, d2, 1);
	T_CHECK(ninodes() == 0);
	fs_destroy();
	T_CHECK(unlinkat(dir_fd, "d2/a2/b/f", 0) == 0 && unlinkat(dir_fd, "d2/a2/b", AT_REMOVEDIR) == 0 &&
		unlinkat(dir_fd, "d2/a2", AT_REMOVEDIR) == 0 && unlinkat(dir_fd, "d2/moved", 0) == 0 &&
		unlinkat(dir_fd, "d2", AT_REMOVEDIR) == 0);
}

/*
 * A name removed through the daemon: its inode keeps its descriptor (it
 * cannot be found by name), and its forget knows it has no name left.
 * A file renamed over keeps its descriptor too.
 */
static void test_unnamed_keeps_fd(void)
{
	struct ffs_inode *f, *over, *gone;
	struct wb_file *data;

	fs_init();
	make_file("f");
	make_file("src");
	make_file("over");
	f = lookup("f");
	over = lookup("over");
	data = write_through(f);
	evict_cached();

	T_CHECK(ffs_inode_pin(&fs, &fs.root) == 0);
	gone = ffs_inode_at(&fs, &fs.root, "f");
	T_CHECK(gone == f && f->fd >= 0);
	T_CHECK(unlinkat(dir_fd, "f", 0) == 0);
	ffs_inode_unnamed(&fs, f, &fs.root, "f");
	ffs_inode_unpin(&fs, f);
	evict_cached();
	T_CHECK(f->fd >= 0 && f->fd_keep && !f->name);

	rename_as_daemon(&fs.root, "src", &fs.root, "over", "src", "over");
	evict_cached();
	T_CHECK(over->fd >= 0 && over->fd_keep);

	/* Not written back: nobody can read it again. */
	ffs_inode_forget(&fs, f, 1);
	T_CHECK(atomic_load(&data->discarded));
	ffs_inode_forget(&fs, over, 1);
	T_CHECK(ninodes() == 0);
	fs_destroy();
	T_CHECK(unlinkat(dir_fd, "over", 0) == 0);
}

/*
 * Behind the daemon's back: a file renamed directly is not found by its
 * old name (ESTALE, counted), and a lookup that finds another handle
 * under a known inode number (a new file that took a gone one's number)
 * gets a new inode, while the old one only fails.
 */
static void test_stale(void)
{
	struct ffs_inode *f, *again;
	struct ffs_fh *fh;
	struct stat st;
	int fd;

	fs_init();
	make_file("f");
	f = lookup("f");
	evict_cached();
	T_CHECK(renameat(dir_fd, "f", dir_fd, "g") == 0);
	T_CHECK(ffs_inode_pin(&fs, f) == -ESTALE);
	T_CHECK(atomic_load(&fs.inode_stale) == 1);
	T_CHECK(renameat(dir_fd, "g", dir_fd, "f") == 0);
	check_refind(f, "f");

	/* The same number with another generation: a lookup as ops.c makes it. */
	fd = openat(dir_fd, "f", O_PATH | O_NOFOLLOW | O_CLOEXEC);
	T_CHECK(fd >= 0);
	ffs_fd_charge_path(&fs);
	T_CHECK(fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0);
	T_CHECK(ffs_fh_get(fd, &fh) == 0 && fh);
	fh->bytes[fh->len - 1] ^= 0xff;
	T_CHECK(ffs_inode_pin(&fs, &fs.root) == 0);
	T_CHECK(ffs_inode_get(&fs, &st, fh, &fs.root, "f", fd, &again) == 0);
	T_CHECK(again != f && f->unhashed && ninodes() == 2);
	evict_cached();
	T_CHECK(ffs_inode_pin(&fs, again) == -ESTALE);	/* its handle was made up */
	T_CHECK(ffs_inode_pin(&fs, f) == -ESTALE);	/* out of the hash, no name */
	ffs_inode_forget(&fs, f, 1);
	ffs_inode_forget(&fs, again, 1);
	T_CHECK(ninodes() == 0);
	fs_destroy();
	T_CHECK(unlinkat(dir_fd, "f", 0) == 0);
}

/*
 * A directory the kernel forgets while a file below it is known stays,
 * as the path to it, found again by the next lookup; it goes with the
 * last inode below it.
 */
static void test_parent_kept(void)
{
	struct ffs_inode *d, *f;

	fs_init();
	T_CHECK(mkdirat(dir_fd, "d", 0755) == 0);
	make_file("d/f");
	d = lookup("d");
	f = lookup_in(d, "f");
	ffs_inode_forget(&fs, d, 1);
	T_CHECK(ninodes() == 2);
	evict_cached();
	check_refind(f, "d/f");
	T_CHECK(lookup("d") == d);
	ffs_inode_forget(&fs, d, 1);
	ffs_inode_forget(&fs, f, 1);
	T_CHECK(ninodes() == 0);
	fs_destroy();
	T_CHECK(unlinkat(dir_fd, "d/f", 0) == 0 && unlinkat(dir_fd, "d", AT_REMOVEDIR) == 0);
}

/* ---- stress: lookups, writes and forgets from several threads ---- */

#define STRESS_FILES	3
#define STRESS_THREADS	4
#define STRESS_ROUNDS	3000

static const char *const stress_names[STRESS_FILES] = { "s0", "s1", "s2" };

static void *stress_thread(void *p)
{
	uint64_t rng = (uintptr_t)p * 0x9e3779b97f4a7c15ull + 1;

	for (int i = 0; i < STRESS_ROUNDS; i++) {
		uint64_t r = t_xorshift(&rng);
		struct ffs_inode *inode = lookup(stress_names[r % STRESS_FILES]);
		struct wb_file *data;

		if (r & 0x30) {
			data = write_through(inode);
			/* Now and then the backing store fails for a while. */
			if ((r >> 8) % 64 == 0)
				atomic_store(&data->fail, true);
			else if ((r >> 8) % 4 == 0)
				atomic_store(&data->fail, false);
		}
		if (r & 0x40)
			sched_yield();
		ffs_inode_forget(&fs, inode, 1);
	}
	return NULL;
}

static void test_stress(void)
{
	pthread_t threads[STRESS_THREADS];

	fs_init();
	for (int i = 0; i < STRESS_FILES; i++)
		make_file(stress_names[i]);
	atomic_store(&stress_delay, true);
	for (uintptr_t i = 0; i < STRESS_THREADS; i++)
		T_CHECK(pthread_create(&threads[i], NULL, stress_thread, (void *)(i + 1)) == 0);
	for (int i = 0; i < STRESS_THREADS; i++)
		T_CHECK(pthread_join(threads[i], NULL) == 0);
	atomic_store(&stress_delay, false);

	/* Every lookup was forgotten: what is left was kept for its data. */
	pthread_mutex_lock(&files_lock);
	for (struct wb_file *f = all_files; f; f = f->next)
		T_CHECK(atomic_load(&f->freed) || atomic_load(&f->fail) ||
			atomic_load(&f->dirty) == 0);
	pthread_mutex_unlock(&files_lock);
	T_CHECK(ninodes() <= STRESS_FILES);
	fs_destroy();
	for (int i = 0; i < STRESS_FILES; i++)
		T_CHECK(unlinkat(dir_fd, stress_names[i], 0) == 0);
}

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
	{ "forget_during_forget", test_forget_during_forget },
	{ "lookup_during_forget", test_lookup_during_forget },
	{ "kept", test_kept },
	{ "unlinked", test_unlinked },
	{ "refind_renamed", test_refind_renamed },
	{ "unnamed_keeps_fd", test_unnamed_keeps_fd },
	{ "stale", test_stale },
	{ "parent_kept", test_parent_kept },
	{ "stress", test_stress },
};

/* With an argument, runs only the scenario of that name. */
int main(int argc, char **argv)
{
	bool ran = false;

	if (!mkdtemp(dir_path)) {
		perror("mkdtemp");
		return T_EXIT_FAIL;
	}
	dir_fd = open(dir_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	T_CHECK(dir_fd >= 0);
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (argc > 1 && strcmp(argv[1], tests[i].name) != 0)
			continue;
		tests[i].fn();
		ran = true;
	}
	close(dir_fd);
	T_CHECK(rmdir(dir_path) == 0);
	T_CHECK(ran);
	return T_EXIT_PASS;
}
