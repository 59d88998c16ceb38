/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bs_i.h - blockstate internals, shared by the files of blockstate/ and by
 * its unit tests.  Nothing outside blockstate/ and tests/ includes this.
 *
 * Lock order (outer first):
 *   bs_file.invalidate_lock   shared by read/write, exclusive by truncate,
 *                             punch and zero range
 *   bs_file.index_lock        the folio index of one file; held briefly
 *   bs_cache.lru_lock         the LRU lists of all folios (reclaim only
 *                             trylocks an index_lock while holding it)
 *   bs_folio.sync->lock       bitmaps, counters and bytes of one folio
 *                             (bs_folio_lock(); none with one_thread)
 *   bs_cache.files_lock       the list of files (leaf)
 *   bs_pool.lock              the free folio memory (leaf)
 * No backing I/O is done with an index_lock, lru_lock or folio lock held.
 */
#ifndef FOLIOFS_BS_I_H
#define FOLIOFS_BS_I_H

#include "blockstate.h"
#include "foliofs/list.h"
#include "foliofs_probes.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#define BS_BITS_PER_LONG (sizeof(unsigned long) * CHAR_BIT)
#define BS_BITS_TO_LONGS(n) (((n) + BS_BITS_PER_LONG - 1) / BS_BITS_PER_LONG)
#define BS_MAX_BLOCKS_PER_FOLIO (BS_MAX_FOLIO_SIZE / BS_MIN_BLOCK_SIZE)

/* ---- bit ranges (bitmap.c); every range is [start, end) in bits ---- */

void bs_bits_set(unsigned long *map, uint32_t start, uint32_t end);
void bs_bits_clear(unsigned long *map, uint32_t start, uint32_t end);
uint32_t bs_bits_count(const unsigned long *map, uint32_t start, uint32_t end);
/* Bits set in @a | @b over the range. */
uint32_t bs_bits_count_or(const unsigned long *a, const unsigned long *b,
			  uint32_t start, uint32_t end);
/* First set bit of @map (or of @map | @or when @or is non-NULL) in range; @end if none. */
uint32_t bs_bits_next_set(const unsigned long *map, const unsigned long *or,
			  uint32_t start, uint32_t end);
/* First clear bit in range; @end if none. */
uint32_t bs_bits_next_clear(const unsigned long *map, uint32_t start, uint32_t end);
bool bs_bits_all_set(const unsigned long *map, uint32_t start, uint32_t end);
/* @dst |= @src over the range. */
void bs_bits_or_range(unsigned long *dst, const unsigned long *src, uint32_t start,
		      uint32_t end);

/* ---- folio memory (pool.c) ---- */

/*
 * Memory of freed folios, kept touched for the next folios of its size.
 * Bound: cache_bytes + bytes <= cfg.cache_size (see pool.c).
 */
struct bs_pool {
	pthread_mutex_t lock;		/* leaf: protects free and nr_free */
	/* LIFO lists of free chunks by size class ([0] 4 KiB .. [9] 2 MiB);
	 * a chunk's first word links to the next. */
	void *free[BS_NR_FOLIO_ORDERS];
	uint64_t nr_free[BS_NR_FOLIO_ORDERS];
	/* Counters: atomics, exact, no lock (bytes changes under lock). */
	_Atomic uint64_t bytes;		/* memory in the lists */
	_Atomic uint64_t hits;		/* folios made with pooled memory */
	_Atomic uint64_t misses;	/* folios made with fresh memory */
	/* cfg.no_data: the one BS_MAX_FOLIO_SIZE area every folio's data
	 * is; made at the first take under lock, freed at destroy. */
	char *scratch;
};

void bs_pool_init(struct bs_pool *pool);
/* Give every pooled chunk back.  Context: no user of the pool left. */
void bs_pool_destroy(struct bs_pool *pool);
/*
 * Memory for a folio of @size bytes, of which the access making it
 * touches @touch: pooled if there is some of that size, else fresh (huge
 * pages or not by @touch, see pool.c); NULL when the system has none.
 * Not zeroed.  Context: any thread, any blockstate lock held.
 */
char *bs_pool_take(struct bs_cache *cache, uint32_t size, uint32_t touch);
/*
 * The memory of a freed folio (cache_bytes already without it): pooled
 * while the bound allows, else given back.  Context: as bs_pool_take().
 */
void bs_pool_put(struct bs_cache *cache, char *mem, uint32_t size);
/* Whether a chunk of @size bytes is pooled now. */
bool bs_pool_has(struct bs_cache *cache, uint32_t size);
/*
 * Give back up to @bytes (rounded up to chunks) of pooled memory, chunks
 * of other sizes than @want_size first, and never the last chunk of
 * @want_size.  Returns the bytes given back.  Context: no pool lock held.
 */
uint64_t bs_pool_trim(struct bs_cache *cache, uint64_t bytes, uint32_t want_size);

/* ---- workingset detection (workingset.c) ---- */

