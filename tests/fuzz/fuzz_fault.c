// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_fault - the fault spec parser and printer (writeback/fault.c).
 *
 * Input: a spec as text (up to the first NUL byte).  wb_fault_parse()
 * must return 0 or -EINVAL, with a message after -EINVAL.  A spec it
 * accepts is printed with wb_fault_format() (what reading .foliofs/fault
 * shows) and the printed spec must parse again into the same fault:
 * every field that selects or shapes a fault equal, the random state
 * included when prob= selects (it decides which calls fail), and
 * printing it once more gives the same text.  The printer is also run
 * on small buffers, which it must truncate without writing past them.
 */
#include "wb_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *why, const char *spec, const char *printed)
{
	fprintf(stderr, "fuzz_fault: %s\n  spec:    \"%s\"\n  printed: \"%s\"\n", why, spec,
		printed);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wb_fault f, g;
	char *spec = malloc(size + 1), err[256], out[1024], again[1024];
	int ret;

	if (!spec)
		abort();
	memcpy(spec, data, size);
	spec[size] = '\0';
	err[0] = '\0';
	ret = wb_fault_parse(spec, &f, err, sizeof(err));
	if (ret != 0 && ret != -EINVAL)
		fail("returned neither 0 nor -EINVAL", spec, "");
	if (ret) {
		if (!err[0])
			fail("refused without a message", spec, "");
		free(spec);
		return 0;
	}
	wb_fault_format(&f, out, sizeof(out));
	if (strlen(out) >= sizeof(out) - 1)
		fail("printed spec does not fit in 1 KiB", spec, out);
	if (wb_fault_parse(out, &g, err, sizeof(err)))
		fail(err, spec, out);
	if (f.op != g.op || f.err != g.err || f.every != g.every || f.after != g.after ||
	    f.count != g.count || strcmp(f.file, g.file) != 0 ||
	    f.range_start != g.range_start || f.range_end != g.range_end)
		fail("printed spec parses into another fault", spec, out);
	if ((f.prob >= 0) != (g.prob >= 0) || (f.prob >= 0 && f.prob != g.prob))
		fail("printed spec has another probability", spec, out);
	if (f.prob >= 0 && f.rng != g.rng)
		fail("printed spec has another seed", spec, out);
	wb_fault_format(&g, again, sizeof(again));
	if (strcmp(out, again) != 0)
		fail("printing is not stable", spec, again);

	/* Truncation: the result is a prefix of the full text. */
	for (size_t len = 1; len <= 64; len += 7) {
		char *small = malloc(len);

		if (!small)
			abort();
		wb_fault_format(&f, small, len);
		if (strlen(small) != (strlen(out) < len ? strlen(out) : len - 1) ||
		    strncmp(small, out, strlen(small)) != 0)
			fail("truncated print is not a prefix", spec, small);
		free(small);
	}
	free(spec);
	return 0;
}
