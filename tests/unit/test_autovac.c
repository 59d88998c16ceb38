// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_autovac.c - the pgbench generator's autovacuum model (sim/autovac.c)
 * against PostgreSQL 15's schedule, through a fake generator (struct
 * av_ops): every page a hit or every page a miss, no page dirty in
 * shared buffers, the WAL a counter.
 *
 * - trigger: the first naptime check after n_dead_tup passes 50 + 0.2 x
 *   reltuples starts the vacuum, for two update rates; n_dead_tup is the
 *   updates that were not HOT (the first on each full page, and 1 - hot
 *   of those with room) plus a pending HOT dead tuple per page updated;
 * - cost-based delay: limit 200 per 2 ms is 100,000 cost units a second:
 *   a scan that reads and dirties every page (and records its free
 *   space: a hit) runs at 100,000 / 23 pages a second all misses and
 *   100,000 / 22 all hits; the index pass over leaves it leaves alone at
 *   100,000 / 2 and 100,000 / 1;
 * - the visibility map: runs of at least 32 all-visible pages are
 *   skipped, shorter ones read, the last page always read, in block
 *   order;
 * - the ring: the worker writes each page it dirtied when the ring of 32
 *   comes round to it, and leaves the last 32 dirty in shared buffers;
 * - the index pass reads the whole index when dead items are on at least
 *   2% of the pages, and is bypassed below.
 */
#include "../../sim/autovac.h"
#include "test_helpers.h"

#include <math.h>
#include <string.h>

#define NS_PER_S 1000000000ull
#define NS_PER_MS 1000000ull

struct fake {
	bool hit;
	uint64_t reads, writes, syncs, heap_reads, index_reads, set_dirty;
	uint64_t first_ns, last_ns;
	uint64_t last_heap_read;	/* the last heap page read (+1; 0: none) */
	bool heap_in_order, writes_lag_ring;
	uint64_t wal_pos, wal_flushed, flushes;
};

static bool f_lookup(void *ctx, enum av_rel rel, uint64_t page)
{
	(void)rel;
	(void)page;
	return ((struct fake *)ctx)->hit;
}

static bool f_is_dirty(void *ctx, enum av_rel rel, uint64_t page)
{
	(void)ctx;
	(void)rel;
	(void)page;
	return false;
}

static void f_set_dirty(void *ctx, enum av_rel rel, uint64_t page)
{
	(void)rel;
	(void)page;
	((struct fake *)ctx)->set_dirty++;
}

static int f_io(void *ctx, uint64_t t, uint32_t pid, enum av_io op, enum av_rel rel, uint64_t page)
{
	struct fake *f = ctx;

	(void)pid;
	if (!f->reads && !f->writes)
		f->first_ns = t;
	f->last_ns = t;
	if (op == AV_SYNC) {
		f->syncs++;
	} else if (op == AV_READ) {
		f->reads++;
		if (rel == AV_HEAP) {
			f->heap_reads++;
			if (f->last_heap_read && page + 1 <= f->last_heap_read)
				f->heap_in_order = false;
			f->last_heap_read = page + 1;
		} else {
			f->index_reads++;
		}
	} else {
		f->writes++;
		/* the ring's page: read 32 reads before the one about to be read */
		if (rel == AV_HEAP && page + 1 + 31 != f->last_heap_read)
			f->writes_lag_ring = false;
	}
	return 0;
}

static uint64_t f_wal(void *ctx, enum av_rel rel, uint64_t page, uint64_t bytes, bool image)
{
	struct fake *f = ctx;

	(void)rel;
	(void)page;
	(void)image;
	f->wal_pos += bytes;
	return bytes;
}

static uint64_t f_wal_end(void *ctx)
{
	return ((struct fake *)ctx)->wal_pos;
}

static int f_wal_flush(void *ctx, uint64_t t, uint32_t pid, uint64_t lsn)
{
	struct fake *f = ctx;

	(void)t;
	(void)pid;
	if (f->wal_flushed >= lsn || f->wal_flushed == f->wal_pos)
		return 0;
	f->wal_flushed = f->wal_pos;
	f->flushes++;
	return 1;
}

