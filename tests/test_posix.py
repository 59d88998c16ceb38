"""POSIX conformance: error codes and metadata semantics against ext4 (issue 10).

One table, CASES, of small cases; one function, test_posix, checks them.  A
case prepares the same objects (as root) in a fresh directory of the mount
(root daemon, -o allow_other) and in a plain directory on the backing's own
filesystem (ext4), runs the same call there as the given caller, and
compares what the call returned (result or errno) and what it left (the
observation the case returns) between the two; where a case pins the plain
directory's answer (want), that is checked too, so a case cannot pass by
both sides being wrong alike.

Rows: sticky directories (unlink and rename by the file's owner, the
directory's owner, another user, root); setgid directories (group and
setgid bit of what a member and a non-member create); O_CREAT and O_EXCL
on existing names, dangling symlinks and directories; ENAMETOOLONG at
255/256 bytes; path components through a regular file; link counts;
which of atime, mtime, ctime of a file and of its directory each call
changes; rename over existing names and directories; rmdir; fifos;
readdir after changes.  Cases test_namespace.py, test_security.py and
test_killpriv.py already hold are not repeated.

Timestamps are compared as "changed or not", without sleeping: the case
sets old atime and mtime with utimensat, then waits for the coarse clock
(the one ext4 and the daemon stamp with) to pass every ctime it has seen,
so that any update the call makes is visible as a change.

A difference inherent to FUSE or to foliofs is a case's `known` (KNOWN):
what foliofs gives instead, and why, per mount mode; the test checks that
foliofs gives exactly that, so a change either way shows.  doc/admin.md
lists them.  A defect would be an xfail(strict=True) case naming its cause.
"""

import collections
import os
import pwd
import stat
import time

import pytest

import util
from util import (RENAME_EXCHANGE, RENAME_NOREPLACE, UTIME_NOW, UTIME_OMIT, Dir, fsync_path,
                  outcome, renameat2, run_as, utimensat, write_file)

# Every test here runs with umask 022 (an autouse fixture of util).
umask_022 = util.umask_022

P = os.path.join
DATA = b'data\n'
CLOCK_REALTIME_COARSE = 5   # Linux; the time module does not name it
OLD = (1_000_000_000, 0)    # atime and mtime set before a timestamp case
DT_DIR, DT_REG, DT_LNK = 4, 8, 10

# setup(d): as root, in the fresh directory D.  op(d): as WHO (a role of
# conftest's users fixture), returns what is compared.  want: what the
# plain directory must give, the whole observation, or its first items
# when want is a tuple.  known: {'direct', 'writethrough' or 'kernel_cache':
# ('differs', what foliofs gives, why)}, a documented difference under that
# mode.
Case = collections.namedtuple('Case', 'setup op who want known',
                              defaults=('root', None, {}))


MODES = {'direct': [], 'writethrough': ['cache=writethrough'], 'kernel_cache': ['kernel_cache']}


@pytest.fixture(scope='module', params=sorted(MODES))
def ffs_options(request):
    """With direct I/O; with the kernel keeping clean pages while every
    write reaches the daemon (writethrough); and with the kernel's
    writeback cache, where the kernel itself keeps a file's size and times
    while it is cached."""
    return MODES[request.param]


def uid_of(user):
    return 0 if user is None else pwd.getpwnam(user).pw_uid


def mode(p):
    st = os.lstat(p)
    return (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))


def listing(d):
    return sorted(os.listdir(d))


def creat(p, flags=0, m=0o644):
    os.close(os.open(p, os.O_WRONLY | os.O_CREAT | flags, m))


def excl(p):
    creat(p, os.O_EXCL)


# --------------------------------------------------------------------------
# sticky directories: d/s is 1777 and the directory owner's ('group' role);
# s/f is the file owner's ('owner' role); s/mine is the caller's.


def sticky_setup(d, roles):
    s = P(d, 's')
    os.mkdir(s)
    write_file(P(s, 'f'), DATA)
    os.chown(P(s, 'f'), uid_of(roles['owner']), -1)
    os.chown(s, uid_of(roles['group']), -1)
    os.chmod(s, 0o1777)


def sticky_op(call):
    def op(d):
        s = P(d, 's')
        write_file(P(s, 'mine'), b'mine')   # as the caller
        r = outcome({'unlink': lambda: os.unlink(P(s, 'f')),
                     'rename': lambda: os.rename(P(s, 'f'), P(s, 'g')),
                     'rename_over': lambda: os.rename(P(s, 'mine'), P(s, 'f'))}[call])
        return (r, listing(s))
    return op


