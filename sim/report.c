// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * report.c - a replay's numbers by name, for the machine-readable outputs:
 * `foliofs-sim --compare --csv` and `foliofs-sim sweep`.
 *
 * The column names are an interface (scripts parse them): a column is
 * only ever added at the end, never renamed or moved.  Units are in the
 * names (_ms, _bytes, _s); counts are integers, times and rates have
 * three decimals.  Every value depends only on the trace and the options
 * (host CPU time goes to stderr, never here), so the same replay always
 * gives the same row, byte for byte.  And the version line, which main.c
 * and sweep.c print alike.
 */
#include "sim.h"

#include <string.h>

#ifndef FOLIOFS_VERSION
#define FOLIOFS_VERSION "unknown"
#endif

void sim_print_version(void)
{
	printf("foliofs-sim %s\n", FOLIOFS_VERSION);
}

#define MS(ns) ((double)(ns) / 1e6)

/* Name and format: integer columns print as integers, the rest with %.3f. */
static const struct { const char *name; bool integer; } cols[SIM_NR_COLS] = {
	{ "writers_ops_s", false },	/* ops/s achieved, summed over the writers */
	{ "virtual_s", false },		/* virtual time at the end */
	{ "ops", true },
	{ "pauses", true },		/* writes held by the throttle */
	{ "pause_total_ms", false },	/* their paused time, summed */
	{ "pause_p50_ms", false },
	{ "pause_p99_ms", false },
	{ "pause_max_ms", false },
	{ "fsyncs", true },
	{ "fsync_p50_ms", false },
	{ "fsync_p99_ms", false },
	{ "reads", true },
	{ "read_total_ms", false },	/* time reads waited for the device */
	{ "read_p50_ms", false },
	{ "read_p99_ms", false },
	{ "op_errors", true },		/* writes, reads and fsyncs that failed */
	{ "pages_charged", true },	/* nr_dirtied */
	{ "pages_written", true },	/* nr_written */
	{ "device_bytes", true },	/* bytes the device wrote */
	{ "peak_charged_bytes", true },
	{ "peak_dirty_exact_bytes", true },
	{ "peak_pinned_bytes", true },	/* memory of folios holding a dirty block */
	{ "folios_2M", true },		/* 2 MiB folios in the cache at the end */
	{ "folios_2M_made", true },
	{ "opens", true },
};

static double total_ops_s(const struct sim_result *r)
{
	double sum = 0;

	for (uint32_t w = 0; w < r->nr_writers; w++)
		sum += r->writers[w].achieved_ops_s;
	return sum;
}

void sim_result_values(const struct sim_result *r, double v[SIM_NR_COLS])
{
	const double vals[SIM_NR_COLS] = {
		total_ops_s(r), (double)r->end_ns / 1e9, (double)r->ops, (double)r->pauses,
		MS(r->pause_total_ns), MS(r->pause_p50_ns), MS(r->pause_p99_ns),
		MS(r->pause_max_ns), (double)r->fsyncs, MS(r->fsync_p50_ns), MS(r->fsync_p99_ns),
		(double)r->reads, MS(r->read_total_ns), MS(r->read_p50_ns), MS(r->read_p99_ns),
		(double)(r->write_errors + r->read_errors + r->fsync_errors),
		(double)r->pages_charged, (double)r->pages_written, (double)r->bytes_written,
		(double)r->peak_charged, (double)r->peak_dirty_exact, (double)r->peak_pinned,
		(double)r->folios_order[SIM_NR_ORDERS - 1],
		(double)r->folios_made_order[SIM_NR_ORDERS - 1], (double)r->opens,
	};

	memcpy(v, vals, sizeof(vals));
}

void sim_csv_field(FILE *f, const char *s)
{
	if (!s[strcspn(s, ",\"\r\n")]) {
		fputs(s, f);
		return;
	}
	/* RFC 4180: quoted, and a quote inside doubled. */
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

void sim_csv_result_names(FILE *f)
{
	for (unsigned int c = 0; c < SIM_NR_COLS; c++)
		fprintf(f, "%s%s", c ? "," : "", cols[c].name);
}

/*
 * Counts are below 2^53 (bytes of a replay, pages, ops), where a double
 * holds an integer exactly: "%.0f" prints it exactly.
 */
void sim_csv_result_values(FILE *f, const double v[SIM_NR_COLS])
{
	for (unsigned int c = 0; c < SIM_NR_COLS; c++)
		fprintf(f, cols[c].integer ? "%s%.0f" : "%s%.3f", c ? "," : "", v[c]);
}