static const struct av_ops fake_ops = {
	.lookup = f_lookup, .is_dirty = f_is_dirty, .set_dirty = f_set_dirty, .io = f_io,
	.wal = f_wal, .wal_end = f_wal_end, .wal_flush = f_wal_flush,
};

static void fake_init(struct fake *f, bool hit)
{
	*f = (struct fake){ .hit = hit, .heap_in_order = true, .writes_lag_ring = true };
}

/* Updates at @rate a second, page i % pages, until a vacuum begins: its start. */
static uint64_t start_at(uint32_t hot_ppm, uint64_t rate, uint64_t pages, uint8_t room,
			 uint64_t *updates)
{
	struct av_params prm;
	struct av_state av;
	struct fake f;
	uint64_t start = 0;

	av_params_default(&prm);
	prm.hot_ppm = hot_ppm;
	fake_init(&f, true);
	T_CHECK(!av_init(&av, &prm, &fake_ops, &f, 1, pages, pages / 10, 100000, room));
	T_CHECK(av_trigger(&av) == 20050);
	for (uint64_t i = 0; i < 3600 * rate && !av.in_vacuum; i++) {
		uint64_t t = i * NS_PER_S / rate;

		T_CHECK(!av_run_until(&av, t));
		if (av.in_vacuum) {
			start = av.cur.start_ns;
			*updates = i;
			break;
		}
		av_note_update(&av, i % pages, i % pages / 10 + 1);
	}
	T_CHECK(!start || av.cur.n_dead > 20050);
	av_destroy(&av);
	return start;
}

static void test_trigger(void)
{
	uint64_t n;

	/* no HOT update: a dead tuple each; 20,051 of them */
	T_CHECK(start_at(0, 1000, 1000, 7, &n) == 60 * NS_PER_S);	/* by 20.05 s */
	T_CHECK(n == 60000);
	T_CHECK(start_at(0, 100, 1000, 7, &n) == 240 * NS_PER_S);	/* by 200.5 s */
	/*
	 * Every update with room HOT: full pages (fillfactor 100) give each
	 * page one update that is not HOT, its first, then a pending HOT
	 * dead tuple each: at most 2 x 1000 dead tuples, never 20,051 in an
	 * hour.  With room for 7 (fillfactor 90), only the pending ones.
	 */
	T_CHECK(start_at(AV_PPM, 1000, 1000, 0, &n) == 0);
	T_CHECK(start_at(AV_PPM, 1000, 1000, 7, &n) == 0);
	/* but 100,000 full pages: 20,051 first updates by 20.05 s */
	T_CHECK(start_at(AV_PPM, 1000, 100000, 0, &n) == 60 * NS_PER_S);
	/*
	 * 95% of the updates with room HOT, 1000 full pages: the 1000 first
	 * updates, about 950 pending, and 5% of the others:
	 * 1950 + 0.05 x (U - 1000) > 20050 at U = 363,000, 363 s at
	 * 1000/s: the check at 420 s.
	 */
	T_CHECK(start_at(950000, 1000, 1000, 0, &n) == 420 * NS_PER_S);
}

/*
 * A vacuum of a table of @pages heap pages (an index of pages / 10)
 * where page p was updated (all HOT: nothing for the index) when
 * p % @every == 0; its numbers in *@v.
 */
static void scan(struct fake *f, uint64_t pages, uint64_t every, struct av_vacuum *v)
{
	struct av_params prm;
	struct av_state av;
	uint64_t t = 0;

	av_params_default(&prm);
	prm.hot_ppm = AV_PPM;
	prm.threshold = 0;
	prm.scale = 0;
	T_CHECK(!av_init(&av, &prm, &fake_ops, f, 1, pages, pages / 10, 100000, 1));
	for (uint64_t p = 0; p < pages; p += every)
		av_note_update(&av, p, 1);
	T_CHECK(!av_finish(&av, &t));
	T_CHECK(av.vacuums == 1);
	T_CHECK(av.last.start_ns == 60 * NS_PER_S);
	T_CHECK(t == av.last.end_ns);
	*v = av.last;
	av_destroy(&av);
}

/* Pages a second of a vacuum that scanned @pages. */
static double pages_per_s(const struct av_vacuum *v, uint64_t pages)
{
	return (double)pages / ((double)(v->end_ns - v->start_ns) / NS_PER_S);
}

