// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * gen.c - synthetic traces: `foliofs-sim gen SPEC -o OUT`.
 *
 * SPEC is name=value items separated by commas:
 *   writers=N        writers (pids 1..N), default 1
 *   files=N          files (ids 1..N), each created at time 0 with
 *                    file_size bytes; writer w writes file w mod N + 1
 *                    (default 1: one table all writers share)
 *   file_size=SIZE   default 256M (K, M, G, T suffixes, as the mount's sizes)
 *   op=write|read    what the ops are (default write)
 *   io=SIZE          bytes per op, default 8K
 *   pattern=random|seq  random: aligned offsets drawn uniformly from the
 *                    file; seq: each writer goes through the file from
 *                    its own start, wrapping (default random)
 *   ops=N            ops in all, shared out among the writers (default 100000)
 *   fsync_every=K    each writer fsyncs after every K writes (0: never)
 *   rate=N/s         each writer's recorded rate: N writes per second;
 *                    or rate=closed: no think time (default closed)
 *   think_us=N       think time before each operation instead of a rate
 *   seed=N           random seed (default 1)
 *   open=own|shared  own (default): each writer reads and writes through
 *                    an open of its own (open id: its number), as
 *                    processes that each open the file do; shared: all
 *                    writers of a file through one (open id: the file's)
 *   warm=SIZE        before the ops, the first SIZE bytes of a file are
 *                    read sequentially, io bytes at a time (default 0:
 *                    none), leaving a ramped-up readahead state and marks
 *   warm_by=N        who reads them: 0 (default) a reader of its own,
 *                    pid writers + 1, one open per file, every file; N:
 *                    writer N, its own file, through the open its ops use
 *   start_ms=N       the ops begin N ms into the trace (default 0, 1000
 *                    with warm: time for the warm reads to end first,
 *                    in a replay's closed loop)
 * The same SPEC always gives the same trace.  A SPEC whose first item is
 * "pgbench" is pgbench.c's (pgbench simple-update on PostgreSQL).
 */
#include "sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gen_spec {
	uint64_t writers, files, file_size, io, ops, fsync_every, think_ns, seed;
	uint64_t warm, warm_by, start_ms;
	bool seq, read, shared_open, start_set;
};

/* A count or size of the spec: writeback's parser, the mount's suffixes. */
static int parse_size(const char *name, const char *val, uint64_t *out, char *err, size_t errlen)
{
	return wb_parse_size(name, val, 0, UINT64_MAX, out, err, errlen);
}

static int parse_item(struct gen_spec *g, const char *name, const char *val, char *err,
		      size_t errlen)
{
	static const struct { const char *name; size_t off; } nums[] = {
		{ "writers", offsetof(struct gen_spec, writers) },
		{ "files", offsetof(struct gen_spec, files) },
		{ "file_size", offsetof(struct gen_spec, file_size) },
		{ "io", offsetof(struct gen_spec, io) },
		{ "ops", offsetof(struct gen_spec, ops) },
		{ "fsync_every", offsetof(struct gen_spec, fsync_every) },
		{ "seed", offsetof(struct gen_spec, seed) },
		{ "warm", offsetof(struct gen_spec, warm) },
		{ "warm_by", offsetof(struct gen_spec, warm_by) },
	};
	uint64_t v;

	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		if (!strcmp(name, nums[i].name))
			return parse_size(name, val, (uint64_t *)((char *)g + nums[i].off), err, errlen);
	if (!strcmp(name, "pattern")) {
		if (strcmp(val, "random") != 0 && strcmp(val, "seq") != 0) {
			snprintf(err, errlen, "pattern=%s: random or seq", val);
			return -EINVAL;
		}
		g->seq = !strcmp(val, "seq");
		return 0;
	}
	if (!strcmp(name, "op")) {
		if (strcmp(val, "write") != 0 && strcmp(val, "read") != 0) {
			snprintf(err, errlen, "op=%s: write or read", val);
			return -EINVAL;
		}
		g->read = !strcmp(val, "read");
		return 0;
	}
	if (!strcmp(name, "rate")) {
		size_t len = strlen(val);
		char num[32];

		if (!strcmp(val, "closed")) {
			g->think_ns = 0;
			return 0;
		}
		if (len < 3 || len - 2 >= sizeof(num) || strcmp(val + len - 2, "/s") != 0) {
			snprintf(err, errlen, "rate=%s: N/s or closed", val);
			return -EINVAL;
		}
		memcpy(num, val, len - 2);
		num[len - 2] = '\0';
		if (parse_size(name, num, &v, err, errlen) || !v) {
			snprintf(err, errlen, "rate=%s: N/s with N at least 1, or closed", val);
			return -EINVAL;
		}
		g->think_ns = 1000000000ull / v;
		return 0;
	}
	if (!strcmp(name, "open")) {
		if (strcmp(val, "own") != 0 && strcmp(val, "shared") != 0) {
			snprintf(err, errlen, "open=%s: own or shared", val);
			return -EINVAL;
		}
		g->shared_open = !strcmp(val, "shared");
		return 0;
	}
	if (!strcmp(name, "start_ms")) {
		g->start_set = true;
		return parse_size(name, val, &g->start_ms, err, errlen);
	}
	if (!strcmp(name, "think_us")) {
		if (parse_size(name, val, &v, err, errlen))
			return -EINVAL;
		g->think_ns = v * 1000;
		return 0;
	}
	snprintf(err, errlen, "%s: unknown spec item (writers, files, file_size, op, io, "
		 "pattern, ops, fsync_every, rate, think_us, seed, open, warm, warm_by, "
		 "start_ms)", name);
	return -EINVAL;
}

static int parse_spec(const char *spec, struct gen_spec *g, char *err, size_t errlen)
{
	char *copy = strdup(spec), *save = NULL;
	int ret = 0;

	*g = (struct gen_spec){
		.writers = 1, .files = 1, .file_size = 256u << 20, .io = 8192,
		.ops = 100000, .seed = 1,
	};
	if (!copy)
		return -ENOMEM;
	for (char *item = strtok_r(copy, ",", &save); item && !ret;
	     item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');

		if (!eq) {
			snprintf(err, errlen, "%s: expected name=value", item);
			ret = -EINVAL;
			break;
		}
		*eq = '\0';
		ret = parse_item(g, item, eq + 1, err, errlen);
	}
	free(copy);
	if (!ret && (!g->writers || g->writers > 65536 || !g->files || g->files > 65536)) {
		snprintf(err, errlen, "writers and files: 1 to 65536");
		ret = -EINVAL;
	}
	if (!ret && (!g->io || g->io > (64u << 20) || g->file_size < g->io)) {
		snprintf(err, errlen, "io=%llu: 1 byte to 64M, at most file_size",
			 (unsigned long long)g->io);
		ret = -EINVAL;
	}
	if (!ret && (g->warm > g->file_size || g->warm_by > g->writers)) {
		snprintf(err, errlen, "warm=%llu,warm_by=%llu: at most file_size, and a writer "
			 "(1 to writers) or 0", (unsigned long long)g->warm,
			 (unsigned long long)g->warm_by);
		ret = -EINVAL;
	}
	if (!ret && !g->start_set && g->warm)
		g->start_ms = 1000;
	return ret;
}

/* xorshift64: the same numbers from the same seed on every machine. */
static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* The open writer @w (0-based) reads and writes @file (1-based) through. */
static uint64_t writer_open(const struct gen_spec *g, uint64_t w, uint32_t file)
{
	return g->shared_open ? file : w + 1;
}

/*
 * The warm reads (warm=, warm_by=): [0, warm) of each file warmed, in
 * order, io bytes a read, at time 0 (closed loop), each file's through one
 * open.  0 or -errno.
 */
static int write_warm(struct sim_sink *sink, const struct gen_spec *g)
{
	int ret = 0;

	for (uint64_t i = 0; i < g->files && !ret; i++) {
		uint32_t file = (uint32_t)i + 1;
		struct trace_rec r = { .file = file, .op = TRACE_OP_READ, .length = g->io };

		if (g->warm_by) {
			if ((g->warm_by - 1) % g->files != i)
				continue;	/* not the warming writer's file */
			r.pid = (uint32_t)g->warm_by;
			r.open = writer_open(g, g->warm_by - 1, file);
		} else {
			r.pid = (uint32_t)g->writers + 1;
			r.open = g->shared_open ? file : g->writers + 1 + i;
		}
		for (uint64_t off = 0; off + g->io <= g->warm && !ret; off += g->io) {
			r.offset = off;
			ret = sink->put(sink, &r);
		}
	}
	return ret;
}

/* The simple generator of this file into @sink. */
static int gen_simple(const char *spec, struct sim_sink *sink, char *err, size_t errlen)
{
	struct gen_spec g;
	uint64_t slots, *seq_pos = NULL, *done = NULL, *rng = NULL;
	int ret = parse_spec(spec, &g, err, errlen);

	if (ret)
		return ret;
	slots = g.file_size / g.io;
	seq_pos = calloc(g.writers, sizeof(*seq_pos));
	done = calloc(g.writers, sizeof(*done));
	rng = calloc(g.writers, sizeof(*rng));
	if (!seq_pos || !done || !rng) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
	}
	if (!ret && sink->begin)
		ret = sink->begin(sink, err, errlen);
	for (uint64_t i = 0; !ret && i < g.files; i++) {
		struct trace_rec r = { .pid = 1, .file = (uint32_t)i + 1, .op = TRACE_OP_CREATE,
				     .length = g.file_size };

		ret = sink->put(sink, &r);
	}
	if (!ret && g.warm)
		ret = write_warm(sink, &g);
	for (uint64_t w = 0; w < g.writers; w++) {
		rng[w] = (g.seed + 1) * 0x9e3779b97f4a7c15ull + w * 0xbf58476d1ce4e5b9ull;
		if (!rng[w])
			rng[w] = 1;
		/* Sequential writers start spread over the file. */
		seq_pos[w] = slots * w / g.writers;
	}
	/*
	 * Writers take turns in time order: op k of every writer is recorded
	 * at k * think (each writer dirties at its rate), the writers of one
	 * instant in pid order.
	 */
	for (uint64_t k = 0, left = g.ops; !ret && left; k++) {
		for (uint64_t w = 0; w < g.writers && left && !ret; w++, left--) {
			uint32_t file = (uint32_t)(w % g.files) + 1;
			uint64_t slot = g.seq ? seq_pos[w]++ % slots : next_rand(&rng[w]) % slots;
			struct trace_rec r = {
				.time_ns = g.start_ms * 1000000 + (k + 1) * g.think_ns,
				.pid = (uint32_t)w + 1, .file = file,
				.op = g.read ? TRACE_OP_READ : TRACE_OP_WRITE, .offset = slot * g.io,
				.length = g.io, .open = writer_open(&g, w, file),
			};

			ret = sink->put(sink, &r);
			if (!ret && g.fsync_every && ++done[w] % g.fsync_every == 0) {
				r.op = TRACE_OP_FSYNC;
				r.offset = r.length = 0;
				ret = sink->put(sink, &r);
			}
		}
	}
	if (!ret && sink->end)
		ret = sink->end(sink);
	free(seq_pos);
	free(done);
	free(rng);
	return ret;
}

/* Whether @spec is pgbench.c's: its first item is "pgbench". */
static bool is_pgbench(const char *spec)
{
	return !strncmp(spec, "pgbench", 7) && (spec[7] == ',' || !spec[7]);
}

int sim_gen_run(const char *spec, struct sim_sink *sink, char *err, size_t errlen)
{
	return is_pgbench(spec) ? sim_gen_pgbench(spec, sink, err, errlen)
				: gen_simple(spec, sink, err, errlen);
}

/* A trace file as the sink: made once the spec is known good. */
struct file_sink {
	struct sim_sink sink;
	const char *path;
	FILE *f;
};

static int file_begin(struct sim_sink *sink, char *err, size_t errlen)
{
	struct file_sink *fs = (struct file_sink *)sink;
	int ret;

	fs->f = fopen(fs->path, "wb");
	if (!fs->f) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", fs->path, strerror(-ret));
		return ret;
	}
	return trace_write_header(fs->f);
}

static int file_put(struct sim_sink *sink, const struct trace_rec *rec)
{
	return trace_write_rec(((struct file_sink *)sink)->f, rec);
}

static int file_end(struct sim_sink *sink)
{
	struct file_sink *fs = (struct file_sink *)sink;
	int ret = fclose(fs->f) ? -errno : 0;

	fs->f = NULL;
	return ret;
}

int sim_gen(const char *spec, const char *out_path, char *err, size_t errlen)
{
	struct file_sink fs = {
		.sink = { .begin = file_begin, .put = file_put, .end = file_end, .report = stdout },
		.path = out_path,
	};
	int ret = sim_gen_run(spec, &fs.sink, err, errlen);

	if (fs.f)
		fclose(fs.f);
	if (ret && !*err)
		snprintf(err, errlen, "%s: %s", out_path, strerror(-ret));
	return ret;
}
