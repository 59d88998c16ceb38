"""Writeback as the kernel does it, whatever the accounting policy (issue 9,
"Fidelity"): the writeback counters (nr_writeback, nr_written) count whole
folios as the kernel's NR_WRITEBACK and WB_WRITTEN do; a background chunk's
budget is paid in folio pages (write_cache_pages); and background writeback
moves to the next file after each chunk (b_more_io).

Every test mounts its own foliofs, so counters start from zero.  Nothing
asserts on timing: waits are bounded polls for a state.
"""

import os

import pytest

import util
from util import Mount, poll, set_tunable, stats

KiB = 1 << 10
MiB = 1 << 20


def ctl(mnt, *parts):
    return os.path.join(mnt, '.foliofs', *parts)


def queue(mnt):
    """{path: dirty_bytes} of .foliofs/files."""
    out = {}
    with open(ctl(mnt, 'files')) as f:
        for line in f:
            dirty, _wb, _age, _err, path = line.rstrip('\n').split(' ', 4)
            out[os.path.basename(path)] = int(dirty)
    return out


@pytest.mark.parametrize('policy', ['page', 'folio', 'block'])
def test_written_counts_whole_folios_whatever_the_policy(dirs, policy):
    """8 KiB dirty in each of 16 folios of 2 MiB, then fsync: nr_written
    grows by 16 whole folios (8192 pages) under every policy, as WB_WRITTEN
    would; the policy's charge discharged (nr_discharged) is 2 pages per
    folio under page and block, 512 under folio."""
    _, b, m = dirs
    opts = ['folio_size=2M', 'folio_policy=fixed', 'block_size=4K',
            'dirty_account=' + policy, 'flushers=0']
    with Mount(b, m, options=opts) as mnt:
        fd = os.open(os.path.join(m, 'f'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            s0 = stats(m)
            for k in range(16):
                assert os.pwrite(fd, b'w' * (8 * KiB), k * 2 * MiB + 4 * KiB) == 8 * KiB
            s1 = stats(m)
            price = 2 if policy != 'folio' else 512
            assert s1['nr_dirty'] == 16 * price
            assert s1['nr_reclaimable'] == 16 * price
            assert s1['nr_writeback'] == 0
            os.fsync(fd)
            s2 = stats(m)
        finally:
            os.close(fd)
        assert s2['nr_written'] - s0['nr_written'] == 16 * 512
        assert s2['nr_discharged'] - s0['nr_discharged'] == 16 * price
        assert s2['nr_writeback'] == 0 and s2['nr_reclaimable'] == 0
        assert s2['backing_write_bytes'] - s0['backing_write_bytes'] == 16 * 8 * KiB
        mnt.umount()


def test_background_budget_paid_in_folio_pages(dirs):
    """dirty_account=page, 8 KiB dirty in each of 64 folios of 2 MiB, a
    256 KiB background threshold: each folio background writeback writes
    uses 512 pages of its chunk's budget for 2 pages of dirty data, so
    wb_budget_pages is exactly 256 times wb_dirty_pages_written."""
    _, b, m = dirs
    opts = ['folio_size=2M', 'folio_policy=fixed', 'block_size=4K',
            'dirty_account=page', 'flushers=1', 'dirty_background_bytes=256K',
            'dirty_expire_ms=600000', 'writeback_interval_ms=100']
    with Mount(b, m, options=opts) as mnt:
        fd = os.open(os.path.join(m, 'f'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            for k in range(64):
                assert os.pwrite(fd, b'b' * (8 * KiB), k * 2 * MiB) == 8 * KiB
            st = poll(lambda: (lambda s: s if s['nr_reclaimable'] <= s['bg_thresh']
                               and s['nr_writeback'] == 0 else None)(stats(m)), 30)
            assert st, 'background writeback did not settle: %r' % stats(m)
            print('\nbudget %d pages for %d dirty pages, %d bytes written'
                  % (st['wb_budget_pages'], st['wb_dirty_pages_written'],
                     st['backing_write_bytes']))
            assert st['wb_dirty_pages_written'] > 0
            assert st['wb_budget_pages'] == 256 * st['wb_dirty_pages_written']
            # Only background writeback ran (no fsync, nothing expired).
            assert st['backing_write_bytes'] == st['wb_dirty_pages_written'] * 4096
            os.fsync(fd)
        finally:
            os.close(fd)
        mnt.umount()


def test_background_moves_to_next_file_after_a_chunk(dirs):
    """Two files of 64 MiB each, all dirty; the background threshold is then
    lowered to 64 MiB.  A chunk is at most dirty_limit / 8 + 4 MiB (28 MiB
    with dirty_bytes=200M), so writing one chunk per file per turn leaves
    both files partly written, where staying on one file until the charge
    is under the threshold writes one of them whole and not the other."""
    _, b, m = dirs
    opts = ['folio_size=64K', 'folio_policy=fixed', 'cache_size=512M',
            'dirty_bytes=200M', 'dirty_background_bytes=150M', 'flushers=1',
            'dirty_expire_ms=600000', 'writeback_interval_ms=100']
    size = 64 * MiB
    data = {n: os.urandom(MiB) * (size // MiB) for n in ('a', 'b')}
    with Mount(b, m, options=opts) as mnt:
        for name, buf in data.items():
            fd = os.open(os.path.join(m, name), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                for off in range(0, size, 4 * MiB):
                    assert os.pwrite(fd, buf[off:off + 4 * MiB], off) == 4 * MiB
            finally:
                os.close(fd)
        s = stats(m)
        assert s['backing_write_bytes'] == 0, 'written back under the threshold'
        assert queue(m) == {'a': size, 'b': size}
        set_tunable(m, 'dirty_background_bytes', '64M')
        st = poll(lambda: (lambda s: s if s['nr_dirty'] <= s['bg_thresh']
                           and s['writeback_bytes'] == 0 else None)(stats(m)), 60)
        assert st, 'background writeback did not settle: %r' % stats(m)
        q = queue(m)
        print('\nleft dirty: %r' % q)
        assert set(q) == {'a', 'b'}, 'a file was written whole: %r' % q
        assert q['a'] < size and q['b'] < size, 'a file was not written at all: %r' % q
        mnt.umount()
    for name, buf in data.items():
        assert util.read_file(os.path.join(b, name)) == buf
