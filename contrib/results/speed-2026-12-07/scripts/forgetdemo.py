#!/usr/bin/python3
"""forgetdemo.py warm|drop, on lab.sh's mounts m (foliofs) and p (passthrough_hp).
Stop both servers, optionally drop the kernel's dentries and inodes as a
foliofs test does (holding the tests' lock exclusively for the drop), start
them, and run pgbench -N -T 15 on each; print tps and foliofs's backing reads."""
import fcntl, os, re, subprocess, sys
L = os.environ.get("LAB", "/var/tmp/speed-lab")
def sh(*a):
    return subprocess.run(["./lab.sh", *a], cwd=L, capture_output=True, text=True).stdout
def stats(n):
    out = subprocess.run(["runuser", "-u", "foliofs-test", "--", "cat", "%s/%s/m/.foliofs/stats" % (L, n)],
                         capture_output=True, text=True).stdout
    return {k: int(v) for k, v in (l.split() for l in out.splitlines()) if v.lstrip("-").isdigit()}
drop = sys.argv[1] == "drop"
for n in ("m", "p"):
    sh("stop", n)
if drop:
    fd = os.open("/tmp/foliofs-tests-caches.lock", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2")
    os.close(fd)
for n in ("m", "p"):
    sh("start", n)
    s0 = stats("m")
    out = sh("bench", n, "-N", "-M", "prepared", "-c", "8", "-j", "2", "-T", "15")
    s1 = stats("m")
    tps = re.search(r"tps = ([0-9.]+)", out).group(1)
    extra = " foliofs read %.0f MiB from backing, inodes %d" % (
        (s1["backing_read_bytes"] - s0["backing_read_bytes"]) / 2**20, s1["inodes"]) if n == "m" else ""
    print("%s %s: %s tps%s" % ("drop" if drop else "warm", n, tps, extra), flush=True)
