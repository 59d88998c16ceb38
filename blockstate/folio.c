// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * folio.c - one folio: its memory, references, block state and price.
 *
 * Every change of a folio's held blocks (dirty or under writeback) goes
 * through reprice(): it recounts the held pages of the blocks touched,
 * asks the accounting policy for the folio's new price, and moves the
 * difference into the cache's charge.  The price of each folio is kept in
 * the folio, so discharge is always exactly what was charged.
 */
#include "bs_i.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bs_folio *bs_folio_alloc_touch(struct bs_file *file, off_t start, uint32_t size,
				      uint32_t touch)
{
	struct bs_cache *cache = file->cache;
	uint32_t nr_blocks = size >> cache->blk_shift;
	size_t longs = BS_BITS_TO_LONGS(nr_blocks);
	size_t bits_end = sizeof(struct bs_folio) + 4 * longs * sizeof(long);
	bool sync = !cache->cfg.one_thread;
	struct bs_folio *folio = calloc(1, bits_end + (sync ? sizeof(struct bs_folio_sync) : 0));

	if (!folio)
		return NULL;
	folio->data = bs_pool_take(cache, size, touch);
	if (!folio->data) {
		free(folio);
		return NULL;
	}
	folio->file = file;
	folio->start = start;
	folio->size = size;
	folio->nr_blocks = nr_blocks;
	folio->uptodate = folio->bits;
	folio->dirty = folio->bits + longs;
	folio->writeback = folio->bits + 2 * longs;
	folio->unsynced = folio->bits + 3 * longs;
	atomic_init(&folio->refs, 1);
	atomic_init(&folio->referenced, false);
	atomic_init(&folio->active, false);
	if (sync) {	/* bits_end is a multiple of sizeof(long), enough for both */
		folio->sync = (struct bs_folio_sync *)((char *)folio + bits_end);
		pthread_mutex_init(&folio->sync->lock, NULL);
		pthread_cond_init(&folio->sync->wb_done, NULL);
	}
	atomic_fetch_add(&cache->cache_bytes, size);
	atomic_fetch_add(&cache->nr_folios, 1);
	atomic_fetch_add(&cache->folios_order[__builtin_ctz(size) - BS_PAGE_SHIFT], 1);
	atomic_fetch_add(&cache->folios_made_order[__builtin_ctz(size) - BS_PAGE_SHIFT], 1);
	return folio;
}

struct bs_folio *bs_folio_alloc(struct bs_file *file, off_t start, uint32_t size)
{
	return bs_folio_alloc_touch(file, start, size, size);
}

void bs_folio_get(struct bs_folio *folio)
{
	atomic_fetch_add(&folio->refs, 1);
}

static void folio_free(struct bs_folio *folio)
{
	struct bs_cache *cache = folio->file->cache;

	/* Held state was discharged when the blocks were dropped. */
	if (BS_DEBUG && (folio->held_blocks || folio->price || folio->unsynced_blocks ||
			 folio->dirty_price || folio->wb_runs || folio->rd_runs))
		abort();
	atomic_fetch_sub(&cache->cache_bytes, folio->size);
	atomic_fetch_sub(&cache->nr_folios, 1);
	atomic_fetch_sub(&cache->folios_order[__builtin_ctz(folio->size) - BS_PAGE_SHIFT], 1);
	if (folio->sync) {
		pthread_cond_destroy(&folio->sync->wb_done);
		pthread_mutex_destroy(&folio->sync->lock);
	}
	bs_pool_put(cache, folio->data, folio->size);
	free(folio);
}

void bs_folio_put(struct bs_folio *folio)
{
	if (atomic_fetch_sub(&folio->refs, 1) == 1)
		folio_free(folio);
}

/* Wake whoever waits for the folio's I/O.  Context: folio lock held. */
static void folio_wake(struct bs_folio *folio)
{
	if (folio->sync)
		pthread_cond_broadcast(&folio->sync->wb_done);
}

