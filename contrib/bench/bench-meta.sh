#!/bin/bash
# bench-meta.sh: metadata rates (create, stat, open, rename, unlink of
# NFILES files in one directory; contrib/bench/bench-meta.c) on a plain directory,
# on foliofs with its default timeouts and with the timeouts given by -o,
# and on libfuse's passthrough_hp when PTHP names its binary.  Targets take
# turns first; the median of the rounds is printed with its ratio to native.
# A benchmark, not a test.  Run as root (the mounts are root's).
#
# Environment: FOLIOFS (daemon binary, default <repo>/build-rel/foliofs,
# else build/foliofs), PTHP (passthrough_hp, built outside the project from
# a libfuse snapshot; optional).
set -euo pipefail

usage() {
	cat <<EOF
usage: $0 [-n NFILES] [-r ROUNDS] [-o "foliofs options for the second foliofs target"] [-d WORKDIR]
  -n NFILES  files per phase (default 5000)
  -r ROUNDS  rounds, targets taking turns first (default 3)
  -o OPTS    options of the target foliofs-opts (default attr_timeout=86400)
  -d DIR     work directory on the disk to measure (default: a new one under /var/tmp)
EOF
}

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
nfiles=5000 rounds=3 opts=attr_timeout=86400 work=
while getopts n:r:o:d:h c; do
	case $c in
	n) nfiles=$OPTARG ;;
	r) rounds=$OPTARG ;;
	o) opts=$OPTARG ;;
	d) work=$OPTARG ;;
	*) usage; exit 2 ;;
	esac
done
if [ -z "${FOLIOFS:-}" ]; then
	FOLIOFS=$repo/build-rel/foliofs
	[ -x "$FOLIOFS" ] || FOLIOFS=$repo/build/foliofs
fi
[ -x "$FOLIOFS" ] || { echo "bench-meta: no foliofs binary at $FOLIOFS" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bench-meta: run as root" >&2; exit 1; }
# Each inode the kernel keeps holds a descriptor in the daemons.
ulimit -n "$(ulimit -Hn)"

work=${work:-$(mktemp -d /var/tmp/bench-meta.XXXXXX)}
mkdir -p "$work/back" "$work/mnt" "$work/native"
tool=$work/bench-meta
cc -O2 -Wall -Wextra -Werror -o "$tool" "$here/bench-meta.c"

targets=(native foliofs foliofs-opts)
[ -n "${PTHP:-}" ] && targets+=(passthrough_hp)
daemon=

cleanup() {
	if mountpoint -q "$work/mnt"; then fusermount3 -u "$work/mnt" || umount -l "$work/mnt"; fi
	[ -n "$daemon" ] && wait "$daemon" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

wait_mounted() {
	local i
	for i in $(seq 100); do
		mountpoint -q "$work/mnt" && return 0
		sleep 0.1
	done
	echo "bench-meta: $1 did not mount" >&2
	exit 1
}

# run_target NAME: one run; appends "NAME PHASE RATE" lines to $work/results.
run_target() {
	local t=$1 dir
	rm -rf "$work/back/d" "$work/native/d"
	case $t in
	native)
		mkdir "$work/native/d"; dir=$work/native/d ;;
	foliofs)
		mkdir "$work/back/d"
		"$FOLIOFS" -f "$work/back" "$work/mnt" & daemon=$!
		wait_mounted "$t"; dir=$work/mnt/d ;;
	foliofs-opts)
		mkdir "$work/back/d"
		"$FOLIOFS" -f -o "$opts" "$work/back" "$work/mnt" & daemon=$!
		wait_mounted "$t"; dir=$work/mnt/d ;;
	passthrough_hp)
		mkdir "$work/back/d"
		"$PTHP" --foreground "$work/back" "$work/mnt" & daemon=$!
		wait_mounted "$t"; dir=$work/mnt/d ;;
	esac
	sync
	"$tool" "$dir" "$nfiles" | sed "s/^/$t /" >>"$work/results"
	if [ "$t" != native ]; then
		fusermount3 -u "$work/mnt"
		wait "$daemon"
		daemon=
	fi
}

: >"$work/results"
for r in $(seq "$rounds"); do
	n=${#targets[@]}
	for i in $(seq 0 $((n - 1))); do
		run_target "${targets[$(( (i + r - 1) % n ))]}"
	done
done

echo "metadata ops/s, median of $rounds rounds, $nfiles files (ratio to native); foliofs-opts: -o $opts"
python3 - "$work/results" "${targets[@]}" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
targets = sys.argv[2:]
phases = []
for t, p, v in rows:
    if p not in phases:
        phases.append(p)
med = {(t, p): statistics.median(float(v) for tt, pp, v in rows if tt == t and pp == p)
       for t in targets for p in phases}
print('%-8s' % 'phase' + ''.join('%24s' % t for t in targets))
for p in phases:
    cells = ['%14.0f (%5.2fx)' % (med[t, p], med[t, p] / med['native', p]) for t in targets]
    print('%-8s' % p + ''.join('%24s' % c for c in cells))
EOF
