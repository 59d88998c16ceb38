"""Fixtures for the mount-level tests.

ffs   (module)   one foliofs mount, as root with -o allow_other (plus the
                 module's ffs_options), over a fresh backing directory; torn
                 down with fusermount3 -u, asserting that the daemon exits 0
                 with clean output.
work  (function) a fresh empty directory NAME under both ffs.mnt and
                 ffs.backing (the same directory seen two ways): .mnt, .back.
ref   (function) a fresh empty directory on the backing's own filesystem,
                 not under FUSE, to run the same operations on and compare
                 results and errnos.
dirs  (function) (root, backing, mountpoint): fresh empty directories under a
                 root every user can traverse, for tests that mount their own.
tuser (session)  (name, uid, gid) of the unprivileged test user (root only).
tgroup (session) gid of a group the test user has as a supplementary group.

Tests that make the kernel drop its caches (util.drop_caches(), which
refuses in a test without the mark) are marked @pytest.mark.drops_caches.
The drop is machine-wide, and
contrib/test.sh runs two pytest sessions at once (the ASan build's beside
the plain one): a drop evicts the inodes and pages the other session's test
relies on the kernel keeping (an inode count, a read the kernel serves).
So every test holds a lock on one file in /tmp, shared, and a dropping test
holds it alone; a test waits for it before its timeout starts.

Every test has a timeout: 120 s, or N from @pytest.mark.timeout(N).  It is a
SIGALRM; if the test is stuck in the kernel waiting for a hung daemon (FUSE
waits are only killable once interrupted), a watchdog thread aborts the FUSE
connections of the mounts made here a few seconds later, which unblocks it.
"""

import fcntl
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
import warnings

import pytest

import util

DEFAULT_TIMEOUT = 120

# Mounts that the watchdog may abort.
_active_mounts = []


def pytest_configure(config):
    config.addinivalue_line('markers',
                            'timeout(seconds): per-test timeout (default %d)'
                            % DEFAULT_TIMEOUT)
    config.addinivalue_line('markers',
                            'drops_caches: the test drops the kernel\'s caches, '
                            'machine-wide; it runs while no other test does')


def pytest_collection_modifyitems(config, items):
    why = util.skip_reason()
    if why:
        mark = pytest.mark.skip(reason='mount tests need FUSE: ' + why)
        for item in items:
            item.add_marker(mark)


# Shared by every pytest session on the machine (see the top).
CACHES_LOCK = os.path.join(tempfile.gettempdir(), 'foliofs-tests-caches.lock')


