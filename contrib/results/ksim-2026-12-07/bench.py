#!/usr/bin/python3
"""bench.py: what kio.py's recorder costs a traced process per syscall on
this machine: a program named postgres (a copy of python3) does 200,000
8 KiB preads, a pwrite and an lseek every fourth, untraced and traced
twice each; bpftrace's own CPU besides.  As root, with bpftrace."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'kernel'))
import kio  # noqa: E402

WORK = r'''
import os, time
fd = os.open('rel', os.O_CREAT | os.O_RDWR, 0o600)
os.pwrite(fd, b'x' * (8192 * 64), 0)
t0 = time.perf_counter()
for i in range(200000):
    os.pread(fd, 8192, (i % 64) * 8192)
    if i % 4 == 0:
        os.pwrite(fd, b'y' * 8192, (i % 64) * 8192)
        os.lseek(fd, 0, os.SEEK_END)
print('%.2f us an iteration' % ((time.perf_counter() - t0) / 200000 * 1e6))
'''

top = tempfile.mkdtemp(prefix='kio-bench-', dir='/var/tmp')
try:
    data = os.path.join(top, 'data')
    os.mkdir(data)
    fake = os.path.join(top, 'postgres')
    shutil.copy('/usr/bin/python3', fake)

    def work():
        return subprocess.run([fake, '-c', WORK], cwd=data, check=True, capture_output=True,
                              text=True).stdout.strip()

    print('untraced:', work(), '/', work())
    rec = kio.KernelIoTrace(data, os.path.join(top, 'ev.txt'))
    rec.start()
    with open('/proc/%d/stat' % rec.proc.pid) as f:
        s0 = f.read().split()
    print('traced:', work(), '/', work())
    with open('/proc/%d/stat' % rec.proc.pid) as f:
        s1 = f.read().split()
    rec.stop()
    with open(rec.txt_path) as f:
        lines = sum(1 for _ in f)
    ticks = int(s1[13]) + int(s1[14]) - int(s0[13]) - int(s0[14])
    print('bpftrace: %d lines, %.1f us of CPU a line' % (
        lines, ticks / os.sysconf('SC_CLK_TCK') / lines * 1e6))
finally:
    shutil.rmtree(top, ignore_errors=True)
