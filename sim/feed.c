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
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The first pass's state: the trace being made, what is gathered, and where it is. */
struct first_pass {
	struct sim_sink sink;		/* for a generator's records */
	struct sim_trace *t;
	struct scan sc;
	uint64_t next;			/* the index of the record scanned next */
	char *err;
	size_t errlen;
};

/* Record @r, the next of the trace, into the first pass: 0 or -errno with @err. */
static int scan_record(struct first_pass *fp, const struct trace_rec *r)
{
	struct sim_trace *t = fp->t;
	int ret;

	if (!fp->next)
		t->first_ns = r->time_ns;
	t->last_ns = r->time_ns;
	fp->next++;
	ret = scan_writer(t, &fp->sc, r);
	if (ret == -EINVAL) {
		snprintf(fp->err, fp->errlen, "%s: record %llu: a pace record after its writer's "
			 "first deadline record (pid %u)", t->path,
			 (unsigned long long)(fp->next - 1), r->pid);
		return ret;
	}
	if (ret || scan_file(t, &fp->sc, r)) {
		snprintf(fp->err, fp->errlen, "%s: out of memory for the trace's writers and files",
			 t->path);
		return -ENOMEM;
	}
	return 0;
}

static int first_pass_put(struct sim_sink *sink, const struct trace_rec *rec)
{
	return scan_record((struct first_pass *)sink, rec);
}

/* A trace with nothing gathered yet, named @path: 0, or -ENOMEM with @err. */
static int first_pass_begin(struct first_pass *fp, const char *path, char *err, size_t errlen)
{
	struct sim_trace *t = calloc(1, sizeof(*t));

	*fp = (struct first_pass){ .t = t, .err = err, .errlen = errlen };
	if (!t || !(t->path = strdup(path)) || map_init(&t->pid_map, 0) ||
	    map_init(&t->file_map, 0)) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	return 0;
}

/* The first pass is over with @ret: on success the tables sorted into the trace, *@tp. */
static int first_pass_end(struct first_pass *fp, int ret, struct sim_trace **tp)
{
	struct scan *sc = &fp->sc;

	if (!ret && scan_finish(fp->t, sc)) {
		snprintf(fp->err, fp->errlen, "%s: out of memory for the trace's writers and files",
			 fp->t->path);
		ret = -ENOMEM;
	}
	free(sc->w);
	free(sc->w_last);
	free(sc->f);
	free(sc->g);
	free(sc->g_w);
	free(sc->m);
	free(sc->m_w);
	free(sc->w_mark);
	free(sc->w_step);
	if (ret) {
		sim_trace_close(fp->t);
		return ret;
	}
	fp->t->nr = fp->next;
	*tp = fp->t;
	return 0;
}

int sim_trace_open(const char *path, struct sim_trace **tp, char *err, size_t errlen)
{
	struct first_pass fp;
	struct trace_reader rd;
	struct trace_rec r;
	int ret;

	*tp = NULL;
	ret = first_pass_begin(&fp, path, err, errlen);
	if (!ret)
		ret = trace_reader_open(&rd, path, err, errlen);
	if (ret)
		return first_pass_end(&fp, ret, tp);
	while ((ret = trace_reader_next(&rd, &r, err, errlen)) == 1 &&
	       !(ret = scan_record(&fp, &r)))
		;
	trace_reader_close(&rd);
	return first_pass_end(&fp, ret, tp);
}

int sim_trace_gen(const char *spec, FILE *report, const char *prefix, struct sim_trace **tp,
		  char *err, size_t errlen)
{
	struct first_pass fp;
	char *name = NULL;
	int ret;

	*tp = NULL;
	if (asprintf(&name, "gen:%s", spec) < 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = first_pass_begin(&fp, name, err, errlen);
	free(name);
	if (!ret && (!(fp.t->gen_spec = strdup(spec)) || !(fp.t->warm = sim_gen_warm_new()))) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
	}
	if (ret)
		return first_pass_end(&fp, ret, tp);
	fp.sink = (struct sim_sink){ .put = first_pass_put, .report = report,
				     .report_prefix = prefix, .warm_save = fp.t->warm };
	ret = sim_gen_run(spec, &fp.sink, err, errlen);
	return first_pass_end(&fp, ret, tp);
}

