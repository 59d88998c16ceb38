#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The seed's pgbench scenario in foliofs-sim: a generated trace replayed
under folio and page charging and both readahead models, and the table
the seed reports (tps per iteration, mean, CV, worst and best, iterations
1-5 against 6-10, charged against written, pauses).

    pgbench-seed.py [--sim BIN] [-j N] [--iterations N] [--duration S]
                    [--warmup S] [--gen ITEMS] [-o OPTIONS] [--configs NAMES]
                    [--unbounded] [--stream | --keep] OUTDIR

The generator makes one trace (OUTDIR/seed.trace, deleted afterwards
unless --keep); each configuration replays it (OUTDIR/NAME.out), N at once.
--stream: no trace file; each replay makes the same trace in process as
it reads it (foliofs-sim --gen; the generator's schedule in NAME.err):
the seed's full length (10 x 600 s) would be a ~130 GB file.  Each
replay logs its stats every 5 s of simulated time (NAME.stats.jsonl.gz):
the 2 MiB share of the cache at each iteration's end and the share of
5 s samples with nr_dirty above dirty_thresh (the seed's 17%) come from it.
Iterations are time-bounded as pgbench -T bounds a run (the generator's
deadline=1): a replayed client stops at its iteration's deadline and the
next iteration starts after it; an iteration's tps is the transactions
done by the deadline over its length (the replay's iteration lines), and
the table counts the transactions skipped (due before the deadline, not
started by it), the clients that ran out of transactions before it (dry;
0 by construction) and how long after it the last client finished the
transaction in flight (overrun).  --unbounded: without deadline=1, as
before: each client does all its transactions, and an iteration's tps is
its clients' transactions over their own spans (the sum over its clients
of txns x achieved_ops_s / ops, from the writer lines and gen.out).  --configs runs
some of the configurations (names comma-separated).  table.md also gives
each replay's CPU time and peak RSS (the kernel's, from wait4).
"""
import argparse
import csv
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# The seed (seeds/000): 1024 clients, scale 8470, fillfactor 90, ~200k tps;
# PostgreSQL settings of aws/repro-collection's postgresql workload:
# shared_buffers 25% of 384 GB, checkpoint_timeout 5min, target 0.9,
# --wal-segsize=64 --data-checksums, full_page_writes on.  wal_each=1: every
# commit passes the throttle, as every commit waits for a WAL flush that
# balance_dirty_pages may hold (a trace has no waits between processes).
GEN = ('pgbench,clients=1024,scale=8470,fillfactor=90,tps=200000,shared_buffers=96G,'
       'checkpoint_s=300,ckpt_target=90,fpw=1,hint_fpw=1,index=1,wal_seg=64M,wal_files=64,'
       'wal_each=1,scan=1')
# The machine: page cache and dirty limits of a 384 GB m8g.24xlarge
# (dirtyable ~275 GB: 384 - 96 GB of huge pages for shared_buffers - anon and
# kernel; dirty_ratio 20, dirty_background_ratio 10: the defaults), XFS-like
# sizing (kernel policy, 2 MiB folios, 2 MiB readahead), bdp throttling;
# the array: 12 io2 volumes of 32,000 IOPS, RAID 0.
OPTS = ('sim_data=0,cache_size=275G,dirty_ratio=20,dirty_background_ratio=10,'
        'folio_size=2M,folio_policy=kernel,throttle=bdp,'
        'dev_raid=12,dev_iops=32000,dev_bw=1000M,dev_lat_us=300,dev_qd=32,'
        'dev_flush_us=200,dev_stripe=512K')
CONFIGS = [
    ('6.17-folio', 'ra_model=6.17,dirty_account=folio'),
    ('6.17-page', 'ra_model=6.17,dirty_account=page'),
    ('6.16-folio', 'ra_model=6.16,dirty_account=folio'),
    ('6.16-page', 'ra_model=6.16,dirty_account=page'),
]


def default_sim():
    for b in ('build', 'build-h'):
        p = os.path.join(HERE, '..', '..', b, 'sim', 'foliofs-sim')
        if os.path.exists(p):
            return p
    return 'foliofs-sim'


def schedule(gen_out):
    its = []
    for line in gen_out.splitlines():
        w = line.split()
        if w and w[0] == 'iteration':
            lo, hi = (int(x) for x in w[3].split('-'))
            its.append((lo, hi, int(w[7])))
    return its


# Seconds of simulated time between two lines of a replay's stats log.
STATS_S = 5


def gen_windows(gen_out, last_s):
    """(start_s, end_s) of each iteration the generator's schedule names:
    to its deadline_s (deadline=1), or without one (--unbounded) to the
    next iteration's start, the last to LAST_S."""
    starts, ends = [], []
    for line in gen_out.splitlines():
        w = line.split()
        if w and w[0] == 'iteration' and 'start_s' in w:
            starts.append(float(w[w.index('start_s') + 1]))
            ends.append(float(w[w.index('deadline_s') + 1]) if 'deadline_s' in w else None)
    return [(lo, hi if hi is not None else (starts[i + 1] if i + 1 < len(starts) else last_s))
            for i, (lo, hi) in enumerate(zip(starts, ends))]


def read_stats_log(path):
    """The replay's stats log: (time s, folios_2048k, cache_bytes,
    nr_dirty, dirty_thresh) a line; compressed in place afterwards."""
    out = []
    opener = open
    if not os.path.exists(path) and os.path.exists(path + '.gz'):
        path, opener = path + '.gz', gzip.open
    with opener(path, 'rt') as f:
        for line in f:
            d = json.loads(line)
            out.append((d['time_ms'] / 1000, d['folios_2048k'], d['cache_bytes'],
                        d['nr_dirty'], d['dirty_thresh']))
    if opener is open:
        with open(path, 'rb') as f, gzip.open(path + '.gz', 'wb', compresslevel=9) as g:
            shutil.copyfileobj(f, g)
        os.unlink(path)
    return out


def share_2m_at(samples, t):
    """The 2 MiB folios' share of the cache's bytes in the last sample at
    or before T seconds (the first sample when none is)."""
    before = [x for x in samples if x[0] <= t] or samples[:1]
    if not before or not before[-1][2]:
        return 0.0
    _, n2m, cache, _, _ = before[-1]
    return n2m * 2 * 1024 * 1024 / cache


def above_thresh(samples, lo, hi):
    """Of the samples in [LO, HI) seconds, the share with nr_dirty above
    dirty_thresh."""
    inside = [x for x in samples if lo <= x[0] < hi]
    return sum(1 for x in inside if x[3] > x[4]) / len(inside) if inside else 0.0


def parse_replay(text):
    writers, kv = {}, {'iters': []}
    for line in text.splitlines():
        w = line.split()
        if not w or w[0].startswith('#'):
            continue
        if w[0] == 'writer':
            writers[int(w[1])] = (int(w[2]), float(w[3]))
        elif w[0] == 'iteration':
            kv['iters'].append(dict(start=float(w[2]), length=float(w[3]), writers=int(w[4]),
                                    done=int(w[5]), late=int(w[6]), skipped=int(w[7]),
                                    dry=int(w[8]), tps=float(w[9]), overrun_ms=float(w[10])))
        elif w[0] == 'pauses':
            kv['pauses'] = int(w[1])
            kv['pause_total_ms'] = float(w[3])
            kv['pause_max_ms'] = float(w[9])
        elif w[0] == 'pages_charged':
            kv['pages_charged'] = int(w[1])
            kv['pages_written'] = int(w[3])
            kv['device_bytes'] = int(w[5])
        elif w[0] == 'peak_charged_bytes':
            kv['peak_charged'] = int(w[1])
            kv['peak_pinned'] = int(w[5])
        elif w[0] == 'folio_sizes':
            kv['folios_2m'] = int(w[-1])
        elif len(w) == 2 and w[1].isdigit():
            kv.setdefault('stat_' + w[0], int(w[1]))
    return writers, kv


def iteration_tps(its, writers):
    out = []
    for lo, hi, txns in its:
        tps = 0.0
        for pid in range(lo, hi + 1):
            ops, ach = writers.get(pid, (0, 0.0))
            if ops:
                tps += txns * ach / ops
        out.append(tps)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--sim', default=default_sim())
    ap.add_argument('-j', type=int, default=2)
    ap.add_argument('--iterations', type=int, default=10)
    ap.add_argument('--duration', type=int, default=10, help='seconds per iteration')
    ap.add_argument('--warmup', type=int, default=300)
    ap.add_argument('--gen', default='', help='more generator items')
    ap.add_argument('-o', dest='opts', default='', help='more replay options')
    ap.add_argument('--configs', default='',
                    help='the configurations to run, comma-separated (default: all)')
    ap.add_argument('--unbounded', action='store_true',
                    help='clients do all their transactions (no deadline=1)')
    ap.add_argument('--keep', action='store_true', help='keep the trace file')
    ap.add_argument('--stream', action='store_true',
                    help='no trace file: each replay generates the trace in process')
    ap.add_argument('outdir')
    a = ap.parse_args()
    configs = CONFIGS
    if a.configs:
        names = a.configs.split(',')
        configs = [c for c in CONFIGS if c[0] in names]
        if len(configs) != len(names):
            sys.exit('pgbench-seed: --configs: the names are %s'
                     % ', '.join(c[0] for c in CONFIGS))
    if a.stream and a.keep:
        ap.error('--keep keeps a trace file; --stream makes none')
    os.makedirs(a.outdir, exist_ok=True)
    trace = os.path.join(a.outdir, 'seed.trace')
    spec = '%s,iterations=%d,duration=%d,warmup_s=%d%s%s' % (
        GEN, a.iterations, a.duration, a.warmup, '' if a.unbounded else ',deadline=1',
        ',' + a.gen if a.gen else '')
    t0 = time.time()
    if a.stream:
        gen_s = 0.0
    else:
        g = subprocess.run([a.sim, 'gen', spec, '-o', trace], check=True,
                           capture_output=True, text=True)
        gen_s = time.time() - t0
        with open(os.path.join(a.outdir, 'gen.out'), 'w') as f:
            f.write('# foliofs-sim gen %s\n%s' % (spec, g.stdout))
        gen_text = g.stdout
        its = schedule(gen_text)
    opts = OPTS + ',stats_interval_ms=%d' % (STATS_S * 1000) + (',' + a.opts if a.opts else '')
    running, done, usage = [], {}, {}
    queue = list(configs)
    t1 = time.time()
    while queue or running:
        while queue and len(running) < a.j:
            name, o = queue.pop(0)
            out = open(os.path.join(a.outdir, name + '.out'), 'w')
            log = os.path.join(a.outdir, name + '.stats.jsonl')
            cmd = ([a.sim, '--gen', spec] if a.stream else [a.sim, trace]) + \
                ['-o', opts + ',' + o, '--stats-log', log]
            out.write('# %s\n' % ' '.join(cmd))
            out.flush()
            err = open(os.path.join(a.outdir, name + '.err'), 'w') if a.stream else out
            running.append((name, subprocess.Popen(cmd, stdout=out, stderr=err),
                            out, time.time()))
            if a.stream:
                err.close()
        time.sleep(1)
        for r in list(running):
            pid, status, ru = os.wait4(r[1].pid, os.WNOHANG)
            if pid:
                r[1].returncode = os.waitstatus_to_exitcode(status)
                r[2].close()
                if r[1].returncode:
                    sys.exit('pgbench-seed: %s failed, see %s.out%s'
                             % (r[0], r[0], ' and .err' if a.stream else ''))
                done[r[0]] = time.time() - r[3]
                usage[r[0]] = (ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024)
                running.remove(r)
    replay_s = time.time() - t1
    if a.stream:
        with open(os.path.join(a.outdir, configs[0][0] + '.err')) as f:
            gen = ''.join(line[len('# gen: '):] for line in f if line.startswith('# gen: '))
        with open(os.path.join(a.outdir, 'gen.out'), 'w') as f:
            f.write('# foliofs-sim --gen %s\n%s' % (spec, gen))
        gen_text = gen
        its = schedule(gen_text)
    elif not a.keep:
        os.unlink(trace)
    rows, per_iter = [], {}
    with open(os.path.join(a.outdir, 'iterations.csv'), 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(['config', 'iteration', 'tps', 'share_2m', 'above_thresh_5s'])
        for name, _ in configs:
            with open(os.path.join(a.outdir, name + '.out')) as r:
                text = r.read()
            writers, kv = parse_replay(text)
            if kv['iters']:
                if len(kv['iters']) != len(its):
                    sys.exit('pgbench-seed: %s: %d iterations replayed, %d generated'
                             % (name, len(kv['iters']), len(its)))
                tps = [it['tps'] for it in kv['iters']]
            else:
                tps = iteration_tps(its, writers)
            bounded = (sum(it['done'] for it in kv['iters']),
                       sum(it['skipped'] for it in kv['iters']),
                       sum(it['dry'] for it in kv['iters']),
                       max([it['overrun_ms'] for it in kv['iters']] or [0]))
            samples = read_stats_log(os.path.join(a.outdir, name + '.stats.jsonl'))
            windows = [(it['start'], it['start'] + it['length']) for it in kv['iters']] or \
                gen_windows(gen_text, samples[-1][0] + STATS_S if samples else 0.0)
            starts, ends = [lo for lo, _ in windows], [hi for _, hi in windows]
            shares = [share_2m_at(samples, end) for end in ends]
            above = [above_thresh(samples, lo, hi) for lo, hi in zip(starts, ends)]
            per_iter[name] = (tps, shares, above)
            for i, t in enumerate(tps):
                w.writerow([name, i + 1, '%.0f' % t, '%.4f' % shares[i], '%.4f' % above[i]])
            half = len(tps) // 2
            mean = statistics.mean(tps)
            rows.append((name, mean, min(tps), max(tps),
                         statistics.pstdev(tps) / mean * 100 if mean else 0,
                         statistics.mean(tps[:half]) if half else mean,
                         statistics.mean(tps[half:]) if half else mean,
                         kv['pages_charged'] * 4096 / max(1, kv['device_bytes']),
                         kv['pauses'], kv['pause_total_ms'] / 1000, kv['pause_max_ms'],
                         kv['peak_charged'] / 2**30, kv['peak_pinned'] / 2**30,
                         kv['device_bytes'] / 2**30, done[name]) + usage[name] + bounded +
                        (100 * statistics.mean(above),))
    with open(os.path.join(a.outdir, 'table.md'), 'w') as f:
        f.write('| config | mean tps | min | max | CV | iters 1-%d | iters %d-%d | '
                'charged/written | pauses | paused s | max pause ms | peak charged GiB | '
                'peak pinned GiB | written GiB | replay s | replay CPU s | peak RSS MiB | '
                'txns done | txns skipped | dry clients | max overrun ms | '
                '5 s samples above dirty_thresh |\n' %
                (len(its) // 2, len(its) // 2 + 1, len(its)))
        f.write('|---|' + '---:|' * 21 + '\n')
        for r in rows:
            f.write('| %s | %.0f | %.0f | %.0f | %.2f%% | %.0f | %.0f | x%.1f | %d | %.1f | %.1f | '
                    '%.1f | %.1f | %.1f | %.0f | %.0f | %.0f | %d | %d | %d | %.1f | %.1f%% |\n'
                    % r)
        f.write('\nPer iteration: tps; the 2 MiB share of the cache at its end (%); '
                'its 5 s samples above dirty_thresh (%)\n\n')
        for name, (tps, shares, above) in per_iter.items():
            f.write('    %-11s tps   %s\n' % (name, ' '.join('%.0f' % t for t in tps)))
            f.write('    %-11s 2M %%  %s\n' % ('', ' '.join('%.1f' % (100 * x) for x in shares)))
            f.write('    %-11s >th %% %s\n' % ('', ' '.join('%.0f' % (100 * x) for x in above)))
        f.write('\n%s; replays %.0f s wall (-j %d)\n'
                % ('trace made in each replay (--stream)' if a.stream
                   else 'generator %.0f s' % gen_s, replay_s, a.j))
    with open(os.path.join(a.outdir, 'table.md')) as f:
        sys.stdout.write(f.read())


if __name__ == '__main__':
    main()
