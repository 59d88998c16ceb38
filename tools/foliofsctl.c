// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * foliofsctl - watch and steer a live foliofs mount through its control
 * directory MOUNTPOINT/.foliofs (fusefs/ctl.c); it needs nothing else from
 * the daemon and links nothing of it.
 *
 *   stat      a vmstat-like table from .foliofs/stats, one line per interval
 *   get, set  .foliofs/tunables/NAME
 *   files     .foliofs/files, the writeback queue
 *   sync      a write of .foliofs/sync (on a second thread), with progress
 *             from .foliofs/stats on stderr meanwhile
 *   trace     .foliofs/trace: start or stop recording a trace
 *   folios    .foliofs/folios summed per file: folios by size, those on
 *             the active list by size, referenced and marked ones
 *   evict     a write of .foliofs/evict: drop a file's clean folios
 *   policies  .foliofs/policies, every policy built in or loaded
 *   load      a write of .foliofs/load: load a policy library
 *
 * Options go anywhere on the line (getopt_long); MOUNTPOINT may be left
 * out when exactly one foliofs mount is visible in /proc/self/mountinfo.
 * stat, get, files and folios print JSON with --json; stat prints the
 * stats in the OpenMetrics text format with --openmetrics, in Prometheus'
 * text format with --prometheus.
 *
 * Exit status: 0 done; 2 usage, not a foliofs mount (or none, or several
 * to choose from), an unknown tunable or a value the daemon refused (one
 * line on stderr naming it); 1 anything else (an I/O error, a refused
 * permission, a failed sync).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define CTL_DIR ".foliofs"
#define MAX_STATS 256
#define HEADER_EVERY 20
#define PAGE_BYTES 4096.0
#define MIB (1024.0 * 1024.0)
#define KIB 1024.0

#ifndef FOLIOFS_VERSION
#define FOLIOFS_VERSION "unknown"
#endif

static const char *progname = "foliofsctl";

/* The command line's options, wherever they stood. */
static struct {
	double interval;	/* -i: seconds */
	bool have_interval;
	unsigned long long count;	/* -c: lines, 0 forever */
	bool have_count;
	bool json;		/* --json */
	bool openmetrics;	/* --openmetrics */
	bool prometheus;	/* --prometheus */
} opt = { .interval = 1 };

static void usage(FILE *out)
{
	fprintf(out,
"usage: %s [OPTIONS] COMMAND [MOUNTPOINT] [ARGS]\n"
"\n"
"Watch and change a live foliofs mount through MOUNTPOINT/.foliofs.\n"
"Options may stand anywhere.  Without MOUNTPOINT, the one foliofs mount\n"
"in /proc/self/mountinfo is used (several: they are listed, exit 2).\n"
"\n"
"  stat [MNT] [-i SECONDS] [-c COUNT] [--json | --openmetrics | --prometheus]\n"
"      a table like vmstat, one line every SECONDS (default 1), COUNT lines\n"
"      (default: until interrupted), a header every %d lines.  Columns:\n"
"        dirty    charged dirty (nr_dirty), MiB\n"
"        exact    bytes in dirty or writeback blocks (dirty_bytes_exact),\n"
"                 MiB, three decimals (KiB exact)\n"
"        pinned   memory of folios holding such blocks, MiB\n"
"        wback    under writeback (nr_writeback, or writeback_bytes), MiB\n"
"        bg thresh limit setpt   bg_thresh, dirty_thresh, dirty_limit,\n"
"                 setpoint, MiB\n"
"        wr_bw    estimated write bandwidth (write_bw), MiB/s\n"
"        dirtd/s writn/s   pages dirtied and written back, MiB/s\n"
"        pauses paused_ms  writer pauses and time paused, this interval\n"
"      A stat the daemon does not have shows as \"-\".\n"
"      --json: every stat as one JSON object, now (with -c or -i: COUNT\n"
"      objects SECONDS apart, one per line).  --openmetrics: every stat\n"
"      now in the OpenMetrics text format (HELP, TYPE, UNIT; counters\n"
"      foliofs_NAME with the sample foliofs_NAME_total; ms in seconds; the\n"
"      policies in force as foliofs_policy_info), ending with # EOF.\n"
"      --prometheus: the same in Prometheus' text format, which\n"
"      node_exporter's textfile collector reads.\n"
"  get [MNT] [NAME...] [--json]\n"
"      print \"NAME VALUE\" for each tunable named (default: all of them)\n"
"  set [MNT] NAME=VALUE...\n"
"      set tunables in the order given.  The first bad name or value stops\n"
"      with one line naming it and the daemon's reason; the ones before it\n"
"      stay set.  Only the mounting user and root may set tunables.\n"
"  files [MNT] [--json]\n"
"      the writeback queue: every file holding dirty or writeback data,\n"
"      those bytes, the age of its oldest dirty data and its writeback\n"
"      errors (count:last)\n"
"  sync [MNT]\n"
"      write back and sync every file of the mount and wait (the syncfs\n"
"      that Linux does not send to FUSE), printing the dirty data left to\n"
"      stderr every 0.5 s\n"
"  trace [MNT] [start FILE | stop]\n"
"      start recording every operation into FILE (a trace for foliofs-sim;\n"
"      created or truncated, by the daemon, as the mounting user), or stop\n"
"      and flush it; with neither, print \"off\" or \"recording FILE\"\n"
"  folios [MNT] [FILE...] [--json]\n"
"      the daemon's cached folios per file (of each FILE, default every\n"
"      cached file): how many, MiB, the share of bytes in 2 MiB folios,\n"
"      folios with a readahead mark, on the active list and referenced,\n"
"      and the count of each folio size (and of those on the active list)\n"
"  evict [MNT] FILE [START LEN]\n"
"      drop FILE's clean folios wholly inside [START, START + LEN) (bytes,\n"
"      K/M/G allowed; default 0 0: the whole file) from the daemon's\n"
"      cache, as POSIX_FADV_DONTNEED does; dirty or busy folios stay\n"
"  policies [MNT]\n"
"      every accounting, sizing and throttle policy the daemon has, built in\n"
"      or loaded: \"KIND NAME ORIGIN PARAM=DEFAULT[MIN,MAX]...\"; the\n"
"      parameters of those in force are tunables (account.PARAM, size.PARAM,\n"
"      throttle.PARAM)\n"
"  load [MNT] LIBRARY\n"
"      load the policies of LIBRARY (built against foliofs/policy.h) into\n"
"      the running daemon; then set dirty_account=NAME selects one.  It\n"
"      must be owned by the mounting user or root and not writable by\n"
"      group or others; a refusal prints the daemon's reason (exit 2)\n"
"\n"
"Options:\n"
"  -i, --interval SECONDS   stat: seconds between lines\n"
"  -c, --count COUNT        stat: lines to print\n"
"  -j, --json               stat, get, files, folios: JSON\n"
"      --openmetrics        stat: OpenMetrics text\n"
"      --prometheus         stat: Prometheus text (node_exporter textfile)\n"
"  -V, --version            print the version\n"
"  -h, --help               this text\n"
"\n"
"Exit status: 0 done; 2 bad usage, not a foliofs mount, an unknown\n"
"tunable or a refused value; 1 any other failure.\n",
		progname, HEADER_EVERY);
}

