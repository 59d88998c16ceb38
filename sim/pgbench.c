// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pgbench.c - a synthetic trace shaped like pgbench simple-update (-N) on
 * PostgreSQL: `foliofs-sim gen pgbench,KEY=VALUE,... -o OUT`.
 *
 * What PostgreSQL does to its files per transaction, as a model:
 *
 *   table      pgbench_accounts: scale x 100000 rows, floor(61 x
 *              fillfactor / 100) rows per 8 KiB page (61 at fillfactor
 *              100: 1640 pages, 12.8 MiB per scale unit), split into
 *              relation segment files of rel_seg bytes (1 GiB), as
 *              PostgreSQL splits every relation.
 *   index      pgbench_accounts_pkey (index=1): a metapage and a leaf per
 *              368 rows (int4 keys, btree fillfactor 90), in segment files
 *              of its own.  A transaction's lookup reads its row's leaf
 *              and, with probability idx_dirty percent, dirties it (hint
 *              bits: the recorded trace's checkpoint wrote 185 of the 187
 *              leaves its backends read); with data checksums on
 *              (hint_fpw=1, initdb's default since PostgreSQL 18, and the
 *              seed's --data-checksums) that first change since the
 *              checkpoint logs a full-page image.
 *   update     one row drawn uniformly, so one heap page.  shared_buffers is a
 *              pool of pool = shared_buffers / 8 KiB buffers holding a
 *              uniform random sample of the table (see "buffers" below): a
 *              page not in it is read (an 8 KiB pread of the backend's own
 *              open), and the buffer it takes is a victim's; a dirty
 *              victim is written first (an 8 KiB pwrite by the backend,
 *              as a backend's own eviction of a dirty buffer does).
 *   WAL        each transaction adds wal_rec bytes, and a full-page image
 *              (8 KiB) when it is the page's first change since the last
 *              checkpoint began (fpw=1).  Commits are flushed in groups of
 *              wal_group: the group's last client writes the WAL from the
 *              page the last flush ended in to the page the WAL now ends
 *              in (PostgreSQL rewrites the partial last page; 8 KiB
 *              aligned writes) and fdatasyncs it.  WAL lives in a ring of
 *              wal_files segment files of wal_seg bytes (recycled
 *              segments: no creates or renames).  wal_each=1: each
 *              client writes its own WAL bytes (unaligned) at its commit,
 *              and the group's last client only fdatasyncs: in a replay
 *              every commit then passes the throttle, as every commit
 *              of PostgreSQL waits for a WAL flush the throttle may hold
 *              (a trace has no waits between processes).
 *   history    each transaction appends a 50-byte row to pgbench_history;
 *              its filled pages are written by the checkpointer.
 *   checkpoint every checkpoint_s seconds the checkpointer writes every
 *              buffer dirty when it began, in file and block order (as
 *              PostgreSQL sorts them), spread evenly over ckpt_target
 *              percent of the interval, skipping those a backend evicted
 *              meanwhile, then the new history pages, then fsyncs every
 *              file it wrote.
 *   scan       scan=1: before each iteration (scan=2: the first only) one
 *              reader (a pid and open of
 *              its own) reads the whole table in order, scan_io bytes a
 *              read (PostgreSQL 17's read streams combine up to 128 KiB):
 *              the large-folio source under 6.17+ readahead.  The
 *              clients start scan_s seconds after it does; the first scan
 *              runs on an idle database (the checkpointer's schedule, a
 *              checkpoint in progress included, waits for the clients);
 *              later iterations' clients start gap_s after it (gap_s after
 *              it in the iterations after the first, whose scan finds
 *              the table cached).
 *
 * Buffers: the pool is not kept page by page (at scale 8470 it is 12.5
 * million buffers).  Three bitmaps of one bit per table page are kept
 * instead (2 MiB each at scale 8470): dirty (dirty in the pool), fpw
 * (changed since the checkpoint began) and ckpt (what the running
 * checkpoint writes), and a fourth, loaded, with cold=1.  A page whose
 * dirty bit is set is in the pool; one whose bit is clear is in it with
 * probability (pool - dirty) / (pages - dirty), the clean buffers spread
 * uniformly over the clean pages.  A victim is dirty with probability
 * dirty / pool, and then a dirty page drawn uniformly.  With cold=1 the
 * pool starts empty and fills with the pages read, without victims, until
 * it holds pool pages (the first transactions after a restart); cold=2
 * starts with the heap in it and the index out (after pgbench -i, which
 * builds the index without shared buffers).  Heap and index pages share
 * the pool and the bitmaps.
 *
 * Time: clients take turns, transaction n of an iteration at n / tps
 * seconds after its start, client n mod clients; each client's next
 * transaction is due clients / tps seconds after its last (a replay keeps
 * these as think times: a throttled client falls behind).  Iteration k's
 * clients are pids k x clients + 1 .. (k + 1) x clients, so a replay's
 * per-writer lines give each iteration's rate (with deadline=1, below, its
 * iteration lines do); the checkpointer and the scanners have the pids
 * after them.  stdout gets one line per iteration
 * (its pids, start and transactions per client) and the totals.
 *
 * warmup_s=N runs the model N seconds before the trace begins, writing
 * nothing: shared buffers start as dirty as a server's that ran that long.
 * txns=N sets an iteration's transactions instead of tps x duration;
 * deadline=1 makes iterations time-bounded, as pgbench -T: each client's
 * records of an iteration begin with a deadline record (trace.h) at the
 * iteration's start, of length duration, so that a replay stops the
 * client at start + duration, however far behind it is, and skips the
 * rest; the next iteration starts (gap_s after) at that deadline, not
 * when the last transaction was due.  A client gets one transaction more
 * than fits in the duration (txns_per_client()): one is due at or after
 * the deadline, so a replayed client never runs out before it.
 * end_ckpt=1 ends the trace with a CHECKPOINT (written at once).
 * ckpt_pace=1 (the default) starts the checkpointer's records with a pace
 * record (trace.h): a replay then issues its writes at their recorded
 * times, or at once when it is behind them, as PostgreSQL's checkpointer
 * sleeps between writes only while it is ahead of its schedule
 * (CheckpointWriteDelay; its schedule starts with each checkpoint, the
 * record's with the trace); ckpt_pace=0 keeps its recorded waits
 * whatever its lag, as for every other writer.
 *
 * autovacuum=1 adds PostgreSQL 15's autovacuum of the table (autovac.c,
 * the model in autovac.h): each transaction tells it which page and leaf
 * it updated (av_note_update()); before each transaction the worker's
 * checks and pages due are made (av_run_until()), as the checkpointer's
 * are; it asks the shared-buffers bitmaps whether a page is a hit (a miss
 * takes no victim: it is read into the worker's ring), dirties hits in
 * them, puts its WAL in the stream the clients flush, and the
 * checkpointer writes the visibility and free space maps it dirtied (two
 * files after the WAL's).  After the last transaction a vacuum that runs,
 * or that the next check starts, runs to its end (av_tail()).
 *
 * Memory: events are written as they are made (stdio's buffer); what is
 * kept is the bitmaps and a few counters, whatever the duration.
 */
#include "sim.h"
#include "autovac.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PG_PAGE 8192ull
#define PG_ROWS_PER_PAGE_FF100 61ull
#define PG_ROWS_PER_SCALE 100000ull
#define PG_HISTORY_ROW 50ull
/* pgbench_accounts_pkey: leaves of int4 keys at btree's fillfactor 90 */
#define PG_ROWS_PER_LEAF 368ull
#define NS_PER_S 1000000000ull

struct pg_spec {
	uint64_t clients, scale, fillfactor, tps, duration_s, iterations;
	uint64_t shared_buffers, checkpoint_s, ckpt_target, wal_rec, fpw, wal_group;
	uint64_t wal_seg, wal_files, rel_seg, scan, scan_io, scan_s, cold, seed;
	uint64_t txns, end_ckpt, warmup_s, gap_s, index, idx_dirty, hint_fpw, wal_each, deadline;
	uint64_t ckpt_pace;
	bool scan_s_set;
	/* autovacuum=1 (autovac.h): PostgreSQL 15's settings */
	uint64_t autovacuum, av_naptime, av_threshold, av_cost_limit, av_page_hit, av_page_miss;
	uint64_t av_page_dirty, av_ring;
	double av_scale, av_cost_delay_ms, av_hot;
};

struct pg_gen {
	struct pg_spec g;
	struct sim_sink *sink;
	/* warmup_s: the model runs from time 0 with nothing written (quiet)
	 * until t_base, and records are stamped t - t_base */
	bool quiet;
	uint64_t t_base;
	uint64_t rng;
	/*
	 * Page numbers: the heap's [0, heap_pages), then the index's
	 * [heap_pages, pages) (its metapage first); files: the heap's
	 * segments, the index's, history, WAL.
	 */
	uint64_t pages, heap_pages, rows, rows_per_page, pool, pages_per_seg;
	uint64_t nr_segs, heap_segs;
	uint32_t hist_file, wal_first_file;
	uint64_t *dirty, *fpw, *ckpt, *loaded;	/* one bit per page (av_bit_*(), autovac.h) */
	uint64_t nr_dirty, nr_loaded;
	/* WAL */
	uint64_t wal_pos, wal_flushed, in_group;
	uint64_t wal_base;		/* wal_pos when the trace began (after warmup_s) */
	/* history */
	uint64_t hist_bytes, hist_written;	/* appended; written by checkpoints (bytes) */
	/* the checkpointer */
	uint32_t ckpt_pid;
	uint64_t ckpt_next_ns;		/* the next checkpoint begins then */
	bool ckpt_running;
	uint64_t ckpt_start_ns, ckpt_step_ns, ckpt_pos, ckpt_i;
	uint8_t *seg_written;		/* per relation segment, and history */
	bool hist_seg_written;
	/* what was made */
	uint64_t txns, recs, reads, writes, wal_writes, syncs, ckpt_writes, scan_reads;
	uint64_t last_txn_ns;		/* the last transaction's time */
	/* autovacuum=1: the worker (pid after the scanners), the maps' files after the WAL's */
	struct av_state av;
	uint32_t av_pid, vm_file, fsm_file;
};

static int parse_item(struct pg_spec *g, const char *name, const char *val, char *err,
		      size_t errlen)
{
	static const struct { const char *name; size_t off; uint64_t min, max; } keys[] = {
#define K(n, lo, hi) { #n, offsetof(struct pg_spec, n), lo, hi }
		K(clients, 1, 65536), K(scale, 1, 1000000), K(fillfactor, 10, 100),
		K(tps, 1, 100000000), K(duration_s, 1, 1000000), K(iterations, 1, 1000),
		K(shared_buffers, 0, 1ull << 50), K(checkpoint_s, 1, 1000000),
		K(ckpt_target, 1, 100), K(wal_rec, 1, 1 << 20), K(fpw, 0, 1),
		K(wal_group, 0, 1 << 20), K(wal_seg, PG_PAGE, 1ull << 40),
		K(wal_files, 1, 1 << 16), K(rel_seg, PG_PAGE, 1ull << 40), K(scan, 0, 2),
		K(scan_io, PG_PAGE, 64u << 20), K(scan_s, 0, 1000000),
		K(seed, 0, UINT64_MAX), K(txns, 0, 1ull << 40), K(end_ckpt, 0, 1),
		K(warmup_s, 0, 1000000), K(gap_s, 0, 1000000), K(index, 0, 1),
		K(idx_dirty, 0, 100), K(hint_fpw, 0, 1), K(cold, 0, 2), K(wal_each, 0, 1),
		K(deadline, 0, 1), K(ckpt_pace, 0, 1), K(autovacuum, 0, 1),
		K(av_naptime, 1, 1000000), K(av_threshold, 0, INT32_MAX),
		K(av_cost_limit, 1, 10000), K(av_page_hit, 0, 10000), K(av_page_miss, 0, 10000),
		K(av_page_dirty, 0, 10000), K(av_ring, PG_PAGE, 1u << 30),
#undef K
	};
	static const struct { const char *name; size_t off; double min, max; } reals[] = {
		{ "av_scale", offsetof(struct pg_spec, av_scale), 0, 100 },
		{ "av_cost_delay", offsetof(struct pg_spec, av_cost_delay_ms), 0, 100 },
		{ "av_hot", offsetof(struct pg_spec, av_hot), 0, 1 },
	};

	for (size_t i = 0; i < sizeof(reals) / sizeof(reals[0]); i++)
		if (!strcmp(name, reals[i].name))
			return wb_parse_double(name, val, reals[i].min, reals[i].max,
					       (double *)((char *)g + reals[i].off), err, errlen);
	if (!strcmp(name, "duration"))
		name = "duration_s";
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strcmp(name, keys[i].name) != 0)
			continue;
		if (!strcmp(name, "scan_s"))
			g->scan_s_set = true;
		return wb_parse_size(name, val, keys[i].min, keys[i].max,
				     (uint64_t *)((char *)g + keys[i].off), err, errlen);
	}
	snprintf(err, errlen, "%s: unknown pgbench item (clients, scale, fillfactor, tps, "
		 "duration, iterations, shared_buffers, checkpoint_s, ckpt_target, wal_rec, "
		 "fpw, wal_group, wal_seg, wal_files, rel_seg, scan, scan_io, scan_s, cold, "
		 "seed, txns, end_ckpt, warmup_s, gap_s, index, idx_dirty, hint_fpw, wal_each, "
		 "deadline, ckpt_pace, autovacuum, av_naptime, av_threshold, av_scale, "
		 "av_cost_limit, av_cost_delay, av_page_hit, av_page_miss, av_page_dirty, av_hot, "
		 "av_ring)",
		 name);
	return -EINVAL;
}

static int parse_spec(const char *spec, struct pg_spec *g, char *err, size_t errlen)
{
	char *copy = strdup(spec), *save = NULL;
	int ret = 0;

	*g = (struct pg_spec){
		.clients = 1, .scale = 1, .fillfactor = 100, .tps = 1000, .duration_s = 10,
		.iterations = 1, .shared_buffers = 128u << 20, .checkpoint_s = 300,
		.ckpt_target = 90, .wal_rec = 300, .fpw = 1, .wal_seg = 16u << 20,
		.wal_files = 8, .rel_seg = 1u << 30, .scan = 0, .scan_io = 128u << 10, .seed = 1,
		.gap_s = 10, .index = 1, .idx_dirty = 100, .hint_fpw = 1, .ckpt_pace = 1,
		/* autovac.h's PostgreSQL 15 defaults (av_params_default()) */
		.av_naptime = 60, .av_threshold = 50, .av_scale = 0.2, .av_cost_limit = 200,
		.av_cost_delay_ms = 2, .av_page_hit = 1, .av_page_miss = 2, .av_page_dirty = 20,
		.av_hot = 0.979, .av_ring = 256u << 10,
	};
	if (!copy)
		return -ENOMEM;
	for (char *item = strtok_r(copy, ",", &save); item && !ret;
	     item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');

		if (!strcmp(item, "pgbench"))
			continue;
		if (!eq) {
			snprintf(err, errlen, "%s: expected name=value", item);
			ret = -EINVAL;
			break;
		}
		*eq = '\0';
		ret = parse_item(g, item, eq + 1, err, errlen);
	}
	free(copy);
	if (!ret && (g->wal_seg % PG_PAGE || g->rel_seg % PG_PAGE || g->scan_io % PG_PAGE ||
		     g->av_ring % PG_PAGE)) {
		snprintf(err, errlen, "wal_seg, rel_seg, scan_io and av_ring: multiples of 8K");
		ret = -EINVAL;
	}
	if (!ret && g->deadline && g->txns) {
		snprintf(err, errlen, "deadline=1 bounds an iteration by its duration: not with txns=");
		ret = -EINVAL;
	}
	if (!ret && g->clients * g->iterations + 3 + g->iterations > UINT32_MAX) {
		snprintf(err, errlen, "clients x iterations: too many pids");
		ret = -EINVAL;
	}
	return ret;
}

/* xorshift64: the same numbers from the same seed on every machine. */
static uint64_t pg_rand(struct pg_gen *p)
{
	p->rng ^= p->rng << 13;
	p->rng ^= p->rng >> 7;
	p->rng ^= p->rng << 17;
	return p->rng;
}

/* True with probability @num / @den (den > 0). */
static bool pg_chance(struct pg_gen *p, uint64_t num, uint64_t den)
{
	return (unsigned __int128)(pg_rand(p) >> 11) * den < (unsigned __int128)num << 53;
}

/* The bytes of a bitmap of one bit per page. */
static size_t bitmap_bytes(const struct pg_gen *p)
{
	return av_bit_words(p->pages) * sizeof(uint64_t);
}

static int emit(struct pg_gen *p, uint64_t t, uint32_t pid, uint32_t file, uint8_t op,
		uint64_t off, uint64_t len)
{
	struct trace_rec r = {
		.time_ns = t - p->t_base, .pid = pid, .file = file, .op = op, .offset = off, .length = len,
		/* every process opens each file once: an open id of its own */
		.open = op == TRACE_OP_CREATE ? 0 : ((uint64_t)pid << 20) + file,
	};

	if (p->quiet)
		return 0;
	p->recs++;
	return p->sink->put(p->sink, &r);
}

/* A line of the schedule to the sink's report (its prefix first), if it has one. */
static void __attribute__((format(printf, 2, 3))) report(const struct pg_gen *p,
							 const char *fmt, ...)
{
	va_list ap;

	if (!p->sink->report)
		return;
	fputs(p->sink->report_prefix ? p->sink->report_prefix : "", p->sink->report);
	va_start(ap, fmt);
	vfprintf(p->sink->report, fmt, ap);
	va_end(ap);
}

/* Page @page: its segment (0-based; file id + 1) and the offset in it (*@off). */
static uint64_t seg_of(const struct pg_gen *p, uint64_t page, uint64_t *off)
{
	uint64_t base = page < p->heap_pages ? 0 : p->heap_pages;
	uint64_t first = page < p->heap_pages ? 0 : p->heap_segs;

	*off = (page - base) % p->pages_per_seg * PG_PAGE;
	return first + (page - base) / p->pages_per_seg;
}

/* The pages of segment @s. */
static uint64_t seg_pages(const struct pg_gen *p, uint64_t s)
{
	bool heap = s < p->heap_segs;
	uint64_t n = heap ? p->heap_pages : p->pages - p->heap_pages;
	uint64_t i = heap ? s : s - p->heap_segs;
	uint64_t last = heap ? p->heap_segs - 1 : p->nr_segs - p->heap_segs - 1;

	return i == last ? n - i * p->pages_per_seg : p->pages_per_seg;
}

/* A read or write of page @page, 8 KiB. */
static int emit_page(struct pg_gen *p, uint64_t t, uint32_t pid, uint8_t op, uint64_t page)
{
	uint64_t off, s = seg_of(p, page, &off);

	return emit(p, t, pid, (uint32_t)(1 + s), op, off, PG_PAGE);
}

/* ---- the checkpointer ---- */

static void ckpt_begin(struct pg_gen *p)
{
	memcpy(p->ckpt, p->dirty, bitmap_bytes(p));
	memset(p->fpw, 0, bitmap_bytes(p));
	p->ckpt_running = true;
	p->ckpt_start_ns = p->ckpt_next_ns;
	p->ckpt_step_ns = p->g.checkpoint_s * NS_PER_S * p->g.ckpt_target / 100 /
			  (p->nr_dirty + 1);
	p->ckpt_pos = av_bit_next(p->ckpt, 0, p->pages);
	p->ckpt_i = 0;
	p->ckpt_next_ns += p->g.checkpoint_s * NS_PER_S;
	if (p->g.autovacuum)
		av_ckpt_begin(&p->av);
}

/* The end of a checkpoint at @t: history pages, then an fsync per file written. */
static int ckpt_end(struct pg_gen *p, uint64_t t)
{
	uint64_t full = p->hist_bytes / PG_PAGE * PG_PAGE;
	int ret = 0;

	for (uint64_t off = p->hist_written; off < full && !ret; off += PG_PAGE) {
		ret = emit(p, t, p->ckpt_pid, p->hist_file, TRACE_OP_WRITE, off, PG_PAGE);
		p->hist_seg_written = true;
	}
	p->hist_written = full > p->hist_written ? full : p->hist_written;
	if (!ret && p->g.autovacuum)	/* the visibility and free space maps, and their fsyncs */
		ret = av_ckpt_end(&p->av, t, p->ckpt_pid);
	for (uint64_t s = 0; s < p->nr_segs && !ret; s++) {
		if (!p->seg_written[s])
			continue;
		p->seg_written[s] = 0;
		ret = emit(p, t, p->ckpt_pid, (uint32_t)(1 + s), TRACE_OP_FSYNC, 0, 0);
		p->syncs++;
	}
	if (!ret && p->hist_seg_written) {
		p->hist_seg_written = false;
		ret = emit(p, t, p->ckpt_pid, p->hist_file, TRACE_OP_FSYNC, 0, 0);
		p->syncs++;
	}
	p->ckpt_running = false;
	return ret;
}

/* Everything the checkpointer does before @t, in time order. */
static int ckpt_until(struct pg_gen *p, uint64_t t)
{
	int ret = 0;

	while (!ret) {
		uint64_t at;

		if (!p->ckpt_running) {
			if (p->ckpt_next_ns > t)
				break;
			ckpt_begin(p);
			continue;
		}
		at = p->ckpt_start_ns + p->ckpt_i * p->ckpt_step_ns;
		if (at > t)
			break;
		if (p->ckpt_pos >= p->pages) {
			ret = ckpt_end(p, at);
			continue;
		}
		if (av_bit_test(p->dirty, p->ckpt_pos)) {
			av_bit_clear(p->dirty, p->ckpt_pos);
			p->nr_dirty--;
			uint64_t off;

			p->seg_written[seg_of(p, p->ckpt_pos, &off)] = 1;
			ret = emit_page(p, at, p->ckpt_pid, TRACE_OP_WRITE, p->ckpt_pos);
			p->ckpt_writes++;
			p->ckpt_i++;
		}
		p->ckpt_pos = av_bit_next(p->ckpt, p->ckpt_pos + 1, p->pages);
	}
	return ret;
}

/* end_ckpt=1: a CHECKPOINT at @t, written at once, as the SQL command does. */
static int end_checkpoint(struct pg_gen *p, uint64_t t)
{
	int ret = 0;

	if (!p->ckpt_running) {
		p->ckpt_next_ns = t;
		ckpt_begin(p);
	}
	p->ckpt_step_ns = 0;
	p->ckpt_start_ns = t;
	while (p->ckpt_running && !ret)
		ret = ckpt_until(p, t);
	return ret;
}

/* ---- a transaction ---- */

enum pg_lookup { PG_HIT, PG_MISS_FREE, PG_MISS_EVICT };

/*
 * Is @page in shared buffers?  A miss takes a free buffer while a cold
 * pool fills (cold=1), else a victim's.  @fill: the free buffer is taken,
 * the page counted as loaded (a client's read); not for the autovacuum
 * worker's, which goes to its ring and leaves the pool as it was.
 */
static enum pg_lookup buffer_lookup(struct pg_gen *p, uint64_t page, bool fill)
{
	if (av_bit_test(p->dirty, page))
		return PG_HIT;
	if (p->nr_loaded < p->pool) {	/* cold=1, still filling */
		if (av_bit_test(p->loaded, page))
			return PG_HIT;
		if (fill) {
			av_bit_set(p->loaded, page);
			p->nr_loaded++;
		}
		return PG_MISS_FREE;
	}
	if (p->pool >= p->pages)
		return PG_HIT;
	return pg_chance(p, p->pool - p->nr_dirty, p->pages - p->nr_dirty) ? PG_HIT
									   : PG_MISS_EVICT;
}

/* A buffer for a page read in: a victim's, written first when dirty. */
static int evict(struct pg_gen *p, uint64_t t, uint32_t pid)
{
	uint64_t v;

	if (!p->nr_dirty || !pg_chance(p, p->nr_dirty, p->pool))
		return 0;
	do
		v = pg_rand(p) % p->pages;
	while (!av_bit_test(p->dirty, v));
	av_bit_clear(p->dirty, v);
	p->nr_dirty--;
	p->writes++;
	return emit_page(p, t, pid, TRACE_OP_WRITE, v);
}

/* The WAL from the page of the last flush to the end, then an fdatasync. */
/* WAL bytes [@from, @to) written by @pid at @t, a write per segment they span. */
static int wal_write(struct pg_gen *p, uint64_t t, uint32_t pid, uint64_t from, uint64_t to)
{
	uint64_t ring = p->g.wal_seg * p->g.wal_files;
	int ret = 0;

	while (from < to && !ret) {
		uint64_t seg_off = from % p->g.wal_seg;
		uint64_t len = to - from < p->g.wal_seg - seg_off ? to - from : p->g.wal_seg - seg_off;
		uint32_t file = p->wal_first_file + (uint32_t)(from % ring / p->g.wal_seg);

		ret = emit(p, t, pid, file, TRACE_OP_WRITE, seg_off, len);
		p->wal_writes++;
		from += len;
	}
	return ret;
}

/* An fdatasync of each WAL segment [@from, @to) spans (@to > @from). */
static int wal_sync(struct pg_gen *p, uint64_t t, uint32_t pid, uint64_t from, uint64_t to)
{
	uint64_t ring = p->g.wal_seg * p->g.wal_files;
	int ret = 0;

	for (uint64_t seg = from / p->g.wal_seg; seg * p->g.wal_seg < to && !ret; seg++) {
		ret = emit(p, t, pid, p->wal_first_file + (uint32_t)(seg * p->g.wal_seg % ring /
								     p->g.wal_seg),
			   TRACE_OP_FDATASYNC, 0, 0);
		p->syncs++;
	}
	return ret;
}

/*
 * A group's flush by its last client: the WAL from the page of the last
 * flush to the end, in whole pages (wal_each=0; with wal_each=1 each
 * client wrote its own bytes already), then an fdatasync per segment.
 */
static int wal_flush(struct pg_gen *p, uint64_t t, uint32_t pid)
{
	uint64_t from = p->wal_flushed / PG_PAGE * PG_PAGE;
	uint64_t to = (p->wal_pos + PG_PAGE - 1) / PG_PAGE * PG_PAGE;
	int ret = 0;

	if (p->wal_pos == p->wal_flushed)
		return 0;
	if (!p->g.wal_each)
		ret = wal_write(p, t, pid, from, to);
	if (!ret)
		ret = wal_sync(p, t, pid, p->wal_flushed, p->wal_pos);
	p->wal_flushed = p->wal_pos;
	return ret;
}

/*
 * A change of page @page when full-page images are on for it (@on: fpw=1,
 * or hint_fpw=1 for a hint bit): its image (8 KiB) is logged when it is
 * the page's first change since the checkpoint began.  Returns the
 * image's bytes, 0 or PG_PAGE, already added to the WAL.
 */
static uint64_t wal_fpi(struct pg_gen *p, uint64_t page, bool on)
{
	if (!on || av_bit_test(p->fpw, page))
		return 0;
	av_bit_set(p->fpw, page);
	p->wal_pos += PG_PAGE;
	return PG_PAGE;
}

/*
 * Page @page is needed: read when not in shared buffers (a victim's buffer
 * written first when dirty), then dirtied when @dirty, with a full-page
 * image in the WAL when @fpw and its first change since the checkpoint.
 */
static int touch(struct pg_gen *p, uint64_t t, uint32_t pid, uint64_t page, bool dirty, bool fpw)
{
	enum pg_lookup l = buffer_lookup(p, page, true);
	int ret = 0;

	if (l != PG_HIT) {
		p->reads++;
		ret = emit_page(p, t, pid, TRACE_OP_READ, page);
		if (!ret && l == PG_MISS_EVICT)
			ret = evict(p, t, pid);
	}
	if (!dirty)
		return ret;
	if (!av_bit_test(p->dirty, page)) {
		av_bit_set(p->dirty, page);
		p->nr_dirty++;
	}
	wal_fpi(p, page, fpw);
	return ret;
}

/*
 * One transaction: the index leaf of a uniformly drawn row (index=1; set
 * dirty by hint bits with probability idx_dirty%, WAL-logged as a
 * full-page image with data checksums, hint_fpw=1), then its heap page
 * (updated), WAL, a history row, and the commit.
 */
static int txn(struct pg_gen *p, uint64_t t, uint32_t pid)
{
	uint64_t aid = pg_rand(p) % p->rows, wal_start = p->wal_pos;
	int ret = 0;

	if (p->g.index)
		ret = touch(p, t, pid, p->heap_pages + 1 + aid / PG_ROWS_PER_LEAF,
			    pg_chance(p, p->g.idx_dirty, 100), p->g.hint_fpw);
	if (!ret)
		ret = touch(p, t, pid, aid / p->rows_per_page, true, p->g.fpw);
	if (p->g.autovacuum && !av_note_update(&p->av, aid / p->rows_per_page,
					       1 + aid / PG_ROWS_PER_LEAF) && p->g.index) {
		/* not HOT: the new version's entry inserted in the leaf, logged */
		uint64_t leaf = p->heap_pages + 1 + aid / PG_ROWS_PER_LEAF;

		p->wal_pos += AV_WAL_BTINSERT;
		wal_fpi(p, leaf, p->g.fpw);
	}
	p->wal_pos += p->g.wal_rec;
	if (!ret && p->g.wal_each)
		ret = wal_write(p, t, pid, wal_start, p->wal_pos);
	p->hist_bytes += PG_HISTORY_ROW;
	p->txns++;
	if (!ret && ++p->in_group >= p->g.wal_group) {
		p->in_group = 0;
		ret = wal_flush(p, t, pid);
	}
	return ret;
}

/* ---- autovacuum=1: the worker's view of the model (autovac.h's ops) ---- */

/* A heap or index page of the worker: its number among the generator's pages. */
static uint64_t av_page(const struct pg_gen *p, enum av_rel rel, uint64_t page)
{
	return rel == AV_HEAP ? page : p->heap_pages + page;
}

/*
 * A miss takes no buffer of the pool, neither a victim's nor, while a
 * cold pool fills, a free one: it is read into the worker's ring, whose
 * buffers BAS_VACUUM reuses, so the page stays a miss for the clients.
 */
static bool av_lookup(void *ctx, enum av_rel rel, uint64_t page)
{
	return buffer_lookup(ctx, av_page(ctx, rel, page), false) == PG_HIT;
}

static bool av_is_dirty(void *ctx, enum av_rel rel, uint64_t page)
{
	struct pg_gen *p = ctx;

	return av_bit_test(p->dirty, av_page(p, rel, page));
}

/*
 * A hit made dirty was a clean buffer of the pool; a ring buffer left
 * dirty at the vacuum's end joins the pool dirty, unless the pool is all
 * dirty already (the model holds at most pool dirty pages; the few the
 * ring holds are then left out).
 */
static void av_set_dirty(void *ctx, enum av_rel rel, uint64_t page)
{
	struct pg_gen *p = ctx;
	uint64_t i = av_page(p, rel, page);

	if (!av_bit_test(p->dirty, i) && p->nr_dirty < p->pool) {
		av_bit_set(p->dirty, i);
		p->nr_dirty++;
	}
}

/* With data checksums (hint_fpw=1) a hint bit logs the page's first image since the checkpoint. */
static uint64_t av_hint(void *ctx, enum av_rel rel, uint64_t page)
{
	struct pg_gen *p = ctx;

	return wal_fpi(p, av_page(p, rel, page), p->g.hint_fpw);
}

static int av_io(void *ctx, uint64_t t, uint32_t pid, enum av_io op, enum av_rel rel,
		 uint64_t page)
{
	struct pg_gen *p = ctx;
	uint32_t file = rel == AV_VM ? p->vm_file : p->fsm_file;

	if (op == AV_SYNC) {
		p->syncs++;
		return emit(p, t, pid, file, TRACE_OP_FSYNC, 0, 0);
	}
	if (rel == AV_VM || rel == AV_FSM)
		return emit(p, t, pid, file, TRACE_OP_WRITE, page * PG_PAGE, PG_PAGE);
	return emit_page(p, t, pid, op == AV_READ ? TRACE_OP_READ : TRACE_OP_WRITE,
			 av_page(p, rel, page));
}

static uint64_t av_wal(void *ctx, enum av_rel rel, uint64_t page, uint64_t bytes, bool image)
{
	struct pg_gen *p = ctx;

	p->wal_pos += bytes;
	/* a map page is none of the bitmaps': autovac.c puts its image in @bytes (vm_logged) */
	if (rel == AV_HEAP || rel == AV_INDEX)
		bytes += wal_fpi(p, av_page(p, rel, page), image && p->g.fpw);
	return bytes;
}

static uint64_t av_wal_end(void *ctx)
{
	return ((struct pg_gen *)ctx)->wal_pos;
}

/* XLogFlush(): the worker writes and syncs the WAL when it is flushed to less than @lsn. */
static int av_wal_flush(void *ctx, uint64_t t, uint32_t pid, uint64_t lsn)
{
	struct pg_gen *p = ctx;
	int ret;

	if (p->wal_flushed >= lsn || p->wal_flushed == p->wal_pos)
		return 0;
	ret = wal_flush(p, t, pid);
	return ret ? ret : 1;
}

/* One line of the schedule per vacuum, as log_autovacuum_min_duration's. */
static void av_done(void *ctx, const struct av_state *av)
{
	const struct pg_gen *p = ctx;
	const struct av_vacuum *v = &av->last;

	if (p->quiet)
		return;
	report(p, "autovacuum %llu pid %u start_s %.3f end_s %.3f n_dead %llu heap_scanned %llu "
	       "heap_skipped %llu lpdead_pages %llu bypassed %d index_pages %llu heap_vacuumed %llu "
	       "hits %llu misses %llu dirtied %llu heap_reads %llu index_reads %llu "
	       "heap_writes %llu index_writes %llu wal_flushes %llu wal_bytes %llu wal_images %llu "
	       "sleeps %llu\n",
	       (unsigned long long)av->vacuums, av->pid,
	       (double)(v->start_ns - p->t_base) / NS_PER_S,
	       (double)(v->end_ns - p->t_base) / NS_PER_S, (unsigned long long)v->n_dead,
	       (unsigned long long)v->heap_scanned, (unsigned long long)v->heap_skipped,
	       (unsigned long long)v->lpdead_pages, v->bypassed,
	       (unsigned long long)v->index_pages, (unsigned long long)v->heap_vacuumed,
	       (unsigned long long)v->hits, (unsigned long long)v->misses,
	       (unsigned long long)v->dirtied, (unsigned long long)v->heap_reads,
	       (unsigned long long)v->index_reads, (unsigned long long)v->heap_writes,
	       (unsigned long long)v->index_writes, (unsigned long long)v->wal_flushes,
	       (unsigned long long)v->wal_bytes, (unsigned long long)v->wal_images,
	       (unsigned long long)v->sleeps);
}

static const struct av_ops pg_av_ops = {
	.lookup = av_lookup, .is_dirty = av_is_dirty, .set_dirty = av_set_dirty, .hint = av_hint,
	.io = av_io, .wal = av_wal, .wal_end = av_wal_end, .wal_flush = av_wal_flush, .vacuum_done = av_done,
};

static int av_setup(struct pg_gen *p)
{
	const struct pg_spec *g = &p->g;
	struct av_params prm;

	av_params_default(&prm);
	prm.naptime_ns = g->av_naptime * NS_PER_S;
	prm.threshold = g->av_threshold;
	prm.scale = g->av_scale;
	prm.cost_limit = g->av_cost_limit;
	prm.cost_delay_ns = (uint64_t)(g->av_cost_delay_ms * 1e6 + 0.5);
	prm.cost_hit = g->av_page_hit;
	prm.cost_miss = g->av_page_miss;
	prm.cost_dirty = g->av_page_dirty;
	prm.hot_ppm = (uint32_t)(g->av_hot * AV_PPM + 0.5);
	prm.ring = (uint32_t)(g->av_ring / PG_PAGE);
	p->av_pid = p->ckpt_pid + 1 + (uint32_t)g->iterations;
	p->vm_file = p->wal_first_file + (uint32_t)g->wal_files;
	p->fsm_file = p->vm_file + 1;
	/* room: a page holds 61 rows at fillfactor 100; pgbench -i fills it to rows_per_page */
	return av_init(&p->av, &prm, &pg_av_ops, p, p->av_pid, p->heap_pages,
		       p->pages - p->heap_pages, p->rows,
		       (uint8_t)(PG_ROWS_PER_PAGE_FF100 - p->rows_per_page));
}

/*
 * The checkpointer's and the worker's (autovacuum=1) records before @t,
 * merged in time order: the trace stays sorted by time.
 */
static int background_until(struct pg_gen *p, uint64_t t)
{
	int ret = 0;

	while (p->g.autovacuum && !ret && av_next_ns(&p->av) <= t) {
		uint64_t at = av_next_ns(&p->av);

		ret = ckpt_until(p, at);
		if (!ret)
			ret = av_run_until(&p->av, at);
	}
	return ret ? ret : ckpt_until(p, t);
}

/*
 * After the last transaction: a vacuum running, or one the next check
 * will start, runs to its end, the checkpointer beside it; *@t: then.
 */
static int av_tail(struct pg_gen *p, uint64_t *t)
{
	uint64_t at = p->av.in_vacuum ? *t : p->av.next_check_ns;
	int ret = 0;

	if (!p->av.in_vacuum && p->av.n_dead <= av_trigger(&p->av))
		return 0;
	do {
		ret = background_until(p, at);
		at += NS_PER_S / 10;
	} while (!ret && p->av.in_vacuum);
	if (p->av.vacuums && p->av.last.end_ns > *t)
		*t = p->av.last.end_ns;
	return ret;
}

/* ---- the run ---- */

static int scan(struct pg_gen *p, uint64_t t, uint32_t pid)
{
	int ret = 0;

	for (uint64_t s = 0; s < p->heap_segs && !ret; s++) {
		uint64_t seg_bytes = seg_pages(p, s) * PG_PAGE;

		for (uint64_t off = 0; off < seg_bytes && !ret; off += p->g.scan_io) {
			uint64_t len = seg_bytes - off < p->g.scan_io ? seg_bytes - off : p->g.scan_io;

			ret = emit(p, t, pid, (uint32_t)(1 + s), TRACE_OP_READ, off, len);
			p->scan_reads++;
		}
	}
	return ret;
}

/*
 * warmup_s: transactions at tps for warmup_s seconds, checkpoints
 * included, through the model only (nothing written, nothing counted):
 * shared buffers as dirty as they are after running that long.
 */
static int warmup(struct pg_gen *p, uint64_t *t)
{
	uint64_t n_all = p->g.tps * p->g.warmup_s;
	int ret = 0;

	p->quiet = true;
	for (uint64_t n = 0; n < n_all && !ret; n++) {
		uint64_t at = (uint64_t)((unsigned __int128)n * NS_PER_S / p->g.tps);

		ret = background_until(p, at);
		if (!ret)
			ret = txn(p, at, 1);
	}
	if (!ret)
		ret = ckpt_until(p, p->t_base - 1);
	p->quiet = false;
	*t = p->t_base;
	p->txns = p->reads = p->writes = p->wal_writes = p->syncs = p->ckpt_writes = 0;
	p->wal_base = p->wal_pos;
	/* the WAL a replay sees begins at the page the warm-up ended in */
	return ret;
}

/*
 * An iteration's transactions per client: txns / clients, or tps x
 * duration / clients; with deadline=1 enough that every client's last
 * one is due at or after the deadline (one round more than fits), so
 * that a replayed client, which never runs ahead of its recorded
 * schedule, cannot run out of transactions before the deadline.
 */
static uint64_t txns_per_client(const struct pg_spec *g)
{
	uint64_t all = g->txns ? g->txns : g->tps * g->duration_s;

	if (g->deadline)
		return (all + g->clients - 1) / g->clients + 1;
	return all / g->clients ? all / g->clients : 1;
}

static int create_files(struct pg_gen *p)
{
	uint64_t txns = txns_per_client(&p->g) * p->g.clients * p->g.iterations +
			p->g.tps * p->g.warmup_s;
	int ret = 0;

	for (uint64_t s = 0; s < p->nr_segs && !ret; s++)
		ret = emit(p, p->t_base, p->ckpt_pid, (uint32_t)(1 + s), TRACE_OP_CREATE, 0,
			   seg_pages(p, s) * PG_PAGE);
	if (!ret)
		ret = emit(p, p->t_base, p->ckpt_pid, p->hist_file, TRACE_OP_CREATE, 0,
			   (txns * PG_HISTORY_ROW + PG_PAGE - 1) / PG_PAGE * PG_PAGE);
	for (uint64_t w = 0; w < p->g.wal_files && !ret; w++)
		ret = emit(p, p->t_base, p->ckpt_pid, p->wal_first_file + (uint32_t)w, TRACE_OP_CREATE, 0,
			   p->g.wal_seg);
	if (!ret && p->g.autovacuum)
		ret = emit(p, p->t_base, p->ckpt_pid, p->vm_file, TRACE_OP_CREATE, 0,
			   p->av.vm_pages * PG_PAGE);
	if (!ret && p->g.autovacuum)
		ret = emit(p, p->t_base, p->ckpt_pid, p->fsm_file, TRACE_OP_CREATE, 0,
			   p->av.fsm_pages * PG_PAGE);
	return ret;
}

static int iteration(struct pg_gen *p, uint64_t k, uint64_t *t0)
{
	const struct pg_spec *g = &p->g;
	uint64_t per_client = txns_per_client(g);
	uint64_t start = *t0 + (g->scan ? (k ? g->gap_s : g->scan_s) * NS_PER_S : 0);
	uint32_t first_pid = (uint32_t)(k * g->clients + 1);
	char dl[48] = "";
	int ret = 0;

	ret = background_until(p, *t0);
	if (g->scan && (g->scan == 1 || !k) && !ret)
		ret = scan(p, *t0, (uint32_t)(p->ckpt_pid + 1 + k));
	/*
	 * The first scan runs on an idle database: the checkpointer's
	 * schedule (and a checkpoint in progress) resumes with the clients.
	 */
	if (g->scan && !k) {
		p->ckpt_next_ns += start - *t0;
		p->ckpt_start_ns += start - *t0;
	}
	if (g->deadline)
		snprintf(dl, sizeof(dl), " deadline_s %.3f",
			 (double)(start - p->t_base) / NS_PER_S + (double)g->duration_s);
	report(p, "iteration %llu pids %u-%llu start_s %.3f txns_per_client %llu%s\n",
	       (unsigned long long)k + 1, first_pid,
	       (unsigned long long)(first_pid + g->clients - 1),
	       (double)(start - p->t_base) / NS_PER_S, (unsigned long long)per_client, dl);
	/* deadline=1: each client's iteration ends duration seconds after it starts */
	for (uint64_t c = 0; g->deadline && c < g->clients && !ret; c++) {
		struct trace_rec r = {
			.time_ns = start - p->t_base, .pid = first_pid + (uint32_t)c,
			.op = TRACE_OP_DEADLINE, .length = g->duration_s * NS_PER_S,
		};

		p->recs++;
		ret = p->sink->put(p->sink, &r);
	}
	for (uint64_t n = 0; n < per_client * g->clients && !ret; n++) {
		uint64_t t = start + (uint64_t)((unsigned __int128)n * NS_PER_S / g->tps);

		ret = background_until(p, t);
		if (!ret)
			ret = txn(p, t, first_pid + (uint32_t)(n % g->clients));
		p->last_txn_ns = t;
	}
	if (g->deadline)	/* the next starts after this one's deadline */
		*t0 = start + g->duration_s * NS_PER_S;
	else
		*t0 = start + (uint64_t)((unsigned __int128)per_client * g->clients * NS_PER_S /
					 g->tps);
	return ret;
}

static int setup(struct pg_gen *p)
{
	struct pg_spec *g = &p->g;
	uint64_t idx_pages;
	int ret;

	p->rows = g->scale * PG_ROWS_PER_SCALE;
	p->rows_per_page = PG_ROWS_PER_PAGE_FF100 * g->fillfactor / 100;
	p->heap_pages = (p->rows + p->rows_per_page - 1) / p->rows_per_page;
	idx_pages = g->index ? 1 + (p->rows + PG_ROWS_PER_LEAF - 1) / PG_ROWS_PER_LEAF : 0;
	p->pages = p->heap_pages + idx_pages;
	p->pool = g->shared_buffers / PG_PAGE;
	p->pages_per_seg = g->rel_seg / PG_PAGE;
	p->heap_segs = (p->heap_pages + p->pages_per_seg - 1) / p->pages_per_seg;
	p->nr_segs = p->heap_segs + (idx_pages + p->pages_per_seg - 1) / p->pages_per_seg;
	if (p->nr_segs + 1 + g->wal_files >= UINT32_MAX)
		return -EINVAL;
	p->hist_file = (uint32_t)p->nr_segs + 1;
	p->wal_first_file = p->hist_file + 1;
	p->ckpt_pid = (uint32_t)(g->clients * g->iterations + 1);
	p->ckpt_next_ns = g->checkpoint_s * NS_PER_S;
	if (!g->wal_group)	/* auto: the commits of 0.5 ms share a flush */
		g->wal_group = (g->tps + 1999) / 2000;
	if (!g->scan_s_set)	/* a cold scan at 1 GB/s, whole seconds */
		g->scan_s = p->heap_pages * PG_PAGE / 1000000000 + 1;
	p->rng = (g->seed + 1) * 0x9e3779b97f4a7c15ull;
	if (!p->rng)
		p->rng = 1;
	p->dirty = calloc(1, bitmap_bytes(p));
	p->fpw = calloc(1, bitmap_bytes(p));
	p->ckpt = calloc(1, bitmap_bytes(p));
	if (g->cold)
		p->loaded = calloc(1, bitmap_bytes(p));
	p->seg_written = calloc(p->nr_segs, 1);
	if (!p->dirty || !p->fpw || !p->ckpt || (g->cold && !p->loaded) || !p->seg_written)
		return -ENOMEM;	/* the caller frees what was allocated */
	ret = g->autovacuum ? av_setup(p) : 0;
	/* A warm pool starts full, none of it dirty; cold=2: the heap is in it. */
	if (!g->cold)
		p->nr_loaded = p->pool;
	for (uint64_t i = 0; !ret && g->cold == 2 && i < p->heap_pages && p->nr_loaded < p->pool;
	     i++, p->nr_loaded++)
		av_bit_set(p->loaded, i);
	return ret;
}

/*
 * The state after the warm-up (warmup_s), which a replay's first pass
 * keeps for its feed's run of the same spec (struct sim_sink): 80 million
 * transactions through the model at the seed's 200,000 tps and 400 s,
 * about 7.6 s of CPU, are then made once and not twice.  What warmup()
 * changes is struct pg_gen and the arrays it points to, copied here whole;
 * not with autovacuum=1, whose worker (av) keeps arrays of its own: its
 * runs warm up each time.
 */
struct sim_gen_warm {
	char *spec;			/* NULL: nothing kept (yet) */
	struct pg_gen p;		/* after warmup(); its arrays are these: */
	uint64_t *dirty, *fpw, *ckpt, *loaded;
	uint8_t *seg_written;
};

struct sim_gen_warm *sim_gen_warm_new(void)
{
	return calloc(1, sizeof(struct sim_gen_warm));
}

static void warm_clear(struct sim_gen_warm *w)
{
	free(w->spec);
	free(w->dirty);
	free(w->fpw);
	free(w->ckpt);
	free(w->loaded);
	free(w->seg_written);
	*w = (struct sim_gen_warm){ .spec = NULL };
}

void sim_gen_warm_free(struct sim_gen_warm *w)
{
	if (!w)
		return;
	warm_clear(w);
	free(w);
}

static void *dup_bytes(const void *src, size_t len)
{
	void *dst = src ? malloc(len ? len : 1) : NULL;

	if (dst)
		memcpy(dst, src, len);
	return dst;
}

/* @p, just warmed up for @spec, into @w (may be NULL); out of memory: nothing kept. */
static void warm_save(const struct pg_gen *p, struct sim_gen_warm *w, const char *spec)
{
	if (!w || p->g.autovacuum)
		return;
	warm_clear(w);
	w->p = *p;
	w->p.sink = NULL;
	w->dirty = dup_bytes(p->dirty, bitmap_bytes(p));
	w->fpw = dup_bytes(p->fpw, bitmap_bytes(p));
	w->ckpt = dup_bytes(p->ckpt, bitmap_bytes(p));
	w->loaded = dup_bytes(p->loaded, bitmap_bytes(p));
	w->seg_written = dup_bytes(p->seg_written, p->nr_segs);
	w->spec = strdup(spec);
	if (!w->spec || !w->dirty || !w->fpw || !w->ckpt || !w->seg_written ||
	    (p->loaded && !w->loaded))
		warm_clear(w);
}

/*
 * @p, set up for @spec and not warmed up, as warmup() would leave it,
 * from @w (may be NULL): false when @w holds nothing for @spec.
 */
static bool warm_take(struct pg_gen *p, const struct sim_gen_warm *w, const char *spec)
{
	struct pg_gen own = *p;

	if (!w || !w->spec || strcmp(w->spec, spec) != 0 || p->g.autovacuum)
		return false;
	*p = w->p;
	p->sink = own.sink;
	p->dirty = own.dirty;
	p->fpw = own.fpw;
	p->ckpt = own.ckpt;
	p->loaded = own.loaded;
	p->seg_written = own.seg_written;
	memcpy(p->dirty, w->dirty, bitmap_bytes(p));
	memcpy(p->fpw, w->fpw, bitmap_bytes(p));
	memcpy(p->ckpt, w->ckpt, bitmap_bytes(p));
	if (p->loaded)
		memcpy(p->loaded, w->loaded, bitmap_bytes(p));
	memcpy(p->seg_written, w->seg_written, p->nr_segs);
	return true;
}

int sim_gen_pgbench(const char *spec, struct sim_sink *sink, char *err, size_t errlen)
{
	struct pg_gen p = { .sink = sink };
	uint64_t t = 0;
	int ret = parse_spec(spec, &p.g, err, errlen);

	if (ret)
		return ret;
	ret = setup(&p);
	if (ret) {
		snprintf(err, errlen, "%s", ret == -ENOMEM ? "out of memory" : "too many files");
		goto out_free;
	}
	ret = sink->begin ? sink->begin(sink, err, errlen) : 0;
	if (ret)
		goto out_free;
	report(&p, "pgbench table_pages %llu index_pages %llu pool_pages %llu wal_group %llu "
	       "scan_s %llu files %u\n", (unsigned long long)p.heap_pages,
	       (unsigned long long)(p.pages - p.heap_pages), (unsigned long long)p.pool,
	       (unsigned long long)p.g.wal_group, (unsigned long long)p.g.scan_s,
	       p.wal_first_file + (uint32_t)p.g.wal_files - 1 + (p.g.autovacuum ? 2u : 0u));
	if (p.g.autovacuum)
		report(&p, "autovacuum pid %u trigger %llu vm_pages %llu fsm_pages %llu\n", p.av_pid,
		       (unsigned long long)av_trigger(&p.av), (unsigned long long)p.av.vm_pages,
		       (unsigned long long)p.av.fsm_pages);
	p.t_base = p.g.warmup_s * NS_PER_S;
	if (p.g.ckpt_pace) {
		/* ckpt_pace=1: the checkpointer sleeps only while ahead of its schedule */
		struct trace_rec r = { .pid = p.ckpt_pid, .op = TRACE_OP_PACE };

		p.recs++;
		ret = sink->put(sink, &r);
	}
	if (!ret)
		ret = create_files(&p);
	if (!ret && p.g.warmup_s && warm_take(&p, sink->warm, spec)) {
		t = p.t_base;
	} else if (!ret && p.g.warmup_s) {
		ret = warmup(&p, &t);
		if (!ret)
			warm_save(&p, sink->warm_save, spec);
	}
	for (uint64_t k = 0; k < p.g.iterations && !ret; k++)
		ret = iteration(&p, k, &t);
	if (t < p.last_txn_ns)	/* deadline=1: the last round is due after the deadline */
		t = p.last_txn_ns;
	if (!ret && p.g.autovacuum)
		ret = av_tail(&p, &t);
	if (!ret && p.in_group)
		ret = wal_flush(&p, t, (uint32_t)(p.g.iterations * p.g.clients));
	if (!ret && p.g.end_ckpt)
		ret = end_checkpoint(&p, t);
	if (!ret && sink->end)
		ret = sink->end(sink);
	if (!ret)
		report(&p, "total txns %llu records %llu reads %llu evict_writes %llu wal_writes %llu "
		       "syncs %llu ckpt_writes %llu scan_reads %llu wal_bytes %llu\n",
		       (unsigned long long)p.txns, (unsigned long long)p.recs,
		       (unsigned long long)p.reads, (unsigned long long)p.writes,
		       (unsigned long long)p.wal_writes, (unsigned long long)p.syncs,
		       (unsigned long long)p.ckpt_writes, (unsigned long long)p.scan_reads,
		       (unsigned long long)(p.wal_pos - p.wal_base));
	if (!ret && p.g.autovacuum)
		report(&p, "autovacuum total vacuums %llu updates %llu hot %llu n_dead %llu\n",
		       (unsigned long long)p.av.vacuums, (unsigned long long)p.av.updates,
		       (unsigned long long)p.av.hot_updates, (unsigned long long)p.av.n_dead);
out_free:
	free(p.dirty);
	free(p.fpw);
	free(p.ckpt);
	free(p.loaded);
	free(p.seg_written);
	if (p.g.autovacuum)
		av_destroy(&p.av);
	return ret;
}
