"""Namespace operations through a foliofs mount (root, -o allow_other).

Each test does the same thing in a directory of the mount (fixture ``work``)
and in a plain directory on the backing's filesystem (fixture ``ref``), and
asserts the same results and the same errnos (util.same); where it makes
sense it also checks that the mount and the backing directory agree about
the object (util.assert_stat_same).  Operations "as the test user" run in a
forked child with that user's uid, gid and supplementary groups, so they
exercise the daemon's acting-as-the-caller path and the kernel's
default_permissions checks.
"""

import errno
import os
import stat
import time

import pytest

import util
from util import (RENAME_EXCHANGE, RENAME_NOREPLACE, UTIME_NOW, UTIME_OMIT, Dir, assert_stat_same,
                  mountinfo, outcome, read_backing, read_file, renameat2, run_as, same,
                  stat_dict, utimensat, write_file)

# Every test here runs with umask 022 (an autouse fixture of util).
umask_022 = util.umask_022

P = os.path.join
NOBODY = 'nobody'


def lst(path):
    st = os.lstat(path)
    return (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_size,
            st.st_nlink, st.st_uid, st.st_gid, st.st_rdev)


def make_tree(d):
    write_file(P(d, 'file'), b'abc')
    os.mkdir(P(d, 'dir'), 0o750)
    os.mkdir(P(d, 'dir', 'sub'))
    os.symlink('file', P(d, 'sym'))
    os.symlink('nowhere', P(d, 'dangling'))
    os.mkfifo(P(d, 'fifo'), 0o640)
    os.link(P(d, 'file'), P(d, 'hard'))


TREE = ('file', 'dir', 'dir/sub', 'sym', 'dangling', 'fifo', 'hard')


def tree_summary(d):
    return {n: lst(P(d, n)) for n in TREE}


# ---------------------------------------------------------------------------
# mount and lookup/getattr

def test_mountinfo(ffs):
    mi = mountinfo(ffs.mnt)
    assert mi['fstype'] == 'fuse.foliofs'
    opts = mi['super_options'].split(',')
    assert 'allow_other' in opts
    assert 'default_permissions' in opts


def test_root_listing_matches_backing(ffs, work):
    assert sorted(os.listdir(ffs.mnt)) == sorted(os.listdir(ffs.backing))
    st_m, st_b = os.stat(ffs.mnt), os.stat(ffs.backing)
    assert (st_m.st_mode, st_m.st_uid, st_m.st_gid, st_m.st_nlink) == \
        (st_b.st_mode, st_b.st_uid, st_b.st_gid, st_b.st_nlink)


def test_getattr_all_types(work, ref):
    same(lambda d: (make_tree(d), tree_summary(d))[1], work.mnt, ref)
    for n in TREE:
        assert_stat_same(work.m(n), work.b(n), times=True)
    assert_stat_same(work.mnt, work.back, times=True)
    # stat() follows, lstat() does not
    assert os.stat(work.m('sym')).st_size == 3
    assert stat.S_ISLNK(os.lstat(work.m('sym')).st_mode)
    # hard links are one inode through the mount too
    assert os.stat(work.m('file')).st_ino == os.stat(work.m('hard')).st_ino
    assert os.stat(work.m('file')).st_ino != os.stat(work.m('dir')).st_ino
    # repeated lookups give the same inode number
    assert os.stat(work.m('dir', 'sub')).st_ino == os.stat(work.m('dir', 'sub')).st_ino


def test_lookup_errors(work, ref):
    def ops(d):
        write_file(P(d, 'f'), b'')
        return [outcome(os.stat, P(d, 'missing')),
                outcome(os.stat, P(d, 'missing', 'x')),
                outcome(os.stat, P(d, 'f', 'x')),
                outcome(os.stat, P(d, 'f', '')),
                outcome(os.stat, P(d, 'f') + '/'),
                outcome(os.listdir, P(d, 'f')),
                outcome(lambda: os.stat(P(d, 'f', '..')))]
    res = same(ops, work.mnt, ref)
    assert res[1][0] == ('err', 'ENOENT')


def test_odd_names(work, ref):
    names = ['a b', 'new\nline', '-dash', 'ünïcødé', '.hidden', '..dots', 'x' * 255,
             'tab\there', '\\back', '#%&*?']

    def ops(d):
        for n in names:
            write_file(P(d, n), n.encode())
        return sorted(os.listdir(d)), [read_file(P(d, n)) for n in names]
    same(ops, work.mnt, ref)
    assert sorted(os.listdir(work.back)) == sorted(names)


# ---------------------------------------------------------------------------
# chmod / chown

@pytest.mark.parametrize('kind', ['file', 'dir'])
def test_chmod(work, ref, kind):
    modes = [0o000, 0o644, 0o755, 0o4755, 0o2755, 0o1777, 0o7777, 0o600]

    def ops(d):
        p = P(d, 'o')
        if kind == 'file':
            write_file(p, b'x')
        else:
            os.mkdir(p)
        out = []
        for m in modes:
            os.chmod(p, m)
            out.append(stat.S_IMODE(os.stat(p).st_mode))
        return out
    assert same(ops, work.mnt, ref) == ('ok', modes)
    os.chmod(work.m('o'), 0o4711)
    assert_stat_same(work.m('o'), work.b('o'), times=True)


def test_chmod_via_symlink_changes_target(work, ref):
    def ops(d):
        write_file(P(d, 'f'), b'x')
        os.symlink('f', P(d, 'l'))
        os.chmod(P(d, 'l'), 0o600)
        return stat.S_IMODE(os.stat(P(d, 'f')).st_mode), stat.S_ISLNK(os.lstat(P(d, 'l')).st_mode)
    assert same(ops, work.mnt, ref) == ('ok', (0o600, True))


