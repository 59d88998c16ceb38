"""Helpers for the mount-level tests (modelled on libfuse/sshfs test/util.py).

A test mounts foliofs with ``Mount``, which runs the daemon in the foreground
(``-f``) so that its exit status and its output can be checked:

    with Mount(backing, mnt, options=['allow_other']) as m:
        ...                      # entered: daemon started, mount visible
                                 # left normally: m.umount() asserts a clean exit

``umount()`` fails the test when the daemon exits non-zero or prints anything
suspicious (see ``BAD_OUTPUT``); ``cleanup()`` never raises and is what to call
from ``finally`` blocks and fixture teardowns.

The daemon binary is $FOLIOFS, by default <repo>/build/foliofs.
$FOLIOFS_EXTRA_OPTIONS (comma-separated -o options) is added to every
mount, to run existing tests under another configuration, e.g.
FOLIOFS_EXTRA_OPTIONS=uring=on (with enable_uring set, see
test_fuse_uring.py).
"""

import contextlib
import ctypes
import errno
import grp
import hashlib
import os
import pickle
import pwd
import re
import resource
import shutil
import subprocess
import tempfile
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLIOFS = os.environ.get('FOLIOFS', os.path.join(REPO, 'build', 'foliofs'))
FUSERMOUNT = shutil.which('fusermount3') or '/usr/bin/fusermount3'
EXTRA_OPTIONS = [o for o in os.environ.get('FOLIOFS_EXTRA_OPTIONS', '').split(',') if o]
# foliofsctl: $FOLIOFSCTL, by default tools/foliofsctl beside the daemon.
FOLIOFSCTL = os.environ.get(
    'FOLIOFSCTL',
    os.path.join(os.path.dirname(os.path.abspath(FOLIOFS)), 'tools', 'foliofsctl'))

TEST_USER = 'foliofs-test'

# A line of daemon output containing any of these fails umount().
BAD_OUTPUT = ('error', 'ERROR', 'warning', 'AddressSanitizer',
              'runtime error', 'ThreadSanitizer')


# --------------------------------------------------------------------------
# users and credentials

def _drop_to(user, caps=()):
    """Switch the calling process to USER's uid, gid and supplementary groups,
    keeping the capabilities CAPS (bit numbers, e.g. CAP_FSETID) and no
    others.

    Context: child process after fork (preexec_fn or run_as); must be root,
    or already be USER without CAPS (then this is a no-op)."""
    pw = pwd.getpwnam(user)
    if (os.getuid() == pw.pw_uid and os.getgid() == pw.pw_gid and os.geteuid() != 0
            and not caps):
        return
    os.initgroups(pw.pw_name, pw.pw_gid)
    os.setgid(pw.pw_gid)
    if caps:
        _check(_libc.prctl(_PR_SET_KEEPCAPS, 1, 0, 0, 0))
    os.setuid(pw.pw_uid)
    if caps:
        _keep_caps(caps)


def _preexec(user, nofile=None):
    """What a child runs before exec: RLIMIT_NOFILE set to NOFILE (soft,
    hard) first, while it may still raise the hard limit, then USER's
    credentials."""
    if user is None and nofile is None:
        return None

    def fn():
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, nofile)
        if user is not None:
            _drop_to(user)
    return fn


