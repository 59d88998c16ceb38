/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * writeback.h - the data path below the FUSE layer.
 *
 * fusefs hands every read, write, fsync, truncate, fallocate, lseek and
 * copy of file data to this interface and never touches a backing data
 * descriptor itself.  One struct wb_file exists per backing file that is
 * open through the mount (or otherwise needs data I/O), shared by all of its
 * open file descriptions.
 *
 * Data is cached by blockstate (folios with per-block state).  Dirty runs
 * reach the backing file through flusher threads (when the charged dirty
 * budget passes the background threshold, when data is older than
 * dirty_expire_ms, and every writeback_interval_ms), at fsync, when
 * reclaim needs clean memory, when a file is freed and at unmount.  Runs
 * contiguous in the file are merged (across folios) into one write of at
 * most max_io bytes, and a batch of writes is submitted with one
 * io_uring_enter() (or written one by one with pwritev).  A failed write
 * leaves its blocks dirty: it is retried with backoff and reported once
 * to every open file description by fsync (errseq).
 *
 * Conventions: functions return 0 or a byte count on success and -errno on
 * failure; they never leave errno as their only error report.  Ranges are
 * half-open, [off, off + len).
 */
#ifndef FOLIOFS_WRITEBACK_H
#define FOLIOFS_WRITEBACK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <stdint.h>

#include "foliofs/policy.h"	/* BS_PARAMS_MAX */

struct wb_file;
struct wb_ctx;
struct bs_config;
struct bs_ra;

enum wb_backing_io {
	WB_IO_URING,	/* io_uring, falling back to psync where it cannot be set up */
	WB_IO_PSYNC,	/* pwritev, one write per system call */
	WB_IO_NULL,	/* discard writes, read zeros: measures FUSE and cache cost only */
};

struct wb_config {
	unsigned int flushers;			/* flusher threads (0: none) */
	unsigned int dirty_background_ratio;	/* % of cache_size */
	uint64_t dirty_background_bytes;	/* overrides the ratio when non-zero */
	uint32_t dirty_expire_ms;		/* dirty data older than this is written */
	uint32_t writeback_interval_ms;		/* flusher period; 0: only when kicked */
	enum wb_backing_io backing_io;
	bool whole_folio;			/* wb_granularity=folio (pre-6.6 Linux) */
	bool backing_direct;			/* backing files are opened with O_DIRECT */
	uint32_t max_io;			/* largest merged write, bytes */
	const char *fault;			/* initial fault spec, or NULL */

	/* Dirty throttling (throttle.c); all of these are tunables too. */
	unsigned int dirty_ratio;		/* % of cache_size: the writers' threshold */
	uint64_t dirty_bytes;			/* overrides the ratio when non-zero */
	unsigned int dirty_pinned_ratio;	/* % of cache_size pinned by held folios; 0: off */
	uint64_t dirty_pinned_bytes;		/* overrides the ratio when non-zero */
	const char *throttle;			/* throttle policy name; NULL: "bdp" */
	/* Its parameters: throttle_params[i] when bit i of throttle_set, else the default. */
	int64_t throttle_params[BS_PARAMS_MAX];
	uint32_t throttle_set;

	/* Stats log (statslog.c): one JSON object per line every interval. */
	const char *stats_log;			/* file name, or NULL: off */
	uint32_t stats_interval_ms;		/* default 1000 */
};

/*
 * Where writeback's messages go (one line each, without "foliofs: " and
 * without the newline); stderr until set.  The daemon points it at syslog
 * once it runs in the background.
 */
void wb_set_logger(void (*log)(const char *line));

/*
 * The numbers of every command line and control file (util.c): the
 * daemon's -o options, its tunables, foliofs-sim's device options and
 * generator specs.  A plain unsigned decimal (no sign, blank, '+' or
 * base prefix); a size may add a binary suffix K, M, G or T, alone or
 * followed by "B" or "iB" (powers of 1024).  0 with the value in @out, or
 * -EINVAL with "NAME=VALUE: reason" in @err ("too large", "not an
 * unsigned integer", "not a size ...", "out of range [MIN, MAX]") and
 * @out unchanged.
 */
