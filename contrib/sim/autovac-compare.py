#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""autovac-compare.py: PostgreSQL's autovacuum of pgbench_accounts recorded
on a foliofs mount, against `foliofs-sim gen pgbench,autovacuum=1` at the
same scale and update count (issue 38, item 3).

The real side: foliofs mounted on WORK/mnt (as the postgres user, who alone
uses it), a PostgreSQL cluster in it (shared_buffers 128MB, autovacuum on
with autovacuum_naptime NAPTIME, log_autovacuum_min_duration=0,
track_io_timing=on), `pgbench -i -s SCALE`, then on pgbench_accounts
autovacuum_vacuum_scale_factor SCALE_FACTOR (so that a burst of a few
minutes passes the trigger) and no automatic ANALYZE (its reads would mix
with the vacuum's), a CHECKPOINT, then the mount's trace (foliofsctl trace
start) over a burst of `pgbench -N` updates and until the automatic
vacuums it triggers are over, n_dead_tup and the HOT counts sampled every
second.  Each "automatic vacuum of table ...pgbench_accounts" the log
reports (its pid, its end and elapsed time) picks the worker's records out
of the trace: reads and writes per file class (heap, index, visibility
map, free space map, WAL), sizes, bytes per second.

The generated side: the same scale, clients, rate and updates, shared
buffers and autovacuum settings, data checksums off as initdb's default
(hint_fpw=0), shared buffers empty at the start (cold=1: pgbench -i loads
through rings), av_hot at the generator's default (or --av-hot); the
worker's records from the generated trace, its vacuums from the
generator's schedule lines.  --from-json RUN_JSON takes the real side
from an earlier run.json and makes the generated side anew (after a
change of the generator), with no mount and no server.

  contrib/sim/autovac-compare.py OUTDIR [--scale 20] [--fillfactor 100] [--updates 150000]
      [--clients 8] [--naptime 5] [--scale-factor 0.01] [--av-hot F]
      [--foliofs build/foliofs] [--sim build/sim/foliofs-sim] [--from-json RUN_JSON]

OUTDIR gets report.md (the tables), run.json (every number: the
vacuums, the samples, the per-second pacing) and autovacuum.log (the
server's autovacuum lines).  The mount's trace is left in WORK (--work,
default /var/tmp/autovac-compare), not in OUTDIR (hundreds of MB).
Exit status 77 with the reason when it cannot run here (not root, no
FUSE, no PostgreSQL, foliofs not built).
"""
import argparse
import collections
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'lib'))
import foliofs_tools as ft  # noqa: E402
from foliofs_trace import MountTrace, file_id, trace_records  # noqa: E402

REPO = os.path.realpath(os.path.join(HERE, '..', '..'))
PAGE = 8192
MIB = 1 << 20
ACCOUNTS = 'postgres.public.pgbench_accounts'
# The worker's files by class; 'other' is every other file (other tables'
# and the catalogs', which the worker also vacuums in its round).
CLASSES = ('heap', 'index', 'vm', 'fsm', 'wal', 'other')


def log(msg):
    print('autovac-compare: %s' % msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the real side

def pg_settings(a):
    return ['shared_buffers=128MB', 'max_wal_size=1GB', 'autovacuum=on',
            'autovacuum_naptime=%ds' % a.naptime, 'log_autovacuum_min_duration=0',
            'track_io_timing=on', 'log_line_prefix=%m [%p] %b ']


def sample_stats(cl, stop, out):
    """Every second until STOP: pgbench_accounts's counters (unix ms first)."""
    sql = ("SELECT n_tup_upd, n_tup_hot_upd, n_dead_tup, autovacuum_count, "
           "(SELECT count(*) FROM pg_stat_progress_vacuum WHERE relid = "
           "'pgbench_accounts'::regclass) FROM pg_stat_user_tables "
           "WHERE relname = 'pgbench_accounts'")
    while not stop.is_set():
        t = time.time()
        try:
            row = cl.psql(sql).strip().split('|')
            out.append([int(t * 1000)] + [int(x) for x in row])
        except (RuntimeError, ValueError) as e:
            log('sample: %s' % e)
        stop.wait(max(0.0, 1.0 - (time.time() - t)))


def relation_paths(cl):
    """{path relative to the data directory: class} of pgbench_accounts's
    forks and its primary key (segments added by file_classes())."""
    out = {}
    for rel, cls in (('pgbench_accounts', 'heap'), ('pgbench_accounts_pkey', 'index')):
        path = cl.psql("SELECT pg_relation_filepath('%s')" % rel).strip()
        out[path] = cls
        if cls == 'heap':
            out[path + '_vm'] = 'vm'
            out[path + '_fsm'] = 'fsm'
    return out


def file_classes(data, rels):
    """{trace file id: class} of the files under the data directory DATA
    (the backing directory's: the mount names files by backing inode)."""
    out = {}
    for top, _, names in os.walk(data):
        for name in names:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, data)
            base = re.sub(r'\.\d+$', '', rel)
            cls = 'wal' if rel.startswith('pg_wal' + os.sep) else rels.get(base, 'other')
            try:
                out[file_id(os.stat(path).st_ino)] = cls
            except OSError:
                pass
    return out


VACUUM_RE = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) (\w+) \[(\d+)\] autovacuum worker '
                       r'LOG:  automatic vacuum of table "([^"]+)": index scans: (\d+)')
