# SPDX-License-Identifier: GPL-2.0-or-later
"""foliofs_trace - a mount's trace (foliofsctl trace) recorded over a run,
and the clock it is on, for the scripts that replay what a mount served
(pgcompare.py --trace, calibrate.py's simulator side, sim-fidelity.py).

  reading       trace_info() (version, records, the first record's time),
                trace_records() (every record, streamed), file_id()
  recording     MountTrace: start() right after a mount, stop() before
                its unmount; to_trace_ns() maps a unix time of the run onto
                the trace's clock
  keeping       keep_trace(): into a report directory, gzipped, or left
                beside it when too large
  programs      find_tool(): foliofsctl or foliofs-sim beside a foliofs

The trace's clock (trace/trace.h, fusefs/record.c): each record's time_ns
counts from the mount's start on CLOCK_MONOTONIC, an origin no file
states.  MountTrace.start() writes one byte through the mount between two
readings of the monotonic and the unix clocks, and stop() finds that write
in the trace: it began inside the readings, which pins the origin's unix
time to within half their interval (tens of microseconds; `uncertainty_ms`).
foliofs-sim's virtual clock starts at the trace's first record, so a unix
time U of the run is at U - origin - first_ns there.

Imported as a plain module, as foliofs_tools (its directory on sys.path;
installed in share/foliofs/python).
"""
import gzip
import os
import shutil
import struct
import sys
import time

TRACE_MAGIC = b'FFSTRACE'
TRACE_HDR = struct.Struct('<8sII16x')
# time_ns, dur_ns, pid, file, op, flags, offset, length, open (version 2;
# version 1 is the first 48 bytes, without open).
TRACE_REC = struct.Struct('<QQIIB3xIQQQ')
TRACE_REC_V1 = struct.Struct('<QQIIB3xIQQ')
OPS = ('?', 'write', 'read', 'fsync', 'fdatasync', 'truncate', 'fallocate', 'create',
       'unlink', 'rename', 'deadline', 'pace', 'sync_range')
# Each op's number by name (trace/trace.h's enum trace_op).
OP = {name: code for code, name in enumerate(OPS) if code}
OP_WRITE = OP['write']
# Above this, a trace is not copied into a report directory (keep_trace()).
KEEP_MAX_BYTES = 64 << 20

# Run as the mount's user: a file of its own on the mount, one byte
# written between two readings of the clocks, the file removed.
MARK = r'''
import os, sys, time
path = sys.argv[1]
fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
ino = os.fstat(fd).st_ino
u0, m0 = time.time_ns(), time.monotonic_ns()
os.pwrite(fd, b'm', 0)
m1, u1 = time.monotonic_ns(), time.time_ns()
os.close(fd)
os.unlink(path)
print(ino, m0, m1, u0, u1)
'''
MARK_NAME = '.foliofs-trace-mark'


def file_id(ino):
    """The trace's file id of backing inode INO (fusefs's ffs_trace_file_id())."""
    return (ino ^ (ino >> 32)) & 0xffffffff


def _header(f, path):
    magic, version, rec_size = TRACE_HDR.unpack(f.read(TRACE_HDR.size))
    if magic != TRACE_MAGIC or (version, rec_size) not in ((1, 48), (2, 56)):
        raise ValueError('%s: not a foliofs trace (version 1 or 2)' % path)
    return version, rec_size


def trace_info(path):
    """{'version', 'records', 'bytes', 'first_ns'} of the trace at PATH
    (first_ns: the first record's time, None for an empty trace)."""
    size = os.path.getsize(path)
    with open(path, 'rb') as f:
        version, rec_size = _header(f, path)
        first = f.read(8)
    return {'version': version, 'records': (size - TRACE_HDR.size) // rec_size,
            'bytes': size, 'first_ns': struct.unpack('<Q', first)[0] if first else None}


def trace_records(path):
    """Each record of the trace at PATH as a dict (time_ns, dur_ns, pid,
    file, op as its name, flags, offset, length, open), in file order."""
    with open(path, 'rb') as f:
        version, rec_size = _header(f, path)
        rec = TRACE_REC if version == 2 else TRACE_REC_V1
        while True:
            buf = f.read(rec_size * 4096)
            if not buf:
                return
            for vals in rec.iter_unpack(buf):
                t, dur, pid, fid, op, flags, off, length = vals[:8]
                yield {'time_ns': t, 'dur_ns': dur, 'pid': pid, 'file': fid,
                       'op': OPS[op] if op < len(OPS) else '?', 'flags': flags,
                       'offset': off, 'length': length, 'open': vals[8] if version == 2 else 0}


