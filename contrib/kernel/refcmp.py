# SPDX-License-Identifier: GPL-2.0-or-later
"""refcmp.py: what the scripts that set this machine's kernel beside
foliofs's model share (pg-seed.py, model-vs-kernel.py, calibrate.py),
imported as a plain module (the scripts' own directory is on sys.path):

- the throttle's events, under the kernel's names: the fields of
  writeback:balance_dirty_pages, bdi_dirty_ratelimit and global_dirty_state
  as Linux 6.18 defines them (/sys/kernel/tracing/events/writeback/*/format),
  read from a tracefs instance's trace_pipe (the kernel) or from the
  mount's and the simulator's USDT probes of the same names through
  bpftrace (probes/foliofs_tp.h); one record format for both (EventLog),
  saved as gzipped JSON lines;
- their distributions side by side: median and p90 of each field, and the
  CDFs in one figure;
- the calibration columns (charged/written, pauses, paused time, median
  and p90 pause, mean and peak dirty, the 2 MiB share, the share of 5 s
  samples above the dirty threshold), computed the same way from a kernel
  reference (pg-seed.py --json, --events) and from a mount's run
  (pgcompare.py's report directory and the probes' events), and the model's
  error per column;
- the cache after each run by file class (pgbench_accounts, its primary
  key, pg_wal, the rest) and by LRU list, kernel beside model
  (cache_section()).

Units: pages of 4 KiB, rates in KiB/s, times in ms (the tracepoints'),
except where a name says otherwise (_mib, _s).
"""

import bisect
import csv
import gzip
import json
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), '..', 'lib'))
from foliofs_tools import BGWRITER_COUNTERS, FILE_CLASSES  # noqa: E402

PAGE = 4096
MiB = 1 << 20

# Each event's fields in the tracepoint's order (Linux 6.18's format files;
# foliofs's probes carry the same names, probes/foliofs_tp.h).
EVENTS = {
    'balance_dirty_pages': ('limit', 'setpoint', 'dirty', 'wb_setpoint', 'wb_dirty',
                            'dirty_ratelimit', 'task_ratelimit', 'dirtied', 'dirtied_pause',
                            'paused', 'pause', 'period', 'think'),
    'bdi_dirty_ratelimit': ('write_bw', 'avg_write_bw', 'dirty_rate', 'dirty_ratelimit',
                            'task_ratelimit', 'balanced_dirty_ratelimit'),
    'global_dirty_state': ('nr_dirty', 'nr_writeback', 'background_thresh', 'dirty_thresh',
                           'dirty_limit', 'nr_dirtied', 'nr_written'),
}
SHORT = {'balance_dirty_pages': 'B', 'bdi_dirty_ratelimit': 'R', 'global_dirty_state': 'G'}
LONG = {v: k for k, v in SHORT.items()}
# Where the kernel's print format labels a field otherwise than its name.
LABELS = {
    'bdi_dirty_ratelimit': {'awrite_bw': 'avg_write_bw'},
    'global_dirty_state': {'dirty': 'nr_dirty', 'writeback': 'nr_writeback',
                           'bg_thresh': 'background_thresh', 'thresh': 'dirty_thresh',
                           'limit': 'dirty_limit', 'dirtied': 'nr_dirtied',
                           'written': 'nr_written'},
}

# "comm-pid [cpu] flags timestamp: event: fields"; the flags column is
# there unless the irq-info option is off.
TRACEFS_LINE = re.compile(r'^\s*.*?-(\d+)\s+\[\d+\]\s+(?:\S+\s+)?(\d+\.\d+): (\w+): (.*)$')
FIELD = re.compile(r'(\w+)=(-?\d+)')


def parse_tracefs(line):
    """(t in s, event, pid, values) of a trace_pipe line of one of EVENTS,
    else None.  Timestamps are those of the instance's trace_clock (mono:
    CLOCK_MONOTONIC, as time.monotonic() and bpftrace's nsecs)."""
    m = TRACEFS_LINE.match(line)
    if not m or m.group(3) not in EVENTS:
        return None
    ev = m.group(3)
    labels = LABELS.get(ev, {})
    vals = {labels.get(k, k): int(v) for k, v in FIELD.findall(m.group(4))}
    return float(m.group(2)), ev, int(m.group(1)), tuple(vals.get(k, 0) for k in EVENTS[ev])


# What bpftrace_program()'s BEGIN prints.
READY = 'FOLIOFS-PROBES-READY'


def bpftrace_program(binary, header):
    """A bpftrace program printing every throttle probe of BINARY (a
    foliofs or foliofs-sim built with probes) as one line: the event's
    letter, nsecs (CLOCK_MONOTONIC), the writer's pid (balance_dirty_pages;
    the daemon's otherwise), then the fields in EVENTS order."""
    # bpftrace runs BEGIN once every probe is attached (its "Attaching N
    # probes..." line comes before): start() waits for this line.
    out = ['#include "%s"' % header, 'BEGIN { printf("%s\\n"); }' % READY]
    for ev, fields in EVENTS.items():
        args = ', '.join('(int64)$a->%s' % f for f in fields)
        pid = '$a->pid' if ev == 'balance_dirty_pages' else 'pid'
        out += ['usdt:%s:foliofs:%s' % (binary, ev), '{',
                '  $a = (struct foliofs_%s *)arg0;' % ev,
                '  printf("%s %%llu %%d%s\\n", nsecs, %s, %s);'
                % (SHORT[ev], ' %ld' * len(fields), pid, args), '}']
    return '\n'.join(out) + '\n'


