// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bitmap.c - bit range helpers for the per-folio block bitmaps.
 *
 * Every range is half-open, [start, end), in bits.  A range is handled as
 * a partial first word, whole middle words and a partial last word, so
 * that no caller needs +1/-1 arithmetic.
 */
#include "bs_i.h"

/* Bits [start % BPL, end) of the word holding @start, end <= next word. */
static unsigned long word_mask(uint32_t start, uint32_t end)
{
	unsigned int lo = start % BS_BITS_PER_LONG;
	unsigned int n = end - start;
	unsigned long ones = n >= BS_BITS_PER_LONG ? ~0ul : (1ul << n) - 1;

	return ones << lo;
}

/* End of the word-bounded piece of [start, end) that starts at @start. */
static uint32_t piece_end(uint32_t start, uint32_t end)
{
	uint32_t word_end = (start / BS_BITS_PER_LONG + 1) * BS_BITS_PER_LONG;

	return word_end < end ? word_end : end;
}

void bs_bits_set(unsigned long *map, uint32_t start, uint32_t end)
{
	while (start < end) {
		uint32_t pend = piece_end(start, end);

		map[start / BS_BITS_PER_LONG] |= word_mask(start, pend);
		start = pend;
	}
}

void bs_bits_clear(unsigned long *map, uint32_t start, uint32_t end)
{
	while (start < end) {
		uint32_t pend = piece_end(start, end);

		map[start / BS_BITS_PER_LONG] &= ~word_mask(start, pend);
		start = pend;
	}
}

uint32_t bs_bits_count(const unsigned long *map, uint32_t start, uint32_t end)
{
	uint32_t n = 0;

	while (start < end) {
		uint32_t pend = piece_end(start, end);

		n += __builtin_popcountl(map[start / BS_BITS_PER_LONG] &
					 word_mask(start, pend));
		start = pend;
	}
	return n;
}

uint32_t bs_bits_count_or(const unsigned long *a, const unsigned long *b,
			  uint32_t start, uint32_t end)
{
	uint32_t n = 0;

	while (start < end) {
		uint32_t pend = piece_end(start, end);
		size_t w = start / BS_BITS_PER_LONG;

		n += __builtin_popcountl((a[w] | b[w]) & word_mask(start, pend));
		start = pend;
	}
	return n;
}

uint32_t bs_bits_next_set(const unsigned long *map, const unsigned long *or,
			  uint32_t start, uint32_t end)
{
	while (start < end) {
		uint32_t pend = piece_end(start, end);
		unsigned long w = map[start / BS_BITS_PER_LONG];

		if (or)
			w |= or[start / BS_BITS_PER_LONG];
		w &= word_mask(start, pend);
		if (w)
			return start - start % BS_BITS_PER_LONG + __builtin_ctzl(w);
		start = pend;
	}
	return end;
}

uint32_t bs_bits_next_clear(const unsigned long *map, uint32_t start, uint32_t end)
{
	while (start < end) {
		uint32_t pend = piece_end(start, end);
		unsigned long w = ~map[start / BS_BITS_PER_LONG] & word_mask(start, pend);

		if (w)
			return start - start % BS_BITS_PER_LONG + __builtin_ctzl(w);
		start = pend;
	}
	return end;
}

bool bs_bits_all_set(const unsigned long *map, uint32_t start, uint32_t end)
{
	return bs_bits_next_clear(map, start, end) == end;
}

void bs_bits_or_range(unsigned long *dst, const unsigned long *src, uint32_t start,
		      uint32_t end)
{
	while (start < end) {
		uint32_t pend = piece_end(start, end);
		size_t w = start / BS_BITS_PER_LONG;

		dst[w] |= src[w] & word_mask(start, pend);
		start = pend;
	}
}
