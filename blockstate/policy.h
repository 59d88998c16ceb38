/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * policy.h - the policies blockstate knows, one small file each.  To add
 * one: write blockstate/account_NAME.c (or size_NAME.c) defining a struct
 * bs_account_policy (bs_size_policy), declare it here, and list it in
 * policies.c and meson.build.  Nothing on the data path changes.  Or
 * build it out of the tree against foliofs/policy.h and load it
 * (doc/policies.md).
 */
#ifndef FOLIOFS_BS_POLICY_H
#define FOLIOFS_BS_POLICY_H

#include "blockstate.h"

extern const struct bs_account_policy bs_account_folio;
extern const struct bs_account_policy bs_account_page;
extern const struct bs_account_policy bs_account_block;
extern const struct bs_account_policy bs_account_pinned;

extern const struct bs_size_policy bs_size_fixed;
extern const struct bs_size_policy bs_size_ramp;
extern const struct bs_size_policy bs_size_kernel;

/* Loaded policies of each kind the registry holds (policies.c). */
#define BS_LOADED_MAX 32

/* Free slots for loaded policies of one kind. */
size_t bs_policy_loaded_room(bool account);
/*
 * Append a checked policy, named unlike any registered, from library
 * @origin (kept).  Context: policy_load.c's lock held; room checked.
 */
void bs_account_policy_register(const struct bs_account_policy *p, const char *origin);
void bs_size_policy_register(const struct bs_size_policy *p, const char *origin);

#endif
