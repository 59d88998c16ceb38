// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wb_file.c - one backing file over the cache: the data operations, fsync
 * with errseq reporting, times, and the file's lifetime.
 *
 * The backing descriptor may be swapped for one with wider access
 * (wb_file_upgrade) with dup3(), which replaces the descriptor number
 * atomically: I/O in flight on another thread keeps working.  It may also
 * be closed while the file is idle (wb_file_fd_close; made idle first by
 * wb_file_fd_evict) and given back before the file is used again
 * (wb_file_fd_reopen); wbf->fd is -1 in between.  Idle means that
 * nothing the flushers, reclaim or sync-all may do to the file needs the
 * descriptor: no dirty or writeback blocks,
 * nothing unsynced (the sync must go to the file the data was written
 * through), no pending mtime, no readahead read in flight (it reads
 * through the descriptor it was started with) and a backing size that
 * needs no fix-up.
 * The errseq state (err, err_seq) is the wb_file's, not the
 * descriptor's, so fsync reports the same errors across a reopen.
 *
 * The split tail.  The kernel cuts a FUSE write into requests of at most
 * max_write bytes, each ending where the application's buffer crosses
 * that many pages: with a buffer that is not page aligned every request
 * but the last ends inside a block, and the next one starts there.  A
 * cache that writes such a request as it comes must first read the block
 * it ends in (when not uptodate), which the next request overwrites a
 * moment later.  So a cut write (wb_write_cut) holds those bytes back,
 * and the next write that starts where they end completes the block and
 * writes it whole, with no read.  Every other data operation first
 * applies a held tail just as the plain write would have (tail_settle),
 * so nothing sees the file without it: reads, writes elsewhere, fsync,
 * truncate, fallocate, lseek and flush (and so sync-all, the idle
 * descriptor's close and the file's end).  A tail that cannot be applied
 * stays held, and the operation that tried fails with the error.
 */
#include "wb_i.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/fs.h>

/* Largest chunk wb_copy_range moves per read/write pair. */
#define WB_COPY_CHUNK (1u << 20)

/* Wall-clock time for file times (mtime), which a clock step must move. */
static int64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- backing ops given to blockstate ---- */

static ssize_t backing_read(void *ctx, void *buf, size_t len, off_t off)
{
	return wb_backing_read(ctx, buf, len, off);
}

static int backing_read_start(void *ctx, struct bs_aio *aio)
{
	return wb_backing_read_start(ctx, aio);
}

static bool backing_folio_alloc_fails(void *ctx, off_t off, size_t len)
{
	return wb_backing_alloc_fails(ctx, off, len);
}

static int backing_truncate(void *ctx, off_t size)
{
	struct wb_file *wbf = ctx;
	int ret;

	pthread_mutex_lock(&wbf->size_lock);
	ret = wb_wlog_check();
	if (!ret)
		ret = ftruncate(wbf->fd, size) < 0 ? -errno : 0;
	if (!ret)
		ret = wb_wlog_truncate(wbf->fd, size);
	wbf->backing_size = ret ? -1 : size;
	pthread_mutex_unlock(&wbf->size_lock);
	return ret;
}

static int backing_fallocate(void *ctx, int mode, off_t off, off_t len)
{
	struct wb_file *wbf = ctx;
	int ret;

	pthread_mutex_lock(&wbf->size_lock);
	ret = wb_wlog_check();
	if (!ret)
		ret = fallocate(wbf->fd, mode, off, len) < 0 ? -errno : 0;
	if (!ret)
		ret = wb_wlog_fallocate(wbf->fd, mode, off, len);
	if (!(mode & FALLOC_FL_KEEP_SIZE))
		wbf->backing_size = -1;
	pthread_mutex_unlock(&wbf->size_lock);
	return ret;
}

static const struct bs_backing_ops wb_backing_ops = {
	.read = backing_read,
	.read_start = backing_read_start,
	.truncate = backing_truncate,
	.fallocate = backing_fallocate,
	.folio_alloc_fails = backing_folio_alloc_fails,
};

/* ---- lifetime ---- */

