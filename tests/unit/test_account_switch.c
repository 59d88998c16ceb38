// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_account_switch.c - switching the accounting policy of a live cache
 * (bs_cache_set_account) keeps the charge exactly the sum of the folios'
 * prices under the new policy.
 *
 *  exact     a known state (one 8 KiB write in each of 64 folios of
 *            2 MiB) charges each registered policy's price of it (64
 *            folios under folio, 128 pages under page and 128 blocks'
 *            bytes under block), whichever policy it was written under;
 *            switching moves neither nr_dirtied nor nr_written.
 *  racing    two writers, a writeback thread and the main thread
 *            switching among the registered policies every few hundred
 *            microseconds; at the end
 *            (nothing in flight) bs_cache_check() finds the charge equal to
 *            the sum of the prices, and a full writeback brings it to 0.
 */
#include "blockstate.h"
#include "mem_backing.h"
#include "test_helpers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FOLIO (2u << 20)
#define FILE_BYTES (128ull << 20)

/* The backing file (mem_backing) is empty: nothing is ever read from it. */
static struct mem_backing backing;

static void no_clean(void *ctx)
{
	(void)ctx;
}

static const struct bs_cache_ops cache_ops = { .need_clean = no_clean };

static struct bs_cache *make_cache(const char *policy)
{
	struct bs_config cfg = {
		.block_size = 4096,
		.folio_size = FOLIO,
		.cache_size = 1ull << 30,
		.account = bs_account_policy_find(policy),
		.size = bs_size_policy_find("fixed"),
	};
	struct bs_cache *cache;

	T_CHECK(cfg.account && cfg.size);
	T_CHECK(bs_cache_create(&cfg, &cache_ops, NULL, &cache) == 0);
	return cache;
}

/* Write back everything of @file. */
static void writeback_all(struct bs_file *file)
{
	struct bs_wb_run runs[64];
	off_t pos = 0;
	int n;

	while ((n = bs_wb_collect(file, &pos, INT64_MAX, runs, 64, 64u << 20)) > 0)
		for (int i = 0; i < n; i++)
			bs_wb_complete(file, &runs[i], 0);
}

/* The number of registered accounting policies. */
static size_t nr_policies(void)
{
	size_t n = 0;

	while (bs_account_policy_at(n))
		n++;
	return n;
}

/*
 * What @p charges for exact's state: 64 folios each holding one 8 KiB
 * write of two blocks on two pages.  The three policies the kernel's
 * story names are also held to their numbers (test_exact).
 */
static uint64_t exact_charge(const struct bs_account_policy *p)
{
	int64_t params[BS_PARAMS_MAX];
	struct bs_held_state hs = {
		.folio_size = FOLIO, .block_size = 4096, .held_blocks = 2, .held_pages = 2,
		.params = params,
	};

	bs_params_defaults(p->params, p->nr_params, params);	/* a switch sets the defaults */
	return 64 * p->price(&hs);
}

static void test_exact(void)
{
	size_t nr = nr_policies();
	char buf[8192];

	memset(buf, 0x5a, sizeof(buf));
	for (size_t start = 0; start < nr; start++) {
		struct bs_cache *cache = make_cache(bs_account_policy_at(start)->name);
		struct bs_stats before, st;
		struct bs_file *file;

		T_CHECK(bs_file_create(cache, &mem_backing_ops, &backing, 0, &file) == 0);
		for (int i = 0; i < 64; i++)
			T_CHECK(bs_write(file, buf, sizeof(buf), (off_t)i * FOLIO + 4096) == sizeof(buf));
		bs_cache_stats(cache, &before);
		for (size_t k = 0; k < 2 * nr + 1; k++) {
			const struct bs_account_policy *p = bs_account_policy_at((start + k) % nr);

			bs_cache_set_account(cache, p);
			T_CHECK(bs_cache_account(cache) == p);
			bs_cache_stats(cache, &st);
			T_CHECK(st.charged_bytes == exact_charge(p));
			if (!strcmp(p->name, "folio"))
				T_CHECK(st.charged_bytes == 64ull * FOLIO);
			else if (!strcmp(p->name, "page") || !strcmp(p->name, "block"))
				T_CHECK(st.charged_bytes == 64ull * 8192);
			T_CHECK(st.nr_dirtied == before.nr_dirtied);
			T_CHECK(st.nr_written == before.nr_written);
			T_CHECK(st.nr_discharged == before.nr_discharged);
			T_CHECK(st.dirty_bytes_exact == 64ull * 8192);
			T_CHECK(bs_cache_check(cache) == 0);
		}
		writeback_all(file);
		bs_cache_stats(cache, &st);
		T_CHECK(st.charged_bytes == 0);
		T_CHECK(bs_cache_check(cache) == 0);
		bs_file_destroy(file);
		bs_cache_destroy(cache);
	}
}

