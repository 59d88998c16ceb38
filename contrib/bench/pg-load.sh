#!/bin/bash
# pg-load.sh: PostgreSQL's load phase, `pgbench -i -s SCALE` and the stop
# after it, natively and on FUSE mounts, side by side over rounds.  A
# benchmark, not a test.
#
# For each target (native: a plain directory on the same disk; pthp,
# pthp-direct, pthp-direct-ring: libfuse's passthrough_hp, named by PTHP,
# with the arguments contrib/tools/pgcompare.py gives it; any other
# NAME=OPTIONS: a foliofs mount with -o OPTIONS, NAME= alone for foliofs's
# defaults) and each round, the targets taking turns first: a fresh
# cluster (initdb --data-checksums, shared_buffers=128MB, max_wal_size=1GB;
# not timed), then timed: `pgbench -i -s SCALE` (its phases as pgbench
# prints them: generate, vacuum, primary keys) and `pg_ctl stop -m fast`
# (the shutdown checkpoint: everything on disk).  Reported per target: the
# median over the rounds of the total, of each phase and of the stop, the
# ratio of the total to native's median, every round's total, and on FUSE
# targets the daemon's CPU seconds over the same time.
#
# Ring targets (pthp-direct-ring, or options with uring=on) need the fuse
# module's enable_uring: as root the script sets it to Y for the run and
# puts it back after.  As root the servers and daemons run as the user
# foliofs-test (made if missing); the run's files are under
# WORKDIR/pg-load.XXXXXX, removed afterwards.  Environment: FOLIOFS (default
# <repo>/build-rel/foliofs, else build/foliofs), PGBIN (default
# /usr/lib/postgresql/15/bin), PTHP (passthrough_hp, for the pthp targets).
#
# Example (contrib/results/speed-2026-12-05):
#   PTHP=.../passthrough_hp contrib/bench/pg-load.sh -r 3 native default= \
#       pthp-direct
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ -z ${FOLIOFS:-} ]]; then
	FOLIOFS=$REPO/build-rel/foliofs
	[[ -x $FOLIOFS ]] || FOLIOFS=$REPO/build/foliofs
fi
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
RUN_USER=foliofs-test
SCALE=20
ROUNDS=3
WORKDIR=/var/tmp
PORT=5496
HZ=$(getconf CLK_TCK)

usage() {
	cat <<EOF
usage: $0 [-r ROUNDS] [-s SCALE] [-d WORKDIR] TARGET...
  TARGET      native, pthp, pthp-direct, pthp-direct-ring (passthrough_hp
              named by PTHP), or NAME=OPTIONS (a foliofs mount with -o OPTIONS;
              NAME= for the defaults)
  -r ROUNDS   rounds, targets taking turns first (default $ROUNDS)
  -s SCALE    pgbench scale (default $SCALE)
  -d WORKDIR  where the clusters live (default $WORKDIR)
EOF
}

while getopts "r:s:d:h" opt; do
	case $opt in
	r) ROUNDS=$OPTARG ;;
	s) SCALE=$OPTARG ;;
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
for n in "$ROUNDS" "$SCALE"; do
	if ! [[ $n =~ ^[1-9][0-9]*$ ]]; then
		echo "$0: '$n' is not a positive number" >&2
		exit 2
	fi
done
RING=0
declare -A SEEN=()
for t in "$@"; do
	case $t in
	native) name=native ;;
	pthp | pthp-direct | pthp-direct-ring)
		name=$t
		if [[ -z ${PTHP:-} || ! -x $PTHP ]]; then
			echo "$0: target '$t' needs PTHP set to libfuse's passthrough_hp binary" >&2
			exit 2
		fi
		[[ $t == pthp-direct-ring ]] && RING=1 ;;
	?*=*)
		name=${t%%=*}
		[[ $t == *uring=on* ]] && RING=1 ;;
	*)
		echo "$0: target '$t': give native, pthp, pthp-direct, pthp-direct-ring or NAME=OPTIONS" >&2
		exit 2 ;;
	esac
	if ! [[ $name =~ ^[A-Za-z0-9_.-]+$ ]] || [[ -n ${SEEN[$name]:-} ]]; then
		echo "$0: target '$t': a name of letters, digits, _ . -, each once" >&2
		exit 2
	fi
	SEEN[$name]=1
done
[[ -x $FOLIOFS ]] || { echo "$0: no daemon at $FOLIOFS (set FOLIOFS)" >&2; exit 1; }
[[ -x $PGBIN/pgbench ]] || { echo "$0: no pgbench in $PGBIN (set PGBIN)" >&2; exit 1; }

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
URING_PARAM=/sys/module/fuse/parameters/enable_uring
URING_OLD=
if ((RING)) && [[ $(cat "$URING_PARAM" 2>/dev/null) != Y ]]; then
	if [[ ! -w $URING_PARAM ]]; then
		echo "$0: ring targets need $URING_PARAM set to Y (as root)" >&2
		exit 1
	fi
	URING_OLD=$(cat "$URING_PARAM")
