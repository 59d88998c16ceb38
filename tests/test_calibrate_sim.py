# SPDX-License-Identifier: GPL-2.0-or-later
"""calibrate.py's simulator side without PostgreSQL: a trace recorded on a
mount (contrib/lib/foliofs_trace.py's MountTrace, as pgcompare.py --trace
records one) over two timed windows of known work, replayed through
contrib/kernel/simside.py as calibrate.py replays the model's:

- the clock: every record of a window's work lies inside that window
  mapped onto the trace (the origin found from the marking write);
- the windows on the replay's virtual clock: an unthrottled replay writes
  in each window exactly what the test wrote in it;
- the columns against the replay's own output: over one window holding the
  whole replay, charged, written, pauses, paused time and the cached
  folios by size are the stats foliofs-sim prints at its end (a throttled
  replay, so that there are pauses to count); a window of nothing counts
  nothing;
- the pauses one by one (as root, with bpftrace, a foliofs-sim with
  probes): as many as the replay's throttle_events, each window's those
  its counter places there, whose quantiles are the window's;
- the pure pieces: the sample a counter is read at, one sample a second,
  the replay's options from the mount's.
"""
import gzip
import json
import os
import subprocess
import sys
import time

import pytest

import util
from util import FOLIOFS, FOLIOFSCTL, Mount

sys.path.insert(0, os.path.join(util.REPO, 'contrib', 'lib'))
sys.path.insert(0, os.path.join(util.REPO, 'contrib', 'kernel'))
import foliofs_trace  # noqa: E402
import refcmp  # noqa: E402
import simside  # noqa: E402

FOLIOSIM = os.environ.get('FOLIOSIM', os.path.join(os.path.dirname(os.path.abspath(FOLIOFS)),
                                                   'sim', 'foliofs-sim'))
MiB = 1 << 20
HEADER = os.path.join(util.REPO, 'probes', 'foliofs_tp.h')
GAP_S = 0.4     # idle before and after each window: four stats lines of the replay


def run(cmd):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True,
                          timeout=60).stdout


def timed(fn):
    """(start_unix_ms, end_unix_ms) of FN's run, GAP_S of idle after it."""
    t0 = int(time.time() * 1000)
    fn()
    t1 = int(time.time() * 1000) + 1
    time.sleep(GAP_S)
    return t0, t1


# One window's work, in a process of its own: a replay issues a writer's
# first record at its recorded time, then each after the think time that
# followed the one before (its ops take their own time, not the mount's), so
# a writer alive across windows would drift from them; pgbench's clients
# are new connections each run.
WORK = r'''
import os, sys
read, path, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
if read:
    with open(read, 'rb') as f:
        while f.read(1 << 17):
            pass
fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
for off in range(0, size, 8192):
    os.pwrite(fd, b'x' * 8192, off)
os.fsync(fd)
os.close(fd)
'''


def work(read, path, size):
    subprocess.run([sys.executable, '-c', WORK, read, path, str(size)], check=True, timeout=60)


@pytest.fixture
def recorded(dirs):
    """(traces.json entry, [(window, bytes written in it, file ids)]) of a
    trace of two windows: 6 MiB written to a; then a read back and 2 MiB
    written to b."""
    if not os.path.exists(FOLIOSIM):
        pytest.skip('%s not built' % FOLIOSIM)
    root, back, mnt = dirs
    path = os.path.join(root, 't.trace')
    with Mount(back, mnt):
        tr = foliofs_trace.MountTrace(FOLIOFSCTL, mnt, path, run)
        tr.start()
        time.sleep(GAP_S)
        a, b = os.path.join(mnt, 'a'), os.path.join(mnt, 'b')
        w1 = timed(lambda: work('', a, 6 * MiB))
        w2 = timed(lambda: work(a, b, 2 * MiB))
        tr.stop()
        fids = [foliofs_trace.file_id(os.stat(p).st_ino) for p in (a, b)]
    iters = [{'iteration': i + 1, 'start_unix_ms': w[0], 'end_unix_ms': w[1],
              'stop_end_unix_ms': w[1]} for i, w in enumerate((w1, w2))]
    entry = dict(tr.json(), trace=path, windows=tr.windows(iters),
                 options='cache_size=64M,stats_log=/dev/null,stats_interval_ms=1000')
    assert entry['records'] > 1024 and entry['uncertainty_ms'] < 50, entry
    return entry, [(entry['windows'][0], 6 * MiB, {fids[0]}),
                   (entry['windows'][1], 2 * MiB, {fids[1]})]


def test_windows_hold_their_work(recorded, tmp_path):
    entry, wins = recorded
    recs = list(foliofs_trace.trace_records(entry['trace']))
    assert recs[0]['time_ns'] == entry['first_ns']
    for w, nbytes, fids in wins:
        # (a's inode may be the marking file's, made and removed before)
        writes = [r for r in recs if r['op'] == 'write' and r['file'] in fids
                  and (r['offset'], r['length']) != (0, 1)]
        assert sum(r['length'] for r in writes) == nbytes
        assert all(w['start_ns'] <= r['time_ns'] < w['end_ns'] for r in writes), \
            (w, writes[0]['time_ns'], writes[-1]['time_ns'])
    # Unthrottled, the replay keeps the recorded times: each window holds
    # what was written in it, to the byte.
    meta = simside.replay(FOLIOSIM, entry, str(tmp_path), str(tmp_path))
    assert 'sim_data=0' in meta['options'] and 'stats_log' not in meta['options']
    cols, rows, _ = simside.load(str(tmp_path))
    assert [r['app_write_bytes'] for r in rows] == [n for _, n, _ in wins]
    assert [r['pauses'] for r in rows] == [0, 0]
    assert all(r['charged'] > 0 and r['written'] > 0 for r in rows), rows
    # At most one dirty sample a second of each window.
    for (w, _, _), r in zip(wins, rows):
        assert len(r['samples']) <= 1 + (w['end_ns'] - w['start_ns']) // 10 ** 9, (w, r)
    assert cols['pauses'] == 0 and cols['pause_p50_ms'] is None and cols['mean_tps'] is None