uint32_t bs_folio_first_blk(const struct bs_folio *folio, uint32_t poff)
{
	return poff >> folio->file->cache->blk_shift;
}

uint32_t bs_folio_end_blk(const struct bs_folio *folio, uint32_t poff, uint32_t plen)
{
	unsigned int shift = folio->file->cache->blk_shift;

	return (uint32_t)(((uint64_t)poff + plen + (1u << shift) - 1) >> shift);
}

/* Pages per block when blocks are at least a page. */
static uint32_t pages_per_block(const struct bs_folio *folio)
{
	unsigned int shift = folio->file->cache->blk_shift;

	return shift >= BS_PAGE_SHIFT ? 1u << (shift - BS_PAGE_SHIFT) : 1;
}

/* Held counts of the pages/blocks around [first_blk, end_blk). */
struct held_span {
	uint32_t blocks;
	uint32_t pages;
};

static void span_range(const struct bs_folio *folio, uint32_t *first_blk,
		       uint32_t *end_blk)
{
	unsigned int shift = folio->file->cache->blk_shift;

	if (shift < BS_PAGE_SHIFT) {
		uint32_t per_page = 1u << (BS_PAGE_SHIFT - shift);

		*first_blk -= *first_blk % per_page;
		*end_blk = (*end_blk + per_page - 1) / per_page * per_page;
		if (*end_blk > folio->nr_blocks)
			*end_blk = folio->nr_blocks;
	}
}

/*
 * Blocks set in @map | @or (@or may be NULL) among [first_blk, end_blk),
 * and the 4 KiB pages overlapping the range that hold one of them.
 */
static struct held_span count_span(const struct bs_folio *folio, const unsigned long *map,
				   const unsigned long *or, uint32_t first_blk,
				   uint32_t end_blk)
{
	unsigned int shift = folio->file->cache->blk_shift;
	struct held_span s;

	s.blocks = or ? bs_bits_count_or(map, or, first_blk, end_blk)
		      : bs_bits_count(map, first_blk, end_blk);
	if (shift >= BS_PAGE_SHIFT) {
		s.pages = s.blocks * pages_per_block(folio);
	} else {
		uint32_t per_page = 1u << (BS_PAGE_SHIFT - shift);

		s.pages = 0;
		for (uint32_t blk = first_blk - first_blk % per_page; blk < end_blk;
		     blk += per_page)
			s.pages += bs_bits_next_set(map, or, blk, blk + per_page) < blk + per_page;
	}
	return s;
}

/* Blocks dirty or under writeback (held), and their pages. */
static struct held_span held_span(const struct bs_folio *folio, uint32_t first_blk,
				  uint32_t end_blk)
{
	return count_span(folio, folio->dirty, folio->writeback, first_blk, end_blk);
}

/*
 * Charged by this thread since bs_thread_dirtied_take(): only writes raise
 * a price, and a write runs on its caller's thread, so this is the
 * writer's own share (current->nr_dirtied in the kernel).
 */
static __thread uint64_t thread_dirtied;
/*
 * Memory of the folios this thread's writes turned from clean into pinned
 * since the last bs_thread_dirtied_take(), and what that call latched: the
 * pinned-memory limit checks a writer by what it pins, which under the
 * page or block charge is up to a folio per block-sized write.  Latched,
 * so the count goes with the charge of the same writes (callers take the
 * charge before a write, dropping what was left, and after it), and is
 * replaced, not summed, when nobody took it.
 */
static __thread uint64_t thread_pinned, thread_pinned_taken;

uint64_t bs_thread_dirtied_take(void)
{
	uint64_t n = thread_dirtied;

	thread_dirtied = 0;
	thread_pinned_taken = thread_pinned;
	thread_pinned = 0;
	return n;
}

uint64_t bs_thread_pinned_take(void)
{
	uint64_t n = thread_pinned_taken;

	thread_pinned_taken = 0;
	return n;
}

