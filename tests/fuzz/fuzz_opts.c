// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_opts - the command line parser (fusefs/opts.c: ffs_parse_args).
 *
 * Input: byte 0 is a flags byte, the rest is split at NUL bytes and
 * newlines into arguments (at most MAX_ARGS).  Flag bit 0 appends a
 * BACKING and a MOUNTPOINT that exist (a directory made once per
 * process), so that inputs reach the checks after option parsing; bit 1
 * puts them first instead, so that the fuzzed arguments are parsed as
 * extra arguments after them.
 *
 * Whatever the arguments, the parser must return 0 or -EINVAL, must not
 * crash or leak (ASan, LeakSanitizer at exit of every run), and:
 *   - after -EINVAL, ffs_config_free() frees everything (as main.c does);
 *   - after 0, either help or version was asked for, or the configuration
 *     is complete and consistent: BACKING and MOUNTPOINT set, and both
 *     bs_config_check() and wb_config_check() accept it (the latter with
 *     dirty_ratio 1 where a dirty_bytes made it read 0).
 * libfuse's own messages are dropped (they would only slow the fuzzer).
 */
#include "fusefs.h"

#include <errno.h>
#include <fuse_log.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 48

static char mnt[64], prog[] = "foliofs", root[] = "/";

static void quiet(enum fuse_log_level level, const char *fmt, va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
}

static void remove_mnt(void)
{
	rmdir(mnt);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(mnt, sizeof(mnt), "/tmp/fuzz_opts.XXXXXX");
	if (!mkdtemp(mnt)) {
		perror("fuzz_opts: mkdtemp");
		abort();
	}
	atexit(remove_mnt);
	fuse_set_log_func(quiet);
	return 0;
}

static void fail(const char *why, int argc, char **argv, const char *err)
{
	fprintf(stderr, "fuzz_opts: %s; err \"%s\"; argv:", why, err);
	for (int i = 0; i < argc; i++)
		fprintf(stderr, " [%s]", argv[i]);
	fputc('\n', stderr);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *args[MAX_ARGS + 4], *text, err[FFS_ERRLEN], check[256];
	struct ffs_config cfg;
	unsigned int flags;
	int argc = 0, ret;
	size_t i = 1, start;

	if (size < 1)
		return 0;
	flags = data[0];
	/* One copy of the text with every separator made a NUL. */
	text = malloc(size + 1);
	if (!text)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	args[argc++] = prog;
	if (flags & 2) {
		args[argc++] = root;
		args[argc++] = mnt;
	}
	while (i < size && argc < MAX_ARGS) {
		start = i;
		while (i < size && text[i] != '\0' && text[i] != '\n')
			i++;
		text[i++] = '\0';
		args[argc++] = text + start;
	}
	if ((flags & 3) == 1) {
		args[argc++] = root;
		args[argc++] = mnt;
	}
	args[argc] = NULL;

	err[0] = '\0';
	ret = ffs_parse_args(argc, args, &cfg, err);
	if (ret != 0 && ret != -EINVAL)
		fail("returned neither 0 nor -EINVAL", argc, args, err);
	if (ret == 0 && !cfg.show_help && !cfg.show_version) {
		if (!cfg.backing || !cfg.mountpoint)
			fail("accepted without BACKING or MOUNTPOINT", argc, args, err);
		if (bs_config_check(&cfg.bs, check, sizeof(check)))
			fail("accepted a bad cache configuration", argc, args, check);
		/* A byte limit reads as ratio 0 after parsing (as in /proc/sys/vm). */
		struct wb_config wb = cfg.wb;

		if (wb.dirty_bytes && !wb.dirty_ratio)
			wb.dirty_ratio = 1;
		if (wb_config_check(&wb, check, sizeof(check)))
			fail("accepted a bad writeback configuration", argc, args, check);
	}
	ffs_config_free(&cfg);
	free(text);
	return 0;
}