static void __attribute__((format(printf, 1, 2))) say(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- the control directory ---- */

static char *ctl_path(const char *mnt, const char *name)
{
	char *p;

	if (asprintf(&p, "%s/" CTL_DIR "/%s", mnt, name) < 0) {
		say("out of memory");
		exit(1);
	}
	return p;
}

/*
 * @path made absolute, symlinks resolved (malloc'ed; NULL on failure).  A
 * FUSE mount point we may not enter cannot be resolved itself (its lstat
 * fails with EACCES): then its directory is, and its name appended.
 */
static char *abs_path(const char *path)
{
	char *real = realpath(path, NULL), *copy, *slash, *dir, *out = NULL;
	const char *base;

	if (real || (errno != EACCES && errno != EPERM))
		return real;
	copy = strdup(path);
	if (!copy)
		return NULL;
	while (strlen(copy) > 1 && copy[strlen(copy) - 1] == '/')
		copy[strlen(copy) - 1] = '\0';
	slash = strrchr(copy, '/');
	if (slash) {
		*slash = '\0';
		base = slash + 1;
		dir = realpath(slash == copy ? "/" : copy, NULL);
	} else {
		base = copy;
		dir = realpath(".", NULL);
	}
	if (dir && *base && strcmp(base, ".") != 0 && strcmp(base, "..") != 0 &&
	    asprintf(&out, "%s%s%s", dir, strcmp(dir, "/") != 0 ? "/" : "", base) < 0)
		out = NULL;
	free(dir);
	free(copy);
	return out;
}

/* The whole file at @path, NUL-terminated, into *@out: 0 or -errno. */
static int read_all(const char *path, char **out, size_t *len_out)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ret = 0;

	if (!buf || fd < 0) {
		ret = !buf ? -ENOMEM : -errno;
		goto out;
	}
	for (;;) {
		ssize_t n;

		if (cap - len < 2) {
			char *p = realloc(buf, cap * 2);

			if (!p) {
				ret = -ENOMEM;
				goto out;
			}
			buf = p;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	*out = buf;
	buf = NULL;
	if (len_out)
		*len_out = len;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return ret;
}

/* ---- stats ---- */

/* The stats whose value is a name, not a number: the policies in force. */
static const char *const named_stats[] = { "dirty_account", "throttle", "folio_policy",
					   "ra_model" };

static bool is_named_stat(const char *name)
{
	for (size_t i = 0; i < sizeof(named_stats) / sizeof(named_stats[0]); i++) {
		if (!strcmp(name, named_stats[i]))
			return true;
	}
	return false;
}


struct stats {
	size_t n;
	char *names[MAX_STATS];
	double vals[MAX_STATS];
	char *raw[MAX_STATS];	/* the value as the daemon wrote it */
	char *text;
};

static void stats_free(struct stats *s)
{
	free(s->text);
	s->text = NULL;
	s->n = 0;
}

/* Read and parse MNT/.foliofs/stats: 0 or -errno. */
static int stats_read(const char *mnt, struct stats *s)
{
	char *path = ctl_path(mnt, "stats"), *line, *save = NULL;
	int ret = read_all(path, &s->text, NULL);

	free(path);
	s->n = 0;
	if (ret)
		return ret;
	for (line = strtok_r(s->text, "\n", &save); line && s->n < MAX_STATS;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(line, ' '), *end;

		if (!sp)
			continue;
		*sp = '\0';
		if (!sp[1])
			continue;
		/* A name (a policy's) or anything else not wholly a number: NAN. */
		s->vals[s->n] = strtod(sp + 1, &end);
		if (*end || end == sp + 1 || is_named_stat(line))
			s->vals[s->n] = NAN;
		s->raw[s->n] = sp + 1;
		s->names[s->n++] = line;
	}
	return 0;
}

/* The stat @name, or false when the daemon does not have it as a number. */
static bool stat_get(const struct stats *s, const char *name, double *val)
{
	for (size_t i = 0; i < s->n; i++) {
		if (!strcmp(s->names[i], name) && !isnan(s->vals[i])) {
			*val = s->vals[i];
			return true;
		}
	}
	return false;
}

/* ---- JSON and OpenMetrics ---- */

/* @s as a JSON string. */
static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* Whether @s is a JSON number: -?digits[.digits][e[+-]digits]. */
static bool json_number_ok(const char *s)
{
	if (*s == '-')
		s++;
	if (*s < '0' || *s > '9' || (*s == '0' && s[1] >= '0' && s[1] <= '9'))
		return false;
	while (*s >= '0' && *s <= '9')
		s++;
	if (*s == '.') {
		if (*++s < '0' || *s > '9')
			return false;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	if (*s == 'e' || *s == 'E') {
		if (*++s == '+' || *s == '-')
			s++;
		if (*s < '0' || *s > '9')
			return false;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	return !*s;
}

/* A value the daemon printed: a JSON number as it is, anything else a string. */
static void json_value(const char *raw)
{
	if (json_number_ok(raw))
		fputs(raw, stdout);
	else
		json_string(raw);
}

/* Every stat of @s as one JSON object on one line; the policies' names as strings. */
static void stats_json(const struct stats *s)
{
	putchar('{');
	for (size_t i = 0; i < s->n; i++) {
		if (i)
			putchar(',');
		json_string(s->names[i]);
		putchar(':');
		if (isnan(s->vals[i]))
			json_string(s->raw[i]);
		else
			json_value(s->raw[i]);
	}
	puts("}");
	fflush(stdout);
}

/* ---- Prometheus: OpenMetrics and the text format ---- */

/* A stat's unit in the exposition: none, bytes, or ms (exported in seconds). */
enum om_unit { OM_NONE, OM_BYTES, OM_MS };

/*
 * Every stat the daemon has: whether it only grows (a counter; every other
 * stat is a gauge), its unit and what it is.  The policies' names are not
 * here: they are the labels of foliofs_policy_info.  A stat this table
 * does not know is exported as a gauge all the same.
 */
static const struct om_stat {
	const char *name;
	bool counter;
	enum om_unit unit;
	const char *help;
} om_stats[] = {
	{ "nr_dirty", false, OM_NONE, "4 KiB pages charged to the dirty budget now, by the accounting policy" },
	{ "nr_dirtied", true, OM_NONE, "4 KiB pages charged to the dirty budget" },
	{ "nr_written", true, OM_NONE, "4 KiB pages of folios whose writeback ended, whole folios (WB_WRITTEN)" },
	{ "nr_writeback", false, OM_NONE, "4 KiB pages of folios with a write in flight now, whole folios (NR_WRITEBACK)" },
	{ "nr_discharged", true, OM_NONE, "4 KiB pages of charge discharged by completed writeback" },
	{ "nr_reclaimable", false, OM_NONE, "4 KiB pages charged for dirty blocks not under writeback" },
	{ "wb_budget_pages", true, OM_NONE, "writeback budget used by background writeback, 4 KiB pages, whole folios" },
	{ "wb_dirty_pages_written", true, OM_NONE, "4 KiB pages holding the blocks background writeback wrote" },
	{ "dirty_bytes_exact", false, OM_NONE, "bytes in blocks dirty or under writeback now" },
	{ "writeback_bytes", false, OM_BYTES, "bytes in blocks under writeback now" },
	{ "pinned_bytes", false, OM_BYTES, "memory of folios holding a dirty, writeback or unsynced block" },
	{ "unsynced_bytes", false, OM_BYTES, "memory of folios holding blocks written back since the file's last sync" },
	{ "app_write_bytes", true, OM_BYTES, "bytes written by applications" },
	{ "app_read_bytes", true, OM_BYTES, "bytes read by applications" },
	{ "backing_read_bytes", true, OM_BYTES, "bytes read from the backing files" },
	{ "backing_read_ios", true, OM_NONE, "reads of the backing files" },
	{ "ra_pages", true, OM_NONE, "4 KiB pages readahead read" },
	{ "ra_ios", true, OM_NONE, "backing reads of readahead" },
	{ "ra_async_ios", true, OM_NONE, "readahead reads started asynchronously through io_uring" },
	{ "backing_write_bytes", true, OM_BYTES, "bytes written back to the backing files" },
	{ "backing_write_ios", true, OM_NONE, "writes to the backing files, one per merged run" },
	{ "backing_write_submits", true, OM_NONE, "system calls that submitted backing writes" },
	{ "wb_errors", true, OM_NONE, "failed backing writes and syncs (the data stays dirty)" },
	{ "wb_retries", true, OM_NONE, "background writeback passes over a file that failed again" },
	{ "faults_injected", true, OM_NONE, "faults injected by fault=" },
	{ "flusher_passes", true, OM_NONE, "times the flushers looked at the files" },
	{ "dirty_thresh", false, OM_NONE, "the dirty threshold, 4 KiB pages" },
	{ "bg_thresh", false, OM_NONE, "the background writeback threshold, 4 KiB pages" },
	{ "dirty_limit", false, OM_NONE, "the throttler's hard limit, 4 KiB pages" },
	{ "setpoint", false, OM_NONE, "the throttler's setpoint, 4 KiB pages" },
	{ "pinned_thresh", false, OM_NONE, "the pinned-memory threshold, 4 KiB pages (0: no limit)" },
	{ "pinned_limit", false, OM_NONE, "the pinned-memory hard limit, 4 KiB pages (0: no limit)" },
	{ "write_bw", false, OM_NONE, "estimated write bandwidth, KiB/s" },
	{ "avg_write_bw", false, OM_NONE, "the write bandwidth estimate smoothed again, KiB/s" },
	{ "dirty_rate", false, OM_NONE, "charge rate over the last interval, KiB/s" },
	{ "dirty_ratelimit", false, OM_NONE, "the per-writer rate limit, KiB/s" },
	{ "balanced_dirty_ratelimit", false, OM_NONE, "the rate the rate limit steps toward, KiB/s" },
	{ "task_ratelimit", false, OM_NONE, "the rate of the last throttled writer, KiB/s" },
	{ "pos_ratio", false, OM_NONE, "the position ratio of the last throttled check, 1024 at the setpoint" },
	{ "throttle_events", true, OM_NONE, "writer pauses" },
	{ "throttle_ms", true, OM_MS, "time writers were paused" },
	{ "throttled_writers", false, OM_NONE, "writes whose reply is held by the throttle now" },
	{ "pause", false, OM_MS, "the last pause" },
	{ "period", false, OM_MS, "the period of the last pause" },
	{ "think", false, OM_MS, "the think time credited to the last pause" },
	{ "cache_bytes", false, OM_BYTES, "folio memory now" },
	{ "cache_size", false, OM_NONE, "the cache's budget, bytes (cache_size=)" },
	{ "pool_bytes", false, OM_BYTES, "free folio memory kept for new folios" },
	{ "pool_hits", true, OM_NONE, "folios made with pooled memory" },
	{ "pool_misses", true, OM_NONE, "folios made with fresh memory" },
	{ "folios", false, OM_NONE, "folios in the cache now" },
	{ "folios_4k", false, OM_NONE, "4 KiB folios in the cache now" },
	{ "folios_8k", false, OM_NONE, "8 KiB folios in the cache now" },
	{ "folios_16k", false, OM_NONE, "16 KiB folios in the cache now" },
	{ "folios_32k", false, OM_NONE, "32 KiB folios in the cache now" },
	{ "folios_64k", false, OM_NONE, "64 KiB folios in the cache now" },
	{ "folios_128k", false, OM_NONE, "128 KiB folios in the cache now" },
	{ "folios_256k", false, OM_NONE, "256 KiB folios in the cache now" },
	{ "folios_512k", false, OM_NONE, "512 KiB folios in the cache now" },
	{ "folios_1024k", false, OM_NONE, "1 MiB folios in the cache now" },
	{ "folios_2048k", false, OM_NONE, "2 MiB folios in the cache now" },
	{ "reclaimed_folios", true, OM_NONE, "clean folios dropped by reclaim" },
	{ "active_bytes", false, OM_BYTES, "memory of the folios on the active list" },
	{ "inactive_bytes", false, OM_BYTES, "memory of the folios on the inactive list" },
	{ "seen_active_bytes", false, OM_BYTES, "active_bytes as reclaim last saw it (lru_stats_ms)" },
	{ "seen_inactive_bytes", false, OM_BYTES, "inactive_bytes as reclaim last saw it (lru_stats_ms)" },
	{ "activated_folios", true, OM_NONE, "moves to the active list" },
	{ "rotated_folios", true, OM_NONE, "folios reclaim met dirty, moved to the inactive tail once written" },
	{ "deactivated_folios", true, OM_NONE, "moves from the active list to the inactive one by reclaim" },
	{ "activate_pages", true, OM_NONE, "pages moved to the active list (the kernel's pgactivate)" },
	{ "deactivate_pages", true, OM_NONE, "pages moved off the active list by reclaim (pgdeactivate)" },
	{ "workingset_refault", true, OM_NONE, "4 KiB pages of folios made for reads where a reclaimed folio's shadow lay" },
	{ "workingset_activate", true, OM_NONE, "of workingset_refault, the pages put straight on the active list" },
	{ "reclaim_stalls", true, OM_NONE, "times reclaim found nothing clean and waited for writeback" },
	{ "full_events", true, OM_NONE, "times the cache was full of data that could not be written" },
	{ "block_size", false, OM_NONE, "the block size, bytes" },
	{ "folio_size", false, OM_NONE, "the largest folio, bytes" },
	{ "backing_direct", false, OM_NONE, "1 if backing files are opened with O_DIRECT" },
	{ "policy_switches", true, OM_NONE, "run-time changes of the accounting, throttle or readahead policy or of a policy parameter" },
	{ "inodes", false, OM_NONE, "backing inodes the daemon holds for the kernel" },
	{ "kept_inodes", true, OM_NONE, "forgotten inodes kept because their data could not be written" },
	{ "fds", false, OM_NONE, "descriptors the daemon holds for files and directories" },
	{ "fd_budget", false, OM_NONE, "descriptors the daemon may hold" },
	{ "fds_idle_closed", true, OM_NONE, "data descriptors of unused files closed to stay within the budget" },
	{ "fds_reopened", true, OM_NONE, "data descriptors opened again" },
	{ "fds_refused", true, OM_NONE, "opens answered ENFILE because no descriptor could be freed" },
	{ "fd_cache_max", false, OM_NONE, "cached O_PATH and idle data descriptors kept at most, each" },
	{ "path_fds", false, OM_NONE, "O_PATH descriptors held now" },
	{ "inode_refinds", true, OM_NONE, "inodes found again by parent and name, having no descriptor" },
	{ "inode_stale", true, OM_NONE, "inodes not found again (changed behind the mount): ESTALE" },
	{ "max_inodes", false, OM_NONE, "the bound of inodes (-o max_inodes)" },
	{ "inodes_pruned", true, OM_NONE, "inodes the kernel was asked to forget near max_inodes" },
	{ "fuse_uring_requests", true, OM_NONE, "requests served over FUSE over io_uring" },
	{ "fuse_uring_threads", false, OM_NONE, "threads serving the FUSE io_uring queues" },
};

/* Stats by folio size: the name is the prefix, then the size, "4k" .. "2048k". */
static const struct om_stat om_stats_by_size[] = {
	{ "folios_made_", true, OM_NONE, "folios made of the size in the name" },
	{ "folios_reclaimed_", true, OM_NONE, "folios of the size in the name dropped by reclaim" },
	{ "folios_activated_", true, OM_NONE, "folios of the size in the name moved to the active list" },
	{ "folios_active_", false, OM_NONE, "folios of the size in the name on the active list now" },
};

static const struct om_stat *om_stat_find(const char *name)
{
	for (size_t i = 0; i < sizeof(om_stats) / sizeof(om_stats[0]); i++) {
		if (!strcmp(name, om_stats[i].name))
			return &om_stats[i];
	}
	for (size_t i = 0; i < sizeof(om_stats_by_size) / sizeof(om_stats_by_size[0]); i++) {
		size_t n = strlen(om_stats_by_size[i].name);
		const char *size = name + n;

		if (strncmp(name, om_stats_by_size[i].name, n) != 0 || !isdigit((unsigned char)*size))
			continue;
		while (isdigit((unsigned char)*size))
			size++;
		if (!strcmp(size, "k"))
			return &om_stats_by_size[i];
	}
	return NULL;
}

/* @s as a label value: backslash, quote and newline escaped. */
static void om_label(const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			printf("\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", stdout);
		else
			putchar(*s);
	}
}

/*
 * The metric family name of stat @name into @buf: "foliofs_" and the name
 * with what a metric name cannot hold ('.' of account.share) as '_'; a
 * stat in ms is exported in seconds, its "_ms" (if any) replaced by
 * "_seconds".
 */
static void om_family(const char *name, enum om_unit unit, char *buf, size_t len)
{
	size_t n = strlen(name), used;

	if (unit == OM_MS && n > 3 && !strcmp(name + n - 3, "_ms"))
		n -= 3;
	used = (size_t)snprintf(buf, len, "foliofs_%.*s", (int)n, name);
	for (size_t i = sizeof("foliofs_") - 1; i < used && i < len; i++) {
		char c = buf[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			buf[i] = '_';
	}
	if (unit == OM_MS && used < len)
		snprintf(buf + used, len - used, "_seconds");
}

/* The "# HELP" text of stat @name, given its table entry (or none). */
static void om_help(const char *name, const struct om_stat *st, char *buf, size_t len)
{
	const char *dot = strchr(name, '.');

	if (st)
		snprintf(buf, len, "%s%s", st->help,
			 st->unit == OM_MS ? " (the stat's ms, in seconds)" : "");
	else if (dot)
		snprintf(buf, len, "parameter %s of the %s policy in force (foliofsctl policies)",
			 dot + 1, !strncmp(name, "account.", 8) ? "accounting (dirty_account)" :
			 !strncmp(name, "size.", 5) ? "sizing (folio_policy)" : "throttle");
	else
		snprintf(buf, len, "foliofs stat %s (one this foliofsctl does not describe)", name);
}

/* A value in ms printed in seconds, exactly: "1234" -> "1.234". */
static void om_ms_as_seconds(const char *raw)
{
	char *end;
	long long ms;

	errno = 0;
	ms = strtoll(raw, &end, 10);
	if (errno || *end || end == raw || ms < 0)
		printf("%.17g", strtod(raw, NULL) / 1000);
	else
		printf("%lld.%03lld", ms / 1000, ms % 1000);
}

/*
 * The policies in force as one info metric: foliofs_policy_info with a
 * label per policy and the value 1.
 */
static void om_policy_info(const struct stats *s, const char *mnt, bool openmetrics)
{
	printf("# HELP foliofs_policy%s the policies in force: accounting (dirty_account),"
	       " throttle, folio sizing (folio_policy), readahead model (ra_model)\n",
	       openmetrics ? "" : "_info");
	printf("# TYPE foliofs_policy%s\n", openmetrics ? " info" : "_info gauge");
	fputs("foliofs_policy_info{mountpoint=\"", stdout);
	om_label(mnt);
	putchar('"');
	for (size_t i = 0; i < s->n; i++) {
		if (!is_named_stat(s->names[i]))
			continue;
		printf(",%s=\"", s->names[i]);
		om_label(s->raw[i]);
		putchar('"');
	}
	puts("} 1");
}

/*
 * Every stat of @s for Prometheus, labelled with the absolute mount point
 * @mnt.  @openmetrics: the OpenMetrics 1.0 text format (a counter family
 * FOO with the sample FOO_total, UNIT lines, an info metric, "# EOF"
 * last); else the Prometheus text format 0.0.4 that node_exporter's
 * textfile collector reads (the counter family named FOO_total, no UNIT,
 * the info metric as a gauge).
 */
static void stats_prometheus(const struct stats *s, const char *mnt, bool openmetrics)
{
	bool info_done = false;

	for (size_t i = 0; i < s->n; i++) {
		const struct om_stat *st = om_stat_find(s->names[i]);
		enum om_unit unit = st ? st->unit : OM_NONE;
		bool counter = st && st->counter;
		char family[128], help[256];
		const char *total = counter ? "_total" : "";

		if (is_named_stat(s->names[i])) {
			if (!info_done)
				om_policy_info(s, mnt, openmetrics);
			info_done = true;
			continue;
		}
		if (isnan(s->vals[i]))
			continue;	/* not a number, nor a name we know */
		om_family(s->names[i], unit, family, sizeof(family));
		om_help(s->names[i], st, help, sizeof(help));
		printf("# HELP %s%s %s\n", family, openmetrics ? "" : total, help);
		printf("# TYPE %s%s %s\n", family, openmetrics ? "" : total,
		       counter ? "counter" : "gauge");
		/* The unit is the family name's suffix (OpenMetrics requires it). */
		if (openmetrics && unit != OM_NONE)
			printf("# UNIT %s %s\n", family, unit == OM_BYTES ? "bytes" : "seconds");
		printf("%s%s{mountpoint=\"", family, total);
		om_label(mnt);
		fputs("\"} ", stdout);
		if (unit == OM_MS)
			om_ms_as_seconds(s->raw[i]);
		else
			fputs(s->raw[i], stdout);
		putchar('\n');
	}
	if (openmetrics)
		puts("# EOF");
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One column: @v, or "-" when @have is false (the daemon lacks the stat). */
static void col(bool have, double v, int width, int prec)
{
	if (have)
		printf(" %*.*f", width, prec, v);
	else
		printf(" %*s", width, "-");
}

/* A stat in pages, printed in MiB. */
static void col_pages(const struct stats *s, const char *name, int width)
{
	double v = 0;
	bool have = stat_get(s, name, &v);

	col(have, v * PAGE_BYTES / MIB, width, 1);
}

static void col_bytes(const struct stats *s, const char *name, int width)
{
	double v = 0;
	bool have = stat_get(s, name, &v);

	col(have, v / MIB, width, 1);
}

/* The increase of @name from @prev to @cur, times @scale; "-" when absent. */
static void col_delta(const struct stats *prev, const struct stats *cur, const char *name,
		      double scale, int width, int prec)
{
	double a = 0, b = 0;
	bool have = stat_get(prev, name, &a) && stat_get(cur, name, &b);

	col(have, (b - a) * scale, width, prec);
}

static void stat_header(void)
{
	printf("%8s %10s %8s %8s %7s %7s %7s %7s %7s %8s %8s %6s %9s\n",
	       "dirty", "exact", "pinned", "wback", "bg", "thresh", "limit", "setpt",
	       "wr_bw", "dirtd/s", "writn/s", "pauses", "paused_ms");
}

static void stat_line(const struct stats *prev, const struct stats *cur, double dt)
{
	double wb = 0, bw = 0, exact = 0;
	bool have;

	col_pages(cur, "nr_dirty", 8);
	/* KiB exact: the few KiB the policies disagree about must show. */
	have = stat_get(cur, "dirty_bytes_exact", &exact);
	col(have, exact / MIB, 10, 3);
	col_bytes(cur, "pinned_bytes", 8);
	if (stat_get(cur, "nr_writeback", &wb))
		col(true, wb * PAGE_BYTES / MIB, 8, 1);
	else
		col_bytes(cur, "writeback_bytes", 8);
	col_pages(cur, "bg_thresh", 7);
	col_pages(cur, "dirty_thresh", 7);
	col_pages(cur, "dirty_limit", 7);
	col_pages(cur, "setpoint", 7);
	have = stat_get(cur, "write_bw", &bw);
	col(have, bw / 1024.0, 7, 1);	/* KB/s to MiB/s */
	col_delta(prev, cur, "nr_dirtied", PAGE_BYTES / MIB / dt, 8, 1);
	col_delta(prev, cur, "nr_written", PAGE_BYTES / MIB / dt, 8, 1);
	col_delta(prev, cur, "throttle_events", 1, 6, 0);
	col_delta(prev, cur, "throttle_ms", 1, 9, 0);
	putchar('\n');
	fflush(stdout);
}

static void sleep_s(double secs)
{
	struct timespec ts = { .tv_sec = (time_t)secs,
			       .tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Parse a positive number for @opt, or exit 2. */
static double parse_positive(const char *opt, const char *val, bool integer)
{
	char *end;
	double v;

	errno = 0;
	v = integer ? (double)strtoull(val, &end, 10) : strtod(val, &end);
	if (!*val || *end || errno || !(v > 0) || (integer && *val == '-') || v > 1e9) {
		say("%s %s: not a positive %s", opt, val, integer ? "integer" : "number");
		exit(EXIT_USAGE);
	}
	return v;
}

/* stat --json and --openmetrics: snapshots now, not differences. */
static int stat_snapshots(const char *mnt)
{
	unsigned long long count = opt.have_count ? opt.count : opt.have_interval ? 0 : 1;
	/* The mount point label is absolute, whatever path the caller gave. */
	char *label = abs_path(mnt);
	struct stats s = { 0 };
	int ret = 0;

	if (!label) {
		say("%s: %s", mnt, strerror(errno));
		return 1;
	}
	for (unsigned long long i = 0; !count || i < count; i++) {
		if (i)
			sleep_s(opt.interval);
		ret = stats_read(mnt, &s);
		if (ret)
			break;
		if (opt.openmetrics || opt.prometheus)
			stats_prometheus(&s, label, opt.openmetrics);
		else
			stats_json(&s);
		stats_free(&s);
	}
	free(label);
	if (ret) {
		say("%s/" CTL_DIR "/stats: %s", mnt, strerror(-ret));
		return 1;
	}
	return 0;
}

static int cmd_stat(const char *mnt, int argc, char **argv)
{
	struct stats prev = { 0 }, cur = { 0 };
	double interval = opt.interval, t_prev, t_cur;
	unsigned long long count = opt.count;	/* 0: forever */
	int ret;

	if (argc) {
		say("stat: unexpected argument '%s' (see %s -h)", argv[0], progname);
		return EXIT_USAGE;
	}
	if ((opt.openmetrics || opt.prometheus) && (opt.have_count || opt.have_interval)) {
		say("%s prints one snapshot: -c and -i do not apply",
		    opt.openmetrics ? "--openmetrics" : "--prometheus");
		return EXIT_USAGE;
	}
	if (opt.json || opt.openmetrics || opt.prometheus)
		return stat_snapshots(mnt);
	ret = stats_read(mnt, &prev);
	t_prev = now_s();
	for (unsigned long long line = 0; !ret && (!count || line < count); line++) {
		sleep_s(interval);
		ret = stats_read(mnt, &cur);
		if (ret)
			break;
		t_cur = now_s();
		if (line % HEADER_EVERY == 0)
			stat_header();
		stat_line(&prev, &cur, t_cur - t_prev > 1e-6 ? t_cur - t_prev : 1e-6);
		stats_free(&prev);
		prev = cur;
		cur = (struct stats){ 0 };
		t_prev = t_cur;
	}
	stats_free(&prev);
	stats_free(&cur);
	if (ret) {
		say("%s/" CTL_DIR "/stats: %s", mnt, strerror(-ret));
		return 1;
	}
	return 0;
}

/* ---- tunables ---- */

/* A tunable name must be one path component, without leading dot. */
static bool tunable_name_ok(const char *name)
{
	return *name && *name != '.' && !strchr(name, '/');
}

/*
 * The policy in force of parameter kind @kind ("account", "size",
 * "throttle") into @buf, and the option that chooses it: NULL when it
 * cannot be read.
 */
static const char *param_policy(const char *mnt, const char *kind, char *buf, size_t len)
{
	const char *option = !strcmp(kind, "account") ? "dirty_account" :
			     !strcmp(kind, "size") ? "folio_policy" : "throttle";
	char *path, *val = NULL;
	struct stats s = { 0 };
	bool ok = false;

	if (!strcmp(kind, "size")) {
		/* folio_policy is no tunable (it is fixed for the mount's life): the stats name it. */
		if (!stats_read(mnt, &s)) {
			for (size_t i = 0; i < s.n && !ok; i++) {
				if (!strcmp(s.names[i], option)) {
					snprintf(buf, len, "%s", s.raw[i]);
					ok = true;
				}
			}
		}
		stats_free(&s);
		return ok ? option : NULL;
	}
	path = ctl_path(mnt, !strcmp(kind, "account") ? "tunables/dirty_account" :
				"tunables/throttle");
	if (!read_all(path, &val, NULL)) {
		val[strcspn(val, "\n")] = '\0';
		snprintf(buf, len, "%s", val);
		ok = true;
	}
	free(val);
	free(path);
	return ok ? option : NULL;
}

/*
 * "no such tunable", or for KIND.PARAM of a parameter the policy in force
 * lacks, what the mount option says: which policy, and the parameters it
 * has (from .foliofs/policies: "KIND NAME ORIGIN PARAM=DEFAULT[MIN,MAX]...").
 */
static void say_no_tunable(const char *mnt, const char *name)
{
	static const char *const kinds[] = { "account", "size", "throttle" };
	char policy[64], names[512] = "", *path, *text = NULL, *line, *save = NULL;
	const char *dot = strchr(name, '.'), *option = NULL;
	char kind[16];
	size_t used = 0;

	for (size_t k = 0; dot && k < sizeof(kinds) / sizeof(kinds[0]) && !option; k++) {
		if ((size_t)(dot - name) == strlen(kinds[k]) && !strncmp(name, kinds[k], strlen(kinds[k])) &&
		    dot[1]) {
			snprintf(kind, sizeof(kind), "%s", kinds[k]);
			option = param_policy(mnt, kind, policy, sizeof(policy));
		}
	}
	path = ctl_path(mnt, "policies");
	if (!option || read_all(path, &text, NULL)) {
		free(path);
		say("%s: no such tunable", name);
		return;
	}
	free(path);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *w, *wsave = NULL, *lkind = strtok_r(line, " ", &wsave);
		char *lname = strtok_r(NULL, " ", &wsave);

		if (!lkind || !lname || strcmp(lkind, kind) != 0 || strcmp(lname, policy) != 0 ||
		    !strtok_r(NULL, " ", &wsave))	/* the origin */
			continue;
		while ((w = strtok_r(NULL, " ", &wsave)) && used < sizeof(names))
			used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%.*s",
						 used ? ", " : "", (int)strcspn(w, "="), w);
	}
	free(text);
	say("%s: not a parameter of %s=%s (%s%s)", name, option, policy,
	    names[0] ? "it has: " : "it has none", names);
}

/* Exit status for a failed open of tunable @name (errno @err), with the line said. */
static int tunable_open_error(const char *mnt, const char *name, int err)
{
	if (err == ENOENT) {
		say_no_tunable(mnt, name);
		return EXIT_USAGE;
	}
	if (err == EACCES || err == EPERM) {
		say("%s: %s (only the mounting user and root may set tunables)", name,
		    strerror(err));
		return 1;
	}
	say("%s: %s", name, strerror(err));
	return 1;
}

/*
 * The path of tunable @name in *@path (malloc'ed): 0, or the exit status
 * for an unknown name (reported).
 */
static int tunable_path(const char *mnt, const char *name, char **path)
{
	char *rel;

	if (!tunable_name_ok(name)) {
		say("%s: no such tunable", name);
		return EXIT_USAGE;
	}
	if (asprintf(&rel, "tunables/%s", name) < 0) {
		say("out of memory");
		return 1;
	}
	*path = ctl_path(mnt, rel);
	free(rel);
	return 0;
}

/* "NAME VALUE", or with --json "NAME": VALUE after a comma unless @first. */
static int print_tunable(const char *mnt, const char *name, bool first)
{
	char *path, *val;
	size_t len;
	int ret = tunable_path(mnt, name, &path);

	if (ret)
		return ret;
	ret = read_all(path, &val, &len);
	free(path);
	if (ret)
		return tunable_open_error(mnt, name, -ret);
	while (len && val[len - 1] == '\n')
		val[--len] = '\0';
	if (opt.json) {
		fputs(first ? "" : ",", stdout);
		json_string(name);
		putchar(':');
		json_value(val);
	} else {
		printf("%s %s\n", name, val);
	}
	free(val);
	return 0;
}

static int cmd_get(const char *mnt, int argc, char **argv)
{
	char *dir_path;
	struct dirent *d;
	DIR *dir;
	int ret = 0;

	bool first = true;

	if (opt.json)
		putchar('{');
	for (int i = 0; i < argc && !ret; i++, first = false)
		ret = print_tunable(mnt, argv[i], first);
	if (argc)
		goto out;
	dir_path = ctl_path(mnt, "tunables");
	dir = opendir(dir_path);
	if (!dir) {
		say("%s: %s", dir_path, strerror(errno));
		free(dir_path);
		return 1;
	}
	free(dir_path);
	while (!ret && (d = readdir(dir))) {
		if (d->d_name[0] != '.') {
			ret = print_tunable(mnt, d->d_name, first);
			first = false;
		}
	}
	closedir(dir);
out:
	if (opt.json && !ret)
		puts("}");
	return ret;
}

/*
 * Write @val to tunable @name.  A refused value: the daemon's reason is
 * what a read through the same open file gives (ctl.c).
 */
static int set_tunable(const char *mnt, const char *name, const char *val)
{
	char *path, *data, reason[512];
	ssize_t n;
	int fd, err = tunable_path(mnt, name, &path);

	if (err)
		return err;
	fd = open(path, O_RDWR | O_CLOEXEC);
	free(path);
	if (fd < 0)
		return tunable_open_error(mnt, name, errno);
	if (asprintf(&data, "%s\n", val) < 0) {
		close(fd);
		return 1;
	}
	n = write(fd, data, strlen(data));
	err = n < 0 ? errno : 0;
	free(data);
	if (!err && (size_t)n != strlen(val) + 1)
		err = EIO;
	if (err == EINVAL) {
		n = pread(fd, reason, sizeof(reason) - 1, 0);
		reason[n > 0 ? n : 0] = '\0';
		reason[strcspn(reason, "\n")] = '\0';
		/* The daemon's reason names the tunable already, as a rule. */
		if (n > 0 && !strncmp(reason, name, strlen(name)))
			say("%s", reason);
		else
			say("%s=%s: %s", name, val, n > 0 ? reason : strerror(err));
	} else if (err) {
		say("%s=%s: %s", name, val, strerror(err));
	}
	if (close(fd) < 0 && !err) {
		err = errno;
		say("%s=%s: %s", name, val, strerror(err));
	}
	return !err ? 0 : err == EINVAL ? EXIT_USAGE : 1;
}

static int cmd_set(const char *mnt, int argc, char **argv)
{
	if (!argc) {
		say("set: no NAME=VALUE given (see %s -h)", progname);
		return EXIT_USAGE;
	}
	for (int i = 0; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		int ret;

		if (!eq || eq == argv[i]) {
			say("%s: not NAME=VALUE", argv[i]);
			return EXIT_USAGE;
		}
		*eq = '\0';
		ret = set_tunable(mnt, argv[i], eq + 1);
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- files ---- */

/* @bytes as a short human size (like ls -h) into @buf. */
static const char *human(char *buf, size_t len, unsigned long long bytes)
{
	static const char units[] = "BKMGTP";
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%lluB", bytes);
	else
		snprintf(buf, len, v < 10 ? "%.1f%c" : "%.0f%c", v, units[u]);
	return buf;
}

/* One file of the queue as a JSON object; @errs is "COUNT" or "COUNT:ENAME". */
static void file_json(bool *first, unsigned long long dirty, unsigned long long wb,
		      long long age_ms, const char *errs, const char *path)
{
	const char *colon = strchr(errs, ':');

	printf("%s{\"dirty_bytes\":%llu,\"writeback_bytes\":%llu,\"oldest_dirty_ms\":%lld,"
	       "\"wb_errors\":%llu,\"last_error\":", *first ? "" : ",", dirty, wb, age_ms,
	       strtoull(errs, NULL, 10));
	if (colon)
		json_string(colon + 1);
	else
		fputs("null", stdout);
	fputs(",\"path\":", stdout);
	json_string(path);
	putchar('}');
	*first = false;
}

static int cmd_files(const char *mnt, int argc, char **argv)
{
	char *path, *text, *line, *save = NULL;
	bool first = true;
	int ret;

	if (argc) {
		say("files: unexpected argument '%s'", argv[0]);
		return EXIT_USAGE;
	}
	path = ctl_path(mnt, "files");
	ret = read_all(path, &text, NULL);
	if (ret) {
		say("%s: %s", path, strerror(-ret));
		free(path);
		return 1;
	}
	free(path);
	if (opt.json)
		putchar('[');
	else
		printf("%8s %8s %9s %8s  %s\n", "DIRTY", "WBACK", "AGE_S", "ERRORS", "PATH");
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long dirty, wb;
		long long age_ms;
		char errs[64], a[16], b[16];
		int off = 0;

		if (sscanf(line, "%llu %llu %lld %63s %n", &dirty, &wb, &age_ms, errs, &off) < 4 ||
		    !off) {
			if (!opt.json)
				printf("%s\n", line);	/* a format this tool does not know */
			continue;
		}
		if (opt.json)
			file_json(&first, dirty, wb, age_ms, errs, line + off);
		else
			printf("%8s %8s %9.1f %8s  %s\n", human(a, sizeof(a), dirty),
			       human(b, sizeof(b), wb), (double)age_ms / 1000, errs, line + off);
	}
	if (opt.json)
		puts("]");
	free(text);
	return 0;
}

/* ---- sync ---- */

struct sync_job {
	const char *path;
	int err;			/* 0 or errno, once done */
	bool done;			/* lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* CLOCK_MONOTONIC; done changed */
};

static void *sync_main(void *arg)
{
	struct sync_job *job = arg;
	int fd = open(job->path, O_WRONLY | O_CLOEXEC);
	int err = 0;

	if (fd < 0) {
		err = errno;
	} else {
		if (write(fd, "1\n", 2) < 0)
			err = errno;
		if (close(fd) < 0 && !err)
			err = errno;
	}
	pthread_mutex_lock(&job->lock);
	job->err = err;
	job->done = true;
	pthread_cond_signal(&job->cond);
	pthread_mutex_unlock(&job->lock);
	return NULL;
}

static void sync_progress(const char *mnt, double t0)
{
	struct stats s = { 0 };
	double v;

	if (!stats_read(mnt, &s) && stat_get(&s, "dirty_bytes_exact", &v))
		fprintf(stderr, "%s: sync: %.1f MiB dirty left (%.1f s)\n", progname,
			v / MIB, now_s() - t0);
	stats_free(&s);
}

static int cmd_sync(const char *mnt, int argc, char **argv)
{
	struct sync_job job = { .path = ctl_path(mnt, "sync") };
	pthread_condattr_t attr;
	pthread_t thread;
	double t0 = now_s();
	int ret;

	if (argc) {
		say("sync: unexpected argument '%s'", argv[0]);
		return EXIT_USAGE;
	}
	pthread_mutex_init(&job.lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&job.cond, &attr);
	pthread_condattr_destroy(&attr);
	ret = pthread_create(&thread, NULL, sync_main, &job);
	if (ret) {
		say("sync: cannot start a thread: %s", strerror(ret));
		return 1;
	}
	pthread_mutex_lock(&job.lock);
	while (!job.done) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 500000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_cond_timedwait(&job.cond, &job.lock, &ts) == ETIMEDOUT && !job.done) {
			pthread_mutex_unlock(&job.lock);
			sync_progress(mnt, t0);
			pthread_mutex_lock(&job.lock);
		}
	}
	pthread_mutex_unlock(&job.lock);
	pthread_join(thread, NULL);
	if (job.err)
		say("sync %s: %s", mnt, strerror(job.err));
	free((char *)job.path);
	pthread_cond_destroy(&job.cond);
	pthread_mutex_destroy(&job.lock);
	return job.err ? 1 : 0;
}

/* ---- trace ---- */

/* Write @cmd to .foliofs/trace; a refusal prints the daemon's reason. */
static int trace_write(const char *mnt, const char *cmd)
{
	char *path = ctl_path(mnt, "trace"), reason[512];
	size_t len = strlen(cmd);
	ssize_t n;
	int fd, err;

	fd = open(path, O_RDWR | O_CLOEXEC);
	free(path);
	if (fd < 0) {
		say("trace: %s", strerror(errno));
		return 1;
	}
	n = write(fd, cmd, len);
	err = n < 0 ? errno : (size_t)n != len ? EIO : 0;
	if (err == EINVAL || err == EBUSY) {
		n = pread(fd, reason, sizeof(reason) - 1, 0);
		reason[n > 0 ? n : 0] = '\0';
		reason[strcspn(reason, "\n")] = '\0';
		say("trace %s", n > 0 ? reason : strerror(err));
	} else if (err) {
		say("trace %s: %s", cmd, strerror(err));
	}
	if (close(fd) < 0 && !err) {
		err = errno;
		say("trace %s: %s", cmd, strerror(err));
	}
	return !err ? 0 : err == EINVAL || err == EBUSY ? EXIT_USAGE : 1;
}

static int cmd_trace(const char *mnt, int argc, char **argv)
{
	char *path, *cmd, *cwd;
	size_t len;
	int ret;

	if (!argc) {
		path = ctl_path(mnt, "trace");
		ret = read_all(path, &cmd, &len);
		free(path);
		if (ret) {
			say("trace: %s", strerror(-ret));
			return 1;
		}
		fputs(cmd, stdout);
		free(cmd);
		return 0;
	}
	if (argc == 1 && !strcmp(argv[0], "stop"))
		return trace_write(mnt, "stop");
	if (argc != 2 || strcmp(argv[0], "start") != 0 || !argv[1][0]) {
		say("trace: takes start FILE, or stop (see %s -h)", progname);
		return EXIT_USAGE;
	}
	/* The daemon runs in /: a relative FILE is taken from here. */
	cwd = argv[1][0] == '/' ? NULL : getcwd(NULL, 0);
	if (argv[1][0] != '/' && !cwd) {
		say("trace: %s", strerror(errno));
		return 1;
	}
	if (asprintf(&cmd, "start %s%s%s", cwd ? cwd : "", cwd ? "/" : "", argv[1]) < 0) {
		free(cwd);
		return 1;
	}
	ret = trace_write(mnt, cmd);
	free(cmd);
	free(cwd);
	return ret;
}

/* ---- folios and evict ---- */

/*
 * stat(2) of @file into *@st: 0, or the exit status with the line said
 * (1 if it cannot be stat'ed, 2 if it is not on the mount @mnt, whose
 * inode numbers alone the control files take).
 */
static int stat_on_mount(const char *mnt, const char *file, struct stat *st)
{
	struct stat m;

	if (stat(file, st) < 0) {
		say("%s: %s", file, strerror(errno));
		return 1;
	}
	if (stat(mnt, &m) < 0) {
		say("%s: %s", mnt, strerror(errno));
		return 1;
	}
	if (st->st_dev != m.st_dev) {
		say("%s: not on the foliofs mount %s", file, mnt);
		return EXIT_USAGE;
	}
	return 0;
}

/* Per file of .foliofs/folios. */
struct folio_sum {
	unsigned long long ino;
	unsigned long long by_order[10];
	unsigned long long active_by_order[10];	/* flag A: on the active list */
	unsigned long long marked;		/* flag r */
	unsigned long long referenced;		/* flag R */
};

/*
 * The longest FLAGS field a line may have: the daemon's is at most 7
 * letters (udwrARs, writeback/cache_view.c); room is left for more, and a
 * longer field ends the line's parse (a format this tool does not know).
 */
#define FOLIO_FLAGS_LEN 31
#define STR_(x) #x
#define STR(x) STR_(x)

/* The sums of the lines of @text, one per inode, into *@out: how many. */
static size_t folio_sums(char *text, struct folio_sum **out)
{
	struct folio_sum *sums = NULL;
	char *line, *save = NULL;
	size_t n = 0;

	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long ino, index;
		unsigned int order;
		char flags[FOLIO_FLAGS_LEN + 1];
		int end = 0;

		if (sscanf(line, "%llu %llu %u %" STR(FOLIO_FLAGS_LEN) "s%n", &ino, &index,
			   &order, flags, &end) != 4 || order >= 10 ||
		    (line[end] && !isspace((unsigned char)line[end])))
			continue;	/* a format this tool does not know */
		/* Lines come sorted by inode: a new one starts a new sum. */
		if (!n || sums[n - 1].ino != ino) {
			struct folio_sum *p = realloc(sums, (n + 1) * sizeof(*sums));

			if (!p) {
				say("out of memory");
				exit(1);
			}
			sums = p;
			memset(&sums[n], 0, sizeof(sums[n]));
			sums[n++].ino = ino;
		}
		sums[n - 1].by_order[order]++;
		sums[n - 1].active_by_order[order] += strchr(flags, 'A') != NULL;
		sums[n - 1].marked += strchr(flags, 'r') != NULL;
		sums[n - 1].referenced += strchr(flags, 'R') != NULL;
	}
	*out = sums;
	return n;
}

/* Folios and their bytes of counts per order @by_order[0..10). */
static void folio_count(const unsigned long long *by_order, unsigned long long *folios,
			unsigned long long *bytes)
{
	unsigned long long pages = 0;

	*folios = 0;
	for (int o = 0; o < 10; o++) {
		*folios += by_order[o];
		pages += by_order[o] << o;
	}
	*bytes = pages * (unsigned long long)PAGE_BYTES;
}

/* Counts per order as a JSON object of the sizes that have any: {"4K":n,...}. */
static void folio_sizes_json(const unsigned long long *by_order)
{
	putchar('{');
	for (int o = 0, n = 0; o < 10; o++) {
		if (by_order[o])
			printf("%s\"%u%c\":%llu", n++ ? "," : "", o < 8 ? 4u << o : 1u << (o - 8),
			       o < 8 ? 'K' : 'M', by_order[o]);
	}
	putchar('}');
}

/* One file's folios as a JSON object (after a comma unless @first). */
static void folio_sum_json(const struct folio_sum *s, const char *name, bool first)
{
	unsigned long long folios, bytes, active, active_bytes;

	folio_count(s->by_order, &folios, &bytes);
	folio_count(s->active_by_order, &active, &active_bytes);
	printf("%s{\"ino\":%llu,\"path\":", first ? "" : ",", s->ino);
	if (name)
		json_string(name);
	else
		fputs("null", stdout);
	printf(",\"folios\":%llu,\"bytes\":%llu,\"marked\":%llu,\"by_size\":", folios,
	       bytes, s->marked);
	folio_sizes_json(s->by_order);
	printf(",\"active\":%llu,\"active_bytes\":%llu,\"referenced\":%llu,"
	       "\"active_by_size\":", active, active_bytes, s->referenced);
	folio_sizes_json(s->active_by_order);
	putchar('}');
}

static void folio_sum_print(const struct folio_sum *s, const char *name)
{
	unsigned long long folios, bytes, active, active_bytes;

	folio_count(s->by_order, &folios, &bytes);
	folio_count(s->active_by_order, &active, &active_bytes);
	printf("%s%sino %llu%s: %llu folios, MiB %.2f, in 2M folios %.1f%%, marked %llu, "
	       "active %llu (MiB %.2f), referenced %llu\n",
	       name ? name : "", name ? " (" : "", s->ino, name ? ")" : "", folios,
	       (double)bytes / MIB,
	       bytes ? 100.0 * (double)(s->by_order[9] << 9) * PAGE_BYTES / (double)bytes : 0.0,
	       s->marked, active, (double)active_bytes / MIB, s->referenced);
	for (int o = 0; o < 10; o++) {
		if (s->by_order[o])
			printf("  %u%c: %llu (active %llu)\n", o < 8 ? 4u << o : 1u << (o - 8),
			       o < 8 ? 'K' : 'M', s->by_order[o], s->active_by_order[o]);
	}
}

static int cmd_folios(const char *mnt, int argc, char **argv)
{
	char *path = ctl_path(mnt, "folios"), *text;
	struct folio_sum *sums;
	bool first = true;
	size_t n;
	int ret;

	ret = read_all(path, &text, NULL);
	if (ret) {
		say("%s: %s", path, strerror(-ret));
		free(path);
		return 1;
	}
	free(path);
	n = folio_sums(text, &sums);
	if (opt.json)
		putchar('[');
	for (int i = 0; i < argc; i++) {
		struct folio_sum none = { 0 };
		struct stat st;
		size_t j;
		int err = stat_on_mount(mnt, argv[i], &st);

		if (err) {
			ret = ret ? ret : err;
			continue;
		}
		for (j = 0; j < n && sums[j].ino != (unsigned long long)st.st_ino; j++)
			;
		none.ino = (unsigned long long)st.st_ino;
		if (opt.json)
			folio_sum_json(j == n ? &none : &sums[j], argv[i], first);
		else if (j == n)
			printf("%s (ino %llu): no folios cached\n", argv[i],
			       (unsigned long long)st.st_ino);
		else
			folio_sum_print(&sums[j], argv[i]);
		first = false;
	}
	for (size_t j = 0; !argc && j < n; j++) {
		if (opt.json)
			folio_sum_json(&sums[j], NULL, !j);
		else
			folio_sum_print(&sums[j], NULL);
	}
	if (opt.json)
		puts("]");
	free(sums);
	free(text);
	return ret;
}

/* A byte count with an optional K, M or G: 0, or -1 when it is not one. */
static int parse_bytes(const char *val, unsigned long long *out)
{
	unsigned long long v, mul = 1;
	char *end;

	if (val[0] < '0' || val[0] > '9')
		return -1;
	errno = 0;
	v = strtoull(val, &end, 10);
	if (errno)
		return -1;
	if (*end && !end[1])
		mul = *end == 'K' ? 1ull << 10 : *end == 'M' ? 1ull << 20 :
		      *end == 'G' ? 1ull << 30 : 0;
	else if (*end)
		mul = 0;
	if (!mul || v > INT64_MAX / mul)
		return -1;
	*out = v * mul;
	return 0;
}

static int cmd_evict(const char *mnt, int argc, char **argv)
{
	unsigned long long start = 0, len = 0, dropped, bytes, held, busy;
	char *path, cmd[96], reply[512];
	struct stat st;
	ssize_t n;
	int fd, err;

	if ((argc != 1 && argc != 3) ||
	    (argc == 3 && (parse_bytes(argv[1], &start) || parse_bytes(argv[2], &len)))) {
		say("evict: takes FILE [START LEN], byte counts (see %s -h)", progname);
		return EXIT_USAGE;
	}
	err = stat_on_mount(mnt, argv[0], &st);
	if (err)
		return err;
	snprintf(cmd, sizeof(cmd), "%llu %llu %llu\n", (unsigned long long)st.st_ino, start, len);
	path = ctl_path(mnt, "evict");
	fd = open(path, O_RDWR | O_CLOEXEC);
	free(path);
	if (fd < 0) {
		say("evict: %s", strerror(errno));
		return 1;
	}
	n = pwrite(fd, cmd, strlen(cmd), 0);
	err = n < 0 ? errno : 0;
	n = pread(fd, reply, sizeof(reply) - 1, 0);
	reply[n > 0 ? n : 0] = '\0';
	reply[strcspn(reply, "\n")] = '\0';
	close(fd);
	if (err) {
		say("evict %s: %s", argv[0], reply[0] ? reply : strerror(err));
		return err == EINVAL || err == ENOENT ? EXIT_USAGE : 1;
	}
	if (sscanf(reply, "dropped %llu bytes %llu kept_held %llu kept_busy %llu",
		   &dropped, &bytes, &held, &busy) != 4) {
		printf("%s\n", reply);	/* a format this tool does not know */
		return 0;
	}
	printf("%s: dropped %llu folios (MiB %.2f), kept %llu dirty or unsynced, %llu busy\n",
	       argv[0], dropped, (double)bytes / MIB, held, busy);
	return 0;
}

/* ---- policies and load ---- */

static int cmd_policies(const char *mnt, int argc, char **argv)
{
	char *path, *text;
	int ret;

	if (argc) {
		say("policies: unexpected argument '%s'", argv[0]);
		return EXIT_USAGE;
	}
	path = ctl_path(mnt, "policies");
	ret = read_all(path, &text, NULL);
	free(path);
	if (ret) {
		say("policies: %s", strerror(-ret));
		return 1;
	}
	fputs(text, stdout);
	free(text);
	return 0;
}

static int cmd_load(const char *mnt, int argc, char **argv)
{
	char *path, *lib, reason[512];
	ssize_t n;
	int fd, err;

	if (argc != 1 || !argv[0][0]) {
		say("load: takes one LIBRARY (see %s -h)", progname);
		return EXIT_USAGE;
	}
	/* The daemon runs in /: the path it gets is absolute. */
	lib = realpath(argv[0], NULL);
	if (!lib) {
		say("load %s: %s", argv[0], strerror(errno));
		return EXIT_USAGE;
	}
	path = ctl_path(mnt, "load");
	fd = open(path, O_RDWR | O_CLOEXEC);
	free(path);
	if (fd < 0) {
		err = errno;
		say("load: %s%s", strerror(err),
		    err == EACCES ? " (only the mounting user and root may load policies)" : "");
		free(lib);
		return 1;
	}
	n = write(fd, lib, strlen(lib));
	err = n < 0 ? errno : (size_t)n != strlen(lib) ? EIO : 0;
	if (err) {
		/* The daemon's reason, one line naming the library. */
		n = pread(fd, reason, sizeof(reason) - 1, 0);
		reason[n > 0 ? n : 0] = '\0';
		reason[strcspn(reason, "\n")] = '\0';
		say("%s", n > 0 ? reason : strerror(err));
	}
	close(fd);
	free(lib);
	return !err ? 0 : err == EIO ? 1 : EXIT_USAGE;
}

/* ---- main ---- */

/* What each command takes, for the mount point and option checks. */
enum { TAKES_NOTHING, TAKES_NAMES, TAKES_FILES, TAKES_WORDS };

static const struct {
	const char *name;
	int (*fn)(const char *mnt, int argc, char **argv);
	int takes;		/* what follows the mount point */
	bool json;		/* --json applies */
} commands[] = {
	{ "stat", cmd_stat, TAKES_NOTHING, true },
	{ "get", cmd_get, TAKES_NAMES, true },
	{ "set", cmd_set, TAKES_NAMES, false },
	{ "files", cmd_files, TAKES_NOTHING, true },
	{ "sync", cmd_sync, TAKES_NOTHING, false },
	{ "trace", cmd_trace, TAKES_WORDS, false },
	{ "folios", cmd_folios, TAKES_FILES, true },
	{ "evict", cmd_evict, TAKES_FILES, false },
	{ "policies", cmd_policies, TAKES_NOTHING, false },
	{ "load", cmd_load, TAKES_FILES, false },
};

#define NR_COMMANDS (sizeof(commands) / sizeof(commands[0]))

/* 0 if @path is a foliofs mount whose control directory we can see, else an errno. */
static int foliofs_mount_check(const char *path)
{
	char *p = ctl_path(path, "stats");
	struct stat st;
	int err = stat(p, &st) ? errno : S_ISREG(st.st_mode) ? 0 : ENOENT;

	free(p);
	return err;
}

static bool is_foliofs_mount(const char *path)
{
	return !foliofs_mount_check(path);
}

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape_octal(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/*
 * The foliofs mounts (fstype fuse.foliofs) in /proc/self/mountinfo whose
 * control directory this process can see, into @mnts (at most @max,
 * malloc'ed): how many, or -errno.
 */
static int find_mounts(char **mnts, int max)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int n = 0;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *fields[5], *save = NULL, *sep = strstr(line, " - ");
		char type[64];
		int i = 0;

		if (!sep || sscanf(sep + 3, "%63s", type) != 1 || strcmp(type, "fuse.foliofs") != 0)
			continue;
		for (char *t = strtok_r(line, " ", &save); t && i < 5; t = strtok_r(NULL, " ", &save))
			fields[i++] = t;
		if (i < 5)
			continue;
		unescape_octal(fields[4]);	/* the mount point */
		if (n < max && is_foliofs_mount(fields[4])) {
			mnts[n] = strdup(fields[4]);
			if (mnts[n])
				n++;
		}
	}
	free(line);
	fclose(f);
	return n;
}

/* The one foliofs mount there is, or exit 2 saying why not. */
static char *discover_mount(const char *cmd)
{
	char *mnts[64];
	int n = find_mounts(mnts, 64);

	if (n < 0) {
		say("%s: no mount point given, and /proc/self/mountinfo: %s", cmd, strerror(-n));
		exit(EXIT_USAGE);
	}
	if (n == 1)
		return mnts[0];
	if (!n) {
		say("%s: no mount point given and no foliofs mount found", cmd);
		exit(EXIT_USAGE);
	}
	say("%s: no mount point given and %d foliofs mounts: give one of", cmd, n);
	for (int i = 0; i < n; i++) {
		fprintf(stderr, "  %s\n", mnts[i]);
		free(mnts[i]);
	}
	exit(EXIT_USAGE);
}

/*
 * The mount of type fuse.foliofs at @path in /proc/self/mountinfo (the last
 * one there), its owner (the super options' user_id=) into *@uid and
 * whether it has allow_other: true if there is one.
 */
static bool foliofs_mount_owner(const char *path, unsigned long *uid, bool *allow_other)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, *real = abs_path(path);
	size_t cap = 0;
	bool found = false;

	while (f && real && getline(&line, &cap, f) > 0) {
		char *sep = strstr(line, " - "), *fields[5], *save = NULL, *opts, *u;
		char type[64], source[4096], super[4096];
		int i = 0;

		if (!sep || sscanf(sep + 3, "%63s %4095s %4095s", type, source, super) != 3 ||
		    strcmp(type, "fuse.foliofs") != 0)
			continue;
		*sep = '\0';
		for (char *t = strtok_r(line, " ", &save); t && i < 5; t = strtok_r(NULL, " ", &save))
			fields[i++] = t;
		if (i < 5)
			continue;
		unescape_octal(fields[4]);
		if (strcmp(fields[4], real) != 0)
			continue;
		opts = super;
		u = strstr(opts, "user_id=");
		*uid = u ? strtoul(u + 8, NULL, 10) : 0;
		*allow_other = false;
		for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save))
			*allow_other |= !strcmp(o, "allow_other");
		found = true;
	}
	free(line);
	free(real);
	if (f)
		fclose(f);
	return found;
}