/* The accounting policy's price of a folio holding @s. */
static uint64_t price_of(const struct bs_folio *folio, struct held_span s)
{
	const struct bs_cache *cache = folio->file->cache;
	const struct bs_policy_inst *inst = atomic_load(&cache->account);
	struct bs_held_state st = {
		.folio_size = folio->size,
		.block_size = cache->cfg.block_size,
		.held_blocks = s.blocks,
		.held_pages = s.pages,
		.params = inst->params,
	};

	return s.blocks ? inst->account->price(&st) : 0;
}

/*
 * Price of the blocks that are dirty again while under writeback: the
 * policy's price of a folio holding just those.  Linux counts such a
 * folio as dirtied a second time (it is written twice), and so do
 * nr_dirtied and nr_written; the charge, which is for held memory, does
 * not.
 */
static uint64_t redirty_price(const struct bs_folio *folio)
{
	unsigned long both[BS_BITS_TO_LONGS(BS_MAX_BLOCKS_PER_FOLIO)];

	if (!folio->wb_blocks)
		return 0;
	for (size_t i = 0; i < BS_BITS_TO_LONGS(folio->nr_blocks); i++)
		both[i] = folio->dirty[i] & folio->writeback[i];
	return price_of(folio, count_span(folio, both, NULL, 0, folio->nr_blocks));
}

/*
 * After a change of the dirty or writeback bits: count re-dirtying as
 * dirtied, and its end as written when @completed (the earlier contents
 * reached the backing store).  Context: folio lock held.
 */
static void update_redirty(struct bs_folio *folio, bool completed)
{
	struct bs_cache *cache = folio->file->cache;
	uint64_t price = redirty_price(folio);

	if (price > folio->redirty_price) {
		atomic_fetch_add(&cache->dirtied_bytes, price - folio->redirty_price);
		thread_dirtied += price - folio->redirty_price;
	} else if (price < folio->redirty_price && completed)
		atomic_fetch_add(&cache->written_bytes, folio->redirty_price - price);
	folio->redirty_price = price;
}

static uint64_t folio_price(const struct bs_folio *folio)
{
	return price_of(folio, (struct held_span){ folio->held_blocks, folio->held_pages });
}

static uint64_t dirty_part_price(const struct bs_folio *folio)
{
	return price_of(folio, (struct held_span){ folio->dirty_blocks, folio->dirty_pages });
}

/*
 * Price the folio's dirty part again by the policy in force (every change
 * of the dirty bits does it, and a switch of policy).  Context: folio
 * lock held.
 */
static void reprice_dirty(struct bs_folio *folio)
{
	struct bs_cache *cache = folio->file->cache;
	/*
	 * The generation first: a price stamped with an even generation
	 * that is still current was made by the policy of that generation
	 * (a switch bumps it before publishing its policy).
	 */
	uint64_t gen = atomic_load(&cache->account_switching);
	uint64_t price = dirty_part_price(folio);

	atomic_fetch_add(&cache->dirty_charged_bytes,
			 (int64_t)price - (int64_t)folio->dirty_price);
	folio->dirty_price = price;
	folio->dirty_gen = gen;
}

void bs_folio_reprice(struct bs_folio *folio)
{
	struct bs_cache *cache = folio->file->cache;
	uint64_t price = folio_price(folio);

	if (price > folio->price)
		atomic_fetch_add(&cache->charged_bytes, price - folio->price);
	else
		atomic_fetch_sub(&cache->charged_bytes, folio->price - price);
	folio->price = price;
	reprice_dirty(folio);
}

/* Dirty blocks (not under writeback) of [first_blk, end_blk), and their pages. */
static struct held_span dirty_span(const struct bs_folio *folio, uint32_t first_blk,
				   uint32_t end_blk)
{
	return count_span(folio, folio->dirty, NULL, first_blk, end_blk);
}

/*
 * Apply a change of the dirty bits within a span from @before to @after,
 * and reprice the dirty part.  Context: folio lock held.
 */
