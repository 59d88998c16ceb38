"""The control directory MOUNTPOINT/.foliofs beyond stats and fault:
tunables/NAME, files (the writeback queue), sync, and the foliofsctl tool
that drives them; and the stats log (-o stats_log=FILE).

Every test mounts its own foliofs (as root, -o allow_other), so tunables
changed by one test do not leak into another.  Tests that must see dirty
data stay dirty mount with flushers=0: nothing but the test writes back.

foliofsctl is $FOLIOFSCTL, by default tools/foliofsctl in the build directory
that holds $FOLIOFS (the layout of a meson build directory).
"""

import errno
import json
import os
import re
import shutil
import stat
import subprocess

import pytest

import util
from util import FOLIOFS, FOLIOFSCTL, Mount, ctl_path, foliofsctl, poll, run_as, stats

KiB = 1 << 10
MiB = 1 << 20

# The tunables writeback.h promises (wb_tunable_name()).
TUNABLES = ('dirty_ratio', 'dirty_bytes', 'dirty_background_ratio',
            'dirty_background_bytes', 'dirty_pinned_ratio', 'dirty_pinned_bytes',
            'dirty_expire_ms', 'writeback_interval_ms', 'dirty_account', 'throttle')

# Stats that .foliofs/stats has from the FUSE layer, not from writeback
# (so the stats log, which writeback writes, does not have them).
FUSE_STATS = ('inodes', 'kept_inodes', 'fds', 'fd_budget', 'fds_idle_closed',
              'fds_reopened', 'fds_refused', 'fd_cache_max', 'path_fds', 'inode_refinds',
              'inode_stale', 'max_inodes', 'inodes_pruned', 'fuse_uring_requests',
              'fuse_uring_threads')


def tunable(mnt, name):
    return ctl_path(mnt, 'tunables', name)


def read_tunable(mnt, name):
    with open(tunable(mnt, name)) as f:
        return f.read()


def write_tunable(mnt, name, value):
    """One write of VALUE and a newline, as `echo VALUE > FILE` does
    (O_TRUNC included); close() must succeed too."""
    with open(tunable(mnt, name), 'w') as f:
        f.write(value + '\n')


@pytest.fixture
def mount(dirs, request):
    """A fresh mount; more -o options by indirect parametrization
    (NO_FLUSHERS below)."""
    _, b, mnt = dirs
    util.test_user()
    with Mount(b, mnt, options=['allow_other'] + getattr(request, 'param', [])) as mt:
        mt.backing = b
        yield mt


# A mount where only the test writes dirty data back.
NO_FLUSHERS = pytest.mark.parametrize('mount', [['flushers=0']], indirect=True,
                                      ids=['flushers0'])


def one_line(text):
    lines = text.splitlines()
    assert len(lines) == 1, 'expected one line, got %r' % text
    return lines[0]


# --------------------------------------------------------------------------
# the directory

def test_control_directory_hidden_from_root_listing(mount):
    """.foliofs is found by name but listed neither by readdir of the root
    nor under another name; its own listing has the new entries."""
    assert '.foliofs' not in os.listdir(mount.mnt)
    assert os.path.isdir(ctl_path(mount.mnt))
    assert set(os.listdir(ctl_path(mount.mnt))) == {
        'stats', 'fault', 'files', 'sync', 'trace', 'folios', 'evict', 'errors', 'policies',
        'load', 'tunables'}
    assert os.path.isdir(ctl_path(mount.mnt, 'tunables'))


def test_tunables_listed_and_read(mount):
    """tunables/ lists one file per tunable; each reads as its value and a
    newline, and a name that is not a tunable does not exist."""
    names = os.listdir(ctl_path(mount.mnt, 'tunables'))
    assert len(names) == len(set(names))
    assert set(TUNABLES) <= set(names), names
    for name in names:
        val = read_tunable(mount.mnt, name)
        assert val.endswith('\n') and val.count('\n') == 1 and val.strip(), (name, val)
    assert read_tunable(mount.mnt, 'dirty_ratio') == '20\n'
    assert not os.path.exists(tunable(mount.mnt, 'no_such_tunable'))
    with pytest.raises(PermissionError):   # EPERM: nothing is made in .foliofs
        open(tunable(mount.mnt, 'no_such_tunable'), 'w').close()
    st = os.stat(tunable(mount.mnt, 'dirty_ratio'))
    assert (st.st_mode & 0o777, st.st_uid) == (0o644, os.geteuid())


