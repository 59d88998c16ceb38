"""USDT probes (doc/tracing.md): the binary has them, contrib/bpftrace's
scripts translate for foliofs, and bpftrace attached to a mount counts as
many balance_dirty_pages rounds with a pause as the stats' throttle_events.

The bpftrace test runs as root where bpftrace can attach to a USDT probe
(Debian's bpftrace warns about RLIMIT_MEMLOCK and works); elsewhere it is
skipped with the reason.  A build without sys/sdt.h (-Dprobes=disabled or
no systemtap-sdt-dev) has no probes: those tests skip and say so.
"""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

import util
from util import Mount, poll, set_fault, stats

BT_DIR = os.path.join(util.REPO, 'contrib', 'bpftrace')
TRANSLATE = os.path.join(BT_DIR, 'foliofs-bpftrace')
SCRIPTS = ['pauses.bt', 'dirty-limit.bt', 'folio-orders.bt']
PROBES = ['balance_dirty_pages', 'bdi_dirty_ratelimit', 'global_dirty_state',
          'writeback_dirty_folio', 'wbc_writepage', 'writeback_written',
          'folio_wait_writeback', 'mm_filemap_add_to_page_cache',
          'mm_filemap_delete_from_page_cache',
          'page_cache_sync_ra', 'page_cache_async_ra']
MiB = 1 << 20


def probe_names(binary):
    """The foliofs provider's probe names in BINARY's stapsdt notes."""
    out = subprocess.run(['readelf', '-n', binary], capture_output=True, text=True,
                         check=True).stdout
    names, provider = set(), None
    for line in out.splitlines():
        line = line.strip()
        if line.startswith('Provider:'):
            provider = line.split()[1]
        elif line.startswith('Name:') and provider == 'foliofs':
            names.add(line.split()[1])
    return names


def require_probes():
    if not shutil.which('readelf'):
        pytest.skip('readelf (binutils) is not installed')
    if not probe_names(util.FOLIOFS):
        pytest.skip('%s was built without USDT probes (no sys/sdt.h: Debian '
                    'systemtap-sdt-dev, or -Dprobes=disabled)' % util.FOLIOFS)


def translate(script, *extra, cwd=None):
    return subprocess.run([sys.executable, TRANSLATE, '--foliofs', util.FOLIOFS, '--print',
                           script] + list(extra), capture_output=True, text=True, cwd=cwd)


def test_binary_has_every_probe():
    require_probes()
    assert probe_names(util.FOLIOFS) == set(PROBES)


@pytest.mark.parametrize('script', SCRIPTS)
def test_scripts_translate(script):
    """Each script of contrib/bpftrace names only kernel tracepoints and
    fields foliofs has: translated, it reads only foliofs's probes."""
    r = translate(os.path.join(BT_DIR, script))
    assert r.returncode == 0, r.stderr
    assert 'tracepoint:' not in r.stdout and 'args->' not in r.stdout
    assert 'usdt:%s:foliofs:' % os.path.realpath(util.FOLIOFS) in r.stdout
    assert r.stdout.splitlines()[1] == '#include "foliofs_tp.h"'


