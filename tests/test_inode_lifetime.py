"""What happens to a file's cached data when the kernel forgets its inode
(fusefs/inode.c, issue 9 defects 2 and 7).

A forgotten inode's dirty data is written back before the cache goes,
unless the backing file has no name left: nobody can ever read that data
again, so it is dropped unwritten, as the kernel drops the pages of an
unlinked inode at eviction.  A file with another hard link is still
written.  And lookups racing forgets of inodes with dirty data lose and
reorder nothing.

The kernel is made to forget with `echo 2 > /proc/sys/vm/drop_caches`
(root), repeated until the daemon's `inodes` stat drops.  Every mount has
no flushers and a long dirty_expire_ms, so nothing is written in the
background: every byte in backing_write_bytes was written by a forget
(or an fsync the test makes).
"""

import os
import random
import threading

import pytest

import util
from util import Mount, poll, stats

KiB = 1 << 10
MiB = 1 << 20

# Nothing written in the background; the cache holds every file here.
OPTS = ['flushers=0', 'dirty_expire_ms=3600000', 'writeback_interval_ms=0',
        'cache_size=256M']

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason='drop_caches needs root'),
              pytest.mark.drops_caches]


def forget_until(m, inodes):
    """drop_caches until the daemon knows at most INODES inodes."""
    def forgotten():
        util.drop_caches()
        return stats(m)['inodes'] <= inodes
    assert poll(forgotten, 20, 0.05), \
        'the kernel never forgot the inodes: %r' % stats(m)


def write_new(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        assert os.write(fd, data) == len(data)
    finally:
        os.close(fd)


@pytest.mark.parametrize('when', ['after_close', 'while_open'])
def test_unlinked_file_is_not_written_back(dirs, when):
    """8 MiB written, the file unlinked (after closing it, or while it is
    still open: the temporary-file pattern), then forgotten: its dirty
    data is discarded, not written back and synced."""
    _, b, m = dirs
    data = random.Random(7).randbytes(8 * MiB)
    with Mount(b, m, options=OPTS) as mnt:
        s0 = stats(m)
        p = os.path.join(m, 'tmp')
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            assert os.write(fd, data) == len(data)
            s1 = stats(m)
            if when == 'while_open':
                os.unlink(p)
        finally:
            os.close(fd)
        assert s1['dirty_bytes_exact'] - s0['dirty_bytes_exact'] == len(data)
        assert s1['inodes'] == s0['inodes'] + 1
        if when == 'after_close':
            os.unlink(p)
        # The kernel may forget it at once (no name, no user): no stats
        # between here and the end of that forget.
        forget_until(m, s0['inodes'])
        s2 = stats(m)
        assert s2['backing_write_bytes'] == s0['backing_write_bytes'], \
            'an unlinked file was written back: %r' % s2
        assert s2['dirty_bytes_exact'] == s0['dirty_bytes_exact'], s2
        assert s2['nr_dirty'] == s0['nr_dirty'], s2
        assert s2['kept_inodes'] == 0
        assert os.listdir(b) == []
        mnt.umount()


def test_hard_linked_file_is_written_back(dirs):
    """One of two names removed: the data is still reachable through the
    other, so forgetting the inode writes it back."""
    _, b, m = dirs
    data = random.Random(8).randbytes(8 * MiB)
    with Mount(b, m, options=OPTS) as mnt:
        s0 = stats(m)
        write_new(os.path.join(m, 'a'), data)
        os.link(os.path.join(m, 'a'), os.path.join(m, 'b'))
        os.unlink(os.path.join(m, 'a'))
        forget_until(m, s0['inodes'])
        s1 = stats(m)
        assert s1['backing_write_bytes'] - s0['backing_write_bytes'] >= len(data), s1
        assert s1['dirty_bytes_exact'] == s0['dirty_bytes_exact'], s1
        assert s1['nr_dirty'] == s0['nr_dirty'], s1
        # On the backing file before unmount: the forget wrote it.
        assert util.read_file(os.path.join(b, 'b')) == data
        mnt.umount()
    assert util.read_file(os.path.join(b, 'b')) == data


@pytest.mark.timeout(120)
def test_lookups_racing_forgets_keep_data(dirs):
    """Files with dirty data are looked up (stat), rewritten and read by
    threads while the kernel forgets their inodes over and over: each
    forget writes a file back while new lookups, opens and writes of the
    same file come in.  Every file must show its last write, through the
    mount and on the backing store after unmount, and the daemon must
    survive: before the fix, two forgets of one inode overlapped and one
    freed the inode and its cache while the other was still writing it
    back (ASan: heap-use-after-free under ffs_inode_forget; without ASan
    the daemon died of SIGSEGV in most runs)."""
    _, b, m = dirs
    nfiles, size, rounds = 8, 256 * KiB, 200
    names = ['f%d' % i for i in range(nfiles)]
    last = {}
    lock = threading.Lock()
    stop = threading.Event()
    errors = []

    def writer(seed):
        rng = random.Random(seed)
        try:
            for r in range(rounds):
                name = names[rng.randrange(nfiles)]
                with lock:      # one writer per file at a time: "last" is known
                    data = bytes([r % 251 + 1]) * size
                    fd = os.open(os.path.join(m, name), os.O_WRONLY)
                    try:
                        assert os.pwrite(fd, data, 0) == size
                    finally:
                        os.close(fd)
                    last[name] = data
        except Exception as e:     # reported by the main thread
            errors.append(e)

    def statter():
        try:
            while not stop.is_set():
                for name in names:
                    os.stat(os.path.join(m, name))
        except Exception as e:
            errors.append(e)

    with Mount(b, m, options=OPTS + ['attr_timeout=0']) as mnt:
        for name in names:
            data = bytes(size)
            write_new(os.path.join(m, name), data)
            last[name] = data
        threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
        threads += [threading.Thread(target=statter) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            while any(t.is_alive() for t in threads[:2]):
                util.drop_caches()
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert not errors, '%r; daemon status %r, output:\n%s' % (
            errors, mnt.proc.poll(), mnt.output())
        for name in names:
            assert util.read_file(os.path.join(m, name)) == last[name], name
        s = stats(m)
        assert s['kept_inodes'] == 0, s
        mnt.umount()
    for name in names:
        assert util.read_file(os.path.join(b, name)) == last[name], name
