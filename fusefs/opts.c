// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * opts.c - command line of foliofs: BACKING, MOUNTPOINT and -o options.
 *
 * Every foliofs option is validated here, before anything is mounted, and
 * a bad value is reported in one line that names the option and the value.
 * Options that belong to libfuse (allow_other, fsname, max_threads, ...)
 * are kept in ffs_config.args and checked by libfuse itself, except the
 * thread counts, whose bad values libfuse ignores and mounts anyway, so
 * they are checked here first; fusefs/main.c routes libfuse's messages
 * through the same "foliofs: " prefix.
 *
 * Policies: load=PATH loads a policy library when it is met (so that
 * --help after it lists its policies); dirty_account=, folio_policy= and
 * the parameters account.NAME=V, size.NAME=V and throttle.NAME=V are
 * resolved after every
 * option was read, so their order does not matter: a parameter belongs
 * to the policy finally chosen, and a later value of one wins.
 */
#include "fusefs.h"
#include "throttle.h"	/* the throttle policies, for their parameters and --help */

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
	KEY_HELP,
	KEY_VERSION,
	KEY_ALLOW_OTHER,
	KEY_KERNEL_CACHE,
	KEY_CACHE,
	KEY_ATTR_TIMEOUT,
	KEY_BLOCK_SIZE,
	KEY_FOLIO_SIZE,
	KEY_CACHE_SIZE,
	KEY_FOLIO_POLICY,
	KEY_READAHEAD_KB,
	KEY_RA_MODEL,
	KEY_DIRTY_ACCOUNT,
	KEY_FLUSHERS,
	KEY_BG_RATIO,
	KEY_BG_BYTES,
	KEY_EXPIRE_MS,
	KEY_INTERVAL_MS,
	KEY_BACKING_IO,
	KEY_WB_GRANULARITY,
	KEY_MAX_IO,
	KEY_FAULT,
	KEY_BACKING_DIRECT,
	KEY_BACKING_DIRECT_MODE,
	KEY_URING,
	KEY_URING_PIN,
	KEY_DIRTY_RATIO,
	KEY_DIRTY_BYTES,
	KEY_PINNED_RATIO,
	KEY_PINNED_BYTES,
	KEY_THROTTLE,
	KEY_STATS_LOG,
	KEY_TRACE,
	KEY_WRITE_LOG,
	KEY_STATS_INTERVAL,
	KEY_MAX_THREADS,
	KEY_MAX_IDLE_THREADS,
	KEY_MAX_BACKGROUND,
	KEY_MAX_INODES,
	KEY_FSNAME,
	KEY_LOAD,
};

/*
 * libfuse's own bound on worker threads (FUSE_LOOP_MT_MAX_THREADS in
 * fuse_loop_mt.c, not exported): it ignores a larger value with a message
 * and mounts anyway, so such values are refused here first.
 */
#define FFS_MAX_THREADS 100000

#define FFS_STR_(x) #x
#define FFS_STR(x) FFS_STR_(x)

static const struct fuse_opt ffs_opt_spec[] = {
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("allow_other", KEY_ALLOW_OTHER),
	FUSE_OPT_KEY("kernel_cache", KEY_KERNEL_CACHE),
	FUSE_OPT_KEY("cache=", KEY_CACHE),
	FUSE_OPT_KEY("attr_timeout=", KEY_ATTR_TIMEOUT),
	FUSE_OPT_KEY("block_size=", KEY_BLOCK_SIZE),
	FUSE_OPT_KEY("folio_size=", KEY_FOLIO_SIZE),
	FUSE_OPT_KEY("cache_size=", KEY_CACHE_SIZE),
	FUSE_OPT_KEY("folio_policy=", KEY_FOLIO_POLICY),
	FUSE_OPT_KEY("readahead_kb=", KEY_READAHEAD_KB),
	FUSE_OPT_KEY("ra_model=", KEY_RA_MODEL),
	FUSE_OPT_KEY("dirty_account=", KEY_DIRTY_ACCOUNT),
	FUSE_OPT_KEY("flushers=", KEY_FLUSHERS),
	FUSE_OPT_KEY("dirty_background_ratio=", KEY_BG_RATIO),
	FUSE_OPT_KEY("dirty_background_bytes=", KEY_BG_BYTES),
	FUSE_OPT_KEY("dirty_expire_ms=", KEY_EXPIRE_MS),
	FUSE_OPT_KEY("writeback_interval_ms=", KEY_INTERVAL_MS),
	FUSE_OPT_KEY("backing_io=", KEY_BACKING_IO),
	FUSE_OPT_KEY("wb_granularity=", KEY_WB_GRANULARITY),
	FUSE_OPT_KEY("max_io=", KEY_MAX_IO),
	FUSE_OPT_KEY("fault=", KEY_FAULT),
	FUSE_OPT_KEY("backing_direct", KEY_BACKING_DIRECT),
	FUSE_OPT_KEY("backing_direct=", KEY_BACKING_DIRECT_MODE),
	FUSE_OPT_KEY("uring=", KEY_URING),
	FUSE_OPT_KEY("uring_pin=", KEY_URING_PIN),
	FUSE_OPT_KEY("dirty_ratio=", KEY_DIRTY_RATIO),
	FUSE_OPT_KEY("dirty_bytes=", KEY_DIRTY_BYTES),
	FUSE_OPT_KEY("dirty_pinned_ratio=", KEY_PINNED_RATIO),
	FUSE_OPT_KEY("dirty_pinned_bytes=", KEY_PINNED_BYTES),
	FUSE_OPT_KEY("throttle=", KEY_THROTTLE),
	FUSE_OPT_KEY("stats_log=", KEY_STATS_LOG),
	FUSE_OPT_KEY("trace=", KEY_TRACE),
	FUSE_OPT_KEY("write_log=", KEY_WRITE_LOG),
	FUSE_OPT_KEY("stats_interval_ms=", KEY_STATS_INTERVAL),
	FUSE_OPT_KEY("max_threads=", KEY_MAX_THREADS),
	FUSE_OPT_KEY("max_idle_threads=", KEY_MAX_IDLE_THREADS),
	FUSE_OPT_KEY("max_background=", KEY_MAX_BACKGROUND),
	FUSE_OPT_KEY("max_inodes=", KEY_MAX_INODES),
	FUSE_OPT_KEY("fsname=", KEY_FSNAME),
	FUSE_OPT_KEY("load=", KEY_LOAD),
	FUSE_OPT_END
};

