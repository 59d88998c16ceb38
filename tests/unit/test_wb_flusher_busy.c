// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * A flusher that comes to a file while another writeback pass of it is
 * running (an fsync's, or another flusher's) must move on to the other
 * files, not wait for that pass and then pass over the file again
 * (writeback/flush.c, PASS_TRY).
 *
 * Flushers used to check the file's writeback lock with a trylock, drop
 * it, and start a pass that took it again: a pass that began in between
 * made the flusher wait for all of it (expired data of other files waited
 * too), then repeat it.  That gap is a few instructions wide, so the test
 * holds the flusher in it, at the bs_file_size() call with which a
 * flusher starts an expired file's pass (both before and after the fix),
 * and links with -Wl,--wrap for that call, pwritev and
 * pthread_mutex_lock:
 *   1. file A's data expires; the one flusher is held where it is about
 *      to start A's pass;
 *   2. file B gets expired data too, and an fsync of A starts, which is
 *      held inside its backing write (its pass holds A's lock);
 *   3. the flusher goes on.  It must write B while A's fsync is still
 *      held; waiting for A's lock is a failure (and lets the fsync go, so
 *      that the test ends either way).
 * Should flusher_main() reach a pass some other way, the hold point must
 * move with it (held inside the pass, the flusher would keep the fsync
 * out and the test would hang until its timeout).
 */
#include "wb_i.h"
#include "test_helpers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEN (16u << 10)

static struct wb_file *file_a, *file_b;

/* What the hooks look for, set by main while both files exist. */
static struct bs_file *_Atomic a_bs;
static pthread_mutex_t *_Atomic a_wb_lock;
static atomic_int a_fd = -1, b_fd = -1;

/* The test's own events; test_lock protects all of them. */
static pthread_mutex_t test_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t test_cond = PTHREAD_COND_INITIALIZER;
static bool hold_armed;		/* hold the next flusher starting A's pass */
static bool flusher_held, flusher_go;
static bool fsync_held, fsync_go;
static bool flusher_waited;	/* the held flusher blocked on A's writeback lock */
static bool b_written;		/* B reached its backing file while A's fsync was held */

static __thread bool in_main, in_held_flusher, in_fsync;

static void set_event(bool *event)
{
	pthread_mutex_lock(&test_lock);
	*event = true;
	pthread_cond_broadcast(&test_cond);
	pthread_mutex_unlock(&test_lock);
}

/* Wait until @a or @b (may be NULL) is set.  Context: test_lock held. */
static void wait_event(const bool *a, const bool *b)
{
	while (!*a && !(b && *b))
		pthread_cond_wait(&test_cond, &test_lock);
}

/* -Wl,--wrap=X sends calls of X to __wrap_X; __real_X is X itself. */
off_t real_bs_file_size(struct bs_file *file)
	__asm__("__real_bs_file_size");
off_t wrap_bs_file_size(struct bs_file *file)
	__asm__("__wrap_bs_file_size");
ssize_t real_pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t off)
	__asm__("__real_pwritev64");
ssize_t wrap_pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t off)
	__asm__("__wrap_pwritev64");
int real_pthread_mutex_lock(pthread_mutex_t *mutex)
	__asm__("__real_pthread_mutex_lock");
int wrap_pthread_mutex_lock(pthread_mutex_t *mutex)
	__asm__("__wrap_pthread_mutex_lock");

off_t wrap_bs_file_size(struct bs_file *file)
{
	if (file == atomic_load(&a_bs) && !in_main && !in_fsync) {
		pthread_mutex_lock(&test_lock);
		if (hold_armed) {
			hold_armed = false;
			in_held_flusher = true;
			flusher_held = true;
			pthread_cond_broadcast(&test_cond);
			wait_event(&flusher_go, NULL);
		}
		pthread_mutex_unlock(&test_lock);
	}
	return real_bs_file_size(file);
}

