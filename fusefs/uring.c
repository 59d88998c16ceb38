// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * uring.c - FUSE requests served through io_uring (-o uring).
 *
 * Linux 6.14+ (CONFIG_FUSE_IO_URING, with the fuse module parameter
 * enable_uring set) can hand requests to the daemon through io_uring
 * commands on /dev/fuse instead of read(2)/writev(2).  libfuse 3.14 has no
 * such transport, so this file is one, kept under libfuse's normal
 * request processing:
 *
 *  - INIT still travels over /dev/fuse.  channel.c adds FUSE_OVER_IO_URING
 *    to the reply when the kernel offered it, and calls ffs_uring_start()
 *    once the reply is written (the kernel refuses ring commands before).
 *  - The kernel has one queue per possible CPU and sends a request to the
 *    queue of the CPU its caller runs on.  It uses the ring only once every
 *    queue has an entry registered; until then, and always for FORGET and
 *    INTERRUPT, requests keep coming over /dev/fuse, served by libfuse's
 *    loop as before.
 *  - An entry is a pair of buffers the kernel writes a request into: the
 *    header buffer (fuse_in_header, the opcode's fixed argument, and the
 *    payload length) and the payload (names, write data).  The payload sits
 *    right after a spare page, so the fixed parts are copied in front of it
 *    and libfuse gets the request as one contiguous buffer, as read(2)
 *    would have given it, without copying write data
 *    (fuse_session_process_buf).
 *  - Every reply still goes through channel.c's writev hook.  When its
 *    unique id is that of a request an entry holds, ffs_uring_send() copies
 *    it into the entry and submits COMMIT_AND_FETCH, which hands the reply
 *    to the kernel and gives the entry back for the next request.  Any
 *    other message (notifications, replies to /dev/fuse requests) is
 *    written to /dev/fuse.  So held write replies (defer.c) leave from the
 *    timer thread through their entry, like any other reply.
 *
 * Threads.  Each queue is served by UR_THREADS_TOTAL / nqueues threads
 * (at least UR_MIN_THREADS, at most UR_MAX_THREADS), and each thread owns
 * one io_uring and exactly one entry of its queue (more below).  Who submits matters to
 * the kernel: it finishes delivering a request to an entry in the context
 * of the thread that submitted the entry's last command (task work).  Here
 * that thread is the one waiting on the ring the completion goes to, so a
 * request wakes one thread, which serves it and then commits the reply and
 * waits for the next request in one io_uring_enter.  An entry is in the
 * kernel's hands only while its thread is free to serve it, so a handler
 * that blocks (fsync waiting for writeback, a cold read) holds only its
 * own thread and entry and the queue's other threads keep serving, as
 * libfuse's loop does up to max_threads; libfuse master instead serves a
 * queue on one thread, where one blocking handler stops its queue.  (An
 * earlier design shared one ring among a queue's threads: each request then
 * woke the entry's submitter to run the task work, the leader waiting on
 * the ring, and a thread to lead next, and cost twice the context switches
 * and 1.8x the daemon CPU of /dev/fuse.)
 *
 * A reply from a ring thread to its own request is queued on its ring and
 * submitted with the wait for the next request, or before a message to
 * /dev/fuse (a notification must not overtake the reply it follows).  A
 * reply from any other thread (held write replies leave from defer.c's
 * timer thread) is handed to the entry's thread, woken through an eventfd
 * whose read it keeps queued, which submits the commit: a thread that
 * exits cancels the commands it submitted, failing a request being
 * delivered with ECANCELED, so only ring threads submit, and they live
 * until the process exits (ffs_uring_stop() parks them).  While a reply is
 * held its thread has no entry and serves nothing, so the queue starts
 * another thread with an entry whenever fewer than its starting number are
 * free of held replies, up to UR_QUEUE_MAX_THREADS: a held write pauses its
 * writer and nothing else, as over /dev/fuse.  The kernel cannot take an
 * entry back, so a queue keeps the threads of its busiest moment.  A queue
 * with that many threads and only one free holds no more replies
 * (ffs_uring_may_hold(): the write is answered at once, unpaused), so
 * hundreds of paused writers never leave a queue with nobody to serve
 * the requests of everybody else.
 *
 * CPUs.  Queue N is the queue of CPU N: the kernel puts a request on the
 * queue of the CPU its caller runs on, and that caller then sleeps until
 * the reply.  So each queue's threads run on that CPU (uring_pin=on, the
 * default, as libfuse's own transport does): a request is served where
 * it was made, in caches that still hold it, and its wake-up needs no
 * other CPU.  A CPU the daemon may not run on (taskset, cpusets) is left
 * to the scheduler.  Side by side on 2 CPUs (README, Results), pgbench
 * over the ring ran 9% faster than with uring_pin=off.
 */
