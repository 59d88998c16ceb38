// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tunables.c - the mount's run-time settings by name, like /proc/sys/vm:
 * thresholds, expiry and interval of writeback, the accounting policy and
 * the throttle policy.  A value is parsed and checked completely before
 * anything changes; a change of thresholds or policy is pushed to the
 * throttler and the flushers, and the layer holding paused writers is
 * told (wb_set_throttle_notify) so it can re-evaluate them.
 *
 * The parameters of the accounting, sizing and throttle policies in
 * force are tunables too, named account.NAME, size.NAME and throttle.NAME
 * (struct bs_param): a change of an accounting parameter reprices every
 * folio, as a change of policy does, and a change of policy resets its
 * parameters to their defaults.  They come after the fixed tunables in slots of
 * BS_PARAMS_MAX per kind (wb_tunable_slot_name), so that a slot's number
 * stays put while the names in it follow the policy.
 */
#include "wb_i.h"
#include "throttle.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The settings thresholds are computed from. */
struct wb_tunables {
	pthread_mutex_t lock;		/* protects everything below; serializes sets */
	unsigned int dirty_ratio;	/* % of cache_size */
	uint64_t dirty_bytes;		/* overrides the ratio when not 0 */
	unsigned int bg_ratio;
	uint64_t bg_bytes;
	unsigned int pinned_ratio;	/* 0 and pinned_bytes 0: no pinned limit */
	uint64_t pinned_bytes;
	void (*notify)(void *arg);	/* the layer that holds paused writers */
	void *notify_arg;
};

/* Smallest writers' threshold in bytes, as /proc/sys/vm/dirty_bytes. */
#define MIN_DIRTY_BYTES (2ull * BS_PAGE_SIZE)

enum tunable_kind { T_RATIO, T_BYTES, T_MS, T_ACCOUNT, T_THROTTLE, T_RA_MODEL };

struct tunable {
	const char *name;
	enum tunable_kind kind;
	size_t field;		/* offset in struct wb_tunables (ratios, bytes) */
	size_t pair;		/* its pair's offset: set one, zero the other */
};

#define TF(f) offsetof(struct wb_tunables, f)

static const struct tunable tunables[] = {
	{ "dirty_ratio", T_RATIO, TF(dirty_ratio), TF(dirty_bytes) },
	{ "dirty_bytes", T_BYTES, TF(dirty_bytes), TF(dirty_ratio) },
	{ "dirty_background_ratio", T_RATIO, TF(bg_ratio), TF(bg_bytes) },
	{ "dirty_background_bytes", T_BYTES, TF(bg_bytes), TF(bg_ratio) },
	{ "dirty_pinned_ratio", T_RATIO, TF(pinned_ratio), TF(pinned_bytes) },
	{ "dirty_pinned_bytes", T_BYTES, TF(pinned_bytes), TF(pinned_ratio) },
	{ "dirty_expire_ms", T_MS, 0, 0 },
	{ "writeback_interval_ms", T_MS, 0, 0 },
	{ "dirty_account", T_ACCOUNT, 0, 0 },
	{ "throttle", T_THROTTLE, 0, 0 },
	{ "ra_model", T_RA_MODEL, 0, 0 },
};

#define NR_TUNABLES (sizeof(tunables) / sizeof(tunables[0]))

const char *wb_tunable_name(size_t i)
{
	return i < NR_TUNABLES ? tunables[i].name : NULL;
}

/* ---- policy parameters (account.NAME, size.NAME) ---- */

enum param_kind { P_ACCOUNT, P_SIZE, P_THROTTLE };
#define NR_PARAM_KINDS ((size_t)3)
static const char *const param_kinds[NR_PARAM_KINDS] = { "account", "size", "throttle" };

