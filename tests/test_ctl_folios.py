"""The control files .foliofs/folios (every cached folio) and
.foliofs/evict (drop a file's clean folios in a range), and foliofsctl's
folios and evict.

- folios lists one line per folio, "INO INDEX ORDER FLAGS", sorted, INO
  the st_ino stat(2) reports through the mount; flags u/d/w/r/A/R/s in
  that order, or -: a read's first use makes a folio referenced (R), a
  second active (A); a block written back is unsynced (s) until a sync;
- evict drops exactly the clean folios wholly inside the range, keeps
  dirty ones, reads back what it did; an inode with nothing cached drops
  nothing (dropped 0), as DONTNEED on an uncached file; bad input is
  EINVAL with the reason readable through the same open file and logged;
  both files are the mounting user's only.
"""

import errno
import json
import os
import subprocess

import pytest

import util
from util import Mount, ctl_path, foliofsctl, run_as, set_tunable

KiB = 1 << 10
MiB = 1 << 20

# Lines the daemon logs for the refused commands below: expected here.
REFUSED = ('.foliofs/evict: ',)


def folios(mnt):
    """[(ino, index, order, flags)] of .foliofs/folios."""
    out = []
    with open(ctl_path(mnt, 'folios')) as f:
        for line in f:
            ino, index, order, flags = line.split()
            out.append((int(ino), int(index), int(order), flags))
    return out


def evict(mnt, cmd):
    """Write CMD to .foliofs/evict: (errno or 0, what a read then gives)."""
    fd = os.open(ctl_path(mnt, 'evict'), os.O_RDWR)
    try:
        try:
            os.pwrite(fd, cmd.encode(), 0)
            err = 0
        except OSError as e:
            err = e.errno
        return err, os.pread(fd, 4096, 0).decode()
    finally:
        os.close(fd)


def check_quiet(m):
    """The daemon's output holds only the refusals this module provokes."""
    bad = [l for l in m.output().splitlines()
           if any(w in l for w in util.BAD_OUTPUT) and not any(r in l for r in REFUSED)]
    assert not bad, m.output()


@pytest.fixture
def mnt(dirs):
    _, b, m = dirs
    # Refused commands are logged as errors: checked by check_quiet instead.
    mount = Mount(b, m, options=['allow_other', 'folio_policy=fixed', 'folio_size=64K',
                                 'readahead_kb=0', 'flushers=0'])
    mount.start()
    try:
        mount.wait_for_mount()
        yield m, b, mount
        subprocess.run([util.FUSERMOUNT, '-u', m], check=True)
        assert mount.proc.wait(30) == 0, mount.output()
        check_quiet(mount)
    finally:
        mount.cleanup()


def test_folios_lists_every_folio(mnt):
    m, b, _ = mnt
    util.write_file(os.path.join(b, 'f'), os.urandom(MiB))
    util.write_file(os.path.join(b, 'g'), os.urandom(256 * KiB))
    assert folios(m) == []
    for name in ('g', 'f'):
        with open(os.path.join(m, name), 'rb') as f:
            f.read()
    ino_f = os.stat(os.path.join(m, 'f')).st_ino
    ino_g = os.stat(os.path.join(m, 'g')).st_ino
    got = folios(m)
    assert got == sorted(got)
    # Read once: referenced.
    want = sorted([(ino_f, i * 16, 4, 'uR') for i in range(16)] +
                  [(ino_g, i * 16, 4, 'uR') for i in range(4)])
    assert got == want
    # A dirty block shows on its folio.
    with open(os.path.join(m, 'f'), 'r+b') as f:
        f.seek(5 * 64 * KiB + 100)
        f.write(b'x')
        f.flush()
        assert (ino_f, 80, 4, 'udR') in folios(m)


