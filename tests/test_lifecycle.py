"""Command line, mounting and unmounting, daemon hardening, and the fsx-style
exerciser through the mount (plain, O_DIRECT, kernel cache)."""

import contextlib
import json
import os
import resource
import signal
import subprocess
import time

import pytest

import util
from util import FOLIOFS, FUSERMOUNT, Mount, run_foliofs

REPO = util.REPO
FSX = os.path.join(os.path.dirname(FOLIOFS), 'tests', 'ffs_fsx')




BAD = [
    (['-o', 'bogus_option'], 'bogus_option'),
    (['-o', 'attr_timeout=banana'], 'attr_timeout=banana'),
    (['-o', 'attr_timeout=-1'], 'attr_timeout=-1'),
    (['-o', 'attr_timeout='], 'attr_timeout='),
    (['-o', 'max_threads=lots'], 'max_threads=lots'),
    (['-o', 'max_background=0'], 'max_background=0'),
    (['-o', 'max_background=65536'], 'max_background=65536'),
    (['-o', 'max_background=-1'], 'max_background=-1'),
]


@pytest.mark.parametrize('extra,named', BAD)
def test_bad_option_exits_2_and_mounts_nothing(dirs, extra, named):
    _, b, m = dirs
    r = run_foliofs('-f', *extra, b, m)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('foliofs: '), err
    assert named in lines[0]
    assert not util.is_fuse_mounted(m)


def test_bad_paths_exit_2(dirs):
    root, b, m = dirs
    f = os.path.join(root, 'file')
    open(f, 'w').close()
    cases = [
        ([os.path.join(root, 'nope'), m], 'nope'),
        ([f, m], 'must be a regular file'),
        ([b, os.path.join(root, 'nomnt')], 'nomnt'),
        ([b, f], 'not a directory'),
        ([b], 'MOUNTPOINT'),
        ([], 'BACKING'),
        ([b, m, m], 'unexpected argument'),
    ]
    for args, named in cases:
        r = run_foliofs('-f', *args)
        err = r.stderr.decode()
        assert r.returncode == 2, (args, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith('foliofs: '), (args, err)
        assert named in lines[0], (args, err)
    assert not util.is_fuse_mounted(m)


def test_help_lists_every_option_with_default():
    r = run_foliofs('--help')
    assert r.returncode == 0
    out = r.stdout.decode()
    for opt, default in [('kernel_cache', '[off]'), ('cache=MODE', '[direct]'),
                         ('attr_timeout=SECS', '[86400]'),
                         ('allow_other', '[off]'), ('max_threads=N', '[10]'),
                         ('max_background=N', '[64]')]:
        line = [l for l in out.splitlines() if ('-o ' + opt) in l]
        assert line and default in line[0], (opt, out)
    r = run_foliofs('--version')
    assert r.returncode == 0 and r.stdout.decode().startswith('foliofs ')


FUSECTL = '/sys/fs/fuse/connections'


@pytest.mark.parametrize('opts,want', [([], 64), (['max_background=200'], 200),
                                       (['max_background=4'], 4)])
def test_max_background_reaches_the_kernel(dirs, opts, want):
    """The connection's max_background (fusectl, as root) is the option's,
    and its congestion threshold three quarters of it, as libfuse derives."""
    if os.geteuid() != 0:
        pytest.skip('reading %s needs root' % FUSECTL)
    _, b, m = dirs
    if not os.path.exists(os.path.join(FUSECTL, 'max_background')) and \
            not os.listdir(FUSECTL):
        subprocess.run(['mount', '-t', 'fusectl', 'fusectl', FUSECTL],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
    with Mount(b, m, options=opts) as mnt:
        conn = os.path.join(FUSECTL, str(mnt.conn))
        if not os.path.isdir(conn):
            pytest.skip('fusectl is not mounted at %s' % FUSECTL)
        with open(os.path.join(conn, 'max_background')) as f:
            assert int(f.read()) == want
        with open(os.path.join(conn, 'congestion_threshold')) as f:
            assert int(f.read()) == want * 3 // 4
        mnt.umount()


@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGINT])
def test_signal_unmounts_and_exits_0(dirs, sig):
    _, b, m = dirs
    mnt = Mount(b, m)
    # A shell would start us with SIGINT ignored in the background; a
    # terminal user gets the default, which is what is tested here.
    mnt.start()
    try:
        mnt.wait_for_mount()
        with open(os.path.join(m, 'f'), 'wb') as f:
            f.write(b'x' * 100000)
        os.kill(mnt.pid, sig)
        mnt.wait_exit()
        assert not util.is_fuse_mounted(m)
        assert os.path.getsize(os.path.join(b, 'f')) == 100000
    finally:
        mnt.cleanup()


def daemon_pids(m):
    r = subprocess.run(['pgrep', '-f', '%s .*%s$' % (FOLIOFS, m)],
                       stdout=subprocess.PIPE)
    return [int(p) for p in r.stdout.split()]


