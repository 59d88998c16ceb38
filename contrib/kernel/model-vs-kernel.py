#!/usr/bin/python3
"""model-vs-kernel.py: this machine's kernel and foliofs's model side by
side on the same PostgreSQL workload, with the model's error per column.

Inputs: one or more kernel references written by
`contrib/kernel/pg-seed.py --json FILE` and one pgcompare report directory
(`contrib/tools/pgcompare.py --preset seed ... -O DIR`) per reference, in
the same order, and the pgcompare configuration that models the kernel
(default `6.17-folio`: per-folio charging and 6.17+ readahead, which is
what this machine's kernel does).  Each pair should have been run at the
same sizing: scale, clients, iterations and their length, dirty_bytes and
dirty_background_bytes, the page cache (pgcompare's cache_size against the
kernel's memory cgroup less shared_buffers and the server's own memory).
The script checks what it can and says what differs.

Columns, over the iterations of one run:
  mean tps, CV, 2nd half vs 1st     pgbench's, as the seed reports them
  charged/written                   pages charged to the dirty budget over
                                    pages written to the device (kernel:
                                    writeback_dirty_folio x folio size over
                                    the loop device's sectors; foliofs:
                                    nr_dirtied over backing_write_bytes)
  pauses, paused                    throttle pauses taken and their total
                                    (kernel: balance_dirty_pages with
                                    pause > 0; foliofs: throttle_events and
                                    throttle_ms)
  2 MiB share                       of the cached bytes in 2 MiB folios after
                                    each run, mean over the runs
  orders TV                         total variation distance between the
                                    two caches' byte distributions over folio
                                    sizes after the last run (0: the same
                                    histogram, 1: disjoint)
The model's error: the ratio model/kernel for tps, charged/written, pauses
and paused time; the difference in points for CV, halves and the 2 MiB
share.

A second table sets the throttler's inputs side by side, medians over the
runs' samples (kernel: /proc/vmstat once a second and the
writeback:bdi_dirty_ratelimit and balance_dirty_pages events, where
pg-seed.py recorded them; model: pgcompare's samples.csv, or
samples.csv.gz, the stats once a second): dirty (charged dirty +
writeback) mean and peak and the share of samples at or above the freerun
point, the write bandwidth estimate, the charge rate, the rate limit, and
the median pause taken.

Usage:
  contrib/kernel/model-vs-kernel.py --kernel K.json --model DIR
      [--kernel K2.json --model DIR2 ...] [--config 6.17-folio]
      [--label 64M --label 200M] [--md report.md]
"""

import argparse
import json
import math
import os
import statistics
import sys

import refcmp
from refcmp import byte_shares, read_model_samples

PAGE = 4096
SIZES = ['4K', '8K', '16K', '32K', '64K', '128K', '256K', '512K', '1M', '2M']


def ratio(a, b):
    return a / b if b else float('nan')


def summarize(rows):
    """rows: dicts with tps, charged, written, pauses, paused_ms, share_2m
    and cached (a list of 10 folio counts, 4K .. 2M) -> the columns."""
    tps = [r['tps'] for r in rows]
    mean = statistics.mean(tps)
    half = len(tps) // 2
    return {
        'iters': len(rows),
        'mean_tps': mean,
        'cv': statistics.pstdev(tps) / mean if mean else float('nan'),
        'halves': (statistics.mean(tps[half:]) / statistics.mean(tps[:half]) - 1)
        if half else float('nan'),
        'charged_per_written': ratio(sum(r['charged'] for r in rows),
                                     sum(r['written'] for r in rows)),
        'pauses': sum(r['pauses'] for r in rows),
        'paused_s': sum(r['paused_ms'] for r in rows) / 1000,
        'share_2m': statistics.mean(r['share_2m'] for r in rows),
        'cached': rows[-1]['cached'],
    }


def tv_distance(a, b):
    return 0.5 * sum(abs(x - y) for x, y in zip(byte_shares(a), byte_shares(b)))


def read_kernel(path):
    with open(path) as f:
        res = json.load(f)
    rows = []
    for r in res['iterations']:
        cached = [int(r['cached'].get(str(o), 0)) for o in range(10)]
        shares = byte_shares(cached)
        rows.append({'tps': r['tps'], 'charged': r['charged_pages'],
                     'written': r['written_pages'], 'pauses': r['pauses'],
                     'paused_ms': r['paused_ms'], 'share_2m': shares[9],
                     'cached': cached, 'traced': r.get('traced'),
                     'mean_dirty_pages': r.get('mean_dirty_pages'),
                     'peak_dirty_pages': r.get('peak_dirty_pages'),
                     'above_freerun': r.get('above_freerun')})
    if not rows:
        raise ValueError('%s: no iterations' % path)
    return res['meta'], rows


