# SPDX-License-Identifier: GPL-2.0-or-later
"""kio.py: the kernel side's own file I/O as a foliofs trace, so that
foliofs-sim can replay what PostgreSQL asked of this machine's kernel, not
what it asked of the mount (calibrate.py --sim-kernel).

Why.  The model side runs PostgreSQL over FUSE: every request pays a round
trip, so the server's behaviour itself (how many commits one WAL flush
carries, how far a throttled backend falls behind) differs from the
kernel side's.  A column that moves with that is the transport, not the
model.  Replaying the kernel side's own requests through the model takes
the transport out: same operations, same offsets, same think times; what
remains between the replay and the kernel is the model.

Recording (KernelIoTrace, root, bpftrace): the syscall tracepoints of
the processes the recording's own process starts (pg-seed.py: initdb,
the server and its children; followed through sched_process_fork, so no
other PostgreSQL on the machine is in it), from before initdb to after
the server's stop.  A file is one under the data directory: an absolute
path below it, or a relative one opened by a process named postgres
(every PostgreSQL process works in its data directory).  An fd is followed from its openat() to its
close(); pread64/pwrite64/preadv/pwritev and read/write (at the position
kept from open, lseek's results and the bytes done), fsync, fdatasync,
ftruncate, fallocate on it, and unlink/unlinkat/rename/renameat/renameat2
of such paths.  Each syscall's start and duration are CLOCK_MONOTONIC
(bpftrace's nsecs, Python's time.monotonic_ns()).  sync_file_range() is
recorded (a sync_range record) and counted: foliofs has no such request
(over FUSE it never reaches a daemon), yet the kernel side's
checkpointer and background writer use it (checkpoint_flush_after,
bgwriter_flush_after), and a replay writes the range back as the kernel
starts it.

Converting (convert()): the lines sorted by start time, then one trace
record (trace/trace.h, version 2) per successful operation, with:

  file    an id per file, not per path: a file keeps its id through a
          rename, and a rename over a file records the id it replaced
  open    a new id for each openat(), as the mount's FUSE handles
  create  an openat(O_CREAT) of a path the trace has not seen (the trace
          starts before initdb, so every file of the cluster is new in it)
  truncate  ftruncate(), and an O_TRUNC open of a file with data
  time_ns the start on the trace's clock (time.monotonic_ns() at
          start() is 0), dur_ns the syscall's duration: the replay's think
          time is the gap from one operation's end to its writer's next

What is left out, counted: the opens whose path bpftrace could not read
(its page not yet in memory at the syscall's entry: a new process's first
opens, such as the 3-byte PG_VERSION each PostgreSQL process reads) and
the operations on their fds ('unnamed_opens', 'unnamed_ops').  What is
lost: I/O on an fd a process inherited (the fd is followed per
process; PostgreSQL's postmaster holds no data file open when it forks),
and anything bpftrace drops (its count is kept; calibrate refuses a
trace with losses).

Imported as a plain module, as refcmp.
"""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), '..', 'lib'))
from foliofs_trace import OP, TRACE_HDR, TRACE_MAGIC, TRACE_REC  # noqa: E402

OP_WRITE, OP_READ, OP_FSYNC, OP_FDATASYNC, OP_TRUNCATE, OP_FALLOCATE, OP_CREATE, \
    OP_UNLINK, OP_RENAME, OP_SYNC_RANGE = (
        OP[n] for n in ('write', 'read', 'fsync', 'fdatasync', 'truncate', 'fallocate',
                        'create', 'unlink', 'rename', 'sync_range'))
O_CREAT, O_TRUNC, O_APPEND = 0o100, 0o1000, 0o2000
AT_REMOVEDIR = 0x200
# Long enough for PostgreSQL's paths (relative to its data directory, or
# absolute under a work directory); two of them and a rename's numbers
# must fit bpftrace's 512-byte stack.
STRLEN = 96

