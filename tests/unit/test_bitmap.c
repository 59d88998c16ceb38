// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Unit test of blockstate's bit range helpers (bitmap.c) and of the block
 * range maths of a folio (bs_folio_first_blk/end_blk).
 *
 * Every bs_bits_* helper (or_range included) is compared with a naive reference, a bool per
 * bit, over half-open ranges [start, end):
 *   - every range of a 200-bit map (all start <= end pairs), on several
 *     map patterns, so every word boundary and empty range is covered;
 *   - named edges: empty ranges everywhere, single bits 0, 63, 64, 127 and
 *     the last bit of maps of 1, 8, 64, 65, 128 and 4096 bits (the block
 *     counts of folios of 4 KiB..2 MiB with blocks of 512 B..64 KiB);
 *   - random ranges of random 4096-bit maps.
 * Maps are surrounded by guard words and the bits past the map's end in
 * its last word are checked too: nothing outside [start, end) may change.
 *
 * The folio maths is checked for every block size (512..65536) and folio
 * size (4 KiB..2 MiB) with folios made by bs_folio_alloc() in a real cache
 * and file (with a backing ops table that never reads anything), including
 * ranges ending at an EOF inside a block and writeback runs trimmed to it.
 */
#include "bs_i.h"
#include "test_helpers.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BPL ((uint32_t)BS_BITS_PER_LONG)
#define GUARD 0xa5a5a5a5a5a5a5a5ul

/* ---- the reference: one bool per bit ---- */

struct tmap {
	uint32_t nbits;
	size_t longs;
	unsigned long *raw;	/* guard word, longs words, guard word */
	unsigned long *map;	/* raw + 1 */
	bool *ref;		/* longs * BPL bools: tail bits included */
};

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rnd(void)
{
	return t_xorshift(&rng_state);
}

static uint32_t rnd_below(uint32_t n)
{
	return n ? (uint32_t)(rnd() % n) : 0;
}

static void tmap_init(struct tmap *m, uint32_t nbits)
{
	m->nbits = nbits;
	m->longs = BS_BITS_TO_LONGS(nbits);
	m->raw = calloc(m->longs + 2, sizeof(long));
	m->ref = calloc(m->longs * BPL, sizeof(bool));
	T_CHECK(m->raw && m->ref);
	m->map = m->raw + 1;
	m->raw[0] = GUARD;
	m->raw[m->longs + 1] = GUARD;
}

static void tmap_free(struct tmap *m)
{
	free(m->raw);
	free(m->ref);
}

static bool map_bit(const unsigned long *map, uint32_t i)
{
	return (map[i / BPL] >> (i % BPL)) & 1;
}

/*
 * Fill the map (tail bits past nbits included) from a pattern:
 * 0 zeros, 1 ones, 2 random, 3 sparse, 4 alternate bits, 5 words
 * alternately full and empty.
 */
static void tmap_fill(struct tmap *m, int pattern)
{
	for (size_t w = 0; w < m->longs; w++) {
		unsigned long v;

		switch (pattern) {
		case 0: v = 0; break;
		case 1: v = ~0ul; break;
		case 2: v = (unsigned long)rnd(); break;
		case 3: v = (unsigned long)(rnd() & rnd() & rnd()); break;
		case 4: v = 0x5555555555555555ul; break;
		default: v = w & 1 ? ~0ul : 0; break;
		}
		m->map[w] = v;
	}
	for (uint32_t i = 0; i < m->longs * BPL; i++)
		m->ref[i] = map_bit(m->map, i);
}

/* The whole map, tail and guards included, equals the reference. */
static void tmap_check(const struct tmap *m, const char *what, uint32_t start, uint32_t end)
{
	if (m->raw[0] != GUARD || m->raw[m->longs + 1] != GUARD) {
		fprintf(stderr, "%s [%u, %u) of %u bits: wrote outside the map\n",
			what, start, end, m->nbits);
		exit(T_EXIT_FAIL);
	}
	for (uint32_t i = 0; i < m->longs * BPL; i++) {
		if (map_bit(m->map, i) != m->ref[i]) {
			fprintf(stderr, "%s [%u, %u) of %u bits: bit %u is %d, expected %d\n",
				what, start, end, m->nbits, i, map_bit(m->map, i), m->ref[i]);
			exit(T_EXIT_FAIL);
		}
	}
}

