#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""calibrate.py: this machine's kernel and foliofs's model on one
PostgreSQL sizing, and the model's error per column.

One command runs both sides of issue 37's comparison at the same sizing
(scale, page cache, dirty limits, clients, iterations and their length,
the large-folio source), each with its throttle traced event by event,
both servers without PostgreSQL's sync_file_range() flush hints
(checkpoint_flush_after=0, bgwriter_flush_after=0; --flush-hints keeps
them), which FUSE never carries to a server:

  kernel  contrib/kernel/pg-seed.py: XFS on a direct-I/O loop device, the
          server in a memory cgroup of the page cache + shared_buffers +
          64 MiB, vm.dirty_bytes / dirty_background_bytes set before the
          load (pg-seed.py --dirty-at-load: a mount has its limits from the
          start);
          writeback:balance_dirty_pages, bdi_dirty_ratelimit and
          global_dirty_state from a tracefs instance
  model   contrib/tools/pgcompare.py --preset seed with one configuration,
          `model` (ra_model=6.17, dirty_account=folio: what this kernel
          does; lru_stats_ms=1000: as often as the kernel side's sampler
          flushes its cgroup's statistics; --model-opts adds to it and
          overrides), cache_size the page cache, the
          same dirty limits; the mount's USDT probes of the same names
          through bpftrace
  sim     (--sim, on when foliofs-sim is found beside FOLIOFS or FOLIOSIM
          names it; --no-sim: off) foliofs-sim replaying the trace the
          mount recorded over the model's whole run (pgcompare.py
          --trace), with the model's mount options, each pgbench run
          mapped onto its virtual clock by its trace time; its pauses one
          by one from its balance_dirty_pages probe through bpftrace
          (placed in the runs by its throttle_events counter: the probes
          carry no virtual time); no tps or latency
          (contrib/kernel/simside.py)
  ksim    (--sim-kernel) foliofs-sim replaying the kernel side's own
          file I/O, recorded with bpftrace from before its initdb to its
          server's stop (pg-seed.py --io-trace, contrib/kernel/kio.py),
          with the model's options: the same requests, offsets and think
          times the kernel served, without the FUSE transport in between,
          so a column where ksim meets the kernel and the model does not
          moves with the transport (the server's own behaviour over
          FUSE), not the model.  Its sync_file_range() calls (the
          checkpointer's and background writer's flush hints, which no
          FUSE daemon receives) are replayed (sync_range records: their
          ranges written back as the kernel starts them) and counted per
          run; a trace recorded before kio.py kept them (no
          sync_range_records in its counts) only counts them.  The
          tracing costs the kernel side some CPU: its columns are those of
          the traced run

and prints, as Markdown (and --json), the error table (a column per
side, and the model's and the sim's error against the kernel):

  charged/written, pauses, paused time, median and p90 pause, mean and
  peak dirty: the model's value over the kernel's (target: within 10%);
  the 2 MiB share and the share of 5 s samples with dirty above the dirty
  threshold (vm.dirty_bytes): the difference in points (target: within
  5); tps and latency are reported, not judged (they measure the FUSE
  transport, not the model)