int wb_file_alloc(struct wb_ctx *ctx, int fd, enum wb_access access,
		  struct wb_file **out)
{
	struct wb_file *wbf = calloc(1, sizeof(*wbf));
	struct bs_file *bs;
	struct stat st;
	int ret = -ENOMEM;

	if (!wbf)
		goto out_close;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto out_free;
	}
	wbf->ctx = ctx;
	wbf->fd = fd;
	wbf->ino = st.st_ino;
	atomic_init(&wbf->access, access);
	pthread_mutex_init(&wbf->wb_lock, NULL);
	pthread_mutex_init(&wbf->size_lock, NULL);
	pthread_mutex_init(&wbf->tail_lock, NULL);
	if (S_ISBLK(st.st_mode)) {
		uint64_t bytes;

		if (ioctl(fd, BLKGETSIZE64, &bytes) < 0) {
			ret = -errno;
			goto out_destroy;
		}
		st.st_size = (off_t)bytes;
	}
	wbf->backing_size = st.st_size;
	ret = bs_file_create(ctx->cache, &wb_backing_ops, wbf, st.st_size, &bs);
	if (ret)
		goto out_destroy;
	wb_fstate_init(&wbf->ws, bs);
	bs_file_set_ino(wbf->ws.bs, (uint64_t)st.st_ino);
	if (S_ISBLK(st.st_mode))
		bs_file_fix_size(wbf->ws.bs);
	wb_files_add(ctx, wbf);
	*out = wbf;
	return 0;

out_destroy:
	pthread_mutex_destroy(&wbf->tail_lock);
	pthread_mutex_destroy(&wbf->size_lock);
	pthread_mutex_destroy(&wbf->wb_lock);
out_free:
	free(wbf);
out_close:
	close(fd);
	return ret;
}

int wb_file_upgrade(struct wb_file *wbf, int fd, enum wb_access access)
{
	int ret = 0;

	if (wbf->fd < 0)
		ret = -EBADF;	/* closed: wb_file_fd_reopen() gives it one */
	else if (dup3(fd, wbf->fd, O_CLOEXEC) < 0)
		ret = -errno;
	else
		atomic_store(&wbf->access, access);
	close(fd);
	return ret;
}

enum wb_access wb_file_access(const struct wb_file *wbf)
{
	return atomic_load(&wbf->access);
}

bool wb_file_has_fd(const struct wb_file *wbf)
{
	return wbf->fd >= 0;
}

/*
 * Whether @wbf holds nothing its descriptor is needed for (see the top of
 * this file).  Unlocked, this is only a hint; with wb_lock held it stays
 * true, since the caller of wb_file_fd_close() starts no I/O and a
 * writeback pass finds nothing to do.
 */
static bool fd_idle(struct wb_file *wbf)
{
	bool idle;

	if (bs_file_has_held(wbf->ws.bs) || bs_file_has_unsynced(wbf->ws.bs) ||
	    atomic_load(&wbf->ws.unsynced) || atomic_load(&wbf->mtime_ns) ||
	    atomic_load(&wbf->ws.backoff_ms) || bs_file_reading(wbf->ws.bs) ||
	    atomic_load(&wbf->tail_held))
		return false;
	pthread_mutex_lock(&wbf->size_lock);
	idle = !wbf->resizing && wbf->backing_size == bs_file_size(wbf->ws.bs);
	pthread_mutex_unlock(&wbf->size_lock);
	return idle;
}

int wb_file_fd_close(struct wb_file *wbf)
{
	struct wb_ctx *ctx = wbf->ctx;
	int ret = -EBUSY;

	if (wbf->fd < 0)
		return 0;
	/* Cheap checks first: a dirty file is not worth waiting on its lock. */
	if (bs_file_has_held(wbf->ws.bs) || bs_file_has_unsynced(wbf->ws.bs) ||
	    atomic_load(&wbf->ws.unsynced))
		return -EBUSY;
	pthread_mutex_lock(&wbf->wb_lock);
	/* A clean file's last time goes out now rather than keep the descriptor. */
	wb_stamp_mtime(wbf);
	/*
	 * A walker (flusher, reclaim, sync-all, the files listing) holds a
	 * reference while it looks at a file, and may have decided to sync
	 * or stamp it, or name it, before it became idle: not while one does.
	 * One that comes later finds the file idle and leaves the descriptor
	 * alone.
	 */
	pthread_mutex_lock(&ctx->files_lock);
	if (!wbf->refs && fd_idle(wbf)) {
		close(wbf->fd);
		wbf->fd = -1;
		ret = 0;
	}
	pthread_mutex_unlock(&ctx->files_lock);
	pthread_mutex_unlock(&wbf->wb_lock);
	return ret;
}

