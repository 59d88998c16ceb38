// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * flush.c - the mount's driver of the writeback engine (engine.h): the
 * flusher threads, and the synchronous pass and sync the FUSE workers
 * use (fsync, reclaim, a file's end).
 *
 * Flushers wake every writeback_interval_ms, or at once when a write
 * pushes the charge of dirty data (not under writeback) over the
 * background threshold (dirty_background_bytes, or dirty_background_ratio
 * of cache_size), like the kernel's wb_workfn: over the threshold they
 * write back files round-robin, one chunk of writeback budget per file
 * per turn, until under it; otherwise they write files whose data has
 * been dirty longer than dirty_expire_ms.  The rounds, their walk, the
 * kicks and the turns are the engine's (wb_round_*, wb_turn_*); what is
 * the mount's here is what each round walks, a snapshot of the dirty list
 * (files.c: the files with dirty or unsynced data, as the kernel walks
 * b_dirty and never a clean inode), holding a file (wb_lock), sleeping
 * and waking.
 *
 * The mount's writes complete in the engine's submit (backing.c), so a
 * pass is the engine's loop as written: next, complete, ..., end.
 */
#include "wb_i.h"
#include "wb_probes.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* ---- one pass over one file ---- */

/* Flags of run_pass(). */
enum {
	/* Another pass of the file is running (a flusher or an fsync): do
	 * nothing and return -EBUSY, rather than wait and repeat its work. */
	PASS_TRY = 1,
};

/*
 * Write back the dirty runs of [start, end) of @wbf with the engine's
 * pass @p, holding wb_lock, with a budget of @budget_pages (0: none; see
 * wb_pass_begin).  The background threshold is not looked at within the
 * pass: as in the kernel, where wb_writeback() checks wb_over_bg_thresh()
 * between chunks, the flushers look at it between files.  0 or the first
 * -errno; where it stopped: wb_pass_stop(@p).
 */
static int run_pass(struct wb_file *wbf, struct wb_pass *p, off_t start, off_t end,
		    unsigned int flags, int64_t budget_pages)
{
	int ret;

	if (!(flags & PASS_TRY))
		pthread_mutex_lock(&wbf->wb_lock);
	else if (pthread_mutex_trylock(&wbf->wb_lock))
		return -EBUSY;
	wb_pass_begin(p, wbf->ctx, &wbf->ws, start, end, budget_pages,
		      !(flags & PASS_TRY) ? WB_PASS_SYNC :
		      budget_pages ? WB_PASS_BACKGROUND : WB_PASS_PERIODIC);
	while (wb_pass_next(p))
		wb_pass_complete(p);
	ret = wb_pass_end(p);
	wb_probe_written(wbf, p->nr_pages, p->budgeted ? &p->budget : NULL, flags & PASS_TRY);
	pthread_mutex_unlock(&wbf->wb_lock);
	return ret;
}

int wb_writeback_range(struct wb_file *wbf, off_t start, off_t end)
{
	struct wb_pass p;

	return run_pass(wbf, &p, start, end, 0, 0);
}

int wb_sync_file(struct wb_file *wbf, bool datasync)
{
	uint64_t token = wb_sync_begin(wbf->ctx, &wbf->ws);
	int ret = wb_backing_fsync(wbf, datasync);

	wb_sync_end(wbf->ctx, &wbf->ws, token, ret);
	return ret;
}

/* ---- reclaim ---- */

/*
 * Reclaim: write back and sync every file of the dirty list.  The
 * snapshot is made on the caller's stack and freed here: reclaim is rare
 * (the cache is full of data it cannot drop), a malloc is nothing beside
 * the writes.
 */
void wb_need_clean(void *arg)
{
	struct wb_ctx *ctx = arg;
	struct wb_dirty_snapshot snap = { 0 };
	int64_t now = wb_now_ns();

	if (wb_dirty_snapshot(ctx, &snap, false)) {
		wb_log("reclaim: no memory to list the dirty files; nothing written back");
		return;
	}
	for (unsigned int i = 0; i < snap.nr; i++) {
		struct wb_file *f = snap.files[i];

		/*
		 * A file whose writeback keeps failing waits for its backoff
		 * here too: reclaim asks again and again while the cache is
		 * full, and each try is a write that fails.
		 */
		if (!wb_reclaim_takes(ctx, &f->ws, now))
			continue;
		wb_writeback_range(f, 0, bs_file_size(f->ws.bs));
		/* Written but not synced is pinned as well. */
		if (bs_file_has_unsynced(f->ws.bs))
			wb_sync_file(f, true);
	}
	wb_dirty_snapshot_put(ctx, &snap);
	wb_dirty_snapshot_free(&snap);
}

/* ---- flusher threads ---- */

/* Wake the flushers that sleep: they take the kicks (wb_round_begin). */
static void flushers_wake(struct wb_ctx *ctx)
{
	pthread_mutex_lock(&ctx->flush_lock);
	pthread_cond_broadcast(&ctx->flush_cond);
	pthread_mutex_unlock(&ctx->flush_lock);
}

void wb_flushers_kick(struct wb_ctx *ctx)
{
	if (wb_round_kick(ctx))
		flushers_wake(ctx);
}

void wb_flushers_poke(struct wb_ctx *ctx)
{
	if (ctx->nr_flushers && wb_round_poke(ctx))
		flushers_wake(ctx);
}

static bool flushers_stopping(struct wb_ctx *ctx)
{
	bool stopping;

	pthread_mutex_lock(&ctx->flush_lock);
	stopping = ctx->stopping;
	pthread_mutex_unlock(&ctx->flush_lock);
	return stopping;
}

/*
 * @f's turn in round @r (wb_turn_plan): its pass, unless another pass
 * holds the file (then move on: waiting for it and then passing again
 * would repeat its work), then the sync check.
 */
static void flush_file(struct wb_ctx *ctx, struct wb_round *r, struct wb_file *f)
{
	struct wb_turn t;
	struct wb_pass p;
	int ret;

	if (wb_turn_plan(ctx, r, &f->ws, &t)) {
		ret = run_pass(f, &p, t.start, t.end, PASS_TRY, t.budget_pages);
		if (ret == -EBUSY || !wb_turn_end(r, &t, &p, ret))
			return;
	} else if (t.act == WB_FP_WAIT) {
		return;
	}
	if (wb_turn_should_sync(ctx, &f->ws, &t) && wb_sync_file(f, true))
		wb_turn_sync_failed(ctx);
}

/* The round-robin key of the snapshot's file @i (wb_round_list). */
static uint64_t snapshot_key(void *arg, size_t i)
{
	return ((struct wb_dirty_snapshot *)arg)->files[i]->seq;
}

/*
 * The engine's rounds from a wake to the next sleep (wb_round_next) over
 * the files of the dirty list (the others' turns would do nothing), each
 * round over a snapshot of it taken at its start, sorted by key
 * (wb_file.seq).  The keys are [0, next_seq): a key whose file is clean,
 * or gone, is a turn that does nothing, as in the simulator, which walks
 * all its files.  A stop is seen at the start of a pass.  @snap: the
 * flusher's, kept from wake to wake.
 */
static void flush_rounds(struct wb_ctx *ctx, struct wb_dirty_snapshot *snap)
{
	struct wb_round r;
	size_t i;

	wb_round_begin(ctx, &r);
	for (;;) {
		switch (wb_round_next(ctx, &r, &i)) {
		case WB_ROUND_TURN:
			flush_file(ctx, &r, snap->files[i]);
			continue;
		case WB_ROUND_PASS:
			if (flushers_stopping(ctx))
				break;
			/* fall through */
		case WB_ROUND_LIST:
			wb_dirty_snapshot_put(ctx, snap);
			if (wb_dirty_snapshot(ctx, snap, true)) {
				wb_log("flusher: no memory to list the dirty files; trying again at the next wake");
				return;
			}
			wb_round_list(ctx, &r, wb_files_nr_keys(ctx), snap->nr, snapshot_key, snap);
			continue;
		case WB_ROUND_DONE:
			break;
		}
		break;
	}
	wb_dirty_snapshot_put(ctx, snap);
}

static void *flusher_main(void *arg)
{
	struct wb_ctx *ctx = arg;
	struct wb_dirty_snapshot snap = { 0 };

	pthread_setname_np(pthread_self(), "ffs-flush");
	wb_backing_thread_is_flusher();

	pthread_mutex_lock(&ctx->flush_lock);
	while (!ctx->stopping) {
		if (!wb_round_kicked(ctx)) {
			/* On the monotonic clock, whatever clock flush_cond was made with. */
			int64_t due = wb_fp_next_wake(wb_now_ns(), atomic_load(&ctx->interval_ms));
			struct timespec ts = {
				.tv_sec = due / 1000000000,
				.tv_nsec = due % 1000000000,
			};

			pthread_cond_clockwait(&ctx->flush_cond, &ctx->flush_lock,
					       CLOCK_MONOTONIC, &ts);
		}
		if (ctx->stopping)
			break;
		pthread_mutex_unlock(&ctx->flush_lock);
		flush_rounds(ctx, &snap);
		pthread_mutex_lock(&ctx->flush_lock);
	}
	pthread_mutex_unlock(&ctx->flush_lock);
	wb_dirty_snapshot_free(&snap);
	return NULL;
}

int wb_flushers_start(struct wb_ctx *ctx)
{
	ctx->flushers = calloc(ctx->cfg.flushers ? ctx->cfg.flushers : 1, sizeof(pthread_t));
	if (!ctx->flushers)
		return -ENOMEM;
	for (unsigned int i = 0; i < ctx->cfg.flushers; i++) {
		int ret = pthread_create(&ctx->flushers[i], NULL, flusher_main, ctx);

		if (ret) {
			wb_flushers_stop(ctx);
			return -ret;
		}
		ctx->nr_flushers++;
	}
	return 0;
}

void wb_flushers_stop(struct wb_ctx *ctx)
{
	pthread_mutex_lock(&ctx->flush_lock);
	ctx->stopping = true;
	pthread_cond_broadcast(&ctx->flush_cond);
	pthread_mutex_unlock(&ctx->flush_lock);
	for (unsigned int i = 0; i < ctx->nr_flushers; i++)
		pthread_join(ctx->flushers[i], NULL);
	ctx->nr_flushers = 0;
	free(ctx->flushers);
	ctx->flushers = NULL;
}