/*
 * Shadows of reclaimed folios and the cache's nonresident age, as the
 * kernel's per-lruvec nonresident_age and WORKINGSET_* counters.  The
 * table is protected by the cache's lru_lock; the counters change under
 * it and are read without it (stats, the reclaim decision).
 */
struct bs_workingset {
	struct bs_shadow *table;		/* lru_lock: NULL until the first
						 * eviction, then grown (workingset.c) */
	size_t mask;				/* lru_lock: slots - 1, 0 without a table */
	size_t nr_shadows;			/* lru_lock: slots in use */
	size_t max_slots;			/* immutable: the table's bound */
	_Atomic uint64_t nonresident_age;	/* pages evicted or activated */
	_Atomic uint64_t refault_pages;		/* folios made where a shadow lay */
	_Atomic uint64_t activate_pages;	/* of which activated (WORKINGSET_ACTIVATE) */
	uint64_t activate_snapshot;		/* lru_lock: activate_pages at the
						 * last reclaim's end (the kernel's
						 * lruvec->refaults[], snapshot_refaults()) */
};

/* No table yet: it is made at the first eviction. */
void bs_workingset_init(struct bs_workingset *ws, uint64_t cache_pages);
void bs_workingset_destroy(struct bs_workingset *ws);
/* A folio of @order at @page of file @serial was reclaimed: its shadow. */
void bs_workingset_evict(struct bs_workingset *ws, uint64_t serial, uint64_t page,
			 unsigned int order);
/*
 * A folio of @order at @page was made for a read: take the shadows in its
 * way; true when it refaults within @active_pages of age and is to go
 * on the active list (counted as activated, aging the cache).
 */
bool bs_workingset_refault(struct bs_workingset *ws, uint64_t serial, uint64_t page,
			   unsigned int order, unsigned int min_order, unsigned int max_order,
			   uint64_t active_pages);
/* A folio of @order was moved to the active list by use: the cache ages. */
void bs_workingset_activation(struct bs_workingset *ws, unsigned int order);

/* ---- folios (folio.c) ---- */

/*
 * A folio's lock and condition, when its cache has threads.  The
 * simulator's cache (one_thread) has none: it calls the engine from one
 * thread, on a virtual clock, and a wait for a read or a writeback in
 * flight could only wait forever there, since the I/O ends in an event
 * of that same thread; so its folios go without these 88 bytes
 * (bs_folio_lock() does nothing, a wait aborts).
 */
struct bs_folio_sync {
	pthread_mutex_t lock;
	pthread_cond_t wb_done;		/* broadcast when wb_runs or rd_runs drops to 0 */
};

struct bs_folio {
	/* Immutable while the folio exists. */
	struct bs_file *file;
	off_t start;			/* file offset, a multiple of size */
	uint32_t size;			/* bytes, power of two */
	uint32_t nr_blocks;
	char *data;			/* size bytes, page aligned */

	/*
	 * References: one for the index while the folio is in it, one per
	 * user.  A new user reference is taken only under the file's
	 * index_lock, so with that lock held for writing, refs == 1 means
	 * nobody but the index has the folio.  Freed at zero.
	 */
	_Atomic uint32_t refs;
	/*
	 * The kernel's PG_referenced and PG_active (see cache.c's reclaim):
	 * referenced is set by a read's first use and cleared when the folio
	 * is activated or reclaim looks at it; active says which list the
	 * folio is on, and changes only under the cache's lru_lock (read
	 * without it as a hint).
	 */
	atomic_bool referenced;
	atomic_bool active;
	/*
	 * The kernel's PG_reclaim: reclaim met the folio at the inactive
	 * tail with blocks dirty or under writeback and moved it to the
	 * active list; when its writeback ends, if it is not dirty again, it
	 * goes to the inactive tail to be reclaimed next (cache.c).  Set
	 * under the lru_lock, cleared by a write that dirties the folio and
	 * at the end of its writeback (folio lock held).
	 */
	atomic_bool reclaim;
	struct list_node lru;		/* cache lru_lock: on the list of @active */

