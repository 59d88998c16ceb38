// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_bs_file_map.c - the walk of a file's folios and the eviction of
 * its clean ones (blockstate/file_map.c), over an in-memory backing file.
 *
 * A 1 MiB file in 64 KiB folios (folio_policy=fixed, no readahead):
 * - the walk lists every folio once, in file order, with its order and
 *   flags (uptodate, dirty, readahead mark), and stops when asked;
 * - eviction drops exactly the clean folios wholly inside the range, keeps
 *   dirty folios (kept_held) and folios someone holds (kept_busy), takes
 *   the memory out of the counters (not as reclaim), leaves the cache's
 *   invariant intact, and what is read afterwards is the file's bytes;
 * - an empty or inverted range drops nothing;
 * - the walk gives each folio's LRU and sync state: a read's first use
 *   sets referenced, a second moves the folio to the active list
 *   (clearing referenced); written back, a block is unsynced until a sync
 *   succeeds.
 */
#include "bs_i.h"
#include "mem_backing.h"
#include "test_helpers.h"

#include <errno.h>
#include <string.h>

#define KiB ((size_t)1 << 10)
#define FSIZE (1024 * KiB)
#define FOLIO (64 * KiB)
#define NFOLIOS (FSIZE / FOLIO)

/* The backing file: mem_backing, FSIZE bytes of a pattern (data: its bytes). */
static struct mem_backing mem;
static unsigned char *data;

/* What a walk saw. */
struct seen {
	int n;
	int stop_at;		/* return 1 at this folio (-1: never) */
	struct bs_folio_info f[NFOLIOS];
};

static int collect(void *arg, const struct bs_folio_info *info)
{
	struct seen *s = arg;

	T_CHECK(s->n < (int)NFOLIOS);
	s->f[s->n++] = *info;
	return s->n == s->stop_at ? 42 : 0;
}

static void walk(struct bs_file *file, struct seen *s)
{
	memset(s, 0, sizeof(*s));
	s->stop_at = -1;
	T_CHECK(bs_file_folios(file, collect, s) == 0);
	for (int i = 1; i < s->n; i++)
		T_CHECK(s->f[i].start > s->f[i - 1].start);
}

static void read_all(struct bs_file *file)
{
	static char buf[FSIZE];

	T_CHECK(bs_read(file, NULL, buf, FSIZE, 0) == (ssize_t)FSIZE);
	T_CHECK(!memcmp(buf, data, FSIZE));
}

static void test_walk(struct bs_file *file)
{
	struct bs_folio *folio;
	struct seen s;
	char byte = 7;

	walk(file, &s);
	T_CHECK(s.n == 0);
	read_all(file);
	walk(file, &s);
	T_CHECK(s.n == (int)NFOLIOS);
	for (int i = 0; i < s.n; i++) {
		T_CHECK(s.f[i].start == (off_t)(i * FOLIO));
		T_CHECK(s.f[i].order == 4);
		T_CHECK(s.f[i].uptodate && !s.f[i].dirty && !s.f[i].writeback && !s.f[i].ra_mark);
	}
	/* A dirty block and a readahead mark show on their folios only. */
	T_CHECK(bs_write(file, &byte, 1, 3 * FOLIO + 5) == 1);
	data[3 * FOLIO + 5] = (unsigned char)byte;
	folio = bs_file_lookup(file, 5 * FOLIO);
	T_CHECK(folio);
	bs_folio_lock(folio);
	folio->ra_mark = true;
	bs_folio_unlock_raw(folio);
	bs_folio_put(folio);
	walk(file, &s);
	for (int i = 0; i < s.n; i++) {
		T_CHECK(s.f[i].dirty == (i == 3));
		T_CHECK(s.f[i].ra_mark == (i == 5));
		T_CHECK(s.f[i].uptodate);
	}
	/* The function's non-zero return stops the walk and is returned. */
	memset(&s, 0, sizeof(s));
	s.stop_at = 2;
	T_CHECK(bs_file_folios(file, collect, &s) == 42 && s.n == 2);
}

