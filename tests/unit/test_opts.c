// SPDX-License-Identifier: GPL-2.0-or-later
/* Command line and option value parsing (fusefs/opts.c). */
#include "fusefs.h"
#include "test_helpers.h"

#include <errno.h>
#include <string.h>

static void test_size(void)
{
	char err[FFS_ERRLEN];
	uint64_t v = 7;

	T_CHECK(ffs_parse_size("cache_size", "4096", 0, UINT64_MAX, &v, err) == 0 && v == 4096);
	T_CHECK(ffs_parse_size("cache_size", "4k", 0, UINT64_MAX, &v, err) == 0 && v == 4096);
	T_CHECK(ffs_parse_size("cache_size", "2M", 0, UINT64_MAX, &v, err) == 0 && v == 2u << 20);
	T_CHECK(ffs_parse_size("cache_size", "3GiB", 0, UINT64_MAX, &v, err) == 0 && v == 3ull << 30);
	T_CHECK(ffs_parse_size("cache_size", "1TB", 0, UINT64_MAX, &v, err) == 0 && v == 1ull << 40);
	v = 7;
	T_CHECK(ffs_parse_size("cache_size", "banana", 0, UINT64_MAX, &v, err) == -EINVAL && v == 7);
	T_CHECK(strstr(err, "cache_size=banana") != NULL);
	T_CHECK(ffs_parse_size("cache_size", "", 0, UINT64_MAX, &v, err) == -EINVAL);
	T_CHECK(ffs_parse_size("cache_size", "-1", 0, UINT64_MAX, &v, err) == -EINVAL);
	T_CHECK(ffs_parse_size("cache_size", "4X", 0, UINT64_MAX, &v, err) == -EINVAL);
	T_CHECK(ffs_parse_size("cache_size", "4KX", 0, UINT64_MAX, &v, err) == -EINVAL);
	T_CHECK(ffs_parse_size("cache_size", "1.5G", 0, UINT64_MAX, &v, err) == -EINVAL);
	T_CHECK(ffs_parse_size("cache_size", "99999999999999999999", 0, UINT64_MAX, &v, err) == -EINVAL);
	T_CHECK(ffs_parse_size("cache_size", "17179869184T", 0, UINT64_MAX, &v, err) == -EINVAL);
	T_CHECK(ffs_parse_size("block_size", "3000", 512, 65536, &v, err) == 0);
	T_CHECK(ffs_parse_size("block_size", "128k", 512, 65536, &v, err) == -EINVAL);
	T_CHECK(strstr(err, "out of range") != NULL);
	T_CHECK(v == 3000);
}

static void test_uint_double(void)
{
	char err[FFS_ERRLEN];
	uint64_t u = 0;
	double d = 0;

	T_CHECK(ffs_parse_uint("n", "0", 0, 10, &u, err) == 0 && u == 0);
	T_CHECK(ffs_parse_uint("n", "10", 0, 10, &u, err) == 0 && u == 10);
	T_CHECK(ffs_parse_uint("n", "11", 0, 10, &u, err) == -EINVAL && u == 10);
	T_CHECK(ffs_parse_uint("n", " 1", 0, 10, &u, err) == -EINVAL);
	T_CHECK(ffs_parse_uint("n", "1k", 0, 10000, &u, err) == -EINVAL);
	T_CHECK(ffs_parse_double("t", "0.5", 0, 10, &d, err) == 0 && d == 0.5);
	T_CHECK(ffs_parse_double("t", "-1", 0, 10, &d, err) == -EINVAL && d == 0.5);
	T_CHECK(ffs_parse_double("t", "nan", 0, 10, &d, err) == -EINVAL);
	T_CHECK(ffs_parse_double("t", "1e999", 0, 10, &d, err) == -EINVAL);
	T_CHECK(ffs_parse_double("t", "", 0, 10, &d, err) == -EINVAL);
	T_CHECK(ffs_parse_double("t", "2s", 0, 10, &d, err) == -EINVAL);
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
	T_CHECK(cfg.kernel_cache && cfg.allow_other && cfg.foreground);
	T_CHECK(cfg.attr_timeout == 2.5);
	T_CHECK(!strcmp(cfg.backing, "/backing") && !strcmp(cfg.mountpoint, "/tmp"));
	ffs_config_free(&cfg);

	const char *deflt[] = { "foliofs", "/b", "/tmp" };
	T_CHECK(parse(&cfg, err, 3, deflt) == 0);
	T_CHECK(!cfg.kernel_cache && !cfg.allow_other && !cfg.foreground);
	T_CHECK(cfg.attr_timeout == 1.0);
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

int main(void)
{
	test_size();
	test_uint_double();
	test_args();
	return T_EXIT_PASS;
}
