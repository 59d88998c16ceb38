// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_ra_window.c - how a readahead window is made when folios are
 * already cached in its range (blockstate/readahead.c), through
 * bs_read() over the in-memory backing file, folio_policy kernel, 2 MiB
 * windows and folios.
 *
 * Linux's page_cache_ra_order() adds the window's folios one by one;
 * filemap_add_folio() fails with -EEXIST when any folio is cached in the
 * new one's range, and the loop stops there: the rest of the window
 * goes through do_page_cache_ra() from that page, in the smallest
 * folios, the mark placed from that count (cut at EOF).  Each case gives
 * the folios the kernel's code makes for it, worked out by hand next to
 * the case, and every folio left in the file must be exactly those.
 */
#include "bs_i.h"
#include "mem_backing.h"
#include "test_helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE ((off_t)BS_PAGE_SIZE)
#define IO ((size_t)8 << 10)
#define MAX_FOLIOS 8192

static struct mem_backing mem;

/* A file of @pages pages, each 8-byte word holding its offset. */
static void mem_fill(uint64_t pages)
{
	size_t len = (size_t)(pages * (uint64_t)PAGE);

	mem_backing_destroy(&mem);
	mem_backing_init(&mem);
	mem_backing_set_len(&mem, len);
	for (uint64_t off = 0; off < len; off += 8)
		memcpy(mem.data + off, &off, 8);
}

struct setup {
	struct bs_cache *cache;
	struct bs_file *file;
};

static struct setup setup(unsigned int model, uint64_t pages)
{
	struct bs_config cfg = {
		.block_size = 4096, .folio_size = 2u << 20, .cache_size = 256u << 20,
		.account = bs_account_policy_find("page"), .size = bs_size_policy_find("kernel"),
		.readahead_kb = 2048, .ra_model = model,
	};
	static const struct bs_cache_ops ops = { 0 };
	struct setup s;

	mem_fill(pages);
	T_CHECK(!bs_cache_create(&cfg, &ops, NULL, &s.cache));
	T_CHECK(!bs_file_create(s.cache, &mem_backing_ops, &mem, (off_t)(pages * PAGE), &s.file));
	return s;
}

static void teardown(struct setup *s)
{
	bs_file_destroy(s->file);
	bs_cache_destroy(s->cache);
}

/* Read @len bytes at page @index through @ra and check what came back. */
static void read_pages(struct bs_file *file, struct bs_ra *ra, uint64_t index, size_t len)
{
	static uint64_t buf[IO / 8];
	off_t off = (off_t)index * PAGE;

	T_CHECK(len <= IO);
	T_CHECK(bs_read(file, ra, buf, len, off) == (ssize_t)len);
	T_CHECK(buf[0] == (uint64_t)off && buf[len / 8 - 1] == (uint64_t)off + len - 8);
}

/* A fresh open reads 8 KiB at a time over pages [first, end). */
static void stream(struct bs_file *file, uint64_t first, uint64_t end)
{
	struct bs_ra ra;

	bs_ra_init(&ra);
	for (uint64_t i = first; i < end; i += IO / PAGE)
		read_pages(file, &ra, i, IO);
	bs_ra_destroy(&ra);
}

/* A fresh open reads the 4 KiB page @index: a random read, one 4 KiB folio. */
static void stray(struct bs_file *file, uint64_t index)
{
	struct bs_ra ra;

	bs_ra_init(&ra);
	read_pages(file, &ra, index, PAGE);
	bs_ra_destroy(&ra);
}

struct folio_rec {
	uint64_t index;
	unsigned int order;
	bool mark;
};

struct layout {
	struct folio_rec f[MAX_FOLIOS];
	size_t nr;
};

static int collect(void *arg, const struct bs_folio_info *info)
{
	struct layout *l = arg;

	T_CHECK(l->nr < MAX_FOLIOS && info->uptodate);
	l->f[l->nr++] = (struct folio_rec){ (uint64_t)info->start / (uint64_t)PAGE, info->order,
					    info->ra_mark };
	return 0;
}

/* @n folios of page order @order from page @first. */
struct run {
	uint64_t first;
	unsigned int order;
	unsigned int n;
};