void sim_trace_close(struct sim_trace *t)
{
	if (!t)
		return;
	free(t->path);
	free(t->gen_spec);
	sim_gen_warm_free(t->warm);
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

/*
 * A record in a queue: one header byte (the op, and whether dur_ns and
 * flags follow), then varints (7 bits a byte, low first): time_ns as the
 * difference from the chunk's record before (zigzag: a trace's time may
 * step back), [dur_ns], file, [flags], offset, length, and open as the
 * difference from the record before (zigzag).  The pid is the writer's.
 * The first record of a chunk is relative to zero.  pgbench's records
 * take about 14 bytes.
 */
#define REC_DUR 0x10
#define REC_FLAGS 0x20
#define REC_MAX_BYTES (1 + 8 * 10)

static unsigned char *put_varint(unsigned char *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	*p++ = (unsigned char)v;
	return p;
}

static const unsigned char *get_varint(const unsigned char *p, uint64_t *v)
{
	uint64_t x = 0;
	unsigned int shift = 0;

	while (*p & 0x80) {
		x |= (uint64_t)(*p++ & 0x7f) << shift;
		shift += 7;
	}
	*v = x | (uint64_t)*p++ << shift;
	return p;
}

static uint64_t zigzag(uint64_t to, uint64_t from)
{
	int64_t d = (int64_t)(to - from);

	return ((uint64_t)d << 1) ^ (uint64_t)(d >> 63);
}

static uint64_t unzigzag(uint64_t from, uint64_t z)
{
	return from + ((z >> 1) ^ (0 - (z & 1)));
}

/* @r after the record whose time and open are *@time, *@open: the bytes it took. */
static size_t enc_rec(unsigned char *buf, const struct trace_rec *r, uint64_t *time,
		      uint64_t *open)
{
	unsigned char *p = buf + 1;

	buf[0] = (unsigned char)(r->op | (r->dur_ns ? REC_DUR : 0) | (r->flags ? REC_FLAGS : 0));
	p = put_varint(p, zigzag(r->time_ns, *time));
	if (r->dur_ns)
		p = put_varint(p, r->dur_ns);
	p = put_varint(p, r->file);
	if (r->flags)
		p = put_varint(p, r->flags);
	p = put_varint(p, r->offset);
	p = put_varint(p, r->length);
	p = put_varint(p, zigzag(r->open, *open));
	*time = r->time_ns;
	*open = r->open;
	return (size_t)(p - buf);
}

static size_t dec_rec(const unsigned char *buf, struct trace_rec *r, uint64_t *time,
		      uint64_t *open)
{
	const unsigned char *p = buf + 1;
	uint64_t v;

	r->op = buf[0] & 0x0f;
	p = get_varint(p, &v);
	r->time_ns = *time = unzigzag(*time, v);
	r->dur_ns = 0;
	if (buf[0] & REC_DUR)
		p = get_varint(p, &r->dur_ns);
	p = get_varint(p, &v);
	r->file = (uint32_t)v;
	r->flags = 0;
	if (buf[0] & REC_FLAGS) {
		p = get_varint(p, &v);
		r->flags = (uint32_t)v;
	}
	p = get_varint(p, &r->offset);
	p = get_varint(p, &r->length);
	p = get_varint(p, &v);
	r->open = *open = unzigzag(*open, v);
	return (size_t)(p - buf);
}

int sim_feed_open(struct sim_feed *fd, const struct sim_trace *t, uint64_t window,
		  char *err, size_t errlen)
{
	int ret;

	*fd = (struct sim_feed){ .t = t, .free_chunk = NONE, .window = window, .spill_fd = -1,
				 .check_at = window ? window : UINT64_MAX, .rd = { .fd = -1 } };
	fd->q = malloc((t->nr_writers + 1) * sizeof(*fd->q));
	if (!fd->q) {
		snprintf(err, errlen, "%s: out of memory", t->path);
		return -ENOMEM;
	}
	for (size_t w = 0; w < t->nr_writers; w++)
		fd->q[w] = (struct sim_feed_queue){
			.head = NONE, .tail = NONE, .gap = t->writers[w].first_gap,
			.gap_end = t->writers[w].first_gap + t->writers[w].nr_gaps,
			.pid = t->writers[w].pid,
		};
	if (t->gen_spec)
		ret = sim_gen_stream_open(t->gen_spec, t->warm, &fd->gen, err, errlen);
	else
		ret = trace_reader_open(&fd->rd, t->path, err, errlen);
	if (ret) {
		sim_feed_close(fd);
		return ret;
	}
	if (!t->gen_spec && fd->rd.nr != t->nr) {
		snprintf(err, errlen, "%s: the trace changed since it was read (%llu records, "
			 "then %llu)", t->path, (unsigned long long)t->nr,
			 (unsigned long long)fd->rd.nr);
		sim_feed_close(fd);
		return -EIO;
	}
	return 0;
}

void sim_feed_close(struct sim_feed *fd)
{
	if (fd->gen)
		sim_gen_stream_close(fd->gen);
	trace_reader_close(&fd->rd);
	for (uint32_t i = 0; i < fd->nr_chunks; i++)
		free(fd->chunks[i].buf);
	for (uint32_t i = 0; i < fd->nr_bufs; i++)
		free(fd->bufs[i]);
	if (fd->spill_fd >= 0)
		close(fd->spill_fd);
	free(fd->chunks);
	free(fd->bufs);
	free(fd->free_slots);
	free(fd->q);
	fd->chunks = NULL;
	fd->bufs = NULL;
	fd->free_slots = NULL;
	fd->q = NULL;
	fd->gen = NULL;
	fd->spill_fd = -1;
	fd->nr_chunks = fd->nr_bufs = 0;
}

/* ---- chunks, their buffers and the spill file ---- */

/* A chunk buffer, reused or new: NULL when out of memory. */
static unsigned char *buf_get(struct sim_feed *fd)
{
	return fd->nr_bufs ? fd->bufs[--fd->nr_bufs] : malloc(SIM_FEED_CHUNK);
}

/* @buf is free: kept for reuse (there is always room: see chunk_new()). */
static void buf_put(struct sim_feed *fd, unsigned char *buf)
{
	fd->bufs[fd->nr_bufs++] = buf;
}

/* A chunk in memory, empty, at the end of writer @q's queue: 0 or -ENOMEM. */
static int chunk_new(struct sim_feed *fd, struct sim_feed_queue *q)
{
	struct sim_feed_chunk *c;
	unsigned char *buf;
	uint32_t n = fd->free_chunk;

	if (n == NONE) {
		if (fd->nr_chunks == fd->cap_chunks) {
			uint32_t cap = fd->cap_chunks ? 2 * fd->cap_chunks : 1024;
			struct sim_feed_chunk *p;
			unsigned char **b;

			if (cap >= NONE)
				return -ENOMEM;
			p = realloc(fd->chunks, (size_t)cap * sizeof(*p));
			if (!p)
				return -ENOMEM;
			fd->chunks = p;
			/* room for every buffer a chunk may give back */
			b = realloc(fd->bufs, (size_t)cap * sizeof(*b));
			if (!b)
				return -ENOMEM;
			fd->bufs = b;
			fd->cap_bufs = fd->cap_chunks = cap;
		}
		n = fd->nr_chunks;
		fd->chunks[n].buf = NULL;
		fd->nr_chunks++;
	} else {
		fd->free_chunk = fd->chunks[n].next;
	}
	buf = buf_get(fd);
	if (!buf) {
		fd->chunks[n].next = fd->free_chunk;
		fd->free_chunk = n;
		return -ENOMEM;
	}
	c = &fd->chunks[n];
	*c = (struct sim_feed_chunk){ .next = NONE, .buf = buf };
	if (q->tail == NONE)
		q->head = n;
	else
		fd->chunks[q->tail].next = n;
	q->tail = n;
	q->enc_time = q->enc_open = 0;
	return 0;
}

/* The spill file's slot @slot is free. */
static void slot_put(struct sim_feed *fd, uint32_t slot)
{
	fd->free_slots[fd->nr_free_slots++] = slot;
	fd->spilled_chunks--;
}

/* The head chunk of @q, taken or dropped whole, goes back to the free lists. */
static void chunk_pop(struct sim_feed *fd, struct sim_feed_queue *q)
{
	uint32_t h = q->head;
	struct sim_feed_chunk *c = &fd->chunks[h];

	q->nr -= c->nr;
	fd->queued -= c->nr;
	if (c->buf) {
		fd->mem -= c->nr;
		buf_put(fd, c->buf);
		c->buf = NULL;
	} else {
		slot_put(fd, c->slot);
	}
	q->head = c->next;
	if (q->head == NONE)
		q->tail = NONE;
	c->next = fd->free_chunk;
	fd->free_chunk = h;
}

/* "the spill file: ..." in @err: -errno. */
static int spill_error(int ret, char *err, size_t errlen)
{
	snprintf(err, errlen, "the feed's spill file: %s", strerror(-ret));
	return ret;
}

/* The spill file, made at the first spill: unlinked, in $TMPDIR or /var/tmp. */
static int spill_file(struct sim_feed *fd, char *err, size_t errlen)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];
	int ret;

	if (fd->spill_fd >= 0)
		return 0;
	if (!dir || !*dir)
		dir = "/var/tmp";
	fd->spill_fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd->spill_fd >= 0)
		return 0;
	snprintf(path, sizeof(path), "%s/foliofs-sim-spill.XXXXXX", dir);
	fd->spill_fd = mkstemp(path);
	if (fd->spill_fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "the feed's spill file in %s: %s", dir, strerror(-ret));
		return ret;
	}
	unlink(path);
	return 0;
}

