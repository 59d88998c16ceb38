/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * options.h - the option registry: every option of a mount, once (issue
 * 40).  The mount's command line (fusefs/opts.c), foliofs-sim's -o
 * (sim/opts.c) and the run-time tunables (tunables.c) are all made from
 * the rows of WB_OPTIONS below: name, type, range, default, help, whether
 * it is a tunable, and the field it sets.  Adding an option is one row
 * plus its use (doc/hacking.md).
 *
 * Why here, in writeback: the tunables are writeback's and must read the
 * same rows, so the registry can sit no higher; its rows set struct
 * bs_config and struct wb_config and it parses with writeback's number
 * parsers, policy lookups and policy loader, so it can sit no lower.
 * The FUSE front end's own options (cache=, uring=, ...) are rows too,
 * so that foliofs-sim knows every mount option without the FUSE layer,
 * but writeback only parses them: their fields are in struct ffs_config,
 * which only fusefs binds (WB_OPT_BIND_FRONT below).
 *
 * A row is X(WHERE, FIELD, designated initializers of struct wb_opt):
 * WHERE is BS (FIELD is a member of struct bs_config), WB (of struct
 * wb_config), FRONT (of the front end's own configuration: bound by the
 * mount, parsed and dropped by foliofs-sim) or NONE (an option with no
 * field of its own: an alias, load=).  A front end binds the rows to its
 * configuration, a struct with members `bs` and `wb`, with one X() of its
 * own (see fusefs/opts.c, sim/opts.c):
 *
 *   #define F(where, field, ...) WB_OPT_BIND_##where(struct T, field, WB_OPT_BIND_FRONT),
 *   static const struct wb_opt_layout layout = WB_OPT_LAYOUT(struct T, WB_OPTIONS(F));
 *
 * The rows are in --help's order, which is also the order of the
 * tunables (.foliofs/tunables/, foliofsctl get).
 */
#ifndef FOLIOFS_OPTIONS_H
#define FOLIOFS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "blockstate.h"	/* struct bs_config and its limits */
#include "writeback.h"	/* struct wb_config */

/* What a value looks like, and what the field it goes to holds. */
enum wb_opt_type {
	WB_OPT_UINT,	/* a decimal integer in [min, max] */
	WB_OPT_RATIO,	/* a whole percentage in [min, max] */
	WB_OPT_MS,	/* milliseconds in [min, max] */
	WB_OPT_SIZE,	/* bytes, K, M, G or T (wb_parse_size), in [min, max] */
	WB_OPT_POW2,	/* a size in [min, max] that is a power of two */
	WB_OPT_SECS,	/* seconds, a plain decimal fraction in [min, max] (double) */
	WB_OPT_CHOICE,	/* one of `choices` ("a|b|c"): its index (an enum, or a bool) */
	WB_OPT_ONOFF,	/* on or off (bool, true for on) */
	WB_OPT_FLAG,	/* no value: sets a bool */
	WB_OPT_ALIAS,	/* no value: the same as the option `choices` ("cache=writeback") */
	WB_OPT_PATH,	/* a file name, made absolute (owned char *) */
	WB_OPT_FAULT,	/* a fault spec (owned char *), checked once every option is read */
	WB_OPT_THROTTLE,	/* a throttle policy's name (owned char *), checked likewise */
	WB_OPT_ACCOUNT,	/* an accounting policy's name, found once every load= is done */
	WB_OPT_SIZING,	/* a folio sizing policy's name, likewise */
	WB_OPT_RA_MODEL,	/* a readahead model, bs_ra_model_parse() */
	WB_OPT_LOAD,	/* a policy library, loaded when the option is met */
};

enum wb_opt_where { WB_OPT_BS, WB_OPT_WB, WB_OPT_FRONT, WB_OPT_NONE };

