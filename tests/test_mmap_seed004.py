"""The mmap case of seeds/004: one byte stored into each 2 MiB folio of a
file through a shared writable mapping, then msync(MS_SYNC), writes one
block per folio touched to the backing file, not the whole folio.

On Linux 6.18 FUSE's page cache holds 4 KiB folios in every cache mode,
all of which allow shared writable mappings (direct I/O with
FUSE_DIRECT_IO_ALLOW_MMAP, writethrough and kernel_cache), so each store dirties one kernel page and writeback
sends one 4 KiB WRITE for it; the daemon dirties that block of its 2 MiB
folio (folio_policy=fixed: the file in whole 2 MiB folios, as the seed's)
and, with wb_granularity=block, writes back only that block.  The
test asserts both halves, so that a kernel which starts sending more
(large folios in FUSE's page cache) fails here with the amount it sent
instead of passing for the wrong reason.  wb_granularity=folio is the
contrast: the same stores write every uptodate block of the folio.

contrib/seed/mmap-seed004.py measures the same at the seed's size, beside the
native file system.
"""

import mmap
import os
import random

import pytest

from util import NAMED_STATS, Mount, set_tunable, stats

MiB = 1 << 20
PAGE = 4096
FOLIO = 2 * MiB
SIZE = 64 * MiB
NFOLIOS = SIZE // FOLIO
# Pages a folio holding one dirty 4 KiB block costs under each policy.
CHARGE = {'folio': FOLIO // PAGE, 'page': 1, 'block': 1}


def store_offsets(seed):
    """One offset in each folio, anywhere in it (the same for a SEED)."""
    rng = random.Random(seed)
    return [i * FOLIO + rng.randrange(FOLIO) for i in range(NFOLIOS)]


def store_and_msync(path, stores):
    """Store each (offset, byte) of STORES through a MAP_SHARED mapping of
    PATH, then msync(MS_SYNC) (mmap.flush)."""
    fd = os.open(path, os.O_RDWR)
    try:
        mp = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    try:
        for off, value in stores:
            mp[off] = value
        mp.flush()
    finally:
        mp.close()


@pytest.mark.parametrize('opts', [(), ('cache=writethrough',), ('kernel_cache',)],
                         ids=['direct', 'writethrough', 'kcache'])
def test_mmap_store_per_folio_writes_one_block(dirs, opts):
    _, b, m = dirs
    path = os.path.join(m, 'file')
    expect = bytearray(random.Random(4).randbytes(SIZE))
    with Mount(b, m, options=('folio_size=2M', 'folio_policy=fixed') + opts):
        with open(path, 'wb') as f:
            f.write(expect)
            os.fsync(f.fileno())
        for run, acct in enumerate(CHARGE):
            set_tunable(m, 'dirty_account', acct)
            stores = [(off, (run + off) % 256) for off in store_offsets(run)]
            for off, value in stores:
                expect[off] = value
            s0 = stats(m)
            store_and_msync(path, stores)
            s1 = stats(m)
            d = {k: s1[k] - s0[k] for k in s0 if k not in NAMED_STATS}
            what = '%s, dirty_account=%s' % (opts or 'direct I/O', acct)
            # Written before the data check, so that a failure names the
            # amounts: what the kernel sent, what reached the backing file.
            assert d['app_write_bytes'] == NFOLIOS * PAGE, \
                ('%s: the kernel sent %d bytes for %d one-byte stores, not one '
                 '4 KiB page each' % (what, d['app_write_bytes'], NFOLIOS))
            assert d['backing_write_bytes'] == NFOLIOS * PAGE, \
                ('%s: %d bytes written to the backing file for %d folios '
                 'touched, not one 4 KiB block each'
                 % (what, d['backing_write_bytes'], NFOLIOS))
            assert d['nr_dirtied'] == NFOLIOS * CHARGE[acct], what
            with open(os.path.join(b, 'file'), 'rb') as f:
                assert f.read() == expect, '%s: backing file differs after msync' % what


def test_mmap_store_wb_granularity_folio_writes_whole_folios(dirs):
    """The contrast: writeback of every uptodate block of a dirty folio
    (Linux before 6.6) turns the same 4 KiB WRITEs into whole folios."""
    _, b, m = dirs
    path = os.path.join(m, 'file')
    expect = bytearray(random.Random(5).randbytes(SIZE))
    with Mount(b, m, options=('folio_size=2M', 'folio_policy=fixed', 'wb_granularity=folio')):
        with open(path, 'wb') as f:
            f.write(expect)
            os.fsync(f.fileno())
        stores = [(off, off % 256) for off in store_offsets(9)]
        for off, value in stores:
            expect[off] = value
        s0 = stats(m)
        store_and_msync(path, stores)
        s1 = stats(m)
        assert s1['app_write_bytes'] - s0['app_write_bytes'] == NFOLIOS * PAGE
        assert s1['backing_write_bytes'] - s0['backing_write_bytes'] == SIZE
        with open(os.path.join(b, 'file'), 'rb') as f:
            assert f.read() == expect
