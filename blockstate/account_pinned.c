// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * account_pinned.c - dirty accounting policy "pinned": charge each dirty
 * page as "page" does, but never less than a share of the folio the
 * dirty data pins (parameter share, in permille of the folio; 125, an
 * eighth, by default).  One dirty block of a 2 MiB folio then costs 64
 * pages, not 1 ("page") or 512 ("folio"): partly dirty large folios count
 * against the dirty limit in proportion to the memory they hold.
 * share=0 prices as "page", share=1000 as "folio".
 *
 * The README's walkthrough policy pinned8, with its eighth made a
 * parameter (-o dirty_account=pinned,account.share=250).
 */
#include "policy.h"

enum { PINNED_SHARE };

static const struct bs_param pinned_params[] = {
	[PINNED_SHARE] = { .name = "share", .unit = "permille of the folio",
			   .help = "least charge of a folio holding dirty data, per 1000 of its size",
			   .def = 125, .min = 0, .max = 1000 },
};

static uint64_t pinned_price(const struct bs_held_state *st)
{
	uint64_t pages = (uint64_t)st->held_pages * BS_PAGE_SIZE;
	uint64_t share = (uint64_t)st->params[PINNED_SHARE];
	uint64_t pinned = st->held_blocks ? (uint64_t)st->folio_size * share / 1000 : 0;

	return pages > pinned ? pages : pinned;
}

const struct bs_account_policy bs_account_pinned = {
	.name = "pinned",
	.help = "charge each dirty page, at least share/1000 of the folio it pins",
	.price = pinned_price,
	.params = pinned_params,
	.nr_params = sizeof(pinned_params) / sizeof(pinned_params[0]),
};
