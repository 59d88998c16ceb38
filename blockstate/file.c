// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * file.c - a cached file: finding and making folios, and the read, write,
 * truncate and fallocate paths.
 *
 * Reads and writes hold the file's invalidate_lock shared; truncate, hole
 * punching and zeroing hold it exclusive, so no read of the backing store
 * is in flight while blocks are invalidated (an asynchronous readahead
 * read still in flight is waited for, folio by folio).  Backing reads are
 * done with no folio lock held, straight into the folio's memory, and are
 * counted in the folio's rd_runs meanwhile: readers and writers of the
 * folio wait for them, so the blocks being read have one owner.
 *
 * Bytes of cached blocks past the file size are always zero, so extending
 * the file (write or truncate) exposes zeros without touching the cache.
 *
 * A read first lets readahead (readahead.c) read the windows it calls
 * for; whatever is still not uptodate is then read block run by block run.
 */
#include "bs_i.h"

#include <errno.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>

#define OFF_MAX INT64_MAX
/*
 * Largest file size: a folio holding the last byte must end at or before
 * INT64_MAX, so that start + size never overflows.
 */
#define BS_MAX_FILE_SIZE (INT64_MAX - (off_t)BS_MAX_FOLIO_SIZE + 1)

int bs_file_create(struct bs_cache *cache, const struct bs_backing_ops *ops,
		   void *ctx, off_t size, struct bs_file **out)
{
	struct bs_file *file = calloc(1, sizeof(*file));

	if (!file)
		return -ENOMEM;
	file->cache = cache;
	file->ops = ops;
	file->ctx = ctx;
	pthread_rwlock_init(&file->invalidate_lock, NULL);
	pthread_rwlock_init(&file->index_lock, NULL);
	pthread_mutex_init(&file->collect_lock, NULL);
	pthread_cond_init(&file->collect_resumed, NULL);
	pthread_mutex_init(&file->ra_lock, NULL);
	pthread_cond_init(&file->aio_idle, NULL);
	bs_index_init(&file->index, cache->max_order);
	atomic_init(&file->size, size);
	pthread_mutex_lock(&cache->files_lock);
	file->serial = ++cache->nr_files_made;
	list_push_front(&cache->files, &file->files_link);
	pthread_mutex_unlock(&cache->files_lock);
	*out = file;
	return 0;
}

void bs_file_set_ino(struct bs_file *file, uint64_t ino)
{
	file->ino = ino;
}

void bs_file_fix_size(struct bs_file *file)
{
	file->fixed_size = true;
}

off_t bs_file_size(struct bs_file *file)
{
	return atomic_load(&file->size);
}

void bs_folio_trace_delete(const struct bs_folio *folio)
{
	(void)folio;
	FOLIOFS_TP(mm_filemap_delete_from_page_cache, .i_ino = folio->file->ino,
		   .index = (unsigned long)folio->start >> BS_PAGE_SHIFT,
		   .order = __builtin_ctz(folio->size) - BS_PAGE_SHIFT);
}

/* Take @folio out of the index and drop the index's reference. */
static void detach(struct bs_file *file, struct bs_folio *folio)
{
	bool put = false;

	pthread_rwlock_wrlock(&file->index_lock);
	bs_folio_lock(folio);
	if (!folio->detached) {
		bs_index_remove(&file->index, folio);
		folio->detached = true;
		put = true;
		bs_folio_trace_delete(folio);
	}
	bs_folio_unlock_raw(folio);
	if (put)
		bs_cache_lru_del(file->cache, folio);
	pthread_rwlock_unlock(&file->index_lock);
	if (put)
		bs_folio_put(folio);
}

/* The first folio ending after @pos and starting before @end, referenced. */
static struct bs_folio *next_folio(struct bs_file *file, off_t pos, off_t end)
{
	struct bs_folio *folio;

	pthread_rwlock_rdlock(&file->index_lock);
	folio = bs_index_next(&file->index, pos);
	if (folio && folio->start < end)
		bs_folio_get(folio);
	else
		folio = NULL;
	pthread_rwlock_unlock(&file->index_lock);
	return folio;
}

