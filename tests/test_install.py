"""What `meson install` installs, and the man pages against --help.

- Every option, policy and tunable foliofs --help and a mount list, every
  option and command of foliofsctl -h, and every option and KEY= of
  foliofs-sim --help, is in the man page's source (doc/man/*.scd), as
  test_hostile checks doc/admin.md's option table.
- `meson install --destdir` of the build under test puts the binaries, the
  user tools (foliofs-pgcompare, foliofs-crashimg, foliofs-bpftrace), the
  man pages (each renders with man -l, no warning), bash completion and
  the docs in the prefix; and, as root, `mount -t fuse.foliofs` mounts
  with the installed foliofs.  mount(8) drops PATH before it runs
  mount.fuse3 (util-linux sanitizes the environment of helpers), whose
  /bin/sh then looks in its default PATH, /usr/local/bin among it: so the
  test runs the mount in a mount namespace of its own with the prefix's
  bin bound over /usr/local/bin, which is where `meson install` puts
  foliofs by default.
"""

import os
import re
import shutil
import subprocess

import pytest

import util
from util import Mount

MAN = os.path.join(util.REPO, 'doc', 'man')
BUILD = os.path.dirname(os.path.realpath(util.FOLIOFS))
FOLIOFSCTL = os.path.join(BUILD, 'tools', 'foliofsctl')
SIM = os.path.join(BUILD, 'sim', 'foliofs-sim')
TOOLS = ('foliofs', 'foliofsctl', 'foliofs-sim', 'foliofs-pgcompare', 'foliofs-crashimg',
         'foliofs-bpftrace')
PAGES = ('man8/foliofs.8', 'man8/foliofsctl.8', 'man1/foliofs-sim.1')


def page(name):
    with open(os.path.join(MAN, name + '.scd')) as f:
        return f.read()


def run(cmd, **kw):
    return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, **kw)


def test_foliofs_page_has_every_option_and_tunable(dirs):
    out = run([util.FOLIOFS, '--help']).stdout
    text = page('foliofs.8')
    terms = set(re.findall(r'^\*-o ([a-z_]+)', text, re.M))
    options = set(re.findall(r'^ +-o ([a-z_]+)', out, re.M))
    assert options and options <= terms, options - terms
    # The policies listed under their option, and the general options.
    for name in re.findall(r'^    ([a-z]+) {10,}', out, re.M):
        assert '*%s*' % name in text, name
    for flag in re.findall(r'^    (-[a-zA-Z]|--[a-z]+)', out, re.M):
        assert '*%s*' % flag in text, flag
    _, b, m = dirs
    with Mount(b, m):
        tunables = set(os.listdir(os.path.join(m, '.foliofs', 'tunables')))
    section = text.split('# TUNABLES', 1)[1].split('\n# ', 1)[0]
    listed = set(re.findall(r'\*([a-z_]+)\*', section))
    assert tunables and tunables <= listed, tunables - listed
    # Every control file a mount lists.
    with Mount(b, m):
        ctl = set(os.listdir(os.path.join(m, '.foliofs')))
    section = text.split('# CONTROL FILES', 1)[1].split('\n# ', 1)[0]
    assert ctl <= set(re.findall(r'_([a-z]+)(?:/NAME)?_', section)), ctl


def test_foliofsctl_page_has_every_option_and_command():
    out = run([FOLIOFSCTL, '-h']).stdout
    text = page('foliofsctl.8')
    for opt in re.findall(r'(?<![\w-])(--?[a-zA-Z][a-z-]*)', out.split('Options:', 1)[1]):
        assert '*%s*' % opt in text, opt
    for cmd in re.findall(r'^  ([a-z]+) \[', out, re.M):
        assert re.search(r'^\*%s\*' % cmd, text, re.M), cmd


def test_sim_page_has_every_option_and_key():
    r = run([SIM, '--help'])
    out = r.stdout + r.stderr
    text = page('foliofs-sim.1')
    for opt in set(re.findall(r'(?<![\w-])(--[a-z-]+|-o)\b', out)):
        assert '*%s*' % opt in text, opt
    for key in set(re.findall(r'\b([a-z_]+)=(?!value\b)', out)):
        assert '*%s*' % key in text, key
    for cmd in ('gen', 'dump', 'sweep'):
        assert '*%s*' % cmd in text
    # sweep's own options (foliofs-sim sweep --help).
    out = run([SIM, 'sweep', '--help']).stdout
    for opt in set(re.findall(r'(?<![\w-])(--[a-z-]+|-[oacj])\b', out)):
        assert '*%s*' % opt in text, opt


def installed(tmp_path):
    """`meson install --destdir` of the build under test: the prefix."""
    if not os.path.exists(os.path.join(BUILD, 'build.ninja')):
        pytest.skip('%s is not a meson build directory' % BUILD)
    dest = str(tmp_path / 'dest')
    r = run(['meson', 'install', '-C', BUILD, '--destdir', dest, '--no-rebuild', '--quiet'])
    assert r.returncode == 0, r.stdout + r.stderr
    prefix = run(['meson', 'introspect', BUILD, '--buildoptions'])
    opts = {o['name']: o['value'] for o in __import__('json').loads(prefix.stdout)}
    return dest + opts['prefix'], opts


