// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * options.c - the option registry (options.h): its rows, their grammar,
 * ranges and defaults, and a command line read through them, for the
 * mount (fusefs/opts.c) and foliofs-sim (sim/opts.c) alike.  The run-time
 * tunables (tunables.c) take their names, ranges and fields from the same
 * rows.
 *
 * Policies: load=PATH loads a policy library when it is met (so that
 * --help after it lists its policies); dirty_account=, folio_policy= and
 * the parameters account.NAME=V, size.NAME=V and throttle.NAME=V are
 * resolved after every option was read, so their order does not matter:
 * a parameter belongs to the policy finally chosen, and a later value of
 * one wins.
 */
#include "options.h"
#include "throttle.h"
#include "wb_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROW(w, f, ...) { .where = WB_OPT_##w, __VA_ARGS__ },
static const struct wb_opt rows[WB_OPT_COUNT] = { WB_OPTIONS(ROW) };
#undef ROW

/* The rows of struct wb_opt_root: its bs_config and wb_config, nothing of a front end. */
#define ROOT(where, field, ...) WB_OPT_BIND_##where(struct wb_opt_root, field, WB_OPT_NO_FIELD),
const struct wb_opt_layout wb_opt_root_layout =
	WB_OPT_LAYOUT(struct wb_opt_root, WB_OPTIONS(ROOT));
#undef ROOT

const struct wb_opt *wb_opt_at(size_t i)
{
	return i < WB_OPT_COUNT ? &rows[i] : NULL;
}

const struct wb_opt *wb_opt_find(const char *name)
{
	for (size_t i = 0; i < WB_OPT_COUNT; i++) {
		if (!strcmp(rows[i].name, name))
			return &rows[i];
	}
	return NULL;
}

size_t wb_opt_index(const struct wb_opt *opt)
{
	return (size_t)(opt - rows);
}

uint64_t wb_phys_mem(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);

	return pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : UINT64_MAX / 2;
}

uint64_t wb_cache_size_of(uint64_t mem)
{
	uint64_t eighth = mem / 8;

	return eighth > (64u << 20) ? eighth : 64u << 20;
}

void wb_opt_usage(const struct wb_opt *opt, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s", opt->name, opt->metavar ? "=" : "",
		 opt->metavar ? opt->metavar : "");
}

/* ---- values ---- */

static int opt_fail(char *err, size_t errlen, const char *name, const char *val,
		    const char *why)
{
	snprintf(err, errlen, "%s=%s: %s", name, val, why);
	return -EINVAL;
}

/* @val's index among @opt->choices ("a|b|c"). */
static int parse_choice(const struct wb_opt *opt, const char *val, uint64_t *out,
			char *err, size_t errlen)
{
	const char *c = opt->choices;
	size_t n = strlen(val);
	char known[128];

	for (uint64_t i = 0; *c; i++) {
		size_t len = strcspn(c, "|");

		if (len == n && !strncmp(c, val, n)) {
			*out = i;
			return 0;
		}
		c += len + (c[len] == '|');
	}
	snprintf(known, sizeof(known), "unknown value (known: %s)", opt->choices);
	for (char *p = strchr(known, '|'); p; p = strchr(p, '|')) {
		memmove(p + 2, p + 1, strlen(p + 1) + 1);
		memcpy(p, ", ", 2);
	}
	return opt_fail(err, errlen, opt->name, val, known);
}

/*
 * A file name made absolute against the current directory: the daemon
 * changes to / when it goes to the background, long before the file opens.
 */
static int parse_path(const struct wb_opt *opt, const char *val, char **out,
		      char *err, size_t errlen)
{
	char *cwd;
	int ret;

	if (!*val)
		return opt_fail(err, errlen, opt->name, val, "empty file name");
	if (val[0] == '/')
		return (*out = strdup(val)) ? 0 : -ENOMEM;
	cwd = getcwd(NULL, 0);
	if (!cwd)
		return opt_fail(err, errlen, opt->name, val, strerror(errno));
	ret = asprintf(out, "%s/%s", cwd, val);
	free(cwd);
	return ret < 0 ? -ENOMEM : 0;
}

