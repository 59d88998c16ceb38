// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_ra_decide.c - the readahead decisions (blockstate/ra_decide.c)
 * against the code of Linux's mm/readahead.c they follow: 6.16 (before
 * Ryan Roberts's "mm/readahead: honour new_order", "terminate async
 * readahead on natural boundary" and "store folio order in struct
 * file_ra_state", merged for 6.17) and 6.17+ (as in 6.18).  Each case
 * gives the state, the cache (a set of held pages) and the call, and the
 * window, order and mark the kernel's code computes for them, worked out
 * by hand from that code and written next to each check.
 */
#include "bs_i.h"
#include "test_helpers.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define PAGES 8192

/*
 * The cache: which pages are held, each by a folio of one page unless
 * cache_folio() made a larger one (folio_head[], folio_order[]).
 */
static bool held[PAGES];
static uint64_t folio_head[PAGES];
static unsigned int folio_order[PAGES];

static void cache_clear(void)
{
	memset(held, 0, sizeof(held));
}

static void cache_hold(uint64_t first, uint64_t end)
{
	for (uint64_t i = first; i < end; i++) {
		held[i] = true;
		folio_head[i] = i;
		folio_order[i] = 0;
	}
}

/* A held folio of 2^@order pages at page @head. */
static void cache_folio(uint64_t head, unsigned int order)
{
	for (uint64_t i = head; i < head + ((uint64_t)1 << order); i++) {
		held[i] = true;
		folio_head[i] = head;
		folio_order[i] = order;
	}
}

static bool folio_at(void *ctx, uint64_t index, uint64_t *head, unsigned int *order, bool *h)
{
	(void)ctx;
	if (index >= PAGES || !held[index])
		return false;
	*head = folio_head[index];
	*order = folio_order[index];
	*h = true;
	return true;
}

static const struct bs_ra_view view = { folio_at, NULL, PAGES };

/* 2 MiB window and largest folio, 4 KiB smallest: the mount's defaults. */
static const struct bs_ra_limits lim = { .max_pages = 512, .min_order = 0, .max_order = 9 };

static struct bs_ra_state fresh(void)
{
	return (struct bs_ra_state){ .prev_pos = -1 };
}

static void check_read(struct bs_ra_read rd, enum bs_ra_kind kind, uint64_t start, uint64_t nr,
		       uint64_t mark, unsigned int order, int line)
{
	if (rd.kind != kind || rd.start != start || rd.nr != nr || rd.mark != mark ||
	    (kind == BS_RA_ORDER && rd.order != order)) {
		fprintf(stderr, "line %d: got kind %d start %llu nr %llu mark %llu order %u\n",
			line, rd.kind, (unsigned long long)rd.start, (unsigned long long)rd.nr,
			(unsigned long long)rd.mark, rd.order);
		exit(T_EXIT_FAIL);
	}
}
#define CHECK_READ(rd, kind, start, nr, mark, order) \
	check_read(rd, kind, start, nr, mark, order, __LINE__)

static void check_state(const struct bs_ra_state *ra, uint64_t start, uint64_t size,
			uint64_t async, unsigned int order, int line)
{
	if (ra->start != start || ra->size != size || ra->async_size != async || ra->order != order) {
		fprintf(stderr, "line %d: state start %llu size %llu async %llu order %u\n", line,
			(unsigned long long)ra->start, (unsigned long long)ra->size,
			(unsigned long long)ra->async_size, ra->order);
		exit(T_EXIT_FAIL);
	}
}
#define CHECK_STATE(ra, start, size, async, order) \
	check_state(ra, start, size, async, order, __LINE__)

/* get_init_ra_size() and get_next_ra_size(), both releases. */
static void test_sizes(void)
{
	/* 2 MiB (512 pages): x4 up to max/32, x2 up to max/4, then max. */
	T_CHECK(bs_ra_init_size(1, 512) == 4);
	T_CHECK(bs_ra_init_size(2, 512) == 8);
	T_CHECK(bs_ra_init_size(3, 512) == 16);		/* rounded up to 4 */
	T_CHECK(bs_ra_init_size(16, 512) == 64);
	T_CHECK(bs_ra_init_size(17, 512) == 64);	/* 32 <= 128: x2 */
	T_CHECK(bs_ra_init_size(128, 512) == 256);
	T_CHECK(bs_ra_init_size(129, 512) == 512);
	/* 128 KiB, the comment's table: 1-2 pages 16k, 3-4 32k, 5-8 64k, more 128k. */
	T_CHECK(bs_ra_init_size(2, 32) == 4 && bs_ra_init_size(4, 32) == 8);
	T_CHECK(bs_ra_init_size(8, 32) == 16 && bs_ra_init_size(9, 32) == 32);
	/* x4 below max/16, x2 up to max/2, then max. */
	T_CHECK(bs_ra_next_size(4, 512) == 16);
	T_CHECK(bs_ra_next_size(31, 512) == 124);
	T_CHECK(bs_ra_next_size(32, 512) == 64);
	T_CHECK(bs_ra_next_size(256, 512) == 512);
	T_CHECK(bs_ra_next_size(257, 512) == 512);
	T_CHECK(bs_ra_next_size(512, 512) == 512);
}

