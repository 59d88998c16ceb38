#!/usr/bin/python3
"""pg-speed.py: PostgreSQL on foliofs beside native and libfuse's
passthrough_hp, side by side, and what each FUSE server does per request.
A benchmark, not a test: it asserts nothing about the numbers.

Targets, in the order given: `native` (a plain directory on the same
disk); `pthp`, `pthp-direct`, `pthp-direct-ring` (passthrough_hp with its
defaults, with direct I/O, with direct I/O over FUSE over io_uring, as
contrib/tools/pgcompare.py runs it); NAME=OPTIONS (a foliofs mount with -o
OPTIONS; `default=` for foliofs's defaults) or NAME=OPTIONS@BINARY (the
same with that foliofs binary: two builds A/B in one run).  Parts, each in
rounds with the targets taking turns, the first rotating, so that drift of
a shared machine hits all alike:

  load      `pgbench -i -s SCALE` and the server's stop after it (the
            shutdown checkpoint), timed, each round on a fresh mount and
            cluster (initdb not timed); the daemon's CPU over that time;
  pgbench   `pgbench -N -M prepared -c CLIENTS -j THREADS -T SECONDS` on one
            mount and cluster per target, loaded once; the server started
            before each run (cold shared buffers, as pgcompare.py does) and
            stopped after it; tps, the daemon's CPU per transaction and
            what foliofs read from its backing files: the kernel forgets
            idle FUSE inodes (under memory pressure, or when foliofs's own
            tests run `echo 2 > /proc/sys/vm/drop_caches` on a shared
            machine), and a forgotten foliofs inode's cache goes with it,
            so a run after that starts cold, which shows there
            (--caches-lock holds the tests' lock through the rounds);
  --cost N  per FUSE target, after reading the cluster through the mount
            and N transactions of warm-up, `pgbench -N -M prepared -t N`
            under contrib/bench/pg-speed.bt (bpftrace on the kernel's FUSE,
            system-call and scheduler tracepoints, the same for every
            server): requests per transaction by opcode, their round trip
            and the server's part of it (receipt to reply, /dev/fuse only),
            medians and p99, its system calls per request by name, its CPU
            per transaction and per request (this part and the next hold the
            tests' caches lock from the reading on);
  --callgrind N  instead of the rest (its own run): every FUSE daemon runs
            under valgrind --tool=callgrind from its mount on, measuring
            only during N transactions (after the same warm-up): user-space
            instructions per request, and per request of each opcode in its
            handler.

Ratios are to native in the same round; the tables give the median of the
per-round ratios and each round's.  On a shared machine prefer the counts
(requests, system calls, instructions) to times, and read times side by
side only.

passthrough_hp: PTHP names its binary, or --libfuse DIR (a libfuse git
directory, a fetched snapshot's for one, or a source tree) and the script
builds it in /tmp/pg-speed-pthp-COMMIT/ (kept for the next run).  Ring
targets need the fuse module's enable_uring: as root the script sets it to
Y for the run and puts the old value back at the end (machine-wide: mounts
others make meanwhile may use the ring too).

As root, daemons, servers and pgbench run as the user foliofs-test (made if
missing), as pgcompare.py does, whose machinery this script uses; the
scratch directory goes at the end unless -k.  Output (-O DIR): report.md,
rounds.csv, the raw bpftrace output of each measured run
(cost-NAME.bt.txt, callgrind-NAME.bt.txt) and callgrind's files.

Environment: FOLIOFS (default <repo>/build-rel/foliofs, else
build/foliofs), PGBIN, PTHP.

Example (contrib/results/speed-2026-12-07):
  contrib/bench/pg-speed.py --libfuse LIBFUSE.git -r 3 --cost 1000 \\
      native default= pthp-direct pthp
"""

import argparse
import contextlib
import csv
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BT_SCRIPT = os.path.join(HERE, "pg-speed.bt")
HZ = os.sysconf("SC_CLK_TCK")
TIMEOUT_BT = 60


# contrib/tools/pgcompare.py, a plain module: its mounts, clusters,
# servers and pgbench runs.
sys.path.insert(0, os.path.join(REPO, "contrib", "tools"))
import pgcompare as pc  # noqa: E402

log = pc.log
Failure = pc.Failure

# FUSE opcodes (include/uapi/linux/fuse.h) a pgbench run sends.
OPCODES = {1: "LOOKUP", 2: "FORGET", 3: "GETATTR", 4: "SETATTR", 14: "OPEN",
           15: "READ", 16: "WRITE", 17: "STATFS", 18: "RELEASE", 20: "FSYNC",
           22: "GETXATTR", 25: "FLUSH", 27: "OPENDIR", 28: "READDIR",
           29: "RELEASEDIR", 34: "ACCESS", 35: "CREATE", 36: "INTERRUPT",
           42: "BATCH_FORGET", 43: "FALLOCATE", 44: "READDIRPLUS", 46: "LSEEK"}
