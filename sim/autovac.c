// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * autovac.c - PostgreSQL 15's autovacuum of pgbench_accounts for the
 * pgbench generator: the trigger, the three passes, the buffer ring and
 * the cost-based delay.  The model and its sources are in autovac.h.
 *
 * The worker is a state machine on the generator's clock: av_run_until()
 * runs its naptime checks and its pages in time order, one page a step,
 * up to the time of the generator's next transaction, so that the
 * transactions and the worker see each other's changes in the order they
 * happen.  Its clock only moves by its sleeps (vacuum_delay_point()).
 */
#include "autovac.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull

/*
 * Of the updates that find room, the HOT share: 0.979, from
 * contrib/results/decay-kernel-2026-12-07 (back-to-back: PostgreSQL
 * 15.18, scale 26, fillfactor 100, 16 clients): 95% of 1,417,000 updates
 * were HOT, 70,850 not; the first update of each of the 42,623 pages
 * (all updated, 33 times on average) found no room, so 28,227 of the
 * 1,374,377 that found room were not HOT: 1 - 28,227 / 1,374,377.
 */
#define AV_HOT_PPM_DEFAULT 979000u

/*
 * The free space map's block of the page at @level (0: leaves) with
 * logical number @logpageno: fsm_logical_to_physical(), three levels.
 */
static uint64_t fsm_block(unsigned int level, uint64_t logpageno)
{
	uint64_t leafno = logpageno, pages = 0;

	for (unsigned int l = 0; l < level; l++)
		leafno *= AV_HEAP_PER_FSM_PAGE;
	for (unsigned int l = 0; l < 3; l++) {
		pages += leafno + 1;
		leafno /= AV_HEAP_PER_FSM_PAGE;
	}
	return pages - level - 1;
}

void av_params_default(struct av_params *prm)
{
	*prm = (struct av_params){
		.naptime_ns = 60 * NS_PER_S, .threshold = 50, .scale = 0.2, .cost_limit = 200,
		.cost_delay_ns = 2 * NS_PER_MS, .cost_hit = 1, .cost_miss = 2, .cost_dirty = 20,
		.hot_ppm = AV_HOT_PPM_DEFAULT, .ring = 32,
	};
}

int av_init(struct av_state *av, const struct av_params *prm, const struct av_ops *ops, void *ctx,
	    uint32_t pid, uint64_t heap_pages, uint64_t idx_pages, uint64_t reltuples, uint8_t room)
{
	uint64_t hw = av_bit_words(heap_pages), iw = av_bit_words(idx_pages);

	*av = (struct av_state){
		.prm = *prm, .ops = ops, .ctx = ctx, .pid = pid, .heap_pages = heap_pages,
		.idx_pages = idx_pages, .reltuples = reltuples, .next_check_ns = prm->naptime_ns,
	};
	av->vm_pages = (heap_pages + AV_HEAP_PER_VM_PAGE - 1) / AV_HEAP_PER_VM_PAGE;
	av->fsm_pages = heap_pages ? fsm_block(0, (heap_pages - 1) / AV_HEAP_PER_FSM_PAGE) + 1 : 0;
	av->allvis = calloc(hw, 8);
	av->hot = calloc(hw, 8);
	av->unpruned = calloc(hw, 8);
	av->room = malloc(heap_pages + 1);
	av->dead = calloc(hw, 8);
	av->vac = calloc(hw, 8);
	av->changed = calloc(hw, 8);
	av->idx_dead = calloc(iw + 1, 8);
	av->idx_vac = calloc(iw + 1, 8);
	av->vm_dirty = calloc(av->vm_pages + 1, 1);
	av->vm_ckpt = calloc(av->vm_pages + 1, 1);
	av->vm_logged = calloc(av->vm_pages + 1, 1);
	av->fsm_dirty = calloc(av->fsm_pages + 1, 1);
	av->fsm_ckpt = calloc(av->fsm_pages + 1, 1);
	av->ring = calloc(prm->ring ? prm->ring : 1, sizeof(*av->ring));
	if (!av->allvis || !av->hot || !av->unpruned || !av->room || !av->dead || !av->vac || !av->changed || !av->idx_dead ||
	    !av->idx_vac || !av->vm_dirty || !av->vm_ckpt || !av->vm_logged || !av->fsm_dirty ||
	    !av->fsm_ckpt || !av->ring) {
		av_destroy(av);
		return -ENOMEM;
	}
	/* pgbench -i ends with a VACUUM: every page all-visible */
	memset(av->allvis, 0xff, hw * 8);
	memset(av->room, room, heap_pages + 1);
	return 0;
}

