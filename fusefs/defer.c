// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * defer.c - held write replies: a throttling pause that holds no thread.
 *
 * The kernel pauses a task that dirties too fast inside write(2), after its
 * data is in the page cache (balance_dirty_pages()).  Our writer is a task
 * blocked in a FUSE WRITE request, so we pause it by answering late.
 * ffs_write() puts the data in the cache and asks the throttler
 * (wb_balance_dirty()); when it says "pause", the request is handed here and
 * the worker thread goes back to reading requests at once, so reads and
 * writes of other processes keep being served however many writers wait.
 *
 * One timer thread keeps the held requests in a binary min-heap ordered by
 * deadline (CLOCK_MONOTONIC ns, the clock the condition variable waits
 * on, so a step of the wall clock moves no pause).  At a deadline it asks
 * the throttler again (wb_balance_dirty_again(): above the hard limit a
 * writer waits max_pause at a time until the charge is under it) and either
 * holds the request again or answers it.  A reply is sent sooner when
 *
 *  - throttling settings change (wb_set_throttle_notify()): every held
 *    writer is rechecked at once (wb_balance_dirty_recheck()), so a switch
 *    to throttle=none or a higher limit releases whoever the new settings
 *    let run free; the other pauses stay as they were, and a stricter
 *    setting applies from their next deadline on;
 *  - the kernel interrupts the request (the writer got a signal): the data
 *    is in the cache, so the write is answered as the success it is;
 *  - the daemon stops: ffs_defer_stop() answers every held request before
 *    the session goes away.
 * And a reply is not held at all (the writer not paused) where holding
 * would leave a ring queue with no thread to serve (ffs_uring_may_hold()).
 *
 * Each held request is answered exactly once, by the timer thread, after
 * it has taken the request out of the heap.  Nothing else replies to a held
 * request, which is what makes the interrupt callback safe: it only marks a
 * request it still finds in the heap (libfuse keeps the request alive while
 * the callback runs, so a request already answered is simply not found).
 * channel.c never amends a reply sent here (see its header).
 *
 * Lock order: libfuse's request lock (held around the interrupt callback),
 * then ffs_defer.lock, then libfuse's session lock (fuse_req_interrupted())
 * or the throttler's lock (wb_balance_dirty_again(), _recheck() and
 * wb_throttle_held() are called with ffs_defer.lock held; the tunables
 * call our notifier with no lock held).  No fuse_reply_*() is made with
 * ffs_defer.lock held.
 */
#include "fusefs.h"
#include "writeback.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One held WRITE request. */
struct ffs_held {
	fuse_req_t req;
	size_t count;		/* bytes written: the reply */
	pid_t pid;		/* the writer, as the throttler knows it */
	int64_t deadline_ns;	/* CLOCK_MONOTONIC; 0 with release */
	int64_t since_ns;	/* when it was held (CLOCK_MONOTONIC) */
	bool release;		/* answer at once, without asking the throttler */
	struct ffs_trace_op op;	/* its record, ended at the reply */
};

struct ffs_defer {
	struct wb_ctx *wb;		/* immutable */
	pthread_t thread;		/* the timer thread; immutable */

