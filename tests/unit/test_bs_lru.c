// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_bs_lru.c - reclaim's two lists (blockstate/cache.c), as the
 * kernel's active and inactive file LRU lists.
 *
 * A cache of 16 folios of 64 KiB over a file of 64 folios, fixed sizing,
 * no readahead:
 * - scan resistance: a folio read twice is activated and outlives a
 *   sequential pass over four times the cache, while the folios read once
 *   before the pass are reclaimed;
 * - one use per run of reads: an open reading a folio in 16 pieces uses
 *   it once (filemap_read()'s rule), so it stays inactive; a read of it
 *   through another open is its second use and activates it;
 * - writes are no use: a folio written twice stays inactive;
 * - deactivation when the inactive list is low: with every folio read
 *   twice reclaim moves active folios back, and the last ones stay;
 * - refaults (workingset.c): with the inactive list not low and nothing
 *   refaulted, reclaim leaves the active list (6 folios) alone; the folio
 *   reclaimed last, read again, goes straight to the active list, and
 *   that lets
 *   the next reclaim (only that one) deactivate; one read back long
 *   after starts inactive; a write makes no refault; a reclaim that
 *   freed nothing having skipped the active list goes again with
 *   deactivation forced;
 * - a folio reclaim meets dirty or under writeback is marked for reclaim
 *   and activated (shrink_folio_list()'s activate_locked); when its
 *   writeback ends it goes to the inactive tail (folio_end_writeback() ->
 *   folio_rotate_reclaimable()), so once clean it is the next one
 *   reclaimed, before folios that were inactive longer;
 * - one written again before its writeback ends is not rotated: it
 *   stays active (folio_mark_dirty() clears PG_reclaim);
 * - one holding only unsynced blocks (clean to the kernel, which would
 *   free it) goes back to the inactive head, never to the active list;
 * - the byte counts: active + inactive is every folio's memory, always;
 * - counts as old as a flush (bs_config.lru_stats_ms, on the fixture's
 *   clock): a refault activated after a flush lets a reclaim deactivate
 *   only after the next, once; an inactive list flushed low stays low
 *   to reclaim until the next flush, which deactivates every active
 *   folio where live counts would have stopped.
 * Single threaded: every count is exact.
 */
#include "bs_i.h"
#include "mem_backing.h"
#include "test_helpers.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((size_t)1 << 10)
#define F64K (64 * KiB)
#define CACHE_FOLIOS 16
#define FILE_FOLIOS 64

struct fixture {
	struct mem_backing m;
	struct bs_cache *cache;
	struct bs_file *file;
	int64_t now_ns;		/* the cache's clock (bs_cache_ops.now_ns) */
};

static int64_t fixture_now(void *arg)
{
	return ((struct fixture *)arg)->now_ns;
}

/* @lru_stats_ms: bs_config.lru_stats_ms, on the fixture's clock (at 0). */
static void setup_stats(struct fixture *fx, uint32_t lru_stats_ms)
{
	static const struct bs_cache_ops ops = { .now_ns = fixture_now };
	struct bs_config cfg = {
		.block_size = 4096,
		.folio_size = F64K,
		.cache_size = CACHE_FOLIOS * F64K,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find("fixed"),
		.readahead_kb = 0,
		.lru_stats_ms = lru_stats_ms,
	};

	mem_backing_init(&fx->m);
	mem_backing_set_len(&fx->m, FILE_FOLIOS * F64K);
	memset(fx->m.data, 0x5a, FILE_FOLIOS * F64K);
	fx->now_ns = 0;
	T_CHECK(bs_cache_create(&cfg, &ops, fx, &fx->cache) == 0);
	T_CHECK(bs_file_create(fx->cache, &mem_backing_ops, &fx->m, FILE_FOLIOS * F64K,
			       &fx->file) == 0);
}

/* Live counts (lru_stats_ms 0), as every test but the last two. */
static void setup(struct fixture *fx)
{
	setup_stats(fx, 0);
}

static void teardown(struct fixture *fx)
{
	bs_file_destroy(fx->file);
	bs_cache_destroy(fx->cache);
	mem_backing_destroy(&fx->m);
}

/* The stats, with the lists' bytes checked against the folios. */
static struct bs_stats stats(struct bs_cache *cache)
{
	struct bs_stats st;

	T_CHECK(bs_cache_check(cache) == 0);
	bs_cache_stats(cache, &st);
	T_CHECK(st.active_bytes + st.inactive_bytes == st.folios * F64K);
	return st;
}

static void read_at(struct bs_file *file, struct bs_ra *ra, off_t off, size_t len)
{
	char buf[F64K];

	T_CHECK(len <= sizeof(buf));
	T_CHECK(bs_read(file, ra, buf, len, off) == (ssize_t)len);
	T_CHECK(buf[0] == 0x5a && buf[len - 1] == 0x5a);
}

static bool cached(struct bs_file *file, unsigned int folio)
{
	return bs_file_block_uptodate(file, (off_t)folio * (off_t)F64K);
}

static void test_scan_resistance(void)
{
	struct fixture fx;
	struct bs_stats st;

	setup(&fx);
	for (unsigned int i = 0; i < 4; i++)
		read_at(fx.file, NULL, (off_t)i * (off_t)F64K, 4096);
	read_at(fx.file, NULL, 0, 4096);	/* folio 0's second use */
	st = stats(fx.cache);
	T_CHECK(st.activated_folios == 1 && st.active_bytes == F64K);
	for (unsigned int i = 4; i < FILE_FOLIOS; i++)
		read_at(fx.file, NULL, (off_t)i * (off_t)F64K, F64K);
	st = stats(fx.cache);
	T_CHECK(st.reclaimed_folios == FILE_FOLIOS - CACHE_FOLIOS);
	T_CHECK(cached(fx.file, 0));
	for (unsigned int i = 1; i < 4; i++)
		T_CHECK(!cached(fx.file, i));
	T_CHECK(cached(fx.file, FILE_FOLIOS - 1));
	teardown(&fx);
}

static void test_one_use_per_run(void)
{
	struct fixture fx;
	struct bs_ra a, b;
	struct bs_stats st;

	setup(&fx);
	bs_ra_init(&a);
	bs_ra_init(&b);
	for (unsigned int i = 0; i < 16; i++)
		read_at(fx.file, &a, 5 * (off_t)F64K + (off_t)i * 4096, 4096);
	st = stats(fx.cache);
	T_CHECK(st.activated_folios == 0 && st.active_bytes == 0);
	/* The same open, elsewhere and back: a new run, a second use. */
	read_at(fx.file, &a, 6 * (off_t)F64K, 4096);
	read_at(fx.file, &a, 5 * (off_t)F64K, 4096);
	st = stats(fx.cache);
	T_CHECK(st.activated_folios == 1 && st.active_bytes == F64K);
	/* Another open's read of a folio that one used once. */
	read_at(fx.file, &b, 6 * (off_t)F64K + 8192, 4096);
	st = stats(fx.cache);
	T_CHECK(st.activated_folios == 2 && st.active_bytes == 2 * F64K);
	bs_ra_destroy(&a);
	bs_ra_destroy(&b);
	teardown(&fx);
}

static void test_writes_are_no_use(void)
{
	struct fixture fx;
	char buf[4096];
	struct bs_stats st;

	setup(&fx);
	memset(buf, 0x5a, sizeof(buf));
	T_CHECK(bs_write(fx.file, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf));
	T_CHECK(bs_write(fx.file, buf, sizeof(buf), 8192) == (ssize_t)sizeof(buf));
	st = stats(fx.cache);
	T_CHECK(st.folios == 1 && st.activated_folios == 0 && st.inactive_bytes == F64K);
	teardown(&fx);
}

static void write_folio(struct bs_file *file, unsigned int folio)
{
	char buf[4096];

	memset(buf, 0x5a, sizeof(buf));
	T_CHECK(bs_write(file, buf, sizeof(buf), (off_t)folio * (off_t)F64K) ==
		(ssize_t)sizeof(buf));
}

/* Collect @folio's dirty blocks (one run): under writeback until completed. */
static void collect(struct bs_file *file, unsigned int folio, struct bs_wb_run *run)
{
	off_t pos = (off_t)folio * (off_t)F64K;

	T_CHECK(bs_wb_collect(file, &pos, pos + (off_t)F64K, run, 1, F64K) == 1);
}

static void sync_file(struct bs_file *file)
{
	bs_sync_end(file, bs_sync_begin(file), 0);
}

/* Fill the cache: folios [first, first + n) read once, in order. */
static void read_folios(struct bs_file *file, unsigned int first, unsigned int n)
{
	for (unsigned int i = first; i < first + n; i++)
		read_at(file, NULL, (off_t)i * (off_t)F64K, 4096);
}

/*
 * Every folio read twice: all active, the inactive list empty, so it is
 * low and reclaim deactivates (at least a folio a turn); the folios
 * activated last stay.
 */
static void test_deactivate_when_low(void)
{
	struct fixture fx;
	struct bs_stats st;

	setup(&fx);
	for (unsigned int i = 0; i < 2 * CACHE_FOLIOS; i++) {
		read_at(fx.file, NULL, (off_t)i * (off_t)F64K, 4096);
		read_at(fx.file, NULL, (off_t)i * (off_t)F64K, 4096);
		st = stats(fx.cache);
		T_CHECK(st.activated_folios == i + 1);
		if (i < CACHE_FOLIOS)
			T_CHECK(st.deactivated_folios == 0 && st.inactive_bytes == 0);
	}
	T_CHECK(st.deactivated_folios >= CACHE_FOLIOS);
	T_CHECK(st.reclaimed_folios == CACHE_FOLIOS);
	T_CHECK(cached(fx.file, 2 * CACHE_FOLIOS - 1) && cached(fx.file, 2 * CACHE_FOLIOS - 2));
	teardown(&fx);
}

/*
 * Six folios active, the rest inactive: the inactive list is not low and
 * nothing refaulted, so reclaim leaves the active list alone however much
 * it reclaims (prepare_scan_control() clears may_deactivate).  Then the
 * folio reclaimed last is read again: its refault distance (pages
 * reclaimed or activated since) is within the active list, so it goes
 * straight to the active list; that activation lets the next reclaim
 * deactivate, and only the next.  A folio read back after the cache aged
 * by more than the active list starts inactive.
 */
static void test_refault(void)
{
	const unsigned int nr_active = 6, end = 2 * CACHE_FOLIOS;
	unsigned int first_cached = end, gone;
	uint64_t deactivated;
	struct fixture fx;
	struct bs_stats st;

	setup(&fx);
	for (unsigned int i = 0; i < nr_active; i++) {
		read_at(fx.file, NULL, (off_t)i * (off_t)F64K, 4096);
		read_at(fx.file, NULL, (off_t)i * (off_t)F64K, 4096);
	}
	read_folios(fx.file, nr_active, end - nr_active);
	st = stats(fx.cache);
	T_CHECK(st.active_bytes == nr_active * F64K && st.deactivated_folios == 0);
	T_CHECK(st.workingset_refault == 0 && st.workingset_activate == 0);
	/* The inactive folios cached are the newest; the one before them went last. */
	for (unsigned int i = end; i-- > nr_active && cached(fx.file, i);)
		first_cached = i;
	T_CHECK(first_cached > nr_active && first_cached < end);
	gone = first_cached - 1;
	T_CHECK(!cached(fx.file, gone));
	read_folios(fx.file, gone, 1);
	st = stats(fx.cache);
	T_CHECK(st.workingset_refault == F64K / 4096 && st.workingset_activate == F64K / 4096);
	T_CHECK(st.active_bytes == (nr_active + 1) * F64K && st.activated_folios == nr_active);
	deactivated = st.deactivated_folios;
	/* The next reclaim may deactivate, and does: at least a folio. */
	read_folios(fx.file, end, 2);
	st = stats(fx.cache);
	T_CHECK(st.deactivated_folios > deactivated);
	deactivated = st.deactivated_folios;
	/* No refault activated since: the inactive list is not low, so none. */
	read_folios(fx.file, end + 2, 4);
	st = stats(fx.cache);
	T_CHECK(st.deactivated_folios == deactivated);
	/* The first inactive folio went about end folios of age ago: far. */
	read_folios(fx.file, nr_active, 1);
	st = stats(fx.cache);
	T_CHECK(st.workingset_refault == 2 * F64K / 4096 && st.workingset_activate == F64K / 4096);
	teardown(&fx);
}

/*
 * Half the cache unsynced on the inactive list, half active by use: the
 * inactive list is not low and nothing refaulted, so a reclaim's first
 * pass skips the active list and frees nothing (an unsynced folio cannot
 * go); do_try_to_free_pages() then goes again with deactivation forced
 * (skipped_deactivate), and the oldest active folios, clean, go.
 */
static void test_forced_deactivation(void)
{
	const unsigned int half = CACHE_FOLIOS / 2;
	struct fixture fx;
	struct bs_wb_run run;
	struct bs_stats st;

	setup(&fx);
	for (unsigned int i = 0; i < half; i++) {
		write_folio(fx.file, i);
		collect(fx.file, i, &run);
		bs_wb_complete(fx.file, &run, 0);	/* written, not synced */
	}
	for (unsigned int i = half; i < CACHE_FOLIOS; i++) {
		read_at(fx.file, NULL, (off_t)i * (off_t)F64K, 4096);
		read_at(fx.file, NULL, (off_t)i * (off_t)F64K, 4096);
	}
	st = stats(fx.cache);
	T_CHECK(st.active_bytes == half * F64K && st.unsynced_bytes == half * F64K);
	T_CHECK(st.deactivated_folios == 0 && st.reclaimed_folios == 0);
	read_folios(fx.file, CACHE_FOLIOS, 1);
	st = stats(fx.cache);
	T_CHECK(st.deactivated_folios >= 1 && st.reclaimed_folios >= 1);
	T_CHECK(st.folios <= CACHE_FOLIOS);
	T_CHECK(!cached(fx.file, half) && cached(fx.file, CACHE_FOLIOS));
	for (unsigned int i = 0; i < half; i++)
		T_CHECK(cached(fx.file, i));
	teardown(&fx);
}

/* A write makes its folio where a shadow lies: no refault (__GFP_WRITE). */
static void test_write_no_refault(void)
{
	struct fixture fx;
	struct bs_stats st;

	setup(&fx);
	read_folios(fx.file, 0, CACHE_FOLIOS + 1);
	T_CHECK(!cached(fx.file, 0));
	write_folio(fx.file, 0);
	st = stats(fx.cache);
	T_CHECK(st.workingset_refault == 0 && st.active_bytes == 0);
	teardown(&fx);
}

static void test_dirty_rotated_when_written(void)
{
	struct fixture fx;
	struct bs_wb_run run;
	struct bs_stats st;

	setup(&fx);
	write_folio(fx.file, 0);
	read_folios(fx.file, 1, CACHE_FOLIOS - 1);
	collect(fx.file, 0, &run);
	/*
	 * Folio 0 is the oldest: under writeback, activated; a reclaim takes
	 * 32 pages at least, folios 1 and 2 (one folio's memory is pooled).
	 */
	read_folios(fx.file, CACHE_FOLIOS, 1);
	st = stats(fx.cache);
	T_CHECK(st.active_bytes == F64K && st.activated_folios == 0);
	T_CHECK(cached(fx.file, 0) && !cached(fx.file, 1) && !cached(fx.file, 2));
	bs_wb_complete(fx.file, &run, 0);
	st = stats(fx.cache);
	T_CHECK(st.active_bytes == 0 && st.rotated_folios == 1);
	/* Synced, it is clean at the inactive tail: the first one reclaimed. */
	sync_file(fx.file);
	read_folios(fx.file, CACHE_FOLIOS + 1, 2);
	T_CHECK(!cached(fx.file, 0) && !cached(fx.file, 3) && cached(fx.file, 4));
	st = stats(fx.cache);
	T_CHECK(st.reclaimed_folios == 4);
	teardown(&fx);
}

static void test_redirtied_not_rotated(void)
{
	struct fixture fx;
	struct bs_wb_run run;
	struct bs_stats st;

	setup(&fx);
	write_folio(fx.file, 0);
	read_folios(fx.file, 1, CACHE_FOLIOS - 1);
	collect(fx.file, 0, &run);
	read_folios(fx.file, CACHE_FOLIOS, 1);
	write_folio(fx.file, 0);		/* dirty again, under writeback */
	bs_wb_complete(fx.file, &run, 0);
	st = stats(fx.cache);
	T_CHECK(st.active_bytes == F64K && st.rotated_folios == 0);
	teardown(&fx);
}

static void test_unsynced_kept_inactive(void)
{
	struct fixture fx;
	struct bs_wb_run run;
	struct bs_stats st;

	setup(&fx);
	write_folio(fx.file, 0);
	collect(fx.file, 0, &run);
	bs_wb_complete(fx.file, &run, 0);	/* written, not synced */
	read_folios(fx.file, 1, CACHE_FOLIOS - 1);
	read_folios(fx.file, CACHE_FOLIOS, 1);
	st = stats(fx.cache);
	T_CHECK(st.active_bytes == 0 && st.unsynced_bytes == F64K);
	T_CHECK(cached(fx.file, 0) && !cached(fx.file, 1));
	/* Back at the inactive head: the folios read before it go first. */
	read_folios(fx.file, CACHE_FOLIOS + 1, CACHE_FOLIOS - 2);
	st = stats(fx.cache);
	T_CHECK(st.active_bytes == 0 && cached(fx.file, 0));
	for (unsigned int i = 1; i < CACHE_FOLIOS - 1; i++)
		T_CHECK(!cached(fx.file, i));
	teardown(&fx);
}

/*
 * test_refault's start with counts flushed each second (lru_stats_ms):
 * the refault activated at time 0 after the flush lets no reclaim
 * deactivate until the clock passes the next flush, and then only the
 * first reclaim after it (the kernel's lruvec_page_state() reads the
 * memory cgroup's statistics as last flushed; snapshot_refaults() keeps
 * that count).  A clock that had not moved would never let one.
 */
static void test_refault_seen_after_flush(void)
{
	const unsigned int nr_active = 6, end = 2 * CACHE_FOLIOS;
	unsigned int gone = end;
	uint64_t deactivated;
	struct fixture fx;
	struct bs_stats st;

	setup_stats(&fx, 1000);
	for (unsigned int i = 0; i < nr_active; i++) {
		read_at(fx.file, NULL, (off_t)i * (off_t)F64K, 4096);
		read_at(fx.file, NULL, (off_t)i * (off_t)F64K, 4096);
	}
	read_folios(fx.file, nr_active, end - nr_active);
	for (unsigned int i = end; i-- > nr_active && cached(fx.file, i);)
		gone = i - 1;
	T_CHECK(gone >= nr_active && !cached(fx.file, gone));
	read_folios(fx.file, gone, 1);
	st = stats(fx.cache);
	T_CHECK(st.workingset_activate == F64K / 4096 && st.deactivated_folios == 0);
	/* The same instant: the flushed count has not moved. */
	read_folios(fx.file, end, 4);
	st = stats(fx.cache);
	T_CHECK(st.deactivated_folios == 0);
	/* 999 ms on: still the same period. */
	fx.now_ns = 999 * 1000000LL;
	read_folios(fx.file, end + 4, 2);
	T_CHECK(stats(fx.cache).deactivated_folios == 0);
	/*
	 * The next period: its first reclaim sees the activation, and
	 * deactivates (a reclaim frees at least 32 pages, two folios here:
	 * two reads make one).
	 */
	fx.now_ns = 1000 * 1000000LL;
	read_folios(fx.file, end + 6, 2);
	st = stats(fx.cache);
	T_CHECK(st.deactivated_folios > 0);
	deactivated = st.deactivated_folios;
	/* Only it: no refault activated since. */
	fx.now_ns = 2500 * 1000000LL;
	read_folios(fx.file, end + 8, 4);
	T_CHECK(stats(fx.cache).deactivated_folios == deactivated);
	teardown(&fx);
}

/*
 * Twelve folios active, then folios read once: the first reclaim finds
 * the inactive list low and deactivates.  With live counts it stops
 * once the inactive list is no longer low (5 deactivated, 7 of the 12
 * kept); with counts flushed at that first reclaim and a clock that
 * does not move, the list stays low to reclaim, which goes on
 * deactivating (9, 3 kept: the last few stay only because a scan of
 * size >> priority pages of a short active list comes to nothing).
 * When the clock moves past a period the next flush sees the lists as
 * they are, and deactivation stops.
 */
static uint64_t low_then_once(struct fixture *fx, unsigned int *kept)
{
	const unsigned int nr_active = 12;

	for (unsigned int i = 0; i < nr_active; i++) {
		read_at(fx->file, NULL, (off_t)i * (off_t)F64K, 4096);
		read_at(fx->file, NULL, (off_t)i * (off_t)F64K, 4096);
	}
	T_CHECK(stats(fx->cache).active_bytes == nr_active * F64K);
	read_folios(fx->file, nr_active, 3 * CACHE_FOLIOS);
	*kept = 0;
	for (unsigned int i = 0; i < nr_active; i++)
		*kept += cached(fx->file, i);
	return stats(fx->cache).deactivated_folios;
}

static void test_low_seen_until_flush(void)
{
	unsigned int kept_live, kept_stale;
	uint64_t deact_live, deact_stale;
	struct fixture fx;

	setup(&fx);
	deact_live = low_then_once(&fx, &kept_live);
	teardown(&fx);
	T_CHECK(deact_live > 0 && kept_live > 0);

	setup_stats(&fx, 1000);
	deact_stale = low_then_once(&fx, &kept_stale);
	T_CHECK(deact_stale > deact_live && kept_stale < kept_live);
	/* A period on, the lists are seen as they are: no more deactivation. */
	read_folios(fx.file, 0, 4);	/* four active again: two uses... */
	read_folios(fx.file, 0, 4);
	fx.now_ns = 1000 * 1000000LL;
	deact_stale = stats(fx.cache).deactivated_folios;
	read_folios(fx.file, 4, 2 * CACHE_FOLIOS);
	T_CHECK(stats(fx.cache).deactivated_folios == deact_stale);
	T_CHECK(cached(fx.file, 0) && cached(fx.file, 3));
	teardown(&fx);
}

int main(void)
{
	test_scan_resistance();
	test_one_use_per_run();
	test_writes_are_no_use();
	test_deactivate_when_low();
	test_refault();
	test_write_no_refault();
	test_forced_deactivation();
	test_dirty_rotated_when_written();
	test_redirtied_not_rotated();
	test_unsynced_kept_inactive();
	test_refault_seen_after_flush();
	test_low_seen_until_flush();
	printf("ok\n");
	return T_EXIT_PASS;
}
