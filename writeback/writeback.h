/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * writeback.h - the data path below the FUSE layer.
 *
 * fusefs hands every read, write, fsync, truncate, fallocate, lseek and
 * copy of file data to this interface and never touches a backing data
 * descriptor itself.  One struct wb_file exists per backing file that is
 * open through the mount (or otherwise needs data I/O), shared by all of its
 * open file descriptions.
 *
 * This is the first step of the design in DESIGN.md: every call goes
 * straight to the backing file (pread/pwrite, write-through).  The
 * blockstate cache (issue 2/6) and the flushers (3/6) slot in behind these
 * same calls; callers must not assume write-through.
 *
 * Conventions: functions return 0 or a byte count on success and -errno on
 * failure; they never leave errno as their only error report.  Ranges are
 * half-open, [off, off + len).
 */
#ifndef FOLIOFS_WRITEBACK_H
#define FOLIOFS_WRITEBACK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct wb_file;

/* Access a backing descriptor was opened with. */
enum wb_access {
	WB_READ = 1,
	WB_WRITE = 2,
	WB_RDWR = WB_READ | WB_WRITE,
};

/*
 * wb_file_alloc - wrap an open backing descriptor.
 * Takes ownership of @fd (closed by wb_file_free, also on failure).
 * Context: any thread; allocates.
 */
int wb_file_alloc(int fd, enum wb_access access, struct wb_file **out);

/*
 * wb_file_upgrade - give @wbf a descriptor with wider access.
 * @fd must refer to the same backing file; it replaces the current one
 * atomically (readers in flight keep working) and is consumed.
 */
int wb_file_upgrade(struct wb_file *wbf, int fd, enum wb_access access);

enum wb_access wb_file_access(const struct wb_file *wbf);

/*
 * wb_file_free - write back what is dirty and close the backing file.
 * Returns the first error seen; the structure is freed either way.
 */
int wb_file_free(struct wb_file *wbf);

/* Read up to @len bytes at @off; short only at end of file. */
ssize_t wb_read(struct wb_file *wbf, void *buf, size_t len, off_t off);

/* Write all @len bytes at @off; returns @len or -errno (nothing partial). */
ssize_t wb_write(struct wb_file *wbf, const void *buf, size_t len, off_t off);

/* Make every byte written so far durable in the backing store. */
int wb_fsync(struct wb_file *wbf, bool datasync);

/* Set the file size to @size (shrink or extend with zeros). */
int wb_truncate(struct wb_file *wbf, off_t size);

/*
 * Allocate, punch (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) or zero
 * (FALLOC_FL_ZERO_RANGE) [off, off + len).  Other modes: -EOPNOTSUPP.
 */
int wb_fallocate(struct wb_file *wbf, int mode, off_t off, off_t len);

/* SEEK_DATA / SEEK_HOLE from @off; returns the offset or -errno. */
off_t wb_lseek(struct wb_file *wbf, off_t off, int whence);

/*
 * Copy [src_off, src_off + len) of @src to @dst at @dst_off through the
 * read and write paths above; stops early at the end of @src.  Overlapping
 * ranges of one file are -EINVAL (as copy_file_range(2)).
 */
ssize_t wb_copy_range(struct wb_file *src, off_t src_off,
		      struct wb_file *dst, off_t dst_off, size_t len);

#endif /* FOLIOFS_WRITEBACK_H */