/* Chunk @c (in memory, whole) into a slot of the spill file: 0 or -errno. */
static int chunk_spill(struct sim_feed *fd, struct sim_feed_chunk *c, char *err, size_t errlen)
{
	uint32_t slot;
	int ret = spill_file(fd, err, errlen);

	if (ret)
		return ret;
	if (fd->nr_free_slots) {
		slot = fd->free_slots[--fd->nr_free_slots];
	} else {
		if (fd->nr_slots == fd->cap_free_slots) {
			uint32_t cap = fd->cap_free_slots ? 2 * fd->cap_free_slots : 1024;
			uint32_t *p = realloc(fd->free_slots, (size_t)cap * sizeof(*p));

			if (!p || cap >= NONE)
				return spill_error(-ENOMEM, err, errlen);
			fd->free_slots = p;
			fd->cap_free_slots = cap;
		}
		slot = fd->nr_slots++;
	}
	if (pwrite(fd->spill_fd, c->buf, c->len, (off_t)slot * SIM_FEED_CHUNK) != (ssize_t)c->len) {
		ret = errno ? -errno : -EIO;
		fd->free_slots[fd->nr_free_slots++] = slot;
		return spill_error(ret, err, errlen);
	}
	buf_put(fd, c->buf);
	c->buf = NULL;
	c->slot = slot;
	fd->mem -= c->nr;
	fd->spilled += c->nr;
	if (++fd->spilled_chunks > fd->peak_spilled_chunks)
		fd->peak_spilled_chunks = fd->spilled_chunks;
	return 0;
}