void av_destroy(struct av_state *av)
{
	free(av->allvis);
	free(av->hot);
	free(av->unpruned);
	free(av->room);
	free(av->dead);
	free(av->vac);
	free(av->changed);
	free(av->idx_dead);
	free(av->idx_vac);
	free(av->vm_dirty);
	free(av->vm_ckpt);
	free(av->vm_logged);
	free(av->fsm_dirty);
	free(av->fsm_ckpt);
	free(av->ring);
	memset(av, 0, sizeof(*av));
}

uint64_t av_trigger(const struct av_state *av)
{
	return av->prm.threshold + (uint64_t)(av->prm.scale * (double)av->reltuples);
}

/* One more dead tuple on @page, and whether the running scan will see it. */
static void dead_add(struct av_state *av, uint64_t page)
{
	av->n_dead++;
	if (av->phase == AV_HEAP_SCAN && page >= av->pos)
		av->recent++;
}

/* Pruning gives back the room of the dead versions @page holds; @count: the HOT one's count. */
static void prune(struct av_state *av, uint64_t page, bool count)
{
	if (av_bit_test(av->hot, page)) {
		av_bit_clear(av->hot, page);
		av->room[page] += av->room[page] < UINT8_MAX;
		if (count && av->n_dead)
			av->n_dead--;
	}
	if (av_bit_test(av->unpruned, page)) {
		av_bit_clear(av->unpruned, page);
		av->room[page] += av->room[page] < UINT8_MAX;
	}
}

/*
 * Context: the generator's transaction, between av_run_until() calls.
 * The access prunes the page; the update is HOT when it has room then
 * (and the (1 - hot) accumulator does not say otherwise), else it
 * leaves a dead item and an index entry to remove.
 */
bool av_note_update(struct av_state *av, uint64_t page, uint64_t leaf)
{
	bool hot = false;

	av_bit_clear(av->allvis, page);
	av_bit_set(av->changed, page);
	prune(av, page, true);
	if (av->room[page]) {
		av->cold_acc += AV_PPM - av->prm.hot_ppm;
		hot = av->cold_acc < AV_PPM;
		if (!hot)
			av->cold_acc -= AV_PPM;
	}
	av->updates++;
	if (hot) {
		av->hot_updates++;
		av->room[page]--;
		av_bit_set(av->hot, page);
	} else {
		av_bit_set(av->dead, page);
		av_bit_set(av->unpruned, page);
		if (leaf < av->idx_pages)
			av_bit_set(av->idx_dead, leaf);
	}
	dead_add(av, page);
	return hot;
}

/* ---- buffers and cost ---- */

/* The sleep vacuum_delay_point() takes now: delay x balance / limit, at most 4 x delay. */
static uint64_t delay_ns(const struct av_state *av)
{
	const struct av_params *prm = &av->prm;
	uint64_t ns;

	if (!prm->cost_delay_ns || av->balance < prm->cost_limit)
		return 0;
	ns = (uint64_t)((unsigned __int128)prm->cost_delay_ns * av->balance / prm->cost_limit);
	return ns < 4 * prm->cost_delay_ns ? ns : 4 * prm->cost_delay_ns;
}

/* vacuum_delay_point(): sleep once the balance reaches the limit. */
static void delay_point(struct av_state *av)
{
	uint64_t ns = delay_ns(av);

	if (!ns)
		return;
	av->t_ns += ns;
	av->cur.sleeps++;
	av->cur.slept_ns += ns;
	av->balance = 0;
}