int wb_parse_uint(const char *name, const char *val, uint64_t min, uint64_t max,
		  uint64_t *out, char *err, size_t errlen);
int wb_parse_size(const char *name, const char *val, uint64_t min, uint64_t max,
		  uint64_t *out, char *err, size_t errlen);
/* A plain decimal fraction (no sign, exponent or blank), for seconds. */
int wb_parse_double(const char *name, const char *val, double min, double max,
		    double *out, char *err, size_t errlen);

/*
 * The defaults of the option registry's rows (options.h): 2 flushers,
 * 10%, 30 s, 5 s, io_uring, per-block, 1 MiB, no fault.
 */
void wb_config_default(struct wb_config *cfg);
/*
 * Check @cfg: its numbers in their rows' ranges, the throttle policy and
 * its parameters, the fault spec; on error fill @err with a line naming
 * the option.
 */
int wb_config_check(const struct wb_config *cfg, char *err, size_t errlen);

/*
 * wb_ctx_create - the data path of one mount: the blockstate cache with
 * @bs_cfg and writeback as @cfg says.  Starts the flusher threads: call
 * after fork()/daemonizing.
 */
int wb_ctx_create(const struct bs_config *bs_cfg, const struct wb_config *cfg,
		  struct wb_ctx **out);

/*
 * Fault injection for tests (see wb_i.h for the grammar): replace the
 * current fault with @spec ("off" or "" removes it).  -EINVAL with a
 * message in @err for a bad spec, which changes nothing.
 */
int wb_ctx_set_fault(struct wb_ctx *ctx, const char *spec, char *err, size_t errlen);
void wb_ctx_get_fault(struct wb_ctx *ctx, char *buf, size_t len);
/*
 * Free the context; every file must have been freed.  Returns the number
 * of files whose dirty data could not be written back over its lifetime
 * (each was reported on stderr when it happened).
 */
unsigned int wb_ctx_destroy(struct wb_ctx *ctx);

/*
 * Stop the flusher threads for good (wb_ctx_destroy() does it if this was
 * not called): from now on writeback happens only in calls (fsync,
 * reclaim, file destroy).  A flusher changes folios and counters on its
 * own, by its passes and by syncing files it wrote back, so the cache is
 * at rest only once they are stopped and no call is in flight.
 */
void wb_ctx_quiesce(struct wb_ctx *ctx);

/*
 * Check the cache's accounting invariant (blockstate's bs_cache_check)
 * and that every file with dirty or unsynced data is on the flushers'
 * dirty list;
 * only at rest: after wb_ctx_quiesce(), with no call in flight (reads of
 * readahead still in flight only make blocks uptodate, which the check
 * allows).  0 or -EUCLEAN with details on stderr.
 */
int wb_ctx_check(struct wb_ctx *ctx);

/* Statistics as "name value" lines (like /proc/vmstat) into @buf; returns the length. */
size_t wb_ctx_stats(struct wb_ctx *ctx, char *buf, size_t size);

/* Access a backing descriptor was opened with. */
enum wb_access {
	WB_READ = 1,
	WB_WRITE = 2,
	WB_RDWR = WB_READ | WB_WRITE,
};

/*
 * wb_file_alloc - wrap an open backing descriptor.
 * Takes ownership of @fd (closed by wb_file_free, also on failure).
 * Context: any thread; allocates.
 */
int wb_file_alloc(struct wb_ctx *ctx, int fd, enum wb_access access,
		  struct wb_file **out);

/*
 * wb_file_upgrade - give @wbf a descriptor with wider access.
 * @fd must refer to the same backing file; it replaces the current one
 * atomically (readers in flight keep working) and is consumed.  -EBADF
 * when @wbf has no descriptor (see wb_file_fd_reopen).
 */
int wb_file_upgrade(struct wb_file *wbf, int fd, enum wb_access access);

enum wb_access wb_file_access(const struct wb_file *wbf);

