# SPDX-License-Identifier: GPL-2.0-or-later
"""foliofs-sim sweep (issue 30, part 3) and foliofs-sim --compare --csv
(issue 29).  Runs the built binary, $FOLIOSIM or <repo>/build/sim/foliofs-sim,
on the committed pgbench trace (tests/sim-golden/pgbench.trace); no mount.

- --compare --csv: a header of the documented column names, one row per
  OPTIONS in order, the same numbers as the table, a config with commas
  quoted;
- a sweep's rows are its grid in order (list outermost, the last axis
  fastest), each row's results those of a replay of its options alone
  (--compare --csv), over two traces;
- determinism: the same sweep gives the same bytes, run twice, with one
  worker and with two;
- GNU parallel's path: --jobs | parallel, then --merge, from a file of
  pieces and from a directory of them, gives the direct sweep's CSV byte
  for byte; a missing run or another sweep's piece is refused;
- a policy's parameter as an axis (-a account.share=0,125,1000 with
  dirty_account=pinned): its column, each row the replay of its options
  alone, the ends priced exactly as dirty_account=page and =folio, the
  default in between; an out-of-range value, or the parameter of a policy
  not in force, refused before anything runs;
- bad input (an unknown option on an axis, a malformed axis, --run out of
  range) is one line and exit status 2, and writes no CSV;
- the plot: sweep-plot.py marks exactly the Pareto-optimal runs of a CSV
  made for it, and --plot writes a PNG.
"""
import csv
import io
import os
import shutil
import subprocess

import pytest

import util
from util import REPO

FOLIOSIM = os.environ.get('FOLIOSIM', os.path.join(REPO, 'build', 'sim', 'foliofs-sim'))
PGBENCH = os.path.join(REPO, 'tests', 'sim-golden', 'pgbench.trace')
PLOT = os.path.join(REPO, 'contrib', 'sim', 'sweep-plot.py')

pytestmark = pytest.mark.skipif(
    not os.path.exists(FOLIOSIM),
    reason='%s not built (ninja -C build, or set $FOLIOSIM)' % FOLIOSIM)

# The documented result columns (doc/sim.md, foliofs-sim(1)), in order.
RESULTS = ['writers_ops_s', 'virtual_s', 'ops', 'pauses', 'pause_total_ms', 'pause_p50_ms',
           'pause_p99_ms', 'pause_max_ms', 'fsyncs', 'fsync_p50_ms', 'fsync_p99_ms', 'reads',
           'read_total_ms', 'read_p50_ms', 'read_p99_ms', 'op_errors', 'pages_charged',
           'pages_written', 'device_bytes', 'peak_charged_bytes', 'peak_dirty_exact_bytes',
           'peak_pinned_bytes', 'folios_2M', 'folios_2M_made', 'opens']
# The pgbench trace throttled: a small dirty budget on a slow device.
BASE = 'cache_size=64M,folio_size=2M,dev_bw=20M'
AXES = ['-a', 'dirty_account=folio,page', '-a', 'dirty_bytes=2M,8M',
        '-a', 'dirty_pinned_bytes=4M,0']


def sim(*args, check=True, **kw):
    p = subprocess.run([FOLIOSIM] + [str(a) for a in args], capture_output=True,
                       text=True, timeout=300, **kw)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def rows(text):
    r = list(csv.reader(io.StringIO(text)))
    return r[0], r[1:]


def test_compare_csv():
    cfgs = ['dirty_account=folio', 'dirty_account=page,folio_size=256K']
    table = sim(PGBENCH, '-o', BASE + ',dirty_bytes=2M', '--compare', *cfgs).stdout
    out = sim(PGBENCH, '-o', BASE + ',dirty_bytes=2M', '--compare', '--csv', *cfgs).stdout
    header, body = rows(out)
    assert header == ['config'] + RESULTS
    assert [r[0] for r in body] == cfgs
    assert '"dirty_account=page,folio_size=256K"' in out
    # The table's numbers (its rows in MiB and one decimal).
    trows = {ln.split()[0]: ln.split()[1:] for ln in table.splitlines()[1:]}
    for c, r in enumerate(body):
        got = dict(zip(header, r))
        for name in ('pauses', 'pages_charged', 'pages_written', 'opens'):
            assert float(trows[name][c]) == float(got[name]), name
        assert abs(float(trows['peak_pinned_MiB'][c]) -
                   int(got['peak_pinned_bytes']) / 2**20) < 0.051
    assert int(dict(zip(header, body[0]))['pauses']) > 0


