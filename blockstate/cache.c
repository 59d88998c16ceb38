// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cache.c - the cache as a whole: configuration, the memory budget and
 * reclaim, counters, and the invariant check.
 *
 * Reclaim works on two lists as the kernel's does for file pages (without
 * multi-gen LRU): a new folio goes on the inactive list (or, refaulting
 * recently, on the active one: workingset.c); a read's first use sets its
 * referenced bit, a second use while it is inactive moves it to the
 * active list (folio_mark_accessed()).  Reclaim frees the oldest inactive
 * folios, referenced or not (an unmapped page cache folio is reclaimed
 * from the inactive list whatever its referenced bit,
 * folio_check_references()), and moves the oldest active folios to the
 * inactive head (shrink_active_list(), which keeps their referenced bit,
 * so that one use there brings a folio back).  So a folio used again
 * while it is inactive survives a sequential pass, and a large folio,
 * which more reads land in, stays active where small ones come and go.
 *
 * One reclaim is one call of the kernel's try_to_free_mem_cgroup_pages()
 * for a charge the cache has no room for: it is to free the bytes over
 * the budget, at least SWAP_CLUSTER_MAX pages (32, 128 KiB), and it goes
 * as do_try_to_free_pages() and shrink_lruvec() go: at priority 12, then
 * 11 and down, each list is scanned for its size >> priority pages, in
 * turns of up to 32 pages, inactive then active, until as much is freed
 * (checked after each turn) or both are scanned.  A turn takes whole
 * folios, at least one, however large (isolate_lru_folios()).  The
 * active list is scanned only when the kernel's prepare_scan_control()
 * allows it (may_deactivate): when a refault was activated since the
 * last reclaim ended (WORKINGSET_ACTIVATE_FILE moved), or the inactive
 * list is low (inactive_is_low(): below active / ratio, ratio
 * int_sqrt(10 x GiB), 1 under 1 GiB).  The kernel reads both from its
 * memory cgroup's statistics, which change only when flushed, every 2 s
 * or so; so does the model with bs_config.lru_stats_ms (0: the live
 * counts).  It matters: with live counts any refault activated since
 * the last reclaim lets the next deactivate, so a sequential pass over
 * uncached data, which refaults a little all along, empties the active
 * list; in the kernel only the first reclaim after each flush may, and
 * the active list outlives the pass unless the inactive list was low
 * when it began, in which case it stays low for a whole period and the
 * active list goes nearly whole (measured on this machine's kernel:
 * contrib/results/lru-stats-2026-12-07).
 *
 * A worked example: 512 MiB, 250 MiB on each list (64000 pages), a read
 * needing a 4 KiB folio, and refaults activated since the last reclaim.
 * At priority 12 each list is due 64000 >> 12 = 15 pages: the inactive
 * list's oldest folios are freed until 15 pages are scanned, then the
 * active list's oldest go to the inactive head, at least one: a 2 MiB
 * folio there is 512 pages of it.  Less than 32 pages freed, so priority
 * 11: 31 pages of each.  So each reclaim that may deactivate moves at
 * least two folios off the active list, 1024 pages when they are 2 MiB,
 * for some 46 pages of inactive folios freed: a 2 MiB folio stays only if
 * a read uses it again in its time on the inactive list.  A pass that
 * frees nothing having skipped the active list is made again with
 * deactivation forced (do_try_to_free_pages()'s skipped_deactivate).
 * Before, the model deactivated only to keep the inactive list from being
 * low, and its scans left the active list whole.
 *
 * A folio that reclaim meets holding dirty or writeback blocks is marked
 * for reclaim and moved to the active list, out of the way, as the
 * kernel's shrink_folio_list() does with a dirty folio it does not write
 * (PG_reclaim, then activate_locked); when its writeback ends and it is
 * not dirty again, it goes to the inactive tail (folio_end_writeback() ->
 * folio_rotate_reclaimable()), the next to be reclaimed.  A folio holding
 * only unsynced blocks is clean to the kernel, which would free it; here
 * it cannot be freed until its file is synced, so it goes back to the
 * inactive head, as the kernel puts back a folio it cannot free now
 * (keep), not to the active list, where it would crowd out the folios
 * reads made active.  (Until 2026-12-07 every pinned folio went to the
 * active list and stayed: under PostgreSQL, whose data files are synced
 * at checkpoints, 4 KiB folios it had written filled 40% of the cache's
 * active half where the kernel's held about 5%, and the sequential scans
 * that make 2 MiB folios met them cached, in a calibration run of that
 * day whose files were not kept.)  One in use goes back to the inactive head too.  When a
 * whole pass frees nothing, the layer above is asked to write back and
 * sync (a reclaim stall).
 */
#include "bs_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* The values set in @set are @policy's parameters, in range. */
static int params_check(const char *kind, const char *policy, const struct bs_param *params,
			unsigned int nr, const int64_t *values, uint32_t set, char *err,
			size_t errlen)
{
	for (unsigned int i = 0; i < BS_PARAMS_MAX; i++) {
		if (!(set & (1u << i)))
			continue;
		if (i >= nr) {
			snprintf(err, errlen, "%s: parameter %u of %s, which has %u", kind, i,
				 policy, nr);
			return -EINVAL;
		}
		if (values[i] < params[i].min || values[i] > params[i].max) {
			snprintf(err, errlen, "%s.%s=%lld: an integer in [%lld, %lld]", kind,
				 params[i].name, (long long)values[i], (long long)params[i].min,
				 (long long)params[i].max);
			return -EINVAL;
		}
	}
	if (set >> BS_PARAMS_MAX) {
		snprintf(err, errlen, "%s: parameters past the %dth", kind, BS_PARAMS_MAX);
		return -EINVAL;
	}
	return 0;
}

int bs_config_check(const struct bs_config *cfg, char *err, size_t errlen)
{
	if (!is_pow2(cfg->block_size) || cfg->block_size < BS_MIN_BLOCK_SIZE ||
	    cfg->block_size > BS_MAX_BLOCK_SIZE) {
		snprintf(err, errlen, "block_size=%u: must be a power of two from %u to %u",
			 cfg->block_size, BS_MIN_BLOCK_SIZE, BS_MAX_BLOCK_SIZE);
		return -EINVAL;
	}
	if (!is_pow2(cfg->folio_size) || cfg->folio_size < BS_MIN_FOLIO_SIZE ||
	    cfg->folio_size > BS_MAX_FOLIO_SIZE) {
		snprintf(err, errlen, "folio_size=%u: must be a power of two from %u to %u",
			 cfg->folio_size, BS_MIN_FOLIO_SIZE, BS_MAX_FOLIO_SIZE);
		return -EINVAL;
	}
	if (cfg->folio_size < cfg->block_size) {
		snprintf(err, errlen, "folio_size=%u: smaller than block_size=%u",
			 cfg->folio_size, cfg->block_size);
		return -EINVAL;
	}
	if (cfg->cache_size < 4ull * cfg->folio_size) {
		snprintf(err, errlen, "cache_size=%llu: must hold at least 4 folios (%u bytes)",
			 (unsigned long long)cfg->cache_size, 4 * cfg->folio_size);
		return -EINVAL;
	}
	if (!cfg->account || !cfg->size) {
		snprintf(err, errlen, "no accounting or sizing policy");
		return -EINVAL;
	}
	if (params_check("account", cfg->account->name, cfg->account->params,
			 cfg->account->nr_params, cfg->account_params, cfg->account_set, err, errlen) ||
	    params_check("size", cfg->size->name, cfg->size->params, cfg->size->nr_params,
			 cfg->size_params, cfg->size_set, err, errlen))
		return -EINVAL;
	if (cfg->ra_model >= BS_NR_RA_MODELS) {
		snprintf(err, errlen, "ra_model: no readahead model %u", cfg->ra_model);
		return -EINVAL;
	}
	if (cfg->lru_stats_ms > BS_LRU_STATS_MS_MAX) {
		snprintf(err, errlen, "lru_stats_ms: %u is above %u", cfg->lru_stats_ms,
			 BS_LRU_STATS_MS_MAX);
		return -EINVAL;
	}
	return 0;
}

int bs_cache_create(const struct bs_config *cfg, const struct bs_cache_ops *ops,
		    void *ctx, struct bs_cache **out)
{
	struct bs_cache *cache;
	char err[256];

	if (bs_config_check(cfg, err, sizeof(err)))
		return -EINVAL;
	cache = calloc(1, sizeof(*cache));
	if (!cache)
		return -ENOMEM;
	cache->cfg = *cfg;
	if (bs_cache_insts_init(cache)) {
		free(cache);
		return -ENOMEM;
	}
	atomic_init(&cache->ra_model, cfg->ra_model);
	cache->ops = ops;
	cache->ctx = ctx;
	cache->blk_shift = (unsigned int)__builtin_ctz(cfg->block_size);
	cache->max_order = (unsigned int)__builtin_ctz(cfg->folio_size);
	cache->min_order = cache->blk_shift > BS_PAGE_SHIFT ? cache->blk_shift : BS_PAGE_SHIFT;
	cache->full_wait_ms = BS_FULL_WAIT_MS;
	bs_workingset_init(&cache->ws, cfg->cache_size >> BS_PAGE_SHIFT);
	pthread_mutex_init(&cache->lru_lock, NULL);
	list_init(&cache->inactive);
	list_init(&cache->active);
	pthread_mutex_init(&cache->files_lock, NULL);
	list_init(&cache->files);
	bs_pool_init(&cache->pool);
	*out = cache;
	return 0;
}

void bs_cache_destroy(struct bs_cache *cache)
{
	if (!cache)
		return;
	bs_pool_destroy(&cache->pool);
	bs_workingset_destroy(&cache->ws);
	bs_cache_insts_free(cache);
	pthread_mutex_destroy(&cache->lru_lock);
	pthread_mutex_destroy(&cache->files_lock);
	free(cache);
}

void bs_cache_set_full_wait(struct bs_cache *cache, uint32_t ms)
{
	cache->full_wait_ms = ms;
}

const struct bs_config *bs_cache_config(const struct bs_cache *cache)
{
	return &cache->cfg;
}

uint64_t bs_cache_charged(struct bs_cache *cache)
{
	int64_t charged = atomic_load(&cache->charged_bytes);

	return charged > 0 ? (uint64_t)charged : 0;
}

uint64_t bs_cache_held(struct bs_cache *cache)
{
	return atomic_load(&cache->held_bytes);
}

/*
 * The counts reclaim's decisions read (bs_config.lru_stats_ms): the live
 * ones, or those of the last flush.  Context: the two sizes, any (stats
 * read them too); the refault count, lru_lock held.
 */
static uint64_t seen_active_bytes(const struct bs_cache *cache)
{
	return atomic_load(cache->cfg.lru_stats_ms ? &cache->lru_stats.active_bytes
						   : &cache->active_bytes);
}

static uint64_t seen_inactive_bytes(const struct bs_cache *cache)
{
	return atomic_load(cache->cfg.lru_stats_ms ? &cache->lru_stats.inactive_bytes
						   : &cache->inactive_bytes);
}

static uint64_t seen_activate_pages(const struct bs_cache *cache)
{
	return cache->cfg.lru_stats_ms ? cache->lru_stats.activate_pages
				       : atomic_load(&cache->ws.activate_pages);
}

void bs_cache_stats(struct bs_cache *cache, struct bs_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->charged_bytes = bs_cache_charged(cache);
	st->nr_dirty = (st->charged_bytes + BS_PAGE_SIZE - 1) >> BS_PAGE_SHIFT;
	/* All three round up: a 512-byte block charged is a page in flight. */
	st->nr_dirtied = (atomic_load(&cache->dirtied_bytes) + BS_PAGE_SIZE - 1) >> BS_PAGE_SHIFT;
	st->nr_discharged = (atomic_load(&cache->written_bytes) + BS_PAGE_SIZE - 1) >> BS_PAGE_SHIFT;
	st->nr_reclaimable = (bs_cache_dirty_charged(cache) + BS_PAGE_SIZE - 1) >> BS_PAGE_SHIFT;
	/* Folios are whole pages: exact. */
	st->nr_writeback = atomic_load(&cache->wb_folio_bytes) >> BS_PAGE_SHIFT;
	st->nr_written = atomic_load(&cache->written_folio_bytes) >> BS_PAGE_SHIFT;
	st->wb_budget_pages = atomic_load(&cache->wb_budget_pages);
	st->wb_dirty_pages_written = atomic_load(&cache->wb_dirty_pages);
	st->dirty_bytes_exact = bs_cache_held(cache);
	st->writeback_bytes = atomic_load(&cache->wb_bytes);
	st->pinned_bytes = atomic_load(&cache->pinned_bytes);
	st->app_write_bytes = atomic_load(&cache->app_write_bytes);
	st->app_read_bytes = atomic_load(&cache->app_read_bytes);
	st->backing_read_bytes = atomic_load(&cache->backing_read_bytes);
	st->backing_read_ios = atomic_load(&cache->backing_read_ios);
	st->cache_bytes = atomic_load(&cache->cache_bytes);
	st->pool_bytes = atomic_load(&cache->pool.bytes);
	st->pool_hits = atomic_load(&cache->pool.hits);
	st->pool_misses = atomic_load(&cache->pool.misses);
	st->folios = atomic_load(&cache->nr_folios);
	st->reclaimed_folios = atomic_load(&cache->reclaimed_folios);
	st->activated_folios = atomic_load(&cache->activated_folios);
	st->rotated_folios = atomic_load(&cache->rotated_folios);
	st->deactivated_folios = atomic_load(&cache->deactivated_folios);
	st->activate_pages = atomic_load(&cache->activate_pages);
	st->deactivate_pages = atomic_load(&cache->deactivate_pages);
	st->workingset_refault = atomic_load(&cache->ws.refault_pages);
	st->workingset_activate = atomic_load(&cache->ws.activate_pages);
	st->active_bytes = atomic_load(&cache->active_bytes);
	st->seen_active_bytes = seen_active_bytes(cache);
	st->seen_inactive_bytes = seen_inactive_bytes(cache);
	st->inactive_bytes = atomic_load(&cache->inactive_bytes);
	st->reclaim_stalls = atomic_load(&cache->reclaim_stalls);
	st->unsynced_bytes = atomic_load(&cache->unsynced_bytes);
	st->full_events = atomic_load(&cache->full_events);
	st->ra_pages = (atomic_load(&cache->ra_bytes) + BS_PAGE_SIZE - 1) >> BS_PAGE_SHIFT;
	st->ra_ios = atomic_load(&cache->ra_ios);
	st->ra_async_ios = atomic_load(&cache->ra_async_ios);
	for (int i = 0; i < BS_NR_FOLIO_ORDERS; i++) {
		st->folios_order[i] = atomic_load(&cache->folios_order[i]);
		st->folios_made_order[i] = atomic_load(&cache->folios_made_order[i]);
		st->reclaimed_order[i] = atomic_load(&cache->reclaimed_order[i]);
		st->activated_order[i] = atomic_load(&cache->activated_order[i]);
		st->active_order[i] = atomic_load(&cache->active_order[i]);
	}
}

uint64_t bs_cache_dirty_charged(struct bs_cache *cache)
{
	int64_t charged = atomic_load(&cache->dirty_charged_bytes);

	return charged > 0 ? (uint64_t)charged : 0;
}

uint64_t bs_cache_pinned(struct bs_cache *cache)
{
	return atomic_load(&cache->pinned_bytes);
}

uint64_t bs_cache_unsynced(struct bs_cache *cache)
{
	return atomic_load(&cache->unsynced_bytes);
}

/* ---- the LRU lists ---- */

static unsigned int folio_order(const struct bs_folio *folio)
{
	return (unsigned int)__builtin_ctz(folio->size) - BS_PAGE_SHIFT;
}

/* Context: lru_lock held, @folio on no list. */
static void lru_add_locked(struct bs_cache *cache, struct bs_folio *folio, bool active)
{
	list_push_front(active ? &cache->active : &cache->inactive, &folio->lru);
	atomic_store(&folio->active, active);
	atomic_fetch_add(active ? &cache->active_bytes : &cache->inactive_bytes, folio->size);
	if (active)
		atomic_fetch_add(&cache->active_order[folio_order(folio)], 1);
}

/* Context: lru_lock held, @folio on a list. */
static void lru_del_locked(struct bs_cache *cache, struct bs_folio *folio)
{
	bool active = atomic_load(&folio->active);

	list_unlink(&folio->lru);
	atomic_fetch_sub(active ? &cache->active_bytes : &cache->inactive_bytes, folio->size);
	if (active)
		atomic_fetch_sub(&cache->active_order[folio_order(folio)], 1);
}

static int64_t cache_now_ns(const struct bs_cache *cache)
{
	struct timespec ts;

	if (cache->ops && cache->ops->now_ns)
		return cache->ops->now_ns(cache->ctx);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * The statistics flush (see bs_config.lru_stats_ms): at the first call in
 * a new period (counted from the first flush), copy the live counts.
 * Context: lru_lock held.
 */
static void lru_stats_flush(struct bs_cache *cache)
{
	struct bs_lru_stats *st = &cache->lru_stats;
	int64_t period = (int64_t)cache->cfg.lru_stats_ms * 1000000, now;

	if (!period)
		return;
	now = cache_now_ns(cache);
	if (st->flushes && now - st->period_ns < period)
		return;
	/* The period this flush falls in: the worker's ticks do not drift. */
	st->period_ns = st->flushes ? now - (now - st->period_ns) % period : now;
	st->flushes++;
	atomic_store(&st->inactive_bytes, atomic_load(&cache->inactive_bytes));
	atomic_store(&st->active_bytes, atomic_load(&cache->active_bytes));
	st->activate_pages = atomic_load(&cache->ws.activate_pages);
}

void bs_cache_lru_add(struct bs_cache *cache, struct bs_folio *folio, bool read)
{
	bool active = false;

	pthread_mutex_lock(&cache->lru_lock);
	if (read)
		active = bs_workingset_refault(&cache->ws, folio->file->serial,
					       (uint64_t)folio->start >> BS_PAGE_SHIFT,
					       folio_order(folio), cache->min_order - BS_PAGE_SHIFT,
					       cache->max_order - BS_PAGE_SHIFT,
					       seen_active_bytes(cache) >> BS_PAGE_SHIFT);
	lru_add_locked(cache, folio, active);
	pthread_mutex_unlock(&cache->lru_lock);
}

void bs_folio_mark_accessed(struct bs_folio *folio)
{
	struct bs_cache *cache = folio->file->cache;

	if (!atomic_load(&folio->referenced)) {
		atomic_store(&folio->referenced, true);
		return;
	}
	if (atomic_load(&folio->active))
		return;
	pthread_mutex_lock(&cache->lru_lock);
	if (list_linked(&folio->lru) && !atomic_load(&folio->active)) {
		lru_del_locked(cache, folio);
		lru_add_locked(cache, folio, true);
		atomic_store(&folio->referenced, false);
		atomic_fetch_add(&cache->activated_folios, 1);
		atomic_fetch_add(&cache->activated_order[folio_order(folio)], 1);
		atomic_fetch_add(&cache->activate_pages, (uint64_t)1 << folio_order(folio));
		bs_workingset_activation(&cache->ws, folio_order(folio));
	}
	pthread_mutex_unlock(&cache->lru_lock);
}

bool bs_lru_inactive_low(uint64_t inactive_bytes, uint64_t active_bytes)
{
	uint64_t gib = (inactive_bytes + active_bytes) >> 30;
	uint64_t ratio = 1;

	while ((ratio + 1) * (ratio + 1) <= 10 * gib)
		ratio++;
	return inactive_bytes * ratio < active_bytes;
}

bool bs_lru_may_deactivate(uint64_t activate_pages, uint64_t activate_snapshot,
			   uint64_t inactive_bytes, uint64_t active_bytes)
{
	return activate_pages != activate_snapshot ||
	       bs_lru_inactive_low(inactive_bytes, active_bytes);
}

/*
 * shrink_active_list(): the oldest active folios to the inactive head,
 * their referenced bit kept, until @nr_pages pages are scanned (at least
 * one folio).  Context: lru_lock held.
 */
static void shrink_active(struct bs_cache *cache, uint64_t nr_pages)
{
	uint64_t scanned = 0;

	while (scanned < nr_pages && !list_is_empty(&cache->active)) {
		struct bs_folio *folio = list_entry(list_last(&cache->active), struct bs_folio, lru);

		scanned += (uint64_t)1 << folio_order(folio);
		lru_del_locked(cache, folio);
		lru_add_locked(cache, folio, false);
		atomic_fetch_add(&cache->deactivated_folios, 1);
		atomic_fetch_add(&cache->deactivate_pages, (uint64_t)1 << folio_order(folio));
	}
}

void bs_cache_lru_del(struct bs_cache *cache, struct bs_folio *folio)
{
	pthread_mutex_lock(&cache->lru_lock);
	if (list_linked(&folio->lru))
		lru_del_locked(cache, folio);
	pthread_mutex_unlock(&cache->lru_lock);
}

/* Why a folio was not taken out of its file. */
enum detach_result { DETACHED, DETACH_BUSY, DETACH_HELD, DETACH_UNSYNCED };

/* bs_folio_detach_clean(), saying why not.  Context: as it. */
static enum detach_result detach_clean(struct bs_folio *folio)
{
	enum detach_result res = DETACH_BUSY;

	/* refs == 1 under the index lock: nobody else has it or can get it. */
	if (atomic_load(&folio->refs) != 1)
		return DETACH_BUSY;
	bs_folio_lock(folio);
	if (folio->held_blocks) {
		res = DETACH_HELD;
	} else if (folio->unsynced_blocks) {
		res = DETACH_UNSYNCED;
	} else if (!folio->detached && !folio->rd_runs) {
		bs_index_remove(&folio->file->index, folio);
		folio->detached = true;
		res = DETACHED;
		bs_folio_trace_delete(folio);
	}
	bs_folio_unlock_raw(folio);
	return res;
}

bool bs_folio_detach_clean(struct bs_folio *folio)
{
	return detach_clean(folio) == DETACHED;
}

/*
 * Try to take @folio out of its file for reclaim.
 * Context: lru_lock held; index lock taken only by trylock (order).
 */
static enum detach_result try_evict(struct bs_cache *cache, struct bs_folio *folio)
{
	struct bs_file *file = folio->file;
	enum detach_result res = DETACH_BUSY;

	/* Held state first: a run in flight holds a reference to its folio. */
	bs_folio_lock(folio);
	if (folio->held_blocks)
		res = DETACH_HELD;
	else if (folio->unsynced_blocks)
		res = DETACH_UNSYNCED;
	bs_folio_unlock_raw(folio);
	if (res != DETACH_BUSY || atomic_load(&folio->refs) != 1)
		return res;
	if (pthread_rwlock_trywrlock(&file->index_lock))
		return DETACH_BUSY;
	res = detach_clean(folio);
	if (res == DETACHED)
		lru_del_locked(cache, folio);
	pthread_rwlock_unlock(&file->index_lock);
	return res;
}

void bs_cache_lru_rotate(struct bs_cache *cache, struct bs_folio *folio)
{
	bool dirty;

	pthread_mutex_lock(&cache->lru_lock);
	bs_folio_lock(folio);
	dirty = folio->dirty_blocks != 0;
	bs_folio_unlock_raw(folio);
	/* Dirtied again since its writeback ended: it stays where it is. */
	if (list_linked(&folio->lru) && !dirty) {
		lru_del_locked(cache, folio);
		list_push_back(&cache->inactive, &folio->lru);
		atomic_store(&folio->active, false);
		atomic_fetch_add(&cache->inactive_bytes, folio->size);
		atomic_fetch_add(&cache->rotated_folios, 1);
	}
	pthread_mutex_unlock(&cache->lru_lock);
}

/*
 * shrink_inactive_list() for @nr_pages pages (at least one folio) of the
 * oldest inactive folios: the clean ones taken out of their files onto
 * @victims, leaving shadows.  Returns the bytes taken.  Context: lru_lock
 * held.
 */
static size_t shrink_inactive(struct bs_cache *cache, uint64_t nr_pages,
			      struct list_node *victims)
{
	uint64_t scanned = 0;
	size_t freed = 0;

	while (scanned < nr_pages && !list_is_empty(&cache->inactive)) {
		enum detach_result res;
		struct bs_folio *folio;

		folio = list_entry(list_last(&cache->inactive), struct bs_folio, lru);
		scanned += (uint64_t)1 << folio_order(folio);
		atomic_store(&folio->referenced, false);
		res = try_evict(cache, folio);
		if (res != DETACHED) {
			/*
			 * Dirty or under writeback: marked for reclaim and to
			 * the active list, so that clean active folios come
			 * back to the inactive list in its place; the end of
			 * its writeback rotates it to the inactive tail.
			 * Unsynced only, or in use: back to the inactive head.
			 */
			bool held = res == DETACH_HELD;

			if (held)
				atomic_store(&folio->reclaim, true);
			lru_del_locked(cache, folio);
			lru_add_locked(cache, folio, held);
			/* move_folios_to_lru(): an activated folio ages the cache. */
			if (held) {
				bs_workingset_activation(&cache->ws, folio_order(folio));
				atomic_fetch_add(&cache->activate_pages,
						 (uint64_t)1 << folio_order(folio));
			}
			continue;
		}
		freed += folio->size;
		bs_workingset_evict(&cache->ws, folio->file->serial,
				    (uint64_t)folio->start >> BS_PAGE_SHIFT, folio_order(folio));
		list_push_front(victims, &folio->lru);	/* off the lists: reuse the link */
	}
	return freed;
}

/* The kernel's SWAP_CLUSTER_MAX and DEF_PRIORITY. */
#define RECLAIM_BATCH_PAGES 32
#define RECLAIM_PRIORITIES 12

/*
 * One pass of do_try_to_free_pages() over the priorities (see the top of
 * this file), adding the pages freed to *@freed until @target.  Without
 * @force the active list is scanned only where bs_lru_may_deactivate()
 * allows; true when it was skipped for that.  Context: lru_lock held.
 */
static bool reclaim_priorities(struct bs_cache *cache, uint64_t target, bool force,
			       uint64_t *freed, struct list_node *victims)
{
	struct bs_workingset *ws = &cache->ws;
	bool skipped = false;

	for (int prio = RECLAIM_PRIORITIES; prio >= 0 && *freed < target; prio--) {
		/* The scan sizes are the lists' own (lruvec_lru_size()): exact. */
		uint64_t inactive = atomic_load(&cache->inactive_bytes);
		uint64_t active = atomic_load(&cache->active_bytes);
		bool may = force || bs_lru_may_deactivate(seen_activate_pages(cache),
							  ws->activate_snapshot,
							  seen_inactive_bytes(cache),
							  seen_active_bytes(cache));
		uint64_t nr_in = (inactive >> BS_PAGE_SHIFT) >> prio;
		uint64_t nr_act = may ? (active >> BS_PAGE_SHIFT) >> prio : 0;

		if (!may && (active >> BS_PAGE_SHIFT) >> prio)
			skipped = true;
		while ((nr_in || nr_act) && *freed < target) {
			if (nr_in) {
				uint64_t n = nr_in < RECLAIM_BATCH_PAGES ? nr_in : RECLAIM_BATCH_PAGES;

				nr_in -= n;
				*freed += shrink_inactive(cache, n, victims) >> BS_PAGE_SHIFT;
			}
			if (nr_act) {
				uint64_t n = nr_act < RECLAIM_BATCH_PAGES ? nr_act : RECLAIM_BATCH_PAGES;

				nr_act -= n;
				shrink_active(cache, n);
			}
		}
	}
	return skipped;
}

/*
 * One reclaim (see the top of this file): frees at least @need bytes of
 * clean folios, and at least RECLAIM_BATCH_PAGES, if it can.  A pass
 * that freed nothing and skipped the active list is made again with
 * deactivation forced (do_try_to_free_pages()'s skipped_deactivate).
 */
static size_t reclaim_some(struct bs_cache *cache, size_t need)
{
	uint64_t target = (need + BS_PAGE_SIZE - 1) >> BS_PAGE_SHIFT, freed = 0;
	struct list_node victims, *node;

	if (target < RECLAIM_BATCH_PAGES)
		target = RECLAIM_BATCH_PAGES;
	list_init(&victims);
	pthread_mutex_lock(&cache->lru_lock);
	lru_stats_flush(cache);
	if (reclaim_priorities(cache, target, false, &freed, &victims) && !freed)
		reclaim_priorities(cache, target, true, &freed, &victims);
	cache->ws.activate_snapshot = seen_activate_pages(cache);
	pthread_mutex_unlock(&cache->lru_lock);
	while ((node = list_first(&victims))) {
		struct bs_folio *folio = list_entry(node, struct bs_folio, lru);

		list_unlink(node);
		atomic_fetch_add(&cache->reclaimed_folios, 1);
		atomic_fetch_add(&cache->reclaimed_order[folio_order(folio)], 1);
		bs_folio_put(folio);
	}
	return (size_t)freed << BS_PAGE_SHIFT;
}

/* Writeback rounds before letting the cache run over its budget. */
#define MAX_STALLS 3
/* Pause between writeback rounds while pinned data fills the cache. */
#define FULL_PAUSE_MS 10

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * No room, and nothing reclaimable after writeback rounds.  If what is
 * not reclaimable is folios in use, they will be put back soon: go over
 * budget rather than wait for users that may be waiting for us.  If it is
 * pinned data (dirty, writeback or unsynced) that writeback does not
 * free, as when the backing store fails every write, a writer may not
 * grow the cache: it is held, and fails once that lasted full_wait_ms
 * without progress (or at once while the cache stays full), so that a
 * failing backing store costs errors, not all memory.  Nothing already
 * written is dropped.  Returns 0 to go over budget, -EAGAIN to try again,
 * -ENOSPC to fail.
 */
static int room_stalled(struct bs_cache *cache, size_t bytes, bool may_fail,
			int64_t *deadline)
{
	uint64_t pinned = atomic_load(&cache->pinned_bytes);

	if (!may_fail || pinned + bytes <= cache->cfg.cache_size)
		return 0;
	if (atomic_load(&cache->full))
		return -ENOSPC;
	if (!*deadline) {
		*deadline = now_ms() + cache->full_wait_ms;
	} else if (now_ms() >= *deadline) {
		if (!atomic_exchange(&cache->full, true))
			atomic_fetch_add(&cache->full_events, 1);
		return -ENOSPC;
	}
	pause_ms(FULL_PAUSE_MS);
	return -EAGAIN;
}

int bs_cache_make_room(struct bs_cache *cache, size_t bytes, bool may_fail)
{
	uint64_t unpinned = atomic_load(&cache->unpinned_bytes);
	int64_t deadline = 0;
	int stalls = 0;

	for (;;) {
		uint64_t used = atomic_load(&cache->cache_bytes) +
				atomic_load(&cache->pool.bytes), now_unpinned;
		/* Pooled memory of the size is already counted in @used. */
		size_t need = bs_pool_has(cache, (uint32_t)bytes) ? 0 : bytes;
		uint64_t over;

		if (used + need <= cache->cfg.cache_size)
			break;
		over = used + need - cache->cfg.cache_size;
		/* Idle memory goes before cached data; reclaimed folios refill the pool. */
		if (bs_pool_trim(cache, over, (uint32_t)bytes) || reclaim_some(cache, over))
			continue;
		if (!cache->ops || !cache->ops->need_clean)
			return 0;
		if (stalls >= MAX_STALLS) {
			int ret = room_stalled(cache, bytes, may_fail, &deadline);

			if (ret != -EAGAIN)
				return ret;
		}
		stalls++;
		atomic_fetch_add(&cache->reclaim_stalls, 1);
		cache->ops->need_clean(cache->ctx);
		/* Writeback freed something: the wait starts again. */
		now_unpinned = atomic_load(&cache->unpinned_bytes);
		if (now_unpinned != unpinned) {
			unpinned = now_unpinned;
			deadline = 0;
			atomic_store(&cache->full, false);
		}
	}
	atomic_store(&cache->full, false);
	return 0;
}

/* ---- invariant check ---- */

struct check_sums {
	uint64_t price, held, wb, pinned, unsynced, bytes, folios;
	uint64_t dirty_price, wb_folio;
	uint64_t held_folios;	/* of the file being checked */
	uint64_t unsynced_folios, unsynced_bytes;	/* of the file being checked */
};

static int check_folio(struct bs_folio *folio, struct check_sums *s)
{
	uint32_t nb = folio->nr_blocks, blocks, pages;
	const struct bs_cache *cache = folio->file->cache;
	int bad = 0;

	bs_folio_lock(folio);
	bs_folio_count_held(folio, &blocks, &pages);
	for (uint32_t i = 0; i < nb; i++) {
		bool up = bs_bits_count(folio->uptodate, i, i + 1);

		if (!up && (bs_bits_count(folio->dirty, i, i + 1) ||
			    bs_bits_count(folio->writeback, i, i + 1) ||
			    bs_bits_count(folio->unsynced, i, i + 1)))
			bad = 1;
	}
	if (blocks != folio->held_blocks || pages != folio->held_pages)
		bad = 1;
	if (folio->wb_blocks != bs_bits_count(folio->writeback, 0, nb))
		bad = 1;
	if (folio->unsynced_blocks != bs_bits_count(folio->unsynced, 0, nb))
		bad = 1;
	/* At rest every mark is up to date. */
	if (folio->tag_stale || folio->tagged != (blocks != 0) ||
	    folio->utagged != (folio->unsynced_blocks != 0))
		bad = 1;
	{
		const struct bs_policy_inst *inst = atomic_load(&cache->account);
		struct bs_held_state st = {
			folio->size, cache->cfg.block_size, blocks, pages, inst->params,
		};
		if (folio->price != (blocks ? inst->account->price(&st) : 0))
			bad = 1;
	}
	s->price += folio->price;
	s->dirty_price += folio->dirty_price;
	s->wb_folio += folio->wb_runs ? folio->size : 0;
	s->held += (uint64_t)blocks << cache->blk_shift;
	s->wb += (uint64_t)folio->wb_blocks << cache->blk_shift;
	s->pinned += blocks || folio->unsynced_blocks ? folio->size : 0;
	s->unsynced += folio->unsynced_blocks ? folio->size : 0;
	s->held_folios += blocks != 0;
	s->unsynced_folios += folio->unsynced_blocks != 0;
	s->unsynced_bytes += folio->unsynced_blocks ? folio->size : 0;
	s->bytes += folio->size;
	s->folios++;
	bs_folio_unlock_raw(folio);
	if (bad)
		fprintf(stderr, "blockstate: folio at %lld (%u bytes): state does not add up\n",
			(long long)folio->start, folio->size);
	return bad;
}

int bs_cache_check(struct bs_cache *cache)
{
	struct check_sums s = { 0 };
	int bad = 0;

	struct bs_file *file;

	pthread_mutex_lock(&cache->files_lock);
	list_for_each_entry(file, &cache->files, files_link) {
		uint64_t tagged = 0, utagged = 0;

		s.held_folios = 0;
		s.unsynced_folios = 0;
		s.unsynced_bytes = 0;
		pthread_rwlock_rdlock(&file->index_lock);
		for (struct bs_folio *f = bs_index_next(&file->index, 0); f;
		     f = bs_index_next(&file->index, f->start + f->size))
			bad |= check_folio(f, &s);
		/* check_folio() saw each tag match; the tagged walk must see them all. */
		for (struct bs_folio *f = bs_index_next_tagged(&file->index, 0); f;
		     f = bs_index_next_tagged(&file->index, f->start + f->size))
			tagged++;
		for (struct bs_folio *f = bs_index_next_marked(&file->index, 0, BS_MARK_UNSYNCED);
		     f; f = bs_index_next_marked(&file->index, f->start + f->size,
						 BS_MARK_UNSYNCED))
			utagged++;
		if (tagged != s.held_folios || bs_index_nr_tagged(&file->index) != tagged ||
		    atomic_load(&file->held_folios) != tagged) {
			fprintf(stderr, "blockstate: the index tags do not match the held folios\n");
			bad = 1;
		}
		if (utagged != s.unsynced_folios ||
		    bs_index_nr_marked(&file->index, BS_MARK_UNSYNCED) != utagged ||
		    atomic_load(&file->unsynced_folios) != utagged ||
		    atomic_load(&file->unsynced_bytes) != s.unsynced_bytes) {
			fprintf(stderr, "blockstate: the unsynced marks do not match the unsynced folios\n");
			bad = 1;
		}
		pthread_rwlock_unlock(&file->index_lock);
	}
	pthread_mutex_unlock(&cache->files_lock);
	if (s.price != (uint64_t)atomic_load(&cache->charged_bytes) ||
	    s.held != atomic_load(&cache->held_bytes) ||
	    s.wb != atomic_load(&cache->wb_bytes) ||
	    s.pinned != atomic_load(&cache->pinned_bytes) ||
	    s.unsynced != atomic_load(&cache->unsynced_bytes) ||
	    s.bytes != atomic_load(&cache->cache_bytes) ||
	    s.folios != atomic_load(&cache->nr_folios) ||
	    (int64_t)s.dirty_price != atomic_load(&cache->dirty_charged_bytes) ||
	    s.wb_folio != atomic_load(&cache->wb_folio_bytes)) {
		fprintf(stderr,
			"blockstate: counters do not match folios: charged %lld/%llu dirty part %lld/%llu wb folios %llu/%llu held %llu/%llu wb %llu/%llu pinned %llu/%llu bytes %llu/%llu folios %llu/%llu\n",
			(long long)atomic_load(&cache->charged_bytes), (unsigned long long)s.price,
			(long long)atomic_load(&cache->dirty_charged_bytes), (unsigned long long)s.dirty_price,
			(unsigned long long)atomic_load(&cache->wb_folio_bytes), (unsigned long long)s.wb_folio,
			(unsigned long long)atomic_load(&cache->held_bytes), (unsigned long long)s.held,
			(unsigned long long)atomic_load(&cache->wb_bytes), (unsigned long long)s.wb,
			(unsigned long long)atomic_load(&cache->pinned_bytes), (unsigned long long)s.pinned,
			(unsigned long long)atomic_load(&cache->cache_bytes), (unsigned long long)s.bytes,
			(unsigned long long)atomic_load(&cache->nr_folios), (unsigned long long)s.folios);
		bad = 1;
	}
	return bad ? -EUCLEAN : 0;
}