/* What --help prints, one entry per foliofs option. */
static const struct {
	const char *name;
	const char *deflt;
	const char *help;
} ffs_opt_help[] = {
	{ "cache=MODE", "direct",
	  "direct (direct I/O: the daemon's cache is the only cache), writethrough (the kernel keeps clean pages for reads, every write reaches the daemon), writeback (the FUSE writeback cache)" },
	{ "kernel_cache", "off", "the same as cache=writeback" },
	{ "attr_timeout=SECS", "86400",
	  "how long the kernel may cache names and attributes (0 .. 86400)" },
	{ "allow_other", "off",
	  "let other users use the mount; as root, each request then runs with the caller's credentials (implies default_permissions)" },
	{ "block_size=BYTES", "4K",
	  "filesystem block: the unit of uptodate and dirty state (512 .. 64K, power of two)" },
	{ "folio_size=BYTES", "2M", "largest folio (4K .. 2M, power of two, >= block_size)" },
	{ "folio_policy=NAME", "fixed", "folio sizing policy (see below)" },
	{ "readahead_kb=N", "2048", "largest readahead window in KiB, like read_ahead_kb (0: no readahead)" },
	{ "ra_model=VERSION", "6.17", "whose readahead to follow: 6.16, or 6.17 (6.17 and later: folio order kept per open file)" },
	{ "cache_size=BYTES", "1/8 of RAM", "memory for cached file data (at least 4 folios)" },
	{ "dirty_account=NAME", "page", "dirty accounting policy (see below)" },
	{ "load=PATH", "none", "load the policies of a library built against foliofs/policy.h (repeatable; see foliofs(8)); their parameters, like the built-in ones', are listed below and set with -o account.PARAM=N, size.PARAM=N or throttle.PARAM=N" },
	{ "flushers=N", "2", "background writeback threads (0 .. 64; 0: writeback only at fsync, reclaim, unmount)" },
	{ "dirty_background_ratio=N", "10", "% of cache_size charged dirty that starts background writeback" },
	{ "dirty_background_bytes=BYTES", "0", "the same in bytes; overrides the ratio when not 0" },
	{ "dirty_ratio=N", "20", "% of cache_size charged dirty at which writers are throttled (1 .. 100)" },
	{ "dirty_bytes=BYTES", "0", "the same in bytes (0, or at least 8K); overrides the ratio when not 0" },
	{ "dirty_pinned_ratio=N", "0", "% of cache_size that folios holding dirty data may pin before writers are throttled (0: no limit)" },
	{ "dirty_pinned_bytes=BYTES", "0", "the same in bytes; overrides the ratio when not 0" },
	{ "throttle=NAME", "bdp", "dirty throttling policy: bdp (balance_dirty_pages), strictlimit (as Linux treats FUSE), none" },
	{ "dirty_expire_ms=N", "30000", "dirty data older than this is written back" },
	{ "writeback_interval_ms=N", "5000", "how often the flushers look (0: only when woken)" },
	{ "backing_io=NAME", "uring", "uring (batched io_uring, falls back to psync), psync (pwritev), null (discard writes, read zeros: measures FUSE and cache cost)" },
	{ "wb_granularity=NAME", "block", "block (write only dirty blocks) or folio (every uptodate block of a dirty folio, as Linux before 6.6)" },
	{ "max_io=BYTES", "1M", "largest merged backing write (power of two, >= 4K)" },
	{ "backing_direct=auto|on|off", "auto", "open backing files with O_DIRECT (block-aligned I/O from the cache's memory, no second copy in the backing page cache); auto: where BACKING's file system takes O_DIRECT at block_size; the bare flag is on" },
	{ "uring=auto|on|off", "auto", "serve FUSE requests through io_uring when the kernel offers it (Linux 6.14+, fuse module parameter enable_uring=Y); on: refuse to mount without it; off: always /dev/fuse" },
	{ "uring_pin=on|off", "on", "run each io_uring queue's threads on the CPU the kernel sends that queue's requests from (when the daemon may run on it)" },
	{ "fault=SPEC", "off", "inject backing I/O faults, for tests (see foliofs(8))" },
	{ "stats_log=FILE", "off", "append the stats as one JSON object per line every stats_interval_ms" },
	{ "stats_interval_ms=N", "1000", "stats_log period (10 .. 3600000)" },
	{ "trace=FILE", "off", "record every data and namespace operation into FILE for foliofs-sim" },
	{ "write_log=FILE", "off", "record every change to BACKING, with its data, into FILE for foliofs-crashimg" },
	{ "max_threads=N", "10", "most FUSE worker threads (libfuse; 1 .. 100000)" },
	{ "max_background=N", FFS_STR(FFS_MAX_BACKGROUND_DEFAULT),
	  "most asynchronous requests the kernel keeps in flight: its readahead (writethrough, writeback), its writeback (writeback) and asynchronous direct I/O (1 .. 65535; the kernel holds an unprivileged mount to fuse's max_user_bgreq)" },
	{ "max_inodes=N", FFS_STR(FFS_MAX_INODES_DEFAULT),
	  "inodes the daemon keeps for the kernel before it asks the kernel to forget cold ones (1024 .. 2^30; about 300 bytes each)" },
};

