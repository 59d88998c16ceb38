// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * account_switch.c - changing the accounting policy of a live cache.
 *
 * The charge is kept equal to the sum of the folios' stored prices: every
 * change of a folio's held state charges the difference between its new
 * price and its stored one.  Switching the policy therefore needs only
 * two steps: publish the new policy (prices computed from then on use it),
 * then visit every folio and, under its lock, replace its stored price by
 * the new policy's price, charging the difference.  A folio changed by a
 * writer between the two steps was already repriced by the new policy and
 * the visit changes nothing; a folio created after the first step is
 * priced by the new policy from the start.  At every quiescent point the
 * charge is again exactly the sum of the new prices.
 *
 * Repricing is not dirtying or writing: nr_dirtied and nr_written do not
 * move (they count what writers and writeback did).
 */
#include "bs_i.h"

const struct bs_account_policy *bs_cache_account(struct bs_cache *cache)
{
	return atomic_load(&cache->account);
}

void bs_cache_set_account(struct bs_cache *cache, const struct bs_account_policy *policy)
{
	/* Odd while folios may still carry old prices (for debug checks). */
	atomic_fetch_add(&cache->account_switching, 1);
	atomic_store(&cache->account, policy);
	/*
	 * Every folio, not only the tagged ones: a folio a writer priced by
	 * the old policy may not be tagged yet (its tag follows a step
	 * behind), but that writer held the folio lock we take next.  The
	 * file list lock is held across each file's walk so no file is freed
	 * under us; nothing that holds an index or folio lock takes the file
	 * list lock, so this order cannot deadlock.
	 */
	pthread_mutex_lock(&cache->files_lock);
	for (struct bs_file *file = cache->files; file; file = file->next) {
		pthread_rwlock_rdlock(&file->index_lock);
		for (struct bs_folio *f = bs_index_next(&file->index, 0); f;
		     f = bs_index_next(&file->index, f->start + f->size)) {
			pthread_mutex_lock(&f->lock);
			bs_folio_reprice(f);
			pthread_mutex_unlock(&f->lock);
		}
		pthread_rwlock_unlock(&file->index_lock);
	}
	pthread_mutex_unlock(&cache->files_lock);
	atomic_fetch_add(&cache->account_switching, 1);
}