def test_chown_root(work, ref, tuser, tgroup):
    _, uid, gid = tuser

    def ops(d):
        p = P(d, 'f')
        write_file(p, b'#!/bin/sh\n')
        os.symlink('f', P(d, 'l'))
        os.mkdir(P(d, 'dir'))
        out = []
        os.chown(p, uid, gid)
        out.append(lst(p))
        os.chown(p, -1, tgroup)
        out.append(lst(p))
        os.chown(p, 0, -1)
        out.append(lst(p))
        # chown clears setuid/setgid on an executable (root too, since 2.2.13)
        os.chmod(p, 0o6755)
        os.chown(p, uid, -1)
        out.append(lst(p))
        os.chown(P(d, 'l'), uid, tgroup, follow_symlinks=False)
        out.append(lst(P(d, 'l')))
        out.append(lst(p))
        os.chmod(P(d, 'dir'), 0o2775)
        os.chown(P(d, 'dir'), uid, gid)
        out.append(lst(P(d, 'dir')))
        return out
    same(ops, work.mnt, ref)
    for n in ('f', 'l', 'dir'):
        assert_stat_same(work.m(n), work.b(n), times=True)


def test_chown_chmod_unprivileged(work, ref, tuser, tgroup):
    name, uid, gid = tuser

    def setup(d):
        write_file(P(d, 'mine'), b'')
        os.chown(P(d, 'mine'), uid, gid)
        write_file(P(d, 'roots'), b'')
        os.chmod(P(d, 'roots'), 0o666)

    def ops(d):
        p = P(d, 'mine')
        return [outcome(os.chown, p, 0, -1),
                outcome(os.chown, p, -1, 0),
                outcome(os.chown, p, -1, tgroup),          # member: allowed
                lst(p),
                outcome(os.chown, p, uid, -1),             # no-op: allowed
                outcome(os.chmod, p, 0o640),
                outcome(os.chmod, P(d, 'roots'), 0o777),   # not owner: EPERM
                outcome(os.chown, P(d, 'roots'), uid, gid),
                outcome(os.chmod, p, 0o2755),              # sgid kept: member of the group
                lst(p)]
    setup(work.mnt)
    setup(ref)
    res = same(ops, work.mnt, ref, user=name)
    assert res[1][0] == ('err', 'EPERM')
    assert res[1][2] == ('ok', None)
    assert_stat_same(work.m('mine'), work.b('mine'), times=True)
    assert_stat_same(work.m('roots'), work.b('roots'), times=True)


# ---------------------------------------------------------------------------
# truncate / utimens

def test_truncate(work, ref, tuser):
    def ops(d):
        p = P(d, 'f')
        write_file(p, bytes(range(256)) * 40)
        out = []
        for size in (100, 20000, 0, 4096, 4095, 1 << 20, 7):
            os.truncate(p, size)
            out.append((os.stat(p).st_size, read_file(p)))
        out.append(outcome(os.truncate, P(d, 'missing'), 0))
        out.append(outcome(os.truncate, d, 0))
        out.append(outcome(os.truncate, p, -1))
        return out
    res = same(ops, work.mnt, ref)
    assert res[1][0] == (100, (bytes(range(256)) * 40)[:100])
    assert res[1][1][1] == (bytes(range(256)) * 40)[:100] + bytes(19900)
    assert_stat_same(work.m('f'), work.b('f'))
    assert read_backing(work, 'f') == bytes(7)

    def setup(d):
        write_file(P(d, 'ro'), b'x' * 10)
        write_file(P(d, 'rw'), b'x' * 10)
        os.chmod(P(d, 'rw'), 0o666)
    setup(work.mnt)
    setup(ref)
    res = same(lambda d: [outcome(os.truncate, P(d, 'ro'), 1),
                          outcome(os.truncate, P(d, 'rw'), 3),
                          os.stat(P(d, 'rw')).st_size],
               work.mnt, ref, user=tuser[0])
    assert res[1][0] == ('err', 'EACCES')
    util.sync_path(work.m('rw'))
    assert os.stat(work.b('rw')).st_size == 3


def test_utimens(work, ref):
    def ops(d):
        p = P(d, 'f')
        write_file(p, b'x')
        os.symlink('f', P(d, 'l'))
        out = []
        os.utime(p, ns=(1_000_000_123, 2_000_000_456))
        out.append((os.stat(p).st_atime_ns, os.stat(p).st_mtime_ns))
        utimensat(p, UTIME_OMIT, (3, 789))
        out.append((os.stat(p).st_atime_ns, os.stat(p).st_mtime_ns))
        utimensat(p, (4, 5), UTIME_OMIT)
        out.append((os.stat(p).st_atime_ns, os.stat(p).st_mtime_ns))
        utimensat(p, UTIME_OMIT, UTIME_OMIT)
        out.append((os.stat(p).st_atime_ns, os.stat(p).st_mtime_ns))
        # the symlink itself, not its target
        utimensat(P(d, 'l'), (10, 0), (11, 0), follow=False)
        st = os.lstat(P(d, 'l'))
        out.append((st.st_atime_ns, st.st_mtime_ns, os.stat(p).st_mtime_ns))
        os.utime(d, ns=(7_000_000_000, 8_000_000_000))
        out.append((os.stat(d).st_atime_ns, os.stat(d).st_mtime_ns))
        return out
    same(ops, work.mnt, ref)
    for n in ('f', 'l'):
        assert_stat_same(work.m(n), work.b(n), times=True)
    assert_stat_same(work.mnt, work.back, times=True)


def test_utimens_now(work, ref):
    p = work.m('f')
    write_file(p, b'x')
    os.utime(p, ns=(1, 1))
    t0 = time.time_ns() - 50_000_000
    utimensat(p, UTIME_NOW, UTIME_OMIT)
    st = os.stat(p)
    assert t0 <= st.st_atime_ns <= time.time_ns() + 50_000_000
    assert st.st_mtime_ns == 1
    assert_stat_same(p, work.b('f'), times=True)
    utimensat(p, UTIME_OMIT, UTIME_NOW)
    st = os.stat(p)
    assert t0 <= st.st_mtime_ns <= time.time_ns() + 50_000_000
    assert_stat_same(p, work.b('f'), times=True)
    os.utime(p, ns=(1, 1))
    os.utime(p)  # both NOW
    st = os.stat(p)
    assert st.st_atime_ns > 1 and st.st_mtime_ns > 1
    assert_stat_same(p, work.b('f'), times=True)


