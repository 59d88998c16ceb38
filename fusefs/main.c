// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * main.c - foliofs daemon: check the command line, open BACKING, mount,
 * daemonize once the mount is ready, serve until unmounted or signalled.
 *
 * Exit status: 0 after a clean unmount or SIGTERM/SIGINT/SIGHUP; 2 for bad
 * input (nothing mounted); 1 when the mount or the session fails.
 */
#include "fusefs.h"
#include "writeback.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

static bool log_to_syslog;

/*
 * libfuse's messages get our prefix; after daemonizing they go to syslog.
 * libfuse builds some lines from several calls: collect up to the newline.
 */
static void ffs_log(enum fuse_log_level level, const char *fmt, va_list ap)
{
	static __thread char line[1024];
	static __thread size_t used;
	const char *text = line;

	vsnprintf(line + used, sizeof(line) - used, fmt, ap);
	used = strnlen(line, sizeof(line) - 1);
	if (used < sizeof(line) - 1 && (used == 0 || line[used - 1] != '\n'))
		return;
	used = 0;
	if (!strncmp(text, "fuse: ", 6))
		text += 6;
	if (log_to_syslog)
		syslog((int)level, "%s", text);
	else
		fprintf(stderr, "foliofs: %s", text);
}

/* writeback's messages: the same way as ours and libfuse's. */
static void wb_logger(const char *line)
{
	if (log_to_syslog)
		syslog(LOG_ERR, "%s", line);
	else
		fprintf(stderr, "foliofs: %s\n", line);
}

static int usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("foliofs: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return 2;
}

/*
 * A daemon serving a database holds many descriptors: take the hard limit,
 * and as root raise that to the kernel's nr_open.
 */
static void raise_nofile(void)
{
	struct rlimit rl;
	FILE *f;
	unsigned long nr_open = 0;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	f = fopen("/proc/sys/fs/nr_open", "re");
	if (f) {
		if (fscanf(f, "%lu", &nr_open) != 1)
			nr_open = 0;
		fclose(f);
	}
	if (nr_open > rl.rlim_max) {
		struct rlimit want = { nr_open, nr_open };

		if (!setrlimit(RLIMIT_NOFILE, &want))
			return;
	}
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		fprintf(stderr, "foliofs: warning: cannot raise RLIMIT_NOFILE: %s\n",
			strerror(errno));
}

static void *cancel_probe(void *arg)
{
	(void)arg;
	for (;;)
		pause();	/* a cancellation point */
	return NULL;
}

/*
 * libfuse ends its worker threads with pthread_cancel(), and glibc loads
 * libgcc_s (to unwind the cancelled thread) the first time a thread is
 * cancelled.  That needs a descriptor: a daemon that had run out of them
 * aborted at unmount with "libgcc_s.so.1 must be installed for
 * pthread_cancel to work".  Cancel one thread now, while descriptors are
 * plentiful; glibc keeps the library loaded from then on.  0 or -errno.
 */
static int load_cancel_support(void)
{
	pthread_t t;
	int ret = pthread_create(&t, NULL, cancel_probe, NULL);

	if (ret)
		return -ret;
	ret = pthread_cancel(t);
	pthread_join(t, NULL);
	return -ret;
}

/*
 * BACKING: a directory (its tree is mounted), or a regular file or block
 * device (mounted as one file over the regular file MOUNTPOINT).
 */
