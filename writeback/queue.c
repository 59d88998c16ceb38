// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * queue.c - the writeback queue as a user sees it, and sync of the whole
 * mount (foliofsctl files, foliofsctl sync).
 *
 * Both walk the live files with wb_next_file(), which holds a reference
 * on the file being looked at, so a file freed meanwhile waits for the
 * walk to move on and a new file may or may not be seen.  Neither takes
 * a lock of its own: the listing reads each file's counters and
 * blockstate's per-folio state, and the sync is one wb_file_flush() per
 * file, which serializes with the flushers on the file's wb_lock.
 */
#include "wb_i.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * One line of the listing for @wbf, or nothing when it holds no dirty
 * or writeback data: "dirty_bytes writeback_bytes oldest_dirty_age_ms
 * errors PATH", where errors is the number of failed writebacks of the
 * file, followed by ":" and the last error's name when there was one.
 */
static void file_line(FILE *out, struct wb_file *wbf, int64_t now)
{
	uint64_t dirty, writeback, nr_errs = atomic_load(&wbf->ws.err_seq);
	int64_t dirtied = atomic_load(&wbf->ws.dirtied_ns), age_ms = 0;
	char path[PATH_MAX];

	bs_file_held_bytes(wbf->ws.bs, &dirty, &writeback);
	if (!dirty && !writeback)
		return;
	/* 0 while a pass has just taken the age; never negative. */
	if (dirtied && now > dirtied)
		age_ms = (now - dirtied) / 1000000;
	wb_file_path(wbf, path, sizeof(path));
	fprintf(out, "%llu %llu %lld %llu", (unsigned long long)dirty,
		(unsigned long long)writeback, (long long)age_ms,
		(unsigned long long)nr_errs);
	if (nr_errs) {
		const char *name = strerrorname_np(-atomic_load(&wbf->ws.err));

		fprintf(out, ":%s", name ? name : "E?");
	}
	fprintf(out, " %s\n", path);
}

ssize_t wb_ctx_files(struct wb_ctx *ctx, char **out)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int64_t now = wb_now_ns();
	int failed;

	if (!f)
		return -ENOMEM;
	for (struct wb_file *wbf = wb_next_file(ctx, NULL); wbf; wbf = wb_next_file(ctx, wbf))
		file_line(f, wbf, now);
	failed = ferror(f);
	if (fclose(f) || failed) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	return (ssize_t)len;
}

int wb_ctx_sync_all(struct wb_ctx *ctx)
{
	int first_err = 0;

	for (struct wb_file *wbf = wb_next_file(ctx, NULL); wbf; wbf = wb_next_file(ctx, wbf)) {
		int ret = wb_file_flush(wbf);

		/*
		 * The caller learns one errno; the log names every file that
		 * stays dirty.  Each error is also kept for the file's fsync.
		 */
		if (ret) {
			wb_report(wbf, "sync", ret);
			if (!first_err)
				first_err = ret;
		}
	}
	return first_err;
}