/* page_cache_ra_order()'s folio layout: alignment and the window's end. */
static void test_folio_order(void)
{
	T_CHECK(bs_ra_folio_order(0, 9, 1023, 0) == 9);
	T_CHECK(bs_ra_folio_order(6, 2, 100, 0) == 1);		/* __ffs(6) */
	T_CHECK(bs_ra_folio_order(8, 2, 9, 0) == 1);		/* 8 + 3 > 9 */
	T_CHECK(bs_ra_folio_order(8, 3, 8, 0) == 0);
	T_CHECK(bs_ra_folio_order(8, 3, 8, 1) == 1);		/* never below min */
	T_CHECK(bs_ra_folio_order(512, 9, 1000, 0) == 8);	/* 512 + 511 > 1000 */
}

/* page_cache_sync_ra(): the start of the file and a read continuing the previous one. */
static void test_sync_stream(void)
{
	for (unsigned int model = 0; model < BS_NR_RA_MODELS; model++) {
		bool v16 = model == BS_RA_6_16;
		struct bs_ra_state ra = fresh();
		struct bs_ra_read rd;

		cache_clear();
		/* Page 0, 8 KiB: window 8, 6 ahead, mark on page 2. */
		rd = bs_ra_sync(model, &ra, 0, 2, &lim, &view);
		/* 6.16: order 0 + 2 inside page_cache_ra_order(); 6.17+: ra->order = 0. */
		CHECK_READ(rd, BS_RA_ORDER, 0, 8, 2, v16 ? 2 : 0);
		CHECK_STATE(&ra, 0, 8, 6, 0);

		/* Continuing a read that ended at byte 40960 (page 10): a stream. */
		ra = fresh();
		ra.prev_pos = 40960;
		ra.order = 7;
		rd = bs_ra_sync(model, &ra, 10, 2, &lim, &view);
		CHECK_READ(rd, BS_RA_ORDER, 10, 8, 12, v16 ? 2 : 0);
		CHECK_STATE(&ra, 10, 8, 6, v16 ? 7 : 0);	/* 6.16 has no ra->order */

		/* Larger than the largest window: 600 pages, window = max, half ahead. */
		ra = fresh();
		rd = bs_ra_sync(model, &ra, 100, 600, &lim, &view);
		CHECK_READ(rd, BS_RA_ORDER, 100, 512, 356, v16 ? 2 : 0);
		CHECK_STATE(&ra, 100, 512, 256, 0);
	}
}

/* page_cache_sync_ra(): random reads, and a stream that lost track. */
static void test_sync_history(void)
{
	for (unsigned int model = 0; model < BS_NR_RA_MODELS; model++) {
		bool v16 = model == BS_RA_6_16;
		struct bs_ra_state ra = fresh();
		struct bs_ra_read rd;

		/* Nothing cached before page 1000: random, the state untouched. */
		cache_clear();
		ra.start = 5;
		ra.size = 64;
		ra.async_size = 64;
		ra.order = 9;
		ra.prev_pos = 8192;
		rd = bs_ra_sync(model, &ra, 1000, 2, &lim, &view);
		T_CHECK(rd.kind == BS_RA_RANDOM && rd.start == 1000 && rd.nr == 2);
		/* do_page_cache_ra() keeps ra->order: the 6.17 mechanism. */
		CHECK_STATE(&ra, 5, 64, 64, 9);

		/* Two pages cached before: not more than the read, still random. */
		cache_hold(998, 1000);
		rd = bs_ra_sync(model, &ra, 1000, 2, &lim, &view);
		T_CHECK(rd.kind == BS_RA_RANDOM);

		/* 100 cached before: a stream lost track of; 100 + 2 pages, 1 ahead. */
		cache_hold(900, 1000);
		rd = bs_ra_sync(model, &ra, 1000, 2, &lim, &view);
		/* 6.16: 0 + 2, ilog2(102) = 6: order 2. */
		CHECK_READ(rd, BS_RA_ORDER, 1000, 102, 1101, v16 ? 2 : 0);
		CHECK_STATE(&ra, 1000, 102, 1, v16 ? 9 : 0);

		/* Cached back to page 0: doubled, 2 x 300 + 2, at most the window. */
		cache_clear();
		cache_hold(0, 300);
		ra = fresh();
		ra.prev_pos = 4096;
		rd = bs_ra_sync(model, &ra, 300, 2, &lim, &view);
		CHECK_READ(rd, BS_RA_ORDER, 300, 512, 811, v16 ? 2 : 0);
		/* 200 back: 202. */
		cache_clear();
		cache_hold(100, 300);
		rd = bs_ra_sync(model, &ra, 300, 2, &lim, &view);
		CHECK_READ(rd, BS_RA_ORDER, 300, 202, 501, v16 ? 2 : 0);
		/*
		 * More than a window back: the walk stops on its 512th page
		 * (988), held, so contig is 511, not 512; 511 + 2 -> 512.
		 */
		cache_clear();
		cache_hold(0, 1500);
		rd = bs_ra_sync(model, &ra, 1500, 1, &lim, &view);
		CHECK_READ(rd, BS_RA_ORDER, 1500, 512, 2011, v16 ? 2 : 0);
		T_CHECK(bs_ra_prev_miss(&view, 1499, 512) == 988);
	}
}

