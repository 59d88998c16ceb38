# SPDX-License-Identifier: GPL-2.0-or-later
"""foliofs-sim's pgbench generator and RAID 0 device model (issue 30,
part 4).  Runs the built binary, $FOLIOSIM or <repo>/build/sim/foliofs-sim;
no mount.

- the op mix is what was asked: transactions, fdatasyncs per WAL group,
  index leaves read and dirtied with full-page images (checksums),
  reads of pages not in shared buffers at 1 - shared_buffers/table,
  evictions only after a read, 8 KiB aligned table I/O, WAL written in
  8 KiB pages, checkpoints in block order followed by fsyncs, clients at
  the asked rate, the scan whole and in order;
- determinism: the same spec gives the same bytes; another seed does not;
- memory: under a limit on its data, the generator makes 30 s of events
  in the 4 MiB that 1 s takes, and scale 8470 (150 GB of table and index)
  in 12 MiB, its bitmaps (3 bits per page), which do not fit in 4 MiB;
- the device: N volumes give N times one volume's IOPS on random reads
  and on random writes through writeback, within 10%, in virtual time;
- bad values are refused in one line; cache_size beyond this machine's
  memory only with sim_data=0;
- time-bounded iterations (deadline=1, as pgbench -T): a deadline record
  per client and iteration, each client's last transaction due at or
  after the deadline; a throttled replay ends every iteration at its
  deadline (the next starts then, or when the last transaction in flight
  is done), counts the transactions skipped, reports tps = done / length,
  and keeps no skipped record; an unthrottled one skips nothing;
- autovacuum=1: the worker's vacuums start at naptime checks, read the
  heap, the index and the heap again each in block order, 8 KiB at a
  time, write only pages they read (the ring); the maps are written by
  the checkpointer; the trace stays in time order;
- contrib/sim/pgbench-seed.py runs end to end at a small scale.
"""
import collections
import csv
import filecmp
import io
import os
import re
import resource
import subprocess
import sys

import pytest

from util import REPO

FOLIOSIM = os.environ.get('FOLIOSIM', os.path.join(REPO, 'build', 'sim', 'foliofs-sim'))
SEED = os.path.join(REPO, 'contrib', 'sim', 'pgbench-seed.py')

pytestmark = pytest.mark.skipif(
    not os.path.exists(FOLIOSIM),
    reason='%s not built (ninja -C build, or set $FOLIOSIM)' % FOLIOSIM)

PAGE = 8192


def gen(tmp_path, spec, name='t.trace'):
    out = str(tmp_path / name)
    r = subprocess.run([FOLIOSIM, 'gen', spec, '-o', out], capture_output=True, text=True,
                       check=True)
    return out, r.stdout


def dump(path):
    out = subprocess.run([FOLIOSIM, 'dump', path], capture_output=True, text=True,
                         check=True).stdout
    recs = []
    for line in out.splitlines():
        if line.startswith('#'):
            continue
        t, _dur, pid, fid, op, off, length = line.split()[:7]
        recs.append((int(t), int(pid), int(fid), op, int(off), int(length)))
    return recs


def totals(stdout):
    for line in stdout.splitlines():
        w = line.split()
        if w and w[0] == 'total':
            return {w[i]: int(w[i + 1]) for i in range(1, len(w) - 1, 2)}
    raise AssertionError('no totals in %r' % stdout)


def layout(stdout):
    w = stdout.splitlines()[0].split()
    return {w[i]: int(w[i + 1]) for i in range(1, len(w) - 1, 2)}


