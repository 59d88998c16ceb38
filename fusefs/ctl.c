// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ctl.c - the control directory MOUNTPOINT/.foliofs.
 *
 * It is found by lookup but not listed by readdir of the root, so a tool
 * that insists on an empty directory (initdb) still sees one.  The name is
 * reserved: a backing entry called .foliofs at the root is hidden.
 *
 *   .foliofs/stats   read-only, "name value" lines like /proc/vmstat,
 *                    made when the file is opened (each open is one
 *                    snapshot; counters are exact, the set is not atomic)
 *   .foliofs/fault   the fault injected into backing I/O (writeback.h):
 *                    read it to see it, write a spec to set it ("off" to
 *                    clear); a bad spec fails with EINVAL and changes
 *                    nothing.  Writable by the mounting user only.
 *   .foliofs/files   the writeback queue, one line per file holding dirty
 *                    or writeback data (wb_ctx_files()); a snapshot at
 *                    open.  Readable by the mounting user only: it names
 *                    backing paths.
 *   .foliofs/sync    write anything to write back and sync every file;
 *                    the write returns when that is done, or fails with
 *                    the first error.  Anyone may, as anyone may sync(1).
 *   .foliofs/trace   the trace recorder (record.c): read gives "off" or
 *                    "recording FILE"; write "start FILE" (an absolute
 *                    path) or "stop".  A bad command fails with EINVAL,
 *                    a start while recording with EBUSY, and changes
 *                    nothing.  Writable by the mounting user only.
 *   .foliofs/folios  every cached folio of every file, one line each,
 *                    "INO INDEX ORDER FLAGS" (wb_ctx_folios()): a snapshot
 *                    at open, sized by the walk.  FLAGS: u uptodate, d
 *                    dirty, w writeback, r readahead mark, A active list,
 *                    R referenced, s unsynced, in that order ("-": none).
 *                    Readable by the mounting user only, as files.
 *   .foliofs/evict   write "INO START LEN" (bytes; LEN 0: to the end) to
 *                    drop that file's clean, unused folios wholly inside
 *                    [START, START + LEN), as POSIX_FADV_DONTNEED does;
 *                    dirty and busy folios stay.  A read through the same
 *                    open file then gives what was done ("dropped N bytes
 *                    B kept_held H kept_busy K"; an inode no cached file
 *                    has drops nothing, as DONTNEED on an uncached file).
 *                    Bad input fails with EINVAL, logged with the reason,
 *                    which a read then gives.
 *                    Mounting user only (0600): it names files by number,
 *                    whoever may open them.
 *   .foliofs/errors  the last CTL_ERRORS writes of a control file that
 *                    were refused, oldest first, one line each: "TIME
 *                    PATH: REASON" (TIME in UTC, ISO 8601), the same line
 *                    the daemon logs, so that a shell user whose write
 *                    said only "Invalid argument" can read why without
 *                    syslog.  Mounting user only (0400), as the writes it
 *                    records are theirs.
 *   .foliofs/policies  read-only: every policy there is, built in or
 *                    loaded, one line each (wb_policy_list()): "KIND NAME
 *                    ORIGIN PARAM=DEFAULT[MIN,MAX]...".
 *   .foliofs/load    write the absolute path of a policy library to load
 *                    its policies (wb_policy_load(): owned by the mounting
 *                    user or root, not group- or world-writable, built for
 *                    this ABI); a refusal fails with EPERM or EINVAL,
 *                    changes nothing, and is logged with the reason.
 *                    A read after a refused write gives the reason.
 *                    Mounting user only (0600): the library runs in the
 *                    daemon.
 *   .foliofs/tunables/NAME
 *                    one file per run-time setting (wb_tunable_name()),
 *                    like /proc/sys/vm: read gives the value and a
 *                    newline, a write sets it.  A bad value fails with
 *                    EINVAL and changes nothing; the reason is logged and
 *                    is what a read through the same open file then
 *                    gives.  Writable by the mounting user only.  The
 *                    parameters of the policies in force are there too
 *                    (account.NAME, size.NAME); their names follow the
 *                    policy, so their entries are not cached by the kernel.
 *
 * "Writable by the mounting user only" is the mode: 0644 owned by the
 * daemon's user, which the kernel enforces (the mount always has
 * default_permissions), root passing as everywhere.  A write of fault or
 * of a tunable takes everything written through that open file so far as
 * the value, so a value split over several write() calls still works.
 */
#include "fusefs.h"
#include "writeback.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* st_ino of the control files: far from real inode numbers. */
#define CTL_INO_BASE 0x7f0f0f0f00000000ull
#define CTL_INO_TUNABLE (CTL_INO_BASE + 0x100)	/* + the tunable's index */
#define CTL_STATS_MAX 16384
/* More tunables than this are not shown (checked in ctl_nr_tunables). */
#define CTL_TUNABLES_MAX 64

/* Which control file an inode is. */
enum ffs_ctl {
	FFS_CTL_DIR = 1,	/* .foliofs (st_ino CTL_INO_BASE + 1, and so on) */
	FFS_CTL_STATS,	/* .foliofs/stats */
	FFS_CTL_FAULT,	/* .foliofs/fault: fault injection for tests */
	FFS_CTL_FILES,	/* .foliofs/files: the writeback queue */
	FFS_CTL_SYNC,	/* .foliofs/sync: a write syncs every file */
	FFS_CTL_TUNABLES,	/* .foliofs/tunables (a directory) */
	FFS_CTL_TUNABLE,	/* .foliofs/tunables/NAME */
	FFS_CTL_TRACE,	/* .foliofs/trace: start and stop recording */
	FFS_CTL_FOLIOS,	/* .foliofs/folios: every cached folio */
	FFS_CTL_EVICT,	/* .foliofs/evict: drop a file's clean folios */
	FFS_CTL_ERRORS,	/* .foliofs/errors: the last writes refused, and why */
	FFS_CTL_POLICIES,	/* .foliofs/policies: every policy, built in or loaded */
	FFS_CTL_LOAD,	/* .foliofs/load: write a library's path to load its policies */
};

