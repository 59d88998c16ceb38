// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * A step of the wall clock while data is dirty must not change when the
 * flushers write it (writeback/engine.c and flush.c, wb_now_ns): ages,
 * expiry and the backoff of a failing file are measured on
 * CLOCK_MONOTONIC.
 *
 * The test links with -Wl,--wrap=clock_gettime, so that what the library
 * reads as CLOCK_REALTIME can be stepped by hours while a flusher runs,
 * and with -Wl,--wrap=pthread_cond_timedwait, so that a sleep until a
 * time of that clock ends when the stepped clock says it should (the
 * kernel's own clock does not move; a step during a sleep is not
 * modelled).  The library's only other timed wait, the stats log's, is
 * on CLOCK_MONOTONIC and not started here.  Three cases, one flusher each:
 *   forward   data dirty for well under dirty_expire_ms (an hour), clock
 *             two hours ahead: passes of the flusher write nothing;
 *   back      data past dirty_expire_ms, clock two hours back: written;
 *   backoff   a background write failed and is waiting out its backoff,
 *             clock two hours back: retried and written.
 * No assertion depends on how fast a thread runs: each waits until
 * enough monotonic time has passed for the data to be due, then for two
 * further flusher passes (the first pass that begins after that point has
 * then finished), or until something was written.
 *
 * With ages on CLOCK_REALTIME, as before 94d4b3d, forward wrote the young
 * data at once, and back and backoff wrote nothing for two hours.
 */
#include "writeback.h"
#include "blockstate.h"
#include "test_helpers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LEN (16u << 10)
#define STEP_NS (2ll * 3600 * 1000000000)

/* Added to every CLOCK_REALTIME reading of the library. */
static _Atomic int64_t realtime_shift_ns;

/* -Wl,--wrap=X sends calls of X to __wrap_X; __real_X is X itself. */
int real_clock_gettime(clockid_t clk, struct timespec *ts)
	__asm__("__real_clock_gettime");
int wrap_clock_gettime(clockid_t clk, struct timespec *ts)
	__asm__("__wrap_clock_gettime");
int real_pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex,
				const struct timespec *abstime)
	__asm__("__real_pthread_cond_timedwait");
int wrap_pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex,
				const struct timespec *abstime)
	__asm__("__wrap_pthread_cond_timedwait");

static void shift_ts(struct timespec *ts, int64_t by_ns)
{
	int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + by_ns;

	ts->tv_sec = ns / 1000000000;
	ts->tv_nsec = ns % 1000000000;
}

int wrap_clock_gettime(clockid_t clk, struct timespec *ts)
{
	int ret = real_clock_gettime(clk, ts);

	if (!ret && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE))
		shift_ts(ts, atomic_load(&realtime_shift_ns));
	return ret;
}

/* @abstime is a time of the stepped clock (pthread_cond_t's default clock). */
int wrap_pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex,
				const struct timespec *abstime)
{
	struct timespec ts = *abstime;

	shift_ts(&ts, -atomic_load(&realtime_shift_ns));
	return real_pthread_cond_timedwait(cond, mutex, &ts);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	T_CHECK(real_clock_gettime(CLOCK_MONOTONIC, &ts) == 0);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* One counter of wb_ctx_stats() ("name value" lines). */
static uint64_t stat_of(struct wb_ctx *ctx, const char *name)
{
	static char buf[8192] = "\n";
	char key[64];
	const char *at;

	wb_ctx_stats(ctx, buf + 1, sizeof(buf) - 1);
	snprintf(key, sizeof(key), "\n%s ", name);
	at = strstr(buf, key);
	if (!at) {
		fprintf(stderr, "no stat %s\n", name);
		exit(T_EXIT_FAIL);
	}
	return strtoull(at + strlen(key), NULL, 10);
}

/*
 * Wait until @ms of monotonic time from @since have passed, then until two
 * more flusher passes have run or something was written; returns the bytes
 * written.
 */
static uint64_t settle(struct wb_ctx *ctx, int64_t since, long ms)
{
	uint64_t passes;

	while (mono_ms() < since + ms)
		pause_ms(1);
	passes = stat_of(ctx, "flusher_passes");
	while (stat_of(ctx, "flusher_passes") < passes + 2 &&
	       !stat_of(ctx, "backing_write_bytes"))
		pause_ms(1);
	return stat_of(ctx, "backing_write_bytes");
}

struct clock_case {
	const char *name;
	uint32_t expire_ms;
	uint64_t background_bytes;	/* dirty_background_bytes */
	const char *fault;
	int64_t step_ns;
	long due_ms;			/* after the step (or the backoff): due by then */
	bool written;			/* by the flusher before the file is freed */
};

static int run(const struct clock_case *c)
{
	struct bs_config bcfg = {
		.block_size = 4096, .folio_size = 64 << 10, .cache_size = 16 << 20,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find("fixed"),
	};
	char path[] = "/tmp/foliofs-clocktest-XXXXXX";
	static unsigned char buf[LEN];
	struct wb_config wcfg;
	struct wb_ctx *ctx;
	struct wb_file *f;
	uint64_t written;
	int64_t since;
	int fd = mkstemp(path);

	T_CHECK(fd >= 0);
	unlink(path);
	atomic_store(&realtime_shift_ns, 0);
	wb_config_default(&wcfg);
	wcfg.flushers = 1;
	wcfg.writeback_interval_ms = 10;
	wcfg.dirty_expire_ms = c->expire_ms;
	wcfg.dirty_background_bytes = c->background_bytes;
	wcfg.fault = c->fault;
	T_CHECK(wb_ctx_create(&bcfg, &wcfg, &ctx) == 0);
	T_CHECK(wb_file_alloc(ctx, fd, WB_RDWR, &f) == 0);

	memset(buf, 0x5a, sizeof(buf));
	T_CHECK(wb_write(f, buf, LEN, 0, NULL) == LEN);
	since = mono_ms();
	if (c->fault) {
		/* The first background write has failed and backed off. */
		while (!stat_of(ctx, "wb_retries"))
			pause_ms(1);
		since = mono_ms();
	}
	atomic_store(&realtime_shift_ns, c->step_ns);
	written = settle(ctx, since, c->due_ms);

	T_CHECK(wb_file_free(f) == 0);
	wb_ctx_destroy(ctx);
	if (written != (c->written ? LEN : 0)) {
		fprintf(stderr, "%s: the flusher wrote %llu bytes, not %u\n", c->name,
			(unsigned long long)written, c->written ? LEN : 0);
		return 1;
	}
	return 0;
}

int main(void)
{
	static const struct clock_case cases[] = {
		/* Never due (within the hour). */
		{ "forward", 3600000, 1 << 30, NULL, STEP_NS, 0, false },
		/* Due at its expiry. */
		{ "back", 500, 1 << 30, NULL, -STEP_NS, 500, true },
		/* Due after the first backoff (100 ms), with room to spare. */
		{ "backoff", 3600000, 4096, "write:EIO:count=1", -STEP_NS, 1000, true },
	};
	int bad = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		bad += run(&cases[i]);
	return bad ? T_EXIT_FAIL : T_EXIT_PASS;
}