/* page_cache_async_ra(): this open's own marks, the ramp of windows and orders. */
static void test_async_own(void)
{
	struct bs_ra_state ra16 = fresh(), ra17 = fresh();
	struct bs_ra_read rd;

	cache_clear();
	(void)bs_ra_sync(BS_RA_6_16, &ra16, 0, 2, &lim, &view);
	(void)bs_ra_sync(BS_RA_6_17, &ra17, 0, 2, &lim, &view);
	/*
	 * The mark on page 2; 6.16 made order-2 folios, so the marked folio
	 * is [0, 4), 6.17 order 0: [2, 3).  expected = round_down(2, folio).
	 */
	rd = bs_ra_async(BS_RA_6_16, &ra16, 0, 2, 2, &lim, &view);
	/* start 8, size max(8, 4 x 8) = 32, all ahead; order 2 + 2. */
	CHECK_READ(rd, BS_RA_ORDER, 8, 32, 8, 4);
	CHECK_STATE(&ra16, 8, 32, 32, 0);
	rd = bs_ra_async(BS_RA_6_17, &ra17, 2, 0, 2, &lim, &view);
	/* ra->order 0 + 2; align 4: end 40 stays. */
	CHECK_READ(rd, BS_RA_ORDER, 8, 32, 8, 2);
	CHECK_STATE(&ra17, 8, 32, 32, 2);

	/*
	 * Next mark: page 8.  6.16 asked for order 4, but page 8 is aligned
	 * to order 3 only, so the marked folio is [8, 16): the order it
	 * passes on is 3 (the slow ramp the 6.17 series fixed).  6.17: [8, 12).
	 */
	rd = bs_ra_async(BS_RA_6_16, &ra16, 8, 3, 2, &lim, &view);
	/* size 2 x 32 = 64 (32 is not below max/16); order 3 + 2, no trimming. */
	CHECK_READ(rd, BS_RA_ORDER, 40, 64, 40, 5);
	CHECK_STATE(&ra16, 40, 64, 64, 0);
	/* Had 6.16 met a folio of order 4 there, expected (round_down(8, 16) = 0)
	 * would not match: the branch for a mark without state. */
	{
		struct bs_ra_state other = { .start = 8, .size = 32, .async_size = 32, .prev_pos = -1 };

		cache_clear();
		cache_hold(8, 40);
		rd = bs_ra_async(BS_RA_6_16, &other, 8, 4, 2, &lim, &view);
		/* start 40 (the miss), size next(32 + 2) = 68, order 4 + 2 */
		CHECK_READ(rd, BS_RA_ORDER, 40, 68, 40, 6);
		cache_clear();
	}
	rd = bs_ra_async(BS_RA_6_17, &ra17, 8, 2, 2, &lim, &view);
	/* order 4, align 16: end 104 -> 96, size 56; ilog2(56) = 5 > 4. */
	CHECK_READ(rd, BS_RA_ORDER, 40, 56, 40, 4);
	CHECK_STATE(&ra17, 40, 56, 56, 4);

	/*
	 * 6.17 ramps to the largest folio and window and stays there: each
	 * mark is on the first folio of the last window, as aligned as its
	 * page allows.  Windows (start, size, order): (96, 96, 6), (192, 64,
	 * 6), (256, 128, 7), (384, 128, 7), (512, 256, 8), (768, 256, 8),
	 * (1024, 512, 9), then 512 pages of 2 MiB folios each time.
	 */
	for (int i = 0; i < 8; i++) {
		unsigned int forder = bs_ra_folio_order(ra17.start, ra17.order,
							ra17.start + ra17.size - 1, 0);

		rd = bs_ra_async(BS_RA_6_17, &ra17, ra17.start, forder, 2, &lim, &view);
		T_CHECK(rd.kind == BS_RA_ORDER);
		if (i == 5)
			CHECK_STATE(&ra17, 768, 256, 256, 8);
	}
	CHECK_STATE(&ra17, 1536, 512, 512, 9);
}