then the distribution of every balance_dirty_pages and bdi_dirty_ratelimit
field (n, median, p90, kernel and model) and their CDFs (cdf.png), both
over the pgbench runs only, and per iteration the cache after the run by
file class (MiB, 2 MiB share) and by LRU list, kernel beside model (a
one-line note instead where a run's files predate them); what the
throttle did before the runs (the load and the first source step) and the
rate limit the runs started from; who wrote PostgreSQL's shared buffers
out during the runs (pg_stat_bgwriter), kernel beside model.  refcmp.py
says how each column is computed.

Usage, as root (the server and the mount run as unprivileged users):
  contrib/kernel/calibrate.py [--scale 100] [--cache 512M] [--dirty-bytes 64M]
      [--dirty-background-bytes 32M] [--clients 16] [--iters 8] [--duration 30]
      [--source seqscan-each] [--pg-conf NAME=VALUE ...] [--flush-hints]
      [-O DIR] [--json FILE]
  contrib/kernel/calibrate.py --tiny           a 1-2 minute run for CI
  contrib/kernel/calibrate.py --kernel-from DIR ...   reuse DIR's kernel side
  contrib/kernel/calibrate.py --repeat N ...   N runs a side (DIR/run-1 ...);
                                               the error on the medians
  contrib/kernel/calibrate.py --no-sim ...     without the simulator's side
  contrib/kernel/calibrate.py --sim-kernel ... the kernel side traced, and replayed
Environment: FOLIOFS (the daemon, default <repo>/build/foliofs; a build
with probes), FOLIOSIM and FOLIOFSCTL (default: beside FOLIOFS), PGBIN as
pgcompare.py's.  The sim side's files: sim/ (the replay's stats log and
output, its pauses, sim.json), model/traces.json and
model/trace-model.trace.gz (a trace above 64 MiB stays beside -O DIR
instead, as traces.json says).  The ksim side's: ksim/ as sim/, and
kernel-io.trace (kept beside the report whatever its size; it is not
gzipped, as the replay reads it twice).  Exit status 0, 1 on failure, 77 when it
cannot run here (the reason on stderr).
"""

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import refcmp
import simside

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), '..', 'lib'))
from foliofs_tools import PG_SETTINGS, Skip, parse_size  # noqa: E402
from foliofs_trace import find_tool  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PG_SEED = os.path.join(HERE, 'pg-seed.py')
PGCOMPARE = os.path.join(REPO, 'contrib', 'tools', 'pgcompare.py')
HEADER = os.path.join(REPO, 'probes', 'foliofs_tp.h')
# pg-seed.py's --source and pgcompare.py's for the same step.
SOURCES = {'seqscan-each': 'seqscan', 'vacuum-each': 'vacuum', 'none': 'none'}
# The server's own memory in the kernel's cgroup, beside the page cache and
# shared_buffers (issue 27's 704 MiB: 512 + 128 + 64).
SERVER_MEM = 64 << 20
# The model's configuration.  lru_stats_ms=1000: pg-seed.py's sampler
# reads the server cgroup's memory.stat every second, and each read
# flushes the cgroup's statistics, which reclaim decides by (measured
# with the memcg:memcg_flush_stats tracepoint over a 64 MiB kernel run:
# 114 flushes by the sampler, 103 of the 113 gaps 0.5-1 s, and the 2 s
# worker's besides): the kernel side's counts are at most a second old,
# not the 2 s of a machine nobody reads them on.  Recorded in each run's
# calibrate.json (sizing.model_config); runs made before it have none
# and had OLD_MODEL_CONFIG.
MODEL_CONFIG = 'ra_model=6.17,dirty_account=folio,lru_stats_ms=1000'
OLD_MODEL_CONFIG = 'ra_model=6.17,dirty_account=folio'
TINY = {'scale': 5, 'iters': 2, 'duration': 5, 'clients': 4, 'cache': '64M',
        'dirty_bytes': '4M', 'dirty_background_bytes': '2M', 'shared_buffers': '16MB'}


def log(msg):
    print('calibrate: %s' % msg, file=sys.stderr, flush=True)


def pg_size(text):
    """PostgreSQL's size syntax (128MB) in bytes."""
    m = re.fullmatch(r'(\d+)([kMG]?B)', text)
    if not m:
        raise argparse.ArgumentTypeError('%r: a PostgreSQL size (16MB, 1GB)' % text)
    return int(m.group(1)) << {'B': 0, 'kB': 10, 'MB': 20, 'GB': 30}[m.group(2)]


def skip_reason(foliofs):
    if os.geteuid() != 0:
        return 'needs root (the kernel reference, bpftrace)'
    if not shutil.which('bpftrace'):
        return 'bpftrace is missing'
    if not os.access(foliofs, os.X_OK):
        return '%s: no foliofs daemon (build it, or set FOLIOFS)' % foliofs
    notes = subprocess.run(['readelf', '-n', foliofs], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True).stdout
    if 'balance_dirty_pages' not in notes:
        return '%s was built without USDT probes (-Dprobes)' % foliofs
    return None


LOADS = {}


def run_step(cmd, what, log_path):
    """Run CMD, its output into LOG_PATH; Skip on 77, RuntimeError on failure.
    The machine's load average is sampled every 10 s meanwhile (LOADS[what]):
    on a shared machine it moves tps, and the dirtying rate with it."""
    log('%s: %s' % (what, ' '.join(cmd)))
    loads = LOADS.setdefault(what, [])
    with open(log_path, 'w') as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)
        while True:
            with open('/proc/loadavg') as f:
                loads.append(float(f.read().split()[0]))
            try:
                rc = proc.wait(10)
                break
            except subprocess.TimeoutExpired:
                pass
    with open(log_path, errors='replace') as f:
        tail = f.read()[-3000:]
    if rc == 77:
        raise Skip('%s: %s' % (what, tail.strip().splitlines()[-1] if tail.strip() else '77'))
    if rc != 0:
        raise RuntimeError('%s failed (exit %d); its output ends:\n%s' % (what, rc, tail))