	/*
	 * The folio lock (bs_folio_lock()), which protects what follows and
	 * the bytes, and the condition its reads' and writebacks' ends are
	 * broadcast on: after the bitmaps in the folio's own allocation, or
	 * NULL in a cache of one thread (bs_config.one_thread, the
	 * simulator), where no other thread can see the folio between two
	 * calls and nothing ever waits (see struct bs_folio_sync).
	 */
	struct bs_folio_sync *sync;
	/*
	 * Backing reads in flight into the folio's own memory (file.c's
	 * fill_blocks, readahead.c), each into blocks that were not
	 * uptodate when it began; they become uptodate when it ends.  While
	 * rd_runs != 0 nobody else reads or writes the bytes of blocks that
	 * are not uptodate, or plans another read into the folio: readers
	 * and writers wait (bs_folio_wait_reads), readahead passes the folio
	 * by, truncate and punch wait (bs_folio_wait_io).  Bytes of uptodate
	 * blocks (writeback's runs) are not touched by a read.
	 */
	uint32_t rd_runs;
	/*
	 * PG_readahead: set on the folio holding a window's mark page when
	 * readahead makes it; a read that meets it takes it (clears it) and
	 * reads the next window (readahead.c).
	 */
	bool ra_mark;
	bool detached;			/* out of the index: truncated, punched or reclaimed */
	bool rotate;			/* its writeback ended with reclaim set and
					 * nothing dirty: to the inactive tail
					 * once the folio lock is dropped
					 * (bs_wb_complete) */
	bool wb_ok;			/* a run of the writeback in flight succeeded
					 * (counted in written_folio_bytes when the
					 * last run ends) */
	uint32_t held_blocks;		/* blocks dirty or under writeback */
	uint32_t held_pages;		/* 4 KiB pages holding such a block */
	uint32_t wb_blocks;		/* blocks under writeback */
	uint32_t wb_runs;		/* runs in flight: with whole folios a run
					 * also holds clean blocks, which have no
					 * writeback bit but must be waited for */
	uint64_t price;			/* bytes of dirty budget charged for this folio */
	/*
	 * The index tag (bs_index_tag) follows held_blocks != 0, a step
	 * behind: a change of held state sets tag_stale under the folio
	 * lock, and whoever unlocks the folio brings the tag up to date
	 * (bs_folio_unlock) before returning to its caller.  tagged changes
	 * under the folio lock with the index_lock held.
	 */
	bool tagged;
	bool tag_stale;			/* also for utagged */
	bool utagged;			/* the unsynced mark, following
					 * unsynced_blocks != 0 the same way
					 * (set at once by bs_wb_complete) */
	/*
	 * Blocks written to the backing file since its last successful
	 * sync (see bs_sync_begin()): they are clean but not yet durable,
	 * so the folio is pinned until a sync succeeds, and a failed sync
	 * makes them dirty again.  sync_gen is the file's sync_gen when a
	 * block was last marked.
	 */
	uint32_t unsynced_blocks;
	uint64_t sync_gen;
	uint64_t redirty_price;		/* price of the blocks both dirty and
					 * under writeback (see update_redirty) */
	/*
	 * The dirty part alone (blocks dirty and not under writeback, the
	 * kernel's WB_RECLAIMABLE): its blocks, their 4 KiB pages, and the
	 * policy's price of a folio holding just those, priced by the policy
	 * in force when dirty_gen was the cache's account_switching (see
	 * reprice_dirty() in folio.c).  Background writeback compares the sum
	 * of these prices, not the charge, with its threshold.
	 */
	uint32_t dirty_blocks;
	uint32_t dirty_pages;
	uint64_t dirty_price;
	uint64_t dirty_gen;
	/*
	 * Four bitmaps of nr_blocks bits each, in bits[]: uptodate, dirty,
	 * writeback, unsynced.  Dirty, writeback or unsynced implies
	 * uptodate.  A block may be both unsynced and dirty (written again
	 * after its writeback).
	 */
	unsigned long *uptodate;
	unsigned long *dirty;
	unsigned long *writeback;
	unsigned long *unsynced;
	unsigned long bits[];
};

/* A folio of which the access making it touches @touch bytes (see bs_pool_take()). */
struct bs_folio *bs_folio_alloc_touch(struct bs_file *file, off_t start, uint32_t size,
				      uint32_t touch);
/* A folio whose memory will all be used. */
struct bs_folio *bs_folio_alloc(struct bs_file *file, off_t start, uint32_t size);
void bs_folio_get(struct bs_folio *folio);
void bs_folio_put(struct bs_folio *folio);

/* Take the folio lock; nothing in a cache of one thread (see struct bs_folio_sync). */
static inline void bs_folio_lock(struct bs_folio *folio)
{
	if (folio->sync)
		pthread_mutex_lock(&folio->sync->lock);
}

/*
 * Drop the folio lock and nothing more: unlike bs_folio_unlock(), the
 * index tag is not brought up to date.
 */
static inline void bs_folio_unlock_raw(struct bs_folio *folio)
{
	if (folio->sync)
		pthread_mutex_unlock(&folio->sync->lock);
}

/* Block range [first, end) of the bytes [poff, poff + plen) of a folio. */
uint32_t bs_folio_first_blk(const struct bs_folio *folio, uint32_t poff);
uint32_t bs_folio_end_blk(const struct bs_folio *folio, uint32_t poff, uint32_t plen);

/*
 * Change held state of blocks [first_blk, end_blk) and reprice.
 * Context: folio lock held.
 */
void bs_folio_set_dirty(struct bs_folio *folio, uint32_t first_blk, uint32_t end_blk);
void bs_folio_clear_dirty(struct bs_folio *folio, uint32_t first_blk, uint32_t end_blk);
/* The dirty blocks of [first_blk, end_blk) go to writeback. */
void bs_folio_start_writeback(struct bs_folio *folio, uint32_t first_blk, uint32_t end_blk);
/*
 * The writeback blocks of [first_blk, end_blk) finished; on failure they
 * are dirty again.  Only one writeback of a file runs at a time, so every
 * writeback bit in the range is this run's.
 */