static void print_layout(const struct layout *l)
{
	size_t i = 0;

	while (i < l->nr) {
		uint64_t nr_pages = (uint64_t)1 << l->f[i].order, end;
		size_t j = i + 1;

		while (j < l->nr && l->f[j].order == l->f[i].order &&
		       l->f[j].index == l->f[j - 1].index + nr_pages)
			j++;
		end = l->f[j - 1].index + nr_pages;
		fprintf(stderr, "    [%5llu, %5llu) order %u x %zu\n",
			(unsigned long long)l->f[i].index, (unsigned long long)end, l->f[i].order,
			j - i);
		i = j;
	}
	for (i = 0; i < l->nr; i++)
		if (l->f[i].mark)
			fprintf(stderr, "    marked: %llu\n", (unsigned long long)l->f[i].index);
}

/*
 * The file's folios must be exactly @runs, in order, and the marked ones
 * exactly those at @marks.
 */
static void check_layout(const char *name, struct bs_file *file, const struct run *runs,
			 size_t nr_runs, const uint64_t *marks, size_t nr_marks)
{
	static struct layout l;
	size_t k = 0, m = 0;
	bool ok = true;

	l.nr = 0;
	T_CHECK(bs_file_folios(file, collect, &l) == 0);
	for (size_t r = 0; r < nr_runs && ok; r++) {
		for (unsigned int i = 0; i < runs[r].n && ok; i++, k++) {
			uint64_t index = runs[r].first + ((uint64_t)i << runs[r].order);

			ok = k < l.nr && l.f[k].index == index && l.f[k].order == runs[r].order;
		}
	}
	ok = ok && k == l.nr;
	for (size_t i = 0; i < l.nr && ok; i++) {
		if (!l.f[i].mark)
			continue;
		ok = m < nr_marks && l.f[i].index == marks[m];
		m++;
	}
	if (!ok || m != nr_marks) {
		fprintf(stderr, "%s: the folios differ from the kernel's; got:\n", name);
		print_layout(&l);
		exit(T_EXIT_FAIL);
	}
	printf("%s: %zu folios as the kernel's\n", name, l.nr);
}

#define NR(a) (sizeof(a) / sizeof((a)[0]))

/*
 * 6.17: a stream from page 0 ramps its windows (start, size, order) as
 * (0, 8, 0), (8, 32, 2), (40, 56, 4), (96, 96, 6), (192, 64, 6), (256,
 * 128, 7), (384, 128, 7), (512, 256, 8), (768, 256, 8), (1024, 512, 9),
 * (1536, 512, 9) (test_ra_decide.c), each window's mark on its first
 * folio.  A 4 KiB folio cached at page 1324 lies in the range of the
 * first folio of (1024, 512, 9), 2 MiB at 1024: the loop stops at once,
 * and do_page_cache_ra(512, 512) from 1024 makes 511 folios of 4 KiB,
 * marking 1024 (1024 + 512 - 512).  The stream's read at 1024 takes that
 * mark: the next window keeps ra->order (9, + 2, capped): one 2 MiB folio
 * at 1536, marked.  (The old fit made 1 MiB, 128K, 32K, 16K at 1024.)
 */
static void test_stray_in_first_folio(void)
{
	static const struct run runs[] = {
		{ 0, 0, 8 }, { 8, 2, 8 }, { 40, 3, 1 }, { 48, 4, 3 }, { 96, 5, 1 }, { 128, 6, 2 },
		{ 256, 7, 2 }, { 512, 8, 2 }, { 1024, 0, 512 }, { 1536, 9, 1 },
	};
	static const uint64_t marks[] = { 1536 };
	struct setup s = setup(BS_RA_6_17, 4096);

	stray(s.file, 1324);
	stream(s.file, 0, 1536);
	check_layout("6.17, a 4K folio at 1324, stream to 1536", s.file, runs, NR(runs), marks,
		     NR(marks));
	teardown(&s);
}