def test_user():
    """Name of an unprivileged user for tests.

    As root: creates TEST_USER if missing and makes /dev/fuse 0666 so that the
    user can mount too.  Not root: the calling user (run_as then runs the
    callable without changing credentials)."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.getuid()).pw_name
    try:
        pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(['useradd', '-M', '-s', '/usr/sbin/nologin', TEST_USER],
                       check=True, stdout=subprocess.DEVNULL)
    if os.path.exists('/dev/fuse'):
        os.chmod('/dev/fuse', 0o666)
    return TEST_USER


# Pytest would otherwise collect test_user() as a test of its own in every
# module that does "from util import *" or "from util import test_user".
test_user.__test__ = False


def ensure_group(name, member=None):
    """Create group NAME if missing (root only), add MEMBER to it as a
    supplementary group; returns the gid."""
    try:
        gr = grp.getgrnam(name)
    except KeyError:
        subprocess.run(['groupadd', name], check=True, stdout=subprocess.DEVNULL)
        gr = grp.getgrnam(name)
    if member is not None and member not in gr.gr_mem:
        subprocess.run(['usermod', '-a', '-G', name, member], check=True,
                       stdout=subprocess.DEVNULL)
    return gr.gr_gid


def run_as(user, fn, *args, caps=(), **kwargs):
    """Run fn(*args, **kwargs) in a forked child with USER's credentials
    (and the capabilities CAPS, see _drop_to()).

    Returns fn's (picklable) result.  An exception raised by fn is re-raised
    here; OSError keeps its class and errno (so ``pytest.raises(
    PermissionError)`` and ``e.errno == errno.EACCES`` both work)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        status = 0
        try:
            os.close(rfd)
            try:
                if user is not None:
                    _drop_to(user, caps)
                res = ('ok', fn(*args, **kwargs))
            except BaseException as e:  # noqa: BLE001 - forwarded to parent
                if isinstance(e, OSError):
                    res = ('err', OSError(e.errno, e.strerror, e.filename))
                else:
                    res = ('err', e)
            try:
                data = pickle.dumps(res)
            except Exception as e:  # unpicklable result or exception
                data = pickle.dumps(('err', RuntimeError(
                    'run_as: cannot pickle %r: %s' % (res, e))))
            with os.fdopen(wfd, 'wb') as f:
                f.write(data)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(wfd)
    with os.fdopen(rfd, 'rb') as f:
        data = f.read()
    _, st = os.waitpid(pid, 0)
    if not data:
        raise RuntimeError('run_as child died (wait status %#x)' % st)
    kind, val = pickle.loads(data)
    if kind == 'err':
        raise val
    return val


# --------------------------------------------------------------------------
# mounts

def _unescape_mountinfo(s):
    # mountinfo escapes space, tab, newline and backslash as \ooo
    out, i = [], 0
    while i < len(s):
        if s[i] == '\\' and i + 3 < len(s) and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return ''.join(out)


def mountinfo(mnt):
    """The last /proc/self/mountinfo entry for MNT as a dict (mountpoint,
    dev "major:minor", fstype, source, options, super_options), or None if
    nothing is mounted there.  Reads no file of the mount itself, so it is
    safe to call on a hung FUSE mount."""
    target = os.path.realpath(mnt)
    found = None
    with open('/proc/self/mountinfo') as f:
        for line in f:
            pre, _, post = line.rstrip('\n').partition(' - ')
            fields = pre.split(' ')
            if _unescape_mountinfo(fields[4]) != target:
                continue
            pf = post.split(' ')
            found = {'mountpoint': target, 'options': fields[5],
                     'dev': fields[2],
                     'fstype': pf[0], 'source': _unescape_mountinfo(pf[1]),
                     'super_options': pf[2] if len(pf) > 2 else ''}
    return found


def is_fuse_mounted(mnt):
    mi = mountinfo(mnt)
    return mi is not None and mi['fstype'].startswith('fuse')


# What a daemon logs when backing writes or syncs fail and when they work
# again: expected where a test injects faults (Mount(expect_errors=True)),
# suspicious anywhere else.
WRITEBACK_ERROR_LINES = (
    re.compile(r'error: (writing back|syncing) .*: .* \(kept dirty, retried in the background\)$'),
    re.compile(r'writing back .* works again$'),
)


def check_output(text, what='daemon', allowed=()):
    """Fail if TEXT has a line with any of BAD_OUTPUT, other than lines
    matching a regex of ALLOWED."""
    bad = [l for l in text.splitlines() if any(w in l for w in BAD_OUTPUT)
           and not any(r.search(l) for r in allowed)]
    if bad:
        pytest.fail('suspicious %s output:\n%s\n--- full output ---\n%s'
                    % (what, '\n'.join(bad), text))


