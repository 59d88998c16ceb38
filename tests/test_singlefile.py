"""One-file mounts: BACKING a regular file or a block device (loop device),
mounted over a regular file, with and without backing_direct."""

import hashlib
import mmap
import os
import shutil
import subprocess
import tempfile

import pytest

import util
from util import FOLIOFS, Mount

MiB = 1 << 20


@pytest.fixture
def files():
    root = tempfile.mkdtemp(prefix='foliofs-one-')
    os.chmod(root, 0o755)
    img, mnt = os.path.join(root, 'backing.img'), os.path.join(root, 'mnt')
    with open(img, 'wb') as f:
        f.truncate(16 * MiB)
    open(mnt, 'w').close()
    yield root, img, mnt
    if util.is_fuse_mounted(mnt):
        subprocess.run([util.FUSERMOUNT, '-u', '-z', mnt], stderr=subprocess.DEVNULL)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def loopdev(files):
    with util.loop_device(files[1]) as dev:
        yield dev


def pattern(n, seed):
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(b'%d:%d' % (seed, i)).digest()
        i += 1
    return bytes(out[:n])


def exercise(mnt, size, grow):
    """Writes at odd offsets, reads back, fsync; returns {offset: bytes}."""
    written = {}
    fd = os.open(mnt, os.O_RDWR)
    try:
        assert os.fstat(fd).st_size == size
        for i, off in enumerate([0, 4095, 12345, 3 * MiB + 1, size - 100]):
            data = pattern(100, i)
            assert os.pwrite(fd, data, off) == 100
            written[off] = data
        for off, data in written.items():
            assert os.pread(fd, 100, off) == data
        os.fsync(fd)
        if grow:
            assert os.pwrite(fd, b'tail', size + MiB) == 4
            assert os.fstat(fd).st_size == size + MiB + 4
            written[size + MiB] = b'tail'
        else:
            with pytest.raises(OSError) as e:
                os.pwrite(fd, b'x', size)
            assert e.value.errno == 28   # ENOSPC: a device does not grow
            with pytest.raises(PermissionError):
                os.ftruncate(fd, size // 2)
        os.fsync(fd)
    finally:
        os.close(fd)
    return written


def check_backing(path, written):
    with open(path, 'rb') as f:
        for off, data in written.items():
            f.seek(off)
            assert f.read(len(data)) == data, 'backing differs at %d' % off


@pytest.mark.parametrize('opts', [('backing_direct=off',), ('backing_direct',)],
                         ids=['buffered', 'direct'])
def test_regular_file(files, opts):
    _, img, mnt = files
    with Mount(img, mnt, options=opts) as m:
        st = os.stat(mnt)
        assert st.st_size == 16 * MiB and (st.st_mode & 0o170000) == 0o100000
        written = exercise(mnt, 16 * MiB, grow=True)
        check_backing(img, written)       # fsync reached the backing file
        m.umount()
    assert os.path.getsize(img) == 17 * MiB + 4   # exact, also with O_DIRECT
    check_backing(img, written)


@pytest.mark.parametrize('opts', [('backing_direct=off',), ('backing_direct',)],
                         ids=['buffered', 'direct'])
def test_block_device(files, loopdev, opts):
    _, img, mnt = files
    with Mount(loopdev, mnt, options=opts) as m:
        st = os.stat(mnt)
        assert st.st_size == 16 * MiB and (st.st_mode & 0o170000) == 0o100000
        written = exercise(mnt, 16 * MiB, grow=False)
        # O_DIRECT by the application on the mounted device file
        fd = os.open(mnt, os.O_RDWR | os.O_DIRECT)
        try:
            buf = mmap.mmap(-1, 8192)
            buf[:] = pattern(8192, 99)
            assert os.pwritev(fd, [buf], 8 * MiB) == 8192
            back = mmap.mmap(-1, 8192)
            assert os.preadv(fd, [back], 8 * MiB) == 8192
            assert bytes(back) == bytes(buf)
            os.fsync(fd)
            written[8 * MiB] = bytes(buf)
        finally:
            os.close(fd)
        m.umount()
    check_backing(loopdev, written)


def test_mountpoint_must_match(files):
    root, img, mnt = files
    d = os.path.join(root, 'dir')
    os.mkdir(d)
    r = subprocess.run([FOLIOFS, '-f', img, d], stderr=subprocess.PIPE, timeout=30)
    err = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and 'must be a regular file' in err[0]
    r = subprocess.run([FOLIOFS, '-f', root, mnt], stderr=subprocess.PIPE, timeout=30)
    err = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and 'not a directory' in err[0]
    assert not util.is_fuse_mounted(d) and not util.is_fuse_mounted(mnt)
