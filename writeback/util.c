// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * util.c - the leaf of writeback/: the monotonic clock, the logger and
 * the backing path of a file for messages.  Calls nothing else of the
 * layer, so every file may call it without making a cycle.
 */
#include "wb_i.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t wb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void wb_file_path(struct wb_file *wbf, char *buf, size_t len)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", wbf->fd);
	n = wbf->fd < 0 ? -1 : readlink(link, buf, len - 1);
	if (n < 0)
		n = snprintf(buf, len, "(descriptor %d)", wbf->fd);
	buf[(size_t)n < len ? (size_t)n : len - 1] = '\0';
}

static void log_stderr(const char *line)
{
	fprintf(stderr, "foliofs: %s\n", line);
}

static void (*_Atomic logger)(const char *line) = log_stderr;

void wb_set_logger(void (*log)(const char *line))
{
	atomic_store(&logger, log ? log : log_stderr);
}

void wb_log(const char *fmt, ...)
{
	char line[PATH_MAX + 256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	atomic_load(&logger)(line);
}

void wb_report(struct wb_file *wbf, const char *what, int err)
{
	char path[PATH_MAX];

	wb_file_path(wbf, path, sizeof(path));
	wb_log("error: %s %s: %s", what, path, strerror(-err));
}

