#!/usr/bin/python3
"""mmap-seed004.py: the mmap case of seeds/004 on foliofs, beside the native
file system of the same disk.  A measurement, not a test
(tests/test_mmap_seed004.py is the test).

A file of SIZE MiB (default 512) is written and synced; then one byte is
stored into every 2 MiB of it through a shared writable mapping (MAP_SHARED,
PROT_READ | PROT_WRITE) and msync(MS_SYNC) is called.  The question of the
seed is how much that writes: one block per 2 MiB folio touched, or the
whole folio.

Targets, each over a fresh scratch directory on WORKDIR's disk:
  native          the file on WORKDIR's own file system
  direct I/O      foliofs defaults (files opened with direct I/O toward the
                  kernel; shared mappings need FUSE_DIRECT_IO_ALLOW_MMAP)
  writethrough    foliofs -o cache=writethrough (the kernel keeps clean
                  pages, every write reaches the daemon)
  kernel_cache    foliofs -o kernel_cache (the FUSE writeback cache)
  block 16K       foliofs -o block_size=16K: a block larger than the
                  kernel's page
  wb folio        foliofs -o wb_granularity=folio: writeback of whole
                  folios as before Linux 6.6, for contrast
Every foliofs mount has folio_size=2M,folio_policy=fixed (the file in whole
2 MiB folios, as the seed's); each of dirty_account=folio, page and block
is set in turn through .foliofs/tunables on the same mount.

Reported per run:
  kernel dirtied   write_bytes of /proc/self/io over the stores: the page
                   cache charges the storing task for each folio it
                   dirties, so this is the size of the kernel's dirty folios
  FUSE WRITEs      the WRITE requests the kernel sent for them, from the
                   daemon's -d request log (payload = insize - 80 bytes)
  charged          foliofs nr_dirtied (pages, by the accounting policy)
  nr_written       pages of folios whose writeback ended (whole folios)
  pauses           foliofs throttle_events
  written          backing_write_bytes and backing_write_ios (native:
                   sectors written by the whole device, so other I/O on
                   the machine adds to it)
  per folio        written / folios touched
Each run checks that the backing file holds every stored byte after msync.

The daemon runs in the foreground as the calling user and must exit 0 after
each unmount.  Environment: FOLIOFS (default <repo>/build/foliofs).
"""

import argparse
import collections
import mmap
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), '..', 'lib'))
from foliofs_tools import FUSERMOUNT, read_stats, wait_mounted  # noqa: E402
FOLIOFS = os.environ.get('FOLIOFS', os.path.join(REPO, 'build', 'foliofs'))
FOLIO = 2 << 20
PAGE = 4096
ACCOUNTS = ('folio', 'page', 'block')
# (name, foliofs options, dirty_account policies to run on that mount)
TARGETS = (('direct I/O', (), ACCOUNTS),
           ('writethrough', ('cache=writethrough',), ACCOUNTS),
           ('kernel_cache', ('kernel_cache',), ACCOUNTS),
           ('block 16K', ('block_size=16K',), ('block',)),
           ('wb folio', ('wb_granularity=folio',), ('page',)))
# A FUSE WRITE request is fuse_in_header (40 bytes), fuse_write_in (40),
# then the data.
WRITE_RE = re.compile(r'opcode: WRITE \(16\), nodeid: \d+, insize: (\d+)')
WRITE_HDR = 80


def size_str(n):
    """N bytes in MiB or KiB, exact where it is a whole number of them."""
    for unit, shift in (('MiB', 20), ('KiB', 10)):
        if n >= 1 << shift or shift == 10:
            if n % (1 << shift) == 0:
                return '%d %s' % (n >> shift, unit)
            return '%.1f %s' % (n / (1 << shift), unit)


