// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * readahead.c - reading ahead of sequential readers as Linux's filemap
 * read path and mm/readahead.c do it: the decisions (ra_decide.c) per
 * open file, the marks on the cache's folios, and the reads they ask for.
 *
 * State: each open has its own struct bs_ra (file_ra_state); the folios
 * and their readahead marks (bs_folio.ra_mark, PG_readahead) are the
 * file's, so one open meets the marks another open's windows left.
 *
 * A read of pages [first, end) walks the folios the way filemap_read()'s
 * batches do (bs_ra_before_read): where no folio holds a page, it starts
 * a synchronous window there (page_cache_sync_ra, with the pages left to
 * the end of the request); at each marked folio it meets, it takes the
 * mark and starts the next window (page_cache_async_ra).  A folio with a
 * write in flight to the backing store keeps its mark and starts nothing
 * (the kernel shares the bit with PG_reclaim and leaves such a folio
 * alone).  When the read has been served, bs_ra_after_read() notes where
 * it ended (prev_pos).  Presence is what counts, as in the page cache: a
 * folio whose blocks are not all uptodate (a read in flight, or a partial
 * write) is not a miss.
 *
 * Which model (6.16 or 6.17+) decides is the cache's, switchable at run
 * time; the state of an open is the same shape under both.
 *
 * A window is made as the decision asks:
 * - BS_RA_ORDER (page_cache_ra_order): from the window's first page (the
 *   smallest folio's alignment), folios of the order asked for, smaller
 *   where the page is not aligned to it or the folio would reach past
 *   the window or EOF; the new folio holding the mark page is marked.
 *   The first folio that cannot be added stops it: a folio cached
 *   anywhere in its range (filemap_add_folio()'s -EEXIST; never shrunk
 *   to fit) or one that cannot be had (-ENOMEM).  The rest of the
 *   window then goes as BS_RA_UNBOUNDED from that page (bs_ra_rest()),
 *   in the smallest folios to the window's end, however far the cached
 *   folio is.
 * - BS_RA_UNBOUNDED (page_cache_ra_unbounded): a smallest folio for each
 *   page no folio holds, up to EOF; the one made at the mark page (placed
 *   from the count cut at EOF) is marked; it stops at a folio it cannot
 *   have.
 * The sizing policy has the last word on each folio (access
 * BS_SIZE_READAHEAD): "kernel" takes the order asked for, "fixed" makes
 * folio_size folios whatever readahead asks.  A folio larger than asked
 * may reach past the window: the window then counts as ending at its
 * end, as the kernel lets a window exceed its size for a PMD-sized folio.
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
 * Readahead is off when readahead_kb is 0 or a read comes with no state.
 * It runs under the file's invalidate_lock (shared) from bs_read(); an
 * open's state is under its own lock (a leaf, held only to copy the state
 * in and out), a folio's mark under the folio lock, and the file's ra_lock
 * (a leaf) counts reads in flight.  A read started here may end after
 * bs_read() returns: truncate and punch wait for it on each folio
 * (bs_folio_wait_io), bs_file_destroy() for all of the file's (nr_aio).
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

static uint64_t page_end(const struct bs_folio *folio)
{
	return (uint64_t)(folio->start + folio->size) >> BS_PAGE_SHIFT;
}

static uint64_t page_of(const struct bs_folio *folio)
{
	return (uint64_t)folio->start >> BS_PAGE_SHIFT;
}

static struct bs_folio *lookup_page(struct bs_file *file, uint64_t index)
{
	return bs_file_lookup(file, (off_t)index << BS_PAGE_SHIFT);
}

/* ---- the cache as the decisions see it ---- */

/* Whether page @index of @folio (which holds it) is uptodate.  Folio lock held. */
static bool page_uptodate(const struct bs_folio *folio, uint64_t index)
{
	uint32_t poff = (uint32_t)(((off_t)index << BS_PAGE_SHIFT) - folio->start);

	return bs_bits_all_set(folio->uptodate, bs_folio_first_blk(folio, poff),
			       bs_folio_end_blk(folio, poff, BS_PAGE_SIZE));
}

