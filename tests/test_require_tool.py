"""What the suite needs is installed by contrib/test.sh's install stage,
never by a test; a test that lacks it skips with the reason, and under CI
(CI=true) fails, so that CI cannot pass with PostgreSQL, the main story,
unrun (issue 39).  Runs pytest on the PostgreSQL test with PG_BINDIR (the
only place looked at when set) naming an empty directory."""

import os
import re
import subprocess
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))


def _run_pg_test(tmp_path, ci):
    empty = tmp_path / 'no-postgres'
    empty.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != 'CI'}
    env['PG_BINDIR'] = str(empty)
    if ci:
        env['CI'] = 'true'
    return subprocess.run([sys.executable, '-m', 'pytest', '-q', '-rfs', '-p', 'no:cacheprovider',
                           os.path.join(TESTS, 'test_postgres.py'), '-k', 'direct'],
                          cwd=TESTS, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=300)


def test_missing_postgres_skips_outside_ci_with_the_reason(tmp_path):
    r = _run_pg_test(tmp_path, ci=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r'^1 skipped', r.stdout, re.M), r.stdout
    assert "PostgreSQL's programs initdb, pg_ctl" in r.stdout, r.stdout
    assert 'apt-get install postgresql postgresql-client' in r.stdout, r.stdout


def test_missing_postgres_fails_under_ci(tmp_path):
    r = _run_pg_test(tmp_path, ci=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r'^1 failed', r.stdout, re.M), r.stdout
    assert 'CI=true: contrib/test.sh installs it' in r.stdout, r.stdout


def test_no_test_installs_packages():
    """apt-get belongs to the install stage: no test module runs it."""
    for name in sorted(os.listdir(TESTS)):
        if not name.endswith('.py'):
            continue
        with open(os.path.join(TESTS, name)) as f:
            text = f.read()
        assert not re.search(r"""['"]apt-get['"]\s*,""", text), name
