/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * blockstate.h - the daemon's page cache: large folios with per-block
 * uptodate and dirty state, the dirty budget they are charged to, and the
 * memory budget that bounds them.
 *
 * Modelled on iomap's struct iomap_folio_state.  A folio is a naturally
 * aligned power-of-two span of one file, 4 KiB to `folio_size` bytes, held
 * in page-aligned memory.  Each folio has one bit per filesystem block
 * (`block_size`, 512 B to 64 KiB) in three bitmaps: uptodate (the cache
 * holds the block's current bytes), dirty (they still have to be written)
 * and writeback (a write of them is in flight).  A dirty or writeback
 * block is always uptodate.
 *
 * blockstate knows nothing about FUSE or io_uring.  It reads and resizes
 * the backing store only through the bs_backing_ops a file is created
 * with, and asks for writeback (when reclaim finds nothing clean) only
 * through the bs_cache_ops the cache is created with.  The writeback layer
 * drives writeback through bs_wb_collect()/bs_wb_complete().
 *
 * Dirty accounting: every change of a folio's held state (blocks dirty or
 * under writeback) is priced by the accounting policy (struct
 * bs_account_policy) and the difference is charged to or discharged from
 * the cache's budget, so that at every quiescent point the charge equals
 * the policy's price of every folio, summed.  Folio sizes come from a
 * sizing policy (struct bs_size_policy).  Both are chosen by name.
 *
 * Conventions: ranges are half-open, [start, end); functions return 0 or a
 * byte count, or -errno.  All functions are thread safe unless noted.
 */
#ifndef FOLIOFS_BLOCKSTATE_H
#define FOLIOFS_BLOCKSTATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* The policy structs and BS_PAGE_SIZE: the header loadable policies build against. */
#include "foliofs/policy.h"

#define BS_MIN_BLOCK_SIZE 512u
#define BS_MAX_BLOCK_SIZE 65536u
#define BS_MIN_FOLIO_SIZE BS_PAGE_SIZE
#define BS_MAX_FOLIO_SIZE (2u << 20)
/* Folio sizes there are: 2^12 .. 2^21 bytes. */
#define BS_NR_FOLIO_ORDERS 10

struct bs_cache;
struct bs_file;
struct bs_folio;

/* ---- policies ---- */

/* The policy structs are in foliofs/policy.h (installed for loadable policies). */

/* Registered policies, looked up by name; NULL when unknown. */
const struct bs_account_policy *bs_account_policy_find(const char *name);
const struct bs_size_policy *bs_size_policy_find(const char *name);
/* Iterate: returns the i-th policy or NULL past the last. */
const struct bs_account_policy *bs_account_policy_at(size_t i);
const struct bs_size_policy *bs_size_policy_at(size_t i);
/* Where the i-th policy came from: NULL for one built in, else the library's path. */
const char *bs_account_policy_origin(size_t i);
const char *bs_size_policy_origin(size_t i);

/*
 * Every registered policy, one line each: "KIND NAME ORIGIN" (KIND
 * account or size, ORIGIN builtin or the library's path), then
 * " PARAM=DEFAULT[MIN,MAX]" per parameter.  Returns the length written
 * into @buf (NUL-terminated; lines that do not fit are left out).
 */
size_t bs_policy_list(char *buf, size_t size);
/* One such line at @buf: the length written (0 when it does not fit). */
size_t bs_policy_list_one(char *buf, size_t size, const char *kind, const char *name,
			  const char *origin, const struct bs_param *params, unsigned int nr);

/*
 * Parameters (params.c).  A value is a decimal integer (a leading '-'
 * for negative ranges) in the parameter's [min, max].
 */
/* The index of @policy's parameter @name, or -ENOENT. */
int bs_param_index(const struct bs_param *params, unsigned int nr, const char *name);
/*
 * Parse @val for @p: 0, or -EINVAL with "@kind.NAME=@val: REASON" in
 * @err (@kind "account" or "size").
 */
int bs_param_parse(const char *kind, const struct bs_param *p, const char *val,
		   int64_t *out, char *err, size_t errlen);
/*
 * "@kind.NAME: not a parameter of OPTION=POLICY (it has: a, b)" or "(it
 * has none)" into @err; @kind is account, size or throttle.
 */
void bs_param_unknown(const char *kind, const char *policy, const struct bs_param *params,
		      unsigned int nr, const char *name, char *err, size_t errlen);