DETAIL_RES = {
    'pages': (r'pages: (\d+) removed, (\d+) remain, (\d+) scanned',
              ('pages_removed', 'rel_pages', 'heap_scanned')),
    'tuples': (r'tuples: (\d+) removed, (\d+) remain, (\d+) are dead but not yet removable',
               ('tuples_removed', 'tuples_remain', 'tuples_recently_dead')),
    'index_needed': (r'index scan needed: (\d+) pages from table .* had (\d+) dead item',
                     ('lpdead_pages', 'lpdead_items')),
    'index_bypassed': (r'index scan bypassed: (\d+) pages from table .* have (\d+) dead item',
                       ('lpdead_pages', 'lpdead_items')),
    'index': (r'index "pgbench_accounts_pkey": pages: (\d+) in total', ('index_pages',)),
    'rates': (r'avg read rate: ([\d.]+) MB/s, avg write rate: ([\d.]+) MB/s',
              ('log_read_mbs', 'log_write_mbs')),
    'buffers': (r'buffer usage: (\d+) hits, (\d+) misses, (\d+) dirtied',
                ('hits', 'misses', 'dirtied')),
    'wal': (r'WAL usage: (\d+) records, (\d+) full page images, (\d+) bytes',
            ('wal_records', 'wal_images', 'wal_bytes')),
    'io': (r'I/O timings: read: ([\d.]+) ms, write: ([\d.]+) ms', ('read_ms', 'write_ms')),
    'elapsed': (r'elapsed: ([\d.]+) s', ('duration_s',)),
}


def parse_vacuums(path):
    """The automatic vacuums of pgbench_accounts in the server log PATH:
    dicts of pid, end_unix_ms and DETAIL_RES's numbers; and the log's
    autovacuum workers' lines with their continuation lines (for OUTDIR)."""
    vacs, lines, cur, keep = [], [], None, False
    with open(path, errors='replace') as f:
        for line in f:
            if not line.startswith('\t'):
                keep = 'autovacuum worker' in line
                cur = None
                m = VACUUM_RE.match(line)
                if m and m.group(4) == ACCOUNTS:
                    end = datetime.datetime.strptime(m.group(1), '%Y-%m-%d %H:%M:%S.%f')
                    end = end.replace(tzinfo=datetime.timezone.utc).timestamp()
                    cur = {'pid': int(m.group(3)), 'end_unix_ms': end * 1000,
                           'index_scans': int(m.group(5)), 'bypassed': 0}
                    vacs.append(cur)
            if keep:
                lines.append(line)
            if cur is None:
                continue
            for key, (rx, names) in DETAIL_RES.items():
                m = re.search(rx, line)
                if m:
                    for name, val in zip(names, m.groups()):
                        cur[name] = float(val) if '.' in val else int(val)
                    if key == 'index_bypassed':
                        cur['bypassed'] = 1
    for v in vacs:
        v['start_unix_ms'] = v['end_unix_ms'] - v.get('duration_s', 0) * 1000
    return vacs, lines