/*
 * The line for a mount point whose control directory @path refused us
 * (@err, EACCES or EPERM): named with its owner when it is a foliofs mount
 * without allow_other, which FUSE keeps to its owner, root included.
 */
static void say_refused_mount(const char *path, int err)
{
	unsigned long uid;
	bool allow_other;

	if (foliofs_mount_owner(path, &uid, &allow_other) && !allow_other)
		say("%s: %s: a foliofs mount of uid %lu without allow_other, which only uid %lu"
		    " may use (root included; its daemon's -o allow_other lets others in)",
		    path, strerror(err), uid, uid);
	else
		say("%s: %s", path, strerror(err));
}

/*
 * The mount point: the first argument when it is a directory (which must
 * then be a foliofs mount), or one that cannot be an argument of @c; else
 * the one foliofs mount there is.  *@argc and *@argv move past it.
 */
static char *resolve_mount(size_t c, int *argc, char ***argv)
{
	const char *first = *argc ? (*argv)[0] : NULL;
	struct stat st;
	bool is_mnt;
	int err;

	if (!first)
		return discover_mount(commands[c].name);
	is_mnt = commands[c].takes == TAKES_NOTHING ||
		 (commands[c].takes == TAKES_NAMES && strchr(first, '/') && !strchr(first, '=')) ||
		 (!stat(first, &st) && S_ISDIR(st.st_mode));
	if (!is_mnt)
		return discover_mount(commands[c].name);
	err = foliofs_mount_check(first);
	if (err == EACCES || err == EPERM) {
		say_refused_mount(first, err);
		exit(1);
	}
	if (err) {
		char *p = ctl_path(first, "stats");

		say("%s: not a foliofs mount (no %s)", first, p);
		free(p);
		exit(EXIT_USAGE);
	}
	(*argc)--;
	(*argv)++;
	return strdup(first);
}

