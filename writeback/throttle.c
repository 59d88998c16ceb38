// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * throttle.c - the machinery balance_dirty_pages() is made of, for one
 * device: thresholds, the write bandwidth and dirty rate estimates, the
 * rate limit every writer is held to, per-writer bookkeeping, and the
 * sizing of each pause.  The policies (throttle_bdp.c, throttle_strict.c,
 * throttle_none.c) only say where a writer stands; everything here is
 * shared.  Pure logic: time and counters are arguments (throttle.h).
 *
 * The control law
 * ---------------
 * A writer that dirties pages faster than the device writes them must be
 * slowed down to the device's speed, shared fairly between writers, with
 * the amount of dirty memory held near a target.  Two quantities do that:
 *
 *   task_ratelimit = dirty_ratelimit * pos_ratio
 *
 * dirty_ratelimit (pages/s) is the rate each writer would get if dirty
 * memory sat exactly at the setpoint: about write_bw / N for N writers.
 * It moves slowly toward a "balanced" rate estimated from what the last
 * interval showed, at most once per WB_BW_INTERVAL_NS: when a throttled
 * writer finds that nobody (writeback included) updated the estimates for
 * that long, as in the kernel:
 *
 *   balanced = task_ratelimit * write_bw / dirty_rate
 *
 * If N writers each ran at task_ratelimit, dirty_rate was N times that,
 * so balanced comes out as write_bw / N whatever N is; no writer count is
 * needed.  Because the estimate is noisy, dirty_ratelimit only takes a
 * step toward it when task_ratelimit is on the same side (we are below
 * the setpoint and the writers are allowed to go faster, or above it and
 * they are being slowed), and the step shrinks as the gap closes (an
 * eighth of it, divided further when it is small against the rate), so
 * the rate settles instead of oscillating.
 *
 * pos_ratio (a ratio, 1.0 = WB_RATIO_ONE) corrects for where dirty memory
 * is now.  It is the policy's; for bdp it is a cubic through the setpoint:
 *
 *   f(dirty) = 1 + ((setpoint - dirty) / (limit - setpoint))^3
 *
 *   with  f(freerun) ~ 2, f(setpoint) = 1, f(limit) = 0, f never rising,
 *   and flat near the setpoint (small errors are left to dirty_ratelimit),
 *   steep near the edges (large errors are corrected at once).
 *
 *       2 +-----.
 *         |      `.
 *         |        `-.
 *       1 +-----------+--.___
 *         |           .      `--.
 *         |           .          `.
 *       0 +-----------+-----------+-> dirty
 *      freerun     setpoint     limit
 *
 * Below the freerun point ((thresh + bg_thresh) / 2) nobody is paused:
 * the flushers, woken at bg_thresh, are expected to keep up.  The limit is
 * thresh, except that when thresh is lowered at run time the limit
 * follows it down by 1/32 of the gap per interval (never below the dirty
 * count), so writers are not stopped dead when the memory a ratio is
 * taken from shrinks.  (Here that memory is cache_size, which is fixed,
 * and a threshold set by hand applies at once, as in the kernel, so the
 * limit equals the threshold unless a later change makes them differ.)
 *
 * The pause
 * ---------
 * A writer is checked only after it has dirtied nr_dirtied_pause pages
 * since its last check (below the freerun point that is about the square
 * root of the headroom, so checks get frequent as the threshold nears).
 * With a pinned-memory limit it is also checked after pinning as many
 * pinned pages (counted apart: a write charged 2 pages may pin a 512-page
 * folio), so pinned memory passes its limit by at most what each writer
 * pinned since its last check, about one write's folios each once over
 * the threshold (then every 8 pages), plus pinned_thresh/32 from anyone.
 * At a check it owes
 *
 *   period = pages_dirtied / task_ratelimit
 *
 * of time, minus the time since its previous pause ended, which it spent
 * thinking (not dirtying), so a writer that dirties in bursts is not
 * punished for its bursts.  Pauses shorter than min_pause are not taken
 * (the debt is carried into the next period, forgiven after a second);
 * pauses longer than max_pause are cut to it.  max_pause is at most
 * 200 ms, less when little is dirty (sleeping longer than it takes the
 * device to write an eighth of the dirty data could let the device go
 * idle).  nr_dirtied_pause is then chosen so the next pause is about
 * 10 ms for one writer (10 ms more per doubling of write_bw over the rate,
 * so many writers pause less often), and at least 32 pages when possible.
 * At or above the hard limit the task rate is 0: the writer waits
 * max_pause at a time until the count is under the limit.
 *
 * All of the pause's arithmetic is in ticks of 1/HZ s (WB_HZ), as the
 * kernel's is in jiffies, and the integer truncations are the kernel's:
 * at HZ 250 one writer at a rate limit of 25600 pages/s that dirtied one
 * 2 MiB folio (512 pages) owes 250 * 512 / 25600 = 5 ticks (20 ms), less
 * the whole ticks since its last pause; one that dirtied 16 pages owes
 * 0 ticks, which is "nothing owed", not a short pause.
 *
 * Locking: struct wb_throttle's mutex protects all of its state; every
 * entry point takes it once.  The policies are called under it and are
 * pure.
 */
#include "throttle.h"
#include "foliofs_probes.h"
#include "blockstate.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_BYTES 4096u
/* Below this many pages per pause, pauses are stretched toward max_pause. */
#define DIRTY_POLL_THRESH 32
/*
 * The pause is sized in jiffies, ticks of 1/WB_HZ s, as the kernel sizes
 * it: the period, the think time credited, min_pause and max_pause are
 * whole ticks, and a pause ends on a tick (io_schedule_timeout()).  At
 * HZ 250 a tick is 4 ms: the shortest pause taken is 2 ticks (8 ms), and
 * a period under one tick rounds to 0, which the kernel treats as "nothing
 * owed" (nr_dirtied_pause grows instead; see balance_once()).  Times
 * before that (the bandwidth estimate) keep ns.
 */
