// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * account_block.c - dirty accounting policy "block": charge exactly the
 * bytes of dirty blocks.  Equal to "page" for 4 KiB blocks; cheaper for
 * smaller blocks, dearer never.
 */
#include "policy.h"

static uint64_t block_price(const struct bs_held_state *st)
{
	return (uint64_t)st->held_blocks * st->block_size;
}

const struct bs_account_policy bs_account_block = {
	.name = "block",
	.help = "charge the bytes of dirty blocks",
	.price = block_price,
};