void bs_file_destroy(struct bs_file *file)
{
	struct bs_cache *cache = file->cache;
	struct bs_folio *folio;

	/* A readahead read still in flight holds folios and stats of the file. */
	pthread_mutex_lock(&file->ra_lock);
	while (file->nr_aio)
		pthread_cond_wait(&file->aio_idle, &file->ra_lock);
	pthread_mutex_unlock(&file->ra_lock);
	while ((folio = next_folio(file, 0, OFF_MAX))) {
		bs_folio_lock(folio);
		bs_folio_wait_io(folio);
		bs_folio_clear_dirty(folio, 0, folio->nr_blocks);
		bs_folio_clear_unsynced(folio, 0, folio->nr_blocks);
		bs_folio_unlock(folio);
		detach(file, folio);
		bs_folio_put(folio);
	}
	pthread_mutex_lock(&cache->files_lock);
	list_unlink(&file->files_link);
	pthread_mutex_unlock(&cache->files_lock);
	bs_index_destroy(&file->index);
	pthread_rwlock_destroy(&file->index_lock);
	pthread_rwlock_destroy(&file->invalidate_lock);
	pthread_cond_destroy(&file->collect_resumed);
	pthread_mutex_destroy(&file->collect_lock);
	pthread_cond_destroy(&file->aio_idle);
	pthread_mutex_destroy(&file->ra_lock);
	free(file);
}

bool bs_file_has_held(struct bs_file *file)
{
	return atomic_load(&file->held_folios) != 0;
}

/* ---- finding and making folios ---- */

static struct bs_folio *lookup_get(struct bs_file *file, off_t off)
{
	struct bs_folio *folio;

	pthread_rwlock_rdlock(&file->index_lock);
	folio = bs_index_lookup(&file->index, off);
	if (folio)
		bs_folio_get(folio);
	pthread_rwlock_unlock(&file->index_lock);
	return folio;
}

bool bs_file_block_uptodate(struct bs_file *file, off_t off)
{
	struct bs_folio *folio;
	bool uptodate = false;
	uint32_t blk;

	folio = lookup_get(file, off);
	if (!folio)
		return false;
	blk = (uint32_t)((off - folio->start) >> file->cache->blk_shift);
	bs_folio_lock(folio);
	uptodate = !folio->detached && bs_bits_all_set(folio->uptodate, blk, blk + 1);
	bs_folio_unlock_raw(folio);
	bs_folio_put(folio);
	return uptodate;
}

void bs_file_folio_span(struct bs_file *file, off_t *start, off_t *end)
{
	const struct bs_folio *folio;

	if (*start >= *end)
		return;
	pthread_rwlock_rdlock(&file->index_lock);
	folio = bs_index_lookup(&file->index, *start);
	if (folio)
		*start = folio->start;
	folio = bs_index_lookup(&file->index, *end - 1);
	if (folio && folio->start + (off_t)folio->size > *end)
		*end = folio->start + (off_t)folio->size;
	pthread_rwlock_unlock(&file->index_lock);
}

struct bs_folio *bs_file_lookup(struct bs_file *file, off_t off)
{
	return lookup_get(file, off);
}

/*
 * Whether no folio holds any byte of the folio of @len bytes (a power of
 * two, at least the smallest folio) that would hold @off.  index_lock held.
 */
static bool span_free(struct bs_file *file, off_t off, size_t len)
{
	unsigned int order = (unsigned int)__builtin_ctzll((uint64_t)len);

	return bs_index_fit(&file->index, off, order, file->cache->min_order) == order;
}

/*
 * Order of the folio to make for an @access (enum bs_size_access) of
 * [off, off + len); 0 if one appeared at @off.  For readahead, @len is
 * the folio it asks for, and a folio anywhere in that span is -EEXIST,
 * as filemap_add_folio() fails for page_cache_ra_order(); other accesses
 * get a folio shrunk to fit between those there, as __filemap_get_folio()
 * retries smaller orders.
 */
static int choose_order(struct bs_file *file, off_t off, size_t len, unsigned int access)
{
	struct bs_cache *cache = file->cache;
	int order = 0;

	pthread_rwlock_wrlock(&file->index_lock);
	if (access == BS_SIZE_READAHEAD && !span_free(file, off, len)) {
		order = bs_index_lookup(&file->index, off) ? 0 : -EEXIST;
	} else if (!bs_index_lookup(&file->index, off)) {
		const struct bs_policy_inst *inst = atomic_load(&cache->size);
		unsigned int want;

		file->size_state.access = access;
		file->size_state.params = inst->params;
		want = inst->size->order(&file->size_state, off, len, cache->max_order);
		if (want < cache->min_order)
			want = cache->min_order;
		if (want > cache->max_order)
			want = cache->max_order;
		order = (int)bs_index_fit(&file->index, off, want, cache->min_order);
	}
	pthread_rwlock_unlock(&file->index_lock);
	return order;
}

