#!/usr/bin/python3
"""pg-seed.py: the seed's PostgreSQL scenario on this machine's kernel, the
reference foliofs's model is judged against.

One PostgreSQL 15 cluster on XFS (or ext4) over a loop device
(`losetup --direct-io=on`, `read_ahead_kb` --ra-kb), the server's
processes (not pgbench's, nor this script's) in a memory cgroup of --mem (cgroup v2 where the machine has the memory
controller there, v1 otherwise), `vm.dirty_bytes` and
`vm.dirty_background_bytes` set for the run and restored; after
`pgbench -i -s SCALE`, --iters runs of `pgbench -N -M prepared` back to
back on the one running server, each --duration seconds.  A large-folio
source (--source) reads the table in order: `seqscan-each` (a sequential
scan before each iteration), `seqscan-first` (one before the first),
`vacuum-each` (VACUUM before each), `autovacuum` (autovacuum on, acting
after 2% of a table changed, without its cost delay), `autovacuum-default`
(autovacuum at PostgreSQL's defaults: no read source but what PostgreSQL
itself runs), `reinit` (each iteration after the first begins with
`pgbench -i`, which drops and rebuilds the tables, as each run of the seed
reproducer does: its workload runs `pgbench -i` and then one `pgbench`),
or `none`.  --seed-settings takes the seed reproducer's
server settings (aws/repro-collection, workloads/postgresql), scaled to
--mem: shared_buffers a quarter of it, work_mem and maintenance_work_mem
its 1/384 and 1/192 (1 GB and 2 GB of the seed's 384 GB), checkpoints by
time only (checkpoint_timeout 5min, completion target 0.9, max_wal_size
64GB, min_wal_size 1GB), wal_buffers 64MB, effective_io_concurrency 300,
random_page_cost 1.1, autovacuum on at its defaults, initdb
--data-checksums --wal-segsize=64.  --cold
restarts the server after `pgbench -i` with the page cache dropped, so
that the first iteration starts as the seed's did, with nothing cached.

Per iteration, from the kernel itself:
  tps            pgbench's
  bdp events     writeback:balance_dirty_pages events on the loop device's
  pauses, ms     bdi; those that slept (pause > 0: a shorter one is traced
                 as min(pause, 0) and not slept) and the time they slept,
                 counted from a tracefs instance's trace_pipe as they come
                 (a lost event fails the run)
  charged        pages charged to the dirty budget: each folio the
                 kernel charges (writeback:writeback_dirty_folio, fired in
                 folio_account_dirtied()) at its whole size, as known from
                 the folio events
  written        pages the loop device wrote (/sys/block/loopN/stat)
  dirty          nr_dirty + nr_writeback from /proc/vmstat once a second
                 (machine-wide, as balance_dirty_pages() sees it): peak,
                 mean, and the share of samples at or above the freerun
                 point (dirty_bytes + dirty_background_bytes) / 2; the
                 JSON also keeps the samples, and the server's own (its
                 memory cgroup's dirty + writeback) beside them
  added, cached  folios added to the file system's page cache by order
                 (mm_filemap_add_to_page_cache), and the share of its cached
                 bytes in 2 MiB folios after the iteration (adds minus
                 mm_filemap_delete_from_page_cache)
  deleted, lru   folios deleted from it by order, and after each step the
                 cached folios by order and LRU state (the head page's
                 PG_lru, PG_active, PG_referenced from /proc/kpageflags)
                 with the memory cgroup's LRU sizes and reclaim counters
                 (memory.stat; under cgroup v1, which has no reclaim
                 counters, /proc/vmstat's, machine-wide), for the source
                 step and the run apart
  latency        pgbench's average
  bgwriter       who wrote shared buffers out during the run
                 (pg_stat_bgwriter: the background writer, backends
                 themselves, the checkpointer) and the buffers allocated
  above thresh   the share of 5 s samples with nr_dirty at or above the
                 dirty threshold (the seed: about 17%), and whether the
                 iteration's peak passed it (the seed: 9 of 10)
  by process     2 MiB folios added by each kind of process (the server
                 log names each pid: log_line_prefix %p %b): client
                 backends, autovacuum workers, the checkpointer, others
  by file        the same by file class (pg_wal's segments, pgbench_accounts,
                 its primary key, the rest), and the class's cached bytes in
                 2 MiB folios after the iteration
  memory         the cgroup's page cache, shared memory (shared_buffers
                 without huge pages fills as buffers are first used) and
                 anonymous memory when the iteration began, MiB
  autovacuum     each automatic vacuum and analyze the server logged
                 (log_autovacuum_min_duration=0), by the iteration it
                 ended in: table, pages scanned, buffer hits, misses and
                 dirtied, read rate, elapsed
and the summary the seed reports: mean tps, CV, worst, the second half
of the iterations against the first, charged/written, pauses.  The JSON
also keeps each run's dirty samples and its window on CLOCK_MONOTONIC;
--events FILE keeps every throttle event whole (contrib/kernel/refcmp.py
reads it), for the event-by-event comparison with the model; --io-trace
FILE records the server's file I/O from before initdb to its stop as a
foliofs trace (contrib/kernel/kio.py), so foliofs-sim can replay what the
server asked of this kernel (calibrate.py --sim-kernel).

Usage, as root:
  contrib/kernel/pg-seed.py [--scale 100] [--iters 8] [--duration 30]
      [--clients 16] [--mem 1G] [--dirty-bytes 200M] [--source seqscan-each]
      [--fillfactor 100] [--json out.json] [--md report.md] [--events ev.jsonl.gz]
      [--io-trace run.trace]
  contrib/kernel/pg-seed.py --tiny       a 1-minute smoke run (scale 5, 2 x 5 s)
Exit status 0, 1 on failure, 77 when it cannot run here (the reason on
stderr).  Everything set up is undone on exit, also on SIGINT/SIGTERM.
"""

import argparse
import collections
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

import kio  # noqa: E402  (this directory is on sys.path: plain modules)
import refcmp  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), '..', 'lib'))
from foliofs_tools import (  # noqa: E402
    BGWRITER_SQL, FILE_CLASSES, Cluster, bgwriter_delta, Signals, Skip, Undo, data_file_classes, kernel_skip_reason,
    parse_size, pg_bindir, pg_loop_fs, rd, relation_files, run, tracefs_root, wr)

PAGE = 4096
MiB = 1 << 20
SOURCES = ('seqscan-each', 'seqscan-first', 'vacuum-each', 'autovacuum', 'autovacuum-default',
           'reinit', 'none')
AUTOVACUUM = ['autovacuum=on', 'autovacuum_naptime=5', 'autovacuum_vacuum_scale_factor=0.02',
              'autovacuum_vacuum_insert_scale_factor=0.02', 'autovacuum_vacuum_cost_delay=0']
