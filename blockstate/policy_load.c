// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * policy_load.c - policies loaded from libraries built out of the tree
 * against foliofs/policy.h (-o load=PATH, .foliofs/load, foliofs-sim).
 *
 * Everything is checked before anything is registered, so a refused
 * library changes nothing (its constructors, if it has any, have run:
 * doc/policies.md says what a loaded library can do).  The file is
 * opened once and checked through that descriptor (regular, owned by
 * the mounting user or root, not writable by group or others), and the
 * same descriptor is what dlopen() maps (/proc/self/fd/N), so the file
 * cannot be swapped between the check and the load.  A library is never
 * unloaded: folios may be priced by its code until the process ends.
 * Its descriptor stays open too: glibc's dlopen() takes a name it has
 * loaded already for that object, so the next library must not get the
 * same /proc/self/fd/N.
 */
#include "policy.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The libraries loaded, by file identity (a second load is a no-op). */
#define LOADED_LIBS_MAX 64
static struct {
	pthread_mutex_t lock;		/* serializes loads; protects the rest */
	dev_t dev[LOADED_LIBS_MAX];
	ino_t ino[LOADED_LIBS_MAX];
	size_t count;
} libs = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool lib_loaded(const struct stat *st)
{
	for (size_t i = 0; i < libs.count; i++) {
		if (libs.dev[i] == st->st_dev && libs.ino[i] == st->st_ino)
			return true;
	}
	return false;
}

/* Count @list's entries (NULL-terminated, or NULL), at most BS_LOADED_MAX + 1. */
static size_t list_len(const void *const *list)
{
	size_t n = 0;

	while (list && list[n] && n <= BS_LOADED_MAX)
		n++;
	return n;
}

/* Whether @name is taken by a registered policy or one earlier in the module. */
static bool name_taken(const struct foliofs_policy_module *m, bool account, size_t upto,
		       const char *name)
{
	for (size_t i = 0; i < upto; i++) {
		if (!strcmp(account ? m->account[i]->name : m->sizing[i]->name, name))
			return true;
	}
	return account ? bs_account_policy_find(name) != NULL : bs_size_policy_find(name) != NULL;
}