/* Row flags. */
#define WB_OPT_TUNABLE	0x01u	/* also .foliofs/tunables/NAME at run time */
#define WB_OPT_LIBFUSE	0x02u	/* libfuse takes it too: the mount passes it on */
#define WB_OPT_NOSIM	0x04u	/* nothing to a replay: foliofs-sim refuses it */
#define WB_OPT_BARE	0x08u	/* NAME alone is NAME=on */
#define WB_OPT_ZERO	0x10u	/* as an option, 0 (off) is taken besides [min, max] */
#define WB_OPT_PHYS	0x20u	/* max: this machine's memory; default an eighth of it */
/* A tunable whose `pair` is zeroed only by a value other than 0 (else by any). */
#define WB_OPT_PAIR_NONZERO 0x40u

struct wb_opt {
	const char *name;
	enum wb_opt_type type;
	enum wb_opt_where where;
	const char *metavar;	/* --help's "name=METAVAR"; NULL for FLAG and ALIAS */
	/*
	 * The default as --help shows it.  It is applied through the row's
	 * own parser for numbers, choices, policies and ra_model (so what
	 * --help says is what is set); for files, faults, the throttle
	 * policy and load= it names what "not given" means.
	 */
	const char *def;
	uint64_t min, max;	/* numbers; for SECS in whole seconds */
	const char *choices;	/* CHOICE: "a|b|c" in the field's order; ALIAS: its option */
	/* A tunable ratio's byte count and the other way round: set one, zero the other. */
	const char *pair;
	unsigned int flags;
	const char *help;	/* --help's line (the man page and doc/admin.md say more) */
};

/*
 * Every option.  The help lines are --help's; doc/man/foliofs.8.scd and
 * doc/admin.md must name every row (tests/unit/test_options.c).
 */
#define WB_OPTIONS(X)								\
X(FRONT, cache, .name = "cache", .type = WB_OPT_CHOICE, .metavar = "MODE",	\
  .def = "direct", .choices = "direct|writethrough|writeback",			\
  .help = "direct (direct I/O: the daemon's cache is the only cache), writethrough (the kernel keeps clean pages for reads, every write reaches the daemon), writeback (the FUSE writeback cache)") \
X(NONE, _, .name = "kernel_cache", .type = WB_OPT_ALIAS, .def = "off",		\
  .choices = "cache=writeback", .help = "the same as cache=writeback")		\
X(FRONT, attr_timeout, .name = "attr_timeout", .type = WB_OPT_SECS,		\
  .metavar = "SECS", .def = "86400", .max = 86400,				\
  .help = "how long the kernel may cache names and attributes (0 .. 86400)")	\
X(FRONT, allow_other, .name = "allow_other", .type = WB_OPT_FLAG, .def = "off",	\
  .flags = WB_OPT_LIBFUSE | WB_OPT_NOSIM,					\
  .help = "let other users use the mount; as root, each request then runs with the caller's credentials (implies default_permissions)") \
X(BS, block_size, .name = "block_size", .type = WB_OPT_POW2, .metavar = "BYTES",	\
  .def = "4K", .min = BS_MIN_BLOCK_SIZE, .max = BS_MAX_BLOCK_SIZE,		\
  .help = "filesystem block: the unit of uptodate and dirty state (512 .. 64K, power of two)") \
X(BS, folio_size, .name = "folio_size", .type = WB_OPT_POW2, .metavar = "BYTES",	\
  .def = "2M", .min = BS_MIN_FOLIO_SIZE, .max = BS_MAX_FOLIO_SIZE,		\
  .help = "largest folio (4K .. 2M, power of two, >= block_size)")		\
X(BS, size, .name = "folio_policy", .type = WB_OPT_SIZING, .metavar = "NAME",	\
  .def = "kernel", .help = "folio sizing policy (see below)")			\
X(BS, readahead_kb, .name = "readahead_kb", .type = WB_OPT_UINT, .metavar = "N",	\
  .def = "2048", .max = BS_READAHEAD_KB_MAX,					\
  .help = "largest readahead window in KiB, like read_ahead_kb (0: no readahead)") \