struct race {
	struct bs_file *file;
	atomic_bool stop;
	pthread_mutex_t wb_lock;	/* one collection of the file at a time */
};

static void *writer(void *arg)
{
	struct race *r = arg;
	uint64_t rng = (uint64_t)(uintptr_t)&r ^ 0x9e3779b97f4a7c15ull;
	char buf[16384];

	memset(buf, 0x33, sizeof(buf));
	while (!atomic_load(&r->stop)) {
		uint64_t v = t_xorshift(&rng);
		size_t len = 512 + (size_t)(v % (sizeof(buf) - 512));
		off_t off = (off_t)((v >> 20) % (FILE_BYTES - sizeof(buf)));

		T_CHECK(bs_write(r->file, buf, len, off) == (ssize_t)len);
	}
	return NULL;
}

static void *flusher(void *arg)
{
	struct race *r = arg;
	struct bs_wb_run runs[16];
	uint64_t rng = 88172645463325252ull;

	while (!atomic_load(&r->stop)) {
		off_t pos = (off_t)(t_xorshift(&rng) % FILE_BYTES);
		int n;

		pthread_mutex_lock(&r->wb_lock);
		n = bs_wb_collect(r->file, &pos, INT64_MAX, runs, 16, 1u << 20);
		for (int i = 0; i < n; i++)
			bs_wb_complete(r->file, &runs[i], (t_xorshift(&rng) % 8) ? 0 : -5 /* EIO */);
		pthread_mutex_unlock(&r->wb_lock);
	}
	return NULL;
}

static void test_racing(void)
{
	size_t nr = nr_policies();
	struct bs_cache *cache = make_cache("page");
	char buf[8192];
	pthread_t w[2], f;
	struct race r = { 0 };
	struct bs_stats st;

	T_CHECK(bs_file_create(cache, &mem_backing_ops, &backing, 0, &r.file) == 0);
	pthread_mutex_init(&r.wb_lock, NULL);
	for (int i = 0; i < 2; i++)
		T_CHECK(pthread_create(&w[i], NULL, writer, &r) == 0);
	T_CHECK(pthread_create(&f, NULL, flusher, &r) == 0);
	for (int i = 0; i < 300; i++) {
		struct timespec ts = { 0, 300L * 1000 };

		bs_cache_set_account(cache, bs_account_policy_at((size_t)i % nr));
		nanosleep(&ts, NULL);
	}
	atomic_store(&r.stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(w[i], NULL);
	pthread_join(f, NULL);
	/*
	 * Quiescent: the charge is the sum of prices under the last policy.
	 * The flusher may have cleaned everything just before it stopped, so
	 * a last write makes sure there is a charge to check.
	 */
	T_CHECK(bs_cache_check(cache) == 0);
	memset(buf, 0x44, sizeof(buf));
	T_CHECK(bs_write(r.file, buf, sizeof(buf), 0) == sizeof(buf));
	T_CHECK(bs_cache_check(cache) == 0);
	bs_cache_stats(cache, &st);
	T_CHECK(st.charged_bytes > 0);
	writeback_all(r.file);
	bs_cache_stats(cache, &st);
	T_CHECK(st.charged_bytes == 0 && st.nr_dirty == 0);
	T_CHECK(bs_cache_check(cache) == 0);
	pthread_mutex_destroy(&r.wb_lock);
	bs_file_destroy(r.file);
	bs_cache_destroy(cache);
}

int main(void)
{
	mem_backing_init(&backing);
	test_exact();
	test_racing();
	mem_backing_destroy(&backing);
	return T_EXIT_PASS;
}
