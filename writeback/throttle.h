/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * throttle.h - dirty throttling: the writers' thresholds, the write
 * bandwidth estimate and the pauses of balance_dirty_pages(), for one
 * device (the mount's backing store).
 *
 * The throttler is pure logic on a clock it is handed: every entry point
 * takes the time (ns on a monotonic clock) and a sample of the counters it
 * needs, and returns a pause; it never sleeps, never reads a clock and
 * never looks at the cache itself.  The mount feeds it real time and the
 * cache's counters (balance.c); unit tests and a simulator feed it a
 * virtual clock.
 *
 * What differs between throttle policies (bdp, strictlimit, none) is small
 * and sits behind struct wb_throttle_policy: whether a writer runs free,
 * the position ratio, and the point the rate limit is steered around.  The
 * machinery they share (rate estimation, dirty_ratelimit, per-writer
 * state, pause sizing) is in throttle.c, as it is shared in
 * mm/page-writeback.c.
 *
 * Units: pages are 4 KiB (BS_PAGE_SIZE); rates are pages per second;
 * ratios are fixed point with WB_RATIO_SHIFT fractional bits.
 */
#ifndef FOLIOFS_THROTTLE_H
#define FOLIOFS_THROTTLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * The policy interface (struct wb_dtc, struct wb_throttle_policy, the
 * shared helpers) is in the installed header, for loadable policies.
 */
#include "foliofs/policy.h"

/* WB_RATIO_SHIFT, WB_RATIO_ONE: foliofs/policy.h. */

#define WB_NSEC_PER_SEC 1000000000ll
#define WB_NSEC_PER_MSEC 1000000ll

/* How often the bandwidth, the rate limit and the hard limit are updated. */
#define WB_BW_INTERVAL_NS (200 * WB_NSEC_PER_MSEC)
/* The longest single pause (the kernel's MAX_PAUSE, HZ/5). */
#define WB_MAX_PAUSE_NS (200 * WB_NSEC_PER_MSEC)
/* Bandwidth before anything was measured: 100 MB/s, as the kernel's INIT_BW. */
#define WB_INIT_BW ((100u << 20) >> 12)

/* struct wb_dtc and struct wb_throttle_policy: foliofs/policy.h. */

/*
 * The policies, each in its own file; adding one means its file, a line in
 * throttle_policies.c and one in meson.build.
 */
extern const struct wb_throttle_policy wb_throttle_bdp;
extern const struct wb_throttle_policy wb_throttle_strictlimit;
extern const struct wb_throttle_policy wb_throttle_none;

/* Registered throttle policies by name (throttle_policies.c); the first is the default. */
const struct wb_throttle_policy *wb_throttle_policy_find(const char *name);
const struct wb_throttle_policy *wb_throttle_policy_at(size_t i);
/* NULL for a built-in policy, else the library it was loaded from. */
const char *wb_throttle_policy_origin(size_t i);

/* The helpers the policies share, wb_pos_ratio_polynom() and wb_freerun_ceiling(): foliofs/policy.h. */

/* ---- the throttler ---- */

struct wb_throttle;

/* The counters the throttler reads, in pages (rounded up). */
struct wb_throttle_sample {
	uint64_t dirty;		/* charged now, by the accounting policy */
	uint64_t pinned;	/* memory of folios holding dirty or writeback blocks */
	uint64_t dirtied;	/* charged, monotonic */
	uint64_t written;	/* discharged by completed writeback, monotonic */
	uint64_t writeback;	/* under writeback now */
};

/* Thresholds in pages; pinned_thresh 0: no pinned-memory limit. */
struct wb_throttle_limits {
	uint64_t thresh;
	uint64_t bg_thresh;
	uint64_t pinned_thresh;
	uint64_t pinned_bg_thresh;
};

/*
 * wb_throttle_limits_of - the kernel's rules for thresholds, in pages, from
 * a memory size and the /proc/sys/vm-style settings: the bytes override
 * the ratio when not 0; a background threshold not below the writers'
 * becomes half of it.  The pinned background threshold keeps the
 * background/writers proportion.
 */
void wb_throttle_limits_of(uint64_t mem_bytes, unsigned int ratio, uint64_t bytes,
			   unsigned int bg_ratio, uint64_t bg_bytes,
			   unsigned int pinned_ratio, uint64_t pinned_bytes,
			   struct wb_throttle_limits *out);

int wb_throttle_create(const struct wb_throttle_policy *policy,
		       const struct wb_throttle_limits *limits, int64_t now_ns,
		       struct wb_throttle **out);
void wb_throttle_destroy(struct wb_throttle *t);

void wb_throttle_set_policy(struct wb_throttle *t, const struct wb_throttle_policy *policy);
/*
 * The same with parameter values (BS_PARAMS_MAX of them, in range; NULL:
 * the policy's defaults).  A change of policy or of a value takes effect
 * at the next decision; nothing is repriced.
 */
void wb_throttle_set_policy_params(struct wb_throttle *t, const struct wb_throttle_policy *policy,
				   const int64_t *params);
/* The policy in force and its values (into @params, BS_PARAMS_MAX), read together. */
const struct wb_throttle_policy *wb_throttle_get_policy_params(struct wb_throttle *t,
							       int64_t *params);
const struct wb_throttle_policy *wb_throttle_get_policy(struct wb_throttle *t);
void wb_throttle_set_limits(struct wb_throttle *t, const struct wb_throttle_limits *limits);