X(BS, ra_model, .name = "ra_model", .type = WB_OPT_RA_MODEL, .metavar = "VERSION", \
  .def = "6.17", .flags = WB_OPT_TUNABLE,					\
  .help = "whose readahead to follow: 6.16, or 6.17 (6.17 and later: folio order kept per open file)") \
X(BS, cache_size, .name = "cache_size", .type = WB_OPT_SIZE, .metavar = "BYTES",	\
  .def = "1/8 of RAM", .min = 1, .flags = WB_OPT_PHYS,				\
  .help = "memory for cached file data (at least 4 folios)")			\
X(BS, lru_stats_ms, .name = "lru_stats_ms", .type = WB_OPT_MS, .metavar = "N",	\
  .def = "2000", .max = BS_LRU_STATS_MS_MAX,					\
  .help = "how old the list sizes and refault count reclaim decides by may be, as the kernel's memory cgroup statistics flushed every 2 s (0: exact)") \
X(BS, account, .name = "dirty_account", .type = WB_OPT_ACCOUNT, .metavar = "NAME", \
  .def = "page", .flags = WB_OPT_TUNABLE,					\
  .help = "dirty accounting policy (see below)")				\
X(NONE, _, .name = "load", .type = WB_OPT_LOAD, .metavar = "PATH", .def = "none",	\
  .help = "load the policies of a library built against foliofs/policy.h (repeatable; see foliofs(8)); their parameters, like the built-in ones', are listed below and set with -o account.PARAM=N, size.PARAM=N or throttle.PARAM=N") \
X(WB, flushers, .name = "flushers", .type = WB_OPT_UINT, .metavar = "N",	\
  .def = "2", .max = 64,							\
  .help = "background writeback threads (0 .. 64; 0: writeback only at fsync, reclaim, unmount)") \
X(WB, dirty_background_ratio, .name = "dirty_background_ratio",			\
  .type = WB_OPT_RATIO, .metavar = "N", .def = "10", .max = 100,		\
  .pair = "dirty_background_bytes", .flags = WB_OPT_TUNABLE,			\
  .help = "% of cache_size charged dirty that starts background writeback")	\
X(WB, dirty_background_bytes, .name = "dirty_background_bytes",			\
  .type = WB_OPT_SIZE, .metavar = "BYTES", .def = "0", .max = UINT64_MAX / 2,	\
  .pair = "dirty_background_ratio", .flags = WB_OPT_TUNABLE | WB_OPT_PAIR_NONZERO, \
  .help = "the same in bytes; overrides the ratio when not 0")			\
X(WB, dirty_ratio, .name = "dirty_ratio", .type = WB_OPT_RATIO, .metavar = "N",	\
  .def = "20", .min = 1, .max = 100, .pair = "dirty_bytes",			\
  .flags = WB_OPT_TUNABLE,							\
  .help = "% of cache_size charged dirty at which writers are throttled (1 .. 100)") \
X(WB, dirty_bytes, .name = "dirty_bytes", .type = WB_OPT_SIZE, .metavar = "BYTES", \
  .def = "0", .min = 2ull * BS_PAGE_SIZE, .max = UINT64_MAX / 2, .pair = "dirty_ratio", \
  .flags = WB_OPT_TUNABLE | WB_OPT_PAIR_NONZERO | WB_OPT_ZERO,			\
  .help = "the same in bytes (0, or at least 8K); overrides the ratio when not 0") \
X(WB, dirty_pinned_ratio, .name = "dirty_pinned_ratio", .type = WB_OPT_RATIO,	\
  .metavar = "N", .def = "0", .max = 100, .pair = "dirty_pinned_bytes",		\
  .flags = WB_OPT_TUNABLE | WB_OPT_PAIR_NONZERO,				\
  .help = "% of cache_size that folios holding dirty data may pin before writers are throttled (0: no limit)") \
