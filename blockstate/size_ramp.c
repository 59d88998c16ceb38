// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * size_ramp.c - folio sizing policy "ramp", like readahead's folio order
 * ramp: start at the size of the access, and while accesses continue
 * where the last folio ended, double the next folio, up to folio_size.
 * A jump elsewhere starts again from the size of that access, so random
 * access keeps small folios and a sequential stream reaches 2 MiB after
 * nine folios from 4 KiB.
 */
#include "policy.h"

/* Smallest order whose folio holds @len bytes. */
static unsigned int order_of(size_t len)
{
	unsigned int order = BS_PAGE_SHIFT;

	while (order < 30 && ((size_t)1 << order) < len)
		order++;
	return order;
}

static unsigned int ramp_order(const struct bs_size_state *st, off_t off, size_t len,
			       unsigned int max_order)
{
	unsigned int order = order_of(len);

	if (st->order && off == st->next_off && st->order + 1 > order)
		order = st->order + 1;
	return order > max_order ? max_order : order;
}

const struct bs_size_policy bs_size_ramp = {
	.name = "ramp",
	.help = "grow folios while access is sequential, like readahead",
	.order = ramp_order,
};
