// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_flushpolicy.c - the flushers' decisions (writeback/flushpolicy.c)
 * as pure functions: each edge of the background threshold, expiry,
 * backoff, chunk size, round robin and the grouping of runs into writes.
 */
#include "flushpolicy.h"
#include "test_helpers.h"

#define MS 1000000ll
#define PAGES_4M ((int64_t)((4u << 20) / BS_PAGE_SIZE))

static const struct wb_fp_state base = {
	.bg_thresh = 1000, .expire_ms = 30000,
};

static void test_background(void)
{
	struct wb_fp_state s = base;

	s.dirty_charged = 1000;
	T_CHECK(!wb_fp_over_background(&s));	/* at the threshold: not over */
	s.dirty_charged = 1001;
	T_CHECK(wb_fp_over_background(&s));
	/* Pinned memory counts only with a pinned limit. */
	s.dirty_charged = 0;
	s.pinned = 1u << 30;
	T_CHECK(!wb_fp_over_background(&s));
	s.pinned_bg_thresh = 1u << 30;
	T_CHECK(!wb_fp_over_background(&s));
	s.pinned++;
	T_CHECK(wb_fp_over_background(&s));
	/*
	 * Pinned memory over its background threshold asks for a sync of
	 * whatever is unsynced, however little: only a sync unpins it.
	 */
	T_CHECK(!wb_fp_over_unsynced(&s));	/* nothing unsynced */
	s.unsynced = 1;
	T_CHECK(wb_fp_over_unsynced(&s));
	s.pinned = s.pinned_bg_thresh;
	T_CHECK(!wb_fp_over_unsynced(&s));
	/* Else unsynced memory is judged against the dirty background threshold. */
	s.unsynced = 1000;
	T_CHECK(!wb_fp_over_unsynced(&s));
	s.unsynced = 1001;
	T_CHECK(wb_fp_over_unsynced(&s));
}

static void test_expiry_and_action(void)
{
	struct wb_fp_state s = base;
	struct wb_fp_file f = { .dirtied_ns = 5 * MS };

	T_CHECK(!wb_fp_expired(0, 1ll << 60, 1));		/* clean never expires */
	T_CHECK(!wb_fp_expired(5 * MS, 5 * MS + 30000 * MS - 1, 30000));
	T_CHECK(wb_fp_expired(5 * MS, 5 * MS + 30000 * MS, 30000));
	T_CHECK(wb_fp_expired(5 * MS, 5 * MS, 0));

	T_CHECK(wb_fp_file_action(&s, &f, 6 * MS, wb_fp_over_background(&s), true) == WB_FP_SKIP);
	T_CHECK(wb_fp_file_action(&s, &f, 5 * MS + 30000 * MS, wb_fp_over_background(&s), true) ==
		WB_FP_EXPIRED);
	/* Old data is written whole only by a pass that writes old data. */
	T_CHECK(wb_fp_file_action(&s, &f, 5 * MS + 30000 * MS, wb_fp_over_background(&s), false) ==
		WB_FP_SKIP);
	s.dirty_charged = 1001;
	T_CHECK(wb_fp_file_action(&s, &f, 6 * MS, wb_fp_over_background(&s), true) == WB_FP_CHUNK);
	/* Expiry wins over a chunk in such a pass: the whole file is written. */
	T_CHECK(wb_fp_file_action(&s, &f, 5 * MS + 30000 * MS, wb_fp_over_background(&s), true) ==
		WB_FP_EXPIRED);
	/* In any other, over the threshold, an old file gets a chunk like the rest. */
	T_CHECK(wb_fp_file_action(&s, &f, 5 * MS + 30000 * MS, wb_fp_over_background(&s), false) ==
		WB_FP_CHUNK);
	/* A clean file is skipped, whatever the threshold. */
	f.dirtied_ns = 0;
	T_CHECK(wb_fp_file_action(&s, &f, 6 * MS, wb_fp_over_background(&s), true) == WB_FP_SKIP);
	/* Backing off: until retry_ns, included; then due again. */
	f.dirtied_ns = 5 * MS;
	f.retry_ns = 10 * MS;
	T_CHECK(wb_fp_file_action(&s, &f, 10 * MS - 1, wb_fp_over_background(&s), true) ==
		WB_FP_WAIT);
	T_CHECK(wb_fp_file_action(&s, &f, 10 * MS, wb_fp_over_background(&s), true) == WB_FP_CHUNK);
	/* A round judged over the threshold writes chunks, whatever it is now. */
	s.dirty_charged = 0;
	T_CHECK(wb_fp_file_action(&s, &f, 10 * MS, true, false) == WB_FP_CHUNK);
	T_CHECK(wb_fp_file_action(&s, &f, 10 * MS, false, false) == WB_FP_SKIP);
	/* Old data is written once per writeback interval (a second if it is 0). */
	T_CHECK(!wb_fp_old_flush_due(0, 5000 * MS - 1, 5000));
	T_CHECK(wb_fp_old_flush_due(0, 5000 * MS, 5000));
	T_CHECK(!wb_fp_old_flush_due(7 * MS, 7 * MS + 1000 * MS - 1, 0));
	T_CHECK(wb_fp_old_flush_due(7 * MS, 7 * MS + 1000 * MS, 0));
	/* It judges again only after WB_FP_BG_RECHECK_NS. */
	T_CHECK(!wb_fp_bg_recheck_due(10 * MS, 10 * MS + WB_FP_BG_RECHECK_NS));
	T_CHECK(wb_fp_bg_recheck_due(10 * MS, 10 * MS + WB_FP_BG_RECHECK_NS + 1));
}

