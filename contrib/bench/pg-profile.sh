#!/bin/bash
# pg-profile.sh: where a PostgreSQL transaction's time goes, natively and on
# foliofs mounts, side by side in one run.  A measurement, not a test.
#
# For each target (native: a plain directory on the same disk; pthp,
# pthp-direct, pthp-direct-ring: libfuse's passthrough_hp, named by PTHP,
# with its defaults, with direct I/O, and with direct I/O over FUSE over
# io_uring, as contrib/tools/pgcompare.py runs it; any other NAME=OPTIONS: a
# foliofs mount with -o OPTIONS) the script makes a fresh
# cluster (initdb --data-checksums, shared_buffers=128MB,
# max_wal_size=1GB), times `pgbench -i -s SCALE`, checkpoints, and runs
# `pgbench -N -M prepared -c CLIENTS -j 2 -T SECONDS`.  Around the run it
# reads:
#   - /proc/stat: context switches and idle time of the whole machine;
#   - CPU time (user + system) of the server (the postmaster and every
#     backend it reaped), of pgbench, and of the daemon;
#   - /proc/diskstats of the disk under WORKDIR: writes, KiB written and
#     cache flushes it completed (each write or flush is a request the
#     disk driver hands to the device: on a VM, an exit to the host);
#   - the daemon's CPU time by thread name (a second line per target);
#   - on foliofs, the operations the daemon served during the run, by
#     kind, with their mean time in the daemon (a trace, -o trace=,
#     cut at two marker files created before and after the run).
# Ring targets (pthp-direct-ring, or options with uring=on) need the fuse
# module's enable_uring: as root the script sets it to Y for the run and
# puts it back after.
# and prints, per transaction: CPU microseconds of each, context switches,
# and operations.  With -P DIR the whole machine is also recorded with
# `perf record -a -g -F 999` during the run, into DIR/NAME.perf.data, and the
# daemon's pid written to DIR/NAME.pid (`perf report --pid $(cat NAME.pid)`):
# sampling every CPU at a low rate costs the daemon little, where
# following its threads (-p) slowed a ring target to a third.  Targets run
# one after the other, the first again at the end (so that drift shows);
# one server and one daemon at a time.
#
# As root the servers and daemons run as the user foliofs-test (made if
# missing); the run's files are under WORKDIR/pg-profile.XXXXXX, removed
# afterwards.  Environment: FOLIOFS (daemon, default <repo>/build/foliofs;
# use a release build), PGBIN (default /usr/lib/postgresql/15/bin), PTHP
# (passthrough_hp, for the pthp targets).
#
# Example (doc/results.md, "Where a pgbench transaction's time goes"):
#   FOLIOFS=build-rel/foliofs contrib/bench/pg-profile.sh -T 20 native \
#       writethrough=cache=writethrough direct=cache=direct
#   PTHP=.../passthrough_hp FOLIOFS=build-rel/foliofs contrib/bench/pg-profile.sh \
#       native direct=cache=direct,uring=off pthp-direct
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FOLIOFS=${FOLIOFS:-$REPO/build/foliofs}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
SIM=$(dirname "$FOLIOFS")/sim/foliofs-sim
RUN_USER=foliofs-test
DURATION=20
SCALE=20
CLIENTS=8
WORKDIR=/var/tmp
PORT=5497
HZ=$(getconf CLK_TCK)

usage() {
	cat <<EOF
usage: $0 [-T SECONDS] [-s SCALE] [-c CLIENTS] [-d WORKDIR] TARGET...
  TARGET      native, pthp, pthp-direct, pthp-direct-ring (passthrough_hp
              named by PTHP), or NAME=OPTIONS (a foliofs mount with -o OPTIONS)
  -T SECONDS  pgbench -N duration (default $DURATION)
  -s SCALE    pgbench scale (default $SCALE)
  -c CLIENTS  pgbench clients (default $CLIENTS)
  -d WORKDIR  where the clusters live (default $WORKDIR)
  -P DIR      record each run with perf record -a -g into DIR/NAME.perf.data,
              the daemon's pid in DIR/NAME.pid
  -N          no operation trace on foliofs (it costs the daemon CPU; the
              last column stays empty)
EOF
}

