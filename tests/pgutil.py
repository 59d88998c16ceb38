"""A PostgreSQL cluster on a foliofs mount that can be crashed and recovered.

Builds on test_postgres.py's helpers (finding the binaries, running them as
the unprivileged user) and adds what a crash test needs: remounting the same
backing directory, killing the daemon and every server process with SIGKILL,
long-lived client processes, the fault switch, and the checks a recovered
cluster must pass (pg_amcheck, pg_checksums, pgbench's balance invariant).

Layout under TOP (a directory the user owns, outside the mount):
    backing/            the backing directory (survives every crash)
    mnt/                the mount point; the cluster is mnt/pgdata
    sock/               the server's Unix socket
    postgresql.log      the server log
    pgbench.log         output of the background pgbench runs
"""

import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

import util
from test_postgres import (PG_PACKAGES, PgUser, _chown_to, _free_port, _pg_bindir_or_skip,
                           _print_log)

# Generous hang guards, not expectations: a step that takes this long is hung.
TIMEOUT_INITDB = 90
TIMEOUT_PGCTL = 120          # includes crash recovery
TIMEOUT_LOAD = 120
TIMEOUT_CHECK = 180
TIMEOUT_KILL = 30

PG_EXTRA_PROGRAMS = ("psql", "pg_amcheck")


def pg_bindir_or_skip():
    """_pg_bindir_or_skip(), with psql and pg_amcheck too (skipped for
    lack of them, failed under CI)."""
    bindir = _pg_bindir_or_skip()
    for p in PG_EXTRA_PROGRAMS:
        if not os.access(os.path.join(bindir, p), os.X_OK):
            util.require_tool("%s (in %s)" % (p, bindir), PG_PACKAGES)
    return bindir


def _proc_cwd(pid):
    try:
        return os.readlink("/proc/%d/cwd" % pid)
    except OSError:
        return None


def _proc_exe(pid):
    try:
        return os.readlink("/proc/%d/exe" % pid)
    except OSError:
        return None


