// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_bs_pool.c - the folio memory pool (blockstate/pool.c).
 *
 * - reuse: memory of dropped folios makes the next folios (pool_hits, the
 *   same addresses), and what it held never shows through: after a file
 *   of 0xaa bytes is dropped, a second file made in its memory reads
 *   zeros in holes, in the unwritten rest of partly written blocks,
 *   past a short backing read, after truncate extends it, and in a
 *   punched range; for block sizes below, at and above the page size.
 * - reclaim refills the pool: a sequential read of 4x cache_size takes
 *   fresh memory for the first cache_size only.
 * - the bound: cache_bytes + pool_bytes never exceed cache_size, and a
 *   folio of a size the pool lacks is made by giving back pooled memory
 *   of another size, not by reclaiming cached data.
 * Single threaded: every count is exact.  Run under ASan, the end of each
 * case (bs_cache_destroy) also checks that the pool gives everything back.
 */
#include "bs_i.h"
#include "mem_backing.h"
#include "test_helpers.h"

#include <errno.h>
#include <linux/falloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((size_t)1 << 10)
#define F64K (64 * KiB)
#define FILL 0xaa

/* ---- the backing file: mem_backing, at most @cap bytes ---- */

/* A file of @size bytes of @byte that may grow to @cap. */
static void mem_init(struct mem_backing *m, size_t cap, size_t size, int byte)
{
	mem_backing_init(m);
	m->max_len = cap;
	mem_backing_set_len(m, size);
	if (size)
		memset(m->data, byte, size);
}

/* ---- helpers ---- */

static struct bs_cache *cache_new(uint32_t block_size, uint32_t folio_size,
				  uint64_t cache_size, const char *sizing)
{
	struct bs_config cfg = {
		.block_size = block_size,
		.folio_size = folio_size,
		.cache_size = cache_size,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find(sizing),
		.readahead_kb = 0,
	};
	struct bs_cache *cache;

	T_CHECK(bs_cache_create(&cfg, NULL, NULL, &cache) == 0);
	return cache;
}

static struct bs_stats stats(struct bs_cache *cache)
{
	struct bs_stats st;

	T_CHECK(bs_cache_check(cache) == 0);
	bs_cache_stats(cache, &st);
	T_CHECK(st.cache_bytes + st.pool_bytes <= bs_cache_config(cache)->cache_size);
	return st;
}

/* [off, off + len) of @file reads as @byte. */
static void check_reads(struct bs_file *file, off_t off, size_t len, int byte)
{
	unsigned char *buf = malloc(len);

	T_CHECK(buf);
	T_CHECK(bs_read(file, NULL, buf, len, off) == (ssize_t)len);
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != byte) {
			fprintf(stderr, "byte %lld reads 0x%02x, not 0x%02x\n",
				(long long)off + (long long)i, buf[i], byte);
			exit(T_EXIT_FAIL);
		}
	}
	free(buf);
}

static void write_bytes(struct bs_file *file, off_t off, size_t len, int byte)
{
	unsigned char *buf = malloc(len);

	T_CHECK(buf);
	memset(buf, byte, len);
	T_CHECK(bs_write(file, buf, len, off) == (ssize_t)len);
	free(buf);
}

static char *folio_data(struct bs_file *file, off_t off)
{
	struct bs_folio *folio = bs_file_lookup(file, off);
	char *data;

	T_CHECK(folio);
	data = folio->data;
	bs_folio_put(folio);
	return data;
}

/* ---- reuse ---- */

#define OLD_FOLIOS 16

/*
 * Fill the cache with OLD_FOLIOS clean folios of FILL bytes (a file read
 * whole), drop them, and return their addresses in @addrs.
 */
static void fill_pool(struct bs_cache *cache, char **addrs)
{
	struct mem_backing m;
	struct bs_file *file;
	struct bs_stats st;

	mem_init(&m, OLD_FOLIOS * F64K, OLD_FOLIOS * F64K, FILL);
	T_CHECK(bs_file_create(cache, &mem_backing_ops, &m, (off_t)m.len, &file) == 0);
	check_reads(file, 0, m.len, FILL);
	for (int i = 0; i < OLD_FOLIOS; i++)
		addrs[i] = folio_data(file, (off_t)i * (off_t)F64K);
	st = stats(cache);
	T_CHECK(st.pool_misses == OLD_FOLIOS && st.pool_hits == 0 && st.pool_bytes == 0);
	bs_file_destroy(file);
	st = stats(cache);
	T_CHECK(st.cache_bytes == 0 && st.pool_bytes == OLD_FOLIOS * F64K);
	mem_backing_destroy(&m);
}

static bool is_old(char *const *addrs, const char *data)
{
	for (int i = 0; i < OLD_FOLIOS; i++)
		if (addrs[i] == data)
			return true;
	return false;
}

