#!/usr/bin/env bash
# contrib/bench/bench-engine.sh: the blockstate engine alone (no FUSE), random
# 4 KiB and 8 KiB writes into cached folios from 1 and 2 threads, each run
# repeated; prints a table of medians.  See contrib/bench/bench-engine.c.
#
# Each configuration is also run with bench-engine -M (the same random
# writes as plain memcpy() into a buffer of the same size): the floor the
# copy into uncached memory sets; "engine ns" is the rest of the CPU time.
#
# Usage: contrib/bench/bench-engine.sh [--release] [-d SECS] [-n REPEATS] [-a POLICY] [-m MIB]
#   --release   build and run in build-bench/ (buildtype=release,
#               debug_checks=false; made with meson setup if missing)
#               instead of build/ (whatever build/ is configured with; the
#               development tree's build/ has debug_checks=true, which
#               checks every folio after every write and costs time)
#   -d SECS     seconds per run (default 5)
#   -n REPEATS  runs per configuration (default 3)
#   -a POLICY   dirty_account policy (default page)
#   -m MIB      file (and populated cache) per thread (default 256, far
#               larger than the CPU caches; e.g. 8 to see the cost with
#               the folios hot in cache)
# Environment: BUILD overrides the build directory; BENCH_ENGINE=PATH runs
# that bench-engine binary as it is, without building.
#
# The target (from the issue): >= 2 million 4 KiB writes/s per core into
# cached folios.  Exit status 0 when every run succeeded (whether or not
# the target is met), 1 otherwise.

set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1

SECS=5
REPEATS=3
ACCOUNT=page
MIB=256
RELEASE=0
while [ $# -gt 0 ]; do
	case $1 in
	--release) RELEASE=1 ;;
	-d) SECS=$2; shift ;;
	-n) REPEATS=$2; shift ;;
	-a) ACCOUNT=$2; shift ;;
	-m) MIB=$2; shift ;;
	-h | --help) sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
	*) echo "bench-engine.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done

if [ -z "${BUILD:-}" ]; then
	if [ $RELEASE = 1 ]; then
		BUILD=build-bench
		if [ ! -f $BUILD/build.ninja ]; then
			meson setup $BUILD --buildtype=release -Ddebug_checks=false >/dev/null ||
				{ echo "bench-engine.sh: meson setup $BUILD failed" >&2; exit 1; }
		fi
	else
		BUILD=build
	fi
fi

if [ -n "${BENCH_ENGINE:-}" ]; then
	BIN=$BENCH_ENGINE
	echo "binary: $BIN (not rebuilt)"
else
	if ! ninja -C "$BUILD" bench-engine >/dev/null; then
		ninja -C "$BUILD" bench-engine | tail -20 >&2
		echo "bench-engine.sh: build in $BUILD failed" >&2
		exit 1
	fi
	BIN=$BUILD/bench-engine
fi

opt() { meson configure "$BUILD" 2>/dev/null | awk -v k="$1" '$1 == k { print $2; exit }'; }
echo "build: $BUILD (buildtype $(opt buildtype), debug_checks $(opt debug_checks))"
echo "cpu:   $(nproc) x $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
echo "runs:  $REPEATS x ${SECS}s each, dirty_account=$ACCOUNT, cache 1 GiB, 2 MiB folios, 4 KiB blocks, $MIB MiB per thread"
"$BIN" -t 1 -d 0.01 -m 256 -q | grep -E '^(per-folio|measured)'
echo

TMP=$(mktemp)
trap 'rm -f "$TMP"' EXIT
status=0
for threads in 1 2; do
	for size in 4096 8192; do
		for ((r = 1; r <= REPEATS; r++)); do
			if ! out=$("$BIN" -t $threads -s $size -d "$SECS" -a "$ACCOUNT" -m "$MIB" -r $r -q 2>&1); then
				echo "run threads=$threads size=$size #$r failed:" >&2
				echo "$out" >&2
				status=1
			fi
			line=$(grep '^RESULT' <<<"$out")
			[ -n "$line" ] && echo "$line" >>"$TMP"
			grep -i warning <<<"$out" >&2
			if ! out=$("$BIN" -M -t $threads -s $size -d "$SECS" -m "$MIB" -r $r -q 2>&1); then
				echo "memcpy run threads=$threads size=$size #$r failed:" >&2
				echo "$out" >&2
				status=1
			fi
			grep '^RESULT' <<<"$out" >>"$TMP"
		done
	done
done

python3 - "$TMP" <<'EOF'
import statistics, sys
rows, floor = {}, {}
for line in open(sys.argv[1]):
    tag, *fields = line.split()
    kv = dict(f.split('=', 1) for f in fields)
    key = (int(kv['threads']), int(kv['size']))
    (floor if tag == 'RESULT_MEMCPY' else rows).setdefault(key, []).append(kv)
med = lambda rs, k: statistics.median(float(r[k]) for r in rs)
hdr = ('threads', 'size', 'runs', 'ops/s (median)', 'min..max', 'ops/s/thread',
       'CPU ns/op', 'MB/s', 'memcpy ns', 'engine ns', '4K target/core')
print('%7s %5s %4s %14s %21s %12s %9s %6s %9s %9s  %s' % hdr)
for (t, s), rs in sorted(rows.items()):
    ops = [float(r['ops_per_s']) for r in rs]
    m = statistics.median(ops)
    cpu = med(rs, 'cpu_ns_op')
    fl = med(floor[(t, s)], 'cpu_ns_op') if (t, s) in floor else float('nan')
    tgt = ('%.0f%%' % (100 * 1e9 / cpu / 2e6)) if s == 4096 else ''
    print('%7d %5s %4d %14.0f %10.0f..%-10.0f %12.0f %9.0f %6.0f %9.0f %9.0f  %s'
          % (t, '%dK' % (s // 1024), len(rs), m, min(ops), max(ops), m / t,
             cpu, m * s / 1e6, fl, cpu - fl, tgt))
print("ops/s/thread: median total / threads.  CPU ns/op: median of the threads' CPU time")
print('per write.  memcpy ns: the same writes as plain memcpy (bench-engine -M).')
print('engine ns: CPU ns/op - memcpy ns.  4K target/core: 1e9 / CPU ns per op, against')
print('2 million/s per core.')
EOF
exit $status
