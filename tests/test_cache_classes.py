"""The cache by file class and LRU list, without PostgreSQL or a mount:
what contrib/tools/pgcompare.py records of a mount per iteration and what
contrib/kernel/calibrate.py sets beside the kernel's (issue 37).

- foliofs_tools names the data directory's files (pgbench_accounts and
  its segments, its primary key, pg_wal, the rest) from the server's
  relation list, by inode, and sums a .foliofs/folios listing per class:
  folios by order, bytes, the 2 MiB share, active bytes (flag A),
  referenced folios (flag R);
- pgcompare's iterations.csv keeps its columns in their order and adds
  the new ones at the end;
- refcmp.cache_section() builds the kernel / model tables from a
  pg-seed.py result and a pgcompare report directory, and says in one
  line which side lacks the data when a run's files predate it.
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
import refcmp  # noqa: E402

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
NEW_COLUMNS = ["source_by_class", "run_by_class", "active_bytes", "inactive_bytes",
               "bgwriter"]


def test_iteration_header_appends():
    assert pgcompare.iteration_header(False) == OLD_HEADER + NEW_COLUMNS
    lat = pgcompare.iteration_header(True)
    assert lat[-len(NEW_COLUMNS):] == NEW_COLUMNS and "lat_p99_ms" in lat


def kernel_result(with_cache=True):
    """A pg-seed.py result of two iterations (the fields the tables read)."""
    its = []
    for i in (1, 2):
        r = {'iter': i, 'cached': {'0': 256, '9': 1}}
        if with_cache:
            r.update(cached_by_class={'accounts': {'9': 1, '0': 256 * i}},
                     source_cached={'9': 3},
                     lru={'lru': {'0': 512, '9': 2}, 'active': {'9': 1}, 'referenced': {}},
                     cg_memory_end={'active_file': 2.5, 'inactive_file': 4.0})
        its.append(r)
    return {'iterations': its}


def model_dir(tmp_path, with_cache=True):
    """A pgcompare report directory: configuration 'model', two iterations."""
    classes = {10: 'accounts', 11: 'wal'}
    run = foliofs_tools.cache_by_class(foliofs_tools.parse_folios(LISTING), classes)
    src = foliofs_tools.cache_by_class([(10, 0, 9, 'u'), (10, 512, 9, 'u')], classes)
    rows = []
    for i in (1, 2):
        row = {k: 0 for k in OLD_HEADER}
        row.update(config='model', iteration=i, cached_folios='0 ' * 9 + '1',
                   transport='/dev/fuse')
        if with_cache:
            row.update(source_by_class=json.dumps(src), run_by_class=json.dumps(run),
                       active_bytes=2 * MiB, inactive_bytes=(2 * i + 1) * MiB)
        rows.append(row)
    pgcompare.write_csv(str(tmp_path / 'iterations.csv'),
                        pgcompare.iteration_header(False) if with_cache else OLD_HEADER, rows)
    return str(tmp_path)


def md_tables(lines):
    """The Markdown tables of LINES: lists of rows, each a list of cells."""
    tables, cur = [], []
    for line in lines + ['']:
        if line.startswith('|'):
            cur.append([c.strip() for c in line.strip().strip('|').split('|')])
        elif cur:
            tables.append(cur)
            cur = []
    return tables


def test_cache_section_tables(tmp_path):
    lines, js = refcmp.cache_section(kernel_result(), model_dir(tmp_path), 'model')
    assert js['kernel'][0]['classes']['accounts'] == {'mib': 3.0, 'share_2m': 512 / 768}
    tables = md_tables(lines)
    assert len(tables) == 2 and [len(t) for t in tables] == [5, 5], lines
    by_class, whole = tables
    assert by_class[0] == ['iteration', 'accounts MiB', 'accounts 2M', 'accounts_pkey MiB',
                           'accounts_pkey 2M', 'wal MiB', 'wal 2M', 'other MiB', 'other 2M']
    # Kernel: accounts 1 x 2M + 256 x 4K = 3 MiB, 67% in 2M (then 4 MiB,
    # 50%); model: 4 MiB + 20 KiB, 99.5%; wal 8 KiB, other 64 KiB.
    assert by_class[2] == ['1', '3 / 4', '67% / 100%', '0 / 0', 'n/a / n/a', '0 / 0',
                           'n/a / 0%', '0 / 0', 'n/a / 0%']
    assert by_class[3][:3] == ['2', '4 / 4', '50% / 100%']
    assert by_class[4][:3] == ['mean', '4 / 4', '58% / 100%']
    assert whole[0] == ['iteration', 'after source MiB', 'after source 2M', 'active MiB',
                        'inactive MiB', 'kernel cgroup active / inactive MiB']
    # Kernel LRU: 512 x 4K + 2 x 2M on it, one 2M active: 2 / 4 MiB.
    assert whole[2] == ['1', '6 / 4', '100% / 100%', '2 / 2', '4 / 3', '2 / 4']
    assert whole[3] == ['2', '6 / 4', '100% / 100%', '2 / 2', '4 / 5', '2 / 4']
    assert whole[4] == ['mean', '6 / 4', '100% / 100%', '2 / 2', '4 / 4', '2 / 4']


def test_cache_section_older_runs(tmp_path):
    """A run whose files predate the data: one line naming the side, no table."""
    (tmp_path / 'old').mkdir()
    (tmp_path / 'new').mkdir()
    old_m, new_m = model_dir(tmp_path / 'old', False), model_dir(tmp_path / 'new')
    for kres, mdir, lacking in ((kernel_result(False), new_m, ['kernel']),
                                (kernel_result(), old_m, ['model']),
                                (kernel_result(False), old_m, ['kernel', 'model'])):
        lines, js = refcmp.cache_section(kres, mdir, 'model')
        assert js is None and len(lines) == 1, lines
        assert not any(ln.startswith('|') for ln in lines)
        assert [s for s in ('kernel', 'model') if 'the %s side' % s in lines[0]] == lacking