struct parse_state {
	struct ffs_config *cfg;
	char *err;
	int nonopts;
	bool fsname_given;	/* the user's fsname= replaces BACKING as the mount's source */
	char *policy[2];	/* dirty_account=, folio_policy= as given (owned), or NULL */
	char **params;		/* account.NAME=V and size.NAME=V in order (owned) */
	size_t nr_params;
};

static int set_err(char *err, const char *fmt, const char *name,
		   const char *val, const char *why)
{
	snprintf(err, FFS_ERRLEN, fmt, name, val, why);
	return -EINVAL;
}

int ffs_parse_double(const char *name, const char *val, double min,
		     double max, double *out, char *err)
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
		return set_err(err, "%s=%s: %s", name, val, "not a number");
	errno = 0;
	d = strtod(val, &end);
	if (end == val || *end || errno || !isfinite(d))
		return set_err(err, "%s=%s: %s", name, val, "not a number");
	/* A '-' is out of a range that starts at 0, even on -0. */
	if (d < min || d > max || (sign && min >= 0)) {
		snprintf(err, FFS_ERRLEN, "%s=%s: out of range [%g, %g]",
			 name, val, min, max);
		return -EINVAL;
	}
	*out = d;
	return 0;
}

static int check_mountpoint(const char *path, char *err)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		snprintf(err, FFS_ERRLEN, "MOUNTPOINT %s: %s", path, strerror(errno));
		return -EINVAL;
	}
	/* A regular file only for a file or device BACKING (main.c checks). */
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
		snprintf(err, FFS_ERRLEN, "MOUNTPOINT %s: not a directory or regular file", path);
		return -EINVAL;
	}
	return 0;
}

/* A power of two in [min, max] for a size option. */
static int parse_pow2(const char *name, const char *val, uint64_t min,
		      uint64_t max, uint32_t *out, char *err)
{
	uint64_t v;

	if (wb_parse_size(name, val, min, max, &v, err, FFS_ERRLEN))
		return -EINVAL;
	if (v & (v - 1)) {
		snprintf(err, FFS_ERRLEN, "%s=%s: not a power of two", name, val);
		return -EINVAL;
	}
	*out = (uint32_t)v;
	return 0;
}

static int parse_policy(const char *name, const char *val, bool account,
			struct bs_config *bs, char *err)
{
	size_t len = 0;
	char names[128] = "";

	if (account && (bs->account = bs_account_policy_find(val)))
		return 0;
	if (!account && (bs->size = bs_size_policy_find(val)))
		return 0;
	for (size_t i = 0;; i++) {
		const char *n = account ? (bs_account_policy_at(i) ? bs_account_policy_at(i)->name : NULL)
					: (bs_size_policy_at(i) ? bs_size_policy_at(i)->name : NULL);
		if (!n)
			break;
		len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s",
					i ? ", " : "", n);
		if (len >= sizeof(names))
			break;
	}
	snprintf(err, FFS_ERRLEN, "%s=%s: unknown policy (known: %s)", name, val, names);
	return -EINVAL;
}

/* Keep "account.NAME=V" or "size.NAME=V" for resolve_params(). */
static int keep_param(struct parse_state *ps, const char *arg)
{
	char **more = realloc(ps->params, (ps->nr_params + 1) * sizeof(*more));

	if (!more)
		return -ENOMEM;
	ps->params = more;
	ps->params[ps->nr_params] = strdup(arg);
	return ps->params[ps->nr_params] ? (int)(ps->nr_params++, 0) : -ENOMEM;
}

/* Where a kept parameter option goes: the policy it belongs to and its values. */
struct param_dest {
	const char *kind;		/* "account", "size", "throttle" */
	const char *policy;		/* its name */
	const struct bs_param *params;
	unsigned int nr;
	int64_t *values;
	uint32_t *set;
};

