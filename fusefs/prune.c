// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * prune.c - asking the kernel to forget cold inodes when the inode table
 * nears its bound (max_inodes=).
 *
 * The daemon cannot drop an inode the kernel has looked up: the kernel
 * may name it in any request until it sends FORGET.  It sends FORGET when
 * it evicts the inode, which for FUSE is as soon as no dentry or open
 * file holds it; it drops unused dentries itself only under memory
 * pressure.  So when the table passes PRUNE_HIGH of its bound, a thread of
 * its own picks inodes nobody used since its last pass (inode.c's clock,
 * ffs_itable_cold) and asks the kernel to drop them, until what it asked
 * for would bring the table down to PRUNE_LOW:
 *
 *  - FUSE_NOTIFY_PRUNE (protocol 7.45, Linux 6.18) with up to
 *    PRUNE_BATCH node ids at a time: the kernel drops the unused dentries
 *    of each (all its names), and the inodes left without one are evicted
 *    and forgotten.  Written to /dev/fuse directly, as libfuse 3.14 does
 *    not know it.
 *  - Before that, fuse_lowlevel_notify_inval_entry() on the name the
 *    table knows for each: the dentry is dropped; an inode with other
 *    names cached stays.
 *
 * Both only drop what nobody uses: an open file, a working directory, a
 * directory with children in the kernel's cache stay, and the table may
 * grow past its bound (it never refuses a lookup: logged once).  They are
 * sent from this thread and never from a request's handler: the kernel
 * takes the directory's lock for inval_entry, which a request in flight
 * may hold while it waits for the daemon.
 */
#include "fusefs.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

/* In Linux 6.18's <linux/fuse.h> (7.45); not in Debian 12's. */
#define FFS_FUSE_NOTIFY_PRUNE 9
#define FFS_FUSE_PRUNE_MINOR 45

/*
 * Pruning starts above PRUNE_HIGH and asks for enough to reach PRUNE_LOW
 * (fractions of max_inodes), so that a walk past the bound prunes in
 * batches and not at every lookup.
 */
#define PRUNE_HIGH(max) ((max) - (max) / 16)
#define PRUNE_LOW(max) ((max) - (max) / 8)

/* The kernel's FUSE_NOTIFY_PRUNE reads node ids in batches of 512. */
#define PRUNE_BATCH 512

struct ffs_prune {
	struct ffs_data *fs;
	struct fuse_session *se;
	pthread_t thread;
	/*
	 * Protects wanted, stop.  Taken under itable_lock (ffs_prune_wake),
	 * so never held while taking it.
	 */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool wanted;
	bool stop;
	bool kernel_prune;	/* FUSE_NOTIFY_PRUNE; else inval_entry */
	bool stuck_logged;
	struct ffs_cold cold[PRUNE_BATCH];
};

void ffs_prune_init(struct ffs_data *fs, unsigned int proto_minor)
{
	fs->prune_kernel = proto_minor >= FFS_FUSE_PRUNE_MINOR;
}

size_t ffs_prune_high(size_t max_inodes)
{
	return PRUNE_HIGH(max_inodes);
}

/* One FUSE_NOTIFY_PRUNE of @n node ids: 0 or -errno. */
static int notify_prune(struct ffs_prune *p, size_t n)
{
	struct {
		struct fuse_out_header h;
		uint32_t count;
		uint32_t padding;
		uint64_t spare;
	} msg;
	uint64_t ids[PRUNE_BATCH];
	struct iovec iov[2];
	ssize_t len;

	for (size_t i = 0; i < n; i++)
		ids[i] = p->cold[i].nodeid;
	memset(&msg, 0, sizeof(msg));
	msg.h.len = (uint32_t)(sizeof(msg) + n * sizeof(uint64_t));
	msg.h.error = FFS_FUSE_NOTIFY_PRUNE;
	msg.count = (uint32_t)n;
	iov[0] = (struct iovec){ &msg, sizeof(msg) };
	iov[1] = (struct iovec){ ids, n * sizeof(uint64_t) };
	len = writev(fuse_session_fd(p->se), iov, 2);
	if (len < 0)
		return -errno;
	return len == (ssize_t)msg.h.len ? 0 : -EIO;
}

/* inval_entry of each name: the count sent. */
static size_t notify_inval(struct ffs_prune *p, size_t n)
{
	size_t sent = 0;

	for (size_t i = 0; i < n; i++) {
		const struct ffs_cold *c = &p->cold[i];

		if (!fuse_lowlevel_notify_inval_entry(p->se, c->parent, c->name, strlen(c->name)))
			sent++;
	}
	return sent;
}

/* Ask the kernel to forget @n cold inodes: how many it was asked for. */
static size_t prune_send(struct ffs_prune *p, size_t n)
{
	int ret;

	if (p->kernel_prune) {
		ret = notify_prune(p, n);
		if (!ret)
			return n;
		/* ENOENT: the mount is gone.  Else: not this kernel after all. */
		if (ret == -ENOENT || ret == -ENODEV)
			return 0;
		fuse_log(FUSE_LOG_NOTICE, "prune: FUSE_NOTIFY_PRUNE refused (%s): "
			 "dropping names with inval_entry instead\n", strerror(-ret));
		p->kernel_prune = false;
	}
	return notify_inval(p, n);
}