# --------------------------------------------------------------------------
# setgid directories: d/sg is 2777, root's, of the test group (tgroup).


def sgid_setup(d, gid):
    os.mkdir(P(d, 'sg'))
    os.chown(P(d, 'sg'), 0, gid)
    os.chmod(P(d, 'sg'), 0o2777)


def sgid_op(make):
    """Group (as 'tgroup' or 'other') and mode of what MAKE creates in d/sg
    as the caller, with umask 0."""
    def op(d):
        os.umask(0)
        p = P(d, 'sg', 'new')
        make(d, p)
        st = os.lstat(p)
        return (stat.S_IMODE(st.st_mode),
                'tgroup' if st.st_gid == os.stat(P(d, 'sg')).st_gid else 'other')
    return op


# What each call creates in d/sg, and the (mode, group) ext4 gives it when
# made by a member of the directory's group and by a non-member.
SGID_MAKES = {
    'mkdir': (lambda d, p: os.mkdir(p, 0o755),        # S_ISGID not asked: inherited
              (0o2755, 'tgroup'), (0o2755, 'tgroup')),
    'mkdir_sgid': (lambda d, p: os.mkdir(p, 0o2755), (0o2755, 'tgroup'), (0o2755, 'tgroup')),
    'mkfifo': (lambda d, p: os.mkfifo(p, 0o2770), (0o2770, 'tgroup'), (0o770, 'tgroup')),
    'symlink': (lambda d, p: os.symlink('x', p), (0o777, 'tgroup'), (0o777, 'tgroup')),
    'rename_in': (lambda d, p: (write_file(P(d, 'outside'), b''),
                                os.rename(P(d, 'outside'), p)),
                  (0o666, 'other'), (0o666, 'other')),
}


# --------------------------------------------------------------------------
# link counts


def nlinks(d, *names):
    return [os.lstat(P(d, n)).st_nlink for n in names]


def nlink_setup(d):
    os.makedirs(P(d, 'a', 'x', 'y'))
    os.mkdir(P(d, 'b'))
    os.mkdir(P(d, 'b', 'e'))
    write_file(P(d, 'a', 'f'), DATA)


NLINK_OPS = {
    'link': lambda d: os.link(P(d, 'a', 'f'), P(d, 'b', 'f2')),
    'link_unlink': lambda d: (os.link(P(d, 'a', 'f'), P(d, 'b', 'f2')),
                              os.unlink(P(d, 'a', 'f'))),
    'mkdir': lambda d: os.mkdir(P(d, 'a', 'new')),
    'rmdir': lambda d: os.rmdir(P(d, 'a', 'x', 'y')),
    'rename_dir_across': lambda d: os.rename(P(d, 'a', 'x'), P(d, 'b', 'x')),
    'rename_dir_over_empty': lambda d: os.rename(P(d, 'a', 'x'), P(d, 'b', 'e')),
    'rename_dir_within': lambda d: os.rename(P(d, 'a', 'x'), P(d, 'a', 'z')),
    'exchange_dir_file': lambda d: renameat2(P(d, 'a', 'x'), P(d, 'a', 'f'), RENAME_EXCHANGE),
    'exchange_dirs_across': lambda d: renameat2(P(d, 'a', 'x'), P(d, 'b', 'e'),
                                                RENAME_EXCHANGE),
}


def nlink_op(call):
    def op(d):
        r = outcome(NLINK_OPS[call], d)
        found = [n for n in ('a', 'b', 'a/f', 'b/f2', 'a/x', 'a/z', 'b/x', 'b/e', 'a/new')
                 if os.path.lexists(P(d, n))]
        return ('ok' if r[0] == 'ok' else r[1], list(zip(found, nlinks(d, *found))))
    return op


def nlink_open_unlinked(d):
    """Link count of an open file after its last name goes: 0."""
    fd = os.open(P(d, 'a', 'f'), os.O_RDONLY)
    try:
        os.unlink(P(d, 'a', 'f'))
        return os.fstat(fd).st_nlink
    finally:
        os.close(fd)


# --------------------------------------------------------------------------
# timestamps: d/p (a directory) holds f (DATA, an xattr), h (DATA) and sub
# (a directory); d/q is a second directory, with q/alias a second name of
# p/f (so that f's inode outlives its unlink and can be watched).


TIMED = ('p', 'q', 'p/f')


