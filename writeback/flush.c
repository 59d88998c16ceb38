// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * flush.c - writing dirty runs back, and the flusher threads.
 *
 * A writeback pass over a file collects dirty runs from blockstate,
 * merges runs that are contiguous in the file into one write of at most
 * max_io bytes, submits the batch (backing.c) and completes every run:
 * success makes its blocks clean, failure leaves them dirty and records
 * the error for fsync (errseq) and a backoff before the flushers retry.
 *
 * Flushers wake every writeback_interval_ms, or at once when a write
 * pushes the charge of dirty data (not under writeback) over the
 * background threshold (dirty_background_bytes, or dirty_background_ratio
 * of cache_size), like the kernel's wb_workfn: over the threshold they
 * write back files round-robin, one chunk of writeback budget per file
 * per turn, until under it; otherwise they write files whose data has
 * been dirty longer than dirty_expire_ms.
 */
#include "wb_i.h"
#include "flushpolicy.h"
#include "throttle.h"
#include "wb_probes.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- one pass over one file ---- */

/*
 * Bounce memory for one batch, mapped with mmap() so that releasing it
 * gives it back to the kernel at once, and so that it never moves glibc's
 * dynamic mmap threshold (a freed multi-MiB malloc chunk raises it, after
 * which every thread's large allocations stay in per-thread arenas).
 *
 * Each thread keeps one buffer between batches, so that a fresh one does
 * not fault in and zero every page again; only the pages a batch used are
 * ever touched.  A flusher keeps one big enough for any batch (see
 * bounce_keep); any other thread that writes back (a FUSE worker in fsync
 * or reclaim) keeps at most BOUNCE_KEEP_OTHER bytes, so that idle workers
 * do not each pin a flusher's buffer.
 */

#define BOUNCE_KEEP_OTHER (256u << 10)

struct bounce {
	void *mem;
	size_t size;
};

static pthread_key_t bounce_key;
static bool bounce_key_ok;		/* set once, under bounce_once */
static pthread_once_t bounce_once = PTHREAD_ONCE_INIT;
static __thread bool bounce_flusher;	/* this thread is a flusher */

static void *bounce_map(size_t size)
{
	void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return mem == MAP_FAILED ? NULL : mem;
}

static void bounce_free(void *p)
{
	struct bounce *b = p;

	if (b->mem)
		munmap(b->mem, b->size);
	free(b);
}

static void bounce_key_init(void)
{
	/* Without the key every batch just maps its own (see bounce_get). */
	bounce_key_ok = pthread_key_create(&bounce_key, bounce_free) == 0;
}

static size_t page_round(size_t len)
{
	return (len + BS_PAGE_SIZE - 1) & ~(size_t)(BS_PAGE_SIZE - 1);
}

/* The most a thread keeps: for a flusher, the most a batch needs. */
static size_t bounce_keep(const struct wb_ctx *ctx)
{
	if (!bounce_flusher)
		return BOUNCE_KEEP_OTHER;
	return WB_FP_BATCH_BYTES + ctx->cfg.max_io + (size_t)WB_BATCH * BS_PAGE_SIZE;
}

/*
 * Page-aligned memory for @size bytes (a multiple of the page size), or
 * NULL; give it back with bounce_put().  The thread's kept buffer if the
 * batch fits in @keep bytes, else a mapping of its own.
 */
static void *bounce_get(size_t size, size_t keep)
{
	struct bounce *b;
	void *mem;

	pthread_once(&bounce_once, bounce_key_init);
	if (size <= keep && bounce_key_ok) {
		b = pthread_getspecific(bounce_key);
		if (!b && (b = calloc(1, sizeof(*b))) && pthread_setspecific(bounce_key, b)) {
			free(b);
			b = NULL;
		}
		if (b && b->size >= size)
			return b->mem;
		if (b && (mem = bounce_map(keep))) {
			if (b->mem)
				munmap(b->mem, b->size);
			b->mem = mem;
			b->size = keep;
			return mem;
		}
	}
	return bounce_map(size);
}

static void bounce_put(void *mem, size_t size)
{
	struct bounce *b = bounce_key_ok ? pthread_getspecific(bounce_key) : NULL;

	if (!b || mem != b->mem)
		munmap(mem, size);
}