@pytest.fixture(autouse=True)
def _caches_lock(request):
    exclusive = request.node.get_closest_marker('drops_caches') is not None
    try:
        # Without O_CREAT first: /tmp's protected_regular refuses O_CREAT
        # on another user's file even when it exists.
        try:
            fd = os.open(CACHES_LOCK, os.O_RDONLY)
        except FileNotFoundError:
            fd = os.open(CACHES_LOCK, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError as e:
        warnings.warn('%s: %s: tests run without the drop_caches lock'
                      % (CACHES_LOCK, e.strerror))
        fd = None
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        util.may_drop_caches = exclusive
        yield
    finally:
        util.may_drop_caches = False
        if fd is not None:
            os.close(fd)


@pytest.fixture(autouse=True)
def _timeout(request, _caches_lock):
    m = request.node.get_closest_marker('timeout')
    secs = int(m.args[0]) if m else DEFAULT_TIMEOUT

    def on_alarm(signum, frame):
        pytest.fail('test timed out after %d s' % secs, pytrace=True)

    def watchdog():
        for mnt in list(_active_mounts):
            mnt.abort()
        os.kill(os.getpid(), signal.SIGALRM)

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(secs)
    dog = threading.Timer(secs + 10, watchdog)
    dog.daemon = True
    dog.start()
    try:
        yield
    finally:
        dog.cancel()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _traversable_tmpdir(prefix):
    """A fresh directory under /tmp that every user can traverse."""
    d = tempfile.mkdtemp(prefix=prefix)
    os.chmod(d, 0o755)
    return d


TEST_GROUP = 'foliofs-tgrp'


@pytest.fixture(scope='session')
def tuser():
    """(name, uid, gid) of the unprivileged test user."""
    if os.geteuid() != 0:
        pytest.skip('needs root to switch to an unprivileged user')
    name = util.test_user()
    pw = pwd.getpwnam(name)
    return (name, pw.pw_uid, pw.pw_gid)


# A second unprivileged user, and a group it is a member of (users()).
SECOND_USER = 'foliofs-test2'
SEC_GROUP = 'foliofs-sec'


@pytest.fixture(scope='session')
def users(tuser):
    """{role: user name (None: root)} for permission tables: the test user
    owns, the second user (made here, in SEC_GROUP) is the group, nobody
    is other."""
    try:
        pwd.getpwnam(SECOND_USER)
    except KeyError:
        subprocess.run(['useradd', '-M', '-s', '/usr/sbin/nologin', SECOND_USER],
                       check=True, stdout=subprocess.DEVNULL)
    util.ensure_group(SEC_GROUP, member=SECOND_USER)
    return {'owner': tuser[0], 'group': SECOND_USER, 'other': 'nobody', 'root': None}


@pytest.fixture(scope='session')
def tgroup(tuser):
    """gid of a group that the test user has as a supplementary group
    only (not its primary group), and 'nobody' does not have."""
    return util.ensure_group(TEST_GROUP, member=tuser[0])


class FFS:
    def __init__(self, root, backing, mnt, mount):
        self.root = root
        self.backing = backing
        self.mnt = mnt
        self.mount = mount


@pytest.fixture(scope='module')
def ffs_options():
    """-o options of the module's mount besides allow_other; a test module
    may override this fixture (e.g. parametrized) to run under several."""
    return []


@pytest.fixture(scope='module')
def ffs(ffs_options):
    if not os.path.exists(util.FOLIOFS):
        pytest.fail('%s does not exist: build it (ninja -C build) or set $FOLIOFS'
                    % util.FOLIOFS)
    util.test_user()   # /dev/fuse 0666, test user exists
    root = _traversable_tmpdir('foliofs-test-')
    backing = os.path.join(root, 'backing')
    mnt = os.path.join(root, 'mnt')
    os.mkdir(backing, 0o755)
    os.mkdir(mnt, 0o755)
    os.mkdir(os.path.join(root, 'ref'), 0o755)
    mount = util.Mount(backing, mnt, options=['allow_other'] + list(ffs_options))
    mount.start()
    _active_mounts.append(mount)
    try:
        mount.wait_for_mount()
        yield FFS(root, backing, mnt, mount)
        if mount.proc.poll() is not None:
            pytest.fail('foliofs died during the tests (status %s):\n%s'
                        % (mount.proc.returncode, mount.output()))
        mount.umount()
    finally:
        mount.cleanup()
        _active_mounts.remove(mount)
        if not util.is_fuse_mounted(mnt):
            shutil.rmtree(root, ignore_errors=True)


class Work:
    def __init__(self, name, mnt, back):
        self.name = name
        self.mnt = mnt     # the directory through the mount
        self.back = back   # the same directory in the backing store

    def m(self, *parts):
        return os.path.join(self.mnt, *parts)

    def b(self, *parts):
        return os.path.join(self.back, *parts)


def _node_name(request):
    name = request.node.name
    for c in '[]/ =,':
        name = name.replace(c, '_')
    return name[:200]


@pytest.fixture
def work(ffs, request):
    name = _node_name(request)
    m = os.path.join(ffs.mnt, name)
    b = os.path.join(ffs.backing, name)
    if os.path.lexists(b):
        shutil.rmtree(b)
    os.mkdir(m, 0o755)
    os.chmod(m, 0o755)
    return Work(name, m, b)


@pytest.fixture
def ref(ffs, request):
    d = os.path.join(ffs.root, 'ref', _node_name(request))
    if os.path.lexists(d):
        shutil.rmtree(d)
    os.mkdir(d, 0o755)
    os.chmod(d, 0o755)
    return d


@pytest.fixture
def dirs():
    root = _traversable_tmpdir('foliofs-t-')
    b, m = os.path.join(root, 'b'), os.path.join(root, 'm')
    os.mkdir(b, 0o755)
    os.mkdir(m, 0o755)
    yield root, b, m
    if util.is_fuse_mounted(m):
        subprocess.run([util.FUSERMOUNT, '-u', '-z', m], stderr=subprocess.DEVNULL)
    shutil.rmtree(root, ignore_errors=True)