int wb_file_fd_evict(struct wb_file *wbf)
{
	int ret = 0;

	if (wbf->fd >= 0)
		ret = wb_file_flush(wbf);
	return ret ? ret : wb_file_fd_close(wbf);
}

int wb_file_fd_reopen(struct wb_file *wbf, int fd, enum wb_access access)
{
	if (wbf->fd >= 0) {
		close(fd);
		return -EBUSY;
	}
	pthread_mutex_lock(&wbf->wb_lock);
	wbf->fd = fd;
	atomic_store(&wbf->access, access);
	pthread_mutex_unlock(&wbf->wb_lock);
	return 0;
}

static int tail_settle(struct wb_file *wbf);

int wb_file_flush(struct wb_file *wbf)
{
	int ret = tail_settle(wbf);

	if (!ret)
		ret = wb_writeback_range(wbf, 0, INT64_MAX);

	if (!ret)
		wb_stamp_mtime(wbf);
	if (!ret && (atomic_load(&wbf->ws.unsynced) || bs_file_has_unsynced(wbf->ws.bs)))
		ret = wb_sync_file(wbf, true);
	return ret;
}

/* Unlink @wbf from the context once no walker uses it, then free it. */
void wb_file_discard(struct wb_file *wbf)
{
	wb_files_del(wbf->ctx, wbf);
	bs_file_destroy(wbf->ws.bs);
	if (wbf->fd >= 0)
		close(wbf->fd);
	pthread_mutex_destroy(&wbf->tail_lock);
	pthread_mutex_destroy(&wbf->size_lock);
	pthread_mutex_destroy(&wbf->wb_lock);
	free(wbf->tail_buf);
	free(wbf);
}

int wb_file_free(struct wb_file *wbf)
{
	int ret = wb_file_flush(wbf);

	if (ret) {
		wb_report(wbf, "writing back", ret);
		return ret;	/* kept: the flushers keep retrying */
	}
	wb_file_discard(wbf);
	return 0;
}

/* ---- data ---- */

ssize_t wb_read(struct wb_file *wbf, struct bs_ra *ra, void *buf, size_t len, off_t off)
{
	int ret = tail_settle(wbf);

	return ret ? ret : bs_read(wbf->ws.bs, ra, buf, len, off);
}

/*
 * A write failed because the cache is full of data that cannot be
 * written back: say so once each time it happens (the writer only sees
 * ENOSPC).
 */
static void report_full(struct wb_ctx *ctx)
{
	struct bs_stats st;
	uint64_t logged = atomic_load(&ctx->full_logged);

	bs_cache_stats(ctx->cache, &st);
	if (st.full_events == logged ||
	    !atomic_compare_exchange_strong(&ctx->full_logged, &logged, st.full_events))
		return;
	wb_log("writes fail with ENOSPC: the cache (cache_size=%llu) is full of data that cannot be written back (%llu bytes dirty, %llu pinned)",
	       (unsigned long long)bs_cache_config(ctx->cache)->cache_size,
	       (unsigned long long)st.dirty_bytes_exact, (unsigned long long)st.pinned_bytes);
}

/* bs_write() and what a write of the cache changes beside the data. */
static ssize_t cache_write(struct wb_file *wbf, const void *buf, size_t len, off_t off)
{
	ssize_t n;

	/*
	 * Onto the flushers' list (the kernel's b_dirty) before the first
	 * block is dirty: reclaim within bs_write() must find this file,
	 * whose age is set only afterwards.  writing keeps it there until
	 * then (see wb_file.on_dirty).
	 */
	atomic_fetch_add(&wbf->writing, 1);
	wb_file_dirtied(wbf);
	n = bs_write(wbf->ws.bs, buf, len, off);
	if (n == -ENOSPC)
		report_full(wbf->ctx);
	if (n > 0) {
		atomic_store(&wbf->mtime_ns, wall_ns());
		wb_fstate_dirtied(wbf->ctx, &wbf->ws);
	}
	atomic_fetch_sub(&wbf->writing, 1);
	if (n > 0)
		wb_flushers_poke(wbf->ctx);
	return n;
}

