"""contrib/kernel/calibrate.py --tiny: this machine's kernel and a mount on
one small PostgreSQL sizing, the error table and the throttle's events
side by side.  What is checked is that every column is there and computed
on both sides, and that the event comparison has both sides' events; not
how close the model is (a CI machine is too noisy for that, and the tiny
sizing is not one of the calibrated ones).  The third side, foliofs-sim
replaying the trace the mount recorded (--sim), has every column but the
tps and latency, which it cannot give; its pauses are traced one by one
(its build has the daemon's probes).  The fourth, foliofs-sim replaying
the kernel side's own file I/O (--sim-kernel, contrib/kernel/kio.py), has
the same columns as the third; its windows must hold the kernel's runs'
writes.

Runs as root (a loop device, tracefs, a memory cgroup, bpftrace on the
mount's probes) and is skipped with the reason where it cannot run.  It
holds the drop_caches lock exclusively, as tests/test_kernel_ref.py does:
it traces and evicts files, which must not meet the other session's tests.
"""

import json
import math
import os
import shutil
import subprocess
import tempfile

import pytest

import util

SCRIPT = os.path.join(util.REPO, 'contrib', 'kernel', 'calibrate.py')
pytestmark = pytest.mark.drops_caches

COLUMNS = ('charged_per_written', 'pauses', 'paused_s', 'pause_p50_ms', 'pause_p90_ms',
           'mean_dirty_mib', 'peak_dirty_mib', 'share_2m', 'above_thresh_5s', 'mean_tps',
           'latency_ms')
LABELS = ('charged/written', 'pauses', 'paused, s', 'median pause, ms', 'p90 pause, ms',
          'mean dirty, MiB', 'peak dirty, MiB', '2 MiB share',
          '5 s samples above the threshold', 'tps', 'latency, ms')
PAUSE_QUANTILES = ('pause_p50_ms', 'pause_p90_ms')
# What the replay cannot give (contrib/kernel/simside.py).
NOT_SIM = ('mean_tps', 'latency_ms')


def number(v):
    return isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v))


@pytest.mark.timeout(900)
def test_calibrate_tiny():
    # pgcompare runs the server and the mount as an unprivileged user: a
    # directory it can enter, not pytest's.
    top = tempfile.mkdtemp(prefix='foliofs-calibrate-', dir='/var/tmp')
    try:
        os.chmod(top, 0o755)
        out = os.path.join(top, 'out')
        r = subprocess.run(['/usr/bin/python3', SCRIPT, '--tiny', '--sim', '--sim-kernel', '-O', out],
                           env=dict(os.environ, FOLIOFS=util.FOLIOFS),
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=800)
        if r.returncode == 77:
            pytest.skip(r.stdout.strip().splitlines()[-1])
        assert r.returncode == 0, r.stdout
        with open(os.path.join(out, 'calibrate.json')) as f:
            res = json.load(f)
        with open(os.path.join(out, 'report.md')) as f:
            text = f.read()
    finally:
        shutil.rmtree(top, ignore_errors=True)
    check_result(res, text, r.stdout)


