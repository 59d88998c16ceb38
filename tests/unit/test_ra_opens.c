// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_ra_opens.c - readahead per open file, through bs_read(), in the
 * access patterns of contrib/kernel/ra-patterns.py: one stream, two opens
 * interleaved, a reopen, random reads of a fresh open meeting another
 * open's mark (three ways), rereading after an eviction, and a stream
 * crossing folios random 8 KiB reads, writes or both cached first (the
 * writes leave their folios dirty here: the kernel's were synced, which
 * readahead does not look at).  A 64 MiB file, 8 KiB reads, a 2 MiB
 * window, folio_policy kernel.
 *
 * Under ra_model 6.17 every pattern must leave the folios, by size, that
 * Linux 6.18.44 left on ext4 and XFS on the development machine
 * (contrib/results/ra-kernel-2026-12-05/kernel-run1.json and
 * ra-crossing-2026-12-07/kernel.json; the mount test
 * tests/test_ra_kernel.py compares folio for folio against the running
 * kernel where it can trace it).  This test needs no root and runs under
 * the sanitizers.
 *
 * Under ra_model 6.16 no pattern may make a folio above 128 KiB: each
 * window's mark lands on its first folio, which the window's start aligns
 * to 32 KiB at most once the window is 2 MiB, and 6.16 asks for the marked
 * folio's order + 2 (see ra_decide.c) - the stall the 6.17 series ended.
 */
#include "bs_i.h"
#include "mem_backing.h"
#include "test_helpers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((off_t)1 << 10)
#define MiB ((off_t)1 << 20)
#define FSIZE (64 * MiB)
#define IO (8 * KiB)

/* The backing file: mem_backing, FSIZE bytes, each 8-byte word holding its offset. */
static struct mem_backing mem;

static void mem_fill(void)
{
	mem_backing_init(&mem);
	mem.max_len = FSIZE;
	mem_backing_set_len(&mem, FSIZE);
	for (uint64_t off = 0; off < (uint64_t)FSIZE; off += 8)
		memcpy(mem.data + off, &off, 8);
}

/* A pattern, and the folios by page order Linux left after it. */
struct pattern {
	const char *name;
	void (*run)(struct bs_file *file);
	unsigned int linux_hist[BS_NR_FOLIO_ORDERS];	/* Linux 6.18.44 */
};

static void read_at(struct bs_file *file, struct bs_ra *ra, off_t off)
{
	uint64_t buf[IO / 8];

	T_CHECK(bs_read(file, ra, buf, IO, off) == IO);
	T_CHECK(buf[0] == (uint64_t)off && buf[IO / 8 - 1] == (uint64_t)(off + IO - 8));
}

static void read_range(struct bs_file *file, struct bs_ra *ra, off_t start, off_t end)
{
	for (off_t off = start; off < end; off += IO)
		read_at(file, ra, off);
}

static void p_one_stream(struct bs_file *file)
{
	struct bs_ra a;

	bs_ra_init(&a);
	read_range(file, &a, 0, FSIZE);
	bs_ra_destroy(&a);
}

static void p_interleaved(struct bs_file *file)
{
	struct bs_ra a, b;

	bs_ra_init(&a);
	bs_ra_init(&b);
	for (off_t off = 0; off < FSIZE / 2; off += IO) {
		read_at(file, &a, off);
		read_at(file, &b, FSIZE / 2 + off);
	}
	bs_ra_destroy(&a);
	bs_ra_destroy(&b);
}

static void p_reopen(struct bs_file *file)
{
	struct bs_ra a;

	bs_ra_init(&a);
	read_range(file, &a, 0, 16 * MiB);
	bs_ra_destroy(&a);
	bs_ra_init(&a);		/* a new open: a new state */
	read_range(file, &a, 16 * MiB, 32 * MiB);
	bs_ra_destroy(&a);
}