/* Insert @folio unless its span was taken meanwhile; 0, -EAGAIN or -ENOMEM. */
static int insert(struct bs_file *file, struct bs_folio *folio, off_t off,
		  unsigned int order, unsigned int access)
{
	int ret = -EAGAIN;

	pthread_rwlock_wrlock(&file->index_lock);
	if (!bs_index_lookup(&file->index, off) &&
	    bs_index_fit(&file->index, off, order, file->cache->min_order) == order) {
		ret = bs_index_insert(&file->index, folio);
		if (!ret) {
			file->size_state.next_off = folio->start + folio->size;
			file->size_state.order = order;
			bs_folio_get(folio);	/* the caller's; the index has the first */
			bs_cache_lru_add(file->cache, folio, access != BS_SIZE_WRITE);
			FOLIOFS_TP(mm_filemap_add_to_page_cache, .i_ino = file->ino,
				   .index = (unsigned long)folio->start >> BS_PAGE_SHIFT,
				   .order = __builtin_ctz(folio->size) - BS_PAGE_SHIFT);
		}
	}
	pthread_rwlock_unlock(&file->index_lock);
	return ret;
}

/*
 * The folio covering @off, made (sized by the policy for an @access of
 * [off, off + len)) if there is none, or with @excl -EEXIST if there is.
 * Returns it referenced.
 * Context: no folio lock held (may reclaim and wait for writeback).
 */
static int folio_get(struct bs_file *file, off_t off, size_t len, unsigned int access,
		     bool excl, struct bs_folio **out)
{
	for (;;) {
		struct bs_folio *folio = lookup_get(file, off);
		unsigned int order;
		uint64_t touch;
		off_t start;
		int ret;

		if (folio) {
			if (excl) {
				bs_folio_put(folio);
				return -EEXIST;
			}
			*out = folio;
			return 0;
		}
		ret = choose_order(file, off, len, access);
		if (ret < 0)
			return ret;
		if (!ret)
			continue;
		order = (unsigned int)ret;
		ret = bs_cache_make_room(file->cache, (size_t)1 << order,
					 access == BS_SIZE_WRITE);
		if (ret)
			return ret;
		start = off & ~(((off_t)1 << order) - 1);
		/*
		 * The bytes of the new folio this access touches (not what a
		 * stream will touch later: see pool.c on huge pages).
		 */
		touch = (uint64_t)(start + ((off_t)1 << order) - off);
		if (len < touch)
			touch = len;
		folio = bs_folio_alloc_touch(file, start, 1u << order, (uint32_t)touch);
		if (!folio)
			return -ENOMEM;
		ret = insert(file, folio, off, order, access);
		if (ret) {
			bs_folio_put(folio);
			if (ret != -EAGAIN)
				return ret;
			continue;
		}
		*out = folio;
		return 0;
	}
}

int bs_file_ra_folio(struct bs_file *file, off_t off, size_t len, struct bs_folio **out)
{
	/* The kernel allocates the folio before it adds it: the fault first. */
	if (len > ((size_t)1 << file->cache->min_order) && file->ops->folio_alloc_fails &&
	    file->ops->folio_alloc_fails(file->ctx, off & ~(off_t)(len - 1), len))
		return -ENOMEM;
	return folio_get(file, off, len, BS_SIZE_READAHEAD, true, out);
}

/* ---- making blocks uptodate ---- */

static off_t folio_blk_off(const struct bs_folio *folio, uint32_t blk)
{
	return folio->start + ((off_t)blk << folio->file->cache->blk_shift);
}

/*
 * Read blocks [first_blk, end_blk) of @folio from the backing store into
 * the folio's memory, zeroing what lies past EOF.  The caller counted the
 * read in rd_runs and holds no folio lock.
 */
static int read_run(struct bs_file *file, struct bs_folio *folio, uint32_t first_blk,
		    uint32_t end_blk)
{
	struct bs_cache *cache = file->cache;
	size_t len = (size_t)(end_blk - first_blk) << cache->blk_shift;
	char *dst = folio->data + ((size_t)first_blk << cache->blk_shift);
	ssize_t n = file->ops->read(file->ctx, dst, len, folio_blk_off(folio, first_blk));

	if (n < 0)
		return (int)n;
	memset(dst + n, 0, len - (size_t)n);
	atomic_fetch_add(&cache->backing_read_bytes, (uint64_t)n);
	atomic_fetch_add(&cache->backing_read_ios, 1);
	return 0;
}

