#!/usr/bin/python3
"""pg-folios.py: which of PostgreSQL's activities build large folios, on
this machine's kernel and on a foliofs mount.

The seed blames 2 MiB folios for the cost of per-folio dirty charging, and
the readahead of 6.17+ for building them; pgbench's own random 8 KiB reads
build none.  This script runs a PostgreSQL 15 cluster through one activity
at a time, each from a cold cache (the server stopped, every relation file
evicted, the server started again with empty shared buffers), and records
the folios each activity adds to the page cache of the database's files:

  load          pgbench -i -s SCALE (COPY, index build, VACUUM)
  pgbench       pgbench -N -M prepared, autovacuum off
  vacuum        VACUUM pgbench_accounts after the pgbench run's updates
  seqscan       SELECT sum(abalance) FROM pgbench_accounts (a sequential
                scan: abalance is in no index; no parallel workers)
  prewarm       SELECT pg_prewarm('pgbench_accounts') (postgresql-contrib)
  autovacuum    pgbench -N with autovacuum made to act at this scale
                (naptime 1 s, scale factors 0, thresholds 1000, no delay)

Backends:
  kernel   as root: an XFS (or ext4) file system on a loop device
           (losetup --direct-io=on) over an image in the work directory,
           read_ahead_kb set to --ra-kb; folios from the tracefs event
           filemap:mm_filemap_add_to_page_cache of that device, each with
           the pid that added it, named by the server log (log_line_prefix
           '%p %b', log_connections, log_autovacuum_min_duration 0) as
           client backend, autovacuum worker, ...
  foliofs  build/foliofs (or --foliofs) over a backing directory in the
           work directory, -o folio_policy=kernel,cache=direct,
           readahead_kb=--ra-kb,allow_other plus every --opt (e.g.
           ra_model=6.16); the folios an activity left, from
           .foliofs/folios (the cache is emptied with .foliofs/evict
           before it).  The daemon does not know which process read, so
           the foliofs rows have no per-process split.

For each activity and relation class (pgbench_accounts, its primary key,
everything else) the report gives the folios added by size and the share
of their bytes in 2 MiB folios; --json keeps everything.

Usage (as root; the server runs as the postgres user):
  contrib/kernel/pg-folios.py --backend kernel [--fs xfs] [--scale 20]
  contrib/kernel/pg-folios.py --backend foliofs [--opt ra_model=6.16]
  contrib/kernel/pg-folios.py --backend both --json out.json
Exit status 0, 1 on failure, 77 when a backend cannot run here (reason on
stderr).  Everything set up is undone on exit, also on SIGINT/SIGTERM.
"""

import argparse
import collections
import datetime
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), '..', 'lib'))
from foliofs_tools import (  # noqa: E402
    PG_USER, Cluster, Signals, Skip, Undo, foliofs_evict, kernel_skip_reason, pg_bindir,
    pg_loop_fs, rd, relation_files, tracefs_root, umount_fuse, wait_mounted, wr)


PAGE = 4096
MiB = 1 << 20
ACTIVITIES = ('load', 'pgbench', 'vacuum', 'seqscan', 'prewarm', 'autovacuum')
AUTOVACUUM = ['autovacuum=on', 'autovacuum_naptime=1', 'autovacuum_vacuum_scale_factor=0',
              'autovacuum_vacuum_threshold=1000', 'autovacuum_vacuum_insert_scale_factor=0',
              'autovacuum_vacuum_insert_threshold=1000', 'autovacuum_analyze_scale_factor=0',
              'autovacuum_vacuum_cost_delay=0']