static void count_io(struct av_state *av, enum av_io op, enum av_rel rel)
{
	bool heap = rel == AV_HEAP;

	if (op == AV_READ) {
		av->cur.reads++;
		*(heap ? &av->cur.heap_reads : &av->cur.index_reads) += 1;
	} else {
		av->cur.writes++;
		*(heap ? &av->cur.heap_writes : &av->cur.index_writes) += 1;
	}
}

/* A ring buffer about to be reused: written first when the worker dirtied it. */
static int ring_clean(struct av_state *av, struct av_slot *s)
{
	int ret;

	if (!s->used || !s->dirty)
		return 0;
	if (s->lsn) {
		ret = av->ops->wal_flush(av->ctx, av->t_ns, av->pid, s->lsn);
		if (ret < 0)
			return ret;
		av->cur.wal_flushes += (uint64_t)ret;
	}
	s->dirty = false;
	count_io(av, AV_WRITE, (enum av_rel)s->rel);
	return av->ops->io(av->ctx, av->t_ns, av->pid, AV_WRITE, (enum av_rel)s->rel, s->page);
}

/*
 * The worker needs a heap or index page: a hit costs cost_hit; a miss
 * cost_miss and a read into the next ring buffer (*@slot), whose page is
 * written first if dirty.  *@slot is NULL for a hit.
 */
static int access_page(struct av_state *av, enum av_rel rel, uint64_t page, struct av_slot **slot)
{
	struct av_slot *s;
	int ret;

	*slot = NULL;
	if (av->ops->lookup(av->ctx, rel, page)) {
		av->balance += av->prm.cost_hit;
		av->cur.hits++;
		return 0;
	}
	av->balance += av->prm.cost_miss;
	av->cur.misses++;
	s = &av->ring[av->ring_next];
	av->ring_next = (av->ring_next + 1) % (av->prm.ring ? av->prm.ring : 1);
	ret = ring_clean(av, s);
	if (ret)
		return ret;
	*s = (struct av_slot){ .page = page, .rel = (uint8_t)rel, .used = true };
	*slot = s;
	count_io(av, AV_READ, rel);
	return av->ops->io(av->ctx, av->t_ns, av->pid, AV_READ, rel, page);
}

/* MarkBufferDirty(Hint): cost_dirty when the buffer was clean. */
static void dirty_page(struct av_state *av, enum av_rel rel, uint64_t page, struct av_slot *s)
{
	if (s ? s->dirty : av->ops->is_dirty(av->ctx, rel, page))
		return;
	if (s)
		s->dirty = true;
	else
		av->ops->set_dirty(av->ctx, rel, page);
	av->balance += av->prm.cost_dirty;
	av->cur.dirtied++;
	if (av->ops->hint) {
		uint64_t bytes = av->ops->hint(av->ctx, rel, page);

		av->cur.wal_bytes += bytes;
		av->cur.wal_images += bytes >= 8192;
	}
}

/* A WAL record about the page; its LSN on the ring buffer holding it. */
static void log_page(struct av_state *av, enum av_rel rel, uint64_t page, uint64_t bytes,
		     struct av_slot *s)
{
	uint64_t logged = av->ops->wal(av->ctx, rel, page, bytes, true);

	av->cur.wal_bytes += logged;
	av->cur.wal_images += logged >= bytes + 8192;
	if (s)
		s->lsn = av->ops->wal_end(av->ctx);
}

/*
 * visibilitymap_set(): the bit, its map page dirty (no I/O: shared
 * buffers), an XLOG_HEAP2_VISIBLE record, with the map page's image at
 * its first change since the checkpoint began.
 */
static void set_all_visible(struct av_state *av, uint64_t page)
{
	uint64_t vm = page / AV_HEAP_PER_VM_PAGE, bytes = AV_WAL_VISIBLE;

	av_bit_set(av->allvis, page);
	av->vm_dirty[vm] = 1;
	if (!av->vm_logged[vm]) {
		av->vm_logged[vm] = 1;
		bytes += 8192;
		av->cur.wal_images++;
	}
	av->cur.wal_bytes += av->ops->wal(av->ctx, AV_VM, vm, bytes, false);
}

