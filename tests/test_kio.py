"""contrib/kernel/kio.py: the kernel side's file I/O as a foliofs trace.

The converter is checked on written event lines (no root): file ids that
follow a file through a rename, the id a rename replaced, an open id per
openat(), the position of read()/write() from open, lseek() and O_APPEND,
create and O_TRUNC, the paths bpftrace could not read, fds it never saw
opened, lines out of order as per-CPU buffers leave them, bpftrace's
losses, and the bytes per window.  The recorder is checked as root with
bpftrace: a program named postgres does known I/O in a data directory and
outside it, and the trace must hold exactly that I/O.
"""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import util

sys.path.insert(0, os.path.join(util.REPO, 'contrib', 'kernel'))
sys.path.insert(0, os.path.join(util.REPO, 'contrib', 'lib'))
import kio  # noqa: E402
from foliofs_trace import trace_records  # noqa: E402

DATA = '/srv/pg/data'
ORIGIN = 1_000_000_000


def convert(tmp_path, lines, windows=()):
    txt = tmp_path / 'ev.txt'
    txt.write_text('Attaching 44 probes...\n' + '\n'.join(lines) + '\n')
    out = tmp_path / 'out.trace'
    info = kio.convert(str(txt), str(out), DATA, ORIGIN, str(tmp_path), windows)
    assert not os.path.exists(str(txt) + '.sorted')
    return info, list(trace_records(str(out)))


def t(ms):
    return str(ORIGIN + ms * 1_000_000)


def brief(recs):
    return [(r['op'], r['file'], r['offset'], r['length'], r['open']) for r in recs]


def test_files_opens_positions(tmp_path):
    lines = [
        # A new relation file, written at offsets and at the position.
        'A %s 100 base/5/16384' % t(1), 'O %s 100 7 %d' % (t(1), kio.O_CREAT | 2),
        'W %s 100 7 500 0 8192' % t(2),
        'W %s 100 7 500 -1 100' % t(3),             # write(): at position 0
        'L %s 100 7 8192' % t(4),                   # lseek(SEEK_END)
        'W %s 100 7 500 -1 10' % t(5),              # at 8192, position 8202
        'R %s 100 7 300 -1 5' % t(6),               # read(): at 8202, returns 5
        'R %s 100 7 300 0 8192' % t(7),
        'R %s 100 7 300 8192 0' % t(8),             # end of file: no record
        'W %s 100 7 300 0 -5' % t(9),               # failed: no record
        'S %s 100 7 4000 4 0' % t(10),
        'T %s 100 7 900 4096 0' % t(11),
        'F %s 100 7 900 0 0 65536 0' % t(12),
        'Y %s 100 7 900 0 65536 2 0' % t(13),       # sync_file_range(WRITE)
        'Y %s 100 7 900 0 8192 2 -9' % t(13),       # failed: no record
        'C %s 100 7' % t(14),
        # Another process opens it by its absolute path: same file, new open.
        'A %s 101 %s/base/5/16384' % (t(15), DATA), 'O %s 101 3 %d' % (t(15), kio.O_APPEND | 1),
        'W %s 101 3 200 -1 100' % t(16),            # O_APPEND: at the size, 65536
        'W %s 101 4 200 0 100' % t(17),             # fd 4 never opened: lost
    ]
    info, recs = convert(tmp_path, lines, [(int(t(1)) - ORIGIN, int(t(8)) - ORIGIN)])
    assert brief(recs) == [
        ('create', 1, 0, 0, 1), ('write', 1, 0, 8192, 1), ('write', 1, 0, 100, 1),
        ('write', 1, 8192, 10, 1), ('read', 1, 8202, 5, 1), ('read', 1, 0, 8192, 1),
        ('fdatasync', 1, 0, 0, 1), ('truncate', 1, 4096, 0, 1), ('fallocate', 1, 0, 65536, 1),
        ('sync_range', 1, 0, 65536, 1), ('write', 1, 65536, 100, 2)]
    assert recs[9]['flags'] == 2
    assert [r['pid'] for r in recs] == [100] * 10 + [101]
    assert recs[1]['time_ns'] == 2_000_000 and recs[1]['dur_ns'] == 500
    assert info['records'] == 11 and info['files'] == 1 and info['opens'] == 2
    assert info['failed'] == 2 and info['lost'] == 1 and info['lost_lines'] == [
        'W %s 101 4 200 0 100' % t(17)]
    assert info['sync_file_range'] == 1 and info['sync_file_range_bytes'] == 65536
    assert info['sync_range_records'] == 1
    assert info['first_ns'] == 1_000_000
    # The window [1 ms, 8 ms) holds the three writes before 8 ms.
    assert info['window_bytes'] == [{'write_bytes': 8192 + 100 + 10}]