static void test_reuse(uint32_t block_size)
{
	struct bs_cache *cache = cache_new(block_size, F64K, (uint64_t)2 * OLD_FOLIOS * F64K, "fixed");
	char *addrs[OLD_FOLIOS];
	struct mem_backing m;
	struct bs_file *file;
	struct bs_stats st;

	fill_pool(cache, addrs);
	mem_init(&m, 8 * F64K, 0, 0);
	T_CHECK(bs_file_create(cache, &mem_backing_ops, &m, 0, &file) == 0);

	/* Folio 0: two short writes, a hole of whole blocks between them. */
	write_bytes(file, 100, 100, 'a');
	T_CHECK(is_old(addrs, folio_data(file, 0)));
	write_bytes(file, (off_t)F64K - 300, 100, 'b');
	check_reads(file, 0, 100, 0);
	check_reads(file, 100, 100, 'a');
	check_reads(file, 200, F64K - 500, 0);
	check_reads(file, (off_t)F64K - 300, 100, 'b');

	/* Folio 1: a short backing file read, then extended by truncate. */
	mem_backing_set_len(&m, F64K + 100);
	memset(m.data + F64K, 'c', 100);
	T_CHECK(bs_truncate(file, (off_t)m.len) == 0);
	check_reads(file, (off_t)F64K - 200, 200, 0);	/* the old EOF's block */
	check_reads(file, F64K, 100, 'c');
	T_CHECK(bs_truncate(file, 2 * (off_t)F64K + 10) == 0);
	check_reads(file, F64K + 100, F64K - 100 + 10, 0);

	/* Folios 2 and 3: written whole, then a range punched, then cut by truncate. */
	write_bytes(file, 2 * (off_t)F64K, 2 * F64K, 'd');
	T_CHECK(bs_fallocate(file, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			     2 * (off_t)F64K + 1000, 5000) == 0);
	check_reads(file, 2 * (off_t)F64K + 1000, 5000, 0);
	check_reads(file, 2 * (off_t)F64K + 6000, F64K - 6000, 'd');
	T_CHECK(bs_truncate(file, 3 * (off_t)F64K + 50) == 0);
	T_CHECK(bs_truncate(file, 4 * (off_t)F64K) == 0);
	check_reads(file, 3 * (off_t)F64K + 50, F64K - 50, 0);

	/* Folio 4: made by a read past everything written. */
	T_CHECK(bs_truncate(file, 5 * (off_t)F64K) == 0);
	check_reads(file, 4 * (off_t)F64K, F64K, 0);
	T_CHECK(is_old(addrs, folio_data(file, 4 * (off_t)F64K)));

	st = stats(cache);
	T_CHECK(st.pool_misses == OLD_FOLIOS && st.pool_hits == 5 &&
		st.pool_bytes == (OLD_FOLIOS - 5) * F64K);
	bs_file_destroy(file);
	bs_cache_destroy(cache);
	mem_backing_destroy(&m);
}

/* The last folio memory given back is the first taken (warmest in the CPU caches). */
static void test_lifo(void)
{
	struct bs_cache *cache = cache_new(4096, F64K, 8 * F64K, "fixed");
	struct mem_backing m;
	struct bs_file *file;
	char *data;

	mem_init(&m, 4 * F64K, 0, 0);
	T_CHECK(bs_file_create(cache, &mem_backing_ops, &m, 0, &file) == 0);
	write_bytes(file, 0, 4 * F64K, 'x');
	data = folio_data(file, 2 * (off_t)F64K);
	T_CHECK(bs_fallocate(file, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			     2 * (off_t)F64K, F64K) == 0);
	T_CHECK(stats(cache).pool_bytes == F64K);
	check_reads(file, 2 * (off_t)F64K, F64K, 0);
	T_CHECK(folio_data(file, 2 * (off_t)F64K) == data);
	T_CHECK(stats(cache).pool_hits == 1);
	bs_file_destroy(file);
	bs_cache_destroy(cache);
	mem_backing_destroy(&m);
}

/* ---- reclaim refills the pool ---- */

static void test_reclaim_refills(void)
{
	const size_t cached = 16, total = 64;
	struct bs_cache *cache = cache_new(4096, F64K, cached * F64K, "fixed");
	struct mem_backing m;
	struct bs_file *file;
	struct bs_stats st = stats(cache);

	mem_init(&m, total * F64K, total * F64K, FILL);
	for (size_t i = 0; i < total; i++)
		m.data[i * F64K] = (unsigned char)i;
	T_CHECK(bs_file_create(cache, &mem_backing_ops, &m, (off_t)m.len, &file) == 0);
	for (size_t i = 0; i < total; i++) {
		unsigned char buf[F64K];

		T_CHECK(bs_read(file, NULL, buf, F64K, (off_t)(i * F64K)) == (ssize_t)F64K);
		T_CHECK(buf[0] == (unsigned char)i && buf[1] == FILL && buf[F64K - 1] == FILL);
		st = stats(cache);
	}
	T_CHECK(st.pool_misses == cached && st.pool_hits == total - cached);
	T_CHECK(st.reclaimed_folios == total - cached && st.cache_bytes == cached * F64K);
	bs_file_destroy(file);
	T_CHECK(stats(cache).pool_bytes == cached * F64K);
	bs_cache_destroy(cache);
	mem_backing_destroy(&m);
}

