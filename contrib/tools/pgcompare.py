#!/usr/bin/python3
"""pgcompare.py: PostgreSQL under foliofs configurations, side by side.

The comparison of seed 000 (per-folio against per-page dirty charging under
pgbench simple-update), on one machine, in one command.  Each configuration
is a set of foliofs -o options (or `native`: a plain directory on the same
disk).  For each one the script mounts foliofs over its own scratch backing
directory, creates a cluster with data checksums (unless --no-checksums) and loads it once with
`pgbench -i`; then, ITERS times, every configuration in turn (the first one
rotating, so that drift of the machine hits all alike) starts its server,
runs `pgbench -N -M prepared` for SECONDS and stops it (a shutdown
checkpoint, which writes back what the run dirtied).  Only one server runs
at a time; every daemon stays mounted for the whole run and logs its stats
every second (-o stats_log).  The stats are also read right before and after
each pgbench run and after each stop, for exact per-iteration deltas.

Output (-O DIR): report.md (settings, the seed's tps table, the accounting
and throttling table), iterations.csv (one row per configuration and
iteration), samples.csv (every one-second stats sample, tagged with its
iteration and phase), tps.png, share2m.png (the share of the cache in
2 MiB folios after each run), dirty.png, pauses.png, and logs/.  For a
foliofs configuration, each iteration's row also holds the cache by file
class (pgbench_accounts, its primary key, pg_wal, the rest: folios by
size, bytes, the 2 MiB share, active bytes, referenced folios) after the
source step and after the run, from one read of .foliofs/folios each, and
the LRU lists' sizes after the run, to set beside what
contrib/kernel/pg-seed.py records of the kernel's.

--back-to-back runs each configuration's iterations one after the other on
one running server instead; -c with several counts (-c 8,256,1024) runs
every configuration at each, as configurations of their own (NAME-cN)
taking turns; --default-mount mounts with foliofs's defaults instead of
the common options below; --nofile raises the open-file limit of the
daemons, servers and pgbench (1,024 clients need more than 1,024
descriptors); --latency adds pgbench's latency percentiles (from its
per-transaction log); --count-failed counts failed transactions instead of
stopping the run at the first; the daemons' threads, descriptors and
resident memory are sampled every second of each run; --source runs a sequential scan or a VACUUM of
pgbench_accounts before each iteration (what builds 2 MiB folios in
PostgreSQL's life); --preset seed is the seed's scenario (issue 27): data
several times the cache, the scan before each iteration, back to back, the
2 x 2 of ra_model 6.16/6.17 and dirty_account folio/page.

--trace records each foliofs mount's trace (foliofsctl trace, for
foliofs-sim) from right after it mounts to right before it unmounts, the
database's load included, and writes traces.json: per configuration where
the trace is (trace-NAME.trace.gz in the report directory, or, above 64
MiB, trace-NAME-YYYYmmdd-HHMMSS.trace in --trace's DIR, by default the -d
directory), its mount's options, the unix time of its clock's origin, and
each iteration's pgbench run on that clock (contrib/lib/foliofs_trace.py).

As root, the daemons, servers and pgbench run as the unprivileged user
foliofs-test (created if missing; /dev/fuse is made 0666 for it).  On any
failure, ^C or SIGTERM, running servers are stopped, daemons unmounted and
the scratch directory removed (unless -k), and the exit status is non-zero.

A configuration may also be libfuse's passthrough_hp, the reference
userspace server, mounted the same way (as the same user) for peer figures
measured in the same run: `pthp` (its defaults), `pthp-direct` (direct I/O,
no kernel passthrough: every read and write reaches the server, as in
foliofs's cache=direct) and `pthp-direct-ring` (the same over FUSE over
io_uring: needs /sys/module/fuse/parameters/enable_uring set to Y).  Build
it outside the project from a libfuse snapshot and name it in PTHP.

Environment: FOLIOFS (daemon, default <repo>/build/foliofs, or foliofs on
PATH where that is missing, as when installed as foliofs-pgcompare), PGBIN
(PostgreSQL bindir, default /usr/lib/postgresql/15/bin, else
`pg_config --bindir`), PTHP (passthrough_hp, for the pthp configurations).
"""

import argparse
import csv
import glob
import datetime
import importlib.util
import json
import os
import pwd
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# The shared helpers: contrib/lib in the tree; installed (as
# foliofs-pgcompare), share/foliofs/python beside bin.
for _lib in (os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "lib"),
             os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "share",
                          "foliofs", "python")):
    if os.path.exists(os.path.join(_lib, "foliofs_tools.py")):
        sys.path.insert(0, _lib)
        break
from foliofs_tools import (  # noqa: E402
    BGWRITER_COUNTERS, BGWRITER_SQL, FILE_CLASSES, FUSERMOUNT, RELATION_SQL, bgwriter_delta, cache_by_class,
    data_file_classes, is_fuse_mounted, parse_folios, parse_stats, relation_classes,
    wait_mounted)
from foliofs_trace import MountTrace, find_tool, keep_trace  # noqa: E402
RUN_USER = "foliofs-test"
PAGE = 4096
MIB = 1 << 20

# Sized for a 2-core, 24 GiB machine: a scale-20 database (~300 MiB) is ten
# times the 32 MiB dirty limit, and 8 KiB page writes scattered over it
# dirty one block of a different 2 MiB folio each (folio_policy=fixed: the
# mount's default, kernel, would leave the tables pgbench -i wrote in
# 8 KiB folios), so per-folio charging reaches the limit with a few MiB
# really dirty while per-page charging stays under it.  The cache holds
# the whole database, so reads do not compete with writeback.
DEFAULTS = {"scale": 20, "iters": 10, "duration": 40, "clients": 8,
            "fillfactor": 90}
QUICK = {"iters": 3, "duration": 20}
COMMON_OPTS = "folio_size=2M,folio_policy=fixed,cache_size=2G,dirty_bytes=32M,throttle=bdp"
DEFAULT_CONFIGS = ("folio=dirty_account=folio", "page=dirty_account=page")
PG_CONF = ("shared_buffers=128MB", "max_wal_size=1GB")
# --preset seed: the seed's scenario (issue 27), on this machine's size.
# Data several times the cache (scale 100 is 1.6 GB, cache_size 512M), a
# sequential scan of pgbench_accounts before each iteration (the large-folio
# source: contrib/results/pg-folios-2026-12-05 finds that pgbench's own
# reads build no 2 MiB folio, a scan or a VACUUM of the table does),
# iterations back to back on one running server, and the 2 x 2 of readahead
# model and dirty accounting under the same thresholds.
SEED_PRESET = {
    "scale": 100, "iters": 8, "duration": 30, "clients": 16,
    "common": "folio_policy=kernel,readahead_kb=2048,cache_size=512M,"
              "dirty_bytes=64M,dirty_background_bytes=32M",
    "configs": ("6.16-folio=ra_model=6.16,dirty_account=folio",
                "6.16-page=ra_model=6.16,dirty_account=page",
                "6.17-folio=ra_model=6.17,dirty_account=folio",
                "6.17-page=ra_model=6.17,dirty_account=page"),
    "source": "seqscan",
    # The scan serial, as on the kernel's side (foliofs_tools.PG_SETTINGS):
    # a parallel one hands the table out in 1 MiB chunks to three
    # processes and builds no 2 MiB folio (ra-parallel-2026-12-07).
    "pg_conf": ("max_parallel_workers_per_gather=0",),
}
SEED_QUICK = {"scale": 20, "iters": 3, "duration": 10,
              "common": SEED_PRESET["common"].replace("cache_size=512M", "cache_size=128M")}
PRESETS = {"seed": SEED_PRESET}
# What --source runs before each iteration, as the server's superuser.
# reinit is not SQL: pgbench -i again before each iteration after the
# first, dropping and rebuilding the tables on the running server, as each
# run of the seed's reproducer does (contrib/kernel/pg-seed.py --source
# reinit; contrib/results/decay-kernel-2026-12-07).
SOURCES = {"none": None,
           "seqscan": "SELECT sum(abalance) FROM pgbench_accounts",
           "vacuum": "VACUUM pgbench_accounts",
           "reinit": "pgbench -i (after the first run)"}
# Options the script sets itself on every mount.
RESERVED_OPTS = ("stats_log", "stats_interval_ms")
# passthrough_hp configurations: SPEC -> its arguments.
PEERS = {"pthp": [],
         "pthp-direct": ["--direct-io", "--nopassthrough"],
         "pthp-direct-ring": ["--direct-io", "--nopassthrough", "-o", "io_uring"]}
URING_PARAM = "/sys/module/fuse/parameters/enable_uring"
STATS_INTERVAL_MS = 1000

# Counters whose per-iteration deltas go to iterations.csv: over the pgbench
# run (run_*) and from its start to the end of the server's stop (total_*).
COUNTERS = ("nr_dirtied", "nr_written", "nr_discharged", "backing_write_bytes",
            "backing_write_ios", "app_write_bytes", "throttle_events",
            "throttle_ms")

# Hang guards, not expectations.
TIMEOUT_MOUNT = 30
TIMEOUT_STEP = 600
TIMEOUT_UMOUNT = 600


class Failure(Exception):
    """A step failed; the message says which and why."""


class Interrupted(Exception):
    """SIGINT or SIGTERM: clean up and exit with 128 + signal."""

    def __init__(self, signum):
        super().__init__("interrupted by signal %d" % signum)
        self.signum = signum