/*
 * 6.17: a 4 KiB folio at page 70, inside window (40, 56, 4) but not in
 * its first folios: 40 is aligned to order 3, so [40, 48), then [48, 64)
 * of order 4; [64, 80) holds page 70: the loop stops at 64, and
 * do_page_cache_ra(56 - 24, 56) from 64 reads 32 pages of 4 KiB and marks
 * none (56 ahead > 32: the mark, 40, was placed already).  ra->order
 * stays 4.  The read at 40 takes that mark: window (96, 96, 6) (test_ra_
 * decide's ramp), folios 128K at 96 (aligned to order 5) and 256K at 128;
 * the read at 96 takes its mark: (192, 64, 6), 256K at 192, marked.  The
 * stream stops at page 128.
 */
static void test_stray_mid_window(void)
{
	static const struct run runs[] = {
		{ 0, 0, 8 }, { 8, 2, 8 }, { 40, 3, 1 }, { 48, 4, 1 }, { 64, 0, 32 },
		{ 96, 5, 1 }, { 128, 6, 2 },
	};
	static const uint64_t marks[] = { 192 };
	struct setup s = setup(BS_RA_6_17, 4096);

	stray(s.file, 70);
	stream(s.file, 0, 128);
	check_layout("6.17, a 4K folio at 70, stream to 128", s.file, runs, NR(runs), marks,
		     NR(marks));
	teardown(&s);
}

/*
 * 6.17, EOF at page 1300, a 4 KiB folio at 1100: window (1024, 512, 9)
 * has its limit at 1299, so its first folio is of order 8, [1024, 1280),
 * which holds 1100: the loop stops at 1024.  do_page_cache_ra(512, 512)
 * cuts the count to 1300 - 1024 = 276 pages before placing the mark: 512
 * ahead > 276, no mark (page_cache_ra_order()'s own mark, 1024, is not
 * placed).  275 new 4 KiB folios and the cached one; the stream took
 * every other mark, so none is left.
 */
static void test_stray_near_eof(void)
{
	static const struct run runs[] = {
		{ 0, 0, 8 }, { 8, 2, 8 }, { 40, 3, 1 }, { 48, 4, 3 }, { 96, 5, 1 }, { 128, 6, 2 },
		{ 256, 7, 2 }, { 512, 8, 2 }, { 1024, 0, 276 },
	};
	struct setup s = setup(BS_RA_6_17, 1300);

	stray(s.file, 1100);
	stream(s.file, 0, 1024);
	check_layout("6.17, EOF at 1300, a 4K folio at 1100, stream to 1024", s.file, runs,
		     NR(runs), NULL, 0);
	teardown(&s);
}

/*
 * 6.16, a 4 KiB folio at page 70: page_cache_ra_order() adds 2 to the
 * order passed (0 for a miss, the marked folio's for a mark).  Windows:
 * (0, 8): order 2, [0, 4) [4, 8), mark 2 on [0, 4); the read at 0 takes
 * it: (8, 32), order 2 + 2 = 4, but page 8 is aligned to order 3 only:
 * [8, 16), [16, 32), and [32, 40) (the window ends at 39), mark on
 * [8, 16); the read at 8: (40, 64), order 3 + 2 = 5, [40, 48) (aligned
 * to 3), [48, 64), then [64, 96) holds 70: stop at 64,
 * do_page_cache_ra(64 - 24, 64): 40 pages of 4 KiB, no mark (64 ahead >
 * 40); the read at 40 meets the
 * mark on [40, 48), order 3: (104, 128), order 3 + 2 = 5: [104, 112),
 * [112, 128), then order 5 to 224, and [224, 232) (order 3: the window
 * ends at 231), marked [104, 112).  The stream stops at page 96.
 */
static void test_stray_6_16(void)
{
	static const struct run runs[] = {
		{ 0, 2, 2 }, { 8, 3, 1 }, { 16, 4, 1 }, { 32, 3, 2 }, { 48, 4, 1 }, { 64, 0, 40 },
		{ 104, 3, 1 }, { 112, 4, 1 }, { 128, 5, 3 }, { 224, 3, 1 },
	};
	static const uint64_t marks[] = { 104 };
	struct setup s = setup(BS_RA_6_16, 4096);

	stray(s.file, 70);
	stream(s.file, 0, 96);
	check_layout("6.16, a 4K folio at 70, stream to 96", s.file, runs, NR(runs), marks,
		     NR(marks));
	teardown(&s);
}

