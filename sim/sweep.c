// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * sweep.c - `foliofs-sim sweep`: one replay per configuration of a grid
 * (or a list) over one or more traces, on every core, into one CSV.
 *
 * The runs.  A grid is axes -a KEY=V1,V2,... crossed; a list is -c
 * OPTIONS items (or --configs FILE, one OPTIONS a line); with both, every
 * list item is crossed with the grid.  Run i replays trace i / C with
 * configuration i % C (C configurations per trace), whose options are
 * -o's, then the list item's, then one value of each axis, comma-joined
 * and parsed by the mount's own parser (opts.c): an option that parser
 * knows (policy parameters among them) is an axis.  Grid order: the list
 * outermost, then the axes as given, the last varying fastest.
 *
 * On every core.  The parent reads each trace once (its first pass,
 * sim_trace_open: what is per file and per writer, not the records) and
 * checks every configuration's options before anything runs (a bad one: one line, exit
 * 2, nothing written), then forks -j workers (default: the online CPUs).
 * Each worker takes the next run from a counter in shared memory and
 * leaves its numbers in that run's slot there; the parent prints the rows
 * in run order once all have exited.  Each replay streams the records
 * from the file itself (sim_feed), so a worker holds no trace.  A replay is deterministic and its
 * row holds nothing of the host (report.c), so the CSV does not depend on
 * which worker ran what or when: the same sweep gives the same bytes.
 * Processes rather than threads: the engine keeps per-thread state
 * (blockstate's per-writer counters, writeback's rings) and process-wide
 * registries, and a worker that crashes takes only its own run down.
 *
 * Across machines.  --jobs prints one shell command per run, each
 * `foliofs-sim sweep --run I ...` with the same runs, which prints a CSV
 * piece (the header and row I) to stdout: GNU parallel runs them locally
 * or over ssh (--sshloginfile) and gathers their output; --merge PIECES
 * (a file of pieces, a directory of them, or - for stdin) checks that
 * every run is there once, for these runs, and writes the CSV a direct
 * sweep writes.
 *
 * The CSV: run, trace (as given), one column per KEY the list and axes
 * set (its value in that run), options (all of them), then report.c's
 * result columns.  --plot PNG hands it to contrib/sim/sweep-plot.py:
 * paused time against peak pinned memory, the Pareto front marked.
 */
#include "sim.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SWEEP_MAX_RUNS 10000000u
#define SWEEP_ERRLEN 512

struct sweep_axis {
	const char *arg;	/* KEY=V1,V2,... as given, for --jobs */
	char *key;		/* before the '=' */
	char **vals;		/* V1, V2, ...: pointers into the -a string's copy */
	size_t nr_vals;
	char *copy;		/* the -a string, split in place */
};

struct sweep {
	/* the command line */
	const char *base;		/* -o: every run's first options */
	struct sweep_axis *axes;
	size_t nr_axes;
	char **list;			/* -c and --configs items (malloc'ed each) */
	size_t nr_list;
	char **traces;
	size_t nr_traces;
	uint64_t workers;		/* -j; 0: online CPUs */
	const char *csv, *plot, *merge;
	bool jobs;
	int64_t run;			/* --run I; -1: every run */
	/* derived */
	size_t nr_points;		/* grid points: product of the axes' sizes */
	size_t nr_cfgs;			/* configurations per trace */
	size_t nr_runs;
	char **keys;			/* the configuration columns, first set first */
	size_t nr_keys;
};

/* A worker's answer for one run, in memory shared with the parent. */
struct sweep_slot {
	_Atomic int state;		/* SLOT_* */
	double v[SIM_NR_COLS];		/* report.c's columns */
	double cpu_s;			/* the replay's CPU time: stderr only */
	char err[SWEEP_ERRLEN];		/* why it failed */
};
enum { SLOT_NOT_RUN, SLOT_DONE, SLOT_FAILED };

struct sweep_shared {
	_Atomic size_t next;		/* the next run a worker takes */
	struct sweep_slot slot[];	/* one per run */
};