#include "fusefs.h"

#include <errno.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

/* The kernel interface (include/uapi/linux/fuse.h, protocol 7.42). */
#define UR_CMD_REGISTER		1u	/* give the kernel an entry */
#define UR_CMD_COMMIT_AND_FETCH	2u	/* reply, and take the next request */
#define UR_IN_OUT_SIZE		128	/* room for fuse_in_header/fuse_out_header */
#define UR_OP_SIZE		128	/* room for the opcode's fixed argument */

struct ur_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;	/* the request's unique id, echoed on commit */
	uint32_t payload_sz;	/* bytes of the payload used, either way */
	uint32_t padding;
	uint64_t reserved;
};

struct ur_req_header {
	char in_out[UR_IN_OUT_SIZE];
	char op_in[UR_OP_SIZE];
	struct ur_ent_in_out ent_in_out;
};

/* The command area of a 128-byte SQE. */
struct ur_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

#define UR_THREADS_TOTAL	16	/* spread over the queues... */
#define UR_MIN_THREADS		2	/* ...but never fewer per queue */
#define UR_MAX_THREADS		8	/* nor more */
#define UR_QUEUE_MAX_THREADS	64	/* with those started for held replies */

struct ur_queue;

/*
 * One serving thread, with its own ring and its one entry.  The entry's
 * buffers are one mapping: the header page, a spare page whose end
 * receives the fixed parts of a request, and the payload.
 */
struct ur_thread {
	struct ur_queue *q;		/* immutable */
	/*
	 * The thread's alone (SQ and CQ) until it parks; then the caller of
	 * ffs_uring_stop(), under ur_queue.lock.
	 */
	struct io_uring ring;
	int evfd;			/* immutable: wakes the thread (hand-off, stop) */
	uint64_t evbuf;			/* the eventfd read's target */
	struct ur_req_header *hdr;	/* immutable; the kernel writes it */
	char *payload;			/* immutable; ur_ring.payload_size bytes */
	struct iovec iov[2];		/* immutable: what REGISTER names */
	/*
	 * The unique id of the request the entry holds, from the CQE until
	 * a reply claims it (compare-and-swap to 0: exactly one reply per
	 * request).  0 while the kernel has the entry.
	 */
	_Atomic uint64_t unique;
	/*
	 * The entry's last command and its commit id, to submit again if the
	 * kernel answers EAGAIN/EINTR; the submitter's.
	 */
	uint32_t cmd;
	uint64_t commit_id;
	/*
	 * A reply handed off by another thread waits to be committed, for
	 * request @handoff_id; under ur_queue.lock.
	 */
	bool handoff;
	uint64_t handoff_id;
	/* The handler returned without the reply (held); under ur_queue.lock. */
	bool held;
	/*
	 * The handler was let hold its reply (ffs_uring_may_hold()) and has
	 * not returned yet; under ur_queue.lock.
	 */
	bool reserved;
	pthread_t tid;			/* immutable after start */
};

/*
 * One kernel queue and its threads.  @lock guards the hand-offs, the held
 * counts, the growth and the stop; it is a leaf: nothing is locked or
 * replied under it, and a reply may take it from any thread (no lock of
 * fusefs is held across a reply).
 */
struct ur_queue {
	struct ur_ring *ur;		/* immutable */
	unsigned int qid;		/* immutable */
	pthread_mutex_t lock;
	bool stopping;			/* under lock: serve no more */
	/*
	 * Threads that stopped serving and wait (on @parked_cond, under lock)
	 * for @release, which only a failed start sets: see ffs_uring_stop().
	 */
	unsigned int parked;
	bool release;
	pthread_cond_t parked_cond;
	/*
	 * Slots of @threads set up, and threads running; both grow under
	 * @lock (ur_grow_locked()), and a slot is set up before @nthreads counts it.
	 */
	_Atomic unsigned int nthreads;
	unsigned int started;
	unsigned int nheld;		/* threads with ur_thread.held; under lock */
	unsigned int nreserved;		/* threads with ur_thread.reserved; under lock */
	struct ur_thread *threads;	/* immutable array of UR_QUEUE_MAX_THREADS */
};

