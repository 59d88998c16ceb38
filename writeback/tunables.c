// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tunables.c - the mount's run-time settings by name, like /proc/sys/vm:
 * thresholds, expiry and interval of writeback, the accounting policy,
 * the throttle policy and the readahead model: the rows of the option
 * registry flagged WB_OPT_TUNABLE (options.h), in its order, with the
 * options' grammar and ranges.  A value is parsed and checked completely
 * before anything changes; a change of thresholds or policy is pushed to the
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
 *
 * The policies in force, by name, and a count of their changes at run
 * time are lines of the stats (wb_ctx_policy_stats), so that every sample
 * of the stats log says which policy it was taken under.
 */
#include "wb_i.h"
#include "options.h"
#include "throttle.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The live settings: writeback's options (options.h) bound as in
 * struct wb_opt_root, of which the tunables' rows use the thresholds and
 * the writeback times; the policies and the readahead model live in the
 * cache and the throttler.
 */
struct wb_tunables {
	pthread_mutex_t lock;		/* protects everything below; serializes sets */
	/*
	 * Changes of dirty_account, throttle, ra_model or a policy parameter
	 * (a write of the value in force is none).  Written under lock, read
	 * without it by the stats.
	 */
	_Atomic uint64_t policy_switches;
	struct wb_opt_root live;
	void (*notify)(void *arg);	/* the layer that holds paused writers */
	void *notify_arg;
};

/* The @i-th row of the registry that is a tunable, in the registry's order, or NULL. */
static const struct wb_opt *tunable_at(size_t i)
{
	const struct wb_opt *opt;

	for (size_t r = 0; (opt = wb_opt_at(r)); r++) {
		if ((opt->flags & WB_OPT_TUNABLE) && !i--)
			return opt;
	}
	return NULL;
}

static size_t nr_tunables(void)
{
	size_t n = 0;

	while (tunable_at(n))
		n++;
	return n;
}

const char *wb_tunable_name(size_t i)
{
	const struct wb_opt *opt = tunable_at(i);

	return opt ? opt->name : NULL;
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
	return nr_tunables() + NR_PARAM_KINDS * BS_PARAMS_MAX;
}

int wb_tunable_slot_name(struct wb_ctx *ctx, size_t i, char *buf, size_t len)
{
	const struct bs_param *params;
	int64_t values[BS_PARAMS_MAX];
	const char *policy;
	unsigned int nr;
	size_t k, fixed = nr_tunables();

	if (i < fixed) {
		snprintf(buf, len, "%s", tunable_at(i)->name);
		return 0;
	}
	i -= fixed;
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
	int64_t values[BS_PARAMS_MAX], old;
	const struct bs_param *p;
	int i = param_find(ctx, kind, pname, &p, values, err, errlen);

	if (i < 0)
		return i;
	old = values[i];
	if (bs_param_parse(param_kinds[kind], p, val, &values[i], err, errlen))
		return -EINVAL;
	if (values[i] != old)
		atomic_fetch_add(&ctx->tunables->policy_switches, 1);
	if (kind == P_ACCOUNT)
		return bs_cache_set_account_params(ctx->cache, bs_cache_account(ctx->cache), values);
	if (kind == P_THROTTLE) {
		wb_throttle_set_policy_params(ctx->throttle, wb_throttle_get_policy(ctx->throttle),
					      values);
		return 0;
	}
	return bs_cache_set_size_params(ctx->cache, values);
}

/* The stats whose value is a name: the policies in force. */
static const char *const named_stats[] = { "dirty_account", "throttle", "folio_policy",
					   "ra_model" };

bool wb_stat_is_name(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(named_stats) / sizeof(named_stats[0]); i++) {
		if (strlen(named_stats[i]) == len && !memcmp(named_stats[i], name, len))
			return true;
	}
	return false;
}

/* The "NAME VALUE" lines of the policies in force and of their changes. */
static size_t policy_name_stats(struct wb_ctx *ctx, char *buf, size_t size)
{
	int64_t values[BS_PARAMS_MAX];
	int n = snprintf(buf, size, "dirty_account %s\nthrottle %s\nfolio_policy %s\n"
			 "ra_model %s\npolicy_switches %" PRIu64 "\n",
			 bs_cache_account(ctx->cache)->name,
			 wb_throttle_get_policy(ctx->throttle)->name,
			 bs_cache_size_params(ctx->cache, values)->name,
			 bs_ra_model_name(bs_cache_ra_model(ctx->cache)),
			 atomic_load(&ctx->tunables->policy_switches));

	if (n < 0)
		return 0;
	return (size_t)n < size ? (size_t)n : size;
}