X(WB, dirty_pinned_bytes, .name = "dirty_pinned_bytes", .type = WB_OPT_SIZE,	\
  .metavar = "BYTES", .def = "0", .max = UINT64_MAX / 2,			\
  .pair = "dirty_pinned_ratio", .flags = WB_OPT_TUNABLE | WB_OPT_PAIR_NONZERO,	\
  .help = "the same in bytes; overrides the ratio when not 0")			\
X(WB, throttle, .name = "throttle", .type = WB_OPT_THROTTLE, .metavar = "NAME",	\
  .def = "bdp", .flags = WB_OPT_TUNABLE,					\
  .help = "dirty throttling policy: bdp (balance_dirty_pages), strictlimit (as Linux treats FUSE), none") \
X(WB, dirty_expire_ms, .name = "dirty_expire_ms", .type = WB_OPT_MS,		\
  .metavar = "N", .def = "30000", .max = 86400000, .flags = WB_OPT_TUNABLE,	\
  .help = "dirty data older than this is written back")				\
X(WB, writeback_interval_ms, .name = "writeback_interval_ms", .type = WB_OPT_MS, \
  .metavar = "N", .def = "5000", .max = 86400000, .flags = WB_OPT_TUNABLE,	\
  .help = "how often the flushers look (0: only when woken)")			\
X(WB, backing_io, .name = "backing_io", .type = WB_OPT_CHOICE, .metavar = "NAME", \
  .def = "uring", .choices = "uring|psync|null",				\
  .help = "uring (batched io_uring, falls back to psync), psync (pwritev), null (discard writes, read zeros: measures FUSE and cache cost)") \
X(WB, whole_folio, .name = "wb_granularity", .type = WB_OPT_CHOICE,		\
  .metavar = "NAME", .def = "block", .choices = "block|folio",			\
  .help = "block (write only dirty blocks) or folio (every uptodate block of a dirty folio, as Linux before 6.6)") \
X(WB, max_io, .name = "max_io", .type = WB_OPT_POW2, .metavar = "BYTES",	\
  .def = "1M", .min = 4096, .max = 64u << 20,					\
  .help = "largest merged backing write (power of two, >= 4K)")		\
X(FRONT, backing_direct, .name = "backing_direct", .type = WB_OPT_CHOICE,	\
  .metavar = "auto|on|off", .def = "auto", .choices = "auto|on|off",		\
  .flags = WB_OPT_BARE,								\
  .help = "open backing files with O_DIRECT (block-aligned I/O from the cache's memory, no second copy in the backing page cache); auto: where BACKING's file system takes O_DIRECT at block_size; the bare flag is on") \
X(FRONT, uring, .name = "uring", .type = WB_OPT_CHOICE, .metavar = "auto|on|off", \
  .def = "auto", .choices = "auto|on|off",					\
  .help = "serve FUSE requests through io_uring when the kernel offers it (Linux 6.14+, fuse module parameter enable_uring=Y); on: refuse to mount without it; off: always /dev/fuse") \
X(FRONT, uring_pin, .name = "uring_pin", .type = WB_OPT_ONOFF, .metavar = "on|off", \
  .def = "on",									\
  .help = "run each io_uring queue's threads on the CPU the kernel sends that queue's requests from (when the daemon may run on it)") \
X(WB, fault, .name = "fault", .type = WB_OPT_FAULT, .metavar = "SPEC", .def = "off", \
  .help = "inject backing I/O faults, for tests (see foliofs(8))")		\
X(WB, stats_log, .name = "stats_log", .type = WB_OPT_PATH, .metavar = "FILE",	\
  .def = "off",									\
  .help = "append the stats as one JSON object per line every stats_interval_ms") \
X(WB, stats_interval_ms, .name = "stats_interval_ms", .type = WB_OPT_MS,	\
  .metavar = "N", .def = "1000", .min = 10, .max = 3600000,			\
  .help = "stats_log period (10 .. 3600000)")					\
X(FRONT, trace, .name = "trace", .type = WB_OPT_PATH, .metavar = "FILE",	\
  .def = "off", .flags = WB_OPT_NOSIM,						\
  .help = "record every data and namespace operation into FILE for foliofs-sim") \
