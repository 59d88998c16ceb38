// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * account_page.c - dirty accounting policy "page" (the default): charge
 * each 4 KiB page that holds at least one dirty block, as the per-page
 * accounting patch does with ifs->dirty_pages.
 */
#include "policy.h"

static uint64_t page_price(const struct bs_held_state *st)
{
	return (uint64_t)st->held_pages * BS_PAGE_SIZE;
}

const struct bs_account_policy bs_account_page = {
	.name = "page",
	.help = "charge each 4 KiB page holding a dirty block",
	.price = page_price,
};
