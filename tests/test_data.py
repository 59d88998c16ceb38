"""Data operations through a foliofs mount (root, -o allow_other, default
direct I/O so the daemon's own cache is the only cache).

Every test runs the same I/O on the mount (fixture ``work``) and on a plain
directory on the backing's filesystem (fixture ``ref``) and compares the
bytes, sizes and errnos; after fsync (or unmount) the backing file must hold
the same bytes.  Several tests target the ways a write-back cache goes wrong:
stale data after truncate or hole punching, dirty data written back over a
punched hole, copy_file_range or SEEK_DATA not seeing data still in the cache.
"""

import errno
import mmap
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

import util
from util import (FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE, Mount,
                  assert_stat_same, fallocate, fd_count, fsync_path, outcome, read_file, run_as,
                  same, write_file)

# Every test here runs with umask 022 (an autouse fixture of util).
umask_022 = util.umask_022

P = os.path.join
KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@pytest.fixture(scope='module', params=[[], ['cache=writethrough'], ['kernel_cache']],
                ids=['direct', 'writethrough', 'kernel_cache'])
def ffs_options(request):
    """Every test on the shared mount runs with the default direct I/O,
    again with the kernel keeping clean pages (writethrough) and again with
    the kernel's writeback cache on top."""
    return request.param


def pattern(n, seed):
    return random.Random(seed).randbytes(n)


# ---------------------------------------------------------------------------
# open / create

