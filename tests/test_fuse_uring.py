"""FUSE over io_uring (-o uring=auto|on|off, fusefs/uring.c).

The kernel offers the ring only while /sys/module/fuse/parameters/enable_uring
is Y: the tests that need it set it (as root) and put the old value back.
That requests really came over the ring is checked on the daemon's side
(fuse_uring_requests in .foliofs/stats), not inferred from speed.

The existing mount tests run over the ring too with
FOLIOFS_EXTRA_OPTIONS=uring=on (tests/util.py) and enable_uring set to Y
(.ci/run has a stage that does).
"""

import errno
import hashlib
import os
import signal
import subprocess
import sys
import threading

import pytest

import conftest
import util
from util import Mount, poll, run_foliofs, set_fault, stats

ENABLE = '/sys/module/fuse/parameters/enable_uring'
MiB = 1 << 20
HANG = 60


def set_enable(value):
    with open(ENABLE, 'w') as f:
        f.write(value)


@pytest.fixture
def enable_uring():
    """Let the kernel offer FUSE over io_uring for the test; yields the
    function that sets the parameter (restored afterwards)."""
    if os.geteuid() != 0:
        pytest.skip('needs root to set %s' % ENABLE)
    if not os.path.exists(ENABLE):
        pytest.skip('kernel without FUSE over io_uring (%s missing)' % ENABLE)
    with open(ENABLE) as f:
        old = f.read().strip()
    set_enable('Y')
    try:
        yield set_enable
    finally:
        set_enable(old)


@pytest.fixture
def mounted(dirs, enable_uring):
    """A uring=on mount (later options may override it) whose connection
    conftest's watchdog aborts on a hang (so a stalled queue fails the test
    instead of blocking it)."""
    _, b, m = dirs

    def start(*options, expect_errors=False):
        mnt = Mount(b, m, options=['uring=on'] + list(options),
                    expect_errors=expect_errors)
        mnt.start()
        conftest._active_mounts.append(mnt)
        started.append(mnt)
        mnt.wait_for_mount()
        # The rings are set up by the thread that answered INIT, after the
        # reply: the first requests, wait_for_mount's among them, can be
        # served over /dev/fuse before the ring's notice is printed.
        uring = [o.split('=', 1)[1] for o in ['uring=on'] + list(options)
                 if o.startswith('uring=')][-1]
        if uring == 'on' and not expect_errors:
            poll(lambda: 'uring: serving requests over io_uring' in mnt.output(), HANG)
        return mnt

    started = []
    try:
        yield start
    finally:
        for mnt in started:
            mnt.cleanup()
            conftest._active_mounts.remove(mnt)


def ring_requests(m):
    return stats(m)['fuse_uring_requests']