static int open_backing(const struct ffs_config *cfg, int *fd, mode_t *type)
{
	const char *path = cfg->backing;
	struct stat st, mst;

	*fd = open(path, O_PATH | O_CLOEXEC);
	if (*fd < 0)
		return usage_error("BACKING %s: %s", path, strerror(errno));
	if (fstat(*fd, &st) < 0 || stat(cfg->mountpoint, &mst) < 0) {
		close(*fd);
		return usage_error("BACKING %s: %s", path, strerror(errno));
	}
	*type = st.st_mode & S_IFMT;
	if (S_ISDIR(st.st_mode) && !S_ISDIR(mst.st_mode)) {
		close(*fd);
		return usage_error("MOUNTPOINT %s: not a directory", cfg->mountpoint);
	}
	if ((S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) && !S_ISREG(mst.st_mode)) {
		close(*fd);
		return usage_error("MOUNTPOINT %s: must be a regular file when BACKING %s is a %s",
				   cfg->mountpoint, path,
				   S_ISREG(st.st_mode) ? "regular file" : "block device");
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		close(*fd);
		return usage_error("BACKING %s: not a directory, regular file or block device", path);
	}
	return 0;
}

/*
 * backing_direct=auto: O_DIRECT where BACKING's file system takes it with
 * block_size I/O from page-aligned memory, as statx(STATX_DIOALIGN)
 * reports (Linux 6.1).  A directory is probed with an unnamed temporary
 * file in it (O_TMPFILE, gone at close), a file or device by opening it.
 * Anything that fails (no O_TMPFILE, no O_DIRECT, read-only, no alignment
 * reported) means buffered backing I/O.  Files on other file systems
 * mounted inside BACKING are opened buffered where O_DIRECT is refused.
 */
