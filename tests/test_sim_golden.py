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


def test_cases_have_expected_outputs():
    """Every case has its expected output and no expected output lacks a case."""
    names = {c[0] + '.out' for c in golden.CASES}
    assert len(names) == len(golden.CASES)
    assert set(os.listdir(golden.EXPECTED)) == names