void bs_folio_end_writeback(struct bs_folio *folio, uint32_t first_blk,
			    uint32_t end_blk, bool failed);
/*
 * Blocks [first_blk, end_blk) (uptodate) were written to the backing
 * file: unsynced until a sync that starts later succeeds.  The caller
 * has marked the folio in the index (utagged) before: see bs_wb_complete().
 * Context: folio lock held.
 */
void bs_folio_set_unsynced(struct bs_folio *folio, uint32_t first_blk, uint32_t end_blk);
void bs_folio_clear_unsynced(struct bs_folio *folio, uint32_t first_blk, uint32_t end_blk);
/* A sync failed: every unsynced block becomes dirty again.  Folio lock held. */
void bs_folio_redirty_unsynced(struct bs_folio *folio);
/* Holds blocks that keep it from reclaim: held or unsynced. */
static inline bool bs_folio_pinned(const struct bs_folio *folio)
{
	return folio->held_blocks || folio->unsynced_blocks;
}
/*
 * The mm_filemap_delete_from_page_cache probe (file.c): @folio has just
 * left its file's index (reclaim, truncate, a file dropped), as the add
 * probe in file.c's insert() says it entered.
 */
void bs_folio_trace_delete(const struct bs_folio *folio);
/*
 * Bring the folio's index marks up to date with its state.
 * Context: index_lock held (read is enough) and the folio lock held.
 */
void bs_folio_sync_tags(struct bs_folio *folio);
/* Wait until no writeback run and no read of the folio is in flight.  Folio lock held. */
void bs_folio_wait_io(struct bs_folio *folio);
/* Wait until no backing read into the folio is in flight.  Folio lock held. */
void bs_folio_wait_reads(struct bs_folio *folio);
/* A read into the folio ends (rd_runs--, waking waiters at 0).  Folio lock held. */
void bs_folio_end_read(struct bs_folio *folio);
/*
 * Unlock the folio, then, if its held state changed, bring its index tag
 * up to date.  Every path that can change held state unlocks with this.
 * Context: folio lock held, no index_lock held, a reference held.
 */
void bs_folio_unlock(struct bs_folio *folio);

/*
 * Price the folio again, whole and its dirty part, by the policy in force
 * (after a switch of policy: account_switch.c), charging the differences;
 * dirtied and written counts do not move.  Context: folio lock held.
 */
void bs_folio_reprice(struct bs_folio *folio);

/* Recount held blocks/pages from the bitmaps (for checks). */
void bs_folio_count_held(const struct bs_folio *folio, uint32_t *blocks, uint32_t *pages);

/* ---- per-file index (index.c) ---- */

/*
 * Folios of one file, by offset.  The file is cut into chunks of the
 * largest folio size; a radix tree (64-way) maps chunk numbers to chunks,
 * and a chunk has one slot per 4 KiB page pointing at the folio covering
 * it.  Lookup and ordered walks are O(log64 chunks).
 */
struct bs_index {
	void *root;
	unsigned int height;		/* levels of 64-way nodes above chunks */
	unsigned int chunk_shift;	/* log2 of the largest folio */
	uint64_t nr_folios;
};

void bs_index_init(struct bs_index *idx, unsigned int chunk_shift);
void bs_index_destroy(struct bs_index *idx);
/* The folio covering @off, or NULL. */
struct bs_folio *bs_index_lookup(const struct bs_index *idx, off_t off);
/* The first folio ending after @off (covering it or after it), or NULL. */
struct bs_folio *bs_index_next(const struct bs_index *idx, off_t off);
/*
 * The largest order <= @order at which a folio containing @off fits
 * between existing folios, but at least @min_order (the slot of @off must
 * be free; with every folio at least 2^min_order bytes, so is its
 * 2^min_order-aligned span).
 */
unsigned int bs_index_fit(const struct bs_index *idx, off_t off, unsigned int order,
			  unsigned int min_order);
int bs_index_insert(struct bs_index *idx, struct bs_folio *folio);
/* Take @folio out; its tag goes with it.  index_lock held for writing. */
void bs_index_remove(struct bs_index *idx, struct bs_folio *folio);
/* Marks (index.c): the held mark is "the tag". */
enum { BS_MARK_HELD, BS_MARK_UNSYNCED, BS_NR_MARKS };

/*
 * Mark or unmark @folio, which is in the index: @mark BS_MARK_HELD for
 * folios holding dirty or writeback blocks, BS_MARK_UNSYNCED for folios
 * holding unsynced blocks.  Context: index_lock held (read is enough) and
 * the folio lock held, or index_lock held for writing.
 */
