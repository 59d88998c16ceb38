// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Model-based test of the whole blockstate engine through its public API.
 *
 * Two files share one small cache (4..8 folios, so reclaim and
 * need_clean stalls happen all the time); the second one is often a
 * block device (bs_file_fix_size).  Each file has an in-memory backing
 * "file" (struct mem_backing, our bs_backing_ops) and a model: a shadow of
 * its bytes, its size, and one dirty flag per block.  Random operations
 * (unaligned reads and writes of any length, truncates, fallocate
 * punch/zero/allocate, full and partial writeback in every collect mode
 * with injected -EIO, writes landing on runs in flight, backing read and
 * truncate faults) are applied to both.  After every step:
 *   - bs_cache_check() == 0 and bs_file_size() == the model size;
 *   - dirty_bytes_exact == block_size x blocks dirty in the model, no
 *     writeback left, and charged_bytes is exactly the accounting policy's
 *     price computed from the model: page: 4096 x pages holding a dirty
 *     block; block: block_size x dirty blocks; folio: the sizes of the
 *     folios holding one (the folios are walked through bs_i.h);
 *   - walking the folios: their dirty bits are the model's, and the bytes
 *     of every uptodate block are the shadow's (zero past EOF).
 * After a full writeback ("fsync") the backing store equals the shadow.
 *
 * Writeback is ours (struct bs_wb_run data copied into the mem_file) and
 * checks the collect contract on every run.  need_clean() writes back
 * every file; it runs inside bs_read/bs_write (when a folio is needed), so
 * the model learns where the access was at that moment from a wrapper
 * around the sizing policy (the policy is asked right before reclaim).
 *
 * Hand-written cases check exact backing I/O counts and charges, and
 * the edges of the API (see hcases[]).
 *
 * Every combination of block size x folio size x sizing x accounting runs
 * a few seeds, in a child process per combination (several at once).  A
 * failure prints the case and seed; replay one with
 *     BS_TEST_CASE=b4k-f64k-ramp-page BS_TEST_SEED=7 [BS_TEST_STEPS=n]
 * and BS_TEST_NOFORK=1 to run it in-process (for a debugger).  The
 * hand-written cases run the same way: BS_TEST_CASE=<name>.  For a longer
 * soak, BS_TEST_SEEDS=n seeds per combination (default 3, at most 64;
 * 1 seed and half the steps under ASan and TSan).
 */
#include "bs_i.h"
#include "mem_backing.h"
#include "test_helpers.h"

#include <errno.h>
#include <linux/falloc.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NFILES 2
#define MAX_RUNS 16

/* ---- random numbers, failure reports ---- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	return t_xorshift(&rng_state);
}

static uint64_t rnd_below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static bool chance(unsigned int pct)
{
	return rnd_below(100) < pct;
}

static void fill_random(unsigned char *buf, size_t len)
{
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t v = rnd();

		memcpy(buf + i, &v, 8);
	}
	for (; i < len; i++)
		buf[i] = (unsigned char)rnd();
}

static char cur_case[64];
static unsigned long long cur_seed;
static int cur_step;
static const char *cur_op = "setup";

#define M_CHECK(cond)                                                              \
	do {                                                                       \
		if (!(cond)) {                                                     \
			fprintf(stderr, "case %s seed %llu step %d (%s): %s:%d: %s\n", \
				cur_case, cur_seed, cur_step, cur_op, __FILE__,    \
				__LINE__, #cond);                                  \
			fprintf(stderr, "replay: BS_TEST_CASE=%s BS_TEST_SEED=%llu\n", \
				cur_case, cur_seed);                               \
			exit(T_EXIT_FAIL);                                         \
		}                                                                  \
	} while (0)

/* ---- the model ---- */

/*
 * The accounting policies the model prices itself; any other (ACC_OTHER)
 * is held to its own price() of the model's bitmaps, folio by folio.
 */
enum account { ACC_FOLIO, ACC_PAGE, ACC_BLOCK, ACC_OTHER };

struct mfile {
	struct bs_file *bs;
	struct mem_backing mem;
	unsigned char *shadow;	/* max_size bytes, zero past size */
	size_t size;
	uint8_t *dirty;		/* one per block: dirty or under writeback */
	size_t ndirty;
	uint8_t *unsynced;	/* one per block: written back, not synced */
	size_t nunsynced;
	bool fixed;		/* bs_file_fix_size(): a block device */
};

struct tctx {
	struct bs_cache *cache;
	struct mfile f[NFILES];
	uint32_t bsize;
	uint32_t fsize;
	size_t max_size;	/* a multiple of fsize */
	size_t nblocks;		/* of max_size */
	enum account account;
	const struct bs_account_policy *policy;
	uint64_t policy_price;		/* walk_folios(): policy->price() of the model */
	unsigned char *buf;	/* max_size bytes */
	/* writeback */
	bool in_flight;		/* runs collected and not completed yet */
	bool nc_happened;	/* need_clean wrote everything back during this op */
	off_t nc_pos;		/* where the op was then */
	uint64_t nc_calls;
	uint64_t wb_runs, wb_failed;
};

/* Mark (or clear) the blocks overlapping the bytes [start, end). */
static void model_mark(struct tctx *t, struct mfile *f, uint64_t start, uint64_t end,
		       bool dirty)
{
	if (start >= end)
		return;
	for (uint64_t b = start / t->bsize; b * t->bsize < end; b++) {
		M_CHECK(b < t->nblocks);
		if (f->dirty[b] != dirty)
			f->ndirty += dirty ? 1 : (size_t)-1;
		f->dirty[b] = dirty;
	}
}

/* Mark the blocks of the bytes [start, end) unsynced: a run was written. */
static void model_unsynced(struct tctx *t, struct mfile *f, uint64_t start, uint64_t end)
{
	for (uint64_t b = start / t->bsize; b * t->bsize < end; b++) {
		M_CHECK(b < t->nblocks);
		f->nunsynced += !f->unsynced[b];
		f->unsynced[b] = 1;
	}
}

/* A sync of @f ended: success forgets the unsynced blocks, failure dirties them. */
static void model_sync(struct mfile *f, size_t nblocks, bool failed)
{
	for (size_t b = 0; failed && b < nblocks; b++) {
		if (f->unsynced[b] && !f->dirty[b]) {
			f->dirty[b] = 1;
			f->ndirty++;
		}
	}
	memset(f->unsynced, 0, nblocks);
	f->nunsynced = 0;
}

/* Clear the blocks wholly inside [start, end): what zeroing drops. */
static void model_clear_inside(struct tctx *t, struct mfile *f, uint64_t start, uint64_t end)
{
	uint64_t first = (start + t->bsize - 1) / t->bsize, last = end / t->bsize;

	if (last > t->nblocks)
		last = t->nblocks;
	for (uint64_t b = first; b < last; b++) {
		if (f->dirty[b])
			f->ndirty--;
		f->dirty[b] = 0;
		if (f->unsynced[b])
			f->nunsynced--;
		f->unsynced[b] = 0;
	}
}

static void model_clear_all(struct tctx *t)
{
	for (int i = 0; i < NFILES; i++) {
		memset(t->f[i].dirty, 0, t->nblocks);
		t->f[i].ndirty = 0;
		model_sync(&t->f[i], t->nblocks, false);
	}
}

static void model_resize(struct mfile *f, size_t size)
{
	if (size < f->size)
		memset(f->shadow + size, 0, f->size - size);
	f->size = size;
}

/* The accounting policy's price of the model's dirty blocks (page, block). */
static uint64_t model_price(const struct tctx *t)
{
	uint64_t price = 0;

	for (int i = 0; i < NFILES; i++) {
		const struct mfile *f = &t->f[i];

		if (t->account == ACC_BLOCK) {
			price += (uint64_t)f->ndirty * t->bsize;
			continue;
		}
		/* Pages: 4096 x pages overlapping at least one dirty block. */
		for (size_t p = 0; p < t->max_size / BS_PAGE_SIZE; p++) {
			uint64_t first = (uint64_t)p * BS_PAGE_SIZE / t->bsize;
			uint64_t end = ((uint64_t)p + 1) * BS_PAGE_SIZE;

			for (uint64_t b = first; b * t->bsize < end; b++) {
				if (f->dirty[b]) {
					price += BS_PAGE_SIZE;
					break;
				}
			}
		}
	}
	return price;
}

static bool bit(const unsigned long *map, uint32_t i)
{
	return (map[i / BS_BITS_PER_LONG] >> (i % BS_BITS_PER_LONG)) & 1;
}

/*
 * Walk every folio of every file (internals): check its shape, that its
 * dirty and unsynced bits are the model's and nothing is under writeback
 * and, when @deep, that every uptodate block holds the shadow's bytes.
 * Returns the folio policy's price (sum of sizes of folios holding a
 * dirty block); pinned and unsynced memory are checked here.
 */
/* The accounting policy's price of @f as the model's dirty bits of @mf have it. */
static uint64_t model_folio_price(const struct tctx *t, const struct mfile *mf,
				  const struct bs_folio *f)
{
	struct bs_held_state hs = { .folio_size = f->size, .block_size = t->bsize };
	uint64_t b0 = (uint64_t)f->start / t->bsize;
	int64_t params[BS_PARAMS_MAX];

	/* The cache was made with the policy's defaults. */
	bs_params_defaults(t->policy->params, t->policy->nr_params, params);
	hs.params = params;

	for (uint32_t b = 0; b < f->nr_blocks; b++)
		hs.held_blocks += mf->dirty[b0 + b] != 0;
	for (uint32_t p = 0; p < f->size / BS_PAGE_SIZE; p++) {
		uint64_t off = (uint64_t)f->start + (uint64_t)p * BS_PAGE_SIZE;

		for (uint64_t b = off / t->bsize; b * t->bsize < off + BS_PAGE_SIZE; b++) {
			if (mf->dirty[b]) {
				hs.held_pages++;
				break;
			}
		}
	}
	return t->policy->price(&hs);
}

static uint64_t walk_folios(struct tctx *t, bool deep)
{
	uint64_t price = 0, cached = 0, nr = 0, pinned = 0, unsynced = 0;
	struct bs_stats st;

	t->policy_price = 0;
	for (int i = 0; i < NFILES; i++) {
		struct mfile *mf = &t->f[i];
		struct bs_file *file = mf->bs;
		off_t prev_end = 0;

		pthread_rwlock_rdlock(&file->index_lock);
		for (struct bs_folio *f = bs_index_next(&file->index, 0); f;
		     f = bs_index_next(&file->index, f->start + f->size)) {
			uint64_t b0 = (uint64_t)f->start / t->bsize;
			bool any = false, anyu = false;

			M_CHECK(f->start >= prev_end);
			M_CHECK((f->size & (f->size - 1)) == 0 && f->size <= t->fsize);
			M_CHECK(f->size >= BS_PAGE_SIZE && f->size >= t->bsize);
			M_CHECK(f->start % f->size == 0);
			M_CHECK((size_t)f->start + f->size <= t->max_size);
			M_CHECK(f->nr_blocks == f->size / t->bsize && !f->detached);
			prev_end = f->start + f->size;
			bs_folio_lock(f);
			M_CHECK(f->wb_blocks == 0);
			for (uint32_t b = 0; b < f->nr_blocks; b++) {
				bool d = bit(f->dirty, b);

				M_CHECK(!bit(f->writeback, b));
				if (d != (mf->dirty[b0 + b] != 0)) {
					fprintf(stderr, "file %d block %llu: dirty %d, model %d\n",
						i, (unsigned long long)b0 + b, d, mf->dirty[b0 + b]);
					M_CHECK(d == (mf->dirty[b0 + b] != 0));
				}
				any |= d;
				if (bit(f->unsynced, b) != (mf->unsynced[b0 + b] != 0)) {
					fprintf(stderr, "file %d block %llu: unsynced %d, model %d\n",
						i, (unsigned long long)b0 + b, bit(f->unsynced, b),
						mf->unsynced[b0 + b]);
					M_CHECK(!"unsynced bits are the model's");
				}
				anyu |= bit(f->unsynced, b);
				if (deep && bit(f->uptodate, b) &&
				    memcmp(f->data + (size_t)b * t->bsize,
					   mf->shadow + (b0 + b) * t->bsize, t->bsize) != 0) {
					fprintf(stderr, "file %d block %llu (folio %lld+%u): uptodate bytes differ from the model (size %zu)\n",
						i, (unsigned long long)b0 + b, (long long)f->start,
						f->size, mf->size);
					M_CHECK(!"uptodate block holds the file's bytes");
				}
			}
			bs_folio_unlock_raw(f);
			t->policy_price += model_folio_price(t, mf, f);
			if (any)
				price += f->size;
			if (any || anyu)
				pinned += f->size;
			if (anyu)
				unsynced += f->size;
			cached += f->size;
			nr++;
		}
		pthread_rwlock_unlock(&file->index_lock);
	}
	bs_cache_stats(t->cache, &st);
	M_CHECK(st.cache_bytes == cached && st.folios == nr);
	M_CHECK(st.pinned_bytes == pinned && st.unsynced_bytes == unsynced);
	return price;
}