/*
 * Make blocks [first_blk, end_blk) of @folio uptodate: each run that is
 * not is read with one backing read straight into the folio (or zeroed
 * when it starts at or past EOF, without reading).  A read already in
 * flight into the folio is waited for first, and ours is counted in
 * rd_runs while the folio lock is dropped around it, so nobody touches
 * those blocks meanwhile.
 * Context: invalidate_lock shared and the folio lock held; the folio lock
 * is dropped around backing reads and held again on return.
 */
static int fill_blocks(struct bs_file *file, struct bs_folio *folio,
		       uint32_t first_blk, uint32_t end_blk)
{
	unsigned int shift = file->cache->blk_shift;

	for (;;) {
		uint32_t blk, stop;
		size_t len;
		int ret;

		bs_folio_wait_reads(folio);
		blk = bs_bits_next_clear(folio->uptodate, first_blk, end_blk);
		if (blk == end_blk)
			return 0;
		stop = bs_bits_next_set(folio->uptodate, NULL, blk, end_blk);
		len = (size_t)(stop - blk) << shift;
		if (folio_blk_off(folio, blk) >= atomic_load(&file->size)) {
			memset(folio->data + ((size_t)blk << shift), 0, len);
			bs_bits_set(folio->uptodate, blk, stop);
			continue;
		}
		folio->rd_runs++;
		bs_folio_unlock_raw(folio);
		ret = read_run(file, folio, blk, stop);
		bs_folio_lock(folio);
		if (!ret)
			bs_bits_set(folio->uptodate, blk, stop);
		bs_folio_end_read(folio);
		if (ret)
			return ret;
	}
}

/* ---- read and write ---- */

/*
 * One piece of an access: [poff, poff + plen) of @folio, which is byte
 * @done of the caller's buffer.  Called with the folio locked.
 */
typedef int (*span_fn)(struct bs_file *file, struct bs_folio *folio, uint32_t poff,
		       uint32_t plen, size_t done, void *buf);

/*
 * Walk [off, off + len) folio by folio (making folios as needed) and call
 * @fn on each piece.  A read marks each folio it uses accessed, except a
 * first folio that also holds byte @last - 1, where the open's previous
 * read ended (filemap_read() marks a folio once per run of reads in it;
 * @last -1: none); a write marks nothing (the kernel's write_begin does
 * not).  @first, if not NULL, is the folio holding @off, referenced (the
 * walk takes over the reference): readahead looked it up already, and
 * with the invalidate_lock held and the reference kept, it is still the
 * folio there (reclaim takes only folios nobody references).  Returns the
 * bytes done; *@err is set when that is short.
 * Context: invalidate_lock shared.
 */
static size_t for_each_span(struct bs_file *file, off_t off, size_t len,
			    span_fn fn, void *buf, bool write, off_t last,
			    struct bs_folio *first, int *err)
{
	size_t done = 0;

	*err = 0;
	while (done < len) {
		off_t pos = off + (off_t)done;
		struct bs_folio *folio = first;
		uint32_t poff, plen;

		first = NULL;
		if (!folio)
			*err = folio_get(file, pos, len - done,
					 write ? BS_SIZE_WRITE : BS_SIZE_READ, false, &folio);
		if (*err)
			break;
		if (!write && !(done == 0 && last > folio->start &&
				last - 1 < folio->start + (off_t)folio->size))
			bs_folio_mark_accessed(folio);
		poff = (uint32_t)(pos - folio->start);
		plen = folio->size - poff < len - done ? folio->size - poff
						       : (uint32_t)(len - done);
		bs_folio_lock(folio);
		/* A backing read into the folio may own some of its bytes. */
		bs_folio_wait_reads(folio);
		*err = fn(file, folio, poff, plen, done, buf);
		bs_folio_unlock(folio);
		bs_folio_put(folio);
		if (*err)
			break;
		done += plen;
	}
	return done;
}

static int read_span(struct bs_file *file, struct bs_folio *folio, uint32_t poff,
		     uint32_t plen, size_t done, void *buf)
{
	int ret = fill_blocks(file, folio, bs_folio_first_blk(folio, poff),
			      bs_folio_end_blk(folio, poff, plen));

	/* no_data: the bytes mean nothing (bs_config), so none are copied. */
	if (!ret && !file->cache->cfg.no_data)
		memcpy((char *)buf + done, folio->data + poff, plen);
	return ret;
}