PERF_DIR=
TRACE=1
while getopts "T:s:c:d:P:Nh" opt; do
	case $opt in
	N) TRACE= ;;
	P) PERF_DIR=$OPTARG ;;
	T) DURATION=$OPTARG ;;
	s) SCALE=$OPTARG ;;
	c) CLIENTS=$OPTARG ;;
	d) WORKDIR=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [[ $# -eq 0 ]]; then
	usage >&2
	exit 2
fi
RING=0
for t in "$@"; do
	case $t in
	native) ;;
	pthp | pthp-direct | pthp-direct-ring)
		if [[ -z ${PTHP:-} || ! -x $PTHP ]]; then
			echo "$0: target '$t' needs PTHP set to libfuse's passthrough_hp binary" >&2
			exit 2
		fi
		[[ $t == pthp-direct-ring ]] && RING=1 ;;
	*=*) [[ $t == *uring=on* ]] && RING=1 ;;
	*)
		echo "$0: target '$t': give native, pthp, pthp-direct, pthp-direct-ring or NAME=OPTIONS" >&2
		exit 2 ;;
	esac
done
for n in "$DURATION" "$SCALE" "$CLIENTS"; do
	if ! [[ $n =~ ^[1-9][0-9]*$ ]]; then
		echo "$0: '$n' is not a positive number" >&2
		exit 2
	fi
done
[[ -x $FOLIOFS ]] || { echo "$0: no daemon at $FOLIOFS (set FOLIOFS)" >&2; exit 1; }
[[ -x $PGBIN/pgbench ]] || { echo "$0: no pgbench in $PGBIN (set PGBIN)" >&2; exit 1; }
[[ -x $SIM ]] || { echo "$0: no foliofs-sim at $SIM (it dumps the trace)" >&2; exit 1; }
if [[ -n $PERF_DIR ]]; then
	command -v perf >/dev/null || { echo "$0: -P needs perf (Debian: linux-perf)" >&2; exit 1; }
	mkdir -p "$PERF_DIR" || exit 1
fi

as_user() {	# run a shell command as the run user (or ourselves when not root)
	if [[ $EUID -eq 0 ]]; then
		runuser -u "$RUN_USER" -- sh -c "$1"
	else
		sh -c "$1"
	fi
}

if [[ $EUID -eq 0 ]]; then
	id "$RUN_USER" >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin "$RUN_USER"
	[[ -c /dev/fuse ]] && chmod 0666 /dev/fuse
fi
# Ring targets need the kernel to offer FUSE over io_uring.
URING_PARAM=/sys/module/fuse/parameters/enable_uring
URING_OLD=
if ((RING)) && [[ $(cat "$URING_PARAM" 2>/dev/null) != Y ]]; then
	if [[ ! -w $URING_PARAM ]]; then
		echo "$0: ring targets need $URING_PARAM set to Y (as root)" >&2
		exit 1
	fi
	URING_OLD=$(cat "$URING_PARAM")
fi
RUN=$(mktemp -d "$WORKDIR/pg-profile.XXXXXX")
# The disk under WORKDIR, by its name in /proc/diskstats (vda, vda1).
DISK=$(basename "$(findmnt -no SOURCE -T "$WORKDIR" 2>/dev/null || echo none)")
chmod 0755 "$RUN"
[[ $EUID -eq 0 ]] && chown "$RUN_USER" "$RUN"
DATA= MNT= SOCK=$RUN/sock

cleanup() {
	if [[ -n $DATA ]] && as_user "test -f $DATA/postmaster.pid"; then
		as_user "$PGBIN/pg_ctl -D $DATA -m immediate -w stop" >/dev/null 2>&1 || true
	fi
	if [[ -n $MNT ]]; then
		as_user "fusermount3 -u $MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
	fi
	rm -rf "$RUN"
	[[ -n $URING_OLD ]] && echo "$URING_OLD" >"$URING_PARAM"
	return 0
}
trap cleanup EXIT
[[ -n $URING_OLD ]] && echo Y >"$URING_PARAM"
trap 'exit 130' INT TERM

# CPU ticks (user + system) of a process, with its reaped children if $2.
# passthrough_hp's arguments for a pthp TARGET (as contrib/tools/pgcompare.py).
pthp_args() {
	case $1 in
	pthp) ;;
	pthp-direct) echo "--direct-io --nopassthrough" ;;
	pthp-direct-ring) echo "--direct-io --nopassthrough -o io_uring" ;;
	esac
}

