// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fault.c - parsing and printing fault specs (grammar in wb_i.h).
 *
 * Faults are injected where backing I/O completes (backing.c), so they hit
 * io_uring and pwritev alike, which an LD_PRELOAD shim could not; an fsync
 * fault fires instead of the sync (a failed device flush).  A spec
 * is deterministic: every=, after=, count= and prob= with seed= make the
 * same calls fail on every run.
 */
#include "wb_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	int err;
} errnos[] = {
	{ "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EDQUOT", EDQUOT },
	{ "EROFS", EROFS }, { "EFBIG", EFBIG }, { "EAGAIN", EAGAIN },
	{ "EINTR", EINTR }, { "ENOMEM", ENOMEM }, { "EBADF", EBADF },
	{ "EPERM", EPERM }, { "EACCES", EACCES },
};

static const char *const ops[] = { "write", "read", "fsync", "alloc" };

static int fail(char *err, size_t errlen, const char *spec, const char *why)
{
	snprintf(err, errlen, "fault=%s: %s", spec, why);
	return -EINVAL;
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	*out = strtoull(s, &end, 10);	/* "010" is ten, not eight */
	return !errno && !*end;
}

static int parse_selector(struct wb_fault *f, char *sel, const char *spec,
			  char *err, size_t errlen)
{
	char *val = strchr(sel, '=');
	uint64_t seed;

	if (!val)
		return fail(err, errlen, spec, "a selector needs NAME=VALUE");
	*val++ = '\0';
	if (!strcmp(sel, "every") && parse_u64(val, &f->every) && f->every)
		return 0;
	if (!strcmp(sel, "after") && parse_u64(val, &f->after))
		return 0;
	if (!strcmp(sel, "count") && parse_u64(val, &f->count))
		return 0;
	if (!strcmp(sel, "seed") && parse_u64(val, &seed)) {
		f->rng = seed * 0x9e3779b97f4a7c15ull + 1;
		f->seed = seed;
		f->seed_given = true;
		return 0;
	}
	if (!strcmp(sel, "file") && *val && strlen(val) < sizeof(f->file)) {
		strcpy(f->file, val);
		return 0;
	}
	if (!strcmp(sel, "prob")) {
		char *end;

		f->prob = strtod(val, &end);
		if (end != val && !*end && f->prob >= 0 && f->prob <= 1)
			return 0;
	}
	if (!strcmp(sel, "range")) {
		char *dash = strchr(val, '-');

		if (dash) {
			*dash = '\0';
			if (parse_u64(val, &f->range_start) &&
			    parse_u64(dash + 1, &f->range_end) &&
			    f->range_end > f->range_start)
				return 0;
		}
	}
	return fail(err, errlen, spec, "bad selector (every=N, after=N, count=N, file=TEXT, range=A-B, prob=P, seed=S)");
}

int wb_fault_parse(const char *spec, struct wb_fault *out, char *err, size_t errlen)
{
	struct wb_fault f = { .every = 1, .prob = -1, .rng = 0x9e3779b97f4a7c16ull };
	char copy[512], *save = NULL, *tok;
	size_t i;

	if (strlen(spec) >= sizeof(copy))
		return fail(err, errlen, spec, "too long");
	strcpy(copy, spec);
	tok = strtok_r(copy, ":", &save);
	for (i = 0; tok && i < sizeof(ops) / sizeof(ops[0]); i++) {
		if (!strcmp(tok, ops[i]))
			break;
	}
	if (!tok || i == sizeof(ops) / sizeof(ops[0]))
		return fail(err, errlen, spec, "starts with write, read, fsync or alloc");
	f.op = (enum wb_fault_op)i;
	tok = strtok_r(NULL, ":", &save);
	if (!tok)
		return fail(err, errlen, spec, "needs a result: an errno name or short");
	if (strcmp(tok, "short") != 0) {
		for (i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++) {
			if (!strcmp(tok, errnos[i].name))
				f.err = errnos[i].err;
		}
		if (!f.err)
			return fail(err, errlen, spec, "unknown errno name");
	}
	if (f.op == WB_FAULT_ALLOC && f.err != ENOMEM)
		return fail(err, errlen, spec, "an alloc fault is ENOMEM");
	while ((tok = strtok_r(NULL, ":", &save))) {
		int ret = parse_selector(&f, tok, spec, err, errlen);

		if (ret)
			return ret;
	}
	*out = f;
	return 0;
}

void wb_fault_format(const struct wb_fault *f, char *buf, size_t len)
{
	const char *res = "short";
	int n;

	if (!f) {
		snprintf(buf, len, "off");
		return;
	}
	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++) {
		if (errnos[i].err == f->err)
			res = errnos[i].name;
	}
	n = snprintf(buf, len, "%s:%s:every=%llu:after=%llu", ops[f->op], res,
		     (unsigned long long)f->every, (unsigned long long)f->after);
	if (f->count && n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ":count=%llu", (unsigned long long)f->count);
	if (f->file[0] && n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ":file=%s", f->file);
	if (f->range_end && n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ":range=%llu-%llu",
			      (unsigned long long)f->range_start, (unsigned long long)f->range_end);
	/* Exactly what was given, so a spec read back and written again is the same fault. */
	if (f->prob >= 0 && n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ":prob=%.17g", f->prob);
	if (f->seed_given && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, ":seed=%llu", (unsigned long long)f->seed);
}

static uint64_t fault_rand(struct wb_fault *f)
{
	f->rng ^= f->rng << 13;
	f->rng ^= f->rng >> 7;
	f->rng ^= f->rng << 17;
	return f->rng;
}

bool wb_fault_fires(struct wb_fault *f, const char *name, enum wb_fault_op op,
		    off_t off, size_t len)
{
	if (f->op != op)
		return false;
	if (f->range_end && (off >= (off_t)f->range_end ||
			     off + (off_t)len <= (off_t)f->range_start))
		return false;
	if (f->file[0] && !strstr(name, f->file))
		return false;
	f->calls++;
	if (f->calls <= f->after || (f->calls - f->after - 1) % f->every)
		return false;
	if (f->count && f->fired >= f->count)
		return false;
	if (f->prob >= 0 && (double)(fault_rand(f) >> 11) / (double)(1ull << 53) >= f->prob)
		return false;
	f->fired++;
	return true;
}

ssize_t wb_fault_result(const struct wb_fault *f, ssize_t res, size_t align)
{
	ssize_t half;

	if (f->err)
		return -f->err;
	half = res / 2 - (res / 2) % (ssize_t)align;
	return half > 0 ? half : res;
}

ssize_t wb_fault_apply(struct wb_ctx *ctx, void (*name)(void *arg, char *buf, size_t len),
		       void *arg, enum wb_fault_op op, off_t off, size_t len, ssize_t res,
		       size_t align)
{
	ssize_t out = res;

	if (!atomic_load(&ctx->fault_on))
		return res;
	pthread_mutex_lock(&ctx->fault_lock);
	if (ctx->fault) {
		char file[4096] = "";

		if (ctx->fault->file[0])
			name(arg, file, sizeof(file));
		if (wb_fault_fires(ctx->fault, file, op, off, len)) {
			out = wb_fault_result(ctx->fault, res, align);
			atomic_fetch_add(&ctx->faults_injected, 1);
		}
	}
	pthread_mutex_unlock(&ctx->fault_lock);
	return out;
}
