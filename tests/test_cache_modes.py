"""-o cache=direct|writethrough|writeback: what each mode promises.

Every mode: data changed through one descriptor reads back right through
another that had the old data in the kernel's page cache, after writes,
truncates, punched holes, zeroed ranges, copy_file_range, an O_TRUNC open
and a shared mapping, in a directory mount and in one-file mounts of a
regular file and of a block device (the changes a device allows).  The
reader reads the whole file before each change, so in the cached modes
the pages a stale cache would serve are the ones it just read.

writethrough: each write syscall reaches the daemon as it was made (its
exact byte count in `app_write_bytes`, the blocks it touched dirty in
`dirty_bytes_exact`) before it returns, while a read of a page the kernel
holds does not (`app_read_bytes`, the bytes the daemon's cache returned,
stays put).  A bad value of cache= is refused with one
line naming the option and the value.
"""

import mmap
import os
import random
import subprocess

import pytest

import util
from util import FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE, \
    FOLIOFS, Mount, fallocate, stats

KiB = 1 << 10
MiB = 1 << 20
MODES = ['direct', 'writethrough', 'writeback']


def pattern(n, seed):
    """N pseudo-random bytes, the same for the same SEED."""
    return random.Random(seed).randbytes(n)


class Model:
    """A file's expected bytes beside the file: each change is made through
    descriptor `fd` and to `data`; `check` reads the whole file through
    `reader`, a second descriptor that read it all before the change."""

    def __init__(self, path, size):
        self.path = path
        self.fd = os.open(path, os.O_RDWR)
        self.reader = os.open(path, os.O_RDONLY)
        self.data = bytearray(pattern(size, 0))
        assert os.pwrite(self.fd, self.data, 0) == size
        if os.fstat(self.fd).st_size != size:   # a device has its size
            os.ftruncate(self.fd, size)
        self.prime()

    def prime(self):
        """Read the whole file through the reader (fills the kernel's pages)."""
        assert self.read() == bytes(self.data)

    def read(self):
        size = os.fstat(self.reader).st_size
        return os.pread(self.reader, size + 4096, 0)

    def check(self, what):
        got, want = self.read(), bytes(self.data)
        if got != want:
            first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                         min(len(got), len(want)))
            pytest.fail('after %s: read %d bytes, want %d; first difference at %d'
                        % (what, len(got), len(want), first))
        self.prime()

    def write(self, off, n, seed):
        data = pattern(n, seed)
        assert os.pwrite(self.fd, data, off) == n
        self.set(off, data)

    def set(self, off, data):
        self.extend(off)
        self.data[off:off + len(data)] = data

    def truncate(self, size):
        os.ftruncate(self.fd, size)
        del self.data[size:]
        self.extend(size)

    def extend(self, size):
        self.data += bytes(max(0, size - len(self.data)))

    def fallocate(self, mode, off, n):
        """fallocate(MODE); a punch or zero-range zeroes what it covers
        inside the file, and without KEEP_SIZE any mode extends it."""
        fallocate(self.fd, mode, off, n)
        if not mode & FALLOC_FL_KEEP_SIZE:
            self.extend(off + n)
        if mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE):
            end = min(off + n, len(self.data))
            self.data[off:end] = bytes(end - off)

    def close(self):
        os.close(self.fd)
        os.close(self.reader)


def changes(model, other):
    """Each change the cached modes must stay coherent across, applied to
    MODEL and checked; OTHER is a second file's path for copy_file_range
    (None in a one-file mount: the copies stay within the file)."""
    model.write(4096 + 100, 10000, 1)
    model.check('an unaligned write')
    model.truncate(50000 + 123)
    model.check('a truncate down to mid-page')
    model.truncate(300 * KiB)
    model.check('a truncate up again (zeros, not the old tail)')
    model.write(0, 300 * KiB, 2)
    model.check('a rewrite of the whole file')
    model.fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 5000, 70000)
    model.check('an unaligned punched hole')
    model.write(0, 300 * KiB, 3)
    model.fallocate(FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 9000, 50001)
    model.check('an unaligned zeroed range')
    model.fallocate(FALLOC_FL_ZERO_RANGE, 290 * KiB + 7, 20 * KiB)
    model.check('a zeroed range past EOF')
    model.fallocate(0, 400 * KiB, 8 * KiB)
    model.check('an allocation past EOF')

    if other is not None:
        src_data = pattern(64 * KiB, 4)
        with open(other, 'wb') as f:
            f.write(src_data)
        src = os.open(other, os.O_RDONLY)
        try:
            assert os.copy_file_range(src, model.fd, 40000, 10, 1000) == 40000
        finally:
            os.close(src)
        model.set(1000, src_data[10:40010])
        what = 'copy_file_range from another file'
    else:
        want = bytes(model.data[200 * KiB:200 * KiB + 40000])
        assert os.copy_file_range(model.fd, model.fd, 40000, 200 * KiB, 1000) == 40000
        model.set(1000, want)
        what = 'copy_file_range within the file'
    model.check(what)

    map_fd = os.open(model.path, os.O_RDWR)
    try:
        mp = mmap.mmap(map_fd, 64 * KiB, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(map_fd)
    try:
        mp[3000:3010] = b'mmapstore!'
        model.set(3000, b'mmapstore!')
        model.check('a store through a shared mapping')
        model.write(3005, 3, 5)
        assert mp[3000:3010] == bytes(model.data[3000:3010]), 'mapping after a write'
    finally:
        mp.close()

    fd = os.open(model.path, os.O_WRONLY | os.O_TRUNC)
    try:
        assert os.pwrite(fd, b'short', 0) == 5
    finally:
        os.close(fd)
    model.data = bytearray(b'short')
    model.check('an O_TRUNC open and a short write')


def device_changes(model):
    """The changes a block device allows (no size change; fallocate
    ranges aligned to its sectors), applied and checked."""
    model.write(4096 + 100, 10000, 1)
    model.check('an unaligned write')
    model.fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 12288)
    model.check('a punched hole')
    model.write(0, 64 * KiB, 2)
    model.fallocate(FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 8192, 16384)
    model.check('a zeroed range')
    want = bytes(model.data[200 * KiB:200 * KiB + 40000])
    assert os.copy_file_range(model.fd, model.fd, 40000, 200 * KiB, 1000) == 40000
    model.set(1000, want)
    model.check('copy_file_range within the device')