# True while the running test is marked @pytest.mark.drops_caches (conftest
# sets it, with the lock that keeps the other pytest session's tests out).
may_drop_caches = False


def drop_caches():
    """Make the kernel forget its unused dentries and inodes (echo 2 >
    /proc/sys/vm/drop_caches; root only).  Machine-wide, so only a test
    marked @pytest.mark.drops_caches may: see conftest."""
    assert may_drop_caches, 'drop_caches() in a test not marked @pytest.mark.drops_caches'
    with open('/proc/sys/vm/drop_caches', 'w') as f:
        f.write('2')


def fd_count(pid):
    """Number of open descriptors of process PID (for leak checks)."""
    return len(os.listdir('/proc/%d/fd' % pid))


def sanitized(pid):
    """Whether the daemon runs under ASan or TSan, whose shadow memory and
    quarantine make its RSS say nothing about what it keeps."""
    with open('/proc/%d/maps' % pid) as f:
        if any(n in f.read() for n in ('libasan', 'libtsan')):
            return True
    # clang links the sanitizer runtimes statically.
    with open('/proc/%d/exe' % pid, 'rb') as f:
        exe = f.read()
    return b'__asan_init' in exe or b'__tsan_init' in exe


def rss_kib(pid):
    """Resident memory of process PID in KiB (VmRSS)."""
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    raise AssertionError('no VmRSS for %d' % pid)


