// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_bitmap - the bit range helpers of blockstate/bitmap.c against a
 * model that keeps one bool per bit.
 *
 * Input: byte 0 and 1 give the map length in bits (1 ..
 * BS_MAX_BLOCKS_PER_FOLIO, the longest bitmap a folio has); then
 * operations of 5 bytes each: opcode, start (2 bytes), end (2 bytes),
 * both reduced into [0, nbits] and ordered, since every caller passes a
 * half-open range inside the map.  The maps are allocated with exactly
 * the words the bit count needs, so ASan catches a helper that touches
 * a word past the range.  After every operation the maps must equal the
 * model, bit for bit, including the unused bits of the last word (which
 * stay clear: nothing may set a bit outside its range).
 */
#include "bs_i.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXBITS BS_MAX_BLOCKS_PER_FOLIO

static bool ref_a[MAXBITS], ref_b[MAXBITS];

static bool bit(const unsigned long *map, uint32_t i)
{
	return (map[i / BS_BITS_PER_LONG] >> (i % BS_BITS_PER_LONG)) & 1;
}

static void fail(const char *what, uint32_t start, uint32_t end, uint32_t nbits)
{
	fprintf(stderr, "fuzz_bitmap: %s wrong for [%u, %u) of %u bits\n", what, start, end,
		nbits);
	abort();
}

static uint32_t get16(const uint8_t **p, const uint8_t *end)
{
	uint32_t v = 0;

	for (int i = 0; i < 2 && *p < end; i++)
		v = v << 8 | *(*p)++;
	return v;
}

/* The maps equal the models over every bit of every word. */
static void compare(const unsigned long *a, const unsigned long *b, uint32_t nbits,
		    size_t words, uint32_t start, uint32_t end)
{
	for (uint32_t i = 0; i < words * BS_BITS_PER_LONG; i++) {
		bool ra = i < nbits && ref_a[i], rb = i < nbits && ref_b[i];

		if (bit(a, i) != ra || bit(b, i) != rb)
			fail("map contents", start, end, nbits);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data, *pend = data + size;
	uint32_t nbits = get16(&p, pend) % MAXBITS + 1;
	size_t words = BS_BITS_TO_LONGS(nbits);
	unsigned long *a = calloc(words, sizeof(*a));
	unsigned long *b = calloc(words, sizeof(*b));

	if (!a || !b)
		abort();
	memset(ref_a, 0, sizeof(ref_a));
	memset(ref_b, 0, sizeof(ref_b));
	while (p < pend) {
		unsigned int op = *p++ % 10;
		uint32_t start = get16(&p, pend) % (nbits + 1);
		uint32_t end = get16(&p, pend) % (nbits + 1);
		uint32_t want, got;

		if (start > end) {
			uint32_t tmp = start;

			start = end;
			end = tmp;
		}
		switch (op) {
		case 0:	/* set in a */
			bs_bits_set(a, start, end);
			for (uint32_t i = start; i < end; i++)
				ref_a[i] = true;
			break;
		case 1:	/* set in b */
			bs_bits_set(b, start, end);
			for (uint32_t i = start; i < end; i++)
				ref_b[i] = true;
			break;
		case 2:	/* clear in a */
			bs_bits_clear(a, start, end);
			for (uint32_t i = start; i < end; i++)
				ref_a[i] = false;
			break;
		case 3:	/* clear in b */
			bs_bits_clear(b, start, end);
			for (uint32_t i = start; i < end; i++)
				ref_b[i] = false;
			break;
		case 4:
			want = 0;
			for (uint32_t i = start; i < end; i++)
				want += ref_a[i];
			if (bs_bits_count(a, start, end) != want)
				fail("bs_bits_count", start, end, nbits);
			break;
		case 5:
			want = 0;
			for (uint32_t i = start; i < end; i++)
				want += ref_a[i] || ref_b[i];
			if (bs_bits_count_or(a, b, start, end) != want)
				fail("bs_bits_count_or", start, end, nbits);
			break;
		case 6:	/* next set in a, then in a | b */
			for (want = start; want < end && !ref_a[want]; want++)
				;
			if (bs_bits_next_set(a, NULL, start, end) != want)
				fail("bs_bits_next_set", start, end, nbits);
			for (want = start; want < end && !ref_a[want] && !ref_b[want]; want++)
				;
			if (bs_bits_next_set(a, b, start, end) != want)
				fail("bs_bits_next_set with or", start, end, nbits);
			break;
		case 7:
			for (want = start; want < end && ref_a[want]; want++)
				;
			got = bs_bits_next_clear(a, start, end);
			if (got != want)
				fail("bs_bits_next_clear", start, end, nbits);
			break;
		case 8:
			for (want = start; want < end && ref_b[want]; want++)
				;
			if (bs_bits_all_set(b, start, end) != (want == end))
				fail("bs_bits_all_set", start, end, nbits);
			break;
		default:	/* a |= b over the range */
			bs_bits_or_range(a, b, start, end);
			for (uint32_t i = start; i < end; i++)
				ref_a[i] = ref_a[i] || ref_b[i];
			break;
		}
		compare(a, b, nbits, words, start, end);
	}
	free(a);
	free(b);
	return 0;
}
