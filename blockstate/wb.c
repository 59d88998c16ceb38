// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wb.c - handing dirty runs to the writeback layer and taking them back.
 *
 * A run is a maximal stretch of dirty blocks within one folio (as iomap's
 * find_dirty_range finds them).  Collecting moves its blocks from dirty
 * to writeback; the folio stays referenced until the run completes.
 * Held state (dirty or writeback) does not change while a run is in
 * flight, so the charge stays until completion discharges it.
 *
 * A run written successfully leaves its blocks unsynced: clean, not
 * charged, but pinned until the backing file is synced
 * (bs_sync_begin()/bs_sync_end()), and dirty again if that sync fails, so
 * that a later sync that succeeds has rewritten them (the lesson of
 * fsyncgate: after a failed fsync, Linux may have dropped the pages).
 */
#include "bs_i.h"

#include <stdint.h>
#include <string.h>

enum collected { COLLECT_NONE, COLLECT_RUN, COLLECT_PAUSED };

/*
 * Collect the next run of @folio at or after @pos: COLLECT_RUN, or
 * COLLECT_NONE if it has none, or COLLECT_PAUSED if a punch or a truncate
 * down of the file is in flight (nothing may be collected until it is
 * done).  A run is a stretch of dirty blocks, or with @whole_folio a
 * stretch of uptodate blocks of a folio that has any dirty block.
 */
static enum collected collect_one(struct bs_folio *folio, off_t pos, off_t end,
			size_t max_run, unsigned int flags, struct bs_wb_run *run)
{
	bool whole_folio = flags & BS_WB_WHOLE_FOLIO;
	/*
	 * Read the size under the folio lock: truncate stores the new size
	 * before it waits for writeback folio by folio, so either this run is
	 * marked before truncate looks at the folio (and truncate waits for
	 * it), or this sees the new size.
	 */
	off_t size = atomic_load(&folio->file->size);
	unsigned int shift = folio->file->cache->blk_shift;
	uint32_t first_blk = pos > folio->start ? (uint32_t)((pos - folio->start) >> shift) : 0;
	off_t fend = folio->start + folio->size;
	uint32_t end_blk = folio->nr_blocks;
	const unsigned long *map = whole_folio ? folio->uptodate : folio->dirty;
	uint32_t blk, stop;

	if (end < fend)
		end_blk = bs_folio_end_blk(folio, 0, (uint32_t)(end - folio->start));
	/*
	 * Under the folio lock: a punch or a truncate down marks the file
	 * before it waits for writeback folio by folio, so either it waits for
	 * this run or this sees the mark.
	 */
	if (atomic_load(&folio->file->no_collect))
		return COLLECT_PAUSED;
	if (folio->detached)
		return COLLECT_NONE;
	/*
	 * Whole folios: one with a dirty block, or with blocks this pass
	 * already moved to writeback (a folio longer than max_run is
	 * collected in pieces).
	 */
	if (whole_folio && !folio->held_blocks)
		return COLLECT_NONE;
	blk = bs_bits_next_set(map, NULL, first_blk, end_blk);
	if (blk == end_blk || (folio->start + ((off_t)blk << shift)) >= size)
		return COLLECT_NONE;
	stop = bs_bits_next_clear(map, blk, end_blk);
	if (((size_t)(stop - blk) << shift) > max_run)
		stop = blk + (uint32_t)(max_run >> shift);
	bs_folio_start_writeback(folio, blk, stop);
	run->folio = folio;
	run->first_blk = blk;
	run->end_blk = stop;
	run->off = folio->start + ((off_t)blk << shift);
	run->len = (size_t)(stop - blk) << shift;
	if (run->off + (off_t)run->len > size && !(flags & BS_WB_WHOLE_BLOCKS))
		run->len = (size_t)(size - run->off);
	run->data = folio->data + ((size_t)blk << shift);
	return COLLECT_RUN;
}

/*
 * Wait until no punch or truncate down of @file is in flight.
 * Context: no blockstate lock held.
 */
static void wait_collect_resumed(struct bs_file *file)
{
	pthread_mutex_lock(&file->collect_lock);
	while (atomic_load(&file->no_collect))
		pthread_cond_wait(&file->collect_resumed, &file->collect_lock);
	pthread_mutex_unlock(&file->collect_lock);
}

