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
 * their blocks inside the window that are not uptodate.  Runs adjacent in
 * the file are one backing read, as the kernel's read_pages() builds one
 * bio over the window's folios.  "Async" here means: ahead of the reader,
 * in the read call that reached the mark, before it returns.  blockstate
 * has no asynchronous reads (the backing ops read synchronously), and a
 * FUSE request is one worker thread; what the comparisons need, which
 * windows are read and which folios they make, is the kernel's, only the
 * overlap of the reader's work with the I/O is not modelled.  The reader
 * at the mark waits for one backing read (of the next window) that the
 * kernel's reader would not wait for.
 *
 * Readahead is off when readahead_kb is 0.  It runs under the file's
 * invalidate_lock (shared) from bs_read(); its state is under ra_lock
 * (a leaf, never held across I/O or another blockstate lock).
 */
#include "bs_i.h"

#include <errno.h>
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

/* The first page of [from, to) that is not cached (in a folio and uptodate); @to if none. */
static uint64_t first_missing(struct bs_file *file, uint64_t from, uint64_t to)
{
	uint64_t index = from;

	while (index < to) {
		struct bs_folio *folio = bs_file_lookup(file, (off_t)index << BS_PAGE_SHIFT);
		bool missing = false;

		if (!folio)
			return index;
		pthread_mutex_lock(&folio->lock);
		for (; index < to && folio_has_page(folio, index); index++) {
			if (!page_uptodate(folio, index)) {
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
	while (!ret && blk < end_blk) {
		uint32_t start = bs_bits_next_clear(folio->uptodate, blk, end_blk);
		uint32_t stop;

		if (start == end_blk)
			break;
		stop = bs_bits_next_set(folio->uptodate, NULL, start, end_blk);
		ret = io_add_seg(io, folio, start, stop);
		blk = stop;
	}
	pthread_mutex_unlock(&folio->lock);
	return ret;
}

/* Read segments [first, end) of @io, adjacent in the file, with one backing read. */
static int io_read_run(struct bs_file *file, struct ra_io *io, size_t first, size_t end)
{
	struct bs_cache *cache = file->cache;
	off_t off = seg_off(&io->segs[first]);
	size_t len = (size_t)(seg_off(&io->segs[end - 1]) - off) + seg_len(&io->segs[end - 1]);
	char *buf;
	ssize_t n;

	/* Page aligned: the backing file may be open with O_DIRECT. */
	if (posix_memalign((void **)&buf, BS_PAGE_SIZE, len))
		return -ENOMEM;
	n = file->ops->read(file->ctx, buf, len, off);
	if (n < 0) {
		free(buf);
		return (int)n;
	}
	memset(buf + n, 0, len - (size_t)n);
	atomic_fetch_add(&cache->backing_read_bytes, (uint64_t)n);
	atomic_fetch_add(&cache->backing_read_ios, 1);
	atomic_fetch_add(&cache->ra_bytes, (uint64_t)n);
	atomic_fetch_add(&cache->ra_ios, 1);
	for (size_t i = first; i < end; i++) {
		struct ra_seg *seg = &io->segs[i];

		pthread_mutex_lock(&seg->folio->lock);
		bs_file_install(seg->folio, buf + (seg_off(seg) - off), seg->first_blk,
				seg->end_blk);
		pthread_mutex_unlock(&seg->folio->lock);
	}
	free(buf);
	return 0;
}

/*
 * Read what the window [win_start, win_end) (bytes) needs of the folios
 * in @io.  A failed read ends readahead quietly: the reader's own read of
 * what it needs reports the error.
 */
static void io_read(struct bs_file *file, struct ra_io *io, off_t win_start, off_t win_end)
{
	off_t eof = atomic_load(&file->size);
	size_t first = 0;

	for (size_t i = 0; i < io->nr; i++) {
		if (io_plan_folio(io, i, win_start, win_end, eof))
			return;
	}
	for (size_t i = 1; i <= io->nr_segs; i++) {
		if (i < io->nr_segs &&
		    seg_off(&io->segs[i]) == seg_off(&io->segs[i - 1]) + (off_t)seg_len(&io->segs[i - 1]))
			continue;
		if (io_read_run(file, io, first, i))
			return;
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
	uint64_t last, index;
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
		if (made && folio_has_page(folio, mark)) {
			pthread_mutex_lock(&file->ra_lock);
			file->ra.mark = (uint64_t)folio->start >> BS_PAGE_SHIFT;
			file->ra.mark_end = (uint64_t)(folio->start + folio->size) >> BS_PAGE_SHIFT;
			pthread_mutex_unlock(&file->ra_lock);
		}
		index = (uint64_t)(folio->start + folio->size) >> BS_PAGE_SHIFT;
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

void bs_ra_after_read(struct bs_file *file, off_t end)
{
	if (!max_pages(file->cache))
		return;		/* no readahead: spare every read the lock */
	pthread_mutex_lock(&file->ra_lock);
	file->ra.have_prev = true;
	file->ra.prev_end = end;
	pthread_mutex_unlock(&file->ra_lock);
}