/* page_cache_async_ra(): a mark this open did not leave (interleaved reads). */
static void test_async_other(void)
{
	for (unsigned int model = 0; model < BS_NR_RA_MODELS; model++) {
		bool v16 = model == BS_RA_6_16;
		struct bs_ra_state ra = fresh();
		struct bs_ra_read rd;

		/* Another open's window left [1000, 1100) cached, marked folio [1000, 1004). */
		cache_clear();
		cache_hold(1000, 1100);
		rd = bs_ra_async(model, &ra, 1000, 2, 2, &lim, &view);
		/* start at the miss 1100, size next(100 + 2) = 204. */
		if (v16) {
			/* order of the marked folio 2, + 2. */
			CHECK_READ(rd, BS_RA_ORDER, 1100, 204, 1100, 4);
			CHECK_STATE(&ra, 1100, 204, 204, 0);
		} else {
			/* this open's order 0, + 2; align 4: 1304 stays. */
			CHECK_READ(rd, BS_RA_ORDER, 1100, 204, 1100, 2);
			CHECK_STATE(&ra, 1100, 204, 204, 2);
		}

		/* An open that ramped to 2 MiB folios before (and read at random since). */
		ra = fresh();
		ra.order = 9;
		cache_clear();
		cache_hold(1024, 1536);
		cache_hold(1536, 1540);
		rd = bs_ra_async(model, &ra, 1536, 2, 2, &lim, &view);
		/* start 1540, size next(4 + 2) = 24 */
		if (v16) {
			CHECK_READ(rd, BS_RA_ORDER, 1540, 24, 1540, 4);
		} else {
			/* order 11, align 1 << 9: end 1564 rounds to 1536 < start, kept;
			 * order capped to 9, then to ilog2(24) = 4. */
			CHECK_READ(rd, BS_RA_ORDER, 1540, 24, 1540, 4);
			T_CHECK(ra.order == 4);
		}

		/* The same with 1 MiB cached after the mark: a large window. */
		ra = fresh();
		ra.order = 9;
		cache_clear();
		cache_hold(2048, 2048 + 256);
		rd = bs_ra_async(model, &ra, 2048, 2, 2, &lim, &view);
		/* start 2304, size next(258) = 512 (258 > 256: max). */
		if (v16) {
			/* 2 + 2 */
			CHECK_READ(rd, BS_RA_ORDER, 2304, 512, 2304, 4);
		} else {
			/* order 11 -> align 512: end 2816 -> 2560, size 256; order 9 capped to ilog2(256) = 8 */
			CHECK_READ(rd, BS_RA_ORDER, 2304, 256, 2304, 8);
			CHECK_STATE(&ra, 2304, 256, 256, 8);
		}

		/* Everything cached for a whole window after the mark: nothing to do. */
		ra = fresh();
		cache_clear();
		cache_hold(4096, 4096 + 600);
		rd = bs_ra_async(model, &ra, 4096, 0, 2, &lim, &view);
		T_CHECK(rd.kind == BS_RA_NONE);
	}
}

/*
 * A fresh open whose first read meets a marked folio at page 0 (a folio
 * holding another open's mark there): expected is 0, so the window is
 * pushed by its size, 0, and stays empty; nothing is read.  6.17 still
 * adds 2 to the order (ilog2(0) caps nothing in the kernel); 6.16 falls
 * back (size < 4), and page_cache_ra_order()'s fallback calls
 * do_page_cache_ra() only while ra->size > index - start: not at all.
 */
static void test_async_empty(void)
{
	struct bs_ra_state ra = fresh();
	struct bs_ra_read rd;

	cache_clear();
	cache_hold(0, 512);
	rd = bs_ra_async(BS_RA_6_17, &ra, 0, 9, 2, &lim, &view);
	CHECK_READ(rd, BS_RA_ORDER, 0, 0, 0, 2);
	CHECK_STATE(&ra, 0, 0, 0, 2);
	ra = fresh();
	rd = bs_ra_async(BS_RA_6_16, &ra, 0, 9, 2, &lim, &view);
	T_CHECK(rd.kind == BS_RA_NONE);
}

/* Small windows and caches without large folios. */
static void test_fallbacks(void)
{
	static const struct bs_ra_limits small = { .max_pages = 2, .min_order = 0, .max_order = 9 };
	static const struct bs_ra_limits flat = { .max_pages = 512, .min_order = 0, .max_order = 0 };
	struct bs_ra_state ra = fresh();
	struct bs_ra_read rd;

	cache_clear();
	/* 6.16: fewer than 4 pages go page by page, the mark on start + size - async. */
	rd = bs_ra_sync(BS_RA_6_16, &ra, 0, 1, &small, &view);
	CHECK_READ(rd, BS_RA_UNBOUNDED, 0, 2, 1, 0);
	/* 6.17+: no such floor. */
	ra = fresh();
	rd = bs_ra_sync(BS_RA_6_17, &ra, 0, 1, &small, &view);
	CHECK_READ(rd, BS_RA_ORDER, 0, 2, 1, 0);
	/* No large folios: page by page, and 6.17 resets the order. */
	ra = fresh();
	ra.order = 5;
	ra.prev_pos = 0;
	rd = bs_ra_sync(BS_RA_6_17, &ra, 1, 2, &flat, &view);
	CHECK_READ(rd, BS_RA_UNBOUNDED, 1, 8, 3, 0);
	T_CHECK(ra.order == 0);
}

