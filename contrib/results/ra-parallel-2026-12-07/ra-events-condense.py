#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""ra-events.py's raw trace, one line per readahead event and per run of
adjacent folio adds ([first, end) pages, then [order, count] pairs).

    ./ra-events-condense.py raw.trace > kernel-events-xfs.txt
"""
import re
import sys

run = None


def flush():
    global run
    if run:
        print('   add [%d, %d) orders %s' % (run[0], run[1], run[2]))
    run = None


for line in open(sys.argv[1]).read().splitlines():
    if line.startswith('#'):
        continue
    m = re.search(r'mm_filemap_add_to_page_cache: .* ofs=(\d+) order=(\d+)', line)
    if m:
        i, o = int(m.group(1)) // 4096, int(m.group(2))
        if run and run[1] == i:
            run[1] = i + (1 << o)
            if run[2][-1][0] == o:
                run[2][-1][1] += 1
            else:
                run[2].append([o, 1])
        else:
            flush()
            run = [i, i + (1 << o), [[o, 1]]]
        continue
    flush()
    if 'delete_from' in line:
        print('   delete', line.split(':', 1)[1][-40:])
        continue
    m = re.search(r'(page_cache_\w+): dev=\S+ ino=\S+ (.*)', line)
    if m:
        s = m.group(2).replace(' ra_pages=512', '').replace(' mmap_miss=0', '')
        m2 = re.search(r'prev_pos=(-?\d+)', s)
        if m2 and int(m2.group(1)) >= 0:
            s += ' (prev_idx %d)' % (int(m2.group(1)) // 4096)
        print(m.group(1), s)
flush()
