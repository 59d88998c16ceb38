// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * opts.c - command line of foliofs: BACKING, MOUNTPOINT and -o options.
 *
 * Every foliofs option is a row of the option registry
 * (writeback/options.h), which parses and checks it, before anything is
 * mounted; a bad value is reported in one line that names the option and
 * the value.  Here the rows are bound to struct ffs_config, and libfuse's
 * fuse_opt_parse() hands every -o item to the registry; what is no
 * option of it (fsname=, ro, ...) is kept in ffs_config.args and checked
 * by libfuse itself, and so are the rows libfuse takes too (allow_other,
 * the thread counts), whose bad values libfuse would ignore and mount
 * anyway.  fusefs/main.c routes libfuse's messages through the same
 * "foliofs: " prefix.
 */
#include "fusefs.h"
#include "options.h"
#include "throttle.h"	/* the throttle policies, for their parameters and --help */

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every row of the registry, bound to its field of struct ffs_config. */
#define FFS_FIELD(where, field, ...) WB_OPT_BIND_##where(struct ffs_config, field, WB_OPT_FIELD),
static const struct wb_opt_layout ffs_layout =
	WB_OPT_LAYOUT(struct ffs_config, WB_OPTIONS(FFS_FIELD));

enum { KEY_HELP, KEY_VERSION, KEY_FSNAME };

/* What is not a row: everything else reaches opt_proc() as FUSE_OPT_KEY_OPT. */
static const struct fuse_opt ffs_opt_spec[] = {
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_KEY("fsname=", KEY_FSNAME),
	FUSE_OPT_END
};

struct parse_state {
	struct ffs_config *cfg;
	struct wb_opts opts;
	char *err;
	int nonopts;
	bool fsname_given;	/* the user's fsname= replaces BACKING as the mount's source */
};

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

/* BACKING, then MOUNTPOINT (kept for fuse_parse_cmdline): 0, 1 to keep, -1. */
static int nonopt(struct parse_state *ps, const char *arg)
{
	if (++ps->nonopts == 1) {
		ps->cfg->backing = strdup(arg);
		return ps->cfg->backing ? 0 : -1;
	}
	if (ps->nonopts == 2)
		return check_mountpoint(arg, ps->err) ? -1 : 1;
	snprintf(ps->err, FFS_ERRLEN,
		 "%s: unexpected argument (usage: foliofs [options] BACKING MOUNTPOINT)", arg);
	return -1;
}

/* An -o item: the registry's, else libfuse's (kept for it: 1). */
static int option(struct parse_state *ps, const char *arg)
{
	const struct wb_opt *opt = NULL;
	int ret = wb_opts_item(&ps->opts, arg, &opt, ps->err, FFS_ERRLEN);

	if (ret == -ENOENT)
		return 1;
	if (ret)
		return -1;
	return opt && (opt->flags & WB_OPT_LIBFUSE) ? 1 : 0;
}

static int opt_proc(void *data, const char *arg, int key,
		    struct fuse_args *outargs)
{
	struct parse_state *ps = data;
	(void)outargs;

	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		return nonopt(ps, arg);
	case KEY_HELP:
		ps->cfg->show_help = true;
		return 0;
	case KEY_VERSION:
		ps->cfg->show_version = true;
		return 0;
	case KEY_FSNAME:
		ps->fsname_given = true;
		return 1;
	case FUSE_OPT_KEY_OPT:
		return option(ps, arg);
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

/* What fuse_parse_cmdline() found, and the checks that need it. */
static int take_cmdline(struct ffs_config *cfg, char *err)
{
	struct fuse_cmdline_opts copts;

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
	return 0;
}

int ffs_parse_args(int argc, char **argv, struct ffs_config *cfg, char *err)
{
	struct parse_state ps = { .cfg = cfg, .err = err };
	int ret;

	memset(cfg, 0, sizeof(*cfg));
	wb_opts_begin(&ps.opts, cfg, &ffs_layout);
	cfg->args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	err[0] = '\0';

	ret = fuse_opt_parse(&cfg->args, &ps, ffs_opt_spec, opt_proc);
	cfg->uring_given = wb_opts_given(&ps.opts, wb_opt_find("uring"));
	if (ret || cfg->show_help || cfg->show_version) {
		wb_opts_cancel(&ps.opts);
		if (ret && !err[0])
			snprintf(err, FFS_ERRLEN, "cannot parse the command line");
		return ret ? -EINVAL : 0;
	}
	if (wb_opts_end(&ps.opts, err, FFS_ERRLEN))
		return -EINVAL;
	if (!cfg->backing) {
		snprintf(err, FFS_ERRLEN,
			 "missing BACKING and MOUNTPOINT (usage: foliofs [options] BACKING MOUNTPOINT)");
		return -EINVAL;
	}
	if (take_cmdline(cfg, err))
		return -EINVAL;
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
	wb_opts_free(cfg, &ffs_layout);
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
	const struct wb_opt *opt;
	char usage[64];

	printf("usage: %s [options] BACKING MOUNTPOINT\n\n"
	       "Mount the directory BACKING at MOUNTPOINT through foliofs; or, when\n"
	       "BACKING is a regular file or a block device, mount it as one file over\n"
	       "the regular file MOUNTPOINT.\n\n"
	       "foliofs options (-o NAME[=VALUE], default in brackets):\n",
	       progname);
	for (size_t i = 0; (opt = wb_opt_at(i)); i++) {
		wb_opt_usage(opt, usage, sizeof(usage));
		printf("    -o %-30s [%s] %s\n", usage, opt->def, opt->help);
	}
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
