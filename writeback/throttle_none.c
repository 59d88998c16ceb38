// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * throttle_none.c - never pause a writer: the charge grows until reclaim
 * (cache_size) stops it.  For comparison with the real policies.
 */
#include "throttle.h"

static bool none_freerun(const struct wb_dtc *dtc)
{
	(void)dtc;
	return true;
}

static uint64_t none_pos_ratio(const struct wb_dtc *dtc)
{
	(void)dtc;
	return 2 * WB_RATIO_ONE;
}

static void none_rate_target(const struct wb_dtc *dtc, uint64_t *dirty, uint64_t *setpoint)
{
	*dirty = dtc->dirty;
	*setpoint = dtc->setpoint;
}

const struct wb_throttle_policy wb_throttle_none = {
	.name = "none",
	.help = "never pause writers (reclaim is the only brake)",
	.freerun = none_freerun,
	.pos_ratio = none_pos_ratio,
	.rate_target = none_rate_target,
};