/* Every parameter's default into @values (BS_PARAMS_MAX of them). */
void bs_params_defaults(const struct bs_param *params, unsigned int nr, int64_t *values);
/*
 * Whether a policy's name, help, callback and parameters are well formed
 * (names [a-z0-9_] of at most BS_NAME_MAX, at most BS_PARAMS_MAX distinct
 * parameters, each default in its range): 0, or -EINVAL with the reason.
 */
int bs_account_policy_check(const struct bs_account_policy *p, char *err, size_t errlen);
int bs_size_policy_check(const struct bs_size_policy *p, char *err, size_t errlen);
/* The parts of those checks any kind of policy passes (@cb: its callbacks are all set). */
int bs_policy_head_check(const char *name, const char *help, bool cb, char *err, size_t errlen);
int bs_params_check(const char *policy, const struct bs_param *params, unsigned int nr,
		    char *err, size_t errlen);

/*
 * Load the policies of the library at @path (policy_load.c): refused,
 * with one line naming @path and the reason in @err and nothing changed,
 * unless it is a regular file owned by @owner or root and not writable by
 * group or others, exports foliofs_policy_module with this build's
 * FOLIOFS_POLICY_ABI and size, and its policies are well formed and named
 * unlike every policy registered.  Loading the same file again is a no-op
 * (0).  Loaded policies are never unloaded.  Returns 0, -EINVAL, -EPERM
 * (owner, mode), -ENOENT or another -errno of open.
 * Context: any thread; serialized with the other loads.
 *
 * @hooks are for a layer above that registers policies of its own (the
 * throttle policies of writeback): @hooks->check() says whether the
 * module's policies of that kind may be taken (0, or -EINVAL with the
 * reason), after every check here passed; @hooks->add() registers them,
 * after blockstate's, under the loader's lock, once nothing can fail.
 * With @hooks NULL, a library with throttle policies is refused.
 */
struct bs_policy_load_hooks {
	int (*check)(const struct foliofs_policy_module *m, char *why, size_t len);
	void (*add)(const struct foliofs_policy_module *m, const char *origin);
};
int bs_policy_load_hooked(const char *path, uid_t owner, const struct bs_policy_load_hooks *hooks,
			  char *err, size_t errlen);

/* ---- the cache ---- */

struct bs_config {
	uint32_t block_size;	/* power of two, BS_MIN..BS_MAX_BLOCK_SIZE */
	uint32_t folio_size;	/* largest folio; power of two, >= block_size */
	uint64_t cache_size;	/* memory budget for folio data, bytes: folios
				 * and the pool of freed folio memory */
	const struct bs_account_policy *account;
	const struct bs_size_policy *size;
	/*
	 * The policies' parameter values: account_params[i] is used for the
	 * i-th parameter of @account when bit i of account_set is set, else
	 * the parameter's default (so a zeroed config gets the defaults).
	 */
	int64_t account_params[BS_PARAMS_MAX];
	uint32_t account_set;
	int64_t size_params[BS_PARAMS_MAX];
	uint32_t size_set;
	/*
	 * Largest readahead window, KiB (Linux's read_ahead_kb); 0: no
	 * readahead, a read fetches only the blocks it needs.  Values above
	 * BS_READAHEAD_KB_MAX count as that.
	 */
	uint32_t readahead_kb;
	/* Whose readahead decisions to follow (enum bs_ra_model). */
	unsigned int ra_model;
	/*
	 * How old, in ms, the counts may be that reclaim decides by whether
	 * it may move active folios to the inactive list (0: exact, read at
	 * each decision).  The kernel's prepare_scan_control() reads the
	 * memory cgroup's statistics (lruvec_page_state(): the active and
	 * inactive file sizes, WORKINGSET_ACTIVATE_FILE), which change only
	 * when they are flushed: by a worker every 2 s (FLUSH_TIME), and by
	 * a reader of memory.stat.  So a refault activated just now lets a
	 * reclaim deactivate only after the next flush, and once per flush
	 * (snapshot_refaults() keeps the flushed count), and an inactive
	 * list found low stays low until the next one.  Here the counts are
	 * copied at the first reclaim in each period of this many ms on the
	 * cache's clock (bs_cache_ops.now_ns); the workingset size a refault
	 * is measured against is the flushed active size too.
	 */
	uint32_t lru_stats_ms;
	/*
	 * No folio data (the simulator): every folio's data is one shared
	 * scratch area, whose bytes mean nothing; cache_size still bounds
	 * the folios' sizes.  Never on a mount.
	 */
	bool no_data;
	/*
	 * One thread calls the cache, and never waits for I/O in flight (the
	 * simulator): folios have no lock nor condition (struct
	 * bs_folio_sync in bs_i.h, 88 bytes).  Never on a mount.
	 */
	bool one_thread;
};

