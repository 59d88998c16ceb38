// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ctl.c - the control directory MOUNTPOINT/.foliofs.
 *
 * It is found by lookup but not listed by readdir of the root, so a tool
 * that insists on an empty directory (initdb) still sees one.  The name is
 * reserved: a backing entry called .foliofs at the root is hidden.
 *
 *   .foliofs/stats   read-only, "name value" lines like /proc/vmstat,
 *                    made when the file is opened (each open is one
 *                    snapshot; counters are exact, the set is not atomic)
 *   .foliofs/fault   the fault injected into backing I/O (writeback.h):
 *                    read it to see it, write a spec to set it ("off" to
 *                    clear); a bad spec fails with EINVAL and changes
 *                    nothing.  Writable by the mounting user only.
 */
#include "fusefs.h"
#include "writeback.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* st_ino of the control files: far from real inode numbers. */
#define CTL_INO_BASE 0x7f0f0f0f00000000ull
#define CTL_STATS_MAX 8192

static struct ffs_inode ctl_dir = { .fd = -1, .type = S_IFDIR, .ctl = FFS_CTL_DIR };
static struct ffs_inode ctl_stats = { .fd = -1, .type = S_IFREG, .ctl = FFS_CTL_STATS };
static struct ffs_inode ctl_fault = { .fd = -1, .type = S_IFREG, .ctl = FFS_CTL_FAULT };

struct ctl_buf {
	struct ffs_handle h;	/* first: teardown frees through it */
	size_t len;
	char data[];
};

bool ffs_ctl_hides(const struct ffs_data *fs, const struct ffs_inode *dir,
		   const char *name)
{
	return dir == &fs->root && !strcmp(name, FFS_CTL_NAME);
}

void ffs_ctl_getattr(struct ffs_data *fs, struct ffs_inode *inode, struct stat *st)
{
	static struct timespec mounted;

	if (!mounted.tv_sec)
		clock_gettime(CLOCK_REALTIME, &mounted);
	(void)fs;
	memset(st, 0, sizeof(*st));
	st->st_ino = CTL_INO_BASE + inode->ctl;
	st->st_mode = inode->type | (inode->type == S_IFDIR ? 0555 :
				     inode->ctl == FFS_CTL_FAULT ? 0644 : 0444);
	st->st_nlink = inode->type == S_IFDIR ? 2 : 1;
	st->st_uid = geteuid();
	st->st_gid = getegid();
	st->st_blksize = 4096;
	st->st_atim = st->st_mtim = st->st_ctim = mounted;
}

static void ctl_entry(struct ffs_data *fs, struct ffs_inode *inode,
		      struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = (uintptr_t)inode;
	e->attr_timeout = fs->cfg->attr_timeout;
	e->entry_timeout = fs->cfg->attr_timeout;
	ffs_ctl_getattr(fs, inode, &e->attr);
}

bool ffs_ctl_lookup(struct ffs_data *fs, struct ffs_inode *parent,
		    const char *name, struct fuse_entry_param *e, int *err)
{
	*err = 0;
	if (parent == &fs->root && !strcmp(name, FFS_CTL_NAME)) {
		ctl_entry(fs, &ctl_dir, e);
		return true;
	}
	switch (parent->ctl) {
	case FFS_CTL_NONE:
		return false;
	case FFS_CTL_DIR:
		if (!strcmp(name, "stats"))
			ctl_entry(fs, &ctl_stats, e);
		else if (!strcmp(name, "fault"))
			ctl_entry(fs, &ctl_fault, e);
		else if (!strcmp(name, "."))
			ctl_entry(fs, &ctl_dir, e);
		else if (!strcmp(name, "..")) {
			memset(e, 0, sizeof(*e));
			e->ino = FUSE_ROOT_ID;
			*err = -ENOENT;	/* the kernel resolves ".." itself */
		} else
			*err = -ENOENT;
		return true;
	default:
		*err = -ENOTDIR;
		return true;
	}
}

