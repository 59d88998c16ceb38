// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dispatch.c - the session's low-level operations: INIT, and every other
 * request handed to the handlers of the inode it is about.
 *
 * An inode carries its handlers (ffs_inode.ops, struct ffs_node_ops in
 * fusefs.h): ops.c's for the backing inodes, ctl.c's for the control
 * directory and its files, as a kernel inode carries its file system's
 * inode and file operations.  So no handler asks what kind of inode it
 * was given, and the control directory is one file.  Each d_ function
 * below resolves the request's inode and calls its handler; the checks of
 * a request's arguments that do not depend on the inode are made here
 * once, before dispatching.  A handler that works on an inode's O_PATH
 * descriptor gets the inode pinned (d_pin): the descriptor is open until
 * the handler returns.  Requests on an open file (read, write, fsync,
 * ...) need none: its handle pins its inode.
 */
#include "fusefs.h"
#include "writeback.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

static struct ffs_data *d_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct ffs_inode *d_inode(fuse_req_t req, fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return &d_fs(req)->root;
	return (struct ffs_inode *)(uintptr_t)ino;
}

/*
 * The request's backing inode gets its descriptor for the handler, which
 * reads inode->fd (ffs_inode_pin): false, the request answered, when it
 * cannot be found again (ESTALE).  ffs_inode_unpin() once the handler
 * returned, with the ffs_data taken before: the request is gone then.
 */
static bool d_pin(fuse_req_t req, struct ffs_inode *inode)
{
	int ret = ffs_inode_pin(d_fs(req), inode);

	if (ret)
		fuse_reply_err(req, -ret);
	return !ret;
}

/* Both inodes of a request on two, or neither (answered). */
static bool d_pin2(fuse_req_t req, struct ffs_inode *a, struct ffs_inode *b)
{
	int ret = ffs_inode_pin(d_fs(req), a);

	if (!ret && b != a) {
		ret = ffs_inode_pin(d_fs(req), b);
		if (ret)
			ffs_inode_unpin(d_fs(req), a);
	}
	if (ret)
		fuse_reply_err(req, -ret);
	return !ret;
}

static void d_unpin2(struct ffs_data *fs, struct ffs_inode *a, struct ffs_inode *b)
{
	if (b != a)
		ffs_inode_unpin(fs, b);
	ffs_inode_unpin(fs, a);
}

int ffs_check_name(const char *name)
{
	size_t len = strnlen(name, NAME_MAX + 1);

	if (len == 0)
		return -ENOENT;
	if (len > NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(name, '/', len))
		return -EINVAL;
	return 0;
}

/* ---- INIT ---- */

static void d_init(void *userdata, struct fuse_conn_info *conn)
{
	struct ffs_data *fs = userdata;

	if (fs->cfg->cache == FFS_CACHE_WRITEBACK &&
	    (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	/*
	 * libfuse asks for auto_inval_data by default: the kernel then drops
	 * a file's pages whenever a refreshed mtime differs from its own.  A
	 * write-through write is stamped by the kernel and by the daemon at
	 * different times, so the first read after every write would lose
	 * the whole file's pages.  The daemon is the only writer of BACKING
	 * and every change of the data goes through the kernel, which updates
	 * or drops its pages for it, so mtime has nothing to reveal.
	 */
	if (fs->cfg->cache == FFS_CACHE_WRITETHROUGH)
		conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	/*
	 * POSIX ACLs, where the kernel offers them: it then checks access
	 * against the ACLs it reads through getxattr (with
	 * default_permissions, always on), and sends the mode of a new name
	 * unmasked with the caller's umask beside it, which the backing file
	 * system applies unless the parent has a default ACL (the daemon
	 * creates with the caller's umask, ffs_creds_umask()).
	 */
	if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK)) {
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
		fs->posix_acl = true;
	}
	/* Locks stay in the kernel; we implement no getlk/setlk/flock. */
	conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
	if (conn->max_write > FFS_MAX_IO || conn->max_write == 0)
		conn->max_write = FFS_MAX_IO;
	/*
	 * Readahead and writeback requests, and asynchronous direct I/O,
	 * are "background" requests: the kernel keeps at most this many in
	 * flight (12 if not told) and skips asynchronous readahead once
	 * three quarters of them are (libfuse derives that threshold).
	 */
	conn->max_background = fs->cfg->max_background;
	conn->congestion_threshold = 0;
	/*
	 * The kernel cuts a larger write into requests of max_write bytes
	 * (of fewer when the caller's buffer is not page aligned: it pins
	 * at most max_write's worth of pages per request).  A request within
	 * a page of max_write was most likely cut, the rest to follow.
	 */
	fs->write_cut = conn->max_write - (size_t)sysconf(_SC_PAGESIZE);
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* The kernel's version (libfuse keeps it here): how to prune. */
	ffs_prune_init(fs, conn->proto_minor);
	/*
	 * Before any request that could change BACKING.  A log that cannot
	 * be made refuses every change (and said so), but cannot stop the mount.
	 */
	if (fs->cfg->write_log)
		(void)wb_wlog_open(fs->cfg->write_log, fs->root.fd);
}

