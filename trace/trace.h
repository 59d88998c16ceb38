/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * trace.h - the workload trace: its format, a reader and a writer.
 *
 * The daemon records traces (fusefs/record.c, -o trace=) and foliofs-sim
 * makes and replays them; both link this one implementation, which
 * depends on nothing but libc.
 *
 * A trace is a header and fixed-size records, every integer little
 * endian, so that a trace recorded on one machine replays on another and
 * a reader can find record i at a known offset without parsing the ones
 * before it.
 *
 *   header, 32 bytes
 *     0  char[8]  magic "FFSTRACE"
 *     8  u32      version: 2 (TRACE_VERSION), or 1
 *    12  u32      record size in bytes: 56 in version 2, 48 in version 1
 *                 (trace_rec_size())
 *    16  u64      reserved, 0
 *    24  u64      reserved, 0
 *   record, 56 bytes, in the order the operations reached the daemon
 *     0  u64      time_ns   when the operation began (ns from any origin)
 *     8  u64      dur_ns    how long it took when recorded (0: unknown);
 *                           the writer's think time before its next
 *                           operation is that one's time_ns - (time_ns +
 *                           dur_ns) of this one
 *    16  u32      pid       the writer (process or thread id)
 *    20  u32      file      file id (any number naming the file in this trace)
 *    24  u8       op        enum trace_op
 *    25  u8[3]    reserved, 0
 *    28  u32      flags     op-specific: fallocate's mode; sync_range's
 *                           sync_file_range() flags
 *    32  u64      offset    write/read/fallocate/sync_range: byte offset;
 *                           truncate: the new size; rename: the file id
 *                           it replaces
 *    40  u64      length    write/read/fallocate: bytes; sync_range:
 *                           bytes, 0 to the file's end; create: the
 *                           file's size when it was opened; deadline:
 *                           the iteration's length in ns
 *    48  u64      open      the open file (FUSE handle) the operation came
 *                           through: a number unique for the trace's whole
 *                           lifetime, never reused, the same in every
 *                           record of one open; 0: none or not known (an
 *                           unlink, a rename, a truncate by name)
 *
 * Version 1 records are the first 48 bytes of these, without open; a
 * reader gives them open 0.
 *
 * Deadline records (op deadline; written by `foliofs-sim gen
 * pgbench,...,deadline=1`, never by the daemon) make a writer's records
 * time-bounded, as pgbench -T bounds a run: a deadline record of writer
 * pid at time_ns with length L says that the writer's records after it,
 * up to its next deadline record or its end, are one iteration that ends
 * at time_ns + L (recorded time; file, offset, flags and open are 0).  A
 * replay stops the writer there: at the first step it would start at or
 * after the deadline, it skips the iteration's remaining records.  A step
 * is the writer's records with one time_ns (the generator stamps each
 * transaction's records with one time), so a transaction in progress
 * completes, as pgbench's clients finish the one in flight.  A trace
 * without deadline records replays every record.  Traces of this version
 * without them are what they were; a reader that knows no deadline op
 * refuses a trace that has them (an unknown op).
 *
 * A pace record (op pace; written by `foliofs-sim gen pgbench` for its
 * checkpointer, never by the daemon; every field but time_ns, pid and op
 * 0) says that its writer's waits from there on keep a schedule: the
 * writer sleeps only while it is ahead of it, as PostgreSQL's
 * checkpointer sleeps between checkpoint writes only while it is ahead
 * of its pace (PostgreSQL measures that pace from each checkpoint's
 * start; the record's schedule is the trace's, so what a checkpoint
 * left undone is written at once at the next one's start).  A replay
 * issues each of the writer's later records at its recorded time (from
 * the trace's first record) or, when the writer is behind that, as soon
 * as the record before it is done; other writers' waits are think times,
 * kept whatever the lag.  A pace record must come before its writer's
 * first deadline record (a replay refuses the trace otherwise).  Readers
 * that know no pace op refuse a trace that has one, as for deadlines.
 *
 * A sync_range record (op sync_range; written by contrib/kernel/kio.py
 * from a kernel-side recording, never by the daemon: sync_file_range()
 * never reaches a FUSE server) is a successful sync_file_range() of
 * [offset, offset + length) with its flags (SYNC_FILE_RANGE_WAIT_BEFORE
 * 1, _WRITE 2, _WAIT_AFTER 4).  With _WRITE a replay writes back every
 * dirty folio the range touches, whole, as the kernel's
 * filemap_fdatawrite_range() starts them, without a sync; PostgreSQL asks
 * for it after every
 * checkpoint_flush_after (256 kB) of checkpoint writes and every
 * bgwriter_flush_after (512 kB) of the background writer's.  Readers
 * that know no sync_range op refuse a trace that has one.
 *
 * Why open ids and no open or close records: what needs the open is the
 * state each open keeps, readahead's (struct bs_ra, Linux's
 * file_ra_state, zeroed at open), so a replay needs to know which reads
 * share one, and that a reopen starts afresh.  An id that is never
 * reused says both: a replay makes an open's state at its first record
 * and keeps it to the end, which is exact, since a closed open has no
 * more records.  Open and close records would add two records and a
 * recorder call to every open and release, yet still not cover the opens
 * made before a recording started, which a replay would have to make at
 * their first record all the same.  The recorder numbers opens from a
 * counter of the mount (one atomic add per open, recording or not), 64
 * bits so that it never wraps.
 *
 * A replay gives a record with open 0 (every record of a version 1 trace)
 * the open of its (pid, file): each process opens a file once, as each
 * PostgreSQL backend opens a table itself.  Two threads of one process
 * sharing a descriptor then count as two opens, and a process that
 * reopens a file as one.
 *
 * A reader refuses (with the byte offset of what is wrong) a bad magic, a
 * version or record size it does not know, a trace whose length is not
 * the header plus whole records, an unknown op, and non-zero reserved
 * bytes, so that a damaged or foreign file is never replayed as a
 * workload.
 */