def test_utimens_unprivileged(work, ref, tuser):
    def setup(d):
        write_file(P(d, 'rw'), b'')
        os.chmod(P(d, 'rw'), 0o666)
        write_file(P(d, 'ro'), b'')
        os.utime(P(d, 'rw'), ns=(5, 5))

    def ops(d):
        return [outcome(os.utime, P(d, 'rw')),                      # NOW: needs write
                os.stat(P(d, 'rw')).st_mtime_ns > 5,
                outcome(os.utime, P(d, 'rw'), ns=(1, 1)),           # explicit: owner only
                outcome(os.utime, P(d, 'ro')),
                outcome(utimensat, P(d, 'rw'), UTIME_OMIT, UTIME_OMIT)]
    setup(work.mnt)
    setup(ref)
    res = same(ops, work.mnt, ref, user=tuser[0])
    assert res[1] == [('ok', None), True, ('err', 'EPERM'), ('err', 'EACCES'),
                      ('ok', None)]
    assert_stat_same(work.m('rw'), work.b('rw'), times=True)


# ---------------------------------------------------------------------------
# mknod / mkdir / unlink / rmdir

def test_mknod(work, ref):
    def ops(d):
        os.umask(0)
        os.mkfifo(P(d, 'fifo'), 0o666)
        os.mknod(P(d, 'reg'), stat.S_IFREG | 0o640)
        os.mknod(P(d, 'chr'), stat.S_IFCHR | 0o600, os.makedev(1, 3))
        os.mknod(P(d, 'blk'), stat.S_IFBLK | 0o600, os.makedev(7, 200))
        os.mknod(P(d, 'sock'), stat.S_IFSOCK | 0o755)
        os.umask(0o027)
        os.mkfifo(P(d, 'fifo2'), 0o777)
        out = [lst(P(d, n)) for n in ('fifo', 'reg', 'chr', 'blk', 'sock', 'fifo2')]
        out.append(outcome(os.mkfifo, P(d, 'fifo')))
        out.append(outcome(os.mknod, P(d, 'missing', 'x')))
        # a fifo works through the mount (the kernel implements it)
        fd = os.open(P(d, 'fifo'), os.O_RDWR | os.O_NONBLOCK)
        try:
            os.write(fd, b'through the fifo')
            out.append(os.read(fd, 100))
        finally:
            os.close(fd)
        return out
    res = same(ops, work.mnt, ref)
    assert res[1][0][:2] == (stat.S_IFIFO, 0o666)
    assert res[1][5][:2] == (stat.S_IFIFO, 0o750)
    for n in ('fifo', 'reg', 'chr', 'blk', 'sock', 'fifo2'):
        assert_stat_same(work.m(n), work.b(n), times=True)


def test_mkdir(work, ref):
    def ops(d):
        out = [os.stat(d).st_nlink]
        os.umask(0)
        os.mkdir(P(d, 'a'), 0o777)
        os.mkdir(P(d, 'b'), 0o1750)
        os.umask(0o027)
        os.mkdir(P(d, 'c'), 0o777)
        write_file(P(d, 'f'), b'')
        out += [lst(P(d, n)) for n in 'abc']
        out.append(os.stat(d).st_nlink)
        out.append(outcome(os.mkdir, P(d, 'a')))
        out.append(outcome(os.mkdir, P(d, 'f')))
        out.append(outcome(os.mkdir, P(d, 'missing', 'x')))
        out.append(outcome(os.mkdir, P(d, 'f', 'x')))
        out.append(sorted(os.listdir(d)))
        return out
    res = same(ops, work.mnt, ref)
    assert res[1][1][:2] == (stat.S_IFDIR, 0o777)
    assert res[1][4] == res[1][0] + 3
    for n in 'abc':
        assert_stat_same(work.m(n), work.b(n), times=True)
    assert_stat_same(work.mnt, work.back, times=True)


def test_unlink(work, ref):
    def ops(d):
        write_file(P(d, 'f'), b'still readable')
        write_file(P(d, 'g'), b'')
        os.mkdir(P(d, 'dir'))
        out = []
        fd = os.open(P(d, 'f'), os.O_RDWR)
        try:
            os.unlink(P(d, 'f'))
            out.append(outcome(os.stat, P(d, 'f')))
            out.append(os.fstat(fd).st_nlink)
            os.pwrite(fd, b'STILL', 0)
            out.append(os.pread(fd, 100, 0))
        finally:
            os.close(fd)
        out.append(outcome(os.unlink, P(d, 'f')))
        out.append(outcome(os.unlink, P(d, 'dir')))
        out.append(outcome(os.unlink, P(d, 'g', 'x')))
        os.unlink(P(d, 'g'))
        write_file(P(d, 'g'), b'new')          # same name, new inode
        out.append(read_file(P(d, 'g')))
        out.append(sorted(os.listdir(d)))
        return out
    res = same(ops, work.mnt, ref)
    assert res[1][0] == ('err', 'ENOENT')
    assert sorted(os.listdir(work.back)) == ['dir', 'g']


def test_rmdir(work, ref):
    def ops(d):
        os.makedirs(P(d, 'full', 'sub'))
        os.mkdir(P(d, 'empty'))
        write_file(P(d, 'f'), b'')
        out = [outcome(os.rmdir, P(d, 'full')),
               outcome(os.rmdir, P(d, 'f')),
               outcome(os.rmdir, P(d, 'missing')),
               outcome(os.rmdir, P(d, 'empty', '.')),
               outcome(os.rmdir, P(d, 'empty')),
               outcome(os.stat, P(d, 'empty')),
               outcome(os.rmdir, P(d, 'full', 'sub')),
               outcome(os.rmdir, P(d, 'full')),
               os.stat(d).st_nlink,
               sorted(os.listdir(d))]
        return out
    res = same(ops, work.mnt, ref)
    assert res[1][0] == ('err', 'ENOTEMPTY')
    assert sorted(os.listdir(work.back)) == ['f']