def daemon_pids_any(m):
    """Daemons serving M, however they were started (mount.fuse3 passes
    relative paths through sh)."""
    r = subprocess.run(['pgrep', '-f', 'foliofs .*%s' % m], stdout=subprocess.PIPE)
    return [int(p) for p in r.stdout.split()]


def wait_gone(pid, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open('/proc/%d/stat' % pid) as f:
                if f.read().split(') ')[1].startswith('Z'):
                    return
        except FileNotFoundError:
            return
        time.sleep(0.05)
    pytest.fail('daemon %d still running %ss after unmount' % (pid, timeout))


def test_daemonizes_once_mount_is_ready(dirs):
    _, b, m = dirs
    r = run_foliofs(b, m)
    assert r.returncode == 0, r.stderr
    assert r.stderr == b''
    # Ready when the command returns: no polling.
    assert util.is_fuse_mounted(m)
    with open(os.path.join(m, 'hello'), 'w') as f:
        f.write('hi')
    pids = daemon_pids(m)
    assert len(pids) == 1
    assert subprocess.run([FUSERMOUNT, '-u', m]).returncode == 0
    wait_gone(pids[0])
    assert open(os.path.join(b, 'hello')).read() == 'hi'


def test_unprivileged_mount(dirs):
    if os.geteuid() != 0:
        user = None
    else:
        user = util.test_user()
    root, b, m = dirs
    if user:
        subprocess.run(['chown', '-R', user, root], check=True)

    def work(mnt, back):
        p = os.path.join(mnt, 'd')
        os.mkdir(p)
        with open(os.path.join(p, 'f'), 'wb') as f:
            f.write(b'data' * 1000)
            f.flush()
            os.fsync(f.fileno())    # the backing file has it from here
        os.rename(os.path.join(p, 'f'), os.path.join(p, 'g'))
        st = os.stat(os.path.join(back, 'd', 'g'))
        return st.st_uid, st.st_size, os.getuid()

    with Mount(b, m, user=user) as mnt:
        opts = util.mountinfo(m)
        assert opts['fstype'] == 'fuse.foliofs'
        uid, size, me = util.run_as(user, work, m, b) if user else work(m, b)
        assert uid == me and size == 4000
        if user:
            # Nobody else gets in without allow_other, root included.
            with pytest.raises(PermissionError):
                os.listdir(m)
        mnt.umount()


def have_mount_helper():
    return os.path.exists('/sbin/mount.fuse3') or os.path.exists('/usr/sbin/mount.fuse3')


@pytest.mark.skipif(os.geteuid() != 0, reason='mount(8) needs root')
@pytest.mark.parametrize('how', ['mount -t', 'fstab'])
def test_mount_helper_and_fstab(dirs, how):
    if not have_mount_helper():
        pytest.skip('mount.fuse3 not installed')
    root, b, m = dirs
    with installed_binary():
        mount_via_helper(root, b, m, how)


@contextlib.contextmanager
def installed_binary():
    """Put the binary where `meson install` puts it (unless something is
    there already), so that mount.fuse3 finds it as it would after install."""
    r = subprocess.run(['meson', 'introspect', os.path.dirname(FOLIOFS), '--installed'],
                       stdout=subprocess.PIPE)
    if r.returncode != 0:
        pytest.skip('not a meson build directory: %s' % os.path.dirname(FOLIOFS))
    # The daemon's own entry (keys are the built files): completion and
    # docs named foliofs are installed too.
    target = [v for k, v in json.loads(r.stdout).items()
              if os.path.realpath(k) == os.path.realpath(FOLIOFS)][0]
    made = False
    if not os.path.exists(target):
        os.symlink(os.path.abspath(FOLIOFS), target)
        made = True
    try:
        yield
    finally:
        if made:
            os.unlink(target)


def mount_via_helper(root, b, m, how):
    env = dict(os.environ)
    if how == 'mount -t':
        cmd = ['mount', '-t', 'fuse.foliofs', b, m, '-o', 'attr_timeout=0.5,allow_other']
    else:
        fstab = os.path.join(root, 'fstab')
        with open(fstab, 'w') as f:
            f.write('%s %s fuse.foliofs attr_timeout=0.5,allow_other,noauto 0 0\n' % (b, m))
        cmd = ['mount', '-T', fstab, m]
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=30)
    assert r.returncode == 0, r.stdout
    try:
        assert util.mountinfo(m)['fstype'] == 'fuse.foliofs'
        with open(os.path.join(m, 'x'), 'w') as f:
            f.write('via ' + how)
    finally:
        pids = daemon_pids_any(m)
        assert subprocess.run(['umount', m]).returncode == 0
    # umount(8) returns before the daemon has written back and exited.
    for pid in pids:
        wait_gone(pid)
    assert open(os.path.join(b, 'x')).read() == 'via ' + how
    # A bad option through the helper fails and mounts nothing.
    r = subprocess.run(['mount', '-t', 'fuse.foliofs', b, m, '-o', 'attr_timeout=x'],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert r.returncode != 0 and b'attr_timeout=x' in r.stdout
    assert not util.is_fuse_mounted(m)


def daemon_limits(pid):
    with open('/proc/%d/limits' % pid) as f:
        for line in f:
            if line.startswith('Max open files'):
                return [int(x) for x in line.split()[3:5]]


O_PATH = 0o10000000


def file_fd_count(pid):
    """Descriptors of PID for files: not the io_uring instances that each
    writing thread keeps for as long as it lives."""
    n = 0
    for fd in os.listdir('/proc/%d/fd' % pid):
        try:
            if 'io_uring' not in os.readlink('/proc/%d/fd/%s' % (pid, fd)):
                n += 1
        except FileNotFoundError:
            pass
    return n


def data_fd_count(pid):
    """Descriptors of PID that are not O_PATH."""
    n = 0
    for fd in os.listdir('/proc/%d/fdinfo' % pid):
        try:
            with open('/proc/%d/fdinfo/%s' % (pid, fd)) as f:
                flags = [l for l in f if l.startswith('flags:')][0]
        except (FileNotFoundError, IndexError):
            continue
        try:
            ring = 'io_uring' in os.readlink('/proc/%d/fd/%s' % (pid, fd))
        except FileNotFoundError:
            continue
        if not int(flags.split()[1], 8) & O_PATH and not ring:
            n += 1
    return n


@pytest.mark.drops_caches
def test_nofile_raised_and_no_fd_leak(dirs):
    _, b, m = dirs
    with Mount(b, m) as mnt:
        soft, hard = daemon_limits(mnt.pid)
        assert soft == hard and soft >= 4096
        base = file_fd_count(mnt.pid)
        base_data = data_fd_count(mnt.pid)
        want = 2000
        old = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(old[0], want + 100), old[1]))
        try:
            fds = [os.open(os.path.join(m, 'f%d' % i), os.O_CREAT | os.O_RDWR, 0o644)
                   for i in range(want)]
            for i, fd in enumerate(fds):
                os.write(fd, b'%d' % i)
            assert file_fd_count(mnt.pid) >= base + want
            for fd in fds:
                os.fsync(fd)
                os.close(fd)
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, old)
        # Directory handles and hard links, then nothing may stay open.
        for _ in range(50):
            os.listdir(m)
        os.link(os.path.join(m, 'f1'), os.path.join(m, 'l1'))
        with open(os.path.join(m, 'l1'), 'rb') as f1, open(os.path.join(m, 'f1'), 'rb') as f2:
            assert f1.read() == f2.read() == b'1'
        # Descriptors (O_PATH, and data ones with their cache) live as long
        # as the kernel keeps the inode, until it forgets it.
        if os.geteuid() == 0:
            util.drop_caches()
            for _ in range(100):
                if file_fd_count(mnt.pid) == base:
                    break
                time.sleep(0.05)
            assert file_fd_count(mnt.pid) == base
            assert data_fd_count(mnt.pid) == base_data
        mnt.umount()


