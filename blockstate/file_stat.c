// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * file_stat.c - what one file holds in the dirty budget, for the
 * writeback queue listing (foliofsctl files).
 *
 * Only folios the index has tagged (those holding dirty or writeback
 * blocks) are visited, the way collection finds them in wb.c, so a large
 * clean file costs a few tag words, not a walk of every folio.  The index
 * lock is held only to find and reference the next tagged folio; its
 * bitmaps are read under its own lock.  The result is exact per folio but
 * not a snapshot of the file: writers and writeback go on meanwhile.
 */
#include "bs_i.h"

#include <stdint.h>

/* The next tagged folio at or after @pos, referenced; NULL when none. */
static struct bs_folio *next_held(struct bs_file *file, off_t pos)
{
	struct bs_folio *folio;

	pthread_rwlock_rdlock(&file->index_lock);
	folio = bs_index_next_tagged(&file->index, pos);
	if (folio)
		bs_folio_get(folio);
	pthread_rwlock_unlock(&file->index_lock);
	return folio;
}

void bs_file_held_bytes(struct bs_file *file, uint64_t *dirty, uint64_t *writeback)
{
	unsigned int shift = file->cache->blk_shift;
	uint64_t dirty_blks = 0, wb_blks = 0;
	struct bs_folio *folio;
	off_t pos = 0;

	/* A file with nothing held has no tags: skip even the index lock. */
	while (atomic_load(&file->held_folios) && (folio = next_held(file, pos))) {
		bs_folio_lock(folio);
		if (!folio->detached) {
			dirty_blks += bs_bits_count(folio->dirty, 0, folio->nr_blocks);
			wb_blks += bs_bits_count(folio->writeback, 0, folio->nr_blocks);
		}
		bs_folio_unlock_raw(folio);
		pos = folio->start + folio->size;
		bs_folio_put(folio);
	}
	*dirty = dirty_blks << shift;
	*writeback = wb_blks << shift;
}