/*
 * One round: from above PRUNE_HIGH, ask for enough to come down to
 * PRUNE_LOW.  How many the kernel was asked to forget.
 */
static size_t prune_round(struct ffs_prune *p)
{
	struct ffs_data *fs = p->fs;
	size_t max = fs->cfg->max_inodes, now = ffs_itable_count(fs), want, asked = 0;
	size_t budget = 2 * now + PRUNE_BATCH;	/* inodes looked at: one pass and a bit */

	if (now <= PRUNE_HIGH(max))
		return 0;
	want = now - PRUNE_LOW(max);
	while (asked < want && budget) {
		size_t n = want - asked < PRUNE_BATCH ? want - asked : PRUNE_BATCH;

		n = ffs_itable_cold(fs, p->cold, n, &budget);
		if (!n)
			break;
		n = prune_send(p, n);
		if (!n)
			break;
		asked += n;
		atomic_fetch_add(&fs->inodes_pruned, n);
	}
	/*
	 * Nothing to ask for in a whole pass of the clock, past the bound
	 * itself (not merely above PRUNE_HIGH while a walk adds inodes that
	 * are still in use).
	 */
	if (!asked && now > max && !p->stuck_logged) {
		p->stuck_logged = true;
		fuse_log(FUSE_LOG_NOTICE, "prune: %zu inodes known, max_inodes=%zu, all in "
			 "use by the kernel (open, or with names below them cached): the "
			 "table grows past its bound (logged once)\n", now, max);
	}
	return asked;
}

/*
 * Rounds while the table stays above PRUNE_HIGH and the kernel forgets
 * what it is asked to; between two, PRUNE_SETTLE_MS for the forgets of
 * the last to arrive (the kernel sends them as it evicts), so that the
 * next does not ask for the same share again.  When a round brings no
 * forget (the kernel holds every inode asked for), the next wake-up is
 * only once the table has grown by another sixteenth of its bound, so
 * that a table held above its mark is not swept at every lookup.
 */
#define PRUNE_SETTLE_MS 20

/* Wait @ms, or until stopped.  Context: p->lock held. */
static void prune_settle(struct ffs_prune *p, long ms)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += ms * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (!p->stop && pthread_cond_timedwait(&p->cond, &p->lock, &until) == 0)
		;
}

/*
 * One round and what follows it.
 * Context: p->lock held on entry and on return, dropped meanwhile: it is
 * never held while itable_lock is taken, as ffs_prune_wake() takes it
 * under itable_lock.
 */
static void prune_step(struct ffs_prune *p)
{
	struct ffs_data *fs = p->fs;
	size_t max = fs->cfg->max_inodes, now;
	uint64_t forgotten = atomic_load(&fs->inodes_forgotten);
	bool again = false;
	size_t asked;

	pthread_mutex_unlock(&p->lock);
	asked = prune_round(p);
	if (asked) {
		pthread_mutex_lock(&p->lock);
		prune_settle(p, PRUNE_SETTLE_MS);
		pthread_mutex_unlock(&p->lock);
	}
	now = ffs_itable_count(fs);
	if (asked && atomic_load(&fs->inodes_forgotten) != forgotten) {
		atomic_store(&fs->prune_high, PRUNE_HIGH(max));
		again = now > PRUNE_HIGH(max);
	} else if (now > PRUNE_HIGH(max)) {
		atomic_store(&fs->prune_high, now + max / 16);
	}
	pthread_mutex_lock(&p->lock);
	p->wanted |= again;
}

static void *prune_thread(void *arg)
{
	struct ffs_prune *p = arg;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->wanted && !p->stop)
			pthread_cond_wait(&p->cond, &p->lock);
		if (p->stop)
			break;
		p->wanted = false;
		prune_step(p);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int ffs_prune_start(struct ffs_data *fs, struct fuse_session *se)
{
	struct ffs_prune *p = calloc(1, sizeof(*p));
	int ret;

	if (!p)
		return -ENOMEM;
	p->fs = fs;
	p->se = se;
	p->kernel_prune = fs->prune_kernel;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	ret = pthread_create(&p->thread, NULL, prune_thread, p);
	if (ret) {
		pthread_mutex_destroy(&p->lock);
		pthread_cond_destroy(&p->cond);
		free(p);
		return -ret;
	}
	atomic_store(&fs->prune, p);
	return 0;
}

void ffs_prune_wake(struct ffs_data *fs)
{
	struct ffs_prune *p = atomic_load(&fs->prune);

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	if (!p->wanted) {
		p->wanted = true;
		pthread_cond_signal(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
}

void ffs_prune_stop(struct ffs_data *fs)
{
	struct ffs_prune *p = atomic_exchange(&fs->prune, NULL);

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
}
