#!/bin/bash
# fit-device.sh: fit foliofs-sim's device model to a disk with fio.
#
# The model (sim/engine.c): dev_bw bytes/s through one transfer pipe,
# dev_lat_us per I/O on top of its transfer, at most dev_qd I/Os in
# flight, a cache flush dev_flush_us after the writes before it.  Each is
# measured the way the model uses it, with O_DIRECT so that the page cache
# is out of the way (fdatasync excepted: it is what a flush costs a file):
#
#   dev_bw        sequential 1 MiB writes, iodepth 16: bytes/s
#   dev_lat_us    4 KiB random writes at QD1: mean latency (submission to completion),
#                 less the transfer of 4 KiB at dev_bw
#   dev_qd        4 KiB random writes at QD 1..64: the model's IOPS at
#                 queue depth q are q / (lat + transfer) until the pipe is
#                 full, so q = best IOPS x (lat + transfer), rounded up
#   dev_flush_us  4 KiB buffered writes each followed by fdatasync
#                 (fio fdatasync=1): median fdatasync latency
#
# Every measurement runs -r times (default 3) and the median is taken.
# Prints the fio numbers on stderr and the options line on stdout:
#   dev_bw=...,dev_lat_us=...,dev_qd=...,dev_flush_us=...
# A benchmark of a shared disk: run it on an otherwise idle machine.

set -euo pipefail

usage() {
	cat <<EOF
usage: $0 [-d DIR] [-r RUNS] [-T SECONDS] [-s SIZE]
  -d DIR      where the test file goes (default: a temp dir on the disk holding /work)
  -r RUNS     runs of each measurement, median taken (default 3)
  -T SECONDS  time of each fio job (default 4)
  -s SIZE     test file size (default 1G)
EOF
	exit 2
}

dir="" runs=3 secs=4 size=1G
while getopts "d:r:T:s:h" o; do
	case $o in
	d) dir=$OPTARG ;;
	r) runs=$OPTARG ;;
	T) secs=$OPTARG ;;
	s) size=$OPTARG ;;
	*) usage ;;
	esac
done
command -v fio >/dev/null || { echo "fit-device.sh: fio not found" >&2; exit 1; }
made=""
if [ -z "$dir" ]; then
	dir=$(mktemp -d /work/.fit-device.XXXXXX)
	made=$dir
fi
[ -d "$dir" ] || { echo "fit-device.sh: $dir: not a directory" >&2; exit 1; }
file="$dir/fit-device.fio"
cleanup() {
	rm -f "$file"
	[ -z "$made" ] || rmdir "$made"
}
trap cleanup EXIT

# fio JOB-OPTIONS...: the job's JSON on stdout.
run_fio() {
	fio --output-format=json --name=fit --filename="$file" --size="$size" \
	    --time_based --runtime="$secs" --ramp_time=1 --overwrite=1 "$@"
}

# Lay the file out once: overwrites measure the device, not allocation.
fio --name=layout --filename="$file" --size="$size" --rw=write --bs=1M \
    --direct=1 --end_fsync=1 >/dev/null

# jq-free field extraction: python3 is in the base image.
field() {
	python3 -c '
import json, sys
job = json.load(sys.stdin)["jobs"][0]
print({
    "bw": lambda: job["write"]["bw_bytes"],
    "iops": lambda: job["write"]["iops"],
    "lat_us": lambda: job["write"]["lat_ns"]["mean"] / 1000,
    "sync_us": lambda: job["sync"]["lat_ns"]["percentile"]["50.000000"] / 1000,
}[sys.argv[1]]())' "$1"
}

median() {
	sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

bw=() lat=() flush=() qd_iops=()
for ((r = 1; r <= runs; r++)); do
	bw+=("$(run_fio --rw=write --bs=1M --direct=1 --ioengine=libaio --iodepth=16 | field bw)")
	lat+=("$(run_fio --rw=randwrite --bs=4k --direct=1 --ioengine=psync | field lat_us)")
	flush+=("$(run_fio --rw=write --bs=4k --ioengine=psync --fdatasync=1 | field sync_us)")
	best=0
	for q in 1 2 4 8 16 32 64; do
		iops=$(run_fio --rw=randwrite --bs=4k --direct=1 --ioengine=libaio --iodepth="$q" |
		       field iops)
		echo "run $r: 4k randwrite QD$q: $iops IOPS" >&2
		best=$(awk -v a="$best" -v b="$iops" 'BEGIN { print (b > a ? b : a) }')
	done
	qd_iops+=("$best")
	echo "run $r: seq write ${bw[-1]} B/s, 4k QD1 lat ${lat[-1]} us," \
	     "fdatasync p50 ${flush[-1]} us, best 4k IOPS $best" >&2
done

m_bw=$(printf '%s\n' "${bw[@]}" | median)
m_lat=$(printf '%s\n' "${lat[@]}" | median)
m_flush=$(printf '%s\n' "${flush[@]}" | median)
m_iops=$(printf '%s\n' "${qd_iops[@]}" | median)
echo "median: seq write $m_bw B/s, 4k QD1 lat $m_lat us, fdatasync p50 $m_flush us," \
     "best 4k IOPS $m_iops" >&2
awk -v bw="$m_bw" -v lat="$m_lat" -v flush="$m_flush" -v iops="$m_iops" 'BEGIN {
	xfer = 4096 / bw * 1e6
	l = lat - xfer; if (l < 0) l = 0
	qd = iops * (l + xfer) / 1e6
	q = int(qd); if (q < qd) q++; if (q < 1) q = 1
	printf "dev_bw=%d,dev_lat_us=%d,dev_qd=%d,dev_flush_us=%d\n", bw, l + 0.5, q, flush + 0.5
}'