class MountTrace:
    """The trace of the foliofs mount MNT into PATH (an absolute path the
    daemon can create: it writes the file), from start() to stop(), with
    the unix time of its clock's origin.  RUN(cmd) runs CMD as the
    mount's user (who alone may use it) and returns its output, raising
    on failure; FOLIOFSCTL is the foliofsctl to use."""

    def __init__(self, foliofsctl, mnt, path, run):
        self.foliofsctl = foliofsctl
        self.mnt = mnt
        self.path = path
        self.run = run
        self.mark = None            # (ino, m0, m1, u0, u1) of the marking write
        self.origin_unix_ns = None  # the unix time of the trace's time 0
        self.uncertainty_ns = None
        self.info = None            # trace_info() once stopped

    def start(self):
        """Start recording, then write the mark (before anything else uses
        the mount, ideally: it is then the trace's first records)."""
        self.run([self.foliofsctl, 'trace', self.mnt, 'start', self.path])
        out = self.run([sys.executable, '-c', MARK, os.path.join(self.mnt, MARK_NAME)])
        self.mark = tuple(int(x) for x in out.split())

    def stop(self):
        """Stop recording and find the mark: the origin from then on."""
        self.run([self.foliofsctl, 'trace', self.mnt, 'stop'])
        self.info = trace_info(self.path)
        ino, m0, m1, u0, u1 = self.mark
        fid = file_id(ino)
        for r in trace_records(self.path):
            if r['op'] == 'write' and r['file'] == fid and r['offset'] == 0 \
                    and r['length'] == 1:
                break
        else:
            raise RuntimeError('%s: the marking write (file %d) is not in the trace'
                               % (self.path, fid))
        # The write began at the daemon between m0 and m1 (monotonic), at
        # trace time r['time_ns']; the unix clock ran the monotonic one's
        # offset ahead, read on both sides of it.
        offset = ((u0 - m0) + (u1 - m1)) / 2
        self.origin_unix_ns = (m0 + m1) / 2 - r['time_ns'] + offset
        self.uncertainty_ns = (m1 - m0) / 2 + abs((u0 - m0) - (u1 - m1)) / 2

    def to_trace_ns(self, unix_ms):
        """UNIX_MS (ms since the epoch) on the trace's clock, in ns."""
        return int(round(unix_ms * 1e6 - self.origin_unix_ns))

    def json(self):
        """What maps the run onto the trace (stop() first)."""
        return dict(self.info, origin_unix_ms=self.origin_unix_ns / 1e6,
                    uncertainty_ms=self.uncertainty_ns / 1e6)

    def windows(self, iterations):
        """ITERATIONS (dicts with iteration, start_unix_ms, end_unix_ms and
        stop_end_unix_ms, as pgcompare's rows) on the trace's clock: a dict
        of iteration, start_ns, end_ns, stop_end_ns each."""
        return [{'iteration': int(r['iteration']),
                 'start_ns': self.to_trace_ns(int(r['start_unix_ms'])),
                 'end_ns': self.to_trace_ns(int(r['end_unix_ms'])),
                 'stop_end_ns': self.to_trace_ns(int(r['stop_end_unix_ms']))}
                for r in iterations]


def keep_trace(path, outdir, bigdir, name, limit=KEEP_MAX_BYTES):
    """Move the trace PATH where it is kept, and say where: gzipped into
    OUTDIR as NAME.trace.gz when it is at most LIMIT bytes, else as it is
    into BIGDIR as NAME-YYYYmmdd-HHMMSS.trace (a report directory is no
    place for hundreds of MB).  The path it is now at."""
    if os.path.getsize(path) <= limit:
        dst = os.path.join(outdir, name + '.trace.gz')
        with open(path, 'rb') as src, gzip.open(dst, 'wb', compresslevel=6) as out:
            shutil.copyfileobj(src, out, 1 << 20)
        os.unlink(path)
        return dst
    dst = os.path.join(bigdir, '%s-%s.trace' % (name, time.strftime('%Y%m%d-%H%M%S')))
    shutil.move(path, dst)
    return dst


def find_tool(foliofs, name, env):
    """The program NAME (foliofsctl, foliofs-sim) that goes with the daemon
    FOLIOFS: $ENV if set, else beside it in a build tree (tools/, sim/) or
    an installation, else on PATH; None if there is none."""
    if os.environ.get(env):
        return os.environ[env]
    top = os.path.dirname(os.path.abspath(foliofs))
    for cand in (os.path.join(top, sub, name) for sub in ('tools', 'sim', '')):
        if os.access(cand, os.X_OK):
            return cand
    return shutil.which(name)
