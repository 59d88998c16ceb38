// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * throttle_strict.c - balance_dirty_pages() with BDI_CAP_STRICTLIMIT, as
 * Linux throttles every FUSE mount: the device's own counters and
 * thresholds decide, and its setpoint is its freerun point,
 * (wb_thresh + wb_bg_thresh) / 2, instead of halfway between that and the
 * limit.  Writers are therefore held lower (near the freerun point) and
 * stopped at wb_thresh rather than at the global limit; the global line
 * still applies when it is lower.
 *
 * Linux also caps a FUSE device's share at 1% of the global threshold
 * (bdi max_ratio); here the device is the only one and gets the whole
 * threshold: set dirty_bytes to model a share.
 */
#include "throttle.h"

/*
 * Below min_dirty pages (a parameter, 8 by default) the device's counters
 * are too coarse to steer by.
 */
enum { STRICT_MIN_DIRTY };

static const struct bs_param strict_params[] = {
	[STRICT_MIN_DIRTY] = { .name = "min_dirty", .unit = "pages",
			       .help = "below this the device's counters are too coarse to steer by",
			       .def = 8, .min = 1, .max = 1 << 20 },
};

static uint64_t min_dirty(const struct wb_dtc *dtc)
{
	return (uint64_t)dtc->params[STRICT_MIN_DIRTY];
}

static bool strict_freerun(const struct wb_dtc *dtc)
{
	return dtc->dirty <= wb_freerun_ceiling(dtc->wb_thresh, dtc->wb_bg_thresh);
}

static uint64_t strict_pos_ratio(const struct wb_dtc *dtc)
{
	uint64_t pos, wb_pos, wb_setpoint;

	if (dtc->dirty >= dtc->limit)
		return 0;
	pos = wb_pos_ratio_polynom(dtc->setpoint, dtc->dirty, dtc->limit);
	if (dtc->dirty < min_dirty(dtc))
		return pos * 2 < 2 * WB_RATIO_ONE ? pos * 2 : 2 * WB_RATIO_ONE;
	if (dtc->dirty >= dtc->wb_thresh)
		return 0;
	wb_setpoint = wb_freerun_ceiling(dtc->wb_thresh, dtc->wb_bg_thresh);
	if (wb_setpoint == 0 || wb_setpoint == dtc->wb_thresh)
		return 0;
	wb_pos = wb_pos_ratio_polynom(wb_setpoint, dtc->dirty, dtc->wb_thresh);
	/* The global line wins when it is lower (other devices over their share). */
	return pos < wb_pos ? pos : wb_pos;
}

static void strict_rate_target(const struct wb_dtc *dtc, uint64_t *dirty, uint64_t *setpoint)
{
	*dirty = dtc->dirty;
	/* Ramp up from an idle device: its threshold may be near 0. */
	if (dtc->dirty < min_dirty(dtc))
		*setpoint = dtc->dirty + 1;
	else
		*setpoint = wb_freerun_ceiling(dtc->wb_thresh, dtc->wb_bg_thresh);
}

const struct wb_throttle_policy wb_throttle_strictlimit = {
	.name = "strictlimit",
	.help = "balance_dirty_pages() with the strict limit Linux applies to every FUSE mount",
	.freerun = strict_freerun,
	.pos_ratio = strict_pos_ratio,
	.rate_target = strict_rate_target,
	.params = strict_params,
	.nr_params = sizeof(strict_params) / sizeof(strict_params[0]),
};
