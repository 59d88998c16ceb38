/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * foliofs/policy.h - what a foliofs accounting, sizing or throttle policy
 * is made of, for the policies in the tree (blockstate/account_*.c,
 * size_*.c, writeback/throttle_*.c) and
 * for policies built out of the tree and loaded into a running daemon or
 * foliofs-sim (-o load=PATH, foliofsctl load MNT PATH):
 *
 *     cc -shared -fPIC $(pkg-config --cflags foliofs-policy) -o p.so p.c
 *
 * A policy is a struct of callbacks with a name, a one-line help and
 * optional named parameters (integers with a default and a range, set
 * with -o account.NAME=V, size.NAME=V or throttle.NAME=V and at run time
 * as tunables).  A
 * loadable library defines them and exports one descriptor naming them:
 *
 *     static const struct bs_account_policy *const mine[] = { &my_policy, NULL };
 *     FOLIOFS_POLICY_MODULE(.account = mine);
 *
 * The descriptor carries FOLIOFS_POLICY_ABI and its own size: a library
 * built against another version of this header is refused.  The
 * callbacks run in the daemon, on its writers' and flushers' threads,
 * under blockstate's locks: they must be pure functions of their
 * argument (no I/O, no locks, no allocation, no global state), quick,
 * and must not crash.  See doc/policies.md.
 *
 * Conventions: sizes in bytes, orders are log2 of bytes, pages 4 KiB.
 */
#ifndef FOLIOFS_POLICY_H
#define FOLIOFS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * The version of everything below.  Raised on any change of a struct's
 * layout or of a callback's meaning; a library is loaded only if it was
 * built with the daemon's version.
 */
#define FOLIOFS_POLICY_ABI 1

/* The unit the kernel's dirty counters use, and the smallest folio. */
#define BS_PAGE_SHIFT 12
#define BS_PAGE_SIZE (1u << BS_PAGE_SHIFT)

/* Parameters a policy may declare; longest parameter and policy name. */
#define BS_PARAMS_MAX 8
#define BS_NAME_MAX 31

/*
 * One named parameter of a policy: an integer in [min, max], def when
 * not set.  name is [a-z0-9_], at most BS_NAME_MAX characters; help is
 * one line for --help; unit says what the number counts ("permille of
 * the folio", "pages"), or "" for a plain number.
 */
struct bs_param {
	const char *name;
	const char *help;
	const char *unit;
	int64_t def;
	int64_t min;
	int64_t max;
};

/* What a price is computed from: one folio's held (dirty or writeback) state. */
struct bs_held_state {
	uint32_t folio_size;	/* bytes */
	uint32_t block_size;	/* bytes */
	uint32_t held_blocks;	/* blocks dirty or under writeback */
	uint32_t held_pages;	/* 4 KiB pages holding at least one such block */
	/* The policy's parameter values, in the order it declares them. */
	const int64_t *params;
};

/*
 * An accounting policy prices a folio's held state in bytes of dirty
 * budget.  price() must be 0 when held_blocks is 0, and must depend on its
 * argument only: blockstate charges price(after) - price(before) on every
 * change, so the sum charged is always the sum of the prices.  When a
 * parameter changes, every folio is repriced, as when the policy changes.
 */
struct bs_account_policy {
	const char *name;	/* [a-z0-9_], at most BS_NAME_MAX characters */
	const char *help;	/* one line for --help and README */
	uint64_t (*price)(const struct bs_held_state *st);
	const struct bs_param *params;	/* nr_params of them, or NULL */
	unsigned int nr_params;		/* at most BS_PARAMS_MAX */
};

/*
 * What a sizing policy sees of a file's recent folios; blockstate updates
 * it after every new folio (under the file's index lock).
 */
struct bs_size_state {
	off_t next_off;		/* end of the last folio made */
	unsigned int order;	/* its order (log2 bytes); 0 before the first */
	unsigned int access;	/* what asks for this folio: enum bs_size_access
				 * (set before each call) */
	const int64_t *params;	/* the policy's parameter values (set before each call) */
};

/* The access a new folio is made for (bs_size_state.access). */
enum bs_size_access {
	BS_SIZE_WRITE,		/* a write of [off, off + len) */
	BS_SIZE_READ,		/* a read of [off, off + len) readahead did not cover */
	BS_SIZE_READAHEAD,	/* a folio of a readahead window starting at off: len
				 * is the size readahead asks for (a power of two,
				 * aligned, within the window and EOF) */
};

/*
 * A sizing policy picks the order (log2 of the size in bytes) of a new
 * folio for an access of [off, off + len), between BS_PAGE_SHIFT and
 * @max_order.  blockstate then shrinks it as needed so that the folio is
 * naturally aligned, contains @off and overlaps no existing folio.
 */
struct bs_size_policy {
	const char *name;
	const char *help;
	unsigned int (*order)(const struct bs_size_state *st, off_t off,
			      size_t len, unsigned int max_order);
	const struct bs_param *params;
	unsigned int nr_params;
};

/* ---- throttle policies ---- */

/* Position ratios are fixed point with WB_RATIO_SHIFT fractional bits. */
#define WB_RATIO_SHIFT 10
#define WB_RATIO_ONE (1ull << WB_RATIO_SHIFT)

