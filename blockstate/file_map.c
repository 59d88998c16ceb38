// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * file_map.c - the folios of one file as a list (a view of the cache for
 * .foliofs/folios), and eviction of the clean ones in a range (for
 * .foliofs/evict, the daemon's POSIX_FADV_DONTNEED).
 *
 * Both exist so that the cache can be compared folio for folio with the
 * kernel's page cache after the same reads (contrib/kernel/ra-patterns.py).
 *
 * The walk reads the index in batches under the file's index_lock held
 * for reading, each folio's flags under its own lock (the lock order of
 * bs_i.h: index_lock, then the folio lock; the LRU bits are atomics, read
 * without the lru_lock), and hands a batch to the caller's function with
 * no lock held, so a large file does not keep writers out of its index
 * for the whole walk.
 *
 * Eviction takes the index_lock for writing, as reclaim does, and drops a
 * folio through reclaim's own bs_folio_detach_clean(): only a folio that
 * nobody but the index holds (no reader, no read in flight) and that is
 * clean goes.  Its memory is freed (to the pool) once the lock is dropped.
 */
#include "bs_i.h"


/* Folios read per hold of the index lock. */
#define MAP_BATCH 64

/*
 * The state of @folio into @info.  Context: index_lock held, folio lock
 * not, lru_lock not (the LRU bits are atomics).
 */
static void folio_info(struct bs_folio *folio, struct bs_folio_info *info)
{
	uint32_t nb = folio->nr_blocks;

	info->start = folio->start;
	info->order = (unsigned int)__builtin_ctz(folio->size) - BS_PAGE_SHIFT;
	bs_folio_lock(folio);
	info->uptodate = bs_bits_all_set(folio->uptodate, 0, nb);
	info->dirty = bs_bits_next_set(folio->dirty, NULL, 0, nb) < nb;
	info->writeback = folio->wb_blocks != 0;
	info->ra_mark = folio->ra_mark;
	info->unsynced = folio->unsynced_blocks != 0;
	bs_folio_unlock_raw(folio);
	/* Changed under the cache's lru_lock; read without it, as stats are. */
	info->active = atomic_load(&folio->active);
	info->referenced = atomic_load(&folio->referenced);
}

/*
 * Up to MAP_BATCH folios from @pos on into @batch; *@pos moves past the
 * last.  Returns how many.
 */
static int map_batch(struct bs_file *file, off_t *pos, struct bs_folio_info *batch)
{
	struct bs_folio *folio;
	int n = 0;

	pthread_rwlock_rdlock(&file->index_lock);
	for (folio = bs_index_next(&file->index, *pos); folio && n < MAP_BATCH;
	     folio = bs_index_next(&file->index, folio->start + folio->size)) {
		folio_info(folio, &batch[n++]);
		*pos = folio->start + folio->size;
	}
	pthread_rwlock_unlock(&file->index_lock);
	return n;
}

int bs_file_folios(struct bs_file *file, bs_folio_fn fn, void *arg)
{
	struct bs_folio_info batch[MAP_BATCH];
	off_t pos = 0;
	int n;

	while ((n = map_batch(file, &pos, batch)) > 0) {
		for (int i = 0; i < n; i++) {
			int ret = fn(arg, &batch[i]);

			if (ret)
				return ret;
		}
	}
	return 0;
}

/*
 * Drop @folio if it is clean and unused; count it either way.  Dropped
 * folios go on @victims (through their lru link, free once off the LRU
 * lists) for the caller to put without the index lock.
 * Context: index_lock held for writing.
 */
static void evict_one(struct bs_file *file, struct bs_folio *folio,
		      struct list_node *victims, struct bs_evict_result *res)
{
	bool held;

	if (bs_folio_detach_clean(folio)) {
		bs_cache_lru_del(file->cache, folio);
		list_push_front(victims, &folio->lru);
		res->folios++;
		res->bytes += folio->size;
		return;
	}
	bs_folio_lock(folio);
	held = bs_folio_pinned(folio);
	bs_folio_unlock_raw(folio);
	if (held)
		res->kept_held++;
	else
		res->kept_busy++;
}

void bs_file_evict(struct bs_file *file, off_t start, off_t end,
		   struct bs_evict_result *res)
{
	struct bs_folio *folio, *next;
	struct list_node victims, *node;

	*res = (struct bs_evict_result){ 0 };
	list_init(&victims);
	if (start < 0 || end <= start)
		return;
	pthread_rwlock_wrlock(&file->index_lock);
	for (folio = bs_index_next(&file->index, start); folio && folio->start < end;
	     folio = next) {
		/* Looked up first: taking @folio out does not move the others. */
		next = bs_index_next(&file->index, folio->start + folio->size);
		if (folio->start >= start && folio->start + folio->size <= end)
			evict_one(file, folio, &victims, res);
	}
	pthread_rwlock_unlock(&file->index_lock);
	while ((node = list_first(&victims))) {
		list_unlink(node);
		/* the index's reference: frees it */
		bs_folio_put(list_entry(node, struct bs_folio, lru));
	}
}