/*
 * 2 MiB: Linux's own default is 128 KiB, but a device with a large
 * optimal I/O size (the seed's RAID0) gets twice that size, and only a
 * window as large as the largest folio lets readahead ramp up to it.
 */
/* The kernel's FLUSH_TIME, and the most bs_config.lru_stats_ms may be. */
#define BS_LRU_STATS_MS_DEFAULT 2000u
#define BS_LRU_STATS_MS_MAX 600000u

#define BS_READAHEAD_KB_DEFAULT 2048u
#define BS_READAHEAD_KB_MAX 65536u

/*
 * The readahead of which Linux release to follow (see readahead.c).  They
 * differ where a window's folio order comes from: 6.16 takes the order of
 * the marked folio a reader met and adds 2, and starts every window a
 * cache miss makes at order 2; 6.17 and later keep the order in the open
 * file's state (file_ra_state.order), start a miss's window at order 0,
 * add 2 from the caller's own kept order at a mark, and trim each window's
 * end to that order.  So under 6.17+ a reader that once ramped up makes
 * the largest folios at any mark it meets, another reader's included.
 */
enum bs_ra_model {
	BS_RA_6_17,		/* 6.17 and later (the 6.18 we run on): 0, so
				 * that a zeroed config gets it */
	BS_RA_6_16,
	BS_NR_RA_MODELS,
};
#define BS_RA_MODEL_DEFAULT BS_RA_6_17
/* "6.16", "6.17"; NULL past the last. */
const char *bs_ra_model_name(unsigned int model);
/* The model named @name ("6.16", "6.17"; "6.18" and later mean 6.17): 0 or -EINVAL. */
int bs_ra_model_parse(const char *name, unsigned int *model);

/* Check @cfg; on error fill @err (one line naming the option) and return -EINVAL. */
int bs_config_check(const struct bs_config *cfg, char *err, size_t errlen);

/* What the cache asks of the layer above. */
struct bs_cache_ops {
	/*
	 * Reclaim found no clean folio to drop: write back dirty data and
	 * sync backing files holding unsynced data (bs_sync_begin()) so that
	 * some folio becomes clean.  May block; called without any
	 * blockstate lock held, possibly from several threads at once (and
	 * from a writer's thread inside bs_write()).
	 */
	void (*need_clean)(void *ctx);
	/*
	 * Optional: the time now in ns on the clock the cache's callers run
	 * on (the simulator's virtual clock); it must not go back.  NULL:
	 * CLOCK_MONOTONIC.  Read only by reclaim, for bs_config.lru_stats_ms.
	 */
	int64_t (*now_ns)(void *ctx);
};

int bs_cache_create(const struct bs_config *cfg, const struct bs_cache_ops *ops,
		    void *ctx, struct bs_cache **out);
/* Every file must have been destroyed. */
void bs_cache_destroy(struct bs_cache *cache);
/* The configuration the cache was made with (account: see bs_cache_account()). */
const struct bs_config *bs_cache_config(const struct bs_cache *cache);

/* The accounting policy in force now. */
const struct bs_account_policy *bs_cache_account(struct bs_cache *cache);
/*
 * Switch the accounting policy on a live cache: every folio is repriced
 * under its lock by @policy, so the charge stays exactly the sum of the
 * prices.  Repricing moves only the charge: nr_dirtied and nr_discharged
 * count what writers and writeback did, not a change of policy.
 * Context: any thread; takes each file's index lock and each folio's lock.
 */
int bs_cache_set_account(struct bs_cache *cache, const struct bs_account_policy *policy);
/*
 * The same with parameter values (BS_PARAMS_MAX of them, NULL: the
 * defaults), which must be in range: changing only a parameter is a
 * switch to the same policy with other values, and reprices every folio
 * the same way.  -ENOMEM changes nothing.
 */
int bs_cache_set_account_params(struct bs_cache *cache, const struct bs_account_policy *policy,
				const int64_t *params);
/*
 * The accounting policy in force and its parameters' values (into
 * @params, BS_PARAMS_MAX of them), read together.
 */
const struct bs_account_policy *bs_cache_account_params(struct bs_cache *cache, int64_t *params);
/* The same for the sizing policy (which is fixed for the cache's life; its values are not). */
const struct bs_size_policy *bs_cache_size(struct bs_cache *cache);
const struct bs_size_policy *bs_cache_size_params(struct bs_cache *cache, int64_t *params);
int bs_cache_set_size_params(struct bs_cache *cache, const int64_t *params);

