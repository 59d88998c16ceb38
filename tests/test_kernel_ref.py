"""The kernel references for PostgreSQL, in their smallest form:
contrib/kernel/pg-folios.py (which activities build large folios) and
contrib/kernel/pg-seed.py (the seed's scenario on the kernel).

- pg-folios at scale 2 (a 26 MiB pgbench_accounts): a sequential scan of
  the table, from a cold cache, puts most of it in 2 MiB folios on this
  machine's kernel and on a mount under ra_model 6.17, and none under
  6.16 (whose folios stay at 128 KiB at most), while pgbench's random
  reads make none; the reports are well formed.
- pg-seed --tiny: two iterations back to back, every column present and
  sane (tps > 0, pages written, no event lost).

Both run as root (loop devices, tracefs, a memory cgroup, the server as
the postgres user) and are skipped with the reason where they cannot run.
They hold the drop_caches lock exclusively: they use tracefs and evict
files, which must not meet the other pytest session's tests.
"""

import json
import os
import shutil
import subprocess
import tempfile

import pytest

import util

KERNEL = os.path.join(util.REPO, 'contrib', 'kernel')
pytestmark = pytest.mark.drops_caches


def run_script(name, args, tmp_path):
    out = tmp_path / ('%s.json' % name)
    env = dict(os.environ, FOLIOFS=util.FOLIOFS)
    r = subprocess.run(['/usr/bin/python3', os.path.join(KERNEL, name)] + args +
                       ['--json', str(out)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=env, timeout=400)
    if r.returncode == 77:
        pytest.skip('%s: %s' % (name, r.stdout.strip().splitlines()[-1]))
    assert r.returncode == 0, r.stdout
    with open(out) as f:
        return json.load(f), r.stdout


def accounts(res, activity):
    """{order: folios} pg-folios added to pgbench_accounts in ACTIVITY."""
    for r in res['results']:
        if r['activity'] == activity:
            h = {}
            for key, hist in r['added'].items():
                if key.split('|')[0] == 'accounts':
                    for o, n in hist.items():
                        h[int(o)] = h.get(int(o), 0) + n
            return h
    raise AssertionError('no %s in the results' % activity)


def share_2m(h):
    total = sum(n << o for o, n in h.items())
    return (h.get(9, 0) << 9) / total if total else 0.0


SMALL = ['--scale', '2', '--duration', '3', '--clients', '2',
         '--activities', 'load,pgbench,seqscan']


@pytest.mark.timeout(900)
@pytest.mark.parametrize('backend', ['kernel', 'foliofs-6.17', 'foliofs-6.16'])
def test_pg_folios(backend, tmp_path):
    args = ['--backend', backend.split('-')[0]] + SMALL
    if backend == 'foliofs-6.16':
        args += ['--opt', 'ra_model=6.16']
    res, out = run_script('pg-folios.py', args, tmp_path)
    assert [r['activity'] for r in res['results']] == ['load', 'pgbench', 'seqscan'], out
    for r in res['results']:
        assert r['seconds'] > 0 and r['added'], (r, out)
        if r['backend'] == 'kernel':
            assert r['lost_events'] == 0, out
    scan, bench = accounts(res, 'seqscan'), accounts(res, 'pgbench')
    # The whole table comes back from a cold cache.
    assert sum(n << o for o, n in scan.items()) * 4096 >= 24 << 20, (scan, out)
    assert share_2m(bench) == 0, (bench, out)
    if backend == 'foliofs-6.16':
        assert max(scan) <= 5, (scan, out)
    else:
        assert share_2m(scan) >= 0.6, (scan, out)
    assert '== ' in out and 'in 2M' in out


@pytest.mark.timeout(1200)
def test_pg_seed_tiny_beside_the_model(tmp_path):
    """pg-seed --tiny on the kernel, the preset's quick form on a mount at
    the same sizing (6.17-folio only), and model-vs-kernel.py over the
    two: every column present and sane, the report well formed."""
    res, out = run_script('pg-seed.py', ['--tiny'], tmp_path)
    rows = res['iterations']
    assert len(rows) == 2, out
    for r in rows:
        assert r['tps'] > 0 and r['written_pages'] > 0 and r['charged_pages'] > 0, (r, out)
        assert 0 <= r['pauses'] <= r['bdp_events'] and r['paused_ms'] >= 0, (r, out)
        assert r['cached'], (r, out)
        # Sampled once a second over a 5 s run: dirty + writeback seen.
        assert r['peak_dirty_pages'] >= r['mean_dirty_pages'] >= 0, (r, out)
        assert 0.0 <= r['above_freerun'] <= 1.0, (r, out)
        assert 0.0 <= r['above_thresh_5s'] <= 1.0, (r, out)
        # The backends' reads of a table just loaded add folios, named as
        # theirs by the server log (log_connections).
        assert r['added_by_role'].get('client backend'), (r, out)
        # Named by file: the scan and the backends read pgbench_accounts.
        assert r['added_by_class'].get('accounts'), (r, out)
        assert r['cached_by_class'].get('accounts'), (r, out)
        assert isinstance(r['autovacuum'], list), (r, out)
    s = res['summary']
    assert s['mean_tps'] > 0 and s['cv'] >= 0 and s['charged_per_written'] > 0, (s, out)
    assert '| mean tps | CV |' in out

    a = res['meta']['args']
    # pgcompare runs the server and the mount as an unprivileged user: a
    # work directory it can enter, not pytest's.
    top = tempfile.mkdtemp(prefix='foliofs-kernel-ref-', dir='/var/tmp')
    try:
        check_beside_the_model(a, top, tmp_path)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def check_beside_the_model(a, top, tmp_path):
    os.chmod(top, 0o755)
    model = os.path.join(top, 'model')
    pg = subprocess.run(
        ['/usr/bin/python3', os.path.join(util.REPO, 'contrib', 'tools', 'pgcompare.py'),
         '--preset', 'seed', '--quick', '-s', str(a['scale']), '-r', str(a['iters']),
         '-T', str(a['duration']), '-c', str(a['clients']),
         '--config', '6.17-folio=ra_model=6.17,dirty_account=folio',
         '-o', 'folio_policy=kernel,readahead_kb=2048,cache_size=128M,dirty_bytes=%d,'
         'dirty_background_bytes=%d' % (a['dirty_bytes'], a['dirty_background_bytes']),
         '-O', model, '-d', top],
        env=dict(os.environ, FOLIOFS=util.FOLIOFS), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert pg.returncode == 0, pg.stdout
    md = tmp_path / 'side.md'
    r = subprocess.run(['/usr/bin/python3', os.path.join(KERNEL, 'model-vs-kernel.py'),
                        '--kernel', str(tmp_path / 'pg-seed.py.json'), '--model', model,
                        '--md', str(md)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert r.returncode == 0, r.stdout
    text = md.read_text()
    assert text == r.stdout
    lines = text.splitlines()
    for name in ('kernel', 'model', 'model error'):
        row = [ln for ln in lines if ln.startswith('| %s |' % name)]
        assert row, text
        cells = [c.strip() for c in row[0].strip('|').split('|')]
        assert len(cells) == 8 and all(cells), (row, text)
    assert sum(ln.startswith('| %d |' % i) for ln in lines for i in (1, 2)) == 2, text
    assert 'total variation distance' in text, text
