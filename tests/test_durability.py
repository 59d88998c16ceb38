"""Durability when the backing store fails: a failed backing sync must not
lose data (fsyncgate), and a backing store that keeps failing must not
grow the cache without bound.

Every test mounts its own foliofs with faults injected through
MOUNTPOINT/.foliofs/fault (grammar in writeback/wb_i.h; an fsync fault
fires instead of the backing sync, like a device flush that failed).
"""

import errno
import os
import random

import util
from util import Mount, set_fault, stats

KiB = 1 << 10
MiB = 1 << 20


def fsync_errno(fd):
    try:
        os.fsync(fd)
        return 0
    except OSError as e:
        return e.errno


def test_failed_fsync_data_written_again(dirs):
    """fsyncgate: fsync fails in the backing store (fsync:EIO), and what
    the daemon wrote before it may be lost there; we play that loss by
    zeroing the backing file behind the daemon's back, as Linux may drop
    the pages after a failed fdatasync.  Then the fault is cleared and a
    small cache is put under read pressure so that clean folios are
    reclaimed.  A second fsync that returns 0 must have written the data
    again: after unmount the backing file holds it."""
    _, b, m = dirs
    data = random.Random(41).randbytes(256 * KiB + 123)
    other = random.Random(42).randbytes(4 * MiB)
    util.write_file(os.path.join(b, 'other'), other)
    # throttle=none: with no flusher, a throttled writer would wait for ever.
    opts = ['flushers=0', 'folio_size=64K', 'cache_size=512K', 'throttle=none']
    with Mount(b, m, options=opts, expect_errors=True) as mnt:
        fd = os.open(os.path.join(m, 'f'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            assert os.pwrite(fd, data, 0) == len(data)
            set_fault(m, 'fsync:EIO')
            assert fsync_errno(fd) == errno.EIO
            st = stats(m)
            assert st['backing_write_bytes'] >= len(data)
            # Nothing of it is known durable: dirty again, not reclaimable.
            assert st['dirty_bytes_exact'] >= len(data), st
            # The backing store lost what it was given before the failed sync.
            with open(os.path.join(b, 'f'), 'r+b') as f:
                f.write(bytes(len(data)))
            set_fault(m, 'off')
            # Read pressure: 4 MiB through a 512 KiB cache reclaims every
            # clean folio.
            with open(os.path.join(m, 'other'), 'rb') as f:
                assert f.read() == other
            assert stats(m)['reclaimed_folios'] > 0
            assert os.pread(fd, len(data) + 1, 0) == data
            assert fsync_errno(fd) == 0
            st = stats(m)
            assert st['dirty_bytes_exact'] == 0 and st['pinned_bytes'] == 0, st
        finally:
            os.close(fd)
        mnt.umount()
    assert util.read_file(os.path.join(b, 'f')) == data


def test_unwritable_data_fills_cache_then_writes_fail(dirs):
    """The backing store fails every write (write:EIO) while a writer goes
    on writing: the cache must stay within cache_size (plus a few folios
    in use), the writer is held while the cache is full of data that
    cannot be written and then gets ENOSPC (or EIO) with one line in the
    log naming the reason, instead of the daemon growing until it is
    killed.  Once the fault is cleared, everything acknowledged is
    written."""
    _, b, m = dirs
    folio, cache = 64 * KiB, 1 * MiB
    # throttle=none: the cache bound is what is tested, not the throttler.
    opts = ['folio_size=64K', 'cache_size=1M', 'throttle=none',
            'writeback_interval_ms=50', 'dirty_expire_ms=50']
    data = random.Random(43).randbytes(16 * MiB)
    with Mount(b, m, options=opts, expect_errors=True) as mnt:
        set_fault(m, 'write:EIO')
        fd = os.open(os.path.join(m, 'f'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            acked, err, peak = 0, 0, 0
            while acked < len(data):
                try:
                    acked += os.pwrite(fd, data[acked:acked + folio], acked)
                except OSError as e:
                    err = e.errno
                    break
                peak = max(peak, stats(m)['cache_bytes'])
            assert err in (errno.ENOSPC, errno.EIO), \
                'wrote %d bytes into a %d-byte cache with every backing write failing' \
                % (acked, cache)
            assert peak <= cache + 4 * folio, peak
            # Held data is kept; later writes fail too, the cache stays bounded.
            for _ in range(3):
                try:
                    os.pwrite(fd, data[acked:acked + folio], acked)
                    assert False, 'a write succeeded with the cache full of unwritable data'
                except OSError as e:
                    assert e.errno in (errno.ENOSPC, errno.EIO)
            st = stats(m)
            assert st['cache_bytes'] <= cache + 4 * folio, st
            assert st['dirty_bytes_exact'] >= acked - folio, st
            lines = [l for l in mnt.output().splitlines() if 'cannot be written' in l]
            assert len(lines) == 1, mnt.output()
            set_fault(m, 'off')
            # The writer's description has not heard of the failed writes yet.
            assert fsync_errno(fd) in (0, errno.EIO)
            assert fsync_errno(fd) == 0
            assert stats(m)['dirty_bytes_exact'] == 0
            assert os.pread(fd, acked + 1, 0) == data[:acked]
        finally:
            os.close(fd)
        mnt.umount()
    assert util.read_file(os.path.join(b, 'f')) == data[:acked]
