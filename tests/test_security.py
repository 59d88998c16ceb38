"""Who can see and do what on a foliofs mount, and that the daemon never
reaches outside BACKING through a symlink (issue 10, "Security").

Callers: the test user ("owner", util.test_user), a second unprivileged
user made here ("group": a member of SEC_GROUP, the group of the table's
files and directories), 'nobody' ("other") and root.

- Without allow_other only the mounting user reaches the mount; FUSE
  refuses everyone else, root included, whatever the modes say.
- With allow_other (root daemon, conftest's ffs), a table of callers
  against file and directory modes: every operation gives the same result
  or errno, and leaves the same tree, as on a plain directory of the
  backing's filesystem prepared the same way (fixture ref).
- Symlinks planted in BACKING pointing outside it, used through the mount
  and raced against lookups: nothing outside is created or changed.  The
  caller runs chrooted in a jail that holds the mount and a plain directory,
  so its own kernel's resolution of such a link ends inside the jail
  (ENOENT); what changes outside can only have been done by the daemon.
- Control files: with allow_other, another user cannot change a tunable or
  the fault switch, and nothing changes.

- POSIX ACLs (where the kernel offers FUSE_CAP_POSIX_ACL): an ACL that
  denies a user is enforced; ACLs set through the mount read back, change
  the mode and are enforced as on ext4; a new name gets the caller's umask,
  or instead the parent's default ACL, as on ext4.
"""

import contextlib
import ctypes
import errno
import os
import pwd
import shutil
import stat
import struct
import tempfile
import threading
import time

import pytest

import util
from util import (RENAME_EXCHANGE, Mount, get_fault, outcome, outcome_as, read_file, renameat2,
                  run_as, same, set_fault, set_tunable, write_file)

# Every test here runs with umask 022 (an autouse fixture of util).
umask_022 = util.umask_022

P = os.path.join

from conftest import SEC_GROUP
DATA = b'data\n'


@pytest.fixture(scope='module', params=['direct', 'writethrough', 'kernel_cache'])
def ffs_options(request):
    """conftest's ffs (the allow_other mount) with direct I/O, with the
    kernel keeping clean pages (writethrough) and with the kernel's
    writeback cache: there a SETATTR of a regular file carries the
    kernel's times, and the daemon applies it with its own credentials
    (ops.c ffs_setattr), so only the kernel's checks stand."""
    return {'direct': [], 'writethrough': ['cache=writethrough'],
            'kernel_cache': ['kernel_cache']}[request.param]


def ids(user):
    """(uid, gid) of USER (None: root)."""
    if user is None:
        return (0, 0)
    pw = pwd.getpwnam(user)
    return (pw.pw_uid, pw.pw_gid)


def sec_gid():
    return util.ensure_group(SEC_GROUP)


@contextlib.contextmanager
def user_allow_other():
    """/etc/fuse.conf with user_allow_other for the block, restored after:
    fusermount3 reads it when mounting, so the block need only hold the
    mount itself."""
    path = '/etc/fuse.conf'
    old = read_file(path) if os.path.exists(path) else None
    if old is not None and b'user_allow_other' in [line.strip() for line in old.splitlines()]:
        yield
        return

    def put(data):
        tmp = path + '.foliofs-test'
        write_file(tmp, data)
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    put((old or b'') + b'\nuser_allow_other\n')
    try:
        yield
    finally:
        if old is None:
            os.unlink(path)
        else:
            put(old)


def snapshot(top, skip=()):
    """{relative path: state} of everything under TOP (TOP itself as '.'),
    not descending into the directories in SKIP: type, mode, owner, size,
    mtime, link count, content or link target, and xattrs (read as root)."""
    out = {}

    def visit(path, rel):
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            body = read_file(path)
        elif stat.S_ISLNK(st.st_mode):
            body = os.readlink(path)
        else:
            body = None
        xattrs = None
        if not stat.S_ISLNK(st.st_mode):
            xattrs = sorted((n, os.getxattr(path, n)) for n in os.listxattr(path))
        out[rel] = (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns,
                    st.st_nlink, body, xattrs)
        if stat.S_ISDIR(st.st_mode) and path not in skip:
            for n in sorted(os.listdir(path)):
                visit(P(path, n), n if rel == '.' else P(rel, n))
    visit(top, '.')
    return out


