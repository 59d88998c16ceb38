# SPDX-License-Identifier: GPL-2.0-or-later
"""Crash states beyond kill -9 (issue 10): the write log (-o write_log=FILE)
and crash images built from it by contrib/tools/crashimg.py.

The log and the tool on their own (small, no PostgreSQL):
- a write, fsync, write sequence on the mount gives exactly those records,
  with their data, for pwritev and for io_uring batches;
- the after-flush image of a cut point holds the file as it was when the
  sync returned; torn and subset images at a later cut differ from its
  after-flush image only in blocks written after the last sync of their
  file, each block old or new, never anything else;
- the whole log replayed over the base equals BACKING after writes,
  holes, truncates, fallocates, copies, renames and unlinks, under each
  write path; namespace changes replay, and nsdrop images keep what a
  directory sync committed;
- a damaged log is refused with the offset of the damaged record; an
  incomplete last record (a daemon killed while writing it) is ignored;
- a log that cannot be written refuses every change to BACKING with EIO.

With PostgreSQL (test_pg_crash_images_recover): a cluster made with
--data-checksums and cleanly stopped is copied (the base); the server runs
on a mount of the same directory with write_log while pgbench and the
numbered-row inserter of the crash loop run, a CHECKPOINT in the middle;
then the daemon and the server are killed with SIGKILL.  The whole log
replayed over the base must give BACKING as it was left.  For a bounded
number of cut points and image kinds (crashimg.py plan: the end of the log,
then cut points spread over the log, the kinds in turn) the image is built,
mounted through foliofs, and PostgreSQL runs crash recovery on it; then
pg_amcheck --heapallindexed on every relation, every row whose commit was
acknowledged before the cut point's time present, a clean stop and
pg_checksums --check.  FOLIOFS_CRASH_IMAGES=N checks N images (default 6;
the long form: 2000), FOLIOFS_CRASH_SEED=S picks them, FOLIOFS_CRASH_LOAD_S
sets the seconds of load recorded (default 4), FOLIOFS_CRASH_OPTIONS=a,b
adds -o options to every mount (as for test_pg_crash.py).  The log, the
base and a failing image are moved to /var/tmp/foliofs-crashimg-failed-PID
and the command that rebuilds the image is printed.
"""
import errno
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

import util
from pgutil import Cluster, Inserter, pg_bindir_or_skip
from util import Mount, fsync_path

sys.path.insert(0, os.path.join(util.REPO, 'contrib', 'tools'))
import crashimg  # noqa: E402

CRASHIMG = os.path.join(util.REPO, 'contrib', 'tools', 'crashimg.py')
BLOCK = 4096


def _mount(b, m, log, *options):
    mount = Mount(b, m, options=['write_log=' + log] + list(options))
    mount.start()
    mount.wait_for_mount()
    return mount


def _changes(log):
    """The records after the catalog."""
    end = next(r.index for r in log.records if r.type == crashimg.ENTRIES_END)
    return log.records[end + 1:]


def _read(path):
    with open(path, 'rb') as f:
        return f.read()


# ------------------------------------------------------- the log on its own

