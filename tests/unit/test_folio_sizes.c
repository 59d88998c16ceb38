// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_folio_sizes.c - the folio sizes the cache ends up with in the
 * seed's scenario, under each sizing policy, with and without readahead.
 *
 * A 64 MiB table (an in-memory backing file) is read sequentially 8 KiB
 * at a time, then updated 8 KiB at a time at random 8 KiB-aligned
 * offsets, then read again at random.  For fixed, ramp and kernel, with
 * readahead_kb=2048 and 0, the test prints the folio size histogram after
 * the scan and after the updates, and the backing reads of each phase.
 *
 * It checks:
 * - fixed: every folio is 2 MiB, whatever readahead does;
 * - kernel with readahead: the scan's windows ramp the folio order up as
 *   Linux 6.18's readahead does, to exactly the histogram worked out by
 *   hand below, 2 MiB from the fourth MiB on; kernel without readahead:
 *   one page per folio, as the kernel's plain reads make;
 * - updates of cached data make no folio and read nothing;
 * - readahead cuts the backing reads of the scan (to one per window), and
 *   random reads of the cached table read nothing and start no readahead;
 * - random cold reads (never adjacent) start no readahead and read only
 *   what they ask for;
 * - every byte read is the table's;
 * - the folio order counters (stats folios_order) equal a walk of the
 *   index;
 * - against Linux itself: the folios the kernel policy makes for a
 *   sequential scan with an 8 MiB window and for a few writes are the
 *   ones Linux 6.18.44 made on ext4 (traced with the
 *   filemap:mm_filemap_add_to_page_cache event on the development
 *   machine, whose disk has read_ahead_kb 8192), folio by folio.
 */
#include "bs_i.h"
#include "mem_backing.h"
#include "test_helpers.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)
#define TABLE (64 * MiB)
#define IO (8u << 10)
#define UPDATES 2048
#define RANDOM_READS 1024

/* ---- the backing file: mem_backing holding a fixed pattern ---- */

static struct mem_backing mem;
static unsigned char *table;		/* mem.data, TABLE bytes */

static void table_fill(void)
{
	uint64_t rng = 42;

	mem_backing_init(&mem);
	mem.max_len = TABLE;
	mem_backing_set_len(&mem, TABLE);
	table = mem.data;
	for (size_t i = 0; i < TABLE; i += 8) {
		uint64_t v = t_xorshift(&rng);

		memcpy(table + i, &v, 8);
	}
}

/* ---- histograms ---- */

struct hist {
	uint64_t n[BS_NR_FOLIO_ORDERS];
};

/* Folios of @file by size, from its index (at a quiescent point). */
static void hist_walk(struct bs_file *file, struct hist *h)
{
	off_t pos = 0;
	struct bs_folio *folio;

	memset(h, 0, sizeof(*h));
	pthread_rwlock_rdlock(&file->index_lock);
	while ((folio = bs_index_next(&file->index, pos))) {
		unsigned int order = (unsigned int)__builtin_ctz(folio->size);

		T_CHECK(order >= BS_PAGE_SHIFT && order < BS_PAGE_SHIFT + BS_NR_FOLIO_ORDERS);
		h->n[order - BS_PAGE_SHIFT]++;
		pos = folio->start + folio->size;
	}
	pthread_rwlock_unlock(&file->index_lock);
}

static uint64_t hist_bytes(const struct hist *h)
{
	uint64_t bytes = 0;

	for (int i = 0; i < BS_NR_FOLIO_ORDERS; i++)
		bytes += h->n[i] << (BS_PAGE_SHIFT + i);
	return bytes;
}

static void hist_print(const char *what, const struct hist *h)
{
	printf("  %-14s", what);
	for (int i = 0; i < BS_NR_FOLIO_ORDERS; i++) {
		unsigned int kib = 4u << i;

		if (h->n[i])
			printf(" %u%s:%llu", kib >= 1024 ? kib / 1024 : kib,
			       kib >= 1024 ? "M" : "K", (unsigned long long)h->n[i]);
	}
	printf("\n");
}

