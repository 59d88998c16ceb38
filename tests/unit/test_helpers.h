/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Exit codes and checks shared by the unit tests (0 pass, 1 fail, 77 skip). */
#ifndef FOLIOFS_TEST_HELPERS_H
#define FOLIOFS_TEST_HELPERS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define T_EXIT_PASS 0
#define T_EXIT_FAIL 1
#define T_EXIT_SKIP 77

#define T_CHECK(cond)                                                    \
	do {                                                             \
		if (!(cond)) {                                           \
			fprintf(stderr, "%s:%d: check failed: %s\n",     \
				__FILE__, __LINE__, #cond);              \
			exit(T_EXIT_FAIL);                               \
		}                                                        \
	} while (0)

/* xorshift64: cheap random numbers that replay exactly from a seed (not 0). */
static inline uint64_t t_xorshift(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

#endif