def test_columns_are_the_replays_stats(recorded, tmp_path):
    entry, _ = recorded
    # Throttled: a dirty limit far under what a window writes, a slow device.
    entry = dict(entry, options=entry['options'] + ',dirty_bytes=512K,'
                 'dirty_background_bytes=256K,dev_bw=20M')
    meta = simside.replay(FOLIOSIM, entry, str(tmp_path), str(tmp_path))
    stats = simside.final_stats(os.path.join(str(tmp_path), 'sim', 'replay.txt'))
    samples = simside.load_samples(os.path.join(str(tmp_path), 'sim', 'stats.jsonl.gz'))
    whole, none = simside.sim_rows(samples, [(0, -1, 1e12), (1, -1, -0.5)])
    assert whole['charged'] == stats['nr_dirtied'] > 0
    assert whole['written'] * 4096 == stats['backing_write_bytes'] > 0
    assert whole['pauses'] == stats['throttle_events'] > 0
    assert whole['paused_ms'] == stats['throttle_ms'] > 0
    assert whole['cached'] == [stats['folios_%dk' % (4 << o)] for o in range(10)]
    assert whole['app_write_bytes'] == 8 * MiB + 1     # and the marking byte
    assert (none['charged'], none['written'], none['pauses'], none['samples']) == (0, 0, 0, [])
    # The windows' columns add up to no more than the whole.
    cols = simside.sim_columns(simside.sim_rows(samples, meta['windows']))
    assert 0 <= cols['pauses'] <= stats['throttle_events']
    if cols['mean_dirty_mib'] is not None:
        assert cols['peak_dirty_mib'] >= cols['mean_dirty_mib'] >= 0
    assert cols['charged_per_written'] > 0


@pytest.mark.timeout(300)
def test_pauses_one_by_one(recorded, tmp_path):
    entry, _ = recorded
    why = simside.can_trace(FOLIOSIM)
    if why:
        pytest.skip(why)
    entry = dict(entry, options=entry['options'] + ',dirty_bytes=512K,'
                 'dirty_background_bytes=256K,dev_bw=20M')
    meta = simside.replay(FOLIOSIM, entry, str(tmp_path), str(tmp_path), HEADER)
    assert meta['pauses_traced'], meta
    stats = simside.final_stats(os.path.join(str(tmp_path), 'sim', 'replay.txt'))
    cols, rows, _ = simside.load(str(tmp_path))
    samples = simside.load_samples(os.path.join(str(tmp_path), 'sim', 'stats.jsonl.gz'))
    with gzip.open(os.path.join(str(tmp_path), 'sim', 'pauses.json.gz'), 'rt') as f:
        pauses = json.load(f)
    # Every pause taken, as many as the counter says.
    assert len(pauses) == stats['throttle_events'] > 0
    assert all(p > 0 for p in pauses), pauses[:20]
    whole, = simside.sim_rows(samples, [(0, -1, 1e12)], pauses)
    assert whole['pauses_ms'] == pauses
    for r in rows:
        assert len(r['pauses_ms']) == r['pauses']
    got = [p for r in rows for p in r['pauses_ms']]
    assert cols['pauses'] == len(got)
    assert cols['paused_s'] == sum(got) / 1000
    if got:
        assert cols['pause_p50_ms'] == refcmp.quantile(got, 0.5)
        assert cols['pause_p90_ms'] == refcmp.quantile(got, 0.9)
    else:
        assert cols['pause_p50_ms'] is None


def test_pieces():
    samples = [dict(dict.fromkeys(simside.KEYS, 0), time_ms=t, nr_dirtied=t)
               for t in range(0, 5000, 100)]
    assert simside.at(samples, 250)['time_ms'] == 200
    assert simside.at(samples, -5)['time_ms'] == 0
    assert simside.at(samples, 10 ** 9)['time_ms'] == 4900
    assert simside.after(samples, 250)['time_ms'] == 300
    assert simside.after(samples, 300)['time_ms'] == 300
    assert simside.after(samples, 10 ** 9)['time_ms'] == 4900
    assert [s['time_ms'] for s in simside.per_second(samples, 150, 3300)] == \
        [200, 1200, 2200, 3200]
    assert [s['time_ms'] for s in simside.per_second(samples[::7], 0, 5000)] == \
        [0, 1400, 2100, 3500, 4200]
    assert simside.sim_options('folio_size=2M,stats_log=/x/y,dirty_account=folio,'
                               'stats_interval_ms=1000,trace=/t') == \
        'folio_size=2M,dirty_account=folio,sim_data=0,stats_interval_ms=%d' % simside.STATS_MS
    assert foliofs_trace.file_id(0x100000002) == 3