#define WB_HZ FOLIOFS_KERNEL_HZ
/* The time a writer's pause bookkeeping starts from: never 0 (0 is "never"). */
#define JIFFIES_ORIGIN (1ll << 32)
/* The longest single pause, HZ/5 ticks (200 ms). */
#define MAX_PAUSE_J (WB_HZ / 5 > 1 ? WB_HZ / 5 : 1)
/* A writer idle this long is forgotten (its next write starts afresh). */
#define WRITER_IDLE_NS (10 * WB_NSEC_PER_SEC)
/* The bandwidth estimate's averaging window: 2^32 ns, about 4.3 s. */
#define BW_PERIOD_SHIFT 32
/*
 * The writers' hash buckets.  Which idle writers are forgotten, and so
 * start afresh when they write again, depends on them (writer_get():
 * a lookup forgets the idle writers of its own bucket), so their number
 * is part of what the throttler computes: changing it changes the pauses.
 */
#define WRITER_BUCKETS 256
/* At the limit, writers wait until it is passed or this little is dirty. */
#define WB_STAT_ERROR 32

/* What the kernel keeps in task_struct for each dirtier. */
struct wb_writer {
	pid_t pid;
	uint64_t nr_dirtied;		/* bytes charged since the last check */
	uint64_t nr_dirtied_pause;	/* pages: check again after this many */
	uint64_t nr_pinned;		/* bytes newly pinned since the last check */
	uint64_t next_dirtied;		/* bytes the write being checked charged, */
	uint64_t next_pinned;		/* and pinned: counted after the check */
	uint64_t nr_pinned_pause;	/* pages: or after pinning this many */
	int64_t dirty_paused_when;	/* jiffies: when its last pause ended, 0: never */
	uint64_t pages_dirtied;		/* what the last pause was for */
	int64_t last_seen;		/* ns */
	bool again;			/* paused at the hard limit: re-check at its end */
};

/*
 * A hash bucket's writers, in no order: w[0, nr), and their pids in
 * pid[] (w[i]->pid), so that a lookup reads one array and not a chain
 * of writers, a cache miss apiece.  oldest: no writer in it was last
 * seen before then (a lower bound; INT64_MAX when it is empty), so a
 * lookup looks for idle writers only when some may be.
 */
struct wb_writer_bucket {
	struct wb_writer **w;
	pid_t *pid;
	uint32_t nr, cap;
	int64_t oldest;
};

/* The dirty limit of one domain, following its threshold down slowly. */
struct wb_domain_limit {
	uint64_t dirty_limit;
	int64_t stamp;
};

struct wb_throttle {
	pthread_mutex_t lock;		/* protects everything below */
	const struct wb_throttle_policy *policy;
	int64_t params[BS_PARAMS_MAX];	/* the policy's parameter values */
	struct wb_throttle_limits limits;
	struct wb_domain_limit dom[2];	/* [0] dirty, [1] pinned */

	/*
	 * Estimates, one window for all of them (the kernel's bw_time_stamp):
	 * whoever updates restarts it, writeback or a throttled writer.
	 */
	int64_t bw_time_stamp;		/* window start */
	uint64_t written_stamp;		/* written at its start */
	uint64_t dirtied_stamp;		/* dirtied at its start */
	int64_t dwork_due_ns;		/* the update after a file's writeback
					 * ended (the kernel's bw_dwork), 0: none */
	uint64_t write_bw;
	uint64_t avg_write_bw;
	uint64_t dirty_rate;
	uint64_t dirty_ratelimit;
	uint64_t balanced_dirty_ratelimit;
	bool dirty_exceeded;
	uint64_t ratelimit_bytes;	/* charged by any writer since one was checked */
	uint64_t pinned_ratelimit_bytes;	/* pinned by any writer since then */

	struct wb_writer_bucket writers[WRITER_BUCKETS];
	uint64_t nr_writers;

	/* Stats. */
	uint64_t pos_ratio;
	uint64_t task_ratelimit;
	uint64_t throttle_events;
	uint64_t throttle_ns;
	int64_t held;
	int64_t pause_ns, period_ns, think_ns;
};

/* ---- small maths ---- */

