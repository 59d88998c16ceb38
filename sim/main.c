// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * main.c - the foliofs-sim command line.
 *
 *   foliofs-sim gen SPEC -o OUT        write a synthetic trace (gen.c)
 *   foliofs-sim dump TRACE             print a trace as text
 *   foliofs-sim sweep ...              many replays on every core (sweep.c)
 *   foliofs-sim TRACE [-o OPTS] [--load LIB]... [--stats-log FILE]
 *               [--compare [--csv] OPTS...]
 *   foliofs-sim --gen SPEC [...]       the same, of gen SPEC's trace made in
 *                                      process (no file; stream.c)
 *
 * Options may stand anywhere after the command (getopt_long permutes);
 * the command is the first argument.  A replay prints the stats of
 * .foliofs/stats at its end and a summary; --compare replays once per
 * OPTS (each added to -o) and prints one table, or with --csv one CSV row
 * per OPTS (report.c's columns).  The output depends only on the trace and
 * the options; how fast the replay ran goes to stderr.  Exit status: 0, 1
 * for a trace that cannot be read or a replay that failed, 2 for a bad
 * command line or a library --load refused.
 */
#include "sim.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MS(ns) ((double)(ns) / 1e6)

static void help(FILE *f)
{
	fprintf(f,
		"usage: foliofs-sim gen SPEC -o OUT\n"
		"       foliofs-sim dump TRACE\n"
		"       foliofs-sim TRACE [-o OPTIONS] [--load LIBRARY]... [--stats-log FILE]\n"
		"       foliofs-sim TRACE [-o OPTIONS] [--load LIBRARY]... --compare [--csv]\n"
		"                   OPTIONS...\n"
		"       foliofs-sim --gen SPEC [-o OPTIONS] [...]: replay gen SPEC's trace\n"
		"                   made in process, without a file\n"
		"       foliofs-sim sweep [-o OPTIONS] [-a KEY=V1,V2...]... [-c OPTIONS]...\n"
		"                         [-j N] [--csv FILE] [--plot PNG] TRACE...\n"
		"       foliofs-sim sweep ... --jobs | parallel > PIECES\n"
		"       foliofs-sim sweep ... --merge PIECES [--csv FILE] [--plot PNG]\n"
		"Options may stand anywhere after the command.\n"
		"  -o, --options OPTIONS  the mount's options for the replay\n"
		"  --load LIBRARY         load a policy library (as -o load=) before the\n"
		"                         replays; repeatable\n"
		"  --stats-log FILE       the stats as JSON lines, as a mount's stats log\n"
		"  --compare              replay once per OPTIONS after TRACE (each added to -o),\n"
		"                         print one table\n"
		"  --csv                  with --compare: one CSV row per OPTIONS, a header first\n"
		"  --gen SPEC             instead of TRACE: the trace gen SPEC -o FILE would\n"
		"                         write, made as the replay reads it (the same\n"
		"                         replay; the generator's schedule to stderr)\n"
		"  -h, --help             this help; -V, --version  the version\n"
		"sweep (foliofs-sim sweep --help for all of it): replays every configuration\n"
		"  of a grid of axes -a KEY=V1,V2,... crossed (or a list of -c OPTIONS, or\n"
		"  both) over every TRACE, a worker per core, and writes one CSV row per\n"
		"  run; --plot draws paused time against peak pinned memory with the\n"
		"  Pareto-optimal configurations marked.\n"
		"OPTIONS: the mount's (fault=, load=, account.PARAM=, size.PARAM=,\n"
		"  throttle.PARAM= included), and the device model:\n"
		"  dev_bw=BYTES/S dev_lat_us=US dev_qd=N dev_flush_us=US dev_iops=N (0: no\n"
		"  limit), per volume; dev_raid=N volumes in RAID 0 (1), dev_stripe=SIZE\n"
		"  (512K); sim_data=0: folios hold no memory, and cache_size may exceed\n"
		"  this machine's (a modelled machine's page cache); sim_mem=SIZE the\n"
		"  modelled machine's memory, whose eighth is the default cache_size (24G,\n"
		"  never this host's: a replay prints the same on every machine);\n"
		"  sim_feed_window=N\n"
		"  records read ahead held in memory before chunks of them are spilled to\n"
		"  a file in $TMPDIR or /var/tmp (%llu; 0: no bound)\n"
		"  default dev_bw=%llu,dev_lat_us=%u,dev_qd=%u,dev_flush_us=%u: fitted by\n"
		"  contrib/sim/fit-device.sh (fio, medians of 3 runs) to the virtio disk\n"
		"  holding /work on the machine foliofs is developed on, 2026-12-01; run it\n"
		"  on yours.\n"
		"A replay gives each open of the trace (its records' open id; without one,\n"
		"each pid and file) its own readahead state, as each open file has on Linux.\n"
		"It prints the stats, a summary, the folios in the cache at the end by size\n"
		"(folio_sizes), those made in all (folios_made, reclaimed ones included) and\n"
		"the opens read through (opens).\n"
		"SPEC: name=value items separated by commas (SIZE: K, M, G, T suffixes):\n"
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
		"  start_ms=N (0; 1000 with warm): when the ops begin\n"
		"SPEC pgbench,KEY=VALUE,...: pgbench simple-update on PostgreSQL, streamed\n"
		"  (foliofs-sim(1), PGBENCH KEYS): clients= scale= fillfactor= tps=\n"
		"  duration= iterations= txns= shared_buffers= checkpoint_s= ckpt_target=\n"
		"  wal_rec= fpw= wal_group= wal_seg= wal_files= rel_seg= scan= scan_io=\n"
		"  scan_s= gap_s= cold= warmup_s= end_ckpt= index= idx_dirty= hint_fpw=\n"
		"  wal_each= seed= deadline= ckpt_pace=; prints its schedule\n",
		SIM_FEED_WINDOW, SIM_DEV_BW, SIM_DEV_LAT_US, SIM_DEV_QD, SIM_DEV_FLUSH_US);
}

/* A bad command line: one line, exit status 2. */
static int usage(const char *fmt, const char *arg)
{
	fputs("foliofs-sim: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs(" (see foliofs-sim --help)\n", stderr);
	return 2;
}

/* getopt_long's complaint about argv[optind - 1]: 2. */
static int bad_option(int c, char **argv)
{
	return usage(c == ':' ? "%s: needs a value" : "%s: unknown option", argv[optind - 1]);
}

static int cmd_gen(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL;
	char err[512] = "";
	int c, ret;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:hV", longopts, NULL)) != -1) {
		if (c == 'o') {
			out = optarg;
		} else if (c == 'h' || c == 'V') {
			c == 'h' ? help(stdout) : sim_print_version();
			return 0;
		} else {
			return bad_option(c, argv);
		}
	}
	if (!out || optind != argc - 1)
		return usage("%s takes SPEC -o OUT", "gen");
	ret = sim_gen(argv[optind], out, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "foliofs-sim: gen: %s\n", err);
		/* -EINVAL: the spec (a bad command line); else writing @out failed. */
		return ret == -EINVAL ? 2 : 1;
	}
	return 0;
}

