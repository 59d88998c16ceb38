// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The io_uring backend when the ring fails part way through a batch
 * (writeback/backing.c): every dirty block must reach the backing file
 * exactly once, with the right bytes, and writeback must never wait for a
 * completion that cannot come.
 *
 * The test links with -Wl,--wrap for the liburing calls backing.c makes
 * and for pwritev, so it sees every write issued to the kernel (an SQE
 * the kernel took, or a pwritev) and can make the ring misbehave:
 *   wait_fails     the writes are taken but still in flight when the first
 *                  wait for a completion fails (once);
 *   partial        a submit takes 5 of the 20 writes; the next one fails;
 *   submit_fails   the first submit fails and takes nothing.
 * Each scenario writes 20 separate blocks and fsyncs, then 20 other blocks
 * and fsyncs again, on one fresh thread (rings are per thread); the
 * wraps pass other threads' calls through.
 *
 * The fallback used to rewrite with pwritev every write not yet reaped,
 * including those still in flight (wait_fails: written twice), and left
 * unsubmitted SQEs in the ring, which the next batch's io_uring_enter()
 * started again with iovecs that were no longer there (submit_fails:
 * written twice, the second time with the next batch's bytes); after a
 * partial submit it waited for completions of writes it never submitted.
 */
#include "writeback.h"
#include "blockstate.h"
#include "test_helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define BLK 4096
#define NR_RUNS 20		/* writes per batch: fewer than the ring's 64 entries */
#define NR_BLKS (2 * NR_RUNS)
#define PARTIAL 5		/* writes the partial submit takes */

enum mode { NORMAL, WAIT_FAILS, PARTIAL_SUBMIT, SUBMIT_FAILS };

static const char *const mode_names[] = { "normal", "wait_fails", "partial", "submit_fails" };

/*
 * The writeback thread of the test; the wraps leave every other thread's
 * ring alone (the context's readahead reader has one of its own).
 */
static __thread bool test_thread;

/* Set by main before the writeback thread starts; used by that thread only. */
static enum mode scenario;
static enum mode next_submit;		/* what the next submit does */
static bool deferred;			/* wait_fails: writes taken, not yet entered */
static unsigned int issued;		/* SQEs the kernel took from this thread's ring */
static unsigned int hung_waits;		/* waits with nothing in flight */
static unsigned int submits;		/* io_uring submits asked for */
static bool injected;			/* the scenario's failure happened */
static unsigned int writes_of[NR_BLKS];	/* times each block was written */
static unsigned int stray_writes;	/* writes outside the test's blocks */

static void note_write(uint64_t off, uint64_t len)
{
	if (off % BLK || len % BLK || off / BLK + len / BLK > (uint64_t)NR_BLKS || !len) {
		stray_writes++;
		return;
	}
	for (uint64_t b = off / BLK; b < (off + len) / BLK; b++)
		writes_of[b]++;
}

/* -Wl,--wrap=X sends calls of X to __wrap_X; __real_X is X itself. */
ssize_t real_pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t off)
	__asm__("__real_pwritev64");
ssize_t wrap_pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t off)
	__asm__("__wrap_pwritev64");
int real_io_uring_submit(struct io_uring *ring)
	__asm__("__real_io_uring_submit");
int wrap_io_uring_submit(struct io_uring *ring)
	__asm__("__wrap_io_uring_submit");
int wrap_io_uring_submit_and_wait(struct io_uring *ring, unsigned int wait_nr)
	__asm__("__wrap_io_uring_submit_and_wait");
int real_io_uring_submit_and_wait(struct io_uring *ring, unsigned int wait_nr)
	__asm__("__real_io_uring_submit_and_wait");
int real_io_uring_get_cqe(struct io_uring *ring, struct io_uring_cqe **cqe_ptr,
			  unsigned int submit, unsigned int wait_nr, sigset_t *sigmask)
	__asm__("__real___io_uring_get_cqe");
