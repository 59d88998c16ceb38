"""Hostile and bad input (issue 10): every mount option given bad values,
offsets and lengths at the 63-bit limit and at the backing file system's
own limit, BACKING changed behind the mount's back, the backing file
system filling up, and garbage written to the control files.

Every test mounts its own foliofs.  Results are compared with the same
call on a plain directory of the backing's file system where there is one
to compare with.
"""

import errno
import os
import re
import shutil
import subprocess
import tempfile

import pytest

import util
from util import FOLIOFS, Mount, run_as, stats

KiB = 1 << 10
MiB = 1 << 20
OFF_MAX = (1 << 63) - 1


def phys_mem():
    return os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')


# --------------------------------------------------------------------------
# mount options

# Bad values shared by the options of one kind.
BAD_UINT = ['', 'x', '-1', '-0', '+1', ' 1', '1 ', '1.5', '0x10', '1e3', '1K',
            '99999999999999999999999', '18446744073709551616']
BAD_SIZE = ['', 'x', '-1', '-4K', '+4K', ' 4K', '1.5G', '4X', '4KX', '16E',
            '99999999999999999999999', '18446744073709551616', '17179869184T']
BAD_NAME = ['', 'x', 'NONE', ' none', 'none ']

# Every foliofs option (and libfuse's thread counts): values that must be
# refused, and the documented range's ends, which must be taken.
OPTIONS = {
    'attr_timeout': (BAD_UINT[:4] + ['+1', ' 1', '0x10', '1e3', 'inf', 'nan',
                                     '86400.5', '1e999', '1.2.3', '.'], ['0', '86400']),
    'block_size': (BAD_SIZE + ['0', '256', '128K', '3000'], ['512', '64K']),
    'folio_size': (BAD_SIZE + ['0', '2K', '4M', '12K'], ['4K', '2M']),
    'cache': (BAD_NAME, ['direct', 'writethrough', 'writeback']),
    # uring=on is refused where the kernel has it off (test_fuse_uring.py).
    'uring': (BAD_NAME, ['auto', 'off']),
    'uring_pin': (BAD_NAME + ['auto', '1', 'yes'], ['on', 'off']),
    'folio_policy': (BAD_NAME, ['fixed', 'ramp', 'kernel']),
    'readahead_kb': (BAD_UINT + ['65537'], ['0', '65536']),
    'lru_stats_ms': (BAD_UINT + ['600001'], ['0', '600000']),
    'ra_model': (BAD_NAME + ['5.10', '6.15', '6', '6.', ' 6.17', '+6.17', '6.17 ', '7.1'],
                 ['6.16', '6.17']),
    'cache_size': (BAD_SIZE + ['0', '1', str(phys_mem() + 1), '8589934591G'],
                   ['8M', str(phys_mem())]),
    'dirty_account': (BAD_NAME, ['folio', 'page', 'block']),
    'flushers': (BAD_UINT + ['65'], ['0', '64']),
    'dirty_background_ratio': (BAD_UINT + ['101'], ['0', '100']),
    'dirty_background_bytes': (BAD_SIZE + ['9223372036854775808'],
                               ['0', '9223372036854775807']),
    'dirty_ratio': (BAD_UINT + ['0', '101'], ['1', '100']),
    'dirty_bytes': (BAD_SIZE + ['1', '8191', '9223372036854775808'],
                    ['0', '8192', '9223372036854775807']),
    'throttle': (BAD_NAME, ['bdp', 'strictlimit', 'none']),
    'dirty_pinned_ratio': (BAD_UINT + ['101'], ['0', '100']),
    'dirty_pinned_bytes': (BAD_SIZE + ['9223372036854775808'],
                           ['0', '9223372036854775807']),
    'stats_log': (['', '/nonexistent-dir/log'], None),
    'trace': (['', '/nonexistent-dir/trace'], None),
    'write_log': (['', '/nonexistent-dir/wlog'], None),
    'stats_interval_ms': (BAD_UINT + ['0', '9', '3600001'], ['10', '3600000']),
    'dirty_expire_ms': (BAD_UINT + ['86400001'], ['0', '86400000']),
    'writeback_interval_ms': (BAD_UINT + ['86400001'], ['0', '86400000']),
    'backing_io': (BAD_NAME, ['uring', 'psync', 'null']),
    'wb_granularity': (BAD_NAME, ['block', 'folio']),
    'backing_direct': (BAD_NAME + ['1', '0', 'yes'], ['auto', 'on', 'off']),
    'max_io': (BAD_SIZE + ['0', '2K', '6K', '128M'], ['4K', '64M']),
    'fault': (['', 'x', 'write', 'write:EWHAT', 'write:EIO:every=0',
               'write:EIO:range=5-5', 'write:EIO:prob=2', 'write:EIO:bogus=1',
               'write:EIO:' + 'x' * 600], ['off', 'write:EIO:after=1000000']),
    'max_threads': (BAD_UINT + ['0', '100001'], ['1', '100000']),
    'max_idle_threads': (BAD_UINT + ['100001'], ['0', '100000']),
    'max_background': (BAD_UINT + ['0', '65536'], ['1', '65535']),
    'max_inodes': (BAD_UINT + ['0', '1023', '1073741825'], ['1024', '1073741824']),
    # Parameters (account.PARAM=) are tested in test_policy_load.py.
    'load': (['', '/nonexistent-dir/p.so', '/etc/hostname'], None),
}
# Options without a value: giving one is an error.
FLAGS = ('kernel_cache', 'allow_other')