fi
RUN=$(mktemp -d "$WORKDIR/pg-load.XXXXXX")
chmod 0755 "$RUN"
[[ $EUID -eq 0 ]] && chown "$RUN_USER" "$RUN"
RESULTS=$RUN/results.tsv
: >"$RESULTS"
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

pthp_args() {
	case $1 in
	pthp) ;;
	pthp-direct) echo "--direct-io --nopassthrough" ;;
	pthp-direct-ring) echo "--direct-io --nopassthrough -o io_uring" ;;
	esac
}
ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

load() {	# TARGET ROUND
	local name opts dir kind=foliofs dpid= t0 t1 t2 c0=0 c1=0 phases
	case $1 in
	native) name=native kind=native ;;
	pthp*) name=$1 opts=$(pthp_args "$1") kind=pthp ;;
	*) name=${1%%=*} opts=${1#*=} ;;
	esac
	dir=$RUN/$name
	mkdir -p "$dir/back" "$dir/mnt" "$SOCK"
	[[ $EUID -eq 0 ]] && chown -R "$RUN_USER" "$dir" "$SOCK"
	MNT=$dir/mnt
	case $kind in
	native) MNT= DATA=$dir/back/data ;;
	foliofs)
		as_user "$FOLIOFS ${opts:+-o $opts} $dir/back $MNT"
		dpid=$(pgrep -n -f "^$FOLIOFS .*$MNT\$") ;;
	pthp)
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
	[[ -n $dpid ]] && c0=$(ticks "$dpid")
	t0=$(now_ms)
	as_user "$PGBIN/pgbench -h $SOCK -p $PORT -i -s $SCALE postgres" >"$dir/init.out" 2>&1 ||
		{ cat "$dir/init.out" >&2; echo "$0: pgbench -i failed on $name" >&2; exit 1; }
	t1=$(now_ms)
	as_user "$PGBIN/pg_ctl -D $DATA -m fast -w stop" >/dev/null
	t2=$(now_ms)
	[[ -n $dpid ]] && c1=$(ticks "$dpid")
	DATA=
	# "done in 3.37 s (drop tables 0.00 s, create tables 0.00 s, client-side
	# generate 2.10 s, vacuum 0.27 s, primary keys 1.00 s)."
	phases=$(awk '/^done in/ { g = v = p = 0
		for (i = 1; i <= NF; i++) {
			if ($i == "generate") g = $(i + 1)
			if ($i == "vacuum") v = $(i + 1)
			if ($i == "keys") p = $(i + 1)
		}
		print g, v, p }' "$dir/init.out")
	[[ -n $phases ]] || phases="0 0 0"
	if [[ -n $MNT ]]; then
		as_user "fusermount3 -u $MNT"
		for _ in $(seq 300); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.1; done
		MNT=
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$2" $((t2 - t0)) $((t2 - t1)) "$phases" \
		$(((c1 - c0) * 1000 / HZ)) >>"$RESULTS"
	printf '[%s] round %s: %s: pgbench -i + stop %.2f s\n' "$(date +%T)" "$2" "$name" \
		"$(awk -v ms=$((t2 - t0)) 'BEGIN { print ms / 1000 }')" >&2
	rm -rf "$dir"
}

echo "pg-load: scale $SCALE, $ROUNDS round(s); $(nproc) CPUs, kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
n=$#
targets=("$@")
for ((r = 1; r <= ROUNDS; r++)); do
	for ((i = 0; i < n; i++)); do
		load "${targets[$(((i + r - 1) % n))]}" "$r"
	done
done

python3 - "$RESULTS" "$SCALE" "$ROUNDS" "$@" <<'EOF'
import statistics, sys

results, scale, rounds = sys.argv[1:4]
names = []
for t in sys.argv[4:]:
    names.append(t.split('=', 1)[0] if '=' in t else t)
runs = {}
for line in open(results):
    name, r, total, stop, phases, cpu = line.rstrip('\n').split('\t')
    g, v, p = (float(x) for x in phases.split())
    runs.setdefault(name, []).append(dict(total=int(total) / 1000, stop=int(stop) / 1000,
                                          gen=g, vac=v, pk=p, cpu=int(cpu) / 1000))
med = lambda rs, k: statistics.median(x[k] for x in rs)
base = med(runs['native'], 'total') if 'native' in runs else None
print()
print('pgbench -i -s %s and the stop after it, %s round(s): medians (seconds)' % (scale, rounds))
print()
print('| target | total | x native | generate | vacuum | primary keys | stop | daemon CPU | every round |')
print('|---|---:|---:|---:|---:|---:|---:|---:|---|')
for n in names:
    rs = runs[n]
    fuse = n != 'native'
    print('| %s | %.2f | %s | %.2f | %.2f | %.2f | %.2f | %s | %s |' % (
        n, med(rs, 'total'), '%.2fx' % (med(rs, 'total') / base) if base else '-',
        med(rs, 'gen'), med(rs, 'vac'), med(rs, 'pk'), med(rs, 'stop'),
        '%.2f' % med(rs, 'cpu') if fuse else '-',
        ' '.join('%.2f' % x['total'] for x in rs)))
EOF
