/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * autovac.h - PostgreSQL 15's autovacuum of pgbench_accounts, as a model
 * for the pgbench generator (`gen pgbench,autovacuum=1`, pgbench.c).
 *
 * Only pgbench.c and tests/unit/test_autovac.c call it (pgbench.c also
 * keeps its own bitmaps with its av_bit_*() helpers).  It knows
 * nothing of traces or of the generator's shared-buffers model: it asks
 * them through the ops table it is given (struct av_ops), which the unit
 * test fakes (all hits, all misses, a clock).
 *
 * What it models (PostgreSQL 15, src/backend/access/heap/vacuumlazy.c,
 * postmaster/autovacuum.c, access/nbtree/nbtree.c, storage/buffer/):
 *
 *   dead tuples  every update adds one to pgstat's n_dead_tup and what
 *                pruning removes is taken off.  An update is HOT
 *                (abalance is not indexed) when its page has room for
 *                the new version, after the access has pruned it
 *                (heap_page_prune_opt: every pgbench page is nearly full):
 *                a page starts with room for 61 - rows_per_page tuples
 *                (none at fillfactor 100, 7 at 90), a HOT update takes
 *                one, and pruning gives back the room of the dead
 *                versions the page holds.  A HOT update's old version is
 *                a heap-only tuple the next access prunes away (one dead
 *                tuple fewer), so a page holds at most one, the last
 *                update's, until then or until vacuum.  An update that
 *                finds no room, or one of the (1 - hot) of those that
 *                find room (the pruning a recent version's horizon
 *                prevents: deterministic, one each time the accumulated
 *                (1 - hot) passes a whole update), is not HOT: its new
 *                version goes to another page (not modelled: the table
 *                keeps its size), its old one leaves an LP_DEAD line
 *                pointer that still counts (PostgreSQL 15 subtracts
 *                ndeleted - nnewlpdead) and an index entry on the row's
 *                leaf, for vacuum's index and heap vacuum passes; the
 *                next prune gives back its storage.  So at fillfactor 100
 *                the first update of each page after pgbench -i is not
 *                HOT, and those after it are.
 *   trigger      every naptime (autovacuum_naptime, 60 s) from time 0 the
 *                worker checks n_dead_tup > autovacuum_vacuum_threshold
 *                (50) + autovacuum_vacuum_scale_factor (0.2) x reltuples
 *                (the rows: pgbench -i's VACUUM set it); a check while a
 *                vacuum runs does nothing (the table is being vacuumed).
 *   heap scan    blocks in order, skipping runs of at least 32
 *                (SKIP_PAGES_THRESHOLD) pages the visibility map marks
 *                all-visible (no update since the vacuum that set the
 *                bit); the last block is always scanned.  A page updated
 *                since is dirtied (hint bits, PD_ALL_VISIBLE, pruning);
 *                one with dead items is pruned (a WAL record, the page's
 *                LSN set) and waits for the heap vacuum pass; one without,
 *                not updated since this vacuum began, becomes all-visible
 *                (its visibility map bit: a WAL record, the map page
 *                dirty) and gets its free space map slot.
 *   index pass   when there are dead items and at least 2%
 *                (BYPASS_THRESHOLD_PAGES) of the heap's pages hold some
 *                (else PostgreSQL 14+ skips index vacuuming and leaves
 *                them for the next vacuum): btvacuumscan reads the index
 *                in block order, metapage first; a leaf with dead entries
 *                is dirtied and WAL-logged.
 *   heap vacuum  then each page with dead items again, in block order:
 *                LP_DEAD -> LP_UNUSED (dirty, WAL), all-visible, free
 *                space map.
 *   buffers      a page in shared buffers is a hit; a miss is read (an
 *                8 KiB read) into the ring of BAS_VACUUM (256 KiB, 32
 *                buffers), not into the pool: when the ring comes round
 *                to a buffer the worker dirtied, the worker writes it
 *                first, flushing the WAL first when the page's LSN is past
 *                what is flushed (FlushBuffer -> XLogFlush).  Hits are
 *                dirtied in the pool (the checkpointer writes them);
 *                what is left dirty in the ring at the end stays in
 *                shared buffers dirty too.  Visibility map and free space
 *                map pages are dirtied in shared buffers and written by
 *                the next checkpoint (av_ckpt_begin/av_ckpt_end); each
 *                page's free space recorded (RecordPageWithFreeSpace: every
 *                page scanned without dead items, and every page of the
 *                heap vacuum pass) costs a hit: the map page's ReadBuffer.
 *   cost delay   each page accessed costs vacuum_cost_page_hit (1) or
 *                vacuum_cost_page_miss (2, PostgreSQL 14+), and one it
 *                dirties vacuum_cost_page_dirty (20) more, to the balance;
 *                vacuum_delay_point(), before each page, sleeps
 *                delay x balance / limit (at most 4 x delay) once the
 *                balance reaches vacuum_cost_limit (200;
 *                autovacuum_vacuum_cost_limit -1 means it) and zeroes
 *                it: autovacuum_vacuum_cost_delay is 2 ms in
 *                PostgreSQL 12+.  So at most limit / delay = 100,000 cost
 *                units a second: 100,000 pages/s all hits, 50,000 all
 *                misses (the index pass), 4,348 heap misses it dirties
 *                (2 + 20 + 1 for the free space map each).  The
 *                worker takes no other time: its I/O takes what a replay
 *                gives it (a recorded gap is think time after the I/O).
 *   end          the worker flushes the WAL (its transaction's commit);
 *                n_dead_tup becomes the dead tuples made during the
 *                vacuum on pages its scan had not reached (RECENTLY_DEAD
 *                when scanned; pgstat_report_vacuum overwrites the count,
 *                losing those behind the scan).
 *
 * Not modelled: ANALYZE, the other tables, the walwriter (the clients'
 * group flushes and the worker's own flushes write the WAL), freezing,
 * truncation, a client's hit on a page the ring holds.
 *
 * Time is in ns on the generator's clock.  Heap pages are [0,
 * heap_pages), index pages [0, idx_pages) with the metapage at 0.
 */
#ifndef FOLIOFS_SIM_AUTOVAC_H
#define FOLIOFS_SIM_AUTOVAC_H

#include <stdbool.h>
#include <stdint.h>

/* PostgreSQL's constants (vacuumlazy.c, freelist.c, visibilitymap.c, fsm_internals.h). */
#define AV_SKIP_PAGES_THRESHOLD 32u	/* a shorter run of all-visible pages is read */
#define AV_BYPASS_PAGES_PM 20u		/* 2% of rel_pages: BYPASS_THRESHOLD_PAGES */
#define AV_HEAP_PER_VM_PAGE 32672u	/* (8192 - 24) x 4 heap pages per map page */
#define AV_HEAP_PER_FSM_PAGE 4083u	/* SlotsPerFSMPage (LeafNodesPerPage) */
/*
 * WAL record sizes in bytes (XLogRecord 24, a block reference 20, the
 * short data header 2, the record's struct and offsets, MAXALIGNed), a
 * full-page image being 8 KiB more:
 *   XLOG_HEAP2_PRUNE    xl_heap_prune 8 + about 10 offsets
 *   XLOG_HEAP2_VISIBLE  xl_heap_visible 5 + a second block reference 8
 *   XLOG_HEAP2_VACUUM   xl_heap_vacuum 2 + a few offsets
 *   XLOG_BTREE_VACUUM   xl_btree_vacuum 4 + a few offsets
 */
#define AV_WAL_PRUNE 80u
#define AV_WAL_VISIBLE 64u
#define AV_WAL_VACUUM 56u
#define AV_WAL_BTVACUUM 56u
#define AV_WAL_BTINSERT 64u	/* XLOG_BTREE_INSERT_LEAF: xl_btree_insert 2 + the tuple 16 */
#define AV_PPM 1000000u

/*
 * Bitmaps of one bit per page, in 64-bit words: bit i is bit i % 64 of
 * word i / 64.  The model's (struct av_state) and, through this header,
 * pgbench.c's shared-buffers bitmaps: one implementation for both.
 */
static inline uint64_t av_bit_words(uint64_t bits)
{
	return (bits + 63) / 64;
}

static inline bool av_bit_test(const uint64_t *w, uint64_t i)
{
	return w[i / 64] >> (i % 64) & 1;
}

static inline void av_bit_set(uint64_t *w, uint64_t i)
{
	w[i / 64] |= 1ull << (i % 64);
}

static inline void av_bit_clear(uint64_t *w, uint64_t i)
{
	w[i / 64] &= ~(1ull << (i % 64));
}

/* The set bits among the first @bits (the words' bits past them clear). */
static inline uint64_t av_bit_count(const uint64_t *w, uint64_t bits)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i < av_bit_words(bits); i++)
		n += (uint64_t)__builtin_popcountll(w[i]);
	return n;
}

