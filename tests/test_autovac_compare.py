# SPDX-License-Identifier: GPL-2.0-or-later
"""contrib/sim/autovac-compare.py without a mount or a server: its reading
of PostgreSQL 15's autovacuum log lines, and its generated side (the
worker's I/O picked out of a generated trace agrees with the generator's
own counts) run again from the committed real run
(contrib/results/autovacuum-gen-2026-12-07/run.json, --from-json).
Runs $FOLIOSIM or <repo>/build/sim/foliofs-sim."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from util import REPO

SCRIPT = os.path.join(REPO, 'contrib', 'sim', 'autovac-compare.py')
RUN_JSON = os.path.join(REPO, 'contrib', 'results', 'autovacuum-gen-2026-12-07', 'run.json')
FOLIOSIM = os.environ.get('FOLIOSIM', os.path.join(REPO, 'build', 'sim', 'foliofs-sim'))

LOG = '''\
2026-12-07 11:25:01.000 UTC [12340] autovacuum worker LOG:  automatic vacuum of table "postgres.public.pgbench_tellers": index scans: 0
\tpages: 0 removed, 10 remain, 10 scanned (100.00% of total)
2026-12-07 11:25:03.123 UTC [12345] autovacuum worker LOG:  automatic vacuum of table "postgres.public.pgbench_accounts": index scans: 1
\tpages: 0 removed, 32787 remain, 32787 scanned (100.00% of total)
\ttuples: 20341 removed, 2001234 remain, 12 are dead but not yet removable
\tremovable cutoff: 301234, which was 3 XIDs old when operation ended
\tindex scan needed: 1523 pages from table (4.65% of total) had 1632 dead item identifiers removed
\tindex "pgbench_accounts_pkey": pages: 5486 in total, 0 newly deleted, 0 currently deleted, 0 reusable
\tI/O timings: read: 312.123 ms, write: 4.567 ms
\tavg read rate: 23.456 MB/s, avg write rate: 7.890 MB/s
\tbuffer usage: 45678 hits, 23456 misses, 12345 dirtied
\tWAL usage: 56789 records, 1234 full page images, 12345678 bytes
\tsystem usage: CPU: user: 1.23 s, system: 0.45 s, elapsed: 7.89 s
2026-12-07 11:25:04.000 UTC [999] client backend LOG:  statement: SELECT 1
2026-12-07 11:26:00.000 UTC [12400] autovacuum worker LOG:  automatic vacuum of table "postgres.public.pgbench_accounts": index scans: 0
\tpages: 0 removed, 32787 remain, 40 scanned (0.12% of total)
\tindex scan bypassed: 3 pages from table (0.01% of total) have 3 dead item identifiers
\tsystem usage: CPU: user: 0.01 s, system: 0.00 s, elapsed: 0.05 s
'''


def load():
    spec = importlib.util.spec_from_file_location('autovac_compare', SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.join(REPO, 'contrib', 'lib'))
    spec.loader.exec_module(mod)
    return mod


def test_parse_log(tmp_path):
    ac = load()
    path = tmp_path / 'postgresql.log'
    path.write_text(LOG)
    vacs, lines = ac.parse_vacuums(str(path))
    assert len(vacs) == 2
    v = vacs[0]
    assert v['pid'] == 12345 and v['index_scans'] == 1 and not v['bypassed']
    assert (v['heap_scanned'], v['lpdead_pages'], v['index_pages']) == (32787, 1523, 5486)
    assert (v['hits'], v['misses'], v['dirtied']) == (45678, 23456, 12345)
    assert (v['wal_bytes'], v['wal_images'], v['duration_s']) == (12345678, 1234, 7.89)
    assert abs(v['end_unix_ms'] - v['start_unix_ms'] - 7890) < 1e-6
    assert vacs[1]['bypassed'] == 1 and vacs[1]['lpdead_pages'] == 3
    # the workers' lines and their continuations, not the client's
    assert len(lines) == 2 + 11 + 4 and not any('client backend' in x for x in lines)


@pytest.mark.skipif(not os.path.exists(FOLIOSIM), reason='%s not built' % FOLIOSIM)
def test_from_json(tmp_path):
    out = tmp_path / 'out'
    r = subprocess.run([sys.executable, SCRIPT, str(out), '--from-json', RUN_JSON,
                        '--sim', FOLIOSIM, '--work', str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    with open(RUN_JSON) as f:
        old = json.load(f)
    with open(out / 'run.json') as f:
        new = json.load(f)
    # the real side is the committed one, untouched
    assert new['real'] == old['real'] and new['samples'] == old['samples']
    gen = new['generated']['generated']
    assert gen['vacuums'] and gen['totals']['updates'] == old['args']['updates']
    for v in gen['vacuums']:
        # the worker's reads in the trace are the generator's misses, 8 KiB each
        assert v['heap_reads'] + v['index_reads'] == v['misses']
        assert set(v['read_sizes']) == {'8192'}
        assert v['heap_scanned'] + v['heap_skipped'] == 32787
    assert '| heap pages scanned | 33126 |' in (out / 'report.md').read_text()