def test_meson_install_puts_everything_in_the_prefix(tmp_path):
    root, opts = installed(tmp_path)
    bindir = os.path.join(root, opts['bindir'])
    for tool in TOOLS:
        path = os.path.join(bindir, tool)
        assert os.access(path, os.X_OK), path
    for tool in ('foliofs-pgcompare', 'foliofs-crashimg', 'foliofs-bpftrace'):
        r = run([os.path.join(bindir, tool), '--help'])
        assert r.returncode == 0 and 'usage' in r.stdout.lower(), (tool, r)
    share = os.path.join(root, opts['datadir'])
    # What foliofs-pgcompare imports (it ran above: found there).
    assert os.path.isfile(os.path.join(share, 'foliofs', 'python', 'foliofs_tools.py'))
    r = run([os.path.join(bindir, 'foliofs-bpftrace'), '--foliofs',
             os.path.join(bindir, 'foliofs'), '--print',
             os.path.join(share, 'foliofs', 'bpftrace', 'pauses.bt')])
    assert r.returncode == 0 and 'usdt:' in r.stdout, r
    # Installed, a bare name is found in share/foliofs/bpftrace, from anywhere.
    bare = run([os.path.join(bindir, 'foliofs-bpftrace'), '--foliofs',
                os.path.join(bindir, 'foliofs'), '--print', 'pauses.bt'], cwd='/')
    assert (bare.returncode, bare.stdout) == (0, r.stdout), bare
    r = run([os.path.join(bindir, 'foliofs-bpftrace'), '--list'], cwd='/')
    assert r.returncode == 0, r
    assert r.stdout.splitlines()[0] == os.path.join(share, 'foliofs', 'bpftrace') + ':', r.stdout
    assert 'pauses.bt' in r.stdout, r.stdout
    for name in ('foliofs', 'foliofsctl', 'foliofs-sim'):
        comp = os.path.join(share, 'bash-completion', 'completions', name)
        r = run(['bash', '-c', 'source "$0" && complete -p %s' % name, comp])
        assert r.returncode == 0 and name in r.stdout, r
    assert os.path.exists(os.path.join(share, 'doc', 'foliofs', 'admin.md'))
    mandir = os.path.join(root, opts['mandir'])
    if not os.path.exists(os.path.join(mandir, PAGES[0])):
        pytest.skip('built without man pages (scdoc is not installed, or -Dman=disabled)')
    if not shutil.which('man'):
        pytest.skip('man (man-db) is not installed')
    for p in PAGES:
        r = run(['man', '-l', os.path.join(mandir, p)],
                env=dict(os.environ, MANWIDTH='80', MANPAGER='cat', PAGER='cat'))
        name = os.path.basename(p).rsplit('.', 1)[0]
        assert r.returncode == 0 and not r.stderr, (p, r.stderr)
        assert 'NAME' in r.stdout and name in r.stdout and 'SYNOPSIS' in r.stdout, p


POLICY = r'''
#include <foliofs/policy.h>

static uint64_t price(const struct bs_held_state *st)
{
	return (uint64_t)st->held_blocks * st->block_size;
}

static const struct bs_account_policy outside = {
	.name = "outside", .help = "built against the installed header", .price = price,
};
static const struct bs_account_policy *const policies[] = { &outside, NULL };
FOLIOFS_POLICY_MODULE(.account = policies);
'''


def test_policy_builds_against_the_installed_header(tmp_path):
    """The one cc line of doc/policies.md, with pkg-config finding the
    installed foliofs-policy.pc and foliofs/policy.h; the library loads."""
    if not shutil.which('pkg-config') or not shutil.which('cc'):
        pytest.skip('needs pkg-config and cc')
    root, opts = installed(tmp_path)
    pcdirs = [os.path.join(root, opts['libdir'], 'pkgconfig'),
              os.path.join(root, opts['datadir'], 'pkgconfig')]
    pc = [d for d in pcdirs if os.path.exists(os.path.join(d, 'foliofs-policy.pc'))]
    assert pc, pcdirs
    assert os.path.exists(os.path.join(root, opts['includedir'], 'foliofs', 'policy.h'))
    src, lib = str(tmp_path / 'p.c'), str(tmp_path / 'p.so')
    with open(src, 'w') as f:
        f.write(POLICY)
    # The .pc names the prefix; the destdir moves it: pkg-config's sysroot.
    env = dict(os.environ, PKG_CONFIG_PATH=pc[0],
               PKG_CONFIG_SYSROOT_DIR=root[:-len(opts['prefix'])])
    r = run(['sh', '-c', 'cc -shared -fPIC $(pkg-config --cflags foliofs-policy) -o "$1" "$2"',
             'sh', lib, src], env=env)
    assert r.returncode == 0, r.stderr
    # The installed header is clean under ISO C's pedantic warnings (its
    # 128-bit arithmetic is a GNU extension, marked as one), with every
    # compiler there is.
    for compiler in [c for c in ('gcc', 'clang') if shutil.which(c)]:
        r = run(['sh', '-c', '"$0" -std=c17 -Wall -Wextra -Wpedantic -Werror -fsyntax-only'
                 ' $(pkg-config --cflags foliofs-policy) "$1"', compiler, src], env=env)
        assert r.returncode == 0 and not r.stderr, (compiler, r.stderr)
    r = run([os.path.join(root, opts['bindir'], 'foliofs'), '-o', 'load=' + lib, '--help'])
    assert r.returncode == 0
    assert 'built against the installed header (loaded from %s)' % lib in r.stdout


