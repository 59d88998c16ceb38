#!/usr/bin/python3
"""Per-opcode FUSE requests of pgbench's load and of each pgbench -N
transaction, one server.  As root:

  FOLIOFS=BUILD/foliofs opcount.py NAME foliofs [-o OPTIONS]
  PTHP=LIBFUSE/build/example/passthrough_hp opcount.py NAME pthp --direct-io --nopassthrough

Mounts the server over a fresh backing directory (as foliofs-test, nice 19),
initdb --data-checksums, shared_buffers=128MB, max_wal_size=1GB; counts the
kernel's fuse:fuse_request_send of that connection (bpftrace, with the
kernel stack of every request that is not READ or WRITE) over `pgbench -i
-s SCALE -F 90` + CHECKPOINT ("load") and over `pgbench -N -M prepared -c 8
-j 2 -T SECS` ("run"), and the daemon's fuse_lowlevel_notify_inval_inode /
_entry calls (uprobes on its libfuse, by pid: 1100 / 1110).  Writes
$H2WORK/NAME/{counts.json,bpftrace-load.out,bpftrace-run.out}; SCALE
(10) and SECS (20) from the environment.
"""
import json, os, pwd, re, shutil, signal, subprocess, sys, time

W = os.environ.get("H2WORK", "/var/tmp/h2-work")
PGBIN = "/usr/lib/postgresql/15/bin"
USER = pwd.getpwnam("foliofs-test")
SCALE = int(os.environ.get("SCALE", "10"))
SECS = int(os.environ.get("SECS", "20"))

def drop():
    os.nice(19)
    os.initgroups(USER.pw_name, USER.pw_gid)
    os.setgid(USER.pw_gid)
    os.setuid(USER.pw_uid)

ENV = dict(os.environ, LC_ALL="C", LANG="C", HOME="/tmp", USER=USER.pw_name)

def run(cmd, **kw):
    r = subprocess.run(cmd, preexec_fn=drop, env=ENV, capture_output=True, text=True, **kw)
    if r.returncode:
        raise SystemExit("%s: exit %d\n%s%s" % (cmd, r.returncode, r.stdout, r.stderr))
    return r.stdout

