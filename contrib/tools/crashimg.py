#!/usr/bin/python3
"""crashimg.py: crash images from a foliofs write log (-o write_log=FILE).

Given the log and a copy of BACKING taken before the mount (the base), build
directories that hold a state BACKING could be left in by a crash at a
chosen point of the log.  Mount such an image (through foliofs or not) and
let the application recover on it.

The model: a device that honours flushes and nothing else.
- A data write to file F is durable at a cut point once an fsync or
  fdatasync of F that began after the write was recorded completed at or
  before the cut (a sync record names the log position it began at).  A
  write the backing file system failed never becomes durable.
- Every other write recorded before the cut may be on the device whole, in
  part or not at all: any subset of them, each possibly torn at a block
  boundary (a block-granular prefix of it).
- Namespace changes (create, link, unlink, rename), truncate and fallocate
  are metadata, which a journaling file system commits in order: they are
  applied as a prefix of the log.  The `nsdrop` images also drop a suffix
  of the namespace changes: those after the last one that is known
  committed, that is followed (before the cut) by a sync, begun after it,
  of its directory or of the file it names (a journal commit takes every
  earlier change with it).
Writes are applied in log order, so a later write to the same bytes wins;
writes to a file that has no name at that point (unlinked, or its creation
dropped) vanish with it.  Writes are recorded when issued, so a write in
flight at the cut is among the optional ones.

A cut at record I is a crash after record I was made and before the next
one.  The after-flush states are the cuts at completed syncs (fsync,
fdatasync, fsyncdir: `cuts` lists them, and the end of the log); images
with writes left out are most telling at the record before a sync that
covers many writes, where `plan` puts them.  Image kinds at a cut:
  flush   every record up to the cut applied in full
  subset  durable writes, and each other write with probability 1/2
  torn    durable writes, and each other write cut to a random number of
          its blocks (0 .. all; blocks of --block bytes, file-aligned)
  nsdrop  subset, and a random suffix of the uncommitted metadata
          changes (namespace, truncate, fallocate) dropped
Everything random comes from --seed.

Usage:
  crashimg.py dump LOG                  the records, one per line
  crashimg.py cuts LOG                  the after-flush cut points: index,
                                        seq, time
  crashimg.py plan LOG --count N [--seed S]
                                        N images chosen across the log:
                                        "cut kind seed" lines (see plan())
  crashimg.py build LOG BASE OUT --cut I [--kind K] [--seed S] [--block B]
                                        build one image in OUT (new)

A damaged log (a bad magic, checksum or type, a sequence number out of
turn, time going back) is an error naming the byte offset of the record.
Only an incomplete last record (its header, checksummed, says it runs past
the end of the file), as a daemon killed in the middle of writing it
leaves, is ignored: its change was not made (a write is recorded before it
is issued, other changes after they completed).

Python rather than C: the work is copying the base and applying writes,
which is I/O; the checker that uses it is Python; and the model reads
better here than in C.
"""

import argparse
import os
import random
import stat
import struct
import subprocess
import sys
import zlib

MAGIC = b"FOLIOWLG"
VERSION = 1
FILE_HDR = 64
REC_HDR = 88
REC_MAGIC = 0x43455257

ENTRY, ENTRIES_END, WRITE, WRITE_FAILED, FSYNC, TRUNCATE, FALLOCATE, \
    CREATE, LINK, UNLINK, RENAME, FSYNCDIR = range(1, 13)
TYPE_NAMES = {ENTRY: "entry", ENTRIES_END: "entries_end", WRITE: "write",
              WRITE_FAILED: "write_failed", FSYNC: "fsync",
              TRUNCATE: "truncate", FALLOCATE: "fallocate", CREATE: "create",
              LINK: "link", UNLINK: "unlink", RENAME: "rename",
              FSYNCDIR: "fsyncdir"}
NAMESPACE = (CREATE, LINK, UNLINK, RENAME)
# Metadata too, applied with the namespace as a prefix of the log.
SIZE_CHANGES = (TRUNCATE, FALLOCATE)
SYNCS = (FSYNC, FSYNCDIR)
KINDS = ("flush", "subset", "torn", "nsdrop")

AT_REMOVEDIR = 0x200
RENAME_EXCHANGE = 2
FALLOC_FL_KEEP_SIZE = 1
FALLOC_FL_PUNCH_HOLE = 2
FALLOC_FL_ZERO_RANGE = 0x10

_HDR = struct.Struct("<IHHHHIQQQQQQQQII")


class LogError(Exception):
    pass