ssize_t bs_read(struct bs_file *file, struct bs_ra *ra, void *buf, size_t len, off_t off)
{
	struct bs_folio *first = NULL;
	size_t asked = len, done;
	off_t size, last = -1;
	int ret;

	if (off < 0)
		return -EINVAL;
	pthread_rwlock_rdlock(&file->invalidate_lock);
	size = atomic_load(&file->size);
	if (off >= size)
		len = 0;
	else if (len > (uint64_t)(size - off))
		len = (size_t)(size - off);
	if (len)
		last = bs_ra_before_read(file, ra, off, asked, &first);
	done = for_each_span(file, off, len, read_span, buf, false, last, first, &ret);
	if (done)
		bs_ra_after_read(ra, off + (off_t)done);
	pthread_rwlock_unlock(&file->invalidate_lock);
	atomic_fetch_add(&file->cache->app_read_bytes, done);
	return done || !ret ? (ssize_t)done : ret;
}

/*
 * Make the partly covered first and last blocks of [poff, poff + plen)
 * uptodate before a write copies in.  Context: as fill_blocks().
 */
static int fill_edges(struct bs_file *file, struct bs_folio *folio,
		      uint32_t poff, uint32_t plen)
{
	uint32_t mask = file->cache->cfg.block_size - 1;
	uint32_t first_blk = bs_folio_first_blk(folio, poff);
	uint32_t last_blk = bs_folio_end_blk(folio, poff, plen) - 1;
	int ret = 0;

	if (poff & mask)
		ret = fill_blocks(file, folio, first_blk, first_blk + 1);
	if (!ret && ((poff + plen) & mask) && (last_blk != first_blk || !(poff & mask)))
		ret = fill_blocks(file, folio, last_blk, last_blk + 1);
	return ret;
}

static void size_grow(struct bs_file *file, off_t end)
{
	off_t cur = atomic_load(&file->size);

	while (cur < end && !atomic_compare_exchange_weak(&file->size, &cur, end))
		;
}

static int write_span(struct bs_file *file, struct bs_folio *folio, uint32_t poff,
		      uint32_t plen, size_t done, void *buf)
{
	int ret = fill_edges(file, folio, poff, plen);

	if (ret)
		return ret;
	if (!file->cache->cfg.no_data)
		memcpy(folio->data + poff, (const char *)buf + done, plen);
	bs_folio_set_dirty(folio, bs_folio_first_blk(folio, poff),
			   bs_folio_end_blk(folio, poff, plen));
	size_grow(file, folio->start + poff + plen);
	return 0;
}

ssize_t bs_write(struct bs_file *file, const void *buf, size_t len, off_t off)
{
	size_t done;
	int ret;

	if (off < 0)
		return -EINVAL;
	if (off > BS_MAX_FILE_SIZE || len > (uint64_t)(BS_MAX_FILE_SIZE - off))
		return -EFBIG;
	if (file->fixed_size) {
		off_t size = atomic_load(&file->size);

		if (len && off >= size)
			return -ENOSPC;
		if (len > (uint64_t)(size - off))
			len = (size_t)(size - off);
	}
	pthread_rwlock_rdlock(&file->invalidate_lock);
	/* The span callback only reads the buffer; the cast drops const for the walk. */
	done = for_each_span(file, off, len, write_span, (void *)(uintptr_t)buf, true, -1,
			     NULL, &ret);
	pthread_rwlock_unlock(&file->invalidate_lock);
	atomic_fetch_add(&file->cache->app_write_bytes, done);
	return done || !ret ? (ssize_t)done : ret;
}

/* ---- invalidation: truncate, punch, zero ---- */

/*
 * Keep writeback from collecting runs of @file (they wait) while a punch
 * or a truncate down changes it.  Not nested: invalidate_lock exclusive
 * is held from pause to resume.
 */
static void collect_pause(struct bs_file *file)
{
	pthread_mutex_lock(&file->collect_lock);
	atomic_store(&file->no_collect, true);
	pthread_mutex_unlock(&file->collect_lock);
}

static void collect_resume(struct bs_file *file)
{
	pthread_mutex_lock(&file->collect_lock);
	atomic_store(&file->no_collect, false);
	pthread_cond_broadcast(&file->collect_resumed);
	pthread_mutex_unlock(&file->collect_lock);
}

/* Wait for writeback and reads on every folio overlapping [start, end). */
static void wait_range(struct bs_file *file, off_t start, off_t end)
{
	struct bs_folio *folio;

	while ((folio = next_folio(file, start, end))) {
		bs_folio_lock(folio);
		bs_folio_wait_io(folio);
		bs_folio_unlock_raw(folio);
		start = folio->start + folio->size;
		bs_folio_put(folio);
	}
}