int wrap_io_uring_get_cqe(struct io_uring *ring, struct io_uring_cqe **cqe_ptr,
			  unsigned int submit, unsigned int wait_nr, sigset_t *sigmask)
	__asm__("__wrap___io_uring_get_cqe");

ssize_t wrap_pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t off)
{
	ssize_t n = real_pwritev64(fd, iov, iovcnt, off);

	if (n > 0)
		note_write((uint64_t)off, (uint64_t)n);
	return n;
}

/* Submit what is queued and count the SQEs the kernel took as written. */
static int submit_counted(struct io_uring *ring)
{
	unsigned int head = *ring->sq.khead;
	int ret = real_io_uring_submit(ring);

	for (int i = 0; i < ret; i++) {
		const struct io_uring_sqe *sqe = &ring->sq.sqes[(head + (unsigned int)i) &
								 ring->sq.ring_mask];
		const struct iovec *iov = (const struct iovec *)(uintptr_t)sqe->addr;
		uint64_t len = 0;

		T_CHECK(sqe->opcode == IORING_OP_WRITEV);
		for (unsigned int k = 0; k < sqe->len; k++)
			len += iov[k].iov_len;
		note_write(sqe->off, len);
	}
	if (ret > 0)
		issued += (unsigned int)ret;
	return ret;
}

/*
 * Submit only the first @nr queued SQEs; the rest stay queued.  liburing
 * hands the kernel everything up to sq.sqe_tail, so the tail is moved
 * back for the call.
 */
static int submit_first(struct io_uring *ring, unsigned int nr)
{
	unsigned int tail = ring->sq.sqe_tail;
	int ret;

	ring->sq.sqe_tail = *ring->sq.khead + nr;
	ret = submit_counted(ring);
	ring->sq.sqe_tail = tail;
	return ret;
}

int wrap_io_uring_submit(struct io_uring *ring)
{
	enum mode what = next_submit;

	if (!test_thread)
		return real_io_uring_submit(ring);

	submits++;
	next_submit = what == PARTIAL_SUBMIT ? SUBMIT_FAILS : NORMAL;
	switch (what) {
	case WAIT_FAILS:
		/* Taken, as far as the caller can tell; entered at its first wait. */
		deferred = true;
		return (int)io_uring_sq_ready(ring);
	case PARTIAL_SUBMIT:
		return submit_first(ring, PARTIAL);
	case SUBMIT_FAILS:
		injected = true;
		return -ENOMEM;
	default:
		return submit_counted(ring);
	}
}

/*
 * Only the code before the fix calls this (it submitted and waited in one
 * call); its reaping loop waits for each completion anyway.
 */
int wrap_io_uring_submit_and_wait(struct io_uring *ring, unsigned int wait_nr)
{
	if (!test_thread)
		return real_io_uring_submit_and_wait(ring, wait_nr);
	return wrap_io_uring_submit(ring);
}

int wrap_io_uring_get_cqe(struct io_uring *ring, struct io_uring_cqe **cqe_ptr,
			  unsigned int submit, unsigned int wait_nr, sigset_t *sigmask)
{
	if (!test_thread)
		return real_io_uring_get_cqe(ring, cqe_ptr, submit, wait_nr, sigmask);
	if (deferred) {
		/* The writes start now, and the wait for them fails. */
		deferred = false;
		injected = true;
		T_CHECK(submit_counted(ring) > 0);
		return -EAGAIN;
	}
	if (!submit && wait_nr && *ring->cq.khead == *ring->cq.ktail &&
	    *ring->cq.ktail == issued) {
		/* Nothing of ours in flight: the real wait would never return. */
		hung_waits++;
		return -ETIME;
	}
	return real_io_uring_get_cqe(ring, cqe_ptr, submit, wait_nr, sigmask);
}

/* ---- the scenarios ---- */

static struct wb_file *file;
static unsigned char expect[NR_BLKS * BLK];
static int fsync_res[2];

