// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ops.c - the handlers of backing inodes (ffs_backing_ops).
 *
 * dispatch.c hands every request on a backing inode here, the inode
 * resolved; the control directory has handlers of its own (ctl.c).  Each
 * handler checks its arguments, calls a do_ helper that returns 0 or
 * -errno, and replies exactly once, with no lock held.  Namespace
 * operations are *at() calls relative to O_PATH descriptors (inode.c);
 * data operations go to the inode's data path (writeback.h).
 */
#include "fusefs.h"
#include "writeback.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

/* ---- accessors ---- */

static struct ffs_data *ffs_data(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct ffs_file *ffs_file(const struct fuse_file_info *fi)
{
	return (struct ffs_file *)(uintptr_t)fi->fh;
}

static struct ffs_dir *ffs_dir(const struct fuse_file_info *fi)
{
	return (struct ffs_dir *)(uintptr_t)fi->fh;
}

/* A name that may be created or removed: also not "." or "..". */
static int check_new_name(const char *name)
{
	int ret = ffs_check_name(name);

	if (ret)
		return ret;
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	return 0;
}

/*
 * @other, the second inode of a rename, link or copy, is not a backing
 * inode (it has handlers of its own: a control file), so nothing moves
 * between the two, as the VFS refuses a rename or link across mounts.
 */
static bool foreign(const struct ffs_data *fs, const struct ffs_inode *other)
{
	return other->ops != fs->node_ops;
}

/*
 * A name to create, remove or rename in @dir: a backing directory, a
 * valid name, not the reserved name at the root.
 */
static int check_target(struct ffs_data *fs, struct ffs_inode *dir, const char *name)
{
	if (foreign(fs, dir) || ffs_ctl_hides(fs, dir, name))
		return -EPERM;
	/* No change to BACKING once the write log cannot record it. */
	return check_new_name(name) ?: wb_wlog_check();
}

/* [off, off + len) must be a valid file range. */
static int check_range(off_t off, uint64_t len)
{
	if (off < 0)
		return -EINVAL;
	if (len > (uint64_t)(INT64_MAX - off))
		return -EFBIG;
	return 0;
}

static int stat_fd(int fd, struct stat *st)
{
	if (fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

/* The root of a one-file mount of a block device shows a regular file. */
static void root_attr(struct ffs_data *fs, struct ffs_inode *inode, struct stat *st)
{
	uint64_t bytes = 0;

	if (inode != &fs->root || fs->backing_type != S_IFBLK)
		return;
	st->st_mode = S_IFREG | (st->st_mode & 07777);
	st->st_rdev = 0;
	st->st_size = ffs_blockdev_size(inode->fd, &bytes) ? 0 : (off_t)bytes;
	st->st_blocks = st->st_size / 512;
}

/* ---- recording (record.c) ---- */

static void trace_begin(fuse_req_t req, struct ffs_trace_op *op, unsigned int opcode)
{
	ffs_trace_begin(ffs_data(req)->trace, op, req, opcode);
}

/* Fill in what the operation did to the backing inode @ino. */
static void trace_fill(struct ffs_trace_op *op, ino_t ino, uint64_t off, uint64_t len,
		       uint32_t flags)
{
	op->rec.file = ffs_trace_file_id(ino);
	op->rec.offset = off;
	op->rec.length = len;
	op->rec.flags = flags;
}

/* The open @file the operation came through (NULL: none, or a control file). */
static void trace_open(struct ffs_trace_op *op, const struct ffs_file *file)
{
	op->rec.open = file ? file->open_id : 0;
}

/* The operation succeeded: record it (when recording; @req may be answered). */
static void trace_done(struct ffs_trace_op *op, ino_t ino, uint64_t off, uint64_t len,
		       uint32_t flags)
{
	if (!op->gen)
		return;
	trace_fill(op, ino, off, len, flags);
	ffs_trace_end(op);
}

/*
 * The inode number of @name in @dir, 0 when there is none; only when
 * recording (one more fstatat otherwise not needed).
 */
static ino_t trace_name_ino(const struct ffs_trace_op *op, const struct ffs_inode *dir,
			    const char *name)
{
	struct stat st;

	if (!op->gen || fstatat(dir->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	return st.st_ino;
}

/* ---- lookup and inode lifetime ---- */

static void entry_init(struct ffs_data *fs, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->attr_timeout = fs->cfg->attr_timeout;
	e->entry_timeout = fs->cfg->attr_timeout;
}

/* Look up @name in @dir; on success the inode has one more lookup. */
static int do_lookup(struct ffs_data *fs, struct ffs_inode *dir,
		     const char *name, struct fuse_entry_param *e)
{
	struct wb_file_attr cached;
	struct ffs_inode *inode;
	struct ffs_fh *fh;
	int fd, ret;

	entry_init(fs, e);
	if (dir == &fs->root && !strcmp(name, ".."))
		name = ".";	/* the root is its own parent */
	/*
	 * No descriptor: its attributes, and its handle (number and
	 * generation, to tell it from a later inode of that number); the
	 * directory's lock in the kernel keeps the name from changing through
	 * the mount in between.  It is opened when a request needs it, found
	 * by this name (inode.c).
	 */
	if (fstatat(dir->fd, name, &e->attr, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	ret = ffs_fh_at(dir->fd, name, &fh);
	if (ret)
		return ret;
	/* Without handles it could not be told from another: it keeps one. */
	fd = -1;
	if (!fh) {
		fd = ffs_fd_open(fs, dir->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, true);
		if (fd < 0)
			return fd;
		ret = stat_fd(fd, &e->attr);
		if (ret) {
			ffs_fd_close_path(fs, fd);
			return ret;
		}
	}
	ret = ffs_inode_get(fs, &e->attr, fh, dir, name, fd, &inode);
	if (ret)
		return ret;
	/* A name made or found: whatever its mode now, look at it again. */
	ffs_killpriv_mode_changed(inode);
	e->ino = (uintptr_t)inode;
	if (inode == &fs->root)
		e->ino = FUSE_ROOT_ID;
	/*
	 * A cached file may be written meanwhile: its size sampled before the
	 * backing mode is read again, as inode_attr() does (by name: the
	 * inode holds no descriptor here).
	 */
	if (ffs_data_attr_sample(inode, &cached)) {
		if (fstatat(dir->fd, name, &e->attr, AT_SYMLINK_NOFOLLOW) < 0) {
			ret = -errno;
			ffs_inode_forget(fs, inode, 1);
			return ret;
		}
		wb_file_attr_apply(&cached, &e->attr);
	}
	return 0;
}

static void ffs_lookup(fuse_req_t req, struct ffs_inode *dir, const char *name)
{
	struct ffs_data *fs = ffs_data(req);
	struct fuse_entry_param e;
	int ret = 0;

	if (ffs_ctl_hides(fs, dir, name))
		ffs_ctl_root_entry(fs, &e);
	else
		ret = do_lookup(fs, dir, name, &e);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_entry(req, &e);
}

/* ---- attributes ---- */

/*
 * What the kernel is told of @inode: its backing stat, as the cache sees
 * it.  The cache is read first: a write clears setuid/setgid on the
 * backing inode before its data reaches the cache (killpriv.c), so a size
 * that shows the data is never paired with the mode from before.
 */
static int inode_attr(struct ffs_data *fs, struct ffs_inode *inode, struct stat *st)
{
	struct wb_file_attr cached;
	bool have = ffs_data_attr_sample(inode, &cached);
	int ret = stat_fd(inode->fd, st);

	if (ret)
		return ret;
	root_attr(fs, inode, st);
	if (have)
		wb_file_attr_apply(&cached, st);
	return 0;
}

static void reply_attr(fuse_req_t req, int ret, const struct stat *st)
{
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, st, ffs_data(req)->cfg->attr_timeout);
}

static void ffs_getattr(fuse_req_t req, struct ffs_inode *inode,
			struct fuse_file_info *fi)
{
	struct stat st;
	(void)fi;

	reply_attr(req, inode_attr(ffs_data(req), inode, &st), &st);
}

static int set_size(struct ffs_data *fs, struct ffs_inode *inode,
		    struct fuse_file_info *fi, off_t size)
{
	struct wb_file *data;
	int ret;

	if (size < 0)
		return -EINVAL;
	if (inode->type == S_IFDIR)
		return -EISDIR;
	if (inode->type != S_IFREG)
		return -EINVAL;
	if (fi)
		return size > inode->max_size ? -EFBIG : wb_truncate(ffs_file(fi)->data, size);
	ret = ffs_data_get(fs, inode, WB_WRITE, -1, 0, &data);
	if (ret)
		return ret;
	ret = size > inode->max_size ? -EFBIG : wb_truncate(data, size);
	ffs_data_put(fs, inode);
	return ret;
}

static int set_times(struct ffs_inode *inode, const struct stat *attr,
		     int valid)
{
	struct timespec tv[2] = {
		{ .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT },
	};
	struct ffs_procpath p;

	if (valid & FUSE_SET_ATTR_ATIME_NOW)
		tv[0].tv_nsec = UTIME_NOW;
	else if (valid & FUSE_SET_ATTR_ATIME)
		tv[0] = attr->st_atim;
	if (valid & FUSE_SET_ATTR_MTIME_NOW)
		tv[1].tv_nsec = UTIME_NOW;
	else if (valid & FUSE_SET_ATTR_MTIME)
		tv[1] = attr->st_mtim;
	if (inode->type == S_IFLNK) {
		/* The link itself, as utimensat(AT_SYMLINK_NOFOLLOW) does. */
		if (utimensat(inode->fd, "", tv, AT_EMPTY_PATH) < 0)
			return -errno;
		return 0;
	}
	ffs_procpath(&p, inode->fd);
	if (utimensat(AT_FDCWD, p.path, tv, 0) < 0)
		return -errno;
	if (valid & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
		struct stat st;

		if (stat_fd(inode->fd, &st) == 0)
			ffs_data_mtime_set(inode, &st.st_mtim);
	}
	return 0;
}

/*
 * Apply @valid of @attr; @c holds the caller's credentials (when entered),
 * which every change but the size is made with.
 */
static int do_setattr(fuse_req_t req, struct ffs_inode *inode, const struct stat *attr,
		      int valid, struct fuse_file_info *fi, struct ffs_creds *c)
{
	struct ffs_data *fs = ffs_data(req);
	bool caller = c->switched;
	struct ffs_procpath p;
	int ret = 0;

	ffs_procpath(&p, inode->fd);
	if (valid & FUSE_SET_ATTR_MODE) {
		if (inode->type == S_IFLNK)
			return -EOPNOTSUPP;
		if (chmod(p.path, attr->st_mode & 07777) < 0)
			return -errno;
	}
	if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		uid_t uid = valid & FUSE_SET_ATTR_UID ? attr->st_uid : (uid_t)-1;
		gid_t gid = valid & FUSE_SET_ATTR_GID ? attr->st_gid : (gid_t)-1;

		if (fchownat(inode->fd, "", uid, gid,
			     AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	}
	if (valid & FUSE_SET_ATTR_SIZE) {
		/*
		 * As the daemon: the kernel has checked that the caller may
		 * write the file, and setuid/setgid go by its mark
		 * (killpriv.c).  A truncate by a thread with the caller's
		 * fsuid, which has no capability, would make the backing
		 * file system clear them even for a caller with CAP_FSETID.
		 */
		ffs_creds_leave(c);
		ret = set_size(fs, inode, fi, attr->st_size);
		if (!ret && caller)
			ret = ffs_creds_enter(fs, req, c);
		if (ret)
			return ret;
	}
	if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
		     FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW))
		ret = set_times(inode, attr, valid);
	return ret;
}

static void ffs_setattr(fuse_req_t req, struct ffs_inode *inode, struct stat *attr,
			int valid, struct fuse_file_info *fi)
{
	struct ffs_creds c = { 0 };
	struct ffs_trace_op op = { 0 };
	struct stat st;
	int ret = 0;

	if (valid & FUSE_SET_ATTR_SIZE)
		trace_begin(req, &op, TRACE_OP_TRUNCATE);

	/* Before the size changes: no stat may see the new size with the bits. */
	ret = ffs_killpriv_setattr(req, inode, valid);
	/*
	 * With the writeback cache the kernel keeps mtime and ctime itself
	 * and sends them (with FUSE_SET_ATTR_CTIME) on behalf of whoever
	 * flushes; only the daemon may apply times it decided.
	 */
	if (!ret && !(valid & FUSE_SET_ATTR_CTIME))
		ret = ffs_creds_enter(ffs_data(req), req, &c);
	if (!ret) {
		ret = do_setattr(req, inode, attr, valid, fi, &c);
		ffs_creds_leave(&c);
		/* Even on failure: a chmod may have been made before it. */
		ffs_killpriv_mode_changed(inode);
		if (!ret && fi)
			trace_open(&op, ffs_file(fi));
		if (!ret)
			trace_done(&op, inode->src_ino, (uint64_t)attr->st_size, 0, 0);
	}
	if (!ret)
		ret = inode_attr(ffs_data(req), inode, &st);
	reply_attr(req, ret, &st);
}

/* ---- creating and removing names ---- */

enum mk_kind { MK_NOD, MK_DIR, MK_SYMLINK };

static int do_make(struct ffs_data *fs, fuse_req_t req, struct ffs_inode *dir,
		   const char *name, enum mk_kind kind, mode_t mode,
		   dev_t rdev, const char *target, struct fuse_entry_param *e)
{
	struct ffs_creds c;
	int ret = check_target(fs, dir, name);

	if (ret)
		return ret;
	ret = ffs_creds_umask(fs, req);
	if (ret)
		return ret;
	ret = ffs_creds_enter(fs, req, &c);
	if (ret) {
		ffs_creds_umask_end(fs);
		return ret;
	}
	switch (kind) {
	case MK_NOD:
		ret = mknodat(dir->fd, name, mode, rdev);
		break;
	case MK_DIR:
		ret = mkdirat(dir->fd, name, mode);
		break;
	case MK_SYMLINK:
		ret = symlinkat(target, dir->fd, name);
		break;
	}
	ret = ret < 0 ? -errno : 0;
	ffs_creds_leave(&c);
	ffs_creds_umask_end(fs);
	if (!ret)
		ret = wb_wlog_ns(WB_WLOG_CREATE, dir->fd, name, -1, NULL, 0);
	if (!ret)
		ret = do_lookup(fs, dir, name, e);
	return ret;
}

static void reply_entry(fuse_req_t req, int ret, struct fuse_entry_param *e)
{
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_entry(req, e);
}

static void ffs_mknod(fuse_req_t req, struct ffs_inode *dir, const char *name,
		      mode_t mode, dev_t rdev)
{
	struct fuse_entry_param e;

	reply_entry(req, do_make(ffs_data(req), req, dir, name, MK_NOD, mode, rdev, NULL, &e),
		    &e);
}

static void ffs_mkdir(fuse_req_t req, struct ffs_inode *dir, const char *name,
		      mode_t mode)
{
	struct fuse_entry_param e;

	reply_entry(req, do_make(ffs_data(req), req, dir, name, MK_DIR, mode, 0, NULL, &e), &e);
}

static void ffs_symlink(fuse_req_t req, const char *link, struct ffs_inode *dir,
			const char *name)
{
	struct fuse_entry_param e;

	/* The target's length is checked before dispatching. */
	reply_entry(req, do_make(ffs_data(req), req, dir, name, MK_SYMLINK, 0, 0, link, &e), &e);
}

static void ffs_link(fuse_req_t req, struct ffs_inode *inode, struct ffs_inode *dir,
		     const char *newname)
{
	struct ffs_data *fs = ffs_data(req);
	struct fuse_entry_param e;
	struct ffs_procpath p;
	struct ffs_creds c;
	int ret = foreign(fs, inode) ? -EPERM : check_target(fs, dir, newname);

	ffs_procpath(&p, inode->fd);
	if (!ret)
		ret = ffs_creds_enter(fs, req, &c);
	if (!ret) {
		ret = linkat(AT_FDCWD, p.path, dir->fd, newname,
			     AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
		ffs_creds_leave(&c);
	}
	if (!ret)
		ret = wb_wlog_ns(WB_WLOG_LINK, dir->fd, newname, -1, NULL, 0);
	if (!ret)
		ret = do_lookup(fs, dir, newname, &e);
	reply_entry(req, ret, &e);
}

static void do_remove(fuse_req_t req, struct ffs_inode *dir, const char *name,
		      int flags)
{
	struct ffs_inode *gone = NULL;
	struct ffs_trace_op op = { 0 };
	struct ffs_creds c;
	int ret = check_target(ffs_data(req), dir, name);
	ino_t ino;

	if (!flags)
		trace_begin(req, &op, TRACE_OP_UNLINK);
	ino = trace_name_ino(&op, dir, name);

	/* Found by this name: it must keep a descriptor once the name is gone. */
	if (!ret)
		gone = ffs_inode_at(ffs_data(req), dir, name);
	if (!ret)
		ret = ffs_creds_enter(ffs_data(req), req, &c);
	if (!ret) {
		if (unlinkat(dir->fd, name, flags) < 0)
			ret = -errno;
		ffs_creds_leave(&c);
	}
	if (!ret && gone)
		ffs_inode_unnamed(ffs_data(req), gone, dir, name);
	if (gone)
		ffs_inode_unpin(ffs_data(req), gone);
	if (!ret)
		ret = wb_wlog_ns(WB_WLOG_UNLINK, dir->fd, name, -1, NULL,
				 (unsigned int)flags);
	if (!ret)
		trace_done(&op, ino, 0, 0, 0);
	fuse_reply_err(req, -ret);
}

static void ffs_unlink(fuse_req_t req, struct ffs_inode *dir, const char *name)
{
	do_remove(req, dir, name, 0);
}

static void ffs_rmdir(fuse_req_t req, struct ffs_inode *dir, const char *name)
{
	do_remove(req, dir, name, AT_REMOVEDIR);
}

static void ffs_rename(fuse_req_t req, struct ffs_inode *dir, const char *name,
		       struct ffs_inode *newdir, const char *newname,
		       unsigned int flags)
{
	struct ffs_data *fs = ffs_data(req);
	struct ffs_inode *other = NULL;
	struct ffs_trace_op op;
	struct ffs_creds c;
	int ret = check_target(fs, dir, name);
	ino_t ino, replaced;

	trace_begin(req, &op, TRACE_OP_RENAME);
	ino = trace_name_ino(&op, dir, name);
	replaced = trace_name_ino(&op, newdir, newname);
	if (!ret)
		ret = check_target(fs, newdir, newname);
	if (!ret && (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)))
		ret = -EINVAL;
	/* Replaced (or exchanged): keeps a descriptor if its name goes. */
	if (!ret && !(flags & RENAME_NOREPLACE))
		other = ffs_inode_at(fs, newdir, newname);
	if (!ret)
		ret = ffs_creds_enter(ffs_data(req), req, &c);
	if (!ret) {
		if (renameat2(dir->fd, name, newdir->fd, newname, flags) < 0)
			ret = -errno;
		ffs_creds_leave(&c);
	}
	if (!ret && other && !(flags & RENAME_EXCHANGE))
		ffs_inode_unnamed(fs, other, newdir, newname);
	if (!ret)
		ffs_inode_renamed(fs, dir, name, newdir, newname, flags, other);
	if (other)
		ffs_inode_unpin(fs, other);
	if (!ret)
		ret = wb_wlog_ns(WB_WLOG_RENAME, dir->fd, name, newdir->fd, newname, flags);
	if (!ret)
		trace_done(&op, ino, replaced ? ffs_trace_file_id(replaced) : 0, 0, flags);
	fuse_reply_err(req, -ret);
}

static void ffs_readlink(fuse_req_t req, struct ffs_inode *inode)
{
	char buf[PATH_MAX + 1];
	ssize_t n = readlinkat(inode->fd, "", buf, sizeof(buf));

	if (n < 0)
		fuse_reply_err(req, errno);
	else if (n >= (ssize_t)sizeof(buf))
		fuse_reply_err(req, ENAMETOOLONG);
	else {
		buf[n] = '\0';
		fuse_reply_readlink(req, buf);
	}
}

/* ---- open files ---- */

static int access_of(int flags)
{
	switch (flags & O_ACCMODE) {
	case O_RDONLY:
		return WB_READ;
	case O_WRONLY:
		return WB_WRITE;
	default:
		return WB_RDWR;
	}
}

/* The handle of an open file is gone: its reference to the data path goes. */
static void file_free(struct ffs_data *fs, struct ffs_handle *h)
{
	struct ffs_file *file = (struct ffs_file *)h;

	ffs_data_put(fs, file->inode);
	pthread_mutex_destroy(&file->err_lock);
	bs_ra_destroy(&file->ra);
	free(file);
}

/*
 * Finish an open or create for the caller of @req: make the handle, apply
 * O_TRUNC (clearing setuid/setgid when the kernel asks), set the reply
 * flags.
 */
static int open_finish(struct ffs_data *fs, fuse_req_t req, struct ffs_inode *inode,
		       struct wb_file *data, struct fuse_file_info *fi)
{
	struct ffs_file *file = calloc(1, sizeof(*file));
	int ret = 0;

	if (!file) {
		ffs_data_put(fs, inode);
		return -ENOMEM;
	}
	/*
	 * Linux truncates even for O_RDONLY; the kernel checked write access.
	 * The bits go first, as with a write.
	 */
	if (fi->flags & O_TRUNC) {
		ffs_killpriv_data(req, inode);
		ret = wb_truncate(data, 0);
	}
	if (ret) {
		free(file);
		ffs_data_put(fs, inode);
		return ret;
	}
	file->inode = inode;
	file->data = data;
	file->flags = fi->flags;
	file->err_seen = wb_file_err_sample(data);
	pthread_mutex_init(&file->err_lock, NULL);
	bs_ra_init(&file->ra);
	file->open_id = atomic_fetch_add_explicit(&fs->last_open_id, 1, memory_order_relaxed) + 1;
	ffs_handle_add(fs, &file->h, file_free);
	fi->fh = (uintptr_t)file;
	/*
	 * In both cached modes the kernel's pages stay valid across opens:
	 * every change of the data reaches the kernel's page cache or goes
	 * through a request it invalidates for (see ffs_init).
	 */
	if (fs->cfg->cache == FFS_CACHE_DIRECT)
		fi->direct_io = 1;
	else
		fi->keep_cache = 1;
	return 0;
}

static void ffs_open(fuse_req_t req, struct ffs_inode *inode,
		     struct fuse_file_info *fi)
{
	struct ffs_data *fs = ffs_data(req);
	struct ffs_trace_op op = { 0 };
	struct wb_file *data;
	int ret;

	if (inode->type == S_IFDIR)
		ret = -EISDIR;
	else if (inode->type != S_IFREG)
		ret = -EACCES;	/* data opens of special files are refused */
	else
		ret = ffs_data_get(fs, inode, access_of(fi->flags), -1, 0, &data);
	if (!ret && (fi->flags & O_TRUNC))
		trace_begin(req, &op, TRACE_OP_TRUNCATE);
	if (!ret)
		ret = open_finish(fs, req, inode, data, fi);
	if (!ret) {
		trace_open(&op, ffs_file(fi));
		trace_done(&op, inode->src_ino, 0, 0, 0);
	}
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_open(req, fi);
}

/* openat(O_CREAT) as the caller: read-write if allowed, else as asked. */
static int create_fd(struct ffs_data *fs, struct ffs_inode *dir, const char *name,
		     int flags, mode_t mode, int *access)
{
	int base = O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
		   (flags & O_EXCL) | (fs->cfg->wb.backing_direct ? O_DIRECT : 0);
	int fd = openat(dir->fd, name, base | O_RDWR, mode);

	/* The file is made (O_DIRECT is checked after): O_EXCL must go too. */
	if (fd < 0 && ffs_direct_refused(fs, base, errno)) {
		base &= ~(O_DIRECT | O_EXCL);
		fd = openat(dir->fd, name, base | O_RDWR, mode);
	}
	*access = WB_RDWR;
	if (fd < 0 && errno == EACCES && (flags & O_ACCMODE) != O_RDWR) {
		fd = openat(dir->fd, name, base | (flags & O_ACCMODE), mode);
		*access = access_of(flags);
	}
	return fd < 0 ? -errno : fd;
}

static int do_create(struct ffs_data *fs, fuse_req_t req,
		     struct ffs_inode *dir, const char *name, mode_t mode,
		     struct fuse_file_info *fi, struct fuse_entry_param *e)
{
	struct ffs_inode *inode;
	struct ffs_procpath p;
	struct wb_file *data;
	struct ffs_creds c;
	struct ffs_fh *fh;
	int fd, pathfd, access, ret = check_target(fs, dir, name);

	if (ret)
		return ret;
	/*
	 * Two descriptors, the data one and the O_PATH one, charged before
	 * acting as the caller: making room may write another file back.
	 * The O_PATH one may pass the budget (see ffs_fd_charge_path).
	 */
	ret = ffs_fd_charge(fs);
	if (ret)
		return ret;
	ffs_fd_charge_path(fs);
	ret = ffs_creds_umask(fs, req);
	if (ret)
		goto out_uncharge;
	do {
		ret = ffs_creds_enter(fs, req, &c);
		if (ret)
			break;
		fd = create_fd(fs, dir, name, fi->flags, mode, &access);
		ffs_creds_leave(&c);
	} while (fd < 0 && ffs_fd_retry(fs, -fd));
	ffs_creds_umask_end(fs);
	if (ret)
		goto out_uncharge;
	if (fd < 0) {
		ret = fd;
		goto out_uncharge;
	}
	/* Without O_EXCL the name may have existed: the log's reader allows that. */
	ret = wb_wlog_ns(WB_WLOG_CREATE, dir->fd, name, -1, NULL, 0);
	if (ret)
		goto out_close;
	entry_init(fs, e);
	ret = stat_fd(fd, &e->attr);
	if (!ret && !S_ISREG(e->attr.st_mode))
		ret = -EACCES;
	if (ret)
		goto out_close;
	/* O_PATH to the very inode just opened: no window for a rename. */
	ffs_procpath(&p, fd);
	do {
		pathfd = open(p.path, O_PATH | O_CLOEXEC);
		ret = pathfd < 0 ? -errno : 0;
	} while (ret && ffs_fd_retry(fs, -ret));
	if (ret)
		goto out_close;
	ret = ffs_fh_get(pathfd, &fh);
	if (ret) {
		close(pathfd);
		goto out_close;
	}
	/* Takes pathfd's charge and fh. */
	ret = ffs_inode_get(fs, &e->attr, fh, dir, name, pathfd, &inode);
	if (ret) {
		ffs_fd_close(fs, fd);
		return ret;
	}
	ffs_killpriv_mode_changed(inode);	/* as in do_lookup() */
	e->ino = (uintptr_t)inode;
	/* Its O_PATH descriptor stays for the handle (it was just given it). */
	ret = ffs_inode_pin(fs, inode);
	if (ret) {
		ffs_fd_close(fs, fd);
		ffs_inode_forget(fs, inode, 1);
		return ret;
	}
	ret = ffs_data_get(fs, inode, access_of(fi->flags), fd, access, &data);
	if (!ret)
		ret = open_finish(fs, req, inode, data, fi);
	if (!ret)
		wb_file_fix_stat(data, &e->attr);
	ffs_inode_unpin(fs, inode);	/* an open handle holds a pin of its own */
	if (ret)
		ffs_inode_forget(fs, inode, 1);
	return ret;

out_close:
	close(fd);
out_uncharge:
	ffs_fd_uncharge_path(fs);
	ffs_fd_uncharge(fs);
	return ret;
}

static void ffs_create(fuse_req_t req, struct ffs_inode *dir, const char *name,
		       mode_t mode, struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	struct ffs_trace_op op;
	int ret;

	trace_begin(req, &op, TRACE_OP_CREATE);
	ret = do_create(ffs_data(req), req, dir, name, mode, fi, &e);
	if (!ret) {
		trace_open(&op, ffs_file(fi));
		trace_done(&op, e.attr.st_ino, 0, (uint64_t)e.attr.st_size, 0);
	}
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_create(req, &e, fi);
}

static void ffs_release(fuse_req_t req, struct ffs_inode *inode,
			struct fuse_file_info *fi)
{
	(void)inode;
	ffs_handle_release(ffs_data(req), &ffs_file(fi)->h);
	fuse_reply_err(req, 0);
}

/*
 * Nothing is buffered per descriptor, and locks are the kernel's (no
 * getlk/setlk), so a close has nothing to do here.  It must still be
 * answered: ENOSYS would make the kernel skip it for good.
 */
static void ffs_flush(fuse_req_t req, struct ffs_inode *inode,
		      struct fuse_file_info *fi)
{
	(void)inode;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* fsync for one open file description: errors are reported to it once. */
static int file_fsync(struct ffs_file *file, bool datasync)
{
	int ret;

	pthread_mutex_lock(&file->err_lock);
	ret = wb_fsync(file->data, datasync, &file->err_seen);
	pthread_mutex_unlock(&file->err_lock);
	return ret;
}

static void ffs_fsync(fuse_req_t req, struct ffs_inode *inode, int datasync,
		      struct fuse_file_info *fi)
{
	struct ffs_trace_op op;
	int ret;

	(void)inode;
	trace_begin(req, &op, datasync ? TRACE_OP_FDATASYNC : TRACE_OP_FSYNC);
	ret = file_fsync(ffs_file(fi), datasync);
	trace_open(&op, ffs_file(fi));
	if (!ret)
		trace_done(&op, ffs_file(fi)->inode->src_ino, 0, 0, 0);
	fuse_reply_err(req, -ret);
}

/* ---- data ---- */

/*
 * Per-thread read buffer, grown on demand, page aligned; freed when the
 * worker thread exits (libfuse retires idle workers).
 */
static __thread void *read_buf;
static __thread size_t read_buf_size;
static pthread_key_t read_buf_key;
static pthread_once_t read_buf_once = PTHREAD_ONCE_INIT;

static void read_buf_key_init(void)
{
	if (pthread_key_create(&read_buf_key, free))
		abort();
}

static void *get_read_buf(size_t size)
{
	void *p;

	if (size <= read_buf_size)
		return read_buf;
	if (posix_memalign(&p, 4096, size))
		return NULL;
	pthread_once(&read_buf_once, read_buf_key_init);
	free(read_buf);
	read_buf = p;
	read_buf_size = size;
	pthread_setspecific(read_buf_key, p);
	return p;
}

static void ffs_read(fuse_req_t req, struct ffs_inode *inode, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	int ret = check_range(off, size);
	struct ffs_trace_op op;
	void *buf;
	ssize_t n;

	(void)inode;
	trace_begin(req, &op, TRACE_OP_READ);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	if (size > FFS_MAX_IO)
		size = FFS_MAX_IO;
	/* Over the ring the data goes straight into the request's entry. */
	buf = ffs_uring_reply_buf(size);
	if (!buf)
		buf = get_read_buf(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = wb_read(ffs_file(fi)->data, &ffs_file(fi)->ra, buf, size, off);
	if (n < 0) {
		fuse_reply_err(req, (int)-n);
		return;
	}
	/* Before the reply: a close may free the handle as soon as it is sent. */
	trace_fill(&op, ffs_file(fi)->inode->src_ino, (uint64_t)off, (uint64_t)n, 0);
	trace_open(&op, ffs_file(fi));
	ffs_trace_stamp(&op);
	fuse_reply_buf(req, buf, n);
	ffs_trace_end(&op);
}

static void ffs_write(fuse_req_t req, struct ffs_inode *inode, const char *buf,
		      size_t size, off_t off, struct fuse_file_info *fi)
{
	struct ffs_file *file = ffs_file(fi);
	int sync_flags, ret = check_range(off, size);
	struct ffs_trace_op op;
	uint64_t dirtied = 0;
	size_t asked = size;
	ssize_t n = 0;

	trace_begin(req, &op, TRACE_OP_WRITE);
	if (!ret && size)
		ret = ffs_data_check_size(file->inode, off, &size);
	/* Before the data, as a local filesystem does. */
	if (!ret && size)
		ffs_killpriv_data(req, inode);
	if (!ret && size)
		n = (ffs_data(req)->write_cut && size > ffs_data(req)->write_cut ?
		     wb_write_cut : wb_write)(file->data, buf, size, off, &dirtied);
	if (n < 0)
		ret = (int)n;
	/*
	 * The kernel's own writeback (cache=writeback, or a shared mapping)
	 * takes a short count for the whole request: the part past the
	 * backing file system's limit would be dropped without a word, and
	 * fsync succeed.  What fits is stored; the request fails, which the
	 * kernel keeps for fsync to report.  (Its cached size, which it
	 * trusts over the daemon's in that mode, keeps the lost part.)
	 */
	if (!ret && fi->writepage && size < asked)
		ret = -EFBIG;
	/*
	 * O_DSYNC/O_SYNC from the open, or from this write alone: for a
	 * direct-I/O file the kernel puts pwritev2()'s RWF_DSYNC/RWF_SYNC
	 * (and the file's own flags) in the request's flags and syncs
	 * nothing itself.  O_SYNC includes O_DSYNC's bit and adds one
	 * asking for metadata.
	 */
	sync_flags = (file->flags | fi->flags) & O_SYNC;
	if (!ret && (sync_flags & O_DSYNC))
		ret = file_fsync(file, sync_flags != O_SYNC);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	/*
	 * The kernel pauses a writer (balance_dirty_pages) before it syncs
	 * (generic_write_sync); we sync first, on this thread, so that a held
	 * reply never waits for I/O on the timer thread.  The sync only
	 * lowers the dirty charge, so the pause it sees is never longer.
	 * A write from the kernel's own writeback (cache=writeback, or a
	 * shared mapping in the other modes) is not throttled: the kernel
	 * already throttled its writer against the FUSE mount's strict
	 * limit, and pausing its flusher would only stall every file's
	 * writeback.
	 */
	trace_fill(&op, file->inode->src_ino, (uint64_t)off, (uint64_t)n, 0);
	trace_open(&op, file);
	if (fi->writepage) {
		ffs_trace_stamp(&op);
		fuse_reply_write(req, (size_t)n);
		ffs_trace_end(&op);
	} else {
		ffs_defer_reply_write(ffs_data(req), req, (size_t)n, dirtied, &op);
	}
}

static void ffs_fallocate(fuse_req_t req, struct ffs_inode *inode, int mode,
			  off_t off, off_t len, struct fuse_file_info *fi)
{
	int ret = len <= 0 ? -EINVAL : check_range(off, len);
	struct ffs_trace_op op;

	(void)inode;
	/* Every mode, punching included, as vfs_fallocate() checks. */
	if (!ret && off + len > ffs_file(fi)->inode->max_size)
		ret = -EFBIG;
	trace_begin(req, &op, TRACE_OP_FALLOCATE);
	if (!ret)
		ret = wb_fallocate(ffs_file(fi)->data, mode, off, len);
	if (!ret) {
		trace_open(&op, ffs_file(fi));
		trace_done(&op, ffs_file(fi)->inode->src_ino, (uint64_t)off, (uint64_t)len,
			   (uint32_t)mode);
	}
	fuse_reply_err(req, -ret);
}

static void ffs_lseek(fuse_req_t req, struct ffs_inode *inode, off_t off, int whence,
		      struct fuse_file_info *fi)
{
	off_t ret;

	(void)inode;
	if (off < 0)
		ret = -ENXIO;
	else
		ret = wb_lseek(ffs_file(fi)->data, off, whence);
	if (ret < 0)
		fuse_reply_err(req, (int)-ret);
	else
		fuse_reply_lseek(req, ret);
}

static void ffs_copy_file_range(fuse_req_t req, struct ffs_inode *in,
				off_t off_in, struct fuse_file_info *fi_in,
				struct ffs_inode *out, off_t off_out,
				struct fuse_file_info *fi_out, size_t len,
				int flags)
{
	ssize_t ret = flags ? -EINVAL : check_range(off_in, len);

	(void)in;
	if (foreign(ffs_data(req), out))
		ret = -EINVAL;
	if (!ret)
		ret = check_range(off_out, len);
	if (!ret && len)
		ret = ffs_data_check_size(ffs_file(fi_out)->inode, off_out, &len);
	if (!ret)
		ret = wb_copy_range(ffs_file(fi_in)->data, &ffs_file(fi_in)->ra, off_in,
				    ffs_file(fi_out)->data, off_out, len);
	if (ret < 0)
		fuse_reply_err(req, (int)-ret);
	else
		fuse_reply_write(req, ret);
}

/* ---- directories ---- */

/* The handle of an open directory is gone: its descriptor goes. */
static void dir_free(struct ffs_data *fs, struct ffs_handle *h)
{
	struct ffs_dir *d = (struct ffs_dir *)h;

	closedir(d->dp);
	ffs_fd_uncharge(fs);
	free(d);
}

static void ffs_opendir(fuse_req_t req, struct ffs_inode *inode,
			struct fuse_file_info *fi)
{
	struct ffs_dir *d;
	int fd, ret = 0;

	d = calloc(1, sizeof(*d));
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fd = ffs_fd_open(ffs_data(req), inode->fd, ".",
			 O_RDONLY | O_DIRECTORY | O_CLOEXEC, false);
	if (fd < 0) {
		ret = -fd;
	} else {
		d->dp = fdopendir(fd);
		if (!d->dp) {
			ret = errno;
			ffs_fd_close(ffs_data(req), fd);
		}
	}
	if (ret) {
		free(d);
		fuse_reply_err(req, ret);
		return;
	}
	ffs_handle_add(ffs_data(req), &d->h, dir_free);
	fi->fh = (uintptr_t)d;
	if (ffs_data(req)->cfg->cache != FFS_CACHE_DIRECT)
		fi->cache_readdir = 1;
	fuse_reply_open(req, fi);
}

static bool is_dot_or_dotdot(const char *name)
{
	return name[0] == '.' &&
	       (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/*
 * Add d->entry to the reply at @p (room @rem).  Returns the bytes used, 0
 * when it does not fit (nothing is kept for it), or -errno.
 */
static ssize_t add_entry(fuse_req_t req, struct ffs_inode *dir,
			 struct ffs_dir *d, char *p, size_t rem, bool plus)
{
	struct dirent *de = d->entry;
	struct fuse_entry_param e;
	size_t used;
	int ret;

	if (!plus) {
		struct stat st = {
			.st_ino = de->d_ino, .st_mode = (mode_t)de->d_type << 12,
		};
		used = fuse_add_direntry(req, p, rem, de->d_name, &st, de->d_off);
		return used > rem ? 0 : (ssize_t)used;
	}
	if (is_dot_or_dotdot(de->d_name)) {
		entry_init(ffs_data(req), &e);
		e.attr.st_ino = de->d_ino;
		e.attr.st_mode = (mode_t)de->d_type << 12;
	} else {
		ret = do_lookup(ffs_data(req), dir, de->d_name, &e);
		if (ret)
			return ret;
	}
	used = fuse_add_direntry_plus(req, p, rem, de->d_name, &e, de->d_off);
	if (used > rem) {
		if (e.ino && e.ino != FUSE_ROOT_ID)
			ffs_inode_forget(ffs_data(req),
					 (struct ffs_inode *)(uintptr_t)e.ino, 1);
		return 0;
	}
	return (ssize_t)used;
}

static void do_readdir(fuse_req_t req, struct ffs_inode *dir, size_t size,
		       off_t offset, struct fuse_file_info *fi, bool plus)
{
	struct ffs_dir *d = ffs_dir(fi);
	char *buf;
	size_t rem = size;
	int err = 0;

	buf = calloc(1, size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (offset != d->offset) {
		seekdir(d->dp, offset);
		d->entry = NULL;
		d->offset = offset;
	}
	for (;;) {
		ssize_t used;

		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dp);
			if (!d->entry) {
				err = errno;
				break;
			}
		}
		if (ffs_ctl_hides(ffs_data(req), dir, d->entry->d_name))
			used = -ENOENT;	/* reserved: skipped below */
		else
			used = add_entry(req, dir, d, buf + (size - rem), rem, plus);
		if (used < 0) {
			/* Gone between readdir and lookup: skip it. */
			if (used != -ENOENT) {
				err = (int)-used;
				break;
			}
		} else if (used == 0) {
			break;
		} else {
			rem -= used;
		}
		d->offset = d->entry->d_off;
		d->entry = NULL;
	}
	/* An error after some entries: return those, the error comes again. */
	if (err && rem == size)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, size - rem);
	free(buf);
}

static void ffs_readdir(fuse_req_t req, struct ffs_inode *dir, size_t size,
			off_t offset, struct fuse_file_info *fi)
{
	do_readdir(req, dir, size, offset, fi, false);
}

static void ffs_readdirplus(fuse_req_t req, struct ffs_inode *dir, size_t size,
			    off_t offset, struct fuse_file_info *fi)
{
	do_readdir(req, dir, size, offset, fi, true);
}

static void ffs_releasedir(fuse_req_t req, struct ffs_inode *inode,
			   struct fuse_file_info *fi)
{
	(void)inode;
	ffs_handle_release(ffs_data(req), &ffs_dir(fi)->h);
	fuse_reply_err(req, 0);
}

static void ffs_fsyncdir(fuse_req_t req, struct ffs_inode *inode, int datasync,
			 struct fuse_file_info *fi)
{
	uint64_t begin;
	int fd, ret;

	(void)inode;
	fd = dirfd(ffs_dir(fi)->dp);
	begin = wb_wlog_seq();
	ret = wb_wlog_check();
	if (!ret)
		ret = (datasync ? fdatasync(fd) : fsync(fd)) < 0 ? -errno : 0;
	if (!ret)
		ret = wb_wlog_sync(fd, datasync, true, begin);
	fuse_reply_err(req, -ret);
}

/* ---- file system wide ---- */

static void ffs_statfs(fuse_req_t req, struct ffs_inode *inode)
{
	struct statvfs sv;

	if (fstatvfs(inode->fd, &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

static void ffs_access(fuse_req_t req, struct ffs_inode *inode, int mask)
{
	struct ffs_procpath p;
	struct ffs_creds c;
	int ret;

	ffs_procpath(&p, inode->fd);
	ret = ffs_creds_enter(ffs_data(req), req, &c);
	if (!ret) {
		ret = faccessat(AT_FDCWD, p.path, mask, AT_EACCESS) < 0 ? -errno : 0;
		ffs_creds_leave(&c);
	}
	fuse_reply_err(req, -ret);
}

/* ---- extended attributes ---- */

static void reply_xattr(fuse_req_t req, size_t size, char *buf, ssize_t n)
{
	if (n < 0)
		fuse_reply_err(req, errno);
	else if (size == 0)
		fuse_reply_xattr(req, n);
	else
		fuse_reply_buf(req, buf, n);
}

static void ffs_getxattr(fuse_req_t req, struct ffs_inode *inode, const char *name,
			 size_t size)
{
	struct ffs_procpath p;
	char *buf = NULL;
	ssize_t n;

	if (size > XATTR_SIZE_MAX)
		size = XATTR_SIZE_MAX;
	if (size && !(buf = malloc(size))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ffs_procpath(&p, inode->fd);
	n = getxattr(p.path, name, buf, size);
	reply_xattr(req, size, buf, n);
	free(buf);
}

/*
 * Drop trusted.* names from the @n bytes of names in @buf: ext4 lists them
 * only to callers with CAP_SYS_ADMIN, which the root daemon always has.
 */
static ssize_t hide_trusted(char *buf, ssize_t n)
{
	ssize_t in = 0, out = 0;

	while (in < n) {
		size_t len = strnlen(buf + in, (size_t)(n - in)) + 1;

		if (strncmp(buf + in, "trusted.", 8) != 0) {
			memmove(buf + out, buf + in, len);
			out += (ssize_t)len;
		}
		in += (ssize_t)len;
	}
	return out;
}

static void ffs_listxattr(fuse_req_t req, struct ffs_inode *inode, size_t size)
{
	bool filter = ffs_data(req)->act_as_caller && fuse_req_ctx(req)->uid != 0;
	struct ffs_procpath p;
	char *buf = NULL;
	size_t cap = filter ? XATTR_LIST_MAX : size;
	ssize_t n;

	if (cap > XATTR_LIST_MAX)
		cap = XATTR_LIST_MAX;
	if (cap && !(buf = malloc(cap))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ffs_procpath(&p, inode->fd);
	n = listxattr(p.path, buf, cap);
	if (n >= 0 && filter) {
		n = hide_trusted(buf, n);
		if (size && (size_t)n > size) {
			n = -1;
			errno = ERANGE;
		}
	}
	reply_xattr(req, size, buf, n);
	free(buf);
}

/* setxattr (@value non-NULL) or removexattr, as the caller. */
static void change_xattr(fuse_req_t req, struct ffs_inode *inode, const char *name,
			 const char *value, size_t size, int flags)
{
	struct ffs_procpath p;
	struct ffs_creds c;
	int ret;

	ffs_procpath(&p, inode->fd);
	ret = ffs_creds_enter(ffs_data(req), req, &c);
	if (!ret) {
		ret = value ? setxattr(p.path, name, value, size, flags)
			    : removexattr(p.path, name);
		ret = ret < 0 ? -errno : 0;
		ffs_creds_leave(&c);
		ffs_killpriv_mode_changed(inode);	/* an ACL may change the mode */
	}
	fuse_reply_err(req, -ret);
}

static void ffs_setxattr(fuse_req_t req, struct ffs_inode *inode, const char *name,
			 const char *value, size_t size, int flags)
{
	change_xattr(req, inode, name, value ? value : "", size, flags);
}

static void ffs_removexattr(fuse_req_t req, struct ffs_inode *inode, const char *name)
{
	change_xattr(req, inode, name, NULL, 0, 0);
}

const struct ffs_node_ops ffs_backing_ops = {
	.lookup = ffs_lookup,
	.forget = ffs_inode_forget,
	.getattr = ffs_getattr,
	.setattr = ffs_setattr,
	.readlink = ffs_readlink,
	.mknod = ffs_mknod,
	.mkdir = ffs_mkdir,
	.unlink = ffs_unlink,
	.rmdir = ffs_rmdir,
	.symlink = ffs_symlink,
	.rename = ffs_rename,
	.link = ffs_link,
	.open = ffs_open,
	.read = ffs_read,
	.write = ffs_write,
	.flush = ffs_flush,
	.release = ffs_release,
	.fsync = ffs_fsync,
	.opendir = ffs_opendir,
	.readdir = ffs_readdir,
	.readdirplus = ffs_readdirplus,
	.releasedir = ffs_releasedir,
	.fsyncdir = ffs_fsyncdir,
	.statfs = ffs_statfs,
	.setxattr = ffs_setxattr,
	.getxattr = ffs_getxattr,
	.listxattr = ffs_listxattr,
	.removexattr = ffs_removexattr,
	.access = ffs_access,
	.create = ffs_create,
	.fallocate = ffs_fallocate,
	.lseek = ffs_lseek,
	.copy_file_range = ffs_copy_file_range,
};