static void move_dirty(struct bs_folio *folio, struct held_span before, struct held_span after)
{
	folio->dirty_blocks += after.blocks - before.blocks;
	folio->dirty_pages += after.pages - before.pages;
	if (after.blocks != before.blocks || after.pages != before.pages ||
	    folio->dirty_gen != atomic_load(&folio->file->cache->account_switching))
		reprice_dirty(folio);
}

/*
 * The folio became pinned (held or unsynced) or stopped being: move its
 * memory in or out of pinned_bytes.  Context: folio lock held.
 */
static void update_pinned(struct bs_folio *folio, bool was_pinned)
{
	struct bs_cache *cache = folio->file->cache;

	if (!was_pinned && bs_folio_pinned(folio)) {
		atomic_fetch_add(&cache->pinned_bytes, folio->size);
	} else if (was_pinned && !bs_folio_pinned(folio)) {
		atomic_fetch_sub(&cache->pinned_bytes, folio->size);
		atomic_fetch_add(&cache->unpinned_bytes, folio->size);
	}
}

/*
 * Apply the change in held counts from @before to @after and reprice.
 * Context: folio lock held.
 */
static void reprice(struct bs_folio *folio, struct held_span before,
		    struct held_span after)
{
	struct bs_cache *cache = folio->file->cache;
	bool was_held = folio->held_blocks != 0, was_pinned = bs_folio_pinned(folio);
	uint64_t old_price = folio->price;
	int64_t delta_blocks = (int64_t)after.blocks - before.blocks;

	folio->held_blocks += after.blocks - before.blocks;
	folio->held_pages += after.pages - before.pages;
	folio->price = folio_price(folio);
	if (delta_blocks)
		atomic_fetch_add(&cache->held_bytes,
				 (uint64_t)(delta_blocks * (int64_t)cache->cfg.block_size));
	if (folio->price > old_price) {
		atomic_fetch_add(&cache->charged_bytes, folio->price - old_price);
		atomic_fetch_add(&cache->dirtied_bytes, folio->price - old_price);
		thread_dirtied += folio->price - old_price;
	} else if (folio->price < old_price) {
		atomic_fetch_sub(&cache->charged_bytes, old_price - folio->price);
	}
	if (!was_held && folio->held_blocks) {
		atomic_fetch_add(&folio->file->held_folios, 1);
		folio->tag_stale = true;
	} else if (was_held && !folio->held_blocks) {
		atomic_fetch_sub(&folio->file->held_folios, 1);
		folio->tag_stale = true;
	}
	update_pinned(folio, was_pinned);
}

/*
 * Debug builds: after every change, the folio's counters must agree with
 * its bitmaps and its price with the policy.  The cache-wide sums are
 * checked at quiescent points by bs_cache_check().
 */
static void folio_check(const struct bs_folio *folio)
{
	size_t longs = BS_BITS_TO_LONGS(folio->nr_blocks);
	uint32_t blocks, pages;
	bool held_not_uptodate = false;

	for (size_t i = 0; i < longs; i++)
		held_not_uptodate |= ((folio->dirty[i] | folio->writeback[i] |
				       folio->unsynced[i]) & ~folio->uptodate[i]) != 0;
	bs_folio_count_held(folio, &blocks, &pages);
	{
		struct held_span d = dirty_span(folio, 0, folio->nr_blocks);
		/* The price first: if a switch began since, the generation shows it. */
		uint64_t price = dirty_part_price(folio);
		bool current = !(folio->dirty_gen & 1) &&
			folio->dirty_gen == atomic_load(&folio->file->cache->account_switching);

		if (d.blocks != folio->dirty_blocks || d.pages != folio->dirty_pages ||
		    (current && folio->dirty_price != price)) {
			fprintf(stderr, "blockstate: folio at %lld: dirty part %u/%u blocks, %u/%u pages\n",
				(long long)folio->start, folio->dirty_blocks, d.blocks,
				folio->dirty_pages, d.pages);
			abort();
		}
	}
	if (held_not_uptodate || blocks != folio->held_blocks ||
	    pages != folio->held_pages ||
	    (folio->price != folio_price(folio) && !bs_account_switching(folio->file->cache)) ||
	    bs_bits_count(folio->writeback, 0, folio->nr_blocks) != folio->wb_blocks ||
	    bs_bits_count(folio->unsynced, 0, folio->nr_blocks) != folio->unsynced_blocks) {
		fprintf(stderr, "blockstate: folio at %lld: held %u/%u blocks, %u/%u pages, price %llu%s\n",
			(long long)folio->start, folio->held_blocks, blocks, folio->held_pages,
			pages, (unsigned long long)folio->price,
			held_not_uptodate ? ", a held or unsynced block is not uptodate" : "");
		abort();
	}
}