def write_one(path):
    """Write one byte at the start of PATH (opened write-only)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        return os.write(fd, b'w')
    finally:
        os.close(fd)


# --------------------------------------------------------------------------
# without allow_other: the mounting user only


def probe(mnt, tag):
    """Read, list, write, create and read the stats of the mount at MNT;
    one outcome each (TAG names what the caller creates)."""
    return [('stat', outcome(lambda: stat.S_IMODE(os.stat(mnt).st_mode))),
            ('statvfs', outcome(lambda: os.statvfs(mnt).f_blocks > 0)),
            ('list', outcome(lambda: sorted(os.listdir(mnt)))),
            ('list_sub', outcome(lambda: sorted(os.listdir(P(mnt, 'd'))))),
            ('read', outcome(read_file, P(mnt, 'f'))),
            ('write', outcome(write_one, P(mnt, 'f'))),
            ('create', outcome(write_file, P(mnt, 'new-' + tag), b'x')),
            ('mkdir', outcome(os.mkdir, P(mnt, 'd', 'dir-' + tag))),
            ('stats', outcome(lambda: len(read_file(P(mnt, '.foliofs', 'stats'))) > 0))]


def test_no_allow_other_mounting_user_only(dirs, users):
    """A mount by the test user without allow_other: the second user and
    root get EACCES for everything, though the backing file is 0666 and the
    directories 0777 (statfs succeeds with zeros: the kernel answers it
    without asking the daemon); then the mounting user does all of it."""
    root, b, mnt = dirs
    owner = users['owner']
    uid, gid = ids(owner)
    os.chmod(b, 0o777)
    write_file(P(b, 'f'), DATA)
    os.chmod(P(b, 'f'), 0o666)
    os.mkdir(P(b, 'd'))
    os.chmod(P(b, 'd'), 0o777)
    for p in (b, mnt, P(b, 'f'), P(b, 'd')):
        os.chown(p, uid, gid)
    before = snapshot(b)
    with Mount(b, mnt, user=owner):
        for who in ('group', 'root'):
            got = outcome_as(users[who], probe, mnt, who)
            assert got[0] == 'ok', got
            want = [('statvfs', ('ok', False))] + [(k, ('err', 'EACCES')) for k, _ in got[1]
                                                   if k != 'statvfs']
            assert sorted(got[1]) == sorted(want), who
        assert snapshot(b) == before
        got = run_as(owner, probe, mnt, 'owner')
        assert all(r[0] == 'ok' for _, r in got) and dict(got)['statvfs'][1], got
        assert dict(got)['list'] == ('ok', ['d', 'f'])
    assert read_file(P(b, 'f')) == b'w' + DATA[1:]


def test_unprivileged_mount_writes_others_file(dirs, users):
    """The mounting user may write another user's 0666 file, as on ext4:
    each write and fsync succeeds, the data reaches the backing file, and
    the daemon exits 0 without logging an error (it cannot set the file's
    times; the backing file's mtime is then that of the writeback)."""
    root, b, mnt = dirs
    owner = users['owner']
    uid, gid = ids(owner)
    for p in (b, mnt):
        os.chown(p, uid, gid)
    write_file(P(b, 'f'), DATA)
    os.chmod(P(b, 'f'), 0o666)

    def write_twice(path):
        for data in (b'one', b'two'):
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
    with Mount(b, mnt, user=owner):   # leaving it checks the daemon's exit and output
        run_as(owner, write_twice, P(mnt, 'f'))
    assert read_file(P(b, 'f')) == b'two' + DATA[3:]


# --------------------------------------------------------------------------
# with allow_other: callers against modes, as on a plain directory

FILE_MODES = (0o600, 0o640, 0o644, 0o666)
DIR_MODES = (0o755, 0o775, 0o777, 0o1777)


# Operations on a file of the owner and SEC_GROUP, in a directory anyone
# may write (so only the file's mode and owner decide).
FILE_OPS = {
    'read': read_file,
    'write': write_one,
    'open_trunc': lambda p: os.close(os.open(p, os.O_WRONLY | os.O_TRUNC)),
    'truncate': lambda p: os.truncate(p, 1),
    'chmod': lambda p: os.chmod(p, 0o604),
    'chown': lambda p: os.chown(p, os.getuid(), -1),
    'chgrp': lambda p: os.chown(p, -1, os.getgid()),
    'utime': lambda p: os.utime(p, (1000, 2000)),   # set times: the owner only
    'touch': lambda p: os.utime(p, None),           # now: any writer
    'setxattr': lambda p: os.setxattr(p, 'user.new', b'x'),
    'removexattr': lambda p: os.removexattr(p, 'user.pre'),
    'getxattr': lambda p: os.getxattr(p, 'user.pre'),
    'link': lambda p: os.link(p, p + '.ln'),         # fs.protected_hardlinks
}

# Operations in a directory of the owner and SEC_GROUP holding 'theirs'
# (a root's file), 'mine' (the caller's file) and 'sub' (root's empty
# directory); 'src' (0666, root's) is beside the directory.
DIR_OPS = {
    'list': lambda d: sorted(os.listdir(d)),
    'lookup': lambda d: os.stat(P(d, 'theirs')).st_size,
    'create': lambda d: os.close(os.open(P(d, 'new'), os.O_CREAT | os.O_EXCL | os.O_WRONLY,
                                         0o644)),
    'mkdir': lambda d: os.mkdir(P(d, 'newdir')),
    'symlink': lambda d: os.symlink('theirs', P(d, 'newsym')),
    'link': lambda d: os.link(P(d, '..', 'src'), P(d, 'newlink')),
    'unlink_mine': lambda d: os.unlink(P(d, 'mine')),
    'unlink_theirs': lambda d: os.unlink(P(d, 'theirs')),
    'rename_mine': lambda d: os.rename(P(d, 'mine'), P(d, 'mine.r')),
    'rename_theirs': lambda d: os.rename(P(d, 'theirs'), P(d, 'theirs.r')),
    'rename_over_theirs': lambda d: os.rename(P(d, 'mine'), P(d, 'theirs')),
    'rmdir': lambda d: os.rmdir(P(d, 'sub')),
    'chmod': lambda d: os.chmod(d, 0o700),
    'chown': lambda d: os.chown(d, os.getuid(), -1),
    'utime': lambda d: os.utime(d, (1000, 2000)),
    'touch': lambda d: os.utime(d, None),
    'setxattr': lambda d: os.setxattr(d, 'user.new', b'x'),
}


def prepare_table(d, owner, caller):
    """The table's objects in the new directory D (made the same way on the
    mount and on the plain directory), as root: D/f<mode>-<op> for each file
    operation, D/d<mode>-<op> for each directory operation.  OWNER and
    CALLER are (uid, gid)."""
    gid = sec_gid()
    os.chmod(d, 0o777)
    write_file(P(d, 'src'), DATA)
    os.chmod(P(d, 'src'), 0o666)
    for mode in FILE_MODES:
        for op in FILE_OPS:
            p = P(d, 'f%o-%s' % (mode, op))
            write_file(p, DATA)
            os.setxattr(p, 'user.pre', b'v')
            os.chown(p, owner[0], gid)
            os.chmod(p, mode)
    for mode in DIR_MODES:
        for op in DIR_OPS:
            p = P(d, 'd%o-%s' % (mode, op))
            os.mkdir(p)
            write_file(P(p, 'theirs'), DATA)
            write_file(P(p, 'mine'), DATA)
            os.chown(P(p, 'mine'), *caller)
            os.mkdir(P(p, 'sub'))
            os.chown(p, owner[0], gid)
            os.chmod(p, mode)


def run_table(d):
    """Every operation of the table in D, as the calling process:
    [((object, op), outcome)]."""
    os.umask(0o022)
    out = []
    for mode in FILE_MODES:
        for op, fn in FILE_OPS.items():
            out.append((('f%o' % mode, op), outcome(fn, P(d, 'f%o-%s' % (mode, op)))))
    for mode in DIR_MODES:
        for op, fn in DIR_OPS.items():
            out.append((('d%o' % mode, op), outcome(fn, P(d, 'd%o-%s' % (mode, op)))))
    return out


def tree(d):
    """The table's objects after the operations, seen by root: what each
    operation must have left the same on both sides (not the times, except
    whether the explicit ones were set)."""
    out = {}
    for rel, (mode, uid, gid, size, mtime_ns, nlink, body, xattrs) in snapshot(d).items():
        if rel != '.':
            out[rel] = (mode, uid, gid, size, nlink, mtime_ns == 2000 * 10**9,
                        body, [x for x in xattrs or () if x[0].startswith('user.')])
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize('who', ('owner', 'group', 'other', 'root'))
def test_allow_other_table(work, ref, users, who):
    """Each caller against the table: results and errnos, and the state
    left (modes, owners, sizes, contents, links, user.* xattrs), through the
    mount and in the backing store, equal the plain directory's."""
    user = users[who]
    owner, caller = ids(users['owner']), ids(user)
    for d in (work.mnt, ref):
        prepare_table(d, owner, caller)
    res = same(run_table, work.mnt, ref, user=user)
    cells = dict(res[1])
    assert tree(work.mnt) == tree(ref)
    for rel, st in tree(ref).items():
        if stat.S_ISREG(st[0]):
            util.sync_path(work.m(rel))
    assert tree(work.back) == tree(ref)
    # The callers are who they should be (not all root, say).
    expect = {
        'owner': {('f600', 'write'): ('ok', 1), ('f600', 'chmod'): ('ok', None),
                  ('d1777', 'unlink_theirs'): ('ok', None)},
        'group': {('f640', 'read'): ('ok', DATA), ('f640', 'write'): ('err', 'EACCES'),
                  ('f666', 'utime'): ('err', 'EPERM'), ('f666', 'touch'): ('ok', None),
                  ('d775', 'create'): ('ok', None), ('d1777', 'unlink_theirs'): ('err', 'EPERM'),
                  ('d1777', 'unlink_mine'): ('ok', None), ('d1777', 'setxattr'): ('err', 'EPERM')},
        'other': {('f640', 'read'): ('err', 'EACCES'), ('f644', 'read'): ('ok', DATA),
                  ('f644', 'link'): ('err', 'EPERM'), ('d775', 'create'): ('err', 'EACCES'),
                  ('d777', 'unlink_theirs'): ('ok', None), ('d777', 'chmod'): ('err', 'EPERM')},
        'root': {('f600', 'write'): ('ok', 1), ('d1777', 'rmdir'): ('ok', None)},
    }[who]
    assert {k: cells[k] for k in expect} == expect


def test_listxattr_hides_trusted(work, ref, users):
    """An unprivileged caller's listxattr does not show trusted.* names, as
    on the plain directory (the values are refused by the kernel either
    way: ENODATA)."""
    def setup(d):
        p = P(d, 'f')
        write_file(p, DATA)
        os.setxattr(p, 'user.u', b'1')
        os.setxattr(p, 'trusted.t', b'2')
    setup(work.mnt)
    setup(ref)
    same(lambda d: (sorted(os.listxattr(P(d, 'f'))), outcome(os.getxattr, P(d, 'f'), 'trusted.t')),
         work.mnt, ref, user=users['other'])


def posix_acl(entries):
    """system.posix_acl_access value of ENTRIES [(tag, perm, id)]."""
    return struct.pack('<I', 2) + b''.join(struct.pack('<HHI', *e) for e in entries)


ACL_UNDEFINED_ID = 0xffffffff
ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_MASK, ACL_OTHER = 0x01, 0x02, 0x04, 0x10, 0x20


def test_acl_deny_enforced(work, ref, users):
    """A 0644 file whose ACL gives the 'other' caller (nobody) no access by
    a named-user entry: that caller cannot read it, as on the plain
    directory."""
    nobody = ids(users['other'])[0]
    acl = posix_acl([(ACL_USER_OBJ, 6, ACL_UNDEFINED_ID), (ACL_USER, 0, nobody),
                     (ACL_GROUP_OBJ, 4, ACL_UNDEFINED_ID), (ACL_MASK, 4, ACL_UNDEFINED_ID),
                     (ACL_OTHER, 4, ACL_UNDEFINED_ID)])
    for d in (work.back, ref):
        write_file(P(d, 'f'), DATA)
        os.chmod(P(d, 'f'), 0o644)
        os.setxattr(P(d, 'f'), 'system.posix_acl_access', acl)
    assert outcome_as(users['other'], read_file, P(ref, 'f')) == ('err', 'EACCES')
    same(lambda d: read_file(P(d, 'f')), work.mnt, ref, user=users['other'])


def test_acl_set_through_mount(work, ref, users):
    """The owner sets an access ACL through the mount: it reads back as set,
    the mode shows its mask, the named user it denies is refused and the
    group it grants more than the mode gets in, all as on the plain
    directory; removing it restores the mode's rules."""
    owner, group, other = users['owner'], users['group'], users['other']
    nobody = ids(other)[0]
    acl = posix_acl([(ACL_USER_OBJ, 6, ACL_UNDEFINED_ID), (ACL_USER, 0, nobody),
                     (ACL_GROUP_OBJ, 4, ACL_UNDEFINED_ID), (ACL_MASK, 6, ACL_UNDEFINED_ID),
                     (ACL_OTHER, 4, ACL_UNDEFINED_ID)])
    for d in (work.mnt, ref):
        write_file(P(d, 'f'), DATA)
        os.chown(P(d, 'f'), ids(owner)[0], sec_gid())
        os.chmod(P(d, 'f'), 0o604)

    def set_acl(d):
        os.setxattr(P(d, 'f'), 'system.posix_acl_access', acl)
        return os.getxattr(P(d, 'f'), 'system.posix_acl_access'), \
            oct(os.stat(P(d, 'f')).st_mode)
    assert same(set_acl, work.mnt, ref, user=owner)[0] == 'ok'
    assert os.getxattr(P(work.back, 'f'), 'system.posix_acl_access') == acl
    assert same(lambda d: read_file(P(d, 'f')), work.mnt, ref, user=other) == \
        ('err', 'EACCES')
    same(lambda d: write_file(P(d, 'f'), b'g'), work.mnt, ref, user=group)
    same(lambda d: os.removexattr(P(d, 'f'), 'system.posix_acl_access'),
         work.mnt, ref, user=owner)
    assert same(lambda d: read_file(P(d, 'f')), work.mnt, ref, user=other)[0] == 'ok'


@pytest.mark.parametrize('default_acl', [False, True], ids=['umask', 'default_acl'])
def test_new_name_mode_umask_or_default_acl(work, ref, users, default_acl):
    """Files, directories, fifos made through the mount by a caller with
    umask 027 get the modes and ACLs ext4 gives: the umask where the parent
    has no default ACL, the default ACL (and not the umask) where it has."""
    owner = users['owner']
    dacl = posix_acl([(ACL_USER_OBJ, 7, ACL_UNDEFINED_ID), (ACL_GROUP_OBJ, 7, ACL_UNDEFINED_ID),
                      (ACL_MASK, 7, ACL_UNDEFINED_ID), (ACL_OTHER, 5, ACL_UNDEFINED_ID)])
    for d in (work.mnt, ref):
        os.mkdir(P(d, 'd'), 0o777)
        os.chown(P(d, 'd'), ids(owner)[0], -1)
        if default_acl:
            os.setxattr(P(d, 'd'), 'system.posix_acl_default', dacl)

    def make(d):
        os.umask(0o027)
        out = []
        fd = os.open(P(d, 'd', 'f'), os.O_CREAT | os.O_WRONLY, 0o666)
        os.close(fd)
        os.mkdir(P(d, 'd', 'sub'), 0o777)
        os.mkfifo(P(d, 'd', 'fifo'), 0o666)
        for n in ('f', 'sub', 'fifo'):
            try:
                acl = os.getxattr(P(d, 'd', n), 'system.posix_acl_access')
            except OSError as e:
                acl = errno.errorcode[e.errno]
            out.append((n, oct(os.stat(P(d, 'd', n)).st_mode), acl))
        return out
    got = same(make, work.mnt, ref, user=owner)
    assert got[0] == 'ok'
    modes = [m for _, m, _ in got[1]]
    assert modes == (['0o100664', '0o40775', '0o10664'] if default_acl else
                     ['0o100640', '0o40750', '0o10640']), got


# --------------------------------------------------------------------------
# symlinks in BACKING pointing outside it


class Jail:
    """root/backing (BACKING), root/outside (what must stay untouched),
    root/jail/mnt (the mount) and root/jail/ref (the plain directory)."""

    def __init__(self, root):
        self.root = root
        self.backing = P(root, 'backing')
        self.outside = P(root, 'outside')
        self.jail = P(root, 'jail')
        self.mnt = P(self.jail, 'mnt')
        self.ref = P(self.jail, 'ref')

    def outside_state(self):
        """Everything of root but BACKING, the mount and the plain directory."""
        return snapshot(self.root, skip=(self.backing, self.mnt, self.ref))

    def run(self, fn, *args):
        """FN(*ARGS) as root in a child chrooted into the jail (so paths are
        /mnt/..., /ref/...); its result."""
        def chrooted():
            os.chroot(self.jail)
            os.chdir('/')
            return fn(*args)
        return run_as(None, chrooted)


@pytest.fixture(scope='module')
def jail():
    """A root mount (attr_timeout=0: every path walk looks up again, so
    swaps on the backing side are seen at once) over root/backing on
    root/jail/mnt, and the outside tree: a file with an xattr and a fixed
    mtime, a directory with a file in it."""
    root = tempfile.mkdtemp(prefix='foliofs-sec-')
    os.chmod(root, 0o755)
    j = Jail(root)
    for d in (j.backing, j.outside, j.jail, j.mnt, j.ref):
        os.mkdir(d, 0o755)
    secret = P(j.outside, 'secret')
    write_file(secret, b'secret\n')
    os.chmod(secret, 0o640)
    os.setxattr(secret, 'user.secret', b's')
    os.setxattr(secret, 'trusted.secret', b't')
    os.mkdir(P(j.outside, 'sdir'), 0o750)
    write_file(P(j.outside, 'sdir', 'inner'), b'inner\n')
    for p in (secret, P(j.outside, 'sdir', 'inner'), P(j.outside, 'sdir')):
        os.utime(p, ns=(10**18, 10**18))
    m = Mount(j.backing, j.mnt, options=['attr_timeout=0'])
    try:
        with m:
            yield j
            assert m.proc.poll() is None, m.output()
    finally:
        m.cleanup()
        if not util.is_fuse_mounted(j.mnt):
            shutil.rmtree(root, ignore_errors=True)


def link_targets(j):
    """{kind: target}: absolute and relative, to a file and to a directory
    outside BACKING, and '../..' (BACKING's parent).  Relative ones are
    relative to BACKING/<test>."""
    return {'abs_file': P(j.outside, 'secret'), 'rel_file': '../../outside/secret',
            'abs_dir': P(j.outside, 'sdir'), 'rel_dir': '../../outside/sdir',
            'up': '../..'}


_libc = ctypes.CDLL(None, use_errno=True)
SYS_fchmodat2 = 452
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100


def lchmod(p, mode):
    """fchmodat2(AT_SYMLINK_NOFOLLOW): Python has no lchmod on Linux."""
    if _libc.syscall(SYS_fchmodat2, AT_FDCWD, os.fsencode(p), mode, AT_SYMLINK_NOFOLLOW) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), p)