/*
 * The backing descriptor of an idle file can be given up and taken again,
 * so that a daemon caching many files holds data descriptors only for the
 * files in use and those with data not yet durable.  The file's cache and
 * its errseq state stay with the wb_file meanwhile.
 *
 * wb_file_fd_close - close the backing descriptor if nothing needs it: no
 * block dirty or under writeback, nothing written since the last backing
 * sync, the backing size the cache's, no failed writeback waiting for a
 * retry.  A pending mtime is set on the backing file first.  0 when closed
 * (or already closed); -EBUSY while the descriptor is needed (after a
 * successful wb_file_flush() it is not, unless the file is used again),
 * or while a flusher, reclaim or sync-all is looking at the file.
 * Context: the caller guarantees that no call that reads, writes, syncs
 * or resizes @wbf is in flight or starts before wb_file_fd_reopen();
 * flushers, reclaim and sync-all may run (an idle file gives them nothing
 * to do).  May wait for a writeback pass that is ending; no backing I/O
 * but the mtime.
 */
int wb_file_fd_close(struct wb_file *wbf);
/*
 * wb_file_fd_evict - make an idle file's data durable and close its
 * backing descriptor, for a caller that needs the descriptor for another
 * file now: the file's held tail applied and every dirty block written
 * back (as wb_file_flush(): reclaim may run), the backing file synced and
 * its pending mtime set, then wb_file_fd_close().  0 when closed (or
 * already closed).  A writeback or sync error (-EIO, -ENOSPC, ...) is
 * returned and kept for the file's next fsync (errseq) as any writeback
 * error is; the descriptor then stays, as the flushers' retries need it.
 * -EBUSY as wb_file_fd_close() (a walker is looking at the file).
 * Context: as wb_file_fd_close(), and the caller's thread runs this
 * file's write path: it blocks on backing I/O and syncs, and may allocate.
 */
int wb_file_fd_evict(struct wb_file *wbf);
/* Whether @wbf has its backing descriptor (not closed by wb_file_fd_close). */
bool wb_file_has_fd(const struct wb_file *wbf);
/*
 * wb_file_fd_reopen - give @wbf, whose descriptor was closed, @fd: the same
 * backing file opened again (as from its O_PATH descriptor), with
 * @access.  @fd is consumed, also on failure.  0 or -errno.
 */
int wb_file_fd_reopen(struct wb_file *wbf, int fd, enum wb_access access);

/*
 * wb_file_free - write back and sync what is dirty, drop the cached data
 * and close the backing file: 0.  When the data cannot be written, the
 * error (reported with the file's path) and @wbf is not freed: it stays
 * with the context, whose flushers keep retrying, until wb_ctx_destroy()
 * (see struct wb_file for the whole life).
 */
int wb_file_free(struct wb_file *wbf);

/*
 * wb_file_discard - free @wbf without writing its dirty data back: the
 * backing file has no name left and nobody can read it again (the kernel
 * drops the pages of an unlinked, closed file the same way).  The dirty
 * data is discharged.  Context: no other call on @wbf in flight.
 */
void wb_file_discard(struct wb_file *wbf);

/* Write back and sync everything dirty, keeping the cache: 0 or -errno. */
int wb_file_flush(struct wb_file *wbf);

/*
 * Times the backing file does not show yet: a cached write sets mtime and
 * ctime to its time, as Linux's file_update_time() does, long before
 * writeback touches the backing file; writeback then stamps the backing
 * file with that mtime.  wb_file_fix_stat() puts the cache's size and
 * times into @st (a stat of the backing file).
 *
 * wb_file_attr_sample() and wb_file_attr_apply() are its two halves, for
 * a caller that must read the cache before the backing inode: the FUSE
 * layer clears setuid/setgid before a write's data reaches the cache, so
 * a size sampled first never shows that data beside the mode from before
 * (fusefs/killpriv.c).
 */
struct wb_file_attr {
	off_t size;		/* the cache's size of the file */
	int64_t mtime_ns;	/* pending mtime, 0: none (the backing file's holds) */
};
void wb_file_fix_stat(struct wb_file *wbf, struct stat *st);
void wb_file_attr_sample(struct wb_file *wbf, struct wb_file_attr *attr);
void wb_file_attr_apply(const struct wb_file_attr *attr, struct stat *st);
/* An explicit mtime was set (utimensat): it replaces the pending one. */
void wb_file_mtime_set(struct wb_file *wbf, const struct timespec *mtime);

