"""contrib/results stays small enough to clone with the code (issue 40).

Each dated run there keeps its README (command, commit, tables) and small
tables; raw samples above about 100 KB are compressed or summarized, plots
re-encoded, and whatever was dropped is named in the run's README with the
commit that has it (doc/results.md, "What a results folder keeps").  The
budget below is for all of contrib/results together: what git tracks there
plus what it would add (untracked, not ignored), as the files are on disk.
No mount, no build; a second or less.
"""

import os
import subprocess

import util

RESULTS = os.path.join(util.REPO, 'contrib', 'results')
BUDGET = 4 << 20   # bytes
SHOW = 10          # the largest files named in a failure


def results_files():
    """Paths (relative to the repository) of the files under
    contrib/results that a commit would hold: git's view where this is a
    git checkout, every file below the folder otherwise."""
    try:
        r = subprocess.run(['git', '-C', util.REPO, 'ls-files', '-z', '--cached', '--others',
                            '--exclude-standard', '--', 'contrib/results'],
                           capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        r = None
    if r is not None and r.returncode == 0:
        names = [n.decode() for n in r.stdout.split(b'\0') if n]
        # Deleted in the work tree but not yet in a commit: not counted.
        return [n for n in names if os.path.isfile(os.path.join(util.REPO, n))]
    out = []
    for top, _dirs, files in os.walk(RESULTS):
        out += [os.path.relpath(os.path.join(top, f), util.REPO) for f in files]
    return out


def over_budget(sizes, budget=BUDGET, show=SHOW):
    """None when the sizes ({path: bytes}) add up to at most BUDGET, else
    the message: the total and the SHOW largest files."""
    total = sum(sizes.values())
    if total <= budget:
        return None
    largest = sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0]))[:show]
    lines = ['contrib/results holds %d bytes (%.2f MiB) in %d files, over its budget of '
             '%.0f MiB; compress raw samples (gzip -9 -n), re-encode plots '
             '(pngquant, optipng), or drop what a table already says and name '
             'the commit that has it in the run\'s README. The largest files:'
             % (total, total / (1 << 20), len(sizes), budget / (1 << 20))]
    lines += ['  %9d  %s' % (size, path) for path, size in largest]
    return '\n'.join(lines)


def test_over_budget_names_the_largest_files():
    """The check itself: at the budget it passes; one byte over, it fails
    naming the largest files first, and no more than it shows."""
    sizes = {'contrib/results/a/small.md': 1, 'contrib/results/b/raw.csv': 3,
             'contrib/results/c/plot.png': 2}
    assert over_budget(sizes, budget=6) is None
    msg = over_budget(sizes, budget=5, show=2)
    assert msg is not None and '6 bytes' in msg
    assert msg.index('b/raw.csv') < msg.index('c/plot.png')
    assert 'a/small.md' not in msg


def test_results_within_budget():
    files = results_files()
    assert files, 'nothing found under %s' % RESULTS
    sizes = {f: os.path.getsize(os.path.join(util.REPO, f)) for f in files}
    msg = over_budget(sizes)
    assert msg is None, msg