/* The first set bit at or after @i and before @n, or @n. */
static inline uint64_t av_bit_next(const uint64_t *w, uint64_t i, uint64_t n)
{
	while (i < n) {
		uint64_t x = w[i / 64] >> (i % 64);

		if (x)
			return i + (uint64_t)__builtin_ctzll(x) < n ? i + (uint64_t)__builtin_ctzll(x) : n;
		i = (i / 64 + 1) * 64;
	}
	return n;
}

struct av_state;

enum av_rel { AV_HEAP, AV_INDEX, AV_VM, AV_FSM };
enum av_io { AV_READ, AV_WRITE, AV_SYNC };

/* The settings, PostgreSQL 15's defaults in av_params_default(). */
struct av_params {
	uint64_t naptime_ns;	/* autovacuum_naptime */
	uint64_t threshold;	/* autovacuum_vacuum_threshold */
	double scale;		/* autovacuum_vacuum_scale_factor */
	uint64_t cost_limit;	/* vacuum_cost_limit (autovacuum_vacuum_cost_limit -1) */
	uint64_t cost_delay_ns;	/* autovacuum_vacuum_cost_delay; 0: no delay */
	uint64_t cost_hit, cost_miss, cost_dirty;	/* vacuum_cost_page_* */
	uint32_t hot_ppm;	/* of updates with room, per million, those that are HOT */
	uint32_t ring;		/* BAS_VACUUM's ring, buffers */
};