/* The view of a file of @end_page pages, the cache as held[] says. */
static struct bs_ra_view view_eof(uint64_t end_page)
{
	return (struct bs_ra_view){ folio_at, NULL, end_page };
}

/*
 * do_page_cache_ra() cuts its count at the page holding the last byte
 * before page_cache_ra_unbounded() places the mark lookahead pages before
 * the count's end: near EOF the mark moves down, or goes (lookahead more
 * than the count).  page_cache_ra_order() cuts only its folios at EOF
 * (limit), its mark stays at start + size - async_size.
 */
static void test_eof_mark(void)
{
	static const struct bs_ra_limits small = { .max_pages = 2, .min_order = 0, .max_order = 9 };
	static const struct bs_ra_limits flat = { .max_pages = 512, .min_order = 0, .max_order = 0 };
	struct bs_ra_view v;
	struct bs_ra_state ra;
	struct bs_ra_read rd;

	cache_clear();
	/* 6.16, a window of 2 < 4 pages: do_page_cache_ra(2, 1).  File of one page: 1 page, mark 0 + 1 - 1. */
	v = view_eof(1);
	ra = fresh();
	rd = bs_ra_sync(BS_RA_6_16, &ra, 0, 1, &small, &v);
	CHECK_READ(rd, BS_RA_UNBOUNDED, 0, 1, 0, 0);
	CHECK_STATE(&ra, 0, 2, 1, 0);		/* the state keeps the window */

	/* No large folios (6.17): window [1, 9), 6 ahead, mark 3 in a long file. */
	for (uint64_t end_page = 5; end_page <= 9; end_page += 2) {
		v = view_eof(end_page);
		ra = fresh();
		ra.prev_pos = 0;
		rd = bs_ra_sync(BS_RA_6_17, &ra, 1, 2, &flat, &v);
		if (end_page == 5)	/* pages 1-4: 4 pages, 6 ahead > 4: no mark */
			CHECK_READ(rd, BS_RA_UNBOUNDED, 1, 4, UINT64_MAX, 0);
		else if (end_page == 7)	/* 6 pages, mark 1 + 6 - 6 */
			CHECK_READ(rd, BS_RA_UNBOUNDED, 1, 6, 1, 0);
		else			/* the whole window: mark 1 + 8 - 6 */
			CHECK_READ(rd, BS_RA_UNBOUNDED, 1, 8, 3, 0);
	}
	/* A window starting at or past EOF reads nothing (do_page_cache_ra()'s index > end_index). */
	v = view_eof(1);
	ra = fresh();
	ra.prev_pos = 0;
	rd = bs_ra_sync(BS_RA_6_17, &ra, 1, 2, &flat, &v);
	T_CHECK(rd.kind == BS_RA_NONE);

	/* Large folios: page_cache_ra_order() keeps start + size - async_size, EOF or not. */
	v = view_eof(3);
	ra = fresh();
	rd = bs_ra_sync(BS_RA_6_17, &ra, 0, 2, &lim, &v);
	CHECK_READ(rd, BS_RA_ORDER, 0, 8, 2, 0);
	T_CHECK(rd.lookahead == 6);
}

/*
 * page_cache_ra_order()'s loop stopped at page @stop (filemap_add_folio()
 * found a folio in the new one's range, or the allocation failed): it
 * then calls do_page_cache_ra(ractl, ra->size - (index - start),
 * ra->async_size) from there, if ra->size > index - start, in folios of
 * the smallest order.  The mark: lookahead pages before the end of that
 * count (cut at EOF), rounded up to the smallest folio; none when the
 * lookahead is more than the count (the mark page was passed already).
 */