def log(msg):
    sys.stderr.write("[%s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def now_ms():
    return int(time.time() * 1000)


# ---------------------------------------------------------------- options

def client_counts(text):
    """-c: one pgbench client count, or several separated by commas."""
    counts = [positive_int(t) for t in text.split(",")]
    if len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError("'%s' names a count twice" % text)
    return counts


def positive_int(text):
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v <= 0:
        raise argparse.ArgumentTypeError("'%s' is not a positive integer" % text)
    return v


def parse_opts(text):
    """'a=1,b,c=2' -> {'a': '1', 'b': None, 'c': '2'} (order kept)."""
    opts = {}
    for item in text.split(","):
        if not item:
            continue
        k, eq, v = item.partition("=")
        opts[k] = v if eq else None
    return opts


def join_opts(opts):
    return ",".join(k if v is None else "%s=%s" % (k, v) for k, v in opts.items())


class FoliofsHelp:
    """What `foliofs --help` lists: its -o option names, and the policies of
    each policy option (so a configuration can be named by a policy)."""

    def __init__(self, foliofs):
        try:
            r = subprocess.run([foliofs, "--help"], capture_output=True,
                               text=True, timeout=30)
        except OSError as e:
            raise Failure("cannot run %s --help: %s" % (foliofs, e))
        text = r.stdout + r.stderr
        self.options = set(re.findall(r"^\s+-o (\w+)", text, re.M))
        self.policies = {}      # policy name -> option that selects it
        key = None
        for line in text.splitlines():
            # "dirty accounting policies (dirty_account=):", and with
            # parameters "(dirty_account=; parameters: -o account.PARAM=N):"
            m = re.match(r"^\S.*\((\w+)=(?:\)|;.*\)):$", line)
            if m:
                key = m.group(1)
                continue
            m = re.match(r"^\s{4}(\w+)\s{2,}", line)
            if key and m:
                self.policies[m.group(1)] = key
            elif not line.strip():
                key = None
        # Throttle policies are listed in the option's own help line.
        m = re.search(r"-o throttle=NAME.*policy: (.*)$", text, re.M)
        if m:
            for name in re.findall(r"(\w+)(?: \([^)]*\))?(?:,|$)", m.group(1)):
                self.policies[name] = "throttle"
        if "dirty_account" not in self.options:
            raise Failure("%s --help lists no dirty_account option: not foliofs?"
                          % foliofs)


class Config:
    """One configuration: a name and its foliofs options (None: native or a
    passthrough_hp peer)."""

    def __init__(self, name, opts, peer=None):
        self.name = name
        self.opts = opts            # extra -o options, or None for native/peer
        self.peer = peer            # passthrough_hp's arguments, or None
        self.clients = None         # pgbench clients (set from -c)
        self.top = self.backing = self.mnt = self.sock = self.pgdata = None
        self.stats_log = None
        self.daemon = None          # Popen of foliofs -f while mounted
        self.daemon_log = None
        self.load_s = None
        self.trace = None           # MountTrace of the mount (--trace)

    @property
    def native(self):
        """A plain directory, nothing mounted."""
        return self.opts is None and self.peer is None

    @property
    def foliofs(self):
        """A foliofs mount (with stats)."""
        return self.opts is not None


def short_name(opts):
    """A name for an unnamed configuration: policy values alone, other
    options as key=value, joined by '+'."""
    parts = []
    for k, v in opts.items():
        if k in ("dirty_account", "throttle", "folio_policy") and v:
            parts.append(v)
        else:
            parts.append(k if v is None else "%s=%s" % (k, v))
    return "+".join(parts) or "foliofs"


def parse_config(spec, fhelp):
    """--config [NAME=]native|POLICY|OPTIONS -> Config."""
    where = "--config '%s'" % spec
    name = None
    body = spec
    head, eq, rest = spec.partition("=")
    if eq and head not in fhelp.options:
        name, body = head, rest
    peer = None
    if body == "native":
        opts = None
    elif body in PEERS:
        opts, peer = None, PEERS[body]
        if not os.environ.get("PTHP"):
            raise Failure("%s: set PTHP to libfuse's passthrough_hp binary" % where)
        if body.endswith("-ring") and not uring_enabled():
            raise Failure("%s: FUSE over io_uring needs %s set to Y (as root)"
                          % (where, URING_PARAM))
    elif body and "=" not in body and "," not in body and body in fhelp.policies:
        opts = {fhelp.policies[body]: body}
    elif body and "=" not in body and "," not in body and body not in fhelp.options:
        raise Failure("%s: '%s' is not 'native', a policy (%s) or a foliofs"
                      " option" % (where, body, ", ".join(sorted(fhelp.policies))))
    else:
        opts = parse_opts(body)
        for k in opts:
            if k in RESERVED_OPTS:
                raise Failure("%s: %s is set by the script" % (where, k))
    if name is None:
        if peer is not None:
            name = body
        elif opts is None:
            name = "native"
        elif not opts:
            raise Failure("%s: a configuration of the common options only"
                          " needs a name (NAME=)" % where)
        else:
            name = short_name(opts)
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.+=-]*$", name):
        raise Failure("%s: name '%s' may hold only letters, digits and _.+=-"
                      % (where, name))
    return Config(name, opts, peer)


def uring_enabled():
    try:
        with open(URING_PARAM) as f:
            return f.read().strip() == "Y"
    except OSError:
        return False


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="pgcompare.py",
        description="pgbench simple-update under foliofs configurations"
        " (per-folio against per-page dirty charging by default), with a"
        " Markdown report, CSVs and plots.",
        epilog="CONFIG is [NAME=]SPEC; SPEC is 'native' (a plain directory on"
        " the same disk), 'pthp', 'pthp-direct' or 'pthp-direct-ring'"
        " (libfuse's passthrough_hp named by PTHP: its defaults, direct I/O,"
        " direct I/O over FUSE over io_uring), a policy name (folio, page, block, strictlimit,"
        " none, ...: sets its option) or comma-separated foliofs -o options"
        " (added to the common ones, overriding them). Examples:"
        " --config folio --config page --config native;"
        " --config pinned=dirty_account=page,dirty_pinned_ratio=5;"
        " --config strict=dirty_account=folio,throttle=strictlimit."
        " Default: %s. Sized for 2 cores and 24 GiB: the default run takes"
        " about 15 minutes, --quick about 3." % " ".join(
            "--config " + c for c in DEFAULT_CONFIGS))
    p.add_argument("--config", action="append", metavar="CONFIG",
                   help="a configuration (repeat for more)")
    p.add_argument("-o", "--common", metavar="OPTIONS", default="",
                   help="foliofs -o options for every configuration, each"
                   " over the same option of the default %s (and of a"
                   " --preset's)" % COMMON_OPTS)
    p.add_argument("-s", "--scale", type=positive_int, metavar="SCALE",
                   help="pgbench scale factor (default %d)" % DEFAULTS["scale"])
    p.add_argument("-r", "--iters", type=positive_int, metavar="ITERS",
                   help="iterations (default %d, --quick %d)"
                   % (DEFAULTS["iters"], QUICK["iters"]))
    p.add_argument("-T", "--duration", type=positive_int, metavar="SECONDS",
                   help="seconds of each pgbench run (default %d, --quick %d)"
                   % (DEFAULTS["duration"], QUICK["duration"]))
    p.add_argument("-c", "--clients", type=client_counts, metavar="CLIENTS",
                   help="pgbench clients (default %d); several counts"
                   " separated by commas run every configuration at each,"
                   " as configurations NAME-cN" % DEFAULTS["clients"])
    p.add_argument("-j", "--threads", type=positive_int, metavar="THREADS",
                   help="pgbench threads (default min(CLIENTS, nproc))")
    p.add_argument("--default-mount", action="store_true",
                   help="mount with foliofs's defaults: not the common"
                   " options %s (-o still applies)" % COMMON_OPTS)
    p.add_argument("--nofile", type=positive_int, metavar="N",
                   help="open-file limit (RLIMIT_NOFILE) of the daemons, the"
                   " servers and pgbench (pgbench needs CLIENTS + 3; raising"
                   " the hard limit needs root)")
    p.add_argument("--latency", action="store_true",
                   help="latency percentiles of every run, from pgbench's"
                   " per-transaction log (-l; the log is deleted after)")
    p.add_argument("--count-failed", action="store_true",
                   help="count and report failed transactions (default: a"
                   " run with one stops the comparison)")
    p.add_argument("-F", "--fillfactor", type=positive_int, metavar="PCT",
                   help="pgbench -i fill factor (default %d, as the seed)"
                   % DEFAULTS["fillfactor"])
    p.add_argument("--pg-conf", action="append", metavar="NAME=VALUE",
                   default=[], help="server setting, over the defaults %s"
                   " (repeat for more)" % ", ".join(PG_CONF))
    p.add_argument("--no-checksums", dest="checksums", action="store_false",
                   help="initdb without --data-checksums (default: with, as the"
                   " seed's reproducer)")
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="a named scenario: 'seed' runs the seed's (scale 100,"
                   " cache_size 512M, a sequential scan before each of 8"
                   " iterations of 30 s back to back, 16 clients, the 2 x 2 of"
                   " ra_model 6.16/6.17 and dirty_account folio/page); options"
                   " given beside it win, each over the same one of the"
                   " preset's (-o cache_size=1G changes cache_size and keeps"
                   " the preset's other foliofs options); with --quick: scale"
                   " 20, cache_size 128M, 3 iterations of 10 s")
    p.add_argument("--back-to-back", action="store_true",
                   help="each configuration's iterations one after the other"
                   " on one running server (started before the first, stopped"
                   " after the last), configurations in turn; default: the"
                   " configurations take turns, each server stopped after"
                   " each run")
    p.add_argument("--source", choices=sorted(SOURCES),
                   help="run before each iteration, on the running server:"
                   " seqscan (%s), vacuum (%s), reinit (pgbench -i again before"
                   " each iteration after the first, as the seed's reproducer"
                   " does) or none (the default)"
                   % (SOURCES["seqscan"], SOURCES["vacuum"]))
    p.add_argument("--quick", action="store_true",
                   help="%d iterations of %d s (about 3 minutes)"
                   % (QUICK["iters"], QUICK["duration"]))
    p.add_argument("-O", "--output", metavar="DIR",
                   help="report directory (default"
                   " /var/tmp/pgcompare-YYYYmmdd-HHMMSS); must be new or empty")
    p.add_argument("-d", "--workdir", metavar="DIR", default="/var/tmp",
                   help="directory on the disk under test; a scratch"
                   " directory is made in it (default /var/tmp)")
    p.add_argument("-k", "--keep", action="store_true",
                   help="keep the scratch directory (clusters, backing files)")
    p.add_argument("--trace", nargs="?", const="", metavar="DIR",
                   help="record each foliofs mount's trace over the whole run"
                   " (for foliofs-sim): gzipped into the report directory, or"
                   " into DIR (default: -d's) when above 64 MiB; where, and"
                   " each run's window on its clock, in traces.json")
    a = p.parse_args(argv)
    a.preset_common = ""
    if a.preset:
        preset = dict(PRESETS[a.preset], **(SEED_QUICK if a.quick else {}))
        for key in ("scale", "iters", "duration", "clients", "source"):
            if getattr(a, key) is None:
                setattr(a, key, preset[key])
        a.preset_common = preset["common"]
        # The preset's server settings first: --pg-conf ones override them.
        a.pg_conf = list(preset.get("pg_conf", ())) + a.pg_conf
        if not a.config:
            a.config = list(preset["configs"])
        a.back_to_back = True
    if a.source is None:
        a.source = "none"
    if isinstance(a.clients, int):
        a.clients = [a.clients]         # a preset's
    for key, val in DEFAULTS.items():
        if getattr(a, key) is None:
            setattr(a, key, QUICK[key] if a.quick and key in QUICK else val)
    if isinstance(a.clients, int):
        a.clients = [a.clients]         # the default
    a.threads_given = a.threads is not None
    for n in a.clients:
        if a.threads_given and a.threads > n:
            p.error("argument -j/--threads: %d threads for %d clients (pgbench"
                    " needs THREADS <= CLIENTS)" % (a.threads, n))
    if a.threads is None:
        a.threads = min(a.clients[0], os.cpu_count() or 1)
    for conf in a.pg_conf:
        if not re.match(r"^\w+=\S.*$", conf):
            p.error("argument --pg-conf: '%s' is not NAME=VALUE" % conf)
    if a.output is None:
        a.output = "/var/tmp/pgcompare-" + time.strftime("%Y%m%d-%H%M%S")
    return a