/* The readahead model in force now; switch it on a live cache (any thread). */
unsigned int bs_cache_ra_model(struct bs_cache *cache);
void bs_cache_set_ra_model(struct bs_cache *cache, unsigned int model);

/*
 * How long (ms, 0: not at all) a writer that finds the cache full of data
 * writeback cannot free waits for it before failing with ENOSPC; the
 * default is BS_FULL_WAIT_MS.  Context: before the cache is used.
 */
void bs_cache_set_full_wait(struct bs_cache *cache, uint32_t ms);

/*
 * Give back pooled folio memory (see pool.c) until at most @keep_bytes is
 * left, largest chunks first; returns the bytes given back.  For a driver
 * that finds the pool idle (writeback's engine, at the end of a flusher
 * pass).  Context: any thread, no blockstate lock held.
 */
uint64_t bs_cache_pool_shrink(struct bs_cache *cache, uint64_t keep_bytes);

/*
 * Exact counters, read without stopping writers (each one is exact; a
 * snapshot of several is not atomic).  Pages are 4 KiB.
 */
struct bs_stats {
	uint64_t nr_dirty;		/* pages charged now (rounded up) */
	uint64_t nr_dirtied;		/* pages charged, monotonic */
	/*
	 * Writeback as the kernel counts it, whatever the accounting policy:
	 * whole folios, as NR_WRITEBACK and WB_WRITTEN count them.
	 */
	uint64_t nr_writeback;		/* pages of folios with a run in flight */
	uint64_t nr_written;		/* pages of folios whose writeback ended
					 * having written, monotonic */
	uint64_t nr_discharged;		/* pages of charge discharged by completed
					 * writeback (by the policy), monotonic */
	uint64_t nr_reclaimable;	/* pages charged for dirty blocks not under
					 * writeback (rounded up): what background
					 * writeback compares with its threshold */
	uint64_t wb_budget_pages;	/* pages of writeback budget used
					 * (bs_wb_collect_budget()), monotonic */
	uint64_t wb_dirty_pages_written;	/* pages holding the blocks those
						 * collections took, monotonic */
	uint64_t charged_bytes;		/* exact charge now, bytes */
	uint64_t dirty_bytes_exact;	/* bytes in blocks dirty or under writeback */
	uint64_t writeback_bytes;	/* bytes in blocks under writeback */
	uint64_t pinned_bytes;		/* memory of folios holding such a block */
	uint64_t app_write_bytes;	/* bytes written by bs_write() */
	uint64_t app_read_bytes;	/* bytes returned by bs_read() */
	uint64_t backing_read_bytes;	/* bytes read from the backing store */
	uint64_t backing_read_ios;
	uint64_t cache_bytes;		/* folio memory now */
	/*
	 * Memory of freed folios kept touched for new ones (counts against
	 * cache_size with cache_bytes), and folios made with pooled or with
	 * fresh memory, monotonic.
	 */
	uint64_t pool_bytes;
	uint64_t pool_hits;
	uint64_t pool_misses;
	uint64_t folios;		/* folios now */
	uint64_t reclaimed_folios;	/* clean folios dropped by reclaim */
	uint64_t active_bytes;		/* memory of folios on the active list */
	uint64_t inactive_bytes;	/* and on the inactive list */
	/*
	 * The two as reclaim's decisions see them: as of the last flush
	 * (bs_config.lru_stats_ms; the live ones when 0), the kernel's
	 * memory.stat active_file and inactive_file.  A flush is made at
	 * a reclaim: 0 until the first.
	 */
	uint64_t seen_active_bytes;
	uint64_t seen_inactive_bytes;
	uint64_t activated_folios;	/* moves to the active list, monotonic */
	uint64_t rotated_folios;	/* folios reclaim met dirty, moved to the
					 * inactive tail when written (the
					 * kernel's pgrotated), monotonic */
	uint64_t deactivated_folios;	/* moves to the inactive list (pgdeactivate) */
	/*
	 * Pages moved to the active list (a read's second use, and the held
	 * folios reclaim meets: the kernel's pgactivate, which also counts
	 * both) and off it by reclaim (pgdeactivate), monotonic.
	 */
	uint64_t activate_pages;
	uint64_t deactivate_pages;
	/*
	 * Pages of folios made for reads where a reclaimed folio's shadow
	 * lay, and of those activated at once (the kernel's
	 * workingset_refault_file, workingset_activate_file), monotonic.
	 */
	uint64_t workingset_refault;
	uint64_t workingset_activate;
	uint64_t reclaim_stalls;	/* times reclaim had to wait for writeback */
	uint64_t unsynced_bytes;	/* memory of folios holding blocks written
					 * back but not synced yet (in pinned_bytes) */
	uint64_t full_events;		/* times writes began to fail with -ENOSPC
					 * because pinned data that writeback could
					 * not free filled the cache */
	uint64_t ra_pages;		/* 4 KiB pages read by readahead (also
					 * in backing_read_bytes) */
	uint64_t ra_ios;		/* backing reads readahead issued (also
					 * in backing_read_ios) */
	uint64_t ra_async_ios;		/* of which read asynchronously (read_start) */
	/* Folios now by size: [0] 4 KiB, [1] 8 KiB, ... [9] 2 MiB. */
	uint64_t folios_order[BS_NR_FOLIO_ORDERS];
	/*
	 * Folios made since the cache was created, by size (monotonic; those
	 * reclaim dropped included): foliofs-sim's summary.
	 */
	uint64_t folios_made_order[BS_NR_FOLIO_ORDERS];
	/*
	 * By size as above: folios dropped by reclaim and moves to the active
	 * list (monotonic), and folios on the active list now; set beside the
	 * kernel's page cache adds, deletes and PG_active by order.
	 */
	uint64_t reclaimed_order[BS_NR_FOLIO_ORDERS];
	uint64_t activated_order[BS_NR_FOLIO_ORDERS];
	uint64_t active_order[BS_NR_FOLIO_ORDERS];
};
void bs_cache_stats(struct bs_cache *cache, struct bs_stats *st);
/*
 * The part of it charged for dirty blocks not under writeback, in bytes
 * (one atomic read): the kernel's NR_FILE_DIRTY, priced by the policy.
 */
