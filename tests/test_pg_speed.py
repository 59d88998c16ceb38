"""Smoke test of contrib/bench/pg-speed.py, the PostgreSQL benchmark against
native and passthrough_hp (issue 43): a benchmark is not a test, but its
report must not break.

One tiny run (scale 1, one round of the load phase and of pgbench -N for
3 s, the native baseline and a default foliofs mount; as root with
bpftrace, the per-request part too, 20 transactions per client) and a
check that what it writes is well formed: report.md's tables with a row
per target, rounds.csv with a row per part and target, and, with the
per-request part, its tables and the raw bpftrace output.  Not the
numbers: they depend on the machine.  A second test breaks copies of that
output one way at a time and checks that the checker fails on each.

The test names hold "postgres" so that the sanitizer stage of
contrib/test.sh, which deselects the PostgreSQL tests, skips these too.
"""

import csv
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import util
from test_postgres import _pg_bindir_or_skip

SCRIPT = os.path.join(util.REPO, "contrib", "bench", "pg-speed.py")
TARGETS = ("native", "default=")
NAMES = ("native", "default")
COST = 20
TIMEOUT_RUN = 400       # a hang guard: the run takes about a minute


def with_cost():
    return os.geteuid() == 0 and shutil.which("bpftrace") is not None


@pytest.fixture(scope="module")
def speed_out():
    """The output directory of one run of the script."""
    bindir = _pg_bindir_or_skip()
    if not os.path.exists(util.FOLIOFS):
        pytest.fail("%s does not exist: build it or set $FOLIOFS" % util.FOLIOFS)
    top = tempfile.mkdtemp(prefix="foliofs-pg-speed-", dir="/var/tmp")
    os.chmod(top, 0o755)        # the unprivileged user works in it
    out = os.path.join(top, "out")
    cmd = [sys.executable, SCRIPT, "-s", "1", "-r", "1", "-T", "3", "-c", "2",
           "-O", out, "-d", top]
    if with_cost():
        cmd += ["--cost", str(COST)]
    cmd += TARGETS
    env = dict(os.environ, FOLIOFS=util.FOLIOFS, PGBIN=bindir)
    try:
        r = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=TIMEOUT_RUN)
        sys.stdout.write("$ %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
        assert r.returncode == 0, "pg-speed.py exited %d" % r.returncode
        left = [d for d in os.listdir(top) if d != "out"]
        assert not left, "scratch directories left behind: %s" % left
        yield out
    finally:
        shutil.rmtree(top, ignore_errors=True)


def md_tables(text):
    """The Markdown tables of TEXT: lists of rows, each a list of cells."""
    tables, cur = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cur.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif cur:
            tables.append(cur)
            cur = []
    return tables


def table_starting(tables, *header):
    found = [t for t in tables if tuple(t[0][:len(header)]) == header]
    assert len(found) == 1, "report: %d tables with header %s" % (
        len(found), " | ".join(header))
    return found[0]


def check_rows(table, names, what):
    got = [row[0] for row in table[2:]]
    assert got == list(names), "%s: rows %s, expected %s" % (what, got, list(names))


def check_output(out):
    """Assert that OUT holds a well-formed report of TARGETS."""
    with open(os.path.join(out, "report.md")) as f:
        tables = md_tables(f.read())
    load = table_starting(tables, "target", "median s", "median ratio to native")
    check_rows(load, NAMES, "load table")
    tps = table_starting(tables, "target", "median tps", "median ratio to native")
    check_rows(tps, NAMES, "pgbench table")
    for row in tps[2:]:
        float(row[1])
        assert row[2] == "1.00" if row[0] == "native" else float(row[2]) > 0, row
    fuse = [n for n in NAMES if n != "native"]
    if with_cost():
        mix = table_starting(tables, "target", "transactions", "all")
        check_rows(mix, fuse, "requests table")
        for row in mix[2:]:
            assert int(row[1]) > 0 and float(row[2]) > 0, row
        cpu = table_starting(tables, "target", "CPU us per transaction")
        check_rows(cpu, fuse, "CPU table")
        for n in fuse:
            with open(os.path.join(out, "cost-%s.bt.txt" % n)) as f:
                assert "@n[" in f.read(), "cost-%s.bt.txt counted no request" % n
    with open(os.path.join(out, "rounds.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    got = sorted((r["part"], r["target"]) for r in rows)
    want = sorted((p, n) for p in ("load", "pgbench") for n in NAMES)
    assert got == want, "rounds.csv rows %s, expected %s" % (got, want)
    for r in rows:
        if r["part"] == "pgbench":
            float(r["tps"])
            assert (r["backing_read_mb"] == "") == (r["target"] == "native"), r


@pytest.mark.timeout(TIMEOUT_RUN + 60)
def test_pg_speed_postgres_report(speed_out):
    check_output(speed_out)


def _broken(src, dst, path, edit):
    shutil.copytree(src, dst)
    p = os.path.join(dst, path)
    with open(p) as f:
        text = f.read()
    with open(p, "w") as f:
        f.write(edit(text))
    return dst


@pytest.mark.timeout(TIMEOUT_RUN + 60)
def test_pg_speed_postgres_checker_fails(speed_out, tmp_path):
    """Each breakage makes check_output() fail, so the test above can."""
    def drop_line(start):
        return lambda t: "\n".join(l for l in t.splitlines() if not l.startswith(start))
    cases = {
        "load row": ("report.md", lambda t: t.replace("| default | ", "| other | ", 1)),
        "pgbench rows": ("report.md", drop_line("| default |")),
        "csv row": ("rounds.csv", drop_line("pgbench,")),
    }
    for name, (path, edit) in cases.items():
        bad = _broken(speed_out, str(tmp_path / name.replace(" ", "-")), path, edit)
        with pytest.raises(AssertionError):
            check_output(bad)