def _lst(p):
    st = os.lstat(p)
    return (stat.S_IFMT(st.st_mode), st.st_size, st.st_uid, st.st_gid)


def _rename_over(p):
    write_file(p + '.src', b'new\n')
    os.rename(p + '.src', p)


# What is done to (or through) each planted link.  The kernel itself
# follows the link for the ops after "followed", in the caller's root; on
# the plain directory and the mount alike that ends in the jail (ENOENT, or
# the jail's root for 'up'), so these check that the daemon does not follow
# it instead.
LINK_OPS = {
    'lstat': _lst,
    'readlink': os.readlink,
    'lchown': lambda p: os.chown(p, 1, 1, follow_symlinks=False),
    'lutime': lambda p: os.utime(p, (1000, 2000), follow_symlinks=False),
    'lchmod': lambda p: lchmod(p, 0o600),
    'lsetxattr': lambda p: os.setxattr(p, 'user.x', b'1', follow_symlinks=False),
    'lgetxattr': lambda p: os.getxattr(p, 'user.secret', follow_symlinks=False),
    'llistxattr': lambda p: sorted(os.listxattr(p, follow_symlinks=False)),
    'lremovexattr': lambda p: os.removexattr(p, 'user.secret', follow_symlinks=False),
    'link': lambda p: os.link(p, p + '.hard', follow_symlinks=False),
    'unlink': os.unlink,
    'rename': lambda p: os.rename(p, p + '.moved'),
    'rename_over': _rename_over,
    'rmdir': os.rmdir,
    'mkdir_over': os.mkdir,
    'symlink_over': lambda p: os.symlink('x', p),
    'open_nofollow': lambda p: os.open(p, os.O_RDONLY | os.O_NOFOLLOW),
    'creat_excl': lambda p: os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL),
    # followed
    'stat': lambda p: stat.S_IFMT(os.stat(p).st_mode),
    'open': read_file,
    'list': lambda p: sorted(os.listdir(p)),
    'getxattr': lambda p: os.getxattr(p, 'user.secret'),
    'listxattr': lambda p: sorted(os.listxattr(p)),
    'open_trunc': lambda p: os.close(os.open(p, os.O_WRONLY | os.O_TRUNC)),
    'creat': lambda p: os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)),
    'truncate': lambda p: os.truncate(p, 0),
    'link_follow': lambda p: os.link(p, p + '.hard', follow_symlinks=True),
    'create_under': lambda p: write_file(P(p, 'new'), b'x'),
    'mkdir_under': lambda p: os.mkdir(P(p, 'newdir')),
    'chmod': lambda p: os.chmod(p, 0o600),
    'chown': lambda p: os.chown(p, 1, 1),
    'utime': lambda p: os.utime(p, (1000, 2000)),
    'setxattr': lambda p: os.setxattr(p, 'user.x', b'1'),
}

