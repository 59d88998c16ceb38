// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * opts.c - a replay's options: the device model's (dev_bw=, dev_lat_us=,
 * dev_qd=, dev_flush_us=, dev_iops=, dev_raid=, dev_stripe=), sim_data=
 * (0: folios without memory, bs_config.no_data), sim_mem= (the modelled
 * machine's memory: the default cache_size), sim_feed_window= (records
 * read ahead before a lagging writer reads its own: struct sim_feed) and
 * the mount's, through the mount's own parser
 * (fusefs/opts.c: the same names, defaults and checks).  The only file of
 * the simulator that knows the FUSE layer.
 */
#include "sim.h"
#include "fusefs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * The simulator's own options out of @opts (the device's, sim_data=, sim_feed_window=, sim_mem=),
 * the rest into @rest for the mount's parser.
 */
static int split_opts(struct sim_config *cfg, const char *opts, char *rest, size_t restlen,
		      char *err, size_t errlen)
{
	static const struct { const char *name; uint64_t min, max; } dev_opts[] = {
		{ "dev_bw", 1, 1ull << 40 }, { "dev_lat_us", 0, 10000000 },
		{ "dev_qd", 1, SIM_MAX_QD }, { "dev_flush_us", 0, 10000000 },
		{ "dev_iops", 0, 1ull << 32 }, { "dev_raid", 1, SIM_MAX_RAID },
		{ "dev_stripe", 4096, 1ull << 30 }, { "sim_data", 0, 1 },
		{ "sim_feed_window", 0, 1ull << 31 }, { "sim_mem", 1ull << 20, 1ull << 50 },
	};
	struct sim_dev_cfg *dev = &cfg->dev;
	char *cache_item = NULL;
	char *copy = strdup(opts ? opts : ""), *save = NULL;
	size_t used = 0;
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	rest[0] = '\0';
	for (char *it = strtok_r(copy, ",", &save); it && !ret; it = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(it, '=');
		size_t d, nd = sizeof(dev_opts) / sizeof(dev_opts[0]);
		uint64_t v;

		for (d = 0; d < nd; d++)
			if (eq && (size_t)(eq - it) == strlen(dev_opts[d].name) &&
			    !strncmp(it, dev_opts[d].name, (size_t)(eq - it)))
				break;
		if (!strncmp(it, "cache_size=", 11)) {
			cache_item = it;	/* below: whose it is depends on sim_data */
			continue;
		}
		if (d == nd) {
			int n = snprintf(rest + used, restlen - used, "%s%s", used ? "," : "", it);

			if (n < 0 || (size_t)n >= restlen - used) {
				snprintf(err, errlen, "options too long");
				ret = -EINVAL;
			}
			used += n > 0 ? (size_t)n : 0;
			continue;
		}
		*eq = '\0';
		ret = (d == 0 || d == 6 || d == 9 ? wb_parse_size : wb_parse_uint)(it, eq + 1,
			dev_opts[d].min, dev_opts[d].max, &v, err, errlen);
		if (ret)
			break;
		if (d == 0)
			dev->bw = v;
		else if (d == 1)
			dev->lat_us = v;
		else if (d == 2)
			dev->qd = (uint32_t)v;
		else if (d == 3)
			dev->flush_us = v;
		else if (d == 4)
			dev->iops = v;
		else if (d == 5)
			dev->raid = (uint32_t)v;
		else if (d == 6)
			dev->stripe = v;
		else if (d == 7)
			cfg->no_data = !v;
		else if (d == 8)
			cfg->feed_window = v;
		else
			cfg->mem = v;
	}
	cfg->cache_given = cache_item != NULL;
	/*
	 * cache_size: the mount's (at most this machine's memory), or with
	 * sim_data=0 the simulator's, as large as the modelled machine's.
	 */
	if (!ret && cache_item && cfg->no_data) {
		ret = wb_parse_size("cache_size", cache_item + 11, 1, 1ull << 50, &cfg->cache_size,
				    err, errlen);
	} else if (!ret && cache_item) {
		int n = snprintf(rest + used, restlen - used, "%s%s", used ? "," : "", cache_item);

		if (n < 0 || (size_t)n >= restlen - used) {
			snprintf(err, errlen, "options too long");
			ret = -EINVAL;
		}
	}
	free(copy);
	return ret;
}