/*
 * Read up to @len bytes at @off through the open whose readahead state is
 * @ra (NULL: no readahead); short only at end of file.
 */
ssize_t wb_read(struct wb_file *wbf, struct bs_ra *ra, void *buf, size_t len, off_t off);

/*
 * Write all @len bytes at @off; returns @len or -errno (nothing partial).
 * @dirtied, when not NULL, gets the bytes of dirty budget this write
 * charged (by the accounting policy: the writer's share, as the kernel's
 * current->nr_dirtied), to hand to wb_balance_dirty().
 */
ssize_t wb_write(struct wb_file *wbf, const void *buf, size_t len, off_t off,
		 uint64_t *dirtied);
/*
 * wb_write() of a write its transport cut at a size limit, whose rest
 * likely follows at off + len (a FUSE request of max_write bytes).  If it
 * ends inside a block that is inside the file and not uptodate, the bytes
 * in that block are held back (the split tail, wb_file.c) until the next
 * write, which completes the block when it starts where they end, or any
 * other data operation on the file, which writes them as they are; the
 * return value counts them as written.  No block is then read that the
 * next write would overwrite.
 */
ssize_t wb_write_cut(struct wb_file *wbf, const void *buf, size_t len, off_t off,
		     uint64_t *dirtied);

/*
 * Make every byte written so far durable in the backing store.  @seen is
 * the caller's errseq cursor (from wb_file_err_sample() at open): a
 * writeback error recorded since is returned once per cursor, even if the
 * data has been written since; an error writing back now is returned too.
 */
int wb_fsync(struct wb_file *wbf, bool datasync, uint64_t *seen);
/* The errseq cursor for a new open file description. */
uint64_t wb_file_err_sample(struct wb_file *wbf);

/* Set the file size to @size (shrink or extend with zeros). */
int wb_truncate(struct wb_file *wbf, off_t size);

/*
 * Allocate, punch (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) or zero
 * (FALLOC_FL_ZERO_RANGE) [off, off + len).  Other modes: -EOPNOTSUPP.
 */
int wb_fallocate(struct wb_file *wbf, int mode, off_t off, off_t len);

/* SEEK_DATA / SEEK_HOLE from @off; returns the offset or -errno. */
off_t wb_lseek(struct wb_file *wbf, off_t off, int whence);

/*
 * Copy [src_off, src_off + len) of @src to @dst at @dst_off through the
 * read and write paths above, reading through the source open's readahead
 * state @src_ra (NULL: none), as the kernel's copy reads through the
 * source file; stops early at the end of @src.  Overlapping ranges of one
 * file are -EINVAL (as copy_file_range(2)).
 */
ssize_t wb_copy_range(struct wb_file *src, struct bs_ra *src_ra, off_t src_off,
		      struct wb_file *dst, off_t dst_off, size_t len);

/* ---- dirty throttling (throttle.c) ---- */

/*
 * wb_balance_dirty - balance_dirty_pages() for one write: process @pid
 * has just charged @dirtied bytes (from wb_write()).  Returns how long,
 * in ns, the reply to that write must be held back (0: reply now).  The
 * caller holds the reply, not the thread: nothing here sleeps.
 * Context: any thread; takes the throttler's lock briefly.
 */
int64_t wb_balance_dirty(struct wb_ctx *ctx, pid_t pid, uint64_t dirtied);

/*
 * wb_balance_dirty_again - @pid's pause has ended.  Returns 0 to send the
 * reply, or ns to hold it again: above the hard limit a writer waits
 * max_pause at a time until the charge is under it, as the kernel's loop
 * does.  Also call it for every held writer when the throttle notifier
 * fires (the policy or a threshold changed): a writer that the new
 * setting does not pause is released at once.
 */
int64_t wb_balance_dirty_again(struct wb_ctx *ctx, pid_t pid);