static unsigned int ilog2_u64(uint64_t v)
{
	return v ? 63u - (unsigned int)__builtin_clzll(v) : 0;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t mul_div(uint64_t a, uint64_t b, uint64_t c)
{
	unsigned __int128 p = (unsigned __int128)a * b / (c ? c : 1);

	return p > UINT64_MAX ? UINT64_MAX : (uint64_t)p;
}

static uint64_t pages_of(uint64_t bytes)
{
	return (bytes + PAGE_BYTES - 1) / PAGE_BYTES;
}

static uint64_t roundup_pow2(uint64_t v)
{
	return v <= 1 ? 1 : 1ull << (64 - __builtin_clzll(v - 1));
}

/* The tick @ns falls in (the kernel's jiffies), never 0. */
static int64_t jiffies_of(int64_t ns)
{
	return (int64_t)((__int128)ns * WB_HZ / WB_NSEC_PER_SEC) + JIFFIES_ORIGIN;
}

/* When tick @j begins, in ns. */
static int64_t ns_of_jiffies(int64_t j)
{
	return (int64_t)((__int128)(j - JIFFIES_ORIGIN) * WB_NSEC_PER_SEC / WB_HZ);
}

/* A length of @j ticks in ns, and in the tracepoints' ms. */
static int64_t jiffies_ns(int64_t j)
{
	return (int64_t)((__int128)j * WB_NSEC_PER_SEC / WB_HZ);
}

static long jiffies_ms(int64_t j)
{
	return (long)(j * 1000 / WB_HZ);
}

/* wb_pos_ratio_polynom() itself is in foliofs/policy.h, for loadable policies too. */

void wb_throttle_limits_of(uint64_t mem_bytes, unsigned int ratio, uint64_t bytes,
			   unsigned int bg_ratio, uint64_t bg_bytes,
			   unsigned int pinned_ratio, uint64_t pinned_bytes,
			   struct wb_throttle_limits *out)
{
	uint64_t mem_pages = mem_bytes / PAGE_BYTES;

	out->thresh = bytes ? pages_of(bytes) : mem_pages * ratio / 100;
	out->bg_thresh = bg_bytes ? pages_of(bg_bytes) : mem_pages * bg_ratio / 100;
	if (out->bg_thresh >= out->thresh)
		out->bg_thresh = out->thresh / 2;
	out->pinned_thresh = pinned_bytes ? pages_of(pinned_bytes) : mem_pages * pinned_ratio / 100;
	out->pinned_bg_thresh = out->thresh ?
		mul_div(out->pinned_thresh, out->bg_thresh, out->thresh) : 0;
}

/* ---- lifetime and settings ---- */

int wb_throttle_create(const struct wb_throttle_policy *policy,
		       const struct wb_throttle_limits *limits, int64_t now_ns,
		       struct wb_throttle **out)
{
	struct wb_throttle *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	t->policy = policy;
	bs_params_defaults(policy->params, policy->nr_params, t->params);
	t->limits = *limits;
	t->dom[0].dirty_limit = limits->thresh;
	t->dom[1].dirty_limit = limits->pinned_thresh;
	t->dom[0].stamp = t->dom[1].stamp = now_ns;
	t->bw_time_stamp = now_ns;
	t->write_bw = t->avg_write_bw = WB_INIT_BW;
	t->dirty_ratelimit = t->balanced_dirty_ratelimit = WB_INIT_BW;
	t->pos_ratio = WB_RATIO_ONE;
	*out = t;
	return 0;
}

void wb_throttle_destroy(struct wb_throttle *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < WRITER_BUCKETS; i++) {
		struct wb_writer_bucket *b = &t->writers[i];

		for (uint32_t j = 0; j < b->nr; j++)
			free(b->w[j]);
		free(b->w);
		free(b->pid);
	}
	pthread_mutex_destroy(&t->lock);
	free(t);
}

void wb_throttle_set_policy(struct wb_throttle *t, const struct wb_throttle_policy *policy)
{
	wb_throttle_set_policy_params(t, policy, NULL);
}

void wb_throttle_set_policy_params(struct wb_throttle *t, const struct wb_throttle_policy *policy,
				   const int64_t *params)
{
	pthread_mutex_lock(&t->lock);
	t->policy = policy;
	if (params)
		memcpy(t->params, params, sizeof(t->params));
	else
		bs_params_defaults(policy->params, policy->nr_params, t->params);
	pthread_mutex_unlock(&t->lock);
}

const struct wb_throttle_policy *wb_throttle_get_policy_params(struct wb_throttle *t,
							       int64_t *params)
{
	const struct wb_throttle_policy *p;

	pthread_mutex_lock(&t->lock);
	p = t->policy;
	memcpy(params, t->params, sizeof(t->params));
	pthread_mutex_unlock(&t->lock);
	return p;
}

const struct wb_throttle_policy *wb_throttle_get_policy(struct wb_throttle *t)
{
	const struct wb_throttle_policy *p;

	pthread_mutex_lock(&t->lock);
	p = t->policy;
	pthread_mutex_unlock(&t->lock);
	return p;
}

void wb_throttle_set_limits(struct wb_throttle *t, const struct wb_throttle_limits *limits)
{
	pthread_mutex_lock(&t->lock);
	t->limits = *limits;
	/*
	 * A threshold set by hand takes effect at once, up or down, as the
	 * kernel's dirty_ratio/dirty_bytes handlers reset the domain's limit;
	 * only a threshold that drops by itself is followed down slowly.
	 */
	t->dom[0].dirty_limit = limits->thresh;
	t->dom[1].dirty_limit = limits->pinned_thresh;
	pthread_mutex_unlock(&t->lock);
}

/* ---- domains ---- */

/* Fill @dtc for domain @d (0: dirty, 1: pinned); false if the domain is off. */
static bool dtc_fill(struct wb_throttle *t, int d, const struct wb_throttle_sample *s,
		     struct wb_dtc *dtc)
{
	const struct wb_throttle_limits *l = &t->limits;

	if (d == 0) {
		dtc->dirty = s->dirty;
		dtc->thresh = l->thresh;
		dtc->bg_thresh = l->bg_thresh;
	} else {
		if (!l->pinned_thresh)
			return false;
		dtc->dirty = s->pinned;
		dtc->thresh = l->pinned_thresh;
		dtc->bg_thresh = l->pinned_bg_thresh;
	}
	dtc->limit = max_u64(dtc->thresh, t->dom[d].dirty_limit);
	dtc->freerun = wb_freerun_ceiling(dtc->thresh, dtc->bg_thresh);
	dtc->setpoint = (dtc->freerun + dtc->limit) / 2;
	/* One device: it gets the whole threshold. */
	dtc->wb_thresh = dtc->thresh;
	dtc->wb_bg_thresh = dtc->bg_thresh;
	dtc->write_bw = t->avg_write_bw;
	dtc->params = t->params;
	return true;
}

