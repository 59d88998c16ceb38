# SPDX-License-Identifier: GPL-2.0-or-later
"""simside.py: calibrate.py's third side, the simulator: foliofs-sim
replaying the trace the mount recorded over the model side's whole run
(pgcompare.py --trace), with the model configuration's options, and the
calibration columns of refcmp.py computed from the replay's stats log over
the same pgbench runs.  Imported as a plain module, as refcmp.

The windows.  pgcompare.py's traces.json gives each iteration's pgbench
run on the trace's clock (start_ns, end_ns; foliofs_trace.py says how the
unix times are mapped).  The replay's virtual clock starts at the trace's
first record (first_ns), and its stats log's time_ms is that clock, so a
run is [start_ns - first_ns, end_ns - first_ns) there.  The replay keeps
each writer's recorded think times: where it throttles more than the mount
did, writers fall behind their recorded times and part of a run's work
moves past the window's end (less: ahead).  How much is measured: the
application bytes written in each window, the replay's over the mount's
(`app_write_ratio`, 1.00 when the windows hold the same work).

The columns, per window, from the stats log (a line every STATS_MS of
virtual time; a window is read from the last line at or before its start
to the first at or after its end, which holds all of it):

  charged, written   nr_dirtied and backing_write_bytes (in pages) at the
                     window's end less at its start, as pgcompare's run_
                     deltas of the mount
  cached folios      folios_4k .. folios_2048k at the window's end
  dirty samples      (nr_dirty, dirty_thresh) once a second of the window,
                     from its start, as the mount's one-second stats log
  pauses             throttle_events at the end less at the start: it
                     counts exactly the balance_dirty_pages rounds with
                     pause > 0 (writeback/throttle.c), the model's and the
                     kernel's `pauses`
  pause quantiles,   the pauses one by one, when the replay's USDT probes
  paused             can be traced (root, bpftrace, a foliofs-sim built
                     with probes): each balance_dirty_pages event with
                     pause > 0, in the order they fire, which is the order
                     throttle_events counts them (one thread, the count
                     taken right after the probe), so the window's pauses
                     are events number throttle_events at its start + 1
                     to throttle_events at its end; the probes carry no
                     virtual time, the counter places them.  Median, p90
                     and their sum (paused) as the other sides read theirs.
                     Without the events (or if their number is not the
                     replay's throttle_events: one was lost): paused from
                     throttle_ms (the time writers were held, which ends
                     within a tick of the pause), no median or p90

What the replay cannot give: tps and latency (the trace has no
transactions).

Files in calibrate's -O DIR: sim/stats.jsonl.gz (the replay's stats log),
sim/replay.txt (foliofs-sim's output: every stat at the end and the
summary), sim/pauses.json.gz (every pause taken, ms, in order, when
traced), sim/sim.json (the trace, the options, the windows, how the pauses
were read); --report-only reads these and the model's traces.json, and
replays nothing.
"""

import gzip
import json
import os
import shlex
import shutil
import subprocess
import tempfile

import refcmp

PAGE = refcmp.PAGE
STATS_MS = 100
# The mount's options the replay does not take (set by pgcompare, or
# refused by foliofs-sim), and what it adds: folios without memory (the
# counts are the same; a 512 MiB cache costs no memory), the stats log's
# period.
DROP = ('stats_log', 'stats_interval_ms', 'trace')
ADD = (('sim_data', '0'), ('stats_interval_ms', str(STATS_MS)))
# What a window's row reads of each stats line.
KEYS = ('time_ms', 'nr_dirtied', 'backing_write_bytes', 'app_write_bytes', 'throttle_events',
        'throttle_ms', 'nr_dirty', 'dirty_thresh') + tuple(
            'folios_%dk' % (4 << o) for o in range(10))


def sim_options(mount_opts):
    """The replay's -o of a mount's options MOUNT_OPTS ('a=1,b,...')."""
    opts = []
    for item in mount_opts.split(','):
        if item and item.partition('=')[0] not in DROP:
            opts.append(item)
    return ','.join(opts + ['%s=%s' % kv for kv in ADD])


def sim_dir(out, name='sim'):
    return os.path.join(out, name)


def read_traces(mdir, config):
    """pgcompare's traces.json entry of CONFIG in its report directory MDIR."""
    with open(os.path.join(mdir, 'traces.json')) as f:
        traces = json.load(f)
    if config not in traces:
        raise ValueError('%s/traces.json: no trace of configuration %r' % (mdir, config))
    return traces[config]


def windows_of(tr):
    """[(iteration, t0_ms, t1_ms)]: each pgbench run of the traces.json
    entry TR on the replay's virtual clock."""
    first = tr['first_ns']
    return [(w['iteration'], (w['start_ns'] - first) / 1e6, (w['end_ns'] - first) / 1e6)
            for w in tr['windows']]