def run_real(a, work):
    """The real run: (its vacuums, samples, pgbench's tps, the burst's
    unix ms start and end, the trace's path, {file id: class}, the
    MountTrace, the autovacuum log lines)."""
    for prog in (a.foliofs, a.foliofsctl):
        if not prog or not os.access(prog, os.X_OK):
            raise ft.Skip('%s is not built' % (prog or 'foliofsctl'))
    if os.geteuid() != 0:
        raise ft.Skip('run as root (the cluster and the mount run as postgres)')
    if not os.path.exists('/dev/fuse'):
        raise ft.Skip('no /dev/fuse')
    bindir = ft.pg_bindir()
    undo = ft.Undo()
    try:
        if os.path.exists(work):
            shutil.rmtree(work)
        os.makedirs(work)
        backing, mnt = os.path.join(work, 'backing'), os.path.join(work, 'mnt')
        for d in (backing, mnt):
            os.mkdir(d)
        pw = __import__('pwd').getpwnam(ft.PG_USER)
        for d in (work, backing, mnt):
            os.chown(d, pw.pw_uid, pw.pw_gid)
        daemon_log = open(os.path.join(work, 'foliofs.log'), 'wb')
        cmd = ['runuser', '-u', ft.PG_USER, '--', a.foliofs, '-f', '-o', a.mount_opts,
               backing, mnt]
        log('mounting: %s' % ' '.join(cmd[4:]))
        daemon = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=daemon_log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        undo.push('umount', ft.umount_fuse, mnt, daemon)
        ft.wait_mounted(mnt, daemon, 20)
        data = os.path.join(mnt, 'pgdata')
        ft.as_pg(['mkdir', data])
        cl = ft.Cluster(bindir, data, work, undo)
        cl.start(pg_settings(a))
        log('pgbench -i -s %d' % a.scale)
        cl.pgbench(['-i', '-q', '-s', str(a.scale), '-F', str(a.fillfactor)])
        cl.psql("ALTER TABLE pgbench_accounts SET (autovacuum_vacuum_scale_factor = %s, "
                "autovacuum_analyze_threshold = 2000000000)" % a.scale_factor)
        cl.psql('CHECKPOINT')
        rels = relation_paths(cl)
        trace = MountTrace(a.foliofsctl, mnt, os.path.join(work, 'mount.trace'), ft.as_pg)
        trace.start()
        samples, stop = [], threading.Event()
        sampler = threading.Thread(target=sample_stats, args=(cl, stop, samples))
        sampler.start()
        try:
            per_client = a.updates // a.clients
            log('pgbench -N: %d clients x %d' % (a.clients, per_client))
            t0 = time.time()
            out = cl.pgbench(['-N', '-M', 'prepared', '-c', str(a.clients), '-j', '2',
                              '-t', str(per_client)])
            t1 = time.time()
            m = re.search(r'tps = ([\d.]+) \(without initial connection time\)', out)
            tps = float(m.group(1)) if m else a.updates / (t1 - t0)
            # until the vacuums the burst triggered are over: three checks
            # after it, and none running
            while True:
                time.sleep(1)
                running = samples and samples[-1][5] > 0
                if time.time() > t1 + 3 * a.naptime and not running:
                    break
                if time.time() > t1 + 600:
                    log('a vacuum still runs 600 s after the burst: stopping')
                    break
        finally:
            stop.set()
            sampler.join()
        trace.stop()
        classes = file_classes(os.path.join(backing, 'pgdata'), rels)
        cl.stop()
        vacs, lines = parse_vacuums(cl.log)
        return dict(vacuums=vacs, samples=samples, tps=tps, burst=(t0 * 1000, t1 * 1000),
                    trace=trace.path, classes=classes, mount=trace, log_lines=lines,
                    pgbench=out)
    finally:
        undo.close()


