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
 * lets through is lost or invented on a round trip.  And a trace_reader
 * on it gives the records trace_load() did from wherever it is sought to
 * (the middle record, after reading its first few; the first, after
 * reading to the end; the end), and a seek past the end is refused and
 * leaves the reader where it was.
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

/* Reader @rd gives @recs[@from, @nr) and then its end; @what names the check. */
static void check_from(struct trace_reader *rd, const struct trace_rec *recs, size_t nr,
		       uint64_t from, unsigned int version, const char *what)
{
	unsigned char want[TRACE_REC_SIZE], got[TRACE_REC_SIZE];
	struct trace_rec r;
	char err[512] = "";

	for (uint64_t i = from; i < nr; i++) {
		if (trace_reader_next(rd, &r, err, sizeof(err)) != 1)
			fail(what, err[0] ? err : "the reader ended early");
		trace_encode_rec_v(want, &recs[i], version);
		trace_encode_rec_v(got, &r, version);
		if (memcmp(want, got, trace_rec_size(version)) != 0)
			fail(what, "a record differs");
	}
	if (trace_reader_next(rd, &r, err, sizeof(err)) != 0)
		fail(what, err[0] ? err : "the reader went on past the end");
}

static void seek(struct trace_reader *rd, uint64_t index, const char *what)
{
	char err[512] = "";

	if (trace_reader_seek(rd, index, err, sizeof(err)))
		fail(what, err);
}

/* A reader on @path, sought about as the feed's cursors seek, gives @recs from there. */
static void check_seek(const char *path, const struct trace_rec *recs, size_t nr,
		       unsigned int version)
{
	struct trace_reader rd;
	struct trace_rec r;
	char err[512] = "";

	if (trace_reader_open(&rd, path, err, sizeof(err)))
		fail("trace_reader_open refused what trace_load read", err);
	/* a few records read, so the buffer holds the rest, then the middle */
	for (size_t i = 0; i < nr && i < 3; i++)
		if (trace_reader_next(&rd, &r, err, sizeof(err)) != 1)
			fail("the reader ended early", err);
	seek(&rd, nr / 2, "a seek to the middle after reading");
	if (trace_reader_seek(&rd, nr + 1, err, sizeof(err)) != -EINVAL)
		fail("a seek past the end was not refused", err);
	check_from(&rd, recs, nr, nr / 2, version, "after a seek to the middle");
	seek(&rd, 0, "a seek to the start from the end");
	check_from(&rd, recs, nr, 0, version, "after a seek to the start");
	seek(&rd, nr, "a seek to the end");
	check_from(&rd, recs, nr, nr, version, "after a seek to the end");
	trace_reader_close(&rd);
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
	if (!ret)
		check_seek(path, recs, nr, version);
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
