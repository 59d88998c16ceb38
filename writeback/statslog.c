// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * statslog.c - the stats log: -o stats_log=FILE,stats_interval_ms=N.
 *
 * A thread wakes every stats_interval_ms and appends one JSON object per
 * line to FILE, for plotting a run afterwards (or watching it with
 * tail -f):
 *
 *   {"time_ms": 1000, "unix_ms": 1764547200000, "nr_dirty": 12, ...}
 *
 * time_ms counts from the start of the log (the mount) on the monotonic
 * clock, so a step of the wall clock does not bend a plot; unix_ms is the
 * wall clock, to line the log up with other tools' output.  Every other
 * member is one "name value" line of wb_ctx_stats(), in its order, so the
 * keys are exactly the stats of .foliofs/stats that writeback keeps: a
 * number as it is, the policies' names (wb_stat_is_name) as strings, so
 * that ra_model's "6.17" stays a name.
 * Each line reaches the file with one write(2) on an O_APPEND descriptor:
 * nothing is buffered in the daemon and lines never interleave.  A reader
 * that reads while a line is being written may find its first part (the
 * kernel extends the file page by page as it copies a write, and a line
 * is longer than a page): a last line without its newline is still being
 * written.  A last line is written at stop.
 *
 * The sleeps are timed waits on a condition variable bound to
 * CLOCK_MONOTONIC, so stop ends them at once instead of after up to one
 * interval, and the ticks stay on a fixed grid (start + k * interval)
 * however long a line takes to write.
 *
 * ctx.c and this file call each other, an owner/worker pair: the context
 * starts and stops this thread (wb_statslog_start/stop), and the thread
 * reports the context's stats (wb_ctx_stats).
 */
#include "wb_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Room for the stats text, and for one line of JSON made from it. */
#define STATSLOG_STATS_MAX WB_STATSLOG_STATS_MAX
#define STATSLOG_LINE_MAX WB_STATSLOG_LINE_MAX

struct wb_statslog {
	struct wb_ctx *ctx;			/* immutable */
	int fd;					/* immutable: the log, O_APPEND */
	int64_t start_ns;			/* immutable: CLOCK_MONOTONIC at start */
	uint32_t interval_ms;			/* immutable, >= 1 */
	pthread_t thread;

	pthread_mutex_t lock;			/* protects stopping */
	pthread_cond_t cond;			/* CLOCK_MONOTONIC; signalled by stop */
	bool stopping;

	/* Used by one thread at a time: the log thread, then stop after the join. */
	bool write_failed;			/* a failure was logged; quiet until a success */
	char stats[STATSLOG_STATS_MAX];
	char line[STATSLOG_LINE_MAX];
};

static int64_t clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Whether @s (@len bytes) is a number JSON takes as it is: -?(0|[1-9]\d*)(\.\d+)? */
static bool json_number(const char *s, size_t len)
{
	size_t i = len && s[0] == '-', first = i;

	while (i < len && s[i] >= '0' && s[i] <= '9')
		i++;
	if (i == first || (s[first] == '0' && i > first + 1))
		return false;
	if (i < len && s[i] == '.') {
		size_t frac = ++i;

		while (i < len && s[i] >= '0' && s[i] <= '9')
			i++;
		if (i == frac)
			return false;
	}
	return i == len;
}

/* Append @s (@len bytes) to @out (@size bytes) at *@pos as a JSON string. */
static void put_string(char *out, size_t size, size_t *pos, const char *s, size_t len)
{
	/* An escape takes 6 bytes; the closing quote and "}\n" fit after. */
	size_t room = size - 16;

	out[(*pos)++] = '"';
	for (size_t i = 0; i < len && *pos + 6 < room; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			out[(*pos)++] = '\\';
			out[(*pos)++] = (char)c;
		} else if (c < 0x20) {
			*pos += (size_t)snprintf(out + *pos, size - *pos, "\\u%04x", c);
		} else {
			out[(*pos)++] = (char)c;
		}
	}
	out[(*pos)++] = '"';
}

size_t wb_statslog_format(struct wb_ctx *ctx, int64_t time_ms, int64_t unix_ms,
			  char *stats, size_t stats_size, char *line, size_t line_size)
{
	size_t len = wb_ctx_stats(ctx, stats, stats_size);
	const char *p = stats, *end = stats + len;
	size_t pos;

	pos = (size_t)snprintf(line, line_size, "{\"time_ms\": %lld", (long long)time_ms);
	if (unix_ms >= 0)
		pos += (size_t)snprintf(line + pos, line_size - pos, ", \"unix_ms\": %lld",
					(long long)unix_ms);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		const char *sp = memchr(p, ' ', (size_t)(eol - p));

		/* Stop short rather than cut a member in half. */
		if (sp && sp > p &&
		    pos + 2 * (size_t)(eol - p) + 16 < line_size - 8) {
			const char *val = sp + 1;
			size_t vlen = (size_t)(eol - val);

			line[pos++] = ',';
			line[pos++] = ' ';
			put_string(line, line_size, &pos, p, (size_t)(sp - p));
			line[pos++] = ':';
			line[pos++] = ' ';
			if (json_number(val, vlen) && !wb_stat_is_name(p, (size_t)(sp - p))) {
				memcpy(line + pos, val, vlen);
				pos += vlen;
			} else {
				put_string(line, line_size, &pos, val, vlen);
			}
		}
		p = eol + 1;
	}
	line[pos++] = '}';
	line[pos++] = '\n';
	return pos;
}

