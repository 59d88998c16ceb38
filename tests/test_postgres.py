"""End-to-end PostgreSQL on a foliofs mount.

Runs a real database on the mount the way a user would: the daemon and every
PostgreSQL program run as an unprivileged user (when the suite runs as root,
util.test_user() provides one), the cluster is created with data checksums,
pgbench loads and hammers it, the server is shut down cleanly, and
pg_checksums then reads every page back through the mount.  A lost or torn
write, a stale read or a write that reached the wrong offset shows up as a
checksum failure, a pgbench error or a server crash; the daemon must finally
unmount and exit 0 (it writes back and syncs everything first).

The server log and the socket live outside the mount, so that on failure we
can still print the log even if the mount is wedged.  A failed run's
directory (backing store with the cluster) is removed after the log is
printed unless FOLIOFS_TEST_KEEP is set.

Budget per case: initdb ~3 s, pgbench -i -s 5 ~4 s, 20 s of pgbench,
checksums and unmount a few seconds: ~30 s, two cases ~60 s on a 2-core
machine.
"""

import glob
import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

import util
from util import Mount, skip_reason, test_user as get_test_user

SCALE = 5
CLIENTS = 4
THREADS = 2
# Long enough for checkpoints and writeback under load; the suite runs it
# in three cache modes, so it is kept short.
DURATION_S = 8

# Generous per-step timeouts (a case takes ~27 s on a 2-core machine); the
# whole case is bounded by TEST_TIMEOUT (conftest's timeout marker).
TIMEOUT_INITDB = 60
TIMEOUT_PGCTL = 60
TIMEOUT_LOAD = 90
TIMEOUT_RUN = DURATION_S + 40
TIMEOUT_CHECKSUMS = 60
TEST_TIMEOUT = 150

PG_PROGRAMS = ("initdb", "pg_ctl", "postgres", "pgbench", "pg_checksums")


def _pg_bindir_candidates():
    # PG_BINDIR, when set, is the only place looked at.
    env = os.environ.get("PG_BINDIR")
    if env:
        yield env
        return
    yield "/usr/lib/postgresql/15/bin"
    # Any other installed major version, newest first.
    yield from sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True,
                             text=True, timeout=10)
        if out.returncode == 0:
            yield out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass


def _find_pg_bindir():
    for d in _pg_bindir_candidates():
        if d and all(os.access(os.path.join(d, p), os.X_OK)
                     for p in PG_PROGRAMS):
            return d
    return None


# What provides them, for the skip (or CI's failure) that says so.
PG_PACKAGES = ("postgresql (initdb, pg_ctl, postgres, pg_checksums) and postgresql-client"
               " (pgbench, psql, pg_amcheck): apt-get install postgresql postgresql-client"
               " postgresql-contrib, as contrib/test.sh's install stage does, or set PG_BINDIR")


def _pg_bindir_or_skip():
    """A bindir with every program we need.  Without one the test skips,
    saying why, or under CI (CI=true) fails: PostgreSQL on a mount is the
    main story, and CI must not pass with it unrun.  Installing is the
    install stage's job (contrib/test.sh), never a test's."""
    bindir = _find_pg_bindir()
    if not bindir:
        util.require_tool("PostgreSQL's programs %s" % ", ".join(PG_PROGRAMS), PG_PACKAGES)
    return bindir


def _free_port():
    # With listen_addresses='' the port only names the Unix socket, which is in
    # a private directory; still pick one nobody uses, for clarity in logs.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _drop_to(user):
    """preexec_fn: become USER (uid, gid, supplementary groups)."""
    pw = pwd.getpwnam(user)
    os.initgroups(pw.pw_name, pw.pw_gid)
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)


class PgUser:
    """Runs programs as the unprivileged user (or as ourselves if not root).

    The credentials are dropped in preexec_fn rather than through runuser, so
    that the child is the program itself and a timeout kills it, not a
    wrapper."""

    def __init__(self, user, bindir, cwd):
        self.user = user
        self.bindir = bindir
        self.cwd = cwd

    def run(self, prog, *args, timeout, check=True):
        cmd = [os.path.join(self.bindir, prog), *map(str, args)]
        env = dict(os.environ, LC_ALL="C", LANG="C", TZ="UTC")
        for k in ("PGHOST", "PGPORT", "PGUSER", "PGDATA", "PGDATABASE",
                  "PGOPTIONS", "PGSERVICE", "PGPASSFILE"):
            env.pop(k, None)
        preexec = None
        if self.user is not None:
            pw = pwd.getpwnam(self.user)
            env.update(HOME=self.cwd, USER=pw.pw_name, LOGNAME=pw.pw_name)
            preexec = lambda: _drop_to(self.user)  # noqa: E731
        res = subprocess.run(cmd, cwd=self.cwd, env=env, capture_output=True,
                             text=True, timeout=timeout, preexec_fn=preexec,
                             stdin=subprocess.DEVNULL)
        sys.stdout.write("$ %s%s\n%s%s" % (
            "(as %s) " % self.user if self.user else "", shlex.join(cmd),
            res.stdout, res.stderr))
        if check and res.returncode != 0:
            pytest.fail("%s exited %d:\n%s%s" % (prog, res.returncode,
                                                 res.stdout, res.stderr[-4000:]),
                        pytrace=False)
        return res


