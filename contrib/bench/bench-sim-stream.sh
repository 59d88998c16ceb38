#!/usr/bin/env bash
# contrib/bench/bench-sim-stream.sh: what one replay of the seed's scenario
# costs in foliofs-sim: records per second, CPU seconds and peak RSS
# (/usr/bin/time -v), for a trace generated into a file and replayed
# (`gen SPEC -o FILE`, then `FILE -o OPTS`: the only way before --gen), or
# generated in process as the replay reads it (`--gen SPEC -o OPTS`).
# Not a test: it asserts nothing and takes minutes to hours.
#
# Usage: contrib/bench/bench-sim-stream.sh [-d SECS] [-a ACCOUNT] [-r RA] [-w DIR]
#                                          [-n NICE] [-H | -P] MODE=FOLIOFS_SIM...
#   MODE=FOLIOFS_SIM  file=PATH: gen into a file, then replay it with the
#                     foliofs-sim at PATH; stream=PATH: --gen with it.
#                     Run in the order given, one at a time.
#   -d SECS     each iteration's duration (the seed: 600; default 60)
#   -a ACCOUNT  dirty_account (default folio)
#   -r RA       ra_model (default 6.17)
#   -w DIR      where a file mode's trace goes (default $TMPDIR or /tmp;
#               about 0.22 GB per second of duration; removed after)
#   -n NICE     each run under `nice -n NICE` (default 10)
#   -H          malloc with transparent huge pages (GLIBC_TUNABLES=
#               glibc.malloc.hugetlb=1, glibc 2.35+): a large replay's
#               folios, index chunks and opens are read at random, and
#               with THP in "madvise" mode only malloc's madvise gives
#               them 2 MiB pages; the same output, less CPU.  A
#               foliofs-sim from 2026-12-07 on does this itself (it starts
#               itself again with the tunable), so -H matters only to
#               older builds
#   -P          malloc without them (glibc.malloc.hugetlb=0): how a
#               foliofs-sim that asks for them runs without
# Each run is under `nice -n NICE`.  Prints one table row per run: records,
# wall, user and system CPU seconds, records per CPU second and peak RSS;
# the replay's stdout and time -v's report go to OUT.MODE.{out,time} in
# the current directory.  The spec is the seed's scenario at scale 8470
# (contrib/results/ckpt-pace-2026-12-05/run.sh) with duration=SECS.

set -uo pipefail

SECS=60
ACCOUNT=folio
RA=6.17
WORK=${TMPDIR:-/tmp}
NICE=10
HUGE=
while getopts d:a:r:w:n:HP c; do
	case $c in
	d) SECS=$OPTARG ;;
	a) ACCOUNT=$OPTARG ;;
	r) RA=$OPTARG ;;
	w) WORK=$OPTARG ;;
	n) NICE=$OPTARG ;;
	H) HUGE=glibc.malloc.hugetlb=1 ;;
	P) HUGE=glibc.malloc.hugetlb=0 ;;
	*) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "bench-sim-stream: no MODE=FOLIOFS_SIM" >&2; exit 2; }

GEN="pgbench,clients=1024,scale=8470,fillfactor=90,tps=200000,shared_buffers=96G,checkpoint_s=300,ckpt_target=90,fpw=1,hint_fpw=1,index=1,wal_seg=64M,wal_files=64,wal_each=1,scan=1,iterations=10,duration=$SECS,warmup_s=400,deadline=1,scan=2,scan_s=60,gap_s=5"
OPTS="sim_data=0,cache_size=275G,dirty_ratio=20,dirty_background_ratio=10,folio_size=2M,folio_policy=kernel,throttle=bdp,dev_raid=12,dev_iops=32000,dev_bw=1000M,dev_lat_us=300,dev_qd=32,dev_flush_us=200,dev_stripe=512K,ra_model=$RA,dirty_account=$ACCOUNT"

echo "# spec: $GEN"
echo "# -o $OPTS"
[ -z "$HUGE" ] || echo "# GLIBC_TUNABLES=$HUGE"
# time -v's fields, by name: "User time (seconds): 1.23" and so on
tv() { sed -n "s/^[[:space:]]*$2: //p" "$1"; }

# timed NAME CMD...: runs CMD under time -v into NAME.time; 0 or its status
timed() {
	local name=$1
	shift
	if [ -n "$HUGE" ]; then
		GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}$HUGE nice -n "$NICE" /usr/bin/time -v -o "$name.time" "$@"
	else
		nice -n "$NICE" /usr/bin/time -v -o "$name.time" "$@"
	fi
}

row() {	# mode phase timefile records
	local user sys wall rss cpu
	user=$(tv "$3" 'User time (seconds)')
	sys=$(tv "$3" 'System time (seconds)')
	wall=$(tv "$3" 'Elapsed (wall clock) time (h:mm:ss or m:ss)')
	rss=$(tv "$3" 'Maximum resident set size (kbytes)')
	cpu=$(echo "$user + $sys" | bc)
	printf '| %s | %s | %s | %s | %s | %s | %.0f | %.2f |\n' "$1" "$2" "$4" "$wall" \
		"$user" "$sys" "$(echo "$4 / $cpu" | bc -l)" "$(echo "$rss / 1048576" | bc -l)"
}

echo "| mode | phase | records | wall | user s | sys s | records/CPU s | peak RSS GiB |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
status=0
for arg in "$@"; do
	mode=${arg%%=*}
	sim=$(realpath "${arg#*=}")
	out=OUT.$mode
	case $mode in
	file)
		trace=$(mktemp -p "$WORK" bench-sim-stream.XXXXXX.trace)
		if ! timed "$out.gen" "$sim" gen "$GEN" -o "$trace" > "$out.gen.out"; then
			echo "bench-sim-stream: gen failed ($out.gen.time)" >&2
			rm -f "$trace"
			status=1
			continue
		fi
		timed "$out" "$sim" "$trace" -o "$OPTS" > "$out.out" 2> "$out.err" || status=1
		rm -f "$trace"
		nr=$(sed -n 's/.*replayed \([0-9]*\) records.*/\1/p' "$out.err")
		row file gen "$out.gen.time" "$nr"
		row file replay "$out.time" "$nr"
		;;
	stream)
		timed "$out" "$sim" --gen "$GEN" -o "$OPTS" > "$out.out" 2> "$out.err" || status=1
		nr=$(sed -n 's/.*replayed \([0-9]*\) records.*/\1/p' "$out.err")
		row stream "gen+replay" "$out.time" "$nr"
		;;
	*)
		echo "bench-sim-stream: $arg: MODE is file or stream" >&2
		exit 2
		;;
	esac
done
exit $status