/*
 * A control inode: what the kernel knows (its ops are ctl_ops, so every
 * request on it comes here) and which file it is.  Made once, immutable,
 * never freed: a forget changes nothing.
 */
struct ctl_inode {
	struct ffs_inode inode;	/* first: ctl_of() */
	enum ffs_ctl kind;
};

static const struct ffs_node_ops ctl_ops;

#define CTL_INODE(k, mode) { .inode = { .ops = &ctl_ops, .fd = -1, .type = (mode) }, .kind = (k) }

static struct ctl_inode ctl_dir = CTL_INODE(FFS_CTL_DIR, S_IFDIR);
static struct ctl_inode ctl_stats = CTL_INODE(FFS_CTL_STATS, S_IFREG);
static struct ctl_inode ctl_fault = CTL_INODE(FFS_CTL_FAULT, S_IFREG);
static struct ctl_inode ctl_files = CTL_INODE(FFS_CTL_FILES, S_IFREG);
static struct ctl_inode ctl_sync = CTL_INODE(FFS_CTL_SYNC, S_IFREG);
static struct ctl_inode ctl_trace = CTL_INODE(FFS_CTL_TRACE, S_IFREG);
static struct ctl_inode ctl_folios = CTL_INODE(FFS_CTL_FOLIOS, S_IFREG);
static struct ctl_inode ctl_evict = CTL_INODE(FFS_CTL_EVICT, S_IFREG);
static struct ctl_inode ctl_errors = CTL_INODE(FFS_CTL_ERRORS, S_IFREG);
static struct ctl_inode ctl_policies = CTL_INODE(FFS_CTL_POLICIES, S_IFREG);
static struct ctl_inode ctl_load = CTL_INODE(FFS_CTL_LOAD, S_IFREG);
static struct ctl_inode ctl_tunables = CTL_INODE(FFS_CTL_TUNABLES, S_IFDIR);
/* tunables/NAME: the i-th is slot i of wb_tunable_slot_name(). */
static struct ctl_inode ctl_tunable[CTL_TUNABLES_MAX] = {
	[0 ... CTL_TUNABLES_MAX - 1] = CTL_INODE(FFS_CTL_TUNABLE, S_IFREG),
};

/* The entries of .foliofs after "." and "..", in readdir order. */
static struct {
	const char *name;
	struct ffs_inode *inode;
} const ctl_names[] = {
	{ "stats", &ctl_stats.inode },
	{ "fault", &ctl_fault.inode },
	{ "files", &ctl_files.inode },
	{ "sync", &ctl_sync.inode },
	{ "trace", &ctl_trace.inode },
	{ "folios", &ctl_folios.inode },
	{ "evict", &ctl_evict.inode },
	{ "errors", &ctl_errors.inode },
	{ "policies", &ctl_policies.inode },
	{ "load", &ctl_load.inode },
	{ "tunables", &ctl_tunables.inode },
};

#define CTL_NR_NAMES (sizeof(ctl_names) / sizeof(ctl_names[0]))

/*
 * The last refused writes (.foliofs/errors): a ring of lines, oldest at
 * ctl_errors_next once it is full.  One mount per daemon, like the
 * control inodes above.
 */
#define CTL_ERRORS 32
static struct {
	pthread_mutex_t lock;		/* leaf: protects the rest */
	char line[CTL_ERRORS][FFS_ERRLEN + 96];
	unsigned int next;		/* where the next line goes */
	unsigned int count;		/* lines held, at most CTL_ERRORS */
} ctl_errors_ring = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * Per open control file; fuse_file_info.fh points to it.  Threads sharing
 * one open file may write it at once: every access stays within cap, what
 * such a race sets is whatever the last write made of it.
 */
struct ctl_buf {
	struct ffs_handle h;	/* first: teardown frees through it */
	char *data;		/* what a read returns, or what was written */
	size_t len;
	size_t cap;
	char msg[FFS_ERRLEN];	/* why the last write failed: read gives it */
	size_t msg_len;
};

/* Keep "TIME .foliofs/@dir@name: @err" as the newest line of .foliofs/errors. */
static void ctl_errors_add(const char *dir, const char *name, const char *err)
{
	char stamp[32] = "-";
	struct timespec ts;
	struct tm tm;

	if (!clock_gettime(CLOCK_REALTIME, &ts) && gmtime_r(&ts.tv_sec, &tm))
		strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	pthread_mutex_lock(&ctl_errors_ring.lock);
	snprintf(ctl_errors_ring.line[ctl_errors_ring.next], sizeof(ctl_errors_ring.line[0]),
		 "%s .foliofs/%s%s: %s", stamp, dir, name, err);
	ctl_errors_ring.next = (ctl_errors_ring.next + 1) % CTL_ERRORS;
	if (ctl_errors_ring.count < CTL_ERRORS)
		ctl_errors_ring.count++;
	pthread_mutex_unlock(&ctl_errors_ring.lock);
}

/* .foliofs/errors into @buf: the lines held, oldest first, each with a newline. */
static void ctl_fill_errors(struct ctl_buf *buf)
{
	unsigned int first;

	buf->len = 0;
	pthread_mutex_lock(&ctl_errors_ring.lock);
	first = (ctl_errors_ring.next + CTL_ERRORS - ctl_errors_ring.count) % CTL_ERRORS;
	for (unsigned int i = 0; i < ctl_errors_ring.count; i++) {
		const char *line = ctl_errors_ring.line[(first + i) % CTL_ERRORS];
		int n = snprintf(buf->data + buf->len, buf->cap - buf->len, "%s\n", line);

		if (n < 0 || (size_t)n >= buf->cap - buf->len)
			break;
		buf->len += (size_t)n;
	}
	pthread_mutex_unlock(&ctl_errors_ring.lock);
}