/*
 * What the model asks of the generator.  @rel and @page name a page;
 * @pid is the worker's or the checkpointer's.  Return 0 or -errno where
 * an int is returned.
 */
struct av_ops {
	/* Is the page in shared buffers?  Dirty there? (heap and index) */
	bool (*lookup)(void *ctx, enum av_rel rel, uint64_t page);
	bool (*is_dirty)(void *ctx, enum av_rel rel, uint64_t page);
	/* The worker dirtied a page that stays in shared buffers. */
	void (*set_dirty)(void *ctx, enum av_rel rel, uint64_t page);
	/*
	 * The worker dirtied a clean page (MarkBufferDirtyHint): with data
	 * checksums a full-page image at its first change since the
	 * checkpoint began: the WAL bytes it logged.  May be NULL.
	 */
	uint64_t (*hint)(void *ctx, enum av_rel rel, uint64_t page);
	/* An 8 KiB read or write of the page at @t, or an fsync of @rel's file. */
	int (*io)(void *ctx, uint64_t t, uint32_t pid, enum av_io op, enum av_rel rel,
		  uint64_t page);
	/*
	 * @bytes of WAL about the page, and a full-page image when @image
	 * and it is the page's first change since the checkpoint began (the
	 * generator's fpw= and its bitmap).  Returns the bytes logged.
	 */
	uint64_t (*wal)(void *ctx, enum av_rel rel, uint64_t page, uint64_t bytes, bool image);
	/* The WAL's end: the LSN of the record just logged. */
	uint64_t (*wal_end)(void *ctx);
	/* Flush the WAL at @t by @pid if it is flushed to less than @lsn. */
	int (*wal_flush)(void *ctx, uint64_t t, uint32_t pid, uint64_t lsn);
	/* A vacuum ended (its numbers in av->last); may be NULL. */
	void (*vacuum_done)(void *ctx, const struct av_state *av);
};

/* One vacuum's numbers (VACUUM VERBOSE's, log_autovacuum_min_duration's). */
struct av_vacuum {
	uint64_t start_ns, end_ns, n_dead;	/* n_dead_tup when it began */
	uint64_t heap_scanned, heap_skipped, lpdead_pages, heap_vacuumed, index_pages;
	bool bypassed;				/* index vacuuming skipped (under 2%) */
	uint64_t hits, misses, dirtied;		/* buffer usage */
	uint64_t reads, writes, wal_flushes;	/* the worker's I/O */
	uint64_t heap_reads, index_reads, heap_writes, index_writes;
	uint64_t wal_bytes, wal_images, sleeps, slept_ns;
};