def common_options(a):
    """The options both the mount and the ksim replay take."""
    return ('folio_policy=kernel,readahead_kb=2048,cache_size=%d,dirty_bytes=%d,'
            'dirty_background_bytes=%d' % (a.cache, a.dirty_bytes, a.dirty_background_bytes))


def model_options(a):
    return a.model_config + (',' + a.model_opts if a.model_opts else '')


# PostgreSQL's flush hints, off on both sides unless --flush-hints: the
# checkpointer and the background writer call sync_file_range() every
# checkpoint_flush_after (256 kB) and bgwriter_flush_after (512 kB) they
# write, which starts writeback on the kernel and never reaches a FUSE
# server, so with them the two sides serve different requests.  What they
# do to the model on the kernel's own requests (ksim, 64 MiB sizing,
# contrib/results/calibrate-2026-12-08): little (charged/written x0.96 ->
# x0.97 of the kernel's, 2 MiB share +5.6 -> +5.4 points, pauses 74 ->
# 83), but only the kernel side would receive them.
FLUSH_HINTS_OFF = ('checkpoint_flush_after=0', 'bgwriter_flush_after=0')


def kernel_side(a, out):
    res_path = os.path.join(out, 'kernel.json')
    ev_path = os.path.join(out, 'kernel-events.jsonl.gz')
    mem = a.cache + pg_size(a.shared_buffers) + SERVER_MEM
    run_step(['/usr/bin/python3', PG_SEED, '--scale', str(a.scale), '--iters', str(a.iters),
              '--duration', str(a.duration), '--clients', str(a.clients), '--mem', str(mem),
              '--shared-buffers', a.shared_buffers, '--dirty-bytes', str(a.dirty_bytes),
              '--dirty-background-bytes', str(a.dirty_background_bytes),
              '--source', a.source, '--fillfactor', str(a.fillfactor), '--fs', a.fs,
              '--dirty-at-load', *[x for s in a.pg_conf for x in ('--pg-conf', s)],
              '--json', res_path, '--md', os.path.join(out, 'kernel.md'),
              '--events', ev_path]
             + (['--io-trace', os.path.join(out, 'kernel-io.trace')] if a.sim_kernel else []),
             'the kernel reference', os.path.join(out, 'kernel.log'))
    return res_path, ev_path


def model_side(a, out, foliofs):
    mdir = os.path.join(out, 'model')
    common = common_options(a)
    config = 'model=' + model_options(a)
    work = tempfile.mkdtemp(prefix='calibrate-', dir='/var/tmp')
    os.chmod(work, 0o755)
    rec = refcmp.ProbeRecorder(foliofs, HEADER, 'foliofs %s' % foliofs)
    # pgcompare's iterations are stamped in unix ms; the probes in
    # CLOCK_MONOTONIC.
    offset = time.time() - time.monotonic()
    rec.start()
    prep_t0 = time.monotonic()
    try:
        run_step(['/usr/bin/python3', PGCOMPARE, '--preset', 'seed', '-s', str(a.scale),
                  '-r', str(a.iters), '-T', str(a.duration), '-c', str(a.clients),
                  '-F', str(a.fillfactor), '--source', SOURCES[a.source],
                  '--pg-conf', 'shared_buffers=' + a.shared_buffers, '--no-checksums',
                  *[x for s in list(PG_SETTINGS) + a.pg_conf for x in ('--pg-conf', s)],
                  '-o', common, '--config', config, '-O', mdir, '-d', work]
                 + (['--trace=' + os.path.dirname(os.path.abspath(out))] if a.sim else []),
                 'the model', os.path.join(out, 'model.log'))
    finally:
        rec.stop()
        shutil.rmtree(work, ignore_errors=True)
    if rec.lost:
        raise RuntimeError('bpftrace lost %d events' % rec.lost)
    for r in refcmp.read_model_iterations(mdir, 'model'):
        t0 = int(r['start_unix_ms']) / 1000 - offset
        if int(r['iteration']) == 1:
            # The load and the first source step, as pg-seed.py's 'prep'.
            rec.log.window('prep', 0, prep_t0, t0)
        rec.log.window('run', int(r['iteration']), t0, int(r['end_unix_ms']) / 1000 - offset)
    ev_path = os.path.join(out, 'model-events.jsonl.gz')
    rec.log.save(ev_path)
    return mdir, ev_path