def read_model(path, config):
    out = []
    for r in refcmp.read_model_iterations(path, config):
        if not r.get('cached_folios'):
            raise ValueError('%s: no cached_folios column (pgcompare older than this '
                             'script?)' % path)
        cached = [int(x) for x in r['cached_folios'].split()]
        out.append({'tps': float(r['tps']),
                    'charged': int(r['run_nr_dirtied']),
                    'written': int(r['run_backing_write_bytes']) / PAGE,
                    'pauses': int(r['run_throttle_events']),
                    'paused_ms': float(r['run_throttle_ms']),
                    'share_2m': float(r['share_2m']) if r['share_2m'] else 0.0,
                    'cached': cached})
    return out


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def kernel_estimates(krows):
    """Medians over the kernel's runs of what pg-seed.py sampled and traced."""
    def col(key):
        return med([r.get(key) for r in krows])

    def traced(key):
        return med([(r.get('traced') or {}).get(key) for r in krows])
    return {'mean_dirty_mib': col('mean_dirty_pages'), 'peak_dirty_mib': col('peak_dirty_pages'),
            'above_freerun': col('above_freerun'),
            'write_bw': traced('rl_write_bw'), 'dirty_rate': traced('rl_dirty_rate'),
            'dirty_ratelimit': traced('rl_dirty_ratelimit'), 'pause': traced('bdp_pause')}


