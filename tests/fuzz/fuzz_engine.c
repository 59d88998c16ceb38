// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_engine - the blockstate engine driven by an operation sequence
 * decoded from the input, against a shadow of the file's bytes.
 *
 * The first bytes choose the configuration: block size (512 B .. 64 KiB),
 * folio size (up to 512 KiB), a cache of 4 .. 10 folios (so that reclaim
 * and need_clean run often), the accounting and sizing policies and the
 * backing file's initial size.  The file's backing store is in memory
 * (struct mem_backing, the unit tests' bs_backing_ops).  Then each
 * operation is an opcode byte and its arguments:
 *   write, read (compared with the shadow), read of the whole file,
 *   truncate, punch hole, zero range, allocate, a writeback pass over a
 *   range (any collect mode and limits, each run completed with success
 *   or -EIO as the input says), a sync of the backing file that succeeds
 *   or fails, a switch of accounting policy (bs_cache_set_account), and a
 *   write that lands while a collected batch is in flight.
 * need_clean (reclaim found nothing clean) writes everything back and
 * syncs, unless a batch of ours is in flight.  Checked:
 *   - every read returns the shadow's bytes, and the size is the shadow's;
 *   - bs_cache_check() == 0 after every operation and at the end;
 *   - a final full writeback, with the backing size then set to
 *     bs_file_size() as the writeback layer does, leaves the backing
 *     bytes equal to the shadow.
 * The model keeps bytes only: which blocks are dirty is blockstate's
 * business (tests/unit/test_blockstate.c models that); what the fuzzer
 * adds is sequences nobody wrote by hand.
 */
#include "bs_i.h"
#include "../unit/mem_backing.h"

#include <errno.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RUNS 16
#define MAX_OPS 256
#define MAX_FILE (4u << 20)

/* ---- input ---- */

struct input {
	const uint8_t *p, *end;
};

static uint64_t take(struct input *in, int bytes)
{
	uint64_t v = 0;

	for (int i = 0; i < bytes && in->p < in->end; i++)
		v = v << 8 | *in->p++;
	return v;
}

/* The backing file: tests/unit/mem_backing.h. */


/* ---- the state of one run ---- */

struct fctx {
	struct bs_cache *cache;
	struct bs_file *file;
	struct mem_backing mem;
	unsigned char *shadow;	/* max_size bytes, zero past size */
	size_t size;
	size_t max_size;
	uint32_t bsize, fsize;
	unsigned char *buf;	/* max_size + a folio */
	unsigned char *copy;	/* run snapshots */
	bool in_flight;		/* a batch of ours is collected, not completed */
	int op;			/* index of the operation, for messages */
	const char *what;
};

static void fail(struct fctx *t, const char *why)
{
	fprintf(stderr, "fuzz_engine: op %d (%s): %s (block %u, folio %u, size %zu)\n", t->op,
		t->what, why, t->bsize, t->fsize, t->size);
	abort();
}

#define CHECK(t, cond)                        \
	do {                                  \
		if (!(cond))                  \
			fail((t), #cond);     \
	} while (0)

/* ---- writeback ---- */

/* Write one completed run's bytes to the backing file. */
static void run_write(struct fctx *t, const struct bs_wb_run *r, const void *bytes,
		      unsigned int flags)
{
	off_t size = bs_file_size(t->file);

	mem_backing_write(&t->mem, bytes, r->len, r->off);
	/* A whole-blocks run may pass EOF: the caller restores the size. */
	if ((flags & BS_WB_WHOLE_BLOCKS) && t->mem.len > (size_t)size &&
	    (off_t)(r->off + r->len) > size)
		mem_backing_set_len(&t->mem, (size_t)size);
}

struct collect_args {
	int max_runs;
	size_t max_bytes;
	size_t max_run;		/* a multiple of the block size, or SIZE_MAX */
	unsigned int flags;
};

static int collect(struct fctx *t, off_t *pos, off_t end, struct bs_wb_run *runs,
		   const struct collect_args *ca)
{
	off_t before = *pos;
	int n;

	if (!ca->flags && ca->max_run == SIZE_MAX)
		n = bs_wb_collect(t->file, pos, end, runs, ca->max_runs, ca->max_bytes);
	else
		n = bs_wb_collect_mode(t->file, pos, end, runs, ca->max_runs, ca->max_bytes,
				       ca->max_run, ca->flags);
	CHECK(t, n >= 0 && n <= ca->max_runs);
	for (int i = 0; i < n; i++) {
		CHECK(t, runs[i].len > 0 && runs[i].len <= t->fsize);
		CHECK(t, runs[i].off >= before - before % t->bsize);
		CHECK(t, i == 0 || runs[i].off >= runs[i - 1].off + (off_t)runs[i - 1].len);
	}
	return n;
}

/*
 * A writeback pass over [start, end): batches until one is empty, run i
 * of the pass failing when bit i % 64 of @fail_mask is set.  Returns how
 * many failed.
 */
static int writeback(struct fctx *t, off_t start, off_t end, struct collect_args ca,
		     uint64_t fail_mask)
{
	struct bs_wb_run runs[MAX_RUNS];
	off_t pos = start;
	int failed = 0, nth = 0;

	for (int batch = 0;; batch++) {
		int n = collect(t, &pos, end, runs, &ca);

		if (n == 0)
			break;
		/* Far more batches than a file of max_size has blocks: no progress. */
		CHECK(t, batch < 1000000);
		for (int i = 0; i < n; i++, nth++) {
			if (fail_mask >> (nth % 64) & 1) {
				bs_wb_complete(t->file, &runs[i], -EIO);
				failed++;
				continue;
			}
			bs_wb_copy(&runs[i], t->copy);
			run_write(t, &runs[i], t->copy, ca.flags);
			bs_wb_complete(t->file, &runs[i], 0);
		}
	}
	return failed;
}

static void sync_file(struct fctx *t, int err)
{
	uint64_t token = bs_sync_begin(t->file);

	bs_sync_end(t->file, token, err);
}

/* Everything written back and synced: what the writeback layer does for reclaim. */
static void need_clean(void *arg)
{
	struct fctx *t = arg;
	struct collect_args ca = { .max_runs = MAX_RUNS, .max_bytes = SIZE_MAX,
				   .max_run = SIZE_MAX };

	if (t->in_flight)
		return;
	CHECK(t, writeback(t, 0, INT64_MAX, ca, 0) == 0);
	sync_file(t, 0);
}

static const struct bs_cache_ops cache_ops = { .need_clean = need_clean };

/* ---- operations ---- */

/* An offset in [0, limit]: near a folio, block or page edge, or anywhere. */
static size_t get_off(struct fctx *t, struct input *in, size_t limit)
{
	unsigned int mode = (unsigned int)take(in, 1);
	uint64_t v = take(in, 3);
	size_t unit, off;

	switch (mode & 3) {
	case 0: unit = t->fsize; break;
	case 1: unit = t->bsize; break;
	case 2: unit = BS_PAGE_SIZE; break;
	default: return v % (limit + 1);
	}
	off = (v % (limit / unit + 1)) * unit;
	off += (mode >> 2) % 5;
	off = off >= 2 ? off - 2 : 0;
	return off > limit ? limit : off;
}

static size_t get_len(struct fctx *t, struct input *in, size_t off)
{
	unsigned int mode = (unsigned int)take(in, 1);
	uint64_t v = take(in, 3);
	size_t len;

	switch (mode & 7) {
	case 0: len = 0; break;
	case 1: len = 1 + v % 16; break;
	case 2: len = 1 + v % (2 * (uint64_t)t->bsize); break;
	case 3: len = (1 + v % 4) * t->bsize; break;
	case 4: len = t->fsize; break;
	case 5: len = 1 + v % (t->fsize + t->fsize / 2); break;
	default: len = 1 + v % 65536; break;
	}
	return len > t->max_size - off ? t->max_size - off : len;
}

static void fill(unsigned char *buf, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(seed + i * 131 + (i >> 8));
}

static void check_read(struct fctx *t, size_t off, size_t len)
{
	size_t expect = off >= t->size ? 0 : (len < t->size - off ? len : t->size - off);
	ssize_t ret;

	memset(t->buf, 0xee, len);
	ret = bs_read(t->file, NULL, t->buf, len, (off_t)off);
	if (ret != (ssize_t)expect) {
		fprintf(stderr, "read [%zu, +%zu): %zd, expected %zu\n", off, len, ret, expect);
		fail(t, "read returns the size's worth");
	}
	if (ret > 0 && memcmp(t->buf, t->shadow + off, (size_t)ret) != 0) {
		for (size_t i = 0; i < (size_t)ret; i++) {
			if (t->buf[i] != t->shadow[off + i]) {
				fprintf(stderr, "read [%zu, +%zu): byte %zu is %#x, shadow %#x\n",
					off, len, off + i, t->buf[i], t->shadow[off + i]);
				break;
			}
		}
		fail(t, "read returns the shadow's bytes");
	}
}

/*
 * bs_write() of @len bytes at @off, into the shadow too.  Complete, but
 * while our batch is in flight: need_clean cannot help then, so a write
 * that needs a new folio in a cache full of pinned data may stop short
 * or fail with -ENOSPC (blockstate.h), as it would if writeback hung.
 */
static void do_write(struct fctx *t, size_t off, size_t len, unsigned int seed)
{
	ssize_t ret;
	size_t done;

	fill(t->buf, len, seed);
	ret = bs_write(t->file, t->buf, len, (off_t)off);
	if (ret != (ssize_t)len &&
	    !(t->in_flight && (ret == -ENOSPC || (ret >= 0 && (size_t)ret < len)))) {
		fprintf(stderr, "write [%zu, +%zu): %zd\n", off, len, ret);
		fail(t, "write is complete");
	}
	done = ret > 0 ? (size_t)ret : 0;
	memcpy(t->shadow + off, t->buf, done);
	if (done && off + done > t->size)
		t->size = off + done;
}

static void op_truncate(struct fctx *t, struct input *in)
{
	size_t size = get_off(t, in, t->max_size);

	t->what = "truncate";
	CHECK(t, bs_truncate(t->file, (off_t)size) == 0);
	if (size < t->size)
		memset(t->shadow + size, 0, t->size - size);
	t->size = size;
}

static void op_fallocate(struct fctx *t, struct input *in, unsigned int kind)
{
	size_t off = get_off(t, in, t->max_size - 1), len = get_len(t, in, off), end;
	bool keep = take(in, 1) & 1;
	int mode;

	if (!len)
		len = 1;
	end = off + len;
	switch (kind) {
	case 0:
		t->what = "punch";
		mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
		break;
	case 1:
		t->what = "zero range";
		mode = FALLOC_FL_ZERO_RANGE | (keep ? FALLOC_FL_KEEP_SIZE : 0);
		break;
	default:
		t->what = "allocate";
		mode = keep ? FALLOC_FL_KEEP_SIZE : 0;
		break;
	}
	CHECK(t, bs_fallocate(t->file, mode, (off_t)off, (off_t)len) == 0);
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
		size_t zend = end < t->size ? end : t->size;

		if (off < zend)
			memset(t->shadow + off, 0, zend - off);
	}
	if (!(mode & (FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)) && end > t->size)
		t->size = end;
}

static struct collect_args get_collect(struct fctx *t, struct input *in)
{
	unsigned int b = (unsigned int)take(in, 1), c = (unsigned int)take(in, 1);
	struct collect_args ca = { .max_runs = 1 + (int)(b % MAX_RUNS) };

	switch (c & 3) {
	case 0: ca.max_bytes = t->bsize; break;
	case 1: ca.max_bytes = 1 + (size_t)take(in, 3) % (4 * (uint64_t)t->fsize); break;
	default: ca.max_bytes = SIZE_MAX; break;
	}
	ca.max_run = c & 4 ? (1 + (c >> 5)) * (size_t)t->bsize : SIZE_MAX;
	ca.flags = (b >> 4) & 3;	/* BS_WB_WHOLE_FOLIO, BS_WB_WHOLE_BLOCKS */
	return ca;
}

static void op_writeback(struct fctx *t, struct input *in)
{
	size_t start = get_off(t, in, t->max_size), len = get_len(t, in, start);
	struct collect_args ca = get_collect(t, in);
	uint64_t mask = take(in, 1);
	off_t end = mask & 0x80 ? INT64_MAX : (off_t)(start + len);

	t->what = "writeback pass";
	/* Mostly all succeed, or every other, or all fail. */
	switch (mask & 3) {
	case 0: case 1: mask = 0; break;
	case 2: mask = 0x5555555555555555ull >> (mask >> 2 & 1); break;
	default: mask = ~0ull; break;
	}
	writeback(t, (off_t)start, end, ca, mask);
}

/* Collect one batch; write and read while it is in flight; complete it. */
static void op_write_in_flight(struct fctx *t, struct input *in)
{
	struct bs_wb_run runs[MAX_RUNS];
	off_t pos = (off_t)get_off(t, in, t->max_size) / 2;
	struct collect_args ca = get_collect(t, in);
	unsigned int how = (unsigned int)take(in, 1);
	size_t woff, wlen;
	unsigned char *snap[MAX_RUNS] = { NULL };
	int n;

	t->what = "write during writeback";
	n = collect(t, &pos, INT64_MAX, runs, &ca);
	t->in_flight = true;
	/* Snapshots taken before the write (as a submitted I/O has them) or after. */
	for (int i = 0; i < n && (how & 1); i++) {
		snap[i] = malloc(runs[i].len);
		if (!snap[i])
			abort();
		bs_wb_copy(&runs[i], snap[i]);
	}
	if (n) {
		const struct bs_wb_run *r = &runs[take(in, 1) % (unsigned int)n];

		woff = (size_t)r->off + (size_t)take(in, 3) % r->len;
	} else {
		woff = get_off(t, in, t->max_size);
	}
	wlen = get_len(t, in, woff);
	do_write(t, woff, wlen, how);
	if (how & 2) {
		size_t off = get_off(t, in, t->max_size);

		check_read(t, off, get_len(t, in, off));
	}
	for (int i = 0; i < n; i++) {
		if (how & 4) {
			bs_wb_complete(t->file, &runs[i], -EIO);
			continue;
		}
		if (!snap[i]) {
			bs_wb_copy(&runs[i], t->copy);
			run_write(t, &runs[i], t->copy, ca.flags);
		} else {
			run_write(t, &runs[i], snap[i], ca.flags);
		}
		bs_wb_complete(t->file, &runs[i], 0);
	}
	for (int i = 0; i < n; i++)
		free(snap[i]);
	t->in_flight = false;
}

static void step(struct fctx *t, struct input *in)
{
	unsigned int op = (unsigned int)take(in, 1);
	size_t off, len;

	switch (op % 12) {
	case 0: case 1:
		t->what = "write";
		off = get_off(t, in, t->max_size);
		len = get_len(t, in, off);
		do_write(t, off, len, op);
		break;
	case 2: case 3:
		t->what = "read";
		off = get_off(t, in, t->max_size);
		len = get_len(t, in, off);
		check_read(t, off, len + (op & 0x80 ? t->fsize : 0));
		break;
	case 4:
		op_truncate(t, in);
		break;
	case 5: case 6: case 7:
		op_fallocate(t, in, op % 12 - 5);
		break;
	case 8:
		op_writeback(t, in);
		break;
	case 9:
		t->what = op & 0x80 ? "failing sync" : "sync";
		sync_file(t, op & 0x80 ? -EIO : 0);
		break;
	case 10:
		t->what = "switch accounting";
		for (size_t n = 0;; n++) {
			if (!bs_account_policy_at(n)) {
				bs_cache_set_account(t->cache, bs_account_policy_at((op >> 4) % n));
				break;
			}
		}
		break;
	default:
		if (op & 0x80) {
			t->what = "read all";
			check_read(t, 0, t->max_size);
		} else {
			op_write_in_flight(t, in);
		}
		break;
	}
	CHECK(t, bs_file_size(t->file) == (off_t)t->size);
	CHECK(t, bs_cache_check(t->cache) == 0);
}

static size_t count_policies(bool account)
{
	size_t n = 0;

	while (account ? bs_account_policy_at(n) != NULL : bs_size_policy_at(n) != NULL)
		n++;
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, data + size };
	unsigned int bshift = 9 + (unsigned int)take(&in, 1) % 8;
	unsigned int fshift = (bshift > 12 ? bshift : 12) + (unsigned int)take(&in, 1) % 4;
	unsigned int folios = 4 + (unsigned int)take(&in, 1) % 7;
	unsigned int pol = (unsigned int)take(&in, 1);
	struct fctx t = { 0 };
	struct bs_config cfg;
	struct collect_args all = { .max_runs = MAX_RUNS, .max_bytes = SIZE_MAX,
				    .max_run = SIZE_MAX };
	size_t init;

	if (fshift > 19)
		fshift = 19;
	t.bsize = 1u << bshift;
	t.fsize = 1u << fshift;
	if (t.fsize < t.bsize)
		t.fsize = t.bsize;
	cfg = (struct bs_config){
		.block_size = t.bsize,
		.folio_size = t.fsize,
		.cache_size = (uint64_t)folios * t.fsize,
		.account = bs_account_policy_at((pol & 15) % count_policies(true)),
		.size = bs_size_policy_at((pol >> 4) % count_policies(false)),
	};
	t.max_size = (size_t)(folios + 2) * t.fsize;
	if (t.max_size > MAX_FILE)
		t.max_size = MAX_FILE;
	t.shadow = calloc(1, t.max_size);
	t.buf = malloc(t.max_size + t.fsize);
	t.copy = malloc(t.fsize);
	if (!t.shadow || !t.buf || !t.copy)
		abort();
	t.what = "setup";
	CHECK(&t, bs_cache_create(&cfg, &cache_ops, &t, &t.cache) == 0);
	/* No waiting for writeback that will not come while our batch is in flight. */
	t.cache->full_wait_ms = 0;

	/* The backing file's initial bytes. */
	init = (size_t)take(&in, 3) % (t.max_size + 1);
	mem_backing_init(&t.mem);
	mem_backing_set_len(&t.mem, init);
	if (init) {
		fill(t.mem.data, init, 7);
		memcpy(t.shadow, t.mem.data, init);
	}
	t.size = init;
	CHECK(&t, bs_file_create(t.cache, &mem_backing_ops, &t.mem, (off_t)init, &t.file) == 0);

	for (t.op = 0; in.p < in.end && t.op < MAX_OPS; t.op++)
		step(&t, &in);

	t.what = "final writeback";
	CHECK(&t, writeback(&t, 0, INT64_MAX, all, 0) == 0);
	/* A tail punched, or extended by truncate, has no run that would set it. */
	mem_backing_set_len(&t.mem, (size_t)bs_file_size(t.file));
	sync_file(&t, 0);
	CHECK(&t, bs_cache_check(t.cache) == 0);
	CHECK(&t, t.mem.len == t.size);
	if (t.size && memcmp(t.mem.data, t.shadow, t.size) != 0) {
		for (size_t i = 0; i < t.size; i++) {
			if (t.mem.data[i] != t.shadow[i]) {
				fprintf(stderr, "backing byte %zu is %#x, shadow %#x\n", i,
					t.mem.data[i], t.shadow[i]);
				break;
			}
		}
		fail(&t, "after a full writeback the backing file is the shadow");
	}
	check_read(&t, 0, t.max_size);

	bs_file_destroy(t.file);
	bs_cache_destroy(t.cache);
	mem_backing_destroy(&t.mem);
	free(t.shadow);
	free(t.buf);
	free(t.copy);
	return 0;
}
