// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Threaded test of blockstate: readers, writers, truncates and punches on
 * one cache, with a writeback thread collecting and completing runs all
 * along, and a cache small enough that reclaim (and need_clean, from the
 * writers' own threads) runs all the time.  Meant to be run under TSan as
 * well: the test itself shares nothing without a lock or an atomic.
 *
 * Phases (each with N = 4 threads, on fresh files of one cache):
 *   disjoint   one file cut into four regions whose edges fall inside
 *              blocks and folios; each thread reads, writes and punches
 *              its own region and checks every byte it reads against its
 *              own shadow.  Thread 0 also owns the tail past the regions
 *              and truncates it up and down.
 *   overlap1   all threads read and write stamped 8-byte words over the
 *              same range of one file (thread 0 also truncates and
 *              punches, at word boundaries).  Every word read must be
 *              zero or a stamp written to that very word: the stamp holds
 *              the writer, its sequence number and a hash of the word's
 *              index, so torn, misplaced or made-up words are caught.
 *   overlap2   the same over two files.
 *   truncate_vs_collect
 *              a collection that started before a truncate and reaches a
 *              folio past the new size after the truncate waited for it:
 *              that folio's bytes must not reach the backing file
 *              (staged with the folio lock, see the function).
 * At the end of each phase, with nothing in flight: bs_cache_check() == 0,
 * a final writeback leaves nothing held, and each backing file holds what
 * the cache does (and zeros past the size).  The phases run in three
 * configurations (block and folio sizes, accounting and sizing policies).
 *
 * Writeback of a file is one pass at a time (tfile.wb_lock, as wb_file
 * does: bs_wb_collect_mode() forbids two collections of one file at once),
 * in every collect mode, with max_run limits and some runs failing.
 *
 * Writeback copies a run's bytes under the run's folio lock.  blockstate
 * lets a writer change the bytes of a run in flight (the blocks are
 * dirtied again); reading them without that lock is a race by design,
 * which TSan would report in this test's own memcpy.  BS_TEST_RACY_COPY=1
 * copies without the lock, to see it.  BS_TEST_OPS scales the work
 * (default 1.0: 40000 operations per thread and phase, 15000 under TSan;
 * a few seconds, and under a minute with TSan on two cores).
 */
#include "bs_i.h"
#include "mem_backing.h"
#include "test_helpers.h"

#include <errno.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NTHREADS 4
#define MAX_FILES 2
#define MAX_RUNS 16

static const char *cur_phase = "setup";

#define P_CHECK(cond)                                                          \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "phase %s: %s:%d: check failed: %s\n", \
				cur_phase, __FILE__, __LINE__, #cond);         \
			exit(T_EXIT_FAIL);                                     \
		}                                                              \
	} while (0)

/* ---- per-thread random numbers ---- */

static uint64_t rnd(uint64_t *s)
{
	return t_xorshift(s);
}

static uint64_t rnd_below(uint64_t *s, uint64_t n)
{
	return n ? rnd(s) % n : 0;
}

/*
 * Asynchronous reads (readahead's read_start), completed by a thread of
 * their own in a random order, some after a pause and one in 32 failing
 * with EIO, as the writeback reader thread completes them from io_uring.
 * Every other read takes its bytes from the backing file when it starts
 * and delivers them when it completes, as a device that read early and
 * answered late: a truncate, punch or write meanwhile must wait for it
 * (else stale bytes land in the cache); the others read at completion.
 */
struct aio_item {
	struct bs_aio *aio;
	struct mem_backing *mf;
	char *early;			/* bytes read at start, or NULL */
	ssize_t early_n;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct aio_item items[256];
	unsigned int nr;
	bool stop;
	pthread_t thread;
	uint64_t started, failed;
} A = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static int mem_read_start(void *ctx, struct bs_aio *aio)
{
	pthread_mutex_lock(&A.lock);
	if (A.nr == sizeof(A.items) / sizeof(A.items[0])) {
		pthread_mutex_unlock(&A.lock);
		return -EAGAIN;		/* the caller reads synchronously */
	}
	A.items[A.nr] = (struct aio_item){ aio, ctx, NULL, 0 };
	if (A.started % 2) {
		A.items[A.nr].early = malloc(aio->len);
		T_CHECK(A.items[A.nr].early);
		A.items[A.nr].early_n = mem_backing_read(ctx, A.items[A.nr].early, aio->len, aio->off);
	}
	A.nr++;
	A.started++;
	pthread_cond_signal(&A.cond);
	pthread_mutex_unlock(&A.lock);
	return 0;
}