def worker_io(records, windows, cls_of):
    """For each window (pid, start_ns, end_ns): the worker's I/O in it:
    counts and bytes per (op, class), read sizes, and bytes per second
    from its start (reads, writes)."""
    out = [{'ops': collections.Counter(), 'bytes': collections.Counter(),
            'read_sizes': collections.Counter(), 'per_s': collections.defaultdict(lambda: [0, 0])}
           for _ in windows]
    by_pid = collections.defaultdict(list)
    for i, (pid, start, end) in enumerate(windows):
        by_pid[pid].append((i, start, end))
    for r in records:
        for i, start, end in by_pid.get(r['pid'], ()):
            if not start <= r['time_ns'] <= end:
                continue
            w, op, cls = out[i], r['op'], cls_of(r['file'])
            w['ops'][(op, cls)] += 1
            w['bytes'][(op, cls)] += r['length']
            if op in ('read', 'write'):
                sec = int((r['time_ns'] - start) // 1000000000)
                w['per_s'][sec][op == 'write'] += r['length']
            if op == 'read':
                w['read_sizes'][r['length']] += 1
    return out


def io_summary(w, duration_s):
    def n(op, cls):
        return w['ops'][(op, cls)]

    reads = sum(b for (op, _), b in w['bytes'].items() if op == 'read')
    secs = max(w['per_s']) + 1 if w['per_s'] else 0
    return {
        'heap_reads': n('read', 'heap'), 'index_reads': n('read', 'index'),
        'other_reads': sum(c for (op, cls), c in w['ops'].items()
                           if op == 'read' and cls not in ('heap', 'index')),
        'heap_writes': n('write', 'heap'), 'index_writes': n('write', 'index'),
        'vm_writes': n('write', 'vm'), 'fsm_writes': n('write', 'fsm'),
        'wal_writes': n('write', 'wal'), 'wal_write_bytes': w['bytes'][('write', 'wal')],
        'wal_syncs': n('fdatasync', 'wal') + n('fsync', 'wal'),
        'other_writes': n('write', 'other'),
        'read_sizes': {str(k): v for k, v in sorted(w['read_sizes'].items())},
        'read_mb': reads / MIB,
        'read_mbs': reads / MIB / duration_s if duration_s else 0.0,
        'per_s_read_mib': [round(w['per_s'][s][0] / MIB, 2) for s in range(secs)],
        'per_s_write_mib': [round(w['per_s'][s][1] / MIB, 2) for s in range(secs)],
    }


def real_vacuums(real):
    """The real vacuums, each with its worker's I/O from the trace."""
    mt, t0 = real['mount'], real['burst'][0]
    vacs = real['vacuums']
    # 50 ms of slack: the log's times are in ms, its elapsed in 10 ms
    windows = [(v['pid'], mt.to_trace_ns(v['start_unix_ms']) - 50000000,
                mt.to_trace_ns(v['end_unix_ms']) + 50000000) for v in vacs]
    ios = worker_io(trace_records(real['trace']), windows,
                    lambda fid: real['classes'].get(fid, 'other'))
    out = []
    for v, w in zip(vacs, ios):
        d = dict(v, start_s=(v['start_unix_ms'] - t0) / 1000)
        # n_dead_tup at its start: the last sample before it
        before = [r for r in real['samples'] if r[0] <= v['start_unix_ms']]
        d['n_dead'] = before[-1][3] if before else None
        d.update(io_summary(w, v.get('duration_s', 0)))
        out.append(d)
    return out


# ---------------------------------------------------------------- the generated side

def gen_spec(a, updates, tps):
    spec = ('pgbench,scale=%d,fillfactor=%d,clients=%d,tps=%d,txns=%d,shared_buffers=128M,'
            'checkpoint_s=300,hint_fpw=0,cold=1,end_ckpt=0,autovacuum=1,av_naptime=%d,av_scale=%s'
            % (a.scale, a.fillfactor, a.clients, max(1, round(tps)), updates, a.naptime,
               a.scale_factor))
    return spec + (',av_hot=%s' % a.av_hot if a.av_hot else '')


def run_gen(a, spec, work, name):
    """The generated vacuums, each with its worker's I/O from the trace."""
    path = os.path.join(work, name + '.trace')
    r = subprocess.run([a.sim, 'gen', spec, '-o', path], capture_output=True, text=True,
                       check=True)
    lay, vacs, pid, totals = {}, [], None, {}
    for line in r.stdout.splitlines():
        w = line.split()
        if w[:1] == ['pgbench']:
            lay = {w[i]: int(w[i + 1]) for i in range(1, len(w) - 1, 2)}
        elif w[:2] == ['autovacuum', 'pid']:
            pid = int(w[2])
        elif w[:2] == ['autovacuum', 'total']:
            totals = {w[i]: int(w[i + 1]) for i in range(2, len(w) - 1, 2)}
        elif w[:1] == ['autovacuum']:
            vacs.append({w[i]: float(w[i + 1]) for i in range(2, len(w) - 1, 2)})
    # files: heap segments, index segments, history, WAL, the maps (pgbench.c)
    seg = (1 << 30) // PAGE
    heap_segs = -(-lay['table_pages'] // seg)
    idx_segs = -(-lay['index_pages'] // seg)
    last = lay['files']

    def cls_of(fid):
        if fid <= heap_segs:
            return 'heap'
        if fid <= heap_segs + idx_segs:
            return 'index'
        return {last - 1: 'vm', last: 'fsm', heap_segs + idx_segs + 1: 'other'}.get(fid, 'wal')

    windows = [(pid, int(v['start_s'] * 1e9), int(v['end_s'] * 1e9) + 1000000) for v in vacs]
    ios = worker_io(trace_records(path), windows, cls_of)
    out = []
    for v, w in zip(vacs, ios):
        d = dict(v, duration_s=v['end_s'] - v['start_s'])
        d.update(io_summary(w, d['duration_s']))
        out.append(d)
    os.unlink(path)
    return {'spec': spec, 'stdout': r.stdout, 'vacuums': out, 'totals': totals}


# ---------------------------------------------------------------- the report

ROWS = (
    ('vacuums of pgbench_accounts', 'count', '%d'),
    ('first start, s after the burst began', 'start_s', '%.1f'),
    ('n_dead_tup when it began', 'n_dead', '%d'),
    ('duration, s', 'duration_s', '%.2f'),
    ('heap pages scanned', 'heap_scanned', '%d'),
    ('pages with dead items (index pass: not bypassed)', 'lpdead_pages', '%d'),
    ('index pages scanned', 'index_pages', '%d'),
    ('buffer hits', 'hits', '%d'),
    ('buffer misses', 'misses', '%d'),
    ('buffers dirtied', 'dirtied', '%d'),
    ('heap pages read (8 KiB reads of the worker)', 'heap_reads', '%d'),
    ('index pages read', 'index_reads', '%d'),
    ('other reads (catalogs, maps)', 'other_reads', '%d'),
    ('heap pages written by the worker', 'heap_writes', '%d'),
    ('index pages written by the worker', 'index_writes', '%d'),
    ('visibility map / free space map pages written by the worker', 'maps_writes', '%s'),
    ('WAL writes by the worker (MiB)', 'wal_w', '%s'),
    ('WAL fdatasyncs by the worker', 'wal_syncs', '%d'),
    ('WAL generated, MiB (log: WAL usage)', 'wal_mib', '%.2f'),
    ('WAL full-page images', 'wal_images', '%d'),
    ('read MB/s (worker reads / duration)', 'read_mbs', '%.1f'),
)


def row_values(vacs):
    if not vacs:
        return {'count': 0}
    v = dict(vacs[0], count=len(vacs))
    v['maps_writes'] = '%d / %d' % (v.get('vm_writes', 0), v.get('fsm_writes', 0))
    v['wal_w'] = '%d (%.2f)' % (v.get('wal_writes', 0), v.get('wal_write_bytes', 0) / MIB)
    v['wal_mib'] = v.get('wal_bytes', 0) / MIB
    return v


def fmt(fmtstr, v):
    if v is None:
        return 'n/a'
    try:
        return fmtstr % v
    except TypeError:
        return str(v)


def report(a, real, rv, gens, hot):
    gt = gens[0][1]['totals']
    cols = [('real (first vacuum)', row_values(rv))]
    cols += [('%s (first vacuum)' % name, row_values(g['vacuums'])) for name, g in gens]
    text = ['# Autovacuum of pgbench_accounts: a real one on foliofs against the generator',
            '',
            'scale %d, fillfactor %d, %d clients, %d updates (`pgbench -N -M prepared`, %.0f tps), '
            'autovacuum_naptime %d s, autovacuum_vacuum_scale_factor %s on pgbench_accounts '
            '(trigger %d dead tuples), no automatic ANALYZE of it, shared_buffers 128MB; '
            'HOT share of the updates: %.4f real (n_tup_hot_upd / n_tup_upd), %.4f generated.'
            % (a.scale, a.fillfactor, a.clients, a.updates, real['tps'], a.naptime, a.scale_factor,
               50 + float(a.scale_factor) * a.scale * 100000, hot,
               gt.get('hot', 0) / gt['updates'] if gt.get('updates') else 0.0),
            '',
            '| | ' + ' | '.join(c[0] for c in cols) + ' |',
            '|---|' + '---:|' * len(cols)]
    for label, key, f in ROWS:
        text.append('| %s | %s |' % (label, ' | '.join(fmt(f, c[1].get(key)) for c in cols)))
    text += ['', 'Every vacuum: start s after the burst began, duration s, heap scanned, '
             'misses, dirtied, read MB/s:', '']
    for name, vacs in [('real', rv)] + [(n, g['vacuums']) for n, g in gens]:
        text.append('- %s: %s' % (name, '; '.join(
            '%.1f, %.2f, %d, %d, %d, %.1f' % (v['start_s'], v['duration_s'], v['heap_scanned'],
                                              v.get('misses', 0), v.get('dirtied', 0),
                                              v['read_mbs']) for v in vacs) or 'none'))
    text += ['', 'Read MiB per second of the first vacuum, from its start:', '']
    for name, vacs in [('real', rv)] + [(n, g['vacuums']) for n, g in gens]:
        if vacs:
            text.append('- %s: %s' % (name, ' '.join('%.1f' % x for x in
                                                    vacs[0]['per_s_read_mib'][:40])))
    text += ['', 'Generator specs:', '']
    text += ['    foliofs-sim gen %s' % g['spec'] for _, g in gens]
    return '\n'.join(text) + '\n'


def from_json(a):
    """--from-json: the real side of an earlier run (its settings too)."""
    with open(a.from_json) as f:
        d = json.load(f)
    for key in ('scale', 'fillfactor', 'updates', 'clients', 'naptime', 'scale_factor'):
        if key in d['args']:
            setattr(a, key, d['args'][key])
    real = {'tps': d['tps'], 'trace_json': d['trace'], 'burst': (0, d['burst_s'] * 1000)}
    return real, d['real'], d['samples'], 0


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('outdir')
    p.add_argument('--scale', type=int, default=20)
    p.add_argument('--fillfactor', type=int, default=100)
    p.add_argument('--updates', type=int, default=150000)
    p.add_argument('--clients', type=int, default=8)
    p.add_argument('--naptime', type=int, default=5)
    p.add_argument('--scale-factor', default='0.01')
    p.add_argument('--mount-opts', default='cache_size=1G')
    p.add_argument('--foliofs', default=os.path.join(REPO, 'build', 'foliofs'))
    p.add_argument('--foliofsctl')
    p.add_argument('--sim')
    p.add_argument('--work', default='/var/tmp/autovac-compare')
    p.add_argument('--av-hot', help="the generator's av_hot (default: its own)")
    p.add_argument('--from-json', metavar='RUN_JSON',
                   help="a run.json of this script's: its real side again, the generated "
                   "side made anew (after a change of the generator)")
    a = p.parse_args(argv)
    top = os.path.dirname(os.path.abspath(a.foliofs))
    a.foliofsctl = a.foliofsctl or os.path.join(top, 'tools', 'foliofsctl')
    a.sim = a.sim or os.path.join(top, 'sim', 'foliofs-sim')
    return a


def main(argv):
    a = parse_args(argv)
    if not os.access(a.sim, os.X_OK):
        print('autovac-compare: skip: %s is not built' % a.sim, file=sys.stderr)
        return 77
    if a.from_json:
        real, rv, s, t0 = from_json(a)
    else:
        try:
            with ft.Signals():
                real = run_real(a, a.work)
        except ft.Skip as e:
            print('autovac-compare: skip: %s' % e, file=sys.stderr)
            return 77
        rv = real_vacuums(real)
        t0 = real['burst'][0]
        s = real['samples']
        s = [[round((r[0] - t0) / 1000, 2)] + r[1:] for r in s]
        real['trace_json'] = real['mount'].json()
    os.makedirs(a.outdir, exist_ok=True)
    # the burst's own numbers: updates and HOT ones, from the samples
    upd = s[-1][1] - s[0][1] if len(s) > 1 else a.updates
    hot = (s[-1][2] - s[0][2]) / upd if upd else 0.0
    gens = [('generated', run_gen(a, gen_spec(a, a.updates, real['tps']), a.work, 'gen'))]
    with open(os.path.join(a.outdir, 'run.json'), 'w') as f:
        json.dump({'args': {k: v for k, v in vars(a).items() if k != 'from_json'},
                   'tps': real['tps'],
                   'burst_s': (real['burst'][1] - t0) / 1000, 'hot_measured': hot,
                   'trace': real['trace_json'],
                   'samples_cols': ['t_s', 'n_tup_upd', 'n_tup_hot_upd', 'n_dead_tup',
                                    'autovacuum_count', 'vacuum_running'],
                   'samples': s, 'real': rv,
                   'generated': {n: {'spec': g['spec'], 'vacuums': g['vacuums'],
                                     'totals': g['totals']} for n, g in gens}}, f, indent=1)
    if not a.from_json:
        with open(os.path.join(a.outdir, 'autovacuum.log'), 'w') as f:
            f.writelines(x for x in real['log_lines'] if x)
    text = report(a, real, rv, gens, hot)
    with open(os.path.join(a.outdir, 'report.md'), 'w') as f:
        f.write(text)
    print(text)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