uint64_t bs_cache_dirty_charged(struct bs_cache *cache);
/* Memory of folios holding held or unsynced blocks now (one atomic read). */
uint64_t bs_cache_pinned(struct bs_cache *cache);
/* Bytes charged now, bs_stats' charged_bytes (one atomic read). */
uint64_t bs_cache_charged(struct bs_cache *cache);
/* Bytes of blocks dirty or under writeback now, bs_stats' dirty_bytes_exact (one atomic read). */
uint64_t bs_cache_held(struct bs_cache *cache);
/* Memory of folios holding unsynced blocks now (one atomic read). */
uint64_t bs_cache_unsynced(struct bs_cache *cache);

/*
 * Debug check of the accounting invariant: walks every folio of every
 * file and compares the sum of prices and held bytes with the counters.
 * Only meaningful at a quiescent point (no operation in flight).
 * Returns 0 or -EUCLEAN with a message on stderr.
 */
int bs_cache_check(struct bs_cache *cache);

/* ---- files ---- */

/*
 * An asynchronous backing read, for readahead: @len bytes at @off into
 * the @iovcnt (at most IOV_MAX) buffers of @iov.  Whoever takes it calls
 * @done exactly once, from any thread, with the bytes read (short only at
 * EOF) or -errno.
 * @done may take folio locks and free memory; it must not be called with
 * a lock of the caller's held that a blockstate path may wait on.
 */
struct bs_aio {
	const struct iovec *iov;
	int iovcnt;
	size_t len;
	off_t off;
	void (*done)(struct bs_aio *aio, ssize_t res);
};

struct bs_backing_ops {
	/* Read up to @len bytes at @off: bytes read (short only at EOF) or -errno. */
	ssize_t (*read)(void *ctx, void *buf, size_t len, off_t off);
	/*
	 * Optional: start @aio and return 0 (it completes through
	 * aio->done), or return -errno without calling it (readahead then
	 * reads synchronously).  NULL: readahead always reads synchronously.
	 */
	int (*read_start)(void *ctx, struct bs_aio *aio);
	/* Set the backing file's size. */
	int (*truncate)(void *ctx, off_t size);
	/* fallocate(2) on the backing file. */
	int (*fallocate)(void *ctx, int mode, off_t off, off_t len);
	/*
	 * Optional, where faults are injected: whether readahead's new folio
	 * of @len bytes at @off, larger than the smallest folio, cannot be
	 * had, as filemap_alloc_folio() fails a high-order folio it finds no
	 * memory for (page_cache_ra_order() then reads the rest of the window
	 * in the smallest folios).  NULL: it always can.
	 */
	bool (*folio_alloc_fails)(void *ctx, off_t off, size_t len);
};

/* A cached file of @size bytes (the backing file's size now). */
int bs_file_create(struct bs_cache *cache, const struct bs_backing_ops *ops,
		   void *ctx, off_t size, struct bs_file **out);