/* A string of @opt's: not empty (@what says what an empty one lacks). */
static int parse_text(const struct wb_opt *opt, const char *val, const char *what, char **out,
		      char *err, size_t errlen)
{
	if (!*val && what)
		return opt_fail(err, errlen, opt->name, val, what);
	return (*out = strdup(val)) ? 0 : -ENOMEM;
}

/* A size of @opt's in its range (or 0, where 0 is off), a power of two where it must be. */
static int parse_bytes(const struct wb_opt *opt, const char *val, uint64_t *out,
		       char *err, size_t errlen)
{
	uint64_t max = opt->flags & WB_OPT_PHYS ? wb_phys_mem() : opt->max;
	uint64_t min = opt->flags & WB_OPT_ZERO ? 0 : opt->min;
	char why[128];

	if (wb_parse_size(opt->name, val, min, max, out, err, errlen))
		return -EINVAL;
	if (*out && *out < opt->min) {
		/* WB_OPT_ZERO: the byte count of a ratio, 0 going back to the ratio. */
		snprintf(why, sizeof(why), "at least %lluK (or 0: use %s)",
			 (unsigned long long)opt->min >> 10, opt->pair);
		return opt_fail(err, errlen, opt->name, val, why);
	}
	if (opt->type == WB_OPT_POW2 && (*out & (*out - 1)))
		return opt_fail(err, errlen, opt->name, val, "not a power of two");
	return 0;
}

int wb_opt_parse(const struct wb_opt *opt, const char *val, union wb_opt_value *out,
		 char *err, size_t errlen)
{
	unsigned int model;

	switch (opt->type) {
	case WB_OPT_UINT: case WB_OPT_RATIO: case WB_OPT_MS:
		return wb_parse_uint(opt->name, val, opt->min, opt->max, &out->u, err, errlen);
	case WB_OPT_SIZE: case WB_OPT_POW2:
		return parse_bytes(opt, val, &out->u, err, errlen);
	case WB_OPT_SECS:
		return wb_parse_double(opt->name, val, (double)opt->min, (double)opt->max,
				       &out->d, err, errlen);
	case WB_OPT_CHOICE:
		return parse_choice(opt, val, &out->u, err, errlen);
	case WB_OPT_ONOFF:
		if (parse_choice(&(struct wb_opt){ .name = opt->name, .choices = "on|off" }, val,
				 &out->u, err, errlen))
			return -EINVAL;
		out->u = out->u == 0;
		return 0;
	case WB_OPT_PATH:
		return parse_path(opt, val, &out->s, err, errlen);
	case WB_OPT_FAULT:
		return parse_text(opt, val, "empty spec (off: no fault)", &out->s, err, errlen);
	case WB_OPT_THROTTLE:
		return parse_text(opt, val, "empty policy name", &out->s, err, errlen);
	case WB_OPT_ACCOUNT: case WB_OPT_SIZING:
		return parse_text(opt, val, NULL, &out->s, err, errlen);
	case WB_OPT_RA_MODEL:
		if (bs_ra_model_parse(val, &model))
			return opt_fail(err, errlen, opt->name, val,
					"not a readahead model (6.16, or 6.17 for 6.17 and later)");
		out->u = model;
		return 0;
	case WB_OPT_LOAD:
		/*
		 * The daemon runs as the mounting user: the library must be
		 * theirs or root's.  Any refusal is a bad value (-EINVAL).
		 */
		return wb_policy_load(val, getuid(), err, errlen) ? -EINVAL : 0;
	default:	/* FLAG, ALIAS: no value */
		return opt_fail(err, errlen, opt->name, val, "takes no value");
	}
}

/* Whether @opt's value is an owned string. */
static bool is_string(const struct wb_opt *opt)
{
	return opt->type == WB_OPT_PATH || opt->type == WB_OPT_FAULT ||
	       opt->type == WB_OPT_THROTTLE;
}

