// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * size_kernel.c - folio sizing policy "kernel": what Linux 6.18 does for
 * a filesystem with large folios.
 *
 * - A write that needs a new folio asks for one as large as the rest of
 *   the write, rounded down to a power of two (the page cache's
 *   fgf_set_order(len)), no larger than folio_size, and no larger than
 *   the alignment of its first page allows, since a folio starts at a
 *   multiple of its size.  An 8 KiB write makes an 8 KiB folio, a
 *   1 MiB aligned write a 1 MiB folio.
 * - A folio for a readahead window gets the size readahead asks for
 *   (readahead.c ramps it up window after window, as
 *   page_cache_ra_order() does); the same rounding applies.
 * - A read that readahead did not cover (a random read: readahead saw no
 *   stream) makes folios of one page, as the kernel's plain
 *   page_cache_ra_unbounded() does.
 *
 * blockstate then shrinks a write's or a read's folio when a neighbour
 * is in the way, as __filemap_get_folio() retries smaller orders; a
 * readahead folio is never shrunk: a neighbour in its range stops the
 * window's large folios (readahead.c), as filemap_add_folio()'s -EEXIST
 * stops page_cache_ra_order().
 */
#include "policy.h"

/* Largest order whose folio is at most @len bytes (a page at least). */
static unsigned int order_floor(size_t len)
{
	unsigned int order = BS_PAGE_SHIFT;

	while (order < 62 && ((size_t)2 << order) <= len)
		order++;
	return order;
}

static unsigned int kernel_order(const struct bs_size_state *st, off_t off, size_t len,
				 unsigned int max_order)
{
	uint64_t index = (uint64_t)off >> BS_PAGE_SHIFT;
	unsigned int order;

	if (st->access == BS_SIZE_READ)
		return BS_PAGE_SHIFT;
	order = order_floor(len);
	if (order > max_order)
		order = max_order;
	/* A folio at page index i is at most as large as i's lowest set bit. */
	if (index && order > (unsigned int)__builtin_ctzll(index) + BS_PAGE_SHIFT)
		order = (unsigned int)__builtin_ctzll(index) + BS_PAGE_SHIFT;
	return order;
}

const struct bs_size_policy bs_size_kernel = {
	.name = "kernel",
	.help = "as Linux 6.18: writes by their length and alignment, reads by readahead",
	.order = kernel_order,
};