static void aio_complete(struct aio_item it, bool fail)
{
	struct bs_aio *aio = it.aio;
	char *buf = malloc(aio->len);
	ssize_t n;
	size_t done = 0;

	T_CHECK(buf);
	if (it.early) {
		memcpy(buf, it.early, (size_t)it.early_n);
		n = it.early_n;
		free(it.early);
	} else {
		n = mem_backing_read(it.mf, buf, aio->len, aio->off);
	}
	if (fail)
		n = -EIO;
	for (int i = 0; n > 0 && i < aio->iovcnt && done < (size_t)n; i++) {
		size_t part = aio->iov[i].iov_len < (size_t)n - done ? aio->iov[i].iov_len
								     : (size_t)n - done;

		memcpy(aio->iov[i].iov_base, buf + done, part);
		done += part;
	}
	free(buf);
	aio->done(aio, n);
}

static void *aio_main(void *arg)
{
	unsigned int seed = 7;

	(void)arg;
	pthread_mutex_lock(&A.lock);
	for (;;) {
		struct aio_item it;
		unsigned int i;
		bool fail;

		while (!A.nr && !A.stop)
			pthread_cond_wait(&A.cond, &A.lock);
		if (!A.nr)
			break;
		i = (unsigned int)rand_r(&seed) % A.nr;
		it = A.items[i];
		A.items[i] = A.items[--A.nr];
		fail = rand_r(&seed) % 32 == 0;
		A.failed += fail;
		pthread_mutex_unlock(&A.lock);
		if (rand_r(&seed) % 4 == 0)
			usleep(20);
		aio_complete(it, fail);
		pthread_mutex_lock(&A.lock);
	}
	pthread_mutex_unlock(&A.lock);
	return NULL;
}

static const struct bs_backing_ops mem_ops_async = {
	.read = mem_backing_read,
	.read_start = mem_read_start,
	.truncate = mem_backing_truncate,
	.fallocate = mem_backing_fallocate,
};

/* ---- files, writeback ---- */

struct tfile {
	struct bs_file *bs;
	struct mem_backing mem;
	pthread_mutex_t wb_lock;	/* one writeback of a file at a time */
};

struct test {
	struct bs_cache *cache;
	struct tfile files[MAX_FILES];
	_Atomic int nfiles;		/* files need_clean writes back */
	atomic_bool stop;		/* the writeback thread stops */
	_Atomic uint64_t wb_runs, wb_failed, nc_calls;
	bool racy_copy;
	bool async;			/* files read ahead with mem_ops_async */
	uint32_t bsize, fsize;
	uint64_t cache_bytes;
};

static struct test T;

/*
 * Copy a run into the backing file (under its folio lock: see the top).
 * A run collected with BS_WB_WHOLE_BLOCKS may pass EOF: then restore the
 * size, as its caller must (only then: other runs must stop at EOF).
 */
static void run_copy(struct tfile *tf, struct bs_wb_run *r, unsigned int flags)
{
	off_t size;

	if (!T.racy_copy)
		bs_folio_lock(r->folio);
	mem_backing_write(&tf->mem, r->data, r->len, r->off);
	if (!T.racy_copy)
		bs_folio_unlock_raw(r->folio);
	if (!(flags & BS_WB_WHOLE_BLOCKS))
		return;
	size = bs_file_size(tf->bs);
	pthread_mutex_lock(&tf->mem.lock);
	if (tf->mem.len > (size_t)size && r->off + (off_t)r->len > size)
		mem_backing_set_len_locked(&tf->mem, (size_t)size);
	pthread_mutex_unlock(&tf->mem.lock);
}

/*
 * Write back [start, end) of @tf, runs failing with -EIO at @fail_pct.
 * Context: no blockstate lock held; takes tf->wb_lock.
 */
static void writeback(struct tfile *tf, off_t start, off_t end, unsigned int fail_pct,
		      unsigned int flags, uint64_t *rs)
{
	size_t max_run = rnd_below(rs, 2) ? SIZE_MAX : (1 + rnd_below(rs, 8)) * T.bsize;
	struct bs_wb_run runs[MAX_RUNS];
	off_t pos = start;
	int n;

	pthread_mutex_lock(&tf->wb_lock);
	while ((n = bs_wb_collect_mode(tf->bs, &pos, end, runs,
				       1 + (int)rnd_below(rs, MAX_RUNS), SIZE_MAX, max_run,
				       flags)) > 0) {
		for (int i = 0; i < n; i++) {
			bool fail = rnd_below(rs, 100) < fail_pct;

			atomic_fetch_add(&T.wb_runs, 1);
			if (fail) {
				atomic_fetch_add(&T.wb_failed, 1);
				bs_wb_complete(tf->bs, &runs[i], -EIO);
			} else {
				run_copy(tf, &runs[i], flags);
				bs_wb_complete(tf->bs, &runs[i], 0);
			}
		}
	}
	pthread_mutex_unlock(&tf->wb_lock);
}