PAUSE_PROG = """#include "%s"
usdt:%s:foliofs:balance_dirty_pages
{
  $a = (struct foliofs_balance_dirty_pages *)arg0;
  if ($a->pause > 0) { printf("P %%llu %%ld\\n", nsecs, $a->pause); }
}
"""


def traced_run(cmd, header, events_path, out):
    """Run CMD under bpftrace -c (started once the probes are attached,
    bpftrace ending with it), its output into the file OUT; every
    balance_dirty_pages event with pause > 0 of CMD[0] (built with probes)
    into EVENTS_PATH.  The pauses (ms) in the order they fired, and the
    events bpftrace lost.  Context: root."""
    prog = PAUSE_PROG % (os.path.abspath(header), os.path.abspath(cmd[0]))
    subprocess.run(['bpftrace', '-o', events_path, '-c', shlex.join(cmd), '-e', prog],
                   stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    events, lost = [], 0
    with open(events_path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == 'P':
                events.append((int(parts[1]), int(parts[2])))
            elif line.startswith('Lost '):
                lost += int(parts[1])
    os.unlink(events_path)
    # Per-CPU buffers: in firing order again by their timestamps.
    return [p for _, p in sorted(events, key=lambda e: e[0])], lost


def can_trace(foliosim):
    """Why the replay's pauses cannot be traced one by one, or None."""
    if os.geteuid() != 0:
        return 'not root'
    if not shutil.which('bpftrace'):
        return 'no bpftrace'
    notes = subprocess.run(['readelf', '-n', foliosim], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True).stdout
    if 'balance_dirty_pages' not in notes:
        return '%s has no USDT probes' % foliosim
    return None


def final_stats(path):
    """The stats foliofs-sim printed at its end ('name value' lines)."""
    out = {}
    with open(path, errors='replace') as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                out[parts[0]] = int(parts[1])
    return out


def replay(foliosim, tr, out, tmpdir, header=None, name='sim'):
    """Replay the trace of the traces.json entry TR (gzipped or not) with
    its mount's options into OUT/NAME/; what was run, as sim.json holds it.
    With HEADER (probes/foliofs_tp.h) and can_trace(), the pauses are
    traced one by one.  Context: may take minutes for a long run (CPU
    only); root for the tracing."""
    d = sim_dir(out, name)
    os.makedirs(d, exist_ok=True)
    trace = tr['trace']
    tmp = None
    if trace.endswith('.gz'):
        # The replay reads its trace twice, from a regular file.
        fd, tmp = tempfile.mkstemp(suffix='.trace', dir=tmpdir)
        with os.fdopen(fd, 'wb') as dst, gzip.open(trace, 'rb') as src:
            shutil.copyfileobj(src, dst, 1 << 20)
    opts = sim_options(tr['options'])
    log = os.path.join(d, 'stats.jsonl')
    cmd = [foliosim, tmp or trace, '-o', opts, '--stats-log', log]
    why = 'not asked' if header is None else can_trace(foliosim)
    pauses = lost = None
    try:
        with open(os.path.join(d, 'replay.txt'), 'w') as f:
            if why is None:
                pauses, lost = traced_run(cmd, header, os.path.join(d, 'events.txt'), f)
            else:
                subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
    finally:
        if tmp:
            os.unlink(tmp)
    stats = final_stats(os.path.join(d, 'replay.txt'))
    if 'throttle_events' not in stats or not os.path.exists(log):
        # (bpftrace -c exits 0 whatever its command did: the output says.)
        with open(os.path.join(d, 'replay.txt'), errors='replace') as f:
            raise RuntimeError('foliofs-sim failed: %s' % f.read()[-2000:])
    with open(log, 'rb') as src, gzip.open(log + '.gz', 'wb') as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    os.unlink(log)
    if pauses is not None:
        if lost or len(pauses) != stats['throttle_events']:
            why = 'bpftrace saw %d pauses of %d (lost %d)' % (len(pauses),
                                                           stats['throttle_events'], lost)
        else:
            with gzip.open(os.path.join(d, 'pauses.json.gz'), 'wt') as f:
                json.dump(pauses, f)
    meta = {'trace': trace, 'options': opts, 'command': ' '.join(cmd[:1] + ['TRACE'] + cmd[2:]),
            'stats_ms': STATS_MS, 'windows': windows_of(tr),
            'trace_records': tr.get('records'), 'trace_bytes': tr.get('bytes'),
            'pauses_traced': why is None, 'pauses_not_traced': why}
    with open(os.path.join(d, 'sim.json'), 'w') as f:
        json.dump(meta, f, indent=1)
    return meta


def load_samples(path):
    """The replay's stats log (gzipped or not): a dict of KEYS per line."""
    opener = gzip.open if path.endswith('.gz') else open
    out = []
    with opener(path, 'rt') as f:
        for line in f:
            s = json.loads(line)
            out.append({k: s.get(k, 0) for k in KEYS})
    return out


def at(samples, t_ms):
    """The last sample at or before T_MS (the first if none is)."""
    best = samples[0]
    for s in samples:
        if s['time_ms'] > t_ms:
            break
        best = s
    return best


def after(samples, t_ms):
    """The first sample at or after T_MS (the last if none is)."""
    for s in samples:
        if s['time_ms'] >= t_ms:
            return s
    return samples[-1]


def per_second(samples, t0, t1):
    """One sample a second of [T0, T1): the first at or after T0, T0 + 1 s, ..."""
    out, due = [], t0
    for s in samples:
        if s['time_ms'] >= t1:
            break
        if s['time_ms'] >= due:
            out.append(s)
            due += 1000 * (1 + (s['time_ms'] - due) // 1000)
    return out


def sim_rows(samples, windows, pauses=None):
    """The per-window rows of refcmp.columns_of() (tps and latency None),
    with each window's pauses, paused_ms and app_write_bytes besides, and
    with PAUSES (every pause taken, in order) its pauses_ms."""
    rows = []
    for it, t0, t1 in windows:
        a, b = at(samples, t0), after(samples, t1)
        rows.append({'iteration': it,
                     'charged': b['nr_dirtied'] - a['nr_dirtied'],
                     'written': (b['backing_write_bytes'] - a['backing_write_bytes']) / PAGE,
                     'cached': [b['folios_%dk' % (4 << o)] for o in range(10)],
                     'tps': None, 'latency_ms': None,
                     'samples': [(s['nr_dirty'], s['dirty_thresh'])
                                 for s in per_second(samples, t0, t1)],
                     'pauses': b['throttle_events'] - a['throttle_events'],
                     'paused_ms': b['throttle_ms'] - a['throttle_ms'],
                     'app_write_bytes': b['app_write_bytes'] - a['app_write_bytes'],
                     'pauses_ms': pauses[a['throttle_events']:b['throttle_events']]
                     if pauses is not None else None})
    return rows


def sim_columns(rows):
    """refcmp.columns_of()'s columns of ROWS: with the pauses one by one
    (pauses_ms) from them, as the other sides'; else their number and
    time from the counters, no quantiles.  No tps or latency (None)."""
    if all(r['pauses_ms'] is not None for r in rows):
        cols = refcmp.columns_of([dict(r, tps=0.0, latency_ms=None) for r in rows],
                                 [p for r in rows for p in r['pauses_ms']])
    else:
        cols = refcmp.columns_of([dict(r, tps=0.0, latency_ms=None) for r in rows], [])
        cols.update(pauses=sum(r['pauses'] for r in rows),
                    paused_s=sum(r['paused_ms'] for r in rows) / 1000,
                    pause_p50_ms=None, pause_p90_ms=None)
    cols.update(mean_tps=None, latency_ms=None)
    return cols


def load(out, name='sim'):
    """(columns, rows, sim.json) of the replay in OUT/NAME/, or None when
    there is none."""
    d = sim_dir(out, name)
    if not os.path.exists(os.path.join(d, 'sim.json')):
        return None
    with open(os.path.join(d, 'sim.json')) as f:
        meta = json.load(f)
    pauses = None
    if os.path.exists(os.path.join(d, 'pauses.json.gz')):
        with gzip.open(os.path.join(d, 'pauses.json.gz'), 'rt') as f:
            pauses = json.load(f)
    rows = sim_rows(load_samples(os.path.join(d, 'stats.jsonl.gz')), meta['windows'], pauses)
    return sim_columns(rows), rows, meta


def drift(rows, mdir, config):
    """{iteration: the replay's application bytes written in the window
    over the mount's in its run} (None where the mount wrote none)."""
    mount = {int(r['iteration']): int(r['run_app_write_bytes'])
             for r in refcmp.read_model_iterations(mdir, config)}
    return {r['iteration']: r['app_write_bytes'] / mount[r['iteration']]
            if mount.get(r['iteration']) else None for r in rows}


def report_lines(rows, meta, mdir, config):
    """Markdown lines saying what the sim column is, and how well the
    windows hold the runs' work."""
    d = drift(rows, mdir, config)
    ratios = ', '.join('%s' % ('n/a' if v is None else '%.2f' % v)
                       for _, v in sorted(d.items()))
    if meta.get('pauses_traced'):
        how = ('its pauses one by one from its balance_dirty_pages probe, placed in the '
               'windows by its throttle_events')
    else:
        how = ('its pauses and paused time from its throttle_events and throttle_ms, '
               'not one by one (%s), so no median or p90'
               % (meta.get('pauses_not_traced') or 'not traced'))
    return ['sim: foliofs-sim replaying the trace the mount recorded over the model\'s '
            'whole run (`%s`, %s records), `-o %s`, each pgbench run mapped onto the replay\'s '
            'virtual clock by its trace time; %s; no tps or latency '
            '(contrib/kernel/simside.py).  Application bytes written in each window, '
            'replay / mount (1.00: the window holds the run\'s work): %s.'
            % (meta['trace'], meta.get('trace_records') or '?', meta['options'], how, ratios)]