/*
 * Change bits of one map over [first_blk, end_blk), repricing; @completed:
 * writeback bits cleared because their write succeeded.
 */
static void change_held(struct bs_folio *folio, unsigned long *map, bool set,
			uint32_t first_blk, uint32_t end_blk, bool completed)
{
	uint32_t sfirst = first_blk, send = end_blk;
	struct held_span before, after, dbefore = { 0, 0 };

	span_range(folio, &sfirst, &send);
	before = held_span(folio, sfirst, send);
	if (map == folio->dirty)
		dbefore = dirty_span(folio, sfirst, send);
	if (set)
		bs_bits_set(map, first_blk, end_blk);
	else
		bs_bits_clear(map, first_blk, end_blk);
	after = held_span(folio, sfirst, send);
	reprice(folio, before, after);
	if (map == folio->dirty)
		move_dirty(folio, dbefore, dirty_span(folio, sfirst, send));
	if (folio->wb_blocks || folio->redirty_price)
		update_redirty(folio, completed);
	if (BS_DEBUG)
		folio_check(folio);
}

void bs_folio_set_dirty(struct bs_folio *folio, uint32_t first_blk, uint32_t end_blk)
{
	bool was_pinned;

	bs_bits_set(folio->uptodate, first_blk, end_blk);
	/* Dirtied again: not to be rotated for reclaim (folio_mark_dirty()). */
	atomic_store(&folio->reclaim, false);
	/* Rewriting dirty blocks (the common case) changes no price. */
	if (bs_bits_count(folio->dirty, first_blk, end_blk) == end_blk - first_blk)
		return;
	was_pinned = bs_folio_pinned(folio);
	if (folio->held_blocks == folio->wb_blocks)	/* it was clean: now dirty */
		FOLIOFS_TP(writeback_dirty_folio, .ino = folio->file->ino,
			   .index = (unsigned long)folio->start >> BS_PAGE_SHIFT);
	change_held(folio, folio->dirty, true, first_blk, end_blk, false);
	/* Only writes set dirty bits on a folio that was not pinned. */
	if (!was_pinned)
		thread_pinned += folio->size;
}

void bs_folio_clear_dirty(struct bs_folio *folio, uint32_t first_blk, uint32_t end_blk)
{
	change_held(folio, folio->dirty, false, first_blk, end_blk, false);
}

void bs_folio_start_writeback(struct bs_folio *folio, uint32_t first_blk, uint32_t end_blk)
{
	struct bs_cache *cache = folio->file->cache;
	uint32_t n = bs_bits_count(folio->dirty, first_blk, end_blk);
	uint32_t sfirst = first_blk, send = end_blk;
	struct held_span dbefore;

	span_range(folio, &sfirst, &send);
	dbefore = dirty_span(folio, sfirst, send);
	/* Held state is unchanged: each block moves from one map to the other. */
	bs_bits_or_range(folio->writeback, folio->dirty, first_blk, end_blk);
	bs_bits_clear(folio->dirty, first_blk, end_blk);
	folio->wb_blocks += n;
	/*
	 * The folio is under writeback from its first run to the end of its
	 * last, as the kernel's folio is from folio_start_writeback() to
	 * folio_end_writeback(): NR_WRITEBACK counts all of its pages,
	 * however few of its blocks are being written.
	 */
	if (!folio->wb_runs++)
		atomic_fetch_add(&cache->wb_folio_bytes, folio->size);
	atomic_fetch_add(&cache->wb_bytes, (uint64_t)n << cache->blk_shift);
	move_dirty(folio, dbefore, dirty_span(folio, sfirst, send));
	if (BS_DEBUG)
		folio_check(folio);
}