def test_create_excl_trunc(work, ref):
    def ops(d):
        p = P(d, 'f')
        os.umask(0)
        out = [outcome(lambda: os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640)))]
        out.append(oct(os.stat(p).st_mode))
        out.append(outcome(os.open, p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        write_file(p, b'0123456789')
        fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o600)       # exists: mode unchanged
        os.close(fd)
        out.append((oct(os.stat(p).st_mode), read_file(p)))
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
        out.append(os.fstat(fd).st_size)
        os.write(fd, b'ab')
        os.close(fd)
        out.append(read_file(p))
        fd = os.open(p, os.O_RDONLY | os.O_TRUNC)               # Linux truncates here too
        os.close(fd)
        out.append(read_file(p))
        os.symlink('dangling-target', P(d, 'dl'))
        out.append(outcome(os.open, P(d, 'dl'), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        out.append(outcome(os.open, P(d, 'missing'), os.O_RDONLY))
        out.append(outcome(os.open, P(d, 'missing', 'x'), os.O_CREAT | os.O_WRONLY))
        fd = os.open(P(d, 'dl'), os.O_CREAT | os.O_WRONLY)       # creates the target
        os.write(fd, b'via dangling')
        os.close(fd)
        out.append(read_file(P(d, 'dangling-target')))
        out.append(sorted(os.listdir(d)))
        return out
    res = same(ops, work.mnt, ref)
    assert res[1][0] == ('ok', None)
    assert res[1][2] == ('err', 'EEXIST')
    assert res[1][6] == b''
    fsync_path(work.m('dangling-target'))
    assert read_file(work.b('dangling-target')) == b'via dangling'
    assert_stat_same(work.m('f'), work.b('f'))


def test_open_as_user(work, ref, tuser):
    def setup(d):
        write_file(P(d, 'ro'), b'readonly')
        write_file(P(d, 'rw'), b'shared')
        os.chmod(P(d, 'rw'), 0o666)

    def ops(d):
        out = [outcome(read_file, P(d, 'ro')),
               outcome(write_file, P(d, 'ro'), b'x', 'r+b'),
               outcome(os.open, P(d, 'ro'), os.O_WRONLY | os.O_TRUNC),
               outcome(write_file, P(d, 'rw'), b'SH', 'r+b'),
               outcome(read_file, P(d, 'rw'))]
        return out
    setup(work.mnt)
    setup(ref)
    res = same(ops, work.mnt, ref, user=tuser[0])
    assert res[1][1] == ('err', 'EACCES')
    fsync_path(work.m('rw'))
    assert read_file(work.b('rw')) == b'SHared'


def test_o_append_two_descriptors(work, ref):
    def ops(d):
        p = P(d, 'f')
        write_file(p, b'start:')
        a = os.open(p, os.O_WRONLY | os.O_APPEND)
        b = os.open(p, os.O_RDWR | os.O_APPEND)
        try:
            for i in range(50):
                os.write(a, b'a%d;' % i)
                os.write(b, b'B%d;' % i * (i % 7 + 1))
            os.lseek(b, 0, os.SEEK_SET)             # O_APPEND ignores the position
            os.write(b, b'END')
            os.pwrite(a, b'', 0)
            pos = os.lseek(a, 0, os.SEEK_CUR)
        finally:
            os.close(a)
            os.close(b)
        return pos, read_file(p)
    res = same(ops, work.mnt, ref)
    data = res[1][1]
    assert data.startswith(b'start:a0;B0;') and data.endswith(b'END')
    fsync_path(work.m('f'))
    assert read_file(work.b('f')) == data


def test_two_processes_appending(work, ref):
    """Two processes append fixed-size records; every record lands whole."""
    nrec, size = 300, 1000

    def appender(path, tag):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            for i in range(nrec):
                rec = (b'%c%05d' % (tag, i)).ljust(size - 1, bytes([tag])) + b'\n'
                assert os.write(fd, rec) == size
        finally:
            os.close(fd)
        return True

    def run(d):
        p = P(d, 'log')
        write_file(p, b'')
        procs = []
        for tag in (ord('x'), ord('y')):
            pid = os.fork()
            if pid == 0:
                try:
                    appender(p, tag)
                    os._exit(0)
                except BaseException:
                    os._exit(1)
            procs.append(pid)
        for pid in procs:
            assert os.waitpid(pid, 0)[1] == 0
        data = read_file(p)
        assert len(data) == 2 * nrec * size
        recs = [data[i:i + size] for i in range(0, len(data), size)]
        for tag in b'xy':
            mine = [r for r in recs if r[0] == tag]
            assert [int(r[1:6]) for r in mine] == list(range(nrec))
            for r in mine:
                assert r == (b'%c%05d' % (tag, int(r[1:6]))).ljust(size - 1, bytes([tag])) + b'\n'
        return len(data)
    same(run, work.mnt, ref)
    fsync_path(work.m('log'))
    assert read_file(work.b('log')) == read_file(work.m('log'))


# ---------------------------------------------------------------------------
# read / write

def test_random_pwrite_pread(work, ref):
    rng = random.Random(1234)
    ops = []
    for _ in range(300):
        off = rng.choice([rng.randrange(0, 4 * MiB), rng.randrange(0, 64) * 4096,
                          rng.randrange(0, 64) * 4096 - rng.randrange(1, 512)])
        off = max(off, 0)
        ops.append((off, rng.choice([1, 511, 512, 4095, 4096, 4097, 65536,
                                     rng.randrange(1, 300 * KiB)]), rng.randrange(1 << 30)))
    model = bytearray()
    for off, n, seed in ops:
        data = pattern(n, seed)
        if off + n > len(model):
            model.extend(bytes(off + n - len(model)))
        model[off:off + n] = data

    def run(d):
        fd = os.open(P(d, 'f'), os.O_CREAT | os.O_RDWR, 0o644)
        try:
            for off, n, seed in ops:
                assert os.pwrite(fd, pattern(n, seed), off) == n
            reads = []
            r2 = random.Random(99)
            for _ in range(200):
                off = r2.randrange(0, len(model) + 8192)
                n = r2.randrange(1, 200 * KiB)
                reads.append(os.pread(fd, n, off))
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        return size, reads, read_file(P(d, 'f'))
    res = same(run, work.mnt, ref)
    size, reads, whole = res[1]
    assert size == len(model)
    assert whole == bytes(model)
    fsync_path(work.m('f'))
    assert read_file(work.b('f')) == bytes(model)
    assert_stat_same(work.m('f'), work.b('f'))


def test_read_write_edges(work, ref):
    def run(d):
        p = P(d, 'f')
        fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            out = [os.read(fd, 10)]                            # empty file
            os.write(fd, b'hello')
            out.append(os.read(fd, 10))                        # at EOF
            out.append(os.pread(fd, 10, 2))                    # short read
            out.append(os.pread(fd, 10, 5))
            out.append(os.pread(fd, 10, 1000))                 # past EOF
            os.pwrite(fd, b'X', 10000)                         # hole
            out.append(os.pread(fd, 20, 9990))
            out.append(os.lseek(fd, 0, os.SEEK_END))
            out.append(os.pwrite(fd, b'', 50000))              # zero-length: no extend
            out.append(os.fstat(fd).st_size)
            os.lseek(fd, 3, os.SEEK_SET)
            os.write(fd, b'LO')
            out.append(os.pread(fd, 6, 0))
            out.append(os.readv(fd, [bytearray(3), bytearray(4)]))
            out.append(outcome(os.pread, fd, 1, -1))
        finally:
            os.close(fd)
        rfd = os.open(p, os.O_RDONLY)
        try:
            out.append(outcome(os.write, rfd, b'x'))
        finally:
            os.close(rfd)
        return out
    res = same(run, work.mnt, ref)
    assert res[1][5] == bytes(10) + b'X'
    assert res[1][-1] == ('err', 'EBADF')


def test_fsync_reaches_backing(work, ref):
    p = work.m('f')
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        data = pattern(3 * MiB + 123, 7)
        os.pwrite(fd, data, 0)
        os.fsync(fd)
        assert read_file(work.b('f')) == data
        os.pwrite(fd, b'Z' * 5000, 4090)
        os.fdatasync(fd)
        want = data[:4090] + b'Z' * 5000 + data[9090:]
        assert read_file(work.b('f')) == want
        assert os.stat(work.b('f')).st_size == len(data)
    finally:
        os.close(fd)
    # directory fsync works on both
    for d in (work.mnt, ref, work.mnt + '/..'):
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
            os.fdatasync(dfd)
        finally:
            os.close(dfd)


def test_close_then_reopen_reads_own_writes(work):
    """Data written and closed without fsync is seen by a new open, by stat
    and by another reader at once."""
    data = pattern(1 * MiB + 17, 3)
    write_file(work.m('f'), data)
    assert os.stat(work.m('f')).st_size == len(data)
    assert read_file(work.m('f')) == data
    fd = os.open(work.m('f'), os.O_RDONLY)
    try:
        assert os.pread(fd, 100, len(data) - 50) == data[-50:]
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------
# truncate with data

def test_truncate_drops_cached_data(work, ref):
    def run(d):
        p = P(d, 'f')
        fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
        out = []
        try:
            os.pwrite(fd, b'A' * 3 * 65536, 0)
            os.ftruncate(fd, 1000)                 # unaligned, inside a block
            os.ftruncate(fd, 3 * 65536)
            out.append(os.pread(fd, 3 * 65536, 0))
            os.fsync(fd)
            os.pwrite(fd, b'B' * 8192, 0)          # dirty, then shrink by path
            os.truncate(p, 5)
            os.truncate(p, 9000)
            out.append(os.pread(fd, 10000, 0))
            os.ftruncate(fd, 0)
            os.pwrite(fd, b'C', 70000)
            out.append(os.pread(fd, 70001, 0))
            os.pwrite(fd, b'D' * 10, 0)
            os.ftruncate(fd, 8)
            out.append(os.fstat(fd).st_size)
            out.append(os.pread(fd, 100, 0))
        finally:
            os.close(fd)
        return out
    res = same(run, work.mnt, ref)
    assert res[1][0] == b'A' * 1000 + bytes(3 * 65536 - 1000)
    assert res[1][1] == b'BBBBB' + bytes(8995)
    fsync_path(work.m('f'))
    assert read_file(work.b('f')) == b'D' * 8


def test_truncate_open_file_as_other_descriptor(work, ref):
    """A truncate through one descriptor is seen by reads through another."""
    def run(d):
        p = P(d, 'f')
        write_file(p, b'x' * 100000)
        a = os.open(p, os.O_RDWR)
        b = os.open(p, os.O_RDWR)
        try:
            os.pread(b, 100000, 0)
            os.ftruncate(a, 50)
            r1 = os.pread(b, 100, 0)
            os.ftruncate(a, 200)
            r2 = os.pread(b, 300, 0)
        finally:
            os.close(a)
            os.close(b)
        return r1, r2
    same(run, work.mnt, ref)


# ---------------------------------------------------------------------------
# large and sparse files

def test_large_sparse_file(work, ref):
    # 10000 bytes at each offset; the second write straddles 4 GiB
    offs = [0, 4 * GiB - 5000, 4 * GiB + 4096 * 3 + 1, 5 * GiB + 12345]

    def run(d):
        p = P(d, 'big')
        fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            for i, off in enumerate(offs):
                os.pwrite(fd, pattern(10000, i), off)
            out = [os.fstat(fd).st_size]
            out += [os.pread(fd, 10000, off) == pattern(10000, i) for i, off in enumerate(offs)]
            out.append(os.pread(fd, 4096, 2 * GiB))               # hole
            out.append(os.pread(fd, 100, 4 * GiB - 50))          # hole + data across 4 GiB
            out.append(os.pread(fd, 100, 5 * GiB + 12345 + 9990))  # short read at EOF
            os.fsync(fd)
            os.ftruncate(fd, 4 * GiB + 1)
            out.append(os.fstat(fd).st_size)
            out.append(os.pread(fd, 10, 4 * GiB - 4))
        finally:
            os.close(fd)
        return out
    res = same(run, work.mnt, ref)
    assert res[1][0] == 5 * GiB + 12345 + 10000
    assert all(res[1][1:5])
    assert res[1][-1] == pattern(10000, 1)[4996:5001]
    fsync_path(work.m('big'))
    st = os.stat(work.b('big'))
    assert st.st_size == 4 * GiB + 1
    assert st.st_blocks * 512 < 64 * MiB     # still sparse in the backing
    with open(work.b('big'), 'rb') as f:
        f.seek(4 * GiB - 5000)
        assert f.read(5001) == pattern(10000, 1)[:5001]
    assert_stat_same(work.m('big'), work.b('big'))


# ---------------------------------------------------------------------------
# fallocate / SEEK_DATA / SEEK_HOLE

def test_posix_fallocate(work, ref):
    def run(d):
        p = P(d, 'f')
        fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            os.pwrite(fd, b'a' * 100, 0)
            os.posix_fallocate(fd, 50, 1 * MiB)
            out = [os.fstat(fd).st_size, os.pread(fd, 200, 0)]
            os.posix_fallocate(fd, 0, 10)                 # inside: no change
            out.append(os.fstat(fd).st_size)
            out.append(outcome(os.posix_fallocate, fd, -1, 10))
            fallocate(fd, FALLOC_FL_KEEP_SIZE, 2 * MiB, MiB)
            out.append(os.fstat(fd).st_size)
        finally:
            os.close(fd)
        return out
    res = same(run, work.mnt, ref)
    assert res[1][0] == MiB + 50
    fsync_path(work.m('f'))
    assert os.stat(work.b('f')).st_size == MiB + 50
    assert os.stat(work.b('f')).st_blocks * 512 >= 2 * MiB    # really allocated


@pytest.mark.parametrize('sync_first', [True, False], ids=['clean', 'dirty'])
def test_punch_hole(work, ref, sync_first):
    def run(d):
        p = P(d, 'f')
        fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            os.pwrite(fd, b'Q' * (1 * MiB), 0)
            if sync_first:
                os.fsync(fd)
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 65536)
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100000, 1000)  # unaligned
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, MiB - 10, 100)  # past EOF
            out = [os.fstat(fd).st_size, os.pread(fd, MiB, 0)]
            out.append(outcome(fallocate, fd, FALLOC_FL_PUNCH_HOLE, 0, 4096))   # needs KEEP_SIZE
            os.fsync(fd)
        finally:
            os.close(fd)
        return out
    res = same(run, work.mnt, ref)
    want = bytearray(b'Q' * MiB)
    want[4096:4096 + 65536] = bytes(65536)
    want[100000:101000] = bytes(1000)
    want[MiB - 10:] = bytes(10)
    assert res[1][1] == bytes(want)
    # the dirty data must not have been written back over the holes
    assert read_file(work.b('f')) == bytes(want)
    assert read_file(work.m('f')) == bytes(want)