/* The hard limit follows the threshold up at once and down by 1/32 a step. */
static void update_dirty_limit(struct wb_domain_limit *dom, const struct wb_dtc *dtc,
			       int64_t now_ns)
{
	uint64_t target;

	if (now_ns - dom->stamp < WB_BW_INTERVAL_NS)
		return;
	dom->stamp = now_ns;
	if (dom->dirty_limit < dtc->thresh) {
		dom->dirty_limit = dtc->thresh;
		return;
	}
	/* Never below what is dirty now: the limit must stay above it. */
	target = max_u64(dtc->thresh, dtc->dirty);
	if (dom->dirty_limit > target)
		dom->dirty_limit -= (dom->dirty_limit - target) >> 5;
}

/*
 * The domain a writer is throttled by: the one with the lower position
 * ratio (the pinned-memory domain plays the role the kernel gives a
 * memory cgroup).  Returns its ratio.
 */
static uint64_t pick_domain(struct wb_throttle *t, const struct wb_throttle_sample *s,
			    struct wb_dtc *out)
{
	struct wb_dtc dtc[2];
	uint64_t pos0, pos1;

	dtc_fill(t, 0, s, &dtc[0]);
	pos0 = t->policy->pos_ratio(&dtc[0]);
	*out = dtc[0];
	if (!dtc_fill(t, 1, s, &dtc[1]))
		return pos0;
	pos1 = t->policy->pos_ratio(&dtc[1]);
	if (pos1 < pos0) {
		*out = dtc[1];
		return pos1;
	}
	return pos0;
}

/* ---- estimates ---- */

static void update_write_bw(struct wb_throttle *t, int64_t elapsed, uint64_t written)
{
	const int64_t period = (int64_t)1 << BW_PERIOD_SHIFT;
	uint64_t done = written - min_u64(written, t->written_stamp);
	uint64_t avg = t->avg_write_bw, old = t->write_bw;
	unsigned __int128 bw;

	if (elapsed > period) {
		/* A long gap: the last interval alone is the estimate. */
		bw = (unsigned __int128)done * WB_NSEC_PER_SEC / (uint64_t)elapsed;
		avg = (uint64_t)bw;
	} else {
		/* Blend the interval's rate into a window of `period`. */
		bw = (unsigned __int128)done * WB_NSEC_PER_SEC +
		     (unsigned __int128)t->write_bw * (uint64_t)(period - elapsed);
		bw >>= BW_PERIOD_SHIFT;
		/* Second stage: follow old only when bw confirms the direction. */
		if (avg > old && old >= (uint64_t)bw)
			avg -= (avg - old) >> 3;
		if (avg < old && old <= (uint64_t)bw)
			avg += (old - avg) >> 3;
	}
	t->write_bw = (uint64_t)bw;
	t->avg_write_bw = max_u64(avg, 1);
}

static void update_dirty_ratelimit(struct wb_throttle *t, const struct wb_throttle_sample *s)
{
	uint64_t rate = t->dirty_ratelimit, write_bw = t->avg_write_bw;
	uint64_t task, balanced, step = 0, x, shift, dirty, setpoint;
	struct wb_dtc dtc;
	uint64_t pos = pick_domain(t, s, &dtc);

	task = (rate * pos >> WB_RATIO_SHIFT) + 1;	/* +1: lets a tiny rate ramp up */
	balanced = mul_div(task, write_bw, t->dirty_rate | 1);
	if (balanced > write_bw)
		balanced = write_bw;

	t->policy->rate_target(&dtc, &dirty, &setpoint);
	if (dirty < setpoint) {
		x = min_u64(min_u64(t->balanced_dirty_ratelimit, balanced), task);
		if (rate < x)
			step = x - rate;
	} else {
		x = max_u64(max_u64(t->balanced_dirty_ratelimit, balanced), task);
		if (rate > x)
			step = rate - x;
	}
	/* Smaller steps as the gap closes, relative to the rate itself. */
	shift = rate / (2 * step + 1);
	step = shift < 64 ? ((step >> shift) + 7) / 8 : 0;
	if (rate < balanced)
		rate += step;
	else
		rate -= min_u64(step, rate);
	t->dirty_ratelimit = max_u64(rate, 1);
	t->balanced_dirty_ratelimit = balanced;
	FOLIOFS_TP(bdi_dirty_ratelimit, .write_bw = FOLIOFS_TP_KBPS(t->write_bw),
		   .avg_write_bw = FOLIOFS_TP_KBPS(write_bw),
		   .dirty_rate = FOLIOFS_TP_KBPS(t->dirty_rate),
		   .dirty_ratelimit = FOLIOFS_TP_KBPS(t->dirty_ratelimit),
		   .task_ratelimit = FOLIOFS_TP_KBPS(task),
		   .balanced_dirty_ratelimit = FOLIOFS_TP_KBPS(balanced));
}

/*
 * The kernel's __wb_update_bandwidth(): the write bandwidth over the
 * window since the last update of anyone, and, for a throttled writer
 * (@ratelimit), the hard limits and the rate limit, with dirty_rate over
 * the same window; then a new window.  Context: lock held.
 */
static void update_bandwidth(struct wb_throttle *t, const struct wb_throttle_sample *s,
			     int64_t now_ns, bool ratelimit)
{
	int64_t elapsed = now_ns - t->bw_time_stamp > 0 ? now_ns - t->bw_time_stamp : 1;
	struct wb_dtc dtc;

	if (ratelimit) {
		t->dirty_rate = mul_div(s->dirtied - min_u64(s->dirtied, t->dirtied_stamp),
					WB_NSEC_PER_SEC, (uint64_t)elapsed);
		for (int d = 0; d < 2; d++)
			if (dtc_fill(t, d, s, &dtc))
				update_dirty_limit(&t->dom[d], &dtc, now_ns);
		update_dirty_ratelimit(t, s);
	}
	update_write_bw(t, elapsed, s->written);
	t->dirtied_stamp = s->dirtied;
	t->written_stamp = s->written;
	t->bw_time_stamp = now_ns;
}

