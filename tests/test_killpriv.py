"""setuid/setgid cleared by writes, as on ext4 (issue 14); and close() of
every writable control file.

A caller without CAP_FSETID who may write a setuid or setgid file may
append to it, ftruncate it and open it with O_TRUNC: each succeeds and
clears setuid, and setgid when the file is group executable or the caller
is not in its group.  foliofs (root daemon, -o allow_other) is compared
with a plain directory on the backing's own filesystem (ext4 here) for the
same operations by the unprivileged test user: outcome or errno, resulting
mode, size and content, seen through the mount and in the backing store.
This runs in each cache mode (direct I/O, the default; writethrough; and
kernel_cache, which is writeback), on a directory mount and on a one-file
mount.

Before the fix, the kernel asked for the change itself with a SETATTR mode
change sent as the writer, which the daemon refused to a non-owner: EPERM
for ftruncate (direct I/O) and for writes (kernel_cache), the bits kept
for writes (direct I/O) and O_TRUNC opens.
"""

import os
import shutil
import stat
import tempfile

import pytest

import util
from util import Mount, outcome_as

CACHES = {'direct': [], 'kernel_cache': ['kernel_cache'],
          'writethrough': ['cache=writethrough']}

# File modes of the issue; 2767 is setgid without group execute, which
# the kernel clears only for a caller outside the file's group.
MODES = (0o4777, 0o2777, 0o6777, 0o2767)

DATA = b'data\n'


@pytest.fixture(scope='module', params=sorted(CACHES))
def ffs_options(request):
    return CACHES[request.param]


def append(path):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        return os.write(fd, b'x')
    finally:
        os.close(fd)


def ftruncate(path):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, 2)
    finally:
        os.close(fd)


def open_trunc(path):
    os.close(os.open(path, os.O_WRONLY | os.O_TRUNC))


OPS = {'append': append, 'ftruncate': ftruncate, 'open_trunc': open_trunc}


def state(path):
    """(mode bits, size, content) of PATH, read as root."""
    st = os.stat(path)
    with open(path, 'rb') as f:
        return (oct(stat.S_IMODE(st.st_mode)), st.st_size, f.read())


def make_file(path, mode, gid):
    """DATA in PATH, owned by root and group GID, with MODE (as root)."""
    with open(path, 'wb') as f:
        f.write(DATA)
    os.chown(path, 0, gid)
    os.chmod(path, mode)
    assert stat.S_IMODE(os.stat(path).st_mode) == mode


def group_cases(tgroup):
    """(name, gid): a group the caller is not in, and one it has as a
    supplementary group (which keeps 2767's setgid)."""
    return [('other', 0), ('member', tgroup)]


@pytest.mark.parametrize('op', sorted(OPS))
@pytest.mark.parametrize('mode', MODES, ids=lambda m: '%o' % m)
def test_nonowner_write_clears_suid_sgid(work, ref, tuser, tgroup, mode, op):
    """The issue's table: every cell as on the plain directory, for a file
    whose group the caller is not in and for one it is in."""
    os.chmod(work.mnt, 0o777)
    os.chmod(ref, 0o777)
    for gname, gid in group_cases(tgroup):
        name = 'f-%s' % gname
        m, b, r = work.m(name), work.b(name), os.path.join(ref, name)
        make_file(m, mode, gid)
        make_file(r, mode, gid)
        got_m = outcome_as(tuser[0], OPS[op], m)
        got_r = outcome_as(tuser[0], OPS[op], r)
        want = (got_r, state(r))
        assert (got_m, state(m)) == want, (gname, 'through the mount')
        util.sync_path(m)
        assert (got_m, state(b)) == want, (gname, 'in the backing store')


