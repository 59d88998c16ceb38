// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * balance.c - the throttler fed from the cache: the calls after each
 * write, at a time the driver gives (engine.h: wb_balance_dirty_at, the
 * simulator's on its virtual clock), and the mount's entry points the
 * FUSE layer calls (writeback.h), on the monotonic clock (wb_now_ns).
 * The throttler itself (throttle.c) never reads a clock or the cache.
 */
#include "wb_i.h"
#include "throttle.h"

bool wb_throttle_charge_write(struct wb_ctx *ctx, pid_t pid, uint64_t dirtied, int64_t now_ns)
{
	uint64_t pinned = bs_thread_pinned_take();

	/*
	 * Every write is a check, also one that charged nothing (an
	 * overwrite of dirty blocks): the check is of what the writer's
	 * earlier writes charged, as the kernel's is.
	 */
	return wb_throttle_charge_pinned(ctx->throttle, pid, dirtied, pinned, now_ns);
}

int64_t wb_balance_dirty_at(struct wb_ctx *ctx, pid_t pid, uint64_t dirtied, int64_t now_ns)
{
	struct wb_throttle_sample s;

	if (!wb_throttle_charge_write(ctx, pid, dirtied, now_ns))
		return 0;
	wb_throttle_sample_of(ctx, &s);
	return wb_throttle_balance(ctx->throttle, pid, &s, now_ns);
}

int64_t wb_balance_dirty(struct wb_ctx *ctx, pid_t pid, uint64_t dirtied)
{
	int64_t pause;

	/*
	 * Throttling waits for background writeback; with no flushers
	 * nothing would write the data back while a writer waits at the
	 * limit (only fsync, reclaim and unmount write), so nobody is paused.
	 */
	if (!ctx->nr_flushers)
		return 0;
	pause = wb_balance_dirty_at(ctx, pid, dirtied, wb_now_ns());
	/* Past the freerun point writeback must be running (as the kernel starts it). */
	if (pause)
		wb_flushers_poke(ctx);
	return pause;
}

int64_t wb_balance_dirty_again_at(struct wb_ctx *ctx, pid_t pid, int64_t now_ns)
{
	struct wb_throttle_sample s;

	wb_throttle_sample_of(ctx, &s);
	return wb_throttle_again(ctx->throttle, pid, &s, now_ns);
}

int64_t wb_balance_dirty_again(struct wb_ctx *ctx, pid_t pid)
{
	return wb_balance_dirty_again_at(ctx, pid, wb_now_ns());
}

bool wb_balance_dirty_recheck(struct wb_ctx *ctx, pid_t pid)
{
	struct wb_throttle_sample s;

	wb_throttle_sample_of(ctx, &s);
	return wb_throttle_recheck(ctx->throttle, pid, &s, wb_now_ns());
}

void wb_throttle_held(struct wb_ctx *ctx)
{
	wb_throttle_held_add(ctx->throttle, 1);
}

void wb_throttle_unheld(struct wb_ctx *ctx, pid_t pid, int64_t held_ns, bool early)
{
	wb_throttle_unheld_at(ctx->throttle, pid, held_ns, early);
}
