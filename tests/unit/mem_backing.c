// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mem_backing.c - the unit tests' in-memory backing file (mem_backing.h).
 */
#include "mem_backing.h"
#include "test_helpers.h"

#include <errno.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void mem_backing_init(struct mem_backing *mb)
{
	memset(mb, 0, sizeof(*mb));
	T_CHECK(pthread_mutex_init(&mb->lock, NULL) == 0);
}

void mem_backing_destroy(struct mem_backing *mb)
{
	pthread_mutex_destroy(&mb->lock);
	free(mb->data);
	mb->data = NULL;
	mb->len = mb->cap = 0;
}

void mem_backing_set_len_locked(struct mem_backing *mb, size_t len)
{
	if (len > mb->cap) {
		size_t cap = mb->cap ? mb->cap : 4096;

		while (cap < len)
			cap *= 2;
		mb->data = realloc(mb->data, cap);
		T_CHECK(mb->data);
		memset(mb->data + mb->cap, 0, cap - mb->cap);
		mb->cap = cap;
	}
	if (len < mb->len)
		memset(mb->data + len, 0, mb->len - len);
	mb->len = len;
}

/* Context: mb->lock held.  Zero [off, off + len) inside the file. */
static void mem_zero_locked(struct mem_backing *mb, off_t off, off_t len)
{
	size_t end = (size_t)(off + len);

	if ((size_t)off >= mb->len)
		return;
	if (end > mb->len)
		end = mb->len;
	memset(mb->data + off, 0, end - (size_t)off);
}

void mem_backing_set_len(struct mem_backing *mb, size_t len)
{
	pthread_mutex_lock(&mb->lock);
	mem_backing_set_len_locked(mb, len);
	pthread_mutex_unlock(&mb->lock);
}

void mem_backing_write(struct mem_backing *mb, const void *buf, size_t len, off_t off)
{
	if (!len)
		return;
	pthread_mutex_lock(&mb->lock);
	if ((size_t)off + len > mb->len)
		mem_backing_set_len_locked(mb, (size_t)off + len);
	memcpy(mb->data + off, buf, len);
	pthread_mutex_unlock(&mb->lock);
}

ssize_t mem_backing_read(void *ctx, void *buf, size_t len, off_t off)
{
	struct mem_backing *mb = ctx;
	size_t n = 0;

	if (off < 0)
		return -EINVAL;
	pthread_mutex_lock(&mb->lock);
	if (mb->fail_reads) {
		mb->fail_reads--;
		pthread_mutex_unlock(&mb->lock);
		return -EIO;
	}
	mb->reads++;
	mb->last_read_off = off;
	mb->last_read_len = len;
	if ((size_t)off < mb->len) {
		n = mb->len - (size_t)off < len ? mb->len - (size_t)off : len;
		memcpy(buf, mb->data + off, n);
	}
	mb->read_bytes += n;
	pthread_mutex_unlock(&mb->lock);
	return (ssize_t)n;
}

int mem_backing_truncate(void *ctx, off_t size)
{
	struct mem_backing *mb = ctx;
	int err = 0;

	if (size < 0)
		return -EINVAL;
	if (mb->max_len && (size_t)size > mb->max_len)
		return -EFBIG;
	pthread_mutex_lock(&mb->lock);
	err = mb->fail_truncate;
	mb->fail_truncate = 0;
	if (!err)
		mem_backing_set_len_locked(mb, (size_t)size);
	pthread_mutex_unlock(&mb->lock);
	if (!err && mb->after_truncate)
		mb->after_truncate(mb->after_truncate_arg);
	return err;
}

/* fallocate(2) as Linux does it for the modes blockstate passes on. */
int mem_backing_fallocate(void *ctx, int mode, off_t off, off_t len)
{
	struct mem_backing *mb = ctx;
	bool keep = mode & FALLOC_FL_KEEP_SIZE;
	int err = 0;

	if (mb->no_fallocate)
		return -EOPNOTSUPP;
	if (mb->fallocate_delay_ns) {
		struct timespec pause = { 0, mb->fallocate_delay_ns };

		nanosleep(&pause, NULL);
	}
	if (off < 0 || len <= 0)
		return -EINVAL;
	pthread_mutex_lock(&mb->lock);
	err = mb->fail_fallocate;
	mb->fail_fallocate = 0;
	if (err)
		goto out_unlock;
	switch (mode & ~FALLOC_FL_KEEP_SIZE) {
	case FALLOC_FL_PUNCH_HOLE:
		if (!keep)
			err = -EOPNOTSUPP;
		else
			mem_zero_locked(mb, off, len);
		goto out_unlock;
	case FALLOC_FL_ZERO_RANGE:
		mem_zero_locked(mb, off, len);
		break;
	case 0:
		break;
	default:
		err = -EOPNOTSUPP;
		goto out_unlock;
	}
	if (!keep && (size_t)(off + len) > mb->len) {
		if (mb->max_len && (size_t)(off + len) > mb->max_len)
			err = -EFBIG;
		else
			mem_backing_set_len_locked(mb, (size_t)(off + len));
	}
out_unlock:
	pthread_mutex_unlock(&mb->lock);
	return err;
}

bool mem_backing_folio_alloc_fails(void *ctx, off_t off, size_t len)
{
	struct mem_backing *mb = ctx;
	bool fails;

	(void)off;
	(void)len;
	pthread_mutex_lock(&mb->lock);
	fails = mb->fail_folio_allocs != 0;
	if (mb->fail_folio_allocs > 0)
		mb->fail_folio_allocs--;
	if (fails)
		mb->folio_allocs_failed++;
	pthread_mutex_unlock(&mb->lock);
	return fails;
}

const struct bs_backing_ops mem_backing_ops = {
	.read = mem_backing_read,
	.truncate = mem_backing_truncate,
	.fallocate = mem_backing_fallocate,
	.folio_alloc_fails = mem_backing_folio_alloc_fails,
};

struct bs_ra *mem_thread_ra(void)
{
	static __thread struct bs_ra ra;
	static __thread bool made;

	if (!made) {
		bs_ra_init(&ra);
		made = true;
	}
	return &ra;
}
