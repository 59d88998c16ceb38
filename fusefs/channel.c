// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * channel.c - a thin layer on the /dev/fuse channel for three kernel
 * features that Debian 12's libfuse (3.14) has no way to ask for:
 *
 *  - FOPEN_PARALLEL_DIRECT_WRITES (Linux 6.2): without it the kernel holds
 *    the inode lock across every direct write, so writers of one file
 *    queue behind each other even though the daemon could serve them all.
 *  - FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6): without it a shared mmap of a
 *    file opened with direct I/O fails with ENODEV.
 *  - FUSE_HANDLE_KILLPRIV_V2 (Linux 5.11): the daemon clears setuid and
 *    setgid on write, truncate and O_TRUNC open (see "kill-priv" in
 *    ops.c).  Without it the kernel asks for that itself with a SETATTR
 *    mode change sent as the writer, which a non-owner may not make.
 *
 * libfuse lets a server read requests and write replies itself
 * (fuse_session_custom_io).  We pass every message through unchanged, but
 * note the unique id of INIT, OPEN and CREATE requests on the worker
 * thread that read them, and set the flag in the reply with that unique
 * id.  A flag is only set when the kernel offered it (INIT) or direct I/O
 * was chosen (OPEN/CREATE), so older kernels see exactly what libfuse sent.
 *
 * With KILLPRIV_V2 the kernel marks the requests whose writer lacks
 * CAP_FSETID: WRITE in write_flags, OPEN (with O_TRUNC) in open_flags,
 * fields libfuse 3.14 does not hand on (SETATTR's mark, FATTR_KILL_SUIDGID,
 * does reach the handler, as FUSE_SET_ATTR_KILL_SUID).  The mark is noted
 * per thread when the request is read, for its handler, which libfuse runs
 * on the same thread before that thread reads again.
 *
 * This relies on INIT, OPEN and CREATE being answered by the thread that
 * read them, before it reads its next request: their handlers never defer
 * a reply.  Other replies may leave on other threads, and may leave on
 * this thread before the noted one:
 *  - held WRITE replies (defer.c) leave on the reply timer thread, which
 *    never reads a request, so it has nothing noted and amends nothing;
 *    and a WRITE is never noted, so a write reply is never amended;
 *  - libfuse answers a queued INTERRUPT with EAGAIN on the thread that
 *    read some other request, before that request's handler runs.
 * So a reply is amended only when its unique id is the noted one, and a
 * reply with another id leaves the note in place for the right reply.
 *
 * With FUSE over io_uring (uring.c, -o uring) the same holds for requests that arrive on
 * ring entries: the ring thread that serves one notes it here
 * (ffs_channel_received) before libfuse dispatches it.  Every reply still
 * passes ch_writev, which hands the ones that belong to a ring entry to
 * uring.c and writes the rest to /dev/fuse.  The INIT reply asks for the
 * ring when the kernel offered it, and the ring starts once that reply
 * is written.
 *
 * This file and uring.c call each other, an owner/worker pair: the
 * channel starts the ring transport and hands it the replies that belong
 * to its entries (ffs_uring_start, ffs_uring_send), and the ring threads
 * note each request they take here (ffs_channel_received), as the
 * /dev/fuse read hook does.
 */
#include "fusefs.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef FOPEN_PARALLEL_DIRECT_WRITES
#define FOPEN_PARALLEL_DIRECT_WRITES (1 << 6)
#endif
#ifndef FUSE_HANDLE_KILLPRIV_V2
#define FUSE_HANDLE_KILLPRIV_V2 (1u << 28)
#endif
#ifndef FUSE_WRITE_KILL_SUIDGID
#define FUSE_WRITE_KILL_SUIDGID (1u << 2)
#endif
#ifndef FUSE_OPEN_KILL_SUIDGID
#define FUSE_OPEN_KILL_SUIDGID (1u << 0)
#endif
#ifndef FUSE_MAX_PAGES
#define FUSE_MAX_PAGES (1u << 22)
#endif
/* flags2 carries bits 32..63 of the INIT flags. */
#define FFS_INIT2_DIRECT_IO_ALLOW_MMAP (1u << (36 - 32))
#define FFS_INIT2_OVER_IO_URING (1u << (41 - 32))
/* The kernel's request size bounds when INIT names none (fs/fuse). */
#define FFS_MIN_READ_BUFFER 8192
#define FFS_DEFAULT_MAX_PAGES 32

