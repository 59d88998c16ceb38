// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * hugepage-touch.c N: per 2 MiB, the cost of touching fresh anonymous
 * memory in 4 KiB pages with 8 KiB copies, then of MADV_COLLAPSE of it,
 * then of touching a fresh MADV_HUGEPAGE range the same way; averages over
 * N rounds.  Run it twice: the second run gets memory the first one freed
 * seconds before.  Issue 31, speed-2026-12-05c (out/hugepage-touch.txt).
 *
 *   cc -O2 -o hugepage-touch hugepage-touch.c && ./hugepage-touch 200
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define HUGE_SIZE ((size_t)2 << 20)
#define COPY 8192

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A fresh, 2 MiB-aligned anonymous range of 2 MiB (its mapping leaks: a probe). */
static char *fresh_aligned(void)
{
	char *p = mmap(NULL, 2 * HUGE_SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return (char *)(((uintptr_t)p + HUGE_SIZE - 1) & ~(uintptr_t)(HUGE_SIZE - 1));
}

static void touch(char *mem, const char *buf)
{
	for (size_t off = 0; off < HUGE_SIZE; off += COPY)
		memcpy(mem + off, buf, COPY);
}

int main(int argc, char **argv)
{
	double small_s = 0, collapse_s = 0, huge_s = 0;
	static char buf[COPY];
	int rounds, fails = 0;

	if (argc != 2 || (rounds = atoi(argv[1])) <= 0) {
		fprintf(stderr, "usage: %s ROUNDS\n", argv[0]);
		return 2;
	}
	memset(buf, 1, sizeof(buf));
	for (int i = 0; i < rounds; i++) {
		char *a = fresh_aligned(), *b = fresh_aligned();
		double t0 = now_s(), t1, t2, t3;

		touch(a, buf);
		t1 = now_s();
		if (madvise(a, HUGE_SIZE, MADV_COLLAPSE))
			fails++;
		t2 = now_s();
		if (madvise(b, HUGE_SIZE, MADV_HUGEPAGE)) {
			perror("madvise MADV_HUGEPAGE");
			return 1;
		}
		t3 = now_s();
		touch(b, buf);
		huge_s += now_s() - t3;
		small_s += t1 - t0;
		collapse_s += t2 - t1;
	}
	printf("per 2MiB: 4k-touch %.0f us, collapse %.0f us (%d failed), huge-touch %.0f us\n",
	       small_s / rounds * 1e6, collapse_s / rounds * 1e6, fails, huge_s / rounds * 1e6);
	return 0;
}