int bs_wb_collect(struct bs_file *file, off_t *pos, off_t end,
		  struct bs_wb_run *runs, int max_runs, size_t max_bytes)
{
	return bs_wb_collect_mode(file, pos, end, runs, max_runs, max_bytes, SIZE_MAX, 0);
}

int bs_wb_collect_mode(struct bs_file *file, off_t *pos, off_t end,
		       struct bs_wb_run *runs, int max_runs, size_t max_bytes,
		       size_t max_run, unsigned int flags)
{
	return bs_wb_collect_budget(file, pos, end, runs, max_runs, max_bytes, max_run,
				    flags, NULL);
}

void bs_wb_budget_init(struct bs_wb_budget *budget, int64_t nr_to_write)
{
	*budget = (struct bs_wb_budget){ .nr_to_write = nr_to_write, .paid_end = -1,
					 .page_end = -1 };
}

/*
 * @run was collected from @folio: pay for the folio if it is a new one,
 * and count the pages holding the run's blocks (a page shared with the
 * run before it counts once).
 */
static void budget_pay(struct bs_cache *cache, struct bs_wb_budget *budget,
		       const struct bs_folio *folio, const struct bs_wb_run *run)
{
	off_t run_end = run->off + ((off_t)(run->end_blk - run->first_blk) << cache->blk_shift);
	off_t first_page = run->off >> BS_PAGE_SHIFT;
	off_t end_page = (run_end + BS_PAGE_SIZE - 1) >> BS_PAGE_SHIFT;
	uint64_t pages;

	if (folio->start >= budget->paid_end) {
		pages = folio->size >> BS_PAGE_SHIFT;
		budget->nr_to_write -= (int64_t)pages;
		budget->folio_pages += pages;
		budget->paid_end = folio->start + folio->size;
		atomic_fetch_add(&cache->wb_budget_pages, pages);
	}
	if (first_page < budget->page_end)
		first_page = budget->page_end;
	if (end_page > first_page) {
		pages = (uint64_t)(end_page - first_page);
		budget->dirty_pages += pages;
		budget->page_end = end_page;
		atomic_fetch_add(&cache->wb_dirty_pages, pages);
	}
}

int bs_wb_collect_budget(struct bs_file *file, off_t *pos, off_t end,
			 struct bs_wb_run *runs, int max_runs, size_t max_bytes,
			 size_t max_run, unsigned int flags, struct bs_wb_budget *wbc)
{
	uint32_t bsize = file->cache->cfg.block_size;
	off_t size = atomic_load(&file->size), caller_end = end;
	size_t bytes = 0;
	int n = 0;

	if (max_run < bsize)
		max_run = bsize;
	/* Only an early stop: collect_one() checks the size that counts. */
	if (end > size)
		end = size;
	while (n < max_runs && *pos < end) {
		size_t budget = bytes < max_bytes ? max_bytes - bytes : 0;
		struct bs_folio *folio;
		enum collected got;

		/* Whole blocks within what is left of max_bytes; the first run
		 * alone may be larger. */
		budget -= budget % bsize;
		if (!n)
			budget = max_run;
		else if (!budget)
			return n;
		pthread_rwlock_rdlock(&file->index_lock);
		folio = bs_index_next_tagged(&file->index, *pos);
		if (folio && folio->start < end)
			bs_folio_get(folio);
		else
			folio = NULL;
		pthread_rwlock_unlock(&file->index_lock);
		if (!folio) {
			*pos = end;
			break;
		}
		/* Budget used up: stop before a folio not paid for. */
		if (wbc && wbc->nr_to_write <= 0 && folio->start >= wbc->paid_end) {
			if (*pos < folio->start)
				*pos = folio->start;
			bs_folio_put(folio);
			return n;
		}
		bs_folio_lock(folio);
		got = collect_one(folio, *pos, end, budget < max_run ? budget : max_run,
				  flags, &runs[n]);
		bs_folio_unlock_raw(folio);
		if (got == COLLECT_PAUSED) {
			bs_folio_put(folio);
			/*
			 * Runs already collected go back first: the punch or
			 * truncate waits for them.  Then wait for it and look
			 * again (an fsync must not return having skipped dirty
			 * data).
			 */
			if (n)
				return n;
			wait_collect_resumed(file);
			continue;
		}
		if (got == COLLECT_NONE) {
			*pos = folio->start + folio->size;
			bs_folio_put(folio);
			continue;
		}
		*pos = runs[n].off + ((off_t)(runs[n].end_blk - runs[n].first_blk)
				      << file->cache->blk_shift);
		if (wbc)
			budget_pay(file->cache, wbc, folio, &runs[n]);
		bytes += runs[n].len;
		n++;
	}
	if (n < max_runs && *pos >= end)
		*pos = caller_end;	/* nothing left before it */
	return n;
}

