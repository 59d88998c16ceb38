// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_bs_workingset.c - the refault and deactivation decisions
 * (blockstate/workingset.c, bs_lru_inactive_low() and
 * bs_lru_may_deactivate() in cache.c) against the kernel code they
 * follow, case by case, each worked out by hand from that code:
 *
 * - mm/workingset.c: workingset_eviction() reads the lruvec's
 *   nonresident_age into the shadow, then ages it by the folio's pages;
 *   workingset_refault() counts WORKINGSET_REFAULT, and activates (ages
 *   by the folio's pages, counts WORKINGSET_ACTIVATE) when
 *   workingset_test_recent() finds refault distance = age now - age in
 *   the shadow no more than the workingset size, NR_ACTIVE_FILE for file
 *   pages with no swap; workingset_activation() ages by the pages.
 * - mm/filemap.c __filemap_add_folio(): the shadow a new folio takes is
 *   the last of those in its range, in index order; one larger entry is
 *   split and its other slots keep it.
 * - mm/vmscan.c inactive_is_low() and prepare_scan_control()'s
 *   may_deactivate (refaults != lruvec->refaults[WORKINGSET_FILE], or the
 *   inactive list low).
 */
#include "bs_i.h"
#include "test_helpers.h"

#include <stdbool.h>
#include <stdint.h>

#define MIB ((uint64_t)1 << 20)
#define ORDER_MAX 9	/* 2 MiB folios, 4 KiB pages */

static uint64_t age(struct bs_workingset *ws)
{
	return atomic_load(&ws->nonresident_age);
}

static bool refault(struct bs_workingset *ws, uint64_t serial, uint64_t page,
		    unsigned int order, uint64_t active_pages)
{
	return bs_workingset_refault(ws, serial, page, order, 0, ORDER_MAX, active_pages);
}

/* Evict @n 4 KiB folios of file @serial from page @first: the cache ages by n. */
static void evict_pages(struct bs_workingset *ws, uint64_t serial, uint64_t first, uint64_t n)
{
	for (uint64_t p = first; p < first + n; p++)
		bs_workingset_evict(ws, serial, p, 0);
}

/*
 * A 4 KiB folio evicted at age 0 (the age then 1), 99 more evicted (age
 * 100): read again, its distance is 100 - 0 = 100.  With 100 pages active
 * that is recent (<=): activated, the age 101; with 99 it is not.
 */
static void test_distance(void)
{
	struct bs_workingset ws = { 0 };

	for (uint64_t active = 99; active <= 100; active++) {
		bs_workingset_init(&ws, 1024);
		bs_workingset_evict(&ws, 1, 10, 0);
		T_CHECK(age(&ws) == 1);
		evict_pages(&ws, 2, 0, 99);
		T_CHECK(age(&ws) == 100);
		T_CHECK(refault(&ws, 1, 10, 0, active) == (active == 100));
		T_CHECK(atomic_load(&ws.refault_pages) == 1);
		T_CHECK(atomic_load(&ws.activate_pages) == (active == 100 ? 1u : 0u));
		T_CHECK(age(&ws) == (active == 100 ? 101u : 100u));
		/* The folio took the slot: no shadow left there. */
		T_CHECK(!refault(&ws, 1, 10, 0, UINT64_MAX));
		T_CHECK(atomic_load(&ws.refault_pages) == 1);
		/* Another file's page 10 never had one. */
		T_CHECK(!refault(&ws, 3, 10, 0, UINT64_MAX));
		bs_workingset_destroy(&ws);
	}
}

/*
 * Ages in pages: evicting a 64 KiB folio (order 4) ages by 16, a 2 MiB
 * folio activated by use (workingset_activation()) by 512, a 64 KiB
 * refault activated by 16; its counters count pages.
 */
static void test_age_in_pages(void)
{
	struct bs_workingset ws = { 0 };

	bs_workingset_init(&ws, 1024);
	bs_workingset_evict(&ws, 1, 16, 4);
	T_CHECK(age(&ws) == 16);
	bs_workingset_activation(&ws, 9);
	T_CHECK(age(&ws) == 528);
	/* Distance 528 - 0: recent with 528 active pages. */
	T_CHECK(refault(&ws, 1, 16, 4, 528));
	T_CHECK(age(&ws) == 544);
	T_CHECK(atomic_load(&ws.refault_pages) == 16 && atomic_load(&ws.activate_pages) == 16);
	bs_workingset_destroy(&ws);
}

/*
 * A 64 KiB folio (pages 16..31) evicted at age 0 (age 16), then 4 pages
 * of another file (age 20).  A 4 KiB folio made at page 19 takes the
 * larger shadow (distance 20); the kernel splits the entry and its other
 * slots keep it, so page 20 finds it too.  A 2 MiB folio at page 0
 * covers page 16..31: it takes the rest.
 */
static void test_larger_shadow_split(void)
{
	struct bs_workingset ws = { 0 };

	bs_workingset_init(&ws, 1024);
	bs_workingset_evict(&ws, 1, 16, 4);
	evict_pages(&ws, 2, 0, 4);
	T_CHECK(age(&ws) == 20);
	T_CHECK(!refault(&ws, 1, 19, 0, 19));
	T_CHECK(refault(&ws, 1, 20, 0, 20));
	T_CHECK(atomic_load(&ws.refault_pages) == 2 && atomic_load(&ws.activate_pages) == 1);
	/* Age 21 now: the 2 MiB folio's distance 21. */
	T_CHECK(refault(&ws, 1, 0, 9, 21));
	T_CHECK(atomic_load(&ws.refault_pages) == 2 + 512);
	T_CHECK(!refault(&ws, 1, 21, 0, UINT64_MAX));
	bs_workingset_destroy(&ws);
}

/*
 * Smaller shadows inside a new folio: pages 32 and 33 evicted as 4 KiB
 * folios at ages 0 and 1 (age 2).  An 8 KiB folio at page 32 meets both;
 * the kernel's is the last in index order, page 33's, distance 2 - 1 = 1,
 * recent with 1 page active (page 32's, distance 2, would not be).  Both
 * slots are the new folio's now.
 */
static void test_smaller_shadows(void)
{
	struct bs_workingset ws = { 0 };

	bs_workingset_init(&ws, 1024);
	bs_workingset_evict(&ws, 1, 32, 0);
	bs_workingset_evict(&ws, 1, 33, 0);
	T_CHECK(refault(&ws, 1, 32, 1, 1));
	T_CHECK(atomic_load(&ws.refault_pages) == 2 && atomic_load(&ws.activate_pages) == 2);
	T_CHECK(!refault(&ws, 1, 32, 0, UINT64_MAX) && !refault(&ws, 1, 33, 0, UINT64_MAX));
	T_CHECK(atomic_load(&ws.refault_pages) == 2);
	bs_workingset_destroy(&ws);
}

/*
 * The last in index order, not the youngest: pages 33 then 32 evicted as
 * 4 KiB folios (ages 0 and 1; age 2).  An 8 KiB folio at page 32 takes
 * page 33's shadow, distance 2: not recent with 1 page active, though
 * page 32's (distance 1) would be.
 */
static void test_last_not_youngest(void)
{
	struct bs_workingset ws = { 0 };

	bs_workingset_init(&ws, 1024);
	bs_workingset_evict(&ws, 1, 33, 0);
	bs_workingset_evict(&ws, 1, 32, 0);
	T_CHECK(!refault(&ws, 1, 32, 1, 1));
	T_CHECK(atomic_load(&ws.refault_pages) == 2 && atomic_load(&ws.activate_pages) == 0);
	bs_workingset_destroy(&ws);
}

/*
 * A 2 MiB folio at page 0 evicted at age 0 (age 512); a 4 KiB folio made
 * at page 5 takes that shadow (distance 512, not recent with 100 active)
 * and the kernel's split entry keeps it in the other 511 slots; the 4 KiB
 * folio evicted at age 512 (age 513).  A 2 MiB folio at page 0 again:
 * its last slot, page 511, holds the old shadow: distance 513, not
 * recent, where page 5's young shadow (distance 1) would have activated
 * 512 pages.  Had the 4 KiB folio been at page 511, its shadow would be
 * the last slot's: distance 1, activated.
 */
static void test_old_cover_young_inside(void)
{
	struct bs_workingset ws = { 0 };

	for (uint64_t small = 5; small <= 511; small += 506) {
		bs_workingset_init(&ws, 4096);
		bs_workingset_evict(&ws, 1, 0, 9);
		T_CHECK(!refault(&ws, 1, small, 0, 100));
		bs_workingset_evict(&ws, 1, small, 0);
		T_CHECK(age(&ws) == 513);
		T_CHECK(refault(&ws, 1, 0, 9, 100) == (small == 511));
		T_CHECK(atomic_load(&ws.activate_pages) == (small == 511 ? 512u : 0u));
		/* Both shadows went with the new folio. */
		T_CHECK(!refault(&ws, 1, small, 0, UINT64_MAX) && !refault(&ws, 1, 0, 9, UINT64_MAX));
		bs_workingset_destroy(&ws);
	}
}

/* A shadow evicted again replaces the one there: the newer age counts. */
static void test_evicted_again(void)
{
	struct bs_workingset ws = { 0 };

	bs_workingset_init(&ws, 1024);
	bs_workingset_evict(&ws, 1, 5, 0);	/* at 0 */
	evict_pages(&ws, 2, 0, 50);		/* age 51 */
	bs_workingset_evict(&ws, 1, 5, 0);	/* at 51, age 52 */
	T_CHECK(refault(&ws, 1, 5, 0, 1));	/* distance 1 */
	bs_workingset_destroy(&ws);
}

/*
 * The table grows with the shadows (from 1024 slots, doubling when half
 * full, here to 8192 for 4096 pages of cache): 3000 evictions later it
 * holds at least 90% of them (a full bucket of 4 gives up its oldest:
 * at half full about 3% of the shadows go each time), the last one
 * included, and a cache that never evicts has none.
 */
static void test_table_grows(void)
{
	struct bs_workingset ws = { 0 };
	size_t found = 0, kept;

	bs_workingset_init(&ws, 4096);
	T_CHECK(!ws.table && ws.max_slots == 8192);
	T_CHECK(!refault(&ws, 1, 0, 0, UINT64_MAX));
	evict_pages(&ws, 1, 0, 3000);
	T_CHECK(ws.mask + 1 == 8192 && ws.nr_shadows <= 3000 && ws.nr_shadows >= 2700);
	kept = ws.nr_shadows;
	T_CHECK(refault(&ws, 1, 2999, 0, UINT64_MAX));
	for (uint64_t p = 0; p < 2999; p++)
		found += refault(&ws, 1, p, 0, UINT64_MAX);
	/* Each kept shadow found once, and taken. */
	T_CHECK(found + 1 == kept && ws.nr_shadows == 0);
	bs_workingset_destroy(&ws);
}

/*
 * inactive_is_low(): gb = (inactive + active) >> 30; ratio int_sqrt(10 gb),
 * 1 when gb is 0; low when inactive * ratio < active.
 */
static void test_inactive_low(void)
{
	/* Under 1 GiB, ratio 1. */
	T_CHECK(bs_lru_inactive_low(100 * MIB, 200 * MIB));
	T_CHECK(!bs_lru_inactive_low(200 * MIB, 200 * MIB));
	T_CHECK(!bs_lru_inactive_low(0, 0));
	T_CHECK(bs_lru_inactive_low(0, 4096));
	/* 1 GiB: int_sqrt(10) = 3: 256 x 3 = 768 is not below 768; 255 x 3 is below 769. */
	T_CHECK(!bs_lru_inactive_low(256 * MIB, 768 * MIB));
	T_CHECK(bs_lru_inactive_low(255 * MIB, 769 * MIB));
	/* 4 GiB: int_sqrt(40) = 6 (not 5: 600 x 5 < 3496; not 7: 550 x 7 > 3546). */
	T_CHECK(!bs_lru_inactive_low(600 * MIB, 3496 * MIB));
	T_CHECK(bs_lru_inactive_low(550 * MIB, 3546 * MIB));
	/* 10 GiB: int_sqrt(100) = 10, a square (not 9: 1000 x 9 < 9240; not 11: 900 x 11 > 9340). */
	T_CHECK(!bs_lru_inactive_low(1000 * MIB, 9240 * MIB));
	T_CHECK(bs_lru_inactive_low(900 * MIB, 9340 * MIB));
}

/* prepare_scan_control(): refaults activated since the snapshot, or low. */
static void test_may_deactivate(void)
{
	T_CHECK(!bs_lru_may_deactivate(5, 5, 200 * MIB, 200 * MIB));
	T_CHECK(bs_lru_may_deactivate(6, 5, 200 * MIB, 200 * MIB));
	T_CHECK(bs_lru_may_deactivate(5, 5, 100 * MIB, 200 * MIB));
	T_CHECK(bs_lru_may_deactivate(0, 0, 0, 4096));
	T_CHECK(!bs_lru_may_deactivate(0, 0, 0, 0));
}

int main(void)
{
	test_distance();
	test_age_in_pages();
	test_larger_shadow_split();
	test_smaller_shadows();
	test_last_not_youngest();
	test_old_cover_young_inside();
	test_evicted_again();
	test_table_grows();
	test_inactive_low();
	test_may_deactivate();
	puts("ok");
	return T_EXIT_PASS;
}
