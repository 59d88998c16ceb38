// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * feed.c - the trace as a replay reads it, streamed (sim.h: struct
 * sim_trace, struct sim_feed).
 *
 * A replay needs, before its first event, what is per file (the files
 * exist from the start, numbered in id order, created in the order the
 * trace first names them) and per writer (its first record's time, how
 * many ops it has); and then each writer's records in its own order, one
 * at a time.  The first pass (sim_trace_open) collects the former; the
 * second (one sim_feed per replay) reads the file forward once and hands
 * each record to its writer's queue, only as far as a writer asks.
 *
 * Why one forward reader and not a cursor per writer: a writer's records
 * are spread over the file between everyone else's (1024 pgbench clients
 * interleave record by record), so a cursor per writer would read and
 * decode the span of the file each writer lives in once per writer; the
 * single reader decodes each record once, and what it holds is only the
 * records read before their writer wants them.
 */
#include "sim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

/* ---- uint32 -> index ---- */

static size_t map_slot(const struct sim_u32_map *m, uint32_t key)
{
	size_t i = (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & m->mask;

	while (m->vals[i] != NONE && m->keys[i] != key)
		i = (i + 1) & m->mask;
	return i;
}

/* An empty map with room for @n keys (at most half full): 0 or -ENOMEM. */
static int map_init(struct sim_u32_map *m, size_t n)
{
	size_t slots = 16;

	while (slots < 2 * n)
		slots *= 2;
	m->keys = malloc(slots * sizeof(*m->keys));
	m->vals = malloc(slots * sizeof(*m->vals));
	m->mask = slots - 1;
	if (!m->keys || !m->vals)
		return -ENOMEM;
	memset(m->vals, 0xff, slots * sizeof(*m->vals));
	return 0;
}

static void map_free(struct sim_u32_map *m)
{
	free(m->keys);
	free(m->vals);
	*m = (struct sim_u32_map){ .mask = 0 };
}

/* @key's index, NONE when absent. */
static uint32_t map_get(const struct sim_u32_map *m, uint32_t key)
{
	return m->vals[map_slot(m, key)];
}

/* Doubles the slots when @nr keys would fill more than half: 0 or -ENOMEM. */
static int map_grow(struct sim_u32_map *m, size_t nr)
{
	struct sim_u32_map big;

	if (2 * (nr + 1) <= m->mask + 1)
		return 0;
	if (map_init(&big, nr + 1)) {
		map_free(&big);
		return -ENOMEM;
	}
	for (size_t i = 0; i <= m->mask; i++) {
		if (m->vals[i] == NONE)
			continue;
		size_t j = map_slot(&big, m->keys[i]);

		big.keys[j] = m->keys[i];
		big.vals[j] = m->vals[i];
	}
	map_free(m);
	*m = big;
	return 0;
}

static void map_put(struct sim_u32_map *m, uint32_t key, uint32_t val)
{
	size_t i = map_slot(m, key);

	m->keys[i] = key;
	m->vals[i] = val;
}

/* ---- the first pass ---- */

/*
 * What the first pass gathers, in the order the trace first names each
 * writer and file (their index here: the map's value until renumbered).
 */
struct scan {
	struct sim_trace_writer *w;
	uint64_t *w_last;		/* time_ns + dur_ns of each writer's record before */
	size_t nr_w, cap_w;
	struct sim_trace_file *f;
	size_t nr_f, cap_f;
	struct sim_trace_gap *g;
	uint32_t *g_w;			/* each gap's writer (scan index) */
	size_t nr_g, cap_g;
	struct sim_trace_mark *m;
	uint32_t *m_w;			/* each mark's writer (scan index) */
	size_t nr_m, cap_m;
	/* per writer: its mark now (an index into m; NONE: none yet), and
	 * the time_ns of its step now + 1 (0: none since the mark) */
	uint32_t *w_mark;
	uint64_t *w_step;
};

static int grow(void **p, size_t *cap, size_t n, size_t size)
{
	size_t c = *cap ? 2 * *cap : 64;
	void *q;

	if (n < *cap)
		return 0;
	q = realloc(*p, c * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

static int scan_writer(struct sim_trace *t, struct scan *sc, const struct trace_rec *r)
{
	uint32_t w = map_get(&t->pid_map, r->pid);
	struct sim_trace_writer *wr;
	int64_t think;
	size_t cap = sc->cap_w;

	if (w == NONE) {
		size_t cap2 = cap, cap3 = cap;

		if (grow((void **)&sc->w, &sc->cap_w, sc->nr_w, sizeof(*sc->w)) ||
		    grow((void **)&sc->w_last, &cap, sc->nr_w, sizeof(*sc->w_last)) ||
		    grow((void **)&sc->w_mark, &cap2, sc->nr_w, sizeof(*sc->w_mark)) ||
		    grow((void **)&sc->w_step, &cap3, sc->nr_w, sizeof(*sc->w_step)) ||
		    map_grow(&t->pid_map, sc->nr_w))
			return -ENOMEM;
		w = (uint32_t)sc->nr_w++;
		map_put(&t->pid_map, r->pid, w);
		sc->w[w] = (struct sim_trace_writer){ .pid = r->pid, .first_ns = r->time_ns };
		sc->w_mark[w] = NONE;
		sc->w_step[w] = 0;
	} else {
		think = (int64_t)(r->time_ns - sc->w_last[w]);
		if (think > SIM_FEED_GAP_NS) {
			cap = sc->cap_g;
			if (grow((void **)&sc->g, &sc->cap_g, sc->nr_g, sizeof(*sc->g)) ||
			    grow((void **)&sc->g_w, &cap, sc->nr_g, sizeof(*sc->g_w)))
				return -ENOMEM;
			sc->g[sc->nr_g] = (struct sim_trace_gap){ sc->w[w].nr_ops, think };
			sc->g_w[sc->nr_g++] = w;
		}
	}
	/* A pace record must come before the writer's iterations (trace.h). */
	if (r->op == TRACE_OP_PACE && sc->w_mark[w] != NONE)
		return -EINVAL;
	if (r->op == TRACE_OP_DEADLINE) {
		size_t cap = sc->cap_m;

		if (grow((void **)&sc->m, &sc->cap_m, sc->nr_m, sizeof(*sc->m)) ||
		    grow((void **)&sc->m_w, &cap, sc->nr_m, sizeof(*sc->m_w)))
			return -ENOMEM;
		sc->m[sc->nr_m] = (struct sim_trace_mark){ sc->w[w].nr_ops, r->time_ns, r->length, 0 };
		sc->m_w[sc->nr_m] = w;
		sc->w_mark[w] = (uint32_t)sc->nr_m++;
		sc->w_step[w] = 0;
	} else if (r->op != TRACE_OP_PACE && sc->w_mark[w] != NONE &&
		   sc->w_step[w] != r->time_ns + 1) {
		struct sim_trace_mark *m = &sc->m[sc->w_mark[w]];

		if (r->time_ns < m->time_ns + m->length_ns)	/* due before the deadline */
			m->steps++;
		sc->w_step[w] = r->time_ns + 1;
	}
	wr = &sc->w[w];
	wr->nr_ops++;
	wr->end_ns = r->time_ns + r->dur_ns;
	sc->w_last[w] = wr->end_ns;
	return 0;
}

static int scan_file(struct sim_trace *t, struct scan *sc, const struct trace_rec *r)
{
	uint32_t f = map_get(&t->file_map, r->file);

	if (f != NONE || !sim_op_names_file(r->op))
		return 0;
	if (grow((void **)&sc->f, &sc->cap_f, sc->nr_f, sizeof(*sc->f)) ||
	    map_grow(&t->file_map, sc->nr_f))
		return -ENOMEM;
	f = (uint32_t)sc->nr_f++;
	map_put(&t->file_map, r->file, f);
	/* A file's size is the one its first record, a create, gives; else 0. */
	sc->f[f] = (struct sim_trace_file){ r->file, r->op == TRACE_OP_CREATE ? r->length : 0 };
	return 0;
}

static int cmp_writer(const void *a, const void *b)
{
	const struct sim_trace_writer *x = a, *y = b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static int cmp_file(const void *a, const void *b)
{
	const struct sim_trace_file *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * The scan's writers and files into @t, sorted (pid, file id), the maps
 * renumbered to match, each writer's gaps together in op order.
 */
static int scan_finish(struct sim_trace *t, struct scan *sc)
{
	uint32_t *w_new = malloc((sc->nr_w + 1) * sizeof(*w_new));
	size_t *at = calloc(sc->nr_w + 1, sizeof(*at));
	int ret = -ENOMEM;

	t->file_order = malloc((sc->nr_f + 1) * sizeof(*t->file_order));
	t->gaps = malloc((sc->nr_g + 1) * sizeof(*t->gaps));
	t->marks = malloc((sc->nr_m + 1) * sizeof(*t->marks));
	if (!w_new || !at || !t->file_order || !t->gaps || !t->marks)
		goto out;
	t->writers = sc->w;
	t->nr_writers = sc->nr_w;
	sc->w = NULL;
	/* An empty trace has no arrays, and qsort's base must not be NULL. */
	if (t->nr_writers > 1)
		qsort(t->writers, t->nr_writers, sizeof(*t->writers), cmp_writer);
	for (size_t i = 0; i < t->nr_writers; i++) {
		uint32_t old = map_get(&t->pid_map, t->writers[i].pid);

		w_new[old] = (uint32_t)i;
		map_put(&t->pid_map, t->writers[i].pid, (uint32_t)i);
	}
	t->files = sc->f;
	t->nr_files = sc->nr_f;
	sc->f = NULL;
	if (t->nr_files > 1)
		qsort(t->files, t->nr_files, sizeof(*t->files), cmp_file);
	for (size_t i = 0; i < t->nr_files; i++) {
		uint32_t old = map_get(&t->file_map, t->files[i].id);

		t->file_order[old] = (uint32_t)i;
		map_put(&t->file_map, t->files[i].id, (uint32_t)i);
	}
	/* Gaps by writer (a counting sort keeps each writer's in op order). */
	for (size_t i = 0; i < sc->nr_g; i++)
		t->writers[w_new[sc->g_w[i]]].nr_gaps++;
	for (size_t i = 0, n = 0; i < t->nr_writers; i++) {
		t->writers[i].first_gap = at[i] = n;
		n += t->writers[i].nr_gaps;
	}
	for (size_t i = 0; i < sc->nr_g; i++)
		t->gaps[at[w_new[sc->g_w[i]]]++] = sc->g[i];
	t->nr_gaps = sc->nr_g;
	/* Marks likewise. */
	for (size_t i = 0; i < sc->nr_m; i++)
		t->writers[w_new[sc->m_w[i]]].nr_marks++;
	for (size_t i = 0, n = 0; i < t->nr_writers; i++) {
		t->writers[i].first_mark = at[i] = n;
		n += t->writers[i].nr_marks;
	}
	for (size_t i = 0; i < sc->nr_m; i++)
		t->marks[at[w_new[sc->m_w[i]]]++] = sc->m[i];
	t->nr_marks = sc->nr_m;
	ret = 0;
out:
	free(w_new);
	free(at);
	return ret;
}

int sim_trace_open(const char *path, struct sim_trace **tp, char *err, size_t errlen)
{
	struct sim_trace *t = calloc(1, sizeof(*t));
	struct scan sc = { .nr_w = 0 };
	struct trace_reader rd;
	struct trace_rec r;
	int ret;

	*tp = NULL;
	if (!t || !(t->path = strdup(path)) || map_init(&t->pid_map, 0) ||
	    map_init(&t->file_map, 0)) {
		sim_trace_close(t);
		snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	ret = trace_reader_open(&rd, path, err, errlen);
	if (ret) {
		sim_trace_close(t);
		return ret;
	}
	t->nr = rd.nr;
	while ((ret = trace_reader_next(&rd, &r, err, errlen)) == 1) {
		if (rd.next == 1)
			t->first_ns = r.time_ns;
		t->last_ns = r.time_ns;
		ret = scan_writer(t, &sc, &r);
		if (ret == -EINVAL) {
			snprintf(err, errlen, "%s: record %llu: a pace record after its writer's "
				 "first deadline record (pid %u)", path,
				 (unsigned long long)(rd.next - 1), r.pid);
			break;
		}
		if (ret || scan_file(t, &sc, &r)) {
			ret = -ENOMEM;
			break;
		}
	}
	trace_reader_close(&rd);
	if (!ret && scan_finish(t, &sc))
		ret = -ENOMEM;
	if (ret == -ENOMEM)
		snprintf(err, errlen, "%s: out of memory for the trace's writers and files", path);
	free(sc.w);
	free(sc.w_last);
	free(sc.f);
	free(sc.g);
	free(sc.g_w);
	free(sc.m);
	free(sc.m_w);
	free(sc.w_mark);
	free(sc.w_step);
	if (ret) {
		sim_trace_close(t);
		return ret;
	}
	*tp = t;
	return 0;
}

void sim_trace_close(struct sim_trace *t)
{
	if (!t)
		return;
	free(t->path);
	free(t->files);
	free(t->file_order);
	free(t->writers);
	free(t->gaps);
	free(t->marks);
	map_free(&t->pid_map);
	map_free(&t->file_map);
	free(t);
}

/* ---- the second pass, one per replay ---- */

int sim_feed_open(struct sim_feed *fd, const struct sim_trace *t, uint64_t window,
		  char *err, size_t errlen)
{
	int ret;

	*fd = (struct sim_feed){ .t = t, .free_node = NONE, .window = window,
				 .check_at = window ? window : UINT64_MAX };
	fd->q = malloc((t->nr_writers + 1) * sizeof(*fd->q));
	if (!fd->q) {
		snprintf(err, errlen, "%s: out of memory", t->path);
		return -ENOMEM;
	}
	for (size_t w = 0; w < t->nr_writers; w++)
		fd->q[w] = (struct sim_feed_queue){ .head = NONE, .tail = NONE,
						    .gap = t->writers[w].first_gap };
	ret = trace_reader_open(&fd->rd, t->path, err, errlen);
	if (ret) {
		free(fd->q);
		fd->q = NULL;
		return ret;
	}
	if (fd->rd.nr != t->nr) {
		snprintf(err, errlen, "%s: the trace changed since it was read (%llu records, "
			 "then %llu)", t->path, (unsigned long long)t->nr,
			 (unsigned long long)fd->rd.nr);
		sim_feed_close(fd);
		return -EIO;
	}
	return 0;
}

static void cursor_close(struct sim_feed *fd, struct sim_feed_queue *q)
{
	trace_reader_close(q->cursor);
	free(q->cursor);
	q->cursor = NULL;
	fd->cursors--;
}

void sim_feed_close(struct sim_feed *fd)
{
	if (fd->q) {
		for (size_t w = 0; w < fd->t->nr_writers; w++)
			if (fd->q[w].cursor)
				cursor_close(fd, &fd->q[w]);
		trace_reader_close(&fd->rd);
	}
	free(fd->q);
	free(fd->pool);
	fd->q = NULL;
	fd->pool = NULL;
}

/* A node off the free list, or a new one: its index, or NONE when out of memory. */
static uint32_t node_get(struct sim_feed *fd)
{
	uint32_t n = fd->free_node;

	if (n != NONE) {
		fd->free_node = fd->pool[n].next;
		return n;
	}
	if (fd->nr_pool == fd->cap_pool) {
		uint32_t cap = fd->cap_pool ? 2 * fd->cap_pool : 1024;
		struct sim_feed_node *p;

		if (cap >= NONE)
			return NONE;
		p = realloc(fd->pool, (size_t)cap * sizeof(*p));
		if (!p)
			return NONE;
		fd->pool = p;
		fd->cap_pool = cap;
	}
	return fd->nr_pool++;
}

/* The head of @q's queue back to the free list. */
static void node_pop(struct sim_feed *fd, struct sim_feed_queue *q)
{
	uint32_t h = q->head;

	q->head = fd->pool[h].next;
	if (q->head == NONE)
		q->tail = NONE;
	fd->pool[h].next = fd->free_node;
	fd->free_node = h;
	q->nr--;
	fd->queued--;
}

/*
 * Record @r (read at @index) in the replay's terms: its writer's index
 * into *@w, its file's index in r->file, a rename's replaced file as an
 * index + 1 in r->offset.  0, or -EIO when the trace is not the one the
 * first pass read.
 */
static int convert(const struct sim_feed *fd, struct trace_rec *r, uint64_t index, uint32_t *w,
		   char *err, size_t errlen)
{
	const struct sim_trace *t = fd->t;
	uint32_t f;

	*w = map_get(&t->pid_map, r->pid);
	f = sim_op_names_file(r->op) ? map_get(&t->file_map, r->file) : 0;
	if (*w == NONE || f == NONE) {
		snprintf(err, errlen, "%s: the trace changed since it was read (record %llu)",
			 t->path, (unsigned long long)index);
		return -EIO;
	}
	/*
	 * What a rename replaces, as an index + 1 (0: none, or unknown here).
	 * An exchange replaces nothing, nor does a rename onto another name of
	 * the same file.
	 */
	if (r->op == TRACE_OP_RENAME) {
		uint32_t rep = NONE;

		if (r->offset && r->offset != r->file && !(r->flags & RENAME_EXCHANGE) &&
		    r->offset <= UINT32_MAX)
			rep = map_get(&t->file_map, (uint32_t)r->offset);
		r->offset = rep == NONE ? 0 : (uint64_t)rep + 1;
	}
	r->file = f;
	return 0;
}

/* "The trace ended before a writer's records did" in @err: -EIO. */
static int short_trace(const struct sim_feed *fd, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s: the trace changed since it was read (it ends "
		 "before a writer's records do)", fd->t->path);
	return -EIO;
}

/*
 * Detach the writer holding the most records read ahead when that is a
 * sixteenth of the window or more: its records are freed, and from the
 * first of them on it reads its own (a cursor of its own, which the
 * forward read passes over).  Called when the records held reach
 * check_at (read_one() then moves it a sixteenth of the window past what
 * is held, and sim_feed_next() back to the window only once the records
 * held are that far below it: the writers are looked at once per a
 * sixteenth of the window read at most).  With SIM_FEED_MAX_CURSORS
 * writers detached already, or no file or memory for a reader now, none
 * is: the records stay queued.  0, or -errno with one line in @err.
 */
static int detach_one(struct sim_feed *fd, char *err, size_t errlen)
{
	struct sim_feed_queue *q = NULL;
	struct trace_reader *cur;
	int ret;

	if (fd->cursors == SIM_FEED_MAX_CURSORS)
		return 0;
	for (size_t w = 0; w < fd->t->nr_writers; w++)
		if (!q || fd->q[w].nr > q->nr)
			q = &fd->q[w];
	if (!q || q->nr == 0 || q->nr < fd->window / 16)
		return 0;
	cur = malloc(sizeof(*cur));
	if (!cur)
		return 0;
	ret = trace_reader_open(cur, fd->t->path, err, errlen);
	if (ret) {
		free(cur);
		if (ret == -EMFILE || ret == -ENFILE || ret == -ENOMEM) {
			*err = '\0';
			return 0;
		}
		return ret;
	}
	ret = trace_reader_seek(cur, fd->pool[q->head].index, err, errlen);
	if (ret) {
		trace_reader_close(cur);
		free(cur);
		return ret;
	}
	/*
	 * A queue holds records only once the records to drop are (read_one()
	 * drops before it queues), so the cursor owes none from here.
	 */
	while (q->head != NONE)
		node_pop(fd, q);
	q->cursor = cur;
	fd->detached++;
	if (++fd->cursors > fd->peak_cursors)
		fd->peak_cursors = fd->cursors;
	return 0;
}

/* The next record of the file into its writer's queue: that writer, or -errno. */
static int64_t read_one(struct sim_feed *fd, char *err, size_t errlen)
{
	struct sim_feed_queue *q;
	struct trace_rec r;
	uint64_t index = fd->rd.next;
	uint32_t w, n;
	int ret = trace_reader_next(&fd->rd, &r, err, errlen);

	if (ret <= 0)
		return ret ? ret : short_trace(fd, err, errlen);
	ret = convert(fd, &r, index, &w, err, errlen);
	if (ret)
		return ret;
	q = &fd->q[w];
	if (q->cursor || q->done)	/* its cursor reads this one; or it has ended */
		return w;
	if (q->drop) {		/* skipped (sim_feed_skip()): not kept */
		q->drop--;
		return w;
	}
	n = node_get(fd);
	if (n == NONE) {
		snprintf(err, errlen, "%s: out of memory for %llu records read ahead", fd->t->path,
			 (unsigned long long)fd->queued);
		return -ENOMEM;
	}
	fd->pool[n] = (struct sim_feed_node){ r, index, NONE };
	if (q->tail == NONE)
		q->head = n;
	else
		fd->pool[q->tail].next = n;
	q->tail = n;
	q->nr++;
	if (++fd->queued > fd->peak_queued)
		fd->peak_queued = fd->queued;
	if (fd->queued >= fd->check_at) {
		ret = detach_one(fd, err, errlen);
		if (ret)
			return ret;
		fd->check_at = fd->queued + fd->window / 16;
		if (fd->check_at < fd->window)
			fd->check_at = fd->window;
	}
	return w;
}

/*
 * Detached writer @w's next record from its cursor: 1, 0 when the
 * cursor has come up to the forward read (it is closed: the forward read
 * queues @w's records again from there), or -errno.
 */
static int cursor_next(struct sim_feed *fd, uint32_t w, struct trace_rec *rec,
		       char *err, size_t errlen)
{
	struct sim_feed_queue *q = &fd->q[w];
	uint32_t pid = fd->t->writers[w].pid, rw;
	int ret;

	for (;;) {
		uint64_t index = q->cursor->next;

		if (index == fd->rd.next) {
			cursor_close(fd, q);
			fd->reattached++;
			return 0;
		}
		ret = trace_reader_next(q->cursor, rec, err, errlen);
		if (ret <= 0)
			return ret ? ret : short_trace(fd, err, errlen);
		if (rec->pid != pid)
			continue;
		ret = convert(fd, rec, index, &rw, err, errlen);
		if (ret)
			return ret;
		if (q->drop) {
			q->drop--;
			continue;
		}
		return 1;
	}
}

int sim_feed_next(struct sim_feed *fd, uint32_t w, struct trace_rec *rec, char *err, size_t errlen)
{
	struct sim_feed_queue *q = &fd->q[w];

	if (q->cursor) {
		int ret = cursor_next(fd, w, rec, err, errlen);

		if (ret)
			return ret < 0 ? ret : 0;
	}
	while (q->head == NONE) {
		int64_t got = read_one(fd, err, errlen);

		if (got < 0)
			return (int)got;
		if (q->cursor)		/* detached by that read */
			return sim_feed_next(fd, w, rec, err, errlen);
	}
	*rec = fd->pool[q->head].rec;
	node_pop(fd, q);
	if (fd->check_at > fd->window && fd->queued + fd->window / 16 < fd->window)
		fd->check_at = fd->window;
	return 0;
}

void sim_feed_done(struct sim_feed *fd, uint32_t w)
{
	struct sim_feed_queue *q = &fd->q[w];

	while (q->head != NONE)
		node_pop(fd, q);
	if (q->cursor)
		cursor_close(fd, q);
	q->done = true;
}

bool sim_feed_gap(struct sim_feed *fd, uint32_t w, uint64_t op, int64_t *think_ns)
{
	const struct sim_trace_writer *wr = &fd->t->writers[w];
	struct sim_feed_queue *q = &fd->q[w];
	const struct sim_trace_gap *g = &fd->t->gaps[q->gap];

	if (q->gap == wr->first_gap + wr->nr_gaps || g->op != op)
		return false;
	*think_ns = g->think_ns;
	q->gap++;
	return true;
}

void sim_feed_skip(struct sim_feed *fd, uint32_t w, uint64_t n, uint64_t resume_op)
{
	const struct sim_trace_writer *wr = &fd->t->writers[w];
	struct sim_feed_queue *q = &fd->q[w];

	while (n && q->head != NONE) {
		node_pop(fd, q);
		n--;
	}
	q->drop += n;
	while (q->gap < wr->first_gap + wr->nr_gaps && fd->t->gaps[q->gap].op <= resume_op)
		q->gap++;
}