static int fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int status, const char *fmt, ...)
{
	va_list ap;

	fputs("foliofs-sim: sweep: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return status;
}

static void sweep_help(FILE *f)
{
	fputs("usage: foliofs-sim sweep [-o OPTIONS] [-a KEY=V1,V2...]... [-c OPTIONS]...\n"
	      "                         [--configs FILE] [-j N] [--csv FILE] [--plot PNG] TRACE...\n"
	      "       foliofs-sim sweep ... --jobs | parallel > PIECES\n"
	      "       foliofs-sim sweep ... --merge PIECES [--csv FILE] [--plot PNG]\n"
	      "Replays every configuration over every TRACE, a worker per core, and writes\n"
	      "one CSV row per run, in grid order (the same sweep gives the same bytes).\n"
	      "  -o, --options OPTIONS  options of every run (the mount's and the device's)\n"
	      "  -a, --axis KEY=V1,V2   an axis of the grid: KEY is any option of -o (a\n"
	      "                         policy's parameter too); the axes are crossed, the\n"
	      "                         last one varying fastest\n"
	      "  -c, --config OPTIONS   one configuration of a list (repeatable); crossed\n"
	      "                         with the axes when both are given\n"
	      "  --configs FILE         list items from FILE, one OPTIONS a line (# comments)\n"
	      "  -j, --workers N        replays at once (default: the online CPUs)\n"
	      "  --csv FILE             write the CSV to FILE (default: stdout)\n"
	      "  --plot PNG             plot paused time against peak pinned memory, the\n"
	      "                         Pareto-optimal configurations marked and labelled\n"
	      "                         (contrib/sim/sweep-plot.py, python3-matplotlib)\n"
	      "  --jobs                 print one shell command per run instead, for GNU\n"
	      "                         parallel; each prints its CSV piece to stdout\n"
	      "  --run I                replay run I only and print its piece (what --jobs\n"
	      "                         prints)\n"
	      "  --merge PIECES         the CSV (and plot) from the pieces in PIECES: a file,\n"
	      "                         a directory of files, or - (stdin)\n"
	      "Columns: run, trace, one per KEY the configurations set, options, then the\n"
	      "results of foliofs-sim --compare --csv (foliofs-sim(1)).\n", f);
}

/* ---- the runs ---- */

static int add_axis(struct sweep *sw, const char *arg)
{
	struct sweep_axis *ax, *grown = realloc(sw->axes, (sw->nr_axes + 1) * sizeof(*grown));
	char *eq, *save = NULL;

	if (!grown)
		return fail(1, "out of memory");
	sw->axes = grown;
	ax = &sw->axes[sw->nr_axes];
	*ax = (struct sweep_axis){ .arg = arg, .copy = strdup(arg) };
	if (!ax->copy)
		return fail(1, "out of memory");
	sw->nr_axes++;
	eq = strchr(ax->copy, '=');
	if (!eq || eq == ax->copy || memchr(ax->copy, ',', (size_t)(eq - ax->copy)) || !eq[1] ||
	    strchr(eq + 1, '=') || eq[strlen(eq) - 1] == ',' || strstr(eq, ",,"))
		return fail(2, "-a %s: KEY=V1,V2,... (one KEY; values without '=' and not empty)",
			    arg);
	*eq = '\0';
	ax->key = ax->copy;
	for (size_t a = 0; a + 1 < sw->nr_axes; a++)
		if (!strcmp(sw->axes[a].key, ax->key))
			return fail(2, "-a %s: a second axis for %s", arg, ax->key);
	for (char *v = strtok_r(eq + 1, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
		char **vals = realloc(ax->vals, (ax->nr_vals + 1) * sizeof(*vals));

		if (!vals)
			return fail(1, "out of memory");
		ax->vals = vals;
		ax->vals[ax->nr_vals++] = v;
	}
	return 0;
}

static int add_config(struct sweep *sw, const char *opts, size_t len)
{
	char **list = realloc(sw->list, (sw->nr_list + 1) * sizeof(*list));

	if (!list || !(list[sw->nr_list] = strndup(opts, len)))
		return fail(1, "out of memory");
	sw->list = list;
	sw->nr_list++;
	return 0;
}

/* --configs FILE: one OPTIONS a line, blank lines and # comments skipped. */
static int add_configs_file(struct sweep *sw, const char *path)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int ret = 0;

	if (!f)
		return fail(2, "--configs %s: %s", path, strerror(errno));
	while (!ret && (n = getline(&line, &cap, f)) >= 0) {
		while (n && strchr(" \t\r\n", line[n - 1]))
			n--;
		if (n && line[0] != '#')
			ret = add_config(sw, line, (size_t)n);
	}
	if (!ret && ferror(f))
		ret = fail(1, "--configs %s: %s", path, strerror(errno));
	free(line);
	fclose(f);
	return ret;
}

/* Value of @key among @opts's items, the last one setting it (as the parser takes it). */
static const char *last_value(const char *opts, const char *key, size_t *len)
{
	size_t klen = strlen(key);
	const char *found = NULL;

	for (const char *it = opts; *it; it += strcspn(it, ","), it += *it == ',') {
		size_t n = strcspn(it, ",");

		if (n >= klen && !strncmp(it, key, klen) && (n == klen || it[klen] == '=')) {
			found = n == klen ? "1" : it + klen + 1;
			*len = n == klen ? 1 : n - klen - 1;
		}
	}
	return found;
}

static int add_key(struct sweep *sw, const char *key, size_t len)
{
	char **keys;

	for (size_t k = 0; k < sw->nr_keys; k++)
		if (strlen(sw->keys[k]) == len && !strncmp(sw->keys[k], key, len))
			return 0;
	keys = realloc(sw->keys, (sw->nr_keys + 1) * sizeof(*keys));
	if (!keys || !(keys[sw->nr_keys] = strndup(key, len)))
		return fail(1, "out of memory");
	sw->keys = keys;
	sw->nr_keys++;
	return 0;
}

/* The runs' count and configuration columns: the list's keys, then the axes'. */
static int plan(struct sweep *sw)
{
	int ret = 0;

	sw->nr_points = 1;
	for (size_t a = 0; a < sw->nr_axes; a++) {
		if (sw->axes[a].nr_vals > SWEEP_MAX_RUNS / sw->nr_points)
			return fail(2, "more than %u runs", SWEEP_MAX_RUNS);
		sw->nr_points *= sw->axes[a].nr_vals;
	}
	sw->nr_cfgs = sw->nr_points * (sw->nr_list ? sw->nr_list : 1);
	if (sw->nr_cfgs > SWEEP_MAX_RUNS / sw->nr_traces)
		return fail(2, "more than %u runs", SWEEP_MAX_RUNS);
	sw->nr_runs = sw->nr_cfgs * sw->nr_traces;
	for (size_t c = 0; c < sw->nr_list && !ret; c++)
		for (const char *it = sw->list[c]; *it && !ret; it += strcspn(it, ","), it += *it == ',')
			if (strcspn(it, ","))
				ret = add_key(sw, it, strcspn(it, ",="));
	for (size_t a = 0; a < sw->nr_axes && !ret; a++)
		ret = add_key(sw, sw->axes[a].key, strlen(sw->axes[a].key));
	return ret;
}

/* Run @i's options: -o's, its list item's, one value per axis; malloc'ed. */
static char *run_opts(const struct sweep *sw, size_t i)
{
	size_t k = i % sw->nr_cfgs, point = k % sw->nr_points, len;
	char *out = NULL;
	FILE *f = open_memstream(&out, &len);
	const char *sep = "";

	if (!f)
		return NULL;
	if (*sw->base) {
		fputs(sw->base, f);
		sep = ",";
	}
	if (sw->nr_list && *sw->list[k / sw->nr_points]) {
		fprintf(f, "%s%s", sep, sw->list[k / sw->nr_points]);
		sep = ",";
	}
	/* @point in mixed radix, the last axis the lowest digit. */
	for (size_t a = 0; a < sw->nr_axes; a++) {
		size_t below = 1;

		for (size_t b = a + 1; b < sw->nr_axes; b++)
			below *= sw->axes[b].nr_vals;
		fprintf(f, "%s%s=%s", sep, sw->axes[a].key,
			sw->axes[a].vals[point / below % sw->axes[a].nr_vals]);
		sep = ",";
	}
	if (fclose(f)) {
		free(out);
		return NULL;
	}
	return out;
}

/* Run @i's configuration as CSV fields: "run,trace,KEY values...,options". */
static int print_run_fields(FILE *f, const struct sweep *sw, size_t i)
{
	char *opts = run_opts(sw, i), *cfg;

	if (!opts)
		return -ENOMEM;
	/* The columns show what the list and axes set, not -o's constants. */
	cfg = opts + (*sw->base ? strlen(sw->base) + (opts[strlen(sw->base)] == ',') : 0);
	fprintf(f, "%zu,", i);
	sim_csv_field(f, sw->traces[i / sw->nr_cfgs]);
	for (size_t key = 0; key < sw->nr_keys; key++) {
		size_t len = 0;
		const char *v = last_value(cfg, sw->keys[key], &len);
		char *val = strndup(v ? v : "", v ? len : 0);

		if (!val) {
			free(opts);
			return -ENOMEM;
		}
		fputc(',', f);
		sim_csv_field(f, val);
		free(val);
	}
	fputc(',', f);
	sim_csv_field(f, opts);
	free(opts);
	return 0;
}

static void print_header(FILE *f, const struct sweep *sw)
{
	fputs("run,trace", f);
	for (size_t k = 0; k < sw->nr_keys; k++) {
		fputc(',', f);
		sim_csv_field(f, sw->keys[k]);
	}
	fputs(",options,", f);
	sim_csv_result_names(f);
	fputc('\n', f);
}

/* @f's line for a run that is done. */
static int print_row(FILE *f, const struct sweep *sw, size_t i, const double v[SIM_NR_COLS])
{
	if (print_run_fields(f, sw, i))
		return -ENOMEM;
	fputc(',', f);
	sim_csv_result_values(f, v);
	fputc('\n', f);
	return 0;
}

/* Every configuration through the parser before anything runs: 0 or 2. */
static int check_configs(const struct sweep *sw)
{
	char err[SWEEP_ERRLEN];

	for (size_t i = 0; i < sw->nr_cfgs; i++) {
		struct sim_config cfg;
		char *opts = run_opts(sw, i);
		int ret;

		if (!opts)
			return fail(1, "out of memory");
		ret = sim_config_parse(opts, &cfg, err, sizeof(err));
		if (ret) {
			fail(ret == -EINVAL ? 2 : 1, "run %zu (%s): %s", i, opts, err);
			free(opts);
			return ret == -EINVAL ? 2 : 1;
		}
		sim_config_free(&cfg);
		free(opts);
	}
	return 0;
}

/* ---- replaying, a worker per core ---- */

static double wall_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * The traces runs @first..@end use (the rest stay NULL), their first
 * pass: the workers read their records (sim_feed) themselves: 0 or 1.
 */
static int load_traces(const struct sweep *sw, size_t first, size_t end, struct sim_trace **tr)
{
	char err[SWEEP_ERRLEN];

	for (size_t t = first / sw->nr_cfgs; t <= (end - 1) / sw->nr_cfgs; t++) {
		if (tr[t])
			continue;
		if (sim_trace_open(sw->traces[t], &tr[t], err, sizeof(err)))
			return fail(1, "%s", err);
	}
	return 0;
}

static void free_traces(const struct sweep *sw, struct sim_trace **tr)
{
	for (size_t t = 0; tr && t < sw->nr_traces; t++)
		sim_trace_close(tr[t]);
	free(tr);
}

/* Replay run @i into @slot. Context: a worker process, or --run's. */
static void replay_one(const struct sweep *sw, struct sim_trace *const *tr,
		       size_t i, struct sweep_slot *slot)
{
	struct sim_result res = { .nr_writers = 0 };
	size_t t = i / sw->nr_cfgs;
	char *opts = run_opts(sw, i);
	int ret = -ENOMEM;

	if (opts)
		ret = sim_replay(tr[t], opts, NULL, &res, slot->err, sizeof(slot->err));
	else
		snprintf(slot->err, sizeof(slot->err), "out of memory");
	if (!ret) {
		sim_result_values(&res, slot->v);
		slot->cpu_s = res.replay_s;
	}
	sim_result_free(&res);
	free(opts);
	atomic_store(&slot->state, ret ? SLOT_FAILED : SLOT_DONE);
}

static void worker(const struct sweep *sw, struct sim_trace *const *tr,
		   struct sweep_shared *sh)
{
	size_t i;

	while ((i = atomic_fetch_add(&sh->next, 1)) < sw->nr_runs)
		replay_one(sw, tr, i, &sh->slot[i]);
}

static unsigned int nr_workers(const struct sweep *sw)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t n = sw->workers ? sw->workers : (uint64_t)(cpus > 0 ? cpus : 1);

	return (unsigned int)(n < sw->nr_runs ? n : sw->nr_runs);
}

