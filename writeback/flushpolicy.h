/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * flushpolicy.h - the flushers' decisions as pure functions of a snapshot
 * of the state and the time.
 *
 * The writeback engine (engine.c) calls them for both of its drivers, the
 * mount's flusher threads (flush.c) on the monotonic clock and
 * foliofs-sim's event loop (sim/) on a virtual clock, with the snapshot
 * taken from the cache's counters and the files' state (struct
 * wb_fstate).  Nothing here reads a clock,
 * takes a lock or looks at a cache: what the flushers do is decided here,
 * how they wait and write is up to the driver.
 *
 * The decisions, as the kernel's wb_workfn() makes them:
 *   - background writeback while the charge of dirty data not under
 *     writeback is over the background threshold (or pinned memory over
 *     its own), one chunk of writeback_chunk_size() pages per file per
 *     turn, files in round robin, rounds repeated (b_more_io back to
 *     b_io) while over the threshold and something moved;
 *   - a file whose data has been dirty for dirty_expire_ms is written
 *     whole, then synced;
 *   - files holding unsynced data are synced once it pins more memory
 *     than the background threshold;
 *   - a file whose writeback failed waits out a doubling backoff.
 *
 * Units: bytes for the cache snapshot, pages for the chunk, ns for times.
 */
#ifndef FOLIOFS_FLUSHPOLICY_H
#define FOLIOFS_FLUSHPOLICY_H

#include "blockstate.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Bytes collected per batch of a pass (one bounce buffer in the mount). */
#define WB_FP_BATCH_BYTES (4u << 20)

/* Background retry of a failing file: from this, doubling, up to the max. */
#define WB_FP_RETRY_MIN_MS 100
#define WB_FP_RETRY_MAX_MS 10000

/* The cache and the settings as the flushers see them, in bytes. */
struct wb_fp_state {
	uint64_t dirty_charged;		/* charge of dirty blocks not under writeback */
	uint64_t pinned;		/* memory of folios holding held or unsynced blocks */
	uint64_t unsynced;		/* memory of folios holding unsynced blocks */
	uint64_t bg_thresh;		/* charge that starts background writeback */
	uint64_t pinned_bg_thresh;	/* pinned memory that does; 0: no pinned limit */
	uint32_t expire_ms;		/* dirty_expire_ms */
};

/* One file as the flushers see it. */
struct wb_fp_file {
	int64_t dirtied_ns;		/* when it went from clean to dirty, 0: clean */
	int64_t retry_ns;		/* background retry not before this */
	bool unsynced;			/* holds blocks written back but not synced */
};

/*
 * Whether background writeback should run: the dirty charge over the
 * background threshold (the kernel's wb_over_bg_thresh(), which leaves
 * data under writeback out: it is already on its way), or pinned memory
 * over its own.
 */
bool wb_fp_over_background(const struct wb_fp_state *s);

/*
 * Whether the flushers sync files holding unsynced blocks: unsynced
 * memory over the dirty background threshold, or (with a pinned limit)
 * some unsynced while pinned memory is over its background threshold.
 */
bool wb_fp_over_unsynced(const struct wb_fp_state *s);

/* Whether data dirtied at @dirtied_ns (0: clean) is due at @now_ns. */
bool wb_fp_expired(int64_t dirtied_ns, int64_t now_ns, uint32_t expire_ms);

/* What a flusher does with a file on its turn. */
enum wb_fp_action {
	WB_FP_WAIT,		/* backing off: neither written nor synced */
	WB_FP_SKIP,		/* nothing to write (it may still be synced) */
	WB_FP_EXPIRED,		/* write the whole file: its data is old */
	WB_FP_CHUNK,		/* write one background chunk */
};

/*
 * The file's turn at @now_ns.  The caller passes @f's dirtied and retry
 * times, whether the round writes in the background (@background:
 * wb_fp_over_background() as last judged, see wb_fp_bg_recheck_due()),
 * and whether its pass writes old data (@kupdate: wb_fp_old_flush_due()
 * when the pass began).  A file whose data has been dirty for
 * dirty_expire_ms is written without a budget (WB_FP_EXPIRED) only by
 * such a pass; in any other it is a file like the rest, a chunk over the
 * background threshold.
 */
enum wb_fp_action wb_fp_file_action(const struct wb_fp_state *s, const struct wb_fp_file *f,
				    int64_t now_ns, bool background, bool kupdate);

/*
 * Whether a pass beginning at @now_ns writes old data, the last one that
 * did having begun at @last_ns: once every writeback_interval_ms
 * (@interval_ms; a second when it is 0, as wb_fp_next_wake()).  The
 * kernel's flusher writes expired inodes only in its kupdate work
 * (wb_check_old_data_flush(): once per dirty_writeback_interval since
 * wb->last_old_flush), whatever other work woke it; its background work
 * gives an old inode a chunk like any other.  A continuously dirtied file
 * (a database's table) stays old for ever, so a flusher that wrote it
 * whole at every wake over the threshold would drain the dirty data to
 * nearly nothing each time, where the kernel's stays near the threshold.
 */
bool wb_fp_old_flush_due(int64_t last_ns, int64_t now_ns, uint32_t interval_ms);

