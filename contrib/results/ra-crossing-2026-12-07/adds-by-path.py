#!/usr/bin/python3
"""Count pg-adds.sh's folio adds on loop devices by order and kernel path
(a write: iomap_write_begin; a read: filemap_read; POSIX_FADV_WILLNEED:
generic_fadvise), from SKIP seconds after the first event on.
    ./adds-by-path.py TRACE [SKIP]"""
import collections
import re
import sys

EVENT = re.compile(r'\s([\d.]+): mm_filemap_add_to_page_cache: dev (\d+):\d+ .* order=(\d+)')
count, cur, t0 = collections.Counter(), None, None
skip = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0


def close(ev):
    if ev and ev[0] - t0 >= skip and ev[1] == '7':
        st = ev[3]
        path = ('read' if 'filemap_read' in st else 'write' if 'iomap_write_begin' in st
                else 'fadvise' if 'generic_fadvise' in st else 'no stack')
        count[(ev[2], path)] += 1


for line in open(sys.argv[1], errors='replace'):
    m = EVENT.search(line)
    if m:
        close(cur)
        cur = [float(m.group(1)), m.group(2), int(m.group(3)), set()]
        t0 = cur[0] if t0 is None else t0
    elif line.startswith(' => ') and cur:
        cur[3].add(line[4:].strip())
close(cur)
for (order, path), n in sorted(count.items()):
    print('%3dK %-8s %7d' % (4 << order, path, n))
