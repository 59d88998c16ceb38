// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_throttle.c - the throttler on a virtual clock against a modelled
 * device: writers that want to dirty far faster than the device writes,
 * flushers that write at the device's bandwidth above the background
 * threshold.  Nothing sleeps; every run is the same run.
 *
 * Checks: one writer at 10x the bandwidth settles around the setpoint and
 * never passes the limit by more than one check batch; four writers get
 * fair shares; `none` lets the charge run past the limit; strictlimit
 * holds dirty lower than bdp; no pause exceeds max_pause; think time is
 * credited; a run-time switch to `none` ends a hard-limit pause.
 */
#include "throttle.h"
#include "flushpolicy.h"
#include "test_helpers.h"

#include <string.h>

#define MS WB_NSEC_PER_MSEC
#define SEC WB_NSEC_PER_SEC
#define MAX_WRITERS 32

struct model {
	struct wb_throttle *t;
	struct wb_throttle_limits limits;
	struct wb_throttle_sample s;
	uint64_t device_bw;		/* pages/s */
	double written_frac;		/* part of a page written so far */
	int64_t now;
	/* writers */
	int nr;
	uint64_t want_rate;		/* pages/s each writer would dirty */
	uint64_t chunk;			/* pages per write */
	uint64_t pin;			/* pages each write newly pins, 0: chunk */
	int64_t next_write[MAX_WRITERS];
	int64_t resume[MAX_WRITERS];	/* paused until */
	bool held_again[MAX_WRITERS];	/* paused at the limit: ask again at resume */
	uint64_t dirtied[MAX_WRITERS];	/* pages, in the measured window */
	/* observations */
	uint64_t max_dirty;
	uint64_t max_pinned;
	int64_t max_pause;
	int64_t pause_over_max;		/* pauses longer than the max_pause they were due */
	bool device_busy;
	uint64_t pass_pages;		/* written in the current pass */
	uint64_t pauses;
	double dirty_sum;
	uint64_t dirty_samples;
};

static void model_init(struct model *m, const struct wb_throttle_policy *p, int writers,
		       uint64_t device_bw, uint64_t want_rate)
{
	memset(m, 0, sizeof(*m));
	/* 1 GiB of cache, 20% / 10%: thresh 52428 pages, bg 26214. */
	wb_throttle_limits_of(1ull << 30, 20, 0, 10, 0, 0, 0, &m->limits);
	T_CHECK(m->limits.thresh == 52428 && m->limits.bg_thresh == 26214);
	m->now = 1 * SEC;
	T_CHECK(wb_throttle_create(p, &m->limits, m->now, &m->t) == 0);
	m->nr = writers;
	m->device_bw = device_bw;
	m->want_rate = want_rate;
	m->chunk = 2;	/* 8 KiB writes */
}

/*
 * Whether the flushers write in the background: their own decision
 * (wb_fp_over_background) on the thresholds as tunables.c publishes them
 * and the model's state, in bytes.
 */
static bool over_background(const struct wb_throttle_limits *l, const struct wb_throttle_sample *s)
{
	const struct wb_fp_state st = {
		.dirty_charged = s->dirty * BS_PAGE_SIZE,
		.pinned = s->pinned * BS_PAGE_SIZE,
		.bg_thresh = l->bg_thresh * BS_PAGE_SIZE,
		.pinned_bg_thresh = l->pinned_thresh ? l->pinned_bg_thresh * BS_PAGE_SIZE : 0,
	};

	return wb_fp_over_background(&st);
}

/* The end of a flusher's pass over the file, as the engine tells the throttler. */
static void pass_end(struct model *m)
{
	wb_throttle_update(m->t, &m->s, m->now);
	m->pass_pages = 0;
}

/*
 * Advance the device by @dt: background writeback above a background
 * threshold, in passes of one chunk each (the engine's: half a second at
 * the bandwidth, wb_fp_chunk_pages()), with the throttler told of each
 * pass's start and end.  device_bw counts pinned pages (whole folios, as
 * the mount's write_bw does); each charged page written unpins pin /
 * chunk of them.
 */
