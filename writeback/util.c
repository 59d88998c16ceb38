// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * util.c - the leaf of writeback/: the monotonic clock, the logger, the
 * backing path of a file for messages, and the number parsers every
 * command line shares (the daemon's options and tunables, foliofs-sim's).
 * Calls nothing else of the layer, so every file may call it without
 * making a cycle.
 */
#include "wb_i.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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


/* A plain unsigned decimal at @val; @end after its digits.  -ERANGE: too large. */
static int parse_digits(const char *val, uint64_t *out, const char **end)
{
	char *e;
	unsigned long long v;

	if (*val < '0' || *val > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(val, &e, 10);	/* "010" is ten: base 10, not 0 */
	if (errno)
		return -ERANGE;
	*out = v;
	*end = e;
	return 0;
}

static int parse_fail(char *err, size_t errlen, const char *name, const char *val,
		      const char *why)
{
	snprintf(err, errlen, "%s=%s: %s", name, val, why);
	return -EINVAL;
}

static int parse_range(const char *name, const char *val, uint64_t v, uint64_t min,
		       uint64_t max, uint64_t *out, char *err, size_t errlen)
{
	if (v < min || v > max) {
		snprintf(err, errlen, "%s=%s: out of range [%llu, %llu]", name, val,
			 (unsigned long long)min, (unsigned long long)max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

int wb_parse_uint(const char *name, const char *val, uint64_t min, uint64_t max,
		  uint64_t *out, char *err, size_t errlen)
{
	const char *end;
	uint64_t v;
	int ret = parse_digits(val, &v, &end);

	if (ret == -ERANGE)
		return parse_fail(err, errlen, name, val, "too large");
	if (ret || *end)
		return parse_fail(err, errlen, name, val, "not an unsigned integer");
	return parse_range(name, val, v, min, max, out, err, errlen);
}

/* Binary suffixes: K, M, G, T, optionally followed by "iB" or "B". */
static int suffix_shift(const char *s, unsigned int *shift)
{
	static const char units[] = "KMGT";
	const char *u;

	*shift = 0;
	if (!*s)
		return 0;
	u = strchr(units, toupper((unsigned char)s[0]));
	if (!u || !*u)		/* strchr finds the terminator of units for a blank */
		return -EINVAL;
	*shift = 10 * (unsigned int)(u - units + 1);
	s++;
	if (!strcmp(s, "") || !strcmp(s, "B") || !strcmp(s, "iB"))
		return 0;
	return -EINVAL;
}

int wb_parse_size(const char *name, const char *val, uint64_t min, uint64_t max,
		  uint64_t *out, char *err, size_t errlen)
{
	const char *end;
	unsigned int shift;
	uint64_t v;
	int ret = parse_digits(val, &v, &end);

	if (ret == -ERANGE)
		return parse_fail(err, errlen, name, val, "too large");
	if (ret || suffix_shift(end, &shift))
		return parse_fail(err, errlen, name, val,
				  "not a size (a number with an optional K, M, G or T suffix)");
	if (shift && v > (UINT64_MAX >> shift))
		return parse_fail(err, errlen, name, val, "too large");
	return parse_range(name, val, v << shift, min, max, out, err, errlen);
}

int wb_parse_double(const char *name, const char *val, double min, double max,
		    double *out, char *err, size_t errlen)
{
	size_t sign = val[0] == '-';
	char *end;
	double d;

	/*
	 * Plain decimals only: strtod would also take leading blanks, a '+',
	 * hexadecimal and exponents, which the other numeric options refuse.
	 * A '-' is let through to be reported as out of range.
	 */
	if (strspn(val + sign, "0123456789.") != strlen(val + sign))
		return parse_fail(err, errlen, name, val, "not a number");
	errno = 0;
	d = strtod(val, &end);
	if (end == val || *end || errno || !isfinite(d))
		return parse_fail(err, errlen, name, val, "not a number");
	/* A '-' is out of a range that starts at 0, even on -0. */
	if (d < min || d > max || (sign && min >= 0)) {
		snprintf(err, errlen, "%s=%s: out of range [%g, %g]", name, val, min, max);
		return -EINVAL;
	}
	*out = d;
	return 0;
}