def _alive(pid):
    """True while PID exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rindex(")") + 2] != "Z"


class Cluster:
    """One cluster on a foliofs mount of a backing directory that outlives
    every daemon and server it sees.

    user: the unprivileged user that mounts and runs PostgreSQL (None: us).
    options: -o options of every mount."""

    def __init__(self, user, bindir, options=(), server_conf=()):
        self.user = user
        self.bindir = bindir
        self.options = list(options)
        self.server_conf = list(server_conf)
        self.top = tempfile.mkdtemp(prefix="foliofs-pgcrash-", dir="/var/tmp")
        os.chmod(self.top, 0o755)
        _chown_to(self.top, user)
        self.backing = os.path.join(self.top, "backing")
        self.mnt = os.path.join(self.top, "mnt")
        self.sockdir = os.path.join(self.top, "sock")
        self.logfile = os.path.join(self.top, "postgresql.log")
        self.benchlog = os.path.join(self.top, "pgbench.log")
        for d in (self.backing, self.mnt, self.sockdir):
            os.mkdir(d, 0o700)
            _chown_to(d, user)
        self.pgdata = os.path.join(self.mnt, "pgdata")
        self.port = _free_port()
        self.pg = PgUser(user, bindir, self.top)
        self.mount = None
        self.old_outputs = []       # (label, output) of daemons gone
        self.faulted = False        # the current daemon has injected faults
        self.mounts = 0
        self.server = None          # the postmaster (our child)
        self.starts = 0

    # ---------------------------------------------------------------- mount

    def mount_fs(self):
        assert self.mount is None
        self.mounts += 1
        self.mount = util.Mount(self.backing, self.mnt, options=self.options,
                                user=self.user)
        self.mount.start()
        self.mount.wait_for_mount(timeout=30)
        self.faulted = False

    def _retire_mount(self, label):
        self.old_outputs.append(("daemon %d (%s)" % (self.mounts, label),
                                 self.mount.output()))
        del self.old_outputs[:-4]
        self.mount = None

    def kill_daemon(self):
        """SIGKILL the daemon: everything only in its cache is lost."""
        m = self.mount
        try:
            os.kill(m.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            m.proc.wait(TIMEOUT_KILL)
        except subprocess.TimeoutExpired:
            pytest.fail("foliofs daemon %d did not die of SIGKILL" % m.pid)

    def lazy_umount(self):
        """fusermount3 -uz the dead mount (as the user who mounted it)."""
        r = subprocess.run([util.FUSERMOUNT, "-u", "-z", self.mnt],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=TIMEOUT_KILL,
                           preexec_fn=util._preexec(self.user))
        if r.returncode != 0 or util.is_fuse_mounted(self.mnt):
            pytest.fail("fusermount3 -uz %s failed (%d): %s"
                        % (self.mnt, r.returncode,
                           r.stdout.decode(errors="replace")))
        if not self.faulted:
            # Killed, but until then it had nothing to complain about.
            util.check_output(self.mount.output(), "killed daemon")
        self._retire_mount("killed")

    def umount_clean(self):
        """Unmount; the daemon must exit 0 (it wrote everything back), and,
        unless faults were injected into it, print nothing suspicious."""
        r = subprocess.run([util.FUSERMOUNT, "-u", self.mnt],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=TIMEOUT_KILL,
                           preexec_fn=util._preexec(self.user))
        if r.returncode != 0:
            pytest.fail("fusermount3 -u %s failed (%d): %s"
                        % (self.mnt, r.returncode,
                           r.stdout.decode(errors="replace")))
        try:
            rc = self.mount.proc.wait(TIMEOUT_CHECK)
        except subprocess.TimeoutExpired:
            pytest.fail("foliofs did not exit after unmount")
        out = self.mount.output()
        if rc != 0:
            pytest.fail("foliofs exited with status %d:\n%s" % (rc, out))
        if not self.faulted:
            util.check_output(out)
        self._retire_mount("unmounted")

    def set_fault(self, spec):
        """Write SPEC to .foliofs/fault as the mounting user."""
        if spec != "off":
            self.faulted = True
        util.run_as(self.user, util.write_file,
                    os.path.join(self.mnt, ".foliofs", "fault"),
                    (spec + "\n").encode())

    # --------------------------------------------------------------- server

    def conn_args(self):
        return ("-h", self.sockdir, "-p", self.port, "-U", "postgres")

    def initdb(self):
        self.pg.run("initdb", "--data-checksums", "-D", self.pgdata,
                    "-U", "postgres", "--auth=trust", "--locale=C",
                    "--encoding=UTF8", timeout=TIMEOUT_INITDB)

    def start(self):
        """Start the postmaster and wait until it accepts connections (after
        crash recovery if the last stop was not clean).

        Not pg_ctl start: its postmaster is orphaned at once, and here pid 1
        reaps orphans only every few seconds, so a postmaster killed with
        SIGKILL would linger as a zombie whose pid, still in postmaster.pid,
        makes the next start refuse ("another server might be running").
        As our child it is reaped at once."""
        assert self.server is None or self.server.poll() is not None
        args = ["-D", self.pgdata, "-c", "listen_addresses=",
                "-c", "unix_socket_directories=%s" % self.sockdir,
                "-p", self.port]
        for conf in self.server_conf:
            args += ["-c", conf]
        log = open(self.logfile, "ab")
        try:
            self.server = self.popen("postgres", *args, stdout=log, stderr=log)
        finally:
            log.close()
        self.starts += 1
        deadline = time.monotonic() + TIMEOUT_PGCTL
        while True:
            rc = self.server.poll()
            if rc is not None:
                pytest.fail("postgres exited with status %d while starting"
                            " (see the server log)" % rc, pytrace=False)
            r = self.run_quiet("pg_isready", *self.conn_args(), "-d",
                               "postgres", timeout=30)
            if r.returncode == 0:
                return
            if time.monotonic() > deadline:
                pytest.fail("server not ready %d s after start"
                            % TIMEOUT_PGCTL, pytrace=False)
            time.sleep(0.1)

    def stop(self):
        """Clean shutdown (a shutdown checkpoint)."""
        self.pg.run("pg_ctl", "stop", "-m", "fast", "-w", "-t", TIMEOUT_PGCTL,
                    "-D", self.pgdata, timeout=TIMEOUT_PGCTL + 10)
        try:
            rc = self.server.wait(TIMEOUT_KILL)
        except subprocess.TimeoutExpired:
            pytest.fail("postmaster still there after pg_ctl stop")
        if rc != 0:
            pytest.fail("postmaster exited with status %d at a clean stop" % rc)

    def server_pids(self):
        """Every PostgreSQL server process of this cluster: the postgres
        binary running with the cluster's directory as its working directory
        (the postmaster chdirs there, and its children inherit it; this
        spares servers of other tests running beside us)."""
        exe = os.path.realpath(os.path.join(self.bindir, "postgres"))
        pids = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            if _proc_cwd(pid) == self.pgdata and _proc_exe(pid) == exe:
                pids.append(pid)
        return pids

    def kill_server(self):
        """SIGKILL every server process, until none is left."""
        deadline = time.monotonic() + TIMEOUT_KILL
        while True:
            pids = [p for p in self.server_pids() if _alive(p)]
            if not pids:
                break
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                pytest.fail("server processes %s survive SIGKILL" % pids)
            time.sleep(0.05)
        if self.server is not None:
            self.server.wait(TIMEOUT_KILL)

    def server_running(self):
        """The postmaster is alive (it may be restarting after a PANIC)."""
        return self.server is not None and self.server.poll() is None

    def wait_ready(self):
        """Wait until the server accepts connections (after it restarted
        itself following a PANIC)."""
        deadline = time.monotonic() + TIMEOUT_PGCTL
        while True:
            r = self.run_quiet("pg_isready", *self.conn_args(), "-d",
                               "postgres", timeout=30)
            if r.returncode == 0:
                return True
            if not self.server_running():
                return False
            if time.monotonic() > deadline:
                pytest.fail("server not ready after %d s" % TIMEOUT_PGCTL)
            time.sleep(0.2)

    def psql(self, sql, timeout=TIMEOUT_CHECK, quiet=False):
        """Run SQL in one psql; its unaligned, tuples-only output (str).
        quiet: do not echo the output (it is long)."""
        args = ("-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", *self.conn_args(),
                "-d", "postgres", "-c", sql)
        if not quiet:
            return self.pg.run("psql", *args, timeout=timeout).stdout
        r = self.run_quiet("psql", *args, timeout=timeout)
        if r.returncode != 0:
            pytest.fail("psql -c %r exited %d:\n%s" % (
                sql, r.returncode, r.stderr.decode(errors="replace")[-4000:]),
                pytrace=False)
        return r.stdout.decode()

    def _cmd_env(self, prog, args):
        cmd = [os.path.join(self.bindir, prog), *map(str, args)]
        env = dict(os.environ, LC_ALL="C", LANG="C", TZ="UTC")
        for k in ("PGHOST", "PGPORT", "PGUSER", "PGDATA", "PGDATABASE",
                  "PGOPTIONS", "PGSERVICE", "PGPASSFILE"):
            env.pop(k, None)
        if self.user is not None:
            pw = pwd.getpwnam(self.user)
            env.update(HOME=self.top, USER=pw.pw_name, LOGNAME=pw.pw_name)
        return cmd, env

    def popen(self, prog, *args, stdin=subprocess.DEVNULL,
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        """Start PROG as the user, not waiting for it."""
        cmd, env = self._cmd_env(prog, args)
        return subprocess.Popen(cmd, cwd=self.top, env=env, stdin=stdin,
                                stdout=stdout, stderr=stderr,
                                preexec_fn=util._preexec(self.user))

    def run_quiet(self, prog, *args, timeout):
        """Run PROG as the user, without echoing it (for polling)."""
        cmd, env = self._cmd_env(prog, args)
        return subprocess.run(cmd, cwd=self.top, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout,
                              preexec_fn=util._preexec(self.user))

    # --------------------------------------------------------------- checks

    def amcheck(self):
        """pg_amcheck --heapallindexed --parent-check on every relation of
        every database: no corruption reported, and no database skipped (a
        database without the amcheck extension is only a warning on stderr,
        exit status 0).  Returns (relations, pages) checked."""
        res = self.run_quiet("pg_amcheck", *self.conn_args(), "--all",
                             "--heapallindexed", "--parent-check",
                             "--progress", timeout=TIMEOUT_CHECK)
        out = res.stdout.decode(errors="replace")
        err = res.stderr.decode(errors="replace")
        progress = re.findall(r"(\d+)/(\d+) relations \(\d+%\),\s*(\d+)/(\d+)"
                              r" pages", err)
        other = [l for l in re.split(r"[\r\n]+", err)
                 if l.strip() and "relations (" not in l]
        if res.returncode != 0 or out.strip() or other or not progress:
            pytest.fail("pg_amcheck reports corruption or skipped something"
                        " (exit %d):\n%s\n%s" % (res.returncode, out[-8000:],
                                                "\n".join(other)[-4000:]),
                        pytrace=False)
        done, total, pages_done, pages = (int(x) for x in progress[-1])
        if done != total or pages_done != pages or total == 0:
            pytest.fail("pg_amcheck checked %d of %d relations, %d of %d"
                        " pages" % (done, total, pages_done, pages),
                        pytrace=False)
        return total, pages

    def checksums(self):
        """pg_checksums --check on the stopped cluster: zero bad blocks.
        Returns the number of blocks scanned."""
        res = self.pg.run("pg_checksums", "--check", "-D", self.pgdata,
                          timeout=TIMEOUT_CHECK, check=False)
        bad = re.search(r"^Bad checksums:\s+(\d+)", res.stdout, re.M)
        if res.returncode != 0 or not bad or int(bad.group(1)) != 0:
            pytest.fail("pg_checksums --check failed (exit %d):\n%s%s"
                        % (res.returncode, res.stdout, res.stderr[-8000:]),
                        pytrace=False)
        m = re.search(r"^Blocks scanned:\s+(\d+)", res.stdout, re.M)
        return int(m.group(1)) if m else 0

    def pgbench_balances(self):
        """pgbench's tpcb-like transaction adds the same delta to an
        account, a teller, a branch and a history row: after any crash the
        four sums agree, or a transaction was torn."""
        out = self.psql("SELECT (SELECT coalesce(sum(abalance),0) FROM pgbench_accounts),"
                        " (SELECT coalesce(sum(tbalance),0) FROM pgbench_tellers),"
                        " (SELECT coalesce(sum(bbalance),0) FROM pgbench_branches),"
                        " (SELECT coalesce(sum(delta),0) FROM pgbench_history),"
                        " (SELECT count(*) FROM pgbench_history)")
        a, t, b, h, n = (int(x) for x in out.strip().split("|"))
        if not a == t == b == h:
            pytest.fail("pgbench balances disagree: accounts %d tellers %d"
                        " branches %d history %d" % (a, t, b, h), pytrace=False)
        return n

    # ------------------------------------------------------------- reports

    def dump_logs(self):
        _print_log(self.logfile)
        for label, out in self.old_outputs:
            sys.stdout.write("\n===== foliofs %s output =====\n%s"
                             "===== end =====\n" % (label, out[-32000:]))
        if self.mount is not None:
            sys.stdout.write("\n===== foliofs daemon %d (current) output ====="
                             "\n%s===== end =====\n"
                             % (self.mounts, self.mount.output()[-32000:]))

    def cleanup(self, ok):
        """Never raises: kill what is left, unmount, remove TOP unless the
        run failed and FOLIOFS_TEST_KEEP is set."""
        try:
            self.kill_server()
        except BaseException:      # noqa: BLE001 - best effort
            pass
        if self.mount is not None:
            self.mount.cleanup()
        if util.is_fuse_mounted(self.mnt):
            subprocess.run([util.FUSERMOUNT, "-u", "-z", self.mnt],
                           stderr=subprocess.DEVNULL)
        if ok or not os.environ.get("FOLIOFS_TEST_KEEP"):
            shutil.rmtree(self.top, ignore_errors=True)
        else:
            sys.stdout.write("kept %s (FOLIOFS_TEST_KEEP)\n" % self.top)


class Inserter:
    """Inserts numbered rows into TABLE, one committed transaction each,
    through one long-lived psql fed through a pipe, and remembers every row
    whose commit the server acknowledged.

    Each row is sent only after the previous one was answered.  In autocommit
    mode the server commits (and with synchronous_commit=on flushes the
    commit record) before it reports the command complete, and psql prints
    the RETURNING value only once the whole answer arrived; so a number read
    back is a durable row.  A lost connection ends psql and the thread."""

    def __init__(self, cluster, table, first_id, cycle):
        self.cluster = cluster
        self.table = table
        self.next_id = first_id
        self.cycle = cycle
        self.acked = []
        self.sent = first_id - 1
        self.error = None
        self._stop = threading.Event()
        self.proc = cluster.popen("psql", "-X", "-q", "-At", "-v",
                                  "ON_ERROR_STOP=1", *cluster.conn_args(),
                                  "-d", "postgres", stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        p = self.proc
        try:
            while True:
                if self._stop.is_set():
                    p.stdin.close()
                    p.stdout.read()
                    return
                i = self.next_id
                p.stdin.write(("INSERT INTO %s VALUES (%d, %d, repeat(md5('%d'), 4))"
                               " RETURNING id;\n" % (self.table, i, self.cycle, i))
                              .encode())
                p.stdin.flush()
                self.sent = i
                self.next_id = i + 1
                line = p.stdout.readline()
                if not line:
                    return
                if line.strip() != str(i).encode():
                    self.error = "row %d answered %r" % (i, line)
                    return
                self.acked.append(i)
        except (BrokenPipeError, OSError, ValueError):
            return

    def stop(self):
        """Ask the thread to end after the row in flight (the server is
        still up)."""
        self._stop.set()

    def finish(self, timeout=TIMEOUT_KILL):
        """Wait for the thread once the server is gone; returns psql's
        stderr."""
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.proc.kill()
            self.thread.join(timeout)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            self.proc.kill()
            err = b""
        return (err or b"").decode(errors="replace")
