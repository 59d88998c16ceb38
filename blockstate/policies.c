// SPDX-License-Identifier: GPL-2.0-or-later
/* policies.c - the registry of accounting and sizing policies, by name. */
#include "policy.h"

#include <string.h>

static const struct bs_account_policy *const account_policies[] = {
	&bs_account_page,	/* the default comes first */
	&bs_account_folio,
	&bs_account_block,
};

static const struct bs_size_policy *const size_policies[] = {
	&bs_size_fixed,		/* the default comes first */
	&bs_size_ramp,
	&bs_size_kernel,
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

const struct bs_account_policy *bs_account_policy_at(size_t i)
{
	return i < COUNT(account_policies) ? account_policies[i] : NULL;
}

const struct bs_size_policy *bs_size_policy_at(size_t i)
{
	return i < COUNT(size_policies) ? size_policies[i] : NULL;
}

const struct bs_account_policy *bs_account_policy_find(const char *name)
{
	for (size_t i = 0; i < COUNT(account_policies); i++) {
		if (!strcmp(account_policies[i]->name, name))
			return account_policies[i];
	}
	return NULL;
}

const struct bs_size_policy *bs_size_policy_find(const char *name)
{
	for (size_t i = 0; i < COUNT(size_policies); i++) {
		if (!strcmp(size_policies[i]->name, name))
			return size_policies[i];
	}
	return NULL;
}
