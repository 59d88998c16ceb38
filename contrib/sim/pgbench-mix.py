#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The op mix of a pgbench trace, per transaction: to set a generated
trace (foliofs-sim gen pgbench,...) beside one recorded from a mount.

    pgbench-mix.py [--sim BIN] TRACE:TXNS [TRACE:TXNS ...]

TXNS is the number of transactions the trace holds (pgbench's count).
Roles come from what the processes do, so that a recorded trace (pids and
file ids of the machine) and a generated one compare alike:
  backends     processes that fdatasync more than 10 times
  WAL files    the files backends fdatasync
  data         every other file
  others       every other process (checkpointer, WAL writer, ...)
Prints one column per trace: counts and bytes per transaction, the
fdatasyncs per second of recorded time, and the size mix of backends'
WAL writes.
"""
import argparse
import collections
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def default_sim():
    for b in ('build', 'build-h'):
        p = os.path.join(HERE, '..', '..', b, 'sim', 'foliofs-sim')
        if os.path.exists(p):
            return p
    return 'foliofs-sim'


def load(sim, path):
    out = subprocess.run([sim, 'dump', path], check=True, capture_output=True,
                         text=True).stdout
    recs = []
    for line in out.splitlines():
        if line.startswith('#'):
            continue
        t, _dur, pid, fid, op, off, length = line.split()[:7]
        recs.append((int(t), int(pid), int(fid), op, int(off), int(length)))
    return recs


def mix(recs, txns):
    syncs = collections.Counter(r[1] for r in recs if r[3] == 'fdatasync')
    backends = {p for p, n in syncs.items() if n > 10}
    wal = {r[2] for r in recs if r[3] == 'fdatasync' and r[1] in backends}
    c = collections.Counter()
    sizes = collections.Counter()
    ops = [r for r in recs if r[3] not in ('create', 'unlink', 'rename', 'truncate', 'deadline', 'pace')]
    span = (max(r[0] for r in ops) - min(r[0] for r in ops)) / 1e9 if ops else 0
    for t, pid, fid, op, off, length in ops:
        who = 'backend' if pid in backends else 'other'
        what = 'wal' if fid in wal else 'data'
        if op in ('fsync', 'fdatasync'):
            key = '%s %s %s' % (who, op, what)
            c[key] += 1
            continue
        key = '%s %s %s' % (who, op, what)
        c[key] += 1
        c[key + ' bytes'] += length
        if length == 8192:
            c[key + ' 8K'] += 1
        if who == 'backend' and what == 'wal' and op == 'write':
            sizes['%dK' % (length // 1024)] += 1
    res = {k: v / txns for k, v in c.items()}
    res['backends'] = len(backends)
    res['fdatasync/s'] = sum(syncs.values()) / span if span else 0
    res['span_s'] = span
    return res, sizes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--sim', default=default_sim())
    ap.add_argument('traces', nargs='+', metavar='TRACE:TXNS')
    a = ap.parse_args()
    cols = []
    for spec in a.traces:
        path, _, n = spec.rpartition(':')
        if not path or not n.isdigit() or int(n) == 0:
            sys.exit('pgbench-mix: %s: TRACE:TXNS with TXNS > 0' % spec)
        cols.append((os.path.basename(path),) + mix(load(a.sim, path), int(n)))
    keys = sorted({k for _, r, _ in cols for k in r})
    print('| per transaction | ' + ' | '.join(n for n, _, _ in cols) + ' |')
    print('|---|' + '---:|' * len(cols))
    for k in keys:
        print('| %s | ' % k + ' | '.join('%.3f' % r.get(k, 0) for _, r, _ in cols) + ' |')
    sk = sorted({k for _, _, s in cols for k in s}, key=lambda x: int(x[:-1]))
    print()
    print('| backend WAL writes by size (share) | ' + ' | '.join(n for n, _, _ in cols) + ' |')
    print('|---|' + '---:|' * len(cols))
    for k in sk:
        print('| %s | ' % k + ' | '.join(
            '%.2f' % (s.get(k, 0) / max(1, sum(s.values()))) for _, _, s in cols) + ' |')


if __name__ == '__main__':
    main()
