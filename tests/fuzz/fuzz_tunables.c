// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_tunables - the run-time settings (writeback/tunables.c:
 * wb_tunable_set and wb_tunable_get), as a write to a file of
 * .foliofs/tunables reaches them.
 *
 * One wb_ctx per process (no flushers, psync backing I/O, no files).
 * Input: text up to the first NUL byte.  If its first byte is below the
 * number of tunables, it names one by index and the rest is the value;
 * else the text is NAME=VALUE (an unknown NAME must give -ENOENT).
 *
 * A reference written here from the documented grammar decides whether
 * the value is valid: the value less surrounding blanks; for ratios a
 * decimal number in [0, 100] ([1, 100] for dirty_ratio), for byte counts
 * a decimal with an optional K, M, G or T (any case) suffix, which "B"
 * or "iB" may follow (powers of 1024 either way), at most
 * 2^63 - 1 (and for dirty_bytes at least 8192), for milliseconds a
 * decimal up to 86400000, for policies a registered name (a valid value
 * of 127 characters or more may be refused).  Then:
 *   - a refused value (-EINVAL with a message) changes nothing: every
 *     tunable reads as before;
 *   - an accepted one reads back as the reference's value, its pair (the
 *     ratio of a byte count, and the other way round) reads as set by
 *     the rule "set one, zero the other", and nothing else changes.
 */
#include "wb_i.h"
#include "throttle.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TUNABLES 32
#define VAL_LEN 128

static struct wb_ctx *ctx;
static size_t nr_tunables;

static void destroy_ctx(void)
{
	wb_ctx_destroy(ctx);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct bs_config bs = {
		.block_size = 4096,
		.folio_size = 65536,
		.cache_size = 1u << 20,
		.account = bs_account_policy_at(0),
		.size = bs_size_policy_at(0),
	};
	struct wb_config wb;
	int ret;

	(void)argc;
	(void)argv;
	wb_config_default(&wb);
	wb.flushers = 0;
	wb.backing_io = WB_IO_PSYNC;
	ret = wb_ctx_create(&bs, &wb, &ctx);
	if (ret) {
		fprintf(stderr, "fuzz_tunables: wb_ctx_create: %s\n", strerror(-ret));
		abort();
	}
	atexit(destroy_ctx);
	while (wb_tunable_name(nr_tunables))
		nr_tunables++;
	if (nr_tunables > MAX_TUNABLES)
		abort();
	return 0;
}

static void snapshot(char vals[][VAL_LEN])
{
	for (size_t i = 0; i < nr_tunables; i++) {
		int n = wb_tunable_get(ctx, wb_tunable_name(i), vals[i], VAL_LEN);

		if (n < 0 || n >= VAL_LEN)
			abort();
	}
}

static size_t index_of(const char *name)
{
	for (size_t i = 0; i < nr_tunables; i++)
		if (!strcmp(wb_tunable_name(i), name))
			return i;
	return SIZE_MAX;
}