static void test_rest(void)
{
	static const struct bs_ra_limits big_min = { .max_pages = 512, .min_order = 2, .max_order = 9 };
	/* The async window of 2 MiB a stream from page 0 reaches at page 1024. */
	const struct bs_ra_read win = { .kind = BS_RA_ORDER, .start = 1024, .nr = 512,
					.mark = 1024, .lookahead = 512, .order = 9 };
	/* A sync window of 64 pages from 100, 62 ahead: mark 102. */
	const struct bs_ra_read sync = { .kind = BS_RA_ORDER, .start = 100, .nr = 64,
					 .mark = 102, .lookahead = 62, .order = 0 };
	struct bs_ra_read rd;

	/*
	 * The case: a 4 KiB folio at page 1324 is in the range of
	 * the window's first folio (2 MiB at 1024), so the loop stops at
	 * once and all 512 pages go page by page; the mark on page 1024.
	 */
	rd = bs_ra_rest(&win, 1024, &lim, 16384);
	CHECK_READ(rd, BS_RA_UNBOUNDED, 1024, 512, 1024, 0);
	/* Stopped after a 1 MiB folio: 256 pages left, 512 ahead: no mark. */
	rd = bs_ra_rest(&win, 1280, &lim, 16384);
	CHECK_READ(rd, BS_RA_UNBOUNDED, 1280, 256, UINT64_MAX, 0);
	/* ... and EOF at 1400: 120 pages. */
	rd = bs_ra_rest(&win, 1280, &lim, 1400);
	CHECK_READ(rd, BS_RA_UNBOUNDED, 1280, 120, UINT64_MAX, 0);
	/* Stopped at the window's end or past it: nothing left. */
	T_CHECK(bs_ra_rest(&win, 1536, &lim, 16384).kind == BS_RA_NONE);
	T_CHECK(bs_ra_rest(&win, 2000, &lim, 16384).kind == BS_RA_NONE);

	/* The sync window stopped at its start: the same mark, 102. */
	rd = bs_ra_rest(&sync, 100, &lim, 16384);
	CHECK_READ(rd, BS_RA_UNBOUNDED, 100, 64, 102, 0);
	/* Stopped at 102, the mark page: 62 left, 62 ahead: mark 102. */
	rd = bs_ra_rest(&sync, 102, &lim, 16384);
	CHECK_READ(rd, BS_RA_UNBOUNDED, 102, 62, 102, 0);
	/* Stopped at 104: 60 left, 62 ahead: the mark page is behind, none. */
	rd = bs_ra_rest(&sync, 104, &lim, 16384);
	CHECK_READ(rd, BS_RA_UNBOUNDED, 104, 60, UINT64_MAX, 0);
	/* EOF at page 140: from 100, 40 pages; 62 > 40: the mark goes. */
	rd = bs_ra_rest(&sync, 100, &lim, 140);
	CHECK_READ(rd, BS_RA_UNBOUNDED, 100, 40, UINT64_MAX, 0);
	/* EOF at 164 (the window's end): kept. */
	rd = bs_ra_rest(&sync, 100, &lim, 164);
	CHECK_READ(rd, BS_RA_UNBOUNDED, 100, 64, 102, 0);

	/*
	 * Smallest folio of 4 pages: window [0, 64), 30 ahead, stopped at
	 * 16: 48 left, mark 16 + 48 - 30 = 34 rounded up to 36.
	 */
	{
		const struct bs_ra_read w = { .kind = BS_RA_ORDER, .start = 0, .nr = 64,
					      .mark = 34, .lookahead = 30, .order = 4 };

		rd = bs_ra_rest(&w, 16, &big_min, 16384);
		CHECK_READ(rd, BS_RA_UNBOUNDED, 16, 48, 36, 2);
		/* EOF at 50: 34 pages from 16, mark 16 + 34 - 30 = 20. */
		rd = bs_ra_rest(&w, 16, &big_min, 50);
		CHECK_READ(rd, BS_RA_UNBOUNDED, 16, 34, 20, 2);
	}
}

/*
 * Large folios are the mapping's when mapping_max_folio_order() > 0
 * (mapping_large_folio_support()), even when its smallest folio is as
 * large as its largest (a 16 KiB block size and folio_size): then
 * page_cache_ra_order() still runs, folios of the smallest order, its
 * mark rounded down to the folio, and 6.17 stores that order.
 */
static void test_large_test(void)
{
	static const struct bs_ra_limits same = { .max_pages = 512, .min_order = 2, .max_order = 2 };

	for (unsigned int model = 0; model < BS_NR_RA_MODELS; model++) {
		struct bs_ra_state ra = fresh();
		struct bs_ra_read rd;

		cache_clear();
		/* Window 8, 6 ahead; order 0 (6.16: + 2), capped to 2, at least the smallest, 2. */
		rd = bs_ra_sync(model, &ra, 0, 2, &same, &view);
		CHECK_READ(rd, BS_RA_ORDER, 0, 8, 2, 2);
		CHECK_STATE(&ra, 0, 8, 6, model == BS_RA_6_16 ? 0 : 2);
	}
}

/*
 * 6.17's trim of an async window's end: align = 1 << min(ra->order,
 * ffs(max_pages) - 1), with max_pages the largest window, not the
 * largest folio: a readahead_kb that is not a power of two aligns less,
 * one above folio_size more, than the folio order would.
 */