static bool param_dest(const char *arg, struct ffs_config *cfg, struct param_dest *d)
{
	const struct wb_throttle_policy *t;

	if (!strncmp(arg, "account.", 8)) {
		*d = (struct param_dest){ "account", cfg->bs.account->name, cfg->bs.account->params,
					  cfg->bs.account->nr_params, cfg->bs.account_params,
					  &cfg->bs.account_set };
	} else if (!strncmp(arg, "size.", 5)) {
		*d = (struct param_dest){ "size", cfg->bs.size->name, cfg->bs.size->params,
					  cfg->bs.size->nr_params, cfg->bs.size_params,
					  &cfg->bs.size_set };
	} else {
		/* An unknown throttle= is wb_config_check()'s to report. */
		t = wb_throttle_policy_find(cfg->wb.throttle ? cfg->wb.throttle : "bdp");
		if (!t)
			return false;
		*d = (struct param_dest){ "throttle", t->name, t->params, t->nr_params,
					  cfg->wb.throttle_params, &cfg->wb.throttle_set };
	}
	return true;
}

/* One kept parameter option into @cfg, checked against the policy chosen. */
static int resolve_param(const char *arg, struct ffs_config *cfg, char *err)
{
	const char *name = strchr(arg, '.') + 1, *eq = strchr(arg, '=');
	char pname[BS_NAME_MAX + 2];
	struct param_dest d;
	int i;

	if (!param_dest(arg, cfg, &d))
		return 0;
	if (!eq || (size_t)(eq - name) > BS_NAME_MAX) {
		snprintf(err, FFS_ERRLEN, "%s: not %s.NAME=VALUE with a parameter NAME", arg, d.kind);
		return -EINVAL;
	}
	memcpy(pname, name, (size_t)(eq - name));
	pname[eq - name] = '\0';
	i = bs_param_index(d.params, d.nr, pname);
	if (i < 0) {
		bs_param_unknown(d.kind, d.policy, d.params, d.nr, pname, err, FFS_ERRLEN);
		return -EINVAL;
	}
	if (bs_param_parse(d.kind, &d.params[i], eq + 1, &d.values[i], err, FFS_ERRLEN))
		return -EINVAL;
	*d.set |= 1u << i;
	return 0;
}

/* The policies named and their parameters, once every load= is done. */
static int resolve_policies(struct parse_state *ps)
{
	struct bs_config *bs = &ps->cfg->bs;

	if (ps->policy[0] && parse_policy("dirty_account", ps->policy[0], true, bs, ps->err))
		return -EINVAL;
	if (ps->policy[1] && parse_policy("folio_policy", ps->policy[1], false, bs, ps->err))
		return -EINVAL;
	for (size_t i = 0; i < ps->nr_params; i++) {
		if (resolve_param(ps->params[i], ps->cfg, ps->err))
			return -EINVAL;
	}
	return 0;
}

static void parse_state_free(struct parse_state *ps)
{
	free(ps->policy[0]);
	free(ps->policy[1]);
	for (size_t i = 0; i < ps->nr_params; i++)
		free(ps->params[i]);
	free(ps->params);
}

static int parse_u32(const char *name, const char *val, uint64_t min, uint64_t max,
		     unsigned int *out, char *err)
{
	uint64_t v;

	if (wb_parse_uint(name, val, min, max, &v, err, FFS_ERRLEN))
		return -EINVAL;
	*out = (unsigned int)v;
	return 0;
}

static int parse_choice(const char *name, const char *val, const char *const *names,
			size_t n, unsigned int *out, char *err)
{
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(val, names[i])) {
			*out = (unsigned int)i;
			return 0;
		}
	}
	snprintf(err, FFS_ERRLEN, "%s=%s: unknown value (known: %s%s%s%s%s)", name, val,
		 names[0], n > 1 ? ", " : "", n > 1 ? names[1] : "", n > 2 ? ", " : "",
		 n > 2 ? names[2] : "");
	return -EINVAL;
}

/* Replace the owned string *@dst with a copy of @val. */
static int set_string(char **dst, const char *val)
{
	char *copy = strdup(val);

	if (!copy)
		return -ENOMEM;
	free(*dst);
	*dst = copy;
	return 0;
}

/*
 * A file option (stats_log=, trace=) made absolute against the current
 * directory: the daemon changes to / when it goes to the background, long
 * before the file opens.
 */
static int parse_path(const char *name, const char *val, char **dst, char *err)
{
	char *cwd, *path;
	int ret;

	if (!*val)
		return set_err(err, "%s=%s: %s", name, val, "empty file name");
	if (val[0] == '/')
		return set_string(dst, val);
	cwd = getcwd(NULL, 0);
	if (!cwd)
		return set_err(err, "%s=%s: %s", name, val, strerror(errno));
	ret = asprintf(&path, "%s/%s", cwd, val);
	free(cwd);
	if (ret < 0)
		return -ENOMEM;
	free(*dst);
	*dst = path;
	return 0;
}