static void device_step(struct model *m, int64_t dt)
{
	uint64_t per = m->pin ? m->pin / m->chunk : 1;
	struct wb_throttle_stats st;
	double pages;
	uint64_t n;

	if (!over_background(&m->limits, &m->s)) {
		if (m->device_busy)
			pass_end(m);
		m->device_busy = false;
		return;
	}
	if (!m->device_busy) {
		/* Writeback starts after an idle spell, as the flushers tell it. */
		wb_throttle_writeback_start(m->t, &m->s, m->now);
		m->device_busy = true;
	}
	pages = (double)m->device_bw * (double)dt / (double)SEC / (double)per + m->written_frac;
	n = (uint64_t)pages;
	m->written_frac = pages - (double)n;
	if (n > m->s.dirty)
		n = m->s.dirty;
	m->s.dirty -= n;
	m->s.pinned -= m->pin ? n * per : 0;
	m->s.written += n * per;
	m->pass_pages += n * per;
	wb_throttle_stats(m->t, &st);
	if (m->pass_pages >= (uint64_t)wb_fp_chunk_pages(st.avg_write_bw, st.dirty_limit)) {
		pass_end(m);
		wb_throttle_writeback_start(m->t, &m->s, m->now);
	}
}

/*
 * The longest pause the kernel allows with @dirty pages at @bw pages/s:
 * wb_max_pause() in ticks of 4 ms (HZ 250; its divisor, the bandwidth per
 * roundup_pow_of_two(1 + HZ/8) = 32 ticks, worked out by hand).
 */
static int64_t expected_max_pause(uint64_t dirty, uint64_t bw)
{
	int64_t tick = SEC / FOLIOFS_KERNEL_HZ, pow2 = 1;
	int64_t t;

	while (pow2 < 1 + FOLIOFS_KERNEL_HZ / 8)
		pow2 <<= 1;
	t = ((int64_t)dirty / (1 + (int64_t)bw / pow2) + 1) * tick;
	return t < WB_MAX_PAUSE_NS ? t : WB_MAX_PAUSE_NS;
}

static void note_pause(struct model *m, int w, int64_t pause)
{
	struct wb_throttle_stats st;

	T_CHECK(pause >= 0);
	T_CHECK(pause <= WB_MAX_PAUSE_NS);
	wb_throttle_stats(m->t, &st);
	/* 1 ms of slack: the bandwidth may have been updated in this very call. */
	if (pause > expected_max_pause(m->s.dirty, st.avg_write_bw) + MS)
		m->pause_over_max++;
	if (pause > m->max_pause)
		m->max_pause = pause;
	if (pause) {
		m->pauses++;
		m->resume[w] = m->now + pause;
	}
}

/* Run for @dur with a step of 100 us; stats are gathered after @warmup. */
static void model_run(struct model *m, int64_t dur, int64_t warmup)
{
	const int64_t step = 100 * 1000LL;
	int64_t end = m->now + dur, measure = m->now + warmup;

	while (m->now < end) {
		m->now += step;
		device_step(m, step);
		for (int w = 0; w < m->nr; w++) {
			if (m->now < m->resume[w] || m->now < m->next_write[w])
				continue;
			if (m->held_again[w]) {
				/* Every pause ends with a look (it loops only at the limit). */
				int64_t p = wb_throttle_again(m->t, 100 + w, &m->s, m->now);

				m->held_again[w] = p > 0;
				note_pause(m, w, p);
				if (p)
					continue;
			}
			m->s.dirty += m->chunk;
			m->s.dirtied += m->chunk;
			m->s.pinned += m->pin;
			if (m->now >= measure)
				m->dirtied[w] += m->chunk;
			m->next_write[w] = m->now + (int64_t)(m->chunk * SEC / m->want_rate);
			if (wb_throttle_charge_pinned(m->t, 100 + w, m->chunk * 4096, m->pin * 4096,
						      m->now)) {
				int64_t p = wb_throttle_balance(m->t, 100 + w, &m->s, m->now);

				note_pause(m, w, p);
				m->held_again[w] = p > 0;
			}
		}
		if (m->now >= measure) {
			if (m->s.dirty > m->max_dirty)
				m->max_dirty = m->s.dirty;
			if (m->s.pinned > m->max_pinned)
				m->max_pinned = m->s.pinned;
			m->dirty_sum += (double)m->s.dirty;
			m->dirty_samples++;
		}
	}
}

static double avg_dirty(const struct model *m)
{
	return m->dirty_sum / (double)m->dirty_samples;
}