static uint32_t ref_count(const bool *ref, const bool *or, uint32_t start, uint32_t end)
{
	uint32_t n = 0;

	for (uint32_t i = start; i < end; i++)
		n += ref[i] || (or && or[i]);
	return n;
}

static uint32_t ref_next(const bool *ref, const bool *or, bool value,
			 uint32_t start, uint32_t end)
{
	for (uint32_t i = start; i < end; i++) {
		if ((ref[i] || (or && or[i])) == value)
			return i;
	}
	return end;
}

#define R_CHECK(cond, what, m, s, e)                                              \
	do {                                                                      \
		if (!(cond)) {                                                    \
			fprintf(stderr, "%s:%d: %s [%u, %u) of %u bits: %s\n",   \
				__FILE__, __LINE__, what, s, e, (m)->nbits, #cond); \
			exit(T_EXIT_FAIL);                                        \
		}                                                                 \
	} while (0)

/* All read-only helpers over [s, e) of @a (with @b as the second map). */
static void check_queries(const struct tmap *a, const struct tmap *b, uint32_t s, uint32_t e)
{
	R_CHECK(bs_bits_count(a->map, s, e) == ref_count(a->ref, NULL, s, e), "count", a, s, e);
	R_CHECK(bs_bits_count_or(a->map, b->map, s, e) == ref_count(a->ref, b->ref, s, e),
		"count_or", a, s, e);
	R_CHECK(bs_bits_next_set(a->map, NULL, s, e) == ref_next(a->ref, NULL, true, s, e),
		"next_set", a, s, e);
	R_CHECK(bs_bits_next_set(a->map, b->map, s, e) == ref_next(a->ref, b->ref, true, s, e),
		"next_set(or)", a, s, e);
	R_CHECK(bs_bits_next_clear(a->map, s, e) == ref_next(a->ref, NULL, false, s, e),
		"next_clear", a, s, e);
	R_CHECK(bs_bits_all_set(a->map, s, e) == (ref_next(a->ref, NULL, false, s, e) == e),
		"all_set", a, s, e);
	/* Queries never write. */
	tmap_check(a, "query", s, e);
	tmap_check(b, "query", s, e);
}

/* @a |= @b over [s, e), against the reference; @b is unchanged. */
static void check_or_range(struct tmap *a, const struct tmap *b, uint32_t s, uint32_t e)
{
	bs_bits_or_range(a->map, b->map, s, e);
	for (uint32_t i = s; i < e; i++)
		a->ref[i] = a->ref[i] || b->ref[i];
	tmap_check(a, "or_range", s, e);
	tmap_check(b, "or_range source", s, e);
}

/* Set then clear [s, e) on top of the current contents, against the reference. */
static void check_updates(struct tmap *a, uint32_t s, uint32_t e)
{
	bs_bits_set(a->map, s, e);
	for (uint32_t i = s; i < e; i++)
		a->ref[i] = true;
	tmap_check(a, "set", s, e);
	R_CHECK(bs_bits_all_set(a->map, s, e), "all_set after set", a, s, e);
	R_CHECK(bs_bits_count(a->map, s, e) == e - s, "count after set", a, s, e);
	R_CHECK(bs_bits_next_clear(a->map, s, e) == e, "next_clear after set", a, s, e);

	bs_bits_clear(a->map, s, e);
	for (uint32_t i = s; i < e; i++)
		a->ref[i] = false;
	tmap_check(a, "clear", s, e);
	R_CHECK(bs_bits_count(a->map, s, e) == 0, "count after clear", a, s, e);
	R_CHECK(bs_bits_next_set(a->map, NULL, s, e) == e, "next_set after clear", a, s, e);
	R_CHECK(bs_bits_all_set(a->map, s, e) == (s == e), "all_set after clear", a, s, e);
}

/* One range on maps of @nbits bits, for every pattern pair. */
static void check_range(uint32_t nbits, uint32_t s, uint32_t e)
{
	struct tmap a, b;

	tmap_init(&a, nbits);
	tmap_init(&b, nbits);
	for (int pa = 0; pa < 6; pa++) {
		for (int pb = 0; pb < 6; pb += 2) {
			tmap_fill(&a, pa);
			tmap_fill(&b, pb);
			check_queries(&a, &b, s, e);
			check_updates(&a, s, e);
			/* Again on the changed map: the bits around the range differ now. */
			tmap_fill(&a, pa);
			check_updates(&a, s, e);
			check_queries(&a, &b, s, e);
			tmap_fill(&a, pa);
			check_or_range(&a, &b, s, e);
		}
	}
	tmap_free(&a);
	tmap_free(&b);
}

/* Every start <= end pair of a 200-bit map. */
static void test_exhaustive(void)
{
	const uint32_t nbits = 200;
	struct tmap a, b;

	tmap_init(&a, nbits);
	tmap_init(&b, nbits);
	for (int pa = 0; pa < 6; pa++) {
		for (uint32_t s = 0; s <= nbits; s++) {
			for (uint32_t e = s; e <= nbits; e++) {
				tmap_fill(&a, pa);
				tmap_fill(&b, (pa + 2) % 6);
				check_queries(&a, &b, s, e);
				check_updates(&a, s, e);
				check_queries(&a, &b, s, e);
				tmap_fill(&a, pa);
				check_or_range(&a, &b, s, e);
			}
		}
	}
	tmap_free(&a);
	tmap_free(&b);
}

/* The map sizes a folio can have: nr_blocks from 4K/64K to 2M/512. */
static const uint32_t edge_sizes[] = { 1, 2, 8, 63, 64, 65, 127, 128, 129, 512, 4095, 4096 };
#define NR_EDGE_SIZES (sizeof(edge_sizes) / sizeof(edge_sizes[0]))

static void test_edges(void)
{
	static const uint32_t bits[] = { 0, 1, 62, 63, 64, 65, 126, 127, 128, 129, 191, 192 };

	for (size_t i = 0; i < NR_EDGE_SIZES; i++) {
		uint32_t n = edge_sizes[i];

		/* Empty ranges at every interesting place, the end included. */
		for (size_t j = 0; j < sizeof(bits) / sizeof(bits[0]); j++) {
			if (bits[j] <= n)
				check_range(n, bits[j], bits[j]);
		}
		check_range(n, n, n);
		/* Single bits, the first and the last of the map among them. */
		for (size_t j = 0; j < sizeof(bits) / sizeof(bits[0]); j++) {
			if (bits[j] < n)
				check_range(n, bits[j], bits[j] + 1);
		}
		check_range(n, n - 1, n);
		/* Whole map, all but the first / the last bit. */
		check_range(n, 0, n);
		if (n > 1) {
			check_range(n, 1, n);
			check_range(n, 0, n - 1);
		}
		/* Across each word boundary inside the map. */
		for (uint32_t w = BPL; w < n; w += BPL) {
			check_range(n, w - 1, w + 1);
			check_range(n, w - 1, w);
			check_range(n, w, w + 1);
			check_range(n, w - BPL, w + (w + BPL <= n ? BPL : n - w));
			if (w >= 3 && w + 3 <= n)
				check_range(n, w - 3, w + 3);
			if (w > BPL && w + 1 <= n)
				check_range(n, w - BPL - 1, w + 1);
			if (w > 256)	/* the long maps: a handful of boundaries is enough */
				w += 7 * BPL;
		}
	}
}

/* Single named bits 0, 63, 64, 127 and the last bit: set alone, found alone. */
static void test_single_bits(void)
{
	for (size_t i = 0; i < NR_EDGE_SIZES; i++) {
		uint32_t n = edge_sizes[i];
		uint32_t cand[] = { 0, 63, 64, 127, n - 1 };
		struct tmap m;

		tmap_init(&m, n);
		for (size_t j = 0; j < sizeof(cand) / sizeof(cand[0]); j++) {
			uint32_t b = cand[j];

			if (b >= n)
				continue;
			tmap_fill(&m, 0);
			bs_bits_set(m.map, b, b + 1);
			m.ref[b] = true;
			tmap_check(&m, "set one", b, b + 1);
			R_CHECK(bs_bits_count(m.map, 0, n) == 1, "count one", &m, b, b + 1);
			R_CHECK(bs_bits_next_set(m.map, NULL, 0, n) == b, "find one", &m, b, b + 1);
			R_CHECK(bs_bits_next_set(m.map, NULL, b, n) == b, "find one at", &m, b, b + 1);
			R_CHECK(bs_bits_next_set(m.map, NULL, b + 1, n) == n, "none after", &m, b, b + 1);
			R_CHECK(bs_bits_next_set(m.map, NULL, 0, b) == b, "none before", &m, b, b + 1);
			R_CHECK(bs_bits_all_set(m.map, b, b + 1), "all one", &m, b, b + 1);
			R_CHECK(bs_bits_next_clear(m.map, b, n) == (b + 1 < n ? b + 1 : n),
				"clear after", &m, b, b + 1);

			tmap_fill(&m, 1);
			bs_bits_clear(m.map, b, b + 1);
			m.ref[b] = false;
			tmap_check(&m, "clear one", b, b + 1);
			R_CHECK(bs_bits_next_clear(m.map, 0, n) == b, "find hole", &m, b, b + 1);
			R_CHECK(bs_bits_count(m.map, 0, n) == n - 1, "count hole", &m, b, b + 1);
			R_CHECK(!bs_bits_all_set(m.map, 0, n), "not all", &m, b, b + 1);
			R_CHECK(bs_bits_all_set(m.map, b + 1, n), "all after", &m, b, b + 1);
			R_CHECK(bs_bits_all_set(m.map, 0, b), "all before", &m, b, b + 1);
		}
		tmap_free(&m);
	}
}

/* Random maps of 4096 bits (and the other edge sizes), random ranges. */
static void test_random(void)
{
	for (size_t i = 0; i < NR_EDGE_SIZES; i++) {
		uint32_t n = edge_sizes[i];
		int iters = n >= 4096 ? 3000 : 600;
		struct tmap a, b;

		tmap_init(&a, n);
		tmap_init(&b, n);
		tmap_fill(&a, 2);
		tmap_fill(&b, 3);
		for (int it = 0; it < iters; it++) {
			uint32_t s = rnd_below(n + 1), e;

			/* Short ranges (within/around a word) as often as long ones. */
			if (rnd() & 1)
				e = s + rnd_below(n - s + 1);
			else
				e = s + rnd_below((n - s < 2 * BPL ? n - s : 2 * BPL) + 1);
			if (it % 97 == 0)
				tmap_fill(&a, (int)rnd_below(6));
			check_queries(&a, &b, s, e);
			/* Random updates keep the map random (not drained by clears). */
			if (it % 5 == 0) {
				check_or_range(&a, &b, s, e);
			} else if (rnd() & 1) {
				bs_bits_set(a.map, s, e);
				for (uint32_t k = s; k < e; k++)
					a.ref[k] = true;
			} else {
				bs_bits_clear(a.map, s, e);
				for (uint32_t k = s; k < e; k++)
					a.ref[k] = false;
			}
			tmap_check(&a, "random update", s, e);
		}
		tmap_free(&a);
		tmap_free(&b);
	}
}

/* ---- folio block maths ---- */

static ssize_t null_read(void *ctx, void *buf, size_t len, off_t off)
{
	(void)ctx; (void)buf; (void)len; (void)off;
	return 0;	/* an empty backing file: every read is at EOF */
}

static int null_truncate(void *ctx, off_t size)
{
	(void)ctx; (void)size;
	return 0;
}

static int null_fallocate(void *ctx, int mode, off_t off, off_t len)
{
	(void)ctx; (void)mode; (void)off; (void)len;
	return 0;
}

static const struct bs_backing_ops null_ops = {
	.read = null_read,
	.truncate = null_truncate,
	.fallocate = null_fallocate,
};

static uint32_t ref_first_blk(uint32_t poff, uint32_t bsize)
{
	return poff / bsize;
}

static uint32_t ref_end_blk(uint32_t poff, uint32_t plen, uint32_t bsize)
{
	uint64_t end = (uint64_t)poff + plen;

	return (uint32_t)(end / bsize + (end % bsize != 0));
}

#define F_CHECK(cond)                                                              \
	do {                                                                       \
		if (!(cond)) {                                                     \
			fprintf(stderr, "%s:%d: block %u folio %u poff %u plen %u: %s\n", \
				__FILE__, __LINE__, bsize, fsize, poff, plen, #cond); \
			exit(T_EXIT_FAIL);                                         \
		}                                                                  \
	} while (0)

/* Interesting byte offsets in a folio of @fsize bytes with @bsize blocks. */
static uint32_t pick_off_raw(uint32_t fsize, uint32_t bsize, int i)
{
	uint32_t nb = fsize / bsize;

	switch (i) {
	case 0: return 0;
	case 1: return 1;
	case 2: return bsize - 1;
	case 3: return bsize;
	case 4: return bsize + 1;
	case 5: return fsize - bsize;
	case 6: return fsize - bsize + 1;
	case 7: return fsize - 1;
	case 8: return fsize;
	case 9: return (nb / 2) * bsize;
	case 10: return (nb / 2) * bsize - 1 + (nb == 1);
	case 11: return BS_PAGE_SIZE < fsize ? BS_PAGE_SIZE - 1 : fsize - 1;
	case 12: return BS_PAGE_SIZE < fsize ? BS_PAGE_SIZE + 1 : 0;
	default: return rnd_below(fsize + 1);
	}
}

/* The same, at most @fsize (when the folio is one block, bsize + 1 is past it). */
static uint32_t pick_off(uint32_t fsize, uint32_t bsize, int i)
{
	uint32_t off = pick_off_raw(fsize, bsize, i);

	return off < fsize ? off : fsize;
}

/*
 * Held blocks and pages of the folio, recounted naively: a page is held
 * if any block overlapping it is dirty or under writeback.
 */
static void ref_held(const struct bs_folio *f, uint32_t bsize, uint32_t *blocks, uint32_t *pages)
{
	uint32_t nb = f->nr_blocks, np = f->size / BS_PAGE_SIZE;

	*blocks = 0;
	*pages = 0;
	for (uint32_t b = 0; b < nb; b++)
		*blocks += map_bit(f->dirty, b) || map_bit(f->writeback, b);
	for (uint32_t p = 0; p < np; p++) {
		uint64_t pstart = (uint64_t)p * BS_PAGE_SIZE, pend = pstart + BS_PAGE_SIZE;
		bool held = false;

		for (uint32_t b = (uint32_t)(pstart / bsize); (uint64_t)b * bsize < pend; b++)
			held |= map_bit(f->dirty, b) || map_bit(f->writeback, b);
		*pages += held;
	}
}

static void check_folio_maths(struct bs_cache *cache, struct bs_file *file,
			      uint32_t bsize, uint32_t fsize)
{
	uint32_t poff = 0, plen = 0, nb = fsize / bsize;
	size_t longs = BS_BITS_TO_LONGS(nb);
	struct bs_stats st;
	struct bs_folio *f;

	bs_cache_stats(cache, &st);
	F_CHECK(st.folios == 0 && st.cache_bytes == 0);
	f = bs_folio_alloc(file, (off_t)fsize * 3, fsize);
	F_CHECK(f != NULL);
	F_CHECK(f->nr_blocks == nb && f->size == fsize && f->start == (off_t)fsize * 3);
	F_CHECK(((uintptr_t)f->data & (BS_PAGE_SIZE - 1)) == 0);
	F_CHECK(f->file == file && f->held_blocks == 0 && f->price == 0);
	/* The three maps are distinct, each nb bits, and start empty. */
	F_CHECK(f->dirty == f->uptodate + longs && f->writeback == f->dirty + longs);
	F_CHECK(bs_bits_count(f->uptodate, 0, nb) == 0 && bs_bits_count(f->dirty, 0, nb) == 0 &&
		bs_bits_count(f->writeback, 0, nb) == 0);
	bs_cache_stats(cache, &st);
	F_CHECK(st.folios == 1 && st.cache_bytes == fsize);
	memset(f->data, 0x5a, fsize);	/* the whole buffer is ours (ASan) */

	for (int i = 0; i < 13 + 20; i++) {
		for (int j = 0; j < 13 + 20; j++) {
			uint32_t e;

			poff = pick_off(fsize, bsize, i);
			e = pick_off(fsize, bsize, j);
			if (e < poff)
				continue;
			plen = e - poff;
			F_CHECK(bs_folio_first_blk(f, poff) == ref_first_blk(poff, bsize));
			F_CHECK(bs_folio_end_blk(f, poff, plen) == ref_end_blk(poff, plen, bsize));
			F_CHECK(bs_folio_end_blk(f, poff, plen) <= nb);
			/* The blocks cover the bytes, and not one block more. */
			F_CHECK((uint64_t)bs_folio_first_blk(f, poff) * bsize <= poff);
			F_CHECK(plen == 0 || (uint64_t)bs_folio_end_blk(f, poff, plen) * bsize <
					     (uint64_t)poff + plen + bsize);
			F_CHECK((uint64_t)bs_folio_end_blk(f, poff, plen) * bsize >= (uint64_t)poff + plen);
			/* EOF inside a block: a range up to it ends with that block. */
			if (plen && (poff + plen) % bsize)
				F_CHECK(bs_folio_end_blk(f, poff, plen) == (poff + plen) / bsize + 1);
		}
	}
	/* Whole folio; empty range at the end. */
	poff = 0, plen = fsize;
	F_CHECK(bs_folio_first_blk(f, 0) == 0 && bs_folio_end_blk(f, 0, fsize) == nb);
	poff = fsize, plen = 0;
	F_CHECK(bs_folio_first_blk(f, fsize) == nb && bs_folio_end_blk(f, fsize, 0) == nb);

	/*
	 * Held counts and price (policy "page") as blocks go dirty, under
	 * writeback and clean, against a naive recount.
	 */
	bs_folio_lock(f);
	for (int it = 0; it < 40; it++) {
		uint32_t a = rnd_below(nb + 1), b = rnd_below(nb + 1), blocks, pages;
		uint32_t s = a < b ? a : b, e = a < b ? b : a;

		poff = s * bsize, plen = (e - s) * bsize;
		switch (rnd_below(4)) {
		case 0: case 1:
			bs_folio_set_dirty(f, s, e);
			break;
		case 2:
			bs_folio_clear_dirty(f, s, e);
			break;
		default:
			/* Only dirty blocks go to writeback; end it at once. */
			s = bs_bits_next_set(f->dirty, NULL, s, e);
			e = bs_bits_next_clear(f->dirty, s, e);
			if (s < e) {
				bs_folio_start_writeback(f, s, e);
				F_CHECK(f->wb_blocks == e - s);
				bs_folio_end_writeback(f, s, e, rnd() & 1);
			}
			break;
		}
		ref_held(f, bsize, &blocks, &pages);
		F_CHECK(f->held_blocks == blocks && f->held_pages == pages);
		F_CHECK(f->price == (uint64_t)pages * BS_PAGE_SIZE);
		F_CHECK(f->wb_blocks == 0);
		bs_cache_stats(cache, &st);
		F_CHECK(st.charged_bytes == f->price);
		F_CHECK(st.dirty_bytes_exact == (uint64_t)blocks * bsize);
		F_CHECK(st.pinned_bytes == (blocks ? fsize : 0));
	}
	bs_folio_clear_dirty(f, 0, nb);
	F_CHECK(f->held_blocks == 0 && f->held_pages == 0 && f->price == 0);
	bs_folio_unlock_raw(f);
	bs_cache_stats(cache, &st);
	F_CHECK(st.charged_bytes == 0 && st.dirty_bytes_exact == 0 && st.pinned_bytes == 0);
	bs_folio_put(f);
	bs_cache_stats(cache, &st);
	F_CHECK(st.folios == 0 && st.cache_bytes == 0);
}

/*
 * EOF inside a block, through the public API: a write ending there makes
 * one dirty run whose last block holds EOF and whose length stops at EOF.
 */
static void check_eof_run(struct bs_cache *cache, uint32_t bsize, uint32_t fsize)
{
	static const uint32_t tails[] = { 1, 7, 511 };
	uint32_t poff = 0, plen = 0;

	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		/* EOF in the last block of the second folio, or in its first. */
		for (int where = 0; where < 2; where++) {
			off_t fstart = fsize;
			off_t eof = fstart + (where ? 0 : fsize - bsize) + tails[i] % bsize;
			off_t pos = 0;
			struct bs_wb_run run[4];
			struct bs_file *file;
			char *buf = malloc((size_t)(eof - fstart));
			int n;

			if (eof == fstart + (where ? 0 : fsize - bsize))
				eof += 1;
			poff = (uint32_t)(eof - fstart), plen = 0;
			F_CHECK(buf != NULL);
			memset(buf, 'e', (size_t)(eof - fstart));
			F_CHECK(bs_file_create(cache, &null_ops, NULL, 0, &file) == 0);
			F_CHECK(bs_write(file, buf, (size_t)(eof - fstart), fstart) == eof - fstart);
			F_CHECK(bs_file_size(file) == eof);
			n = bs_wb_collect(file, &pos, INT64_MAX, run, 4, SIZE_MAX);
			F_CHECK(n == 1);
			F_CHECK(run[0].off == fstart && run[0].len == (size_t)(eof - fstart));
			F_CHECK(run[0].first_blk == 0);
			F_CHECK(run[0].end_blk == ref_end_blk(0, (uint32_t)(eof - fstart), bsize));
			F_CHECK(run[0].end_blk == bs_folio_end_blk(run[0].folio, 0,
								 (uint32_t)(eof - fstart)));
			F_CHECK(run[0].data == run[0].folio->data);
			F_CHECK(memcmp(run[0].data, buf, run[0].len) == 0);
			/* Bytes past EOF in the last block are zero. */
			for (size_t k = run[0].len; k < (size_t)run[0].end_blk * bsize; k++)
				F_CHECK(((char *)run[0].data)[k] == 0);
			bs_wb_complete(file, &run[0], 0);
			F_CHECK(!bs_file_has_held(file));
			F_CHECK(bs_cache_check(cache) == 0);
			bs_file_destroy(file);
			free(buf);
		}
	}
}

static void test_folio_maths(void)
{
	for (uint32_t bsize = BS_MIN_BLOCK_SIZE; bsize <= BS_MAX_BLOCK_SIZE; bsize <<= 1) {
		for (uint32_t fsize = BS_MIN_FOLIO_SIZE; fsize <= BS_MAX_FOLIO_SIZE; fsize <<= 1) {
			struct bs_config cfg = {
				.block_size = bsize, .folio_size = fsize,
				.cache_size = 8ull * fsize,
				.account = bs_account_policy_find("page"),
				.size = bs_size_policy_find("fixed"),
			};
			struct bs_cache *cache;
			struct bs_file *file;

			if (fsize < bsize) {
				char err[128];

				T_CHECK(bs_config_check(&cfg, err, sizeof(err)) == -EINVAL);
				continue;
			}
			T_CHECK(cfg.account && cfg.size);
			T_CHECK(bs_cache_create(&cfg, NULL, NULL, &cache) == 0);
			T_CHECK(bs_file_create(cache, &null_ops, NULL, 0, &file) == 0);
			check_folio_maths(cache, file, bsize, fsize);
			bs_file_destroy(file);
			check_eof_run(cache, bsize, fsize);
			T_CHECK(bs_cache_check(cache) == 0);
			bs_cache_destroy(cache);
		}
	}
}

int main(void)
{
	T_CHECK(BPL == 64 || BPL == 32);
	test_edges();
	test_single_bits();
	test_exhaustive();
	test_random();
	test_folio_maths();
	return T_EXIT_PASS;
}
