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

Issue 41: what another process sees at once.  The kernel caches a file's
attributes for attr_timeout (a day by default), and after a write it
refreshes size and times but not the mode: the daemon cleared the bits,
but a stat asking for the mode alone (stat -c %a), the kernel's permission
checks and exec went on seeing them (and running the new contents
setuid).  fallocate and copy_file_range did not clear them at all.  So the
tests below stat right after each call, in this process while the caller's
has ended, with a statx that asks for the mode alone first, then a plain
stat; exec a changed setuid program; and watch from other processes, under
load, that no stat sees a write's data beside the bits it cleared.
"""

import ctypes
import json
import mmap
import os
import shutil
import stat
import subprocess
import tempfile
import time

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
# what another process sees right after the call (issue 41)


def write_start(path):
    fd = os.open(path, os.O_WRONLY)
    try:
        return os.write(fd, b'x')
    finally:
        os.close(fd)


def pwrite_past_end(path):
    fd = os.open(path, os.O_WRONLY)
    try:
        return os.pwrite(fd, b'y', len(DATA) + 100)
    finally:
        os.close(fd)


def truncate_path(path):
    os.truncate(path, 2)


def source_of(path):
    return path + '.src'


def copy_into(path):
    """copy_file_range from a file beside PATH into PATH, past its end."""
    fi = os.open(source_of(path), os.O_RDONLY)
    fo = os.open(path, os.O_WRONLY)
    try:
        return os.copy_file_range(fi, fo, 3, 0, len(DATA) + 10)
    finally:
        os.close(fi)
        os.close(fo)


def fallocate_grow(path):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.posix_fallocate(fd, 0, 8192)
    finally:
        os.close(fd)


def mmap_msync(path):
    """A store through a shared mapping, then msync (which ext4 lets keep
    the bits: a store is no write(2))."""
    fd = os.open(path, os.O_RDWR)
    try:
        with mmap.mmap(fd, len(DATA)) as m:
            m[0:1] = b'Z'
            m.flush()
    finally:
        os.close(fd)


# Every call a local file system clears the bits for (or keeps them, for
# mmap), by its syscall.
MARKED_OPS = {'write': write_start, 'pwrite': pwrite_past_end, 'append': append,
              'open_trunc': open_trunc, 'truncate': truncate_path,
              'ftruncate': ftruncate, 'copy_file_range': copy_into,
              'fallocate': fallocate_grow, 'mmap_msync': mmap_msync}


def seen(path):
    """What another process sees of PATH at once: the mode of a statx
    asking for the mode alone (as stat -c %a does; the kernel's permission
    checks use the same cached mode), then mode and size of a plain stat."""
    mode_only = util.statx(path, util.STATX_MODE)[0]
    st = os.stat(path)
    return (oct(stat.S_IMODE(mode_only)), oct(stat.S_IMODE(st.st_mode)), st.st_size)


def make_pair(path, mode, gid):
    """make_file(), and the copy source beside it (read by the caller)."""
    make_file(path, mode, gid)
    with open(source_of(path), 'wb') as f:
        f.write(b'SRC')
    os.chmod(source_of(path), 0o644)
    os.stat(path)   # the kernel has the bits cached when the call comes


@pytest.mark.parametrize('op', sorted(MARKED_OPS))
@pytest.mark.parametrize('mode', MODES, ids=lambda m: '%o' % m)
def test_stat_right_after(work, ref, tuser, tgroup, mode, op):
    """Right after the call returns, another process sees the mode, and
    the size, that the plain directory shows: for the group the caller is
    not in and for its own (2767 keeps setgid for a member)."""
    os.chmod(work.mnt, 0o777)
    os.chmod(ref, 0o777)
    for gname, gid in group_cases(tgroup):
        name = 'i-%s' % gname
        m, b, r = work.m(name), work.b(name), os.path.join(ref, name)
        make_pair(m, mode, gid)
        make_pair(r, mode, gid)
        got_m = outcome_as(tuser[0], MARKED_OPS[op], m)
        seen_m = seen(m)
        got_r = outcome_as(tuser[0], MARKED_OPS[op], r)
        seen_r = seen(r)
        assert (got_m, seen_m) == (got_r, seen_r), (gname, 'right after the call')
        assert state(m) == state(r), (gname, 'through the mount')
        util.sync_path(m)
        assert state(b) == state(r), (gname, 'in the backing store')


@pytest.mark.parametrize('mode', MODES, ids=lambda m: '%o' % m)
def test_cap_fsetid_keeps_bits(work, ref, tuser, tgroup, mode):
    """A caller with CAP_FSETID (and no other capability) keeps the bits
    through every call, as on the plain directory: the kernel marks none of
    its requests and sends no SETATTR asking to remove them."""
    os.chmod(work.mnt, 0o777)
    os.chmod(ref, 0o777)
    for op in sorted(MARKED_OPS):
        name = 'cap-%s' % op
        m, r = work.m(name), os.path.join(ref, name)
        make_pair(m, mode, 0)
        make_pair(r, mode, 0)
        got_m = util.outcome(util.run_as, tuser[0], MARKED_OPS[op], m,
                             caps=(util.CAP_FSETID,))
        seen_m = seen(m)
        got_r = util.outcome(util.run_as, tuser[0], MARKED_OPS[op], r,
                             caps=(util.CAP_FSETID,))
        assert (got_m, seen_m) == (got_r, seen(r)), op
        assert seen_m[0] == oct(mode), op


def run_prog(argv):
    return subprocess.run(argv, stdout=subprocess.PIPE, check=True).stdout.decode().strip()


def append_newline(path):
    with open(path, 'ab') as f:
        f.write(b'\n')


@pytest.mark.parametrize('cache', sorted(CACHES))
@pytest.mark.parametrize('bit', ['setuid', 'setgid'])
def test_exec_after_write_drops_bits(dirs, tuser, cache, bit):
    """The risk itself: root's setuid (setgid) copy of id(1) on a mount
    without nosuid; a user who may write it appends a byte, then runs it.
    It must run as that user, not as root, as on ext4."""
    _, b, m = dirs
    mode, flag, want = {'setuid': (0o4777, '-u', tuser[1]),
                        'setgid': (0o2777, '-g', tuser[2])}[bit]
    with Mount(b, m, options=['allow_other', 'suid'] + CACHES[cache]):
        os.chmod(m, 0o777)
        prog = os.path.join(m, 'id')
        shutil.copyfile('/usr/bin/id', prog)
        os.chown(prog, 0, 0)
        os.chmod(prog, mode)
        assert util.run_as(tuser[0], run_prog, [prog, flag]) == '0', \
            'the mount does not honour %s: the test shows nothing' % bit
        util.run_as(tuser[0], append_newline, prog)
        assert util.run_as(tuser[0], run_prog, [prog, flag]) == str(want)
        assert stat.S_IMODE(os.stat(prog).st_mode) == 0o777


# --------------------------------------------------------------------------
# other processes between the write and its return, under load

STOP = -1
RACE_ITERATIONS = 200


def phase_get(shm):
    return ctypes.c_int64.from_buffer(shm).value   # one aligned 8-byte load


def phase_set(shm, value):
    ctypes.c_int64.from_buffer(shm).value = value


def seen_count(shm, k):
    """Observer K's count of stats made within one phase (its own slot
    after the phase's)."""
    return ctypes.c_int64.from_buffer(shm, 8 * (k + 1)).value


