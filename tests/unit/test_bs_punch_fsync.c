// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fsync racing a hole punch (and zero range) of another part of the same
 * file, at library level: a thread punches [PUNCH_OFF, +PUNCH_LEN) over
 * and over while the main thread writes random bytes into [0, REGION)
 * and then "fsyncs" (collects every dirty run of the file, writes it to
 * an in-memory backing file and completes it, as wb_fsync does).  After
 * each fsync every byte written before it must be in the backing file.
 *
 * A punch keeps collection away from the file while it runs (a dirty
 * block written after it must not bring old bytes back); collection used
 * to skip every folio of the file meanwhile, so an fsync then wrote
 * nothing and returned.  The backing fallocate takes a little while here
 * (as a real one does), which makes that window wide.
 */
#include "blockstate.h"
#include "mem_backing.h"
#include "test_helpers.h"

#include <errno.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REGION (64u << 10)
#define PUNCH_OFF (256 << 10)
#define PUNCH_LEN (64 << 10)
#define FILE_SIZE (512 << 10)
#define ROUNDS 3000

/* The backing file: mem_backing, each fallocate taking a while (see main). */
static struct mem_backing mem;

/* ---- the test ---- */

static struct bs_file *file;
static atomic_bool stop;

static void *puncher(void *arg)
{
	uint64_t n = 0;

	(void)arg;
	while (!atomic_load(&stop)) {
		int mode = n++ % 2 ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
				   : FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;

		T_CHECK(bs_fallocate(file, mode, PUNCH_OFF, PUNCH_LEN) == 0);
	}
	return NULL;
}

int main(void)
{
	struct bs_config cfg = {
		.block_size = 4096, .folio_size = 64 << 10, .cache_size = 4 << 20,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find("fixed"),
	};
	static unsigned char shadow[REGION], buf[REGION];
	uint64_t rng = 0x1234567;
	size_t written_end = 0;
	struct bs_cache *cache;
	pthread_t thr;

	mem_backing_init(&mem);
	mem.max_len = FILE_SIZE;
	mem.fallocate_delay_ns = 50000;	/* a backing fallocate takes a while */
	T_CHECK(bs_cache_create(&cfg, NULL, NULL, &cache) == 0);
	T_CHECK(bs_file_create(cache, &mem_backing_ops, &mem, 0, &file) == 0);
	T_CHECK(bs_truncate(file, FILE_SIZE) == 0);
	T_CHECK(pthread_create(&thr, NULL, puncher, NULL) == 0);
	for (int round = 0; round < ROUNDS; round++) {
		size_t off = t_xorshift(&rng) % REGION;
		size_t len = 1 + t_xorshift(&rng) % (REGION - off);
		struct bs_wb_run runs[16];
		off_t pos = 0;
		int n;

		for (size_t i = 0; i < len; i++)
			buf[i] = (unsigned char)t_xorshift(&rng);
		T_CHECK(bs_write(file, buf, len, (off_t)off) == (ssize_t)len);
		memcpy(shadow + off, buf, len);
		if (off + len > written_end)
			written_end = off + len;
		/* fsync: every dirty run of the file, written and completed. */
		while ((n = bs_wb_collect(file, &pos, INT64_MAX, runs, 16, SIZE_MAX)) > 0) {
			for (int i = 0; i < n; i++) {
				unsigned char *tmp = malloc(runs[i].len);

				T_CHECK(tmp);
				bs_wb_copy(&runs[i], tmp);
				mem_backing_write(&mem, tmp, runs[i].len, runs[i].off);
				free(tmp);
				bs_wb_complete(file, &runs[i], 0);
			}
		}
		pthread_mutex_lock(&mem.lock);
		if (memcmp(mem.data, shadow, written_end) != 0) {
			pthread_mutex_unlock(&mem.lock);
			fprintf(stderr, "round %d: after fsync the backing file lacks bytes written before it\n",
				round);
			atomic_store(&stop, true);
			pthread_join(thr, NULL);
			return T_EXIT_FAIL;
		}
		pthread_mutex_unlock(&mem.lock);
	}
	atomic_store(&stop, true);
	T_CHECK(pthread_join(thr, NULL) == 0);
	bs_file_destroy(file);
	bs_cache_destroy(cache);
	return T_EXIT_PASS;
}