/* Parse the options wherever they are; the rest stays in order in argv. */
static int parse_options(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "openmetrics", no_argument, NULL, 'O' },
		{ "prometheus", no_argument, NULL, 'P' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":i:c:jVh", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			opt.interval = parse_positive("-i", optarg, false);
			opt.have_interval = true;
			break;
		case 'c':
			opt.count = (unsigned long long)parse_positive("-c", optarg, true);
			opt.have_count = true;
			break;
		case 'j':
			opt.json = true;
			break;
		case 'O':
			opt.openmetrics = true;
			break;
		case 'P':
			opt.prometheus = true;
			break;
		case 'V':
			printf("%s %s\n", progname, FOLIOFS_VERSION);
			exit(0);
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			say("%s: needs a value (see %s -h)", argv[optind - 1], progname);
			return -1;
		default:
			say("%s: unknown option (see %s -h)", argv[optind - 1], progname);
			return -1;
		}
	}
	return optind;
}

int main(int argc, char **argv)
{
	int first = parse_options(argc, argv), ret;
	char *mnt;
	size_t c;

	if (first < 0)
		return EXIT_USAGE;
	if (first >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	for (c = 0; c < NR_COMMANDS && strcmp(argv[first], commands[c].name) != 0; c++)
		;
	if (c == NR_COMMANDS) {
		say("%s: unknown command (see %s -h)", argv[first], progname);
		return EXIT_USAGE;
	}
	if ((opt.have_interval || opt.have_count) && commands[c].fn != cmd_stat) {
		say("%s: -i and -c are options of stat", commands[c].name);
		return EXIT_USAGE;
	}
	if (opt.json + opt.openmetrics + opt.prometheus > 1) {
		say("%s: one of --json, --openmetrics and --prometheus", commands[c].name);
		return EXIT_USAGE;
	}
	if ((opt.json && !commands[c].json) ||
	    ((opt.openmetrics || opt.prometheus) && commands[c].fn != cmd_stat)) {
		say("%s: %s does not apply (--json: stat, get, files, folios; --openmetrics,"
		    " --prometheus: stat)", commands[c].name,
		    opt.json ? "--json" : opt.openmetrics ? "--openmetrics" : "--prometheus");
		return EXIT_USAGE;
	}
	argc -= first + 1;
	argv += first + 1;
	mnt = resolve_mount(c, &argc, &argv);
	if (!mnt) {
		say("out of memory");
		return 1;
	}
	ret = commands[c].fn(mnt, argc, argv);
	free(mnt);
	return ret;
}