/* The throttling options and the stats log. */
static int parse_throttle_opt(struct ffs_config *cfg, int key, const char *val, char *err)
{
	struct wb_config *wb = &cfg->wb;
	uint64_t v;

	switch (key) {
	case KEY_DIRTY_RATIO:
		return parse_u32("dirty_ratio", val, 1, 100, &wb->dirty_ratio, err);
	case KEY_DIRTY_BYTES:
		if (wb_parse_size("dirty_bytes", val, 0, UINT64_MAX / 2, &v, err, FFS_ERRLEN))
			return -EINVAL;
		/* As /proc/sys/vm/dirty_bytes: at least two pages. */
		if (v && v < 8192)
			return set_err(err, "%s=%s: %s", "dirty_bytes", val,
				       "at least 8K (or 0: use dirty_ratio)");
		wb->dirty_bytes = v;
		return 0;
	case KEY_PINNED_RATIO:
		return parse_u32("dirty_pinned_ratio", val, 0, 100, &wb->dirty_pinned_ratio, err);
	case KEY_PINNED_BYTES:
		return wb_parse_size("dirty_pinned_bytes", val, 0, UINT64_MAX / 2,
				     &wb->dirty_pinned_bytes, err, FFS_ERRLEN);
	case KEY_THROTTLE:
		if (!*val)
			return set_err(err, "%s=%s: %s", "throttle", val, "empty policy name");
		if (set_string(&cfg->throttle, val))
			return -ENOMEM;
		wb->throttle = cfg->throttle;
		return 0;
	case KEY_STATS_LOG:
		if (parse_path("stats_log", val, &cfg->stats_log, err))
			return -EINVAL;
		wb->stats_log = cfg->stats_log;
		return 0;
	case KEY_TRACE:
		return parse_path("trace", val, &cfg->trace, err) ? -EINVAL : 0;
	case KEY_WRITE_LOG:
		return parse_path("write_log", val, &cfg->write_log, err) ? -EINVAL : 0;
	case KEY_STATS_INTERVAL:
		if (wb_parse_uint("stats_interval_ms", val, 10, 3600000, &v, err, FFS_ERRLEN))
			return -EINVAL;
		wb->stats_interval_ms = (uint32_t)v;
		return 0;
	default:
		return -EINVAL;
	}
}

static int parse_wb_opt(struct ffs_config *cfg, int key, const char *val, char *err)
{
	static const char *const ios[] = { "uring", "psync", "null" };
	static const char *const grans[] = { "block", "folio" };
	struct wb_config *wb = &cfg->wb;
	unsigned int choice;

	switch (key) {
	case KEY_FLUSHERS:
		return parse_u32("flushers", val, 0, 64, &wb->flushers, err);
	case KEY_BG_RATIO:
		return parse_u32("dirty_background_ratio", val, 0, 100,
				 &wb->dirty_background_ratio, err);
	case KEY_BG_BYTES:
		return wb_parse_size("dirty_background_bytes", val, 0, UINT64_MAX / 2,
				     &wb->dirty_background_bytes, err, FFS_ERRLEN);
	case KEY_EXPIRE_MS:
		return parse_u32("dirty_expire_ms", val, 0, 86400000, &wb->dirty_expire_ms, err);
	case KEY_INTERVAL_MS:
		return parse_u32("writeback_interval_ms", val, 0, 86400000,
				 &wb->writeback_interval_ms, err);
	case KEY_BACKING_IO:
		if (parse_choice("backing_io", val, ios, 3, &choice, err))
			return -EINVAL;
		wb->backing_io = (enum wb_backing_io)choice;
		return 0;
	case KEY_WB_GRANULARITY:
		if (parse_choice("wb_granularity", val, grans, 2, &choice, err))
			return -EINVAL;
		wb->whole_folio = choice == 1;
		return 0;
	case KEY_MAX_IO:
		return parse_pow2("max_io", val, 4096, 64u << 20, &wb->max_io, err);
	case KEY_FAULT:
		if (!*val)
			return set_err(err, "%s=%s: %s", "fault", val, "empty spec (off: no fault)");
		if (set_string(&cfg->fault, val))
			return -ENOMEM;
		wb->fault = cfg->fault;
		return 0;
	default:
		return -EINVAL;
	}
}

static int parse_cache(struct ffs_config *cfg, const char *val, char *err)
{
	/* In the order of enum ffs_cache_mode. */
	static const char *const modes[] = { "direct", "writethrough", "writeback" };
	unsigned int choice;

	if (parse_choice("cache", val, modes, 3, &choice, err))
		return -EINVAL;
	cfg->cache = (enum ffs_cache_mode)choice;
	return 0;
}

/* auto, on or off, in the order of enum ffs_uring_mode and enum ffs_direct_mode. */
static int parse_auto_on_off(const char *name, const char *val, unsigned int *out, char *err)
{
	static const char *const modes[] = { "auto", "on", "off" };

	return parse_choice(name, val, modes, 3, out, err);
}

/* on or off: *@out true for on. */
static int parse_on_off(const char *name, const char *val, bool *out, char *err)
{
	static const char *const modes[] = { "on", "off" };
	unsigned int choice;

	if (parse_choice(name, val, modes, 2, &choice, err))
		return -1;
	*out = choice == 0;
	return 0;
}

/*
 * uring=on is refused before mounting where it cannot be had: with -s (the
 * ring serves from threads of its own), or when the kernel has no FUSE
 * over io_uring or has it turned off.
 */
