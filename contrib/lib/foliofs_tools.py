# SPDX-License-Identifier: GPL-2.0-or-later
"""foliofs_tools - what contrib's Python scripts share, in one module.

  running and undoing   Skip, Undo (a stack of cleanups), Signals, run(),
                        parse_size(), wr(), rd()
  foliofs mounts        FUSERMOUNT, is_fuse_mounted(), wait_mounted(),
                        umount_fuse(), parse_stats() and read_stats()
                        (.foliofs/stats), foliofs_folios(), foliofs_evict()
  the kernel            kernel_skip_reason(), tracefs_root() (tracefs,
                        mounted if it is not), cached_pages() (cachestat(2)),
                        libc(), bdi_defaults()
  PostgreSQL            pg_bindir(), as_pg(), Cluster (a cluster run as the
                        postgres user), pg_loop_fs() (a file system on a new
                        loop device for its data, new_loop_device())
  the cache by class    FILE_CLASSES, relation_files() and relation_classes()
                        (pgbench's relation files), file_class(),
                        data_file_classes() (inode -> class), parse_folios()
                        and read_folios() (.foliofs/folios whole),
                        cache_by_class() (a mount's folios per file class)
  who wrote the buffers BGWRITER_SQL, bgwriter_delta() (pg_stat_bgwriter
                        between two reads)

A script imports it as a plain module, with this directory put on
sys.path once:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                    '..', 'lib'))
    import foliofs_tools

An installed script (foliofs-pgcompare) finds it in
../share/foliofs/python from its own directory, where meson installs it.
"""
import argparse
import ctypes
import errno
import fcntl
import functools
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import time

TRACEFS = '/sys/kernel/tracing'
FUSERMOUNT = shutil.which('fusermount3') or '/usr/bin/fusermount3'
PG_USER = 'postgres'


class Skip(Exception):
    """What was asked cannot run here; the message says why."""


# --------------------------------------------------------------------------
# running and undoing

class Undo:
    """A stack of cleanups, run in reverse on close(), each at most once;
    a failing one is reported and the rest still run."""

    def __init__(self, prog=None):
        self.steps = []
        # Who reports a failing cleanup: the script run, by default.
        self.prog = prog or os.path.splitext(os.path.basename(sys.argv[0]))[0]

    def push(self, what, fn, *args):
        self.steps.append((what, fn, args))

    def close(self):
        while self.steps:
            what, fn, args = self.steps.pop()
            try:
                fn(*args)
            except Exception as e:  # noqa: BLE001 - report and go on
                print('%s: cleanup: %s: %s' % (self.prog, what, e), file=sys.stderr)


def _raise_exit(signum, frame):
    raise SystemExit(128 + signum)


class Signals:
    """SIGINT, SIGTERM and SIGHUP unwind the stack (finally blocks run)."""

    def __enter__(self):
        self.old = {s: signal.signal(s, _raise_exit)
                    for s in (signal.SIGTERM, signal.SIGHUP)}
        return self

    def __exit__(self, *exc):
        for s, h in self.old.items():
            signal.signal(s, h)
        return False


def run(cmd, **kw):
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError('%s: exit %d: %s' % (' '.join(cmd), r.returncode, r.stdout.strip()))
    return r.stdout


def parse_size(text):
    """Bytes of TEXT, a number with K, M, G or T or none (argparse's type)."""
    m = re.fullmatch(r'(\d+)([KMGT]?)', text.strip().upper())
    if not m:
        raise argparse.ArgumentTypeError('%r: a size (bytes, or with K, M, G, T)' % text)
    return int(m.group(1)) << {'': 0, 'K': 10, 'M': 20, 'G': 30, 'T': 40}[m.group(2)]


def wr(path, text):
    with open(path, 'w') as f:
        f.write(text)


def rd(path):
    with open(path) as f:
        return f.read()


# --------------------------------------------------------------------------
# foliofs mounts

def is_fuse_mounted(mnt):
    """Whether MNT is a FUSE mount (the last mount on it, as /proc says)."""
    target = os.path.realpath(mnt)
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            if pre.split(" ")[4] == target:
                found = post.split(" ")[0]
    return found is not None and found.startswith("fuse")