/*
 * Put runs[0..n) into writes: runs contiguous in the file share one, up
 * to max_io.  Each write gets a page-aligned piece of one bounce buffer
 * (for O_DIRECT) holding a snapshot of its runs, copied under their folio
 * locks, so a write that lands meanwhile can neither tear what is written
 * nor race with the I/O (it dirties the blocks again instead).  Returns
 * the number of writes and sets *@mem and *@mem_len (for bounce_put), or
 * -ENOMEM (then nothing is allocated).
 */
static int build_groups(struct wb_ctx *ctx, struct bs_wb_run *runs, int n,
			struct iovec *iov, struct wb_io *io, int *group_of, void **mem,
			size_t *mem_len)
{
	size_t at = 0, total = 0;
	int g = wb_fp_group_runs(runs, n, ctx->cfg.max_io, group_of) - 1;

	for (int k = 0; k <= g; k++) {
		io[k].iov = &iov[k];
		io[k].iovcnt = 1;
		io[k].len = 0;
	}
	for (int i = n - 1; i >= 0; i--) {
		io[group_of[i]].off = runs[i].off;
		io[group_of[i]].len += runs[i].len;
	}
	for (int k = 0; k <= g; k++)
		total += page_round(io[k].len);
	*mem_len = total;
	*mem = bounce_get(total, bounce_keep(ctx));
	if (!*mem)
		return -ENOMEM;
	for (int k = 0; k <= g; k++) {
		iov[k].iov_base = (char *)*mem + at;
		iov[k].iov_len = io[k].len;
		at += page_round(io[k].len);
	}
	for (int i = 0, k = -1; i < n; i++) {
		if (group_of[i] != k) {
			k = group_of[i];
			at = 0;
		}
		bs_wb_copy(&runs[i], (char *)iov[k].iov_base + at);
		at += runs[i].len;
	}
	return g + 1;
}

static void record_error(struct wb_file *wbf, int err)
{
	atomic_store(&wbf->err, err);
	atomic_fetch_add(&wbf->err_seq, 1);
	atomic_fetch_add(&wbf->ctx->wb_errors, 1);
}

/* The file holds dirty data again: give it an age if it has none. */
static void note_dirtied(struct wb_file *wbf)
{
	int64_t zero = 0;

	if (bs_file_has_held(wbf->bs))
		atomic_compare_exchange_strong(&wbf->dirtied_ns, &zero, wb_now_ns());
}

/*
 * A pass failed: the flushers retry it after a backoff that doubles per
 * pass.  The first failure of a run of them is logged (with what failed),
 * so that a writer who never calls fsync still learns of it; the retries
 * are not, and write_back_works_again() logs the end of the run.
 */
static void back_off(struct wb_file *wbf, const char *what, int err)
{
	uint32_t backoff = atomic_load(&wbf->backoff_ms);

	if (!backoff) {
		char path[PATH_MAX];

		wb_file_path(wbf, path, sizeof(path));
		wb_log("error: %s %s: %s (kept dirty, retried in the background)",
		       what, path, strerror(-err));
	}
	backoff = wb_fp_backoff_next(backoff);
	atomic_store(&wbf->backoff_ms, backoff);
	atomic_store(&wbf->retry_ns, wb_fp_retry_due(wb_now_ns(), backoff));
}

/* A pass succeeded: end a run of failures (logged by back_off()). */
static void write_back_works_again(struct wb_file *wbf)
{
	if (atomic_exchange(&wbf->backoff_ms, 0)) {
		char path[PATH_MAX];

		wb_file_path(wbf, path, sizeof(path));
		wb_log("writing back %s works again", path);
	}
}

/* Writes of @io[0..n) are done: what they tell of the backing file's size. */
static void note_written_size(struct wb_file *wbf, const struct wb_io *io,
			      const off_t *end, int n)
{
	pthread_mutex_lock(&wbf->size_lock);
	for (int g = 0; g < n && wbf->backing_size >= 0; g++) {
		if (io[g].res)
			wbf->backing_size = -1;	/* a failed write may have extended it */
		else if (end[g] > wbf->backing_size)
			wbf->backing_size = end[g];
	}
	pthread_mutex_unlock(&wbf->size_lock);
}

/* The file may have become clean: forget its age unless it is not. */
static void update_dirtied(struct wb_file *wbf)
{
	int64_t old = atomic_exchange(&wbf->dirtied_ns, 0);
	int64_t zero = 0;

	/* A writer that dirties after the check sets the age itself. */
	if (old && bs_file_has_held(wbf->bs))
		atomic_compare_exchange_strong(&wbf->dirtied_ns, &zero, old);
}

