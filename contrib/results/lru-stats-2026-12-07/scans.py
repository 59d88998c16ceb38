#!/usr/bin/python3
"""Per scan of a pg-seed.py --json (or kernel-lru-8.json.gz here): the
lists at the end of the run before (pg-seed.py's memory.stat read there,
which flushes: what the scan's first reclaims see), low or not; the
active list after the scan; the 2 MiB folios the scan added; the 2 MiB
folios cached and the accounts table's 4 KiB folios at the run's end.
    scans.py KERNEL.json[.gz]"""
import gzip, json, sys
op = gzip.open if sys.argv[1].endswith(".gz") else open
d = json.load(op(sys.argv[1]))
prev = None
print('| run | at the end of the run before (a memory.stat read: flushed): active / inactive MiB | low | active after the scan | kept | 2 MiB the scan added | 2 MiB cached at the run end | accounts 4 KiB folios at the run end |')
print('|---:|---|---|---:|---:|---:|---:|---:|')
for it in d['iterations']:
    src_act = it['source_reclaim']['active_file'] >> 20
    if prev:
        a, i = prev
        print('| %d | %d / %d | %s | %d | %.0f%% | %d | %d | %d |' % (it['iter'], a, i, 'yes' if a > i else 'no', src_act, 100 * src_act / a if a else 0,
              it['source_added'].get('9', 0), it['cached'].get('9', 0), it['cached_by_class'].get('accounts', {}).get('0', 0)))
    else:
        print('| %d | - | - | %d | - | %d | %d | %d |' % (it['iter'], src_act, it['source_added'].get('9', 0), it['cached'].get('9', 0), it['cached_by_class'].get('accounts', {}).get('0', 0)))
    prev = (it['reclaim']['active_file'] >> 20, it['reclaim']['inactive_file'] >> 20)