static void test_sync(void)
{
	struct wb_fp_state s = base;
	struct wb_fp_file f = { 0 };

	T_CHECK(!wb_fp_should_sync(&s, &f, true));	/* nothing unsynced */
	f.unsynced = true;
	T_CHECK(wb_fp_should_sync(&s, &f, true));	/* written whole for its age */
	T_CHECK(!wb_fp_should_sync(&s, &f, false));
	s.unsynced = 1001;
	T_CHECK(wb_fp_should_sync(&s, &f, false));	/* unsynced pins too much */
}

static void test_chunk(void)
{
	/* Nothing measured, a small limit: the 4 MiB floor. */
	T_CHECK(wb_fp_chunk_pages(0, 0) == PAGES_4M);
	/* Half a second at 100 MB/s = 12800 pages + 1024, rounded down to 4 MiB: 13312. */
	T_CHECK(wb_fp_chunk_pages(25600, 1ull << 30) == 13 * PAGES_4M);
	/* The limit caps it: 1/8 of 8192 pages = 1024, + 1024 = 2 * 4 MiB. */
	T_CHECK(wb_fp_chunk_pages(25600, 8192) == 2 * PAGES_4M);
	/* Always a multiple of 4 MiB. */
	for (uint64_t bw = 0; bw < 100000; bw += 777)
		T_CHECK(wb_fp_chunk_pages(bw, 1ull << 30) % PAGES_4M == 0);

	T_CHECK(wb_fp_chunk_start(0, 100) == 0);
	T_CHECK(wb_fp_chunk_start(40, 100) == 40);
	T_CHECK(wb_fp_chunk_start(100, 100) == 0);	/* at the end: back to the start */
	T_CHECK(wb_fp_chunk_start(150, 100) == 0);	/* shrunk under it */

	T_CHECK(wb_fp_chunk_progress(1, 0, 100, 100));
	T_CHECK(!wb_fp_chunk_progress(0, 0, 100, 100));	/* from the start, nothing written */
	T_CHECK(wb_fp_chunk_progress(0, 40, 100, 100));	/* went round to the start */
	T_CHECK(!wb_fp_chunk_progress(0, 40, 60, 100));
}

