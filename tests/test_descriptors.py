"""Many files and few descriptors (issue 10, "many files and descriptors").

The daemon keeps an O_PATH descriptor per inode the kernel knows, and a data
descriptor per file only while the file is open or holds data that is not
yet durable; the data descriptors of other files are closed when the
daemon's RLIMIT_NOFILE would be reached, and opened again on demand.  Each
test lowers the limit of a running daemon with prlimit(1) (as root the
daemon raises its own limit at start), so the same test runs against a
daemon that has no notion of a budget.
"""

import errno
import os
import resource
import signal
import subprocess

import pytest

import util
from util import Mount


def lower_limit(pid, n):
    """Set RLIMIT_NOFILE of process PID to N (soft and hard)."""
    subprocess.run(['prlimit', '--pid', str(pid), '--nofile=%d:%d' % (n, n)],
                   check=True)


def content(i):
    """What file i holds: not a whole number of blocks, for O_DIRECT's EOF."""
    return b'%06d\n' % i * 700


@pytest.fixture
def raised_nofile():
    """Let this process hold a few hundred descriptors of its own."""
    old = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(old[0], 4096), max(old[1], 4096)))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, old)


@pytest.mark.timeout(300)
@pytest.mark.parametrize('opts', [('backing_direct=off',), ('backing_direct',), ('kernel_cache',)],
                         ids=['buffered', 'backing_direct', 'kernel_cache'])