def times_setup(d):
    os.mkdir(P(d, 'p'))
    os.mkdir(P(d, 'q'))
    os.mkdir(P(d, 'p', 'sub'))
    write_file(P(d, 'p', 'f'), DATA)
    write_file(P(d, 'p', 'h'), DATA)
    os.link(P(d, 'p', 'f'), P(d, 'q', 'alias'))
    os.setxattr(P(d, 'p', 'f'), 'user.old', b'1')
    for n in ('p/sub', 'p/h') + TIMED:
        utimensat(P(d, n), OLD, OLD)


def _wait_clock_past(ns):
    """Spin (no sleep) until the coarse clock is past NS: a timestamp the
    next call sets then differs from every one taken before."""
    while time.clock_gettime_ns(CLOCK_REALTIME_COARSE) <= ns:
        pass


def write_close(p, data=b'x', flags=os.O_WRONLY):
    fd = os.open(p, flags)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_close(p):
    fd = os.open(p, os.O_RDONLY)
    try:
        return os.read(fd, 100)
    finally:
        os.close(fd)


# Each call, and which times ext4 changes ('a', 'm', 'c') of p, of q and of
# the inode first named p/f (relatime: the old atime is older than a day).
TIME_OPS = {
    'read': (lambda d: read_close(P(d, 'p', 'f')), ('', '', 'a')),
    'readdir': (lambda d: listing(P(d, 'p')), ('a', '', '')),
    'write': (lambda d: write_close(P(d, 'p', 'f')), ('', '', 'mc')),
    'write_empty': (lambda d: write_close(P(d, 'p', 'f'), b''), ('', '', '')),
    'fsync': (lambda d: fsync_path(P(d, 'p', 'f')), ('', '', '')),
    'truncate': (lambda d: os.truncate(P(d, 'p', 'f'), 2), ('', '', 'mc')),
    'truncate_same_size': (lambda d: os.truncate(P(d, 'p', 'f'), len(DATA)), ('', '', 'mc')),
    'open_trunc': (lambda d: os.close(os.open(P(d, 'p', 'f'), os.O_WRONLY | os.O_TRUNC)),
                   ('', '', 'mc')),
    'chmod': (lambda d: os.chmod(P(d, 'p', 'f'), 0o600), ('', '', 'c')),
    'chown_same': (lambda d: os.chown(P(d, 'p', 'f'), 0, 0), ('', '', 'c')),
    'link': (lambda d: os.link(P(d, 'p', 'f'), P(d, 'p', 'g')), ('mc', '', 'c')),
    'link_across': (lambda d: os.link(P(d, 'p', 'f'), P(d, 'q', 'g')), ('', 'mc', 'c')),
    'unlink': (lambda d: os.unlink(P(d, 'p', 'f')), ('mc', '', 'c')),
    'rename_within': (lambda d: os.rename(P(d, 'p', 'f'), P(d, 'p', 'f2')), ('mc', '', 'c')),
    'rename_across': (lambda d: os.rename(P(d, 'p', 'f'), P(d, 'q', 'f')), ('mc', 'mc', 'c')),
    'rename_over': (lambda d: os.rename(P(d, 'p', 'h'), P(d, 'p', 'f')), ('mc', '', 'c')),
    'utime_now_omit': (lambda d: utimensat(P(d, 'p', 'f'), UTIME_NOW, UTIME_OMIT),
                       ('', '', 'ac')),
    'utime_omit_now': (lambda d: utimensat(P(d, 'p', 'f'), UTIME_OMIT, UTIME_NOW),
                       ('', '', 'mc')),
    'utime_omit_omit': (lambda d: utimensat(P(d, 'p', 'f'), UTIME_OMIT, UTIME_OMIT),
                        ('', '', '')),
    'setxattr': (lambda d: os.setxattr(P(d, 'p', 'f'), 'user.new', b'v'), ('', '', 'c')),
    'removexattr': (lambda d: os.removexattr(P(d, 'p', 'f'), 'user.old'), ('', '', 'c')),
    'create': (lambda d: creat(P(d, 'p', 'new')), ('mc', '', '')),
    'mkdir': (lambda d: os.mkdir(P(d, 'p', 'new')), ('mc', '', '')),
    'rmdir': (lambda d: os.rmdir(P(d, 'p', 'sub')), ('mc', '', '')),
    'symlink': (lambda d: os.symlink('f', P(d, 'p', 'new')), ('mc', '', '')),
    'mkfifo': (lambda d: os.mkfifo(P(d, 'p', 'new')), ('mc', '', '')),
}


