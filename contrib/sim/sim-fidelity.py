#!/usr/bin/python3
"""sim-fidelity.py: what a mount did against what foliofs-sim says it did.

usage: contrib/sim/sim-fidelity.py [-O DIR] [-w fio|pgbench]... [-T SECONDS]
                               [-t TRACEDIR] [-d WORKDIR]

For each workload and each configuration (dirty_account=folio and page;
each also with flushers=0,throttle=none and an 8G cache, where nothing
depends on timing) one mount records a trace (-o trace=), runs the
workload, has its stats read (.foliofs/stats) and is unmounted; the stats
log's last line is taken after the daemon's final writeback, which is
where a replay ends too.  The trace is then replayed by foliofs-sim with
the same -o options (the device model: the simulator's defaults) and the
two are printed side by side.  A benchmark, not a test: the numbers depend
on the machine.

  fio      buffered 8 KiB random overwrites (psync), 2 jobs x 256 MiB laid
           out in the backing directory before the mount, -T seconds
  pgbench  contrib/tools/pgcompare.py's run, one iteration: initdb, pgbench -i
           -s 20 -F 90, pgbench -N -M prepared -c 8 -j 2 for -T seconds

The options are pgcompare.py's common ones (folio_size=2M,folio_policy=fixed,
cache_size=2G,dirty_bytes=32M,throttle=bdp).  Output (-O DIR): fidelity.md (the tables
and the commands), the simulator's output per run (sim-*.txt, stats logs
sim-*.jsonl), the mount's stats (mount-*.stats, stats logs under logs/),
fio's JSON; traces go to -t (default /var/tmp/sim-fidelity-traces), kept
for further replays.  Runs as pgcompare.py does (root: as foliofs-test).

Environment: FOLIOFS (daemon, default <repo>/build/foliofs), FOLIOFS_SIM
(default next to it, sim/foliofs-sim), PGBIN.
"""

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tools"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "lib"))
import pgcompare                                        # noqa: E402
from pgcompare import Failure, log, join_opts           # noqa: E402
from foliofs_trace import trace_records                 # noqa: E402

MIB = 1 << 20
# Timing-free configurations: no flusher, no throttling, and a cache that
# never needs reclaim, so what is charged and written depends only on the
# order of the operations.
EXACT = "flushers=0,throttle=none,cache_size=8G"
CONFIGS = (("folio", "dirty_account=folio"),
           ("page", "dirty_account=page"),
           ("folio-exact", "dirty_account=folio," + EXACT),
           ("page-exact", "dirty_account=page," + EXACT))
# Options of the mount the replay must not get: the simulator refuses
# trace= (it is the mount's), and keeps its own stats log.
MOUNT_ONLY = ("trace", "stats_log")
FIO_JOB = ["--name=bench", "--ioengine=psync", "--rw=randwrite", "--bs=8k",
           "--overwrite=1", "--numjobs=2", "--size=256M", "--direct=0",
           "--group_reporting"]