int ffs_ctl_open(struct ffs_data *fs, struct ffs_inode *inode, struct fuse_file_info *fi)
{
	struct ctl_buf *buf;

	if (inode->ctl == FFS_CTL_DIR)
		return -EISDIR;
	if (inode->ctl == FFS_CTL_STATS &&
	    ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)))
		return -EACCES;
	buf = calloc(1, sizeof(*buf) + CTL_STATS_MAX);
	if (!buf)
		return -ENOMEM;
	if (inode->ctl == FFS_CTL_STATS) {
		size_t used = wb_ctx_stats(fs->wb, buf->data, CTL_STATS_MAX);
		size_t ninodes;
		int n;

		pthread_mutex_lock(&fs->itable_lock);
		ninodes = fs->ninodes;
		pthread_mutex_unlock(&fs->itable_lock);
		n = snprintf(buf->data + used, CTL_STATS_MAX - used,
			     "inodes %zu\n" "kept_inodes %llu\n", ninodes,
			     (unsigned long long)atomic_load(&fs->kept_inodes));
		buf->len = used + (n > 0 && (size_t)n < CTL_STATS_MAX - used ? (size_t)n : 0);
	} else if ((fi->flags & O_ACCMODE) == O_RDONLY) {
		wb_ctx_get_fault(fs->wb, buf->data, CTL_STATS_MAX - 1);
		buf->len = strlen(buf->data);
		buf->data[buf->len++] = '\n';
	}
	ffs_handle_add(fs, &buf->h, FFS_H_CTL);
	fi->fh = (uintptr_t)buf;
	fi->direct_io = 1;	/* size 0 in stat, content on read, as in /proc */
	return 0;
}

int ffs_ctl_write(struct ffs_data *fs, struct ffs_inode *inode, struct fuse_file_info *fi,
		  const char *data, size_t size, off_t off)
{
	struct ctl_buf *buf = (struct ctl_buf *)(uintptr_t)fi->fh;
	char spec[CTL_STATS_MAX], err[FFS_ERRLEN];
	size_t len;
	int ret;

	if (inode->ctl != FFS_CTL_FAULT)
		return -EBADF;
	if (off < 0 || (size_t)off > buf->len || size >= CTL_STATS_MAX - (size_t)off)
		return -EINVAL;
	/* The spec is everything written through this handle so far. */
	memcpy(spec, buf->data, (size_t)off);
	memcpy(spec + off, data, size);
	len = (size_t)off + size;
	while (len && (spec[len - 1] == '\n' || spec[len - 1] == ' '))
		len--;
	spec[len] = '\0';
	ret = wb_ctx_set_fault(fs->wb, spec, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "foliofs: .foliofs/fault: %s\n", err);
		return ret;
	}
	memcpy(buf->data + off, data, size);
	buf->len = (size_t)off + size;
	return (int)size;
}

void ffs_ctl_read(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct ctl_buf *buf = (struct ctl_buf *)(uintptr_t)fi->fh;
	char copy[CTL_STATS_MAX];

	if (off < 0 || (size_t)off >= buf->len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > buf->len - (size_t)off)
		size = buf->len - (size_t)off;
	/*
	 * Reply from a copy: once the reader has its bytes it may close, and
	 * the release (on another thread) frees the buffer while writev() is
	 * still returning here.
	 */
	memcpy(copy, buf->data + off, size);
	fuse_reply_buf(req, copy, size);
}

void ffs_ctl_release(struct ffs_data *fs, struct fuse_file_info *fi)
{
	struct ctl_buf *buf = (struct ctl_buf *)(uintptr_t)fi->fh;

	ffs_handle_del(fs, &buf->h);
	free(buf);
}

void ffs_ctl_readdir(fuse_req_t req, struct ffs_data *fs, size_t size, off_t off,
		     bool plus)
{
	static const char *const names[] = { ".", "..", "stats", "fault" };
	char *buf = calloc(1, size ? size : 1);
	size_t used = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (off_t i = off; i < 4; i++) {
		struct fuse_entry_param e;
		size_t n;

		memset(&e, 0, sizeof(e));
		if (i >= 2) {
			ctl_entry(fs, i == 2 ? &ctl_stats : &ctl_fault, &e);
		} else {
			e.attr.st_ino = i == 0 ? CTL_INO_BASE + FFS_CTL_DIR : 1;
			e.attr.st_mode = S_IFDIR;
		}
		if (plus)
			n = fuse_add_direntry_plus(req, buf + used, size - used,
						   names[i], &e, i + 1);
		else
			n = fuse_add_direntry(req, buf + used, size - used,
					      names[i], &e.attr, i + 1);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}