def test_zero_range(work, ref):
    def run(d):
        p = P(d, 'f')
        fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            os.pwrite(fd, b'Z' * (256 * KiB), 0)
            fallocate(fd, FALLOC_FL_ZERO_RANGE, 1000, 70000)
            fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 250 * KiB, 64 * KiB)
            out = [os.fstat(fd).st_size]
            fallocate(fd, FALLOC_FL_ZERO_RANGE, 250 * KiB, 64 * KiB)   # extends
            out += [os.fstat(fd).st_size, os.pread(fd, 512 * KiB, 0)]
            os.fsync(fd)
        finally:
            os.close(fd)
        return out
    res = same(run, work.mnt, ref)
    want = bytearray(b'Z' * (256 * KiB))
    want[1000:71000] = bytes(70000)
    want[250 * KiB:] = bytes(6 * KiB)
    want.extend(bytes(58 * KiB))
    assert res[1][2] == bytes(want)
    assert read_file(work.b('f')) == bytes(want)


def _seek_map(fd, size):
    out = []
    for off in list(range(0, size + 4096, 4096)) + [size - 1, size, size + 1]:
        out.append((off, outcome(os.lseek, fd, off, os.SEEK_DATA),
                    outcome(os.lseek, fd, off, os.SEEK_HOLE)))
    return out


