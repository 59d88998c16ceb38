#!/bin/bash
# bench-inodes.sh: find + stat of a tree of many entries (a million by
# default; tests/tools/mktree.py builds it straight in the backing
# directory), cold (the kernel's dentries and inodes dropped first) and
# warm (right after), natively, through foliofs and through libfuse's
# passthrough_hp when PTHP names its binary (issue 42).  Each FUSE daemon
# is sampled during its walks: most descriptors (/proc/PID/fd) and most
# resident memory (VmRSS); foliofs's stats are kept after each walk.
# A benchmark, not a test.  Run as root (drop_caches, the mounts).
#
# Environment: FOLIOFS (daemon binary, default <repo>/build-rel/foliofs,
# else build/foliofs), FOLIOFS_B (another foliofs binary, e.g. a build of
# the commit before, as target foliofs-b; optional), PTHP (passthrough_hp,
# built outside the project from a libfuse snapshot; optional), PYTHON
# (default /usr/bin/python3).
set -euo pipefail

usage() {
	cat <<EOF
usage: $0 [-n ENTRIES] [-r ROUNDS] [-o "foliofs options"] [-d WORKDIR] [-k]
  -n ENTRIES  entries of the tree (default 1000000)
  -r ROUNDS   rounds of cold + warm per target, targets taking turns (default 2)
  -o OPTS     foliofs's -o options (default: none)
  -d DIR      work directory on the disk to measure (default: a new one under /var/tmp)
  -k          keep the work directory (and its tree) afterwards
Prints one line per walk: target, round, cold|warm, seconds, entries seen,
errors, the daemon's most descriptors and most RSS (KiB); then foliofs's
stats after its last walk.  Results also in WORKDIR/results.
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
entries=1000000 rounds=2 opts= work= keep=
while getopts n:r:o:d:kh c; do
	case $c in
	n) entries=$OPTARG ;;
	r) rounds=$OPTARG ;;
	o) opts=$OPTARG ;;
	d) work=$OPTARG ;;
	k) keep=1 ;;
	*) usage; exit 2 ;;
	esac
done
if [ -z "${FOLIOFS:-}" ]; then
	FOLIOFS=$repo/build-rel/foliofs
	[ -x "$FOLIOFS" ] || FOLIOFS=$repo/build/foliofs