/* The policy in force of @kind: its parameters, name and values. */
static void param_policy(struct wb_ctx *ctx, enum param_kind kind, const struct bs_param **params,
			 unsigned int *nr, const char **name, int64_t *values)
{
	if (kind == P_ACCOUNT) {
		const struct bs_account_policy *p = bs_cache_account_params(ctx->cache, values);

		*params = p->params;
		*nr = p->nr_params;
		*name = p->name;
	} else if (kind == P_SIZE) {
		const struct bs_size_policy *p = bs_cache_size_params(ctx->cache, values);

		*params = p->params;
		*nr = p->nr_params;
		*name = p->name;
	} else {
		const struct wb_throttle_policy *p =
			wb_throttle_get_policy_params(ctx->throttle, values);

		*params = p->params;
		*nr = p->nr_params;
		*name = p->name;
	}
}

size_t wb_tunable_slots(void)
{
	return NR_TUNABLES + NR_PARAM_KINDS * BS_PARAMS_MAX;
}

int wb_tunable_slot_name(struct wb_ctx *ctx, size_t i, char *buf, size_t len)
{
	const struct bs_param *params;
	int64_t values[BS_PARAMS_MAX];
	const char *policy;
	unsigned int nr;
	size_t k;

	if (i < NR_TUNABLES) {
		snprintf(buf, len, "%s", tunables[i].name);
		return 0;
	}
	i -= NR_TUNABLES;
	if (i >= NR_PARAM_KINDS * BS_PARAMS_MAX)
		return -ENOENT;
	k = i % BS_PARAMS_MAX;
	pthread_mutex_lock(&ctx->tunables->lock);
	param_policy(ctx, (enum param_kind)(i / BS_PARAMS_MAX), &params, &nr, &policy, values);
	if (k < nr)
		snprintf(buf, len, "%s.%s", param_kinds[i / BS_PARAMS_MAX], params[k].name);
	pthread_mutex_unlock(&ctx->tunables->lock);
	return k < nr ? 0 : -ENOENT;
}

/*
 * Split "account.share" into its kind and parameter name: false when
 * @name is no parameter's tunable name.
 */
static bool param_name(const char *name, enum param_kind *kind, const char **pname)
{
	for (size_t k = 0; k < NR_PARAM_KINDS; k++) {
		size_t n = strlen(param_kinds[k]);

		if (!strncmp(name, param_kinds[k], n) && name[n] == '.') {
			*kind = (enum param_kind)k;
			*pname = name + n + 1;
			return true;
		}
	}
	return false;
}

/*
 * Parameter @pname of the @kind policy in force: its index, or -ENOENT
 * with the reason in @err (when @err).  Context: tunables lock held.
 */
static int param_find(struct wb_ctx *ctx, enum param_kind kind, const char *pname,
		      const struct bs_param **p, int64_t *values, char *err, size_t errlen)
{
	const struct bs_param *params;
	const char *policy;
	unsigned int nr;
	int i;

	param_policy(ctx, kind, &params, &nr, &policy, values);
	i = bs_param_index(params, nr, pname);
	if (i < 0 && err)
		bs_param_unknown(param_kinds[kind], policy, params, nr, pname, err, errlen);
	if (i >= 0)
		*p = &params[i];
	return i;
}

static int param_get(struct wb_ctx *ctx, enum param_kind kind, const char *pname,
		     char *buf, size_t len)
{
	int64_t values[BS_PARAMS_MAX];
	const struct bs_param *p;
	int i, n;

	pthread_mutex_lock(&ctx->tunables->lock);
	i = param_find(ctx, kind, pname, &p, values, NULL, 0);
	n = i < 0 ? i : snprintf(buf, len, "%" PRId64, values[i]);
	pthread_mutex_unlock(&ctx->tunables->lock);
	return n < 0 && i >= 0 ? 0 : n;
}

/* Context: tunables lock held. */
static int param_set(struct wb_ctx *ctx, enum param_kind kind, const char *pname,
		     const char *val, char *err, size_t errlen)
{
	int64_t values[BS_PARAMS_MAX];
	const struct bs_param *p;
	int i = param_find(ctx, kind, pname, &p, values, err, errlen);

	if (i < 0)
		return i;
	if (bs_param_parse(param_kinds[kind], p, val, &values[i], err, errlen))
		return -EINVAL;
	if (kind == P_ACCOUNT)
		return bs_cache_set_account_params(ctx->cache, bs_cache_account(ctx->cache), values);
	if (kind == P_THROTTLE) {
		wb_throttle_set_policy_params(ctx->throttle, wb_throttle_get_policy(ctx->throttle),
					      values);
		return 0;
	}
	return bs_cache_set_size_params(ctx->cache, values);
}