class Mount:
    """One foliofs daemon, run in the foreground.

    options: iterable of -o options (joined with ','); user: pwd name to run
    the daemon (and fusermount3 -u) as, None for the current user; nofile:
    the daemon's RLIMIT_NOFILE (soft, hard) at start, None to inherit."""

    def __init__(self, backing, mnt, options=(), user=None, args=(),
                 binary=None, expect_errors=False, nofile=None):
        self.backing = backing
        self.mnt = mnt
        self.options = list(options) + EXTRA_OPTIONS
        self.user = user
        self.args = list(args)
        self.binary = binary or FOLIOFS
        # The test injects backing faults: their log lines are not suspicious.
        self.expect_errors = expect_errors
        self.nofile = nofile
        self.proc = None
        self.pid = None
        self._out = None
        self._unmounted = False
        self.conn = None    # FUSE connection number (minor of st_dev)

    def command(self):
        cmd = [self.binary, '-f']
        if self.options:
            cmd += ['-o', ','.join(self.options)]
        return cmd + self.args + [self.backing, self.mnt]

    def start(self):
        self._out = tempfile.TemporaryFile(prefix='foliofs-out-')
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                     stdout=self._out, stderr=subprocess.STDOUT,
                                     preexec_fn=_preexec(self.user, self.nofile))
        self.pid = self.proc.pid
        return self

    def output(self):
        """Everything the daemon printed so far (stdout and stderr)."""
        if self._out is None:
            return ''
        self._out.flush()
        self._out.seek(0)
        return self._out.read().decode(errors='replace')

    def wait_for_mount(self, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            mi = mountinfo(self.mnt)
            if mi is not None and mi['fstype'].startswith('fuse'):
                self.conn = int(mi['dev'].split(':')[1])
                self._wait_serving()
                return
            rc = self.proc.poll()
            if rc is not None:
                pytest.fail('foliofs exited with status %d before mounting %s:\n%s'
                            % (rc, self.mnt, self.output()))
            if time.monotonic() > deadline:
                self.cleanup()
                pytest.fail('%s not mounted after %ss; daemon output:\n%s'
                            % (self.mnt, timeout, self.output()))
            time.sleep(0.02)

    def _wait_serving(self):
        """The mount appears before the daemon has set up its cache and
        threads (they start after it forks); the first request waits for
        them, so one stat makes what a test measures next the daemon's
        steady state.  A mount the caller may not enter answers at once
        (EACCES) and is left as it is."""
        try:
            os.stat(self.mnt)
        except OSError:
            pass

    def umount(self, timeout=30):
        """fusermount3 -u; assert the daemon exits 0 with clean output."""
        r = subprocess.run([FUSERMOUNT, '-u', self.mnt], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           preexec_fn=_preexec(self.user))
        if r.returncode != 0:
            pytest.fail('fusermount3 -u %s failed (%d): %s\ndaemon output:\n%s'
                        % (self.mnt, r.returncode, r.stdout.decode(errors='replace'),
                           self.output()))
        self._unmounted = True
        self.wait_exit(timeout)

    def wait_exit(self, timeout=30):
        """Wait for the daemon to exit; assert status 0 and clean output."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.cleanup()
            pytest.fail('foliofs did not exit within %ss after unmount:\n%s'
                        % (timeout, self.output()))
        if rc != 0:
            pytest.fail('foliofs exited with status %d:\n%s' % (rc, self.output()))
        check_output(self.output(),
                     allowed=WRITEBACK_ERROR_LINES if self.expect_errors else ())

    def abort(self):
        """Abort the FUSE connection (unblocks every process waiting on the
        mount with ENOTCONN); for watchdogs.  Root only.  Never raises."""
        if self.conn is None:
            return
        ctl = '/sys/fs/fuse/connections'
        try:
            if not os.path.exists(os.path.join(ctl, str(self.conn))):
                subprocess.run(['mount', '-t', 'fusectl', 'fusectl', ctl],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=10)
            with open(os.path.join(ctl, str(self.conn), 'abort'), 'w') as f:
                f.write('1')
        except Exception:
            pass

    def cleanup(self):
        """Lazy-unmount and kill if needed.  Never raises."""
        try:
            if self.mnt and is_fuse_mounted(self.mnt):
                subprocess.run([FUSERMOUNT, '-u', '-z', self.mnt],
                               stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=30)
        except Exception:
            pass
        try:
            if self.proc is not None and self.proc.poll() is None:
                try:
                    self.proc.wait(2)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)
        except Exception:
            pass

    def __enter__(self):
        self.start()
        try:
            self.wait_for_mount()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None and not self._unmounted:
                self.umount()
        finally:
            self.cleanup()
        return False


def skip_reason():
    """Why mount tests cannot run here, or None."""
    if not os.path.exists('/dev/fuse'):
        return '/dev/fuse missing'
    if not os.path.exists(FUSERMOUNT):
        return 'fusermount3 missing'
    return None


@contextlib.contextmanager
def loop_device(img):
    """A loop device over the file IMG, detached afterwards; skips the test
    where there is none (not root, no losetup, no free loop device)."""
    if os.geteuid() != 0 or not shutil.which('losetup'):
        pytest.skip('loop devices need root and losetup')
    r = subprocess.run(['losetup', '-f', '--show', img], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        pytest.skip('no loop device here: ' + r.stderr.decode().strip())
    dev = r.stdout.decode().strip()
    try:
        yield dev
    finally:
        subprocess.run(['losetup', '-d', dev])


# --------------------------------------------------------------------------
# comparing the mount with a plain directory

def outcome(fn, *args, **kwargs):
    """('ok', fn(...)) or ('err', 'ENOENT')-style, for comparing results."""
    try:
        return ('ok', fn(*args, **kwargs))
    except OSError as e:
        return ('err', errno.errorcode.get(e.errno, e.errno))


def outcome_as(user, fn, *args, **kwargs):
    """outcome() of fn run by USER (None: in this process)."""
    if user is None:
        return outcome(fn, *args, **kwargs)
    return outcome(run_as, user, fn, *args, **kwargs)


def same(fn, mnt_dir, ref_dir, user=None):
    """Run fn(mnt_dir) and fn(ref_dir) (as USER if given); assert that both
    give the same result or the same errno; return that outcome.  fn must
    return something that does not depend on which directory it ran in."""
    m = outcome_as(user, fn, mnt_dir)
    r = outcome_as(user, fn, ref_dir)
    assert m == r, 'foliofs and the plain directory differ:\n' + describe_diff(m, r)
    return m


def _short(v, limit=300):
    s = repr(v)
    return s if len(s) <= limit else s[:limit] + '... (%d chars)' % len(s)


def describe_diff(m, r):
    """Readable difference of two outcomes: the first differing items."""
    lines = []
    if (m[0] == r[0] == 'ok' and isinstance(m[1], (list, tuple))
            and isinstance(r[1], (list, tuple))):
        if len(m[1]) != len(r[1]):
            lines.append('  length %d vs %d' % (len(m[1]), len(r[1])))
        for i, (a, b) in enumerate(zip(m[1], r[1])):
            if a != b:
                lines.append('  [%d] foliofs: %s\n  [%d] plain:   %s'
                             % (i, _short(a), i, _short(b)))
                if len(lines) >= 6:
                    break
    elif m[0] == r[0] == 'ok' and isinstance(m[1], bytes) and isinstance(r[1], bytes):
        i = next((k for k, (a, b) in enumerate(zip(m[1], r[1])) if a != b),
                 min(len(m[1]), len(r[1])))
        lines.append('  bytes differ first at offset %d (lengths %d vs %d): %s vs %s'
                     % (i, len(m[1]), len(r[1]), _short(m[1][i:i + 16]),
                        _short(r[1][i:i + 16])))
    if not lines:
        lines.append('  foliofs: %s\n  plain:   %s' % (_short(m, 600), _short(r, 600)))
    return '\n'.join(lines)


STAT_FIELDS = ('st_mode', 'st_nlink', 'st_uid', 'st_gid', 'st_size', 'st_rdev')
TIME_FIELDS = ('st_atime_ns', 'st_mtime_ns')


def stat_dict(st, times=False):
    fields = STAT_FIELDS + (TIME_FIELDS if times else ())
    return {f: getattr(st, f) for f in fields}


def sync_path(mnt_path):
    """fsync a regular file through the mount, so that the backing file holds
    what the cache holds (foliofs writes back lazily, like a page cache)."""
    import stat as _stat
    try:
        if not _stat.S_ISREG(os.lstat(mnt_path).st_mode):
            return
        fd = os.open(mnt_path, os.O_RDONLY)
    except (PermissionError, FileNotFoundError):
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_backing(work, *parts):
    """The backing file's bytes after syncing it through the mount."""
    sync_path(work.m(*parts))
    return read_file(work.b(*parts))


def assert_stat_same(mnt_path, back_path, times=False, follow=False):
    """lstat (or stat) of MNT_PATH and BACK_PATH agree field by field, once
    the file has been synced through the mount.  ctime is compared only as
    "not after the backing's": writeback changes the backing file's ctime,
    and the kernel may show the earlier one until its attributes expire."""
    sync_path(mnt_path)
    if times:
        m_ctime = os.stat(mnt_path, follow_symlinks=follow).st_ctime_ns
        b_ctime = os.stat(back_path, follow_symlinks=follow).st_ctime_ns
        assert m_ctime <= b_ctime, 'ctime through foliofs %d > backing %d' % (m_ctime, b_ctime)
    m = stat_dict(os.stat(mnt_path, follow_symlinks=follow), times)
    b = stat_dict(os.stat(back_path, follow_symlinks=follow), times)
    assert m == b, 'through foliofs %r != backing %r' % (m, b)


def read_file(path, mode='rb'):
    with open(path, mode) as f:
        return f.read()


def write_file(path, data, mode='wb'):
    with open(path, mode) as f:
        f.write(data)


# --------------------------------------------------------------------------
# system calls Python does not wrap

_libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10


def _check(res, *paths):
    if res < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), *paths[:1])
    return res


_libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                            ctypes.c_char_p, ctypes.c_uint]


def renameat2(old, new, flags):
    _check(_libc.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD,
                           os.fsencode(new), flags), old)


class _Timespec(ctypes.Structure):
    _fields_ = [('tv_sec', ctypes.c_long), ('tv_nsec', ctypes.c_long)]


_libc.utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p,
                            ctypes.POINTER(_Timespec), ctypes.c_int]


def utimensat(path, atime, mtime, follow=True):
    """atime/mtime: (sec, nsec), UTIME_NOW or UTIME_OMIT."""
    ts = (_Timespec * 2)()
    for i, t in enumerate((atime, mtime)):
        if t in (UTIME_NOW, UTIME_OMIT):
            ts[i].tv_sec, ts[i].tv_nsec = 0, t
        else:
            ts[i].tv_sec, ts[i].tv_nsec = t
    _check(_libc.utimensat(AT_FDCWD, os.fsencode(path), ts,
                           0 if follow else AT_SYMLINK_NOFOLLOW), path)


_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                            ctypes.c_int64]


def fallocate(fd, mode, offset, length):
    _check(_libc.fallocate(fd, mode, offset, length))


# statx(2): a stat that asks the kernel for some fields only, as `stat -c
# %a` and ls do; the FUSE client then answers from what it has cached
# unless it knows those fields to be stale.
STATX_MODE = 0x2
STATX_SIZE = 0x200
STATX_BASIC_STATS = 0x7ff
AT_STATX_FORCE_SYNC = 0x2000


