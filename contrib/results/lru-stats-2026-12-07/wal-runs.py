#!/usr/bin/python3
"""wal.bt's output (epoch second, PostgreSQL's fdatasync calls, fsync calls,
each second) summed over each pgbench run's window: the kernel side's
(pg-seed.py's run_t0/run_t1, CLOCK_MONOTONIC, turned to epoch with this
boot's offset: run it on the boot that ran the calibration) and the
model's (pgcompare's start/end_unix_ms).
    wal-runs.py wal.out[.gz] DIR/kernel.json DIR/model"""
import csv, gzip, json, sys, time
out, kjson, mdir = sys.argv[1:4]
off = time.time() - time.monotonic()
per = {}
for line in (gzip.open(out, 'rt') if out.endswith('.gz') else open(out)):
    p = line.split()
    if len(p) == 3 and p[0].isdigit():
        per[int(p[0])] = (int(p[1]), int(p[2]))
def count(t0, t1):
    # the line stamped T counts the second before it: (T-1, T]
    return sum(n for t, (n, _) in per.items() if t0 < t <= t1 + 1)
print('| side | run | fdatasyncs | a second | tps | commits per fdatasync | charged pages per fdatasync | written pages per fdatasync | charged/written |')
print('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
tot = {}
for r in json.load(open(kjson))['iterations']:
    fd = count(r['run_t0'] + off, r['run_t1'] + off)
    dur = r['run_t1'] - r['run_t0']
    tot.setdefault('kernel', []).append((fd, r['tps'] * dur, r['charged_pages'], r['written_pages']))
    print('| kernel | %d | %d | %.0f | %.0f | %.2f | %.1f | %.2f | x%.2f |' % (r['iter'], fd, fd / dur, r['tps'], r['tps'] * dur / fd, r['charged_pages'] / fd, r['written_pages'] / fd, r['charged_pages'] / r['written_pages']))
for r in csv.DictReader(open(mdir + '/iterations.csv')):
    t0, t1 = int(r['start_unix_ms']) / 1000, int(r['end_unix_ms']) / 1000
    fd = count(t0, t1)
    dur = t1 - t0
    ch, wr, tps = int(r['run_nr_dirtied']), int(r['run_backing_write_bytes']) / 4096, float(r['tps'])
    tot.setdefault('model', []).append((fd, tps * dur, ch, wr))
    print('| model | %s | %d | %.0f | %.0f | %.2f | %.1f | %.2f | x%.2f |' % (r['iteration'], fd, fd / dur, tps, tps * dur / fd, ch / fd, wr / fd, ch / wr))
for side, rows in tot.items():
    fd, tx, ch, wr = [sum(x[i] for x in rows) for i in range(4)]
    print('| %s | all | %d | | | %.2f | %.1f | %.2f | x%.2f |' % (side, fd, tx / fd, ch / fd, wr / fd, ch / wr))