def test_seek_data_hole(work, ref):
    # data at [0, 4K), [1M, 1M+8K), [1.5M+4K, 1.5M+8K); size 2M
    regions = [(0, 4096), (MiB, 8192), (MiB + 512 * KiB + 4096, 4096)]
    size = 2 * MiB

    def run(d, sync):
        fd = os.open(P(d, 'sparse'), os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
        try:
            for off, n in regions:
                os.pwrite(fd, b'D' * n, off)
            os.ftruncate(fd, size)
            if not sync:
                # before writeback: SEEK_DATA never skips data we wrote, and
                # SEEK_HOLE never lands inside it
                for off, n in regions:
                    for probe in (off, off + n - 1):
                        assert os.lseek(fd, probe, os.SEEK_DATA) == probe
                        assert os.lseek(fd, probe, os.SEEK_HOLE) >= off + n
                return None
            os.fsync(fd)
            return _seek_map(fd, size)
        finally:
            os.close(fd)
    same(lambda d: run(d, False), work.mnt, ref)
    res = same(lambda d: run(d, True), work.mnt, ref)
    m = dict((o, (dd, h)) for o, dd, h in res[1])
    assert m[0] == (('ok', 0), ('ok', 4096))
    assert m[8192] == (('ok', MiB), ('ok', 8192))
    assert m[MiB] == (('ok', MiB), ('ok', MiB + 8192))
    assert m[size] == (('err', 'ENXIO'), ('err', 'ENXIO'))


# ---------------------------------------------------------------------------
# copy_file_range

def test_copy_file_range_within_mount(work, ref):
    src_data = pattern(2 * MiB + 333, 11)

    def run(d):
        src = os.open(P(d, 'src'), os.O_CREAT | os.O_RDWR, 0o644)
        dst = os.open(P(d, 'dst'), os.O_CREAT | os.O_RDWR, 0o644)
        try:
            os.pwrite(src, src_data, 0)                 # still dirty in a cache
            os.pwrite(dst, b'old' * 100000, 0)
            os.pread(dst, 300000, 0)                    # cache the destination
            out = []
            n = os.copy_file_range(src, dst, MiB, 4096, 8192)
            out.append(n)
            left, done = len(src_data), 0
            os.lseek(src, 0, os.SEEK_SET)
            os.lseek(dst, 0, os.SEEK_SET)
            while left > 0:                             # uses and moves the file offsets
                c = os.copy_file_range(src, dst, left)
                assert c > 0
                left -= c
                done += c
            out.append((done, os.lseek(src, 0, os.SEEK_CUR), os.lseek(dst, 0, os.SEEK_CUR)))
            out.append(os.copy_file_range(src, dst, 100, len(src_data) + 10, 0))  # src EOF
            os.copy_file_range(src, dst, 1000, 17, 3 * MiB)   # dst past EOF: hole
            out.append(os.fstat(dst).st_size)
            out.append(os.pread(dst, 4 * MiB, 0))
            out.append(outcome(os.copy_file_range, src, src, 100, 0, 50))  # overlapping
        finally:
            os.close(src)
            os.close(dst)
        return out
    res = same(run, work.mnt, ref)
    assert res[1][4][:len(src_data)] == src_data
    fsync_path(work.m('dst'))
    assert read_file(work.b('dst')) == res[1][4]


def _other_fs_dir(path, prefix):
    """A temporary directory on a filesystem other than PATH's, or None."""
    dev = os.stat(path).st_dev
    for base in ('/dev/shm', '/run', '/tmp', '/var/tmp'):
        try:
            if os.path.isdir(base) and os.stat(base).st_dev != dev:
                return tempfile.mkdtemp(prefix=prefix, dir=base)
        except OSError:
            pass
    return None


def test_copy_file_range_across_filesystems(work, ref):
    """mount <-> /tmp must behave as plain dir <-> another filesystem:
    both copy, or both fail with the same errno (EXDEV)."""
    data = pattern(300 * KiB + 5, 5)
    mnt_other = tempfile.mkdtemp(prefix='foliofs-cfr-')        # /tmp: not the mount
    ref_other = _other_fs_dir(ref, 'foliofs-cfr-ref-')
    if ref_other is None:
        shutil.rmtree(mnt_other)
        pytest.skip('no second local filesystem for the reference directory')
    try:
        def run(d, other):
            def copy(src_path, dst_path):
                s = os.open(src_path, os.O_RDONLY)
                t = os.open(dst_path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
                try:
                    left = len(data)
                    while left:
                        c = os.copy_file_range(s, t, left)
                        if c == 0:
                            break
                        left -= c
                finally:
                    os.close(s)
                    os.close(t)
                return read_file(dst_path) == data
            write_file(P(d, 'in'), data)
            write_file(P(other, 'in'), data)
            return [outcome(copy, P(d, 'in'), P(other, 'out')),
                    outcome(copy, P(other, 'in'), P(d, 'out'))]
        m = outcome(run, work.mnt, mnt_other)
        r = outcome(run, ref, ref_other)
        assert m == r, 'foliofs<->/tmp: %r, plain<->other fs: %r' % (m, r)
        for res in m[1]:
            assert res in (('ok', True), ('err', 'EXDEV')), res
    finally:
        shutil.rmtree(mnt_other, ignore_errors=True)
        shutil.rmtree(ref_other, ignore_errors=True)


# ---------------------------------------------------------------------------
# concurrency

def test_concurrent_writers_disjoint_regions(work, ref):
    nthreads, region = 4, MiB

    def chunks(t):
        rng = random.Random(t)
        off, out = 0, []
        while off < region:
            n = min(rng.choice([1, 100, 4096, 4097, 30000, rng.randrange(1, 200000)]),
                    region - off)
            out.append((t * region + off, n))
            off += n
        rng.shuffle(out)
        return out

    def expected():
        buf = bytearray(nthreads * region)
        for t in range(nthreads):
            for off, n in chunks(t):
                buf[off:off + n] = pattern(n, off)
        return bytes(buf)

    def run(d):
        fd = os.open(P(d, 'f'), os.O_CREAT | os.O_RDWR, 0o644)
        errors = []

        def writer(t):
            try:
                for off, n in chunks(t):
                    assert os.pwrite(fd, pattern(n, off), off) == n
            except BaseException as e:  # noqa: BLE001
                errors.append(e)
        try:
            threads = [threading.Thread(target=writer, args=(t,)) for t in range(nthreads)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            if errors:
                raise errors[0]
            got = os.pread(fd, nthreads * region + 10, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        return got
    want = expected()
    res = same(run, work.mnt, ref)
    assert res[1] == want
    assert read_file(work.b('f')) == want


def test_unaligned_buffers_read_no_block(ffs, work, ref):
    """Large writes from buffers that are not page aligned, over data on the
    backing file that the cache does not hold.  In direct I/O the kernel
    cuts each into requests that end inside a block, the next starting
    there; the daemon joins the pieces (the split tail) instead of reading
    those blocks from the backing file first.  The data is the same as on
    a plain directory, through the mount and on the backing file."""
    size = 8 * MiB
    old, new = pattern(size, 1), pattern(size, 2)
    for d in (work.back, ref):
        write_file(P(d, 'f'), old)
        fsync_path(P(d, 'f'))
    buf = mmap.mmap(-1, 4 * MiB)
    # (file offset, length, offset of the buffer in its page)
    writes = [(0, MiB, 100), (MiB, 3 * MiB, 4095), (4 * MiB, 2 * MiB + 8 * KiB, 1),
              (6 * MiB + 8 * KiB, 2 * MiB - 8 * KiB, 2048)]
    before = util.stats(ffs.mnt)['backing_read_bytes']
    for d in (work.mnt, ref):
        fd = os.open(P(d, 'f'), os.O_WRONLY)
        try:
            for off, n, o in writes:
                buf[o:o + n] = new[off:off + n]
                assert os.pwrite(fd, memoryview(buf)[o:o + n], off) == n
        finally:
            os.close(fd)
    assert util.stats(ffs.mnt)['backing_read_bytes'] == before
    assert read_file(work.m('f')) == new
    assert read_file(P(ref, 'f')) == new
    fsync_path(work.m('f'))
    assert read_file(work.b('f')) == new


def test_concurrent_readers_and_writer(work):
    """Readers never see bytes that were never written."""
    size = 2 * MiB
    p = work.m('f')
    write_file(p, b'\x01' * size)
    stop = time.monotonic() + 3
    bad = []

    def writer():
        fd = os.open(p, os.O_WRONLY)
        try:
            v = 2
            while time.monotonic() < stop:
                off = random.randrange(0, size // 4096) * 4096
                os.pwrite(fd, bytes([v]) * 4096, off)
                v = v % 250 + 2
        finally:
            os.close(fd)

    def reader():
        fd = os.open(p, os.O_RDONLY)
        try:
            while time.monotonic() < stop:
                off = random.randrange(0, size - 65536)
                data = os.pread(fd, 65536, off)
                if len(data) != 65536 or b'\x00' in data:
                    bad.append((off, len(data)))
                    return
        finally:
            os.close(fd)
    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader)
                                                    for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad, 'short read or zero bytes at %r' % bad[:5]
    assert os.stat(p).st_size == size


# ---------------------------------------------------------------------------
# O_DIRECT

def test_o_direct(work, ref):
    n = 256 * KiB

    def run(d):
        p = P(d, 'direct')
        fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644)
        try:
            wbuf = mmap.mmap(-1, n)
            wbuf.write(pattern(n, 42))
            assert os.pwritev(fd, [wbuf], 0) == n
            assert os.pwritev(fd, [memoryview(wbuf)[:8192]], 1 * MiB) == 8192
            rbuf = mmap.mmap(-1, n)
            assert os.preadv(fd, [rbuf], 0) == n
            r1 = bytes(rbuf)
            rbuf2 = mmap.mmap(-1, 16384)
            got = os.preadv(fd, [rbuf2], 1 * MiB)     # short at EOF
            r2 = bytes(rbuf2[:got])
            os.fsync(fd)
        finally:
            os.close(fd)
        # a buffered reader sees what the direct writer wrote
        return r1 == pattern(n, 42), r2, os.stat(p).st_size, read_file(p)[n:n + 10]
    res = same(run, work.mnt, ref)
    assert res[1][0] and res[1][1] == pattern(n, 42)[:8192]
    assert read_file(work.b('direct'))[:n] == pattern(n, 42)


def test_fio_direct_verify(work):
    fio = shutil.which('fio')
    if fio is None:
        util.require_tool('fio', 'apt-get install fio (contrib/test.sh installs it)')
    r = subprocess.run([fio, '--name=verify', '--directory=' + work.mnt, '--direct=1',
                        '--rw=randrw', '--bs=4k', '--size=16M', '--ioengine=psync',
                        '--verify=crc32c', '--do_verify=1', '--verify_fatal=1',
                        '--numjobs=2', '--group_reporting', '--fsync=64',
                        '--verify_state_save=0'],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=100,
                       cwd=work.mnt)
    out = r.stdout.decode(errors='replace')
    assert r.returncode == 0, out
    assert 'verify' in out and 'err= 0' in out, out


# ---------------------------------------------------------------------------
# daemon resources and unmount

def forgotten_all(mnt):
    """Drop the kernel's dentries and inodes, then wait (bounded) for the
    daemon to have handled every FORGET: it holds no inode of the mount.
    A cached file's pages can keep its inode past one drop (writethrough,
    writeback), so each look drops again.  True once there."""
    def none_held():
        util.drop_caches()
        return util.stats(mnt)['inodes'] == 0
    return util.poll(none_held, 10, 0.1)


@pytest.mark.drops_caches
def test_no_fd_leak(ffs, work):
    pid = ffs.mount.pid
    assert forgotten_all(ffs.mnt), util.stats(ffs.mnt)
    before = fd_count(pid)
    for i in range(300):
        p = work.m('f%d' % i)
        write_file(p, b'x' * (i * 100))
        fd = os.open(p, os.O_RDONLY)
        os.read(fd, 10)
        os.close(fd)
        os.rename(p, p + '.r')
        os.symlink('x', p + '.l')
        if i % 2:
            os.unlink(p + '.r')
        os.mkdir(p + '.d')
        os.rmdir(p + '.d')
    for e in os.scandir(work.mnt):
        e.stat(follow_symlinks=False)
    shutil.rmtree(work.mnt)
    os.mkdir(work.mnt)
    assert forgotten_all(ffs.mnt), util.stats(ffs.mnt)
    after = fd_count(pid)
    assert after <= before + 2, 'daemon fds: %d before, %d after' % (before, after)


def _private_mount(tmp_path, options=()):
    root = tmp_path / 'm'
    root.mkdir()
    os.chmod(tmp_path, 0o755)
    backing, mnt = str(root / 'backing'), str(root / 'mnt')
    os.mkdir(backing)
    os.mkdir(mnt)
    return backing, mnt, Mount(backing, mnt, options=options)


def test_unmount_flushes_dirty_data(tmp_path):
    backing, mnt, m = _private_mount(tmp_path)
    data = pattern(5 * MiB + 7, 9)
    m.start()
    try:
        m.wait_for_mount()
        write_file(P(mnt, 'f'), data)        # no fsync
        os.mkdir(P(mnt, 'd'))
        write_file(P(mnt, 'd', 'g'), b'small')
        m.umount()
    finally:
        m.cleanup()
    assert read_file(P(backing, 'f')) == data
    assert read_file(P(backing, 'd', 'g')) == b'small'


def test_lazy_unmount_with_open_file(tmp_path):
    backing, mnt, m = _private_mount(tmp_path)
    data = pattern(3 * MiB, 10)
    m.start()
    try:
        m.wait_for_mount()
        fd = os.open(P(mnt, 'f'), os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            os.write(fd, data[:MiB])
            r = subprocess.run(['fusermount3', '-u', '-z', mnt], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            assert r.returncode == 0, r.stdout
            # The detached mount still works: the daemon answers a write
            # and an fsync after the unmount, and is still there after.
            os.write(fd, data[MiB:])
            os.fsync(fd)
            assert m.proc.poll() is None, 'daemon exited while a file was still open'
        finally:
            os.close(fd)
        m.wait_exit(timeout=30)
    finally:
        m.cleanup()
    assert read_file(P(backing, 'f')) == data


def test_sigterm_exits_cleanly_after_flush(tmp_path):
    backing, mnt, m = _private_mount(tmp_path)
    data = pattern(2 * MiB + 1, 12)
    m.start()
    try:
        m.wait_for_mount()
        write_file(P(mnt, 'f'), data)
        m.proc.terminate()
        m.wait_exit(timeout=30)
        assert not os.path.ismount(mnt)
    finally:
        m.cleanup()
    assert read_file(P(backing, 'f')) == data


@pytest.mark.parametrize('options', [['kernel_cache'], ['cache=writethrough'],
                                     ['attr_timeout=0', 'max_threads=2']],
                         ids=['kernel_cache', 'writethrough', 'attr0_threads2'])
def test_other_options_roundtrip(tmp_path, options):
    backing, mnt, m = _private_mount(tmp_path, options)
    data = pattern(MiB + 99, 13)
    m.start()
    try:
        m.wait_for_mount()
        write_file(P(mnt, 'f'), data)
        fd = os.open(P(mnt, 'f'), os.O_RDWR)
        try:
            os.pwrite(fd, b'patch', 4093)
            os.ftruncate(fd, MiB)
            os.fsync(fd)
        finally:
            os.close(fd)
        want = data[:4093] + b'patch' + data[4098:MiB]
        assert read_file(P(mnt, 'f')) == want
        assert read_file(P(backing, 'f')) == want
        m.umount()
    finally:
        m.cleanup()