/* The counters blockstate keeps must say what the index holds. */
static void hist_check_stats(struct bs_cache *cache, const struct hist *h)
{
	struct bs_stats st;
	uint64_t sum = 0;

	bs_cache_stats(cache, &st);
	for (int i = 0; i < BS_NR_FOLIO_ORDERS; i++)
		sum += st.folios_order[i];
	for (int i = 0; i < BS_NR_FOLIO_ORDERS; i++)
		T_CHECK(st.folios_order[i] == h->n[i]);
	T_CHECK(sum == st.folios);
}

/* ---- the scenario ---- */

struct run {
	const char *policy;
	const struct hist *linux_scan;	/* what Linux made for the scan, if known */
	uint32_t readahead_kb;
	uint64_t scan_ios, scan_bytes, scan_ra_ios, scan_ra_pages;
	struct hist after_scan, after_updates;
};

/*
 * The stats, with ra_ios and ra_pages from blockstate's counters, which
 * the stats must report.
 */
static void stats_of(struct bs_cache *cache, struct bs_stats *st)
{
	uint64_t ios = atomic_load(&cache->ra_ios);
	uint64_t pages = (atomic_load(&cache->ra_bytes) + BS_PAGE_SIZE - 1) >> BS_PAGE_SHIFT;

	bs_cache_stats(cache, st);
	T_CHECK(st->ra_ios == ios && st->ra_pages == pages);
}

/* The one open each scenario reads through (its readahead state). */
static struct bs_ra reader;

static void read_check(struct bs_file *file, char *buf, off_t off)
{
	T_CHECK(bs_read(file, &reader, buf, IO, off) == IO);
	T_CHECK(!memcmp(buf, table + off, IO));
}

static void run_scenario(struct run *r)
{
	struct bs_config cfg = {
		.block_size = 4096, .folio_size = 2 * MiB, .cache_size = 2ull * TABLE,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find(r->policy),
		.readahead_kb = r->readahead_kb,
	};
	static const struct bs_cache_ops ops = { 0 };
	struct bs_stats s0, s1, s2, s3;
	struct bs_cache *cache;
	struct bs_file *file;
	uint64_t rng = 7;
	char buf[IO];

	T_CHECK(cfg.account && cfg.size);
	T_CHECK(!bs_cache_create(&cfg, &ops, NULL, &cache));
	T_CHECK(!bs_file_create(cache, &mem_backing_ops, &mem, TABLE, &file));
	bs_ra_init(&reader);

	/* The table read sequentially. */
	stats_of(cache, &s0);
	for (off_t off = 0; off < TABLE; off += IO)
		read_check(file, buf, off);
	stats_of(cache, &s1);
	r->scan_ios = s1.backing_read_ios - s0.backing_read_ios;
	r->scan_bytes = s1.backing_read_bytes - s0.backing_read_bytes;
	r->scan_ra_ios = s1.ra_ios - s0.ra_ios;
	r->scan_ra_pages = s1.ra_pages - s0.ra_pages;
	T_CHECK(r->scan_bytes == TABLE);	/* each byte once, none twice */
	hist_walk(file, &r->after_scan);
	T_CHECK(hist_bytes(&r->after_scan) == TABLE);
	hist_check_stats(cache, &r->after_scan);

	/* Updated 8 KiB at a time: the table is cached, nothing is read or made. */
	for (int i = 0; i < UPDATES; i++) {
		off_t off = (off_t)(t_xorshift(&rng) % (TABLE / IO)) * IO;

		memset(buf, i & 0xff, IO);
		T_CHECK(bs_write(file, buf, IO, off) == IO);
		memcpy(table + off, buf, IO);	/* what reads must see now */
	}
	stats_of(cache, &s2);
	T_CHECK(s2.backing_read_ios == s1.backing_read_ios);
	hist_walk(file, &r->after_updates);
	T_CHECK(!memcmp(&r->after_updates, &r->after_scan, sizeof(r->after_scan)));
	hist_check_stats(cache, &r->after_updates);

	/* Random reads of the cached table go nowhere. */
	for (int i = 0; i < RANDOM_READS; i++)
		read_check(file, buf, (off_t)(t_xorshift(&rng) % (TABLE / IO)) * IO);
	stats_of(cache, &s3);
	T_CHECK(s3.backing_read_ios == s2.backing_read_ios);
	T_CHECK(s3.ra_ios == s2.ra_ios);

	/* Drop the updates (nothing writes them back here) before the file goes. */
	bs_file_destroy(file);
	bs_ra_destroy(&reader);
	bs_cache_destroy(cache);
}

