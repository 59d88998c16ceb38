// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * With a write log (-o write_log), a sync record covers the writes
 * recorded before the sync began, so no such write may still be in
 * flight when the backing fdatasync starts: fsync(2) does not cover a
 * write that completes after it began, and the crash images would keep a
 * write a crash could have lost (writeback/backing.c, wb_backing_fsync).
 *
 * A write is recorded before it is issued.  The test holds a writeback
 * pass of file A inside its backing pwritev (its record is in the log),
 * then syncs A from another thread, and links with -Wl,--wrap for
 * pwritev, fdatasync and pthread_mutex_lock:
 *   - the sync reaching fdatasync while A's write is held is the failure
 *     (it used to: the sync took the log position without waiting);
 *   - the sync asking for A's writeback lock while the write is held is
 *     what must happen; the test then lets the write go, and the sync
 *     runs once the pass is over.
 * Either event releases the write, so the test ends either way.
 */
#include "wb_i.h"
#include "test_helpers.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEN (16u << 10)

static struct wb_file *file_a;
static pthread_mutex_t *_Atomic a_wb_lock;
static atomic_int a_fd = -1;

/* The test's events; test_lock protects them. */
static pthread_mutex_t test_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t test_cond = PTHREAD_COND_INITIALIZER;
static bool write_held, write_go;
static bool sync_waited;	/* the sync asked for A's lock while the write was held */
static bool synced_in_flight;	/* the sync's fdatasync ran while the write was held */

static __thread bool in_sync;

static void wait_event(const bool *a, const bool *b)
{
	while (!*a && !(b && *b))
		pthread_cond_wait(&test_cond, &test_lock);
}

/* -Wl,--wrap=X sends calls of X to __wrap_X; __real_X is X itself. */
ssize_t real_pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t off)
	__asm__("__real_pwritev64");
ssize_t wrap_pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t off)
	__asm__("__wrap_pwritev64");
int real_fdatasync(int fd) __asm__("__real_fdatasync");
int wrap_fdatasync(int fd) __asm__("__wrap_fdatasync");
int real_pthread_mutex_lock(pthread_mutex_t *mutex)
	__asm__("__real_pthread_mutex_lock");
int wrap_pthread_mutex_lock(pthread_mutex_t *mutex)
	__asm__("__wrap_pthread_mutex_lock");

ssize_t wrap_pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t off)
{
	if (fd == atomic_load(&a_fd) && !in_sync) {
		real_pthread_mutex_lock(&test_lock);
		write_held = true;
		pthread_cond_broadcast(&test_cond);
		wait_event(&write_go, NULL);
		pthread_mutex_unlock(&test_lock);
	}
	return real_pwritev64(fd, iov, iovcnt, off);
}

int wrap_fdatasync(int fd)
{
	if (in_sync && fd == atomic_load(&a_fd)) {
		real_pthread_mutex_lock(&test_lock);
		if (!write_go) {
			synced_in_flight = true;
			write_go = true;	/* let the write go: the test ends */
			pthread_cond_broadcast(&test_cond);
		}
		pthread_mutex_unlock(&test_lock);
	}
	return real_fdatasync(fd);
}

int wrap_pthread_mutex_lock(pthread_mutex_t *mutex)
{
	if (in_sync && mutex == atomic_load(&a_wb_lock)) {
		real_pthread_mutex_lock(&test_lock);
		if (!write_go) {
			sync_waited = true;
			write_go = true;
			pthread_cond_broadcast(&test_cond);
		}
		pthread_mutex_unlock(&test_lock);
	}
	return real_pthread_mutex_lock(mutex);
}

static void *write_back_a(void *arg)
{
	(void)arg;
	T_CHECK(wb_writeback_range(file_a, 0, LEN) == 0);
	return NULL;
}

static void *sync_a(void *arg)
{
	(void)arg;
	in_sync = true;
	T_CHECK(wb_sync_file(file_a, true) == 0);
	return NULL;
}

int main(void)
{
	struct bs_config bcfg = {
		.block_size = 4096, .folio_size = 64 << 10, .cache_size = 16 << 20,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find("fixed"),
	};
	char dir[] = "/tmp/foliofs-wlogtest-XXXXXX", path[64], log[64];
	static unsigned char buf[LEN];
	struct wb_config wcfg;
	struct wb_ctx *ctx;
	pthread_t w, s;
	int root, fd;

	T_CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/a", dir);
	snprintf(log, sizeof(log), "%s.wlog", dir);
	root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	T_CHECK(root >= 0);
	T_CHECK(wb_wlog_open(log, root) == 0);

	wb_config_default(&wcfg);
	wcfg.flushers = 0;
	wcfg.backing_io = WB_IO_PSYNC;
	T_CHECK(wb_ctx_create(&bcfg, &wcfg, &ctx) == 0);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	T_CHECK(fd >= 0);
	T_CHECK(wb_file_alloc(ctx, fd, WB_RDWR, &file_a) == 0);
	atomic_store(&a_wb_lock, &file_a->wb_lock);
	atomic_store(&a_fd, fd);
	memset(buf, 0x5a, sizeof(buf));
	T_CHECK(wb_write(file_a, buf, LEN, 0, NULL) == LEN);

	T_CHECK(pthread_create(&w, NULL, write_back_a, NULL) == 0);
	pthread_mutex_lock(&test_lock);
	wait_event(&write_held, NULL);
	pthread_mutex_unlock(&test_lock);
	T_CHECK(pthread_create(&s, NULL, sync_a, NULL) == 0);
	T_CHECK(pthread_join(w, NULL) == 0);
	T_CHECK(pthread_join(s, NULL) == 0);

	atomic_store(&a_wb_lock, NULL);
	atomic_store(&a_fd, -1);
	T_CHECK(wb_file_free(file_a) == 0);
	wb_ctx_destroy(ctx);
	close(root);
	unlink(path);
	unlink(log);
	rmdir(dir);
	if (synced_in_flight || !sync_waited) {
		fprintf(stderr, "the sync %s while A's recorded write was in flight\n",
			synced_in_flight ? "ran fdatasync" : "did not wait for A's writeback");
		return T_EXIT_FAIL;
	}
	return T_EXIT_PASS;
}