void wb_opt_store(const struct wb_opt *opt, const struct wb_opt_field *field, void *base,
		  union wb_opt_value v)
{
	char *at = (char *)base + field->off;
	uint32_t u32 = (uint32_t)v.u;
	bool b = v.u != 0;

	if (!field->size) {
		if (is_string(opt))
			free(v.s);
		return;
	}
	if (is_string(opt)) {
		free(*(char **)at);
		memcpy(at, &v.s, sizeof(v.s));
	} else if (opt->type == WB_OPT_SECS) {
		memcpy(at, &v.d, sizeof(v.d));
	} else if (field->size == sizeof(b)) {
		memcpy(at, &b, sizeof(b));
	} else if (field->size == sizeof(u32)) {
		memcpy(at, &u32, sizeof(u32));
	} else {
		memcpy(at, &v.u, sizeof(v.u));
	}
}

/* A policy pointer (ACCOUNT, SIZING) into its field. */
static void store_policy(const struct wb_opt_field *field, void *base, const void *policy)
{
	if (field->size == sizeof(policy))
		memcpy((char *)base + field->off, &policy, sizeof(policy));
}

/* The names of @type's policies, for messages: "a, b, c". */
static void policy_names(enum wb_opt_type type, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; used < len; i++) {
		const char *n = type == WB_OPT_ACCOUNT ?
			(bs_account_policy_at(i) ? bs_account_policy_at(i)->name : NULL) :
			type == WB_OPT_SIZING ?
			(bs_size_policy_at(i) ? bs_size_policy_at(i)->name : NULL) :
			(wb_throttle_policy_at(i) ? wb_throttle_policy_at(i)->name : NULL);

		if (!n)
			break;
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", n);
	}
}

int wb_opt_policy_unknown(const struct wb_opt *opt, const char *val, char *err, size_t errlen)
{
	char names[256];

	policy_names(opt->type, names, sizeof(names));
	snprintf(err, errlen, "%s=%s: unknown policy (known: %s)", opt->name, val, names);
	return -EINVAL;
}

/* ---- defaults ---- */

/* @opt's default into @cfg, where it is a value (options.h, struct wb_opt.def). */
static void set_default(const struct wb_opt *opt, const struct wb_opt_field *field, void *cfg)
{
	union wb_opt_value v;
	char err[256];

	if (!field->size || (opt->flags & WB_OPT_LIBFUSE))
		return;
	switch (opt->type) {
	case WB_OPT_ACCOUNT:
		store_policy(field, cfg, bs_account_policy_find(opt->def));
		return;
	case WB_OPT_SIZING:
		store_policy(field, cfg, bs_size_policy_find(opt->def));
		return;
	case WB_OPT_SIZE:
		if (opt->flags & WB_OPT_PHYS) {
			wb_opt_store(opt, field, cfg, (union wb_opt_value){
				.u = wb_cache_size_of(wb_phys_mem()) });
			return;
		}
		break;
	case WB_OPT_PATH: case WB_OPT_FAULT: case WB_OPT_THROTTLE:
	case WB_OPT_LOAD: case WB_OPT_FLAG: case WB_OPT_ALIAS:
		return;		/* the default is "not given" */
	default:
		break;
	}
	/* tests/unit/test_options.c checks that every such default parses. */
	if (!wb_opt_parse(opt, opt->def, &v, err, sizeof(err)))
		wb_opt_store(opt, field, cfg, v);
}

static void set_defaults(void *cfg, const struct wb_opt_layout *layout)
{
	for (size_t i = 0; i < WB_OPT_COUNT; i++)
		set_default(&rows[i], &layout->field[i], cfg);
}

void wb_config_default(struct wb_config *cfg)
{
	/* Only the wb_config's rows: nothing machine-dependent is read. */
	struct wb_opt_layout wb_only = wb_opt_root_layout;
	struct wb_opt_root root = { .wb = { 0 } };

	for (size_t i = 0; i < WB_OPT_COUNT; i++) {
		if (rows[i].where != WB_OPT_WB)
			wb_only.field[i].size = 0;
	}
	set_defaults(&root, &wb_only);
	*cfg = root.wb;
}

/* ---- checks of a whole wb_config ---- */

