"""The cache by file class and LRU list, without PostgreSQL or a mount:
what contrib/tools/pgcompare.py records of a mount per iteration, to set
beside what contrib/kernel/pg-seed.py records of the kernel's (issue 37).

- foliofs_tools names the data directory's files (pgbench_accounts and
  its segments, its primary key, pg_wal, the rest) from the server's
  relation list, by inode, and sums a .foliofs/folios listing per class:
  folios by order, bytes, the 2 MiB share, active bytes (flag A),
  referenced folios (flag R);
- pgcompare's iterations.csv keeps its columns in their order and adds
  the new ones at the end.
"""

import json
import os
import sys

import util

for _d in (('contrib', 'lib'), ('contrib', 'kernel'), ('contrib', 'tools')):
    _p = os.path.join(util.REPO, *_d)
    if _p not in sys.path:
        sys.path.insert(0, _p)
import foliofs_tools  # noqa: E402
import pgcompare  # noqa: E402

MiB = 1 << 20

RELATIONS = ("pgbench_accounts|base/5/16397\n"
             "pgbench_accounts_pkey|base/5/16403\n"
             "pg_class|base/5/1259\n"
             "pgbench_history|base/5/16390\n")     # no file yet: not listed


def make_data(top):
    """A data directory's files: {relative path: st_ino}."""
    inos = {}
    for rel in ('base/5/16397', 'base/5/16397.1', 'base/5/16403', 'base/5/1259',
                'pg_wal/000000010000000000000001', 'global/pg_control'):
        path = os.path.join(top, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb'):
            pass
        inos[rel] = os.stat(path).st_ino
    return inos


def test_file_classes(tmp_path):
    data = str(tmp_path)
    inos = make_data(data)
    rels = foliofs_tools.relation_classes(RELATIONS, data)
    assert rels == {'base/5/16397': 'accounts', 'base/5/16397.1': 'accounts',
                    'base/5/16403': 'accounts_pkey', 'base/5/1259': 'other'}
    assert foliofs_tools.data_file_classes(data, rels) == {
        inos['base/5/16397']: 'accounts', inos['base/5/16397.1']: 'accounts',
        inos['base/5/16403']: 'accounts_pkey', inos['base/5/1259']: 'other',
        inos['pg_wal/000000010000000000000001']: 'wal', inos['global/pg_control']: 'other'}


# A listing: inode 10 is pgbench_accounts, 11 a WAL segment, 12 nothing
# named (other).
LISTING = """10 0 9 uA
10 512 9 uR
10 1024 0 udAR
10 1025 2 us
11 0 0 uA
11 1 0 -
12 7 4 uR
"""


def test_cache_by_class():
    folios = foliofs_tools.parse_folios(LISTING)
    assert folios[2] == (10, 1024, 0, 'udAR') and folios[5] == (11, 1, 0, '-')
    got = foliofs_tools.cache_by_class(folios, {10: 'accounts', 11: 'wal'})
    acc_bytes = 2 * 2 * MiB + 4096 + 16384
    assert got == {
        'accounts': {'folios': {'9': 2, '0': 1, '2': 1}, 'bytes': acc_bytes,
                     'share_2m': 4 * MiB / acc_bytes, 'active': {'9': 1, '0': 1},
                     'active_bytes': 2 * MiB + 4096, 'referenced': 2},
        'wal': {'folios': {'0': 2}, 'bytes': 8192, 'share_2m': 0.0, 'active': {'0': 1},
                'active_bytes': 4096, 'referenced': 0},
        'other': {'folios': {'4': 1}, 'bytes': 65536, 'share_2m': 0.0, 'active': {},
                  'active_bytes': 0, 'referenced': 1}}
    # JSON and back, as iterations.csv keeps it: the same.
    assert json.loads(json.dumps(got)) == got


# pgcompare's iterations.csv before the cache by class: every column in order.
OLD_HEADER = [
    "config", "clients", "iteration", "position", "start_unix_ms", "end_unix_ms",
    "stop_end_unix_ms", "tps", "transactions", "failed", "latency_avg_ms",
    "daemon_threads", "daemon_fds", "daemon_rss_kib"] + \
    ["run_" + k for k in pgcompare.COUNTERS] + ["total_" + k for k in pgcompare.COUNTERS] + \
    ["share_2m", "cached_folios", "transport"]
NEW_COLUMNS = ["source_by_class", "run_by_class", "active_bytes", "inactive_bytes"]


def test_iteration_header_appends():
    assert pgcompare.iteration_header(False) == OLD_HEADER + NEW_COLUMNS
    lat = pgcompare.iteration_header(True)
    assert lat[-len(NEW_COLUMNS):] == NEW_COLUMNS and "lat_p99_ms" in lat