class _Statx(ctypes.Structure):
    _fields_ = [('stx_mask', ctypes.c_uint32), ('stx_blksize', ctypes.c_uint32),
                ('stx_attributes', ctypes.c_uint64), ('stx_nlink', ctypes.c_uint32),
                ('stx_uid', ctypes.c_uint32), ('stx_gid', ctypes.c_uint32),
                ('stx_mode', ctypes.c_uint16), ('_pad0', ctypes.c_uint16),
                ('stx_ino', ctypes.c_uint64), ('stx_size', ctypes.c_uint64),
                ('_rest', ctypes.c_uint8 * 200)]


_libc.statx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                        ctypes.c_uint, ctypes.POINTER(_Statx)]


def statx(path, mask, flags=0):
    """(mode, size) of PATH by statx(2) asking for MASK with FLAGS; a
    field not in the returned mask is None."""
    buf = _Statx()
    _check(_libc.statx(AT_FDCWD, os.fsencode(path), flags, mask, ctypes.byref(buf)),
           path)
    return (buf.stx_mode if buf.stx_mask & STATX_MODE else None,
            buf.stx_size if buf.stx_mask & STATX_SIZE else None)


# Capabilities kept by run_as(..., caps=): bit numbers of linux/capability.h.
CAP_FSETID = 4
_PR_SET_KEEPCAPS = 8
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [('version', ctypes.c_uint32), ('pid', ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [('effective', ctypes.c_uint32), ('permitted', ctypes.c_uint32),
                ('inheritable', ctypes.c_uint32)]


def _keep_caps(caps):
    """After setuid() from root with PR_SET_KEEPCAPS: CAPS (bit numbers
    below 32) permitted and effective, nothing else."""
    bits = 0
    for c in caps:
        bits |= 1 << c
    hdr = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    data[0].effective = data[0].permitted = bits
    _check(_libc.capset(ctypes.byref(hdr), data))


class _Dirent(ctypes.Structure):
    _fields_ = [('d_ino', ctypes.c_uint64), ('d_off', ctypes.c_int64),
                ('d_reclen', ctypes.c_ushort), ('d_type', ctypes.c_ubyte),
                ('d_name', ctypes.c_char * 256)]


_libc.opendir.restype = ctypes.c_void_p
_libc.opendir.argtypes = [ctypes.c_char_p]
_libc.readdir.restype = ctypes.POINTER(_Dirent)
_libc.readdir.argtypes = [ctypes.c_void_p]
_libc.telldir.restype = ctypes.c_long
_libc.telldir.argtypes = [ctypes.c_void_p]
_libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
_libc.rewinddir.argtypes = [ctypes.c_void_p]
_libc.closedir.argtypes = [ctypes.c_void_p]


class Dir:
    """opendir/readdir/telldir/seekdir/rewinddir through libc."""

    def __init__(self, path):
        self.d = _libc.opendir(os.fsencode(path))
        if not self.d:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), path)

    def read(self):
        """Next (name, d_type), or None at the end."""
        ctypes.set_errno(0)
        p = _libc.readdir(self.d)
        if not p:
            e = ctypes.get_errno()
            if e:
                raise OSError(e, os.strerror(e))
            return None
        return (os.fsdecode(p.contents.d_name), p.contents.d_type)

    def read_all(self):
        out = []
        while True:
            ent = self.read()
            if ent is None:
                return out
            out.append(ent)

    def tell(self):
        return _libc.telldir(self.d)

    def seek(self, pos):
        _libc.seekdir(self.d, pos)

    def rewind(self):
        _libc.rewinddir(self.d)

    def close(self):
        if self.d:
            _libc.closedir(self.d)
            self.d = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