struct ur_ring {
	struct fuse_session *se;	/* immutable */
	size_t payload_size;		/* immutable */
	size_t map_size;		/* immutable: an entry's mapping */
	int fuse_fd;			/* immutable: /dev/fuse */
	unsigned int nqueues;		/* immutable */
	unsigned int threads_per_queue;	/* immutable */
	/*
	 * Immutable: the CPUs whose queue's threads run on them, those the
	 * daemon could run on at the start (none with uring_pin=off).
	 */
	cpu_set_t pin_cpus;
	struct ur_queue *queues;	/* immutable array */
};

/* The ring, or NULL: set at start before any ring request; cleared only if the start fails. */
static struct ur_ring *_Atomic ur_active;
static _Atomic uint64_t ur_requests;
static _Atomic unsigned int ur_nthreads;	/* running ring threads */
/* A refused entry was logged (once: every entry would be). */
static _Atomic bool ur_refused;
/* uring_pin=: set before the start (ffs_uring_set_pin()). */
static bool ur_pin = true;
/* This thread, when it is a ring thread (it may submit: see the top). */
static __thread struct ur_thread *ur_self;
/* A commit queued on ur_self's ring and not yet submitted. */
static __thread bool ur_unsubmitted;
static size_t ur_page;

uint64_t ffs_uring_requests(void)
{
	return atomic_load_explicit(&ur_requests, memory_order_relaxed);
}

unsigned int ffs_uring_threads(void)
{
	return atomic_load_explicit(&ur_nthreads, memory_order_relaxed);
}

long ffs_uring_fds(void)
{
	/* A thread's ring and eventfd; a thread being set up is counted late. */
	return 2L * atomic_load_explicit(&ur_nthreads, memory_order_relaxed);
}

/* Queue @cmd for @t's entry on @t's ring.  0, or -EBUSY when the SQ is full (it cannot be). */
static int ur_prep_cmd(struct ur_thread *t, uint32_t cmd, uint64_t commit_id)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
	struct ur_cmd_req *req;

	if (!sqe)
		return -EBUSY;
	req = (struct ur_cmd_req *)sqe->cmd;
	memset(sqe, 0, 2 * sizeof(*sqe));	/* SQE128: the command area too */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->flags = IOSQE_FIXED_FILE;
	sqe->fd = 0;			/* /dev/fuse, registered */
	sqe->cmd_op = cmd;
	if (cmd == UR_CMD_REGISTER) {
		sqe->addr = (uintptr_t)t->iov;
		sqe->len = 2;
	}
	req->qid = (uint16_t)t->q->qid;
	req->commit_id = commit_id;
	io_uring_sqe_set_data(sqe, t);
	t->cmd = cmd;
	t->commit_id = commit_id;
	return 0;
}

/* Queue the read of @t's eventfd.  0 or -EBUSY. */
static int ur_prep_wake_read(struct ur_thread *t)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_read(sqe, t->evfd, &t->evbuf, sizeof(t->evbuf), 0);
	io_uring_sqe_set_data(sqe, NULL);
	return 0;
}

/*
 * Errors after which the same call may succeed: kernel memory, a signal.
 * Stopping a thread on one would strand the requests the kernel keeps
 * routing to its entry.  EBUSY (an overflowed CQ) cannot last: a ring has
 * at most two commands in flight (the entry's and the eventfd read).
 */
static bool ur_transient(int err)
{
	return err == -EAGAIN || err == -EBUSY || err == -ENOMEM || err == -EINTR;
}

/* Submit what is queued in @t's SQ, retrying transient errors.  0 or -errno. */
static int ur_submit(struct ur_thread *t)
{
	int ret;

	while (ur_transient(ret = io_uring_submit(&t->ring)))
		if (ret != -EINTR)
			sched_yield();
	return ret < 0 ? ret : 0;
}

/* Wake @t through its eventfd. */
static int ur_wake(struct ur_thread *t)
{
	uint64_t one = 1;
	int ret;

	do
		ret = write(t->evfd, &one, sizeof(one)) == sizeof(one) ? 0 : -errno;
	while (ur_transient(ret));
	return ret;
}

/*
 * Queue the commit of a handed-off reply, if @t has one.  0 or -errno.
 * Context: queue lock held; @t's thread, or the stopper once it parked.
 */
static int ur_take_handoff_locked(struct ur_thread *t)
{
	if (!t->handoff)
		return 0;
	t->handoff = false;
	if (t->held) {
		t->held = false;
		t->q->nheld--;
	}
	return ur_prep_cmd(t, UR_CMD_COMMIT_AND_FETCH, t->handoff_id);
}

