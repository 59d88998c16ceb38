// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Policy parameters (blockstate/params.c, account_switch.c, the pinned
 * policy): parsing and its one-line errors, the checks a policy passes
 * before it is registered, the config check, and a parameter change on a
 * live cache repricing every folio to exactly the new prices.
 */
#include "policy.h"
#include "mem_backing.h"
#include "test_helpers.h"

#include <errno.h>
#include <string.h>

#define FOLIO (2u << 20)

static const struct bs_param p_pct = {
	.name = "pct", .help = "h", .unit = "%", .def = 50, .min = 1, .max = 100,
};
static const struct bs_param p_signed = {
	.name = "off", .help = "h", .unit = "", .def = 0, .min = INT64_MIN, .max = INT64_MAX,
};

static void test_parse(void)
{
	char err[256];
	int64_t v = 7;

	T_CHECK(bs_param_parse("account", &p_pct, "1", &v, err, sizeof(err)) == 0 && v == 1);
	T_CHECK(bs_param_parse("account", &p_pct, "100", &v, err, sizeof(err)) == 0 && v == 100);
	v = 7;
	/* Out of range, malformed: refused, named, and nothing written. */
	const char *bad[] = { "0", "101", "", "-", "+5", " 5", "5 ", "5k", "0x10", "1.5", "-1",
			      "99999999999999999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[64];

		err[0] = '\0';
		T_CHECK(bs_param_parse("account", &p_pct, bad[i], &v, err, sizeof(err)) == -EINVAL);
		T_CHECK(v == 7);
		snprintf(want, sizeof(want), "account.pct=%s: ", bad[i]);
		T_CHECK(!strncmp(err, want, strlen(want)));
		T_CHECK(strstr(err, "[1, 100]") && strstr(err, "%"));
		T_CHECK(!strchr(err, '\n'));
	}
	/* The edges of int64_t. */
	T_CHECK(bs_param_parse("size", &p_signed, "-9223372036854775808", &v, err, sizeof(err)) == 0 &&
		v == INT64_MIN);
	T_CHECK(bs_param_parse("size", &p_signed, "9223372036854775807", &v, err, sizeof(err)) == 0 &&
		v == INT64_MAX);
	T_CHECK(bs_param_parse("size", &p_signed, "9223372036854775808", &v, err, sizeof(err)) == -EINVAL);
	T_CHECK(bs_param_parse("size", &p_signed, "-9223372036854775809", &v, err, sizeof(err)) == -EINVAL);
	T_CHECK(v == INT64_MAX);
	T_CHECK(bs_param_parse("size", &p_signed, "-0", &v, err, sizeof(err)) == 0 && v == 0);
}

static void test_lookup(void)
{
	const struct bs_account_policy *pinned = bs_account_policy_find("pinned");
	char err[256];

	T_CHECK(pinned && pinned->nr_params == 1);
	T_CHECK(bs_param_index(pinned->params, pinned->nr_params, "share") == 0);
	T_CHECK(bs_param_index(pinned->params, pinned->nr_params, "shar") == -ENOENT);
	bs_param_unknown("account", "pinned", pinned->params, pinned->nr_params, "x", err,
			 sizeof(err));
	T_CHECK(!strcmp(err, "account.x: not a parameter of dirty_account=pinned (it has: share)"));
	bs_param_unknown("size", "fixed", NULL, 0, "x", err, sizeof(err));
	T_CHECK(!strcmp(err, "size.x: not a parameter of folio_policy=fixed (it has none)"));
}

static uint64_t one_price(const struct bs_held_state *st)
{
	return (uint64_t)st->held_pages * BS_PAGE_SIZE;
}

/* Every built-in policy passes the check; broken ones are refused with a reason. */
static void test_policy_check(void)
{
	const struct bs_account_policy *a;
	const struct bs_size_policy *s;
	char err[256];

	for (size_t i = 0; (a = bs_account_policy_at(i)); i++)
		T_CHECK(bs_account_policy_check(a, err, sizeof(err)) == 0);
	for (size_t i = 0; (s = bs_size_policy_at(i)); i++)
		T_CHECK(bs_size_policy_check(s, err, sizeof(err)) == 0);

	struct bs_param two[2] = { p_pct, p_pct };
	struct bs_param wide = p_pct;
	struct bs_account_policy p = { .name = "ok", .help = "h", .price = one_price };

	T_CHECK(bs_account_policy_check(&p, err, sizeof(err)) == 0);
	p.name = "Bad-Name";
	T_CHECK(bs_account_policy_check(&p, err, sizeof(err)) == -EINVAL && strstr(err, "Bad-Name"));
	p.name = "a_name_of_thirty_two_characters_";
	T_CHECK(bs_account_policy_check(&p, err, sizeof(err)) == -EINVAL);
	p.name = "ok";
	p.price = NULL;
	T_CHECK(bs_account_policy_check(&p, err, sizeof(err)) == -EINVAL && strstr(err, "callback"));
	p.price = one_price;
	p.params = two;
	p.nr_params = 2;
	T_CHECK(bs_account_policy_check(&p, err, sizeof(err)) == -EINVAL && strstr(err, "twice"));
	wide.def = 0;
	p.params = &wide;
	p.nr_params = 1;
	T_CHECK(bs_account_policy_check(&p, err, sizeof(err)) == -EINVAL && strstr(err, "default 0"));
	p.params = two;
	p.nr_params = BS_PARAMS_MAX + 1;
	T_CHECK(bs_account_policy_check(&p, err, sizeof(err)) == -EINVAL);
}