/* Everything that must hold between two operations. */
static void check_state(struct tctx *t, bool deep)
{
	uint64_t folio_price, expect, held = 0;
	struct bs_stats st;

	M_CHECK(bs_cache_check(t->cache) == 0);
	for (int i = 0; i < NFILES; i++) {
		M_CHECK(bs_file_size(t->f[i].bs) == (off_t)t->f[i].size);
		M_CHECK(bs_file_has_held(t->f[i].bs) == (t->f[i].ndirty != 0));
		M_CHECK(bs_file_has_unsynced(t->f[i].bs) == (t->f[i].nunsynced != 0));
		held += (uint64_t)t->f[i].ndirty * t->bsize;
	}
	folio_price = walk_folios(t, deep);
	expect = t->account == ACC_FOLIO ? folio_price :
		 t->account == ACC_OTHER ? t->policy_price : model_price(t);
	/* The invariant for every policy: the charge is the sum of its prices. */
	M_CHECK(t->policy_price == expect);
	bs_cache_stats(t->cache, &st);
	if (st.charged_bytes != expect || st.dirty_bytes_exact != held)
		fprintf(stderr, "charged %llu expected %llu, dirty bytes %llu expected %llu\n",
			(unsigned long long)st.charged_bytes, (unsigned long long)expect,
			(unsigned long long)st.dirty_bytes_exact, (unsigned long long)held);
	M_CHECK(st.charged_bytes == expect);
	M_CHECK(st.dirty_bytes_exact == held);
	M_CHECK(st.nr_dirty == (st.charged_bytes + BS_PAGE_SIZE - 1) / BS_PAGE_SIZE);
	M_CHECK(st.writeback_bytes == 0);
	if (!held)
		M_CHECK(st.charged_bytes == 0 && st.nr_dirty == 0 &&
			(st.pinned_bytes == 0) == (st.unsynced_bytes == 0));
}

/* The backing store of @f equals the shadow for [0, size), zero past it. */
static void check_backing(struct tctx *t, struct mfile *f)
{
	size_t n = f->mem.len < f->size ? f->mem.len : f->size;

	(void)t;
	M_CHECK(!n || memcmp(f->mem.data, f->shadow, n) == 0);
	for (size_t i = n; i < f->size; i++)
		M_CHECK(f->shadow[i] == 0);
	for (size_t i = f->size; i < f->mem.len; i++)
		M_CHECK(f->mem.data[i] == 0);
}

/* ---- writeback ---- */

/*
 * Check one collected batch against the contract of bs_wb_collect_mode():
 * runs in file order at or after the block of @pos_before and before
 * @end and the size, each within one folio, whole blocks trimmed at EOF
 * (not with BS_WB_WHOLE_BLOCKS), now under writeback; with @model, every
 * block was dirty in the model.  With BS_WB_WHOLE_FOLIO a run may also
 * hold clean uptodate blocks (not under writeback) of a folio that has a
 * dirty one.
 */
struct collect_args {
	int max_runs;
	size_t max_bytes;
	size_t max_run;		/* a multiple of the block size, or SIZE_MAX */
	unsigned int flags;
};

static void check_runs(struct tctx *t, struct mfile *mf, struct bs_wb_run *runs, int n,
		       const struct collect_args *ca, off_t pos_before, off_t pos_after,
		       off_t end, bool model)
{
	int max_runs = ca->max_runs;
	bool whole_folio = ca->flags & BS_WB_WHOLE_FOLIO;
	bool whole_blocks = ca->flags & BS_WB_WHOLE_BLOCKS;
	/* Inside need_clean the model lags: the cache's size is the truth. */
	off_t size = bs_file_size(mf->bs), lim = end < size ? end : size;
	off_t prev = pos_before - pos_before % t->bsize;

	M_CHECK(n >= 0 && n <= max_runs);
	/* (From past the size or @end, pos comes back to it: see case_collect_pos_end.) */
	M_CHECK(pos_after >= pos_before || pos_before >= lim);
	for (int i = 0; i < n; i++) {
		struct bs_wb_run *r = &runs[i];
		struct bs_folio *f = r->folio;
		uint32_t nblk = r->end_blk - r->first_blk;
		off_t rend = r->off + (off_t)nblk * t->bsize;

		M_CHECK(f && f->file == mf->bs);
		M_CHECK(r->first_blk < r->end_blk && r->end_blk <= f->nr_blocks);
		M_CHECK((uint64_t)nblk * t->bsize <= ca->max_run);
		M_CHECK(r->off == f->start + (off_t)r->first_blk * t->bsize);
		M_CHECK(r->data == f->data + (size_t)r->first_blk * t->bsize);
		M_CHECK(r->off >= prev && r->off < lim);
		if (whole_blocks)
			M_CHECK(r->len == (size_t)nblk * t->bsize);
		else
			M_CHECK(r->len == (size_t)((rend < size ? rend : size) - r->off));
		M_CHECK(pos_after >= (rend < lim ? rend : lim));
		prev = rend;
		bs_folio_lock(f);
		for (uint32_t b = r->first_blk; b < r->end_blk; b++) {
			bool was_dirty = model ? mf->dirty[r->off / t->bsize + (b - r->first_blk)]
					       : bit(f->writeback, b);

			M_CHECK(!bit(f->dirty, b) && bit(f->uptodate, b));
			M_CHECK(bit(f->writeback, b) == was_dirty);
			if (!whole_folio)
				M_CHECK(was_dirty);
		}
		/* (Not necessarily in the run: it may lie before pos.) */
		if (whole_folio)
			M_CHECK(bs_bits_next_set(f->writeback, f->dirty, 0, f->nr_blocks) < f->nr_blocks);
		bs_folio_unlock_raw(f);
	}
}

/*
 * Nothing dirty is left uncollected in [block of pos, min(end, size))
 * (a batch that collected nothing ended the pass).
 */
static void check_none_left(struct tctx *t, struct mfile *mf, off_t pos, off_t end)
{
	off_t lim = end < (off_t)mf->size ? end : (off_t)mf->size;

	if (pos >= lim)
		return;
	for (uint64_t b = (uint64_t)pos / t->bsize; (off_t)(b * t->bsize) < lim; b++) {
		if (mf->dirty[b])
			fprintf(stderr, "block %llu dirty but not collected from %lld to %lld\n",
				(unsigned long long)b, (long long)pos, (long long)end);
		M_CHECK(!mf->dirty[b]);
	}
}

static size_t pick_max_bytes(struct tctx *t)
{
	switch (rnd_below(4)) {
	case 0: return t->bsize;
	case 1: return 1 + rnd_below(4 * (uint64_t)t->fsize);
	default: return SIZE_MAX;
	}
}

/* A random collect mode (mostly the default) and limits. */
static struct collect_args pick_collect(struct tctx *t)
{
	struct collect_args ca = {
		.max_runs = 1 + (int)rnd_below(MAX_RUNS),
		.max_bytes = pick_max_bytes(t),
		.max_run = chance(60) ? SIZE_MAX : (1 + rnd_below(8)) * t->bsize,
	};

	switch (rnd_below(8)) {
	case 0: ca.flags = BS_WB_WHOLE_FOLIO; break;
	case 1: ca.flags = BS_WB_WHOLE_BLOCKS; break;
	case 2: ca.flags = BS_WB_WHOLE_FOLIO | BS_WB_WHOLE_BLOCKS; break;
	default: ca.flags = 0; break;
	}
	return ca;
}

/* One batch: bs_wb_collect(), or bs_wb_collect_mode() when @ca asks for more. */
static int collect(struct tctx *t, struct mfile *mf, off_t *pos, off_t end,
		   struct bs_wb_run *runs, const struct collect_args *ca, bool model)
{
	off_t before = *pos;
	int n;

	if (!ca->flags && ca->max_run == SIZE_MAX)
		n = bs_wb_collect(mf->bs, pos, end, runs, ca->max_runs, ca->max_bytes);
	else
		n = bs_wb_collect_mode(mf->bs, pos, end, runs, ca->max_runs, ca->max_bytes,
				       ca->max_run, ca->flags);
	check_runs(t, mf, runs, n, ca, before, *pos, end, model);
	return n;
}

/*
 * Write a completed run's bytes to the backing file.  A run collected
 * with BS_WB_WHOLE_BLOCKS may go past EOF: then restore the size, as its
 * caller must (only then: other runs must stop at EOF).
 */
static void run_write(struct mfile *mf, struct bs_wb_run *r, unsigned int flags)
{
	off_t size = bs_file_size(mf->bs);

	mem_backing_write(&mf->mem, r->data, r->len, r->off);
	if ((flags & BS_WB_WHOLE_BLOCKS) && mf->mem.len > (size_t)size &&
	    (off_t)(r->off + r->len) > size)
		mem_backing_set_len(&mf->mem, (size_t)size);
}

/*
 * Write back [start, end) of file @fi, each run failing with -EIO with
 * probability @fail_pct.  With @model the model follows (and is checked):
 * successful runs' blocks become clean.  Returns the runs that failed.
 */
static int writeback(struct tctx *t, int fi, off_t start, off_t end, unsigned int fail_pct,
		     bool model)
{
	struct mfile *mf = &t->f[fi];
	struct bs_wb_run runs[MAX_RUNS];
	off_t pos = start;
	struct collect_args ca = pick_collect(t);
	unsigned int flags = ca.flags;
	int failed = 0;

	for (;;) {
		off_t before = pos;
		int n;

		ca.max_runs = 1 + (int)rnd_below(MAX_RUNS);
		ca.max_bytes = pick_max_bytes(t);
		n = collect(t, mf, &pos, end, runs, &ca, model);
		if (n == 0) {
			if (model && !failed)
				check_none_left(t, mf, before, end);
			break;
		}
		for (int i = 0; i < n; i++) {
			t->wb_runs++;
			if (chance(fail_pct)) {
				bs_wb_complete(mf->bs, &runs[i], -EIO);
				failed++;
				t->wb_failed++;
				continue;
			}
			run_write(mf, &runs[i], flags);
			if (model) {
				uint64_t rs = (uint64_t)runs[i].off;
				uint64_t re = rs + (uint64_t)(runs[i].end_blk -
							      runs[i].first_blk) * t->bsize;

				model_mark(t, mf, rs, re, false);
				model_unsynced(t, mf, rs, re);
			}
			bs_wb_complete(mf->bs, &runs[i], 0);
		}
	}
	return failed;
}

/* The sizing policy under test, wrapped to learn where folios are made. */
static const struct bs_size_policy *inner_size;
static off_t last_order_off;

static unsigned int wrap_order(const struct bs_size_state *st, off_t off, size_t len,
			       unsigned int max_order)
{
	last_order_off = off;
	return inner_size->order(st, off, len, max_order);
}

static const struct bs_size_policy wrap_size = {
	.name = "test-wrapper",
	.help = "the policy under test, recording the offset it is asked about",
	.order = wrap_order,
};

/* Sync @fi's backing file (nothing to do for memory), failing with @err. */
static void sync_file(struct tctx *t, int fi, int err, bool model)
{
	uint64_t token = bs_sync_begin(t->f[fi].bs);

	bs_sync_end(t->f[fi].bs, token, err);
	if (model)
		model_sync(&t->f[fi], t->nblocks, err != 0);
}

/*
 * Reclaim found nothing clean: write every file back and sync it.  Called inside
 * bs_read()/bs_write() right after the sizing policy was asked for the
 * folio at last_order_off: everything dirty until then becomes clean, and
 * the op goes on from there.  One writeback of a file at a time (as
 * wb_file's wb_lock): while our own runs are in flight, do nothing.
 */
static void need_clean(void *arg)
{
	struct tctx *t = arg;
	struct bs_stats st;

	t->nc_calls++;
	if (t->in_flight)
		return;
	for (int i = 0; i < NFILES; i++) {
		writeback(t, i, 0, INT64_MAX, 0, false);
		sync_file(t, i, 0, false);
	}
	bs_cache_stats(t->cache, &st);
	M_CHECK(st.dirty_bytes_exact == 0 && st.charged_bytes == 0);
	M_CHECK(st.unsynced_bytes == 0 && st.pinned_bytes == 0);
	t->nc_happened = true;
	t->nc_pos = last_order_off;
}

static const struct bs_cache_ops test_cache_ops = {
	.need_clean = need_clean,
};

/* ---- operations ---- */

/* An offset near something interesting (a folio, page or block edge), or anywhere. */
static size_t pick_off(struct tctx *t, size_t limit)
{
	size_t unit, off;

	switch (rnd_below(5)) {
	case 0: unit = t->fsize; break;
	case 1: unit = t->bsize; break;
	case 2: unit = BS_PAGE_SIZE; break;
	default: return rnd_below(limit + 1);
	}
	off = rnd_below(limit / unit + 1) * unit;
	if (chance(50))
		off += rnd_below(5) - 2;
	if (off > limit)
		off = rnd_below(limit + 1);
	return off;
}

static size_t pick_len(struct tctx *t, size_t off)
{
	size_t len;

	/*
	 * Mostly around a block; a folio or more now and then (with 2 MiB
	 * folios rarely: moving megabytes would be most of the run time).
	 */
	unsigned int big = t->fsize >= (2u << 20) ? 40 : 10;

	switch (rnd_below(big)) {
	case 0: len = 0; break;
	case 1: case 2: len = 1 + rnd_below(16); break;
	case 3: case 4: len = 1 + rnd_below(2 * (uint64_t)t->bsize); break;
	case 5: len = (1 + rnd_below(4)) * t->bsize; break;
	case 6: case 7: len = 1 + rnd_below(t->fsize); break;
	case 8: len = t->fsize; break;
	case 9: len = 1 + rnd_below(t->fsize + t->fsize / 2); break;
	default: len = 1 + rnd_below(rnd_below(2) ? 2 * (uint64_t)t->bsize : 65536); break;
	}
	return len > t->max_size - off ? t->max_size - off : len;
}