/* The throttle parameters set are the policy's, in range (once the name is known good). */
static int throttle_params_check(const struct wb_config *cfg, char *err, size_t errlen)
{
	const struct wb_throttle_policy *p =
		wb_throttle_policy_find(cfg->throttle ? cfg->throttle : "bdp");

	for (unsigned int i = 0; p && i < BS_PARAMS_MAX; i++) {
		if (!(cfg->throttle_set & (1u << i)))
			continue;
		if (i >= p->nr_params) {
			snprintf(err, errlen, "throttle: parameter %u of %s, which has %u", i, p->name,
				 p->nr_params);
			return -EINVAL;
		}
		if (cfg->throttle_params[i] < p->params[i].min ||
		    cfg->throttle_params[i] > p->params[i].max) {
			snprintf(err, errlen, "throttle.%s=%lld: an integer in [%lld, %lld]",
				 p->params[i].name, (long long)cfg->throttle_params[i],
				 (long long)p->params[i].min, (long long)p->params[i].max);
			return -EINVAL;
		}
	}
	return 0;
}

uint64_t wb_opt_load(const struct wb_opt_field *field, const void *base)
{
	const char *at = (const char *)base + field->off;
	uint32_t u32;
	uint64_t u64;
	bool b;

	if (field->size == sizeof(b)) {
		memcpy(&b, at, sizeof(b));
		return b;
	}
	if (field->size == sizeof(u32)) {
		memcpy(&u32, at, sizeof(u32));
		return u32;
	}
	memcpy(&u64, at, sizeof(u64));
	return u64;
}

/* The numbers of @cfg in their rows' ranges (a config made in code may not be). */
static int ranges_check(const struct wb_config *cfg, char *err, size_t errlen)
{
	const struct wb_opt_layout *l = &wb_opt_root_layout;
	struct wb_opt_root root = { .wb = *cfg };

	for (size_t i = 0; i < WB_OPT_COUNT; i++) {
		const struct wb_opt *opt = &rows[i];
		uint64_t v;

		if (opt->where != WB_OPT_WB || opt->type > WB_OPT_POW2)
			continue;
		v = wb_opt_load(&l->field[i], &root);
		if ((v >= opt->min && v <= opt->max && (opt->type != WB_OPT_POW2 || !(v & (v - 1)))) ||
		    (!v && (opt->flags & WB_OPT_ZERO)))
			continue;
		snprintf(err, errlen, "%s=%llu: out of range [%llu, %llu]%s", opt->name,
			 (unsigned long long)v, (unsigned long long)opt->min,
			 (unsigned long long)opt->max,
			 opt->type == WB_OPT_POW2 ? " or not a power of two" : "");
		return -EINVAL;
	}
	return 0;
}

int wb_config_check(const struct wb_config *cfg, char *err, size_t errlen)
{
	struct wb_fault f;

	if (ranges_check(cfg, err, errlen) || throttle_params_check(cfg, err, errlen))
		return -EINVAL;
	if (cfg->throttle && !wb_throttle_policy_find(cfg->throttle))
		return wb_opt_policy_unknown(wb_opt_find("throttle"), cfg->throttle, err, errlen);
	if (cfg->fault && *cfg->fault && strcmp(cfg->fault, "off") != 0 &&
	    wb_fault_parse(cfg->fault, &f, err, errlen))
		return -EINVAL;
	return 0;
}

/* ---- a command line ---- */

static struct bs_config *opts_bs(struct wb_opts *o)
{
	return (struct bs_config *)((char *)o->cfg + o->layout->bs);
}

static struct wb_config *opts_wb(struct wb_opts *o)
{
	return (struct wb_config *)((char *)o->cfg + o->layout->wb);
}

void wb_opts_begin(struct wb_opts *o, void *cfg, const struct wb_opt_layout *layout)
{
	*o = (struct wb_opts){ .cfg = cfg, .layout = layout };
	set_defaults(cfg, layout);
}