# Followed ops that would change the jail's root through 'up' (the kernel
# doing so is right, but it would be the test changing its own jail).
CHANGES_UP = ('create_under', 'mkdir_under', 'chmod', 'chown', 'utime', 'setxattr')


def link_cases(j):
    return [(kind, op) for kind in link_targets(j) for op in LINK_OPS
            if not (kind == 'up' and op in CHANGES_UP)]


def run_link_ops(d, cases):
    return [((kind, op), outcome(LINK_OPS[op], P(d, '%s.%s' % (kind, op))))
            for kind, op in cases]


def link_tree(d):
    """Entries of D as lstat sees them, and whether the explicit mtime was
    set (lutime)."""
    return {n: _lst(P(d, n)) + (os.lstat(P(d, n)).st_mtime == 2000,)
            for n in sorted(os.listdir(d))}


def test_planted_symlinks(jail):
    """Every operation on and through the planted links gives what it gives
    on the plain directory, leaves the same entries in BACKING, and changes
    nothing outside."""
    j = jail
    back, ref = P(j.backing, 'links'), P(j.ref, 'links')
    os.mkdir(back)
    os.mkdir(ref)
    cases = link_cases(j)
    for d in (back, ref):
        for kind, op in cases:
            os.symlink(link_targets(j)[kind], P(d, '%s.%s' % (kind, op)))
    before = j.outside_state()
    got_m = j.run(run_link_ops, '/mnt/links', cases)
    got_r = j.run(run_link_ops, '/ref/links', cases)
    assert got_m == got_r, util.describe_diff(('ok', got_m), ('ok', got_r))
    for n in os.listdir(back):
        util.sync_path(P(j.mnt, 'links', n))
    assert link_tree(back) == link_tree(ref)
    assert j.outside_state() == before
    # Not vacuous: the links were there and were followed into the jail.
    cells = dict(got_m)
    assert cells[('abs_file', 'readlink')] == ('ok', P(j.outside, 'secret'))
    assert cells[('rel_dir', 'create_under')] == ('err', 'ENOENT')
    assert cells[('abs_file', 'lchown')] == ('ok', None)
    assert cells[('up', 'lgetxattr')] == ('err', 'ENODATA')