# ---------------------------------------------------------------------------
# symlink / readlink / link

def test_symlink_readlink(work, ref):
    targets = ['/etc', '../..', 'rel/target', 'x' * 1000, 'a b\nc', 'ünï', '.', '/',
               'y' * 4095]

    def ops(d):
        out = []
        for i, t in enumerate(targets):
            os.symlink(t, P(d, 'l%d' % i))
            out.append((os.readlink(P(d, 'l%d' % i)), lst(P(d, 'l%d' % i))))
        out.append(outcome(os.symlink, 'z' * 4096, P(d, 'toolong')))
        out.append(outcome(os.symlink, 'x', P(d, 'l0')))
        out.append(outcome(os.readlink, d))
        out.append(outcome(os.readlink, P(d, 'missing')))
        return out
    res = same(ops, work.mnt, ref)
    for i, t in enumerate(targets):
        assert res[1][i][0] == t
        assert os.readlink(work.b('l%d' % i)) == t
        assert_stat_same(work.m('l%d' % i), work.b('l%d' % i), times=True)
    assert res[1][-4] == ('err', 'ENAMETOOLONG')


def test_link(work, ref):
    def ops(d):
        write_file(P(d, 'f'), b'data')
        os.mkdir(P(d, 'dir'))
        out = []
        os.link(P(d, 'f'), P(d, 'l1'))
        os.mkdir(P(d, 'sub'))
        os.link(P(d, 'f'), P(d, 'sub', 'l2'))
        out.append([os.stat(P(d, n)).st_nlink for n in ('f', 'l1', 'sub/l2')])
        out.append(os.stat(P(d, 'f')).st_ino == os.stat(P(d, 'sub', 'l2')).st_ino)
        write_file(P(d, 'l1'), b'changed', 'r+b')
        out.append(read_file(P(d, 'sub', 'l2')))
        out.append(outcome(os.link, P(d, 'dir'), P(d, 'dl')))
        out.append(outcome(os.link, P(d, 'f'), P(d, 'l1')))
        out.append(outcome(os.link, P(d, 'missing'), P(d, 'x')))
        out.append(outcome(os.link, P(d, 'f'), P(d, 'missing', 'x')))
        os.unlink(P(d, 'f'))
        out.append([os.stat(P(d, n)).st_nlink for n in ('l1', 'sub/l2')])
        return out
    res = same(ops, work.mnt, ref)
    assert res[1][0] == [3, 3, 3]
    assert res[1][3] == ('err', 'EPERM')
    assert res[1][4] == ('err', 'EEXIST')
    assert os.stat(work.b('l1')).st_nlink == 2
    assert os.stat(work.b('l1')).st_ino == os.stat(work.b('sub', 'l2')).st_ino
    assert_stat_same(work.m('l1'), work.b('l1'))


# ---------------------------------------------------------------------------
# rename

def _rename_setup(d):
    write_file(P(d, 'a'), b'A')
    write_file(P(d, 'b'), b'B')
    os.makedirs(P(d, 'd1', 'x'))
    os.mkdir(P(d, 'd2'))
    os.mkdir(P(d, 'd3'))
    write_file(P(d, 'd1', 'x', 'deep'), b'deep')


def test_rename_plain(work, ref):
    def ops(d):
        _rename_setup(d)
        out = []
        os.rename(P(d, 'a'), P(d, 'c'))
        out.append((outcome(os.stat, P(d, 'a')), read_file(P(d, 'c'))))
        os.rename(P(d, 'c'), P(d, 'd2', 'c'))             # across directories
        out.append(read_file(P(d, 'd2', 'c')))
        os.rename(P(d, 'd1'), P(d, 'd2', 'moved'))       # directory with contents
        out.append(read_file(P(d, 'd2', 'moved', 'x', 'deep')))
        out.append(outcome(os.stat, P(d, 'd1', 'x')))
        out.append([os.stat(P(d, n)).st_nlink for n in ('.', 'd2')])
        os.rename(P(d, 'b'), P(d, 'b'))                  # same name: no-op
        out.append(read_file(P(d, 'b')))
        out.append(sorted(os.listdir(d)))
        return out
    same(ops, work.mnt, ref)
    assert read_backing(work, 'd2', 'moved', 'x', 'deep') == b'deep'
    assert sorted(os.listdir(work.back)) == ['b', 'd2', 'd3']


def test_rename_over_existing(work, ref):
    def ops(d):
        _rename_setup(d)
        write_file(P(d, 'd3', 'keep'), b'')
        out = []
        fd = os.open(P(d, 'b'), os.O_RDONLY)     # the replaced file stays readable
        try:
            os.rename(P(d, 'a'), P(d, 'b'))
            out.append((read_file(P(d, 'b')), outcome(os.stat, P(d, 'a')),
                        os.pread(fd, 10, 0), os.fstat(fd).st_nlink))
        finally:
            os.close(fd)
        out.append(outcome(os.rename, P(d, 'd2'), P(d, 'd1')))      # non-empty dir
        out.append(outcome(os.rename, P(d, 'b'), P(d, 'd2')))       # file over dir
        out.append(outcome(os.rename, P(d, 'd2'), P(d, 'b')))       # dir over file
        out.append(outcome(os.rename, P(d, 'd1'), P(d, 'd1', 'x', 'in')))  # into itself
        out.append(outcome(os.rename, P(d, 'missing'), P(d, 'z')))
        out.append(outcome(os.rename, P(d, 'd3'), P(d, 'd2')))      # over empty dir: ok
        out.append(sorted(os.listdir(P(d, 'd2'))))
        out.append(sorted(os.listdir(d)))
        return out
    res = same(ops, work.mnt, ref)
    assert res[1][0][0] == b'A'
    assert res[1][1] == ('err', 'ENOTEMPTY')
    assert sorted(os.listdir(work.back)) == ['b', 'd1', 'd2']
    assert read_backing(work, 'b') == b'A'