void bs_index_mark(struct bs_index *idx, struct bs_folio *folio, int mark, bool set);
/* The first folio marked @mark ending after @off, or NULL.  O(marked folios skipped). */
struct bs_folio *bs_index_next_marked(const struct bs_index *idx, off_t off, int mark);
uint64_t bs_index_nr_marked(const struct bs_index *idx, int mark);
/* The same for BS_MARK_HELD. */
void bs_index_tag(struct bs_index *idx, struct bs_folio *folio, bool set);
struct bs_folio *bs_index_next_tagged(const struct bs_index *idx, off_t off);
uint64_t bs_index_nr_tagged(const struct bs_index *idx);

/* ---- readahead decisions (ra_decide.c) ---- */

/*
 * The decisions of Linux's mm/readahead.c, as pure functions of an open
 * file's state (a copy: see struct bs_ra) and of what the cache holds,
 * which they see only through this view.  All in 4 KiB pages.
 */
struct bs_ra_view {
	/*
	 * The folio holding page @index: false if none; else its first page
	 * in *@head, its page order in *@order, and in *@held whether page
	 * @index is held (uptodate, or being read).  page_cache_next_miss()
	 * and page_cache_prev_miss() (bs_ra_next_miss(), bs_ra_prev_miss())
	 * walk the page cache's xarray through it: a folio's order says
	 * where its entry is (a leaf slot and siblings, or a slot of the
	 * level above), and a page not held counts as a miss.
	 */
	bool (*folio_at)(void *ctx, uint64_t index, uint64_t *head, unsigned int *order,
			 bool *held);
	void *ctx;
	/* Pages [0, end_page) hold the file (its size rounded up to a page). */
	uint64_t end_page;
};

/*
 * page_cache_next_miss() of 6.18 through @view: where its walk of pages
 * @index, @index + 1, ... (at most @max of them) meets no folio, as
 * xas_next() counts it; @index + @max if it meets none.  Mostly the
 * first page not held, but a walk that starts inside a folio of fewer
 * than 64 pages, past its first page, counts from that first page: the
 * miss it reports is as far past the one it met (see ra_decide.c).
 */
uint64_t bs_ra_next_miss(const struct bs_ra_view *view, uint64_t index, uint64_t max);
/*
 * page_cache_prev_miss() of 6.18 through @view: the same walk down from
 * @index (xas_prev()); if every page it looks at is held, the index of
 * the last one (@index - @max + 1), or UINT64_MAX when the walk would
 * go on below page 0.
 */
uint64_t bs_ra_prev_miss(const struct bs_ra_view *view, uint64_t index, uint64_t max);

/* The limits of the cache the decisions work in. */
struct bs_ra_limits {
	uint64_t max_pages;		/* largest window (ra_pages), > 0 */
	unsigned int min_order;		/* smallest folio, page order */
	unsigned int max_order;		/* largest folio, page order */
};

/* What a decision asks to be read. */
enum bs_ra_kind {
	BS_RA_NONE,
	/*
	 * page_cache_ra_order(): folios of @order (smaller where alignment
	 * or EOF ask) over [start, start + nr); where a folio is in the way
	 * or a folio cannot be had, the rest goes as bs_ra_rest() says.
	 */
	BS_RA_ORDER,
	/*
	 * do_page_cache_ra(): folios of min_order for each missing page of
	 * [start, start + nr), nr already cut at EOF.
	 */
	BS_RA_UNBOUNDED,
	/*
	 * A random read: do_page_cache_ra() of the read's own @nr pages
	 * from @start, no mark.  readahead.c leaves them to the read path,
	 * which makes them (access BS_SIZE_READ) and reads only the blocks
	 * the read needs.
	 */
	BS_RA_RANDOM,
};

struct bs_ra_read {
	enum bs_ra_kind kind;
	uint64_t start;
	uint64_t nr;
	/*
	 * The page whose new folio gets the readahead mark (start + size -
	 * async_size; BS_RA_UNBOUNDED: start + nr - lookahead, from the nr
	 * cut at EOF, rounded up to the smallest folio); UINT64_MAX: none.
	 */
	uint64_t mark;
	/* The window's async_size, which bs_ra_rest() places the mark by. */
	uint64_t lookahead;
	unsigned int order;		/* BS_RA_ORDER: page order asked for */
};

/* The first window for a read of @req pages (get_init_ra_size()). */
uint64_t bs_ra_init_size(uint64_t req, uint64_t max);
/* The window after one of @cur pages (get_next_ra_size()). */
uint64_t bs_ra_next_size(uint64_t cur, uint64_t max);

/*
 * page_cache_sync_ra(): a read of @req pages (from @index to the end of
 * the request) found no folio at page @index.  Updates @ra, except for a
 * random read (BS_RA_RANDOM), which leaves it as it was.
 */
struct bs_ra_read bs_ra_sync(unsigned int model, struct bs_ra_state *ra, uint64_t index,
			     uint64_t req, const struct bs_ra_limits *lim,
			     const struct bs_ra_view *view);