/* After an op: need_clean, if it ran, left nothing dirty in any file. */
static void apply_nc(struct tctx *t)
{
	if (t->nc_happened)
		model_clear_all(t);
}

/* What bs_write() returns when all goes well (a fixed size stops it). */
static ssize_t write_expect(const struct mfile *f, size_t off, size_t len)
{
	if (!f->fixed || !len)
		return (ssize_t)len;
	if (off >= f->size)
		return -ENOSPC;
	return (ssize_t)(len < f->size - off ? len : f->size - off);
}

static void op_write(struct tctx *t, int fi, bool fault)
{
	struct mfile *f = &t->f[fi];
	size_t off = pick_off(t, t->max_size), len = pick_len(t, off), done;
	uint64_t start;
	struct bs_stats st0, st1;
	ssize_t ret, expect;

	cur_op = fault ? "write with a read fault" : "write";
	fill_random(t->buf, len);
	bs_cache_stats(t->cache, &st0);
	if (fault)
		f->mem.fail_reads = 1;
	t->nc_happened = false;
	ret = bs_write(f->bs, t->buf, len, (off_t)off);
	expect = write_expect(f, off, len);
	if (!fault || expect < 0) {
		M_CHECK(ret == expect);
	} else {
		M_CHECK(ret == expect || (ret >= 0 && ret < expect) || ret == -EIO);
		if (ret != expect)
			M_CHECK(f->mem.fail_reads == 0);
	}
	f->mem.fail_reads = 0;
	done = ret > 0 ? (size_t)ret : 0;
	bs_cache_stats(t->cache, &st1);
	M_CHECK(st1.app_write_bytes - st0.app_write_bytes == done);
	memcpy(f->shadow + off, t->buf, done);
	if (done && off + done > f->size)
		f->size = off + done;
	apply_nc(t);
	start = t->nc_happened ? (uint64_t)t->nc_pos : off;
	if (done && start < off + done) {
		M_CHECK(start >= off);
		model_mark(t, f, start, off + done, true);
	}
}

static void op_read(struct tctx *t, int fi, bool fault)
{
	struct mfile *f = &t->f[fi];
	size_t off = pick_off(t, t->max_size), len = pick_len(t, off), expect;
	struct bs_stats st0, st1;
	ssize_t ret;

	cur_op = fault ? "read with a read fault" : "read";
	if (chance(10))
		len += rnd_below(3 * (uint64_t)t->fsize);	/* past EOF is fine */
	expect = off >= f->size ? 0 : (len < f->size - off ? len : f->size - off);
	memset(t->buf, 0xee, len);
	bs_cache_stats(t->cache, &st0);
	if (fault)
		f->mem.fail_reads = 1;
	t->nc_happened = false;
	ret = bs_read(f->bs, NULL, t->buf, len, (off_t)off);
	if (!fault) {
		M_CHECK(ret == (ssize_t)expect);
	} else {
		M_CHECK(ret == (ssize_t)expect || (ret >= 0 && (size_t)ret < expect) ||
			(ret == -EIO && expect));
		if (ret != (ssize_t)expect)
			M_CHECK(f->mem.fail_reads == 0);
		f->mem.fail_reads = 0;
	}
	if (ret > 0 && memcmp(t->buf, f->shadow + off, (size_t)ret) != 0) {
		for (size_t i = 0; i < (size_t)ret; i++) {
			if (t->buf[i] != f->shadow[off + i]) {
				fprintf(stderr, "file %d read [%zu, +%zu): byte %zu is %#x, model %#x\n",
					fi, off, len, off + i, t->buf[i], f->shadow[off + i]);
				break;
			}
		}
		M_CHECK(!"read returns the model's bytes");
	}
	bs_cache_stats(t->cache, &st1);
	M_CHECK(st1.app_read_bytes - st0.app_read_bytes == (ret > 0 ? (uint64_t)ret : 0));
	apply_nc(t);
}

static void op_truncate(struct tctx *t, int fi)
{
	struct mfile *f = &t->f[fi];
	bool fault = chance(5);
	size_t size;
	int ret;

	cur_op = fault ? "failing truncate" : "truncate";
	switch (rnd_below(4)) {
	case 0: size = f->size + rnd_below(3) - 1; break;
	case 1: size = f->size / 2; break;
	default: size = pick_off(t, t->max_size); break;
	}
	if (size > t->max_size)
		size = t->max_size;
	if (f->fixed) {
		cur_op = "truncate of a fixed size";
		M_CHECK(bs_truncate(f->bs, (off_t)size) == (size == f->size ? 0 : -EPERM));
		return;
	}
	if (fault)
		f->mem.fail_truncate = -EIO;
	ret = bs_truncate(f->bs, (off_t)size);
	if (fault) {
		M_CHECK(ret == -EIO);
		return;
	}
	M_CHECK(ret == 0);
	if (size < f->size)
		model_clear_inside(t, f, size, t->max_size);
	model_resize(f, size);
}

static void op_fallocate(struct tctx *t, int fi)
{
	struct mfile *f = &t->f[fi];
	size_t off = pick_off(t, t->max_size - 1), len = pick_len(t, off), end;
	int mode;

	if (!len)
		len = 1;
	end = off + len;
	switch (rnd_below(5)) {
	case 0: case 1:
		cur_op = "punch";
		mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
		break;
	case 2:
		cur_op = "zero range";
		mode = FALLOC_FL_ZERO_RANGE | (chance(50) ? FALLOC_FL_KEEP_SIZE : 0);
		break;
	default:
		cur_op = "allocate";
		mode = chance(50) ? FALLOC_FL_KEEP_SIZE : 0;
		break;
	}
	if (f->fixed && !(mode & FALLOC_FL_KEEP_SIZE) && end > f->size) {
		M_CHECK(bs_fallocate(f->bs, mode, (off_t)off, (off_t)len) == -ENOSPC);
		return;
	}
	M_CHECK(bs_fallocate(f->bs, mode, (off_t)off, (off_t)len) == 0);
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
		size_t zend = end < f->size ? end : f->size;

		if (off < zend)
			memset(f->shadow + off, 0, zend - off);
		model_clear_inside(t, f, off, end);
	}
	if (!(mode & (FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)) && end > f->size)
		f->size = end;
}

/*
 * Full writeback and a sync of every file; then each backing file equals
 * its model and nothing is pinned.
 */
static void op_fsync(struct tctx *t)
{
	cur_op = "fsync";
	for (int i = 0; i < NFILES; i++) {
		M_CHECK(writeback(t, i, 0, INT64_MAX, 0, true) == 0);
		M_CHECK(t->f[i].ndirty == 0);
		check_backing(t, &t->f[i]);
		sync_file(t, i, 0, true);
		M_CHECK(t->f[i].nunsynced == 0);
	}
}

/*
 * A sync of one file, failing now and then: failure makes every block
 * written since the last good sync dirty again (checked against the model
 * after the step), success forgets them.
 */
static void op_sync(struct tctx *t, int fi)
{
	bool fail = chance(40);

	cur_op = fail ? "failing sync" : "sync";
	sync_file(t, fi, fail ? -EIO : 0, true);
}

/* Writeback of part of one file, some or all runs failing. */
static void op_writeback_part(struct tctx *t, int fi)
{
	static const unsigned int fail[] = { 0, 0, 30, 100 };
	size_t start = pick_off(t, t->max_size), end = start + pick_len(t, start);

	cur_op = "partial writeback";
	if (chance(20))
		end = INT64_MAX;
	writeback(t, fi, (off_t)start, (off_t)end, fail[rnd_below(4)], true);
}

/*
 * Collect one batch, then write (and read) while it is in flight, then
 * complete it: blocks written meanwhile stay dirty even when their run
 * succeeds.
 */
static void op_write_in_flight(struct tctx *t, int fi)
{
	struct mfile *f = &t->f[fi];
	struct bs_wb_run runs[MAX_RUNS];
	size_t woff = 0, wlen = 0;
	off_t pos = (off_t)pick_off(t, t->max_size) / 2;
	struct collect_args ca = pick_collect(t);
	unsigned int flags = ca.flags;
	bool fail = chance(30);
	ssize_t expect, ret;
	int n;

	cur_op = "write during writeback";
	n = collect(t, f, &pos, INT64_MAX, runs, &ca, true);
	t->in_flight = true;
	if (n && chance(70)) {
		/* Often right on top of a run. */
		struct bs_wb_run *r = &runs[rnd_below((uint64_t)n)];

		woff = (size_t)r->off + rnd_below(r->len);
		wlen = pick_len(t, woff);
		fill_random(t->buf, wlen);
		expect = write_expect(f, woff, wlen);
		ret = bs_write(f->bs, t->buf, wlen, (off_t)woff);
		/*
		 * need_clean can do nothing while our runs are in flight: a
		 * write that needs a folio when they fill the cache fails
		 * (short, or -ENOSPC), and says so in full_events.
		 */
		if (ret != expect) {
			struct bs_stats st;

			bs_cache_stats(t->cache, &st);
			M_CHECK(ret == -ENOSPC || (ret >= 0 && ret < expect));
			M_CHECK(st.full_events > 0 && atomic_load(&t->cache->full));
			expect = ret;
		}
		wlen = expect > 0 ? (size_t)expect : 0;
		memcpy(f->shadow + woff, t->buf, wlen);
		if (wlen && woff + wlen > f->size)
			f->size = woff + wlen;
		model_mark(t, f, woff, woff + wlen, true);
	}
	if (chance(50))
		op_read(t, fi, false);
	cur_op = "write during writeback";
	for (int i = 0; i < n; i++) {
		uint64_t rs = (uint64_t)runs[i].off;
		uint64_t re = rs + (uint64_t)(runs[i].end_blk - runs[i].first_blk) * t->bsize;

		if (fail) {
			bs_wb_complete(f->bs, &runs[i], -EIO);
			continue;
		}
		run_write(f, &runs[i], flags);
		bs_wb_complete(f->bs, &runs[i], 0);
		model_unsynced(t, f, rs, re);
		/* Clean, but for the blocks the write dirtied again. */
		for (uint64_t b = rs / t->bsize; b < re / t->bsize; b++) {
			uint64_t bs = b * t->bsize;

			if (wlen && bs < woff + wlen && bs + t->bsize > woff)
				continue;
			model_mark(t, f, bs, bs + 1, false);
		}
	}
	t->in_flight = false;
}

/* Read the whole file and compare. */
static void op_read_all(struct tctx *t, int fi)
{
	struct mfile *f = &t->f[fi];
	ssize_t ret;

	cur_op = "read all";
	t->nc_happened = false;
	ret = bs_read(f->bs, NULL, t->buf, t->max_size, 0);
	M_CHECK(ret == (ssize_t)f->size);
	M_CHECK(memcmp(t->buf, f->shadow, f->size) == 0);
	apply_nc(t);
}

static void step(struct tctx *t)
{
	int fi = chance(75) ? 0 : 1;
	unsigned int r = (unsigned int)rnd_below(100);

	if (r < 30)
		op_write(t, fi, false);
	else if (r < 32)
		op_write(t, fi, true);
	else if (r < 46)
		op_read(t, fi, false);
	else if (r < 48)
		op_read(t, fi, true);
	else if (r < 56)
		op_truncate(t, fi);
	else if (r < 68)
		op_fallocate(t, fi);
	else if (r < 72)
		op_fsync(t);
	else if (r < 74)
		op_sync(t, fi);
	else if (r < 84)
		op_writeback_part(t, fi);
	else if (r < 93 || (t->fsize >= (2u << 20) && r < 98))
		op_write_in_flight(t, fi);
	else
		op_read_all(t, fi);
}

/* ---- the matrix ---- */

/* Block x folio sizes (13) x sizing x accounting policies, with room to add. */
#define MAX_COMBOS 512

struct combo {
	uint32_t bsize;
	uint32_t fsize;
	const char *sizing;
	const char *account;
};


static void combo_name(const struct combo *c, char *buf, size_t len)
{
	char b[16], f[16];

	if (c->bsize >= 1024)
		snprintf(b, sizeof(b), "%uk", c->bsize >> 10);
	else
		snprintf(b, sizeof(b), "%u", c->bsize);
	if (c->fsize >= (1u << 20))
		snprintf(f, sizeof(f), "%um", c->fsize >> 20);
	else
		snprintf(f, sizeof(f), "%uk", c->fsize >> 10);
	snprintf(buf, len, "b%s-f%s-%s-%s", b, f, c->sizing, c->account);
}

/*
 * Every combination, in a fixed order: returns how many (fills up to
 * @max).  The policies are the registry's (bs_*_policy_at), so a policy
 * added there is tested here with no edit: its charge is checked against
 * its own price() of the model's bitmaps (check_state).
 */
static int all_combos(struct combo *out, int max)
{
	static const uint32_t bsizes[] = { 512, 1024, 4096, 16384, 65536 };
	static const uint32_t fsizes[] = { 4096, 65536, 2u << 20 };
	const struct bs_account_policy *ap;
	const struct bs_size_policy *sp;
	int n = 0;

	for (size_t b = 0; b < 5; b++)
		for (size_t f = 0; f < 3; f++)
			for (size_t s = 0; (sp = bs_size_policy_at(s)); s++)
				for (size_t a = 0; (ap = bs_account_policy_at(a)); a++) {
					if (fsizes[f] < bsizes[b])
						continue;
					if (n < max)
						out[n] = (struct combo){ bsizes[b], fsizes[f],
									 sp->name, ap->name };
					n++;
				}
	return n;
}