def worker(m, n, errors):
    """Write, fsync, read back, rename and unlink files of several sizes."""
    try:
        for i in range(8):
            size = (i * 37 + n * 11) % 700 * 1024 + 123
            data = hashlib.sha256(b'%d.%d' % (n, i)).digest() * (size // 32 + 1)
            data = data[:size]
            path = os.path.join(m, 't%d-%d' % (n, i))
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                for off in range(0, size, 64 * 1024):
                    os.pwrite(fd, data[off:off + 64 * 1024], off)
                os.fsync(fd)
            finally:
                os.close(fd)
            with open(path, 'rb') as f:
                if f.read() != data:
                    errors.append('%s read back differs' % path)
            if i % 2:
                os.rename(path, path + '.r')
            elif i % 3:
                os.unlink(path)
    except OSError as e:
        errors.append('worker %d: %r' % (n, e))


def expected_files(nthreads):
    names = set()
    for n in range(nthreads):
        for i in range(8):
            if i % 2:
                names.add('t%d-%d.r' % (n, i))
            elif not i % 3:
                names.add('t%d-%d' % (n, i))
    return names


def test_requests_come_over_the_ring(dirs, mounted):
    """Data written by several threads, fsynced, read back, renamed and
    unlinked over the ring is all there after unmount, and the daemon
    served those requests from ring entries."""
    _, b, m = dirs
    mnt = mounted()
    assert 'uring: serving requests over io_uring' in mnt.output()
    before = ring_requests(m)
    errors = []
    threads = [threading.Thread(target=worker, args=(m, n, errors)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG)
    assert not any(t.is_alive() for t in threads), 'a worker hangs'
    assert not errors, errors
    assert set(os.listdir(m)) == expected_files(6)
    # 6 threads x 8 files: creates, writes, fsyncs, reads, renames...
    assert ring_requests(m) - before >= 6 * 8 * 4
    mnt.umount()
    assert set(os.listdir(b)) == expected_files(6)


def ring_threads(pid):
    """{queue: [CPUs each of its threads may run on, as sets]} of the
    daemon's ring threads (named ffs-uring-QUEUE)."""
    out = {}
    for tid in os.listdir('/proc/%d/task' % pid):
        with open('/proc/%d/task/%s/comm' % (pid, tid)) as f:
            name = f.read().strip()
        if name.startswith('ffs-uring-'):
            out.setdefault(int(name[len('ffs-uring-'):]), []).append(
                os.sched_getaffinity(int(tid)))
    return out


@pytest.mark.parametrize('pin', ['on', 'off'])
def test_queue_threads_run_on_their_cpu(dirs, mounted, pin):
    """uring_pin=on (the default) runs each queue's threads on the CPU the
    queue belongs to, where the daemon may run there; off leaves them
    where the daemon may run.  Requests are served either way."""
    _, _, m = dirs
    mnt = mounted() if pin == 'on' else mounted('uring_pin=off')
    allowed = os.sched_getaffinity(mnt.pid)
    threads = ring_threads(mnt.pid)
    # A queue for every possible CPU, each with its threads.
    assert sorted(threads) == list(range(os.sysconf('SC_NPROCESSORS_CONF'))), threads
    for q, sets in threads.items():
        want = {q} if pin == 'on' and q in allowed else allowed
        assert all(s == want for s in sets), (q, sets, allowed)
    assert ('each queue on its CPU' in mnt.output()) == (pin == 'on')
    before = ring_requests(m)
    errors = []
    worker(m, 0, errors)
    assert not errors, errors
    assert ring_requests(m) - before >= 8 * 4


def test_held_write_reply_leaves_through_its_entry(dirs, mounted):
    """A write the throttler holds (its reply sent later from the timer
    thread) is answered through its ring entry once writeback works again,
    and the queue keeps serving other requests meanwhile."""
    _, b, m = dirs
    mnt = mounted('flushers=1', 'fault=write:EIO', 'dirty_bytes=8M',
                  'dirty_expire_ms=600000', 'writeback_interval_ms=600000',
                  'cache_size=256M', expect_errors=True)
    writer = subprocess.Popen(
        [sys.executable, '-c',
         'import os, sys\n'
         'fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)\n'
         'for i in range(64): os.pwrite(fd, b"w" * (1 << 20), i << 20)\n'
         'print("END", flush=True)\n',
         os.path.join(m, 'big')], stdout=subprocess.PIPE, text=True)
    try:
        assert poll(lambda: stats(m)['throttled_writers'] >= 1, HANG), stats(m)
        # Held: other requests are still served over the ring (no writes:
        # with writeback failing, those would be held as well).
        before = ring_requests(m)
        for i in range(20):
            os.mkdir(os.path.join(m, 'd%d' % i))
            os.stat(os.path.join(m, 'd%d' % i))
        assert ring_requests(m) >= before + 40
        assert writer.poll() is None
        # Writeback works again; syncs (no flusher runs on its own here)
        # let the writer's pauses end until it is done.
        set_fault(m, 'off')
        assert poll(lambda: util.ctl_write(m, 'sync', value='1') or
                    writer.poll() is not None, HANG, step=0.2)
        out, _ = writer.communicate(timeout=HANG)
        assert out.strip() == 'END'
    finally:
        writer.kill()
        writer.wait()
    mnt.umount()
    assert os.path.getsize(os.path.join(b, 'big')) == 64 * MiB


def test_held_replies_beyond_a_queues_threads(dirs, mounted):
    """Each held write reply keeps its ring thread and entry (uring.c), so
    the queue starts threads to stay serving: with 20 writers held on one
    CPU's queue, more than the threads or entries any queue starts with,
    requests from that CPU are still served over the ring, and every
    writer finishes once writeback works again."""
    _, b, m = dirs
    mnt = mounted('flushers=1', 'fault=write:EIO', 'dirty_bytes=8M',
                  'dirty_expire_ms=600000', 'writeback_interval_ms=600000',
                  'cache_size=256M', expect_errors=True)
    nwriters = 20
    threads_before = stats(m)['fuse_uring_threads']
    # The kernel sends a request to the queue of the CPU its caller runs on.
    code = ('import os, sys\n'
            'os.sched_setaffinity(0, {0})\n'
            'fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)\n'
            'for i in range(8): os.pwrite(fd, sys.argv[1][-2:].encode() * (1 << 19), i << 20)\n'
            'print("END", flush=True)\n')
    writers = [subprocess.Popen([sys.executable, '-c', code,
                                 os.path.join(m, 'w%02d' % i)],
                                stdout=subprocess.PIPE, text=True)
               for i in range(nwriters)]
    probe = ('import os, sys\n'
             'os.sched_setaffinity(0, {0})\n'
             'for i in range(20):\n'
             '    os.mkdir(os.path.join(sys.argv[1], "d%d" % i))\n'
             '    os.stat(os.path.join(sys.argv[1], "d%d" % i))\n')
    done = False
    try:
        assert poll(lambda: stats(m)['throttled_writers'] >= nwriters, HANG), stats(m)
        assert stats(m)['fuse_uring_threads'] >= threads_before + nwriters
        before = ring_requests(m)
        try:
            subprocess.run([sys.executable, '-c', probe, m], check=True, timeout=HANG)
        except subprocess.TimeoutExpired:
            pytest.fail('requests from CPU 0 not served with %d writes held' % nwriters)
        assert ring_requests(m) >= before + 40
        assert all(w.poll() is None for w in writers)
        set_fault(m, 'off')
        assert poll(lambda: util.ctl_write(m, 'sync', value='1') or
                    all(w.poll() is not None for w in writers), HANG, step=0.2)
        for w in writers:
            out, _ = w.communicate(timeout=HANG)
            assert out.strip() == 'END'
            assert w.returncode == 0
        done = True
    finally:
        if not done:
            mnt.abort()  # answers the held writes, which a kill cannot end
        for w in writers:
            w.kill()
            w.wait()
    mnt.umount()
    for i in range(nwriters):
        with open(os.path.join(b, 'w%02d' % i), 'rb') as f:
            assert f.read() == (b'%02d' % i) * (4 << 20)


def test_more_held_writers_than_a_queue_has_threads(dirs, mounted):
    """A queue starts at most 64 threads for held replies (uring.c); with
    80 writers paused on one CPU's queue it holds no more once one thread
    is left free, and answers the rest at once: requests from that CPU are
    still served, the writers it did not hold finish while the others are
    held, and every writer's data is there once writeback works again.
    (Before, the queue held every reply: with all 64 threads holding one,
    nothing from that CPU was served until a pause ended, and at the hard
    limit with writeback failing none does.)"""
    _, b, m = dirs
    mnt = mounted('flushers=1', 'fault=write:EIO', 'dirty_bytes=8M',
                  'dirty_expire_ms=600000', 'writeback_interval_ms=600000',
                  'cache_size=512M', expect_errors=True)
    nwriters, chunks, chunk = 80, 8, 256 << 10
    code = ('import os, sys\n'
            'os.sched_setaffinity(0, {0})\n'
            'fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)\n'
            'for i in range(%d): os.pwrite(fd, sys.argv[1][-2:].encode() * %d, i * %d)\n'
            'print("END", flush=True)\n' % (chunks, chunk // 2, chunk))
    writers = [subprocess.Popen([sys.executable, '-c', code,
                                 os.path.join(m, 'w%02d' % i)],
                                stdout=subprocess.PIPE, text=True)
               for i in range(nwriters)]
    probe = ('import os, sys\n'
             'os.sched_setaffinity(0, {0})\n'
             'for i in range(20):\n'
             '    os.mkdir(os.path.join(sys.argv[1], "d%d" % i))\n'
             '    os.stat(os.path.join(sys.argv[1], "d%d" % i))\n')
    done = False
    try:
        # Every writer is either held or done: nobody else writes back.
        assert poll(lambda: stats(m)['throttled_writers'] +
                    sum(w.poll() is not None for w in writers) >= nwriters, HANG), stats(m)
        held = stats(m)['throttled_writers']
        assert 0 < held < nwriters, stats(m)
        try:
            subprocess.run([sys.executable, '-c', probe, m], check=True, timeout=HANG)
        except subprocess.TimeoutExpired:
            pytest.fail('requests from CPU 0 not served with %d writes held' % held)
        set_fault(m, 'off')
        assert poll(lambda: util.ctl_write(m, 'sync', value='1') or
                    all(w.poll() is not None for w in writers), HANG, step=0.2)
        for w in writers:
            out, _ = w.communicate(timeout=HANG)
            assert out.strip() == 'END'
            assert w.returncode == 0
        done = True
    finally:
        if not done:
            mnt.abort()  # answers the held writes, which a kill cannot end
        for w in writers:
            w.kill()
            w.wait()
    mnt.umount()
    for i in range(nwriters):
        with open(os.path.join(b, 'w%02d' % i), 'rb') as f:
            assert f.read() == (b'%02d' % i) * (chunks * chunk // 2)


def test_kill_9_while_serving_over_the_ring(dirs, mounted):
    """kill -9 of a daemon serving over the ring ends the connection as it
    does over /dev/fuse: callers get ENOTCONN, nothing hangs, and what was
    fsynced before is in BACKING."""
    _, b, m = dirs
    mnt = mounted()
    util.write_file(os.path.join(m, 'kept'), b'k' * 100000)
    fd = os.open(os.path.join(m, 'kept'), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    assert ring_requests(m) > 0
    os.kill(mnt.pid, signal.SIGKILL)
    mnt.proc.wait(HANG)
    # ENOTCONN once the connection is down.  The kernel tears the dead
    # daemon's ring down asynchronously, after the process is gone: a
    # request queued to the ring meanwhile fails with ECANCELED or
    # ECONNABORTED instead (over /dev/fuse the window does not exist).
    def gone():
        try:
            os.stat(os.path.join(m, 'kept'))
        except OSError as e:
            assert e.errno in (errno.ENOTCONN, errno.ECONNABORTED, errno.ECANCELED), e
            return e.errno == errno.ENOTCONN
        pytest.fail('the mount still answers after kill -9')
    assert poll(gone, HANG)
    subprocess.run([util.FUSERMOUNT, '-u', '-z', m], check=True)
    assert util.read_file(os.path.join(b, 'kept')) == b'k' * 100000
    mnt._unmounted = True


def test_sigterm_unmounts_over_the_ring(dirs, mounted):
    """SIGTERM ends a ring mount cleanly: status 0, unmounted, data kept."""
    _, b, m = dirs
    mnt = mounted()
    util.write_file(os.path.join(m, 'f'), b'x' * 300000)
    assert ring_requests(m) > 0
    os.kill(mnt.pid, signal.SIGTERM)
    mnt.wait_exit()
    assert not util.is_fuse_mounted(m)
    assert os.path.getsize(os.path.join(b, 'f')) == 300000


def uring_lines(mnt):
    return [l for l in mnt.output().splitlines() if 'uring' in l]


def test_not_offered_mounts_over_dev_fuse(dirs, mounted, enable_uring):
    """With enable_uring N, uring=auto mounts over /dev/fuse and says why;
    the default (auto, not named) says nothing; uring=on is refused before
    mounting, naming the parameter."""
    _, b, m = dirs
    enable_uring('N')
    mnt = mounted('uring=auto')
    util.write_file(os.path.join(m, 'f'), b'y' * 5000)
    assert util.read_file(os.path.join(m, 'f')) == b'y' * 5000
    assert ring_requests(m) == 0
    assert uring_lines(mnt) == ['foliofs: uring: not used, %s is N: serving over /dev/fuse'
                                % ENABLE], mnt.output()
    mnt.umount()
    with Mount(b, m) as quiet:
        assert util.read_file(os.path.join(m, 'f')) == b'y' * 5000
        assert ring_requests(m) == 0
        quiet.umount()
        assert uring_lines(quiet) == [], quiet.output()
    r = run_foliofs('-f', '-o', 'uring=on', b, m)
    assert r.returncode == 2, r.stderr
    assert r.stderr.decode().strip() == \
        'foliofs: uring=on: %s is not Y (as root: echo Y > %s)' % (ENABLE, ENABLE)
    assert not util.is_fuse_mounted(m)


def test_single_threaded_mounts_over_dev_fuse(dirs, enable_uring):
    """-s asks for one thread: the ring, which serves from threads of its
    own, is not used; uring=auto says so, uring=on is refused."""
    _, b, m = dirs
    with Mount(b, m, options=['uring=auto'], args=['-s']) as mnt:
        util.write_file(os.path.join(m, 'f'), b'z' * 5000)
        assert util.read_file(os.path.join(m, 'f')) == b'z' * 5000
        assert ring_requests(m) == 0
        assert uring_lines(mnt) == [
            'foliofs: uring: not used with -s: serving over /dev/fuse']
    r = run_foliofs('-f', '-s', '-o', 'uring=on', b, m)
    assert r.returncode == 2, r.stderr
    assert 'uring=on: not with -s' in r.stderr.decode()
    assert not util.is_fuse_mounted(m)


WRITERS = r'''
import os, sys, threading
def w(i):
    fd = os.open(os.path.join(sys.argv[1], 'f%d' % i), os.O_RDWR | os.O_CREAT, 0o644)
    b = os.urandom(4096) * 16
    try:
        for k in range(1 << 30):
            os.pwrite(fd, b, (k % 256) * len(b))
            if k % 50 == 0:
                os.fsync(fd)
    except OSError:
        pass
ts = [threading.Thread(target=w, args=(i,)) for i in range(6)]
[t.start() for t in ts]
[t.join() for t in ts]
'''


@pytest.mark.parametrize('round', range(4))
def test_sigterm_under_load_over_the_ring(dirs, mounted, round):
    """SIGTERM while 6 threads write and fsync over the ring: the ring
    threads stop serving before the reply timer, the trace and the cache
    are torn down, so the daemon exits 0 without a broken invariant (and,
    under ASan, without a use after free)."""
    w, b, m = dirs
    mnt = mounted('trace=%s' % os.path.join(w, 't.trace'))
    writers = subprocess.Popen([sys.executable, '-c', WRITERS, m])
    try:
        start = ring_requests(m)
        # Requests are in flight on every queue a writer runs on.
        assert poll(lambda: ring_requests(m) > start + 2000, HANG)
        os.kill(mnt.pid, signal.SIGTERM)
        mnt.wait_exit(HANG)
    finally:
        writers.kill()
        writers.wait()


IO_URING_DISABLED = '/proc/sys/kernel/io_uring_disabled'


def test_on_refuses_when_the_ring_cannot_start(dirs, enable_uring):
    """uring=on with the ring offered but io_uring forbidden
    (kernel.io_uring_disabled=2): the daemon does not fall back to
    /dev/fuse but logs the reason, unmounts and exits non-zero."""
    if not os.path.exists(IO_URING_DISABLED):
        pytest.skip('no %s' % IO_URING_DISABLED)
    _, b, m = dirs
    with open(IO_URING_DISABLED) as f:
        old = f.read().strip()
    with open(IO_URING_DISABLED, 'w') as f:
        f.write('2')
    try:
        r = run_foliofs('-f', '-o', 'uring=on', b, m)
    finally:
        with open(IO_URING_DISABLED, 'w') as f:
            f.write(old)
    assert r.returncode == 1, r.stderr
    assert 'foliofs: error: uring=on: cannot set up the rings: %s' \
        % os.strerror(errno.EPERM) in r.stderr.decode().splitlines(), r.stderr
    assert not util.is_fuse_mounted(m)