def check_result(res, text, log):
    cols = res['columns']
    replays = ('sim', 'ksim')
    for side in ('kernel', 'model') + replays:
        c = cols[side]
        assert set(c) == set(COLUMNS), (side, c)
        for key in COLUMNS:
            v = c[key]['value']
            if side in replays and key in NOT_SIM:
                assert v is None, (side, key, c)
            elif key in PAUSE_QUANTILES:
                # No pause, no median: the only column allowed to be empty.
                assert number(v) == (c['pauses']['value'] > 0), (side, key, c)
            else:
                assert number(v), (side, key, c)
        assert 0 <= c['share_2m']['value'] <= 1 and 0 <= c['above_thresh_5s']['value'] <= 1
        assert c['peak_dirty_mib']['value'] >= c['mean_dirty_mib']['value'] >= 0
        assert c['charged_per_written']['value'] > 0
        assert side in replays or c['mean_tps']['value'] > 0
    for key in COLUMNS:
        for side in ('model',) + replays:
            e = cols[side][key]
            if number(e['value']) and number(cols['kernel'][key]['value']) \
                    and (cols['kernel'][key]['value'] or key in ('share_2m', 'above_thresh_5s')):
                assert number(e['error']), (side, key, e)
    # The replay's pauses one by one (from its probes), and its windows
    # holding the runs' application writes (replay / mount, per iteration).
    assert res['sim']['pauses_traced'], res['sim']
    assert sorted(res['sim']['app_write_ratio']) == ['1', '2'], res['sim']
    assert all(number(v) and v > 0 for v in res['sim']['app_write_ratio'].values()), res['sim']
    assert res['ksim']['pauses_traced'], res['ksim']
    assert sorted(res['ksim']['app_write_ratio']) == ['1', '2'], res['ksim']
    assert all(number(v) and v > 0 for v in res['ksim']['app_write_ratio'].values()), res['ksim']
    assert 'ksim: foliofs-sim replaying the kernel side\'s own file I/O' in text, text
    lines = text.splitlines()
    for label in LABELS:
        row = [ln for ln in lines if ln.startswith('| %s |' % label)]
        assert len(row) == 1, (label, text)
        # the label; kernel, model, sim, ksim; the last three's errors
        assert len(row[0].strip('|').split('|')) == 8, row
    dist = res['distributions']
    for side in ('kernel', 'model'):
        # Fired at every check of a writer (and, on the kernel, at every
        # read of /proc/vmstat's thresholds, which pg-seed.py samples).
        assert dist[side]['events']['global_dirty_state'] > 0, (side, dist[side], log)
        assert dist[side]['events']['pauses taken'] == cols[side]['pauses']['value']
    assert '| pause taken, ms |' in text and '| dirty_ratelimit, KiB/s |' in text
    # Who wrote shared buffers out (pg_stat_bgwriter), every run on both
    # sides, and what the throttle did before the runs.
    for side in ('kernel', 'model'):
        rows = res['bgwriter'][side]
        assert rows and len(rows) == 2, (side, res['bgwriter'])
        assert all({'buffers_clean', 'buffers_backend', 'buffers_alloc'} <= set(r)
                   for r in rows), (side, rows)
        assert sum(r['buffers_alloc'] for r in rows) > 0, (side, rows)
    assert '| buffers_backend |' in text, text
    assert '| bdi_dirty_ratelimit updates before the runs |' in text, text


def _result(kernel, model):
    """A run's calibrate.json columns from {key: value} per side."""
    return {'columns': {'kernel': {k: {'value': v} for k, v in kernel.items()},
                        'model': {k: {'value': v} for k, v in model.items()}}}


def test_repeat_summary():
    """--repeat N: the error is taken on each side's medians, every run's
    value is listed, and a column a run lacks (no pauses, no median
    pause) is left out of that side's median."""
    import sys
    sys.path.insert(0, os.path.join(util.REPO, 'contrib', 'kernel'))
    import refcmp
    runs = [_result({'pauses': 154, 'charged_per_written': 12.2, 'share_2m': 0.31,
                     'pause_p50_ms': 8.0},
                    {'pauses': 625, 'charged_per_written': 16.9, 'share_2m': 0.51,
                     'pause_p50_ms': None}),
            _result({'pauses': 641, 'charged_per_written': 18.9, 'share_2m': 0.51,
                     'pause_p50_ms': 8.0},
                    {'pauses': 558, 'charged_per_written': 15.7, 'share_2m': 0.49,
                     'pause_p50_ms': 8.0}),
            _result({'pauses': 312, 'charged_per_written': 15.2, 'share_2m': 0.40,
                     'pause_p50_ms': 8.0},
                    {'pauses': 503, 'charged_per_written': 16.2, 'share_2m': 0.49,
                     'pause_p50_ms': 12.0})]
    lines, js = refcmp.repeat_summary(runs)
    med = js['medians']
    assert js['runs'] == 3
    assert med['kernel']['pauses']['value'] == 312 and med['model']['pauses']['value'] == 558
    assert abs(med['model']['pauses']['error'] - 558 / 312) < 1e-9
    assert med['model']['pauses']['within'] is False
    assert abs(med['model']['charged_per_written']['error'] - 16.2 / 15.2) < 1e-9
    assert abs(med['model']['share_2m']['error'] - (0.49 - 0.40)) < 1e-9
    assert med['model']['pause_p50_ms']['value'] == 10.0        # median of 8 and 12
    text = '\n'.join(lines)
    assert '| pauses | 154 | 641 | 312 | 625 | 558 | 503 | 154-641 | 503-625 |' in text, text
    assert 'On the medians of 3 runs a side:' in text