static bool near(double got, double want)
{
	if (fabs(got - want) <= want * 0.005)
		return true;
	fprintf(stderr, "got %.1f, want %.1f\n", got, want);
	return false;
}

static void test_pacing(void)
{
	struct av_vacuum v;
	struct fake f;

	/*
	 * Every page updated: read and dirtied, its free space recorded (a
	 * hit on the map): 2 + 20 + 1 a miss, 1 + 20 + 1 a hit.
	 */
	fake_init(&f, false);
	scan(&f, 100000, 1, &v);
	T_CHECK(v.heap_scanned == 100000 && v.misses == 100000 && v.dirtied == 100000);
	T_CHECK(near(pages_per_s(&v, 100000), 100000.0 / 23));
	fake_init(&f, true);
	scan(&f, 100000, 1, &v);
	T_CHECK(v.hits == 200000 && v.reads == 0);
	T_CHECK(near(pages_per_s(&v, 100000), 100000.0 / 22));
	/*
	 * Every 16th page updated: runs of 15 all-visible pages, too short
	 * to skip, read and left alone but for the map: 16 pages cost
	 * 16 x (2 + 1) + 20 all misses, 16 x (1 + 1) + 20 all hits.
	 */
	fake_init(&f, false);
	scan(&f, 160000, 16, &v);
	T_CHECK(v.heap_scanned == 160000 && v.heap_skipped == 0 && v.dirtied == 10000);
	T_CHECK(near(pages_per_s(&v, 160000), 100000.0 * 16 / 68));
	fake_init(&f, true);
	scan(&f, 160000, 16, &v);
	T_CHECK(near(pages_per_s(&v, 160000), 100000.0 * 16 / 52));
	/* the sleeps: delay x balance / limit, the balance overshooting by a page */
	T_CHECK(v.sleeps > 0 && v.slept_ns >= v.sleeps * 2 * NS_PER_MS);
	T_CHECK(v.slept_ns <= v.sleeps * 2 * NS_PER_MS * 222 / 200);
}

/*
 * Run @av in steps of 1 ms until its vacuum ends: when the index pass
 * began (*@idx_ns) and when the heap vacuum pass did (*@vac_ns), 0 if not.
 */
static void run_phases(struct av_state *av, uint64_t *idx_ns, uint64_t *vac_ns)
{
	uint64_t vacuums = av->vacuums;

	*idx_ns = *vac_ns = 0;
	for (uint64_t t = 0; av->vacuums == vacuums; t += NS_PER_MS) {
		T_CHECK(t < 3600 * NS_PER_S);
		T_CHECK(!av_run_until(av, t));
		if (av->phase == AV_INDEX_SCAN && !*idx_ns)
			*idx_ns = t;
		if (av->phase == AV_HEAP_VACUUM && !*vac_ns)
			*vac_ns = t;
	}
}

/* A table of @pages pages, non-HOT updates on its first @updated, leaf 1. */
static void dead_items(struct fake *f, uint64_t pages, uint64_t idx_pages, uint64_t updated,
		       struct av_vacuum *v, uint64_t *idx_ns, uint64_t *vac_ns)
{
	struct av_params prm;
	struct av_state av;

	av_params_default(&prm);
	prm.hot_ppm = 0;
	prm.threshold = 0;
	prm.scale = 0;
	T_CHECK(!av_init(&av, &prm, &fake_ops, f, 1, pages, idx_pages, 100000, 0));
	for (uint64_t p = 0; p < updated; p++)
		av_note_update(&av, p, 1);
	run_phases(&av, idx_ns, vac_ns);
	*v = av.last;
	av_destroy(&av);
}