/* Have @t's thread commit its entry's reply (a reply from another thread). */
static int ur_handoff(struct ur_thread *t, uint64_t commit_id)
{
	struct ur_queue *q = t->q;

	pthread_mutex_lock(&q->lock);
	t->handoff_id = commit_id;
	t->handoff = true;
	pthread_mutex_unlock(&q->lock);
	return ur_wake(t);
}

/* The thread whose entry holds request @unique, claimed for its reply, or NULL. */
static struct ur_thread *ur_claim(struct ur_ring *ur, uint64_t unique)
{
	struct ur_thread *t = ur_self;
	uint64_t want = unique;

	if (t && atomic_compare_exchange_strong(&t->unique, &want, 0))
		return t;
	for (unsigned int i = 0; i < ur->nqueues; i++) {
		struct ur_queue *q = &ur->queues[i];

		unsigned int n = atomic_load(&q->nthreads);

		for (unsigned int j = 0; j < n; j++) {
			t = &q->threads[j];
			want = unique;
			if (atomic_compare_exchange_strong(&t->unique, &want, 0))
				return t;
		}
	}
	return NULL;
}

/* Submit this ring thread's queued commit now.  Context: any thread. */
static void ur_flush_self(void)
{
	int ret;

	if (!ur_unsubmitted)
		return;
	ur_unsubmitted = false;
	ret = ur_submit(ur_self);
	if (ret)
		fuse_log(FUSE_LOG_ERR, "error: uring: queue %u: cannot send a reply: %s\n",
			 ur_self->q->qid, strerror(-ret));
}

