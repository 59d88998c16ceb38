# SPDX-License-Identifier: GPL-2.0-or-later
"""Replay identity (issue 28): fixed traces replayed through foliofs-sim
with fixed options give, byte for byte, the outputs kept in
sim-golden/expected/ (cases and how to regenerate them: sim-golden/golden.py).
Every case runs with readahead_kb=0, so that readahead's own changes do
not move these outputs; what they guard is the writeback engine (the
pass, the flushers' rounds, sync, errors and backoff, the throttler fed
by them).  A difference fails the case and shows it as a unified diff.
No mount: runs $FOLIOSIM or <build>/sim/foliofs-sim."""
import difflib
import os
import subprocess
import sys

import pytest

from util import FOLIOFS

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'sim-golden'))
import golden  # noqa: E402

FOLIOSIM = os.environ.get('FOLIOSIM', os.path.join(os.path.dirname(os.path.abspath(FOLIOFS)),
                                                   'sim', 'foliofs-sim'))

pytestmark = pytest.mark.skipif(not os.path.exists(FOLIOSIM),
                                reason='%s not built (or set $FOLIOSIM)' % FOLIOSIM)


@pytest.mark.parametrize('case', golden.CASES, ids=[c[0] for c in golden.CASES])
def test_replay_identity(case, tmp_path):
    with open(golden.expected_path(case), 'rb') as f:
        want = f.read()
    got = golden.output(FOLIOSIM, case, tmpdir=tmp_path)
    if got != want:
        diff = difflib.unified_diff(want.decode(errors='replace').splitlines(True),
                                    got.decode(errors='replace').splitlines(True),
                                    'expected/%s.out' % case[0], 'replay', n=1)
        pytest.fail('%s: the replay differs from its expected output (regenerate only '
                    'for a change meant to move it: sim-golden/regen.py)\n%s'
                    % (case[0], ''.join(list(diff)[:200])), pytrace=False)


SHIM = os.path.join(os.path.dirname(os.path.dirname(FOLIOSIM)), 'tests', 'libphysmem_shim.so')


def _as_if_memory(mb):
    """An environment in which the simulator sees a machine of @mb MiB."""
    env = dict(os.environ, LD_PRELOAD=SHIM, FOLIOFS_TEST_PHYS_MB=str(mb))
    # A sanitizer build wants its runtime first; the shim uses none of it.
    env['ASAN_OPTIONS'] = env.get('ASAN_OPTIONS', '') + ':verify_asan_link_order=0'
    return env


@pytest.mark.skipif(not os.path.exists(SHIM), reason='%s not built' % SHIM)
@pytest.mark.parametrize('mb', [1024, 393216])
def test_replay_independent_of_host_memory(mb, tmp_path):
    """A case that sets no cache_size prints the same bytes on a machine of
    1 GiB and of 384 GiB as here (issue 39: the default came from the host)."""
    env = _as_if_memory(mb)
    # The shim works: the mount's parser bounds cache_size by what it sees.
    p = subprocess.run([FOLIOSIM, 'gen', 'writers=1,ops=1', '-o', str(tmp_path / 't')],
                       capture_output=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    big = '%dM' % (mb + 1)
    p = subprocess.run([FOLIOSIM, str(tmp_path / 't'), '-o', 'cache_size=' + big],
                       capture_output=True, env=env, timeout=60)
    assert p.returncode == 2 and b'cache_size=' + big.encode() in p.stderr, p.stderr
    case = [c for c in golden.CASES if c[0] == 'pgbench-page'][0]
    assert 'cache_size' not in case[2]
    with open(golden.expected_path(case), 'rb') as f:
        want = f.read()
    assert golden.output(FOLIOSIM, case, tmpdir=tmp_path, env=env) == want


def test_cases_have_expected_outputs():
    """Every case has its expected output and no expected output lacks a case."""
    names = {c[0] + '.out' for c in golden.CASES}
    assert len(names) == len(golden.CASES)
    assert set(os.listdir(golden.EXPECTED)) == names