/*
 * Write the held tail, if any, as it is (reading the rest of its block).
 * Context: tail_lock held.
 */
static int tail_apply(struct wb_file *wbf)
{
	ssize_t n;

	if (!atomic_load(&wbf->tail_held))
		return 0;
	/* One block, so one folio: all of it or an error. */
	n = cache_write(wbf, wbf->tail_buf, wbf->tail_len, wbf->tail_off);
	if (n < 0)
		return (int)n;
	atomic_store(&wbf->tail_held, false);
	return 0;
}

/* Apply a held tail before anything else sees the file: 0 or -errno. */
static int tail_settle(struct wb_file *wbf)
{
	int ret;

	if (!atomic_load(&wbf->tail_held))
		return 0;
	pthread_mutex_lock(&wbf->tail_lock);
	ret = tail_apply(wbf);
	pthread_mutex_unlock(&wbf->tail_lock);
	return ret;
}

/*
 * The held tail and a write of [*off, *off + *len) from *buf: if the write
 * starts where the tail ends, its first bytes complete the tail's block,
 * which is written whole (or with what there is), and *buf, *len, *off
 * move past them, adding them to *done; any other tail is applied as it
 * is.  0 or -errno (the tail then stays held).
 * Context: tail_lock held.
 */
static int tail_join(struct wb_file *wbf, const unsigned char **buf, size_t *len,
		     off_t *off, size_t *done)
{
	size_t bsize = bs_cache_config(wbf->ctx->cache)->block_size, k;
	ssize_t n;

	if (!atomic_load(&wbf->tail_held))
		return 0;
	if (*off != wbf->tail_off + (off_t)wbf->tail_len)
		return tail_apply(wbf);
	k = bsize - wbf->tail_len < *len ? bsize - wbf->tail_len : *len;
	memcpy(wbf->tail_buf + wbf->tail_len, *buf, k);
	n = cache_write(wbf, wbf->tail_buf, wbf->tail_len + k, wbf->tail_off);
	if (n < 0)
		return (int)n;
	atomic_store(&wbf->tail_held, false);
	*buf += k;
	*len -= k;
	*off += (off_t)k;
	*done += k;
	return 0;
}

/*
 * Hold the part of a cut write [off, off + len) that lies in the block it
 * ends in, if that block is inside the file and not uptodate, and write
 * the rest.  Returns the bytes written or held, or -errno; -EAGAIN: not a
 * case for holding (nothing done).
 * Context: tail_lock held, no tail held.
 */
static ssize_t tail_hold(struct wb_file *wbf, const unsigned char *buf, size_t len,
			 off_t off)
{
	size_t bsize = bs_cache_config(wbf->ctx->cache)->block_size;
	off_t end = off + (off_t)len;
	off_t blk = end & ~(off_t)(bsize - 1);
	ssize_t n;

	if (blk == end || blk < off || end > bs_file_size(wbf->ws.bs) ||
	    bs_file_block_uptodate(wbf->ws.bs, blk))
		return -EAGAIN;
	if (!wbf->tail_buf) {
		wbf->tail_buf = malloc(bsize);
		if (!wbf->tail_buf)
			return -EAGAIN;		/* then it is read, as without holding */
	}
	if (blk > off) {
		n = cache_write(wbf, buf, (size_t)(blk - off), off);
		if (n < (ssize_t)(blk - off))
			return n;
	}
	memcpy(wbf->tail_buf, buf + (blk - off), (size_t)(end - blk));
	wbf->tail_off = blk;
	wbf->tail_len = (size_t)(end - blk);
	atomic_store(&wbf->tail_held, true);
	return (ssize_t)len;
}