def test_op_mix(tmp_path):
    # scale 2: 3279 pages; shared_buffers 1024 pages: 31% of the table.
    spec = ('pgbench,clients=4,scale=2,tps=1000,duration=4,shared_buffers=8M,'
            'checkpoint_s=1,ckpt_target=50,wal_group=2,wal_rec=300,index=0')
    path, out = gen(tmp_path, spec)
    lay, tot = layout(out), totals(out)
    recs = dump(path)
    pages, pool = lay['table_pages'], lay['pool_pages']
    assert (pages, pool) == (3279, 1024)
    nsegs = 1          # rel_seg 1G: one table file (id 1), history 2, WAL 3..
    clients = {1, 2, 3, 4}
    ckpt = 5
    assert tot['txns'] == 4000
    c = collections.Counter()
    wal_bytes = 0
    for t, pid, fid, op, off, length in recs:
        if op == 'create':
            continue
        who = 'client' if pid in clients else 'ckpt' if pid == ckpt else 'other'
        what = 'table' if fid <= nsegs else 'history' if fid == nsegs + 1 else 'wal'
        c[(who, op, what)] += 1
        if what == 'table' and op in ('read', 'write'):
            assert off % PAGE == 0 and length == PAGE and off + length <= pages * PAGE
        if what == 'wal' and op == 'write':
            assert off % PAGE == 0 and length % PAGE == 0 and length > 0
            wal_bytes += length
    assert set(k[0] for k in c) <= {'client', 'ckpt'}
    # a WAL write and an fdatasync per 2 commits, and one more for each of
    # the 16 MiB segments the WAL filled (its group syncs both)
    assert c[('client', 'fdatasync', 'wal')] == 2000 + tot['wal_bytes'] // (16 << 20)
    assert c[('client', 'write', 'wal')] >= 2000
    # WAL pages written cover what was generated (partial pages rewritten)
    assert wal_bytes >= tot['wal_bytes']
    # reads: pages not in shared buffers, 1 - pool/pages of the transactions
    reads = c[('client', 'read', 'table')]
    assert reads == tot['reads']
    assert abs(reads / 4000 - (1 - pool / pages)) < 0.03, reads
    # a dirty victim is written only for a read
    assert 0 < c[('client', 'write', 'table')] <= reads
    # checkpoints (every second, 4 s): block order within each, then fsyncs
    assert c[('ckpt', 'write', 'table')] == tot['ckpt_writes'] > 0
    assert c[('ckpt', 'fsync', 'table')] >= 3
    last = -1
    for t, pid, fid, op, off, length in recs:
        if pid != ckpt or op == 'create':
            continue
        if op == 'fsync':
            last = -1
        elif fid == 1:
            assert off > last, 'checkpoint writes out of block order'
            last = off
    # time order, and each client at tps/clients: 1000 transactions in 4 s
    times = [r[0] for r in recs]
    assert times == sorted(times)
    first = {}
    for t, pid, *_ in recs:
        if pid in clients:
            first.setdefault(pid, t)
    assert sorted(first.values()) == [0, 1000000, 2000000, 3000000]


def test_index_and_full_page_images(tmp_path):
    # A cold pool larger than heap and index: each page's first touch is
    # its read, and (every leaf dirtied, checksums on) its full-page image.
    spec = ('pgbench,clients=3,scale=2,tps=1000,txns=3000,shared_buffers=64M,cold=1,'
            'index=1,idx_dirty=100,hint_fpw=1,fpw=1,wal_rec=200,end_ckpt=1')
    path, out = gen(tmp_path, spec)
    lay, tot = layout(out), totals(out)
    assert (lay['table_pages'], lay['index_pages']) == (3279, 1 + 544)
    recs = dump(path)
    reads = collections.Counter(r[2] for r in recs if r[3] == 'read')
    assert set(reads) == {1, 2}                 # heap (file 1), index (file 2)
    assert all(r[4] < 545 * PAGE for r in recs if r[2] == 2 and r[3] != 'create')
    n = sum(reads.values())
    assert n == tot['reads']
    assert tot['wal_bytes'] == 3000 * 200 + n * PAGE
    # the CHECKPOINT at the end writes every page touched, heap and index
    assert tot['ckpt_writes'] == n
    # without checksums the leaves log no images, and idx_dirty=0 writes none
    _, out2 = gen(tmp_path, spec.replace('hint_fpw=1', 'hint_fpw=0'), 'b.trace')
    assert totals(out2)['wal_bytes'] == 3000 * 200 + reads[1] * PAGE
    _, out3 = gen(tmp_path, spec.replace('idx_dirty=100', 'idx_dirty=0'), 'c.trace')
    assert totals(out3)['ckpt_writes'] == reads[1]