def test_rename_noreplace(work, ref):
    def ops(d):
        _rename_setup(d)
        return [outcome(renameat2, P(d, 'a'), P(d, 'b'), RENAME_NOREPLACE),
                outcome(renameat2, P(d, 'd2'), P(d, 'd3'), RENAME_NOREPLACE),
                read_file(P(d, 'b')),
                outcome(renameat2, P(d, 'a'), P(d, 'new'), RENAME_NOREPLACE),
                outcome(os.stat, P(d, 'a')),
                read_file(P(d, 'new'))]
    res = same(ops, work.mnt, ref)
    assert res[1][:3] == [('err', 'EEXIST'), ('err', 'EEXIST'), b'B']
    assert res[1][3] == ('ok', None)
    assert sorted(os.listdir(work.back)) == ['b', 'd1', 'd2', 'd3', 'new']


def test_rename_exchange(work, ref):
    def ops(d):
        _rename_setup(d)
        ino_a = os.stat(P(d, 'a')).st_ino
        out = [outcome(renameat2, P(d, 'a'), P(d, 'b'), RENAME_EXCHANGE),
               read_file(P(d, 'a')), read_file(P(d, 'b')),
               os.stat(P(d, 'b')).st_ino == ino_a]
        # a file and a directory in different parents
        out.append(outcome(renameat2, P(d, 'a'), P(d, 'd1', 'x'), RENAME_EXCHANGE))
        out.append(read_file(P(d, 'a', 'deep')))
        out.append(read_file(P(d, 'd1', 'x')))
        out.append(outcome(renameat2, P(d, 'b'), P(d, 'missing'), RENAME_EXCHANGE))
        out.append(outcome(renameat2, P(d, 'b'), P(d, 'c'),
                           RENAME_EXCHANGE | RENAME_NOREPLACE))
        return out
    res = same(ops, work.mnt, ref)
    assert res[1][:3] == [('ok', None), b'B', b'A']
    assert res[1][7] == ('err', 'ENOENT')
    assert read_backing(work, 'a', 'deep') == b'deep'
    assert read_backing(work, 'd1', 'x') == b'B'


# ---------------------------------------------------------------------------
# readdir

def test_readdir_matches_backing(work, ref):
    def ops(d):
        make_tree(d)
        return sorted((e.name, e.is_dir(follow_symlinks=False),
                       e.is_file(follow_symlinks=False),
                       e.is_symlink(), e.inode() == os.lstat(e.path).st_ino)
                      for e in os.scandir(d))
    res = same(ops, work.mnt, ref)
    assert all(r[4] for r in res[1]), 'd_ino differs from st_ino: %r' % res[1]
    assert sorted(os.listdir(work.mnt)) == sorted(os.listdir(work.back))
    with Dir(work.mnt) as dm, Dir(ref) as dr:
        assert sorted(dm.read_all()) == sorted(dr.read_all())   # incl. . and .. and d_type


def test_readdir_large(work, ref):
    n = 2000
    names = ['f%05d_%s' % (i, 'x' * (i % 200)) for i in range(n)]
    for d in (work.mnt, ref):
        for i, name in enumerate(names):
            if i % 10 == 0:
                os.mkdir(P(d, name))
            else:
                os.close(os.open(P(d, name), os.O_CREAT | os.O_WRONLY, 0o644))
    want = sorted(names)
    assert sorted(os.listdir(work.mnt)) == want
    assert sorted(os.listdir(work.back)) == want
    first = sorted((e.name, e.is_dir()) for e in os.scandir(work.mnt))
    second = sorted((e.name, e.is_dir()) for e in os.scandir(work.mnt))
    assert first == second == sorted((e.name, e.is_dir()) for e in os.scandir(ref))
    assert len(first) == n

    # telldir/seekdir/rewinddir: re-reading from a remembered position gives
    # the same entries, and the whole stream has every name exactly once
    with Dir(work.mnt) as d:
        head = [d.read() for _ in range(700)]
        pos = d.tell()
        middle = [d.read() for _ in range(300)]
        rest = d.read_all()
        d.seek(pos)
        assert [d.read() for _ in range(300)] == middle
        assert d.read_all() == rest
        d.rewind()
        again = d.read_all()
    stream = head + middle + rest
    assert again == stream
    assert sorted(e[0] for e in stream) == sorted(want + ['.', '..'])

    # shrink it and list again
    for name in names[1::2]:
        (os.rmdir if names.index(name) % 10 == 0 else os.unlink)(P(work.mnt, name))
    assert sorted(os.listdir(work.mnt)) == sorted(names[0::2])
    assert sorted(os.listdir(work.back)) == sorted(names[0::2])


def test_readdir_sees_backing_changes(work):
    """The namespace is passed through: a name created in the backing
    directory shows up in readdir of the mount and can be looked up."""
    os.listdir(work.mnt)
    write_file(work.b('behind'), b'hello')
    assert 'behind' in os.listdir(work.mnt)
    assert read_file(work.m('behind')) == b'hello'


# ---------------------------------------------------------------------------
# statvfs / access

def test_statvfs(ffs, work):
    m = os.statvfs(work.mnt)
    b = os.statvfs(work.back)
    assert m.f_namemax == b.f_namemax == 255
    assert m.f_blocks * m.f_frsize == b.f_blocks * b.f_frsize
    assert m.f_files == b.f_files
    assert abs(m.f_bavail * m.f_frsize - b.f_bavail * b.f_frsize) < b.f_blocks * b.f_frsize // 50
    assert abs(m.f_bfree * m.f_frsize - b.f_bfree * b.f_frsize) < b.f_blocks * b.f_frsize // 50
    assert m.f_bsize > 0 and m.f_frsize > 0