/* Sanitizers slow this test five to ten times: fewer seeds and steps there. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static int default_steps(const struct combo *c)
{
	/* Big folios cost more per step; keep the whole run within budget. */
	int steps = c->fsize >= (2u << 20) ? 160 : 800;

	return SANITIZED ? steps / 2 : steps;
}

static void run_combo(const struct combo *c, unsigned long long seed, int steps)
{
	struct tctx t = { 0 };
	uint32_t cache_folios;
	struct bs_config cfg;

	combo_name(c, cur_case, sizeof(cur_case));
	cur_seed = seed;
	cur_step = -1;
	cur_op = "setup";
	rng_state = seed * 0x9e3779b97f4a7c15ull + 0x1234567;
	rnd();
	inner_size = bs_size_policy_find(c->sizing);
	T_CHECK(inner_size);
	cache_folios = c->fsize >= (2u << 20) ? 4 : 4 + (uint32_t)rnd_below(5);
	cfg = (struct bs_config){
		.block_size = c->bsize, .folio_size = c->fsize,
		.cache_size = (uint64_t)cache_folios * c->fsize,
		.account = bs_account_policy_find(c->account),
		.size = &wrap_size,
	};
	T_CHECK(cfg.account);
	t.bsize = c->bsize;
	t.fsize = c->fsize;
	t.account = !strcmp(c->account, "folio") ? ACC_FOLIO :
		    !strcmp(c->account, "page") ? ACC_PAGE :
		    !strcmp(c->account, "block") ? ACC_BLOCK : ACC_OTHER;
	t.policy = cfg.account;
	t.max_size = (size_t)(cache_folios + 2) * c->fsize;
	if (t.max_size < (256u << 10))
		t.max_size = 256u << 10;
	t.nblocks = t.max_size / c->bsize;
	t.buf = malloc(t.max_size + 4 * (size_t)c->fsize);
	T_CHECK(t.buf);
	M_CHECK(bs_cache_create(&cfg, &test_cache_ops, &t, &t.cache) == 0);
	/* Writes with our runs in flight may find the cache full: fail fast. */
	t.cache->full_wait_ms = 0;
	for (int i = 0; i < NFILES; i++) {
		struct mfile *f = &t.f[i];
		size_t init = chance(30) ? 0 : rnd_below(t.max_size / 2);

		/* The second file is a block device (a fixed size) half the time. */
		f->fixed = i == 1 && chance(50);
		if (f->fixed)
			init = 1 + rnd_below(t.max_size - 1);

		f->shadow = calloc(1, t.max_size);
		f->dirty = calloc(1, t.nblocks);
		f->unsynced = calloc(1, t.nblocks);
		T_CHECK(f->shadow && f->dirty && f->unsynced);
		/* An existing backing file with random contents. */
		mem_backing_init(&f->mem);
		mem_backing_set_len(&f->mem, init);
		if (init) {
			fill_random(f->mem.data, init);
			memcpy(f->shadow, f->mem.data, init);
		}
		f->size = init;
		M_CHECK(bs_file_create(t.cache, &mem_backing_ops, &f->mem, (off_t)init, &f->bs) == 0);
		if (f->fixed)
			bs_file_fix_size(f->bs);
	}
	check_state(&t, true);
	for (cur_step = 0; cur_step < steps; cur_step++) {
		step(&t);
		/* The byte walk is the dear part with 2 MiB folios: every 8th step. */
		check_state(&t, c->fsize < (2u << 20) || cur_step % 8 == 0);
	}
	cur_step = steps;
	op_fsync(&t);
	check_state(&t, true);
	for (int i = 0; i < NFILES; i++) {
		op_read_all(&t, i);
		bs_file_destroy(t.f[i].bs);
		mem_backing_destroy(&t.f[i].mem);
		free(t.f[i].shadow);
		free(t.f[i].dirty);
		free(t.f[i].unsynced);
	}
	{
		struct bs_stats st;

		bs_cache_stats(t.cache, &st);
		M_CHECK(st.folios == 0 && st.cache_bytes == 0 && st.charged_bytes == 0);
		if (getenv("BS_TEST_VERBOSE"))
			printf("%s seed %llu: %d steps, %llu reclaimed, %llu stalls, %llu need_clean, %llu runs (%llu failed), %llu backing reads\n",
			       cur_case, seed, steps, (unsigned long long)st.reclaimed_folios,
			       (unsigned long long)st.reclaim_stalls, (unsigned long long)t.nc_calls,
			       (unsigned long long)t.wb_runs, (unsigned long long)t.wb_failed,
			       (unsigned long long)st.backing_read_ios);
	}
	bs_cache_destroy(t.cache);
	free(t.buf);
}

/* ---- hand-written cases ---- */

struct hctx {
	struct bs_cache *cache;
	struct mem_backing mem[2];
	struct bs_file *file[2];
};

static void h_setup(struct hctx *h, uint32_t bsize, uint32_t fsize, uint64_t cache_size,
		    const char *account, const char *sizing, size_t backing_len, int pattern)
{
	struct bs_config cfg = {
		.block_size = bsize, .folio_size = fsize, .cache_size = cache_size,
		.account = bs_account_policy_find(account),
		.size = bs_size_policy_find(sizing),
	};

	memset(h, 0, sizeof(*h));
	M_CHECK(bs_cache_create(&cfg, NULL, NULL, &h->cache) == 0);
	for (int i = 0; i < 2; i++) {
		mem_backing_init(&h->mem[i]);
		mem_backing_set_len(&h->mem[i], backing_len);
		for (size_t k = 0; k < backing_len; k++)
			h->mem[i].data[k] = (unsigned char)(pattern + k * 7 + k / 4096);
		M_CHECK(bs_file_create(h->cache, &mem_backing_ops, &h->mem[i], (off_t)backing_len,
				       &h->file[i]) == 0);
	}
}

static void h_teardown(struct hctx *h)
{
	M_CHECK(bs_cache_check(h->cache) == 0);
	for (int i = 0; i < 2; i++) {
		bs_file_destroy(h->file[i]);
		mem_backing_destroy(&h->mem[i]);
	}
	bs_cache_destroy(h->cache);
}

/* Full writeback of one file, all runs succeeding. */
static void h_sync(struct hctx *h, int i)
{
	struct bs_wb_run runs[MAX_RUNS];
	off_t pos = 0;
	int n;

	while ((n = bs_wb_collect(h->file[i], &pos, INT64_MAX, runs, MAX_RUNS, SIZE_MAX)) > 0) {
		for (int k = 0; k < n; k++) {
			mem_backing_write(&h->mem[i], runs[k].data, runs[k].len, runs[k].off);
			bs_wb_complete(h->file[i], &runs[k], 0);
		}
	}
	/* As the writeback layer does after a complete pass (blockstate.h). */
	mem_backing_set_len(&h->mem[i], (size_t)bs_file_size(h->file[i]));
	bs_sync_end(h->file[i], bs_sync_begin(h->file[i]), 0);
}

static uint64_t h_ios(struct hctx *h)
{
	struct bs_stats st;

	bs_cache_stats(h->cache, &st);
	M_CHECK(st.backing_read_ios == h->mem[0].reads + h->mem[1].reads);
	return st.backing_read_ios;
}

static uint64_t h_read_bytes(struct hctx *h)
{
	struct bs_stats st;

	bs_cache_stats(h->cache, &st);
	M_CHECK(st.backing_read_bytes == h->mem[0].read_bytes + h->mem[1].read_bytes);
	return st.backing_read_bytes;
}

/* Writing into a fresh file: every block is past EOF, zeroed, never read. */
static void case_eof_zero_fill(void)
{
	struct hctx h;
	char c = 'x', buf[8];

	h_setup(&h, 4096, 2u << 20, 8u << 20, "page", "fixed", 0, 0);
	M_CHECK(bs_write(h.file[0], &c, 1, 0) == 1);
	M_CHECK(h_ios(&h) == 0);
	M_CHECK(bs_file_size(h.file[0]) == 1);
	M_CHECK(bs_read(h.file[0], NULL, buf, sizeof(buf), 0) == 1 && buf[0] == 'x');
	M_CHECK(h_ios(&h) == 0);
	/* The middle and the last byte of a second 2 MiB folio, also past EOF. */
	M_CHECK(bs_write(h.file[0], &c, 1, (3 << 20) + 5) == 1);
	M_CHECK(bs_write(h.file[0], &c, 1, (4 << 20) - 1) == 1);
	M_CHECK(h_ios(&h) == 0);
	/* Unaligned, in the other (empty) file: zeros before it, nothing read. */
	M_CHECK(bs_write(h.file[1], "abc", 3, 4095) == 3);
	M_CHECK(h_ios(&h) == 0);
	M_CHECK(bs_read(h.file[1], NULL, buf, 8, 4090) == 8);
	M_CHECK(!memcmp(buf, "\0\0\0\0\0abc", 8));
	M_CHECK(h_ios(&h) == 0);
	h_teardown(&h);
}

/*
 * A write at offset 100 of an existing 8 KiB file reads exactly the block
 * holding offset 100 (trimmed at EOF when the block is larger than the
 * file) once; a write over two partial blocks reads both.
 */
static void case_partial_block_read(void)
{
	for (uint32_t bsize = 512; bsize <= 65536; bsize <<= 1) {
		struct hctx h;
		char buf[16384];

		h_setup(&h, bsize, 2u << 20, 8u << 20, "page", "fixed", 8192, 3);
		M_CHECK(bs_write(h.file[0], "0123456789", 10, 100) == 10);
		M_CHECK(h_ios(&h) == 1);
		M_CHECK(h_read_bytes(&h) == (bsize < 8192 ? bsize : 8192));
		M_CHECK(h.mem[0].last_read_off == 0 && h.mem[0].last_read_len == bsize);
		M_CHECK(bs_read(h.file[0], NULL, buf, sizeof(buf), 0) == 8192);
		M_CHECK(memcmp(buf + 100, "0123456789", 10) == 0);
		M_CHECK(memcmp(buf, h.mem[0].data, 100) == 0);
		M_CHECK(memcmp(buf + 110, h.mem[0].data + 110, 8192 - 110) == 0);
		/* The rest of the file, one run. */
		M_CHECK(h_ios(&h) == (bsize < 8192 ? 2 : 1));

		/* [100, 5000) on the other file: the first and last blocks are partial. */
		memset(buf, 'w', 4900);
		M_CHECK(bs_write(h.file[1], buf, 4900, 100) == 4900);
		M_CHECK(h_ios(&h) == (bsize < 8192 ? 2 : 1) + (5000 / bsize != 100 / bsize &&
							       5000 % bsize ? 2 : 1));
		h_teardown(&h);
	}
}

/*
 * Reading a 2 MiB folio whose blocks are alternately uptodate issues one
 * backing read per missing run, and reads nothing twice.
 */
static void case_alternate_blocks(void)
{
	static const uint32_t bsizes[] = { 512, 4096, 65536 };

	for (size_t i = 0; i < 3; i++) {
		uint32_t bsize = bsizes[i], nb = (2u << 20) / bsize;
		unsigned char *buf = malloc(2u << 20), *blk = malloc(bsize);
		uint32_t gap = 1 + (uint32_t)i;	/* missing blocks per run: 1, 2, 3 */
		uint32_t runs = 0;
		struct hctx h;

		M_CHECK(buf && blk);
		h_setup(&h, bsize, 2u << 20, 16u << 20, "page", "fixed", 2u << 20, 5);
		memset(blk, 'u', bsize);
		for (uint32_t b = 0; b < nb; b += gap + 1) {
			M_CHECK(bs_write(h.file[0], blk, bsize, (off_t)b * bsize) == bsize);
			if (b + 1 < nb)
				runs++;
		}
		M_CHECK(h_ios(&h) == 0);
		M_CHECK(bs_read(h.file[0], NULL, buf, 2u << 20, 0) == 2u << 20);
		M_CHECK(h_ios(&h) == runs);
		{
			uint32_t missing = 0;

			for (uint32_t b = 0; b < nb; b++)
				missing += b % (gap + 1) != 0;
			M_CHECK(h_read_bytes(&h) == (uint64_t)missing * bsize);
		}
		for (uint32_t b = 0; b < nb; b++) {
			const unsigned char *want = b % (gap + 1) ? h.mem[0].data + (size_t)b * bsize : blk;

			M_CHECK(memcmp(buf + (size_t)b * bsize, want, bsize) == 0);
		}
		/* Everything is uptodate now. */
		M_CHECK(bs_read(h.file[0], NULL, buf, 2u << 20, 0) == 2u << 20);
		M_CHECK(h_ios(&h) == runs);
		h_teardown(&h);
		free(buf);
		free(blk);
	}
}

/*
 * One dirty block in each of 512 separate 2 MiB folios: "page" charges a
 * page each, "block" a block each, "folio" the whole folio each.
 */