@pytest.mark.parametrize('io', ['psync', 'uring'])
def test_write_log_records_write_fsync_write(dirs, io):
    """Two runs written back together (one batch: io_uring when asked),
    fsync, one more write: the log holds create, the two writes with their
    data, the fsync, then the last write before the fsync of the unmount,
    in that order and with time never going back."""
    root, b, m = dirs
    log_path = os.path.join(root, 'wlog')
    mount = _mount(b, m, log_path, 'flushers=0', 'backing_io=' + io)
    try:
        fd = os.open(os.path.join(m, 'f'), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        os.pwrite(fd, b'a' * BLOCK, 0)
        os.pwrite(fd, b'b' * BLOCK, 2 * BLOCK)
        os.fsync(fd)
        os.pwrite(fd, b'c' * 100, BLOCK + 5)
        os.close(fd)
        ino = os.stat(os.path.join(b, 'f')).st_ino
        mount.umount()
    finally:
        mount.cleanup()
    log = crashimg.Log(log_path)
    assert log.truncated_at is None
    assert log.records[0].type == crashimg.ENTRY and log.records[0].dir == 0
    got = [(r.type, r.ino, r.off, log.data(r)) if r.type == crashimg.WRITE
           else (r.type, r.ino) for r in _changes(log)]
    block1 = bytes(5) + b'c' * 100 + bytes(BLOCK - 105)
    assert got == [(crashimg.CREATE, ino),
                   (crashimg.WRITE, ino, 0, b'a' * BLOCK),
                   (crashimg.WRITE, ino, 2 * BLOCK, b'b' * BLOCK),
                   (crashimg.FSYNC, ino),
                   (crashimg.WRITE, ino, BLOCK, block1),
                   (crashimg.FSYNC, ino)]
    times = [r.time_ns for r in log.records]
    assert times == sorted(times)


def _write_blocks(path, blocks, fill):
    """Write FILL (one byte value) over the given block numbers of PATH."""
    fd = os.open(path, os.O_WRONLY)
    try:
        for blk in blocks:
            os.pwrite(fd, bytes([fill]) * BLOCK, blk * BLOCK)
    finally:
        os.close(fd)


def _blocks(data):
    return [data[i:i + BLOCK] for i in range(0, len(data), BLOCK)]


def _wait_for_writes(log_path, ino, offsets):
    """Poll the live log until it holds a write of INO at each offset."""
    def seen():
        recs = crashimg.Log(log_path).records
        return set(offsets) <= {r.off for r in recs
                                if r.type == crashimg.WRITE and r.ino == ino}
    assert util.poll(seen, 30), 'writes of inode %d not in the log' % ino


def test_crash_images_after_flush_and_torn(dirs):
    """File a is written and fsynced twice; between the syncs, blocks 1, 3
    and 5 of file bee are written back by the flushers, whose syncs of it
    fail (an injected fsync fault: no sync reaches the backing file); then
    the daemon is killed.  The after-flush image at a's first sync holds a
    as read back then and bee as it was; at a's second sync, a is the same
    in every image (durable), and bee's blocks 1, 3, 5 are old or new while
    all others are old, with at least one image in which they are not all
    new."""
    root, b, m = dirs
    base = os.path.join(root, 'base')
    rnd = random.Random(7)
    old_a = rnd.randbytes(4 * BLOCK)
    old_b = rnd.randbytes(8 * BLOCK)
    util.write_file(os.path.join(b, 'a'), old_a)
    util.write_file(os.path.join(b, 'bee'), old_b)
    ino_a = os.stat(os.path.join(b, 'a')).st_ino
    ino_b = os.stat(os.path.join(b, 'bee')).st_ino
    shutil.copytree(b, base)
    log_path = os.path.join(root, 'wlog')
    mount = Mount(b, m, options=['write_log=' + log_path, 'dirty_expire_ms=0',
                                 'writeback_interval_ms=10', 'fault=fsync:EIO:file=bee'],
                  expect_errors=True)
    mount.start()
    mount.wait_for_mount()
    try:
        _write_blocks(os.path.join(m, 'a'), [0, 2], 0xa1)
        fsync_path(os.path.join(m, 'a'))
        a1 = _read(os.path.join(m, 'a'))
        _write_blocks(os.path.join(m, 'bee'), [1, 3, 5], 0xb1)
        _wait_for_writes(log_path, ino_b, [BLOCK, 3 * BLOCK, 5 * BLOCK])
        _write_blocks(os.path.join(m, 'a'), [1], 0xa2)
        fsync_path(os.path.join(m, 'a'))
        a2 = _read(os.path.join(m, 'a'))
        b_new = _read(os.path.join(m, 'bee'))
        os.kill(mount.pid, signal.SIGKILL)
    finally:
        mount.cleanup()
    log = crashimg.Log(log_path)
    # The flushers may sync a too: the cuts are the last sync of a before
    # bee was first written, and the last one.
    first_b = next(r.index for r in log.records
                   if r.type == crashimg.WRITE and r.ino == ino_b)
    syncs = [r.index for r in log.records
             if r.type == crashimg.FSYNC and r.ino == ino_a]
    syncs = [max(i for i in syncs if i < first_b), syncs[-1]]
    assert syncs[0] < first_b < syncs[1], [r.describe() for r in log.records]
    assert not [r for r in log.records if r.type == crashimg.FSYNC and r.ino == ino_b]

    img = os.path.join(root, 'img-flush1')
    crashimg.build(log, base, img, syncs[0], 'flush')
    assert _read(os.path.join(img, 'a')) == a1
    assert _read(os.path.join(img, 'bee')) == old_b

    img = os.path.join(root, 'img-flush2')
    crashimg.build(log, base, img, syncs[1], 'flush')
    assert _read(os.path.join(img, 'a')) == a2
    assert _read(os.path.join(img, 'bee')) == b_new

    old_blocks, new_blocks = _blocks(old_b), _blocks(b_new)
    differed = 0
    for kind in ('torn', 'subset'):
        for seed in range(6):
            img = os.path.join(root, 'img-%s-%d' % (kind, seed))
            s = crashimg.build(log, base, img, syncs[1], kind, seed, BLOCK)
            assert _read(os.path.join(img, 'a')) == a2, (kind, seed)
            got = _blocks(_read(os.path.join(img, 'bee')))
            assert len(got) == len(old_blocks), (kind, seed)
            for i, blk in enumerate(got):
                allowed = {old_blocks[i], new_blocks[i]} if i in (1, 3, 5) \
                    else {old_blocks[i]}
                assert blk in allowed, (kind, seed, i, s)
            differed += got != new_blocks
            shutil.rmtree(img)
    assert differed, 'no torn or subset image left out a write'


def test_crash_image_namespace(dirs):
    """Creates, a rename into a new directory, an unlink, a symlink, a hard
    link and a truncate: the after-flush image at the end equals BACKING;
    at the directory's fsync the nsdrop images keep what that sync
    committed (the directory and the file renamed into it)."""
    root, b, m = dirs
    base = os.path.join(root, 'base')
    util.write_file(os.path.join(b, 'old'), b'old')
    os.mkdir(os.path.join(b, 'sub'))
    shutil.copytree(b, base, symlinks=True)
    log_path = os.path.join(root, 'wlog')
    mount = _mount(b, m, log_path)
    try:
        util.write_file(os.path.join(m, 'f'), b'x' * 5000)
        os.mkdir(os.path.join(m, 'd'))
        os.rename(os.path.join(m, 'f'), os.path.join(m, 'd', 'g'))
        fsync_path(os.path.join(m, 'd'))
        os.unlink(os.path.join(m, 'old'))
        os.symlink('target', os.path.join(m, 'sub', 'ln'))
        os.link(os.path.join(m, 'd', 'g'), os.path.join(m, 'sub', 'h'))
        os.truncate(os.path.join(m, 'd', 'g'), 3000)
        mount.umount()
    finally:
        mount.cleanup()
    log = crashimg.Log(log_path)
    end = len(log.records) - 1
    img = os.path.join(root, 'img-end')
    crashimg.build(log, base, img, end, 'flush')
    r = subprocess.run(['diff', '-r', '--no-dereference', b, img],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.stat(os.path.join(img, 'd', 'g')).st_nlink == 2
    dsync = next(r.index for r in log.records if r.type == crashimg.FSYNCDIR)
    for seed in range(4):
        img = os.path.join(root, 'img-ns-%d' % seed)
        crashimg.build(log, base, img, end, 'nsdrop', seed)
        assert os.path.isdir(os.path.join(img, 'd'))
        assert os.path.lexists(os.path.join(img, 'd', 'g'))
        shutil.rmtree(img)
    img = os.path.join(root, 'img-dsync')
    s = crashimg.build(log, base, img, dsync, 'nsdrop', 0)
    assert s['ns_dropped'] == 0        # everything before it was committed
    assert os.path.exists(os.path.join(img, 'old'))


def test_nsdrop_metadata_is_a_prefix(dirs):
    """nsdrop images apply metadata as a prefix of the log, truncates and
    fallocates included: an image that drops an uncommitted rename must
    not keep a truncate recorded after it (an in-order journal that
    committed the truncate committed the rename).  And a truncate an
    fsync of its file committed is never dropped."""
    root, b, m = dirs
    base = os.path.join(root, 'base')
    shutil.copytree(b, base, symlinks=True)
    log_path = os.path.join(root, 'wlog')
    mount = _mount(b, m, log_path)
    try:
        for name in ('a', 'b'):
            util.write_file(os.path.join(m, name), b'x' * 8192)
            fsync_path(os.path.join(m, name))
        fsync_path(m)
        os.rename(os.path.join(m, 'a'), os.path.join(m, 'c'))    # never committed
        os.truncate(os.path.join(m, 'b'), 100)                    # nor this
        mount.umount()
    finally:
        mount.cleanup()
    log = crashimg.Log(log_path)
    end = len(log.records) - 1
    seen = set()
    for seed in range(12):
        img = os.path.join(root, 'img-%d' % seed)
        crashimg.build(log, base, img, end, 'nsdrop', seed)
        renamed = not os.path.exists(os.path.join(img, 'a'))
        truncated = os.path.getsize(os.path.join(img, 'b')) == 100
        assert renamed or not truncated, 'seed %d: truncate kept, rename before it dropped' % seed
        seen.add((renamed, truncated))
        shutil.rmtree(img)
    # Both prefixes: everything uncommitted dropped, or the truncate only.
    assert seen == {(False, False), (True, False)}, seen


# backing_direct (the default where BACKING takes O_DIRECT): the size
# fix-up after an O_DIRECT write of the block holding EOF (wb_sync_size in
# writeback/backing.c) is recorded as a truncate.
@pytest.mark.parametrize('options', [
    [], ['backing_io=psync'], ['wb_granularity=folio', 'folio_size=64K'],
    ['backing_direct=off']],
    ids=['default', 'psync', 'folio', 'buffered'])
def test_write_log_complete(dirs, options):
    """Writes, holes, truncates down and up, every fallocate mode,
    copy_file_range, a rename over a file, an unlink of an open file that
    is written after: the whole log replayed over the base equals BACKING
    after the unmount, byte for byte."""
    root, b, m = dirs
    base = os.path.join(root, 'base')
    util.write_file(os.path.join(b, 'old'), random.Random(1).randbytes(50000))
    shutil.copytree(b, base)
    log_path = os.path.join(root, 'wlog')
    mount = _mount(b, m, log_path, *options)
    try:
        rnd = random.Random(2)
        fd = os.open(os.path.join(m, 'f'), os.O_CREAT | os.O_RDWR, 0o644)
        os.pwrite(fd, rnd.randbytes(10000), 0)
        os.pwrite(fd, rnd.randbytes(100), 200000)
        os.fsync(fd)
        os.ftruncate(fd, 150001)
        os.pwrite(fd, rnd.randbytes(3000), 4000)
        os.ftruncate(fd, 300000)
        util.fallocate(fd, crashimg.FALLOC_FL_PUNCH_HOLE | crashimg.FALLOC_FL_KEEP_SIZE,
                       4096, 8192)
        util.fallocate(fd, crashimg.FALLOC_FL_ZERO_RANGE, 290000, 20000)
        util.fallocate(fd, 0, 0, 400000)
        util.fallocate(fd, crashimg.FALLOC_FL_KEEP_SIZE, 0, 500000)
        g = os.open(os.path.join(m, 'g'), os.O_CREAT | os.O_RDWR, 0o600)
        os.copy_file_range(fd, g, 20000, 1000, 0)
        os.close(g)
        os.rename(os.path.join(m, 'g'), os.path.join(m, 'old'))
        os.unlink(os.path.join(m, 'f'))
        os.pwrite(fd, b'orphan', 0)
        os.fsync(fd)
        os.close(fd)
        mount.umount()
    finally:
        mount.cleanup()
    log = crashimg.Log(log_path)
    img = os.path.join(root, 'img')
    crashimg.build(log, base, img, len(log.records) - 1, 'flush')
    r = subprocess.run(['diff', '-r', b, img], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(os.listdir(img)) == ['old']


def test_damaged_log_names_offset(dirs):
    """A byte changed in a record's header or data is an error naming that
    record's offset (and the tool exits 1 saying so); a log cut in the
    middle of its last record reads without it."""
    root, b, m = dirs
    log_path = os.path.join(root, 'wlog')
    mount = _mount(b, m, log_path)
    try:
        util.write_file(os.path.join(m, 'f'), b'y' * 10000)
        mount.umount()
    finally:
        mount.cleanup()
    good = _read(log_path)
    log = crashimg.Log(log_path)
    w = next(r for r in log.records if r.type == crashimg.WRITE)
    for where in (w.offset + 20, w.data_off + 100):
        bad = bytearray(good)
        bad[where] ^= 0x40
        util.write_file(log_path, bytes(bad))
        with pytest.raises(crashimg.LogError, match='offset %d:' % w.offset):
            crashimg.Log(log_path)
        r = subprocess.run([sys.executable, CRASHIMG, 'dump', log_path],
                           capture_output=True, text=True)
        assert r.returncode == 1 and 'offset %d:' % w.offset in r.stderr, r
    last = log.records[-1]
    util.write_file(log_path, good[:last.offset + 30])
    cut = crashimg.Log(log_path)
    assert cut.truncated_at == last.offset
    assert len(cut.records) == len(log.records) - 1


def test_write_log_failure_refuses_changes(dirs):
    """write_log on /dev/full: the log cannot be written, so every change
    to BACKING fails with EIO (creating, making a directory, fsync of
    written data) and the daemon says why, once."""
    root, b, m = dirs
    util.write_file(os.path.join(b, 'f'), b'z' * 100)
    mount = Mount(b, m, options=['write_log=/dev/full'])
    mount.start()
    mount.wait_for_mount()
    try:
        for fn in (lambda: util.write_file(os.path.join(m, 'new'), b'1'),
                   lambda: os.mkdir(os.path.join(m, 'd'))):
            with pytest.raises(OSError) as e:
                fn()
            assert e.value.errno == errno.EIO
        fd = os.open(os.path.join(m, 'f'), os.O_WRONLY)
        try:
            os.pwrite(fd, b'w', 0)
            with pytest.raises(OSError) as e:
                os.fsync(fd)
            assert e.value.errno == errno.EIO
        finally:
            os.close(fd)
        assert sorted(os.listdir(b)) == ['f']
        assert _read(os.path.join(b, 'f')) == b'z' * 100
    finally:
        # The data written cannot be written back: no unmount would be clean.
        if mount.proc.poll() is None:
            os.kill(mount.pid, signal.SIGKILL)
        mount.cleanup()
    out = mount.output()
    assert out.count('write_log: cannot write the log') == 1, out


# ------------------------------------------------------------ PostgreSQL

IMAGES = int(os.environ.get('FOLIOFS_CRASH_IMAGES', '6'))
LOAD_S = float(os.environ.get('FOLIOFS_CRASH_LOAD_S', '4'))
SCALE = 1           # pgbench -i -s: 100,000 accounts, about 15 MiB
CLIENTS = 2
TABLE = 'crash_rows'
# Small shared buffers: data pages are written all the time, so that torn
# and missing page writes meet full-page images in the WAL.
SERVER_CONF = ('shared_buffers=2MB', 'max_wal_size=32MB', 'checkpoint_timeout=30s')


class AckClock:
    """When the inserter's rows were acknowledged, as far as polling can
    tell: every 2 ms, the number of rows acknowledged so far, and then
    CLOCK_MONOTONIC (the clock of the write log).  A row counted in a
    sample was acknowledged before the sample's time."""

    def __init__(self, ins):
        self.ins = ins
        self.samples = [(0, 0)]
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self._stop.wait(0.002):
            n = len(self.ins.acked)
            self.samples.append((time.monotonic_ns(), n))

    def stop(self):
        self._stop.set()
        self.thread.join()

    def acked_before(self, t_ns):
        """The rows whose commit was acknowledged before T_NS."""
        n = max(n for t, n in self.samples if t <= t_ns)
        return self.ins.acked[:n]


def _make_base(c):
    """A fresh cluster with data checksums, amcheck, the inserter's table
    and pgbench's, cleanly stopped; then a copy of BACKING: the base."""
    c.mount_fs()
    c.initdb()
    c.start()
    c.psql('CREATE EXTENSION amcheck')
    c.pg.run('psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', *c.conn_args(),
             '-d', 'template1', '-c', 'CREATE EXTENSION amcheck', timeout=60)
    c.psql('CREATE TABLE %s (id int PRIMARY KEY, cycle int NOT NULL,'
           ' pad text NOT NULL)' % TABLE)
    c.pg.run('pgbench', '-i', '-s', SCALE, '-q', *c.conn_args(), 'postgres',
             timeout=120)
    c.stop()
    c.umount_clean()
    base = os.path.join(c.top, 'base')
    subprocess.run(['cp', '-a', c.backing, base], check=True)
    return base


def _record(c):
    """Run the load on a write-logged mount, then SIGKILL the daemon and
    the server.  Returns the log, the inserter and its AckClock."""
    wlog = os.path.join(c.top, 'write.log')
    c.options.append('write_log=' + wlog)
    c.mount_fs()
    c.start()
    with open(c.benchlog, 'ab') as benchlog:
        bench = c.popen('pgbench', '-n', '-c', CLIENTS, '-j', 1, '-T', 3600,
                        *c.conn_args(), 'postgres', stdout=benchlog,
                        stderr=benchlog)
    ins = Inserter(c, TABLE, 1, 0)
    clock = AckClock(ins)
    time.sleep(LOAD_S / 2)
    c.psql('CHECKPOINT')
    time.sleep(LOAD_S / 2)
    c.kill_daemon()
    c.kill_server()
    c.lazy_umount()
    bench.kill()
    bench.wait(60)
    err = ins.finish()
    clock.stop()
    if ins.error:
        pytest.fail('inserter: %s\n%s' % (ins.error, err))
    c.options.remove('write_log=' + wlog)
    return crashimg.Log(wlog), ins, clock


def _check_complete(c, log, base):
    """The whole log replayed over the base is BACKING as the killed
    daemon left it, name for name and byte for byte: no change to BACKING
    went unrecorded."""
    img = os.path.join(c.top, 'end-image')
    crashimg.build(log, base, img, len(log.records) - 1, 'flush')
    r = subprocess.run(['diff', '-r', '--no-dereference', c.backing, img],
                       capture_output=True, text=True)
    assert r.returncode == 0, 'the log misses changes:\n' + r.stdout[-4000:] + r.stderr
    shutil.rmtree(img)


def _check_image(c, log, base, clock, cut, kind, seed):
    """Build the image, recover PostgreSQL on it through foliofs and check
    it.  Returns the number of acknowledged rows that had to be there."""
    shutil.rmtree(c.backing)
    s = crashimg.build(log, base, c.backing, cut, kind, seed)
    # What the tool made is root's; the server runs as the test user.
    subprocess.run(['chown', '-R', '--no-dereference', '%s:' % c.user,
                    c.backing], check=True)
    need = clock.acked_before(s['time_ns'])
    c.mount_fs()
    c.start()
    c.amcheck()
    out = c.psql('COPY (SELECT id FROM %s WHERE pad = repeat(md5(id::text), 4))'
                 ' TO STDOUT' % TABLE, quiet=True)
    missing = sorted(set(need) - set(int(x) for x in out.split()))
    if missing:
        pytest.fail('%d rows acknowledged before the cut are missing or wrong:'
                    ' %s' % (len(missing), missing[:50]), pytrace=False)
    c.stop()
    c.checksums()
    c.umount_clean()
    return len(need), s


def _keep_failed(c, log, base, cut, kind, seed):
    """Move what reproduces a failed image out of the cluster's directory."""
    keep = os.path.join('/var/tmp', 'foliofs-crashimg-failed-%d' % os.getpid())
    os.makedirs(keep, exist_ok=True)
    for src in (log.path, base, c.backing):
        if os.path.lexists(src):
            shutil.move(src, os.path.join(keep, os.path.basename(src)))
    r = log.records[cut]
    sys.stdout.write('\nFAILED crash image: cut %d (%s, log offset %d, seq %d),'
                     ' kind %s, seed %d; the log, the base and the image (backing)'
                     ' are in %s:\n  crashimg.py build %s/write.log %s/base IMG'
                     ' --cut %d --kind %s --seed %d\n'
                     % (cut, crashimg.TYPE_NAMES[r.type], r.offset, r.seq, kind,
                        seed, keep, keep, keep, cut, kind, seed))


@pytest.mark.timeout(240 + 30 * IMAGES)
def test_pg_crash_images_recover(tuser):
    """PostgreSQL recovers clean on every crash image chosen, with every
    row acknowledged before the cut point."""
    bindir = pg_bindir_or_skip()
    env_seed = os.environ.get('FOLIOFS_CRASH_SEED')
    seed = int(env_seed) if env_seed else random.SystemRandom().randrange(1 << 32)
    sys.stdout.write('\ncrash images: seed %d (FOLIOFS_CRASH_SEED)\n' % seed)
    extra = os.environ.get('FOLIOFS_CRASH_OPTIONS')
    c = Cluster(tuser[0], bindir, options=extra.split(',') if extra else (),
                server_conf=SERVER_CONF)
    ok = False
    try:
        base = _make_base(c)
        log, ins, clock = _record(c)
        cuts = log.cut_points()
        sys.stdout.write('write log: %d records, %.1f MiB, %d cut points,'
                         ' %d rows acknowledged\n'
                         % (len(log.records), os.path.getsize(log.path) / 2**20,
                            len(cuts), len(ins.acked)))
        _check_complete(c, log, base)
        kinds = {}
        rows = 0
        for cut, kind, s in crashimg.plan(log, IMAGES, seed):
            try:
                n, summary = _check_image(c, log, base, clock, cut, kind, s)
            except BaseException:
                _keep_failed(c, log, base, cut, kind, s)
                raise
            rows += n
            kinds[kind] = kinds.get(kind, 0) + 1
            sys.stdout.write('image cut %(cut)d %(kind)s: %(durable)d durable writes,'
                             ' %(whole)d whole, %(torn)d torn, %(dropped)d dropped,'
                             ' %(ns_dropped)d namespace changes dropped' % summary
                             + '; %d rows required\n' % n)
        sys.stdout.write('crash images checked: %d (%s); acknowledged rows checked:'
                         ' %d\n' % (sum(kinds.values()), ', '.join(
                             '%s %d' % kv for kv in sorted(kinds.items())), rows))
        ok = True
    finally:
        if not ok:
            c.dump_logs()
        c.cleanup(ok)


# A log the daemon wrote when its CRC-32 was a hand-written table (before
# it used zlib's crc32()): create a.txt, write 16 bytes, write 5000 bytes at
# 4096, fsync, mkdir d, rename a.txt to d/b.txt, unmount.
OLD_LOG = os.path.join(util.REPO, 'tests', 'data', 'writelog-v1-table-crc.wlg')


def _shape(log):
    return [(r.type, r.off, r.len, log.data(r)) if r.type == crashimg.WRITE
            else r.type for r in _changes(log)]


def test_write_log_format_unchanged_by_zlib_crc(dirs):
    """The checksums now come from zlib's crc32(): a log written before
    still reads (every header and data CRC checks), and a log of the same
    operations written now reads as the same records."""
    root, b, m = dirs
    old = crashimg.Log(OLD_LOG)
    assert old.truncated_at is None
    log_path = os.path.join(root, 'wlog')
    mount = _mount(b, m, log_path)
    try:
        util.write_file(os.path.join(m, 'a.txt'), b'hello write log\n')
        fd = os.open(os.path.join(m, 'a.txt'), os.O_WRONLY)
        os.pwrite(fd, b'x' * 5000, 4096)
        os.fsync(fd)
        os.close(fd)
        os.mkdir(os.path.join(m, 'd'))
        os.rename(os.path.join(m, 'a.txt'), os.path.join(m, 'd', 'b.txt'))
        mount.umount()
    finally:
        mount.cleanup()
    new = crashimg.Log(log_path)
    assert new.truncated_at is None
    with open(OLD_LOG, 'rb') as f, open(log_path, 'rb') as g:
        assert f.read(24) == g.read(24)     # magic, version, sizes
    assert _shape(new) == _shape(old)
