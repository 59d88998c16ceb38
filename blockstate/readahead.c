// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * readahead.c - reading ahead of a sequential reader, the way Linux's
 * mm/readahead.c does it, so that a stream is read in windows that grow
 * and (under the "kernel" sizing policy) into folios that grow with them.
 *
 * Each file has one readahead state (struct bs_ra_state, in 4 KiB pages):
 * the last window [start, start + size) and how much of it, async_size,
 * was read ahead of the reader.  Two events move it:
 *
 * - Sync readahead, when a read needs a page that is not cached.  If the
 *   read starts the file, continues the previous read (its first page is
 *   the previous read's last or the one after), or is larger than the
 *   largest window, a new window starts at the missing page:
 *       size = 4 x req   if req (rounded up to a power of two) <= max / 32
 *              2 x req   if <= max / 4,   else max
 *   with async_size = size - req (the part beyond the request).  Else the
 *   pages just before it are counted: if more of them are cached than the
 *   read asks for, a stream lost track of resumes with a window of
 *   (that count, doubled if cached back to the file's start) + req, else
 *   the read is random and reads only what it needs.
 * - Async readahead, when a read touches the folio marked in the last
 *   window (the one holding page start + size - async_size): the next
 *   window follows the last one, and grows:
 *       size = max(size, 4 x size if size < max / 16,
 *                        2 x size if size <= max / 2, else max)
 *   trimmed so that it ends on a multiple of the folio size it asks for.
 *
 * Folio order: a sync window asks for order 0; each async window asks for
 * the previous window's order + 2, at most folio_size, at most the log2 of
 * the window, and no more than the alignment of each folio's first page
 * allows, as page_cache_ra_order() does since the v6.17 change that keeps
 * the order in the state.  So a stream read 8 KiB at a time with a 2 MiB
 * window goes 4 KiB, 16 KiB, 32-64 KiB, 128-256 KiB, 512 KiB, 1 MiB, then
 * 2 MiB folios from about the fourth MiB on.  Where a folio is in the way,
 * the rest of the window falls back to the smallest folios, as the kernel
 * falls back to page_cache_ra_unbounded().  The sizing policy has the last
 * word (access BS_SIZE_READAHEAD): "kernel" takes the order asked for,
 * "fixed" makes folio_size folios whatever readahead asks.
 *
 * I/O: new folios are read whole (to EOF); folios already there, only in
 * their blocks inside the window that are not uptodate, and not at all
 * while another read into them is in flight.  Runs adjacent in the file
 * are one backing read, as the kernel's read_pages() builds one bio over
 * the window's folios, straight into the folios' memory.  Where the
 * backing ops can start a read (read_start: io_uring in writeback), the
 * whole window is read asynchronously, as the kernel submits readahead
 * bios and returns: bs_read() then waits only for the folios it copies
 * from (their rd_runs), and a window read ahead of the reader is read
 * while the reader goes on.  Else (psync, the simulator) it is read here,
 * before the read call that started it returns.
 *
 * Readahead is off when readahead_kb is 0.  It runs under the file's
 * invalidate_lock (shared) from bs_read(); its state is under ra_lock
 * (a leaf, never held across I/O or another blockstate lock).  A read
 * started here may end after that lock is dropped: truncate and punch
 * wait for it on each folio (bs_folio_wait_io), bs_file_destroy() for
 * all of the file's (nr_aio).
 */
#include "bs_i.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static uint64_t max_pages(const struct bs_cache *cache)
{
	uint32_t kb = cache->cfg.readahead_kb;

	if (kb > BS_READAHEAD_KB_MAX)
		kb = BS_READAHEAD_KB_MAX;
	return kb / (BS_PAGE_SIZE / 1024);
}

static unsigned int log2_floor(uint64_t v)
{
	return 63u - (unsigned int)__builtin_clzll(v);
}

static uint64_t pow2_ceil(uint64_t v)
{
	return v <= 1 ? 1 : (uint64_t)1 << (log2_floor(v - 1) + 1);
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The first window of a stream whose read asks for @req pages. */
static uint64_t first_size(uint64_t req, uint64_t max)
{
	uint64_t size = pow2_ceil(req);

	if (size <= max / 32)
		return 4 * size;
	if (size <= max / 4)
		return 2 * size;
	return max;
}

/* The window after one of @cur pages: fast growth while small. */
static uint64_t next_size(uint64_t cur, uint64_t max)
{
	if (cur < max / 16)
		return 4 * cur;
	if (cur <= max / 2)
		return 2 * cur;
	return max;
}

/* Whether page @index of @folio (which holds it) is uptodate.  Folio lock held. */
static bool page_uptodate(const struct bs_folio *folio, uint64_t index)
{
	uint32_t poff = (uint32_t)(((off_t)index << BS_PAGE_SHIFT) - folio->start);
	uint32_t first = bs_folio_first_blk(folio, poff);
	uint32_t end = bs_folio_end_blk(folio, poff, BS_PAGE_SIZE);

	return bs_bits_all_set(folio->uptodate, first, end);
}

static bool folio_has_page(const struct bs_folio *folio, uint64_t index)
{
	off_t off = (off_t)index << BS_PAGE_SHIFT;

	return off >= folio->start && off < folio->start + folio->size;
}

/* The first page of [from, to) that is not cached (in a folio and uptodate, or
 * being read into one); @to if none. */
static uint64_t first_missing(struct bs_file *file, uint64_t from, uint64_t to)
{
	uint64_t index = from;

	while (index < to) {
		struct bs_folio *folio = bs_file_lookup(file, (off_t)index << BS_PAGE_SHIFT);
		bool missing = false;

		if (!folio)
			return index;
		pthread_mutex_lock(&folio->lock);
		/*
		 * A folio with a read in flight is not a miss: the reader waits
		 * for it (bs_folio_wait_reads), as Linux's reader waits on a
		 * locked folio instead of starting a new sync window there.
		 * Counting it would restart readahead small whenever the reader
		 * catches up with an asynchronous window.
		 */
		for (; index < to && folio_has_page(folio, index); index++) {
			if (!page_uptodate(folio, index) && !folio->rd_runs) {
				missing = true;
				break;
			}
		}
		pthread_mutex_unlock(&folio->lock);
		bs_folio_put(folio);
		if (missing)
			return index;
	}
	return to;
}

/*
 * Cached pages just before page @index, at most @max (the kernel's
 * page_cache_prev_miss).  *@from_start: they reach back to page 0.
 */
static uint64_t cached_before(struct bs_file *file, uint64_t index, uint64_t max,
			      bool *from_start)
{
	uint64_t count = 0;

	while (count < max && index > 0) {
		struct bs_folio *folio = bs_file_lookup(file, (off_t)(index - 1) << BS_PAGE_SHIFT);
		bool gap = false;

		if (!folio)
			break;
		pthread_mutex_lock(&folio->lock);
		while (count < max && index > 0 && folio_has_page(folio, index - 1)) {
			if (!page_uptodate(folio, index - 1)) {
				gap = true;
				break;
			}
			count++;
			index--;
		}
		pthread_mutex_unlock(&folio->lock);
		bs_folio_put(folio);
		if (gap)
			break;
	}
	*from_start = index == 0;
	return count;
}

/* ---- reading a window ---- */

/* Blocks [first_blk, end_blk) of a folio, to read. */
struct ra_seg {
	struct bs_folio *folio;
	uint32_t first_blk;
	uint32_t end_blk;
};

/* A folio of the window, referenced. */
struct ra_item {
	struct bs_folio *folio;
	bool made;			/* made by this window: read whole */
};

struct ra_io {
	struct ra_item *items;
	size_t nr, cap;
	struct ra_seg *segs;
	size_t nr_segs, seg_cap;
};

static int io_add_folio(struct ra_io *io, struct bs_folio *folio, bool made)
{
	if (io->nr == io->cap) {
		size_t cap = io->cap ? 2 * io->cap : 16;
		struct ra_item *items = realloc(io->items, cap * sizeof(*items));

		if (!items)
			return -ENOMEM;
		io->items = items;
		io->cap = cap;
	}
	io->items[io->nr++] = (struct ra_item){ folio, made };
	return 0;
}

static int io_add_seg(struct ra_io *io, struct bs_folio *folio, uint32_t first, uint32_t end)
{
	if (io->nr_segs == io->seg_cap) {
		size_t cap = io->seg_cap ? 2 * io->seg_cap : 16;
		struct ra_seg *s = realloc(io->segs, cap * sizeof(*s));

		if (!s)
			return -ENOMEM;
		io->segs = s;
		io->seg_cap = cap;
	}
	io->segs[io->nr_segs++] = (struct ra_seg){ folio, first, end };
	return 0;
}

static void io_release(struct ra_io *io)
{
	for (size_t i = 0; i < io->nr; i++)
		bs_folio_put(io->items[i].folio);
	free(io->items);
	free(io->segs);
}

static off_t seg_off(const struct ra_seg *seg)
{
	return seg->folio->start + ((off_t)seg->first_blk << seg->folio->file->cache->blk_shift);
}

static size_t seg_len(const struct ra_seg *seg)
{
	return (size_t)(seg->end_blk - seg->first_blk) << seg->folio->file->cache->blk_shift;
}

/*
 * Note the runs of blocks to read in folio @i of @io: all of a folio the
 * window made, else those in [win_start, win_end); none at or past @eof.
 * Each run is counted in the folio's rd_runs here, under its lock, and
 * ends in seg_end().  A folio with a read in flight is passed by: its
 * reader fills what that read leaves missing.
 */
static int io_plan_folio(struct ra_io *io, size_t i, off_t win_start, off_t win_end, off_t eof)
{
	struct bs_folio *folio = io->items[i].folio;
	bool made = io->items[i].made;
	off_t fend = folio->start + folio->size;
	off_t s = made || win_start < folio->start ? folio->start : win_start;
	off_t e = made || win_end > fend ? fend : win_end;
	uint32_t blk, end_blk;
	int ret = 0;

	if (e > eof)
		e = eof;
	if (s >= e)
		return 0;
	blk = bs_folio_first_blk(folio, (uint32_t)(s - folio->start));
	end_blk = bs_folio_end_blk(folio, (uint32_t)(s - folio->start), (uint32_t)(e - s));
	pthread_mutex_lock(&folio->lock);
	if (folio->rd_runs)
		blk = end_blk;
	while (!ret && blk < end_blk) {
		uint32_t start = bs_bits_next_clear(folio->uptodate, blk, end_blk);
		uint32_t stop;

		if (start == end_blk)
			break;
		stop = bs_bits_next_set(folio->uptodate, NULL, start, end_blk);
		ret = io_add_seg(io, folio, start, stop);
		if (!ret)
			folio->rd_runs++;
		blk = stop;
	}
	pthread_mutex_unlock(&folio->lock);
	return ret;
}

/*
 * The read of @seg ended with @done of its bytes read (0 on failure):
 * zero the rest (past EOF) and make it uptodate, unless the read failed,
 * then wake whoever waits for the folio.  Folio lock not held.
 */
static void seg_end(const struct ra_seg *seg, size_t done, bool failed)
{
	struct bs_folio *folio = seg->folio;
	size_t len = seg_len(seg);

	pthread_mutex_lock(&folio->lock);
	if (!failed) {
		if (done < len)
			memset(folio->data + ((size_t)seg->first_blk << folio->file->cache->blk_shift) +
			       done, 0, len - done);
		bs_bits_set(folio->uptodate, seg->first_blk, seg->end_blk);
	}
	bs_folio_end_read(folio);
	pthread_mutex_unlock(&folio->lock);
}

/* End segments [first, end) of @io, read from @off with result @n (< 0: failed). */
static void run_end(struct bs_file *file, struct ra_seg *segs, size_t first, size_t end,
		    off_t off, ssize_t n)
{
	struct bs_cache *cache = file->cache;

	if (n >= 0) {
		atomic_fetch_add(&cache->backing_read_bytes, (uint64_t)n);
		atomic_fetch_add(&cache->backing_read_ios, 1);
		atomic_fetch_add(&cache->ra_bytes, (uint64_t)n);
		atomic_fetch_add(&cache->ra_ios, 1);
	}
	for (size_t i = first; i < end; i++) {
		off_t at = seg_off(&segs[i]) - off;
		size_t done = n <= at ? 0 : (size_t)(n - at);

		seg_end(&segs[i], done, n < 0);
	}
}

/*
 * Read segments [first, end) of @io, adjacent in the file, with one
 * synchronous backing read: straight into the folio when the run is in
 * one, else through a bounce buffer.  The blocks are ours (rd_runs), so
 * they are copied in without the folio lock.
 */
static ssize_t io_read_run_sync(struct bs_file *file, struct ra_io *io, size_t first, size_t end)
{
	off_t off = seg_off(&io->segs[first]);
	size_t len = (size_t)(seg_off(&io->segs[end - 1]) - off) + seg_len(&io->segs[end - 1]);
	struct bs_folio *folio = io->segs[first].folio;
	unsigned int shift = file->cache->blk_shift;
	char *buf = NULL;
	ssize_t n;

	if (end - first == 1) {
		n = file->ops->read(file->ctx, folio->data + ((size_t)io->segs[first].first_blk << shift),
				    len, off);
	} else if (posix_memalign((void **)&buf, BS_PAGE_SIZE, len)) {
		/* Page aligned: the backing file may be open with O_DIRECT. */
		n = -ENOMEM;
	} else {
		n = file->ops->read(file->ctx, buf, len, off);
		for (size_t i = first; n > 0 && i < end; i++) {
			const struct ra_seg *seg = &io->segs[i];
			off_t at = seg_off(seg) - off;
			size_t part = seg_len(seg);

			if (at >= n)
				break;
			if ((size_t)(n - at) < part)
				part = (size_t)(n - at);
			memcpy(seg->folio->data + ((size_t)seg->first_blk << shift), buf + at, part);
		}
		free(buf);
	}
	run_end(file, io->segs, first, end, off, n);
	return n;
}

/*
 * An asynchronous read of a run: its segments, with their folios
 * referenced, and an iovec for each (one allocation: segs follows iov).
 */
struct ra_aio {
	struct bs_aio aio;
	struct bs_file *file;
	size_t nr_segs;
	struct ra_seg *segs;
	struct iovec iov[];
};

/* Drop @ra's folio references and free it; the file's nr_aio last. */
static void aio_release(struct ra_aio *ra)
{
	struct bs_file *file = ra->file;

	for (size_t i = 0; i < ra->nr_segs; i++)
		bs_folio_put(ra->segs[i].folio);
	free(ra);
	/* Last: bs_file_destroy() may free the file once this is 0. */
	pthread_mutex_lock(&file->ra_lock);
	if (!--file->nr_aio)
		pthread_cond_broadcast(&file->aio_idle);
	pthread_mutex_unlock(&file->ra_lock);
}

static void aio_done(struct bs_aio *aio, ssize_t res)
{
	struct ra_aio *ra = (struct ra_aio *)aio;

	run_end(ra->file, ra->segs, 0, ra->nr_segs, aio->off, res);
	aio_release(ra);
}

/*
 * Start segments [first, end) of @io as one asynchronous read into the
 * folios' memory.  Returns 0 when started (the segments end in
 * aio_done()), -errno when not (they are still the caller's).
 */
static int io_read_run_async(struct bs_file *file, struct ra_io *io, size_t first, size_t end)
{
	size_t nr = end - first;
	unsigned int shift = file->cache->blk_shift;
	struct ra_aio *ra = calloc(1, sizeof(*ra) + nr * (sizeof(ra->iov[0]) + sizeof(*ra->segs)));
	int ret;

	if (!ra)
		return -ENOMEM;
	ra->file = file;
	ra->nr_segs = nr;
	ra->segs = (struct ra_seg *)(ra->iov + nr);
	memcpy(ra->segs, io->segs + first, nr * sizeof(*ra->segs));
	for (size_t i = 0; i < nr; i++) {
		const struct ra_seg *seg = &ra->segs[i];

		ra->iov[i].iov_base = seg->folio->data + ((size_t)seg->first_blk << shift);
		ra->iov[i].iov_len = seg_len(seg);
		ra->aio.len += seg_len(seg);
		bs_folio_get(seg->folio);
	}
	ra->aio.iov = ra->iov;
	ra->aio.iovcnt = (int)nr;
	ra->aio.off = seg_off(&ra->segs[0]);
	ra->aio.done = aio_done;
	pthread_mutex_lock(&file->ra_lock);
	file->nr_aio++;
	pthread_mutex_unlock(&file->ra_lock);
	ret = file->ops->read_start(file->ctx, &ra->aio);
	if (ret)
		aio_release(ra);
	else
		atomic_fetch_add(&file->cache->ra_async_ios, 1);
	return ret;
}

/*
 * Read what the window [win_start, win_end) (bytes) needs of the folios
 * in @io: each run of adjacent segments with one backing read, started
 * asynchronously where the backing ops can (the reader then waits only
 * for the folios it reads, in bs_read()), else done here.  A failed read
 * ends readahead quietly: the reader's own read of what it needs reports
 * the error.
 */
static void io_read(struct bs_file *file, struct ra_io *io, off_t win_start, off_t win_end)
{
	off_t eof = atomic_load(&file->size);
	bool async = file->ops->read_start != NULL;
	size_t first = 0;

	for (size_t i = 0; i < io->nr; i++) {
		if (io_plan_folio(io, i, win_start, win_end, eof)) {
			run_end(file, io->segs, 0, io->nr_segs, 0, -ENOMEM);
			return;
		}
	}
	for (size_t i = 1; i <= io->nr_segs; i++) {
		/* One iovec a segment: a run stays within readv's IOV_MAX. */
		if (i < io->nr_segs && i - first < IOV_MAX &&
		    seg_off(&io->segs[i]) == seg_off(&io->segs[i - 1]) + (off_t)seg_len(&io->segs[i - 1]))
			continue;
		if ((!async || io_read_run_async(file, io, first, i)) &&
		    io_read_run_sync(file, io, first, i) < 0) {
			run_end(file, io->segs, i, io->nr_segs, 0, -EIO);
			return;
		}
		first = i;
	}
}

/*
 * Read the window [start, start + size) pages, its last @async pages
 * ahead of the reader, asking for folios of the state's order (capped
 * here, as page_cache_ra_order() caps it).
 */
static void ra_submit(struct bs_file *file, uint64_t start, uint64_t size, uint64_t async)
{
	struct bs_cache *cache = file->cache;
	unsigned int max_po = cache->max_order - BS_PAGE_SHIFT;
	unsigned int min_po = cache->min_order - BS_PAGE_SHIFT;
	off_t fsize = atomic_load(&file->size);
	uint64_t mark = start + size - async;
	uint64_t last, index, made_end = 0;
	unsigned int new_order;
	bool fallback = false;
	struct ra_io io = { 0 };

	if (fsize <= 0 || start > (uint64_t)(fsize - 1) >> BS_PAGE_SHIFT)
		return;
	last = min_u64((uint64_t)(fsize - 1) >> BS_PAGE_SHIFT, start + size - 1);
	pthread_mutex_lock(&file->ra_lock);
	new_order = file->ra.order;
	if (new_order > max_po)
		new_order = max_po;
	if (new_order > log2_floor(size))
		new_order = log2_floor(size);
	if (new_order < min_po)
		new_order = min_po;
	file->ra.order = new_order;
	pthread_mutex_unlock(&file->ra_lock);

	index = start & ~(((uint64_t)1 << min_po) - 1);
	while (index <= last) {
		unsigned int order = fallback ? min_po : new_order;
		off_t off = (off_t)index << BS_PAGE_SHIFT;
		struct bs_folio *folio;
		bool made = true;
		int ret;

		if (index & (((uint64_t)1 << order) - 1))
			order = (unsigned int)__builtin_ctzll(index);
		while (order > min_po && index + ((uint64_t)1 << order) - 1 > last)
			order--;
		ret = bs_file_ra_folio(file, off, (size_t)1 << (order + BS_PAGE_SHIFT), &folio);
		if (ret == -EEXIST) {
			folio = bs_file_lookup(file, off);
			if (!folio)
				continue;	/* gone again: make one */
			made = false;
			fallback = true;
		} else if (ret) {
			break;
		}
		if (io_add_folio(&io, folio, made)) {
			bs_folio_put(folio);
			break;
		}
		if (made && (uint64_t)(folio->start + folio->size) >> BS_PAGE_SHIFT > made_end)
			made_end = (uint64_t)(folio->start + folio->size) >> BS_PAGE_SHIFT;
		if (made && folio_has_page(folio, mark)) {
			pthread_mutex_lock(&file->ra_lock);
			file->ra.mark = (uint64_t)folio->start >> BS_PAGE_SHIFT;
			file->ra.mark_end = (uint64_t)(folio->start + folio->size) >> BS_PAGE_SHIFT;
			pthread_mutex_unlock(&file->ra_lock);
		}
		index = (uint64_t)(folio->start + folio->size) >> BS_PAGE_SHIFT;
	}
	/*
	 * A sizing policy that made folios larger than asked for ("fixed")
	 * has read past the window: the window is what was read, so that
	 * the next one starts after it and is read ahead of the reader
	 * (else each such folio would be read when the reader reached it).
	 */
	if (made_end > start + size) {
		pthread_mutex_lock(&file->ra_lock);
		if (file->ra.start == start && file->ra.size == size) {
			file->ra.async_size += made_end - (start + size);
			file->ra.size = made_end - start;
		}
		pthread_mutex_unlock(&file->ra_lock);
	}
	io_read(file, &io, (off_t)start << BS_PAGE_SHIFT, (off_t)(last + 1) << BS_PAGE_SHIFT);
	io_release(&io);
}

/*
 * A read of @req pages needs page @index, which is not cached.  Returns
 * the pages from @index on that a window now covers, 0 if the read is
 * random (no readahead).
 */
static uint64_t ra_sync(struct bs_file *file, uint64_t index, uint64_t req, uint64_t max)
{
	struct bs_ra_state *ra = &file->ra;
	uint64_t start = index, size, async;
	bool stream;

	pthread_mutex_lock(&file->ra_lock);
	stream = !index || req > max;
	if (ra->have_prev) {
		uint64_t prev = (uint64_t)ra->prev_end >> BS_PAGE_SHIFT;

		stream = stream || (index >= prev && index - prev <= 1);
	}
	pthread_mutex_unlock(&file->ra_lock);
	if (stream) {
		size = first_size(req, max);
		async = size > req ? size - req : size / 2;
	} else {
		bool from_start;
		uint64_t contig = cached_before(file, index, max, &from_start);

		if (contig <= req)
			return 0;
		if (from_start)
			contig *= 2;
		size = min_u64(contig + req, max);
		async = 1;
	}
	pthread_mutex_lock(&file->ra_lock);
	ra->start = start;
	ra->size = size;
	ra->async_size = async;
	ra->order = 0;
	ra->mark = ra->mark_end = 0;
	pthread_mutex_unlock(&file->ra_lock);
	ra_submit(file, start, size, async);
	return size;
}

/*
 * If a read of pages [first, end) touches the marked folio, read the
 * next window, larger.  Unmarking and moving the window happen together,
 * so that of two readers reaching the mark only one reads on.
 */
static void ra_async(struct bs_file *file, uint64_t first, uint64_t end, uint64_t max)
{
	struct bs_ra_state *ra = &file->ra;
	uint64_t align, win_end, aligned_end, start, size;

	pthread_mutex_lock(&file->ra_lock);
	if (ra->mark == ra->mark_end || ra->mark >= end || first >= ra->mark_end) {
		pthread_mutex_unlock(&file->ra_lock);
		return;
	}
	ra->mark = ra->mark_end = 0;
	ra->start += ra->size;
	size = next_size(ra->size, max);
	if (size > ra->size)
		ra->size = size;
	ra->order += 2;
	align = (uint64_t)1 << (ra->order < (unsigned int)__builtin_ctzll(max)
				? ra->order : (unsigned int)__builtin_ctzll(max));
	win_end = ra->start + ra->size;
	aligned_end = win_end & ~(align - 1);
	if (aligned_end > ra->start)
		ra->size -= win_end - aligned_end;
	ra->async_size = ra->size;
	start = ra->start;
	size = ra->size;
	pthread_mutex_unlock(&file->ra_lock);
	ra_submit(file, start, size, size);
}

void bs_ra_before_read(struct bs_file *file, off_t off, size_t len)
{
	uint64_t max = max_pages(file->cache);
	uint64_t first = (uint64_t)off >> BS_PAGE_SHIFT;
	uint64_t end = ((uint64_t)off + len - 1) / BS_PAGE_SIZE + 1;
	uint64_t index = first;

	if (!max)
		return;
	/* Every miss of the read starts a window, as each batch of the kernel's read does. */
	while (index < end) {
		uint64_t miss = first_missing(file, index, end);
		uint64_t covered;

		if (miss == end)
			break;
		covered = ra_sync(file, miss, end - miss, max);
		if (!covered)
			break;
		index = miss + covered;
	}
	ra_async(file, first, end, max);
}

bool bs_file_reading(struct bs_file *file)
{
	bool reading;

	pthread_mutex_lock(&file->ra_lock);
	reading = file->nr_aio != 0;
	pthread_mutex_unlock(&file->ra_lock);
	return reading;
}

void bs_ra_after_read(struct bs_file *file, off_t end)
{
	if (!max_pages(file->cache))
		return;		/* no readahead: spare every read the lock */
	pthread_mutex_lock(&file->ra_lock);
	file->ra.have_prev = true;
	file->ra.prev_end = end;
	pthread_mutex_unlock(&file->ra_lock);
}
