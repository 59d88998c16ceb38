// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * trace.c - reading and writing traces (format in trace.h), for the
 * daemon's recorder and for foliofs-sim alike.
 */
#include "trace.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const op_names[TRACE_OP_END] = {
	[TRACE_OP_WRITE] = "write",
	[TRACE_OP_READ] = "read",
	[TRACE_OP_FSYNC] = "fsync",
	[TRACE_OP_FDATASYNC] = "fdatasync",
	[TRACE_OP_TRUNCATE] = "truncate",
	[TRACE_OP_FALLOCATE] = "fallocate",
	[TRACE_OP_CREATE] = "create",
	[TRACE_OP_UNLINK] = "unlink",
	[TRACE_OP_RENAME] = "rename",
};

const char *trace_op_name(unsigned int op)
{
	return op < TRACE_OP_END ? op_names[op] : NULL;
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static void put32(unsigned char *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static void put64(unsigned char *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

static int bad(char *err, size_t errlen, const char *path, uint64_t off, const char *what)
{
	snprintf(err, errlen, "%s: corrupt trace at byte offset %llu: %s", path,
		 (unsigned long long)off, what);
	return -EINVAL;
}

size_t trace_rec_size(unsigned int version)
{
	switch (version) {
	case 1:
		return TRACE_V1_REC_SIZE;
	case 2:
		return TRACE_REC_SIZE;
	default:
		return 0;
	}
}

/* A header of a version this reader knows: 0 (its version in *@version), or -EINVAL. */
static int check_header(const unsigned char *h, size_t len, const char *path,
			unsigned int *version, char *err, size_t errlen)
{
	char what[96];
	size_t rec_size;

	if (len < TRACE_HDR_SIZE) {
		snprintf(what, sizeof(what), "truncated header (%zu of %u bytes)", len,
			 TRACE_HDR_SIZE);
		return bad(err, errlen, path, len, what);
	}
	if (memcmp(h, TRACE_MAGIC, 8) != 0)
		return bad(err, errlen, path, 0, "not a foliofs trace (bad magic)");
	*version = get32(h + 8);
	rec_size = trace_rec_size(*version);
	if (!rec_size) {
		snprintf(what, sizeof(what), "version %u (this reader knows 1 to %u)", *version,
			 TRACE_VERSION);
		return bad(err, errlen, path, 8, what);
	}
	if (get32(h + 12) != rec_size) {
		snprintf(what, sizeof(what), "record size %u (version %u has %zu)", get32(h + 12),
			 *version, rec_size);
		return bad(err, errlen, path, 12, what);
	}
	if (get64(h + 16) || get64(h + 24))
		return bad(err, errlen, path, get64(h + 16) ? 16 : 24, "reserved bytes not 0");
	return 0;
}

static int decode(const unsigned char *p, unsigned int version, uint64_t off,
		  struct trace_rec *r, const char *path, char *err, size_t errlen)
{
	char what[64];

	*r = (struct trace_rec){
		.time_ns = get64(p), .dur_ns = get64(p + 8),
		.pid = get32(p + 16), .file = get32(p + 20), .op = p[24],
		.flags = get32(p + 28), .offset = get64(p + 32), .length = get64(p + 40),
		.open = version >= 2 ? get64(p + 48) : 0,
	};
	if (!trace_op_name(r->op)) {
		snprintf(what, sizeof(what), "unknown op %u", r->op);
		return bad(err, errlen, path, off + 24, what);
	}
	if (p[25] || p[26] || p[27])
		return bad(err, errlen, path, off + 25, "reserved bytes not 0");
	return 0;
}

int trace_load(const char *path, struct trace_rec **recs, size_t *nr,
		   unsigned int *version, char *err, size_t errlen)
{
	unsigned char *buf = NULL;
	struct trace_rec *out = NULL;
	size_t len = 0, n, rec_size;
	unsigned int ver = 0;
	struct stat st;
	FILE *f = fopen(path, "rb");
	int ret;

	if (!f) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	if (fstat(fileno(f), &st) < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		snprintf(err, errlen, "%s: not a regular file", path);
		goto out;
	}
	len = (size_t)st.st_size;
	buf = malloc(len ? len : 1);
	if (!buf || fread(buf, 1, len, f) != len) {
		ret = buf ? -EIO : -ENOMEM;
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(-ret));
		goto out;
	}
	ret = check_header(buf, len, path, &ver, err, errlen);
	if (ret)
		goto out;
	rec_size = trace_rec_size(ver);
	n = (len - TRACE_HDR_SIZE) / rec_size;
	if ((len - TRACE_HDR_SIZE) % rec_size) {
		uint64_t at = TRACE_HDR_SIZE + (uint64_t)n * rec_size;
		char what[96];

		snprintf(what, sizeof(what), "truncated record %zu (%llu of %zu bytes)", n,
			 (unsigned long long)(len - at), rec_size);
		ret = bad(err, errlen, path, at, what);
		goto out;
	}
	out = malloc((n ? n : 1) * sizeof(*out));
	if (!out) {
		ret = -ENOMEM;
		snprintf(err, errlen, "%s: out of memory for %zu records", path, n);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t at = TRACE_HDR_SIZE + (uint64_t)i * rec_size;

		ret = decode(buf + at, ver, at, &out[i], path, err, errlen);
		if (ret)
			goto out;
	}
	*recs = out;
	*nr = n;
	if (version)
		*version = ver;
	out = NULL;
out:
	free(out);
	free(buf);
	fclose(f);
	return ret;
}

void trace_encode_header_v(unsigned char h[TRACE_HDR_SIZE], unsigned int version)
{
	memset(h, 0, TRACE_HDR_SIZE);
	/* The magic has no terminating NUL in the file. */
	for (int i = 0; i < 8; i++)
		h[i] = (unsigned char)TRACE_MAGIC[i];
	put32(h + 8, version);
	put32(h + 12, (uint32_t)trace_rec_size(version));
}

void trace_encode_header(unsigned char h[TRACE_HDR_SIZE])
{
	trace_encode_header_v(h, TRACE_VERSION);
}

void trace_encode_rec_v(unsigned char *p, const struct trace_rec *r, unsigned int version)
{
	memset(p, 0, trace_rec_size(version));
	put64(p, r->time_ns);
	put64(p + 8, r->dur_ns);
	put32(p + 16, r->pid);
	put32(p + 20, r->file);
	p[24] = r->op;
	put32(p + 28, r->flags);
	put64(p + 32, r->offset);
	put64(p + 40, r->length);
	if (version >= 2)
		put64(p + 48, r->open);
}

void trace_encode_rec(unsigned char p[TRACE_REC_SIZE], const struct trace_rec *r)
{
	trace_encode_rec_v(p, r, TRACE_VERSION);
}

uint64_t trace_rec_time(const unsigned char p[TRACE_REC_SIZE])
{
	return get64(p);
}

int trace_write_header(FILE *f)
{
	unsigned char h[TRACE_HDR_SIZE];

	trace_encode_header(h);
	return fwrite(h, sizeof(h), 1, f) == 1 ? 0 : -EIO;
}

int trace_write_rec(FILE *f, const struct trace_rec *r)
{
	unsigned char p[TRACE_REC_SIZE];

	trace_encode_rec(p, r);
	return fwrite(p, sizeof(p), 1, f) == 1 ? 0 : -EIO;
}