MODES = [0o000, 0o400, 0o200, 0o100, 0o644, 0o755, 0o777, 0o604, 0o602, 0o060]


def test_access_as_user(work, ref, tuser, tgroup):
    name, uid, gid = tuser

    def setup(d):
        for m in MODES:
            for owner in ('root', 'user', 'group'):
                p = P(d, '%s_%o' % (owner, m))
                write_file(p, b'')
                os.chmod(p, m)
                if owner == 'user':
                    os.chown(p, uid, gid)
                elif owner == 'group':
                    os.chown(p, 0, tgroup)
        os.chmod(d, 0o755)

    def ops(d):
        out = []
        for m in MODES:
            for owner in ('root', 'user', 'group'):
                p = P(d, '%s_%o' % (owner, m))
                out.append([os.access(p, a) for a in (os.F_OK, os.R_OK, os.W_OK, os.X_OK)])
                out.append(outcome(lambda: os.close(os.open(p, os.O_RDONLY))))
                out.append(outcome(lambda: os.close(os.open(p, os.O_WRONLY))))
        out.append(os.access(P(d, 'missing'), os.F_OK))
        out.append(os.access(d, os.W_OK))
        return out
    setup(work.mnt)
    setup(ref)
    res = same(ops, work.mnt, ref, user=name)
    # root_400: readable by owner only
    assert res[1][3 * 3] == [True, False, False, False]
    # root as the caller (mode 000: root may read and write, not execute)
    res_root = same(lambda d: [os.access(P(d, 'root_0'), a)
                               for a in (os.R_OK, os.W_OK, os.X_OK)], work.mnt, ref)
    assert res_root[1] == [True, True, False]


def test_eacces_private_dir(work, ref, tuser):
    def setup(d):
        os.mkdir(P(d, 'private'), 0o700)
        write_file(P(d, 'private', 'f'), b'secret')
        os.chmod(P(d, 'private', 'f'), 0o666)
        os.mkdir(P(d, 'noexec'), 0o744)
        write_file(P(d, 'noexec', 'f'), b'')
        os.mkdir(P(d, 'nowrite'), 0o755)

    def ops(d):
        return [outcome(os.listdir, P(d, 'private')),
                outcome(lambda: os.stat(P(d, 'private', 'f')).st_size),
                outcome(read_file, P(d, 'private', 'f')),
                outcome(write_file, P(d, 'private', 'new'), b''),
                outcome(lambda: os.stat(P(d, 'private')).st_mode),
                outcome(os.listdir, P(d, 'noexec')),          # r without x: names only
                outcome(os.stat, P(d, 'noexec', 'f')),
                outcome(write_file, P(d, 'nowrite', 'new'), b''),
                outcome(os.mkdir, P(d, 'nowrite', 'new')),
                outcome(os.symlink, 'x', P(d, 'nowrite', 'new')),
                outcome(os.mkfifo, P(d, 'nowrite', 'new')),
                outcome(os.rmdir, P(d, 'nowrite')),             # parent d is 0755 root
                outcome(os.rename, P(d, 'nowrite'), P(d, 'x'))]
    setup(work.mnt)
    setup(ref)
    res = same(ops, work.mnt, ref, user=tuser[0])
    assert res[1][0] == ('err', 'EACCES')
    assert res[1][5] == ('ok', ['f'])
    assert os.listdir(work.b('nowrite')) == []


def test_enametoolong(work, ref):
    long = 'n' * 256
    ok = 'k' * 255

    def ops(d):
        write_file(P(d, 'f'), b'')
        return [outcome(write_file, P(d, long), b''),
                outcome(os.mkdir, P(d, long)),
                outcome(os.stat, P(d, long)),
                outcome(os.symlink, 'f', P(d, long)),
                outcome(os.mkfifo, P(d, long)),
                outcome(os.link, P(d, 'f'), P(d, long)),
                outcome(os.rename, P(d, 'f'), P(d, long)),
                outcome(os.unlink, P(d, long)),
                outcome(os.setxattr, P(d, 'f'), 'user.' + 'x' * 256, b'v'),
                outcome(write_file, P(d, ok), b'ok'),
                outcome(os.rename, P(d, ok), P(d, 'k' * 254)),
                sorted(os.listdir(d))]
    res = same(ops, work.mnt, ref)
    assert res[1][0] == ('err', 'ENAMETOOLONG')
    assert res[1][9] == ('ok', None)


def test_enotdir_eisdir(work, ref):
    def ops(d):
        write_file(P(d, 'f'), b'x')
        os.mkdir(P(d, 'dir'))
        return [outcome(os.open, P(d, 'f', 'x'), os.O_RDONLY),
                outcome(os.open, P(d, 'f', 'x'), os.O_CREAT | os.O_WRONLY),
                outcome(os.open, P(d, 'dir'), os.O_WRONLY),
                outcome(os.open, P(d, 'dir'), os.O_RDWR),
                outcome(os.open, P(d, 'dir'), os.O_CREAT | os.O_WRONLY),
                outcome(os.open, P(d, 'f'), os.O_RDONLY | os.O_DIRECTORY),
                outcome(os.mkdir, P(d, 'f', 'x')),
                outcome(os.rmdir, P(d, 'f')),
                outcome(os.rename, P(d, 'dir'), P(d, 'f', 'x')),
                outcome(os.unlink, P(d, 'dir')),
                outcome(os.symlink, 'x', P(d, 'f', 'x')),
                outcome(os.listdir, P(d, 'f'))]
    res = same(ops, work.mnt, ref)
    assert res[1][0] == ('err', 'ENOTDIR')
    assert res[1][2] == ('err', 'EISDIR')


# ---------------------------------------------------------------------------
# credentials: ownership, setgid directories, supplementary groups