/*
 * A sync of @tf's backing file (memory: nothing to do) that fails with
 * @err: written blocks become durable, or dirty again.  Syncs may overlap
 * each other and writeback.
 */
static void sync_file(struct tfile *tf, int err)
{
	uint64_t token = bs_sync_begin(tf->bs);

	sched_yield();
	bs_sync_end(tf->bs, token, err);
}

/* Reclaim found nothing clean: write back and sync every file of the phase. */
static void need_clean(void *arg)
{
	uint64_t rs = (uint64_t)(uintptr_t)&rs ^ 0x5555;
	int nfiles = atomic_load(&T.nfiles);

	(void)arg;
	atomic_fetch_add(&T.nc_calls, 1);
	for (int i = 0; i < nfiles; i++) {
		writeback(&T.files[i], 0, INT64_MAX, 0, 0, &rs);
		sync_file(&T.files[i], 0);
	}
}

static const struct bs_cache_ops cache_ops = {
	.need_clean = need_clean,
};

/* The writeback thread: random ranges of random files, some runs failing. */
static void *wb_thread(void *arg)
{
	uint64_t rs = 0x9e3779b97f4a7c15ull;
	static const unsigned int flag_sets[] = {
		0, 0, 0, BS_WB_WHOLE_FOLIO, BS_WB_WHOLE_BLOCKS,
	};

	(void)arg;
	while (!atomic_load(&T.stop)) {
		int nfiles = atomic_load(&T.nfiles);
		struct tfile *tf = &T.files[rnd_below(&rs, (uint64_t)nfiles)];
		off_t size = bs_file_size(tf->bs);
		off_t start = (off_t)rnd_below(&rs, (uint64_t)size + 1);
		off_t end = rnd_below(&rs, 4) ? INT64_MAX :
			    start + (off_t)rnd_below(&rs, 4 * (uint64_t)T.fsize);

		writeback(tf, rnd_below(&rs, 3) ? 0 : start, end,
			  rnd_below(&rs, 10) ? 0 : 30,
			  flag_sets[rnd_below(&rs, sizeof(flag_sets) / sizeof(flag_sets[0]))], &rs);
		if (rnd_below(&rs, 2))
			sync_file(tf, rnd_below(&rs, 5) ? 0 : -EIO);
		sched_yield();
	}
	return NULL;
}

static void files_create(int nfiles)
{
	for (int i = 0; i < nfiles; i++) {
		struct tfile *tf = &T.files[i];

		mem_backing_init(&tf->mem);
		pthread_mutex_init(&tf->wb_lock, NULL);
		P_CHECK(bs_file_create(T.cache, T.async ? &mem_ops_async : &mem_backing_ops, &tf->mem, 0,
				       &tf->bs) == 0);
	}
	atomic_store(&T.nfiles, nfiles);
}

/*
 * Quiescent end of a phase: the invariant check, a full writeback, and
 * each backing file equal to the cache (zeros past the size).
 */
static void files_settle(int nfiles)
{
	uint64_t rs = 77;
	struct bs_stats st;

	P_CHECK(bs_cache_check(T.cache) == 0);
	for (int i = 0; i < nfiles; i++) {
		writeback(&T.files[i], 0, INT64_MAX, 0, 0, &rs);
		sync_file(&T.files[i], 0);
	}
	P_CHECK(bs_cache_check(T.cache) == 0);
	bs_cache_stats(T.cache, &st);
	P_CHECK(st.dirty_bytes_exact == 0 && st.charged_bytes == 0 && st.nr_dirty == 0);
	P_CHECK(st.writeback_bytes == 0 && st.pinned_bytes == 0 && st.unsynced_bytes == 0);
	for (int i = 0; i < nfiles; i++) {
		struct tfile *tf = &T.files[i];
		size_t size = (size_t)bs_file_size(tf->bs);
		unsigned char *buf = malloc(size + 1);
		size_t n;

		P_CHECK(buf && !bs_file_has_held(tf->bs));
		P_CHECK(bs_read(tf->bs, mem_thread_ra(), buf, size + 1, 0) == (ssize_t)size);
		n = tf->mem.len < size ? tf->mem.len : size;
		if (memcmp(buf, tf->mem.data, n) != 0) {
			for (size_t k = 0; k < n; k++) {
				if (buf[k] != tf->mem.data[k]) {
					fprintf(stderr, "file %d byte %zu: cache %#x, backing %#x\n",
						i, k, buf[k], tf->mem.data[k]);
					break;
				}
			}
			P_CHECK(!"backing file equals the cache");
		}
		for (size_t k = n; k < size; k++)
			P_CHECK(buf[k] == 0);
		for (size_t k = size; k < tf->mem.len; k++)
			P_CHECK(tf->mem.data[k] == 0);
		free(buf);
	}
}