def offsets(size):
    """One byte in each 2 MiB, at a different page of each folio: where
    in the folio the store falls must not change what is written."""
    return [i * FOLIO + (i * 37 % (FOLIO // PAGE)) * PAGE + 123
            for i in range(size // FOLIO)]


def task_write_bytes():
    with open('/proc/self/io') as f:
        for line in f:
            name, _, value = line.partition(':')
            if name == 'write_bytes':
                return int(value)
    raise RuntimeError('no write_bytes in /proc/self/io')


def fill(path, size):
    """Write SIZE bytes of 0x01 to PATH (created) and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        chunk = b'\1' * FOLIO
        for _ in range(size // FOLIO):
            os.write(fd, chunk)
        os.fsync(fd)
    finally:
        os.close(fd)


def store_and_msync(path, size, value):
    """Store VALUE at offsets(size) through a shared writable mapping of
    PATH, then msync(MS_SYNC).  Returns (bytes the kernel charged this task
    as dirtied, seconds msync took), or raises OSError if the mapping
    cannot be made."""
    fd = os.open(path, os.O_RDWR)
    try:
        mp = mmap.mmap(fd, size, mmap.MAP_SHARED,
                       mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    try:
        before = task_write_bytes()
        for off in offsets(size):
            mp[off] = value
        dirtied = task_write_bytes() - before
        t = time.monotonic()
        mp.flush()  # msync(MS_SYNC)
        return dirtied, time.monotonic() - t
    finally:
        mp.close()


def check_stores(path, size, value):
    """The file at PATH (read directly) holds VALUE at every store."""
    with open(path, 'rb') as f:
        for off in offsets(size):
            f.seek(off)
            got = f.read(1)
            if got != bytes([value]):
                sys.exit('%s: byte %d is %r, stored %#x' % (path, off, got, value))


def device_written_bytes(path):
    """Bytes written by the block device holding PATH so far, or None."""
    st = os.stat(path)
    stat = '/sys/dev/block/%d:%d/stat' % (os.major(st.st_dev), os.minor(st.st_dev))
    try:
        with open(stat) as f:
            return int(f.read().split()[6]) * 512
    except OSError:
        return None


class Mount:
    """foliofs -d over BACK at MNT, its request log in LOG."""

    def __init__(self, back, mnt, log, options):
        self.mnt, self.log = mnt, log
        opts = ','.join(('folio_size=2M', 'folio_policy=fixed') + tuple(options))
        with open(log, 'wb') as out:
            self.proc = subprocess.Popen([FOLIOFS, '-d', '-o', opts, back, mnt],
                                         stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=out)
        try:
            wait_mounted(mnt, self.proc)
        except RuntimeError:
            self.proc.kill()
            sys.exit('foliofs -o %s did not mount:\n%s' % (opts, self.tail()))

    def tail(self):
        with open(self.log, errors='replace') as f:
            return ''.join(f.readlines()[-20:])

    def stats(self):
        return read_stats(self.mnt)

    def set(self, name, value):
        with open(os.path.join(self.mnt, '.foliofs', 'tunables', name), 'w') as f:
            f.write(value + '\n')

    def log_size(self):
        return os.path.getsize(self.log)

    def writes_since(self, pos):
        """Counter {payload bytes: requests} of the WRITEs logged after POS."""
        with open(self.log, 'rb') as f:
            f.seek(pos)
            text = f.read().decode(errors='replace')
        return collections.Counter(int(m.group(1)) - WRITE_HDR
                                   for m in WRITE_RE.finditer(text))

    def umount(self):
        subprocess.run([FUSERMOUNT, '-u', self.mnt], check=True)
        rc = self.proc.wait(timeout=60)
        if rc != 0:
            sys.exit('foliofs exited %d after unmount:\n%s' % (rc, self.tail()))

    def cleanup(self):
        if self.proc.poll() is None:
            subprocess.run([FUSERMOUNT, '-u', '-z', self.mnt],
                           stderr=subprocess.DEVNULL)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def run_native(work, size):
    path = os.path.join(work, 'native.bin')
    fill(path, size)
    dev0 = device_written_bytes(path)
    dirtied, secs = store_and_msync(path, size, 0x5a)
    dev1 = device_written_bytes(path)
    check_stores(path, size, 0x5a)
    os.unlink(path)
    written = None if dev0 is None else dev1 - dev0
    return {'dirtied': dirtied, 'secs': secs, 'written': written}


def run_foliofs(work, size, name, options, accounts):
    """One mount with OPTIONS; a run per dirty_account in ACCOUNTS.
    Returns [(account, result)], or [(None, error text)] where a shared
    writable mapping cannot be made."""
    top = os.path.join(work, re.sub(r'\W+', '_', name))
    back, mnt = os.path.join(top, 'back'), os.path.join(top, 'mnt')
    os.makedirs(back)
    os.makedirs(mnt)
    m = Mount(back, mnt, os.path.join(top, 'foliofs.log'), options)
    out = []
    try:
        path = os.path.join(mnt, 'file')
        fill(path, size)
        for i, acct in enumerate(accounts):
            m.set('dirty_account', acct)
            value = 0x10 + i
            s0, pos = m.stats(), m.log_size()
            try:
                dirtied, secs = store_and_msync(path, size, value)
            except OSError as e:
                out.append((None, 'shared writable mmap fails: %s' % e.strerror))
                break
            s1 = m.stats()
            d = {k: s1[k] - s0[k] for k in s0}
            check_stores(os.path.join(back, 'file'), size, value)
            out.append((acct, {'dirtied': dirtied, 'secs': secs,
                               'requests': m.writes_since(pos),
                               'charged': d['nr_dirtied'],
                               'nr_written': d['nr_written'],
                               'pauses': d['throttle_events'],
                               'written': d['backing_write_bytes'],
                               'ios': d['backing_write_ios']}))
        m.umount()
    finally:
        m.cleanup()
    return out


def requests_str(counter):
    if not counter:
        return '-'
    return ', '.join('%d x %s' % (n, size_str(sz))
                     for sz, n in sorted(counter.items()))


def print_table(rows, folios):
    head = ('target', 'account', 'kernel dirtied', 'FUSE WRITEs',
            'charged (pages)', 'nr_written', 'pauses', 'written',
            'per folio', 'msync')
    lines = [head]
    for target, acct, r in rows:
        if isinstance(r, str):
            lines.append((target, '-', r) + ('',) * (len(head) - 3))
            continue
        written = r['written']
        if written is None:
            wtxt, per = '-', '-'
        else:
            wtxt = size_str(written) + (' (%d writes)' % r['ios'] if 'ios' in r
                                   else ' (device)')
            per = size_str(written // folios)
        lines.append((target, acct or '-', size_str(r['dirtied']),
                      requests_str(r.get('requests')),
                      str(r['charged']) if 'charged' in r else '-',
                      str(r['nr_written']) if 'nr_written' in r else '-',
                      str(r['pauses']) if 'pauses' in r else '-',
                      wtxt, per, '%.2f s' % r['secs']))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for n, line in enumerate(lines):
        print('  '.join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
        if n == 0:
            print('  '.join('-' * w for w in widths))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('-s', '--size', type=int, default=512,
                    help='file size in MiB, a multiple of 2 (default 512)')
    ap.add_argument('-d', '--workdir', default='/var/tmp',
                    help='directory on the disk to use (default /var/tmp)')
    ap.add_argument('-k', '--keep', action='store_true',
                    help='keep the scratch directory (daemon request logs)')
    args = ap.parse_args()
    if args.size <= 0 or args.size % 2:
        ap.error('size must be a positive multiple of 2 MiB')
    if not os.access(FOLIOFS, os.X_OK):
        sys.exit('%s is not built (meson setup build && ninja -C build, or set FOLIOFS)'
                 % FOLIOFS)
    size = args.size << 20
    folios = size // FOLIO
    work = tempfile.mkdtemp(prefix='mmap-seed004.', dir=args.workdir)
    print('%s file, one byte stored in each of its %d 2 MiB folios through '
          'MAP_SHARED, then msync(MS_SYNC); %s on %s, Linux %s'
          % (size_str(size), folios, FOLIOFS, work, os.uname().release))
    rows = []
    try:
        fs = subprocess.run(['findmnt', '-n', '-o', 'FSTYPE', '-T', work],
                            check=True, capture_output=True, text=True).stdout.strip()
        rows.append(('native ' + fs, None, run_native(work, size)))
        for name, options, accounts in TARGETS:
            for acct, r in run_foliofs(work, size, name, options, accounts):
                rows.append((name, acct, r))
    finally:
        if args.keep:
            print('kept %s' % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print_table(rows, folios)
    print('\nkernel dirtied: charged to the storing task as the page cache '
          'dirtied its folios; written: backing_write_bytes (native: the '
          'whole device, other I/O included); every run found all its stores '
          'in the backing file.')


if __name__ == '__main__':
    main()