def times_op(call):
    """CALL's result ('ok' or the errno's name), then which of atime, mtime
    and ctime it changed of each of TIMED; for p/f, of the inode first
    named so, wherever it is now."""
    def op(d):
        ino = os.stat(P(d, 'p', 'f')).st_ino
        before = {n: os.stat(P(d, n)) for n in TIMED}
        _wait_clock_past(max(st.st_ctime_ns for st in before.values()))
        r = outcome(TIME_OPS[call][0], d)
        after = {n: os.stat(P(d, n)) for n in ('p', 'q')}
        names = [n for n in ('p/f', 'p/f2', 'q/f', 'q/alias') if os.path.exists(P(d, n))]
        after['p/f'] = next(st for st in map(os.stat, (P(d, n) for n in names))
                            if st.st_ino == ino)
        fields = (('a', 'st_atime_ns'), ('m', 'st_mtime_ns'), ('c', 'st_ctime_ns'))
        changed = tuple(''.join(k for k, f in fields
                                if getattr(after[n], f) != getattr(before[n], f))
                        for n in TIMED)
        return ('ok' if r[0] == 'ok' else r[1],) + changed
    return op


# --------------------------------------------------------------------------
# the table


def file_and_dir(d):
    write_file(P(d, 'f'), DATA)
    os.mkdir(P(d, 'dir'))
    write_file(P(d, 'dir', 'in'), DATA)
    os.mkdir(P(d, 'empty'))
    os.symlink('target', P(d, 'dangling'))
    os.symlink('f', P(d, 'sym'))
    os.link(P(d, 'f'), P(d, 'alias'))


def on(fn):
    """A case op: fn(d)'s outcome and the listing of d after it."""
    return lambda d: (outcome(fn, d), listing(d))


NAME255, NAME256 = 'n' * 255, 'n' * 256

CASES = {}

for _who in ('owner', 'group', 'other', 'root'):
    for _call in ('unlink', 'rename', 'rename_over'):
        CASES['sticky_%s_by_%s' % (_call, {'group': 'dirowner'}.get(_who, _who))] = Case(
            'sticky', sticky_op(_call), _who,
            (('err', 'EPERM'),) if _who == 'other' else (('ok', None),))

for _make, (_fn, _member, _nonmember) in SGID_MAKES.items():
    # The test user ('owner') is in tgroup; the second user ('group') is not.
    CASES['setgid_%s_by_member' % _make] = Case('sgid', sgid_op(_fn), 'owner', _member)
    CASES['setgid_%s_by_nonmember' % _make] = Case('sgid', sgid_op(_fn), 'group', _nonmember)