ticks() {
	awk -v kids="${2:-}" '{ sub(/.*\) /, ""); t = $12 + $13; if (kids) t += $14 + $15; print t }' \
		"/proc/$1/stat"
}
thread_ticks() {	# "TID NAME TICKS" for each thread of process $1
	local t
	for t in /proc/"$1"/task/*/stat; do
		awk '{ tid = $1; name = $0; sub(/^[^(]*\(/, "", name); sub(/\) .*/, "", name)
		       gsub(/ /, "_", name); sub(/.*\) /, ""); print tid, name, $12 + $13 }' "$t" 2>/dev/null || true
	done
}
pg_ticks() {	# the server: the postmaster, the children it reaped, the ones alive
	local t c
	t=$(ticks "$1" kids)
	for c in $(pgrep -P "$1"); do
		t=$((t + $(ticks "$c" 2>/dev/null || echo 0)))
	done
	echo "$t"
}
stat_field() {	# ctxt, or the idle ticks of all CPUs
	if [[ $1 == ctxt ]]; then
		awk '/^ctxt/ { print $2 }' /proc/stat
	else
		awk '/^cpu / { print $5 }' /proc/stat
	fi
}
disk_stats() {	# "writes sectors flushes" of the disk under WORKDIR (0s if unknown)
	awk -v d="$DISK" '$3 == d { print $8, $10, ($19 == "" ? 0 : $19); found = 1 }
			  END { if (!found) print 0, 0, 0 }' /proc/diskstats
}
marker_pid() {	# create $1 as the run user; print the pid that created it
	as_user "echo \$\$; exec touch $1"
}

printf '%-14s %8s %7s %9s %9s %9s %9s %8s  %s\n' target tps init_s \
	"pg_us/tx" "bench_us" "daemon_us" "idle_us" "ctxsw/tx" "daemon ops per tx (mean us in daemon)"