/*
 * The first page of [@index, @limit) (@folio holds @index, @limit is at
 * most its end) that the cache does not hold; @limit if none.  A page is
 * held when its folio is there and the page is uptodate or being read.
 * The kernel counts a folio's pages as held whatever their state, but its
 * folios hold pages they never read only after a partial write; ours may
 * hold many (a "fixed" sizing policy makes a 2 MiB folio for an 8 KiB
 * read), and those must not pass for a stream's history or stop a window.
 */
static uint64_t held_until(struct bs_folio *folio, uint64_t index, uint64_t limit)
{
	uint32_t poff = (uint32_t)(((off_t)index << BS_PAGE_SHIFT) - folio->start);
	uint32_t plen = (uint32_t)((limit - index) << BS_PAGE_SHIFT);
	uint32_t end_blk = bs_folio_end_blk(folio, poff, plen);
	uint64_t first;
	uint32_t blk;

	bs_folio_lock(folio);
	blk = folio->rd_runs ? end_blk
			     : bs_bits_next_clear(folio->uptodate, bs_folio_first_blk(folio, poff),
						  end_blk);
	bs_folio_unlock_raw(folio);
	if (blk == end_blk)
		return limit;
	/* The page holding the first block that is not uptodate (a block may
	 * be larger than a page and begin before @index). */
	first = page_of(folio) + (((uint64_t)blk << folio->file->cache->blk_shift) >> BS_PAGE_SHIFT);
	return first > index ? first : index;
}

/* The view's folio_at(): the folio holding page @index, and whether the page is held. */
static bool view_folio_at(void *ctx, uint64_t index, uint64_t *head, unsigned int *order,
			  bool *held)
{
	struct bs_folio *folio = lookup_page(ctx, index);

	if (!folio)
		return false;
	*head = page_of(folio);
	*order = (unsigned int)__builtin_ctz(folio->size) - BS_PAGE_SHIFT;
	bs_folio_lock(folio);
	*held = folio->rd_runs || page_uptodate(folio, index);
	bs_folio_unlock_raw(folio);
	/* Not used past here: reclaim may free it once put. */
	bs_folio_put(folio);
	return true;
}