def race_worker(seconds, limit):
    """In the jail: lookups, creates, writes and attribute changes under
    /mnt/race/sub and on /mnt/race/f while the backing side swaps each with
    a symlink to outside.  Runs at least SECONDS and until both states of
    'sub' were met (at most LIMIT seconds); returns counts of results."""
    d = '/mnt/race'
    counts = {}

    def count(key, fn, *args):
        r = outcome(fn, *args)
        k = '%s:%s' % (key, r[1] if r[0] == 'err' else 'ok')
        counts[k] = counts.get(k, 0) + 1
        return r

    held = None
    start = time.monotonic()
    i = 0
    while True:
        elapsed = time.monotonic() - start
        seen_both = counts.get('sub:ok') and counts.get('sub:ENOENT')
        if elapsed > limit or (elapsed > seconds and seen_both):
            break
        i += 1
        # 'sub' is a directory or a link whose target the jail lacks.
        if count('sub', lambda: stat.S_IFMT(os.stat(P(d, 'sub')).st_mode))[0] == 'ok' \
                and held is None:
            held = outcome(os.open, P(d, 'sub'), os.O_RDONLY | os.O_DIRECTORY)[1]
            if not isinstance(held, int):
                held = None
        count('lookup', os.stat, P(d, 'sub', 'inner'))
        count('create', write_file, P(d, 'sub', 'new-%d' % i), b'new\n')
        count('mkdir', os.mkdir, P(d, 'sub', 'dir-%d' % i))
        count('rename', os.rename, P(d, 'sub', 'new-%d' % i), P(d, 'sub', 'ren-%d' % i))
        count('unlink', os.unlink, P(d, 'sub', 'ren-%d' % i))
        count('chmod_dir', os.chmod, P(d, 'sub'), 0o700)
        count('xattr_dir', os.setxattr, P(d, 'sub'), 'user.r', b'1')
        if held is not None:
            count('held_create', lambda: os.close(os.open('held-%d' % i,
                                                          os.O_CREAT | os.O_WRONLY, 0o644,
                                                          dir_fd=held)))
        count('append', write_file, P(d, 'f'), b'a', 'ab')
        count('trunc', os.truncate, P(d, 'f'), 0)
        count('chmod', os.chmod, P(d, 'f'), 0o600)
        count('xattr', os.setxattr, P(d, 'f'), 'user.r', b'1')
        count('utime', os.utime, P(d, 'f'), (1000, 2000))
        count('lstat', os.lstat, P(d, 'alt'))
    return counts