def main():
    name, kind, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    top = os.path.join(W, name)
    shutil.rmtree(top, ignore_errors=True)
    os.makedirs(top)
    back, mnt, sock = (os.path.join(top, d) for d in ("backing", "mnt", "sock"))
    for d in (top, back, mnt, sock):
        os.makedirs(d, exist_ok=True)
        os.chown(d, USER.pw_uid, USER.pw_gid)
    if kind == "foliofs":
        cmd = [os.environ.get("FOLIOFS", "/var/tmp/h2-rel/foliofs"), "-f", *extra, back, mnt]
    else:
        cmd = [os.environ.get("PTHP", "/var/tmp/h2-libfuse/build/example/passthrough_hp"),
               "--foreground", *extra, back, mnt]
    LIB[0] = [l.split()[2] for l in subprocess.run(["ldd", cmd[0]], capture_output=True,
               text=True).stdout.splitlines() if "libfuse3" in l][0]
    dlog = open(os.path.join(top, "daemon.log"), "w")
    daemon = subprocess.Popen(cmd, preexec_fn=drop, env=ENV, stdout=dlog, stderr=subprocess.STDOUT)
    DPID[0] = daemon.pid
    pg = None
    try:
        for _ in range(300):
            r = subprocess.run(["findmnt", "-rno", "MAJ:MIN", mnt], capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip():
                conn = int(r.stdout.split(":")[1])
                break
            if daemon.poll() is not None:
                raise SystemExit("daemon exited")
            time.sleep(0.1)
        else:
            raise SystemExit("not mounted")
        pgdata = os.path.join(mnt, "pgdata")
        run([PGBIN + "/initdb", "-D", pgdata, "--data-checksums", "-A", "trust"])
        run([PGBIN + "/pg_ctl", "-D", pgdata, "-w", "-l", os.path.join(top, "pg.log"), "-o",
             "-c shared_buffers=128MB -c max_wal_size=1GB -c listen_addresses='' -k " + sock,
             "start"])
        pg = pgdata
        load = counted(top, conn, "load", lambda: (
            run([PGBIN + "/pgbench", "-h", sock, "-i", "-s", str(SCALE), "-F", "90", "postgres"]),
            run([PGBIN + "/psql", "-h", sock, "-c", "CHECKPOINT", "postgres"])))
        q = ("SELECT relname, pg_relation_size(oid) / 8192 FROM pg_class WHERE relname IN"
             " ('pgbench_accounts', 'pgbench_history', 'pgbench_accounts_pkey') ORDER BY 1")
        blocks0 = run([PGBIN + "/psql", "-h", sock, "-Atc", q, "postgres"])
        stats0 = read_stats(mnt) if kind == "foliofs" else None
        out = None
        def bench():
            nonlocal out
            out = run([PGBIN + "/pgbench", "-h", sock, "-N", "-M", "prepared", "-c", "8",
                       "-j", "2", "-T", str(SECS), "postgres"])
        ops = counted(top, conn, "run", bench)
        stats1 = read_stats(mnt) if kind == "foliofs" else None
        blocks1 = run([PGBIN + "/psql", "-h", sock, "-Atc", q, "postgres"])
        tx = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
        res = {"name": name, "cmd": cmd, "conn": conn, "tx": tx, "ops": ops, "load": load, "blocks_before": blocks0, "blocks_after": blocks1,
               "pgbench": out}
        if stats0:
            res["stats_delta"] = {k: stats1[k] - stats0.get(k, 0) for k in stats1
                                  if isinstance(stats1[k], int)}
        json.dump(res, open(os.path.join(top, "counts.json"), "w"), indent=1)
        print(name, "tx", tx, {k: round(v / tx, 4) for k, v in sorted(ops.items())})
        print(name, "load", sorted(load.items()))
        print(name, "blocks", blocks0.split(), blocks1.split())
    finally:
        if pg:
            subprocess.run([PGBIN + "/pg_ctl", "-D", pg, "-w", "-m", "fast", "stop"],
                           preexec_fn=drop, env=ENV, capture_output=True)
        for _ in range(60):
            if subprocess.run(["fusermount3", "-u", mnt]).returncode == 0:
                break
            time.sleep(1)
        try:
            daemon.wait(120)
        except subprocess.TimeoutExpired:
            daemon.kill()
        if daemon.returncode:
            print("daemon exit", daemon.returncode, file=sys.stderr)
        if os.environ.get("KEEP") is None:
            shutil.rmtree(back, ignore_errors=True)

LIB = [None]
DPID = [None]
BT = r"""
tracepoint:fuse:fuse_request_send /args->connection == CONN/ {
  @op[args->opcode] = count();
  if (args->opcode != 15 && args->opcode != 16) { @st[args->opcode, comm, kstack(12)] = count(); }
}
uprobe:LIB:fuse_lowlevel_notify_inval_inode /pid == DPID/ { @op[1100] = count(); }
uprobe:LIB:fuse_lowlevel_notify_inval_entry /pid == DPID/ { @op[1110] = count(); }
"""

def counted(top, conn, phase, fn):
    """Run fn() under bpftrace; {opcode: count} (1100: the daemon's
    fuse_lowlevel_notify_inval_inode calls, 1110: inval_entry)."""
    path = os.path.join(top, "bpftrace-%s.out" % phase)
    btout = open(path, "w")
    bt = subprocess.Popen(["nice", "-n", "19", "bpftrace", "-e", BT.replace("CONN", str(conn)).replace("LIB", LIB[0]).replace("DPID", str(DPID[0]))],
                          stdout=btout, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            time.sleep(0.1)
            if "Attaching" in open(path).read():
                break
        else:
            raise SystemExit("bpftrace did not attach:\n" + open(path).read())
        time.sleep(1)
        fn()
    finally:
        bt.send_signal(signal.SIGINT)
        bt.wait(60)
    text = open(path).read()
    return {int(k): int(v) for k, v in re.findall(r"^@op\[(\d+)\]: (\d+)$", text, re.M)}

def read_stats(mnt):
    d = {}
    text = run(["cat", os.path.join(mnt, ".foliofs", "stats")])
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        try:
            d[k] = int(v)
        except ValueError:
            pass
    return d

main()