def sim_side(out, mdir, foliosim):
    """Replay the model's trace (simside.py); False, logged, if it fails."""
    tr = simside.read_traces(mdir, 'model')
    log('the sim: %s replaying %s (%d records)' % (foliosim, tr['trace'], tr['records']))
    t0 = time.monotonic()
    try:
        simside.replay(foliosim, tr, out, '/var/tmp', HEADER)
    except (RuntimeError, OSError) as e:
        log('the sim: %s' % e)
        return False
    log('the sim: replayed in %.0f s' % (time.monotonic() - t0))
    return True


def ksim_side(a, out, kpath, foliosim):
    """Replay the kernel side's own I/O (kio.py) with the model's options
    into OUT/ksim/; False, logged, if it fails."""
    with open(kpath) as f:
        tr = json.load(f).get('io_trace')
    if not tr:
        log('ksim: the kernel side in %s has no I/O trace (pg-seed.py --io-trace)' % kpath)
        return False
    if tr.get('lost_events') or tr.get('lost'):
        log('ksim: the I/O trace is not whole (bpftrace lost %d events, %d operations on '
            'fds it never saw opened): not replayed' % (tr.get('lost_events', 0),
                                                        tr.get('lost', 0)))
        return False
    tr = dict(tr, options=common_options(a) + ',' + model_options(a))
    log('ksim: %s replaying %s (%d records)' % (foliosim, tr['trace'], tr['records']))
    t0 = time.monotonic()
    try:
        simside.replay(foliosim, tr, out, '/var/tmp', HEADER, name='ksim')
    except (RuntimeError, OSError) as e:
        log('ksim: %s' % e)
        return False
    log('ksim: replayed in %.0f s' % (time.monotonic() - t0))
    return True


def ksim_drift(rows, kres):
    """{iteration: the ksim replay's application bytes written in the
    window over the kernel side's in its run} (None where it wrote none)."""
    kernel = {r['iter']: r.get('app_write_bytes') for r in kres['iterations']}
    return {r['iteration']: r['app_write_bytes'] / kernel[r['iteration']]
            if kernel.get(r['iteration']) else None for r in rows}


def ksim_lines(rows, meta, kres):
    """Markdown lines saying what the ksim column is, how well the windows
    hold the runs' work, and what it could not replay."""
    ratios = ', '.join('n/a' if v is None else '%.2f' % v
                       for _, v in sorted(ksim_drift(rows, kres).items()))
    tr = kres['io_trace']
    sfr = sum(r.get('sync_file_range_bytes', 0) for r in kres['iterations'])
    wrote = sum(r.get('app_write_bytes', 0) for r in kres['iterations'])
    return ['ksim: foliofs-sim replaying the kernel side\'s own file I/O (recorded with '
            'bpftrace, contrib/kernel/kio.py: `%s`, %d records of %d files), `-o %s`; pauses %s.  '
            'Application bytes written in each window, replay / kernel (1.00: the window holds '
            'the run\'s work): %s.  %s sync_file_range() asked the kernel to start '
            'writing back %.0f MiB during the runs (%.1f%% of the %.0f MiB the server wrote '
            'in them; %d calls over the whole trace).  Not replayed: %d operations on %d opens '
            'whose path bpftrace could not read.'
            % (meta['trace'], tr['records'], tr['files'], meta['options'],
               'one by one from its probe' if meta.get('pauses_traced')
               else 'from its counters (%s)' % meta.get('pauses_not_traced'),
               ratios, 'Replayed (sync_range records):' if 'sync_range_records' in tr
               else 'Not replayed (a trace from before kio.py recorded them):',
               sfr / 2**20, 100.0 * sfr / wrote if wrote else 0.0, wrote / 2**20,
               tr['sync_file_range'], tr.get('unnamed_ops', 0), tr.get('unnamed_opens', 0))]