/*
 * RecordPageWithFreeSpace(): a hit on the page's leaf of the free space
 * map, dirty when the page's free space changed (@changed).
 */
static void record_free_space(struct av_state *av, uint64_t page, bool changed)
{
	av->balance += av->prm.cost_hit;
	av->cur.hits++;
	if (changed)
		av->fsm_dirty[fsm_block(0, page / AV_HEAP_PER_FSM_PAGE)] = 1;
}

/* ---- the passes ---- */

/*
 * lazy_scan_skip(): the next block from @blk the visibility map does not
 * let the scan skip (the last block never is), and whether the run
 * before it is long enough to skip (AV_SKIP_PAGES_THRESHOLD).
 */
static uint64_t skip_from(struct av_state *av, uint64_t blk, bool *skipping)
{
	uint64_t n = blk;

	while (n + 1 < av->heap_pages && av_bit_test(av->allvis, n))
		n++;
	*skipping = n - blk >= AV_SKIP_PAGES_THRESHOLD;
	return n;
}

/* After block @blk (or before block 0 with @blk == UINT64_MAX): the next one to read. */
static void heap_scan_advance(struct av_state *av, uint64_t blk)
{
	uint64_t next = blk + 1;

	if (blk == UINT64_MAX || blk == av->next_unskippable)
		av->next_unskippable = skip_from(av, next, &av->skipping);
	if (av->skipping && next < av->next_unskippable) {
		av->cur.heap_skipped += av->next_unskippable - next;
		next = av->next_unskippable;
	}
	av->pos = next;
}

static void vacuum_begin(struct av_state *av, uint64_t t)
{
	uint64_t hw = av_bit_words(av->heap_pages), iw = av_bit_words(av->idx_pages);

	av->phase = AV_HEAP_SCAN;
	av->in_vacuum = true;
	av->t_ns = t;
	av->balance = 0;
	av->cur = (struct av_vacuum){ .start_ns = t, .n_dead = av->n_dead };
	/* dead items older than the vacuum are its to remove (OldestXmin) */
	memcpy(av->vac, av->dead, hw * 8);
	memset(av->dead, 0, hw * 8);
	memcpy(av->idx_vac, av->idx_dead, (iw + 1) * 8);
	memset(av->idx_dead, 0, (iw + 1) * 8);
	memset(av->changed, 0, hw * 8);
	av->lpdead_pages = av_bit_count(av->vac, av->heap_pages);
	av->recent = 0;
	heap_scan_advance(av, UINT64_MAX);
}

/* lazy_scan_heap()'s work on block @p: prune, hint bits, all-visible. */
static int heap_scan_page(struct av_state *av, uint64_t p)
{
	bool vac = av_bit_test(av->vac, p), changed = av_bit_test(av->changed, p);
	struct av_slot *s;
	int ret = access_page(av, AV_HEAP, p, &s);

	av->cur.heap_scanned++;
	if (ret)
		return ret;
	if (!vac)
		record_free_space(av, p, !av_bit_test(av->allvis, p));
	if (av_bit_test(av->allvis, p) && !vac)
		return 0;	/* all-visible, read in a run too short to skip */
	dirty_page(av, AV_HEAP, p, s);
	/*
	 * Something to prune: a non-HOT update's old version no access has
	 * pruned yet, or a HOT one's older than the vacuum.  A dead item an
	 * access made LP_DEAD already is only collected.
	 */
	if (!changed && (av_bit_test(av->unpruned, p) || av_bit_test(av->hot, p))) {
		log_page(av, AV_HEAP, p, AV_WAL_PRUNE, s);
		prune(av, p, false);
	}
	if (!vac && !changed)
		set_all_visible(av, p);
	return 0;
}