def model_estimates(samples):
    """The same medians from the model's per-second stats."""
    per = []
    for its in samples.values():
        dirty = [int(x['nr_dirty']) for x in its]
        free = [(int(x['dirty_thresh']) + int(x['bg_thresh'])) // 2 for x in its]
        pauses = [int(x['pause']) for x, prev in zip(its[1:], its)
                  if int(x['throttle_events']) > int(prev['throttle_events'])]
        per.append({'mean_dirty_mib': statistics.mean(dirty) if dirty else None,
                    'peak_dirty_mib': max(dirty, default=None),
                    'above_freerun': (sum(d >= f for d, f in zip(dirty, free)) / len(dirty))
                    if dirty else None,
                    'write_bw': med([int(x['write_bw']) for x in its]),
                    'dirty_rate': med([int(x['dirty_rate']) for x in its]),
                    'dirty_ratelimit': med([int(x['dirty_ratelimit']) for x in its]),
                    'pause': med(pauses)})
    return {k: med([p[k] for p in per]) for k in per[0]} if per else {}


def fmt_est(e):
    def f(v, fmt):
        return 'n/a' if v is None else fmt % v
    pg = PAGE / (1 << 20)
    return ' | '.join([
        f(None if e.get('mean_dirty_mib') is None else e['mean_dirty_mib'] * pg, '%.0f MiB'),
        f(None if e.get('peak_dirty_mib') is None else e['peak_dirty_mib'] * pg, '%.0f MiB'),
        f(None if e.get('above_freerun') is None else 100 * e['above_freerun'], '%.0f%%'),
        f(None if e.get('write_bw') is None else e['write_bw'] / 1024, '%.1f MiB/s'),
        f(None if e.get('dirty_rate') is None else e['dirty_rate'] / 1024, '%.1f MiB/s'),
        f(None if e.get('dirty_ratelimit') is None else e['dirty_ratelimit'] / 1024,
          '%.2f MiB/s'),
        f(e.get('pause'), '%.0f ms')])


def read_model_settings(path, config):
    """pgcompare's report.md records its settings: the run's first line and
    the line of CONFIG's mount options, for the report's header."""
    rep = os.path.join(path, 'report.md') if os.path.isdir(path) else None
    if not rep or not os.path.exists(rep):
        return []
    with open(rep) as f:
        lines = [ln.strip().lstrip('- ') for ln in f]
    return [ln for ln in lines if ln.startswith('pgbench -i')][:1] + \
        [ln for ln in lines if ln.startswith('configuration %s:' % config)][:1]


def f_ratio(m, k):
    r = ratio(m, k)
    return 'n/a' if math.isnan(r) else 'x%.2f' % r


def f_points(m, k):
    return '%+.1f pt' % (100 * (m - k))


def fmt_row(name, s):
    return ('| %s | %.0f | %.1f%% | %+.1f%% | x%.1f | %d | %.1f s | %.0f%% |'
            % (name, s['mean_tps'], 100 * s['cv'], 100 * s['halves'],
               s['charged_per_written'], s['pauses'], s['paused_s'], 100 * s['share_2m']))


def error_row(m, k):
    return ('| model error | %s | %s | %s | %s | %s | %s | %s |'
            % (f_ratio(m['mean_tps'], k['mean_tps']), f_points(m['cv'], k['cv']),
               f_points(m['halves'], k['halves']),
               f_ratio(m['charged_per_written'], k['charged_per_written']),
               f_ratio(m['pauses'], k['pauses']), f_ratio(m['paused_s'], k['paused_s']),
               f_points(m['share_2m'], k['share_2m'])))


def hist_row(name, counts):
    return '| %s | %s |' % (name, ' | '.join('%.0f%%' % (100 * x) for x in byte_shares(counts)))


def sizing_notes(mrows, krows):
    notes = []
    if len(mrows) != len(krows):
        notes.append('iterations differ: model %d, kernel %d' % (len(mrows), len(krows)))
    return notes


def report(pairs, config):
    out = ['# The kernel beside the model', '',
           'Model: pgcompare configuration `%s`. Kernel: `pg-seed.py` on %s.'
           % (config, pairs[0][2]['kernel']), '']
    for label, kpath, meta, krows, mpath, mrows, msamples in pairs:
        a = meta['args']
        ks, ms = summarize(krows), summarize(mrows)
        out += ['## %s' % label, '',
                'Kernel (`%s`, commit %s): scale %d, %d x %d s, %d clients, memory cgroup '
                '%d MiB, shared_buffers %s, dirty_bytes %d MiB, dirty_background_bytes '
                '%d MiB, read_ahead_kb %d, %s, source %s.'
                % (os.path.basename(kpath), meta.get('commit', '?'), a['scale'], a['iters'],
                   a['duration'], a['clients'], a['mem'] >> 20, a['shared_buffers'],
                   a['dirty_bytes'] >> 20, a['dirty_background_bytes'] >> 20, a['ra_kb'],
                   a['fs'], a['source']),
                'Model: `%s`, configuration `%s`.' % (mpath, config)]
        out += ['Model: ' + s + '.' for s in read_model_settings(mpath, config)]
        out += ['Differs: ' + n for n in sizing_notes(mrows, krows)]
        out += ['', '| | mean tps | CV | 2nd half vs 1st | charged/written | pauses | paused '
                '| 2 MiB share |', '|---|---:|---:|---:|---:|---:|---:|---:|',
                fmt_row('kernel', ks), fmt_row('model', ms), error_row(ms, ks), '',
                'Per iteration (kernel / model):', '',
                '| iteration | tps | charged/written | pauses | paused | 2 MiB share |',
                '|---:|---:|---:|---:|---:|---:|']
        for i, (k, m) in enumerate(zip(krows, mrows)):
            out.append('| %d | %.0f / %.0f | x%.1f / x%.1f | %d / %d | %.1f / %.1f s '
                       '| %.0f%% / %.0f%% |'
                       % (i + 1, k['tps'], m['tps'], ratio(k['charged'], k['written']),
                          ratio(m['charged'], m['written']), k['pauses'], m['pauses'],
                          k['paused_ms'] / 1000, m['paused_ms'] / 1000,
                          100 * k['share_2m'], 100 * m['share_2m']))
        out += ['', "The throttler's inputs, medians over the runs:", '',
                '| | mean dirty | peak dirty | samples >= freerun | write_bw | dirty_rate '
                '| dirty_ratelimit | pause |', '|---|---:|---:|---:|---:|---:|---:|---:|',
                '| kernel | %s |' % fmt_est(kernel_estimates(krows)),
                '| model | %s |' % fmt_est(model_estimates(msamples))]
        out += ['', 'The cache by folio size after the last run (share of cached bytes); '
                'total variation distance %.2f:' % tv_distance(ks['cached'], ms['cached']), '',
                '| | ' + ' | '.join(SIZES) + ' |', '|---|' + '---:|' * len(SIZES),
                hist_row('kernel', ks['cached']), hist_row('model', ms['cached']), '']
    return '\n'.join(out)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--kernel', action='append', required=True, metavar='JSON',
                    help="pg-seed.py's --json output (repeat)")
    ap.add_argument('--model', action='append', required=True, metavar='DIR',
                    help="pgcompare's report directory, or its iterations.csv (repeat, "
                    "one per --kernel)")
    ap.add_argument('--label', action='append', help='a heading per pair')
    ap.add_argument('--config', default='6.17-folio',
                    help='the pgcompare configuration that models the kernel')
    ap.add_argument('--md', help='write the report here too')
    args = ap.parse_args(argv)
    if len(args.kernel) != len(args.model):
        ap.error('give one --model per --kernel (%d against %d)'
                 % (len(args.model), len(args.kernel)))
    labels = args.label or []
    if labels and len(labels) != len(args.kernel):
        ap.error('give one --label per --kernel, or none')
    pairs = []
    try:
        for i, (k, m) in enumerate(zip(args.kernel, args.model)):
            meta, krows = read_kernel(k)
            label = labels[i] if labels else 'dirty_bytes %d MiB' % (
                meta['args']['dirty_bytes'] >> 20)
            pairs.append((label, k, meta, krows, m, read_model(m, args.config),
                          read_model_samples(m, args.config)))
    except (OSError, ValueError, KeyError) as e:
        print('model-vs-kernel: %s' % e, file=sys.stderr)
        return 1
    md = report(pairs, args.config)
    print(md, end='')
    if args.md:
        with open(args.md, 'w') as f:
            f.write(md)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