CASES.update({
    # O_CREAT, O_EXCL
    'excl_existing': Case(file_and_dir, on(lambda d: excl(P(d, 'f')))),
    'excl_dangling_symlink': Case(file_and_dir, on(lambda d: excl(P(d, 'dangling')))),
    'excl_symlink_to_file': Case(file_and_dir, on(lambda d: excl(P(d, 'sym')))),
    'excl_directory': Case(file_and_dir, on(lambda d: excl(P(d, 'dir')))),
    'excl_trailing_slash': Case(file_and_dir, on(lambda d: excl(P(d, 'new/')))),
    'excl_directory_flag': Case(file_and_dir,
                                on(lambda d: creat(P(d, 'new'), os.O_EXCL | os.O_DIRECTORY))),
    'creat_dangling_symlink': Case(file_and_dir, on(lambda d: creat(P(d, 'dangling')))),
    'creat_dangling_nofollow': Case(file_and_dir,
                                    on(lambda d: creat(P(d, 'dangling'), os.O_NOFOLLOW))),
    'creat_directory': Case(file_and_dir, on(lambda d: creat(P(d, 'dir')))),
    'creat_existing_mode_kept': Case(file_and_dir, lambda d: (creat(P(d, 'f'), m=0o600),
                                                              mode(P(d, 'f'))),
                                     want=(None, (stat.S_IFREG, 0o644))),
    'creat_rdonly_trunc': Case(file_and_dir, lambda d: (
        outcome(lambda: os.close(os.open(P(d, 'f'), os.O_RDONLY | os.O_TRUNC))),
        os.stat(P(d, 'f')).st_size), want=(('ok', None), 0)),
    'tmpfile': Case(file_and_dir, on(lambda d: os.close(
        os.open(d, os.O_TMPFILE | os.O_RDWR, 0o600)))),

    # path components through a regular file, trailing slashes
    'enotdir_stat': Case(file_and_dir, on(lambda d: os.stat(P(d, 'f', 'x')))),
    'enotdir_stat_slash': Case(file_and_dir, on(lambda d: os.stat(P(d, 'f') + '/'))),
    'enotdir_stat_dot': Case(file_and_dir, on(lambda d: os.stat(P(d, 'f', '.')))),
    'enotdir_open_slash': Case(file_and_dir, on(lambda d: read_close(P(d, 'f') + '/'))),
    'enotdir_unlink': Case(file_and_dir, on(lambda d: os.unlink(P(d, 'f', 'x')))),
    'enotdir_unlink_slash': Case(file_and_dir, on(lambda d: os.unlink(P(d, 'f') + '/'))),
    'enotdir_rename_from': Case(file_and_dir, on(lambda d: os.rename(P(d, 'f', 'x'), P(d, 'y')))),
    'enotdir_rename_slash': Case(file_and_dir, on(lambda d: os.rename(P(d, 'f'), P(d, 'g/')))),
    'enotdir_link_into': Case(file_and_dir, on(lambda d: os.link(P(d, 'f'), P(d, 'f', 'x')))),
    'enotdir_mkfifo': Case(file_and_dir, on(lambda d: os.mkfifo(P(d, 'f', 'x')))),
    'enotdir_through_symlink': Case(file_and_dir, on(lambda d: os.stat(P(d, 'sym', 'x')))),
    'enotdir_chdir': Case(file_and_dir, on(lambda d: os.chdir(P(d, 'f')))),

    # rename
    'rename_over_file': Case(file_and_dir, on(lambda d: os.rename(P(d, 'sym'), P(d, 'f')))),
    'rename_over_empty_dir': Case(file_and_dir,
                                  on(lambda d: os.rename(P(d, 'dir'), P(d, 'empty')))),
    'rename_over_nonempty_dir': Case(file_and_dir,
                                     on(lambda d: os.rename(P(d, 'empty'), P(d, 'dir')))),
    'rename_dir_over_file': Case(file_and_dir, on(lambda d: os.rename(P(d, 'empty'), P(d, 'f')))),
    'rename_file_over_dir': Case(file_and_dir, on(lambda d: os.rename(P(d, 'f'), P(d, 'empty')))),
    'rename_onto_itself_file': Case(file_and_dir, on(lambda d: os.rename(P(d, 'f'), P(d, 'f')))),
    'rename_onto_itself_dir': Case(file_and_dir, on(lambda d: os.rename(P(d, 'dir'), P(d, 'dir')))),
    'rename_onto_hard_link': Case(file_and_dir, on(lambda d: os.rename(P(d, 'f'), P(d, 'alias')))),
    'rename_into_own_subdir': Case(file_and_dir,
                                   on(lambda d: os.rename(P(d, 'dir'), P(d, 'dir', 'sub')))),
    'rename_onto_own_parent': Case(file_and_dir,
                                   on(lambda d: os.rename(P(d, 'dir', 'in'), P(d, 'dir', '..')))),
    'rename_dot': Case(file_and_dir, on(lambda d: os.rename(P(d, 'dir', '.'), P(d, 'x')))),
    'rename_over_dot': Case(file_and_dir, on(lambda d: os.rename(P(d, 'empty'), P(d, 'dir', '.')))),
    'rename_dir_slash': Case(file_and_dir, on(lambda d: os.rename(P(d, 'dir') + '/', P(d, 'd2/')))),
    'noreplace_onto_dir': Case(file_and_dir,
                               on(lambda d: renameat2(P(d, 'f'), P(d, 'empty'), RENAME_NOREPLACE))),
    'noreplace_onto_dangling': Case(file_and_dir, on(
        lambda d: renameat2(P(d, 'f'), P(d, 'dangling'), RENAME_NOREPLACE))),
    'exchange_file_dir': Case(file_and_dir, lambda d: (
        outcome(renameat2, P(d, 'f'), P(d, 'dir'), RENAME_EXCHANGE),
        mode(P(d, 'f'))[0] == stat.S_IFDIR, listing(P(d, 'f'))), want=(('ok', None), True, ['in'])),
    'exchange_into_own_subdir': Case(file_and_dir, on(
        lambda d: (os.mkdir(P(d, 'dir', 'sub')),
                   renameat2(P(d, 'dir'), P(d, 'dir', 'sub'), RENAME_EXCHANGE)))),
    'exchange_onto_itself': Case(file_and_dir,
                                 on(lambda d: renameat2(P(d, 'f'), P(d, 'f'), RENAME_EXCHANGE))),
    'exchange_hard_links': Case(file_and_dir, on(
        lambda d: renameat2(P(d, 'f'), P(d, 'alias'), RENAME_EXCHANGE))),
    'bad_rename_flags': Case(file_and_dir, on(lambda d: renameat2(P(d, 'f'), P(d, 'g'), 0x80))),

    # rmdir
    'rmdir_nonempty': Case(file_and_dir, on(lambda d: os.rmdir(P(d, 'dir')))),
    'rmdir_dot': Case(file_and_dir, on(lambda d: os.rmdir(P(d, 'empty', '.')))),
    'rmdir_dotdot': Case(file_and_dir, on(lambda d: os.rmdir(P(d, 'empty', '..')))),
    'rmdir_slash': Case(file_and_dir, on(lambda d: os.rmdir(P(d, 'empty') + '/'))),
    'rmdir_symlink_to_dir': Case(file_and_dir, on(
        lambda d: (os.symlink('empty', P(d, 'ld')), os.rmdir(P(d, 'ld'))))),
    'rmdir_cwd': Case(file_and_dir, on(lambda d: (os.chdir(P(d, 'empty')), os.rmdir(P(d, 'empty')),
                                                   os.listdir('.')))),
    'rmdir_busy_open': Case(file_and_dir, lambda d: (
        os.open(P(d, 'empty'), os.O_RDONLY) >= 0, outcome(os.rmdir, P(d, 'empty')), listing(d)),
        want=(True, ('ok', None))),

    # fifos
    'mkfifo_mode_bits': Case(file_and_dir, lambda d: (os.umask(0), os.mkfifo(P(d, 'p'), 0o7777),
                                                       mode(P(d, 'p')))[2],
                             want=(stat.S_IFIFO, 0o7777)),
    'mknod_fifo_over_symlink': Case(file_and_dir, on(
        lambda d: os.mknod(P(d, 'dangling'), stat.S_IFIFO | 0o644))),
    'mknod_fifo_as_user': Case(lambda d: os.chmod(d, 0o777), lambda d: (
        os.mknod(P(d, 'p'), stat.S_IFIFO | 0o640), os.lstat(P(d, 'p')).st_uid == os.getuid(),
        mode(P(d, 'p'))), who='other', want=(None, True, (stat.S_IFIFO, 0o640))),
    'fifo_rename_unlink': Case(file_and_dir, on(lambda d: (
        os.mkfifo(P(d, 'p')), os.rename(P(d, 'p'), P(d, 'dir', 'p')),
        os.unlink(P(d, 'dir', 'p'))))),
})

