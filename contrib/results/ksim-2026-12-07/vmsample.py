#!/usr/bin/python3
"""vmsample.py FILE: /proc/vmstat's workingset and LRU movement counters
twice a second, each line `monotonic_seconds name=value ...`, until
killed.  Run beside a kernel side: the machine's counters, which on a
machine running nothing else are the server cgroup's (cgroup v1 has no
workingset_activate_file of its own)."""
import sys
import time

KEYS = ('workingset_refault_file', 'workingset_activate_file', 'workingset_restore_file',
        'workingset_nodereclaim', 'pgdeactivate', 'pgactivate')

with open(sys.argv[1], 'w') as out:
    while True:
        with open('/proc/vmstat') as f:
            d = dict(line.split() for line in f)
        out.write('%.3f %s\n' % (time.monotonic(), ' '.join('%s=%s' % (k, d[k]) for k in KEYS)))
        out.flush()
        time.sleep(0.5)