def test_folios_lru_flags(mnt):
    """A read's first use of a folio sets R (referenced), the second moves
    it to the active list (A, R cleared), a third sets R again: the
    kernel's folio_mark_accessed().  A write marks nothing; written and
    synced by fsync, nothing is dirty or unsynced."""
    m, b, _ = mnt
    util.write_file(os.path.join(b, 'f'), os.urandom(MiB))
    path = os.path.join(m, 'f')
    ino = os.stat(path).st_ino
    for want in ('uR', 'uA', 'uAR'):
        with open(path, 'rb') as f:
            f.read()
        assert folios(m) == [(ino, i * 16, 4, want) for i in range(16)], want
        # foliofsctl folios --json sums the same flags.
        r = foliofsctl('folios', m, path, '--json')
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)[0]
        active = 16 if 'A' in want else 0
        assert (got['folios'], got['by_size'], got['marked']) == (16, {'64K': 16}, 0), got
        assert (got['active'], got['active_bytes'], got['referenced']) == \
            (active, active * 64 * KiB, 16 if 'R' in want else 0), got
        assert got['active_by_size'] == ({'64K': 16} if active else {}), got
    util.write_file(os.path.join(m, 'g'), os.urandom(256 * KiB))
    ino_g = os.stat(os.path.join(m, 'g')).st_ino
    assert [x for x in folios(m) if x[0] == ino_g] == [(ino_g, i * 16, 4, 'ud')
                                                        for i in range(4)]
    util.fsync_path(os.path.join(m, 'g'))
    assert [x for x in folios(m) if x[0] == ino_g] == [(ino_g, i * 16, 4, 'u')
                                                        for i in range(4)]


def test_folios_unsynced_flag(dirs):
    """Background writeback leaves what it wrote unsynced (s) while the
    unsynced memory is under the background threshold; fsync clears it.
    Two files of 512 KiB dirty under an 8 MiB background threshold; the
    threshold lowered to 768 KiB, the flusher writes one file whole (its
    chunk), then, still over it, the other or not (the threshold is judged
    again after 100 ms), and syncs only once unsynced memory is over the
    threshold: that second file.  So one file ends wholly written and
    unsynced ("us"), the other synced ("u") or still dirty ("ud")."""
    _, b, m = dirs
    opts = ['folio_policy=fixed', 'folio_size=64K', 'readahead_kb=0', 'cache_size=64M',
            'dirty_account=page', 'flushers=1', 'writeback_interval_ms=50',
            'dirty_expire_ms=3600000', 'dirty_background_bytes=8M', 'dirty_bytes=16M']
    with Mount(b, m, options=opts) as mnt:
        inos = []
        for name in ('a', 'b'):
            util.write_file(os.path.join(m, name), os.urandom(512 * KiB))
            inos.append(os.stat(os.path.join(m, name)).st_ino)
        assert {fl for _, _, _, fl in folios(m)} == {'ud'}
        set_tunable(m, 'dirty_background_bytes', str(768 * KiB))

        def settled():
            by = {ino: {fl for i, _, _, fl in folios(m) if i == ino} for ino in inos}
            kinds = sorted(''.join(sorted(v)) for v in by.values())
            if kinds in (['u', 'us'], ['ud', 'us']):
                return by
            return None
        by = util.poll(settled, 10)
        assert by, folios(m)
        assert all(len([x for x in folios(m) if x[0] == ino]) == 8 for ino in inos)
        written = [ino for ino in inos if by[ino] == {'us'}][0]
        name = 'ab'[inos.index(written)]
        assert util.stats(m)['unsynced_bytes'] == 512 * KiB
        util.fsync_path(os.path.join(m, name))
        assert {fl for i, _, _, fl in folios(m) if i == written} == {'u'}
        assert util.stats(m)['unsynced_bytes'] == 0
        mnt.umount()