def test_sweep_grid_order_and_results(tmp_path):
    t2 = tmp_path / 'w.trace'
    sim('gen', 'writers=2,file_size=16M,io=8K,ops=400,rate=1000/s', '-o', t2)
    out = sim('sweep', '-o', BASE, *AXES, '-c', 'throttle=bdp', '-c', 'throttle=strictlimit',
              PGBENCH, t2).stdout
    header, body = rows(out)
    assert header == ['run', 'trace', 'throttle', 'dirty_account', 'dirty_bytes',
                      'dirty_pinned_bytes', 'options'] + RESULTS
    assert len(body) == 2 * 2 * 8
    want = [(str(t), th, a, d, p) for t in (PGBENCH, t2)
            for th in ('bdp', 'strictlimit') for a in ('folio', 'page')
            for d in ('2M', '8M') for p in ('4M', '0')]
    assert [tuple(r[1:6]) for r in body] == want
    assert [int(r[0]) for r in body] == list(range(len(body)))
    assert body[1][6] == BASE + ',throttle=bdp,dirty_account=folio,dirty_bytes=2M,' \
        'dirty_pinned_bytes=0'
    # Each row is the replay of its options alone.
    for r in body[::5]:
        cmp = sim(r[1], '-o', r[6], '--compare', '--csv', '').stdout
        assert rows(cmp)[1][0][1:] == r[7:], r[6]
    # The grid is not flat: the dirty budget changes the paused time.
    pauses = {tuple(r[2:6]): float(r[7 + RESULTS.index('pause_total_ms')]) for r in body[:16]}
    assert pauses[('bdp', 'folio', '2M', '0')] > pauses[('bdp', 'folio', '8M', '0')]


def test_sweep_is_deterministic(tmp_path):
    args = ['sweep', '-o', BASE] + AXES + [PGBENCH]
    a = sim(*args, '--csv', tmp_path / 'a.csv')
    assert 'runs (1 trace x 8 configurations) by 2 workers' in a.stderr or \
        os.cpu_count() == 1, a.stderr
    sim(*args, '--csv', tmp_path / 'b.csv')
    sim(*args, '-j', '1', '--csv', tmp_path / 'c.csv')
    data = (tmp_path / 'a.csv').read_bytes()
    assert data.count(b'\n') == 9
    assert data == (tmp_path / 'b.csv').read_bytes() == (tmp_path / 'c.csv').read_bytes()
    assert sim(*args, '-j', '3').stdout.encode() == data


def require_parallel():
    if not shutil.which('parallel'):
        util.require_tool('GNU parallel', 'apt-get install parallel (contrib/test.sh installs it)')