def report(a, out, kres, klog, mdir, mlog, commit, foliofs):
    kcols = refcmp.columns_of(refcmp.kernel_rows(kres), refcmp.pauses_of(klog))
    mcols = refcmp.columns_of(refcmp.model_rows(mdir, 'model'), refcmp.pauses_of(mlog))
    sim = simside.load(out)
    ksim = simside.load(out, 'ksim') if kres.get('io_trace') else None
    table, js = refcmp.error_table([('kernel', kcols), ('model', mcols)]
                                   + ([('sim', sim[0])] if sim else [])
                                   + ([('ksim', ksim[0])] if ksim else []))
    logs = [('kernel', klog), ('model', mlog)]
    plotted = refcmp.cdf_plot(logs, os.path.join(out, 'cdf.png'),
                              'balance_dirty_pages and bdi_dirty_ratelimit over the runs: %s'
                              % sizing(a))
    md = ['# The model against this machine\'s kernel: %s' % sizing(a), '',
          'Kernel %s (pg-seed.py at %s: XFS on a direct-I/O loop device, memory cgroup '
          'of the cache + shared_buffers + 64 MiB); model: %s (%s; pgcompare.py, '
          'configuration `%s%s`; scripts at %s), %s.  The '
          'machine is shared: tps and latency move with its load.'
          % (kres['meta']['kernel'], kres['meta'].get('commit', '?'), foliofs,
             a.label or 'the build named', a.model_config,
             ',' + a.model_opts if a.model_opts else '', commit,
             datetime.date.today().isoformat()), '',
          'Error: model/kernel (within 10%: ok), or model - kernel in points for shares '
          '(within 5: ok); tps and latency are reported, not judged.', '']
    if sim:
        md += simside.report_lines(sim[1], sim[2], mdir, 'model') + ['']
    if ksim:
        md += ksim_lines(ksim[1], ksim[2], kres) + ['']
    md += table
    for side, what in (('kernel', 'the kernel reference'), ('model', 'the model')):
        if LOADS.get(what):
            md += ['', 'Load average of the machine while the %s side ran: median %.1f, '
                   'range %.1f-%.1f (2 CPUs).' % (side, statistics.median(LOADS[what]),
                                                 min(LOADS[what]), max(LOADS[what]))]
    md += ['', 'The throttle event by event, over the pgbench runs (medians and p90; '
           'pauses taken are those with pause > 0):', ''] + refcmp.dist_table(logs)
    md += ['', 'Who was checked past the freerun point, and paused, by PostgreSQL role '
           '(from each writer\'s command line):', ''] + refcmp.roles_table(logs)
    prep = refcmp.prep_table(logs)
    if prep:
        md += ['', 'Before the runs (the load, at the run\'s dirty limits on both sides, and '
               'the first source step) and the rate limit the runs started from:', ''] + prep
    bgw = refcmp.bgwriter_rows(kres, mdir, 'model')
    md += ['', 'Who wrote PostgreSQL\'s shared buffers out during the runs '
           '(pg_stat_bgwriter: the background writer, its rounds stopped at '
           'bgwriter_lru_maxpages, backends evicting a dirty buffer themselves, the '
           'checkpointer; and the buffers allocated):', ''] + refcmp.bgwriter_table(bgw)
    cache_md, cache_js = refcmp.cache_section(kres, mdir, 'model')
    md += [''] + cache_md
    if plotted:
        md += ['', '![CDFs](cdf.png)']
    text = '\n'.join(md) + '\n'
    result = {'sizing': sizing_json(a), 'commit': commit, 'label': a.label, 'loadavg': LOADS,
              'foliofs': foliofs, 'kernel': kres['meta']['kernel'],
              'columns': js, 'distributions': refcmp.dist_json(logs), 'cache': cache_js,
              'bgwriter': bgw}
    if sim:
        result['sim'] = dict(sim[2], app_write_ratio=simside.drift(sim[1], mdir, 'model'))
    if ksim:
        result['ksim'] = dict(ksim[2], app_write_ratio=ksim_drift(ksim[1], kres))
    return text, result


