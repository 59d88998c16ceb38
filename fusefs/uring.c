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
 * Threads.  Each queue has its own io_uring, UR_QUEUE_ENTRIES entries and
 * UR_QUEUE_THREADS threads that serve until ffs_uring_stop().  One thread
 * at a time (the leader) waits for a completion; when it has one, it makes
 * another idle thread the leader and serves the request itself, so the
 * request is served on the thread that was woken for it (no hand-off) and
 * a handler that blocks (fsync waiting for writeback, a cold read) holds
 * only its own thread and entry: the others keep serving the queue.  A held
 * write reply holds an entry but no thread, hence more entries than
 * threads.  The queue stalls only while all its threads are blocked in
 * handlers, as libfuse's loop does at max_threads; libfuse master instead
 * serves a queue on one thread, where one blocking handler stops its queue.
 *
 * Who submits matters to the kernel: it finishes delivering a request to an
 * entry in the context of the thread that submitted the entry's last
 * command, and when that thread exits it cancels the command, failing a
 * request being delivered with ECANCELED.  So only the queue's own
 * threads submit, and they live until the process exits (ffs_uring_stop()
 * parks them).  A reply from any other thread (held write replies leave
 * from defer.c's timer thread, which ends at stop) is handed to the
 * queue's leader, woken through an eventfd, which submits its commit.  A
 * request can wait for its entry's submitter to leave an uninterruptible
 * sleep (a handler's backing read), a bounded delay.
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

#define UR_QUEUE_ENTRIES	16
#define UR_QUEUE_THREADS	4

struct ur_queue;

/*
 * One ring entry.  Its buffers are one mapping: the header page, a spare
 * page whose end receives the fixed parts of a request, and the payload.
 */
struct ur_ent {
	struct ur_queue *q;		/* immutable */
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
	 * The command to submit again if the kernel answers EAGAIN/EINTR,
	 * and its commit id: written by the thread that submits, under
	 * ur_queue.lock, read by the leader that reaps it.
	 */
	uint32_t cmd;
	uint64_t commit_id;
	struct ur_ent *handoff_next;	/* on ur_queue.handoff; under its lock */
};

/*
 * One kernel queue.  The SQ side of @ring (get_sqe .. submit) and the
 * leader hand-over are under @lock, taken by any thread that submits; the
 * CQ side is the leader's alone (one reaper at a time) and needs no lock.
 * @lock is a leaf: nothing is locked or replied under it, and a reply may
 * take it from any thread (no lock of fusefs is held across a reply).
 */
struct ur_queue {
	struct ur_ring *ur;		/* immutable */
	unsigned int qid;		/* immutable */
	struct io_uring ring;		/* see above */
	int evfd;			/* immutable: wakes the leader (hand-offs, stop) */
	uint64_t evbuf;			/* the eventfd read's target */
	pthread_mutex_t lock;
	pthread_cond_t idle;		/* a thread waits here to lead; under lock */
	bool has_leader;		/* under lock */
	bool stopping;			/* under lock: serve no more */
	/*
	 * Replies from threads that must not submit (see the top), waiting
	 * for the leader to submit their commits; under lock.  Pushing one
	 * writes @evfd, whose read the leader keeps queued.
	 */
	struct ur_ent *handoff;
	/*
	 * Threads that stopped serving and wait (on @parked_cond, under lock)
	 * for @release, which only a failed start sets: see ffs_uring_stop().
	 */
	unsigned int parked;
	bool release;
	pthread_cond_t parked_cond;
	struct ur_ent ents[UR_QUEUE_ENTRIES];	/* immutable after start */
	pthread_t threads[UR_QUEUE_THREADS];	/* immutable after start */
	unsigned int nthreads;		/* started; immutable after start */
};

struct ur_ring {
	struct fuse_session *se;	/* immutable */
	size_t payload_size;		/* immutable */
	size_t map_size;		/* immutable: an entry's mapping */
	unsigned int nqueues;		/* immutable */
	struct ur_queue *queues;	/* immutable array */
};

/* The ring, or NULL: set at start before any ring request; cleared only if the start fails. */
static struct ur_ring *_Atomic ur_active;
static _Atomic uint64_t ur_requests;
/* A refused entry was logged (once: every entry would be). */
static _Atomic bool ur_refused;
/* The entry whose request this thread serves, to find its reply at once. */
static __thread struct ur_ent *ur_current;
/* This thread is a ring thread: it may submit (see the top). */
static __thread bool ur_ring_thread;
static size_t ur_page;

uint64_t ffs_uring_requests(void)
{
	return atomic_load_explicit(&ur_requests, memory_order_relaxed);
}

static void ur_prep_cmd(struct io_uring_sqe *sqe, struct ur_ent *ent, uint32_t cmd,
			uint64_t commit_id)
{
	struct ur_cmd_req *req = (struct ur_cmd_req *)sqe->cmd;

	memset(sqe, 0, 2 * sizeof(*sqe));	/* SQE128: the command area too */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->flags = IOSQE_FIXED_FILE;
	sqe->fd = 0;			/* /dev/fuse, registered */
	sqe->cmd_op = cmd;
	if (cmd == UR_CMD_REGISTER) {
		sqe->addr = (uintptr_t)ent->iov;
		sqe->len = 2;
	}
	req->qid = (uint16_t)ent->q->qid;
	req->commit_id = commit_id;
	io_uring_sqe_set_data(sqe, ent);
}

/*
 * Errors after which the same call may succeed: kernel memory, a signal.
 * Stopping a queue on one would strand the requests the kernel keeps
 * routing to it.  EBUSY (an overflowed CQ) cannot last: a queue has at most
 * UR_QUEUE_ENTRIES + 1 commands in flight, fewer than its CQ holds.
 */
static bool ur_transient(int err)
{
	return err == -EAGAIN || err == -EBUSY || err == -ENOMEM || err == -EINTR;
}

/*
 * Submit what is queued in @q's SQ, retrying transient errors (the SQEs
 * stay queued until submitted).  0 or -errno.  Context: queue lock held.
 */
static int ur_submit_sq(struct ur_queue *q)
{
	int ret;

	while (ur_transient(ret = io_uring_submit(&q->ring)))
		if (ret != -EINTR)
			sched_yield();
	return ret < 0 ? ret : 0;
}

/* Queue @cmd for @ent and submit it.  0 or -errno.  Context: queue lock held. */
static int ur_submit_locked(struct ur_ent *ent, uint32_t cmd, uint64_t commit_id)
{
	struct ur_queue *q = ent->q;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	/* Each entry has at most one command in flight: the SQ cannot be full. */
	if (!sqe)
		return -EBUSY;
	ent->cmd = cmd;
	ent->commit_id = commit_id;
	ur_prep_cmd(sqe, ent, cmd, commit_id);
	return ur_submit_sq(q);
}

static int ur_submit(struct ur_ent *ent, uint32_t cmd, uint64_t commit_id)
{
	int ret;

	pthread_mutex_lock(&ent->q->lock);
	ret = ur_submit_locked(ent, cmd, commit_id);
	pthread_mutex_unlock(&ent->q->lock);
	return ret;
}

/* Wake @q's leader through the eventfd. */
static int ur_wake(struct ur_queue *q)
{
	uint64_t one = 1;
	int ret;

	do
		ret = write(q->evfd, &one, sizeof(one)) == sizeof(one) ? 0 : -errno;
	while (ur_transient(ret));
	return ret;
}

/* Have the leader of @ent's queue commit it (a reply from a non-ring thread). */
static int ur_handoff(struct ur_ent *ent, uint64_t commit_id)
{
	struct ur_queue *q = ent->q;

	pthread_mutex_lock(&q->lock);
	ent->cmd = UR_CMD_COMMIT_AND_FETCH;
	ent->commit_id = commit_id;
	ent->handoff_next = q->handoff;
	q->handoff = ent;
	pthread_mutex_unlock(&q->lock);
	return ur_wake(q);
}

/*
 * Submit the handed-off commits and, with @rearm, the eventfd read again;
 * one submission.  0 or -errno.  Context: queue lock held.
 */
static int ur_drain_locked(struct ur_queue *q, bool rearm)
{
	struct io_uring_sqe *sqe;

	while (q->handoff) {
		struct ur_ent *ent = q->handoff;

		sqe = io_uring_get_sqe(&q->ring);
		if (!sqe)
			return -EBUSY;	/* one command per entry: cannot happen */
		q->handoff = ent->handoff_next;
		ur_prep_cmd(sqe, ent, ent->cmd, ent->commit_id);
	}
	if (rearm) {
		sqe = io_uring_get_sqe(&q->ring);
		if (!sqe)
			return -EBUSY;
		io_uring_prep_read(sqe, q->evfd, &q->evbuf, sizeof(q->evbuf), 0);
		io_uring_sqe_set_data(sqe, NULL);
	}
	return ur_submit_sq(q);
}

/* The entry holding request @unique, claimed for its reply, or NULL. */
static struct ur_ent *ur_claim(struct ur_ring *ur, uint64_t unique)
{
	struct ur_ent *ent = ur_current;
	uint64_t want = unique;

	if (ent && atomic_compare_exchange_strong(&ent->unique, &want, 0))
		return ent;
	for (unsigned int i = 0; i < ur->nqueues; i++) {
		for (unsigned int j = 0; j < UR_QUEUE_ENTRIES; j++) {
			ent = &ur->queues[i].ents[j];
			want = unique;
			if (atomic_compare_exchange_strong(&ent->unique, &want, 0))
				return ent;
		}
	}
	return NULL;
}

ssize_t ffs_uring_send(const struct iovec *iov, int count)
{
	struct ur_ring *ur = atomic_load(&ur_active);
	struct fuse_out_header out;
	struct ur_ent *ent;
	size_t len = 0;
	int ret;

	if (!ur || count < 1 || iov[0].iov_len < sizeof(out))
		return -ENOENT;
	memcpy(&out, iov[0].iov_base, sizeof(out));
	if (!out.unique)
		return -ENOENT;		/* a notification */
	ent = ur_claim(ur, out.unique);
	if (!ent)
		return -ENOENT;		/* a reply to a /dev/fuse request */
	for (int i = 1; i < count; i++) {
		if (iov[i].iov_len > ur->payload_size - len) {
			/* Larger than the kernel asked for: cannot happen. */
			out.error = -EIO;
			len = 0;
			break;
		}
		memmove(ent->payload + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	out.len = (uint32_t)(sizeof(out) + len);
	memcpy(ent->hdr->in_out, &out, sizeof(out));
	ent->hdr->ent_in_out.payload_sz = (uint32_t)len;
	ret = ur_ring_thread ? ur_submit(ent, UR_CMD_COMMIT_AND_FETCH, out.unique)
			     : ur_handoff(ent, out.unique);
	if (ret)
		fuse_log(FUSE_LOG_ERR, "error: uring: queue %u: cannot send the reply to request "
			 "%llu: %s\n", ent->q->qid, (unsigned long long)out.unique,
			 strerror(-ret));
	return ret ? ret : (ssize_t)out.len;
}

/*
 * Serve the request the kernel put into @ent: rebuild it as read(2) gives
 * it, in front of the payload, and let libfuse dispatch it.
 */
static void ur_serve(struct ur_ring *ur, struct ur_ent *ent)
{
	const struct fuse_in_header *in = (const void *)ent->hdr->in_out;
	uint32_t payload_sz = ent->hdr->ent_in_out.payload_sz;
	uint64_t commit_id = ent->hdr->ent_in_out.commit_id;
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
		memcpy(ent->hdr->in_out, &out, sizeof(out));
		ent->hdr->ent_in_out.payload_sz = 0;
		(void)ur_submit(ent, UR_CMD_COMMIT_AND_FETCH, commit_id);
		return;
	}
	op_len = in->len - sizeof(*in) - payload_sz;
	start = ent->payload - op_len - sizeof(*in);
	memmove(start + sizeof(*in), ent->hdr->op_in, op_len);
	memmove(start, in, sizeof(*in));
	fbuf.mem = start;
	fbuf.size = ((const struct fuse_in_header *)start)->len;
	atomic_fetch_add_explicit(&ur_requests, 1, memory_order_relaxed);
	atomic_store(&ent->unique, commit_id);
	ur_current = ent;
	ffs_channel_received(fbuf.mem, fbuf.size);
	fuse_session_process_buf(ur->se, &fbuf);
	ur_current = NULL;
}

/* A completion for @ent with result @res. */
static void ur_complete(struct ur_ring *ur, struct ur_ent *ent, int res)
{
	if (res == 0) {
		ur_serve(ur, ent);
		return;
	}
	/*
	 * EAGAIN, EINTR: submit again.  Otherwise the entry is out of use:
	 * ENOTCONN when the connection ends; a refused REGISTER leaves the
	 * kernel on /dev/fuse.
	 */
	if (res == -EAGAIN || res == -EINTR)
		(void)ur_submit(ent, ent->cmd, ent->commit_id);
	else if (res != -ENOTCONN && ent->cmd == UR_CMD_REGISTER &&
		 !atomic_exchange(&ur_refused, true))
		fuse_log(FUSE_LOG_NOTICE, "uring: the kernel refused a ring entry (%s)\n",
			 strerror(-res));
}

/*
 * Wait to be the leader, then for a completion of an entry.  Returns false
 * when the queue stops.  Gives up leadership before returning.  The
 * eventfd's read completes when replies were handed off (submitted here)
 * and at stop.
 */
static bool ur_lead(struct ur_queue *q, struct ur_ent **ent, int *res)
{
	struct io_uring_cqe *cqe;
	bool stop = false;
	int ret;

	*ent = NULL;
	pthread_mutex_lock(&q->lock);
	while (q->has_leader && !q->stopping)
		pthread_cond_wait(&q->idle, &q->lock);
	if (q->stopping) {
		pthread_mutex_unlock(&q->lock);
		return false;
	}
	q->has_leader = true;
	pthread_mutex_unlock(&q->lock);
	while (!stop) {
		do
			ret = io_uring_wait_cqe(&q->ring, &cqe);
		while (ur_transient(ret));
		if (ret)
			break;
		*ent = io_uring_cqe_get_data(cqe);
		*res = cqe->res;
		io_uring_cqe_seen(&q->ring, cqe);
		if (*ent)
			break;
		pthread_mutex_lock(&q->lock);
		stop = q->stopping;
		ret = ur_drain_locked(q, !stop);
		pthread_mutex_unlock(&q->lock);
		if (ret)
			break;
	}
	pthread_mutex_lock(&q->lock);
	q->has_leader = false;
	if (ret || !*ent) {
		q->stopping = true;
		pthread_cond_broadcast(&q->idle);
	} else {
		pthread_cond_signal(&q->idle);
	}
	pthread_mutex_unlock(&q->lock);
	if (ret)
		fuse_log(FUSE_LOG_ERR, "error: uring: queue %u stops serving: %s\n",
			 q->qid, strerror(-ret));
	return !ret && *ent;
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

static void *ur_thread(void *arg)
{
	struct ur_queue *q = arg;
	struct ur_ent *ent;
	int res;

	ur_ring_thread = true;
	while (ur_lead(q, &ent, &res))
		ur_complete(q->ur, ent, res);
	return ur_park(q);
}

/* Submit REGISTER for every entry and the eventfd read.  Context: queue's first thread. */
static int ur_register(struct ur_queue *q)
{
	struct io_uring_sqe *sqe;
	int ret = 0;

	pthread_mutex_lock(&q->lock);
	for (unsigned int i = 0; i < UR_QUEUE_ENTRIES; i++) {
		struct io_uring_sqe *s = io_uring_get_sqe(&q->ring);

		if (!s) {
			ret = -EBUSY;
			goto out_unlock;
		}
		q->ents[i].cmd = UR_CMD_REGISTER;
		ur_prep_cmd(s, &q->ents[i], UR_CMD_REGISTER, 0);
	}
	sqe = io_uring_get_sqe(&q->ring);
	if (!sqe) {
		ret = -EBUSY;
		goto out_unlock;
	}
	io_uring_prep_read(sqe, q->evfd, &q->evbuf, sizeof(q->evbuf), 0);
	io_uring_sqe_set_data(sqe, NULL);
	ret = io_uring_submit(&q->ring);
	ret = ret < 0 ? ret : 0;
out_unlock:
	pthread_mutex_unlock(&q->lock);
	return ret;
}

/*
 * The queue's first thread starts as its leader (ur_queue_start), so that
 * no thread waits on the ring before the eventfd read that ends the wait
 * at stop is queued.  If registering fails, the queue stops: the kernel
 * then never has every queue and stays on /dev/fuse.
 */
static void *ur_first_thread(void *arg)
{
	struct ur_queue *q = arg;
	int ret;

	ur_ring_thread = true;
	ret = ur_register(q);

	pthread_mutex_lock(&q->lock);
	q->has_leader = false;
	if (ret) {
		q->stopping = true;
		pthread_cond_broadcast(&q->idle);
	} else {
		pthread_cond_signal(&q->idle);
	}
	pthread_mutex_unlock(&q->lock);
	if (ret) {
		fuse_log(FUSE_LOG_NOTICE, "uring: cannot register queue %u (%s): "
			 "serving over /dev/fuse\n", q->qid, strerror(-ret));
		return ur_park(q);
	}
	return ur_thread(q);
}

static int ur_queue_init(struct ur_ring *ur, struct ur_queue *q, unsigned int qid, int fuse_fd)
{
	struct io_uring_params p = { .flags = IORING_SETUP_SQE128 };
	int ret;

	q->ur = ur;
	q->qid = qid;
	q->evfd = eventfd(0, EFD_CLOEXEC);
	if (q->evfd < 0)
		return -errno;
	ret = io_uring_queue_init_params(UR_QUEUE_ENTRIES + 1, &q->ring, &p);
	if (ret)
		goto out_evfd;
	ret = io_uring_register_files(&q->ring, &fuse_fd, 1);
	if (ret)
		goto out_ring;
	for (unsigned int i = 0; i < UR_QUEUE_ENTRIES; i++) {
		struct ur_ent *ent = &q->ents[i];
		char *map = mmap(NULL, ur->map_size, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (map == MAP_FAILED) {
			ret = -errno;
			goto out_maps;
		}
		ent->q = q;
		ent->hdr = (struct ur_req_header *)map;
		ent->payload = map + 2 * ur_page;
		ent->iov[0] = (struct iovec){ ent->hdr, sizeof(*ent->hdr) };
		ent->iov[1] = (struct iovec){ ent->payload, ur->payload_size };
	}
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->idle, NULL);
	pthread_cond_init(&q->parked_cond, NULL);
	return 0;

out_maps:
	for (unsigned int i = 0; i < UR_QUEUE_ENTRIES && q->ents[i].hdr; i++)
		munmap(q->ents[i].hdr, ur->map_size);
out_ring:
	io_uring_queue_exit(&q->ring);
out_evfd:
	close(q->evfd);
	return ret;
}

/* Free what ur_queue_init() made; its threads have ended. */
static void ur_queue_destroy(struct ur_ring *ur, struct ur_queue *q)
{
	io_uring_queue_exit(&q->ring);
	close(q->evfd);
	for (unsigned int i = 0; i < UR_QUEUE_ENTRIES; i++)
		munmap(q->ents[i].hdr, ur->map_size);
	pthread_cond_destroy(&q->parked_cond);
	pthread_cond_destroy(&q->idle);
	pthread_mutex_destroy(&q->lock);
}

/*
 * Start @q's threads, the first of which registers the entries.  0 once
 * that one runs (fewer threads than UR_QUEUE_THREADS still serve), or
 * -errno when it could not start, before anything was registered.
 */
static int ur_queue_start(struct ur_queue *q)
{
	sigset_t all, old;
	int ret = 0;

	q->has_leader = true;	/* the first thread's, see ur_first_thread() */
	/* Signals are for libfuse's handlers on the main thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (unsigned int i = 0; i < UR_QUEUE_THREADS && !ret; i++) {
		ret = -pthread_create(&q->threads[i], NULL, i ? ur_thread : ur_first_thread, q);
		if (!ret)
			q->nthreads++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret && q->nthreads)
		fuse_log(FUSE_LOG_NOTICE, "uring: queue %u runs %u threads (%s)\n",
			 q->qid, q->nthreads, strerror(-ret));
	return q->nthreads ? 0 : ret;
}

/*
 * Stop @q's threads serving and wait until all have parked; with
 * @release, let them end and join them.
 */
static void ur_queue_stop(struct ur_queue *q, bool release)
{
	int ret;

	pthread_mutex_lock(&q->lock);
	q->stopping = true;
	pthread_cond_broadcast(&q->idle);
	pthread_mutex_unlock(&q->lock);
	/* Ends the leader's wait for a completion. */
	ret = ur_wake(q);
	if (ret)
		fuse_log(FUSE_LOG_ERR, "error: uring: cannot wake queue %u: %s\n",
			 q->qid, strerror(-ret));
	pthread_mutex_lock(&q->lock);
	while (q->parked < q->nthreads)
		pthread_cond_wait(&q->parked_cond, &q->lock);
	/* Replies handed off when no thread led any more (this thread stays). */
	ret = ur_drain_locked(q, false);
	if (ret)
		fuse_log(FUSE_LOG_ERR, "error: uring: queue %u: %s\n", q->qid,
			 strerror(-ret));
	q->release = release;
	pthread_cond_broadcast(&q->parked_cond);
	pthread_mutex_unlock(&q->lock);
	for (unsigned int i = 0; release && i < q->nthreads; i++)
		pthread_join(q->threads[i], NULL);
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
	ur->se = se;
	ur->payload_size = (payload_size + ur_page - 1) & ~(ur_page - 1);
	ur->map_size = 2 * ur_page + ur->payload_size;
	/* The kernel has a queue for every possible CPU and needs all of them. */
	ur->nqueues = (unsigned int)get_nprocs_conf();
	ur->queues = calloc(ur->nqueues, sizeof(*ur->queues));
	if (!ur->queues)
		goto out_free;
	for (; ninit < ur->nqueues; ninit++) {
		ret = ur_queue_init(ur, &ur->queues[ninit], ninit, fuse_session_fd(se));
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
		 "(%u queues of %d entries and %d threads)\n", ur->nqueues,
		 UR_QUEUE_ENTRIES, UR_QUEUE_THREADS);
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