static ssize_t write_common(struct wb_file *wbf, const void *buf, size_t len, off_t off,
			    uint64_t *dirtied, bool cut)
{
	const unsigned char *p = buf;
	size_t done = 0;
	ssize_t n = 0;
	int ret;

	bs_thread_dirtied_take();	/* what an earlier caller left unclaimed */
	if (!cut && !atomic_load(&wbf->tail_held)) {
		n = cache_write(wbf, p, len, off);
	} else {
		pthread_mutex_lock(&wbf->tail_lock);
		ret = tail_join(wbf, &p, &len, &off, &done);
		if (ret)
			n = ret;
		else if (len && cut)
			n = tail_hold(wbf, p, len, off);
		if (!ret && len && (!cut || n == -EAGAIN))
			n = cache_write(wbf, p, len, off);
		pthread_mutex_unlock(&wbf->tail_lock);
		/* Bytes of the join count even when the rest fails. */
		if (done)
			n = n < 0 ? (ssize_t)done : (ssize_t)done + n;
	}
	if (dirtied)
		*dirtied = bs_thread_dirtied_take();
	return n;
}

ssize_t wb_write(struct wb_file *wbf, const void *buf, size_t len, off_t off,
		 uint64_t *dirtied)
{
	return write_common(wbf, buf, len, off, dirtied, false);
}

ssize_t wb_write_cut(struct wb_file *wbf, const void *buf, size_t len, off_t off,
		     uint64_t *dirtied)
{
	return write_common(wbf, buf, len, off, dirtied, true);
}

void wb_file_attr_sample(struct wb_file *wbf, struct wb_file_attr *attr)
{
	attr->size = bs_file_size(wbf->ws.bs);
	attr->mtime_ns = atomic_load(&wbf->mtime_ns);
}

void wb_file_fix_stat(struct wb_file *wbf, struct stat *st)
{
	struct wb_file_attr attr;

	wb_file_attr_sample(wbf, &attr);
	wb_file_attr_apply(&attr, st);
}

void wb_file_attr_apply(const struct wb_file_attr *attr, struct stat *st)
{
	int64_t ns = attr->mtime_ns;

	st->st_size = attr->size;
	if (ns) {
		struct timespec ts = { ns / 1000000000, ns % 1000000000 };

		st->st_mtim = ts;
		if (ts.tv_sec > st->st_ctim.tv_sec ||
		    (ts.tv_sec == st->st_ctim.tv_sec && ts.tv_nsec > st->st_ctim.tv_nsec))
			st->st_ctim = ts;
	}
}

void wb_file_mtime_set(struct wb_file *wbf, const struct timespec *mtime)
{
	/* Writeback must leave this time on the backing file, not its own. */
	atomic_store(&wbf->mtime_ns, (int64_t)mtime->tv_sec * 1000000000 + mtime->tv_nsec);
}

uint64_t wb_file_err_sample(struct wb_file *wbf)
{
	return wb_errseq_sample(&wbf->ws);
}

int wb_fsync(struct wb_file *wbf, bool datasync, uint64_t *seen)
{
	/* What was written before the call; later writes are not waited for. */
	int ret = tail_settle(wbf);

	if (!ret)
		ret = wb_writeback_range(wbf, 0, bs_file_size(wbf->ws.bs));

	if (!ret) {
		/*
		 * fsync makes the time durable too; fdatasync leaves it to a
		 * later fsync, the flushers or the file's end (stat shows it
		 * meanwhile): stamping costs a journal commit on ext4.
		 */
		if (!datasync)
			wb_stamp_mtime(wbf);
		/* A failure leaves the data dirty: a later fsync writes it again. */
		ret = wb_sync_file(wbf, datasync);
	}
	/* errseq: each cursor hears of each error once. */
	return wb_errseq_check(&wbf->ws, seen, ret);
}

/*
 * A change of the file's size begins or ends: while one is in flight, a
 * writeback pass must not set the backing file's size (wb_sync_size), or
 * it could put back the size it read before the change.  Not the
 * writeback lock: a writer waiting in reclaim holds the file's
 * invalidate_lock and may need that lock, which truncate would then wait
 * for with it held.
 */
static void resize_begin(struct wb_file *wbf)
{
	pthread_mutex_lock(&wbf->size_lock);
	wbf->resizing++;
	pthread_mutex_unlock(&wbf->size_lock);
}