@pytest.mark.parametrize('mode', MODES, ids=lambda m: '%o' % m)
def test_chmod_after_marked_write(work, ref, tuser, tgroup, mode):
    """A marked write of a file with neither bit lets the daemon skip the
    fstat of the next ones (killpriv.c); a chmod that sets a bit afterwards
    must end that: the next write clears as on the plain directory."""
    os.chmod(work.mnt, 0o777)
    os.chmod(ref, 0o777)
    for gname, gid in group_cases(tgroup):
        name = 'c-%s' % gname
        m, b, r = work.m(name), work.b(name), os.path.join(ref, name)
        got = {}
        for path in (m, r):
            make_file(path, 0o666, gid)
            first = outcome_as(tuser[0], append, path)    # marked; neither bit
            os.chmod(path, mode)
            got[path] = (first, outcome_as(tuser[0], append, path))
        want = (got[r], state(r))
        assert (got[m], state(m)) == want, (gname, 'through the mount')
        util.sync_path(m)
        assert (got[m], state(b)) == want, (gname, 'in the backing store')


@pytest.mark.parametrize('mode', MODES, ids=lambda m: '%o' % m)
def test_root_write_keeps_suid_sgid(work, ref, mode):
    """Root has CAP_FSETID: its writes and truncates keep the bits, as on
    the plain directory (the kernel marks no request of root's)."""
    for op in sorted(OPS):
        m, r = work.m(op), os.path.join(ref, op)
        make_file(m, mode, 0)
        make_file(r, mode, 0)
        assert (outcome_as(None, OPS[op], m), state(m)) == \
            (outcome_as(None, OPS[op], r), state(r)), op


@pytest.mark.parametrize('mode', MODES, ids=lambda m: '%o' % m)
def test_chown_clears_as_ext4(work, ref, tuser, tgroup, mode):
    """chown and chgrp still clear what they clear on ext4.  With
    KILLPRIV_V2 the kernel marks every chown of a file, root's too, but
    sends no mode change; the backing chown, made as the caller, clears
    what it should, and the daemon must not apply the write rule on top
    (root keeps 2767's setgid when giving the file a group it is not in)."""
    cases = [('root-chown', None, (tuser[1], -1), 0),
             ('root-chgrp', None, (-1, tgroup), 0),
             ('owner-chgrp', tuser[0], (-1, tgroup), tuser[1])]
    for name, user, ids, owner in cases:
        m, r = work.m(name), os.path.join(ref, name)
        for p in (m, r):
            make_file(p, mode, 0)
            os.chown(p, owner, tuser[2] if owner else 0)
            os.chmod(p, mode)
        got_m = outcome_as(user, os.chown, m, *ids)
        got_r = outcome_as(user, os.chown, r, *ids)
        assert (got_m, state(m), os.stat(m).st_gid) == \
            (got_r, state(r), os.stat(r).st_gid), name


# --------------------------------------------------------------------------
# one-file mounts: the mount point is the setuid file


@pytest.fixture(scope='module')
def one_file(ffs_options):
    """A one-file mount of BACKING/img on MNT (root daemon, allow_other)
    and a plain file REF beside it: (mount point, backing file, ref)."""
    util.test_user()
    root = tempfile.mkdtemp(prefix='foliofs-kp-')
    os.chmod(root, 0o755)
    img, mnt, ref = (os.path.join(root, n) for n in ('img', 'mnt', 'ref'))
    for p in (img, mnt, ref):
        with open(p, 'wb') as f:
            f.write(DATA)
    m = Mount(img, mnt, options=['allow_other'] + list(ffs_options))
    try:
        with m:
            yield mnt, img, ref
    finally:
        m.cleanup()
        if not util.is_fuse_mounted(mnt):
            shutil.rmtree(root, ignore_errors=True)


def reset_one_file(path, mode):
    """DATA and MODE in PATH, owned by root:root (through the mount for
    the mount point: root's chmod and write go through the daemon)."""
    with open(path, 'wb') as f:
        f.write(DATA)
    os.chown(path, 0, 0)
    os.chmod(path, mode)


