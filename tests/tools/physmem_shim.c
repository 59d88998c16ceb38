// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * physmem_shim.c - an LD_PRELOAD library that makes sysconf(_SC_PHYS_PAGES)
 * report $FOLIOFS_TEST_PHYS_MB MiB of memory, so that a test can run a
 * program as if on a machine with another amount of memory
 * (tests/test_sim_golden.py: a replay's output must not depend on it).
 * Every other sysconf() name goes to the C library's.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

long sysconf(int name)
{
	static long (*next)(int);
	const char *mb = getenv("FOLIOFS_TEST_PHYS_MB");

	if (!next)
		next = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
	if (name == _SC_PHYS_PAGES && mb && *mb) {
		long page = next(_SC_PAGESIZE);

		return page > 0 ? (long)(strtoull(mb, NULL, 10) * (1ull << 20) / (unsigned long)page) : -1;
	}
	return next(name);
}
