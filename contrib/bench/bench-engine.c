// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bench-engine.c - the blockstate engine alone, without FUSE: how many
 * small writes per second it takes into cached folios, and what each one
 * costs in CPU time.
 *
 * One cache (by default 1 GiB, 2 MiB folios, 4 KiB blocks, dirty_account
 * page), one file per thread on an in-memory stub backing store (reads
 * return zeros, nothing is ever written: a cached-write benchmark).  Each
 * thread first reads its whole file (256 MiB by default) so that every
 * folio exists and is uptodate, then all threads start together and do
 * random block-aligned writes of -s bytes into their file for -d seconds.
 * Nothing is written back until the end (the cache is big enough that
 * reclaim never runs; a reclaim stall would be reported and counted).
 *
 * Reported: ops/s in total and per thread, CPU time per op (the threads'
 * CLOCK_THREAD_CPUTIME_ID, and the process's getrusage), and the per-folio
 * state overhead: sizeof(struct bs_folio) plus its three bitmaps per
 * folio, and the heap actually used per folio beyond its data (index
 * chunks, allocator headers) measured with mallinfo2().
 *
 * With -M, the same loop copies into a plain buffer of the same size with
 * memcpy() instead of bs_write(): the floor set by the copy and the
 * memory system, to subtract from the engine's cost per write.  -H makes
 * that buffer 2 MiB aligned and madvise(MADV_HUGEPAGE)d: what the copy
 * would cost if folio memory were backed by transparent huge pages.
 *
 * The last line is machine readable:
 *   RESULT threads=T size=S secs=D ops=N ops_per_s=X ops_per_s_thread=Y
 *          cpu_ns_op=C rusage_ns_op=R
 *
 * Usage: bench-engine [-t THREADS] [-s BYTES] [-d SECS] [-a POLICY]
 *                     [-b BLOCK] [-f FOLIO] [-c CACHE_MIB] [-m FILE_MIB]
 *                     [-r SEED] [-q] [-M [-H]]
 */
#include "blockstate.h"
/*
 * Internal header, included only for sizeof(struct bs_folio) in the
 * overhead report; nothing else here depends on blockstate internals.
 */
#include "bs_i.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct opts {
	int threads;
	uint32_t size;
	double secs;
	const char *account;
	uint32_t block;
	uint32_t folio;
	uint64_t cache_mib;
	uint64_t file_mib;
	uint64_t seed;
	bool quiet;
	bool memcpy_only;
	bool huge;
};

struct worker {
	pthread_t tid;
	int id;
	const struct opts *o;
	struct bs_file *file;
	char *plain;		/* -M: the buffer copied into instead */
	uint64_t ops;
	uint64_t cpu_ns;
	uint64_t wall_ns;
	int err;
};

static pthread_barrier_t start_barrier;
static atomic_uint_fast64_t stalls;
static atomic_uint_fast64_t stub_reads;