/* Fork the workers and wait for them all: 0, or 1 if none could start. */
static int run_workers(const struct sweep *sw, struct sim_trace *const *tr,
		       struct sweep_shared *sh, unsigned int nw)
{
	pid_t *pids = calloc(nw, sizeof(*pids));
	unsigned int started = 0;

	if (!pids)
		return fail(1, "out of memory");
	fflush(NULL);		/* nothing buffered is written twice */
	for (; started < nw; started++) {
		pids[started] = fork();
		if (pids[started] == 0) {
			worker(sw, tr, sh);
			_exit(0);
		}
		if (pids[started] < 0) {
			fail(0, "fork: %s (%u of %u workers)", strerror(errno), started, nw);
			break;
		}
	}
	for (unsigned int w = 0; w < started; w++) {
		int st;

		while (waitpid(pids[w], &st, 0) < 0 && errno == EINTR)
			;
		if (WIFSIGNALED(st))
			fail(0, "a worker (pid %d) was killed by signal %d", (int)pids[w],
			     WTERMSIG(st));
	}
	free(pids);
	return started ? 0 : 1;
}

/* Every run's state after the workers: 0, or 1 naming the runs that failed. */
static int check_slots(const struct sweep *sw, const struct sweep_shared *sh)
{
	size_t bad = 0;

	for (size_t i = 0; i < sw->nr_runs; i++) {
		int state = atomic_load(&sh->slot[i].state);
		char *opts;

		if (state == SLOT_DONE)
			continue;
		if (bad++ < 10) {
			opts = run_opts(sw, i);
			fail(0, "run %zu (%s, %s): %s", i, sw->traces[i / sw->nr_cfgs],
			     opts ? opts : "?", state == SLOT_FAILED ? sh->slot[i].err :
			     "not replayed (its worker died)");
			free(opts);
		}
	}
	if (bad)
		return fail(1, "%zu of %zu runs failed; no CSV written", bad, sw->nr_runs);
	return 0;
}

