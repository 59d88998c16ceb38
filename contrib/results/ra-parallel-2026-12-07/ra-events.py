#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""One pattern of ra-patterns.py on the kernel, with the readahead
tracepoints (page_cache_sync_ra, page_cache_async_ra, page_cache_ra_order,
page_cache_ra_unbounded) recorded beside the filemap events, filtered the
same way; the raw trace is copied to OUT.  As root:

    ./ra-events.py parallel-scan raw.trace [xfs|ext4]
"""
import importlib.util
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    'rap', os.path.join(HERE, '..', '..', 'kernel', 'ra-patterns.py'))
rap = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rap)

RA = ('page_cache_sync_ra', 'page_cache_async_ra', 'page_cache_ra_order',
      'page_cache_ra_unbounded')
pattern, out = sys.argv[1], sys.argv[2]
fs = sys.argv[3] if len(sys.argv) > 3 else 'xfs'


class Tracer(rap.Tracer):
    def _ra(self, ev, name):
        return os.path.join(self.dir, 'events', 'readahead', ev, name)

    def start(self, st):
        kdev = (os.major(st.st_dev) << 20) | os.minor(st.st_dev)
        for ev in RA:
            rap.wr(self._ra(ev, 'filter'), 'i_ino == %d && s_dev == %d' % (st.st_ino, kdev))
            rap.wr(self._ra(ev, 'enable'), '1')
        super().start(st)

    def stop(self):
        rap.wr(os.path.join(self.dir, 'tracing_on'), '0')
        shutil.copy(os.path.join(self.dir, 'trace'), out)
        for ev in RA:
            rap.wr(self._ra(ev, 'enable'), '0')
        return super().stop()


rap.Tracer = Tracer
res = rap.run_kernel((fs,), [pattern])
print(pattern, fs, len(res[0]['folios']), 'folios', res[0]['histogram'])
