// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * engine.c - one replay: a discrete-event loop on a virtual clock.
 *
 * What runs is the mount's own code, linked from the same sources:
 * blockstate (folios, bitmaps, the accounting and sizing policies) through
 * bs_write()/bs_read(); the writeback engine (writeback/engine.h: passes,
 * syncs, errors and backoff, the flushers' rounds and turns) with this
 * file as its second driver, its ops the device model and the virtual
 * clock; the throttler (throttle.c) through balance.c's calls with the
 * virtual time (wb_balance_dirty_at); the run-time settings (tunables.c) and the stats
 * (wb_ctx_stats).  What is modelled instead: time, the backing device,
 * and the threads, which become state machines resumed by events:
 *
 *   writer    one per pid: its operations in trace order, each issued the
 *             recorded think time after the previous one completed (a
 *             closed loop, so a throttled writer falls behind); after a
 *             pace record (trace.h: the generator's checkpointer) at its
 *             recorded time instead, or at once when it is behind that.
 *             A write returns at once unless the throttler pauses it; an
 *             fsync writes the file back and flushes the device; both wait
 *             for a file another pass holds, as the mount's wb_lock makes
 *             them.
 *   flusher   cfg.flushers of them, each what flush.c's
 *             flusher_main/flush_rounds/flush_file make of the engine's
 *             rounds and turns (wb_round_next, wb_turn_*), over every
 *             file; woken by writes over the background threshold (the
 *             engine's kicks) or writeback_interval_ms.
 *   reader    a read is one bs_read() of the request, as ffs_read() does
 *             it, through the readahead state of the open it came
 *             through (struct sim_open: the record's open id, or for a
 *             record without one, every read of its pid and file; see
 *             trace.h), so readahead decides what is read as it did on
 *             the mount; each backing read it makes (blockstate's
 *             bs_backing_ops.read: misses, readahead windows, the
 *             partial blocks a write must read first) is a device I/O
 *             issued when the one before it ended, as the mount's worker
 *             thread does them in turn, and the caller waits for the
 *             last.  A read the cache holds takes no time.
 *   device    dev_bw bytes/s through one transfer pipe, dev_lat_us per
 *             I/O on top, at most dev_qd I/Os in flight, at most dev_iops
 *             I/Os started a second (0: no limit), reads and writes
 *             alike; with dev_raid=N, N such volumes striped in
 *             dev_stripe pieces (RAID 0, see dev_io()); a flush completes
 *             dev_flush_us after every write before it, on every volume.
 *   faults    -o fault=SPEC as on a mount (writeback/fault.c): applied to
 *             each device completion in the order the engine issues them,
 *             so the same replay fails the same I/Os.  A failed write
 *             leaves its blocks dirty, the file backs off (the engine's
 *             doubling retry), fsync reports the error once (errseq); a
 *             failed sync makes what it covered dirty again.
 *
 * Writeback is submitted and completed in two halves: a batch is collected
 * and submitted (wb_pass_next: blocks go dirty -> writeback, nr_writeback
 * rises) at the time it is issued, and completed (wb_pass_complete:
 * writeback -> clean, nr_written) at the time the device model says its
 * last write ends; between the two the event loop runs other events, so
 * writers see data under writeback as they would.
 * Reclaim (bs_cache_ops.need_clean, called inside bs_write() when the
 * cache is full) is the one synchronous path: it completes what is in
 * flight early and writes everything back at once, and the writer whose
 * write needed room waits until the device would have finished.
 *
 * Iterations: a writer's deadline record (trace.h) starts an iteration
 * (res->iters), once the iterations recorded before it have ended
 * (writer_deadline()).  The writer stops at the end of the first step
 * after which its next one is due at or after the deadline, or at that
 * step's issue if it is already past it, and skips the iteration's other
 * records (writer_skip(); the feed drops them unread); the iteration ends
 * with its last writer (iter_leave()).  Counted per iteration: steps done
 * by the deadline, in flight at it (late), skipped, writers run dry.
 *
 * Namespace: unlink, and a rename over a file, drop the file's cache
 * unwritten, as the mount does when the kernel forgets a file that has no
 * name left (forget_writeback's discard); the trace has no close, so this
 * happens at the unlink or rename, as for a file nobody holds open.  A
 * create gives the file the size it had at creation.
 *
 * Records: the replay streams the trace (feed.c).  The files and writers
 * come from its first pass (struct sim_trace); each writer takes its
 * records one at a time from the feed (struct sim_feed), which reads the
 * file forward once: when a writer finishes an op it takes its next
 * record for the think time before it (or the gap table gives that time,
 * for a long one, and the record waits until the writer issues it).  A
 * writer holds only its op in progress (cur).  What the replay keeps
 * grows with its state (files, writers, opens, the cache's folios, the
 * events) and with the records read ahead of slow writers, not with the
 * trace's length; see sim.h for the bound.
 *
 * Nothing reads a host clock except for the replay speed: the same trace
 * and options give the same output, byte for byte.
 */
#include "sim.h"
#include "engine.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NS 1000000000ll

struct sim;

struct sim_file {
	struct sim *s;			/* for its backing read op */
	uint32_t id;			/* in the trace */
	/* Its writeback state, as the mount's wb_file keeps it (engine.h). */
	struct wb_fstate ws;
	struct wb_pass *busy;		/* the pass holding it (the mount's wb_lock) */
	/*
	 * The writers in WR_WAIT_FILE on it (op_file()), by index, in the
	 * order they began to wait (wake_file_waiters() sorts them to wake
	 * them in index order): waiters[0, nr_waiting), cap_waiting slots.
	 */
	uint32_t *waiters;
	uint32_t nr_waiting, cap_waiting;
	uint64_t err_seen;		/* the fsyncs' errseq cursor (wb_errseq_check) */
};

/* The sim_file whose writeback state @fs is. */
#define sim_file_of(fs) ((struct sim_file *)((char *)(fs) - offsetof(struct sim_file, ws)))

/* What names an open in the trace: (open, file), or (pid, file) for open 0. */
struct sim_open_key {
	uint64_t open;
	uint32_t pid;			/* 0 when open is set */
	uint32_t file;			/* dense index */
};

/*
 * One open of a file: its readahead state (file_ra_state), made zeroed at
 * its first read and kept to the end of the replay.  Open ids are never
 * reused (trace.h), so nothing reads through an open after its close and
 * keeping it is exact.  Found by its key in s->open_tab; each is
 * allocated on its own, as ra's lock must not move.
 */
struct sim_open {
	struct sim_open_key key;
	struct bs_ra ra;
};

/*
 * A slot of s->open_tab: an open and its key's hash, which a lookup
 * compares first, so that it reads no open but the one it finds (1.4
 * million opens in the seed's scenario: a cache miss each).  o NULL:
 * empty.
 */
struct sim_open_slot {
	uint64_t hash;
	struct sim_open *o;
};

enum wr_state { WR_READY, WR_PAUSED, WR_WAIT_FILE, WR_PASS, WR_SYNC, WR_WAIT_ITER, WR_DONE };

/*
 * A writer: its records come one at a time from the feed (s->feed); cur
 * is the op in progress (or, before it is issued, the next one) once
 * has_cur.
 */
struct sim_writer {
	uint32_t pid;
	size_t nr_ops, next;		/* ops in all; the index of cur among them */
	struct trace_rec cur;
	bool has_cur;
	enum wr_state state;
	int64_t op_start;		/* when the op in progress was issued */
	int64_t hold_start;		/* when its pause began */
	int64_t first_ns, last_ns;	/* first issue, last completion */
	uint64_t sync_token;
	int sync_err;
	/*
	 * Its iteration, from its last deadline record (trace.h), once
	 * in_iter: res->iters[iter], which ends at deadline (virtual time)
	 * and, in its records, at op iter_end (its next deadline record or
	 * nr_ops).  step_ns: time_ns + 1 of the step it is in (0: none since
	 * the deadline record).  mark: its deadline records issued.
	 */
	bool in_iter;
	uint32_t iter;
	int64_t deadline;
	uint64_t iter_end, step_ns;
	size_t mark;
	uint64_t skipped;		/* ops skipped at deadlines */
	/*
	 * Since its pace record (trace.h): it waits only until its next
	 * record's recorded time (virtual: from the trace's first record),
	 * not for the recorded think time after its op is done.
	 */
	bool paced;
	/*
	 * Last: what an event of the writer reads is above, in its first
	 * 192 bytes (sim_replay() reads them ahead); the pass (6.5 KB) only
	 * for a sync.
	 */
	struct wb_pass pass;
};

enum fl_state { FL_IDLE, FL_PASS, FL_SYNC };

struct sim_flusher {
	enum fl_state state;
	uint64_t wake_gen;		/* wake events carry their generation (> 0); one of
					 * another is stale.  I/O completions carry 0. */
	struct wb_round round;		/* the engine's rounds, and where it is in them */
	struct wb_turn turn;		/* the turn of the file in progress */
	uint64_t sync_token;
	int sync_err;
	struct sim_file *sync_file;
	struct wb_pass pass;
};

enum ev_kind { EV_WRITER, EV_FLUSHER, EV_STATS };

struct sim_ev {
	int64_t t;
	uint64_t seq;			/* ties in order of scheduling: deterministic */
	enum ev_kind kind;
	uint32_t idx;
	uint64_t gen;
};

/*
 * Samples (waits, pauses) for their sum and exact percentiles.  Zeros,
 * most reads' waits (the cache held the data), are only counted: what
 * the vector holds grows by 8 bytes per read that waited, per fsync and
 * per pause, the one thing a replay keeps per event of the trace.
 */
struct i64_vec {
	int64_t *v;			/* the samples that are not 0 */
	size_t n, cap;
	size_t zeros;
};

struct sim {
	const struct sim_trace *t;
	struct sim_feed feed;		/* the writers' records */
	char *err;			/* sim_replay()'s, for the feed's errors */
	size_t errlen;
	struct wb_ctx *ctx;
	struct sim_dev_cfg dev;
	bool data;			/* -o sim_data=: folios hold the bytes read */
	uint64_t feed_window;		/* -o sim_feed_window= */
	int64_t now;
	/* device */
	struct sim_vol *vols;		/* dev.raid of them */
	int64_t last_done;
	/* events */
	struct sim_ev *heap;
	size_t nr_ev, cap_ev;
	uint64_t seq;
	/* actors */
	struct sim_file *files;
	size_t nr_files;
	struct sim_open_slot *open_tab;	/* open addressing by key */
	size_t open_mask, nr_opens;	/* slots - 1 (a power of two); opens made */
	struct sim_writer *writers;
	size_t nr_writers, writers_left;
	struct sim_flusher *flushers;
	unsigned int nr_flushers;
	int64_t reclaim_until;		/* a write that needed room waits until then */
	int64_t submit_due;		/* when the batch the engine last submitted ends */
	int64_t read_at;		/* the op's next backing read is issued then */
	/* observations */
	struct i64_vec pauses, fsyncs, reads;
	struct sim_result *res;
	FILE *log;
	uint32_t log_interval_ms;
	char stats[WB_STATSLOG_STATS_MAX];	/* the stats log's buffers */
	char line[WB_STATSLOG_LINE_MAX];
};

/* ---- events ---- */

static bool ev_before(const struct sim_ev *a, const struct sim_ev *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static int ev_push(struct sim *s, int64_t t, enum ev_kind kind, uint32_t idx, uint64_t gen)
{
	struct sim_ev ev = { t < s->now ? s->now : t, s->seq++, kind, idx, gen };
	size_t i;

	if (s->nr_ev == s->cap_ev) {
		size_t cap = s->cap_ev ? 2 * s->cap_ev : 64;
		struct sim_ev *h = realloc(s->heap, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		s->heap = h;
		s->cap_ev = cap;
	}
	/* up from the new leaf, parents moved down into the hole */
	for (i = s->nr_ev++; i && ev_before(&ev, &s->heap[(i - 1) / 2]); i = (i - 1) / 2)
		s->heap[i] = s->heap[(i - 1) / 2];
	s->heap[i] = ev;
	return 0;
}

/*
 * The first event.  The hole it leaves goes down to a leaf along the
 * earlier child (one comparison a level), and the last event up from
 * there: Floyd's way, fewer comparisons than sifting the last event down
 * from the top, for a heap of about one event per writer (10,241 in the
 * seed's scenario).  Events are ordered by (t, seq), all different, so
 * the order they come out in is the same whatever the heap's shape.
 */
static struct sim_ev ev_pop(struct sim *s)
{
	struct sim_ev top = s->heap[0], last = s->heap[--s->nr_ev];
	size_t n = s->nr_ev, i = 0, c;

	while ((c = 2 * i + 1) < n) {
		if (c + 1 < n && ev_before(&s->heap[c + 1], &s->heap[c]))
			c++;
		s->heap[i] = s->heap[c];
		i = c;
	}
	for (; i && ev_before(&last, &s->heap[(i - 1) / 2]); i = (i - 1) / 2)
		s->heap[i] = s->heap[(i - 1) / 2];
	s->heap[i] = last;
	return top;
}

static int vec_add(struct i64_vec *v, int64_t x)
{
	if (!x) {
		v->zeros++;
		return 0;
	}
	if (v->n == v->cap) {
		size_t cap = v->cap ? 2 * v->cap : 256;
		int64_t *p = realloc(v->v, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		v->v = p;
		v->cap = cap;
	}
	v->v[v->n++] = x;
	return 0;
}

/* ---- the device ---- */

/*
 * One volume of the device: dev_bw bytes/s through one transfer pipe,
 * dev_lat_us per I/O on top, dev_qd I/Os in flight at most, and with
 * dev_iops one I/O started per 1/dev_iops seconds at most (an I/O counts
 * once per SIM_IOPS_UNIT bytes or part, as EBS counts them).
 */
#define SIM_IOPS_UNIT (256u << 10)
struct sim_vol {
	int64_t pipe_free;		/* the pipe is busy until then */
	int64_t iops_free;		/* the next I/O may start then */
	int64_t slot_free[];		/* dev.qd slots */
};

/* An I/O of @len bytes to volume @v issued at @at: when it completes. */
static int64_t vol_io(struct sim *s, struct sim_vol *v, int64_t at, size_t len)
{
	unsigned int k = 0;
	int64_t start, xfer;

	for (unsigned int j = 1; j < s->dev.qd; j++)
		if (v->slot_free[j] < v->slot_free[k])
			k = j;
	start = v->slot_free[k] > at ? v->slot_free[k] : at;
	if (s->dev.iops) {
		start = v->iops_free > start ? v->iops_free : start;
		v->iops_free = start + (int64_t)((len + SIM_IOPS_UNIT - 1) / SIM_IOPS_UNIT) *
				       NS / (int64_t)s->dev.iops;
	}
	xfer = v->pipe_free > start ? v->pipe_free : start;
	v->pipe_free = xfer + (int64_t)((double)len * NS / (double)s->dev.bw);
	v->slot_free[k] = v->pipe_free + (int64_t)s->dev.lat_us * 1000;
	return v->slot_free[k];
}

static struct sim_vol *vol_at(struct sim *s, uint32_t i)
{
	return (struct sim_vol *)((char *)s->vols +
				  i * (sizeof(struct sim_vol) + s->dev.qd * sizeof(int64_t)));
}

/*
 * An I/O of @len bytes at @off of @f issued at @at (now or later): when it
 * completes.  With dev_raid volumes (RAID 0), split at dev_stripe
 * boundaries, stripe i of a file on volume (file id + i) mod dev_raid
 * (files laid out one after another, each starting on a volume of its
 * own), the pieces at once; done when the last is.
 */
static int64_t dev_io(struct sim *s, int64_t at, const struct sim_file *f, off_t off, size_t len)
{
	int64_t done = at;

	if (s->dev.raid == 1)
		return vol_io(s, vol_at(s, 0), at, len);
	while (len) {
		uint64_t stripe = (uint64_t)off / s->dev.stripe;
		size_t piece = (size_t)((stripe + 1) * s->dev.stripe - (uint64_t)off);
		int64_t t;

		piece = piece < len ? piece : len;
		t = vol_io(s, vol_at(s, (uint32_t)((f->id + stripe) % s->dev.raid)), at, piece);
		done = t > done ? t : done;
		off += (off_t)piece;
		len -= piece;
	}
	return done;
}

/* A write of @len bytes at @off of @f issued at @at: when it completes (a flush waits for it). */
static int64_t dev_write(struct sim *s, int64_t at, const struct sim_file *f, off_t off, size_t len)
{
	int64_t done = dev_io(s, at, f, off, len);

	if (done > s->last_done)
		s->last_done = done;
	s->res->bytes_written += len;
	return done;
}

/* A cache flush issued now: after every write before it. */
static int64_t dev_flush(struct sim *s)
{
	int64_t start = s->last_done > s->now ? s->last_done : s->now;

	s->last_done = start + (int64_t)s->dev.flush_us * 1000;
	return s->last_done;
}

/* ---- faults ---- */

/*
 * The fault (the context's, parsed from -o fault= by wb_ctx_set_fault())
 * applied to a completion of @len bytes at @off of @f that did @res: an
 * errno, half of it, or @res; the mount's (wb_fault_apply), with file=
 * matching the trace's file id in decimal where the mount matches the
 * backing path.
 */
static void fault_name(void *arg, char *buf, size_t len)
{
	snprintf(buf, len, "%u", ((const struct sim_file *)arg)->id);
}

static ssize_t sim_fault(struct sim *s, enum wb_fault_op op, const struct sim_file *f,
			 off_t off, size_t len, ssize_t res)
{
	return wb_fault_apply(s->ctx, fault_name, (void *)f, op, off, len, res, 1);
}

/*
 * A sync of @f issued now (the engine's wb_sync_begin, and the device
 * flush): when it completes.  An fsync fault fires instead of the device
 * flush, at once; *@err gets it.  sync_end() at that time.
 */
static int64_t sync_issue(struct sim *s, struct sim_file *f, uint64_t *token, int *err)
{
	*token = wb_sync_begin(s->ctx, &f->ws);
	*err = (int)sim_fault(s, WB_FAULT_FSYNC, f, 0, 0, 0);
	return *err ? s->now : dev_flush(s);
}

/* The sync is over: a failed one left what it covered dirty again. */
static void sync_end(struct sim *s, struct sim_file *f, uint64_t token, int err)
{
	wb_sync_end(s->ctx, &f->ws, token, err);
}

/* ---- observations ---- */

/* After each write, submit and fsync: three counters, not all of bs_cache_stats(). */
static void note_peaks(struct sim *s)
{
	struct bs_cache *cache = wb_ctx_cache(s->ctx);
	uint64_t charged = bs_cache_charged(cache), held = bs_cache_held(cache);
	uint64_t pinned = bs_cache_pinned(cache);

	if (charged > s->res->peak_charged)
		s->res->peak_charged = charged;
	if (held > s->res->peak_dirty_exact)
		s->res->peak_dirty_exact = held;
	if (pinned > s->res->peak_pinned)
		s->res->peak_pinned = pinned;
}

/* One line of the stats log: the mount's format, time_ms on the virtual clock. */
static void log_line(struct sim *s)
{
	size_t len = wb_statslog_format(s->ctx, s->now / 1000000, -1, s->stats, sizeof(s->stats),
					s->line, sizeof(s->line));

	fwrite(s->line, 1, len, s->log);
}

/* ---- writeback: the engine's ops, passes and flushers ---- */

/*
 * One write of a batch, @len bytes at @off of @f, issued now: when it
 * completes, and its result in *@err.  What a short completion left is
 * written again, once the part before is done, as backing.c does.
 */
static int64_t write_group(struct sim *s, struct sim_file *f, off_t off, size_t len, int *err)
{
	int64_t due = s->now;

	*err = 0;
	wb_ctx_count_writes(s->ctx, 1, 0, 0);
	while (len) {
		ssize_t n;

		due = dev_write(s, due, f, off, len);
		n = sim_fault(s, WB_FAULT_WRITE, f, off, len, (ssize_t)len);
		if (n < 0) {
			*err = (int)n;
			break;
		}
		wb_ctx_count_writes(s->ctx, 0, (uint64_t)n, 0);
		off += n;
		len -= (size_t)n;
	}
	return due;
}

/*
 * The engine's submit: the batch's writes issued to the device now, each
 * result known at once; s->submit_due gets when the last ends, the time
 * at which the driver completes the batch (wb_pass_complete).
 */
static int engine_submit(void *arg, struct wb_pass *p)
{
	struct sim *s = arg;
	struct sim_file *f = sim_file_of(p->file);
	int64_t due = 0;

	for (int g = 0; g < p->nr_io; g++) {
		int64_t done = write_group(s, f, p->io[g].off, p->io[g].len, &p->io[g].res);

		due = done > due ? done : due;
	}
	wb_ctx_count_writes(s->ctx, 0, 0, 1);
	note_peaks(s);
	s->submit_due = due;
	return 0;
}

static int64_t engine_now(void *arg)
{
	return ((struct sim *)arg)->now;
}

/* The simulator's driver: no backing file to log, size or stamp. */
static const struct wb_engine_ops sim_engine_ops = {
	.submit = engine_submit,
	.now = engine_now,
};

static void pass_begin(struct sim *s, struct wb_pass *p, struct sim_file *f, off_t start,
		       off_t end, int64_t budget_pages, enum wb_pass_why why)
{
	wb_pass_begin(p, s->ctx, &f->ws, start, end, budget_pages, why);
	f->busy = p;
}

/*
 * Collect and issue the next batch: when it completes, or 0 when the pass
 * is over (nothing left, or the budget used up).
 */
static int64_t pass_step(struct sim *s, struct wb_pass *p)
{
	return wb_pass_next(p) ? s->submit_due : 0;
}

static void wake_file_waiters(struct sim *s, struct sim_file *f);

/* The pass is over (wb_pass_end): the file is free again.  Its error, 0: none. */
static int pass_end(struct sim *s, struct wb_pass *p)
{
	struct sim_file *f = sim_file_of(p->file);
	int err = wb_pass_end(p);

	f->busy = NULL;
	wake_file_waiters(s, f);
	return err;
}

/* A whole write-back and sync at once (reclaim, unmount): when the device is done. */
static int64_t write_all_now(struct sim *s, struct sim_file *f)
{
	struct wb_pass p;
	int64_t due, last = s->now;

	pass_begin(s, &p, f, 0, bs_file_size(f->ws.bs), 0, WB_PASS_SYNC);
	while ((due = pass_step(s, &p))) {
		wb_pass_complete(&p);
		last = due > last ? due : last;
	}
	pass_end(s, &p);
	if (bs_file_has_unsynced(f->ws.bs)) {
		uint64_t token;
		int err;

		due = sync_issue(s, f, &token, &err);
		last = due > last ? due : last;
		sync_end(s, f, token, err);
	}
	return last;
}

/*
 * bs_cache_ops.need_clean: reclaim found nothing clean (see the top).  A
 * file backing off is left alone, as wb_need_clean() leaves it.
 */
static void sim_need_clean(void *arg)
{
	struct sim *s = arg;

	for (size_t i = 0; i < s->nr_files; i++) {
		struct sim_file *f = &s->files[i];
		int64_t until;

		if (!wb_reclaim_takes(s->ctx, &f->ws, s->now)) {
			continue;
		} else if (f->busy) {
			wb_pass_complete(f->busy);
			until = s->last_done;
		} else {
			until = write_all_now(s, f);
		}
		if (until > s->reclaim_until)
			s->reclaim_until = until;
	}
}

/* ---- the flushers (flush.c's flusher_main, flush_rounds, flush_file) ---- */

static int flusher_go(struct sim *s, uint32_t k);

/* Writes over the background threshold wake the flushers (wb_flushers_poke). */
static int flushers_poke(struct sim *s)
{
	int ret = 0;

	if (!s->nr_flushers || !wb_round_poke(s->ctx))
		return 0;
	for (uint32_t k = 0; k < s->nr_flushers && !ret; k++)
		if (s->flushers[k].state == FL_IDLE)
			ret = ev_push(s, s->now, EV_FLUSHER, k, ++s->flushers[k].wake_gen);
	return ret;
}

/*
 * The file's turn (wb_turn_plan): start its pass (1: wait for the
 * device), or nothing to write (0: go on to the sync check).  -EBUSY:
 * backing off, or another pass holds it.
 */
static int flusher_file_begin(struct sim *s, struct sim_flusher *fl, struct sim_file *f)
{
	struct wb_turn *t = &fl->turn;

	if (!wb_turn_plan(s->ctx, &fl->round, &f->ws, t))
		return t->act == WB_FP_WAIT ? -EBUSY : 0;
	if (f->busy)
		return -EBUSY;
	pass_begin(s, &fl->pass, f, t->start, t->end, t->budget_pages, t->why);
	return 1;
}

/* The turn's pass is over (wb_turn_end): false when it failed (no sync then). */
static bool flusher_file_end(struct sim *s, struct sim_flusher *fl)
{
	int err = pass_end(s, &fl->pass);

	return wb_turn_end(&fl->round, &fl->turn, &fl->pass, err);
}

/* The sync check after a turn: 1 when a sync was issued. */
static int flusher_sync(struct sim *s, struct sim_flusher *fl, struct sim_file *f, uint32_t k)
{
	if (f->busy || !wb_turn_should_sync(s->ctx, &f->ws, &fl->turn))
		return 0;
	fl->sync_file = f;
	fl->state = FL_SYNC;
	return ev_push(s, sync_issue(s, f, &fl->sync_token, &fl->sync_err), EV_FLUSHER, k, 0)
		? -ENOMEM : 1;
}

/*
 * @f's turn, as flush.c's flush_file(): 1 when the flusher waits for the
 * device (its pass, or its sync), 0 when the turn is over.
 */
static int flusher_turn(struct sim *s, struct sim_flusher *fl, struct sim_file *f, uint32_t k)
{
	int64_t due;
	int ret = flusher_file_begin(s, fl, f);

	if (ret == -EBUSY)
		return 0;
	if (ret == 1) {
		due = pass_step(s, &fl->pass);
		if (due) {
			fl->state = FL_PASS;
			return ev_push(s, due, EV_FLUSHER, k, 0) ? -ENOMEM : 1;
		}
		if (!flusher_file_end(s, fl))
			return 0;
	}
	return flusher_sync(s, fl, f, k);
}

/*
 * Flusher @k from where it stopped until it waits for something: what it
 * waited for ends first (a batch, the rest of its turn; a sync), then the
 * engine's rounds (wb_round_next) over every file, keyed by its index.
 */
static int flusher_go(struct sim *s, uint32_t k)
{
	struct sim_flusher *fl = &s->flushers[k];
	int64_t due;
	size_t i;
	int ret;

	switch (fl->state) {
	case FL_IDLE:
		wb_round_begin(s->ctx, &fl->round);
		break;
	case FL_PASS:
		wb_pass_complete(&fl->pass);
		due = pass_step(s, &fl->pass);
		if (due)
			return ev_push(s, due, EV_FLUSHER, k, 0);
		fl->state = FL_IDLE;
		/* flush_file(): a failed pass is retried later, not synced. */
		if (!flusher_file_end(s, fl))
			break;
		ret = flusher_sync(s, fl, sim_file_of(fl->pass.file), k);
		if (ret)
			return ret < 0 ? ret : 0;
		break;
	case FL_SYNC:
		sync_end(s, fl->sync_file, fl->sync_token, fl->sync_err);
		if (fl->sync_err)
			wb_turn_sync_failed(s->ctx);
		fl->state = FL_IDLE;
		break;
	}
	for (;;) {
		switch (wb_round_next(s->ctx, &fl->round, &i)) {
		case WB_ROUND_PASS:
		case WB_ROUND_LIST:
			wb_round_list(s->ctx, &fl->round, s->nr_files, s->nr_files, NULL, NULL);
			continue;
		case WB_ROUND_TURN:
			ret = flusher_turn(s, fl, &s->files[i], k);
			if (ret)
				return ret < 0 ? ret : 0;
			continue;
		case WB_ROUND_DONE:
			break;
		}
		break;
	}
	fl->state = FL_IDLE;
	return ev_push(s, wb_fp_next_wake(s->now, wb_ctx_interval_ms(s->ctx)),
		       EV_FLUSHER, k, ++fl->wake_gen);
}

/* ---- writers ---- */

/*
 * The file whose cache an op changes: a rename's is the file it replaces
 * (the record's offset: its index + 1 once set up), NULL when none.
 */
static struct sim_file *op_file(struct sim *s, const struct trace_rec *r)
{
	if (r->op == TRACE_OP_RENAME)
		return r->offset ? &s->files[r->offset - 1] : NULL;
	return &s->files[r->file];
}

/* Writer @w waits for @f (WR_WAIT_FILE): 0 or -ENOMEM. */
static int file_wait(struct sim_file *f, uint32_t w)
{
	if (f->nr_waiting == f->cap_waiting) {
		uint32_t cap = f->cap_waiting ? 2 * f->cap_waiting : 16;
		uint32_t *p = realloc(f->waiters, (size_t)cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		f->waiters = p;
		f->cap_waiting = cap;
	}
	f->waiters[f->nr_waiting++] = w;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The writers waiting for @f, ready again in the order of their index,
 * as a walk of every writer would find them; f->waiters spares that walk
 * (10,241 writers of 6.7 KB each in the seed's scenario, whose commits
 * wait for their WAL file's passes).
 */
static void wake_file_waiters(struct sim *s, struct sim_file *f)
{
	if (f->nr_waiting > 1)
		qsort(f->waiters, f->nr_waiting, sizeof(*f->waiters), cmp_u32);
	for (uint32_t i = 0; i < f->nr_waiting; i++) {
		uint32_t w = f->waiters[i];
		struct sim_writer *wr = &s->writers[w];

#ifdef FOLIOFS_DEBUG_CHECKS
		if (wr->state != WR_WAIT_FILE || op_file(s, &wr->cur) != f)
			abort();
#endif
		wr->state = WR_READY;
		ev_push(s, s->now, EV_WRITER, w, 0);
	}
	f->nr_waiting = 0;
}

static int writer_skip(struct sim *s, uint32_t w);

/*
 * A step (trace.h) of @wr's iteration ended at @t: done by the deadline,
 * or late (in flight at it); @last: the iteration's last, so the writer
 * ran out of records (dry) if that was before the deadline.
 */
static void step_end(struct sim *s, struct sim_writer *wr, int64_t t, bool last)
{
	struct sim_iter_result *it = &s->res->iters[wr->iter];

	if (t <= wr->deadline) {
		it->done++;
	} else {
		it->late++;
		if (t - wr->deadline > it->overrun_ns)
			it->overrun_ns = t - wr->deadline;
	}
	if (last && t < wr->deadline)
		it->dry++;
}

/*
 * @wr is done with its iteration (stopped at the deadline or out of
 * records): the iteration ends with its last writer, and the writers
 * waiting for it to start theirs (writer_deadline()) go on.
 */
static int iter_leave(struct sim *s, struct sim_writer *wr)
{
	struct sim_iter_result *it = &s->res->iters[wr->iter];

	wr->in_iter = false;
	if (--it->active)
		return 0;
	for (size_t w = 0; w < s->nr_writers; w++) {
		if (s->writers[w].state != WR_WAIT_ITER)
			continue;
		s->writers[w].state = WR_READY;
		if (ev_push(s, s->now, EV_WRITER, (uint32_t)w, 0))
			return -ENOMEM;
	}
	return 0;
}

/*
 * The op in progress is done at @t: the next one after its think time,
 * which a gap gives without reading the next record (sim.h).
 */
static int writer_op_done(struct sim *s, uint32_t w, int64_t t)
{
	struct sim_writer *wr = &s->writers[w];
	struct trace_rec prev = wr->cur;
	bool end, iter_last, gap = false;
	int64_t think = 0;
	int ret;

	wr->last_ns = t;
	s->res->ops++;
	wr->has_cur = false;
	end = ++wr->next == wr->nr_ops;
	if (!end) {
		gap = sim_feed_gap(&s->feed, w, wr->next, &think);
		if (!gap) {
			ret = sim_feed_next(&s->feed, w, &wr->cur, s->err, s->errlen);
			if (ret)
				return ret;
			wr->has_cur = true;
			think = (int64_t)(wr->cur.time_ns - prev.time_ns - prev.dur_ns);
		}
	}
	/*
	 * A paced writer's next record is due at its recorded time, the end
	 * of the record before it plus the recorded think time: it sleeps
	 * only while it is ahead of that.  Times in uint64 as recorded, the
	 * virtual one as each writer's start (setup_actors()); the wait is
	 * kept within [0, INT64_MAX - t], whatever a damaged trace says.
	 */
	if (wr->paced && !end) {
		int64_t due = (int64_t)(prev.time_ns + prev.dur_ns + (uint64_t)think -
					s->t->first_ns);

		if (__builtin_sub_overflow(due, t, &think))
			think = due < 0 ? 0 : INT64_MAX;
	}
	if (think < 0)
		think = 0;
	else if (think > INT64_MAX - t)
		think = INT64_MAX - t;
	/*
	 * A step ends where the next record (a gap's is later) has another
	 * time; the writer stops there if its next step is due at or after
	 * the deadline.
	 */
	iter_last = end || wr->next == wr->iter_end;	/* the iteration's last op */
	if (wr->in_iter && sim_op_names_file(prev.op) &&
	    (iter_last || gap || wr->cur.time_ns != prev.time_ns)) {
		step_end(s, wr, t, iter_last);
		if (!iter_last && t + think >= wr->deadline)
			return writer_skip(s, w);
	}
	if (wr->in_iter && iter_last) {
		ret = iter_leave(s, wr);
		if (ret)
			return ret;
	}
	if (end) {
		wr->state = WR_DONE;
		sim_feed_done(&s->feed, w);
		s->writers_left--;
		return 0;
	}
	wr->state = WR_READY;
	return ev_push(s, t + think, EV_WRITER, w, 0);
}

/*
 * The data of writes and reads: all zeros, as the backing reads give; a
 * request of the mount is at most this long (FFS_MAX_IO).
 */
static char sim_buf[1 << 20];

/*
 * bs_backing_ops.read: a device read issued when the op's last one ended
 * (s->read_at, which it moves on); a short completion is read again for
 * the rest, as wb_backing_read() does.  The bytes are zeros, as a new
 * file's; with sim_data=0 they mean nothing (every folio's data is one
 * scratch area) and are not written at all.
 */
static ssize_t sim_backing_read(void *arg, void *buf, size_t len, off_t off)
{
	struct sim_file *f = arg;
	struct sim *s = f->s;
	size_t done = 0;

	if (s->data)
		memset(buf, 0, len);
	while (done < len) {
		ssize_t n;

		s->read_at = dev_io(s, s->read_at, f, off + (off_t)done, len - done);
		n = sim_fault(s, WB_FAULT_READ, f, off + (off_t)done, len - done,
			      (ssize_t)(len - done));
		if (n < 0)
			return done ? (ssize_t)done : n;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* When the op that began now and made backing I/O or reclaimed is done. */
static int64_t io_done(const struct sim *s)
{
	int64_t t = s->read_at > s->now ? s->read_at : s->now;

	return s->reclaim_until > t ? s->reclaim_until : t;
}

static bool open_key_eq(const struct sim_open_key *a, const struct sim_open_key *b)
{
	return a->open == b->open && a->pid == b->pid && a->file == b->file;
}

static uint64_t open_hash(const struct sim_open_key *k)
{
	uint64_t h = (k->open * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)k->pid << 32 | k->file);

	return h * 0xff51afd7ed558ccdull;
}

/* The slot of the open with key @k and hash @h, or the empty one it would take. */
static size_t open_slot(const struct sim *s, const struct sim_open_key *k, uint64_t h)
{
	size_t i;

	for (i = (size_t)(h >> 32) & s->open_mask; s->open_tab[i].o; i = (i + 1) & s->open_mask)
		if (s->open_tab[i].hash == h && open_key_eq(&s->open_tab[i].o->key, k))
			break;
	return i;
}

/* Doubles the table when one more open would fill more than half: 0 or -ENOMEM. */
static int open_tab_grow(struct sim *s)
{
	size_t slots = s->open_mask + 1, old = slots;
	struct sim_open_slot *tab, *prev = s->open_tab;

	if (s->open_tab && 2 * (s->nr_opens + 1) <= slots)
		return 0;
	slots = s->open_tab ? 2 * slots : 64;
	tab = calloc(slots, sizeof(*tab));
	if (!tab)
		return -ENOMEM;
	s->open_tab = tab;
	s->open_mask = slots - 1;
	/* the keys differ: each goes to the first empty slot of its probe */
	for (size_t i = 0; prev && i < old; i++) {
		size_t j = (size_t)(prev[i].hash >> 32) & s->open_mask;

		if (!prev[i].o)
			continue;
		while (tab[j].o)
			j = (j + 1) & s->open_mask;
		tab[j] = prev[i];
	}
	free(prev);
	return 0;
}

/*
 * The open read @r (a record from the feed: dense file numbers) reads
 * through: one per (open id, file), and per (pid, file) for reads without
 * an open id; made at its first read.  NULL when out of memory.
 */
static struct sim_open *open_of(struct sim *s, const struct trace_rec *r)
{
	struct sim_open_key k = { .open = r->open, .pid = r->open ? 0 : r->pid, .file = r->file };
	uint64_t h = open_hash(&k);
	struct sim_open *o;
	size_t i;

	if (open_tab_grow(s))
		return NULL;
	i = open_slot(s, &k, h);
	if (s->open_tab[i].o)
		return s->open_tab[i].o;
	o = malloc(sizeof(*o));
	if (!o)
		return NULL;
	o->key = k;
	bs_ra_init(&o->ra);
	s->open_tab[i] = (struct sim_open_slot){ h, o };
	s->nr_opens++;
	return o;
}

static int writer_write(struct sim *s, uint32_t w, struct sim_file *f, const struct trace_rec *r)
{
	struct sim_writer *wr = &s->writers[w];
	uint64_t dirtied;
	int64_t pause = 0, done;
	off_t off = (off_t)r->offset;
	size_t left = r->length;

	bs_thread_dirtied_take();
	s->reclaim_until = 0;
	s->read_at = s->now;
	while (left) {
		size_t n = left < sizeof(sim_buf) ? left : sizeof(sim_buf);
		ssize_t got = bs_write(f->ws.bs, sim_buf, n, off);

		if (got < 0)
			s->res->write_errors++;
		if (got <= 0)
			break;
		off += got;
		left -= (size_t)got;
	}
	dirtied = bs_thread_dirtied_take();
	wb_fstate_dirtied(s->ctx, &f->ws);
	done = io_done(s);
	/* wb_balance_dirty(): no flushers, nobody paused. */
	if (s->nr_flushers)
		pause = wb_balance_dirty_at(s->ctx, (pid_t)wr->pid, dirtied, s->now);
	note_peaks(s);
	if (flushers_poke(s))
		return -ENOMEM;
	if (pause) {
		wb_throttle_held(s->ctx);
		wr->hold_start = s->now;
		wr->state = WR_PAUSED;
		return ev_push(s, s->now + pause, EV_WRITER, w, 0);
	}
	return writer_op_done(s, w, done);
}

/*
 * A read as ffs_read() makes it: one bs_read() of the request, so that
 * readahead sees the request's size; the reader waits for the backing
 * reads it made (none when the cache held it all).
 */
static int writer_read(struct sim *s, uint32_t w, struct sim_file *f, const struct trace_rec *r)
{
	struct sim_open *o = open_of(s, r);
	uint64_t at = 0;

	if (!o)
		return -ENOMEM;
	s->reclaim_until = 0;
	s->read_at = s->now;
	while (at < r->length) {
		size_t n = r->length - at < sizeof(sim_buf) ? r->length - at : sizeof(sim_buf);
		ssize_t got = bs_read(f->ws.bs, &o->ra, sim_buf, n, (off_t)(r->offset + at));

		if (got < 0)
			s->res->read_errors++;
		if (got < (ssize_t)n)
			break;
		at += n;
	}
	if (vec_add(&s->reads, io_done(s) - s->now))
		return -ENOMEM;
	return writer_op_done(s, w, io_done(s));
}

/*
 * @f lost its last name: its cache goes unwritten, as the mount's goes
 * when the kernel forgets the file (see the top), failures and all.
 */
static void file_drop(struct sim *s, struct sim_file *f)
{
	bs_truncate(f->ws.bs, 0);
	wb_fstate_reset(s->ctx, &f->ws);
	f->err_seen = wb_errseq_sample(&f->ws);
}

/* The fsync in progress is over with @err: errseq reports a writeback error once. */
static int writer_fsync_done(struct sim *s, uint32_t w, int err)
{
	struct sim_file *f = &s->files[s->writers[w].cur.file];

	err = wb_errseq_check(&f->ws, &f->err_seen, err);
	if (err)
		s->res->fsync_errors++;
	note_peaks(s);
	if (vec_add(&s->fsyncs, s->now - s->writers[w].op_start))
		return -ENOMEM;
	return writer_op_done(s, w, s->now);
}

/* wb_fsync() after its writeback pass: the sync, unless the pass failed. */
static int writer_fsync_sync(struct sim *s, uint32_t w)
{
	struct sim_writer *wr = &s->writers[w];
	struct sim_file *f = sim_file_of(wr->pass.file);
	int err = pass_end(s, &wr->pass);

	if (err)
		return writer_fsync_done(s, w, err);
	wr->state = WR_SYNC;
	return ev_push(s, sync_issue(s, f, &wr->sync_token, &wr->sync_err), EV_WRITER, w, 0);
}

/* The iteration a deadline record starts: its index in res->iters, found or added. */
static int iter_of(struct sim *s, const struct sim_trace_mark *m, uint32_t *idx)
{
	struct sim_result *r = s->res;
	struct sim_iter_result *p;
	uint64_t start = m->time_ns - s->t->first_ns;

	for (uint32_t i = r->nr_iters; i-- > 0;) {
		if (r->iters[i].rec_start_ns == start && r->iters[i].length_ns == m->length_ns) {
			*idx = i;
			return 0;
		}
	}
	if (r->nr_iters == UINT32_MAX)
		return -ENOMEM;
	p = realloc(r->iters, ((size_t)r->nr_iters + 1) * sizeof(*p));
	if (!p)
		return -ENOMEM;
	r->iters = p;
	p[r->nr_iters] = (struct sim_iter_result){ .rec_start_ns = start, .length_ns = m->length_ns };
	*idx = r->nr_iters++;
	return 0;
}

/*
 * A deadline record: the writer's records up to its next one are an
 * iteration.  An iteration starts when every iteration recorded to start
 * before it has ended (back-to-back pgbench runs: the next starts after
 * the last client of the one before has finished its transaction in
 * flight), at its recorded time or later; its deadline is its start +
 * its length, for all its writers.  Until then the writer waits
 * (WR_WAIT_ITER, woken by iter_leave()).
 */
static int writer_deadline(struct sim *s, uint32_t w)
{
	struct sim_writer *wr = &s->writers[w];
	const struct sim_trace_writer *tw = &s->t->writers[w];
	const struct sim_trace_mark *m = &s->t->marks[tw->first_mark + wr->mark];
	struct sim_iter_result *it;
	uint32_t j;
	int ret = iter_of(s, m, &j);

	if (ret)
		return ret;
	it = &s->res->iters[j];
	for (uint32_t i = 0; i < s->res->nr_iters; i++) {
		if (s->res->iters[i].rec_start_ns < it->rec_start_ns && s->res->iters[i].active) {
			wr->state = WR_WAIT_ITER;
			return 0;
		}
	}
	if (!it->writers)
		it->start_ns = s->now;
	wr->mark++;
	wr->iter = j;
	wr->in_iter = true;
	/* a length past the end of virtual time is no deadline */
	wr->deadline = it->length_ns > (uint64_t)(INT64_MAX - it->start_ns) ?
		       INT64_MAX : it->start_ns + (int64_t)it->length_ns;
	wr->iter_end = wr->mark < tw->nr_marks ? s->t->marks[tw->first_mark + wr->mark].op
					       : wr->nr_ops;
	wr->step_ns = 0;
	it->writers++;
	it->active++;
	it->steps += m->steps;
	return writer_op_done(s, w, s->now);
}

/*
 * A step due at or after the deadline: the writer stops, as pgbench's
 * clients do at -T's end, and skips the rest of its iteration's records
 * (the feed drops them unread: sim_feed_skip()); it resumes at its next
 * deadline record's recorded time, or when it is done if that is later.
 */
static int writer_skip(struct sim *s, uint32_t w)
{
	struct sim_writer *wr = &s->writers[w];
	const struct sim_trace_writer *tw = &s->t->writers[w];
	uint64_t n = wr->iter_end - wr->next;	/* from op next (cur once taken) on */
	int64_t at;
	int ret;

	ret = sim_feed_skip(&s->feed, w, n - (wr->has_cur ? 1 : 0), wr->iter_end, s->err,
			    s->errlen);
	if (ret)
		return ret;
	wr->skipped += n;
	wr->has_cur = false;
	wr->next = wr->iter_end;
	ret = iter_leave(s, wr);
	if (ret)
		return ret;
	if (wr->next == wr->nr_ops) {
		wr->state = WR_DONE;
		sim_feed_done(&s->feed, w);
		s->writers_left--;
		return 0;
	}
	at = (int64_t)(s->t->marks[tw->first_mark + wr->mark].time_ns - s->t->first_ns);
	wr->state = WR_READY;
	return ev_push(s, at > s->now ? at : s->now, EV_WRITER, w, 0);
}

/*
 * A sync_range record (sync_file_range()): with SYNC_FILE_RANGE_WRITE, a
 * pass as the kernel's filemap_fdatawrite_range() (WB_SYNC_NONE) makes,
 * and no sync: every dirty folio the range touches is written whole
 * (writeback_iter()), so a 256 kB hint inside a 2 MiB folio cleans the
 * folio, and the next write to it is charged again.  The kernel returns
 * once the writes are submitted; here the writer waits for them, one
 * batch at a time as an fsync's pass does, since a file has one pass at a
 * time (PostgreSQL's hints are 256 and 512 kB; initdb's and a start
 * after a crash sync whole files, length 0).  True when a pass began
 * (@wr->pass).
 */
static bool range_pass_begin(struct sim *s, struct sim_writer *wr, struct sim_file *f,
			     const struct trace_rec *r)
{
	off_t size = bs_file_size(f->ws.bs), start, end;

	if (!(r->flags & SYNC_FILE_RANGE_WRITE) || r->offset >= (uint64_t)size)
		return false;
	start = (off_t)r->offset;
	end = !r->length || r->length >= (uint64_t)(size - start) ? size
								  : start + (off_t)r->length;
	bs_file_folio_span(f->ws.bs, &start, &end);
	pass_begin(s, &wr->pass, f, start, end, 0, WB_PASS_RANGE);
	return true;
}

/*
 * A sync_range that waits for nothing (no SYNC_FILE_RANGE_WAIT_*) on a
 * file another pass holds (a flusher's): the kernel's WB_SYNC_NONE
 * writeback skips folios under writeback and waits for nothing, so the
 * range is left to that pass rather than the writer waiting for it.
 */
static bool range_left_to_pass(const struct sim_file *f, const struct trace_rec *r)
{
	return r->op == TRACE_OP_SYNC_RANGE && f->busy &&
	       !(r->flags & (SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WAIT_AFTER));
}

static int writer_issue(struct sim *s, uint32_t w)
{
	struct sim_writer *wr = &s->writers[w];
	const struct trace_rec *r = &wr->cur;
	struct sim_file *f;
	int64_t due;
	int ret;

	if (!wr->has_cur) {
		ret = sim_feed_next(&s->feed, w, &wr->cur, s->err, s->errlen);
		if (ret)
			return ret;
		wr->has_cur = true;
	}
	if (r->op == TRACE_OP_DEADLINE)
		return writer_deadline(s, w);
	if (r->op == TRACE_OP_PACE) {
		if (!wr->first_ns && !wr->next)
			wr->first_ns = s->now;
		wr->paced = true;
		return writer_op_done(s, w, s->now);
	}
	if (wr->in_iter && wr->step_ns != r->time_ns + 1) {	/* a new step */
		if (s->now >= wr->deadline)
			return writer_skip(s, w);
		wr->step_ns = r->time_ns + 1;
	}
	f = op_file(s, r);

	wr->op_start = s->now;
	if (!wr->first_ns && !wr->next)
		wr->first_ns = s->now;
	if (r->op == TRACE_OP_WRITE)
		return writer_write(s, w, f, r);
	if (r->op == TRACE_OP_READ)
		return writer_read(s, w, f, r);
	if (!f)		/* a rename that replaced nothing the trace knows */
		return writer_op_done(s, w, s->now);
	if (range_left_to_pass(f, r))
		return writer_op_done(s, w, s->now);
	/* The rest wait for a pass that holds the file, as for the mount's wb_lock. */
	if (f->busy) {
		wr->state = WR_WAIT_FILE;
		return file_wait(f, w);
	}
	switch (r->op) {
	case TRACE_OP_FSYNC:
	case TRACE_OP_FDATASYNC:
		/* wb_fsync(): write it all back, then sync. */
		pass_begin(s, &wr->pass, f, 0, bs_file_size(f->ws.bs), 0, WB_PASS_SYNC);
		due = pass_step(s, &wr->pass);
		if (!due)
			return writer_fsync_sync(s, w);
		wr->state = WR_PASS;
		return ev_push(s, due, EV_WRITER, w, 0);
	case TRACE_OP_SYNC_RANGE:
		if (range_pass_begin(s, wr, f, r)) {
			due = pass_step(s, &wr->pass);
			if (due) {
				wr->state = WR_PASS;
				return ev_push(s, due, EV_WRITER, w, 0);
			}
			pass_end(s, &wr->pass);
		}
		break;
	case TRACE_OP_TRUNCATE:
		bs_truncate(f->ws.bs, (off_t)r->offset);
		break;
	case TRACE_OP_FALLOCATE:
		bs_fallocate(f->ws.bs, (int)r->flags, (off_t)r->offset, (off_t)r->length);
		break;
	case TRACE_OP_CREATE:
		if (bs_file_size(f->ws.bs) != (off_t)r->length)
			bs_truncate(f->ws.bs, (off_t)r->length);
		break;
	default:	/* unlink, rename */
		file_drop(s, f);
		break;
	}
	wb_fstate_cleaned(s->ctx, &f->ws);
	return writer_op_done(s, w, s->now);
}

static int writer_go(struct sim *s, uint32_t w)
{
	struct sim_writer *wr = &s->writers[w];
	int64_t pause, due;

	switch (wr->state) {
	case WR_READY:
		return writer_issue(s, w);
	case WR_PAUSED:
		pause = wb_balance_dirty_again_at(s->ctx, (pid_t)wr->pid, s->now);
		if (pause)
			return ev_push(s, s->now + pause, EV_WRITER, w, 0);
		wb_throttle_unheld(s->ctx, (pid_t)wr->pid, s->now - wr->hold_start, false);
		if (vec_add(&s->pauses, s->now - wr->hold_start))
			return -ENOMEM;
		return writer_op_done(s, w, s->now);
	case WR_PASS:
		wb_pass_complete(&wr->pass);
		due = pass_step(s, &wr->pass);
		if (due)
			return ev_push(s, due, EV_WRITER, w, 0);
		if (wr->pass.why == WB_PASS_RANGE) {
			/* Its errors are the file's, for the next fsync (errseq). */
			pass_end(s, &wr->pass);
			return writer_op_done(s, w, s->now);
		}
		return writer_fsync_sync(s, w);
	case WR_SYNC:
		sync_end(s, sim_file_of(wr->pass.file), wr->sync_token, wr->sync_err);
		return writer_fsync_done(s, w, wr->sync_err);
	default:
		return 0;
	}
}

/* ---- setting up ---- */

static int no_truncate(void *ctx, off_t size)
{
	(void)ctx;
	(void)size;
	return 0;
}

static int no_fallocate(void *ctx, int mode, off_t off, off_t len)
{
	(void)ctx;
	(void)mode;
	(void)off;
	(void)len;
	return 0;
}

/* An alloc fault (readahead's folio above the smallest cannot be had). */
static bool sim_folio_alloc_fails(void *arg, off_t off, size_t len)
{
	struct sim_file *f = arg;

	return sim_fault(f->s, WB_FAULT_ALLOC, f, off, len, 0) < 0;
}

static const struct bs_backing_ops sim_backing_ops = {
	.read = sim_backing_read, .truncate = no_truncate, .fallocate = no_fallocate,
	.folio_alloc_fails = sim_folio_alloc_fails,
};

/*
 * The mount's context without its threads (wb_ctx_create_core()), with
 * the throttler on the virtual clock, reclaim calling the engine and the
 * mount's fault spec.  The cache is of one thread (bs_config.one_thread):
 * everything that calls it runs in this one, event after event, and
 * nothing waits for I/O, which ends in a later event: folios without a
 * lock or condition (88 bytes each).
 */
static int ctx_create(struct sim *s, const struct sim_config *fc, char *err, size_t errlen)
{
	static const struct bs_cache_ops cache_ops = {
		.need_clean = sim_need_clean,
		.now_ns = engine_now,
	};
	struct wb_config cfg = fc->wb;
	struct bs_config bs = fc->bs;
	int ret;

	bs.one_thread = true;
	cfg.fault = cfg.stats_log = NULL;
	cfg.backing_io = WB_IO_NULL;
	ret = wb_ctx_create_core(&bs, &cfg, &cache_ops, s, 0, &s->ctx);
	if (ret)
		return ret;
	wb_ctx_set_engine(s->ctx, &sim_engine_ops, s);
	/*
	 * A writer that finds the cache full of data writeback cannot free
	 * (a failing device) fails at once instead of waiting BS_FULL_WAIT_MS
	 * of host time for the flushers, which here run only between events:
	 * how many writebacks it tried meanwhile would depend on the host.
	 */
	bs_cache_set_full_wait(wb_ctx_cache(s->ctx), 0);
	if (fc->wb.fault)
		ret = wb_ctx_set_fault(s->ctx, fc->wb.fault, err, errlen);
	return ret;
}

static void ctx_destroy(struct sim *s)
{
	if (!s->ctx)
		return;
	for (size_t i = 0; s->open_tab && i <= s->open_mask; i++) {
		if (!s->open_tab[i].o)
			continue;
		bs_ra_destroy(&s->open_tab[i].o->ra);
		free(s->open_tab[i].o);
	}
	for (size_t i = 0; i < s->nr_files; i++) {
		if (s->files[i].ws.bs)
			bs_file_destroy(s->files[i].ws.bs);
		free(s->files[i].waiters);
	}
	wb_ctx_destroy_core(s->ctx);
	s->ctx = NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static size_t vec_count(const struct i64_vec *v)
{
	return v->n + v->zeros;
}

/*
 * The @pct-th percentile of @v's samples (the non-zero ones sorted in
 * place), 0 when empty: the sample at (count - 1) * pct / 100 of all of
 * them sorted, where the zeros stand between the negative and the
 * positive ones.
 */
static int64_t percentile(struct i64_vec *v, unsigned int pct)
{
	size_t i, neg = 0;

	if (!vec_count(v))
		return 0;
	/* Only zeros: nothing stored, and qsort's base must not be NULL. */
	if (v->n > 1)
		qsort(v->v, v->n, sizeof(*v->v), cmp_i64);
	while (neg < v->n && v->v[neg] < 0)
		neg++;
	i = (vec_count(v) - 1) * pct / 100;
	if (i < neg)
		return v->v[i];
	return i < neg + v->zeros ? 0 : v->v[i - v->zeros];
}

/*
 * The files and writers of the trace (its first pass), the feed for their
 * records, and each writer's first event at its first record's time.
 */
static int setup_actors(struct sim *s)
{
	const struct sim_trace *t = s->t;
	int ret;

	s->nr_files = t->nr_files;
	s->nr_writers = t->nr_writers;
	s->files = calloc(s->nr_files + 1, sizeof(*s->files));
	s->writers = calloc(s->nr_writers + 1, sizeof(*s->writers));
	if (!s->files || !s->writers)
		return -ENOMEM;
	/* Files are numbered in id order, made in the order the trace first names them. */
	for (size_t i = 0; i < s->nr_files; i++) {
		struct sim_file *f = &s->files[t->file_order[i]];
		struct bs_file *bs;

		f->s = s;
		f->id = t->files[t->file_order[i]].id;
		ret = bs_file_create(wb_ctx_cache(s->ctx), &sim_backing_ops, f,
				     (off_t)t->files[t->file_order[i]].size, &bs);
		if (ret)
			return ret;
		/* The probes name it by its trace id, as the mount's by its inode. */
		bs_file_set_ino(bs, f->id);
		wb_fstate_init(&f->ws, bs);
	}
	ret = sim_feed_open(&s->feed, t, s->feed_window, s->err, s->errlen);
	if (ret)
		return ret;
	s->writers_left = s->nr_writers;
	for (size_t w = 0; w < s->nr_writers && !ret; w++) {
		s->writers[w].pid = t->writers[w].pid;
		s->writers[w].nr_ops = t->writers[w].nr_ops;
		ret = ev_push(s, (int64_t)t->writers[w].first_ns - (int64_t)t->first_ns, EV_WRITER,
			      (uint32_t)w, 0);
	}
	return ret;
}

/*
 * A replay that runs this far past the trace's own length has stalled:
 * writers held at a limit nothing will bring them under (an hour of
 * virtual time beyond ten times the recorded length).
 */
static int64_t stall_limit(const struct sim *s)
{
	uint64_t len = s->t->last_ns > s->t->first_ns ? s->t->last_ns - s->t->first_ns : 0;

	if (len > (uint64_t)(INT64_MAX - 3600 * NS) / 10)	/* a damaged trace's times */
		return INT64_MAX;
	return 10 * (int64_t)len + 3600 * NS;
}

static int run(struct sim *s, char *err, size_t errlen)
{
	int64_t limit = stall_limit(s);
	int ret = 0;

	for (uint32_t k = 0; k < s->nr_flushers && !ret; k++)
		ret = ev_push(s, wb_fp_next_wake(0, wb_ctx_interval_ms(s->ctx)),
			      EV_FLUSHER, k, ++s->flushers[k].wake_gen);
	if (s->log && !ret)
		ret = ev_push(s, 0, EV_STATS, 0, 0);
	while (!ret && s->nr_ev) {
		struct sim_ev ev;
		bool busy = false;

		for (uint32_t k = 0; k < s->nr_flushers; k++)
			busy |= s->flushers[k].state != FL_IDLE;
		if (!s->writers_left && !busy)
			break;
		ev = ev_pop(s);
		s->now = ev.t;
		/*
		 * The next event's writer and its feed queue, read while this
		 * event runs: a cache miss apiece otherwise (10,241 writers
		 * of 6.7 KB in the seed's scenario, each event another's).
		 */
		if (s->nr_ev && s->heap[0].kind == EV_WRITER) {
			const char *wr = (const char *)&s->writers[s->heap[0].idx];

			__builtin_prefetch(wr);
			__builtin_prefetch(wr + 64);
			__builtin_prefetch(wr + 128);
			__builtin_prefetch(wr + offsetof(struct sim_writer, pass) - 1);
			__builtin_prefetch(&s->feed.q[s->heap[0].idx]);
		}
		if (s->now > limit) {
			snprintf(err, errlen, "the replay stalled: %zu writers not done after %lld s of "
				 "virtual time (held at a limit that nothing brings them under?)",
				 s->writers_left, (long long)(s->now / NS));
			return -EDEADLK;
		}
		if (ev.kind == EV_WRITER) {
			ret = writer_go(s, ev.idx);
		} else if (ev.kind == EV_FLUSHER) {
			struct sim_flusher *fl = &s->flushers[ev.idx];

			if ((ev.gen == 0) == (fl->state != FL_IDLE) &&
			    (ev.gen == 0 || ev.gen == fl->wake_gen))
				ret = flusher_go(s, ev.idx);
		} else {
			log_line(s);
			ret = ev_push(s, s->now + (int64_t)s->log_interval_ms * 1000000, EV_STATS, 0, 0);
		}
	}
	/* Unmount: everything is written back and synced. */
	for (size_t i = 0; i < s->nr_files && !ret; i++) {
		int64_t until = write_all_now(s, &s->files[i]);

		if (until > s->last_done)
			s->last_done = until;
	}
	if (s->last_done > s->now)
		s->now = s->last_done;
	if (s->log)
		log_line(s);
	return ret;
}

static void summarize(struct sim *s)
{
	struct sim_result *r = s->res;
	struct bs_stats st;

	bs_cache_stats(wb_ctx_cache(s->ctx), &st);
	wb_ctx_stats(s->ctx, r->stats, sizeof(r->stats));
	r->end_ns = s->now;
	_Static_assert(SIM_NR_ORDERS == BS_NR_FOLIO_ORDERS, "folio sizes of the summary");
	memcpy(r->folios_order, st.folios_order, sizeof(r->folios_order));
	memcpy(r->folios_made_order, st.folios_made_order, sizeof(r->folios_made_order));
	r->opens = s->nr_opens;
	r->feed_peak = s->feed.peak_queued;
	r->feed_peak_mem = s->feed.peak_mem;
	r->feed_spilled = s->feed.spilled;
	r->feed_spill_peak = s->feed.peak_spilled_chunks * SIM_FEED_CHUNK;
	r->pages_charged = st.nr_dirtied;
	r->pages_written = st.nr_written;
	r->pauses = vec_count(&s->pauses);
	for (size_t i = 0; i < s->pauses.n; i++) {
		r->pause_total_ns += s->pauses.v[i];
		if (s->pauses.v[i] > r->pause_max_ns)
			r->pause_max_ns = s->pauses.v[i];
	}
	r->pause_p50_ns = percentile(&s->pauses, 50);
	r->pause_p99_ns = percentile(&s->pauses, 99);
	r->fsyncs = vec_count(&s->fsyncs);
	r->fsync_p50_ns = percentile(&s->fsyncs, 50);
	r->fsync_p99_ns = percentile(&s->fsyncs, 99);
	r->reads = vec_count(&s->reads);
	for (size_t i = 0; i < s->reads.n; i++)
		r->read_total_ns += s->reads.v[i];
	r->read_p50_ns = percentile(&s->reads, 50);
	r->read_p99_ns = percentile(&s->reads, 99);
	r->nr_writers = (uint32_t)s->nr_writers;
	for (size_t w = 0; w < s->nr_writers && r->writers; w++) {
		struct sim_writer *wr = &s->writers[w];
		const struct sim_trace_writer *tw = &s->t->writers[w];
		int64_t ach = wr->last_ns - wr->first_ns;
		int64_t rec = (int64_t)(tw->end_ns - tw->first_ns);

		r->writers[w] = (struct sim_writer_result){
			.pid = wr->pid, .ops = wr->nr_ops - wr->skipped,
			.achieved_ops_s = ach > 0 ? (double)(wr->nr_ops - wr->skipped) * NS /
						    (double)ach : 0,
			.recorded_ops_s = rec > 0 ? (double)wr->nr_ops * NS / (double)rec : 0,
		};
	}
}

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int sim_replay(const struct sim_trace *t, const char *opts, const char *stats_log,
	       struct sim_result *res, char *err, size_t errlen)
{
	struct sim s = { .res = res, .t = t, .err = err, .errlen = errlen };
	struct sim_config fc;
	double t0 = cpu_seconds();
	int ret;

	memset(res, 0, sizeof(*res));
	if (!t->nr) {
		snprintf(err, errlen, "the trace has no records");
		return -EINVAL;
	}
	ret = sim_config_parse(opts, &fc, err, errlen);
	if (ret)
		return ret;
	s.dev = fc.dev;
	s.data = fc.sim_data;
	s.feed_window = fc.feed_window;
	s.nr_flushers = fc.wb.flushers;
	s.log_interval_ms = fc.wb.stats_interval_ms;
	s.flushers = calloc(s.nr_flushers + 1, sizeof(*s.flushers));
	s.vols = calloc(s.dev.raid, sizeof(struct sim_vol) + s.dev.qd * sizeof(int64_t));
	ret = s.flushers && s.vols ? ctx_create(&s, &fc, err, errlen) : -ENOMEM;
	if (!ret)
		ret = setup_actors(&s);
	if (!ret) {
		res->writers = calloc(s.nr_writers, sizeof(*res->writers));
		ret = res->writers ? 0 : -ENOMEM;
	}
	if (!ret && stats_log) {
		s.log = fopen(stats_log, "w");
		if (!s.log) {
			ret = -errno;
			snprintf(err, errlen, "--stats-log %s: %s", stats_log, strerror(-ret));
		}
	}
	if (!ret)
		ret = run(&s, err, errlen);
	if (!ret) {
		summarize(&s);
		if (bs_cache_check(wb_ctx_cache(s.ctx))) {
			snprintf(err, errlen, "accounting check failed after the replay");
			ret = -EUCLEAN;
		}
	} else if (!*err) {
		snprintf(err, errlen, "replay failed: %s", strerror(-ret));
	}
	if (s.log && fclose(s.log) && !ret) {
		ret = -errno;
		snprintf(err, errlen, "--stats-log %s: %s", stats_log, strerror(-ret));
	}
	ctx_destroy(&s);
	sim_feed_close(&s.feed);
	free(s.writers);
	free(s.files);
	free(s.open_tab);
	free(s.flushers);
	free(s.vols);
	free(s.heap);
	free(s.pauses.v);
	free(s.fsyncs.v);
	free(s.reads.v);
	sim_config_free(&fc);
	res->replay_s = cpu_seconds() - t0;
	return ret;
}

void sim_result_free(struct sim_result *res)
{
	free(res->writers);
	res->writers = NULL;
	free(res->iters);
	res->iters = NULL;
}