__all__ = ['REPO', 'FOLIOFS', 'FUSERMOUNT', 'TEST_USER', 'BAD_OUTPUT', 'Mount',
           'test_user', 'ensure_group', 'run_as', 'fd_count', 'rss_kib', 'sanitized', 'mountinfo',
           'is_fuse_mounted', 'check_output', 'skip_reason', 'outcome',
           'outcome_as', 'same', 'describe_diff', 'stat_dict', 'assert_stat_same', 'read_file',
           'write_file', 'renameat2', 'utimensat', 'fallocate', 'Dir',
           'RENAME_NOREPLACE', 'RENAME_EXCHANGE', 'UTIME_NOW', 'UTIME_OMIT',
           'FALLOC_FL_KEEP_SIZE', 'FALLOC_FL_PUNCH_HOLE', 'FALLOC_FL_ZERO_RANGE']


# --------------------------------------------------------------------------
# statistics and polling

# The stats whose value is a name, not a number: the policies in force.
NAMED_STATS = ('dirty_account', 'throttle', 'folio_policy', 'ra_model')


def parse_stats(text):
    """{name: int} of "name value" lines (.foliofs/stats), the policies'
    names (NAMED_STATS) as str; every line must be one, and no name may
    repeat."""
    out = {}
    for line in text.splitlines():
        fields = line.split(' ')
        assert len(fields) == 2 and fields[0] and fields[1], \
            'stats line is not "name value": %r' % line
        assert fields[0] not in out, 'stats name %r twice' % fields[0]
        if fields[0] in NAMED_STATS:
            assert re.fullmatch(r'[a-z0-9_.]+', fields[1]), 'not a name: %r' % line
            out[fields[0]] = fields[1]
        else:
            assert fields[1].isdigit(), 'stats line is not "name int": %r' % line
            out[fields[0]] = int(fields[1])
    return out


def require_tool(what, why_missing):
    """Skip the test for lack of WHAT (a program or package, WHY_MISSING
    says which and how to get it), or fail it under CI (CI=true), where
    contrib/test.sh's install stage must have installed it."""
    msg = '%s is missing: %s' % (what, why_missing)
    if os.environ.get('CI', '').lower() in ('1', 'true', 'yes'):
        pytest.fail(msg + ' (CI=true: contrib/test.sh installs it)')
    pytest.skip(msg)


def ctl_path(mnt, *parts):
    """MNT/.foliofs/PARTS: a path in the control directory."""
    return os.path.join(mnt, '.foliofs', *parts)


