#!/usr/bin/python3
"""bench-unaligned.py: 1 MiB writes from a buffer that is not page aligned,
over data no cache holds, on foliofs builds side by side.  A benchmark, not
a test; needs root (it drops the kernel's caches).

The script lays out one file of SIZE bytes in a backing directory; then,
for ROUNDS rounds, the builds named on the command line (NAME=PATH-TO-foliofs)
taking turns (the first rotating), it mounts that build over the directory
(one file for all builds, so that each writes the same blocks of the disk) (-o cache=direct plus OPTIONS), drops the kernel's caches, overwrites
the whole file with pwrite() of 1 MiB from a buffer 100 bytes past a page
boundary, fsyncs it, and unmounts.  With direct I/O the kernel cuts each
write into two requests, the first ending inside a block; a build that
reads such a block first shows it in backing_read_bytes.

Prints per round MB/s (the writes and the fsync) and backing_read_bytes,
then the median MB/s of each build.

  contrib/bench/bench-unaligned.py [-s SIZE_MIB] [-r ROUNDS] [-o OPTIONS] NAME=FOLIOFS...
"""

import argparse
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "lib"))
from foliofs_tools import FUSERMOUNT, read_stats  # noqa: E402

MIB = 1 << 20
OFFSET = 100            # of the buffer in its page


def one_round(name, binary, top, size, options, buf):
    back, mnt = os.path.join(top, "b"), os.path.join(top, "m")
    subprocess.run([binary, "-o", ",".join(["cache=direct"] + options), back, mnt],
                   check=True)
    try:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        fd = os.open(os.path.join(mnt, "f"), os.O_WRONLY)
        try:
            t0 = time.monotonic()
            for i in range(size // MIB):
                if os.pwrite(fd, buf, i * MIB) != MIB:
                    sys.exit("%s: short write at %d MiB" % (name, i))
            os.fsync(fd)
            dt = time.monotonic() - t0
        finally:
            os.close(fd)
        reads = read_stats(mnt)["backing_read_bytes"]
    finally:
        subprocess.run([FUSERMOUNT, "-u", mnt], check=True)
    return size / dt / 1e6, reads


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-s", "--size", type=int, default=1024, help="file size in MiB (1024)")
    p.add_argument("-r", "--rounds", type=int, default=4, help="rounds (4)")
    p.add_argument("-o", "--options", default="", help="more foliofs -o options")
    p.add_argument("-d", "--workdir", default="/var/tmp", help="disk to test (/var/tmp)")
    p.add_argument("builds", nargs="+", metavar="NAME=FOLIOFS")
    a = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench-unaligned.py drops the kernel's caches: run it as root")
    builds = []
    for spec in a.builds:
        name, eq, path = spec.partition("=")
        if not eq or not name.isidentifier() or not os.access(path, os.X_OK):
            sys.exit("'%s' is not NAME=FOLIOFS with an executable FOLIOFS" % spec)
        builds.append((name, path))
    options = [o for o in a.options.split(",") if o]
    size = a.size * MIB
    top = tempfile.mkdtemp(prefix="bench-unaligned.", dir=a.workdir)
    try:
        block = os.urandom(64 * MIB)
        os.makedirs(os.path.join(top, "b"))
        os.makedirs(os.path.join(top, "m"))
        with open(os.path.join(top, "b", "f"), "wb") as f:
            for off in range(0, size, len(block)):
                f.write(block[:min(len(block), size - off)])
            os.fsync(f.fileno())
        area = mmap.mmap(-1, 2 * MIB)
        area[:] = os.urandom(2 * MIB)
        buf = memoryview(area)[OFFSET:OFFSET + MIB]
        got = {name: [] for name, _ in builds}
        for r in range(a.rounds):
            order = builds[r % len(builds):] + builds[:r % len(builds)]
            for name, binary in order:
                mbs, reads = one_round(name, binary, top, size, options, buf)
                got[name].append(mbs)
                print("round %d %-12s %7.0f MB/s  backing_read_bytes %d"
                      % (r + 1, name, mbs, reads), flush=True)
        for name, _ in builds:
            print("%-12s median %.0f MB/s" % (name, statistics.median(got[name])))
    finally:
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
