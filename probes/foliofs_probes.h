/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * foliofs_probes.h - USDT probes (sys/sdt.h) at the places foliofs does
 * what the kernel's writeback, filemap and readahead tracepoints mark,
 * named like them (provider "foliofs").  Each carries one argument, a
 * pointer to a struct foliofs_<name> with the kernel's fields
 * (foliofs_tp.h).  doc/tracing.md has the table: kernel tracepoint ->
 * probe -> fields.
 *
 * Built with -Dprobes=auto|enabled (FOLIOFS_PROBES=1), a probe costs the
 * stores of its struct and one nop until a tracer attaches; without
 * sys/sdt.h (or -Dprobes=disabled) FOLIOFS_TP() is nothing and its
 * arguments are not evaluated, so they must have no side effects.
 *
 * This header depends on no layer: blockstate and writeback include it.
 */
#ifndef FOLIOFS_PROBES_H
#define FOLIOFS_PROBES_H

#include "foliofs_tp.h"

#if defined(FOLIOFS_PROBES) && FOLIOFS_PROBES
#define SDT_USE_VARIADIC 1
#include <sys/sdt.h>
/*
 * FOLIOFS_TP(name, .field = value, ...): fire probe @name with a struct
 * foliofs_name of those fields (the rest 0).  The empty asm takes the
 * struct as a memory input, so that its stores are not dropped: the
 * probe's own asm names only its address.
 */
#define FOLIOFS_TP(name, ...)							\
	do {									\
		struct foliofs_##name foliofs_tp_ = { __VA_ARGS__ };		\
		__asm__ __volatile__("" : : "m"(foliofs_tp_));			\
		STAP_PROBEV(foliofs, name, &foliofs_tp_);			\
	} while (0)
#else
#define FOLIOFS_TP(name, ...) do { } while (0)
#endif

/* Nanoseconds to the kernel's milliseconds (jiffies * 1000 / HZ), toward 0. */
#define FOLIOFS_TP_MS(ns) ((long)((ns) / 1000000))
/* Pages per second to the kernel's KBps(): KiB per second (4 KiB pages). */
#define FOLIOFS_TP_KBPS(pages) ((unsigned long)(pages) << 2)

#endif