def _chown_to(path, user):
    if user is None:
        return
    pw = pwd.getpwnam(user)
    os.chown(path, pw.pw_uid, pw.pw_gid)


def _print_log(path):
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError as e:
        text = "(cannot read: %s)" % e
    if not text.endswith("\n"):
        text += "\n"
    sys.stdout.write("\n===== PostgreSQL server log %s =====\n%s"
                     "===== end of server log =====\n" % (path, text[-64000:]))


# Default (direct I/O: the daemon's cache is the only cache), writethrough
# (the kernel keeps clean pages, every write reaches the daemon) and
# kernel_cache (the kernel's FUSE writeback cache on top), ~30 s each.
@pytest.mark.timeout(TEST_TIMEOUT)
@pytest.mark.parametrize("options", [(), ("cache=writethrough",), ("kernel_cache",)],
                         ids=["direct", "writethrough", "kernel_cache"])
def test_postgres_pgbench_checksums(options):
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    bindir = _pg_bindir_or_skip()
    user = get_test_user() if os.geteuid() == 0 else None

    # A private directory the user owns.  Not pytest's tmp_path: that lives
    # under a 0700 root-owned directory the user cannot enter.
    top = tempfile.mkdtemp(prefix="foliofs-pg-", dir="/var/tmp")
    os.chmod(top, 0o755)
    _chown_to(top, user)
    backing = os.path.join(top, "backing")
    mnt = os.path.join(top, "mnt")
    sockdir = os.path.join(top, "sock")
    logfile = os.path.join(top, "postgresql.log")   # outside the mount
    for d in (backing, mnt, sockdir):
        os.mkdir(d, 0o700)
        _chown_to(d, user)
    pgdata = os.path.join(mnt, "pgdata")
    port = _free_port()

    pg = PgUser(user, bindir, top)
    mount = Mount(backing, mnt, options=options, user=user)
    server_started = False
    mounted = False
    ok = False
    try:
        mount.start()
        mount.wait_for_mount()
        mounted = True

        pg.run("initdb", "--data-checksums", "-D", pgdata, "-U", "postgres",
               "--auth=trust", "--locale=C", "--encoding=UTF8",
               timeout=TIMEOUT_INITDB)

        server_opts = ("-c listen_addresses='' -c unix_socket_directories='%s'"
                       " -p %d" % (sockdir, port))
        pg.run("pg_ctl", "start", "-w", "-t", TIMEOUT_PGCTL, "-D", pgdata,
               "-l", logfile, "-o", server_opts, timeout=TIMEOUT_PGCTL + 10)
        server_started = True

        conn = ("-h", sockdir, "-p", port, "-U", "postgres")
        pg.run("pgbench", "-i", "-s", SCALE, *conn, "postgres",
               timeout=TIMEOUT_LOAD)

        res = pg.run("pgbench", "-N", "-c", CLIENTS, "-j", THREADS,
                     "-T", DURATION_S, *conn, "postgres", timeout=TIMEOUT_RUN)
        out = res.stdout
        m = re.search(r"^tps = ([0-9.]+)", out, re.M)
        assert m, "pgbench reported no tps"
        tps = float(m.group(1))
        assert tps > 0, "pgbench reported tps = %s" % tps
        m = re.search(r"^number of failed transactions: (\d+)", out, re.M)
        assert m, "pgbench did not report failed transactions"
        assert int(m.group(1)) == 0, "pgbench: %s failed transactions" % m.group(1)
        m = re.search(r"^number of transactions actually processed: (\d+)",
                      out, re.M)
        assert m and int(m.group(1)) > 0, "pgbench processed no transactions"
        sys.stdout.write("pgbench -N on foliofs: %.1f tps\n" % tps)

        pg.run("pg_ctl", "stop", "-m", "fast", "-w", "-t", TIMEOUT_PGCTL,
               "-D", pgdata, timeout=TIMEOUT_PGCTL + 10)
        server_started = False

        res = pg.run("pg_checksums", "--check", "-D", pgdata,
                     timeout=TIMEOUT_CHECKSUMS)
        m = re.search(r"^Bad checksums:\s+(\d+)", res.stdout, re.M)
        assert m, "pg_checksums printed no 'Bad checksums' line"
        assert int(m.group(1)) == 0, "pg_checksums: %s bad checksums" % m.group(1)

        mounted = False
        mount.umount()          # asserts the daemon exited 0
        ok = True
    finally:
        if server_started:
            try:
                pg.run("pg_ctl", "stop", "-m", "immediate", "-w", "-t", 30,
                       "-D", pgdata, timeout=40, check=False)
            except subprocess.TimeoutExpired:
                sys.stdout.write("pg_ctl stop -m immediate timed out\n")
        if not ok:
            _print_log(logfile)
            sys.stdout.write("\n===== foliofs daemon output =====\n%s"
                             "===== end of daemon output =====\n"
                             % mount.output())
        if mounted or not ok:
            mount.cleanup()
        if ok or not os.environ.get("FOLIOFS_TEST_KEEP"):
            shutil.rmtree(top, ignore_errors=True)
        else:
            sys.stdout.write("kept %s (FOLIOFS_TEST_KEEP)\n" % top)