static void files_destroy(int nfiles)
{
	atomic_store(&T.nfiles, 0);
	for (int i = 0; i < nfiles; i++) {
		struct tfile *tf = &T.files[i];

		bs_file_destroy(tf->bs);
		pthread_mutex_destroy(&tf->wb_lock);
		mem_backing_destroy(&tf->mem);
	}
}

static int scaled(int ops)
{
	const char *env = getenv("BS_TEST_OPS");
	double f = env ? atof(env) : 1.0;

	return (int)(ops * (f > 0 ? f : 1.0));
}

/* Run @fn on NTHREADS threads and the writeback thread until they finish. */
static void run_threads(void *(*fn)(void *), void *args, size_t arg_size)
{
	pthread_t th[NTHREADS], wb;

	atomic_store(&T.stop, false);
	P_CHECK(pthread_create(&wb, NULL, wb_thread, NULL) == 0);
	for (int i = 0; i < NTHREADS; i++)
		P_CHECK(pthread_create(&th[i], NULL, fn, (char *)args + i * arg_size) == 0);
	for (int i = 0; i < NTHREADS; i++)
		P_CHECK(pthread_join(th[i], NULL) == 0);
	atomic_store(&T.stop, true);
	P_CHECK(pthread_join(wb, NULL) == 0);
}

/* ---- phase: disjoint regions ---- */

struct djob {
	int id;
	int ops;
	size_t start, end;		/* the region, [start, end) */
	size_t tail_start, tail_max;	/* thread 0: the tail it truncates in */
	unsigned char *shadow;		/* of [start, end) (thread 0: to tail_max) */
	size_t size;			/* thread 0: the file size it set last */
};

static void d_check_read(struct djob *j, struct bs_file *f, size_t off, size_t len,
			 unsigned char *buf)
{
	size_t base = j->start, fsize = (size_t)bs_file_size(f);
	size_t expect = off >= fsize ? 0 : (len < fsize - off ? len : fsize - off);
	ssize_t n = bs_read(f, mem_thread_ra(), buf, len, (off_t)off);

	/* The size only moves in thread 0's tail, by thread 0: it is known. */
	P_CHECK(n == (ssize_t)expect);
	if (n > 0 && memcmp(buf, j->shadow + (off - base), (size_t)n) != 0) {
		for (ssize_t k = 0; k < n; k++) {
			if (buf[k] != j->shadow[off - base + (size_t)k]) {
				fprintf(stderr, "thread %d: byte %zu reads %#x, wrote %#x\n",
					j->id, off + (size_t)k, buf[k],
					j->shadow[off - base + (size_t)k]);
				break;
			}
		}
		P_CHECK(!"a thread reads back its own bytes");
	}
}

