/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * engine.h - the writeback engine: one pass, sync, error and flusher-round
 * code, driven by two drivers.
 *
 *   the mount     flush.c's flusher threads and the FUSE workers (fsync,
 *                 reclaim), on the monotonic clock; its writes are
 *                 backing.c's and complete before submit returns
 *   the simulator sim/engine.c's event loop, on a virtual clock; its
 *                 writes go to a device model and complete at a later
 *                 event
 *
 * In the spirit of iomap's writeback_iter() and iomap_writeback_ops: the
 * engine owns the state, the driver owns the loop.  The state is a file's
 * struct wb_fstate (embedded in the mount's struct wb_file and in the
 * simulator's file) and a struct wb_pass; I/O and time are behind struct
 * wb_engine_ops, given to the context (wb_ctx_set_engine).  A pass is
 *
 *	wb_pass_begin(&p, ctx, f, start, end, budget_pages, why);
 *	while (wb_pass_next(&p))	   collect a batch, submit it
 *		wb_pass_complete(&p);	   when its writes are done
 *	err = wb_pass_end(&p);		   errors, backoff, the file's age
 *
 * where the mount runs the loop as written and the simulator returns to
 * its event loop between next and complete.  A sync is wb_sync_begin(),
 * the driver's sync, wb_sync_end().  A flusher's work, from its wake to
 * its sleep, is an iterator too:
 *
 *	wb_round_begin(ctx, &r);		   it woke: the kicks are taken
 *	while ((step = wb_round_next(ctx, &r, &i)) != WB_ROUND_DONE)
 *		if (step == WB_ROUND_TURN)	   the turn of the driver's file i
 *			wb_turn_plan(), a pass, wb_turn_end(), the sync check
 *		else				   a round (or a pass) begins:
 *			wb_round_list(ctx, &r, ...) the driver's files for it
 *
 * which walks the files in round robin from a key that moves on each
 * pass, twice per round, rounds while over the background threshold and
 * something moved, ages the idle pool and passes again if kicked
 * meanwhile.  Each file's turn (wb_turn_*) is decided by flushpolicy.h
 * and ends in a pass, a sync, both or nothing.  The state a file's
 * writeback keeps (struct wb_fstate) changes only in the engine's calls:
 * a driver reads it, and tells the engine what happened to the file
 * (wb_fstate_*: dirtied, maybe clean again, dropped) and asks it for the
 * errors an fsync reports (wb_errseq_*).  What a driver does itself: hold
 * the file for a pass (the mount's wb_lock, the simulator's busy file),
 * wait, wake its flushers, and the sync's I/O.
 *
 * Ranges are half-open, [start, end).
 */
#ifndef FOLIOFS_WB_ENGINE_H
#define FOLIOFS_WB_ENGINE_H

#include "blockstate.h"
#include "flushpolicy.h"
#include "writeback.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct wb_ctx;
struct wb_throttle;

/* Runs collected per batch, and so the most writes of one. */
#define WB_BATCH 64

/*
 * One file's writeback state, shared by both drivers.  The fields are
 * atomics read without a lock by the flushers' decisions; a pass changes
 * them while its driver holds the file (the mount's wb_lock), a sync or a
 * write may at any time.  Only engine.c writes them (drivers call the
 * wb_fstate_*, wb_pass_*, wb_sync_* and wb_turn_* functions); drivers may
 * read them.
 */
struct wb_fstate {
	struct bs_file *bs;			/* immutable */
	atomic_bool unsynced;			/* backing written since its last sync */
	_Atomic int64_t dirtied_ns;		/* when it went from clean to dirty, 0: clean */
	_Atomic int64_t retry_ns;		/* background retry not before this */
	_Atomic off_t bg_next;			/* where background writeback goes on */
	_Atomic uint32_t backoff_ms;		/* current retry backoff, 0: none */
	/* errseq: the last error, and a counter bumped by every failure */
	_Atomic int err;
	_Atomic uint64_t err_seq;
};

/*
 * One write of a batch: runs contiguous in the file, at most max_io
 * bytes.  The engine sets off and len; the mount's submit points iov at
 * a snapshot of the runs (the mount's backend advances off and len as a
 * short write is resumed); res is the write's result, 0 or -errno.
 */
struct wb_io {
	struct iovec *iov;
	int iovcnt;
	off_t off;
	size_t len;
	int res;
};

/*
 * Why a pass runs, as the kernel's writeback_control says it (sync_mode,
 * for_kupdate, for_background): for the drivers' probes.
 */
enum wb_pass_why {
	WB_PASS_SYNC,			/* fsync, reclaim, a file's end: waits for the file */
	WB_PASS_PERIODIC,		/* a flusher's turn for data past dirty_expire */
	WB_PASS_BACKGROUND,		/* a flusher's chunk over the background threshold */
	WB_PASS_RANGE,			/* sync_file_range(WRITE): a range, WB_SYNC_NONE */
};

/* A writeback pass of one file: the engine's state between the calls. */
struct wb_pass {
	struct wb_ctx *ctx;
	struct wb_fstate *file;
	enum wb_pass_why why;
	off_t start;			/* where it began */
	off_t pos, end;			/* [pos, end): what is left to look at */
	uint64_t nr_pages;		/* pages of the runs submitted (4 KiB, per run) */
	bool budgeted;			/* background: pay from budget */
	bool wrote;			/* some write succeeded */
	int first_err;			/* the first failed write, 0: none */
	struct bs_wb_budget budget;
	int nr_runs;			/* runs of the batch in flight, 0: none */
	int nr_io;			/* its writes */
	struct bs_wb_run runs[WB_BATCH];
	int group_of[WB_BATCH];		/* runs[i] is written by io[group_of[i]] */
	struct wb_io io[WB_BATCH];
	struct iovec iov[WB_BATCH];	/* for the mount's submit: one per write */
};

/* What a driver gives the engine: I/O and time.  @arg: wb_ctx_set_engine's. */
struct wb_engine_ops {
	/*
	 * Write the batch: p->io[0..p->nr_io) of p->file, made of p->runs.
	 * Each write's result goes to its res.  The mount writes them before
	 * it returns; the simulator issues them to its device and calls
	 * wb_pass_complete() when they end.  0, or -errno when the batch
	 * could not be written at all (no memory for it): its runs are then
	 * completed with that error and the pass ends.
	 */
	int (*submit)(void *arg, struct wb_pass *p);
	/* Now, in ns: monotonic on the mount, virtual in the simulator. */
	int64_t (*now)(void *arg);
	/*
	 * Optional: a run of failures of @f begins (@err < 0: @what failed,
	 * "writing back" or "syncing") or ends (@err 0, @what NULL).  The
	 * mount logs both.
	 */
	void (*report)(void *arg, struct wb_fstate *f, const char *what, int err);
	/* Optional: a pass wrote @f through its end, without error (the mount fixes the backing size). */
	void (*written_whole)(void *arg, struct wb_fstate *f);
	/* Optional: a flusher's turn wrote @f without error (the mount puts back the backing mtime). */
	void (*turn_written)(void *arg, struct wb_fstate *f);
	/*
	 * Optional: @f may now hold dirty data (its age went from 0 to a
	 * time) or written-but-unsynced data (a pass wrote some of it).
	 * The mount puts it on the list of files its flushers walk (flush.c,
	 * the kernel's b_dirty); the simulator walks all its files.  Called
	 * after the change, so a driver that takes a file off its list when
	 * it looks clean and synced sees the change or gets this call.
	 * Context: any thread, no lock of the engine's held; the caller may
	 * hold the file (wb_lock).
	 */
	void (*dirtied)(void *arg, struct wb_fstate *f);
};

/* The driver of @ctx's writeback: @ops with @arg (before any pass). */
void wb_ctx_set_engine(struct wb_ctx *ctx, const struct wb_engine_ops *ops, void *arg);

/* ---- a file's state (struct wb_fstate) ---- */

/* @f, zeroed, is the state of the cache file @bs: clean, no error. */
void wb_fstate_init(struct wb_fstate *f, struct bs_file *bs);
/*
 * A write dirtied @f: it gets an age (now) if it holds dirty data and has
 * none, and the driver's dirtied op.  Context: any thread, after the
 * write's bs_write().
 */
void wb_fstate_dirtied(struct wb_ctx *ctx, struct wb_fstate *f);
/*
 * @f may hold no dirty data any more (a truncate, a punched hole, its
 * cache dropped): its age is forgotten unless it still holds some.
 * Context: as wb_fstate_dirtied().
 */
void wb_fstate_cleaned(struct wb_ctx *ctx, struct wb_fstate *f);
/*
 * The driver changed @f's backing file beside its data (the mount set its
 * size after a pass wrote it whole): the next sync must make that
 * durable too.  Context: the written_whole op.
 */
void wb_fstate_unsynced(struct wb_ctx *ctx, struct wb_fstate *f);
/*
 * @f's cache was dropped unwritten (the file lost its last name): its
 * age, background position, backoff and errors go, as for a new file.
 * Context: the caller holds the file (no pass runs).
 */
void wb_fstate_reset(struct wb_ctx *ctx, struct wb_fstate *f);

/*
 * errseq: an fsync's cursor (@seen, from wb_errseq_sample() when its open
 * began) hears of each writeback error once.  wb_errseq_check() returns
 * @err, or when that is 0 and an error was recorded since *@seen, the
 * last one; *@seen moves to now.  @seen NULL: @err.
 */
uint64_t wb_errseq_sample(const struct wb_fstate *f);
int wb_errseq_check(const struct wb_fstate *f, uint64_t *seen, int err);

/* ---- a pass ---- */

/*
 * Begin a pass of [@start, @end) of @f; with @budget_pages > 0 it stops
 * where that budget (in folio pages, see struct bs_wb_budget) is used
 * up.  The caller holds the file.  The throttler's bandwidth estimate
 * follows writeback from here (the kernel's do_writepages).
 */
void wb_pass_begin(struct wb_pass *p, struct wb_ctx *ctx, struct wb_fstate *f,
		   off_t start, off_t end, int64_t budget_pages, enum wb_pass_why why);
/*
 * Collect the next batch of dirty runs and submit it: true, then
 * wb_pass_complete() once its writes are done; false when the pass is
 * over (nothing left, the budget used up, or the batch could not be
 * submitted).  Failed writes are recorded for fsync (errseq) here.
 */
bool wb_pass_next(struct wb_pass *p);
/* Complete the batch in flight with its writes' results (nothing if none is). */
void wb_pass_complete(struct wb_pass *p);
/*
 * The pass is over: the file's backoff (a failure) or its end, its age,
 * the size fix-up after a whole write.  0 or the first -errno.
 * Where it stopped: wb_pass_stop().
 */
int wb_pass_end(struct wb_pass *p);
/* Where the pass stopped: its end if it went through. */
off_t wb_pass_stop(const struct wb_pass *p);

/* ---- a sync ---- */

/*
 * A sync of @f's backing file: wb_sync_begin() before the driver's sync
 * (fdatasync on the mount, a device flush in the simulator), with its
 * token, and wb_sync_end() with its result.  A failed sync makes what it
 * covered dirty again (bs_sync_end), records the error and backs off.
 */
uint64_t wb_sync_begin(struct wb_ctx *ctx, struct wb_fstate *f);
void wb_sync_end(struct wb_ctx *ctx, struct wb_fstate *f, uint64_t token, int err);

/* ---- the flushers' rounds ---- */

/*
 * The cache and settings as the flushers see them now (cheap: atomic
 * reads), and whether that is over the background threshold.
 */
void wb_fp_state_of(struct wb_ctx *ctx, struct wb_fp_state *s);
bool wb_over_background(struct wb_ctx *ctx);

/*
 * A flusher's work from its wake to its sleep, as an iterator
 * (wb_round_next).  A pass over the files is rounds in round robin, each
 * pass starting one key further down than the last (so that the
 * threshold, which ends the writing, does not always stop it on the same
 * files), each round walking the files twice (keys from the first, then
 * those before it), repeated while over the background threshold and
 * something moved (wb_fp_round_again).  After a pass the idle pool is
 * aged (wb_fp_pool_keep), and the flusher passes again at once if it was
 * kicked meanwhile, else it sleeps until writeback_interval_ms (the
 * driver's wait, wb_fp_next_wake) or a kick (wb_round_poke).
 *
 * Files are placed by a key in [0, nr_keys): the simulator's file index,
 * the mount's creation number (its flushers walk only the files on its
 * dirty list, in key order: the others' turns would do nothing; see
 * wb_fp_round_turn).  The driver lists its files for each round, in
 * ascending key order, and gets back indices into its list.
 */
struct wb_round {
	uint64_t first;			/* the key the rounds start at */
	bool progress, last_progress;	/* this round, the one before */
	int64_t now;			/* the round's time: its turns are judged at it */
	bool background;		/* over the background threshold, as judged */
	int64_t bg_judged;		/* at this time (wb_fp_bg_recheck_due()) */
	bool kupdate;			/* the pass writes old files (wb_fp_old_flush_due()) */
	/* the walk */
	bool new_pass;			/* the next list begins a pass */
	bool listed;			/* the driver listed its files for this round */
	unsigned int half;		/* the walk of the round (0, 1) */
	size_t i, nr;			/* the driver's next file, and how many it listed */
	uint64_t (*key)(void *arg, size_t i);	/* file i's key; NULL: i */
	void *key_arg;
};
/* What wb_round_next() asks of the driver. */
enum wb_round_step {
	WB_ROUND_PASS,			/* a pass begins: list the files (wb_round_list) */
	WB_ROUND_LIST,			/* another round of the pass: list them again */
	WB_ROUND_TURN,			/* the turn of the listed file *i */
	WB_ROUND_DONE,			/* the flusher sleeps until its next wake */
};
/*
 * A flusher woke (its interval, or a kick): the kicks are taken, and the
 * first wb_round_next() begins a pass.
 */
void wb_round_begin(struct wb_ctx *ctx, struct wb_round *r);
/*
 * The next step of the flusher @r (see enum wb_round_step).  After a
 * TURN the driver may return to its event loop and call again when the
 * turn is over.
 */
enum wb_round_step wb_round_next(struct wb_ctx *ctx, struct wb_round *r, size_t *i);
/*
 * The driver's files for this round (after PASS or LIST): @nr of them,
 * file i of key @key(@arg, i) (NULL @key: i), keys ascending, among
 * @nr_keys keys (read at a pass's first list: counted, stat
 * flusher_passes).
 */
void wb_round_list(struct wb_ctx *ctx, struct wb_round *r, uint64_t nr_keys, size_t nr,
		   uint64_t (*key)(void *arg, size_t i), void *arg);
/*
 * Writes may have taken the cache over the background threshold: if so,
 * a kick, and true when it is the first since the flushers last took
 * them: the driver then wakes its sleeping flushers, which begin with
 * wb_round_begin(); later kicks find them awake.
 * wb_round_kick() kicks whatever the threshold (a tunable changed the
 * interval).  Context: any thread.
 */
bool wb_round_poke(struct wb_ctx *ctx);
bool wb_round_kick(struct wb_ctx *ctx);
/* Whether a kick waits for the flushers (the driver's wait checks it). */
bool wb_round_kicked(struct wb_ctx *ctx);

/*
 * A file's turn: plan it (the action, and the pass it makes), run the
 * pass if there is one and the driver could take the file, then
 * wb_turn_end() after wb_pass_end() (and the driver's release of the
 * file); then the sync check.
 */
struct wb_turn {
	enum wb_fp_action act;
	enum wb_pass_why why;		/* of the pass: PERIODIC or BACKGROUND */
	off_t start, end;		/* the pass, for EXPIRED and CHUNK */
	int64_t budget_pages;		/* CHUNK: writeback_chunk_size() */
};
/* Plan @f's turn in @r: true when it makes a pass (act EXPIRED or CHUNK). */
bool wb_turn_plan(struct wb_ctx *ctx, struct wb_round *r, struct wb_fstate *f,
		  struct wb_turn *t);
/*
 * The turn's pass @p ended with @err (wb_pass_end): a pass moves the
 * file's cyclic position on (and a chunk may count as progress), one that
 * reached the end may make the file younger; a failure is
 * counted (wb_retries) and the file is not synced on this turn (false);
 * else the turn_written op, and true.
 */
bool wb_turn_end(struct wb_round *r, const struct wb_turn *t, struct wb_pass *p, int err);
/* After the turn (or one with nothing to write): whether to sync @f now. */
bool wb_turn_should_sync(struct wb_ctx *ctx, struct wb_fstate *f, const struct wb_turn *t);
/* The turn's sync failed: counted (wb_retries). */
void wb_turn_sync_failed(struct wb_ctx *ctx);

/*
 * Reclaim found the cache full of data it cannot drop: whether @f is
 * written back and synced for it (not while it backs off: each try would
 * be a write that fails).
 */
bool wb_reclaim_takes(struct wb_ctx *ctx, struct wb_fstate *f, int64_t now_ns);

/* ---- what a driver needs of the context ---- */

/*
 * The context without its drivers, for wb_ctx_create() and the simulator
 * (sim/engine.c): the cache with @cache_ops (@cache_arg, or the context
 * when NULL), the tunables and the throttler started at @now_ns on the
 * caller's clock, the mount's engine ops (wb_ctx_set_engine replaces
 * them), backing I/O cfg->backing_io without its setup; no fault,
 * flusher or stats-log thread.
 * wb_ctx_destroy_core() frees what it made.
 */
int wb_ctx_create_core(const struct bs_config *bs_cfg, const struct wb_config *cfg,
		       const struct bs_cache_ops *cache_ops, void *cache_arg,
		       int64_t now_ns, struct wb_ctx **out);
void wb_ctx_destroy_core(struct wb_ctx *ctx);
struct bs_cache *wb_ctx_cache(struct wb_ctx *ctx);
/* writeback_interval_ms now (a tunable). */
uint32_t wb_ctx_interval_ms(struct wb_ctx *ctx);
/*
 * wb_balance_dirty() and wb_balance_dirty_again() (writeback.h) at
 * @now_ns on the driver's clock, without the mount's part: only a driver
 * whose flushers run calls them (with none, nothing would write back
 * while a writer waits), and waking the flushers after a pause is the
 * driver's (wb_round_poke).  Context: as wb_balance_dirty().
 */
int64_t wb_balance_dirty_at(struct wb_ctx *ctx, pid_t pid, uint64_t dirtied, int64_t now_ns);
int64_t wb_balance_dirty_again_at(struct wb_ctx *ctx, pid_t pid, int64_t now_ns);
/*
 * Backing writes a driver made: @ios writes, @bytes written, @submits
 * system calls (stats backing_write_ios, _bytes, _submits).
 */
void wb_ctx_count_writes(struct wb_ctx *ctx, uint64_t ios, uint64_t bytes, uint64_t submits);

/* The calls a fault may hit (grammar: wb_i.h, struct wb_fault). */
enum wb_fault_op { WB_FAULT_WRITE, WB_FAULT_READ, WB_FAULT_FSYNC, WB_FAULT_ALLOC };
/*
 * Apply @ctx's fault (-o fault=), if any, to a call @op of [@off, @off +
 * @len) that returned @res: an errno, half of what was done (a multiple
 * of @align), or @res; a fault that fires is counted (faults_injected).
 * @name(@arg, buf, len) names the file for file= (the backing path on a
 * mount, the trace's file id in the simulator); asked only when file= is
 * set.  Context: any thread (takes the fault lock).
 */
ssize_t wb_fault_apply(struct wb_ctx *ctx, void (*name)(void *arg, char *buf, size_t len),
		       void *arg, enum wb_fault_op op, off_t off, size_t len, ssize_t res,
		       size_t align);

/*
 * One line of the stats log into @line (@line_size, at least
 * WB_STATSLOG_LINE_MAX): {"time_ms": @time_ms, "unix_ms": @unix_ms (left
 * out when negative), then every stat of wb_ctx_stats() (made in @stats,
 * @stats_size bytes) as "name": value, a string when the value is not a
 * plain number}, and a newline.  Returns its length.  The mount's log
 * thread and the simulator (on its virtual clock) write the same format.
 */
#define WB_STATSLOG_STATS_MAX 16384
#define WB_STATSLOG_LINE_MAX (2 * WB_STATSLOG_STATS_MAX + 128)
size_t wb_statslog_format(struct wb_ctx *ctx, int64_t time_ms, int64_t unix_ms,
			  char *stats, size_t stats_size, char *line, size_t line_size);

#endif /* FOLIOFS_WB_ENGINE_H */
