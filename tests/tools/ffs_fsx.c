// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ffs_fsx - a file-system exerciser in the spirit of xfstests' fsx (which
 * Debian does not package): random writes, reads, truncates, punches, zero
 * ranges, in-file copies, fsyncs and reopens on one file, each checked
 * against a shadow copy in memory.  -Z opens with O_DIRECT and keeps every
 * read and write block aligned, as fsx -Z does.
 *
 * usage: ffs_fsx [-Z] [-N ops] [-S seed] [-l maxlen] [-b maxsize] FILE
 * Exit 0 when every check passed; 1 with the seed, the op number and the
 * first differing offset otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALIGN 4096

struct fsx {
	const char *path;
	bool direct;
	size_t max_len;
	size_t max_size;
	unsigned long long seed;
	long op;
	int fd;
	unsigned char *shadow;
	size_t size;
	unsigned char *buf;	/* ALIGN-aligned, max_size + ALIGN */
	uint64_t rng;
};

static uint64_t rnd(struct fsx *x)
{
	x->rng ^= x->rng << 13;
	x->rng ^= x->rng >> 7;
	x->rng ^= x->rng << 17;
	return x->rng;
}

static size_t below(struct fsx *x, size_t n)
{
	return n ? rnd(x) % n : 0;
}

static void fail(struct fsx *x, const char *what, int err)
{
	fprintf(stderr, "ffs_fsx: %s: seed %llu op %ld: %s%s%s\n", x->path,
		x->seed, x->op, what, err ? ": " : "", err ? strerror(err) : "");
	exit(1);
}

static void reopen(struct fsx *x)
{
	if (x->fd >= 0 && close(x->fd) < 0)
		fail(x, "close", errno);
	x->fd = open(x->path, O_RDWR | O_CREAT | (x->direct ? O_DIRECT : 0), 0644);
	if (x->fd < 0)
		fail(x, "open", errno);
}

static void grow(struct fsx *x, size_t end)
{
	if (end > x->size)
		memset(x->shadow + x->size, 0, end - x->size);
	x->size = end;
}

/* Pick [off, off + len) inside max_size, aligned under -Z. */
static void pick(struct fsx *x, size_t *off, size_t *len)
{
	*off = below(x, x->max_size);
	*len = 1 + below(x, x->max_len);
	if (x->direct) {
		*off &= ~(size_t)(ALIGN - 1);
		*len = (*len + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	}
	if (*off + *len > x->max_size)
		*len = x->max_size - *off;
}

static void check_read(struct fsx *x, size_t off, size_t len)
{
	size_t want = off >= x->size ? 0 : (off + len > x->size ? x->size - off : len);
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(x->fd, x->buf + done, len - done, (off_t)(off + done));

		if (n < 0)
			fail(x, "read", errno);
		if (n == 0)
			break;
		done += n;
		if (x->direct && done % ALIGN)
			break;	/* short direct read: end of file */
	}
	if (done != want) {
		fprintf(stderr, "read at %zu len %zu: got %zu bytes, want %zu\n",
			off, len, done, want);
		fail(x, "short or long read", 0);
	}
	for (size_t i = 0; i < want; i++) {
		if (x->buf[i] != x->shadow[off + i]) {
			fprintf(stderr, "byte %zu: got %#x, want %#x\n", off + i,
				x->buf[i], x->shadow[off + i]);
			fail(x, "data mismatch", 0);
		}
	}
}

static void do_write(struct fsx *x, size_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		x->buf[i] = (unsigned char)(rnd(x) | 1);
	if (pwrite(x->fd, x->buf, len, (off_t)off) != (ssize_t)len)
		fail(x, "write", errno);
	grow(x, off + len > x->size ? off + len : x->size);
	memcpy(x->shadow + off, x->buf, len);
}

static void do_truncate(struct fsx *x)
{
	size_t size = below(x, x->max_size);

	if (ftruncate(x->fd, (off_t)size) < 0)
		fail(x, "truncate", errno);
	grow(x, size);
}

static void do_fallocate(struct fsx *x, size_t off, size_t len)
{
	bool punch = rnd(x) & 1;
	int mode = punch ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
			 : FALLOC_FL_ZERO_RANGE;

	if (len == 0)
		return;
	if (fallocate(x->fd, mode, (off_t)off, (off_t)len) < 0)
		fail(x, punch ? "punch hole" : "zero range", errno);
	if (!punch)
		grow(x, off + len > x->size ? off + len : x->size);
	if (off < x->size)
		memset(x->shadow + off, 0,
		       (off + len > x->size ? x->size : off + len) - off);
}

