/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wb_i.h - writeback internals, shared by the files of writeback/.
 *
 * Lock order (outer first):
 *   wb_file.wb_lock      one writeback pass of a file at a time
 *   wb_ctx.files_lock    the file list, the dirty list, file references
 *   (blockstate's locks, taken inside bs_* calls)
 *   wb_file.size_lock    the known backing size (leaf)
 * No lock is held across backing I/O except wb_lock.
 */
#ifndef FOLIOFS_WB_I_H
#define FOLIOFS_WB_I_H

#include "writeback.h"
#include "blockstate.h"
#include "engine.h"
#include "foliofs/list.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/uio.h>

/* ---- faults (fault.c) ---- */

/*
 * A fault injected at the completion of backing I/O (for fsync: instead of
 * the sync, as a device flush that failed).  Grammar (one spec):
 *   OP:RESULT[:SELECTOR]...
 *   OP        write | read | fsync | alloc (readahead's new folio larger
 *             than the smallest cannot be had: no backing I/O, the
 *             offset and length are the folio's)
 *   RESULT    an errno name (EIO, ENOSPC, ...) or "short" (the I/O does
 *             half of what was asked, at least one byte); alloc: ENOMEM
 *   SELECTOR  every=N      every Nth matching call (default 1: all)
 *             after=N      not the first N matching calls
 *             count=N      at most N faults, then none
 *             file=TEXT    only files whose backing path contains TEXT
 *             range=A-B    only I/O overlapping bytes [A, B)
 *             prob=P       with probability P (0..1), from seed=S (default 1)
 * Selectors combine (all must hold); "off" or "" removes the fault.
 */
struct wb_fault {
	enum wb_fault_op op;
	int err;		/* positive errno, or 0 for short */
	uint64_t every, after, count;
	char file[256];
	uint64_t range_start, range_end;	/* [start, end); end 0: all */
	double prob;		/* < 0: not a selector */
	uint64_t rng;		/* xorshift state, from seed */
	uint64_t seed;		/* seed=, as given (for wb_fault_format) */
	bool seed_given;
	uint64_t calls;		/* matching calls seen */
	uint64_t fired;		/* faults injected */
};

int wb_fault_parse(const char *spec, struct wb_fault *out, char *err, size_t errlen);
/* Format @f back as a spec ("off" when @f is NULL). */
void wb_fault_format(const struct wb_fault *f, char *buf, size_t len);
/*
 * Whether @f fires for a call of @op on [@off, @off + @len) of the file
 * named @name (what file= matches: the backing path on a mount, the trace's
 * file id in the simulator; looked at only when file= is set).  Counts the
 * call.  Context: the caller serialises calls on @f (the mount's
 * fault_lock; the simulator is single-threaded).
 */
bool wb_fault_fires(struct wb_fault *f, const char *name, enum wb_fault_op op,
		    off_t off, size_t len);
/*
 * What a fault that fired makes of a call that returned @res.  A short
 * result is a multiple of @align (the block size for O_DIRECT backing
 * files, which go on only from aligned offsets; else 1), so a call of a
 * single @align unit completes whole.
 */
ssize_t wb_fault_result(const struct wb_fault *f, ssize_t res, size_t align);

/* ---- backing I/O (backing.c) ---- */

struct wb_file;

/* Read into @buf; short only at EOF. */
ssize_t wb_backing_read(struct wb_file *wbf, void *buf, size_t len, off_t off);
/* Whether an alloc fault fails readahead's folio of [@off, @off + @len). */
bool wb_backing_alloc_fails(struct wb_file *wbf, off_t off, size_t len);
/*
 * Write each of @n groups (struct wb_io, engine.h: iovecs at off, len
 * bytes) completely; res gets 0 or -errno.  Submits them together
 * (io_uring) or one after the other (psync); short writes are resumed.
 */
void wb_backing_write(struct wb_file *wbf, struct wb_io *io, int n);
int wb_backing_fsync(struct wb_file *wbf, bool datasync);
/*
 * Start readahead's read @aio of @wbf (the bs_backing_ops read_start):
 * 0 when the reader thread will complete it, -errno when there is no
 * reader (psync, null, no ring) and the caller reads synchronously.
 */
int wb_backing_read_start(struct wb_file *wbf, struct bs_aio *aio);
/*
 * Set up the backend of @ctx: 0 or -errno; prints a notice on fallback.
 * With io_uring this starts the reader thread, which wb_backing_exit()
 * stops once every read it was given has completed.
 */
int wb_backing_init(struct wb_ctx *ctx);
void wb_backing_exit(struct wb_ctx *ctx);
/* The mount's driver of the engine (engine.h): writes through backing.c, logs. */
extern const struct wb_engine_ops wb_backing_engine_ops;
/*
 * The calling thread is a flusher: it keeps a bounce buffer big enough
 * for any batch (others keep a small one).  Context: the thread itself.
 */
void wb_backing_thread_is_flusher(void);
/*
 * Writeback moved the backing file's mtime to now: put back the time of
 * the last cached write (or the one set explicitly), and forget it once
 * nothing is left to write.  Context: no lock held.
 */
void wb_stamp_mtime(struct wb_file *wbf);
/* Set the backing file's size to the cache's (after a complete writeback). */
void wb_sync_size(struct wb_file *wbf);

/* ---- the context and files ---- */

struct wb_throttle;
struct wb_tunables;
struct wb_statslog;

struct wb_ctx {
	struct wb_config cfg;			/* immutable (tunables below are not) */
	struct bs_cache *cache;
	enum wb_backing_io io;			/* backend in use */

	/* The lists of files (files.c). */
	pthread_mutex_t files_lock;		/* protects the lists, refs, dying */
	pthread_cond_t files_cond;		/* a file reference was dropped */
	struct list_node files;			/* wb_file.files_link, newest first */
	/*
	 * The dirty list (the kernel's b_dirty, b_io and b_more_io in one):
	 * the files the flushers and reclaim walk, so that a pass costs the
	 * files with something to write or sync, not every file of the
	 * mount.  Invariant: a file whose age (ws.dirtied_ns) is set, whose
	 * cache holds written-but-unsynced blocks (bs_file_has_unsynced) or
	 * that a write is dirtying (wb_file.writing) is on it; one that is
	 * none of these may still be, until the next walk takes it off
	 * (wb_dirty_snapshot).  Unordered: a walk sorts its snapshot by
	 * wb_file.seq.  files_lock protects the list (wb_file.dirty_link)
	 * and nr_dirty.
	 */
	struct list_node dirty;
	unsigned int nr_dirty;
	uint64_t next_seq;			/* files_lock: the next file's seq */

	/* The mount's flusher threads (flush.c). */
	pthread_mutex_t flush_lock;		/* protects the flusher state below */
	pthread_cond_t flush_cond;		/* wake the flushers (a first kick, a stop) */
	bool stopping;
	pthread_t *flushers;
	unsigned int nr_flushers;

	pthread_mutex_t fault_lock;		/* protects fault */
	struct wb_fault *fault;			/* NULL: none */
	atomic_bool fault_on;			/* fault != NULL, read without the lock */

	struct wb_throttle *throttle;		/* the throttler (throttle.h) */
	struct wb_tunables *tunables;		/* run-time settings (tunables.c) */
	struct wb_statslog *statslog;		/* statslog.c, NULL: off */

	_Atomic uint64_t bg_thresh;		/* bytes of charge that wake the flushers */
	_Atomic uint64_t pinned_bg_thresh;	/* bytes of pinned memory that do; 0: no
						 * pinned limit (both set by tunables.c) */
	_Atomic uint32_t expire_ms;
	_Atomic uint32_t interval_ms;
	/* When a pass last wrote old data (the kernel's wb->last_old_flush). */
	_Atomic int64_t old_flush_ns;
	/* The newest age a file was given (engine.c's refresh_dirtied()). */
	_Atomic int64_t newest_dirtied_ns;

	_Atomic uint64_t backing_write_bytes;
	_Atomic uint64_t backing_write_ios;
	_Atomic uint64_t backing_write_submits;	/* system calls that submitted writes */
	_Atomic uint64_t wb_errors;
	_Atomic uint64_t wb_retries;
	_Atomic uint64_t faults_injected;
	_Atomic uint64_t flusher_passes;
	_Atomic unsigned int lost_files;
	_Atomic uint64_t full_logged;		/* the cache's full_events last logged */

	struct wb_reader *reader;		/* readahead's reads (backing.c), NULL: none */

	/* The engine's driver (wb_ctx_set_engine): immutable once files exist. */
	const struct wb_engine_ops *engine;
	void *engine_arg;
	/*
	 * Kicks since a flusher last woke (wb_round_poke/kick, taken by
	 * wb_round_begin and at a pass's end): the engine's, for both
	 * drivers.  The mount's flushers check it under flush_lock before
	 * they sleep, and a first kick broadcasts flush_cond under it, so no
	 * wake is lost.
	 */
	_Atomic unsigned int kicks;

	/* The idle pool's aging (engine.c's pool_age): pool_look_lock protects both. */
	pthread_mutex_t pool_look_lock;
	int64_t pool_look_ns;			/* last look, 0: none yet */
	uint64_t pool_made_seen;		/* folios made (pool hits + misses) then */
};

/*
 * One backing file over the cache.  Its life, in three verbs:
 *  - wb_file_alloc() makes it on an open descriptor and puts it on
 *    ctx->files, where sync-all and the listings find it; while it
 *    holds dirty or unsynced data it is on ctx->dirty too, where the
 *    flushers and reclaim find it;
 *  - wb_file_free() writes it back and syncs it, then frees it; when its
 *    data cannot be written it stays on ctx->files (the flushers go on
 *    retrying) and the caller gets the error;
 *  - wb_file_discard() frees it unwritten (the backing file has no name
 *    left), and is how wb_ctx_destroy() lets go of files kept so, after a
 *    last wb_file_flush(), counting them in lost_files.
 * Freeing waits until no walker holds a reference (refs, dying).  In
 * between, wb_file_fd_close() and wb_file_fd_reopen() give up and take
 * back the descriptor of an idle file; the wb_file and its cache stay.
 */
struct wb_file {
	struct wb_ctx *ctx;			/* immutable */
	/*
	 * The backing descriptor: upgrade replaces its file with dup3 (same
	 * number); -1 while wb_file_fd_close() has closed it, which it does
	 * only for an idle file (see wb_file.c).
	 */
	int fd;
	_Atomic int access;
	/*
	 * The writeback state the engine keeps (engine.h): the cache file
	 * (ws.bs, immutable), its age, backoff, errors (errseq) and where
	 * background writeback goes on.  A pass changes it under wb_lock.
	 */
	struct wb_fstate ws;
	ino_t ino;				/* immutable: the backing file's st_ino */
	pthread_mutex_t wb_lock;		/* one writeback pass at a time */
	pthread_mutex_t size_lock;		/* leaf: protects backing_size, resizing */
	off_t backing_size;			/* the backing file's size as last set
						 * or seen, -1 if unknown: saves a stat
						 * per writeback (a stat makes ext4 give
						 * the next write a fine-grained time, and
						 * fdatasync then writes the inode) */
	unsigned int resizing;			/* truncates and size-changing fallocates
						 * in flight: the size fix-up (wb_sync_size)
						 * leaves the backing size to them */
	_Atomic int64_t mtime_ns;		/* pending mtime, 0: none */

	/*
	 * The split tail (wb_write_cut): the bytes a cut write left in the
	 * last block it touched, held for the continuation that completes
	 * the block, so that the block need not be read first.  At most one
	 * per file, always inside [0, size) and never more than a block.
	 * tail_lock protects the fields below and is taken before any other
	 * lock of the file or the cache, by the data operations only;
	 * tail_held changes under it and is read without it as a hint.
	 */
	pthread_mutex_t tail_lock;
	atomic_bool tail_held;
	off_t tail_off;				/* block-aligned */
	size_t tail_len;			/* 0 < tail_len < block size */
	unsigned char *tail_buf;		/* a block, made at the first hold */

	unsigned int refs;			/* files_lock: walkers using it */
	bool dying;				/* files_lock: being freed */
	struct list_node files_link;		/* files_lock: on ctx->files */
	uint64_t seq;				/* immutable: its place in creation order,
						 * the flushers' round-robin key */
	/*
	 * On ctx->dirty.  Changes under files_lock; read without it by
	 * wb_file_dirtied() as a hint, which is safe because both sides
	 * store before they load (all seq_cst): a dirtier sets the age, the
	 * unsynced blocks or writing, then loads on_dirty; a walker taking
	 * the file off clears on_dirty, then loads the age, the unsynced
	 * count and writing, and puts the file back if any is set.  So
	 * either the walker sees the change or the dirtier sees false and
	 * adds the file.
	 */
	atomic_bool on_dirty;
	/*
	 * Writes in the cache (cache_write) in flight: they put the file on
	 * ctx->dirty before bs_write() and it stays there while any runs,
	 * since a write dirties blocks before it sets the age, and reclaim
	 * within it must find the file.
	 */
	_Atomic unsigned int writing;
	struct list_node dirty_link;		/* files_lock: on ctx->dirty */
};

/* The wb_file whose writeback state @fs is. */
#define wb_file_of(fs) ((struct wb_file *)((char *)(fs) - offsetof(struct wb_file, ws)))

/* ---- the lists of files (files.c) ---- */

/* @wbf, new, gets its key (seq) and goes on ctx->files.  Context: no lock held. */
void wb_files_add(struct wb_ctx *ctx, struct wb_file *wbf);
/*
 * @wbf leaves both lists, once no walker holds a reference (it is marked
 * dying meanwhile, so no new walker takes one).  Context: no lock held.
 */
void wb_files_del(struct wb_ctx *ctx, struct wb_file *wbf);
/* The newest file of ctx->files, not referenced; NULL: none.  Context: teardown, no walker. */
struct wb_file *wb_files_first(struct wb_ctx *ctx);
/* The keys files have had so far, [0, result): the flushers' round-robin keys. */
uint64_t wb_files_nr_keys(struct wb_ctx *ctx);
/* The next live file after @prev (NULL: the first), referenced; drops @prev's reference. */
struct wb_file *wb_next_file(struct wb_ctx *ctx, struct wb_file *prev);

/*
 * @wbf may hold dirty or unsynced data now (its age was just set, or a
 * pass wrote some of it): put it on ctx->dirty if it is not.  Cheap when
 * it is (one atomic load).  Context: any thread; takes files_lock
 * otherwise, so not with files_lock held.
 */
void wb_file_dirtied(struct wb_file *wbf);

/*
 * The live files of the dirty list, referenced, in @snap->files[0,
 * snap->nr) (grown as needed), taking off the list files that are clean
 * and synced (see on_dirty); in key order (seq) when @sorted.  @snap is
 * zeroed before the first use and freed with wb_dirty_snapshot_free();
 * wb_dirty_snapshot_put() drops the references.  0 or -ENOMEM (then
 * nothing is referenced).
 */
struct wb_dirty_snapshot {
	struct wb_file **files;
	unsigned int nr, cap;
};
int wb_dirty_snapshot(struct wb_ctx *ctx, struct wb_dirty_snapshot *snap, bool sorted);
/*
 * The dirty list's invariant (see wb_ctx.dirty), for wb_ctx_check(): at
 * rest, every file with dirty or unsynced data is on it, and the list,
 * nr_dirty and on_dirty agree.  0 or -EUCLEAN with details on stderr.
 */
int wb_dirty_check(struct wb_ctx *ctx);
void wb_dirty_snapshot_put(struct wb_ctx *ctx, struct wb_dirty_snapshot *snap);
void wb_dirty_snapshot_free(struct wb_dirty_snapshot *snap);

/*
 * CLOCK_MONOTONIC in ns: ages, expiry and backoff (a step of the wall
 * clock must not make data look ancient or delay a retry for hours).
 */
int64_t wb_now_ns(void);
/* A message line, through the logger (wb_set_logger). */
void wb_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void wb_report(struct wb_file *wbf, const char *what, int err);
/* Backing path of @wbf for messages and fault matching. */
void wb_file_path(struct wb_file *wbf, char *buf, size_t len);

/* ---- stats log (statslog.c) ---- */

/* Start the stats log thread if cfg.stats_log is set: 0 or -errno (message logged). */
int wb_statslog_start(struct wb_ctx *ctx);
/* Stop it (a last line is written); safe when it never started. */
void wb_statslog_stop(struct wb_ctx *ctx);

/* ---- writeback (flush.c) ---- */

/*
 * Write back the dirty runs of [start, end): 0 or the first -errno (those
 * runs stay dirty, the error is recorded for fsync).
 */
int wb_writeback_range(struct wb_file *wbf, off_t start, off_t end);
/*
 * Sync the backing file (fdatasync with @datasync, else fsync) so that
 * what was written back before becomes durable; on failure that data is
 * dirty again (bs_sync_end()), the error is recorded for fsync and the
 * flushers back off.  0 or -errno.
 */
int wb_sync_file(struct wb_file *wbf, bool datasync);
void wb_need_clean(void *ctx);
int wb_flushers_start(struct wb_ctx *ctx);
void wb_flushers_stop(struct wb_ctx *ctx);
/* Wake the flushers for a pass now, and to sleep again by the current interval. */
void wb_flushers_kick(struct wb_ctx *ctx);

/* A write dirtied data: wake the flushers if over the background threshold. */
void wb_flushers_poke(struct wb_ctx *ctx);

#endif /* FOLIOFS_WB_I_H */