/*
 * wb_balance_dirty_recheck - throttling settings changed while @pid's reply
 * is held: false if @pid would now run free (send the reply now), true to
 * keep its pause as it is.
 */
bool wb_balance_dirty_recheck(struct wb_ctx *ctx, pid_t pid);

/* A reply is held: the throttled_writers stat. */
void wb_throttle_held(struct wb_ctx *ctx);
/*
 * @pid's held reply was sent after @held_ns (throttle_ms counts it);
 * @early: before its pause ended (interrupt, unmount, a settings change).
 */
void wb_throttle_unheld(struct wb_ctx *ctx, pid_t pid, int64_t held_ns, bool early);

/*
 * The layer above holds replies; @fn(@arg) is called (from the thread that
 * changed a tunable, no writeback lock held) after throttling settings
 * change, so that it rechecks held writers with
 * wb_balance_dirty_recheck().  One notifier; NULL removes it, and may
 * only be done once no tunable can be set any more (a call in progress is
 * not waited for).
 */
void wb_set_throttle_notify(struct wb_ctx *ctx, void (*fn)(void *arg), void *arg);

/* ---- policies (throttle_policies.c) ---- */

/*
 * Load a policy library's accounting, sizing and throttle policies
 * (bs_policy_load_hooked() with writeback's hooks): 0, or -errno with
 * one line naming @path and the reason in @err, nothing changed.
 */
int wb_policy_load(const char *path, uid_t owner, char *err, size_t errlen);
/* bs_policy_list() and the throttle policies' lines after it. */
size_t wb_policy_list(char *buf, size_t size);

/* ---- tunables (tunables.c) ---- */

/*
 * Run-time settings by name, like /proc/sys/vm: dirty_ratio, dirty_bytes,
 * dirty_background_ratio, dirty_background_bytes, dirty_pinned_ratio,
 * dirty_pinned_bytes, dirty_expire_ms, writeback_interval_ms,
 * dirty_account, throttle.  Values are text without a newline.
 */
const char *wb_tunable_name(size_t i);	/* the i-th name, NULL past the last */
/*
 * The fixed tunables above, then the parameters of the accounting and
 * sizing policies in force, account.NAME and size.NAME (a parameter
 * change reprices as a policy change does; a policy change resets its
 * parameters to their defaults).  Slot i < wb_tunable_slots() holds the
 * i-th fixed tunable or a parameter: its name into @buf, or -ENOENT when
 * the policy in force has no parameter there.
 */
size_t wb_tunable_slots(void);
int wb_tunable_slot_name(struct wb_ctx *ctx, size_t i, char *buf, size_t len);
/*
 * The policies in force, part of wb_ctx_stats: "dirty_account NAME",
 * "throttle NAME", "folio_policy NAME", "ra_model VERSION" (values that
 * are names, not numbers: wb_stat_is_name), "policy_switches N" (run-time
 * changes of any of them or of a parameter of one), then "account.NAME
 * VALUE" lines for the parameters in force.
 */
size_t wb_ctx_policy_stats(struct wb_ctx *ctx, char *buf, size_t size);
/* Whether the stat @name (@len bytes) has a name for its value (above). */
bool wb_stat_is_name(const char *name, size_t len);
/* Current value into @buf: its length, or -ENOENT for an unknown name. */
int wb_tunable_get(struct wb_ctx *ctx, const char *name, char *buf, size_t len);
/*
 * Set @name to @val (surrounding blanks and one trailing newline are
 * ignored): 0; -ENOENT for an unknown name; -EINVAL with a line naming the
 * tunable and the value in @err for a bad value, which changes nothing.
 */
int wb_tunable_set(struct wb_ctx *ctx, const char *name, const char *val,
		   char *err, size_t errlen);

/* ---- the writeback queue and sync-all (for foliofsctl) ---- */

/*
 * wb_ctx_files - the writeback queue as text, one line per file with dirty
 * or under-writeback data, into a malloc'ed buffer (*@out, its length
 * returned): "dirty_bytes writeback_bytes oldest_dirty_age_ms errors PATH".
 * -ENOMEM on failure.
 */
