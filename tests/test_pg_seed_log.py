"""contrib/kernel/pg-seed.py's reading of the server log, without a server:
the automatic vacuums and analyzes PostgreSQL 15 logged with
log_autovacuum_min_duration=0 (tests/data/pg15-autovacuum.log, a real
server's log: pgbench -i -s 1, pgbench -N, an UPDATE of 40,000 rows) and
the folios added by each kind of process."""

import importlib.util
import os
import sys

import util

DATA = os.path.join(util.REPO, 'tests', 'data', 'pg15-autovacuum.log')


def load():
    here = os.path.join(util.REPO, 'contrib', 'kernel')
    if here not in sys.path:
        sys.path.insert(0, here)     # as for the script: its directory's modules
    path = os.path.join(here, 'pg-seed.py')
    spec = importlib.util.spec_from_file_location('pg_seed', path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_autovacuum_runs_from_the_log():
    runs = load().autovacuum_runs(DATA)
    accounts = [r for r in runs if r['table'] == 'pgbench_accounts']
    assert [(r['pid'], r['kind']) for r in accounts] == \
        [(4326, 'vacuum'), (4326, 'analyze'), (4346, 'vacuum'), (4346, 'analyze')]
    first, second = accounts[0], accounts[2]
    assert (first['scanned'], first['hits'], first['misses'], first['dirtied']) == \
        (1656, 4633, 1, 0)
    assert (first['read_mb_s'], first['elapsed_s']) == (0.132, 0.05)
    assert (second['scanned'], second['hits'], second['elapsed_s']) == (2310, 6421, 0.08)
    assert 'scanned' not in accounts[1] and accounts[1]['hits'] == 1831
    # "automatic aggressive vacuum": a vacuum, aggressive; the catalog's
    # analyzes in between; offsets in order, each at its entry's line.
    aggressive = [r for r in runs if r['aggressive']]
    assert [(r['kind'], r['table']) for r in aggressive] == [('vacuum', 'pg_class')]
    assert [r['table'] for r in runs if r['pid'] == 4327][:2] == ['pg_type', 'pg_attribute']
    with open(DATA, 'rb') as f:
        text = f.read()
    for r in runs:
        assert text[r['offset']:].startswith(b'%d autovacuum worker LOG:' % r['pid']), r


def test_adds_by_role():
    mod = load()
    roles = {10: 'client backend', 11: 'client backend', 12: 'autovacuum worker',
             13: 'checkpointer', 14: 'walsender'}
    got = mod.adds_by_role({(10, 0): 5, (11, 1): 2, (12, 9): 3, (12, 0): 1, (13, 0): 4,
                            (14, 2): 6, (99, 9): 7}, roles)
    assert got == {'client backend': {0: 5, 1: 2}, 'autovacuum worker': {9: 3, 0: 1},
                   'checkpointer': {0: 4}, 'other': {2: 6, 9: 7}}