/* A config's values are checked against the policy's ranges. */
static void test_config_check(void)
{
	struct bs_config cfg = {
		.block_size = 4096, .folio_size = FOLIO, .cache_size = 64u << 20,
		.account = bs_account_policy_find("pinned"), .size = bs_size_policy_find("fixed"),
	};
	char err[256];

	T_CHECK(bs_config_check(&cfg, err, sizeof(err)) == 0);
	cfg.account_params[0] = 1001;	/* not set: the default is used */
	T_CHECK(bs_config_check(&cfg, err, sizeof(err)) == 0);
	cfg.account_set = 1;
	T_CHECK(bs_config_check(&cfg, err, sizeof(err)) == -EINVAL && strstr(err, "account.share=1001"));
	cfg.account_params[0] = 1000;
	T_CHECK(bs_config_check(&cfg, err, sizeof(err)) == 0);
	cfg.account_set = 2;	/* pinned has one parameter */
	T_CHECK(bs_config_check(&cfg, err, sizeof(err)) == -EINVAL);
	cfg.account_set = 0;
	cfg.size_set = 1;	/* fixed has none */
	T_CHECK(bs_config_check(&cfg, err, sizeof(err)) == -EINVAL);
}

static void no_clean(void *ctx)
{
	(void)ctx;
}

static const struct bs_cache_ops cache_ops = { .need_clean = no_clean };

/*
 * pinned at share 0 prices as page, at 1000 as folio, at 125 one eighth
 * of a folio: on a live cache holding 16 folios with one dirty 8 KiB
 * write each, a parameter change reprices every folio to exactly that,
 * without counting anything dirtied or written.
 */
static void test_live_reprice(void)
{
	struct mem_backing backing;
	struct bs_config cfg = {
		.block_size = 4096, .folio_size = FOLIO, .cache_size = 256u << 20,
		.account = bs_account_policy_find("pinned"), .size = bs_size_policy_find("fixed"),
		.account_params = { 0 }, .account_set = 1,
	};
	static const struct { int64_t share; uint64_t per_folio; } steps[] = {
		{ 0, 8192 }, { 1000, FOLIO }, { 125, FOLIO / 8 }, { 1, 8192 }, { 10, FOLIO * 10 / 1000 },
	};
	struct bs_cache *cache;
	struct bs_file *file;
	struct bs_stats st, before;
	char buf[8192];
	int64_t values[BS_PARAMS_MAX];
	struct bs_wb_run runs[64];
	off_t pos = 0;
	int n;

	mem_backing_init(&backing);
	memset(buf, 'x', sizeof(buf));
	T_CHECK(bs_cache_create(&cfg, &cache_ops, NULL, &cache) == 0);
	T_CHECK(bs_file_create(cache, &mem_backing_ops, &backing, 0, &file) == 0);
	for (int i = 0; i < 16; i++)
		T_CHECK(bs_write(file, buf, sizeof(buf), (off_t)i * FOLIO + 4096) == sizeof(buf));
	bs_cache_stats(cache, &before);
	T_CHECK(before.charged_bytes == 16ull * 8192);
	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		T_CHECK(bs_cache_account_params(cache, values) == cfg.account);
		values[0] = steps[s].share;
		T_CHECK(bs_cache_set_account_params(cache, cfg.account, values) == 0);
		bs_cache_stats(cache, &st);
		T_CHECK(st.charged_bytes == 16 * steps[s].per_folio);
		T_CHECK(st.nr_dirtied == before.nr_dirtied && st.nr_discharged == before.nr_discharged);
		T_CHECK(bs_cache_account_params(cache, values) == cfg.account && values[0] == steps[s].share);
	}
	/* A switch of policy takes its defaults. */
	T_CHECK(bs_cache_set_account(cache, cfg.account) == 0);
	bs_cache_account_params(cache, values);
	T_CHECK(values[0] == 125);
	bs_cache_stats(cache, &st);
	T_CHECK(st.charged_bytes == 16ull * FOLIO / 8);
	/* Written back, every charge is discharged. */
	while ((n = bs_wb_collect(file, &pos, INT64_MAX, runs, 64, 64u << 20)) > 0)
		for (int i = 0; i < n; i++)
			bs_wb_complete(file, &runs[i], 0);
	bs_cache_stats(cache, &st);
	T_CHECK(st.charged_bytes == 0);
	T_CHECK(bs_cache_check(cache) == 0);
	bs_file_destroy(file);
	bs_cache_destroy(cache);
	mem_backing_destroy(&backing);
}

int main(void)
{
	test_parse();
	test_lookup();
	test_policy_check();
	test_config_check();
	test_live_reprice();
	return T_EXIT_PASS;
}
