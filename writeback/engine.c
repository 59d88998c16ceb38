// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * engine.c - the writeback engine both drivers run (engine.h): passes,
 * syncs, errors and backoff, the flushers' rounds and turns.
 *
 * A pass collects dirty runs from blockstate batch by batch, puts runs
 * contiguous in the file into one write of at most max_io bytes, has the
 * driver submit the batch and completes every run with its write's
 * result: success makes its blocks clean, failure leaves them dirty and
 * records the error for fsync (errseq) and a backoff before the flushers
 * retry the file.
 *
 * Nothing here reads a clock (ops->now), does I/O (ops->submit; the sync
 * is the driver's between wb_sync_begin and wb_sync_end), takes a lock of
 * the driver's or sleeps: the mount and the simulator run the same code.
 * The one lock taken here is the context's pool_look_lock, a leaf, when a
 * flusher's pass ends (pool_age).
 */
#include "wb_i.h"
#include "throttle.h"

#include <errno.h>

void wb_ctx_set_engine(struct wb_ctx *ctx, const struct wb_engine_ops *ops, void *arg)
{
	ctx->engine = ops;
	ctx->engine_arg = arg;
}

static int64_t engine_now(struct wb_ctx *ctx)
{
	return ctx->engine->now(ctx->engine_arg);
}

/* ---- errors and backoff ---- */

static void record_error(struct wb_ctx *ctx, struct wb_fstate *f, int err)
{
	atomic_store(&f->err, err);
	atomic_fetch_add(&f->err_seq, 1);
	atomic_fetch_add(&ctx->wb_errors, 1);
}

/*
 * A pass or sync failed: the flushers retry the file after a backoff that
 * doubles per failure.  The first failure of a run of them is reported
 * (the mount logs it, with what failed), so that a writer who never calls
 * fsync still learns of it; the retries are not, and works_again()
 * reports the end of the run.
 */
static void back_off(struct wb_ctx *ctx, struct wb_fstate *f, const char *what, int err)
{
	uint32_t backoff = atomic_load(&f->backoff_ms);

	if (!backoff && ctx->engine->report)
		ctx->engine->report(ctx->engine_arg, f, what, err);
	backoff = wb_fp_backoff_next(backoff);
	atomic_store(&f->backoff_ms, backoff);
	atomic_store(&f->retry_ns, wb_fp_retry_due(engine_now(ctx), backoff));
}

/* A pass succeeded: end a run of failures. */
static void works_again(struct wb_ctx *ctx, struct wb_fstate *f)
{
	if (atomic_exchange(&f->backoff_ms, 0) && ctx->engine->report)
		ctx->engine->report(ctx->engine_arg, f, NULL, 0);
}

/* @f may hold dirty or unsynced data now: tell the driver (ops->dirtied). */
static void tell_dirtied(struct wb_ctx *ctx, struct wb_fstate *f)
{
	if (ctx->engine->dirtied)
		ctx->engine->dirtied(ctx->engine_arg, f);
}

/* The newest age any file was given is now at least @age_ns. */
static void note_newest(struct wb_ctx *ctx, int64_t age_ns)
{
	int64_t seen = atomic_load(&ctx->newest_dirtied_ns);

	while (seen < age_ns &&
	       !atomic_compare_exchange_weak(&ctx->newest_dirtied_ns, &seen, age_ns))
		;
}

/*
 * The file holds dirty data again: give it an age if it has none.  An age
 * of 0 means clean, and the simulator's clock starts at 0: data dirtied
 * then is aged 1 ns, or writers that dirty the limit at once (closed
 * loops, no think time) would leave every file looking clean to the
 * flushers, and wait for ever.
 */
static void note_dirtied(struct wb_ctx *ctx, struct wb_fstate *f)
{
	int64_t zero = 0, now;

	/*
	 * Every write comes here: an aged file costs a load, not a clock
	 * read.  The load is sequentially consistent, as update_dirtied()'s
	 * exchange and the held count's updates are: either it sees the age
	 * cleared, or update_dirtied() sees this writer's held data.
	 */
	if (atomic_load(&f->dirtied_ns) || !bs_file_has_held(f->bs))
		return;
	now = engine_now(ctx);
	if (atomic_compare_exchange_strong(&f->dirtied_ns, &zero, now > 0 ? now : 1)) {
		note_newest(ctx, now > 0 ? now : 1);
		tell_dirtied(ctx, f);
	}
}

/*
 * A pass went through to the end of @f with its budget left, and @f is
 * still dirty (written behind the pass, or before where it began): its
 * age becomes @now_ns if another file was dirtied since @f was, as the
 * kernel's requeue_inode() puts such an inode back on b_dirty with
 * redirty_tail(), which makes its dirtied_when now when it is older than
 * the newest there.  So a file that is dirtied all the time (a database's
 * table) is not old as long as the flushers go through it, and is written
 * whole only when they have not for dirty_expire_ms.
 */
static void refresh_dirtied(struct wb_ctx *ctx, struct wb_fstate *f, int64_t now_ns)
{
	int64_t old = atomic_load(&f->dirtied_ns);

	if (old && old < atomic_load(&ctx->newest_dirtied_ns) && now_ns > old &&
	    atomic_compare_exchange_strong(&f->dirtied_ns, &old, now_ns))
		note_newest(ctx, now_ns);
}

/* The file may have become clean: forget its age unless it is not. */
static void update_dirtied(struct wb_ctx *ctx, struct wb_fstate *f)
{
	int64_t old = atomic_exchange(&f->dirtied_ns, 0);
	int64_t zero = 0;

	/*
	 * A writer that dirties after the check sets the age itself.  The
	 * age was 0 for a moment, in which the driver may have taken the
	 * file off its list: put back, it is told again.
	 */
	if (old && bs_file_has_held(f->bs) &&
	    atomic_compare_exchange_strong(&f->dirtied_ns, &zero, old))
		tell_dirtied(ctx, f);
}

/* ---- a file's state ---- */

void wb_fstate_init(struct wb_fstate *f, struct bs_file *bs)
{
	f->bs = bs;
}

void wb_fstate_dirtied(struct wb_ctx *ctx, struct wb_fstate *f)
{
	note_dirtied(ctx, f);
}

void wb_fstate_cleaned(struct wb_ctx *ctx, struct wb_fstate *f)
{
	update_dirtied(ctx, f);
}

void wb_fstate_unsynced(struct wb_ctx *ctx, struct wb_fstate *f)
{
	(void)ctx;
	atomic_store(&f->unsynced, true);
}

void wb_fstate_reset(struct wb_ctx *ctx, struct wb_fstate *f)
{
	(void)ctx;
	atomic_store(&f->dirtied_ns, 0);
	atomic_store(&f->bg_next, 0);
	atomic_store(&f->retry_ns, 0);
	atomic_store(&f->backoff_ms, 0);
	atomic_store(&f->err, 0);
	atomic_store(&f->err_seq, 0);
}

uint64_t wb_errseq_sample(const struct wb_fstate *f)
{
	return atomic_load(&f->err_seq);
}

int wb_errseq_check(const struct wb_fstate *f, uint64_t *seen, int err)
{
	uint64_t seq = atomic_load(&f->err_seq);

	if (seen && *seen != seq) {
		*seen = seq;
		if (!err)
			err = atomic_load(&f->err);
	}
	return err;
}

/* ---- the throttler's view ---- */

void wb_throttle_sample_of(struct wb_ctx *ctx, struct wb_throttle_sample *s)
{
	struct bs_stats st;

	bs_cache_stats(ctx->cache, &st);
	s->dirty = st.nr_dirty;
	s->pinned = (st.pinned_bytes + BS_PAGE_SIZE - 1) / BS_PAGE_SIZE;
	s->dirtied = st.nr_dirtied;
	/*
	 * The bandwidth is measured, as the kernel's write_bw is from
	 * WB_WRITTEN, in whole folios whose writeback ended, not in the
	 * policy's charge discharged (nr_discharged): it is what the device
	 * gets through per second as the page cache counts it.  So, exactly as
	 * in the kernel, a large folio of which only a few blocks were dirty
	 * counts all its pages, and partly dirty large folios inflate
	 * write_bw (by up to folio size / block size) over the bytes the
	 * device really wrote.  The kernel's dirty rate is inflated alike
	 * (WB_DIRTIED counts whole folios), so its balanced rate limit comes
	 * out right under dirty_account=folio, while under page or block the
	 * rate limit is raised by the same factor (the cost of that mismatch
	 * is one of the things to compare).
	 */
	s->written = st.nr_written;
	s->writeback = st.nr_writeback;
}

/*
 * The throttler's bandwidth estimate follows writeback as the kernel's
 * do_writepages() updates it: at the start of a pass over a file, and at
 * its end (not after each batch: the kernel updates once per writepages
 * call, and the window writeback keeps restarting is the one a throttled
 * writer must find stale to move the rate limit).
 */
static void throttle_note(struct wb_ctx *ctx, bool starting)
{
	struct wb_throttle_sample s;

	wb_throttle_sample_of(ctx, &s);
	if (starting)
		wb_throttle_writeback_start(ctx->throttle, &s, engine_now(ctx));
	else
		wb_throttle_update(ctx->throttle, &s, engine_now(ctx));
}

/* ---- a pass ---- */

void wb_pass_begin(struct wb_pass *p, struct wb_ctx *ctx, struct wb_fstate *f,
		   off_t start, off_t end, int64_t budget_pages, enum wb_pass_why why)
{
	p->ctx = ctx;
	p->file = f;
	p->why = why;
	p->start = start;
	p->nr_pages = 0;
	p->pos = start;
	p->end = end;
	p->budgeted = budget_pages > 0;
	p->wrote = false;
	p->first_err = 0;
	p->nr_runs = p->nr_io = 0;
	if (p->budgeted)
		bs_wb_budget_init(&p->budget, budget_pages);
	throttle_note(ctx, true);
}

/* Put the batch's runs into writes: those contiguous share one, up to max_io. */
static void group_runs(struct wb_pass *p)
{
	p->nr_io = wb_fp_group_runs(p->runs, p->nr_runs, p->ctx->cfg.max_io, p->group_of);
	for (int g = 0; g < p->nr_io; g++) {
		p->io[g].iov = &p->iov[g];
		p->io[g].iovcnt = 1;
		p->io[g].len = 0;
		p->io[g].res = 0;
	}
	for (int i = p->nr_runs - 1; i >= 0; i--) {
		p->io[p->group_of[i]].off = p->runs[i].off;
		p->io[p->group_of[i]].len += p->runs[i].len;
	}
}

bool wb_pass_next(struct wb_pass *p)
{
	struct wb_ctx *ctx = p->ctx;
	int err;

	p->nr_runs = bs_wb_collect_budget(p->file->bs, &p->pos, p->end, p->runs, WB_BATCH,
					  WB_FP_BATCH_BYTES, ctx->cfg.max_io,
					  wb_fp_collect_flags(ctx->cfg.whole_folio,
							      ctx->cfg.backing_direct),
					  p->budgeted ? &p->budget : NULL);
	if (!p->nr_runs)
		return false;
	group_runs(p);
	err = ctx->engine->submit(ctx->engine_arg, p);
	if (err) {
		for (int i = 0; i < p->nr_runs; i++)
			bs_wb_complete(p->file->bs, &p->runs[i], err);
		p->nr_runs = 0;
		if (!p->first_err)
			p->first_err = err;
		return false;
	}
	for (int i = 0; i < p->nr_runs; i++)
		p->nr_pages += (p->runs[i].len + BS_PAGE_SIZE - 1) / BS_PAGE_SIZE;
	for (int g = 0; g < p->nr_io; g++) {
		if (p->io[g].res) {
			record_error(ctx, p->file, p->io[g].res);
			if (!p->first_err)
				p->first_err = p->io[g].res;
		} else {
			p->wrote = true;
		}
	}
	return true;
}

void wb_pass_complete(struct wb_pass *p)
{
	if (!p->nr_runs)
		return;
	for (int i = 0; i < p->nr_runs; i++)
		bs_wb_complete(p->file->bs, &p->runs[i], p->io[p->group_of[i]].res);
	p->nr_runs = 0;
}

off_t wb_pass_stop(const struct wb_pass *p)
{
	return p->pos < p->end ? p->pos : p->end;
}

int wb_pass_end(struct wb_pass *p)
{
	struct wb_ctx *ctx = p->ctx;
	struct wb_fstate *f = p->file;
	/* Only a used-up budget (or a batch not submitted) ends a pass early. */
	bool stopped = p->pos < p->end;

	if (p->wrote) {
		atomic_store(&f->unsynced, true);
		tell_dirtied(ctx, f);
	}
	if (!p->first_err && !stopped && p->end >= bs_file_size(f->bs) &&
	    ctx->engine->written_whole)
		ctx->engine->written_whole(ctx->engine_arg, f);
	if (p->first_err)
		back_off(ctx, f, "writing back", p->first_err);
	else
		works_again(ctx, f);
	update_dirtied(ctx, f);
	throttle_note(ctx, false);
	return p->first_err;
}

/* ---- a sync ---- */

uint64_t wb_sync_begin(struct wb_ctx *ctx, struct wb_fstate *f)
{
	uint64_t token = bs_sync_begin(f->bs);

	(void)ctx;
	atomic_store(&f->unsynced, false);
	return token;
}

void wb_sync_end(struct wb_ctx *ctx, struct wb_fstate *f, uint64_t token, int err)
{
	/* Failure: what was written since the last good sync is dirty again. */
	bs_sync_end(f->bs, token, err);
	if (!err)
		return;
	atomic_store(&f->unsynced, true);
	tell_dirtied(ctx, f);
	record_error(ctx, f, err);
	note_dirtied(ctx, f);
	back_off(ctx, f, "syncing", err);
}

/* ---- the flushers' rounds ---- */

/*
 * The dirty part is priced by the accounting policy, so with
 * dirty_account=folio the background comparison is the kernel's exactly.
 */
void wb_fp_state_of(struct wb_ctx *ctx, struct wb_fp_state *s)
{
	*s = (struct wb_fp_state){
		.dirty_charged = bs_cache_dirty_charged(ctx->cache),
		.pinned = bs_cache_pinned(ctx->cache),
		.unsynced = bs_cache_unsynced(ctx->cache),
		.bg_thresh = atomic_load(&ctx->bg_thresh),
		.pinned_bg_thresh = atomic_load(&ctx->pinned_bg_thresh),
		.expire_ms = atomic_load(&ctx->expire_ms),
	};
}

bool wb_over_background(struct wb_ctx *ctx)
{
	struct wb_fp_state s;

	wb_fp_state_of(ctx, &s);
	return wb_fp_over_background(&s);
}

static void fp_file_of(struct wb_fstate *f, struct wb_fp_file *out)
{
	*out = (struct wb_fp_file){
		.dirtied_ns = atomic_load(&f->dirtied_ns),
		.retry_ns = atomic_load(&f->retry_ns),
		.unsynced = bs_file_has_unsynced(f->bs),
	};
}

/* A new round: nothing moved in it yet; the threshold judged now. */
static void round_start(struct wb_ctx *ctx, struct wb_round *r)
{
	r->last_progress = r->progress;
	r->progress = false;
	r->now = engine_now(ctx);
	r->background = wb_over_background(ctx);
	r->bg_judged = r->now;
}

/* The round is over: true (and the next one begun) if another is due. */
static bool round_again(struct wb_ctx *ctx, struct wb_round *r)
{
	struct wb_fp_state s;

	wb_fp_state_of(ctx, &s);
	if (!wb_fp_round_again(r->progress, r->last_progress, &s))
		return false;
	round_start(ctx, r);
	return true;
}

/*
 * A flusher's pass is over at @now_ns: if the pool is due a look
 * (wb_fp_pool_look_due), give back what wb_fp_pool_keep() does not keep.
 * pool_look_lock: flushers end passes on several threads.
 */
static void pool_age(struct wb_ctx *ctx, int64_t now_ns)
{
	struct bs_stats st;
	uint64_t made, keep;

	pthread_mutex_lock(&ctx->pool_look_lock);
	if (!wb_fp_pool_look_due(ctx->pool_look_ns, now_ns, atomic_load(&ctx->interval_ms))) {
		pthread_mutex_unlock(&ctx->pool_look_lock);
		return;
	}
	bs_cache_stats(ctx->cache, &st);
	made = st.pool_hits + st.pool_misses;
	keep = wb_fp_pool_keep(st.pool_bytes, !ctx->pool_look_ns || made != ctx->pool_made_seen);
	ctx->pool_look_ns = now_ns;
	ctx->pool_made_seen = made;
	pthread_mutex_unlock(&ctx->pool_look_lock);
	if (keep < st.pool_bytes)
		bs_cache_pool_shrink(ctx->cache, keep);
}

/*
 * Whether the pass beginning at @now_ns writes old data: if one is due
 * (wb_fp_old_flush_due()), this pass takes it, and another flusher's pass
 * beginning meanwhile does not.
 */
static bool claim_old_flush(struct wb_ctx *ctx, int64_t now_ns)
{
	int64_t last = atomic_load(&ctx->old_flush_ns);

	return wb_fp_old_flush_due(last, now_ns, atomic_load(&ctx->interval_ms)) &&
	       atomic_compare_exchange_strong(&ctx->old_flush_ns, &last, now_ns);
}

void wb_round_begin(struct wb_ctx *ctx, struct wb_round *r)
{
	atomic_store(&ctx->kicks, 0);
	*r = (struct wb_round){ .new_pass = true };
}

void wb_round_list(struct wb_ctx *ctx, struct wb_round *r, uint64_t nr_keys, size_t nr,
		   uint64_t (*key)(void *arg, size_t i), void *arg)
{
	if (r->new_pass) {
		uint64_t pass_no = atomic_fetch_add(&ctx->flusher_passes, 1);

		r->new_pass = false;
		r->first = wb_fp_round_first(pass_no, nr_keys);
		r->progress = true;
		round_start(ctx, r);
		r->kupdate = claim_old_flush(ctx, r->now);
	}
	r->nr = nr;
	r->key = key;
	r->key_arg = arg;
	r->half = 0;
	r->i = 0;
	r->listed = true;
}

enum wb_round_step wb_round_next(struct wb_ctx *ctx, struct wb_round *r, size_t *i)
{
	if (!r->listed)
		return r->new_pass ? WB_ROUND_PASS : WB_ROUND_LIST;
	for (; r->half < 2; r->half++, r->i = 0) {
		while (r->i < r->nr) {
			size_t at = r->i++;
			uint64_t key = r->key ? r->key(r->key_arg, at) : at;

			if (wb_fp_round_turn(r->half, key, r->first)) {
				*i = at;
				return WB_ROUND_TURN;
			}
		}
	}
	r->listed = false;
	if (round_again(ctx, r))
		return WB_ROUND_LIST;
	pool_age(ctx, engine_now(ctx));
	/* Kicked during the pass: another one at once, as after a wake. */
	if (!atomic_exchange(&ctx->kicks, 0))
		return WB_ROUND_DONE;
	r->new_pass = true;
	return WB_ROUND_PASS;
}

bool wb_round_kick(struct wb_ctx *ctx)
{
	return atomic_fetch_add(&ctx->kicks, 1) == 0;
}

bool wb_round_poke(struct wb_ctx *ctx)
{
	return wb_over_background(ctx) && wb_round_kick(ctx);
}

bool wb_round_kicked(struct wb_ctx *ctx)
{
	return atomic_load(&ctx->kicks) != 0;
}

/* Pages of writeback budget for one background chunk (wb_fp_chunk_pages). */
static int64_t writeback_chunk_size(struct wb_ctx *ctx)
{
	struct wb_throttle_stats ts;

	wb_throttle_stats(ctx->throttle, &ts);
	return wb_fp_chunk_pages(ts.avg_write_bw, ts.dirty_limit);
}

/*
 * In a pass that writes old data (one per writeback interval,
 * wb_fp_old_flush_due()), a file whose data has been dirty for
 * dirty_expire_ms is written without a budget from where the last pass
 * over it stopped to today's end (a pass does not chase an appending
 * writer), as the kernel's kupdate work writes an expired inode chunk
 * after chunk until it reaches the end; else, over the background
 * threshold, one chunk: a budget of writeback_chunk_size() pages from
 * where the last pass stopped to the end of the file (the kernel's
 * writeback_index for range_cyclic writeback, so that the same blocks are
 * not written over and over while the rest of the file waits); the pass
 * after one that reached the end starts from the start.  Then the
 * flushers move on to the next file, whether or not this one has more, as
 * the kernel requeues an inode that used up its chunk on b_more_io.  A
 * pass that reached the end leaves a file still dirty younger
 * (refresh_dirtied()).
 */
bool wb_turn_plan(struct wb_ctx *ctx, struct wb_round *r, struct wb_fstate *f,
		  struct wb_turn *t)
{
	int64_t now = engine_now(ctx);
	struct wb_fp_state s;
	struct wb_fp_file ff;

	wb_fp_state_of(ctx, &s);
	fp_file_of(f, &ff);
	/*
	 * The background threshold is judged at the round's start and again
	 * only after WB_FP_BG_RECHECK_NS of turns, not at every file: once
	 * over it, the flushers write a chunk of each file for that long,
	 * as the kernel's do (writeback_sb_inodes()), well below it.
	 */
	if (wb_fp_bg_recheck_due(r->bg_judged, now)) {
		r->background = wb_fp_over_background(&s);
		r->bg_judged = now;
	}
	*t = (struct wb_turn){ .act = wb_fp_file_action(&s, &ff, r->now, r->background,
							r->kupdate) };
	if (t->act == WB_FP_WAIT || t->act == WB_FP_SKIP)
		return false;
	t->end = bs_file_size(f->bs);
	t->why = t->act == WB_FP_CHUNK ? WB_PASS_BACKGROUND : WB_PASS_PERIODIC;
	/* Both from the file's cyclic position, as range_cyclic writeback. */
	t->start = wb_fp_chunk_start(atomic_load(&f->bg_next), t->end);
	if (t->act == WB_FP_CHUNK)
		t->budget_pages = writeback_chunk_size(ctx);
	return true;
}

bool wb_turn_end(struct wb_round *r, const struct wb_turn *t, struct wb_pass *p, int err)
{
	struct wb_ctx *ctx = p->ctx;

	if (t->act == WB_FP_CHUNK || t->act == WB_FP_EXPIRED) {
		off_t next = wb_pass_stop(p);

		/* A folio written, or the position back round to the start. */
		if (t->act == WB_FP_CHUNK &&
		    wb_fp_chunk_progress(p->budget.folio_pages, t->start, next, t->end))
			r->progress = true;
		atomic_store(&p->file->bg_next, next);
		if (!err && next >= t->end)
			refresh_dirtied(ctx, p->file, engine_now(ctx));
	}
	if (err) {
		atomic_fetch_add(&ctx->wb_retries, 1);
		return false;
	}
	if (ctx->engine->turn_written)
		ctx->engine->turn_written(ctx->engine_arg, p->file);
	return true;
}

bool wb_turn_should_sync(struct wb_ctx *ctx, struct wb_fstate *f, const struct wb_turn *t)
{
	struct wb_fp_state s;
	struct wb_fp_file ff;

	wb_fp_state_of(ctx, &s);
	fp_file_of(f, &ff);
	return wb_fp_should_sync(&s, &ff, t->act == WB_FP_EXPIRED);
}

void wb_turn_sync_failed(struct wb_ctx *ctx)
{
	atomic_fetch_add(&ctx->wb_retries, 1);
}

bool wb_reclaim_takes(struct wb_ctx *ctx, struct wb_fstate *f, int64_t now_ns)
{
	(void)ctx;
	return atomic_load(&f->retry_ns) <= now_ns;
}