/* The whole sweep into @csv (header and rows): 0 or the exit status. */
static int sweep_direct(const struct sweep *sw, FILE *csv)
{
	struct sim_trace **tr = calloc(sw->nr_traces, sizeof(struct sim_trace *));
	size_t bytes, records = 0;
	unsigned int nw = nr_workers(sw);
	struct sweep_shared *sh = MAP_FAILED;
	double t0 = wall_seconds(), cpu = 0;
	int ret = tr ? 0 : fail(1, "out of memory");

	if (!ret)
		ret = load_traces(sw, 0, sw->nr_runs, tr);
	bytes = sizeof(*sh) + sw->nr_runs * sizeof(sh->slot[0]);
	if (!ret) {
		sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (sh == MAP_FAILED)
			ret = fail(1, "mmap %zu bytes: %s", bytes, strerror(errno));
	}
	if (!ret)
		ret = run_workers(sw, tr, sh, nw);
	if (!ret)
		ret = check_slots(sw, sh);
	if (!ret)
		print_header(csv, sw);
	for (size_t i = 0; !ret && i < sw->nr_runs; i++) {
		ret = print_row(csv, sw, i, sh->slot[i].v) ? fail(1, "out of memory") : 0;
		cpu += sh->slot[i].cpu_s;
		records += tr[i / sw->nr_cfgs]->nr;
	}
	if (!ret)
		fprintf(stderr, "foliofs-sim: sweep: %zu runs (%zu trace%s x %zu configuration%s) by "
			"%u worker%s in %.1f s; replays %.1f s of CPU, %.0f records/s\n", sw->nr_runs,
			sw->nr_traces, sw->nr_traces > 1 ? "s" : "", sw->nr_cfgs,
			sw->nr_cfgs > 1 ? "s" : "", nw, nw > 1 ? "s" : "", wall_seconds() - t0, cpu,
			(double)records / (cpu > 0 ? cpu : 1e-9));
	if (sh != MAP_FAILED)
		munmap(sh, bytes);
	free_traces(sw, tr);
	return ret;
}

