// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * trace.c - reading and writing traces (format in trace.h), for the
 * daemon's recorder and for foliofs-sim alike.
 */
#include "trace.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
	[TRACE_OP_DEADLINE] = "deadline",
	[TRACE_OP_PACE] = "pace",
	[TRACE_OP_SYNC_RANGE] = "sync_range",
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

static int sys_err(char *err, size_t errlen, const char *path, const char *what, int ret)
{
	snprintf(err, errlen, "%s: %s%s", path, what, strerror(-ret));
	return ret;
}

/* Up to @len bytes at the file's position into @p, short only at its end: the count or -errno. */
static ssize_t read_full(int fd, unsigned char *p, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, p + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int trace_reader_open(struct trace_reader *rd, const char *path, char *err, size_t errlen)
{
	unsigned char h[TRACE_HDR_SIZE];
	struct stat st;
	uint64_t body;
	ssize_t got;
	int ret;

	*rd = (struct trace_reader){ .path = path, .fd = open(path, O_RDONLY | O_CLOEXEC) };
	if (rd->fd < 0)
		return sys_err(err, errlen, path, "", -errno);
	if (fstat(rd->fd, &st) < 0) {
		ret = sys_err(err, errlen, path, "", -errno);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		snprintf(err, errlen, "%s: not a regular file", path);
		goto out;
	}
	got = read_full(rd->fd, h, sizeof(h));
	if (got < 0) {
		ret = sys_err(err, errlen, path, "cannot read: ", (int)got);
		goto out;
	}
	ret = check_header(h, (size_t)got, path, &rd->version, err, errlen);
	if (ret)
		goto out;
	rd->rec_size = trace_rec_size(rd->version);
	body = (uint64_t)st.st_size - TRACE_HDR_SIZE;
	rd->nr = body / rd->rec_size;
	if (body % rd->rec_size) {
		uint64_t at = TRACE_HDR_SIZE + rd->nr * rd->rec_size;
		char what[96];

		snprintf(what, sizeof(what), "truncated record %llu (%llu of %zu bytes)",
			 (unsigned long long)rd->nr,
			 (unsigned long long)((uint64_t)st.st_size - at), rd->rec_size);
		ret = bad(err, errlen, path, at, what);
		goto out;
	}
	rd->buf = malloc(TRACE_READ_BUF);
	if (!rd->buf) {
		ret = -ENOMEM;
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	return 0;
out:
	close(rd->fd);
	rd->fd = -1;
	return ret;
}

/* More bytes into the buffer, whole records: 0, or -errno (-EIO: the file shrank). */
static int refill(struct trace_reader *rd, char *err, size_t errlen)
{
	uint64_t left = (rd->nr - rd->next) * rd->rec_size;
	size_t want = TRACE_READ_BUF / rd->rec_size * rd->rec_size;
	ssize_t got;

	want = left < want ? (size_t)left : want;
	got = read_full(rd->fd, rd->buf, want);
	if (got < 0)
		return sys_err(err, errlen, rd->path, "cannot read: ", (int)got);
	if ((size_t)got != want) {
		snprintf(err, errlen, "%s: cannot read: the trace got shorter while read "
			 "(record %llu)", rd->path, (unsigned long long)rd->next);
		return -EIO;
	}
	rd->pos = 0;
	rd->len = want;
	return 0;
}

int trace_reader_next(struct trace_reader *rd, struct trace_rec *rec, char *err, size_t errlen)
{
	uint64_t at = TRACE_HDR_SIZE + rd->next * rd->rec_size;
	int ret;

	if (rd->next == rd->nr)
		return 0;
	if (rd->pos == rd->len) {
		ret = refill(rd, err, errlen);
		if (ret)
			return ret;
	}
	ret = decode(rd->buf + rd->pos, rd->version, at, rec, rd->path, err, errlen);
	if (ret)
		return ret;
	rd->pos += rd->rec_size;
	rd->next++;
	return 1;
}

int trace_reader_seek(struct trace_reader *rd, uint64_t index, char *err, size_t errlen)
{
	if (index > rd->nr) {
		snprintf(err, errlen, "%s: no record %llu (%llu records)", rd->path,
			 (unsigned long long)index, (unsigned long long)rd->nr);
		return -EINVAL;
	}
	if (lseek(rd->fd, (off_t)(TRACE_HDR_SIZE + index * rd->rec_size), SEEK_SET) < 0)
		return sys_err(err, errlen, rd->path, "cannot seek: ", -errno);
	rd->next = index;
	rd->pos = rd->len = 0;
	return 0;
}

int trace_reader_rewind(struct trace_reader *rd, char *err, size_t errlen)
{
	return trace_reader_seek(rd, 0, err, errlen);
}

void trace_reader_close(struct trace_reader *rd)
{
	if (rd->fd >= 0)
		close(rd->fd);
	rd->fd = -1;
	free(rd->buf);
	rd->buf = NULL;
}

int trace_load(const char *path, struct trace_rec **recs, size_t *nr,
		   unsigned int *version, char *err, size_t errlen)
{
	struct trace_reader rd;
	struct trace_rec *out;
	int ret = trace_reader_open(&rd, path, err, errlen);

	if (ret)
		return ret;
	out = malloc((rd.nr ? rd.nr : 1) * sizeof(*out));
	if (!out) {
		snprintf(err, errlen, "%s: out of memory for %llu records", path,
			 (unsigned long long)rd.nr);
		trace_reader_close(&rd);
		return -ENOMEM;
	}
	for (size_t i = 0; i < rd.nr; i++) {
		ret = trace_reader_next(&rd, &out[i], err, errlen);
		if (ret < 0)
			break;
		ret = 0;
	}
	if (!ret) {
		*recs = out;
		*nr = (size_t)rd.nr;
		if (version)
			*version = rd.version;
		out = NULL;
	}
	free(out);
	trace_reader_close(&rd);
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
