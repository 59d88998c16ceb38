// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * backing.c - I/O on the backing files: psync, io_uring or null, and the
 * fault injection point.
 *
 * Writeback hands over a batch of writes (each a few iovecs at one
 * offset).  With io_uring the whole batch goes to the kernel in one
 * io_uring_enter(); completions that wrote less than asked are resubmitted
 * for the rest, so callers only see whole writes or an errno.  Each thread
 * that writes back (flushers, and FUSE workers doing fsync) has its own
 * ring, made on first use.  Faults are applied to each completion, so the
 * same spec hits every backend; an fsync fault replaces the sync itself.
 *
 * Readahead's reads are asynchronous: one reader thread per context
 * submits and reaps them on a ring of its own (below).
 *
 * The mount's side of the writeback engine (engine.h) is here too: its
 * submit copies a batch into a bounce buffer and writes it, its report
 * logs, and after writeback the backing file's metadata is put right: the mtime of
 * the last cached write (wb_stamp_mtime) and the cache's size
 * (wb_sync_size).
 *
 * With a write log (writelog.c) every write is recorded before it is
 * issued, each resubmission of the rest of a short one too, and a write
 * the backing file system failed is marked so (the real result, before
 * any injected fault); a sync is recorded once it returned success.
 */
#include "wb_i.h"
#include "wb_probes.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- faults ---- */

static void fault_name(void *arg, char *buf, size_t len)
{
	wb_file_path(arg, buf, len);
}

/*
 * Apply the fault, if any, to a completion of @len bytes asked at @off
 * that returned @res: an errno, or half of what was done (whole blocks
 * for O_DIRECT backing files).
 */
static ssize_t fault_apply(struct wb_file *wbf, enum wb_fault_op op, off_t off,
			   size_t len, ssize_t res)
{
	struct wb_ctx *ctx = wbf->ctx;

	return wb_fault_apply(ctx, fault_name, wbf, op, off, len, res,
			      ctx->cfg.backing_direct ? bs_cache_config(ctx->cache)->block_size : 1);
}

/*
 * Whether readahead's new folio of @len bytes at @off cannot be had (the
 * bs_backing_ops folio_alloc_fails): an alloc fault fires for it.
 */
bool wb_backing_alloc_fails(struct wb_file *wbf, off_t off, size_t len)
{
	return fault_apply(wbf, WB_FAULT_ALLOC, off, len, 0) < 0;
}

/* ---- reads and syncs ---- */