static void dump(const char *what, const struct model *m)
{
	struct wb_throttle_stats st;

	wb_throttle_stats(m->t, &st);
	fprintf(stderr,
		"%s: avg dirty %.0f max %llu (freerun %llu setpoint %llu limit %llu) pauses %llu max pause %lld ms ratelimit %llu balanced %llu write_bw %llu\n",
		what, avg_dirty(m), (unsigned long long)m->max_dirty,
		(unsigned long long)((m->limits.thresh + m->limits.bg_thresh) / 2),
		(unsigned long long)st.setpoint, (unsigned long long)st.dirty_limit,
		(unsigned long long)m->pauses, (long long)(m->max_pause / MS),
		(unsigned long long)st.dirty_ratelimit,
		(unsigned long long)st.balanced_dirty_ratelimit,
		(unsigned long long)st.avg_write_bw);
}

/* One writer at 10x the device: held near the setpoint, never far past the limit. */
static void test_one_writer(void)
{
	struct wb_throttle_stats st;
	struct model m;

	model_init(&m, &wb_throttle_bdp, 1, 12800 /* 50 MB/s */, 128000);
	model_run(&m, 60 * SEC, 30 * SEC);
	dump("bdp, 1 writer", &m);
	wb_throttle_stats(m.t, &st);
	T_CHECK(m.pauses > 0);
	/* Settled near the setpoint: within half the way to the limit. */
	T_CHECK(avg_dirty(&m) > (double)st.setpoint - (double)(st.dirty_limit - st.setpoint) / 2);
	T_CHECK(avg_dirty(&m) < (double)st.setpoint + (double)(st.dirty_limit - st.setpoint) / 2);
	T_CHECK(m.pause_over_max == 0);
	/* One writer: the balanced rate is the device's bandwidth. */
	T_CHECK(st.balanced_dirty_ratelimit > 12800 * 9 / 10 &&
		st.balanced_dirty_ratelimit < 12800 * 11 / 10);
	/* Never past the limit by more than one check batch (thresh / 32 pages). */
	T_CHECK(m.max_dirty <= st.dirty_limit + m.limits.thresh / 32);
	/* The rate limit found the device's bandwidth (within 25%). */
	T_CHECK(st.dirty_ratelimit > 12800 * 3 / 4 && st.dirty_ratelimit < 12800 * 5 / 4);
	wb_throttle_destroy(m.t);
}

/* Four writers share the device fairly. */
static void test_fairness(void)
{
	uint64_t total = 0, lo = UINT64_MAX, hi = 0;
	struct wb_throttle_stats st;
	struct model m;

	model_init(&m, &wb_throttle_bdp, 4, 12800, 64000);
	model_run(&m, 60 * SEC, 30 * SEC);
	dump("bdp, 4 writers", &m);
	for (int w = 0; w < 4; w++) {
		total += m.dirtied[w];
		lo = m.dirtied[w] < lo ? m.dirtied[w] : lo;
		hi = m.dirtied[w] > hi ? m.dirtied[w] : hi;
	}
	fprintf(stderr, "  shares: lowest %llu highest %llu of %llu\n",
		(unsigned long long)lo, (unsigned long long)hi, (unsigned long long)total);
	T_CHECK(hi - lo <= total / 4 / 5);	/* within 20% of a fair share */
	wb_throttle_stats(m.t, &st);
	T_CHECK(m.pause_over_max == 0);
	/* Four writers: the balanced rate is a quarter of the bandwidth. */
	T_CHECK(st.balanced_dirty_ratelimit > 3200 * 9 / 10 &&
		st.balanced_dirty_ratelimit < 3200 * 11 / 10);
	/* Each writer's rate is about a quarter of the device's. */
	T_CHECK(st.dirty_ratelimit > 12800 / 4 * 3 / 4 && st.dirty_ratelimit < 12800 / 4 * 5 / 4);
	T_CHECK(m.max_dirty <= st.dirty_limit + m.limits.thresh / 32);
	wb_throttle_destroy(m.t);
}

/* `none` never pauses: the charge runs past the limit. */
static void test_none(void)
{
	struct wb_throttle_stats st;
	struct model m;

	model_init(&m, &wb_throttle_none, 1, 12800, 128000);
	model_run(&m, 10 * SEC, 0);
	dump("none", &m);
	wb_throttle_stats(m.t, &st);
	T_CHECK(m.pauses == 0);
	T_CHECK(m.max_dirty > st.dirty_limit);
	wb_throttle_destroy(m.t);
}