def seen_add(shm, k):
    slot = ctypes.c_int64.from_buffer(shm, 8 * (k + 1))
    slot.value += 1


def fork_child(fn, *args):
    """Run fn(*args) in a forked child; its exit status is 0 when it returned."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            fn(*args)
            status = 0
        finally:
            os._exit(status)
    return pid


def race_writer(user, path, go, ack):
    """As USER: on each byte from GO, append one byte to PATH, then answer
    on ACK; 'q' ends."""
    util._drop_to(user)
    while os.read(go, 1) == b'w':
        append(path)
        os.write(ack, b'd')


# How an observer stats: as `stat -c '%a %s'` does (mode and size only), a
# plain stat, and one that always asks the daemon (AT_STATX_FORCE_SYNC).
OBSERVERS = {
    'mode+size': lambda p: util.statx(p, util.STATX_MODE | util.STATX_SIZE),
    'stat': lambda p: (lambda st: (st.st_mode, st.st_size))(os.stat(p)),
    'force-sync': lambda p: util.statx(p, util.STATX_MODE | util.STATX_SIZE,
                                       util.AT_STATX_FORCE_SYNC),
}
# The observers of each round.  Apart: a forced stat refreshes the
# kernel's cache for everyone, which would hide a stale one from the others.
ROUNDS = {'cached': ['mode+size', 'stat'], 'daemon': ['force-sync', 'force-sync']}


def race_observer(k, how, path, shm, base, out, in_flight):
    """Stat PATH until STOP; write to OUT the count of stats made within
    one phase and the bad ones (the count also in observer K's slot of
    SHM, for the driver to wait on).  Phase 3i: the bits are being set again
    (anything goes).  Phase 3i + 1: they are set, with the file at BASE + i
    bytes, and write i may be in flight: a stat showing more bytes must not
    show a bit (checked only when IN_FLIGHT).  Phase 3i + 2: write i
    returned: no stat may show a bit."""
    bad, n = [], 0
    while True:
        p1 = phase_get(shm)
        if p1 == STOP:
            break
        mode, size = OBSERVERS[how](path)
        if phase_get(shm) != p1 or p1 % 3 == 0:
            continue
        n += 1
        seen_add(shm, k)
        bits = mode & (stat.S_ISUID | stat.S_ISGID)
        if bits and (p1 % 3 == 2 or (in_flight and size > base + p1 // 3)):
            bad.append((p1, oct(stat.S_IMODE(mode)), size))
    os.write(out, (json.dumps([how, n, bad[:5], len(bad)]) + '\n').encode())


def race_load(path, shm):
    """Writes of 64 KiB to another file of the mount, synced now and then."""
    buf = os.urandom(64 << 10)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    i = 0
    while phase_get(shm) != STOP:
        os.pwrite(fd, buf, (i % 256) * len(buf))
        if i % 64 == 63:
            os.fsync(fd)
        i += 1
    os.close(fd)


@pytest.mark.timeout(600)
@pytest.mark.parametrize('observers', sorted(ROUNDS))
def test_no_stat_sees_data_with_old_bits(work, tuser, ffs_options, observers):
    """A user appends to a 6777 file of root's (group root: both bits go),
    RACE_ITERATIONS times, the bits set again before each; two other
    processes stat it all along, each its own way, while a third writes
    elsewhere on the mount.  None may ever see a write's byte beside a bit
    it cleared, before or after the write returned.

    In cache=writeback only the second half holds (no bit once the write
    returned), for both rounds: there the kernel fills a stat from the
    GETATTR reply but for the size, times and blocks, which it takes from
    its own inode when the reply is processed (fuse_fillattr()), so a reply
    the daemon made before it cleared the bits, processed after the write
    grew the file, shows both; nothing the daemon does orders the two.  A
    "cached" stat is no exception: the daemon's invalidation before its
    WRITE reply makes the next one ask (CI saw one such stat in 200
    rounds, under ASan).  A reply made before the write returned never
    reaches the kernel's cache after it (the invalidation bumps the
    inode's attr_version): a stat begun after the write sees no bit."""
    in_flight = 'kernel_cache' not in ffs_options
    os.chmod(work.mnt, 0o777)
    path = work.m('race')
    make_file(path, 0o6777, 0)
    base = len(DATA)
    shm = mmap.mmap(-1, 8 * (1 + len(ROUNDS[observers])))
    phase_set(shm, 0)
    go_r, go_w = os.pipe()
    ack_r, ack_w = os.pipe()
    out_r, out_w = os.pipe()
    pids = []
    try:
        pids.append(fork_child(race_writer, tuser[0], path, go_r, ack_w))
        pids.append(fork_child(race_load, work.m('load'), shm))
        for k, how in enumerate(ROUNDS[observers]):
            pids.append(fork_child(race_observer, k, how, path, shm, base, out_w, in_flight))
        for i in range(RACE_ITERATIONS):
            phase_set(shm, 3 * i)
            os.chmod(path, 0o6777)
            phase_set(shm, 3 * i + 1)
            os.write(go_w, b'w')
            assert os.read(ack_r, 1) == b'd'
            phase_set(shm, 3 * i + 2)
        # The last phase (every write returned) stays until each observer
        # has made a stat within a phase: a loaded machine may have kept
        # one from ever doing so during the writes, and a round it never
        # watched would prove nothing.
        while any(seen_count(shm, k) == 0 for k in range(len(ROUNDS[observers]))):
            time.sleep(0.01)
        assert os.stat(path).st_size == base + RACE_ITERATIONS
    finally:
        phase_set(shm, STOP)
        os.write(go_w, b'q')
        status = [os.waitpid(pid, 0)[1] for pid in pids]
    os.close(out_w)
    with os.fdopen(out_r, 'rb') as f:
        reports = f.read().decode()
    for fd in (go_r, go_w, ack_r, ack_w):
        os.close(fd)
    assert status == [0] * len(pids), reports
    results = [json.loads(line) for line in reports.splitlines()]
    assert sorted(r[0] for r in results) == sorted(ROUNDS[observers]), reports
    assert all(r[1] > 0 for r in results), reports
    assert all(r[3] == 0 for r in results), reports


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