/* ---- requests on inodes ---- */

static void d_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *dir = d_inode(req, parent);
	int ret = ffs_check_name(name);

	if (ret) {
		fuse_reply_err(req, -ret);
	} else if (d_pin(req, dir)) {
		dir->ops->lookup(req, dir, name);
		ffs_inode_unpin(fs, dir);
	}
}

static void d_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct ffs_inode *inode = d_inode(req, ino);

	inode->ops->forget(d_fs(req), inode, nlookup);
	fuse_reply_none(req);
}

static void d_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++) {
		struct ffs_inode *inode = d_inode(req, forgets[i].ino);

		inode->ops->forget(d_fs(req), inode, forgets[i].nlookup);
	}
	fuse_reply_none(req);
}

static void d_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *inode = d_inode(req, ino);

	if (d_pin(req, inode)) {
		inode->ops->getattr(req, inode, fi);
		ffs_inode_unpin(fs, inode);
	}
}

static void d_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
		      struct fuse_file_info *fi)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *inode = d_inode(req, ino);

	if (d_pin(req, inode)) {
		inode->ops->setattr(req, inode, attr, valid, fi);
		ffs_inode_unpin(fs, inode);
	}
}

static void d_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *inode = d_inode(req, ino);

	if (d_pin(req, inode)) {
		inode->ops->readlink(req, inode);
		ffs_inode_unpin(fs, inode);
	}
}

static void d_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		    dev_t rdev)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *dir = d_inode(req, parent);

	if (d_pin(req, dir)) {
		dir->ops->mknod(req, dir, name, mode, rdev);
		ffs_inode_unpin(fs, dir);
	}
}

static void d_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *dir = d_inode(req, parent);

	if (d_pin(req, dir)) {
		dir->ops->mkdir(req, dir, name, mode);
		ffs_inode_unpin(fs, dir);
	}
}

static void d_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *dir = d_inode(req, parent);

	if (d_pin(req, dir)) {
		dir->ops->unlink(req, dir, name);
		ffs_inode_unpin(fs, dir);
	}
}

static void d_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *dir = d_inode(req, parent);

	if (d_pin(req, dir)) {
		dir->ops->rmdir(req, dir, name);
		ffs_inode_unpin(fs, dir);
	}
}

static void d_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *dir = d_inode(req, parent);

	if (strnlen(link, PATH_MAX) >= PATH_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
	} else if (d_pin(req, dir)) {
		dir->ops->symlink(req, link, dir, name);
		ffs_inode_unpin(fs, dir);
	}
}

static void d_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		     fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *dir = d_inode(req, parent), *newdir = d_inode(req, newparent);

	if (d_pin2(req, dir, newdir)) {
		dir->ops->rename(req, dir, name, newdir, newname, flags);
		d_unpin2(fs, dir, newdir);
	}
}

static void d_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *newdir = d_inode(req, newparent), *inode = d_inode(req, ino);

	if (d_pin2(req, newdir, inode)) {
		newdir->ops->link(req, inode, newdir, newname);
		d_unpin2(fs, newdir, inode);
	}
}

static void d_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *inode = d_inode(req, ino);

	if (d_pin(req, inode)) {
		inode->ops->open(req, inode, fi);
		ffs_inode_unpin(fs, inode);
	}
}

static void d_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct ffs_inode *inode = d_inode(req, ino);

	inode->ops->read(req, inode, size, off, fi);
}

static void d_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct ffs_inode *inode = d_inode(req, ino);

	inode->ops->write(req, inode, buf, size, off, fi);
}

static void d_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ffs_inode *inode = d_inode(req, ino);

	inode->ops->flush(req, inode, fi);
}

static void d_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ffs_inode *inode = d_inode(req, ino);

	inode->ops->release(req, inode, fi);
}

