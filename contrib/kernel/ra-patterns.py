#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Run named read patterns on this machine's kernel and on a foliofs mount,
and compare the folios each leaves in its page cache, folio for folio.

Patterns (on a 64 MiB file, 8 KiB reads, each handle its own open(2), so
its own struct file and file_ra_state):

  one-stream           one handle reads the whole file sequentially
  interleaved          two handles, A reads [0, 32M) and B [32M, 64M),
                       alternating reads
  reopen               a handle reads [0, 16M) and closes; a new one reads
                       [16M, 32M)
  random-cross-mark    A reads [0, 8M) (ramps up, leaves marked folios);
                       B, fresh, does 32 reads at seeded random offsets in
                       [16M, 64M), then one at A's last read end + 8 KiB
                       (inside A's async window)
  random-cross-mark-streamed
                       the same, but B first streams [56M, 64M), so its own
                       readahead order is high (its random reads then stay
                       below 56M)
  random-cross-mark-short
                       as -streamed, but A reads only [0, 152K), so the
                       marked folio B meets at 160K is small (32K): Linux
                       6.17+ sizes B's window by B's own kept order, 6.16
                       by the marked folio's
  evict-reread         one handle reads the whole file; [16M, 24M) is
                       evicted (kernel: POSIX_FADV_DONTNEED; foliofs:
                       .foliofs/evict); a new handle reads the whole file
  stream-cross-reads   a handle does 32 reads at seeded random offsets in
                       [0, 64M) (4K folios); a new handle then reads the
                       whole file, its windows crossing them
  stream-cross-writes  the same with 32 random 8 KiB writes (8K folios,
                       the write path's), fsynced, before the stream
  stream-cross-mixed   16 random reads and 16 random writes, interleaved,
                       then one stream from 16M to the end: a stream that
                       does not start the file
  parallel-scan        PostgreSQL's parallel sequential scan: 3 handles
                       take 1M chunks in turn and read each 8K at a time,
                       one read each in turn; each meets the marks of the
                       others' windows, and its own windows start inside
                       their small folios (page_cache_next_miss()'s
                       xarray walk from a sibling entry)
  parallel-scan-cross  16 random reads and 16 random writes, interleaved
                       (as stream-cross-mixed), then parallel-scan
  resume-in-folio      A reads [0, 160K) (its windows leave [0, 384K)
                       cached, in 4K to 64K folios); B, fresh, reads 8K
                       at 384K: the history before it is counted by
                       page_cache_prev_miss()'s xarray walk from page 15
                       of a 64K folio, which reports 32 pages, not 96

Backends:
  kernel   (root) a file system image in /tmp on a loop device attached
           with --direct-io=on, for each of --fs (ext4, xfs); the loop
           device's read_ahead_kb set to --ra-kb (and put back); the file
           written, then evicted with POSIX_FADV_DONTNEED before each
           pattern; the events filemap:mm_filemap_add_to_page_cache and
           mm_filemap_delete_from_page_cache, filtered by the file's
           inode and device, traced in a tracefs instance of its own, and
           the folios present after the pattern rebuilt from them
           (checked against the pages resident after the pattern's
           reads have completed: mincore and cachestat).  A pattern
           during which a folio it did not evict was deleted (the
           host's reclaim) runs again, up to three times, each retry
           named on stderr with /proc/vmstat's reclaim counters.
  foliofs  build/foliofs (or --foliofs) over a backing directory in /tmp,
           -o folio_policy=kernel,cache=direct,readahead_kb=N and every
           --opt (e.g. --opt ra_model=6.16), mounted afresh for each
           pattern; the same reads through the mount; the file's lines of
           .foliofs/folios after the pattern.

Output per pattern: the folios (index in 4 KiB pages, order), a histogram
by order; with --compare (both backends) the differences folio for folio
and the histograms side by side; --json FILE writes the raw results.
Exit status: 0, 1 when --compare found differences, 2 for bad usage or a
failure, 77 when the kernel backend cannot run here (not root, no tracefs,
no loop device), with the reason on stderr.

Everything set up is undone on exit, also on SIGINT/SIGTERM: mounts, loop
devices, the tracefs instance (and tracefs itself if it was mounted here),
read_ahead_kb, temporary directories.

    sudo contrib/kernel/ra-patterns.py --backend kernel --fs ext4,xfs --json out.json
    sudo contrib/kernel/ra-patterns.py --compare --fs ext4 --opt ra_model=6.17

Usable as a module (tests/test_ra_kernel.py): run_kernel(), run_foliofs(),
compare().
"""

import argparse
import collections
import ctypes
import datetime
import json
import mmap
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

KiB = 1 << 10
MiB = 1 << 20
PAGE = 4096
READ = 8 * KiB
FILE_SIZE = 64 * MiB
SEED = 26
NR_RANDOM = 32
DEFAULT_RA_KB = 2048
# Runs of a kernel pattern while folios it did not evict are deleted.
ATTEMPTS = 3
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVENTS = ('mm_filemap_add_to_page_cache', 'mm_filemap_delete_from_page_cache')

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), '..', 'lib'))
import foliofs_tools  # noqa: E402
from foliofs_tools import (  # noqa: E402
    Signals, Skip, Undo, bdi_defaults, cached_pages, foliofs_evict, foliofs_folios,
    kernel_skip_reason, rd, run, tracefs_root, umount_fuse, wait_mounted, wr)


# --------------------------------------------------------------------------
# patterns: each takes a Target (open, evict) and does its reads

class Target:
    """Where a pattern reads: PATH, and how to evict a range of it."""

    def __init__(self, path, evict):
        self.path = path
        self.evict = evict      # evict(start, length), in bytes

    def open(self):
        return os.open(self.path, os.O_RDONLY)


def read_range(fd, start, end):
    for off in range(start, end, READ):
        n = len(os.pread(fd, READ, off))
        if n != min(READ, FILE_SIZE - off):
            raise RuntimeError('short read at %d: %d bytes' % (off, n))


def p_one_stream(t):
    fd = t.open()
    read_range(fd, 0, FILE_SIZE)
    os.close(fd)


def p_interleaved(t):
    a, b = t.open(), t.open()
    half = FILE_SIZE // 2
    for off in range(0, half, READ):
        os.pread(a, READ, off)
        os.pread(b, READ, half + off)
    os.close(a)
    os.close(b)


def p_reopen(t):
    fd = t.open()
    read_range(fd, 0, 16 * MiB)
    os.close(fd)
    fd = t.open()
    read_range(fd, 16 * MiB, 32 * MiB)
    os.close(fd)


def random_offsets(lo, hi, n=NR_RANDOM, seed=SEED):
    """N distinct READ-aligned offsets in [LO, HI), in an order fixed by SEED."""
    return [i * READ for i in random.Random(seed).sample(range(lo // READ, hi // READ), n)]


def cross_mark(t, a_end, b_stream):
    """A reads [0, A_END); B (fresh) streams B_STREAM (a range, or None),
    does random reads, then reads at A_END + READ."""
    a = t.open()
    read_range(a, 0, a_end)
    b = t.open()
    hi = FILE_SIZE
    if b_stream:
        read_range(b, *b_stream)
        hi = b_stream[0]
    for off in random_offsets(16 * MiB, hi):
        os.pread(b, READ, off)
    os.pread(b, READ, a_end + READ)
    os.close(b)
    os.close(a)


def p_random_cross_mark(t):
    cross_mark(t, 8 * MiB, None)


def p_random_cross_mark_streamed(t):
    cross_mark(t, 8 * MiB, (56 * MiB, FILE_SIZE))


def p_random_cross_mark_short(t):
    # A's windows are then [0, 32K), [32K, 160K) and [160K, 384K), the
    # last marked at its first folio, 160K: where B reads.
    cross_mark(t, 152 * KiB, (56 * MiB, FILE_SIZE))


def p_evict_reread(t):
    fd = t.open()
    read_range(fd, 0, FILE_SIZE)
    os.close(fd)
    t.evict(16 * MiB, 8 * MiB)
    fd = t.open()
    read_range(fd, 0, FILE_SIZE)
    os.close(fd)


def random_io(t, reads, writes, lo=0, hi=FILE_SIZE, seed=SEED + 1):
    """READS random 8 KiB reads and WRITES random 8 KiB writes through one
    handle, at distinct READ-aligned offsets in [LO, HI), interleaved as
    they come from SEED; the writes fsynced, so nothing stays dirty."""
    offs = random_offsets(lo, hi, reads + writes, seed)
    fd = os.open(t.path, os.O_RDWR)
    data = bytes(range(256)) * (READ // 256)
    for i, off in enumerate(offs):
        if i % 2 and writes or not reads:
            writes -= 1
            if os.pwrite(fd, data, off) != READ:
                raise RuntimeError('short write at %d' % off)
        else:
            reads -= 1
            os.pread(fd, READ, off)
    os.fsync(fd)
    os.close(fd)


def p_stream_cross_reads(t):
    random_io(t, NR_RANDOM, 0)
    fd = t.open()
    read_range(fd, 0, FILE_SIZE)
    os.close(fd)


def p_stream_cross_writes(t):
    random_io(t, 0, NR_RANDOM)
    fd = t.open()
    read_range(fd, 0, FILE_SIZE)
    os.close(fd)


def p_stream_cross_mixed(t):
    random_io(t, NR_RANDOM // 2, NR_RANDOM // 2)
    fd = t.open()
    read_range(fd, 16 * MiB, FILE_SIZE)
    os.close(fd)


def parallel_chunks(t, nr=3, chunk=MiB):
    """PostgreSQL's parallel sequential scan (heapam's table_block_parallelscan_*):
    NR processes, each through an open of its own, take CHUNK-sized runs of
    blocks in turn and read each in order, 8 KiB at a time (1 MiB: 128
    blocks, PostgreSQL's chunk for a table of 160,000 blocks, as pgbench's
    at scale 100).  The processes advance one read each in turn, and one
    that ends its chunk takes the next unclaimed one."""
    fds = [t.open() for _ in range(nr)]
    nr_chunks = FILE_SIZE // chunk
    next_chunk = 0
    pos = [None] * nr           # (offset, end) of each process's chunk
    while True:
        busy = False
        for i in range(nr):
            if pos[i] is None or pos[i][0] >= pos[i][1]:
                if next_chunk >= nr_chunks:
                    pos[i] = None
                    continue
                pos[i] = (next_chunk * chunk, (next_chunk + 1) * chunk)
                next_chunk += 1
            off, end = pos[i]
            os.pread(fds[i], READ, off)
            pos[i] = (off + READ, end)
            busy = True
        if not busy:
            break
    for fd in fds:
        os.close(fd)


def p_parallel_scan(t):
    parallel_chunks(t)


def p_parallel_scan_cross(t):
    random_io(t, NR_RANDOM // 2, NR_RANDOM // 2)
    parallel_chunks(t)


def p_resume_in_folio(t):
    fd = t.open()
    read_range(fd, 0, 160 * KiB)
    other = t.open()
    os.pread(other, READ, 384 * KiB)
    os.close(other)
    os.close(fd)


PATTERNS = collections.OrderedDict([
    ('one-stream', p_one_stream),
    ('interleaved', p_interleaved),
    ('reopen', p_reopen),
    ('random-cross-mark', p_random_cross_mark),
    ('random-cross-mark-streamed', p_random_cross_mark_streamed),
    ('random-cross-mark-short', p_random_cross_mark_short),
    ('evict-reread', p_evict_reread),
    ('stream-cross-reads', p_stream_cross_reads),
    ('stream-cross-writes', p_stream_cross_writes),
    ('stream-cross-mixed', p_stream_cross_mixed),
    ('parallel-scan', p_parallel_scan),
    ('parallel-scan-cross', p_parallel_scan_cross),
    ('resume-in-folio', p_resume_in_folio),
])


# --------------------------------------------------------------------------
# the test file

def write_file(path, size=FILE_SIZE):
    """SIZE bytes of seeded noise, synced."""
    rng = random.Random(SEED)
    with open(path, 'wb') as f:
        for _ in range(size // MiB):
            f.write(rng.randbytes(MiB))
        f.flush()
        os.fsync(f.fileno())


def histogram(folios):
    h = collections.Counter(o for _, o in folios)
    return {o: h[o] for o in sorted(h)}


# --------------------------------------------------------------------------
# the kernel backend

class Tracer:
    """A tracefs instance recording the two filemap events of one inode."""

    LINE = re.compile(r'(mm_filemap_add_to_page_cache|mm_filemap_delete_from_page_cache): '
                      r'dev \d+:\d+ ino ([0-9a-f]+) pfn=0x[0-9a-f]+ ofs=(\d+) order=(\d+)')

    def __init__(self, root, undo):
        self.dir = os.path.join(root, 'instances', 'ra-patterns-%d' % os.getpid())
        if not os.path.isdir(os.path.join(root, 'events', 'filemap', EVENTS[0])):
            raise Skip('tracefs has no filemap:%s event' % EVENTS[0])
        try:
            os.mkdir(self.dir)
        except OSError as e:
            raise Skip('cannot make a tracefs instance %s: %s' % (self.dir, e.strerror))
        undo.push('rmdir ' + self.dir, self._remove)
        wr(os.path.join(self.dir, 'buffer_size_kb'), '16384')

    def _remove(self):
        for ev in EVENTS:
            try:
                wr(self._ev(ev, 'enable'), '0')
            except OSError:
                pass
        os.rmdir(self.dir)

    def _ev(self, ev, name):
        return os.path.join(self.dir, 'events', 'filemap', ev, name)

    def start(self, st):
        """Record the events of the file whose stat is ST, from empty."""
        kdev = (os.major(st.st_dev) << 20) | os.minor(st.st_dev)
        for ev in EVENTS:
            wr(self._ev(ev, 'filter'), 'i_ino == %d && s_dev == %d' % (st.st_ino, kdev))
            wr(self._ev(ev, 'enable'), '1')
        wr(os.path.join(self.dir, 'trace'), '')
        wr(os.path.join(self.dir, 'tracing_on'), '1')

    def stop(self):
        """The events since start(): [(add?, index, order)], in time order."""
        wr(os.path.join(self.dir, 'tracing_on'), '0')
        for ev in EVENTS:
            wr(self._ev(ev, 'enable'), '0')
        lost = 0
        for cpu in os.listdir(os.path.join(self.dir, 'per_cpu')):
            stats = rd(os.path.join(self.dir, 'per_cpu', cpu, 'stats'))
            lost += int(re.search(r'^overrun: (\d+)', stats, re.M).group(1))
        if lost:
            raise RuntimeError('the trace buffer lost %d events: enlarge buffer_size_kb' % lost)
        out = []
        for line in rd(os.path.join(self.dir, 'trace')).splitlines():
            m = self.LINE.search(line)
            if m:
                out.append((m.group(1) == EVENTS[0], int(m.group(3)) // PAGE, int(m.group(4))))
        return out


def folios_from_events(events):
    """The folios present after EVENTS (from an empty cache), and what did
    not add up (an add over a present folio, a delete of an absent one)."""
    present, odd = {}, []
    for add, index, order in events:
        if add:
            if index in present:
                odd.append('add over a present folio at %d' % index)
            present[index] = order
        elif present.pop(index, None) is None:
            odd.append('delete of an absent folio at %d' % index)
    return sorted(present.items()), odd


def deleted_in_trace(events):
    """(index, order) of every folio EVENTS delete: a pattern's own
    evictions, or the host's reclaim while the pattern ran."""
    return [(index, order) for add, index, order in events if not add]


def foreign_deletes(deleted, evicted):
    """Of the DELETED (index, order) folios, those no range in EVICTED
    ((start, length) in bytes, as the pattern asked; length 0 = to the
    end) covers: deleted by someone else (the host's reclaim)."""
    def ours(index, order):
        first, end = index * PAGE, (index + (1 << order)) * PAGE
        return any(first >= s and (not n or end <= s + n) for s, n in evicted)
    return [(i, o) for i, o in deleted if not ours(i, o)]


# /proc/vmstat's counters of the host's page cache reclaim.
RECLAIM_COUNTERS = ('pgsteal_kswapd', 'pgsteal_direct', 'pgsteal_khugepaged',
                    'drop_pagecache')


def reclaim_counters():
    out = {}
    for line in rd('/proc/vmstat').splitlines():
        key, _, val = line.partition(' ')
        if key in RECLAIM_COUNTERS:
            out[key] = int(val)
    return out


def diff_counters(before, after):
    return {k: after.get(k, 0) - v for k, v in before.items()}


def fadvise_dontneed(path, start=0, length=0):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, start, length, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident_indexes(path):
    """The indexes of PATH's uptodate pages in the page cache: mincore(2)
    over a read-only shared mapping of it (mapping faults nothing in)."""
    size = os.path.getsize(path)
    if not size:
        return set()
    libc = foliofs_tools.libc()
    nr = (size + PAGE - 1) // PAGE
    vec = ctypes.create_string_buffer(nr)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            err = ctypes.get_errno()
            raise OSError(err, 'mmap %s: %s' % (path, os.strerror(err)))
        try:
            if libc.mincore(addr, size, vec) != 0:
                err = ctypes.get_errno()
                raise OSError(err, 'mincore %s: %s' % (path, os.strerror(err)))
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return {i for i, v in enumerate(vec.raw[:nr]) if v & 1}


def settled_resident(path, timeout=10.0):
    """The indexes of PATH's pages in the page cache once no read of it is
    in flight: a pattern's last readahead may still be reading when it
    returns, and mincore sees such a folio only when its I/O completes.
    Waits until mincore's set is as large as cachestat's count."""
    deadline = time.monotonic() + timeout
    while True:
        resident = resident_indexes(path)
        cached = cached_pages(path)
        if len(resident) == cached:
            return resident
        if time.monotonic() > deadline:
            raise RuntimeError('%s: %d pages cached, %d uptodate after %.0f s: '
                               'a read that never completes?'
                               % (path, cached, len(resident), timeout))
        time.sleep(0.01)


def untraced_pages(resident, folios):
    """Of the RESIDENT page indexes, those no traced folio holds, and how
    many traced pages are no longer resident (reclaim after the trace
    stopped: its deletes were not traced)."""
    traced = set()
    for index, order in folios:
        traced.update(range(index, index + (1 << order)))
    return sorted(resident - traced), len(traced - resident)


class LoopFs:
    """A FSTYPE file system on a loop device over an image in WORK, mounted
    at WORK/mnt; read_ahead_kb of the loop device set to RA_KB."""

    def __init__(self, fstype, work, ra_kb, undo):
        mkfs = {'ext4': ['mkfs.ext4', '-q', '-F'], 'xfs': ['mkfs.xfs', '-q', '-f']}.get(fstype)
        if mkfs is None:
            raise ValueError('file system %r: ext4 or xfs' % fstype)
        if not shutil.which(mkfs[0]):
            raise Skip('%s is missing (apt-get install %s)'
                       % (mkfs[0], 'xfsprogs' if fstype == 'xfs' else 'e2fsprogs'))
        self.img = os.path.join(work, fstype + '.img')
        self.mnt = os.path.join(work, fstype)
        os.mkdir(self.mnt)
        with open(self.img, 'wb') as f:
            f.truncate(512 * MiB)
        run(mkfs + [self.img])
        r = subprocess.run(['losetup', '-f', '--show', '--direct-io=on', self.img],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise Skip('no loop device: ' + r.stderr.strip())
        self.dev = r.stdout.strip()
        undo.push('losetup -d ' + self.dev, run, ['losetup', '-d', self.dev])
        self.ra_path = '/sys/block/%s/queue/read_ahead_kb' % os.path.basename(self.dev)
        old = rd(self.ra_path).strip()
        undo.push('read_ahead_kb of ' + self.dev, wr, self.ra_path, old)
        wr(self.ra_path, str(ra_kb))
        self.bdi_found = bdi_defaults(self.dev, undo)
        run(['mount', self.dev, self.mnt])
        undo.push('umount ' + self.mnt, run, ['umount', self.mnt])
        self.path = os.path.join(self.mnt, 'f')
        write_file(self.path)

    def evict_all(self):
        for _ in range(10):
            fadvise_dontneed(self.path)
            # cachestat, not mincore: a folio still under read I/O is
            # locked, so the fadvise skips it, and mincore does not see it.
            if cached_pages(self.path) == 0:
                return
            time.sleep(0.05)
        raise RuntimeError('%s: pages stay cached after POSIX_FADV_DONTNEED' % self.path)


def run_kernel(fstypes=('ext4',), patterns=None, ra_kb=DEFAULT_RA_KB, log=None):
    """Every pattern on the kernel, for each file system type: a list of
    results {backend, fs, pattern, folios [(index, order)], histogram,
    odd, resident_pages, reclaimed_after_trace, deleted_in_trace,
    foreign_deletes, attempts, host_reclaim}.  Raises Skip when it cannot
    run here."""
    why = kernel_skip_reason()
    if why:
        raise Skip(why)
    patterns = list(patterns or PATTERNS)
    undo = Undo()
    results = []
    with Signals():
        try:
            tracer = Tracer(tracefs_root(undo), undo)
            work = tempfile.mkdtemp(prefix='ra-patterns-')
            undo.push('rm -r ' + work, shutil.rmtree, work)
            for fstype in fstypes:
                lfs = LoopFs(fstype, work, ra_kb, undo)
                st = os.stat(lfs.path)
                evicted = []

                def evict(start, length, path=lfs.path):
                    evicted.append((start, length))
                    fadvise_dontneed(path, start, length)
                target = Target(lfs.path, evict)
                for name in patterns:
                    # The kernel's folios are those of an undisturbed run:
                    # a folio deleted by no eviction of the pattern's own
                    # (the host's reclaim, under the load of whatever else
                    # runs) changes what readahead finds cached, so the
                    # pattern runs again, up to ATTEMPTS times; the last
                    # attempt is kept, its foreign deletes named.
                    for attempt in range(1, ATTEMPTS + 1):
                        lfs.evict_all()
                        del evicted[:]
                        before = reclaim_counters()
                        tracer.start(st)
                        PATTERNS[name](target)
                        events = tracer.stop()
                        after = reclaim_counters()
                        foreign = foreign_deletes(deleted_in_trace(events), evicted)
                        if not foreign:
                            break
                        print('ra-patterns: %s on %s, attempt %d of %d: %d folios deleted '
                              'by no eviction of its own (first %d/%d; host reclaim %s)'
                              % (name, fstype, attempt, ATTEMPTS, len(foreign),
                                 foreign[0][0], foreign[0][1],
                                 diff_counters(before, after)), file=sys.stderr)
                    folios, odd = folios_from_events(events)
                    resident = settled_resident(lfs.path)
                    res = {'backend': 'kernel', 'fs': fstype, 'pattern': name,
                           'folios': folios, 'histogram': histogram(folios), 'odd': odd,
                           'events': len(events), 'resident_pages': len(resident),
                           'deleted_in_trace': deleted_in_trace(events),
                           'foreign_deletes': foreign, 'attempts': attempt,
                           'host_reclaim': diff_counters(before, after)}
                    # Every resident page must be in a traced folio.  A
                    # traced page that is gone was reclaimed after the
                    # trace stopped (its delete was not traced): noted,
                    # not odd, as the kernel may reclaim at any time.
                    untraced, gone = untraced_pages(resident, folios)
                    if untraced:
                        res['odd'].append('%d resident pages in no traced folio, from index %d'
                                          % (len(untraced), untraced[0]))
                    res['reclaimed_after_trace'] = gone
                    if log:
                        log(res)
                    results.append(res)
                # This file system's mount and loop device go before the next.
                while undo.steps and undo.steps[-1][0] != 'rm -r ' + work:
                    what, fn, args = undo.steps.pop()
                    fn(*args)
        finally:
            undo.close()
    return results


# --------------------------------------------------------------------------
# the foliofs backend

def wait_idle(mnt, ino, timeout=10):
    """Until no folio of INO has a read in flight (every folio uptodate)."""
    deadline = time.monotonic() + timeout
    while True:
        folios, flags = foliofs_folios(mnt, ino)
        if all('u' in fl for fl in flags.values()) or time.monotonic() > deadline:
            return folios, flags
        time.sleep(0.01)


def run_foliofs(binary=None, patterns=None, ra_kb=DEFAULT_RA_KB, opts=(), log=None):
    """Every pattern through a fresh foliofs mount each: results as
    run_kernel()'s (fs "foliofs"), plus the daemon's output and options."""
    binary = binary or os.environ.get('FOLIOFS') or os.path.join(REPO, 'build', 'foliofs')
    if not os.access(binary, os.X_OK):
        raise Skip('%s is not built' % binary)
    if not os.path.exists('/dev/fuse'):
        raise Skip('/dev/fuse is missing')
    patterns = list(patterns or PATTERNS)
    options = ['folio_policy=kernel', 'cache=direct', 'readahead_kb=%d' % ra_kb] + list(opts)
    undo = Undo()
    results = []
    with Signals():
        try:
            work = tempfile.mkdtemp(prefix='ra-patterns-ffs-')
            undo.push('rm -r ' + work, shutil.rmtree, work)
            back, mnt = os.path.join(work, 'back'), os.path.join(work, 'mnt')
            os.mkdir(back)
            os.mkdir(mnt)
            write_file(os.path.join(back, 'f'))
            for name in patterns:
                out = tempfile.TemporaryFile()
                proc = subprocess.Popen([binary, '-f', '-o', ','.join(options), back, mnt],
                                        stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT)
                undo.push('unmount ' + mnt, umount_fuse, mnt, proc)
                wait_mounted(mnt, proc)
                path = os.path.join(mnt, 'f')
                ino = os.stat(path).st_ino
                evicted = []

                def evict(s, n, ino=ino):
                    wait_idle(mnt, ino)
                    evicted.append(foliofs_evict(mnt, ino, s, n))
                PATTERNS[name](Target(path, evict))
                folios, flags = wait_idle(mnt, ino)
                undo.steps.pop()
                umount_fuse(mnt, proc)
                out.seek(0)
                res = {'backend': 'foliofs', 'fs': 'foliofs', 'pattern': name,
                       'folios': folios, 'histogram': histogram(folios), 'odd': [],
                       'marked': sorted(i for i, fl in flags.items() if 'r' in fl),
                       'evicted': evicted, 'options': options,
                       'exit_status': proc.returncode,
                       'output': out.read().decode(errors='replace')}
                out.close()
                if proc.returncode != 0:
                    res['odd'].append('foliofs exited with status %d' % proc.returncode)
                if log:
                    log(res)
                results.append(res)
        finally:
            undo.close()
    return results


# --------------------------------------------------------------------------
# comparing and printing

def compare(a, b):
    """Differences between two results of one pattern: a list of lines
    (empty when the folios are the same)."""
    fa, fb = dict(a['folios']), dict(b['folios'])
    la, lb = '%s/%s' % (a['backend'], a['fs']), '%s/%s' % (b['backend'], b['fs'])
    diffs = []
    for index in sorted(set(fa) | set(fb)):
        oa, ob = fa.get(index), fb.get(index)
        if oa == ob:
            continue
        diffs.append('page %6d (%6.2f MiB): %s %s, %s %s'
                     % (index, index * PAGE / MiB,
                        la, 'order %d' % oa if oa is not None else '-',
                        lb, 'order %d' % ob if ob is not None else '-'))
    return diffs


def size_name(order):
    kib = (PAGE << order) // KiB
    return '%dM' % (kib // 1024) if kib >= 1024 else '%dK' % kib


def histogram_table(results):
    """The histograms of RESULTS side by side, as lines."""
    orders = sorted({o for r in results for o in r['histogram']})
    cols = ['%s/%s' % (r['backend'], r['fs']) if r['backend'] == 'kernel' else 'foliofs'
            for r in results]
    lines = ['  %-6s' % 'folio' + ''.join('%16s' % c for c in cols)]
    for o in orders:
        lines.append('  %-6s' % size_name(o) +
                     ''.join('%16d' % r['histogram'].get(o, 0) for r in results))
    lines.append('  %-6s' % 'MiB' + ''.join(
        '%16.2f' % (sum(PAGE << o for _, o in r['folios']) / MiB) for r in results))
    share = []
    for r in results:
        total = sum(PAGE << o for _, o in r['folios'])
        big = sum(PAGE << o for _, o in r['folios'] if o == 9)
        share.append('%15.0f%%' % (100.0 * big / total) if total else '%16s' % '-')
    lines.append('  %-6s' % 'in 2M' + ''.join(share))
    return lines


def folio_runs(folios):
    """The folios as runs of one order: 'START-END: ORDER xN' lines."""
    runs = []
    for index, order in folios:
        if runs and runs[-1][2] == order and runs[-1][1] == index:
            runs[-1][1] = index + (1 << order)
            runs[-1][3] += 1
        else:
            runs.append([index, index + (1 << order), order, 1])
    return ['    [%8.3f, %8.3f) MiB  %4s x %d' % (s * PAGE / MiB, e * PAGE / MiB,
                                                  size_name(o), n)
            for s, e, o, n in runs]


def print_results(results, do_compare, out=sys.stdout):
    ndiff = 0
    by_pattern = collections.OrderedDict()
    for r in results:
        by_pattern.setdefault(r['pattern'], []).append(r)
    for name, rs in by_pattern.items():
        print('== %s' % name, file=out)
        for r in rs:
            print('  %s/%s: %d folios' % (r['backend'], r['fs'], len(r['folios'])), file=out)
            for line in folio_runs(r['folios']):
                print(line, file=out)
            for o in r['odd']:
                print('    odd: %s' % o, file=out)
        for line in histogram_table(rs):
            print(line, file=out)
        if do_compare:
            ref = [r for r in rs if r['backend'] == 'kernel']
            for r in rs:
                if r['backend'] != 'foliofs':
                    continue
                for k in ref:
                    diffs = compare(k, r)
                    ndiff += len(diffs)
                    print('  %s/%s vs foliofs: %s' % (k['backend'], k['fs'],
                          'the same folio for folio' if not diffs else
                          '%d folios differ' % len(diffs)), file=out)
                    for d in diffs[:40]:
                        print('    ' + d, file=out)
                    if len(diffs) > 40:
                        print('    ... %d more' % (len(diffs) - 40), file=out)
        print(file=out)
    return ndiff


def git_head():
    r = subprocess.run(['git', '-C', REPO, 'rev-parse', 'HEAD'], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    return r.stdout.strip() or None


def main(argv=None):
    ap = argparse.ArgumentParser(
        description='Read patterns on the kernel and on foliofs, compared folio for folio.',
        epilog='Patterns: ' + ', '.join(PATTERNS))
    ap.add_argument('--backend', choices=('kernel', 'foliofs', 'both'), default='both')
    ap.add_argument('--compare', action='store_true',
                    help='run both backends and list the differences')
    ap.add_argument('--fs', default='ext4', help='kernel file systems: ext4,xfs')
    ap.add_argument('--patterns', default=','.join(PATTERNS))
    ap.add_argument('--ra-kb', type=int, default=DEFAULT_RA_KB,
                    help='read_ahead_kb and readahead_kb (default %(default)s)')
    ap.add_argument('--opt', action='append', default=[],
                    help='a foliofs -o option (repeatable), e.g. ra_model=6.16')
    ap.add_argument('--foliofs', help='the daemon (default $FOLIOFS or build/foliofs)')
    ap.add_argument('--json', help='write the raw results here')
    args = ap.parse_args(argv)
    patterns = [p for p in args.patterns.split(',') if p]
    for p in patterns:
        if p not in PATTERNS:
            ap.error('unknown pattern %r (%s)' % (p, ', '.join(PATTERNS)))
    backends = ('kernel', 'foliofs') if args.compare or args.backend == 'both' else (args.backend,)
    fstypes = [f for f in args.fs.split(',') if f]
    results = []
    try:
        if 'kernel' in backends:
            results += run_kernel(fstypes, patterns, args.ra_kb)
        if 'foliofs' in backends:
            results += run_foliofs(args.foliofs, patterns, args.ra_kb, args.opt)
    except Skip as e:
        print('ra-patterns: skipped: %s' % e, file=sys.stderr)
        return 77
    except (RuntimeError, OSError, ValueError) as e:
        print('ra-patterns: %s' % e, file=sys.stderr)
        return 2
    results.sort(key=lambda r: (patterns.index(r['pattern']), r['backend'] != 'kernel'))
    ndiff = print_results(results, 'kernel' in backends and 'foliofs' in backends)
    if args.json:
        meta = {'date': datetime.datetime.now(datetime.timezone.utc).isoformat(),
                'kernel': os.uname().release, 'commit': git_head(), 'argv': sys.argv,
                'file_size': FILE_SIZE, 'read_size': READ, 'ra_kb': args.ra_kb,
                'seed': SEED, 'nr_random': NR_RANDOM}
        with open(args.json, 'w') as f:
            json.dump({'meta': meta, 'results': results}, f, indent=1)
            f.write('\n')
    return 1 if ndiff else 0


if __name__ == '__main__':
    sys.exit(main())