static int cmd_dump(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct trace_reader rd;
	struct trace_rec r;
	char err[512] = "";
	int c, ret;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hV", longopts, NULL)) != -1) {
		if (c == 'h' || c == 'V') {
			c == 'h' ? help(stdout) : sim_print_version();
			return 0;
		}
		return bad_option(c, argv);
	}
	if (optind != argc - 1)
		return usage("%s takes one TRACE", "dump");
	/* Streamed, twice: a bad trace prints nothing but its error. */
	if (trace_reader_open(&rd, argv[optind], err, sizeof(err))) {
		fprintf(stderr, "foliofs-sim: %s\n", err);
		return 1;
	}
	while ((ret = trace_reader_next(&rd, &r, err, sizeof(err))) == 1)
		;
	if (!ret)
		ret = trace_reader_rewind(&rd, err, sizeof(err));
	if (!ret) {
		printf("# time_ns dur_ns pid file op offset length flags open\n");
		ret = 1;
	}
	while (ret == 1 && (ret = trace_reader_next(&rd, &r, err, sizeof(err))) == 1)
		printf("%llu %llu %u %u %s %llu %llu %u %llu\n", (unsigned long long)r.time_ns,
		       (unsigned long long)r.dur_ns, r.pid, r.file, trace_op_name(r.op),
		       (unsigned long long)r.offset, (unsigned long long)r.length, r.flags,
		       (unsigned long long)r.open);
	trace_reader_close(&rd);
	if (ret) {
		fprintf(stderr, "foliofs-sim: %s\n", err);
		return 1;
	}
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
	if (r->nr_iters)
		printf("# iteration n start_s length_s writers txns_done txns_late txns_skipped "
		       "dry tps overrun_ms\n");
	for (uint32_t i = 0; i < r->nr_iters; i++) {
		const struct sim_iter_result *it = &r->iters[i];
		double len = (double)it->length_ns / 1e9;

		printf("iteration %u %.3f %.3f %u %llu %llu %llu %llu %.1f %.3f\n", i + 1,
		       (double)it->start_ns / 1e9, len, it->writers, (unsigned long long)it->done,
		       (unsigned long long)it->late,
		       (unsigned long long)(it->steps - it->done - it->late),
		       (unsigned long long)it->dry, len > 0 ? (double)it->done / len : 0,
		       MS(it->overrun_ns));
	}
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

