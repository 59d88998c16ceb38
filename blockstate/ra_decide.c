// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ra_decide.c - what Linux's readahead decides, release by release: the
 * window sizes, where the next window starts, which folio order it asks
 * for and where its mark goes.  Pure functions of an open file's state
 * and of what the cache holds (struct bs_ra_view); readahead.c reads what
 * they ask for.  Unit tests pin every branch (tests/unit/test_ra_decide.c).
 *
 * Both models share mm/readahead.c's shape:
 *
 * - page_cache_sync_ra(), on a miss at page index for a read of req
 *   pages: a read that starts the file, asks for more than the largest
 *   window, or continues the previous read (index - prev_index <= 1)
 *   starts a stream: window [index, index + init_size(req)), of which all
 *   but req pages (half, if the window is no larger) are read ahead.  Else
 *   the cached pages just before index (page_cache_prev_miss) tell a
 *   stream lost track of from a random read: more of them than req (twice
 *   as many when cached back to page 0) resume it with a window of that
 *   many + req pages and one page ahead; otherwise the read is random and
 *   reads its own pages only, leaving the state alone.
 * - page_cache_async_ra(), when a read meets a marked folio: if the folio
 *   is where this open's state expects its mark (start + size -
 *   async_size rounded down to the folio), the next window follows the
 *   last, larger; if not (another open's mark, or this open lost track),
 *   the cached pages after the folio (page_cache_next_miss) stand for the
 *   last window's read-ahead part, and the next window starts after them.
 * - Both count the cached pages as page_cache_prev_miss() and
 *   page_cache_next_miss() do, by walking the xarray (bs_ra_prev_miss(),
 *   bs_ra_next_miss() below), which miscounts from inside a small folio.
 *
 * Where they part (Ryan Roberts's series, merged for 6.17):
 *
 *   6.16  page_cache_ra_order() is passed the order of the marked folio
 *         the reader met (0 for a miss) and adds 2 itself; a window of
 *         fewer than 4 pages is read in single pages; the window's end is
 *         not trimmed.  So a reader meeting a small folio's mark asks for
 *         small folios again, whatever it read before.
 *   6.17+ the order lives in the open file's state (ra->order): a miss's
 *         window sets it to 0, each marked folio met adds 2 to it, and
 *         page_cache_ra_order() only caps it (folio_size, the window) and
 *         stores the capped value back.  A random read goes through
 *         do_page_cache_ra() and leaves it alone, so an open that once
 *         streamed keeps its high order, and the next mark it meets (its
 *         own or another open's) reads 2 MiB folios at once.  The window's
 *         end is trimmed to a multiple of that order's folio size (at most
 *         the largest window's alignment).
 *
 * Not modelled: mmap faults (do_sync_mmap_readahead), FMODE_RANDOM and
 * POSIX_FADV_SEQUENTIAL, blk-cgroup congestion, and a device's io_pages
 * larger than the window (ractl_max_pages() lets a read larger than the
 * window use it; here the window is the limit).
 */
#include "bs_i.h"

#include <stdint.h>

static unsigned int ilog2_u64(uint64_t v)
{
	return 63u - (unsigned int)__builtin_clzll(v);
}

static uint64_t roundup_pow2(uint64_t v)
{
	return v <= 1 ? 1 : (uint64_t)1 << (ilog2_u64(v - 1) + 1);
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

uint64_t bs_ra_init_size(uint64_t req, uint64_t max)
{
	uint64_t size = roundup_pow2(req);

	if (size <= max / 32)
		return 4 * size;
	if (size <= max / 4)
		return 2 * size;
	return max;
}

uint64_t bs_ra_next_size(uint64_t cur, uint64_t max)
{
	if (cur < max / 16)
		return 4 * cur;
	if (cur <= max / 2)
		return 2 * cur;
	return max;
}

unsigned int bs_ra_folio_order(uint64_t index, unsigned int order, uint64_t last,
			       unsigned int min_order)
{
	if (index & (((uint64_t)1 << order) - 1))
		order = (unsigned int)__builtin_ctzll(index);
	while (order > min_order && index + ((uint64_t)1 << order) - 1 > last)
		order--;
	return order;
}

/*
 * do_page_cache_ra() of @nr pages from @start, @lookahead of them ahead:
 * nothing past the page holding EOF (@end_page: the pages the file
 * spans), and then page_cache_ra_unbounded()'s mark, @lookahead pages
 * before the end of that cut count (none if it has fewer), rounded up
 * to the smallest folio.  So near EOF the mark moves, or goes, where
 * page_cache_ra_order(), which cuts only its folios at EOF, would keep it.
 */
static struct bs_ra_read unbounded(uint64_t start, uint64_t nr, uint64_t lookahead,
				   const struct bs_ra_limits *lim, uint64_t end_page)
{
	uint64_t min_nr = (uint64_t)1 << lim->min_order;
	uint64_t mark = UINT64_MAX;

	if (start >= end_page || !nr)
		return (struct bs_ra_read){ .kind = BS_RA_NONE };
	if (nr > end_page - start)
		nr = end_page - start;
	if (lookahead <= nr) {
		mark = start + nr - lookahead;
		mark = (mark + min_nr - 1) & ~(min_nr - 1);
	}
	return (struct bs_ra_read){ .kind = BS_RA_UNBOUNDED, .start = start, .nr = nr,
				    .mark = mark, .lookahead = lookahead,
				    .order = lim->min_order };
}

struct bs_ra_read bs_ra_rest(const struct bs_ra_read *rd, uint64_t index,
			     const struct bs_ra_limits *lim, uint64_t end_page)
{
	/* The window is rd->nr pages from rd->start whatever the loop made. */
	if (index < rd->start || rd->nr <= index - rd->start)
		return (struct bs_ra_read){ .kind = BS_RA_NONE };
	return unbounded(index, rd->nr - (index - rd->start), rd->lookahead, lim, end_page);
}

/*
 * page_cache_ra_order() of the window in @ra, asking for @new_order.
 * Large folios are the mapping's when its largest folio is more than a
 * page (mapping_large_folio_support()), even if its smallest is as large.
 */
static struct bs_ra_read ra_order(unsigned int model, struct bs_ra_state *ra,
				  unsigned int new_order, const struct bs_ra_limits *lim,
				  uint64_t end_page)
{
	bool large = lim->max_order > 0;
	uint64_t min_ra = (uint64_t)1 << lim->min_order;

	if (model == BS_RA_6_16) {
		/* 6.16: at least four pages for large folios, and +2 here. */
		if (min_ra < 4)
			min_ra = 4;
		if (!large || ra->size < min_ra)
			return unbounded(ra->start, ra->size, ra->async_size, lim, end_page);
		if (new_order < lim->max_order)
			new_order += 2;
	} else if (!large) {
		ra->order = 0;
		return unbounded(ra->start, ra->size, ra->async_size, lim, end_page);
	}
	if (new_order > lim->max_order)
		new_order = lim->max_order;
	/* An empty window (a fresh state meeting a mark at page 0) caps
	 * nothing: the kernel's ilog2(0) is -1, as unsigned no cap. */
	if (ra->size && new_order > ilog2_u64(ra->size))
		new_order = ilog2_u64(ra->size);
	if (new_order < lim->min_order)
		new_order = lim->min_order;
	if (model != BS_RA_6_16)
		ra->order = new_order;
	return (struct bs_ra_read){ .kind = BS_RA_ORDER, .start = ra->start, .nr = ra->size,
				    .mark = ra->start + ra->size - ra->async_size,
				    .lookahead = ra->async_size, .order = new_order };
}

/*
 * page_cache_next_miss() and page_cache_prev_miss() (mm/filemap.c) walk
 * the page cache's xarray with xas_next() and xas_prev(), and count a
 * slot that is not empty as a page held.  The xarray is a tree of nodes
 * of 64 slots: a leaf node (shift 0) has a slot for each page, and a
 * folio of order < 6 takes the slot of its first page and sibling
 * entries in the rest; a folio of order 6 to 11 takes slots of a node of
 * shift 6 (one slot for 64 pages), and its 64-page blocks have no leaf.
 * The walk keeps xa_index (the page it reports) and xa_offset (the slot
 * it looks at) apart:
 *
 * - its first look is xas_load(), whose xas_descend() moves xa_offset
 *   from a sibling entry to the folio's own slot, leaving xa_index;
 * - then, within a leaf, xas_next() and xas_prev() step both by one
 *   (their inline fast path), so a walk that started on page p of a
 *   small folio (p > 0) looks at the page p below the one it reports
 *   (going up or down), and reports an empty slot as the page p above;
 * - at a leaf's edge, __xas_next() and __xas_prev() step xa_offset only
 *   if it differs from xa_index's, leave for the parent at 64 (or -1) to
 *   the parent slot next to the leaf's own, and descend into a node
 *   there with xas_set_offset(), at the slot of xa_index.  Going up, a
 *   next walk comes back in step (pages skipped); a prev walk lands in
 *   the leaf below at xa_index's offset, 64 pages behind, and stays so.
 *
 * So the model walks a virtual xarray built from what the view says of
 * each page's folio: a block of 64 pages has a leaf node if a folio of
 * order < 6 holds one of its pages; a node of a higher level is taken
 * to be there always (a missing one is an empty slot one level up, and
 * the walk stops on either alike); a page not held is an empty slot.
 * A slot of a folio of order >= 6 counts as held as its page at
 * xa_index (or its first page when xa_index is outside it).
 */
#define XA_SHIFT 6
#define XA_SLOTS 64
#define XA_TOP 5		/* the root's level: shift 30, 2^36 pages */

enum xa_kind { XA_EMPTY, XA_HELD, XA_NODE };

struct xa_walk {
	const struct bs_ra_view *view;
	uint64_t index;		/* xa_index: the page reported */
	unsigned int level;	/* of the node: shift XA_SHIFT * level */
	uint64_t base;		/* the node's first page */
	int off;		/* xa_offset: the slot looked at */
};

static unsigned int xa_shift(unsigned int level)
{
	return XA_SHIFT * level;
}

static int xa_get_offset(uint64_t index, unsigned int level)
{
	return (int)((index >> xa_shift(level)) & (XA_SLOTS - 1));
}

/* Whether a folio of order < 6 holds a page of the 64 from @first: a leaf is there. */
static bool xa_leaf(const struct bs_ra_view *view, uint64_t first)
{
	for (uint64_t page = first; page < first + XA_SLOTS;) {
		uint64_t head;
		unsigned int order;
		bool held;

		if (!view->folio_at(view->ctx, page, &head, &order, &held)) {
			page++;
			continue;
		}
		if (order < XA_SHIFT)
			return true;
		page = head + ((uint64_t)1 << order);
	}
	return false;
}

/* What the slot @w looks at holds. */
static enum xa_kind xa_slot(const struct xa_walk *w)
{
	uint64_t first = w->base + ((uint64_t)w->off << xa_shift(w->level));
	uint64_t head, page = first;
	unsigned int order;
	bool held;

	if (w->level >= 2)
		return XA_NODE;
	if (w->level == 1 && w->index >= first && w->index - first < XA_SLOTS) {
		/*
		 * xa_index's own block: its folio alone decides, one lookup
		 * where xa_leaf() makes up to 64 (this is every random read's
		 * miss).  Folios are aligned: one of order >= 6 covers the
		 * block, which then has no leaf; a smaller one is in a leaf.
		 * With none there, a leaf or not, the walk finds xa_index's
		 * slot empty and stops, as it would one level down.
		 */
		if (!w->view->folio_at(w->view->ctx, w->index, &head, &order, &held))
			return XA_EMPTY;
		if (order < XA_SHIFT)
			return XA_NODE;
		return held ? XA_HELD : XA_EMPTY;
	}
	if (w->level == 1 && xa_leaf(w->view, first))
		return XA_NODE;
	if (!w->view->folio_at(w->view->ctx, page, &head, &order, &held))
		return XA_EMPTY;
	return held ? XA_HELD : XA_EMPTY;
}

/* The for (;;) of __xas_next() and __xas_prev(): descend at xa_index's slot. */
static enum xa_kind xa_descend(struct xa_walk *w)
{
	for (;;) {
		enum xa_kind kind = xa_slot(w);

		if (kind != XA_NODE)
			return kind;
		w->base += (uint64_t)w->off << xa_shift(w->level);
		w->level--;
		w->off = xa_get_offset(w->index, w->level);
	}
}

/* xas_load() from the root: a sibling's slot moves to its folio's own. */
static enum xa_kind xa_load(struct xa_walk *w)
{
	enum xa_kind kind;
	uint64_t head;
	unsigned int order;
	bool held;

	w->level = XA_TOP;
	w->base = 0;
	w->off = xa_get_offset(w->index, XA_TOP);
	kind = xa_descend(w);
	if (w->view->folio_at(w->view->ctx, w->index, &head, &order, &held) &&
	    order >= xa_shift(w->level))
		w->off = xa_get_offset(head, w->level);
	return kind;
}

/* Leave nodes whose edge @w->off passed (64 or -1) for the parent's slot by them. */
static bool xa_up(struct xa_walk *w, int step)
{
	while (w->off == XA_SLOTS || w->off == -1) {
		if (w->level == XA_TOP)
			return false;
		w->off = xa_get_offset(w->base, w->level + 1) + step;
		w->level++;
		w->base &= ~(((uint64_t)1 << xa_shift(w->level + 1)) - 1);
	}
	return true;
}

/* xas_next() (step 1) or xas_prev() (step -1). */
static enum xa_kind xa_step(struct xa_walk *w, int step)
{
	int edge = step > 0 ? XA_SLOTS - 1 : 0;

	w->index += (uint64_t)(int64_t)step;
	if (w->level == 0 && w->off != edge) {
		w->off += step;
		return xa_slot(w);
	}
	if (w->off != xa_get_offset(w->index, w->level))
		w->off += step;
	if (!xa_up(w, step))
		return XA_EMPTY;
	return xa_descend(w);
}

uint64_t bs_ra_next_miss(const struct bs_ra_view *view, uint64_t index, uint64_t max)
{
	struct xa_walk w = { .view = view, .index = index };

	if (!max)
		return index;
	if (xa_load(&w) == XA_EMPTY)
		return index;
	for (uint64_t n = 1; n < max; n++) {
		if (xa_step(&w, 1) == XA_EMPTY)
			return w.index;
		if (!w.index)
			return 0;
	}
	return index + max;
}

uint64_t bs_ra_prev_miss(const struct bs_ra_view *view, uint64_t index, uint64_t max)
{
	struct xa_walk w = { .view = view, .index = index };

	if (!max || xa_load(&w) == XA_EMPTY)
		return index;
	for (uint64_t n = 1; n < max; n++) {
		if (!w.index)
			return UINT64_MAX;
		if (xa_step(&w, -1) == XA_EMPTY)
			return w.index;
	}
	return w.index;
}

struct bs_ra_read bs_ra_sync(unsigned int model, struct bs_ra_state *ra, uint64_t index,
			     uint64_t req, const struct bs_ra_limits *lim,
			     const struct bs_ra_view *view)
{
	uint64_t max = lim->max_pages;
	uint64_t prev_index = (uint64_t)ra->prev_pos >> BS_PAGE_SHIFT;
	uint64_t miss, contig;

	if (!index || req > max || index - prev_index <= 1) {
		ra->start = index;
		ra->size = bs_ra_init_size(req, max);
		ra->async_size = ra->size > req ? ra->size - req : ra->size >> 1;
	} else {
		/* The cached history a stream would leave behind. */
		miss = bs_ra_prev_miss(view, index - 1, max);
		contig = index - miss - 1;
		if (contig <= req)
			return (struct bs_ra_read){ .kind = BS_RA_RANDOM, .start = index,
						    .nr = req, .mark = UINT64_MAX };
		/* Cached from page 0: a long stream, or a whole-file read. */
		if (miss == UINT64_MAX)
			contig *= 2;
		ra->start = index;
		ra->size = min_u64(contig + req, max);
		ra->async_size = 1;
	}
	if (model == BS_RA_6_16)
		return ra_order(model, ra, 0, lim, view->end_page);
	ra->order = 0;
	return ra_order(model, ra, ra->order, lim, view->end_page);
}

struct bs_ra_read bs_ra_async(unsigned int model, struct bs_ra_state *ra,
			      uint64_t folio_index, unsigned int folio_order, uint64_t req,
			      const struct bs_ra_limits *lim, const struct bs_ra_view *view)
{
	uint64_t max = lim->max_pages;
	uint64_t folio_mask = ((uint64_t)1 << folio_order) - 1;
	uint64_t expected = (ra->start + ra->size - ra->async_size) & ~folio_mask;
	uint64_t start, end, aligned_end, align;

	if (folio_index == expected) {
		/* This open's own mark: push the window forward, larger. */
		uint64_t next = bs_ra_next_size(ra->size, max);

		ra->start += ra->size;
		if (next > ra->size)
			ra->size = next;
	} else {
		/*
		 * A mark without matching state (interleaved reads, another
		 * open's window): the cached pages after the folio stand for
		 * the last window's read-ahead part.
		 */
		start = bs_ra_next_miss(view, folio_index + 1, max);
		if (!start || start - folio_index > max)
			return (struct bs_ra_read){ .kind = BS_RA_NONE };
		ra->start = start;
		ra->size = start - folio_index + req;
		ra->size = bs_ra_next_size(ra->size, max);
	}
	if (model == BS_RA_6_16) {
		ra->async_size = ra->size;
		return ra_order(model, ra, folio_order, lim, view->end_page);
	}
	/* 6.17+: the open's own order, the window's end on its boundary. */
	ra->order += 2;
	align = (uint64_t)1 << (ra->order < (unsigned int)__builtin_ctzll(max)
				? ra->order : (unsigned int)__builtin_ctzll(max));
	end = ra->start + ra->size;
	aligned_end = end & ~(align - 1);
	if (aligned_end > ra->start)
		ra->size -= end - aligned_end;
	ra->async_size = ra->size;
	return ra_order(model, ra, ra->order, lim, view->end_page);
}