/*
 * Drop every folio and free.  Dirty data is discarded (and discharged):
 * write it back first.  No other call on @file may be in flight.
 */
void bs_file_destroy(struct bs_file *file);

/* The file size as the cache sees it (dirty extending writes included). */
off_t bs_file_size(struct bs_file *file);
/*
 * The file cannot change size (a block device): writes stop at the size
 * (-ENOSPC past it), truncate fails with -EPERM.
 */
void bs_file_fix_size(struct bs_file *file);
/* The backing inode number the probes name the file by (foliofs_probes.h). */
void bs_file_set_ino(struct bs_file *file, uint64_t ino);

/*
 * Bytes of the file in blocks that are dirty, and under writeback, now
 * (file_stat.c: walks the file's tagged folios; for foliofsctl files).
 */
void bs_file_held_bytes(struct bs_file *file, uint64_t *dirty, uint64_t *writeback);

/* Whether any block of the file is dirty or under writeback. */
bool bs_file_has_held(struct bs_file *file);

/*
 * Whether the block holding @off is cached and uptodate, so that a write
 * covering only part of it needs no read.  A snapshot: another thread may
 * change it at once, so only decisions that stay correct either way (a
 * read saved or not) may rest on it.
 */
bool bs_file_block_uptodate(struct bs_file *file, off_t off);

/*
 * [*@start, *@end) widened to the start of the cached folio holding its
 * first byte and the end of the one holding its last (each unchanged
 * where no folio is cached; nothing when empty): the range the kernel's
 * writeback of [start, end) writes, as writeback_iter() takes every
 * dirty folio the range touches and a folio is written whole.  A
 * snapshot, as bs_file_block_uptodate().
 */
void bs_file_folio_span(struct bs_file *file, off_t *start, off_t *end);

/*
 * Whether a readahead read started with read_start is still in flight.
 * Once false it stays false until the next bs_read() of the file.
 */
bool bs_file_reading(struct bs_file *file);

/*
 * The readahead state of one open file, Linux's struct file_ra_state,
 * in 4 KiB pages: the last window [start, start + size), whose last
 * async_size pages were read ahead of the reader, the folio order it asked
 * for (kept across windows under the 6.17+ model), and the byte after the
 * previous read.  Each open has its own, as each struct file has; the
 * cache (and the readahead marks on its folios) is the file's, shared by
 * all opens.  bs_ra_init() gives the state of a new open.
 *
 * lock protects the fields and is a leaf: a read copies the state out,
 * decides with the copy (looking at the cache) and copies the result
 * back, so concurrent reads through one open race as they do on one
 * struct file (the last one's window wins), without torn values.
 */
struct bs_ra_state {
	uint64_t start;
	uint64_t size;
	uint64_t async_size;
	unsigned int order;	/* page order */
	int64_t prev_pos;	/* -1 before the first read */
};
struct bs_ra {
	pthread_mutex_t lock;
	struct bs_ra_state st;
};
void bs_ra_init(struct bs_ra *ra);
void bs_ra_destroy(struct bs_ra *ra);

/*
 * Copy [off, off + len) into @buf, reading the blocks that are not
 * uptodate from the backing store (one read per contiguous run; blocks
 * past EOF are zeroed, not read).  @ra is the state of the open the read
 * comes through: it decides readahead, and is updated.  NULL: no
 * readahead (only what the read needs is read), as for an open with
 * readahead_kb 0.  Returns bytes copied, short only at EOF.
 */
ssize_t bs_read(struct bs_file *file, struct bs_ra *ra, void *buf, size_t len, off_t off);

/*
 * Copy @buf into [off, off + len): fully covered blocks are copied without
 * reading, partly covered ones that are not uptodate are read first (or
 * zeroed past EOF); copied blocks become uptodate and dirty and the
 * accounting policy is charged.  Extends the file size.  Returns @len, or
 * a shorter count if a later folio could not be had (then -errno if none).
 *
 * A write that needs a new folio when the cache is full of pinned data
 * that writeback cannot free (the backing store fails) waits up to
 * BS_FULL_WAIT_MS for writeback to free some, then fails with -ENOSPC
 * (at once while the cache stays so; stats full_events counts such
 * episodes).  Reads go over the budget instead.
 */
#define BS_FULL_WAIT_MS 5000
ssize_t bs_write(struct bs_file *file, const void *buf, size_t len, off_t off);