@pytest.mark.parametrize('cache', ['direct', 'writethrough', 'kernel_cache'])
def test_tunable_write(dirs, cache):
    """A write sets the value and close() returns 0.  Under kernel_cache
    the kernel updates the file's times at close; that setattr used to
    be refused with EPERM and made close() of a written control file
    (tunables, fault) fail."""
    _, b, mnt = dirs
    opts = ['allow_other'] + {'direct': [], 'writethrough': ['cache=writethrough'],
                              'kernel_cache': ['kernel_cache']}[cache]
    with Mount(b, mnt, options=opts):
        write_tunable(mnt, 'dirty_ratio', '30')
        assert read_tunable(mnt, 'dirty_ratio') == '30\n'
        write_tunable(mnt, 'dirty_expire_ms', '12345')
        assert read_tunable(mnt, 'dirty_expire_ms') == '12345\n'
        with open(ctl_path(mnt, 'fault'), 'w') as f:
            f.write('off\n')


def test_dirty_account_switch_reprices(dirs):
    """Switching dirty_account on a live mount reprices every held folio:
    64 folios of 2 MiB with one 8 KiB write each are charged 128 pages per
    page, 32768 per folio, and back again; the exact dirty bytes and
    nr_dirtied do not move, and a final sync discharges all of it."""
    _, b, mnt = dirs
    opts = ['flushers=0', 'folio_size=2M', 'folio_policy=fixed', 'cache_size=512M',
            'dirty_account=page']
    with Mount(b, mnt, options=opts):
        fd = os.open(os.path.join(mnt, 'f'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            for i in range(64):
                assert os.pwrite(fd, b'x' * 8192, i * 2 * 1024 * 1024 + 4096) == 8192
        finally:
            os.close(fd)
        s0 = stats(mnt)
        assert s0['nr_dirty'] == 128 and s0['dirty_bytes_exact'] == 64 * 8192
        for account, pages in [('folio', 64 * 512), ('block', 128), ('folio', 64 * 512),
                               ('page', 128)]:
            write_tunable(mnt, 'dirty_account', account)
            st = stats(mnt)
            assert st['nr_dirty'] == pages, (account, st['nr_dirty'])
            assert st['dirty_bytes_exact'] == s0['dirty_bytes_exact']
            assert st['nr_dirtied'] == s0['nr_dirtied']
        with open(ctl_path(mnt, 'sync'), 'w') as f:
            f.write('1\n')
        st = stats(mnt)
        assert st['nr_dirty'] == 0 and st['dirty_bytes_exact'] == 0


def test_tunable_bad_value(mount):
    """A bad value fails the write with EINVAL and changes nothing; a read
    through the same open file gives the daemon's reason."""
    mnt = mount.mnt
    before = {n: read_tunable(mnt, n) for n in TUNABLES}
    for name, bad in [('dirty_ratio', 'abc'), ('dirty_ratio', '101'),
                      ('dirty_ratio', '-1'), ('dirty_bytes', '12x'),
                      ('throttle', 'no_such_policy'), ('dirty_account', 'no_such_policy'),
                      ('dirty_expire_ms', '')]:
        fd = os.open(tunable(mnt, name), os.O_RDWR)
        try:
            with pytest.raises(OSError) as e:
                os.write(fd, bad.encode() + b'\n')
            assert e.value.errno == errno.EINVAL, (name, bad)
            reason = os.pread(fd, 4096, 0).decode()
            assert name in reason and reason.endswith('\n'), (name, bad, reason)
        finally:
            os.close(fd)
    assert {n: read_tunable(mnt, n) for n in TUNABLES} == before


def test_refused_write_reason_in_errors_file(mount):
    """A shell's `echo 150 > tunables/dirty_ratio` says only "Invalid
    argument": .foliofs/errors then has the daemon's reason, newest last,
    with the time and the file; the daemon (in the foreground) printed the
    same reason on stderr.  errors is read-only, mounting user only."""
    mnt = mount.mnt
    r = subprocess.run(['sh', '-c', 'echo 150 > "$1"', 'sh', tunable(mnt, 'dirty_ratio')],
                       capture_output=True, text=True)
    assert r.returncode != 0, r      # bash: "Invalid argument"; dash: "I/O error"
    r = subprocess.run(['sh', '-c', 'echo bogus > "$1"', 'sh', ctl_path(mnt, 'fault')],
                       capture_output=True, text=True)
    assert r.returncode != 0
    with open(ctl_path(mnt, 'errors')) as f:
        lines = f.read().splitlines()
    assert len(lines) >= 2, lines
    ratio, fault = lines[-2], lines[-1]
    assert re.match(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \.foliofs/tunables/dirty_ratio: '
                    r'dirty_ratio.*150', ratio), ratio
    assert ' .foliofs/fault: ' in fault and 'bogus' in fault, fault
    reason = ratio.split(': ', 1)[1]
    assert reason in mount.output(), mount.output()
    assert stat.S_IMODE(os.stat(ctl_path(mnt, 'errors')).st_mode) == 0o400
    with pytest.raises(PermissionError):
        os.open(ctl_path(mnt, 'errors'), os.O_WRONLY)
    with pytest.raises(PermissionError):
        run_as('nobody', os.open, ctl_path(mnt, 'errors'), os.O_RDONLY)


def test_refused_writes_keep_the_last_32(mount):
    """errors keeps the last 32 refusals, oldest first."""
    mnt = mount.mnt
    for i in range(40):
        fd = os.open(tunable(mnt, 'dirty_bytes'), os.O_WRONLY)
        try:
            with pytest.raises(OSError):
                os.write(fd, b'%dx\n' % i)
        finally:
            os.close(fd)
    with open(ctl_path(mnt, 'errors')) as f:
        lines = f.read().splitlines()
    assert len(lines) == 32, lines
    assert '8x' in lines[0] and '39x' in lines[-1], (lines[0], lines[-1])


def test_tunable_other_user_eacces(mount):
    """Only the mounting user (here root) may write a tunable: another user
    gets EACCES and the value stays; reading is open to all."""
    mnt = mount.mnt
    before = read_tunable(mnt, 'dirty_ratio')

    def write_as_other():
        fd = os.open(tunable(mnt, 'dirty_ratio'), os.O_WRONLY)
        os.close(fd)

    with pytest.raises(PermissionError) as e:
        run_as('nobody', write_as_other)
    assert e.value.errno == errno.EACCES
    assert run_as('nobody', read_tunable, mnt, 'dirty_ratio') == before
    assert read_tunable(mnt, 'dirty_ratio') == before
    write_tunable(mnt, 'dirty_ratio', '25')   # root, the mounting user, may
    assert read_tunable(mnt, 'dirty_ratio') == '25\n'


def test_tunable_mounting_user(dirs, tuser):
    """A mount by an unprivileged user: that user may set tunables.  (Root
    and others reach such a mount only with allow_other, which needs
    user_allow_other in /etc/fuse.conf; the root-mounted tests above show
    that the mode check lets the owner write and refuses others.)"""
    root, b, mnt = dirs
    name, uid, gid = tuser
    os.chown(b, uid, gid)
    os.chown(mnt, uid, gid)
    with Mount(b, mnt, user=name):
        run_as(name, write_tunable, mnt, 'dirty_ratio', '31')
        assert run_as(name, read_tunable, mnt, 'dirty_ratio') == '31\n'
        st = run_as(name, os.stat, tunable(mnt, 'dirty_ratio'))
        assert (st.st_uid, st.st_mode & 0o777) == (uid, 0o644)


# --------------------------------------------------------------------------
# files and sync

def queue(mnt):
    """The writeback queue: {path: (dirty, writeback, age_ms, errors)}."""
    out = {}
    with open(ctl_path(mnt, 'files')) as f:
        for line in f:
            d, w, age, errs, path = line.rstrip('\n').split(' ', 4)
            out[path] = (int(d), int(w), int(age), errs)
    return out


@NO_FLUSHERS
def test_files_lists_dirty_file(mount):
    """A file with dirty data is listed with its dirty bytes (whole blocks)
    until fsync writes it back."""
    mnt, back = mount.mnt, mount.backing
    assert queue(mnt) == {}
    with open(os.path.join(mnt, 'f'), 'wb') as f:
        f.write(b'x' * (100 * KiB + 1))
        f.flush()
        q = queue(mnt)
        path = os.path.realpath(os.path.join(back, 'f'))
        assert list(q) == [path], q
        dirty, wb, age, errs = q[path]
        assert dirty == 104 * KiB and wb == 0 and age >= 0 and errs == '0', q
        os.fsync(f.fileno())
        assert queue(mnt) == {}


@NO_FLUSHERS
def test_files_readable_by_mounting_user_only(mount):
    with pytest.raises(PermissionError):
        run_as('nobody', util.read_file, ctl_path(mount.mnt, 'files'))


@NO_FLUSHERS
def test_sync_writes_everything_back(mount):
    """A write of .foliofs/sync returns once every file is written back:
    nothing dirty is left and the backing files hold the data."""
    mnt, back = mount.mnt, mount.backing
    data = {'a': os.urandom(300 * KiB), 'b': os.urandom(5 * KiB + 7)}
    files = []
    for name, d in data.items():
        f = open(os.path.join(mnt, name), 'wb')
        f.write(d)
        f.flush()
        files.append(f)
    try:
        assert stats(mnt)['dirty_bytes_exact'] > 0
        assert len(queue(mnt)) == 2
        fd = os.open(ctl_path(mnt, 'sync'), os.O_WRONLY)
        try:
            assert os.write(fd, b'1\n') == 2
        finally:
            os.close(fd)
        assert stats(mnt)['dirty_bytes_exact'] == 0
        assert queue(mnt) == {}
        for name, d in data.items():
            assert util.read_file(os.path.join(back, name)) == d
    finally:
        for f in files:
            f.close()


# --------------------------------------------------------------------------
# foliofsctl

STAT_COLUMNS = 13


def test_foliofsctl_stat(mount):
    r = foliofsctl('stat', mount.mnt, '-c', 2, '-i', 0.2)
    assert r.returncode == 0 and not r.stderr, r
    lines = r.stdout.splitlines()
    assert len(lines) == 3, r.stdout
    assert lines[0].split()[:2] == ['dirty', 'exact']
    for line in lines[1:]:
        cols = line.split()
        assert len(cols) == STAT_COLUMNS, line
        # Every stat the table uses exists in this daemon: no "-".
        assert '-' not in cols, line


def test_foliofsctl_get_set(mount):
    mnt = mount.mnt
    r = foliofsctl('get', mnt)
    assert r.returncode == 0 and not r.stderr, r
    got = dict(line.split(' ', 1) for line in r.stdout.splitlines())
    assert set(TUNABLES) <= set(got)
    assert got['dirty_ratio'] == '20'
    r = foliofsctl('set', mnt, 'dirty_ratio=35', 'dirty_expire_ms=9000')
    assert r.returncode == 0 and not r.stderr and not r.stdout, r
    r = foliofsctl('get', mnt, 'dirty_ratio', 'dirty_expire_ms')
    assert r.stdout == 'dirty_ratio 35\ndirty_expire_ms 9000\n', r


def test_foliofsctl_bad_name_or_value(mount):
    """Exit 2 with one line naming the problem; a set stops at the first
    bad one and the ones before it stay set."""
    mnt = mount.mnt
    r = foliofsctl('get', mnt, 'no_such_tunable')
    assert r.returncode == 2 and 'no_such_tunable' in one_line(r.stderr), r
    r = foliofsctl('set', mnt, 'no_such_tunable=1')
    assert r.returncode == 2 and 'no_such_tunable' in one_line(r.stderr), r
    r = foliofsctl('set', mnt, 'dirty_expire_ms=7000', 'dirty_ratio=abc', 'dirty_bytes=1')
    assert r.returncode == 2 and 'dirty_ratio' in one_line(r.stderr), r
    assert read_tunable(mnt, 'dirty_expire_ms') == '7000\n'
    assert read_tunable(mnt, 'dirty_ratio') == '20\n'
    assert read_tunable(mnt, 'dirty_bytes') == '0\n'
    r = foliofsctl('set', mnt, 'dirty_ratio')
    assert r.returncode == 2 and one_line(r.stderr), r
    r = foliofsctl('stat', mnt, '-i', 'x')
    assert r.returncode == 2 and one_line(r.stderr), r


@pytest.mark.parametrize('opts, param', [
    ('dirty_account=block', 'account.share=5'),          # the case
    ('dirty_account=pinned', 'account.sharp=5'),
    ('folio_policy=kernel', 'size.order=3'),
    ('throttle=strictlimit', 'throttle.min_dirt=8'),
    ('throttle=bdp', 'throttle.min_dirty=8'),
])
def test_foliofsctl_set_unknown_parameter_as_the_mount_option(dirs, opts, param):
    """A parameter the policy in force does not have: foliofsctl set says
    what -o says of it at mount (which policy, the parameters it has),
    exit 2, and nothing changes; a name that is no parameter's stays "no
    such tunable"."""
    root, b, mnt = dirs
    r = subprocess.run([FOLIOFS, '-f', '-o', opts + ',' + param, b, mnt],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and not util.is_fuse_mounted(mnt), r
    want = one_line(r.stderr)
    assert want.startswith('foliofs: %s: not a parameter of ' % param.split('=')[0]), want
    with Mount(b, mnt, options=[opts]):
        before = stats(mnt)
        r = foliofsctl('set', mnt, param)
        assert r.returncode == 2 and not r.stdout, r
        assert r.stderr == 'foliofsctl: ' + want[len('foliofs: '):] + '\n', (r.stderr, want)
        r = foliofsctl('get', mnt, param.split('=')[0])
        assert r.returncode == 2 and r.stderr == 'foliofsctl: ' + want[len('foliofs: '):] + '\n'
        r = foliofsctl('set', mnt, 'nosuch=1')
        assert r.returncode == 2 and r.stderr == 'foliofsctl: nosuch: no such tunable\n', r
        after = stats(mnt)
        assert {k: v for k, v in after.items() if '.' in k or k in util.NAMED_STATS} == \
            {k: v for k, v in before.items() if '.' in k or k in util.NAMED_STATS}


def test_foliofsctl_not_a_mount(tmp_path):
    for cmd in (['stat'], ['get'], ['set', 'dirty_ratio=1'], ['files'], ['sync']):
        r = foliofsctl(cmd[0], tmp_path, *cmd[1:])
        assert r.returncode == 2 and not r.stdout, r
        assert str(tmp_path) in one_line(r.stderr), r


def test_foliofsctl_refused_mount_names_its_owner(dirs, tuser):
    """Root on another user's mount without allow_other: the kernel
    refuses every path (EACCES), and foliofsctl says that, with the owner's
    uid and allow_other, exit 1, rather than "not a foliofs mount"; with a
    relative path too."""
    root, b, mnt = dirs
    name, uid, gid = tuser
    os.chown(b, uid, gid)
    os.chown(mnt, uid, gid)
    with Mount(b, mnt, user=name):
        for given, cwd in ((mnt, None), ('m', root)):
            r = subprocess.run([FOLIOFSCTL, 'stat', given], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=60, cwd=cwd)
            assert (r.returncode, r.stdout) == (1, ''), r
            assert r.stderr == ('foliofsctl: %s: Permission denied: a foliofs mount of uid %d'
                                ' without allow_other, which only uid %d may use (root'
                                ' included; its daemon\'s -o allow_other lets others in)\n'
                                % (given, uid, uid)), r.stderr


def test_foliofsctl_usage():
    r = foliofsctl('-h')
    assert r.returncode == 0 and 'foliofsctl stat' not in r.stderr
    for word in ('stat', 'get', 'set', 'files', 'sync', 'stay set'):
        assert word in r.stdout
    r = foliofsctl()
    assert r.returncode == 2
    r = foliofsctl('no_such_command', '/')
    assert r.returncode == 2 and one_line(r.stderr)


def test_foliofsctl_options_anywhere(mount):
    """getopt_long: options before, between and after the operands."""
    for args in (['stat', '-i', '0.1', mount.mnt, '-c', '1'],
                 ['-c', '1', 'stat', mount.mnt, '--interval', '0.1'],
                 ['stat', mount.mnt, '--count=1', '-i0.1']):
        r = foliofsctl(*args)
        assert r.returncode == 0 and not r.stderr, (args, r)
        assert len(r.stdout.splitlines()) == 2, (args, r.stdout)
    r = foliofsctl('get', '--json', mount.mnt, 'dirty_ratio')
    assert json.loads(r.stdout) == {'dirty_ratio': 20}, r
    r = foliofsctl('get', mount.mnt, '-i', '1')
    assert r.returncode == 2 and '-i and -c are options of stat' in one_line(r.stderr), r
    r = foliofsctl('set', mount.mnt, '--json', 'dirty_ratio=20')
    assert r.returncode == 2 and '--json' in one_line(r.stderr), r
    r = foliofsctl('stat', mount.mnt, '--bogus')
    assert r.returncode == 2 and '--bogus' in one_line(r.stderr), r


def test_foliofsctl_and_foliofs_version():
    r = foliofsctl('--version')
    assert r.returncode == 0 and re.fullmatch(r'foliofsctl \d+\.\d+\.\d+\n', r.stdout), r
    r = subprocess.run([FOLIOFS, '--version'], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith('foliofs %s' % r.stdout.split()[1]), r
    assert r.stdout.split()[1] == foliofsctl('-V').stdout.split()[1]


@NO_FLUSHERS
def test_foliofsctl_stat_exact_dirty_precision(mount):
    """16 KiB dirty shows as 0.016 MiB in the exact column, not 0.0."""
    with open(os.path.join(mount.mnt, 'f'), 'wb') as f:
        f.write(os.urandom(16 * KiB))
    r = foliofsctl('stat', mount.mnt, '-c', 1, '-i', 0.1)
    assert r.returncode == 0, r
    assert r.stdout.splitlines()[1].split()[1] == '0.016', r.stdout


@NO_FLUSHERS
def test_foliofsctl_json(mount):
    mnt, back = mount.mnt, mount.backing
    with open(os.path.join(mnt, 'f'), 'wb') as f:
        f.write(os.urandom(100 * KiB))
    r = foliofsctl('stat', mnt, '--json')
    assert r.returncode == 0 and not r.stderr, r
    st = json.loads(r.stdout)
    assert st['dirty_bytes_exact'] == 100 * KiB and isinstance(st['nr_dirty'], int), st
    assert set(st) == set(stats(mnt))
    # The policies in force by name: strings, "6.17" too.
    assert {k: st[k] for k in util.NAMED_STATS} == {
        'dirty_account': 'page', 'throttle': 'bdp', 'folio_policy': 'kernel',
        'ra_model': '6.17'}, st
    assert all(isinstance(v, int) for k, v in st.items() if k not in util.NAMED_STATS), st
    r = foliofsctl('stat', mnt, '--json', '-c', 2, '-i', 0.1)
    assert [set(json.loads(l)) for l in r.stdout.splitlines()] == [set(st)] * 2, r
    r = foliofsctl('get', mnt, '--json')
    got = json.loads(r.stdout)
    assert set(TUNABLES) <= set(got) and got['dirty_ratio'] == 20, got
    assert got['throttle'] == 'bdp'
    r = foliofsctl('files', mnt, '--json')
    files = json.loads(r.stdout)
    assert len(files) == 1, files
    assert files[0]['path'] == os.path.join(os.path.realpath(back), 'f')
    assert files[0]['dirty_bytes'] == 100 * KiB and files[0]['wb_errors'] == 0
    assert files[0]['last_error'] is None
    r = foliofsctl('folios', mnt, '--json', os.path.join(mnt, 'f'))
    fol = json.loads(r.stdout)
    assert len(fol) == 1 and fol[0]['path'] == os.path.join(mnt, 'f'), fol
    assert fol[0]['bytes'] >= 100 * KiB and sum(fol[0]['by_size'].values()) == fol[0]['folios']
    r = foliofsctl('folios', mnt, '--json')
    assert [f['ino'] for f in json.loads(r.stdout)] == [fol[0]['ino']], r.stdout


# The stats exported in seconds (their value in ms / 1000), and the family
# each takes its name from.
OM_SECONDS = {'throttle_ms': 'foliofs_throttle_seconds', 'pause': 'foliofs_pause_seconds',
              'period': 'foliofs_period_seconds', 'think': 'foliofs_think_seconds'}


def om_family(name):
    """The metric family of stat NAME, as the exposition names it."""
    return OM_SECONDS.get(name, 'foliofs_' + name.replace('.', '_'))


def _exports(dirs):
    """(mount point, stats before, stats after, stat --openmetrics given a
    relative path, stat --prometheus) of a mount with 100 KiB dirty."""
    root, b, mnt = dirs
    with Mount(b, mnt, options=['flushers=0', 'dirty_account=pinned',
                                'throttle=strictlimit']) as m:
        with open(os.path.join(mnt, 'f'), 'wb') as f:
            f.write(os.urandom(100 * KiB))
        st = stats(mnt)
        r = subprocess.run([FOLIOFSCTL, 'stat', '--openmetrics', 'm'], cwd=root,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and not r.stderr, r
        om = r.stdout
        r = subprocess.run([FOLIOFSCTL, 'stat', '--prometheus', mnt], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and not r.stderr, r
        prom = r.stdout
        after = stats(mnt)
        for bad in (['--openmetrics', '-c', '2'], ['--prometheus', '-i', '1'],
                    ['--openmetrics', '--json'], ['--prometheus', '--openmetrics']):
            r = foliofsctl('stat', mnt, *bad)
            assert r.returncode == 2 and one_line(r.stderr), (bad, r)
        m.umount()
    return mnt, st, after, om, prom


def test_foliofsctl_openmetrics(dirs):
    """stat --openmetrics as the OpenMetrics 1.0 text format says, read by
    a real parser (Debian's python3-prometheus-client): every stat a
    family with HELP and TYPE, counters named FOO with the sample
    FOO_total, a UNIT (bytes, seconds) where the name ends with it, the
    policies in force the labels of one info metric, the mount point label
    absolute though a relative path was given, # EOF last.  A stat's value
    is the stats file's (in seconds for the ms ones)."""
    try:
        from prometheus_client.openmetrics import parser
    except ImportError:
        util.require_tool('python3-prometheus-client', 'apt-get install python3-prometheus-client')
    mnt, st, after, om, _ = _exports(dirs)
    assert om.endswith('\n# EOF\n'), om[-200:]
    families = {f.name: f for f in parser.text_string_to_metric_families(om)}
    numeric = [k for k in st if k not in util.NAMED_STATS]
    assert set(families) == {om_family(k) for k in numeric} | {'foliofs_policy'}, \
        set(families) ^ ({om_family(k) for k in numeric} | {'foliofs_policy'})
    info = families['foliofs_policy']
    assert info.type == 'info' and len(info.samples) == 1, info
    assert info.samples[0].labels == {'mountpoint': mnt, 'dirty_account': 'pinned',
                                      'throttle': 'strictlimit', 'folio_policy': 'kernel',
                                      'ra_model': '6.17'}, info.samples[0]
    for k in numeric:
        fam = families[om_family(k)]
        assert fam.documentation and 'does not describe' not in fam.documentation, fam
        assert fam.type in ('counter', 'gauge'), fam
        assert len(fam.samples) == 1, fam.samples
        sample = fam.samples[0]
        assert sample.labels == {'mountpoint': mnt}, sample
        want = fam.name + ('_total' if fam.type == 'counter' else '')
        assert sample.name == want, (k, sample)
        assert fam.unit in ('', 'bytes', 'seconds') and fam.name.endswith(fam.unit), fam
        assert (fam.unit == 'seconds') == (k in OM_SECONDS), fam
        assert (fam.unit == 'bytes') == k.endswith('_bytes'), fam
        # The value, where the stat did not move around the export.
        scale = 1000 if k in OM_SECONDS else 1
        if st[k] == after[k]:
            assert sample.value * scale == st[k], (k, sample.value, st[k])
    assert families['foliofs_dirty_bytes_exact'].samples[0].value == 100 * KiB
    for k in ('nr_dirtied', 'app_write_bytes', 'throttle_events', 'throttle_ms',
              'policy_switches', 'wb_errors'):
        assert families[om_family(k)].type == 'counter', k
    for k in ('nr_dirty', 'dirty_thresh', 'cache_bytes', 'folios', 'account.share'):
        assert families[om_family(k)].type == 'gauge', k


def test_foliofsctl_prometheus_text(dirs):
    """stat --prometheus: the text format node_exporter's textfile
    collector reads (counters' families named FOO_total, no UNIT, the
    policies an info-style gauge, no # EOF), clean for promtool check
    metrics (Debian's prometheus package)."""
    mnt, st, _, _, prom = _exports(dirs)
    lines = prom.splitlines()
    assert '# UNIT' not in prom and '# EOF' not in prom
    assert '# TYPE foliofs_nr_dirtied_total counter' in lines, prom
    assert '# TYPE foliofs_nr_dirty gauge' in lines, prom
    assert '# TYPE foliofs_policy_info gauge' in lines, prom
    assert ('foliofs_policy_info{mountpoint="%s",dirty_account="pinned",throttle="strictlimit",'
            'folio_policy="kernel",ra_model="6.17"} 1' % mnt) in lines, prom
    assert 'foliofs_dirty_bytes_exact{mountpoint="%s"} %d' % (mnt, 100 * KiB) in lines, prom
    samples = [l for l in lines if not l.startswith('#')]
    assert len(samples) == len(st) - len(util.NAMED_STATS) + 1, samples
    promtool = shutil.which('promtool')
    if not promtool:
        util.require_tool('promtool', 'apt-get install prometheus')
    r = subprocess.run([promtool, 'check', 'metrics'], input=prom, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r


def _private_ns(keep, script):
    """Run SCRIPT (sh) in a mount namespace of its own in which every
    foliofs mount but those in KEEP is lazily unmounted: mount discovery
    sees only the test's."""
    prologue = ('KEEP="%s"; ' % ' '.join(keep) +'for m in $(awk \'$0 ~ / - fuse\\.foliofs / {print $5}\' /proc/self/mountinfo); do '
                'case " $KEEP " in *" $m "*) ;; *) umount -l "$m" 2>/dev/null;; esac; done; ')
    return subprocess.run(['unshare', '--mount', '--propagation', 'private', 'sh', '-c',
                           prologue + script], capture_output=True, text=True, timeout=60)


def test_foliofsctl_finds_the_mount(dirs, tmp_path):
    """No mount point given: the one foliofs mount is used; with two, both
    are listed and the exit status is 2."""
    if os.geteuid() != 0 or not shutil.which('unshare'):
        pytest.skip('needs root and unshare(1): a mount namespace of its own')
    _, b, m = dirs
    b2, m2 = str(tmp_path / 'b2'), str(tmp_path / 'm2')
    os.mkdir(b2)
    os.mkdir(m2)
    with Mount(b, m), Mount(b2, m2):
        r = _private_ns([m], '{0} get dirty_ratio; {0} stat --json -c 1 -i 0.1'.format(
            FOLIOFSCTL))
        assert r.returncode == 0, r
        assert r.stdout.splitlines()[0] == 'dirty_ratio 20', r.stdout
        assert 'nr_dirty' in json.loads(r.stdout.splitlines()[1])
        r = _private_ns([m, m2], FOLIOFSCTL + ' stat -c 1')
        assert r.returncode == 2 and not r.stdout, r
        assert m in r.stderr and m2 in r.stderr and 'foliofs mounts' in r.stderr, r
        r = _private_ns([], FOLIOFSCTL + ' files')
        assert r.returncode == 2 and 'no foliofs mount found' in one_line(r.stderr), r


@NO_FLUSHERS
def test_foliofsctl_files_and_sync(mount):
    mnt, back = mount.mnt, mount.backing
    data = os.urandom(200 * KiB)
    with open(os.path.join(mnt, 'f'), 'wb') as f:
        f.write(data)
        f.flush()
        r = foliofsctl('files', mnt)
        assert r.returncode == 0 and not r.stderr, r
        lines = r.stdout.splitlines()
        assert len(lines) == 2 and lines[0].split()[-1] == 'PATH', r.stdout
        assert lines[1].endswith(os.path.join(os.path.realpath(back), 'f')), r.stdout
        r = foliofsctl('sync', mnt)
        assert r.returncode == 0, r
        assert stats(mnt)['dirty_bytes_exact'] == 0
        assert util.read_file(os.path.join(back, 'f')) == data
        r = foliofsctl('files', mnt)
        assert r.returncode == 0 and len(r.stdout.splitlines()) == 1, r


# --------------------------------------------------------------------------
# the stats log

def assert_has_option(name):
    """foliofs --help lists the option: a build without it fails the test
    rather than skipping it (every build has the stats log)."""
    r = subprocess.run([FOLIOFS, '--help'], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=30)
    assert name in r.stdout, '%s --help does not list %s:\n%s' % (FOLIOFS, name, r.stdout)


def read_log(path, writing=False):
    """The log's lines as JSON.  While the daemon WRITING it, a line being
    written may be there in part (the kernel extends the file page by
    page as it copies a write; a line is longer than a page): such a last
    line is left out.  Otherwise the last line must be whole."""
    with open(path) as f:
        text = f.read()
    if writing:
        text = text[:text.rfind('\n') + 1]
    assert not text or text.endswith('\n'), 'the last line is not whole: %r' % text[-200:]
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.timeout(60)
def test_stats_log(dirs):
    """Every line of the log is one JSON object with the times and exactly
    the stats of .foliofs/stats that writeback keeps; lines come every
    interval and one more at unmount."""
    assert_has_option('stats_log')
    root, b, mnt = dirs
    log = os.path.join(root, 'stats.jsonl')
    with Mount(b, mnt, options=['allow_other', 'stats_log=' + log,
                                'stats_interval_ms=100']) as m:
        with open(os.path.join(mnt, 'f'), 'wb') as f:
            f.write(b'y' * MiB)
        assert poll(lambda: os.path.exists(log) and len(read_log(log, True)) >= 3, 20)
        keys = set(stats(mnt)) - set(FUSE_STATS)
        lines = read_log(log, True)
        m.umount()
    after = read_log(log)
    assert len(after) > len(lines)
    assert after[:len(lines)] == lines
    times = [d['time_ms'] for d in after]
    assert times == sorted(times) and times[0] >= 0
    for d in after:
        assert set(d) == keys | {'time_ms', 'unix_ms'}, set(d) ^ (keys | {'time_ms', 'unix_ms'})
        assert all(isinstance(v, str) == (k in util.NAMED_STATS) for k, v in d.items()), d
    assert max(d['app_write_bytes'] for d in after) == MiB


def test_policies_in_every_output(dirs):
    """The policies in force are named in the stats, stat --json, the
    OpenMetrics info metric and every line of the stats log, with
    policy_switches counting their run-time changes (and those of a
    policy's parameter; a write of the value in force is none), so that
    each sample of a log says which policy it was taken under."""
    root, b, mnt = dirs
    log = os.path.join(root, 'stats.jsonl')
    names = lambda d: {k: d[k] for k in util.NAMED_STATS + ('policy_switches',)}
    first = {'dirty_account': 'folio', 'throttle': 'bdp', 'folio_policy': 'ramp',
             'ra_model': '6.17', 'policy_switches': 0}
    steps = [('dirty_account=page', 1), ('dirty_account=page', 1), ('ra_model=6.16', 2),
             ('throttle=strictlimit', 3), ('dirty_account=pinned', 4), ('account.share=250', 5),
             ('account.share=250', 5), ('throttle.min_dirty=64', 6)]
    last = {'dirty_account': 'pinned', 'throttle': 'strictlimit', 'folio_policy': 'ramp',
            'ra_model': '6.16', 'policy_switches': 6}
    with Mount(b, mnt, options=['dirty_account=folio', 'folio_policy=ramp',
                                'stats_log=' + log, 'stats_interval_ms=50']) as m:
        assert names(stats(mnt)) == first
        assert poll(lambda: os.path.exists(log) and read_log(log), 20)
        for step, count in steps:
            r = foliofsctl('set', mnt, step)
            assert r.returncode == 0, r
            assert stats(mnt)['policy_switches'] == count, step
        st = stats(mnt)
        assert names(st) == last
        assert (st['account.share'], st['throttle.min_dirty']) == (250, 64)
        r = foliofsctl('stat', mnt, '--json')
        assert r.returncode == 0 and names(json.loads(r.stdout)) == last, r
        r = foliofsctl('stat', mnt, '--openmetrics')
        assert r.returncode == 0, r
        assert re.search(r'^foliofs_policy_info\{mountpoint="%s",dirty_account="pinned",'
                         r'throttle="strictlimit",folio_policy="ramp",ra_model="6\.16"\} 1$'
                         % re.escape(mnt), r.stdout, re.M), r.stdout
        assert re.search(r'^foliofs_policy_switches_total\{mountpoint="%s"\} 6$'
                         % re.escape(mnt), r.stdout, re.M), r.stdout
        m.umount()
    lines = read_log(log)
    assert names(lines[0]) == first and names(lines[-1]) == last, (lines[0], lines[-1])
    # Every sample names the policies it was taken under, switch count included.
    seen = [names(d) for d in lines]
    assert all(set(d) == set(first) for d in seen)
    counts = [d['policy_switches'] for d in seen]
    assert counts == sorted(counts)


def test_stats_log_unwritable(dirs):
    """A log that cannot be opened fails the mount with one line naming it."""
    assert_has_option('stats_log')
    root, b, mnt = dirs
    log = os.path.join(root, 'no_such_dir', 'stats.jsonl')
    r = subprocess.run([FOLIOFS, '-f', '-o', 'stats_log=' + log, b, mnt],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=30)
    if util.is_fuse_mounted(mnt):
        subprocess.run([util.FUSERMOUNT, '-u', '-z', mnt])
    assert r.returncode != 0
    assert log in r.stdout, r.stdout
