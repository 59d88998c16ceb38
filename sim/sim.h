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
 *   ../trace/ the trace format (trace.h), shared with the daemon
 *   engine.c  the replay: event loop, writers, flushers, device
 *   opts.c    its options, through the mount's parser
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

/* Folio sizes the summary counts: 4 KiB << 0 .. 2 MiB (BS_NR_FOLIO_ORDERS). */
#define SIM_NR_ORDERS 10

/*
 * A replay's options (opts.c): the mount's cache and writeback settings,
 * parsed by the mount's own parser, and the device's.  sim_config_free()
 * frees what the strings in wb point to.
 */
struct sim_config {
	struct bs_config bs;
	struct wb_config wb;
	struct sim_dev_cfg dev;
	bool no_data;			/* -o sim_data=0: folios hold no memory */
	uint64_t cache_size;		/* with sim_data=0: cache_size=, unbounded by RAM; 0: unset */
	void *priv;			/* the parser's configuration */
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
	/* per writer: ops/s achieved and recorded */
	uint32_t nr_writers;
	struct sim_writer_result {
		uint32_t pid;
		uint64_t ops;
		double achieved_ops_s, recorded_ops_s;
	} *writers;
};

/*
 * Replay @recs[0..nr) with the mount options @opts (may be NULL) and the
 * device options among them; @stats_log: a JSON-lines file or NULL.
 * 0, or -errno with one line in @err (an unknown or bad option, ...).
 */
int sim_replay(const struct trace_rec *recs, size_t nr, const char *opts, const char *stats_log,
	       struct sim_result *res, char *err, size_t errlen);
void sim_result_free(struct sim_result *res);

/* gen.c */
int sim_gen(const char *spec, const char *out_path, char *err, size_t errlen);
/* pgbench.c: SPEC "pgbench,KEY=VALUE,..."; prints its schedule to stdout. */
int sim_gen_pgbench(const char *spec, const char *out_path, char *err, size_t errlen);

/*
 * report.c: the CSV columns of a replay's results (names stable, only
 * ever added at the end) and RFC 4180 output.
 */
#define SIM_NR_COLS 25
void sim_result_values(const struct sim_result *r, double v[SIM_NR_COLS]);
/* @s as one CSV field: quoted when it holds a comma, quote or newline. */
void sim_csv_field(FILE *f, const char *s);
/* The result columns' names, and a row of values, comma-separated, no newline. */
void sim_csv_result_names(FILE *f);
void sim_csv_result_values(FILE *f, const double v[SIM_NR_COLS]);

/* sweep.c: `foliofs-sim sweep ...` (argv[0] is "sweep"); the exit status. */
int sim_sweep_main(int argc, char **argv);

/* main.c: the version line of every foliofs tool, "foliofs-sim VERSION". */
void sim_print_version(void);

#endif /* FOLIOFS_SIM_H */
