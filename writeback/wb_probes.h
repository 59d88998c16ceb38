/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wb_probes.h - the mount's writeback pass's probes, as the kernel's
 * writeback:wbc_writepage (backing.c, the engine's submit) and
 * writeback:writeback_written (flush.c, at a pass's end)
 * (foliofs_probes.h; doc/tracing.md).  Kept out of those files so that
 * their probe sites are one line each.
 *
 * Only backing.c and flush.c include this.
 */
#ifndef FOLIOFS_WB_PROBES_H
#define FOLIOFS_WB_PROBES_H

#include "wb_i.h"
#include "foliofs_probes.h"

#include <limits.h>

/* The kernel's enum wb_reason values used here. */
#define WB_PROBE_REASON_BACKGROUND 0
#define WB_PROBE_REASON_SYNC 2
#define WB_PROBE_REASON_PERIODIC 3

/*
 * wbc_writepage, once for each run of a batch about to be written (a run
 * lies in one folio): the kernel's wbc fields (nr_to_write left of a
 * background chunk's budget, LONG_MAX without one; sync_mode 1 for fsync
 * and unmount, WB_SYNC_ALL; the pass's byte range, end inclusive), then
 * the file's inode and the run's offset and length.  Returns the pages
 * of the batch (0 when built without probes).
 */
static inline uint64_t wb_probe_batch(const struct wb_file *wbf, const struct bs_wb_run *runs,
				      int n, const struct bs_wb_budget *budget, bool try,
				      off_t start, off_t end)
{
	uint64_t pages = 0;

#if defined(FOLIOFS_PROBES) && FOLIOFS_PROBES
	for (int i = 0; i < n; i++) {
		FOLIOFS_TP(wbc_writepage, .nr_to_write = budget ? budget->nr_to_write : LONG_MAX,
			   .sync_mode = !try, .for_kupdate = try && !budget,
			   .for_background = budget != NULL, .range_start = start,
			   .range_end = end - 1, .ino = wbf->ino, .pos = runs[i].off,
			   .count = runs[i].len);
		pages += (runs[i].len + 4095) / 4096;
	}
#else
	(void)wbf, (void)runs, (void)n, (void)budget, (void)try, (void)start, (void)end;
#endif
	return pages;
}

/*
 * writeback_written at the end of a pass over one file (the kernel's
 * fires at the end of a wb_writeback() work over many): pages written,
 * sb_dev 0, sync_mode, for_kupdate, range_cyclic 0, for_background, the
 * kernel's reason, then the file's inode.
 */
static inline void wb_probe_written(const struct wb_file *wbf, uint64_t pages,
				    const struct bs_wb_budget *budget, bool try)
{
	FOLIOFS_TP(writeback_written, .nr_pages = (long)pages, .sync_mode = !try,
		   .for_kupdate = try && !budget, .for_background = budget != NULL,
		   .reason = budget ? WB_PROBE_REASON_BACKGROUND
				: try ? WB_PROBE_REASON_PERIODIC : WB_PROBE_REASON_SYNC,
		   .ino = wbf->ino);
	(void)wbf, (void)pages, (void)budget, (void)try;
}

#endif