static int check_uring_on(const struct ffs_config *cfg, char *err)
{
	static const char param[] = "/sys/module/fuse/parameters/enable_uring";
	char val = 0;
	FILE *f;

	if (cfg->uring != FFS_URING_ON)
		return 0;
	if (cfg->singlethread) {
		snprintf(err, FFS_ERRLEN, "uring=on: not with -s (the ring has threads of its own)");
		return -EINVAL;
	}
	f = fopen(param, "re");
	if (!f) {
		snprintf(err, FFS_ERRLEN, "uring=on: %s: %s (FUSE over io_uring needs Linux 6.14+ "
			 "with CONFIG_FUSE_IO_URING)", param, strerror(errno));
		return -EINVAL;
	}
	if (fread(&val, 1, 1, f) != 1)
		val = 0;
	fclose(f);
	if (val != 'Y') {
		snprintf(err, FFS_ERRLEN, "uring=on: %s is not Y (as root: echo Y > %s)",
			 param, param);
		return -EINVAL;
	}
	return 0;
}

static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct parse_state *ps = data;
	struct ffs_config *cfg = ps->cfg;
	unsigned int choice;
	uint64_t u64;
	(void)outargs;

	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (++ps->nonopts == 1) {
			cfg->backing = strdup(arg);
			return cfg->backing ? 0 : -1;
		}
		if (ps->nonopts == 2)	/* MOUNTPOINT, for fuse_parse_cmdline */
			return check_mountpoint(arg, ps->err) ? -1 : 1;
		set_err(ps->err, "%s%s: %s", "", arg,
			"unexpected argument (usage: foliofs [options] BACKING MOUNTPOINT)");
		return -1;
	case KEY_HELP:
		cfg->show_help = true;
		return 0;
	case KEY_VERSION:
		cfg->show_version = true;
		return 0;
	case KEY_ALLOW_OTHER:
		cfg->allow_other = true;
		return 1;
	case KEY_KERNEL_CACHE:
		cfg->cache = FFS_CACHE_WRITEBACK;
		return 0;
	case KEY_CACHE:
		return parse_cache(cfg, strchr(arg, '=') + 1, ps->err) ? -1 : 0;
	case KEY_BACKING_DIRECT:
		cfg->backing_direct = FFS_DIRECT_ON;
		return 0;
	case KEY_BACKING_DIRECT_MODE:
		if (parse_auto_on_off("backing_direct", strchr(arg, '=') + 1, &choice, ps->err))
			return -1;
		cfg->backing_direct = (enum ffs_direct_mode)choice;
		return 0;
	case KEY_URING:
		cfg->uring_given = true;
		if (parse_auto_on_off("uring", strchr(arg, '=') + 1, &choice, ps->err))
			return -1;
		cfg->uring = (enum ffs_uring_mode)choice;
		return 0;
	case KEY_URING_PIN:
		return parse_on_off("uring_pin", strchr(arg, '=') + 1, &cfg->uring_pin, ps->err) ? -1 : 0;
	case KEY_ATTR_TIMEOUT:
		return ffs_parse_double("attr_timeout", strchr(arg, '=') + 1,
					0, 86400, &cfg->attr_timeout,
					ps->err) ? -1 : 0;
	case KEY_BLOCK_SIZE:
		return parse_pow2("block_size", strchr(arg, '=') + 1, BS_MIN_BLOCK_SIZE,
				  BS_MAX_BLOCK_SIZE, &cfg->bs.block_size, ps->err) ? -1 : 0;
	case KEY_FOLIO_SIZE:
		return parse_pow2("folio_size", strchr(arg, '=') + 1, BS_MIN_FOLIO_SIZE,
				  BS_MAX_FOLIO_SIZE, &cfg->bs.folio_size, ps->err) ? -1 : 0;
	case KEY_CACHE_SIZE:
		/* More than the machine's memory would end in the OOM killer, with dirty data. */
		return wb_parse_size("cache_size", strchr(arg, '=') + 1, 1,
				     ffs_phys_mem(), &cfg->bs.cache_size, ps->err, FFS_ERRLEN) ? -1 : 0;
	case KEY_FOLIO_POLICY:
		return set_string(&ps->policy[1], strchr(arg, '=') + 1) ? -1 : 0;
	case KEY_READAHEAD_KB:
		return parse_u32("readahead_kb", strchr(arg, '=') + 1, 0, BS_READAHEAD_KB_MAX,
				 &cfg->bs.readahead_kb, ps->err) ? -1 : 0;
	case KEY_RA_MODEL:
		if (bs_ra_model_parse(strchr(arg, '=') + 1, &cfg->bs.ra_model)) {
			set_err(ps->err, "%s=%s: %s", "ra_model", strchr(arg, '=') + 1,
				"not a readahead model (6.16, or 6.17 for 6.17 and later)");
			return -1;
		}
		return 0;
	case KEY_DIRTY_ACCOUNT:
		return set_string(&ps->policy[0], strchr(arg, '=') + 1) ? -1 : 0;
	case KEY_LOAD:
		/* The daemon runs as the mounting user: the library must be theirs or root's. */
		return wb_policy_load(strchr(arg, '=') + 1, getuid(), ps->err, FFS_ERRLEN) ? -1 : 0;
	case KEY_FLUSHERS: case KEY_BG_RATIO: case KEY_BG_BYTES: case KEY_EXPIRE_MS:
	case KEY_INTERVAL_MS: case KEY_BACKING_IO: case KEY_WB_GRANULARITY:
	case KEY_MAX_IO: case KEY_FAULT:
		return parse_wb_opt(cfg, key, strchr(arg, '=') + 1, ps->err) ? -1 : 0;
	case KEY_DIRTY_RATIO: case KEY_DIRTY_BYTES: case KEY_PINNED_RATIO:
	case KEY_PINNED_BYTES: case KEY_THROTTLE: case KEY_STATS_LOG: case KEY_TRACE:
	case KEY_WRITE_LOG: case KEY_STATS_INTERVAL:
		return parse_throttle_opt(cfg, key, strchr(arg, '=') + 1, ps->err) ? -1 : 0;
	/* libfuse's options, checked here and kept for fuse_parse_cmdline(). */
	case KEY_MAX_THREADS:
		return parse_u32("max_threads", strchr(arg, '=') + 1, 1, FFS_MAX_THREADS,
				 &cfg->max_threads, ps->err) ? -1 : 1;
	case KEY_MAX_IDLE_THREADS:
		return parse_u32("max_idle_threads", strchr(arg, '=') + 1, 0, FFS_MAX_THREADS,
				 &cfg->max_idle_threads, ps->err) ? -1 : 1;
	case KEY_MAX_BACKGROUND:
		return parse_u32("max_background", strchr(arg, '=') + 1, 1,
				 FFS_MAX_BACKGROUND, &cfg->max_background, ps->err) ? -1 : 0;
	case KEY_MAX_INODES:
		if (wb_parse_uint("max_inodes", strchr(arg, '=') + 1, FFS_MAX_INODES_MIN,
				  FFS_MAX_INODES_MAX, &u64, ps->err, FFS_ERRLEN))
			return -1;
		cfg->max_inodes = (size_t)u64;
		return 0;
	case KEY_FSNAME:
		ps->fsname_given = true;
		return 1;
	case FUSE_OPT_KEY_OPT:
		if (!strncmp(arg, "account.", 8) || !strncmp(arg, "size.", 5) ||
		    !strncmp(arg, "throttle.", 9))
			return keep_param(ps, arg) ? -1 : 0;
		return 1;
	default:
		return 1;
	}
}

