// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * index.c - the per-file folio index.
 *
 * A file is cut into chunks the size of the largest folio.  A 64-way radix
 * tree maps a chunk number to its chunk; a chunk has one slot per 4 KiB
 * page, each pointing at the folio that covers the page (a 2 MiB folio
 * fills 512 slots, like a multi-index entry in the kernel's XArray).
 * Folios never cross a chunk, because they are naturally aligned and no
 * larger than a chunk.  Empty chunks and nodes are freed.
 *
 * Marks tag folios, as the XArray's dirty and writeback marks do, so that
 * writeback finds them without walking every folio of the file: the held
 * mark (BS_MARK_HELD, "the tag") the folios holding dirty or writeback
 * blocks, the unsynced mark (BS_MARK_UNSYNCED) those holding blocks
 * written to the backing file since its last successful sync.  For each
 * mark a chunk has a bit per slot (set at the first slot of a marked
 * folio) and a count, every node the number of marked folios below it.
 * The counts are atomics, so marks change under the index_lock held for
 * reading; a folio's own marks are serialized by its folio lock (see
 * bs_folio_unlock()).
 *
 * Context: the caller holds the file's index_lock (read for lookups and
 * tag changes, write for changes of the tree).
 */
#include "bs_i.h"

#include <errno.h>
#include <stdlib.h>

#define RADIX_SHIFT 6
#define RADIX_SLOTS (1u << RADIX_SHIFT)
#define RADIX_MAX_HEIGHT 11	/* 66 bits: more than any chunk number */

struct rnode {
	void *slot[RADIX_SLOTS];
	unsigned int count;		/* non-NULL slots */
	_Atomic uint32_t tagged[BS_NR_MARKS];	/* marked folios below, per mark */
};

struct chunk {
	unsigned int nr_folios;
	_Atomic uint32_t tagged[BS_NR_MARKS];	/* marked folios in the chunk */
	_Atomic unsigned long *tag_map[BS_NR_MARKS];	/* a bit per slot, after slot[] */
	struct bs_folio *slot[];	/* one per 4 KiB page */
};

static uint32_t subtree_tagged(void *p, unsigned int level, int mark);

void bs_index_init(struct bs_index *idx, unsigned int chunk_shift)
{
	idx->root = NULL;
	idx->height = 0;
	idx->chunk_shift = chunk_shift;
	idx->nr_folios = 0;
}

static unsigned int chunk_slots(const struct bs_index *idx)
{
	return 1u << (idx->chunk_shift - BS_PAGE_SHIFT);
}

/* Chunk numbers below this fit a tree of @height. */
static bool key_fits(uint64_t key, unsigned int height)
{
	return height >= RADIX_MAX_HEIGHT || (key >> (RADIX_SHIFT * height)) == 0;
}

static unsigned int key_slot(uint64_t key, unsigned int level)
{
	return (key >> (RADIX_SHIFT * (level - 1))) & (RADIX_SLOTS - 1);
}

static void free_subtree(void *p, unsigned int level)
{
	struct rnode *node = p;

	if (!p)
		return;
	if (level > 0) {
		for (unsigned int i = 0; i < RADIX_SLOTS; i++)
			free_subtree(node->slot[i], level - 1);
	}
	free(p);
}

void bs_index_destroy(struct bs_index *idx)
{
	free_subtree(idx->root, idx->height);
	idx->root = NULL;
	idx->height = 0;
}

static struct chunk *chunk_lookup(const struct bs_index *idx, uint64_t key)
{
	void *p = idx->root;

	if (!key_fits(key, idx->height))
		return NULL;
	for (unsigned int level = idx->height; level > 0 && p; level--)
		p = ((struct rnode *)p)->slot[key_slot(key, level)];
	return p;
}

static unsigned int page_slot(const struct bs_index *idx, off_t off)
{
	return (unsigned int)((off & ((1ll << idx->chunk_shift) - 1)) >> BS_PAGE_SHIFT);
}

struct bs_folio *bs_index_lookup(const struct bs_index *idx, off_t off)
{
	struct chunk *c = chunk_lookup(idx, (uint64_t)off >> idx->chunk_shift);

	return c ? c->slot[page_slot(idx, off)] : NULL;
}

/*
 * First chunk numbered >= @from under @p at @level (only chunks with
 * folios marked @mark if @mark >= 0); sets *@key.
 */
