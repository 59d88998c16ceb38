#!/usr/bin/python3
"""The folios random 8 KiB preads leave on this machine's kernel: 64 reads
at seeded 8 KiB-aligned offsets in [8M, 64M) of ra-patterns.py's 64 MiB
file, on ext4 and XFS (loop devices, as ra-patterns.py makes them), with
the loop device's read_ahead_kb 2048 and 0, without and with
POSIX_FADV_RANDOM, through one descriptor or a new one per read; the
folios rebuilt from filemap:mm_filemap_add_to_page_cache in a tracefs
instance of its own.  One line per case: the folios by order.

    sudo ./random-reads.py ext4,xfs
"""
import collections
import importlib.util
import os
import random
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    'rap', os.path.join(HERE, '..', '..', 'kernel', 'ra-patterns.py'))
rap = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rap)


def rand_reads(path, advice, fresh_each, n=64):
    offs = [i * 8192 for i in random.Random(7).sample(range(1024, 8192), n)]
    fd = os.open(path, os.O_RDONLY)
    if advice is not None:
        os.posix_fadvise(fd, 0, 0, advice)
    for off in offs:
        if fresh_each:
            os.close(fd)
            fd = os.open(path, os.O_RDONLY)
            if advice is not None:
                os.posix_fadvise(fd, 0, 0, advice)
        os.pread(fd, 8192, off)
    os.close(fd)


def main():
    undo = rap.Undo()
    try:
        tracer = rap.Tracer(rap.tracefs_root(undo), undo)
        work = tempfile.mkdtemp(prefix='ra-random-')
        undo.push('rm -r ' + work, shutil.rmtree, work)
        for fs in sys.argv[1].split(','):
            lfs = rap.LoopFs(fs, work, 2048, undo)
            st = os.stat(lfs.path)
            for ra_kb in (2048, 0):
                rap.wr(lfs.ra_path, str(ra_kb))
                for name, adv in (('normal', None), ('FADV_RANDOM', os.POSIX_FADV_RANDOM)):
                    for fresh in (False, True):
                        lfs.evict_all()
                        tracer.start(st)
                        rand_reads(lfs.path, adv, fresh)
                        folios, odd = rap.folios_from_events(tracer.stop())
                        hist = collections.Counter(rap.size_name(o) for _, o in folios)
                        print('%-4s read_ahead_kb=%-4d %-11s %-14s %s%s'
                              % (fs, ra_kb, name, 'open per read' if fresh else 'one open',
                                 dict(sorted(hist.items())), ' odd: %s' % odd if odd else ''))
            # This file system's mount and loop device go before the next.
            while undo.steps and undo.steps[-1][0] != 'rm -r ' + work:
                _, fn, args = undo.steps.pop()
                fn(*args)
    finally:
        undo.close()


if __name__ == '__main__':
    main()