@pytest.mark.timeout(60)
def test_symlink_swap_race(jail):
    """A thread keeps exchanging BACKING/race/sub (a directory) with
    BACKING/race/alt (a symlink to a directory outside), and race/f with
    race/falt (a symlink to a file outside), while a chrooted caller
    works through the mount; afterwards nothing outside was created or
    changed, and the daemon is still serving."""
    j = jail
    r = P(j.backing, 'race')
    os.mkdir(r)
    os.mkdir(P(r, 'sub'))
    write_file(P(r, 'sub', 'inner'), b'inner\n')
    write_file(P(r, 'f'), DATA)
    os.symlink(P(j.outside, 'sdir'), P(r, 'alt'))
    os.symlink(P(j.outside, 'secret'), P(r, 'falt'))
    before = j.outside_state()
    stop = threading.Event()
    swaps = [0]

    def swapper():
        while not stop.is_set():
            renameat2(P(r, 'sub'), P(r, 'alt'), RENAME_EXCHANGE)
            renameat2(P(r, 'f'), P(r, 'falt'), RENAME_EXCHANGE)
            swaps[0] += 1

    t = threading.Thread(target=swapper)
    t.start()
    try:
        counts = j.run(race_worker, 3, 30)
    finally:
        stop.set()
        t.join()
    assert j.outside_state() == before, counts
    assert counts.get('sub:ok') and counts.get('sub:ENOENT'), counts
    assert swaps[0] > 0 and counts.get('create:ok'), (swaps, counts)
    assert not any(k.endswith(':ENOTCONN') for k in counts), counts
    # Every directory made through the mount is in the real one, in BACKING.
    real = P(r, 'alt') if os.path.islink(P(r, 'sub')) else P(r, 'sub')
    made = [n for n in os.listdir(real) if n.startswith(('dir-', 'held-'))]
    assert len(made) == counts.get('mkdir:ok', 0) + counts.get('held_create:ok', 0), counts


