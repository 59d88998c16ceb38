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

/* A failure to clear setuid/setgid has been logged. */
static atomic_bool kill_failure_logged;

/* FATTR_KILL_SUIDGID of a SETATTR; libfuse 3.14 hands it on under this name. */
#define FFS_SET_ATTR_KILL_SUIDGID FUSE_SET_ATTR_KILL_SUID

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
 * CAP_FSETID.
 * Context: FUSE worker thread; no lock held; the daemon's credentials.
 */
static void kill_suidgid(fuse_req_t req, struct ffs_inode *inode)
{
	uint64_t seq = atomic_load(&inode->mode_seq);
	struct ffs_procpath p;
	struct stat st;
	mode_t mode;
	int ret = 0;

	if (atomic_load(&inode->nosuid_seq) == seq + 1)
		return;		/* neither bit, and no change of the mode since */
	if (fstatat(inode->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		ret = -errno;
	if (!ret) {
		if (!(st.st_mode & (S_ISUID | S_ISGID))) {
			atomic_store(&inode->nosuid_seq, seq + 1);
			return;
		}
		mode = mode_after_write(req, &st);
		if (mode == (st.st_mode & 07777))
			return;
		ffs_procpath(&p, inode->fd);
		ret = chmod(p.path, mode) == 0 ? 0 : -errno;
		ffs_killpriv_mode_changed(inode);
		if (!ret)
			return;
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
}

void ffs_killpriv_data(fuse_req_t req, struct ffs_inode *inode)
{
	if (ffs_channel_kill_suidgid())
		kill_suidgid(req, inode);
}

void ffs_killpriv_setattr(fuse_req_t req, struct ffs_inode *inode, int valid)
{
	/*
	 * The mark comes with chown too, where the backing chown, made as
	 * the caller, has already cleared what it should.
	 */
	if ((valid & FUSE_SET_ATTR_SIZE) && (valid & FFS_SET_ATTR_KILL_SUIDGID))
		kill_suidgid(req, inode);
}

void ffs_killpriv_mode_changed(struct ffs_inode *inode)
{
	atomic_fetch_add(&inode->mode_seq, 1);
}