# -------------------------------------------------------------- processes

class Runner:
    """Runs programs as the unprivileged user (or as ourselves if not
    root), each in its own session so that a ^C reaches only this script,
    which then stops them in order."""

    def __init__(self, pgbin, cwd, nofile=None):
        self.pgbin = pgbin
        self.cwd = cwd
        self.nofile = nofile        # RLIMIT_NOFILE of what it starts, or None
        self.user = None
        self.env = dict(os.environ, LC_ALL="C", LANG="C", TZ="UTC")
        for k in ("PGHOST", "PGPORT", "PGUSER", "PGDATA", "PGDATABASE",
                  "PGOPTIONS", "PGSERVICE", "PGPASSFILE"):
            self.env.pop(k, None)
        if os.geteuid() == 0:
            try:
                pwd.getpwnam(RUN_USER)
            except KeyError:
                self.check(["useradd", "-M", "-s", "/usr/sbin/nologin",
                            RUN_USER], "useradd %s" % RUN_USER, as_user=False)
            os.chmod("/dev/fuse", 0o666)
            self.user = pwd.getpwnam(RUN_USER)
            self.env.update(HOME=cwd, USER=RUN_USER, LOGNAME=RUN_USER)

    def _preexec(self, as_user=True):
        pw = self.user if as_user else None
        nofile = self.nofile
        if pw is None and nofile is None:
            return None

        def drop():
            # Before dropping root, who may raise the hard limit.
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
            if pw is not None:
                os.initgroups(pw.pw_name, pw.pw_gid)
                os.setgid(pw.pw_gid)
                os.setuid(pw.pw_uid)
        return drop

    def chown(self, path):
        if self.user is not None:
            os.chown(path, self.user.pw_uid, self.user.pw_gid)

    def prog(self, name):
        return os.path.join(self.pgbin, name)

    def popen(self, cmd, out, as_user=True):
        return subprocess.Popen(cmd, cwd=self.cwd, env=self.env,
                                stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT,
                                start_new_session=True,
                                preexec_fn=self._preexec(as_user))

    def run(self, cmd, timeout=TIMEOUT_STEP, stdin=None, as_user=True):
        """Run CMD to its end; (returncode, output)."""
        try:
            r = subprocess.run(cmd, cwd=self.cwd, env=self.env, input=stdin,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=None if stdin is not None else subprocess.DEVNULL,
                               start_new_session=True, timeout=timeout,
                               preexec_fn=self._preexec(as_user))
        except subprocess.TimeoutExpired as e:
            out = e.output.decode(errors="replace") if e.output else ""
            return -1, out + "\n(timed out after %d s)" % timeout
        except OSError as e:
            return -1, "%s: %s" % (cmd[0], e)
        return r.returncode, r.stdout.decode(errors="replace")

    def check(self, cmd, what, timeout=TIMEOUT_STEP, stdin=None, as_user=True):
        rc, out = self.run(cmd, timeout=timeout, stdin=stdin, as_user=as_user)
        if rc != 0:
            raise Failure("%s failed (%s):\n%s" % (
                what, "exit %d" % rc if rc >= 0 else "not run", out[-4000:]))
        return out