static void *d_thread(void *arg)
{
	struct djob *j = arg;
	struct bs_file *f = T.files[0].bs;
	uint64_t rs = 0x1234567ull * (uint64_t)(j->id + 1);
	size_t span = j->id == 0 ? j->tail_max - j->start : j->end - j->start;
	unsigned char *buf = malloc(span + 1);

	P_CHECK(buf);
	for (int op = 0; op < j->ops; op++) {
		/* Thread 0: its region or the tail, never what lies between. */
		bool tail = j->id == 0 && rnd_below(&rs, 2);
		size_t base = tail ? j->tail_start : j->start;
		size_t lim = tail ? j->tail_max : j->end;
		size_t off = base + rnd_below(&rs, lim - base);
		size_t len = rnd_below(&rs, 4) ? 1 + rnd_below(&rs, 3 * (uint64_t)T.bsize) :
						 1 + rnd_below(&rs, 2 * (uint64_t)T.fsize);
		unsigned int r = (unsigned int)rnd_below(&rs, 100);

		if (off + len > lim)
			len = lim - off;
		if (r < 45) {
			for (size_t k = 0; k < len; k++)
				buf[k] = (unsigned char)rnd(&rs);
			P_CHECK(bs_write(f, buf, len, (off_t)off) == (ssize_t)len);
			memcpy(j->shadow + (off - j->start), buf, len);
			if (j->id == 0 && off + len > j->size)
				j->size = off + len;
		} else if (r < 85) {
			d_check_read(j, f, off, len, buf);
		} else if (r < 92 && off + len <= j->end) {
			/* Punch or zero in the own region (never past EOF there). */
			int mode = rnd_below(&rs, 2) ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
						     : FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;

			P_CHECK(bs_fallocate(f, mode, (off_t)off, (off_t)len) == 0);
			memset(j->shadow + (off - j->start), 0, len);
		} else if (j->id == 0) {
			/* Truncate within the tail, up or down. */
			size_t size = j->tail_start + rnd_below(&rs, j->tail_max - j->tail_start + 1);

			P_CHECK(bs_truncate(f, (off_t)size) == 0);
			if (size < j->size)
				memset(j->shadow + (size - j->start), 0, j->size - size);
			j->size = size;
		} else {
			d_check_read(j, f, j->start, j->end - j->start, buf);
		}
	}
	d_check_read(j, f, j->start, j->end - j->start, buf);
	if (j->id == 0)
		d_check_read(j, f, j->tail_start, j->tail_max - j->tail_start, buf);
	free(buf);
	return NULL;
}

static void phase_disjoint(int ops)
{
	/* Region edges inside blocks and folios: 2.5 folios and a bit. */
	size_t region = (size_t)T.fsize * 5 / 2 + 1000 + T.bsize / 3;
	size_t tail_start = NTHREADS * region, tail_max = tail_start + 2 * (size_t)T.fsize + 333;
	struct djob jobs[NTHREADS];
	unsigned char *zero = calloc(1, tail_max);

	cur_phase = "disjoint";
	files_create(1);
	/* The file starts as long as the regions (thread 0 owns what lies past). */
	P_CHECK(zero && bs_write(T.files[0].bs, zero, tail_start, 0) == (ssize_t)tail_start);
	for (int i = 0; i < NTHREADS; i++) {
		struct djob *j = &jobs[i];

		j->id = i;
		j->ops = ops;
		j->start = (size_t)i * region;
		j->end = j->start + region;
		j->tail_start = tail_start;
		j->tail_max = tail_max;
		j->size = tail_start;
		j->shadow = calloc(1, (i == 0 ? tail_max : j->end) - j->start);
		P_CHECK(j->shadow);
	}
	run_threads(d_thread, jobs, sizeof(jobs[0]));
	P_CHECK(bs_file_size(T.files[0].bs) == (off_t)jobs[0].size);
	files_settle(1);
	/* The backing file holds exactly what each thread wrote. */
	for (int i = 0; i < NTHREADS; i++) {
		struct djob *j = &jobs[i];
		struct mem_backing *mf = &T.files[0].mem;

		for (size_t k = j->start; k < j->tail_max; k++) {
			if (k == j->end)
				k = i == 0 ? j->tail_start : j->tail_max;
			if (k >= j->tail_max)
				break;
			unsigned char b = k < mf->len ? mf->data[k] : 0;

			if (b != j->shadow[k - j->start]) {
				fprintf(stderr, "thread %d: backing byte %zu is %#x, wrote %#x\n",
					i, k, b, j->shadow[k - j->start]);
				P_CHECK(!"backing holds each thread's bytes");
			}
		}
		free(j->shadow);
	}
	files_destroy(1);
	free(zero);
}

/* ---- phase: overlapping stamped words ---- */

static _Atomic uint64_t published[NTHREADS];	/* last sequence each thread began */

static uint32_t stamp_hash(uint64_t tid, uint64_t seq, uint64_t word, int file)
{
	uint64_t h = (word + 1) * 0x9e3779b97f4a7c15ull ^ (seq + 7) * 0xc2b2ae3d27d4eb4full ^
		     (tid + 1) * 0x165667b19e3779f9ull ^ (uint64_t)file * 0x27d4eb2f165667c5ull;

	h ^= h >> 29;
	return (uint32_t)(h ^ (h >> 32));
}

static uint64_t stamp(uint64_t tid, uint64_t seq, uint64_t word, int file)
{
	return (tid + 1) << 56 | (seq & 0xffffff) << 32 | stamp_hash(tid, seq, word, file);
}

