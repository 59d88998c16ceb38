// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * files.c - the context's two lists of files: every live file
 * (wb_ctx.files, for sync-all and the listings) and the dirty list
 * (wb_ctx.dirty, the files with dirty or unsynced data, which the
 * flushers and reclaim walk, as the kernel walks b_dirty and never a
 * clean inode), with the walkers' references that keep a file from being
 * freed under them.
 *
 * Both lists are list.h lists under files_lock.  A file goes on the dirty
 * list when it may hold dirty or unsynced data (wb_file_dirtied: a write
 * begins, or the engine's dirtied op after a pass wrote some of it or a
 * sync failed) and comes off when a walk finds it clean and synced
 * (wb_dirty_snapshot); see wb_file.on_dirty for why no change is lost.
 *
 * A leaf of writeback/ but for util.c: it calls no other file of the
 * layer, so the engine's ops (backing.c) and the flushers (flush.c) both
 * call it without calling each other.
 */
#include "wb_i.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* Context: files_lock held, @wbf not on the list (on_dirty: the caller's). */
static void dirty_link(struct wb_ctx *ctx, struct wb_file *wbf)
{
	list_push_front(&ctx->dirty, &wbf->dirty_link);
	ctx->nr_dirty++;
}

/* Context: files_lock held, @wbf on the list (on_dirty: the caller's). */
static void dirty_unlink(struct wb_ctx *ctx, struct wb_file *wbf)
{
	list_unlink(&wbf->dirty_link);
	ctx->nr_dirty--;
}

/* ---- every file (wb_ctx.files) ---- */

void wb_files_add(struct wb_ctx *ctx, struct wb_file *wbf)
{
	pthread_mutex_lock(&ctx->files_lock);
	wbf->seq = ctx->next_seq++;
	list_push_front(&ctx->files, &wbf->files_link);
	pthread_mutex_unlock(&ctx->files_lock);
}

void wb_files_del(struct wb_ctx *ctx, struct wb_file *wbf)
{
	pthread_mutex_lock(&ctx->files_lock);
	wbf->dying = true;
	while (wbf->refs)
		pthread_cond_wait(&ctx->files_cond, &ctx->files_lock);
	list_unlink(&wbf->files_link);
	if (atomic_exchange(&wbf->on_dirty, false))
		dirty_unlink(ctx, wbf);
	pthread_mutex_unlock(&ctx->files_lock);
}

struct wb_file *wb_files_first(struct wb_ctx *ctx)
{
	struct list_node *node;

	pthread_mutex_lock(&ctx->files_lock);
	node = list_first(&ctx->files);
	pthread_mutex_unlock(&ctx->files_lock);
	return node ? list_entry(node, struct wb_file, files_link) : NULL;
}

uint64_t wb_files_nr_keys(struct wb_ctx *ctx)
{
	uint64_t nr;

	pthread_mutex_lock(&ctx->files_lock);
	nr = ctx->next_seq;
	pthread_mutex_unlock(&ctx->files_lock);
	return nr;
}

struct wb_file *wb_next_file(struct wb_ctx *ctx, struct wb_file *prev)
{
	struct list_node *node;
	struct wb_file *f = NULL;

	pthread_mutex_lock(&ctx->files_lock);
	/* @prev is still on the list: its reference keeps it there. */
	node = prev ? list_next(&ctx->files, &prev->files_link) : list_first(&ctx->files);
	for (; node && !f; node = list_next(&ctx->files, node)) {
		f = list_entry(node, struct wb_file, files_link);
		if (f->dying)
			f = NULL;
		else
			f->refs++;
	}
	if (prev && --prev->refs == 0 && prev->dying)
		pthread_cond_broadcast(&ctx->files_cond);
	pthread_mutex_unlock(&ctx->files_lock);
	return f;
}

/* ---- the dirty list (wb_ctx.dirty) ---- */

void wb_file_dirtied(struct wb_file *wbf)
{
	struct wb_ctx *ctx = wbf->ctx;

	if (atomic_load(&wbf->on_dirty))
		return;
	pthread_mutex_lock(&ctx->files_lock);
	if (!atomic_load(&wbf->on_dirty)) {
		dirty_link(ctx, wbf);
		atomic_store(&wbf->on_dirty, true);
	}
	pthread_mutex_unlock(&ctx->files_lock);
}