static void test_async_trim(void)
{
	/* 192 KiB: 48 pages, ffs(48) - 1 = 4; folios to 2 MiB. */
	static const struct bs_ra_limits odd = { .max_pages = 48, .min_order = 0, .max_order = 9 };
	/* 2 MiB windows, folios to 64 KiB (order 4); ffs(512) - 1 = 9. */
	static const struct bs_ra_limits small_folio = { .max_pages = 512, .min_order = 0,
							  .max_order = 4 };
	struct bs_ra_state ra;
	struct bs_ra_read rd;

	cache_clear();
	T_CHECK(bs_ra_init_size(3, 48) == 8);	/* 4 <= 48 / 4: x2 */
	T_CHECK(bs_ra_next_size(30, 48) == 48);	/* 30 > 48 / 2 */

	/*
	 * Own mark at 100 (a 4-page folio); window [100, 124), order 4.
	 * Next: start 124, size next(24) = 48, order 6, align 1 << min(6, 4)
	 * = 16: end 172 -> 160, size 36; order min(6, ilog2(36) = 5) = 5.
	 */
	ra = (struct bs_ra_state){ .start = 100, .size = 24, .async_size = 24, .order = 4,
				   .prev_pos = -1 };
	rd = bs_ra_async(BS_RA_6_17, &ra, 100, 2, 2, &odd, &view);
	CHECK_READ(rd, BS_RA_ORDER, 124, 36, 124, 5);
	CHECK_STATE(&ra, 124, 36, 36, 5);

	/*
	 * Own mark at 1000 (an 8-page folio); window [1000, 1064), order 4.
	 * Next: start 1064, size 128, order 6, align 1 << min(6, 9) = 64: end
	 * 1192 -> 1152, size 88; order capped to the largest folio, 4.
	 */
	ra = (struct bs_ra_state){ .start = 1000, .size = 64, .async_size = 64, .order = 4,
				   .prev_pos = -1 };
	rd = bs_ra_async(BS_RA_6_17, &ra, 1000, 3, 2, &small_folio, &view);
	CHECK_READ(rd, BS_RA_ORDER, 1064, 88, 1064, 4);
	CHECK_STATE(&ra, 1064, 88, 88, 4);
}

/* Model names: 6.18 and later are 6.17+; nothing else is taken. */
static void test_names(void)
{
	static const char *const bad[] = { "", "6", "6.", "6.15", "5.19", "7.0", " 6.17",
					   "+6.17", "6.17 ", "6.17x", "x", "6.017", "6.100",
					   "06.17", "6.99999999999999999999" };
	unsigned int m = 99;

	T_CHECK(!bs_ra_model_parse("6.16", &m) && m == BS_RA_6_16);
	T_CHECK(!bs_ra_model_parse("6.17", &m) && m == BS_RA_6_17);
	T_CHECK(!bs_ra_model_parse("6.18", &m) && m == BS_RA_6_17);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		m = 99;
		T_CHECK(bs_ra_model_parse(bad[i], &m) == -EINVAL && m == 99);
	}
	T_CHECK(!strcmp(bs_ra_model_name(BS_RA_6_16), "6.16"));
	T_CHECK(!strcmp(bs_ra_model_name(BS_RA_6_17), "6.17"));
	T_CHECK(!bs_ra_model_name(BS_NR_RA_MODELS));
}

/*
 * page_cache_next_miss() and page_cache_prev_miss() as mm/filemap.c's
 * xarray walk counts (xas_load() then xas_next() / xas_prev()): a walk
 * that starts past the first page of a folio of order < 6 looks at the
 * slots from the folio's own (xas_descend() moves xa_offset off the
 * sibling, not xa_index), so it reports each page as far off; the first
 * leaf edge puts a next walk back in step and a prev walk 64 pages out.
 */