/* Zero, or a stamp some thread wrote (or began writing) to this word of this file. */
static bool stamp_valid(uint64_t v, uint64_t word, int file)
{
	uint64_t tid = (v >> 56) - 1, seq = (v >> 32) & 0xffffff;

	if (!v)
		return true;
	if ((v >> 56) == 0 || tid >= NTHREADS)
		return false;
	if ((uint32_t)v != stamp_hash(tid, seq, word, file))
		return false;
	return seq <= (atomic_load(&published[tid]) & 0xffffff);
}

struct ojob {
	int id;
	int ops;
	int nfiles;
	size_t words;		/* the shared range: [0, words * 8) */
};

static void o_check(const struct ojob *j, int fi, const uint64_t *buf, size_t first, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		if (!stamp_valid(buf[k], first + k, fi)) {
			fprintf(stderr, "thread %d: file %d word %zu (byte %zu) reads %#llx: not written there\n",
				j->id, fi, first + k, (first + k) * 8, (unsigned long long)buf[k]);
			P_CHECK(!"every word read was written to that word");
		}
	}
}

static void *o_thread(void *arg)
{
	struct ojob *j = arg;
	uint64_t rs = 0xabcdefull * (uint64_t)(j->id + 3), seq = 0;
	uint64_t *buf = malloc(j->words * 8 + 8);
	/* This thread's open of each file, and where its last read of it ended. */
	struct bs_ra ra[MAX_FILES];
	size_t read_end[MAX_FILES] = { 0 };

	P_CHECK(buf);
	for (int fi = 0; fi < MAX_FILES; fi++)
		bs_ra_init(&ra[fi]);
	for (int op = 0; op < j->ops; op++) {
		int fi = (int)rnd_below(&rs, (uint64_t)j->nfiles);
		struct bs_file *f = T.files[fi].bs;
		size_t first = rnd_below(&rs, j->words);
		size_t n = rnd_below(&rs, 4) ? 1 + rnd_below(&rs, T.bsize / 4)
					     : 1 + rnd_below(&rs, T.fsize / 4);
		unsigned int r = (unsigned int)rnd_below(&rs, 100);
		ssize_t got;

		if (first + n > j->words)
			n = j->words - first;
		if (r < 45) {
			seq++;
			atomic_store(&published[j->id], seq);
			for (size_t k = 0; k < n; k++)
				buf[k] = stamp((uint64_t)j->id, seq, first + k, fi);
			P_CHECK(bs_write(f, buf, n * 8, (off_t)(first * 8)) == (ssize_t)(n * 8));
		} else if (r < 90 || j->id != 0) {
			/*
			 * Every other read goes on where this thread's last
			 * read of the file ended: a stream, so that readahead
			 * windows run beside everything else.
			 */
			if ((r & 1) && read_end[fi] < j->words) {
				first = read_end[fi];
				if (first + n > j->words)
					n = j->words - first;
			}
			got = bs_read(f, &ra[fi], buf, n * 8, (off_t)(first * 8));
			read_end[fi] = first + (size_t)got / 8;
			P_CHECK(got >= 0 && got % 8 == 0 && (size_t)got <= n * 8);
			o_check(j, fi, buf, first, (size_t)got / 8);
		} else if (r < 95) {
			/* Truncate (thread 0 only), at a word boundary. */
			P_CHECK(bs_truncate(f, (off_t)(rnd_below(&rs, j->words + 1) * 8)) == 0);
		} else {
			int mode = rnd_below(&rs, 2) ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
						     : FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;

			P_CHECK(bs_fallocate(f, mode, (off_t)(first * 8), (off_t)(n * 8)) == 0);
		}
	}
	for (int fi = 0; fi < MAX_FILES; fi++)
		bs_ra_destroy(&ra[fi]);
	free(buf);
	return NULL;
}

static void phase_overlap(int nfiles, int ops)
{
	struct ojob jobs[NTHREADS];
	/* Each file is larger than the whole cache: reclaim all the time. */
	size_t words = (size_t)T.cache_bytes * 5 / 4 / 8 + T.bsize / 8 + 5;

	cur_phase = nfiles == 1 ? "overlap1" : "overlap2";
	files_create(nfiles);
	for (int i = 0; i < NTHREADS; i++)
		jobs[i] = (struct ojob){ .id = i, .ops = ops, .nfiles = nfiles, .words = words };
	run_threads(o_thread, jobs, sizeof(jobs[0]));
	files_settle(nfiles);
	/* Every word of the final contents is valid too. */
	for (int fi = 0; fi < nfiles; fi++) {
		size_t size = (size_t)bs_file_size(T.files[fi].bs);
		uint64_t *buf = malloc(size + 8);

		P_CHECK(buf && size % 8 == 0);
		P_CHECK(bs_read(T.files[fi].bs, mem_thread_ra(), buf, size, 0) == (ssize_t)size);
		o_check(&jobs[0], fi, buf, 0, size / 8);
		free(buf);
	}
	files_destroy(nfiles);
}