ssize_t wb_ctx_files(struct wb_ctx *ctx, char **out);
/*
 * wb_ctx_sync_all - write back and sync every file (the syncfs(2) that
 * Linux does not send to FUSE servers).  Returns 0 or the first -errno;
 * files that failed stay dirty and are reported.  Context: may block long.
 */
int wb_ctx_sync_all(struct wb_ctx *ctx);

/* ---- the cache folio for folio (cache_view.c, for .foliofs/folios and evict) ---- */

/*
 * wb_ctx_folios - every cached folio of every file as text, into a
 * malloc'ed buffer (*@out, its length returned): one line per folio,
 * "INO INDEX ORDER FLAGS", INO the backing file's st_ino (what stat(2)
 * through the mount says), INDEX its first 4 KiB page, ORDER log2 of its
 * pages, FLAGS the letters of u (every block uptodate), d (a block dirty),
 * w (a block under writeback), r (readahead mark), or "-"; sorted by INO,
 * then INDEX.  Each file's folios are read in one walk (bs_file_folios).
 * -ENOMEM on failure.
 */
ssize_t wb_ctx_folios(struct wb_ctx *ctx, char **out);
/*
 * wb_ctx_evict - drop the clean, unused folios of the file with st_ino
 * @ino wholly inside [@start, @end) (bs_file_evict(), summed into @res
 * over the files with that number).  0, or -ENOENT when no cached file
 * has it.
 */
struct bs_evict_result;
int wb_ctx_evict(struct wb_ctx *ctx, uint64_t ino, off_t start, off_t end,
		 struct bs_evict_result *res);

/*
 * ---- the write log (writelog.c, -o write_log=FILE) ----
 *
 * Every change the daemon makes to BACKING, recorded in order with its
 * data; the format is described in writelog.c.  One log per process.  All
 * of these return 0 at once while no log is open.  Once the log failed,
 * every change to BACKING must fail: the recording calls return -EIO, and
 * callers that are about to change BACKING ask wb_wlog_check() first.
 * Context: any thread; they block on the log file's writev.
 */

/* Open @path (truncated) and record every name under @root_fd (BACKING). */
int wb_wlog_open(const char *path, int root_fd);
/* -EIO when the log has failed: the change about to be made must not be. */
int wb_wlog_check(void);
/* Whether a log is open (changes are being recorded). */
bool wb_wlog_on(void);

enum wb_wlog_ns {
	WB_WLOG_CREATE,		/* @name in @dirfd was made (any type) */
	WB_WLOG_LINK,		/* @name in @dirfd is a new link */
	WB_WLOG_UNLINK,		/* @name left @dirfd; @flags: AT_REMOVEDIR or 0 */
	WB_WLOG_RENAME,		/* @name in @dirfd became @newname in @newdirfd; @flags: renameat2's */
};
/* A namespace change that succeeded, before it is answered. */
int wb_wlog_ns(enum wb_wlog_ns op, int dirfd, const char *name,
	       int newdirfd, const char *newname, unsigned int flags);

/*
 * Data changes of the backing file open as @fd (writeback/ only; fsync of
 * a directory from fusefs).  A write is recorded before it is issued and
 * *@seq names it; if the backing file system then fails it, say so with
 * wb_wlog_write_failed().  A sync is recorded once it succeeded
 * (@dir: @fd is a directory) with what wb_wlog_seq() said before it
 * began: it covers the records made before that.  Truncate and fallocate
 * are recorded once they succeeded.
 */
struct iovec;
int wb_wlog_write(int fd, const struct iovec *iov, int iovcnt, off_t off,
		  size_t len, uint64_t *seq);
void wb_wlog_write_failed(int fd, uint64_t seq, int err);
uint64_t wb_wlog_seq(void);
int wb_wlog_sync(int fd, bool datasync, bool dir, uint64_t begin);
int wb_wlog_truncate(int fd, off_t size);
int wb_wlog_fallocate(int fd, int mode, off_t off, off_t len);

#endif /* FOLIOFS_WRITEBACK_H */