# Per-request handlers, by server: the function whose inclusive cost is
# that opcode's handling (past libfuse's reading and dispatching).
HANDLERS = {
    "foliofs": {"READ": "ffs_read", "WRITE": "ffs_write", "GETATTR": "ffs_getattr",
                "FSYNC": "ffs_fsync", "FLUSH": "ffs_flush", "LOOKUP": "ffs_lookup",
                "OPEN": "ffs_open", "RELEASE": "ffs_release"},
    "pthp": {"READ": "sfs_read", "WRITE": "sfs_write_buf", "GETATTR": "sfs_getattr",
             "FSYNC": "sfs_fsync", "FLUSH": "sfs_flush", "LOOKUP": "sfs_lookup",
             "OPEN": "sfs_open", "RELEASE": "sfs_release"},
}
# The opcodes shown in the tables, in this order, when a run sent them.
SHOWN = ("READ", "WRITE", "FSYNC", "GETATTR", "FLUSH", "LOOKUP", "OPEN", "RELEASE")


def syscall_names():
    """System call number -> name, from the kernel headers."""
    names = {}
    for path in ("/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
                 "/usr/include/asm/unistd_64.h"):
        try:
            with open(path) as f:
                for line in f:
                    m = re.match(r"#define __NR_(\w+) (\d+)", line)
                    if m:
                        names[int(m.group(2))] = m.group(1)
        except OSError:
            continue
        if names:
            break
    return names


# ---------------------------------------------------------------- targets

def parse_target(spec):
    """native | pthp | pthp-direct | pthp-direct-ring | NAME=OPTIONS."""
    if spec == "native":
        return pc.Config("native", None)
    if spec in pc.PEERS:
        return pc.Config(spec, None, pc.PEERS[spec])
    name, eq, body = spec.partition("=")
    if not eq or not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$", name):
        raise Failure("target '%s': give native, %s or NAME=OPTIONS[@BINARY] (a name of"
                      " letters, digits and _.+-)" % (spec, ", ".join(pc.PEERS)))
    body, at, binary = body.partition("@")
    c = pc.Config(name, pc.parse_opts(body))
    c.binary = None
    if at:
        c.binary = os.path.realpath(binary)
        if not os.access(c.binary, os.X_OK):
            raise Failure("target '%s': %s is not an executable" % (spec, binary))
    return c


def is_ring(c):
    if c.peer is not None:
        return "io_uring" in c.peer
    return c.opts is not None and c.opts.get("uring") == "on"


def server_kind(c):
    return "pthp" if c.peer is not None else "foliofs"