static void ra_limits(const struct bs_cache *cache, struct bs_ra_limits *lim)
{
	lim->max_pages = max_pages(cache);
	lim->min_order = cache->min_order - BS_PAGE_SHIFT;
	lim->max_order = cache->max_order - BS_PAGE_SHIFT;
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
	bs_folio_lock(folio);
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
	bs_folio_unlock_raw(folio);
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

	bs_folio_lock(folio);
	if (!failed) {
		if (done < len)
			memset(folio->data + ((size_t)seg->first_blk << folio->file->cache->blk_shift) +
			       done, 0, len - done);
		bs_bits_set(folio->uptodate, seg->first_blk, seg->end_blk);
	}
	bs_folio_end_read(folio);
	bs_folio_unlock_raw(folio);
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
	} else if (file->cache->cfg.no_data && len <= BS_MAX_FOLIO_SIZE) {
		/* Every folio's data is the one scratch area (bs_config): nothing to copy. */
		n = file->ops->read(file->ctx, folio->data, len, off);
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

/* Mark @folio, new and made by this window, if it holds page @mark. */
static void mark_new(struct bs_folio *folio, uint64_t mark)
{
	if (mark < page_of(folio) || mark >= page_end(folio))
		return;
	bs_folio_lock(folio);
	folio->ra_mark = true;
	bs_folio_unlock_raw(folio);
}

/*
 * A new folio of page order @order at page @index (aligned to it) into
 * @io, as page_cache_ra_order() adds each: -EEXIST when a folio holds
 * any page of its range (filemap_add_folio()), -ENOMEM when it cannot be
 * had (a failed allocation, or a fault standing for one).
 */
static int order_folio(struct bs_file *file, struct ra_io *io, uint64_t index,
		       unsigned int order, struct bs_folio **out)
{
	struct bs_folio *folio;
	int ret = bs_file_ra_folio(file, (off_t)index << BS_PAGE_SHIFT,
				   (size_t)BS_PAGE_SIZE << order, &folio);

	if (ret)
		return ret;
	if (io_add_folio(io, folio, true)) {
		bs_folio_put(folio);
		return -ENOMEM;
	}
	*out = folio;
	return 0;
}

/*
 * Add the folio holding page @index to @io, as page_cache_ra_unbounded()
 * meets each page: a new smallest one if none holds it (*@made), else
 * the one there.  Returns 0, or -errno when none could be had.
 */
static int unbounded_folio(struct bs_file *file, struct ra_io *io, uint64_t index,
			   struct bs_folio **out, bool *made)
{
	unsigned int min_order = file->cache->min_order - BS_PAGE_SHIFT;
	off_t off = (off_t)index << BS_PAGE_SHIFT;
	struct bs_folio *folio;
	int ret;

	for (;;) {
		ret = bs_file_ra_folio(file, off, (size_t)BS_PAGE_SIZE << min_order, &folio);
		*made = !ret;
		if (ret == -EEXIST) {
			folio = bs_file_lookup(file, off);
			if (!folio)
				continue;	/* gone again: make one */
		} else if (ret) {
			return ret;
		}
		break;
	}
	if (io_add_folio(io, folio, *made)) {
		bs_folio_put(folio);
		return -ENOMEM;
	}
	*out = folio;
	return 0;
}

/*
 * page_cache_ra_order()'s loop over @rd (BS_RA_ORDER), up to page @last
 * (the window's last page or EOF's): folios of the order asked for,
 * smaller where alignment or @last ask, the one holding the mark page
 * marked.  It stops at the first folio it cannot add.  Returns the page
 * it stopped at (past @last: it made them all), with the error in
 * *@err; *@made_end is the page after the last folio made.
 */
static uint64_t make_order(struct bs_file *file, const struct bs_ra_read *rd, uint64_t last,
			   struct ra_io *io, uint64_t *made_end, int *err)
{
	unsigned int min_order = file->cache->min_order - BS_PAGE_SHIFT;
	uint64_t index = rd->start & ~(((uint64_t)1 << min_order) - 1);

	*err = 0;
	while (index <= last) {
		unsigned int order = bs_ra_folio_order(index, rd->order, last, min_order);
		struct bs_folio *folio;

		*err = order_folio(file, io, index, order, &folio);
		if (*err)
			break;
		mark_new(folio, rd->mark);
		index = page_end(folio);
		*made_end = index;
	}
	return index;
}

/*
 * page_cache_ra_unbounded() of @rd (BS_RA_UNBOUNDED, cut at EOF): a
 * smallest folio for each page no folio holds, the one made at the mark
 * page marked; the folios there go into @io too (their blocks in the
 * window that are not uptodate are read).  It stops at the first folio
 * it cannot have.  *@made_end: the page after the last folio made.
 */
static void make_unbounded(struct bs_file *file, const struct bs_ra_read *rd,
			   struct ra_io *io, uint64_t *made_end)
{
	unsigned int min_order = file->cache->min_order - BS_PAGE_SHIFT;
	uint64_t index = rd->start & ~(((uint64_t)1 << min_order) - 1);

	while (index < rd->start + rd->nr) {
		struct bs_folio *folio;
		bool made;

		if (unbounded_folio(file, io, index, &folio, &made))
			break;
		if (made) {
			mark_new(folio, rd->mark);
			*made_end = page_end(folio);
		}
		index = page_end(folio);
	}
}

/*
 * Make the folios of @rd into @io; the file spans pages [0, @end_page).
 * A BS_RA_ORDER window that stops at a folio in its way, or at one it
 * cannot have, reads the rest of the window as page_cache_ra_order()
 * then does: do_page_cache_ra() from that page (bs_ra_rest()), in the
 * smallest folios, whatever lies further on.  Returns the page after the
 * last folio made (0: none).
 */
static uint64_t make_window(struct bs_file *file, const struct bs_ra_read *rd,
			    uint64_t end_page, struct ra_io *io)
{
	uint64_t made_end = 0;
	struct bs_ra_read rest;

	if (rd->kind == BS_RA_ORDER) {
		uint64_t last = end_page - 1, stop;
		struct bs_ra_limits lim;
		int err;

		if (rd->start + rd->nr - 1 < last)
			last = rd->start + rd->nr - 1;
		stop = make_order(file, rd, last, io, &made_end, &err);
		if (!err)
			return made_end;
		ra_limits(file->cache, &lim);
		rest = bs_ra_rest(rd, stop, &lim, end_page);
		if (rest.kind == BS_RA_NONE)
			return made_end;
		rd = &rest;
	}
	make_unbounded(file, rd, io, &made_end);
	return made_end;
}

/*
 * Read what @rd asks for (BS_RA_ORDER or BS_RA_UNBOUNDED).  @ra (the
 * caller's copy of the open's state, which @rd came from) grows when the
 * sizing policy made folios past the window.
 */
static void ra_submit(struct bs_file *file, struct bs_ra_state *ra, const struct bs_ra_read *rd)
{
	off_t fsize = atomic_load(&file->size);
	struct ra_io io = { 0 };
	uint64_t last, made_end;

	if ((rd->kind != BS_RA_ORDER && rd->kind != BS_RA_UNBOUNDED) || !rd->nr ||
	    fsize <= 0 || rd->start > (uint64_t)(fsize - 1) >> BS_PAGE_SHIFT)
		return;
	last = (uint64_t)(fsize - 1) >> BS_PAGE_SHIFT;
	made_end = make_window(file, rd, last + 1, &io);
	/*
	 * A sizing policy that made folios larger than asked for ("fixed")
	 * has read past the window: the window is what was read, so that
	 * the next one starts after it and is read ahead of the reader
	 * (else each such folio would be read when the reader reached it).
	 */
	if (rd->start == ra->start && made_end > ra->start + ra->size) {
		ra->async_size += made_end - (ra->start + ra->size);
		ra->size = made_end - ra->start;
	}
	if (rd->start + rd->nr - 1 < last)
		last = rd->start + rd->nr - 1;
	io_read(file, &io, (off_t)rd->start << BS_PAGE_SHIFT, (off_t)(last + 1) << BS_PAGE_SHIFT);
	io_release(&io);
}

/*
 * Take @folio's readahead mark, if it has one and no writeback is in
 * flight (such a folio keeps its mark).  Folio lock held.
 */
static bool take_mark(struct bs_folio *folio)
{
	bool marked = folio->ra_mark && !folio->wb_runs;

	if (marked)
		folio->ra_mark = false;
	return marked;
}

/* A read met @folio, whose mark it took: start the next window (page_cache_async_ra). */
static void ra_async(struct bs_file *file, struct bs_ra_state *ra, struct bs_folio *folio,
		     uint64_t end, const struct bs_ra_limits *lim, const struct bs_ra_view *view)
{
	unsigned int model = atomic_load(&file->cache->ra_model);
	struct bs_ra_read rd;

	FOLIOFS_TP(page_cache_async_ra, .i_ino = file->ino, .index = page_of(folio),
		   .order = ra->order, .size = ra->size, .async_size = ra->async_size,
		   .ra_pages = lim->max_pages, .prev_pos = ra->prev_pos,
		   .req_count = end - page_of(folio));
	rd = bs_ra_async(model, ra, page_of(folio),
			 (unsigned int)__builtin_ctz(folio->size) - BS_PAGE_SHIFT,
			 end - page_of(folio), lim, view);
	ra_submit(file, ra, &rd);
}

/* A read met @folio; if it is marked, take the mark and start the next window. */
static void ra_meet(struct bs_file *file, struct bs_ra_state *ra, struct bs_folio *folio,
		    uint64_t end, const struct bs_ra_limits *lim, const struct bs_ra_view *view)
{
	bool marked;

	bs_folio_lock(folio);
	marked = take_mark(folio);
	bs_folio_unlock_raw(folio);
	if (marked)
		ra_async(file, ra, folio, end, lim, view);
}

/*
 * A read's usual case: @folio holds page @index.  Under one folio lock,
 * what the loop below asks in three (is page @index held; the mark, which
 * is taken; how far from @index the folio holds pages, up to @limit), so
 * a read of cached data locks its folio once here.  False, changing
 * nothing, if page @index is not held.  With the mark taken (*@marked)
 * *@until is not set: the window it starts may start reads into @folio,
 * which then count as held, so the caller asks again after starting it.
 */
static bool held_meet(struct bs_folio *folio, uint64_t index, uint64_t limit, bool *marked,
		      uint64_t *until)
{
	uint32_t poff = (uint32_t)(((off_t)index << BS_PAGE_SHIFT) - folio->start);
	uint32_t first_blk = bs_folio_first_blk(folio, poff);
	uint32_t page_end_blk = bs_folio_end_blk(folio, poff, BS_PAGE_SIZE);
	uint32_t end_blk = bs_folio_end_blk(folio, poff, (uint32_t)((limit - index) << BS_PAGE_SHIFT));
	uint32_t blk = end_blk;
	bool held;

	bs_folio_lock(folio);
	if (!folio->rd_runs)
		blk = bs_bits_next_clear(folio->uptodate, first_blk, end_blk);
	held = blk >= page_end_blk;
	*marked = held && take_mark(folio);
	bs_folio_unlock_raw(folio);
	if (!held || *marked)
		return held;
	if (blk == end_blk) {
		*until = limit;
	} else {
		/* As held_until(): the page of the first block not uptodate. */
		uint64_t first = page_of(folio) +
			(((uint64_t)blk << folio->file->cache->blk_shift) >> BS_PAGE_SHIFT);

		*until = first > index ? first : index;
	}
	return true;
}

off_t bs_ra_before_read(struct bs_file *file, struct bs_ra *ra, off_t off, size_t len,
			struct bs_folio **first)
{
	struct bs_cache *cache = file->cache;
	uint64_t index = (uint64_t)off >> BS_PAGE_SHIFT;
	uint64_t end = ((uint64_t)off + len - 1) / BS_PAGE_SIZE + 1;
	off_t fsize = atomic_load(&file->size);
	uint64_t eof_end = ((uint64_t)fsize + BS_PAGE_SIZE - 1) >> BS_PAGE_SHIFT;
	struct bs_ra_view view = { view_folio_at, file, eof_end };
	uint64_t random_end = 0;
	struct bs_ra_limits lim;
	struct bs_ra_state st, was;

	*first = NULL;
	if (!ra)
		return -1;
	pthread_mutex_lock(&ra->lock);
	st = ra->st;
	pthread_mutex_unlock(&ra->lock);
	ra_limits(cache, &lim);
	if (!lim.max_pages)
		return st.prev_pos;
	was = st;
	/*
	 * filemap_read(): batch after batch of the folios there, in order;
	 * a page not held starts a window (unless a random read's own).
	 */
	while (index < end && index < eof_end) {
		struct bs_folio *folio = lookup_page(file, index);
		uint64_t next, limit;
		bool marked;

		if (folio) {
			limit = page_end(folio) < end ? page_end(folio) : end;
			if (held_meet(folio, index, limit, &marked, &next)) {
				if (marked) {
					ra_async(file, &st, folio, end, &lim, &view);
					next = held_until(folio, index, limit);
				}
				goto next_folio;
			}
		}
		/* Page @index is not held. */
		if (index >= random_end) {
			unsigned int model = atomic_load(&cache->ra_model);
			struct bs_ra_read rd;

			FOLIOFS_TP(page_cache_sync_ra, .i_ino = file->ino, .index = index,
				   .order = st.order, .size = st.size, .async_size = st.async_size,
				   .ra_pages = lim.max_pages, .prev_pos = st.prev_pos,
				   .req_count = end - index);
			rd = bs_ra_sync(model, &st, index, end - index, &lim, &view);

			if (rd.kind == BS_RA_RANDOM)
				random_end = rd.start + rd.nr;
			else
				ra_submit(file, &st, &rd);
			if (!folio)
				folio = lookup_page(file, index);
		}
		if (!folio) {
			index++;	/* the read path makes it */
			continue;
		}
		ra_meet(file, &st, folio, end, &lim, &view);
		next = held_until(folio, index, page_end(folio) < end ? page_end(folio) : end);
next_folio:
		index = next > index ? next : index + 1;
		/*
		 * The folio the read begins in goes to the read (bs_read), when
		 * nothing is done here after it: a read within one folio, the
		 * usual one.  (Kept longer, it would be kept from reclaim by
		 * the windows started further on.)
		 */
		if ((index >= end || index >= eof_end) && folio->start <= off &&
		    off < folio->start + (off_t)folio->size)
			*first = folio;
		else
			bs_folio_put(folio);
	}
	/* Only what changed: a read of cached data changes nothing here. */
	if (st.start != was.start || st.size != was.size || st.async_size != was.async_size ||
	    st.order != was.order) {
		pthread_mutex_lock(&ra->lock);
		ra->st.start = st.start;
		ra->st.size = st.size;
		ra->st.async_size = st.async_size;
		ra->st.order = st.order;
		pthread_mutex_unlock(&ra->lock);
	}
	return st.prev_pos;
}

bool bs_file_reading(struct bs_file *file)
{
	bool reading;

	pthread_mutex_lock(&file->ra_lock);
	reading = file->nr_aio != 0;
	pthread_mutex_unlock(&file->ra_lock);
	return reading;
}

void bs_ra_after_read(struct bs_ra *ra, off_t end)
{
	if (!ra)
		return;
	pthread_mutex_lock(&ra->lock);
	ra->st.prev_pos = end;
	pthread_mutex_unlock(&ra->lock);
}

void bs_ra_init(struct bs_ra *ra)
{
	*ra = (struct bs_ra){ .st = { .prev_pos = -1 } };
	pthread_mutex_init(&ra->lock, NULL);
}

void bs_ra_destroy(struct bs_ra *ra)
{
	pthread_mutex_destroy(&ra->lock);
}

const char *bs_ra_model_name(unsigned int model)
{
	static const char *const names[BS_NR_RA_MODELS] = {
		[BS_RA_6_16] = "6.16",
		[BS_RA_6_17] = "6.17",
	};

	return model < BS_NR_RA_MODELS ? names[model] : NULL;
}

int bs_ra_model_parse(const char *name, unsigned int *model)
{
	unsigned long minor;
	char *end;

	/* "6." and a minor of 16 to 99 without a leading zero. */
	if (strncmp(name, "6.", 2) != 0 || name[2] < '1' || name[2] > '9')
		return -EINVAL;
	minor = strtoul(name + 2, &end, 10);
	if (*end || end - (name + 2) > 2 || minor < 16)
		return -EINVAL;
	*model = minor == 16 ? BS_RA_6_16 : BS_RA_6_17;
	return 0;
}

unsigned int bs_cache_ra_model(struct bs_cache *cache)
{
	return atomic_load(&cache->ra_model);
}

void bs_cache_set_ra_model(struct bs_cache *cache, unsigned int model)
{
	if (model < BS_NR_RA_MODELS)
		atomic_store(&cache->ra_model, model);
}