def percentile(v, pct):
    """The PCT-th percentile of the sorted list V (as foliofs-sim takes it)."""
    return v[(len(v) - 1) * pct // 100] if v else 0


def read_trace(path):
    """(records, sorted fsync and fdatasync times in ms, seconds from the
    first record's start to the last one's end) of a trace, read by
    contrib/lib/foliofs_trace.py (versions 1 and 2)."""
    recs = 0
    syncs = []
    first = end = None
    try:
        for r in trace_records(path):
            t, dur = r["time_ns"], r["dur_ns"]
            recs += 1
            if r["op"] in ("fsync", "fdatasync"):
                syncs.append(dur / 1e6)
            first = t if first is None else first
            end = max(end or 0, t + dur)
    except ValueError as e:     # not a trace, or a version not known here
        raise Failure(str(e)) from e
    return recs, sorted(syncs), ((end - first) / 1e9 if recs else 0.0)


def stats_log_lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def replay(sim, trace, opts, out, tag):
    """foliofs-sim TRACE -o OPTS with a stats log; its stats and summary."""
    slog = os.path.join(out, "sim-%s.jsonl" % tag)
    cmd = [sim, trace, "-o", opts, "--stats-log", slog]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True)
    took = time.monotonic() - t0
    with open(os.path.join(out, "sim-%s.txt" % tag), "w") as f:
        f.write("$ %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    if r.returncode != 0:
        raise Failure("%s failed (exit %d): %s" % (" ".join(cmd), r.returncode,
                                                    r.stderr.strip()))
    res = {"cmd": cmd, "wall_s": took, "writers": []}
    for line in r.stdout.splitlines():
        w = line.split()
        if w[:2] == ["#", "summary:"]:
            res["virtual_s"] = float(w[5])
        if not w or w[0] == "#":
            continue
        if w[0] == "writer":
            res["writers"].append((int(w[2]), float(w[3]), float(w[4])))
        elif len(w) == 2:
            # A stat: a number, or a policy's name (dirty_account page).
            res[w[0]] = int(w[1]) if w[1].isdigit() else w[1]
        else:
            # "pauses N total_ms X ...": N under the line's name, the other
            # pairs prefixed with it; "errors write N read N ...": pairs only.
            pairs = w[1:]
            if pairs[0].replace(".", "").isdigit():
                res[w[0]] = float(pairs.pop(0))
            for k, v in zip(pairs[0::2], pairs[1::2]):
                res[w[0] + "_" + k] = float(v)
    res["peak_sampled"] = max(s["nr_dirty"] for s in stats_log_lines(slog)) * 4096
    return res


def writer_rates(writers):
    """Achieved and recorded ops/s summed over the writers holding at least
    1% of the operations (the workload's own: a process that did three
    things in a millisecond would swamp a sum of rates)."""
    total = sum(ops for ops, _, _ in writers)
    main = [w for w in writers if w[0] >= total / 100]
    return (len(main), sum(w[1] for w in main), sum(w[2] for w in main))


class Fidelity:
    def __init__(self, a, foliofs, sim, pgbin):
        self.a = a
        self.foliofs = foliofs
        self.sim = sim
        self.pgbin = pgbin
        self.out = os.path.realpath(a.output)
        self.rows = collections.OrderedDict()     # (workload, config) -> dict
        self.commands = []

    def configs(self, workload):
        pargs = ["-s", "20", "-r", "1", "-T", str(self.a.duration), "-d",
                 self.a.workdir, "-O", os.path.join(self.out, workload)]
        for name, opts in CONFIGS:
            trace = os.path.join(self.a.traces, "%s-%s.trace" % (workload, name))
            pargs += ["--config", "%s=%s,trace=%s" % (name, opts, trace)]
        a = pgcompare.parse_args(pargs)
        fhelp = pgcompare.FoliofsHelp(self.foliofs)
        return a, [pgcompare.parse_config(s, fhelp) for s in a.config]

    def run_workload(self, workload):
        a, configs = self.configs(workload)
        os.makedirs(a.output)
        common = pgcompare.common_options(a)
        cmp = pgcompare.Comparison(a, configs, common, self.foliofs, self.pgbin)
        os.makedirs(self.a.traces, exist_ok=True)
        cmp.r.chown(self.a.traces)
        ok = False
        try:
            if workload == "pgbench":
                for line in cmp.setting_lines():
                    log(line)
                cmp.run()
                tps = {r["config"]: r["tps"] for r in cmp.iterations}
                ends = {}
            else:
                tps, ends = self.run_fio(cmp)
            ok = True
        finally:
            cmp.cleanup(ok)
        for c in configs:
            self.compare(workload, cmp, c, tps.get(c.name), ends.get(c.name))

    def run_fio(self, cmp):
        """Each configuration in turn: lay out the files in the backing
        directory, mount, fio, read the stats, unmount."""
        cmp.make_dirs()
        iops, ends = {}, {}
        for c in cmp.configs:
            cmp.r.check(["fio", *FIO_JOB, "--directory=" + c.backing, "--bs=1M",
                         "--create_only=1"], "%s: fio layout" % c.name)
            cmp.r.check(["sync"], "sync")
            cmp.mount(c)
            js = os.path.join(cmp.logs, "fio-%s.json" % c.name)
            cmd = ["fio", *FIO_JOB, "--directory=" + c.mnt, "--time_based",
                   "--runtime=%d" % self.a.duration, "--output-format=json",
                   "--output=" + js]
            log("%s: %s" % (c.name, " ".join(cmd)))
            cmp.r.check(cmd, "%s: fio" % c.name,
                        timeout=self.a.duration + pgcompare.TIMEOUT_STEP)
            ends[c.name] = cmp.snapshot(c)
            cmp.umount(c)
            with open(js) as f:
                iops[c.name] = json.load(f)["jobs"][0]["write"]["iops"]
        return iops, ends

    def compare(self, workload, cmp, c, rate, end):
        opts = cmp.mount_opts(c)
        trace = opts["trace"]
        sim_opts = join_opts({k: v for k, v in opts.items() if k not in MOUNT_ONLY})
        log("%s %s: replaying %s" % (workload, c.name, trace))
        tag = "%s-%s" % (workload, c.name)
        sim = replay(self.sim, trace, sim_opts, self.out, tag)
        samples = stats_log_lines(os.path.join(self.out, workload, "logs",
                                               os.path.basename(c.stats_log)))
        final = samples[-1]         # after the final writeback at unmount
        if end:
            with open(os.path.join(self.out, "mount-%s.stats" % tag), "w") as f:
                f.write("".join("%s %s\n" % kv for kv in end.items()))
        recs, syncs, span = read_trace(trace)
        n, achieved, recorded = writer_rates(sim["writers"])
        self.commands.append(
            "%s %s: foliofs -o %s; %s" % (workload, c.name, join_opts(opts),
                                          " ".join(sim["cmd"])))
        self.rows[(workload, c.name)] = {
            "exact": EXACT in join_opts(c.opts),
            "rate": rate, "records": recs, "trace_bytes": os.path.getsize(trace),
            "span": span, "virtual_s": sim["virtual_s"],
            "sim_wall": sim["wall_s"], "writers": n,
            "dirtied": (final["nr_dirtied"], sim["nr_dirtied"]),
            "written": (final["nr_written"], sim["nr_written"]),
            "backing": (final["backing_write_bytes"] / MIB,
                        sim["backing_write_bytes"] / MIB),
            "peak": (max(s["nr_dirty"] for s in samples) * 4096 / MIB,
                     sim["peak_sampled"] / MIB, sim["peak_charged_bytes"] / MIB),
            "pauses": (final["throttle_events"], int(sim["pauses"])),
            "paused_s": (final["throttle_ms"] / 1000, sim["pauses_total_ms"] / 1000),
            "ops_s": (recorded, achieved),
            "fsyncs": (len(syncs), int(sim["fsyncs"])),
            "fsync_p50": (percentile(syncs, 50), sim["fsyncs_p50_ms"]),
            "fsync_p99": (percentile(syncs, 99), sim["fsyncs_p99_ms"]),
        }

    def table(self, workload):
        rows = [(name, self.rows[(workload, name)]) for name, _ in CONFIGS
                if (workload, name) in self.rows]
        if not rows:
            return ""
        head = "| %s | %s |" % (workload, " | ".join(
            "%s mount | sim" % n for n, _ in rows))
        lines = [head, "|---|" + "---:|---:|" * len(rows)]

        def row(label, key, fmt, check=False):
            cells = []
            for _, r in rows:
                m, s = r[key][0], r[key][1]
                mark = ""
                if check and r["exact"]:
                    mark = " (=)" if m == s else " (**differs**)"
                cells += [fmt % m, fmt % s + mark]
            lines.append("| %s | %s |" % (label, " | ".join(cells)))

        row("pages dirtied (nr_dirtied)", "dirtied", "%d", True)
        row("pages written (nr_written)", "written", "%d", True)
        row("MiB written to the backing file / device", "backing", "%.1f", True)
        row("peak charged MiB (1 s samples)", "peak", "%.1f")
        lines.append("| peak charged MiB, exact (sim) | %s |" % " | ".join(
            "| %.1f" % r["peak"][2] for _, r in rows))
        row("pauses", "pauses", "%d")
        row("time paused s (summed over writers)", "paused_s", "%.1f")
        row("writer ops/s (writers with 1% of the ops or more)", "ops_s", "%.0f")
        row("fsync + fdatasync", "fsyncs", "%d", True)
        row("fsync p50 ms", "fsync_p50", "%.3f")
        row("fsync p99 ms", "fsync_p99", "%.3f")
        extra = []
        for name, r in rows:
            extra.append("%s: %d records (%.1f MiB) over %.1f s, %.1f s of virtual"
                         " time in the replay (%.1f s wall); %d main writers; %s %.0f"
                         % (name, r["records"], r["trace_bytes"] / MIB, r["span"],
                            r["virtual_s"], r["sim_wall"], r["writers"],
                            "fio IOPS" if workload == "fio" else "pgbench tps",
                            r["rate"] or 0))
        return "\n".join(lines) + "\n\n" + "\n".join("- " + e for e in extra) + "\n"


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="sim-fidelity.py",
        description="A mount's counters against foliofs-sim's replay of its"
        " trace, for fio and pgbench, dirty_account=folio and page, each"
        " also with " + EXACT + ".")
    p.add_argument("-w", "--workload", action="append",
                   choices=("fio", "pgbench"), help="(default: both)")
    p.add_argument("-T", "--duration", type=pgcompare.positive_int, default=20,
                   help="seconds of fio and of pgbench -N (default 20)")
    p.add_argument("-O", "--output", default="/var/tmp/sim-fidelity-"
                   + time.strftime("%Y%m%d-%H%M%S"),
                   help="output directory (new or empty)")
    p.add_argument("-t", "--traces", default="/var/tmp/sim-fidelity-traces",
                   help="where the traces go (default %(default)s)")
    p.add_argument("-d", "--workdir", default="/var/tmp",
                   help="where the scratch directories go (default %(default)s)")
    a = p.parse_args(argv)
    a.workload = a.workload or ["fio", "pgbench"]
    a.traces = os.path.realpath(a.traces)
    return a