static struct chunk *next_chunk(void *p, unsigned int level, uint64_t from,
				uint64_t base, int mark, uint64_t *key)
{
	struct rnode *node = p;
	unsigned int first;

	if (!p || (mark >= 0 && !subtree_tagged(p, level, mark)))
		return NULL;
	if (level == 0) {
		*key = base;
		return p;
	}
	first = from > base ? key_slot(from, level) : 0;
	for (unsigned int i = first; i < RADIX_SLOTS; i++) {
		uint64_t child_base = base + ((uint64_t)i << (RADIX_SHIFT * (level - 1)));
		struct chunk *c = next_chunk(node->slot[i], level - 1,
					     i == first ? from : child_base,
					     child_base, mark, key);
		if (c)
			return c;
	}
	return NULL;
}

struct bs_folio *bs_index_next(const struct bs_index *idx, off_t off)
{
	uint64_t key = (uint64_t)off >> idx->chunk_shift;
	unsigned int slot = page_slot(idx, off);

	while (key_fits(key, idx->height)) {
		uint64_t found;
		struct chunk *c = next_chunk(idx->root, idx->height, key, 0, -1, &found);

		if (!c)
			return NULL;
		if (found != key)
			slot = 0;
		for (unsigned int i = slot; i < chunk_slots(idx); i++) {
			if (c->slot[i])
				return c->slot[i];
		}
		key = found + 1;
		slot = 0;
	}
	return NULL;
}

unsigned int bs_index_fit(const struct bs_index *idx, off_t off, unsigned int order,
			  unsigned int min_order)
{
	struct chunk *c = chunk_lookup(idx, (uint64_t)off >> idx->chunk_shift);

	if (order > idx->chunk_shift)
		order = idx->chunk_shift;
	if (!c)
		return order;
	for (; order > min_order; order--) {
		off_t start = off & ~((1ll << order) - 1);
		unsigned int first = page_slot(idx, start);
		unsigned int end = first + (1u << (order - BS_PAGE_SHIFT));
		unsigned int i = first;

		while (i < end && !c->slot[i])
			i++;
		if (i == end)
			return order;
	}
	return min_order;
}

static int grow(struct bs_index *idx, uint64_t key)
{
	while (!key_fits(key, idx->height)) {
		struct rnode *node;

		if (!idx->root) {
			idx->height++;
			continue;
		}
		node = calloc(1, sizeof(*node));
		if (!node)
			return -ENOMEM;
		node->slot[0] = idx->root;
		node->count = 1;
		for (int m = 0; m < BS_NR_MARKS; m++)
			atomic_init(&node->tagged[m], subtree_tagged(idx->root, idx->height, m));
		idx->root = node;
		idx->height++;
	}
	return 0;
}

static struct chunk *chunk_create(struct bs_index *idx, uint64_t key)
{
	void **pp = &idx->root;

	if (grow(idx, key))
		return NULL;
	for (unsigned int level = idx->height; level > 0; level--) {
		struct rnode *node = *pp;

		if (!node) {
			node = calloc(1, sizeof(*node));
			if (!node)
				return NULL;
			*pp = node;
		}
		pp = &node->slot[key_slot(key, level)];
		if (!*pp)
			node->count++;	/* filled below, or undone by the caller */
	}
	if (!*pp) {
		size_t longs = BS_BITS_TO_LONGS(chunk_slots(idx));
		struct chunk *c = calloc(1, sizeof(struct chunk) +
					 chunk_slots(idx) * sizeof(struct bs_folio *) +
					 BS_NR_MARKS * longs * sizeof(long));

		for (int m = 0; c && m < BS_NR_MARKS; m++)
			c->tag_map[m] = (_Atomic unsigned long *)&c->slot[chunk_slots(idx)] +
					(size_t)m * longs;
		*pp = c;
	}
	return *pp;
}

/* Free empty chunks and nodes on the path to @key. */
static bool prune(void **pp, unsigned int level, uint64_t key)
{
	struct rnode *node = *pp;

	if (!node)
		return true;
	if (level == 0) {
		if (((struct chunk *)node)->nr_folios)
			return false;
	} else {
		if (prune(&node->slot[key_slot(key, level)], level - 1, key))
			node->count--;
		if (node->count)
			return false;
	}
	free(node);
	*pp = NULL;
	return true;
}

int bs_index_insert(struct bs_index *idx, struct bs_folio *folio)
{
	uint64_t key = (uint64_t)folio->start >> idx->chunk_shift;
	struct chunk *c = chunk_create(idx, key);
	unsigned int first = page_slot(idx, folio->start);
	unsigned int end = first + (folio->size >> BS_PAGE_SHIFT);

	if (!c) {
		prune(&idx->root, idx->height, key);
		return -ENOMEM;
	}
	for (unsigned int i = first; i < end; i++)
		c->slot[i] = folio;
	c->nr_folios++;
	idx->nr_folios++;
	return 0;
}