fi
PYTHON=${PYTHON:-/usr/bin/python3}
[ -x "$FOLIOFS" ] || { echo "bench-inodes: no foliofs binary at $FOLIOFS" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench-inodes: run as root" >&2; exit 1; }

work=${work:-$(mktemp -d /var/tmp/bench-inodes.XXXXXX)}
mkdir -p "$work/mnt"
daemon= sampler=

cleanup() {
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null || true
	if mountpoint -q "$work/mnt"; then fusermount3 -u "$work/mnt" || umount -l "$work/mnt"; fi
	[ -n "$daemon" ] && wait "$daemon" 2>/dev/null || true
	[ -n "$keep" ] || rm -rf "$work"
}
trap cleanup EXIT

if [ ! -f "$work/tree.done" ]; then
	rm -rf "$work/tree"
	mkdir "$work/tree"
	echo "building $entries entries in $work/tree"
	"$PYTHON" "$repo/tests/tools/mktree.py" "$work/tree" "$entries"
	touch "$work/tree.done"
fi

wait_mounted() {
	local i
	for i in $(seq 200); do
		mountpoint -q "$work/mnt" && return 0
		sleep 0.1
	done
	echo "bench-inodes: $1 did not mount" >&2
	exit 1
}

# sample PID FILE: the largest descriptor count and VmRSS of PID, into FILE,
# until killed.
sample() {
	local pid=$1 out=$2 fds rss mf=0 mr=0
	while kill -0 "$pid" 2>/dev/null; do
		fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
		rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
		[ "$fds" -gt "$mf" ] && mf=$fds
		[ "${rss:-0}" -gt "$mr" ] && mr=$rss
		echo "$mf $mr" >"$out"
		sleep 0.2
	done
}

# walk TARGET ROUND KIND DIR: find + stat of every entry under DIR.
walk() {
	local t=$1 r=$2 kind=$3 dir=$4 t0 t1 n err
	if [ "$kind" = cold ]; then
		sync
		# Alone, as tests/conftest.py's drop_caches tests: a drop evicts
		# what another pytest session's test relies on.
		flock -x "${TMPDIR:-/tmp}/foliofs-tests-caches.lock" \
			sh -c 'echo 2 >/proc/sys/vm/drop_caches'
	fi
	echo "0 0" >"$work/sample"
	if [ -n "$daemon" ]; then
		sample "$daemon" "$work/sample" & sampler=$!
	fi
	t0=$(date +%s.%N)
	# find exits 1 after an error (passthrough_hp out of descriptors): counted.
	n=$(find "$dir" -printf '%s %m %n %U\n' 2>"$work/find.err" | wc -l) || true
	t1=$(date +%s.%N)
	err=$(wc -l <"$work/find.err")
	if [ -n "$sampler" ]; then
		sleep 0.3
		kill "$sampler" 2>/dev/null || true
		wait "$sampler" 2>/dev/null || true
		sampler=
	fi
	printf '%-14s %s %-4s %8.2f %8d %6d %8s %10s\n' "$t" "$r" "$kind" \
		"$(awk "BEGIN {print $t1 - $t0}")" "$n" "$err" $(cat "$work/sample") | tee -a "$work/results"
	[ "$err" = 0 ] || head -3 "$work/find.err" >&2
}

mount_target() {
	case $1 in
	foliofs)
		"$FOLIOFS" -f ${opts:+-o "$opts"} "$work/tree" "$work/mnt" \
			2>"$work/daemon.log" & daemon=$! ;;
	foliofs-b)
		"$FOLIOFS_B" -f ${opts:+-o "$opts"} "$work/tree" "$work/mnt" \
			2>"$work/daemon.log" & daemon=$! ;;
	passthrough_hp)
		"$PTHP" --foreground "$work/tree" "$work/mnt" 2>"$work/daemon.log" & daemon=$! ;;
	esac
	wait_mounted "$1"
	stat "$work/mnt" >/dev/null
}

umount_target() {
	if [ "$1" = foliofs ]; then
		grep -E '^(inodes|max_inodes|inodes_pruned|fds|fd_budget|fd_cache_max|path_fds|fds_refused|inode_refinds|inode_stale) ' \
			"$work/mnt/.foliofs/stats" | tr '\n' ' ' >"$work/stats.$1"
		echo >>"$work/stats.$1"
	fi
	fusermount3 -u "$work/mnt"
	wait "$daemon" || echo "bench-inodes: $1 exited with $?" >&2
	daemon=
}

targets=(native foliofs)
[ -n "${FOLIOFS_B:-}" ] && targets+=(foliofs-b)
[ -n "${PTHP:-}" ] && targets+=(passthrough_hp)
echo "find + stat of $entries entries; $(date -u +%FT%TZ); kernel $(uname -r); foliofs $("$FOLIOFS" -V | head -1); RLIMIT_NOFILE $(ulimit -Sn)/$(ulimit -Hn)"
echo "foliofs: $FOLIOFS ${opts:+-o $opts}${FOLIOFS_B:+; foliofs-b: $FOLIOFS_B}"
printf '%-14s %s %-4s %8s %8s %6s %8s %10s\n' target r walk seconds entries errors max_fds max_rss_kib
: >"$work/results"
for r in $(seq "$rounds"); do
	n=${#targets[@]}
	for i in $(seq 0 $((n - 1))); do
		t=${targets[$(( (i + r - 1) % n ))]}
		if [ "$t" = native ]; then
			walk native "$r" cold "$work/tree"
			walk native "$r" warm "$work/tree"
			continue
		fi
		mount_target "$t"
		walk "$t" "$r" cold "$work/mnt"
		walk "$t" "$r" warm "$work/mnt"
		umount_target "$t"
	done
done
[ -f "$work/stats.foliofs" ] && echo "foliofs stats after its last walk: $(cat "$work/stats.foliofs")"
grep -v '^$' "$work/daemon.log" | head -5 || true
