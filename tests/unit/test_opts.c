// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Command line and option value parsing (fusefs/opts.c), and the number
 * parsers it shares with the tunables and foliofs-sim (writeback/util.c).
 */
#include "fusefs.h"
#include "test_helpers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_size(void)
{
	char err[FFS_ERRLEN];
	uint64_t v = 7;

	T_CHECK(wb_parse_size("cache_size", "4096", 0, UINT64_MAX, &v, err, sizeof(err)) == 0 && v == 4096);
	T_CHECK(wb_parse_size("cache_size", "4k", 0, UINT64_MAX, &v, err, sizeof(err)) == 0 && v == 4096);
	T_CHECK(wb_parse_size("cache_size", "2M", 0, UINT64_MAX, &v, err, sizeof(err)) == 0 && v == 2u << 20);
	T_CHECK(wb_parse_size("cache_size", "3GiB", 0, UINT64_MAX, &v, err, sizeof(err)) == 0 && v == 3ull << 30);
	T_CHECK(wb_parse_size("cache_size", "1TB", 0, UINT64_MAX, &v, err, sizeof(err)) == 0 && v == 1ull << 40);
	v = 7;
	T_CHECK(wb_parse_size("cache_size", "banana", 0, UINT64_MAX, &v, err, sizeof(err)) == -EINVAL && v == 7);
	T_CHECK(strstr(err, "cache_size=banana") != NULL);
	T_CHECK(wb_parse_size("cache_size", "", 0, UINT64_MAX, &v, err, sizeof(err)) == -EINVAL);
	T_CHECK(wb_parse_size("cache_size", "-1", 0, UINT64_MAX, &v, err, sizeof(err)) == -EINVAL);
	T_CHECK(wb_parse_size("cache_size", "4X", 0, UINT64_MAX, &v, err, sizeof(err)) == -EINVAL);
	T_CHECK(wb_parse_size("cache_size", "4KX", 0, UINT64_MAX, &v, err, sizeof(err)) == -EINVAL);
	T_CHECK(wb_parse_size("cache_size", "1.5G", 0, UINT64_MAX, &v, err, sizeof(err)) == -EINVAL);
	T_CHECK(wb_parse_size("cache_size", "99999999999999999999", 0, UINT64_MAX, &v, err, sizeof(err)) == -EINVAL);
	T_CHECK(wb_parse_size("cache_size", "17179869184T", 0, UINT64_MAX, &v, err, sizeof(err)) == -EINVAL);
	T_CHECK(wb_parse_size("block_size", "3000", 512, 65536, &v, err, sizeof(err)) == 0);
	T_CHECK(wb_parse_size("block_size", "128k", 512, 65536, &v, err, sizeof(err)) == -EINVAL);
	T_CHECK(strstr(err, "out of range") != NULL);
	T_CHECK(v == 3000);
	/* A blank is no suffix (strchr would find the terminator of "KMGT"). */
	T_CHECK(wb_parse_size("cache_size", "4 ", 0, UINT64_MAX, &v, err, sizeof(err)) == -EINVAL);
	T_CHECK(wb_parse_size("cache_size", "4 K", 0, UINT64_MAX, &v, err, sizeof(err)) == -EINVAL);
	T_CHECK(v == 3000);
	/* The message is cut to the buffer it is given, and terminated. */
	{
		char small[12];

		T_CHECK(wb_parse_size("cache_size", "x", 0, 1, &v, small, sizeof(small)) == -EINVAL);
		T_CHECK(!strcmp(small, "cache_size="));
	}
}

static void test_uint_double(void)
{
	char err[FFS_ERRLEN];
	uint64_t u = 0;
	double d = 0;

	T_CHECK(wb_parse_uint("n", "0", 0, 10, &u, err, sizeof(err)) == 0 && u == 0);
	T_CHECK(wb_parse_uint("n", "10", 0, 10, &u, err, sizeof(err)) == 0 && u == 10);
	T_CHECK(wb_parse_uint("n", "11", 0, 10, &u, err, sizeof(err)) == -EINVAL && u == 10);
	T_CHECK(wb_parse_uint("n", " 1", 0, 10, &u, err, sizeof(err)) == -EINVAL);
	T_CHECK(wb_parse_uint("n", "1k", 0, 10000, &u, err, sizeof(err)) == -EINVAL);
	T_CHECK(wb_parse_double("t", "0.5", 0, 10, &d, err, sizeof(err)) == 0 && d == 0.5);
	T_CHECK(wb_parse_double("t", "-1", 0, 10, &d, err, sizeof(err)) == -EINVAL && d == 0.5);
	T_CHECK(wb_parse_double("t", "nan", 0, 10, &d, err, sizeof(err)) == -EINVAL);
	T_CHECK(wb_parse_double("t", "1e999", 0, 10, &d, err, sizeof(err)) == -EINVAL);
	T_CHECK(wb_parse_double("t", "", 0, 10, &d, err, sizeof(err)) == -EINVAL);
	T_CHECK(wb_parse_double("t", "2s", 0, 10, &d, err, sizeof(err)) == -EINVAL);
}