static bool probe_backing_direct(const struct ffs_config *cfg, int root_fd, mode_t type)
{
	long page = sysconf(_SC_PAGESIZE);
	struct ffs_procpath p;
	struct statx stx;
	bool ok;
	int fd;

	ffs_procpath(&p, root_fd);
	if (S_ISDIR(type))
		fd = open(p.path, O_TMPFILE | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);
	else
		fd = open(p.path, O_RDONLY | O_DIRECT | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return false;
	ok = statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
	     (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align &&
	     stx.stx_dio_mem_align && page > 0 &&
	     cfg->bs.block_size % stx.stx_dio_offset_align == 0 &&
	     (unsigned long)page % stx.stx_dio_mem_align == 0;
	close(fd);
	return ok;
}

/*
 * Create the file of option @name (stats_log=, trace=, write_log=) now, as
 * the user who mounts and before mounting, so that a path that cannot be
 * written is reported like any bad option; the daemon opens it again once
 * it runs (the stats log appends, the recorder and the write log truncate).
 */
static int create_output(const char *name, const char *path, int flags)
{
	int fd;

	if (!path)
		return 0;
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
	if (fd < 0)
		return usage_error("%s=%s: %s", name, path, strerror(errno));
	close(fd);
	return 0;
}

/*
 * The command line into @cfg, and what it asks for before anything is
 * mounted: --help, --version, BACKING opened (*@root_fd, its type in
 * @fs), O_DIRECT probed, the output files created.  -1 to go on with the
 * mount, or the exit status (@cfg still to be freed).
 */
static int configure(int argc, char **argv, struct ffs_config *cfg, struct ffs_data *fs,
		     int *root_fd)
{
	char err[FFS_ERRLEN];
	int ret;

	if (ffs_parse_args(argc, argv, cfg, err))
		return err[0] ? usage_error("%s", err) : 2;
	if (cfg->show_help || cfg->show_version) {
		if (cfg->show_help)
			ffs_print_help(argv[0]);
		else
			printf("foliofs %s (libfuse %s)\n", FOLIOFS_VERSION, fuse_pkgversion());
		return 0;
	}
	ret = open_backing(cfg, root_fd, &fs->backing_type);
	if (ret)
		return ret;
	cfg->wb.backing_direct = cfg->backing_direct == FFS_DIRECT_ON ||
		(cfg->backing_direct == FFS_DIRECT_AUTO &&
		 probe_backing_direct(cfg, *root_fd, fs->backing_type));
	ret = create_output("stats_log", cfg->wb.stats_log, O_APPEND);
	if (!ret)
		ret = create_output("trace", cfg->trace, O_TRUNC);
	if (!ret)
		ret = create_output("write_log", cfg->write_log, O_TRUNC);
	if (ret) {
		close(*root_fd);
		return ret;
	}
	return -1;
}

static int serve(struct fuse_session *se, const struct ffs_config *cfg)
{
	struct fuse_loop_config *lc;
	int ret;

	if (cfg->singlethread)
		return fuse_session_loop(se);
	lc = fuse_loop_cfg_create();
	if (!lc)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(lc, cfg->clone_fd);
	/* UINT_MAX: not given, keep libfuse's default. */
	if (cfg->max_idle_threads != UINT_MAX)
		fuse_loop_cfg_set_idle_threads(lc, cfg->max_idle_threads);
	if (cfg->max_threads != UINT_MAX)
		fuse_loop_cfg_set_max_threads(lc, cfg->max_threads);
	ret = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	return ret;
}

/*
 * The loop reports the signal that stopped it, or how the kernel ended the
 * connection: unmounted (ENODEV), or aborted while a lazy unmount let go of
 * it (ECONNABORTED, seen on 6.18).  All are clean ends; what was dirty is
 * written back after the loop either way.
 */
static bool clean_stop(int ret)
{
	return ret == 0 || ret == SIGTERM || ret == SIGINT || ret == SIGHUP ||
	       ret == -ENODEV || ret == -ECONNABORTED;
}

/*
 * Threads keep buffers of up to a few MiB (FUSE workers' read buffers,
 * writeback bounce memory), which glibc serves with mmap.  Freeing such a
 * chunk raises glibc's dynamic mmap threshold to its size, and from then
 * on every thread's large buffers come from per-thread arenas that keep
 * freed memory: after a busy run the daemon held 130-170 MiB over its
 * baseline with nothing cached (test_reclaim_stress.py).  A fixed
 * threshold (glibc's default value) turns the raising off.
 */
#define MALLOC_MMAP_THRESHOLD (128 << 10)

int main(int argc, char *argv[])
{
	static struct ffs_data fs;
	struct fuse_session *se;
	struct ffs_config cfg;
	char err[FFS_ERRLEN];
	int root_fd = -1, ret, status = 1;
	/* Set by the worker that answers INIT; read once the loop joined it. */
	bool uring_refused = false;

	/* Fails only for values out of glibc's range: a hint either way. */
	(void)mallopt(M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD);
	fuse_set_log_func(ffs_log);
	wb_set_logger(wb_logger);
	ret = configure(argc, argv, &cfg, &fs, &root_fd);
	if (ret >= 0) {
		ffs_config_free(&cfg);
		return ret;
	}

	/* Modes arrive with the caller's umask applied by the kernel. */
	umask(0);
	raise_nofile();
	ret = load_cancel_support();
	if (ret) {
		fprintf(stderr, "foliofs: cannot initialise: %s\n", strerror(-ret));
		close(root_fd);
		goto out_cfg;
	}
	fs.cfg = &cfg;
	fs.act_as_caller = cfg.allow_other && geteuid() == 0;
	if (ffs_creds_init() || ffs_itable_init(&fs, root_fd, &ffs_backing_ops)) {
		fprintf(stderr, "foliofs: cannot initialise: %s\n", strerror(errno));
		close(root_fd);
		goto out_cfg;
	}

	se = fuse_session_new(&cfg.args, &ffs_ops, sizeof(ffs_ops), &fs);
	if (!se) {
		status = 2;	/* libfuse has named the bad option */
		goto out_itable;
	}
	fs.se = se;
	if (fuse_set_signal_handlers(se))
		goto out_session;
	if (fuse_session_mount(se, cfg.mountpoint))
		goto out_signals;
	/* The ring serves from threads of its own: -s asks for none. */
	if (cfg.uring == FFS_URING_AUTO && cfg.uring_given && cfg.singlethread)
		fuse_log(FUSE_LOG_NOTICE, "uring: not used with -s: serving over /dev/fuse\n");
	ffs_uring_set_pin(cfg.uring_pin);
	if (ffs_channel_attach(se, cfg.uring != FFS_URING_OFF && !cfg.singlethread,
			       cfg.uring_given,
			       cfg.uring == FFS_URING_ON ? &uring_refused : NULL))
		goto out_unmount;
	if (fuse_daemonize(cfg.foreground))
		goto out_unmount;
	if (!cfg.foreground) {
		/* Connected now: a message must not need a descriptor later. */
		openlog("foliofs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
		log_to_syslog = true;
	}
	/* Threads (flushers, the reply timer) only after fork. */
	ret = wb_ctx_create(&cfg.bs, &cfg.wb, &fs.wb);
	if (ret) {
		fuse_log(FUSE_LOG_ERR, "error: cannot set up the cache: %s\n", strerror(-ret));
		goto out_unmount;
	}
	ret = ffs_trace_init(&fs.trace);
	if (!ret && cfg.trace)
		ret = ffs_trace_start(fs.trace, cfg.trace, err, sizeof(err));
	if (ret) {
		fuse_log(FUSE_LOG_ERR, "error: cannot record the trace: %s\n",
			 cfg.trace ? err : strerror(-ret));
		goto out_unmount;
	}
	ret = ffs_defer_start(&fs);
	if (ret) {
		fuse_log(FUSE_LOG_ERR, "error: cannot start the reply timer: %s\n",
			 strerror(-ret));
		goto out_unmount;
	}
	ret = ffs_prune_start(&fs, se);
	if (ret) {
		fuse_log(FUSE_LOG_ERR, "error: cannot start the pruner: %s\n", strerror(-ret));
		goto out_unmount;
	}
	/* What the daemon holds now is outside the budget of descriptors. */
	ffs_fd_budget_init(&fs);

	ret = serve(se, &cfg);
	/*
	 * libfuse has joined its workers, but the ring threads serve until
	 * stopped: stop them taking requests now, so that no handler runs
	 * while the reply timer, the trace and the cache are torn down.
	 */
	ffs_uring_stop();
	/* No request runs any more: nothing wakes the pruner. */
	ffs_prune_stop(&fs);
	status = clean_stop(ret) && !uring_refused ? 0 : 1;
	if (!clean_stop(ret))
		fuse_log(FUSE_LOG_ERR, "session ended with error %d\n", ret);
	/*
	 * Held write replies go out while the channel is still open, so that
	 * paused writers get their answers rather than an aborted connection
	 * when we unmount below.  The loop has reset the session's exit flag:
	 * set it again, so that a reply to a connection the kernel has already
	 * ended fails quietly.
	 */
	fuse_session_exit(se);
	ffs_defer_stop(&fs);
	/* The held replies the timer handed to the parked rings go out. */
	ffs_uring_stop();
	/* Every request is answered: the trace is complete. */
	if (ffs_trace_destroy(fs.trace))
		status = 1;
	fs.trace = NULL;
#ifdef FOLIOFS_DEBUG_CHECKS
	/*
	 * No request is in flight any more, and with the flushers stopped
	 * (a background pass or sync could be midway) the sums must add up.
	 * The files are then written back by ffs_itable_destroy() alone.
	 */
	wb_ctx_quiesce(fs.wb);
	if (wb_ctx_check(fs.wb)) {
		fuse_log(FUSE_LOG_ERR, "error: dirty accounting invariant broken at unmount\n");
		status = 1;
	}
#endif

out_unmount:
	fuse_session_unmount(se);
	/* When the loop never ran (the ring may have started at INIT). */
	ffs_uring_stop();
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_itable:
	/* Writes back and syncs every cached file (reported on failure). */
	ffs_itable_destroy(&fs);
	ffs_trace_destroy(fs.trace);	/* when the loop never ran */
	if (fs.wb && wb_ctx_destroy(fs.wb)) {
		fuse_log(FUSE_LOG_ERR, "error: dirty data could not be written back (see above)\n");
		status = 1;
	}
out_cfg:
	ffs_config_free(&cfg);
	return status;
}
