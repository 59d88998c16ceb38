"""Per-write and per-open synchronous writes (issue 9, defect 1).

A write that asks for O_DSYNC or O_SYNC semantics must be durable in the
backing store when it returns.  For a direct-I/O file the kernel syncs
nothing itself: it passes the file's flags, plus pwritev2()'s RWF_DSYNC or
RWF_SYNC, in the WRITE request's flags, so the daemon must look there as
well as at the flags the file was opened with.

Each test mounts with flushers=0 and long expiry, so nothing but the sync
asked for can move the data to the backing file: after the write returns,
`dirty_bytes_exact` must be 0 and the backing file must hold the data.
"""

import os

import pytest

from util import Mount, stats

KiB = 1 << 10

OPTS = ['flushers=0', 'dirty_expire_ms=600000', 'writeback_interval_ms=600000']

# (flags for the write, flags for the open)
CASES = {
    'rwf_dsync': (os.RWF_DSYNC, 0),
    'rwf_sync': (os.RWF_SYNC, 0),
    'o_dsync': (0, os.O_DSYNC),
    'o_sync': (0, os.O_SYNC),
}


def backing_bytes(path, off, size):
    with open(path, 'rb', buffering=0) as f:
        f.seek(off)
        return f.read(size)


@pytest.mark.parametrize('case', sorted(CASES))
def test_sync_write_is_durable(dirs, case):
    wflags, oflags = CASES[case]
    _, b, m = dirs
    data = os.urandom(4 * KiB)
    off = 8 * KiB
    with Mount(b, m, options=OPTS):
        # A plain write first: it stays dirty, so the sync has something
        # of its own file to write besides the synced block.
        fd = os.open(os.path.join(m, 'f'), os.O_RDWR | os.O_CREAT | oflags, 0o644)
        try:
            assert os.pwrite(fd, b'x' * 4 * KiB, 0) == 4 * KiB
            if wflags:
                assert os.pwritev(fd, [data], off, wflags) == len(data)
            else:
                assert os.pwrite(fd, data, off) == len(data)
            st = stats(m)
            assert st['dirty_bytes_exact'] == 0, st
            assert backing_bytes(os.path.join(b, 'f'), off, len(data)) == data
        finally:
            os.close(fd)


def test_plain_write_stays_dirty(dirs):
    """The control: without a sync flag the same write stays in the cache
    (so the assertions above can only hold because of the flag)."""
    _, b, m = dirs
    with Mount(b, m, options=OPTS):
        fd = os.open(os.path.join(m, 'f'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            assert os.pwritev(fd, [b'y' * 4 * KiB], 0, 0) == 4 * KiB
            assert stats(m)['dirty_bytes_exact'] == 4 * KiB
            assert os.path.getsize(os.path.join(b, 'f')) == 0
        finally:
            os.close(fd)
