#!/usr/bin/python3
"""Build a tree of many entries straight in a directory (not through a
mount), quickly and the same way every time, and check a tree against
what was built (issue 42: many inodes through one mount).

Entry i is, by i % 20: a regular file fI (0-11, 18, 19) holding content(i),
a symlink lI to the file made just before it (12) or to nowhere (13), a
hard link hI to that file (14), a FIFO pI (15), a character device cI
(16: /dev/null's numbers; a FIFO where the caller may not make devices),
an empty directory eI (17).  Entries go FANOUT to a directory, directories
64 to a parent: dNN/dNNNN/.  Every directory counts as an entry too.

    mktree.py DIR N        builds N entries in DIR (which must be empty)

As a module: build(root, n) returns the model, {relative path: (kind,
data)}, kind one of 'f' (data: content id), 'l' (target), 'p', 'c', 'd';
check(root, model) compares a tree with it (see there).
"""

import os
import stat
import sys

FANOUT = 100
TOP_FANOUT = 64
FILE_KINDS = {12: 'l', 13: 'l', 14: 'h', 15: 'p', 16: 'c', 17: 'e'}


def content(i):
    """What file i holds: a few bytes that name it, not block sized."""
    return b'%d\n' % i * (1 + i % 7)


def kind_of(i):
    return FILE_KINDS.get(i % 20, 'f')


def leaf_dir(i):
    """The directory of entry i, relative."""
    k = i // FANOUT
    return os.path.join('d%02d' % (k // TOP_FANOUT), 'd%04d' % k)


def build(root, n, devices=None):
    """N entries (directories included) under ROOT, which is empty.
    Devices where the caller may make them (root), else FIFOs in their
    place.  Returns the model."""
    if devices is None:
        devices = os.geteuid() == 0
    model = {}
    made = 0
    i = 0
    last_file = None
    dirfd = -1
    cur = None
    try:
        while made < n:
            d = leaf_dir(i)
            if d != cur:
                top = os.path.dirname(d)
                if top not in model:
                    os.mkdir(os.path.join(root, top))
                    model[top] = ('d', None)
                    made += 1
                os.mkdir(os.path.join(root, d))
                model[d] = ('d', None)
                made += 1
                if dirfd >= 0:
                    os.close(dirfd)
                dirfd = os.open(os.path.join(root, d), os.O_RDONLY | os.O_DIRECTORY)
                cur = d
                last_file = None
                continue
            k = kind_of(i)
            if k in ('l', 'h') and last_file is None:
                k = 'f'
            name = '%s%d' % ('f' if k == 'f' else k, i)
            rel = os.path.join(d, name)
            if k == 'f':
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dirfd)
                os.write(fd, content(i))
                os.close(fd)
                model[rel] = ('f', i)
                last_file = (name, i)
            elif k == 'l':
                target = last_file[0] if i % 20 == 12 else 'nowhere%d' % i
                os.symlink(target, name, dir_fd=dirfd)
                model[rel] = ('l', target)
            elif k == 'h':
                os.link(last_file[0], name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
                model[rel] = ('f', last_file[1])
            elif k == 'p' or (k == 'c' and not devices):
                os.mkfifo(name, 0o640, dir_fd=dirfd)
                model[rel] = ('p', None)
            elif k == 'c':
                os.mknod(name, 0o640 | stat.S_IFCHR, os.makedev(1, 3), dir_fd=dirfd)
                model[rel] = ('c', None)
            else:
                os.mkdir(name, 0o755, dir_fd=dirfd)
                model[rel] = ('d', None)
            made += 1
            i += 1
    finally:
        if dirfd >= 0:
            os.close(dirfd)
    return model


KIND_OF_MODE = {stat.S_IFREG: 'f', stat.S_IFLNK: 'l', stat.S_IFIFO: 'p',
                stat.S_IFCHR: 'c', stat.S_IFDIR: 'd'}


def check(root, model, read=True, on_entry=None):
    """Walk ROOT (find: every directory listed, every entry lstat'ed) and
    read every regular file (with READ): a list of differences from MODEL
    (empty when none), at most 20.  ON_ENTRY(count) is called now and
    then, for sampling the daemon meanwhile."""
    diffs = []
    seen = 0

    def diff(*what):
        if len(diffs) < 20:
            diffs.append(' '.join(str(w) for w in what))

    found = set()
    stack = ['']
    while stack:
        rel_dir = stack.pop()
        with os.scandir(os.path.join(root, rel_dir)) as it:
            entries = list(it)
        for de in entries:
            rel = os.path.join(rel_dir, de.name)
            found.add(rel)
            seen += 1
            if on_entry and seen % 1000 == 0:
                on_entry(seen)
            st = os.lstat(de.path)
            kind = KIND_OF_MODE.get(stat.S_IFMT(st.st_mode), '?')
            want = model.get(rel)
            if want is None:
                diff('extra', rel, kind)
                continue
            if kind != want[0]:
                diff('kind', rel, kind, 'want', want[0])
                continue
            if kind == 'd':
                stack.append(rel)
            elif kind == 'l' and os.readlink(de.path) != want[1]:
                diff('target', rel, os.readlink(de.path), 'want', want[1])
            elif kind == 'f':
                if st.st_size != len(content(want[1])):
                    diff('size', rel, st.st_size, 'want', len(content(want[1])))
                elif read:
                    with open(de.path, 'rb') as f:
                        data = f.read()
                    if data != content(want[1]):
                        diff('content', rel, data[:20], 'want', content(want[1])[:20])
    for rel in model:
        if rel not in found:
            diff('missing', rel)
    return diffs


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit('usage: mktree.py DIR N')
    m = build(sys.argv[1], int(sys.argv[2]))
    kinds = {}
    for k, _ in m.values():
        kinds[k] = kinds.get(k, 0) + 1
    print('%d entries: %s' % (len(m), ', '.join('%s %d' % kv for kv in sorted(kinds.items()))))