def test_evict_drops_clean_folios_in_range(mnt):
    m, b, _ = mnt
    data = os.urandom(MiB)
    util.write_file(os.path.join(b, 'f'), data)
    path = os.path.join(m, 'f')
    ino = os.stat(path).st_ino
    with open(path, 'rb') as f:
        f.read()
    # [68K, 320K): the folios at 128K, 192K and 256K are wholly inside.
    err, msg = evict(m, '%d %d %d\n' % (ino, 68 * KiB, 252 * KiB))
    assert (err, msg) == (0, 'dropped 3 bytes %d kept_held 0 kept_busy 0\n' % (192 * KiB))
    assert [i for _, i, _, _ in folios(m)] == [0, 16] + [i * 16 for i in range(5, 16)]
    # A dirty folio stays; LEN 0 is to the end of the file.
    with open(path, 'r+b') as f:
        f.seek(700 * KiB)
        f.write(b'y')
        f.flush()
        err, msg = evict(m, '%d 0 0' % ino)
        assert err == 0 and msg.startswith('dropped 12 ') and 'kept_held 1 ' in msg, msg
        assert folios(m) == [(ino, 640 // 4, 4, 'udR')]
        os.fsync(f.fileno())
    assert evict(m, '%d 0 0' % ino)[0] == 0
    assert folios(m) == []
    # Read again: the bytes are the file's.
    with open(path, 'rb') as f:
        assert f.read() == data[:700 * KiB] + b'y' + data[700 * KiB + 1:]


@pytest.mark.parametrize('cmd,code', [
    ('', errno.EINVAL), ('x', errno.EINVAL), ('1 2', errno.EINVAL),
    ('1 2 3 4', errno.EINVAL), ('-1 0 0', errno.EINVAL), ('1 0 -5', errno.EINVAL),
    ('1 0x10 0', errno.EINVAL), ('1 99999999999999999999 0', errno.EINVAL),
    ('1 %d %d' % (1 << 62, 1 << 62), errno.EINVAL),
])
def test_evict_bad_input(mnt, cmd, code):
    m, b, mount = mnt
    util.write_file(os.path.join(b, 'f'), os.urandom(128 * KiB))
    with open(os.path.join(m, 'f'), 'rb') as f:
        f.read()
    before = folios(m)
    err, msg = evict(m, cmd + '\n')
    assert err == code, (cmd, err, msg)
    assert msg.endswith('\n') and len(msg) > 1, msg
    assert folios(m) == before
    assert '.foliofs/evict: ' in mount.output()


def test_evict_uncached_drops_nothing(mnt):
    """Evicting a file nothing of which is cached drops nothing and says
    so, as POSIX_FADV_DONTNEED on an uncached file succeeds: "dropped 0",
    exit 0 from foliofsctl, nothing logged.  An inode number no file has
    reads the same (the daemon knows only cached files by number)."""
    m, b, mount = mnt
    util.write_file(os.path.join(b, 'cold'), os.urandom(128 * KiB))
    path = os.path.join(m, 'cold')
    ino = os.stat(path).st_ino
    assert folios(m) == []
    for i in (ino, (1 << 64) - 2):
        assert evict(m, '%d 0 0\n' % i) == (0, 'dropped 0 bytes 0 kept_held 0 kept_busy 0\n')
    r = foliofsctl('evict', m, path)
    assert (r.returncode, r.stderr) == (0, ''), r
    assert r.stdout == ('%s: dropped 0 folios (MiB 0.00), kept 0 dirty or unsynced, 0 busy\n'
                        % path), r.stdout
    assert '.foliofs/evict' not in mount.output()


def test_foliofsctl_file_on_another_mount(mnt, tmp_path):
    """folios and evict name files by inode number, which means something
    only on the mount: a file elsewhere is refused (exit 2), not taken for
    whichever cached file has its number."""
    m, _, _ = mnt
    other = tmp_path / 'elsewhere'
    other.write_bytes(b'x')
    for cmd in ('folios', 'evict'):
        r = foliofsctl(cmd, m, other)
        assert (r.returncode, r.stdout) == (2, ''), r
        assert r.stderr == 'foliofsctl: %s: not on the foliofs mount %s\n' % (other, m), r


def test_ctl_files_mounting_user_only(mnt):
    m, _, _ = mnt
    for name, mode in (('folios', 0o400), ('evict', 0o600)):
        assert os.stat(ctl_path(m, name)).st_mode & 0o777 == mode
    with pytest.raises(PermissionError):
        run_as('nobody', util.read_file, ctl_path(m, 'folios'))
    with pytest.raises(PermissionError):
        run_as('nobody', os.open, ctl_path(m, 'evict'), os.O_WRONLY)
    with pytest.raises(PermissionError):
        os.open(ctl_path(m, 'folios'), os.O_WRONLY)


def test_foliofsctl_folios_and_evict(mnt):
    m, b, _ = mnt
    util.write_file(os.path.join(b, 'f'), os.urandom(MiB))
    path = os.path.join(m, 'f')
    with open(path, 'rb') as f:
        f.read()
    r = foliofsctl('folios', m, path)
    assert r.returncode == 0, r.stderr
    assert '64K: 16' in r.stdout and 'MiB 1.00' in r.stdout, r.stdout
    r = foliofsctl('evict', m, path, 0, '256K')
    assert r.returncode == 0, r.stderr
    assert 'dropped 4 folios' in r.stdout, r.stdout
    assert len(folios(m)) == 12
    r = foliofsctl('evict', m, path)
    assert r.returncode == 0 and len(folios(m)) == 0, r.stdout + r.stderr
    r = foliofsctl('evict', m, path, 'x', 0)
    assert r.returncode == 2, r.stdout + r.stderr
    r = foliofsctl('folios', m)
    assert r.returncode == 0 and r.stdout == '', r.stdout + r.stderr
