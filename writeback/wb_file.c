// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wb_file.c - per-backing-file data path, first step: write-through.
 *
 * Every call maps onto one or a few syscalls on the backing descriptor.
 * Short transfers are resumed until done, so callers only ever see whole
 * results or an errno.  The descriptor may be swapped for one with wider
 * access (wb_file_upgrade) with dup3(), which replaces the descriptor
 * number atomically: a pread in flight on another thread keeps working.
 */
#include "writeback.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* Largest chunk wb_copy_range moves per read/write pair. */
#define WB_COPY_CHUNK (1u << 20)

struct wb_file {
	int fd;			/* immutable number; its open file may be replaced by upgrade */
	_Atomic int access;	/* enum wb_access of the open file behind fd */
};

int wb_file_alloc(int fd, enum wb_access access, struct wb_file **out)
{
	struct wb_file *wbf = calloc(1, sizeof(*wbf));

	if (!wbf) {
		close(fd);
		return -ENOMEM;
	}
	wbf->fd = fd;
	atomic_init(&wbf->access, access);
	*out = wbf;
	return 0;
}

int wb_file_upgrade(struct wb_file *wbf, int fd, enum wb_access access)
{
	int ret = 0;

	if (dup3(fd, wbf->fd, O_CLOEXEC) < 0)
		ret = -errno;
	else
		atomic_store(&wbf->access, access);
	close(fd);
	return ret;
}

enum wb_access wb_file_access(const struct wb_file *wbf)
{
	return atomic_load(&wbf->access);
}

int wb_file_free(struct wb_file *wbf)
{
	int ret = 0;

	if (close(wbf->fd) < 0)
		ret = -errno;
	free(wbf);
	return ret;
}

ssize_t wb_read(struct wb_file *wbf, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(wbf->fd, (char *)buf + done, len - done,
				  off + (off_t)done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return done ? (ssize_t)done : -errno;
		}
		if (n == 0)
			break;
		done += n;
	}
	return done;
}

ssize_t wb_write(struct wb_file *wbf, const void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(wbf->fd, (const char *)buf + done,
				   len - done, off + (off_t)done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		done += n;
	}
	return len;
}

int wb_fsync(struct wb_file *wbf, bool datasync)
{
	int ret = datasync ? fdatasync(wbf->fd) : fsync(wbf->fd);

	return ret < 0 ? -errno : 0;
}

int wb_truncate(struct wb_file *wbf, off_t size)
{
	if (size < 0)
		return -EINVAL;
	return ftruncate(wbf->fd, size) < 0 ? -errno : 0;
}

int wb_fallocate(struct wb_file *wbf, int mode, off_t off, off_t len)
{
	const int known = FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE |
			  FALLOC_FL_ZERO_RANGE;

	if (mode & ~known)
		return -EOPNOTSUPP;
	if (off < 0 || len <= 0)
		return -EINVAL;
	if (len > INT64_MAX - off)
		return -EFBIG;
	return fallocate(wbf->fd, mode, off, len) < 0 ? -errno : 0;
}

off_t wb_lseek(struct wb_file *wbf, off_t off, int whence)
{
	off_t ret;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	ret = lseek(wbf->fd, off, whence);
	return ret < 0 ? -errno : ret;
}

static bool ranges_overlap(off_t a, off_t b, size_t len)
{
	return a < b ? b - a < (off_t)len : a - b < (off_t)len;
}

ssize_t wb_copy_range(struct wb_file *src, off_t src_off,
		      struct wb_file *dst, off_t dst_off, size_t len)
{
	size_t chunk = len < WB_COPY_CHUNK ? len : WB_COPY_CHUNK;
	size_t done = 0;
	char *buf;

	if (src_off < 0 || dst_off < 0)
		return -EINVAL;
	if (len > (size_t)(INT64_MAX - src_off) ||
	    len > (size_t)(INT64_MAX - dst_off))
		return -EFBIG;
	if (src == dst && ranges_overlap(src_off, dst_off, len))
		return -EINVAL;
	if (len == 0)
		return 0;
	buf = malloc(chunk);
	if (!buf)
		return -ENOMEM;
	while (done < len) {
		size_t want = len - done < chunk ? len - done : chunk;
		ssize_t got = wb_read(src, buf, want, src_off + (off_t)done);
		ssize_t put;

		if (got <= 0) {
			if (got < 0 && done == 0)
				done = (size_t)got;
			break;
		}
		put = wb_write(dst, buf, got, dst_off + (off_t)done);
		if (put < 0) {
			if (done == 0)
				done = (size_t)put;
			break;
		}
		done += got;
		if ((size_t)got < want)
			break;
	}
	free(buf);
	return (ssize_t)done;
}