PCNOTE = os.path.join(util.REPO, 'tools', 'pkgconfig-path.sh')


def test_setup_says_pkg_config_path_for_another_prefix(tmp_path):
    """meson setup with a prefix whose pkgconfig directory pkg-config does
    not search prints the export that makes `pkg-config --cflags
    foliofs-policy` find the installed .pc (tools/pkgconfig-path.sh),
    which then does; for a directory it searches, or one PKG_CONFIG_PATH
    names, the script says nothing."""
    if not shutil.which('pkg-config') or not shutil.which('meson'):
        pytest.skip('needs pkg-config and meson')
    env = {k: v for k, v in os.environ.items() if k != 'PKG_CONFIG_PATH'}
    prefix = str(tmp_path / 'prefix')
    r = run(['meson', 'setup', str(tmp_path / 'build'), '--prefix=' + prefix], env=env,
            cwd=util.REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r'^foliofs: pkg-config does not look in (\S+), where meson install puts'
                  r' foliofs-policy.pc;\n.*\n    (export PKG_CONFIG_PATH=\S+)$', r.stdout, re.M)
    assert m and m.group(1).startswith(prefix + '/lib'), r.stdout
    pcdir, export = m.groups()
    # meson pads a summary's keys to its longest one: spaces before the colon.
    assert re.search(r'^\s*foliofs-policy\.pc\s*: %s \(not on pkg-config\'s path\)$'
                     % re.escape(pcdir), r.stdout, re.M), r.stdout
    # As meson install would put it there.
    os.makedirs(pcdir)
    with open(os.path.join(pcdir, 'foliofs-policy.pc'), 'w') as f:
        f.write('prefix=%s\nincludedir=${prefix}/include\n\nName: foliofs-policy\n'
                'Description: test\nVersion: 0\nCflags: -I${includedir}\n' % prefix)
    assert run(['pkg-config', '--cflags', 'foliofs-policy'], env=env).returncode != 0
    r = run(['sh', '-c', export + ' && pkg-config --cflags foliofs-policy'], env=env)
    assert r.returncode == 0 and r.stdout.strip() == '-I%s/include' % prefix, r
    # Where pkg-config looks already, or PKG_CONFIG_PATH points: silence.
    default = run(['pkg-config', '--variable', 'pc_path', 'pkg-config']).stdout.strip()
    r = run(['sh', PCNOTE, default.split(':')[0]], env=env)
    assert (r.returncode, r.stdout) == (0, ''), r
    r = run(['sh', PCNOTE, pcdir], env=dict(env, PKG_CONFIG_PATH=pcdir))
    assert (r.returncode, r.stdout) == (0, ''), r


MOUNT_SCRIPT = r'''
set -e
mount --make-rprivate /
mount --bind "$BIN" /usr/local/bin
mount -t fuse.foliofs -o flushers=1 "$B" "$M"
printf installed > "$M/f"
grep -q '^nr_dirtied ' "$M/.foliofs/stats"
# The daemon of this mount: its command line names the mount point.
foliofs_pid=$(pgrep -n -f "^foliofs .*$M")
readlink /proc/$foliofs_pid/exe
umount "$M"
# The daemon writes back and syncs after the unmount, then exits.
i=0; while kill -0 "$foliofs_pid" 2>/dev/null && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
cat "$B/f"
'''


def test_mount_t_fuse_foliofs_from_the_prefix(tmp_path, dirs):
    if os.geteuid() != 0:
        pytest.skip('not root: mount -t fuse.foliofs')
    for prog in ('unshare', 'mount.fuse3', 'pgrep'):
        if not shutil.which(prog):
            pytest.skip('%s is not installed' % prog)
    root, opts = installed(tmp_path)
    if opts['prefix'] != '/usr/local':
        pytest.skip('prefix %s: mount(8) finds foliofs only on /bin/sh\'s default PATH'
                    % opts['prefix'])
    _, b, m = dirs
    bindir = os.path.join(root, opts['bindir'])
    env = dict(os.environ, BIN=bindir, B=b, M=m)
    r = run(['unshare', '--mount', 'sh', '-c', MOUNT_SCRIPT], env=env)
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    # The daemon was the installed copy, seen at /usr/local/bin in there.
    assert lines[0] in ('/usr/local/bin/foliofs',
                        os.path.join(bindir, 'foliofs')), lines
    assert lines[-1] == 'installed', lines
    assert not util.is_fuse_mounted(m)