for _call, _fn in (('create', lambda d, n: creat(P(d, n))),
                   ('mkdir', lambda d, n: os.mkdir(P(d, n))),
                   ('mkfifo', lambda d, n: os.mkfifo(P(d, n))),
                   ('symlink', lambda d, n: os.symlink('f', P(d, n))),
                   ('link', lambda d, n: os.link(P(d, 'f'), P(d, n))),
                   ('rename_to', lambda d, n: os.rename(P(d, 'f'), P(d, n))),
                   ('rename_from', lambda d, n: os.rename(P(d, n), P(d, 'g'))),
                   ('lookup', lambda d, n: os.stat(P(d, n)).st_size),
                   ('lookup_under', lambda d, n: os.stat(P(d, n, 'x'))),
                   ('unlink', lambda d, n: os.unlink(P(d, n)))):
    for _name in (NAME255, NAME256):
        CASES['name%d_%s' % (len(_name), _call)] = Case(
            lambda d: (file_and_dir(d), write_file(P(d, NAME255), DATA)),
            on(lambda d, fn=_fn, n=_name: fn(d, n)))

# Link counts ext4 gives after each call: (name, st_nlink) of what exists.
NLINK_WANT = {
    'exchange_dir_file': [('a', 3), ('b', 3), ('a/f', 3), ('a/x', 1), ('b/e', 2)],
    'exchange_dirs_across': [('a', 3), ('b', 3), ('a/f', 1), ('a/x', 2), ('b/e', 3)],
    'link': [('a', 3), ('b', 3), ('a/f', 2), ('b/f2', 2), ('a/x', 3), ('b/e', 2)],
    'link_unlink': [('a', 3), ('b', 3), ('b/f2', 1), ('a/x', 3), ('b/e', 2)],
    'mkdir': [('a', 4), ('b', 3), ('a/f', 1), ('a/x', 3), ('b/e', 2), ('a/new', 2)],
    'rename_dir_across': [('a', 2), ('b', 4), ('a/f', 1), ('b/x', 3), ('b/e', 2)],
    'rename_dir_over_empty': [('a', 2), ('b', 3), ('a/f', 1), ('b/e', 3)],
    'rename_dir_within': [('a', 3), ('b', 3), ('a/f', 1), ('a/z', 3), ('b/e', 2)],
    'rmdir': [('a', 3), ('b', 3), ('a/f', 1), ('a/x', 2), ('b/e', 2)],
}
for _call, _want in NLINK_WANT.items():
    CASES['nlink_' + _call] = Case(nlink_setup, nlink_op(_call), want=('ok', _want))
