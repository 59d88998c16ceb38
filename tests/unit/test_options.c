// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The option registry (writeback/options.h): its rows are well formed
 * (names, defaults that parse and lie in range, pairs that point at each
 * other, tunables of kinds tunables.c sets), a configuration made in code
 * is checked against the same ranges, and every row is documented: as
 * "*-o NAME" in doc/man/foliofs.8.scd and as a "| `-o NAME" row of
 * doc/admin.md's option table, every tunable also under TUNABLES in the
 * man page and in admin.md's tunables section.
 *
 * Usage: test_options DOCDIR (the source tree's doc/).
 */
#include "options.h"
#include "test_helpers.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

static int failures;

static void check(bool ok, const char *fmt, ...)
{
	va_list ap;

	if (ok)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	failures++;
}

static char *slurp(const char *dir, const char *name)
{
	char path[4096];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "re");
	if (!f) {
		perror(path);
		exit(T_EXIT_FAIL);
	}
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	T_CHECK(buf && fread(buf, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	return buf;
}

/* The part of @text from the line @heading to the next heading of its level ("\n# ", "\n## "). */
static char *section(const char *text, const char *heading, const char *next)
{
	const char *a = strstr(text, heading), *b;
	char *s;

	T_CHECK(a);
	b = strstr(a + strlen(heading), next);
	s = strndup(a, b ? (size_t)(b - a) : strlen(a));
	T_CHECK(s);
	return s;
}

/* @text has @prefix NAME @suffix at the start of a line (@bol) or anywhere. */
static bool names(const char *text, const char *prefix, const char *name, const char *suffix,
		  bool bol)
{
	char want[128];
	const char *p = text;

	snprintf(want, sizeof(want), "%s%s%s", prefix, name, suffix);
	while ((p = strstr(p, want))) {
		if (!bol || p == text || p[-1] == '\n')
			return true;
		p++;
	}
	return false;
}

static bool name_ok(const char *name)
{
	return *name && strspn(name, "abcdefghijklmnopqrstuvwxyz_") == strlen(name);
}

/* The row's default, where it is a value, parses with the row's own grammar. */
static void check_default(const struct wb_opt *opt)
{
	union wb_opt_value v;
	char err[256] = "";

	check(opt->def && *opt->def, "%s: no default for --help", opt->name);
	if (opt->type == WB_OPT_ACCOUNT)
		check(bs_account_policy_find(opt->def) != NULL, "%s: default %s is no policy",
		      opt->name, opt->def);
	if (opt->type == WB_OPT_SIZING)
		check(bs_size_policy_find(opt->def) != NULL, "%s: default %s is no policy",
		      opt->name, opt->def);
	/* As options.c applies them: numbers, choices and the readahead model. */
	if ((opt->type > WB_OPT_ONOFF && opt->type != WB_OPT_RA_MODEL) ||
	    (opt->flags & (WB_OPT_LIBFUSE | WB_OPT_PHYS)))
		return;
	check(!wb_opt_parse(opt, opt->def, &v, err, sizeof(err)), "%s: default %s: %s",
	      opt->name, opt->def, err);
}

static void check_row(const struct wb_opt *opt)
{
	bool flag = opt->type == WB_OPT_FLAG || opt->type == WB_OPT_ALIAS;
	const struct wb_opt *pair = opt->pair ? wb_opt_find(opt->pair) : NULL;

	check(name_ok(opt->name), "row %zu: bad name", wb_opt_index(opt));
	check(wb_opt_find(opt->name) == opt, "%s: named twice", opt->name);
	check(opt->help && *opt->help, "%s: no help", opt->name);
	check(flag == !opt->metavar, "%s: a metavar if and only if it takes a value", opt->name);
	check(opt->type != WB_OPT_CHOICE || (opt->choices && *opt->choices),
	      "%s: a choice without choices", opt->name);
	if (opt->type == WB_OPT_ALIAS) {
		char target[64];

		snprintf(target, sizeof(target), "%.*s", (int)strcspn(opt->choices, "="),
			 opt->choices);
		check(strchr(opt->choices, '=') && wb_opt_find(target),
		      "%s: an alias of no option", opt->name);
	}
	check(opt->min <= opt->max || (opt->flags & WB_OPT_PHYS) || opt->type > WB_OPT_SECS,
	      "%s: min > max", opt->name);
	check(!opt->pair || (pair && pair->pair && !strcmp(pair->pair, opt->name)),
	      "%s: its pair does not pair with it", opt->name);
	if (opt->flags & WB_OPT_TUNABLE) {
		check(opt->type == WB_OPT_RATIO || opt->type == WB_OPT_SIZE ||
		      opt->type == WB_OPT_MS || opt->type == WB_OPT_ACCOUNT ||
		      opt->type == WB_OPT_THROTTLE || opt->type == WB_OPT_RA_MODEL,
		      "%s: a tunable of a kind tunables.c does not set", opt->name);
		check(opt->where == WB_OPT_WB || opt->type == WB_OPT_ACCOUNT ||
		      opt->type == WB_OPT_RA_MODEL, "%s: a tunable outside wb_config", opt->name);
		check(!pair || (pair->flags & WB_OPT_TUNABLE), "%s: its pair is no tunable",
		      opt->name);
	}
	/* writeback binds the rows of its own structs, and only those. */
	check((wb_opt_root_layout.field[wb_opt_index(opt)].size != 0) ==
	      (opt->where == WB_OPT_BS || opt->where == WB_OPT_WB),
	      "%s: bound where it should not be, or not where it should", opt->name);
	check_default(opt);
}

static void check_docs(const char *docdir)
{
	char *man = slurp(docdir, "man/foliofs.8.scd"), *admin = slurp(docdir, "admin.md");
	char *man_tun = section(man, "\n# TUNABLES", "\n# ");
	char *admin_tun = section(admin, "\n## Tunables", "\n## ");
	const struct wb_opt *opt;

	for (size_t i = 0; (opt = wb_opt_at(i)); i++) {
		check(names(man, "*-o ", opt->name, opt->metavar ? "=*" : "*", true),
		      "%s: not in doc/man/foliofs.8.scd (\"*-o %s%s\")", opt->name, opt->name,
		      opt->metavar ? "=*" : "*");
		check(names(admin, "| `-o ", opt->name, opt->metavar ? "=" : "`", true),
		      "%s: not in doc/admin.md's option table (\"| `-o %s\")", opt->name, opt->name);
		if (!(opt->flags & WB_OPT_TUNABLE))
			continue;
		check(names(man_tun, "*", opt->name, "*", false),
		      "%s: a tunable not under TUNABLES in doc/man/foliofs.8.scd", opt->name);
		check(names(admin_tun, "`", opt->name, "`", false),
		      "%s: a tunable not in doc/admin.md's Tunables", opt->name);
	}
	free(man_tun);
	free(admin_tun);
	free(man);
	free(admin);
}

/* The tunables are the rows so flagged, in the registry's order. */
static void check_tunables(void)
{
	const struct wb_opt *opt;
	size_t t = 0;

	for (size_t i = 0; (opt = wb_opt_at(i)); i++) {
		if (!(opt->flags & WB_OPT_TUNABLE))
			continue;
		check(wb_tunable_name(t) && !strcmp(wb_tunable_name(t), opt->name),
		      "tunable %zu is %s, not %s", t, wb_tunable_name(t), opt->name);
		t++;
	}
	check(!wb_tunable_name(t), "a tunable that is no row: %s", wb_tunable_name(t));
}

/* A wb_config made in code is held to the rows' ranges. */
static void check_config(void)
{
	struct wb_config cfg;
	char err[256] = "";

	wb_config_default(&cfg);
	check(!wb_config_check(&cfg, err, sizeof(err)), "the defaults: %s", err);
	check(cfg.flushers == 2 && cfg.dirty_ratio == 20 && cfg.dirty_background_ratio == 10 &&
	      cfg.dirty_expire_ms == 30000 && cfg.writeback_interval_ms == 5000 &&
	      cfg.max_io == 1u << 20 && cfg.stats_interval_ms == 1000 &&
	      cfg.backing_io == WB_IO_URING && !cfg.whole_folio && !cfg.throttle && !cfg.fault,
	      "wb_config_default() is not the rows' defaults");
	cfg.flushers = 65;
	check(wb_config_check(&cfg, err, sizeof(err)) == -EINVAL && strstr(err, "flushers=65"),
	      "flushers=65 passed the check (%s)", err);
	wb_config_default(&cfg);
	cfg.max_io = 12288;
	check(wb_config_check(&cfg, err, sizeof(err)) == -EINVAL && strstr(err, "max_io=12288"),
	      "max_io=12288 passed the check (%s)", err);
	wb_config_default(&cfg);
	cfg.dirty_bytes = 4096;
	check(wb_config_check(&cfg, err, sizeof(err)) == -EINVAL, "dirty_bytes=4096 passed");
	cfg.dirty_bytes = 0;
	check(!wb_config_check(&cfg, err, sizeof(err)), "dirty_bytes=0 refused: %s", err);
}

int main(int argc, char **argv)
{
	const struct wb_opt *opt;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DOCDIR\n", argv[0]);
		return T_EXIT_FAIL;
	}
	for (size_t i = 0; (opt = wb_opt_at(i)); i++)
		check_row(opt);
	check_tunables();
	check_config();
	check_docs(argv[1]);
	return failures ? T_EXIT_FAIL : T_EXIT_PASS;
}