/*
 * page_cache_async_ra(): a read with @req pages left (from the folio's
 * first page to the end of the request) met the marked folio of
 * 2^@folio_order pages at page @folio_index, and took its mark.  Updates
 * @ra unless it returns BS_RA_NONE.
 */
struct bs_ra_read bs_ra_async(unsigned int model, struct bs_ra_state *ra,
			      uint64_t folio_index, unsigned int folio_order, uint64_t req,
			      const struct bs_ra_limits *lim, const struct bs_ra_view *view);
/*
 * The order of the folio page_cache_ra_order() makes at page @index when
 * it asks for @order: smaller where @index is not aligned to it, and no
 * folio reaching past page @last (EOF or the window's end) unless of
 * @min_order.
 */
unsigned int bs_ra_folio_order(uint64_t index, unsigned int order, uint64_t last,
			       unsigned int min_order);
/*
 * What page_cache_ra_order() reads when its loop over @rd (BS_RA_ORDER)
 * stopped at page @index, a folio being in the way (-EEXIST) or not to
 * be had (-ENOMEM): do_page_cache_ra() of the window's pages from @index
 * on, in the smallest folios (BS_RA_UNBOUNDED), its mark placed from
 * that count cut at @end_page (EOF); BS_RA_NONE when nothing is left.
 */
struct bs_ra_read bs_ra_rest(const struct bs_ra_read *rd, uint64_t index,
			     const struct bs_ra_limits *lim, uint64_t end_page);

/* ---- readahead (readahead.c) ---- */

/*
 * Before a read of [off, off + len) through the open whose state is @ra
 * is served (off within the file; len as asked, EOF not cut off): start
 * the windows it calls for, and return where the open's previous read
 * ended (-1: none, or @ra NULL), read with the state it started from;
 * *@first is the folio holding @off when the read is within it (it met
 * it last), referenced for the read to use and put, or NULL.  After it:
 * remember where it ended.
 * Context: invalidate_lock shared, no other blockstate lock; may read the
 * backing store and reclaim.
 */
off_t bs_ra_before_read(struct bs_file *file, struct bs_ra *ra, off_t off, size_t len,
			struct bs_folio **first);
void bs_ra_after_read(struct bs_ra *ra, off_t end);
/*
 * For readahead (file.c): a new folio covering @off, sized by the policy
 * for access BS_SIZE_READAHEAD with @len (a power of two, the folio
 * asked for, @off aligned to it), returned referenced; -EEXIST when a
 * folio holds any page of that span already, -ENOMEM when it cannot be
 * had (the ops' folio_alloc_fails() among them).
 */
int bs_file_ra_folio(struct bs_file *file, off_t off, size_t len, struct bs_folio **out);
/* The folio covering @off, referenced, or NULL (file.c). */
struct bs_folio *bs_file_lookup(struct bs_file *file, off_t off);

/* ---- files and the cache (file.c, cache.c) ---- */

struct bs_file {
	struct bs_cache *cache;			/* immutable */
	uint64_t serial;			/* immutable: the cache's count of files
						 * made when this one was, never reused
						 * (names its shadows, workingset.c) */
	const struct bs_backing_ops *ops;	/* immutable */
	void *ctx;				/* immutable */
	uint64_t ino;				/* for the probes only: the backing
						 * st_ino (bs_file_set_ino), or 0 */

	pthread_rwlock_t invalidate_lock;	/* see the lock order above */
	pthread_rwlock_t index_lock;		/* protects index and size_state */
	struct bs_index index;
	struct bs_size_state size_state;
	bool fixed_size;			/* a block device: set once, before use */
	atomic_bool no_collect;			/* a punch or a truncate down is in
						 * flight: collection waits for it
						 * (read under the folio lock, like
						 * size; changed under collect_lock) */
	pthread_mutex_t collect_lock;		/* leaf: no_collect changes, collect_resumed */
	pthread_cond_t collect_resumed;		/* no_collect went false */
	_Atomic off_t size;			/* grows under invalidate_lock shared
						 * (compare and swap), set under it
						 * exclusive */
	_Atomic uint64_t held_folios;		/* folios with held blocks (exact) */
	_Atomic uint64_t unsynced_folios;	/* folios with unsynced blocks (exact) */
	_Atomic uint64_t unsynced_bytes;	/* their memory */
	_Atomic uint64_t sync_gen;		/* bumped by every bs_sync_begin() */
	pthread_mutex_t ra_lock;		/* leaf: protects nr_aio */
	uint32_t nr_aio;			/* readahead reads in flight (started
						 * with ops->read_start, not yet done) */
	pthread_cond_t aio_idle;		/* nr_aio dropped to 0 (bs_file_destroy) */
	struct list_node files_link;		/* cache files_lock: on cache->files */
};

/*
 * A policy with its parameter values, as a cache uses it: immutable once
 * published, so that a price never mixes one policy with another's
 * values.  A change publishes a new one; the old ones stay on the
 * cache's list until the cache is destroyed (a writer may still be
 * pricing with one), a few dozen bytes per change.
 */
