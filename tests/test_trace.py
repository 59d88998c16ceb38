# SPDX-License-Identifier: GPL-2.0-or-later
"""Recording a trace from a mount (issue 12): -o trace=FILE, .foliofs/trace
and foliofsctl trace.

- two processes run a known sequence of writes, reads, fsync, fdatasync,
  truncate, fallocate, create, unlink and rename; foliofs-sim dump of the
  trace shows exactly those, in order per pid, with their offsets, lengths,
  file ids (the backing inode numbers) and open ids (one per open, none
  for a rename or unlink), and the file is in time order;
- start and stop at run time with foliofsctl record only what ran between;
  an unmount while recording leaves a valid trace;
- a recorded trace replays in foliofs-sim;
- bad control writes fail with EINVAL (a second start with EBUSY) and
  change nothing; a trace= file that cannot be created is a usage error.
"""
import errno
import os
import subprocess
import sys

import pytest

from util import FOLIOFS, FOLIOFSCTL, Mount, foliofsctl

BIN = os.path.dirname(os.path.abspath(FOLIOFS))
FOLIOSIM = os.environ.get('FOLIOSIM', os.path.join(BIN, 'sim', 'foliofs-sim'))

pytestmark = pytest.mark.skipif(not os.path.exists(FOLIOSIM),
                                reason='%s not built' % FOLIOSIM)

# One writer's operations on its own files f<N> and g<N> (N: its number).
WRITER = r'''
import os, sys
mnt, n = sys.argv[1], sys.argv[2]
f, g = os.path.join(mnt, 'f' + n), os.path.join(mnt, 'g' + n)
fd = os.open(f, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
os.pwrite(fd, b'a' * 8192, 4096)
os.pwrite(fd, b'b' * 100, 0)
assert len(os.pread(fd, 4096, 0)) == 4096
os.fsync(fd)
os.fdatasync(fd)
os.ftruncate(fd, 5000)
os.posix_fallocate(fd, 0, 65536)
print(os.fstat(fd).st_ino)
os.close(fd)
os.close(os.open(g, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
print(os.stat(g).st_ino)
os.rename(f, g)
os.unlink(g)
'''


def fid(ino):
    """The trace's file id of a backing inode (ffs_trace_file_id)."""
    return (ino ^ (ino >> 32)) & 0xffffffff