static void do_copy(struct fsx *x, size_t off, size_t len)
{
	size_t dst = below(x, x->max_size - len);
	loff_t in = (loff_t)off, out;
	size_t avail = off >= x->size ? 0 : (off + len > x->size ? x->size - off : len);
	ssize_t n;

	if (x->direct)
		dst &= ~(size_t)(ALIGN - 1);
	if ((dst < off ? off - dst : dst - off) < len || avail == 0)
		return;
	if (x->direct && avail % ALIGN)
		return;	/* the kernel's O_DIRECT splice fallback wants whole blocks */
	out = (loff_t)dst;
	n = copy_file_range(x->fd, &in, x->fd, &out, avail, 0);
	if (n < 0)
		fail(x, "copy_file_range", errno);
	if ((size_t)n != avail)
		fail(x, "short copy_file_range", 0);
	grow(x, dst + avail > x->size ? dst + avail : x->size);
	memmove(x->shadow + dst, x->shadow + off, avail);
}

static void step(struct fsx *x)
{
	size_t off, len;

	pick(x, &off, &len);
	switch (below(x, 12)) {
	case 0: case 1: case 2: case 3:
		do_write(x, off, len);
		break;
	case 4: case 5: case 6:
		check_read(x, off, len);
		break;
	case 7:
		do_truncate(x);
		break;
	case 8:
		do_fallocate(x, off, len);
		break;
	case 9:
		do_copy(x, off, len);
		break;
	case 10:
		if ((rnd(x) & 1 ? fsync(x->fd) : fdatasync(x->fd)) < 0)
			fail(x, "fsync", errno);
		break;
	default:
		reopen(x);
		break;
	}
}

static void check_all(struct fsx *x)
{
	off_t end = lseek(x->fd, 0, SEEK_END);

	if (end != (off_t)x->size) {
		fprintf(stderr, "size %jd, want %zu\n", (intmax_t)end, x->size);
		fail(x, "file size", 0);
	}
	check_read(x, 0, (x->max_size + ALIGN - 1) & ~(size_t)(ALIGN - 1));
}

int main(int argc, char **argv)
{
	struct fsx x = { .max_len = 65536, .max_size = 1 << 20, .seed = 1, .fd = -1 };
	long ops = 10000;
	int c;

	while ((c = getopt(argc, argv, "ZN:S:l:b:")) != -1) {
		switch (c) {
		case 'Z': x.direct = true; break;
		case 'N': ops = strtol(optarg, NULL, 0); break;
		case 'S': x.seed = strtoull(optarg, NULL, 0); break;
		case 'l': x.max_len = strtoul(optarg, NULL, 0); break;
		case 'b': x.max_size = strtoul(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: ffs_fsx [-Z] [-N ops] [-S seed] [-l maxlen] [-b maxsize] FILE\n");
			return 2;
		}
	}
	if (optind != argc - 1 || x.max_len == 0 || x.max_size < 2 * (size_t)ALIGN ||
	    x.max_len > x.max_size) {
		fprintf(stderr, "ffs_fsx: need one FILE, 0 < maxlen <= maxsize, maxsize >= 8192\n");
		return 2;
	}
	x.path = argv[optind];
	x.rng = x.seed * 0x9e3779b97f4a7c15ull + 1;
	x.shadow = calloc(1, x.max_size + ALIGN);
	if (posix_memalign((void **)&x.buf, ALIGN, x.max_size + ALIGN) || !x.shadow)
		fail(&x, "out of memory", ENOMEM);
	unlink(x.path);
	reopen(&x);
	for (x.op = 0; x.op < ops; x.op++) {
		step(&x);
		if (x.op % 256 == 255)
			check_all(&x);
	}
	check_all(&x);
	if (close(x.fd) < 0)
		fail(&x, "close", errno);
	printf("ffs_fsx: %s: %ld ops, seed %llu%s: ok\n", x.path, ops, x.seed,
	       x.direct ? ", O_DIRECT" : "");
	free(x.shadow);
	free(x.buf);
	return 0;
}
