/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * mem_backing.h - the in-memory backing file every unit test of blockstate
 * gives bs_file_create() (as liburing's test/helpers.c is shared by its
 * tests): struct bs_backing_ops over a growable buffer, thread safe, with
 * the knobs the tests need to count reads and inject failures.
 *
 * Semantics are Linux's for a regular file: bytes at and past len read as
 * zero (reads are short at EOF), truncate zeroes what it cuts off,
 * fallocate (the modes blockstate passes on: 0, PUNCH_HOLE|KEEP_SIZE,
 * ZERO_RANGE[|KEEP_SIZE]) zeroes and may extend.  Ranges are half-open.
 */
#ifndef FOLIOFS_MEM_BACKING_H
#define FOLIOFS_MEM_BACKING_H

#include "blockstate.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct mem_backing {
	pthread_mutex_t lock;		/* protects every field below; a leaf */
	unsigned char *data;		/* [0, cap): zero at and past len */
	size_t len;			/* the file's size */
	size_t cap;			/* bytes allocated */
	/* Set up by the test before use (read without the lock): */
	size_t max_len;			/* 0: none; else a size past it fails -EFBIG */
	bool no_fallocate;		/* fallocate fails -EOPNOTSUPP */
	long fallocate_delay_ns;	/* each fallocate takes this long first */
	void (*after_truncate)(void *arg);	/* called without the lock after one */
	void *after_truncate_arg;
	/* Counters of the read op (not of mem_backing_peek()): */
	uint64_t reads;			/* calls that did not fail */
	uint64_t read_bytes;
	off_t last_read_off;
	size_t last_read_len;
	/* Failures the test asks for: */
	int fail_reads;			/* fail the next N reads with -EIO */
	int fail_truncate;		/* fail the next truncate with this -errno */
	int fail_fallocate;		/* fail the next fallocate with this -errno */
	/*
	 * Readahead's folios above the smallest that cannot be had (the
	 * folio_alloc_fails op): the next N asked for; -1: every one.
	 */
	int fail_folio_allocs;
	uint64_t folio_allocs_failed;	/* how many it failed */
};

/* The ops; the bs_file's ops argument is the struct mem_backing. */
extern const struct bs_backing_ops mem_backing_ops;

/* An empty file (every knob off). */
void mem_backing_init(struct mem_backing *mb);
void mem_backing_destroy(struct mem_backing *mb);
/* Make the file @len bytes long (zero-filled when it grows). */
void mem_backing_set_len(struct mem_backing *mb, size_t len);
/* The same with mb->lock held (a test that looks and cuts in one step). */
void mem_backing_set_len_locked(struct mem_backing *mb, size_t len);
/* A write at @off: the file grows to its end if shorter. */
void mem_backing_write(struct mem_backing *mb, const void *buf, size_t len, off_t off);
/* The ops themselves, for tests that call them directly (@ctx: the mem_backing). */
ssize_t mem_backing_read(void *ctx, void *buf, size_t len, off_t off);
int mem_backing_truncate(void *ctx, off_t size);
int mem_backing_fallocate(void *ctx, int mode, off_t off, off_t len);
bool mem_backing_folio_alloc_fails(void *ctx, off_t off, size_t len);

/*
 * The readahead state (struct bs_ra) this thread reads through, made on
 * first use and kept for the thread's life: each thread reads as through
 * an open of its own, as each process does on the mount.
 */
struct bs_ra *mem_thread_ra(void);

#endif /* FOLIOFS_MEM_BACKING_H */