def readme_options():
    """Option names of doc/admin.md's option table (-o rows)."""
    with open(os.path.join(util.REPO, 'doc', 'admin.md')) as f:
        text = f.read()
    return set(re.findall(r'^\| `-o ([a-z_]+)', text, re.M))


def help_options():
    out = subprocess.run([FOLIOFS, '--help'], stdout=subprocess.PIPE, check=True,
                         timeout=30).stdout.decode()
    return set(re.findall(r'^ +-o ([a-z_]+)', out, re.M))


def test_option_table_covers_every_option():
    """The tables here name every option doc/admin.md and --help list."""
    listed = readme_options() | help_options()
    assert listed, 'no option found in doc/admin.md or --help'
    assert listed <= set(OPTIONS) | set(FLAGS), listed - set(OPTIONS) - set(FLAGS)


def refused(b, m, opt, what):
    """foliofs -o OPT exits 2 with one line naming WHAT, and mounts nothing."""
    p = subprocess.Popen([FOLIOFS, '-f', '-o', opt, b, m], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if util.poll(lambda: p.poll() is not None or util.is_fuse_mounted(m), 10) \
            and p.poll() is None:
        subprocess.run([util.FUSERMOUNT, '-u', '-z', m])
        p.communicate(timeout=30)
        pytest.fail('-o %s mounted' % opt)
    err = p.communicate(timeout=30)[1].decode(errors='replace')
    assert p.returncode == 2, (opt, p.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('foliofs: '), (opt, err)
    assert what[:200] in lines[0], (opt, err)   # a long value may be cut
    assert not util.is_fuse_mounted(m), opt


@pytest.mark.parametrize('name', sorted(OPTIONS))
def test_bad_option_values_refused(dirs, name):
    """Malformed, zero, negative, huge and out-of-range values: status 2,
    one line naming the option and the value, nothing mounted; alone, and
    after a good value of the same option (the bad one is not hidden by a
    repeat)."""
    _, b, m = dirs
    bad, good = OPTIONS[name]
    for val in bad:
        opt = '%s=%s' % (name, val)
        refused(b, m, opt, opt)
        if good:
            refused(b, m, '%s=%s,%s' % (name, good[0], opt), opt)


def test_flags_take_no_value(dirs):
    _, b, m = dirs
    for name in FLAGS:
        for val in ('1', '0', 'yes', ''):
            refused(b, m, '%s=%s' % (name, val), name)


def tunables(mnt):
    d = os.path.join(mnt, '.foliofs', 'tunables')
    return {n: util.read_file(os.path.join(d, n), 'r').strip() for n in os.listdir(d)}


# Options whose value a mount shows, and where.
SHOWN_IN_STATS = {'block_size': 'block_size', 'folio_size': 'folio_size',
                  'cache_size': 'cache_size'}


def parse_size(val):
    m = re.fullmatch(r'(\d+)([KMGT]?)', val)
    return int(m.group(1)) << (10 * ' KMGT'.index(m.group(2) or ' '))


def check_in_force(mnt, opts):
    """Each option of OPTS that the mount shows has the value given."""
    st, tun = stats(mnt), tunables(mnt)
    for name, val in opts.items():
        if name in SHOWN_IN_STATS:
            assert st[SHOWN_IN_STATS[name]] == parse_size(val), (name, val)
        elif name in tun:
            want = str(parse_size(val)) if name.endswith('_bytes') else val
            assert tun[name] == want, (name, val, tun[name])
        elif name == 'backing_direct' and val != 'auto':
            assert st['backing_direct'] == (val == 'on'), (name, val)
        elif name == 'fault':
            assert util.get_fault(mnt).split(':')[:2] == val.split(':')[:2], (name, val)


def mount_ok(b, m, opts, extra=()):
    """Mount with OPTS (a dict), check every value is in force, do some I/O,
    unmount with status 0."""
    given = ['%s=%s' % kv for kv in opts.items()] + list(extra)
    with Mount(b, m, options=given) as mnt:
        check_in_force(m, opts)
        p = os.path.join(m, 'f')
        util.write_file(p, b'z' * 100000)
        assert util.read_file(p) == b'z' * 100000
        mnt.umount()


def test_range_ends_accepted(dirs):
    """Both ends of every documented range mount and are in force (a mount
    with every option at its low end, one at its high end, one per name
    of the named choices)."""
    root, b, m = dirs
    low = {n: v[1][0] for n, v in OPTIONS.items() if v[1]}
    high = {n: v[1][-1] for n, v in OPTIONS.items() if v[1]}
    # Ranges that depend on each other: 4 folios of the smallest size.
    low.update(block_size='512', folio_size='4K', cache_size='16K')
    high.update(dirty_bytes='0', dirty_background_bytes='0', dirty_pinned_bytes='0')
    del high['backing_io']   # null would make the I/O check meaningless
    log = os.path.join(root, 'stats.jsonl')
    mount_ok(b, m, low, ['stats_log=' + log])
    mount_ok(b, m, high)
    for name in ('dirty_bytes', 'dirty_background_bytes', 'dirty_pinned_bytes'):
        mount_ok(b, m, {name: OPTIONS[name][1][-1]})
    choices = [n for n, v in OPTIONS.items() if v[1] and not v[1][0][0].isdigit()]
    for i in range(max(len(OPTIONS[n][1]) for n in choices)):
        mount_ok(b, m, {n: OPTIONS[n][1][i] for n in choices
                        if i < len(OPTIONS[n][1]) and OPTIONS[n][1][i] != 'null'})


def test_repeated_option_last_wins(dirs):
    """An option given twice, in one -o or in two: the last value is in
    force, as mount(8) does with its options; fsname= replaces BACKING as
    the mount's source."""
    root, b, m = dirs
    logs = [os.path.join(root, 'a.jsonl'), os.path.join(root, 'b.jsonl')]
    args = ['-o', 'block_size=4K,cache_size=64M,dirty_account=folio,throttle=none',
            '-o', 'block_size=8K,cache_size=32M,dirty_account=block,throttle=strictlimit',
            '-o', 'fault=write:EIO,fault=off,stats_log=%s,stats_log=%s' % tuple(logs),
            '-o', 'dirty_ratio=30,dirty_ratio=40,fsname=first,fsname=second']
    with Mount(b, m, args=args) as mnt:
        st, tun = stats(m), tunables(m)
        assert (st['block_size'], st['cache_size']) == (8 * KiB, 32 * MiB)
        assert (tun['dirty_account'], tun['throttle'], tun['dirty_ratio']) == \
            ('block', 'strictlimit', '40')
        assert util.get_fault(m) == 'off'
        assert util.mountinfo(m)['source'] == 'second'
        mnt.umount()
    assert not os.path.exists(logs[0]) and os.path.exists(logs[1])


# --------------------------------------------------------------------------
# offsets and lengths at the limits

def copy_file_range(fd_in, off_in, fd_out, off_out, n):
    """copy_file_range(2) at explicit offsets."""
    return os.copy_file_range(fd_in, fd_out, n, off_in, off_out)


def max_file_size(fd):
    """The backing file system's limit: lseek(SEEK_SET) fails past it."""
    lo, hi = 0, OFF_MAX + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            os.lseek(fd, mid, os.SEEK_SET)
            lo = mid
        except OSError:
            hi = mid
    return lo


def limit_ops(limit):
    """(name, fn(fd)) of calls at or past LIMIT or OFF_MAX that must fail
    or read nothing, on any file system."""
    ops = []
    for off in sorted({OFF_MAX, OFF_MAX - 4095, OFF_MAX - 4096, OFF_MAX - 8191,
                       1 << 62, limit, limit + 1, limit + 4096}):
        if off > OFF_MAX:
            continue
        ops += [
            ('pwrite 4K @%#x' % off, lambda fd, o=off: os.pwrite(fd, b'y' * 4096, o)),
            ('pwrite 1 @%#x' % off, lambda fd, o=off: os.pwrite(fd, b'y', o)),
            ('pread @%#x' % off, lambda fd, o=off: os.pread(fd, 4096, o)),
            ('fallocate @%#x' % off, lambda fd, o=off: util.fallocate(fd, 0, o, 4096)),
            ('fallocate keep @%#x' % off,
             lambda fd, o=off: util.fallocate(fd, util.FALLOC_FL_KEEP_SIZE, o, 4096)),
            ('punch @%#x' % off, lambda fd, o=off: util.fallocate(
                fd, util.FALLOC_FL_KEEP_SIZE | util.FALLOC_FL_PUNCH_HOLE, o, 4096)),
            ('ftruncate %#x' % min(off + 1, OFF_MAX),
             lambda fd, o=min(off + 1, OFF_MAX): os.ftruncate(fd, o)),
            ('SEEK_DATA @%#x' % off, lambda fd, o=off: os.lseek(fd, o, os.SEEK_DATA)),
            ('SEEK_HOLE @%#x' % off, lambda fd, o=off: os.lseek(fd, o, os.SEEK_HOLE)),
            ('copy out @%#x' % off, lambda fd, o=off: copy_file_range(fd, 0, fd, o, 4096)),
            ('copy in @%#x' % off, lambda fd, o=off: copy_file_range(fd, o, fd, 0, 4096)),
        ]
    ops += [
        ('fallocate off+len overflows',
         lambda fd: util.fallocate(fd, 0, OFF_MAX - 100, 4096)),
        ('copy out off+len overflows', lambda fd: copy_file_range(fd, 0, fd, OFF_MAX - 100, 4096)),
        ('copy in off+len overflows', lambda fd: copy_file_range(fd, OFF_MAX - 100, fd, 0, 4096)),
    ]
    return ops


CACHE_STATS = ('folios', 'cache_bytes', 'dirty_bytes_exact', 'nr_dirty', 'wb_errors')


def test_offsets_at_the_limits(dirs):
    """pwrite, pread, fallocate, ftruncate, copy_file_range and SEEK_DATA at
    2^63-1, 2^63-4096, past the backing file system's own limit and with
    off+len overflowing: the same result and errno as on a plain directory
    of that file system (EFBIG, EINVAL, ENXIO or nothing read), the file
    unchanged, nothing allocated in the cache, and the daemon unmounts
    cleanly (no data it can never write).  A write across the limit is cut
    short there, as the plain directory does."""
    root, b, m = dirs
    ref = os.path.join(root, 'ref')
    os.mkdir(ref)
    base = os.urandom(8 * KiB)
    with Mount(b, m, options=['flushers=0']) as mnt:
        fds = {}
        for name, d in (('mnt', m), ('ref', ref)):
            fds[name] = os.open(os.path.join(d, 'f'), os.O_RDWR | os.O_CREAT, 0o644)
            os.write(fds[name], base)
            os.fsync(fds[name])
        limit = max_file_size(fds['ref'])
        try:
            before = {k: stats(m)[k] for k in CACHE_STATS}
            for what, fn in limit_ops(limit):
                got = util.outcome(fn, fds['mnt'])
                want = util.outcome(fn, fds['ref'])
                assert got == want, (what, got, want)
                assert os.fstat(fds['mnt']).st_size == len(base), what
                os.ftruncate(fds['ref'], len(base))
            assert {k: stats(m)[k] for k in CACHE_STATS} == before
            assert os.pread(fds['mnt'], len(base) + 1, 0) == base
            if limit < OFF_MAX:
                # Across the limit: cut short to the byte before it.
                for fd in fds.values():
                    assert os.pwrite(fd, b'w' * 4096, limit - 1) == 1
                    assert os.fstat(fd).st_size == limit
                    assert os.pread(fd, 4096, limit - 1) == b'w'
                    os.ftruncate(fd, len(base))
                    os.fsync(fd)
        finally:
            for fd in fds.values():
                os.close(fd)
        mnt.umount()
    assert util.read_file(os.path.join(b, 'f')) == base


def test_writeback_across_the_limit_fails_fsync(dirs):
    """cache=writeback: a write across the backing file system's limit
    lands in the kernel's cache whole (the kernel knows no limit), and its
    writeback reaches the daemon as one request across it.  What fits is
    stored, and fsync reports EFBIG: the kernel took the daemon's short
    count for the whole request, dropped the rest and let fsync succeed."""
    root, b, m = dirs
    ref = os.path.join(root, 'ref')
    os.mkdir(ref)
    fd = os.open(os.path.join(ref, 'f'), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        limit = max_file_size(fd)
    finally:
        os.close(fd)
    if limit >= OFF_MAX:
        pytest.skip('the backing file system has no limit below 2^63')
    with Mount(b, m, options=['kernel_cache']) as mnt:
        fd = os.open(os.path.join(m, 'f'), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            assert os.pwrite(fd, b'w' * 8192, limit - 4096) == 8192
            got = util.outcome(os.fsync, fd)
        finally:
            os.close(fd)
        mnt.umount()
    assert got == ('err', 'EFBIG')
    with open(os.path.join(b, 'f'), 'rb') as f:
        f.seek(limit - 4096)
        assert f.read() == b'w' * 4096


# --------------------------------------------------------------------------
# BACKING changed behind the mount's back

def _behind(mnt, back, case):
    """Run as the daemon's (unprivileged) user: a cached file with dirty
    blocks, then CASE done to the backing file directly; returns what the
    mount then gave."""
    p, bp = os.path.join(mnt, 'f'), os.path.join(back, 'f')
    out = {}
    with open(p, 'wb') as f:
        f.write(b'A' * 3 * MiB)
        f.flush()
        os.fsync(f.fileno())
    fd = os.open(p, os.O_RDWR)
    try:
        os.pwrite(fd, b'B' * 8 * KiB, MiB)      # dirty, not yet written back
        if case == 'truncate':
            os.truncate(bp, 4 * KiB)
        elif case == 'replace':
            util.write_file(bp + '.new', b'N' * 100)
            os.rename(bp + '.new', bp)
        elif case == 'unlink':
            os.unlink(bp)
        elif case == 'chmod':
            os.chmod(bp, 0o444)
        # The open descriptor works on as one on a local file system does:
        # it reads what it wrote, writes and syncs.
        out['read'] = os.pread(fd, 8 * KiB, MiB)
        out['write'] = os.pwrite(fd, b'C' * 4 * KiB, 2 * MiB + 4 * KiB)
        out['fsync'] = util.outcome(os.fsync, fd)
    finally:
        os.close(fd)
    # New opens go by name (attr_timeout=0: no cached entry).
    out['open_rw'] = util.outcome(lambda: os.close(os.open(p, os.O_RDWR)))
    out['content'] = util.outcome(util.read_file, p)
    if case in ('truncate', 'chmod'):
        out['truncate'] = util.outcome(os.truncate, p, 3 * MiB)
    if case == 'chmod':
        # Written through the mount, closed, then made read-only: the daemon
        # must still write it back (or fail loudly, never silently).
        os.chmod(bp, 0o644)
        with open(p, 'r+b') as f:
            f.seek(3 * MiB - 4 * KiB)
            f.write(b'D' * 4 * KiB)
        os.chmod(bp, 0o444)
        util.ctl_write(mnt, 'sync', value='1')
    return out


@pytest.mark.parametrize('case', ['truncate', 'replace', 'unlink', 'chmod'])
def test_backing_changed_behind_the_mount(dirs, tuser, case):
    """Truncated, replaced (rename over), unlinked or made read-only (chmod
    0444, the daemon not root) behind the mount's back while cached and
    dirty.  An open descriptor keeps its inode, as on a local file system:
    it reads and writes, and fsync puts what it acknowledged into that
    inode.  By name, the mount then shows the backing's new state once its
    entry expires: the replacing file (never overwritten by the old cache),
    no file, or a read-only one.  The daemon never crashes and exits 0."""
    root, b, m = dirs
    name, uid, gid = tuser
    for d in (root, b, m):
        os.chown(d, uid, gid)
    with Mount(b, m, user=name, options=['attr_timeout=0']) as mnt:
        out = run_as(name, _behind, m, b, case)
        assert mnt.proc.poll() is None, mnt.output()
        mnt.umount()
    assert out['read'] == b'B' * 8 * KiB
    assert out['write'] == 4 * KiB
    assert out['fsync'] == ('ok', None)
    bp = os.path.join(b, 'f')
    if case == 'truncate':
        # What fsync acknowledged is there; the cut-off clean data is not
        # brought back (the cache kept serving it until the unmount).
        data = util.read_file(bp)
        assert data[MiB:MiB + 8 * KiB] == b'B' * 8 * KiB
        assert data[2 * MiB + 4 * KiB:2 * MiB + 8 * KiB] == b'C' * 4 * KiB
        assert out['open_rw'] == ('ok', None) and out['truncate'] == ('ok', None)
    elif case == 'replace':
        assert util.read_file(bp) == b'N' * 100
        assert out['content'] == ('ok', b'N' * 100)
    elif case == 'unlink':
        assert not os.path.exists(bp)
        assert out['open_rw'] == ('err', 'ENOENT') and out['content'] == ('err', 'ENOENT')
    else:
        data = util.read_file(bp)
        assert data[MiB:MiB + 8 * KiB] == b'B' * 8 * KiB
        assert data[2 * MiB + 4 * KiB:2 * MiB + 8 * KiB] == b'C' * 4 * KiB
        assert data[3 * MiB - 4 * KiB:] == b'D' * 4 * KiB
        assert out['open_rw'] == ('err', 'EACCES') and out['truncate'] == ('err', 'EACCES')


# --------------------------------------------------------------------------
# the backing file system filling up

@pytest.fixture
def small_ext4():
    """A 64 MiB ext4 loop mount (root and losetup only)."""
    if os.geteuid() != 0 or not shutil.which('losetup') or not shutil.which('mkfs.ext4'):
        pytest.skip('needs root, losetup and mkfs.ext4')
    root = tempfile.mkdtemp(prefix='foliofs-enospc-')
    img, lo = os.path.join(root, 'img'), os.path.join(root, 'lo')
    os.mkdir(lo)
    with open(img, 'wb') as f:
        f.truncate(64 * MiB)
    subprocess.run(['mkfs.ext4', '-q', '-F', '-m', '0', img], check=True)
    r = subprocess.run(['mount', '-o', 'loop', img, lo], stderr=subprocess.PIPE)
    if r.returncode != 0:
        shutil.rmtree(root)
        pytest.skip('cannot loop-mount: %s' % r.stderr.decode())
    try:
        yield root, lo
    finally:
        for d in (os.path.join(root, 'm'),):
            if util.is_fuse_mounted(d):
                subprocess.run([util.FUSERMOUNT, '-u', '-z', d])
        subprocess.run(['umount', lo])
        shutil.rmtree(root, ignore_errors=True)


def fill_until_enospc(fd, chunk, limit):
    """Write CHUNK after CHUNK, fsync every 4 of them, until ENOSPC (from
    a write or an fsync).  Returns (chunks written, chunks acknowledged by
    an fsync, errno)."""
    acked = 0
    for i in range(limit):
        try:
            os.write(fd, chunk(i))
        except OSError as e:
            return i, acked, e.errno
        if i % 4 == 3:
            try:
                os.fsync(fd)
                acked = i + 1
            except OSError as e:
                return i + 1, acked, e.errno
    pytest.fail('no ENOSPC after %d chunks' % limit)


@pytest.mark.timeout(60)
def test_backing_fills_up(small_ext4):
    """ENOSPC of the backing file system reaches the writer or fsync; the
    data stays dirty and fsync keeps failing while there is no space, and
    an unmount then names the file and exits 1.  Everything fsync
    acknowledged is on disk after that.  When space returns (a file deleted
    directly on the backing file system), writes and fsync through a new
    mount succeed and the data is all there."""
    root, lo = small_ext4
    m = os.path.join(root, 'm')
    os.mkdir(m)
    keep = os.urandom(4 * MiB)
    util.write_file(os.path.join(lo, 'ballast'), b'\0' * 16 * MiB)

    def chunk(i):
        return bytes([i % 251]) * MiB

    mnt = Mount(lo, m, options=['cache_size=64M']).start()
    try:
        mnt.wait_for_mount()
        util.write_file(os.path.join(m, 'keep'), keep)
        util.sync_path(os.path.join(m, 'keep'))
        fd = os.open(os.path.join(m, 'fill'), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            written, acked, err = fill_until_enospc(fd, chunk, 128)
            assert err == errno.ENOSPC
            assert util.outcome(os.fsync, fd) == ('err', 'ENOSPC')
            assert stats(m)['dirty_bytes_exact'] > 0
        finally:
            os.close(fd)
        subprocess.run([util.FUSERMOUNT, '-u', m], check=True)
        assert mnt.proc.wait(30) == 1, mnt.output()
    finally:
        mnt.cleanup()
    out = mnt.output()
    assert 'fill' in out, out
    assert util.read_file(os.path.join(lo, 'keep')) == keep
    data = util.read_file(os.path.join(lo, 'fill'))
    assert len(data) >= acked * MiB
    for i in range(acked):
        assert data[i * MiB:(i + 1) * MiB] == chunk(i), 'acknowledged MiB %d lost' % i

    os.unlink(os.path.join(lo, 'ballast'))
    with Mount(lo, m, options=['cache_size=64M']) as mnt:
        fd = os.open(os.path.join(m, 'fill'), os.O_WRONLY)
        try:
            for i in range(acked, written):
                assert os.pwrite(fd, chunk(i), i * MiB) == MiB
            os.fsync(fd)
        finally:
            os.close(fd)
        mnt.umount()
    data = util.read_file(os.path.join(lo, 'fill'))
    for i in range(written):
        assert data[i * MiB:(i + 1) * MiB] == chunk(i), 'MiB %d lost' % i


# --------------------------------------------------------------------------
# control files

# Stats that follow from the settings alone (with no I/O, they stay put).
SETTING_STATS = ('dirty_thresh', 'bg_thresh', 'dirty_limit', 'setpoint',
                 'pinned_thresh', 'pinned_limit', 'cache_size', 'block_size',
                 'folio_size', 'faults_injected', 'nr_dirty', 'folios')

GARBAGE = [b'abc', b'-1', b'-0', b'+5', b'1.5', b'0x10', b'1e3', b'5\x00junk', b'5\n6',
           b'5\x01', b'\x7f5', b'\xff\xfe', b'99999999999999999999999',
           b'18446744073709551616', b'9223372036854775808', b'16E', b'x' * 5000,
           b'5' * 20000, b'page\x00folio', b'NONE', b'bdp\x00none']
# Values that would make no sense or divide by zero.
ZERO = {'dirty_ratio': [b'0', b'101'], 'dirty_bytes': [b'0', b'1', b'8191'],
        'dirty_background_ratio': [b'101'], 'dirty_pinned_ratio': [b'101'],
        'dirty_expire_ms': [b'86400001'], 'writeback_interval_ms': [b'86400001']}
BAD_FAULTS = [b'', b'write:EIO:every=0', b'write:EIO:range=5-5', b'write:EIO:prob=2',
              b'write:EIO:every=18446744073709551616', b'write:EIO\x00', b'write:EIO\nread:EIO']


def settings(mnt):
    st = stats(mnt)
    return tunables(mnt), util.get_fault(mnt), {k: st[k] for k in SETTING_STATS}


def write_once(path, data, off=0):
    fd = os.open(path, os.O_WRONLY)
    try:
        return util.outcome(os.pwrite, fd, data, off)
    finally:
        os.close(fd)


def test_control_files_refuse_garbage(dirs):
    """Garbage, huge, zero, negative, empty and very long values, values
    holding a NUL or a newline, writes far past the start, and writes by
    another user: EINVAL (EACCES for the other user), one log line each,
    and nothing changes."""
    _, b, m = dirs
    with Mount(b, m, options=['allow_other', 'flushers=0']) as mnt:
        before = settings(m)
        tdir = os.path.join(m, '.foliofs', 'tunables')
        targets = [(os.path.join(tdir, n), GARBAGE + ZERO.get(n, []) + [b''])
                   for n in sorted(os.listdir(tdir))]
        targets.append((os.path.join(m, '.foliofs', 'fault'), GARBAGE + BAD_FAULTS))
        tried = 0
        for path, values in targets:
            for v in values:
                if v == b'':
                    # An empty write does not reach the daemon; an empty line does.
                    v = b'\n'
                got = write_once(path, v)
                assert got == ('err', 'EINVAL'), (path, v[:40], got)
                tried += 1
            assert write_once(path, b'5\n', 1 << 62) == ('err', 'EINVAL')
            assert util.outcome(run_as, 'nobody', write_once, path, b'5\n') == \
                ('err', 'EACCES')
            assert settings(m) == before, path
        # stats and files are read-only for everyone, root included.
        for name in ('stats', 'files'):
            assert util.outcome(os.open, os.path.join(m, '.foliofs', name),
                                os.O_WRONLY) == ('err', 'EACCES')
        # sync takes anything, from anyone (as sync(1) does), and changes no setting.
        assert write_once(os.path.join(m, '.foliofs', 'sync'), b'\x00' * 5000) == \
            ('ok', 5000)
        assert settings(m) == before
        mnt.umount()
    # The transport's notice (uring=auto where the kernel has the ring on) aside,
    lines = [l for l in mnt.output().splitlines() if not l.startswith('foliofs: uring: ')]
    # a line for each refused value but the one per file too long to take,
    # none split by a newline in the value.
    assert len(lines) == tried - len(targets), mnt.output()[-3000:]
    assert all(l.startswith('foliofs: .foliofs/') for l in lines), mnt.output()[-3000:]