def main(argv):
    a = parse_args(argv)
    foliofs = os.path.realpath(os.environ.get(
        "FOLIOFS", os.path.join(pgcompare.REPO, "build", "foliofs")))
    sim = os.environ.get("FOLIOFS_SIM", os.path.join(os.path.dirname(foliofs),
                                                     "sim", "foliofs-sim"))
    for prog in (foliofs, sim):
        if not os.access(prog, os.X_OK):
            raise Failure("%s not found (build it, or set FOLIOFS / FOLIOFS_SIM)"
                          % prog)
    if "fio" in a.workload and not shutil.which("fio"):
        raise Failure("fio is not installed (apt-get install fio)")
    pgbin = pgcompare.find_pgbin()
    pgcompare.prepare_output(a.output)

    def on_signal(signum, frame):
        raise pgcompare.Interrupted(signum)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    fid = Fidelity(a, foliofs, sim, pgbin)
    load = [os.getloadavg()]
    for w in a.workload:
        fid.run_workload(w)
    load.append(os.getloadavg())
    text = ["# foliofs-sim against the mount, %s" % time.strftime("%Y-%m-%d %H:%M UTC",
                                                                  time.gmtime()),
            "", "foliofs %s, foliofs-sim %s; load average %s before, %s after" % (
                foliofs, sim, "%.2f %.2f %.2f" % load[0], "%.2f %.2f %.2f" % load[1]),
            "", "Mount: the stats log's last line (after the final writeback at"
            " unmount); peaks from its 1 s samples.  (=): a timing-free"
            " configuration (" + EXACT + ") where the two must agree.", ""]
    for w in a.workload:
        text += [fid.table(w)]
    text += ["Commands:", ""] + ["    " + c for c in fid.commands]
    report = "\n".join(text) + "\n"
    with open(os.path.join(fid.out, "fidelity.md"), "w") as f:
        f.write(report)
    print(report)
    return 0


if __name__ == "__main__":
    pgcompare.run_main(main)