# --------------------------------------------------------------------------
# control files: only the mounting user changes settings


def ctl_state(mnt):
    """Every tunable's value and the fault switch, read by the caller."""
    tun = P(mnt, '.foliofs', 'tunables')
    out = {n: read_file(P(tun, n)) for n in sorted(os.listdir(tun))}
    out['fault'] = read_file(P(mnt, '.foliofs', 'fault'))
    return out


def ctl_value(name):
    """A valid value for the control file NAME other than its default."""
    for suffix, value in (('_bytes', '16M'), ('_ratio', '1'), ('_ms', '1000')):
        if name.endswith(suffix):
            return value
    return {'fault': 'write:EIO', 'dirty_account': 'folio', 'throttle': 'none',
            'ra_model': '6.16'}[name]


def ctl_attempts(mnt):
    """Every way to change a writable control file: [((file, how), outcome)]."""
    ctl = P(mnt, '.foliofs')
    files = ['fault'] + ['tunables/' + n for n in sorted(os.listdir(P(ctl, 'tunables')))]
    ways = {
        'write': lambda f: util.ctl_write(mnt, f, value=ctl_value(os.path.basename(f))),
        'rdwr': lambda f: os.close(os.open(P(ctl, f), os.O_RDWR)),
        'trunc': lambda f: os.close(os.open(P(ctl, f), os.O_WRONLY | os.O_TRUNC)),
        'truncate': lambda f: os.truncate(P(ctl, f), 0),
        'chmod': lambda f: os.chmod(P(ctl, f), 0o666),
        'chown': lambda f: os.chown(P(ctl, f), os.getuid(), -1),
        'touch': lambda f: os.utime(P(ctl, f), None),
        'setxattr': lambda f: os.setxattr(P(ctl, f), 'user.x', b'1'),
        'unlink': lambda f: os.unlink(P(ctl, f)),
    }
    return [((f, how), outcome(fn, f)) for f in files for how, fn in ways.items()]