struct bs_policy_inst {
	struct bs_policy_inst *next;		/* the cache's list (files_lock) */
	const struct bs_account_policy *account;	/* or NULL: a sizing instance */
	const struct bs_size_policy *size;
	int64_t params[BS_PARAMS_MAX];
};

struct bs_cache {
	struct bs_config cfg;			/* immutable but cfg.account (see account) */
	/*
	 * The accounting policy in force and its values: read at every
	 * price, switched at run time by bs_cache_set_account_params()
	 * (account_switch.c), which then reprices every folio under its lock.
	 */
	const struct bs_policy_inst *_Atomic account;
	/* The sizing policy (cfg.size) and its values, read at every new folio. */
	const struct bs_policy_inst *_Atomic size;
	struct bs_policy_inst *insts;		/* every instance made (files_lock) */
	_Atomic uint64_t account_switching;	/* odd while a switch reprices */
	_Atomic unsigned int ra_model;		/* enum bs_ra_model, switched at run time */
	const struct bs_cache_ops *ops;
	void *ctx;
	unsigned int blk_shift;
	unsigned int min_order;		/* smallest folio: a page or a block */
	unsigned int max_order;

	/*
	 * The kernel's two file LRU lists, through bs_folio.lru (list.h):
	 * newest first, so the oldest is the last.  New
	 * folios go on inactive; a second read use moves one to active;
	 * reclaim takes inactive's oldest and refills inactive from
	 * active's oldest to keep it no smaller than active / ratio.
	 * Protected by lru_lock; the byte counts change under it too and are
	 * read without it (stats).
	 */
	pthread_mutex_t lru_lock;
	struct list_node inactive;
	struct list_node active;
	_Atomic uint64_t inactive_bytes;
	_Atomic uint64_t active_bytes;
	struct bs_workingset ws;		/* lru_lock (workingset.c) */
	/*
	 * The counts as reclaim's decisions see them when cfg.lru_stats_ms
	 * is set (cache.c, lru_stats_flush()): inactive_bytes, active_bytes
	 * and ws.activate_pages as the last flush copied them, all 0 before
	 * the first.  lru_lock; the two sizes are also read without it
	 * (stats).
	 */
	struct bs_lru_stats {
		int64_t period_ns;		/* start of the last flush's period */
		uint64_t flushes;		/* flushes made */
		_Atomic uint64_t inactive_bytes;
		_Atomic uint64_t active_bytes;
		uint64_t activate_pages;
	} lru_stats;
	_Atomic uint64_t deactivated_folios;	/* active -> inactive, monotonic */
	_Atomic uint64_t activate_pages;	/* pgactivate: pages to the active list */
	_Atomic uint64_t deactivate_pages;	/* pgdeactivate: pages off it */
	uint64_t nr_files_made;			/* files_lock: the next serial */
	pthread_mutex_t files_lock;		/* protects the file list */
	struct list_node files;			/* bs_file.files_link, newest first */

	/* Counters: atomics, exact, no lock. */
	_Atomic int64_t charged_bytes;
	_Atomic uint64_t dirtied_bytes;
	_Atomic uint64_t written_bytes;		/* discharged by writeback (policy) */
	_Atomic int64_t dirty_charged_bytes;	/* sum of the folios' dirty_price */
	_Atomic uint64_t wb_folio_bytes;	/* memory of folios with a run in
						 * flight (the kernel's NR_WRITEBACK) */
	_Atomic uint64_t written_folio_bytes;	/* memory of folios whose writeback
						 * ended with data written, monotonic
						 * (the kernel's WB_WRITTEN) */
	_Atomic uint64_t wb_budget_pages;	/* see struct bs_wb_budget */
	_Atomic uint64_t wb_dirty_pages;
	_Atomic uint64_t held_bytes;
	_Atomic uint64_t wb_bytes;
	_Atomic uint64_t pinned_bytes;		/* folios held or unsynced */
	_Atomic uint64_t unsynced_bytes;	/* folios holding unsynced blocks */
	_Atomic uint64_t app_write_bytes;
	_Atomic uint64_t app_read_bytes;
	_Atomic uint64_t backing_read_bytes;
	_Atomic uint64_t backing_read_ios;
	_Atomic uint64_t cache_bytes;		/* memory of folios (not the pool's) */
	_Atomic uint64_t nr_folios;
	_Atomic uint64_t reclaimed_folios;
	_Atomic uint64_t activated_folios;
	_Atomic uint64_t rotated_folios;	/* to the inactive tail after writeback */
	_Atomic uint64_t reclaim_stalls;
	_Atomic uint64_t unpinned_bytes;	/* memory of folios that stopped being
						 * pinned, monotonic: reclaim's progress */
	/*
	 * full: the cache is full of pinned data that writeback could not
	 * free.  A writer that finds no room waits up to full_wait_ms for
	 * writeback to free memory, then sets it and fails; while it is set,
	 * writers fail after their writeback rounds, and any progress (or
	 * room) clears it.
	 */
	atomic_bool full;
	_Atomic uint64_t full_events;		/* times it became full */
	_Atomic uint64_t ra_bytes;		/* read by readahead (stats ra_pages) */
	_Atomic uint64_t ra_ios;
	_Atomic uint64_t ra_async_ios;		/* of which started with read_start */
	/* Folios now by order - BS_PAGE_SHIFT (folio.c: made and freed). */
	_Atomic uint64_t folios_order[BS_NR_FOLIO_ORDERS];
	/* Folios ever made, by order (folio.c); monotonic. */
	_Atomic uint64_t folios_made_order[BS_NR_FOLIO_ORDERS];
	/*
	 * By order, as the kernel's page cache is traced (adds and deletes
	 * by order, PG_active): folios reclaim dropped and moves to the
	 * active list (monotonic), and folios on the active list now
	 * (cache.c, under lru_lock).
	 */
	_Atomic uint64_t reclaimed_order[BS_NR_FOLIO_ORDERS];
	_Atomic uint64_t activated_order[BS_NR_FOLIO_ORDERS];
	_Atomic uint64_t active_order[BS_NR_FOLIO_ORDERS];
	uint32_t full_wait_ms;			/* set before use (tests shorten it) */
	struct bs_pool pool;			/* free folio memory */
};