profile() {	# TARGET
	local name opts dir t0 t1 tps c0 c1 i0 i1 pg0 pg1 d0 d1 bench_s pm dpid trace w0 w1 s0 s1 f0 f1
	local b_pid e_pid ops="" kind=foliofs
	case $1 in
	native) name=native opts= kind=native ;;
	pthp*) name=$1 opts=$(pthp_args "$1") kind=pthp ;;
	*) name=${1%%=*} opts=${1#*=} ;;
	esac
	dir=$RUN/$name
	mkdir -p "$dir/back" "$dir/mnt" "$SOCK"
	[[ $EUID -eq 0 ]] && chown -R "$RUN_USER" "$dir" "$SOCK"
	DATA=$dir/back/data
	MNT=$dir/mnt
	case $kind in
	native) MNT= ;;
	foliofs)
		trace=${TRACE:+$dir/ops.trace}
		[[ -n $trace ]] && opts=${opts:+$opts,}trace=$trace
		as_user "$FOLIOFS ${opts:+-o $opts} $dir/back $MNT"
		dpid=$(pgrep -n -f "^$FOLIOFS .*$MNT\$") ;;
	pthp)
		# In the foreground, its output in a file: nothing holds our pipes.
		as_user "$PTHP --foreground $opts $dir/back $MNT >$dir/pthp.log 2>&1 &"
		for _ in $(seq 200); do
			grep -q " $MNT fuse" /proc/self/mounts && break
			sleep 0.05
		done
		if ! grep -q " $MNT fuse" /proc/self/mounts; then
			cat "$dir/pthp.log" >&2
			echo "$0: passthrough_hp did not mount $MNT" >&2
			exit 1
		fi
		dpid=$(pgrep -n -f "^$PTHP .*$MNT\$") ;;
	esac
	[[ -n $MNT ]] && DATA=$MNT/data
	as_user "$PGBIN/initdb -D $DATA --data-checksums -A trust" >/dev/null
	as_user "$PGBIN/pg_ctl -D $DATA -l $dir/pg.log -w start -o \"-c shared_buffers=128MB -c max_wal_size=1GB -c listen_addresses= -k $SOCK -p $PORT\"" >/dev/null
	t0=$(date +%s%N)
	as_user "$PGBIN/pgbench -h $SOCK -p $PORT -i -q -s $SCALE postgres" >/dev/null 2>&1
	t1=$(date +%s%N)
	as_user "$PGBIN/psql -h $SOCK -p $PORT -q -c checkpoint postgres"
	# As the run user: root may not look into another user's FUSE mount.
	pm=$(as_user "head -1 $DATA/postmaster.pid")
	b_pid=$(marker_pid "$DATA/profile_begin")
	c0=$(stat_field ctxt); i0=$(stat_field idle); pg0=$(pg_ticks "$pm")
	read -r w0 s0 f0 < <(disk_stats)
	[[ -n ${dpid:-} ]] && d0=$(ticks "$dpid") && thread_ticks "$dpid" >"$dir/threads0"
	local perf_pid=
	if [[ -n $PERF_DIR && -n ${dpid:-} ]]; then
		echo "$dpid" >"$PERF_DIR/$name.pid"
		perf record -q -a -g -F 999 -o "$PERF_DIR/$name.perf.data" >/dev/null 2>&1 &
		perf_pid=$!
	fi
	TIMEFORMAT='%U %S'
	{ time as_user "$PGBIN/pgbench -h $SOCK -p $PORT -N -M prepared -c $CLIENTS -j 2 -T $DURATION postgres" \
		>"$dir/pgbench.out" 2>&1 ; } 2>"$dir/time.out"
	if [[ -n $perf_pid ]]; then
		kill -INT "$perf_pid"
		wait "$perf_pid" || true
	fi
	# The backends have exited; let the postmaster reap them.
	sleep 1
	c1=$(stat_field ctxt); i1=$(stat_field idle); pg1=$(pg_ticks "$pm")
	read -r w1 s1 f1 < <(disk_stats)
	[[ -n ${dpid:-} ]] && d1=$(ticks "$dpid") && thread_ticks "$dpid" >"$dir/threads1"
	e_pid=$(marker_pid "$DATA/profile_end")
	tps=$(awk '/^tps/ { print $3; exit }' "$dir/pgbench.out")
	bench_s=$(awk '{ print $1 + $2 }' "$dir/time.out")
	as_user "$PGBIN/pg_ctl -D $DATA -m fast -w stop" >/dev/null
	if [[ $kind == pthp ]]; then
		as_user "fusermount3 -u $MNT"
		MNT=
		for _ in $(seq 100); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.1; done
	elif [[ $kind == foliofs ]]; then
		as_user "fusermount3 -u $MNT"
		MNT=
		# The daemon writes the trace's end at exit.
		for _ in $(seq 100); do pgrep -f "^$FOLIOFS .*$dir/mnt\$" >/dev/null || break; sleep 0.1; done
		[[ -n $trace ]] && ops=$("$SIM" dump "$trace" | awk -v b="$b_pid" -v e="$e_pid" -v tx="$tps" -v s="$DURATION" '
			$5 == "create" && $3 == b { on = 1; next }
			$5 == "create" && $3 == e { on = 0; next }
			on && NR > 1 { n[$5]++; d[$5] += $2 }
			END { for (k in n) printf "%s %.2f (%.0f)  ", k, n[k] / (tx * s), d[k] / n[k] / 1000 }')
	fi
	DATA=
	awk -v n="$name" -v tps="$tps" -v init=$(( (t1 - t0) / 1000000 )) -v s="$DURATION" \
	    -v pg=$((pg1 - pg0)) -v bench="$bench_s" -v dm=$(( ${d1:-0} - ${d0:-0} )) \
	    -v idle=$((i1 - i0)) -v cs=$((c1 - c0)) -v hz="$HZ" -v ops="$ops" 'BEGIN {
		tx = tps * s; us = 1e6 / hz / tx
		printf "%-14s %8.0f %7.1f %9.0f %9.0f %9s %9.0f %8.1f  %s\n", n, tps, init / 1000,
		       pg * us, bench * 1e6 / tx, n == "native" ? "-" : sprintf("%.0f", dm * us),
		       idle * us, cs / tx, ops }'
	awk -v n="$DISK" -v tx="$tps" -v s="$DURATION" -v w=$((w1 - w0)) -v kb=$(((s1 - s0) / 2)) \
	    -v f=$((f1 - f0)) 'BEGIN { printf "%-14s disk %s: %.2f writes, %.1f KiB, %.2f flushes per transaction\n",
				     "", n, w / (tx * s), kb / (tx * s), f / (tx * s) }'
	if [[ -n ${dpid:-} ]]; then
		# The daemon's CPU by thread name (ffs-uring-0 and ffs-uring-1 as
		# ffs-uring); threads that exited during the run are not seen.
		awk -v tx="$tps" -v s="$DURATION" -v hz="$HZ" '
			NR == FNR { t0[$1] = $3; next }
			{ n = $2; sub(/-[0-9]+$/, "", n); d[n] += $3 - t0[$1]; c[n]++ }
			END { printf "%-14s threads:", ""
			      for (n in d) printf "  %s x%d %.1f us", n, c[n], d[n] * 1e6 / hz / (tx * s)
			      printf "\n" }' "$dir/threads0" "$dir/threads1"
	fi
	rm -rf "$dir"
}

for t in "$@" "$1"; do
	profile "$t"
done
