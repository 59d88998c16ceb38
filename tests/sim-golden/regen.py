#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Write the expected outputs of the replay-identity cases (golden.py):
    tests/sim-golden/regen.py [BUILD_DIR]     (default: build/ at the top)
or $FOLIOSIM for the binary.  Only for a change meant to move them."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden  # noqa: E402


def main():
    if len(sys.argv) > 1:
        os.environ['BUILD_DIR'] = sys.argv[1]
    sim = golden.default_sim()
    os.makedirs(golden.EXPECTED, exist_ok=True)
    names = set()
    for case in golden.CASES:
        out = golden.output(sim, case)
        with open(golden.expected_path(case), 'wb') as f:
            f.write(out)
        names.add(case[0] + '.out')
        print('%-28s %7d bytes' % (case[0], len(out)))
    for stale in sorted(set(os.listdir(golden.EXPECTED)) - names):
        os.unlink(os.path.join(golden.EXPECTED, stale))
        print('removed', stale)


if __name__ == '__main__':
    main()