/* Spilled chunk @c back into memory: 0 or -errno. */
static int chunk_load(struct sim_feed *fd, struct sim_feed_chunk *c, char *err, size_t errlen)
{
	unsigned char *buf = buf_get(fd);
	int ret;

	if (!buf)
		return spill_error(-ENOMEM, err, errlen);
	if (pread(fd->spill_fd, buf, c->len, (off_t)c->slot * SIM_FEED_CHUNK) != (ssize_t)c->len) {
		ret = errno ? -errno : -EIO;
		buf_put(fd, buf);
		return spill_error(ret, err, errlen);
	}
	slot_put(fd, c->slot);
	c->buf = buf;
	fd->mem += c->nr;
	if (fd->mem > fd->peak_mem)
		fd->peak_mem = fd->mem;
	return 0;
}

/*
 * The records in memory reached check_at: whole chunks to the spill
 * file, writer after writer from where the last round stopped, until
 * half the window is left.  A writer's last chunk (being written) and
 * one being read stay, so that may not be reached: the next round is
 * then a sixteenth of the window later (check_at), not at every record.
 * 0 or -errno.
 */
static int spill_some(struct sim_feed *fd, char *err, size_t errlen)
{
	uint32_t nr_w = (uint32_t)fd->t->nr_writers;

	for (uint32_t k = 0; k < nr_w && fd->mem > fd->window / 2; k++) {
		struct sim_feed_queue *q = &fd->q[fd->spill_at];

		for (uint32_t c = q->head; c != q->tail && fd->mem > fd->window / 2;
		     c = fd->chunks[c].next) {
			struct sim_feed_chunk *ch = &fd->chunks[c];
			int ret;

			if (!ch->buf || ch->pos)
				continue;
			ret = chunk_spill(fd, ch, err, errlen);
			if (ret)
				return ret;
		}
		fd->spill_at = (fd->spill_at + 1) % nr_w;
	}
	fd->check_at = fd->mem + fd->window / 16;
	if (fd->check_at < fd->window)
		fd->check_at = fd->window;
	return 0;
}

