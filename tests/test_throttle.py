"""Dirty throttling through a mount: who gets paused, and that a pause holds
a reply, never a thread (fusefs/defer.c).

Every test mounts its own foliofs, so that the stats start from zero.
Nothing here asserts that something is fast or slow: the assertions are on
the stats, on which writes returned and with what, and on things
completing at all (with generous timeouts that only guard against hangs).

To keep a writer paused for as long as a test needs, most tests mount with
a small dirty_bytes and fault=write:EIO: the flusher runs (with no flusher
nobody is throttled) but cannot write anything back, so once the charge
passes the hard limit the throttler pauses the writer again and again until
something (the fault removed and a sync, a switch of policy, a signal, the
daemon's exit) lets it go.

Writers are separate processes (the throttler keys its state by pid) that
report each write on stdout: "S i" before write i, "D i n" after it
returned n, "E i errno" if it failed (and then stop), "END" when done, and
"SIG" when SIGUSR1 arrives (it is caught, to interrupt a write).
"""

import contextlib
import errno
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import conftest
from util import Mount, poll, set_fault, set_tunable, stats

KiB = 1 << 10
MiB = 1 << 20

# Generous: only guards against a hang; nothing is asserted about speed.
HANG = 60

WRITER = r'''
import os, signal, sys
signal.signal(signal.SIGUSR1, lambda *a: print('SIG', flush=True))
path, chunk, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(count):
    print('S', i, flush=True)
    try:
        n = os.pwrite(fd, i.to_bytes(8, 'little') * (chunk // 8), i * chunk)
    except OSError as e:
        print('E', i, e.errno, flush=True)
        sys.exit(0)
    print('D', i, n, flush=True)
print('END', flush=True)
'''