static int parse(struct ffs_config *cfg, char *err, int argc, const char **argv)
{
	return ffs_parse_args(argc, (char **)argv, cfg, err);
}

static void test_args(void)
{
	char err[FFS_ERRLEN];
	struct ffs_config cfg;

	const char *ok[] = { "foliofs", "-f", "-o", "kernel_cache,attr_timeout=2.5,allow_other",
			     "/backing", "/tmp" };
	T_CHECK(parse(&cfg, err, 6, ok) == 0);
	T_CHECK(cfg.cache == FFS_CACHE_WRITEBACK && cfg.allow_other && cfg.foreground);
	T_CHECK(cfg.attr_timeout == 2.5);
	T_CHECK(!strcmp(cfg.backing, "/backing") && !strcmp(cfg.mountpoint, "/tmp"));
	ffs_config_free(&cfg);

	const char *deflt[] = { "foliofs", "/b", "/tmp" };
	T_CHECK(parse(&cfg, err, 3, deflt) == 0);
	T_CHECK(cfg.cache == FFS_CACHE_DIRECT && !cfg.allow_other && !cfg.foreground);
	T_CHECK(cfg.attr_timeout == 86400);
	ffs_config_free(&cfg);

	/* cache= and its alias kernel_cache: the last one given wins. */
	const char *wt[] = { "foliofs", "-o", "kernel_cache,cache=writethrough", "/b", "/tmp" };
	T_CHECK(parse(&cfg, err, 5, wt) == 0 && cfg.cache == FFS_CACHE_WRITETHROUGH);
	ffs_config_free(&cfg);
	const char *kc[] = { "foliofs", "-o", "cache=direct,kernel_cache", "/b", "/tmp" };
	T_CHECK(parse(&cfg, err, 5, kc) == 0 && cfg.cache == FFS_CACHE_WRITEBACK);
	ffs_config_free(&cfg);

	const char *bad[] = { "foliofs", "-o", "attr_timeout=banana", "/b", "/tmp" };
	T_CHECK(parse(&cfg, err, 5, bad) == -EINVAL);
	T_CHECK(strstr(err, "attr_timeout=banana") != NULL);
	ffs_config_free(&cfg);

	const char *neg[] = { "foliofs", "-o", "attr_timeout=-1", "/b", "/tmp" };
	T_CHECK(parse(&cfg, err, 5, neg) == -EINVAL);
	T_CHECK(strstr(err, "out of range") != NULL);
	ffs_config_free(&cfg);

	const char *three[] = { "foliofs", "/b", "/tmp", "/extra" };
	T_CHECK(parse(&cfg, err, 4, three) == -EINVAL);
	T_CHECK(strstr(err, "/extra") != NULL);
	ffs_config_free(&cfg);

	const char *one[] = { "foliofs", "/b" };
	T_CHECK(parse(&cfg, err, 2, one) == -EINVAL);
	T_CHECK(strstr(err, "MOUNTPOINT") != NULL);
	ffs_config_free(&cfg);

	const char *none[] = { "foliofs" };
	T_CHECK(parse(&cfg, err, 1, none) == -EINVAL);
	ffs_config_free(&cfg);

	const char *help[] = { "foliofs", "--help" };
	T_CHECK(parse(&cfg, err, 2, help) == 0 && cfg.show_help);
	ffs_config_free(&cfg);
}

/* One bad option: -EINVAL and an error line that names it (and its value). */
static void check_bad(const char *opt, const char *want)
{
	char err[FFS_ERRLEN];
	struct ffs_config cfg;
	const char *argv[] = { "foliofs", "-o", opt, "/b", "/tmp" };

	T_CHECK(parse(&cfg, err, 5, argv) == -EINVAL);
	if (!strstr(err, want)) {
		fprintf(stderr, "-o %s: error line \"%s\" does not name \"%s\"\n", opt, err, want);
		T_CHECK(0);
	}
	ffs_config_free(&cfg);
}