static void test_index_pass(void)
{
	uint64_t idx_ns, vac_ns;
	struct av_vacuum v;
	struct fake f;

	/*
	 * Dead items on 3% of the pages: the index pass reads the whole
	 * index (metapage included), then the heap vacuum pass the 30
	 * pages.  200,001 index pages left alone but one: 2 each, all
	 * misses: 50,000 pages a second.
	 */
	fake_init(&f, false);
	dead_items(&f, 1000, 200001, 30, &v, &idx_ns, &vac_ns);
	T_CHECK(!v.bypassed && v.lpdead_pages == 30);
	T_CHECK(v.index_pages == 200001 && v.index_reads == 200001);
	T_CHECK(v.heap_vacuumed == 30);
	T_CHECK(idx_ns && vac_ns > idx_ns);
	T_CHECK(near((double)200001 / ((double)(vac_ns - idx_ns) / NS_PER_S), 50000));
	/* all hits: 100,000 a second */
	fake_init(&f, true);
	dead_items(&f, 1000, 200001, 30, &v, &idx_ns, &vac_ns);
	T_CHECK(near((double)200001 / ((double)(vac_ns - idx_ns) / NS_PER_S), 100000));
	/* under 2% (19 of 1000 pages): both passes bypassed */
	fake_init(&f, false);
	dead_items(&f, 1000, 101, 19, &v, &idx_ns, &vac_ns);
	T_CHECK(v.bypassed && v.index_pages == 0 && v.heap_vacuumed == 0 && !idx_ns);
	T_CHECK(f.index_reads == 0);
	/* no index (pgbench,index=0): no index pass, straight to the heap's second */
	fake_init(&f, false);
	dead_items(&f, 1000, 0, 30, &v, &idx_ns, &vac_ns);
	T_CHECK(!v.bypassed && v.index_pages == 0 && v.heap_vacuumed == 30);
	T_CHECK(!idx_ns && vac_ns && f.index_reads == 0);
}

static void test_skip(void)
{
	struct av_params prm;
	struct av_state av;
	struct fake f;
	uint64_t t = 0;

	/*
	 * 10,000 pages; updated: 0-99, 5000-5009, 6000 and 6020 (the 19
	 * between are a run too short to skip), the rest all-visible:
	 * 100 + 10 + 2 + 19 + the last page read, in block order.
	 */
	av_params_default(&prm);
	prm.hot_ppm = AV_PPM;
	prm.threshold = 0;
	prm.scale = 0;
	fake_init(&f, false);
	T_CHECK(!av_init(&av, &prm, &fake_ops, &f, 1, 10000, 1000, 100000, 1));
	for (uint64_t p = 0; p < 100; p++)
		av_note_update(&av, p, 1);
	for (uint64_t p = 5000; p < 5010; p++)
		av_note_update(&av, p, 1);
	av_note_update(&av, 6000, 1);
	av_note_update(&av, 6020, 1);
	T_CHECK(!av_finish(&av, &t));
	T_CHECK(av.last.heap_scanned == 132 && av.last.heap_skipped == 10000 - 132);
	T_CHECK(f.heap_reads == 132 && f.heap_in_order && f.last_heap_read == 10000);
	/* only the updated pages were dirtied; none is left not all-visible */
	T_CHECK(av.last.dirtied == 112);
	/* a second vacuum, nothing updated since: no trigger, nothing read */
	av.n_dead = 1;
	fake_init(&f, false);
	T_CHECK(!av_finish(&av, &t));
	T_CHECK(av.vacuums == 2 && av.last.heap_scanned == 1 && f.heap_reads == 1);
	av_destroy(&av);
}

static void test_ring(void)
{
	struct av_vacuum v;
	struct fake f;

	/*
	 * Every page read and dirtied: the worker writes page k - 32 before
	 * reading page k, flushing the WAL first when the page's change was
	 * logged (pruned pages), and leaves the last 32 dirty.
	 */
	fake_init(&f, false);
	scan(&f, 1000, 1, &v);
	T_CHECK(v.writes == 1000 - 32 && f.writes == 1000 - 32 && f.writes_lag_ring);
	T_CHECK(f.set_dirty == 32);
	T_CHECK(v.wal_flushes > 0 && v.wal_flushes <= 1000 / 32 + 2);
	/* hits are not read into the ring: nothing written by the worker */
	fake_init(&f, true);
	scan(&f, 1000, 1, &v);
	T_CHECK(v.writes == 0 && f.set_dirty == 1000);
}

int main(void)
{
	test_trigger();
	test_pacing();
	test_index_pass();
	test_skip();
	test_ring();
	return T_EXIT_PASS;
}
