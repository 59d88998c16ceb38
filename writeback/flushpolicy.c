// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * flushpolicy.c - the flushers' decisions (see flushpolicy.h): pure
 * functions of a snapshot and a time, which the writeback engine
 * (engine.c) asks for both its drivers.
 */
#include "flushpolicy.h"

#define NSEC_PER_MSEC 1000000ll

/*
 * The chunk is at most 1/DIRTY_SCOPE of the dirty limit, and a multiple
 * of MIN_CHUNK_PAGES (4 MiB of pages) of at least that.
 */
#define DIRTY_SCOPE 8
#define MIN_CHUNK_PAGES ((4u << 20) / BS_PAGE_SIZE)

bool wb_fp_over_background(const struct wb_fp_state *s)
{
	return s->dirty_charged > s->bg_thresh ||
	       (s->pinned_bg_thresh && s->pinned > s->pinned_bg_thresh);
}

bool wb_fp_over_unsynced(const struct wb_fp_state *s)
{
	/*
	 * Unsynced blocks pin their folios until a sync: with a pinned limit
	 * under the dirty background threshold, only syncing can bring
	 * pinned memory back under its own threshold and release writers.
	 */
	return s->unsynced > s->bg_thresh ||
	       (s->pinned_bg_thresh && s->unsynced && s->pinned > s->pinned_bg_thresh);
}

bool wb_fp_expired(int64_t dirtied_ns, int64_t now_ns, uint32_t expire_ms)
{
	return dirtied_ns && now_ns - dirtied_ns >= (int64_t)expire_ms * NSEC_PER_MSEC;
}

enum wb_fp_action wb_fp_file_action(const struct wb_fp_state *s, const struct wb_fp_file *f,
				    int64_t now_ns, bool background, bool kupdate)
{
	if (f->retry_ns > now_ns)
		return WB_FP_WAIT;
	if (!f->dirtied_ns)
		return WB_FP_SKIP;
	if (kupdate && wb_fp_expired(f->dirtied_ns, now_ns, s->expire_ms))
		return WB_FP_EXPIRED;
	return background ? WB_FP_CHUNK : WB_FP_SKIP;
}

bool wb_fp_old_flush_due(int64_t last_ns, int64_t now_ns, uint32_t interval_ms)
{
	return now_ns - last_ns >= (int64_t)(interval_ms ? interval_ms : 1000) * NSEC_PER_MSEC;
}

bool wb_fp_bg_recheck_due(int64_t since_ns, int64_t now_ns)
{
	return now_ns - since_ns > WB_FP_BG_RECHECK_NS;
}

bool wb_fp_should_sync(const struct wb_fp_state *s, const struct wb_fp_file *f,
		       bool wrote_expired)
{
	return f->unsynced && (wrote_expired || wb_fp_over_unsynced(s));
}

int64_t wb_fp_chunk_pages(uint64_t avg_write_bw, uint64_t dirty_limit)
{
	uint64_t pages = avg_write_bw / 2;

	if (pages > dirty_limit / DIRTY_SCOPE)
		pages = dirty_limit / DIRTY_SCOPE;
	pages += MIN_CHUNK_PAGES;
	return (int64_t)(pages - pages % MIN_CHUNK_PAGES);
}

off_t wb_fp_chunk_start(off_t bg_next, off_t size)
{
	return bg_next >= size ? 0 : bg_next;
}

bool wb_fp_chunk_progress(uint64_t folio_pages, off_t from, off_t next, off_t size)
{
	return folio_pages || (from > 0 && next >= size);
}

uint64_t wb_fp_round_first(uint64_t pass_no, uint64_t nr_keys)
{
	return nr_keys ? pass_no % nr_keys : 0;
}

bool wb_fp_round_turn(unsigned int half, uint64_t key, uint64_t first)
{
	return (half == 0) == (key >= first);
}

bool wb_fp_round_again(bool progress, bool last_progress, const struct wb_fp_state *s)
{
	return (progress || last_progress) && wb_fp_over_background(s);
}

int64_t wb_fp_next_wake(int64_t now_ns, uint32_t interval_ms)
{
	return now_ns + (int64_t)(interval_ms ? interval_ms : 1000) * NSEC_PER_MSEC;
}

uint32_t wb_fp_backoff_next(uint32_t backoff_ms)
{
	if (!backoff_ms)
		return WB_FP_RETRY_MIN_MS;
	return backoff_ms * 2 > WB_FP_RETRY_MAX_MS ? WB_FP_RETRY_MAX_MS : backoff_ms * 2;
}

int64_t wb_fp_retry_due(int64_t now_ns, uint32_t backoff_ms)
{
	return now_ns + (int64_t)backoff_ms * NSEC_PER_MSEC;
}

int wb_fp_group_runs(const struct bs_wb_run *runs, int n, size_t max_io, int *group_of)
{
	off_t end = 0;
	size_t len = 0;
	int g = -1;

	for (int i = 0; i < n; i++) {
		if (g < 0 || runs[i].off != end || len + runs[i].len > max_io) {
			g++;
			len = 0;
		}
		len += runs[i].len;
		end = runs[i].off + (off_t)runs[i].len;
		group_of[i] = g;
	}
	return g + 1;
}

unsigned int wb_fp_collect_flags(bool whole_folio, bool backing_direct)
{
	return (whole_folio ? BS_WB_WHOLE_FOLIO : 0) | (backing_direct ? BS_WB_WHOLE_BLOCKS : 0);
}

bool wb_fp_pool_look_due(int64_t last_ns, int64_t now_ns, uint32_t interval_ms)
{
	int64_t period_ns = (int64_t)(interval_ms ? interval_ms : 5000) * 1000000;

	return !last_ns || now_ns - last_ns >= period_ns;
}

uint64_t wb_fp_pool_keep(uint64_t pool_bytes, bool made_since)
{
	if (made_since)
		return pool_bytes;
	return pool_bytes / 2 < WB_FP_POOL_MIN_BYTES ? 0 : pool_bytes / 2;
}
