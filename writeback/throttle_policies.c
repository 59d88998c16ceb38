// SPDX-License-Identifier: GPL-2.0-or-later
/* throttle_policies.c - the registry of throttle policies, by name. */
#include "throttle.h"

#include <string.h>

static const struct wb_throttle_policy *const throttle_policies[] = {
	&wb_throttle_bdp,	/* the default comes first */
	&wb_throttle_strictlimit,
	&wb_throttle_none,
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

const struct wb_throttle_policy *wb_throttle_policy_at(size_t i)
{
	return i < COUNT(throttle_policies) ? throttle_policies[i] : NULL;
}

const struct wb_throttle_policy *wb_throttle_policy_find(const char *name)
{
	for (size_t i = 0; i < COUNT(throttle_policies); i++) {
		if (!strcmp(throttle_policies[i]->name, name))
			return throttle_policies[i];
	}
	return NULL;
}