void bs_index_remove(struct bs_index *idx, struct bs_folio *folio)
{
	uint64_t key = (uint64_t)folio->start >> idx->chunk_shift;
	struct chunk *c = chunk_lookup(idx, key);
	unsigned int first = page_slot(idx, folio->start);
	unsigned int end = first + (folio->size >> BS_PAGE_SHIFT);

	if (!c || c->slot[first] != folio)
		return;
	if (folio->tagged) {
		bs_index_tag(idx, folio, false);
		folio->tagged = false;
	}
	if (folio->utagged) {
		bs_index_mark(idx, folio, BS_MARK_UNSYNCED, false);
		folio->utagged = false;
	}
	for (unsigned int i = first; i < end; i++)
		c->slot[i] = NULL;
	c->nr_folios--;
	idx->nr_folios--;
	if (!c->nr_folios)
		prune(&idx->root, idx->height, key);
}

/* ---- marks ---- */

void bs_index_mark(struct bs_index *idx, struct bs_folio *folio, int mark, bool set)
{
	uint64_t key = (uint64_t)folio->start >> idx->chunk_shift;
	unsigned int slot = page_slot(idx, folio->start);
	unsigned long bit = 1ul << (slot % BS_BITS_PER_LONG);
	void *p = idx->root;
	struct chunk *c;

	if (!key_fits(key, idx->height))
		return;
	for (unsigned int level = idx->height; level > 0 && p; level--) {
		struct rnode *node = p;

		if (set)
			atomic_fetch_add(&node->tagged[mark], 1);
		else
			atomic_fetch_sub(&node->tagged[mark], 1);
		p = node->slot[key_slot(key, level)];
	}
	c = p;
	if (!c)
		return;
	if (set) {
		atomic_fetch_add(&c->tagged[mark], 1);
		atomic_fetch_or(&c->tag_map[mark][slot / BS_BITS_PER_LONG], bit);
	} else {
		atomic_fetch_sub(&c->tagged[mark], 1);
		atomic_fetch_and(&c->tag_map[mark][slot / BS_BITS_PER_LONG], ~bit);
	}
}

void bs_index_tag(struct bs_index *idx, struct bs_folio *folio, bool set)
{
	bs_index_mark(idx, folio, BS_MARK_HELD, set);
}

static uint32_t subtree_tagged(void *p, unsigned int level, int mark)
{
	if (!p)
		return 0;
	return level ? atomic_load(&((struct rnode *)p)->tagged[mark])
		     : atomic_load(&((struct chunk *)p)->tagged[mark]);
}

static bool slot_tagged(const struct chunk *c, unsigned int slot, int mark)
{
	return atomic_load(&c->tag_map[mark][slot / BS_BITS_PER_LONG]) &
	       (1ul << (slot % BS_BITS_PER_LONG));
}

struct bs_folio *bs_index_next_marked(const struct bs_index *idx, off_t off, int mark)
{
	uint64_t key = (uint64_t)off >> idx->chunk_shift;
	unsigned int slot = page_slot(idx, off);
	unsigned int nslots = chunk_slots(idx);

	while (key_fits(key, idx->height)) {
		uint64_t found;
		struct chunk *c = next_chunk(idx->root, idx->height, key, 0, mark, &found);
		struct bs_folio *folio;

		if (!c)
			return NULL;
		if (found != key)
			slot = 0;
		/*
		 * The folio covering @off starts at or before its slot: before
		 * it when the slot before holds it too (a folio never crosses a
		 * chunk), and only then is the folio read for its start.  One
		 * starting at the slot has its bit there, which the scan below
		 * reads first: a walk from folio end to folio end touches no
		 * folio it does not return.
		 */
		folio = c->slot[slot];
		if (folio && slot && c->slot[slot - 1] == folio &&
		    slot_tagged(c, page_slot(idx, folio->start), mark))
			return folio;
		for (unsigned int i = slot / BS_BITS_PER_LONG; i < BS_BITS_TO_LONGS(nslots); i++) {
			unsigned long word = atomic_load(&c->tag_map[mark][i]);

			if (i == slot / BS_BITS_PER_LONG)
				word &= ~0ul << (slot % BS_BITS_PER_LONG);
			if (word)
				return c->slot[i * BS_BITS_PER_LONG + (unsigned int)__builtin_ctzl(word)];
		}
		key = found + 1;
		slot = 0;
	}
	return NULL;
}

struct bs_folio *bs_index_next_tagged(const struct bs_index *idx, off_t off)
{
	return bs_index_next_marked(idx, off, BS_MARK_HELD);
}

uint64_t bs_index_nr_marked(const struct bs_index *idx, int mark)
{
	return subtree_tagged(idx->root, idx->height, mark);
}

uint64_t bs_index_nr_tagged(const struct bs_index *idx)
{
	return bs_index_nr_marked(idx, BS_MARK_HELD);
}
