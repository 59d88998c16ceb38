"""Crash loops of PostgreSQL on a foliofs mount (issue 10).

A cluster with data checksums lives on a foliofs mount, run as the
unprivileged test user, over a backing directory that survives everything.
Each cycle runs pgbench (tpcb-like, a few clients) and beside it an inserter
that adds numbered rows to its own table, one committed transaction each,
remembering every row whose COMMIT the server acknowledged.  At a random
moment the daemon and every server process are killed with SIGKILL (in a
random order), the dead mount is lazily unmounted and the same backing
directory mounted again: whatever only the daemon's cache held is gone, as
after a power failure whatever only the page cache held.  PostgreSQL then
runs crash recovery, and the recovered cluster must be whole:

- pg_amcheck --heapallindexed --parent-check on every relation: no
  corruption;
- every acknowledged row present, with the content it was written with;
- pgbench's invariant (the sums of the account, teller and branch balances
  and of the history deltas agree: each transaction adds one delta to all
  four, so a torn transaction shows);
- after a clean stop, pg_checksums --check: no bad block.  In some cycles
  the daemon is killed again right after the clean stop and the checksums
  are read from a fresh mount: a clean shutdown fsynced everything.

The fault loop does the same with backing writes failing with EIO for a
while (the fault switch, set by the mounting user).  PostgreSQL may PANIC
when an fsync or a WAL write fails; that is right.  Once the fault is off
the cycle ends in one of three ways: the daemon and the server are killed
and the backing remounted; only the server is killed (the daemon keeps the
data whose writeback failed, dirty, and writes it later); or the server is
left to restart itself after its PANIC.  Then the same checks.

The seed of the random schedule is printed; FOLIOFS_CRASH_SEED=N replays
it (as far as timing allows).  FOLIOFS_CRASH_CYCLES=N runs N cycles of each
loop (the long form: 50); by default 5 crash cycles and 3 fault cycles.
FOLIOFS_CRASH_OPTIONS=a,b adds -o options to every mount (e.g. kernel_cache).
Each test prints, per cycle, the rows acknowledged and found.

No assertion depends on timing: the waits are the random schedule, and
every step has a generous hang guard.
"""

import os
import random
import subprocess
import sys
import time

import pytest

import util
from pgutil import Cluster, Inserter, pg_bindir_or_skip

LONG = os.environ.get("FOLIOFS_CRASH_CYCLES")
CRASH_CYCLES = int(LONG) if LONG else 3
FAULT_CYCLES = int(LONG) if LONG else 3

SCALE = 2           # pgbench -i -s: 200,000 accounts, about 30 MiB
CLIENTS = 3

# Small shared buffers so that pages are evicted and read back through the
# mount all the time; small max_wal_size for frequent checkpoints.
SERVER_CONF = ("shared_buffers=2MB", "max_wal_size=32MB",
               "checkpoint_timeout=30s", "log_checkpoints=on",
               "restart_after_crash=on")

# Every backing write; only WAL (commits fail: PANIC at once); only data
# files (a checkpoint's fsync fails: PANIC); one write in three.
FAULT_SPECS = ("write:EIO", "write:EIO:file=pg_wal", "write:EIO:file=base/",
               "write:EIO:every=3")

TABLE = "crash_rows"


# Setup ~15 s, a cycle ~10 s; a test of N cycles gets 120 s plus 60 s per
# cycle before it counts as hung.
def _timeout(cycles):
    return 120 + 60 * cycles


def _seed():
    s = os.environ.get("FOLIOFS_CRASH_SEED")
    return int(s) if s else random.SystemRandom().randrange(1 << 32)