/*
 * Random reads of a cold table, 8 KiB at 32 KiB-aligned offsets in an
 * order where no read is next to the one before: no readahead, and only
 * the bytes asked for are read.  (Two cached chunks are never adjacent,
 * so the cached-history check never finds more than the read's size.)
 */
static void run_cold_random(const char *policy)
{
	struct bs_config cfg = {
		.block_size = 4096, .folio_size = 2 * MiB, .cache_size = 2ull * TABLE,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find(policy),
		.readahead_kb = 2048,
	};
	static const struct bs_cache_ops ops = { 0 };
	const uint64_t slots = TABLE / (32u << 10);
	struct bs_cache *cache;
	struct bs_file *file;
	struct bs_stats st;
	char buf[IO];

	T_CHECK(!bs_cache_create(&cfg, &ops, NULL, &cache));
	T_CHECK(!bs_file_create(cache, &mem_backing_ops, &mem, TABLE, &file));
	bs_ra_init(&reader);
	for (uint64_t i = 1; i <= 512; i++)
		read_check(file, buf, (off_t)((i * 1031) % slots) * (32 << 10));
	stats_of(cache, &st);
	printf("  cold random reads (%s): %llu backing reads, %llu bytes, ra_ios %llu\n",
	       policy, (unsigned long long)st.backing_read_ios,
	       (unsigned long long)st.backing_read_bytes, (unsigned long long)st.ra_ios);
	T_CHECK(st.ra_ios == 0 && st.ra_pages == 0);
	T_CHECK(st.backing_read_bytes == 512ull * IO);
	if (!strcmp(policy, "kernel")) {
		struct hist h;

		/* Linux 6.18.44 made 1024 one-page folios for these reads. */
		hist_walk(file, &h);
		T_CHECK(h.n[0] == 1024 && hist_bytes(&h) == 1024ull * 4096);
	}
	bs_file_destroy(file);
	bs_ra_destroy(&reader);
	bs_cache_destroy(cache);
}

/*
 * kernel, 2 MiB window, 8 KiB reads from page 0 (worked out from
 * page_cache_sync_ra/async_ra/ra_order): [0,8) 8 x 4K; [8,40) 8 x 16K;
 * [40,96) 32K + 3 x 64K; [96,192) 128K + 256K; [192,256) 256K;
 * [256,384), [384,512) 512K; [512,768), [768,1024) 1M; then 2M.
 */
static const struct hist kernel_ra_scan = { {
	[0] = 8, [2] = 8, [3] = 1, [4] = 3, [5] = 1, [6] = 2, [7] = 2, [8] = 2, [9] = 30,
} };

/*
 * Linux 6.18.44, ext4, read_ahead_kb 8192: the same 64 MiB file read
 * with 8 KiB preads after POSIX_FADV_DONTNEED.  The folios in file order
 * began (page, order) (0,0)..(7,0) (8,2)..(36,2) (40,3) (48,4)..(144,4)
 * (160,5) (192,6)..(576,6) (640,7) (768,8) (1024,8) (1280,8) (1536,9).
 */
static const struct hist linux_8m_scan = { {
	[0] = 8, [2] = 8, [3] = 1, [4] = 7, [5] = 1, [6] = 7, [7] = 1, [8] = 3, [9] = 29,
} };

/*
 * Writes into a new (sparse) file, and the folio orders Linux 6.18.44
 * made for them on ext4 (same trace): by write length, cut down to the
 * alignment of each folio's first page.
 */