class Record:
    __slots__ = ("index", "offset", "type", "mode", "seq", "time_ns", "ino",
                 "dir", "newdir", "off", "len", "name", "newname",
                 "data_off", "data_len")

    def describe(self):
        t = self.type
        s = "%d seq=%d t=%d %s" % (self.index, self.seq, self.time_ns,
                                   TYPE_NAMES[t])
        if t == WRITE:
            return s + " ino=%d off=%d len=%d" % (self.ino, self.off,
                                                  self.data_len)
        if t == WRITE_FAILED:
            return s + " ino=%d write_seq=%d errno=%d" % (self.ino, self.dir,
                                                          self.mode)
        if t in SYNCS:
            return s + " ino=%d%s covers<%d" % (
                self.ino, " data" if self.mode else "", self.dir)
        if t == TRUNCATE:
            return s + " ino=%d size=%d" % (self.ino, self.off)
        if t == FALLOCATE:
            return s + " ino=%d mode=%#x off=%d len=%d" % (
                self.ino, self.mode, self.off, self.len)
        if t == RENAME:
            return s + " %d/%s -> %d/%s flags=%d" % (
                self.dir, self.name, self.newdir, self.newname, self.mode)
        if t == ENTRIES_END:
            return s
        return s + " ino=%d %d/%s mode=%o" % (self.ino, self.dir, self.name,
                                              self.mode)


class Log:
    """The records of a write log; data stays in the file (read on use)."""

    def __init__(self, path):
        self.path = path
        self.records = []
        self.truncated_at = None     # offset of an incomplete last record
        self._read()
        self.failed = {r.dir for r in self.records if r.type == WRITE_FAILED}

    def _read(self):
        size = os.path.getsize(self.path)
        with open(self.path, "rb") as f:
            hdr = f.read(FILE_HDR)
            if len(hdr) < FILE_HDR or hdr[:8] != MAGIC:
                raise LogError("%s: offset 0: not a foliofs write log"
                               % self.path)
            version, hsize, rsize = struct.unpack_from("<III", hdr, 8)
            if version != VERSION or hsize != FILE_HDR or rsize != REC_HDR:
                raise LogError("%s: offset 8: version %d (header %d, record"
                               " %d) is not version %d" % (
                                   self.path, version, hsize, rsize, VERSION))
            if zlib.crc32(hdr[:60]) != struct.unpack_from("<I", hdr, 60)[0]:
                raise LogError("%s: offset 60: header checksum mismatch"
                               % self.path)
            self.start_ns = struct.unpack_from("<Q", hdr, 24)[0]
            pos = FILE_HDR
            last_time = 0
            while pos < size:
                f.seek(pos)
                h = f.read(REC_HDR)
                if len(h) < REC_HDR:
                    self.truncated_at = pos
                    break
                r, name_len = self._record(h, pos, last_time)
                body = r.data_off - pos - REC_HDR + r.data_len
                end = pos + REC_HDR + (body + 7) // 8 * 8
                if end > size:
                    self.truncated_at = pos
                    break
                names = f.read(r.data_off - pos - REC_HDR)
                r.name = os.fsdecode(names[:name_len])
                r.newname = os.fsdecode(names[name_len:])
                crc = zlib.crc32(names)
                left = r.data_len
                while left:
                    chunk = f.read(min(left, 1 << 20))
                    crc = zlib.crc32(chunk, crc)
                    left -= len(chunk)
                if crc != struct.unpack_from("<I", h, 80)[0]:
                    raise LogError("%s: offset %d: record %d: checksum of"
                                   " its names and data mismatch"
                                   % (self.path, pos, r.index))
                last_time = r.time_ns
                self.records.append(r)
                pos = end

    def _record(self, h, pos, last_time):
        (magic, rtype, name_len, newname_len, _pad, mode, seq, time_ns, ino,
         d, newdir, off, ln, data_len, _dcrc, hcrc) = _HDR.unpack(h)
        where = "%s: offset %d" % (self.path, pos)
        if magic != REC_MAGIC:
            raise LogError("%s: bad record magic %#x" % (where, magic))
        if zlib.crc32(h[:84]) != hcrc:
            raise LogError("%s: record header checksum mismatch" % where)
        if rtype not in TYPE_NAMES:
            raise LogError("%s: unknown record type %d" % (where, rtype))
        if seq != len(self.records):
            raise LogError("%s: sequence number %d where %d was due"
                           % (where, seq, len(self.records)))
        if time_ns < last_time:
            raise LogError("%s: time goes back" % where)
        r = Record()
        r.index, r.offset, r.type, r.mode, r.seq = len(self.records), pos, \
            rtype, mode, seq
        r.time_ns, r.ino, r.dir, r.newdir, r.off, r.len = time_ns, ino, d, \
            newdir, off, ln
        r.data_off = pos + REC_HDR + name_len + newname_len
        r.data_len = data_len
        return r, name_len

    def data(self, r, length=None):
        with open(self.path, "rb") as f:
            f.seek(r.data_off)
            return f.read(r.data_len if length is None else length)

    def cut_points(self):
        """Indices of the records a crash image may end at: every sync
        and the last record."""
        cuts = [r.index for r in self.records if r.type in SYNCS]
        if self.records and (not cuts or cuts[-1] != self.records[-1].index):
            cuts.append(self.records[-1].index)
        return cuts