def test_wal_each(tmp_path):
    # every client writes its own WAL bytes once; the group's last syncs
    path, out = gen(tmp_path, 'pgbench,clients=3,scale=1,tps=300,txns=600,wal_each=1,'
                    'wal_group=3,wal_seg=1M,wal_files=4')
    tot = totals(out)
    recs = dump(path)
    wal = [r for r in recs if r[2] >= 4 and r[3] == 'write']     # heap 1, index 2, history 3
    assert sum(r[5] for r in wal) == tot['wal_bytes']
    assert len(wal) >= 600
    syncs = [r for r in recs if r[3] == 'fdatasync']
    assert len(syncs) == 200 + tot['wal_bytes'] // (1 << 20)
    # the ring: offsets within a segment, 4 segment files
    assert all(r[4] + r[5] <= 1 << 20 for r in wal)
    assert {r[2] for r in wal} == {4, 5, 6, 7}


def test_scan_whole_in_order(tmp_path):
    path, out = gen(tmp_path, 'pgbench,clients=2,scale=1,tps=100,duration=1,scan=1,'
                    'scan_io=64K,iterations=2')
    recs = dump(path)
    pages = layout(out)['table_pages']
    scanners = collections.defaultdict(list)
    for t, pid, fid, op, off, length in recs:
        if op == 'read' and pid > 5:
            scanners[pid].append((fid, off, length))
    assert len(scanners) == 2
    for reads in scanners.values():
        assert sum(r[2] for r in reads) == pages * PAGE
        assert reads == sorted(reads)
    # scan=2: before the first iteration only
    path, out = gen(tmp_path, 'pgbench,clients=2,scale=1,tps=100,duration=1,scan=2,'
                    'scan_io=64K,iterations=2', 'b.trace')
    assert {r[1] for r in dump(path) if r[3] == 'read' and r[1] > 5} == {6}


def test_deterministic(tmp_path):
    spec = 'pgbench,clients=8,scale=3,tps=2000,duration=2,shared_buffers=4M,checkpoint_s=1'
    a, _ = gen(tmp_path, spec, 'a.trace')
    b, _ = gen(tmp_path, spec, 'b.trace')
    c, _ = gen(tmp_path, spec + ',seed=2', 'c.trace')
    assert filecmp.cmp(a, b, shallow=False)
    assert not filecmp.cmp(a, c, shallow=False)


def gen_limited(spec, out, data_mb):
    """The generator under RLIMIT_DATA (heap and private mappings) of @data_mb."""
    def limit():
        resource.setrlimit(resource.RLIMIT_DATA, (data_mb << 20, data_mb << 20))
    return subprocess.run([FOLIOSIM, 'gen', spec, '-o', out], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, preexec_fn=limit)


def test_memory_bounded(tmp_path):
    # The generator's memory is its bitmaps (3 bits per heap and index
    # page): no memory per event, none per client.  Measured with a limit
    # on its data, so that the parent's memory does not count.
    out = str(tmp_path / 'm.trace')
    # 30 s of events at scale 100 (600k transactions, tens of MB of trace)
    # in 4 MiB of data, as 1 s does
    for secs in (1, 30):
        r = gen_limited('pgbench,clients=64,tps=20000,shared_buffers=128M,scale=100,'
                        'duration=%d' % secs, out, 4)
        assert r.returncode == 0, r.stderr
    assert os.path.getsize(out) > 30 * 20000 * 56 // 2
    # scale 8470: 15.7M heap and 2.3M index pages, 6.4 MiB of bitmaps; 1024
    # clients at 200k tps
    seed = ('pgbench,clients=1024,tps=200000,shared_buffers=96G,scale=8470,fillfactor=90,'
            'duration=1')
    r = gen_limited(seed, out, 12)
    assert r.returncode == 0, r.stderr
    # the limit is real: the bitmaps alone do not fit in 4 MiB
    r = gen_limited(seed, out, 4)
    assert r.returncode != 0 and 'out of memory' in r.stderr, r.stderr