def sizing(a):
    return ('scale %d, page cache %d MiB, dirty_bytes %d MiB / background %d MiB, %d clients, '
            '%d x %d s, source %s, fillfactor %d, shared_buffers %s'
            % (a.scale, a.cache >> 20, a.dirty_bytes >> 20, a.dirty_background_bytes >> 20,
               a.clients, a.iters, a.duration, a.source, a.fillfactor, a.shared_buffers)
            + ''.join(', %s' % s for s in a.pg_conf))


def sizing_json(a):
    return {k: getattr(a, k) for k in ('scale', 'cache', 'dirty_bytes', 'dirty_background_bytes',
                                       'clients', 'iters', 'duration', 'source', 'fillfactor',
                                       'shared_buffers', 'fs', 'model_config', 'model_opts',
                                       'pg_conf')}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--scale', type=int, default=100)
    ap.add_argument('--cache', type=parse_size, default=parse_size('512M'),
                    help='the page cache: the model\'s cache_size, the kernel\'s cgroup '
                    'less shared_buffers and 64 MiB')
    ap.add_argument('--dirty-bytes', type=parse_size, default=parse_size('64M'))
    ap.add_argument('--dirty-background-bytes', type=parse_size, default=parse_size('32M'))
    ap.add_argument('--clients', type=int, default=16)
    ap.add_argument('--iters', type=int, default=8)
    ap.add_argument('--duration', type=int, default=30, help='seconds of each pgbench run')
    ap.add_argument('--source', choices=sorted(SOURCES), default='seqscan-each')
    ap.add_argument('--fillfactor', type=int, default=100)
    ap.add_argument('--shared-buffers', default='128MB')
    ap.add_argument('--fs', choices=('xfs', 'ext4'), default='xfs')
    ap.add_argument('--pg-conf', action='append', default=[], metavar='NAME=VALUE',
                    help='a server setting for both sides\' servers, after the others '
                    '(repeatable)')
    ap.add_argument('--flush-hints', action='store_true',
                    help='keep PostgreSQL\'s sync_file_range() flush hints '
                    '(checkpoint_flush_after, bgwriter_flush_after at their defaults); '
                    'by default both sides\' servers run without them (FLUSH_HINTS_OFF)')
    ap.add_argument('--model-opts', default='',
                    help='foliofs -o options added to the model\'s configuration')
    ap.add_argument('--label', default='',
                    help='what the model\'s build is (a commit, a change), for the report')
    ap.add_argument('--tiny', action='store_true',
                    help='a run for CI: scale 5, cache 64M, dirty 4M/2M, 2 x 5 s, 4 clients, '
                    'shared_buffers 16MB')
    ap.add_argument('--kernel-from', metavar='DIR',
                    help='take the kernel side from an earlier run\'s DIR (its kernel.json '
                    'and kernel-events.jsonl.gz) instead of running it; with --repeat N, '
                    'from an earlier --repeat run\'s DIR/run-1 .. DIR/run-N')
    ap.add_argument('--sim', action=argparse.BooleanOptionalAction,
                    help='the simulator\'s side: record the model\'s trace and replay it '
                    'with foliofs-sim (default: when foliofs-sim is found)')
    ap.add_argument('--sim-kernel', action='store_true',
                    help='the ksim side: record the kernel side\'s file I/O (bpftrace) and '
                    'replay it with foliofs-sim and the model\'s options')
    ap.add_argument('--repeat', type=int, default=1, metavar='N',
                    help='run both sides N times (in turn: kernel, model, kernel, ...) into '
                    '-O DIR/run-1 ... run-N, and report the error on each side\'s medians '
                    'with every run\'s value: one run a side cannot judge a column to 10%% '
                    'when the kernel\'s own runs differ by more')
    ap.add_argument('--report-only', action='store_true',
                    help='run nothing: write the report again from -O DIR\'s files (after a '
                    'change of how the columns are computed)')
    ap.add_argument('-O', '--output', metavar='DIR', help='where everything goes (new or '
                    'empty; default /var/tmp/calibrate-YYYYmmdd-HHMMSS)')
    ap.add_argument('--json', metavar='FILE', help='the error table and distributions as JSON')
    a = ap.parse_args(argv)
    if a.tiny:
        for k, v in TINY.items():
            if k in ('cache', 'dirty_bytes', 'dirty_background_bytes'):
                v = parse_size(v)
            setattr(a, k, v)
    a.model_config = MODEL_CONFIG
    if not a.flush_hints:
        a.pg_conf = list(FLUSH_HINTS_OFF) + a.pg_conf
    if a.repeat < 1:
        ap.error('--repeat is at least 1')
    if a.repeat > 1 and a.report_only:
        ap.error('--report-only rewrites one run\'s report: not with --repeat')
    if a.report_only:
        if not a.output:
            ap.error('--report-only needs -O DIR')
        a.kernel_from = a.output
    a.kernel_dirs = [a.kernel_from] if a.kernel_from else []
    if a.kernel_from and a.repeat > 1:
        a.kernel_dirs = [os.path.join(a.kernel_from, 'run-%d' % (i + 1)) for i in range(a.repeat)]
    sides = []
    for d in a.kernel_dirs:
        try:
            with open(os.path.join(d, 'kernel.json')) as f:
                sides.append(json.load(f)['meta']['args'])
        except (OSError, ValueError, KeyError) as e:
            ap.error('--kernel-from: no kernel side in %s (%s)' % (d, e))
    keys = ('scale', 'iters', 'duration', 'clients', 'dirty_bytes', 'dirty_background_bytes',
            'source', 'fillfactor', 'shared_buffers', 'fs', 'mem', 'pg_conf')
    if any([k.get(x) for x in keys] != [sides[0].get(x) for x in keys] for k in sides[1:]):
        ap.error('--kernel-from: the kernel sides in %s differ in sizing' % a.kernel_from)
    if sides:
        ka = sides[0]
        # The model at the kernel side's sizing, whatever the options say.
        a.pg_conf = ka.get('pg_conf', [])
        for k in ('scale', 'iters', 'duration', 'clients', 'dirty_bytes',
                  'dirty_background_bytes', 'source', 'fillfactor', 'shared_buffers', 'fs'):
            setattr(a, k, ka[k])
        a.cache = ka['mem'] - pg_size(ka['shared_buffers']) - SERVER_MEM
    pg_size(a.shared_buffers)
    if min(a.scale, a.iters, a.duration, a.clients) < 1:
        ap.error('--scale, --iters, --duration and --clients are at least 1')
    if a.dirty_background_bytes >= a.dirty_bytes:
        ap.error('--dirty-background-bytes must be below --dirty-bytes')
    if a.output is None:
        a.output = '/var/tmp/calibrate-' + time.strftime('%Y%m%d-%H%M%S')
    return a