/*
 * 6.17, every readahead folio above 4 KiB fails to be had (the
 * folio_alloc_fails op, which fault=alloc:ENOMEM drives on the mount):
 * ractl_alloc_folio() returns NULL, page_cache_ra_order()'s loop stops at
 * the window's first folio, and do_page_cache_ra(ra->size,
 * ra->async_size) reads the whole window page by page, marking its first
 * page (async_size = size).  ra->order was stored before the loop, so
 * the windows ramp as always: (0, 8, 0) asks for 4 KiB folios and fails
 * nothing, each of the 9 after it up to (1024, 512, 9), which the read
 * at 768 starts, fails once.  The stream stops at page 1024.
 */
static void test_alloc_fails_every_window(void)
{
	static const struct run runs[] = { { 0, 0, 1536 } };
	static const uint64_t marks[] = { 1024 };
	struct setup s = setup(BS_RA_6_17, 4096);

	mem.fail_folio_allocs = -1;
	stream(s.file, 0, 1024);
	check_layout("6.17, no folio above 4K, stream to 1024", s.file, runs, NR(runs), marks,
		     NR(marks));
	T_CHECK(mem.folio_allocs_failed == 9);
	teardown(&s);
}

/*
 * 6.17, only the first folio above 4 KiB fails: window (8, 32, 2) goes
 * page by page, marked at 8; ra->order is 2 all the same, so the read at
 * 8 starts (40, 56, 4) in folios of order 3 and 4 and the ramp goes on:
 * the layout of test_stray_mid_window without its stray, [8, 40) in
 * 4 KiB folios.
 */
static void test_alloc_fails_once(void)
{
	static const struct run runs[] = {
		{ 0, 0, 8 }, { 8, 0, 32 }, { 40, 3, 1 }, { 48, 4, 3 }, { 96, 5, 1 }, { 128, 6, 2 },
	};
	static const uint64_t marks[] = { 192 };
	struct setup s = setup(BS_RA_6_17, 4096);

	mem.fail_folio_allocs = 1;
	stream(s.file, 0, 128);
	check_layout("6.17, the first folio above 4K fails, stream to 128", s.file, runs,
		     NR(runs), marks, NR(marks));
	T_CHECK(mem.folio_allocs_failed == 1);
	teardown(&s);
}

/*
 * 6.16, the first folio above 4 KiB fails: that is the sync window's
 * first, (0, 8) asking for order 0 + 2: page by page, the mark on 2
 * (do_page_cache_ra(8, 6)).  6.16 passes on the marked folio's order:
 * the read at 2 meets a 4 KiB folio, so (8, 32) asks for 0 + 2: 16 KiB
 * folios x 8, mark on 8; the read at 8: (40, 64), 2 + 2: [40, 48) of
 * order 3 (alignment), [48, 96) of 4, [96, 104) of 3 (the window ends at
 * 103), mark on 40; the read at 40: (104, 128), 3 + 2 = 5: [104, 112),
 * [112, 128), order 5 to 224, [224, 232), mark on 104.  The stream stops
 * at page 64.
 */
static void test_alloc_fails_once_6_16(void)
{
	static const struct run runs[] = {
		{ 0, 0, 8 }, { 8, 2, 8 }, { 40, 3, 1 }, { 48, 4, 3 }, { 96, 3, 2 }, { 112, 4, 1 },
		{ 128, 5, 3 }, { 224, 3, 1 },
	};
	static const uint64_t marks[] = { 104 };
	struct setup s = setup(BS_RA_6_16, 4096);

	mem.fail_folio_allocs = 1;
	stream(s.file, 0, 64);
	check_layout("6.16, the first folio above 4K fails, stream to 64", s.file, runs,
		     NR(runs), marks, NR(marks));
	T_CHECK(mem.folio_allocs_failed == 1);
	teardown(&s);
}

int main(void)
{
	mem_backing_init(&mem);
	test_stray_in_first_folio();
	test_stray_mid_window();
	test_stray_near_eof();
	test_stray_6_16();
	test_alloc_fails_every_window();
	test_alloc_fails_once();
	test_alloc_fails_once_6_16();
	mem_backing_destroy(&mem);
	return T_EXIT_PASS;
}