size_t wb_ctx_param_stats(struct wb_ctx *ctx, char *buf, size_t size)
{
	size_t used = 0;

	for (size_t k = 0; k < NR_PARAM_KINDS; k++) {
		const struct bs_param *params;
		int64_t values[BS_PARAMS_MAX];
		const char *policy;
		unsigned int nr;

		param_policy(ctx, (enum param_kind)k, &params, &nr, &policy, values);
		for (unsigned int i = 0; i < nr && used < size; i++) {
			int n = snprintf(buf + used, size - used, "%s.%s %" PRId64 "\n",
					 param_kinds[k], params[i].name, values[i]);

			if (n > 0)
				used += (size_t)n;
		}
	}
	return used < size ? used : size;
}

static const struct tunable *find(const char *name)
{
	for (size_t i = 0; i < NR_TUNABLES; i++)
		if (!strcmp(tunables[i].name, name))
			return &tunables[i];
	return NULL;
}

static unsigned int *ratio_at(struct wb_tunables *tn, size_t off)
{
	return (unsigned int *)((char *)tn + off);
}

static uint64_t *bytes_at(struct wb_tunables *tn, size_t off)
{
	return (uint64_t *)((char *)tn + off);
}

int wb_tunables_create(struct wb_ctx *ctx)
{
	struct wb_tunables *tn = calloc(1, sizeof(*tn));

	if (!tn)
		return -ENOMEM;
	pthread_mutex_init(&tn->lock, NULL);
	tn->dirty_ratio = ctx->cfg.dirty_ratio;
	tn->dirty_bytes = ctx->cfg.dirty_bytes;
	tn->bg_ratio = ctx->cfg.dirty_background_ratio;
	tn->bg_bytes = ctx->cfg.dirty_background_bytes;
	tn->pinned_ratio = ctx->cfg.dirty_pinned_ratio;
	tn->pinned_bytes = ctx->cfg.dirty_pinned_bytes;
	/* As in /proc/sys/vm, a byte count in force reads its ratio as 0. */
	if (tn->dirty_bytes)
		tn->dirty_ratio = 0;
	if (tn->bg_bytes)
		tn->bg_ratio = 0;
	if (tn->pinned_bytes)
		tn->pinned_ratio = 0;
	ctx->tunables = tn;
	return 0;
}

void wb_tunables_destroy(struct wb_ctx *ctx)
{
	if (!ctx->tunables)
		return;
	pthread_mutex_destroy(&ctx->tunables->lock);
	free(ctx->tunables);
	ctx->tunables = NULL;
}

/*
 * Thresholds in pages from the settings, also published to the flushers
 * (ctx->bg_thresh, pinned_bg_thresh).  Context: tunables lock held, or
 * before the context is shared.
 */
void wb_tunables_publish(struct wb_ctx *ctx, struct wb_throttle_limits *l)
{
	struct wb_tunables *tn = ctx->tunables;

	wb_throttle_limits_of(bs_cache_config(ctx->cache)->cache_size,
			      tn->dirty_ratio, tn->dirty_bytes, tn->bg_ratio, tn->bg_bytes,
			      tn->pinned_ratio, tn->pinned_bytes, l);
	/* The flushers' copies, read without a lock after every write. */
	atomic_store(&ctx->bg_thresh, l->bg_thresh * BS_PAGE_SIZE);
	atomic_store(&ctx->pinned_bg_thresh,
		     l->pinned_thresh ? l->pinned_bg_thresh * BS_PAGE_SIZE : 0);
}

/* Push new thresholds to the throttler and the flushers.  Context: tunables lock held. */
static void apply_limits(struct wb_ctx *ctx)
{
	struct wb_throttle_limits l;

	wb_tunables_publish(ctx, &l);
	wb_throttle_set_limits(ctx->throttle, &l);
}