/* --run I: that run's piece (the header and its row) into @csv. */
static int sweep_one(const struct sweep *sw, FILE *csv)
{
	struct sim_trace **tr = calloc(sw->nr_traces, sizeof(struct sim_trace *));
	size_t i = (size_t)sw->run;
	struct sweep_slot *slot = calloc(1, sizeof(*slot));
	int ret = tr && slot ? 0 : fail(1, "out of memory");

	if (!ret)
		ret = load_traces(sw, i, i + 1, tr);
	if (!ret) {
		replay_one(sw, tr, i, slot);
		if (atomic_load(&slot->state) != SLOT_DONE)
			ret = fail(1, "run %zu: %s", i, slot->err);
	}
	if (!ret) {
		print_header(csv, sw);
		ret = print_row(csv, sw, i, slot->v) ? fail(1, "out of memory") : 0;
	}
	free_traces(sw, tr);
	free(slot);
	return ret;
}

/* ---- --jobs and --merge ---- */

/* @s for a POSIX shell: in single quotes, a quote as '\''. */
static void shell_quote(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", f);
		else
			fputc(*s, f);
	}
	fputc('\'', f);
}

/*
 * One command per run, the same runs as this sweep: from this directory
 * (traces given relative to it) with this binary; on other machines
 * (parallel --sshloginfile) both must be at the same paths.
 */
static int print_jobs(const struct sweep *sw)
{
	char exe[PATH_MAX], cwd[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n < 0 || !getcwd(cwd, sizeof(cwd)))
		return fail(1, "%s: %s", n < 0 ? "/proc/self/exe" : "getcwd", strerror(errno));
	exe[n] = '\0';
	for (size_t t = 0; t < sw->nr_traces; t++)
		if (access(sw->traces[t], R_OK))
			return fail(1, "%s: %s", sw->traces[t], strerror(errno));
	for (size_t i = 0; i < sw->nr_runs; i++) {
		fputs("cd ", stdout);
		shell_quote(stdout, cwd);
		fputs(" && ", stdout);
		shell_quote(stdout, exe);
		printf(" sweep --run %zu", i);
		if (*sw->base) {
			fputs(" -o ", stdout);
			shell_quote(stdout, sw->base);
		}
		for (size_t a = 0; a < sw->nr_axes; a++) {
			fputs(" -a ", stdout);
			shell_quote(stdout, sw->axes[a].arg);
		}
		for (size_t c = 0; c < sw->nr_list; c++) {
			fputs(" -c ", stdout);
			shell_quote(stdout, sw->list[c]);
		}
		fputs(" --", stdout);
		for (size_t t = 0; t < sw->nr_traces; t++) {
			fputc(' ', stdout);
			shell_quote(stdout, sw->traces[t]);
		}
		putchar('\n');
	}
	return 0;
}