/*
 * What the mount's parser left for libfuse: only the options it adds
 * itself may be there ("-o" and its argument come as one or two).
 */
static int check_left(const char *arg, char *err, size_t errlen)
{
	char *copy, *save = NULL;
	int ret = 0;

	if (!strcmp(arg, "-o"))
		return 0;
	copy = strdup(!strncmp(arg, "-o", 2) ? arg + 2 : arg);
	if (!copy)
		return -ENOMEM;
	for (char *it = strtok_r(copy, ",", &save); it && !ret; it = strtok_r(NULL, ",", &save)) {
		if (!strncmp(it, "subtype=", 8) || !strncmp(it, "fsname=", 7) ||
		    !strcmp(it, "default_permissions"))
			continue;
		snprintf(err, errlen, "%s: not an option of the simulator", it);
		ret = -EINVAL;
	}
	free(copy);
	return ret;
}

/*
 * The mount's options through the mount's own parser (fusefs/opts.c):
 * the same names, defaults and checks.  What it leaves for libfuse is
 * refused: the simulator has no use for it, and a typo must not pass.
 */
static int parse_opts(struct sim_config *cfg, const char *opts, struct ffs_config *fc,
		      char *err, size_t errlen)
{
	char rest[4096], perr[FFS_ERRLEN] = "", prog[] = "foliofs-sim", o[] = "-o";
	char backing[] = "sim", mnt[] = "/";
	char *argv[] = { prog, backing, mnt, o, rest, NULL };
	int ret;

	ret = split_opts(cfg, opts, rest, sizeof(rest), perr, sizeof(perr));
	if (!ret)
		ret = ffs_parse_args(rest[0] ? 5 : 3, argv, fc, perr);
	if (!ret) {
		for (int i = 1; i < fc->args.argc && !ret; i++)
			ret = check_left(fc->args.argv[i], perr, sizeof(perr));
	}
	/* Recording is the mount's: a replay has nothing to record. */
	if (!ret && fc->trace) {
		snprintf(perr, sizeof(perr), "trace=: a mount option, not the simulator's");
		ret = -EINVAL;
	}
	if (ret)
		snprintf(err, errlen, "-o: %s", perr[0] ? perr : "bad options");
	return ret;
}

int sim_config_parse(const char *opts, struct sim_config *cfg, char *err, size_t errlen)
{
	struct ffs_config *fc = calloc(1, sizeof(*fc));
	int ret;

	*cfg = (struct sim_config){
		.dev = { .bw = SIM_DEV_BW, .lat_us = SIM_DEV_LAT_US, .qd = SIM_DEV_QD,
			 .flush_us = SIM_DEV_FLUSH_US, .raid = 1, .stripe = SIM_DEV_STRIPE },
		.feed_window = SIM_FEED_WINDOW,
		.mem = SIM_MEM_DEFAULT,
	};
	if (!fc) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = parse_opts(cfg, opts, fc, err, errlen);
	if (ret) {
		ffs_config_free(fc);
		free(fc);
		return ret;
	}
	cfg->bs = fc->bs;
	cfg->bs.no_data = cfg->no_data;
	if (cfg->cache_size)
		cfg->bs.cache_size = cfg->cache_size;
	else if (!cfg->cache_given)
		cfg->bs.cache_size = ffs_cache_size_of(cfg->mem);
	cfg->wb = fc->wb;
	cfg->priv = fc;
	return 0;
}

void sim_config_free(struct sim_config *cfg)
{
	if (cfg->priv) {
		ffs_config_free(cfg->priv);
		free(cfg->priv);
	}
	cfg->priv = NULL;
}