@pytest.fixture
def loopdev(dirs):
    """A 1 MiB loop device (root only)."""
    img = os.path.join(dirs[0], 'device.img')
    with open(img, 'wb') as f:
        f.truncate(MiB)
    with util.loop_device(img) as dev:
        yield dev


@pytest.mark.parametrize('mode', MODES)
def test_coherent_directory_mount(dirs, mode):
    _, b, m = dirs
    with Mount(b, m, options=['cache=' + mode]):
        path = os.path.join(m, 'f')
        util.write_file(path, b'')
        model = Model(path, 200 * KiB)
        try:
            changes(model, os.path.join(m, 'src'))
        finally:
            model.close()


@pytest.mark.parametrize('mode', MODES)
def test_coherent_one_file_mount(dirs, mode):
    root, _, _ = dirs
    img, mnt = os.path.join(root, 'backing.img'), os.path.join(root, 'one')
    util.write_file(img, b'')
    util.write_file(mnt, b'')
    try:
        with Mount(img, mnt, options=['cache=' + mode]):
            model = Model(mnt, 200 * KiB)
            try:
                changes(model, None)
            finally:
                model.close()
    finally:
        if util.is_fuse_mounted(mnt):
            subprocess.run([util.FUSERMOUNT, '-u', '-z', mnt], stderr=subprocess.DEVNULL)
    assert util.read_file(img) == b'short'


@pytest.mark.parametrize('mode', MODES)
def test_coherent_block_device_mount(dirs, loopdev, mode):
    root, _, _ = dirs
    mnt = os.path.join(root, 'dev')
    util.write_file(mnt, b'')
    try:
        with Mount(loopdev, mnt, options=['cache=' + mode]):
            model = Model(mnt, MiB)
            try:
                device_changes(model)
            finally:
                model.close()
    finally:
        if util.is_fuse_mounted(mnt):
            subprocess.run([util.FUSERMOUNT, '-u', '-z', mnt], stderr=subprocess.DEVNULL)


def test_writethrough_dirties_each_write_exactly(dirs):
    """Writes reach the daemon as they were made, before write() returns:
    the daemon takes the exact byte count of odd-sized writes at odd
    offsets, and dirties exactly the blocks they touch.  (writeback would
    hold them in the kernel and send whole pages later; flushers=0 keeps
    the daemon from cleaning blocks meanwhile.)"""
    _, b, m = dirs
    writes = [(0, 1), (5000, 3000), (MiB + 17, 20000)]
    # Blocks touched: 0; 1; 256 .. 260.
    blocks = 1 + 1 + 5
    with Mount(b, m, options=['cache=writethrough', 'flushers=0']):
        fd = os.open(os.path.join(m, 'f'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            before = stats(m)
            for i, (off, n) in enumerate(writes):
                assert os.pwrite(fd, pattern(n, i), off) == n
            after = stats(m)
        finally:
            os.close(fd)
    assert after['app_write_bytes'] - before['app_write_bytes'] == sum(n for _, n in writes)
    assert after['dirty_bytes_exact'] - before['dirty_bytes_exact'] == blocks * 4096


def test_writethrough_cached_read_stays_in_kernel(dirs):
    """A page the kernel holds is read without a request: after a write
    (the kernel keeps what it wrote) and after a first read, the daemon's
    cache returns no bytes; cache=direct, the contrast, returns them all."""
    _, b, m = dirs
    for mode, cached in (('writethrough', True), ('direct', False)):
        with Mount(b, m, options=['cache=' + mode]):
            path = os.path.join(m, mode)
            data = pattern(256 * KiB, 1)
            util.write_file(path, data)
            fd = os.open(path, os.O_RDWR)
            try:
                assert os.pwrite(fd, data[:64 * KiB], 0) == 64 * KiB
                before = stats(m)['app_read_bytes']
                for _ in range(3):
                    assert os.pread(fd, 64 * KiB, 0) == data[:64 * KiB]
                read = stats(m)['app_read_bytes'] - before
                assert read == (0 if cached else 3 * 64 * KiB), (mode, read)
            finally:
                os.close(fd)


@pytest.mark.parametrize('val', ['foo', '', 'Direct', 'writethrough '])
def test_bad_cache_value_refused(dirs, val):
    _, b, m = dirs
    r = subprocess.run([FOLIOFS, '-f', '-o', 'cache=' + val, b, m], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert err == ('foliofs: cache=%s: unknown value (known: direct, writethrough, '
                   'writeback)\n' % val), err
    assert not util.is_fuse_mounted(m)