static void check_kernel_writes(void)
{
	static const struct { off_t off; size_t len; } writes[] = {
		{ 40 * MiB, 8192 }, { 8 * MiB, MiB }, { 4096, 12288 },
		{ 17 * MiB, 3 * MiB }, { 30 * MiB + 4096, 8192 },
	};
	static const struct { off_t start; unsigned int order; } linux_folios[] = {
		{ 4096, 0 }, { 8192, 1 }, { 8 * MiB, 8 }, { 17 * MiB, 8 }, { 18 * MiB, 9 },
		{ 30 * MiB + 4096, 0 }, { 30 * MiB + 8192, 0 }, { 40 * MiB, 1 },
	};
	struct bs_config cfg = {
		.block_size = 4096, .folio_size = 2 * MiB, .cache_size = 2ull * TABLE,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find("kernel"), .readahead_kb = 2048,
	};
	static const struct bs_cache_ops ops = { 0 };
	static char buf[3 * MiB];
	struct bs_cache *cache;
	struct bs_file *file;
	struct bs_folio *folio;
	off_t pos = 0;
	size_t n = 0;

	T_CHECK(!bs_cache_create(&cfg, &ops, NULL, &cache));
	T_CHECK(!bs_file_create(cache, &mem_backing_ops, &mem, TABLE, &file));
	bs_ra_init(&reader);
	for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i++)
		T_CHECK(bs_write(file, buf, writes[i].len, writes[i].off) == (ssize_t)writes[i].len);
	while ((folio = bs_index_next(&file->index, pos))) {
		T_CHECK(n < sizeof(linux_folios) / sizeof(linux_folios[0]));
		T_CHECK(folio->start == linux_folios[n].start);
		T_CHECK(folio->size == 1u << (BS_PAGE_SHIFT + linux_folios[n].order));
		pos = folio->start + folio->size;
		n++;
	}
	T_CHECK(n == sizeof(linux_folios) / sizeof(linux_folios[0]));
	printf("kernel writes: the folios Linux 6.18 made, all %zu\n", n);
	bs_file_destroy(file);
	bs_ra_destroy(&reader);
	bs_cache_destroy(cache);
}

int main(void)
{
	struct run runs[] = {
		{ .policy = "fixed", .readahead_kb = 2048 },
		{ .policy = "fixed", .readahead_kb = 0 },
		{ .policy = "ramp", .readahead_kb = 2048 },
		{ .policy = "ramp", .readahead_kb = 0 },
		{ .policy = "kernel", .readahead_kb = 2048 },
		{ .policy = "kernel", .readahead_kb = 0 },
		{ .policy = "kernel", .readahead_kb = 8192, .linux_scan = &linux_8m_scan },
	};
	const size_t nr = sizeof(runs) / sizeof(runs[0]);

	table_fill();
	printf("64 MiB table read sequentially in 8 KiB reads, then %d 8 KiB updates:\n",
	       UPDATES);
	for (size_t i = 0; i < nr; i++) {
		struct run *r = &runs[i];

		run_scenario(r);
		printf("%s readahead_kb=%u: scan %llu backing reads (%llu by readahead, %llu pages)\n",
		       r->policy, r->readahead_kb, (unsigned long long)r->scan_ios,
		       (unsigned long long)r->scan_ra_ios, (unsigned long long)r->scan_ra_pages);
		hist_print("after scan", &r->after_scan);
		hist_print("after updates", &r->after_updates);
	}

	/* fixed: 2 MiB folios only. */
	for (size_t i = 0; i < 2; i++)
		T_CHECK(runs[i].after_scan.n[9] == TABLE / (2 * MiB));
	/* kernel: readahead ramps up to 2 MiB; without it, pages. */
	T_CHECK(!memcmp(&runs[4].after_scan, &kernel_ra_scan, sizeof(kernel_ra_scan)));
	T_CHECK(runs[5].after_scan.n[0] == TABLE / 4096);
	/* As Linux made them, window for window. */
	for (size_t i = 0; i < nr; i++) {
		if (runs[i].linux_scan)
			T_CHECK(!memcmp(&runs[i].after_scan, runs[i].linux_scan,
					sizeof(*runs[i].linux_scan)));
	}
	/* Readahead: one read per window or folio instead of per 8 KiB read. */
	for (size_t i = 0; i + 1 < nr; i += 2) {
		T_CHECK(runs[i].scan_ios < runs[i + 1].scan_ios / 64);
		T_CHECK(runs[i].scan_ra_ios == runs[i].scan_ios);
		T_CHECK(runs[i].scan_ra_pages == TABLE / 4096);
		T_CHECK(runs[i + 1].scan_ra_ios == 0);
	}
	/* fixed reads each 2 MiB folio with one read, kernel each window. */
	T_CHECK(runs[0].scan_ios == TABLE / (2 * MiB));
	T_CHECK(runs[4].scan_ios == 9 + 30);

	check_kernel_writes();
	run_cold_random("kernel");
	run_cold_random("fixed");
	run_cold_random("ramp");
	mem_backing_destroy(&mem);
	return T_EXIT_PASS;
}
