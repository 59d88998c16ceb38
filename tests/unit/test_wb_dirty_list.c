// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The dirty list (wb_ctx.dirty, files.c): the files the flushers and
 * reclaim walk.  Its invariants, after every step:
 *   - a file with dirty data (its age set, or held blocks) or with
 *     written-but-unsynced blocks is on it;
 *   - the list, nr_dirty and every file's on_dirty agree;
 *   - after a walk (wb_dirty_snapshot), a file that is clean and synced
 *     is not on it, and the walk returns the others in creation order.
 * Through writes, writeback, sync, truncate, failed writes and syncs
 * (faults), discard and free, reclaim within a write, and a writer
 * racing a walker that cleans.
 * No flushers: the test is the only walker.
 */
#include "wb_i.h"
#include "test_helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NR_FILES 4

static struct wb_ctx *ctx;
static char dir[] = "/tmp/foliofs-dirtylist-XXXXXX";
static struct wb_file *files[NR_FILES];

static bool on_list(struct wb_file *f)
{
	bool found = false;
	struct wb_file *g;

	pthread_mutex_lock(&ctx->files_lock);
	list_for_each_entry(g, &ctx->dirty, dirty_link)
		found |= g == f;
	pthread_mutex_unlock(&ctx->files_lock);
	return found;
}

static bool must_be_on(struct wb_file *f)
{
	return atomic_load(&f->ws.dirtied_ns) || bs_file_has_held(f->ws.bs) ||
	       bs_file_has_unsynced(f->ws.bs);
}

/* The list agrees with nr_dirty and on_dirty; every file that must be on it is. */
static void check(void)
{
	unsigned int n = 0;
	struct wb_file *g;

	pthread_mutex_lock(&ctx->files_lock);
	list_for_each_entry(g, &ctx->dirty, dirty_link) {
		T_CHECK(atomic_load(&g->on_dirty));
		T_CHECK(g->dirty_link.next->prev == &g->dirty_link);
		T_CHECK(g->dirty_link.prev->next == &g->dirty_link);
		n++;
	}
	T_CHECK(n == ctx->nr_dirty);
	T_CHECK(ctx->dirty.next->prev == &ctx->dirty);
	pthread_mutex_unlock(&ctx->files_lock);
	T_CHECK(wb_dirty_check(ctx) == 0);
	for (int i = 0; i < NR_FILES; i++) {
		if (!files[i])
			continue;
		T_CHECK(atomic_load(&files[i]->on_dirty) == on_list(files[i]));
		if (must_be_on(files[i]))
			T_CHECK(on_list(files[i]));
	}
}

/* A walk: returns how many files it found; they are in creation order. */
static unsigned int walk(void)
{
	struct wb_dirty_snapshot snap = { 0 };
	unsigned int nr;

	T_CHECK(wb_dirty_snapshot(ctx, &snap, true) == 0);
	nr = snap.nr;
	for (unsigned int i = 1; i < snap.nr; i++)
		T_CHECK(snap.files[i - 1]->seq < snap.files[i]->seq);
	wb_dirty_snapshot_put(ctx, &snap);
	wb_dirty_snapshot_free(&snap);
	check();
	/* What the walk kept must be there; what it dropped was clean and synced. */
	for (int i = 0; i < NR_FILES; i++)
		if (files[i] && !must_be_on(files[i]))
			T_CHECK(!on_list(files[i]));
	return nr;
}

static void set_fault(const char *spec)
{
	char err[128];

	T_CHECK(wb_ctx_set_fault(ctx, spec, err, sizeof(err)) == 0);
}

static struct wb_file *make_file(int i)
{
	char path[64];
	struct wb_file *f;
	int fd;

	snprintf(path, sizeof(path), "%s/f%d", dir, i);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	T_CHECK(fd >= 0);
	T_CHECK(wb_file_alloc(ctx, fd, WB_RDWR, &f) == 0);
	return f;
}

/* Clean files are not on it; a write puts a file on, a sync and a walk take it off. */
static void test_write_writeback_sync(void)
{
	struct wb_file *f = files[1];

	T_CHECK(walk() == 0);
	T_CHECK(wb_write(f, "abc", 3, 0, NULL) == 3);
	check();
	T_CHECK(on_list(f));
	T_CHECK(walk() == 1);
	/* Written, not synced: stays. */
	T_CHECK(wb_writeback_range(f, 0, INT64_MAX) == 0);
	T_CHECK(bs_file_has_unsynced(f->ws.bs));
	T_CHECK(walk() == 1 && on_list(f));
	/* Synced: the next walk takes it off. */
	T_CHECK(wb_sync_file(f, true) == 0);
	check();
	T_CHECK(walk() == 0 && !on_list(f));
}

/* A walk returns the files in creation order, whatever order they were dirtied in. */
static void test_order(void)
{
	for (int i = NR_FILES - 1; i >= 0; i--) {
		T_CHECK(wb_write(files[i], "x", 1, 4096 * (off_t)i, NULL) == 1);
		check();
	}
	T_CHECK(walk() == NR_FILES);
	for (int i = 0; i < NR_FILES; i++)
		T_CHECK(wb_file_flush(files[i]) == 0);
	T_CHECK(walk() == 0);
}