def report_again(a, foliofs, commit):
    """--report-only: the report of a finished run, its label, binary,
    commit and loads as that run recorded them."""
    out = a.output
    with open(os.path.join(out, 'calibrate.json')) as f:
        old = json.load(f)
    a.label = old.get('label', a.label)
    a.model_opts = old.get('sizing', {}).get('model_opts', a.model_opts)
    a.model_config = old.get('sizing', {}).get('model_config', OLD_MODEL_CONFIG)
    LOADS.update(old.get('loadavg', {}))
    with open(os.path.join(out, 'kernel.json')) as f:
        kres = json.load(f)
    text, _ = write_report(a, out, kres, os.path.join(out, 'kernel-events.jsonl.gz'),
                           os.path.join(out, 'model'),
                           os.path.join(out, 'model-events.jsonl.gz'),
                           old.get('commit', commit), old.get('foliofs', foliofs))
    print(text, end='')
    return 0


def write_report(a, out, kres, kev, mdir, mev, commit, foliofs):
    """report() of the run in OUT (the event logs at KEV and MEV), written
    to OUT's report.md and calibrate.json: (its text, its result)."""
    text, result = report(a, out, kres, refcmp.EventLog.load(kev), mdir,
                          refcmp.EventLog.load(mev), commit, foliofs)
    with open(os.path.join(out, 'report.md'), 'w') as f:
        f.write(text)
    with open(os.path.join(out, 'calibrate.json'), 'w') as f:
        json.dump(result, f, indent=1)
    return text, result