def foliofs_folios(mnt, ino):
    """[(index, order)] of the file with st_ino INO, and its flags."""
    out, flags = [], {}
    with open(os.path.join(mnt, '.foliofs', 'folios')) as f:
        for line in f:
            i, index, order, fl = line.split()
            if int(i) == ino:
                out.append((int(index), int(order)))
                flags[int(index)] = fl
    return out, flags


def parse_folios(text):
    """[(ino, index, order, flags)] of the text of .foliofs/folios."""
    out = []
    for line in text.splitlines():
        ino, index, order, flags = line.split()
        out.append((int(ino), int(index), int(order), flags))
    return out


def read_folios(mnt):
    """Every cached folio of the mount MNT, as parse_folios() gives them
    (one read of .foliofs/folios: one snapshot, readable by the mounting
    user only)."""
    with open(os.path.join(mnt, '.foliofs', 'folios')) as f:
        return parse_folios(f.read())


def foliofs_evict(mnt, ino, start, length):
    """Write "INO START LEN" to .foliofs/evict; its result line."""
    fd = os.open(os.path.join(mnt, '.foliofs', 'evict'), os.O_RDWR)
    try:
        os.pwrite(fd, ('%d %d %d\n' % (ino, start, length)).encode(), 0)
        return os.pread(fd, 4096, 0).decode().strip()
    finally:
        os.close(fd)


def wait_mounted(mnt, proc, timeout=10):
    """Until MNT is a FUSE mount; RuntimeError if its daemon PROC exits
    first (PROC.poll() then says how) or TIMEOUT seconds pass."""
    deadline = time.monotonic() + timeout
    while not is_fuse_mounted(mnt):
        if proc.poll() is not None:
            raise RuntimeError('foliofs exited with status %d before mounting' % proc.returncode)
        if time.monotonic() > deadline:
            raise RuntimeError('foliofs did not mount %s in %g s' % (mnt, timeout))
        time.sleep(0.02)


