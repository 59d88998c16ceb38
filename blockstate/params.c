// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * params.c - named integer parameters of policies (struct bs_param):
 * lookup, parsing with the same one-line errors as every option, and the
 * checks a policy passes before it is registered (built in or loaded).
 */
#include "blockstate.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bs_param_index(const struct bs_param *params, unsigned int nr, const char *name)
{
	for (unsigned int i = 0; i < nr; i++) {
		if (!strcmp(params[i].name, name))
			return (int)i;
	}
	return -ENOENT;
}

void bs_params_defaults(const struct bs_param *params, unsigned int nr, int64_t *values)
{
	memset(values, 0, BS_PARAMS_MAX * sizeof(*values));
	for (unsigned int i = 0; i < nr && i < BS_PARAMS_MAX; i++)
		values[i] = params[i].def;
}

int bs_param_parse(const char *kind, const struct bs_param *p, const char *val,
		   int64_t *out, char *err, size_t errlen)
{
	const char *s = val;
	bool neg = *s == '-';
	uint64_t v = 0;
	int64_t x;

	if (neg)
		s++;
	if (*s < '0' || *s > '9')
		goto bad;
	/* By hand: strtoll takes blanks and '+', and clamps on overflow. */
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned int d = (unsigned int)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			goto bad;
		v = v * 10 + d;
	}
	if (*s || v > (uint64_t)INT64_MAX + neg)
		goto bad;
	x = !neg ? (int64_t)v : v > (uint64_t)INT64_MAX ? INT64_MIN : -(int64_t)v;
	if (x < p->min || x > p->max)
		goto bad;
	*out = x;
	return 0;
bad:
	snprintf(err, errlen, "%s.%s=%s: an integer in [%" PRId64 ", %" PRId64 "]%s%s",
		 kind, p->name, val, p->min, p->max, p->unit && *p->unit ? ", " : "",
		 p->unit ? p->unit : "");
	return -EINVAL;
}

void bs_param_unknown(const char *kind, const char *policy, const struct bs_param *params,
		      unsigned int nr, const char *name, char *err, size_t errlen)
{
	char names[BS_PARAMS_MAX * (BS_NAME_MAX + 2) + 1] = "";
	size_t used = 0;

	for (unsigned int i = 0; i < nr; i++)
		used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s",
					 i ? ", " : "", params[i].name);
	snprintf(err, errlen, "%s.%s: not a parameter of %s=%s (%s%s)", kind, name,
		 !strcmp(kind, "account") ? "dirty_account" :
		 !strcmp(kind, "size") ? "folio_policy" : kind, policy,
		 nr ? "it has: " : "it has none", names);
}

/* [a-z0-9_], 1 .. BS_NAME_MAX characters. */
static bool name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (!n || n > BS_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

int bs_params_check(const char *policy, const struct bs_param *params, unsigned int nr,
		    char *err, size_t errlen)
{
	if (nr > BS_PARAMS_MAX || (nr && !params)) {
		snprintf(err, errlen, "policy %s: %u parameters (at most %d)", policy, nr,
			 BS_PARAMS_MAX);
		return -EINVAL;
	}
	for (unsigned int i = 0; i < nr; i++) {
		const struct bs_param *p = &params[i];

		if (!name_ok(p->name) || !p->help) {
			snprintf(err, errlen, "policy %s: parameter %u: a name of [a-z0-9_] (at most %d) and a help line",
				 policy, i, BS_NAME_MAX);
			return -EINVAL;
		}
		if (bs_param_index(params, i, p->name) >= 0) {
			snprintf(err, errlen, "policy %s: parameter %s declared twice", policy, p->name);
			return -EINVAL;
		}
		if (p->min > p->max || p->def < p->min || p->def > p->max) {
			snprintf(err, errlen, "policy %s: parameter %s: default %" PRId64
				 " not in [%" PRId64 ", %" PRId64 "]", policy, p->name, p->def,
				 p->min, p->max);
			return -EINVAL;
		}
	}
	return 0;
}

int bs_policy_head_check(const char *name, const char *help, bool cb, char *err, size_t errlen)
{
	if (!name_ok(name)) {
		snprintf(err, errlen, "a policy name of [a-z0-9_] (at most %d characters) is needed, not \"%.40s\"",
			 BS_NAME_MAX, name ? name : "(null)");
		return -EINVAL;
	}
	if (!help || !cb) {
		snprintf(err, errlen, "policy %s: no %s", name, help ? "callback" : "help line");
		return -EINVAL;
	}
	return 0;
}

int bs_account_policy_check(const struct bs_account_policy *p, char *err, size_t errlen)
{
	if (bs_policy_head_check(p->name, p->help, p->price, err, errlen))
		return -EINVAL;
	return bs_params_check(p->name, p->params, p->nr_params, err, errlen);
}

int bs_size_policy_check(const struct bs_size_policy *p, char *err, size_t errlen)
{
	if (bs_policy_head_check(p->name, p->help, p->order, err, errlen))
		return -EINVAL;
	return bs_params_check(p->name, p->params, p->nr_params, err, errlen);
}
