"""Write-back to the backing store: write amplification, background
flushers, durability, error reporting (errseq), injected faults, fault spec
validation, concurrency with flushers and truncation, and the backing_io
backends.

Every test mounts its own foliofs (stats and faults are per mount), so
counters start from zero and nothing else moves them.  Faults are set and
cleared through MOUNTPOINT/.foliofs/fault (grammar in writeback/wb_i.h).

Numbers (amplification, retries, CPU) are printed; run with ``-s`` or
``-rP`` to see them.
"""

import errno
import os
import random
import signal
import subprocess
import threading
import time

import pytest

import util
from util import FOLIOFS, FUSERMOUNT, Mount, get_fault, hash_path, poll, set_fault, stats

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


# --------------------------------------------------------------------------
# helpers





def first_diff(a, b):
    """Readable first difference of two byte strings."""
    n = min(len(a), len(b))
    i = next((k for k in range(0, n, 4096) if a[k:k + 4096] != b[k:k + 4096]), None)
    if i is not None:
        i = next(k for k in range(i, min(i + 4096, n)) if a[k] != b[k])
    elif len(a) != len(b):
        i = n
    else:
        return 'equal'
    return ('first difference at offset %d (block %d), lengths %d vs %d: %r vs %r'
            % (i, i // 4096, len(a), len(b), a[i:i + 16], b[i:i + 16]))


def assert_file(path, want, what='backing file'):
    got = util.read_file(path)
    assert got == want, '%s %s: %s' % (what, path, first_diff(got, want))




def cpu_seconds(pid):
    """utime + stime of PID in seconds."""
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    # fields[0] is field 3 (state): utime is field 14, stime field 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def fsync_errno(fd, datasync=False):
    """0, or the errno of fsync/fdatasync on FD."""
    try:
        (os.fdatasync if datasync else os.fsync)(fd)
        return 0
    except OSError as e:
        return e.errno


def ename(e):
    return errno.errorcode.get(e, str(e)) if e else 'success'


def uses_uring(mnt):
    return 'io_uring cannot be set up' not in mnt.output()


# --------------------------------------------------------------------------
# write amplification: the figure of DESIGN.md, written bytes this time

AMP_FILE = 1 * GiB
AMP_FOLIO = 2 * MiB
AMP_FOLIOS = AMP_FILE // AMP_FOLIO          # 512
AMP_SEED = 20250612


@pytest.mark.timeout(300)
@pytest.mark.parametrize('gran,size', [('block', 4 * KiB), ('block', 8 * KiB),
                                       ('folio', 4 * KiB), ('folio', 8 * KiB)],
                         ids=['block-4k', 'block-8k', 'folio-4k', 'folio-8k'])
def test_write_amplification(dirs, gran, size):
    """512 random overwrites, one per 2 MiB folio of a fully cached 1 GiB
    file: block granularity writes exactly the dirtied blocks (2 MiB for
    4 KiB writes, 4 MiB for 8 KiB), folio granularity every folio (1 GiB)."""
    _, b, m = dirs
    # folio_policy=fixed: the file in whole 2 MiB folios (kernel sizing
    # would make folios of the sequential writes' size).
    opts = ['folio_size=2M', 'folio_policy=fixed', 'block_size=4K', 'cache_size=1536M',
            'flushers=0', 'wb_granularity=' + gran]
    base = random.Random(AMP_SEED).randbytes(MiB)
    patches = util.experiment_patches(AMP_SEED + size, AMP_FOLIOS, AMP_FOLIO, size)
    expected = util.experiment_hash(base, patches, AMP_FOLIO)
    with Mount(b, m, options=opts) as mnt:
        path = os.path.join(m, 'big')
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            t = time.monotonic()
            for i in range(AMP_FILE // MiB):
                assert os.pwrite(fd, util.experiment_mib(i, base), i * MiB) == MiB
            s_seq = stats(m)
            os.fsync(fd)
            s0 = stats(m)
            t_seq = time.monotonic() - t
            for off, data in patches:
                assert os.pwrite(fd, data, off) == size
            s1 = stats(m)
            t = time.monotonic()
            os.fsync(fd)
            t_fsync = time.monotonic() - t
            s2 = stats(m)
        finally:
            os.close(fd)
        d_bytes = s2['backing_write_bytes'] - s0['backing_write_bytes']
        d_ios = s2['backing_write_ios'] - s0['backing_write_ios']
        d_sub = s2['backing_write_submits'] - s0['backing_write_submits']
        print('\n[%s %dK] sequential 1 GiB + fsync %.1f s; 512 writes dirtied %d bytes; '
              'fsync %.2f s wrote %d bytes in %d ios, %d submits (x%.1f of dirtied)'
              % (gran, size // KiB, t_seq, s1['dirty_bytes_exact'], t_fsync, d_bytes,
                 d_ios, d_sub, d_bytes / (AMP_FOLIOS * size)))

        # Nothing was written before the first fsync (flushers=0, no reclaim).
        assert s_seq['backing_write_bytes'] == 0
        assert s0['backing_write_bytes'] == AMP_FILE
        assert s0['nr_dirty'] == 0 and s0['dirty_bytes_exact'] == 0
        assert s1['backing_write_bytes'] == s0['backing_write_bytes'], \
            'written back before fsync'
        assert s1['dirty_bytes_exact'] == AMP_FOLIOS * size
        assert s1['backing_read_bytes'] == s0['backing_read_bytes'], \
            'cached (uptodate) blocks were read again'
        if gran == 'block':
            assert d_bytes == AMP_FOLIOS * size, \
                'block granularity wrote %d bytes for %d dirtied' % (d_bytes, AMP_FOLIOS * size)
            # No two patches are adjacent unless one ends a folio and the
            # next starts the following one; each other run is one I/O.
            assert d_ios <= AMP_FOLIOS
            if uses_uring(mnt):
                # io_uring: a batch of runs per system call, not one each.
                assert d_sub <= 2 * (AMP_FOLIOS // 64 + 1), (d_sub, d_ios)
        else:
            assert d_bytes == AMP_FILE, \
                'folio granularity wrote %d bytes, not every folio (%d)' % (d_bytes, AMP_FILE)
        assert s2['nr_dirty'] == 0 and s2['dirty_bytes_exact'] == 0
        assert hash_path(os.path.join(b, 'big')) == expected, \
            'the backing file differs from what was written'
        assert hash_path(path) == expected, 'the mount shows different data'
        mnt.umount()
    assert hash_path(os.path.join(b, 'big')) == expected


@pytest.mark.parametrize('folio,max_io,size,ios', [
    ('64K', '1M', 4 * MiB, 4),      # 64 folios merged into 1 MiB writes
    ('64K', '64K', 4 * MiB, 64),
    ('2M', '64K', 2 * MiB, 32),     # one 2 MiB run split into max_io writes
    ('2M', '1M', 4 * MiB, 4),
])
def test_max_io(dirs, folio, max_io, size, ios):
    """Contiguous dirty runs are merged across folios into writes of at most
    max_io bytes (writeback.h); a run larger than max_io is written in
    max_io pieces.  Folios of folio_size each (folio_policy=fixed): a batch
    collects at most 64 runs, so the write counts below are those of
    64 KiB and 2 MiB folios."""
    _, b, m = dirs
    data = random.Random(12).randbytes(size)
    with Mount(b, m, options=['flushers=0', 'folio_size=' + folio, 'folio_policy=fixed',
                              'max_io=' + max_io]) as mnt:
        fd = os.open(os.path.join(m, 'f'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, 0)
            s0 = stats(m)
            os.fsync(fd)
            s1 = stats(m)
        finally:
            os.close(fd)
        got = s1['backing_write_ios'] - s0['backing_write_ios']
        assert s1['backing_write_bytes'] - s0['backing_write_bytes'] == size
        assert got == ios, '%d bytes in %d writes with max_io=%s, folio_size=%s; want %d' % (
            size, got, max_io, folio, ios)
        assert_file(os.path.join(b, 'f'), data)
        mnt.umount()


# --------------------------------------------------------------------------
# background writeback

def test_background_writeback_by_age(dirs):
    """Dirty data older than dirty_expire_ms reaches the backing file
    without fsync, close or unmount."""
    _, b, m = dirs
    opts = ['writeback_interval_ms=100', 'dirty_expire_ms=200']
    rng = random.Random(1)
    data = rng.randbytes(3 * MiB + 777)
    with Mount(b, m, options=opts) as mnt:
        fd = os.open(os.path.join(m, 'aged'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            assert os.pwrite(fd, data, 0) == len(data)
            back = os.path.join(b, 'aged')
            got = poll(lambda: util.read_file(back) == data, 5)
            assert got, 'not written back within 5 s: %s' % first_diff(
                util.read_file(back), data)
            st = poll(lambda: (lambda s: s if s['nr_dirty'] == 0 else None)(stats(m)), 5)
            assert st, 'still dirty: %r' % stats(m)
            assert st['flusher_passes'] > 0
            assert st['backing_write_bytes'] >= len(data)
            # A second round: re-dirty part of it, again without fsync.
            patch = rng.randbytes(5000)
            os.pwrite(fd, patch, 12345)
            data = data[:12345] + patch + data[12345 + 5000:]
            assert poll(lambda: util.read_file(back) == data, 5), \
                first_diff(util.read_file(back), data)
        finally:
            os.close(fd)
        mnt.umount()


def test_background_writeback_by_threshold(dirs):
    """dirty_background_bytes=1M and a long expire: writing 8 MiB wakes the
    flushers, which bring the dirty charge back under the threshold; below
    the threshold nothing is written."""
    _, b, m = dirs
    opts = ['dirty_background_bytes=1M', 'dirty_expire_ms=600000',
            'writeback_interval_ms=100', 'folio_size=64K']
    rng = random.Random(2)
    data = rng.randbytes(8 * MiB)
    chunk = 64 * KiB
    with Mount(b, m, options=opts) as mnt:
        s = stats(m)
        assert s['bg_thresh'] == MiB // 4096
        fd = os.open(os.path.join(m, 'bulk'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # Below the threshold (and not expired): several flusher
            # intervals pass and nothing is written.
            assert os.pwrite(fd, data[:512 * KiB], 0) == 512 * KiB
            t_end = time.monotonic() + 0.5
            while time.monotonic() < t_end:
                assert stats(m)['backing_write_bytes'] == 0, \
                    'written back below the background threshold'
                time.sleep(0.05)
            peak = 0
            t0 = time.monotonic()
            for off in range(512 * KiB, len(data), chunk):
                assert os.pwrite(fd, data[off:off + chunk], off) == chunk
                peak = max(peak, stats(m)['nr_dirty'])
            t_loop = time.monotonic() - t0
            assert poll(lambda: stats(m)['backing_write_bytes'] > 0, 5), \
                'no background writeback over the threshold: %r' % stats(m)
            st = poll(lambda: (lambda s: s if s['nr_dirty'] <= s['bg_thresh'] else None)(stats(m)), 5)
            assert st, 'dirty charge stays over the threshold: %r' % stats(m)
            print('\nwrote 7.5 MiB in %.2f s; peak nr_dirty %d pages (threshold %d), final %r'
                  % (t_loop, peak, st['bg_thresh'], {k: st[k] for k in
                                             ('nr_dirty', 'backing_write_bytes',
                                              'flusher_passes')}))
            # How far the writer runs ahead of the flushers depends on
            # scheduling: the peak is printed, not asserted.
            os.fsync(fd)
        finally:
            os.close(fd)
        assert_file(os.path.join(b, 'bulk'), data)
        mnt.umount()


def test_background_writeback_stops_at_threshold(dirs):
    """Over the background threshold the flushers write until the charge is
    under it, not everything (the kernel's wb_over_bg_thresh() check between
    chunks).  32 MiB are dirtied while backing writes fail, so that no
    writeback can happen meanwhile; once the fault is cleared, with an
    8 MiB threshold, between 4 and 8 MiB stay dirty until fsync: a chunk
    (the kernel's writeback_chunk_size()) is min(avg_write_bw / 2,
    dirty_limit / 8) + 4 MiB rounded down to 4 MiB, 4 or 8 MiB with
    dirty_bytes=40M, and 32 MiB less such chunks first falls to 8 or 4."""
    _, b, m = dirs
    opts = ['dirty_background_bytes=8M', 'dirty_bytes=40M', 'dirty_expire_ms=600000',
            'writeback_interval_ms=100', 'folio_size=64K', 'fault=write:EIO']
    data = random.Random(3).randbytes(32 * MiB)
    with Mount(b, m, options=opts, expect_errors=True) as mnt:
        fd = os.open(os.path.join(m, 'bulk'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            assert os.pwrite(fd, data, 0) == len(data)
            assert stats(m)['dirty_bytes_exact'] == len(data)
            set_fault(m, 'off')

            def settled():
                """Under the threshold, and three flusher passes begun
                after that (the two flushers each ended one between) wrote
                nothing more."""
                s1 = stats(m)
                if s1['nr_dirty'] > s1['bg_thresh']:
                    return None
                if not poll(lambda: stats(m)['flusher_passes'] >= s1['flusher_passes'] + 3,
                            10):
                    return None
                s2 = stats(m)
                return s2 if s2['dirty_bytes_exact'] == s1['dirty_bytes_exact'] else None
            st = poll(settled, 30)
            assert st, 'background writeback did not settle: %r' % stats(m)
            print('\nsettled: %r' % {k: st[k] for k in ('nr_dirty', 'bg_thresh',
                                                        'dirty_bytes_exact',
                                                        'backing_write_bytes')})
            assert 4 * MiB <= st['dirty_bytes_exact'] <= 8 * MiB
            # The failed writes are reported once (errseq), then it is clean.
            assert fsync_errno(fd) == errno.EIO
            os.fsync(fd)
            assert stats(m)['dirty_bytes_exact'] == 0
        finally:
            os.close(fd)
        assert_file(os.path.join(b, 'bulk'), data)
        mnt.umount()


# --------------------------------------------------------------------------
# durability

def test_fsynced_data_survives_kill_9(dirs):
    _, b, m = dirs
    rng = random.Random(3)
    mnt = Mount(b, m, options=['writeback_interval_ms=600000', 'dirty_expire_ms=600000'])
    mnt.start()
    try:
        mnt.wait_for_mount()
        files = {}
        for i in range(4):
            name = 'f%d' % i
            data = bytearray(rng.randbytes(rng.randrange(64 * KiB, 3 * MiB)))
            fd = os.open(os.path.join(m, name), os.O_RDWR | os.O_CREAT, 0o644)
            os.pwrite(fd, data, 0)
            # Unaligned overwrites, some past the end.
            for _ in range(20):
                off = rng.randrange(0, len(data) + 10000)
                patch = rng.randbytes(rng.randrange(1, 20000))
                os.pwrite(fd, patch, off)
                if off > len(data):
                    data.extend(bytes(off - len(data)))
                data[off:off + len(patch)] = patch
            (os.fdatasync if i % 2 else os.fsync)(fd)
            files[name] = bytes(data)
            # Written after the fsync, never synced: may be lost.
            os.pwrite(fd, b'unsynced', 0)
            os.close(fd)
        os.kill(mnt.pid, signal.SIGKILL)
        mnt.proc.wait(30)
        assert mnt.proc.returncode == -signal.SIGKILL
    finally:
        subprocess.run([FUSERMOUNT, '-u', '-z', m], stderr=subprocess.DEVNULL)
        mnt.cleanup()
    assert not util.is_fuse_mounted(m)
    for name, data in files.items():
        got = util.read_file(os.path.join(b, name))
        # The last write ('unsynced' at 0) may or may not have made it.
        assert len(got) == len(data), name
        assert got[8:] == data[8:], '%s: %s' % (name, first_diff(got[8:], data[8:]))
        assert got[:8] in (data[:8], b'unsynced'), name


def test_clean_unmount_writes_everything(dirs):
    """Never fsynced, files closed or not: after fusermount3 -u and the
    daemon's exit, the backing holds every byte."""
    _, b, m = dirs
    rng = random.Random(4)
    files = {}
    with Mount(b, m, options=['writeback_interval_ms=600000',
                              'dirty_expire_ms=600000']) as mnt:
        os.mkdir(os.path.join(m, 'sub'))
        for i in range(6):
            name = os.path.join('sub' if i % 2 else '', 'g%d' % i)
            data = bytearray(rng.randbytes(rng.randrange(1, 4 * MiB)))
            fd = os.open(os.path.join(m, name), os.O_RDWR | os.O_CREAT, 0o644)
            os.pwrite(fd, data, 0)
            for _ in range(10):
                off = rng.randrange(0, len(data))
                patch = rng.randbytes(rng.randrange(1, 9000))
                os.pwrite(fd, patch, off)
                end = off + len(patch)
                if end > len(data):
                    data.extend(bytes(end - len(data)))
                data[off:end] = patch
            os.close(fd)
            files[name] = bytes(data)
        st = stats(m)
        assert st['dirty_bytes_exact'] > 0, 'written back early: the test proves nothing'
        # umount() waits for the daemon's exit and checks status 0.
        mnt.umount()
    for name, data in files.items():
        assert_file(os.path.join(b, name), data)


# --------------------------------------------------------------------------
# error reporting: errseq, exact

def test_fsync_error_reporting_exact(dirs):
    """Two descriptions of one file both wrote; writes to the backing fail:
    every fsync fails while the data cannot be written; once the fault is
    gone, a description opened afterwards syncs cleanly, and each older
    description hears of each failure it has not seen exactly once
    (Linux errseq: an fsync reports errors since that description's last
    report)."""
    _, b, m = dirs
    with Mount(b, m, options=['flushers=0'], expect_errors=True) as mnt:
        p = os.path.join(m, 'f')
        back = os.path.join(b, 'f')
        a = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        bb = os.open(p, os.O_RDWR)
        try:
            assert os.pwrite(a, b'A' * 10000, 0) == 10000
            assert os.pwrite(bb, b'B' * 10000, 20000) == 10000
            want = b'A' * 10000 + bytes(10000) + b'B' * 10000
            set_fault(m, 'write:EIO')
            assert get_fault(m).startswith('write:EIO')
            assert fsync_errno(a) == errno.EIO
            assert fsync_errno(bb) == errno.EIO
            # A description opened during the fault: its fsync still has
            # dirty data it cannot write.
            d = os.open(p, os.O_RDONLY)
            assert fsync_errno(d) == errno.EIO
            os.close(d)
            # Still unwritten, the retry fails again: reported again.
            assert fsync_errno(a) == errno.EIO
            assert fsync_errno(a, datasync=True) == errno.EIO
            # The data stays readable through the mount meanwhile.
            assert os.pread(a, 40000, 0) == want
            st = stats(m)
            assert st['dirty_bytes_exact'] > 0 and st['wb_errors'] >= 4
            assert st['faults_injected'] >= 4

            set_fault(m, 'off')
            assert get_fault(m) == 'off'
            c = os.open(p, os.O_RDWR)
            try:
                assert fsync_errno(c) == 0, 'a description opened after the error sees it'
                assert util.read_file(back) == want
                assert stats(m)['dirty_bytes_exact'] == 0
                assert fsync_errno(c) == 0
            finally:
                os.close(c)
            # a reported the last failure (its own retry): nothing new.
            assert fsync_errno(a) == 0
            # b last reported before a's retries failed: it hears of that
            # once (even though the data is written by now), then never.
            assert fsync_errno(bb) == errno.EIO
            assert fsync_errno(bb) == 0
            assert fsync_errno(a) == 0
        finally:
            os.close(a)
            os.close(bb)
        assert util.read_file(back) == want
        mnt.umount()


def test_fsync_error_seen_by_both_after_fault_cleared(dirs):
    """The brief's order with every description reporting after the last
    failure: once the fault is cleared and the data written, both fsync
    successfully (no stale error, no double report)."""
    _, b, m = dirs
    with Mount(b, m, options=['flushers=0'], expect_errors=True) as mnt:
        p = os.path.join(m, 'f')
        a = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        bb = os.open(p, os.O_RDWR)
        try:
            os.pwrite(a, b'a' * 5000, 0)
            os.pwrite(bb, b'b' * 5000, 5000)
            set_fault(m, 'write:EIO:count=1')
            # One failure only: a hears of it; b's fsync writes the data and
            # hears of the same failure (it has not seen it), once.
            assert fsync_errno(a) == errno.EIO
            assert fsync_errno(bb) == errno.EIO
            assert util.read_file(os.path.join(b, 'f')) == b'a' * 5000 + b'b' * 5000
            assert fsync_errno(a) == 0
            assert fsync_errno(bb) == 0
        finally:
            os.close(a)
            os.close(bb)
        set_fault(m, 'off')
        mnt.umount()


# --------------------------------------------------------------------------
# faults

FAULTS = [
    ('write:EIO', errno.EIO),
    ('write:ENOSPC', errno.ENOSPC),
    ('write:EDQUOT:every=2', errno.EDQUOT),
    ('write:short', 0),
    ('write:short:every=3', 0),
]


def _scatter_writes(fd, data, rng, n=60):
    """N unaligned overwrites and extensions of DATA (a bytearray) through
    FD; returns the new content."""
    for _ in range(n):
        off = rng.randrange(0, len(data) + 5000)
        patch = rng.randbytes(rng.randrange(1, 70000))
        assert os.pwrite(fd, patch, off) == len(patch)
        end = off + len(patch)
        if end > len(data):
            data.extend(bytes(end - len(data)))
        data[off:end] = patch
    return data


@pytest.mark.parametrize('spec,err', FAULTS, ids=[f[0] for f in FAULTS])
@pytest.mark.parametrize('io', ['uring', 'psync'])
def test_fault_fsync(dirs, spec, err, io):
    _, b, m = dirs
    rng = random.Random(spec)
    with Mount(b, m, options=['flushers=0', 'backing_io=' + io,
                              'folio_size=64K', 'max_io=64K'], expect_errors=True) as mnt:
        p = os.path.join(m, 'f')
        back = os.path.join(b, 'f')
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            data = bytearray(rng.randbytes(2 * MiB + 100))
            os.pwrite(fd, data, 0)
            os.fsync(fd)
            assert_file(back, bytes(data))
            set_fault(m, spec)
            data = _scatter_writes(fd, data, rng)
            s0 = stats(m)
            got = fsync_errno(fd)
            s1 = stats(m)
            assert got == err, '%s: fsync gave %s, want %s' % (spec, ename(got), ename(err))
            assert s1['faults_injected'] > s0['faults_injected']
            if err:
                assert s1['wb_errors'] > s0['wb_errors']
                assert s1['dirty_bytes_exact'] > 0
                # Again: still failing, still reported (with every=N the
                # retry of the few runs left may be one that passes).
                if 'every=' not in spec:
                    assert fsync_errno(fd) == err
            else:
                # Short writes are resumed: more system calls than writes,
                # nothing left dirty, no error.
                if io == 'psync':
                    assert s1['backing_write_submits'] - s0['backing_write_submits'] > \
                        s1['backing_write_ios'] - s0['backing_write_ios']
                assert s1['wb_errors'] == s0['wb_errors']
                assert s1['dirty_bytes_exact'] == 0
                assert_file(back, bytes(data))
            # Readable through the mount while the fault is in place.
            assert os.pread(fd, len(data) + 10, 0) == data
            assert os.fstat(fd).st_size == len(data)
            set_fault(m, 'off')
            assert fsync_errno(fd) == 0
            assert stats(m)['dirty_bytes_exact'] == 0
            assert_file(back, bytes(data))
            assert os.pread(fd, len(data) + 10, 0) == data
        finally:
            os.close(fd)
        mnt.umount()
    assert_file(back, bytes(data))


def test_fault_selectors(dirs):
    """file= only hits matching files; count= stops after N faults;
    range= only I/O overlapping the range; after= skips the first calls."""
    _, b, m = dirs
    with Mount(b, m, options=['flushers=0', 'folio_size=64K'], expect_errors=True) as mnt:
        good = os.open(os.path.join(m, 'good'), os.O_RDWR | os.O_CREAT, 0o644)
        bad = os.open(os.path.join(m, 'bad_one'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            set_fault(m, 'write:EIO:file=bad_one')
            os.pwrite(good, b'g' * 9000, 0)
            os.pwrite(bad, b'x' * 9000, 0)
            assert fsync_errno(good) == 0
            assert fsync_errno(bad) == errno.EIO
            assert util.read_file(os.path.join(b, 'good')) == b'g' * 9000

            # count=2: two more failures, then success.
            set_fault(m, 'write:ENOSPC:count=2')
            assert fsync_errno(bad) == errno.ENOSPC
            assert fsync_errno(bad) == errno.ENOSPC
            assert fsync_errno(bad) == 0
            assert util.read_file(os.path.join(b, 'bad_one')) == b'x' * 9000

            # range=: only writes overlapping [1M, 1M+1).
            set_fault(m, 'write:EIO:range=%d-%d' % (MiB, MiB + 1))
            os.pwrite(good, b'1' * 4096, 0)
            assert fsync_errno(good) == 0
            os.pwrite(good, b'2' * 4096, MiB)
            assert fsync_errno(good) == errno.EIO
            # after=1:count=1: of two separate runs (two writes) the first
            # passes, the second fails; then no more faults.
            os.pwrite(good, b'3' * 4096, 512 * KiB)
            set_fault(m, 'write:EIO:after=1:count=1')
            s0 = stats(m)
            assert fsync_errno(good) == errno.EIO
            s1 = stats(m)
            assert s1['backing_write_ios'] - s0['backing_write_ios'] == 2
            assert s1['faults_injected'] - s0['faults_injected'] == 1
            assert fsync_errno(good) == 0
            set_fault(m, 'off')
            assert fsync_errno(good) == 0
            want = bytearray(b'1' * 4096 + b'g' * (9000 - 4096) + bytes(MiB - 9000) + b'2' * 4096)
            want[512 * KiB:512 * KiB + 4096] = b'3' * 4096
            want = bytes(want)
            assert util.read_file(os.path.join(b, 'good')) == want
        finally:
            os.close(good)
            os.close(bad)
        mnt.umount()


def _forget_kept(mnt, m):
    """Make the kernel forget the mount's inodes (drop_caches) until the
    daemon reports an inode kept because its data could not be written."""
    def kept():
        util.drop_caches()
        return stats(m)['kept_inodes'] >= 1
    assert poll(kept, 10, 0.1), 'the kernel never forgot the inode: %r' % stats(m)


@pytest.mark.skipif(os.geteuid() != 0, reason='drop_caches and tmpfs need root')
@pytest.mark.drops_caches
@pytest.mark.parametrize('how', ['fault', 'enospc'])
def test_forgotten_inode_with_unwritable_data(dirs, how):
    """The kernel forgets an inode whose dirty data cannot be written (the
    file is closed, writeback fails): the daemon keeps that data and goes
    on retrying it.  Opening the file again must show that data, not the
    backing file's older content, and a newer write must not be
    overwritten by the old data's retry."""
    root, b, m = dirs
    rng = random.Random(13)
    old = rng.randbytes(256 * KiB)     # the backing file's content before
    w1 = rng.randbytes(256 * KiB)
    w2 = rng.randbytes(8 * KiB)
    if how == 'enospc':
        subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1M', 'tmpfs', b], check=True)
    try:
        if how == 'fault':
            util.write_file(os.path.join(b, 'f'), old)
        else:
            # Room for 64 KiB: most of the file cannot be written.
            util.write_file(os.path.join(b, 'filler'), b'x' * (MiB - 64 * KiB))
        opts = ['flushers=2', 'writeback_interval_ms=50', 'dirty_expire_ms=50',
                'attr_timeout=0']
        with Mount(b, m, options=opts, expect_errors=True) as mnt:
            if how == 'fault':
                set_fault(m, 'write:EIO:file=/b/f')
            p = os.path.join(m, 'f')
            fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
            os.pwrite(fd, w1, 0)
            assert fsync_errno(fd) == (errno.EIO if how == 'fault' else errno.ENOSPC)
            os.close(fd)
            _forget_kept(mnt, m)
            st = stats(m)
            assert st['dirty_bytes_exact'] >= len(w1), 'the unwritten data was dropped'
            # Open again: the file shows what was written.
            fd = os.open(p, os.O_RDWR)
            try:
                got = os.pread(fd, 2 * len(w1), 0)
                assert got == w1, 'reopened file: %s' % first_diff(got, w1)
                assert os.fstat(fd).st_size == len(w1)
                # A newer write over part of it, then the error goes away.
                os.pwrite(fd, w2, 4096)
                want = w1[:4096] + w2 + w1[4096 + len(w2):]
                if how == 'fault':
                    set_fault(m, 'off')
                else:
                    os.unlink(os.path.join(b, 'filler'))
                fsync_errno(fd)     # may report the earlier failure once
                assert fsync_errno(fd) == 0
                # The old data's retries have nothing left to do, or are done.
                assert poll(lambda: stats(m)['dirty_bytes_exact'] == 0, 30, 0.1), stats(m)
                assert_file(os.path.join(b, 'f'), want)
                assert os.pread(fd, 2 * len(w1), 0) == want
            finally:
                os.close(fd)
            mnt.umount()
        assert_file(os.path.join(b, 'f'), want)
    finally:
        if how == 'enospc':
            subprocess.run(['umount', '-l', b])


@pytest.mark.timeout(120)
def test_persistent_fault_backs_off(dirs):
    """A fault that persists with the flushers on (interval 50 ms, expire
    50 ms): they retry with backoff instead of spinning, and the data
    reaches the backing file by itself once the fault is gone."""
    _, b, m = dirs
    opts = ['flushers=2', 'writeback_interval_ms=50', 'dirty_expire_ms=50']
    rng = random.Random(6)
    data = rng.randbytes(MiB + 3)
    with Mount(b, m, options=opts, expect_errors=True) as mnt:
        set_fault(m, 'write:EIO')
        fd = os.open(os.path.join(m, 'f'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data, 0)
            # The flushers' first attempt.
            assert poll(lambda: stats(m)['wb_retries'] > 0, 5), stats(m)
            s0 = stats(m)
            c0 = cpu_seconds(mnt.pid)
            t0 = time.monotonic()
            # Four more retries.  Backoff from 100 ms doubling puts them at
            # least 100 + 200 + 400 + 800 ms after the first; without
            # backoff they would come one per pass, within 200 ms.
            s1 = poll(lambda: (lambda s: s if s['wb_retries'] >= s0['wb_retries'] + 4
                               else None)(stats(m)), 15, 0.05)
            dt = time.monotonic() - t0
            c1 = cpu_seconds(mnt.pid)
            assert s1, 'not four retries in %.1f s: %r' % (dt, stats(m))
            print('\n%.1f s for four retries with the fault: cpu %.2f s, '
                  'flusher_passes +%d, wb_errors +%d'
                  % (dt, c1 - c0, s1['flusher_passes'] - s0['flusher_passes'],
                     s1['wb_errors'] - s0['wb_errors']))
            assert dt >= 1.2, 'four retries in %.2f s: no backoff' % dt
            assert c1 - c0 < 1.0, 'the daemon used %.2f s of CPU in %.1f s' % (c1 - c0, dt)
            assert s1['dirty_bytes_exact'] == len(data) + (4096 - len(data) % 4096)
            assert os.pread(fd, len(data) + 1, 0) == data
            set_fault(m, 'off')
            # Backoff has reached at most a few seconds: the flushers get
            # there without fsync.
            st = poll(lambda: (lambda s: s if s['dirty_bytes_exact'] == 0 else None)(stats(m)),
                      15, 0.1)
            assert st, 'not written back after the fault was removed: %r' % stats(m)
            assert_file(os.path.join(b, 'f'), data)
            # The log names the file once when its writeback starts failing
            # (not at every retry) and once when it works again.
            path = os.path.join(b, 'f')
            log = mnt.output().splitlines()
            failing = [l for l in log if 'error: writing back %s: Input/output error '
                       '(kept dirty, retried in the background)' % path in l]
            assert len(failing) == 1, log
            assert sum('writing back %s works again' % path in l for l in log) == 1, log
            # This description has not seen the failures yet: reported once.
            assert fsync_errno(fd) == errno.EIO
            assert fsync_errno(fd) == 0
        finally:
            os.close(fd)
        mnt.umount()


def test_fsync_fault(dirs):
    """fsync:EIO: the writes succeed, the backing fsync fails: fsync reports
    it (once per failure), the data is dirty again (a failed sync makes
    nothing durable), and fsync succeeds once the fault is gone."""
    _, b, m = dirs
    with Mount(b, m, options=['flushers=0'], expect_errors=True) as mnt:
        fd = os.open(os.path.join(m, 'f'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.write(fd, b'z' * 10000)
            set_fault(m, 'fsync:EIO')
            assert fsync_errno(fd) == errno.EIO
            assert fsync_errno(fd, datasync=True) == errno.EIO
            st = stats(m)
            # Three 4 KiB blocks, written back twice and dirty again.
            assert st['faults_injected'] >= 2 and st['dirty_bytes_exact'] == 3 * 4096
            # O_DIRECT backing writes the block holding EOF whole.
            assert st['backing_write_bytes'] == 2 * (3 * 4096 if st['backing_direct'] else 10000)
            set_fault(m, 'off')
            assert fsync_errno(fd) == 0
            st = stats(m)
            assert st['dirty_bytes_exact'] == 0 and st['pinned_bytes'] == 0
        finally:
            os.close(fd)
        assert util.read_file(os.path.join(b, 'f')) == b'z' * 10000
        mnt.umount()


def test_read_fault(dirs):
    """read:EIO: a read that needs the backing file fails with EIO; cached
    data is still served; after clearing, the read succeeds."""
    _, b, m = dirs
    data = random.Random(10).randbytes(300 * KiB)
    util.write_file(os.path.join(b, 'cold'), data)
    with Mount(b, m, options=['folio_size=64K', 'readahead_kb=0']) as mnt:
        fd = os.open(os.path.join(m, 'cold'), os.O_RDONLY)
        try:
            assert os.pread(fd, 64 * KiB, 0) == data[:64 * KiB]   # now cached
            set_fault(m, 'read:EIO')
            with pytest.raises(OSError) as e:
                os.pread(fd, 4096, 200 * KiB)
            assert e.value.errno == errno.EIO
            assert os.pread(fd, 64 * KiB, 0) == data[:64 * KiB]
            set_fault(m, 'off')
            assert os.pread(fd, len(data) + 1, 0) == data
        finally:
            os.close(fd)
        mnt.umount()


@pytest.mark.skipif(os.geteuid() != 0, reason='mounting a tmpfs needs root')
def test_real_enospc_keeps_data(dirs):
    """A backing filesystem that is really full: fsync fails with ENOSPC,
    the data stays in the cache (readable), and once space is freed in the
    backing directory a later fsync writes it all."""
    root, b, m = dirs
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=4M', 'tmpfs', b], check=True)
    try:
        util.write_file(os.path.join(b, 'filler'), b'f' * (3 * MiB))
        data = random.Random(11).randbytes(2 * MiB + 5)
        with Mount(b, m, options=['flushers=0'], expect_errors=True) as mnt:
            fd = os.open(os.path.join(m, 'big'), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                assert os.pwrite(fd, data, 0) == len(data)
                assert fsync_errno(fd) == errno.ENOSPC
                assert stats(m)['dirty_bytes_exact'] > 0
                assert os.pread(fd, len(data) + 1, 0) == data
                os.unlink(os.path.join(b, 'filler'))
                assert fsync_errno(fd) == 0
                assert stats(m)['dirty_bytes_exact'] == 0
            finally:
                os.close(fd)
            assert_file(os.path.join(b, 'big'), data)
            mnt.umount()
        assert_file(os.path.join(b, 'big'), data)
    finally:
        subprocess.run(['umount', '-l', b])


# --------------------------------------------------------------------------
# fault spec validation

BAD_SPECS = ['bogus', 'write', 'write:', 'write:EWHAT', 'bogus:EIO',
             'write:EIO:every=0', 'write:EIO:every=x', 'write:EIO:range=5-3',
             'write:EIO:range=5', 'write:EIO:prob=2', 'write:EIO:prob=x',
             'write:EIO:nokey', 'write:EIO:color=red', 'write:EIO:file=',
             'write:EIO:' + 'x' * 600]


def test_fault_spec_validation(dirs):
    _, b, m = dirs
    with Mount(b, m) as mnt:
        assert get_fault(m) == 'off'
        set_fault(m, 'write:ENOSPC:every=3:count=5:file=abc:range=4096-8192')
        good = get_fault(m)
        assert good.startswith('write:ENOSPC:every=3'), good
        for part in ('count=5', 'file=abc', 'range=4096-8192'):
            assert part in good, (part, good)
        for spec in BAD_SPECS:
            with pytest.raises(OSError) as e:
                set_fault(m, spec)
            assert e.value.errno == errno.EINVAL, (spec, e.value)
            assert get_fault(m) == good, 'a bad spec %r changed the fault' % spec
        # What is read back can be written back and means the same.
        set_fault(m, good)
        assert get_fault(m) == good
        set_fault(m, 'read:EIO:prob=0.5:seed=7')
        assert get_fault(m).startswith('read:EIO') and 'prob=0.5' in get_fault(m)
        set_fault(m, 'off')
        assert get_fault(m) == 'off'
        set_fault(m, 'fsync:EIO')
        # An empty write is refused like any bad value; 'off' turns it off.
        with pytest.raises(OSError) as e:
            set_fault(m, '')
        assert e.value.errno == errno.EINVAL
        assert get_fault(m).startswith('fsync:EIO')
        set_fault(m, 'off')
        assert get_fault(m) == 'off'
        mnt.umount()


def test_fault_option_bad_exits_2(dirs):
    _, b, m = dirs
    for spec in ('bogus', 'write:EWHAT', 'write:EIO:every=0'):
        r = subprocess.run([FOLIOFS, '-f', '-o', 'fault=' + spec, b, m],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        err = r.stderr.decode()
        assert r.returncode == 2, (spec, r.returncode, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith('foliofs: '), err
        assert 'fault=' + spec in lines[0], err
        assert not util.is_fuse_mounted(m)


def test_fault_option_good_applies(dirs):
    _, b, m = dirs
    with Mount(b, m, options=['fault=write:EIO:file=doomed', 'flushers=0'], expect_errors=True) as mnt:
        assert get_fault(m).startswith('write:EIO') and 'file=doomed' in get_fault(m)
        fd = os.open(os.path.join(m, 'doomed'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.write(fd, b'x' * 100)
            assert fsync_errno(fd) == errno.EIO
            set_fault(m, 'off')
            assert fsync_errno(fd) == 0
        finally:
            os.close(fd)
        mnt.umount()


def test_unmount_with_unwritable_data_exits_1(dirs):
    """DESIGN: if writing back at unmount fails, the daemon says so and
    exits non-zero."""
    _, b, m = dirs
    mnt = Mount(b, m, options=['flushers=0'])
    mnt.start()
    try:
        mnt.wait_for_mount()
        set_fault(m, 'write:EIO:file=lost')
        with open(os.path.join(m, 'lost'), 'wb') as f:
            f.write(b'y' * 5000)
        r = subprocess.run([FUSERMOUNT, '-u', m])
        assert r.returncode == 0
        rc = mnt.proc.wait(60)
        out = mnt.output()
        assert rc == 1, 'exit status %d:\n%s' % (rc, out)
        assert 'lost' in out, out
    finally:
        mnt.cleanup()


# --------------------------------------------------------------------------
# concurrency: writers re-dirtying, flushers, truncates, fsyncs

CONC_WRITERS = 4
CONC_REGION = 256 * KiB
CONC_SHARED = 64 * KiB
CONC_TAIL = CONC_WRITERS * CONC_REGION + CONC_SHARED   # the truncater's from here
CONC_SECONDS = 4


@pytest.mark.timeout(180)
@pytest.mark.parametrize('opts', [
    ('wb_granularity=block', 'folio_size=64K'),
    ('wb_granularity=folio', 'folio_size=64K'),
    ('wb_granularity=block', 'folio_size=2M', 'backing_io=psync', 'max_io=16K'),
], ids=['block-64k', 'folio-64k', 'block-2m-psync'])
def test_concurrent_writeback(dirs, opts):
    _, b, m = dirs
    options = ['writeback_interval_ms=10', 'dirty_background_bytes=64K',
               'dirty_expire_ms=20'] + list(opts)
    path = os.path.join(m, 'f')
    back = os.path.join(b, 'f')
    init = random.Random(7).randbytes(CONC_TAIL)
    models = [bytearray(init[i * CONC_REGION:(i + 1) * CONC_REGION])
              for i in range(CONC_WRITERS)]
    shared_vals = [{init[CONC_WRITERS * CONC_REGION + k * 4096:
                         CONC_WRITERS * CONC_REGION + (k + 1) * 4096]}
                   for k in range(CONC_SHARED // 4096)]
    shared_lock = threading.Lock()
    tail = bytearray()
    errors = []
    stop = threading.Event()
    counts = {'writes': 0, 'fsyncs': 0, 'truncates': 0, 'checks': 0}
    count_lock = threading.Lock()

    def bump(k, n=1):
        with count_lock:
            counts[k] += n

    def guarded(fn):
        def run(*a):
            try:
                fn(*a)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append('%s: %r' % (fn.__name__, e))
                stop.set()
        return run

    @guarded
    def writer(i):
        rng = random.Random(100 + i)
        fd = os.open(path, os.O_RDWR)
        base = i * CONC_REGION
        model = models[i]
        hot = [rng.randrange(0, CONC_REGION - 8192) for _ in range(4)]
        n = 0
        try:
            while not stop.is_set():
                n += 1
                # Mostly re-dirty a few hot spots (the same blocks, again and
                # again, while flushers write them), sometimes anywhere.
                off = rng.choice(hot) if rng.random() < 0.6 else \
                    rng.randrange(0, CONC_REGION - 1)
                ln = min(rng.randrange(1, 12000), CONC_REGION - off)
                patch = rng.randbytes(ln)
                assert os.pwrite(fd, patch, base + off) == ln
                model[off:off + ln] = patch
                # A shared block: whole aligned blocks, value remembered.
                if n % 3 == 0:
                    k = rng.randrange(0, CONC_SHARED // 4096)
                    val = (b'%d:%d:' % (i, n)) * 4096
                    val = val[:4096]
                    with shared_lock:
                        shared_vals[k].add(val)
                    assert os.pwrite(fd, val, CONC_WRITERS * CONC_REGION + k * 4096) == 4096
                if n % 50 == 0:
                    assert os.pread(fd, CONC_REGION, base) == model, \
                        'writer %d: region through the mount' % i
                if n % 97 == 0:
                    os.fsync(fd)
                    # Nobody else writes this region: after this fsync the
                    # backing file holds exactly the model here.
                    with open(back, 'rb') as f:
                        f.seek(base)
                        got = f.read(CONC_REGION)
                    assert got == model, 'writer %d: backing after fsync: %s' % (
                        i, first_diff(got, bytes(model)))
                    bump('checks')
            bump('writes', n)
        finally:
            os.close(fd)

    @guarded
    def truncater():
        rng = random.Random(200)
        fd = os.open(path, os.O_RDWR)
        n = 0
        try:
            while not stop.is_set():
                n += 1
                op = rng.random()
                if op < 0.5:
                    off = rng.randrange(0, len(tail) + 70000)
                    patch = rng.randbytes(rng.randrange(1, 70000))
                    assert os.pwrite(fd, patch, CONC_TAIL + off) == len(patch)
                    end = off + len(patch)
                    if end > len(tail):
                        tail.extend(bytes(end - len(tail)))
                    tail[off:end] = patch
                elif op < 0.9:
                    size = rng.randrange(0, len(tail) + 1) if rng.random() < 0.8 else \
                        len(tail) + rng.randrange(1, 100000)
                    os.ftruncate(fd, CONC_TAIL + size)
                    if size < len(tail):
                        del tail[size:]
                    else:
                        tail.extend(bytes(size - len(tail)))
                    bump('truncates')
                else:
                    os.fdatasync(fd)
                    st = os.stat(back)
                    assert st.st_size == CONC_TAIL + len(tail), \
                        'backing size %d after fdatasync, want %d' % (
                            st.st_size, CONC_TAIL + len(tail))
                    with open(back, 'rb') as f:
                        f.seek(CONC_TAIL)
                        got = f.read()
                    assert got == tail, 'tail in the backing after fdatasync: %s' % (
                        first_diff(got, bytes(tail)))
                    bump('checks')
                if n % 20 == 0:
                    got = os.pread(fd, len(tail) + 100000, CONC_TAIL)
                    assert got == tail, 'tail through the mount: %s' % first_diff(
                        got, bytes(tail))
                    assert os.fstat(fd).st_size == CONC_TAIL + len(tail)
        finally:
            os.close(fd)

    @guarded
    def syncer(k):
        fd = os.open(path, os.O_RDONLY if k % 2 else os.O_RDWR)
        try:
            while not stop.is_set():
                (os.fdatasync if k % 2 else os.fsync)(fd)
                bump('fsyncs')
        finally:
            os.close(fd)

    with Mount(b, m, options=options) as mnt:
        util.write_file(path, init)
        threads = [threading.Thread(target=writer, args=(i,)) for i in range(CONC_WRITERS)]
        threads.append(threading.Thread(target=truncater))
        threads += [threading.Thread(target=syncer, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        stop.wait(CONC_SECONDS)
        stop.set()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), 'threads hung'
        assert not errors, '\n'.join(errors)

        want = bytearray()
        for i in range(CONC_WRITERS):
            want += models[i]
        want_tail = bytes(tail)

        def check(data, what):
            assert len(data) == CONC_TAIL + len(want_tail), \
                '%s: size %d, want %d' % (what, len(data), CONC_TAIL + len(want_tail))
            assert data[:CONC_WRITERS * CONC_REGION] == want, \
                '%s, writers\' regions: %s' % (what, first_diff(
                    data[:CONC_WRITERS * CONC_REGION], bytes(want)))
            for k in range(CONC_SHARED // 4096):
                blk = data[CONC_WRITERS * CONC_REGION + k * 4096:
                           CONC_WRITERS * CONC_REGION + (k + 1) * 4096]
                assert blk in shared_vals[k], '%s: shared block %d is none of the %d ' \
                    'values written there: %r' % (what, k, len(shared_vals[k]), blk[:32])
            assert data[CONC_TAIL:] == want_tail, '%s, tail: %s' % (
                what, first_diff(data[CONC_TAIL:], want_tail))

        mount_view = util.read_file(path)
        check(mount_view, 'through the mount')
        st = stats(m)
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        check(util.read_file(back), 'backing after fsync')
        assert util.read_file(back) == mount_view
        s2 = stats(m)
        print('\n%s: %r; flusher_passes %d, backing_write_bytes %d, app_write_bytes %d'
              % (opts, counts, s2['flusher_passes'], s2['backing_write_bytes'],
                 s2['app_write_bytes']))
        assert st['flusher_passes'] > 0 and st['backing_write_bytes'] > 0
        assert counts['truncates'] > 10 and counts['fsyncs'] > 10 and counts['checks'] > 2
        mnt.umount()
    check(util.read_file(back), 'backing after unmount')


# --------------------------------------------------------------------------
# backing_io backends

def test_backing_io_psync(dirs):
    _, b, m = dirs
    rng = random.Random(8)
    with Mount(b, m, options=['backing_io=psync', 'flushers=0']) as mnt:
        p = os.path.join(m, 'f')
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            data = bytearray(rng.randbytes(8 * MiB))
            os.pwrite(fd, data, 0)
            os.fsync(fd)
            for _ in range(100):
                off = rng.randrange(0, len(data) - 3000)
                patch = rng.randbytes(rng.randrange(1, 3000))
                os.pwrite(fd, patch, off)
                data[off:off + len(patch)] = patch
            s0 = stats(m)
            os.fsync(fd)
            s1 = stats(m)
        finally:
            os.close(fd)
        ios = s1['backing_write_ios'] - s0['backing_write_ios']
        subs = s1['backing_write_submits'] - s0['backing_write_submits']
        assert ios > 10
        assert subs == ios, 'psync: one pwritev per write (%d ios, %d calls)' % (ios, subs)
        assert_file(os.path.join(b, 'f'), bytes(data))
        assert util.read_file(p) == data
        mnt.umount()
    assert_file(os.path.join(b, 'f'), bytes(data))


def test_backing_io_null(dirs):
    """null: writes and fsync succeed and no data reaches the backing file.
    What it looks like (measured): the backing file is created and stays
    0 bytes (writes, mtime stamping and fsync are skipped; truncates would
    pass through); backing_write_bytes counts the discarded bytes; through
    the mount the file has the cache's size and the cache serves what it
    holds; a folio the cache dropped (reclaim) reads back as zeros, not as
    EOF, up to the cached size.  After the inode is forgotten or the mount
    is gone, the file is empty."""
    _, b, m = dirs
    rng = random.Random(9)
    opts = ['backing_io=null', 'folio_size=64K', 'cache_size=1M', 'flushers=0']
    with Mount(b, m, options=opts) as mnt:
        p = os.path.join(m, 'f')
        back = os.path.join(b, 'f')
        small = rng.randbytes(100 * KiB)
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            assert os.pwrite(fd, small, 0) == len(small)
            assert os.pread(fd, len(small), 0) == small   # from the cache
            os.fsync(fd)
            assert os.pread(fd, len(small), 0) == small   # still cached, clean
            st = stats(m)
            assert st['backing_write_bytes'] == 100 * KiB
            assert st['dirty_bytes_exact'] == 0
            bst = os.stat(back)
            print('\nnull: backing size after 100 KiB + fsync: %d' % bst.st_size)
            assert util.read_file(back) == bytes(bst.st_size), 'data reached the backing'
            assert os.fstat(fd).st_size == len(small)
            # 4 MiB through a 1 MiB cache: the first folios are written
            # (discarded) and dropped; reading them again gives zeros.
            big = rng.randbytes(4 * MiB)
            assert os.pwrite(fd, big, 0) == len(big)
            st = stats(m)
            assert st['reclaimed_folios'] > 0 and st['cache_bytes'] <= MiB
            # The newest folio is still cached (read it before anything
            # else can push it out).
            assert os.pread(fd, 64 * KiB, len(big) - 64 * KiB) == big[-64 * KiB:]
            got = os.pread(fd, len(big), 0)
            assert len(got) == len(big)
            assert got[:64 * KiB] == bytes(64 * KiB), 'dropped data did not read as zeros'
            os.fsync(fd)
            bst = os.stat(back)
            print('null: backing size after 4 MiB + fsync: %d; stats %r'
                  % (bst.st_size, {k: st[k] for k in ('backing_write_bytes',
                                                    'reclaimed_folios', 'cache_bytes')}))
            assert util.read_file(back) == bytes(bst.st_size)
        finally:
            os.close(fd)
        mnt.umount()
    assert util.read_file(os.path.join(b, 'f')) == bytes(os.path.getsize(os.path.join(b, 'f')))