static void test_throttle_opts(void)
{
	char err[FFS_ERRLEN];
	struct ffs_config cfg;
	struct wb_config def;
	char *cwd;

	wb_config_default(&def);
	const char *deflt[] = { "foliofs", "/b", "/tmp" };
	T_CHECK(parse(&cfg, err, 3, deflt) == 0);
	T_CHECK(cfg.wb.dirty_ratio == 20 && cfg.wb.dirty_ratio == def.dirty_ratio);
	T_CHECK(cfg.wb.dirty_bytes == 0);
	T_CHECK(cfg.wb.dirty_pinned_ratio == 0 && cfg.wb.dirty_pinned_bytes == 0);
	T_CHECK(cfg.wb.throttle == NULL);
	T_CHECK(cfg.wb.stats_log == NULL);
	T_CHECK(cfg.wb.stats_interval_ms == 1000);
	/* The default mount sizes folios and reads ahead as this machine's kernel does. */
	T_CHECK(!strcmp(cfg.bs.size->name, "kernel"));
	T_CHECK(cfg.bs.ra_model == BS_RA_6_17 && cfg.bs.readahead_kb == 2048);
	ffs_config_free(&cfg);

	const char *ok_opts = "dirty_ratio=35,dirty_pinned_ratio=5,throttle=strictlimit,"
			      "stats_log=/var/tmp/x.jsonl,stats_interval_ms=10";
	const char *ok[] = { "foliofs", "-o", ok_opts, "/b", "/tmp" };
	T_CHECK(parse(&cfg, err, 5, ok) == 0);
	T_CHECK(cfg.wb.dirty_ratio == 35 && cfg.wb.dirty_bytes == 0);
	T_CHECK(cfg.wb.dirty_pinned_ratio == 5 && cfg.wb.dirty_pinned_bytes == 0);
	T_CHECK(cfg.wb.throttle && !strcmp(cfg.wb.throttle, "strictlimit"));
	T_CHECK(cfg.wb.stats_log && !strcmp(cfg.wb.stats_log, "/var/tmp/x.jsonl"));
	T_CHECK(cfg.wb.stats_interval_ms == 10);
	ffs_config_free(&cfg);

	const char *edge_opts = "dirty_ratio=100,dirty_pinned_ratio=100,stats_interval_ms=3600000,"
				"throttle=none,throttle=bdp";
	const char *edges[] = { "foliofs", "-o", edge_opts, "/b", "/tmp" };
	T_CHECK(parse(&cfg, err, 5, edges) == 0);
	T_CHECK(cfg.wb.dirty_ratio == 100 && cfg.wb.dirty_pinned_ratio == 100);
	T_CHECK(cfg.wb.stats_interval_ms == 3600000);
	T_CHECK(cfg.wb.throttle && !strcmp(cfg.wb.throttle, "bdp"));	/* the last one */
	ffs_config_free(&cfg);

	/* Bytes win over the ratio in either order; the ratio reads 0, as in /proc/sys/vm. */
	const char *last_opts = "dirty_ratio=30,dirty_bytes=64M,"
				"dirty_pinned_ratio=7,dirty_pinned_bytes=1G";
	const char *bytes_last[] = { "foliofs", "-o", last_opts, "/b", "/tmp" };
	T_CHECK(parse(&cfg, err, 5, bytes_last) == 0);
	T_CHECK(cfg.wb.dirty_bytes == 64u << 20 && cfg.wb.dirty_ratio == 0);
	T_CHECK(cfg.wb.dirty_pinned_bytes == 1u << 30 && cfg.wb.dirty_pinned_ratio == 0);
	ffs_config_free(&cfg);
	const char *first_opts = "dirty_bytes=8K,dirty_ratio=30,"
				 "dirty_pinned_bytes=4096,dirty_pinned_ratio=7";
	const char *bytes_first[] = { "foliofs", "-o", first_opts, "/b", "/tmp" };
	T_CHECK(parse(&cfg, err, 5, bytes_first) == 0);
	T_CHECK(cfg.wb.dirty_bytes == 8192 && cfg.wb.dirty_ratio == 0);
	T_CHECK(cfg.wb.dirty_pinned_bytes == 4096 && cfg.wb.dirty_pinned_ratio == 0);
	ffs_config_free(&cfg);
	/* dirty_bytes=0 means "use the ratio". */
	const char *bytes_zero[] = { "foliofs", "-o", "dirty_bytes=0,dirty_ratio=30", "/b", "/tmp" };
	T_CHECK(parse(&cfg, err, 5, bytes_zero) == 0);
	T_CHECK(cfg.wb.dirty_bytes == 0 && cfg.wb.dirty_ratio == 30);
	ffs_config_free(&cfg);

	/* A relative stats_log is made absolute against the current directory. */
	const char *rel[] = { "foliofs", "-o", "stats_log=logs/s.jsonl", "/b", "/tmp" };
	T_CHECK(parse(&cfg, err, 5, rel) == 0);
	cwd = getcwd(NULL, 0);
	T_CHECK(cwd && cfg.wb.stats_log && cfg.wb.stats_log[0] == '/');
	if (cwd && cfg.wb.stats_log) {
		size_t n = strlen(cwd);

		T_CHECK(!strncmp(cfg.wb.stats_log, cwd, n) &&
			!strcmp(cfg.wb.stats_log + n, "/logs/s.jsonl"));
	}
	free(cwd);
	ffs_config_free(&cfg);

	check_bad("dirty_ratio=101", "dirty_ratio=101");
	check_bad("dirty_ratio=0", "dirty_ratio=0");
	check_bad("dirty_ratio=-1", "dirty_ratio=-1");
	check_bad("dirty_ratio=ten", "dirty_ratio=ten");
	check_bad("dirty_bytes=4K", "dirty_bytes=4K");
	check_bad("dirty_bytes=lots", "dirty_bytes=lots");
	check_bad("dirty_bytes=1.5G", "dirty_bytes=1.5G");
	check_bad("dirty_pinned_ratio=101", "dirty_pinned_ratio=101");
	check_bad("dirty_pinned_ratio=x", "dirty_pinned_ratio=x");
	check_bad("dirty_pinned_bytes=12Q", "dirty_pinned_bytes=12Q");
	check_bad("throttle=", "throttle=");
	check_bad("throttle=sleepy", "throttle=sleepy");
	check_bad("stats_log=", "stats_log=");
	check_bad("stats_interval_ms=9", "stats_interval_ms=9");
	check_bad("stats_interval_ms=3600001", "stats_interval_ms=3600001");
	check_bad("stats_interval_ms=1s", "stats_interval_ms=1s");
}