/* ---- the bound, with folios of several sizes ---- */

static void test_bound_mixed_sizes(void)
{
	const size_t budget = 16 * F64K;
	struct bs_cache *cache = cache_new(4096, F64K, budget, "kernel");
	struct mem_backing mx, my;
	struct bs_file *x, *y;
	struct bs_stats st;

	/* 64 KiB writes at 64 KiB offsets: 64 KiB folios, then all dropped. */
	mem_init(&mx, budget, 0, 0);
	T_CHECK(bs_file_create(cache, &mem_backing_ops, &mx, 0, &x) == 0);
	for (size_t i = 0; i < 16; i++)
		write_bytes(x, (off_t)(i * F64K), F64K, 'x');
	T_CHECK(stats(cache).folios_order[4] == 16);
	T_CHECK(bs_truncate(x, 0) == 0);
	st = stats(cache);
	T_CHECK(st.cache_bytes == 0 && st.pool_bytes == budget);

	/* Cached clean data that must not be reclaimed while idle memory can go. */
	mem_init(&my, budget, 4096, 'y');
	T_CHECK(bs_file_create(cache, &mem_backing_ops, &my, 4096, &y) == 0);
	/* The pool has no 4 KiB chunk: one 64 KiB chunk is given back for it... */
	check_reads(y, 0, 4096, 'y');
	st = stats(cache);
	T_CHECK(st.pool_bytes == budget - F64K && st.cache_bytes == 4096);
	/* ...and the room it leaves takes fifteen more 4 KiB folios. */
	for (size_t i = 1; i < 16; i++)
		write_bytes(x, (off_t)(i * 3 * 4096), 4096, 'z');
	st = stats(cache);
	T_CHECK(st.folios_order[0] == 16 && st.pool_bytes == budget - F64K);
	T_CHECK(st.reclaimed_folios == 0);
	/* A 64 KiB folio comes from the pool with no reclaim either. */
	write_bytes(x, 4 * (off_t)F64K, F64K, 'w');
	st = stats(cache);
	T_CHECK(st.reclaimed_folios == 0 && st.pool_hits == 1);
	check_reads(y, 0, 4096, 'y');
	bs_file_destroy(x);
	bs_file_destroy(y);
	/* Every folio dropped: the pool holds no more than the budget. */
	T_CHECK(stats(cache).pool_bytes <= budget);
	bs_cache_destroy(cache);
	mem_backing_destroy(&mx);
	mem_backing_destroy(&my);
}

/* bs_cache_pool_shrink(): down to what is kept, largest chunks first. */
static void test_shrink(void)
{
	const size_t budget = 32 * F64K, p4k = 4 * KiB;
	struct bs_cache *cache = cache_new(4096, F64K, budget, "kernel");
	struct mem_backing m;
	struct bs_file *f;
	struct bs_stats st;

	/* Eight 64 KiB folios and eight 4 KiB ones, all dropped into the pool. */
	mem_init(&m, budget, 0, 0);
	T_CHECK(bs_file_create(cache, &mem_backing_ops, &m, 0, &f) == 0);
	for (size_t i = 0; i < 8; i++)
		write_bytes(f, (off_t)(i * F64K), F64K, 'x');
	for (size_t i = 0; i < 8; i++)
		write_bytes(f, (off_t)(16 * F64K + i * 3 * p4k), p4k, 'y');
	st = stats(cache);
	T_CHECK(st.folios_order[4] == 8 && st.folios_order[0] == 8);
	T_CHECK(bs_truncate(f, 0) == 0);
	T_CHECK(stats(cache).pool_bytes == 8 * F64K + 8 * p4k);

	/* Nothing to give back when what is kept is all of it. */
	T_CHECK(bs_cache_pool_shrink(cache, 8 * F64K + 8 * p4k) == 0);
	/* Whole 64 KiB chunks go first: 200 KiB over what is kept takes four. */
	T_CHECK(bs_cache_pool_shrink(cache, 5 * F64K + 8 * p4k - 2 * p4k) == 4 * F64K);
	st = stats(cache);
	T_CHECK(st.pool_bytes == 4 * F64K + 8 * p4k);
	/* Everything, then a new folio is fresh memory again. */
	T_CHECK(bs_cache_pool_shrink(cache, 0) == 4 * F64K + 8 * p4k);
	T_CHECK(stats(cache).pool_bytes == 0);
	write_bytes(f, 0, F64K, 'z');
	st = stats(cache);
	T_CHECK(st.pool_misses == 17 && st.pool_hits == 0);
	check_reads(f, 0, F64K, 'z');
	bs_file_destroy(f);
	bs_cache_destroy(cache);
	mem_backing_destroy(&m);
}

int main(void)
{
	test_reuse(512);
	test_reuse(4096);
	test_reuse(16384);
	test_lifo();
	test_reclaim_refills();
	test_bound_mixed_sizes();
	test_shrink();
	return T_EXIT_PASS;
}
