"""backing_direct=auto|on|off: backing files opened with O_DIRECT where
BACKING's file system takes it (the default, auto), always, or never; the
`backing_direct` stat says which the mount uses.  auto falls back to
buffered I/O for a BACKING without O_DIRECT (ramfs here), and file by file
for a file system without it mounted inside BACKING."""

import contextlib
import os
import subprocess

import pytest

import util
from util import Mount, stats

MiB = 1 << 20


def takes_o_direct(d):
    """Whether the file system of directory D opens a file with O_DIRECT."""
    try:
        fd = os.open(d, os.O_TMPFILE | os.O_RDWR | os.O_DIRECT, 0o600)
    except OSError:
        return False
    os.close(fd)
    return True


def fstype(d):
    return subprocess.run(['stat', '-f', '-c', '%T', d], stdout=subprocess.PIPE,
                          check=True).stdout.decode().strip()


@contextlib.contextmanager
def ramfs(d):
    """A ramfs (no O_DIRECT) mounted on D, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip('mounting ramfs needs root')
    os.makedirs(d, exist_ok=True)
    if subprocess.run(['mount', '-t', 'ramfs', 'ramfs', d]).returncode != 0:
        pytest.skip('ramfs cannot be mounted here')
    try:
        os.chmod(d, 0o777)
        yield d
    finally:
        subprocess.run(['umount', '-l', d])


def exercise(m, name, size=3 * MiB + 1234):
    """Write NAME through the mount (an odd size: the block holding EOF is
    written whole under O_DIRECT and the file cut back), fsync, reopen,
    overwrite a piece, read back; returns the bytes it should hold."""
    data = bytearray(os.urandom(size))
    p = os.path.join(m, name)
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        assert os.pwrite(fd, data, 0) == size
        os.fsync(fd)
    finally:
        os.close(fd)
    piece = os.urandom(5000)
    fd = os.open(p, os.O_RDWR)
    try:
        assert os.pwrite(fd, piece, 70000) == len(piece)
        data[70000:70000 + len(piece)] = piece
        os.fdatasync(fd)
        assert os.pread(fd, size + 10, 0) == bytes(data)
    finally:
        os.close(fd)
    return bytes(data)


def test_default_follows_the_backing_file_system(dirs):
    """With no option, O_DIRECT is used exactly where BACKING takes it."""
    _, b, m = dirs
    with Mount(b, m) as mnt:
        want = takes_o_direct(b)
        assert stats(m)['backing_direct'] == want, (fstype(b), want)
        data = exercise(m, 'f')
        mnt.umount()
    assert util.read_file(os.path.join(b, 'f')) == data


@pytest.mark.parametrize('opt,want', [('backing_direct', 1), ('backing_direct=on', 1),
                                      ('backing_direct=off', 0)],
                         ids=['flag', 'on', 'off'])
def test_given(dirs, opt, want):
    _, b, m = dirs
    if want and not takes_o_direct(b):
        pytest.skip('%s does not take O_DIRECT' % fstype(b))
    with Mount(b, m, options=[opt]) as mnt:
        assert stats(m)['backing_direct'] == want
        data = exercise(m, 'f')
        mnt.umount()
    assert util.read_file(os.path.join(b, 'f')) == data


def test_auto_on_a_backing_without_o_direct(dirs):
    """ramfs refuses O_DIRECT: auto mounts with buffered backing I/O."""
    root, _, m = dirs
    with ramfs(os.path.join(root, 'ram')) as b:
        assert not takes_o_direct(b)
        with Mount(b, m) as mnt:
            assert stats(m)['backing_direct'] == 0
            data = exercise(m, 'f')
            mnt.umount()
        assert util.read_file(os.path.join(b, 'f')) == data


def test_auto_file_by_file_inside_backing(dirs):
    """A ramfs mounted inside an O_DIRECT BACKING: the mount uses O_DIRECT,
    and the files on the ramfs, new (create) and existing (open), are opened
    buffered instead of failing."""
    _, b, m = dirs
    if not takes_o_direct(b):
        pytest.skip('%s does not take O_DIRECT' % fstype(b))
    with ramfs(os.path.join(b, 'ram')) as ram:
        util.write_file(os.path.join(ram, 'old'), b'x' * 100000)
        with Mount(b, m) as mnt:
            assert stats(m)['backing_direct'] == 1
            on_disk = exercise(m, 'f')
            on_ram = exercise(os.path.join(m, 'ram'), 'new')
            p = os.path.join(m, 'ram', 'old')
            with open(p, 'r+b') as f:
                f.seek(99990)
                f.write(b'y' * 20)
                f.flush()
                os.fsync(f.fileno())
            assert util.read_file(p) == b'x' * 99990 + b'y' * 20
            mnt.umount()
        assert util.read_file(os.path.join(b, 'f')) == on_disk
        assert util.read_file(os.path.join(ram, 'new')) == on_ram
        assert util.read_file(os.path.join(ram, 'old')) == b'x' * 99990 + b'y' * 20