# One line per event, the event's kind and its start (ns) first; a path
# has a line of its own, before its syscall's (A, B: sorted by start, then
# kind, they come first).
#   A t pid path                   the path of an openat(), unlink(), rename()
#   B t pid path                   a rename's new path
#   O t pid fd flags               openat() that returned fd
#   C t pid fd                     close()
#   L t pid fd ret                 lseek(): the new position
#   W|R t pid fd dur off ret       writes and reads; off -1: at the position
#   S t pid fd dur op ret          fsync (3), fdatasync (4)
#   T t pid fd dur len ret         ftruncate()
#   F t pid fd dur mode off len ret  fallocate()
#   Y t pid fd dur off nbytes flags ret  sync_file_range()
#   U t pid dur flag ret           unlink(), unlinkat()
#   N t pid dur flags ret          rename(), renameat(), renameat2()
PROG = r'''
BEGIN { @mine[%(root)d] = 1; printf("READY %(root)d\n"); }
tracepoint:sched:sched_process_fork /@mine[pid]/ { @mine[args->child_pid] = 1; }
tracepoint:sched:sched_process_exit /@mine[pid] && pid == tid/ { delete(@mine[pid]); }
tracepoint:syscalls:sys_enter_openat /@mine[pid]/ {
  if ((comm == "postgres" && strncmp(str(args->filename), "/", 1) != 0) ||
      strncmp(str(args->filename), "%(prefix)s", %(plen)d) == 0) {
    $t = nsecs;
    @ot[tid] = $t; @oflags[tid] = args->flags;
    printf("A %%lld %%d %%s\n", $t, pid, str(args->filename));
  }
}
tracepoint:syscalls:sys_exit_openat /@ot[tid]/ {
  if (args->ret >= 0) {
    @ok[pid, args->ret] = 1;
    printf("O %%lld %%d %%lld %%d\n", @ot[tid], pid, args->ret, @oflags[tid]);
  }
  delete(@ot[tid]); delete(@oflags[tid]);
}
tracepoint:syscalls:sys_enter_close /@ok[pid, args->fd]/ {
  delete(@ok[pid, args->fd]);
  printf("C %%lld %%d %%d\n", nsecs, pid, args->fd);
}
tracepoint:syscalls:sys_enter_lseek /@ok[pid, args->fd]/ { @lfd[tid] = args->fd + 1; }
tracepoint:syscalls:sys_exit_lseek /@lfd[tid]/ {
  printf("L %%lld %%d %%d %%lld\n", nsecs, pid, @lfd[tid] - 1, args->ret);
  delete(@lfd[tid]);
}
tracepoint:syscalls:sys_enter_pwrite64 /@ok[pid, args->fd]/ {
  @t[tid] = nsecs; @fd[tid] = args->fd; @off[tid] = args->pos; @k[tid] = 1;
}
tracepoint:syscalls:sys_enter_pwritev /@ok[pid, args->fd]/ {
  @t[tid] = nsecs; @fd[tid] = args->fd; @off[tid] = args->pos_l | (args->pos_h << 32);
  @k[tid] = 1;
}
tracepoint:syscalls:sys_enter_pwritev2 /@ok[pid, args->fd]/ {
  @t[tid] = nsecs; @fd[tid] = args->fd; @off[tid] = args->pos_l | (args->pos_h << 32);
  @k[tid] = 1;
}
tracepoint:syscalls:sys_enter_write /@ok[pid, args->fd]/ {
  @t[tid] = nsecs; @fd[tid] = args->fd; @off[tid] = -1; @k[tid] = 1;
}
tracepoint:syscalls:sys_enter_pread64 /@ok[pid, args->fd]/ {
  @t[tid] = nsecs; @fd[tid] = args->fd; @off[tid] = args->pos; @k[tid] = 2;
}
tracepoint:syscalls:sys_enter_preadv /@ok[pid, args->fd]/ {
  @t[tid] = nsecs; @fd[tid] = args->fd; @off[tid] = args->pos_l | (args->pos_h << 32);
  @k[tid] = 2;
}
tracepoint:syscalls:sys_enter_preadv2 /@ok[pid, args->fd]/ {
  @t[tid] = nsecs; @fd[tid] = args->fd; @off[tid] = args->pos_l | (args->pos_h << 32);
  @k[tid] = 2;
}
tracepoint:syscalls:sys_enter_read /@ok[pid, args->fd]/ {
  @t[tid] = nsecs; @fd[tid] = args->fd; @off[tid] = -1; @k[tid] = 2;
}
tracepoint:syscalls:sys_exit_pwrite64, tracepoint:syscalls:sys_exit_pwritev,
tracepoint:syscalls:sys_exit_pwritev2, tracepoint:syscalls:sys_exit_write /@t[tid] && @k[tid] == 1/ {
  printf("W %%lld %%d %%d %%lld %%lld %%lld\n", @t[tid], pid, @fd[tid], nsecs - @t[tid],
         @off[tid], args->ret);
  delete(@t[tid]); delete(@fd[tid]); delete(@off[tid]); delete(@k[tid]);
}
tracepoint:syscalls:sys_exit_pread64, tracepoint:syscalls:sys_exit_preadv,
tracepoint:syscalls:sys_exit_preadv2, tracepoint:syscalls:sys_exit_read /@t[tid] && @k[tid] == 2/ {
  printf("R %%lld %%d %%d %%lld %%lld %%lld\n", @t[tid], pid, @fd[tid], nsecs - @t[tid],
         @off[tid], args->ret);
  delete(@t[tid]); delete(@fd[tid]); delete(@off[tid]); delete(@k[tid]);
}
tracepoint:syscalls:sys_enter_fsync /@ok[pid, args->fd]/ {
  @t[tid] = nsecs; @fd[tid] = args->fd; @k[tid] = 3;
}
tracepoint:syscalls:sys_enter_fdatasync /@ok[pid, args->fd]/ {
  @t[tid] = nsecs; @fd[tid] = args->fd; @k[tid] = 4;
}
tracepoint:syscalls:sys_exit_fsync, tracepoint:syscalls:sys_exit_fdatasync
/@t[tid] && (@k[tid] == 3 || @k[tid] == 4)/ {
  printf("S %%lld %%d %%d %%lld %%d %%lld\n", @t[tid], pid, @fd[tid], nsecs - @t[tid], @k[tid],
         args->ret);
  delete(@t[tid]); delete(@fd[tid]); delete(@k[tid]);
}
tracepoint:syscalls:sys_enter_ftruncate /@ok[pid, args->fd]/ {
  @t[tid] = nsecs; @fd[tid] = args->fd; @off[tid] = args->length; @k[tid] = 5;
}
tracepoint:syscalls:sys_exit_ftruncate /@t[tid] && @k[tid] == 5/ {
  printf("T %%lld %%d %%d %%lld %%lld %%lld\n", @t[tid], pid, @fd[tid], nsecs - @t[tid],
         @off[tid], args->ret);
  delete(@t[tid]); delete(@fd[tid]); delete(@off[tid]); delete(@k[tid]);
}
tracepoint:syscalls:sys_enter_fallocate /@ok[pid, args->fd]/ {
  @t[tid] = nsecs; @fd[tid] = args->fd; @off[tid] = args->offset; @len[tid] = args->len;
  @mode[tid] = args->mode; @k[tid] = 6;
}
tracepoint:syscalls:sys_exit_fallocate /@t[tid] && @k[tid] == 6/ {
  printf("F %%lld %%d %%d %%lld %%d %%lld %%lld %%lld\n", @t[tid], pid, @fd[tid],
         nsecs - @t[tid], @mode[tid], @off[tid], @len[tid], args->ret);
  delete(@t[tid]); delete(@fd[tid]); delete(@off[tid]); delete(@len[tid]);
  delete(@mode[tid]); delete(@k[tid]);
}
tracepoint:syscalls:sys_enter_sync_file_range /@ok[pid, args->fd]/ {
  @t[tid] = nsecs; @fd[tid] = args->fd; @off[tid] = args->offset; @len[tid] = args->nbytes;
  @mode[tid] = args->flags; @k[tid] = 7;
}
tracepoint:syscalls:sys_exit_sync_file_range /@t[tid] && @k[tid] == 7/ {
  printf("Y %%lld %%d %%d %%lld %%lld %%lld %%d %%lld\n", @t[tid], pid, @fd[tid],
         nsecs - @t[tid], @off[tid], @len[tid], @mode[tid], args->ret);
  delete(@t[tid]); delete(@fd[tid]); delete(@off[tid]); delete(@len[tid]);
  delete(@mode[tid]); delete(@k[tid]);
}
tracepoint:syscalls:sys_enter_unlink /@mine[pid]/ {
  $t = nsecs; @t[tid] = $t; @mode[tid] = 0; @k[tid] = 8;
  printf("A %%lld %%d %%s\n", $t, pid, str(args->pathname));
}
tracepoint:syscalls:sys_enter_unlinkat /@mine[pid]/ {
  $t = nsecs; @t[tid] = $t; @mode[tid] = args->flag; @k[tid] = 8;
  printf("A %%lld %%d %%s\n", $t, pid, str(args->pathname));
}
tracepoint:syscalls:sys_exit_unlink, tracepoint:syscalls:sys_exit_unlinkat
/@t[tid] && @k[tid] == 8/ {
  printf("U %%lld %%d %%lld %%d %%lld\n", @t[tid], pid, nsecs - @t[tid], @mode[tid], args->ret);
  delete(@t[tid]); delete(@mode[tid]); delete(@k[tid]);
}
tracepoint:syscalls:sys_enter_rename /@mine[pid]/ {
  $t = nsecs; @t[tid] = $t; @mode[tid] = 0; @k[tid] = 9;
  printf("A %%lld %%d %%s\n", $t, pid, str(args->oldname));
  printf("B %%lld %%d %%s\n", $t, pid, str(args->newname));
}
tracepoint:syscalls:sys_enter_renameat /@mine[pid]/ {
  $t = nsecs; @t[tid] = $t; @mode[tid] = 0; @k[tid] = 9;
  printf("A %%lld %%d %%s\n", $t, pid, str(args->oldname));
  printf("B %%lld %%d %%s\n", $t, pid, str(args->newname));
}
tracepoint:syscalls:sys_enter_renameat2 /@mine[pid]/ {
  $t = nsecs; @t[tid] = $t; @mode[tid] = args->flags; @k[tid] = 9;
  printf("A %%lld %%d %%s\n", $t, pid, str(args->oldname));
  printf("B %%lld %%d %%s\n", $t, pid, str(args->newname));
}
tracepoint:syscalls:sys_exit_rename, tracepoint:syscalls:sys_exit_renameat,
tracepoint:syscalls:sys_exit_renameat2 /@t[tid] && @k[tid] == 9/ {
  printf("N %%lld %%d %%lld %%d %%lld\n", @t[tid], pid, nsecs - @t[tid], @mode[tid], args->ret);
  delete(@t[tid]); delete(@mode[tid]); delete(@k[tid]);
}
END { clear(@mine); clear(@ok); clear(@oflags); clear(@ot); clear(@lfd);
      clear(@t); clear(@fd); clear(@off); clear(@k); clear(@len); clear(@mode); }
'''


