// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * record.c - recording the workload as a trace (trace/trace.h) for
 * foliofs-sim: -o trace=FILE, .foliofs/trace, foliofsctl trace.
 *
 * A handler calls ffs_trace_begin() when the request arrives and
 * ffs_trace_end() when it is answered (a held write: when the timer
 * thread answers it, so the pause is part of its duration and not of the
 * writer's think time).  Off, that is one relaxed atomic load.  On, a
 * record is encoded into a buffer of the calling thread's own, under that
 * buffer's mutex, which only the thread itself and a stop ever take; a
 * full chunk of records goes on a queue that a writer thread of the
 * recording empties to the file, so no FUSE worker waits for the disk.
 *
 * A recording is one session, numbered by `active`.  An operation is
 * recorded when it began and ended in the same session: ffs_trace_end()
 * compares the number taken at begin with `active` under the buffer's
 * mutex, and a stop clears `active` before it takes every buffer's mutex
 * to drain it, so each record is either drained by that stop or dropped.
 *
 * Records reach the file in chunks, per thread, in the order chunks fill
 * up; one writer's operations may be served by several threads, so the
 * stop sorts the file by time_ns (ties broken by the record's bytes, so
 * the order is the same every time) and the trace is in the order the
 * operations reached the daemon, as the format says.
 *
 * A record names the open it came through (trace_rec.open) by the handle's
 * ffs_file.open_id, which open_finish() (ops.c) takes from a counter of
 * the mount: an id, not a pointer (a freed handle's address comes back
 * for the next open), so that a replay gives each open its own readahead
 * state and a reopen a new one (trace.h says why ids and not open/close
 * records).  The handler copies it into the record before the reply,
 * while the handle is certainly alive.
 *
 * Lock order: ffs_trace.lock, then ffs_trace_buf.lock, then
 * ffs_trace.qlock.
 */
#include "fusefs.h"
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Records per chunk: 28 KiB, one write(2) each. */
#define TRACE_CHUNK_RECS 512

struct trace_chunk {
	struct trace_chunk *next;
	size_t nr;
	unsigned char rec[TRACE_CHUNK_RECS][TRACE_REC_SIZE];
};

/* One thread's buffer; made at its first record, freed when it exits. */
struct ffs_trace_buf {
	struct ffs_trace *tr;		/* immutable */
	struct ffs_trace_buf *next;	/* ffs_trace.lock */
	pthread_mutex_t lock;		/* protects chunk */
	struct trace_chunk *chunk;	/* filling; NULL until the first record */
};

struct ffs_trace {
	uint64_t epoch_ns;		/* CLOCK_MONOTONIC at the mount's start; immutable */
	/* The session recording now, 0: none.  Written under lock. */
	_Atomic uint64_t active;

	pthread_mutex_t lock;		/* protects the fields below, to qlock */
	uint64_t last_gen;		/* the last session's number */
	struct ffs_trace_buf *bufs;	/* every thread's buffer */
	char *path;			/* the file of the session, or NULL */
	int fd;
	pthread_t writer;

	pthread_mutex_t qlock;		/* protects the fields below */
	pthread_cond_t qcond;		/* the writer waits on it */
	struct trace_chunk *queue;	/* full chunks, oldest first */
	struct trace_chunk **qtail;
	bool qstop;			/* write what is queued and exit */
	int werr;			/* first write error of the session, -errno */
	uint64_t nr_written;		/* records in the file */
};

static pthread_key_t trace_buf_key;
static pthread_once_t trace_buf_once = PTHREAD_ONCE_INIT;
static __thread struct ffs_trace_buf *trace_buf;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the writer thread ---- */

/* With qlock held. */
static void queue_chunk(struct ffs_trace *tr, struct trace_chunk *c)
{
	c->next = NULL;
	*tr->qtail = c;
	tr->qtail = &c->next;
	pthread_cond_signal(&tr->qcond);
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void *trace_writer(void *arg)
{
	struct ffs_trace *tr = arg;
	struct trace_chunk *list, *c;
	int fd = tr->fd;	/* set before this thread, changed after its join */

	pthread_setname_np(pthread_self(), "ffs-trace");
	pthread_mutex_lock(&tr->qlock);
	for (;;) {
		while (!tr->queue && !tr->qstop)
			pthread_cond_wait(&tr->qcond, &tr->qlock);
		list = tr->queue;
		tr->queue = NULL;
		tr->qtail = &tr->queue;
		if (!list && tr->qstop)
			break;
		pthread_mutex_unlock(&tr->qlock);
		for (c = list; c; c = list) {
			int ret = tr->werr ? 0 : write_all(fd, c->rec, c->nr * TRACE_REC_SIZE);

			list = c->next;
			pthread_mutex_lock(&tr->qlock);
			if (ret && !tr->werr) {
				tr->werr = ret;
				fuse_log(FUSE_LOG_ERR, "error: trace %s: %s (recording no more)\n",
					 tr->path, strerror(-ret));
			} else if (!tr->werr) {
				tr->nr_written += c->nr;
			}
			pthread_mutex_unlock(&tr->qlock);
			free(c);
		}
		pthread_mutex_lock(&tr->qlock);
	}
	pthread_mutex_unlock(&tr->qlock);
	return NULL;
}

/* ---- per-thread buffers ---- */

/* Thread exit: hand on what the thread recorded, free its buffer. */
static void trace_buf_exit(void *arg)
{
	struct ffs_trace_buf *b = arg, **pp;
	struct ffs_trace *tr = b->tr;

	pthread_mutex_lock(&tr->lock);
	pthread_mutex_lock(&b->lock);
	if (b->chunk && b->chunk->nr) {
		pthread_mutex_lock(&tr->qlock);
		queue_chunk(tr, b->chunk);
		pthread_mutex_unlock(&tr->qlock);
		b->chunk = NULL;
	}
	pthread_mutex_unlock(&b->lock);
	for (pp = &tr->bufs; *pp != b; pp = &(*pp)->next)
		;
	*pp = b->next;
	pthread_mutex_unlock(&tr->lock);
	pthread_mutex_destroy(&b->lock);
	free(b->chunk);
	free(b);
}

static void trace_buf_key_init(void)
{
	if (pthread_key_create(&trace_buf_key, trace_buf_exit))
		abort();
}

static struct ffs_trace_buf *get_buf(struct ffs_trace *tr)
{
	struct ffs_trace_buf *b = trace_buf;

	if (b)
		return b;
	pthread_once(&trace_buf_once, trace_buf_key_init);
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->tr = tr;
	pthread_mutex_init(&b->lock, NULL);
	pthread_mutex_lock(&tr->lock);
	b->next = tr->bufs;
	tr->bufs = b;
	pthread_mutex_unlock(&tr->lock);
	pthread_setspecific(trace_buf_key, b);
	trace_buf = b;
	return b;
}

/* ---- recording ---- */

void ffs_trace_begin(struct ffs_trace *tr, struct ffs_trace_op *op, fuse_req_t req,
		     unsigned int opcode)
{
	op->tr = tr;
	op->stamped = false;
	op->gen = tr ? atomic_load_explicit(&tr->active, memory_order_relaxed) : 0;
	if (!op->gen)
		return;
	op->rec = (struct trace_rec){
		.time_ns = mono_ns() - tr->epoch_ns,
		.pid = req ? (uint32_t)fuse_req_ctx(req)->pid : 0,
		.op = (uint8_t)opcode,
	};
}

void ffs_trace_stamp(struct ffs_trace_op *op)
{
	if (!op->gen)
		return;
	op->rec.dur_ns = mono_ns() - op->tr->epoch_ns - op->rec.time_ns;
	op->stamped = true;
}

void ffs_trace_end(struct ffs_trace_op *op)
{
	struct ffs_trace *tr = op->tr;
	struct ffs_trace_buf *b;
	struct trace_chunk *c;

	if (!op->gen)
		return;
	if (!op->stamped)
		ffs_trace_stamp(op);
	b = get_buf(tr);
	if (!b)
		return;	/* out of memory: the record is lost, the request is not */
	pthread_mutex_lock(&b->lock);
	if (atomic_load(&tr->active) != op->gen)
		goto out_unlock;	/* the session it began in has ended */
	if (!b->chunk) {
		b->chunk = malloc(sizeof(*b->chunk));
		if (!b->chunk)
			goto out_unlock;
		b->chunk->nr = 0;
	}
	c = b->chunk;
	trace_encode_rec(c->rec[c->nr++], &op->rec);
	if (c->nr == TRACE_CHUNK_RECS) {
		pthread_mutex_lock(&tr->qlock);
		queue_chunk(tr, c);
		pthread_mutex_unlock(&tr->qlock);
		b->chunk = NULL;
	}
out_unlock:
	pthread_mutex_unlock(&b->lock);
}

uint32_t ffs_trace_file_id(ino_t ino)
{
	return (uint32_t)((uint64_t)ino ^ ((uint64_t)ino >> 32));
}

/* ---- sessions ---- */

int ffs_trace_init(struct ffs_trace **out)
{
	struct ffs_trace *tr = calloc(1, sizeof(*tr));

	if (!tr)
		return -ENOMEM;
	tr->epoch_ns = mono_ns();
	tr->fd = -1;
	tr->qtail = &tr->queue;
	pthread_mutex_init(&tr->lock, NULL);
	pthread_mutex_init(&tr->qlock, NULL);
	pthread_cond_init(&tr->qcond, NULL);
	*out = tr;
	return 0;
}

int ffs_trace_start(struct ffs_trace *tr, const char *path, char *err, size_t errlen)
{
	unsigned char h[TRACE_HDR_SIZE];
	int ret = 0;

	if (path[0] != '/') {
		snprintf(err, errlen, "start %s: the file must be an absolute path", path);
		return -EINVAL;
	}
	pthread_mutex_lock(&tr->lock);
	if (tr->path) {
		snprintf(err, errlen, "start %s: already recording to %s", path, tr->path);
		ret = -EBUSY;
		goto out_unlock;
	}
	tr->path = strdup(path);
	if (!tr->path) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	ret = ffs_creds_daemon_umask();
	if (ret)
		goto out_err;
	tr->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (tr->fd < 0) {
		ret = -errno;
		goto out_err;
	}
	trace_encode_header(h);
	ret = write_all(tr->fd, h, sizeof(h));
	if (ret)
		goto out_err;
	tr->qstop = false;
	tr->werr = 0;
	tr->nr_written = 0;
	ret = -pthread_create(&tr->writer, NULL, trace_writer, tr);
	if (ret)
		goto out_err;
	atomic_store(&tr->active, ++tr->last_gen);
	goto out_unlock;

out_err:
	snprintf(err, errlen, "start %s: %s", path, strerror(-ret));
	if (tr->fd >= 0)
		close(tr->fd);
	tr->fd = -1;
	free(tr->path);
	tr->path = NULL;
out_unlock:
	pthread_mutex_unlock(&tr->lock);
	return ret;
}

static int cmp_rec(const void *a, const void *b)
{
	uint64_t ta = trace_rec_time(a), tb = trace_rec_time(b);

	if (ta != tb)
		return ta < tb ? -1 : 1;
	return memcmp(a, b, TRACE_REC_SIZE);
}

/* Put the records of the file in time order (see the header): 0 or -errno. */
static int sort_file(int fd, uint64_t nr)
{
	size_t len = (size_t)nr * TRACE_REC_SIZE;
	unsigned char *buf;
	bool sorted = true;
	ssize_t n;
	int ret = 0;

	if (nr < 2)
		return 0;
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	n = pread(fd, buf, len, TRACE_HDR_SIZE);
	if (n != (ssize_t)len) {
		ret = n < 0 ? -errno : -EIO;
		goto out;
	}
	for (uint64_t i = 1; i < nr && sorted; i++)
		sorted = cmp_rec(buf + (i - 1) * TRACE_REC_SIZE,
				 buf + i * TRACE_REC_SIZE) <= 0;
	if (!sorted) {
		qsort(buf, (size_t)nr, TRACE_REC_SIZE, cmp_rec);
		n = pwrite(fd, buf, len, TRACE_HDR_SIZE);
		if (n != (ssize_t)len)
			ret = n < 0 ? -errno : -EIO;
	}
out:
	free(buf);
	return ret;
}

int ffs_trace_stop(struct ffs_trace *tr, char *err, size_t errlen)
{
	struct ffs_trace_buf *b;
	int ret;

	pthread_mutex_lock(&tr->lock);
	if (!tr->path) {
		pthread_mutex_unlock(&tr->lock);
		snprintf(err, errlen, "stop: not recording");
		return -EINVAL;
	}
	atomic_store(&tr->active, 0);
	pthread_mutex_lock(&tr->qlock);
	for (b = tr->bufs; b; b = b->next) {
		pthread_mutex_lock(&b->lock);
		if (b->chunk && b->chunk->nr) {
			queue_chunk(tr, b->chunk);
			b->chunk = NULL;
		}
		pthread_mutex_unlock(&b->lock);
	}
	tr->qstop = true;
	pthread_cond_signal(&tr->qcond);
	pthread_mutex_unlock(&tr->qlock);
	pthread_join(tr->writer, NULL);
	ret = tr->werr ? tr->werr : sort_file(tr->fd, tr->nr_written);
	if (close(tr->fd) < 0 && !ret)
		ret = -errno;
	if (ret)
		snprintf(err, errlen, "stop: trace %s: %s", tr->path, strerror(-ret));
	tr->fd = -1;
	free(tr->path);
	tr->path = NULL;
	pthread_mutex_unlock(&tr->lock);
	return ret;
}

int ffs_trace_state(struct ffs_trace *tr, char *buf, size_t len)
{
	int n;

	pthread_mutex_lock(&tr->lock);
	if (tr->path)
		n = snprintf(buf, len, "recording %s\n", tr->path);
	else
		n = snprintf(buf, len, "off\n");
	pthread_mutex_unlock(&tr->lock);
	return n < 0 ? 0 : ((size_t)n < len ? n : (int)len - 1);
}

int ffs_trace_destroy(struct ffs_trace *tr)
{
	char err[FFS_ERRLEN];
	int ret = 0;

	if (!tr)
		return 0;
	if (tr->path) {
		ret = ffs_trace_stop(tr, err, sizeof(err));
		if (ret)
			fuse_log(FUSE_LOG_ERR, "error: %s\n", err);
	}
	/* Buffers of threads that are still alive (none serve any more). */
	while (tr->bufs) {
		struct ffs_trace_buf *b = tr->bufs;

		tr->bufs = b->next;
		pthread_mutex_destroy(&b->lock);
		free(b->chunk);
		free(b);
	}
	pthread_cond_destroy(&tr->qcond);
	pthread_mutex_destroy(&tr->qlock);
	pthread_mutex_destroy(&tr->lock);
	free(tr);
	return ret;
}