ssize_t ffs_uring_send(const struct iovec *iov, int count)
{
	struct ur_ring *ur = atomic_load(&ur_active);
	struct fuse_out_header out;
	struct ur_thread *t;
	size_t len = 0;
	int ret;

	if (!ur || count < 1 || iov[0].iov_len < sizeof(out))
		return -ENOENT;
	memcpy(&out, iov[0].iov_base, sizeof(out));
	t = out.unique ? ur_claim(ur, out.unique) : NULL;
	if (!t) {
		/* A notification or a reply to a /dev/fuse request: after ours. */
		ur_flush_self();
		return -ENOENT;
	}
	for (int i = 1; i < count; i++) {
		if (iov[i].iov_len > ur->payload_size - len) {
			/* Larger than the kernel asked for: cannot happen. */
			out.error = -EIO;
			len = 0;
			break;
		}
		/* Data put in place by ffs_uring_reply_buf() is not copied. */
		if (iov[i].iov_base != t->payload + len)
			memmove(t->payload + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	out.len = (uint32_t)(sizeof(out) + len);
	memcpy(t->hdr->in_out, &out, sizeof(out));
	t->hdr->ent_in_out.payload_sz = (uint32_t)len;
	if (t == ur_self) {
		/* Submitted with the wait for the next request (ur_thread()). */
		ret = ur_prep_cmd(t, UR_CMD_COMMIT_AND_FETCH, out.unique);
		ur_unsubmitted = !ret;
	} else {
		ret = ur_handoff(t, out.unique);
	}
	if (ret)
		fuse_log(FUSE_LOG_ERR, "error: uring: queue %u: cannot send the reply to request "
			 "%llu: %s\n", t->q->qid, (unsigned long long)out.unique,
			 strerror(-ret));
	return ret ? ret : (ssize_t)out.len;
}

void *ffs_uring_reply_buf(size_t size)
{
	struct ur_ring *ur = atomic_load(&ur_active);
	struct ur_thread *t = ur_self;

	/*
	 * A ring thread holds the request it serves in its entry until the
	 * reply claims it; the request's own fixed parts sit in front of the
	 * payload (ur_serve()), so the payload is free for the reply.
	 */
	if (!ur || !t || !atomic_load(&t->unique) || size > ur->payload_size)
		return NULL;
	return t->payload;
}

/*
 * Serve the request the kernel put into @t's entry: rebuild it as read(2)
 * gives it, in front of the payload, and let libfuse dispatch it.
 */
static void ur_serve(struct ur_ring *ur, struct ur_thread *t)
{
	const struct fuse_in_header *in = (const void *)t->hdr->in_out;
	uint32_t payload_sz = t->hdr->ent_in_out.payload_sz;
	uint64_t commit_id = t->hdr->ent_in_out.commit_id;
	struct fuse_buf fbuf = { .size = 0 };
	size_t op_len;
	char *start;

	/* The fixed argument is what the length leaves beside the payload. */
	if (in->len < sizeof(*in) + (size_t)payload_sz || payload_sz > ur->payload_size ||
	    in->len - sizeof(*in) - payload_sz > UR_OP_SIZE || in->unique != commit_id) {
		struct fuse_out_header out = { .len = sizeof(out), .error = -EIO,
					       .unique = commit_id };

		fuse_log(FUSE_LOG_ERR, "error: uring: malformed request (opcode %u)\n",
			 in->opcode);
		memcpy(t->hdr->in_out, &out, sizeof(out));
		t->hdr->ent_in_out.payload_sz = 0;
		ur_unsubmitted = !ur_prep_cmd(t, UR_CMD_COMMIT_AND_FETCH, commit_id);
		return;
	}
	op_len = in->len - sizeof(*in) - payload_sz;
	start = t->payload - op_len - sizeof(*in);
	memmove(start + sizeof(*in), t->hdr->op_in, op_len);
	memmove(start, in, sizeof(*in));
	fbuf.mem = start;
	fbuf.size = ((const struct fuse_in_header *)start)->len;
	atomic_fetch_add_explicit(&ur_requests, 1, memory_order_relaxed);
	atomic_store(&t->unique, commit_id);
	ffs_channel_received(fbuf.mem, fbuf.size);
	fuse_session_process_buf(ur->se, &fbuf);
}

/* A completion of @t's entry command with result @res. */
static void ur_complete(struct ur_ring *ur, struct ur_thread *t, int res)
{
	if (res == 0) {
		ur_serve(ur, t);
		return;
	}
	/*
	 * EAGAIN, EINTR: submit again.  Otherwise the entry is out of use:
	 * ENOTCONN when the connection ends; a refused REGISTER leaves the
	 * kernel on /dev/fuse (while any queue has no entry).
	 */
	if (res == -EAGAIN || res == -EINTR)
		ur_unsubmitted = !ur_prep_cmd(t, t->cmd, t->commit_id);
	else if (res != -ENOTCONN && t->cmd == UR_CMD_REGISTER &&
		 !atomic_exchange(&ur_refused, true))
		fuse_log(FUSE_LOG_NOTICE, "uring: the kernel refused a ring entry (%s)\n",
			 strerror(-res));
}

/*
 * The eventfd read completed: queue handed-off commits and, unless the
 * queue stops, the read again.  Returns whether to go on serving, or
 * -errno.
 */
static int ur_woken(struct ur_thread *t)
{
	struct ur_queue *q = t->q;
	bool stop;
	int ret;

	pthread_mutex_lock(&q->lock);
	stop = q->stopping;
	ret = ur_take_handoff_locked(t);
	if (!ret && !stop)
		ret = ur_prep_wake_read(t);
	pthread_mutex_unlock(&q->lock);
	if (ret)
		return ret;
	return !stop;
}

static void ur_thread_destroy(struct ur_ring *ur, struct ur_thread *t)
{
	io_uring_queue_exit(&t->ring);
	close(t->evfd);
	munmap(t->hdr, ur->map_size);
}

static int ur_thread_init(struct ur_ring *ur, struct ur_queue *q, struct ur_thread *t)
{
	struct io_uring_params p = { .flags = IORING_SETUP_SQE128 };
	char *map;
	int ret;

	t->q = q;
	t->evfd = eventfd(0, EFD_CLOEXEC);
	if (t->evfd < 0)
		return -errno;
	/* The entry's command, the eventfd read, and a commit queued beside them. */
	ret = io_uring_queue_init_params(4, &t->ring, &p);
	if (ret)
		goto out_evfd;
	ret = io_uring_register_files(&t->ring, &ur->fuse_fd, 1);
	if (ret)
		goto out_ring;
	map = mmap(NULL, ur->map_size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (map == MAP_FAILED) {
		ret = -errno;
		goto out_ring;
	}
	t->hdr = (struct ur_req_header *)map;
	t->payload = map + 2 * ur_page;
	t->iov[0] = (struct iovec){ t->hdr, sizeof(*t->hdr) };
	t->iov[1] = (struct iovec){ t->payload, ur->payload_size };
	return 0;

out_ring:
	io_uring_queue_exit(&t->ring);
out_evfd:
	close(t->evfd);
	return ret;
}

static void *ur_thread(void *arg);

/*
 * Start one more thread for @q, unless it stops or has the most it may.
 * Context: queue lock held.
 */
static void ur_grow_locked(struct ur_queue *q)
{
	unsigned int n = atomic_load(&q->nthreads);
	struct ur_thread *t = &q->threads[n];
	sigset_t all, old;
	int ret;

	if (q->stopping || n == UR_QUEUE_MAX_THREADS || n != q->started)
		return;
	ret = ur_thread_init(q->ur, q, t);
	if (ret)
		goto fail;
	/* Signals are for libfuse's handlers on the main thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ret = -pthread_create(&t->tid, NULL, ur_thread, t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		ur_thread_destroy(q->ur, t);
		memset(t, 0, sizeof(*t));
		goto fail;
	}
	atomic_store(&q->nthreads, n + 1);
	q->started++;
	atomic_fetch_add(&ur_nthreads, 1);
	return;
fail:
	fuse_log(FUSE_LOG_ERR, "error: uring: queue %u cannot start a thread for held "
		 "replies (%u held of %u threads): %s\n", q->qid, q->nheld, n,
		 strerror(-ret));
}

/*
 * The handler of @t's request returned.  If no reply has claimed the entry,
 * the reply is held (defer.c) and will be handed off, and until then @t
 * serves nothing: keep the queue's starting number of threads free to
 * serve.  (A claim that races this check is counted or not, and its
 * hand-off undoes what was counted.)
 */
static void ur_note_held(struct ur_thread *t)
{
	struct ur_queue *q = t->q;

	pthread_mutex_lock(&q->lock);
	if (t->reserved) {
		t->reserved = false;
		q->nreserved--;
	}
	if (atomic_load(&t->unique) && !t->held) {
		t->held = true;
		q->nheld++;
		if (q->started - q->nheld < q->ur->threads_per_queue)
			ur_grow_locked(q);
	}
	pthread_mutex_unlock(&q->lock);
}

bool ffs_uring_may_hold(void)
{
	struct ur_thread *t = ur_self;
	struct ur_queue *q;
	bool ok;

	/* Over /dev/fuse a held reply holds no thread. */
	if (!atomic_load(&ur_active) || !t || !atomic_load(&t->unique))
		return true;
	q = t->q;
	pthread_mutex_lock(&q->lock);
	/*
	 * Held, this thread serves nothing until the reply leaves, and
	 * ur_note_held() starts threads to keep some free, up to
	 * UR_QUEUE_MAX_THREADS: after this hold one of those must stay free.
	 * Handlers of the queue that were let hold and have not returned yet
	 * (preempted on the queue's CPU) count as held already, so that two
	 * of them never both take the last free thread.
	 */
	ok = q->nheld + q->nreserved + 1 < UR_QUEUE_MAX_THREADS;
	if (ok && !t->reserved) {
		t->reserved = true;
		q->nreserved++;
	}
	pthread_mutex_unlock(&q->lock);
	return ok;
}

/* Serve no more; wait to be released (see ffs_uring_stop()). */
static void *ur_park(struct ur_queue *q)
{
	pthread_mutex_lock(&q->lock);
	q->parked++;
	pthread_cond_broadcast(&q->parked_cond);
	while (!q->release)
		pthread_cond_wait(&q->parked_cond, &q->lock);
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

void ffs_uring_set_pin(bool pin)
{
	ur_pin = pin;
}

/*
 * Name this thread after @q (ffs-uring-QUEUE, for ps, perf and the tests)
 * and run it on @q's CPU where it may (see "CPUs" at the top).
 */
static void ur_thread_place(const struct ur_queue *q)
{
	char name[16];
	cpu_set_t one;

	snprintf(name, sizeof(name), "ffs-uring-%u", q->qid);
	pthread_setname_np(pthread_self(), name);
	if (q->qid >= CPU_SETSIZE || !CPU_ISSET(q->qid, &q->ur->pin_cpus))
		return;
	CPU_ZERO(&one);
	CPU_SET(q->qid, &one);
	/* Only a CPU gone offline since the start refuses: then unpinned. */
	if (sched_setaffinity(0, sizeof(one), &one) < 0)
		fuse_log(FUSE_LOG_DEBUG, "uring: queue %u: cannot run on its CPU: %s\n",
			 q->qid, strerror(errno));
}

/*
 * A ring thread: register the entry, then serve each request the kernel
 * delivers to it, submitting the reply with the wait for the next.
 */
static void *ur_thread(void *arg)
{
	struct ur_thread *t = arg;
	struct ur_ring *ur = t->q->ur;
	bool serving = true;
	int ret;

	ur_self = t;
	ur_thread_place(t->q);
	ret = ur_prep_cmd(t, UR_CMD_REGISTER, 0);
	if (!ret)
		ret = ur_prep_wake_read(t);
	while (!ret && serving) {
		struct io_uring_cqe *cqe;
		unsigned int head, seen = 0;

		ur_unsubmitted = false;
		ret = io_uring_submit_and_wait(&t->ring, 1);
		if (ur_transient(ret) && ret != -EINTR)
			sched_yield();
		if (ret >= 0 || ur_transient(ret))
			ret = 0;
		io_uring_for_each_cqe(&t->ring, head, cqe) {
			struct ur_thread *ent = io_uring_cqe_get_data(cqe);
			int res = cqe->res, r;

			seen++;
			if (ent) {
				ur_complete(ur, ent, res);
				if (!res)
					ur_note_held(t);
				continue;
			}
			r = ur_woken(t);
			if (r < 0)
				ret = r;
			else
				serving = serving && r;
		}
		io_uring_cq_advance(&t->ring, seen);
	}
	/* Commits queued last (a reply, a hand-off taken at stop). */
	if (!ret)
		ret = ur_submit(t);
	ur_unsubmitted = false;
	if (ret)
		fuse_log(FUSE_LOG_ERR, "error: uring: a thread of queue %u stops serving: %s\n",
			 t->q->qid, strerror(-ret));
	return ur_park(t->q);
}

static int ur_queue_init(struct ur_ring *ur, struct ur_queue *q, unsigned int qid)
{
	unsigned int n = 0;
	int ret = 0;

	q->ur = ur;
	q->qid = qid;
	q->threads = calloc(UR_QUEUE_MAX_THREADS, sizeof(*q->threads));
	if (!q->threads)
		return -ENOMEM;
	for (; n < ur->threads_per_queue; n++) {
		ret = ur_thread_init(ur, q, &q->threads[n]);
		if (ret)
			break;
	}
	if (ret) {
		while (n)
			ur_thread_destroy(ur, &q->threads[--n]);
		free(q->threads);
		return ret;
	}
	atomic_store(&q->nthreads, n);
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->parked_cond, NULL);
	return 0;
}

/* Free what ur_queue_init() made; its threads have ended. */
static void ur_queue_destroy(struct ur_ring *ur, struct ur_queue *q)
{
	for (unsigned int i = 0; i < atomic_load(&q->nthreads); i++)
		ur_thread_destroy(ur, &q->threads[i]);
	free(q->threads);
	pthread_cond_destroy(&q->parked_cond);
	pthread_mutex_destroy(&q->lock);
}

/*
 * Start @q's threads, each of which registers its entry.  0 once one runs
 * (fewer threads still serve), or -errno when none could start, before
 * anything was registered.
 */
static int ur_queue_start(struct ur_queue *q)
{
	sigset_t all, old;
	int ret = 0;

	/* Signals are for libfuse's handlers on the main thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (unsigned int i = 0; i < atomic_load(&q->nthreads) && !ret; i++) {
		ret = -pthread_create(&q->threads[i].tid, NULL, ur_thread, &q->threads[i]);
		if (!ret) {
			q->started++;
			atomic_fetch_add(&ur_nthreads, 1);
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret && q->started)
		fuse_log(FUSE_LOG_NOTICE, "uring: queue %u runs %u threads (%s)\n",
			 q->qid, q->started, strerror(-ret));
	return q->started ? 0 : ret;
}

/*
 * Stop @q's threads serving and wait until all have parked, then submit
 * the replies handed off meanwhile; with @release, let them end and join
 * them.
 */
static void ur_queue_stop(struct ur_queue *q, bool release)
{
	int ret;

	pthread_mutex_lock(&q->lock);
	q->stopping = true;
	pthread_mutex_unlock(&q->lock);
	/* Ends each thread's wait for a completion. */
	for (unsigned int i = 0; i < q->started; i++) {
		ret = ur_wake(&q->threads[i]);
		if (ret)
			fuse_log(FUSE_LOG_ERR, "error: uring: cannot wake a thread of queue %u: %s\n",
				 q->qid, strerror(-ret));
	}
	pthread_mutex_lock(&q->lock);
	while (q->parked < q->started)
		pthread_cond_wait(&q->parked_cond, &q->lock);
	/* Replies handed off when the threads no longer served (this thread stays). */
	for (unsigned int i = 0; i < q->started; i++) {
		struct ur_thread *t = &q->threads[i];

		if (!t->handoff)
			continue;
		ret = ur_take_handoff_locked(t);
		if (!ret)
			ret = ur_submit(t);
		if (ret)
			fuse_log(FUSE_LOG_ERR, "error: uring: queue %u: cannot send a reply: %s\n",
				 q->qid, strerror(-ret));
	}
	q->release = release;
	pthread_cond_broadcast(&q->parked_cond);
	pthread_mutex_unlock(&q->lock);
	for (unsigned int i = 0; release && i < q->started; i++)
		pthread_join(q->threads[i].tid, NULL);
}
static void ur_ring_stop(struct ur_ring *ur, unsigned int ninit, bool release)
{
	for (unsigned int i = 0; i < ninit; i++)
		ur_queue_stop(&ur->queues[i], release);
}

static void ur_ring_free(struct ur_ring *ur, unsigned int ninit)
{
	for (unsigned int i = 0; i < ninit; i++)
		ur_queue_destroy(ur, &ur->queues[i]);
	free(ur->queues);
	free(ur);
}

void ffs_uring_log_unoffered(void)
{
	const char *why = "the kernel did not offer it in INIT";
	char val = 0;
	FILE *f = fopen("/sys/module/fuse/parameters/enable_uring", "re");

	if (!f)
		why = "this kernel has none (Linux 6.14+ with CONFIG_FUSE_IO_URING)";
	else if (fread(&val, 1, 1, f) == 1 && val == 'N')
		why = "/sys/module/fuse/parameters/enable_uring is N";
	if (f)
		fclose(f);
	fuse_log(FUSE_LOG_NOTICE, "uring: not used, %s: serving over /dev/fuse\n", why);
}

int ffs_uring_start(struct fuse_session *se, size_t payload_size)
{
	struct ur_ring *ur = calloc(1, sizeof(*ur));
	unsigned int ninit = 0;
	int ret = -ENOMEM;

	ur_page = (size_t)sysconf(_SC_PAGESIZE);
	if (!ur)
		return ret;
	/* The daemon's CPUs, before any thread of ours is pinned. */
	if (!ur_pin || sched_getaffinity(0, sizeof(ur->pin_cpus), &ur->pin_cpus) < 0)
		CPU_ZERO(&ur->pin_cpus);
	ur->se = se;
	ur->payload_size = (payload_size + ur_page - 1) & ~(ur_page - 1);
	ur->map_size = 2 * ur_page + ur->payload_size;
	ur->fuse_fd = fuse_session_fd(se);
	/* The kernel has a queue for every possible CPU and needs all of them. */
	ur->nqueues = (unsigned int)get_nprocs_conf();
	ur->threads_per_queue = UR_THREADS_TOTAL / ur->nqueues;
	if (ur->threads_per_queue < UR_MIN_THREADS)
		ur->threads_per_queue = UR_MIN_THREADS;
	if (ur->threads_per_queue > UR_MAX_THREADS)
		ur->threads_per_queue = UR_MAX_THREADS;
	ur->queues = calloc(ur->nqueues, sizeof(*ur->queues));
	if (!ur->queues)
		goto out_free;
	for (; ninit < ur->nqueues; ninit++) {
		ret = ur_queue_init(ur, &ur->queues[ninit], ninit);
		if (ret)
			goto out_free;
	}
	/* Published before any entry is registered, so before any ring request. */
	atomic_store(&ur_active, ur);
	for (unsigned int i = 0; i < ur->nqueues; i++) {
		ret = ur_queue_start(&ur->queues[i]);
		if (ret) {
			/*
			 * Queue i has no entry, so the kernel never used the
			 * ring: the others can go.
			 */
			ur_ring_stop(ur, ninit, true);
			atomic_store(&ur_active, NULL);
			goto out_free;
		}
	}
	fuse_log(FUSE_LOG_NOTICE, "uring: serving requests over io_uring "
		 "(%u queues of %u threads, one entry each%s)\n", ur->nqueues,
		 ur->threads_per_queue, ur_pin ? ", each queue on its CPU" : "");
	return 0;

out_free:
	ur_ring_free(ur, ninit);
	return ret;
}

/*
 * The threads finish what they serve and park, and the rings stay open
 * until the process exits.  Once every queue has entries the kernel sends
 * every request to the rings for as long as the connection lives, which
 * after a lazy unmount with files still open is until the daemon exits.
 * Requests that arrive now then wait in the kernel and fail with
 * ECONNABORTED when the daemon exits, as they would on /dev/fuse.  Closing
 * the rings (or ending the threads, which cancels their commands) would
 * instead fail a request handed to an entry meanwhile with ECANCELED.
 * Called again, it submits the replies handed off since (held writes the
 * reply timer answers at its stop).
 */
void ffs_uring_stop(void)
{
	struct ur_ring *ur = atomic_load(&ur_active);

	if (ur)
		ur_ring_stop(ur, ur->nqueues, false);
}