def one_run(a, out, foliofs, foliosim, commit, kernel_dir=None):
    """Both sides (and the sim's) of one run into OUT, its report.md and
    calibrate.json (--json FILE too when it is the only run): (the
    report's text, its result), or the exit status when it failed.  With
    KERNEL_DIR the kernel side is that earlier run's."""
    try:
        if kernel_dir:
            for name in ('kernel.json', 'kernel.md', 'kernel-events.jsonl.gz'):
                shutil.copy(os.path.join(kernel_dir, name), out)
            kpath = os.path.join(out, 'kernel.json')
            kev = os.path.join(out, 'kernel-events.jsonl.gz')
        else:
            kpath, kev = kernel_side(a, out)
        if a.sim_kernel:    # (an earlier kernel side's trace, where it was recorded)
            ksim_side(a, out, kpath, foliosim)
        mdir, mev = model_side(a, out, foliofs)
        if a.sim:
            sim_side(out, mdir, foliosim)
    except Skip as e:
        print('calibrate: skipped: %s' % e, file=sys.stderr)
        return 77
    except (RuntimeError, OSError, ValueError) as e:
        print('calibrate: %s' % e, file=sys.stderr)
        return 1
    with open(kpath) as f:
        kres = json.load(f)
    text, result = write_report(a, out, kres, kev, mdir, mev, commit, foliofs)
    if a.json and a.repeat == 1:
        with open(a.json, 'w') as f:
            json.dump(result, f, indent=1)
    return text, result


def main(argv):
    a = parse_args(argv)
    foliofs = os.environ.get('FOLIOFS', os.path.join(REPO, 'build', 'foliofs'))
    why = skip_reason(foliofs)
    if why:
        print('calibrate: skipped: %s' % why, file=sys.stderr)
        return 77
    commit = subprocess.run(['git', '-C', REPO, 'rev-parse', '--short', 'HEAD'],
                            stdout=subprocess.PIPE, text=True).stdout.strip()
    if a.report_only:
        return report_again(a, foliofs, commit)
    os.makedirs(a.output, exist_ok=True)
    if os.listdir(a.output):
        print('calibrate: %s is not empty' % a.output, file=sys.stderr)
        return 1
    os.chmod(a.output, 0o755)
    foliosim = (find_tool(foliofs, 'foliofs-sim', 'FOLIOSIM')
                if a.sim is not False or a.sim_kernel else None)
    if (a.sim or a.sim_kernel) and not foliosim:
        print('calibrate: --sim/--sim-kernel: no foliofs-sim beside %s (set FOLIOSIM)'
              % foliofs,
              file=sys.stderr)
        return 1
    a.sim = bool(foliosim) and a.sim is not False
    if a.repeat == 1:
        res = one_run(a, a.output, foliofs, foliosim, commit, a.kernel_from)
        if isinstance(res, int):
            return res
        text = res[0]
    else:
        results = []
        for i in range(a.repeat):
            out = os.path.join(a.output, 'run-%d' % (i + 1))
            os.makedirs(out)
            os.chmod(out, 0o755)
            log('run %d of %d into %s' % (i + 1, a.repeat, out))
            res = one_run(a, out, foliofs, foliosim, commit,
                          a.kernel_dirs[i] if a.kernel_dirs else None)
            if isinstance(res, int):
                return res
            results.append(res[1])
        lines, js = refcmp.repeat_summary(results)
        text = '\n'.join(['# The model against this machine\'s kernel, %d runs a side: %s'
                          % (a.repeat, sizing(a)), '',
                          'Each run\'s report: %s.  Error: model/kernel of the medians '
                          '(within 10%%: ok), or model - kernel in points for shares '
                          '(within 5: ok); tps and latency are reported, not judged.'
                          % ', '.join('[run-%d](run-%d/report.md)' % (i + 1, i + 1)
                                      for i in range(a.repeat)), ''] + lines) + '\n'
        with open(os.path.join(a.output, 'report.md'), 'w') as f:
            f.write(text)
        with open(a.json or os.path.join(a.output, 'calibrate.json'), 'w') as f:
            json.dump(dict(js, sizing=sizing_json(a), commit=commit, label=a.label,
                           foliofs=foliofs, results=results), f, indent=1)
    print(text, end='')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
