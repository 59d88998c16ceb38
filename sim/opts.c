// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * opts.c - a replay's options: the mount's, through the option registry
 * (writeback/options.h: the same names, defaults and checks, bound to
 * struct sim_config's bs and wb; the FUSE front end's own options are
 * checked and dropped, and those that mean nothing to a replay refused),
 * and the simulator's own: the device model's (dev_bw=, dev_lat_us=,
 * dev_qd=, dev_flush_us=, dev_iops=, dev_raid=, dev_stripe=), sim_data=
 * (0: folios without memory, bs_config.no_data), sim_mem= (the modelled
 * machine's memory: the default cache_size) and sim_feed_window= (records
 * read ahead held in memory before chunks of them are spilled: struct
 * sim_feed).
 */
#include "sim.h"
#include "options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The registry's rows bound to struct sim_config: the mount's front end has no field here. */
#define SIM_FIELD(where, field, ...) WB_OPT_BIND_##where(struct sim_config, field, WB_OPT_NO_FIELD),
static const struct wb_opt_layout sim_layout =
	WB_OPT_LAYOUT(struct sim_config, WB_OPTIONS(SIM_FIELD));

/* The simulator's own options: rows of the registry's kind, with their fields. */
struct sim_opt {
	struct wb_opt opt;
	struct wb_opt_field field;
};

#define SIM_OPT(n, t, lo, hi, member) \
	{ { .name = (n), .type = WB_OPT_##t, .min = (lo), .max = (hi) }, \
	  WB_OPT_MEMBER(struct sim_config, member) }

static const struct sim_opt sim_opts[] = {
	SIM_OPT("dev_bw", SIZE, 1, 1ull << 40, dev.bw),
	SIM_OPT("dev_lat_us", UINT, 0, 10000000, dev.lat_us),
	SIM_OPT("dev_qd", UINT, 1, SIM_MAX_QD, dev.qd),
	SIM_OPT("dev_flush_us", UINT, 0, 10000000, dev.flush_us),
	SIM_OPT("dev_iops", UINT, 0, 1ull << 32, dev.iops),
	SIM_OPT("dev_raid", UINT, 1, SIM_MAX_RAID, dev.raid),
	SIM_OPT("dev_stripe", SIZE, 4096, 1ull << 30, dev.stripe),
	SIM_OPT("sim_data", UINT, 0, 1, sim_data),
	SIM_OPT("sim_feed_window", UINT, 0, 1ull << 31, feed_window),
	SIM_OPT("sim_mem", SIZE, 1ull << 20, 1ull << 50, mem),
};

/* With sim_data=0, cache_size is the modelled machine's, as large as its memory. */
static const struct sim_opt sim_cache_size =
	SIM_OPT("cache_size", SIZE, 1, 1ull << 50, cache_size);

/* The option named at the start of @item ("NAME=..."), or NULL. */
static const struct sim_opt *sim_opt_find(const char *item)
{
	const char *eq = strchr(item, '=');

	for (size_t i = 0; eq && i < sizeof(sim_opts) / sizeof(sim_opts[0]); i++) {
		if ((size_t)(eq - item) == strlen(sim_opts[i].opt.name) &&
		    !strncmp(item, sim_opts[i].opt.name, (size_t)(eq - item)))
			return &sim_opts[i];
	}
	return NULL;
}

static int sim_opt_set(struct sim_config *cfg, const struct sim_opt *s, const char *item,
		       char *err, size_t errlen)
{
	union wb_opt_value v;

	if (wb_opt_parse(&s->opt, strchr(item, '=') + 1, &v, err, errlen))
		return -EINVAL;
	wb_opt_store(&s->opt, &s->field, cfg, v);
	return 0;
}

/* One item of -o: the simulator's, else the registry's. */
static int item_set(struct sim_config *cfg, struct wb_opts *o, const char *item,
		    char *err, size_t errlen)
{
	const struct sim_opt *s = sim_opt_find(item);
	const struct wb_opt *opt;
	char name[64];
	int ret;

	if (s)
		return sim_opt_set(cfg, s, item, err, errlen);
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(item, "="), item);
	opt = wb_opt_find(name);
	/* Recording, other users: the mount's alone. */
	if (opt && (opt->flags & WB_OPT_NOSIM)) {
		snprintf(err, errlen, "%s%s: a mount option, not the simulator's", opt->name,
			 opt->metavar ? "=" : "");
		return -EINVAL;
	}
	ret = wb_opts_item(o, item, NULL, err, errlen);
	if (ret == -ENOENT) {
		snprintf(err, errlen, "%s: not an option of the simulator", item);
		return -EINVAL;
	}
	return ret;
}

/* The items of @opts, comma-separated, then the checks of the whole. */
static int parse_items(struct sim_config *cfg, const char *opts, char *err, size_t errlen)
{
	char *copy = strdup(opts ? opts : ""), *save = NULL, *cache_item = NULL;
	struct wb_opts o;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	wb_opts_begin(&o, cfg, &sim_layout);
	for (char *it = strtok_r(copy, ",", &save); it && !ret; it = strtok_r(NULL, ",", &save)) {
		if (!strncmp(it, "cache_size=", 11))
			cache_item = it;	/* below: whose it is depends on sim_data */
		else
			ret = item_set(cfg, &o, it, err, errlen);
	}
	cfg->cache_given = cache_item != NULL;
	/* cache_size: the mount's (at most this machine's memory), or the modelled machine's. */
	if (!ret && cache_item)
		ret = cfg->sim_data ? wb_opts_item(&o, cache_item, NULL, err, errlen) :
		      sim_opt_set(cfg, &sim_cache_size, cache_item, err, errlen);
	if (ret)
		wb_opts_cancel(&o);
	else
		ret = wb_opts_end(&o, err, errlen);
	free(copy);
	return ret;
}

int sim_config_parse(const char *opts, struct sim_config *cfg, char *err, size_t errlen)
{
	char perr[512] = "";
	int ret;

	*cfg = (struct sim_config){
		.dev = { .bw = SIM_DEV_BW, .lat_us = SIM_DEV_LAT_US, .qd = SIM_DEV_QD,
			 .flush_us = SIM_DEV_FLUSH_US, .raid = 1, .stripe = SIM_DEV_STRIPE },
		.sim_data = true,
		.feed_window = SIM_FEED_WINDOW,
		.mem = SIM_MEM_DEFAULT,
	};
	ret = parse_items(cfg, opts, perr, sizeof(perr));
	if (ret) {
		snprintf(err, errlen, "-o: %s", perr[0] ? perr : "out of memory");
		sim_config_free(cfg);
		return ret;
	}
	cfg->bs.no_data = !cfg->sim_data;
	if (cfg->cache_size)
		cfg->bs.cache_size = cfg->cache_size;
	else if (!cfg->cache_given)
		cfg->bs.cache_size = wb_cache_size_of(cfg->mem);
	return 0;
}

void sim_config_free(struct sim_config *cfg)
{
	wb_opts_free(cfg, &sim_layout);
}
