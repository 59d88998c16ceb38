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
 * Context: the caller holds the file's index_lock (read for lookups,
 * write for changes).
 */
#include "bs_i.h"

#include <errno.h>
#include <stdlib.h>

#define RADIX_SHIFT 6
#define RADIX_SLOTS (1u << RADIX_SHIFT)
#define RADIX_MAX_HEIGHT 11	/* 66 bits: more than any chunk number */

struct rnode {
	void *slot[RADIX_SLOTS];
	unsigned int count;	/* non-NULL slots */
};

struct chunk {
	unsigned int nr_folios;
	struct bs_folio *slot[];	/* one per 4 KiB page */
};

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

/* First chunk with number >= @from under @p at @level; sets *@key. */
static struct chunk *next_chunk(void *p, unsigned int level, uint64_t from,
				uint64_t base, uint64_t *key)
{
	struct rnode *node = p;
	unsigned int first;

	if (!p)
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
					     child_base, key);
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
		struct chunk *c = next_chunk(idx->root, idx->height, key, 0, &found);

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
	if (!*pp)
		*pp = calloc(1, sizeof(struct chunk) +
			     chunk_slots(idx) * sizeof(struct bs_folio *));
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
	for (unsigned int i = first; i < end; i++)
		c->slot[i] = NULL;
	c->nr_folios--;
	idx->nr_folios--;
	if (!c->nr_folios)
		prune(&idx->root, idx->height, key);
}