enum av_phase { AV_IDLE, AV_HEAP_SCAN, AV_INDEX_SCAN, AV_HEAP_VACUUM };

/* A ring buffer: a page read through the ring, dirty or not. */
struct av_slot {
	uint64_t page, lsn;	/* lsn: the WAL's end when the worker logged a change */
	uint8_t rel;		/* enum av_rel */
	bool used, dirty;
};

struct av_state {
	struct av_params prm;
	const struct av_ops *ops;
	void *ctx;
	uint32_t pid;			/* the worker's */
	uint64_t heap_pages, idx_pages, vm_pages, fsm_pages, reltuples;
	/* One bit per heap page (index leaf for idx_*). */
	uint64_t *allvis;		/* the visibility map: set by vacuum, cleared by updates */
	uint64_t *hot;			/* the last HOT update's dead tuple, not yet pruned */
	uint64_t *unpruned;		/* a non-HOT update's old version, storage not yet pruned */
	uint8_t *room;			/* free tuple slots on the page */
	uint64_t *dead;			/* LP_DEAD items (not HOT), made since the last vacuum began */
	uint64_t *vac;			/* those the running vacuum removes (dead when it began) */
	uint64_t *changed;		/* updated since the running vacuum began */
	uint64_t *idx_dead, *idx_vac;	/* leaves with dead items' entries, likewise */
	/* Map pages: dirty in shared buffers, and what the running checkpoint writes. */
	uint8_t *vm_dirty, *fsm_dirty, *vm_ckpt, *fsm_ckpt, *vm_logged;
	uint64_t n_dead;		/* pgstat's n_dead_tup */
	uint64_t recent;		/* dead tuples made during the vacuum, ahead of its scan */
	uint64_t cold_acc;		/* updates x (1 - hot), in ppm, not yet a whole update */
	uint64_t lpdead_pages;		/* pages in vac */
	uint64_t updates, hot_updates;	/* all noted, and those HOT */
	/* The worker. */
	enum av_phase phase;		/* AV_IDLE: none, or the passes done */
	bool in_vacuum;			/* a vacuum runs (until vacuum_end()) */
	uint64_t next_check_ns;		/* the next naptime check */
	uint64_t t_ns;			/* its clock while it runs */
	uint64_t pos;			/* the phase's next block */
	uint64_t next_unskippable;	/* the heap scan's lazy_scan_skip() */
	bool skipping;
	uint64_t balance;		/* VacuumCostBalance */
	struct av_slot *ring;
	uint32_t ring_next;
	struct av_vacuum cur, last;
	uint64_t vacuums;
};

void av_params_default(struct av_params *prm);
/*
 * 0, or -ENOMEM.  A table just vacuumed: every page all-visible, with
 * @room free tuple slots (61 - rows per page for pgbench_accounts).
 */
int av_init(struct av_state *av, const struct av_params *prm, const struct av_ops *ops, void *ctx,
	    uint32_t pid, uint64_t heap_pages, uint64_t idx_pages, uint64_t reltuples, uint8_t room);
void av_destroy(struct av_state *av);
/* The dead tuples at which a check starts a vacuum (more than this). */
uint64_t av_trigger(const struct av_state *av);
/*
 * An update of a row on heap page @page whose index entry is on leaf
 * @leaf: true if it is HOT (else the caller logs the new version's index
 * entry on the leaf: an insertion, AV_WAL_BTINSERT).
 */
bool av_note_update(struct av_state *av, uint64_t page, uint64_t leaf);
/* When the worker does its next thing: a check, or its next page (after a sleep it owes). */
uint64_t av_next_ns(const struct av_state *av);
/* The worker's checks and steps due at or before @t_ns, in time order. */
int av_run_until(struct av_state *av, uint64_t t_ns);
/*
 * At the end: a running vacuum to its end, else the next check, and that
 * vacuum to its end if it starts one.  *@t_ns: the last thing's time.
 */
int av_finish(struct av_state *av, uint64_t *t_ns);
/* The checkpointer: the map pages dirty now are the checkpoint's (begin), written at its end. */
void av_ckpt_begin(struct av_state *av);
int av_ckpt_end(struct av_state *av, uint64_t t_ns, uint32_t pid);

#endif