/* Request being served by this thread whose reply we amend, or 0. */
static __thread uint64_t pending_unique;
static __thread uint32_t pending_opcode;
/* The request this thread read last asked to clear setuid/setgid. */
static __thread bool request_kill_suidgid;
/* INIT flags and flags2 the kernel offered; set once, before any OPEN. */
static uint32_t kernel_flags;
static uint32_t kernel_flags2;
/* Set at attach, before the loop. */
static struct fuse_session *channel_se;
static bool want_uring;
static bool uring_notice;	/* say so when the kernel does not offer it */
static bool *uring_refused;	/* uring=on: set when the ring cannot serve */
/*
 * Largest request payload the kernel will put into a ring entry, set by
 * the INIT reply when it asks for the ring (0: no ring); read after that
 * reply is written, on the same thread.
 */
static size_t uring_payload;

/* The request's fixed-size argument of @size bytes, or NULL if short. */
static const void *request_arg(const void *buf, size_t len, size_t size)
{
	const struct fuse_in_header *in = buf;

	return len >= sizeof(*in) + size ? (const void *)(in + 1) : NULL;
}

/*
 * Note the kill-suid/sgid mark of a WRITE or OPEN (cleared before).  A
 * CREATE's mark is left out: the kernel sends CREATE only after a lookup
 * found no file, so the file is new, nothing is truncated and the mode it
 * was made with stays, as on a local filesystem.
 */
static void note_kill_suidgid(const void *buf, size_t len)
{
	const struct fuse_in_header *in = buf;
	const struct fuse_write_in *write_in;
	const struct fuse_open_in *open_in;

	switch (in->opcode) {
	case FUSE_WRITE:
		write_in = request_arg(buf, len, sizeof(*write_in));
		request_kill_suidgid = write_in &&
				       (write_in->write_flags & FUSE_WRITE_KILL_SUIDGID);
		break;
	case FUSE_OPEN:
		open_in = request_arg(buf, len, sizeof(*open_in));
		request_kill_suidgid = open_in &&
				       (open_in->open_flags & FUSE_OPEN_KILL_SUIDGID);
		break;
	}
}

bool ffs_channel_kill_suidgid(void)
{
	return request_kill_suidgid;
}

void ffs_channel_received(const void *buf, size_t len)
{
	const struct fuse_in_header *in = buf;

	pending_unique = 0;
	request_kill_suidgid = false;
	if (len < sizeof(*in))
		return;
	note_kill_suidgid(buf, len);
	switch (in->opcode) {
	case FUSE_INIT: {
		const struct fuse_init_in *init = (const void *)(in + 1);

		if (len >= sizeof(*in) + offsetof(struct fuse_init_in, flags) +
			   sizeof(init->flags))
			kernel_flags = init->flags;
		/* flags2 exists from protocol 7.36 on, with FUSE_INIT_EXT. */
		if (len >= sizeof(*in) + offsetof(struct fuse_init_in, flags2) +
			   sizeof(init->flags2) && (init->flags & FUSE_INIT_EXT))
			kernel_flags2 = init->flags2;
		break;
	}
	case FUSE_OPEN:
	case FUSE_CREATE:
		break;
	default:
		return;
	}
	pending_unique = in->unique;
	pending_opcode = in->opcode;
}

static ssize_t ch_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);
	(void)userdata;

	if (n > 0)
		ffs_channel_received(buf, n);
	return n;
}

/* The reply body libfuse sent: iov[1], a single buffer for these ops. */
static void *reply_body(struct iovec *iov, int count, size_t need)
{
	if (count < 2 || iov[1].iov_len < need)
		return NULL;
	return iov[1].iov_base;
}

/*
 * uring=on and the ring cannot serve: end the session rather than serve
 * over /dev/fuse, so that the daemon unmounts and exits with an error.
 */
static void refuse_uring(const char *why)
{
	fuse_log(FUSE_LOG_ERR, "error: uring=on: %s\n", why);
	*uring_refused = true;
	fuse_session_exit(channel_se);
}

/*
 * Ask for the ring in the INIT reply @init when it was wanted and the
 * kernel offered it, and size the ring's payloads as the kernel will
 * (the largest of its minimum read buffer, max_write and max_pages).
 */