/*
 * Bytes of dirty budget this thread has charged since its last call (and
 * reset to 0): a writer's own share of nr_dirtied, as the kernel keeps it
 * in current->nr_dirtied for balance_dirty_pages().  Call it before and
 * after bs_write() on the same thread.
 */
uint64_t bs_thread_dirtied_take(void);
/*
 * Bytes of folio memory that the writes counted by this thread's last
 * bs_thread_dirtied_take() newly pinned (clean folios they made dirty),
 * then 0: what the pinned-memory limit checks a writer by.
 */
uint64_t bs_thread_pinned_take(void);

/* Shrink or extend; dropped blocks lose their dirty state. */
int bs_truncate(struct bs_file *file, off_t size);

/*
 * fallocate: mode 0 / FALLOC_FL_KEEP_SIZE allocate in the backing store;
 * FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE and FALLOC_FL_ZERO_RANGE
 * zero the range in the cache and the backing store.  Others: -EOPNOTSUPP.
 */
int bs_fallocate(struct bs_file *file, int mode, off_t off, off_t len);

/* ---- writeback ---- */

/*
 * One contiguous run of blocks under writeback, within one folio.  The
 * run holds a reference to its folio until bs_wb_complete().
 */
struct bs_wb_run {
	struct bs_folio *folio;
	off_t off;		/* file offset of the first byte to write */
	size_t len;		/* bytes: whole blocks, trimmed at EOF */
	void *data;		/* folio memory holding them */
	uint32_t first_blk;	/* block range in the folio, [first_blk, end_blk) */
	uint32_t end_blk;
};

/*
 * Collect dirty runs at or after *@pos, before @end, into @runs (at most
 * @max_runs, together at most @max_bytes unless the first run alone is
 * larger): their blocks go from dirty to writeback.  Nothing at or past
 * the file size is collected, and a run holding it is trimmed to it.
 * *@pos is advanced past what was collected (to @end when nothing is
 * left).  Returns the number of runs, 0 only when nothing is left (fewer
 * than @max_runs does not say so); runs come in file order.
 *
 * While a hole punch or zero range of the file is in flight, collection
 * waits for it to end (after returning the runs it has, if any): the
 * caller must have completed the runs of its earlier calls.
 *
 * A write that lands on a run while it is in flight dirties its blocks
 * again; they are written by a later pass.  After a pass that wrote
 * everything, the caller sets the backing size to bs_file_size(): a file
 * whose tail was punched, or extended by truncate, has no run that would.
 */
int bs_wb_collect(struct bs_file *file, off_t *pos, off_t end,
		  struct bs_wb_run *runs, int max_runs, size_t max_bytes);
/* Flags of bs_wb_collect_mode(). */
enum {
	/* Every uptodate block of a folio that has a dirty block is written
	 * (Linux before 6.6), so runs may hold clean blocks too. */
	BS_WB_WHOLE_FOLIO = 1,
	/* Runs are not trimmed at the file size: the block holding EOF is
	 * written whole (direct I/O); the caller restores the size. */
	BS_WB_WHOLE_BLOCKS = 2,
};

/*
 * As bs_wb_collect(), with @flags, and no run longer than @max_run bytes
 * (a multiple of the block size).  Callers must not run two collections
 * of one file at once (completion clears every writeback bit of a run's
 * range).
 */
int bs_wb_collect_mode(struct bs_file *file, off_t *pos, off_t end,
		       struct bs_wb_run *runs, int max_runs, size_t max_bytes,
		       size_t max_run, unsigned int flags);

/*
 * A writeback budget in 4 KiB pages, the kernel's wbc->nr_to_write: each
 * folio a collection takes runs from costs all of its pages, however few
 * of its blocks are dirty, as writeback_iter() charges folio_nr_pages()
 * for every folio it writes.  A folio once begun is collected to its end
 * (the kernel writes a folio whole), so the budget may go below 0.
 */
struct bs_wb_budget {
	int64_t nr_to_write;	/* pages left */
	off_t paid_end;		/* end of the last folio paid for */
	off_t page_end;		/* end of the last page counted in dirty_pages */
	uint64_t folio_pages;	/* pages of budget used */
	uint64_t dirty_pages;	/* pages holding the blocks collected */
};
void bs_wb_budget_init(struct bs_wb_budget *budget, int64_t nr_to_write);

/*
 * As bs_wb_collect_mode(), paying for each folio from @budget: no run of
 * a folio not yet paid for is collected once the budget is used up, so 0
 * is returned also when it is (then *@pos is before @end).  The cache
 * counts what budgets pay and collect (stats wb_budget_pages,
 * wb_dirty_pages_written).
 */