/*
 * Whether @wbf, on the dirty list, stays on it: its age is set, it
 * holds unsynced blocks or a write is dirtying it; if not, it is taken off (the order of the
 * loads and the store: see wb_file.on_dirty).  Context: files_lock held.
 */
static bool dirty_keep(struct wb_file *wbf)
{
	atomic_store(&wbf->on_dirty, false);
	if (atomic_load(&wbf->writing) || atomic_load(&wbf->ws.dirtied_ns) ||
	    bs_file_has_unsynced(wbf->ws.bs)) {
		atomic_store(&wbf->on_dirty, true);
		return true;
	}
	dirty_unlink(wbf->ctx, wbf);
	return false;
}

int wb_dirty_check(struct wb_ctx *ctx)
{
	unsigned int nr = 0, bad = 0;
	struct wb_file *f;

	pthread_mutex_lock(&ctx->files_lock);
	list_for_each_entry(f, &ctx->dirty, dirty_link) {
		nr++;
		bad += !atomic_load(&f->on_dirty);
		bad += f->dirty_link.next->prev != &f->dirty_link;
	}
	bad += nr != ctx->nr_dirty;
	list_for_each_entry(f, &ctx->files, files_link) {
		char path[PATH_MAX];

		if (atomic_load(&f->on_dirty) ||
		    (!atomic_load(&f->writing) && !atomic_load(&f->ws.dirtied_ns) &&
		     !bs_file_has_held(f->ws.bs) && !bs_file_has_unsynced(f->ws.bs)))
			continue;
		wb_file_path(f, path, sizeof(path));
		fprintf(stderr, "writeback: %s holds dirty or unsynced data but is not on the dirty list\n",
			path);
		bad++;
	}
	pthread_mutex_unlock(&ctx->files_lock);
	if (bad)
		fprintf(stderr, "writeback: the dirty list does not add up (%u files on it, nr_dirty %u)\n",
			nr, ctx->nr_dirty);
	return bad ? -EUCLEAN : 0;
}

static int by_seq(const void *a, const void *b)
{
	const struct wb_file *fa = *(struct wb_file *const *)a, *fb = *(struct wb_file *const *)b;

	return (fa->seq > fb->seq) - (fa->seq < fb->seq);
}

int wb_dirty_snapshot(struct wb_ctx *ctx, struct wb_dirty_snapshot *snap, bool sorted)
{
	struct list_node *node, *next;

	pthread_mutex_lock(&ctx->files_lock);
	while (ctx->nr_dirty > snap->cap) {
		unsigned int cap = ctx->nr_dirty * 2;
		struct wb_file **files;

		pthread_mutex_unlock(&ctx->files_lock);
		files = realloc(snap->files, cap * sizeof(struct wb_file *));
		if (!files)
			return -ENOMEM;
		snap->files = files;
		snap->cap = cap;
		pthread_mutex_lock(&ctx->files_lock);
	}
	snap->nr = 0;
	for (node = list_first(&ctx->dirty); node; node = next) {
		struct wb_file *f = list_entry(node, struct wb_file, dirty_link);

		/* Looked up first: dirty_keep() may take @f off. */
		next = list_next(&ctx->dirty, node);
		if (f->dying || !dirty_keep(f))
			continue;
		f->refs++;
		snap->files[snap->nr++] = f;
	}
	pthread_mutex_unlock(&ctx->files_lock);
	/* qsort's base must not be NULL, even for no elements. */
	if (sorted && snap->nr > 1)
		qsort(snap->files, snap->nr, sizeof(struct wb_file *), by_seq);
	return 0;
}

void wb_dirty_snapshot_put(struct wb_ctx *ctx, struct wb_dirty_snapshot *snap)
{
	bool wake = false;

	pthread_mutex_lock(&ctx->files_lock);
	for (unsigned int i = 0; i < snap->nr; i++) {
		struct wb_file *f = snap->files[i];

		if (--f->refs == 0 && f->dying)
			wake = true;
	}
	if (wake)
		pthread_cond_broadcast(&ctx->files_cond);
	pthread_mutex_unlock(&ctx->files_lock);
	snap->nr = 0;
}

void wb_dirty_snapshot_free(struct wb_dirty_snapshot *snap)
{
	free(snap->files);
	*snap = (struct wb_dirty_snapshot){ 0 };
}