def test_scripts_found_by_name(tmp_path):
    """A script of foliofs is found by its bare name (as doc/tracing.md
    shows: foliofs-bpftrace pauses.bt) from any directory, with or without
    .bt; a file of that name in the current directory comes first; an
    unknown name is refused naming where it was looked for; --list shows
    every script with its description."""
    for name in SCRIPTS:
        want = translate(os.path.join(BT_DIR, name))
        assert want.returncode == 0, want.stderr
        for given in (name, name[:-len('.bt')]):
            r = translate(given, cwd=str(tmp_path))
            assert (r.returncode, r.stdout) == (0, want.stdout), (given, r.stderr)
    (tmp_path / 'pauses.bt').write_text('tracepoint:writeback:global_dirty_state'
                                        ' { @ = count(); }\n')
    r = translate('pauses.bt', cwd=str(tmp_path))
    assert r.returncode == 0 and 'global_dirty_state' in r.stdout, r.stderr
    assert 'balance_dirty_pages' not in r.stdout
    r = translate('no-such.bt', cwd=str(tmp_path))
    assert r.returncode == 2, r
    assert r.stderr == ('foliofs-bpftrace: no-such.bt: no such file, nor a script of foliofs'
                        ' in %s (--list shows them)\n' % BT_DIR), r.stderr
    r = subprocess.run([sys.executable, TRANSLATE, '--list'], capture_output=True, text=True,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == BT_DIR + ':'
    assert [l.split()[0] for l in lines[1:]] == sorted(SCRIPTS)
    assert all(len(l.split()) > 3 for l in lines[1:]), lines     # with a description


@pytest.mark.parametrize('body, message', [
    ('tracepoint:writeback:balance_dirty_pages { @[args->bdi] = count(); }',
     "foliofs's balance_dirty_pages has no field bdi"),
    ('tracepoint:writeback:writeback_start { @ = count(); }',
     'tracepoint writeback:writeback_start: foliofs has no such probe'),
    ('tracepoint:writeback:balance_dirty_pages, tracepoint:writeback:global_dirty_state'
     ' { @ = args->dirty; }', 'one block reads args-> of'),
])
def test_translate_refuses_what_foliofs_lacks(tmp_path, body, message):
    p = tmp_path / 's.bt'
    p.write_text(body + '\n')
    r = translate(str(p))
    assert r.returncode == 2 and message in r.stderr, (r.returncode, r.stderr)


def test_translate_takes_older_field_names(tmp_path):
    """bdi_setpoint and bdi_dirty, the fields' names before cgroup
    writeback, are wb_setpoint and wb_dirty."""
    p = tmp_path / 's.bt'
    p.write_text('tracepoint:writeback:balance_dirty_pages'
                 ' { @d = max(args->bdi_dirty); @s = max(args->bdi_setpoint); }\n')
    r = translate(str(p))
    assert r.returncode == 0, r.stderr
    assert '->wb_dirty)' in r.stdout and '->wb_setpoint)' in r.stdout, r.stdout


def bpftrace_attach_reason():
    """None if bpftrace can attach a USDT probe of the foliofs binary here,
    else why not."""
    if os.geteuid() != 0:
        return 'not root: bpftrace needs CAP_BPF and CAP_PERFMON'
    if not shutil.which('bpftrace'):
        return 'bpftrace is not installed (Debian bpftrace)'
    r = subprocess.run(['bpftrace', '-e', 'usdt:%s:foliofs:balance_dirty_pages { @ = count(); }'
                        ' BEGIN { exit(); }' % os.path.realpath(util.FOLIOFS)],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        err = [l for l in r.stderr.splitlines() if 'RLIMIT_MEMLOCK' not in l]
        return 'bpftrace cannot attach here: %s' % ' '.join(err)[-300:]
    return None


COUNT_SCRIPT = '''
BEGIN { printf("ready\\n"); }
tracepoint:writeback:balance_dirty_pages /args->pause > 0/ { @paused = count(); }
tracepoint:writeback:balance_dirty_pages { @rounds = count(); }
tracepoint:writeback:global_dirty_state { @global = count(); }
tracepoint:writeback:writeback_dirty_folio { @dirtied = count(); }
'''


@pytest.mark.timeout(240)
def test_bpftrace_counts_throttle_events(dirs, tmp_path):
    """A writer held at a small hard limit (nothing can be written back:
    fault=write:EIO) is paused round after round; once the fault is lifted
    and everything written back, it finishes.  bpftrace, through
    foliofs-bpftrace and a script written for the kernel's tracepoint,
    counts as many balance_dirty_pages firings with pause > 0 as the
    stats' throttle_events."""
    require_probes()
    reason = bpftrace_attach_reason()
    if reason:
        pytest.skip(reason)
    _, b, m = dirs
    script = tmp_path / 'count.bt'
    script.write_text(COUNT_SCRIPT)
    bt = subprocess.Popen([sys.executable, TRANSLATE, '--foliofs', util.FOLIOFS, str(script),
                           '--', '-B', 'line'], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(bt.stdout), daemon=True)
    reader.start()
    try:
        if not poll(lambda: any(l.strip() == 'ready' for l in lines) or bt.poll() is not None,
                    60):
            pytest.fail('bpftrace did not start: %s' % lines)
        assert bt.poll() is None, bt.stderr.read()
        opts = ['flushers=1', 'fault=write:EIO', 'dirty_bytes=8M', 'dirty_expire_ms=600000',
                'writeback_interval_ms=600000', 'cache_size=256M']
        with Mount(b, m, options=opts, expect_errors=True) as mnt:
            writer = subprocess.Popen(['dd', 'if=/dev/zero', 'of=' + os.path.join(m, 'f'),
                                       'bs=256k', 'count=64'], stderr=subprocess.DEVNULL)
            try:
                assert poll(lambda: stats(m)['throttled_writers'] > 0, 60), stats(m)
                time.sleep(1)        # rounds at the hard limit, max_pause apart
                set_fault(m, 'off')
                util.ctl_write(m, 'sync', value='1')
                assert writer.wait(60) == 0
            finally:
                if writer.poll() is None:
                    writer.kill()
                    writer.wait()
            assert poll(lambda: stats(m)['throttled_writers'] == 0, 30)
            st = stats(mnt.mnt)
        bt.send_signal(signal.SIGINT)
        bt.wait(60)
        reader.join(10)
    finally:
        if bt.poll() is None:
            bt.kill()
            bt.wait()
    got = {}
    for line in lines:
        if line.startswith('@') and ':' in line:
            k, v = line.split(':', 1)
            got[k[1:]] = int(v)
    print('\nbpftrace: %s; stats: throttle_events %d' % (got, st['throttle_events']))
    assert st['throttle_events'] > 0, st
    assert got.get('paused') == st['throttle_events'], (got, st)
    assert got['rounds'] >= got['paused']
    assert got['global'] >= got['rounds']
    assert got['dirtied'] > 0
