// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bench-refind.c - what it costs the daemon to find a backing inode again
 * when it holds no descriptor of it (fusefs/inode.c, issue 42): the two
 * ways the issue names, timed on the file system under DIR.
 *
 *   name    openat2(ancestor, "d1/.../name", O_PATH | O_NOFOLLOW,
 *           RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) from the nearest ancestor
 *           whose descriptor is held, then name_to_handle_at() of the result
 *           to check the inode number and generation; for DEPTH components
 *   handle  open_by_handle_at(mount descriptor, handle, O_PATH): needs
 *           CAP_DAC_READ_SEARCH (skipped without it)
 *
 * plus the pieces: a plain openat() of one component, and a lookup that
 * opens nothing, name_to_handle_at() and fstatat() of the name in its
 * parent.  Each row is the time per call of a round of NFILES
 * calls, over NFILES files spread over directories DEPTH deep, warm (dentries and
 * inodes in memory); with -c the kernel's caches are dropped before each
 * round (root), so every call reads the inode from disk: cold.  The ways
 * take turns within each round; the median round is printed (ROUNDS at
 * most 64).
 *
 * DEPTH is 1 to 4.
 *
 * usage: bench-refind [-n NFILES] [-d DEPTH] [-r ROUNDS] [-c] DIR
 * A benchmark, not a test: it prints microseconds per call.  Build:
 *   cc -O2 -D_GNU_SOURCE -o bench-refind contrib/bench/bench-refind.c
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FH_MAX 128

struct target {
	char rel[256];		/* path from DIR */
	char leaf[64];		/* last component */
	int parent_fd;		/* O_PATH of its directory */
	int mnt_id;
	union {
		struct file_handle fh;
		char buf[sizeof(struct file_handle) + FH_MAX];
	} h;
};

static int nfiles = 20000, depth = 3, rounds = 3;
static int cold;

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "bench-refind: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

static int openat2_path(int dirfd, const char *path)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};

	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/* The directory of file i: DEPTH levels of 16-way fan-out. */
static void dir_of(int i, char *buf, size_t len)
{
	size_t off = 0;
	int x = i;

	buf[0] = '\0';
	for (int d = 0; d < depth; d++) {
		off += (size_t)snprintf(buf + off, len - off, "%sd%d", d ? "/" : "", x % 16);
		x /= 16;
	}
}

/* One O_PATH descriptor per directory, shared by its files. */
static int dir_fd(int root, int i, const char *dir)
{
	static int *fds;
	int n = 1, k;

	for (int d = 0; d < depth; d++)
		n *= 16;
	if (!fds) {
		fds = malloc(sizeof(int) * (size_t)n);
		if (!fds)
			die("malloc", "");
		for (k = 0; k < n; k++)
			fds[k] = -1;
	}
	k = i % n;
	if (fds[k] < 0 && (fds[k] = openat(root, dir, O_PATH | O_CLOEXEC)) < 0)
		die("open", dir);
	return fds[k];
}

static void build(int root, struct target *t)
{
	for (int i = 0; i < nfiles; i++) {
		char dir[192], part[192];
		int fd;

		dir_of(i, dir, sizeof(dir));
		/* mkdir -p, one component at a time */
		for (char *p = dir; p; p = strchr(p + 1, '/')) {
			snprintf(part, sizeof(part), "%.*s", (int)(p - dir), dir);
			if (p != dir && mkdirat(root, part, 0755) < 0 && errno != EEXIST)
				die("mkdir", part);
		}
		if (mkdirat(root, dir, 0755) < 0 && errno != EEXIST)
			die("mkdir", dir);
		snprintf(t[i].leaf, sizeof(t[i].leaf), "f%d", i);
		snprintf(t[i].rel, sizeof(t[i].rel), "%s/%s", dir, t[i].leaf);
		fd = openat(root, t[i].rel, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0)
			die("create", t[i].rel);
		close(fd);
		t[i].parent_fd = dir_fd(root, i, dir);
		t[i].h.fh.handle_bytes = FH_MAX;
		if (name_to_handle_at(root, t[i].rel, &t[i].h.fh, &t[i].mnt_id, 0) < 0)
			die("name_to_handle_at", t[i].rel);
	}
}

/*
 * Alone, as tests/conftest.py's drop_caches tests: a drop evicts what
 * another pytest session's test relies on, so it waits for none to run.
 */
