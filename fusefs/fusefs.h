/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fusefs.h - the FUSE layer of foliofs: command line, inode table,
 * credentials and the low-level operation handlers.
 *
 * The namespace is passed through to the backing directory: every
 * operation is an *at() call relative to an inode's O_PATH descriptor, so
 * nothing follows a symlink inside the backing directory and nothing
 * reaches outside it.  Unlike libfuse's passthrough_ll, an inode holds its
 * descriptor only while it is in use (a request on it, an open handle) or
 * cached; otherwise it is found again by its parent and name (inode.c).
 * File data never goes to a backing descriptor from here: read, write,
 * fsync, truncate, fallocate, lseek and copies go through writeback.h.
 *
 * Lock order: ffs_data.itable_lock, then ffs_inode.lock, then
 * ffs_data.idle_lock (which takes an inode's lock only with trylock) or
 * ffs_data.fdc_lock, then writeback's locks; the pruner's lock (prune.c)
 * comes after itable_lock.  No lock is held across fuse_reply_*().
 */
#ifndef FOLIOFS_FUSEFS_H
#define FOLIOFS_FUSEFS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "blockstate.h"
#include "foliofs/list.h"
#include "trace.h"
#include "writeback.h"
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

struct wb_file;
struct ffs_data;
struct ffs_node_ops;
struct ffs_prune;

/* ---- command line (opts.c) ---- */

/* Who caches file data on the kernel's side of the mount (cache=). */
enum ffs_cache_mode {
	/* Every open is direct I/O: the daemon's cache is the only cache. */
	FFS_CACHE_DIRECT,
	/*
	 * The kernel keeps clean pages for reads (keep_cache) and sends
	 * every write syscall on as a WRITE before it returns.
	 */
	FFS_CACHE_WRITETHROUGH,
	/* The FUSE writeback cache (kernel_cache): writes dirty kernel pages. */
	FFS_CACHE_WRITEBACK,
};

struct ffs_config {
	char *backing;		/* BACKING as given */
	char *mountpoint;	/* MOUNTPOINT, made absolute by libfuse */
	enum ffs_cache_mode cache;	/* cache=; kernel_cache is writeback */
	bool allow_other;
	double attr_timeout;	/* seconds the kernel may cache entries and attributes */
	bool foreground;
	bool debug;
	bool singlethread;
	bool clone_fd;
	/*
	 * uring=: serve requests over io_uring (uring.c) when the kernel
	 * offers it (auto), insisting on it (on: refused before mounting
	 * when the kernel cannot), or never (off).  uring_given: named on
	 * the command line, so a fallback is worth a notice.
	 */
	enum ffs_uring_mode { FFS_URING_AUTO, FFS_URING_ON, FFS_URING_OFF } uring;
	bool uring_given;
	/* uring_pin=: each queue's threads run on the queue's CPU (uring.c). */
	bool uring_pin;
	/*
	 * backing_direct=: open backing files with O_DIRECT where BACKING's
	 * file system takes it at block_size (auto, main.c probes it and sets
	 * wb.backing_direct), always (on, also the bare flag) or never (off).
	 */
	enum ffs_direct_mode { FFS_DIRECT_AUTO, FFS_DIRECT_ON, FFS_DIRECT_OFF } backing_direct;
	unsigned int max_threads;
	unsigned int max_idle_threads;
	/*
	 * max_inodes=: the inode table's bound; past most of it the kernel
	 * is asked to forget cold inodes (prune.c).
	 */
	size_t max_inodes;
	/* max_background=: the kernel's limit on asynchronous requests in flight */
	unsigned int max_background;
	bool show_help;
	bool show_version;
	/*
	 * block_size, folio_size, cache_size, policies; flushers,
	 * thresholds, backing I/O, faults.  Their strings (wb.fault,
	 * wb.stats_log, wb.throttle) are owned, as trace and write_log.
	 */
	struct bs_config bs;
	struct wb_config wb;
	char *trace;		/* trace= made absolute (owned), or NULL */
	char *write_log;	/* write_log= made absolute (owned), or NULL */
	struct fuse_args args;	/* what is left for fuse_session_new() */
};

/* Length of the error buffers the parsers below fill. */
#define FFS_ERRLEN 512

/*
 * Parse argv into @cfg through the option registry (writeback/options.h).
 * Returns 0, or -EINVAL with a one-line reason (naming the option or
 * argument) in @err; @err is left empty when libfuse has already printed
 * the reason.  MOUNTPOINT must be an existing directory; BACKING is
 * opened by the caller.  Options libfuse knows are kept in cfg->args for
 * it to check.
 */
int ffs_parse_args(int argc, char **argv, struct ffs_config *cfg, char *err);
void ffs_config_free(struct ffs_config *cfg);
void ffs_print_help(const char *progname);

/* ---- inodes (inode.c) ---- */

/*
 * A backing inode's file handle (name_to_handle_at(2)): which mount it is
 * on and the file system's bytes naming it, inode number and generation
 * included, so that an inode number reused by a new file does not match.
 * Getting one needs no privilege (opening by one does).
 */
struct ffs_fh {
	int mnt_id;
	int type;
	unsigned int len;
	unsigned char bytes[];
};

/*
 * The handle of the inode open as @fd (any descriptor, O_PATH too), or
 * of @name in the directory @dirfd, not following a symlink (ffs_fh_at):
 * 0 with *@out (free() it), 0 with NULL where the file system gives none,
 * or -errno.
 */
int ffs_fh_get(int fd, struct ffs_fh **out);
int ffs_fh_at(int dirfd, const char *name, struct ffs_fh **out);

/*
 * One inode known to the kernel: a backing inode, or one of the control
 * directory's (ctl.c, which makes its own and never frees them).  The
 * fuse_ino_t handed to the kernel is the address of this struct
 * (FUSE_ROOT_ID maps to ffs_data.root).
 *
 * A backing inode is found again, when it has no descriptor, by the path
 * of names from its nearest ancestor that has one (parent, name), and
 * checked to be the same inode by its file handle (fh: the inode number
 * and generation, which a reused inode number does not share).  Every
 * change of a name goes through the daemon, which keeps parent and name
 * current (ffs_inode_renamed, ffs_inode_unnamed); an inode whose name is
 * gone keeps its descriptor instead (fd_keep).
 */
struct ffs_inode {
	/* Immutable after creation. */
	/*
	 * The handlers of every request on this inode (dispatch.c): ops.c's
	 * for a backing inode (ffs_data.node_ops), ctl.c's for a control file.
	 */
	const struct ffs_node_ops *ops;
	ino_t src_ino;		/* key in the inode table, with src_dev */
	dev_t src_dev;
	mode_t type;		/* S_IFMT bits; an inode never changes type */
	/*
	 * The backing inode's file handle, NULL where BACKING's file system
	 * has none (then the inode keeps its descriptor for life).
	 */
	struct ffs_fh *fh;

	/*
	 * Protected by ffs_data.fdc_lock (the root's fd never changes).
	 * fd: O_PATH | O_NOFOLLOW descriptor of the backing inode, or -1.
	 * It stays open while fd_pins > 0: each request being served on the
	 * inode (ffs_inode_pin) and each open handle hold a pin, so a
	 * handler reads inode->fd without a lock.  Unpinned, it is cached on
	 * ffs_data's LRU of descriptors and closed when descriptors run
	 * short, unless fd_keep: the inode has no name to be found by (fh
	 * NULL, or its last known name removed), so the descriptor stays
	 * until the inode is freed.  dying: a forget is waiting for the
	 * pins to go before it frees the inode.  fdc_link: on ffs_data.fdc
	 * (the LRU) while linked (list_linked).
	 */
	int fd;
	unsigned int fd_pins;
	bool fd_keep;
	bool dying;
	struct list_node fdc_link;	/* fdc_lock: on ffs_data.fdc, the LRU */

	/*
	 * Kill-priv's hint (killpriv.c) that the backing inode has neither
	 * setuid nor setgid, which spares every marked write (each write of
	 * a caller without CAP_FSETID) an fstat.  mode_seq counts the
	 * changes of the backing inode's mode the daemon made or may have
	 * made (ffs_killpriv_mode_changed(), called after each); nosuid_seq
	 * is mode_seq + 1 as read before an fstat that found neither bit, 0
	 * while none has.  The hint holds while they agree: a change that
	 * lands after the fstat bumps mode_seq after it, one that lands
	 * before it is seen by it.  The daemon owns BACKING (admin.md), so
	 * no other change of the mode is to be expected.
	 */
	_Atomic uint64_t mode_seq;
	_Atomic uint64_t nosuid_seq;
	/* Looked up or used since prune.c's clock last passed it (no lock). */
	atomic_bool accessed;

	/* Protected by ffs_data.itable_lock. */
	uint64_t nlookup;	/* lookups the kernel has not forgotten */
	bool forgetting;	/* a forget is writing it back, lock dropped */
	bool relooked;		/* looked up again since that writeback began */
	/*
	 * Out of the hash table: a lookup found another inode under the same
	 * number (the backing inode is gone), so this one can only fail.
	 */
	bool unhashed;
	/* The pass of prune.c's clock in which the kernel was asked to forget it. */
	uint64_t pruned_pass;
	struct ffs_inode *hnext;	/* hash chain */
	/*
	 * Where the backing inode was last seen: the name `name` in the
	 * directory `parent`, which this inode keeps in the table (its
	 * nchild counts them).  NULL for the root and for an inode whose
	 * name is gone.  A directory nobody looks up any more stays, with
	 * no data, while nchild > 0: the path to its children.
	 */
	struct ffs_inode *parent;
	char *name;
	unsigned int nchild;

	pthread_mutex_t lock;	/* protects the fields below */
	/*
	 * Data path: made at the first open and kept (with its cache) until
	 * the kernel forgets the inode, so cached data outlives a close.
	 */
	struct wb_file *data;
	/*
	 * The largest size the backing file can take (its file system's
	 * limit), found when `data` is first made and never changed; read
	 * without the lock by handlers of the open handles that `data`
	 * implies.  0 until then.
	 */
	off_t max_size;
	unsigned int nopen;	/* open handles */

	/*
	 * A forget is writing `data` back without this lock: its descriptor
	 * must stay, so the inode is kept off the idle list meanwhile.
	 */
	bool forget_flushing;
	/*
	 * idle: on ffs_data's idle list (idle_link linked): `data` has its
	 * descriptor, nopen is 0 and no forget is writing it back.  Changed
	 * under both this lock and idle_lock; read under either.  The flag,
	 * not list_linked(): a neighbour's unlink rewrites idle_link under
	 * idle_lock alone.
	 */
	bool idle;
	struct list_node idle_link;	/* idle_lock: on ffs_data.idle */
};

/*
 * Every open handle (file, directory, control file) is on a list, so that
 * the handles the kernel never releases (a lazy unmount with files still
 * open) are freed at teardown.  The registry (inode.c) knows nothing of
 * what a handle holds: whoever opens one gives it the function that frees
 * it, and the registry calls that.
 */
struct ffs_handle {
	struct list_node link;	/* ffs_data.handles_lock: on ffs_data.handles */
	/*
	 * Frees the handle and what it holds (a file's data reference, a
	 * directory's descriptor): set by ffs_handle_add(), immutable.  Called
	 * once, by ffs_handle_release() when the kernel releases the handle
	 * or by ffs_handles_free_all() at teardown when it never did, with
	 * the handle already off the list and no fusefs lock held.
	 */
	void (*free)(struct ffs_data *fs, struct ffs_handle *h);
};

/* Per open regular file; fuse_file_info.fh points to it. */
struct ffs_file {
	struct ffs_handle h;		/* first: teardown frees through it */
	struct ffs_inode *inode;
	struct wb_file *data;	/* == inode->data, held open by this handle */
	int flags;		/* open(2) flags of the client */
	/*
	 * Readahead state of this open (file_ra_state): each open of a file
	 * reads ahead on its own, over the file's shared cache.
	 */
	struct bs_ra ra;
	/*
	 * This open in a trace (trace_rec.open): from ffs_data.last_open_id,
	 * never 0 and never reused while the mount lives; immutable.
	 */
	uint64_t open_id;
	uint64_t err_seen;	/* errseq cursor: writeback errors already reported */
	pthread_mutex_t err_lock;	/* protects err_seen (fsyncs of one handle) */
};

/* Per open directory. */
struct ffs_dir {
	struct ffs_handle h;
	DIR *dp;
	struct dirent *entry;	/* entry read but not yet returned, or NULL */
	off_t offset;		/* telldir() cookie of dp's position */
};

struct ffs_data {
	const struct ffs_config *cfg;
	/* The handlers of every backing inode (ops.c's): from ffs_itable_init(), immutable. */
	const struct ffs_node_ops *node_ops;
	struct wb_ctx *wb;		/* the data path */
	mode_t backing_type;		/* S_IFDIR, or S_IFREG/S_IFBLK: one-file mount */
	struct ffs_inode root;
	bool act_as_caller;	/* root daemon with allow_other: switch creds */
	/*
	 * POSIX ACLs are on (FUSE_CAP_POSIX_ACL, set at INIT, read-only
	 * after): the kernel checks them, and leaves the caller's umask to
	 * the daemon (FUSE_CAP_DONT_MASK), see ffs_creds_umask().
	 */
	bool posix_acl;
	/*
	 * Writes longer than this were cut by the kernel at max_write (set
	 * at INIT, read-only after; 0: never): their rest follows in the
	 * next request, so they go through wb_write_cut().
	 */
	size_t write_cut;

	pthread_mutex_t handles_lock;	/* protects the handle list */
	struct list_node handles;	/* ffs_handle.link, newest first */

	/*
	 * Protects the table and every inode's nlookup, parent, name and
	 * nchild.
	 */
	pthread_mutex_t itable_lock;
	struct ffs_inode **buckets;
	size_t nbuckets;	/* power of two */
	size_t ninodes;		/* in the buckets and on `unhashed` */
	/* Inodes out of the hash (ffs_inode.unhashed), by hnext. */
	struct ffs_inode *unhashed;
	/*
	 * prune.c's clock over the buckets: the next bucket, and the pass
	 * (one more each time it wraps).  prune_high: past this many inodes,
	 * the pruner is woken (from max_inodes at init, then the pruner's).
	 */
	size_t clock_hand;
	uint64_t clock_pass;
	_Atomic size_t prune_high;
	/* Inodes that left the table, monotonic: the pruner's progress. */
	_Atomic uint64_t inodes_forgotten;

	/*
	 * The pruner (prune.c): set before the session loop, cleared after;
	 * prune_kernel: the kernel has FUSE_NOTIFY_PRUNE (set at INIT).
	 * inodes_pruned: inodes the kernel was asked to forget (stats).
	 */
	struct ffs_prune *_Atomic prune;
	bool prune_kernel;
	_Atomic uint64_t inodes_pruned;

	/* Forgotten inodes kept because their data could not be written. */
	_Atomic uint64_t kept_inodes;

	/*
	 * The mounted session, for notifications to the kernel (killpriv.c):
	 * set before the session loop, immutable.
	 */
	struct fuse_session *se;

	/* Held write replies (defer.c): set before the session loop, cleared after. */
	struct ffs_defer *defer;

	/* The trace recorder (record.c): set before the session loop, immutable. */
	struct ffs_trace *trace;
	/*
	 * The id of the last open made (ffs_file.open_id), counted whether
	 * or not a trace is recorded so that ids stay unique across
	 * recordings: one relaxed atomic add per open.
	 */
	_Atomic uint64_t last_open_id;

	/*
	 * Descriptors (inode.c).  Every descriptor fusefs keeps (an inode's
	 * O_PATH one, a file's data descriptor, an open directory's) is
	 * counted in nr_fds, and one more is opened only while nr_fds is
	 * under fd_budget: RLIMIT_NOFILE less the descriptors the daemon had
	 * when it began serving (fd_base), those of the io_uring transport
	 * (ffs_uring_fds()) and fd_reserve, kept for what must
	 * not fail for want of one (io_uring rings and /dev/fuse clones of
	 * new threads, fusermount3 at unmount, short-lived descriptors).  At
	 * the budget, the data descriptors of files nobody has open are
	 * closed, least recently used first; a file's data descriptor is
	 * opened again when it is next opened.  When none can be closed, the
	 * caller gets EMFILE.
	 */
	_Atomic long nr_fds;
	_Atomic long fd_budget;
	/* Counters for .foliofs/stats: idle data descriptors closed, data
	 * descriptors opened again, descriptors refused (EMFILE/ENFILE). */
	_Atomic uint64_t fd_idle_closed;
	_Atomic uint64_t fd_reopened;
	_Atomic uint64_t fd_refused;
	long fd_base;		/* set before serving, then read-only */
	long fd_reserve;	/* likewise */
	pthread_mutex_t idle_lock;	/* protects the idle list and idle_count */
	/* ffs_inode.idle_link, most recently idle first, least recently last (closed first) */
	struct list_node idle;
	long idle_count;

	/*
	 * The cache of O_PATH descriptors of inodes nobody is using
	 * (ffs_inode.fd), least recently used last: closed first when
	 * descriptors run short, and beyond fdc_max.  fdc_lock also protects
	 * every inode's fd, fd_pins, fd_keep and dying; fdc_cond is
	 * signalled when a dying inode's last pin goes.
	 */
	pthread_mutex_t fdc_lock;
	pthread_cond_t fdc_cond;
	struct list_node fdc;		/* ffs_inode.fdc_link, most recently used first */
	long fdc_count;
	/*
	 * At most this many cached O_PATH descriptors and idle data
	 * descriptors each: a quarter of the budget, at most
	 * FFS_FD_CACHE_MAX, so that a daemon with a large limit does not hold
	 * a descriptor (and the backing file system's inode) for every file
	 * it has seen.  Set with fd_budget.
	 */
	_Atomic long fd_cache_max;
	/* O_PATH descriptors open now (cached, in use or kept), for stats. */
	_Atomic long path_fds;
	/*
	 * Counters for .foliofs/stats: inodes found again by parent and name,
	 * and those that were not there any more (the request got ESTALE).
	 */
	_Atomic uint64_t inode_refinds;
	_Atomic uint64_t inode_stale;
	/* The refusal of a descriptor is logged once (with the counts). */
	atomic_bool fd_refusal_logged;
};

/* The most descriptors of each cache (see ffs_data.fd_cache_max). */
#define FFS_FD_CACHE_MAX 4096

/* The table holds backing inodes, served by @node_ops (the root's too). */
int ffs_itable_init(struct ffs_data *fs, int root_fd, const struct ffs_node_ops *node_ops);
void ffs_itable_destroy(struct ffs_data *fs);

/*
 * Find the inode for @st and @fh, found as @name in @dir, or insert a new
 * one; adds one lookup, and records @dir and @name as where it is (but for
 * "." and "..").  @fd, an O_PATH descriptor of it or -1, is consumed with
 * its charge (ffs_fd_charge_path): kept on the cache if the inode has
 * none.  @fh is consumed; an inode without one (no handles on BACKING)
 * must come with @fd, which it keeps.  The caller that needs inode->fd
 * pins it (ffs_inode_pin).  An inode of the same number but another
 * handle is a backing inode that is gone: it leaves the table, and
 * requests on it fail with ESTALE.
 */
int ffs_inode_get(struct ffs_data *fs, const struct stat *st, struct ffs_fh *fh,
		  struct ffs_inode *dir, const char *name, int fd, struct ffs_inode **out);
/* Drop @n lookups; frees the inode at zero. */
void ffs_inode_forget(struct ffs_data *fs, struct ffs_inode *inode,
		      uint64_t n);

/*
 * ffs_inode_pin(): @inode's fd is open and stays open until the matching
 * ffs_inode_unpin(): taken from the cache, or found again by its parent
 * and name (openat2 from the nearest ancestor with a descriptor, beneath
 * it and through no symlink, and the handle checked).  0, or -ESTALE when
 * the backing inode is not where the daemon last saw it (changed behind
 * its back) or is gone, or another -errno of openat2.  Nothing to do for
 * the root and for control inodes.  The descriptor is charged to the
 * budget (ffs_fd_charge_path), which may close cached ones.
 * Context: FUSE worker thread, no fusefs lock held (it takes
 * itable_lock); may block on the backing file system.
 * ffs_inode_unpin(): cheap; any thread, inode->lock may be held.
 */
int ffs_inode_pin(struct ffs_data *fs, struct ffs_inode *inode);
void ffs_inode_unpin(struct ffs_data *fs, struct ffs_inode *inode);
/*
 * Before @name in @dir goes (unlink, rmdir, a rename onto it): the inode
 * the table has there, pinned (so that it keeps a descriptor after the
 * name is gone), or NULL.  After the operation, ffs_inode_unnamed() if
 * it succeeded (the inode keeps its descriptor until it is forgotten, or
 * found by another name), then ffs_inode_unpin() in any case.
 * Context: the kernel holds the inode at @name (it is removing it);
 * FUSE worker thread, no fusefs lock held; one fstatat.
 */
struct ffs_inode *ffs_inode_at(struct ffs_data *fs, struct ffs_inode *dir, const char *name);
void ffs_inode_unnamed(struct ffs_data *fs, struct ffs_inode *inode, struct ffs_inode *dir,
		       const char *name);
/*
 * @name in @dir was renamed to @newname in @newdir (renameat2 @flags):
 * the inode the table knew at @name is now at @newname; with
 * RENAME_EXCHANGE, the one at @newname (@other, from ffs_inode_at) is at
 * @name.  Context: as ffs_inode_at; one fstatat.
 */
void ffs_inode_renamed(struct ffs_data *fs, struct ffs_inode *dir, const char *name,
		       struct ffs_inode *newdir, const char *newname, unsigned int flags,
		       struct ffs_inode *other);

/* Inodes in the table now. */
size_t ffs_itable_count(struct ffs_data *fs);
/* An inode the kernel may be asked to forget: its node id, its parent's, its name. */
struct ffs_cold {
	uint64_t nodeid;
	uint64_t parent;
	char name[NAME_MAX + 1];	/* "" when it has none */
};
/*
 * Up to @n inodes into @out that nobody used since the clock last passed
 * them (ffs_inode.accessed), none in use (pinned: open, or a request on
 * it), none with inodes below it in the table, none asked for since the
 * clock last wrapped; looking at no more than *@budget inodes (reduced).
 * The count found.  Context: the pruner thread, no lock held.
 */
size_t ffs_itable_cold(struct ffs_data *fs, struct ffs_cold *out, size_t n, size_t *budget);

/* ---- asking the kernel to forget inodes (prune.c) ---- */

/* At INIT: the kernel's protocol minor version says how to ask. */
void ffs_prune_init(struct ffs_data *fs, unsigned int proto_minor);
/* Past this many inodes (of @max_inodes) the pruner is woken. */
size_t ffs_prune_high(size_t max_inodes);
/*
 * ffs_prune_start(): the pruner's thread, once the session is mounted:
 * 0 or -errno.  ffs_prune_wake(): the table passed fs->prune_high (cheap;
 * any thread, itable_lock may be held).  ffs_prune_stop(): after the
 * session loop, when no request runs any more.
 */
int ffs_prune_start(struct ffs_data *fs, struct fuse_session *se);
void ffs_prune_wake(struct ffs_data *fs);
void ffs_prune_stop(struct ffs_data *fs);

/*
 * Take an open reference to the inode's data path, opening the backing
 * file with at least @need access (WB_READ/WB_WRITE bits).  @fd, when >= 0,
 * is an already open descriptor of the file with access @fd_access
 * (consumed).
 */
int ffs_data_get(struct ffs_data *fs, struct ffs_inode *inode, int need, int fd,
		 int fd_access, struct wb_file **out);
/*
 * Drop an open reference; the last one puts the data descriptor on the
 * idle list, to be closed when descriptors run short.
 */
void ffs_data_put(struct ffs_data *fs, struct ffs_inode *inode);
/*
 * Writing [off, off + *len) of a file with its data open: -EFBIG from
 * inode->max_size on, and a write across it cut short there (*len), as a
 * local file system does.  0 or -EFBIG.
 */
int ffs_data_check_size(const struct ffs_inode *inode, off_t off, size_t *len);
/*
 * The cache's size and pending mtime of @inode into @attr, to be put into
 * a stat of the backing inode taken after this (wb_file_attr_apply());
 * false when the inode has no cache (the backing stat is all there is).
 */
bool ffs_data_attr_sample(struct ffs_inode *inode, struct wb_file_attr *attr);
/* The mtime was set explicitly to @mtime: writeback must keep it. */
void ffs_data_mtime_set(struct ffs_inode *inode, const struct timespec *mtime);

/*
 * Track an open handle, freed by @free_fn (see struct ffs_handle).
 * ffs_handle_release(): the kernel released it: untrack and free it.
 * ffs_handles_free_all(): teardown, free the handles the kernel did not
 * release (called by ffs_itable_destroy, before the inodes go).
 */
void ffs_handle_add(struct ffs_data *fs, struct ffs_handle *h,
		    void (*free_fn)(struct ffs_data *fs, struct ffs_handle *h));
void ffs_handle_release(struct ffs_data *fs, struct ffs_handle *h);
void ffs_handles_free_all(struct ffs_data *fs);

/*
 * Descriptor budget (see ffs_data).  ffs_fd_budget_init() once the daemon
 * has opened what it needs to serve, before the session loop.
 * ffs_fd_charge() before opening a descriptor fusefs keeps for an open
 * file or directory: 0, or -ENFILE when the budget is used up and no
 * cached or idle descriptor can be closed (a dirty idle file is written
 * back and synced first, wb_file_fd_evict(): inode.c says why); the first
 * refusal is logged with the counts.
 * ffs_fd_charge_path() before opening an O_PATH descriptor (of an inode
 * looked up or found again): closes cached and idle ones while over the
 * budget but never refuses, as those are a few per request in flight
 * and at most one per inode whose name is gone, which the reserve
 * covers.  ffs_fd_uncharge() (ffs_fd_uncharge_path() for a path charge)
 * after closing one, or when the open failed.
 * ffs_fd_retry(): an open failed with @err; true when that was EMFILE or
 * ENFILE and cached or idle descriptors could be closed, so that trying
 * again may succeed.  The budget follows RLIMIT_NOFILE, read again at
 * each ffs_fd_charge() and retry, and by ffs_fd_charge_path() at the
 * budget (it may be lowered while the daemon runs).
 * ffs_fd_open() is openat(2) charged (ffs_fd_charge(), or with @path
 * ffs_fd_charge_path()) and retried so: a descriptor or -errno (EMFILE
 * never: ENFILE).  ffs_fd_close() closes and uncharges.
 * Context: FUSE worker thread; may hold the lock of the inode it opens
 * for (others are taken with trylock); may block writing a file back.
 */
void ffs_fd_budget_init(struct ffs_data *fs);
int ffs_fd_charge(struct ffs_data *fs);
void ffs_fd_charge_path(struct ffs_data *fs);
void ffs_fd_uncharge(struct ffs_data *fs);
void ffs_fd_uncharge_path(struct ffs_data *fs);
bool ffs_fd_retry(struct ffs_data *fs, int err);
int ffs_fd_open(struct ffs_data *fs, int dirfd, const char *name, int flags, bool path);
void ffs_fd_close(struct ffs_data *fs, int fd);
/* Close an O_PATH descriptor charged with ffs_fd_charge_path(). */
void ffs_fd_close_path(struct ffs_data *fs, int fd);
/*
 * An open with @flags failed with @err, and should be tried again without
 * O_DIRECT: backing_direct=auto, and EINVAL for O_DIRECT, as a file system
 * without it (one mounted inside BACKING) answers.  Such a file is used
 * buffered; writeback's whole-block writes are right on it too.
 */
bool ffs_direct_refused(const struct ffs_data *fs, int flags, int err);

/* "/proc/self/fd/N" for an inode's O_PATH descriptor. */
struct ffs_procpath {
	char path[32];
};
void ffs_procpath(struct ffs_procpath *p, int fd);
/* Size of the block device behind an O_PATH descriptor: 0 or -errno. */
int ffs_blockdev_size(int path_fd, uint64_t *bytes);

/* ---- credentials (creds.c) ---- */

/*
 * Act with the caller's fsuid, fsgid and supplementary groups on this
 * thread for the duration of one request, when fs->act_as_caller.
 * ffs_creds_enter() returns 0 or -errno; ffs_creds_leave() must follow a
 * successful enter on the same thread.
 */
struct ffs_creds {
	bool switched;
};
int ffs_creds_init(void);
int ffs_creds_enter(struct ffs_data *fs, fuse_req_t req, struct ffs_creds *c);
void ffs_creds_leave(struct ffs_creds *c);
/*
 * Before making a name for @req's caller: with POSIX ACLs on, this
 * thread's umask becomes the caller's, so that the backing file system
 * applies it, or instead the parent directory's default ACL, as it does
 * for a local caller (the kernel sends the mode unmasked).  The first call
 * on a thread gives the thread a umask of its own (unshare(CLONE_FS)).
 * 0 or -errno.  ffs_creds_umask_end() puts the daemon's umask (0) back, for
 * what the thread creates for itself later (a trace file, say).
 */
int ffs_creds_umask(struct ffs_data *fs, fuse_req_t req);
void ffs_creds_umask_end(struct ffs_data *fs);
/*
 * Before a serving thread creates a file of the daemon's own (a trace):
 * a umask of its own, 0.  A thread that never made a name shares the
 * fs_struct of the worker that started it, whose umask is a caller's
 * while that worker makes a name.  0 or -errno.
 */
int ffs_creds_daemon_umask(void);
/*
 * Whether the caller of @req has @gid as its fsgid or a supplementary
 * group (false when the kernel cannot tell, e.g. the caller has exited).
 * Context: FUSE worker thread; may allocate.
 */
bool ffs_creds_in_group(fuse_req_t req, gid_t gid);

/* ---- channel (channel.c) ---- */

/*
 * Route the mounted session's /dev/fuse traffic through channel.c, which
 * asks for parallel direct writes, shared mmap of direct-I/O files and
 * FUSE_HANDLE_KILLPRIV_V2, and for FUSE over io_uring when @uring and the
 * kernel offers it (when it does not, one notice if @uring_notice).  With
 * @uring_refused (uring=on), a ring that cannot serve is an error instead:
 * it is logged, the session ends and *@uring_refused is set, to be read
 * once the loop has returned.  Call after fuse_session_mount(), before the
 * loop.  0 or -1.
 */
int ffs_channel_attach(struct fuse_session *se, bool uring, bool uring_notice,
		       bool *uring_refused);
/*
 * A request of @len bytes at @buf is about to be dispatched by libfuse on
 * this thread (called by the /dev/fuse read hook and by uring.c).
 */
void ffs_channel_received(const void *buf, size_t len);
/*
 * Whether the WRITE or OPEN being served asks the daemon to clear
 * setuid/setgid (its caller lacks CAP_FSETID); false for other requests.
 * Context: the handler of that request, on the worker thread that read it.
 */
bool ffs_channel_kill_suidgid(void);

/* ---- kill-priv (killpriv.c) ---- */

/*
 * A write, a truncate or an O_TRUNC open by a caller without CAP_FSETID
 * clears setuid, and setgid by the rule of a local file system, as the
 * daemon (see killpriv.c for why the kernel's FUSE_HANDLE_KILLPRIV_V2
 * mark decides), before the data or the size changes, and the kernel's
 * cached mode is right when the request is answered.  A failure to clear
 * is logged once and changes nothing else.
 * ffs_killpriv_data(): @req is a WRITE about to store data or an OPEN
 * about to truncate; clears when the kernel marked it, and then tells the
 * kernel its cached attributes are stale (these replies carry none).
 * ffs_killpriv_setattr(): @req is a SETATTR with @valid, before it is
 * applied; clears when it sets the size and was marked, or, when it sets
 * nothing, removes privileges as the kernel asked (killpriv.c).  0, or
 * -errno to answer the SETATTR with.  Its reply carries the new mode.
 * Context: the handler of @req, on the worker thread that read it, before
 * its reply, with the daemon's credentials and no lock held; one fstat
 * (none while the inode is known to have neither bit), and a chmod (and a
 * notification) when a bit goes.
 */
void ffs_killpriv_data(fuse_req_t req, struct ffs_inode *inode);
int ffs_killpriv_setattr(fuse_req_t req, struct ffs_inode *inode, int valid);
/*
 * The mode of @inode's backing inode may have changed (a SETATTR, an
 * extended attribute, a name made or found for it): the next marked
 * request looks at it again.  Call after the change.
 */
void ffs_killpriv_mode_changed(struct ffs_inode *inode);

/* ---- FUSE over io_uring (uring.c) ---- */

/*
 * Start serving over io_uring, with ring payloads of @payload_size bytes
 * (the largest request the kernel will send).  Called by channel.c once
 * the INIT reply asking for it is written.  Logs the rings it serves on;
 * 0, or -errno when it could not start and the kernel keeps using
 * /dev/fuse (the caller says so).
 * Context: the libfuse worker that answered INIT; starts threads.
 */
int ffs_uring_start(struct fuse_session *se, size_t payload_size);
/*
 * Whether ffs_uring_start()'s threads run on their queue's CPU (when the
 * daemon may run on it); true unless set to false before the start.
 */
void ffs_uring_set_pin(bool pin);
/*
 * Where a handler may build a reply of up to @size bytes of data, to be
 * sent with fuse_reply_buf() from the same thread before it returns: the
 * ring entry that holds the request, so that the reply is not copied
 * again.  NULL when the request did not come over the ring (or is too
 * large): use a buffer of your own.
 */
void *ffs_uring_reply_buf(size_t size);
/*
 * Whether the request this thread serves may have its reply held
 * (defer.c): always over /dev/fuse; over the ring while its queue keeps
 * a thread free to serve the others (or can start one).
 * Context: the handler of the request, on the thread that took it.
 */
bool ffs_uring_may_hold(void);
/* Log why uring= was asked for and the kernel did not offer it. */
void ffs_uring_log_unoffered(void);
/*
 * Send a reply that belongs to a request taken from a ring entry through
 * that entry: its length, -ENOENT when it belongs to none (the caller
 * writes it to /dev/fuse), or another -errno.
 * Context: any thread that replies; after ffs_uring_stop(), replies are
 * handed off and sent by the next ffs_uring_stop().
 */
ssize_t ffs_uring_send(const struct iovec *iov, int count);
/*
 * Stop serving over the rings: each ring thread finishes the request it
 * serves and serves no more; the rings stay open until the process exits,
 * so that requests still arriving fail then, as on /dev/fuse (see
 * uring.c).  After ffs_defer_stop() and fuse_session_unmount(), before
 * fuse_session_destroy().  Nothing when no ring runs.
 */
void ffs_uring_stop(void);
/* Requests served from ring entries so far (.foliofs/stats). */
uint64_t ffs_uring_requests(void);
/* Threads serving the rings, each with one entry (.foliofs/stats). */
unsigned int ffs_uring_threads(void);
/*
 * Descriptors the rings hold (each thread's io_uring and eventfd): opened
 * after the daemon began serving, so outside fd_base, and counted in the
 * descriptor budget here instead.
 */
long ffs_uring_fds(void);

/* ---- control directory (ctl.c) ---- */

/* Name of the control directory at the root; reserved. */
#define FFS_CTL_NAME ".foliofs"

/*
 * Whether @name in @dir is the reserved name (FFS_CTL_NAME at the root):
 * a backing entry of that name is hidden, and cannot be made or removed.
 */
bool ffs_ctl_hides(const struct ffs_data *fs, const struct ffs_inode *dir,
		   const char *name);
/*
 * The entry of the control directory, for a lookup of the reserved name
 * at the root; its inode has ctl.c's handlers, which serve everything
 * below it.
 */
void ffs_ctl_root_entry(struct ffs_data *fs, struct fuse_entry_param *e);

/* ---- recording a trace (record.c) ---- */

/* One operation being recorded. */
struct ffs_trace_op {
	struct ffs_trace *tr;	/* the recorder: the request may be gone at the end */
	uint64_t gen;		/* the recording it began in; 0: not recorded */
	struct trace_rec rec;	/* time_ns, pid, op set at begin; the caller fills the rest */
	bool stamped;		/* rec.dur_ns set by ffs_trace_stamp() */
};

/*
 * The recorder of a mount; its clock starts now.  0 or -ENOMEM.
 * ffs_trace_destroy() stops a recording (leaving a valid trace) and frees
 * it, once no thread records: 0 or the stop's -errno (logged).
 */
int ffs_trace_init(struct ffs_trace **out);
int ffs_trace_destroy(struct ffs_trace *tr);
/*
 * Start recording into @path (absolute; created or truncated, 0644),
 * stop and flush everything.  0 or -errno with one line in @err: a
 * relative path or stop when not recording -EINVAL, start when recording
 * -EBUSY, or the file's error.
 * Context: any thread but the writer; may block on the file.
 */
int ffs_trace_start(struct ffs_trace *tr, const char *path, char *err, size_t errlen);
int ffs_trace_stop(struct ffs_trace *tr, char *err, size_t errlen);
/* "recording PATH\n" or "off\n" into @buf: its length. */
int ffs_trace_state(struct ffs_trace *tr, char *buf, size_t len);
/*
 * An operation (enum trace_op) of the caller of @req begins: when recording,
 * op->gen is set and op->rec has its time, pid and op.  Cheap when off.
 * ffs_trace_end(): it is answered now (its duration ends); recorded if it
 * began and ended in the same recording.  A caller that records after
 * sending the reply calls ffs_trace_stamp() right before sending it: the
 * requester may send its next request as soon as the reply is out, and
 * that one must not begin before this one ended.
 * Context: any thread serving requests; no lock needed; does not block
 * on I/O.
 */
void ffs_trace_begin(struct ffs_trace *tr, struct ffs_trace_op *op, fuse_req_t req,
		     unsigned int opcode);
void ffs_trace_end(struct ffs_trace_op *op);
void ffs_trace_stamp(struct ffs_trace_op *op);
/* The file id of a trace: the backing inode number folded to 32 bits. */
uint32_t ffs_trace_file_id(ino_t ino);

/* ---- held write replies (defer.c) ---- */

/*
 * Answer a WRITE of @count bytes that charged @dirtied bytes of dirty
 * budget, after the data is in the cache: at once, or held on the timer
 * thread for as long as the throttler (wb_balance_dirty) pauses the writer,
 * without holding the calling worker thread.  @op is the write's record,
 * ended when the reply goes.
 * Context: FUSE worker thread; no lock held; replies exactly once.
 */
void ffs_defer_reply_write(struct ffs_data *fs, fuse_req_t req, size_t count,
			   uint64_t dirtied, struct ffs_trace_op *op);
/* Start the timer thread (after fs->wb exists and after daemonizing): 0 or -errno. */
int ffs_defer_start(struct ffs_data *fs);
/*
 * After the session loop has returned: answer every held request, stop
 * the timer thread.  Before the session is unmounted or destroyed.
 */
void ffs_defer_stop(struct ffs_data *fs);

/* ---- dispatching requests (dispatch.c) ---- */

/*
 * The handlers of one kind of inode, chosen per inode (ffs_inode.ops) by
 * the session's table (ffs_ops): the backing inodes' (ffs_backing_ops,
 * ops.c) or the control directory's (ctl.c).  Each is the libfuse
 * low-level operation of the same name with the request's inodes already
 * resolved; it replies exactly once, but forget, which does not reply (the
 * caller answers, once for a whole FORGET_MULTI).  A request on two inodes
 * (rename, link, copy_file_range) goes to the handlers of the first
 * inode named below, which refuse a second inode that is not theirs, as
 * the VFS refuses a rename or link across mounts.  Checks that depend on
 * no inode (a lookup's name, a symlink's length) are made before
 * dispatching.
 */
struct ffs_node_ops {
	void (*lookup)(fuse_req_t req, struct ffs_inode *dir, const char *name);
	void (*forget)(struct ffs_data *fs, struct ffs_inode *inode, uint64_t nlookup);
	void (*getattr)(fuse_req_t req, struct ffs_inode *inode, struct fuse_file_info *fi);
	void (*setattr)(fuse_req_t req, struct ffs_inode *inode, struct stat *attr, int valid,
			struct fuse_file_info *fi);
	void (*readlink)(fuse_req_t req, struct ffs_inode *inode);
	void (*mknod)(fuse_req_t req, struct ffs_inode *dir, const char *name, mode_t mode,
		      dev_t rdev);
	void (*mkdir)(fuse_req_t req, struct ffs_inode *dir, const char *name, mode_t mode);
	void (*unlink)(fuse_req_t req, struct ffs_inode *dir, const char *name);
	void (*rmdir)(fuse_req_t req, struct ffs_inode *dir, const char *name);
	void (*symlink)(fuse_req_t req, const char *link, struct ffs_inode *dir,
			const char *name);
	/* Dispatched by @dir. */
	void (*rename)(fuse_req_t req, struct ffs_inode *dir, const char *name,
		       struct ffs_inode *newdir, const char *newname, unsigned int flags);
	/* Dispatched by @newdir, as the kernel's link is the directory's. */
	void (*link)(fuse_req_t req, struct ffs_inode *inode, struct ffs_inode *newdir,
		     const char *newname);
	void (*open)(fuse_req_t req, struct ffs_inode *inode, struct fuse_file_info *fi);
	void (*read)(fuse_req_t req, struct ffs_inode *inode, size_t size, off_t off,
		     struct fuse_file_info *fi);
	void (*write)(fuse_req_t req, struct ffs_inode *inode, const char *buf, size_t size,
		      off_t off, struct fuse_file_info *fi);
	void (*flush)(fuse_req_t req, struct ffs_inode *inode, struct fuse_file_info *fi);
	void (*release)(fuse_req_t req, struct ffs_inode *inode, struct fuse_file_info *fi);
	void (*fsync)(fuse_req_t req, struct ffs_inode *inode, int datasync,
		      struct fuse_file_info *fi);
	void (*opendir)(fuse_req_t req, struct ffs_inode *inode, struct fuse_file_info *fi);
	void (*readdir)(fuse_req_t req, struct ffs_inode *inode, size_t size, off_t off,
			struct fuse_file_info *fi);
	void (*readdirplus)(fuse_req_t req, struct ffs_inode *inode, size_t size, off_t off,
			    struct fuse_file_info *fi);
	void (*releasedir)(fuse_req_t req, struct ffs_inode *inode, struct fuse_file_info *fi);
	void (*fsyncdir)(fuse_req_t req, struct ffs_inode *inode, int datasync,
			 struct fuse_file_info *fi);
	void (*statfs)(fuse_req_t req, struct ffs_inode *inode);
	void (*setxattr)(fuse_req_t req, struct ffs_inode *inode, const char *name,
			 const char *value, size_t size, int flags);
	void (*getxattr)(fuse_req_t req, struct ffs_inode *inode, const char *name, size_t size);
	void (*listxattr)(fuse_req_t req, struct ffs_inode *inode, size_t size);
	void (*removexattr)(fuse_req_t req, struct ffs_inode *inode, const char *name);
	void (*access)(fuse_req_t req, struct ffs_inode *inode, int mask);
	void (*create)(fuse_req_t req, struct ffs_inode *dir, const char *name, mode_t mode,
		       struct fuse_file_info *fi);
	void (*fallocate)(fuse_req_t req, struct ffs_inode *inode, int mode, off_t off,
			  off_t len, struct fuse_file_info *fi);
	void (*lseek)(fuse_req_t req, struct ffs_inode *inode, off_t off, int whence,
		      struct fuse_file_info *fi);
	/* Dispatched by @in. */
	void (*copy_file_range)(fuse_req_t req, struct ffs_inode *in, off_t off_in,
				struct fuse_file_info *fi_in, struct ffs_inode *out,
				off_t off_out, struct fuse_file_info *fi_out, size_t len,
				int flags);
};

/* Largest read or write the kernel is offered (max_write, max_pages). */
#define FFS_MAX_IO (1u << 20)

/*
 * The session's operations: INIT, and every request on an inode handed
 * to that inode's handlers.
 */
extern const struct fuse_lowlevel_ops ffs_ops;

/* A single path component: 0, or -ENOENT (empty), -ENAMETOOLONG, -EINVAL ('/'). */
int ffs_check_name(const char *name);

/* ---- backing inodes (ops.c) ---- */

/*
 * The handlers of backing inodes: namespace operations as *at() calls
 * relative to O_PATH descriptors, data through writeback.h.
 */
extern const struct ffs_node_ops ffs_backing_ops;

#endif /* FOLIOFS_FUSEFS_H */