static int add_opt(struct fuse_args *args, const char *name,
		   const char *val)
{
	char *esc = NULL, *opt = NULL;
	int ret = -1;

	if (fuse_opt_add_opt_escaped(&esc, val) == 0 &&
	    asprintf(&opt, "-o%s%s", name, esc) >= 0) {
		ret = fuse_opt_add_arg(args, opt);
		free(opt);
	}
	free(esc);
	return ret;
}

/* The options foliofs always gives libfuse; BACKING is the source unless fsname= was given. */
static int add_fixed_opts(struct ffs_config *cfg, bool fsname_given)
{
	if (fuse_opt_add_arg(&cfg->args, "-osubtype=foliofs,default_permissions"))
		return -1;
	return fsname_given ? 0 : add_opt(&cfg->args, "fsname=", cfg->backing);
}

uint64_t ffs_phys_mem(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);

	return pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : UINT64_MAX / 2;
}

uint64_t ffs_cache_size_of(uint64_t mem)
{
	uint64_t eighth = mem / 8;

	return eighth > (64u << 20) ? eighth : 64u << 20;
}

uint64_t ffs_default_cache_size(void)
{
	return ffs_cache_size_of(ffs_phys_mem());
}

int ffs_parse_args(int argc, char **argv, struct ffs_config *cfg, char *err)
{
	struct parse_state ps = { .cfg = cfg, .err = err };
	struct fuse_cmdline_opts copts;
	int ret;

	memset(cfg, 0, sizeof(*cfg));
	cfg->attr_timeout = 86400;
	cfg->max_background = FFS_MAX_BACKGROUND_DEFAULT;
	cfg->max_inodes = FFS_MAX_INODES_DEFAULT;
	cfg->uring_pin = true;
	cfg->bs = (struct bs_config){
		.block_size = 4096,
		.folio_size = BS_MAX_FOLIO_SIZE,
		.cache_size = ffs_default_cache_size(),
		.account = bs_account_policy_at(0),
		.size = bs_size_policy_at(0),
		.readahead_kb = BS_READAHEAD_KB_DEFAULT,
	};
	wb_config_default(&cfg->wb);
	cfg->args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	err[0] = '\0';

	ret = fuse_opt_parse(&cfg->args, &ps, ffs_opt_spec, opt_proc);
	if (!ret && !cfg->show_help && !cfg->show_version)
		ret = resolve_policies(&ps);
	parse_state_free(&ps);
	if (ret) {
		if (!err[0])
			snprintf(err, FFS_ERRLEN, "cannot parse the command line");
		return -EINVAL;
	}
	if (cfg->show_help || cfg->show_version)
		return 0;
	if (bs_config_check(&cfg->bs, err, FFS_ERRLEN) ||
	    wb_config_check(&cfg->wb, err, FFS_ERRLEN))
		return -EINVAL;
	/*
	 * A byte limit wins over its ratio, whichever came first, and the
	 * ratio then reads 0 (as /proc/sys/vm shows after dirty_bytes is
	 * written).  After the check, which wants a dirty_ratio of at least 1.
	 */
	if (cfg->wb.dirty_bytes)
		cfg->wb.dirty_ratio = 0;
	if (cfg->wb.dirty_pinned_bytes)
		cfg->wb.dirty_pinned_ratio = 0;
	if (!cfg->backing) {
		snprintf(err, FFS_ERRLEN,
			 "missing BACKING and MOUNTPOINT (usage: foliofs [options] BACKING MOUNTPOINT)");
		return -EINVAL;
	}
	if (fuse_parse_cmdline(&cfg->args, &copts))
		return -EINVAL;	/* libfuse has said why */
	cfg->mountpoint = copts.mountpoint;
	cfg->foreground = copts.foreground;
	cfg->debug = copts.debug;
	cfg->singlethread = copts.singlethread;
	cfg->clone_fd = copts.clone_fd;
	cfg->max_threads = copts.max_threads;
	cfg->max_idle_threads = copts.max_idle_threads;
	if (check_uring_on(cfg, err))
		return -EINVAL;
	if (!cfg->mountpoint) {
		snprintf(err, FFS_ERRLEN,
			 "missing MOUNTPOINT (usage: foliofs [options] BACKING MOUNTPOINT)");
		return -EINVAL;
	}
	if (add_fixed_opts(cfg, ps.fsname_given)) {
		snprintf(err, FFS_ERRLEN, "out of memory");
		return -EINVAL;
	}
	return 0;
}