def dump(path):
    p = subprocess.run([FOLIOSIM, 'dump', path], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    recs = []
    for line in p.stdout.splitlines():
        if line.startswith('#'):
            continue
        t, dur, pid, file, op, off, length, flags, open_id = line.split()
        recs.append(dict(time=int(t), dur=int(dur), pid=int(pid), file=int(file), op=op,
                         off=int(off), len=int(length), flags=int(flags),
                         open=int(open_id)))
    return recs


def trace_ctl(mnt, *args, check=True):
    """foliofsctl trace MNT ARGS; with CHECK, it must succeed."""
    p = foliofsctl('trace', mnt, *args)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def expected(ino_f, ino_g):
    f, g = fid(ino_f), fid(ino_g)
    return [('create', f, 0, 0, 0), ('write', f, 4096, 8192, 0), ('write', f, 0, 100, 0),
            ('read', f, 0, 4096, 0), ('fsync', f, 0, 0, 0), ('fdatasync', f, 0, 0, 0),
            ('truncate', f, 5000, 0, 0), ('fallocate', f, 0, 65536, 0),
            ('create', g, 0, 0, 0), ('rename', f, g, 0, 0), ('unlink', f, 0, 0, 0)]


@pytest.fixture
def dirs(tmp_path):
    os.chmod(tmp_path, 0o755)
    (tmp_path / 'b').mkdir()
    (tmp_path / 'm').mkdir()
    return str(tmp_path / 'b'), str(tmp_path / 'm'), str(tmp_path)


def run_writers(mnt, count):
    procs = [subprocess.Popen([sys.executable, '-c', WRITER, mnt, str(i)],
                              stdout=subprocess.PIPE, text=True) for i in range(count)]
    out = {}
    for p in procs:
        text, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        out[p.pid] = [int(x) for x in text.split()]
    return out


def test_two_writers_recorded_exactly(dirs):
    back, mnt, root = dirs
    trace = os.path.join(root, 't.trace')
    with Mount(back, mnt, options=['trace=' + trace]):
        inos = run_writers(mnt, 2)
    recs = dump(trace)
    assert [r['time'] for r in recs] == sorted(r['time'] for r in recs)
    assert {r['pid'] for r in recs} == set(inos)
    for pid, (ino_f, ino_g) in inos.items():
        got = [(r['op'], r['file'], r['off'], r['len'], r['flags'])
               for r in recs if r['pid'] == pid]
        assert got == expected(ino_f, ino_g)
    # The open each operation came through: f's one open from its create
    # to its fallocate, g's create its own, none for rename and unlink;
    # no id shared between the processes' opens.
    opens = {}
    for pid in inos:
        ids = [r['open'] for r in recs if r['pid'] == pid]
        assert len(set(ids[:8])) == 1 and ids[0] != 0, ids
        assert ids[8] not in (0, ids[0]) and ids[9:] == [0, 0], ids
        opens[pid] = {ids[0], ids[8]}
    a, b = opens.values()
    assert not a & b, opens


def test_no_operation_begins_before_the_last_ended(dirs):
    """A process's next request can only arrive once the reply to its last
    one is out, so in the trace each of its operations begins at or after
    the end of the one before (the end is stamped before the reply goes;
    stamped after it, under load the next write often began first and
    the simulator saw negative think times).  Throttled writes too, whose
    replies the timer thread sends."""
    back, mnt, root = dirs
    trace = os.path.join(root, 't.trace')
    with Mount(back, mnt, options=['trace=' + trace, 'cache_size=64M', 'dirty_bytes=1M',
                                   'dirty_account=folio', 'folio_size=64K']):
        script = """
import os, sys
fd = os.open(os.path.join(sys.argv[1], 'f%s' % sys.argv[2]), os.O_CREAT | os.O_RDWR, 0o644)
for i in range(1500):
    os.pwrite(fd, b'w' * 8192, (i * 7919 % 1024) * 65536)
    if i % 3 == 0:
        os.pread(fd, 4096, (i * 104729 % 1024) * 65536)
os.close(fd)
"""
        procs = [subprocess.Popen([sys.executable, '-c', script, mnt, str(i)])
                 for i in range(3)]
        for p in procs:
            assert p.wait(timeout=120) == 0
    recs = dump(trace)
    by_pid = {}
    for r in recs:
        by_pid.setdefault(r['pid'], []).append(r)
    for p in procs:
        ops = by_pid[p.pid]
        assert len([r for r in ops if r['op'] == 'write']) == 1500
        early = [(a, b) for a, b in zip(ops, ops[1:]) if b['time'] < a['time'] + a['dur']]
        assert not early, '%d of %d began before the last ended, e.g. %s' % (
            len(early), len(ops), early[:2])


def test_start_stop_at_run_time(dirs):
    back, mnt, root = dirs
    with Mount(back, mnt):
        assert trace_ctl(mnt).stdout == 'off\n'
        with open(os.path.join(mnt, 'before'), 'wb') as f:
            f.write(b'x')
        # A relative FILE is taken from foliofsctl's directory.
        subprocess.run([FOLIOFSCTL, 'trace', mnt, 'start', 'one.trace'], cwd=root,
                       check=True, timeout=60)
        one = os.path.join(root, 'one.trace')
        assert trace_ctl(mnt).stdout == 'recording %s\n' % one
        fd = os.open(os.path.join(mnt, 'during'), os.O_CREAT | os.O_WRONLY, 0o644)
        os.pwrite(fd, b'y' * 3000, 500)
        trace_ctl(mnt, 'stop')
        assert trace_ctl(mnt).stdout == 'off\n'
        os.pwrite(fd, b'z', 0)     # not recorded
        two = os.path.join(root, 'two.trace')
        trace_ctl(mnt, 'start', two)
        os.pwrite(fd, b'w' * 10, 20)
        os.close(fd)
        # unmounted while recording
    ino = os.stat(os.path.join(back, 'during')).st_ino
    assert [(r['op'], r['file'], r['off'], r['len'], r['pid']) for r in dump(one)] == [
        ('create', fid(ino), 0, 0, os.getpid()), ('write', fid(ino), 500, 3000, os.getpid())]
    assert [(r['op'], r['off'], r['len']) for r in dump(two)] == [('write', 20, 10)]


def test_recorded_trace_replays(dirs):
    back, mnt, root = dirs
    trace = os.path.join(root, 'r.trace')
    with Mount(back, mnt, options=['trace=' + trace]):
        run_writers(mnt, 2)
        subprocess.run(['dd', 'if=/dev/zero', 'of=' + os.path.join(mnt, 'big'), 'bs=8k',
                        'count=200', 'conv=fsync', 'status=none'], check=True, timeout=60)
    nr = len(dump(trace))
    p = subprocess.run([FOLIOSIM, trace, '-o', 'cache_size=64M'], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert '# summary: %d ops' % nr in p.stdout


def write_ctl(mnt, text):
    fd = os.open(os.path.join(mnt, '.foliofs', 'trace'), os.O_WRONLY)
    try:
        os.write(fd, text.encode())
        return 0
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)


def test_trace_file_mode_not_the_last_callers_umask(dirs):
    """The daemon's thread takes a caller's umask to create that caller's
    file (POSIX ACLs: the backing applies it); it must not keep it.  With
    one thread (-s), a file created under umask 077 and then a trace
    started through the control file: the trace is made 0644."""
    back, mnt, root = dirs
    trace = os.path.join(root, 't.trace')
    with Mount(back, mnt, args=['-s']):
        old = os.umask(0o077)
        try:
            os.close(os.open(os.path.join(mnt, 'f'), os.O_CREAT | os.O_WRONLY, 0o666))
            os.mkdir(os.path.join(mnt, 'd'), 0o777)
        finally:
            os.umask(old)
        assert os.stat(os.path.join(back, 'f')).st_mode & 0o777 == 0o600
        assert os.stat(os.path.join(back, 'd')).st_mode & 0o777 == 0o700
        trace_ctl(mnt, 'start', trace)
        trace_ctl(mnt, 'stop')
    assert os.stat(trace).st_mode & 0o777 == 0o644


def test_bad_control_writes_change_nothing(dirs):
    back, mnt, root = dirs
    a, b = os.path.join(root, 'a.trace'), os.path.join(root, 'b.trace')
    with Mount(back, mnt, expect_errors=True) as m:
        for bad in ('bogus\n', 'start\n', 'start \n', 'start rel.trace\n', 'stop\n',
                    'start %s\x01\n' % a, 'Start %s\n' % a, 'stop now\n'):
            assert write_ctl(mnt, bad) == errno.EINVAL, bad
            assert trace_ctl(mnt).stdout == 'off\n'
        assert not os.path.exists(a) and not os.path.exists(os.path.join('/', 'rel.trace'))
        assert write_ctl(mnt, 'start %s\n' % a) == 0
        assert write_ctl(mnt, 'start %s\n' % b) == errno.EBUSY
        assert write_ctl(mnt, 'bogus\n') == errno.EINVAL
        assert trace_ctl(mnt).stdout == 'recording %s\n' % a
        assert not os.path.exists(b)
        p = trace_ctl(mnt, 'start', b, check=False)
        assert p.returncode == 2 and 'already recording' in p.stderr
        m.umount()
    assert dump(a) == []


def test_trace_file_that_cannot_be_created(dirs):
    back, mnt, root = dirs
    p = subprocess.run([FOLIOFS, '-f', '-o', 'trace=' + os.path.join(root, 'no', 'x'),
                        back, mnt], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2
    assert p.stderr.startswith('foliofs: trace=') and 'No such file' in p.stderr
