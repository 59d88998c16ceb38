"""Readahead folio for folio: this machine's kernel beside the mount.

Each pattern of contrib/kernel/ra-patterns.py (one stream, two handles
interleaved, reopen, random reads crossing a readahead mark in three
variants, reads after a partial eviction, a stream crossing folios that
random 8 KiB reads, writes or both cached first, and PostgreSQL's
parallel sequential scan, alone and after random reads) runs on the kernel
(ext4 and XFS, each on a loop device, traced with tracefs) and through a
foliofs mount with its default readahead model (folio_policy=kernel,
cache=direct, readahead_kb = the loop device's read_ahead_kb, 2048), and
the folios each leaves must be the same, folio for folio.  Every pattern
is deterministic on the kernel (two runs, ext4 and XFS: equal;
contrib/results/ra-kernel-2026-12-05, ra-crossing-2026-12-07), so
equality is demanded of all of them.

The kernel side runs once per session and file system (all patterns,
about 3 s each); skipped with the reason where it cannot run: not root,
no tracefs, no loop device, no mkfs for that file system.  The tests take
the drop_caches lock exclusively (see pytestmark).
"""

import importlib.util
import os

import pytest

import util

SCRIPT = os.path.join(util.REPO, 'contrib', 'kernel', 'ra-patterns.py')


def load_script():
    spec = importlib.util.spec_from_file_location('ra_patterns', SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


rap = load_script()


# Each side runs once per session, inside the first test that needs it,
# so that the test's drop_caches lock (below) is held while it runs.
_RUNS = {}


def _once(name, run):
    if name not in _RUNS:
        try:
            _RUNS[name] = {r['pattern']: r for r in run()}
        except rap.Skip as e:
            _RUNS[name] = str(e)
    if isinstance(_RUNS[name], str):
        pytest.skip('%s: %s' % (name, _RUNS[name]))
    return _RUNS[name]


# Exclusive with every other test of both pytest sessions (conftest's
# drop_caches lock): another session's drop of the kernel's caches would
# evict the traced file mid-pattern, and two runs of this test at once
# would share tracefs (which the first mounts and unmounts).
pytestmark = pytest.mark.drops_caches


@pytest.fixture(params=['ext4', 'xfs'])
def kernel(request):
    """{pattern: result} of the kernel, on each file system."""
    fs = request.param
    return _once('kernel side (%s)' % fs, lambda: rap.run_kernel((fs,)))


@pytest.fixture
def mount_side():
    """{pattern: result} of the mount, default readahead model."""
    return _once('mount side', lambda: rap.run_foliofs(util.FOLIOFS, opts=util.EXTRA_OPTIONS))


def test_kernel_trace_adds_up(kernel):
    """The kernel side itself: the trace accounts for every resident page
    and every add and delete matches."""
    for name, r in kernel.items():
        assert not r['odd'], (name, r['odd'])
        assert r['folios'], name


@pytest.mark.timeout(60)
@pytest.mark.parametrize('pattern', list(rap.PATTERNS))
def test_folios_as_kernel(kernel, mount_side, pattern):
    k, m = kernel[pattern], mount_side[pattern]
    assert m['exit_status'] == 0, m['output']
    util.check_output(m['output'])
    diffs = rap.compare(k, m)
    table = '\n'.join(rap.histogram_table([k, m]))
    # Folios the kernel's trace deleted while the pattern ran that it did
    # not evict itself (the host's reclaim under load; run_kernel() has
    # already retried the pattern for them): named in a failure.
    gone = ', '.join('%d/%d' % tuple(f) for f in k['foreign_deletes'][:30])
    assert not diffs, ('%s: %d folios differ from the kernel\'s:\n%s\n%s\n'
                       'deleted from the kernel\'s cache by no eviction of the pattern\'s '
                       '(index/order), in the last of %d attempts: %s; host reclaim %s'
                       % (pattern, len(diffs), '\n'.join(diffs[:30]), table, k['attempts'],
                          gone or 'none', k['host_reclaim']))


def test_foreign_deletes():
    """Deletes the pattern's own evictions cover are not foreign; length 0
    runs to the end; a folio only partly inside an eviction is foreign."""
    MiB, page = 1 << 20, rap.PAGE
    evicted = [(16 * MiB, 8 * MiB), (40 * MiB, 0)]
    deleted = [(16 * MiB // page, 9), (24 * MiB // page - 1, 0), (24 * MiB // page, 0),
               (15 * MiB // page, 9), (40 * MiB // page + 7, 0), (5, 0)]
    assert rap.foreign_deletes(deleted, evicted) == [
        (24 * MiB // page, 0), (15 * MiB // page, 9), (5, 0)]
    assert rap.foreign_deletes(deleted, []) == deleted