/* lazy_vacuum_heap_page(): LP_DEAD -> LP_UNUSED on block @p, then all-visible. */
static int heap_vacuum_page(struct av_state *av, uint64_t p)
{
	struct av_slot *s;
	int ret = access_page(av, AV_HEAP, p, &s);

	if (ret)
		return ret;
	av->cur.heap_vacuumed++;
	dirty_page(av, AV_HEAP, p, s);
	log_page(av, AV_HEAP, p, AV_WAL_VACUUM, s);
	if (!av_bit_test(av->changed, p))
		set_all_visible(av, p);
	record_free_space(av, p, true);
	return 0;
}

/* btvacuumpage(): index block @p (0: the metapage); a leaf with dead entries is cleaned. */
static int index_page(struct av_state *av, uint64_t p)
{
	struct av_slot *s;
	int ret = access_page(av, AV_INDEX, p, &s);

	if (ret)
		return ret;
	av->cur.index_pages++;
	if (p && av_bit_test(av->idx_vac, p)) {
		dirty_page(av, AV_INDEX, p, s);
		log_page(av, AV_INDEX, p, AV_WAL_BTVACUUM, s);
	}
	return 0;
}

/*
 * The end of the heap scan: lazy_vacuum()'s choice.  With dead items on
 * at least 2% of the pages, the index pass then the heap vacuum pass;
 * with fewer, both are bypassed and the items wait for the next vacuum.
 */
static void heap_scan_end(struct av_state *av)
{
	av->cur.lpdead_pages = av->lpdead_pages;
	if (!av->lpdead_pages) {
		av->phase = AV_IDLE;
		return;
	}
	if (av->lpdead_pages * 1000 < av->heap_pages * AV_BYPASS_PAGES_PM) {
		av->cur.bypassed = true;
		for (uint64_t i = 0; i < av_bit_words(av->heap_pages); i++)
			av->dead[i] |= av->vac[i];
		for (uint64_t i = 0; i < av_bit_words(av->idx_pages) + 1; i++)
			av->idx_dead[i] |= av->idx_vac[i];
		av->phase = AV_IDLE;
		return;
	}
	if (av->idx_pages) {
		av->phase = AV_INDEX_SCAN;
		av->pos = 0;
		return;
	}
	/* No index (pgbench,index=0): straight to the heap's second pass. */
	av->phase = AV_HEAP_VACUUM;
	av->pos = av_bit_next(av->vac, 0, av->heap_pages);
	if (av->pos >= av->heap_pages)
		av->phase = AV_IDLE;
}

/* The vacuum's end: the WAL flushed (its commit), the count overwritten. */
static int vacuum_end(struct av_state *av)
{
	int ret = av->ops->wal_flush(av->ctx, av->t_ns, av->pid, UINT64_MAX);

	if (ret < 0)
		return ret;
	av->cur.wal_flushes += (uint64_t)ret;
	/* FreeSpaceMapVacuumRange(): the upper levels */
	av->fsm_dirty[0] = 1;
	if (av->fsm_pages > 1)
		av->fsm_dirty[1] = 1;
	/* what the ring holds dirty stays in shared buffers, dirty */
	for (uint32_t i = 0; i < (av->prm.ring ? av->prm.ring : 1); i++) {
		struct av_slot *s = &av->ring[i];

		if (s->used && s->dirty && !av->ops->is_dirty(av->ctx, (enum av_rel)s->rel, s->page))
			av->ops->set_dirty(av->ctx, (enum av_rel)s->rel, s->page);
		*s = (struct av_slot){ 0 };
	}
	av->ring_next = 0;
	av->n_dead = av->recent;
	av->cur.end_ns = av->t_ns;
	av->last = av->cur;
	av->vacuums++;
	av->in_vacuum = false;
	/* the checks the vacuum let pass did nothing: the table was being vacuumed */
	while (av->next_check_ns <= av->t_ns)
		av->next_check_ns += av->prm.naptime_ns;
	if (av->ops->vacuum_done)
		av->ops->vacuum_done(av->ctx, av);
	return 0;
}