static struct ffs_data *ctl_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static const struct ctl_inode *ctl_of(const struct ffs_inode *inode)
{
	return (const struct ctl_inode *)inode;
}

static enum ffs_ctl ctl_kind(const struct ffs_inode *inode)
{
	return ctl_of(inode)->kind;
}

/* Tunable slots, some empty (parameters the policies in force do not have). */
static size_t ctl_nr_tunables(void)
{
	size_t n = wb_tunable_slots();

	return n < CTL_TUNABLES_MAX ? n : CTL_TUNABLES_MAX;
}

/* The slot of the tunable @inode. */
static size_t ctl_tunable_slot(const struct ffs_inode *inode)
{
	return (size_t)(ctl_of(inode) - ctl_tunable);
}

/* The name of tunable @inode now into @buf (empty if its slot is). */
static const char *ctl_tunable_name(struct ffs_data *fs, const struct ffs_inode *inode,
				    char *buf, size_t len)
{
	if (wb_tunable_slot_name(fs->wb, ctl_tunable_slot(inode), buf, len))
		buf[0] = '\0';
	return buf;
}

bool ffs_ctl_hides(const struct ffs_data *fs, const struct ffs_inode *dir,
		   const char *name)
{
	return dir == &fs->root && !strcmp(name, FFS_CTL_NAME);
}

static mode_t ctl_mode(const struct ffs_inode *inode)
{
	switch (ctl_kind(inode)) {
	case FFS_CTL_DIR:
	case FFS_CTL_TUNABLES:
		return 0555;
	case FFS_CTL_FAULT:
	case FFS_CTL_TUNABLE:
	case FFS_CTL_TRACE:
		return 0644;
	case FFS_CTL_FILES:
	case FFS_CTL_FOLIOS:
	case FFS_CTL_ERRORS:
		return 0400;
	case FFS_CTL_EVICT:
	case FFS_CTL_LOAD:
		return 0600;
	case FFS_CTL_SYNC:
		return 0222;
	default:
		return 0444;
	}
}

static void ctl_stat(const struct ffs_inode *inode, struct stat *st)
{
	static struct timespec mounted;

	if (!mounted.tv_sec)
		clock_gettime(CLOCK_REALTIME, &mounted);
	memset(st, 0, sizeof(*st));
	st->st_ino = ctl_kind(inode) == FFS_CTL_TUNABLE ?
		CTL_INO_TUNABLE + (uint64_t)ctl_tunable_slot(inode) : CTL_INO_BASE + ctl_kind(inode);
	st->st_mode = inode->type | ctl_mode(inode);
	st->st_nlink = inode->type == S_IFDIR ? 2 : 1;
	st->st_uid = geteuid();
	st->st_gid = getegid();
	st->st_blksize = 4096;
	st->st_atim = st->st_mtim = st->st_ctim = mounted;
}

/*
 * What setattr may do to a control file: 0 for what must not fail a close
 * (time updates, truncation to 0 of a writable one), changing nothing;
 * -EPERM for anything else.
 */
static int ctl_setattr_check(const struct ffs_inode *inode, const struct stat *attr, int valid)
{
	const int times = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
			  FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME | FUSE_SET_ATTR_FORCE |
			  FUSE_SET_ATTR_KILL_SUID | FUSE_SET_ATTR_KILL_SGID |
			  FUSE_SET_ATTR_KILL_PRIV | FUSE_SET_ATTR_FILE | FUSE_SET_ATTR_OPEN |
			  FUSE_SET_ATTR_TIMES_SET | FUSE_SET_ATTR_TOUCH;
	bool writable = ctl_mode(inode) & 0200;

	/*
	 * The times of a control file are the mount's and stay so; the kernel
	 * sends a time update when a written file is closed (with the
	 * writeback cache), and failing it would fail the close.  Truncating
	 * a writable one to 0 (a shell's ">") is what opening it does anyway.
	 */
	if ((valid & FUSE_SET_ATTR_SIZE) && writable && attr->st_size == 0)
		valid &= ~FUSE_SET_ATTR_SIZE;
	return valid & ~times ? -EPERM : 0;
}

static void ctl_entry(struct ffs_data *fs, struct ffs_inode *inode,
		      struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = (uintptr_t)inode;
	e->attr_timeout = fs->cfg->attr_timeout;
	e->entry_timeout = fs->cfg->attr_timeout;
	/* A parameter's slot holds another name after a change of policy. */
	if (ctl_kind(inode) == FFS_CTL_TUNABLE && !wb_tunable_name(ctl_tunable_slot(inode)))
		e->entry_timeout = 0;
	ctl_stat(inode, &e->attr);
}

static struct ffs_inode *ctl_child(struct ffs_data *fs, const struct ffs_inode *dir,
				   const char *name)
{
	char slot[64];

	if (ctl_kind(dir) == FFS_CTL_DIR) {
		for (size_t i = 0; i < CTL_NR_NAMES; i++) {
			if (!strcmp(name, ctl_names[i].name))
				return ctl_names[i].inode;
		}
		return NULL;
	}
	for (size_t i = 0, n = ctl_nr_tunables(); i < n; i++) {
		if (!wb_tunable_slot_name(fs->wb, i, slot, sizeof(slot)) && !strcmp(name, slot))
			return &ctl_tunable[i].inode;
	}
	return NULL;
}