/*
 * One dirty domain as a policy sees it, in pages (the kernel's
 * dirty_throttle_control for a single bdi_writeback): the dirty budget, or
 * the pinned-memory budget when dirty_pinned_* is set.  With one device,
 * the device's share of the threshold is the whole threshold, capped by
 * max_ratio.
 */
struct wb_dtc {
	uint64_t dirty;		/* charged now (dirty + under writeback) */
	uint64_t thresh;	/* the writers' threshold */
	uint64_t bg_thresh;	/* background writeback starts above this */
	uint64_t limit;		/* hard limit: max(thresh, dirty_limit) */
	uint64_t freerun;	/* (thresh + bg_thresh) / 2: no throttling below */
	uint64_t setpoint;	/* (freerun + limit) / 2: where dirty should settle */
	uint64_t wb_thresh;	/* the device's share of thresh */
	uint64_t wb_bg_thresh;	/* the device's share of bg_thresh */
	uint64_t write_bw;	/* smoothed write bandwidth, pages/s */
	const int64_t *params;	/* the policy's parameter values, in its order */
};

/*
 * A throttle policy: three pure functions of a domain.  None of them may
 * keep state, sleep or read a clock.
 */
struct wb_throttle_policy {
	const char *name;
	const char *help;	/* one line for --help and README */
	/* Whether a writer at @dtc is not throttled at all. */
	bool (*freerun)(const struct wb_dtc *dtc);
	/*
	 * The position ratio: how fast, relative to dirty_ratelimit, a writer
	 * may dirty now (WB_RATIO_ONE at the setpoint, 0 at or above the
	 * limit).
	 */
	uint64_t (*pos_ratio)(const struct wb_dtc *dtc);
	/*
	 * The dirty count and setpoint that dirty_ratelimit is steered
	 * around: it only moves toward the balanced rate when the task rate
	 * agrees with the side of the setpoint the count is on.
	 */
	void (*rate_target)(const struct wb_dtc *dtc, uint64_t *dirty, uint64_t *setpoint);
	/* Named parameters (-o throttle.NAME=N, tunable throttle.NAME), read from dtc->params. */
	const struct bs_param *params;
	unsigned int nr_params;
};

/* Helpers the policies share. */

/*
 * A 128-bit integer for the control line's intermediate products.  GCC
 * and clang have it but ISO C does not: __extension__ keeps a library
 * built with -Wpedantic free of warnings from this header.
 */
__extension__ typedef __int128 wb_int128;

/* (thresh + bg_thresh) / 2 */
static inline uint64_t wb_freerun_ceiling(uint64_t thresh, uint64_t bg_thresh)
{
	return (thresh + bg_thresh) / 2;
}

/*
 * The cubic control line of balance_dirty_pages() through (setpoint, 1)
 * that is 0 at @limit and 2 below about setpoint - (limit - setpoint),
 * in WB_RATIO_ONE units (the derivation is in writeback/throttle.c):
 *
 *     f(dirty) = 1 + ((setpoint - dirty) / (limit - setpoint))^3
 */
static inline uint64_t wb_pos_ratio_polynom(uint64_t setpoint, uint64_t dirty, uint64_t limit)
{
	int64_t span = (int64_t)(limit > setpoint ? limit - setpoint : 0) | 1;
	/* x = (setpoint - dirty) / (limit - setpoint), fixed point */
	wb_int128 x = ((wb_int128)setpoint - (wb_int128)dirty) * (wb_int128)WB_RATIO_ONE / span;
	wb_int128 r;

	/* Far below the setpoint x^3 would overflow; the result is clamped to 2 anyway. */
	if (x > (wb_int128)(4 * WB_RATIO_ONE))
		return 2 * WB_RATIO_ONE;
	if (x < -(wb_int128)(4 * WB_RATIO_ONE))
		return 0;
	r = x * x >> WB_RATIO_SHIFT;
	r = r * x >> WB_RATIO_SHIFT;
	r += WB_RATIO_ONE;
	if (r < 0)
		return 0;
	if (r > (wb_int128)(2 * WB_RATIO_ONE))
		return 2 * WB_RATIO_ONE;
	return (uint64_t)r;
}

/* ---- the library ---- */

/*
 * The descriptor a loadable library exports under the name
 * foliofs_policy_module (FOLIOFS_POLICY_MODULE defines it): its
 * accounting, sizing and throttle policies, each list NULL-terminated (or
 * NULL for none).
 */
struct foliofs_policy_module {
	uint32_t abi;		/* FOLIOFS_POLICY_ABI */
	uint32_t struct_size;	/* sizeof(struct foliofs_policy_module) */
	const struct bs_account_policy *const *account;
	const struct bs_size_policy *const *sizing;
	const struct wb_throttle_policy *const *throttle;
};

#define FOLIOFS_POLICY_MODULE_SYMBOL "foliofs_policy_module"

#define FOLIOFS_POLICY_MODULE(...)						\
	__attribute__((visibility("default")))					\
	const struct foliofs_policy_module foliofs_policy_module = {		\
		.abi = FOLIOFS_POLICY_ABI,					\
		.struct_size = sizeof(struct foliofs_policy_module),			\
		__VA_ARGS__							\
	}

#endif