ssize_t wrap_pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t off)
{
	if (in_fsync && fd == atomic_load(&a_fd)) {
		pthread_mutex_lock(&test_lock);
		fsync_held = true;
		pthread_cond_broadcast(&test_cond);
		wait_event(&fsync_go, NULL);
		pthread_mutex_unlock(&test_lock);
	} else if (fd == atomic_load(&b_fd)) {
		pthread_mutex_lock(&test_lock);
		if (!fsync_go)
			b_written = true;
		pthread_cond_broadcast(&test_cond);
		pthread_mutex_unlock(&test_lock);
	}
	return real_pwritev64(fd, iov, iovcnt, off);
}

int wrap_pthread_mutex_lock(pthread_mutex_t *mutex)
{
	if (in_held_flusher && mutex == atomic_load(&a_wb_lock)) {
		in_held_flusher = false;
		set_event(&flusher_waited);
	}
	return real_pthread_mutex_lock(mutex);
}

static void *fsync_a(void *arg)
{
	(void)arg;
	in_fsync = true;
	T_CHECK(wb_fsync(file_a, true, NULL) == 0);
	return NULL;
}

static struct wb_file *new_file(struct wb_ctx *ctx)
{
	char path[] = "/tmp/foliofs-flushtest-XXXXXX";
	struct wb_file *f;
	int fd = mkstemp(path);

	T_CHECK(fd >= 0);
	unlink(path);
	T_CHECK(wb_file_alloc(ctx, fd, WB_RDWR, &f) == 0);
	return f;
}

int main(void)
{
	struct bs_config bcfg = {
		.block_size = 4096, .folio_size = 64 << 10, .cache_size = 16 << 20,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find("fixed"),
	};
	static unsigned char buf[LEN];
	struct wb_config wcfg;
	struct wb_ctx *ctx;
	pthread_t thr;
	bool waited, written;

	in_main = true;
	wb_config_default(&wcfg);
	wcfg.flushers = 1;
	wcfg.writeback_interval_ms = 10;
	wcfg.dirty_expire_ms = 1;		/* everything written is due at once */
	wcfg.dirty_background_bytes = 1 << 30;	/* expiry only */
	wcfg.backing_io = WB_IO_PSYNC;
	T_CHECK(wb_ctx_create(&bcfg, &wcfg, &ctx) == 0);
	file_a = new_file(ctx);
	file_b = new_file(ctx);
	atomic_store(&a_bs, file_a->ws.bs);
	atomic_store(&a_wb_lock, &file_a->wb_lock);
	atomic_store(&a_fd, file_a->fd);
	atomic_store(&b_fd, file_b->fd);
	memset(buf, 0xa5, sizeof(buf));

	pthread_mutex_lock(&test_lock);
	hold_armed = true;
	pthread_mutex_unlock(&test_lock);
	T_CHECK(wb_write(file_a, buf, LEN, 0, NULL) == LEN);
	pthread_mutex_lock(&test_lock);
	wait_event(&flusher_held, NULL);
	pthread_mutex_unlock(&test_lock);

	T_CHECK(wb_write(file_b, buf, LEN, 0, NULL) == LEN);
	T_CHECK(pthread_create(&thr, NULL, fsync_a, NULL) == 0);
	pthread_mutex_lock(&test_lock);
	wait_event(&fsync_held, NULL);
	flusher_go = true;
	pthread_cond_broadcast(&test_cond);
	wait_event(&b_written, &flusher_waited);
	waited = flusher_waited;
	written = b_written;
	fsync_go = true;
	pthread_cond_broadcast(&test_cond);
	pthread_mutex_unlock(&test_lock);
	T_CHECK(pthread_join(thr, NULL) == 0);

	atomic_store(&a_bs, NULL);
	atomic_store(&a_wb_lock, NULL);
	atomic_store(&a_fd, -1);
	atomic_store(&b_fd, -1);
	T_CHECK(wb_file_free(file_a) == 0);
	T_CHECK(wb_file_free(file_b) == 0);
	wb_ctx_destroy(ctx);
	if (waited || !written) {
		fprintf(stderr, "the flusher %s for the fsync's pass of A; B %s written meanwhile\n",
			waited ? "waited" : "did not wait", written ? "was" : "was not");
		return T_EXIT_FAIL;
	}
	return T_EXIT_PASS;
}