@pytest.mark.parametrize('op', sorted(OPS))
@pytest.mark.parametrize('mode', MODES, ids=lambda m: '%o' % m)
def test_one_file_mount(one_file, tuser, mode, op):
    mnt, img, ref = one_file
    reset_one_file(mnt, mode)
    reset_one_file(ref, mode)
    got_m = outcome_as(tuser[0], OPS[op], mnt)
    got_r = outcome_as(tuser[0], OPS[op], ref)
    want = (got_r, state(ref))
    assert (got_m, state(mnt)) == want, 'through the mount'
    util.sync_path(mnt)
    assert (got_m, state(img)) == want, 'in the backing file'


# --------------------------------------------------------------------------
# control files


# Valid values for the byte tunables, written before the ratios: setting
# one of a ratio/bytes pair zeroes the other, and writing the ratios'
# values back afterwards restores the mount's settings.
BYTES_VALUES = {'dirty_bytes': 16 << 20, 'dirty_background_bytes': 4 << 20,
                'dirty_pinned_bytes': 8 << 20}


def writable_ctl_files(mnt):
    """(path, value) for every writable control file, in a workable order."""
    ctl = os.path.join(mnt, '.foliofs')
    tun = os.path.join(ctl, 'tunables')
    names = sorted(os.listdir(tun), key=lambda n: (n not in BYTES_VALUES, n))
    files = [(os.path.join(ctl, 'fault'), b'off\n'), (os.path.join(ctl, 'sync'), b'1\n')]
    for n in names:
        p = os.path.join(tun, n)
        if n in BYTES_VALUES:
            files.append((p, b'%d\n' % BYTES_VALUES[n]))
        else:
            with open(p, 'rb') as f:
                files.append((p, f.read()))
    for p, _ in files:
        assert os.stat(p).st_mode & 0o222, p
    return files


def write_close(path, flags, data):
    """open, one write, close; close's error (if any) is raised."""
    fd = os.open(path, flags)
    try:
        n = os.write(fd, data)
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return n


@pytest.mark.parametrize('flags', [os.O_WRONLY | os.O_TRUNC, os.O_WRONLY, os.O_RDWR],
                         ids=['trunc', 'wronly', 'rdwr'])
def test_ctl_close_returns_0(ffs, tuser, flags):
    """close() after a write to every writable control file returns 0, as
    root; and for sync, which anyone may write, as another user too.
    (sync is write-only: it is opened O_WRONLY where the case says O_RDWR.)"""
    for p, data in writable_ctl_files(ffs.mnt):
        f = flags
        if os.path.basename(p) == 'sync':
            f = (flags & ~os.O_ACCMODE) | os.O_WRONLY
        assert write_close(p, f, data) == len(data), p
    sync = os.path.join(ffs.mnt, '.foliofs', 'sync')
    f = (flags & ~os.O_ACCMODE) | os.O_WRONLY
    assert outcome_as(tuser[0], write_close, sync, f, b'1\n') == ('ok', 2)


def create_trunc(path, mode):
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode))


@pytest.mark.parametrize('mode', (0o4755, 0o6755), ids=lambda m: '%o' % m)
def test_create_trunc_new_file(work, ref, tuser, tgroup, mode):
    """open(O_CREAT | O_TRUNC) making a new file truncates nothing, so the
    mode asked for stays (the kernel still marks the CREATE: it cannot know
    the file is new).  The directory's group is one the caller is in, so
    that setgid is not dropped at create either."""
    for d in (work.mnt, ref):
        os.chown(d, 0, tgroup)
        os.chmod(d, 0o777)
    m, r = work.m('new'), os.path.join(ref, 'new')
    old_umask = os.umask(0)
    try:
        got_m = outcome_as(tuser[0], create_trunc, m, mode)
        got_r = outcome_as(tuser[0], create_trunc, r, mode)
    finally:
        os.umask(old_umask)
    assert (got_m, state(m)) == (got_r, state(r))
    util.sync_path(m)
    assert (got_m, state(work.b('new'))) == (got_r, state(r))