def log(msg):
    print('pg-folios: %s' % msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# the cluster

# --------------------------------------------------------------------------
# activities

def do_activity(name, cl, args):
    if name == 'load':
        cl.pgbench(['-i', '-q', '-s', str(args.scale)])
    elif name in ('pgbench', 'autovacuum'):
        cl.pgbench(['-N', '-M', 'prepared', '-c', str(args.clients), '-j', '2',
                    '-T', str(args.duration), '-n'])
        if name == 'autovacuum':
            time.sleep(2)       # let a worker that is running finish its table
    elif name == 'vacuum':
        cl.psql('VACUUM pgbench_accounts')
    elif name == 'seqscan':
        # sum(abalance): not in the index, so a sequential scan of the table
        cl.psql('SELECT sum(abalance) FROM pgbench_accounts')
    elif name == 'prewarm':
        cl.psql("CREATE EXTENSION IF NOT EXISTS pg_prewarm; "
                "SELECT pg_prewarm('pgbench_accounts')")


def settings_of(name):
    return AUTOVACUUM if name == 'autovacuum' else []


# --------------------------------------------------------------------------
# the kernel backend

class DevTracer:
    """filemap:mm_filemap_add_to_page_cache of one device, with the pid."""

    LINE = re.compile(r'-(\d+)\s+\[\d+\].*mm_filemap_add_to_page_cache: dev \d+:\d+ '
                      r'ino ([0-9a-f]+) pfn=0x[0-9a-f]+ ofs=(\d+) order=(\d+)')

    def __init__(self, root, undo):
        self.dir = os.path.join(root, 'instances', 'pg-folios-%d' % os.getpid())
        os.mkdir(self.dir)
        undo.push('rmdir ' + self.dir, self._remove)
        wr(os.path.join(self.dir, 'buffer_size_kb'), '65536')
        self.ev = os.path.join(self.dir, 'events', 'filemap', 'mm_filemap_add_to_page_cache')

    def _remove(self):
        try:
            wr(os.path.join(self.ev, 'enable'), '0')
        except OSError:
            pass
        os.rmdir(self.dir)

    def start(self, st_dev):
        kdev = (os.major(st_dev) << 20) | os.minor(st_dev)
        wr(os.path.join(self.ev, 'filter'), 's_dev == %d' % kdev)
        wr(os.path.join(self.ev, 'enable'), '1')
        wr(os.path.join(self.dir, 'trace'), '')
        wr(os.path.join(self.dir, 'tracing_on'), '1')

    def stop(self):
        """[(pid, ino, index, order)] since start()."""
        wr(os.path.join(self.dir, 'tracing_on'), '0')
        wr(os.path.join(self.ev, 'enable'), '0')
        lost = 0
        for cpu in os.listdir(os.path.join(self.dir, 'per_cpu')):
            stats = rd(os.path.join(self.dir, 'per_cpu', cpu, 'stats'))
            lost += int(re.search(r'^overrun: (\d+)', stats, re.M).group(1))
        out = []
        with open(os.path.join(self.dir, 'trace'), errors='replace') as f:
            for line in f:
                m = self.LINE.search(line)
                if m:
                    out.append((int(m.group(1)), int(m.group(2), 16),
                                int(m.group(3)) // PAGE, int(m.group(4))))
        return out, lost


def run_kernel_backend(args, undo, work):
    why = kernel_skip_reason()
    if why:
        raise Skip(why)
    bindir = pg_bindir()
    tracer = DevTracer(tracefs_root(undo), undo)
    _, data = pg_loop_fs(args.fs, work, max(4096, 80 * args.scale) * MiB, args.ra_kb, undo)
    cl = Cluster(bindir, data, work, undo)
    st_dev = os.stat(data).st_dev
    results = []
    cl.start()
    for name in args.activities:
        if name != 'load':
            cl.stop()
            evict_kernel_offline(data)
            cl.restart(settings_of(name))
        off = cl.log_size()
        tracer.start(st_dev)
        t0 = time.monotonic()
        do_activity(name, cl, args)
        secs = time.monotonic() - t0
        events, lost = tracer.stop()
        roles = cl.roles_since(off)
        files = relation_files(cl)
        ino_class = {}
        for path, cls in files.items():
            ino_class[os.stat(os.path.join(data, path)).st_ino] = cls
        rows = collections.defaultdict(collections.Counter)
        for pid, ino, _, order in events:
            cls = ino_class.get(ino, 'wal/other')
            rows[(cls, roles.get(pid, 'other process'))][order] += 1
        res = {'backend': 'kernel', 'fs': args.fs, 'activity': name, 'seconds': secs,
               'lost_events': lost,
               'added': {'%s|%s' % k: dict(v) for k, v in rows.items()}}
        log('kernel %s: %s' % (name, summary_line(res)))
        results.append(res)
    cl.stop()
    return results


def evict_kernel_offline(data):
    """Every file under DATA/base evicted (the server is stopped)."""
    for top, _, names in os.walk(os.path.join(data, 'base')):
        for n in names:
            fd = os.open(os.path.join(top, n), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


# --------------------------------------------------------------------------
# the foliofs backend

def ffs_folios(mnt):
    """{ino: [(index, order)]} of every cached folio."""
    out = collections.defaultdict(list)
    with open(os.path.join(mnt, '.foliofs', 'folios')) as f:
        for line in f:
            ino, index, order, _ = line.split()
            out[int(ino)].append((int(index), int(order)))
    return out


def ffs_evict_all(mnt, data):
    for top, _, names in os.walk(os.path.join(data, 'base')):
        for n in names:
            ino = os.stat(os.path.join(top, n)).st_ino
            foliofs_evict(mnt, ino, 0, 0)


def run_foliofs_backend(args, undo, work):
    binary = args.foliofs or os.environ.get('FOLIOFS') or os.path.join(REPO, 'build', 'foliofs')
    if not os.access(binary, os.X_OK):
        raise Skip('%s is not built' % binary)
    if os.geteuid() != 0:
        raise Skip('the foliofs backend runs the server as %s: run as root' % PG_USER)
    bindir = pg_bindir()
    back, mnt = os.path.join(work, 'back'), os.path.join(work, 'mnt')
    os.mkdir(back)
    os.mkdir(mnt)
    uid = pwd.getpwnam(PG_USER).pw_uid
    os.chown(back, uid, -1)
    options = ['folio_policy=kernel', 'cache=direct', 'readahead_kb=%d' % args.ra_kb,
               'cache_size=%s' % args.cache_size, 'allow_other'] + list(args.opt)
    out = open(os.path.join(work, 'foliofs.log'), 'w')
    proc = subprocess.Popen([binary, '-f', '-o', ','.join(options), back, mnt],
                            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    undo.push('unmount ' + mnt, umount_fuse, mnt, proc)
    wait_mounted(mnt, proc)
    data = os.path.join(mnt, 'pgdata')
    os.mkdir(data, 0o700)
    os.chown(data, uid, -1)
    cl = Cluster(bindir, data, work, undo)
    results = []
    cl.start()
    for name in args.activities:
        if name != 'load':
            cl.stop()
            ffs_evict_all(mnt, data)
            cl.restart(settings_of(name))
        before = ffs_folios(mnt)
        t0 = time.monotonic()
        do_activity(name, cl, args)
        secs = time.monotonic() - t0
        after = ffs_folios(mnt)
        files = relation_files(cl)
        ino_class = {os.stat(os.path.join(data, p)).st_ino: c for p, c in files.items()}
        rows = collections.defaultdict(collections.Counter)
        for ino, folios in after.items():
            old = set(before.get(ino, ()))
            for f in folios:
                if f not in old:
                    rows[(ino_class.get(ino, 'wal/other'), 'all')][f[1]] += 1
        res = {'backend': 'foliofs', 'fs': 'foliofs', 'activity': name, 'seconds': secs,
               'options': options,
               'added': {'%s|%s' % k: dict(v) for k, v in rows.items()}}
        log('foliofs %s: %s' % (name, summary_line(res)))
        results.append(res)
    cl.stop()
    return results


# --------------------------------------------------------------------------
# reporting

def by_class(res):
    """{class: Counter(order -> folios)} summed over processes."""
    out = collections.defaultdict(collections.Counter)
    for key, h in res['added'].items():
        cls = key.split('|')[0]
        for o, n in h.items():
            out[cls][int(o)] += n
    return out


def share_2m(h):
    total = sum(n << int(o) for o, n in h.items())
    return (h.get(9, 0) << 9) / total if total else 0.0


def summary_line(res):
    parts = []
    for cls, h in sorted(by_class(res).items()):
        mib = sum(n << o for o, n in h.items()) * PAGE / MiB
        parts.append('%s %.0f MiB, %d%% in 2M' % (cls, mib, 100 * share_2m(h)))
    return '; '.join(parts) or 'no folios added'


SIZES = ['4K', '8K', '16K', '32K', '64K', '128K', '256K', '512K', '1M', '2M']


def report(results):
    lines = []
    for res in results:
        tag = '%s/%s' % (res['backend'], res['fs'])
        if res['backend'] == 'foliofs':
            extra = [o for o in res['options'] if o.startswith('ra_model=')]
            tag += ' (%s)' % (extra[-1] if extra else 'ra_model default')
        lines.append('== %s: %s (%.0f s)' % (tag, res['activity'], res['seconds']))
        lines.append('  %-28s %s %8s %6s' % ('relation | process', ' '.join('%6s' % s for s in SIZES),
                                              'MiB', 'in 2M'))
        for key in sorted(res['added']):
            h = {int(o): n for o, n in res['added'][key].items()}
            mib = sum(n << o for o, n in h.items()) * PAGE / MiB
            lines.append('  %-28s %s %8.1f %5.0f%%'
                         % (key.replace('|', ' | ')[:28],
                            ' '.join('%6s' % (h.get(o, '') or '') for o in range(10)),
                            mib, 100 * share_2m(h)))
    return '\n'.join(lines)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--backend', choices=('kernel', 'foliofs', 'both'), default='kernel')
    ap.add_argument('--fs', choices=('xfs', 'ext4'), default='xfs')
    ap.add_argument('--scale', type=int, default=20)
    ap.add_argument('--clients', type=int, default=8)
    ap.add_argument('--duration', type=int, default=30, help='seconds of each pgbench run')
    ap.add_argument('--ra-kb', type=int, default=2048)
    ap.add_argument('--cache-size', default='4G', help='foliofs cache_size')
    ap.add_argument('--opt', action='append', default=[], help='a foliofs -o option (repeatable)')
    ap.add_argument('--foliofs', help='the daemon (default $FOLIOFS or build/foliofs)')
    ap.add_argument('--activities', default=','.join(ACTIVITIES))
    ap.add_argument('--json', help='write the raw results here')
    args = ap.parse_args(argv)
    args.activities = [a for a in args.activities.split(',') if a]
    bad = [a for a in args.activities if a not in ACTIVITIES]
    if bad or not args.activities or args.activities[0] != 'load':
        ap.error('--activities: from %s, starting with load' % ', '.join(ACTIVITIES))
    results = []
    undo = Undo()
    with Signals():
        try:
            backends = ('kernel', 'foliofs') if args.backend == 'both' else (args.backend,)
            for b in backends:
                work = tempfile.mkdtemp(prefix='pg-folios-')
                os.chmod(work, 0o755)
                undo.push('rm -r ' + work, shutil.rmtree, work)
                fn = run_kernel_backend if b == 'kernel' else run_foliofs_backend
                results += fn(args, undo, work)
                undo.close()
        except Skip as e:
            print('pg-folios: skipped: %s' % e, file=sys.stderr)
            return 77
        finally:
            undo.close()
    print(report(results))
    if args.json:
        meta = {'date': datetime.datetime.now().isoformat(timespec='seconds'),
                'kernel': os.uname().release, 'args': {k: v for k, v in vars(args).items()},
                'commit': subprocess.run(['git', '-C', REPO, 'rev-parse', '--short', 'HEAD'],
                                         stdout=subprocess.PIPE, text=True).stdout.strip()}
        with open(args.json, 'w') as f:
            json.dump({'meta': meta, 'results': results}, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