static uint64_t ns_of(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rusage_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

/* ---- stub backing store: zeros, quickly ---- */

static ssize_t stub_read(void *ctx, void *buf, size_t len, off_t off)
{
	(void)ctx;
	(void)off;
	atomic_fetch_add_explicit(&stub_reads, 1, memory_order_relaxed);
	memset(buf, 0, len);
	return (ssize_t)len;
}

static int stub_truncate(void *ctx, off_t size)
{
	(void)ctx;
	(void)size;
	return 0;
}

static int stub_fallocate(void *ctx, int mode, off_t off, off_t len)
{
	(void)ctx;
	(void)mode;
	(void)off;
	(void)len;
	return 0;
}

static const struct bs_backing_ops stub_ops = {
	.read = stub_read,
	.truncate = stub_truncate,
	.fallocate = stub_fallocate,
};

/* Reclaim found nothing clean: the cache is too small for the benchmark. */
static void need_clean(void *ctx)
{
	(void)ctx;
	atomic_fetch_add(&stalls, 1);
}

static const struct bs_cache_ops cache_ops = { .need_clean = need_clean };

/* ---- the writers ---- */

static inline uint64_t xorshift64(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void *writer(void *arg)
{
	struct worker *w = arg;
	const struct opts *o = w->o;
	uint64_t file_bytes = o->file_mib << 20;
	uint64_t slots = (file_bytes - o->size) / o->block + 1;
	uint64_t rng = o->seed * 0x9e3779b97f4a7c15ull + (uint64_t)w->id + 1;
	uint64_t deadline, start, cpu0, ops = 0;
	char *buf = aligned_alloc(4096, o->size);

	if (!buf) {
		w->err = -ENOMEM;
		pthread_barrier_wait(&start_barrier);
		return NULL;
	}
	memset(buf, 0x5a + w->id, o->size);
	pthread_barrier_wait(&start_barrier);
	start = ns_of(CLOCK_MONOTONIC);
	cpu0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
	deadline = start + (uint64_t)(o->secs * 1e9);
	for (;;) {
		/* Check the clock every 256 writes. */
		for (int i = 0; i < 256; i++) {
			off_t off = (off_t)((xorshift64(&rng) % slots) * o->block);
			ssize_t n;

			if (w->plain) {
				memcpy(w->plain + off, buf, o->size);
				n = (ssize_t)o->size;
			} else {
				n = bs_write(w->file, buf, o->size, off);
			}

			if (n != (ssize_t)o->size) {
				w->err = n < 0 ? (int)n : -EIO;
				goto out;
			}
			buf[0]++;
		}
		ops += 256;
		if (ns_of(CLOCK_MONOTONIC) >= deadline)
			break;
	}
out:
	w->cpu_ns = ns_of(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	w->wall_ns = ns_of(CLOCK_MONOTONIC) - start;
	w->ops = ops;
	free(buf);
	return NULL;
}

/* Make every folio of @file exist and be uptodate (clean). */
static int populate(struct bs_file *file, uint64_t bytes, uint32_t folio)
{
	char *buf = malloc(folio);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (uint64_t off = 0; off < bytes; off += folio) {
		ssize_t n = bs_read(file, NULL, buf, folio, (off_t)off);

		if (n != (ssize_t)folio) {
			ret = n < 0 ? (int)n : -EIO;
			break;
		}
	}
	free(buf);
	return ret;
}

/* Write back everything (to nowhere): the stub write always succeeds. */
static uint64_t writeback_all(struct bs_file *file)
{
	struct bs_wb_run runs[64];
	uint64_t bytes = 0;
	off_t pos = 0;
	int n;

	while ((n = bs_wb_collect(file, &pos, INT64_MAX, runs, 64, 64u << 20)) > 0) {
		for (int i = 0; i < n; i++) {
			bytes += runs[i].len;
			bs_wb_complete(file, &runs[i], 0);
		}
	}
	return bytes;
}

/* ---- main ---- */

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [-t THREADS] [-s BYTES] [-d SECS] [-a POLICY] [-b BLOCK]\n"
		"          [-f FOLIO] [-c CACHE_MIB] [-m FILE_MIB_PER_THREAD] [-r SEED] [-q]\n"
		"          [-M (memcpy into a plain buffer instead of bs_write: the floor)\n"
		"          [-H (that buffer in transparent huge pages)]]\n"
		"defaults: -t 1 -s 4096 -d 5 -a page -b 4096 -f 2097152 -c 1024 -m 256\n",
		prog);
	exit(2);
}

static uint64_t num(const char *s, const char *prog)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end)
		usage(prog);
	return v;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct opts o = {
		.threads = 1, .size = 4096, .secs = 5, .account = "page",
		.block = 4096, .folio = 2u << 20, .cache_mib = 1024, .file_mib = 256,
		.seed = 1,
	};
	struct bs_config cfg;
	struct bs_cache *cache;
	struct worker *w;
	struct bs_stats st0, st1, st2;
	struct mallinfo2 mi0, mi1;
	char err[256];
	int c, ret, status = 0;

	while ((c = getopt(argc, argv, "t:s:d:a:b:f:c:m:r:qMHh")) != -1) {
		switch (c) {
		case 't': o.threads = (int)num(optarg, argv[0]); break;
		case 's': o.size = (uint32_t)num(optarg, argv[0]); break;
		case 'd': o.secs = strtod(optarg, NULL); break;
		case 'a': o.account = optarg; break;
		case 'b': o.block = (uint32_t)num(optarg, argv[0]); break;
		case 'f': o.folio = (uint32_t)num(optarg, argv[0]); break;
		case 'c': o.cache_mib = num(optarg, argv[0]); break;
		case 'm': o.file_mib = num(optarg, argv[0]); break;
		case 'r': o.seed = num(optarg, argv[0]); break;
		case 'q': o.quiet = true; break;
		case 'M': o.memcpy_only = true; break;
		case 'H': o.huge = true; break;
		default: usage(argv[0]);
		}
	}
	if (optind != argc || o.threads < 1 || o.threads > 256 || o.secs <= 0 ||
	    !o.size || o.size % o.block || (uint64_t)o.size > o.file_mib << 20)
		usage(argv[0]);

	cfg = (struct bs_config){
		.block_size = o.block,
		.folio_size = o.folio,
		.cache_size = o.cache_mib << 20,
		.account = bs_account_policy_find(o.account),
		.size = bs_size_policy_find("fixed"),
	};
	if (!cfg.account) {
		fprintf(stderr, "bench-engine: -a %s: unknown accounting policy\n", o.account);
		return 2;
	}
	if (bs_config_check(&cfg, err, sizeof(err))) {
		fprintf(stderr, "bench-engine: %s\n", err);
		return 2;
	}
	if ((uint64_t)o.threads * (o.file_mib << 20) > cfg.cache_size)
		fprintf(stderr, "bench-engine: warning: %d x %" PRIu64
			" MiB does not fit the %" PRIu64 " MiB cache: reclaim will run\n",
			o.threads, o.file_mib, o.cache_mib);
	ret = bs_cache_create(&cfg, &cache_ops, NULL, &cache);
	if (ret) {
		fprintf(stderr, "bench-engine: bs_cache_create: %s\n", strerror(-ret));
		return 1;
	}

	w = calloc((size_t)o.threads, sizeof(*w));
	if (!w)
		return 1;
	mi0 = mallinfo2();
	for (int i = 0; i < o.threads; i++) {
		w[i].id = i;
		w[i].o = &o;
		ret = bs_file_create(cache, &stub_ops, NULL, (off_t)(o.file_mib << 20), &w[i].file);
		if (!ret)
			ret = populate(w[i].file, o.file_mib << 20, o.folio);
		if (!ret && o.memcpy_only) {
			/* Touched, like the populated folios. */
			w[i].plain = aligned_alloc(o.huge ? 2u << 20 : BS_PAGE_SIZE,
						   o.file_mib << 20);
			if (!w[i].plain)
				ret = -ENOMEM;
			else if (o.huge && madvise(w[i].plain, o.file_mib << 20, MADV_HUGEPAGE))
				ret = -errno;
			if (!ret)
				memset(w[i].plain, 0, o.file_mib << 20);
		}
		if (ret) {
			fprintf(stderr, "bench-engine: populating file %d: %s\n", i, strerror(-ret));
			return 1;
		}
	}
	mi1 = mallinfo2();
	bs_cache_stats(cache, &st0);

	{
		uint32_t nblk = o.folio / o.block;
		size_t bitmaps = 3 * BS_BITS_TO_LONGS(nblk) * sizeof(unsigned long);
		size_t state = sizeof(struct bs_folio) + bitmaps;
		uint64_t heap = (uint64_t)(mi1.uordblks - mi0.uordblks) +
				(uint64_t)(mi1.hblkhd - mi0.hblkhd);
		/*
		 * 2 MiB folios live in their own mappings (blockstate/folio.c),
		 * outside the heap; smaller ones come from it.
		 */
		uint64_t data = o.folio == (2u << 20) ? 0 : st0.cache_bytes;
		double per_folio = st0.folios && heap >= data ?
				   (double)(heap - data) / (double)st0.folios : 0;

		printf("per-folio state: sizeof(struct bs_folio) %zu + bitmaps %zu (3 x %u bits)"
		       " = %zu bytes per %u KiB folio = %.4f%%\n",
		       sizeof(struct bs_folio), bitmaps, nblk, state, o.folio >> 10,
		       100.0 * (double)state / o.folio);
		if (!o.memcpy_only)
			printf("measured heap beyond folio data: %.0f bytes per folio = %.4f%%"
			       " (state, index chunks, allocator headers; %" PRIu64 " folios)\n",
			       per_folio, 100.0 * per_folio / o.folio, st0.folios);
	}

	pthread_barrier_init(&start_barrier, NULL, (unsigned)o.threads + 1);
	for (int i = 0; i < o.threads; i++) {
		if (pthread_create(&w[i].tid, NULL, writer, &w[i])) {
			fprintf(stderr, "bench-engine: pthread_create failed\n");
			return 1;
		}
	}
	{
		uint64_t ru0, ru1, wall0, wall1, ops = 0, cpu = 0;
		uint64_t *per = calloc((size_t)o.threads, sizeof(*per));
		double secs;

		ru0 = rusage_ns();
		wall0 = ns_of(CLOCK_MONOTONIC);
		pthread_barrier_wait(&start_barrier);
		for (int i = 0; i < o.threads; i++)
			pthread_join(w[i].tid, NULL);
		wall1 = ns_of(CLOCK_MONOTONIC);
		ru1 = rusage_ns();
		bs_cache_stats(cache, &st1);

		for (int i = 0; i < o.threads; i++) {
			if (w[i].err) {
				fprintf(stderr, "bench-engine: thread %d: write failed: %s\n", i,
					strerror(-w[i].err));
				status = 1;
			}
			ops += w[i].ops;
			cpu += w[i].cpu_ns;
			per[i] = w[i].ops;
		}
		qsort(per, (size_t)o.threads, sizeof(*per), cmp_u64);
		secs = (double)(wall1 - wall0) / 1e9;
		if (!o.quiet) {
			for (int i = 0; i < o.threads; i++)
				printf("thread %d: %" PRIu64 " writes in %.3f s, %.0f/s, %.0f ns CPU each\n",
				       i, w[i].ops, (double)w[i].wall_ns / 1e9,
				       (double)w[i].ops / ((double)w[i].wall_ns / 1e9),
				       w[i].ops ? (double)w[i].cpu_ns / (double)w[i].ops : 0);
			printf("stats after: nr_dirty %" PRIu64 " nr_dirtied %" PRIu64
			       " dirty_bytes_exact %" PRIu64 " pinned_bytes %" PRIu64
			       " cache_bytes %" PRIu64 " folios %" PRIu64
			       " reclaim_stalls %" PRIu64 " app_write_bytes %" PRIu64
			       " backing reads during run %" PRIu64 "\n",
			       st1.nr_dirty, st1.nr_dirtied, st1.dirty_bytes_exact,
			       st1.pinned_bytes, st1.cache_bytes, st1.folios,
			       st1.reclaim_stalls, st1.app_write_bytes - st0.app_write_bytes,
			       st1.backing_read_ios - st0.backing_read_ios);
		}
		if (st1.reclaim_stalls || atomic_load(&stalls)) {
			fprintf(stderr, "bench-engine: warning: reclaim stalled %" PRIu64
				" times: the cache is too small\n", st1.reclaim_stalls);
		}
		printf("RESULT%s%s threads=%d size=%u account=%s secs=%.3f ops=%" PRIu64
		       " ops_per_s=%.0f ops_per_s_thread=%.0f cpu_ns_op=%.1f rusage_ns_op=%.1f"
		       " min_thread_ops=%" PRIu64 "\n",
		       o.memcpy_only ? "_MEMCPY" : "", o.memcpy_only && o.huge ? "_HUGE" : "",
		       o.threads, o.size, o.account, secs, ops, (double)ops / secs,
		       (double)ops / secs / o.threads, ops ? (double)cpu / (double)ops : 0,
		       ops ? (double)(ru1 - ru0) / (double)ops : 0, per[0]);
		free(per);
	}

	/* The end: write back everything, check the books, free. */
	{
		uint64_t written = 0;

		for (int i = 0; i < o.threads; i++)
			written += writeback_all(w[i].file);
		bs_cache_stats(cache, &st2);
		if (!o.quiet)
			printf("written back at the end: %" PRIu64 " bytes; nr_dirty now %" PRIu64 "\n",
			       written, st2.nr_dirty);
		if (st2.nr_dirty || st2.dirty_bytes_exact || written != st1.dirty_bytes_exact) {
			fprintf(stderr, "bench-engine: writeback left nr_dirty %" PRIu64
				" dirty_bytes_exact %" PRIu64 " (wrote %" PRIu64 " of %" PRIu64 ")\n",
				st2.nr_dirty, st2.dirty_bytes_exact, written, st1.dirty_bytes_exact);
			status = 1;
		}
		if (bs_cache_check(cache))
			status = 1;
	}
	for (int i = 0; i < o.threads; i++) {
		bs_file_destroy(w[i].file);
		free(w[i].plain);
	}
	bs_cache_destroy(cache);
	pthread_barrier_destroy(&start_barrier);
	free(w);
	return status;
}