/* More than WB_BW_INTERVAL_NS since the window started. */
static bool bandwidth_stale(const struct wb_throttle *t, int64_t now_ns)
{
	return now_ns - t->bw_time_stamp > WB_BW_INTERVAL_NS;
}

/*
 * The kernel queues an update of the bandwidth WB_BW_INTERVAL_NS after a
 * file's writeback ends (wb_inode_writeback_end(): bw_dwork), so that what
 * a burst wrote is counted soon; it runs whatever the window's age.  Here
 * it runs at the first call that reads the estimates after it is due, as
 * if at its time.  Context: lock held.
 */
static void run_due_update(struct wb_throttle *t, const struct wb_throttle_sample *s,
			   int64_t now_ns)
{
	if (t->dwork_due_ns && now_ns >= t->dwork_due_ns) {
		update_bandwidth(t, s, t->dwork_due_ns, false);
		t->dwork_due_ns = 0;
	}
}

/*
 * Writeback is starting (the kernel's wb_bandwidth_estimate_start()):
 * after more than a second with no update and nothing in flight, the
 * window restarts now, so that idle time does not count as slow writing.
 */
void wb_throttle_writeback_start(struct wb_throttle *t, const struct wb_throttle_sample *s,
				 int64_t now_ns)
{
	pthread_mutex_lock(&t->lock);
	run_due_update(t, s, now_ns);
	if (now_ns - t->bw_time_stamp > WB_NSEC_PER_SEC && !s->writeback) {
		t->dirtied_stamp = s->dirtied;
		t->written_stamp = s->written;
		t->bw_time_stamp = now_ns;
	}
	pthread_mutex_unlock(&t->lock);
}

/*
 * A pass over a file ended, nothing of it in flight: the end of the
 * kernel's do_writepages() (an update if the window is older than
 * WB_BW_INTERVAL_NS) and of the file's writeback (the delayed update).
 * So while the flushers go from file to file, writeback restarts the
 * window every WB_BW_INTERVAL_NS and a throttled writer seldom finds it
 * stale: on this machine's kernel the seed's scenario traced no
 * bdi_dirty_ratelimit event at all, and dirty_ratelimit stayed at its
 * initial 100 MB/s (contrib/results/calibrate-2026-12-07).
 */
void wb_throttle_update(struct wb_throttle *t, const struct wb_throttle_sample *s,
			int64_t now_ns)
{
	pthread_mutex_lock(&t->lock);
	run_due_update(t, s, now_ns);
	if (bandwidth_stale(t, now_ns))
		update_bandwidth(t, s, now_ns, false);
	if (!t->dwork_due_ns)
		t->dwork_due_ns = now_ns + WB_BW_INTERVAL_NS;
	pthread_mutex_unlock(&t->lock);
}

/* ---- writers ---- */

static struct wb_writer_bucket *writer_bucket(struct wb_throttle *t, pid_t pid)
{
	return &t->writers[(uint32_t)pid * 2654435761u % WRITER_BUCKETS];
}

/* Writer @pid's place in @b, or b->nr. */
static uint32_t writer_find(const struct wb_writer_bucket *b, pid_t pid)
{
	uint32_t i = 0;

	while (i < b->nr && b->pid[i] != pid)
		i++;
	return i;
}

/*
 * The writers of @b idle longer than WRITER_IDLE_NS at @now_ns and not
 * waiting to re-check are freed, except @pid's; b->oldest is made exact.
 */
static void writers_forget(struct wb_throttle *t, struct wb_writer_bucket *b, pid_t pid,
			   int64_t now_ns)
{
	b->oldest = INT64_MAX;
	for (uint32_t i = 0; i < b->nr;) {
		struct wb_writer *cur = b->w[i];

		if (cur->pid != pid && now_ns - cur->last_seen > WRITER_IDLE_NS && !cur->again) {
			free(cur);
			t->nr_writers--;
			b->w[i] = b->w[--b->nr];
			b->pid[i] = b->pid[b->nr];
			continue;
		}
		if (cur->last_seen < b->oldest)
			b->oldest = cur->last_seen;
		i++;
	}
}

/* A new writer @pid in @b: NULL when out of memory. */
static struct wb_writer *writer_new(struct wb_throttle *t, struct wb_writer_bucket *b, pid_t pid)
{
	struct wb_writer *w;
	struct wb_writer **pw;
	pid_t *pp;

	if (b->nr == b->cap) {
		uint32_t cap = b->cap ? 2 * b->cap : 8;

		pw = realloc(b->w, cap * sizeof(struct wb_writer *));
		if (pw)
			b->w = pw;
		pp = pw ? realloc(b->pid, cap * sizeof(*pp)) : NULL;
		if (!pp)
			return NULL;
		b->pid = pp;
		b->cap = cap;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->pid = pid;
	/* A new task's first check point (the kernel's, at fork): 32 pages. */
	w->nr_dirtied_pause = w->nr_pinned_pause = DIRTY_POLL_THRESH;
	b->w[b->nr] = w;
	b->pid[b->nr++] = pid;
	t->nr_writers++;
	return w;
}

/*
 * The state of writer @pid, made on first use.  Idle writers of its
 * bucket are freed on the way, so the table stays as small as the set
 * of recent writers whether or not anyone is throttled.
 */
static struct wb_writer *writer_get(struct wb_throttle *t, pid_t pid, int64_t now_ns)
{
	struct wb_writer_bucket *b = writer_bucket(t, pid);
	struct wb_writer *w;
	uint32_t i;