def test_created_by_user_owned_by_user(work, ref, tuser):
    name, uid, gid = tuser
    os.chmod(work.mnt, 0o777)
    os.chmod(ref, 0o777)

    def ops(d):
        write_file(P(d, 'file'), b'mine')
        os.mkdir(P(d, 'dir'))
        os.mkfifo(P(d, 'fifo'))
        os.symlink('file', P(d, 'sym'))
        os.link(P(d, 'file'), P(d, 'hard'))
        os.mknod(P(d, 'reg'), stat.S_IFREG | 0o600)
        write_file(P(d, 'dir', 'inner'), b'')
        os.rename(P(d, 'reg'), P(d, 'dir', 'reg'))
        return None
    same(ops, work.mnt, ref, user=name)
    for n in ('file', 'dir', 'fifo', 'sym', 'hard', 'dir/inner', 'dir/reg'):
        util.sync_path(work.m(n))
        st = os.lstat(work.b(n))
        assert (n, st.st_uid, st.st_gid) == (n, uid, gid)
        assert lst(work.b(n)) == lst(P(ref, n))
        assert_stat_same(work.m(n), work.b(n))


def test_setgid_directory_inheritance(work, ref, tuser, tgroup):
    name, uid, gid = tuser

    def setup(d):
        os.mkdir(P(d, 'sg'))
        os.chown(P(d, 'sg'), 0, tgroup)
        os.chmod(P(d, 'sg'), 0o2775)
        os.mkdir(P(d, 'open'))
        os.chown(P(d, 'open'), 0, tgroup)
        os.chmod(P(d, 'open'), 0o2777)

    def member(d):
        os.umask(0)
        write_file(P(d, 'sg', 'file'), b'')
        os.mkdir(P(d, 'sg', 'sub'), 0o777)
        write_file(P(d, 'sg', 'sub', 'deeper'), b'')
        os.close(os.open(P(d, 'sg', 'sgfile'), os.O_CREAT | os.O_WRONLY, 0o2755))
        return [lst(P(d, 'sg', n)) for n in ('file', 'sub', 'sub/deeper', 'sgfile')]

    def nonmember(d):
        os.umask(0)
        os.close(os.open(P(d, 'open', 'f'), os.O_CREAT | os.O_WRONLY, 0o2755))
        os.mkdir(P(d, 'open', 'dir'), 0o2755)
        return [lst(P(d, 'open', n)) for n in ('f', 'dir')]
    setup(work.mnt)
    setup(ref)
    res = same(member, work.mnt, ref, user=name)
    f, sub, deeper, sgfile = res[1]
    assert (f[4], f[5]) == (uid, tgroup)
    assert sub[5] == tgroup and sub[1] & stat.S_ISGID
    assert deeper[5] == tgroup
    assert sgfile[1] == 0o2755       # member of the group: S_ISGID kept
    res = same(nonmember, work.mnt, ref, user=NOBODY)
    assert res[1][0][5] == tgroup
    assert res[1][0][1] == 0o755     # not a member: S_ISGID stripped
    for n in ('file', 'sub', 'sub/deeper', 'sgfile'):
        assert_stat_same(work.m('sg', n), work.b('sg', n))
    for n in ('f', 'dir'):
        assert_stat_same(work.m('open', n), work.b('open', n))


def test_supplementary_groups(work, ref, tuser, tgroup):
    name, uid, gid = tuser

    def setup(d):
        os.mkdir(P(d, 'g'))
        os.chown(P(d, 'g'), 0, tgroup)
        os.chmod(P(d, 'g'), 0o770)
        write_file(P(d, 'g', 'shared'), b'for the group')
        os.chown(P(d, 'g', 'shared'), 0, tgroup)
        os.chmod(P(d, 'g', 'shared'), 0o660)

    def ops(d):
        out = [outcome(write_file, P(d, 'g', 'new'), b'x'),
               outcome(os.mkdir, P(d, 'g', 'newdir')),
               outcome(read_file, P(d, 'g', 'shared')),
               outcome(write_file, P(d, 'g', 'shared'), b'FOR', 'r+b'),
               outcome(os.rename, P(d, 'g', 'new'), P(d, 'g', 'renamed')),
               outcome(os.unlink, P(d, 'g', 'renamed')),
               outcome(os.listdir, P(d, 'g'))]
        if os.path.exists(P(d, 'g', 'newdir')):
            out.append(lst(P(d, 'g', 'newdir')))
        return out
    setup(work.mnt)
    setup(ref)
    res = same(ops, work.mnt, ref, user=name)
    assert all(r[0] == 'ok' for r in res[1][:7]), res
    assert read_backing(work, 'g', 'shared') == b'FOR the group'
    assert os.stat(work.b('g', 'newdir')).st_uid == uid
    res = same(ops, work.mnt, ref, user=NOBODY)
    assert res[1][0] == ('err', 'EACCES')


# ---------------------------------------------------------------------------
# the mount root, symlinks pointing outside