/* What --merge has gathered: a row per run, as the pieces gave it. */
struct merge_state {
	const struct sweep *sw;
	char *header;		/* this sweep's header line, without the newline */
	char **rows;		/* [run]: its line, malloc'ed, or NULL */
};

/* A result part: SIM_NR_COLS numbers, comma-separated. */
static bool results_ok(const char *s)
{
	size_t commas = 0;

	for (; *s; s++) {
		if (*s == ',')
			commas++;
		else if (!strchr("0123456789.", *s))
			return false;
	}
	return commas == SIM_NR_COLS - 1;
}

/* One line of a piece: this sweep's header, or a row of one of its runs. */
static int merge_line(struct merge_state *m, char *line, const char *where)
{
	const struct sweep *sw = m->sw;
	char *end, *want = NULL;
	unsigned long long i;
	size_t len;
	FILE *f;
	int ret = 0;

	line[strcspn(line, "\r\n")] = '\0';
	if (!*line || !strcmp(line, m->header))
		return 0;
	errno = 0;
	i = strtoull(line, &end, 10);
	if (line[0] < '0' || line[0] > '9' || errno || *end != ',' || i >= sw->nr_runs)
		return fail(1, "%s: not a row or the header of this sweep (%zu runs)", where,
			    sw->nr_runs);
	f = open_memstream(&want, &len);
	if (!f || print_run_fields(f, sw, (size_t)i) || fclose(f))
		return fail(1, "out of memory");
	len = strlen(want);
	if (strncmp(line, want, len) != 0 || line[len] != ',' || !results_ok(line + len + 1))
		ret = fail(1, "%s: run %llu is not this sweep's (expected it to begin %s)", where,
			   i, want);
	else if (m->rows[i] && strcmp(m->rows[i], line) != 0)
		ret = fail(1, "%s: run %llu a second time, with other results", where, i);
	else if (!m->rows[i] && !(m->rows[i] = strdup(line)))
		ret = fail(1, "out of memory");
	free(want);
	return ret;
}

static int merge_stream(struct merge_state *m, FILE *f, const char *name)
{
	char *line = NULL, where[PATH_MAX + 32];
	size_t cap = 0, lineno = 0;
	int ret = 0;

	while (!ret && getline(&line, &cap, f) >= 0) {
		snprintf(where, sizeof(where), "%s:%zu", name, ++lineno);
		ret = merge_line(m, line, where);
	}
	if (!ret && ferror(f))
		ret = fail(1, "%s: %s", name, strerror(errno));
	free(line);
	return ret;
}

static int merge_file(struct merge_state *m, const char *path)
{
	FILE *f = strcmp(path, "-") != 0 ? fopen(path, "r") : stdin;
	int ret;

	if (!f)
		return fail(1, "--merge %s: %s", path, strerror(errno));
	ret = merge_stream(m, f, path);
	if (f != stdin)
		fclose(f);
	return ret;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The regular files of @dir, in name order (dot files skipped). */
static int merge_dir(struct merge_state *m, const char *dir)
{
	DIR *d = opendir(dir);
	char **names = NULL, path[PATH_MAX];
	size_t nr = 0;
	struct dirent *de;
	int ret = 0;

	if (!d)
		return fail(1, "--merge %s: %s", dir, strerror(errno));
	while (!ret && (de = readdir(d))) {
		char **grown;

		if (de->d_name[0] == '.')
			continue;
		grown = realloc(names, (nr + 1) * sizeof(*names));
		if (!grown || !(grown[nr] = strdup(de->d_name)))
			ret = fail(1, "out of memory");
		if (grown)
			names = grown;
		nr += !ret;
	}
	closedir(d);
	if (nr > 1)
		qsort(names, nr, sizeof(*names), name_cmp);
	for (size_t n = 0; n < nr && !ret; n++) {
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, names[n]);
		if (!stat(path, &st) && S_ISREG(st.st_mode))
			ret = merge_file(m, path);
	}
	for (size_t n = 0; n < nr; n++)
		free(names[n]);
	free(names);
	return ret;
}