/* One page of the running vacuum (its delay point taken), or its end. */
static int vacuum_step(struct av_state *av)
{
	int ret = 0;

	switch (av->phase) {
	case AV_HEAP_SCAN: {
		uint64_t p = av->pos;

		ret = heap_scan_page(av, p);
		heap_scan_advance(av, p);
		if (av->pos >= av->heap_pages)
			heap_scan_end(av);
		break;
	}
	case AV_INDEX_SCAN:
		ret = index_page(av, av->pos++);
		if (av->pos >= av->idx_pages) {
			av->phase = AV_HEAP_VACUUM;
			av->pos = av_bit_next(av->vac, 0, av->heap_pages);
		}
		break;
	case AV_HEAP_VACUUM:
		ret = heap_vacuum_page(av, av->pos);
		av->pos = av_bit_next(av->vac, av->pos + 1, av->heap_pages);
		if (av->pos >= av->heap_pages)
			av->phase = AV_IDLE;
		break;
	case AV_IDLE:
		break;
	}
	return ret;
}

/*
 * The worker's checks (with @checks) and steps due at or before @t_ns.
 * A check starts a vacuum at its own time, which is after the previous
 * call's @t_ns: nothing the generator did since is missed.
 */
static int run(struct av_state *av, uint64_t t_ns, bool checks)
{
	int ret = 0;

	while (!ret) {
		if (av->in_vacuum && av->phase == AV_IDLE) {
			ret = vacuum_end(av);
			continue;
		}
		if (!av->in_vacuum) {
			if (!checks || av->next_check_ns > t_ns)
				break;
			if (av->n_dead > av_trigger(av))
				vacuum_begin(av, av->next_check_ns);
			av->next_check_ns += av->prm.naptime_ns;
			continue;
		}
		delay_point(av);
		if (av->t_ns > t_ns)
			break;
		ret = vacuum_step(av);
	}
	return ret;
}

uint64_t av_next_ns(const struct av_state *av)
{
	if (!av->in_vacuum)
		return av->next_check_ns;
	return av->phase == AV_IDLE ? av->t_ns : av->t_ns + delay_ns(av);
}

int av_run_until(struct av_state *av, uint64_t t_ns)
{
	return run(av, t_ns, true);
}

int av_finish(struct av_state *av, uint64_t *t_ns)
{
	int ret = 0;

	if (!av->in_vacuum)
		ret = run(av, av->next_check_ns, true);
	while (!ret && av->in_vacuum)
		ret = run(av, av->t_ns + NS_PER_S, false);
	if (av->vacuums && av->last.end_ns > *t_ns)
		*t_ns = av->last.end_ns;
	return ret;
}

void av_ckpt_begin(struct av_state *av)
{
	memcpy(av->vm_ckpt, av->vm_dirty, av->vm_pages);
	memset(av->vm_dirty, 0, av->vm_pages);
	memset(av->vm_logged, 0, av->vm_pages);
	memcpy(av->fsm_ckpt, av->fsm_dirty, av->fsm_pages);
	memset(av->fsm_dirty, 0, av->fsm_pages);
}

/* The map pages the checkpoint took at its beginning, then an fsync per map written. */
int av_ckpt_end(struct av_state *av, uint64_t t_ns, uint32_t pid)
{
	bool vm = false, fsm = false;
	int ret = 0;

	for (uint64_t i = 0; i < av->vm_pages && !ret; i++)
		if (av->vm_ckpt[i]) {
			av->vm_ckpt[i] = 0;
			vm = true;
			ret = av->ops->io(av->ctx, t_ns, pid, AV_WRITE, AV_VM, i);
		}
	for (uint64_t i = 0; i < av->fsm_pages && !ret; i++)
		if (av->fsm_ckpt[i]) {
			av->fsm_ckpt[i] = 0;
			fsm = true;
			ret = av->ops->io(av->ctx, t_ns, pid, AV_WRITE, AV_FSM, i);
		}
	if (!ret && vm)
		ret = av->ops->io(av->ctx, t_ns, pid, AV_SYNC, AV_VM, 0);
	if (!ret && fsm)
		ret = av->ops->io(av->ctx, t_ns, pid, AV_SYNC, AV_FSM, 0);
	return ret;
}