static void resize_end(struct wb_file *wbf)
{
	pthread_mutex_lock(&wbf->size_lock);
	wbf->resizing--;
	pthread_mutex_unlock(&wbf->size_lock);
}

/*
 * Size changes hold tail_lock throughout: a cut write decides whether to
 * hold a tail by the size, which must not change before the tail is held.
 */
int wb_truncate(struct wb_file *wbf, off_t size)
{
	int ret;

	if (size < 0)
		return -EINVAL;
	pthread_mutex_lock(&wbf->tail_lock);
	ret = tail_apply(wbf);
	if (!ret) {
		/* ftruncate stamps the backing file itself; a pending time is older. */
		atomic_store(&wbf->mtime_ns, 0);
		resize_begin(wbf);
		ret = bs_truncate(wbf->ws.bs, size);
		resize_end(wbf);
	}
	pthread_mutex_unlock(&wbf->tail_lock);
	return ret;
}

static int fallocate_locked(struct wb_file *wbf, int mode, off_t off, off_t len)
{
	int ret;

	/* As Linux does: dirty data of the range reaches the disk first. */
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
		ret = wb_writeback_range(wbf, off, off + len);
		if (ret)
			return ret;
	}
	if (mode & FALLOC_FL_KEEP_SIZE)
		return bs_fallocate(wbf->ws.bs, mode, off, len);
	resize_begin(wbf);
	ret = bs_fallocate(wbf->ws.bs, mode, off, len);
	resize_end(wbf);
	return ret;
}

int wb_fallocate(struct wb_file *wbf, int mode, off_t off, off_t len)
{
	int ret;

	if (off < 0 || len <= 0)
		return -EINVAL;
	if (len > INT64_MAX - off)
		return -EFBIG;
	pthread_mutex_lock(&wbf->tail_lock);
	ret = tail_apply(wbf);
	if (!ret)
		ret = fallocate_locked(wbf, mode, off, len);
	pthread_mutex_unlock(&wbf->tail_lock);
	return ret;
}

off_t wb_lseek(struct wb_file *wbf, off_t off, int whence)
{
	off_t ret;
	int err;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	/* Holes are the backing file's: let it see the cached data first. */
	err = tail_settle(wbf);
	if (!err)
		err = wb_writeback_range(wbf, off, INT64_MAX);
	if (err)
		return err;
	if (off >= bs_file_size(wbf->ws.bs))
		return -ENXIO;
	ret = lseek(wbf->fd, off, whence);
	return ret < 0 ? -errno : ret;
}

static bool ranges_overlap(off_t a, off_t b, size_t len)
{
	return a < b ? b - a < (off_t)len : a - b < (off_t)len;
}

ssize_t wb_copy_range(struct wb_file *src, struct bs_ra *src_ra, off_t src_off,
		      struct wb_file *dst, off_t dst_off, size_t len)
{
	size_t chunk = len < WB_COPY_CHUNK ? len : WB_COPY_CHUNK;
	size_t done = 0;
	char *buf;

	if (src_off < 0 || dst_off < 0)
		return -EINVAL;
	if (len > (size_t)(INT64_MAX - src_off) ||
	    len > (size_t)(INT64_MAX - dst_off))
		return -EFBIG;
	if (src == dst && ranges_overlap(src_off, dst_off, len))
		return -EINVAL;
	if (len == 0)
		return 0;
	buf = malloc(chunk);
	if (!buf)
		return -ENOMEM;
	while (done < len) {
		size_t want = len - done < chunk ? len - done : chunk;
		ssize_t got = wb_read(src, src_ra, buf, want, src_off + (off_t)done);
		ssize_t put;

		if (got <= 0) {
			if (got < 0 && done == 0)
				done = (size_t)got;
			break;
		}
		put = wb_write(dst, buf, (size_t)got, dst_off + (off_t)done, NULL);
		if (put < 0) {
			if (done == 0)
				done = (size_t)put;
			break;
		}
		done += (size_t)got;
		if ((size_t)got < want)
			break;
	}
	free(buf);
	return (ssize_t)done;
}