/*
 * The flushers' view of the cache and settings now (flushpolicy.h).  The
 * dirty part is priced by the accounting policy, so with
 * dirty_account=folio the background comparison is the kernel's exactly.
 * Cheap (atomic reads): over_background() runs after every write.
 */
static void fp_state_of(struct wb_ctx *ctx, struct wb_fp_state *s)
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

static bool over_background(struct wb_ctx *ctx)
{
	struct wb_fp_state s;

	fp_state_of(ctx, &s);
	return wb_fp_over_background(&s);
}

static void fp_file_of(struct wb_file *f, struct wb_fp_file *out)
{
	*out = (struct wb_fp_file){
		.dirtied_ns = atomic_load(&f->dirtied_ns),
		.retry_ns = atomic_load(&f->retry_ns),
		.unsynced = bs_file_has_unsynced(f->bs),
	};
}

/* Pages of writeback budget for one background chunk (wb_fp_chunk_pages). */
static int64_t writeback_chunk_size(struct wb_ctx *ctx)
{
	struct wb_throttle_stats ts;

	wb_throttle_stats(ctx->throttle, &ts);
	return wb_fp_chunk_pages(ts.avg_write_bw, ts.dirty_limit);
}

/* The throttler's bandwidth estimate follows writeback (kernel: do_writepages). */
static void throttle_note(struct wb_ctx *ctx, bool starting)
{
	struct wb_throttle_sample s;

	wb_throttle_sample_of(ctx, &s);
	if (starting)
		wb_throttle_writeback_start(ctx->throttle, &s, wb_now_ns());
	else
		wb_throttle_update(ctx->throttle, &s, wb_now_ns());
}

/* Flags of writeback_pass(). */
enum {
	/* Another pass of the file is running (a flusher or an fsync): do
	 * nothing and return -EBUSY, rather than wait and repeat its work. */
	PASS_TRY = 1,
};

/*
 * Write back the dirty runs of [start, end), batch by batch.  With a
 * @budget (background writeback), stop where it is used up: each folio
 * written costs all its pages (see struct bs_wb_budget).  The background
 * threshold is not looked at within the chunk: as in the kernel, where
 * wb_writeback() checks wb_over_bg_thresh() between chunks, the caller
 * looks at it between files.  *@next gets where the pass stopped (@end
 * when it went through).
 */
static int writeback_pass(struct wb_file *wbf, off_t start, off_t end,
			  unsigned int flags, struct bs_wb_budget *budget, off_t *next)
{
	struct wb_ctx *ctx = wbf->ctx;
	struct bs_wb_run runs[WB_BATCH];
	struct iovec iov[WB_BATCH];
	struct wb_io io[WB_BATCH];
	off_t ends[WB_BATCH];
	int group_of[WB_BATCH];
	off_t pos = start;
	int first_err = 0;
	bool wrote = false, stopped = false;
	uint64_t probe_pages = 0;

	if (!(flags & PASS_TRY))
		pthread_mutex_lock(&wbf->wb_lock);
	else if (pthread_mutex_trylock(&wbf->wb_lock))
		return -EBUSY;
	throttle_note(ctx, true);
	for (;;) {
		int n = bs_wb_collect_budget(wbf->bs, &pos, end, runs, WB_BATCH,
					     WB_FP_BATCH_BYTES, ctx->cfg.max_io,
					     wb_fp_collect_flags(ctx->cfg.whole_folio,
								 ctx->cfg.backing_direct),
					     budget);
		size_t mem_len;
		void *mem;
		int groups;

		if (n == 0)
			break;
		groups = build_groups(ctx, runs, n, iov, io, group_of, &mem, &mem_len);
		if (groups < 0) {
			for (int i = 0; i < n; i++)
				bs_wb_complete(wbf->bs, &runs[i], groups);
			if (!first_err)
				first_err = groups;
			break;
		}
		probe_pages += wb_probe_batch(wbf, runs, n, budget, flags & PASS_TRY, start, end);
		/* io[g].off and len advance as writes complete: keep the ends. */
		for (int g = 0; g < groups; g++)
			ends[g] = io[g].off + (off_t)io[g].len;
		wb_backing_write(wbf, io, groups);
		note_written_size(wbf, io, ends, groups);
		bounce_put(mem, mem_len);
		for (int g = 0; g < groups; g++) {
			if (io[g].res) {
				record_error(wbf, io[g].res);
				if (!first_err)
					first_err = io[g].res;
			} else {
				wrote = true;
			}
		}
		for (int i = 0; i < n; i++)
			bs_wb_complete(wbf->bs, &runs[i], io[group_of[i]].res);
		throttle_note(ctx, false);
	}
	/* Only a used-up budget (or a failed allocation) ends a pass early. */
	stopped = pos < end;
	if (next)
		*next = stopped ? pos : end;
	if (wrote)
		atomic_store(&wbf->unsynced, true);
	if (!first_err && !stopped && end >= bs_file_size(wbf->bs))
		wb_sync_size(wbf);
	if (first_err)
		back_off(wbf, "writing back", first_err);
	else
		write_back_works_again(wbf);
	update_dirtied(wbf);
	wb_probe_written(wbf, probe_pages, budget, flags & PASS_TRY);
	pthread_mutex_unlock(&wbf->wb_lock);
	return first_err;
}

