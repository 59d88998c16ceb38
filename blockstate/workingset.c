// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * workingset.c - shadows of reclaimed folios and the refaults they tell
 * of, as the kernel's workingset detection (mm/workingset.c) keeps them.
 *
 * The cache counts nonresident_age, in pages: every folio reclaim frees
 * and every folio moved to the active list (by a read's second use, or
 * by a refault as below) adds its pages.  A folio reclaim frees leaves a
 * shadow: its file, first page, order and the age when it went.  When a
 * folio is made again for a read (not for a write: the kernel's
 * filemap_add_folio() passes a folio of __GFP_WRITE by) where a shadow
 * lies, the refault distance is the age now less the shadow's: the pages
 * that left or were promoted while it was away.  If that distance is no
 * more than the active list (the kernel's workingset size for file pages
 * with no swap), the folio would have stayed had the active list given
 * way, so it goes straight to the active list (workingset_refault():
 * WORKINGSET_ACTIVATE).  Those activations are what reclaim watches to
 * decide whether to deactivate (cache.c).
 *
 * A worked example: a 512 MiB cache whose active list holds 250 MiB
 * (64000 pages) and which reclaims 25000 pages a second.  A 4 KiB folio
 * read back 1.5 s after it was reclaimed has a distance of about 37500
 * pages: activated.  One read back 30 s later (PostgreSQL's random reads
 * of a table twice the cache, or a scan's second pass) has 750000: it
 * starts inactive, as any new folio.
 *
 * Where the kernel keeps a shadow in the page cache slot the folio left,
 * here shadows live in one table for the whole cache, direct mapped on
 * (file, first page, order) with four slots a bucket; a full bucket
 * gives up its oldest shadow.  It grows with the shadows kept, doubling
 * from WS_MIN_SLOTS when half full, up to slots for twice the cache's
 * pages (at most 2^21): only a shadow whose distance is within the active
 * list, thus within the cache's pages, can activate anything, and each
 * eviction ages the cache by at least a page, so at most the cache's
 * pages of shadows can matter at once.  A cache that never reclaims has
 * no table (its memory is the daemon's and the simulator's, whose
 * replays are bounded).  When the table cannot grow for want of memory
 * the shadows stay in the table there is, and a full bucket gives up its
 * oldest: fewer refaults are seen, none wrongly.  (The kernel bounds its
 * shadow nodes to about an eighth of the cache's pages, each holding up
 * to 64 shadows.)
 *
 * Which shadow a new folio takes: the kernel's slot range of the new
 * folio holds the shadows of what was there, one larger entry covering
 * it or smaller ones inside it, and filemap_add_folio() takes the last
 * one it meets in index order.  Here every shadow covering the folio or
 * inside its range is looked up, and the one the kernel's last slot
 * would hold is taken: the larger one, unless a smaller one inside
 * reaches the last page and is younger (it was stored there after);
 * with no larger one, the smaller one reaching highest.  So a 2 MiB
 * folio read back where a 2 MiB folio was evicted long ago, and a few
 * 4 KiB folios since, takes the old shadow, as the kernel's does, not
 * the youngest of the small ones.  The shadows
 * inside the range go (the folio takes their slots); one covering more
 * than the folio stays for the rest of its range (the kernel splits it).
 * Shadows are not dropped on truncate; a stale one is old (far) or of a
 * file gone (its serial is never reused).
 *
 * Context: evict, refault and activation with the cache's lru_lock held;
 * init and destroy with the cache not in use.
 */
#include "bs_i.h"

#include <errno.h>
#include <stdlib.h>

/* Slots looked at for one shadow: a bucket. */
#define WS_WAYS 4
#define WS_MIN_SLOTS ((size_t)1 << 10)
#define WS_MAX_SLOTS ((size_t)1 << 21)

/* One shadow; age_plus1 == 0: an empty slot. */
struct bs_shadow {
	uint64_t serial;	/* the file's bs_file.serial */
	uint64_t key;		/* first page << 8 | order */
	uint64_t age_plus1;	/* nonresident_age when it went, + 1 */
};

void bs_workingset_init(struct bs_workingset *ws, uint64_t cache_pages)
{
	size_t slots = WS_MIN_SLOTS;

	while (slots < 2 * cache_pages && slots < WS_MAX_SLOTS)
		slots <<= 1;
	ws->table = NULL;
	ws->mask = 0;
	ws->nr_shadows = 0;
	ws->max_slots = slots;
	atomic_init(&ws->nonresident_age, 0);
	atomic_init(&ws->refault_pages, 0);
	atomic_init(&ws->activate_pages, 0);
	ws->activate_snapshot = 0;
}

void bs_workingset_destroy(struct bs_workingset *ws)
{
	free(ws->table);
	ws->table = NULL;
	ws->mask = 0;
	ws->nr_shadows = 0;
}

static uint64_t shadow_key(uint64_t page, unsigned int order)
{
	return page << 8 | order;
}

/* The first slot of the bucket of (@serial, @key) in a table of @mask + 1 slots. */
static size_t bucket_of(size_t mask, uint64_t serial, uint64_t key)
{
	uint64_t h = (serial * 0x9e3779b97f4a7c15ull) ^ (key * 0xc2b2ae3d27d4eb4full);

	h ^= h >> 29;
	return (size_t)(h * 0x94d049bb133111ebull >> 17) & mask & ~(size_t)(WS_WAYS - 1);
}

static struct bs_shadow *find(struct bs_workingset *ws, uint64_t serial, uint64_t key)
{
	struct bs_shadow *b;

	if (!ws->table)
		return NULL;
	b = &ws->table[bucket_of(ws->mask, serial, key)];

	for (unsigned int i = 0; i < WS_WAYS; i++)
		if (b[i].age_plus1 && b[i].serial == serial && b[i].key == key)
			return &b[i];
	return NULL;
}

/*
 * The slot for a new shadow of (@serial, @key) in @table: an empty one of
 * its bucket, else its oldest.
 */
static struct bs_shadow *slot_for(struct bs_shadow *table, size_t mask, uint64_t serial,
				  uint64_t key)
{
	struct bs_shadow *b = &table[bucket_of(mask, serial, key)], *slot = &b[0];

	for (unsigned int i = 0; i < WS_WAYS && slot->age_plus1; i++)
		if (!b[i].age_plus1 || b[i].age_plus1 < slot->age_plus1)
			slot = &b[i];
	return slot;
}

/* Double the table (or make the first), moving the shadows; on ENOMEM keep it. */
static void grow(struct bs_workingset *ws)
{
	size_t slots = ws->table ? 2 * (ws->mask + 1) : WS_MIN_SLOTS, kept = 0;
	struct bs_shadow *table = calloc(slots, sizeof(*table));

	if (!table)
		return;
	for (size_t i = 0; ws->table && i <= ws->mask; i++) {
		const struct bs_shadow *s = &ws->table[i];
		struct bs_shadow *slot;

		if (!s->age_plus1)
			continue;
		slot = slot_for(table, slots - 1, s->serial, s->key);
		kept += !slot->age_plus1;
		if (!slot->age_plus1 || slot->age_plus1 < s->age_plus1)
			*slot = *s;
	}
	free(ws->table);
	ws->table = table;
	ws->mask = slots - 1;
	ws->nr_shadows = kept;
}

void bs_workingset_evict(struct bs_workingset *ws, uint64_t serial, uint64_t page,
			 unsigned int order)
{
	uint64_t key = shadow_key(page, order);
	struct bs_shadow *slot = find(ws, serial, key);

	if (!slot) {
		size_t slots = ws->table ? ws->mask + 1 : 0;

		if (2 * (ws->nr_shadows + 1) > slots && slots < ws->max_slots)
			grow(ws);
		if (ws->table) {
			slot = slot_for(ws->table, ws->mask, serial, key);
			ws->nr_shadows += !slot->age_plus1;
		}
	}
	if (slot) {
		slot->serial = serial;
		slot->key = key;
		slot->age_plus1 = atomic_load(&ws->nonresident_age) + 1;
	}
	atomic_fetch_add(&ws->nonresident_age, (uint64_t)1 << order);
}

/*
 * The shadow of (@serial, @page, @order): its age_plus1 (0: none), and
 * dropped if @drop.
 */
static uint64_t take(struct bs_workingset *ws, uint64_t serial, uint64_t page, unsigned int order,
		     bool drop)
{
	struct bs_shadow *s = find(ws, serial, shadow_key(page, order));
	uint64_t age_plus1;

	if (!s)
		return 0;
	age_plus1 = s->age_plus1;
	if (drop) {
		s->age_plus1 = 0;
		ws->nr_shadows--;
	}
	return age_plus1;
}

bool bs_workingset_refault(struct bs_workingset *ws, uint64_t serial, uint64_t page,
			   unsigned int order, unsigned int min_order, unsigned int max_order,
			   uint64_t active_pages)
{
	uint64_t nr = (uint64_t)1 << order, end_page = page + nr, age, distance;
	uint64_t cover = 0, inside = 0, inside_end = 0, shadow;

	/*
	 * The kernel's slots of the new folio hold, each, the entry stored
	 * there last: one larger entry covering them all (split by the folios
	 * made inside it since, its other slots keeping it), or smaller ones.
	 * filemap_add_folio() takes the last it meets in index order: the
	 * entry of the highest slot that has one.  Here, the larger shadow
	 * covering the folio (the youngest, if several orders have one) ...
	 */
	for (unsigned int o = order; o <= max_order; o++) {
		uint64_t a = take(ws, serial, page & ~(((uint64_t)1 << o) - 1), o, o == order);

		if (a > cover)
			cover = a;
	}
	/* ... and the smaller one inside reaching highest (the younger on a tie). */
	for (unsigned int o = min_order; o < order; o++) {
		for (uint64_t p = page; p < end_page; p += (uint64_t)1 << o) {
			uint64_t a = take(ws, serial, p, o, true), end = p + ((uint64_t)1 << o);

			if (a && (end > inside_end || (end == inside_end && a > inside))) {
				inside = a;
				inside_end = end;
			}
		}
	}
	/*
	 * The last slot holds the larger shadow, unless an inside one
	 * reaches it and was stored after it; with no larger shadow, the
	 * inside one reaching highest is the last entry.
	 */
	if (cover)
		shadow = inside_end == end_page && inside > cover ? inside : cover;
	else
		shadow = inside;
	if (!shadow)
		return false;
	atomic_fetch_add(&ws->refault_pages, nr);
	age = atomic_load(&ws->nonresident_age);
	distance = age - (shadow - 1);
	if (distance > active_pages)
		return false;
	atomic_fetch_add(&ws->nonresident_age, nr);
	atomic_fetch_add(&ws->activate_pages, nr);
	return true;
}

void bs_workingset_activation(struct bs_workingset *ws, unsigned int order)
{
	atomic_fetch_add(&ws->nonresident_age, (uint64_t)1 << order);
}