/* ra-patterns.py's random_offsets() for [16 MiB, 64 MiB) and [16, 56), in 8 KiB units. */
static const unsigned int rand_to_64[] = {
	8169, 3708, 7450, 3728, 5590, 6969, 6504, 2512, 3095, 5957, 2389, 8029, 7646, 7154, 6166, 3453,
	7253, 5567, 4034, 8173, 5399, 7923, 3702, 7720, 2283, 7509, 3868, 3229, 3108, 3821, 6942, 6006,
};
static const unsigned int rand_to_56[] = {
	3708, 3728, 5590, 6969, 6504, 2512, 3095, 5957, 2389, 7154, 6166, 3453, 5567, 4034, 5399, 3702,
	2283, 3868, 3229, 3108, 3821, 6942, 6006, 5232, 5032, 4043, 6833, 2300, 2296, 4452, 6500, 6444,
};

/* A reads [0, a_end); B, fresh, streams [56M, 64M) if asked, reads at
 * random, then reads at a_end + 8 KiB, inside A's last window. */
static void cross_mark(struct bs_file *file, off_t a_end, bool b_streams)
{
	const unsigned int *rnd = b_streams ? rand_to_56 : rand_to_64;
	struct bs_ra a, b;

	bs_ra_init(&a);
	bs_ra_init(&b);
	read_range(file, &a, 0, a_end);
	if (b_streams)
		read_range(file, &b, 56 * MiB, FSIZE);
	for (size_t i = 0; i < 32; i++)
		read_at(file, &b, (off_t)rnd[i] * IO);
	read_at(file, &b, a_end + IO);
	bs_ra_destroy(&a);
	bs_ra_destroy(&b);
}

static void p_cross_mark(struct bs_file *file)
{
	cross_mark(file, 8 * MiB, false);
}

static void p_cross_mark_streamed(struct bs_file *file)
{
	cross_mark(file, 8 * MiB, true);
}

static void p_cross_mark_short(struct bs_file *file)
{
	cross_mark(file, 152 * KiB, true);
}

static void p_evict_reread(struct bs_file *file)
{
	struct bs_evict_result res = { 0 };
	struct bs_ra a;

	bs_ra_init(&a);
	read_range(file, &a, 0, FSIZE);
	bs_ra_destroy(&a);
	bs_file_evict(file, 16 * MiB, 24 * MiB, &res);
	T_CHECK(res.bytes == (uint64_t)(8 * MiB) && !res.kept_held && !res.kept_busy);
	bs_ra_init(&a);
	read_range(file, &a, 0, FSIZE);
	bs_ra_destroy(&a);
}

/* ra-patterns.py's random_io() offsets (seed 27, [0, 64 MiB)), in 8 KiB units. */
static const unsigned int rand_io[] = {
	7862, 4541, 4685, 3217, 1211, 1071, 4168, 5456, 4143, 6100, 6601, 3003, 4060, 3929, 8047, 1168,
	1289, 6966, 6846, 863, 7200, 5729, 198, 7839, 4144, 2253, 5535, 3726, 2309, 1617, 6421, 4948,
};

/* The offsets of rand_io, in order: the odd ones written if @writes, else read. */
static void random_io(struct bs_file *file, bool reads, bool writes)
{
	struct bs_ra r;

	bs_ra_init(&r);
	for (size_t i = 0; i < sizeof(rand_io) / sizeof(rand_io[0]); i++) {
		off_t off = (off_t)rand_io[i] * IO;

		if (writes && (i % 2 || !reads)) {
			/* The bytes that are there: the stream's checks still hold. */
			T_CHECK(bs_write(file, mem.data + off, IO, off) == IO);
		} else {
			read_at(file, &r, off);
		}
	}
	bs_ra_destroy(&r);
}

static void p_stream_cross(struct bs_file *file, bool reads, bool writes, off_t from)
{
	struct bs_ra a;

	random_io(file, reads, writes);
	bs_ra_init(&a);
	read_range(file, &a, from, FSIZE);
	bs_ra_destroy(&a);
}

static void p_stream_cross_reads(struct bs_file *file)
{
	p_stream_cross(file, true, false, 0);
}

static void p_stream_cross_writes(struct bs_file *file)
{
	p_stream_cross(file, false, true, 0);
}

static void p_stream_cross_mixed(struct bs_file *file)
{
	p_stream_cross(file, true, true, 16 * MiB);
}

