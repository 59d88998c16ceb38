/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sim.h - foliofs-sim: a trace replayed through the mount's own
 * blockstate, accounting, throttle and flusher-decision code on a virtual
 * clock, against a modelled backing device.
 *
 *   main.c    the command line: gen, dump, replay, --compare
 *   sweep.c   sweep: many replays over a grid of options, on every core
 *   report.c  a replay's numbers by name (the CSV columns)
 *   gen.c     synthetic traces from a spec
 *   pgbench.c the pgbench simple-update generator (gen pgbench,...)
 *   autovac.c its autovacuum of pgbench_accounts (autovacuum=1; autovac.h)
 *   ../trace/ the trace format (trace.h), shared with the daemon
 *   engine.c  the replay: event loop, writers, flushers, device
 *   feed.c    the trace as a replay reads it: a first pass's tables, then
 *             each writer's records on demand (struct sim_trace, sim_feed)
 *   stream.c  a generator's records for the feed, made in process (--gen)
 *   opts.c    its options: the mount's (the option registry's rows) and its own
 */
#ifndef FOLIOFS_SIM_H
#define FOLIOFS_SIM_H

#include "trace.h"
#include "blockstate.h"
#include "writeback.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/*
 * The modelled backing device (-o dev_bw=,dev_lat_us=,dev_qd=,dev_flush_us=,
 * dev_iops=,dev_raid=,dev_stripe=).
 * Defaults: the disk holding /work on the machine foliofs is developed on,
 * fitted by contrib/fit-device.sh (fio, medians of 3 runs; see main.c's help).
 */
#define SIM_DEV_BW 1930279590ull
#define SIM_DEV_LAT_US 56
#define SIM_DEV_QD 5
#define SIM_DEV_FLUSH_US 121
/* The most I/Os dev_qd= lets the device have in flight. */
#define SIM_MAX_QD 1024

struct sim_dev_cfg {
	uint64_t bw;		/* bytes/s through the device */
	uint64_t lat_us;	/* per I/O, on top of the transfer */
	uint32_t qd;		/* I/Os in flight at most */
	uint64_t flush_us;	/* a cache flush (fdatasync), after the writes before it */
	/* The above per volume; dev_raid volumes in RAID 0 (1: one device). */
	uint32_t raid;		/* volumes, 1..SIM_MAX_RAID */
	uint64_t stripe;	/* bytes of a stripe piece (chunk) */
	uint64_t iops;		/* I/Os started a second at most per volume; 0: no limit */
};
#define SIM_MAX_RAID 256
#define SIM_DEV_STRIPE (512u << 10)	/* mdadm's default chunk */
/*
 * The modelled machine's memory (-o sim_mem=): what a replay's default
 * cache_size comes from (an eighth, as a mount takes of its host's).  A
 * fixed default, never this host's memory, so that a replay prints the
 * same bytes on every machine.  24 GiB: the machines foliofs is developed on.
 */
#define SIM_MEM_DEFAULT (24ull << 30)

/* Folio sizes the summary counts: 4 KiB << 0 .. 2 MiB (BS_NR_FOLIO_ORDERS). */
#define SIM_NR_ORDERS 10

/*
 * A replay's options (opts.c): the mount's cache and writeback settings,
 * parsed through the option registry (writeback/options.h) as the mount
 * parses them, and the simulator's own.  sim_config_free() frees what the
 * strings in wb point to.
 */
struct sim_config {
	struct bs_config bs;
	struct wb_config wb;
	struct sim_dev_cfg dev;
	bool sim_data;			/* -o sim_data=: 0, folios hold no memory */
	uint64_t feed_window;		/* -o sim_feed_window= (struct sim_feed) */
	uint64_t cache_size;		/* with sim_data=0: cache_size=, unbounded by RAM; 0: unset */
	uint64_t mem;			/* -o sim_mem=: the modelled machine's memory */
	bool cache_given;		/* cache_size= was given (else mem / 8) */
};
/* 0, or -errno with one line in @err (an unknown or bad option, ...). */
int sim_config_parse(const char *opts, struct sim_config *cfg, char *err, size_t errlen);
void sim_config_free(struct sim_config *cfg);

/* What one replay gives, for the summary and --compare. */
struct sim_result {
	char stats[16384];		/* wb_ctx_stats() at the end */
	double replay_s;		/* host CPU time of the replay */
	int64_t end_ns;			/* virtual time at the end */
	uint64_t ops;
	uint64_t pauses;		/* held writes */
	int64_t pause_total_ns, pause_p50_ns, pause_p99_ns, pause_max_ns;
	uint64_t fsyncs;
	int64_t fsync_p50_ns, fsync_p99_ns;
	uint64_t reads;			/* read ops, and the time they waited for the device */
	int64_t read_total_ns, read_p50_ns, read_p99_ns;
	/* ops that failed: writes (-ENOSPC: the cache full of pinned data),
	 * reads and fsyncs (an injected fault, -o fault=) */
	uint64_t write_errors, read_errors, fsync_errors;
	uint64_t pages_charged;		/* nr_dirtied */
	uint64_t pages_written;		/* nr_written */
	uint64_t bytes_written;		/* bytes the device wrote */
	uint64_t peak_charged;		/* bytes */
	uint64_t peak_dirty_exact;	/* bytes */
	uint64_t peak_pinned;		/* bytes */
	/* folios in the cache at the end, and made in all, by size: [0] 4 KiB ... [9] 2 MiB */
	uint64_t folios_order[SIM_NR_ORDERS];
	uint64_t folios_made_order[SIM_NR_ORDERS];
	uint64_t opens;			/* opens read through (readahead states) */
	uint64_t feed_peak;		/* records the feed held at most (struct sim_feed) */
	uint64_t feed_peak_mem;		/* of them in memory at most */
	uint64_t feed_spilled;		/* records it wrote to its spill file */
	uint64_t feed_spill_peak;	/* bytes of spill file at most */
	/* per writer: ops/s achieved and recorded */
	uint32_t nr_writers;
	struct sim_writer_result {
		uint32_t pid;
		uint64_t ops;
		double achieved_ops_s, recorded_ops_s;	/* ops: those issued (not skipped) */
	} *writers;
	/*
	 * Per iteration, for a trace with deadline records (trace.h), in the
	 * order their first deadline record was issued: its recorded start
	 * (virtual time: from the trace's first record) and length, when it
	 * started (writer_deadline(): after the iterations before it), the
	 * writers in it, the steps (transactions) their records have due
	 * before the deadline, those done by the deadline, those in flight
	 * at it (late: done after it, by overrun_ns at most), the rest
	 * skipped (due before it, not started by it: the writers' lag); dry:
	 * writers that ran out of records before it.
	 */
	uint32_t nr_iters;
	struct sim_iter_result {
		uint64_t rec_start_ns, length_ns;	/* recorded */
		int64_t start_ns;		/* when it started: at rec_start_ns or later */
		uint32_t active;		/* writers in it now */
		uint32_t writers;
		uint64_t steps, done, late, dry;
		int64_t overrun_ns;
	} *iters;
};

/*
 * A trace as a replay reads it (feed.c).  The replay streams: it never
 * holds the trace, only what it keeps of it.
 *
 * sim_trace_open() reads the trace once, checking every record as
 * trace_load() did, and keeps per file and per writer (never per record):
 * the files (ids, sorted: a file's index is its place here) with the size
 * the first record gives, the order they first appear in, the writers
 * (pids, sorted) with their op counts and recorded span, the first and
 * last record's time, the writers' long think times (gaps) and their
 * deadline records (marks).  Memory: about 40 bytes per file, 64 per
 * writer, 16 per gap and 32 per deadline record, whatever the trace's
 * length.  One sim_trace serves any number of replays (--compare,
 * a sweep's workers after fork), each through a sim_feed of its own.
 *
 * A gap is a think time longer than SIM_FEED_GAP_NS of recorded time
 * before a writer's op (a checkpointer between checkpoints, a writer
 * done with one phase).  A writer that finished an op needs its next
 * record only for the think time before it: with the gap known, the
 * record is read when the writer issues it, not SIM_FEED_GAP_NS or more
 * of trace ahead of every other writer.  Their number is bounded by the
 * trace's recorded length / SIM_FEED_GAP_NS per writer, and in practice
 * is a few per writer (none for pgbench's clients).
 */
#define SIM_FEED_GAP_NS 100000000ll		/* 100 ms */

struct sim_trace_file {
	uint32_t id;			/* in the trace */
	uint64_t size;			/* its first record's length if a create, else 0 */
};

struct sim_trace_gap {
	uint64_t op;			/* the writer's op it comes before (its index, >= 1) */
	int64_t think_ns;		/* next.time_ns - prev.time_ns - prev.dur_ns, as replayed */
};

/*
 * A deadline record (trace.h): the writer's op index of it, the
 * iteration's recorded start (its time_ns) and length, and the steps
 * (records with one time_ns; see trace.h) due before the deadline in the
 * writer's iteration it begins, which ends at the writer's next deadline
 * record or its end.  (A step due at or after it is never started: a
 * replayed writer is never ahead of its recorded schedule.)
 */
struct sim_trace_mark {
	uint64_t op;
	uint64_t time_ns, length_ns;
	uint64_t steps;
};

struct sim_trace_writer {
	uint32_t pid;
	uint64_t nr_ops;
	uint64_t first_ns;		/* time_ns of its first record */
	uint64_t end_ns;		/* time_ns + dur_ns of its last */
	size_t first_gap, nr_gaps;	/* its gaps: gaps[first_gap .. + nr_gaps), in op order */
	size_t first_mark, nr_marks;	/* its deadline records: marks[first_mark ..), op order */
};

/* uint32 -> index, open addressing (feed.c) */
struct sim_u32_map {
	uint32_t *keys, *vals;		/* vals[i] UINT32_MAX: slot i empty */
	size_t mask;			/* slots - 1, a power of two */
};

struct sim_trace {
	char *path;			/* the trace file, or "gen:SPEC" */
	char *gen_spec;			/* a trace made in process: the generator's spec; else NULL */
	struct sim_gen_warm *warm;	/* and its state after its warm-up, if kept (sim_sink) */
	uint64_t nr;			/* records */
	uint64_t first_ns, last_ns;	/* time_ns of the first and the last record */
	struct sim_trace_file *files;	/* sorted by id */
	size_t nr_files;
	uint32_t *file_order;		/* file indices in the order of their first record */
	struct sim_trace_writer *writers;	/* sorted by pid */
	size_t nr_writers;
	struct sim_trace_gap *gaps;	/* grouped by writer */
	size_t nr_gaps;
	struct sim_trace_mark *marks;	/* grouped by writer (32 bytes per deadline record) */
	size_t nr_marks;
	struct sim_u32_map pid_map, file_map;	/* pid -> writer, file id -> file */
};

/* Whether records of @op name a file (deadline and pace records do not: trace.h). */
static inline bool sim_op_names_file(unsigned int op)
{
	return op != TRACE_OP_DEADLINE && op != TRACE_OP_PACE;
}

/* The first pass over @path: 0, or -errno with one line in @err (as trace_load()'s). */
int sim_trace_open(const char *path, struct sim_trace **t, char *err, size_t errlen);
/*
 * The first pass over the records the generator of @spec makes
 * (sim_gen_run()), which are not kept: a replay's feed runs the
 * generator again (stream.c).  The generator's schedule goes to @report
 * (may be NULL), each line after @prefix.  0, or -errno with one line in
 * @err (-EINVAL: a bad spec).
 */
int sim_trace_gen(const char *spec, FILE *report, const char *prefix, struct sim_trace **t,
		  char *err, size_t errlen);
void sim_trace_close(struct sim_trace *t);

/*
 * One replay's reader (feed.c): one forward pass over the trace (or the
 * generator, for a trace made in process: stream.c), each record read
 * handed to its writer's queue (FIFO) until the writer that asked has
 * its next one.  Records wait in the queues from when the read passes
 * them to when their writer issues them: the trace between the writer
 * furthest behind its recorded schedule and the record the one furthest
 * ahead asked for, the spread of the writers' lags (a throttled writer
 * falls behind) plus up to SIM_FEED_GAP_NS of think time, times the
 * trace's record rate.  Not the trace's length, but without a bound of
 * its own: on the seed's pgbench scenario (about 333k records per second
 * of trace) the clients' lag alone is 5.6 M records at 10 x 30 s and
 * 10.5 M at 10 x 60 s with per-folio charging
 * (contrib/results/ckpt-pace-2026-12-05), and grows with the
 * iterations' length (a client lags up to an iteration behind).
 *
 * A queue is a FIFO of chunks of SIM_FEED_CHUNK bytes, each record
 * encoded in about 14 bytes (varints; each chunk's from zero, so that a
 * chunk is decoded, or skipped whole, on its own), about a fifth of the
 * 72-byte nodes queues held before.  The window (-o sim_feed_window=,
 * SIM_FEED_WINDOW records by default) bounds what is held in memory:
 * when the records in memory reach it, whole chunks (never one being
 * written or half read) are written to a spill file (unlinked, in
 * $TMPDIR or /var/tmp), writer after writer, until half the window is
 * left; a writer's chunk comes back into memory when it reaches it.  So
 * memory is the window plus a chunk or two per writer whatever the lags,
 * and the spill file holds the rest, each record written and read once.
 * Which chunks are spilled changes nothing a writer is given: a replay's
 * results do not depend on the window.
 */
#define SIM_FEED_WINDOW (4ull << 20)	/* records (about 14 bytes each) */
#define SIM_FEED_CHUNK 4096u		/* bytes of a queue's chunk, and a spill slot */

struct sim_gen_stream;
struct sim_gen_warm;

/* A chunk of a writer's queue: in memory (buf), or spilled (slot). */
struct sim_feed_chunk {
	uint32_t next;			/* the writer's next chunk (an index); UINT32_MAX: none */
	uint32_t nr;			/* records in it not yet taken */
	uint32_t len;			/* bytes encoded */
	uint32_t pos;			/* bytes taken (decoded) */
	uint32_t slot;			/* spilled: its slot in the spill file */
	unsigned char *buf;		/* in memory: SIM_FEED_CHUNK bytes; NULL: spilled */
};

struct sim_feed {
	const struct sim_trace *t;
	struct trace_reader rd;		/* the forward read of a trace file */
	struct sim_gen_stream *gen;	/* or of the generator (t->gen_spec) */
	uint64_t next;			/* the index of the record the forward read gives next */
	struct sim_feed_chunk *chunks;	/* [0, nr_chunks) made; the free ones from free_chunk */
	uint32_t nr_chunks, cap_chunks, free_chunk;
	unsigned char **bufs;		/* chunk buffers not in use */
	uint32_t nr_bufs, cap_bufs;
	struct sim_feed_queue {
		uint32_t head, tail;	/* chunks; UINT32_MAX: empty */
		uint64_t nr;		/* records queued (in memory or spilled) */
		uint64_t enc_time, enc_open;	/* the tail chunk's encoder: its last record's */
		uint64_t dec_time, dec_open;	/* the head chunk's decoder: likewise */
		size_t gap;		/* its next gap, an index into t->gaps */
		size_t gap_end;		/* the end of its gaps there */
		uint32_t pid;		/* the writer's (records are given with it) */
		uint64_t drop;		/* records of it to drop as the read passes them */
		bool done;		/* sim_feed_done(): its records are dropped */
	} *q;				/* per writer */
	uint64_t queued, peak_queued;	/* records in the queues, now and at most */
	uint64_t mem, peak_mem;		/* of them in memory, now and at most */
	uint64_t window;		/* records in memory; 0: no bound */
	uint64_t check_at;		/* records in memory that start the next spill round */
	/* the spill file: slots of SIM_FEED_CHUNK bytes, the free ones on a stack */
	int spill_fd;			/* -1: none yet */
	uint32_t nr_slots, *free_slots, nr_free_slots, cap_free_slots;
	uint32_t spill_at;		/* the writer to spill from first next time */
	uint64_t spilled, peak_spilled_chunks;	/* records spilled in all; chunks at once at most */
	uint64_t spilled_chunks;	/* chunks in the spill file now */
};

/* @window: records held in memory before chunks are spilled (0: never). */
int sim_feed_open(struct sim_feed *fd, const struct sim_trace *t, uint64_t window,
		  char *err, size_t errlen);
void sim_feed_close(struct sim_feed *fd);
/* Writer @w's next record, read on as far as needed: 0, or -errno with one line in @err. */
int sim_feed_next(struct sim_feed *fd, uint32_t w, struct trace_rec *rec, char *err, size_t errlen);
/*
 * Writer @w skips its next @n records (those it has not taken): the
 * queued ones are freed now (whole chunks undecoded), the others dropped
 * as the read passes them, so a skipped record is never kept.  Its gaps
 * before ops up to @resume_op (the op it resumes at, which it issues
 * without asking for a gap) are passed over.  0, or -errno with one line
 * in @err (the spill file).
 */
int sim_feed_skip(struct sim_feed *fd, uint32_t w, uint64_t n, uint64_t resume_op,
		  char *err, size_t errlen);
/* Writer @w has ended: what the feed holds for it goes, and its records are dropped. */
void sim_feed_done(struct sim_feed *fd, uint32_t w);
/* True with the think time before writer @w's op @op in *@think_ns when it is a gap. */
bool sim_feed_gap(struct sim_feed *fd, uint32_t w, uint64_t op, int64_t *think_ns);

/*
 * stream.c: a generator's records, in process: the generator of @spec
 * (sim_gen_run()) runs in a thread of its own, strictly in turn with
 * the caller (one of the two runs at a time: a replay still takes one
 * core), filling a batch of records the caller then takes one at a
 * time.  Nothing is printed.
 */
int sim_gen_stream_open(const char *spec, const struct sim_gen_warm *warm,
			struct sim_gen_stream **gs, char *err, size_t errlen);
/* The next record: 1, 0 at the end, or -errno with one line in @err. */
int sim_gen_stream_next(struct sim_gen_stream *gs, struct trace_rec *rec, char *err,
			size_t errlen);
/* Stops the generator where it is (it may not have ended) and frees it. */
void sim_gen_stream_close(struct sim_gen_stream *gs);

/*
 * Replay the trace @t with the mount options @opts (may be NULL) and the
 * device options among them; @stats_log: a JSON-lines file or NULL.
 * 0, or -errno with one line in @err (an unknown or bad option, ...).
 */
int sim_replay(const struct sim_trace *t, const char *opts, const char *stats_log,
	       struct sim_result *res, char *err, size_t errlen);
void sim_result_free(struct sim_result *res);

/*
 * Where a generator (gen.c, pgbench.c) puts its records: a trace file
 * (sim_gen()), a replay's first pass (sim_trace_gen()) or a replay's
 * feed (stream.c).  begin (may be NULL) is called once the spec is known
 * good, before the first record; put with each record in trace order;
 * end (may be NULL) after the last; each returns 0 or -errno, which ends
 * the generator with it.  report: where the generator prints its
 * schedule (pgbench's iteration lines and totals), each line after
 * report_prefix (may be NULL); NULL: nowhere.
 */
struct sim_sink {
	int (*begin)(struct sim_sink *sink, char *err, size_t errlen);
	int (*put)(struct sim_sink *sink, const struct trace_rec *rec);
	int (*end)(struct sim_sink *sink);
	FILE *report;
	const char *report_prefix;
	/*
	 * The generator's state after its warm-up (pgbench's warmup_s), for
	 * another run of the same spec: warm_save (may be NULL) gets it, and
	 * a run given warm (may be NULL) holding it starts from it instead of
	 * warming up: the same records either way.  A replay's first pass
	 * saves it (struct sim_trace's warm), its feeds take it (stream.c).
	 */
	struct sim_gen_warm *warm_save;
	const struct sim_gen_warm *warm;
};

/* An empty struct sim_gen_warm (NULL: out of memory), and its end. */
struct sim_gen_warm *sim_gen_warm_new(void);
void sim_gen_warm_free(struct sim_gen_warm *w);

/*
 * gen.c: the generator of @spec (gen.c's, or pgbench.c's when its first
 * item is "pgbench") into @sink: 0, or -errno with one line in @err
 * (-EINVAL: a bad spec, nothing given to the sink).  The same spec always
 * gives the same records.
 */
int sim_gen_run(const char *spec, struct sim_sink *sink, char *err, size_t errlen);
/* `foliofs-sim gen SPEC -o OUT`: the records into a trace file, the schedule to stdout. */
int sim_gen(const char *spec, const char *out_path, char *err, size_t errlen);
/* pgbench.c: SPEC "pgbench,KEY=VALUE,..." (sim_gen_run()). */
int sim_gen_pgbench(const char *spec, struct sim_sink *sink, char *err, size_t errlen);

/*
 * report.c: the CSV columns of a replay's results (names stable, only
 * ever added at the end) and RFC 4180 output; the version line.
 */
#define SIM_NR_COLS 25
void sim_result_values(const struct sim_result *r, double v[SIM_NR_COLS]);
/* @s as one CSV field: quoted when it holds a comma, quote or newline. */
void sim_csv_field(FILE *f, const char *s);
/* The result columns' names, and a row of values, comma-separated, no newline. */
void sim_csv_result_names(FILE *f);
void sim_csv_result_values(FILE *f, const double v[SIM_NR_COLS]);
/* The version line of every foliofs-sim command, "foliofs-sim VERSION". */
void sim_print_version(void);

/* sweep.c: `foliofs-sim sweep ...` (argv[0] is "sweep"); the exit status. */
int sim_sweep_main(int argc, char **argv);

#endif /* FOLIOFS_SIM_H */