/* --compare's table: one row per name, counts as integers, the rest with one decimal. */
static void print_compare(char **names, const struct sim_result *res, int n)
{
	static const struct { const char *name; bool count; } rows[] = {
		{ "writers_ops_s", false }, { "virtual_s", false }, { "pauses", true },
		{ "pause_total_ms", false }, { "pause_p50_ms", false }, { "pause_p99_ms", false },
		{ "pause_max_ms", false }, { "fsync_p50_ms", false }, { "fsync_p99_ms", false },
		{ "read_p50_ms", false }, { "read_p99_ms", false }, { "op_errors", true },
		{ "pages_charged", true }, { "pages_written", true }, { "device_MiB", false },
		{ "peak_charged_MiB", false }, { "peak_dirty_exact_MiB", false },
		{ "peak_pinned_MiB", false }, { "folios_2M", true }, { "folios_2M_made", true },
		{ "opens", true },
	};

	printf("%-22s", "");
	for (int c = 0; c < n; c++)
		printf(" %28s", names[c]);
	printf("\n");
	for (size_t row = 0; row < sizeof(rows) / sizeof(rows[0]); row++) {
		printf("%-22s", rows[row].name);
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

			/* Counts are below 2^53, where a double holds them exactly. */
			printf(rows[row].count ? " %28.0f" : " %28.1f", v[row]);
		}
		printf("\n");
	}
}

/*
 * --compare --csv: a header, then one row per OPTIONS, in the order given:
 * "config" (the OPTIONS as given, quoted where it holds a comma), then
 * report.c's columns.
 */
static void print_compare_csv(char **names, const struct sim_result *res, int n)
{
	double v[SIM_NR_COLS];

	fputs("config,", stdout);
	sim_csv_result_names(stdout);
	putchar('\n');
	for (int c = 0; c < n; c++) {
		sim_csv_field(stdout, names[c]);
		putchar(',');
		sim_result_values(&res[c], v);
		sim_csv_result_values(stdout, v);
		putchar('\n');
	}
}

/* ", N spilled (M MiB of file at most)" when the feed spilled any, else "". */
static const char *spilled(const struct sim_result *r, char *buf, size_t len)
{
	if (!r->feed_spilled)
		return "";
	snprintf(buf, len, " (%llu in memory), %llu spilled (%.1f MiB of file at most)",
		 (unsigned long long)r->feed_peak_mem, (unsigned long long)r->feed_spilled,
		 (double)r->feed_spill_peak / 1048576.0);
	return buf;
}