static const struct pattern patterns[] = {
	{ "one-stream", p_one_stream, { 8, 0, 8, 1, 3, 1, 2, 2, 2, 30 } },
	{ "interleaved", p_interleaved, { 18, 1, 15, 2, 10, 2, 5, 3, 4, 28 } },
	{ "reopen", p_reopen, { 8, 0, 136, 1, 35, 1, 10, 2, 4, 11 } },
	{ "random-cross-mark", p_cross_mark, { 72, 0, 136, 1, 3, 1, 2, 2, 2, 3 } },
	{ "random-cross-mark-streamed", p_cross_mark_streamed, { 82, 1, 15, 2, 10, 2, 5, 3, 4, 6 } },
	{ "random-cross-mark-short", p_cross_mark_short, { 82, 1, 16, 2, 11, 2, 4, 1, 2, 2 } },
	{ "evict-reread", p_evict_reread, { 16, 0, 16, 2, 6, 2, 4, 4, 4, 28 } },
	{ "stream-cross-reads", p_stream_cross_reads, { 11912, 0, 8, 1, 3, 1, 2, 1, 2, 7 } },
	{ "stream-cross-writes", p_stream_cross_writes, { 11848, 32, 8, 1, 3, 1, 2, 1, 2, 7 } },
	{ "stream-cross-mixed", p_stream_cross_mixed, { 9080, 17, 7, 1, 7, 1, 3, 0, 1, 5 } },
};

static int count(void *arg, const struct bs_folio_info *info)
{
	unsigned int *hist = arg;

	/* Dirty only where a pattern wrote: whole 8 KiB folios. */
	T_CHECK(info->order < BS_NR_FOLIO_ORDERS && info->uptodate &&
		(!info->dirty || info->order == 1));
	hist[info->order]++;
	return 0;
}

/* The folios @p leaves under @model, by order. */
static void run_pattern(const struct pattern *p, unsigned int model, unsigned int *hist)
{
	struct bs_config cfg = {
		.block_size = 4096, .folio_size = 2u << 20, .cache_size = 2 * (uint64_t)FSIZE,
		.account = bs_account_policy_find("page"), .size = bs_size_policy_find("kernel"),
		.readahead_kb = 2048, .ra_model = model,
	};
	static const struct bs_cache_ops ops = { 0 };
	struct bs_cache *cache;
	struct bs_file *file;

	T_CHECK(!bs_cache_create(&cfg, &ops, NULL, &cache));
	T_CHECK(!bs_file_create(cache, &mem_backing_ops, &mem, FSIZE, &file));
	p->run(file);
	memset(hist, 0, BS_NR_FOLIO_ORDERS * sizeof(*hist));
	T_CHECK(bs_file_folios(file, count, hist) == 0);
	bs_file_destroy(file);
	bs_cache_destroy(cache);
}

static void print_hist(const char *what, const unsigned int *hist)
{
	printf("  %-6s", what);
	for (int o = 0; o < BS_NR_FOLIO_ORDERS; o++)
		printf(" %6u", hist[o]);
	printf("\n");
}

int main(void)
{
	int failed = 0;

	mem_fill();
	printf("folios by size:   4K     8K    16K    32K    64K   128K   256K   512K     1M     2M\n");
	for (size_t i = 0; i < sizeof(patterns) / sizeof(patterns[0]); i++) {
		const struct pattern *p = &patterns[i];
		unsigned int h17[BS_NR_FOLIO_ORDERS], h16[BS_NR_FOLIO_ORDERS];

		run_pattern(p, BS_RA_6_17, h17);
		run_pattern(p, BS_RA_6_16, h16);
		printf("%s\n", p->name);
		print_hist("Linux", p->linux_hist);
		print_hist("6.17", h17);
		print_hist("6.16", h16);
		if (memcmp(h17, p->linux_hist, sizeof(h17)) != 0) {
			fprintf(stderr, "%s: ra_model 6.17 differs from Linux 6.18\n", p->name);
			failed = 1;
		}
		for (int o = 6; o < BS_NR_FOLIO_ORDERS; o++) {
			if (h16[o]) {
				fprintf(stderr, "%s: ra_model 6.16 made a folio of order %d\n", p->name, o);
				failed = 1;
			}
		}
	}
	return failed ? T_EXIT_FAIL : T_EXIT_PASS;
}
