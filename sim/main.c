// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * main.c - the foliofs-sim command line.
 *
 *   foliofs-sim gen SPEC -o OUT        write a synthetic trace (gen.c)
 *   foliofs-sim dump TRACE             print a trace as text
 *   foliofs-sim TRACE [-o OPTS] [--stats-log FILE] [--compare OPTS...]
 *
 * A replay prints the stats of .foliofs/stats at its end and a summary;
 * --compare replays once per OPTS (each added to -o) and prints one
 * table.  The output depends only on the trace and the options; how fast
 * the replay ran goes to stderr.  Exit status: 0, 1 for a trace that
 * cannot be read or a replay that failed, 2 for a bad command line.
 */
#include "sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MS(ns) ((double)(ns) / 1e6)

static int usage(const char *why)
{
	if (why)
		fprintf(stderr, "foliofs-sim: %s\n", why);
	fprintf(stderr,
		"usage: foliofs-sim gen SPEC -o OUT\n"
		"       foliofs-sim dump TRACE\n"
		"       foliofs-sim TRACE [-o OPTIONS] [--load LIBRARY]... [--stats-log FILE]\n"
		"                   [--compare OPTIONS...]\n"
		"OPTIONS: the mount's (fault=, load=, account.PARAM= included), and the\n"
		"device model:\n"
		"  dev_bw=BYTES/S dev_lat_us=US dev_qd=N dev_flush_us=US\n"
		"--load LIBRARY: load a policy library (as -o load=) before every replay.\n"
		"  default dev_bw=%llu,dev_lat_us=%u,dev_qd=%u,dev_flush_us=%u: fitted by\n"
		"  contrib/fit-device.sh (fio, medians of 3 runs) to the virtio disk holding\n"
		"  /work on the machine foliofs is developed on, 2026-12-01; run it on yours.\n"
		"A replay gives each open of the trace (its records' open id; without one,\n"
		"each pid and file) its own readahead state, as each open file has on Linux.\n"
		"It prints the stats, a summary, the folios in the cache at the end by size\n"
		"(folio_sizes), those made in all (folios_made, reclaimed ones included) and\n"
		"the opens read through (opens).\n"
		"SPEC: name=value items separated by commas:\n"
		"  writers=N (1)  files=N (1; writer w uses file w mod N + 1)\n"
		"  file_size=SIZE (256M)  op=write|read (write)  io=SIZE (8K)\n"
		"  pattern=random|seq (random)  ops=N (100000, shared out)  fsync_every=K (0)\n"
		"  rate=N/s|closed (closed)  think_us=N  seed=N (1)\n"
		"  open=own|shared (own: each writer through an open of its own; shared:\n"
		"    all writers of a file through one)\n"
		"  warm=SIZE (0): before the ops, the first SIZE bytes of a file are read\n"
		"    sequentially, io bytes at a time\n"
		"  warm_by=N (0): who reads them: 0 a reader of its own (pid writers + 1,\n"
		"    one open per file, every file); N writer N, its own file, its own open\n"
		"  start_ms=N (0; 1000 with warm): when the ops begin\n",
		SIM_DEV_BW, SIM_DEV_LAT_US, SIM_DEV_QD, SIM_DEV_FLUSH_US);
	return 2;
}

static int cmd_gen(int argc, char **argv)
{
	char err[512] = "";

	if (argc != 4 || strcmp(argv[2], "-o") != 0)
		return usage("gen takes SPEC -o OUT");
	if (sim_gen(argv[1], argv[3], err, sizeof(err))) {
		fprintf(stderr, "foliofs-sim: gen: %s\n", err);
		return strchr(argv[1], '=') ? 1 : 2;
	}
	return 0;
}

static int cmd_dump(int argc, char **argv)
{
	struct trace_rec *recs;
	char err[512] = "";
	size_t nr;

	if (argc != 2)
		return usage("dump takes one TRACE");
	if (trace_load(argv[1], &recs, &nr, NULL, err, sizeof(err))) {
		fprintf(stderr, "foliofs-sim: %s\n", err);
		return 1;
	}
	printf("# time_ns dur_ns pid file op offset length flags open\n");
	for (size_t i = 0; i < nr; i++)
		printf("%llu %llu %u %u %s %llu %llu %u %llu\n", (unsigned long long)recs[i].time_ns,
		       (unsigned long long)recs[i].dur_ns, recs[i].pid, recs[i].file,
		       trace_op_name(recs[i].op), (unsigned long long)recs[i].offset,
		       (unsigned long long)recs[i].length, recs[i].flags,
		       (unsigned long long)recs[i].open);
	free(recs);
	return 0;
}