def replay_limited(trace, opts, data_mb):
    """A replay under RLIMIT_DATA of @data_mb, as gen_limited()."""
    def limit():
        resource.setrlimit(resource.RLIMIT_DATA, (data_mb << 20, data_mb << 20))
    return subprocess.run([FOLIOSIM, trace, '-o', opts], capture_output=True, text=True,
                          preexec_fn=limit)


def test_replay_memory_bounded(tmp_path):
    # The replay streams the trace (sim/feed.c): its memory is the state
    # it keeps (files, writers, opens, folios, the events) and the records
    # read ahead of their writers, not the trace.  A pgbench trace of 10 s
    # and one of 40 s (4 times the records, 36 MB) replay in the same 8 MiB
    # of data; holding the records (250 bytes each with their indexes, as
    # the replay did before it streamed) needed 24 MiB for the short one
    # and 91 MiB for the long one.  Whole 2 MiB folios (folio_policy=fixed),
    # so that the folios' own state stays small beside what is measured.
    opts = 'sim_data=0,cache_size=1G,folio_policy=fixed'
    outs = []
    for secs in (10, 40):
        t = str(tmp_path / ('pg%d.trace' % secs))
        subprocess.run([FOLIOSIM, 'gen', 'pgbench,clients=16,scale=10,tps=5000,'
                        'shared_buffers=32M,duration=%d' % secs, '-o', t],
                       stdout=subprocess.DEVNULL, check=True)
        r = replay_limited(t, opts, 8)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert os.path.getsize(t) > 4 * (8 << 20)
    for secs, out in zip((10, 40), outs):
        # every transaction's records replayed: 16 clients x 5000 tps
        ops = int(out.split('# summary: ')[1].split()[0])
        assert ops > secs * 5000 * 3, out[-300:]
    # the limit is real: the replay's two 1 MiB buffers (the feed's read
    # buffer, the data of its writes and reads) and the rest do not fit in 2 MiB
    r = replay_limited(t, opts, 2)
    assert r.returncode != 0 and 'memory' in r.stderr, r.stderr


def sim_rate(trace, opts):
    out = subprocess.run([FOLIOSIM, trace, '-o', opts, '--compare', '--csv', 'dev_qd=32'],
                         capture_output=True, text=True, check=True).stdout
    row = next(csv.DictReader(io.StringIO(out)))
    return float(row['ops']) / float(row['virtual_s'])


DEV = 'dev_iops=1000,dev_lat_us=100,dev_flush_us=0,dev_stripe=64K,dev_qd=32'


def test_raid0_random_reads(tmp_path):
    # 256 readers, no readahead: one 8 KiB read each in flight, one
    # device I/O each with folio_policy=fixed (the default sizing, kernel,
    # reads an 8 KiB miss that readahead does not cover as two 4 KiB
    # folios, one I/O each)
    path = str(tmp_path / 'rr.trace')
    subprocess.run([FOLIOSIM, 'gen', 'writers=256,file_size=4G,io=8K,ops=40000,op=read',
                    '-o', path], check=True)
    o = 'sim_data=0,readahead_kb=0,folio_policy=fixed,'
    one = sim_rate(path, o + 'dev_raid=1,' + DEV)
    assert abs(one - 1000) < 50, one
    for n in (4, 12):
        rate = sim_rate(path, o + 'dev_raid=%d,' % n + DEV)
        assert abs(rate / (n * one) - 1) < 0.10, (n, rate, one)


