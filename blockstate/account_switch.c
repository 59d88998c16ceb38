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
 * A change of parameter values is the same switch: a new instance of
 * the policy with the new values (struct bs_policy_inst), published and
 * then applied to every folio.
 *
 * Repricing is not dirtying or writing: nr_dirtied and nr_written do not
 * move (they count what writers and writeback did).
 */
#include "bs_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * A new instance of @account or @size with @params (NULL: the defaults),
 * put on the cache's list.  Context: files_lock held, or the cache not
 * shared yet.
 */
static struct bs_policy_inst *inst_new(struct bs_cache *cache,
				       const struct bs_account_policy *account,
				       const struct bs_size_policy *size, const int64_t *params)
{
	struct bs_policy_inst *inst = calloc(1, sizeof(*inst));

	if (!inst)
		return NULL;
	inst->account = account;
	inst->size = size;
	if (params)
		memcpy(inst->params, params, sizeof(inst->params));
	else if (account)
		bs_params_defaults(account->params, account->nr_params, inst->params);
	else
		bs_params_defaults(size->params, size->nr_params, inst->params);
	inst->next = cache->insts;
	cache->insts = inst;
	return inst;
}

/* The config's values: those set, the defaults for the others. */
static void config_values(const struct bs_param *params, unsigned int nr, const int64_t *given,
			  uint32_t set, int64_t *values)
{
	bs_params_defaults(params, nr, values);
	for (unsigned int i = 0; i < nr; i++) {
		if (set & (1u << i))
			values[i] = given[i];
	}
}

int bs_cache_insts_init(struct bs_cache *cache)
{
	const struct bs_config *cfg = &cache->cfg;
	int64_t values[BS_PARAMS_MAX];
	struct bs_policy_inst *account, *size;

	config_values(cfg->account->params, cfg->account->nr_params, cfg->account_params,
		      cfg->account_set, values);
	account = inst_new(cache, cfg->account, NULL, values);
	config_values(cfg->size->params, cfg->size->nr_params, cfg->size_params,
		      cfg->size_set, values);
	size = account ? inst_new(cache, NULL, cfg->size, values) : NULL;
	if (!size) {
		bs_cache_insts_free(cache);
		return -ENOMEM;
	}
	atomic_init(&cache->account, account);
	atomic_init(&cache->size, size);
	return 0;
}

void bs_cache_insts_free(struct bs_cache *cache)
{
	while (cache->insts) {
		struct bs_policy_inst *next = cache->insts->next;

		free(cache->insts);
		cache->insts = next;
	}
}

const struct bs_account_policy *bs_cache_account(struct bs_cache *cache)
{
	return atomic_load(&cache->account)->account;
}

const struct bs_account_policy *bs_cache_account_params(struct bs_cache *cache, int64_t *params)
{
	const struct bs_policy_inst *inst = atomic_load(&cache->account);

	memcpy(params, inst->params, sizeof(inst->params));
	return inst->account;
}

const struct bs_size_policy *bs_cache_size(struct bs_cache *cache)
{
	return atomic_load(&cache->size)->size;
}

const struct bs_size_policy *bs_cache_size_params(struct bs_cache *cache, int64_t *params)
{
	const struct bs_policy_inst *inst = atomic_load(&cache->size);

	memcpy(params, inst->params, sizeof(inst->params));
	return inst->size;
}

/* Nothing to reprice: the values are read at each new folio. */
int bs_cache_set_size_params(struct bs_cache *cache, const int64_t *params)
{
	struct bs_policy_inst *inst;

	pthread_mutex_lock(&cache->files_lock);
	inst = inst_new(cache, NULL, bs_cache_size(cache), params);
	if (inst)
		atomic_store(&cache->size, inst);
	pthread_mutex_unlock(&cache->files_lock);
	return inst ? 0 : -ENOMEM;
}

int bs_cache_set_account(struct bs_cache *cache, const struct bs_account_policy *policy)
{
	return bs_cache_set_account_params(cache, policy, NULL);
}

int bs_cache_set_account_params(struct bs_cache *cache, const struct bs_account_policy *policy,
				const int64_t *params)
{
	struct bs_policy_inst *inst;
	struct bs_file *file;

	pthread_mutex_lock(&cache->files_lock);
	inst = inst_new(cache, policy, NULL, params);
	if (!inst) {
		pthread_mutex_unlock(&cache->files_lock);
		return -ENOMEM;
	}
	/* Odd while folios may still carry old prices (for debug checks). */
	atomic_fetch_add(&cache->account_switching, 1);
	atomic_store(&cache->account, inst);
	/*
	 * Every folio, not only the tagged ones: a folio a writer priced by
	 * the old policy may not be tagged yet (its tag follows a step
	 * behind), but that writer held the folio lock we take next.  The
	 * file list lock is held across each file's walk so no file is freed
	 * under us; nothing that holds an index or folio lock takes the file
	 * list lock, so this order cannot deadlock.
	 */
	list_for_each_entry(file, &cache->files, files_link) {
		pthread_rwlock_rdlock(&file->index_lock);
		for (struct bs_folio *f = bs_index_next(&file->index, 0); f;
		     f = bs_index_next(&file->index, f->start + f->size)) {
			bs_folio_lock(f);
			bs_folio_reprice(f);
			bs_folio_unlock_raw(f);
		}
		pthread_rwlock_unlock(&file->index_lock);
	}
	pthread_mutex_unlock(&cache->files_lock);
	atomic_fetch_add(&cache->account_switching, 1);
	return 0;
}