/* --merge PIECES into @csv: every run there, once; 0 or 1. */
static int sweep_merge(const struct sweep *sw, FILE *csv)
{
	struct merge_state m = { .sw = sw, .rows = calloc(sw->nr_runs, sizeof(char *)) };
	size_t len, missing = 0, first = 0;
	struct stat st;
	FILE *f = open_memstream(&m.header, &len);
	int ret = m.rows && f ? 0 : fail(1, "out of memory");

	if (f) {
		print_header(f, sw);
		if (fclose(f))
			ret = fail(1, "out of memory");
	}
	if (!ret && m.header)
		m.header[strcspn(m.header, "\n")] = '\0';
	if (!ret)
		ret = strcmp(sw->merge, "-") != 0 && !stat(sw->merge, &st) && S_ISDIR(st.st_mode) ?
			merge_dir(&m, sw->merge) : merge_file(&m, sw->merge);
	for (size_t i = 0; !ret && i < sw->nr_runs; i++)
		if (!m.rows[i] && !missing++)
			first = i;
	if (!ret && missing)
		ret = fail(1, "--merge %s: %zu of %zu runs missing (the first: run %zu); no CSV "
			   "written", sw->merge, missing, sw->nr_runs, first);
	if (!ret)
		fprintf(csv, "%s\n", m.header);
	for (size_t i = 0; !ret && i < sw->nr_runs; i++)
		fprintf(csv, "%s\n", m.rows[i]);
	for (size_t i = 0; m.rows && i < sw->nr_runs; i++)
		free(m.rows[i]);
	free(m.rows);
	free(m.header);
	return ret;
}

/* ---- the CSV and the plot ---- */

/* The plot script: $FOLIOFS_SWEEP_PLOT, the installed one, the source tree's. */
static const char *plot_script(void)
{
	static const char *const paths[] = { SIM_PLOT_INSTALLED, SIM_PLOT_SOURCE };
	const char *env = getenv("FOLIOFS_SWEEP_PLOT");

	if (env && *env)
		return env;
	for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++)
		if (!access(paths[p], X_OK))
			return paths[p];
	return NULL;
}

