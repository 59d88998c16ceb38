"""Smoke test of contrib/tools/pgcompare.py, the PostgreSQL policy
comparison.

Runs the whole script once with tiny settings (scale 1, two iterations of
3 s, one foliofs configuration and the native baseline: about 40 s) and
checks that what it produces is well formed: the report with a row per
configuration in each table, the CSVs with their headers and a row per
configuration and iteration, and the three plots as PNG files.  Not the
numbers: they depend on the machine.

A second test breaks copies of that output one way at a time (a plot
missing, a PNG that is not one, a CSV row missing, a configuration missing
from the report) and checks that the checker fails on each, so that the
first test can fail.

The test names hold "postgres" so that the sanitizer stage of
contrib/test.sh, which deselects the PostgreSQL tests, skips these too.
"""

import csv
import gzip
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile

import pytest

import util
from test_postgres import _pg_bindir_or_skip

SCRIPT = os.path.join(util.REPO, "contrib", "tools", "pgcompare.py")
CONFIGS = ("folio", "native")       # the first by policy name, then native
ITERS = 2
ARGS = ("--quick", "-s", "1", "-r", str(ITERS), "-T", "3", "-c", "2", "--trace")
TIMEOUT_RUN = 300                   # a hang guard: the run takes ~25 s

PLOTS = ("tps.png", "dirty.png", "pauses.png")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ITERATION_COLUMNS = ("config", "iteration", "position", "tps", "transactions",
                     "run_nr_dirtied", "total_nr_dirtied",
                     "total_backing_write_bytes", "run_throttle_ms")
SAMPLE_COLUMNS = ("config", "iteration", "phase", "time_ms", "unix_ms",
                  "nr_dirty", "nr_dirtied", "nr_written", "dirty_bytes_exact",
                  "setpoint", "dirty_limit", "throttle_ms", "pinned_bytes")
PHASES = ("run", "stop", "idle")