def program(prefix, root_pid):
    """The bpftrace program for a data directory PREFIX (absolute) and the
    processes ROOT_PID starts from the program's start on."""
    prefix = prefix.rstrip('/') + '/'
    if len(prefix) > STRLEN - 40 or '"' in prefix or '\\' in prefix:
        raise ValueError('%s: a data directory path bpftrace cannot match (too long, or '
                         'quotes)' % prefix)
    return PROG % {'prefix': prefix, 'plen': len(prefix), 'root': root_pid}


class KernelIoTrace:
    """bpftrace recording the file I/O under a data directory of the
    processes ROOT_PID (default: this one) starts, from start() to stop(),
    into a text file (convert() makes the trace).  Context: root."""

    def __init__(self, datadir, txt_path, root_pid=None):
        self.datadir = os.path.abspath(datadir)
        self.root_pid = os.getpid() if root_pid is None else root_pid
        self.txt_path = txt_path
        self.proc = None
        self.origin_ns = None
        self.errors = []

    def start(self, timeout=60):
        """Start bpftrace; return once its probes are attached: bpftrace
        says "Attaching N probes..." before it attaches them, and runs
        BEGIN once they all are, which prints READY.  The trace's clock
        starts here (origin_ns)."""
        env = dict(os.environ, BPFTRACE_STRLEN=str(STRLEN),
                   BPFTRACE_PERF_RB_PAGES='8192', BPFTRACE_MAP_KEYS_MAX='65536')
        self.origin_ns = time.monotonic_ns()
        self.out = open(self.txt_path, 'w')
        self.proc = subprocess.Popen(['bpftrace', '-e', program(self.datadir, self.root_pid)],
                                     stdout=self.out, stderr=subprocess.PIPE, text=True,
                                     env=env)
        self.attached = threading.Event()
        self.thread = threading.Thread(target=self._stderr, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.attached.is_set():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError('bpftrace (the I/O trace) did not attach: %s'
                                   % ' / '.join(self.errors[-5:]))
            # BEGIN's line, on stdout: the file.
            with open(self.txt_path, errors='replace') as f:
                if ('\nREADY %d\n' % self.root_pid) in f.read(4096):
                    self.attached.set()
                    break
            time.sleep(0.1)

    def _stderr(self):
        for line in self.proc.stderr:
            if line.strip():
                self.errors.append(line.strip())

    def lost_events(self):
        """The events bpftrace said on stderr it lost ('Lost N events'; those
        it says on stdout convert() counts)."""
        return sum(int(e.split()[1]) for e in self.errors
                   if e.startswith('Lost ') and e.split()[1].isdigit())

    def stop(self):
        """Stop bpftrace (its last events written out); again: nothing."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.thread.join(10)
        self.out.close()
        self.proc = None


def relpath(path, datadir):
    """PATH as the trace names it: relative to the data directory."""
    prefix = datadir.rstrip('/') + '/'
    if path.startswith(prefix):
        path = path[len(prefix):]
    return os.path.normpath(path)


class Converter:
    """The state that turns the events, in start order, into records."""

    def __init__(self, datadir, origin_ns, out):
        self.datadir = datadir
        self.origin = origin_ns
        self.out = out
        self.path1 = {}         # (pid, start) -> the path of an open, unlink, rename
        self.path2 = {}         # (pid, start) -> a rename's new path
        self.ids = {}           # path -> file id
        self.next_id = 1
        self.fds = {}           # (pid, fd) -> [file id, open id, position, O_APPEND]
        self.next_open = 1
        self.size = {}          # file id -> size as the trace made it
        self.counts = {'records': 0, 'lost': 0, 'failed': 0, 'sync_file_range': 0,
                       'sync_range_records': 0,
                       'sync_file_range_bytes': 0, 'short_position': 0, 'creates': 0,
                       'reads': 0, 'writes': 0, 'read_bytes': 0, 'write_bytes': 0,
                       'fsyncs': 0, 'opens': 0, 'renames': 0, 'unlinks': 0,
                       'unnamed_opens': 0, 'unnamed_ops': 0}
        self.first_ns = None
        self.last_ns = 0
        self.lost_lines = []    # the first lines lost, for the reader of the JSON
        self.windows = []       # [start_ns, end_ns, {what: bytes}] on the trace's clock

    def file_of(self, path):
        rel = relpath(path, self.datadir)
        if rel not in self.ids:
            self.ids[rel] = self.next_id
            self.next_id += 1
        return self.ids[rel]

    def rec(self, t, dur, pid, file, op, flags=0, offset=0, length=0, open_id=0):
        tn = max(0, t - self.origin)
        if self.first_ns is None:
            self.first_ns = tn
        self.last_ns = max(self.last_ns, tn + dur)
        self.out.write(TRACE_REC.pack(tn, max(0, dur), pid, file, op, flags, offset, length,
                                      open_id))
        self.counts['records'] += 1

    def lost(self, parts):
        self.counts['lost'] += 1
        if len(self.lost_lines) < 10:
            self.lost_lines.append(' '.join(parts))

    def in_window(self, t, what, n):
        tn = t - self.origin
        for w in self.windows:
            if w[0] <= tn < w[1]:
                w[2][what] = w[2].get(what, 0) + n

    def grow(self, fid, end):
        if end > self.size.get(fid, 0):
            self.size[fid] = end

    def line(self, parts):
        kind, t, pid = parts[0], int(parts[1]), int(parts[2])
        c = self.counts
        if kind in 'AB':
            # '' when bpftrace could not read it (the string's page not yet
            # in memory at the syscall's entry: a fresh process's first
            # opens).
            (self.path1 if kind == 'A' else self.path2)[(pid, t)] = \
                parts[3] if len(parts) > 3 else ''
            return
        if kind in 'OUN':
            path = self.path1.pop((pid, t), None)
            if path is None:
                self.lost(parts)
                return
        if kind == 'O':
            fd, flags = int(parts[3]), int(parts[4])
            if not path:
                self.fds[(pid, fd)] = None
                c['unnamed_opens'] += 1
                return
            rel = relpath(path, self.datadir)
            new = rel not in self.ids
            fid = self.file_of(path)
            oid = self.next_open
            self.next_open += 1
            c['opens'] += 1
            self.fds[(pid, fd)] = [fid, oid, 0, bool(flags & O_APPEND)]
            if new and flags & O_CREAT:
                self.rec(t, 0, pid, fid, OP_CREATE, open_id=oid)
                self.size[fid] = 0
                c['creates'] += 1
            elif flags & O_TRUNC and self.size.get(fid, 0):
                self.rec(t, 0, pid, fid, OP_TRUNCATE, offset=0, open_id=oid)
                self.size[fid] = 0
            return
        if kind == 'U':
            dur, flag, ret = int(parts[3]), int(parts[4]), int(parts[5])
            if ret != 0 or flag & AT_REMOVEDIR:
                return
            rel = relpath(path, self.datadir) if path else None
            if rel and (not path.startswith('/') or rel != path):
                if rel in self.ids:
                    self.rec(t, dur, pid, self.ids.pop(rel), OP_UNLINK)
                    c['unlinks'] += 1
            return
        if kind == 'N':
            dur, flags, ret = int(parts[3]), int(parts[4]), int(parts[5])
            old, new = path, self.path2.pop((pid, t), None)
            if ret != 0 or not old or not new:
                if ret == 0:
                    c['unnamed_ops'] += 1
                return
            ro, rn = relpath(old, self.datadir), relpath(new, self.datadir)
            if ro not in self.ids:
                return      # not a file the trace knows (a directory, a file outside)
            fid = self.ids.pop(ro)
            replaced = self.ids.get(rn, 0)
            self.ids[rn] = fid
            self.rec(t, dur, pid, fid, OP_RENAME, flags=flags, offset=replaced)
            c['renames'] += 1
            return
        fd = int(parts[3])
        st = self.fds.get((pid, fd))
        if kind == 'C':
            self.fds.pop((pid, fd), None)
            return
        if st is None:
            if (pid, fd) in self.fds:
                c['unnamed_ops'] += 1
            else:
                self.lost(parts)    # an fd whose open the trace missed
            return
        fid, oid = st[0], st[1]
        if kind == 'L':
            ret = int(parts[4])
            if ret >= 0:
                st[2] = ret
            return
        dur = int(parts[4])
        if kind in 'WR':
            off, ret = int(parts[5]), int(parts[6])
            if ret < 0:
                c['failed'] += 1
                return
            if off < 0:
                off = self.size.get(fid, 0) if kind == 'W' and st[3] else st[2]
                st[2] = off + ret
                c['short_position'] += 1
            if ret == 0:
                return
            if kind == 'W':
                self.rec(t, dur, pid, fid, OP_WRITE, offset=off, length=ret, open_id=oid)
                self.grow(fid, off + ret)
                self.in_window(t, 'write_bytes', ret)
                c['writes'] += 1
                c['write_bytes'] += ret
            else:
                self.rec(t, dur, pid, fid, OP_READ, offset=off, length=ret, open_id=oid)
                c['reads'] += 1
                c['read_bytes'] += ret
        elif kind == 'S':
            op, ret = int(parts[5]), int(parts[6])
            if ret < 0:
                c['failed'] += 1
                return
            self.rec(t, dur, pid, fid, OP_FSYNC if op == 3 else OP_FDATASYNC, open_id=oid)
            c['fsyncs'] += 1
        elif kind == 'T':
            length, ret = int(parts[5]), int(parts[6])
            if ret < 0:
                c['failed'] += 1
                return
            self.rec(t, dur, pid, fid, OP_TRUNCATE, offset=length, open_id=oid)
            self.size[fid] = length
        elif kind == 'F':
            mode, off, length, ret = int(parts[5]), int(parts[6]), int(parts[7]), int(parts[8])
            if ret < 0:
                c['failed'] += 1
                return
            self.rec(t, dur, pid, fid, OP_FALLOCATE, flags=mode, offset=off, length=length,
                     open_id=oid)
            if not mode & 1:        # FALLOC_FL_KEEP_SIZE
                self.grow(fid, off + length)
        elif kind == 'Y':
            off, nbytes, flags, ret = (int(x) for x in parts[5:9])
            if ret < 0:
                c['failed'] += 1
                return
            self.rec(t, dur, pid, fid, OP_SYNC_RANGE, flags=flags, offset=off, length=nbytes,
                     open_id=oid)
            # nbytes 0: to the end of the file (as the trace made it)
            asked = nbytes or max(0, self.size.get(fid, 0) - off)
            c['sync_file_range'] += 1
            c['sync_range_records'] += 1
            c['sync_file_range_bytes'] += asked
            self.in_window(t, 'sync_file_range_bytes', asked)


def convert(txt_path, trace_path, datadir, origin_ns, tmpdir='/var/tmp', windows=()):
    """The trace (TRACE_PATH) of the events KernelIoTrace wrote to
    TXT_PATH: a dict of what it holds (records, first_ns, last_ns, the
    counts of Converter, bpftrace's losses as 'lost_events', and for
    each of WINDOWS ((start_ns, end_ns) on the trace's clock) the bytes
    written and those sync_file_range() asked for in it, as
    'window_bytes': [{'write_bytes': N, 'sync_file_range_bytes': N}])."""
    lost_events = 0
    sorted_path = txt_path + '.sorted'
    # Per-CPU buffers reach the file out of order: by start, then kind
    # (a path's line before its syscall's), stable.
    with open(sorted_path, 'w') as dst:
        env = dict(os.environ, LC_ALL='C')
        subprocess.run(['sort', '-s', '-k2,2n', '-k1,1', '-S', '512M', '-T', tmpdir, txt_path],
                       stdout=dst, check=True, env=env)
    try:
        with open(trace_path, 'wb') as out, open(sorted_path, errors='replace') as f:
            out.write(TRACE_HDR.pack(TRACE_MAGIC, 2, TRACE_REC.size))
            conv = Converter(datadir, origin_ns, out)
            conv.windows = [[a, b, {}] for a, b in windows]
            for line in f:
                parts = line.split()
                if not parts:
                    continue
                if parts[0] == 'Lost':
                    lost_events += int(parts[1])
                    continue
                if len(parts[0]) != 1 or len(parts) < 3 or not parts[1].isdigit():
                    continue        # 'Attaching N probes...' and the like
                conv.line(parts)
    finally:
        os.unlink(sorted_path)
    return dict(conv.counts, lost_events=lost_events, first_ns=conv.first_ns or 0,
                window_bytes=[w[2] for w in conv.windows], lost_lines=conv.lost_lines,
                last_ns=conv.last_ns, files=conv.next_id - 1, bytes=os.path.getsize(trace_path))


def have_bpftrace():
    return shutil.which('bpftrace') is not None