def test_ctl_only_mounting_user(dirs, users):
    """A mount by the test user with allow_other: the second user may read
    tunables, fault and stats and write sync (as anyone may sync), but every
    attempt to change a tunable or the fault switch fails with EACCES (EPERM
    for chmod and chown) and changes nothing; the mounting user and root may
    set them; nobody may make them writable to others."""
    root, b, mnt = dirs
    owner, other = users['owner'], users['group']
    uid, gid = ids(owner)
    for p in (b, mnt):
        os.chown(p, uid, gid)
    m = Mount(b, mnt, options=['allow_other'], user=owner)
    try:
        with user_allow_other():
            m.start()
            m.wait_for_mount()
        run_as(owner, set_fault, mnt, 'write:EIO:file=no-such-file')
        before = run_as(owner, ctl_state, mnt)
        got = run_as(other, ctl_attempts, mnt)
        want = {'chmod': 'EPERM', 'chown': 'EPERM', 'unlink': 'EACCES'}
        bad = [(k, r) for k, r in got if r != ('err', want.get(k[1], 'EACCES'))]
        assert not bad, bad
        assert run_as(owner, ctl_state, mnt) == before
        assert run_as(other, ctl_state, mnt) == before
        assert outcome_as(other, util.stats, mnt)[0] == 'ok'
        assert outcome_as(other, read_file, P(mnt, '.foliofs', 'files')) == ('err', 'EACCES')
        assert outcome_as(other, util.ctl_write, mnt, 'sync', value='1') == ('ok', None)
        assert run_as(owner, ctl_state, mnt) == before
        # The mounting user may not widen the mode either.
        assert outcome_as(owner, os.chmod, P(mnt, '.foliofs', 'fault'), 0o666) == \
            ('err', 'EPERM')
        assert outcome_as(other, set_fault, mnt, 'off') == ('err', 'EACCES')
        # The mounting user and root may.
        run_as(owner, set_tunable, mnt, 'dirty_ratio', '33')
        run_as(owner, set_fault, mnt, 'off')
        set_tunable(mnt, 'dirty_background_ratio', '7')
        after = run_as(owner, ctl_state, mnt)
        assert (after['dirty_ratio'], after['dirty_background_ratio'], after['fault']) == \
            (b'33\n', b'7\n', b'off\n')
        assert get_fault(mnt) == 'off'
        m.umount()
    finally:
        m.cleanup()