/* Truncating the dirty data away: off after the pass that finds nothing. */
static void test_truncate(void)
{
	struct wb_file *f = files[2];

	T_CHECK(wb_write(f, "dirty", 5, 8192, NULL) == 5);
	T_CHECK(wb_truncate(f, 0) == 0);
	check();
	(void)walk();
	T_CHECK(wb_file_flush(f) == 0);
	T_CHECK(!must_be_on(f));
	(void)walk();
	T_CHECK(!on_list(f));
}

/* Failed writes keep the data dirty, a failed sync makes it dirty again: on it. */
static void test_errors(void)
{
	struct wb_file *f = files[3];

	T_CHECK(wb_write(f, "err", 3, 0, NULL) == 3);
	set_fault("write:EIO");
	T_CHECK(wb_writeback_range(f, 0, INT64_MAX) == -EIO);
	set_fault("off");
	check();
	T_CHECK(walk() == 1 && on_list(f) && bs_file_has_held(f->ws.bs));
	set_fault("fsync:EIO:count=1");
	T_CHECK(wb_writeback_range(f, 0, INT64_MAX) == 0);
	T_CHECK(wb_sync_file(f, true) == -EIO);
	set_fault("off");
	check();
	T_CHECK(walk() == 1 && on_list(f));
	T_CHECK(wb_file_flush(f) == 0);
	T_CHECK(walk() == 0);
}

/* A file freed or discarded while on the list leaves it. */
static void test_free_discard(void)
{
	struct wb_file *a = files[0], *b = files[1];

	T_CHECK(wb_write(a, "a", 1, 0, NULL) == 1);
	T_CHECK(wb_write(b, "b", 1, 0, NULL) == 1);
	check();
	T_CHECK(ctx->nr_dirty == 2);
	files[0] = NULL;
	wb_file_discard(a);
	check();
	T_CHECK(ctx->nr_dirty == 1 && on_list(b));
	files[1] = NULL;
	T_CHECK(wb_file_free(b) == 0);
	check();
	T_CHECK(ctx->nr_dirty == 0 && list_is_empty(&ctx->dirty));
	files[0] = make_file(0);
	files[1] = make_file(1);
	T_CHECK(files[0]->seq > files[3]->seq);	/* new files come last */
}

/*
 * One write larger than the cache (4 MiB) into a clean file: reclaim
 * within it must find the file on the list, before the write sets its
 * age, and write back the file's own earlier blocks, or the write fails
 * with ENOSPC.
 */
static void test_reclaim_in_write(void)
{
	struct wb_file *f = files[3];
	size_t len = 8 << 20;
	char *buf = malloc(len);

	T_CHECK(buf != NULL);
	memset(buf, 'r', len);
	T_CHECK(walk() == 0 && !on_list(f));
	T_CHECK(wb_write(f, buf, len, 0, NULL) == (ssize_t)len);
	check();
	T_CHECK(wb_file_flush(f) == 0);
	T_CHECK(walk() == 0);
	free(buf);
}

/*
 * A writer dirtying a file again and again while a walker writes it
 * back, syncs it and walks (taking it off whenever it looks clean): the
 * file is never left off the list while it holds data (checked once the
 * writer is done: in the middle, a write has set its blocks before its
 * age).
 */
static atomic_bool stop;

static void *writer(void *arg)
{
	struct wb_file *f = arg;

	for (unsigned int i = 0; !atomic_load(&stop); i++) {
		char c = (char)('a' + i % 26);

		T_CHECK(wb_write(f, &c, 1, (off_t)(i % 64) * 4096, NULL) == 1);
	}
	return NULL;
}

static void test_race(void)
{
	struct wb_file *f = files[2];
	pthread_t t;

	atomic_store(&stop, false);
	T_CHECK(pthread_create(&t, NULL, writer, f) == 0);
	for (int i = 0; i < 2000; i++) {
		struct wb_dirty_snapshot snap = { 0 };

		T_CHECK(wb_writeback_range(f, 0, INT64_MAX) == 0);
		T_CHECK(wb_sync_file(f, true) == 0);
		T_CHECK(wb_dirty_snapshot(ctx, &snap, true) == 0);
		wb_dirty_snapshot_put(ctx, &snap);
		wb_dirty_snapshot_free(&snap);
	}
	atomic_store(&stop, true);
	T_CHECK(pthread_join(t, NULL) == 0);
	check();
	T_CHECK(wb_file_flush(f) == 0);
	T_CHECK(walk() == 0);
}

int main(void)
{
	struct bs_config cfg = {
		.block_size = 4096, .folio_size = 16 << 10, .cache_size = 4 << 20,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find("fixed"),
	};
	struct wb_config wcfg;
	char path[64];

	wb_config_default(&wcfg);
	wcfg.flushers = 0;
	T_CHECK(mkdtemp(dir) != NULL);
	T_CHECK(wb_ctx_create(&cfg, &wcfg, &ctx) == 0);
	for (int i = 0; i < NR_FILES; i++)
		files[i] = make_file(i);
	check();
	test_write_writeback_sync();
	test_order();
	test_truncate();
	test_errors();
	test_free_discard();
	test_reclaim_in_write();
	test_race();
	for (int i = 0; i < NR_FILES; i++) {
		T_CHECK(wb_file_free(files[i]) == 0);
		files[i] = NULL;
		snprintf(path, sizeof(path), "%s/f%d", dir, i);
		unlink(path);
	}
	T_CHECK(ctx->nr_dirty == 0);
	T_CHECK(wb_ctx_destroy(ctx) == 0);
	rmdir(dir);
	return T_EXIT_PASS;
}
