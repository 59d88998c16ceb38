// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * throttle_policies.c - the registry of throttle policies, by name: the
 * built-in ones, then those loaded from libraries.  Loading is
 * blockstate's (bs_policy_load_hooked(): the file, the ABI, the
 * accounting and sizing policies); the throttle policies of a library are
 * checked and registered through the hooks here, so that a library is
 * taken whole or not at all.  Loaded slots are written before the count
 * that makes them visible is published (release): lookups take no lock.
 */
#include "throttle.h"
#include "writeback.h"
#include "blockstate.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static const struct wb_throttle_policy *const throttle_policies[] = {
	&wb_throttle_bdp,	/* the default comes first */
	&wb_throttle_strictlimit,
	&wb_throttle_none,
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define LOADED_MAX 32

static struct {
	const struct wb_throttle_policy *policy[LOADED_MAX];
	const char *origin[LOADED_MAX];
	_Atomic size_t count;
} loaded;

const struct wb_throttle_policy *wb_throttle_policy_at(size_t i)
{
	if (i < COUNT(throttle_policies))
		return throttle_policies[i];
	i -= COUNT(throttle_policies);
	return i < atomic_load_explicit(&loaded.count, memory_order_acquire) ?
	       loaded.policy[i] : NULL;
}

const char *wb_throttle_policy_origin(size_t i)
{
	if (i < COUNT(throttle_policies) || !wb_throttle_policy_at(i))
		return NULL;
	return loaded.origin[i - COUNT(throttle_policies)];
}

const struct wb_throttle_policy *wb_throttle_policy_find(const char *name)
{
	const struct wb_throttle_policy *p;

	for (size_t i = 0; (p = wb_throttle_policy_at(i)); i++) {
		if (!strcmp(p->name, name))
			return p;
	}
	return NULL;
}

/* The module's throttle policies are well formed, named anew, and fit. */
static int throttle_check(const struct foliofs_policy_module *m, char *why, size_t len)
{
	size_t n = 0;

	for (; m->throttle && m->throttle[n]; n++) {
		const struct wb_throttle_policy *p = m->throttle[n];

		if (bs_policy_head_check(p->name, p->help,
					 p->freerun && p->pos_ratio && p->rate_target, why, len) ||
		    bs_params_check(p->name, p->params, p->nr_params, why, len))
			return -EINVAL;
		if (wb_throttle_policy_find(p->name)) {
			snprintf(why, len, "throttle policy %s exists already", p->name);
			return -EINVAL;
		}
		for (size_t j = 0; j < n; j++) {
			if (!strcmp(m->throttle[j]->name, p->name)) {
				snprintf(why, len, "throttle policy %s exists already", p->name);
				return -EINVAL;
			}
		}
		if (n >= LOADED_MAX - atomic_load(&loaded.count)) {
			snprintf(why, len, "no room for more loaded policies (%d of each kind)",
				 LOADED_MAX);
			return -EINVAL;
		}
	}
	return 0;
}

/* Context: the loader's lock held; throttle_check() passed. */
static void throttle_add(const struct foliofs_policy_module *m, const char *origin)
{
	for (size_t i = 0; m->throttle && m->throttle[i]; i++) {
		size_t n = atomic_load(&loaded.count);

		loaded.policy[n] = m->throttle[i];
		loaded.origin[n] = origin;
		atomic_store_explicit(&loaded.count, n + 1, memory_order_release);
	}
}

static const struct bs_policy_load_hooks throttle_hooks = {
	.check = throttle_check,
	.add = throttle_add,
};

int wb_policy_load(const char *path, uid_t owner, char *err, size_t errlen)
{
	return bs_policy_load_hooked(path, owner, &throttle_hooks, err, errlen);
}

size_t wb_policy_list(char *buf, size_t size)
{
	const struct wb_throttle_policy *p;
	size_t used = bs_policy_list(buf, size);

	for (size_t i = 0; (p = wb_throttle_policy_at(i)); i++)
		used += bs_policy_list_one(buf + used, size - used, "throttle", p->name,
					   wb_throttle_policy_origin(i), p->params, p->nr_params);
	return used;
}
