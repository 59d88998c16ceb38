// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * throttle_bdp.c - balance_dirty_pages() as Linux applies it to a normal
 * block device: free running below (thresh + bg_thresh) / 2, then the
 * global cubic control line (throttle.c) scaled by the device's own line.
 *
 * The device's line matters when several devices share the budget; with
 * one device (ours) its setpoint is the global setpoint and it only adds
 * two corrections, both kept here because they change what a writer feels:
 *
 *  - a linear line through (setpoint, 1) that reaches 0 at
 *    setpoint + 8 * write_bw: dirty data worth more than about 8 seconds of
 *    writeback above the setpoint is pushed down harder, and beyond 3/4 of
 *    that span the ratio is simply quartered;
 *  - a reserve: below half the device's threshold the ratio is raised (by
 *    (wb_thresh / 2) / dirty, at most 8x) so the device never runs dry
 *    because writers were held back too early.
 *
 * Example: cache_size 4 GiB, dirty_ratio 20, background 10: thresh is
 * 209715 pages (819 MiB), bg_thresh 104857, freerun 157286, setpoint
 * 183500 (717 MiB).  At 100 MB/s (25600 pages/s) the linear line's span is
 * 204800 pages, so near the setpoint it barely moves the cubic's value.
 */
#include "throttle.h"

static bool bdp_freerun(const struct wb_dtc *dtc)
{
	return dtc->dirty <= dtc->freerun;
}

static uint64_t bdp_pos_ratio(const struct wb_dtc *dtc)
{
	uint64_t pos, wb_thresh = dtc->wb_thresh, wb_setpoint, span, x_intercept, share;

	if (dtc->dirty >= dtc->limit)
		return 0;
	pos = wb_pos_ratio_polynom(dtc->setpoint, dtc->dirty, dtc->limit);

	if (wb_thresh > dtc->thresh)
		wb_thresh = dtc->thresh;
	/* An idle device still gets a useful share, never more than all of it. */
	if (wb_thresh < (dtc->limit - dtc->dirty) / 8)
		wb_thresh = (dtc->limit - dtc->dirty) / 8;
	if (wb_thresh > dtc->thresh)
		wb_thresh = dtc->thresh;
	/* The device's share of the threshold, 16-bit fixed point. */
	share = (wb_thresh << 16) / (dtc->thresh | 1);
	wb_setpoint = dtc->setpoint * share >> 16;
	span = (dtc->thresh - wb_thresh + 8 * dtc->write_bw) * share >> 16;
	x_intercept = wb_setpoint + span;
	if (dtc->dirty < x_intercept - span / 4)
		pos = pos * (x_intercept - dtc->dirty) / ((x_intercept - wb_setpoint) | 1);
	else
		pos /= 4;

	/* Reserve: do not let the device go idle. */
	x_intercept = wb_thresh / 2;
	if (dtc->dirty < x_intercept) {
		if (dtc->dirty > x_intercept / 8)
			pos = pos * x_intercept / dtc->dirty;
		else
			pos *= 8;
	}
	return pos;
}

static void bdp_rate_target(const struct wb_dtc *dtc, uint64_t *dirty, uint64_t *setpoint)
{
	*dirty = dtc->dirty;
	*setpoint = dtc->setpoint;
}

const struct wb_throttle_policy wb_throttle_bdp = {
	.name = "bdp",
	.help = "balance_dirty_pages() as Linux throttles a block device (default)",
	.freerun = bdp_freerun,
	.pos_ratio = bdp_pos_ratio,
	.rate_target = bdp_rate_target,
};