@pytest.fixture(scope="module")
def compare_out():
    """The output directory of one run of the script."""
    pytest.importorskip("matplotlib", reason="python3-matplotlib is not"
                        " installed (the script draws its plots with it)")
    bindir = _pg_bindir_or_skip()
    if not os.path.exists(util.FOLIOFS):
        pytest.fail("%s does not exist: build it or set $FOLIOFS" % util.FOLIOFS)
    top = tempfile.mkdtemp(prefix="foliofs-pgcompare-", dir="/var/tmp")
    os.chmod(top, 0o755)        # the unprivileged user works in it
    out = os.path.join(top, "out")
    cmd = [sys.executable, SCRIPT, *ARGS, "-O", out, "-d", top]
    for c in CONFIGS:
        cmd += ["--config", c]
    env = dict(os.environ, FOLIOFS=util.FOLIOFS, PGBIN=bindir)
    try:
        r = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=TIMEOUT_RUN)
        sys.stdout.write("$ %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
        assert r.returncode == 0, "pgcompare.py exited %d" % r.returncode
        left = [d for d in os.listdir(top) if d != "out"]
        assert not left, "scratch directories left behind: %s" % left
        yield out
    finally:
        shutil.rmtree(top, ignore_errors=True)


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows, "%s is empty" % path
    header, body = rows[0], rows[1:]
    for n, row in enumerate(body, 2):
        assert len(row) == len(header), "%s line %d: %d fields, header has %d" % (
            path, n, len(row), len(header))
    return header, [dict(zip(header, row)) for row in body]


def check_png(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == PNG_MAGIC, "%s is not a PNG" % path
    assert head[12:16] == b"IHDR", "%s has no IHDR chunk first" % path
    width, height = struct.unpack(">II", head[16:24])
    assert width > 0 and height > 0, "%s is %dx%d" % (path, width, height)


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


def check_classes(row, source=False):
    """ROW's cache by file class (after the source step if SOURCE, which
    ran a scan of pgbench_accounts, and after the run) and LRU sizes are
    well formed and add up: bytes are the folios' sizes, active ones are
    among them, pgbench_accounts is cached."""
    assert int(row["active_bytes"]) + int(row["inactive_bytes"]) > 0, row
    for key in ("source_by_class", "run_by_class"):
        by = json.loads(row[key])
        assert set(by) <= set(pgcompare.FILE_CLASSES), (key, by)
        if key == "run_by_class" or source:
            assert by.get("accounts", {}).get("bytes", 0) > 0, (key, by)
        for cls, c in by.items():
            assert c["bytes"] == sum(n << int(o) for o, n in c["folios"].items()) * 4096, c
            assert c["active_bytes"] == sum(n << int(o) for o, n in c["active"].items()) * 4096
            assert 0 <= c["active_bytes"] <= c["bytes"] and c["bytes"] > 0, (cls, c)
            assert 0 <= c["referenced"] <= sum(c["folios"].values()), (cls, c)
            assert c["share_2m"] == (c["folios"].get("9", 0) << 21) / c["bytes"], (cls, c)


def check_output(out):
    """Assert that OUT holds a well-formed report of CONFIGS x ITERS."""
    foliofs_configs = [c for c in CONFIGS if c != "native"]
    for p in PLOTS:
        check_png(os.path.join(out, p))

    header, rows = read_csv(os.path.join(out, "iterations.csv"))
    missing = [c for c in ITERATION_COLUMNS if c not in header]
    assert not missing, "iterations.csv lacks columns %s" % missing
    got = sorted((r["config"], int(r["iteration"])) for r in rows)
    want = sorted((c, i) for c in CONFIGS for i in range(1, ITERS + 1))
    assert got == want, "iterations.csv rows %s, expected %s" % (got, want)
    for r in rows:
        float(r["tps"])
        int(r["transactions"])
        if r["config"] == "native":
            assert r["total_nr_dirtied"] == "", "native row has foliofs stats"
            assert r["run_by_class"] == r["source_by_class"] == r["active_bytes"] == "", r
        else:
            int(r["total_nr_dirtied"])
            check_classes(r)

    header, rows = read_csv(os.path.join(out, "samples.csv"))
    missing = [c for c in SAMPLE_COLUMNS if c not in header]
    assert not missing, "samples.csv lacks columns %s" % missing
    assert sorted({r["config"] for r in rows}) == sorted(foliofs_configs), \
        "samples.csv configurations %s" % sorted({r["config"] for r in rows})
    for r in rows:
        assert r["phase"] in PHASES, "samples.csv: phase %r" % r["phase"]
        for k in SAMPLE_COLUMNS[3:]:
            int(r[k])

    with open(os.path.join(out, "report.md")) as f:
        tables = md_tables(f.read())
    tps = table_starting(tables, "configuration", "avg tps")
    acct = table_starting(tables, "configuration", "charged", "written")
    for t, what in ((tps, "tps"), (acct, "accounting")):
        names = [row[0] for row in t[2:]]
        assert names == list(CONFIGS), "report: %s table rows %s" % (what, names)
        assert all(len(row) == len(t[0]) for row in t), \
            "report: %s table rows of different lengths" % what
    assert tps[0][-1] == "x native", "report: tps table has no x native column"
    assert [row[-1] for row in tps[2:] if row[0] == "native"] == ["1.00"], \
        "report: native's ratio to itself is not 1.00"
    for row in acct[2:]:
        filled = [cell for cell in row[1:] if cell]
        if row[0] == "native":
            assert not filled, "report: native has foliofs figures %s" % filled
        else:
            assert len(filled) == len(row) - 1, "report: %s has blanks" % row[0]


def test_postgres_compare_report(compare_out):
    check_output(compare_out)


def test_postgres_compare_trace(compare_out):
    """--trace: the foliofs configuration's trace, gzipped in the report
    directory, from before the load (its first records make the cluster)
    to after the last run, with every run's window on its clock."""
    sys.path.insert(0, os.path.join(util.REPO, "contrib", "lib"))
    import foliofs_trace
    with open(os.path.join(compare_out, "traces.json")) as f:
        traces = json.load(f)
    assert sorted(traces) == ["folio"], traces      # not native
    tr = traces["folio"]
    assert tr["trace"] == os.path.join(os.path.realpath(compare_out), "trace-folio.trace.gz")
    assert "dirty_account=folio" in tr["options"].split(",") and "stats_log" not in tr["options"]
    assert 0 <= tr["uncertainty_ms"] < 100, tr
    with open(os.path.join(compare_out, "iterations.csv")) as f:
        runs = [r for r in csv.DictReader(f) if r["config"] == "folio"]
    wins = tr["windows"]
    assert [w["iteration"] for w in wins] == [int(r["iteration"]) for r in runs]
    for w, r in zip(wins, runs):
        # A run of -T 3: three seconds on the trace's clock, after its start.
        assert tr["first_ns"] < w["start_ns"] < w["end_ns"] <= w["stop_end_ns"], w
        assert abs(w["end_ns"] - w["start_ns"]
                   - (int(r["end_unix_ms"]) - int(r["start_unix_ms"])) * 10 ** 6) < 10 ** 6
    # The records: pgbench's runs write inside their windows.
    plain = os.path.join(os.path.dirname(compare_out), "folio.trace")
    with gzip.open(tr["trace"], "rb") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    try:
        info = foliofs_trace.trace_info(plain)
        assert info["records"] == tr["records"] and info["first_ns"] == tr["first_ns"]
        recs = list(foliofs_trace.trace_records(plain))
    finally:
        os.unlink(plain)
    assert recs[0]["op"] == "create"            # the marking file, before anything
    assert recs[-1]["time_ns"] > wins[-1]["end_ns"]     # the stop's checkpoint after
    for w in wins:
        assert any(r["op"] == "write" and w["start_ns"] <= r["time_ns"] < w["end_ns"]
                   for r in recs), w


def _drop_csv_row(path):
    with open(path) as f:
        lines = f.readlines()
    with open(path, "w") as f:
        f.writelines(lines[:-1])


def _drop_report_row(path, name):
    with open(path) as f:
        lines = f.readlines()
    with open(path, "w") as f:
        f.writelines(l for l in lines if not l.startswith("| %s |" % name))


def _not_png(path):
    with open(path, "wb") as f:
        f.write(b"GIF89a")


BREAKAGES = {
    "a plot missing": lambda d: os.unlink(os.path.join(d, "pauses.png")),
    "a plot not a PNG": lambda d: _not_png(os.path.join(d, "dirty.png")),
    "an iteration missing": lambda d: _drop_csv_row(os.path.join(d, "iterations.csv")),
    "a configuration missing from the report":
        lambda d: _drop_report_row(os.path.join(d, "report.md"), "native"),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_postgres_compare_checker_fails(compare_out, tmp_path, breakage):
    broken = str(tmp_path / "out")
    shutil.copytree(compare_out, broken)
    check_output(broken)                # the copy passes as it is
    BREAKAGES[breakage](broken)
    with pytest.raises((AssertionError, OSError)):
        check_output(broken)


def _run_bad(args, env_extra=None, drop=()):
    env = dict(os.environ, FOLIOFS=util.FOLIOFS)
    env.update(env_extra or {})
    for k in drop:
        env.pop(k, None)
    return subprocess.run([sys.executable, SCRIPT, *args], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60)


def test_postgres_compare_peer_configs_refused_without_their_needs(tmp_path):
    """The passthrough_hp configurations need PTHP, and the ring one
    FUSE over io_uring: without them the script stops at once, saying
    which, before it mounts or runs anything."""
    pytest.importorskip("matplotlib", reason="python3-matplotlib is not installed")
    if not os.path.exists(util.FOLIOFS):
        pytest.fail("%s does not exist: build it or set $FOLIOFS" % util.FOLIOFS)
    out = str(tmp_path / "out")
    r = _run_bad(["--config", "native", "--config", "pthp-direct", "-O", out],
                 drop=("PTHP",))
    assert r.returncode != 0
    assert "--config 'pthp-direct': set PTHP" in r.stderr, r.stderr
    assert not os.path.exists(out) or not os.listdir(out)
    enable = "/sys/module/fuse/parameters/enable_uring"
    try:
        with open(enable) as f:
            on = f.read().strip() == "Y"
    except OSError:
        on = False
    if not on:
        r = _run_bad(["--config", "pthp-direct-ring", "-O", out],
                     env_extra={"PTHP": "/bin/true"})
        assert r.returncode != 0
        assert "needs %s set to Y" % enable in r.stderr, r.stderr


# ------------------------------------------------ the report's parts alone
# (no PostgreSQL: pgcompare's functions on made-up iterations and samples)

sys.path.insert(0, os.path.dirname(SCRIPT))
import pgcompare  # noqa: E402


def _fake(iters, tps):
    """A comparison of one foliofs configuration and native over ITERS
    iterations with the given tps, and 20 one-second samples per
    iteration climbing to the limit."""
    from types import SimpleNamespace
    configs = [pgcompare.Config("folio", {"dirty_account": "folio"}),
               pgcompare.Config("native", None)]
    cmp = SimpleNamespace(a=SimpleNamespace(iters=iters, clients=2, threads=2, duration=20,
                                            scale=1),
                          configs=configs, iterations=[])
    samples = []
    for c in configs:
        for it in range(1, iters + 1):
            t0 = it * 100000
            cmp.iterations.append({"config": c.name, "iteration": it, "tps": tps[it - 1],
                                   "start_unix_ms": t0, "end_unix_ms": t0 + 20000})
            for k in range(20):
                samples.append({"config": c.name, "iteration": it, "phase": "run",
                                "unix_ms": t0 + k * 1000, "time_ms": t0 + k * 1000,
                                "nr_dirty": 1000 * k, "dirty_bytes_exact": 4096 * 10 * k,
                                "dirty_thresh": 20000, "bg_thresh": 10000,
                                "setpoint": 17500, "dirty_limit": 20000,
                                "throttle_ms": 0})
    return cmp, samples


@pytest.mark.parametrize("iters, header, cv", [
    (1, ["configuration", "avg tps", "min", "max", "CV", "x native"], "-"),
    (2, ["configuration", "avg tps", "min", "max", "CV", "iter 1", "iter 2", "x native"],
     "%.2f%%" % (statistics.stdev([100, 110]) / 105 * 100)),
    (4, ["configuration", "avg tps", "min", "max", "CV", "iters 1-2", "iters 3-4",
         "x native"], None),
])
def test_tps_table_any_number_of_iterations(iters, header, cv):
    """One iteration: no halves (they were "| iter 1 | iter 1 |") and no
    CV ("-", it was 0.00%); two or more: both halves, distinct."""
    tps = [100, 110, 120, 130][:iters]
    cmp, _ = _fake(iters, tps)
    summ = [dict(pgcompare.summarize_tps(c.name, tps), plain=c.native, foliofs=c.foliofs)
            for c in cmp.configs]
    lines = pgcompare.tps_table(cmp, summ).splitlines()
    assert [h.strip() for h in lines[0].strip("|").split("|")] == header
    row = [v.strip() for v in lines[2].strip("|").split("|")]
    assert len(row) == len(header)
    if cv:
        assert row[4] == cv
    for line in pgcompare.comparisons(summ):
        assert "CV %s against %s" % (row[4], row[4]) in line


@pytest.mark.parametrize("argv, want", [
    # The case: -o beside --preset seed kept only -o's options,
    # and the 2 x 2 of readahead models ran under folio_policy=fixed.
    (["--preset", "seed", "-s", "60", "-o",
      "cache_size=384M,dirty_bytes=48M,dirty_background_bytes=24M"],
     {"folio_size": "2M", "folio_policy": "kernel", "readahead_kb": "2048",
      "cache_size": "384M", "dirty_bytes": "48M", "dirty_background_bytes": "24M",
      "throttle": "bdp"}),
    (["--preset", "seed", "--quick"],
     {"folio_size": "2M", "folio_policy": "kernel", "readahead_kb": "2048",
      "cache_size": "128M", "dirty_bytes": "64M", "dirty_background_bytes": "32M",
      "throttle": "bdp"}),
    (["-o", "cache_size=1G,folio_policy=ramp,flushers=4"],
     {"folio_size": "2M", "folio_policy": "ramp", "cache_size": "1G",
      "dirty_bytes": "32M", "throttle": "bdp", "flushers": "4"}),
    ([], {"folio_size": "2M", "folio_policy": "fixed", "cache_size": "2G",
          "dirty_bytes": "32M", "throttle": "bdp"}),
])
def test_common_options_merge_per_option(argv, want):
    """-o changes the options it names, over the script's defaults and a
    preset's, and keeps every other one (no PostgreSQL needed)."""
    assert pgcompare.common_options(pgcompare.parse_args(argv)) == want


@pytest.mark.parametrize("argv,want", [
    (["--preset", "seed"], ["max_parallel_workers_per_gather=0"]),
    (["--preset", "seed", "--pg-conf", "max_parallel_workers_per_gather=2"],
     ["max_parallel_workers_per_gather=0", "max_parallel_workers_per_gather=2"]),
    ([], []),
])
def test_seed_preset_scans_serially(argv, want):
    """--preset seed runs its scan without parallel workers (a parallel
    scan builds no 2 MiB folio), and a --pg-conf given comes after, so it
    wins (no PostgreSQL needed)."""
    assert pgcompare.parse_args(argv).pg_conf == want


def test_dirty_plot_legend_outside_the_axes(tmp_path):
    """dirty.png's legend stands beside the axes, so it covers neither the
    limit line nor the peaks of dirty memory."""
    matplotlib = pytest.importorskip("matplotlib", reason="python3-matplotlib is not"
                                     " installed")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cmp, samples = _fake(2, [100, 110])
    fcs = [c for c in cmp.configs if c.foliofs]
    fig = pgcompare.dirty_figure(plt, cmp, samples, fcs, "t")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    for a in fig.axes:
        box = a.get_window_extent(renderer)
        assert legend.x0 >= box.x1, (legend, box)
    fig.savefig(str(tmp_path / "dirty.png"), bbox_inches="tight")
    plt.close(fig)
    with open(tmp_path / "dirty.png", "rb") as f:
        assert f.read(8) == PNG_MAGIC
@pytest.mark.timeout(400)
def test_postgres_compare_seed_preset():
    """--preset seed in its smallest form: the 2 x 2 of ra_model and
    dirty_account, each configuration's iterations back to back on one
    server (the first configuration's all before the second's), the
    sequential scan before each (in the server log), the share of the
    cache in 2 MiB folios per iteration in the CSV, the report's table of
    it, and its plot."""
    pytest.importorskip("matplotlib", reason="python3-matplotlib is not installed")
    bindir = _pg_bindir_or_skip()
    top = tempfile.mkdtemp(prefix="foliofs-pgcompare-", dir="/var/tmp")
    try:
        check_seed_preset(top, bindir)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def uring_offered():
    try:
        with open("/sys/module/fuse/parameters/enable_uring") as f:
            return f.read().strip() == "Y"
    except OSError:
        return False


def check_seed_preset(top, bindir):
    os.chmod(top, 0o755)        # the unprivileged user works in it
    out = os.path.join(top, "out")
    # -o beside the preset changes its one option and keeps the preset's others.
    cmd = [sys.executable, SCRIPT, "--preset", "seed", "--quick", "-s", "2", "-r", "2",
           "-T", "3", "-c", "2", "-o", "dirty_background_bytes=16M", "-O", out, "-d", top]
    r = subprocess.run(cmd, env=dict(os.environ, FOLIOFS=util.FOLIOFS, PGBIN=bindir),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=TIMEOUT_RUN)
    sys.stdout.write("$ %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    assert r.returncode == 0, "pgcompare.py exited %d" % r.returncode
    _, rows = read_csv(os.path.join(out, "iterations.csv"))
    names = ["6.16-folio", "6.16-page", "6.17-folio", "6.17-page"]
    assert [(x["config"], x["iteration"]) for x in rows] == \
        [(n, str(i)) for n in names for i in (1, 2)]
    # Back to back: each configuration's runs all before the next one's.
    starts = [int(x["start_unix_ms"]) for x in rows]
    assert starts == sorted(starts)
    for x in rows:
        assert 0.0 <= float(x["share_2m"]) <= 1.0, x
        # The cache's folios by size after the run, 4 KiB .. 2 MiB.
        counts = [int(n) for n in x["cached_folios"].split()]
        assert len(counts) == 10 and sum(counts) > 0, x
        assert (counts[9] == 0) == (float(x["share_2m"]) == 0.0), x
        # uring=auto takes the ring only where the fuse module offers it.
        assert x["transport"] in ("/dev/fuse", "io_uring"), x
        check_classes(x, source=True)
        if not uring_offered():
            assert x["transport"] == "/dev/fuse", x
    with open(os.path.join(out, "report.md")) as f:
        report = f.read()
    for n in names:
        assert "configuration %s served over " % n in report, n
    assert "Per iteration, foliofs configurations" in report
    assert "ra_model=6.16" in report and "ra_model=6.17" in report
    # The effective options: the preset's with -o's one over it.
    common = dict(o.partition("=")[::2] for o in
                  re.search(r"common options: (\S+);", report).group(1).split(","))
    assert common["folio_policy"] == "kernel" and common["readahead_kb"] == "2048", common
    assert common["cache_size"] == "128M" and common["dirty_bytes"] == "64M", common
    assert common["dirty_background_bytes"] == "16M", common
    for n in names:
        m = re.search(r"configuration %s: foliofs -o (\S+)" % n, report)
        assert m and "folio_policy=kernel" in m.group(1).split(","), n
    detail = [t for t in md_tables(report) if t[0][:2] == ["configuration", "iteration"]]
    assert detail and len(detail[0]) == 2 + len(rows), detail      # header, rule, rows
    check_png(os.path.join(out, "share2m.png"))
    logs = os.path.join(out, "logs")
    for n in names:
        with open(os.path.join(logs, "server-%s.log" % n), errors="replace") as f:
            server = f.read()
        # One server start for the runs (the load has its own).
        assert server.count("database system is ready to accept connections") == 2, n