static void test_round_robin(void)
{
	struct wb_fp_state s = base;
	unsigned int order[5], n = 0, first = wb_fp_round_first(7, 5);

	T_CHECK(first == 2);
	T_CHECK(wb_fp_round_first(7, 0) == 0);
	for (unsigned int half = 0; half < 2; half++)
		for (unsigned int i = 0; i < 5; i++)
			if (wb_fp_round_turn(half, i, first))
				order[n++] = i;
	T_CHECK(n == 5);
	for (unsigned int k = 0; k < 5; k++)
		T_CHECK(order[k] == (first + k) % 5);

	s.dirty_charged = 1001;
	T_CHECK(wb_fp_round_again(true, false, &s));
	T_CHECK(wb_fp_round_again(false, true, &s));
	T_CHECK(!wb_fp_round_again(false, false, &s));	/* two idle rounds */
	s.dirty_charged = 1000;
	T_CHECK(!wb_fp_round_again(true, true, &s));	/* under the threshold */

	T_CHECK(wb_fp_next_wake(7, 5000) == 7 + 5000 * MS);
	T_CHECK(wb_fp_next_wake(7, 0) == 7 + 1000 * MS);
}

static void test_backoff(void)
{
	uint32_t b = 0;

	b = wb_fp_backoff_next(b);
	T_CHECK(b == WB_FP_RETRY_MIN_MS);
	b = wb_fp_backoff_next(b);
	T_CHECK(b == 2 * WB_FP_RETRY_MIN_MS);
	for (int i = 0; i < 20; i++)
		b = wb_fp_backoff_next(b);
	T_CHECK(b == WB_FP_RETRY_MAX_MS);
	T_CHECK(wb_fp_retry_due(3, 100) == 3 + 100 * MS);
}

static void test_groups(void)
{
	struct bs_wb_run runs[5] = {
		{ .off = 0, .len = 4096 },
		{ .off = 4096, .len = 4096 },	/* contiguous: same write */
		{ .off = 12288, .len = 4096 },	/* a gap: a new write */
		{ .off = 16384, .len = 8192 },	/* would pass max_io: a new write */
		{ .off = 24576, .len = 4096 },	/* and again */
	};
	int group_of[5];

	T_CHECK(wb_fp_group_runs(runs, 5, 8192, group_of) == 4);
	T_CHECK(group_of[0] == 0 && group_of[1] == 0 && group_of[2] == 1 &&
		group_of[3] == 2 && group_of[4] == 3);
	T_CHECK(wb_fp_group_runs(runs, 5, 1 << 20, group_of) == 2);
	T_CHECK(group_of[2] == 1 && group_of[4] == 1);
	T_CHECK(wb_fp_group_runs(runs, 0, 8192, group_of) == 0);

	T_CHECK(wb_fp_collect_flags(false, false) == 0);
	T_CHECK(wb_fp_collect_flags(true, true) == (BS_WB_WHOLE_FOLIO | BS_WB_WHOLE_BLOCKS));
}

/* An idle pool is halved at each look, then given back whole. */
static void test_pool_aging(void)
{
	const uint64_t min = WB_FP_POOL_MIN_BYTES;

	T_CHECK(wb_fp_pool_look_due(0, 1, 5000));
	T_CHECK(!wb_fp_pool_look_due(1000 * MS, 5999 * MS, 5000));
	T_CHECK(wb_fp_pool_look_due(1000 * MS, 6000 * MS, 5000));
	T_CHECK(!wb_fp_pool_look_due(1000 * MS, 1099 * MS, 100));
	T_CHECK(wb_fp_pool_look_due(1000 * MS, 1100 * MS, 100));
	/* writeback_interval_ms=0: looks every 5 s all the same. */
	T_CHECK(!wb_fp_pool_look_due(1000 * MS, 5999 * MS, 0));
	T_CHECK(wb_fp_pool_look_due(1000 * MS, 6000 * MS, 0));

	T_CHECK(wb_fp_pool_keep(1u << 30, true) == 1u << 30);
	T_CHECK(wb_fp_pool_keep(1u << 30, false) == 1u << 29);
	T_CHECK(wb_fp_pool_keep(2 * min, false) == min);
	T_CHECK(wb_fp_pool_keep(2 * min - 1, false) == 0);
	T_CHECK(wb_fp_pool_keep(0, false) == 0);
}

int main(void)
{
	test_background();
	test_expiry_and_action();
	test_sync();
	test_chunk();
	test_round_robin();
	test_backoff();
	test_groups();
	test_pool_aging();
	return T_EXIT_PASS;
}
