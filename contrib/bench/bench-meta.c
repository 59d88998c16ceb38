// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bench-meta.c - metadata operation rates in one directory, for
 * bench-meta.sh: create (open O_CREAT|O_EXCL + close), stat of every file
 * (three passes), open+close, rename within the directory, unlink.
 *
 * usage: bench-meta DIR NFILES
 * Prints one line per phase: "PHASE OPS_PER_SECOND".  Every call is
 * checked; any failure ends the run with a message and exit 1, so a
 * rate is never printed for work that was not done.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const char *name)
{
	fprintf(stderr, "bench-meta: %s %s: %s\n", what, name, strerror(errno));
	exit(1);
}

static void report(const char *phase, long ops, double t0)
{
	double dt = now() - t0;

	printf("%s %.0f\n", phase, dt > 0 ? (double)ops / dt : 0.0);
}

int main(int argc, char **argv)
{
	char name[64], other[64];
	struct stat st;
	long n, i;
	int dfd, fd, pass;
	double t0;

	if (argc != 3 || (n = strtol(argv[2], NULL, 10)) <= 0) {
		fprintf(stderr, "usage: %s DIR NFILES\n", argv[0]);
		return 2;
	}
	dfd = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (dfd < 0)
		die("open", argv[1]);

	t0 = now();
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "f%ld", i);
		fd = openat(dfd, name, O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (fd < 0)
			die("create", name);
		if (close(fd))
			die("close", name);
	}
	report("create", n, t0);

	t0 = now();
	for (pass = 0; pass < 3; pass++) {
		for (i = 0; i < n; i++) {
			snprintf(name, sizeof(name), "f%ld", i);
			if (fstatat(dfd, name, &st, 0))
				die("stat", name);
		}
	}
	report("stat", 3 * n, t0);

	t0 = now();
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "f%ld", i);
		fd = openat(dfd, name, O_RDONLY);
		if (fd < 0)
			die("open", name);
		if (close(fd))
			die("close", name);
	}
	report("open", n, t0);

	t0 = now();
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "f%ld", i);
		snprintf(other, sizeof(other), "g%ld", i);
		if (renameat(dfd, name, dfd, other))
			die("rename", name);
	}
	report("rename", n, t0);

	t0 = now();
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "g%ld", i);
		if (unlinkat(dfd, name, 0))
			die("unlink", name);
	}
	report("unlink", n, t0);
	close(dfd);
	return 0;
}