/* sweep-plot.py CSV -o PNG, its messages on stderr (stdout may be the CSV). */
static int run_plot(const char *csv_path, const char *png)
{
	const char *script = plot_script();
	pid_t pid;
	int st;

	if (!script)
		return fail(1, "--plot: no sweep-plot.py at %s or %s (set FOLIOFS_SWEEP_PLOT)",
			    SIM_PLOT_INSTALLED, SIM_PLOT_SOURCE);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return fail(1, "--plot: fork: %s", strerror(errno));
	if (pid == 0) {
		dup2(STDERR_FILENO, STDOUT_FILENO);
		execl(script, script, csv_path, "-o", png, (char *)NULL);
		fprintf(stderr, "foliofs-sim: sweep: --plot: %s: %s\n", script, strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return fail(1, "--plot: %s failed (status %d)", script,
			    WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return 0;
}

/* @len bytes of @buf into @path, whole or not at all (a temporary renamed). */
static int write_file(const char *path, const char *buf, size_t len)
{
	char *tmp;
	FILE *f;
	int ret = 0;

	if (asprintf(&tmp, "%s.tmp.%d", path, (int)getpid()) < 0)
		return fail(1, "out of memory");
	f = fopen(tmp, "w");
	if (!f) {
		ret = fail(1, "--csv %s: %s", tmp, strerror(errno));
		free(tmp);
		return ret;
	}
	if (fwrite(buf, 1, len, f) != len)
		ret = errno ? errno : EIO;
	if (fclose(f) && !ret)
		ret = errno;
	if (!ret && rename(tmp, path))
		ret = errno;
	if (ret) {
		unlink(tmp);
		fail(1, "--csv %s: %s", path, strerror(ret));
	}
	free(tmp);
	return ret ? 1 : 0;
}

/* The CSV in @buf to --csv's file or stdout, then --plot's plot. */
static int output(const struct sweep *sw, const char *buf, size_t len)
{
	char tmp[] = "/tmp/foliofs-sweep-XXXXXX.csv";
	const char *csv = sw->csv;
	int ret = 0, fd;

	if (csv)
		ret = write_file(csv, buf, len);
	else if (fwrite(buf, 1, len, stdout) != len || fflush(stdout))
		ret = fail(1, "stdout: %s", strerror(errno));
	if (ret || !sw->plot)
		return ret;
	if (!csv) {
		fd = mkstemps(tmp, 4);
		if (fd < 0)
			return fail(1, "--plot: %s: %s", tmp, strerror(errno));
		close(fd);
		ret = write_file(tmp, buf, len);
		csv = tmp;
	}
	if (!ret)
		ret = run_plot(csv, sw->plot);
	if (csv == tmp)
		unlink(tmp);
	return ret;
}

/* ---- the command line ---- */

/* 0, -1 to exit 0 (--help, --version), or the exit status of a bad line. */
static int parse_args(int argc, char **argv, struct sweep *sw)
{
	enum { OPT_CONFIGS = 256, OPT_CSV, OPT_PLOT, OPT_JOBS, OPT_RUN, OPT_MERGE };
	static const struct option longopts[] = {
		{ "options", required_argument, NULL, 'o' },
		{ "axis", required_argument, NULL, 'a' },
		{ "config", required_argument, NULL, 'c' },
		{ "configs", required_argument, NULL, OPT_CONFIGS },
		{ "workers", required_argument, NULL, 'j' },
		{ "csv", required_argument, NULL, OPT_CSV },
		{ "plot", required_argument, NULL, OPT_PLOT },
		{ "jobs", no_argument, NULL, OPT_JOBS },
		{ "run", required_argument, NULL, OPT_RUN },
		{ "merge", required_argument, NULL, OPT_MERGE },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	char err[SWEEP_ERRLEN];
	uint64_t v;
	int c, ret = 0;

	opterr = 0;
	while (!ret && (c = getopt_long(argc, argv, ":o:a:c:j:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'o': sw->base = optarg; break;
		case 'a': ret = add_axis(sw, optarg); break;
		case 'c': ret = add_config(sw, optarg, strlen(optarg)); break;
		case OPT_CONFIGS: ret = add_configs_file(sw, optarg); break;
		case 'j':
			if (wb_parse_uint("--workers", optarg, 1, 4096, &sw->workers, err, sizeof(err)))
				ret = fail(2, "%s", err);
			break;
		case OPT_CSV: sw->csv = optarg; break;
		case OPT_PLOT: sw->plot = optarg; break;
		case OPT_JOBS: sw->jobs = true; break;
		case OPT_RUN:
			if (wb_parse_uint("--run", optarg, 0, SWEEP_MAX_RUNS, &v, err, sizeof(err)))
				ret = fail(2, "%s", err);
			else
				sw->run = (int64_t)v;
			break;
		case OPT_MERGE: sw->merge = optarg; break;
		case 'h': sweep_help(stdout); return -1;
		case 'V': sim_print_version(); return -1;
		case ':': return fail(2, "%s: needs a value (see foliofs-sim sweep --help)",
				      argv[optind - 1]);
		default: return fail(2, "%s: unknown option (see foliofs-sim sweep --help)",
				     argv[optind - 1]);
		}
	}
	if (ret)
		return ret;
	sw->traces = &argv[optind];
	sw->nr_traces = (size_t)(argc - optind);
	if (!sw->nr_traces)
		return fail(2, "no TRACE (see foliofs-sim sweep --help)");
	if (sw->jobs && (sw->merge || sw->run >= 0 || sw->csv || sw->plot))
		return fail(2, "--jobs prints commands: not with --merge, --run, --csv or --plot");
	if (sw->run >= 0 && (sw->merge || sw->plot))
		return fail(2, "--run replays one run: not with --merge or --plot");
	return 0;
}

static void sweep_free(struct sweep *sw)
{
	for (size_t a = 0; a < sw->nr_axes; a++) {
		free(sw->axes[a].vals);
		free(sw->axes[a].copy);
	}
	free(sw->axes);
	for (size_t c = 0; c < sw->nr_list; c++)
		free(sw->list[c]);
	free(sw->list);
	for (size_t k = 0; k < sw->nr_keys; k++)
		free(sw->keys[k]);
	free(sw->keys);
}

int sim_sweep_main(int argc, char **argv)
{
	struct sweep sw = { .base = "", .run = -1 };
	char *buf = NULL;
	size_t len = 0;
	FILE *csv = NULL;
	int ret = parse_args(argc, argv, &sw);

	if (!ret)
		ret = plan(&sw);
	if (!ret && sw.run >= 0 && (size_t)sw.run >= sw.nr_runs)
		ret = fail(2, "--run %lld: this sweep has runs 0 to %zu", (long long)sw.run,
			   sw.nr_runs - 1);
	if (!ret)
		ret = check_configs(&sw);
	if (!ret && sw.jobs) {
		ret = print_jobs(&sw);
		goto out;
	}
	if (!ret && !(csv = open_memstream(&buf, &len)))
		ret = fail(1, "out of memory");
	if (!ret)
		ret = sw.merge ? sweep_merge(&sw, csv) :
		      sw.run >= 0 ? sweep_one(&sw, csv) : sweep_direct(&sw, csv);
	if (csv && fclose(csv) && !ret)
		ret = fail(1, "out of memory");
	if (!ret)
		ret = output(&sw, buf, len);
out:
	free(buf);
	sweep_free(&sw);
	return ret < 0 ? 0 : ret;
}