def test_dotdot_at_mount_root(ffs):
    parent = os.path.dirname(ffs.mnt)
    assert sorted(os.listdir(P(ffs.mnt, '..'))) == sorted(os.listdir(parent))
    assert os.stat(P(ffs.mnt, '..')).st_ino == os.stat(parent).st_ino
    assert os.stat(P(ffs.mnt, '..')).st_dev == os.stat(parent).st_dev
    assert os.stat(P(ffs.mnt, '..', 'mnt')).st_dev == os.stat(ffs.mnt).st_dev
    assert os.stat(ffs.mnt).st_dev != os.stat(parent).st_dev
    fd = os.open(ffs.mnt, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert os.stat('..', dir_fd=fd).st_ino == os.stat(parent).st_ino
    finally:
        os.close(fd)


def test_symlink_targets_returned_as_is(work, ffs):
    os.symlink('/etc', work.b('etc'))
    os.symlink('../..', work.b('up'))
    assert os.readlink(work.m('etc')) == '/etc'
    assert os.readlink(work.m('up')) == '../..'
    # the kernel resolves them, in the caller's namespace
    assert sorted(os.listdir(work.m('etc'))) == sorted(os.listdir('/etc'))
    assert os.stat(work.m('up')).st_ino == os.stat(ffs.root).st_ino
    assert os.stat(work.m('up', 'backing')).st_ino == os.stat(ffs.backing).st_ino


@pytest.mark.parametrize('prelookup', [False, True], ids=['fresh', 'negative_dentry'])
def test_planted_symlink_no_create_outside(work, ffs, tuser, prelookup):
    outside = P(ffs.root, 'outside-%s' % work.name)
    name = tuser[0]
    os.chmod(work.mnt, 0o777)
    if prelookup:
        # the kernel may now hold a negative dentry for x and send CREATE
        # straight to the daemon, which then must not follow the symlink
        assert not os.path.exists(work.m('x'))
        assert not os.path.exists(work.m('y'))
    os.symlink(outside, work.b('x'))
    os.symlink(outside + '-y', work.b('y'))
    r = outcome(run_as, name, lambda: os.open(work.m('x'),
                os.O_CREAT | os.O_NOFOLLOW | os.O_WRONLY, 0o644))
    assert not os.path.lexists(outside)
    if prelookup:
        assert r in (('err', 'ELOOP'), ('err', 'EEXIST')), r
    else:
        assert r == ('err', 'ELOOP')
    r = outcome(os.open, work.m('y'), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    assert r == ('err', 'EEXIST')
    assert not os.path.lexists(outside + '-y')
    assert os.readlink(work.b('x')) == outside


def test_write_through_symlinked_dir_resolves_in_kernel(work, ffs, tuser):
    name, uid, gid = tuser
    outside = P(ffs.root, 'outdir-%s' % work.name)
    os.mkdir(outside, 0o777)
    os.chmod(outside, 0o777)
    os.chmod(work.mnt, 0o777)
    os.symlink(outside, work.b('link'))
    run_as(name, write_file, work.m('link', 'f'), b'via link')
    st = os.stat(P(outside, 'f'))
    # created by the kernel on the outside filesystem, as the caller
    assert (st.st_uid, st.st_gid) == (uid, gid)
    assert st.st_dev == os.stat(outside).st_dev != os.stat(ffs.mnt).st_dev
    assert os.stat(work.m('link', 'f')).st_dev == st.st_dev
    assert read_file(P(outside, 'f')) == b'via link'
    assert os.listdir(work.back) == ['link']
    assert os.path.islink(work.b('link'))


# ---------------------------------------------------------------------------
# xattrs

def test_xattrs(work, ref):
    big = bytes(range(256)) * 15

    def ops(d):
        p = P(d, 'f')
        write_file(p, b'')
        os.mkdir(P(d, 'dir'))
        os.symlink('f', P(d, 'l'))
        out = [sorted(x for x in os.listxattr(p) if x.startswith('user.'))]
        os.setxattr(p, 'user.a', b'1')
        os.setxattr(p, 'user.empty', b'')
        os.setxattr(p, 'user.big', big)
        os.setxattr(P(d, 'dir'), 'user.d', b'dirval')
        out.append(sorted(x for x in os.listxattr(p) if x.startswith('user.')))
        out.append([os.getxattr(p, n) for n in ('user.a', 'user.empty', 'user.big')])
        out.append(os.getxattr(P(d, 'dir'), 'user.d'))
        out.append(os.getxattr(P(d, 'l'), 'user.a'))         # follows the link
        out.append(outcome(os.getxattr, p, 'user.missing'))
        out.append(outcome(os.removexattr, p, 'user.missing'))
        out.append(outcome(os.setxattr, p, 'user.a', b'2', os.XATTR_CREATE))
        out.append(outcome(os.setxattr, p, 'user.new', b'2', os.XATTR_REPLACE))
        out.append(outcome(os.setxattr, p, 'user.a', b'22', os.XATTR_REPLACE))
        out.append(os.getxattr(p, 'user.a'))
        out.append(outcome(os.setxattr, P(d, 'l'), 'user.x', b'1', follow_symlinks=False))
        out.append(outcome(os.getxattr, P(d, 'missing'), 'user.a'))
        out.append(outcome(os.setxattr, p, 'bogus.ns', b'1'))
        out.append(outcome(os.setxattr, p, 'user.huge', b'x' * 70000))
        os.removexattr(p, 'user.a')
        out.append(outcome(os.getxattr, p, 'user.a'))
        out.append(sorted(x for x in os.listxattr(p) if x.startswith('user.')))
        return out
    res = same(ops, work.mnt, ref)
    assert res[1][5] == ('err', 'ENODATA')
    assert res[1][6] == ('err', 'ENODATA')
    assert res[1][7] == ('err', 'EEXIST')
    assert sorted(os.listxattr(work.m('f'))) == sorted(os.listxattr(work.b('f')))
    assert os.getxattr(work.b('f'), 'user.big') == big
    assert os.getxattr(work.b('dir'), 'user.d') == b'dirval'


def test_xattrs_as_user(work, ref, tuser):
    name, uid, gid = tuser

    def setup(d):
        write_file(P(d, 'roots'), b'')
        os.setxattr(P(d, 'roots'), 'user.r', b'root')
        write_file(P(d, 'mine'), b'')
        os.chown(P(d, 'mine'), uid, gid)

    def ops(d):
        return [outcome(os.getxattr, P(d, 'roots'), 'user.r'),      # readable file
                outcome(os.setxattr, P(d, 'roots'), 'user.r', b'x'),  # not writable
                outcome(os.removexattr, P(d, 'roots'), 'user.r'),
                outcome(os.setxattr, P(d, 'mine'), 'user.m', b'mine'),
                outcome(os.getxattr, P(d, 'mine'), 'user.m'),
                outcome(os.setxattr, P(d, 'mine'), 'trusted.t', b'x')]
    setup(work.mnt)
    setup(ref)
    res = same(ops, work.mnt, ref, user=name)
    assert res[1][1] == ('err', 'EACCES')
    assert os.getxattr(work.b('mine'), 'user.m') == b'mine'
    assert os.getxattr(work.b('roots'), 'user.r') == b'root'