X(FRONT, write_log, .name = "write_log", .type = WB_OPT_PATH, .metavar = "FILE",	\
  .def = "off",									\
  .help = "record every change to BACKING, with its data, into FILE for foliofs-crashimg") \
X(FRONT, max_threads, .name = "max_threads", .type = WB_OPT_UINT, .metavar = "N", \
  .def = "10", .min = 1, .max = 100000, .flags = WB_OPT_LIBFUSE,		\
  .help = "most FUSE worker threads (libfuse; 1 .. 100000)")			\
X(FRONT, max_idle_threads, .name = "max_idle_threads", .type = WB_OPT_UINT,	\
  .metavar = "N", .def = "unlimited", .max = 100000, .flags = WB_OPT_LIBFUSE,	\
  .help = "most idle FUSE worker threads kept for later requests (libfuse; 0 .. 100000)") \
X(FRONT, max_background, .name = "max_background", .type = WB_OPT_UINT,		\
  .metavar = "N", .def = "64", .min = 1, .max = 65535,				\
  .help = "most asynchronous requests the kernel keeps in flight: its readahead (writethrough, writeback), its writeback (writeback) and asynchronous direct I/O (1 .. 65535; the kernel holds an unprivileged mount to fuse's max_user_bgreq)") \
X(FRONT, max_inodes, .name = "max_inodes", .type = WB_OPT_UINT, .metavar = "N",	\
  .def = "1048576", .min = 1024, .max = 1u << 30,				\
  .help = "inodes the daemon keeps for the kernel before it asks the kernel to forget cold ones (1024 .. 2^30; about 300 bytes each)")

/* How many rows. */
#define WB_OPT_COUNT_ONE(...) + 1
enum { WB_OPT_COUNT = 0 WB_OPTIONS(WB_OPT_COUNT_ONE) };

/* ---- binding rows to a front end's configuration ---- */

/* Where a row's value goes: @size bytes at @off; size 0: nowhere (parsed, then dropped). */
struct wb_opt_field {
	size_t off;
	size_t size;
};

/* A front end's configuration: where its bs_config and wb_config are, and every row's field. */
struct wb_opt_layout {
	size_t bs, wb;
	struct wb_opt_field field[WB_OPT_COUNT];
};

#define WB_OPT_MEMBER(T, m) { offsetof(T, m), sizeof(__typeof__(((T *)0)->m)) }
#define WB_OPT_BIND_BS(T, f, front) WB_OPT_MEMBER(T, bs.f)
#define WB_OPT_BIND_WB(T, f, front) WB_OPT_MEMBER(T, wb.f)
#define WB_OPT_BIND_FRONT(T, f, front) front(T, f)
#define WB_OPT_BIND_NONE(T, f, front) { 0, 0 }
/* For the FRONT rows of a front end that has their fields, and of one that has not. */
#define WB_OPT_FIELD(T, f) WB_OPT_MEMBER(T, f)
#define WB_OPT_NO_FIELD(T, f) { 0, 0 }
#define WB_OPT_LAYOUT(T, rows) { offsetof(T, bs), offsetof(T, wb), { rows } }

/*
 * The configuration writeback itself knows: the rows of BS and WB bound
 * to it (FRONT rows to nothing).  wb_config_default() and the tunables
 * (whose live settings are one) use it.
 */
struct wb_opt_root {
	struct bs_config bs;
	struct wb_config wb;
};
extern const struct wb_opt_layout wb_opt_root_layout;

/* ---- the rows ---- */

/* Row @i (0 .. WB_OPT_COUNT - 1), or NULL past the last. */
const struct wb_opt *wb_opt_at(size_t i);
/* The row named @name (a whole name, no '='), or NULL. */
const struct wb_opt *wb_opt_find(const char *name);
/* Its index. */
size_t wb_opt_index(const struct wb_opt *opt);