int bs_wb_collect_budget(struct bs_file *file, off_t *pos, off_t end,
			 struct bs_wb_run *runs, int max_runs, size_t max_bytes,
			 size_t max_run, unsigned int flags, struct bs_wb_budget *budget);

/*
 * Copy @run's bytes to @dst under the folio lock: a snapshot no writer
 * changes while it is written (the folio's own memory may be rewritten at
 * any time by a write that dirties the blocks again).
 */
void bs_wb_copy(const struct bs_wb_run *run, void *dst);

/*
 * The write of @run finished with @err (0 or -errno); every collected run
 * must be completed exactly once (truncate and punch wait for it).
 * Success: blocks not dirtied again become clean and are discharged, and
 * the run's blocks are unsynced (below).  Failure: they become dirty
 * again, nothing is lost.  Drops the run's folio reference.
 */
void bs_wb_complete(struct bs_file *file, struct bs_wb_run *run, int err);

/*
 * Syncs of the backing file.  Blocks written back successfully are
 * "unsynced": not dirty, not charged, but their folio stays pinned (in
 * pinned_bytes and unsynced_bytes, not reclaimable) until a sync of the
 * backing file that started after their write succeeds.  If a sync
 * fails, every unsynced block of the file becomes dirty again, so that
 * the data is written again before a later sync can succeed: a sync that
 * succeeds then means that everything written before it is durable.
 *
 *	token = bs_sync_begin(file);
 *	err = fdatasync(backing);
 *	bs_sync_end(file, token, err);
 *
 * Success clears the unsynced blocks of every folio whose blocks were all
 * written before bs_sync_begin() (a folio also written after it stays
 * unsynced: folio granularity).  Several syncs of one file may overlap.
 * Context: any thread, no blockstate lock held; bs_sync_end() walks the
 * folios marked unsynced.
 */
uint64_t bs_sync_begin(struct bs_file *file);
void bs_sync_end(struct bs_file *file, uint64_t token, int err);
/* Whether any block of the file is unsynced. */
bool bs_file_has_unsynced(struct bs_file *file);

/*
 * ---- the folios of one file: a view, and eviction (file_map.c) ----
 *
 * For the control files .foliofs/folios and .foliofs/evict, which compare
 * the cache folio for folio with the kernel's page cache.
 */

/* One cached folio, as bs_file_folios() sees it. */
struct bs_folio_info {
	off_t start;		/* file offset, a multiple of the size */
	unsigned int order;	/* log2 of the size in 4 KiB pages: 0 .. 9 */
	bool uptodate;		/* every block uptodate */
	bool dirty;		/* a block dirty */
	bool writeback;		/* a block under writeback */
	bool ra_mark;		/* the readahead mark (PG_readahead) */
	/*
	 * The LRU state (cache.c's reclaim), read without the cache's
	 * lru_lock: each value is one the folio had during the walk.
	 */
	bool active;		/* on the active list (PG_active) */
	bool referenced;	/* the referenced bit (PG_referenced) */
	bool unsynced;		/* a block written back and not synced yet */
};

/*
 * Call @fn(@arg, info) for every folio of @file in file order until it
 * returns non-zero, which is then returned (0 when the walk ended).  Each
 * folio's state is exact when read, but the walk is not one snapshot:
 * folios made or dropped meanwhile may or may not be seen.
 * Context: any thread, no blockstate lock held; @fn is called with none.
 */
typedef int (*bs_folio_fn)(void *arg, const struct bs_folio_info *info);
int bs_file_folios(struct bs_file *file, bs_folio_fn fn, void *arg);

/* What bs_file_evict() did. */
struct bs_evict_result {
	uint64_t folios;	/* folios dropped */
	uint64_t bytes;		/* their memory */
	uint64_t kept_held;	/* folios kept: a block dirty, under writeback or unsynced */
	uint64_t kept_busy;	/* folios kept: in use (a read in flight, a reader) */
};

/*
 * Drop every folio wholly inside [@start, @end) that is clean and not in
 * use, as POSIX_FADV_DONTNEED does through invalidate_mapping_pages():
 * folios holding dirty, writeback or unsynced blocks and folios in use
 * stay (counted in @res), and so do folios only partly inside.  Nothing
 * is written back.  Dropped folios leave the clock like reclaimed ones
 * (but are not counted as reclaimed).
 * Context: any thread, no blockstate lock held; takes the file's
 * index_lock for writing.
 */
void bs_file_evict(struct bs_file *file, off_t start, off_t end,
		   struct bs_evict_result *res);

#endif /* FOLIOFS_BLOCKSTATE_H */