int wb_writeback_range(struct wb_file *wbf, off_t start, off_t end)
{
	return writeback_pass(wbf, start, end, 0, NULL, NULL);
}

int wb_sync_file(struct wb_file *wbf, bool datasync)
{
	uint64_t token = bs_sync_begin(wbf->bs);
	int ret;

	atomic_store(&wbf->unsynced, false);
	ret = wb_backing_fsync(wbf, datasync);
	/* Failure: what was written since the last good sync is dirty again. */
	bs_sync_end(wbf->bs, token, ret);
	if (ret) {
		atomic_store(&wbf->unsynced, true);
		record_error(wbf, ret);
		note_dirtied(wbf);
		back_off(wbf, "syncing", ret);
	}
	return ret;
}

/*
 * One chunk of background writeback of a file: a budget of
 * writeback_chunk_size() pages, from where the last chunk stopped to the
 * end of the file (the kernel's writeback_index for range_cyclic
 * writeback, so that the same blocks are not written over and over while
 * the rest of the file waits); the chunk after one that reached the end
 * starts from the start.  Then the flushers move on to the next file,
 * whether or not this one has more, as the kernel requeues an inode that
 * used up its chunk on b_more_io.  *@progress is set if a folio was
 * written or the file's position went back to its start.
 */
static int writeback_background(struct wb_file *wbf, bool *progress)
{
	off_t size = bs_file_size(wbf->bs);
	off_t from = wb_fp_chunk_start(atomic_load(&wbf->bg_next), size), next = size;
	struct bs_wb_budget budget;
	int ret;

	bs_wb_budget_init(&budget, writeback_chunk_size(wbf->ctx));
	ret = writeback_pass(wbf, from, size, PASS_TRY, &budget, &next);
	if (ret == -EBUSY)
		return ret;
	if (wb_fp_chunk_progress(budget.folio_pages, from, next, size))
		*progress = true;
	atomic_store(&wbf->bg_next, next);
	return ret;
}

/* ---- walking the files ---- */

struct wb_file *wb_next_file(struct wb_ctx *ctx, struct wb_file *prev)
{
	struct wb_file *f;

	pthread_mutex_lock(&ctx->files_lock);
	f = prev ? prev->next : ctx->files;
	while (f && f->dying)
		f = f->next;
	if (f)
		f->refs++;
	if (prev && --prev->refs == 0 && prev->dying)
		pthread_cond_broadcast(&ctx->files_cond);
	pthread_mutex_unlock(&ctx->files_lock);
	return f;
}

void wb_need_clean(void *arg)
{
	struct wb_ctx *ctx = arg;
	int64_t now = wb_now_ns();

	for (struct wb_file *f = wb_next_file(ctx, NULL); f; f = wb_next_file(ctx, f)) {
		/*
		 * A file whose writeback keeps failing waits for its backoff
		 * here too: reclaim asks again and again while the cache is
		 * full, and each try is a write that fails.
		 */
		if (atomic_load(&f->retry_ns) > now)
			continue;
		wb_writeback_range(f, 0, bs_file_size(f->bs));
		/* Written but not synced is pinned as well. */
		if (bs_file_has_unsynced(f->bs))
			wb_sync_file(f, true);
	}
}

/* ---- flusher threads ---- */

void wb_flushers_kick(struct wb_ctx *ctx)
{
	pthread_mutex_lock(&ctx->flush_lock);
	if (!ctx->kicks++)
		pthread_cond_broadcast(&ctx->flush_cond);
	pthread_mutex_unlock(&ctx->flush_lock);
}