/*
 * Zero [start, end) in the cache: the bytes are zeroed, blocks wholly
 * inside lose their dirty state (and charge), folios wholly inside are
 * dropped.  Context: invalidate_lock exclusive.
 */
static void zero_range(struct bs_file *file, off_t start, off_t end)
{
	uint32_t bsize = file->cache->cfg.block_size;
	struct bs_folio *folio;
	off_t pos = start;

	while ((folio = next_folio(file, pos, end))) {
		off_t zs = start > folio->start ? start : folio->start;
		off_t fend = folio->start + folio->size;
		off_t ze = end < fend ? end : fend;
		uint32_t first_full = (uint32_t)((zs - folio->start + bsize - 1) / bsize);
		uint32_t end_full = (uint32_t)((ze - folio->start) / bsize);

		bs_folio_lock(folio);
		bs_folio_wait_io(folio);
		memset(folio->data + (zs - folio->start), 0, (size_t)(ze - zs));
		/* Gone from the backing file too: nothing left to sync. */
		if (first_full < end_full) {
			bs_folio_clear_dirty(folio, first_full, end_full);
			bs_folio_clear_unsynced(folio, first_full, end_full);
		}
		bs_folio_unlock(folio);
		if (zs == folio->start && ze == fend)
			detach(file, folio);
		pos = fend;
		bs_folio_put(folio);
	}
}

int bs_truncate(struct bs_file *file, off_t size)
{
	bool shrink;
	off_t old;
	int ret;

	if (size < 0)
		return -EINVAL;
	if (size > BS_MAX_FILE_SIZE)
		return -EFBIG;
	if (file->fixed_size)
		return size == atomic_load(&file->size) ? 0 : -EPERM;
	pthread_rwlock_wrlock(&file->invalidate_lock);
	old = atomic_load(&file->size);
	shrink = size < old;
	if (shrink) {
		/*
		 * Nothing is collected until the cache's tail is zeroed: a run
		 * of whole blocks (BS_WB_WHOLE_BLOCKS) holding the new EOF would
		 * carry the old bytes past it, written after the backing
		 * truncate, and a later extension of the file would show them.
		 */
		collect_pause(file);
		atomic_store(&file->size, size);
		wait_range(file, size, OFF_MAX);
	}
	ret = file->ops->truncate(file->ctx, size);
	if (ret)
		atomic_store(&file->size, old);
	else if (shrink)
		zero_range(file, size, OFF_MAX);
	else
		atomic_store(&file->size, size);
	if (shrink)
		collect_resume(file);
	pthread_rwlock_unlock(&file->invalidate_lock);
	return ret;
}

int bs_fallocate(struct bs_file *file, int mode, off_t off, off_t len)
{
	const int punch = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
	bool zeroes = mode == punch || (mode & ~FALLOC_FL_KEEP_SIZE) == FALLOC_FL_ZERO_RANGE;
	int ret;

	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		return -EOPNOTSUPP;
	if ((mode & FALLOC_FL_PUNCH_HOLE) && mode != punch)
		return -EOPNOTSUPP;
	if (off < 0 || len <= 0)
		return -EINVAL;
	if (off > BS_MAX_FILE_SIZE || len > BS_MAX_FILE_SIZE - off)
		return -EFBIG;
	if (file->fixed_size && !(mode & FALLOC_FL_KEEP_SIZE) &&
	    off + len > atomic_load(&file->size))
		return -ENOSPC;
	pthread_rwlock_wrlock(&file->invalidate_lock);
	if (zeroes) {
		/*
		 * The backing store first, so that a failure changes nothing.
		 * Meanwhile no run may be collected: a dirty block of the range
		 * written after the punch would bring old bytes back.
		 * Collectors wait (bs_wb_collect_mode), so that an fsync still
		 * writes what was dirty before it.
		 */
		collect_pause(file);
		wait_range(file, off, off + len);
	}
	ret = file->ops->fallocate(file->ctx, mode, off, len);
	if (!ret && zeroes)
		zero_range(file, off, off + len);
	if (zeroes)
		collect_resume(file);
	if (!ret && !(mode & FALLOC_FL_KEEP_SIZE))
		size_grow(file, off + len);
	pthread_rwlock_unlock(&file->invalidate_lock);
	return ret;
}