def build_pthp(src):
    """passthrough_hp built from libfuse at SRC (a git directory or a
    source tree) under /tmp; returns the binary."""
    if os.path.isfile(os.path.join(src, "HEAD")) or os.path.isdir(os.path.join(src, ".git")):
        gitdir = src if os.path.isfile(os.path.join(src, "HEAD")) else os.path.join(src, ".git")
        rev = subprocess.run(["git", "--git-dir", gitdir, "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        top = "/tmp/pg-speed-pthp-%s" % rev
        tree = os.path.join(top, "src")
        if not os.path.isdir(tree):
            os.makedirs(tree)
            archive = subprocess.Popen(["git", "--git-dir", gitdir, "archive", "HEAD"],
                                       stdout=subprocess.PIPE)
            subprocess.run(["tar", "-x", "-C", tree], stdin=archive.stdout, check=True)
            if archive.wait() != 0:
                shutil.rmtree(top, ignore_errors=True)
                raise Failure("git archive of %s failed" % gitdir)
    else:
        top, tree = "/tmp/pg-speed-pthp-tree", src
    build = os.path.join(top, "build")
    binary = os.path.join(build, "example", "passthrough_hp")
    if not os.access(binary, os.X_OK):
        log("building passthrough_hp from %s in %s" % (src, build))
        for cmd in (["meson", "setup", "--buildtype=release", "-Dexamples=true",
                     "-Dtests=false", "-Dutils=false", build, tree],
                    ["ninja", "-C", build, "-j2", "example/passthrough_hp"]):
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise Failure("%s failed:\n%s" % (" ".join(cmd), (r.stdout + r.stderr)[-3000:]))
    os.chmod(top, 0o755)
    return binary


# ------------------------------------------------------------- processes

def cpu_ticks(pid):
    """User + system CPU ticks of process PID, all its threads."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def fuse_fd(pid):
    """The daemon's /dev/fuse descriptor (the lowest, as libfuse reads
    from the session's)."""
    fds = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "/dev/fuse":
                fds.append(int(fd))
        except OSError:
            pass
    if not fds:
        raise Failure("process %d holds no /dev/fuse descriptor" % pid)
    return min(fds)


def mount_dev(mnt):
    """The device number of the mount at MNT (the FUSE connection), from
    mountinfo: root may not stat a FUSE mount made without allow_other."""
    target = os.path.realpath(mnt)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split(" ")
            if fields[4] == target:
                major, minor = fields[2].split(":")
                dev = os.makedev(int(major), int(minor))
    return dev


# The lock foliofs's own test sessions take on this machine (tests/conftest.py):
# shared by every test, exclusive by one that drops the kernel's caches
# (`echo 2 > /proc/sys/vm/drop_caches`), which makes the kernel forget every
# idle inode, and a forgotten foliofs inode's cache goes with it.
CACHES_LOCK = os.path.join(tempfile.gettempdir(), "foliofs-tests-caches.lock")


class CachesLock:
    """Hold CACHES_LOCK shared while measuring: no test drops the caches
    meanwhile (those that would wait for us)."""

    def __init__(self):
        self.fd = None

    def __enter__(self):
        import fcntl
        try:
            self.fd = os.open(CACHES_LOCK, os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError as e:
            log("%s: %s: measuring without it" % (CACHES_LOCK, e.strerror))
            return self
        fcntl.flock(self.fd, fcntl.LOCK_SH)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


class Uring:
    """The fuse module's enable_uring, set to Y while ring targets run and
    put back afterwards."""

    PARAM = pc.URING_PARAM

    def __init__(self):
        self.old = None

    def enable(self):
        try:
            with open(self.PARAM) as f:
                cur = f.read().strip()
        except OSError:
            raise Failure("ring targets need %s (FUSE over io_uring)" % self.PARAM)
        if cur == "Y":
            return
        try:
            with open(self.PARAM, "w") as f:
                f.write("Y")
        except OSError as e:
            raise Failure("ring targets: cannot set %s to Y: %s" % (self.PARAM, e))
        self.old = cur

    def restore(self):
        if self.old is not None:
            with open(self.PARAM, "w") as f:
                f.write(self.old)
            self.old = None


# ------------------------------------------------------------------ runs

class Speed(pc.Comparison):
    """pgcompare's Comparison, driven part by part."""

    def __init__(self, a, configs, foliofs, pgbin):
        # What pgcompare's Comparison reads of its own arguments.
        ns = argparse.Namespace(output=a.output, workdir=a.workdir, pg_conf=[],
                                scale=a.scale, fillfactor=100, iters=a.rounds,
                                clients=a.clients, threads=a.threads, threads_given=True,
                                duration=a.duration, back_to_back=False,
                                source="none", keep=a.keep, nofile=None, latency=False,
                                count_failed=False, checksums=True, trace=None)
        super().__init__(ns, configs, {}, foliofs, pgbin)
        self.sa = a
        self.rows = []          # every measured run, one dict each
        self.cost = {}          # name -> cost figures
        self.sysnames = syscall_names()

    def order(self, r):
        n = len(self.configs)
        k = (r - 1) % n
        return self.configs[k:] + self.configs[:k]

    def fresh_dirs(self, c):
        """Empty backing (or data) directory for C, nothing mounted."""
        for d in (c.backing, os.path.join(c.top, "pgdata")):
            if d and os.path.isdir(d):
                shutil.rmtree(d)
        if c.backing:
            self.mkdir(c.backing)

    def daemon_pid(self, c):
        return c.daemon.pid if c.daemon is not None else None

    def load_round(self, r):
        for pos, c in enumerate(self.order(r), 1):
            self.fresh_dirs(c)
            if not c.native:
                self.mount(c)
            self.pg_init(c)
            self.pg_start(c)
            pid = self.daemon_pid(c)
            la = loadavg()
            cpu0 = cpu_ticks(pid) if pid else 0
            t0 = time.monotonic()
            self.pgbench(c, ["-i", "-s", str(self.a.scale)], "pgbench -i",
                         "load-%s-%d.log" % (c.name, r))
            self.pg_stop(c)
            secs = time.monotonic() - t0
            cpu = (cpu_ticks(pid) - cpu0) / HZ if pid else None
            self.rows.append({"part": "load", "round": r, "position": pos,
                              "target": c.name, "seconds": secs, "daemon_cpu_s": cpu,
                              "loadavg": la})
            log("load round %d: %s: %.2f s%s" % (r, c.name, secs,
                "" if cpu is None else ", daemon CPU %.2f s" % cpu))
            if not c.native:
                self.umount(c)

    def prepare_pgbench(self):
        for c in self.configs:
            self.fresh_dirs(c)
            if not c.native:
                self.mount(c)
            self.pg_init(c)
            self.pg_start(c)
            log("%s: pgbench -i -s %d (not timed)" % (c.name, self.a.scale))
            self.pgbench(c, ["-i", "-s", str(self.a.scale)], "pgbench -i",
                         "load-%s-pgbench.log" % c.name)
            self.pg_stop(c)

    def ring_served(self, c, before, after):
        if c.peer is not None:
            return is_ring(c)
        return after.get("fuse_uring_requests", 0) > before.get("fuse_uring_requests", 0)

    def pgbench_round(self, r):
        for pos, c in enumerate(self.order(r), 1):
            self.check_daemon(c)
            self.pg_start(c)
            pid = self.daemon_pid(c)
            before = self.snapshot(c)
            la = loadavg()
            cpu0 = cpu_ticks(pid) if pid else 0
            out = self.pgbench(c, ["-N", "-M", "prepared", "-c", str(self.a.clients),
                                   "-j", str(self.a.threads), "-T", str(self.a.duration)],
                               "pgbench -N", "pgbench-%s-%d.log" % (c.name, r))
            cpu = (cpu_ticks(pid) - cpu0) / HZ if pid else None
            after = self.snapshot(c)
            self.pg_stop(c)
            row = {"part": "pgbench", "round": r, "position": pos, "target": c.name,
                   "loadavg": la, "daemon_cpu_s": cpu,
                   "transport": "" if c.native else
                   "io_uring" if self.ring_served(c, before, after) else "/dev/fuse"}
            row.update(pc.parse_pgbench(out, c.name))
            # What the run read from the backing files: a cache that the
            # kernel's forgetting of idle inodes emptied (see report) shows here.
            row["backing_read_mb"] = ((after.get("backing_read_bytes", 0) -
                                       before.get("backing_read_bytes", 0)) / (1 << 20)
                                      if c.foliofs else None)
            row["daemon_us_per_xact"] = (cpu * 1e6 / row["transactions"]
                                         if cpu is not None and row["transactions"] else None)
            self.rows.append(row)
            log("pgbench round %d: %s: %.0f tps%s" % (
                r, c.name, row["tps"], "" if cpu is None else
                ", daemon %.0f us per transaction" % row["daemon_us_per_xact"]))

    # ---------------------------------------------------------- cost

    def bpftrace_start(self, c, path):
        pid = self.daemon_pid(c)
        conn = mount_dev(c.mnt)
        cmd = ["bpftrace", BT_SCRIPT, str(conn), str(pid), str(fuse_fd(pid))]
        out = open(path, "w")
        bt = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                              start_new_session=True)
        deadline = time.monotonic() + TIMEOUT_BT
        while True:
            time.sleep(0.2)
            with open(path) as f:
                # pg-speed.bt's BEGIN: every probe is attached.
                if "\nREADY\n" in "\n" + f.read():
                    break
            if bt.poll() is not None or time.monotonic() > deadline:
                bt.kill()
                bt.wait()
                out.close()
                with open(path) as f:
                    raise Failure("%s: bpftrace did not start:\n%s" % (c.name, f.read()[-2000:]))
        return bt, out

    @staticmethod
    def bpftrace_stop(bt, out):
        bt.send_signal(signal.SIGINT)
        try:
            bt.wait(TIMEOUT_BT)
        except subprocess.TimeoutExpired:
            bt.kill()
            bt.wait()
        out.close()

    def xacts(self, c, n, what, logname):
        out = self.pgbench(c, ["-N", "-M", "prepared", "-c", str(self.a.clients),
                               "-j", str(self.a.threads), "-t", str(n)], what, logname)
        return pc.parse_pgbench(out, c.name)

    def warm(self, c):
        """Read every file of C's cluster through the mount: a measurement
        of requests then sees the cache the load left, whatever forgot
        inodes meanwhile (on a shared machine, tests run `echo 2 >
        /proc/sys/vm/drop_caches`, and a forgotten foliofs inode's cache
        goes with it)."""
        self.r.check(["sh", "-c", 'find "$1" -type f -exec cat {} + >/dev/null', "sh",
                      c.pgdata], "%s: reading the cluster" % c.name)

    def cost_run(self, c):
        with CachesLock():
            self.cost_run_locked(c)

    def cost_run_locked(self, c):
        n = self.sa.cost
        self.pg_start(c)
        self.warm(c)
        self.xacts(c, n, "pgbench -N (warm-up)", "cost-warmup-%s.log" % c.name)
        path = os.path.join(self.out, "cost-%s.bt.txt" % c.name)
        before = self.snapshot(c)
        bt, out = self.bpftrace_start(c, path)
        pid = self.daemon_pid(c)
        try:
            cpu0 = cpu_ticks(pid)
            res = self.xacts(c, n, "pgbench -N (cost)", "cost-%s.log" % c.name)
            cpu = (cpu_ticks(pid) - cpu0) / HZ
        finally:
            self.bpftrace_stop(bt, out)
        after = self.snapshot(c)
        self.pg_stop(c)
        fig = parse_bt(path)
        fig.update(xacts=res["transactions"], tps=res["tps"], cpu_s=cpu, ring=is_ring(c),
                   backing_read_mb=(after.get("backing_read_bytes", 0) -
                                    before.get("backing_read_bytes", 0)) / (1 << 20)
                   if c.foliofs else None)
        self.cost[c.name] = fig
        log("cost: %s: %d requests for %d transactions, daemon %.0f us per transaction"
            % (c.name, sum(fig["n"].values()), fig["xacts"], cpu * 1e6 / fig["xacts"]))

    def mount(self, c):
        """pgcompare's mount, with the target's own foliofs binary if it
        names one."""
        binary = getattr(c, "binary", None)
        saved = self.foliofs
        if binary:
            self.foliofs = binary
        try:
            return self.mount_vg(c)
        finally:
            self.foliofs = saved

    def mount_vg(self, c):
        """With --callgrind a FUSE daemon runs under valgrind
        --tool=callgrind from its start (so that its cache holds what the
        load left, as in the other parts), measuring nothing until told to."""
        if not self.sa.callgrind or c.native:
            return super().mount(c)
        vg_out = os.path.join(self.scratch, "callgrind.%s.out" % c.name)
        wrapper = os.path.join(self.scratch, "vg-%s.sh" % c.name)
        real = os.environ["PTHP"] if c.peer is not None else self.foliofs
        with open(wrapper, "w") as f:
            # Valgrind runs with the soft descriptor limit it started
            # with (the daemons raise theirs), and counts each byte of a
            # `rep movsb` as an instruction: glibc's vector copies instead.
            f.write("#!/bin/sh\nulimit -n $(ulimit -Hn)\n"
                    "export GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=%d:"
                    "glibc.cpu.x86_rep_stosb_threshold=%d\n"
                    "exec valgrind --tool=callgrind --instr-atstart=no"
                    " --callgrind-out-file=%s %s \"$@\"\n"
                    % (1 << 30, 1 << 30, vg_out, real))
        os.chmod(wrapper, 0o755)
        if c.peer is not None:
            return self.mount_fd(c, wrapper)
        saved = (self.foliofs, c.opts)
        self.foliofs = wrapper
        # Valgrind 3.19 holds its lock across a blocking io_uring_enter,
        # so a thread waiting on a ring stops every other: no rings.
        c.opts = dict({"backing_io": "psync"}, **c.opts)
        try:
            return super().mount(c)
        finally:
            self.foliofs, c.opts = saved

    def mount_fd(self, c, wrapper):
        """passthrough_hp under valgrind: valgrind 3.19 knows none of the
        new mount API's system calls, which libfuse master mounts with, so
        this script mounts (as root, for the run user, as fusermount3
        would) and hands the daemon the /dev/fuse descriptor as the mount
        point /dev/fd/N, which every libfuse takes as mounted already."""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
        try:
            uid, gid = (self.r.user.pw_uid, self.r.user.pw_gid) if self.r.user else \
                (os.getuid(), os.getgid())
            data = "fd=%d,rootmode=40000,user_id=%d,group_id=%d,default_permissions" % (
                fd, uid, gid)
            if libc.mount(b"passthrough_hp", c.mnt.encode(), b"fuse.passthrough_hp",
                          ctypes.c_ulong(6), data.encode()) != 0:    # MS_NOSUID | MS_NODEV
                raise Failure("%s: mount: %s" % (c.name, os.strerror(ctypes.get_errno())))
            cmd = [wrapper, "--foreground", *c.peer, c.backing, "/dev/fd/%d" % fd]
            log("%s: mounted; serving: %s" % (c.name, " ".join(cmd)))
            c.daemon_log = open(os.path.join(self.logs, "foliofs-%s.log" % c.name), "wb")
            c.daemon = subprocess.Popen(cmd, cwd=self.r.cwd, env=self.r.env,
                                        stdin=subprocess.DEVNULL, stdout=c.daemon_log,
                                        stderr=subprocess.STDOUT, start_new_session=True,
                                        pass_fds=(fd,), preexec_fn=self.r._preexec())
        finally:
            os.close(fd)

    def callgrind_run(self, c):
        """The instructions of N transactions on C's daemon (under
        callgrind since its mount), after a warm-up of N."""
        with CachesLock():
            self.callgrind_run_locked(c)

    def callgrind_run_locked(self, c):
        n = self.sa.callgrind
        pid = self.daemon_pid(c)
        self.pg_start(c)
        self.warm(c)
        self.xacts(c, n, "pgbench -N (callgrind warm-up)", "vg-warmup-%s.log" % c.name)
        path = os.path.join(self.out, "callgrind-%s.bt.txt" % c.name)
        bt, out = self.bpftrace_start(c, path)
        try:
            self.r.check(["callgrind_control", "-i", "on", str(pid)], "callgrind_control -i on")
            self.xacts(c, n, "pgbench -N (callgrind)", "vg-%s.log" % c.name)
            self.r.check(["callgrind_control", "-i", "off", str(pid)], "callgrind_control -i off")
            self.r.check(["callgrind_control", "-d", str(pid)], "callgrind_control -d")
        finally:
            self.bpftrace_stop(bt, out)
        self.pg_stop(c)
        dumps = sorted(p for p in os.listdir(self.scratch)
                       if re.match(r"callgrind\.%s\.out\.\d+$" % re.escape(c.name), p))
        fig = parse_bt(path)
        fig.update(callgrind_annotate([os.path.join(self.scratch, p) for p in dumps],
                                      server_kind(c)))
        fig["xacts"] = self.a.clients * n
        for p in dumps:
            shutil.copy(os.path.join(self.scratch, p), self.out)
        self.cost.setdefault(c.name, {})["callgrind"] = fig
        log("callgrind: %s: %.0f instructions per request" % (
            c.name, fig["total"] / max(1, sum(fig["n"].values()))))


def parse_bt(path):
    """pg-speed.bt's maps: counts by opcode and by system call, and the
    round-trip and service-time buckets by opcode."""
    fig = {"n": {}, "sc": {}, "rt": {}, "svc": {}, "cs": 0}
    with open(path) as f:
        for line in f:
            m = re.match(r"^@cs: (\d+)$", line)
            if m:
                fig["cs"] = int(m.group(1))
                continue
            m = re.match(r"^@(n|sc)\[(\d+)\]: (\d+)$", line)
            if m:
                fig[m.group(1)][int(m.group(2))] = int(m.group(3))
                continue
            m = re.match(r"^@(rt|svc)\[(\d+), (\d+)\]: (\d+)$", line)
            if m:
                h = fig[m.group(1)].setdefault(int(m.group(2)), {})
                h[int(m.group(3))] = int(m.group(4))
    if not fig["n"]:
        raise Failure("%s: bpftrace counted no request" % path)
    return fig


def percentile(hist, q):
    """The Q quantile (0..1) of a bucket histogram {0.1 us: count}, in us."""
    total = sum(hist.values())
    if not total:
        return None
    rank, seen = q * total, 0
    for k in sorted(hist):
        seen += hist[k]
        if seen >= rank:
            return k / 10
    return max(hist) / 10


def callgrind_annotate(files, kind):
    """Total instructions and the inclusive instructions of each handler."""
    fig = {"total": 0, "handlers": {}}
    for path in files:
        r = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise Failure("callgrind_annotate %s: %s" % (path, r.stderr[-2000:]))
        for line in r.stdout.splitlines():
            m = re.match(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?PROGRAM TOTALS", line)
            if m:
                fig["total"] += int(m.group(1).replace(",", ""))
                continue
            m = re.match(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?\S*?:(\w+)", line)
            if not m:
                continue
            ir, fn = int(m.group(1).replace(",", "")), m.group(2)
            for op, h in HANDLERS[kind].items():
                if fn == h:
                    fig["handlers"][op] = max(fig["handlers"].get(op, 0), ir)
    return fig


# ---------------------------------------------------------------- report

def fmt(v, f="%.2f"):
    return "-" if v is None else f % v


def ratio_table(s, part, key, higher_better):
    """Per target: median of the per-round values of KEY, the median of the
    per-round ratios to native, and each round's ratio."""
    rows = [r for r in s.rows if r["part"] == part]
    rounds = sorted({r["round"] for r in rows})
    by = {(r["target"], r["round"]): r for r in rows}
    base = {rd: by[("native", rd)][key] for rd in rounds if ("native", rd) in by}
    out = []
    for c in s.configs:
        vals = [by[(c.name, rd)][key] for rd in rounds if (c.name, rd) in by]
        ratios = [by[(c.name, rd)][key] / base[rd] for rd in rounds
                  if (c.name, rd) in by and base.get(rd)]
        cpu = [by[(c.name, rd)].get("daemon_us_per_xact" if part == "pgbench" else
                                     "daemon_cpu_s") for rd in rounds if (c.name, rd) in by]
        cpu = [x for x in cpu if x is not None]
        reads = [by[(c.name, rd)].get("backing_read_mb") for rd in rounds if (c.name, rd) in by]
        reads = [x for x in reads if x is not None]
        tr = sorted({by[(c.name, rd)].get("transport", "") for rd in rounds
                     if (c.name, rd) in by} - {""})
        out.append([c.name, fmt(statistics.median(vals), "%.0f" if higher_better else "%.2f"),
                    fmt(statistics.median(ratios) if ratios else None),
                    " ".join("%.2f" % x for x in ratios) or "-",
                    fmt(statistics.median(cpu) if cpu else None,
                        "%.0f" if part == "pgbench" else "%.2f"),
                    " and ".join(tr) or "-"]
                   + ([" ".join("%.0f" % x for x in reads) or "-"] if part == "pgbench" else []))
    return out


def cost_tables(s):
    lines = []
    names = [c.name for c in s.configs if c.name in s.cost and "n" in s.cost[c.name]]
    if not names:
        return lines + callgrind_table(s)
    ops = [op for op in SHOWN
           if any(OP_ID[op] in s.cost[n]["n"] for n in names)]
    lines += ["## Per request (--cost %d: `pgbench -N -M prepared -t %d -c %d -j %d`)"
              % (s.sa.cost, s.sa.cost, s.a.clients, s.a.threads), "",
              "Requests per transaction by opcode:", "",
              pc.md_table(["target", "transactions", "all"] + ops, [
                  [n, str(s.cost[n]["xacts"]),
                   "%.2f" % (sum(s.cost[n]["n"].values()) / s.cost[n]["xacts"])]
                  + ["%.2f" % (s.cost[n]["n"].get(OP_ID[op], 0) / s.cost[n]["xacts"])
                     for op in ops] for n in names]), ""]
    rows = []
    for n in names:
        f = s.cost[n]
        nreq = sum(f["n"].values())
        calls = sum(f["sc"].values())
        rows.append([n, "%.0f" % (f["cpu_s"] * 1e6 / f["xacts"]),
                     "%.1f" % (f["cpu_s"] * 1e6 / nreq),
                     "%.2f" % (calls / nreq), "%.2f" % (f["cs"] / nreq), "%.0f" % f["tps"],
                     fmt(f.get("backing_read_mb"), "%.1f")])
    lines += ["The server's CPU, system calls and context switches (all its"
              " threads; the tps of a traced run is not a benchmark figure):", "",
              pc.md_table(["target", "CPU us per transaction", "CPU us per request",
                           "system calls per request", "switches per request",
                           "tps (traced)", "MiB foliofs read from backing"], rows), ""]
    for key, title in (("svc", "The server's part, from taking the request to"
                        " its reply on the same thread (us, median / p99; /dev/fuse only)"),
                       ("rt", "Round trip, from the kernel sending the request"
                        " to the end of its reply (us, median / p99)")):
        lines += [title + ":", "", pc.md_table(["target"] + ops, [
            [n] + ["%s / %s" % (fmt(percentile(s.cost[n][key].get(OP_ID[op], {}), 0.5), "%.1f"),
                                fmt(percentile(s.cost[n][key].get(OP_ID[op], {}), 0.99), "%.1f"))
                   if s.cost[n][key].get(OP_ID[op]) else "-" for op in ops]
            for n in names]), ""]
    # System calls per request, by name: the union of each target's top ones.
    top = []
    for n in names:
        f = s.cost[n]
        for nr, _ in sorted(f["sc"].items(), key=lambda kv: -kv[1])[:8]:
            if nr not in top:
                top.append(nr)
    lines += ["System calls per request, by name (each target's eight most"
              " frequent):", "", pc.md_table(
                  ["target"] + [s.sysnames.get(nr, str(nr)) for nr in top],
                  [[n] + ["%.2f" % (s.cost[n]["sc"].get(nr, 0) / sum(s.cost[n]["n"].values()))
                          for nr in top] for n in names]), ""]
    return lines + callgrind_table(s)


def callgrind_table(s):
    vg = [c.name for c in s.configs if "callgrind" in s.cost.get(c.name, {})]
    if not vg:
        return []
    figs = {n: s.cost[n]["callgrind"] for n in vg}
    ops = [op for op in SHOWN if any(OP_ID[op] in f["n"] for f in figs.values())]
    rows = []
    for n in vg:
        f = figs[n]
        nreq = sum(f["n"].values())
        rows.append([n, "%.2f" % (nreq / f["xacts"]), "%.0f" % (f["total"] / nreq)]
                    + ["%.0f" % (f["handlers"][op] / f["n"][OP_ID[op]])
                       if op in f["handlers"] and f["n"].get(OP_ID[op]) else "-"
                       for op in ops])
    return ["## Instructions per request (callgrind, user space; --callgrind %d:"
            " `pgbench -N -M prepared -t %d -c %d -j %d`)" % (
                s.sa.callgrind, s.sa.callgrind, s.a.clients, s.a.threads), "",
            "All the daemon's threads per request (libfuse's loop, the handlers,"
            " flushers and timers), and each handler (inclusive) per request of"
            " its opcode: the work past libfuse's reading and dispatching, but"
            " the reply's. A foliofs daemon under valgrind writes back with"
            " pwritev (`backing_io=psync`). Each run reads its cluster through"
            " the mount first, so that the cache holds it.", "",
            pc.md_table(["target", "requests per transaction", "all threads"]
                        + ops, rows), ""]


OP_ID = {v: k for k, v in OPCODES.items()}


def write_report(s, settings, path):
    text = ["# pg-speed", "", "%s (pg-speed.py %s)" % (
        time.strftime("%Y-%m-%d %H:%M"), " ".join(map(pc.quote, sys.argv[1:]))), "",
        "## Settings", ""] + ["- " + x for x in settings] + [""]
    if any(r["part"] == "load" for r in s.rows):
        text += ["## `pgbench -i -s %d` and the stop after it" % s.a.scale, "",
                 pc.md_table(["target", "median s", "median ratio to native",
                              "ratio in each round", "daemon CPU s (median)", "transport"],
                             ratio_table(s, "load", "seconds", False)), ""]
    if any(r["part"] == "pgbench" for r in s.rows):
        text += ["## `pgbench -N -M prepared -c %d -j %d -T %d`" % (
            s.a.clients, s.a.threads, s.a.duration), "",
            pc.md_table(["target", "median tps", "median ratio to native",
                         "ratio in each round", "daemon CPU us per transaction (median)",
                         "transport", "MiB foliofs read from backing, each round"],
                        ratio_table(s, "pgbench", "tps", True)), "",
            "Every run's tps, in the order they ran:", "",
            pc.md_table(["round", "order"] + [c.name for c in s.configs], [
                [str(rd), ", ".join(r["target"] for r in sorted(
                    (r for r in s.rows if r["part"] == "pgbench" and r["round"] == rd),
                    key=lambda r: r["position"]))]
                + ["%.0f" % next(r["tps"] for r in s.rows if r["part"] == "pgbench"
                                 and r["round"] == rd and r["target"] == c.name)
                   for c in s.configs]
                for rd in sorted({r["round"] for r in s.rows if r["part"] == "pgbench"})]), ""]
    text += cost_tables(s)
    with open(path, "w") as f:
        f.write("\n".join(text) + "\n")
    return text


def settings_lines(s):
    pg = s.r.run([s.r.prog("postgres"), "--version"], as_user=False)[1].strip()
    rev = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                         capture_output=True, text=True).stdout.strip()
    lines = ["%s; %s" % (pg, ", ".join("%s=%s" % kv for kv in s.pg_conf.items())),
             "pgbench -N rounds %s the tests' caches lock (%s)" % (
                 "holding" if s.sa.caches_lock else "not holding", CACHES_LOCK),
             "foliofs %s (tree at %s)" % (s.foliofs, rev or "?"),
             "machine: %d CPUs, kernel %s, load average at start %.1f" % (
                 os.cpu_count() or 0, os.uname().release, loadavg())]
    for c in s.configs:
        lines.append("%s: %s" % (c.name, "plain directory" if c.native else
                                 "%s %s" % (os.environ["PTHP"], " ".join(c.peer))
                                 if c.peer is not None else
                                 "%s -o %s" % (getattr(c, "binary", None) or "foliofs",
                                               pc.join_opts(c.opts) or "(defaults)")))
    return lines


# ------------------------------------------------------------------ main

def parse_args(argv):
    p = argparse.ArgumentParser(prog="pg-speed.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="TARGET: native, pthp, pthp-direct, pthp-direct-ring,"
                                " or NAME=OPTIONS (foliofs -o OPTIONS; default= for its"
                                " defaults).")
    p.add_argument("targets", nargs="+", metavar="TARGET")
    p.add_argument("-r", "--rounds", type=pc.positive_int, default=3,
                   help="rounds of pgbench -N (default 3)")
    p.add_argument("--load-rounds", type=int, default=None, metavar="N",
                   help="rounds of the load phase (default: --rounds; 0: none)")
    p.add_argument("--no-pgbench", action="store_true", help="no pgbench -N rounds")
    p.add_argument("-s", "--scale", type=pc.positive_int, default=20)
    p.add_argument("-c", "--clients", type=pc.positive_int, default=8)
    p.add_argument("-j", "--threads", type=pc.positive_int, default=None)
    p.add_argument("-T", "--duration", type=pc.positive_int, default=20,
                   help="seconds of each pgbench -N run (default 20)")
    p.add_argument("--cost", type=int, default=0, metavar="N",
                   help="the per-request part, N transactions per FUSE target")
    p.add_argument("--callgrind", type=int, default=0, metavar="N",
                   help="also instructions per request under callgrind, N transactions")
    p.add_argument("--caches-lock", action="store_true",
                   help="hold the lock of foliofs's test sessions (%s) shared through"
                   " the pgbench -N rounds, as the per-request parts always do: no"
                   " test drops the kernel's caches meanwhile (they wait)" % CACHES_LOCK)
    p.add_argument("--libfuse", metavar="DIR",
                   help="build passthrough_hp from this libfuse git directory or tree")
    p.add_argument("-O", "--output", default=None, metavar="DIR")
    p.add_argument("-d", "--workdir", default="/var/tmp", metavar="DIR")
    p.add_argument("-k", "--keep", action="store_true")
    a = p.parse_args(argv)
    if a.load_rounds is None:
        a.load_rounds = a.rounds
    if a.threads is None:
        a.threads = min(a.clients, os.cpu_count() or 1)
    if a.output is None:
        a.output = "/var/tmp/pg-speed-" + time.strftime("%Y%m%d-%H%M%S")
    return a


def main(argv):
    a = parse_args(argv)
    configs = [parse_target(t) for t in a.targets]
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise Failure("a target name is given twice")
    if any(c.peer is not None for c in configs) and not os.environ.get("PTHP"):
        if not a.libfuse:
            raise Failure("passthrough_hp targets: set PTHP or give --libfuse")
        os.environ["PTHP"] = build_pthp(a.libfuse)
    if a.callgrind and (a.load_rounds or not a.no_pgbench or a.cost):
        raise Failure("--callgrind runs alone (with --load-rounds 0 --no-pgbench, no --cost):"
                      " its daemons run under valgrind throughout")
    if any(is_ring(c) for c in configs) and a.callgrind:
        raise Failure("--callgrind: no ring targets (valgrind cannot wait on a ring)")
    if (a.cost or a.callgrind) and not shutil.which("bpftrace"):
        raise Failure("--cost needs bpftrace")
    default = os.path.join(REPO, "build-rel", "foliofs")
    if not os.path.exists(default):
        default = os.path.join(REPO, "build", "foliofs")
    foliofs = os.path.realpath(os.environ.get("FOLIOFS", default))
    pgbin = pc.find_pgbin()
    pc.prepare_output(a.output)
    uring = Uring()

    def on_signal(signum, frame):
        raise pc.Interrupted(signum)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    s, ok = None, False
    try:
        if any(is_ring(c) for c in configs):
            uring.enable()
        s = Speed(a, configs, foliofs, pgbin)
        settings = settings_lines(s)
        for line in settings:
            log(line)
        s.make_dirs()
        for r in range(1, a.load_rounds + 1):
            s.load_round(r)
        if not a.no_pgbench or a.cost or a.callgrind:
            s.prepare_pgbench()
        if not a.no_pgbench:
            with CachesLock() if a.caches_lock else contextlib.nullcontext():
                for r in range(1, a.rounds + 1):
                    s.pgbench_round(r)
        fuse = [c for c in configs if not c.native]
        if a.cost:
            for c in fuse:
                s.cost_run(c)
        if a.callgrind:
            for c in fuse:
                s.callgrind_run(c)
        for c in configs:
            if c.daemon is not None:
                s.umount(c)
        settings.append("load average at the end %.1f" % loadavg())
        with open(os.path.join(s.out, "rounds.csv"), "w", newline="") as f:
            keys = []
            for r in s.rows:
                keys += [k for k in r if k not in keys]
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(s.rows)
        print("\n".join(write_report(s, settings, os.path.join(s.out, "report.md"))))
        ok = True
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if s is not None:
            s.cleanup(ok)
        uring.restore()
    return 0


if __name__ == "__main__":
    pc.run_main(main)
