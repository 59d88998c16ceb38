"""Policy parameters and policies loaded without a rebuild (doc/policies.md).

- A policy built out of the tree with one `cc -shared` line against the
  build's include/foliofs/policy.h is loaded at mount (-o load=) and into a
  running mount (foliofsctl load), listed (.foliofs/policies), selected,
  switched to and from live, and what it charges is what nr_dirty shows.
- A parameter change reprices every folio live, for the built-in pinned
  policy and a loaded one, and is in the stats and the stats log.
- Each refusal (another ABI version, no descriptor symbol, group- or
  world-writable, owned by someone else than the mounting user or root,
  a name taken) is one line naming the library and the reason, at mount
  (exit 2, nothing mounted) and live (foliofsctl exit 2, nothing loaded,
  the policy in force and the charge unchanged).
- foliofs-sim takes the same load= and account.PARAM= options.
"""

import contextlib
import os
import re
import shutil
import subprocess
import tempfile

import pytest

import util
from util import Mount, foliofsctl, poll, stats

BUILD = os.path.dirname(os.path.realpath(util.FOLIOFS))
SIM = os.path.join(BUILD, 'sim', 'foliofs-sim')
INCLUDE = os.path.join(util.REPO, 'include')
CC = shutil.which('cc')

pytestmark = pytest.mark.skipif(CC is None, reason='no C compiler (cc)')

# "quarter": charges PCT% of each page holding a dirty block (default 25).
POLICY = r'''
#include <foliofs/policy.h>

static const struct bs_param params[] = {
	{ .name = "pct", .help = "percent of each dirty page charged", .unit = "%%",
	  .def = 25, .min = 1, .max = 100 },
};

static uint64_t price(const struct bs_held_state *st)
{
	return (uint64_t)st->held_pages * BS_PAGE_SIZE * (uint64_t)st->params[0] / 100;
}

static const struct bs_account_policy %(name)s = {
	.name = "%(name)s", .help = "charge pct%% of each dirty page", .price = price,
	.params = params, .nr_params = 1,
};

static const struct bs_account_policy *const policies[] = { &%(name)s, NULL };
%(module)s
'''
MODULE = 'FOLIOFS_POLICY_MODULE(.account = policies);'
OTHER_ABI = ('const struct foliofs_policy_module foliofs_policy_module = {\n'
             '\t.abi = FOLIOFS_POLICY_ABI + 1, .struct_size = sizeof(struct foliofs_policy_module),\n'
             '\t.account = policies };')

MIB = 1 << 20
FOLIO = 2 * MIB
# Nothing written back behind the test's back: no flushers, a cache and
# limits far above what the tests dirty.  Every folio 2 MiB, whatever the
# write (folio_policy=fixed): the prices below are of whole 2 MiB folios.
OPTS = ['flushers=0', 'folio_size=2M', 'folio_policy=fixed', 'cache_size=256M',
        'dirty_bytes=128M', 'dirty_background_bytes=64M']


def build(d, name, module=MODULE, lib=None):
    """Compile the policy NAME into D/LIB (default NAME.so), as a user would."""
    src = os.path.join(d, name + '.c')
    out = os.path.join(d, lib or name + '.so')
    with open(src, 'w') as f:
        f.write(POLICY % {'name': name, 'module': module})
    subprocess.run([CC, '-shared', '-fPIC', '-I', INCLUDE, '-o', out, src],
                   check=True, timeout=120)
    os.chmod(out, 0o755)
    return out


@pytest.fixture
def libdir():
    """A directory for the libraries, traversable by the test user."""
    d = tempfile.mkdtemp(prefix='foliofs-pol-')
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def set_(mnt, *assignments):
    r = foliofsctl('set', mnt, *assignments)
    assert r.returncode == 0, r.stderr


# With flushers=0 the daemon still writes a file back when the kernel
# forgets its inode, which it may do at any time under memory pressure:
# the tests keep each file they dirty open until they are done.
HELD = []