CASES['nlink_open_unlinked'] = Case(nlink_setup, nlink_open_unlinked, want=0)

for _call, (_, _changes) in TIME_OPS.items():
    CASES['times_' + _call] = Case(times_setup, times_op(_call), want=('ok',) + _changes)


def readdir_after_changes(d):
    """A directory stream opened before creates, unlinks and renames in its
    directory: after rewinddir it lists the new state, once each name."""
    with Dir(d) as stream:
        first = sorted(n for n, _ in stream.read_all())
        creat(P(d, 'new'))
        os.mkdir(P(d, 'newdir'))
        os.unlink(P(d, 'f'))
        os.rename(P(d, 'dir'), P(d, 'moved'))
        os.rename(P(d, 'sym'), P(d, 'empty', 'sym'))
        stream.rewind()
        return first, sorted(stream.read_all())


CASES['readdir_after_changes'] = Case(file_and_dir, readdir_after_changes, want=(
    ['.', '..', 'alias', 'dangling', 'dir', 'empty', 'f', 'sym'],
    [('.', DT_DIR), ('..', DT_DIR), ('alias', DT_REG), ('dangling', DT_LNK), ('empty', DT_DIR),
     ('moved', DT_DIR), ('new', DT_REG), ('newdir', DT_DIR)]))

# What ext4 answers to the call of each case made with on().
CALL_WANT = {
    'bad_rename_flags': ('err', 'EINVAL'),
    'creat_dangling_nofollow': ('err', 'ELOOP'),
    'creat_dangling_symlink': ('ok', None),
    'creat_directory': ('err', 'EISDIR'),
    'enotdir_chdir': ('err', 'ENOTDIR'),
    'enotdir_link_into': ('err', 'ENOTDIR'),
    'enotdir_mkfifo': ('err', 'ENOTDIR'),
    'enotdir_open_slash': ('err', 'ENOTDIR'),
    'enotdir_rename_from': ('err', 'ENOTDIR'),
    'enotdir_rename_slash': ('err', 'ENOTDIR'),
    'enotdir_stat': ('err', 'ENOTDIR'),
    'enotdir_stat_dot': ('err', 'ENOTDIR'),
    'enotdir_stat_slash': ('err', 'ENOTDIR'),
    'enotdir_through_symlink': ('err', 'ENOTDIR'),
    'enotdir_unlink': ('err', 'ENOTDIR'),
    'enotdir_unlink_slash': ('err', 'ENOTDIR'),
    'exchange_hard_links': ('ok', None),
    'exchange_into_own_subdir': ('err', 'EINVAL'),
    'exchange_onto_itself': ('ok', None),
    'excl_dangling_symlink': ('err', 'EEXIST'),
    'excl_directory': ('err', 'EEXIST'),
    'excl_directory_flag': ('err', 'EINVAL'),
    'excl_existing': ('err', 'EEXIST'),
    'excl_symlink_to_file': ('err', 'EEXIST'),
    'excl_trailing_slash': ('err', 'EISDIR'),
    'fifo_rename_unlink': ('ok', (None, None, None)),
    'mknod_fifo_over_symlink': ('err', 'EEXIST'),
    'name255_create': ('ok', None),
    'name255_link': ('err', 'EEXIST'),
    'name255_lookup': ('ok', 5),
    'name255_lookup_under': ('err', 'ENOTDIR'),
    'name255_mkdir': ('err', 'EEXIST'),
    'name255_mkfifo': ('err', 'EEXIST'),
    'name255_rename_from': ('ok', None),
    'name255_rename_to': ('ok', None),
    'name255_symlink': ('err', 'EEXIST'),
    'name255_unlink': ('ok', None),
    'name256_create': ('err', 'ENAMETOOLONG'),
    'name256_link': ('err', 'ENAMETOOLONG'),
    'name256_lookup': ('err', 'ENAMETOOLONG'),
    'name256_lookup_under': ('err', 'ENAMETOOLONG'),
    'name256_mkdir': ('err', 'ENAMETOOLONG'),
    'name256_mkfifo': ('err', 'ENAMETOOLONG'),
    'name256_rename_from': ('err', 'ENAMETOOLONG'),
    'name256_rename_to': ('err', 'ENAMETOOLONG'),
    'name256_symlink': ('err', 'ENAMETOOLONG'),
    'name256_unlink': ('err', 'ENAMETOOLONG'),
    'noreplace_onto_dangling': ('err', 'EEXIST'),
    'noreplace_onto_dir': ('err', 'EEXIST'),
    'rename_dir_over_file': ('err', 'ENOTDIR'),
    'rename_dir_slash': ('ok', None),
    'rename_dot': ('err', 'EBUSY'),
    'rename_file_over_dir': ('err', 'EISDIR'),
    'rename_into_own_subdir': ('err', 'EINVAL'),
    'rename_onto_hard_link': ('ok', None),
    'rename_onto_itself_dir': ('ok', None),
    'rename_onto_itself_file': ('ok', None),
    'rename_onto_own_parent': ('err', 'EBUSY'),
    'rename_over_dot': ('err', 'EBUSY'),
    'rename_over_empty_dir': ('ok', None),
    'rename_over_file': ('ok', None),
    'rename_over_nonempty_dir': ('err', 'ENOTEMPTY'),
    'rmdir_cwd': ('ok', (None, None, [])),
    'rmdir_dot': ('err', 'EINVAL'),
    'rmdir_dotdot': ('err', 'ENOTEMPTY'),
    'rmdir_nonempty': ('err', 'ENOTEMPTY'),
    'rmdir_slash': ('ok', None),
    'rmdir_symlink_to_dir': ('err', 'ENOTDIR'),
    'tmpfile': ('ok', None),
}
for _name, _want in CALL_WANT.items():
    CASES[_name] = CASES[_name]._replace(want=(_want,))


