#!/usr/bin/python3
"""kact.py KERNEL_JSON VMSTAT_TXT: per iteration of a pg-seed.py run,
from vmsample.py's samples, the pages refaulted, activated on refault
and deactivated during the source step (the scan: its run's start less
source_t and 0.3 s) and during the run."""
import json
import sys

k = json.load(open(sys.argv[1]))
rows = []
for line in open(sys.argv[2]):
    t, *kv = line.split()
    rows.append((float(t), {a: int(b) for a, b in (x.split('=') for x in kv)}))


def at(t):
    best = rows[0]
    for r in rows:
        if r[0] > t:
            break
        best = r
    return best[1]


print('| it | scan s | refaulted, scan | activated on refault, scan | pgdeactivate, scan '
      '| activated, run | pgdeactivate, run |')
print('|---|---:|---:|---:|---:|---:|---:|')
for r in k['iterations']:
    t2, t3 = r['run_t0'], r['run_t1']
    a, b, c = at(t2 - r['source_t'] - 0.3), at(t2), at(t3)
    print('| %d | %.1f | %d | %d | %d | %d | %d |' % (
        r['iter'], r['source_t'], b['workingset_refault_file'] - a['workingset_refault_file'],
        b['workingset_activate_file'] - a['workingset_activate_file'],
        b['pgdeactivate'] - a['pgdeactivate'],
        c['workingset_activate_file'] - b['workingset_activate_file'],
        c['pgdeactivate'] - b['pgdeactivate']))