static void case_charge_512_folios(void)
{
	static const struct {
		const char *account;
		uint32_t bsize;
		uint64_t expect;
	} cases[] = {
		{ "page", 4096, 512ull * 4096 },
		{ "folio", 4096, 512ull * (2u << 20) },
		{ "block", 4096, 512ull * 4096 },
		{ "page", 512, 512ull * 4096 },
		{ "block", 512, 512ull * 512 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t bsize = cases[i].bsize;
		char blk[4096];
		struct bs_stats st;
		struct hctx h;

		memset(blk, 'c', sizeof(blk));
		h_setup(&h, bsize, 2u << 20, 513ull << 21, cases[i].account, "fixed", 0, 0);
		for (uint64_t k = 0; k < 512; k++) {
			off_t off = (off_t)(k << 21) + (off_t)(k % 7) * bsize;

			M_CHECK(bs_write(h.file[0], blk, bsize, off) == bsize);
		}
		bs_cache_stats(h.cache, &st);
		M_CHECK(st.folios == 512 && st.cache_bytes == 512ull << 21);
		M_CHECK(st.charged_bytes == cases[i].expect);
		M_CHECK(st.nr_dirty == cases[i].expect / 4096);
		M_CHECK(st.dirty_bytes_exact == 512ull * bsize);
		M_CHECK(st.pinned_bytes == 512ull << 21);
		M_CHECK(bs_cache_check(h.cache) == 0);
		/* Writeback without copying: the backing file would be 1 GiB. */
		{
			struct bs_wb_run runs[MAX_RUNS];
			off_t pos = 0;
			int n, total = 0;

			while ((n = bs_wb_collect(h.file[0], &pos, INT64_MAX, runs, MAX_RUNS,
						  SIZE_MAX)) > 0) {
				for (int k = 0; k < n; k++) {
					M_CHECK(runs[k].len == bsize);
					bs_wb_complete(h.file[0], &runs[k], 0);
				}
				total += n;
			}
			M_CHECK(total == 512);
		}
		/* Written, not synced: still pinned, no longer charged. */
		bs_cache_stats(h.cache, &st);
		M_CHECK(st.charged_bytes == 0 && st.nr_dirty == 0 && st.dirty_bytes_exact == 0);
		M_CHECK(st.pinned_bytes == 512ull << 21 && st.unsynced_bytes == 512ull << 21);
		bs_sync_end(h.file[0], bs_sync_begin(h.file[0]), 0);
		bs_cache_stats(h.cache, &st);
		M_CHECK(st.pinned_bytes == 0 && st.unsynced_bytes == 0);
		/* The policy's charge is discharged; the written folios count whole. */
		M_CHECK(st.nr_discharged == cases[i].expect / 4096);
		M_CHECK(st.nr_written == 512ull * 512 && st.nr_writeback == 0);
		h_teardown(&h);
	}
}

/* Arguments blockstate refuses, and no-ops. */
static void case_arguments(void)
{
	struct bs_config cfg = {
		.block_size = 4096, .folio_size = 65536, .cache_size = 1 << 20,
		.account = bs_account_policy_find("page"), .size = bs_size_policy_find("fixed"),
	};
	struct hctx h;
	char err[256], buf[16] = { 0 };

	M_CHECK(bs_config_check(&cfg, err, sizeof(err)) == 0);
	cfg.block_size = 256;
	M_CHECK(bs_config_check(&cfg, err, sizeof(err)) == -EINVAL);
	cfg.block_size = 3000;
	M_CHECK(bs_config_check(&cfg, err, sizeof(err)) == -EINVAL);
	cfg.block_size = 131072;
	M_CHECK(bs_config_check(&cfg, err, sizeof(err)) == -EINVAL);
	cfg.block_size = 4096, cfg.folio_size = 4u << 20;
	M_CHECK(bs_config_check(&cfg, err, sizeof(err)) == -EINVAL);
	cfg.folio_size = 65536, cfg.cache_size = 3ull * 65536;
	M_CHECK(bs_config_check(&cfg, err, sizeof(err)) == -EINVAL);
	cfg.cache_size = 1 << 20, cfg.account = NULL;
	M_CHECK(bs_config_check(&cfg, err, sizeof(err)) == -EINVAL);
	M_CHECK(bs_account_policy_find("nope") == NULL && bs_size_policy_find("nope") == NULL);
	for (size_t i = 0; bs_account_policy_at(i); i++)
		M_CHECK(bs_account_policy_find(bs_account_policy_at(i)->name) == bs_account_policy_at(i));
	for (size_t i = 0; bs_size_policy_at(i); i++)
		M_CHECK(bs_size_policy_find(bs_size_policy_at(i)->name) == bs_size_policy_at(i));

	h_setup(&h, 4096, 65536, 1 << 20, "page", "fixed", 1000, 1);
	M_CHECK(bs_read(h.file[0], NULL, buf, 1, -1) == -EINVAL);
	M_CHECK(bs_write(h.file[0], buf, 1, -1) == -EINVAL);
	M_CHECK(bs_write(h.file[0], buf, 2, INT64_MAX - 1) == -EFBIG);
	M_CHECK(bs_truncate(h.file[0], -1) == -EINVAL);
	M_CHECK(bs_fallocate(h.file[0], FALLOC_FL_PUNCH_HOLE, 0, 10) == -EOPNOTSUPP);
	M_CHECK(bs_fallocate(h.file[0], FALLOC_FL_COLLAPSE_RANGE, 0, 4096) == -EOPNOTSUPP);
	M_CHECK(bs_fallocate(h.file[0], 0, 0, 0) == -EINVAL);
	M_CHECK(bs_fallocate(h.file[0], 0, -1, 10) == -EINVAL);
	M_CHECK(bs_fallocate(h.file[0], 0, INT64_MAX - 10, 100) == -EFBIG);
	/* Zero-length writes and reads change nothing, anywhere. */
	M_CHECK(bs_write(h.file[0], buf, 0, 5000) == 0);
	M_CHECK(bs_write(h.file[0], buf, 0, 0) == 0);
	M_CHECK(bs_read(h.file[0], NULL, buf, 0, 10) == 0);
	M_CHECK(bs_read(h.file[0], NULL, buf, 10, 1000) == 0);
	M_CHECK(bs_read(h.file[0], NULL, buf, 10, 5000) == 0);
	M_CHECK(bs_read(h.file[0], NULL, buf, SIZE_MAX, 990) == 10);
	M_CHECK(bs_file_size(h.file[0]) == 1000 && !bs_file_has_held(h.file[0]));
	h_teardown(&h);
}

/* A failed backing truncate changes nothing. */
static void case_failed_truncate(void)
{
	struct hctx h;
	char buf[8192], out[8192];

	h_setup(&h, 4096, 65536, 1 << 20, "page", "fixed", 0, 0);
	memset(buf, 'd', sizeof(buf));
	M_CHECK(bs_write(h.file[0], buf, sizeof(buf), 0) == sizeof(buf));
	h.mem[0].fail_truncate = -EIO;
	M_CHECK(bs_truncate(h.file[0], 100) == -EIO);
	M_CHECK(bs_file_size(h.file[0]) == 8192);
	M_CHECK(bs_read(h.file[0], NULL, out, sizeof(out), 0) == 8192 && !memcmp(out, buf, 8192));
	h.mem[0].fail_truncate = -EIO;
	M_CHECK(bs_truncate(h.file[0], 100000) == -EIO);
	M_CHECK(bs_file_size(h.file[0]) == 8192);
	h_sync(&h, 0);
	M_CHECK(h.mem[0].len == 8192 && !memcmp(h.mem[0].data, buf, 8192));
	h_teardown(&h);
}

/* Truncate down then up: the bytes in between read as zeros, cached or not. */
static void case_truncate_zeroes(void)
{
	for (int synced = 0; synced < 2; synced++) {
		struct hctx h;
		char buf[3 * 65536], out[3 * 65536];

		h_setup(&h, 1024, 65536, 1 << 20, "page", "ramp", 0, 0);
		memset(buf, 't', sizeof(buf));
		M_CHECK(bs_write(h.file[0], buf, sizeof(buf), 0) == sizeof(buf));
		if (synced)
			h_sync(&h, 0);
		M_CHECK(bs_truncate(h.file[0], 1000) == 0);
		M_CHECK(bs_truncate(h.file[0], sizeof(buf)) == 0);
		M_CHECK(bs_read(h.file[0], NULL, out, sizeof(out), 0) == sizeof(out));
		M_CHECK(!memcmp(out, buf, 1000));
		for (size_t i = 1000; i < sizeof(out); i++)
			M_CHECK(out[i] == 0);
		h_sync(&h, 0);
		M_CHECK(!memcmp(h.mem[0].data, buf, 1000));
		for (size_t i = 1000; i < h.mem[0].len; i++)
			M_CHECK(h.mem[0].data[i] == 0);
		h_teardown(&h);
	}
}

/* A failed writeback keeps the blocks dirty; the next one writes them. */
static void case_failed_writeback(void)
{
	struct bs_wb_run runs[4];
	struct bs_stats st;
	struct hctx h;
	char buf[8192];
	off_t pos = 0;

	h_setup(&h, 4096, 65536, 1 << 20, "block", "fixed", 0, 0);
	memset(buf, 'f', sizeof(buf));
	M_CHECK(bs_write(h.file[0], buf, sizeof(buf), 0) == sizeof(buf));
	M_CHECK(bs_wb_collect(h.file[0], &pos, INT64_MAX, runs, 4, SIZE_MAX) == 1);
	bs_cache_stats(h.cache, &st);
	M_CHECK(st.writeback_bytes == 8192 && st.dirty_bytes_exact == 8192 && st.charged_bytes == 8192);
	bs_wb_complete(h.file[0], &runs[0], -EIO);
	bs_cache_stats(h.cache, &st);
	M_CHECK(st.writeback_bytes == 0 && st.dirty_bytes_exact == 8192 && st.charged_bytes == 8192);
	M_CHECK(bs_file_has_held(h.file[0]) && bs_cache_check(h.cache) == 0);
	h_sync(&h, 0);
	bs_cache_stats(h.cache, &st);
	M_CHECK(st.dirty_bytes_exact == 0 && st.charged_bytes == 0);
	M_CHECK(h.mem[0].len == 8192 && !memcmp(h.mem[0].data, buf, 8192));
	h_teardown(&h);
}

/*
 * Blocks written again while under writeback are dirtied a second time
 * and written a second time (Linux counts such a folio twice in
 * nr_dirtied and nr_written), but charged once: the memory is held once.
 */
static void case_redirty_during_writeback(void)
{
	static const struct {
		const char *account;
		uint32_t block_size;
		uint64_t dirtied, charged_mid, written_mid;	/* pages */
	} cases[] = {
		/* 8 KiB dirty, then two 1 KiB writes into page 0 while in flight */
		{ "block", 4096, 2 + 1, 2, 1 + 1 },
		{ "page", 1024, 2 + 1, 2, 1 + 1 },
		{ "folio", 1024, 16 + 16, 16, 0 + 16 },
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct bs_wb_run runs[4];
		struct bs_stats st0, st;
		struct hctx h;
		char buf[8192], snap[8192];
		off_t pos = 0;

		h_setup(&h, cases[c].block_size, 65536, 1 << 20, cases[c].account,
			"fixed", 0, 0);
		bs_cache_stats(h.cache, &st0);
		memset(buf, 'a', sizeof(buf));
		M_CHECK(bs_write(h.file[0], buf, sizeof(buf), 0) == sizeof(buf));
		M_CHECK(bs_wb_collect(h.file[0], &pos, INT64_MAX, runs, 4, SIZE_MAX) == 1);
		/* The writeback layer's bounce copy, taken as the run is collected. */
		M_CHECK(runs[0].off == 0 && runs[0].len == sizeof(snap));
		bs_wb_copy(&runs[0], snap);
		/* Two blocks of page 0, by two writes: one more dirtying of the page. */
		memset(buf, 'b', sizeof(buf));
		M_CHECK(bs_write(h.file[0], buf, 1024, 0) == 1024);
		M_CHECK(bs_write(h.file[0], buf, 1024, 2048) == 1024);
		bs_cache_stats(h.cache, &st);
		M_CHECK(st.charged_bytes == cases[c].charged_mid * 4096);
		M_CHECK(st.nr_dirtied - st0.nr_dirtied == cases[c].dirtied);
		M_CHECK(bs_cache_check(h.cache) == 0);
		mem_backing_write(&h.mem[0], snap, sizeof(snap), 0);
		bs_wb_complete(h.file[0], &runs[0], 0);
		bs_cache_stats(h.cache, &st);
		M_CHECK(st.nr_discharged - st0.nr_discharged == cases[c].written_mid);
		/* One whole 64 KiB folio written, whatever the policy. */
		M_CHECK(st.nr_written - st0.nr_written == 16);
		M_CHECK(bs_file_has_held(h.file[0]) && bs_cache_check(h.cache) == 0);
		h_sync(&h, 0);
		bs_cache_stats(h.cache, &st);
		M_CHECK(st.charged_bytes == 0 && st.nr_discharged == st.nr_dirtied);
		M_CHECK(st.nr_written - st0.nr_written == 2ull * 16);
		M_CHECK(h.mem[0].len == 8192 && !memcmp(h.mem[0].data, buf, 1024) &&
			h.mem[0].data[1024] == 'a' && !memcmp(h.mem[0].data + 2048, buf, 1024));
		M_CHECK(bs_cache_check(h.cache) == 0);
		h_teardown(&h);
	}
}

/*
 * The writeback counters are the kernel's, whatever the policy:
 * nr_writeback counts every page of a folio with a run in flight (as
 * NR_WRITEBACK counts a folio under writeback), nr_written the pages of a
 * folio when its writeback ends having written (WB_WRITTEN), once however
 * many runs it took; nr_discharged is the policy's charge going away, and
 * nr_reclaimable the policy's charge of dirty blocks not under writeback.
 */
static void case_writeback_counters(void)
{
	static const struct {
		const char *account;
		uint64_t price0, price1;	/* pages: folio 0 (3 blocks), folio 1 (1 block) */
	} cases[] = {
		{ "page", 3, 1 },
		{ "block", 3, 1 },
		{ "folio", 16, 16 },
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		uint64_t p0 = cases[c].price0, p1 = cases[c].price1;
		struct bs_wb_run runs[4];
		struct bs_stats st;
		struct hctx h;
		char buf[8192];
		off_t pos = 0;

		h_setup(&h, 4096, 65536, 1 << 20, cases[c].account, "fixed", 0, 0);
		memset(buf, 'w', sizeof(buf));
		/* Folio 0: blocks 1-2 and 4 (two runs); folio 1: block 2. */
		M_CHECK(bs_write(h.file[0], buf, 8192, 4096) == 8192);
		M_CHECK(bs_write(h.file[0], buf, 4096, (off_t)4 * 4096) == 4096);
		M_CHECK(bs_write(h.file[0], buf, 4096, 65536 + 8192) == 4096);
		bs_cache_stats(h.cache, &st);
		M_CHECK(st.nr_dirty == p0 + p1 && st.nr_reclaimable == p0 + p1);
		M_CHECK(st.nr_writeback == 0 && st.nr_written == 0 && st.nr_discharged == 0);

		M_CHECK(bs_wb_collect(h.file[0], &pos, INT64_MAX, runs, 4, SIZE_MAX) == 3);
		bs_cache_stats(h.cache, &st);
		/* All in flight: still charged, nothing left for background writeback. */
		M_CHECK(st.nr_dirty == p0 + p1 && st.nr_reclaimable == 0);
		M_CHECK(st.nr_writeback == 2ull * 16);
		M_CHECK(bs_cache_check(h.cache) == 0);

		/* The first run of folio 0 ends: the folio is still under writeback. */
		bs_wb_complete(h.file[0], &runs[0], 0);
		bs_cache_stats(h.cache, &st);
		M_CHECK(st.nr_writeback == 2ull * 16 && st.nr_written == 0);
		bs_wb_complete(h.file[0], &runs[1], 0);
		bs_cache_stats(h.cache, &st);
		M_CHECK(st.nr_writeback == 16 && st.nr_written == 16);
		M_CHECK(st.nr_discharged == p0 && st.nr_dirty == p1);
		/* Folio 1's write fails: dirty again, nothing written. */
		bs_wb_complete(h.file[0], &runs[2], -EIO);
		bs_cache_stats(h.cache, &st);
		M_CHECK(st.nr_writeback == 0 && st.nr_written == 16 && st.nr_discharged == p0);
		M_CHECK(st.nr_dirty == p1 && st.nr_reclaimable == p1);
		M_CHECK(bs_cache_check(h.cache) == 0);

		/* Written again: dirty again while in flight counts twice. */
		pos = 0;
		M_CHECK(bs_wb_collect(h.file[0], &pos, INT64_MAX, runs, 4, SIZE_MAX) == 1);
		M_CHECK(bs_write(h.file[0], buf, 4096, 65536 + 8192) == 4096);
		bs_cache_stats(h.cache, &st);
		M_CHECK(st.nr_writeback == 16 && st.nr_reclaimable == p1);
		bs_wb_complete(h.file[0], &runs[0], 0);
		h_sync(&h, 0);
		bs_cache_stats(h.cache, &st);
		M_CHECK(st.nr_written == 3ull * 16 && st.nr_writeback == 0);
		M_CHECK(st.nr_discharged == st.nr_dirtied && st.nr_dirtied == p0 + 2 * p1);
		M_CHECK(st.nr_dirty == 0 && st.nr_reclaimable == 0);
		h_teardown(&h);
	}
}

/*
 * A writeback budget is paid in whole folios: 8 KiB dirty in each of
 * eight 2 MiB folios, and a budget of 1024 pages writes two folios (4
 * pages dirty).  A folio once begun is finished even past the budget,
 * batch after batch.
 */
static void case_wb_budget(void)
{
	struct bs_wb_run runs[MAX_RUNS];
	struct bs_wb_budget b;
	struct bs_stats st;
	struct hctx h;
	char buf[8192];
	off_t pos = 0;
	int n;

	h_setup(&h, 4096, 2u << 20, 64u << 20, "page", "fixed", 0, 0);
	memset(buf, 'b', sizeof(buf));
	for (int k = 0; k < 8; k++)
		M_CHECK(bs_write(h.file[0], buf, 8192, ((off_t)k << 21) + (off_t)(k % 3) * 8192) == 8192);
	bs_wb_budget_init(&b, 1024);
	n = bs_wb_collect_budget(h.file[0], &pos, INT64_MAX, runs, MAX_RUNS, SIZE_MAX,
				 SIZE_MAX, 0, &b);
	M_CHECK(n == 2 && runs[0].off == 0 && runs[1].off == (2 << 20) + 8192);
	M_CHECK(b.nr_to_write == 0 && b.folio_pages == 1024 && b.dirty_pages == 4);
	M_CHECK(pos == (off_t)2 << 21);
	for (int i = 0; i < n; i++)
		bs_wb_complete(h.file[0], &runs[i], 0);
	/* Used up: nothing more, and the position stays at the next folio. */
	M_CHECK(bs_wb_collect_budget(h.file[0], &pos, INT64_MAX, runs, MAX_RUNS, SIZE_MAX,
				     SIZE_MAX, 0, &b) == 0);
	M_CHECK(pos == (off_t)2 << 21);

	/* Folio 2 gets two more runs: one page of budget, one run per batch. */
	M_CHECK(bs_write(h.file[0], buf, 4096, ((off_t)2 << 21) + 65536) == 4096);
	M_CHECK(bs_write(h.file[0], buf, 4096, ((off_t)2 << 21) + 131072) == 4096);
	bs_wb_budget_init(&b, 1);
	for (int batch = 0; batch < 3; batch++) {
		M_CHECK(bs_wb_collect_budget(h.file[0], &pos, INT64_MAX, runs, 1, SIZE_MAX,
					     SIZE_MAX, 0, &b) == 1);
		M_CHECK(runs[0].off >> 21 == 2);
		bs_wb_complete(h.file[0], &runs[0], 0);
	}
	M_CHECK(b.nr_to_write == 1 - 512 && b.folio_pages == 512 && b.dirty_pages == 4);
	M_CHECK(bs_wb_collect_budget(h.file[0], &pos, INT64_MAX, runs, 1, SIZE_MAX,
				     SIZE_MAX, 0, &b) == 0);
	M_CHECK(pos == (off_t)3 << 21);
	bs_cache_stats(h.cache, &st);
	M_CHECK(st.wb_budget_pages == 1024 + 512 && st.wb_dirty_pages_written == 4 + 4);
	/* Without a budget (bs_wb_collect) nothing is counted. */
	h_sync(&h, 0);
	bs_cache_stats(h.cache, &st);
	M_CHECK(st.wb_budget_pages == 1024 + 512 && st.dirty_bytes_exact == 0);
	/*
	 * Folio 2's writeback ended after each of its three batches, so it
	 * counts three times (the kernel writes a folio in one go; here a
	 * folio whose runs do not fit one batch does not).
	 */
	M_CHECK(st.nr_written == (8ull + 2) * 512);
	h_teardown(&h);
}

/* A fixed size (a block device): writes stop at it, nothing changes it. */
static void case_fixed_size(void)
{
	char buf[20000], out[20000];
	struct hctx h;

	h_setup(&h, 4096, 65536, 1 << 20, "page", "fixed", 10000, 9);
	bs_file_fix_size(h.file[0]);
	memset(buf, 'z', sizeof(buf));
	M_CHECK(bs_write(h.file[0], buf, 100, 9950) == 50);
	M_CHECK(bs_write(h.file[0], buf, 1, 10000) == -ENOSPC);
	M_CHECK(bs_write(h.file[0], buf, 1, 15000) == -ENOSPC);
	M_CHECK(bs_write(h.file[0], buf, 0, 15000) == 0);
	M_CHECK(bs_truncate(h.file[0], 10000) == 0);
	M_CHECK(bs_truncate(h.file[0], 5000) == -EPERM);
	M_CHECK(bs_truncate(h.file[0], 20000) == -EPERM);
	M_CHECK(bs_fallocate(h.file[0], 0, 9000, 2000) == -ENOSPC);
	M_CHECK(bs_fallocate(h.file[0], FALLOC_FL_ZERO_RANGE, 9000, 2000) == -ENOSPC);
	M_CHECK(bs_fallocate(h.file[0], FALLOC_FL_KEEP_SIZE, 9000, 2000) == 0);
	M_CHECK(bs_fallocate(h.file[0], 0, 0, 10000) == 0);
	M_CHECK(bs_file_size(h.file[0]) == 10000);
	M_CHECK(bs_read(h.file[0], NULL, out, sizeof(out), 0) == 10000);
	M_CHECK(!memcmp(out, h.mem[0].data, 9950) && !memcmp(out + 9950, buf, 50));
	M_CHECK(bs_fallocate(h.file[0], FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 9000, 2000) == 0);
	M_CHECK(bs_read(h.file[0], NULL, out, sizeof(out), 0) == 10000);
	for (int i = 9000; i < 10000; i++)
		M_CHECK(out[i] == 0);
	h_sync(&h, 0);
	M_CHECK(h.mem[0].len == 10000 && !memcmp(h.mem[0].data, out, 10000));
	h_teardown(&h);
}

/*
 * Collect modes: BS_WB_WHOLE_FOLIO writes every uptodate block of a folio
 * with a dirty one (only the dirty ones go under writeback); max_run
 * splits runs; BS_WB_WHOLE_BLOCKS does not trim the run holding EOF.
 */
static void case_collect_modes(void)
{
	struct bs_wb_run runs[4];
	struct bs_stats st;
	struct hctx h;
	char buf[65536];
	off_t pos = 0;

	h_setup(&h, 4096, 65536, 1 << 20, "block", "fixed", 65536 + 5000, 4);
	M_CHECK(bs_read(h.file[0], NULL, buf, sizeof(buf), 0) == sizeof(buf));
	memset(buf, 'w', 4096);
	M_CHECK(bs_write(h.file[0], buf, 4096, (off_t)8 * 4096) == 4096);
	M_CHECK(bs_wb_collect_mode(h.file[0], &pos, INT64_MAX, runs, 4, SIZE_MAX, SIZE_MAX,
				   BS_WB_WHOLE_FOLIO) == 1);
	M_CHECK(runs[0].off == 0 && runs[0].len == 65536);
	M_CHECK(runs[0].first_blk == 0 && runs[0].end_blk == 16);
	bs_cache_stats(h.cache, &st);
	M_CHECK(st.writeback_bytes == 4096 && st.dirty_bytes_exact == 4096);
	M_CHECK(bs_cache_check(h.cache) == 0);
	mem_backing_write(&h.mem[0], runs[0].data, runs[0].len, runs[0].off);
	bs_wb_complete(h.file[0], &runs[0], 0);
	M_CHECK(!bs_file_has_held(h.file[0]));
	/* Nothing dirty: nothing collected, whole folio or not. */
	pos = 0;
	M_CHECK(bs_wb_collect_mode(h.file[0], &pos, INT64_MAX, runs, 4, SIZE_MAX, SIZE_MAX,
				   BS_WB_WHOLE_FOLIO) == 0);

	/* max_run splits a run: a fully dirty folio in four. */
	memset(buf, 'r', sizeof(buf));
	M_CHECK(bs_write(h.file[0], buf, sizeof(buf), 0) == sizeof(buf));
	pos = 0;
	M_CHECK(bs_wb_collect_mode(h.file[0], &pos, 65536, runs, 4, SIZE_MAX, 16384, 0) == 4);
	for (int i = 0; i < 4; i++) {
		M_CHECK(runs[i].off == (off_t)i * 16384 && runs[i].len == 16384);
		M_CHECK(runs[i].first_blk == (uint32_t)i * 4 && runs[i].end_blk == (uint32_t)i * 4 + 4);
		mem_backing_write(&h.mem[0], runs[i].data, runs[i].len, runs[i].off);
		bs_wb_complete(h.file[0], &runs[i], 0);
	}
	M_CHECK(pos == 65536 && !bs_file_has_held(h.file[0]));

	/* EOF at 65536 + 5000: the run of the last two blocks. */
	M_CHECK(bs_write(h.file[0], buf, 2000, 65536 + 3000) == 2000);
	pos = 0;
	M_CHECK(bs_wb_collect_mode(h.file[0], &pos, INT64_MAX, runs, 4, SIZE_MAX, SIZE_MAX,
				   BS_WB_WHOLE_BLOCKS) == 1);
	M_CHECK(runs[0].off == 65536 && runs[0].len == 8192);
	bs_wb_complete(h.file[0], &runs[0], -EIO);
	pos = 0;
	M_CHECK(bs_wb_collect(h.file[0], &pos, INT64_MAX, runs, 4, SIZE_MAX) == 1);
	M_CHECK(runs[0].off == 65536 && runs[0].len == 5000);
	bs_wb_complete(h.file[0], &runs[0], 0);
	M_CHECK(!bs_file_has_held(h.file[0]));
	h_teardown(&h);
}

/* Destroying a file with dirty data discards it and its charge. */
static void case_destroy_dirty(void)
{
	struct bs_stats st;
	struct hctx h;
	char buf[10000];

	h_setup(&h, 1024, 65536, 1 << 20, "folio", "fixed", 3000, 2);
	memset(buf, 'd', sizeof(buf));
	M_CHECK(bs_write(h.file[0], buf, sizeof(buf), 2500) == sizeof(buf));
	M_CHECK(bs_write(h.file[1], buf, 10, 100) == 10);
	bs_file_destroy(h.file[0]);
	h.file[0] = NULL;
	bs_cache_stats(h.cache, &st);
	M_CHECK(st.charged_bytes == 65536 && st.dirty_bytes_exact == 1024);
	M_CHECK(bs_cache_check(h.cache) == 0);
	bs_file_destroy(h.file[1]);
	bs_cache_stats(h.cache, &st);
	M_CHECK(st.charged_bytes == 0 && st.dirty_bytes_exact == 0 && st.pinned_bytes == 0);
	M_CHECK(st.folios == 0 && st.cache_bytes == 0);
	for (int i = 0; i < 2; i++)
		mem_backing_destroy(&h.mem[i]);
	bs_cache_destroy(h.cache);
}

/* A 64 KiB folio, in size_t so that products do not overflow int. */
#define F64K ((size_t)65536)

static int nc_calls;
static struct bs_file *nc_file;		/* need_clean_nothing writes it back when set */
static struct mem_backing *nc_mem;

static void wb_all(struct bs_file *file, struct mem_backing *mem);

static void need_clean_nothing(void *arg)
{
	(void)arg;
	nc_calls++;
	if (nc_file) {
		wb_all(nc_file, nc_mem);
		bs_sync_end(nc_file, bs_sync_begin(nc_file), 0);
	}
}

/*
 * When writeback cleans nothing and dirty data fills the cache (a backing
 * store that fails every write), a writer is held a while and then fails
 * with -ENOSPC instead of growing the cache; what it wrote before stays.
 * While the cache stays full, writes fail at once.  Reads go over the
 * budget (their folios are clean).  Once writeback works again, so do
 * writes.
 */
static void case_over_budget(void)
{
	static const struct bs_cache_ops ops = { .need_clean = need_clean_nothing };
	struct bs_config cfg = {
		.block_size = 4096, .folio_size = 65536, .cache_size = 4ull * 65536,
		.account = bs_account_policy_find("page"), .size = bs_size_policy_find("fixed"),
	};
	struct mem_backing mem, mem2;
	struct bs_cache *cache;
	struct bs_file *file, *file2;
	struct bs_stats st;
	const size_t len = (size_t)10 * F64K;	/* ten folios */
	char *buf = malloc(len), *rbuf = malloc(len);

	M_CHECK(buf && rbuf);
	memset(buf, 'o', len);
	nc_calls = 0;
	nc_file = NULL;
	mem_backing_init(&mem);
	mem_backing_init(&mem2);
	M_CHECK(bs_cache_create(&cfg, &ops, NULL, &cache) == 0);
	cache->full_wait_ms = 50;
	M_CHECK(bs_file_create(cache, &mem_backing_ops, &mem, 0, &file) == 0);
	mem_backing_set_len(&mem2, len);
	memset(mem2.data, 'r', len);
	M_CHECK(bs_file_create(cache, &mem_backing_ops, &mem2, (off_t)len, &file2) == 0);
	/* Four folios fit; the fifth waits, then the write comes back short. */
	M_CHECK(bs_write(file, buf, len, 0) == 4 * F64K);
	bs_cache_stats(cache, &st);
	M_CHECK(st.folios == 4 && st.cache_bytes == 4 * F64K && st.full_events == 1);
	M_CHECK(st.dirty_bytes_exact == 4 * F64K);
	M_CHECK(st.reclaim_stalls == (uint64_t)nc_calls && nc_calls >= 4);
	/* Still full: the next write fails. */
	M_CHECK(bs_write(file, buf, 100, 4 * F64K) == -ENOSPC);
	bs_cache_stats(cache, &st);
	M_CHECK(st.folios == 4 && st.full_events == 1);
	/* A read goes over the budget; its folios are reclaimed later. */
	M_CHECK(bs_read(file2, NULL, rbuf, len, 0) == (ssize_t)len);
	M_CHECK(memcmp(rbuf, mem2.data, len) == 0);
	M_CHECK(bs_read(file, NULL, rbuf, len, 0) == 4 * F64K);
	M_CHECK(memcmp(rbuf, buf, 4 * F64K) == 0);
	M_CHECK(bs_cache_check(cache) == 0);
	/* Writeback works again: so do writes, and the cache is back in budget. */
	nc_file = file;
	nc_mem = &mem;
	M_CHECK(bs_write(file, buf + 4 * F64K, len - 4 * F64K, 4 * F64K) ==
		(ssize_t)(len - 4 * F64K));
	bs_cache_stats(cache, &st);
	M_CHECK(st.cache_bytes <= 4 * F64K && st.full_events == 1);
	wb_all(file, &mem);
	M_CHECK(mem.len == len && memcmp(mem.data, buf, len) == 0);
	nc_file = NULL;
	M_CHECK(bs_cache_check(cache) == 0);
	bs_file_destroy(file);
	bs_file_destroy(file2);
	bs_cache_destroy(cache);
	free(buf);
	free(rbuf);
	mem_backing_destroy(&mem);
	mem_backing_destroy(&mem2);
}

/*
 * The last bytes below OFF_MAX: either refused (-EFBIG) or cached like
 * any others, with a writeback run trimmed at EOF.
 */
static void case_huge_offset(void)
{
	const off_t off = INT64_MAX - 10;
	struct bs_wb_run runs[4];
	struct hctx h;
	off_t pos = 0;
	char buf[8];
	ssize_t ret;
	int n;

	h_setup(&h, 4096, 65536, 1 << 20, "page", "fixed", 0, 0);
	ret = bs_write(h.file[0], "hello", 5, off);
	M_CHECK(ret == 5 || ret == -EFBIG);
	if (ret == 5) {
		M_CHECK(bs_file_size(h.file[0]) == off + 5);
		M_CHECK(bs_read(h.file[0], NULL, buf, sizeof(buf), off) == 5 && !memcmp(buf, "hello", 5));
		M_CHECK(bs_cache_check(h.cache) == 0);
		n = bs_wb_collect(h.file[0], &pos, INT64_MAX, runs, 4, SIZE_MAX);
		M_CHECK(n == 1);
		if (runs[0].off + (off_t)(runs[0].len - 1) != off + 4)
			fprintf(stderr, "run at %lld, %zu bytes: past EOF %lld\n",
				(long long)runs[0].off, runs[0].len, (long long)off + 5);
		bs_wb_complete(h.file[0], &runs[0], -EIO);
		M_CHECK(runs[0].len == 4096 - 5);
		M_CHECK(bs_truncate(h.file[0], 0) == 0);
	}
	M_CHECK(!bs_file_has_held(h.file[0]));
	h_teardown(&h);
}

/*
 * Index tags across a sparse file whose tree grows while folios are
 * tagged: collection finds exactly the held folios, in order, within the
 * range asked, and a failed run stays tagged.
 */
static void case_sparse_tags(void)
{
	static const off_t offs[] = {
		0, 3 << 20, (1ll << 30) + 65536, 70ll << 30, 5ll << 40, (1ll << 50) + 4096,
	};
	const int n = (int)(sizeof(offs) / sizeof(offs[0]));
	struct bs_wb_run runs[16];
	struct hctx h;
	off_t pos = 0;

	h_setup(&h, 4096, 65536, 64 << 20, "block", "fixed", 0, 0);
	/* Ascending: each write past the tree grows it above tagged folios. */
	for (int i = 0; i < n; i++) {
		M_CHECK(bs_write(h.file[0], "x", 1, offs[i]) == 1);
		M_CHECK(bs_cache_check(h.cache) == 0);
	}
	M_CHECK(bs_wb_collect(h.file[0], &pos, INT64_MAX, runs, 16, SIZE_MAX) == n);
	for (int i = 0; i < n; i++)	/* the last one ends at EOF */
		M_CHECK(runs[i].off == offs[i] && runs[i].len == (i < n - 1 ? 4096u : 1u));
	/* The one at 70 GiB fails: it alone stays held and tagged. */
	for (int i = 0; i < n; i++)
		bs_wb_complete(h.file[0], &runs[i], offs[i] == 70ll << 30 ? -EIO : 0);
	M_CHECK(bs_cache_check(h.cache) == 0 && bs_file_has_held(h.file[0]));
	pos = 1ll << 30;
	M_CHECK(bs_wb_collect(h.file[0], &pos, 5ll << 40, runs, 16, SIZE_MAX) == 1);
	M_CHECK(runs[0].off == 70ll << 30 && pos > runs[0].off);
	bs_wb_complete(h.file[0], &runs[0], 0);
	M_CHECK(!bs_file_has_held(h.file[0]) && bs_cache_check(h.cache) == 0);
	pos = 0;
	M_CHECK(bs_wb_collect(h.file[0], &pos, INT64_MAX, runs, 16, SIZE_MAX) == 0);
	/* Dirty again in descending order, then drop everything dirty. */
	for (int i = n - 1; i >= 0; i--)
		M_CHECK(bs_write(h.file[0], "y", 1, offs[i] + 1) == 1);
	pos = (3 << 20) + 4096;	/* past the dirty block at 3 MiB */
	M_CHECK(bs_wb_collect(h.file[0], &pos, INT64_MAX, runs, 2, SIZE_MAX) == 2);
	M_CHECK(runs[0].off == (1ll << 30) + 65536 && runs[1].off == 70ll << 30);
	for (int i = 0; i < 2; i++)
		bs_wb_complete(h.file[0], &runs[i], 0);
	M_CHECK(bs_cache_check(h.cache) == 0);
	M_CHECK(bs_truncate(h.file[0], 0) == 0);
	M_CHECK(!bs_file_has_held(h.file[0]) && bs_cache_check(h.cache) == 0);
	h_teardown(&h);
}

/*
 * bs_wb_collect: "together at most @max_bytes unless the first run alone
 * is larger".  Two dirty runs of 8 KiB, max_bytes 8 KiB + 1: one run.
 */
static void case_collect_max_bytes(void)
{
	struct bs_wb_run runs[4];
	struct hctx h;
	char buf[8192];
	off_t pos = 0;
	size_t total = 0;
	int n;

	h_setup(&h, 4096, 65536, 1 << 20, "page", "fixed", 0, 0);
	memset(buf, 'm', sizeof(buf));
	M_CHECK(bs_write(h.file[0], buf, 8192, 0) == 8192);
	M_CHECK(bs_write(h.file[0], buf, 8192, 12288) == 8192);
	n = bs_wb_collect(h.file[0], &pos, INT64_MAX, runs, 4, 8192 + 1);
	for (int i = 0; i < n; i++)
		total += runs[i].len;
	if (n != 1)
		fprintf(stderr, "collect with max_bytes 8193: %d runs, %zu bytes\n", n, total);
	for (int i = 0; i < n; i++)
		bs_wb_complete(h.file[0], &runs[i], -EIO);
	M_CHECK(n == 1 && total == 8192);
	/* The first run alone may be larger than max_bytes. */
	pos = 0;
	n = bs_wb_collect(h.file[0], &pos, INT64_MAX, runs, 4, 100);
	M_CHECK(n == 1 && runs[0].len == 8192);
	bs_wb_complete(h.file[0], &runs[0], -EIO);
	h_teardown(&h);
}

/*
 * bs_wb_collect: "*@pos is advanced ... (to @end when nothing is left)",
 * also when @end is past the file size.
 */
static void case_collect_pos_end(void)
{
	struct bs_wb_run runs[4];
	struct hctx h;
	off_t pos = 0;

	h_setup(&h, 4096, 65536, 1 << 20, "page", "fixed", 100, 0);
	M_CHECK(bs_wb_collect(h.file[0], &pos, 50000, runs, 4, SIZE_MAX) == 0);
	if (pos != 50000)
		fprintf(stderr, "nothing dirty, end 50000, size 100: pos %lld\n", (long long)pos);
	M_CHECK(pos == 50000);
	h_teardown(&h);
}

/*
 * Punching (or zeroing with KEEP_SIZE) the dirty tail of an extending
 * write: after a full writeback the backing file must still have the size
 * the cache reports, or the size is lost once the cache forgets the file.
 */
static void case_punch_dirty_tail_size(void)
{
	static const int modes[] = {
		FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
	};

	for (int m = 0; m < 2; m++) {
		struct hctx h;
		char buf[8192];

		h_setup(&h, 4096, 65536, 1 << 20, "page", "fixed", 0, 0);
		memset(buf, 'p', sizeof(buf));
		M_CHECK(bs_write(h.file[0], buf, sizeof(buf), 0) == sizeof(buf));
		M_CHECK(bs_fallocate(h.file[0], modes[m], 4096, 4096) == 0);
		M_CHECK(bs_file_size(h.file[0]) == 8192);
		h_sync(&h, 0);
		M_CHECK(!bs_file_has_held(h.file[0]));
		if (h.mem[0].len != 8192)
			fprintf(stderr, "mode %#x: cache size 8192, backing size after writeback %zu\n",
				modes[m], h.mem[0].len);
		M_CHECK(h.mem[0].len == 8192);
		h_teardown(&h);
	}
}

/*
 * A punch the backing store refuses: every byte of the range then reads
 * as before or as zero, never as older bytes the backing store still has
 * under data written since (and not yet written back).
 */
static void case_failed_punch(void)
{
	static const uint32_t fsizes[] = { 16384, 65536 };

	for (int i = 0; i < 2; i++) {
		struct hctx h;
		char buf[16384], out[16384];

		h_setup(&h, 4096, fsizes[i], 1 << 20, "page", "fixed", 16384, 0);
		memset(h.mem[0].data, 'A', 16384);
		memset(buf, 'B', sizeof(buf));
		M_CHECK(bs_write(h.file[0], buf, sizeof(buf), 0) == sizeof(buf));
		h.mem[0].fail_fallocate = -EIO;
		M_CHECK(bs_fallocate(h.file[0], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				     0, 16384) == -EIO);
		M_CHECK(bs_read(h.file[0], NULL, out, sizeof(out), 0) == sizeof(out));
		for (size_t k = 0; k < sizeof(out); k++) {
			if (out[k] != 'B' && out[k] != 0) {
				fprintf(stderr, "folio %u: byte %zu reads %#x after a failed punch (written 'B', backing 'A')\n",
					fsizes[i], k, out[k]);
				M_CHECK(out[k] == 'B' || out[k] == 0);
			}
		}
		h_teardown(&h);
	}
}

/* Full writeback of @file (every run succeeding) into @mem. */
static void wb_all(struct bs_file *file, struct mem_backing *mem)
{
	struct bs_wb_run runs[MAX_RUNS];
	off_t pos = 0;
	int n;

	while ((n = bs_wb_collect(file, &pos, INT64_MAX, runs, MAX_RUNS, SIZE_MAX)) > 0) {
		for (int k = 0; k < n; k++) {
			mem_backing_write(mem, runs[k].data, runs[k].len, runs[k].off);
			bs_wb_complete(file, &runs[k], 0);
		}
	}
}

static int nc_syncs;

/* Reclaim found nothing clean: write back and sync the one file of case_unsynced. */
static void need_clean_sync(void *arg)
{
	struct hctx *h = arg;

	nc_syncs++;
	wb_all(h->file[0], &h->mem[0]);
	bs_sync_end(h->file[0], bs_sync_begin(h->file[0]), 0);
}

/*
 * Blocks written back stay pinned (unsynced, not charged) until a sync
 * that began after their write succeeds; a failed sync makes them dirty
 * again, so that nothing is known durable that was not synced
 * (fsyncgate).  A folio written again after the sync began stays
 * unsynced.  Punched blocks forget the state.  Reclaim that finds only
 * unsynced folios asks need_clean, which syncs.
 */
static void case_unsynced(void)
{
	static const struct bs_cache_ops ops = { .need_clean = need_clean_sync };
	struct bs_config cfg = {
		.block_size = 4096, .folio_size = 65536, .cache_size = 4ull * 65536,
		.account = bs_account_policy_find("page"), .size = bs_size_policy_find("fixed"),
	};
	char buf[3 * F64K];
	struct bs_stats st;
	struct hctx h;
	uint64_t token;

	memset(&h, 0, sizeof(h));
	memset(buf, 'u', sizeof(buf));
	M_CHECK(bs_cache_create(&cfg, &ops, &h, &h.cache) == 0);
	for (int i = 0; i < 2; i++)
		M_CHECK(bs_file_create(h.cache, &mem_backing_ops, &h.mem[i], 0, &h.file[i]) == 0);
	/* Folio 0: two blocks; folio 1: one block. */
	M_CHECK(bs_write(h.file[0], buf, 8192, 0) == 8192);
	M_CHECK(bs_write(h.file[0], buf, 4096, 65536) == 4096);
	wb_all(h.file[0], &h.mem[0]);
	bs_cache_stats(h.cache, &st);
	M_CHECK(st.dirty_bytes_exact == 0 && st.charged_bytes == 0);
	M_CHECK(st.unsynced_bytes == 2 * F64K && st.pinned_bytes == 2 * F64K);
	M_CHECK(bs_file_has_unsynced(h.file[0]) && !bs_file_has_unsynced(h.file[1]));
	M_CHECK(bs_cache_check(h.cache) == 0);

	/* Folio 1 is written again while a sync runs: it stays unsynced. */
	token = bs_sync_begin(h.file[0]);
	M_CHECK(bs_write(h.file[0], buf, 4096, 65536 + 8192) == 4096);
	wb_all(h.file[0], &h.mem[0]);
	bs_sync_end(h.file[0], token, 0);
	bs_cache_stats(h.cache, &st);
	M_CHECK(st.unsynced_bytes == 65536 && st.pinned_bytes == 65536);
	M_CHECK(bs_cache_check(h.cache) == 0);

	/* A failed sync: both of folio 1's unsynced blocks are dirty again. */
	token = bs_sync_begin(h.file[0]);
	bs_sync_end(h.file[0], token, -EIO);
	bs_cache_stats(h.cache, &st);
	M_CHECK(st.unsynced_bytes == 0 && st.pinned_bytes == 65536);
	M_CHECK(st.dirty_bytes_exact == 2 * (size_t)4096 && st.charged_bytes == 2 * (size_t)4096);
	M_CHECK(!bs_file_has_unsynced(h.file[0]) && bs_file_has_held(h.file[0]));
	M_CHECK(bs_cache_check(h.cache) == 0);
	/* Written and synced again: nothing pinned. */
	wb_all(h.file[0], &h.mem[0]);
	bs_sync_end(h.file[0], bs_sync_begin(h.file[0]), 0);
	bs_cache_stats(h.cache, &st);
	M_CHECK(st.pinned_bytes == 0 && st.dirty_bytes_exact == 0 && st.unsynced_bytes == 0);

	/* A punch of a written block forgets it; the rest of the folio stays. */
	M_CHECK(bs_write(h.file[0], buf, 8192, 0) == 8192);
	wb_all(h.file[0], &h.mem[0]);
	M_CHECK(bs_fallocate(h.file[0], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			     4096, 4096) == 0);
	bs_cache_stats(h.cache, &st);
	M_CHECK(st.unsynced_bytes == 65536);
	M_CHECK(bs_cache_check(h.cache) == 0);
	M_CHECK(bs_truncate(h.file[0], 0) == 0);
	bs_cache_stats(h.cache, &st);
	M_CHECK(st.unsynced_bytes == 0 && st.pinned_bytes == 0);

	/*
	 * Four folios written back, none synced: the cache is full of pinned
	 * memory.  A fifth folio needs reclaim, which must get a sync.
	 */
	nc_syncs = 0;
	M_CHECK(bs_write(h.file[0], buf, 3 * F64K, 0) == 3 * F64K);
	M_CHECK(bs_write(h.file[0], buf, 65536, 3 * F64K) == 65536);
	wb_all(h.file[0], &h.mem[0]);
	bs_cache_stats(h.cache, &st);
	M_CHECK(st.unsynced_bytes == 4 * F64K && st.cache_bytes == 4 * F64K);
	M_CHECK(bs_write(h.file[1], buf, 100, 0) == 100);
	bs_cache_stats(h.cache, &st);
	M_CHECK(nc_syncs >= 1 && st.cache_bytes <= 4 * F64K);
	M_CHECK(st.unsynced_bytes == 0);
	M_CHECK(memcmp(h.mem[0].data, buf, 4 * F64K > sizeof(buf) ? sizeof(buf) : 4 * F64K) == 0);
	h_teardown(&h);
}

struct hcase {
	const char *name;
	void (*fn)(void);
};

static const struct hcase hcases[] = {
	{ "eof_zero_fill", case_eof_zero_fill },
	{ "partial_block_read", case_partial_block_read },
	{ "alternate_blocks", case_alternate_blocks },
	{ "charge_512_folios", case_charge_512_folios },
	{ "writeback_counters", case_writeback_counters },
	{ "wb_budget", case_wb_budget },
	{ "arguments", case_arguments },
	{ "failed_truncate", case_failed_truncate },
	{ "truncate_zeroes", case_truncate_zeroes },
	{ "failed_writeback", case_failed_writeback },
	{ "redirty_during_writeback", case_redirty_during_writeback },
	{ "fixed_size", case_fixed_size },
	{ "destroy_dirty", case_destroy_dirty },
	{ "over_budget", case_over_budget },
	{ "huge_offset", case_huge_offset },
	{ "sparse_tags", case_sparse_tags },
	{ "collect_modes", case_collect_modes },
	{ "collect_max_bytes", case_collect_max_bytes },
	{ "collect_pos_end", case_collect_pos_end },
	{ "punch_dirty_tail_size", case_punch_dirty_tail_size },
	{ "failed_punch", case_failed_punch },
	{ "unsynced", case_unsynced },
};

#define NR_HCASES (int)(sizeof(hcases) / sizeof(hcases[0]))

static void run_hcase(const struct hcase *hc)
{
	snprintf(cur_case, sizeof(cur_case), "%s", hc->name);
	cur_seed = 0;
	cur_step = 0;
	cur_op = hc->name;
	hc->fn();
}

/* ---- driver: one child per job, a few at a time ---- */

#define MAX_SEEDS 64

/*
 * A hand-written case, or the seeds of one combination (in one process:
 * the buffers of one seed are reused by the next, not faulted in again).
 */
struct job {
	const struct hcase *hc;
	struct combo combo;
	unsigned long long seeds[MAX_SEEDS];
	int nseeds;
	int steps;
	pid_t pid;
	char name[96];
};

static void run_job(const struct job *j)
{
	if (j->hc)
		run_hcase(j->hc);
	for (int i = 0; i < j->nseeds; i++)
		run_combo(&j->combo, j->seeds[i], j->steps);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run_jobs(struct job *jobs, int njobs, bool nofork)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int parallel = ncpu > 1 ? (int)(ncpu < 8 ? ncpu : 8) : 1;
	int next = 0, running = 0, failed = 0;

	if (nofork) {
		for (int i = 0; i < njobs; i++)
			run_job(&jobs[i]);
		return 0;
	}
	fflush(stdout);
	fflush(stderr);
	while (next < njobs || running) {
		int status;
		pid_t pid;

		while (running < parallel && next < njobs) {
			pid = fork();
			T_CHECK(pid >= 0);
			if (pid == 0) {
				run_job(&jobs[next]);
				fflush(stdout);
				_exit(T_EXIT_PASS);
			}
			jobs[next++].pid = pid;
			running++;
		}
		pid = wait(&status);
		T_CHECK(pid > 0);
		running--;
		for (int i = 0; i < next; i++) {
			if (jobs[i].pid != pid)
				continue;
			if (!WIFEXITED(status) || WEXITSTATUS(status) != T_EXIT_PASS) {
				failed++;
				if (WIFSIGNALED(status))
					fprintf(stderr, "FAIL %s: killed by signal %d\n", jobs[i].name,
						WTERMSIG(status));
				else
					fprintf(stderr, "FAIL %s: exit %d\n", jobs[i].name,
						WEXITSTATUS(status));
				fprintf(stderr, "  replay: BS_TEST_CASE=%s\n", jobs[i].name);
			}
		}
	}
	return failed;
}

int main(void)
{
	const char *env_case = getenv("BS_TEST_CASE");
	const char *env_seed = getenv("BS_TEST_SEED");
	const char *env_steps = getenv("BS_TEST_STEPS");
	bool nofork = getenv("BS_TEST_NOFORK") != NULL;
	struct combo combos[MAX_COMBOS];
	int ncombos = all_combos(combos, MAX_COMBOS);
	const char *env_seeds = getenv("BS_TEST_SEEDS");
	int seeds = env_seeds ? atoi(env_seeds) : SANITIZED ? 1 : 3, njobs = 0, failed;

	struct job *jobs;
	double t0 = now();

	T_CHECK(ncombos <= MAX_COMBOS);
	if (seeds < 1)
		seeds = 1;
	if (seeds > MAX_SEEDS)
		seeds = MAX_SEEDS;
	/*
	 * Keep freed folio memory in the heap: every 2 MiB folio would
	 * otherwise be a fresh mmap, and page faults would be most of the
	 * run time.
	 */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	jobs = calloc((size_t)(NR_HCASES + ncombos), sizeof(*jobs));
	T_CHECK(jobs);
	for (int i = 0; i < NR_HCASES; i++) {
		struct job *j = &jobs[njobs];

		if (env_case && strcmp(env_case, hcases[i].name) != 0)
			continue;
		j->hc = &hcases[i];
		snprintf(j->name, sizeof(j->name), "%s", hcases[i].name);
		njobs++;
	}
	for (int c = 0; c < ncombos; c++) {
		struct job *j = &jobs[njobs];

		combo_name(&combos[c], j->name, sizeof(j->name));
		if (env_case && strcmp(env_case, j->name) != 0)
			continue;
		j->combo = combos[c];
		j->steps = env_steps ? atoi(env_steps) : default_steps(&combos[c]);
		if (env_seed)
			j->seeds[j->nseeds++] = strtoull(env_seed, NULL, 0);
		for (int s = 1; !env_seed && s <= seeds; s++)
			j->seeds[j->nseeds++] = (unsigned long long)c * 1000 + (unsigned long long)s;
		njobs++;
	}
	if (!njobs) {
		fprintf(stderr, "BS_TEST_CASE=%s: no such case\n", env_case ? env_case : "");
		return T_EXIT_FAIL;
	}
	failed = run_jobs(jobs, njobs, nofork);
	printf("%d jobs (of %d hand-written cases and %d combinations x %d seeds), %d failed, %.1f s\n",
	       njobs, NR_HCASES, ncombos, seeds, failed, now() - t0);
	free(jobs);
	return failed ? T_EXIT_FAIL : T_EXIT_PASS;
}