void bs_wb_copy(const struct bs_wb_run *run, void *dst)
{
	bs_folio_lock(run->folio);
	memcpy(dst, run->data, run->len);
	bs_folio_unlock_raw(run->folio);
}

void bs_wb_complete(struct bs_file *file, struct bs_wb_run *run, int err)
{
	struct bs_folio *folio = run->folio;
	bool rotate;

	/*
	 * The index_lock (read) is held so that the unsynced mark is set
	 * before the blocks are marked and the file's sync_gen is read: a
	 * bs_sync_end() whose walk misses the mark then knows the blocks
	 * were written after its sync began (see bs_sync_begin()).
	 */
	pthread_rwlock_rdlock(&file->index_lock);
	bs_folio_lock(folio);
	bs_folio_end_writeback(folio, run->first_blk, run->end_blk, err != 0);
	if (!err && !folio->detached) {
		if (!folio->utagged) {
			folio->utagged = true;
			bs_index_mark(&file->index, folio, BS_MARK_UNSYNCED, true);
		}
		/* The whole run: with whole folios it rewrote clean blocks too. */
		bs_folio_set_unsynced(folio, run->first_blk, run->end_blk);
	}
	bs_folio_sync_tags(folio);
	rotate = folio->rotate;
	folio->rotate = false;
	bs_folio_unlock_raw(folio);
	pthread_rwlock_unlock(&file->index_lock);
	/* The lru_lock comes before the folio lock: taken with neither held. */
	if (rotate)
		bs_cache_lru_rotate(file->cache, folio);
	bs_folio_put(folio);
	run->folio = NULL;
}

/* ---- syncs of the backing file ---- */

uint64_t bs_sync_begin(struct bs_file *file)
{
	/*
	 * Blocks marked from now on record a later generation.  A block
	 * marked with this one (or an earlier one) was written before the
	 * increment, so before the sync the caller starts next.
	 */
	return atomic_fetch_add(&file->sync_gen, 1);
}

/* The first folio marked unsynced ending after @pos, referenced; NULL if none. */
static struct bs_folio *next_unsynced(struct bs_file *file, off_t pos)
{
	struct bs_folio *folio;

	pthread_rwlock_rdlock(&file->index_lock);
	folio = bs_index_next_marked(&file->index, pos, BS_MARK_UNSYNCED);
	if (folio)
		bs_folio_get(folio);
	pthread_rwlock_unlock(&file->index_lock);
	return folio;
}

void bs_sync_end(struct bs_file *file, uint64_t token, int err)
{
	struct bs_folio *folio;
	off_t pos = 0;

	while (atomic_load(&file->unsynced_folios) && (folio = next_unsynced(file, pos))) {
		bs_folio_lock(folio);
		/*
		 * A failed sync may have lost anything not known to be durable:
		 * every unsynced block is written again (those marked after
		 * the sync began too: rewriting them costs only I/O).
		 */
		if (err)
			bs_folio_redirty_unsynced(folio);
		else if (folio->sync_gen <= token)
			bs_folio_clear_unsynced(folio, 0, folio->nr_blocks);
		pos = folio->start + folio->size;
		bs_folio_unlock(folio);
		bs_folio_put(folio);
	}
}

bool bs_file_has_unsynced(struct bs_file *file)
{
	return atomic_load(&file->unsynced_folios) != 0;
}

