// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_trace - the trace reader (trace/trace.c) that foliofs-sim replays
 * and dumps with.
 *
 * Input: the bytes of a trace file, handed to trace_load() through a
 * memfd.  It must return 0 or -EINVAL, and after -EINVAL say why with a
 * byte offset ("at byte offset N") that lies inside the input.  A trace it
 * accepts (version 1 or 2) must encode back, in its own version
 * (trace_encode_header_v/_rec_v), to exactly the input bytes: the
 * reader refuses every byte it would not write, so nothing the reader
 * lets through is lost or invented on a round trip.
 */
#include "trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *why, const char *err)
{
	fprintf(stderr, "fuzz_trace: %s\n  error: \"%s\"\n", why, err);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char hdr[TRACE_HDR_SIZE], rec[TRACE_REC_SIZE];
	struct trace_rec *recs = NULL;
	char path[64], err[512] = "";
	unsigned int version = 0;
	const char *at;
	size_t nr = 0, rec_size;
	int fd, ret;

	fd = memfd_create("fuzz_trace", MFD_CLOEXEC);
	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ret = trace_load(path, &recs, &nr, &version, err, sizeof(err));
	close(fd);
	if (ret == -EINVAL) {
		at = strstr(err, "at byte offset ");
		if (!at)
			fail("refused without a byte offset", err);
		if (strtoull(at + strlen("at byte offset "), NULL, 10) > size)
			fail("the offset is past the end of the input", err);
		return 0;
	}
	if (ret)
		fail("neither accepted nor refused as bad", err);
	rec_size = trace_rec_size(version);
	if (!rec_size)
		fail("accepted a version it does not know", err);
	if (size != TRACE_HDR_SIZE + nr * rec_size)
		fail("accepted a length that is not the header plus whole records", err);
	trace_encode_header_v(hdr, version);
	if (memcmp(hdr, data, TRACE_HDR_SIZE) != 0)
		fail("the header does not encode back to the input", err);
	for (size_t i = 0; i < nr; i++) {
		if (version < 2 && recs[i].open)
			fail("a version 1 record with an open", err);
		trace_encode_rec_v(rec, &recs[i], version);
		if (memcmp(rec, data + TRACE_HDR_SIZE + i * rec_size, rec_size) != 0)
			fail("a record does not encode back to the input", err);
	}
	free(recs);
	return 0;
}
