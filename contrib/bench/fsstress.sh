#!/bin/bash
# fsstress.sh: issue 42's held-out stress, as it was measured: xfstests'
# fsstress (8 processes x 40,000 operations by default) on a foliofs mount
# whose daemon has RLIMIT_NOFILE 20,000 (soft and hard, set once it runs),
# the daemon's stats after it; then unmount, remount, read every file
# (find -type f | xargs cat) and compare the tree through the mount with
# the backing directory (type, mode, size, links, owner, device, symlink
# target, SHA-256 of each regular file).  A benchmark, not a test
# (tests/test_many_inodes.py::test_fsstress is the short one).  Run as root.
#
# fsstress is not packaged in Debian 12: this script builds it from an
# xfstests checkout named by XFSTESTS (e.g. a snapshot of kdave/xfstests or
# git://git.kernel.org/pub/scm/fs/xfs/xfstests-dev.git), outside the
# project, with the XFS headers of Debian's xfslibs-dev; FSSTRESS names a
# binary already built instead.  Without either it says why and exits 77.
#
# Environment: FOLIOFS (default <repo>/build-rel/foliofs, else
# build/foliofs), XFSTESTS or FSSTRESS, PYTHON (default /usr/bin/python3).
set -euo pipefail

usage() {
	cat <<EOF
usage: $0 [-p PROCS] [-n OPS] [-s SEED] [-l NOFILE] [-o "foliofs options"] [-d WORKDIR] OUTDIR
  -p PROCS   fsstress processes (default 8)
  -n OPS     operations per process (default 40000)
  -s SEED    fsstress's seed (default 42)
  -l NOFILE  the daemon's RLIMIT_NOFILE, soft and hard (default 20000)
  -o OPTS    foliofs's -o options (default: none)
  -d DIR     work directory (default: a new one under /var/tmp)
Writes OUTDIR/summary.txt (and the listings compared) and prints it.
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
procs=8 ops=40000 seed=42 nofile=20000 opts= work=
while getopts p:n:s:l:o:d:h c; do
	case $c in
	p) procs=$OPTARG ;;
	n) ops=$OPTARG ;;
	s) seed=$OPTARG ;;
	l) nofile=$OPTARG ;;
	o) opts=$OPTARG ;;
	d) work=$OPTARG ;;
	*) usage; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# = 1 ] || { usage; exit 2; }
out=$1
if [ -z "${FOLIOFS:-}" ]; then
	FOLIOFS=$repo/build-rel/foliofs
	[ -x "$FOLIOFS" ] || FOLIOFS=$repo/build/foliofs
fi
[ -x "$FOLIOFS" ] || { echo "fsstress.sh: no foliofs binary at $FOLIOFS" >&2; exit 1; }
PYTHON=${PYTHON:-/usr/bin/python3}
[ "$(id -u)" = 0 ] || { echo "fsstress.sh: run as root" >&2; exit 1; }