# The seed reproducer's settings (aws/repro-collection, workloads/postgresql,
# for PostgreSQL 17) that PostgreSQL 15 has; shared_buffers is set from
# --mem.  max_wal_size so large that checkpoints come by time only.
SEED_SETTINGS = ['checkpoint_timeout=5min', 'checkpoint_completion_target=0.9',
                 'max_wal_size=64GB', 'min_wal_size=1GB', 'wal_buffers=64MB', 'huge_pages=try',
                 'effective_io_concurrency=300', 'random_page_cost=1.1',
                 'max_parallel_workers_per_gather=4', 'autovacuum=on']
SEED_INITDB = ['--data-checksums', '--wal-segsize=64']
# What --seed-settings' WAL may take of the file system, beyond the data:
# PostgreSQL keeps about two checkpoints' worth.
SEED_WAL_ROOM = 8 << 30


def log(msg):
    print('pg-seed: %s' % msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# the memory cgroup

class MemCgroup:
    """A memory cgroup of LIMIT bytes that this process (and so everything
    it starts from now on) runs in until close()."""

    def __init__(self, limit, undo):
        v2 = '/sys/fs/cgroup'
        ctl = os.path.join(v2, 'cgroup.controllers')
        name = 'pg-seed-%d' % os.getpid()
        if os.path.exists(ctl) and 'memory' in rd(ctl).split():
            self.dir = os.path.join(v2, name)
            self.root_procs = os.path.join(v2, 'cgroup.procs')
            limit_file, self.version = 'memory.max', 2
        else:
            v1 = '/sys/fs/cgroup/memory'
            if not os.path.exists(os.path.join(v1, 'cgroup.procs')):
                raise Skip('no memory cgroup controller (neither v2 nor v1 at %s)' % v1)
            self.dir = os.path.join(v1, name)
            self.root_procs = os.path.join(v1, 'cgroup.procs')
            limit_file, self.version = 'memory.limit_in_bytes', 1
        os.mkdir(self.dir)
        undo.push('rmdir ' + self.dir, self._remove)
        wr(os.path.join(self.dir, limit_file), str(limit))

    def enter(self):
        wr(os.path.join(self.dir, 'cgroup.procs'), str(os.getpid()))

    # memory.stat's LRU sizes (bytes) and reclaim counters: v2 has them
    # all; v1 only the sizes, so /proc/vmstat's file reclaim counters
    # (machine-wide: other workloads count too) are kept beside them.
    RECLAIM_KEYS = ('active_file', 'inactive_file', 'pgscan', 'pgsteal', 'pgactivate',
                    'pgdeactivate', 'pgrefill', 'workingset_refault_file',
                    'workingset_activate_file', 'workingset_restore_file')
    VMSTAT_KEYS = ('pgscan_file', 'pgsteal_file', 'pgactivate', 'pgdeactivate', 'pgrefill',
                   'workingset_refault_file', 'workingset_activate_file',
                   'workingset_restore_file', 'pgrotated')

    def reclaim_stat(self):
        """{name: value} of RECLAIM_KEYS that the cgroup's memory.stat has,
        and of VMSTAT_KEYS as machine_NAME."""
        st = dict(line.split() for line in
                  rd(os.path.join(self.dir, 'memory.stat')).splitlines())
        out = {k: int(st[k]) for k in self.RECLAIM_KEYS if k in st}
        vm = dict(line.split() for line in rd('/proc/vmstat').splitlines())
        out.update(('machine_' + k, int(vm[k])) for k in self.VMSTAT_KEYS if k in vm)
        return out

    def leave(self):
        """Back to the root cgroup: what this process starts from now on
        runs outside (what it started meanwhile stays in)."""
        wr(self.root_procs, str(os.getpid()))

    # memory.stat's names for the page cache, shared memory (shared_buffers
    # without huge pages) and anonymous memory: v1, v2 (bytes).
    MEM_KEYS = {1: {'file': 'cache', 'shmem': 'shmem', 'anon': 'rss',
                    'active_file': 'active_file', 'inactive_file': 'inactive_file'},
                2: {'file': 'file', 'shmem': 'shmem', 'anon': 'anon',
                    'active_file': 'active_file', 'inactive_file': 'inactive_file'}}

    def memory(self):
        """{file, shmem, anon, active_file, inactive_file}: MiB now."""
        st = dict(line.split() for line in
                  rd(os.path.join(self.dir, 'memory.stat')).splitlines())
        return {k: int(st.get(v, 0)) / MiB for k, v in self.MEM_KEYS[self.version].items()}

    def _remove(self):
        wr(self.root_procs, str(os.getpid()))
        for _ in range(50):
            try:
                os.rmdir(self.dir)
                return
            except OSError:
                time.sleep(0.1)     # the last server process is going
        os.rmdir(self.dir)


# --------------------------------------------------------------------------
# tracefs: two events, counted as they come (this kernel has no hist
# triggers, and a buffer read at the end could overflow)

class EventCounter:
    """Events of the file system's device, read from a tracefs instance's
    trace_pipe by a thread as they come and counted:
      filemap:mm_filemap_add_to_page_cache / _delete_from_page_cache: the
        folios in the page cache now ({(ino, index): order}) and those
        added, by order;
      writeback:writeback_dirty_folio (fired where folio_account_dirtied()
        charges a folio): pages charged, each folio's whole size;
      writeback:balance_dirty_pages: pauses and their sum (ms).
    Every writeback:balance_dirty_pages and bdi_dirty_ratelimit event of
    the device and every global_dirty_state event (machine-wide: it has no
    device) is also kept whole, with its time on CLOCK_MONOTONIC (the
    instance's trace_clock is mono), in self.log (refcmp.EventLog).
    Start it before anything of the file system is cached."""

    TASK = re.compile(r'^\s*.*?-(\d+)\s+\[\d+\]')
    LINE = re.compile(r'(mm_filemap_add_to_page_cache|mm_filemap_delete_from_page_cache|'
                      r'writeback_dirty_folio|balance_dirty_pages|bdi_dirty_ratelimit|'
                      r'global_dirty_state): (.*)')
    FOLIO = re.compile(r'ino ([0-9a-f]+) pfn=0x([0-9a-f]+) ofs=(\d+) order=(\d+)')
    # /proc/kpageflags bits (Documentation/admin-guide/mm/pagemap.rst).
    KPF = {'referenced': 2, 'dirty': 4, 'lru': 5, 'active': 6, 'writeback': 8,
           'reclaim': 9}
    DIRTY = re.compile(r'ino=(\d+) index=(\d+)')
    PAUSE = re.compile(r' pause=(-?\d+)')
    FIELD = re.compile(r' (\w+)=(-?\d+)')
    # The fields kept of each event, to set beside the model's estimates.
    BDP_FIELDS = ('dirty', 'setpoint', 'limit', 'dirty_ratelimit', 'task_ratelimit', 'pause')
    RL_FIELDS = ('write_bw', 'awrite_bw', 'dirty_rate', 'dirty_ratelimit',
                 'balanced_dirty_ratelimit')

    def __init__(self, root, kdev, bdi, undo):
        self.dir = os.path.join(root, 'instances', 'pg-seed-%d' % os.getpid())
        os.mkdir(self.dir)
        undo.push('rmdir ' + self.dir, self._remove)
        wr(os.path.join(self.dir, 'buffer_size_kb'), '32768')
        dev = 's_dev == %d' % kdev
        self.events = (('filemap', 'mm_filemap_add_to_page_cache', dev),
                       ('filemap', 'mm_filemap_delete_from_page_cache', dev),
                       ('writeback', 'writeback_dirty_folio', 'name == "%s"' % bdi),
                       ('writeback', 'balance_dirty_pages', 'bdi == "%s"' % bdi),
                       ('writeback', 'bdi_dirty_ratelimit', 'bdi == "%s"' % bdi),
                       ('writeback', 'global_dirty_state', None))
        wr(os.path.join(self.dir, 'trace_clock'), 'mono')
        for sub, ev, flt in self.events:
            if flt:
                wr(os.path.join(self.dir, 'events', sub, ev, 'filter'), flt)
            wr(os.path.join(self.dir, 'events', sub, ev, 'enable'), '1')
        self.log = refcmp.EventLog('kernel %s, bdi %s' % (os.uname().release, bdi))
        self.present = {}        # (ino, index): (order, pfn)
        self.added = collections.Counter()
        self.deleted = collections.Counter()
        self.added_by_pid = collections.Counter()    # (pid, order): folios added
        self.added_by_ino = collections.Counter()    # (ino, order): folios added
        self.charged = 0
        self.bdp = [0, 0, 0]     # events, sleeps, ms slept
        self.bdp_log = []        # (field values) of every balance_dirty_pages event
        self.rl_log = []         # (field values) of every bdi_dirty_ratelimit event
        self.idle = False
        self.lock = threading.Lock()
        self.stop_flag = False
        self.pipe = open(os.path.join(self.dir, 'trace_pipe'), 'rb', buffering=0)
        os.set_blocking(self.pipe.fileno(), False)
        self.thread = threading.Thread(target=self._reader, daemon=True)
        self.thread.start()
        undo.push('event reader', self._stop)

    def _line(self, text):
        m = self.LINE.search(text)
        if not m:
            return
        ev, rest = m.groups()
        if ev in refcmp.EVENTS:
            rec = refcmp.parse_tracefs(text)
            if rec:
                self.log.add(rec)
            if ev == 'global_dirty_state':
                return
        if ev == 'balance_dirty_pages':
            # A pause below min_pause is traced as min(pause, 0) and not
            # slept: count the events, and the sleeps and their length.
            p = self.PAUSE.search(rest)
            pause = int(p.group(1)) if p else 0
            self.bdp[0] += 1
            f = dict(self.FIELD.findall(rest))
            self.bdp_log.append(tuple(int(f.get(k, 0)) for k in self.BDP_FIELDS))
            if pause > 0:
                self.bdp[1] += 1
                self.bdp[2] += pause
        elif ev == 'bdi_dirty_ratelimit':
            f = dict(self.FIELD.findall(rest))
            self.rl_log.append(tuple(int(f.get(k, 0)) for k in self.RL_FIELDS))
        elif ev == 'writeback_dirty_folio':
            d = self.DIRTY.search(rest)
            if d:
                self.charged += 1 << self.present.get((int(d.group(1)), int(d.group(2))),
                                                      (0,))[0]
        else:
            f = self.FOLIO.search(rest)
            if f:
                key = (int(f.group(1), 16), int(f.group(3)) // PAGE)
                order = int(f.group(4))
                if ev == 'mm_filemap_add_to_page_cache':
                    self.present[key] = (order, int(f.group(2), 16))
                    self.added[order] += 1
                    t = self.TASK.match(text)
                    self.added_by_pid[(int(t.group(1)) if t else 0, order)] += 1
                    self.added_by_ino[(key[0], order)] += 1
                elif self.present.pop(key, None) is not None:
                    self.deleted[order] += 1

    def _reader(self):
        buf = b''
        while not self.stop_flag:
            try:
                chunk = self.pipe.read(1 << 16)
            except BlockingIOError:
                chunk = None
            if not chunk:
                self.idle = True
                time.sleep(0.05)
                continue
            self.idle = False
            buf += chunk
            lines = buf.split(b'\n')
            buf = lines.pop()
            with self.lock:
                for line in lines:
                    self._line(line.decode(errors='replace'))

    def snapshot(self):
        """{added: {order: n}, pauses, paused_ms, charged_pages, cached: {order: n}}."""
        self.idle = False
        deadline = time.monotonic() + 30
        while not self.idle and time.monotonic() < deadline:
            time.sleep(0.1)     # until the reader found the pipe empty
        with self.lock:
            cached = collections.Counter(o for o, _ in self.present.values())
            cached_by_ino = collections.Counter()
            for (ino, _), (order, _) in self.present.items():
                cached_by_ino[(ino, order)] += 1
            return {'added': dict(self.added), 'deleted': dict(self.deleted),
                    'added_by_pid': dict(self.added_by_pid),
                    'added_by_ino': dict(self.added_by_ino),
                    'cached_by_ino': dict(cached_by_ino),
                    'bdp_events': self.bdp[0],
                    'pauses': self.bdp[1], 'paused_ms': self.bdp[2],
                    'charged_pages': self.charged, 'cached': dict(cached),
                    'lru': self.lru_by_order(),
                    'bdp_at': len(self.bdp_log), 'rl_at': len(self.rl_log)}

    def lru_by_order(self):
        """{flag: {order: folios}} of the cached folios whose head page has
        each flag of KPF set now, from /proc/kpageflags (a folio freed
        since its last event reads as whatever the page is now: counted
        only with PG_lru).  Context: self.lock held."""
        out = {k: collections.Counter() for k in self.KPF}
        try:
            fd = os.open('/proc/kpageflags', os.O_RDONLY)
        except OSError:
            return {}
        try:
            for order, pfn in self.present.values():
                raw = os.pread(fd, 8, pfn * 8)
                if len(raw) != 8:
                    continue
                flags = int.from_bytes(raw, 'little')
                if not flags >> self.KPF['lru'] & 1:
                    continue
                for k, bit in self.KPF.items():
                    if flags >> bit & 1:
                        out[k][order] += 1
        finally:
            os.close(fd)
        return {k: dict(v) for k, v in out.items()}

    def medians(self, a, b):
        """Medians of the traced estimates between snapshots A and B: of
        balance_dirty_pages (dirty, setpoint, limit in pages; rate limits in
        KiB/s; pause in ms, over the pauses taken) and of bdi_dirty_ratelimit
        (bandwidths and rates in KiB/s)."""
        with self.lock:
            bdp = self.bdp_log[a['bdp_at']:b['bdp_at']]
            rl = self.rl_log[a['rl_at']:b['rl_at']]
        out = {}
        for i, k in enumerate(self.BDP_FIELDS):
            vals = [e[i] for e in bdp if k != 'pause' or e[i] > 0]
            out['bdp_' + k] = statistics.median(vals) if vals else None
        for i, k in enumerate(self.RL_FIELDS):
            vals = [e[i] for e in rl]
            out['rl_' + k] = statistics.median(vals) if vals else None
        return out

    def lost(self):
        lost = 0
        for cpu in os.listdir(os.path.join(self.dir, 'per_cpu')):
            stats = rd(os.path.join(self.dir, 'per_cpu', cpu, 'stats'))
            lost += int(re.search(r'^overrun: (\d+)', stats, re.M).group(1))
        return lost

    def _stop(self):
        self.stop_flag = True
        self.thread.join(5)
        self.pipe.close()

    def _remove(self):
        for sub, ev, _ in self.events:
            try:
                wr(os.path.join(self.dir, 'events', sub, ev, 'enable'), '0')
            except OSError:
                pass
        os.rmdir(self.dir)


class VmstatSampler:
    """/proc/vmstat's dirty state once a second, in a thread: the kernel's
    `dirty` of balance_dirty_pages() (nr_dirty + nr_writeback, machine-wide:
    other writers on the machine count too) against its thresholds; and
    the server's own (its memory cgroup's dirty + writeback, CGROUP's
    memory.stat), what a mount's charge is set beside."""

    KEYS = ('nr_dirty', 'nr_writeback', 'nr_dirty_threshold', 'nr_dirty_background_threshold')
    # memory.stat's names: v1 (bytes), v2 (bytes).
    CG_KEYS = {1: ('dirty', 'writeback'), 2: ('file_dirty', 'file_writeback')}
    # The file LRU lists (bytes) and reclaim's counters (pages) from the
    # same read, those the cgroup's memory.stat has: what reclaim's list
    # decisions saw, second by second (the read itself flushes the
    # cgroup's statistics, so this adds no flush to the run).
    LRU_KEYS = ('active_file', 'inactive_file', 'workingset_refault_file',
                'workingset_activate_file', 'pgactivate', 'pgdeactivate', 'pgscan', 'pgsteal')

    def __init__(self, undo, cgroup=None):
        self.cgroup = cgroup
        self.samples = []
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        undo.push('vmstat sampler', self._stop)

    def _run(self):
        while not self.stop_flag.wait(1.0):
            v = {'t': time.monotonic()}
            for line in rd('/proc/vmstat').splitlines():
                k, _, n = line.partition(' ')
                if k in self.KEYS:
                    v[k] = int(n)
            for line in rd('/proc/meminfo').splitlines():
                if line.startswith('MemAvailable:'):
                    v['mem_available_kb'] = int(line.split()[1])
            if self.cgroup:
                keys = self.CG_KEYS[self.cgroup.version]
                st = dict(line.split() for line in
                          rd(os.path.join(self.cgroup.dir, 'memory.stat')).splitlines())
                v['cg_dirty_pages'] = sum(int(st.get(k, 0)) for k in keys) // PAGE
                v['cg_lru'] = {k: int(st[k]) for k in self.LRU_KEYS if k in st}
            with self.lock:
                self.samples.append(v)

    def mark(self):
        with self.lock:
            return len(self.samples)

    def summary(self, first):
        """Peak and mean of dirty + writeback (pages) since sample FIRST, and
        the share of samples at or above the freerun point."""
        with self.lock:
            got = self.samples[first:]
        if not got:
            return {'peak_dirty_pages': 0, 'mean_dirty_pages': 0, 'above_freerun': 0.0,
                    'above_thresh_5s': 0.0, 'peak_over_thresh': False,
                    'min_mem_available_kb': None}
        # The seed's measure: nr_dirty (without writeback) against the
        # dirty threshold, in samples 5 s apart.
        five = got[::5]
        dirty = [s['nr_dirty'] + s['nr_writeback'] for s in got]
        free = [(s['nr_dirty_threshold'] + s['nr_dirty_background_threshold']) // 2 for s in got]
        return {'peak_dirty_pages': max(dirty), 'mean_dirty_pages': statistics.mean(dirty),
                'above_freerun': sum(d >= f for d, f in zip(dirty, free)) / len(got),
                'above_thresh_5s': sum(s['nr_dirty'] >= s['nr_dirty_threshold']
                                       for s in five) / len(five),
                'peak_over_thresh': any(s['nr_dirty'] > s['nr_dirty_threshold'] for s in got),
                # The machine's memory outside the cgroup: a run that met
                # global memory pressure is not the cgroup's own behaviour.
                'min_mem_available_kb': min(s.get('mem_available_kb', 0) for s in got)}

    def dirty_samples(self, first, machine=False):
        """[(dirty + writeback, the dirty threshold)] in pages, once a
        second since sample FIRST: the server's own (its cgroup's), or the
        MACHINE's (/proc/vmstat)."""
        with self.lock:
            return [(s['nr_dirty'] + s['nr_writeback'] if machine or 'cg_dirty_pages' not in s
                     else s['cg_dirty_pages'], s['nr_dirty_threshold'])
                    for s in self.samples[first:]]

    def lru_samples(self, first, t0):
        """[(seconds since T0, {LRU_KEYS: value})] once a second since
        sample FIRST (empty without a cgroup)."""
        with self.lock:
            return [(round(s['t'] - t0, 3), s['cg_lru']) for s in self.samples[first:]
                    if 'cg_lru' in s]

    def _stop(self):
        self.stop_flag.set()
        self.thread.join(5)


def delta(a, b):
    """Snapshot B minus snapshot A (cached, lru: B's)."""
    return {'added': {o: n - a['added'].get(o, 0) for o, n in b['added'].items()
                      if n - a['added'].get(o, 0)},
            'deleted': {o: n - a['deleted'].get(o, 0) for o, n in b['deleted'].items()
                        if n - a['deleted'].get(o, 0)},
            'lru': b['lru'],
            'added_by_pid': {k: n - a['added_by_pid'].get(k, 0)
                             for k, n in b['added_by_pid'].items()
                             if n - a['added_by_pid'].get(k, 0)},
            'added_by_ino': {k: n - a['added_by_ino'].get(k, 0)
                             for k, n in b['added_by_ino'].items()
                             if n - a['added_by_ino'].get(k, 0)},
            'bdp_events': b['bdp_events'] - a['bdp_events'],
            'pauses': b['pauses'] - a['pauses'], 'paused_ms': b['paused_ms'] - a['paused_ms'],
            'charged_pages': b['charged_pages'] - a['charged_pages'], 'cached': b['cached']}


def counter_delta(a, b):
    """B minus A of memory.stat's counters, B's value for the LRU sizes."""
    return {k: v if k in ('active_file', 'inactive_file', 'file_dirty', 'file_writeback')
            else v - a.get(k, 0) for k, v in b.items()}


def wa(path, text):
    """Append TEXT to PATH: a trigger file is never opened with O_TRUNC,
    which would drop every trigger of the event."""
    with open(path, 'a') as f:
        f.write(text)


def sectors_written(dev):
    return int(rd('/sys/block/%s/stat' % os.path.basename(dev)).split()[6])


# --------------------------------------------------------------------------
# the run

def source_step(cl, source, i, init):
    if source == 'reinit' and i > 0:
        cl.pgbench(init)
    elif source == 'seqscan-each' or (source == 'seqscan-first' and i == 0):
        cl.psql('SELECT sum(abalance) FROM pgbench_accounts')
    elif source == 'vacuum-each':
        cl.psql('VACUUM pgbench_accounts')


AV_HEAD = re.compile(r'(\d+) autovacuum worker LOG:\s+automatic (aggressive )?(vacuum|analyze)'
                     r'[a-z ]* of table "([^"]+)"')
AV_FIELDS = (('scanned', re.compile(r'pages: \d+ removed, \d+ remain, (\d+) scanned'), int),
             ('hits', re.compile(r'buffer usage: (\d+) hits'), int),
             ('misses', re.compile(r'buffer usage: \d+ hits, (\d+) misses'), int),
             ('dirtied', re.compile(r'buffer usage: \d+ hits, \d+ misses, (\d+) dirtied'), int),
             ('read_mb_s', re.compile(r'avg read rate: ([\d.]+) MB/s'), float),
             ('elapsed_s', re.compile(r'elapsed: ([\d.]+) s'), float))


def autovacuum_runs(path):
    """The server log's automatic vacuums and analyzes, each logged when it
    ended: [{offset (of its line in the log), pid, kind, table, and what
    AV_FIELDS finds in its lines}]."""
    runs, cur, off = [], None, 0
    with open(path, 'rb') as f:
        for raw in f:
            line = raw.decode(errors='replace')
            m = AV_HEAD.match(line)
            if m:
                cur = {'offset': off, 'pid': int(m.group(1)), 'kind': m.group(3),
                       'aggressive': bool(m.group(2)), 'table': m.group(4).split('.')[-1]}
                runs.append(cur)
            elif cur is not None and line.startswith('\t'):
                for key, rx, conv in AV_FIELDS:
                    g = rx.search(line)
                    if g:
                        cur[key] = conv(g.group(1))
            else:
                cur = None
            off += len(raw)
    return runs


ROLES = ('client backend', 'autovacuum worker', 'checkpointer')


class FileNamer:
    """{inode number: file class} of the data directory's files, walked
    every 2 s by a thread and kept after a file goes (a WAL segment
    removed at a checkpoint), as foliofs_tools.data_file_classes() names
    them: pg_wal's files are 'wal', the relation files
    foliofs_tools.relation_files() names 'accounts' or 'accounts_pkey', the
    rest 'other'.  A file made and removed between two walks stays
    unnamed ('other')."""

    def __init__(self, cl, undo):
        self.cl = cl
        self.rels = {}
        self.classes = {}
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.refresh()
        self.thread.start()
        undo.push('file namer', self._stop)

    def refresh(self):
        """Ask the server which relation each file is (at iteration ends:
        relations do not change in a run of pgbench -N)."""
        rels = relation_files(self.cl)
        with self.lock:
            self.rels = rels
        self.walk()

    def walk(self):
        with self.lock:
            rels = self.rels
        found = data_file_classes(self.cl.data, rels)
        with self.lock:
            self.classes.update(found)

    def _run(self):
        while not self.stop_flag.wait(2.0):
            self.walk()

    def by_class(self, by_ino):
        """{class: {order: n}} from {(ino, order): n}."""
        out = collections.defaultdict(collections.Counter)
        with self.lock:
            for (ino, order), n in by_ino.items():
                out[self.classes.get(ino, 'other')][order] += n
        return {c: dict(v) for c, v in out.items()}

    def _stop(self):
        self.stop_flag.set()
        self.thread.join(5)


def adds_by_role(added_by_pid, roles):
    """{role: {order: folios}} from {(pid, order): folios}; a pid the log
    does not name is 'other' (the background writer, the WAL writer)."""
    out = collections.defaultdict(collections.Counter)
    for (pid, order), n in added_by_pid.items():
        role = roles.get(pid, 'other')
        out[role if role in ROLES else 'other'][order] += n
    return {r: dict(c) for r, c in out.items()}


def parse_tps(out):
    m = re.search(r'^tps = ([\d.]+)', out, re.M)
    if not m:
        raise RuntimeError('no tps in pgbench output:\n' + out)
    return float(m.group(1))


def parse_latency(out):
    m = re.search(r'^latency average = ([\d.]+) ms', out, re.M)
    return float(m.group(1)) if m else None


def run_reference(args, undo, work):
    why = kernel_skip_reason()
    if why:
        raise Skip(why)
    bindir = pg_bindir()
    hroot = tracefs_root(undo)
    cg = MemCgroup(args.mem, undo)
    size = max(4096, 60 * args.scale) * MiB + (SEED_WAL_ROOM if args.seed_settings else 0)
    dev, data = pg_loop_fs(args.fs, work, size, args.ra_kb, undo)
    st = os.stat(data)
    kdev = (os.major(st.st_dev) << 20) | os.minor(st.st_dev)
    bdi = '%d:%d' % (os.major(st.st_dev), os.minor(st.st_dev))
    events = EventCounter(hroot, kdev, bdi, undo)
    iot = None
    if args.io_trace:
        # From before initdb: every file of the cluster is created in it.
        iot = kio.KernelIoTrace(data, args.io_trace + '.txt')
        iot.start()
        undo.push('the I/O trace', iot.stop)
    cl = Cluster(bindir, data, work, undo, SEED_INITDB if args.seed_settings else ())
    settings = ['shared_buffers=%s' % args.shared_buffers,
                'max_connections=%d' % (args.clients + 10)]
    if args.seed_settings:
        settings += SEED_SETTINGS + ['work_mem=%dkB' % max(64, args.mem // 384 >> 10),
                                     'maintenance_work_mem=%dkB' % max(1024, args.mem // 192 >> 10)]
    else:
        settings += ['max_wal_size=1GB']
    if args.source == 'autovacuum':
        settings += AUTOVACUUM
    elif args.source == 'autovacuum-default':
        settings += ['autovacuum=on']
    settings += args.pg_conf
    # Only the server runs in the cgroup: this script's memory (its event
    # tables grow with the run) and pgbench's (on another machine in the
    # seed) would take the page cache's room, and more so in later
    # iterations.
    cg.enter()
    cl.start(settings)
    cg.leave()
    if args.dirty_at_load:
        set_dirty_limits(args, undo)
    t0 = time.monotonic()
    init = ['-i', '-q', '-s', str(args.scale), '-F', str(args.fillfactor)]
    cl.pgbench(init)
    if args.source != 'reinit':     # the seed reproducer runs pgbench right after
        cl.psql('CHECKPOINT')
    load_s = time.monotonic() - t0
    # What the throttle learnt before the runs (the load, at the machine's
    # dirty limits, and the first source step) is kept as the window
    # 'prep', up to the first run's start.
    prep_t0 = t0
    log('loaded scale %d in %.0f s' % (args.scale, load_s))
    if args.cold:
        cl.stop()
        run(['sync'])
        wr('/proc/sys/vm/drop_caches', '3')
        cg.enter()
        cl.restart(settings)
        cg.leave()
        log('restarted with the page cache dropped')
    if not args.dirty_at_load:
        set_dirty_limits(args, undo)
    vm = VmstatSampler(undo, cg)
    namer = FileNamer(cl, undo)
    rows = []
    log_at = []     # the server log's size when each iteration began
    for i in range(args.iters):
        log_at.append(cl.log_size())
        mem0 = cg.memory()
        s0 = events.snapshot()
        r0 = cg.reclaim_stat()
        vs = vm.mark()
        t0 = time.monotonic()
        source_step(cl, args.source, i, init)
        t1 = time.monotonic()
        s1 = events.snapshot()
        r1 = cg.reclaim_stat()
        w0 = sectors_written(dev)
        v0 = vm.mark()
        bg0 = cl.psql(BGWRITER_SQL)
        t2 = time.monotonic()
        out = cl.pgbench(['-N', '-M', 'prepared', '-c', str(args.clients), '-j', '2',
                          '-T', str(args.duration), '-n'])
        t3 = time.monotonic()
        bg1 = cl.psql(BGWRITER_SQL)
        w1 = sectors_written(dev)
        s2 = events.snapshot()
        r2 = cg.reclaim_stat()
        if i == 0:
            events.log.window('prep', 0, prep_t0, t2)
        events.log.window('source', i + 1, t0, t1)
        events.log.window('run', i + 1, t2, t3)
        src, run_ = delta(s0, s1), delta(s1, s2)
        row = {'iter': i + 1, 'tps': parse_tps(out), 'charged_pages': run_['charged_pages'],
               'written_pages': (w1 - w0) * 512 // PAGE, 'bdp_events': run_['bdp_events'],
               'pauses': run_['pauses'], 'paused_ms': run_['paused_ms'], 'added': run_['added'],
               'source_added': src['added'], 'cached': run_['cached'],
               'deleted': run_['deleted'], 'source_deleted': src['deleted'],
               'source_cached': src['cached'], 'lru': run_['lru'], 'source_lru': src['lru'],
               'reclaim': counter_delta(r1, r2), 'source_reclaim': counter_delta(r0, r1),
               'lru_pages': {k: r2[k] for k in ('active_file', 'inactive_file') if k in r2}}
        row['latency_ms'] = parse_latency(out)
        row['bgwriter'] = bgwriter_delta(bg0, bg1)
        row['run_t0'], row['run_t1'] = t2, t3
        row.update(vm.summary(v0))
        row['dirty_samples'] = vm.dirty_samples(v0)
        row['machine_dirty_samples'] = vm.dirty_samples(v0, machine=True)
        # The source step's and the run's, from the step's start (t0).
        row['lru_samples'] = vm.lru_samples(vs, t0)
        row['source_t'] = round(t1 - t0, 3)
        row['traced'] = events.medians(s1, s2)
        row['added_by_pid'] = delta(s0, s2)['added_by_pid']
        row['cg_memory_start'], row['cg_memory_end'] = mem0, cg.memory()
        namer.refresh()
        row['added_by_class'] = namer.by_class(delta(s0, s2)['added_by_ino'])
        row['cached_by_class'] = namer.by_class(s2['cached_by_ino'])
        rows.append(row)
        log('iteration %d: %.0f tps, %d pauses (%d ms), charged/written x%.1f, '
            'cached %s in 2M' % (i + 1, row['tps'], row['pauses'], row['paused_ms'],
                                 ratio(row['charged_pages'], row['written_pages']),
                                 pct(share_2m(row['cached']))))
        low = row['min_mem_available_kb']
        if low is not None and low * 1024 < 2 * args.mem:
            log('warning: the machine had only %d MiB available during iteration %d '
                '(other processes): global reclaim may have taken the cgroup\'s cache'
                % (low >> 10, i + 1))
    cl.stop()
    log_at.append(cl.log_size())
    io_trace = None
    if iot:
        iot.stop()
        t0 = time.monotonic()
        wins = [{'iteration': r['iter'],
                 'start_ns': int(r['run_t0'] * 1e9) - iot.origin_ns,
                 'end_ns': int(r['run_t1'] * 1e9) - iot.origin_ns} for r in rows]
        io_trace = kio.convert(iot.txt_path, args.io_trace, data, iot.origin_ns,
                               os.path.dirname(os.path.abspath(args.io_trace)),
                               [(w['start_ns'], w['end_ns']) for w in wins])
        os.unlink(iot.txt_path)
        io_trace['lost_events'] += iot.lost_events()
        for r, wb in zip(rows, io_trace.pop('window_bytes')):
            r['app_write_bytes'] = wb.get('write_bytes', 0)
            r['sync_file_range_bytes'] = wb.get('sync_file_range_bytes', 0)
        io_trace.update(trace=os.path.abspath(args.io_trace), version=2, windows=wins)
        log('I/O trace: %d records of %d files (%.0f MiB) in %.0f s, %d of them '
            'sync_file_range calls (%d MiB); not in it: %d operations on %d opens of unread '
            'paths, %d on fds never seen opened; bpftrace lost %d events'
            % (io_trace['records'], io_trace['files'], io_trace['bytes'] / MiB,
               time.monotonic() - t0, io_trace['sync_file_range'],
               io_trace['sync_file_range_bytes'] // MiB, io_trace['unnamed_ops'],
               io_trace['unnamed_opens'], io_trace['lost'], io_trace['lost_events']))
    roles = cl.roles_since(0)
    runs = autovacuum_runs(cl.log)
    for i, row in enumerate(rows):
        by_pid = row.pop('added_by_pid')
        row['added_by_role'] = adds_by_role(by_pid, roles)
        row['autovacuum'] = [r for r in runs if log_at[i] <= r['offset'] < log_at[i + 1]]
    if events.lost():
        raise RuntimeError('the trace lost %d events' % events.lost())
    if args.events:
        events.log.save(args.events)
    res = {'load_seconds': load_s, 'iterations': rows}
    if io_trace:
        res['io_trace'] = io_trace
    return res


def set_dirty_limits(args, undo):
    """vm.dirty_background_bytes and vm.dirty_bytes for the run, the old
    values put back by UNDO."""
    for knob, val in (('dirty_background_bytes', args.dirty_background_bytes),
                      ('dirty_bytes', args.dirty_bytes)):
        path = '/proc/sys/vm/' + knob
        old_bytes, old_ratio = rd(path).strip(), rd(path.replace('_bytes', '_ratio')).strip()
        undo.push('vm.' + knob, restore_vm, knob, old_bytes, old_ratio)
        wr(path, str(val))


def restore_vm(knob, old_bytes, old_ratio):
    # Writing one of a pair zeroes the other: put back whichever was in force.
    path = '/proc/sys/vm/' + knob
    if int(old_bytes):
        wr(path, old_bytes)
    else:
        wr(path.replace('_bytes', '_ratio'), old_ratio)


def share_2m(added):
    total = sum(n << o for o, n in added.items())
    return (added.get(9, 0) << 9) / total if total else 0.0


def ratio(a, b):
    return a / b if b else float('nan')


def pct(v):
    return '%.0f%%' % (100 * v)


def summarize(rows):
    tps = [r['tps'] for r in rows]
    half = len(tps) // 2
    mean = statistics.mean(tps)
    return {
        'mean_tps': mean, 'cv': statistics.pstdev(tps) / mean if mean else 0.0,
        'worst_tps': min(tps),
        'second_half_vs_first': (statistics.mean(tps[half:]) / statistics.mean(tps[:half]) - 1)
        if half else 0.0,
        'charged_per_written': ratio(sum(r['charged_pages'] for r in rows),
                                     sum(r['written_pages'] for r in rows)),
        'bdp_events': sum(r['bdp_events'] for r in rows),
        'pauses': sum(r['pauses'] for r in rows),
        'paused_ms': sum(r['paused_ms'] for r in rows),
        'peak_dirty_pages': max(r.get('peak_dirty_pages', 0) for r in rows),
        'above_freerun': statistics.mean(r.get('above_freerun', 0.0) for r in rows),
        'above_thresh_5s': statistics.mean(r.get('above_thresh_5s', 0.0) for r in rows),
        'iters_peak_over_thresh': sum(bool(r.get('peak_over_thresh')) for r in rows),
    }


SIZES = ['4K', '8K', '16K', '32K', '64K', '128K', '256K', '512K', '1M', '2M']


def markdown(args, res, summ):
    out = ['# pg-seed on the kernel: %s' % res['meta']['kernel'], '',
           'scale %d, %d x %d s, %d clients, memory cgroup %d MiB, dirty_bytes %d MiB, '
           'dirty_background_bytes %d MiB, read_ahead_kb %d, %s, source %s, shared_buffers '
           '%s%s%s; load %.0f s.'
           % (args.scale, args.iters, args.duration, args.clients, args.mem // MiB,
              args.dirty_bytes // MiB, args.dirty_background_bytes // MiB, args.ra_kb,
              args.fs, args.source, args.shared_buffers,
              ', the seed\'s settings' if args.seed_settings else '',
              ', cold start' if args.cold else '', res['load_seconds']), '',
           '| iteration | tps | bdp events | pauses | paused ms | charged/written '
           '| peak dirty | samples >= freerun | folios added in the run: '
           + ' '.join(SIZES) + ' | cached in 2M after |',
           '|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|']
    for r in res['iterations']:
        out.append('| %d | %.0f | %d | %d | %d | x%.1f | %.0f MiB | %s | %s | %s |'
                   % (r['iter'], r['tps'], r['bdp_events'], r['pauses'], r['paused_ms'],
                      ratio(r['charged_pages'], r['written_pages']),
                      r.get('peak_dirty_pages', 0) * PAGE / MiB,
                      pct(r.get('above_freerun', 0.0)),
                      ' '.join(str(r['added'].get(o, 0)) for o in range(10)),
                      pct(share_2m(r['cached']))))
    low = [r['iter'] for r in res['iterations']
           if r.get('min_mem_available_kb') is not None
           and r['min_mem_available_kb'] * 1024 < 2 * args.mem]
    if low:
        out += ['', '**Warning**: the machine had less than twice the cgroup\'s memory '
                'available during iterations %s (other processes): global reclaim may have '
                'taken the cgroup\'s cache.' % ', '.join(map(str, low))]
    out += ['', 'Traced estimates per run, medians (balance_dirty_pages: dirty, pause taken; '
            'bdi_dirty_ratelimit: write_bw, dirty_rate, dirty_ratelimit):', '',
            '| iteration | dirty | pause | write_bw | dirty_rate | dirty_ratelimit |',
            '|---:|---:|---:|---:|---:|---:|']
    for r in res['iterations']:
        t = r.get('traced') or {}

        def f(key, scale, fmt):
            return 'n/a' if t.get(key) is None else fmt % (t[key] * scale)
        out.append('| %d | %s | %s | %s | %s | %s |'
                   % (r['iter'], f('bdp_dirty', PAGE / MiB, '%.0f MiB'),
                      f('bdp_pause', 1, '%.0f ms'), f('rl_write_bw', 1 / 1024, '%.1f MiB/s'),
                      f('rl_dirty_rate', 1 / 1024, '%.1f MiB/s'),
                      f('rl_dirty_ratelimit', 1 / 1024, '%.2f MiB/s')))
    out += ['', '2 MiB folios added in each iteration by kind of process (of all folios '
            'added), nr_dirty against the dirty threshold, and the automatic vacuums and '
            'analyzes that ended in it:', '',
            '| iteration | source step: 2M folios added; cgroup at its start: file / shmem / anon MiB '
            '| client backends '
            '| autovacuum | checkpointer | other '
            '| 5 s samples >= thresh | peak over | autovacuum (table: scanned, misses, '
            'dirtied, MB/s read, s) |',
            '|---:|---|---:|---:|---:|---:|---:|---|---|']
    for r in res['iterations']:
        by = r.get('added_by_role', {})

        def role(name):
            c = by.get(name, {})
            return '%d (%d)' % (c.get(9, 0), sum(c.values()))
        av = ['%s %s: %d, %d, %d, %.1f, %.0f'
              % (a['kind'], a['table'], a.get('scanned', 0), a.get('misses', 0),
                 a.get('dirtied', 0), a.get('read_mb_s', 0.0), a.get('elapsed_s', 0.0))
              for a in r.get('autovacuum', []) if a['table'].startswith('pgbench_accounts')]
        others = sum(1 for a in r.get('autovacuum', [])
                     if not a['table'].startswith('pgbench_accounts'))
        if others:
            av.append('%d of other tables' % others)
        m = r.get('cg_memory_start') or {}
        before = '%d, %.0f / %.0f / %.0f' % (r.get('source_added', {}).get(9, 0),
                                             m.get('file', 0), m.get('shmem', 0),
                                             m.get('anon', 0))
        out.append('| %d | %s | %s | %s | %s | %s | %s | %s | %s |'
                   % (r['iter'], before, role('client backend'), role('autovacuum worker'),
                      role('checkpointer'), role('other'), pct(r.get('above_thresh_5s', 0.0)),
                      'yes' if r.get('peak_over_thresh') else 'no', '; '.join(av) or '-'))
    out += ['', 'By file (pg_wal\'s segments, pgbench_accounts, its primary key, the rest): '
            '2 MiB folios added in the iteration (of all folios added), and the share of the '
            'file class\'s cached bytes in 2 MiB folios after it (of all cached bytes, MiB):',
            '', '| iteration | ' + ' | '.join('%s added' % c for c in FILE_CLASSES) + ' | '
            + ' | '.join('%s cached' % c for c in FILE_CLASSES) + ' |',
            '|---:|' + '---:|' * (2 * len(FILE_CLASSES))]
    for r in res['iterations']:
        add, cached = r.get('added_by_class', {}), r.get('cached_by_class', {})

        def added(c):
            return '%d (%d)' % (add.get(c, {}).get(9, 0), sum(add.get(c, {}).values()))

        def held(c):
            pages = sum(n << o for o, n in cached.get(c, {}).items())
            return '%s (%.0f)' % (pct(share_2m(cached.get(c, {}))), pages * PAGE / MiB)
        out.append('| %d | %s | %s |' % (r['iter'], ' | '.join(added(c) for c in FILE_CLASSES),
                                         ' | '.join(held(c) for c in FILE_CLASSES)))
    out += ['', '| mean tps | CV | worst | 2nd half vs 1st | charged/written | pauses | paused '
            '| 5 s samples >= thresh | iterations peak over |',
            '|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
            '| %.0f | %.2f%% | %.0f | %+.1f%% | x%.1f | %d | %.1f s | %s | %d of %d |'
            % (summ['mean_tps'], 100 * summ['cv'], summ['worst_tps'],
               100 * summ['second_half_vs_first'], summ['charged_per_written'],
               summ['pauses'], summ['paused_ms'] / 1000, pct(summ['above_thresh_5s']),
               summ['iters_peak_over_thresh'], len(res['iterations']))]
    return '\n'.join(out) + '\n'


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--fs', choices=('xfs', 'ext4'), default='xfs')
    ap.add_argument('--scale', type=int, default=100)
    ap.add_argument('--iters', type=int, default=8)
    ap.add_argument('--duration', type=int, default=30, help='seconds of each iteration')
    ap.add_argument('--clients', type=int, default=16)
    ap.add_argument('--mem', type=parse_size, default=parse_size('1G'),
                    help='the memory cgroup limit of the server (page cache included)')
    ap.add_argument('--shared-buffers',
                    help='128MB, or a quarter of --mem with --seed-settings')
    ap.add_argument('--dirty-bytes', type=parse_size, default=parse_size('200M'))
    ap.add_argument('--dirty-background-bytes', type=parse_size, default=parse_size('100M'))
    ap.add_argument('--pg-conf', action='append', default=[], metavar='NAME=VALUE',
                    help='a server setting, after all the others (repeatable)')
    ap.add_argument('--dirty-at-load', action='store_true',
                    help='set the dirty limits before pgbench -i, not after it (as a mount '
                    'has its limits from the start: the throttle\'s estimates carry over '
                    'from the load into the runs)')
    ap.add_argument('--ra-kb', type=int, default=2048)
    ap.add_argument('--source', choices=SOURCES, default='seqscan-each')
    ap.add_argument('--seed-settings', action='store_true',
                    help='the seed reproducer\'s server settings, scaled to --mem (see above)')
    ap.add_argument('--cold', action='store_true',
                    help='restart the server after pgbench -i with the page cache dropped')
    ap.add_argument('--tiny', action='store_true', help='a smoke run: scale 5, 2 x 5 s')
    ap.add_argument('--fillfactor', type=int, default=100,
                    help='pgbench -i fill factor (default 100, pgbench\'s)')
    ap.add_argument('--events', metavar='FILE',
                    help='write every balance_dirty_pages, bdi_dirty_ratelimit and '
                    'global_dirty_state event, with the runs\' windows, here '
                    '(gzipped JSON lines, contrib/kernel/refcmp.py)')
    ap.add_argument('--io-trace', metavar='FILE',
                    help='record the server\'s file I/O (bpftrace, from before initdb to its '
                    'stop) into FILE as a foliofs trace for foliofs-sim (contrib/kernel/kio.py); '
                    'the JSON result says where each run is on its clock (io_trace)')
    ap.add_argument('--json', help='write the raw results here')
    ap.add_argument('--md', help='write the report (markdown) here')
    args = ap.parse_args(argv)
    if args.tiny:
        args.scale, args.iters, args.duration, args.clients = 5, 2, 5, 4
        args.mem = parse_size('256M')
    if args.shared_buffers is None:
        args.shared_buffers = ('%dMB' % (args.mem // 4 // MiB) if args.seed_settings
                               else '128MB')
    if args.iters < 1 or args.duration < 1 or args.scale < 1 or args.clients < 1:
        ap.error('--scale, --iters, --duration and --clients are at least 1')
    if args.dirty_background_bytes >= args.dirty_bytes:
        ap.error('--dirty-background-bytes must be below --dirty-bytes')
    undo = Undo()
    with Signals():
        try:
            work = tempfile.mkdtemp(prefix='pg-seed-')
            os.chmod(work, 0o755)
            undo.push('rm -r ' + work, shutil.rmtree, work)
            res = run_reference(args, undo, work)
        except Skip as e:
            print('pg-seed: skipped: %s' % e, file=sys.stderr)
            return 77
        finally:
            undo.close()
    res['meta'] = {'date': datetime.datetime.now().isoformat(timespec='seconds'),
                   'kernel': os.uname().release,
                   'args': {k: v for k, v in vars(args).items()},
                   'commit': subprocess.run(['git', '-C', REPO, 'rev-parse', '--short', 'HEAD'],
                                            stdout=subprocess.PIPE, text=True).stdout.strip()}
    summ = summarize(res['iterations'])
    res['summary'] = summ
    md = markdown(args, res, summ)
    print(md, end='')
    if args.md:
        with open(args.md, 'w') as f:
            f.write(md)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