def test_more_files_than_half_the_limit(dirs, raised_nofile, opts):
    """800 files cached under a limit of 1024: twice that many descriptors
    used to be needed.  Some stay open, some dirty; all read back and
    synced; every byte on the backing files after unmount."""
    limit, nfiles = 1024, 800
    _, b, m = dirs
    held = {}
    with Mount(b, m, options=opts) as mnt:
        lower_limit(mnt.pid, limit)
        most = 0
        for i in range(nfiles):
            fd = os.open(os.path.join(m, 'f%d' % i), os.O_CREAT | os.O_RDWR, 0o644)
            assert os.write(fd, content(i)) == len(content(i))
            if i % 20 != 0:
                os.fsync(fd)        # every 20th is left dirty
            if i % 20 == 1:
                held[i] = fd        # and these stay open
            else:
                os.close(fd)
            if i % 50 == 0:
                most = max(most, util.fd_count(mnt.pid))
        # The kernel still has every file: the daemon keeps them all.
        assert util.stats(m)['inodes'] >= nfiles
        for i in range(nfiles):
            with open(os.path.join(m, 'f%d' % i), 'rb') as f:
                assert f.read() == content(i), 'f%d' % i
            if i % 50 == 0:
                most = max(most, util.fd_count(mnt.pid))
        for i, fd in held.items():
            assert os.pread(fd, len(content(i)) + 1, 0) == content(i)
            assert os.pwrite(fd, b'again', 0) == 5
        for i in range(nfiles):
            fd = held.get(i)
            if fd is None:
                fd = os.open(os.path.join(m, 'f%d' % i), os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        held.clear()
        # Room left for what must not fail (writeback, unmount).
        assert most < limit
        # The stats say how: idle descriptors were closed and opened again,
        # none refused, and the count kept under the budget.
        st = util.stats(m)
        assert st['fds_idle_closed'] > 0 and st['fds_reopened'] > 0, st
        assert st['fds_refused'] == 0
        assert st['fds'] <= st['fd_budget'] < limit
        assert 'Too many open files' not in mnt.output()
        mnt.umount()
    for i in range(nfiles):
        want = content(i)
        if i % 20 == 1:
            want = b'again' + want[5:]
        assert util.read_file(os.path.join(b, 'f%d' % i)) == want, 'f%d' % i


@pytest.mark.timeout(300)
def test_at_the_limit_enfile_then_recovery(dirs, raised_nofile):
    """Files held open until the daemon has no descriptor left for another:
    the caller gets ENFILE (not EMFILE, which would blame its own table),
    look-ups still work, the daemon stays up, and once files are closed
    new ones open, are written and synced."""
    limit = 256
    _, b, m = dirs
    held = []
    for i in range(100):
        util.write_file(os.path.join(b, 'x%d' % i), b'x')
    with Mount(b, m) as mnt:
        lower_limit(mnt.pid, limit)
        with pytest.raises(OSError) as e:
            for i in range(limit):
                fd = os.open(os.path.join(m, 'h%d' % i), os.O_CREAT | os.O_RDWR, 0o644)
                held.append(fd)
                os.write(fd, content(i))
        # Not EMFILE: that would say the caller's own table is full.
        assert e.value.errno == errno.ENFILE
        assert held, 'not a single file could be opened'
        # Lookups of files the kernel has not seen still work: an inode
        # keeps no descriptor once its lookup is answered (issue 42).
        for i in range(100):
            os.stat(os.path.join(m, 'x%d' % i))
        assert mnt.proc.poll() is None
        # The control files need no descriptor; the refusal was counted.
        assert util.stats(m)['fds_refused'] >= 1
        # Half the files closed: their data descriptors can go (after
        # writeback: they are dirty), not their O_PATH ones (the kernel
        # keeps the inodes), and each new file keeps one O_PATH too.
        for fd in held[len(held) // 2:]:
            os.close(fd)
        kept = held[:len(held) // 2]
        added = len(held) // 4
        most = 0
        for i in range(added):
            path = os.path.join(m, 'n%d' % i)
            util.write_file(path, content(i))
            assert util.read_file(path) == content(i)
            most = max(most, util.fd_count(mnt.pid))
        # The reserve (at least 32) is left alone, but for the io_uring
        # rings of threads that began writing back.
        assert most <= limit - 32
        for fd in kept:
            os.fsync(fd)
            os.close(fd)
        mnt.umount()
    for i in range(len(held)):
        assert util.read_file(os.path.join(b, 'h%d' % i)) == content(i)
    for i in range(added):
        assert util.read_file(os.path.join(b, 'n%d' % i)) == content(i)


@pytest.mark.timeout(300)
def test_over_the_budget_only_dirty_idle_files(dirs, raised_nofile):
    """Opens over the budget when every idle file is dirty: nothing else
    writes (no flushers, a cache far from its dirty limits), so an open
    can have a descriptor only by writing back, syncing and closing an
    idle dirty file's.  Every open succeeds, and the oldest files' data
    is on BACKING while still mounted: the eviction wrote it."""
    limit, nfiles = 256, 400
    _, b, m = dirs
    opts = ('flushers=0', 'cache_size=256M', 'dirty_expire_ms=86400000',
            'writeback_interval_ms=0')
    with Mount(b, m, options=opts) as mnt:
        util.write_file(os.path.join(m, 'f0'), content(0))
        # Closed and idle, but still only in the cache: nothing here
        # writes back but an eviction (or the unmount).
        assert util.read_file(os.path.join(b, 'f0')) == b''
        lower_limit(mnt.pid, limit)
        for i in range(1, nfiles):
            fd = os.open(os.path.join(m, 'f%d' % i), os.O_CREAT | os.O_RDWR, 0o644)
            assert os.write(fd, content(i)) == len(content(i))
            os.close(fd)
        st = util.stats(m)
        assert st['fds_refused'] == 0, st
        assert st['fds_idle_closed'] > 0, st
        assert st['fd_budget'] < nfiles
        # More files than the budget, each dirty when closed: the oldest
        # were evicted, each written and synced before its descriptor went.
        on_backing = [i for i in range(nfiles)
                      if util.read_file(os.path.join(b, 'f%d' % i)) == content(i)]
        assert 0 in on_backing
        assert len(on_backing) >= nfiles - st['fd_budget'], (len(on_backing), st)
        # What was not evicted is still only in the cache.
        assert len(on_backing) < nfiles
        for i in range(nfiles):
            assert util.read_file(os.path.join(m, 'f%d' % i)) == content(i), 'f%d' % i
        assert mnt.proc.poll() is None
        mnt.umount()
    for i in range(nfiles):
        assert util.read_file(os.path.join(b, 'f%d' % i)) == content(i), 'f%d' % i


def test_signal_with_no_descriptor_free(dirs, raised_nofile):
    """Stopped when not one descriptor is free: the worker threads are
    cancelled, which must not need a library loaded then (glibc aborted,
    "libgcc_s.so.1 must be installed for pthread_cancel to work"), and
    the dirty files are written back."""
    _, b, m = dirs
    mnt = Mount(b, m)
    mnt.start()
    try:
        mnt.wait_for_mount()
        lower_limit(mnt.pid, 300)
        n = 0
        try:
            while n < 300:
                with open(os.path.join(m, 'f%d' % n), 'wb') as f:
                    f.write(content(n))
                n += 1
        except OSError as e:
            assert e.errno == errno.ENFILE
        # The limit at the lowest free number: no open can succeed.
        fds = {int(x) for x in os.listdir('/proc/%d/fd' % mnt.pid)}
        lower_limit(mnt.pid, min(set(range(len(fds) + 1)) - fds))
        os.kill(mnt.pid, signal.SIGTERM)
        mnt.wait_exit()
        assert not util.is_fuse_mounted(m)
    finally:
        mnt.cleanup()
    for i in range(n):
        assert util.read_file(os.path.join(b, 'f%d' % i)) == content(i)