/* Record @r to the end of writer @q's queue: 0 or -errno. */
static int enqueue(struct sim_feed *fd, struct sim_feed_queue *q, const struct trace_rec *r,
		   char *err, size_t errlen)
{
	struct sim_feed_chunk *c = q->tail == NONE ? NULL : &fd->chunks[q->tail];

	if (!c || c->len + REC_MAX_BYTES > SIM_FEED_CHUNK) {
		if (chunk_new(fd, q)) {
			snprintf(err, errlen, "%s: out of memory for %llu records read ahead",
				 fd->t->path, (unsigned long long)fd->queued);
			return -ENOMEM;
		}
		c = &fd->chunks[q->tail];
	}
	c->len += (uint32_t)enc_rec(c->buf + c->len, r, &q->enc_time, &q->enc_open);
	c->nr++;
	q->nr++;
	if (++fd->queued > fd->peak_queued)
		fd->peak_queued = fd->queued;
	if (++fd->mem > fd->peak_mem)
		fd->peak_mem = fd->mem;
	if (fd->mem >= fd->check_at)
		return spill_some(fd, err, errlen);
	return 0;
}

/*
 * The head record of @q's queue (not empty) into *@r (the pid is the
 * writer's, set by the caller): 0 or -errno.
 */
static int dequeue(struct sim_feed *fd, struct sim_feed_queue *q, struct trace_rec *r,
		   char *err, size_t errlen)
{
	struct sim_feed_chunk *c = &fd->chunks[q->head];

	if (!c->buf) {
		int ret = chunk_load(fd, c, err, errlen);

		if (ret)
			return ret;
	}
	if (!c->pos)
		q->dec_time = q->dec_open = 0;
	c->pos += (uint32_t)dec_rec(c->buf + c->pos, r, &q->dec_time, &q->dec_open);
	c->nr--;
	q->nr--;
	fd->queued--;
	fd->mem--;
	if (!c->nr)
		chunk_pop(fd, q);
	if (fd->check_at > fd->window && fd->mem + fd->window / 16 < fd->window)
		fd->check_at = fd->window;
	return 0;
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

/* The next record of the forward read into its writer's queue: 0, or -errno. */
static int read_one(struct sim_feed *fd, char *err, size_t errlen)
{
	struct sim_feed_queue *q;
	struct trace_rec r;
	uint64_t index = fd->next;
	uint32_t w;
	int ret = fd->gen ? sim_gen_stream_next(fd->gen, &r, err, errlen)
			  : trace_reader_next(&fd->rd, &r, err, errlen);

	if (ret <= 0)
		return ret ? ret : short_trace(fd, err, errlen);
	fd->next++;
	ret = convert(fd, &r, index, &w, err, errlen);
	if (ret)
		return ret;
	q = &fd->q[w];
	if (q->done)		/* it has ended */
		return 0;
	if (q->drop) {		/* skipped (sim_feed_skip()): not kept */
		q->drop--;
		return 0;
	}
	return enqueue(fd, q, &r, err, errlen);
}

int sim_feed_next(struct sim_feed *fd, uint32_t w, struct trace_rec *rec, char *err, size_t errlen)
{
	struct sim_feed_queue *q = &fd->q[w];
	int ret;

	while (q->head == NONE) {
		ret = read_one(fd, err, errlen);
		if (ret)
			return ret;
	}
	ret = dequeue(fd, q, rec, err, errlen);
	rec->pid = q->pid;
	return ret;
}

void sim_feed_done(struct sim_feed *fd, uint32_t w)
{
	struct sim_feed_queue *q = &fd->q[w];

	while (q->head != NONE)
		chunk_pop(fd, q);
	q->done = true;
}

bool sim_feed_gap(struct sim_feed *fd, uint32_t w, uint64_t op, int64_t *think_ns)
{
	struct sim_feed_queue *q = &fd->q[w];
	const struct sim_trace_gap *g = &fd->t->gaps[q->gap];

	if (q->gap == q->gap_end || g->op != op)
		return false;
	*think_ns = g->think_ns;
	q->gap++;
	return true;
}

int sim_feed_skip(struct sim_feed *fd, uint32_t w, uint64_t n, uint64_t resume_op,
		  char *err, size_t errlen)
{
	struct sim_feed_queue *q = &fd->q[w];
	struct trace_rec r;

	while (q->gap < q->gap_end && fd->t->gaps[q->gap].op <= resume_op)
		q->gap++;
	/* whole chunks undecoded, then one by one */
	while (n && q->head != NONE && fd->chunks[q->head].nr <= n) {
		n -= fd->chunks[q->head].nr;
		chunk_pop(fd, q);
	}
	while (n && q->head != NONE) {
		int ret = dequeue(fd, q, &r, err, errlen);

		if (ret)
			return ret;
		n--;
	}
	q->drop += n;
	return 0;
}