/* strictlimit steers dirty to its freerun point, below bdp's setpoint. */
static void test_strictlimit(void)
{
	struct wb_throttle_stats st;
	struct model m;
	double bdp_avg;

	model_init(&m, &wb_throttle_bdp, 1, 12800, 128000);
	model_run(&m, 60 * SEC, 30 * SEC);
	bdp_avg = avg_dirty(&m);
	wb_throttle_destroy(m.t);

	model_init(&m, &wb_throttle_strictlimit, 1, 12800, 128000);
	model_run(&m, 60 * SEC, 30 * SEC);
	dump("strictlimit", &m);
	wb_throttle_stats(m.t, &st);
	T_CHECK(m.pauses > 0);
	T_CHECK(avg_dirty(&m) < bdp_avg);
	T_CHECK(m.max_dirty <= m.limits.thresh + m.limits.thresh / 32);
	wb_throttle_destroy(m.t);
}

/*
 * Think time: two identical writers above the freerun point; one comes
 * back right after its pause, the other thinks 30 ms first.  The second
 * one's next pause is shorter by the time it thought.
 */
static void test_think_time(void)
{
	struct wb_throttle_limits l;
	struct wb_throttle *a, *b;
	struct wb_throttle_sample s = { 0 };
	int64_t t0 = 5 * SEC, pa, pb, pa2, pb2;

	wb_throttle_limits_of(1ull << 30, 20, 0, 10, 0, 0, 0, &l);
	T_CHECK(wb_throttle_create(&wb_throttle_bdp, &l, t0, &a) == 0);
	T_CHECK(wb_throttle_create(&wb_throttle_bdp, &l, t0, &b) == 0);
	/* Between the freerun point and the setpoint. */
	s.dirty = (l.thresh + l.bg_thresh) / 2 + 4000;
	/* Each write is checked on what was dirtied before it: the next write pays. */
	T_CHECK(!wb_throttle_charge(a, 1, 2048ULL * 4096, t0));
	T_CHECK(!wb_throttle_charge(b, 1, 2048ULL * 4096, t0));
	T_CHECK(wb_throttle_charge(a, 1, 0, t0) && wb_throttle_charge(b, 1, 0, t0));
	pa = wb_throttle_balance(a, 1, &s, t0);
	pb = wb_throttle_balance(b, 1, &s, t0);
	fprintf(stderr, "think: first pauses %lld %lld\n", (long long)pa, (long long)pb);
	T_CHECK(pa == pb && pa > 0);
	/* Same charge again; b comes back 30 ms later. */
	wb_throttle_charge(a, 1, 2048ULL * 4096, t0 + pa);
	wb_throttle_charge(b, 1, 2048ULL * 4096, t0 + pb + 30 * MS);
	T_CHECK(wb_throttle_charge(a, 1, 0, t0 + pa));
	T_CHECK(wb_throttle_charge(b, 1, 0, t0 + pb + 30 * MS));
	pa2 = wb_throttle_balance(a, 1, &s, t0 + pa);
	pb2 = wb_throttle_balance(b, 1, &s, t0 + pb + 30 * MS);
	fprintf(stderr, "think: pauses %lld us, then %lld us without and %lld us after 30 ms of thinking\n",
		(long long)pa / 1000, (long long)pa2 / 1000, (long long)pb2 / 1000);
	T_CHECK(pa2 > 30 * MS);
	T_CHECK(pb2 == pa2 - 30 * MS);
	wb_throttle_destroy(a);
	wb_throttle_destroy(b);
}