size_t wb_ctx_policy_stats(struct wb_ctx *ctx, char *buf, size_t size)
{
	size_t used = policy_name_stats(ctx, buf, size);

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

/* The tunable @name, or NULL. */
static const struct wb_opt *find(const char *name)
{
	const struct wb_opt *opt = wb_opt_find(name);

	return opt && (opt->flags & WB_OPT_TUNABLE) ? opt : NULL;
}

/* Where @opt's live value is. */
static const struct wb_opt_field *live_field(const struct wb_opt *opt)
{
	return &wb_opt_root_layout.field[wb_opt_index(opt)];
}

int wb_tunables_create(struct wb_ctx *ctx)
{
	struct wb_tunables *tn = calloc(1, sizeof(*tn));

	if (!tn)
		return -ENOMEM;
	pthread_mutex_init(&tn->lock, NULL);
	tn->live.wb = ctx->cfg;
	/* As in /proc/sys/vm, a byte count in force reads its ratio as 0. */
	wb_opt_bytes_win(&tn->live);
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

	const struct wb_config *w = &tn->live.wb;

	wb_throttle_limits_of(bs_cache_config(ctx->cache)->cache_size,
			      w->dirty_ratio, w->dirty_bytes, w->dirty_background_ratio,
			      w->dirty_background_bytes, w->dirty_pinned_ratio,
			      w->dirty_pinned_bytes, l);
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
	const struct wb_opt *opt = find(name);
	struct wb_tunables *tn = ctx->tunables;
	enum param_kind kind;
	const char *pname;
	int n;

	if (!opt && param_name(name, &kind, &pname))
		return param_get(ctx, kind, pname, buf, len);
	if (!opt)
		return -ENOENT;
	pthread_mutex_lock(&tn->lock);
	if (opt->type == WB_OPT_ACCOUNT)
		n = snprintf(buf, len, "%s", bs_cache_account(ctx->cache)->name);
	else if (opt->type == WB_OPT_THROTTLE)
		n = snprintf(buf, len, "%s", wb_throttle_get_policy(ctx->throttle)->name);
	else if (opt->type == WB_OPT_RA_MODEL)
		n = snprintf(buf, len, "%s", bs_ra_model_name(bs_cache_ra_model(ctx->cache)));
	else
		n = snprintf(buf, len, "%" PRIu64, wb_opt_load(live_field(opt), &tn->live));
	pthread_mutex_unlock(&tn->lock);
	return n < 0 ? 0 : n;
}

/* @val refused for the number tunable @opt: its line in the tunable's terms. */
static int number_refused(const struct wb_opt *opt, const char *val, char *err, size_t errlen)
{
	if (opt->type == WB_OPT_RATIO)
		snprintf(err, errlen, "%s=%s: a whole percentage in [%" PRIu64 ", %" PRIu64 "]",
			 opt->name, val, opt->min, opt->max);
	else if (opt->type == WB_OPT_SIZE && opt->min)
		snprintf(err, errlen, "%s=%s: a byte count (suffix K, M, G or T), at least %" PRIu64
			 " (write %s to go back to a ratio)", opt->name, val, opt->min, opt->pair);
	else if (opt->type == WB_OPT_SIZE)
		snprintf(err, errlen, "%s=%s: a byte count (suffix K, M, G or T)", opt->name, val);
	else
		snprintf(err, errlen, "%s=%s: milliseconds in [%" PRIu64 ", %" PRIu64 "]",
			 opt->name, val, opt->min, opt->max);
	return -EINVAL;
}

/*
 * A threshold or a writeback time: the option's grammar and range (0 is
 * no byte count of its own here: write the ratio to go back to it), then
 * the pair rule, then the throttler and the flushers are told.
 * Context: tunables lock held.
 */
static int set_number(struct wb_ctx *ctx, const struct wb_opt *opt, const char *val,
		      char *err, size_t errlen)
{
	struct wb_tunables *tn = ctx->tunables;
	union wb_opt_value v;

	if (wb_opt_parse(opt, val, &v, err, errlen) || v.u < opt->min)
		return number_refused(opt, val, err, errlen);
	wb_opt_store(opt, live_field(opt), &tn->live, v);
	if (opt->pair && (v.u || !(opt->flags & WB_OPT_PAIR_NONZERO))) {
		const struct wb_opt *pair = wb_opt_find(opt->pair);

		wb_opt_store(pair, live_field(pair), &tn->live, (union wb_opt_value){ 0 });
	}
	if (opt->type == WB_OPT_MS) {
		atomic_store(&ctx->expire_ms, tn->live.wb.dirty_expire_ms);
		atomic_store(&ctx->interval_ms, tn->live.wb.writeback_interval_ms);
		/* A flusher asleep for the old interval would not see a shorter one. */
		wb_flushers_kick(ctx);
		return 0;
	}
	apply_limits(ctx);
	return 0;
}

/* A policy or the readahead model.  Context: tunables lock held. */
static int set_named(struct wb_ctx *ctx, const struct wb_opt *opt, const char *val,
		     char *err, size_t errlen)
{
	const struct bs_account_policy *account;
	const struct wb_throttle_policy *throttle;
	union wb_opt_value v;

	bool changed;

	if (opt->type == WB_OPT_RA_MODEL) {
		if (wb_opt_parse(opt, val, &v, err, errlen))
			return -EINVAL;
		changed = (unsigned int)v.u != bs_cache_ra_model(ctx->cache);
		bs_cache_set_ra_model(ctx->cache, (unsigned int)v.u);
	} else if (opt->type == WB_OPT_ACCOUNT && (account = bs_account_policy_find(val))) {
		changed = account != bs_cache_account(ctx->cache);
		bs_cache_set_account(ctx->cache, account);
	} else if (opt->type == WB_OPT_THROTTLE && (throttle = wb_throttle_policy_find(val))) {
		changed = throttle != wb_throttle_get_policy(ctx->throttle);
		wb_throttle_set_policy(ctx->throttle, throttle);
	} else {
		return wb_opt_policy_unknown(opt, val, err, errlen);
	}
	if (changed)
		atomic_fetch_add(&ctx->tunables->policy_switches, 1);
	return 0;
}

/* Set a parameter of a policy in force; as wb_tunable_set() otherwise. */
static int set_param(struct wb_ctx *ctx, const char *name, enum param_kind kind,
		     const char *pname, const char *val, char *err, size_t errlen)
{
	struct wb_tunables *tn = ctx->tunables;
	int64_t values[BS_PARAMS_MAX];
	const struct bs_param *p;
	void (*notify)(void *arg);
	void *notify_arg;
	char v[128];
	int ret;

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

int wb_tunable_set(struct wb_ctx *ctx, const char *name, const char *val,
		   char *err, size_t errlen)
{
	const struct wb_opt *opt = find(name);
	struct wb_tunables *tn = ctx->tunables;
	void (*notify)(void *arg);
	void *notify_arg;
	enum param_kind kind;
	const char *pname;
	char v[128];
	int ret;

	if (!opt && param_name(name, &kind, &pname))
		return set_param(ctx, name, kind, pname, val, err, errlen);
	if (!opt) {
		snprintf(err, errlen, "%s: no such tunable", name);
		return -ENOENT;
	}
	if (trim(val, v, sizeof(v))) {
		snprintf(err, errlen, "%s: a value of %zu characters or more is not one we take",
			 opt->name, sizeof(v));
		return -EINVAL;
	}
	pthread_mutex_lock(&tn->lock);
	if (opt->type == WB_OPT_ACCOUNT || opt->type == WB_OPT_THROTTLE ||
	    opt->type == WB_OPT_RA_MODEL)
		ret = set_named(ctx, opt, v, err, errlen);
	else
		ret = set_number(ctx, opt, v, err, errlen);
	notify = tn->notify;
	notify_arg = tn->notify_arg;
	pthread_mutex_unlock(&tn->lock);
	if (ret)
		return ret;
	/* Writers held under the old settings may go now. */
	if (notify && opt->type != WB_OPT_MS && opt->type != WB_OPT_RA_MODEL)
		notify(notify_arg);
	wb_flushers_poke(ctx);
	return 0;
}