/*
 * How often background writeback looks at its threshold: the kernel's
 * flusher writes inode after inode, a chunk each, and goes back to check
 * wb_over_bg_thresh() only when it has written for more than HZ/10
 * (writeback_sb_inodes()) or has been through every inode queued.  So
 * once started it writes well below the threshold: on this machine's
 * kernel the seed's scenario at 64 MiB swung the server's dirty data
 * between about 30 and 5 MiB, mean 16 MiB, against a background
 * threshold of 32 MiB (contrib/results/calibrate-2026-12-07).
 */
#define WB_FP_BG_RECHECK_NS (100 * 1000000ll)

/* A round judged the threshold at @since_ns: judge it again at @now_ns. */
bool wb_fp_bg_recheck_due(int64_t since_ns, int64_t now_ns);

/*
 * After the file's turn: sync it if it holds unsynced data and was just
 * written whole for its age (@wrote_expired, as a journal commit makes old
 * data durable), or if unsynced data pins too much memory.
 */
bool wb_fp_should_sync(const struct wb_fp_state *s, const struct wb_fp_file *f,
		       bool wrote_expired);

/*
 * Pages of writeback budget for one background chunk, as the kernel's
 * writeback_chunk_size() sizes WB_SYNC_NONE work: half a second at the
 * smoothed bandwidth @avg_write_bw (pages/s), at most 1/8 of the hard
 * limit @dirty_limit (pages), plus 4 MiB of pages, rounded down to a
 * multiple of 4 MiB: never under 4 MiB.
 */
int64_t wb_fp_chunk_pages(uint64_t avg_write_bw, uint64_t dirty_limit);

/*
 * Where a background chunk of a file of @size bytes starts: where the last
 * one stopped (@bg_next, the kernel's writeback_index), or the start once
 * that is at or past the end.
 */
off_t wb_fp_chunk_start(off_t bg_next, off_t size);

/*
 * Whether a chunk that started at @from and stopped at @next (@size: it
 * went through), having paid @folio_pages of budget, moved anything: a
 * folio was written, or the position went back round to the start.
 */
bool wb_fp_chunk_progress(uint64_t folio_pages, off_t from, off_t next, off_t size);

/*
 * Round robin: a pass looks at the files in the order of their keys
 * (@key: a file's place among @nr_keys places, [0, nr_keys)) starting at
 * @first (pass number modulo @nr_keys), wrapping round.  It walks its
 * files twice; the file of key @key is looked at on walk @half (0 or 1)
 * if this returns true.  Two walks rather than one with a modulo so that
 * a driver can walk a linked list that changes meanwhile.  A driver may
 * leave out files whose turn would do nothing (clean, synced): a key
 * without a file is a turn that does nothing, so the order of the others
 * is the same.
 */
uint64_t wb_fp_round_first(uint64_t pass_no, uint64_t nr_keys);
bool wb_fp_round_turn(unsigned int half, uint64_t key, uint64_t first);

/*
 * Whether a pass goes round again: still over the background threshold,
 * and this round or the one before moved something (two idle rounds in a
 * row end it: every file busy, failing, or clean from its chunk's start).
 */
bool wb_fp_round_again(bool progress, bool last_progress, const struct wb_fp_state *s);

/*
 * When a flusher that finished a pass at @now_ns next wakes by itself
 * (writes over the threshold wake it earlier): writeback_interval_ms, or
 * a second when that is 0, since expiry is still checked.
 */
int64_t wb_fp_next_wake(int64_t now_ns, uint32_t interval_ms);

/*
 * A pass failed: the next backoff in ms after @backoff_ms (0: none yet),
 * doubling from WB_FP_RETRY_MIN_MS up to WB_FP_RETRY_MAX_MS; the retry is
 * due at now + the result.
 */
uint32_t wb_fp_backoff_next(uint32_t backoff_ms);
int64_t wb_fp_retry_due(int64_t now_ns, uint32_t backoff_ms);

/* Pooled folio memory under which an idle pool is given back whole. */
#define WB_FP_POOL_MIN_BYTES (4u << 20)

/*
 * Whether the pool is due another look @now_ns, the last having been at
 * @last_ns (0: none yet), every @interval_ms (0: every 5 s, the default).
 */
bool wb_fp_pool_look_due(int64_t last_ns, int64_t now_ns, uint32_t interval_ms);

/*
 * Pooled folio memory to keep after a look: all of @pool_bytes when
 * folios were made since the last look (@made_since), else half, and
 * none once that is under WB_FP_POOL_MIN_BYTES.
 */
uint64_t wb_fp_pool_keep(uint64_t pool_bytes, bool made_since);

/* The bs_wb_collect_mode() flags of wb_granularity=folio and backing_direct. */
unsigned int wb_fp_collect_flags(bool whole_folio, bool backing_direct);

/*
 * How collected runs become writes: runs[0..n) in file order, those
 * contiguous in the file sharing one write of at most @max_io bytes.
 * @group_of[i] gets run i's write; returns the number of writes.
 */
int wb_fp_group_runs(const struct bs_wb_run *runs, int n, size_t max_io, int *group_of);

#endif /* FOLIOFS_FLUSHPOLICY_H */