int wb_opts_set(struct wb_opts *o, const struct wb_opt *opt, const char *val,
		char *err, size_t errlen)
{
	size_t i = wb_opt_index(opt);
	union wb_opt_value v = { 0 };
	int ret;

	/* The bare name only where it means something; else it is not ours. */
	if (!val && opt->type != WB_OPT_FLAG && opt->type != WB_OPT_ALIAS &&
	    !(opt->flags & WB_OPT_BARE))
		return -ENOENT;
	if (val && (opt->type == WB_OPT_FLAG || opt->type == WB_OPT_ALIAS))
		return -ENOENT;
	o->given |= 1ull << i;
	if (opt->type == WB_OPT_ALIAS)
		return wb_opts_item(o, opt->choices, NULL, err, errlen);
	if (opt->type == WB_OPT_FLAG) {
		v.u = 1;
	} else {
		ret = wb_opt_parse(opt, val ? val : "on", &v, err, errlen);
		if (ret)
			return ret;
	}
	if (opt->type == WB_OPT_ACCOUNT || opt->type == WB_OPT_SIZING) {
		char **pending = &o->policy[opt->type == WB_OPT_SIZING];

		free(*pending);
		*pending = v.s;
		return 0;
	}
	wb_opt_store(opt, &o->layout->field[i], o->cfg, v);
	return 0;
}

/* Keep "account.NAME=V" (size., throttle.) for resolve_param(). */
static int keep_param(struct wb_opts *o, const char *item)
{
	char **more = realloc(o->params, (o->nr_params + 1) * sizeof(*more));

	if (!more)
		return -ENOMEM;
	o->params = more;
	o->params[o->nr_params] = strdup(item);
	return o->params[o->nr_params] ? (int)(o->nr_params++, 0) : -ENOMEM;
}

int wb_opts_item(struct wb_opts *o, const char *item, const struct wb_opt **opt,
		 char *err, size_t errlen)
{
	const char *eq = strchr(item, '=');
	size_t len = eq ? (size_t)(eq - item) : strlen(item);
	char name[64];
	const struct wb_opt *row;

	if (!strncmp(item, "account.", 8) || !strncmp(item, "size.", 5) ||
	    !strncmp(item, "throttle.", 9))
		return keep_param(o, item);
	if (len >= sizeof(name))
		return -ENOENT;
	memcpy(name, item, len);
	name[len] = '\0';
	row = wb_opt_find(name);
	if (opt)
		*opt = row;
	return row ? wb_opts_set(o, row, eq ? eq + 1 : NULL, err, errlen) : -ENOENT;
}

bool wb_opts_given(const struct wb_opts *o, const struct wb_opt *opt)
{
	return opt && (o->given & (1ull << wb_opt_index(opt)));
}

/* Where a kept parameter option goes: the policy it belongs to and its values. */
struct param_dest {
	const char *kind;		/* "account", "size", "throttle" */
	const char *policy;		/* its name */
	const struct bs_param *params;
	unsigned int nr;
	int64_t *values;
	uint32_t *set;
};

static bool param_dest(const char *arg, struct bs_config *bs, struct wb_config *wb,
		       struct param_dest *d)
{
	const struct wb_throttle_policy *t;

	if (!strncmp(arg, "account.", 8)) {
		*d = (struct param_dest){ "account", bs->account->name, bs->account->params,
					  bs->account->nr_params, bs->account_params,
					  &bs->account_set };
	} else if (!strncmp(arg, "size.", 5)) {
		*d = (struct param_dest){ "size", bs->size->name, bs->size->params,
					  bs->size->nr_params, bs->size_params, &bs->size_set };
	} else {
		/* An unknown throttle= is wb_config_check()'s to report. */
		t = wb_throttle_policy_find(wb->throttle ? wb->throttle : "bdp");
		if (!t)
			return false;
		*d = (struct param_dest){ "throttle", t->name, t->params, t->nr_params,
					  wb->throttle_params, &wb->throttle_set };
	}
	return true;
}