@pytest.mark.parametrize('opts,flags', [
    ((), []),
    ((), ['-Z']),
    (('cache=writethrough',), []),
    (('cache=writethrough',), ['-Z']),
    (('kernel_cache',), []),
    (('kernel_cache',), ['-Z']),
], ids=['plain', 'odirect', 'wthrough', 'wthrough-odirect', 'kcache', 'kcache-odirect'])
def test_fsx(dirs, opts, flags):
    if not os.path.exists(FSX):
        pytest.fail('%s not built' % FSX)
    _, b, m = dirs
    with Mount(b, m, options=opts) as mnt:
        for seed in (1, 2):
            r = subprocess.run([FSX, '-N', '4000', '-S', str(seed)] + flags +
                               [os.path.join(m, 'fsx%d' % seed)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=300)
            assert r.returncode == 0, r.stdout.decode()
        seen = {seed: open(os.path.join(m, 'fsx%d' % seed), 'rb').read() for seed in (1, 2)}
        mnt.umount()
        # Unmounting writes back everything the exerciser left in the cache.
        for seed in (1, 2):
            assert open(os.path.join(b, 'fsx%d' % seed), 'rb').read() == seen[seed]


@pytest.mark.parametrize('opts', [(), ('cache=writethrough',), ('kernel_cache',)],
                         ids=['direct', 'wthrough', 'kcache'])
def test_shared_mmap(dirs, opts):
    """MAP_SHARED stores reach the file (direct I/O mounts included)."""
    import mmap
    _, b, m = dirs
    with Mount(b, m, options=opts) as mnt:
        path = os.path.join(m, 'mm')
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, 4 << 20)
            mp = mmap.mmap(fd, 4 << 20, mmap.MAP_SHARED)
            for off in range(0, 4 << 20, 1 << 20):
                mp[off + 7:off + 12] = b'folio'
            mp.flush()
            mp.close()
            os.fsync(fd)
        finally:
            os.close(fd)
        data = open(os.path.join(b, 'mm'), 'rb').read()
        assert len(data) == 4 << 20
        for off in range(0, 4 << 20, 1 << 20):
            assert data[off + 7:off + 12] == b'folio'
        assert data.count(b'\0') == (4 << 20) - 20
        mnt.umount()