/* At the hard limit a writer waits max_pause at a time until a switch releases it. */
static void test_hard_limit_and_switch(void)
{
	struct wb_throttle_limits l;
	struct wb_throttle_sample s = { 0 };
	struct wb_throttle *t;
	int64_t now = 5 * SEC, p;

	wb_throttle_limits_of(1ull << 30, 20, 0, 10, 0, 0, 0, &l);
	T_CHECK(wb_throttle_create(&wb_throttle_bdp, &l, now, &t) == 0);
	s.dirty = l.thresh + 100;
	T_CHECK(!wb_throttle_charge(t, 7, 1024ULL * 4096, now));
	T_CHECK(wb_throttle_charge(t, 7, 0, now));
	p = wb_throttle_balance(t, 7, &s, now);
	T_CHECK(p > 0 && p <= WB_MAX_PAUSE_NS);
	/* Still over: again and again. */
	for (int i = 0; i < 5; i++) {
		now += p;
		p = wb_throttle_again(t, 7, &s, now);
		T_CHECK(p > 0 && p <= WB_MAX_PAUSE_NS);
	}
	/* Under the limit (written back): released. */
	s.dirty = l.bg_thresh;
	now += p;
	T_CHECK(wb_throttle_again(t, 7, &s, now) == 0);
	/* Over again, then the policy becomes none: released at once. */
	s.dirty = l.thresh + 100;
	wb_throttle_charge(t, 7, 1024ULL * 4096, now);
	T_CHECK(wb_throttle_charge(t, 7, 0, now));
	T_CHECK(wb_throttle_balance(t, 7, &s, now) > 0);
	wb_throttle_set_policy(t, &wb_throttle_none);
	T_CHECK(wb_throttle_again(t, 7, &s, now + MS) == 0);
	wb_throttle_destroy(t);
}

/* The pinned-memory limit throttles even when the dirty charge is low. */
static void test_pinned_limit(void)
{
	struct wb_throttle_limits l;
	struct wb_throttle_sample s = { 0 };
	struct wb_throttle *t;
	int64_t now = 5 * SEC;

	/* 1 GiB, dirty 20%, pinned 5%. */
	wb_throttle_limits_of(1ull << 30, 20, 0, 10, 0, 5, 0, &l);
	T_CHECK(l.pinned_thresh == 13107 && l.pinned_bg_thresh == 6553);
	T_CHECK(wb_throttle_create(&wb_throttle_bdp, &l, now, &t) == 0);
	s.dirty = 100;
	s.pinned = l.pinned_thresh + 10;
	T_CHECK(over_background(&l, &s));
	T_CHECK(!wb_throttle_charge(t, 9, 64ULL * 4096, now));
	T_CHECK(wb_throttle_charge(t, 9, 0, now));
	T_CHECK(wb_throttle_balance(t, 9, &s, now) > 0);
	/* Without the pinned limit the same state runs free. */
	l.pinned_thresh = l.pinned_bg_thresh = 0;
	wb_throttle_set_limits(t, &l);
	T_CHECK(!over_background(&l, &s));
	now += WB_MAX_PAUSE_NS;
	T_CHECK(wb_throttle_again(t, 9, &s, now) == 0);
	wb_throttle_destroy(t);
}

/*
 * The pinned limit holds for writers whose charge is far below what they
 * pin: 8 KiB writes charged 2 pages (dirty_account=page), each pinning a
 * new 2 MiB folio.  The charge stays far under its own freerun point, so
 * only checks counted in pinned pages can stop them.  Past the limit by at
 * most two writes per writer: each may have pinned a folio since the check
 * that let it go on, and the write that is checked has pinned one too
 * (the daemon makes a write before it holds its reply; the kernel checks
 * before the write).
 */
static void test_pinned_charge_far_below(void)
{
	struct wb_throttle_stats st;
	struct model m;

	model_init(&m, &wb_throttle_bdp, 4, 12800 /* 50 MB/s of folios */, 2000);
	wb_throttle_limits_of(1ull << 30, 20, 0, 10, 0, 5, 0, &m.limits);
	wb_throttle_set_limits(m.t, &m.limits);
	m.pin = 512;
	model_run(&m, 30 * SEC, 0);
	wb_throttle_stats(m.t, &st);
	fprintf(stderr, "pinned, charge 1/256 of it: max pinned %llu (limit %llu), max dirty %llu, pauses %llu\n",
		(unsigned long long)m.max_pinned, (unsigned long long)st.pinned_limit,
		(unsigned long long)m.max_dirty, (unsigned long long)m.pauses);
	T_CHECK(m.pauses > 0);
	T_CHECK(m.max_dirty < m.limits.bg_thresh);
	T_CHECK(m.max_pinned <= st.pinned_limit + 2 * (uint64_t)m.nr * m.pin);
	wb_throttle_destroy(m.t);
}