void wb_set_throttle_notify(struct wb_ctx *ctx, void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&ctx->tunables->lock);
	ctx->tunables->notify = fn;
	ctx->tunables->notify_arg = arg;
	pthread_mutex_unlock(&ctx->tunables->lock);
}

/* ---- values ---- */

/*
 * @val without surrounding blanks (a trailing newline among them) into
 * @buf: 0, or -EINVAL if what is left does not fit (never cut silently).
 */
static int trim(const char *val, char *buf, size_t len)
{
	size_t n;

	while (isspace((unsigned char)*val))
		val++;
	n = strlen(val);
	while (n && isspace((unsigned char)val[n - 1]))
		n--;
	if (n >= len)
		return -EINVAL;
	memcpy(buf, val, n);
	buf[n] = '\0';
	return 0;
}

int wb_tunable_get(struct wb_ctx *ctx, const char *name, char *buf, size_t len)
{
	const struct tunable *t = find(name);
	struct wb_tunables *tn = ctx->tunables;
	enum param_kind kind;
	const char *pname;
	int n;

	if (!t && param_name(name, &kind, &pname))
		return param_get(ctx, kind, pname, buf, len);
	if (!t)
		return -ENOENT;
	pthread_mutex_lock(&tn->lock);
	switch (t->kind) {
	case T_RATIO:
		n = snprintf(buf, len, "%u", *ratio_at(tn, t->field));
		break;
	case T_BYTES:
		n = snprintf(buf, len, "%" PRIu64, *bytes_at(tn, t->field));
		break;
	case T_MS:
		n = snprintf(buf, len, "%u", atomic_load(!strcmp(name, "dirty_expire_ms") ?
							 &ctx->expire_ms : &ctx->interval_ms));
		break;
	case T_ACCOUNT:
		n = snprintf(buf, len, "%s", bs_cache_account(ctx->cache)->name);
		break;
	case T_RA_MODEL:
		n = snprintf(buf, len, "%s", bs_ra_model_name(bs_cache_ra_model(ctx->cache)));
		break;
	default:
		n = snprintf(buf, len, "%s", wb_throttle_get_policy(ctx->throttle)->name);
		break;
	}
	pthread_mutex_unlock(&tn->lock);
	return n < 0 ? 0 : n;
}

/* A list of the names of @kind's policies, for error messages. */
static void policy_names(enum tunable_kind kind, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0;; i++) {
		const char *name;

		if (kind == T_ACCOUNT)
			name = bs_account_policy_at(i) ? bs_account_policy_at(i)->name : NULL;
		else
			name = wb_throttle_policy_at(i) ? wb_throttle_policy_at(i)->name : NULL;
		if (!name || used >= len)
			break;
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", name);
	}
}

static int set_number(struct wb_ctx *ctx, const struct tunable *t, const char *val,
		      char *err, size_t errlen)
{
	struct wb_tunables *tn = ctx->tunables;
	uint64_t v;

	/* The parser's message is replaced below by one in the tunable's terms. */
	if ((t->kind == T_BYTES ? wb_parse_size : wb_parse_uint)(t->name, val, 0, UINT64_MAX, &v,
								   err, errlen))
		goto bad;
	switch (t->kind) {
	case T_RATIO:
		if (v > 100 || (v == 0 && t->field == TF(dirty_ratio)))
			goto bad;
		*ratio_at(tn, t->field) = (unsigned int)v;
		if (v || t->field != TF(pinned_ratio))
			*bytes_at(tn, t->pair) = 0;
		break;
	case T_BYTES:
		/* As /proc/sys/vm/dirty_bytes: 0 would leave no threshold at all. */
		if (t->field == TF(dirty_bytes) && v < MIN_DIRTY_BYTES)
			goto bad;
		if (v > UINT64_MAX / 2)
			goto bad;
		*bytes_at(tn, t->field) = v;
		if (v)
			*ratio_at(tn, t->pair) = 0;
		break;
	default:
		if (v > 24ull * 3600 * 1000)
			goto bad;
		atomic_store(!strcmp(t->name, "dirty_expire_ms") ? &ctx->expire_ms : &ctx->interval_ms,
			     (uint32_t)v);
		/* A flusher asleep for the old interval would not see a shorter one. */
		wb_flushers_kick(ctx);
		return 0;
	}
	apply_limits(ctx);
	return 0;
bad:
	switch (t->kind) {
	case T_RATIO:
		snprintf(err, errlen, "%s=%s: a whole percentage in [%d, 100]", t->name, val,
			 t->field == TF(dirty_ratio) ? 1 : 0);
		break;
	case T_BYTES:
		snprintf(err, errlen, "%s=%s: a byte count (suffix K, M, G or T)%s", t->name, val,
			 t->field == TF(dirty_bytes) ?
			 ", at least 8192 (write dirty_ratio to go back to a ratio)" : "");
		break;
	default:
		snprintf(err, errlen, "%s=%s: milliseconds in [0, 86400000]", t->name, val);
		break;
	}
	return -EINVAL;
}