/* @base and @extra joined by a comma (either may be empty); malloc'ed. */
static char *join_opts(const char *base, const char *extra)
{
	char *out;

	if (asprintf(&out, "%s%s%s", base, *base && *extra ? "," : "", extra) < 0)
		return NULL;
	return out;
}

/* The replay's command line, options anywhere. */
struct replay_args {
	const char *trace, *opts, *stats_log;
	const char *gen;	/* --gen SPEC: the trace made in process, no TRACE */
	bool compare, csv;
	char **cmp;		/* --compare's OPTIONS: the operands after TRACE */
	int nr_cmp;
};

/* 0, -1 to exit 0 (--help, --version), or the exit status of a bad line. */
static int parse_replay_args(int argc, char **argv, struct replay_args *a)
{
	enum { OPT_STATS_LOG = 256, OPT_COMPARE, OPT_CSV, OPT_LOAD, OPT_GEN };
	static const struct option longopts[] = {
		{ "options", required_argument, NULL, 'o' },
		{ "load", required_argument, NULL, OPT_LOAD },
		{ "stats-log", required_argument, NULL, OPT_STATS_LOG },
		{ "compare", no_argument, NULL, OPT_COMPARE },
		{ "csv", no_argument, NULL, OPT_CSV },
		{ "gen", required_argument, NULL, OPT_GEN },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	char err[1024];
	int c;

	*a = (struct replay_args){ .opts = "" };
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'o': a->opts = optarg; break;
		case OPT_STATS_LOG: a->stats_log = optarg; break;
		case OPT_LOAD:
			/* Checked as the mount checks it, for the user running the replay. */
			if (wb_policy_load(optarg, getuid(), err, sizeof(err))) {
				fprintf(stderr, "foliofs-sim: %s\n", err);
				return 2;
			}
			break;
		case OPT_COMPARE: a->compare = true; break;
		case OPT_CSV: a->csv = true; break;
		case OPT_GEN:
			if (a->gen)
				return usage("--gen %s: one --gen SPEC only", optarg);
			a->gen = optarg;
			break;
		case 'h': help(stdout); return -1;
		case 'V': sim_print_version(); return -1;
		default: return bad_option(c, argv);
		}
	}
	if (optind >= argc && !a->gen)
		return usage("%s", "no TRACE");
	a->trace = a->gen ? NULL : argv[optind];
	a->cmp = &argv[optind + (a->gen ? 0 : 1)];
	a->nr_cmp = argc - optind - (a->gen ? 0 : 1);
	if (a->compare && !a->nr_cmp)
		return usage("%s", a->gen ? "--compare needs at least one OPTIONS"
			     : "--compare needs at least one OPTIONS after TRACE");
	if (!a->compare && a->nr_cmp)
		return usage(a->gen ? "%s: --gen makes the trace: no TRACE (--compare OPTIONS... "
			     "to compare)" : "%s: one TRACE only (--compare OPTIONS... to compare)",
			     a->cmp[0]);
	if (a->csv && !a->compare)
		return usage("%s", "--csv is for --compare (a sweep writes CSV too)");
	if (a->stats_log && a->compare)
		return usage("%s", "--stats-log is for one replay, not --compare");
	return 0;
}