/* Many writers, each under its own check point, still stop near the limit. */
static void test_many_writers(void)
{
	struct wb_throttle_stats st;
	struct model m;

	model_init(&m, &wb_throttle_bdp, 32, 12800, 2000);
	model_run(&m, 40 * SEC, 20 * SEC);
	dump("bdp, 32 writers", &m);
	wb_throttle_stats(m.t, &st);
	T_CHECK(m.max_dirty <= st.dirty_limit + m.limits.thresh / 32);
	T_CHECK(m.pause_over_max == 0);
	wb_throttle_destroy(m.t);
}

/* The bandwidth estimate survives an idle spell: idle time is not slow writing. */
static void test_idle_gap(void)
{
	struct wb_throttle_stats st;
	struct model m;

	model_init(&m, &wb_throttle_bdp, 1, 12800, 128000);
	model_run(&m, 20 * SEC, 0);
	/* The writer stops for a minute; the device drains, then idles. */
	for (int64_t end = m.now + 60 * SEC; m.now < end; m.now += MS)
		device_step(&m, MS);
	model_run(&m, 3 * SEC, 0);
	wb_throttle_stats(m.t, &st);
	fprintf(stderr, "idle gap: avg_write_bw %llu after a minute idle\n",
		(unsigned long long)st.avg_write_bw);
	T_CHECK(st.avg_write_bw > 12800 * 8 / 10 && st.avg_write_bw < 12800 * 12 / 10);
	wb_throttle_destroy(m.t);
}

/* A lowered threshold applies at once (as the kernel's sysctl handlers do). */
static void test_lower_at_once(void)
{
	struct wb_throttle_limits l, low;
	struct wb_throttle_stats st;
	struct wb_throttle *t;

	wb_throttle_limits_of(4ull << 30, 20, 0, 10, 0, 0, 0, &l);
	T_CHECK(wb_throttle_create(&wb_throttle_bdp, &l, 0, &t) == 0);
	wb_throttle_limits_of(4ull << 30, 20, 16ull << 20, 10, 0, 0, 0, &low);
	wb_throttle_set_limits(t, &low);
	wb_throttle_stats(t, &st);
	T_CHECK(st.dirty_limit == 4096 && st.limits.thresh == 4096 && st.limits.bg_thresh == 2048);
	wb_throttle_destroy(t);
}

/*
 * Pauses too short to take are a debt: a writer checked again and again
 * without thinking accumulates them until one is worth sleeping.  Its
 * first checks owe less than a tick (16 pages at twice 25600 pages/s):
 * nothing, so its check point moves on (the kernel's nr_dirtied_pause +=
 * pages_dirtied) and it charges more before the next.
 */
static void test_debt(void)
{
	struct wb_throttle_limits l;
	struct wb_throttle_sample s = { 0 };
	struct wb_throttle *t;
	int64_t now = 5 * SEC, p = 0;
	int calls = 0, charges = 0;

	wb_throttle_limits_of(1ull << 30, 20, 0, 10, 0, 0, 0, &l);
	T_CHECK(wb_throttle_create(&wb_throttle_bdp, &l, now, &t) == 0);
	s.dirty = (l.thresh + l.bg_thresh) / 2 + 100;	/* just past freerun */
	while (p == 0 && charges < 100000) {
		charges++;
		if (!wb_throttle_charge(t, 3, 16ULL * 4096, now) && calls)
			continue;
		p = wb_throttle_balance(t, 3, &s, now);
		calls++;
	}
	fprintf(stderr, "debt: first pause after %d short checks, %d charges\n", calls, charges);
	T_CHECK(p > 0 && calls > 1 && charges > calls && charges < 100000);
	wb_throttle_destroy(t);
}

/* A settings change releases only writers it lets run free. */
static void test_recheck(void)
{
	struct wb_throttle_limits l;
	struct wb_throttle_sample s = { 0 };
	struct wb_throttle *t;
	int64_t now = 5 * SEC;

	wb_throttle_limits_of(1ull << 30, 20, 0, 10, 0, 0, 0, &l);
	T_CHECK(wb_throttle_create(&wb_throttle_bdp, &l, now, &t) == 0);
	s.dirty = (l.thresh + l.bg_thresh) / 2 + 4000;
	/*
	 * A write is checked on what the writer dirtied before it: a new
	 * writer's first check point is 32 pages on; the next write (an
	 * overwrite, charging nothing) pays for the 2048 pages.
	 */
	T_CHECK(!wb_throttle_charge(t, 4, 2048ULL * 4096, now));
	T_CHECK(wb_throttle_charge(t, 4, 0, now));
	T_CHECK(wb_throttle_balance(t, 4, &s, now) > 0);
	T_CHECK(wb_throttle_recheck(t, 4, &s, now + MS));	/* nothing changed: stays */
	wb_throttle_set_limits(t, &l);
	T_CHECK(wb_throttle_recheck(t, 4, &s, now + MS));	/* same limits: stays */
	s.dirty = l.bg_thresh;
	T_CHECK(!wb_throttle_recheck(t, 4, &s, now + MS));	/* under freerun: goes */
	s.dirty = l.thresh + 10;
	wb_throttle_set_policy(t, &wb_throttle_none);
	T_CHECK(!wb_throttle_recheck(t, 4, &s, now + MS));	/* none: goes */
	wb_throttle_destroy(t);
}