def find_pgbin():
    cands = [os.environ.get("PGBIN"), "/usr/lib/postgresql/15/bin"]
    try:
        r = subprocess.run(["pg_config", "--bindir"], capture_output=True,
                           text=True, timeout=10)
        if r.returncode == 0:
            cands.append(r.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    need = ("initdb", "pg_ctl", "postgres", "pgbench")
    for d in cands:
        if d and all(os.access(os.path.join(d, p), os.X_OK) for p in need):
            return d
    raise Failure("PostgreSQL programs (%s) not found: set PGBIN or install"
                  " postgresql-15" % ", ".join(need))


class Comparison:
    def __init__(self, args, configs, common, foliofs, pgbin):
        self.a = args
        self.configs = configs
        self.common = common
        self.foliofs = foliofs
        self.out = os.path.realpath(args.output)
        os.makedirs(args.workdir, exist_ok=True)
        self.scratch = tempfile.mkdtemp(prefix="pgcompare.",
                                        dir=os.path.realpath(args.workdir))
        try:
            os.chmod(self.scratch, 0o755)
            self.r = Runner(pgbin, self.scratch, args.nofile)
            self.r.chown(self.scratch)
            self.logs = os.path.join(self.scratch, "logs")
            self.mkdir(self.logs)
        except BaseException:
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise
        self.pg_conf = dict(c.partition("=")[::2] for c in PG_CONF)
        self.pg_conf.update(c.partition("=")[::2] for c in args.pg_conf)
        self.running = None         # Config whose server is up
        self.iterations = []        # dicts, one per config and iteration
        self.wall_s = None

    def mkdir(self, path, mode=0o755):
        os.mkdir(path, mode)
        self.r.chown(path)

    def setting_lines(self):
        pg = self.r.run([self.r.prog("postgres"), "--version"], as_user=False)[1]
        src = subprocess.run(["findmnt", "-rn", "-T", self.scratch, "-o",
                              "FSTYPE,SOURCE"], capture_output=True, text=True)
        rev = subprocess.run(["git", "-C", REPO, "describe", "--always",
                              "--dirty"], capture_output=True, text=True)
        lines = [
            "pgbench -i -s %d -F %d once per configuration; then %s of"
            " pgbench -N -M prepared -c %s -j %s -T %d%s, %s%s"
            % (self.a.scale, self.a.fillfactor, plural(self.a.iters, "iteration"),
               ",".join(map(str, self.a.clients)),
               ",".join(str(self.threads(n)) for n in self.a.clients),
               self.a.duration, " -l (latency percentiles)" if self.a.latency else "",
               "each configuration's back to back on one running server,"
               " configurations in turn" if self.a.back_to_back else
               "configurations taking turns (the first rotating), each server"
               " stopped after its run",
               "" if self.a.source == "none" else
               "; before each run: " + SOURCES[self.a.source]),
            "server: %s; %s; fsync on, %s, Unix socket"
            % (pg.strip(), ", ".join("%s=%s" % kv for kv in self.pg_conf.items()),
               "data checksums" if self.a.checksums else "no data checksums"),
            "foliofs %s (source tree at %s), common options: %s; stats every %d ms"
            % (self.foliofs, rev.stdout.strip() or "?", join_opts(self.common),
               STATS_INTERVAL_MS),
            "disk: %s (%s)" % (self.scratch, src.stdout.strip().splitlines()[-1]
                               if src.stdout.strip() else "?"),
            "machine: %d CPUs, %.1f GiB RAM, kernel %s" % (
                os.cpu_count() or 0,
                os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30),
                os.uname().release),
            "run as: %s%s" % (self.r.user.pw_name if self.r.user else
                              pwd.getpwuid(os.getuid()).pw_name,
                              "; open-file limit %d" % self.a.nofile
                              if self.a.nofile else ""),
        ]
        for c in self.configs:
            lines.append("configuration %s: %s" % (
                c.name, "plain directory (native)" if c.native else
                "%s %s" % (os.environ["PTHP"], " ".join(c.peer)) if c.peer is not None
                else "foliofs -o " + join_opts(self.mount_opts(c))))
        return lines

    def threads(self, clients):
        """pgbench -j for CLIENTS: -j as given, else min(CLIENTS, nproc)."""
        if self.a.threads_given:
            return self.a.threads
        return min(clients, os.cpu_count() or 1)

    def mount_opts(self, c):
        opts = dict(self.common)
        opts.update(c.opts)
        return opts

    # ------------------------------------------------------------ mounts

    def mount(self, c):
        if c.peer is not None:
            cmd = [os.environ["PTHP"], "--foreground", *c.peer, c.backing, c.mnt]
        else:
            opts = self.mount_opts(c)
            opts.update(stats_log=c.stats_log,
                        stats_interval_ms=str(STATS_INTERVAL_MS))
            cmd = [self.foliofs, "-f", "-o", join_opts(opts), c.backing, c.mnt]
        log("%s: mounting: %s" % (c.name, " ".join(cmd)))
        c.daemon_log = open(os.path.join(self.logs, "foliofs-%s.log" % c.name), "wb")
        c.daemon = self.r.popen(cmd, c.daemon_log)
        try:
            wait_mounted(c.mnt, c.daemon, TIMEOUT_MOUNT)
        except RuntimeError:
            if c.daemon.poll() is None:
                raise Failure("%s: %s not mounted after %d s"
                              % (c.name, c.mnt, TIMEOUT_MOUNT)) from None
            c.daemon = None
            raise Failure("%s: %s exited before the mount appeared:\n%s"
                          % (c.name, os.path.basename(cmd[0]),
                             self.daemon_output(c))) from None
        if self.a.trace is not None and c.foliofs:
            self.trace_start(c)

    def trace_start(self, c):
        """Record C's trace from now on, into the scratch directory (the
        daemon writes it, as the mount's user)."""
        ctl = find_tool(self.foliofs, "foliofsctl", "FOLIOFSCTL")
        c.trace = MountTrace(ctl, c.mnt, os.path.join(self.scratch, "trace-%s.trace" % c.name),
                             lambda cmd: self.r.check(cmd, "%s: %s" % (c.name, " ".join(
                                 os.path.basename(x) for x in cmd[:3])), timeout=60))
        c.trace.start()
        log("%s: recording its trace" % c.name)

    def daemon_output(self, c):
        with open(os.path.join(self.logs, "foliofs-%s.log" % c.name),
                  errors="replace") as f:
            return f.read()[-4000:]

    def umount(self, c, clean=True):
        """Unmount C; the daemon writes everything back and must exit 0
        (when CLEAN; otherwise it is killed if it does not exit)."""
        if c.daemon is None:
            return
        if is_fuse_mounted(c.mnt):
            rc, out = self.r.run([FUSERMOUNT, "-u", c.mnt], timeout=60)
            if rc != 0:
                if clean:
                    raise Failure("%s: fusermount3 -u failed: %s" % (c.name, out))
                self.r.run([FUSERMOUNT, "-u", "-z", c.mnt], timeout=60)
        try:
            rc = c.daemon.wait(TIMEOUT_UMOUNT if clean else 60)
        except subprocess.TimeoutExpired:
            c.daemon.kill()
            rc = c.daemon.wait()
        c.daemon = None
        c.daemon_log.close()
        if clean and rc != 0:
            raise Failure("%s: foliofs exited with status %d after unmount:\n%s"
                          % (c.name, rc, self.daemon_output(c)))

    def check_daemon(self, c):
        if c.native:
            return
        if c.daemon.poll() is not None or not is_fuse_mounted(c.mnt):
            raise Failure("%s: the foliofs daemon died or the mount is gone:\n%s"
                          % (c.name, self.daemon_output(c)))

    def cache_classes(self, c):
        """C's cache by file class now (foliofs_tools.cache_by_class()), as
        JSON; "" but for foliofs.  One read of .foliofs/folios (as the
        mount's user: the file is theirs alone); the relation files named by
        the running server; the files' inode numbers from the backing
        directory (the mount's are the backing files' st_ino, and root may
        not look through a mount without allow_other), walked before and
        after the read so that a WAL segment made or removed meanwhile is
        named."""
        if not c.foliofs:
            return ""
        data = os.path.join(c.backing, os.path.relpath(c.pgdata, c.mnt))
        rels = relation_classes(self.psql(c, RELATION_SQL, "naming the relation files"), data)
        classes = data_file_classes(data, rels)
        text = self.r.check(["cat", os.path.join(c.mnt, ".foliofs", "folios")],
                            "%s: reading .foliofs/folios" % c.name, timeout=60)
        classes.update(data_file_classes(data, rels))
        return json.dumps(cache_by_class(parse_folios(text), classes), sort_keys=True)

    def snapshot(self, c):
        """The stats now, read through the mount as its user; {} but for
        foliofs."""
        if not c.foliofs:
            return {}
        out = self.r.check(["cat", os.path.join(c.mnt, ".foliofs", "stats")],
                           "%s: reading .foliofs/stats" % c.name, timeout=60)
        snap = parse_stats(out)
        snap["unix_ms"] = now_ms()
        return snap

    # ----------------------------------------------------------- servers

    def pg_init(self, c):
        checksums = ["--data-checksums"] if self.a.checksums else []
        log("%s: initdb %s" % (c.name, " ".join(checksums + [c.pgdata])))
        self.r.check([self.r.prog("initdb")] + checksums + ["-D", c.pgdata,
                      "-U", "postgres", "--auth=trust", "--locale=C",
                      "--encoding=UTF8"], "%s: initdb" % c.name)
        conf = ["", "# pgcompare.py: the same for every configuration",
                "listen_addresses = ''", "unix_socket_directories = '%s'" % c.sock,
                "port = 5432"]
        conf += ["%s = '%s'" % kv for kv in self.pg_conf.items()]
        self.r.check(["sh", "-c", 'cat >> "$1"', "sh",
                      os.path.join(c.pgdata, "postgresql.conf")],
                     "%s: writing postgresql.conf" % c.name,
                     stdin=("\n".join(conf) + "\n").encode())

    def server_log(self, c):
        return os.path.join(self.logs, "server-%s.log" % c.name)

    def tail_server_log(self, c):
        try:
            with open(self.server_log(c), errors="replace") as f:
                return "".join(f.readlines()[-30:])
        except OSError:
            return ""

    def pg_start(self, c):
        self.running = c
        rc, out = self.r.run([self.r.prog("pg_ctl"), "start", "-w", "-t", "300",
                              "-D", c.pgdata, "-l", self.server_log(c)])
        if rc != 0:
            raise Failure("%s: the server did not start: %s\n%s"
                          % (c.name, out, self.tail_server_log(c)))

    def psql(self, c, sql, what):
        """SQL run by psql on C's running server as its superuser; the
        output (-At: unaligned, tuples only)."""
        return self.r.check([self.r.prog("psql"), "-X", "-q", "-At", "-h", c.sock,
                             "-p", "5432", "-U", "postgres", "-d", "postgres",
                             "-v", "ON_ERROR_STOP=1", "-c", sql],
                            "%s: %s" % (c.name, what), timeout=TIMEOUT_STEP)

    def pg_stop(self, c):
        rc, out = self.r.run([self.r.prog("pg_ctl"), "stop", "-m", "fast", "-w",
                              "-t", str(TIMEOUT_STEP), "-D", c.pgdata])
        if rc != 0:
            raise Failure("%s: the server did not stop: %s\n%s"
                          % (c.name, out, self.tail_server_log(c)))
        self.running = None

    def pgbench(self, c, args, what, logname):
        cmd = [self.r.prog("pgbench"), "-h", c.sock, "-p", "5432", "-U",
               "postgres", *args, "postgres"]
        rc, out = self.r.run(cmd, timeout=self.a.duration + TIMEOUT_STEP)
        with open(os.path.join(self.logs, logname), "w") as f:
            f.write("$ %s\n%s" % (" ".join(cmd), out))
        if rc != 0:
            raise Failure("%s: %s failed (exit %d):\n%s\n%s" % (
                c.name, what, rc, out[-3000:], self.tail_server_log(c)))
        return out

    def load(self, c):
        self.pg_start(c)
        log("%s: pgbench -i -s %d -F %d" % (c.name, self.a.scale, self.a.fillfactor))
        t0 = time.monotonic()
        self.pgbench(c, ["-i", "-s", str(self.a.scale), "-F",
                         str(self.a.fillfactor)], "pgbench -i",
                     "pgbench-init-%s.log" % c.name)
        self.pg_stop(c)
        c.load_s = time.monotonic() - t0

    def iteration(self, c, it, position, stop=True):
        """One pgbench run of C (its server started if it is not running,
        the --source step first); the server stopped after it if STOP."""
        self.check_daemon(c)
        if self.running is not c:
            self.pg_start(c)
        if self.a.source == "reinit":
            if it > 1:
                self.pgbench(c, ["-i", "-q", "-s", str(self.a.scale), "-F",
                                 str(self.a.fillfactor)], "pgbench -i (reinit)",
                             "pgbench-reinit-%s-%d.log" % (c.name, it))
        elif SOURCES[self.a.source]:
            self.psql(c, SOURCES[self.a.source], self.a.source)
        source_classes = self.cache_classes(c)
        before = self.snapshot(c)
        args = ["-N", "-M", "prepared", "-c", str(c.clients),
                "-j", str(self.threads(c.clients)), "-T", str(self.a.duration)]
        prefix = os.path.join(self.scratch, "txlog-%s-%d" % (c.name, it))
        if self.a.latency:
            args += ["-l", "--log-prefix", prefix]
        bg0 = self.psql(c, BGWRITER_SQL, "reading pg_stat_bgwriter")
        sampler = DaemonSampler(c.daemon.pid if c.foliofs else None)
        start = now_ms()
        try:
            out = self.pgbench(c, args, "pgbench -N", "pgbench-%s-%d.log" % (c.name, it))
        finally:
            sampler.stop()
        end = now_ms()
        bg1 = self.psql(c, BGWRITER_SQL, "reading pg_stat_bgwriter")
        after_run = self.snapshot(c)
        run_classes = self.cache_classes(c)
        if stop:
            self.pg_stop(c)
        after_stop = self.snapshot(c)
        stop_end = now_ms()
        self.check_daemon(c)
        row = {"config": c.name, "iteration": it, "position": position,
               "start_unix_ms": start, "end_unix_ms": end,
               "stop_end_unix_ms": stop_end}
        row.update(parse_pgbench(out, c.name, self.a.count_failed))
        row["clients"] = c.clients
        if self.a.latency:
            row.update(latency_percentiles(prefix, c.name))
        row.update(sampler.peaks())
        row["transport"] = self.transport(c, before, after_run)
        # The share of the cache in 2 MiB folios after the run.
        row["share_2m"] = (after_run.get("folios_2048k", 0) * 2 * MIB
                           / after_run["cache_bytes"]) if after_run.get("cache_bytes") else ""
        # The cache's folios by size after the run, 4 KiB to 2 MiB, as
        # contrib/kernel/pg-seed.py reports the kernel's.
        row["cached_folios"] = " ".join(
            str(after_run.get("folios_%dk" % (4 << o), 0)) for o in range(10)
        ) if after_run.get("cache_bytes") else ""
        for k in COUNTERS:
            run = after_run.get(k, 0) - before.get(k, 0) if before else ""
            tot = after_stop.get(k, 0) - before.get(k, 0) if before else ""
            row["run_" + k] = run
            row["total_" + k] = tot
        # The cache by file class after the source step and after the run,
        # and the LRU lists after the run (.foliofs/stats).
        row["source_by_class"] = source_classes
        row["run_by_class"] = run_classes
        for k in ("active_bytes", "inactive_bytes"):
            row[k] = after_run.get(k, "")
        # Who wrote shared buffers out during the run (pg_stat_bgwriter).
        row["bgwriter"] = json.dumps(bgwriter_delta(bg0, bg1), sort_keys=True)
        self.iterations.append(row)
        log("%s: iteration %d: %.1f tps, %d failed%s%s" % (
            c.name, it, row["tps"], row["failed"],
            ", p99 %.1f ms" % row["lat_p99_ms"] if self.a.latency else "",
            "" if not c.foliofs else
            ", %d pauses (%.1f s); daemon: %d threads, %d fds, %.0f MiB; cached %s" % (
                row["run_throttle_events"], row["run_throttle_ms"] / 1000,
                row["daemon_threads"], row["daemon_fds"],
                row["daemon_rss_kib"] / 1024, class_summary(run_classes))))

    @staticmethod
    def transport(c, before, after):
        """What the run's requests came over: foliofs counts the requests it
        served from io_uring entries (uring=auto takes the ring whenever
        the fuse module offers it, so the options alone do not say);
        passthrough_hp's is its arguments'."""
        if c.native:
            return ""
        if c.peer is not None:
            return "io_uring" if "io_uring" in c.peer else "/dev/fuse"
        ring = after.get("fuse_uring_requests", 0) - before.get("fuse_uring_requests", 0)
        return "io_uring" if ring > 0 else "/dev/fuse"

    def transport_lines(self):
        """One settings line per FUSE configuration: the transport its runs
        served over (more than one if it changed between runs)."""
        lines = []
        for c in self.configs:
            seen = sorted({r["transport"] for r in self.iterations
                           if r["config"] == c.name and r.get("transport")})
            if seen:
                lines.append("configuration %s served over %s" % (c.name, " and ".join(seen)))
        return lines

    # --------------------------------------------------------------- run

    def make_dirs(self):
        """Each configuration's directories in the scratch directory:
        socket, and backing, mount point and stats log (or the data
        directory of native)."""
        for c in self.configs:
            c.top = os.path.join(self.scratch, c.name)
            self.mkdir(c.top)
            c.sock = os.path.join(c.top, "sock")
            self.mkdir(c.sock, 0o700)
            if c.native:
                c.pgdata = os.path.join(c.top, "pgdata")
                continue
            c.backing = os.path.join(c.top, "backing")
            c.mnt = os.path.join(c.top, "mnt")
            self.mkdir(c.backing)
            self.mkdir(c.mnt)
            c.pgdata = os.path.join(c.mnt, "pgdata")
            if c.foliofs:
                c.stats_log = os.path.join(self.logs, "stats-%s.jsonl" % c.name)

    def run(self):
        t0 = time.monotonic()
        self.make_dirs()
        # Every mount first: a bad option fails before anything is loaded.
        for c in self.configs:
            if not c.native:
                self.mount(c)
        for c in self.configs:
            self.pg_init(c)
            self.load(c)
        n = len(self.configs)
        if self.a.back_to_back:
            for pos, c in enumerate(self.configs, 1):
                for it in range(1, self.a.iters + 1):
                    self.iteration(c, it, pos, stop=it == self.a.iters)
        else:
            for it in range(1, self.a.iters + 1):
                k = (it - 1) % n
                for pos, c in enumerate(self.configs[k:] + self.configs[:k], 1):
                    self.iteration(c, it, pos)
        for c in self.configs:
            if c.trace is not None:
                try:
                    c.trace.stop()
                except (RuntimeError, ValueError) as e:
                    raise Failure("%s: --trace: %s" % (c.name, e)) from None
            if not c.native:
                log("%s: unmounting (the daemon writes back and syncs)" % c.name)
                self.umount(c)
        self.wall_s = time.monotonic() - t0

    def cleanup(self, ok):
        """Stop what runs, unmount, copy the logs out, remove the scratch
        directory (unless -k).  Never raises."""
        if self.running is not None:
            c = self.running
            log("%s: stopping the server" % c.name)
            self.r.run([self.r.prog("pg_ctl"), "stop", "-m", "immediate", "-w",
                        "-t", "60", "-D", c.pgdata], timeout=90)
            self.running = None
        for c in self.configs:
            if c.daemon is not None:
                log("%s: unmounting" % c.name)
                try:
                    self.umount(c, clean=False)
                except (Failure, OSError) as e:
                    log(str(e))
        try:
            dst = os.path.join(self.out, "logs")
            shutil.copytree(self.logs, dst, dirs_exist_ok=True)
            if not ok:
                log("logs in %s" % dst)
        except OSError as e:
            log("could not copy the logs to %s: %s" % (self.out, e))
        if self.a.keep:
            log("kept %s" % self.scratch)
        elif any(is_fuse_mounted(c.mnt) for c in self.configs if c.mnt):
            log("a mount is still there: kept %s" % self.scratch)
        else:
            shutil.rmtree(self.scratch, ignore_errors=True)


