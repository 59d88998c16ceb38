// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * policies.c - the registry of accounting and sizing policies, by name:
 * the built-in ones, then those loaded from libraries (policy_load.c).
 *
 * Loaded policies are appended and never removed: a slot is written
 * under registry_lock before the count that makes it visible is
 * published (release), so lookups take no lock.
 */
#include "policy.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static const struct bs_account_policy *const account_policies[] = {
	&bs_account_page,	/* the default comes first */
	&bs_account_folio,
	&bs_account_block,
	&bs_account_pinned,
};

static const struct bs_size_policy *const size_policies[] = {
	&bs_size_fixed,		/* the default is kernel (writeback/options.h) */
	&bs_size_ramp,
	&bs_size_kernel,
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The loaded ones: slots below the count are immutable. */
static struct {
	const struct bs_account_policy *policy[BS_LOADED_MAX];
	const char *origin[BS_LOADED_MAX];
	_Atomic size_t count;
} loaded_account;
static struct {
	const struct bs_size_policy *policy[BS_LOADED_MAX];
	const char *origin[BS_LOADED_MAX];
	_Atomic size_t count;
} loaded_size;

const struct bs_account_policy *bs_account_policy_at(size_t i)
{
	if (i < COUNT(account_policies))
		return account_policies[i];
	i -= COUNT(account_policies);
	return i < atomic_load_explicit(&loaded_account.count, memory_order_acquire) ?
	       loaded_account.policy[i] : NULL;
}

const struct bs_size_policy *bs_size_policy_at(size_t i)
{
	if (i < COUNT(size_policies))
		return size_policies[i];
	i -= COUNT(size_policies);
	return i < atomic_load_explicit(&loaded_size.count, memory_order_acquire) ?
	       loaded_size.policy[i] : NULL;
}

const char *bs_account_policy_origin(size_t i)
{
	if (i < COUNT(account_policies) || !bs_account_policy_at(i))
		return NULL;
	return loaded_account.origin[i - COUNT(account_policies)];
}

const char *bs_size_policy_origin(size_t i)
{
	if (i < COUNT(size_policies) || !bs_size_policy_at(i))
		return NULL;
	return loaded_size.origin[i - COUNT(size_policies)];
}

const struct bs_account_policy *bs_account_policy_find(const char *name)
{
	const struct bs_account_policy *p;

	for (size_t i = 0; (p = bs_account_policy_at(i)); i++) {
		if (!strcmp(p->name, name))
			return p;
	}
	return NULL;
}

const struct bs_size_policy *bs_size_policy_find(const char *name)
{
	const struct bs_size_policy *p;

	for (size_t i = 0; (p = bs_size_policy_at(i)); i++) {
		if (!strcmp(p->name, name))
			return p;
	}
	return NULL;
}

size_t bs_policy_list_one(char *buf, size_t size, const char *kind, const char *name,
			  const char *origin, const struct bs_param *params, unsigned int nr)
{
	int n;

	if (!size)
		return 0;
	n = snprintf(buf, size, "%s %s %s", kind, name, origin ? origin : "builtin");
	for (unsigned int i = 0; n >= 0 && (size_t)n < size && i < nr; i++)
		n += snprintf(buf + n, size - (size_t)n, " %s=%lld[%lld,%lld]", params[i].name,
			      (long long)params[i].def, (long long)params[i].min,
			      (long long)params[i].max);
	if (n >= 0 && (size_t)n < size)
		n += snprintf(buf + n, size - (size_t)n, "\n");
	if (n >= 0 && (size_t)n < size)
		return (size_t)n;
	/* A line that does not fit is left out whole. */
	buf[0] = '\0';
	return 0;
}

size_t bs_policy_list(char *buf, size_t size)
{
	const struct bs_account_policy *a;
	const struct bs_size_policy *s;
	size_t used = 0;

	if (!size)
		return 0;
	buf[0] = '\0';
	for (size_t i = 0; (a = bs_account_policy_at(i)); i++)
		used += bs_policy_list_one(buf + used, size - used, "account", a->name,
					   bs_account_policy_origin(i), a->params, a->nr_params);
	for (size_t i = 0; (s = bs_size_policy_at(i)); i++)
		used += bs_policy_list_one(buf + used, size - used, "size", s->name,
					   bs_size_policy_origin(i), s->params, s->nr_params);
	return used;
}

size_t bs_policy_loaded_room(bool account)
{
	return BS_LOADED_MAX - atomic_load(account ? &loaded_account.count : &loaded_size.count);
}

/* Context: the loader's lock held (one registration at a time). */
void bs_account_policy_register(const struct bs_account_policy *p, const char *origin)
{
	size_t n = atomic_load(&loaded_account.count);

	loaded_account.policy[n] = p;
	loaded_account.origin[n] = origin;
	atomic_store_explicit(&loaded_account.count, n + 1, memory_order_release);
}

void bs_size_policy_register(const struct bs_size_policy *p, const char *origin)
{
	size_t n = atomic_load(&loaded_size.count);

	loaded_size.policy[n] = p;
	loaded_size.origin[n] = origin;
	atomic_store_explicit(&loaded_size.count, n + 1, memory_order_release);
}