def stats(mnt):
    """The mount's statistics, one snapshot."""
    with open(ctl_path(mnt, 'stats')) as f:
        return parse_stats(f.read())


def ctl_write(mnt, *parts, value):
    """Write VALUE and a newline to the control file MNT/.foliofs/PARTS in
    one write through a fresh handle (raises OSError as the write does)."""
    fd = os.open(ctl_path(mnt, *parts), os.O_WRONLY)
    try:
        data = value.encode() + b'\n'
        assert os.write(fd, data) == len(data)
    finally:
        os.close(fd)


def set_fault(mnt, spec):
    """Write SPEC to MNT/.foliofs/fault."""
    ctl_write(mnt, 'fault', value=spec)


def get_fault(mnt):
    with open(ctl_path(mnt, 'fault')) as f:
        return f.read().strip()


def set_tunable(mnt, name, value):
    """Write VALUE to MNT/.foliofs/tunables/NAME."""
    ctl_write(mnt, 'tunables', name, value=value)


def foliofsctl(*args, user=None, timeout=60):
    """Run foliofsctl ARGS (as USER if given; str() of each), no stdin;
    the CompletedProcess, its output as text.  Fails the test when
    foliofsctl is not built."""
    if not os.path.exists(FOLIOFSCTL):
        pytest.fail('%s does not exist: build it or set $FOLIOFSCTL' % FOLIOFSCTL)
    return subprocess.run([FOLIOFSCTL] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, preexec_fn=_preexec(user))


def run_foliofs(*args, **kwargs):
    """Run the daemon with ARGS (for the ones that must not mount: --help,
    bad options), no stdin, 30 s at most; the CompletedProcess, its output
    as bytes.  KWARGS go to subprocess.run."""
    return subprocess.run([FOLIOFS] + list(args), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=30, **kwargs)


@pytest.fixture(autouse=True)
def umask_022():
    """umask 022 for each test, the old one back after it.  Autouse in
    every module that imports it: `from util import umask_022`, for tests
    whose modes are compared with ext4's or with fixed numbers."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def fsync_path(path):
    """fsync PATH through a read-only handle of its own."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def hash_path(path, chunk=4 << 20):
    """blake2b (32 bytes, hex) of the file at PATH, read CHUNK at a time
    without buffering."""
    h = hashlib.blake2b(digest_size=32)
    with open(path, 'rb', buffering=0) as f:
        while True:
            b = f.read(chunk)
            if not b:
                return h.hexdigest()
            h.update(b)


def poll(cond, timeout, step=0.02):
    """Call cond() until it returns a true value or TIMEOUT seconds pass;
    returns the last value.  Bounded polling, not a sleep."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(step)


# --------------------------------------------------------------------------
# the 1 GiB experiment of DESIGN.md: a file written sequentially, then one
# small write into each folio

def experiment_mib(i, base):
    """Content of MiB number I of the sequentially written file: every MiB
    differs (its number in front), so stale or misplaced data shows."""
    return i.to_bytes(8, 'little') * 2 + base[16:]


def experiment_patches(seed, nfolios, folio, size):
    """One (offset, SIZE random bytes) in each FOLIO-sized region, block
    aligned, not crossing the region's end; the same for a given SEED."""
    import random
    rng = random.Random(seed)
    out = []
    for r in range(nfolios):
        inner = rng.randrange(0, (folio - size) // 4096 + 1) * 4096
        out.append((r * folio + inner, rng.randbytes(size)))
    return out


def experiment_hash(base, patches, folio):
    """blake2b of the whole file after PATCHES (one per FOLIO region)."""
    import hashlib
    h = hashlib.blake2b(digest_size=32)
    per = folio // (1 << 20)
    for r, (off, data) in enumerate(patches):
        region = bytearray(b''.join(experiment_mib(r * per + k, base) for k in range(per)))
        inner = off - r * folio
        region[inner:inner + len(data)] = data
        h.update(region)
    return h.hexdigest()
