#!/usr/bin/python3
"""ksim.py: the kernel side of a calibrate.py --sim-kernel run beside
foliofs-sim's replays of its own file I/O (its ksim/ directory, or
another replay made by `replay`).

  ksim.py table DIR [NAME ...]     the error table, kernel against each replay
  ksim.py scans DIR [NAME]         per iteration, the folios the source step (the
                                   scan) added by order, kernel and replay
  ksim.py active DIR [NAME]        the active list at each scan's start, its lowest
                                   during the scan, and at the run's end
  ksim.py refaults DIR [NAME]      refaulted pages during each scan and run (and the
                                   replay's refault activations)
  ksim.py replay DIR NAME [OPTS]   replay DIR's kernel-io.trace again into DIR/NAME with
                                   the ksim options (OPTS added or replacing), with
                                   FOLIOSIM (default: build/sim/foliofs-sim)

NAME is ksim by default.  The replay's source step of iteration i is taken
as its run's start less the kernel's source_t and 0.3 s (the psql between).
"""
import gzip
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(REPO, 'contrib', 'kernel'))
import calibrate  # noqa: E402
import refcmp  # noqa: E402
import simside  # noqa: E402

SIZES = ['%dk' % (4 << o) for o in range(10)]


def load(out, name):
    kres = json.load(open(os.path.join(out, 'kernel.json')))
    meta = json.load(open(os.path.join(out, name, 'sim.json')))
    with gzip.open(os.path.join(out, name, 'stats.jsonl.gz'), 'rt') as f:
        samples = [json.loads(line) for line in f]
    return kres, meta, samples


def windows(kres, meta, samples):
    """(row, iteration, the replay's samples at the scan's start, run start, run end)."""
    for r, (it, t0, t1) in zip(kres['iterations'], meta['windows']):
        yield r, it, simside.at(samples, t0 - 1000 * (r['source_t'] + 0.3)), \
            simside.at(samples, t0), simside.at(samples, t1)


def table(out, names):
    kres = json.load(open(os.path.join(out, 'kernel.json')))
    klog = refcmp.EventLog.load(os.path.join(out, 'kernel-events.jsonl.gz'))
    cols = [('kernel', refcmp.columns_of(refcmp.kernel_rows(kres), refcmp.pauses_of(klog)))]
    for name in names:
        side = simside.load(out, name)
        cols.append((name, side[0]))
        print('%s: %s' % (name, calibrate.ksim_lines(side[1], side[2], kres)[0]
                          .split('virtual clock')[-1].split('.  ', 1)[-1]))
    print('\n'.join(refcmp.error_table(cols)[0]))


def scans(out, name):
    kres, meta, samples = load(out, name)
    print('| it | side | %s |' % ' | '.join(SIZES))
    print('|---|---|' + '---:|' * len(SIZES))
    for r, it, s0, a, _ in windows(kres, meta, samples):
        sa = r['source_added']
        print('| %d | kernel | %s |' % (it, ' | '.join(str(sa.get(str(o), 0)) for o in range(10))))
        print('| %d | %s | %s |' % (it, name, ' | '.join(
            str(a['folios_made_' + x] - s0['folios_made_' + x]) for x in SIZES)))


def active(out, name):
    kres, meta, samples = load(out, name)

    def mib(s):
        return round(sum(s['folios_active_' + x] * (4 << o) for o, x in enumerate(SIZES)) / 1024)

    print('| it | kernel active at the scan\'s start | lowest in the scan | at the run\'s end '
          '| %s at the start | lowest | at the end |' % name)
    print('|---|---:|---:|---:|---:|---:|---:|')
    for r, it, s0, a, b in windows(kres, meta, samples):
        ls = r['lru_samples']
        during = [s for t, s in ls if t <= r['source_t'] + 3]
        scan = [s for s in samples if s0['time_ms'] <= s['time_ms'] <= a['time_ms'] + 3000]
        print('| %d | %d | %d | %d | %d | %d | %d |' % (
            it, ls[0][1]['active_file'] >> 20, min(s['active_file'] for s in during) >> 20,
            ls[-1][1]['active_file'] >> 20, mib(s0), min(mib(s) for s in scan), mib(b)))


def refaults(out, name):
    kres, meta, samples = load(out, name)
    print('| it | kernel refaulted pages, scan | run | %s scan | run | %s activated, scan | run |'
          % (name, name))
    print('|---|---:|---:|---:|---:|---:|---:|')
    for r, it, s0, a, b in windows(kres, meta, samples):
        ls = r['lru_samples']
        ref = [s['workingset_refault_file'] for t, s in ls]
        end_scan = [s['workingset_refault_file'] for t, s in ls if t <= r['source_t'] + 1][-1]
        print('| %d | %d | %d | %d | %d | %d | %d |' % (
            it, end_scan - ref[0], ref[-1] - end_scan,
            a['workingset_refault'] - s0['workingset_refault'],
            b['workingset_refault'] - a['workingset_refault'],
            a['workingset_activate'] - s0['workingset_activate'],
            b['workingset_activate'] - a['workingset_activate']))


def replay(out, name, extra, trace=None):
    """DIR's kernel-io.trace (or TRACE) replayed into DIR/NAME with the
    ksim options (EXTRA added or replacing), and the table beside ksim."""
    sim = os.environ.get('FOLIOSIM', os.path.join(REPO, 'build', 'sim', 'foliofs-sim'))
    kres = json.load(open(os.path.join(out, 'kernel.json')))
    base = json.load(open(os.path.join(out, 'ksim', 'sim.json')))['options'].split(',')
    keys = {o.split('=')[0] for o in extra.split(',') if o} | {'sim_data', 'stats_interval_ms'}
    opts = [o for o in base if o.split('=')[0] not in keys] + [o for o in extra.split(',') if o]
    tr = dict(kres['io_trace'], options=','.join(opts))
    if trace:
        tr['trace'] = trace
    simside.replay(sim, tr, out, '/var/tmp', os.path.join(REPO, 'probes', 'foliofs_tp.h'),
                   name=name)
    subprocess.run([sys.executable, __file__, 'table', out, 'ksim', name], check=True)


def main(argv):
    if len(argv) < 2 or argv[0] not in ('table', 'scans', 'active', 'refaults', 'replay'):
        print(__doc__, file=sys.stderr)
        return 2
    cmd, out = argv[0], argv[1]
    if cmd == 'table':
        table(out, argv[2:] or ['ksim'])
    elif cmd == 'replay':
        replay(out, argv[2], argv[3] if len(argv) > 3 else '')
    else:
        {'scans': scans, 'active': active, 'refaults': refaults}[cmd](
            out, argv[2] if len(argv) > 2 else 'ksim')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