#ifndef FOLIOFS_TRACE_H
#define FOLIOFS_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TRACE_MAGIC "FFSTRACE"
#define TRACE_VERSION 2u	/* what the writers write */
#define TRACE_HDR_SIZE 32u
#define TRACE_REC_SIZE 56u	/* of TRACE_VERSION */
#define TRACE_V1_REC_SIZE 48u

enum trace_op {
	TRACE_OP_WRITE = 1,
	TRACE_OP_READ,
	TRACE_OP_FSYNC,
	TRACE_OP_FDATASYNC,
	TRACE_OP_TRUNCATE,
	TRACE_OP_FALLOCATE,
	TRACE_OP_CREATE,
	TRACE_OP_UNLINK,
	TRACE_OP_RENAME,
	TRACE_OP_DEADLINE,	/* an iteration's end for its writer (no file) */
	TRACE_OP_PACE,		/* its writer's waits keep a schedule (no file) */
	TRACE_OP_SYNC_RANGE,	/* sync_file_range(): start writing a range back */
	TRACE_OP_END,		/* one past the last */
};

/* One record, decoded. */
struct trace_rec {
	uint64_t time_ns;
	uint64_t dur_ns;
	uint32_t pid;
	uint32_t file;
	uint8_t op;
	uint32_t flags;
	uint64_t offset;
	uint64_t length;
	uint64_t open;		/* 0: none or not known (all of version 1) */
};

/* The op's name in dump output ("write", ...), or NULL when unknown. */
const char *trace_op_name(unsigned int op);

/* The record size of trace version @version, 0 for a version not known. */
size_t trace_rec_size(unsigned int version);

/*
 * Reading a trace one record at a time, in a buffer of TRACE_READ_BUF
 * bytes, however long the trace: what foliofs-sim replays and dumps with.
 * trace_reader_open() checks the header and that the length is the header plus
 * whole records (nr, the record count, is known from the start);
 * trace_reader_next() decodes and checks each record as it comes.  The trace
 * must be a regular file (a replay reads it twice: trace_reader_rewind()).
 * Every error is one line in @err naming the file and, for a bad trace,
 * the byte offset of what is wrong (-EINVAL).
 */
#define TRACE_READ_BUF (1u << 20)
struct trace_reader {
	const char *path;	/* as given, for errors; not copied */
	int fd;
	unsigned int version;
	size_t rec_size;
	uint64_t nr;		/* records in the file */
	uint64_t next;		/* the index of the record trace_reader_next() gives next */
	unsigned char *buf;	/* TRACE_READ_BUF bytes; [pos, len) not decoded yet */
	size_t pos, len;
};
/* 0, or -errno (*@rd then needs no trace_reader_close()). */
int trace_reader_open(struct trace_reader *rd, const char *path, char *err, size_t errlen);
/* The next record into *@rec: 1, 0 at the end, or -errno. */
int trace_reader_next(struct trace_reader *rd, struct trace_rec *rec, char *err, size_t errlen);
/* Back to the first record: 0 or -errno. */
int trace_reader_rewind(struct trace_reader *rd, char *err, size_t errlen);
/* To record @index (nr: the end), which trace_reader_next() gives next: 0 or -errno. */
int trace_reader_seek(struct trace_reader *rd, uint64_t index, char *err, size_t errlen);
void trace_reader_close(struct trace_reader *rd);

/*
 * Read the whole trace at @path (version 1 or 2) into a malloc'ed array
 * (*@recs, *@nr); its version into *@version unless NULL.  Returns 0, or
 * -errno with one line in @err as trace_reader_open()'s and trace_reader_next()'s.
 * For tools that need every record at once (the fuzz target); a replay
 * streams (trace_reader_open()).
 */
int trace_load(const char *path, struct trace_rec **recs, size_t *nr,
		   unsigned int *version, char *err, size_t errlen);

/* Writing (TRACE_VERSION): the header, then records; 0 or -errno. */
int trace_write_header(FILE *f);
int trace_write_rec(FILE *f, const struct trace_rec *rec);

/*
 * The same bytes, into memory: for a writer that does its own I/O.  The
 * _v variants write trace version @version (1 or 2; a record of version
 * 1 is trace_rec_size(1) bytes and drops rec->open): what a reader
 * accepted encodes back to the same bytes.
 */
void trace_encode_header(unsigned char h[TRACE_HDR_SIZE]);
void trace_encode_rec(unsigned char p[TRACE_REC_SIZE], const struct trace_rec *rec);
void trace_encode_header_v(unsigned char h[TRACE_HDR_SIZE], unsigned int version);
void trace_encode_rec_v(unsigned char *p, const struct trace_rec *rec, unsigned int version);
/* time_ns of an encoded record. */
uint64_t trace_rec_time(const unsigned char p[TRACE_REC_SIZE]);

#endif /* FOLIOFS_TRACE_H */