/* Policy parameters: resolved against the policy chosen, in any order. */
static void test_policy_params(void)
{
	char err[FFS_ERRLEN];
	struct ffs_config cfg;
	const char *orders[] = { "dirty_account=pinned,account.share=250",
				 "account.share=7,account.share=250,dirty_account=pinned" };

	for (int i = 0; i < 2; i++) {
		const char *argv[] = { "foliofs", "-o", orders[i], "/b", "/tmp" };

		T_CHECK(parse(&cfg, err, 5, argv) == 0);
		T_CHECK(!strcmp(cfg.bs.account->name, "pinned"));
		T_CHECK(cfg.bs.account_set == 1 && cfg.bs.account_params[0] == 250);
		T_CHECK(cfg.bs.size_set == 0);
		ffs_config_free(&cfg);
	}
	const char *deflt[] = { "foliofs", "-o", "dirty_account=pinned", "/b", "/tmp" };
	T_CHECK(parse(&cfg, err, 5, deflt) == 0);
	T_CHECK(cfg.bs.account_set == 0);
	ffs_config_free(&cfg);

	check_bad("dirty_account=pinned,account.share=1001", "account.share=1001: an integer in [0, 1000]");
	check_bad("dirty_account=pinned,account.share=-1", "account.share=-1");
	check_bad("dirty_account=pinned,account.share=", "account.share=: ");
	check_bad("dirty_account=pinned,account.share=1e3", "account.share=1e3");
	check_bad("dirty_account=pinned,account.sharp=1", "account.sharp: not a parameter of dirty_account=pinned (it has: share)");
	check_bad("account.share=1", "account.share: not a parameter of dirty_account=page (it has none)");
	check_bad("size.order=3", "size.order: not a parameter of folio_policy=kernel (it has none)");
	check_bad("folio_policy=fixed,size.order=3", "size.order: not a parameter of folio_policy=fixed (it has none)");
	check_bad("account.share", "account.share: not account.NAME=VALUE");
	check_bad("dirty_account=pinnedx,account.share=1", "dirty_account=pinnedx: unknown policy");
	check_bad("load=/nonexistent/p.so", "load=/nonexistent/p.so: No such file or directory");
	check_bad("load=/etc/passwd", "load=/etc/passwd: cannot load");
	check_bad("throttle.min_dirty=8", "throttle.min_dirty: not a parameter of throttle=bdp (it has none)");
	check_bad("throttle=strictlimit,throttle.min_dirty=0", "throttle.min_dirty=0: an integer in [1, 1048576], pages");

	const char *thr[] = { "foliofs", "-o", "throttle.min_dirty=64,throttle=strictlimit", "/b", "/tmp" };
	T_CHECK(parse(&cfg, err, 5, thr) == 0);
	T_CHECK(cfg.wb.throttle_set == 1 && cfg.wb.throttle_params[0] == 64);
	ffs_config_free(&cfg);
}

int main(void)
{
	test_size();
	test_uint_double();
	test_args();
	test_throttle_opts();
	test_policy_params();
	return T_EXIT_PASS;
}