void ffs_config_free(struct ffs_config *cfg)
{
	free(cfg->backing);
	free(cfg->mountpoint);
	free(cfg->fault);
	free(cfg->stats_log);
	free(cfg->trace);
	free(cfg->write_log);
	free(cfg->throttle);
	fuse_opt_free_args(&cfg->args);
	memset(cfg, 0, sizeof(*cfg));
}

/* One policy of --help and its parameters. */
static void print_policy(const char *name, const char *help, const char *origin,
			 const char *kind, const struct bs_param *params, unsigned int nr)
{
	printf("    %-25s %s%s%s%s\n", name, help, origin ? " (loaded from " : "",
	       origin ? origin : "", origin ? ")" : "");
	for (unsigned int i = 0; i < nr; i++)
		printf("      %s.%s=N [%lld] %s (%lld .. %lld%s%s)\n", kind, params[i].name,
		       (long long)params[i].def, params[i].help, (long long)params[i].min,
		       (long long)params[i].max, params[i].unit && *params[i].unit ? " " : "",
		       params[i].unit ? params[i].unit : "");
}

void ffs_print_help(const char *progname)
{
	printf("usage: %s [options] BACKING MOUNTPOINT\n\n"
	       "Mount the directory BACKING at MOUNTPOINT through foliofs; or, when\n"
	       "BACKING is a regular file or a block device, mount it as one file over\n"
	       "the regular file MOUNTPOINT.\n\n"
	       "foliofs options (-o NAME[=VALUE], default in brackets):\n",
	       progname);
	for (size_t i = 0; i < sizeof(ffs_opt_help) / sizeof(ffs_opt_help[0]); i++)
		printf("    -o %-30s [%s] %s\n", ffs_opt_help[i].name,
		       ffs_opt_help[i].deflt, ffs_opt_help[i].help);
	printf("\nfolio sizing policies (folio_policy=; parameters: -o size.PARAM=N):\n");
	for (size_t i = 0; bs_size_policy_at(i); i++)
		print_policy(bs_size_policy_at(i)->name, bs_size_policy_at(i)->help,
			     bs_size_policy_origin(i), "size", bs_size_policy_at(i)->params,
			     bs_size_policy_at(i)->nr_params);
	printf("\ndirty accounting policies (dirty_account=; parameters: -o account.PARAM=N):\n");
	for (size_t i = 0; bs_account_policy_at(i); i++)
		print_policy(bs_account_policy_at(i)->name, bs_account_policy_at(i)->help,
			     bs_account_policy_origin(i), "account", bs_account_policy_at(i)->params,
			     bs_account_policy_at(i)->nr_params);
	printf("\nthrottle policies (throttle=; parameters: -o throttle.PARAM=N):\n");
	for (size_t i = 0; wb_throttle_policy_at(i); i++)
		print_policy(wb_throttle_policy_at(i)->name, wb_throttle_policy_at(i)->help,
			     wb_throttle_policy_origin(i),
			     "throttle", wb_throttle_policy_at(i)->params,
			     wb_throttle_policy_at(i)->nr_params);
	printf("\ngeneral options:\n"
	       "    -f                        stay in the foreground\n"
	       "    -d, -o debug              log every FUSE request (implies -f)\n"
	       "    -s                        single-threaded\n"
	       "    -h, --help                this text\n"
	       "    -V, --version             print the version\n"
	       "\nlibfuse mount options (-o fsname=, max_read=, ro, noatime, ...) are\n"
	       "passed to libfuse, which rejects the ones it does not know.\n");
}