/* Thresholds follow /proc/sys/vm's rules. */
static void test_limits_of(void)
{
	struct wb_throttle_limits l;

	/* bytes override ratios; a background threshold not below the limit halves. */
	wb_throttle_limits_of(1ull << 30, 20, 64ull << 20, 10, 128ull << 20, 0, 0, &l);
	T_CHECK(l.thresh == 16384 && l.bg_thresh == 8192 && l.pinned_thresh == 0);
	wb_throttle_limits_of(1ull << 30, 10, 0, 30, 0, 0, 0, &l);
	T_CHECK(l.thresh == 26214 && l.bg_thresh == 13107);
	/* The cubic: 2 far below, 1 at the setpoint, 0 at the limit. */
	T_CHECK(wb_pos_ratio_polynom(2000, 0, 2500) == 2 * WB_RATIO_ONE);
	T_CHECK(wb_pos_ratio_polynom(1000, 0, 2000) > 2 * WB_RATIO_ONE - 8);
	T_CHECK(wb_pos_ratio_polynom(1000, 1000, 2000) == WB_RATIO_ONE);
	T_CHECK(wb_pos_ratio_polynom(1000, 2000, 2000) < 16);
	T_CHECK(wb_pos_ratio_polynom(1000, 1500, 2000) < WB_RATIO_ONE);
	T_CHECK(wb_pos_ratio_polynom(1000, 500, 2000) > WB_RATIO_ONE);
}

/*
 * strictlimit's min_dirty parameter reaches the policy through the dtc,
 * and the throttler keeps the values it is given with its policy until
 * the policy changes (then the new one's defaults).
 */
static void test_policy_params(void)
{
	const struct wb_throttle_policy *p = &wb_throttle_strictlimit;
	struct wb_throttle_limits l = { .thresh = 1000, .bg_thresh = 500 };
	int64_t values[BS_PARAMS_MAX] = { 8 };
	struct wb_dtc d = { .dirty = 5, .wb_thresh = 100, .wb_bg_thresh = 50, .params = values };
	struct wb_throttle *t;
	uint64_t dirty, setpoint;

	T_CHECK(p->nr_params == 1 && !strcmp(p->params[0].name, "min_dirty"));
	T_CHECK(p->params[0].def == 8);
	p->rate_target(&d, &dirty, &setpoint);
	T_CHECK(setpoint == 6);			/* under min_dirty: ramp up from the count */
	values[0] = 4;
	p->rate_target(&d, &dirty, &setpoint);
	T_CHECK(setpoint == 75);		/* over it: the freerun ceiling */

	T_CHECK(wb_throttle_create(p, &l, 0, &t) == 0);
	T_CHECK(wb_throttle_get_policy_params(t, values) == p && values[0] == 8);
	values[0] = 300;
	wb_throttle_set_policy_params(t, p, values);
	values[0] = 0;
	T_CHECK(wb_throttle_get_policy_params(t, values) == p && values[0] == 300);
	wb_throttle_set_policy(t, &wb_throttle_bdp);
	wb_throttle_set_policy(t, p);
	T_CHECK(wb_throttle_get_policy_params(t, values) == p && values[0] == 8);
	wb_throttle_destroy(t);
}

int main(void)
{
	test_policy_params();
	test_limits_of();
	test_lower_at_once();
	test_debt();
	test_recheck();
	test_think_time();
	test_hard_limit_and_switch();
	test_pinned_limit();
	test_none();
	test_one_writer();
	test_fairness();
	test_strictlimit();
	test_many_writers();
	test_pinned_charge_far_below();
	test_idle_gap();
	return T_EXIT_PASS;
}