def class_summary(text):
    """A cache_classes() value in a few words: MiB and the 2 MiB share of
    each class present."""
    by = json.loads(text) if text else {}
    return ", ".join("%s %.0f MiB (%.0f%% 2M)" % (k, by[k]["bytes"] / MIB,
                                                  100 * by[k]["share_2m"])
                     for k in FILE_CLASSES if k in by) or "nothing"


class DaemonSampler:
    """The largest thread count, descriptor count and resident memory of
    process PID (None: nothing), read from /proc once a second until
    stop(), on a thread of its own."""

    FIELDS = ("daemon_threads", "daemon_fds", "daemon_rss_kib")

    def __init__(self, pid):
        self.pid = pid
        self.max = dict.fromkeys(self.FIELDS, 0)
        self.done = threading.Event()
        self.thread = None
        if pid is not None:
            self.sample()
            self.thread = threading.Thread(target=self.loop, daemon=True)
            self.thread.start()

    def sample(self):
        try:
            with open("/proc/%d/status" % self.pid) as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
            fds = len(os.listdir("/proc/%d/fd" % self.pid))
        except OSError:
            return      # exited: check_daemon() says so
        now = {"daemon_threads": int(status["Threads"]),
               "daemon_fds": fds,
               "daemon_rss_kib": int(status["VmRSS"].split()[0])}
        for k, v in now.items():
            self.max[k] = max(self.max[k], v)

    def loop(self):
        while not self.done.wait(1.0):
            self.sample()

    def stop(self):
        self.done.set()
        if self.thread is not None:
            self.thread.join()
            self.sample()

    def peaks(self):
        return dict(self.max) if self.pid is not None else dict.fromkeys(self.FIELDS, "")


LATENCY_PERCENTILES = (("lat_p50_ms", 50), ("lat_p90_ms", 90), ("lat_p99_ms", 99),
                       ("lat_p999_ms", 99.9))


def latency_percentiles(prefix, name):
    """Percentiles and maximum of the latencies in pgbench's per-transaction
    logs PREFIX.* (the third field, in microseconds; a failed transaction
    has a word there and is left out), which are deleted."""
    lat = []
    files = glob.glob(glob.escape(prefix) + ".*")
    for path in files:
        with open(path) as f:
            for line in f:
                fields = line.split()
                if len(fields) > 2 and fields[2].isdigit():
                    lat.append(int(fields[2]))
        os.unlink(path)
    if not lat:
        raise Failure("%s: pgbench's transaction log (%s.*) holds no transaction"
                      % (name, prefix))
    lat.sort()
    row = {k: lat[min(len(lat) - 1, int(len(lat) * q / 100))] / 1000
           for k, q in LATENCY_PERCENTILES}
    row["lat_max_ms"] = lat[-1] / 1000
    return row


