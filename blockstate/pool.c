// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pool.c - folio memory: where it comes from and where it goes.
 *
 * The kernel zeroes every page of anonymous memory on its first touch,
 * and on a VM a first touch also makes the host back the page: on the
 * machines we measure on, touching fresh memory runs at ~0.4 GB/s against
 * ~9 GB/s for memory touched before.  A cache that gives folio memory back
 * to the kernel when a folio is dropped (reclaim, truncate, punch, unlink)
 * pays that again for every folio it makes next.  So memory of a freed
 * folio goes to a free list of its size instead, and a new folio takes
 * from the list of its size first: memory once touched stays touched.
 *
 * One list per folio size (4 KiB .. 2 MiB), last in first out (the
 * memory freed last is the most likely to be in the CPU caches).  A
 * size class is not split or merged: with fixed sizing every folio has
 * one size; with kernel (the default) or ramp sizing a request whose list
 * is empty is a miss, and the pool gives back memory of other sizes to stay
 * in its bound (below).
 *
 * The bound: pooled memory is memory the daemon holds, so it counts
 * against cache_size with the folios: cache_bytes + pool_bytes <=
 * cache_size.  A freed folio's memory is pooled only while that holds
 * (else given back), and making room for a new folio first gives back
 * pooled memory of other sizes, then reclaims folios (whose memory then
 * refills the pool).  cache_size stays the bound of all folio memory.
 *
 * An idle pool is given back: the flushers look at it every
 * writeback_interval_ms and halve it each time no folio was made since
 * the last look (wb_fp_pool_keep), so a daemon that stopped working
 * returns its memory within a minute or so, and one that keeps making
 * folios keeps its pool touched.
 *
 * Where the memory comes from: a 2 MiB folio gets its own naturally
 * aligned mapping (no 4 KiB of alignment padding per folio), with
 * MADV_HUGEPAGE only when the access that makes the folio touches at
 * least half of it (a large read, a readahead window, a large write), as
 * the kernel backs a large folio with one huge page where it can (fewer
 * TLB misses on copies).  Not otherwise: the first touch of a huge page
 * zeroes all 2 MiB at once, so a 4 KiB random write or read into a new
 * folio would pay 512 times the zeroing of its own page (on a fresh 1 GiB
 * file, clear_page was 69% of the daemon's samples).  Nor for a stream of
 * small requests, though it will touch the whole folio: on the VMs we
 * measure on, zeroing a huge page on first touch ran at ~0.4 GB/s where
 * 4 KiB pages touched one request at a time cost about half as much in
 * all, and in PostgreSQL's load phase (`pgbench -i`, 8 KiB writes
 * appending to the table and the WAL) huge pages for streams were half of
 * the daemon's CPU samples (clear_page_erms under folio_zero_user) and
 * 2.5-3.5 s of its 5-7 s of system time.  Measured per 2 MiB on those
 * VMs: a fresh huge page 14.6 ms (the host backs a whole 2 MiB block
 * the guest had handed back), one freed seconds before 0.24 ms, 512 fresh
 * 4 KiB pages 0.8-0.9 ms.  The price comes later: random 8 KiB reads into
 * such folios ran about 10% slower at two threads (TLB misses, most
 * likely; the VM has no PMU to count them).  MADV_COLLAPSE once a stream
 * has filled a folio would not win that back cheaply: it needs a fresh
 * huge page as well (14.4 ms).  Smaller folios come from the heap, page
 * aligned.
 *
 * no_data (the simulator's, bs_config): no memory per folio at all, every
 * folio's data is one scratch area of the largest folio size, so that a
 * replay of a cache of hundreds of GiB needs memory only for the folios'
 * state; the bytes there mean nothing, and nothing in a replay reads them.
 *
 * Memory from the pool holds whatever the last folio left there, never
 * zeros: the rest of blockstate never reads bytes of a block that is not
 * uptodate, and zeroes explicitly what it makes uptodate without reading
 * (blocks past EOF, short reads, truncated tails).  Debug builds fill all
 * new folio memory, pooled or fresh, with a poison byte so that the tests
 * catch any code that would count on zeros.
 */
#include "bs_i.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define BS_HUGE_SIZE (2u << 20)
/* What debug builds fill new folio memory with (not 0, not a common byte). */
#define BS_POOL_POISON 0x6b

/* A free chunk: the link lives in the chunk's own (touched) memory. */
struct pool_chunk {
	struct pool_chunk *next;
};

static unsigned int size_class(uint32_t size)
{
	return (unsigned int)__builtin_ctz(size) - BS_PAGE_SHIFT;
}

static char *mem_alloc(uint32_t size, bool huge)
{
	char *p, *aligned;
	size_t head;

	if (size != BS_HUGE_SIZE) {
		void *mem;

		return posix_memalign(&mem, BS_PAGE_SIZE, size) ? NULL : mem;
	}
	p = mmap(NULL, 2 * (size_t)size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	aligned = (char *)(((uintptr_t)p + size - 1) & ~((uintptr_t)size - 1));
	head = (size_t)(aligned - p);
	/* Cannot fail: whole pages of a mapping we own. */
	if (head)
		munmap(p, head);
	munmap(aligned + size, size - head);
	if (huge)
		madvise(aligned, size, MADV_HUGEPAGE);	/* a hint: failure is fine */
	return aligned;
}

static void mem_release(char *mem, uint32_t size)
{
	if (size == BS_HUGE_SIZE)
		munmap(mem, size);
	else
		free(mem);
}

void bs_pool_init(struct bs_pool *pool)
{
	pthread_mutex_init(&pool->lock, NULL);
}

/* Release a list of chunks of one size.  Context: no lock held. */
static void release_list(struct pool_chunk *chunk, uint32_t size)
{
	while (chunk) {
		struct pool_chunk *next = chunk->next;

		mem_release((char *)chunk, size);
		chunk = next;
	}
}

void bs_pool_destroy(struct bs_pool *pool)
{
	for (unsigned int i = 0; i < BS_NR_FOLIO_ORDERS; i++) {
		release_list(pool->free[i], BS_PAGE_SIZE << i);
		pool->free[i] = NULL;
		pool->nr_free[i] = 0;
	}
	if (pool->scratch)
		mem_release(pool->scratch, BS_MAX_FOLIO_SIZE);
	pool->scratch = NULL;
	atomic_store(&pool->bytes, 0);
	pthread_mutex_destroy(&pool->lock);
}

/* cfg.no_data: every folio's data is the one scratch area (see bs_config). */
static char *scratch_take(struct bs_pool *pool)
{
	char *mem;

	pthread_mutex_lock(&pool->lock);
	if (!pool->scratch)
		pool->scratch = mem_alloc(BS_MAX_FOLIO_SIZE, false);
	mem = pool->scratch;
	pthread_mutex_unlock(&pool->lock);
	return mem;
}

char *bs_pool_take(struct bs_cache *cache, uint32_t size, uint32_t touch)
{
	struct bs_pool *pool = &cache->pool;
	unsigned int c = size_class(size);
	struct pool_chunk *chunk;
	char *mem;

	if (cache->cfg.no_data)
		return scratch_take(pool);
	pthread_mutex_lock(&pool->lock);
	chunk = pool->free[c];
	if (chunk) {
		pool->free[c] = chunk->next;
		pool->nr_free[c]--;
		atomic_fetch_sub(&pool->bytes, size);
	}
	pthread_mutex_unlock(&pool->lock);
	if (chunk) {
		atomic_fetch_add(&pool->hits, 1);
		mem = (char *)chunk;
	} else {
		atomic_fetch_add(&pool->misses, 1);
		mem = mem_alloc(size, touch >= size / 2);
	}
	if (BS_DEBUG && mem)
		memset(mem, BS_POOL_POISON, size);
	return mem;
}

void bs_pool_put(struct bs_cache *cache, char *mem, uint32_t size)
{
	struct bs_pool *pool = &cache->pool;
	unsigned int c = size_class(size);
	bool pooled = false;

	if (cache->cfg.no_data)
		return;
	pthread_mutex_lock(&pool->lock);
	/* cache_bytes no longer counts @mem: the folio is gone. */
	if (atomic_load(&cache->cache_bytes) + atomic_load(&pool->bytes) + size <=
	    cache->cfg.cache_size) {
		struct pool_chunk *chunk = (struct pool_chunk *)(void *)mem;

		chunk->next = pool->free[c];
		pool->free[c] = chunk;
		pool->nr_free[c]++;
		atomic_fetch_add(&pool->bytes, size);
		pooled = true;
	}
	pthread_mutex_unlock(&pool->lock);
	if (!pooled)
		mem_release(mem, size);
}

bool bs_pool_has(struct bs_cache *cache, uint32_t size)
{
	struct bs_pool *pool = &cache->pool;
	bool has;

	pthread_mutex_lock(&pool->lock);
	has = pool->free[size_class(size)] != NULL;
	pthread_mutex_unlock(&pool->lock);
	return has;
}

/*
 * Unlink chunks of class @c, up to @bytes of them but leaving @keep, onto
 * *@out.  Returns the bytes unlinked.  Context: pool lock held.
 */
static uint64_t unlink_chunks(struct bs_pool *pool, unsigned int c, uint64_t bytes,
			      uint64_t keep, struct pool_chunk **out)
{
	uint32_t size = BS_PAGE_SIZE << c;
	uint64_t done = 0;

	while (done < bytes && pool->nr_free[c] > keep) {
		struct pool_chunk *chunk = pool->free[c];

		pool->free[c] = chunk->next;
		pool->nr_free[c]--;
		chunk->next = *out;
		*out = chunk;
		done += size;
	}
	atomic_fetch_sub(&pool->bytes, done);
	return done;
}

uint64_t bs_pool_trim(struct bs_cache *cache, uint64_t bytes, uint32_t want_size)
{
	struct bs_pool *pool = &cache->pool;
	struct pool_chunk *out[BS_NR_FOLIO_ORDERS] = { NULL };
	unsigned int want = size_class(want_size);
	uint64_t done = 0;

	pthread_mutex_lock(&pool->lock);
	/* Largest first: fewest chunks to release for the bytes. */
	for (unsigned int c = BS_NR_FOLIO_ORDERS; c-- > 0 && done < bytes;)
		if (c != want)
			done += unlink_chunks(pool, c, bytes - done, 0, &out[c]);
	/* The size wanted last, and one of it is left for the caller. */
	if (done < bytes)
		done += unlink_chunks(pool, want, bytes - done, 1, &out[want]);
	pthread_mutex_unlock(&pool->lock);
	for (unsigned int c = 0; c < BS_NR_FOLIO_ORDERS; c++)
		release_list(out[c], BS_PAGE_SIZE << c);
	return done;
}

uint64_t bs_cache_pool_shrink(struct bs_cache *cache, uint64_t keep_bytes)
{
	struct bs_pool *pool = &cache->pool;
	struct pool_chunk *out[BS_NR_FOLIO_ORDERS] = { NULL };
	uint64_t done = 0, bytes;

	pthread_mutex_lock(&pool->lock);
	bytes = atomic_load(&pool->bytes);
	if (bytes > keep_bytes) {
		for (unsigned int c = BS_NR_FOLIO_ORDERS; c-- > 0 && done < bytes - keep_bytes;)
			done += unlink_chunks(pool, c, bytes - keep_bytes - done, 0, &out[c]);
	}
	pthread_mutex_unlock(&pool->lock);
	for (unsigned int c = 0; c < BS_NR_FOLIO_ORDERS; c++)
		release_list(out[c], BS_PAGE_SIZE << c);
	return done;
}