void bs_folio_end_writeback(struct bs_folio *folio, uint32_t first_blk,
			    uint32_t end_blk, bool failed)
{
	struct bs_cache *cache = folio->file->cache;
	uint32_t n = bs_bits_count(folio->writeback, first_blk, end_blk);
	uint64_t old_price = folio->price;

	if (failed) {
		uint32_t sfirst = first_blk, send = end_blk;
		struct held_span dbefore;

		span_range(folio, &sfirst, &send);
		dbefore = dirty_span(folio, sfirst, send);
		bs_bits_or_range(folio->dirty, folio->writeback, first_blk, end_blk);
		move_dirty(folio, dbefore, dirty_span(folio, sfirst, send));
	}
	folio->wb_blocks -= n;
	change_held(folio, folio->writeback, false, first_blk, end_blk, !failed);
	if (folio->price < old_price)
		atomic_fetch_add(&cache->written_bytes, old_price - folio->price);
	atomic_fetch_sub(&cache->wb_bytes, (uint64_t)n << cache->blk_shift);
	folio->wb_ok |= !failed;
	if (!--folio->wb_runs) {
		/*
		 * The kernel's WB_WRITTEN grows by the whole folio when its
		 * writeback ends (__folio_end_writeback), policy or not, and
		 * also when the write failed: Linux then drops the data as if
		 * written.  Here a failed write leaves its blocks dirty, to be
		 * written (and counted) again, so only a writeback that wrote
		 * something counts.
		 */
		atomic_fetch_sub(&cache->wb_folio_bytes, folio->size);
		if (folio->wb_ok)
			atomic_fetch_add(&cache->written_folio_bytes, folio->size);
		folio->wb_ok = false;
		/*
		 * Reclaim met it dirty and activated it: written, it goes to
		 * the inactive tail (folio_end_writeback() ->
		 * folio_rotate_reclaimable(), which passes a dirty folio by).
		 */
		if (atomic_exchange(&folio->reclaim, false) && !folio->dirty_blocks)
			folio->rotate = true;
		folio_wake(folio);
	}
}

/*
 * Set or clear unsynced bits [first_blk, end_blk), keeping the counts of
 * the file and the cache.  Context: folio lock held.
 */
static void change_unsynced(struct bs_folio *folio, bool set, uint32_t first_blk,
			    uint32_t end_blk)
{
	struct bs_file *file = folio->file;
	struct bs_cache *cache = file->cache;
	bool had = folio->unsynced_blocks != 0, was_pinned = bs_folio_pinned(folio);
	uint32_t before = bs_bits_count(folio->unsynced, first_blk, end_blk);

	if (set) {
		bs_bits_set(folio->unsynced, first_blk, end_blk);
		folio->unsynced_blocks += end_blk - first_blk - before;
		folio->sync_gen = atomic_load(&file->sync_gen);
	} else {
		bs_bits_clear(folio->unsynced, first_blk, end_blk);
		folio->unsynced_blocks -= before;
	}
	if (!had && folio->unsynced_blocks) {
		atomic_fetch_add(&file->unsynced_folios, 1);
		atomic_fetch_add(&file->unsynced_bytes, folio->size);
		atomic_fetch_add(&cache->unsynced_bytes, folio->size);
		folio->tag_stale = true;
	} else if (had && !folio->unsynced_blocks) {
		atomic_fetch_sub(&file->unsynced_folios, 1);
		atomic_fetch_sub(&file->unsynced_bytes, folio->size);
		atomic_fetch_sub(&cache->unsynced_bytes, folio->size);
		folio->tag_stale = true;
	}
	update_pinned(folio, was_pinned);
	if (BS_DEBUG)
		folio_check(folio);
}

