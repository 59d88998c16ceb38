// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * creds.c - run one request with the caller's credentials.
 *
 * When the daemon runs as root for several users (allow_other), requests
 * that create or change something in the backing directory run with the
 * caller's fsuid, fsgid and supplementary groups, so that ownership,
 * setgid directories and group permissions come out as on a local
 * filesystem.  All three are per-thread in the kernel; glibc's setgroups()
 * would change every thread of the process, so the raw syscall is used.
 * Order on entry: groups, gid, uid (CAP_SETGID is still held); on leave
 * the reverse, back to the daemon's own credentials.
 */
#include "fusefs.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Supplementary groups fetched without allocating. */
#define CREDS_STACK_GROUPS 64

static uid_t daemon_uid;
static gid_t daemon_gid;
static gid_t *daemon_groups;
static int daemon_ngroups;

/*
 * The umask lives in the fs_struct, which a thread shares with the thread
 * that created it (libfuse starts workers from workers) until it unshares.
 */
static __thread bool own_umask;

static int own_fs_struct(void)
{
	if (!own_umask) {
		if (unshare(CLONE_FS) < 0)
			return -errno;
		own_umask = true;
	}
	return 0;
}

int ffs_creds_umask(struct ffs_data *fs, fuse_req_t req)
{
	int ret;

	if (!fs->posix_acl)
		return 0;	/* the kernel applied it: the daemon's umask is 0 */
	ret = own_fs_struct();
	if (!ret)
		umask(fuse_req_ctx(req)->umask);
	return ret;
}

int ffs_creds_daemon_umask(void)
{
	int ret = own_fs_struct();

	if (!ret)
		umask(0);
	return ret;
}

void ffs_creds_umask_end(struct ffs_data *fs)
{
	if (fs->posix_acl)
		umask(0);
}

int ffs_creds_init(void)
{
	int n = getgroups(0, NULL);

	daemon_uid = geteuid();
	daemon_gid = getegid();
	if (n < 0)
		return -errno;
	daemon_groups = calloc(n ? n : 1, sizeof(gid_t));
	if (!daemon_groups)
		return -ENOMEM;
	daemon_ngroups = getgroups(n, daemon_groups);
	return daemon_ngroups < 0 ? -errno : 0;
}

static int set_groups(int n, const gid_t *groups)
{
	return syscall(SYS_setgroups, n, groups) < 0 ? -errno : 0;
}

/* setfsuid() reports no error: read the value back. */
static int set_ids(uid_t uid, gid_t gid)
{
	setfsgid(gid);
	setfsuid(uid);
	if ((uid_t)setfsuid(-1) != uid || (gid_t)setfsgid(-1) != gid)
		return -EPERM;
	return 0;
}

/* The caller's groups; a caller that has gone away gets none. */
static int caller_groups(fuse_req_t req, gid_t *stack, gid_t **groups)
{
	int n = fuse_req_getgroups(req, CREDS_STACK_GROUPS, stack);

	*groups = stack;
	if (n < 0)
		return 0;
	if (n > CREDS_STACK_GROUPS) {
		int size = n;
		gid_t *heap = calloc(size, sizeof(gid_t));

		if (!heap)
			return -ENOMEM;
		n = fuse_req_getgroups(req, size, heap);
		if (n < 0)
			n = 0;
		/* Joined more groups since: only @size were filled in. */
		if (n > size)
			n = size;
		*groups = heap;
	}
	return n;
}

bool ffs_creds_in_group(fuse_req_t req, gid_t gid)
{
	gid_t stack[CREDS_STACK_GROUPS], *groups;
	bool found;
	int n;

	if (fuse_req_ctx(req)->gid == gid)
		return true;
	n = caller_groups(req, stack, &groups);
	if (n < 0)
		return false;	/* no memory: as if not a member */
	found = false;
	for (int i = 0; i < n && !found; i++)
		found = groups[i] == gid;
	if (groups != stack)
		free(groups);
	return found;
}

int ffs_creds_enter(struct ffs_data *fs, fuse_req_t req, struct ffs_creds *c)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t stack[CREDS_STACK_GROUPS], *groups;
	int n, ret;

	c->switched = false;
	if (!fs->act_as_caller || (ctx->uid == daemon_uid && ctx->gid == daemon_gid))
		return 0;
	n = caller_groups(req, stack, &groups);
	if (n < 0)
		return n;
	ret = set_groups(n, groups);
	if (groups != stack)
		free(groups);
	if (!ret)
		ret = set_ids(ctx->uid, ctx->gid);
	c->switched = true;
	if (ret) {
		ffs_creds_leave(c);
		return ret;
	}
	return 0;
}

void ffs_creds_leave(struct ffs_creds *c)
{
	if (!c->switched)
		return;
	if (set_ids(daemon_uid, daemon_gid) ||
	    set_groups(daemon_ngroups, daemon_groups)) {
		/* Serving later requests with a user's identity is worse. */
		fprintf(stderr, "foliofs: error: cannot restore the daemon's credentials: %s\n",
			strerror(errno));
		abort();
	}
	c->switched = false;
}