/* Dirty every other block, starting at @first, and fsync: one batch of NR_RUNS writes. */
static void write_and_fsync(unsigned int first, int round)
{
	for (unsigned int b = first; b < NR_BLKS; b += 2) {
		unsigned char *p = expect + (size_t)b * BLK;

		memset(p, (int)(1 + b + NR_BLKS * (unsigned int)scenario), BLK);
		T_CHECK(wb_write(file, p, BLK, (off_t)b * BLK, NULL) == BLK);
	}
	fsync_res[round] = wb_fsync(file, true, NULL);
}

static void *writeback_thread(void *arg)
{
	(void)arg;
	test_thread = true;
	write_and_fsync(0, 0);
	write_and_fsync(1, 1);
	return NULL;
}

static int run(enum mode m)
{
	struct bs_config bcfg = {
		.block_size = BLK, .folio_size = 64 << 10, .cache_size = 16 << 20,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find("fixed"),
	};
	char path[] = "/tmp/foliofs-uringtest-XXXXXX";
	static unsigned char got[NR_BLKS * BLK];
	struct wb_config wcfg;
	struct wb_ctx *ctx;
	pthread_t thr;
	int fd = mkstemp(path), bad = 0, twice = 0, wrong = 0;

	T_CHECK(fd >= 0);
	wb_config_default(&wcfg);
	wcfg.flushers = 0;		/* only the test's thread writes back */
	wcfg.backing_io = WB_IO_URING;
	T_CHECK(wb_ctx_create(&bcfg, &wcfg, &ctx) == 0);
	T_CHECK(wb_file_alloc(ctx, fd, WB_RDWR, &file) == 0);

	scenario = next_submit = m;
	issued = hung_waits = submits = stray_writes = 0;
	deferred = injected = false;
	memset(writes_of, 0, sizeof(writes_of));
	T_CHECK(pthread_create(&thr, NULL, writeback_thread, NULL) == 0);
	T_CHECK(pthread_join(thr, NULL) == 0);

	T_CHECK(wb_file_free(file) == 0);
	wb_ctx_destroy(ctx);
	fd = open(path, O_RDONLY);
	T_CHECK(fd >= 0);
	T_CHECK(pread(fd, got, sizeof(got), 0) == (ssize_t)sizeof(got));
	close(fd);
	unlink(path);

	for (int i = 0; i < 2; i++) {
		if (fsync_res[i]) {
			fprintf(stderr, "%s: fsync %d returned %d\n", mode_names[m], i, fsync_res[i]);
			bad++;
		}
	}
	for (int b = 0; b < NR_BLKS; b++) {
		twice += writes_of[b] != 1;
		wrong += memcmp(got + (size_t)b * BLK, expect + (size_t)b * BLK, BLK) != 0;
	}
	if (twice || wrong) {
		fprintf(stderr, "%s: of %d blocks, %d not written exactly once "
			"(block 0: %u times), %d with the wrong bytes\n",
			mode_names[m], NR_BLKS, twice, writes_of[0], wrong);
		bad++;
	}
	if (stray_writes || hung_waits) {
		fprintf(stderr, "%s: %u writes outside the blocks, %u waits with nothing in flight\n",
			mode_names[m], stray_writes, hung_waits);
		bad++;
	}
	/* Each scenario must have used the ring and met its failure. */
	if (!submits || injected != (m != NORMAL)) {
		fprintf(stderr, "%s: io_uring was not used, or not failed\n", mode_names[m]);
		bad++;
	}
	return bad;
}

int main(void)
{
	struct io_uring probe;
	int bad = 0;

	if (io_uring_queue_init(4, &probe, 0) < 0) {
		fprintf(stderr, "io_uring unavailable: skipped\n");
		return T_EXIT_SKIP;
	}
	io_uring_queue_exit(&probe);
	for (enum mode m = NORMAL; m <= SUBMIT_FAILS; m++)
		bad += run(m);
	return bad ? T_EXIT_FAIL : T_EXIT_PASS;
}