def umount_fuse(mnt, proc):
    """Unmount MNT and wait for its daemon PROC (lazily and killed after 30 s)."""
    subprocess.run([FUSERMOUNT, '-u', mnt], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        subprocess.run([FUSERMOUNT, '-u', '-z', mnt])
        proc.kill()
        proc.wait(10)


def parse_stats(text):
    """{name: value} of the numbers in TEXT, as .foliofs/stats has them
    (the policies in force are named, not counted: left out)."""
    stats = {}
    for line in text.splitlines():
        k, _, v = line.partition(' ')
        if v.strip().lstrip('-').isdigit():
            stats[k] = int(v)
    return stats


def read_stats(mnt):
    """parse_stats() of MNT's .foliofs/stats."""
    with open(os.path.join(mnt, '.foliofs', 'stats')) as f:
        return parse_stats(f.read())


# --------------------------------------------------------------------------
# the kernel: tracefs, the page cache, a bdi's knobs

def kernel_skip_reason():
    """Why the kernel backend cannot run here, or None."""
    if os.geteuid() != 0:
        return 'the kernel backend needs root (loop devices, mounts, tracefs)'
    for tool in ('losetup', 'mount', 'umount'):
        if not shutil.which(tool):
            return '%s is missing' % tool
    if not os.path.isdir(TRACEFS):
        return '%s does not exist: no tracefs in this kernel' % TRACEFS
    if not os.path.exists('/dev/loop-control') and not os.path.exists('/dev/loop0'):
        return 'no loop device (/dev/loop-control missing)'
    try:
        cached_pages(os.path.abspath(__file__))
    except OSError as e:
        return 'no cachestat(2) (Linux 6.5+): %s' % e.strerror
    return None


def tracefs_root(undo):
    """TRACEFS with tracefs mounted on it (mounted here if it was not)."""
    if os.path.isdir(os.path.join(TRACEFS, 'instances')):
        return TRACEFS
    r = subprocess.run(['mount', '-t', 'tracefs', 'nodev', TRACEFS],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0 or not os.path.isdir(os.path.join(TRACEFS, 'instances')):
        raise Skip('tracefs cannot be mounted at %s: %s' % (TRACEFS, r.stdout.strip()))
    undo.push('umount ' + TRACEFS, run, ['umount', TRACEFS])
    return TRACEFS


class _CachestatRange(ctypes.Structure):
    _fields_ = [('off', ctypes.c_uint64), ('len', ctypes.c_uint64)]


class _Cachestat(ctypes.Structure):
    _fields_ = [('nr_cache', ctypes.c_uint64), ('nr_dirty', ctypes.c_uint64),
                ('nr_writeback', ctypes.c_uint64), ('nr_evicted', ctypes.c_uint64),
                ('nr_recently_evicted', ctypes.c_uint64)]


NR_CACHESTAT = 451      # the same number on every architecture (since 6.5)


@functools.lru_cache(maxsize=None)
def libc():
    """libc with the prototypes cached_pages() and mincore(2)'s callers need."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    return libc


def cached_pages(path):
    """How many of PATH's pages are in the page cache: cachestat(2), which
    counts every folio of the mapping, also one whose read is still in
    flight (not uptodate yet).  mincore(2) counts only uptodate pages, so
    a folio of readahead I/O that has not completed is invisible to it."""
    lc = libc()
    rng, cs = _CachestatRange(0, 0), _Cachestat()     # len 0: to the end
    fd = os.open(path, os.O_RDONLY)
    try:
        if lc.syscall(ctypes.c_long(NR_CACHESTAT), ctypes.c_int(fd), ctypes.byref(rng),
                        ctypes.byref(cs), ctypes.c_uint(0)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, 'cachestat %s: %s' % (path, os.strerror(err)))
    finally:
        os.close(fd)
    return cs.nr_cache


# A bdi's dirty-throttling knobs and their defaults.  They outlive a
# detached loop device (its bdi stays, keyed by 7:N), so a reference run
# must not inherit another session's: a loop bdi left at strict_limit=1
# with a small max_bytes throttles every writer far below the freerun point.
BDI_DEFAULTS = (('strict_limit', '0'), ('min_ratio', '0'), ('max_ratio', '100'))


def bdi_defaults(dev, undo):
    """Put DEV's bdi dirty-throttling knobs at their defaults for the run
    (each changed one restored on undo); return {knob: value found}."""
    st = os.stat(dev)
    base = '/sys/class/bdi/%d:%d' % (os.major(st.st_rdev), os.minor(st.st_rdev))
    found = {}
    for knob, default in BDI_DEFAULTS:
        path = os.path.join(base, knob)
        if not os.path.exists(path):
            continue
        found[knob] = old = rd(path).strip()
        if old != default:
            # max_bytes (a byte form of max_ratio) follows max_ratio: the
            # undo of max_ratio restores it too.
            undo.push('%s of %s' % (knob, base), wr, path, old)
            wr(path, default)
    return found


# --------------------------------------------------------------------------
# PostgreSQL

def pg_bindir():
    for v in ('15', '16', '17', '14', '13'):
        d = '/usr/lib/postgresql/%s/bin' % v
        if os.access(os.path.join(d, 'postgres'), os.X_OK):
            return d
    raise Skip('no PostgreSQL server (apt-get install postgresql-15 postgresql-contrib)')


def as_pg(cmd, **kw):
    """CMD as the postgres user; its output."""
    return run(['runuser', '-u', PG_USER, '--'] + cmd, **kw)


# The server settings of every Cluster that decide what it reads and writes
# (beside shared_buffers and a run's own): no parallel query (a parallel
# sequential scan hands the table out in 1 MiB chunks to three processes,
# each with its own readahead, and builds no 2 MiB folio), no autovacuum.
# contrib/kernel/calibrate.py gives the model's server the same.
PG_SETTINGS = ('max_connections=100', 'fsync=on', 'max_parallel_workers_per_gather=0',
               'autovacuum=off')


class Cluster:
    """A cluster in DATADIR, its socket and log in WORK, on port PORT;
    INITDB: more initdb arguments (--data-checksums, --wal-segsize=64)."""

    def __init__(self, bindir, datadir, work, undo, initdb=()):
        self.bin = bindir
        self.data = datadir
        self.sock = os.path.join(work, 'sock')
        self.log = os.path.join(work, 'postgresql.log')
        self.port = 5400 + os.getpid() % 500
        self.undo = undo
        self.running = False
        os.makedirs(self.sock, exist_ok=True)
        uid = pwd.getpwnam(PG_USER).pw_uid
        os.chown(self.sock, uid, -1)
        open(self.log, 'a').close()
        os.chown(self.log, uid, -1)
        as_pg([os.path.join(bindir, 'initdb'), '-D', datadir, '-A', 'trust', '-E', 'UTF8',
               '--no-sync'] + list(initdb))

    def start(self, settings=()):
        conf = ['shared_buffers=128MB'] + list(PG_SETTINGS) + [
                'unix_socket_directories=' + self.sock, 'listen_addresses=',
                'port=%d' % self.port, 'log_line_prefix=%p %b ', 'log_connections=on',
                'log_autovacuum_min_duration=0'] + list(settings)
        opts = ' '.join('-c %s' % shlex_quote(c) for c in conf)
        as_pg([os.path.join(self.bin, 'pg_ctl'), '-D', self.data, '-l', self.log, '-w',
               '-t', '120', '-o', opts, 'start'])
        self.running = True
        self.undo.push('pg_ctl stop', self.stop)

    def stop(self):
        if not self.running:
            return
        as_pg([os.path.join(self.bin, 'pg_ctl'), '-D', self.data, '-m', 'fast', '-w',
               '-t', '120', 'stop'])
        self.running = False

    def restart(self, settings=()):
        self.stop()
        self.undo.steps = [s for s in self.undo.steps if s[0] != 'pg_ctl stop']
        self.start(settings)

    def psql(self, sql):
        return as_pg([os.path.join(self.bin, 'psql'), '-X', '-q', '-At', '-v',
                      'ON_ERROR_STOP=1', '-h', self.sock, '-p', str(self.port),
                      '-d', 'postgres', '-c', sql])

    def pgbench(self, args):
        return as_pg([os.path.join(self.bin, 'pgbench'), '-h', self.sock,
                      '-p', str(self.port), 'postgres'] + args)

    def log_size(self):
        return os.path.getsize(self.log)

    def roles_since(self, offset):
        """{pid: backend type} from the server log after byte OFFSET."""
        roles = {}
        with open(self.log, errors='replace') as f:
            f.seek(offset)
            for line in f:
                m = re.match(r'(\d+) ([a-z][a-z ]*?) (?:LOG|WARNING|ERROR|FATAL):', line)
                if m:
                    roles[int(m.group(1))] = m.group(2)
        return roles


def shlex_quote(s):
    return "'" + s.replace("'", "'\\''") + "'" if re.search(r"[^\w@%+=:,./-]", s) else s


def relation_files(cl):
    """{path relative to the data directory: class} of the database's
    relation files (segments too) in the running Cluster CL:
    relation_classes()."""
    return relation_classes(cl.psql(RELATION_SQL), cl.data)


LOOP_CONTROL = '/dev/loop-control'
LOOP_CTL_ADD, LOOP_CTL_REMOVE = 0x4C80, 0x4C81      # linux/loop.h
LOOP_FIRST_OWN = 200     # the loop devices made here: numbers from this one


def new_loop_device(undo):
    """A loop device made for the caller (LOOP_CTL_ADD) and removed by
    UNDO: its path.  Not one of the existing ones (losetup -f), whose
    backing_dev_info outlives every use: without cgroup writeback (cgroup
    v1) the throttle's estimates of that bdi's one bdi_writeback
    (dirty_ratelimit, write_bw) carry over from whatever ran on the device
    before, where a FUSE mount starts its own at the kernel's initial
    values.  A new device starts there too."""
    fd = os.open(LOOP_CONTROL, os.O_RDWR | os.O_CLOEXEC)
    try:
        for nr in range(LOOP_FIRST_OWN, LOOP_FIRST_OWN + 1000):
            try:
                fcntl.ioctl(fd, LOOP_CTL_ADD, nr)
            except OSError as e:
                if e.errno == errno.EEXIST:
                    continue
                raise OSError(e.errno, '%s: LOOP_CTL_ADD %d: %s'
                              % (LOOP_CONTROL, nr, e.strerror)) from e
            break
        else:
            raise RuntimeError('%s: loop%d to loop%d all exist' % (
                LOOP_CONTROL, LOOP_FIRST_OWN, LOOP_FIRST_OWN + 999))
    finally:
        os.close(fd)
    dev = '/dev/loop%d' % nr
    undo.push('remove ' + dev, remove_loop_device, nr)
    for _ in range(100):            # devtmpfs makes the node at once; udev may lag
        if os.path.exists(dev):
            return dev
        time.sleep(0.05)
    raise RuntimeError('%s: made (LOOP_CTL_ADD) but no device node appeared' % dev)


def remove_loop_device(nr):
    """LOOP_CTL_REMOVE of loop device NR, retried while it is still busy
    (a detach finishes asynchronously)."""
    fd = os.open(LOOP_CONTROL, os.O_RDWR | os.O_CLOEXEC)
    try:
        for _ in range(50):
            try:
                fcntl.ioctl(fd, LOOP_CTL_REMOVE, nr)
                return
            except OSError as e:
                if e.errno != errno.EBUSY:
                    raise OSError(e.errno, '%s: LOOP_CTL_REMOVE %d: %s'
                                  % (LOOP_CONTROL, nr, e.strerror)) from e
            time.sleep(0.1)
        raise RuntimeError('/dev/loop%d: still busy after 5 s; not removed' % nr)
    finally:
        os.close(fd)


def pg_loop_fs(fstype, work, size, ra_kb, undo):
    """A FSTYPE file system of SIZE bytes on a loop device (direct I/O)
    over an image in WORK, read_ahead_kb RA_KB, mounted, with an empty
    directory pgdata for the postgres user: (the loop device, pgdata)."""
    mkfs = {'ext4': ['mkfs.ext4', '-q', '-F'], 'xfs': ['mkfs.xfs', '-q', '-f']}[fstype]
    if not shutil.which(mkfs[0]):
        raise Skip('%s is missing' % mkfs[0])
    img, mnt = os.path.join(work, fstype + '.img'), os.path.join(work, fstype)
    os.mkdir(mnt)
    with open(img, 'wb') as f:
        f.truncate(size)
    run(mkfs + [img])
    dev = new_loop_device(undo)
    run(['losetup', '--direct-io=on', dev, img])
    undo.push('losetup -d ' + dev, run, ['losetup', '-d', dev])
    ra_path = '/sys/block/%s/queue/read_ahead_kb' % os.path.basename(dev)
    undo.push('read_ahead_kb of ' + dev, wr, ra_path, rd(ra_path).strip())
    wr(ra_path, str(ra_kb))
    found = bdi_defaults(dev, undo)
    if any(found.get(k, v) != v for k, v in BDI_DEFAULTS):
        print('note: %s: bdi settings %s put back to defaults for the run'
              % (dev, ', '.join('%s=%s' % kv for kv in sorted(found.items()))),
              file=sys.stderr)
    run(['mount', dev, mnt])
    undo.push('umount ' + mnt, run, ['umount', mnt])
    data = os.path.join(mnt, 'pgdata')
    os.mkdir(data, 0o700)
    os.chown(data, pwd.getpwnam(PG_USER).pw_uid, -1)
    return dev, data


# --------------------------------------------------------------------------
# the cache by file class: which of pgbench's files the folios belong to

# The classes, as contrib/kernel/pg-seed.py reports the kernel's cache and
# contrib/tools/pgcompare.py the model's: pgbench_accounts, its primary
# key, pg_wal's segments, everything else.
# pg_stat_bgwriter as one JSON object, whatever columns the server's
# version has (PostgreSQL 17 moved buffers_backend to pg_stat_io and the
# checkpoint counters to pg_stat_checkpointer: they are then absent).
BGWRITER_SQL = 'SELECT row_to_json(s) FROM pg_stat_bgwriter s'

# The counters of who wrote shared buffers out, in the order reports show
# them: the background writer (buffers_clean; maxwritten_clean, its rounds
# stopped at bgwriter_lru_maxpages), backends evicting a dirty buffer
# themselves (buffers_backend), the checkpointer, and the buffers allocated.
BGWRITER_COUNTERS = ('buffers_clean', 'maxwritten_clean', 'buffers_backend',
                     'buffers_checkpoint', 'buffers_alloc')


def bgwriter_delta(before, after):
    """{counter: after - before} of BGWRITER_COUNTERS from two outputs of
    BGWRITER_SQL (psql -At); a counter the server does not have is left
    out."""
    b, a = json.loads(before), json.loads(after)
    return {k: a[k] - b[k] for k in BGWRITER_COUNTERS
            if isinstance(a.get(k), int) and isinstance(b.get(k), int)}


FILE_CLASSES = ('accounts', 'accounts_pkey', 'wal', 'other')
# Every relation with a file: psql -At prints "relname|path".
RELATION_SQL = ("SELECT relname, pg_relation_filepath(oid) FROM pg_class "
                "WHERE pg_relation_filepath(oid) IS NOT NULL")


def relation_classes(rows, data):
    """{path relative to the data directory DATA: class} of the relation
    files (each 1 GiB segment too: PATH, PATH.1, ...) from RELATION_SQL's
    output ROWS: pgbench_accounts, its primary key, or other."""
    classes = {}
    for line in rows.splitlines():
        if not line:
            continue
        name, path = line.rsplit('|', 1)
        classes[path] = {'pgbench_accounts': 'accounts',
                         'pgbench_accounts_pkey': 'accounts_pkey'}.get(name, 'other')
    out = {}
    for path, cls in classes.items():
        full = os.path.join(data, path)
        seg = 0
        while os.path.exists(full + ('.%d' % seg if seg else '')):
            out[path + ('.%d' % seg if seg else '')] = cls
            seg += 1
    return out


def file_class(rel, rels):
    """The class of the data directory's file REL (a path relative to it),
    RELS being relation_classes(): 'wal' in pg_wal, else its relation's,
    else 'other'."""
    return 'wal' if rel.startswith('pg_wal' + os.sep) else rels.get(rel, 'other')


def data_file_classes(data, rels):
    """{st_ino: class} of every file under the data directory DATA now
    (file_class(); a file gone meanwhile is left out).  A foliofs mount
    names files by their backing st_ino, so DATA may be the backing
    directory's copy of a data directory on the mount."""
    out = {}
    for top, _, names in os.walk(data):
        for name in names:
            path = os.path.join(top, name)
            try:
                ino = os.stat(path).st_ino
            except OSError:
                continue
            out[ino] = file_class(os.path.relpath(path, data), rels)
    return out


def cache_by_class(folios, classes):
    """The cached FOLIOS ([(ino, index, order, flags)], parse_folios()) per
    file class, CLASSES being {ino: class} (an inode it lacks is 'other'):
    {class: {'folios': {order: n}, 'bytes', 'share_2m' (of the bytes, in
    2 MiB folios), 'active': {order: n} and 'active_bytes' (on the active
    list: flag A), 'referenced' (folios with flag R)}}, orders as strings
    (as JSON keeps them).  Only classes with a folio are there."""
    out = {}
    for ino, _, order, flags in folios:
        c = out.setdefault(classes.get(ino, 'other'),
                           {'folios': {}, 'bytes': 0, 'share_2m': 0.0, 'active': {},
                            'active_bytes': 0, 'referenced': 0})
        o = str(order)
        c['folios'][o] = c['folios'].get(o, 0) + 1
        c['bytes'] += 4096 << order
        if 'A' in flags:
            c['active'][o] = c['active'].get(o, 0) + 1
            c['active_bytes'] += 4096 << order
        c['referenced'] += 'R' in flags
    for c in out.values():
        c['share_2m'] = (c['folios'].get('9', 0) << 21) / c['bytes']
    return out