int wb_tunable_set(struct wb_ctx *ctx, const char *name, const char *val,
		   char *err, size_t errlen)
{
	const struct tunable *t = find(name);
	struct wb_tunables *tn = ctx->tunables;
	void (*notify)(void *arg);
	void *notify_arg;
	char v[128], names[256];
	enum param_kind kind;
	const char *pname;
	int ret = 0;

	if (!t && param_name(name, &kind, &pname)) {
		int64_t values[BS_PARAMS_MAX];
		const struct bs_param *p;

		pthread_mutex_lock(&tn->lock);
		/* No such parameter is no such tunable, whatever the value. */
		ret = param_find(ctx, kind, pname, &p, values, err, errlen);
		if (ret >= 0 && trim(val, v, sizeof(v))) {
			snprintf(err, errlen, "%s: a value of %zu characters or more is not one we take",
				 name, sizeof(v));
			ret = -EINVAL;
		} else if (ret >= 0) {
			ret = param_set(ctx, kind, pname, v, err, errlen);
		}
		notify = tn->notify;
		notify_arg = tn->notify_arg;
		pthread_mutex_unlock(&tn->lock);
		if (ret)
			return ret;
		/* A repricing moves the charge, a throttle parameter the line: writers held may go. */
		if (notify && kind != P_SIZE)
			notify(notify_arg);
		wb_flushers_poke(ctx);
		return 0;
	}
	if (!t) {
		snprintf(err, errlen, "%s: no such tunable", name);
		return -ENOENT;
	}
	if (trim(val, v, sizeof(v))) {
		snprintf(err, errlen, "%s: a value of %zu characters or more is not one we take",
			 t->name, sizeof(v));
		return -EINVAL;
	}
	pthread_mutex_lock(&tn->lock);
	if (t->kind == T_ACCOUNT) {
		const struct bs_account_policy *p = bs_account_policy_find(v);

		if (p)
			bs_cache_set_account(ctx->cache, p);
		else
			ret = -EINVAL;
	} else if (t->kind == T_THROTTLE) {
		const struct wb_throttle_policy *p = wb_throttle_policy_find(v);

		if (p)
			wb_throttle_set_policy(ctx->throttle, p);
		else
			ret = -EINVAL;
	} else if (t->kind == T_RA_MODEL) {
		unsigned int model;

		ret = bs_ra_model_parse(v, &model);
		if (ret)
			snprintf(err, errlen, "%s=%s: not a readahead model (6.16, or 6.17 for 6.17 and later)",
				 t->name, v);
		else
			bs_cache_set_ra_model(ctx->cache, model);
	} else {
		ret = set_number(ctx, t, v, err, errlen);
	}
	if (ret && (t->kind == T_ACCOUNT || t->kind == T_THROTTLE)) {
		policy_names(t->kind, names, sizeof(names));
		snprintf(err, errlen, "%s=%s: unknown policy (one of %s)", t->name, v, names);
	}
	notify = tn->notify;
	notify_arg = tn->notify_arg;
	pthread_mutex_unlock(&tn->lock);
	if (ret)
		return ret;
	/* Writers held under the old settings may go now. */
	if (notify && t->kind != T_MS && t->kind != T_RA_MODEL)
		notify(notify_arg);
	wb_flushers_poke(ctx);
	return 0;
}