/*
 * Whether a switch of accounting policy may have left folios priced by
 * the old policy (account_switch.c): debug checks of one folio's price
 * hold only when not.
 */
/* The cache's first policy instances, from its config (account_switch.c): 0 or -ENOMEM. */
int bs_cache_insts_init(struct bs_cache *cache);
void bs_cache_insts_free(struct bs_cache *cache);

static inline bool bs_account_switching(struct bs_cache *cache)
{
	return atomic_load(&cache->account_switching) & 1;
}

/*
 * Make room for a folio of @bytes (a folio size): pooled memory of that
 * size needs none; else give back pooled memory of other sizes, reclaim,
 * or ask for writeback, until cache_bytes + pool bytes + @bytes fits.
 * With @may_fail (a write), when pinned data fills the cache and
 * writeback frees nothing for a while, -ENOSPC; else (a read, whose
 * clean folio is reclaimable as soon as it is done) the cache goes over
 * its budget after a few writeback rounds.  0 when there is room.
 */
int bs_cache_make_room(struct bs_cache *cache, size_t bytes, bool may_fail);
/*
 * A new folio on the lists: inactive, or active when it was made for a
 * read (@read) and refaults recently (workingset.c).
 */
void bs_cache_lru_add(struct bs_cache *cache, struct bs_folio *folio, bool read);
void bs_cache_lru_del(struct bs_cache *cache, struct bs_folio *folio);
/*
 * The kernel's inactive_is_low() for file pages (mm/vmscan.c): the
 * inactive list is low below active / ratio, ratio int_sqrt(10 x GiB on
 * both lists), or 1 under 1 GiB.  Pure.
 */
bool bs_lru_inactive_low(uint64_t inactive_bytes, uint64_t active_bytes);
/*
 * prepare_scan_control()'s may_deactivate for file pages: reclaim may
 * move active folios to the inactive list when refaults were activated
 * since the last reclaim ended (@activate_pages, the count now, differs
 * from @activate_snapshot, the count then) or the inactive list is low.
 * Pure.
 */
bool bs_lru_may_deactivate(uint64_t activate_pages, uint64_t activate_snapshot,
			   uint64_t inactive_bytes, uint64_t active_bytes);
/*
 * A read's use of @folio (folio_mark_accessed()): the first sets its
 * referenced bit, the next while it is inactive moves it to the active
 * list.  Context: no folio lock held (takes the lru_lock).
 */
void bs_folio_mark_accessed(struct bs_folio *folio);
/*
 * Take @folio out of its file's index if nobody but the index holds it
 * and it is clean: no block dirty, under writeback or unsynced, no read
 * in flight.  True when it was taken out (detached; the caller takes it
 * off the clock and drops the index's reference).  Reclaim and eviction
 * (file_map.c) drop a folio with this.
 * Context: the file's index_lock held for writing, the folio lock not held.
 */
bool bs_folio_detach_clean(struct bs_folio *folio);
/*
 * The end of @folio's writeback found it marked for reclaim and not dirty
 * (folio->rotate): to the inactive tail, off the active list, as
 * folio_rotate_reclaimable() does, unless it is off the lists or dirty
 * again.  Context: no folio lock or lru_lock held.
 */
void bs_cache_lru_rotate(struct bs_cache *cache, struct bs_folio *folio);

#ifdef FOLIOFS_DEBUG_CHECKS
#define BS_DEBUG 1
#else
#define BS_DEBUG 0
#endif

#endif /* FOLIOFS_BS_I_H */