class Run:
    """State of one loop: the cluster, the rows acknowledged so far."""

    def __init__(self, cluster, rng):
        self.c = cluster
        self.rng = rng
        self.acked = set()
        self.next_id = 1
        self.cycle = 0
        self.lines = []
        self.log_pos = 0
        self.amchecked = (0, 0)

    def setup(self):
        c = self.c
        c.mount_fs()
        c.initdb()
        c.start()
        # amcheck in every database pg_amcheck --all connects to.
        c.psql("CREATE EXTENSION amcheck")
        c.pg.run("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", *c.conn_args(),
                 "-d", "template1", "-c", "CREATE EXTENSION amcheck",
                 timeout=60)
        c.psql("CREATE TABLE %s (id int PRIMARY KEY, cycle int NOT NULL,"
               " pad text NOT NULL)" % TABLE)
        c.pg.run("pgbench", "-i", "-s", SCALE, "-q", *c.conn_args(),
                 "postgres", timeout=120)

    def start_load(self):
        c = self.c
        self.benchlog = open(c.benchlog, "ab")
        self.bench = c.popen("pgbench", "-n", "-c", CLIENTS, "-j", 1,
                             "-T", 3600, *c.conn_args(), "postgres",
                             stdout=self.benchlog, stderr=self.benchlog)
        self.ins = Inserter(c, TABLE, self.next_id, self.cycle)

    def checkpoint_soon(self):
        """A CHECKPOINT in the background (data files written and
        fsynced); its result does not matter."""
        return self.c.popen("psql", "-X", "-q", *self.c.conn_args(),
                            "-d", "postgres", "-c", "CHECKPOINT")

    def end_load(self, server_up):
        """Stop pgbench and the inserter; collect the acknowledged rows."""
        if server_up:
            self.ins.stop()
        self.bench.kill()
        self.bench.wait(60)
        self.benchlog.close()
        err = self.ins.finish()
        if self.ins.error:
            pytest.fail("inserter: %s\n%s" % (self.ins.error, err))
        self.acked.update(self.ins.acked)
        self.next_id = self.ins.sent + 1
        return len(self.ins.acked)

    def crash(self):
        """SIGKILL the daemon and the server (random order), remount."""
        c = self.c
        if self.rng.random() < 0.5:
            c.kill_daemon()
            c.kill_server()
            order = "daemon, server"
        else:
            c.kill_server()
            c.kill_daemon()
            order = "server, daemon"
        c.lazy_umount()
        c.mount_fs()
        return order

    def check(self):
        """The recovered, running cluster is whole; returns rows found."""
        c = self.c
        self.amchecked = c.amcheck()
        out = c.psql("COPY (SELECT id FROM %s ORDER BY id) TO STDOUT" % TABLE,
                     timeout=120, quiet=True)
        found = set(int(x) for x in out.split())
        missing = sorted(self.acked - found)
        if missing:
            pytest.fail("%d acknowledged rows lost after crash recovery"
                        " (cycle %d): %s%s" % (
                            len(missing), self.cycle, missing[:50],
                            " ..." if len(missing) > 50 else ""),
                        pytrace=False)
        bad = c.psql("SELECT id FROM %s WHERE pad <> repeat(md5(id::text), 4)"
                     " LIMIT 20" % TABLE).split()
        if bad:
            pytest.fail("rows with wrong content: %s" % bad, pytrace=False)
        history = c.pgbench_balances()
        return len(found), history

    def stop_and_checksum(self):
        """Clean stop, then pg_checksums; sometimes on a fresh mount after
        killing the daemon (a clean shutdown left nothing unsynced)."""
        c = self.c
        c.stop()
        fresh = self.rng.random() < 0.5
        if fresh:
            c.kill_daemon()
            c.lazy_umount()
            c.mount_fs()
        return c.checksums(), fresh

    def stats(self):
        """The mount's statistics (read as the mounting user)."""
        return util.run_as(self.c.user, util.stats, self.c.mnt)

    def panics(self):
        """PANIC lines the server logged since the last call."""
        try:
            with open(self.c.logfile, "rb") as f:
                f.seek(self.log_pos)
                text = f.read()
        except OSError:
            return 0
        self.log_pos += len(text)
        return text.count(b" PANIC: ")

    def report(self, text):
        line = "cycle %d: %s" % (self.cycle, text)
        self.lines.append(line)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _crash_cycle(run):
    """Load, then kill -9 at a random moment (sometimes with a checkpoint
    under way) and remount; returns (description, rows acknowledged)."""
    rng = run.rng
    delay = rng.uniform(1.0, 4.0)
    ckpt = rng.uniform(0, delay) if rng.random() < 0.5 else None
    cp = None
    t0 = time.monotonic()
    run.start_load()
    if ckpt is not None:
        time.sleep(ckpt)
        cp = run.checkpoint_soon()
    time.sleep(max(0.0, delay - (time.monotonic() - t0)))
    st = run.stats()
    order = run.crash()
    acked = run.end_load(server_up=False)
    if cp is not None:
        cp.kill()
        cp.wait(60)
    what = ("crash after %.2f s (%skill %s; daemon had %d pauses, %d replies"
            " held, %d KiB dirty)" % (
                delay, "" if ckpt is None else "checkpoint at %.2f s, " % ckpt,
                order, st["throttle_events"], st["throttled_writers"],
                st["dirty_bytes_exact"] // 1024))
    return what, acked


FAULT_ENDS = ("remount", "kill server", "let it restart")


def _fault_cycle(run):
    """Load, backing writes failing for a while (with a checkpoint asked
    for meanwhile, so that data files are written back too), the fault off,
    then one of FAULT_ENDS (each once in every len(FAULT_ENDS) cycles);
    returns (description, rows acknowledged)."""
    rng, c = run.rng, run.c
    spec = rng.choice(FAULT_SPECS)
    if (run.cycle - 1) % len(FAULT_ENDS) == 0:
        run.ends = list(FAULT_ENDS)
        rng.shuffle(run.ends)
    end = run.ends[(run.cycle - 1) % len(FAULT_ENDS)]
    before = rng.uniform(0.5, 2.0)
    during = rng.uniform(0.5, 2.5)
    run.start_load()
    time.sleep(before)
    st0 = run.stats()
    c.set_fault(spec)
    cp = run.checkpoint_soon()
    time.sleep(during)
    c.set_fault("off")
    st = run.stats()
    time.sleep(1.0)       # let the server PANIC, restart or carry on
    cp.kill()
    cp.wait(60)
    if end == "remount":
        run.crash()
        acked = run.end_load(server_up=False)
    elif end == "kill server":
        c.kill_server()
        acked = run.end_load(server_up=False)
    else:
        # Up from before any PANIC, or after restarting itself; or gone
        # (its startup failed while the fault was on).
        up = c.server_running() and c.wait_ready()
        acked = run.end_load(server_up=up)
    what = ("fault %s from %.2f s for %.2f s (%d injected, %d writeback"
            " errors), then %s" % (
                spec, before, during,
                st["faults_injected"] - st0["faults_injected"],
                st["wb_errors"] - st0["wb_errors"], end))
    return what, acked


def _run_loop(options, cycles, faults, capsys):
    bindir = pg_bindir_or_skip()
    user = util.test_user() if os.geteuid() == 0 else None
    extra = os.environ.get("FOLIOFS_CRASH_OPTIONS")
    options = tuple(options) + (tuple(extra.split(",")) if extra else ())
    seed = _seed()
    head = ("pg crash loop%s, options %s: seed %d (FOLIOFS_CRASH_SEED=%d to"
            " replay), %d cycles" % (" with faults" if faults else "",
                                     ",".join(options) or "(defaults)",
                                     seed, seed, cycles))
    sys.stdout.write(head + "\n")
    cluster = Cluster(user, bindir, options=options, server_conf=SERVER_CONF)
    run = Run(cluster, random.Random(seed))
    ok = False
    try:
        run.setup()
        for cycle in range(1, cycles + 1):
            run.cycle = cycle
            if not cluster.server_running():
                cluster.start()
            what, acked = (_fault_cycle if faults else _crash_cycle)(run)
            if not (cluster.server_running() and cluster.wait_ready()):
                cluster.start()          # crash recovery
            found, history = run.check()
            blocks, fresh = run.stop_and_checksum()
            run.report("%s; %d server PANICs; %d rows acknowledged this"
                       " cycle, %d in all, %d rows found; pgbench history %d;"
                       " pg_amcheck %d relations, %d pages; pg_checksums"
                       " %d blocks%s, 0 bad" % (
                           what, run.panics(), acked, len(run.acked), found,
                           history, run.amchecked[0], run.amchecked[1],
                           blocks, " (fresh mount)" if fresh else ""))
        cluster.umount_clean()
        ok = True
    finally:
        if not ok:
            sys.stdout.write("%s\n%s\n" % (head, "\n".join(run.lines)))
            cluster.dump_logs()
        cluster.cleanup(ok)
    with capsys.disabled():
        sys.stdout.write("\n%s: %d cycles survived, %d rows acknowledged,"
                         " all found\n" % (head, cycles, len(run.acked)))


THROTTLED = ("dirty_account=folio", "dirty_bytes=16M")


@pytest.mark.timeout(_timeout(CRASH_CYCLES))
@pytest.mark.parametrize("options", [(), THROTTLED],
                         ids=["default", "throttled"])
def test_pg_crash_loop(options, capsys):
    # The throttled loop repeats the default one's checks under pauses:
    # as many cycles as the fault loop, for the suite's time.
    cycles = CRASH_CYCLES if not options or LONG else FAULT_CYCLES
    _run_loop(options, cycles, faults=False, capsys=capsys)


@pytest.mark.timeout(_timeout(FAULT_CYCLES))
def test_pg_crash_loop_faults(capsys):
    _run_loop((), FAULT_CYCLES, faults=True, capsys=capsys)