/* Check every policy of @m: 0, or -EINVAL with the reason in @why. */
static int module_check(const struct foliofs_policy_module *m,
			const struct bs_policy_load_hooks *hooks, char *why, size_t len)
{
	size_t na = list_len((const void *const *)m->account);
	size_t ns = list_len((const void *const *)m->sizing);
	size_t nt = list_len((const void *const *)m->throttle);

	if (!na && !ns && !nt) {
		snprintf(why, len, "the module has no policy");
		return -EINVAL;
	}
	if (nt && !hooks) {
		snprintf(why, len, "throttle policies are loaded by the writeback layer (wb_policy_load)");
		return -EINVAL;
	}
	if (na > bs_policy_loaded_room(true) || ns > bs_policy_loaded_room(false)) {
		snprintf(why, len, "no room for more loaded policies (%d of each kind)",
			 BS_LOADED_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < na; i++) {
		if (bs_account_policy_check(m->account[i], why, len))
			return -EINVAL;
		if (name_taken(m, true, i, m->account[i]->name)) {
			snprintf(why, len, "accounting policy %s exists already", m->account[i]->name);
			return -EINVAL;
		}
	}
	for (size_t i = 0; i < ns; i++) {
		if (bs_size_policy_check(m->sizing[i], why, len))
			return -EINVAL;
		if (name_taken(m, false, i, m->sizing[i]->name)) {
			snprintf(why, len, "sizing policy %s exists already", m->sizing[i]->name);
			return -EINVAL;
		}
	}
	return nt ? hooks->check(m, why, len) : 0;
}

/* The file @st may be loaded by @owner: 0, or -errno with the reason. */
static int file_check(const struct stat *st, uid_t owner, char *why, size_t len)
{
	if (!S_ISREG(st->st_mode)) {
		snprintf(why, len, "not a regular file");
		return -EINVAL;
	}
	if (st->st_uid != owner && st->st_uid != 0) {
		snprintf(why, len, "owned by uid %u, not by the mounting user (%u) or root",
			 (unsigned int)st->st_uid, (unsigned int)owner);
		return -EPERM;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(why, len, "writable by %s (mode %04o)",
			 st->st_mode & S_IWOTH ? "others" : "its group",
			 (unsigned int)(st->st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* dlopen @fd and check its descriptor; the handle in *@out: 0 or -EINVAL with why. */
static int module_open(int fd, const struct bs_policy_load_hooks *hooks, void **out,
		       const struct foliofs_policy_module **mod, char *why, size_t len)
{
	const struct foliofs_policy_module *m;
	char proc[64];
	void *h;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	h = dlopen(proc, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();

		snprintf(why, len, "cannot load: %s", e ? e : "unknown error");
		return -EINVAL;
	}
	m = dlsym(h, FOLIOFS_POLICY_MODULE_SYMBOL);
	if (!m) {
		snprintf(why, len, "no symbol %s (not built with FOLIOFS_POLICY_MODULE)",
			 FOLIOFS_POLICY_MODULE_SYMBOL);
		goto out_close;
	}
	if (m->abi != FOLIOFS_POLICY_ABI) {
		snprintf(why, len, "built for policy ABI %u, this foliofs has %d (rebuild it against this foliofs's foliofs/policy.h)",
			 m->abi, FOLIOFS_POLICY_ABI);
		goto out_close;
	}
	if (m->struct_size != sizeof(*m)) {
		snprintf(why, len, "descriptor of %u bytes, this foliofs's is %zu (rebuild it)",
			 m->struct_size, sizeof(*m));
		goto out_close;
	}
	if (module_check(m, hooks, why, len))
		goto out_close;
	*out = h;
	*mod = m;
	return 0;
out_close:
	dlclose(h);
	return -EINVAL;
}

int bs_policy_load_hooked(const char *path, uid_t owner, const struct bs_policy_load_hooks *hooks,
			  char *err, size_t errlen)
{
	const struct foliofs_policy_module *m;
	char why[256] = "";
	struct stat st;
	char *origin;
	void *h;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "load=%s: %s", path, strerror(-ret));
		return ret;
	}
	pthread_mutex_lock(&libs.lock);
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		snprintf(why, sizeof(why), "%s", strerror(-ret));
		goto out;
	}
	ret = file_check(&st, owner, why, sizeof(why));
	if (ret || lib_loaded(&st))
		goto out;
	if (libs.count == LOADED_LIBS_MAX) {
		snprintf(why, sizeof(why), "%d libraries loaded already", LOADED_LIBS_MAX);
		ret = -EINVAL;
		goto out;
	}
	origin = strdup(path);
	if (!origin) {
		ret = -ENOMEM;
		snprintf(why, sizeof(why), "out of memory");
		goto out;
	}
	ret = module_open(fd, hooks, &h, &m, why, sizeof(why));
	if (ret) {
		free(origin);
		goto out;
	}
	for (size_t i = 0; m->account && m->account[i]; i++)
		bs_account_policy_register(m->account[i], origin);
	for (size_t i = 0; m->sizing && m->sizing[i]; i++)
		bs_size_policy_register(m->sizing[i], origin);
	if (m->throttle && m->throttle[0])
		hooks->add(m, origin);
	libs.dev[libs.count] = st.st_dev;
	libs.ino[libs.count] = st.st_ino;
	libs.count++;
	fd = -1;	/* kept: see above */
out:
	pthread_mutex_unlock(&libs.lock);
	if (fd >= 0)
		close(fd);
	if (ret)
		snprintf(err, errlen, "load=%s: %s", path, why);
	return ret;
}
