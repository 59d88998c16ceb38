// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * account_folio.c - dirty accounting policy "folio": a folio with any
 * dirty block is charged all of its pages, as Linux's
 * folio_account_dirtied() charges folio_nr_pages().  One dirty 4 KiB
 * block of a 2 MiB folio costs 512 pages.
 */
#include "policy.h"

static uint64_t folio_price(const struct bs_held_state *st)
{
	return st->held_blocks ? st->folio_size : 0;
}

const struct bs_account_policy bs_account_folio = {
	.name = "folio",
	.help = "charge the whole folio while any block is dirty (Linux today)",
	.price = folio_price,
};