# ---------------------------------------------------------------- the model

def _sync_begins(records):
    """For each inode, the latest log position a completed sync of it
    among RECORDS began at: what was recorded before that is covered."""
    begin = {}
    for r in records:
        if r.type in SYNCS:
            begin[r.ino] = max(begin.get(r.ino, 0), r.dir)
    return begin


def durable_writes(log, cut):
    """Seqs of the writes at or before CUT that a completed sync of their
    file made durable."""
    begin = _sync_begins(log.records[:cut + 1])
    return {r.seq for r in log.records[:cut + 1]
            if r.type == WRITE and r.seq < begin.get(r.ino, 0)
            and r.seq not in log.failed}


def committed_namespace(log, cut, names_of):
    """Index of the last metadata record known committed at CUT (-1:
    none): a namespace record followed by a sync, begun after it, of its
    directory or of the file it names; a truncate or fallocate followed by
    one of its file.  The journal commits metadata in order, so everything
    before that record is committed too.  NAMES_OF(record) gives the inodes
    a namespace record touches (from a replay)."""
    begin = _sync_begins(log.records[:cut + 1])
    for r in reversed(log.records[:cut + 1]):
        if r.type in NAMESPACE and any(r.seq < begin.get(i, 0)
                                       for i in names_of(r)):
            return r.index
        if r.type in SIZE_CHANGES and r.seq < begin.get(r.ino, 0):
            return r.index
    return -1


class Replay:
    """Applies records to an image directory (OUT; None: only follow the
    namespace), which is kept by inode as the log names it."""

    def __init__(self, log, out):
        self.log = log
        self.out = out
        self.root = None
        self.names = {}       # (dir ino, name) -> ino
        self.links = {}       # ino -> {(dir ino, name)}
        self.mode = {}        # ino -> st_mode
        self.touched = {}     # namespace record index -> inodes it touches

    def path(self, ino):
        """A path of INO in the image, or None if it has no name."""
        if ino == self.root:
            return self.out
        for d, name in self.links.get(ino, ()):
            p = self.path(d)
            if p is not None:
                return os.path.join(p, name)
        return None

    def _add(self, d, name, ino, mode):
        self.names[(d, name)] = ino
        self.links.setdefault(ino, set()).add((d, name))
        self.mode[ino] = mode

    def _drop(self, d, name):
        ino = self.names.pop((d, name), None)
        if ino is not None:
            self.links[ino].discard((d, name))
        return ino

    def entry(self, r):
        if r.dir == 0:
            self.root = r.ino
            self.mode[r.ino] = r.mode
        else:
            self._add(r.dir, r.name, r.ino, r.mode)

    def namespace(self, r, files=True):
        """Follow namespace record R; with FILES, make the change in the
        image too."""
        a = self.names.get((r.dir, r.name))
        b = self.names.get((r.newdir, r.newname)) if r.type == RENAME else None
        self.touched[r.index] = {r.ino, r.dir, r.newdir, a, b} - {0, None}
        if files:
            self._change(r)
        if r.type in (CREATE, LINK):
            self._add(r.dir, r.name, r.ino, r.mode)
        elif r.type == UNLINK:
            self._drop(r.dir, r.name)
        elif r.mode & RENAME_EXCHANGE:
            self._drop(r.dir, r.name)
            self._drop(r.newdir, r.newname)
            self._add(r.dir, r.name, b, self.mode[b])
            self._add(r.newdir, r.newname, a, self.mode[a])
        else:
            self._drop(r.newdir, r.newname)
            self._drop(r.dir, r.name)
            if a is not None:
                self._add(r.newdir, r.newname, a, self.mode[a])

    def _change(self, r):
        dpath = self.path(r.dir)
        if dpath is None:
            return
        p = os.path.join(dpath, r.name)
        if r.type == CREATE:
            if self.names.get((r.dir, r.name)) != r.ino:
                self._make(p, r)        # else open(O_CREAT) found it there
        elif r.type == LINK:
            os.link(self.path(r.ino), p)
        elif r.type == UNLINK:
            if r.mode & AT_REMOVEDIR:
                os.rmdir(p)
            else:
                os.unlink(p)
        elif r.mode & RENAME_EXCHANGE:
            np = os.path.join(self.path(r.newdir), r.newname)
            tmp = p + ".crashimg-exchange"
            os.rename(p, tmp)
            os.rename(np, p)
            os.rename(tmp, np)
        else:
            os.rename(p, os.path.join(self.path(r.newdir), r.newname))

    def _make(self, p, r):
        mode = r.mode
        if os.path.lexists(p):          # the base disagrees: the log wins
            if os.path.isdir(p) and not os.path.islink(p):
                os.rmdir(p)
            else:
                os.unlink(p)
        if stat.S_ISDIR(mode):
            os.mkdir(p)
        elif stat.S_ISLNK(mode):
            os.symlink(self.log.data(r), p)
        elif stat.S_ISREG(mode):
            os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        else:
            os.mknod(p, mode)
        if not stat.S_ISLNK(mode):
            os.chmod(p, stat.S_IMODE(mode))

    def write(self, r, nbytes):
        p = self.path(r.ino)
        if p is None or nbytes <= 0:
            return
        fd = os.open(p, os.O_WRONLY)
        try:
            os.pwrite(fd, self.log.data(r, nbytes), r.off)
        finally:
            os.close(fd)

    def truncate(self, r):
        p = self.path(r.ino)
        if p is not None:
            os.truncate(p, r.off)

    def fallocate(self, r):
        p = self.path(r.ino)
        if p is None:
            return
        end = r.off + r.len
        size = os.path.getsize(p)
        if r.mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE):
            zend = end if not r.mode & FALLOC_FL_KEEP_SIZE else min(end, size)
            if zend > r.off:
                fd = os.open(p, os.O_WRONLY)
                try:
                    os.pwrite(fd, bytes(zend - r.off), r.off)
                finally:
                    os.close(fd)
        elif not r.mode & FALLOC_FL_KEEP_SIZE and end > size:
            os.truncate(p, end)