work=${work:-$(mktemp -d /var/tmp/fsstress.XXXXXX)}
mkdir -p "$work/b" "$work/m" "$out"
daemon=
cleanup() {
	if mountpoint -q "$work/m"; then fusermount3 -u "$work/m" || umount -l "$work/m"; fi
	[ -n "$daemon" ] && wait "$daemon" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# fsstress, built from $XFSTESTS's ltp/fsstress.c without its autoconf:
# the HAVE_ macros its headers ask for, all true on Debian 12.
if [ -z "${FSSTRESS:-}" ]; then
	if [ -z "${XFSTESTS:-}" ] || [ ! -f "$XFSTESTS/ltp/fsstress.c" ]; then
		echo "fsstress.sh: set XFSTESTS to an xfstests checkout (or FSSTRESS to an fsstress binary)"
		exit 77
	fi
	if [ ! -f /usr/include/xfs/xfs.h ]; then
		echo "fsstress.sh: fsstress needs the XFS headers (apt-get install xfslibs-dev)"
		exit 77
	fi
	mkdir -p "$work/fsstress"
	: >"$work/fsstress/config.h"
	defs=(HAVE_RENAMEAT2 HAVE_XFS_XFS_H HAVE_SYS_TYPES_H HAVE_SYS_STAT_H HAVE_SYS_STATVFS_H
	      HAVE_SYS_TIME_H HAVE_SYS_IOCTL_H HAVE_SYS_WAIT_H HAVE_MALLOC_H HAVE_DIRENT_H
	      HAVE_STDLIB_H HAVE_UNISTD_H HAVE_ERRNO_H HAVE_STRING_H HAVE_SYS_FCNTL_H
	      HAVE_SYS_PARAM_H HAVE_LIBGEN_H HAVE_ASSERT_H STDC_HEADERS HAVE_STRINGS_H
	      HAVE_LINUX_FALLOC_H HAVE_SYS_MMAN_H HAVE_LINUX_FIEMAP_H HAVE_SYS_PRCTL_H
	      HAVE_COPY_FILE_RANGE _GNU_SOURCE _FILE_OFFSET_BITS=64)
	cc -O2 -w -I"$work/fsstress" -I"$XFSTESTS/include" -I"$XFSTESTS/src" \
		"${defs[@]/#/-D}" -o "$work/fsstress/fsstress" "$XFSTESTS/ltp/fsstress.c" -lm
	FSSTRESS=$work/fsstress/fsstress
fi

wait_mounted() {
	local i
	for i in $(seq 200); do
		mountpoint -q "$work/m" && { stat "$work/m" >/dev/null; return 0; }
		sleep 0.1
	done
	echo "fsstress.sh: foliofs did not mount" >&2
	exit 1
}

mount_foliofs() {
	"$FOLIOFS" -f ${opts:+-o "$opts"} "$work/b" "$work/m" 2>>"$out/daemon.log" & daemon=$!
	wait_mounted
	prlimit --pid "$daemon" --nofile="$nofile:$nofile"
}

umount_foliofs() {
	fusermount3 -u "$work/m"
	wait "$daemon" && echo "daemon exit 0" || echo "daemon exit $?"
	daemon=
}

stats() {
	grep -E '^(inodes|kept_inodes|fds|fd_budget|fd_cache_max|path_fds|fds_idle_closed|fds_reopened|fds_refused|inode_refinds|inode_stale|inodes_pruned) ' \
		"$work/m/.foliofs/stats" | tr '\n' ' '
	echo "rss_kib $(awk '/^VmRSS:/ {print $2}' "/proc/$daemon/status") proc_fds $(ls "/proc/$daemon/fd" | wc -l)"
}

# listing DIR: one sorted line per entry: path, mode, size (0 for a
# directory), links, owner, device numbers, and a symlink's target or a
# regular file's SHA-256.
listing() {
	"$PYTHON" - "$1" <<'PY'
import hashlib, os, stat, sys
root = sys.argv[1]
out = []


def entry(p):
    st = os.lstat(p)
    extra = ''
    if stat.S_ISLNK(st.st_mode):
        extra = os.readlink(p)
    elif stat.S_ISREG(st.st_mode):
        with open(p, 'rb') as f:
            extra = hashlib.sha256(f.read()).hexdigest()
    size = 0 if stat.S_ISDIR(st.st_mode) else st.st_size
    return '%s %o %d %d %d:%d %d:%d %s' % (
        os.path.relpath(p, root), st.st_mode, size, st.st_nlink, st.st_uid,
        st.st_gid, os.major(st.st_rdev), os.minor(st.st_rdev), extra)


def failed(e):
    out.append('%s ERROR %s' % (os.path.relpath(e.filename, root), e.strerror))


for d, dirs, files in os.walk(root, onerror=failed):
    for n in dirs + files:
        try:
            out.append(entry(os.path.join(d, n)))
        except OSError as e:
            failed(e)
print('\n'.join(sorted(out)))
PY
}

: >"$out/daemon.log"
{
	echo "fsstress -p $procs -n $ops -s $seed; foliofs $("$FOLIOFS" -V | head -1) ${opts:+-o $opts}; RLIMIT_NOFILE $nofile; $(date -u +%FT%TZ); kernel $(uname -r)"
	mount_foliofs
	mkdir "$work/m/work"
	t0=$(date +%s)
	"$FSSTRESS" -p "$procs" -n "$ops" -s "$seed" -d "$work/m/work" >"$out/fsstress.out" 2>&1 &&
		echo "fsstress exit 0, $(($(date +%s) - t0)) s" || echo "fsstress exit $?"
	echo "after fsstress: $(stats)"
	umount_foliofs
	echo "backing: $(find "$work/b" -mindepth 1 -printf '%y\n' | sort | uniq -c | tr -s ' \n' ' ')"
	mount_foliofs
	(cd "$work/m" && find . -type f -print0 | xargs -0 -r cat >/dev/null) 2>"$out/cat.err" &&
		echo "find -type f | xargs cat: ok" || echo "find -type f | xargs cat: exit $?, $(wc -l <"$out/cat.err") errors"
	listing "$work/m" >"$out/mount.txt" 2>>"$out/cat.err"
	echo "after remount and reading every file: $(stats)"
	umount_foliofs
	listing "$work/b" >"$out/backing.txt"
	cmp -s "$out/mount.txt" "$out/backing.txt" &&
		echo "mount == backing ($(wc -l <"$out/backing.txt") lines)" ||
		echo "mount != backing: $(diff "$out/mount.txt" "$out/backing.txt" | grep -c '^[<>]') lines differ"
} | tee "$out/summary.txt"
