"""Hundreds of PostgreSQL clients on one default mount (issue 31).

pgbench -N with 256 clients on a mount with foliofs's defaults (max_threads
at libfuse's 10, so 25 clients per worker thread), with the default dirty
budget, and with a 1 MiB budget that a bulk writer beside pgbench keeps
full, so that writers, pgbench's backends among them, are paused all the
time (their replies held, fusefs/defer.c).  Each client runs a fixed number of
transactions (-t, not -T), so a client whose request were never served
would hang the run, which the hang guard turns into a failure; nothing is
asserted about speed.

What must hold: pgbench exits 0 with no failed transaction and every
client's transactions processed; the database is consistent (pgbench -N
adds each transaction's delta to one account and logs it in
pgbench_history, so the two sums agree and the log has one row per
transaction); with the small budget, writers were really paused (the
mount's throttle_events); after a clean stop pg_checksums finds no bad
page read back through the mount, and the daemon unmounts and exits 0.

Budget: about a minute per case on a 2-core machine.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

import pytest

from test_postgres import (PG_PACKAGES, PgUser, _chown_to, _drop_to, _free_port, _pg_bindir_or_skip,
                           _print_log)
from util import Mount, parse_stats, require_tool, skip_reason, test_user as get_test_user

SCALE = 5
CLIENTS = 256
TX_PER_CLIENT = 40
THREADS = 2
# max_connections: the clients, and the server's reserved slots besides.
MAX_CONNECTIONS = CLIENTS + 20

# Hang guards only: a step that takes this long is hung.
TIMEOUT_STEP = 120
TIMEOUT_RUN = 240
TEST_TIMEOUT = 600

CASES = {
    'default': [],
    # A 1 MiB budget, and a bulk writer beside pgbench that keeps the
    # charge at the limit (pgbench alone dirties a few pages per
    # transaction, which the flushers keep up with): writers, the
    # backends among them, are paused all the time.
    'throttled': ['dirty_bytes=1M'],
}

# The bulk writer: 1 MiB writes over a 64 MiB file, round and round, until
# killed.
BULK_WRITER = r'''
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
buf = b'b' * (1 << 20)
i = 0
while True:
    os.pwrite(fd, buf, (i % 64) << 20)
    i += 1
'''


def _stats_as(user, mnt):
    """The mount's stats, read as USER (root may not enter another user's
    FUSE mount)."""
    cmd = ['cat', os.path.join(mnt, '.foliofs', 'stats')]
    if os.geteuid() == 0 and user:
        cmd = ['runuser', '-u', user, '--'] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return parse_stats(r.stdout)


@pytest.mark.timeout(TEST_TIMEOUT)
@pytest.mark.parametrize('case', sorted(CASES))
def test_many_clients(case):
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    bindir = _pg_bindir_or_skip()
    if not os.access(os.path.join(bindir, 'psql'), os.X_OK):
        require_tool('psql (in %s)' % bindir, PG_PACKAGES)
    user = get_test_user() if os.geteuid() == 0 else None

    top = tempfile.mkdtemp(prefix='foliofs-pgclients-', dir='/var/tmp')
    os.chmod(top, 0o755)
    _chown_to(top, user)
    backing = os.path.join(top, 'backing')
    mnt = os.path.join(top, 'mnt')
    sockdir = os.path.join(top, 'sock')
    logfile = os.path.join(top, 'postgresql.log')
    for d in (backing, mnt, sockdir):
        os.mkdir(d, 0o700)
        _chown_to(d, user)
    pgdata = os.path.join(mnt, 'pgdata')
    port = _free_port()

    pg = PgUser(user, bindir, top)
    mount = Mount(backing, mnt, options=CASES[case], user=user)
    server_started = mounted = ok = False
    held = {'max': 0}
    bulk = None
    stop = threading.Event()

    def sample_held():
        # For the report only: how many replies were held at once.
        while not stop.wait(0.2):
            try:
                held['max'] = max(held['max'], _stats_as(user, mnt)['throttled_writers'])
            except (AssertionError, OSError, subprocess.SubprocessError, KeyError):
                pass

    try:
        mount.start()
        mount.wait_for_mount()
        mounted = True
        pg.run('initdb', '--data-checksums', '-D', pgdata, '-U', 'postgres',
               '--auth=trust', '--locale=C', '--encoding=UTF8', timeout=TIMEOUT_STEP)
        server_opts = ("-c listen_addresses='' -c unix_socket_directories='%s' -p %d"
                       " -c max_connections=%d" % (sockdir, port, MAX_CONNECTIONS))
        pg.run('pg_ctl', 'start', '-w', '-t', TIMEOUT_STEP, '-D', pgdata, '-l', logfile,
               '-o', server_opts, timeout=TIMEOUT_STEP + 10)
        server_started = True
        conn = ('-h', sockdir, '-p', port, '-U', 'postgres')
        pg.run('pgbench', '-i', '-s', SCALE, *conn, 'postgres', timeout=TIMEOUT_STEP)
        before = _stats_as(user, mnt)

        sampler = threading.Thread(target=sample_held, daemon=True)
        sampler.start()
        if case == 'throttled':
            bulk = subprocess.Popen([sys.executable, '-c', BULK_WRITER,
                                     os.path.join(mnt, 'bulk')],
                                    preexec_fn=(lambda: _drop_to(user)) if user else None)
        try:
            res = pg.run('pgbench', '-N', '-c', CLIENTS, '-j', THREADS, '-t', TX_PER_CLIENT,
                         *conn, 'postgres', timeout=TIMEOUT_RUN)
        finally:
            stop.set()
            sampler.join()
            if bulk:
                bulk.kill()     # a held write is answered at once (interrupt)
                bulk.wait(TIMEOUT_STEP)
        out = res.stdout
        m = re.search(r'^number of failed transactions: (\d+)', out, re.M)
        assert m and int(m.group(1)) == 0, 'pgbench: failed transactions\n' + out
        want = CLIENTS * TX_PER_CLIENT
        m = re.search(r'^number of transactions actually processed: (\d+)/(\d+)', out, re.M)
        assert m and (int(m.group(1)), int(m.group(2))) == (want, want), out

        # pgbench -N's invariant: every transaction's delta is in one
        # account and in one history row.
        res = pg.run('psql', *conn, '-At', '-c',
                     'SELECT (SELECT sum(abalance) FROM pgbench_accounts),'
                     ' (SELECT sum(delta) FROM pgbench_history),'
                     ' (SELECT count(*) FROM pgbench_history)', 'postgres',
                     timeout=TIMEOUT_STEP)
        accounts, history, rows = res.stdout.strip().split('|')
        assert accounts == history, res.stdout
        assert int(rows) == want, res.stdout

        after = _stats_as(user, mnt)
        events = after['throttle_events'] - before['throttle_events']
        sys.stdout.write('%s: %d clients x %d transactions; %d pauses, at most %d replies '
                         'held at once (sampled)\n' % (case, CLIENTS, TX_PER_CLIENT, events,
                                                       held['max']))
        if case == 'throttled':
            assert events > 0, 'the small budget paused no writer: %s' % after

        pg.run('pg_ctl', 'stop', '-m', 'fast', '-w', '-t', TIMEOUT_STEP, '-D', pgdata,
               timeout=TIMEOUT_STEP + 10)
        server_started = False
        res = pg.run('pg_checksums', '--check', '-D', pgdata, timeout=TIMEOUT_STEP)
        m = re.search(r'^Bad checksums:\s+(\d+)', res.stdout, re.M)
        assert m and int(m.group(1)) == 0, res.stdout
        mounted = False
        mount.umount()          # asserts the daemon exited 0
        ok = True
    finally:
        stop.set()
        if server_started:
            try:
                pg.run('pg_ctl', 'stop', '-m', 'immediate', '-w', '-t', 30, '-D', pgdata,
                       timeout=40, check=False)
            except subprocess.TimeoutExpired:
                sys.stdout.write('pg_ctl stop -m immediate timed out\n')
        if not ok:
            _print_log(logfile)
            sys.stdout.write('\n===== foliofs daemon output =====\n%s'
                             '===== end of daemon output =====\n' % mount.output())
        if mounted or not ok:
            mount.cleanup()
        if ok or not os.environ.get('FOLIOFS_TEST_KEEP'):
            shutil.rmtree(top, ignore_errors=True)