def test_rename_unlink_truncate(tmp_path):
    lines = [
        'A %s 200 pg_wal/A' % t(1), 'O %s 200 5 %d' % (t(1), kio.O_CREAT | 1),
        'W %s 200 5 10 0 4096' % t(2), 'C %s 200 5' % t(3),
        'A %s 200 pg_wal/B' % t(4), 'O %s 200 5 %d' % (t(4), kio.O_CREAT | 1),
        'W %s 200 5 10 0 4096' % t(5),
        # rename A over B: A keeps its id, B's id is the one replaced; B's
        # fd still writes to B's file.
        'A %s 200 pg_wal/A' % t(6), 'B %s 200 pg_wal/B' % t(6), 'N %s 200 50 0 0' % t(6),
        'W %s 200 5 10 4096 4096' % t(7),
        # A failed rename and an unlink of a directory change nothing.
        'A %s 200 pg_wal/B' % t(8), 'B %s 200 pg_wal/C' % t(8), 'N %s 200 50 0 -2' % t(8),
        'A %s 200 pg_wal/B' % t(9), 'U %s 200 50 %d 0' % (t(9), kio.AT_REMOVEDIR),
        # Opening B (now A's file) with O_TRUNC truncates it; unlinking it
        # names its id.
        'A %s 201 pg_wal/B' % t(10), 'O %s 201 6 %d' % (t(10), kio.O_TRUNC | 1),
        'A %s 201 pg_wal/B' % t(11), 'U %s 201 50 0 0' % t(11),
        # A path outside the data directory is not the trace's.
        'A %s 201 /etc/passwd' % t(12), 'U %s 201 50 0 0' % t(12),
    ]
    info, recs = convert(tmp_path, lines)
    assert brief(recs) == [
        ('create', 1, 0, 0, 1), ('write', 1, 0, 4096, 1), ('create', 2, 0, 0, 2),
        ('write', 2, 0, 4096, 2), ('rename', 1, 2, 0, 0), ('write', 2, 4096, 4096, 2),
        ('truncate', 1, 0, 0, 3), ('unlink', 1, 0, 0, 0)]
    assert info['renames'] == 1 and info['unlinks'] == 1 and info['lost'] == 0


def test_out_of_order_unread_paths_losses(tmp_path):
    # Per-CPU buffers: a syscall's line before its path's, later events
    # before earlier ones.  bpftrace could not read one path (''), and
    # says it lost events.
    lines = [
        'W %s 300 8 10 0 8192' % t(3),
        'O %s 300 8 %d' % (t(2), kio.O_CREAT | 2),
        'Lost 12 events',
        'A %s 300 base/1/1' % t(2),
        'O %s 301 3 0' % t(4), 'A %s 301' % t(4),
        'R %s 301 3 10 -1 3' % t(5),
    ]
    info, recs = convert(tmp_path, lines)
    assert brief(recs) == [('create', 1, 0, 0, 1), ('write', 1, 0, 8192, 1)]
    assert info['lost_events'] == 12 and info['lost'] == 0
    assert info['unnamed_opens'] == 1 and info['unnamed_ops'] == 1


def test_program_refuses_a_path_it_cannot_match():
    assert '"/srv/pg/data/", 13' in kio.program('/srv/pg/data', 1)
    for bad in ('/a"b', '/' + 'x' * kio.STRLEN):
        with pytest.raises(ValueError):
            kio.program(bad, 1)


WORK = r'''
import ctypes
import os
fd = os.open('base1', os.O_CREAT | os.O_RDWR, 0o600)
os.pwrite(fd, b'x' * 8192, 0)
os.write(fd, b'z' * 100)
os.lseek(fd, 0, os.SEEK_END)
os.write(fd, b'w' * 10)
os.pread(fd, 8192, 0)
os.fdatasync(fd)
libc = ctypes.CDLL(None, use_errno=True)
libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
assert libc.sync_file_range(fd, 0, 8192, 2) == 0     # SYNC_FILE_RANGE_WRITE
os.ftruncate(fd, 4096)
os.close(fd)
fd = os.open(os.path.abspath('wal1'), os.O_CREAT | os.O_WRONLY, 0o600)
os.pwritev(fd, [b'a' * 4096, b'b' * 4096], 4096)
os.fsync(fd)
os.close(fd)
os.rename('wal1', 'wal2')
os.unlink('base1')
fd = os.open('/etc/hostname', os.O_RDONLY)
os.read(fd, 10)
os.close(fd)
'''


@pytest.mark.timeout(180)
def test_recorder_sees_what_postgres_did(tmp_path):
    if os.geteuid() != 0 or not shutil.which('bpftrace'):
        pytest.skip('needs root and bpftrace')
    top = tempfile.mkdtemp(prefix='foliofs-kio-', dir='/var/tmp')
    try:
        data = os.path.join(top, 'data')
        os.mkdir(data)
        # The recorder follows processes by name: a python named postgres.
        fake = os.path.join(top, 'postgres')
        shutil.copy('/usr/bin/python3', fake)
        rec = kio.KernelIoTrace(data, os.path.join(top, 'ev.txt'))
        try:
            rec.start()
        except RuntimeError as e:
            pytest.skip(str(e))
        try:
            subprocess.run([fake, '-c', WORK], cwd=data, check=True, timeout=60)
        finally:
            rec.stop()
        info = kio.convert(rec.txt_path, os.path.join(top, 'out.trace'), data, rec.origin_ns,
                           top)
        recs = list(trace_records(os.path.join(top, 'out.trace')))
    finally:
        shutil.rmtree(top, ignore_errors=True)
    # Ids in order of appearance: Python's own start may open a relative
    # path (its import finder lists '.') and take an id before base1.
    fids, oids = {}, {0: 0}
    ops = [(r['op'], fids.setdefault(r['file'], len(fids) + 1), r['offset'], r['length'],
            oids.setdefault(r['open'], len(oids))) for r in recs]
    assert ops == [
        ('create', 1, 0, 0, 1), ('write', 1, 0, 8192, 1), ('write', 1, 0, 100, 1),
        ('write', 1, 8192, 10, 1), ('read', 1, 0, 8192, 1), ('fdatasync', 1, 0, 0, 1),
        ('sync_range', 1, 0, 8192, 1), ('truncate', 1, 4096, 0, 1), ('create', 2, 0, 0, 2), ('write', 2, 4096, 8192, 2),
        ('fsync', 2, 0, 0, 2), ('rename', 2, 0, 0, 0), ('unlink', 1, 0, 0, 0)], (ops, info)
    assert len({r['pid'] for r in recs}) == 1
    assert all(a['time_ns'] <= b['time_ns'] for a, b in zip(recs, recs[1:]))
    assert info['lost'] == 0 and info['lost_events'] == 0, info