	if (!b->nr)
		b->oldest = INT64_MAX;
	else if (now_ns - b->oldest > WRITER_IDLE_NS)
		writers_forget(t, b, pid, now_ns);
	i = writer_find(b, pid);
	w = i < b->nr ? b->w[i] : writer_new(t, b, pid);
	if (!w)
		return NULL;	/* not tracked: runs free this time */
	w->last_seen = now_ns;
	if (now_ns < b->oldest)
		b->oldest = now_ns;
	return w;
}

/* Below the freerun point: check again after about sqrt(headroom) pages. */
static uint64_t dirty_poll_interval(uint64_t dirty, uint64_t thresh)
{
	if (thresh > dirty)
		return 1ull << (ilog2_u64(thresh - dirty) >> 1);
	return 1;
}

/*
 * The longest pause, in ticks: the time the device takes to write about
 * an eighth of what is dirty (sleeping longer could let it go idle), and
 * at most MAX_PAUSE_J.  The kernel's divisor is the bandwidth per
 * roundup_pow_of_two(1 + HZ/8) ticks: 32 ticks (128 ms) at HZ 250, so at
 * 50 MB/s (12800 pages/s) and 14000 pages dirty, 14000 / (1 + 400) + 1 =
 * 35 ticks (140 ms).
 */
static int64_t max_pause_of(uint64_t write_bw, uint64_t dirty)
{
	uint64_t t = dirty / (1 + write_bw / roundup_pow2(1 + WB_HZ / 8)) + 1;

	return t < MAX_PAUSE_J ? (int64_t)t : MAX_PAUSE_J;
}

/*
 * The shortest pause worth taking, in ticks, and (in *@pages) how many
 * pages the writer may dirty before its next check, aiming at pauses of
 * max(1, HZ/100) ticks (10 ms at HZ 100, 8 ms at HZ 250), N * 10 ms more
 * when 2^N writers share the bandwidth (fewer wake-ups).  The kernel's
 * pages per tick divide by roundup_pow_of_two(HZ), 256 at HZ 250: at a
 * rate limit of 25600 pages/s the target of 2 ticks is 200 pages, and the
 * shortest pause taken 1 + 2/2 = 2 ticks (8 ms).
 */
static int64_t min_pause_of(struct wb_throttle *t, int64_t max_pause, uint64_t task_rate,
			    uint64_t *pages)
{
	unsigned int hi = ilog2_u64(t->avg_write_bw), lo = ilog2_u64(t->dirty_ratelimit);
	const uint64_t hz_pow2 = roundup_pow2(WB_HZ);
	int64_t target = WB_HZ / 100 > 1 ? WB_HZ / 100 : 1, pause;
	uint64_t n;

	if (hi > lo)
		target += (int64_t)(hi - lo) * (10ll * WB_HZ) / 1024;
	/* Keep the target well under max_pause so n stays stable. */
	if (target > 1 + max_pause / 2)
		target = 1 + max_pause / 2;
	n = t->dirty_ratelimit * (uint64_t)target / hz_pow2;
	/* Very short pauses hurt throughput: stretch toward 32 pages. */
	if (n < DIRTY_POLL_THRESH) {
		target = max_pause;
		n = t->dirty_ratelimit * (uint64_t)target / hz_pow2;
		if (n > DIRTY_POLL_THRESH) {
			n = DIRTY_POLL_THRESH;
			target = (int64_t)((uint64_t)WB_HZ * DIRTY_POLL_THRESH / t->dirty_ratelimit);
		}
	}
	/* The pause n pages will cost at the task's rate must fit max_pause. */
	pause = (int64_t)(WB_HZ * n / (task_rate + 1));
	if (pause > max_pause) {
		target = max_pause;
		n = task_rate * (uint64_t)target / hz_pow2;
	}
	*pages = n;
	return n >= DIRTY_POLL_THRESH ? 1 + target / 2 : target;
}

/*
 * The kernel's trace_balance_dirty_pages() (foliofs_probes.h): where it
 * fires, once per round that is not freerun, the pause taken or, for a
 * pause too short to take, min(pause, 0).  Times in ms from ticks, as
 * the kernel's (so at HZ 250 every pause is a multiple of 4 ms, and a
 * pause taken is at least one tick: "pause > 0" counts exactly the
 * throttle_events).  One device: wb_setpoint is the kernel's setpoint *
 * wb_thresh / (thresh + 1), and wb_dirty is dirty.  The kernel's `paused`
 * (time already waited in this call) is 0: a writer kept at the hard limit
 * comes back as a round of its own (wb_throttle_again()).
 */
static void probe_balance(const struct wb_throttle *t, const struct wb_writer *w,
			  const struct wb_dtc *dtc, uint64_t task_rate, uint64_t pages_dirtied,
			  int64_t period, int64_t pause, int64_t think)
{
	FOLIOFS_TP(balance_dirty_pages, .limit = dtc->limit, .setpoint = dtc->setpoint,
		   .dirty = dtc->dirty,
		   .wb_setpoint = mul_div(dtc->setpoint, dtc->wb_thresh, dtc->thresh + 1),
		   .wb_dirty = dtc->dirty,
		   .dirty_ratelimit = FOLIOFS_TP_KBPS(t->dirty_ratelimit),
		   .task_ratelimit = FOLIOFS_TP_KBPS(task_rate),
		   .dirtied = (unsigned int)pages_dirtied,
		   .dirtied_pause = (unsigned int)w->nr_dirtied_pause,
		   .pause = jiffies_ms(pause), .period = (unsigned long)jiffies_ms(period),
		   .think = jiffies_ms(think), .pid = w->pid);
	(void)t, (void)w, (void)dtc, (void)task_rate, (void)pages_dirtied;
	(void)period, (void)pause, (void)think;
}

/*
 * One round of the kernel's loop for @w: the pause in ns (to the end of
 * its last tick), or 0.  Everything below is in ticks (jiffies), as the
 * kernel computes it.  Context: lock held.
 */
static int64_t balance_once(struct wb_throttle *t, struct wb_writer *w,
			    const struct wb_throttle_sample *s, int64_t now_ns)
{
	uint64_t pages_dirtied = w->pages_dirtied, task_rate, pos, next_pause_pages;
	int64_t now = jiffies_of(now_ns), start = now;
	int64_t max_pause, min_pause, period, pause, think;
	struct wb_dtc dtc, pinned;
	bool freerun, has_pinned;

	dtc_fill(t, 0, s, &dtc);
	FOLIOFS_TP(global_dirty_state, .nr_dirty = s->dirty, .nr_writeback = s->writeback,
		   .background_thresh = dtc.bg_thresh, .dirty_thresh = dtc.thresh,
		   .dirty_limit = dtc.limit, .nr_dirtied = s->dirtied, .nr_written = s->written);
	has_pinned = dtc_fill(t, 1, s, &pinned);
	freerun = t->policy->freerun(&dtc) && (!has_pinned || t->policy->freerun(&pinned));
	w->again = false;
	if (freerun) {
		/*
		 * Each domain's interval is in its own pages and applies to
		 * its own count: under the page or block charge a write of a
		 * few pages may pin a whole large folio.
		 */
		w->dirty_paused_when = now;
		w->nr_dirtied_pause = dirty_poll_interval(dtc.dirty, dtc.thresh);
		if (has_pinned)
			w->nr_pinned_pause = dirty_poll_interval(pinned.dirty, pinned.thresh);
		t->dirty_exceeded = false;
		return 0;
	}
	/*
	 * Only throttled writers steer the rate, and only when nobody
	 * updated the estimates for WB_BW_INTERVAL_NS.
	 */
	run_due_update(t, s, now_ns);
	if (bandwidth_stale(t, now_ns))
		update_bandwidth(t, s, now_ns, true);
	t->dirty_exceeded = dtc.dirty > dtc.thresh || (has_pinned && pinned.dirty > pinned.thresh);
	pos = pick_domain(t, s, &dtc);
	t->pos_ratio = pos;
	task_rate = t->dirty_ratelimit * pos >> WB_RATIO_SHIFT;
	max_pause = max_pause_of(t->avg_write_bw, dtc.dirty);
	min_pause = min_pause_of(t, max_pause, task_rate, &next_pause_pages);
	t->task_ratelimit = task_rate;
	think = w->dirty_paused_when ? now - w->dirty_paused_when : 0;

	if (task_rate == 0) {
		/*
		 * At the hard limit: wait max_pause, then look again, unless
		 * almost nothing is dirty (a limit of a few pages).
		 */
		period = pause = max_pause;
		w->again = dtc.dirty > WB_STAT_ERROR;
	} else {
		period = (int64_t)(WB_HZ * pages_dirtied / task_rate);
		pause = period;
		if (w->dirty_paused_when)
			pause -= now - w->dirty_paused_when;	/* think time is credited */
		if (pause < min_pause) {
			probe_balance(t, w, &dtc, task_rate, pages_dirtied, period,
				      pause < 0 ? pause : 0, think);
			/*
			 * Too short to sleep: carry the debt, or forget it
			 * after a second.  A period under one tick owes
			 * nothing: the writer keeps counting, and its check
			 * point moves on by what it dirtied.
			 */
			if (pause < -WB_HZ)
				w->dirty_paused_when = now;
			else if (period)
				w->dirty_paused_when += period;
			else if (w->nr_dirtied_pause <= pages_dirtied)
				w->nr_dirtied_pause += pages_dirtied;
			if (!period)	/* nothing was owed: keep counting */
				w->nr_dirtied = pages_dirtied * PAGE_BYTES;
			return 0;
		}
		if (pause > max_pause) {
			/* An occasional dip of the task rate: keep part of the debt. */
			now += pause - max_pause < max_pause ? pause - max_pause : max_pause;
			pause = max_pause;
		}
	}
	probe_balance(t, w, &dtc, task_rate, pages_dirtied, period, pause, think);
	t->think_ns = jiffies_ns(think);
	t->pause_ns = jiffies_ns(pause);
	t->period_ns = jiffies_ns(period);
	t->throttle_events++;
	w->dirty_paused_when = now + pause;
	w->nr_dirtied_pause = next_pause_pages;
	/* As the kernel counts a page dirtied in a memcg in both domains. */
	w->nr_pinned_pause = next_pause_pages;
	/* The sleep ends when the tick count reaches start + pause. */
	return ns_of_jiffies(start + pause) - now_ns;
}

/*
 * Whether @count bytes since the last check reach the check point of
 * @pause pages (8 at most over the threshold, when every writer is checked
 * often), or @total bytes from anyone reach thresh/32 pages: many writers
 * that each stay under their own check point must not escape together, so
 * after that much the next writer is checked (the kernel's per-CPU
 * ratelimit_pages).
 */
static bool check_due(const struct wb_throttle *t, uint64_t count, uint64_t pause,
		      uint64_t total, uint64_t thresh)
{
	if (t->dirty_exceeded)
		pause = min_u64(pause, 8);
	return count >= pause * PAGE_BYTES || total >= max_u64(thresh / 32, 16) * PAGE_BYTES;
}

/* Count what @w's last write charged and pinned. Context: lock held. */
static void count_write(struct wb_throttle *t, struct wb_writer *w, uint64_t dirtied_bytes,
			uint64_t pinned_bytes)
{
	w->nr_dirtied += dirtied_bytes;
	t->ratelimit_bytes += dirtied_bytes;
	if (t->limits.pinned_thresh) {
		w->nr_pinned += pinned_bytes;
		t->pinned_ratelimit_bytes += pinned_bytes;
	}
}

/*
 * The kernel checks a writer before each folio it writes
 * (balance_dirty_pages_ratelimited_flags() at the top of the write loop),
 * on what it dirtied before: the pause for the pages a write dirtied is
 * taken at the writer's next write, and the time between the two is think
 * time.  So the check point is judged on the counts before this write's;
 * when it is due, this write's charge is counted after the check
 * (wb_throttle_balance()), as the kernel counts the folio it then writes.
 * (The daemon has already made the write: what the writer feels, a write
 * that returns after the pause, is the kernel's.)
 */
bool wb_throttle_charge_pinned(struct wb_throttle *t, pid_t pid, uint64_t dirtied_bytes,
			       uint64_t pinned_bytes, int64_t now_ns)
{
	struct wb_writer *w;
	bool due = false;

	pthread_mutex_lock(&t->lock);
	w = writer_get(t, pid, now_ns);
	if (!w)
		goto out;
	due = check_due(t, w->nr_dirtied, w->nr_dirtied_pause, t->ratelimit_bytes,
			t->limits.thresh);
	if (t->limits.pinned_thresh)
		due = due || check_due(t, w->nr_pinned, w->nr_pinned_pause,
				       t->pinned_ratelimit_bytes, t->limits.pinned_thresh);
	if (due) {
		w->next_dirtied = dirtied_bytes;
		w->next_pinned = pinned_bytes;
	} else {
		count_write(t, w, dirtied_bytes, pinned_bytes);
	}
out:
	pthread_mutex_unlock(&t->lock);
	return due;
}

int64_t wb_throttle_balance(struct wb_throttle *t, pid_t pid,
			    const struct wb_throttle_sample *s, int64_t now_ns)
{
	struct wb_writer *w;
	int64_t pause = 0;

	pthread_mutex_lock(&t->lock);
	w = writer_get(t, pid, now_ns);
	if (w) {
		t->ratelimit_bytes = 0;
		t->pinned_ratelimit_bytes = 0;
		w->pages_dirtied = pages_of(w->nr_dirtied);
		w->nr_dirtied = 0;
		w->nr_pinned = 0;
		pause = balance_once(t, w, s, now_ns);
		count_write(t, w, w->next_dirtied, w->next_pinned);
		w->next_dirtied = w->next_pinned = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return pause;
}

int64_t wb_throttle_again(struct wb_throttle *t, pid_t pid,
			  const struct wb_throttle_sample *s, int64_t now_ns)
{
	struct wb_writer *w;
	int64_t pause = 0;

	pthread_mutex_lock(&t->lock);
	w = writer_get(t, pid, now_ns);
	if (w && w->again)
		pause = balance_once(t, w, s, now_ns);
	pthread_mutex_unlock(&t->lock);
	return pause;
}

bool wb_throttle_recheck(struct wb_throttle *t, pid_t pid,
			 const struct wb_throttle_sample *s, int64_t now_ns)
{
	struct wb_dtc dtc, pinned;
	bool paused = true;

	pthread_mutex_lock(&t->lock);
	dtc_fill(t, 0, s, &dtc);
	if (t->policy->freerun(&dtc) &&
	    (!dtc_fill(t, 1, s, &pinned) || t->policy->freerun(&pinned))) {
		struct wb_writer *w = writer_get(t, pid, now_ns);

		paused = false;
		if (w) {
			w->again = false;
			w->dirty_paused_when = jiffies_of(now_ns);
		}
	}
	pthread_mutex_unlock(&t->lock);
	return paused;
}

void wb_throttle_unheld_at(struct wb_throttle *t, pid_t pid, int64_t held_ns, bool early)
{
	pthread_mutex_lock(&t->lock);
	t->held--;
	t->throttle_ns += (uint64_t)(held_ns > 0 ? held_ns : 0);
	if (early) {
		struct wb_writer_bucket *b = writer_bucket(t, pid);
		uint32_t i = writer_find(b, pid);

		if (i < b->nr)
			b->w[i]->again = false;
	}
	pthread_mutex_unlock(&t->lock);
}

void wb_throttle_held_add(struct wb_throttle *t, int delta)
{
	pthread_mutex_lock(&t->lock);
	t->held += delta;
	pthread_mutex_unlock(&t->lock);
}

void wb_throttle_stats(struct wb_throttle *t, struct wb_throttle_stats *st)
{
	struct wb_throttle_sample none = { 0 };
	struct wb_dtc dtc;

	pthread_mutex_lock(&t->lock);
	st->limits = t->limits;
	dtc_fill(t, 0, &none, &dtc);
	st->dirty_limit = dtc.limit;
	st->setpoint = dtc.setpoint;
	st->pinned_limit = dtc_fill(t, 1, &none, &dtc) ? dtc.limit : 0;
	st->write_bw = t->write_bw;
	st->avg_write_bw = t->avg_write_bw;
	st->dirty_rate = t->dirty_rate;
	st->dirty_ratelimit = t->dirty_ratelimit;
	st->balanced_dirty_ratelimit = t->balanced_dirty_ratelimit;
	st->pos_ratio = t->pos_ratio;
	st->task_ratelimit = t->task_ratelimit;
	st->throttle_events = t->throttle_events;
	st->throttle_ns = t->throttle_ns;
	st->throttled_writers = t->held > 0 ? (uint64_t)t->held : 0;
	st->pause_ns = t->pause_ns;
	st->period_ns = t->period_ns;
	st->think_ns = t->think_ns;
	st->writers = t->nr_writers;
	pthread_mutex_unlock(&t->lock);
}