def chunk_data(i, chunk):
    return i.to_bytes(8, 'little') * (chunk // 8)


class Writer:
    """A child process writing COUNT chunks of CHUNK bytes to PATH, one
    pwrite each, reporting every write (see the module docstring)."""

    def __init__(self, path, chunk, count):
        self.path, self.chunk, self.count = path, chunk, count
        self.proc = subprocess.Popen([sys.executable, '-c', WRITER, path, str(chunk),
                                      str(count)], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self._lines = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self._lock:
                self._lines.append(line.decode(errors='replace').split())

    def lines(self):
        with self._lock:
            return list(self._lines)

    def started(self):
        """Index of the last write started, or -1."""
        s = [int(l[1]) for l in self.lines() if l[0] == 'S' and len(l) == 2]
        return s[-1] if s else -1

    def result(self, i):
        """('D', n) or ('E', errno) of write I, or None if it has not returned."""
        for l in self.lines():
            if l[0] in ('D', 'E') and int(l[1]) == i:
                return (l[0], int(l[2]))
        return None

    def done(self):
        return self.proc.poll() is not None

    def wait(self, timeout=HANG):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail('writer of %s did not finish within %d s; its log: %s'
                        % (self.path, timeout, self.lines()[-5:]))
        self._reader.join(timeout)
        return self.lines()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def watched(mount):
    """Let conftest's watchdog abort MOUNT's connection when the test times
    out, so that a daemon that stops serving (the bug these tests look for)
    fails the test instead of leaving it blocked in a read of the mount."""
    conftest._active_mounts.append(mount)
    try:
        yield mount
    finally:
        conftest._active_mounts.remove(mount)


def held(mnt):
    return stats(mnt)['throttled_writers']


def over_limit(st):
    """Whether the charge is at the hard limit, where a writer's pause
    only ends when the charge falls (or something lets it go early)."""
    return st['nr_dirty'] >= max(st['dirty_thresh'], st['dirty_limit'])


def wait_held(mnt, n, writers):
    """Wait until N writers are held with the charge at the hard limit;
    fail (without hanging) otherwise.  With the write fault on, nothing
    lowers the charge, so a writer held then stays held: its pause was
    reckoned at the limit (an earlier, shorter pause has no successor)."""
    if not poll(lambda: (lambda st: st['throttled_writers'] >= n and over_limit(st))(
            stats(mnt)), HANG):
        pytest.fail('%d writers never held at the limit (stats %s; writers %s)'
                    % (n, stats(mnt), [w.lines()[-3:] for w in writers]))


def sync_all(mnt):
    """Write back every file through MNT/.foliofs/sync.  Not fsync(2) of a
    writer's file: a writer held in a write keeps that file's inode lock
    (as a task paused in balance_dirty_pages() keeps i_rwsem), so an
    fsync of the same file waits for the writer it should release."""
    fd = os.open(os.path.join(mnt, '.foliofs', 'sync'), os.O_WRONLY)
    try:
        assert os.write(fd, b'1\n') == 2
    finally:
        os.close(fd)


def drain(mnt):
    """Let writeback succeed again and write everything back."""
    set_fault(mnt, 'off')
    sync_all(mnt)


# Nothing can be written back until the fault is removed, and the hard
# limit is small: a writer past it stays held.
HOLD_OPTS = ['flushers=1', 'fault=write:EIO', 'dirty_bytes=8M',
             'dirty_expire_ms=600000', 'writeback_interval_ms=600000',
             'cache_size=256M']


# --------------------------------------------------------------------------
# (a) the seed: per-folio charging throttles 8 KiB updates of a large file

@pytest.mark.timeout(300)
@pytest.mark.parametrize('account', ['folio', 'page'])
def test_seed_random_overwrites(dirs, account):
    """The seed's scenario: a 512 MiB table read sequentially into 2 MiB
    folios, then 3072 random 8 KiB updates from one process, with a 64 MiB
    dirty limit (freerun up to 48 MiB).

    Under dirty_account=folio every update of a clean folio charges the
    whole 2 MiB, so the writer is paused while the exact dirty bytes are a
    small fraction of the limit.  Under dirty_account=page the updates
    charge 24 MiB at most, under the freerun point: nobody is paused.

    Writeback is in this test's hands: a flusher runs, but an injected
    write fault keeps it from cleaning anything except when the test,
    seeing the writer held, lifts the fault and syncs everything.  Left to
    itself the outcome would depend on whether the flusher keeps up with
    the writer (on a fast backing store it often does, and nothing is
    paused under either policy); this way the writer can only get through
    its updates under folio by being paused at the limit, and under page
    it is never stopped."""
    _, b, m = dirs
    limit = 64 * MiB
    nfolios, updates = 256, 3072
    table = os.urandom(2 * MiB) * nfolios
    with open(os.path.join(b, 'table'), 'wb') as f:
        f.write(table)
    opts = ['dirty_account=' + account, 'cache_size=1G', 'folio_size=2M',
            'dirty_bytes=%d' % limit, 'flushers=1', 'dirty_expire_ms=600000',
            'writeback_interval_ms=600000']
    with Mount(b, m, options=opts, expect_errors=True) as mnt, watched(mnt):
        path = os.path.join(m, 'table')
        with open(path, 'rb', buffering=0) as f:
            for i in range(nfolios):
                assert f.read(2 * MiB) == table[i * 2 * MiB:(i + 1) * 2 * MiB]
        set_fault(m, 'write:EIO')
        before = stats(m)
        # The updates come from a process of their own (the throttler keys
        # its state by pid).
        script = r'''
import os, random, sys
fd = os.open(sys.argv[1], os.O_RDWR)
rng = random.Random(9)
data = os.urandom(8192)
for i in range(int(sys.argv[2])):
    assert os.pwrite(fd, data, rng.randrange(0, int(sys.argv[3])) * 8192) == 8192
os.close(fd)
'''
        proc = subprocess.Popen([sys.executable, '-c', script, path, str(updates),
                                 str(nfolios * 2 * MiB // 8192)])
        holds, exact_held = 0, 0
        deadline = time.monotonic() + 240

        def held_or_done():
            """The writer done, or held at the hard limit (task rate 0):
            with nothing written back meanwhile that state lasts until the
            test drains, however slowly it looks."""
            if proc.poll() is not None:
                return 'done'
            st = stats(m)
            return st if st['throttled_writers'] and st['task_ratelimit'] == 0 else None
        try:
            while True:
                st = poll(held_or_done, max(deadline - time.monotonic(), 0), 0.05)
                if not st:
                    pytest.fail('updates not done; stats %s' % stats(m))
                if st == 'done':
                    break
                holds += 1
                exact_held = max(exact_held, st['dirty_bytes_exact'])
                drain(m)
                set_fault(m, 'write:EIO')
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        assert proc.returncode == 0
        set_fault(m, 'off')
        after = stats(m)
        events = after['throttle_events'] - before['throttle_events']
        print('\n%s: %d pauses, %d ms paused, writer seen held %d times with at most '
              '%d KiB exact dirty, limit %d MiB'
              % (account, events, after['throttle_ms'] - before['throttle_ms'], holds,
                 exact_held // KiB, limit // MiB))
        if account == 'folio':
            assert events > 0 and holds > 0, after
            # Held at the limit with about one 8 KiB update per 2 MiB folio.
            assert exact_held <= limit // 16, exact_held
        else:
            assert events == 0 and holds == 0, after
        assert after['throttled_writers'] == 0


# --------------------------------------------------------------------------
# (b) a switch of policy releases held writers

@pytest.mark.timeout(180)
def test_switch_to_none_releases_held_writer(dirs):
    """A writer held above the hard limit (nothing is written back) gets
    its reply, and writes everything, once throttle is switched to none.
    (Held writers are re-asked at once when a setting changes; without
    that they would still be let go at their next deadline, so this checks
    the release, not its promptness.)"""
    _, b, m = dirs
    chunk, count = 256 * KiB, 64      # 16 MiB: twice the limit
    with Mount(b, m, options=HOLD_OPTS, expect_errors=True) as mnt, watched(mnt):
        w = Writer(os.path.join(m, 'f'), chunk, count)
        try:
            wait_held(m, 1, [w])
            stuck = w.started()
            assert w.result(stuck) is None and not w.done()
            set_tunable(m, 'throttle', 'none')
            lines = w.wait()
            assert lines[-1] == ['END'], lines[-5:]
            assert w.result(stuck) == ('D', chunk)
            assert all(w.result(i) == ('D', chunk) for i in range(count))
            assert poll(lambda: held(m) == 0, HANG), stats(m)
            drain(m)
        finally:
            w.kill()
        with open(os.path.join(m, 'f'), 'rb') as f:
            for i in (0, stuck, count - 1):
                f.seek(i * chunk)
                assert f.read(chunk) == chunk_data(i, chunk)


# --------------------------------------------------------------------------
# (c) paused writers hold no thread

@pytest.mark.timeout(150)
def test_paused_writers_hold_no_thread(dirs):
    """With two worker threads at most (max_threads=2), three writers are
    held at the limit at once; meanwhile another process reads and writes
    other files and those requests are served.  A pause that slept in a
    worker thread could hold two writers at most, and then nothing else
    (not even the stats read) would be served."""
    _, b, m = dirs
    chunk, count = 256 * KiB, 64      # each writer alone is twice the limit
    with Mount(b, m, options=HOLD_OPTS + ['max_threads=2'], expect_errors=True) as mnt, watched(mnt):
        other = os.urandom(4 * MiB)
        set_fault(m, 'off')
        with open(os.path.join(m, 'other'), 'wb') as f:
            f.write(other)
            f.flush()
            os.fsync(f.fileno())
        set_fault(m, 'write:EIO')
        writers = [Writer(os.path.join(m, 'w%d' % k), chunk, count) for k in range(3)]
        try:
            wait_held(m, 3, writers)
            assert not any(w.done() for w in writers)

            # Reads of another file by another process, while all three
            # writers are held (they still are afterwards: nothing has
            # been written back).
            script = r'''
import os, sys, hashlib
with open(sys.argv[1], 'rb') as f:
    print(hashlib.sha256(f.read()).hexdigest())
os.stat(sys.argv[1]); os.listdir(os.path.dirname(sys.argv[1]))
'''
            r = subprocess.run([sys.executable, '-c', script, os.path.join(m, 'other')],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=HANG)
            assert r.stdout.decode().split()[0] == hashlib.sha256(other).hexdigest(), r.stdout
            assert held(m) == 3

            # A write of another file by another process: it is paused like
            # everyone else (the limit is global), so write the data back
            # (a request served by a free thread) until every writer and
            # the other write are done.
            ow = Writer(os.path.join(m, 'other2'), 64 * KiB, 4)
            writers.append(ow)
            deadline = time.monotonic() + HANG * 2
            set_fault(m, 'off')
            while not all(w.done() for w in writers):
                if time.monotonic() > deadline:
                    pytest.fail('writers not done: %s' % [w.lines()[-3:] for w in writers])
                sync_all(m)
                time.sleep(0.05)
            for w in writers:
                lines = w.wait()
                assert lines[-1] == ['END'], lines[-5:]
            assert all(ow.result(i) == ('D', 64 * KiB) for i in range(4))
        finally:
            for w in writers:
                w.kill()


# --------------------------------------------------------------------------
# (d) held writers at exit

@pytest.mark.timeout(180)
def test_exit_answers_held_writers(dirs):
    """SIGTERM while writers are held (an unmount proper would be refused:
    their files are open): the daemon answers every held write, as the
    success it is, before it lets go of the mount, exits 0, and the data of
    every write that was answered is in the backing files."""
    _, b, m = dirs
    chunk, count = 256 * KiB, 64
    mnt = Mount(b, m, options=HOLD_OPTS, expect_errors=True)
    writers = []
    with mnt, watched(mnt):
        try:
            writers = [Writer(os.path.join(m, 'w%d' % k), chunk, count) for k in range(2)]
            wait_held(m, 2, writers)
            stuck = [w.started() for w in writers]
            assert all(w.result(i) is None for w, i in zip(writers, stuck))
            # The data must be written back at exit.  (Without the fault the
            # flusher may release the writers before the signal lands,
            # after its retry backoff; the assertions hold either way.)
            set_fault(m, 'off')
            mnt.proc.send_signal(signal.SIGTERM)
            mnt.wait_exit()
            mnt._unmounted = True
            for w, i in zip(writers, stuck):
                lines = w.wait()
                assert w.result(i) == ('D', chunk), lines[-5:]
                # What comes after is refused by the closed connection.
                if lines[-1] != ['END']:
                    assert lines[-1][0] == 'E' and int(lines[-1][2]) in (
                        errno.ENOTCONN, errno.ECONNABORTED), lines[-5:]
        finally:
            for w in writers:
                w.kill()
    for k, w in enumerate(writers):
        answered = [i for i in range(count) if w.result(i) == ('D', chunk)]
        assert answered
        with open(os.path.join(b, 'w%d' % k), 'rb') as f:
            for i in answered:
                f.seek(i * chunk)
                assert f.read(chunk) == chunk_data(i, chunk), (k, i)


# --------------------------------------------------------------------------
# (e) an interrupted held write

@pytest.mark.timeout(180)
def test_interrupt_answers_held_write(dirs):
    """A signal to a writer held above the hard limit makes the kernel
    interrupt its WRITE; the data is in the cache, so the daemon answers
    at once with success (the kernel would otherwise wait for the reply,
    and nothing here would ever end the pause: nothing is written back).
    The writer then goes on and is held again (not necessarily at its very
    next write: the throttler may credit the time it was held)."""
    _, b, m = dirs
    chunk, count = 256 * KiB, 64
    with Mount(b, m, options=HOLD_OPTS, expect_errors=True) as mnt, watched(mnt):
        w = Writer(os.path.join(m, 'f'), chunk, count)
        try:
            wait_held(m, 1, [w])
            stuck = w.started()
            assert w.result(stuck) is None
            charge = stats(m)['nr_dirty']
            w.proc.send_signal(signal.SIGUSR1)
            if not poll(lambda: w.result(stuck) is not None, HANG):
                pytest.fail('interrupted write %d never answered: %s'
                            % (stuck, w.lines()[-5:]))
            assert w.result(stuck) == ('D', chunk)
            assert poll(lambda: ['SIG'] in w.lines(), HANG)
            # Nothing was written back to make room: the charge is still
            # over the limit, and the writer is held again.
            assert stats(m)['nr_dirty'] >= charge
            assert poll(lambda: (w.started() > stuck and held(m) == 1 and
                                 w.result(w.started()) is None), HANG), \
                (stats(m), w.lines()[-5:])
            set_fault(m, 'off')
            while not w.done():
                sync_all(m)
                time.sleep(0.05)
            assert w.wait()[-1] == ['END']
        finally:
            w.kill()


def test_pinned_limit_syncs_unsynced_data(dirs):
    """A pinned limit far below the dirty background threshold: data
    written back but not yet synced pins its folios, and only a sync
    releases them.  The flushers must sync when pinned memory is over its
    background threshold, not only when unsynced memory is over the dirty
    one, or a writer held by the pinned limit waits forever (the
    simulator found this; it held writers with dirty_pinned_ratio=5 and
    no fsync).  32 MiB are written 1 MiB at a time with no fsync under an
    8 MiB pinned limit; every write must return (the 40 s bound is a hang
    guard) and the pinned memory ends under the limit."""
    _, b, m = dirs
    opts = ['dirty_account=page', 'folio_size=2M', 'cache_size=512M',
            'dirty_pinned_bytes=8M', 'flushers=1', 'writeback_interval_ms=100']
    data = os.urandom(MiB) * 32
    with Mount(b, m, options=opts) as mnt:
        done = threading.Event()
        failure = []

        def writer():
            try:
                fd = os.open(os.path.join(m, 'f'), os.O_WRONLY | os.O_CREAT, 0o644)
                try:
                    for off in range(0, len(data), MiB):
                        assert os.pwrite(fd, data[off:off + MiB], off) == MiB
                finally:
                    os.close(fd)
            except Exception as e:   # reported below
                failure.append(e)
            done.set()

        t = threading.Thread(target=writer, daemon=True)
        t.start()
        if not done.wait(40):
            st = stats(m)
            set_tunable(m, 'dirty_pinned_bytes', '0')   # let the writer finish
            t.join(20)
            pytest.fail('the writer was held for 40 s: pinned %d, unsynced %d, '
                        'dirty %d' % (st['pinned_bytes'], st['unsynced_bytes'],
                                      st['dirty_bytes_exact']))
        assert not failure, failure
        st = poll(lambda: (lambda s: s if s['pinned_bytes'] <= 8 * MiB else None)(stats(m)), 30)
        assert st, 'pinned memory stays over the limit: %r' % stats(m)
        mnt.umount()
    with open(os.path.join(b, 'f'), 'rb') as f:
        assert f.read() == data
