# SPDX-License-Identifier: GPL-2.0-or-later
"""The replay-identity cases (issue 28): fixed traces replayed through
foliofs-sim with fixed options, whose output must stay the same byte for
byte while the writeback engine is refactored beneath it.

A case is a name, a trace and the -o options.  The trace is either
generated at run time (`foliofs-sim gen SPEC`: the same SPEC always gives
the same trace) or a file kept here (pgbench.trace: a pgbench run recorded
from a mount, see record-pgbench.py).  The expected output of case NAME is
expected/NAME.out: the replay's stdout (the stats and the summary) and,
for the cases with a stats log, the log after a `--- stats log` line.

Every case runs with readahead_kb=0 and folio_policy=fixed: readahead
(blockstate/readahead.c, ra_decide.c) and the kernel's folio sizing (the
default) change on their own schedule, and what these outputs guard is the
writeback engine, not readahead's or the sizing's decisions.

Regenerate the expected outputs after a change that is meant to move them
(a new stat, a new trace format) with

    tests/sim-golden/regen.py [BUILD_DIR]

and say in the commit why they moved.
"""
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, 'expected')

# The seed's experiment, smaller: writers of random 8 KiB overwrites of one
# table in 2 MiB folios, on a slow device, so that dirty_account=folio
# throttles them and page/block do not.
SEED = 'writers=4,file_size=256M,io=8K,ops=4000,rate=500/s,seed=1'
SLOW = 'cache_size=512M,folio_size=2M,dev_bw=100M,dev_lat_us=5000,dev_qd=1'
# Writers with fsyncs, over four files, on the default device.
FSYNC = 'writers=3,files=4,file_size=64M,io=16K,ops=3000,fsync_every=100,rate=1000/s,seed=2'
FSOPTS = 'cache_size=256M,folio_size=256K,stats_interval_ms=200'
# Sequential writers per file, expiring (no background threshold reached).
SEQ = 'writers=2,files=2,file_size=32M,io=64K,pattern=seq,ops=1000,rate=200/s,seed=3'
SEQOPTS = 'cache_size=1G,dirty_expire_ms=300,writeback_interval_ms=100,stats_interval_ms=500'
# Closed-loop writers into a cache too small: reclaim writes back (need_clean).
RECLAIM = 'writers=2,file_size=128M,io=32K,ops=4000,seed=4'
RECOPTS = 'cache_size=16M,folio_size=64K,flushers=1'
# Readers, random and sequential (the reads go to the device model).
READS = 'op=read,writers=2,file_size=64M,io=64K,ops=1000,seed=5'
READSEQ = 'op=read,pattern=seq,file_size=16M,io=128K,ops=256,seed=6'

RA = 'readahead_kb=0,folio_policy=fixed'

# (name, trace, options, with a stats log)
CASES = [
    ('seed-folio', 'gen:' + SEED, SLOW + ',dirty_account=folio', True),
    ('seed-page', 'gen:' + SEED, SLOW + ',dirty_account=page', False),
    ('seed-block', 'gen:' + SEED, SLOW + ',dirty_account=block', False),
    ('seed-folio-strictlimit', 'gen:' + SEED, SLOW + ',dirty_account=folio,throttle=strictlimit',
     False),
    ('seed-folio-unthrottled', 'gen:' + SEED, SLOW + ',dirty_account=folio,throttle=none', False),
    ('seed-folio-noflushers', 'gen:' + SEED, SLOW + ',dirty_account=folio,flushers=0', False),
    ('seed-folio-wbfolio', 'gen:' + SEED, SLOW + ',dirty_account=folio,wb_granularity=folio',
     False),
    ('seed-page-eio', 'gen:' + SEED, SLOW + ',fault=write:EIO:every=7', False),
    ('fsync-folio', 'gen:' + FSYNC, FSOPTS + ',dirty_account=folio', True),
    ('fsync-page', 'gen:' + FSYNC, FSOPTS + ',dirty_account=page', False),
    ('fsync-block', 'gen:' + FSYNC, FSOPTS + ',dirty_account=block', False),
    ('fsync-eio', 'gen:' + FSYNC, FSOPTS + ',fault=fsync:EIO:every=3', True),
    ('fsync-short', 'gen:' + FSYNC, FSOPTS + ',fault=write:short:every=5', False),
    ('fsync-enospc', 'gen:' + FSYNC, FSOPTS + ',fault=write:ENOSPC:after=200:count=40', False),
    ('seq-expire', 'gen:' + SEQ, SEQOPTS, True),
    ('seq-expire-block', 'gen:' + SEQ, SEQOPTS + ',dirty_account=block,flushers=4', False),
    ('reclaim-page', 'gen:' + RECLAIM, RECOPTS, False),
    ('reclaim-folio-eio', 'gen:' + RECLAIM, RECOPTS + ',dirty_account=folio,'
     'fault=write:EIO:every=11', False),
    ('reads-random', 'gen:' + READS, 'cache_size=32M', False),
    ('reads-seq-eio', 'gen:' + READSEQ, 'cache_size=64M,fault=read:EIO:every=9', False),
    ('pgbench-folio', 'pgbench.trace', 'folio_size=2M,dirty_account=folio', True),
    ('pgbench-page', 'pgbench.trace', 'folio_size=2M,dirty_account=page', False),
    ('pgbench-block', 'pgbench.trace', 'folio_size=2M,dirty_account=block', False),
    ('pgbench-throttled', 'pgbench.trace', 'cache_size=64M,folio_size=2M,dirty_account=folio,'
     'dirty_bytes=4M,dirty_background_bytes=1M,dev_bw=20M', True),
    ('pgbench-unthrottled', 'pgbench.trace', 'cache_size=64M,folio_size=2M,'
     'dirty_account=folio,dirty_bytes=4M,dirty_background_bytes=1M,dev_bw=20M,throttle=none',
     False),
    ('pgbench-eio', 'pgbench.trace', 'folio_size=2M,fault=write:EIO:every=13', False),
    ('pgbench-fsync-eio', 'pgbench.trace', 'folio_size=2M,fault=fsync:EIO:every=4', False),
]


def default_sim():
    build = os.environ.get('BUILD_DIR', os.path.join(HERE, '..', '..', 'build'))
    return os.environ.get('FOLIOSIM', os.path.join(build, 'sim', 'foliofs-sim'))


def _run(sim, args, env=None):
    p = subprocess.run([sim] + [str(a) for a in args], capture_output=True, timeout=300, env=env)
    if p.returncode:
        raise RuntimeError('%s %s: exit %d\n%s' % (sim, ' '.join(map(str, args)), p.returncode,
                                                  p.stderr.decode(errors='replace')))
    return p.stdout


def output(sim, case, tmpdir=None, env=None):
    """The bytes the case's replay gives (what expected/NAME.out holds);
    @env: the environment to run the simulator in (None: this one's)."""
    name, trace, opts, with_log = case
    with tempfile.TemporaryDirectory(dir=tmpdir) as tmp:
        if trace.startswith('gen:'):
            path = os.path.join(tmp, 'gen.trace')
            _run(sim, ['gen', trace[4:], '-o', path], env)
        else:
            path = os.path.join(HERE, trace)
        args = [path, '-o', RA + ',' + opts]
        log = os.path.join(tmp, 'stats.log')
        if with_log:
            args += ['--stats-log', log]
        out = _run(sim, args, env)
        if with_log:
            with open(log, 'rb') as f:
                out += b'--- stats log\n' + f.read()
    return out


def expected_path(case):
    return os.path.join(EXPECTED, case[0] + '.out')