def test_write_rate_and_max_pause():
    """The derived rows of the throttle table: the pages written in the
    second before each balance_dirty_pages event, and wb_max_pause() of
    that rate (at HZ 250: ~12,400 pages dirty, a rate over 32 x 12,400
    pages/s makes it one tick, under it two)."""
    import sys
    sys.path.insert(0, os.path.join(util.REPO, 'contrib', 'kernel'))
    import refcmp
    assert refcmp.max_pause_ms(400000, 12464) == 4
    assert refcmp.max_pause_ms(262144, 12464) == 8
    assert refcmp.max_pause_ms(0, 12464) == 200            # MAX_PAUSE, HZ / 5
    log = refcmp.EventLog('test')
    log.window('run', 1, 10.0, 20.0)
    # 100 pages written every 10 ms from t = 10 (10,000 pages/s) to 15, then
    # 500,000 pages/s.
    written = 0
    for i in range(1000):
        t = 10.0 + i * 0.01
        written += 100 if t < 15.0 else 5000
        log.add((t, 'global_dirty_state', 1, (0, 0, 0, 0, 0, 0, written)))   # nr_written last
    bdp = [0] * 13
    bdp[4] = 12464                                          # wb_dirty
    for t in (10.2, 14.5, 19.5):
        log.add((t, 'balance_dirty_pages', 2, tuple(bdp)))
    rates = refcmp.write_rates(log)
    assert rates[0] is None                                 # under half a second of history
    assert abs(rates[1] - 10000) < 1 and abs(rates[2] - 500000) < 1
    d = refcmp.derived_values(log)
    # 12464 // (1 + 10000 // 32) + 1 = 40 ticks; 12464 // (1 + 15625) + 1 = 1
    assert d['max pause at each event, ms (from it)'] == [160, 4]


def _load_calibrate():
    import importlib.util
    import sys
    sys.path.insert(0, os.path.dirname(SCRIPT))
    spec = importlib.util.spec_from_file_location('calibrate_script', SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _kernel_side(d, **over):
    args = dict(scale=7, iters=3, duration=11, clients=5, dirty_bytes=8 << 20,
                dirty_background_bytes=4 << 20, source='seqscan-each', fillfactor=100,
                shared_buffers='16MB', fs='xfs', mem=(100 << 20) + (16 << 20) + (64 << 20),
                pg_conf=[])
    args.update(over)
    os.makedirs(d)
    with open(os.path.join(d, 'kernel.json'), 'w') as f:
        json.dump({'meta': {'args': args}}, f)


def test_kernel_from_repeat(tmp_path):
    """--kernel-from DIR --repeat N: the model against an earlier --repeat
    run's kernel sides, DIR/run-1 .. run-N, at their sizing; a missing
    side or sides of different sizings are refused, naming the directory."""
    cal = _load_calibrate()
    top = str(tmp_path / 'k')
    for i in (1, 2):
        _kernel_side(os.path.join(top, 'run-%d' % i))
    a = cal.parse_args(['--kernel-from', top, '--repeat', '2', '--no-sim', '-O', str(tmp_path / 'o')])
    assert a.kernel_dirs == [os.path.join(top, 'run-1'), os.path.join(top, 'run-2')]
    assert (a.scale, a.iters, a.duration, a.clients, a.cache) == (7, 3, 11, 5, 100 << 20)
    a = cal.parse_args(['--kernel-from', os.path.join(top, 'run-2'), '--no-sim'])
    assert a.kernel_dirs == [os.path.join(top, 'run-2')]
    with pytest.raises(SystemExit):
        cal.parse_args(['--kernel-from', top, '--repeat', '3', '--no-sim'])
    _kernel_side(os.path.join(top, 'run-3'), scale=8)
    with pytest.raises(SystemExit):
        cal.parse_args(['--kernel-from', top, '--repeat', '3', '--no-sim'])
    with pytest.raises(SystemExit):
        cal.parse_args(['--report-only', '--repeat', '2', '-O', top])


def test_flush_hints_off_unless_asked(tmp_path):
    """Both sides' servers run without PostgreSQL's sync_file_range()
    hints unless --flush-hints (FUSE never carries them); a --pg-conf of
    the user's comes after, so it wins; --kernel-from takes the kernel
    side's settings, hints or not."""
    cal = _load_calibrate()
    off = list(cal.FLUSH_HINTS_OFF)
    assert off == ['checkpoint_flush_after=0', 'bgwriter_flush_after=0']
    assert cal.parse_args(['--no-sim']).pg_conf == off
    assert cal.parse_args(['--no-sim', '--flush-hints']).pg_conf == []
    assert cal.parse_args(['--no-sim', '--pg-conf', 'bgwriter_flush_after=64']).pg_conf == \
        off + ['bgwriter_flush_after=64']
    d = str(tmp_path / 'k')
    _kernel_side(d)
    assert cal.parse_args(['--kernel-from', d, '--no-sim']).pg_conf == []
