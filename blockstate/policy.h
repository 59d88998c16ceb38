/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * policy.h - the policies blockstate knows, one small file each.  To add
 * one: write blockstate/account_NAME.c (or size_NAME.c) defining a struct
 * bs_account_policy (bs_size_policy), declare it here, and list it in
 * policies.c and meson.build.  Nothing on the data path changes.
 */
#ifndef FOLIOFS_BS_POLICY_H
#define FOLIOFS_BS_POLICY_H

#include "blockstate.h"

extern const struct bs_account_policy bs_account_folio;
extern const struct bs_account_policy bs_account_page;
extern const struct bs_account_policy bs_account_block;

extern const struct bs_size_policy bs_size_fixed;
extern const struct bs_size_policy bs_size_ramp;
extern const struct bs_size_policy bs_size_kernel;

#endif