/* A decimal number with, when @suffix, one of K M G T (any case): 0 or -EINVAL. */
static int ref_number(const char *s, bool suffix, uint64_t *out)
{
	uint64_t v = 0;
	unsigned int shift = 0;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	for (; isdigit((unsigned char)*s); s++) {
		unsigned int d = (unsigned int)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	if (suffix && *s) {
		const char *u = strchr("KMGT", toupper((unsigned char)*s));

		if (!u || !*u)
			return -EINVAL;
		shift = 10 * (unsigned int)(u - "KMGT" + 1);
		s++;
		/* "4G", "4GB" and "4GiB" are one size; only the letter takes any case. */
		if (!strcmp(s, "B"))
			s++;
		else if (!strcmp(s, "iB"))
			s += 2;
	}
	if (*s || (shift && v > UINT64_MAX >> shift))
		return -EINVAL;
	*out = v << shift;
	return 0;
}

struct expect {
	bool valid;
	bool may_refuse;	/* valid, but too long to be worth accepting */
	char value[VAL_LEN];	/* what the tunable then reads */
	const char *pair;	/* the tunable the rule sets too, or NULL */
	char pair_value[VAL_LEN];
};

/* What setting @name to @raw must do, from the grammar alone. */
static void reference(const char *name, const char *raw, struct expect *e)
{
	static const char *const pairs[][2] = {
		{ "dirty_ratio", "dirty_bytes" },
		{ "dirty_background_ratio", "dirty_background_bytes" },
		{ "dirty_pinned_ratio", "dirty_pinned_bytes" },
	};
	size_t len;
	char *v;
	uint64_t n;

	memset(e, 0, sizeof(*e));
	while (isspace((unsigned char)*raw))
		raw++;
	v = strdup(raw);
	if (!v)
		abort();
	len = strlen(v);
	while (len && isspace((unsigned char)v[len - 1]))
		v[--len] = '\0';
	/* A value the length of no valid one (e.g. zeros by the hundred). */
	e->may_refuse = len >= VAL_LEN - 1;
	if (!strcmp(name, "dirty_account")) {
		e->valid = bs_account_policy_find(v) != NULL;
		snprintf(e->value, VAL_LEN, "%s", v);
		goto out;
	}
	if (!strcmp(name, "throttle")) {
		e->valid = wb_throttle_policy_find(v) != NULL;
		snprintf(e->value, VAL_LEN, "%s", v);
		goto out;
	}
	if (!strcmp(name, "ra_model")) {
		/* "6.16", or 6.17 to 6.99 (written back as "6.17"), no leading zero. */
		e->valid = strncmp(v, "6.", 2) == 0 && len == 4 &&
			   v[2] >= '1' && v[2] <= '9' && isdigit((unsigned char)v[3]) &&
			   (v[2] - '0') * 10 + (v[3] - '0') >= 16;
		snprintf(e->value, VAL_LEN, "%s", e->valid && !strcmp(v, "6.16") ? "6.16" : "6.17");
		goto out;
	}
	if (!strcmp(name, "dirty_expire_ms") || !strcmp(name, "writeback_interval_ms")) {
		e->valid = !ref_number(v, false, &n) && n <= 86400000;
		snprintf(e->value, VAL_LEN, "%" PRIu64, n);
		goto out;
	}
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		if (!strcmp(name, pairs[i][0])) {	/* a ratio */
			e->valid = !ref_number(v, false, &n) && n <= 100 &&
				   (n || strcmp(name, "dirty_ratio") != 0);
			snprintf(e->value, VAL_LEN, "%" PRIu64, n);
			/* dirty_pinned_ratio=0 leaves its byte count alone. */
			if (n || strcmp(name, "dirty_pinned_ratio") != 0) {
				e->pair = pairs[i][1];
				snprintf(e->pair_value, VAL_LEN, "0");
			}
			goto out;
		}
		if (!strcmp(name, pairs[i][1])) {	/* a byte count */
			e->valid = !ref_number(v, true, &n) && n <= UINT64_MAX / 2 &&
				   (n >= 8192 || strcmp(name, "dirty_bytes") != 0);
			snprintf(e->value, VAL_LEN, "%" PRIu64, n);
			if (n) {
				e->pair = pairs[i][0];
				snprintf(e->pair_value, VAL_LEN, "0");
			}
			goto out;
		}
	}
	abort();	/* a tunable this harness does not know: teach it */
out:
	free(v);
}

static void fail(const char *why, const char *name, const char *val, const char *detail)
{
	fprintf(stderr, "fuzz_tunables: %s=\"%s\": %s%s%s\n", name, val, why,
		detail ? ": " : "", detail ? detail : "");
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char before[MAX_TUNABLES][VAL_LEN], after[MAX_TUNABLES][VAL_LEN], err[512];
	char *text = malloc(size + 1), *name, *val, *eq;
	struct expect e;
	size_t idx, pidx = SIZE_MAX;
	int ret;

	if (!text)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	if (size && (unsigned char)text[0] < nr_tunables) {
		name = (char *)wb_tunable_name((unsigned char)text[0]);
		val = text + 1;
	} else {
		name = text;
		eq = strchr(text, '=');
		val = eq ? eq + 1 : text + strlen(text);
		if (eq)
			*eq = '\0';
	}
	idx = index_of(name);
	snapshot(before);
	err[0] = '\0';
	ret = wb_tunable_set(ctx, name, val, err, sizeof(err));
	snapshot(after);
	if (idx == SIZE_MAX) {
		if (ret != -ENOENT || !err[0])
			fail("unknown name not refused with -ENOENT and a message", name, val, err);
		goto unchanged;
	}
	reference(name, val, &e);
	if (e.pair)
		pidx = index_of(e.pair);
	if (ret && ret != -EINVAL)
		fail("returned neither 0 nor -EINVAL", name, val, err);
	if (ret) {
		if (e.valid && !e.may_refuse)
			fail("refused a valid value", name, val, err);
		if (!err[0])
			fail("refused without a message", name, val, NULL);
		goto unchanged;
	}
	if (!e.valid)
		fail("accepted an invalid value", name, val, after[idx]);
	if (strcmp(after[idx], e.value) != 0)
		fail("reads back as another value", name, val, after[idx]);
	for (size_t i = 0; i < nr_tunables; i++) {
		const char *want = i == idx ? e.value : i == pidx ? e.pair_value : before[i];

		if (strcmp(after[i], want) != 0)
			fail("changed another tunable", name, val, wb_tunable_name(i));
	}
	free(text);
	return 0;
unchanged:
	for (size_t i = 0; i < nr_tunables; i++)
		if (strcmp(after[i], before[i]) != 0)
			fail("a refused value changed a tunable", name, val, wb_tunable_name(i));
	free(text);
	return 0;
}