void ffs_ctl_root_entry(struct ffs_data *fs, struct fuse_entry_param *e)
{
	ctl_entry(fs, &ctl_dir.inode, e);
}

/* Lookup of @name in the control inode @parent: 0 with @e filled, or -errno. */
static int ctl_do_lookup(struct ffs_data *fs, struct ffs_inode *parent, const char *name,
			 struct fuse_entry_param *e)
{
	struct ffs_inode *child;

	if (parent->type != S_IFDIR)
		return -ENOTDIR;
	if (!strcmp(name, ".")) {
		ctl_entry(fs, parent, e);
	} else if (!strcmp(name, "..")) {
		if (parent != &ctl_tunables.inode)
			return -ENOENT;	/* the kernel resolves ".." itself */
		ctl_entry(fs, &ctl_dir.inode, e);
	} else if ((child = ctl_child(fs, parent, name))) {
		ctl_entry(fs, child, e);
	} else {
		return -ENOENT;
	}
	return 0;
}

/* A handle with room for @cap bytes, or NULL. */
static struct ctl_buf *ctl_buf_alloc(size_t cap)
{
	struct ctl_buf *buf = calloc(1, sizeof(*buf));

	if (buf && cap) {
		buf->data = malloc(cap);
		if (!buf->data) {
			free(buf);
			return NULL;
		}
		buf->cap = cap;
	}
	return buf;
}

static void ctl_buf_free(struct ctl_buf *buf)
{
	free(buf->data);
	free(buf);
}

/* The handle of an open control file is gone (ffs_handle_add's free_fn). */
static void ctl_handle_free(struct ffs_data *fs, struct ffs_handle *h)
{
	(void)fs;
	ctl_buf_free((struct ctl_buf *)h);
}

static void ctl_fill_stats(struct ffs_data *fs, struct ctl_buf *buf)
{
	size_t used = wb_ctx_stats(fs->wb, buf->data, buf->cap);
	size_t ninodes;
	int n;

	pthread_mutex_lock(&fs->itable_lock);
	ninodes = fs->ninodes;
	pthread_mutex_unlock(&fs->itable_lock);
	n = snprintf(buf->data + used, buf->cap - used,
		     "inodes %zu\n" "kept_inodes %llu\n"
		     "fds %ld\n" "fd_budget %ld\n" "fds_idle_closed %llu\n"
		     "fds_reopened %llu\n" "fds_refused %llu\n" "fd_cache_max %ld\n"
		     "path_fds %ld\n"
		     "inode_refinds %llu\n" "inode_stale %llu\n" "max_inodes %zu\n"
		     "inodes_pruned %llu\n", ninodes,
		     (unsigned long long)atomic_load(&fs->kept_inodes),
		     atomic_load(&fs->nr_fds), atomic_load(&fs->fd_budget),
		     (unsigned long long)atomic_load(&fs->fd_idle_closed),
		     (unsigned long long)atomic_load(&fs->fd_reopened),
		     (unsigned long long)atomic_load(&fs->fd_refused),
		     atomic_load(&fs->fd_cache_max), atomic_load(&fs->path_fds),
		     (unsigned long long)atomic_load(&fs->inode_refinds),
		     (unsigned long long)atomic_load(&fs->inode_stale), fs->cfg->max_inodes,
		     (unsigned long long)atomic_load(&fs->inodes_pruned));
	used += n > 0 && (size_t)n < buf->cap - used ? (size_t)n : 0;
	/* Requests served from io_uring entries (0: all over /dev/fuse). */
	n = snprintf(buf->data + used, buf->cap - used,
		     "fuse_uring_requests %llu\n" "fuse_uring_threads %u\n",
		     (unsigned long long)ffs_uring_requests(), ffs_uring_threads());
	used += n > 0 && (size_t)n < buf->cap - used ? (size_t)n : 0;
	buf->len = used;
}

/* What a read of a file opened read-only gives: its contents now. */
static int ctl_fill(struct ffs_data *fs, struct ffs_inode *inode, struct ctl_buf *buf)
{
	char slot[64];
	ssize_t n;
	int len;

	switch (ctl_kind(inode)) {
	case FFS_CTL_STATS:
		ctl_fill_stats(fs, buf);
		return 0;
	case FFS_CTL_FILES:
	case FFS_CTL_FOLIOS:
		free(buf->data);
		buf->data = NULL;
		n = ctl_kind(inode) == FFS_CTL_FILES ? wb_ctx_files(fs->wb, &buf->data) :
						  wb_ctx_folios(fs->wb, &buf->data);
		if (n < 0)
			return (int)n;
		buf->len = buf->cap = (size_t)n;
		return 0;
	case FFS_CTL_FAULT:
		wb_ctx_get_fault(fs->wb, buf->data, buf->cap - 1);
		buf->len = strlen(buf->data);
		buf->data[buf->len++] = '\n';
		return 0;
	case FFS_CTL_TRACE:
		buf->len = (size_t)ffs_trace_state(fs->trace, buf->data, buf->cap);
		return 0;
	case FFS_CTL_ERRORS:
		ctl_fill_errors(buf);
		return 0;
	case FFS_CTL_POLICIES:
		buf->len = wb_policy_list(buf->data, buf->cap);
		return 0;
	case FFS_CTL_TUNABLE:
		len = wb_tunable_get(fs->wb, ctl_tunable_name(fs, inode, slot, sizeof(slot)),
				     buf->data, buf->cap - 1);
		if (len < 0)
			return len;
		buf->len = (size_t)len < buf->cap - 1 ? (size_t)len : buf->cap - 1;
		buf->data[buf->len++] = '\n';
		return 0;
	default:
		return 0;	/* sync: nothing to read */
	}
}