ssize_t wb_backing_read(struct wb_file *wbf, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	if (wbf->ctx->io == WB_IO_NULL) {
		memset(buf, 0, len);
		return (ssize_t)len;
	}
	while (done < len) {
		ssize_t n = pread(wbf->fd, (char *)buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		n = fault_apply(wbf, WB_FAULT_READ, off + (off_t)done, len - done,
				n < 0 ? -errno : n);
		if (n < 0)
			return done ? (ssize_t)done : n;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int wb_backing_fsync(struct wb_file *wbf, bool datasync)
{
	/*
	 * An fsync fault stands for a device flush that failed: it fires
	 * instead of the real call, so nothing written since the last sync
	 * is known to be durable (a fault after a sync that succeeded would
	 * test nothing).
	 */
	int ret = (int)fault_apply(wbf, WB_FAULT_FSYNC, 0, 0, 0);
	uint64_t begin;

	if (ret || wbf->ctx->io == WB_IO_NULL)
		return ret;
	/*
	 * The sync record covers the writes recorded before @begin, so none
	 * of them may still be in flight: a pass records each write before
	 * issuing it and holds wb_lock until all its writes completed, so
	 * with that lock taken no recorded write of this file is pending.
	 * (fsync(2) does not cover a write that completes after it began.)
	 */
	if (wb_wlog_on()) {
		pthread_mutex_lock(&wbf->wb_lock);
		begin = wb_wlog_seq();
		pthread_mutex_unlock(&wbf->wb_lock);
	} else {
		begin = 0;
	}
	ret = wb_wlog_check();
	if (!ret && (datasync ? fdatasync(wbf->fd) : fsync(wbf->fd)) < 0)
		ret = -errno;
	if (!ret)
		ret = wb_wlog_sync(wbf->fd, datasync, false, begin);
	return ret;
}

/* ---- writes ---- */

/* Account @n bytes done on @io; advance its iovecs.  True when complete. */
static bool io_advance(struct wb_io *io, size_t n)
{
	io->off += (off_t)n;
	io->len -= n;
	while (io->iovcnt > 0 && n >= io->iov->iov_len) {
		n -= io->iov->iov_len;
		io->iov++;
		io->iovcnt--;
	}
	if (io->iovcnt > 0) {
		io->iov->iov_base = (char *)io->iov->iov_base + n;
		io->iov->iov_len -= n;
	}
	return io->len == 0;
}

static void write_psync(struct wb_file *wbf, struct wb_io *io)
{
	struct wb_ctx *ctx = wbf->ctx;

	while (io->len) {
		uint64_t seq;
		ssize_t n = wb_wlog_write(wbf->fd, io->iov, io->iovcnt, io->off, io->len, &seq);

		if (n < 0) {
			io->res = (int)n;
			return;
		}
		n = pwritev(wbf->fd, io->iov, io->iovcnt, io->off);
		atomic_fetch_add(&ctx->backing_write_submits, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			wb_wlog_write_failed(wbf->fd, seq, -errno);
		n = fault_apply(wbf, WB_FAULT_WRITE, io->off, io->len, n < 0 ? -errno : n);
		if (n < 0) {
			io->res = (int)n;
			return;
		}
		if (n == 0) {
			io->res = -EIO;
			return;
		}
		atomic_fetch_add(&ctx->backing_write_bytes, (uint64_t)n);
		io_advance(io, (size_t)n);
	}
	io->res = 0;
}

static __thread struct io_uring ring;
static __thread bool ring_ready;
static __thread bool ring_broken;	/* failed once: this thread uses pwritev */
static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;

static void ring_exit(void *arg)
{
	(void)arg;
	if (ring_ready) {
		io_uring_queue_exit(&ring);
		ring_ready = false;
	}
}

static void ring_key_init(void)
{
	if (pthread_key_create(&ring_key, ring_exit))
		abort();
}

/* This thread's ring; NULL if one cannot be had (then psync is used). */
static struct io_uring *thread_ring(void)
{
	if (ring_ready)
		return &ring;
	if (ring_broken)
		return NULL;
	pthread_once(&ring_once, ring_key_init);
	if (io_uring_queue_init(WB_BATCH, &ring, 0) < 0)
		return NULL;
	ring_ready = true;
	pthread_setspecific(ring_key, &ring);
	return &ring;
}

/*
 * The ring could not take the rest of a batch.  No write of ours is in
 * flight any more (every submitted one has been reaped), but the ones
 * that were not submitted still sit in its submission queue, where the
 * next io_uring_enter() would start them: the ring goes, and this thread
 * writes with pwritev from now on.
 */
static void ring_break(int err)
{
	static atomic_bool said;

	ring_exit(NULL);
	ring_broken = true;
	if (!atomic_exchange(&said, true))
		wb_log("notice: io_uring submission failed (%s); backing writes use pwritev",
		       strerror(-err));
}

/*
 * Wait for one completion.  Every write submitted completes, and the
 * completion queue (twice the submission queue) cannot overflow, so an
 * error here is transient: retry it, never give the write up while the
 * kernel may still be doing it (writing it again meanwhile, or reusing
 * its buffer, would race with it).
 */
static struct io_uring_cqe *reap_one(struct io_uring *r)
{
	struct io_uring_cqe *cqe;
	int ret;

	while ((ret = io_uring_wait_cqe(r, &cqe)) < 0) {
		if (ret != -EINTR && ret != -EAGAIN) {
			struct timespec ts = { 0, 1000000 };

			nanosleep(&ts, NULL);
		}
	}
	return cqe;
}

/* Account a completion of @w (logged as @seq) that returned @res. */
static bool uring_done(struct wb_file *wbf, struct wb_io *w, uint64_t seq, int res)
{
	ssize_t out;

	if (res < 0)
		wb_wlog_write_failed(wbf->fd, seq, res);
	out = fault_apply(wbf, WB_FAULT_WRITE, w->off, w->len, res);

	if (out < 0) {
		w->res = (int)out;
	} else if (out == 0) {
		w->res = -EIO;
	} else {
		atomic_fetch_add(&wbf->ctx->backing_write_bytes, (uint64_t)out);
		return !io_advance(w, (size_t)out);
	}
	return false;
}

/*
 * Submit every unfinished write of @io[0..n) and reap their completions;
 * returns how many are still unfinished (short completions, to submit
 * again), or -errno if the ring failed: then every write that was
 * submitted has completed, and the others are in @io with nothing done.
 */
static int uring_round(struct wb_file *wbf, struct io_uring *r, struct wb_io *io, int n)
{
	struct wb_ctx *ctx = wbf->ctx;
	int queued = 0, submitted = 0, reaped = 0, pending = 0, err = 0, busy = 0;
	uint64_t seq[WB_BATCH];

	for (int i = 0; i < n; i++) {
		struct io_uring_sqe *sqe;

		if (io[i].res || !io[i].len)
			continue;
		io[i].res = wb_wlog_write(wbf->fd, io[i].iov, io[i].iovcnt, io[i].off,
					  io[i].len, &seq[i]);
		if (io[i].res)
			continue;
		sqe = io_uring_get_sqe(r);
		io_uring_prep_writev(sqe, wbf->fd, io[i].iov, (unsigned int)io[i].iovcnt,
				     (uint64_t)io[i].off);
		io_uring_sqe_set_data64(sqe, (uint64_t)i);
		queued++;
	}
	while (reaped < queued) {
		struct io_uring_cqe *cqe;
		uint64_t i;

		if (submitted < queued && !err) {
			int ret = io_uring_submit(r);

			atomic_fetch_add(&ctx->backing_write_submits, 1);
			if (ret > 0) {
				submitted += ret;
			} else if ((ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) ||
				   busy++ == 1000) {
				err = ret < 0 ? ret : -EIO;
			} else if (submitted == reaped) {
				/* Busy with nothing of ours to wait for: try again. */
				sched_yield();
				continue;
			}
		}
		if (reaped == submitted)
			break;		/* the ring failed: nothing of ours in flight */
		cqe = reap_one(r);
		i = io_uring_cqe_get_data64(cqe);
		pending += uring_done(wbf, &io[i], seq[i], cqe->res);
		io_uring_cqe_seen(r, cqe);
		reaped++;
	}
	return err ? err : pending;
}

void wb_backing_write(struct wb_file *wbf, struct wb_io *io, int n)
{
	struct wb_ctx *ctx = wbf->ctx;
	struct io_uring *r = NULL;

	for (int i = 0; i < n; i++)
		io[i].res = 0;
	atomic_fetch_add(&ctx->backing_write_ios, (uint64_t)n);
	if (ctx->io == WB_IO_NULL) {
		for (int i = 0; i < n; i++)
			atomic_fetch_add(&ctx->backing_write_bytes, io[i].len);
		return;
	}
	/*
	 * One write gains nothing from a ring, and on ext4 io_uring hands a
	 * buffered write to a worker thread (about 150 us here): pwritev.
	 */
	if (ctx->io == WB_IO_URING && n > 1)
		r = thread_ring();
	if (!r) {
		for (int i = 0; i < n; i++)
			write_psync(wbf, &io[i]);
		return;
	}
	for (;;) {
		int ret = uring_round(wbf, r, io, n);

		if (!ret)
			return;
		if (ret < 0) {
			/* Nothing in flight: finish the rest with pwritev. */
			ring_break(ret);
			for (int i = 0; i < n; i++) {
				if (!io[i].res && io[i].len)
					write_psync(wbf, &io[i]);
			}
			return;
		}
	}
}

/* ---- the backing file's metadata after writeback ---- */

void wb_stamp_mtime(struct wb_file *wbf)
{
	int64_t ns = atomic_load(&wbf->mtime_ns);
	struct timespec tv[2] = {
		{ .tv_nsec = UTIME_OMIT },
		{ .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 },
	};

	if (!ns || wbf->ctx->io == WB_IO_NULL)
		return;
	if (futimens(wbf->fd, tv) < 0) {
		/*
		 * Only the owner may set a time: a daemon writing back another
		 * user's file it may write leaves the writeback's own mtime.
		 */
		if (errno != EPERM) {
			wb_report(wbf, "setting the modification time of", -errno);
			return;
		}
	}
	if (!bs_file_has_held(wbf->ws.bs))
		atomic_compare_exchange_strong(&wbf->mtime_ns, &ns, 0);
}

/*
 * Make the backing file's size the cache's once its data is written: direct
 * I/O writes the block holding EOF whole (one too long), and a file whose
 * tail was punched or never written has nothing that would extend it.
 * The size last set or seen is kept, so this costs no system call when
 * nothing changed it.
 */
void wb_sync_size(struct wb_file *wbf)
{
	struct stat st;
	off_t size;

	if (wbf->ctx->io == WB_IO_NULL)
		return;
	pthread_mutex_lock(&wbf->size_lock);
	/*
	 * The size is read under size_lock, with no truncate in flight: one
	 * that starts later waits for the lock, so this cannot put back a
	 * size from before it (that one sets the backing size itself).
	 */
	if (wbf->resizing)
		goto out;
	size = bs_file_size(wbf->ws.bs);
	if (wbf->backing_size == size)
		goto out;
	wbf->backing_size = -1;
	if (fstat(wbf->fd, &st) < 0 || !S_ISREG(st.st_mode))
		goto out;
	if (st.st_size != size) {
		/* Longer only if direct I/O wrote past EOF; shorter if nothing reached the end. */
		int err = wb_wlog_check();

		if (!err && ftruncate(wbf->fd, size) < 0)
			err = -errno;
		if (!err)
			err = wb_wlog_truncate(wbf->fd, size);
		if (err) {
			wb_report(wbf, "setting the size of", err);
			goto out;
		}
		wb_fstate_unsynced(wbf->ctx, &wbf->ws);
	}
	wbf->backing_size = size;
out:
	pthread_mutex_unlock(&wbf->size_lock);
}

/* ---- the engine's ops: writeback batches through bounce buffers ---- */

/*
 * Bounce memory for one batch, mapped with mmap() so that releasing it
 * gives it back to the kernel at once, and so that it never moves glibc's
 * dynamic mmap threshold (a freed multi-MiB malloc chunk raises it, after
 * which every thread's large allocations stay in per-thread arenas).
 *
 * Each thread keeps one buffer between batches, so that a fresh one does
 * not fault in and zero every page again; only the pages a batch used are
 * ever touched.  A flusher keeps one big enough for any batch (see
 * bounce_keep); any other thread that writes back (a FUSE worker in fsync
 * or reclaim) keeps at most BOUNCE_KEEP_OTHER bytes, so that idle workers
 * do not each pin a flusher's buffer.
 */

#define BOUNCE_KEEP_OTHER (256u << 10)

struct bounce {
	void *mem;
	size_t size;
};

static pthread_key_t bounce_key;
static bool bounce_key_ok;		/* set once, under bounce_once */
static pthread_once_t bounce_once = PTHREAD_ONCE_INIT;
static __thread bool bounce_flusher;	/* this thread is a flusher */

static void *bounce_map(size_t size)
{
	void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return mem == MAP_FAILED ? NULL : mem;
}

static void bounce_free(void *p)
{
	struct bounce *b = p;

	if (b->mem)
		munmap(b->mem, b->size);
	free(b);
}

static void bounce_key_init(void)
{
	/* Without the key every batch just maps its own (see bounce_get). */
	bounce_key_ok = pthread_key_create(&bounce_key, bounce_free) == 0;
}

static size_t page_round(size_t len)
{
	return (len + BS_PAGE_SIZE - 1) & ~(size_t)(BS_PAGE_SIZE - 1);
}

/* The most a thread keeps: for a flusher, the most a batch needs. */
static size_t bounce_keep(const struct wb_ctx *ctx)
{
	if (!bounce_flusher)
		return BOUNCE_KEEP_OTHER;
	return WB_FP_BATCH_BYTES + ctx->cfg.max_io + (size_t)WB_BATCH * BS_PAGE_SIZE;
}

/*
 * Page-aligned memory for @size bytes (a multiple of the page size), or
 * NULL; give it back with bounce_put().  The thread's kept buffer if the
 * batch fits in @keep bytes, else a mapping of its own.
 */
static void *bounce_get(size_t size, size_t keep)
{
	struct bounce *b;
	void *mem;

	pthread_once(&bounce_once, bounce_key_init);
	if (size <= keep && bounce_key_ok) {
		b = pthread_getspecific(bounce_key);
		if (!b && (b = calloc(1, sizeof(*b))) && pthread_setspecific(bounce_key, b)) {
			free(b);
			b = NULL;
		}
		if (b && b->size >= size)
			return b->mem;
		if (b && (mem = bounce_map(keep))) {
			if (b->mem)
				munmap(b->mem, b->size);
			b->mem = mem;
			b->size = keep;
			return mem;
		}
	}
	return bounce_map(size);
}

static void bounce_put(void *mem, size_t size)
{
	struct bounce *b = bounce_key_ok ? pthread_getspecific(bounce_key) : NULL;

	if (!b || mem != b->mem)
		munmap(mem, size);
}

void wb_backing_thread_is_flusher(void)
{
	bounce_flusher = true;
}

/*
 * Give the batch's writes a page-aligned piece each of one bounce buffer
 * (for O_DIRECT) holding a snapshot of their runs, copied under their
 * folio locks, so a write that lands meanwhile can neither tear what is
 * written nor race with the I/O (it dirties the blocks again instead).
 * Sets *@mem and *@mem_len (for bounce_put); 0, or -ENOMEM (then nothing
 * is allocated).
 */
static int bounce_fill(struct wb_ctx *ctx, struct wb_pass *p, void **mem, size_t *mem_len)
{
	size_t at = 0, total = 0;

	for (int k = 0; k < p->nr_io; k++)
		total += page_round(p->io[k].len);
	*mem_len = total;
	*mem = bounce_get(total, bounce_keep(ctx));
	if (!*mem)
		return -ENOMEM;
	for (int k = 0; k < p->nr_io; k++) {
		p->iov[k].iov_base = (char *)*mem + at;
		p->iov[k].iov_len = p->io[k].len;
		at += page_round(p->io[k].len);
	}
	for (int i = 0, k = -1; i < p->nr_runs; i++) {
		if (p->group_of[i] != k) {
			k = p->group_of[i];
			at = 0;
		}
		bs_wb_copy(&p->runs[i], (char *)p->iov[k].iov_base + at);
		at += p->runs[i].len;
	}
	return 0;
}

/* Writes of @io[0..n) are done: what they tell of the backing file's size. */
static void note_written_size(struct wb_file *wbf, const struct wb_io *io,
			      const off_t *end, int n)
{
	pthread_mutex_lock(&wbf->size_lock);
	for (int g = 0; g < n && wbf->backing_size >= 0; g++) {
		if (io[g].res)
			wbf->backing_size = -1;	/* a failed write may have extended it */
		else if (end[g] > wbf->backing_size)
			wbf->backing_size = end[g];
	}
	pthread_mutex_unlock(&wbf->size_lock);
}

/*
 * The engine's submit (struct wb_engine_ops): the batch's writes, from a
 * bounce buffer, complete before it returns.
 */
static int engine_submit(void *arg, struct wb_pass *p)
{
	struct wb_file *wbf = wb_file_of(p->file);
	off_t ends[WB_BATCH];
	size_t mem_len;
	void *mem;
	int ret;

	(void)arg;
	ret = bounce_fill(wbf->ctx, p, &mem, &mem_len);
	if (ret)
		return ret;
	wb_probe_batch(wbf, p->runs, p->nr_runs, p->budgeted ? &p->budget : NULL,
		       p->why != WB_PASS_SYNC, p->start, p->end);
	/* io[g].off and len advance as writes complete: keep the ends. */
	for (int g = 0; g < p->nr_io; g++)
		ends[g] = p->io[g].off + (off_t)p->io[g].len;
	wb_backing_write(wbf, p->io, p->nr_io);
	note_written_size(wbf, p->io, ends, p->nr_io);
	bounce_put(mem, mem_len);
	return 0;
}

static int64_t engine_now(void *arg)
{
	(void)arg;
	return wb_now_ns();
}

/* A run of failures begins or ends: logged, with the backing path. */
static void engine_report(void *arg, struct wb_fstate *f, const char *what, int err)
{
	char path[PATH_MAX];

	(void)arg;
	wb_file_path(wb_file_of(f), path, sizeof(path));
	if (err)
		wb_log("error: %s %s: %s (kept dirty, retried in the background)",
		       what, path, strerror(-err));
	else
		wb_log("writing back %s works again", path);
}

static void engine_written_whole(void *arg, struct wb_fstate *f)
{
	(void)arg;
	wb_sync_size(wb_file_of(f));
}

static void engine_turn_written(void *arg, struct wb_fstate *f)
{
	(void)arg;
	wb_stamp_mtime(wb_file_of(f));
}

static void engine_dirtied(void *arg, struct wb_fstate *f)
{
	(void)arg;
	wb_file_dirtied(wb_file_of(f));
}

const struct wb_engine_ops wb_backing_engine_ops = {
	.submit = engine_submit,
	.now = engine_now,
	.report = engine_report,
	.written_whole = engine_written_whole,
	.turn_written = engine_turn_written,
	.dirtied = engine_dirtied,
};

/* ---- readahead's reads: one ring, one thread ---- */

/*
 * Readahead (blockstate) starts reads it does not wait for.  They go to
 * one reader thread per context, which alone submits to and reaps from
 * its ring: the page-cache copy of a buffered read then runs on that
 * thread (io_uring runs a request's completion work on the task that
 * submitted it), beside the FUSE worker that asked, which is the overlap
 * readahead is for.  A worker queues the read and wakes the thread with
 * an eventfd the thread keeps a read posted on.
 *
 * At most WB_READER_DEPTH reads are in the ring; more wait in the queue.
 * A read that comes back short is finished here with preadv (io_uring
 * returns short only at EOF or when interrupted), and the injected read
 * fault applies to each completion as to a synchronous read.
 */
#define WB_READER_DEPTH 64u
#define WB_READER_WAKE 0	/* user_data of the eventfd read */

struct wb_read {
	struct bs_aio *aio;
	struct wb_file *wbf;
	int fd;				/* wbf's descriptor when started: kept open
					 * meanwhile (fd_idle sees the read) */
	struct wb_read *next;
};

/*
 * lock protects the queue and stopping; the ring, wake_buf and inflight
 * are the thread's alone.
 */
struct wb_reader {
	struct io_uring ring;
	pthread_t thread;
	int efd;
	uint64_t wake_buf;
	unsigned int inflight;
	pthread_mutex_t lock;
	struct wb_read *head, **tail;
	bool stopping;
};

/* Finish the rest of a short read synchronously; the total read. */
static ssize_t read_rest(struct wb_read *rd, ssize_t res)
{
	struct bs_aio *aio = rd->aio;
	size_t done = (size_t)res;

	while (done < aio->len) {
		struct iovec iov[IOV_MAX];
		size_t skip = done;
		int cnt = 0;
		ssize_t n;

		for (int i = 0; i < aio->iovcnt && cnt < IOV_MAX; i++) {
			if (skip >= aio->iov[i].iov_len) {
				skip -= aio->iov[i].iov_len;
				continue;
			}
			iov[cnt].iov_base = (char *)aio->iov[i].iov_base + skip;
			iov[cnt++].iov_len = aio->iov[i].iov_len - skip;
			skip = 0;
		}
		n = preadv(rd->fd, iov, cnt, aio->off + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return done ? (ssize_t)done : -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static void read_complete(struct wb_read *rd, ssize_t res)
{
	struct bs_aio *aio = rd->aio;

	if (res == -EINTR || res == -EAGAIN)
		res = 0;	/* nothing read yet: preadv reads it all */
	if (res >= 0 && (size_t)res < aio->len)
		res = read_rest(rd, res);
	res = fault_apply(rd->wbf, WB_FAULT_READ, aio->off, aio->len, res);
	free(rd);
	aio->done(aio, res);
}

static void reader_wake(struct wb_reader *r)
{
	uint64_t one = 1;

	while (write(r->efd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

/* Post the read of the eventfd that wakes the thread; false if the ring is full. */
static bool arm_wake(struct wb_reader *r)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);

	if (!sqe)
		return false;
	io_uring_prep_read(sqe, r->efd, &r->wake_buf, sizeof(r->wake_buf), 0);
	io_uring_sqe_set_data64(sqe, WB_READER_WAKE);
	return true;
}

/* Move queued reads into the ring while it has room. */
static void reader_fill(struct wb_reader *r)
{
	pthread_mutex_lock(&r->lock);
	while (r->head && r->inflight < WB_READER_DEPTH) {
		struct wb_read *rd = r->head;
		struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);

		if (!sqe)
			break;
		r->head = rd->next;
		if (!r->head)
			r->tail = &r->head;
		io_uring_prep_readv(sqe, rd->fd, rd->aio->iov, (unsigned int)rd->aio->iovcnt,
				    (uint64_t)rd->aio->off);
		io_uring_sqe_set_data(sqe, rd);
		r->inflight++;
	}
	pthread_mutex_unlock(&r->lock);
}

static void *reader_main(void *arg)
{
	struct wb_reader *r = arg;
	bool armed;

	pthread_setname_np(pthread_self(), "ffs-reader");
	armed = arm_wake(r);

	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned int head, seen = 0;
		bool done;
		int ret;

		reader_fill(r);
		ret = io_uring_submit_and_wait(&r->ring, 1);
		if (ret < 0 && ret != -EINTR) {
			/*
			 * Reads in flight still complete, and readers wait for
			 * them: retry (EAGAIN, EBUSY and ENOMEM pass), never
			 * give the ring up.
			 */
			static atomic_bool said;

			if (!atomic_exchange(&said, true))
				wb_log("notice: readahead ring: %s; retrying", strerror(-ret));
			nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
		}
		io_uring_for_each_cqe(&r->ring, head, cqe) {
			void *data = io_uring_cqe_get_data(cqe);

			seen++;
			if (io_uring_cqe_get_data64(cqe) == WB_READER_WAKE) {
				armed = false;
				continue;
			}
			r->inflight--;
			read_complete(data, cqe->res);
		}
		io_uring_cq_advance(&r->ring, seen);
		if (!armed)
			armed = arm_wake(r);
		pthread_mutex_lock(&r->lock);
		done = r->stopping && !r->head && !r->inflight;
		pthread_mutex_unlock(&r->lock);
		if (done)
			return NULL;
	}
}

int wb_backing_read_start(struct wb_file *wbf, struct bs_aio *aio)
{
	struct wb_reader *r = wbf->ctx->reader;
	struct wb_read *rd;

	if (!r || wbf->fd < 0)
		return -EOPNOTSUPP;
	rd = malloc(sizeof(*rd));
	if (!rd)
		return -ENOMEM;
	*rd = (struct wb_read){ .aio = aio, .wbf = wbf, .fd = wbf->fd };
	pthread_mutex_lock(&r->lock);
	*r->tail = rd;
	r->tail = &rd->next;
	pthread_mutex_unlock(&r->lock);
	reader_wake(r);
	return 0;
}

static void reader_free(struct wb_reader *r)
{
	io_uring_queue_exit(&r->ring);
	close(r->efd);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static int reader_start(struct wb_ctx *ctx)
{
	struct wb_reader *r = calloc(1, sizeof(*r));
	int ret;

	if (!r)
		return -ENOMEM;
	r->efd = eventfd(0, EFD_CLOEXEC);
	if (r->efd < 0) {
		ret = -errno;
		free(r);
		return ret;
	}
	ret = io_uring_queue_init(2 * WB_READER_DEPTH, &r->ring, 0);
	if (ret < 0) {
		close(r->efd);
		free(r);
		return ret;
	}
	pthread_mutex_init(&r->lock, NULL);
	r->tail = &r->head;
	ret = -pthread_create(&r->thread, NULL, reader_main, r);
	if (ret) {
		reader_free(r);
		return ret;
	}
	ctx->reader = r;
	return 0;
}

static void reader_stop(struct wb_ctx *ctx)
{
	struct wb_reader *r = ctx->reader;

	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stopping = true;
	pthread_mutex_unlock(&r->lock);
	reader_wake(r);
	pthread_join(r->thread, NULL);
	ctx->reader = NULL;
	reader_free(r);
}

int wb_backing_init(struct wb_ctx *ctx)
{
	struct io_uring probe;
	int ret;

	ctx->io = ctx->cfg.backing_io;
	if (ctx->io != WB_IO_URING)
		return 0;
	ret = io_uring_queue_init(4, &probe, 0);
	if (ret < 0) {
		wb_log("notice: io_uring cannot be set up (%s); backing writes use pwritev",
		       strerror(-ret));
		ctx->io = WB_IO_PSYNC;
		return 0;
	}
	io_uring_queue_exit(&probe);
	ret = reader_start(ctx);
	if (ret)
		wb_log("notice: the readahead ring cannot be set up (%s); readahead reads synchronously",
		       strerror(-ret));
	return 0;
}

void wb_backing_exit(struct wb_ctx *ctx)
{
	reader_stop(ctx);
	ring_exit(NULL);	/* this thread's; the others' go with their threads */
}
