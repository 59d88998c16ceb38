// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * A file's backing descriptor closed while the file is idle and opened
 * again (wb_file_fd_close, wb_file_fd_reopen): refused while anything
 * still needs it (dirty data, data written but not synced, a walker such
 * as a flusher looking at the file), a pending mtime set before it goes,
 * and the cache and the errseq cursors unchanged across a reopen.  No
 * flushers: every writeback here is the test's own.
 */
#include "wb_i.h"
#include "test_helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct wb_ctx *ctx;
static char path[] = "/tmp/foliofs-wbreopen-XXXXXX";

static void reopen(struct wb_file *f)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);

	T_CHECK(fd >= 0);
	T_CHECK(wb_file_fd_reopen(f, fd, WB_RDWR) == 0);
	T_CHECK(wb_file_has_fd(f));
}

static void check_backing(const char *want, size_t len)
{
	char buf[64];
	int fd = open(path, O_RDONLY);

	T_CHECK(fd >= 0);
	T_CHECK(pread(fd, buf, sizeof(buf), 0) == (ssize_t)len);
	T_CHECK(memcmp(buf, want, len) == 0);
	close(fd);
}

static void set_fault(const char *spec)
{
	char err[128];

	T_CHECK(wb_ctx_set_fault(ctx, spec, err, sizeof(err)) == 0);
}

/* Only an idle file gives its descriptor up; data survives the reopen. */
static void test_busy_then_idle(struct wb_file *f)
{
	char buf[16];
	int fd;

	T_CHECK(wb_write(f, "hello", 5, 0, NULL) == 5);
	T_CHECK(wb_file_fd_close(f) == -EBUSY);		/* dirty */
	set_fault("fsync:EIO:count=1");
	T_CHECK(wb_file_flush(f) == -EIO);
	set_fault("off");
	T_CHECK(wb_file_fd_close(f) == -EBUSY);		/* written, not synced */
	T_CHECK(wb_file_flush(f) == 0);
	T_CHECK(wb_next_file(ctx, NULL) == f);		/* a walker looks at it */
	T_CHECK(wb_file_fd_close(f) == -EBUSY);
	T_CHECK(wb_next_file(ctx, f) == NULL);
	T_CHECK(wb_file_fd_close(f) == 0);
	T_CHECK(!wb_file_has_fd(f));
	T_CHECK(wb_file_fd_close(f) == 0);		/* already closed */
	check_backing("hello", 5);
	/* A walker and the whole-file flush find nothing to do. */
	T_CHECK(wb_ctx_sync_all(ctx) == 0);
	T_CHECK(wb_file_flush(f) == 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	T_CHECK(fd >= 0);
	T_CHECK(wb_file_upgrade(f, fd, WB_RDWR) == -EBADF);	/* consumed */
	reopen(f);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	T_CHECK(fd >= 0);
	T_CHECK(wb_file_fd_reopen(f, fd, WB_READ) == -EBUSY);	/* has one */
	T_CHECK(wb_read(f, NULL, buf, sizeof(buf), 0) == 5 && !memcmp(buf, "hello", 5));
	T_CHECK(wb_write(f, "J", 1, 0, NULL) == 1);
	T_CHECK(wb_fsync(f, false, NULL) == 0);
	check_backing("Jello", 5);
}

/* fdatasync leaves the time to set: closing sets it first. */
static void test_mtime_set_before_close(struct wb_file *f)
{
	struct stat cached, backing;

	T_CHECK(wb_write(f, "y", 1, 5, NULL) == 1);
	T_CHECK(wb_fsync(f, true, NULL) == 0);
	T_CHECK(stat(path, &backing) == 0);
	cached = backing;
	wb_file_fix_stat(f, &cached);
	T_CHECK(wb_file_fd_close(f) == 0);
	T_CHECK(stat(path, &backing) == 0);
	T_CHECK(backing.st_mtim.tv_sec == cached.st_mtim.tv_sec &&
		backing.st_mtim.tv_nsec == cached.st_mtim.tv_nsec);
	reopen(f);
}

/*
 * A failure seen by one cursor and not by another: after the data is
 * written, the descriptor closed and reopened, the second cursor still
 * hears of it, once.
 */
static void test_errseq_across_reopen(struct wb_file *f)
{
	uint64_t seen_a = wb_file_err_sample(f), seen_b = seen_a;

	T_CHECK(wb_write(f, "z", 1, 0, NULL) == 1);
	set_fault("write:EIO:count=1");
	T_CHECK(wb_fsync(f, false, &seen_a) == -EIO);
	set_fault("off");
	T_CHECK(wb_fsync(f, false, &seen_a) == 0);
	T_CHECK(wb_file_fd_close(f) == 0);
	reopen(f);
	T_CHECK(wb_fsync(f, false, &seen_b) == -EIO);
	T_CHECK(wb_fsync(f, false, &seen_b) == 0);
	T_CHECK(wb_fsync(f, false, &seen_a) == 0);
	check_backing("zelloy", 6);
}

int main(void)
{
	struct bs_config cfg = {
		.block_size = 4096, .folio_size = 64 << 10, .cache_size = 1 << 20,
		.account = bs_account_policy_find("page"),
		.size = bs_size_policy_find("fixed"),
	};
	struct wb_config wcfg;
	struct wb_file *f;
	int fd = mkstemp(path);

	wb_config_default(&wcfg);
	wcfg.flushers = 0;
	T_CHECK(fd >= 0);
	T_CHECK(wb_ctx_create(&cfg, &wcfg, &ctx) == 0);
	T_CHECK(wb_file_alloc(ctx, fd, WB_RDWR, &f) == 0);
	test_busy_then_idle(f);
	test_mtime_set_before_close(f);
	test_errseq_across_reopen(f);
	T_CHECK(wb_file_fd_close(f) == 0);
	T_CHECK(wb_file_free(f) == 0);	/* closed: nothing left to close */
	T_CHECK(wb_ctx_destroy(ctx) == 0);
	unlink(path);
	return T_EXIT_PASS;
}