def parse_pgbench(out, name, count_failed=False):
    def grab(pattern, conv=float):
        m = re.search(pattern, out, re.M)
        if not m:
            raise Failure("%s: pgbench printed no '%s' line:\n%s"
                          % (name, pattern, out[-2000:]))
        return conv(m.group(1))
    row = {"tps": grab(r"^tps = ([0-9.]+)"),
           "transactions": grab(r"^number of transactions actually processed:"
                                r" (\d+)", int),
           "failed": grab(r"^number of failed transactions: (\d+)", int),
           "latency_avg_ms": grab(r"^latency average = ([0-9.]+) ms")}
    if row["failed"] and not count_failed:
        raise Failure("%s: pgbench: %d failed transactions" % (name, row["failed"]))
    return row


# ----------------------------------------------------------------- report

def read_samples(cmp):
    """Every stats-log line of every foliofs configuration, tagged with the
    iteration and phase its unix time falls in: 'run' (pgbench), 'stop'
    (the server's shutdown checkpoint after it), 'idle' otherwise."""
    rows, keys = [], []
    for c in cmp.configs:
        if not c.foliofs:
            continue
        wins = [r for r in cmp.iterations if r["config"] == c.name]
        with open(c.stats_log) as f:
            for n, line in enumerate(f, 1):
                try:
                    s = json.loads(line)
                except ValueError:
                    raise Failure("%s: line %d of %s is not JSON: %r"
                                  % (c.name, n, c.stats_log, line[:200]))
                for k in s:
                    if k not in keys:
                        keys.append(k)
                it, phase = "", "idle"
                for w in wins:
                    if w["start_unix_ms"] <= s["unix_ms"] < w["end_unix_ms"]:
                        it, phase = w["iteration"], "run"
                    elif w["end_unix_ms"] <= s["unix_ms"] < w["stop_end_unix_ms"]:
                        it, phase = w["iteration"], "stop"
                rows.append(dict(s, config=c.name, iteration=it, phase=phase))
    return rows, keys


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def per_second(samples, key):
    """(sample, delta of KEY per second since the previous sample) for
    consecutive samples of one configuration."""
    out = []
    for prev, cur in zip(samples, samples[1:]):
        dt = (cur["time_ms"] - prev["time_ms"]) / 1000
        if dt > 0:
            out.append((cur, (cur[key] - prev[key]) / dt))
    return out


def run_timeline(cmp, c, samples):
    """Run-phase samples of C on one axis: seconds of pgbench time, the
    iterations of C laid end to end.  Returns (xs, samples, boundaries)."""
    offset, bounds, starts = 0.0, [], {}
    for r in cmp.iterations:
        if r["config"] == c.name:
            starts[r["iteration"]] = (offset, r["start_unix_ms"])
            offset += (r["end_unix_ms"] - r["start_unix_ms"]) / 1000
            bounds.append(offset)
    xs, picked = [], []
    for s in samples:
        if s["phase"] == "run":
            off, t0 = starts[s["iteration"]]
            xs.append(off + (s["unix_ms"] - t0) / 1000)
            picked.append(s)
    return xs, picked, bounds[:-1]


def summarize_tps(name, tps):
    """The tps figures of one configuration's iterations, in order."""
    half = len(tps) // 2 or 1
    mean = statistics.mean(tps)
    return {"name": name, "tps": tps, "avg": mean, "min": min(tps), "max": max(tps),
            # One iteration has no spread: no CV (None), not 0.00%.
            "cv": statistics.stdev(tps) / mean * 100 if len(tps) > 1 and mean else None,
            "first": statistics.mean(tps[:half]),
            "second": statistics.mean(tps[half:]) if tps[half:] else None}


def summarize(cmp, samples):
    out = []
    for c in cmp.configs:
        its = [r for r in cmp.iterations if r["config"] == c.name]
        tps = [r["tps"] for r in sorted(its, key=lambda r: r["iteration"])]
        s = dict(summarize_tps(c.name, tps), foliofs=c.foliofs, plain=c.native)
        if c.foliofs:
            tot = {k: sum(r["total_" + k] for r in its) for k in COUNTERS}
            run = {k: sum(r["run_" + k] for r in its) for k in COUNTERS}
            mine = [x for x in samples if x["config"] == c.name]
            runs = [x for x in mine if x["phase"] == "run"]
            steps = [(x, v) for x, v in per_second(mine, "throttle_ms")
                     if x["phase"] == "run"]
            # `pause` is the length of the last pause taken, which may be
            # long past: read it only where a pause was taken since the
            # previous sample.
            fresh = [x["pause"] for x, prev in zip(mine[1:], mine)
                     if x["phase"] == "run"
                     and x["throttle_events"] > prev["throttle_events"]]
            s.update(
                charged=tot["nr_dirtied"] * PAGE,
                written=tot["backing_write_bytes"],
                nr_written=tot["nr_written"] * PAGE,
                ratio=(tot["nr_dirtied"] * PAGE / tot["backing_write_bytes"]
                       if tot["backing_write_bytes"] else None),
                n_samples=len(runs),
                above_freerun=share(runs, lambda x: x["nr_dirty"] >= freerun(x)),
                above_setpoint=share(runs, lambda x: x["nr_dirty"] >= x["setpoint"]),
                above_limit=share(runs, lambda x: x["nr_dirty"] >= x["dirty_limit"]),
                pauses=run["throttle_events"], paused_ms=run["throttle_ms"],
                longest=max(fresh, default=0),
                peak_ms_per_s=max((v for _, v in steps), default=None),
                pinned=max((x["pinned_bytes"] for x in runs), default=None),
                peak_charged=max((x["nr_dirty"] * PAGE for x in runs), default=None),
                peak_exact=max((x["dirty_bytes_exact"] for x in runs), default=None),
                limit=max((x["dirty_limit"] * PAGE for x in runs), default=None))
        out.append(s)
    return out


def freerun(sample):
    """Where the throttler starts pausing writers, in pages."""
    return (sample["dirty_thresh"] + sample["bg_thresh"]) // 2


def share(rows, pred):
    return 100.0 * sum(1 for r in rows if pred(r)) / len(rows) if rows else None


def fmt_tps(v):
    return "" if v is None else "%.0f" % v if v >= 100 else "%.1f" % v


def fmt_bytes(v):
    if v is None:
        return ""
    if v >= 10 << 30:
        return "%.1f GiB" % (v / (1 << 30))
    return "%.1f MiB" % (v / MIB)


def fmt_pct(v):
    return "" if v is None else "%.1f%%" % v


def fmt_num(fmt, v):
    return "" if v is None else fmt % v


def md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |",
             "|---|" + "---:|" * (len(header) - 1)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def fmt_cv(v):
    """A CV, or "-" where there is none (one iteration)."""
    return "-" if v is None else "%.2f%%" % v


def tps_table(cmp, summ):
    """avg, min, max and CV of each configuration's tps; the means of the
    first and second half of the iterations when there are two or more (a
    single iteration has no halves and no CV)."""
    n = cmp.a.iters
    half = n // 2 or 1
    halves = n >= 2
    h1 = "iters 1-%d" % half if half > 1 else "iter 1"
    h2 = "iters %d-%d" % (half + 1, n) if n - half > 1 else "iter %d" % n
    base = next((s for s in summ if s["plain"]), None)
    rows = [[s["name"], fmt_tps(s["avg"]), fmt_tps(s["min"]), fmt_tps(s["max"]),
             fmt_cv(s["cv"])]
            + ([fmt_tps(s["first"]), fmt_tps(s["second"])] if halves else [])
            + ([fmt_num("%.2f", s["avg"] / base["avg"] if base["avg"] else None)]
               if base else [])
            for s in summ]
    return md_table(["configuration", "avg tps", "min", "max", "CV"]
                    + ([h1, h2] if halves else [])
                    + (["x native"] if base else []), rows)


def clients_table(cmp):
    """Per configuration: its clients, tps against the first
    configuration's, failed transactions, latency (the median over the
    iterations of each percentile, the largest maximum) and the daemon's
    peak threads, descriptors and resident memory over the runs."""
    base = None
    rows = []
    for c in cmp.configs:
        its = [r for r in cmp.iterations if r["config"] == c.name]
        tps = statistics.mean(r["tps"] for r in its)
        base = tps if base is None else base
        row = [c.name, str(c.clients), fmt_tps(tps),
               fmt_num("%.2f", tps / base if base else None),
               str(sum(r["failed"] for r in its)),
               "%.1f" % statistics.mean(r["latency_avg_ms"] for r in its)]
        if cmp.a.latency:
            row += ["%.1f" % statistics.median(r[k] for r in its)
                    for k, _ in LATENCY_PERCENTILES]
            row.append("%.0f" % max(r["lat_max_ms"] for r in its))
        if c.foliofs:
            row += ["%d" % max(r["daemon_threads"] for r in its),
                    "%d" % max(r["daemon_fds"] for r in its),
                    "%.0f MiB" % (max(r["daemon_rss_kib"] for r in its) / 1024)]
        else:
            row += ["", "", ""]
        rows.append(row)
    return md_table(["configuration", "clients", "avg tps", "x " + cmp.configs[0].name,
                     "failed", "latency avg ms"]
                    + (["p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"]
                       if cmp.a.latency else [])
                    + ["daemon threads", "daemon fds", "daemon RSS"], rows)


