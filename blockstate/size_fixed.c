// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * size_fixed.c - folio sizing policy "fixed": every new folio is as large
 * as folio_size allows (and its neighbours leave room), whatever the
 * access; the default is "kernel" (size_kernel.c).
 */
#include "policy.h"

static unsigned int fixed_order(const struct bs_size_state *st, off_t off, size_t len,
				unsigned int max_order)
{
	(void)st;
	(void)off;
	(void)len;
	return max_order;
}

const struct bs_size_policy bs_size_fixed = {
	.name = "fixed",
	.help = "every folio is folio_size",
	.order = fixed_order,
};
