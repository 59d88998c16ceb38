/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * foliofs_tp.h - what each foliofs USDT probe carries: one pointer (arg0)
 * to a struct named foliofs_<probe>, whose fields have the names, order
 * and C types of the kernel tracepoint's fields of the same name
 * (/sys/kernel/tracing/events/.../format, Linux 6.18) where foliofs has
 * them.  Plain C with no includes, so that bpftrace can #include it:
 *
 *   #include "foliofs_tp.h"
 *   usdt:/usr/bin/foliofs:foliofs:balance_dirty_pages
 *   { @pause[comm] = hist(((struct foliofs_balance_dirty_pages *)arg0)->pause); }
 *
 * contrib/bpftrace/foliofs-bpftrace rewrites a script written for the
 * kernel's tracepoints (args->pause) into that form.  A struct rather
 * than one USDT argument per field: the kernel's tracepoints have up to
 * 13 fields, sys/sdt.h takes at most 12 arguments, and Debian's bpftrace
 * (0.17) reads only arg0..arg5 of a USDT probe.  Units are the kernel's:
 * pages of 4 KiB, KiB/s (KBps()) for rates, ms for times.  Fields foliofs
 * has no value for (the bdi name, cgroup_ino, pfn, s_dev) are left out or
 * 0, as doc/tracing.md lists.  Append fields only at the end.
 */
#ifndef FOLIOFS_TP_H
#define FOLIOFS_TP_H

/* writeback:balance_dirty_pages, each round of the throttler not freerun. */
struct foliofs_balance_dirty_pages {
	unsigned long limit;		/* pages: the hard limit (follows thresh) */
	unsigned long setpoint;		/* pages: (freerun + limit) / 2 */
	unsigned long dirty;		/* pages charged (the domain's) */
	unsigned long wb_setpoint;	/* setpoint * wb_thresh / (thresh + 1) */
	unsigned long wb_dirty;		/* one device: dirty */
	unsigned long dirty_ratelimit;	/* KiB/s */
	unsigned long task_ratelimit;	/* KiB/s */
	unsigned int dirtied;		/* pages dirtied since the last check */
	unsigned int dirtied_pause;	/* pages between checks, before this round */
	unsigned long paused;		/* ms: always 0 (see doc/tracing.md) */
	long pause;			/* ms (whole ticks): taken, or min(pause, 0) */
	unsigned long period;		/* ms (whole ticks) */
	long think;			/* ms since the last pause ended */
	/* foliofs's own: */
	int pid;			/* the writer (the FUSE request's pid); the
					 * probe fires in a daemon thread */
};

/* writeback:bdi_dirty_ratelimit, each update of the rate limit. */
struct foliofs_bdi_dirty_ratelimit {
	unsigned long write_bw;		/* KiB/s, all fields */
	unsigned long avg_write_bw;
	unsigned long dirty_rate;
	unsigned long dirty_ratelimit;
	unsigned long task_ratelimit;
	unsigned long balanced_dirty_ratelimit;
};

/* writeback:global_dirty_state, each round of the throttler. */
struct foliofs_global_dirty_state {
	unsigned long nr_dirty;		/* pages, all fields */
	unsigned long nr_writeback;
	unsigned long background_thresh;
	unsigned long dirty_thresh;
	unsigned long dirty_limit;
	unsigned long nr_dirtied;
	unsigned long nr_written;
};

/* writeback:writeback_dirty_folio, a clean folio gets a dirty block. */
struct foliofs_writeback_dirty_folio {
	unsigned long ino;		/* the backing file's st_ino */
	unsigned long index;		/* the folio's first page */
};

/* writeback:folio_wait_writeback, each wait for a folio's writeback. */
struct foliofs_folio_wait_writeback {
	unsigned long ino;
	unsigned long index;
};

/* writeback:wbc_writepage, each run (in one folio) a pass writes. */
struct foliofs_wbc_writepage {
	long nr_to_write;		/* pages left of the chunk's budget, or LONG_MAX */
	long pages_skipped;		/* 0 */
	int sync_mode;			/* 1 (WB_SYNC_ALL): fsync, sync, unmount */
	int for_kupdate;		/* expired data (dirty_expire_ms) */
	int for_background;		/* over the background threshold */
	int range_cyclic;		/* 0 */
	long range_start;		/* bytes: the pass's range, end inclusive */
	long range_end;
	/* foliofs's own, after the kernel's fields: */
	unsigned long ino;
	long pos;			/* bytes: the run */
	unsigned long count;
};

/* writeback:writeback_written, the end of a pass over one file. */
struct foliofs_writeback_written {
	long nr_pages;			/* pages in the runs written */
	unsigned int sb_dev;		/* 0 */
	int sync_mode;
	int for_kupdate;
	int range_cyclic;
	int for_background;
	int reason;			/* 0 background, 2 sync, 3 periodic */
	/* foliofs's own: */
	unsigned long ino;
};

/* filemap:mm_filemap_add_to_page_cache, a folio enters the cache. */
struct foliofs_mm_filemap_add_to_page_cache {
	unsigned long pfn;		/* 0 */
	unsigned long i_ino;
	unsigned long index;
	unsigned int s_dev;		/* 0 */
	unsigned char order;		/* page order: 0 .. 9 (4 KiB .. 2 MiB) */
};

/* filemap:mm_filemap_delete_from_page_cache, a folio leaves the cache. */
struct foliofs_mm_filemap_delete_from_page_cache {
	unsigned long pfn;		/* 0 */
	unsigned long i_ino;
	unsigned long index;
	unsigned int s_dev;		/* 0 */
	unsigned char order;		/* page order: 0 .. 9 (4 KiB .. 2 MiB) */
};

/* readahead:page_cache_sync_ra, a read finds a page not cached (the state before). */
struct foliofs_page_cache_sync_ra {
	unsigned long i_ino;
	unsigned int s_dev;		/* 0 */
	unsigned long index;
	unsigned int order;
	unsigned int size;
	unsigned int async_size;
	unsigned int ra_pages;
	unsigned int mmap_miss;		/* 0 */
	long long prev_pos;
	unsigned long req_count;
};

/* readahead:page_cache_async_ra, a read meets a marked folio (the state before). */
struct foliofs_page_cache_async_ra {
	unsigned long i_ino;
	unsigned int s_dev;
	unsigned long index;
	unsigned int order;
	unsigned int size;
	unsigned int async_size;
	unsigned int ra_pages;
	unsigned int mmap_miss;
	long long prev_pos;
	unsigned long req_count;
};

#endif