/* ---- phase: a truncate between a collection's start and its end ---- */

/*
 * Staging, with the folio lock of the first folio W held by a helper
 * thread (that takes no other lock meanwhile, so the lock order stays
 * blockstate's): the collector thread starts bs_wb_collect() from 0 and
 * blocks on W; main truncates to a size past W, so the truncate waits
 * (finding no writeback) on the folios past the new size and truncates
 * the backing file; then, inside that backing truncate, main has the
 * helper let W go.  The collector then finds the truncate in flight and
 * waits for it (a truncate down pauses collection until the cache's tail
 * is zeroed), and collects, copies and completes once it is done.  Runs
 * of folios wholly past the new size must not have been collected (they
 * would write old bytes past EOF of the already truncated backing file,
 * and extending the file again would expose them).
 */
struct tvc {
	struct tfile *tf;
	pthread_mutex_t *w_lock;	/* W's folio lock, held by the helper */
	atomic_bool holding, release;	/* helper */
	atomic_bool started;		/* collector */
	pthread_t helper;
	int runs;
	off_t max_end;			/* end of the last run collected */
};

static void *tvc_helper(void *arg)
{
	struct tvc *c = arg;

	pthread_mutex_lock(c->w_lock);
	atomic_store(&c->holding, true);
	while (!atomic_load(&c->release))
		usleep(1000);
	pthread_mutex_unlock(c->w_lock);
	return NULL;
}

static void *tvc_collector(void *arg)
{
	struct tvc *c = arg;
	struct bs_wb_run runs[MAX_RUNS];
	off_t pos = 0;
	int n;

	pthread_mutex_lock(&c->tf->wb_lock);
	atomic_store(&c->started, true);
	n = bs_wb_collect(c->tf->bs, &pos, INT64_MAX, runs, MAX_RUNS, SIZE_MAX);
	c->runs = n;
	for (int i = 0; i < n; i++) {
		if (runs[i].off + (off_t)runs[i].len > c->max_end)
			c->max_end = runs[i].off + (off_t)runs[i].len;
		run_copy(c->tf, &runs[i], 0);
		bs_wb_complete(c->tf->bs, &runs[i], 0);
	}
	pthread_mutex_unlock(&c->tf->wb_lock);
	return NULL;
}

static void tvc_after_truncate(void *arg)
{
	struct tvc *c = arg;

	c->tf->mem.after_truncate = NULL;
	atomic_store(&c->release, true);
	P_CHECK(pthread_join(c->helper, NULL) == 0);
}

static void phase_truncate_vs_collect(void)
{
	size_t fsize = T.fsize, total = 4 * fsize, cut = fsize + fsize / 2 + 100;
	unsigned char *buf = malloc(total);
	struct tvc c = { 0 };
	struct bs_folio *w;
	struct tfile *tf;
	pthread_t th;

	cur_phase = "truncate_vs_collect";
	files_create(1);
	tf = &T.files[0];
	P_CHECK(buf);
	memset(buf, 0xab, total);
	P_CHECK(bs_write(tf->bs, buf, total, 0) == (ssize_t)total);
	/* W: the folio at 0, wholly before the new size. */
	pthread_rwlock_rdlock(&tf->bs->index_lock);
	w = bs_index_lookup(&tf->bs->index, 0);
	P_CHECK(w && w->start + (off_t)w->size <= (off_t)cut);
	pthread_rwlock_unlock(&tf->bs->index_lock);
	c.tf = tf;
	c.w_lock = &w->sync->lock;
	P_CHECK(pthread_create(&c.helper, NULL, tvc_helper, &c) == 0);
	while (!atomic_load(&c.holding))
		usleep(1000);
	P_CHECK(pthread_create(&th, NULL, tvc_collector, &c) == 0);
	while (!atomic_load(&c.started))
		usleep(1000);
	usleep(200 * 1000);	/* let it reach W's lock (a miss only weakens the test) */
	tf->mem.after_truncate = tvc_after_truncate;
	tf->mem.after_truncate_arg = &c;
	P_CHECK(bs_truncate(tf->bs, (off_t)cut) == 0);
	P_CHECK(pthread_join(th, NULL) == 0);
	P_CHECK(c.runs > 0);
	/* Nothing written past the new size. */
	pthread_mutex_lock(&tf->mem.lock);
	for (size_t k = cut; k < tf->mem.len; k++) {
		if (tf->mem.data[k]) {
			fprintf(stderr, "backing byte %zu is %#x past the new size %zu (runs collected up to %lld)\n",
				k, tf->mem.data[k], cut, (long long)c.max_end);
			P_CHECK(!"no old bytes past EOF in the backing file");
		}
	}
	pthread_mutex_unlock(&tf->mem.lock);
	/* Extend again: the bytes past the old cut read as zeros. */
	P_CHECK(bs_truncate(tf->bs, (off_t)total) == 0);
	P_CHECK(bs_read(tf->bs, mem_thread_ra(), buf, total, 0) == (ssize_t)total);
	for (size_t k = cut; k < total; k++)
		P_CHECK(buf[k] == 0);
	files_settle(1);
	files_destroy(1);
	free(buf);
}