def test_sweep_jobs_through_parallel_and_merge(tmp_path):
    require_parallel()
    args = ['-o', BASE] + AXES + [PGBENCH]
    direct = sim('sweep', *args).stdout
    jobs = sim('sweep', '--jobs', *args, cwd=tmp_path).stdout
    assert len(jobs.splitlines()) == 8 and ' sweep --run 7 ' in jobs.splitlines()[7]
    p = subprocess.run(['parallel', '-j', '2'], input=jobs, capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    pieces = tmp_path / 'pieces.csv'
    pieces.write_text(p.stdout)
    assert sim('sweep', *args, '--merge', pieces).stdout == direct
    sim('sweep', *args, '--merge', pieces, '--csv', tmp_path / 'm.csv')
    assert (tmp_path / 'm.csv').read_text() == direct
    # A directory of pieces, one file each, in any order; and stdin.
    d = tmp_path / 'pieces'
    d.mkdir()
    lines = p.stdout.splitlines(keepends=True)
    for n in range(0, len(lines), 2):
        (d / ('z%02d.csv' % (len(lines) - n))).write_text(''.join(lines[n:n + 2]))
    assert sim('sweep', *args, '--merge', d).stdout == direct
    assert sim('sweep', *args, '--merge', '-', input=p.stdout).stdout == direct
    # A run missing: refused, nothing written.
    (d / 'z02.csv').unlink()
    r = sim('sweep', *args, '--merge', d, '--csv', tmp_path / 'x.csv', check=False)
    assert r.returncode == 1 and '1 of 8 runs missing' in r.stderr, r.stderr
    assert not (tmp_path / 'x.csv').exists()
    # Pieces of another sweep (another base) are not this sweep's runs.
    other = ['-o', BASE.replace('20M', '40M')] + AXES + [PGBENCH]
    r = sim('sweep', *other, '--merge', pieces, check=False)
    assert r.returncode == 1 and "is not this sweep's" in r.stderr, r.stderr


def test_sweep_spread_as_doc_policies_shows(tmp_path):
    """The two ways doc/policies.md spreads a sweep over machines, run on
    this one: GNU parallel with --sshloginfile (a file naming the hosts;
    ':' is this machine, so no ssh is needed here), and a Slurm job array
    (each task runs line SLURM_ARRAY_TASK_ID of the --jobs file, its
    stdout a piece file of its own, stderr apart: what sbatch --array
    --output --error make of the doc's --wrap command).  --merge of the
    pieces gives the direct sweep's CSV byte for byte."""
    require_parallel()
    args = ['-o', BASE] + AXES + [PGBENCH]
    direct = sim('sweep', *args).stdout
    jobs = tmp_path / 'jobs.txt'
    jobs.write_text(sim('sweep', '--jobs', *args, cwd=tmp_path).stdout)
    hosts = tmp_path / 'hosts'
    hosts.write_text('2/:\n')
    pieces = tmp_path / 'pieces.csv'
    with open(jobs) as fin, open(pieces, 'w') as fout:
        p = subprocess.run(['parallel', '--sshloginfile', str(hosts)], stdin=fin, stdout=fout,
                           stderr=subprocess.PIPE, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert sim('sweep', *args, '--merge', pieces).stdout == direct
    # The job array: task i (1-based) runs line i, as the doc's --wrap says.
    (tmp_path / 'pieces').mkdir()
    (tmp_path / 'logs').mkdir()
    n = len(jobs.read_text().splitlines())
    for i in range(1, n + 1):
        with open(tmp_path / 'pieces' / ('%d.csv' % i), 'w') as out, \
                open(tmp_path / 'logs' / ('%d.err' % i), 'w') as err:
            r = subprocess.run(['bash', '-c', 'sed -n "${SLURM_ARRAY_TASK_ID}p" jobs.txt | bash'],
                               env=dict(os.environ, SLURM_ARRAY_TASK_ID=str(i)), stdout=out,
                               stderr=err, cwd=tmp_path, timeout=300)
        assert r.returncode == 0, (tmp_path / 'logs' / ('%d.err' % i)).read_text()
    assert sim('sweep', *args, '--merge', tmp_path / 'pieces').stdout == direct


def test_sweep_over_a_policy_parameter():
    # In whole 2 MiB folios: under the default (kernel) sizing this
    # trace's writes make folios so small that share=125 prices them as
    # page does.
    fixed = BASE + ',folio_policy=fixed'
    base = fixed + ',dirty_bytes=2M,dirty_account=pinned'
    out = sim('sweep', '-o', base, '-a', 'account.share=0,125,1000', PGBENCH).stdout
    header, body = rows(out)
    assert header == ['run', 'trace', 'account.share', 'options'] + RESULTS
    assert [r[2] for r in body] == ['0', '125', '1000']
    assert [r[3] for r in body] == [base + ',account.share=' + v for v in ('0', '125', '1000')]
    res = {r[2]: r[4:] for r in body}
    # Each row is the replay of its options alone; share=0 prices as page,
    # share=1000 as folio (blockstate/account_pinned.c), 125 (the default) as neither.
    cmp = sim(PGBENCH, '-o', fixed + ',dirty_bytes=2M', '--compare', '--csv',
              *[c[len(fixed) + 1:] for c in (r[3] for r in body)],
              'dirty_account=page', 'dirty_account=folio', 'dirty_account=pinned').stdout
    crow = {r[0]: r[1:] for r in rows(cmp)[1]}
    for r in body:
        assert crow[r[3][len(fixed) + 1:]] == r[4:], r[3]
    assert res['0'] == crow['dirty_account=page']
    assert res['1000'] == crow['dirty_account=folio']
    assert res['125'] == crow['dirty_account=pinned']
    charged = {v: int(res[v][RESULTS.index('pages_charged')]) for v in res}
    assert charged['0'] < charged['125'] < charged['1000'], charged


@pytest.mark.parametrize('args, named', [
    (['-o', 'dirty_account=pinned', '-a', 'account.share=0,1001'], 'account.share=1001'),
    (['-a', 'account.share=0,125'], 'account.share: not a parameter of dirty_account=page'),
    (['-a', 'bogus=1,2'], 'bogus=1: not an option'),
    (['-a', 'dirty_account=folio,nonsense'], 'dirty_account=nonsense'),
    (['-a', 'dirty_account='], '-a dirty_account='),
    (['-a', 'dirty_account=folio,,page'], '-a dirty_account=folio,,page'),
    (['-a', 'cache_size,dirty_account=folio'], 'one KEY'),
    (['-a', 'dirty_bytes=2M', '-a', 'dirty_bytes=4M'], 'a second axis'),
    (['-c', 'dirty_ratio=200'], 'dirty_ratio=200'),
    (['--run', '1'], '--run 1'),
    (['-j', '0'], '--workers=0'),
    (['--jobs', '--csv', 'x.csv'], '--jobs'),
])
def test_sweep_bad_input(tmp_path, args, named):
    p = sim('sweep', *args, '--csv', tmp_path / 'out.csv', PGBENCH, check=False) \
        if '--jobs' not in args else sim('sweep', *args, PGBENCH, check=False)
    assert p.returncode == 2, p.stderr
    assert named in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    assert not (tmp_path / 'out.csv').exists() and p.stdout == ''


PARETO_CSV = """run,trace,k,options,pause_total_ms,peak_pinned_bytes,writers_ops_s
0,t,a,k=a,100,1048576,5
1,t,b,k=b,50,2097152,6
2,t,c,k=c,60,3145728,4
3,t,d,k=d,100,1048576,5
4,t,e,k=e,10,8388608,1
5,u,a,k=a,1,1048576,1
"""


def plot_python():
    py = '/usr/bin/python3'
    if subprocess.run([py, '-c', 'import matplotlib'], capture_output=True).returncode:
        pytest.skip('matplotlib missing for %s (Debian python3-matplotlib)' % py)


def test_plot_marks_the_pareto_front(tmp_path):
    """a and d (the same point), b and e are optimal in trace t (less paused
    time or less pinned memory than any other); c is beaten by b on both.
    Trace u is a panel of its own.  With -y writers_ops_s (more is better)
    c is beaten and e is not."""
    plot_python()
    (tmp_path / 's.csv').write_text(PARETO_CSV)
    p = subprocess.run([PLOT, tmp_path / 's.csv', '-o', tmp_path / 's.png'],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    front = [(ln.split('\t')[0], ln.split('\t')[-1]) for ln in p.stdout.splitlines()]
    assert sorted(front) == [('t', 'k=a'), ('t', 'k=b'), ('t', 'k=d'), ('t', 'k=e'),
                             ('u', 'run 5')]
    assert (tmp_path / 's.png').read_bytes()[:4] == b'\x89PNG'
    p = subprocess.run([PLOT, tmp_path / 's.csv', '-y', 'writers_ops_s', '-o',
                        tmp_path / 't.png'], capture_output=True, text=True, timeout=120)
    front = sorted(ln.split('\t')[-1] for ln in p.stdout.splitlines() if ln.startswith('t\t'))
    assert front == ['k=a', 'k=b', 'k=d'], p.stdout


def test_sweep_plot(tmp_path):
    """--plot: the PNG, the CSV still alone on stdout, the front on stderr."""
    plot_python()
    p = sim('sweep', '-o', BASE, *AXES, PGBENCH, '--plot', tmp_path / 'f.png')
    header, body = rows(p.stdout)
    assert header[0] == 'run' and len(body) == 8
    assert (tmp_path / 'f.png').read_bytes()[:4] == b'\x89PNG'
    assert '\tpause_total_ms=' in p.stderr, p.stderr