void wb_flushers_poke(struct wb_ctx *ctx)
{
	if (ctx->nr_flushers && over_background(ctx))
		wb_flushers_kick(ctx);
}

/*
 * @f's turn (wb_fp_file_action): all of it once its data has been dirty
 * for dirty_expire_ms, else, over the background threshold, one chunk.
 * Then sync it if wb_fp_should_sync().  *@progress: see
 * writeback_background().
 */
static void flush_file(struct wb_ctx *ctx, struct wb_file *f, int64_t now, bool *progress)
{
	enum wb_fp_action act;
	struct wb_fp_state s;
	struct wb_fp_file ff;
	int ret;

	fp_state_of(ctx, &s);
	fp_file_of(f, &ff);
	act = wb_fp_file_action(&s, &ff, now);
	if (act == WB_FP_WAIT)
		return;
	if (act != WB_FP_SKIP) {
		/*
		 * Up to today's end: a pass does not chase an appending writer.
		 * If another flusher or an fsync has the file, move on: waiting
		 * for it and then passing again would repeat its work.
		 */
		ret = act == WB_FP_EXPIRED
			? writeback_pass(f, 0, bs_file_size(f->bs), PASS_TRY, NULL, NULL)
			: writeback_background(f, progress);
		if (ret == -EBUSY)
			return;
		if (ret) {
			atomic_fetch_add(&ctx->wb_retries, 1);
			return;
		}
		wb_stamp_mtime(f);
	}
	fp_state_of(ctx, &s);
	fp_file_of(f, &ff);
	if (wb_fp_should_sync(&s, &ff, act == WB_FP_EXPIRED) && wb_sync_file(f, true))
		atomic_fetch_add(&ctx->wb_retries, 1);
}

/*
 * Look at every file, one chunk each, starting one file further down the
 * list each pass (so that the threshold, which ends the writing, does not
 * always stop it on the same files); over the background threshold, go
 * round again, and again, as the kernel's wb_writeback() moves b_more_io
 * back to b_io and goes on while wb_over_bg_thresh().  It stops once under
 * the threshold, or after two rounds in a row that wrote nothing (all
 * files busy, failing or clean from where their chunk starts; the second
 * round starts them from the top).
 */
static void flush_pass(struct wb_ctx *ctx)
{
	unsigned int first = atomic_fetch_add(&ctx->flusher_passes, 1), nr = 0, i;
	bool progress = true, last_progress;
	struct wb_fp_state s;
	struct wb_file *f;

	for (f = wb_next_file(ctx, NULL); f; f = wb_next_file(ctx, f))
		nr++;
	if (!nr)
		return;
	first = wb_fp_round_first(first, nr);
	do {
		int64_t now = wb_now_ns();

		last_progress = progress;
		progress = false;
		for (int half = 0; half < 2; half++) {
			i = 0;
			for (f = wb_next_file(ctx, NULL); f; f = wb_next_file(ctx, f), i++) {
				if (wb_fp_round_turn(half, i, first))
					flush_file(ctx, f, now, &progress);
			}
		}
		fp_state_of(ctx, &s);
	} while (wb_fp_round_again(progress, last_progress, &s));
}

void wb_pool_age(struct wb_ctx *ctx, int64_t now_ns)
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

static void *flusher_main(void *arg)
{
	struct wb_ctx *ctx = arg;

	pthread_setname_np(pthread_self(), "ffs-flush");
	bounce_flusher = true;

	pthread_mutex_lock(&ctx->flush_lock);
	while (!ctx->stopping) {
		if (!ctx->kicks) {
			/* On the monotonic clock, whatever clock flush_cond was made with. */
			int64_t due = wb_fp_next_wake(wb_now_ns(), atomic_load(&ctx->interval_ms));
			struct timespec ts = {
				.tv_sec = due / 1000000000,
				.tv_nsec = due % 1000000000,
			};

			pthread_cond_clockwait(&ctx->flush_cond, &ctx->flush_lock,
					       CLOCK_MONOTONIC, &ts);
		}
		ctx->kicks = 0;
		if (ctx->stopping)
			break;
		pthread_mutex_unlock(&ctx->flush_lock);
		flush_pass(ctx);
		wb_pool_age(ctx, wb_now_ns());
		pthread_mutex_lock(&ctx->flush_lock);
	}
	pthread_mutex_unlock(&ctx->flush_lock);
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