static void d_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct ffs_inode *inode = d_inode(req, ino);

	inode->ops->fsync(req, inode, datasync, fi);
}

static void d_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *inode = d_inode(req, ino);

	if (d_pin(req, inode)) {
		inode->ops->opendir(req, inode, fi);
		ffs_inode_unpin(fs, inode);
	}
}

static void d_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct ffs_inode *inode = d_inode(req, ino);

	inode->ops->readdir(req, inode, size, off, fi);
}

static void d_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			  struct fuse_file_info *fi)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *inode = d_inode(req, ino);

	if (d_pin(req, inode)) {
		inode->ops->readdirplus(req, inode, size, off, fi);
		ffs_inode_unpin(fs, inode);
	}
}

static void d_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ffs_inode *inode = d_inode(req, ino);

	inode->ops->releasedir(req, inode, fi);
}

static void d_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		       struct fuse_file_info *fi)
{
	struct ffs_inode *inode = d_inode(req, ino);

	inode->ops->fsyncdir(req, inode, datasync, fi);
}

static void d_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *inode = d_inode(req, ino);

	if (d_pin(req, inode)) {
		inode->ops->statfs(req, inode);
		ffs_inode_unpin(fs, inode);
	}
}

static void d_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		       size_t size, int flags)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *inode = d_inode(req, ino);

	if (d_pin(req, inode)) {
		inode->ops->setxattr(req, inode, name, value, size, flags);
		ffs_inode_unpin(fs, inode);
	}
}

static void d_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *inode = d_inode(req, ino);

	if (d_pin(req, inode)) {
		inode->ops->getxattr(req, inode, name, size);
		ffs_inode_unpin(fs, inode);
	}
}

static void d_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *inode = d_inode(req, ino);

	if (d_pin(req, inode)) {
		inode->ops->listxattr(req, inode, size);
		ffs_inode_unpin(fs, inode);
	}
}

static void d_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *inode = d_inode(req, ino);

	if (d_pin(req, inode)) {
		inode->ops->removexattr(req, inode, name);
		ffs_inode_unpin(fs, inode);
	}
}

static void d_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *inode = d_inode(req, ino);

	if (d_pin(req, inode)) {
		inode->ops->access(req, inode, mask);
		ffs_inode_unpin(fs, inode);
	}
}

static void d_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     struct fuse_file_info *fi)
{
	struct ffs_data *fs = d_fs(req);
	struct ffs_inode *dir = d_inode(req, parent);

	if (d_pin(req, dir)) {
		dir->ops->create(req, dir, name, mode, fi);
		ffs_inode_unpin(fs, dir);
	}
}

static void d_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			struct fuse_file_info *fi)
{
	struct ffs_inode *inode = d_inode(req, ino);

	inode->ops->fallocate(req, inode, mode, off, len, fi);
}

static void d_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		    struct fuse_file_info *fi)
{
	struct ffs_inode *inode = d_inode(req, ino);

	inode->ops->lseek(req, inode, off, whence, fi);
}

static void d_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			      struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			      struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct ffs_inode *in = d_inode(req, ino_in);

	in->ops->copy_file_range(req, in, off_in, fi_in, d_inode(req, ino_out), off_out, fi_out,
				 len, flags);
}

const struct fuse_lowlevel_ops ffs_ops = {
	.init = d_init,
	.lookup = d_lookup,
	.forget = d_forget,
	.forget_multi = d_forget_multi,
	.getattr = d_getattr,
	.setattr = d_setattr,
	.readlink = d_readlink,
	.mknod = d_mknod,
	.mkdir = d_mkdir,
	.unlink = d_unlink,
	.rmdir = d_rmdir,
	.symlink = d_symlink,
	.rename = d_rename,
	.link = d_link,
	.open = d_open,
	.read = d_read,
	.write = d_write,
	.flush = d_flush,
	.release = d_release,
	.fsync = d_fsync,
	.opendir = d_opendir,
	.readdir = d_readdir,
	.readdirplus = d_readdirplus,
	.releasedir = d_releasedir,
	.fsyncdir = d_fsyncdir,
	.statfs = d_statfs,
	.setxattr = d_setxattr,
	.getxattr = d_getxattr,
	.listxattr = d_listxattr,
	.removexattr = d_removexattr,
	.access = d_access,
	.create = d_create,
	.fallocate = d_fallocate,
	.lseek = d_lseek,
	.copy_file_range = d_copy_file_range,
};
