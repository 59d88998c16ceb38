#!/usr/bin/python3
"""swing.py DIR [NAME]: per pgbench run of a calibrate.py --sim-kernel
output DIR, the active file list second by second on the kernel (its
memory cgroup's active_file, pg-seed.py's 1 s samples) and in the replay
NAME (default ksim; its 100 ms stats samples, one in ten): mean, lowest,
highest and the mean change from one second to the next, MiB."""
import gzip
import json
import os
import statistics
import sys


def main(out, name='ksim'):
    k = json.load(open(os.path.join(out, 'kernel.json')))
    meta = json.load(open(os.path.join(out, name, 'sim.json')))
    with gzip.open(os.path.join(out, name, 'stats.jsonl.gz'), 'rt') as f:
        samples = [json.loads(line) for line in f]

    def row(v):
        return (round(statistics.mean(v)), min(v), max(v),
                round(statistics.mean(abs(a - b) for a, b in zip(v, v[1:]))))

    print('| run | kernel mean | lowest | highest | mean 1 s change | %s mean | lowest | '
          'highest | mean 1 s change |' % name)
    print('|---|' + '---:|' * 8)
    for (it, t0, t1), r in zip(meta['windows'], k['iterations']):
        kv = [s['active_file'] >> 20 for _, s in r['lru_samples']]
        sv = [s['active_bytes'] >> 20 for s in samples if t0 <= s['time_ms'] <= t1][::10]
        print('| %d | %d | %d | %d | %d | %d | %d | %d | %d |' % ((it,) + row(kv) + row(sv)))


if __name__ == '__main__':
    main(*sys.argv[1:3])