def parse_bpftrace(line):
    """The record of a line printed by bpftrace_program(), else None."""
    parts = line.split()
    if len(parts) < 3 or parts[0] not in LONG:
        return None
    ev = LONG[parts[0]]
    if len(parts) != 3 + len(EVENTS[ev]):
        return None
    try:
        nums = [int(x) for x in parts[1:]]
    except ValueError:
        return None
    return nums[0] / 1e9, ev, nums[1], tuple(nums[2:])


class ProbeRecorder:
    """bpftrace on BINARY's throttle probes (every process running it)
    from start() to stop(), into self.log.  Context: root."""

    def __init__(self, binary, header, source=''):
        self.log = EventLog(source)
        self.prog = bpftrace_program(os.path.abspath(binary), os.path.abspath(header))
        self.proc = None
        self.errors = []
        self.lost = 0

    def start(self, timeout=30):
        """Start bpftrace and wait until its probes are attached."""
        import subprocess
        import threading
        import time
        self.proc = subprocess.Popen(['bpftrace', '-e', self.prog], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.attached = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.attached.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError('bpftrace did not attach: %s' % ' / '.join(self.errors[-5:]))

    def _read(self):
        for line in self.proc.stdout:
            rec = parse_bpftrace(line)
            if rec:
                self.log.add(rec)
            elif line.strip() == READY:
                self.attached.set()
            elif line.startswith('Lost '):
                self.lost += int(line.split()[1])
            elif line.strip():
                self.errors.append(line.strip())

    def stop(self):
        import signal
        import subprocess
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.thread.join(10)


def role_of(pid):
    """What process PID is, from its command line while it runs: a
    PostgreSQL process's role (checkpointer, background writer, walwriter,
    autovacuum, backend), else its program's name, else '?'."""
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            cmd = f.read().replace(b'\0', b' ').decode(errors='replace').strip()
    except OSError:
        return '?'
    if cmd.startswith('postgres: '):
        for role in ('checkpointer', 'background writer', 'walwriter', 'autovacuum'):
            if role in cmd:
                return role
        return 'backend'
    return os.path.basename(cmd.split(' ')[0]) if cmd else '?'


class EventLog:
    """Throttle events (t in s on CLOCK_MONOTONIC, event, pid, values),
    the windows to read them in (name, iteration, t0, t1), and who the
    writers were ({pid: role_of(pid)}, looked up at their first event)."""

    def __init__(self, source=''):
        self.source = source
        self.events = []
        self.windows = []
        self.roles = {}

    def add(self, rec):
        self.events.append(rec)
        if rec[1] == 'balance_dirty_pages' and rec[2] not in self.roles:
            self.roles[rec[2]] = role_of(rec[2])

    def window(self, name, iteration, t0, t1):
        self.windows.append((name, iteration, t0, t1))

    def save(self, path, only=None):
        """Write the events inside the windows (all of them if there is
        none; of the events named in ONLY, if given), and the windows.  In
        the window 'prep' (what came before the runs: the load, the first
        source step) only the throttle's own events are kept, not
        global_dirty_state's thousands a second."""
        wins = [(t0, t1) for n, _, t0, t1 in self.windows if n != 'prep']
        prep = [(t0, t1) for n, _, t0, t1 in self.windows if n == 'prep']
        with gzip.open(path, 'wt') as f:
            f.write(json.dumps({'source': self.source, 'events': EVENTS,
                                'windows': self.windows, 'roles': self.roles}) + '\n')
            for t, ev, pid, vals in self.events:
                if (wins or prep) and not any(t0 <= t < t1 for t0, t1 in wins) and not (
                        ev != 'global_dirty_state' and any(t0 <= t < t1 for t0, t1 in prep)):
                    continue
                if only and ev not in only:
                    continue
                f.write(json.dumps([round(t, 6), SHORT[ev], pid] + list(vals)) + '\n')

    @classmethod
    def load(cls, path):
        with gzip.open(path, 'rt') as f:
            head = json.loads(f.readline())
            log = cls(head.get('source', ''))
            log.windows = [tuple(w) for w in head.get('windows', [])]
            log.roles = {int(p): r for p, r in head.get('roles', {}).items()}
            for line in f:
                r = json.loads(line)
                log.events.append((r[0], LONG[r[1]], r[2], tuple(r[3:])))
        return log

    def rows(self, ev, name='run'):
        """The events EV inside the windows called NAME, as dicts."""
        wins = [(t0, t1) for n, _, t0, t1 in self.windows if n == name]
        fields = EVENTS[ev]
        return [dict(zip(fields, vals), t=t, pid=pid) for t, e, pid, vals in self.events
                if e == ev and any(t0 <= t < t1 for t0, t1 in wins)]


# --------------------------------------------------------------------------
# distributions

def quantile(vals, q):
    """The Q quantile of VALS (linear between order statistics), or None."""
    v = sorted(vals)
    if not v:
        return None
    pos = q * (len(v) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


# What is compared, per event: (label, event, field, which events).  A pause
# is one that was taken (pause > 0, as the kernel sleeps only then); period
# and think are read where one was; the rest over every event.
def _taken(r):
    return r['pause'] > 0


def _all(r):
    return True


DIST_FIELDS = [
    ('pause taken, ms', 'balance_dirty_pages', 'pause', _taken),
    ('period, ms (pauses taken)', 'balance_dirty_pages', 'period', _taken),
    ('think, ms (pauses taken)', 'balance_dirty_pages', 'think', _taken),
    ('dirtied, pages', 'balance_dirty_pages', 'dirtied', _all),
    ('dirtied_pause, pages', 'balance_dirty_pages', 'dirtied_pause', _all),
    ('dirty, pages', 'balance_dirty_pages', 'dirty', _all),
    ('wb_dirty, pages', 'balance_dirty_pages', 'wb_dirty', _all),
    ('setpoint, pages', 'balance_dirty_pages', 'setpoint', _all),
    ('wb_setpoint, pages', 'balance_dirty_pages', 'wb_setpoint', _all),
    ('limit, pages', 'balance_dirty_pages', 'limit', _all),
    ('dirty_ratelimit, KiB/s', 'balance_dirty_pages', 'dirty_ratelimit', _all),
    ('task_ratelimit, KiB/s', 'balance_dirty_pages', 'task_ratelimit', _all),
    ('write_bw, KiB/s', 'bdi_dirty_ratelimit', 'write_bw', _all),
    ('avg_write_bw, KiB/s', 'bdi_dirty_ratelimit', 'avg_write_bw', _all),
    ('dirty_rate, KiB/s', 'bdi_dirty_ratelimit', 'dirty_rate', _all),
    ('rl dirty_ratelimit, KiB/s', 'bdi_dirty_ratelimit', 'dirty_ratelimit', _all),
    ('balanced_dirty_ratelimit, KiB/s', 'bdi_dirty_ratelimit', 'balanced_dirty_ratelimit', _all),
    ('nr_dirty + nr_writeback, pages', 'global_dirty_state', None, _all),
]


HZ = 250                # CONFIG_HZ here (/proc/config.gz), the default of meson option kernel_hz
MAX_PAUSE_J = HZ // 5   # mm/page-writeback.c MAX_PAUSE


def _roundup_pow2(n):
    return 1 << (n - 1).bit_length()


def write_rates(log, window_s=1.0):
    """The pages written (global_dirty_state's nr_written: a folio's pages
    when its writeback ends, so what was charged) per second over the
    WINDOW_S before each balance_dirty_pages event in the runs, in event
    order: the write bandwidth the throttle estimates (the kernel smooths
    it over 200 ms steps; a second is close enough to sort events by it)."""
    g = sorted((r['t'], r['nr_written']) for r in log.rows('global_dirty_state'))
    ts = [t for t, _ in g]
    out = []
    for r in log.rows('balance_dirty_pages'):
        i = bisect.bisect_left(ts, r['t'] - window_s)
        j = bisect.bisect_right(ts, r['t']) - 1
        if j <= i or ts[j] - ts[i] < window_s / 2:
            out.append(None)
        else:
            out.append((g[j][1] - g[i][1]) / (ts[j] - ts[i]))
    return out


def max_pause_ms(write_bw, wb_dirty):
    """wb_max_pause() for a write bandwidth of WRITE_BW pages/s and
    WB_DIRTY pages, in ms: the pause a balance_dirty_pages() round may
    take at most (the longer rest is carried)."""
    t = int(wb_dirty) // (1 + int(write_bw) // _roundup_pow2(1 + HZ // 8)) + 1
    return min(t, MAX_PAUSE_J) * 1000 // HZ


def derived_values(log):
    """{label: values} of what the events imply but no field holds: the
    write rate before each balance_dirty_pages event, and the longest
    pause it allows there (which sets the median pause when the rate is
    high: at this machine's wb_dirty of ~12,400 pages a rate over ~1.5
    GiB/s of pages written makes it one tick, 4 ms, under that two)."""
    bdp = log.rows('balance_dirty_pages')
    rates = write_rates(log)
    pairs = [(bw, r) for bw, r in zip(rates, bdp) if bw is not None]
    return {'written before each event, MiB/s (1 s)': [bw * PAGE / MiB for bw, _ in pairs],
            'max pause at each event, ms (from it)': [max_pause_ms(bw, r['wb_dirty'])
                                                      for bw, r in pairs]}


def field_values(log, ev, field, pred):
    rows = [r for r in log.rows(ev) if pred(r)]
    if field is None:       # global_dirty_state: what balance_dirty_pages() reads
        return [r['nr_dirty'] + r['nr_writeback'] for r in rows]
    return [r[field] for r in rows]


def event_counts(log):
    bdp = log.rows('balance_dirty_pages')
    return {'balance_dirty_pages': len(bdp), 'pauses taken': sum(1 for r in bdp if _taken(r)),
            'bdi_dirty_ratelimit': len(log.rows('bdi_dirty_ratelimit')),
            'global_dirty_state': len(log.rows('global_dirty_state'))}


def dist_table(logs):
    """Markdown rows: per DIST_FIELDS entry, n / median / p90 of each log
    in LOGS ([(name, EventLog)]), and the median's ratio to the first's."""
    names = [n for n, _ in logs]
    out = ['| | ' + ' | '.join('%s n | median | p90' % n for n in names) +
           ''.join(' | %s / %s median' % (n, names[0]) for n in names[1:]) + ' |',
           '|---|' + '---:|---:|---:|' * len(names) + '---:|' * (len(names) - 1)]
    counts = [event_counts(lg) for _, lg in logs]
    for k in counts[0]:
        out.append('| %s events | ' % k + ' | '.join('%d | | ' % c[k] for c in counts) +
                   ''.join(' | %s' % _ratio_s(c[k], counts[0][k]) for c in counts[1:]) + ' |')
    for label, ev, field, pred in DIST_FIELDS:
        out.append(_dist_row(label, [field_values(lg, ev, field, pred) for _, lg in logs]))
    derived = [derived_values(lg) for _, lg in logs]
    for label in derived[0]:
        out.append(_dist_row(label, [d[label] for d in derived]))
    return out


def _dist_row(label, values):
    """One row of dist_table(): n / median / p90 of each log's VALUES, and
    each median's ratio to the first's."""
    meds = [quantile(v, 0.5) for v in values]
    cells = ['%d | %s | %s' % (len(v), _num(m), _num(quantile(v, 0.9)))
             for v, m in zip(values, meds)]
    return ('| %s | ' % label + ' | '.join(cells) +
            ''.join(' | %s' % _ratio_s(m, meds[0]) for m in meds[1:]) + ' |')


def roles_table(logs):
    """Markdown rows: balance_dirty_pages events and pauses taken in the
    runs by the writer's role, per log."""
    per = []
    for _, lg in logs:
        c = {}
        for r in lg.rows('balance_dirty_pages'):
            role = lg.roles.get(r['pid'], '?')
            ev, taken, pids = c.get(role, (0, 0, set()))
            pids.add(r['pid'])
            c[role] = (ev + 1, taken + _taken(r), pids)
        per.append(c)
    roles = sorted(set(k for c in per for k in c), key=lambda k: -sum(
        c.get(k, (0,))[0] for c in per))
    out = ['| writer | ' + ' | '.join('%s events | pauses | writers' % n for n, _ in logs) + ' |',
           '|---|' + '---:|---:|---:|' * len(logs)]
    for role in roles:
        out.append('| %s | ' % role + ' | '.join(
            '%d | %d | %d' % (c[role][0], c[role][1], len(c[role][2])) if role in c
            else '0 | 0 | 0' for c in per) + ' |')
    return out


def prep_table(logs):
    """Markdown rows: what each side's throttle did before the runs (the
    window 'prep': the load and the first source step) and the rate limit
    the runs started from: balance_dirty_pages events and pauses there,
    bdi_dirty_ratelimit updates there and dirty_ratelimit after the last,
    and dirty_ratelimit at the runs' first balance_dirty_pages event (KiB/s);
    [] when no log has the window."""
    if not any(n == 'prep' for _, lg in logs for n, _, _, _ in lg.windows):
        return []
    out = ['| | ' + ' | '.join(n for n, _ in logs) + ' |', '|---|' + '---:|' * len(logs)]
    cells = {k: [] for k in ('bdp', 'rl', 'last', 'first')}
    for _, lg in logs:
        if not any(n == 'prep' for n, _, _, _ in lg.windows):
            for k in cells:
                cells[k].append('n/a')
            continue
        bdp = lg.rows('balance_dirty_pages', 'prep')
        rl = sorted(lg.rows('bdi_dirty_ratelimit', 'prep'), key=lambda r: r['t'])
        run = sorted(lg.rows('balance_dirty_pages'), key=lambda r: r['t'])
        cells['bdp'].append('%d / %d' % (len(bdp), sum(map(_taken, bdp))))
        cells['rl'].append('%d' % len(rl))
        cells['last'].append('%d' % rl[-1]['dirty_ratelimit'] if rl else 'n/a')
        cells['first'].append('%d' % run[0]['dirty_ratelimit'] if run else 'n/a')
    for k, label in (('bdp', 'balance_dirty_pages events / pauses before the runs'),
                     ('rl', 'bdi_dirty_ratelimit updates before the runs'),
                     ('last', 'dirty_ratelimit after the last of them, KiB/s'),
                     ('first', 'dirty_ratelimit at the runs\' first event, KiB/s')):
        out.append('| %s | %s |' % (label, ' | '.join(cells[k])))
    return out


def bgwriter_rows(kres, mdir, config):
    """Per side ('kernel', 'model') the runs' pg_stat_bgwriter deltas
    ({counter: n} per iteration, pg-seed.py's 'bgwriter' and pgcompare's
    iterations.csv column of that name); a side's list is None when its
    files predate them."""
    k = [r.get('bgwriter') for r in kres.get('iterations') or []]
    m = [json.loads(r['bgwriter']) if r.get('bgwriter') else None
         for r in read_model_iterations(mdir, config)]
    return {'kernel': k if k and all(x is not None for x in k) else None,
            'model': m if m and all(x is not None for x in m) else None}


def bgwriter_table(rows):
    """Markdown rows: who wrote shared buffers out over all the runs, per
    side and counter (BGWRITER_COUNTERS), with the model's over the
    kernel's; a one-line note when a side lacks them."""
    lacking = [side for side, r in rows.items() if r is None]
    if lacking:
        return ['No table of who wrote shared buffers out: the %s side\'s files of this run '
                'predate the pg_stat_bgwriter counters.' % ' and '.join(lacking)]
    out = ['| counter, over the runs | kernel | model | model / kernel |', '|---|---:|---:|---:|']
    for c in BGWRITER_COUNTERS:
        k = sum(r.get(c, 0) for r in rows['kernel']) if all(c in r for r in rows['kernel']) \
            else None
        m = sum(r.get(c, 0) for r in rows['model']) if all(c in r for r in rows['model']) \
            else None
        out.append('| %s | %s | %s | %s |' % (c, 'n/a' if k is None else k,
                                             'n/a' if m is None else m,
                                             'n/a' if not k or m is None else 'x%.2f' % (m / k)))
    return out


def dist_json(logs):
    res = {}
    for name, lg in logs:
        d = {'events': event_counts(lg), 'roles': {}}
        for r in lg.rows('balance_dirty_pages'):
            role = lg.roles.get(r['pid'], '?')
            ev, taken = d['roles'].get(role, (0, 0))
            d['roles'][role] = (ev + 1, taken + _taken(r))
        for label, ev, field, pred in DIST_FIELDS:
            v = field_values(lg, ev, field, pred)
            d[label] = {'n': len(v), 'median': quantile(v, 0.5), 'p90': quantile(v, 0.9)}
        res[name] = d
    return res


def cdf_plot(logs, path, title):
    """The CDFs of the compared fields, one panel each, one line per log;
    False when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    n = len(DIST_FIELDS)
    cols = 4
    fig, axes = plt.subplots((n + cols - 1) // cols, cols, figsize=(16, 3.2 * ((n + 3) // 4)))
    for ax, (label, ev, field, pred) in zip(axes.flat, DIST_FIELDS):
        for name, lg in logs:
            v = sorted(field_values(lg, ev, field, pred))
            if v:
                ax.step(v, [(i + 1) / len(v) for i in range(len(v))], where='post',
                        label='%s (%d)' % (name, len(v)))
        ax.set_title(label, fontsize=9)
        ax.set_ylim(0, 1)
        ax.tick_params(labelsize=7)
        if ax.get_lines():
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis('off')
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=60)
    plt.close(fig)
    return True


def _num(v):
    if v is None:
        return 'n/a'
    return '%.0f' % v if abs(v) >= 10 else '%.1f' % v


def _ratio_s(a, b):
    if a is None or not b:
        return 'n/a'
    return 'x%.2f' % (a / b)


# --------------------------------------------------------------------------
# the calibration columns

# (key, label, kind): kind 'ratio' is judged as model/kernel within 10%,
# 'points' as a difference within 5 points, 'report' is shown and not
# judged (tps and latency measure the FUSE transport, not the model).
COLUMNS = [
    ('charged_per_written', 'charged/written', 'ratio'),
    ('pauses', 'pauses', 'ratio'),
    ('paused_s', 'paused, s', 'ratio'),
    ('pause_p50_ms', 'median pause, ms', 'ratio'),
    ('pause_p90_ms', 'p90 pause, ms', 'ratio'),
    ('mean_dirty_mib', 'mean dirty, MiB', 'ratio'),
    ('peak_dirty_mib', 'peak dirty, MiB', 'ratio'),
    ('share_2m', '2 MiB share', 'points'),
    ('above_thresh_5s', '5 s samples above the threshold', 'points'),
    ('mean_tps', 'tps', 'report'),
    ('latency_ms', 'latency, ms', 'report'),
]
RATIO_TOL = 0.10
POINTS_TOL = 0.05
SAMPLE_S = 5


def byte_shares(counts):
    total = sum(n << o for o, n in enumerate(counts))
    return [(n << o) / total if total else 0.0 for o, n in enumerate(counts)]


def _ratio(a, b):
    return a / b if b else float('nan')


def every_nth(samples, n):
    """One sample in N (the 1 s samples as 5 s ones), from the first."""
    return samples[::n]


def columns_of(rows, pauses_ms):
    """The columns from per-iteration ROWS (dicts: charged, written pages,
    cached: 10 folio counts, tps, latency_ms, samples: [(dirty pages,
    thresh pages)] once a second) and PAUSES_MS, every pause taken in the
    runs (ms; pauses_of()): the pauses, their total and quantiles are all
    read from the events, on both sides alike."""
    samples = [s for r in rows for s in r['samples']]
    five = [s for r in rows for s in every_nth(r['samples'], SAMPLE_S)]
    return {
        'charged_per_written': _ratio(sum(r['charged'] for r in rows),
                                      sum(r['written'] for r in rows)),
        'pauses': len(pauses_ms),
        'paused_s': sum(pauses_ms) / 1000,
        'pause_p50_ms': quantile(pauses_ms, 0.5),
        'pause_p90_ms': quantile(pauses_ms, 0.9),
        'mean_dirty_mib': statistics.mean(d for d, _ in samples) * PAGE / MiB
        if samples else None,
        'peak_dirty_mib': max(d for d, _ in samples) * PAGE / MiB if samples else None,
        'share_2m': statistics.mean(byte_shares(r['cached'])[9] for r in rows),
        'above_thresh_5s': sum(d > t for d, t in five) / len(five) if five else None,
        'mean_tps': statistics.mean(r['tps'] for r in rows),
        'latency_ms': statistics.mean(r['latency_ms'] for r in rows)
        if all(r.get('latency_ms') is not None for r in rows) else None,
    }


def kernel_rows(res):
    """pg-seed.py's --json result -> the per-iteration rows of columns_of().
    Dirty is the server's own (its memory cgroup's dirty + writeback, as
    pg-seed.py samples it now; older references kept the machine's):
    the mount's charge is all the server's, while the kernel's
    balance_dirty_pages() sees every writer on the machine, and on a shared
    machine others' bursts set the machine's peak."""
    rows = []
    for r in res['iterations']:
        rows.append({'charged': r['charged_pages'], 'written': r['written_pages'],
                     'cached': [int(r['cached'].get(str(o), 0)) for o in range(10)],
                     'tps': r['tps'], 'latency_ms': r.get('latency_ms'),
                     'samples': [tuple(s) for s in r.get('dirty_samples', [])]})
    return rows


def read_model_iterations(path, config):
    """pgcompare's iterations.csv rows of CONFIG, in order."""
    csv_path = os.path.join(path, 'iterations.csv') if os.path.isdir(path) else path
    with open(csv_path, newline='') as f:
        rows = [r for r in csv.DictReader(f) if r['config'] == config]
    if not rows:
        raise ValueError('%s: no iterations of configuration %r' % (csv_path, config))
    return sorted(rows, key=lambda r: int(r['iteration']))


def read_model_samples(path, config):
    """{iteration: [stats samples of its pgbench run]} from pgcompare's
    samples.csv (or samples.csv.gz)."""
    csv_path = os.path.join(path, 'samples.csv')
    opener = open
    if not os.path.exists(csv_path) and os.path.exists(csv_path + '.gz'):
        opener, csv_path = gzip.open, csv_path + '.gz'
    out = {}
    if not os.path.exists(csv_path):
        return out
    with opener(csv_path, 'rt', newline='') as f:
        for r in csv.DictReader(f):
            if r['config'] == config and r['phase'] == 'run':
                out.setdefault(int(r['iteration']), []).append(r)
    return out


def model_rows(path, config):
    """pgcompare's report directory -> the per-iteration rows of columns_of()."""
    samples = read_model_samples(path, config)
    rows = []
    for r in read_model_iterations(path, config):
        its = samples.get(int(r['iteration']), [])
        rows.append({'charged': int(r['run_nr_dirtied']),
                     'written': int(r['run_backing_write_bytes']) / PAGE,
                     'cached': [int(x) for x in r['cached_folios'].split()],
                     'tps': float(r['tps']),
                     'latency_ms': float(r['latency_avg_ms']) if r.get('latency_avg_ms')
                     else None,
                     'samples': [(int(s['nr_dirty']), int(s['dirty_thresh'])) for s in its]})
    return rows


def pauses_of(log):
    return [r['pause'] for r in log.rows('balance_dirty_pages') if r['pause'] > 0]


def error_of(kind, m, k):
    if m is None or k is None:
        return None
    if kind == 'points':
        return m - k
    if m == 0 and k == 0:
        return 1.0      # none on either side (no pause at all): a match
    return _ratio(m, k)


def within(kind, err):
    if err is None or (isinstance(err, float) and math.isnan(err)):
        return None
    if kind == 'points':
        return abs(err) <= POINTS_TOL
    if kind == 'ratio':
        return abs(err - 1) <= RATIO_TOL
    return None


def error_table(cols):
    """COLS: [(name, columns)] with the kernel first -> (markdown lines,
    {name: {key: {value, error, within}}})."""
    kname, kcol = cols[0]
    head = '| column | ' + ' | '.join(n for n, _ in cols) + ''.join(
        ' | %s error' % n for n, _ in cols[1:]) + ' |'
    out = [head, '|---|' + '---:|' * (2 * len(cols) - 1)]
    js = {n: {} for n, _ in cols}
    for key, label, kind in COLUMNS:
        cells = [_fmt(key, c.get(key)) for _, c in cols]
        errs = []
        for n, c in cols[1:]:
            e = error_of(kind, c.get(key), kcol.get(key))
            w = within(kind, e)
            js[n][key] = {'value': c.get(key), 'error': e, 'within': w}
            mark = '' if w is None else (' ok' if w else ' **out**')
            if kind == 'report':
                mark = ' (reported)'
            elif c.get(key) is None and kcol.get(key) is None:
                mark = ' (none on either side)'
            errs.append(_fmt_err(kind, e) + mark)
        js[kname][key] = {'value': kcol.get(key)}
        out.append('| %s | %s | %s |' % (label, ' | '.join(cells), ' | '.join(errs)))
    return out, js


def repeat_summary(results):
    """RESULTS: the calibrate.json results of runs of one sizing (each
    {'columns': {side: {key: {'value', ...}}}}) -> (markdown lines, JSON):
    the error table on each side's medians (error_table()), then every
    run's value per column and each side's range.  A side's median of a
    column is over the runs that have a value."""
    sides = [s for s in ('kernel', 'model', 'sim')
             if all(s in r['columns'] for r in results)]
    vals = {s: {key: [r['columns'][s][key]['value'] for r in results
                      if r['columns'][s].get(key, {}).get('value') is not None]
                for key, _, _ in COLUMNS} for s in sides}
    med = {s: {key: statistics.median(v) if v else None for key, v in vals[s].items()}
           for s in sides}
    table, js = error_table([(s, med[s]) for s in sides])
    n = len(results)
    out = ['On the medians of %d runs a side:' % n, ''] + table
    out += ['', 'Each run (kernel, then model%s), and each side\'s range:' %
            (', then sim' if 'sim' in sides else ''), '',
            '| column | ' + ' | '.join('%s %d' % (s, i + 1) for s in sides for i in range(n))
            + ' | ' + ' | '.join('%s range' % s for s in sides) + ' |',
            '|---|' + '---:|' * (n * len(sides) + len(sides))]
    for key, label, _ in COLUMNS:
        cells = [_fmt(key, r['columns'][s].get(key, {}).get('value'))
                 for s in sides for r in results]
        ranges = ['%s-%s' % (_fmt(key, min(vals[s][key])), _fmt(key, max(vals[s][key])))
                  if vals[s][key] else 'n/a' for s in sides]
        out.append('| %s | %s | %s |' % (label, ' | '.join(cells), ' | '.join(ranges)))
    return out, {'runs': n, 'medians': js, 'values': vals}


def _fmt(key, v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return 'n/a'
    if key in ('share_2m', 'above_thresh_5s'):
        return '%.1f%%' % (100 * v)
    if key == 'charged_per_written':
        return 'x%.2f' % v
    if key == 'pauses':
        return '%d' % v
    return '%.1f' % v


def _fmt_err(kind, e):
    if e is None or (isinstance(e, float) and math.isnan(e)):
        return 'n/a'
    if kind == 'points':
        return '%+.1f pt' % (100 * e)
    return 'x%.2f' % e


# --------------------------------------------------------------------------
# the cache by file class and LRU list, kernel and model (issue 37)

def _held(h):
    """{'mib', 'share_2m'} of folio counts H ({order: n}, orders as numbers
    or strings): their memory, and the share of it in 2 MiB folios (None
    when there is none)."""
    pages = sum(n << int(o) for o, n in h.items())
    big = sum(n << 9 for o, n in h.items() if int(o) == 9)
    return {'mib': pages * PAGE / MiB, 'share_2m': big / pages if pages else None}


def _pages(h):
    return sum(n << int(o) for o, n in h.items())


def kernel_cache_rows(res):
    """pg-seed.py's --json result -> per iteration {iteration, classes:
    {class: _held()} after the run, source: _held() after the source step,
    active_mib and inactive_mib (the file system's folios on the LRU lists,
    by PG_active from /proc/kpageflags), cg_active_mib and cg_inactive_mib
    (the memory cgroup's active_file and inactive_file)}; None when the
    reference predates cached_by_class and lru."""
    its = res.get('iterations') or []
    if not its or not all(r.get('cached_by_class') and r.get('lru') for r in its):
        return None
    rows = []
    for r in its:
        on, act = _pages(r['lru'].get('lru', {})), _pages(r['lru'].get('active', {}))
        cg = r.get('cg_memory_end') or {}
        rows.append({'iteration': int(r['iter']),
                     'classes': {c: _held(h) for c, h in r['cached_by_class'].items()},
                     'source': _held(r['source_cached']) if 'source_cached' in r else None,
                     'active_mib': act * PAGE / MiB, 'inactive_mib': (on - act) * PAGE / MiB,
                     'cg_active_mib': cg.get('active_file'),
                     'cg_inactive_mib': cg.get('inactive_file')})
    return rows


def model_cache_rows(path, config):
    """pgcompare's report directory -> kernel_cache_rows()'s rows (the LRU
    lists: the cache's, from .foliofs/stats; no cgroup); None when its
    iterations.csv predates run_by_class."""
    rows = []
    for r in read_model_iterations(path, config):
        if not r.get('run_by_class') or not r.get('active_bytes'):
            return None
        src = {}
        for c in json.loads(r['source_by_class'] or '{}').values():
            for o, n in c['folios'].items():
                src[o] = src.get(o, 0) + n
        rows.append({'iteration': int(r['iteration']),
                     'classes': {k: _held(c['folios'])
                                 for k, c in json.loads(r['run_by_class']).items()},
                     'source': _held(src) if r['source_by_class'] else None,
                     'active_mib': int(r['active_bytes']) / MiB,
                     'inactive_mib': int(r['inactive_bytes']) / MiB,
                     'cg_active_mib': None, 'cg_inactive_mib': None})
    return rows


def _mib(v):
    return 'n/a' if v is None else '%.0f' % v


def _pct(v):
    return 'n/a' if v is None else '%.0f%%' % (100 * v)


def _mean(vals):
    vals = [v for v in vals if v is not None]
    return statistics.mean(vals) if vals else None


def cache_tables(krows, mrows):
    """Markdown lines: per iteration both sides ran, kernel / model in each
    cell, the cache after the run by file class (MiB, 2 MiB share), then
    the whole cache after the source step (MiB, 2 MiB share) and the LRU
    lists after the run (MiB); a last row of the means."""
    k = {r['iteration']: r for r in krows}
    m = {r['iteration']: r for r in mrows}
    its = sorted(set(k) & set(m))
    classes = list(FILE_CLASSES) + sorted(
        {c for r in krows + mrows for c in r['classes']} - set(FILE_CLASSES))

    def cls(r, c, key):
        held = r['classes'].get(c)
        return held[key] if held else (0.0 if key == 'mib' else None)

    def src(r, key):
        return r['source'][key] if r['source'] else None

    cols = [x for c in classes for x in (
        ('%s MiB' % c, _mib, lambda r, c=c: cls(r, c, 'mib')),
        ('%s 2M' % c, _pct, lambda r, c=c: cls(r, c, 'share_2m')))]
    whole = [('after source MiB', _mib, lambda r: src(r, 'mib')),
             ('after source 2M', _pct, lambda r: src(r, 'share_2m')),
             ('active MiB', _mib, lambda r: r['active_mib']),
             ('inactive MiB', _mib, lambda r: r['inactive_mib'])]
    out = ['The cache after each run by file class (pgbench_accounts, its primary key, '
           'pg_wal\'s segments, the rest): MiB, and the share of the class\'s bytes in '
           '2 MiB folios; kernel / model in each cell:', '']
    out += _pair_table(cols, its, k, m)
    out += ['', 'The whole cache: after the source step, MiB and 2 MiB share; after the run, '
            'the LRU lists, MiB (the kernel\'s: the file system\'s folios by PG_active from '
            '/proc/kpageflags; the model\'s: its active and inactive lists); kernel / model in '
            'each cell, then the kernel\'s memory cgroup (active_file / inactive_file, which '
            'also hold what is not the database\'s):', '']
    tab = _pair_table(whole, its, k, m)
    tab[0] += ' kernel cgroup active / inactive MiB |'
    tab[1] += '---:|'
    for i, it in enumerate(its + ['mean']):
        rows = [k[it]] if it != 'mean' else [k[x] for x in its]
        tab[2 + i] += ' %s / %s |' % (_mib(_mean(r['cg_active_mib'] for r in rows)),
                                      _mib(_mean(r['cg_inactive_mib'] for r in rows)))
    return out + tab


def _pair_table(cols, its, k, m):
    """Markdown rows of COLS ([(label, format, value of a row)]) for the
    iterations ITS, 'kernel / model' in each cell, and their means."""
    out = ['| iteration | ' + ' | '.join(label for label, _, _ in cols) + ' |',
           '|---:|' + '---:|' * len(cols)]
    for it in its:
        out.append('| %d | ' % it + ' | '.join('%s / %s' % (f(get(k[it])), f(get(m[it])))
                                               for _, f, get in cols) + ' |')
    out.append('| mean | ' + ' | '.join(
        '%s / %s' % (f(_mean(get(k[it]) for it in its)), f(_mean(get(m[it]) for it in its)))
        for _, f, get in cols) + ' |')
    return out


def cache_section(kres, mdir, config):
    """The report's lines on the cache by class and LRU list (cache_tables()),
    and its rows for JSON ({'kernel': rows, 'model': rows}); a one-line
    note and None when a side's files predate them (a run before
    pg-seed.py recorded them, or before pgcompare.py did)."""
    krows, mrows = kernel_cache_rows(kres), model_cache_rows(mdir, config)
    lacking = [what for what, rows in (
        ('the kernel side (kernel.json: cached_by_class, lru)', krows),
        ('the model side (iterations.csv: run_by_class, active_bytes)', mrows)) if rows is None]
    if lacking:
        return ['No table of the cache by file class and LRU list: %s of this run '
                'lack%s it.' % (' and '.join(lacking), '' if len(lacking) > 1 else 's')], None
    return cache_tables(krows, mrows), {'kernel': krows, 'model': mrows}