static int cmd_replay(int argc, char **argv)
{
	struct replay_args a;
	char err[1024] = "";
	struct sim_result *res;
	struct sim_trace *t;
	int ret = parse_replay_args(argc, argv, &a), runs;

	if (ret)
		return ret < 0 ? 0 : ret;
	/* --gen: the generator's schedule to stderr, as comments */
	ret = a.gen ? sim_trace_gen(a.gen, stderr, "# gen: ", &t, err, sizeof(err))
		    : sim_trace_open(a.trace, &t, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "foliofs-sim: %s\n", err);
		return ret == -EINVAL && a.gen ? 2 : 1;
	}
	runs = a.compare ? a.nr_cmp : 1;
	res = calloc((size_t)runs, sizeof(*res));
	for (int c = 0; res && c < runs && !ret; c++) {
		char *o = join_opts(a.opts, a.compare ? a.cmp[c] : "");
		char d[128];

		ret = o ? sim_replay(t, o, a.stats_log, &res[c], err, sizeof(err)) : -ENOMEM;
		if (!ret)
			fprintf(stderr, "foliofs-sim: replayed %llu records in %.2f s "
				"(%.0f records/s), at most %llu read ahead%s%s%s\n", (unsigned long long)t->nr,
				res[c].replay_s,
				(double)t->nr / (res[c].replay_s > 0 ? res[c].replay_s : 1e-9),
				(unsigned long long)res[c].feed_peak, spilled(&res[c], d, sizeof(d)),
				a.compare ? ": " : "", a.compare ? a.cmp[c] : "");
		free(o);
	}
	if (!res || ret) {
		fprintf(stderr, "foliofs-sim: %s\n", res ? err : "out of memory");
		ret = ret == -EINVAL ? 2 : 1;
	} else if (a.csv) {
		print_compare_csv(a.cmp, res, a.nr_cmp);
	} else if (a.compare) {
		print_compare(a.cmp, res, a.nr_cmp);
	} else {
		fputs(res[0].stats, stdout);
		print_summary(&res[0]);
	}
	for (int c = 0; res && c < runs; c++)
		sim_result_free(&res[c]);
	free(res);
	sim_trace_close(t);
	return ret;
}

/*
 * A large replay's folios, index chunks and opens are gigabytes read at
 * random (the seed's scenario at 10 x 60 s: 4.5 M folios), so with 4 KiB
 * pages most of its cache misses also miss the TLB.  Where transparent
 * huge pages are in "madvise" mode (Debian's default), only memory
 * advised so gets 2 MiB pages, and malloc advises its heap only with
 * glibc's tunable glibc.malloc.hugetlb=1 (2.35+; older ones ignore it),
 * which glibc reads at start.  So a replay (and a sweep, whose workers
 * replay) starts itself again with the tunable added to GLIBC_TUNABLES,
 * unless that already names it (glibc.malloc.hugetlb=0: as before).  The
 * output is the same; the seed's replay took 26% less CPU at 10 x 60 s
 * (contrib/results/simspeed2-2026-12-07).  When the program cannot be
 * started again, it goes on as it is.  It starts the path
 * /proc/self/exe links to, so that its name (comm) stays its file's for
 * ps, top and pkill (through /proc/self/exe itself it would be "exe");
 * /proc/self/exe itself only when that path is gone (the binary replaced
 * since it started).
 */
static void malloc_huge(char **argv)
{
#ifdef __GLIBC__
	static const char tunable[] = "glibc.malloc.hugetlb";
	const char *env = getenv("GLIBC_TUNABLES");
	char *old = NULL, *val = NULL;
	char self[PATH_MAX];
	ssize_t n;

	if (env && strstr(env, tunable))
		return;
	if ((env && !(old = strdup(env))) ||
	    asprintf(&val, "%s%s%s=1", env ? env : "", env && *env ? ":" : "", tunable) < 0)
		goto out_free;
	if (!setenv("GLIBC_TUNABLES", val, 1)) {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n > 0) {
			self[n] = '\0';
			execv(self, argv);
		}
		execv("/proc/self/exe", argv);
	}
	/* not started again: the environment as it was */
	if (old)
		setenv("GLIBC_TUNABLES", old, 1);
	else
		unsetenv("GLIBC_TUNABLES");
	free(val);
out_free:
	free(old);
#else
	(void)argv;
#endif
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage("%s", "no command or TRACE");
	if (!strcmp(argv[1], "gen"))
		return cmd_gen(argc - 1, argv + 1);
	if (!strcmp(argv[1], "dump"))
		return cmd_dump(argc - 1, argv + 1);
	malloc_huge(argv);
	if (!strcmp(argv[1], "sweep"))
		return sim_sweep_main(argc - 1, argv + 1);
	return cmd_replay(argc, argv);
}
