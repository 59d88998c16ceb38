// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Truncating into the middle of a block while a flusher writes whole
 * blocks (BS_WB_WHOLE_BLOCKS, as O_DIRECT backing does), at library level.
 *
 * The main thread, round after round: writes one block of random bytes
 * that are never zero at the end of the file, truncates into the middle of
 * that block, extends the file again by a truncate, then asks the flusher
 * to write back everything and to set the backing size (as wb_sync_size
 * does).  The bytes between the cut and the block's end must then be zero
 * in the backing file, as POSIX says of an extended file.
 *
 * The flusher thread collects runs all the time and writes each whole
 * block to an in-memory backing file, which grows like a file written
 * with O_DIRECT.  A run of the block holding the new EOF collected after
 * truncate set the smaller size, but before it zeroed the cache's tail,
 * carried the old bytes past the cut; written after the backing truncate,
 * the extension kept them (seen once as wrong data in
 * test_reclaim_stress[2m-page] with backing_direct=auto).  The write
 * takes a little while here, as a real one does, which makes that window
 * wide; the test cannot fail when collection waits for the truncate.
 */
#include "blockstate.h"
#include "mem_backing.h"
#include "test_helpers.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK 4096u
#define BLK_OFF ((off_t)3 * BLOCK)	/* the block cut in two, at the end */
#define FILE_END (BLK_OFF + BLOCK)
#define FILE_MAX (64u << 10)
#define ROUNDS 2000

/* The backing file: mem_backing, at most FILE_MAX bytes, no fallocate (see main). */
static struct mem_backing mem;

/* An O_DIRECT write: whole blocks, and the file grows to their end. */
static void mem_write(const void *buf, size_t len, off_t off)
{
	struct timespec pause = { 0, 20000 };

	nanosleep(&pause, NULL);	/* a backing write takes a while */
	mem_backing_write(&mem, buf, len, off);
}

/* ---- the flusher ---- */

static struct bs_file *file;

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	uint64_t asked, done;	/* syncs asked for, syncs done */
} sync_req = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

/* Collect, write and complete every dirty run: how many there were. */
static int flush_pass(void)
{
	static unsigned char tmp[FILE_MAX];
	struct bs_wb_run runs[8];
	off_t pos = 0;
	int n, total = 0;

	while ((n = bs_wb_collect_mode(file, &pos, INT64_MAX, runs, 8, SIZE_MAX,
				       SIZE_MAX, BS_WB_WHOLE_BLOCKS)) > 0) {
		for (int i = 0; i < n; i++) {
			T_CHECK(runs[i].len % BLOCK == 0 && runs[i].len <= FILE_MAX);
			bs_wb_copy(&runs[i], tmp);
			mem_write(tmp, runs[i].len, runs[i].off);
			bs_wb_complete(file, &runs[i], 0);
		}
		total += n;
	}
	return total;
}

static void *flusher(void *arg)
{
	(void)arg;
	for (;;) {
		uint64_t asked, done;

		pthread_mutex_lock(&sync_req.lock);
		if (sync_req.stop) {
			pthread_mutex_unlock(&sync_req.lock);
			return NULL;
		}
		asked = sync_req.asked;
		done = sync_req.done;
		pthread_mutex_unlock(&sync_req.lock);
		/*
		 * A sync is done by a pass that started after it was asked and
		 * found nothing; then the backing size is set from the cache's.
		 */
		if (flush_pass() || asked == done)
			continue;
		T_CHECK(mem_backing_truncate(&mem, bs_file_size(file)) == 0);
		pthread_mutex_lock(&sync_req.lock);
		sync_req.done = asked;
		pthread_cond_broadcast(&sync_req.cond);
		pthread_mutex_unlock(&sync_req.lock);
	}
}

/* Ask the flusher for a sync and wait for it. */
static void sync_file(void)
{
	pthread_mutex_lock(&sync_req.lock);
	uint64_t want = ++sync_req.asked;

	while (sync_req.done < want)
		pthread_cond_wait(&sync_req.cond, &sync_req.lock);
	pthread_mutex_unlock(&sync_req.lock);
}

int main(void)
{
	struct bs_config cfg = {
		.block_size = BLOCK, .folio_size = 64 << 10, .cache_size = 4 << 20,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find("fixed"),
	};
	static unsigned char buf[BLOCK], got[BLOCK];
	uint64_t rng = 0x9e3779b97f4a7c15;
	struct bs_cache *cache;
	pthread_t thr;
	int bad = 0;

	mem_backing_init(&mem);
	mem.max_len = FILE_MAX;
	mem.no_fallocate = true;
	T_CHECK(bs_cache_create(&cfg, NULL, NULL, &cache) == 0);
	T_CHECK(bs_file_create(cache, &mem_backing_ops, &mem, 0, &file) == 0);
	T_CHECK(pthread_create(&thr, NULL, flusher, NULL) == 0);
	for (int round = 0; round < ROUNDS && !bad; round++) {
		uint32_t cut = 1 + (uint32_t)(t_xorshift(&rng) % (BLOCK - 1));

		for (size_t i = 0; i < BLOCK; i++)
			buf[i] = (unsigned char)(1 + t_xorshift(&rng) % 255);
		T_CHECK(bs_write(file, buf, BLOCK, BLK_OFF) == (ssize_t)BLOCK);
		T_CHECK(bs_truncate(file, BLK_OFF + cut) == 0);
		T_CHECK(bs_truncate(file, FILE_END) == 0);
		sync_file();

		/* The cache, then the backing file: the head kept, the tail zero. */
		T_CHECK(bs_read(file, NULL, got, BLOCK, BLK_OFF) == (ssize_t)BLOCK);
		for (uint32_t i = 0; i < BLOCK; i++)
			T_CHECK(got[i] == (i < cut ? buf[i] : 0));
		pthread_mutex_lock(&mem.lock);
		T_CHECK(mem.len == FILE_END);
		for (uint32_t i = 0; i < BLOCK && !bad; i++) {
			if (mem.data[BLK_OFF + i] != (i < cut ? buf[i] : 0)) {
				fprintf(stderr, "round %d: cut at %u of the block, the backing "
					"file differs at %u: %s\n", round, cut, i,
					i < cut ? "a byte written before the cut"
						: "an old byte past the cut came back");
				bad = 1;
			}
		}
		pthread_mutex_unlock(&mem.lock);
	}
	pthread_mutex_lock(&sync_req.lock);
	sync_req.stop = true;
	pthread_mutex_unlock(&sync_req.lock);
	T_CHECK(pthread_join(thr, NULL) == 0);
	bs_file_destroy(file);
	bs_cache_destroy(cache);
	return bad ? T_EXIT_FAIL : T_EXIT_PASS;
}