	pthread_mutex_t lock;		/* protects everything below */
	pthread_cond_t cond;		/* CLOCK_MONOTONIC; the timer waits on it */
	/*
	 * Min-heap on deadline_ns: heap[0] is due first; the children of
	 * heap[i] are heap[2i + 1] and heap[2i + 2].
	 */
	struct ffs_held *heap;
	size_t nr_held;
	size_t cap;
	bool reeval;		/* the notifier fired: ask about every held writer */
	bool stop;		/* answer everything and exit */
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the heap; all with ffs_defer.lock held ---- */

static bool before(const struct ffs_held *a, const struct ffs_held *b)
{
	return a->deadline_ns < b->deadline_ns;
}

static void swap_held(struct ffs_held *a, struct ffs_held *b)
{
	struct ffs_held t = *a;

	*a = *b;
	*b = t;
}

static void sift_up(struct ffs_held *heap, size_t i)
{
	while (i > 0 && before(&heap[i], &heap[(i - 1) / 2])) {
		swap_held(&heap[i], &heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
}

static void sift_down(struct ffs_held *heap, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, min = i;

		if (l < n && before(&heap[l], &heap[min]))
			min = l;
		if (r < n && before(&heap[r], &heap[min]))
			min = r;
		if (min == i)
			return;
		swap_held(&heap[i], &heap[min]);
		i = min;
	}
}

static int heap_push(struct ffs_defer *d, const struct ffs_held *h)
{
	if (d->nr_held == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 16;
		struct ffs_held *heap = realloc(d->heap, cap * sizeof(*heap));

		if (!heap)
			return -ENOMEM;
		d->heap = heap;
		d->cap = cap;
	}
	d->heap[d->nr_held] = *h;
	sift_up(d->heap, d->nr_held++);
	return 0;
}

static struct ffs_held heap_pop(struct ffs_defer *d)
{
	struct ffs_held top = d->heap[0];

	d->heap[0] = d->heap[--d->nr_held];
	sift_down(d->heap, d->nr_held, 0);
	return top;
}

/* Make the held request @req due now, if it is still held. */
static void release_req(struct ffs_defer *d, fuse_req_t req)
{
	for (size_t i = 0; i < d->nr_held; i++) {
		if (d->heap[i].req == req) {
			d->heap[i].release = true;
			d->heap[i].deadline_ns = 0;
			sift_up(d->heap, i);
			pthread_cond_signal(&d->cond);
			return;
		}
	}
}

/*
 * Ask the throttler about every held writer (settings changed).  A writer
 * the new settings let run free is released; the others keep their
 * pauses as they were.
 */
static void reevaluate(struct ffs_defer *d)
{
	for (size_t i = 0; i < d->nr_held; i++) {
		struct ffs_held *h = &d->heap[i];

		if (h->release || wb_balance_dirty_recheck(d->wb, h->pid))
			continue;
		h->release = true;
		h->deadline_ns = 0;
	}
	for (size_t i = d->nr_held / 2; i-- > 0;)
		sift_down(d->heap, d->nr_held, i);
}

/* ---- the timer thread ---- */

static void timedwait(struct ffs_defer *d, int64_t deadline_ns)
{
	struct timespec ts = {
		.tv_sec = deadline_ns / 1000000000,
		.tv_nsec = deadline_ns % 1000000000,
	};

	pthread_cond_timedwait(&d->cond, &d->lock, &ts);
}

/*
 * With ffs_defer.lock held: wait until a held request is to be answered
 * and take it out of the heap (true), or until told to stop with nothing
 * held (false).
 */
static bool next_due(struct ffs_defer *d, struct ffs_held *out)
{
	for (;;) {
		struct ffs_held *top = d->heap;
		int64_t ns;

		if (d->reeval && !d->stop) {
			d->reeval = false;
			reevaluate(d);
		}
		if (d->nr_held == 0) {
			if (d->stop)
				return false;
			pthread_cond_wait(&d->cond, &d->lock);
			continue;
		}
		if (!d->stop && !top->release) {
			if (top->deadline_ns > now_ns()) {
				timedwait(d, top->deadline_ns);
				continue;
			}
			ns = wb_balance_dirty_again(d->wb, top->pid);
			if (ns > 0) {
				top->deadline_ns = now_ns() + ns;
				sift_down(d->heap, d->nr_held, 0);
				continue;
			}
		}
		*out = heap_pop(d);
		out->release |= d->stop;	/* before its pause ended */
		return true;
	}
}

static void *defer_main(void *arg)
{
	struct ffs_defer *d = arg;
	struct ffs_held h;

	pthread_setname_np(pthread_self(), "ffs-defer");
	pthread_mutex_lock(&d->lock);
	while (next_due(d, &h)) {
		pthread_mutex_unlock(&d->lock);
		/* Fails only on a dead connection; the request is freed either way. */
		ffs_trace_stamp(&h.op);
		fuse_reply_write(h.req, h.count);
		ffs_trace_end(&h.op);
		wb_throttle_unheld(d->wb, h.pid, now_ns() - h.since_ns, h.release);
		pthread_mutex_lock(&d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* ---- callbacks ---- */

/* The kernel interrupted a request: if it is held, answer it now. */
static void on_interrupt(fuse_req_t req, void *arg)
{
	struct ffs_defer *d = arg;

	pthread_mutex_lock(&d->lock);
	release_req(d, req);
	pthread_mutex_unlock(&d->lock);
}

/* Throttling settings changed (from the thread that changed them). */
static void on_throttle_change(void *arg)
{
	struct ffs_defer *d = arg;

	pthread_mutex_lock(&d->lock);
	d->reeval = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

/* ---- interface ---- */

/* Hold @req for @pause_ns: 0, or -errno when it cannot be held (answer it now). */
static int hold(struct ffs_defer *d, fuse_req_t req, size_t count, pid_t pid,
		int64_t pause_ns, const struct ffs_trace_op *op)
{
	int64_t now = now_ns();
	struct ffs_held h = {
		.req = req, .count = count, .pid = pid,
		.deadline_ns = now + pause_ns, .since_ns = now, .op = *op,
	};
	int ret;

	/*
	 * Before the request is in the heap nobody else can answer it, so
	 * the callback can be set safely; if the interrupt came already the
	 * callback runs here and finds nothing, and the check below sees it.
	 */
	fuse_req_interrupt_func(req, on_interrupt, d);
	pthread_mutex_lock(&d->lock);
	ret = d->stop ? -ESHUTDOWN : heap_push(d, &h);
	if (!ret) {
		wb_throttle_held(d->wb);
		if (fuse_req_interrupted(req))
			release_req(d, req);
		else if (d->heap[0].req == req)
			pthread_cond_signal(&d->cond);	/* a sooner deadline */
	}
	pthread_mutex_unlock(&d->lock);
	if (ret)
		fuse_req_interrupt_func(req, NULL, NULL);
	return ret;
}

void ffs_defer_reply_write(struct ffs_data *fs, fuse_req_t req, size_t count,
			   uint64_t dirtied, struct ffs_trace_op *op)
{
	/* Read once: the timer is stopped only when no handler runs (main.c). */
	struct ffs_defer *d = fs->defer;
	pid_t pid = fuse_req_ctx(req)->pid;
	int64_t pause_ns = d ? wb_balance_dirty(fs->wb, pid, dirtied) : 0;

	/*
	 * A reply that cannot be held (the daemon stops, no memory, or a
	 * ring queue whose threads all hold replies) is sent now: the writer
	 * is not paused this time, and nobody else waits for it.
	 */
	if (pause_ns > 0 && ffs_uring_may_hold() && !hold(d, req, count, pid, pause_ns, op))
		return;
	ffs_trace_stamp(op);
	fuse_reply_write(req, count);
	ffs_trace_end(op);
}

int ffs_defer_start(struct ffs_data *fs)
{
	struct ffs_defer *d = calloc(1, sizeof(*d));
	pthread_condattr_t ca;
	sigset_t all, old;
	int ret;

	if (!d)
		return -ENOMEM;
	d->wb = fs->wb;
	ret = pthread_mutex_init(&d->lock, NULL);
	if (ret)
		goto out_free;
	ret = pthread_condattr_init(&ca);
	if (ret)
		goto out_mutex;
	ret = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (!ret)
		ret = pthread_cond_init(&d->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (ret)
		goto out_mutex;
	/* Signals are for the thread running the session loop. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&d->thread, NULL, defer_main, d);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret)
		goto out_cond;
	fs->defer = d;
	wb_set_throttle_notify(fs->wb, on_throttle_change, d);
	return 0;

out_cond:
	pthread_cond_destroy(&d->cond);
out_mutex:
	pthread_mutex_destroy(&d->lock);
out_free:
	free(d);
	return -ret;
}

void ffs_defer_stop(struct ffs_data *fs)
{
	struct ffs_defer *d = fs->defer;

	if (!d)
		return;
	wb_set_throttle_notify(fs->wb, NULL, NULL);
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->thread, NULL);
	fs->defer = NULL;
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	free(d->heap);
	free(d);
}
