// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cache_view.c - the cache folio for folio, for the control files
 * .foliofs/folios (a listing of every cached folio) and .foliofs/evict
 * (drop a file's clean folios in a range), with which
 * contrib/kernel/ra-patterns.py compares the mount with the kernel's page
 * cache after the same reads.
 *
 * Both walk the live files with wb_next_file(), which holds a reference
 * on the file being looked at, and leave the folios to blockstate
 * (bs_file_folios(), bs_file_evict()); files are named by their backing
 * st_ino, which is what stat(2) through the mount reports.  No lock of
 * this layer is taken.
 */
#include "wb_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One file's lines. */
struct view_file {
	uint64_t ino;
	char *text;
	size_t len;
};

/*
 * "INO INDEX ORDER FLAGS": FLAGS are the letters of the folio's state in
 * this order, or "-" for none: u (every block uptodate), d (a block
 * dirty), w (a block under writeback), r (the readahead mark), A (on the
 * active list), R (referenced), s (a block written back and not yet
 * synced).  At most FOLIO_FLAGS_MAX letters.
 */
#define FOLIO_FLAGS_MAX 7

static int folio_line(void *arg, const struct bs_folio_info *fi)
{
	struct { FILE *out; uint64_t ino; } *v = arg;
	char flags[FOLIO_FLAGS_MAX + 1];
	int n = 0;

	if (fi->uptodate)
		flags[n++] = 'u';
	if (fi->dirty)
		flags[n++] = 'd';
	if (fi->writeback)
		flags[n++] = 'w';
	if (fi->ra_mark)
		flags[n++] = 'r';
	if (fi->active)
		flags[n++] = 'A';
	if (fi->referenced)
		flags[n++] = 'R';
	if (fi->unsynced)
		flags[n++] = 's';
	if (!n)
		flags[n++] = '-';
	flags[n] = '\0';
	return fprintf(v->out, "%llu %llu %u %s\n", (unsigned long long)v->ino,
		       (unsigned long long)(fi->start >> 12), fi->order, flags) < 0;
}

/* @wbf's lines into @vf: 0 or -ENOMEM. */
static int view_one(struct wb_file *wbf, struct view_file *vf)
{
	struct { FILE *out; uint64_t ino; } v = { NULL, (uint64_t)wbf->ino };
	int failed;

	vf->ino = v.ino;
	vf->text = NULL;
	vf->len = 0;
	v.out = open_memstream(&vf->text, &vf->len);
	if (!v.out)
		return -ENOMEM;
	failed = bs_file_folios(wbf->ws.bs, folio_line, &v) || ferror(v.out);
	if (fclose(v.out) || failed) {
		free(vf->text);
		vf->text = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int view_cmp(const void *a, const void *b)
{
	const struct view_file *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* The files' lines in @vf[0..@n), sorted, as one buffer: its length or -ENOMEM. */
static ssize_t view_join(struct view_file *vf, size_t n, char **out)
{
	size_t total = 0, used = 0;
	char *buf;

	if (n)
		qsort(vf, n, sizeof(*vf), view_cmp);
	for (size_t i = 0; i < n; i++)
		total += vf[i].len;
	buf = malloc(total + 1);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		memcpy(buf + used, vf[i].text, vf[i].len);
		used += vf[i].len;
	}
	buf[used] = '\0';
	*out = buf;
	return (ssize_t)used;
}

/*
 * A file's lines into the next slot of *@vf (grown as needed): 0 or
 * -ENOMEM.
 */
static int view_add(struct wb_file *wbf, struct view_file **vf, size_t *n, size_t *cap)
{
	int ret;

	if (*n == *cap) {
		size_t ncap = *cap ? 2 * *cap : 16;
		struct view_file *nvf = realloc(*vf, ncap * sizeof(**vf));

		if (!nvf)
			return -ENOMEM;
		*vf = nvf;
		*cap = ncap;
	}
	ret = view_one(wbf, &(*vf)[*n]);
	if (!ret)
		(*n)++;
	return ret;
}

ssize_t wb_ctx_folios(struct wb_ctx *ctx, char **out)
{
	struct view_file *vf = NULL;
	size_t n = 0, cap = 0;
	ssize_t ret = 0;

	/* The walk goes to its end even after a failure: it drops its references so. */
	for (struct wb_file *wbf = wb_next_file(ctx, NULL); wbf; wbf = wb_next_file(ctx, wbf)) {
		if (!ret)
			ret = view_add(wbf, &vf, &n, &cap);
	}
	if (!ret)
		ret = view_join(vf, n, out);
	for (size_t i = 0; i < n; i++)
		free(vf[i].text);
	free(vf);
	return ret;
}

int wb_ctx_evict(struct wb_ctx *ctx, uint64_t ino, off_t start, off_t end,
		 struct bs_evict_result *res)
{
	bool found = false;

	*res = (struct bs_evict_result){ 0 };
	for (struct wb_file *wbf = wb_next_file(ctx, NULL); wbf; wbf = wb_next_file(ctx, wbf)) {
		struct bs_evict_result one;

		if ((uint64_t)wbf->ino != ino)
			continue;
		found = true;
		bs_file_evict(wbf->ws.bs, start, end, &one);
		res->folios += one.folios;
		res->bytes += one.bytes;
		res->kept_held += one.kept_held;
		res->kept_busy += one.kept_busy;
	}
	return found ? 0 : -ENOENT;
}