/* ---- main ---- */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void run_config(uint32_t bsize, uint32_t fsize, uint32_t cache_folios,
		       const char *account, const char *sizing, bool async, int ops)
{
	struct bs_config cfg = {
		.block_size = bsize, .folio_size = fsize,
		.cache_size = (uint64_t)cache_folios * fsize,
		.account = bs_account_policy_find(account),
		.size = bs_size_policy_find(sizing),
		/* Windows of up to four folios: readahead runs beside everything. */
		.readahead_kb = 4 * fsize / 1024,
	};
	struct bs_stats st;
	double t0 = now();

	T.bsize = bsize;
	T.fsize = fsize;
	T.cache_bytes = cfg.cache_size;
	atomic_store(&T.wb_runs, 0);
	atomic_store(&T.wb_failed, 0);
	atomic_store(&T.nc_calls, 0);
	T.async = async;
	A.started = A.failed = 0;
	A.stop = false;
	if (async)
		P_CHECK(pthread_create(&A.thread, NULL, aio_main, NULL) == 0);
	P_CHECK(bs_cache_create(&cfg, &cache_ops, NULL, &T.cache) == 0);
	phase_truncate_vs_collect();
	phase_disjoint(ops);
	phase_overlap(1, ops);
	phase_overlap(2, ops);
	bs_cache_stats(T.cache, &st);
	P_CHECK(st.folios == 0 && st.cache_bytes == 0);
	if (async) {
		/* Every file is gone, so no read is left (bs_file_destroy waits). */
		pthread_mutex_lock(&A.lock);
		P_CHECK(A.nr == 0);
		A.stop = true;
		pthread_cond_signal(&A.cond);
		pthread_mutex_unlock(&A.lock);
		pthread_join(A.thread, NULL);
		/* Readahead did start reads here, and they overlapped the rest. */
		P_CHECK(A.started > 0 && st.ra_async_ios == A.started);
	}
	printf("block %u folio %u cache %u folios %s/%s%s: %llu reclaimed, %llu stalls, %llu need_clean, %llu runs (%llu failed), %llu readahead reads (%llu async, %llu failed), %.1f s\n",
	       bsize, fsize, cache_folios, account, sizing, async ? ", async reads" : "",
	       (unsigned long long)st.reclaimed_folios, (unsigned long long)st.reclaim_stalls,
	       (unsigned long long)atomic_load(&T.nc_calls),
	       (unsigned long long)atomic_load(&T.wb_runs),
	       (unsigned long long)atomic_load(&T.wb_failed), (unsigned long long)st.ra_ios,
	       (unsigned long long)A.started, (unsigned long long)A.failed, now() - t0);
	fflush(stdout);
	bs_cache_destroy(T.cache);
	T.cache = NULL;
}

/* TSan runs about ten times slower: fewer operations there. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

int main(void)
{
	int ops = scaled(UNDER_TSAN ? 15000 : 40000);

	T.racy_copy = getenv("BS_TEST_RACY_COPY") != NULL;
	run_config(1024, 65536, 6, "page", "ramp", false, ops);
	run_config(4096, 16384, 4, "folio", "fixed", false, ops);
	run_config(512, 4096, 4, "block", "ramp", false, ops);
	run_config(1024, 65536, 6, "page", "kernel", true, ops / 4);
	run_config(4096, 16384, 4, "folio", "fixed", true, ops / 4);
	run_config(512, 4096, 4, "block", "ramp", true, ops / 4);
	return T_EXIT_PASS;
}