def test_raid0_random_writes(tmp_path):
    # 64 writers on 64 files, written back by 8 flushers
    path = str(tmp_path / 'rw.trace')
    subprocess.run([FOLIOSIM, 'gen', 'writers=64,files=64,file_size=256M,io=8K,ops=40000',
                    '-o', path], check=True)
    o = 'sim_data=0,cache_size=4G,dirty_bytes=64M,dirty_background_bytes=32M,flushers=8,'
    one = sim_rate(path, o + 'dev_raid=1,' + DEV)
    assert abs(one - 1000) < 50, one
    for n in (4, 12):
        rate = sim_rate(path, o + 'dev_raid=%d,' % n + DEV)
        assert abs(rate / (n * one) - 1) < 0.10, (n, rate, one)


@pytest.mark.parametrize('opts,msg', [
    ('dev_raid=0', 'dev_raid'),
    ('dev_raid=257', 'dev_raid'),
    ('dev_stripe=1K', 'dev_stripe'),
    ('sim_data=2', 'sim_data'),
    ('cache_size=1024T', 'cache_size'),
])
def test_bad_device_options(opts, msg):
    r = subprocess.run([FOLIOSIM, os.path.join(REPO, 'tests', 'sim-golden', 'pgbench.trace'),
                        '-o', opts], capture_output=True, text=True)
    assert r.returncode == 2
    assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_cache_beyond_ram_without_data(tmp_path):
    path, _ = gen(tmp_path, 'pgbench,clients=2,scale=1,tps=100,duration=1')
    r = subprocess.run([FOLIOSIM, path, '-o', 'sim_data=0,cache_size=1024T'],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert 'cache_size 1125899906842624' in r.stdout


@pytest.mark.parametrize('spec,msg', [
    ('pgbench,clients=0', 'clients'),
    ('pgbench,fillfactor=5', 'fillfactor'),
    ('pgbench,wal_seg=12K', 'multiples of 8K'),
    ('pgbench,nosuch=1', 'unknown pgbench item'),
    ('pgbench,deadline=1,txns=100', 'not with txns='),
    ('pgbench,autovacuum=1,av_hot=1.5', 'av_hot'),
    ('pgbench,autovacuum=1,av_ring=12K', 'multiples of 8K'),
])
def test_bad_spec(tmp_path, spec, msg):
    out = tmp_path / 'x.trace'
    r = subprocess.run([FOLIOSIM, 'gen', spec, '-o', str(out)], capture_output=True, text=True)
    assert r.returncode != 0
    assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists()


# autovacuum=1: scale 2 (3279 heap pages, an index of 545), trigger 50 +
# 0.01 x 200,000 = 2050 dead tuples, a check every 5 s, 20 s of updates at
# 1000 tps; files: heap 1, index 2, history 3, WAL 4-11, the visibility
# map 12, the free space map 13; pids: clients 1-4, checkpointer 5, the
# worker 7 (6 would be the scanner).
AUTOVAC = ('pgbench,clients=4,scale=2,tps=1000,txns=20000,shared_buffers=8M,checkpoint_s=10,'
           'autovacuum=1,av_naptime=5,av_scale=0.01')


def vacuums(stdout):
    out = []
    for line in stdout.splitlines():
        w = line.split()
        if len(w) > 2 and w[0] == 'autovacuum' and w[1] not in ('pid', 'total'):
            d = {w[i]: float(w[i + 1]) for i in range(2, len(w) - 1, 2)}
            out.append(d)
    return out


def test_autovacuum(tmp_path):
    path, out = gen(tmp_path, AUTOVAC)
    recs = dump(path)
    vs = vacuums(out)
    assert 'autovacuum pid 7 trigger 2050 vm_pages 1 fsm_pages 3' in out
    assert len(vs) >= 2
    times = [r[0] for r in recs]
    assert times == sorted(times)
    worker = [r for r in recs if r[1] == 7 and r[3] != 'create']
    assert worker
    for v in vs:
        assert v['start_s'] % 5 == 0 and v['end_s'] > v['start_s']
        # the whole heap is read or skipped, the index read once when not bypassed
        assert v['heap_scanned'] + v['heap_skipped'] == 3279
        assert v['index_pages'] == (0 if v['bypassed'] else 545)
        mine = [r for r in worker if v['start_s'] * 1e9 <= r[0] <= (v['end_s'] + 0.001) * 1e9]
        reads = [(fid, off) for t, pid, fid, op, off, ln in mine if op == 'read']
        assert len(reads) == v['heap_reads'] + v['index_reads'] == v['misses']
        heap = [off for fid, off in reads if fid == 1]
        index = [off for fid, off in reads if fid == 2]
        # the heap scan in block order, then the index in block order, then
        # the pages with dead items again in block order
        scan = heap[:len(heap) - int(v['heap_vacuumed'])] if v['heap_vacuumed'] else heap
        assert scan == sorted(scan) and index == sorted(index)
        if index:
            first_index = reads.index((2, index[0]))
            assert all(fid == 1 for fid, _ in reads[:first_index])
        # a write is of a page the worker read (its ring), never of the maps
        read_set = set(reads)
        for t, pid, fid, op, off, ln in mine:
            if op == 'write' and fid in (1, 2):
                assert (fid, off) in read_set
    for t, pid, fid, op, off, ln in worker:
        if op in ('read', 'write') and fid in (1, 2):
            assert ln == PAGE and off % PAGE == 0
        assert fid not in (12, 13)
    # the maps: written by the checkpointer, then fsynced
    maps = [r for r in recs if r[2] in (12, 13) and r[3] != 'create']
    assert maps and all(r[1] == 5 for r in maps)
    assert {r[3] for r in maps} == {'write', 'fsync'}
    # without autovacuum=1 nothing of the worker's
    path0, out0 = gen(tmp_path, AUTOVAC.replace('autovacuum=1', 'autovacuum=0'), 'n.trace')
    assert not vacuums(out0) and all(r[1] != 7 for r in dump(path0))


# Time-bounded iterations: 4 clients at 1000 tps, 3 iterations of 2 s
# back to back (gap_s=0), after a scan that makes 2 MiB folios.
BOUNDED = ('pgbench,clients=4,scale=2,tps=1000,duration=2,iterations=3,shared_buffers=8M,'
           'gap_s=0,scan=2')
# Throttled: per-folio charging of 2 MiB folios (every folio whole:
# folio_policy=fixed) against 2 MB of dirty budget.
THROTTLED = ('cache_size=256M,folio_size=2M,folio_policy=fixed,dirty_account=folio,'
             'dirty_bytes=2M,dirty_background_bytes=1M')
# A device that takes no time: nothing waits, nothing is throttled.
IDEAL = 'cache_size=256M,dev_lat_us=0,dev_flush_us=0,dev_bw=1000G'


def replay(trace, opts):
    r = subprocess.run([FOLIOSIM, trace, '-o', opts], capture_output=True, text=True,
                       check=True)
    its, ops, end = [], None, None
    for line in r.stdout.splitlines():
        w = line.split()
        if w[:2] == ['#', 'summary:']:
            ops, end = int(w[2]), float(w[5])
        elif w and w[0] == 'iteration':
            its.append(dict(start=float(w[2]), length=float(w[3]), writers=int(w[4]),
                            done=int(w[5]), late=int(w[6]), skipped=int(w[7]), dry=int(w[8]),
                            tps=float(w[9]), overrun_ms=float(w[10])))
    ahead = int(r.stderr.split('at most ')[1].split()[0])
    return its, ops, end, ahead


def schedule(stdout):
    # the generator's iteration lines: recorded start and deadline (s)
    return [(float(w[5]), float(w[9])) for w in (line.split() for line in stdout.splitlines())
            if w and w[0] == 'iteration']


def due_steps(recs):
    # per iteration start (ns): the steps (a client's records with one time)
    # due before the deadline, from the trace itself
    marks = {pid: t for t, pid, _f, op, _o, _l in recs if op == 'deadline'}
    times = collections.defaultdict(set)
    for t, pid, _f, op, _o, _l in recs:
        if pid in marks and op != 'deadline' and t < marks[pid] + 2 * 10**9:
            times[pid].add(t)
    due = collections.Counter()
    for pid, ts in times.items():
        due[marks[pid]] += len(ts)
    return [due[k] for k in sorted(due)]


def test_deadline_records(tmp_path):
    path, out = gen(tmp_path, BOUNDED + ',deadline=1')
    recs = dump(path)
    sched = schedule(out)
    assert len(sched) == 3
    marks = [(t, pid, length) for t, pid, _f, op, _o, length in recs if op == 'deadline']
    assert len(marks) == 12
    for k, (start, deadline) in enumerate(sched):
        assert deadline == start + 2
        assert sorted(pid for t, pid, _l in marks if t == round(start * 1e9)) == \
            [4 * k + 1 + c for c in range(4)]
    assert {length for _t, _p, length in marks} == {2 * 10**9}
    # every client has a transaction due at or after its deadline: it cannot run dry
    for t, pid, _l in marks:
        last = max(r[0] for r in recs if r[1] == pid)
        assert last >= t + 2 * 10**9
    # a client's records of an iteration: its deadline record first
    for t, pid, _l in marks:
        assert min(r[0] for r in recs if r[1] == pid and r[3] != 'deadline') >= t


def test_deadline_throttled(tmp_path):
    path, out = gen(tmp_path, BOUNDED + ',deadline=1')
    upath, _ = gen(tmp_path, BOUNDED, 'unbounded.trace')
    recs = dump(path)
    due = due_steps(recs)
    assert due == [2000, 2000, 2000]
    its, ops, end, ahead = replay(path, THROTTLED)
    assert len(its) == 3
    rec_start = [s for s, _d in schedule(out)]
    for k, it in enumerate(its):
        assert it['writers'] == 4 and it['dry'] == 0
        assert it['done'] + it['late'] + it['skipped'] == due[k]
        assert it['skipped'] > 0          # the throttle held the clients back
        assert it['late'] <= it['writers']  # at most one transaction in flight each
        assert it['tps'] == round(it['done'] / it['length'], 1)
        # it starts at its recorded time, or when the one before it has ended:
        # at its deadline, or when the last transaction in flight was done
        want = rec_start[k]
        if k:
            prev = its[k - 1]
            want = max(want, prev['start'] + prev['length'] + prev['overrun_ms'] / 1000)
        assert abs(it['start'] - want) < 0.0015
    # the clients stopped at the deadlines: without them, iterations run over
    uits, _uops, uend, _ = replay(upath, THROTTLED)
    assert not uits
    last = its[-1]
    assert end < uend
    assert end < last['start'] + last['length'] + last['overrun_ms'] / 1000 + 1
    # skipped records are dropped, not kept: fewer were ever read ahead than were skipped
    skipped_recs = len(recs) - ops
    assert skipped_recs > 1000 and ahead < skipped_recs


def test_feed_window(tmp_path):
    # A writer lagging behind the forward read holds its records back
    # there; past the window, whole chunks of the queues go to a spill
    # file and come back when their writer reaches them (sim/feed.c).
    # Where a record waited changes nothing in the replay.
    path, _ = gen(tmp_path, BOUNDED + ',deadline=1')
    runs = {}
    for window in (0, 1 << 20, 256, 16):
        r = subprocess.run([FOLIOSIM, path, '-o', THROTTLED + ',sim_feed_window=%d' % window],
                           capture_output=True, text=True, check=True)
        m = re.search(r'at most (\d+) read ahead( \((\d+) in memory\), (\d+) spilled)?',
                      r.stderr)
        assert m, r.stderr
        runs[window] = (r.stdout, int(m.group(1)), int(m.group(3) or 0), int(m.group(4) or 0))
    out0, ahead0, _, spilled0 = runs[0]
    writers = sum(1 for line in out0.splitlines() if line.startswith('writer '))
    assert 4 < writers <= 16
    assert spilled0 == 0 and ahead0 > 1000         # the throttle made writers lag
    assert runs[1 << 20][1:] == (ahead0, 0, 0)
    for window in (256, 16):
        out, ahead, in_mem, spilled = runs[window]
        assert out == out0, window
        # what was read ahead is the same; what stayed in memory is at most
        # the window and a chunk or two (4 KiB, ~290 records) per writer
        assert ahead == ahead0 and spilled > 0, runs[window][1:]
        assert in_mem < ahead0 and in_mem <= window + writers * 2 * 4096 // 14, runs[window][1:]


def test_deadline_unthrottled(tmp_path):
    path, out = gen(tmp_path, BOUNDED + ',deadline=1')
    its, _ops, _end, _ = replay(path, IDEAL)
    assert [(it['done'], it['late'], it['skipped'], it['dry'], it['tps']) for it in its] == \
        [(2000, 0, 0, 0, 1000.0)] * 3
    assert [it['start'] for it in its] == [s for s, _d in schedule(out)]


def test_seed_driver_small(tmp_path):
    r = subprocess.run([sys.executable, SEED, '--sim', FOLIOSIM, '--iterations', '2',
                        '--duration', '1', '--warmup', '2', '--gen',
                        'scale=20,clients=16,shared_buffers=32M,tps=4000', str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith('| 6.1')]
    assert [x.split('|')[1].strip() for x in rows] == ['6.17-folio', '6.17-page',
                                                       '6.16-folio', '6.16-page']
    with open(tmp_path / 'iterations.csv') as f:
        its = list(csv.DictReader(f))
    assert len(its) == 8 and all(float(x['tps']) > 0 for x in its)
    assert not (tmp_path / 'seed.trace').exists()


def test_seed_driver_stream_same(tmp_path):
    """--stream (the trace made in each replay, no file) gives the table
    and per-iteration rows the trace file gives, the 2 MiB share at each
    iteration's end and the 5 s samples above the threshold included."""
    out = {}
    for mode in ('file', 'stream'):
        d = tmp_path / mode
        r = subprocess.run([sys.executable, SEED, '--sim', FOLIOSIM, '--iterations', '3',
                            '--duration', '6', '--warmup', '2', '--configs',
                            '6.17-folio,6.17-page', '--gen',
                            'scale=20,clients=16,shared_buffers=32M,tps=4000,scan=2,scan_s=2,'
                            'autovacuum=1', '-o', 'cache_size=256M', str(d)]
                           + (['--stream'] if mode == 'stream' else []),
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        with open(d / 'iterations.csv') as f:
            its = list(csv.DictReader(f))
        # Columns 1-14 and 18-: all but replay s, replay CPU s and RSS.
        rows = [x.split('|')[1:15] + x.split('|')[18:] for x in r.stdout.splitlines()
                if x.startswith('| 6.1')]
        out[mode] = (its, rows, (d / 'gen.out').read_text().splitlines()[1:])
        assert not (d / 'seed.trace').exists()
        assert (d / '6.17-folio.stats.jsonl.gz').exists()
    assert out['file'] == out['stream']
    its = out['stream'][0]
    assert len(its) == 6
    # The scan leaves the cache in 2 MiB folios: a share, not zeros.
    assert all(0 < float(x['share_2m']) <= 1 for x in its), its
    assert all(0 <= float(x['above_thresh_5s']) <= 1 for x in its), its


def test_seed_driver_unbounded_shares(tmp_path):
    """--unbounded (no deadline records): each iteration's window runs to
    the next one's start, and every row still has its 2 MiB share."""
    r = subprocess.run([sys.executable, SEED, '--sim', FOLIOSIM, '--stream', '--unbounded',
                        '--iterations', '2', '--duration', '6', '--warmup', '2', '--configs',
                        '6.17-folio', '--gen', 'scale=20,clients=16,shared_buffers=32M,tps=4000,'
                        'scan=2,scan_s=2', '-o', 'cache_size=256M', str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    with open(tmp_path / 'iterations.csv') as f:
        its = list(csv.DictReader(f))
    assert len(its) == 2 and all(0 < float(x['share_2m']) <= 1 for x in its), its