def dirty_table(summ):
    rows = []
    for s in summ:
        if not s["foliofs"]:
            rows.append([s["name"]] + [""] * 10)
            continue
        rows.append([
            s["name"], fmt_bytes(s["charged"]), fmt_bytes(s["written"]),
            fmt_num("x%.1f", s["ratio"]), fmt_pct(s["above_freerun"]),
            fmt_pct(s["above_setpoint"]),
            fmt_pct(s["above_limit"]), "%d" % s["pauses"],
            "%.1f s" % (s["paused_ms"] / 1000), fmt_num("%d ms", s["longest"]),
            fmt_bytes(s["pinned"])])
    return md_table(["configuration", "charged", "written", "charged/written",
                     "samples >= freerun", "samples >= setpoint",
                     "samples >= limit", "pauses", "paused", "longest pause",
                     "peak pinned"], rows)


def peaks_table(summ):
    rows = [[s["name"], fmt_bytes(s["peak_charged"]), fmt_bytes(s["peak_exact"]),
             fmt_bytes(s["limit"]), fmt_bytes(s["nr_written"]),
             fmt_num("%.0f ms", s["peak_ms_per_s"]), "%d" % s["n_samples"]]
            for s in summ if s["foliofs"]]
    return md_table(["configuration", "peak charged", "peak exact dirty",
                     "limit", "nr_written", "peak paused per s", "samples"], rows)


def comparisons(summ):
    """One line per configuration against the first: the seed's headline."""
    base, lines = summ[0], []
    for s in summ[1:]:
        lines.append("- %s against %s: %+.1f%% average tps; CV %s against"
                     " %s; worst iteration %s against %s."
                     % (s["name"], base["name"],
                        (s["avg"] / base["avg"] - 1) * 100 if base["avg"] else 0,
                        fmt_cv(s["cv"]), fmt_cv(base["cv"]), fmt_tps(s["min"]),
                        fmt_tps(base["min"])))
    return lines


def load_times(cmp):
    """Each configuration's load time, and its ratio to native's."""
    base = next((c.load_s for c in cmp.configs if c.native), None)
    return ", ".join("%s %.1f s%s" % (
        c.name, c.load_s, " (%.1fx)" % (c.load_s / base)
        if base and not c.native else "") for c in cmp.configs)


def iteration_detail_table(cmp):
    """Per foliofs configuration and iteration: tps, the share of the cache
    in 2 MiB folios after the run, charged over written during the run,
    pauses and time paused: the seed's decay, where it shows."""
    rows = []
    for c in cmp.configs:
        if not c.foliofs:
            continue
        for r in sorted((r for r in cmp.iterations if r["config"] == c.name),
                        key=lambda r: r["iteration"]):
            written = r["run_backing_write_bytes"] / PAGE if r["run_backing_write_bytes"] else 0
            rows.append([c.name, str(r["iteration"]), fmt_tps(r["tps"]),
                         fmt_pct(r["share_2m"] * 100) if r["share_2m"] != "" else "",
                         "x%.1f" % (r["run_nr_dirtied"] / written) if written else "-",
                         str(r["run_throttle_events"]), "%.1f s" % (r["run_throttle_ms"] / 1000)])
    return md_table(["configuration", "iteration", "tps", "cache in 2 MiB folios after",
                     "charged/written in the run", "pauses", "paused"], rows)


def write_report(cmp, settings, summ, path):
    it_rows = []
    for it in range(1, cmp.a.iters + 1):
        row = [str(it)]
        by = {r["config"]: r for r in cmp.iterations if r["iteration"] == it}
        order = sorted(by.values(), key=lambda r: r["position"])
        row.append(", ".join(r["config"] for r in order))
        row += [fmt_tps(by[c.name]["tps"]) for c in cmp.configs]
        it_rows.append(row)
    text = [
        "# PostgreSQL policy comparison",
        "",
        "%s, %d configurations, %s, wall time %.0f s (%s)."
        % (datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), len(cmp.configs),
           plural(cmp.a.iters, "iteration"), cmp.wall_s, "pgcompare.py " + " ".join(
               map(quote, sys.argv[1:]))),
        "",
        "## Settings", "",
        *("- " + line for line in settings), "",
        "## Throughput (pgbench tps)", "",
        tps_table(cmp, summ), "",
        *comparisons(summ), "",
        "## Clients, latency and the daemon", "",
        clients_table(cmp), "",
        "- failed: pgbench's failed transactions, summed over the iterations;"
        " latency avg: the mean of pgbench's per-run averages%s; daemon"
        " threads, fds, RSS: the largest thread count, open descriptors and"
        " resident memory of the foliofs process in samples taken every"
        " second of every run." % (
            "; p50 .. p99.9: each run's percentile from its per-transaction log"
            " (failed transactions left out), the median over the iterations;"
            " max: the longest transaction of all runs" if cmp.a.latency else ""),
        "",
        "CV: sample standard deviation over the mean of the iterations.",
        "`pgbench -i -s %d` and the stop after it (once, not in the table):"
        " %s." % (cmp.a.scale, load_times(cmp)),
        "", "Per iteration (order: who ran first):", "",
        md_table(["iteration", "order"] + [c.name for c in cmp.configs], it_rows),
        "", "Per iteration, foliofs configurations:", "",
        iteration_detail_table(cmp), "",
        "## Dirty accounting and throttling", "",
        dirty_table(summ), "",
        peaks_table(summ), "",
        "- charged: `nr_dirtied` x 4 KiB, what the accounting policy charged;"
        " written: `backing_write_bytes`, what reached the backing files (the"
        " seed's \"written to the array\"); both from the start of each pgbench"
        " run to the end of the server's stop after it (whose shutdown"
        " checkpoint writes back what the run dirtied), summed over the"
        " iterations; `pgbench -i` is not counted.",
        "- nr_written: `nr_written` x 4 KiB, whole folios whose writeback ended"
        " (the kernel's `WB_WRITTEN`, what `write_bw` is measured from), over"
        " the same windows.",
        "- samples >= freerun / setpoint / limit: share of the one-second"
        " stats samples taken during the pgbench runs with the charge"
        " (`nr_dirty`) at or above the freerun point ((`dirty_thresh` +"
        " `bg_thresh`) / 2, where pauses begin), `setpoint` or `dirty_limit`.",
        "- pauses, paused: `throttle_events` and `throttle_ms` over the pgbench"
        " runs (summed over all writers: two writers paused for the same"
        " second count two seconds).",
        "- longest pause: the largest `pause` (the length of the last pause"
        " taken) seen in the samples, a lower bound, as foliofs does not keep"
        " the longest; a single pause is at most `max_pause` (200 ms), and at"
        " the hard limit a writer waits several of them in a row. peak paused"
        " per s: the largest increase of `throttle_ms` between two samples,"
        " per second.",
        "- peak pinned, peak charged, peak exact dirty: the largest"
        " `pinned_bytes`, `nr_dirty` x 4 KiB and `dirty_bytes_exact` in the"
        " samples of the pgbench runs. Blank for native: no foliofs there.",
        "",
        "## Plots", "",
        "![tps per iteration](tps.png)", "",
        "![the cache in 2 MiB folios per iteration](share2m.png)", "",
        "![charged and exact dirty, setpoint and limit](dirty.png)", "",
        "![time paused per second](pauses.png)", "",
        "## Files", "",
        "- `iterations.csv`: one row per configuration and iteration: tps,"
        " pgbench's figures, and the deltas of %s over the run (`run_`) and"
        " through the stop (`total_`), `share_2m` (the share of the cache in"
        " 2 MiB folios after the run), `cached_folios` (the cache's folios"
        " after the run by size, 4 KiB to 2 MiB, space separated),"
        " `transport` (`/dev/fuse` or `io_uring`: what the run's requests came"
        " over), `source_by_class` and `run_by_class` (the cache after the"
        " source step and after the run by file class, %s, from"
        " `.foliofs/folios`, as JSON: per class `folios` and `active` (on the"
        " active list) by order, 0 for 4 KiB to 9 for 2 MiB, `bytes`,"
        " `share_2m`, `active_bytes` and `referenced` folios) and"
        " `active_bytes` and `inactive_bytes` (the LRU lists after the run);"
        " the foliofs columns are blank for native and passthrough_hp;"
        " `bgwriter` (every configuration: who wrote shared buffers out"
        " during the run, pg_stat_bgwriter's %s, as JSON)."
        % (", ".join(COUNTERS), ", ".join(FILE_CLASSES), ", ".join(BGWRITER_COUNTERS)),
        "- `samples.csv`: every stats-log line of every foliofs configuration"
        " (every stat of `.foliofs/stats`), with its iteration and phase"
        " (`run`: pgbench; `stop`: the shutdown checkpoint after it; `idle`).",
        "- `logs/`: pgbench output, server and daemon logs, raw stats logs.",
        *(["- `traces.json`: per foliofs configuration, its trace (--trace):"
            " `trace` (where it is), `options` (its mount's), `records`,"
            " `first_ns` (the first record's time), `origin_unix_ms` (the unix"
            " time of the trace's time 0, to `uncertainty_ms`) and `windows`:"
            " each iteration's `start_ns`, `end_ns` (its pgbench run) and"
            " `stop_end_ns` on the trace's clock."] if cmp.a.trace is not None else []),
        ""]
    with open(path, "w") as f:
        f.write("\n".join(text))


def quote(s):
    return s if re.match(r"^[\w.,=+/:-]+$", s) else "'%s'" % s.replace("'", "'\\''")