static void test_evict(struct bs_cache *cache, struct bs_file *file)
{
	struct bs_evict_result res;
	struct bs_folio *held;
	struct bs_stats st0, st1;
	struct seen s;

	/* Empty and inverted ranges do nothing. */
	bs_file_evict(file, 0, 0, &res);
	T_CHECK(res.folios == 0 && res.kept_held == 0 && res.kept_busy == 0);
	bs_file_evict(file, FOLIO, 0, &res);
	T_CHECK(res.folios == 0);

	/* [68K, 192K): only the folio [128K, 192K) is wholly inside. */
	bs_cache_stats(cache, &st0);
	bs_file_evict(file, FOLIO + 4 * KiB, 3 * FOLIO, &res);
	T_CHECK(res.folios == 1 && res.bytes == FOLIO && !res.kept_held && !res.kept_busy);
	bs_cache_stats(cache, &st1);
	T_CHECK(st1.folios == st0.folios - 1);
	T_CHECK(st1.cache_bytes == st0.cache_bytes - FOLIO);
	T_CHECK(st1.reclaimed_folios == st0.reclaimed_folios);
	walk(file, &s);
	T_CHECK(s.n == (int)NFOLIOS - 1);
	for (int i = 0; i < s.n; i++)
		T_CHECK(s.f[i].start != (off_t)(2 * FOLIO));
	T_CHECK(!bs_cache_check(cache));

	/* Everything: the dirty folio 3 and a held folio 7 stay. */
	held = bs_file_lookup(file, 7 * FOLIO);
	T_CHECK(held);
	bs_file_evict(file, 0, INT64_MAX, &res);
	T_CHECK(res.kept_held == 1 && res.kept_busy == 1);
	T_CHECK(res.folios == NFOLIOS - 3);
	walk(file, &s);
	T_CHECK(s.n == 2);
	T_CHECK(s.f[0].start == (off_t)(3 * FOLIO) && s.f[0].dirty);
	T_CHECK(s.f[1].start == (off_t)(7 * FOLIO));
	bs_folio_put(held);
	bs_file_evict(file, 0, INT64_MAX, &res);
	T_CHECK(res.folios == 1 && res.kept_held == 1 && res.kept_busy == 0);
	T_CHECK(!bs_cache_check(cache));

	/* Read back: the file's bytes, the dirty byte included. */
	read_all(file);
	walk(file, &s);
	T_CHECK(s.n == (int)NFOLIOS);
	T_CHECK(!bs_cache_check(cache));
}

/* Written back and synced: a dirty folio goes w, then s, then clean. */
static void test_sync_state(struct bs_file *file)
{
	struct bs_wb_run runs[4];
	static unsigned char tmp[FOLIO];
	off_t pos = 0;
	struct seen s;
	uint64_t token;

	walk(file, &s);
	for (int i = 0; i < s.n; i++)
		T_CHECK(s.f[i].dirty == (s.f[i].start == (off_t)(3 * FOLIO)) && !s.f[i].unsynced);
	T_CHECK(bs_wb_collect(file, &pos, INT64_MAX, runs, 4, SIZE_MAX) == 1);
	walk(file, &s);
	T_CHECK(s.f[3].writeback && !s.f[3].dirty && !s.f[3].unsynced);
	T_CHECK(runs[0].len <= sizeof(tmp));
	bs_wb_copy(&runs[0], tmp);
	mem_backing_write(&mem, tmp, runs[0].len, runs[0].off);
	bs_wb_complete(file, &runs[0], 0);
	walk(file, &s);
	for (int i = 0; i < s.n; i++) {
		T_CHECK(s.f[i].unsynced == (i == 3));
		T_CHECK(!s.f[i].dirty && !s.f[i].writeback);
	}
	token = bs_sync_begin(file);
	bs_sync_end(file, token, 0);
	walk(file, &s);
	for (int i = 0; i < s.n; i++)
		T_CHECK(!s.f[i].unsynced && !s.f[i].dirty);
}

/* From an empty cache: one read makes folios referenced, a second active. */
static void test_lru_state(struct bs_cache *cache, struct bs_file *file)
{
	struct bs_evict_result res;
	struct seen s;

	bs_file_evict(file, 0, INT64_MAX, &res);
	T_CHECK(res.folios == NFOLIOS && !res.kept_held && !res.kept_busy);
	read_all(file);
	walk(file, &s);
	T_CHECK(s.n == (int)NFOLIOS);
	for (int i = 0; i < s.n; i++)
		T_CHECK(s.f[i].referenced && !s.f[i].active);
	read_all(file);
	walk(file, &s);
	T_CHECK(s.n == (int)NFOLIOS);
	for (int i = 0; i < s.n; i++)
		T_CHECK(s.f[i].active && !s.f[i].referenced && !s.f[i].unsynced);
	T_CHECK(!bs_cache_check(cache));
}

int main(void)
{
	struct bs_config cfg = {
		.block_size = 4096, .folio_size = FOLIO, .cache_size = 4 * FSIZE,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find("fixed"),
		.readahead_kb = 0,
	};
	static const struct bs_cache_ops ops = { 0 };
	struct bs_cache *cache;
	struct bs_file *file;
	uint64_t rng = 26;

	mem_backing_init(&mem);
	mem_backing_set_len(&mem, FSIZE);
	data = mem.data;
	for (size_t i = 0; i < FSIZE; i++)
		data[i] = (unsigned char)t_xorshift(&rng);
	T_CHECK(cfg.account && cfg.size);
	T_CHECK(!bs_cache_create(&cfg, &ops, NULL, &cache));
	T_CHECK(!bs_file_create(cache, &mem_backing_ops, &mem, FSIZE, &file));
	test_walk(file);
	test_evict(cache, file);
	test_sync_state(file);
	test_lru_state(cache, file);
	bs_file_destroy(file);
	bs_cache_destroy(cache);
	mem_backing_destroy(&mem);
	return T_EXIT_PASS;
}