static void print_summary(const struct sim_result *r)
{
	printf("# summary: %llu ops in %.3f s of virtual time\n", (unsigned long long)r->ops,
	       (double)r->end_ns / 1e9);
	printf("# writer pid ops achieved_ops_s recorded_ops_s\n");
	for (uint32_t w = 0; w < r->nr_writers; w++)
		printf("writer %u %llu %.1f %.1f\n", r->writers[w].pid,
		       (unsigned long long)r->writers[w].ops, r->writers[w].achieved_ops_s,
		       r->writers[w].recorded_ops_s);
	printf("pauses %llu total_ms %.1f p50_ms %.3f p99_ms %.3f max_ms %.3f\n",
	       (unsigned long long)r->pauses, MS(r->pause_total_ns), MS(r->pause_p50_ns),
	       MS(r->pause_p99_ns), MS(r->pause_max_ns));
	printf("fsyncs %llu p50_ms %.3f p99_ms %.3f\n", (unsigned long long)r->fsyncs,
	       MS(r->fsync_p50_ns), MS(r->fsync_p99_ns));
	printf("reads %llu waited_ms %.1f p50_ms %.3f p99_ms %.3f\n", (unsigned long long)r->reads,
	       MS(r->read_total_ns), MS(r->read_p50_ns), MS(r->read_p99_ns));
	printf("errors write %llu read %llu fsync %llu\n", (unsigned long long)r->write_errors,
	       (unsigned long long)r->read_errors, (unsigned long long)r->fsync_errors);
	printf("pages_charged %llu pages_written %llu device_bytes %llu\n",
	       (unsigned long long)r->pages_charged, (unsigned long long)r->pages_written,
	       (unsigned long long)r->bytes_written);
	printf("peak_charged_bytes %llu peak_dirty_exact_bytes %llu peak_pinned_bytes %llu\n",
	       (unsigned long long)r->peak_charged, (unsigned long long)r->peak_dirty_exact,
	       (unsigned long long)r->peak_pinned);
	printf("folio_sizes");
	for (unsigned int o = 0; o < SIM_NR_ORDERS; o++)
		printf(" %uk %llu", 4u << o, (unsigned long long)r->folios_order[o]);
	printf("\nfolios_made");
	for (unsigned int o = 0; o < SIM_NR_ORDERS; o++)
		printf(" %uk %llu", 4u << o, (unsigned long long)r->folios_made_order[o]);
	printf("\nopens %llu\n", (unsigned long long)r->opens);
}

/* Total ops/s of all writers, achieved. */
static double total_ops_s(const struct sim_result *r)
{
	double sum = 0;

	for (uint32_t w = 0; w < r->nr_writers; w++)
		sum += r->writers[w].achieved_ops_s;
	return sum;
}

static void print_compare(char **names, const struct sim_result *res, int n)
{
	static const char *const rows[] = {
		"writers_ops_s", "virtual_s", "pauses", "pause_total_ms", "pause_p50_ms",
		"pause_p99_ms", "pause_max_ms", "fsync_p50_ms", "fsync_p99_ms", "read_p50_ms",
		"read_p99_ms", "op_errors", "pages_charged",
		"pages_written", "device_MiB", "peak_charged_MiB", "peak_dirty_exact_MiB",
		"peak_pinned_MiB", "folios_2M", "folios_2M_made", "opens",
	};

	printf("%-22s", "");
	for (int c = 0; c < n; c++)
		printf(" %28s", names[c]);
	printf("\n");
	for (size_t row = 0; row < sizeof(rows) / sizeof(rows[0]); row++) {
		printf("%-22s", rows[row]);
		for (int c = 0; c < n; c++) {
			const struct sim_result *r = &res[c];
			double v[] = {
				total_ops_s(r), (double)r->end_ns / 1e9, (double)r->pauses,
				MS(r->pause_total_ns), MS(r->pause_p50_ns), MS(r->pause_p99_ns),
				MS(r->pause_max_ns), MS(r->fsync_p50_ns), MS(r->fsync_p99_ns),
				MS(r->read_p50_ns), MS(r->read_p99_ns),
				(double)(r->write_errors + r->read_errors + r->fsync_errors),
				(double)r->pages_charged, (double)r->pages_written,
				(double)r->bytes_written / 1048576.0,
				(double)r->peak_charged / 1048576.0,
				(double)r->peak_dirty_exact / 1048576.0,
				(double)r->peak_pinned / 1048576.0,
				(double)r->folios_order[SIM_NR_ORDERS - 1],
				(double)r->folios_made_order[SIM_NR_ORDERS - 1], (double)r->opens,
			};

			printf(" %28.1f", v[row]);
		}
		printf("\n");
	}
}