/* Open a control file: 0 or -errno; fills fi. */
static int ctl_do_open(struct ffs_data *fs, struct ffs_inode *inode, struct fuse_file_info *fi)
{
	bool rdonly = (fi->flags & O_ACCMODE) == O_RDONLY;
	struct ctl_buf *buf;
	int ret = 0;

	if (inode->type == S_IFDIR)
		return -EISDIR;
	/* Root passes the kernel's mode check: these are read-only for all. */
	if ((ctl_kind(inode) == FFS_CTL_STATS || ctl_kind(inode) == FFS_CTL_FILES ||
	     ctl_kind(inode) == FFS_CTL_FOLIOS || ctl_kind(inode) == FFS_CTL_ERRORS ||
	     ctl_kind(inode) == FFS_CTL_POLICIES) &&
	    (!rdonly || (fi->flags & O_TRUNC)))
		return -EACCES;
	buf = ctl_buf_alloc(ctl_kind(inode) == FFS_CTL_SYNC ? 0 : CTL_STATS_MAX);
	if (!buf)
		return -ENOMEM;
	if (rdonly)
		ret = ctl_fill(fs, inode, buf);
	if (ret) {
		ctl_buf_free(buf);
		return ret;
	}
	ffs_handle_add(fs, &buf->h, ctl_handle_free);
	fi->fh = (uintptr_t)buf;
	fi->direct_io = 1;	/* size 0 in stat, content on read, as in /proc */
	return 0;
}

/* "start FILE" or "stop" written to .foliofs/trace. */
static int ctl_set_trace(struct ffs_data *fs, const char *cmd, char *err, size_t errlen)
{
	if (!strcmp(cmd, "stop"))
		return ffs_trace_stop(fs->trace, err, errlen);
	if (!strncmp(cmd, "start ", 6) && cmd[6])
		return ffs_trace_start(fs->trace, cmd + 6, err, errlen);
	snprintf(err, errlen, "%.64s: not \"start FILE\" or \"stop\"", cmd);
	return -EINVAL;
}

/*
 * A library's path written to .foliofs/load.  Absolute: the daemon's
 * directory is not the writer's.  The daemon runs as the mounting user.
 */
static int ctl_load_policy(const char *path, char *err, size_t errlen)
{
	if (path[0] != '/') {
		snprintf(err, errlen, "load=%.200s: not an absolute path", path);
		return -EINVAL;
	}
	return wb_policy_load(path, getuid(), err, errlen);
}

/* Apply @spec to the fault, trace, load or tunable @inode: 0 or -errno with a reason in @err. */
static int ctl_set(struct ffs_data *fs, struct ffs_inode *inode, const char *spec,
		   char *err, size_t errlen)
{
	char slot[64];

	if (ctl_kind(inode) == FFS_CTL_FAULT)
		return wb_ctx_set_fault(fs->wb, spec, err, errlen);
	if (ctl_kind(inode) == FFS_CTL_TRACE)
		return ctl_set_trace(fs, spec, err, errlen);
	if (ctl_kind(inode) == FFS_CTL_LOAD)
		return ctl_load_policy(spec, err, errlen);
	return wb_tunable_set(fs->wb, ctl_tunable_name(fs, inode, slot, sizeof(slot)), spec,
			      err, errlen);
}

/* What a read through this open file gives next: @text and a newline. */
static void ctl_set_msg(struct ctl_buf *buf, const char *text)
{
	buf->msg_len = (size_t)snprintf(buf->msg, sizeof(buf->msg) - 1, "%s", text);
	if (buf->msg_len > sizeof(buf->msg) - 2)
		buf->msg_len = sizeof(buf->msg) - 2;
	buf->msg[buf->msg_len++] = '\n';
}

/*
 * A write to .foliofs/@dir@name failed with @ret for the reason in @err
 * (strerror when empty): logged, and what a read gives next.
 */
static void ctl_refused(struct ctl_buf *buf, const char *dir, const char *name, char *err,
			int ret)
{
	if (!err[0])
		snprintf(err, FFS_ERRLEN, "%s", strerror(-ret));
	/* fuse_log: to stderr in the foreground, syslog in the background. */
	fuse_log(FUSE_LOG_ERR, ".foliofs/%s%s: %s\n", dir, name, err);
	ctl_errors_add(dir, name, err);
	ctl_set_msg(buf, err);
}

static int ctl_write_value(struct ffs_data *fs, struct ffs_inode *inode, struct ctl_buf *buf,
			   const char *data, size_t size, off_t off)
{
	char spec[CTL_STATS_MAX], err[FFS_ERRLEN], slot[64];
	const char *name = ctl_kind(inode) == FFS_CTL_FAULT ? "fault" :
			   ctl_kind(inode) == FFS_CTL_TRACE ? "trace" :
			   ctl_kind(inode) == FFS_CTL_LOAD ? "load" :
			   ctl_tunable_name(fs, inode, slot, sizeof(slot));
	size_t len, bad;
	int ret;

	if (off < 0 || (size_t)off > buf->len || size >= CTL_STATS_MAX - (size_t)off)
		return -EINVAL;
	/* The value is everything written through this handle so far. */
	memcpy(spec, buf->data, (size_t)off);
	memcpy(spec + off, data, size);
	len = (size_t)off + size;
	while (len && isspace((unsigned char)spec[len - 1]))
		len--;
	spec[len] = '\0';
	err[0] = '\0';
	/*
	 * One line of text: the parsers stop at a NUL ("5\0junk" would set 5),
	 * and the value goes into the log line, which a newline would split.
	 */
	for (bad = 0; bad < len; bad++) {
		if ((unsigned char)spec[bad] < 0x20 || spec[bad] == 0x7f)
			break;
	}
	if (bad < len) {
		snprintf(err, sizeof(err), "%s: control character at byte %zu: a value is one line of text",
			 name, bad);
		ret = -EINVAL;
	} else if (!len) {
		snprintf(err, sizeof(err), "%s=: empty value", name);
		ret = -EINVAL;
	} else {
		ret = ctl_set(fs, inode, spec, err, sizeof(err));
	}
	if (ret) {
		ctl_refused(buf, ctl_kind(inode) == FFS_CTL_TUNABLE ? "tunables/" : "", name, err, ret);
		return ret;
	}
	buf->msg_len = 0;
	memcpy(buf->data + off, data, size);
	buf->len = (size_t)off + size;
	return (int)size;
}

