"""contrib/bench/bench-fio.sh's summary on a tiny run (two targets, one
workload of 1 s): a benchmark is not a test, but its report must not break
on where it runs.  WORKDIR holding "/fio-" made the summary crash (it
turned every "/fio-" of a result's path into "/s-" to find the stats
snapshots)."""

import os
import shutil
import subprocess

import pytest

import util

SCRIPT = os.path.join(util.REPO, 'contrib', 'bench', 'bench-fio.sh')


@pytest.mark.timeout(180)
def test_bench_fio_workdir_with_fio_in_its_path(tmp_path):
    if not shutil.which('fio'):
        pytest.skip('fio is not installed')
    work = tmp_path / 'fio-runs'
    work.mkdir()
    env = dict(os.environ, FOLIOFS=util.FOLIOFS)
    r = subprocess.run(['bash', SCRIPT, '-T', '1', '-s', '8M', '-j', '1', '-t', 'native,block',
                        '-w', '2', '-d', str(work)], env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=170)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = [l.split() for l in r.stdout.splitlines() if l.startswith('buffered-8k ')]
    assert [row[1] for row in rows[:2]] == ['native', 'block'], r.stdout
    # The block target's stats were found: its bytes written per byte dirtied.
    assert any('dirtied bytes written' in l for l in r.stdout.splitlines()), r.stdout
    assert os.listdir(work) == [], 'the run left %s' % os.listdir(work)
