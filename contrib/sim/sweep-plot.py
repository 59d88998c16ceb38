#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""sweep-plot.py: the frontier of a `foliofs-sim sweep`.

usage: sweep-plot.py CSV [-o PNG] [-x COLUMN] [-y COLUMN]

Plots every run of the sweep's CSV as a point, paused time (y,
pause_total_ms) against peak pinned memory (x, peak_pinned_bytes, in MiB),
one panel per trace, and marks and labels the Pareto-optimal runs: those
no other run of the same trace beats on both axes (less or equal on both
and less on one; more is better for a rate, a column ending in _ops_s,
e.g. -y writers_ops_s).  A label is the run's values of the configuration
columns that vary in the sweep (the columns between trace and options);
the front's points are numbered along x and their labels listed beside
the panel (runs on the same point share a number).  Prints the Pareto-optimal runs, one
line each, to stdout: trace, x=value, y=value (as in the CSV) and label,
separated by tabs.  `foliofs-sim sweep --plot PNG` runs this script
(python3-matplotlib).
"""
import argparse
import csv
import os
import sys


def better(a, b, x_max, y_max):
    """True if a is at least as good as b on both axes."""
    ax, ay = a
    bx, by = b
    return (ax >= bx if x_max else ax <= bx) and (ay >= by if y_max else ay <= by)


def pareto(points, x_max=False, y_max=False):
    """Indexes of the points no other point dominates (as good on both
    axes and different), in the order given."""
    front = []
    for i, p in enumerate(points):
        if not any(q != p and better(q, p, x_max, y_max) for q in points):
            front.append(i)
    return front


def config_columns(header):
    try:
        return header[header.index('trace') + 1:header.index('options')]
    except ValueError:
        return []


def label(row, varying):
    if not varying:
        return 'run %s' % row['run']
    return ','.join('%s=%s' % (k, row[k]) for k in varying)


def load(path):
    with open(path, newline='') as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        return reader.fieldnames or [], rows


def value(row, col):
    v = float(row[col])
    return v / (1 << 20) if col.endswith('_bytes') else v


def axis_name(col):
    return col[:-len('_bytes')] + ' (MiB)' if col.endswith('_bytes') else col


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('csv', help='the CSV of foliofs-sim sweep')
    ap.add_argument('-o', '--output', help='the PNG to write (default: CSV with .png)')
    ap.add_argument('-x', default='peak_pinned_bytes', help='x column (default %(default)s)')
    ap.add_argument('-y', default='pause_total_ms', help='y column (default %(default)s)')
    args = ap.parse_args(argv)

    header, rows = load(args.csv)
    for col in (args.x, args.y, 'trace'):
        if col not in header:
            sys.exit('sweep-plot.py: %s: no column %s' % (args.csv, col))
    if not rows:
        sys.exit('sweep-plot.py: %s: no runs' % args.csv)
    x_max, y_max = args.x.endswith('_ops_s'), args.y.endswith('_ops_s')
    cfg = config_columns(header)
    traces = list(dict.fromkeys(r['trace'] for r in rows))

    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(traces), figsize=(7 * len(traces), 5), squeeze=False)
    for ax, trace in zip(axes[0], traces):
        runs = [r for r in rows if r['trace'] == trace]
        varying = [k for k in cfg if len({r[k] for r in runs}) > 1]
        pts = [(value(r, args.x), value(r, args.y)) for r in runs]
        front = pareto(pts, x_max, y_max)
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=18, color='0.6',
                   label='%d runs' % len(runs))
        fx = sorted((pts[i] for i in front), key=lambda p: (p[0], p[1]))
        ax.plot([p[0] for p in fx], [p[1] for p in fx], color='tab:red', lw=1,
                drawstyle='steps-post', zorder=2)
        ax.scatter([p[0] for p in fx], [p[1] for p in fx], s=40, color='tab:red', zorder=3,
                   label='Pareto-optimal (%d)' % len(front))
        # Number the front's points along x; their configurations listed beside the panel.
        labels = {}
        for i in front:
            labels.setdefault(pts[i], []).append(label(runs[i], varying))
            print('%s\t%s=%s\t%s=%s\t%s' % (trace, args.x, runs[i][args.x], args.y,
                                            runs[i][args.y], label(runs[i], varying)))
        legend = []
        for n, (p, names) in enumerate(sorted(labels.items()), 1):
            ax.annotate(str(n), p, xytext=(4, 4), textcoords='offset points', fontsize=8,
                        color='tab:red', weight='bold')
            legend.append('%d: %s' % (n, '\n    '.join(names)))
        ax.text(1.02, 1.0, 'Pareto-optimal:\n' + '\n'.join(legend), transform=ax.transAxes,
                va='top', fontsize=7, family='monospace')
        ax.set_xlabel(axis_name(args.x) + (' (more is better)' if x_max else ''))
        ax.set_ylabel(axis_name(args.y) + (' (more is better)' if y_max else ''))
        ax.set_title(os.path.basename(trace), fontsize=10)
        ax.grid(True, lw=0.3)
        ax.legend(loc='upper right', fontsize=8)
    fig.suptitle('foliofs-sim sweep: %s against %s' % (args.y, axis_name(args.x)), fontsize=11)
    out = args.output or os.path.splitext(args.csv)[0] + '.png'
    fig.savefig(out, dpi=110, bbox_inches='tight')
    return 0


if __name__ == '__main__':
    sys.exit(main())