static void test_xa_walk(void)
{
	struct bs_ra_state ra = fresh();
	struct bs_ra_read rd;

	/*
	 * Two order-2 folios at 2304 and 2308, nothing at 2312 (leaf
	 * [2304, 2368)).  From 2305: xas_load() lands on the sibling, slot
	 * 2304; xas_next() looks at slots 2305 .. 2311 as 2306 .. 2312 and
	 * at the empty slot 2312 as 2313.
	 */
	cache_clear();
	cache_folio(2304, 2);
	cache_folio(2308, 2);
	T_CHECK(bs_ra_next_miss(&view, 2305, 512) == 2313);
	T_CHECK(bs_ra_next_miss(&view, 2304, 512) == 2312);	/* in step from a head */
	T_CHECK(bs_ra_next_miss(&view, 2309, 512) == 2313);
	T_CHECK(bs_ra_next_miss(&view, 2305, 4) == 2309);	/* max_scan still counts xa_index */
	/*
	 * PostgreSQL's parallel scan: an open at order 7 (its last window
	 * 128 pages) reads 2304 and meets the mark of the window another
	 * open made there, [2304, 2312) in order-2 folios.  Not its mark:
	 * start = page_cache_next_miss(2305) = 2313, size = 2313 - 2304 + 2
	 * = 11, next: 44; order 7 + 2 = 9; align 1 << 9 cuts nothing (2357
	 * rounds below start); order min(9, ilog2(44)) = 5; mark at start.
	 */
	ra.start = 1664;
	ra.size = 128;
	ra.async_size = 128;
	ra.order = 7;
	rd = bs_ra_async(BS_RA_6_17, &ra, 2304, 2, 2, &lim, &view);
	CHECK_READ(rd, BS_RA_ORDER, 2313, 44, 2313, 5);
	CHECK_STATE(&ra, 2313, 44, 44, 5);

	/*
	 * A leaf's edge: an order-2 folio at 60, pages 65 .. 99 held, 64
	 * not.  From 61: slots 61 .. 63 as 62 .. 64; at the edge xa_index is
	 * 65, __xas_next() goes up at slot 64 and comes down into the next
	 * leaf at xa_index's slot: 64 is never looked at, 100 is the miss.
	 */
	cache_clear();
	cache_folio(60, 2);
	cache_hold(65, 100);
	T_CHECK(bs_ra_next_miss(&view, 61, 512) == 100);
	T_CHECK(bs_ra_next_miss(&view, 60, 512) == 64);
	/* The next 64 pages in one order-6 folio (a slot one level up): in step. */
	cache_clear();
	cache_folio(60, 2);
	cache_folio(64, 6);
	T_CHECK(bs_ra_next_miss(&view, 62, 512) == 128);

	/*
	 * Down: order-4 folios at 2496 .. 2559 (a leaf), single pages
	 * 2440 .. 2495 below, 2439 empty.  From 2559 (page 15 of the folio
	 * at 2544): slots 2543 .. 2496 as 2558 .. 2511; then xa_index 2510
	 * (offset 14), __xas_prev() steps the slot off the leaf's start, up
	 * to the slot below it (block 2432) and down at offset 14: slot 2446
	 * as 2510, ..., the empty 2439 as 2503.
	 */
	cache_clear();
	cache_hold(2440, 2496);
	for (uint64_t i = 2496; i < 2560; i += 16)
		cache_folio(i, 4);
	T_CHECK(bs_ra_prev_miss(&view, 2559, 512) == 2503);
	T_CHECK(bs_ra_prev_miss(&view, 2544, 512) == 2439);	/* in step from a head */
	/*
	 * So a miss at 2560 sees 2560 - 2503 - 1 = 56 pages of history,
	 * not 120: size min(56 + 2, 512) = 58, one page ahead.
	 */
	ra = fresh();
	ra.prev_pos = 100 << BS_PAGE_SHIFT;
	rd = bs_ra_sync(BS_RA_6_17, &ra, 2560, 2, &lim, &view);
	CHECK_READ(rd, BS_RA_ORDER, 2560, 58, 2617, 0);
	/*
	 * ra-patterns' resume-in-folio, as traced on 6.18: one open's
	 * windows left [0, 8) in pages, [8, 40) in order-2 folios, an
	 * order-3 at 40 and order-4s at 48, 64, 80; a fresh open misses at
	 * 96.  page_cache_prev_miss(95): page 15 of the folio at 80, slots
	 * 79 .. 64 as 94 .. 79; xa_index 78 leaves the leaf for the one
	 * below at offset 14, slots 14 .. 0 as 78 .. 64; xa_index 63 leaves
	 * that one below page 0: the walk ends there, a miss at 63.  So 32
	 * pages of history (not 96, cached from page 0, doubled): the
	 * kernel's window is 34 pages, one ahead.
	 */
	cache_clear();
	cache_hold(0, 8);
	for (uint64_t i = 8; i < 40; i += 4)
		cache_folio(i, 2);
	cache_folio(40, 3);
	cache_folio(48, 4);
	cache_folio(64, 4);
	cache_folio(80, 4);
	T_CHECK(bs_ra_prev_miss(&view, 95, 512) == 63);
	ra = fresh();
	rd = bs_ra_sync(BS_RA_6_17, &ra, 96, 2, &lim, &view);
	CHECK_READ(rd, BS_RA_ORDER, 96, 34, 129, 0);
	/* One page past a head: slot 0 is looked at twice, then in step. */
	cache_clear();
	cache_hold(2400, 2496);
	cache_folio(2496, 1);
	T_CHECK(bs_ra_prev_miss(&view, 2497, 512) == 2399);
	/* Every page held: the max-th xa_index, whatever slot it looked at. */
	cache_clear();
	cache_hold(0, 2496);
	cache_folio(2496, 4);
	T_CHECK(bs_ra_prev_miss(&view, 2511, 512) == 2000);
}

int main(void)
{
	test_names();
	test_sizes();
	test_folio_order();
	test_sync_stream();
	test_sync_history();
	test_async_own();
	test_async_other();
	test_async_empty();
	test_fallbacks();
	test_eof_mark();
	test_rest();
	test_large_test();
	test_async_trim();
	test_xa_walk();
	printf("readahead decisions: 6.16 and 6.17+ as mm/readahead.c computes them\n");
	return T_EXIT_PASS;
}