void bs_folio_set_unsynced(struct bs_folio *folio, uint32_t first_blk, uint32_t end_blk)
{
	change_unsynced(folio, true, first_blk, end_blk);
}

void bs_folio_clear_unsynced(struct bs_folio *folio, uint32_t first_blk, uint32_t end_blk)
{
	if (folio->unsynced_blocks)
		change_unsynced(folio, false, first_blk, end_blk);
}

void bs_folio_redirty_unsynced(struct bs_folio *folio)
{
	uint32_t blk = 0, end = folio->nr_blocks;

	/* Dirty first: the folio stays pinned throughout. */
	while ((blk = bs_bits_next_set(folio->unsynced, NULL, blk, end)) < end) {
		uint32_t stop = bs_bits_next_clear(folio->unsynced, blk, end);

		bs_folio_set_dirty(folio, blk, stop);
		blk = stop;
	}
	bs_folio_clear_unsynced(folio, 0, end);
}

void bs_folio_sync_tags(struct bs_folio *folio)
{
	struct bs_index *idx = &folio->file->index;

	if (!folio->detached && folio->tagged != (folio->held_blocks != 0)) {
		folio->tagged = !folio->tagged;
		bs_index_tag(idx, folio, folio->tagged);
	}
	if (!folio->detached && folio->utagged != (folio->unsynced_blocks != 0)) {
		folio->utagged = !folio->utagged;
		bs_index_mark(idx, folio, BS_MARK_UNSYNCED, folio->utagged);
	}
	folio->tag_stale = false;
}

/*
 * Wait for the folio's I/O to end.  In a cache of one thread nobody else
 * can end it: a wait would never return, so it aborts instead.
 * Context: folio lock held.
 */
static void folio_wait(struct bs_folio *folio)
{
	if (!folio->sync) {
		fprintf(stderr, "blockstate: folio at %lld: a wait for I/O in a cache of one thread\n",
			(long long)folio->start);
		abort();
	}
	pthread_cond_wait(&folio->sync->wb_done, &folio->sync->lock);
}

void bs_folio_wait_io(struct bs_folio *folio)
{
	while (folio->wb_runs || folio->rd_runs) {
		if (folio->wb_runs)
			FOLIOFS_TP(folio_wait_writeback, .ino = folio->file->ino,
				   .index = (unsigned long)folio->start >> BS_PAGE_SHIFT);
		folio_wait(folio);
	}
}

void bs_folio_wait_reads(struct bs_folio *folio)
{
	while (folio->rd_runs)
		folio_wait(folio);
}

void bs_folio_end_read(struct bs_folio *folio)
{
	if (!--folio->rd_runs)
		folio_wake(folio);
}

void bs_folio_unlock(struct bs_folio *folio)
{
	struct bs_file *file = folio->file;
	bool stale = folio->tag_stale;

	bs_folio_unlock_raw(folio);
	if (!stale)
		return;
	/* index_lock before the folio lock (lock order); read is enough. */
	pthread_rwlock_rdlock(&file->index_lock);
	bs_folio_lock(folio);
	if (folio->tag_stale)
		bs_folio_sync_tags(folio);
	bs_folio_unlock_raw(folio);
	pthread_rwlock_unlock(&file->index_lock);
}

void bs_folio_count_held(const struct bs_folio *folio, uint32_t *blocks, uint32_t *pages)
{
	struct held_span s = held_span(folio, 0, folio->nr_blocks);

	*blocks = s.blocks;
	*pages = s.pages;
}