/* @base and @extra joined by a comma (either may be empty); malloc'ed. */
static char *join_opts(const char *base, const char *extra)
{
	char *out;

	if (asprintf(&out, "%s%s%s", base, *base && *extra ? "," : "", extra) < 0)
		return NULL;
	return out;
}

static int cmd_replay(int argc, char **argv)
{
	const char *trace = NULL, *opts = "", *stats_log = NULL;
	char **cmp = NULL, err[1024] = "";
	struct sim_result *res;
	struct trace_rec *recs;
	int nr_cmp = 0, ret = 0, runs;
	size_t nr;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			opts = argv[++i];
		} else if (!strcmp(argv[i], "--stats-log") && i + 1 < argc) {
			stats_log = argv[++i];
		} else if (!strcmp(argv[i], "--load") && i + 1 < argc) {
			/* Checked as the mount checks it, for the user running the replay. */
			if (wb_policy_load(argv[++i], getuid(), err, sizeof(err))) {
				fprintf(stderr, "foliofs-sim: %s\n", err);
				return 2;
			}
		} else if (!strcmp(argv[i], "--compare")) {
			cmp = &argv[i + 1];
			nr_cmp = argc - i - 1;
			if (!nr_cmp)
				return usage("--compare needs at least one OPTIONS");
			break;
		} else if (argv[i][0] == '-' || trace) {
			fprintf(stderr, "foliofs-sim: %s: unknown argument\n", argv[i]);
			return usage(NULL);
		} else {
			trace = argv[i];
		}
	}
	if (!trace)
		return usage("no TRACE");
	if (stats_log && nr_cmp)
		return usage("--stats-log is for one replay, not --compare");
	if (trace_load(trace, &recs, &nr, NULL, err, sizeof(err))) {
		fprintf(stderr, "foliofs-sim: %s\n", err);
		return 1;
	}
	runs = nr_cmp ? nr_cmp : 1;
	res = calloc((size_t)runs, sizeof(*res));
	for (int c = 0; res && c < runs && !ret; c++) {
		char *o = join_opts(opts, nr_cmp ? cmp[c] : "");

		ret = o ? sim_replay(recs, nr, o, stats_log, &res[c], err, sizeof(err)) : -ENOMEM;
		if (!ret)
			fprintf(stderr, "foliofs-sim: replayed %zu records in %.2f s (%.0f records/s)%s%s\n",
				nr, res[c].replay_s, (double)nr / (res[c].replay_s > 0 ? res[c].replay_s : 1e-9),
				nr_cmp ? ": " : "", nr_cmp ? cmp[c] : "");
		free(o);
	}
	if (!res || ret) {
		fprintf(stderr, "foliofs-sim: %s\n", res ? err : "out of memory");
		ret = ret == -EINVAL ? 2 : 1;
	} else if (nr_cmp) {
		print_compare(cmp, res, nr_cmp);
	} else {
		fputs(res[0].stats, stdout);
		print_summary(&res[0]);
	}
	for (int c = 0; res && c < runs; c++)
		sim_result_free(&res[c]);
	free(res);
	free(recs);
	return ret;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))
		return usage(NULL) && argc >= 2 ? 0 : 2;
	if (!strcmp(argv[1], "gen"))
		return cmd_gen(argc - 1, argv + 1);
	if (!strcmp(argv[1], "dump"))
		return cmd_dump(argc - 1, argv + 1);
	return cmd_replay(argc, argv);
}