def torn_length(r, rng, block):
    """A block-granular prefix of write R: its length in bytes."""
    first_end = min(r.off + r.data_len, (r.off // block + 1) * block)
    cuts = [0, first_end - r.off]
    pos = first_end
    while pos < r.off + r.data_len:
        pos = min(pos + block, r.off + r.data_len)
        cuts.append(pos - r.off)
    return rng.choice(cuts)


def build(log, base, out, cut, kind="flush", seed=0, block=4096):
    """Build the image of KIND at record index CUT in OUT (which must not
    exist) from the copy BASE.  Returns a summary dict: the writes kept
    whole, torn, dropped, and the namespace records dropped."""
    if kind not in KINDS:
        raise ValueError("kind %r: not one of %s" % (kind, ", ".join(KINDS)))
    if not 0 <= cut < len(log.records):
        raise ValueError("cut %d: the log has records 0 .. %d"
                         % (cut, len(log.records) - 1))
    if os.path.lexists(out):
        raise ValueError("%s exists" % out)
    rng = random.Random("%d/%d/%s" % (seed, cut, kind))
    subprocess.run(["cp", "-a", "--", base, out], check=True)
    durable = durable_writes(log, cut)
    rep = Replay(log, out)
    records = log.records[:cut + 1]
    drop_from = cut + 1
    if kind == "nsdrop":
        drop_from = _ns_drop_from(log, records, cut, rng)
    summary = {"cut": cut, "kind": kind, "seed": seed,
               "time_ns": records[-1].time_ns, "durable": len(durable),
               "whole": 0, "torn": 0, "dropped": 0, "ns_dropped": 0}
    for r in records:
        if r.type == ENTRY:
            rep.entry(r)
        elif r.type in NAMESPACE:
            if r.index >= drop_from:
                summary["ns_dropped"] += 1
            else:
                rep.namespace(r)
        elif r.type in SIZE_CHANGES and r.index >= drop_from:
            summary["ns_dropped"] += 1     # metadata: dropped with the suffix
        elif r.type == TRUNCATE:
            rep.truncate(r)
        elif r.type == FALLOCATE:
            rep.fallocate(r)
        elif r.type == WRITE:
            n = _write_length(r, kind, r.seq in durable, rng, block)
            key = "whole" if n == r.data_len else "dropped" if n == 0 \
                else "torn"
            summary[key] += 1
            rep.write(r, n)
    return summary


def _write_length(r, kind, durable, rng, block):
    if durable or kind == "flush":
        return r.data_len
    if kind == "torn":
        return torn_length(r, rng, block)
    return r.data_len if rng.random() < 0.5 else 0


def _ns_drop_from(log, records, cut, rng):
    """Index from which namespace records are dropped in an nsdrop image:
    one of those after the last committed one, at random."""
    probe = Replay(log, None)
    for r in records:
        if r.type == ENTRY:
            probe.entry(r)
        elif r.type in NAMESPACE:
            probe.namespace(r, files=False)
    last = committed_namespace(log, cut, lambda r: probe.touched[r.index])
    later = [r.index for r in records if r.type in NAMESPACE + SIZE_CHANGES
             and r.index > last]
    return rng.choice(later) if later else cut + 1


def pending_writes(log):
    """For every record index I, how many writes a crash right after
    record I may leave out (recorded, not yet covered by a sync)."""
    pending = {}          # ino -> seqs of its writes not covered yet
    total = 0
    out = []
    for r in log.records:
        if r.type == WRITE:
            pending.setdefault(r.ino, []).append(r.seq)
            total += 1
        elif r.type == FSYNC:
            left = [s for s in pending.get(r.ino, ()) if s >= r.dir]
            total -= len(pending.get(r.ino, ())) - len(left)
            pending[r.ino] = left
        out.append(total)
    return out


def plan(log, count, seed=0):
    """COUNT (cut, kind, seed) triples spread over the log: the end of the
    log in full first; then the log is split into COUNT - 1 stretches of
    records and each gets one image, the kinds in turn.  A flush image
    takes a random sync of its stretch; the others take the record with
    the most writes that may be left out (the moment a big sync was still
    in flight), at random among equals."""
    rng = random.Random(seed)
    recs = log.records
    if not recs or count <= 0:
        return []
    first = next((r.index + 1 for r in recs if r.type == ENTRIES_END), 0)
    pending = pending_writes(log)
    out = [(len(recs) - 1, "flush", rng.randrange(1 << 32))]
    span = max(len(recs) - first, 1)
    for k in range(1, count):
        lo = first + (k - 1) * span // (count - 1)
        hi = max(lo + 1, first + k * span // (count - 1))
        stretch = range(min(lo, len(recs) - 1), min(hi, len(recs)))
        kind = KINDS[k % len(KINDS)]
        if kind == "flush":
            syncs = [i for i in stretch if recs[i].type in SYNCS]
            cut = rng.choice(syncs or list(stretch))
        else:
            most = max(pending[i] for i in stretch)
            cut = rng.choice([i for i in stretch if pending[i] == most])
        out.append((cut, kind, rng.randrange(1 << 32)))
    return out


# -------------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("dump")
    p.add_argument("log")
    p = sub.add_parser("cuts")
    p.add_argument("log")
    p = sub.add_parser("plan")
    p.add_argument("log")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("build")
    p.add_argument("log")
    p.add_argument("base")
    p.add_argument("out")
    p.add_argument("--cut", type=int, required=True)
    p.add_argument("--kind", choices=KINDS, default="flush")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--block", type=int, default=4096)
    a = ap.parse_args(argv)
    try:
        log = Log(a.log)
    except (LogError, OSError) as e:
        sys.stderr.write("crashimg: %s\n" % e)
        return 1
    if log.truncated_at is not None:
        sys.stderr.write("crashimg: %s: incomplete last record at offset %d"
                         " ignored\n" % (a.log, log.truncated_at))
    if a.cmd == "dump":
        for r in log.records:
            print(r.describe())
    elif a.cmd == "cuts":
        for i in log.cut_points():
            r = log.records[i]
            print("%d seq=%d t=%d %s" % (i, r.seq, r.time_ns,
                                         TYPE_NAMES[r.type]))
    elif a.cmd == "plan":
        for cut, kind, s in plan(log, a.count, a.seed):
            print(cut, kind, s)
    else:
        try:
            s = build(log, a.base, a.out, a.cut, a.kind, a.seed, a.block)
        except (ValueError, OSError, subprocess.CalledProcessError) as e:
            sys.stderr.write("crashimg: %s\n" % e)
            return 1
        print("cut %(cut)d %(kind)s seed %(seed)d: %(durable)d durable,"
              " %(whole)d whole, %(torn)d torn, %(dropped)d dropped,"
              " %(ns_dropped)d metadata changes dropped" % s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