def fs_root(d):
    """The root of the filesystem D is on: where st_dev changes."""
    while d != '/' and os.stat(os.path.dirname(d)).st_dev == os.stat(d).st_dev:
        d = os.path.dirname(d)
    return d


# rmdir of the mount's root, as of the plain directory's filesystem root
# (never removable: EBUSY, whoever asks).
CASES['rmdir_fs_root'] = Case(lambda d: None, lambda d: outcome(os.rmdir, fs_root(d)),
                              want=('err', 'EBUSY'))

CACHED_READ = ('a cached read does not update atime: the data comes from the cache and '
               'the backing file is not read (setting its atime would change its ctime)')
KNOWN = {
    'times_read': dict.fromkeys(MODES, ('differs', ('ok', '', '', ''), CACHED_READ)),
    'times_truncate_same_size': {'kernel_cache': (
        'differs', ('ok', '', '', ''),
        "with the kernel's writeback cache, truncate to the current size changes neither "
        "mtime nor ctime: the kernel stamps them only when the size changes (POSIX's rule) "
        "and keeps its own times of a cached file; ext4 stamps them on every truncate")},
    'tmpfile': dict.fromkeys(MODES, (
        'differs', (('err', 'ENOTSUP'), ['alias', 'dangling', 'dir', 'empty', 'f', 'sym']),
        'O_TMPFILE fails with EOPNOTSUPP: libfuse 3.14 has no tmpfile operation')),
}
for _name, _known in KNOWN.items():
    CASES[_name] = CASES[_name]._replace(known=_known)


def setup_for(case, d, roles, gid):
    if case.setup == 'sticky':
        sticky_setup(d, roles)
    elif case.setup == 'sgid':
        sgid_setup(d, gid)
    else:
        case.setup(d)
    if case.who != 'root':
        os.chmod(d, 0o777)


@pytest.mark.parametrize('name', sorted(CASES))
def test_posix(work, ref, users, tgroup, ffs_options, name):
    """The case NAME on the mount and on the plain directory: the same
    observation, and the one it pins for ext4; or, for a documented
    difference under this mount mode, foliofs's documented answer."""
    case = CASES[name]
    for d in (work.mnt, ref):
        setup_for(case, d, users, tgroup)
    who = users[case.who]
    # Always in a child: ops may change the umask or the working directory.
    got = outcome(run_as, who, case.op, work.mnt)
    plain = outcome(run_as, who, case.op, ref)
    assert plain[0] == 'ok', plain
    if case.want is not None:
        seen = plain[1][:len(case.want)] if isinstance(case.want, tuple) else plain[1]
        assert seen == case.want, 'the plain directory gives %r' % (seen,)
    known = case.known.get(next(k for k, v in MODES.items() if v == ffs_options))
    if known:
        assert got != plain, 'the documented difference is gone: %r' % (got,)
        assert got == ('ok', known[1]), 'foliofs %r\nplain   %r' % (got, plain)
    else:
        assert got == plain, 'foliofs %r\nplain   %r' % (got, plain)
