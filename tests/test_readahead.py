"""Readahead through the mount: windows read asynchronously on the
writeback reader's io_uring (backing_io=uring) or in the read call that
starts them (psync), straight into the folios.

- sequential reads return the backing file's bytes, and readahead did the
  reading (ra_ios), asynchronously only with uring;
- readers streaming through files while writers overwrite blocks, truncate
  and punch them, in a cache small enough that reclaim runs all along:
  every block a reader sees is one the file held at some time, and
  afterwards the file holds exactly what the writers left (a read landing
  in a block written meanwhile, or one not waited for, shows up as a
  block from nowhere or a stale one);
- SIGTERM while readers stream: the daemon exits 0 with reads in flight
  (the reader thread stops after the last of them);
- fault=alloc:ENOMEM (readahead's folios above 4 KiB cannot be had): every
  window is read in 4 KiB folios, as page_cache_ra_order() falls back to
  do_page_cache_ra() when its allocation fails, and cleared at run time
  the open's next window is a 2 MiB folio again.
"""

import errno
import os
import random
import signal
import struct
import subprocess
import sys
import threading

import pytest

import util
from util import Mount, stats

MIB = 1 << 20
BLK = 4096


MARK = 1 << 63     # set in every stamp, so that no stamp is zeros


def stamp(index, gen):
    """Block INDEX as written by generation GEN: every word says so."""
    return struct.pack('<QQ', index | MARK, gen) * (BLK // 16)


def parse(block):
    """(index, gen) of a stamped block, (None, 0) for zeros, None otherwise."""
    if block == bytes(BLK):
        return (None, 0)
    head = block[:16]
    if block != head * (BLK // 16):
        return None
    index, gen = struct.unpack('<QQ', head)
    return (index & ~MARK, gen) if index & MARK else None


def lay_out(path, nblocks):
    with open(path, 'wb') as f:
        for i in range(nblocks):
            f.write(stamp(i, 0))


def uring_ready(mnt):
    return 'io_uring cannot be set up' not in mnt.output() and \
        'readahead ring cannot be set up' not in mnt.output()


@pytest.mark.parametrize('opts', [('backing_io=uring', 'backing_direct=off'),
                                  ('backing_io=psync', 'backing_direct=off'),
                                  ('backing_io=uring', 'backing_direct'),
                                  ('backing_io=uring', 'folio_policy=kernel')],
                         ids=['uring', 'psync', 'uring_direct', 'uring_kernel_sizing'])
@pytest.mark.parametrize('chunk', [MIB, 128 << 10, 8192], ids=['1M', '128K', '8K'])
def test_sequential_read(dirs, opts, chunk):
    """A 24 MiB file read from start to end in CHUNK reads: the bytes are the
    backing file's, and readahead read them (asynchronously with uring)."""
    _, b, m = dirs
    lay_out(os.path.join(b, 'f'), 24 * MIB // BLK)
    with Mount(b, m, options=list(opts) + ['cache=direct']) as mnt:
        with open(os.path.join(m, 'f'), 'rb') as f:
            i = 0
            while True:
                data = f.read(chunk)
                if not data:
                    break
                for k in range(0, len(data), BLK):
                    assert parse(data[k:k + BLK]) == (i, 0), 'block %d' % i
                    i += 1
        assert i == 24 * MIB // BLK
        st = stats(m)
        assert st['ra_ios'] > 0
        # Readahead read (nearly) all of it: misses are few.
        assert st['ra_pages'] >= 20 * MIB // 4096, st
        if 'backing_io=psync' in opts:
            assert st['ra_async_ios'] == 0
        elif uring_ready(mnt):
            assert st['ra_async_ios'] > 0
            assert st['ra_async_ios'] <= st['ra_ios']


# A child process streaming through the files, checking what it reads.
# The buffer is page aligned: FUSE splits a direct read at the pages of
# the reader's buffer, each piece a request of its own, so with an
# unaligned buffer a block could straddle two requests and be read half
# before and half after a concurrent write (as Linux allows).
READERS = r'''
import mmap, os, struct, sys
BLK = 4096
MARK = 1 << 63
paths, rounds = sys.argv[1:-1], int(sys.argv[-1])
bad = 0
buf = mmap.mmap(-1, 1 << 20)
for r in range(rounds):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        off = 0
        view = memoryview(buf)[:131072 if r % 2 else 1 << 20]
        while True:
            n = os.preadv(fd, [view], off)
            if not n:
                break
            if n % BLK:
                print('%s: a read at %d returned %d bytes' % (p, off, n), flush=True)
                bad += 1
            for k in range(0, n - n % BLK, BLK):
                blk = bytes(view[k:k + BLK])
                i = (off + k) // BLK
                if blk == bytes(BLK):
                    continue
                head = blk[:16]
                if blk != head * (BLK // 16) or struct.unpack('<QQ', head)[0] != i | MARK:
                    heads = sorted(set(struct.unpack_from('<QQ', blk, o) for o in range(0, BLK, 16)))
                    print('%s block %d (read at %d, %d bytes): %r' % (p, i, off, n, heads[:6]),
                          flush=True)
                    bad += 1
            off += n
        os.close(fd)
        view.release()
sys.exit(1 if bad else 0)
'''


@pytest.mark.timeout(300)
@pytest.mark.parametrize('opts', [('backing_io=uring',), ('backing_io=psync',),
                                  ('backing_io=uring', 'folio_policy=kernel',
                                   'folio_size=256K')],
                         ids=['uring', 'psync', 'uring_kernel_sizing'])
def test_readers_race_writers_truncates_and_punches(dirs, opts):
    """Two reader processes stream through three 8 MiB files (1 MiB and
    128 KiB reads, so that windows start and grow), while this process
    overwrites stamped blocks, punches ranges and truncates the files down
    and back up, in a 12 MiB cache (reclaim all along).  Every block a
    reader sees is zeros or a stamp of that very block; afterwards each
    file holds exactly the model's bytes."""
    _, b, m = dirs
    nblocks = 8 * MIB // BLK
    names = ['f%d' % i for i in range(3)]
    for n in names:
        lay_out(os.path.join(b, n), nblocks)
    model = {n: [(i, 0) for i in range(nblocks)] for n in names}
    rng = random.Random(7)
    with Mount(b, m, options=list(opts) + ['cache=direct', 'cache_size=12M']) as mnt:
        paths = [os.path.join(m, n) for n in names]
        readers = [subprocess.Popen([sys.executable, '-c', READERS] + paths + ['10'],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                   for _ in range(2)]
        gen = 1
        fds = {n: os.open(os.path.join(m, n), os.O_RDWR) for n in names}
        try:
            while any(r.poll() is None for r in readers):
                n = rng.choice(names)
                fd, blocks = fds[n], model[n]
                what = rng.random()
                if what < 0.8:
                    first = rng.randrange(len(blocks) + 8)
                    count = rng.randrange(1, 64)
                    data = b''.join(stamp(i, gen) for i in range(first, first + count))
                    os.pwrite(fd, data, first * BLK)
                    while len(blocks) < first:
                        blocks.append((None, 0))
                    for i in range(first, first + count):
                        if i < len(blocks):
                            blocks[i] = (i, gen)
                        else:
                            blocks.append((i, gen))
                    gen += 1
                elif what < 0.9:
                    first = rng.randrange(len(blocks) + 1)
                    count = rng.randrange(1, 512)
                    util.fallocate(fd, 0x01 | 0x02, first * BLK, count * BLK)
                    for i in range(first, min(first + count, len(blocks))):
                        blocks[i] = (None, 0)
                else:
                    size = rng.randrange(nblocks // 2, nblocks + 1)
                    os.ftruncate(fd, size * BLK)
                    del blocks[size:]
                    # ...and back up, so that readers keep finding data.
                    os.ftruncate(fd, nblocks * BLK)
                    blocks.extend([(None, 0)] * (nblocks - size))
        finally:
            for fd in fds.values():
                os.close(fd)
            outs = []
            for r in readers:
                out, _ = r.communicate(timeout=120)
                outs.append((r.returncode, out.decode(errors='replace')))
        for rc, out in outs:
            assert rc == 0, 'a reader saw a block from nowhere:\n' + out[:3000]
        for n in names:
            with open(os.path.join(m, n), 'rb') as f:
                data = f.read()
            assert len(data) == len(model[n]) * BLK
            got = [parse(data[k:k + BLK]) for k in range(0, len(data), BLK)]
            wrong = [i for i, (g, e) in enumerate(zip(got, model[n])) if g != e]
            assert not wrong, '%s: %d blocks differ, first %d: %r, expected %r' % (
                n, len(wrong), wrong[0], got[wrong[0]], model[n][wrong[0]])
        st = stats(m)
        assert st['ra_ios'] > 0 and st['reclaimed_folios'] > 0, st
        if 'backing_io=psync' not in opts and uring_ready(mnt):
            assert st['ra_async_ios'] > 0, st


@pytest.mark.timeout(120)
def test_sigterm_while_reading_ahead(dirs):
    """SIGTERM while three readers stream through 32 MiB files: the daemon
    exits 0 and clean, with readahead reads in flight at the time."""
    _, b, m = dirs
    names = ['g%d' % i for i in range(3)]
    for n in names:
        lay_out(os.path.join(b, n), 32 * MIB // BLK)
    mnt = Mount(b, m, options=['cache=direct', 'cache_size=16M', 'backing_io=uring'])
    mnt.start()
    readers = []
    try:
        mnt.wait_for_mount()
        paths = [os.path.join(m, n) for n in names]
        readers = [subprocess.Popen([sys.executable, '-c', READERS, p, '1000'],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for p in paths]
        start = stats(m)['ra_ios']
        assert util.poll(lambda: stats(m)['ra_ios'] > start + 100, 60)
        os.kill(mnt.pid, signal.SIGTERM)
        mnt.wait_exit(60)
    finally:
        for r in readers:
            r.kill()
            r.wait()
        mnt.cleanup()


def file_folios(mnt, ino):
    """[(index, order, flags)] of the file with st_ino INO (.foliofs/folios)."""
    out = []
    with open(os.path.join(mnt, '.foliofs', 'folios')) as f:
        for line in f:
            i, index, order, flags = line.split()
            if int(i) == ino:
                out.append((int(index), int(order), flags))
    return out


def settled_folios(mnt, ino):
    """file_folios() once no read into them is in flight (all uptodate)."""
    return util.poll(lambda: (lambda fs: fs if all('u' in f for _, _, f in fs) else None)(
        file_folios(mnt, ino)), 10) or file_folios(mnt, ino)


@pytest.mark.parametrize('backing_io', ['uring', 'psync'])
def test_alloc_fault_reads_windows_in_4k_folios(dirs, backing_io):
    """A fresh open streams [0, 4M) of an 8 MiB file with 8 KiB reads
    under fault=alloc:ENOMEM (folio_policy=kernel, 2 MiB windows, 6.17):
    Linux's windows from page 0 are (start, size) (0, 8), (8, 32), (40,
    56), (96, 96), (192, 64), (256, 128), (384, 128), (512, 256), (768,
    256), (1024, 512), each marked on its first page; the first asks for
    4 KiB folios, each of the 9 others for larger ones, whose allocation
    fails, so page_cache_ra_order() reads it whole in 4 KiB folios.  So:
    1536 folios of 4 KiB, the one at 1024 still marked, 9 faults.  With the
    fault cleared, the same open reads on to 6M: the mark at 1024 starts
    (1536, 512) of order 9: one 2 MiB folio, marked."""
    _, b, m = dirs
    lay_out(os.path.join(b, 'f'), 8 * MIB // BLK)
    opts = ['cache=direct', 'folio_policy=kernel', 'readahead_kb=2048', 'ra_model=6.17',
            'backing_io=' + backing_io, 'fault=alloc:ENOMEM']
    with Mount(b, m, options=opts):
        for bad in ('alloc:EIO', 'alloc:short'):
            with pytest.raises(OSError) as e:
                util.set_fault(m, bad)
            assert e.value.errno == errno.EINVAL, bad
        assert util.get_fault(m).startswith('alloc:ENOMEM:')
        path = os.path.join(m, 'f')
        ino = os.stat(path).st_ino
        fd = os.open(path, os.O_RDONLY)
        try:
            for off in range(0, 4 * MIB, 8192):
                data = os.pread(fd, 8192, off)
                assert [parse(data[k:k + BLK]) for k in (0, BLK)] == \
                    [(off // BLK, 0), (off // BLK + 1, 0)], off
            folios = settled_folios(m, ino)
            assert [(i, o) for i, o, _ in folios] == [(i, 0) for i in range(1536)]
            assert [i for i, _, f in folios if 'r' in f] == [1024]
            assert stats(m)['faults_injected'] == 9
            util.set_fault(m, 'off')
            for off in range(4 * MIB, 6 * MIB, 8192):
                data = os.pread(fd, 8192, off)
                assert parse(data[:BLK]) == (off // BLK, 0), off
            folios = settled_folios(m, ino)
        finally:
            os.close(fd)
        assert [(i, o) for i, o, _ in folios] == [(i, 0) for i in range(1536)] + [(1536, 9)]
        assert [i for i, _, f in folios if 'r' in f] == [1536]
        assert stats(m)['faults_injected'] == 9