/* One unsigned decimal number of "INO START LEN" at *@p, moved past it. */
static int ctl_parse_u64(const char **p, uint64_t max, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	while (*s == ' ' || *s == '\t')
		s++;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	for (; isdigit((unsigned char)*s); s++) {
		unsigned int d = (unsigned int)(*s - '0');

		if (v > (max - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	*p = s;
	*out = v;
	return 0;
}

/*
 * "INO START LEN" written to .foliofs/evict: 0 with the result as the
 * message, or -errno with the reason in @err.
 */
static int ctl_do_evict(struct ffs_data *fs, const char *cmd, char *err, size_t errlen,
		     struct ctl_buf *buf)
{
	const uint64_t off_max = (uint64_t)INT64_MAX;
	struct bs_evict_result res;
	uint64_t ino, start, len;
	const char *p = cmd;
	char done[FFS_ERRLEN];
	int ret;

	if (ctl_parse_u64(&p, UINT64_MAX, &ino) || ctl_parse_u64(&p, off_max, &start) ||
	    ctl_parse_u64(&p, off_max, &len) || *p) {
		snprintf(err, errlen, "%.64s: not \"INO START LEN\" (decimal numbers, bytes)", cmd);
		return -EINVAL;
	}
	if (len > off_max - start) {
		snprintf(err, errlen, "%.64s: START + LEN is past the largest offset", cmd);
		return -EINVAL;
	}
	/* No cached file has the inode (-ENOENT): nothing to drop, res is zero. */
	ret = wb_ctx_evict(fs->wb, ino, (off_t)start, len ? (off_t)(start + len) : INT64_MAX,
			   &res);
	if (ret && ret != -ENOENT) {
		snprintf(err, errlen, "inode %llu: %s", (unsigned long long)ino, strerror(-ret));
		return ret;
	}
	snprintf(done, sizeof(done), "dropped %llu bytes %llu kept_held %llu kept_busy %llu",
		 (unsigned long long)res.folios, (unsigned long long)res.bytes,
		 (unsigned long long)res.kept_held, (unsigned long long)res.kept_busy);
	ctl_set_msg(buf, done);
	return 0;
}

/* A write to .foliofs/evict: each write() is one command. */
static int ctl_write_evict(struct ffs_data *fs, struct ctl_buf *buf, const char *data,
			   size_t size)
{
	char cmd[256], err[FFS_ERRLEN];
	size_t len = size;
	int ret;

	err[0] = '\0';
	while (len && isspace((unsigned char)data[len - 1]))
		len--;
	if (len >= sizeof(cmd)) {
		snprintf(err, sizeof(err), "a command of %zu bytes: not \"INO START LEN\"", len);
		ret = -EINVAL;
	} else {
		memcpy(cmd, data, len);
		cmd[len] = '\0';
		ret = ctl_do_evict(fs, cmd, err, sizeof(err), buf);
	}
	if (ret) {
		ctl_refused(buf, "", "evict", err, ret);
		return ret;
	}
	return (int)size;
}

/* Write to a control file: bytes taken or -errno. */
static int ctl_do_write(struct ffs_data *fs, struct ffs_inode *inode, struct fuse_file_info *fi,
			const char *data, size_t size, off_t off)
{
	struct ctl_buf *buf = (struct ctl_buf *)(uintptr_t)fi->fh;
	int ret;

	switch (ctl_kind(inode)) {
	case FFS_CTL_FAULT:
	case FFS_CTL_TUNABLE:
	case FFS_CTL_TRACE:
	case FFS_CTL_LOAD:
		return ctl_write_value(fs, inode, buf, data, size, off);
	case FFS_CTL_EVICT:
		if (size > INT32_MAX)
			return -EINVAL;
		return ctl_write_evict(fs, buf, data, size);
	case FFS_CTL_SYNC:
		if (size > INT32_MAX)
			size = INT32_MAX;	/* taken whole, whatever it says */
		ret = wb_ctx_sync_all(fs->wb);
		return ret ? ret : (int)size;
	default:
		return -EBADF;
	}
}

static void ctl_read(fuse_req_t req, struct ffs_inode *inode, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct ctl_buf *buf = (struct ctl_buf *)(uintptr_t)fi->fh;
	const char *src = buf->msg_len ? buf->msg : buf->data;
	size_t len = buf->msg_len ? buf->msg_len : buf->len;
	char *copy;

	(void)inode;
	if (off < 0 || (size_t)off >= len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > len - (size_t)off)
		size = len - (size_t)off;
	/*
	 * Reply from a copy: once the reader has its bytes it may close, and
	 * the release (on another thread) frees the buffer while writev() is
	 * still returning here.
	 */
	copy = malloc(size);
	if (!copy) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(copy, src + off, size);
	fuse_reply_buf(req, copy, size);
	free(copy);
}

/*
 * The entry of @dir at *@i after "." and ".." or, when that tunable slot
 * is empty, the next one (*@i moved to it); NULL past the last.  @slot
 * holds a tunable's name.
 */
static struct ffs_inode *ctl_nth(struct ffs_data *fs, const struct ffs_inode *dir, size_t *i,
				 const char **name, char *slot, size_t len)
{
	if (ctl_kind(dir) == FFS_CTL_DIR) {
		if (*i >= CTL_NR_NAMES)
			return NULL;
		*name = ctl_names[*i].name;
		return ctl_names[*i].inode;
	}
	for (; *i < ctl_nr_tunables(); ++*i) {
		if (!wb_tunable_slot_name(fs->wb, *i, slot, len)) {
			*name = slot;
			return &ctl_tunable[*i].inode;
		}
	}
	return NULL;
}

/*
 * Fill @e for entry *@i of @dir (0 ".", 1 ".."), or the next one there
 * is (*@i moved to it); false past the last.  @slot holds a tunable's name.
 */
static bool ctl_dirent(struct ffs_data *fs, struct ffs_inode *dir, off_t *i,
		       struct fuse_entry_param *e, const char **name, char *slot, size_t len)
{
	struct ffs_inode *child;
	size_t n;

	memset(e, 0, sizeof(*e));
	if (*i < 2) {
		/* No ino in the entry: readdirplus must not count a lookup. */
		*name = *i == 0 ? "." : "..";
		if (*i == 0 || dir == &ctl_tunables.inode)
			e->attr.st_ino = CTL_INO_BASE + (*i == 0 ? ctl_kind(dir) : FFS_CTL_DIR);
		else
			e->attr.st_ino = FUSE_ROOT_ID;
		e->attr.st_mode = S_IFDIR;
		return true;
	}
	n = (size_t)*i - 2;
	child = ctl_nth(fs, dir, &n, name, slot, len);
	if (!child)
		return false;
	*i = (off_t)n + 2;
	ctl_entry(fs, child, e);
	return true;
}

/* readdir of the control directory @dir (type S_IFDIR): replies. */
static void ctl_list(fuse_req_t req, struct ffs_inode *dir, size_t size, off_t off, bool plus)
{
	struct ffs_data *fs = ctl_fs(req);
	char *buf = calloc(1, size ? size : 1);
	struct fuse_entry_param e;
	const char *name;
	size_t used = 0;
	char slot[64];

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (dir->type != S_IFDIR) {
		free(buf);
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	for (off_t i = off < 0 ? 0 : off; ctl_dirent(fs, dir, &i, &e, &name, slot, sizeof(slot));
	     i++) {
		size_t n;

		if (plus)
			n = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, i + 1);
		else
			n = fuse_add_direntry(req, buf + used, size - used, name, &e.attr, i + 1);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

/*
 * ---- the handlers (ctl_ops) ----
 *
 * Every request on a control inode.  What a control file cannot do is
 * refused as a read-only file system of the mount's user would: no names
 * made, removed or moved in the directory (EPERM), no links, extended
 * attributes or data operations beyond read and write.
 */

static void ctl_lookup(fuse_req_t req, struct ffs_inode *dir, const char *name)
{
	struct fuse_entry_param e;
	int ret = ctl_do_lookup(ctl_fs(req), dir, name, &e);

	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_entry(req, &e);
}

/* The control inodes live as long as the daemon: nothing to forget. */
static void ctl_forget(struct ffs_data *fs, struct ffs_inode *inode, uint64_t nlookup)
{
	(void)fs;
	(void)inode;
	(void)nlookup;
}

static void ctl_getattr(fuse_req_t req, struct ffs_inode *inode, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	ctl_stat(inode, &st);
	fuse_reply_attr(req, &st, ctl_fs(req)->cfg->attr_timeout);
}

static void ctl_setattr(fuse_req_t req, struct ffs_inode *inode, struct stat *attr, int valid,
			struct fuse_file_info *fi)
{
	int ret = ctl_setattr_check(inode, attr, valid);

	if (ret)
		fuse_reply_err(req, -ret);
	else
		ctl_getattr(req, inode, fi);
}

static void ctl_readlink(fuse_req_t req, struct ffs_inode *inode)
{
	(void)inode;
	fuse_reply_err(req, EINVAL);
}

static void ctl_mknod(fuse_req_t req, struct ffs_inode *dir, const char *name, mode_t mode,
		      dev_t rdev)
{
	(void)dir;
	(void)name;
	(void)mode;
	(void)rdev;
	fuse_reply_err(req, EPERM);
}

static void ctl_mkdir(fuse_req_t req, struct ffs_inode *dir, const char *name, mode_t mode)
{
	ctl_mknod(req, dir, name, mode, 0);
}

static void ctl_unlink(fuse_req_t req, struct ffs_inode *dir, const char *name)
{
	ctl_mknod(req, dir, name, 0, 0);
}

static void ctl_symlink(fuse_req_t req, const char *link, struct ffs_inode *dir,
			const char *name)
{
	(void)link;
	ctl_mknod(req, dir, name, 0, 0);
}

static void ctl_rename(fuse_req_t req, struct ffs_inode *dir, const char *name,
		       struct ffs_inode *newdir, const char *newname, unsigned int flags)
{
	(void)newdir;
	(void)newname;
	(void)flags;
	ctl_mknod(req, dir, name, 0, 0);
}

static void ctl_link(fuse_req_t req, struct ffs_inode *inode, struct ffs_inode *newdir,
		     const char *newname)
{
	(void)inode;
	ctl_mknod(req, newdir, newname, 0, 0);
}

static void ctl_create(fuse_req_t req, struct ffs_inode *dir, const char *name, mode_t mode,
		       struct fuse_file_info *fi)
{
	(void)fi;
	ctl_mknod(req, dir, name, mode, 0);
}

static void ctl_open(fuse_req_t req, struct ffs_inode *inode, struct fuse_file_info *fi)
{
	int ret = ctl_do_open(ctl_fs(req), inode, fi);

	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_open(req, fi);
}

static void ctl_write(fuse_req_t req, struct ffs_inode *inode, const char *data, size_t size,
		      off_t off, struct fuse_file_info *fi)
{
	int ret = ctl_do_write(ctl_fs(req), inode, fi, data, size, off);

	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_write(req, (size_t)ret);
}

/* flush, fsync, fsyncdir, releasedir: nothing to do (no handle for the directories). */
static void ctl_nothing(fuse_req_t req, struct ffs_inode *inode, struct fuse_file_info *fi)
{
	(void)inode;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void ctl_nothing_sync(fuse_req_t req, struct ffs_inode *inode, int datasync,
			     struct fuse_file_info *fi)
{
	(void)datasync;
	ctl_nothing(req, inode, fi);
}

static void ctl_release(fuse_req_t req, struct ffs_inode *inode, struct fuse_file_info *fi)
{
	struct ctl_buf *buf = (struct ctl_buf *)(uintptr_t)fi->fh;

	(void)inode;
	ffs_handle_release(ctl_fs(req), &buf->h);
	fuse_reply_err(req, 0);
}

static void ctl_opendir(fuse_req_t req, struct ffs_inode *inode, struct fuse_file_info *fi)
{
	if (inode->type != S_IFDIR) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fi->fh = 0;	/* ctl_list needs no handle */
	fuse_reply_open(req, fi);
}

static void ctl_readdir(fuse_req_t req, struct ffs_inode *dir, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	(void)fi;
	ctl_list(req, dir, size, off, false);
}

static void ctl_readdirplus(fuse_req_t req, struct ffs_inode *dir, size_t size, off_t off,
			    struct fuse_file_info *fi)
{
	(void)fi;
	ctl_list(req, dir, size, off, true);
}

/* The file system the control directory is in: BACKING's. */
static void ctl_statfs(fuse_req_t req, struct ffs_inode *inode)
{
	struct statvfs sv;

	(void)inode;
	if (fstatvfs(ctl_fs(req)->root.fd, &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

static void ctl_setxattr(fuse_req_t req, struct ffs_inode *inode, const char *name,
			 const char *value, size_t size, int flags)
{
	(void)inode;
	(void)name;
	(void)value;
	(void)size;
	(void)flags;
	fuse_reply_err(req, EPERM);
}

static void ctl_removexattr(fuse_req_t req, struct ffs_inode *inode, const char *name)
{
	ctl_setxattr(req, inode, name, NULL, 0, 0);
}

static void ctl_getxattr(fuse_req_t req, struct ffs_inode *inode, const char *name, size_t size)
{
	(void)inode;
	(void)name;
	(void)size;
	fuse_reply_err(req, ENODATA);
}

/* No extended attributes: an empty list. */
static void ctl_listxattr(fuse_req_t req, struct ffs_inode *inode, size_t size)
{
	(void)inode;
	if (size == 0)
		fuse_reply_xattr(req, 0);
	else
		fuse_reply_buf(req, NULL, 0);
}

/*
 * Only the mode, which the kernel checks itself (default_permissions),
 * decides; access(W_OK) is refused as on a read-only file system.
 */
static void ctl_access(fuse_req_t req, struct ffs_inode *inode, int mask)
{
	(void)inode;
	fuse_reply_err(req, (mask & W_OK) ? EACCES : 0);
}

static void ctl_fallocate(fuse_req_t req, struct ffs_inode *inode, int mode, off_t off,
			  off_t len, struct fuse_file_info *fi)
{
	(void)inode;
	(void)mode;
	(void)off;
	(void)len;
	(void)fi;
	fuse_reply_err(req, EOPNOTSUPP);
}

static void ctl_lseek(fuse_req_t req, struct ffs_inode *inode, off_t off, int whence,
		      struct fuse_file_info *fi)
{
	(void)inode;
	(void)off;
	(void)whence;
	(void)fi;
	fuse_reply_err(req, EINVAL);
}

static void ctl_copy_file_range(fuse_req_t req, struct ffs_inode *in, off_t off_in,
				struct fuse_file_info *fi_in, struct ffs_inode *out,
				off_t off_out, struct fuse_file_info *fi_out, size_t len,
				int flags)
{
	(void)in;
	(void)off_in;
	(void)fi_in;
	(void)out;
	(void)off_out;
	(void)fi_out;
	(void)len;
	(void)flags;
	fuse_reply_err(req, EINVAL);
}

static const struct ffs_node_ops ctl_ops = {
	.lookup = ctl_lookup,
	.forget = ctl_forget,
	.getattr = ctl_getattr,
	.setattr = ctl_setattr,
	.readlink = ctl_readlink,
	.mknod = ctl_mknod,
	.mkdir = ctl_mkdir,
	.unlink = ctl_unlink,
	.rmdir = ctl_unlink,
	.symlink = ctl_symlink,
	.rename = ctl_rename,
	.link = ctl_link,
	.open = ctl_open,
	.read = ctl_read,
	.write = ctl_write,
	.flush = ctl_nothing,
	.release = ctl_release,
	.fsync = ctl_nothing_sync,
	.opendir = ctl_opendir,
	.readdir = ctl_readdir,
	.readdirplus = ctl_readdirplus,
	.releasedir = ctl_nothing,
	.fsyncdir = ctl_nothing_sync,
	.statfs = ctl_statfs,
	.setxattr = ctl_setxattr,
	.getxattr = ctl_getxattr,
	.listxattr = ctl_listxattr,
	.removexattr = ctl_removexattr,
	.access = ctl_access,
	.create = ctl_create,
	.fallocate = ctl_fallocate,
	.lseek = ctl_lseek,
	.copy_file_range = ctl_copy_file_range,
};