static void drop_caches(void)
{
	int lock = open("/tmp/foliofs-tests-caches.lock", O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
	FILE *f;

	if (lock < 0 || flock(lock, LOCK_EX) < 0)
		die("lock", "/tmp/foliofs-tests-caches.lock");
	sync();
	f = fopen("/proc/sys/vm/drop_caches", "w");
	if (!f || fputs("2", f) < 0 || fclose(f))
		die("write", "/proc/sys/vm/drop_caches");
	close(lock);
}

enum way { W_OPENAT, W_NAME, W_NAME_NOCHECK, W_HANDLE, W_N2H, W_FSTAT };
static const char *const way_name[] = {
	"openat(parent, name) [1 component]",
	"name: openat2(root, path) + name_to_handle_at",
	"name: openat2(root, path) alone",
	"handle: open_by_handle_at",
	"name_to_handle_at(parent, name) alone",
	"fstatat(parent, name) alone",
};

static int one(enum way w, int root, struct target *t)
{
	union {
		struct file_handle fh;
		char buf[sizeof(struct file_handle) + FH_MAX];
	} h;
	struct stat st;
	int fd = -1, mnt_id, ret = 0;

	switch (w) {
	case W_OPENAT:
		fd = openat(t->parent_fd, t->leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		break;
	case W_NAME:
	case W_NAME_NOCHECK:
		fd = openat2_path(root, t->rel);
		if (fd >= 0 && w == W_NAME) {
			h.fh.handle_bytes = FH_MAX;
			if (name_to_handle_at(fd, "", &h.fh, &mnt_id, AT_EMPTY_PATH) < 0 ||
			    h.fh.handle_bytes != t->h.fh.handle_bytes ||
			    memcmp(h.fh.f_handle, t->h.fh.f_handle, h.fh.handle_bytes) != 0)
				ret = -1;
		}
		break;
	case W_HANDLE:
		fd = open_by_handle_at(root, &t->h.fh, O_PATH | O_CLOEXEC);
		break;
	case W_N2H:
		h.fh.handle_bytes = FH_MAX;
		return name_to_handle_at(t->parent_fd, t->leaf, &h.fh, &mnt_id, 0);
	case W_FSTAT:
		return fstatat(t->parent_fd, t->leaf, &st, AT_SYMLINK_NOFOLLOW);
	}
	if (fd < 0)
		return -1;
	close(fd);
	return ret;
}

/* One round of @w over every file: microseconds per call, or -1 (skipped). */
static double round_of(enum way w, int root, struct target *t)
{
	double t0 = now_us();

	for (int i = 0; i < nfiles; i++) {
		if (one(w, root, &t[i]) < 0) {
			if (w == W_HANDLE && errno == EPERM)
				return -1;
			die(way_name[w], t[i].rel);
		}
	}
	return (now_us() - t0) / nfiles;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * The ways take turns within each round (each round cold when asked), so
 * that a busy machine weighs on all alike; the median round of each.
 */
static void measure(int root, struct target *t)
{
	double us[W_FSTAT + 1][64];

	for (int r = 0; r < rounds; r++) {
		for (enum way w = W_OPENAT; w <= W_FSTAT; w++) {
			if (cold)
				drop_caches();
			us[w][r] = round_of(w, root, t);
		}
	}
	for (enum way w = W_OPENAT; w <= W_FSTAT; w++) {
		qsort(us[w], (size_t)rounds, sizeof(double), cmp_double);
		if (us[w][0] < 0)
			printf("%-48s skipped: %s\n", way_name[w], strerror(EPERM));
		else
			printf("%-48s %8.2f us/call (median of %d; %.2f .. %.2f)\n", way_name[w],
			       us[w][rounds / 2], rounds, us[w][0], us[w][rounds - 1]);
	}
}

int main(int argc, char **argv)
{
	struct target *t;
	int c, root;

	while ((c = getopt(argc, argv, "n:d:r:c")) != -1) {
		switch (c) {
		case 'n': nfiles = atoi(optarg); break;
		case 'd': depth = atoi(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 'c': cold = 1; break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || nfiles < 1 || depth < 1 || depth > 4 || rounds < 1 ||
	    rounds > 64)
		goto usage;
	/* open_by_handle_at() refuses an O_PATH mount descriptor (EBADF). */
	root = open(argv[optind], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		die("open", argv[optind]);
	t = calloc((size_t)nfiles, sizeof(*t));
	if (!t)
		die("calloc", "");
	build(root, t);
	printf("%d files, %d directories deep, %d rounds, %s\n", nfiles, depth, rounds,
	       cold ? "cold (caches dropped before each round)" : "warm");
	measure(root, t);
	return 0;
usage:
	fprintf(stderr, "usage: %s [-n NFILES] [-d DEPTH] [-r ROUNDS] [-c] DIR\n", argv[0]);
	return 2;
}