/* One line of the mount's log: time_ms since the start, and the wall clock. */
static size_t format_line(struct wb_statslog *log)
{
	int64_t mono = clock_ns(CLOCK_MONOTONIC), wall = clock_ns(CLOCK_REALTIME);

	return wb_statslog_format(log->ctx, (mono - log->start_ns) / 1000000, wall / 1000000,
				  log->stats, sizeof(log->stats), log->line, sizeof(log->line));
}

/* Append one line; a failure is logged once until a write works again. */
static void write_line(struct wb_statslog *log)
{
	size_t len = format_line(log), done = 0;
	int err = 0;

	while (done < len) {
		ssize_t n = write(log->fd, log->line + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? errno : ENOSPC;
			break;
		}
		done += (size_t)n;
	}
	if (err && !log->write_failed)
		wb_log("error: stats_log=%s: %s (further failures not reported)",
		       log->ctx->cfg.stats_log, strerror(err));
	log->write_failed = err != 0;
}

static struct timespec ns_to_timespec(int64_t ns)
{
	return (struct timespec){ .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
}

static void *statslog_main(void *arg)
{
	struct wb_statslog *log = arg;
	int64_t step = (int64_t)log->interval_ms * 1000000, next = log->start_ns + step;

	pthread_setname_np(pthread_self(), "ffs-statslog");
	pthread_mutex_lock(&log->lock);
	while (!log->stopping) {
		struct timespec ts = ns_to_timespec(next);
		int64_t now;

		if (pthread_cond_timedwait(&log->cond, &log->lock, &ts) != ETIMEDOUT)
			continue;	/* stop, or spurious: look again */
		if (log->stopping)
			break;
		pthread_mutex_unlock(&log->lock);
		write_line(log);
		/* The next tick of the grid still ahead (a slow write skips ticks). */
		now = clock_ns(CLOCK_MONOTONIC);
		next += step;
		if (next <= now)
			next += ((now - next) / step + 1) * step;
		pthread_mutex_lock(&log->lock);
	}
	pthread_mutex_unlock(&log->lock);
	return NULL;
}

static void statslog_free(struct wb_statslog *log)
{
	pthread_cond_destroy(&log->cond);
	pthread_mutex_destroy(&log->lock);
	if (close(log->fd) < 0)
		wb_log("error: stats_log=%s: close: %s", log->ctx->cfg.stats_log,
		       strerror(errno));
	free(log);
}

static int statslog_init_cond(struct wb_statslog *log)
{
	pthread_condattr_t attr;
	int ret = pthread_condattr_init(&attr);

	if (ret)
		return -ret;
	ret = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (!ret)
		ret = pthread_cond_init(&log->cond, &attr);
	pthread_condattr_destroy(&attr);
	return -ret;
}

int wb_statslog_start(struct wb_ctx *ctx)
{
	const char *name = ctx->cfg.stats_log;
	struct wb_statslog *log;
	int ret;

	ctx->statslog = NULL;
	if (!name || !*name)
		return 0;
	log = calloc(1, sizeof(*log));
	if (!log)
		return -ENOMEM;
	log->ctx = ctx;
	log->interval_ms = ctx->cfg.stats_interval_ms ? ctx->cfg.stats_interval_ms : 1000;
	log->fd = open(name, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (log->fd < 0) {
		ret = -errno;
		wb_log("error: stats_log=%s: %s", name, strerror(-ret));
		free(log);
		return ret;
	}
	pthread_mutex_init(&log->lock, NULL);
	ret = statslog_init_cond(log);
	if (ret) {
		pthread_mutex_destroy(&log->lock);
		close(log->fd);
		free(log);
		return ret;
	}
	log->start_ns = clock_ns(CLOCK_MONOTONIC);
	ret = -pthread_create(&log->thread, NULL, statslog_main, log);
	if (ret) {
		wb_log("error: stats_log=%s: cannot start its thread: %s", name,
		       strerror(-ret));
		statslog_free(log);
		return ret;
	}
	ctx->statslog = log;
	return 0;
}

void wb_statslog_stop(struct wb_ctx *ctx)
{
	struct wb_statslog *log = ctx->statslog;

	if (!log)
		return;
	pthread_mutex_lock(&log->lock);
	log->stopping = true;
	pthread_cond_signal(&log->cond);
	pthread_mutex_unlock(&log->lock);
	pthread_join(log->thread, NULL);
	write_line(log);	/* the state at the end, however short the last interval */
	ctx->statslog = NULL;
	statslog_free(log);
}