/* Physical memory in bytes: cache_size's largest value. */
uint64_t wb_phys_mem(void);
/* The default cache_size of a machine of @mem bytes: 1/8 of it, at least 64 MiB. */
uint64_t wb_cache_size_of(uint64_t mem);

/* A value of a row: a number (also a choice's index), seconds, or a string. */
union wb_opt_value {
	uint64_t u;
	double d;
	char *s;
};
/*
 * A value of @opt's type parsed and checked against its range, as an
 * option: 0 with the value in @out (a string in out->s is malloc'ed),
 * or -EINVAL with "NAME=VALUE: reason" in @err, or -ENOMEM.  LOAD loads
 * the library here; ACCOUNT and SIZING only copy the name (see
 * wb_opts_end()).
 */
int wb_opt_parse(const struct wb_opt *opt, const char *val, union wb_opt_value *out,
		 char *err, size_t errlen);
/* Store @v into @field of @base as @opt's type does (a string: the old one is freed). */
void wb_opt_store(const struct wb_opt *opt, const struct wb_opt_field *field, void *base,
		  union wb_opt_value v);
/* The integer (or bool, or choice) in @field of @base. */
uint64_t wb_opt_load(const struct wb_opt_field *field, const void *base);
/* "NAME=VAL: unknown policy (known: a, b, c)" for a policy row: -EINVAL. */
int wb_opt_policy_unknown(const struct wb_opt *opt, const char *val, char *err, size_t errlen);
/* Every byte limit of @root that is not 0 zeroes its ratio (the rows' pairs), as /proc/sys/vm. */
void wb_opt_bytes_win(struct wb_opt_root *root);

/* ---- a command line ---- */

/*
 * One command line being read into a front end's configuration @cfg
 * (laid out as @layout): wb_opts_begin() sets every default,
 * wb_opts_set() or wb_opts_item() take the options one by one,
 * wb_opts_end() resolves the policies and their parameters (after every
 * load=) and checks the whole configuration.  A later value of an option
 * wins.  On any error the configuration is to be freed with
 * wb_opts_free().
 */
struct wb_opts {
	void *cfg;
	const struct wb_opt_layout *layout;
	char *policy[2];	/* dirty_account=, folio_policy= as given (owned), or NULL */
	char **params;		/* account.NAME=V, size.NAME=V, throttle.NAME=V in order (owned) */
	size_t nr_params;
	uint64_t given;		/* bit i: row i was given */
};

void wb_opts_begin(struct wb_opts *o, void *cfg, const struct wb_opt_layout *layout);
/* Row @opt with @val (NULL: the bare name): 0, -EINVAL with @err, -ENOMEM. */
int wb_opts_set(struct wb_opts *o, const struct wb_opt *opt, const char *val,
		char *err, size_t errlen);
/*
 * "NAME", "NAME=VALUE" or a policy parameter "account.NAME=VALUE" (also
 * size., throttle.): as wb_opts_set(), or -ENOENT when it is no option of
 * the registry (@err untouched).  @opt, when not NULL, gets the row.
 */
int wb_opts_item(struct wb_opts *o, const char *item, const struct wb_opt **opt,
		 char *err, size_t errlen);
/* Whether @opt was given. */
bool wb_opts_given(const struct wb_opts *o, const struct wb_opt *opt);
/*
 * The end of the command line: 0, or -EINVAL with the first problem in
 * @err.  Frees what the parse kept (also on error).  A byte limit given
 * makes its ratio read 0, as /proc/sys/vm does.
 */
int wb_opts_end(struct wb_opts *o, char *err, size_t errlen);
/* Free what the parse kept without resolving or checking (--help, an error). */
void wb_opts_cancel(struct wb_opts *o);
/* Free the strings the options put into @cfg (laid out as @layout). */
void wb_opts_free(void *cfg, const struct wb_opt_layout *layout);

/* ---- for --help ---- */

/* "name=METAVAR", or "name" for a flag, into @buf. */
void wb_opt_usage(const struct wb_opt *opt, char *buf, size_t len);

#endif /* FOLIOFS_OPTIONS_H */