/* One kept parameter option, checked against the policy chosen. */
static int resolve_param(struct wb_opts *o, const char *arg, char *err, size_t errlen)
{
	const char *name = strchr(arg, '.') + 1, *eq = strchr(arg, '=');
	char pname[BS_NAME_MAX + 2];
	struct param_dest d;
	int i;

	if (!param_dest(arg, opts_bs(o), opts_wb(o), &d))
		return 0;
	if (!eq || (size_t)(eq - name) > BS_NAME_MAX) {
		snprintf(err, errlen, "%s: not %s.NAME=VALUE with a parameter NAME", arg, d.kind);
		return -EINVAL;
	}
	memcpy(pname, name, (size_t)(eq - name));
	pname[eq - name] = '\0';
	i = bs_param_index(d.params, d.nr, pname);
	if (i < 0) {
		bs_param_unknown(d.kind, d.policy, d.params, d.nr, pname, err, errlen);
		return -EINVAL;
	}
	if (bs_param_parse(d.kind, &d.params[i], eq + 1, &d.values[i], err, errlen))
		return -EINVAL;
	*d.set |= 1u << i;
	return 0;
}

/* The policies named and their parameters, once every load= is done. */
static int resolve_policies(struct wb_opts *o, char *err, size_t errlen)
{
	const struct wb_opt *acct = wb_opt_find("dirty_account"), *size = wb_opt_find("folio_policy");
	const void *p;

	if (o->policy[0]) {
		if (!(p = bs_account_policy_find(o->policy[0])))
			return wb_opt_policy_unknown(acct, o->policy[0], err, errlen);
		store_policy(&o->layout->field[wb_opt_index(acct)], o->cfg, p);
	}
	if (o->policy[1]) {
		if (!(p = bs_size_policy_find(o->policy[1])))
			return wb_opt_policy_unknown(size, o->policy[1], err, errlen);
		store_policy(&o->layout->field[wb_opt_index(size)], o->cfg, p);
	}
	for (size_t i = 0; i < o->nr_params; i++) {
		if (resolve_param(o, o->params[i], err, errlen))
			return -EINVAL;
	}
	return 0;
}

void wb_opts_cancel(struct wb_opts *o)
{
	free(o->policy[0]);
	free(o->policy[1]);
	for (size_t i = 0; i < o->nr_params; i++)
		free(o->params[i]);
	free(o->params);
	o->policy[0] = o->policy[1] = NULL;
	o->params = NULL;
	o->nr_params = 0;
}

/*
 * A byte limit wins over its ratio, whichever came first, and the ratio
 * then reads 0 (as /proc/sys/vm shows after dirty_bytes is written).
 */
void wb_opt_bytes_win(struct wb_opt_root *root)
{
	const struct wb_opt_layout *l = &wb_opt_root_layout;

	for (size_t i = 0; i < WB_OPT_COUNT; i++) {
		const struct wb_opt *opt = &rows[i], *pair;

		if (opt->where != WB_OPT_WB || opt->type != WB_OPT_SIZE || !opt->pair ||
		    !wb_opt_load(&l->field[i], root))
			continue;
		pair = wb_opt_find(opt->pair);
		wb_opt_store(pair, &l->field[wb_opt_index(pair)], root, (union wb_opt_value){ 0 });
	}
}

int wb_opts_end(struct wb_opts *o, char *err, size_t errlen)
{
	struct wb_opt_root root;
	int ret = resolve_policies(o, err, errlen);

	wb_opts_cancel(o);
	if (ret || bs_config_check(opts_bs(o), err, errlen) ||
	    wb_config_check(opts_wb(o), err, errlen))
		return -EINVAL;
	/* After the check, which wants a dirty_ratio of at least 1. */
	root.wb = *opts_wb(o);
	wb_opt_bytes_win(&root);
	*opts_wb(o) = root.wb;
	return 0;
}

void wb_opts_free(void *cfg, const struct wb_opt_layout *layout)
{
	for (size_t i = 0; i < WB_OPT_COUNT; i++) {
		const struct wb_opt_field *f = &layout->field[i];

		if (is_string(&rows[i]) && f->size) {
			free(*(char **)((char *)cfg + f->off));
			*(char **)((char *)cfg + f->off) = NULL;
		}
	}
}