static void amend_init_uring(struct fuse_init_out *init)
{
	uint32_t pages;

	if (!want_uring)
		return;
	if (!(kernel_flags2 & FFS_INIT2_OVER_IO_URING) || !(init->flags & FUSE_INIT_EXT)) {
		if (uring_refused)
			refuse_uring("the kernel did not offer it in INIT");
		else if (uring_notice)
			ffs_uring_log_unoffered();
		return;
	}
	init->flags2 |= FFS_INIT2_OVER_IO_URING;
	pages = (init->flags & FUSE_MAX_PAGES) ? init->max_pages : FFS_DEFAULT_MAX_PAGES;
	uring_payload = FFS_MIN_READ_BUFFER;
	if (init->max_write > uring_payload)
		uring_payload = init->max_write;
	if ((size_t)pages * (size_t)sysconf(_SC_PAGESIZE) > uring_payload)
		uring_payload = (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

static void amend_reply(struct iovec *iov, int count)
{
	const struct fuse_out_header *out = iov[0].iov_base;
	struct fuse_open_out *open_out = NULL;
	struct fuse_init_out *init;
	char *body;

	if (out->error)
		return;
	switch (pending_opcode) {
	case FUSE_INIT:
		init = reply_body(iov, count, offsetof(struct fuse_init_out, flags2) +
				  sizeof(init->flags2));
		if (init && (init->flags & FUSE_INIT_EXT) &&
		    (kernel_flags2 & FFS_INIT2_DIRECT_IO_ALLOW_MMAP))
			init->flags2 |= FFS_INIT2_DIRECT_IO_ALLOW_MMAP;
		if (init && (kernel_flags & FUSE_HANDLE_KILLPRIV_V2))
			init->flags |= FUSE_HANDLE_KILLPRIV_V2;
		if (init)
			amend_init_uring(init);
		break;
	case FUSE_OPEN:
		open_out = reply_body(iov, count, sizeof(*open_out));
		break;
	case FUSE_CREATE:
		body = reply_body(iov, count, sizeof(struct fuse_entry_out) +
				  sizeof(*open_out));
		if (body)
			open_out = (void *)(body + sizeof(struct fuse_entry_out));
		break;
	}
	if (open_out && (open_out->open_flags & FOPEN_DIRECT_IO))
		open_out->open_flags |= FOPEN_PARALLEL_DIRECT_WRITES;
}

/* Whether @iov is the reply to the request this thread noted. */
static bool is_noted_reply(const struct iovec *iov)
{
	const struct fuse_out_header *out = iov[0].iov_base;

	return pending_unique && iov[0].iov_len >= sizeof(*out) &&
	       out->unique == pending_unique;
}

static void start_uring(void)
{
	char why[128];
	int ret = ffs_uring_start(channel_se, uring_payload);

	if (!ret)
		return;
	snprintf(why, sizeof(why), "cannot set up the rings: %s", strerror(-ret));
	if (uring_refused)
		refuse_uring(why);
	else
		fuse_log(FUSE_LOG_NOTICE, "uring: %s: serving over /dev/fuse\n", why);
}

/* libfuse's custom-io contract: bytes written, or -1 with errno set. */
static ssize_t ch_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	bool init_reply = false;
	ssize_t n;
	(void)userdata;

	if (is_noted_reply(iov)) {
		init_reply = pending_opcode == FUSE_INIT;
		amend_reply(iov, count);
		pending_unique = 0;
	}
	n = ffs_uring_send(iov, count);
	if (n != -ENOENT) {
		if (n >= 0)
			return n;
		errno = (int)-n;
		return -1;
	}
	n = writev(fd, iov, count);
	/* The kernel takes ring entries only once INIT is answered. */
	if (init_reply && n >= 0 && uring_payload)
		start_uring();
	return n;
}

static const struct fuse_custom_io ffs_channel_io = {
	.read = ch_read,
	.writev = ch_writev,
};

int ffs_channel_attach(struct fuse_session *se, bool uring, bool notice, bool *refused)
{
	channel_se = se;
	want_uring = uring;
	uring_notice = notice;
	uring_refused = refused;
	return fuse_session_custom_io(se, &ffs_channel_io, fuse_session_fd(se));
}