/*
 * wb_throttle_charge_pinned - writer @pid wrote at @now_ns, charging
 * @dirtied_bytes more and turning @pinned_bytes of clean folios into
 * pinned memory.  Returns true when its writes before this one reached its
 * next check point in either domain (nr_dirtied_pause pages charged or,
 * with a pinned limit, as many newly pinned; or thresh/32 pages charged,
 * pinned_thresh/32 pinned, by anyone since the last check): then call
 * wb_throttle_balance() with fresh counters, which counts this write's
 * charge after the check, as the kernel checks a writer before each write
 * on what it dirtied before.  Cheap: one lock, one hash lookup.  Context:
 * any thread.
 */
bool wb_throttle_charge_pinned(struct wb_throttle *t, pid_t pid, uint64_t dirtied_bytes,
			       uint64_t pinned_bytes, int64_t now_ns);
/* The same for a caller that does not count what its writes pinned. */
static inline bool wb_throttle_charge(struct wb_throttle *t, pid_t pid, uint64_t dirtied_bytes,
				      int64_t now_ns)
{
	return wb_throttle_charge_pinned(t, pid, dirtied_bytes, 0, now_ns);
}

/*
 * wb_throttle_balance - one check of writer @pid at @now_ns with the
 * counters @s: the pause in ns, 0 for none.  Context: any thread; takes
 * the throttler's mutex.
 */
int64_t wb_throttle_balance(struct wb_throttle *t, pid_t pid,
			    const struct wb_throttle_sample *s, int64_t now_ns);

/*
 * wb_throttle_again - @pid's pause ended at @now_ns.  0 when the writer
 * may go on; else the next pause: only above the hard limit (a task rate
 * of 0) does the kernel loop, sleeping max_pause until under it.
 */
int64_t wb_throttle_again(struct wb_throttle *t, pid_t pid,
			  const struct wb_throttle_sample *s, int64_t now_ns);

/*
 * wb_throttle_update - a pass over a file ended with nothing of it in
 * flight: update the bandwidth estimate if WB_BW_INTERVAL_NS has passed
 * since anyone last updated the estimates, and once more
 * WB_BW_INTERVAL_NS later (as the kernel's do_writepages() and bw_dwork
 * do).  A throttled writer updates the rate limit and the hard limit only
 * when it finds the estimates that old.
 */
void wb_throttle_update(struct wb_throttle *t, const struct wb_throttle_sample *s,
			int64_t now_ns);

/*
 * wb_throttle_recheck - the settings changed while @pid is held: false if
 * it would now run free (the holder then releases it), true to keep its
 * current pause.  Nothing else changes, so a change that does not concern
 * a writer leaves its pause as it was.
 */
bool wb_throttle_recheck(struct wb_throttle *t, pid_t pid,
			 const struct wb_throttle_sample *s, int64_t now_ns);

/*
 * A held writer's reply went after @held_ns (counted in throttle_ms);
 * @early: before its pause ended (interrupt, unmount, a settings change).
 */
void wb_throttle_unheld_at(struct wb_throttle *t, pid_t pid, int64_t held_ns, bool early);

/*
 * Writeback is starting: after more than a second without an update and
 * with nothing in flight, the estimates' window restarts now, so idle
 * time does not count as slow writing.
 */
void wb_throttle_writeback_start(struct wb_throttle *t, const struct wb_throttle_sample *s,
				 int64_t now_ns);

/* A writer's reply is held (the layer above holds replies). */
void wb_throttle_held_add(struct wb_throttle *t, int delta);

/* What the stats show; names as the kernel's writeback tracepoints. */
struct wb_throttle_stats {
	struct wb_throttle_limits limits;
	uint64_t dirty_limit;		/* pages: the hard limit, following thresh down slowly */
	uint64_t setpoint;		/* pages, for the dirty budget */
	uint64_t pinned_limit;		/* pages, 0 when no pinned limit */
	uint64_t write_bw;		/* pages/s */
	uint64_t avg_write_bw;		/* pages/s */
	uint64_t dirty_rate;		/* pages/s */
	uint64_t dirty_ratelimit;	/* pages/s */
	uint64_t balanced_dirty_ratelimit;	/* pages/s */
	uint64_t pos_ratio;		/* of the last balance, WB_RATIO_ONE = 1 */
	uint64_t task_ratelimit;	/* of the last pause, pages/s */
	uint64_t throttle_events;	/* pauses */
	uint64_t throttle_ns;		/* total pause time */
	uint64_t throttled_writers;	/* held now */
	int64_t pause_ns, period_ns, think_ns;	/* of the last pause */
	uint64_t writers;		/* writers tracked */
};
void wb_throttle_stats(struct wb_throttle *t, struct wb_throttle_stats *st);

/* ---- the mount's side (balance.c, tunables.c) ---- */

struct wb_ctx;

/* The settings from ctx->cfg, and the throttler; at context creation. */
int wb_tunables_create(struct wb_ctx *ctx);
void wb_tunables_destroy(struct wb_ctx *ctx);
/* Thresholds in pages from the current settings, published to the flushers too. */
void wb_tunables_publish(struct wb_ctx *ctx, struct wb_throttle_limits *l);
/* The cache's counters in the throttler's units. */
void wb_throttle_sample_of(struct wb_ctx *ctx, struct wb_throttle_sample *s);
/*
 * wb_throttle_charge_write - wb_throttle_charge_pinned() for a write this
 * thread just made: @dirtied from bs_thread_dirtied_take(), the pinned
 * memory from bs_thread_pinned_take().
 */
bool wb_throttle_charge_write(struct wb_ctx *ctx, pid_t pid, uint64_t dirtied, int64_t now_ns);

#endif /* FOLIOFS_THROTTLE_H */
