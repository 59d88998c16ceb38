#!/usr/bin/python3
"""The file LRU lists second by second and across each scan, kernel
against model (README.md says which runs):
    lru.py kernel KERNEL.json... -- model ITERATIONS_DIR...
KERNEL.json: pg-seed.py's --json, or kernel-lru.json.gz here, its LRU
fields (lru_samples since 8e18b16 for the
per-second rows; the scan rows need only reclaim / source_reclaim);
ITERATIONS_DIR: a pgcompare -O directory (samples.csv, iterations.csv);
its per-second rows are the lists as reclaim last saw them (seen_*)
where the samples have those, else the live ones."""
import csv
import gzip
import json
import os
import statistics
import sys

MIB = 1 << 20


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float('nan')


def per_second(pairs):
    """pairs: [(active MiB, inactive MiB)] in the runs, one a second."""
    act = [a for a, _ in pairs]
    low = sum(a > i for a, i in pairs) / len(pairs) if pairs else float('nan')
    swing = [abs(b - a) for a, b in zip(act, act[1:])]
    return '%4d | %4d | %4d | %4d | %3.0f%%' % (q(act, .1), statistics.median(act), q(act, .9),
                                               statistics.median(swing), 100 * low)


def kernel_rows(path):
    op = gzip.open if path.endswith(".gz") else open
    d = json.load(op(path))
    pairs, scans, prev_end = [], [], None
    for it in d['iterations']:
        st = it.get('source_t', 0)
        pairs += [(v['active_file'] / MIB, v['inactive_file'] / MIB)
                  for t, v in it.get('lru_samples', []) if t > st + 2]
        src, end = it['source_reclaim'], it['reclaim']
        if prev_end:
            scans.append((prev_end[0], prev_end[1], src['active_file'] / MIB))
        prev_end = (end['active_file'] / MIB, end['inactive_file'] / MIB)
    return pairs, scans


def model_rows(mdir):
    # What reclaim saw (seen_*, since fdbe3f7) where the samples have it:
    # the kernel's side is read at flushes too.
    rows = [r for r in csv.DictReader(open(os.path.join(mdir, 'samples.csv')))
            if r['phase'] == 'run']
    pre = 'seen_' if rows and 'seen_active_bytes' in rows[0] else ''
    pairs = [(int(r[pre + 'active_bytes']) / MIB, int(r[pre + 'inactive_bytes']) / MIB)
             for r in rows]
    scans, prev_end = [], None
    for r in csv.DictReader(open(os.path.join(mdir, 'iterations.csv'))):
        src = json.loads(r['source_by_class'])
        if prev_end:
            scans.append((prev_end[0], prev_end[1],
                          sum(c.get('active_bytes', 0) for c in src.values()) / MIB))
        prev_end = (int(r['active_bytes']) / MIB, int(r['inactive_bytes']) / MIB)
    return pairs, scans


def scan_line(scans):
    low = [s for s in scans if s[0] > s[1]]
    high = [s for s in scans if s[0] <= s[1]]
    kept = lambda ss: ' '.join('%.0f%%' % (100 * b / a) if a else '-' for a, _, b in ss)
    return '%d: %s | %d: %s' % (len(high), kept(high), len(low), kept(low))


def main(argv):
    i = argv.index('--')
    print('| side | run | active MiB p10 | median | p90 | median change a second | '
          'seconds active > inactive |')
    print('|---|---|---:|---:|---:|---:|---:|')
    scans = []
    for side, paths, fn in (('kernel', argv[1:i], kernel_rows), ('model', argv[i + 2:], model_rows)):
        for p in paths:
            pairs, sc = fn(p)
            scans.append((side, p, sc))
            if pairs:
                print('| %s | %s | %s |' % (side, p, per_second(pairs)))
    print()
    print('Each scan after the first: the active list kept through it (after / before), '
          'by whether the inactive list was at least the active one when the run before '
          'it ended | or not:')
    print()
    print('| side | run | inactive >= active: n, kept | inactive < active: n, kept |')
    print('|---|---|---|---|')
    for side, p, sc in scans:
        print('| %s | %s | %s |' % (side, p, scan_line(sc)))


if __name__ == '__main__':
    main(sys.argv[1:])