@contextlib.contextmanager
def holding():
    """Close the files write_pages() left open on the way out (before the unmount)."""
    try:
        yield
    finally:
        while HELD:
            os.close(HELD.pop())


def write_pages(mnt, name='f', nr=1024):
    """NR dirty 4 KiB pages, one file, in 2 MiB folios; the file stays open."""
    fd = os.open(os.path.join(mnt, name), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    HELD.append(fd)
    assert os.write(fd, b'x' * (nr * 4096)) == nr * 4096


def write_pages_as(user, mnt, nr=1024):
    """write_pages by USER, in a child that keeps the file open until its stdin closes."""
    child = subprocess.Popen(
        ['/usr/bin/python3', '-c', 'import os, sys\n'
         'fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)\n'
         'os.write(fd, b"x" * int(sys.argv[2]))\nprint("written", flush=True)\nsys.stdin.read()',
         os.path.join(mnt, 'f'), str(nr * 4096)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        preexec_fn=util._preexec(user))
    assert child.stdout.readline() == 'written\n'
    return child


def nr_dirty(mnt):
    return stats(mnt)['nr_dirty']


def policies(mnt):
    with open(os.path.join(mnt, '.foliofs', 'policies')) as f:
        return f.read()


def test_load_at_mount_switch_and_reprice(dirs, libdir):
    _, b, m = dirs
    lib = build(libdir, 'quarter')
    with Mount(b, m, options=OPTS + ['load=' + lib, 'dirty_account=quarter',
                                     'account.pct=50']), holding():
        assert re.search(r'^account quarter %s pct=25\[1,100\]$' % re.escape(lib),
                         policies(m), re.M)
        write_pages(m)
        assert nr_dirty(m) == 512                  # 50% of 1024 pages
        assert foliofsctl('get', m, 'account.pct').stdout == 'account.pct 50\n'
        set_(m, 'account.pct=100')                 # repriced live
        assert nr_dirty(m) == 1024
        set_(m, 'dirty_account=folio')             # 2 folios of 2 MiB
        assert nr_dirty(m) == 1024
        write_pages(m, 'g', 1)                     # one page: a whole folio
        assert nr_dirty(m) == 1024 + 512
        set_(m, 'dirty_account=quarter')           # back, at its default 25%
        assert foliofsctl('get', m, 'account.pct').stdout == 'account.pct 25\n'
        # 1025 pages at 25%: 1 MiB and 1 KiB charged, a page rounded up
        assert nr_dirty(m) == 256 + 1
        st = stats(m)
        assert st['account.pct'] == 25
        assert 'account.share' not in st


def test_load_live_by_owner(dirs, libdir, tuser):
    """An unprivileged mounting user loads a library of theirs into their
    running mount, and then one owned by someone else is refused."""
    root, b, m = dirs
    name, uid, gid = tuser
    for d in (b, m, libdir):
        os.chown(d, uid, gid)
    mine = build(libdir, 'mine')
    os.chown(mine, uid, gid)
    theirs = build(libdir, 'theirs')
    os.chown(theirs, 65534, 65534)                 # nobody
    def nr_dirty(mnt):
        return util.run_as(name, stats, mnt)['nr_dirty']

    def policies(mnt):
        return util.run_as(name, util.read_file, os.path.join(mnt, '.foliofs', 'policies'),
                           'r')

    with Mount(b, m, user=name, options=OPTS, expect_errors=True):
        writer = write_pages_as(name, m)
        assert nr_dirty(m) == 1024
        before = policies(m)
        r = foliofsctl('load', m, mine, user=name)
        assert r.returncode == 0, r.stderr
        after = policies(m).splitlines()
        assert sorted(after) == sorted(before.splitlines() + ['account mine %s pct=25[1,100]' % mine])
        r = foliofsctl('set', m, 'dirty_account=mine', user=name)
        assert r.returncode == 0, r.stderr
        assert nr_dirty(m) == 256
        r = foliofsctl('load', m, theirs, user=name)
        assert r.returncode == 2
        assert r.stderr == ('foliofsctl: load=%s: owned by uid 65534, not by the mounting '
                            'user (%d) or root\n' % (theirs, uid))
        assert 'theirs' not in policies(m)
        assert foliofsctl('get', m, 'dirty_account', user=name).stdout == 'dirty_account mine\n'
        assert nr_dirty(m) == 256
        # Root-owned libraries are the mounting user's to load too.
        rooted = build(libdir, 'rooted')
        r = foliofsctl('load', m, rooted, user=name)
        assert r.returncode == 0, r.stderr
        assert policies(m).count('account rooted ') == 1
        writer.stdin.close()
        assert writer.wait(timeout=60) == 0


REFUSALS = {
    'abi': (lambda d: build(d, 'abi', module=OTHER_ABI),
            'built for policy ABI 2, this foliofs has 1'),
    'nosym': (lambda d: build(d, 'nosym', module=''),
              'no symbol foliofs_policy_module'),
    'world_writable': (lambda d: os.chmod(build(d, 'ww'), 0o757) or os.path.join(d, 'ww.so'),
                       'writable by others (mode 0757)'),
    'group_writable': (lambda d: os.chmod(build(d, 'gw'), 0o775) or os.path.join(d, 'gw.so'),
                       'writable by its group (mode 0775)'),
    'owner': (lambda d: os.chown(build(d, 'other'), 65534, 65534) or os.path.join(d, 'other.so'),
              'owned by uid 65534, not by the mounting user (0) or root'),
    'name_taken': (lambda d: build(d, 'pinned'), 'accounting policy pinned exists already'),
    'not_elf': (lambda d: shutil.copy('/etc/hostname', os.path.join(d, 'x.so')) and
                os.path.join(d, 'x.so'), 'cannot load: '),
}


@pytest.mark.parametrize('case', sorted(REFUSALS))
def test_refused_at_mount(dirs, libdir, case):
    _, b, m = dirs
    make, why = REFUSALS[case]
    lib = make(libdir)
    r = subprocess.run([util.FOLIOFS, '-f', '-o', 'load=' + lib, b, m], capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith('foliofs: load=%s: %s' % (lib, why)), lines[0]
    assert not util.is_fuse_mounted(m)


@pytest.mark.parametrize('case', sorted(REFUSALS))
def test_refused_live_changes_nothing(dirs, libdir, case):
    _, b, m = dirs
    make, why = REFUSALS[case]
    lib = make(libdir)
    with Mount(b, m, options=OPTS + ['dirty_account=pinned', 'account.share=250'],
               expect_errors=True), holding():
        write_pages(m, nr=1)                       # one page of one 2 MiB folio
        assert nr_dirty(m) == 128                  # a quarter of 512 pages
        before = policies(m)
        r = foliofsctl('load', m, lib)
        assert r.returncode == 2
        assert r.stderr.startswith('foliofsctl: load=%s: %s' % (lib, why)), r.stderr
        assert r.stderr.count('\n') == 1
        assert policies(m) == before
        assert foliofsctl('get', m, 'dirty_account', 'account.share').stdout == \
            'dirty_account pinned\naccount.share 250\n'
        assert nr_dirty(m) == 128
        with open(os.path.join(m, '.foliofs', 'errors')) as f:
            assert '.foliofs/load: load=%s: %s' % (lib, why) in f.read()


def test_pinned_parameter_reprices_live_and_is_logged(dirs):
    root, b, m = dirs
    log = os.path.join(root, 'stats.log')
    with Mount(b, m, options=OPTS + ['dirty_account=pinned', 'stats_log=' + log,
                                     'stats_interval_ms=10']), holding():
        # 16 folios, each with one dirty 8 KiB write.
        fd = os.open(os.path.join(m, 'f'), os.O_RDWR | os.O_CREAT, 0o644)
        HELD.append(fd)
        for i in range(16):
            os.pwrite(fd, b'y' * 8192, i * FOLIO + 4096)
        assert nr_dirty(m) == 16 * 64              # share 125: an eighth of 512 pages
        for share, pages in ((0, 2), (1000, 512), (500, 256), (125, 64)):
            set_(m, 'account.share=%d' % share)
            assert nr_dirty(m) == 16 * pages, share
        r = foliofsctl('set', m, 'account.share=1001')
        assert r.returncode == 2
        assert r.stderr == 'foliofsctl: account.share=1001: an integer in [0, 1000], permille of the folio\n'
        r = foliofsctl('set', m, 'account.nope=1')
        assert r.returncode == 2
        assert r.stderr == ('foliofsctl: account.nope: not a parameter of dirty_account=pinned'
                            ' (it has: share)\n')
        assert nr_dirty(m) == 16 * 64
        set_(m, 'account.share=300')
        assert poll(lambda: '"account.share": 300' in open(log).read(), 10)
        assert os.listdir(os.path.join(m, '.foliofs', 'tunables')).count('account.share') == 1
        set_(m, 'dirty_account=page')
        assert 'account.share' not in os.listdir(os.path.join(m, '.foliofs', 'tunables'))
        assert nr_dirty(m) == 16 * 2


def test_help_lists_loaded_policy_and_parameters(libdir):
    lib = build(libdir, 'helped')
    out = subprocess.run([util.FOLIOFS, '-o', 'load=' + lib, '--help'], capture_output=True,
                         text=True, timeout=60).stdout
    assert re.search(r'^    helped +charge pct%% of each dirty page \(loaded from %s\)$'
                     % re.escape(lib), out, re.M)
    assert '      account.pct=N [25] percent of each dirty page charged (1 .. 100 %)' in out
    assert '      account.share=N [125] ' in out


def test_sim_loads_and_takes_parameters(dirs, libdir):
    root, _, _ = dirs
    lib = build(libdir, 'simmed')
    trace = os.path.join(root, 'w.trace')
    subprocess.run([SIM, 'gen', 'writers=1,file_size=64M,io=8K,ops=400', '-o', trace],
                   check=True, capture_output=True, timeout=120)

    def charged(*args):
        r = subprocess.run([SIM, trace] + list(args), capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        return int(re.search(r'^nr_dirtied (\d+)$', r.stdout, re.M).group(1))

    base = ['-o', 'folio_size=2M,cache_size=256M,dirty_bytes=128M,flushers=0']
    page = charged(*base[:1], base[1] + ',dirty_account=page')
    assert charged(*base[:1], base[1] + ',load=%s,dirty_account=simmed,account.pct=100' % lib) == page
    assert charged('--load', lib, *base[:1], base[1] + ',dirty_account=simmed,account.pct=50') \
        == (page + 1) // 2
    r = subprocess.run([SIM, trace, '-o', 'dirty_account=simmed,account.pct=0', '--load', lib],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert 'account.pct=0: an integer in [1, 100], %' in r.stderr


def test_control_file_modes(dirs, libdir):
    """policies is for everyone the mount admits to read; load is the
    mounting user's alone, as its code would run in their daemon."""
    _, b, m = dirs
    util.test_user()
    lib = build(libdir, 'modes')
    with Mount(b, m, options=['allow_other']):
        ctldir = os.path.join(m, '.foliofs')
        assert os.stat(os.path.join(ctldir, 'policies')).st_mode & 0o777 == 0o444
        assert os.stat(os.path.join(ctldir, 'load')).st_mode & 0o777 == 0o600
        assert 'account pinned builtin' in util.run_as('nobody', util.read_file,
                                                       os.path.join(ctldir, 'policies'), 'r')
        with pytest.raises(PermissionError):
            util.run_as('nobody', util.write_file, os.path.join(ctldir, 'load'),
                        lib.encode())
        assert 'modes' not in policies(m)
        with pytest.raises(PermissionError):
            util.write_file(os.path.join(ctldir, 'policies'), b'x')
        util.write_file(os.path.join(ctldir, 'load'), lib.encode())
        assert 'account modes %s' % lib in policies(m)


def test_throttle_parameter(dirs):
    """strictlimit's min_dirty: set at mount in any order, a tunable while
    strictlimit is in force, in the stats, gone with the policy."""
    _, b, m = dirs
    with Mount(b, m, options=['throttle.min_dirty=16', 'throttle=strictlimit']):
        assert foliofsctl('get', m, 'throttle', 'throttle.min_dirty').stdout == \
            'throttle strictlimit\nthrottle.min_dirty 16\n'
        set_(m, 'throttle.min_dirty=64')
        assert stats(m)['throttle.min_dirty'] == 64
        r = foliofsctl('set', m, 'throttle.min_dirty=0')
        assert (r.returncode, r.stderr) == \
            (2, 'foliofsctl: throttle.min_dirty=0: an integer in [1, 1048576], pages\n')
        set_(m, 'throttle=bdp')
        assert 'throttle.min_dirty' not in stats(m)
        set_(m, 'throttle=strictlimit')
        assert stats(m)['throttle.min_dirty'] == 8


# A throttle policy that never lets a writer run free: a quarter of the
# rate limit everywhere below the limit.
THROTTLE = r'''
#include <foliofs/policy.h>

static bool brake_freerun(const struct wb_dtc *d)
{
	(void)d;
	return false;
}

static uint64_t brake_pos_ratio(const struct wb_dtc *d)
{
	return d->dirty >= d->limit ? 0 : WB_RATIO_ONE / 4;
}

static void brake_target(const struct wb_dtc *d, uint64_t *dirty, uint64_t *setpoint)
{
	*dirty = d->dirty;
	*setpoint = wb_freerun_ceiling(d->thresh, d->bg_thresh);
}

static const struct wb_throttle_policy brake = {
	.name = "brake", .help = "never run free", .freerun = brake_freerun,
	.pos_ratio = brake_pos_ratio, .rate_target = brake_target,
};
static const struct wb_throttle_policy *const policies[] = { &brake, NULL };
FOLIOFS_POLICY_MODULE(.throttle = policies);
'''


def test_loaded_throttle_policy(dirs, libdir):
    """A throttle policy loaded live is listed, selected and switched; in
    the simulator it pauses writers where none does not."""
    root, b, m = dirs
    src, lib = os.path.join(libdir, 'brake.c'), os.path.join(libdir, 'brake.so')
    with open(src, 'w') as f:
        f.write(THROTTLE)
    subprocess.run([CC, '-shared', '-fPIC', '-I', INCLUDE, '-o', lib, src], check=True,
                   timeout=120)
    with Mount(b, m):
        r = foliofsctl('load', m, lib)
        assert r.returncode == 0, r.stderr
        assert 'throttle brake %s\n' % lib in policies(m)
        set_(m, 'throttle=brake')
        assert foliofsctl('get', m, 'throttle').stdout == 'throttle brake\n'
        set_(m, 'throttle=bdp')
    trace = os.path.join(root, 'w.trace')
    subprocess.run([SIM, 'gen', 'writers=2,file_size=64M,io=8K,ops=4000', '-o', trace],
                   check=True, capture_output=True, timeout=120)

    def events(throttle):
        r = subprocess.run([SIM, trace, '--load', lib, '-o', 'dirty_bytes=8M,throttle=' + throttle],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        return int(re.search(r'^throttle_events (\d+)$', r.stdout, re.M).group(1))

    assert events('none') == 0
    assert events('brake') > events('bdp') > 0
