// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * killpriv.c - setuid and setgid cleared by writes (kill-priv).
 *
 * On a local filesystem a write, a truncate or an O_TRUNC open by a caller
 * without CAP_FSETID clears setuid, and setgid when the file is group
 * executable or the caller is not in the file's group, whoever owns the
 * file: being allowed to write it is enough.
 *
 * We take the kernel's FUSE_HANDLE_KILLPRIV_V2 (channel.c asks for it)
 * rather than deciding in the daemon alone:
 *  - Without it the kernel does nothing for direct I/O writes, and for
 *    cached writes and truncates it sends a SETATTR mode change as the
 *    writer.  That is indistinguishable from a chmod, which a non-owner
 *    must be refused, so the whole write or truncate failed with EPERM;
 *    for an O_TRUNC open (atomic_o_trunc) the change was dropped.
 *  - With it the kernel sends no mode change; it marks the WRITE, the
 *    SETATTR with a size and the OPEN with O_TRUNC of a caller it found
 *    without CAP_FSETID, judged in the caller's own namespace.  The
 *    daemon would otherwise have to read CapEff from /proc/PID/status,
 *    which races with the caller's exit and says nothing for the
 *    flusher's writes (pid 0) in cache=writeback mode.
 *  - In cache=writeback mode such a write then goes through to the daemon
 *    at once instead of into the page cache, and the mount is SB_NOSEC,
 *    so the kernel no longer looks up security.capability on every write.
 * The daemon applies the bit rule itself (the mark only says "caller
 * without CAP_FSETID"), with its own privilege for that one chmod: it is
 * the change the kernel makes on a local filesystem, not the caller's.
 * A failure to clear (a non-root daemon and a file it does not own) is
 * logged and the write, truncate or open goes on: refusing a legitimate
 * write is worse than the bits staying.  Kernels without KILLPRIV_V2
 * (before 5.11) behave as before.
 *
 * What the kernel caches.  The kernel keeps a file's attributes for
 * attr_timeout (a day by default) and asks again only for what it knows
 * to be stale: after a WRITE it refreshes size and times, not the mode.
 * Left alone, it would go on showing the bits this daemon cleared, to a
 * stat that asks for the mode alone (`stat -c %a`), to its permission
 * checks and to exec, which would then run the file's new contents
 * setuid.  So the kernel's copy is made right before the request that
 * cleared the bits is answered:
 *  - SETATTR replies with the attributes, read after the clearing;
 *  - WRITE and OPEN(O_TRUNC) replies carry none: the daemon first tells
 *    the kernel that the inode's attributes are stale
 *    (fuse_lowlevel_notify_inval_inode() with a negative offset, which
 *    invalidates the attributes alone).  That notification takes no lock
 *    the kernel may hold while it waits for the reply (no page lock, no
 *    inode lock; the page invalidation a non-negative offset asks for
 *    could wait on the very pages a write-through WRITE holds locked), so
 *    it is safe from the handler.  Over io_uring it goes to /dev/fuse like
 *    any notification (uring.c), ahead of the reply, which is not built
 *    yet.
 * And the clearing comes before the data (or the truncation) reaches the
 * cache, and a GETATTR reads the cache before the backing inode
 * (ops.c, inode_attr()), so no stat at any moment sees the new data with
 * the old bits.
 *
 * Two more ways the kernel asks.  When it decides by itself that a
 * caller must lose the bits (file_remove_privs(): a fallocate, the
 * destination of a copy_file_range, a write through the kernel's cache),
 * it sends a SETATTR that sets nothing: it drops the mode change it
 * computed and has no mark to send.  chown(f, -1, -1) arrives the same
 * way.  The daemon answers it with the backing chown(-1, -1) as the
 * caller, which applies the local file system's own rule; when that is
 * refused (a caller who does not own the file, so not a chown the kernel
 * would allow either) and the caller may write the file, it is the
 * kernel's file_remove_privs() of a writer without CAP_FSETID, and the
 * write rule applies.  (So a non-owner who may write a setuid file and
 * calls chown(f, -1, -1) clears the bits where ext4 answers EPERM: the
 * same change a one-byte write of theirs makes.)
 *
 * The flusher's writes in cache=writeback mode (pid 0) carry no mark: the
 * kernel sends a marked writer's data through at once instead of into its
 * cache, deciding by the mode it has cached, which the replies above keep
 * right; what a writer put into the cache while the file had neither bit
 * keeps the bits set after it, as on a local file system.
 *
 * The kernel marks a request by the caller alone, not by the file's mode:
 * every write of a database running as its own user is marked.  So the
 * inode keeps a hint that its backing inode has neither bit (ffs_inode's
 * mode_seq and nosuid_seq), taken from the fstat that found none and
 * dropped by every change of the mode the daemon makes: a marked request
 * on such a file costs no system call (it cost one fstat per write, half
 * of the daemon's requests under pgbench).  Root, who has CAP_FSETID, is
 * never marked.
 */
#include "fusefs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A failure to clear setuid/setgid has been logged. */
static atomic_bool kill_failure_logged;
/* A failure to tell the kernel has been logged. */
static atomic_bool inval_failure_logged;

/* FATTR_KILL_SUIDGID of a SETATTR; libfuse 3.14 hands it on under this name. */
#define FFS_SET_ATTR_KILL_SUIDGID FUSE_SET_ATTR_KILL_SUID

/* What a SETATTR may set; one with none of these asks to remove privileges. */
#define FFS_SET_ATTR_ANY (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | \
			  FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | \
			  FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW)

/* The mode bits @st keeps after a write by the caller of @req. */
static mode_t mode_after_write(fuse_req_t req, const struct stat *st)
{
	mode_t mode = st->st_mode & 07777 & ~S_ISUID;

	if ((mode & S_ISGID) &&
	    ((mode & S_IXGRP) || !ffs_creds_in_group(req, st->st_gid)))
		mode &= ~S_ISGID;
	return mode;
}

/*
 * Clear setuid/setgid of @inode for the caller of @req, who lacks
 * CAP_FSETID.  True when the mode changed.
 * Context: FUSE worker thread; no lock held; the daemon's credentials.
 */
static bool kill_suidgid(fuse_req_t req, struct ffs_inode *inode)
{
	uint64_t seq = atomic_load(&inode->mode_seq);
	struct ffs_procpath p;
	struct stat st;
	mode_t mode;
	int ret = 0;

	if (atomic_load(&inode->nosuid_seq) == seq + 1)
		return false;	/* neither bit, and no change of the mode since */
	if (fstatat(inode->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		ret = -errno;
	if (!ret) {
		if (!(st.st_mode & (S_ISUID | S_ISGID))) {
			atomic_store(&inode->nosuid_seq, seq + 1);
			return false;
		}
		mode = mode_after_write(req, &st);
		if (mode == (st.st_mode & 07777))
			return false;
		ffs_procpath(&p, inode->fd);
		ret = chmod(p.path, mode) == 0 ? 0 : -errno;
		ffs_killpriv_mode_changed(inode);
		if (!ret)
			return true;
	}
	/*
	 * Once: a daemon that is not root fails so on every write to a file
	 * it does not own (its own writes to the backing file, lacking
	 * CAP_FSETID too, then clear the bits when the data is written back).
	 */
	if (!atomic_exchange(&kill_failure_logged, true))
		fuse_log(FUSE_LOG_WARNING, "warning: cannot clear setuid/setgid of inode %llu: %s "
			 "(further failures are not logged)\n",
			 (unsigned long long)inode->src_ino, strerror(-ret));
	return false;
}

/*
 * The kernel's cached attributes of @inode are stale (its mode changed
 * under a request whose reply cannot carry attributes): invalidate them,
 * before that reply.
 * Context: the handler of a request on @inode, before its reply; no lock held.
 */
static void inval_attr(fuse_req_t req, struct ffs_inode *inode)
{
	struct ffs_data *fs = fuse_req_userdata(req);
	fuse_ino_t ino = inode == &fs->root ? FUSE_ROOT_ID : (uintptr_t)inode;
	int ret = fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);

	/*
	 * ENOENT: the kernel holds no such inode, so nothing cached;
	 * ENOTCONN: the connection is going away.
	 */
	if (!ret || ret == -ENOENT || ret == -ENOTCONN)
		return;
	if (!atomic_exchange(&inval_failure_logged, true))
		fuse_log(FUSE_LOG_WARNING, "warning: cannot tell the kernel that the mode of inode "
			 "%llu changed: %s (further failures are not logged)\n",
			 (unsigned long long)inode->src_ino, strerror(-ret));
}

void ffs_killpriv_data(fuse_req_t req, struct ffs_inode *inode)
{
	if (ffs_channel_kill_suidgid() && kill_suidgid(req, inode))
		inval_attr(req, inode);
}

/*
 * A SETATTR that sets nothing: the kernel's file_remove_privs() for a
 * caller without CAP_FSETID, or chown(f, -1, -1) (see the top).  0 or
 * -errno for the reply.
 * Context: FUSE worker thread; no lock held; the daemon's credentials.
 */
static int remove_privs(fuse_req_t req, struct ffs_inode *inode)
{
	struct ffs_data *fs = fuse_req_userdata(req);
	bool may_write = false;
	struct ffs_procpath p;
	struct ffs_creds c;
	int ret = ffs_creds_enter(fs, req, &c);

	if (ret)
		return ret;
	if (fchownat(inode->fd, "", (uid_t)-1, (gid_t)-1,
		     AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		ret = -errno;
	if (ret == -EPERM && inode->type == S_IFREG) {
		ffs_procpath(&p, inode->fd);
		may_write = faccessat(AT_FDCWD, p.path, W_OK, AT_EACCESS) == 0;
	}
	ffs_creds_leave(&c);
	ffs_killpriv_mode_changed(inode);
	if (!may_write)
		return ret;
	(void)kill_suidgid(req, inode);	/* the SETATTR's reply carries the mode */
	return 0;
}

int ffs_killpriv_setattr(fuse_req_t req, struct ffs_inode *inode, int valid)
{
	if (!(valid & FFS_SET_ATTR_ANY))
		return remove_privs(req, inode);
	/*
	 * The mark comes with chown too, where the backing chown, made as
	 * the caller, clears what it should.
	 */
	if ((valid & FUSE_SET_ATTR_SIZE) && (valid & FFS_SET_ATTR_KILL_SUIDGID))
		(void)kill_suidgid(req, inode);
	return 0;
}

void ffs_killpriv_mode_changed(struct ffs_inode *inode)
{
	atomic_fetch_add(&inode->mode_seq, 1);
}