def plot(cmp, samples, summ, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fcs = [c for c in cmp.configs if c.foliofs]
    title = "pgbench -N -M prepared -c %s -T %d, scale %d" % (
        ",".join(map(str, cmp.a.clients)), cmp.a.duration, cmp.a.scale)

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for s in summ:
        ax.plot(range(1, len(s["tps"]) + 1), s["tps"], marker="o", label=s["name"])
    ax.set_xlabel("iteration")
    ax.set_ylabel("tps")
    ax.set_ylim(bottom=0)
    ax.set_xticks(range(1, cmp.a.iters + 1))
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "tps.png"), dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for c in fcs:
        its = sorted((r for r in cmp.iterations if r["config"] == c.name),
                     key=lambda r: r["iteration"])
        ax.plot([r["iteration"] for r in its],
                [100 * r["share_2m"] if r["share_2m"] != "" else 0 for r in its],
                marker="o", label=c.name)
    ax.set_xlabel("iteration")
    ax.set_ylabel("% of the cache in 2 MiB folios, after the run")
    ax.set_ylim(0, 100)
    ax.set_xticks(range(1, cmp.a.iters + 1))
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "share2m.png"), dpi=100)
    plt.close(fig)

    fig = dirty_figure(plt, cmp, samples, fcs, title)
    # bbox_inches: the legend stands outside the axes, to their right.
    fig.savefig(os.path.join(outdir, "dirty.png"), dpi=100, bbox_inches="tight")
    plt.close(fig)

    n = max(len(fcs), 1)
    fig, axes = plt.subplots(n, 1, figsize=(10, 2.2 * n + 0.8), sharex=True,
                             sharey=True, squeeze=False)
    for ax, c in zip(axes[:, 0], fcs):
        mine = [s for s in samples if s["config"] == c.name]
        xs, pts, bounds = run_timeline(cmp, c, mine)
        rate = {id(s): v for s, v in per_second(mine, "throttle_ms")}
        ax.plot(xs, [rate.get(id(p), 0) for p in pts], linewidth=1)
        for b in bounds:
            ax.axvline(b, color="grey", linewidth=0.5, linestyle=":")
        ax.set_title(c.name, fontsize=10)
        ax.set_ylabel("ms paused / s")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("seconds of pgbench (iterations end to end, dotted)")
    fig.suptitle("time writers were paused per second (all writers): " + title,
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "pauses.png"), dpi=100)
    plt.close(fig)


def dirty_figure(plt, cmp, samples, fcs, title):
    """dirty.png: per foliofs configuration, charged and exact dirty against
    freerun, setpoint and limit over the run.  The legend stands to the
    right of the axes, where it covers neither the limit line nor the
    peaks."""
    n = max(len(fcs), 1)
    fig, axes = plt.subplots(n, 1, figsize=(10, 2.8 * n + 0.8), sharex=True,
                             sharey=True, squeeze=False)
    for ax, c in zip(axes[:, 0], fcs):
        xs, pts, bounds = run_timeline(cmp, c, [s for s in samples
                                                if s["config"] == c.name])
        for label, style, value in (
                ("charged (nr_dirty)", "-", lambda p: p["nr_dirty"] * PAGE),
                ("exact dirty", "-", lambda p: p["dirty_bytes_exact"]),
                ("freerun", ":", lambda p: freerun(p) * PAGE),
                ("setpoint", "--", lambda p: p["setpoint"] * PAGE),
                ("limit", "--", lambda p: p["dirty_limit"] * PAGE)):
            ax.plot(xs, [value(p) / MIB for p in pts], style, label=label,
                    linewidth=1)
        for b in bounds:
            ax.axvline(b, color="grey", linewidth=0.5, linestyle=":")
        ax.set_title(c.name, fontsize=10)
        ax.set_ylabel("MiB")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
                      fontsize=8)
    axes[-1, 0].set_xlabel("seconds of pgbench (iterations end to end, dotted)")
    fig.suptitle("dirty memory, one sample per second: " + title, fontsize=10)
    fig.tight_layout()
    return fig


def iteration_header(latency):
    """iterations.csv's columns (with LATENCY, pgbench's percentiles).
    New columns go at the end: readers find columns by name, but older
    runs' files are read beside newer ones."""
    header = ["config", "clients", "iteration", "position", "start_unix_ms",
              "end_unix_ms", "stop_end_unix_ms", "tps", "transactions", "failed",
              "latency_avg_ms"]
    if latency:
        header += [k for k, _ in LATENCY_PERCENTILES] + ["lat_max_ms"]
    header += list(DaemonSampler.FIELDS)
    header += ["run_" + k for k in COUNTERS] + ["total_" + k for k in COUNTERS]
    header += ["share_2m", "cached_folios", "transport"]
    header += ["source_by_class", "run_by_class", "active_bytes", "inactive_bytes"]
    header += ["bgwriter"]
    return header


def write_traces(cmp):
    """traces.json, each recorded trace kept (foliofs_trace.keep_trace())."""
    out = {}
    for c in cmp.configs:
        if c.trace is None or c.trace.info is None:
            continue
        kept = keep_trace(c.trace.path, cmp.out, cmp.a.trace or cmp.a.workdir,
                          "trace-" + c.name)
        out[c.name] = dict(c.trace.json(), trace=os.path.realpath(kept),
                           options=join_opts(cmp.mount_opts(c)),
                           windows=c.trace.windows(r for r in cmp.iterations
                                                   if r["config"] == c.name))
        log("%s: trace of %d records (%.0f MiB) kept in %s" % (
            c.name, c.trace.info["records"], c.trace.info["bytes"] / MIB, kept))
    with open(os.path.join(cmp.out, "traces.json"), "w") as f:
        json.dump(out, f, indent=1)


def report(cmp, settings):
    if cmp.a.trace is not None:
        write_traces(cmp)
    samples, keys = read_samples(cmp)
    write_csv(os.path.join(cmp.out, "samples.csv"),
              ["config", "iteration", "phase"] + keys, samples)
    write_csv(os.path.join(cmp.out, "iterations.csv"), iteration_header(cmp.a.latency),
              cmp.iterations)
    summ = summarize(cmp, samples)
    write_report(cmp, settings, summ, os.path.join(cmp.out, "report.md"))
    plot(cmp, samples, summ, cmp.out)
    print()
    print(tps_table(cmp, summ))
    print()
    print("\n".join(comparisons(summ)))
    print()
    print(clients_table(cmp))
    print()
    print(dirty_table(summ))
    print()
    print(peaks_table(summ))


# ------------------------------------------------------------------- main

def prepare_output(path):
    if os.path.isdir(path) and os.listdir(path):
        raise Failure("-O %s: the directory is not empty" % path)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise Failure("-O %s: %s" % (path, e))


def common_options(a):
    """The foliofs options of every configuration: the script's defaults
    (COMMON_OPTS; none with --default-mount), each replaced by a --preset's
    value of the same option, then by -o's; order kept, new options added
    at the end."""
    common = {} if a.default_mount else parse_opts(COMMON_OPTS)
    common.update(parse_opts(a.preset_common))
    for k, v in parse_opts(a.common).items():
        if k in RESERVED_OPTS:
            raise Failure("-o %s: %s is set by the script" % (a.common, k))
        common[k] = v
    return common


def main(argv):
    a = parse_args(argv)
    # Checked now, used at the end: a missing package must not cost a run.
    if importlib.util.find_spec("matplotlib") is None:
        raise Failure("matplotlib is needed for the plots (apt-get install"
                      " python3-matplotlib)")
    # In the tree: its build; installed (foliofs-pgcompare): foliofs on PATH.
    default = os.path.join(REPO, "build", "foliofs")
    if not os.path.exists(default):
        default = shutil.which("foliofs") or default
    foliofs = os.path.realpath(os.environ.get("FOLIOFS", default))
    if not os.access(foliofs, os.X_OK):
        raise Failure("foliofs binary %s not found (set FOLIOFS or build it)"
                      % foliofs)
    fhelp = FoliofsHelp(foliofs)
    configs = []
    for base in (parse_config(s, fhelp) for s in (a.config or DEFAULT_CONFIGS)):
        for n in a.clients:
            c = base if len(a.clients) == 1 else \
                Config("%s-c%d" % (base.name, n), base.opts, base.peer)
            c.clients = n
            configs.append(c)
    names = [c.name for c in configs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise Failure("--config: the name %s is used twice (give NAME=)" % dup[0])
    common = common_options(a)
    pgbin = find_pgbin()
    if not os.access(FUSERMOUNT, os.X_OK):
        raise Failure("fusermount3 not found (apt-get install fuse3)")
    if a.trace is not None and not find_tool(foliofs, "foliofsctl", "FOLIOFSCTL"):
        raise Failure("--trace: no foliofsctl beside %s or on PATH (set FOLIOFSCTL)" % foliofs)
    prepare_output(a.output)

    def on_signal(signum, frame):
        raise Interrupted(signum)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    cmp, ok = None, False
    try:
        cmp = Comparison(a, configs, common, foliofs, pgbin)
        settings = cmp.setting_lines()
        for line in settings:
            log(line)
        cmp.run()
        settings += cmp.transport_lines()
        report(cmp, settings)
        print("\nwall time %.0f s; report, CSVs and plots in %s"
              % (cmp.wall_s, cmp.out))
        ok = True
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if cmp is not None:
            cmp.cleanup(ok)
    return 0


def run_main(main_fn):
    """sys.exit() with MAIN_FN(argv)'s status, 1 after a Failure (logged),
    128 + the signal after an interruption: the scripts built on this
    module end so too (pg-speed.py, sim-fidelity.py)."""
    try:
        sys.exit(main_fn(sys.argv[1:]))
    except Failure as e:
        log("FAILED: %s" % e)
        sys.exit(1)
    except Interrupted as e:
        log("interrupted")
        sys.exit(128 + e.signum)


if __name__ == "__main__":
    run_main(main)
