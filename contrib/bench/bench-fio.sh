#!/bin/bash
# bench-fio.sh: fio on a plain directory versus foliofs mounts, on the same
# disk, in one run.  A benchmark, not a test.
#
# Targets (-t): native (the plain directory), block and folio (foliofs with
# wb_granularity=block / =folio), and direct, writethrough and writeback
# (foliofs with cache=MODE); -t modes is native,direct,writethrough,writeback.
# These serve over /dev/fuse (uring=off); direct-ring, writethrough-ring and
# writeback-ring are the same modes over FUSE over io_uring (uring=on; as
# root the script sets the fuse module's enable_uring to Y for the run and
# puts it back after), so the transports compare side by side.  With PTHP
# naming libfuse's passthrough_hp (built outside the project from a libfuse
# snapshot), the peer targets pthp (its defaults: kernel passthrough as
# root, where the data never reaches the server), pthp-direct (direct I/O,
# no passthrough: every read and write reaches the server) and
# pthp-direct-ring (the same over FUSE over io_uring) run beside them.
# A target NAME=BASE+OPT+OPT... is the foliofs target BASE (block, folio,
# a mode or a -ring mode) with more -o options, so that one option can be
# compared side by side: -t native,bg12=writethrough+max_background=12,
# bg64=writethrough+max_background=64.  BASE@BINARY runs that target with
# another foliofs binary, so that two builds compare in one run:
# -t native,before=block@old/foliofs,after=block@build/foliofs.
#
# Workloads (-w, numbers; default 1,2), each on every target, ioengine=psync,
# numjobs=2, size=256M each, group_reporting:
#   1 randwrite-fdatasync  the fio job of seeds/003 (per-block dirty
#                          writeback, v6.6) scaled to this machine:
#                          rw=randwrite, bs=4k, overwrite=1, fdatasync=1,
#                          20 s time_based (pre_read skipped)
#   2 buffered-8k          rw=randwrite, bs=8k, no fsync, 20 s time_based
#   3 seqwrite-1m          rw=write, bs=1M, SECONDS time_based (over each
#                          file again and again), end_fsync=1: fio counts
#                          the final fsync in the run's time, and a run of
#                          many times the dirty limits is paced by the
#                          disk, so the figure is what reached the backing
#                          store (a single pass of the files fit in the
#                          caches and took under a second)
#   4 seqread-1m-cold      rw=read, bs=1M, each file once, every cache
#                          dropped first: the kernel's (drop_caches) and, on
#                          foliofs, the daemon's (the mount is remounted);
#                          REPEATS times per round (-R), so that the
#                          disk's swings show as the spread the report gives
#   5 seqread-1m-warm      rw=read, bs=1M, 20 s time_based, after a read of
#                          every file, invalidate=0 (fio would otherwise
#                          drop the files' kernel pages before the run)
#   6 randread-8k-warm     rw=randread, bs=8k, 20 s time_based, after a read
#                          of every file, invalidate=0
#   7 seqwrite-1m-unal-cold  rw=write, bs=1M, each file once, end_fsync=1,
#                          from a buffer 100 bytes past a page boundary
#                          (iomem_align=100), over data no cache holds
#                          (every cache dropped first, as for 4): in
#                          direct I/O the kernel cuts each write into
#                          requests that end inside a block
# All use the same laid-out files (fio --create_only, fsynced), so the runs
# overwrite existing data.  On foliofs the files are laid out, fsynced and
# fully written back before each measurement.  Workloads 4 and 7 need
# root (drop_caches).
#
# Reported per run: IOPS, p99 latency of write(2) (clat) and, with
# fdatasync, of fdatasync(2); for foliofs the bytes written to the backing
# store per byte the application wrote (.foliofs/stats backing_write_bytes
# over app_write_bytes: "run" counts writeback during the run, "+sync"
# adds the fsync of every file afterwards, i.e. everything the run
# dirtied), and the IOPS ratio to native.  The targets of the issue are
# printed under the table: block granularity writes 1.0x the dirtied
# bytes, randwrite+fdatasync >= 0.8x native IOPS, buffered 8K >= 0.6x.
#
# As root, fio is installed with apt-get when missing.  The daemon runs in
# the foreground as the calling user; it must exit 0 after each unmount.
#
# Environment: FOLIOFS (daemon binary, default <repo>/build/foliofs; use a
# build without -Ddebug_checks for numbers); PTHP (passthrough_hp, for the
# pthp targets).

set -euo pipefail

usage() {
	cat <<EOF
usage: $0 [-T SECONDS] [-s SIZE] [-j JOBS] [-r ROUNDS] [-R REPEATS] [-o "foliofs options"] [-d WORKDIR] [-t TARGETS] [-w WORKLOADS] [-k]
  -T SECONDS  time of each fio run (default 20)
  -s SIZE     file size per fio job (default 256M)
  -j JOBS     fio numjobs (default 2)
  -r ROUNDS   repeat every run, targets taking turns first; median reported
              (default 1)
  -R REPEATS  cold reads (workload 4) per target and round, each after
              every cache is dropped; median and spread reported (default 3)
  -o OPTIONS  extra foliofs -o options, comma-separated (default none)
  -d WORKDIR  directory on the disk to test; a private subdirectory is made
              inside it and removed afterwards (default /var/tmp)
  -t TARGETS  comma-separated subset of native,block,folio,direct,writethrough,
              writeback,direct-ring,writethrough-ring,writeback-ring,pthp,
              pthp-direct,pthp-direct-ring (these three need PTHP), or
              "modes" for native,direct,writethrough,writeback; NAME=BASE+OPT...
              is foliofs target BASE with more -o options OPT, and
              NAME=BASE@BINARY+OPT... the same run by another foliofs BINARY
              (default native,block,folio)
  -w WORKLOADS  comma-separated workload numbers 1-7 (see the top of this
              script; default 1,2)
  -k          keep the work directory (files, fio JSON, daemon logs)
EOF
}

DURATION=20
SIZE=256M
JOBS=2
ROUNDS=1
REPEATS=3
FOLIOFS_OPTS=""
WORKDIR=/var/tmp
TARGETS=native,block,folio
WORKLOADS=1,2
KEEP=0
while getopts "T:s:j:r:R:o:d:t:w:kh" opt; do
	case $opt in
	T) DURATION=$OPTARG ;;
	s) SIZE=$OPTARG ;;
	j) JOBS=$OPTARG ;;
	r) ROUNDS=$OPTARG ;;
	R) REPEATS=$OPTARG ;;
	o) FOLIOFS_OPTS=$OPTARG ;;
	d) WORKDIR=$OPTARG ;;
	t) TARGETS=$OPTARG ;;
	w) WORKLOADS=$OPTARG ;;
	k) KEEP=1 ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if (($# != 0)); then
	usage >&2
	exit 2
fi
for v in "$DURATION" "$JOBS" "$ROUNDS" "$REPEATS"; do
	if ! [[ $v =~ ^[1-9][0-9]*$ ]]; then
		echo "$0: '$v' is not a positive integer" >&2
		exit 2
	fi
done
if ! [[ $SIZE =~ ^[1-9][0-9]*[KMG]?$ ]]; then
	echo "$0: size '$SIZE' is not N[K|M|G]" >&2
	exit 2
fi
[[ $TARGETS == modes ]] && TARGETS=native,direct,writethrough,writeback
RING=0
IFS=, read -r -a TARGET_SPECS <<<"$TARGETS"
TARGET_LIST=()
declare -A T_BASE=() T_EXTRA=() T_BIN=()
for t in "${TARGET_SPECS[@]}"; do
	if [[ $t == *=* ]]; then
		name=${t%%=*}
		spec=${t#*=}
		base=${spec%%+*}
		if [[ $base == *@* ]]; then
			T_BIN[$name]=${base#*@}
			base=${base%%@*}
			if [[ ! -x ${T_BIN[$name]} ]]; then
				echo "$0: target '$t': ${T_BIN[$name]} is not an executable" >&2
				exit 2
			fi
		fi
		case $base in
		block | folio | direct | writethrough | writeback | *-ring) ;;
		*) echo "$0: target '$t': '$base' is not a foliofs target (block, folio, a mode or a -ring mode)" >&2
		   exit 2 ;;
		esac
		if ! [[ $name =~ ^[A-Za-z0-9_.-]+$ ]] || [[ -n ${T_BASE[$name]:-} ||
			$name == native || $name == pthp* ]]; then
			echo "$0: target '$t': NAME must be letters, digits, _ . -, used once, not native or pthp*" >&2
			exit 2
		fi
		T_BASE[$name]=$base
		[[ $spec == *+* ]] && T_EXTRA[$name]=$(tr + , <<<"${spec#*+}")
		TARGET_LIST+=("$name")
		t=$base
	else
		TARGET_LIST+=("$t")
	fi
	case $t in
	native | block | folio | direct | writethrough | writeback) ;;
	direct-ring | writethrough-ring | writeback-ring) RING=1 ;;
	pthp | pthp-direct | pthp-direct-ring)
		if [[ -z ${PTHP:-} || ! -x $PTHP ]]; then
			echo "$0: target '$t' needs PTHP set to libfuse's passthrough_hp binary" >&2
			exit 2
		fi
		[[ $t == pthp-direct-ring ]] && RING=1 ;;
	*) echo "$0: unknown target '$t' (native, block, folio, direct, writethrough, writeback, direct-ring, writethrough-ring, writeback-ring, pthp, pthp-direct, pthp-direct-ring)" >&2
	   exit 2 ;;
	esac
done
IFS=, read -r -a WORKLOAD_LIST <<<"$WORKLOADS"
for w in "${WORKLOAD_LIST[@]}"; do
	if ! [[ $w =~ ^[1-7]$ ]]; then
		echo "$0: unknown workload '$w' (1-7)" >&2
		exit 2
	fi
	if (((w == 4 || w == 7) && EUID != 0)); then
		echo "$0: workload $w drops the kernel's caches: run as root" >&2
		exit 2
	fi
done

REPO=$(cd "$(dirname "$0")/../.." && pwd)
FOLIOFS=${FOLIOFS:-$REPO/build/foliofs}
FUSERMOUNT=$(command -v fusermount3 || echo /usr/bin/fusermount3)

exec 3>&2
log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&3; }
die() {
	log "FAILED: $*"
	exit 1
}

if ! command -v fio >/dev/null; then
	if ((EUID == 0)); then
		log "installing fio"
		DEBIAN_FRONTEND=noninteractive apt-get install -y fio >/dev/null ||
			{ apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y fio >/dev/null; } ||
			die "apt-get install fio"
	else
		die "fio is not installed (run as root to install it)"
	fi
fi
[[ -x $FOLIOFS ]] || die "$FOLIOFS is not built (meson setup build && ninja -C build, or set FOLIOFS)"
[[ -e /dev/fuse ]] || die "/dev/fuse is missing"
if python3 - "$(dirname "$FOLIOFS")" <<'EOF' 2>/dev/null; then
import json, sys
opts = json.load(open(sys.argv[1] + '/meson-info/intro-buildoptions.json'))
sys.exit(0 if any(o['name'] == 'debug_checks' and o['value'] for o in opts) else 1)
EOF
	log "warning: $FOLIOFS is built with debug_checks (slow): numbers are not representative"
fi

mkdir -p "$WORKDIR"
WORK=$(mktemp -d "$WORKDIR/bench-fio.XXXXXX")
chmod 755 "$WORK"
RESULTS=$WORK/results.tsv
: >"$RESULTS"
declare -A DPIDS=() MNTS=()

cleanup() {
	local rc=$?
	for t in "${!MNTS[@]}"; do
		if grep -q " ${MNTS[$t]} fuse" /proc/self/mounts; then
			"$FUSERMOUNT" -u "${MNTS[$t]}" 2>/dev/null ||
				"$FUSERMOUNT" -u -z "${MNTS[$t]}" 2>/dev/null || true
		fi
		wait "${DPIDS[$t]}" 2>/dev/null || true
	done
	[[ -n $URING_OLD ]] && echo "$URING_OLD" >"$URING_PARAM"
	if ((KEEP)); then
		log "kept $WORK"
	else
		rm -rf "$WORK"
	fi
	exit $rc
}
trap cleanup EXIT

# Ring targets need the kernel to offer FUSE over io_uring.
URING_PARAM=/sys/module/fuse/parameters/enable_uring
URING_OLD=
if ((RING)); then
	[[ -e $URING_PARAM ]] || die "ring targets need a kernel with FUSE over io_uring ($URING_PARAM missing)"
	if [[ $(cat "$URING_PARAM") != Y ]]; then
		[[ -w $URING_PARAM ]] || die "ring targets need $URING_PARAM set to Y (as root)"
		URING_OLD=$(cat "$URING_PARAM")
		echo Y >"$URING_PARAM"
	fi
fi
trap 'exit 130' INT TERM

# The foliofs options of TARGET.
target_opts() {
	local t=${T_BASE[$1]:-$1} extra=${T_EXTRA[$1]:-}
	case $t in
	block | folio) echo "wb_granularity=$t,uring=off${extra:+,$extra}" ;;
	*-ring) echo "cache=${t%-ring},uring=on${extra:+,$extra}" ;;
	*) echo "cache=$t,uring=off${extra:+,$extra}" ;;
	esac
}

# passthrough_hp's arguments for a pthp TARGET.
pthp_args() {
	case $1 in
	pthp) ;;
	pthp-direct) echo "--direct-io --nopassthrough" ;;
	pthp-direct-ring) echo "--direct-io --nopassthrough -o io_uring" ;;
	esac
}

mount_foliofs() {	# TARGET: mounts $WORK/back-TARGET at $WORK/mnt-TARGET
	local t=$1 opts mnt=$WORK/mnt-$1
	mkdir -p "$WORK/back-$t" "$mnt"
	if [[ $t == pthp* ]]; then
		# shellcheck disable=SC2046
		"$PTHP" --foreground $(pthp_args "$t") "$WORK/back-$t" "$mnt" \
			>"$WORK/daemon-$t.log" 2>&1 &
	else
		opts=$(target_opts "$1")
		[[ -n $FOLIOFS_OPTS ]] && opts+=",$FOLIOFS_OPTS"
		"${T_BIN[$t]:-$FOLIOFS}" -f -o "$opts" "$WORK/back-$t" "$mnt" \
			>"$WORK/daemon-$t.log" 2>&1 &
	fi
	DPIDS[$t]=$!
	MNTS[$t]=$mnt
	for _ in $(seq 200); do
		grep -q " $mnt fuse" /proc/self/mounts && return 0
		kill -0 "${DPIDS[$t]}" 2>/dev/null ||
			{ cat "$WORK/daemon-$t.log" >&3; die "foliofs exited before mounting"; }
		sleep 0.05
	done
	die "foliofs did not mount $mnt within 10 s"
}

umount_foliofs() {	# TARGET: unmount, the daemon must exit 0 with clean output
	local t=$1 rc=0
	"$FUSERMOUNT" -u "${MNTS[$t]}" || die "fusermount3 -u ${MNTS[$t]}"
	wait "${DPIDS[$t]}" || rc=$?
	unset "MNTS[$t]" "DPIDS[$t]"
	if ((rc != 0)) || grep -qi "error\|warning" "$WORK/daemon-$t.log"; then
		cat "$WORK/daemon-$t.log" >&3
		die "the daemon of $t exited with status $rc"
	fi
}

# fsync every fio file in DIR (on foliofs the daemon writes back and syncs).
sync_files() {
	python3 - "$1" <<'EOF'
import os, sys
d = sys.argv[1]
for n in sorted(os.listdir(d)):
    if n.startswith('bench.'):
        fd = os.open(os.path.join(d, n), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
EOF
}

snap() {	# DIR OUT: the mount's stats, or an empty file for a plain directory
	if [[ -e $1/.foliofs/stats ]]; then
		cat "$1/.foliofs/stats" >"$2"
	else
		: >"$2"
	fi
}

# Wait (bounded) until the mount has nothing dirty.
wait_clean() {
	[[ -e $1/.foliofs/stats ]] || return 0
	for _ in $(seq 600); do
		awk '$1 == "dirty_bytes_exact" { exit $2 != 0 }' "$1/.foliofs/stats" && return 0
		sleep 0.05
	done
	die "$1 still has dirty data after 30 s"
}

dir_of() {
	if [[ $1 == native ]]; then
		echo "$WORK/native"
	else
		echo "${MNTS[$1]}"
	fi
}

FIO_COMMON=(--name=bench --ioengine=psync --overwrite=1
	--numjobs="$JOBS" --size="$SIZE" --group_reporting --direct=0)
TIMED="--runtime=$DURATION --time_based"
WORKLOAD_ARGS=([1]="--rw=randwrite --bs=4k --fdatasync=1 $TIMED"
	[2]="--rw=randwrite --bs=8k $TIMED"
	[3]="--rw=write --bs=1M --end_fsync=1 $TIMED"
	[4]="--rw=read --bs=1M"
	[5]="--rw=read --bs=1M --invalidate=0 $TIMED"
	[6]="--rw=randread --bs=8k --invalidate=0 $TIMED"
	[7]="--rw=write --bs=1M --end_fsync=1 --iomem_align=100")
WORKLOAD_NAME=([1]=randwrite-fdatasync [2]=buffered-8k [3]=seqwrite-1m
	[4]=seqread-1m-cold [5]=seqread-1m-warm [6]=randread-8k-warm
	[7]=seqwrite-1m-unal-cold)

# Empty every cache TARGET's files could be read from: the daemon's (by a
# remount, which writes everything back first) and the kernel's.
drop_caches() {
	if [[ $1 != native ]]; then
		umount_foliofs "$1"
		mount_foliofs "$1"
	fi
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# Read every fio file of DIR once, so that a warm run finds it cached.
read_files() {
	cat "$1"/bench.* >/dev/null
}

run_one() {	# TARGET WORKLOAD ROUND (N, or N.K for the Kth repeat of round N)
	local target=$1 w=$2 r=$3 dir tag
	dir=$(dir_of "$target")
	tag=$target-$w-$r
	sync_files "$dir"
	wait_clean "$dir"
	case $w in
	4 | 7) drop_caches "$target"; dir=$(dir_of "$target") ;;
	5 | 6) read_files "$dir" ;;
	esac
	log "round $r: ${WORKLOAD_NAME[$w]} on $target"
	snap "$dir" "$WORK/s-$tag-a"
	# shellcheck disable=SC2086
	fio "${FIO_COMMON[@]}" --directory="$dir" ${WORKLOAD_ARGS[$w]} \
		--output-format=json \
		--output="$WORK/fio-$tag.json" || die "fio ${WORKLOAD_NAME[$w]} on $target"
	snap "$dir" "$WORK/s-$tag-b"
	sync_files "$dir"
	snap "$dir" "$WORK/s-$tag-c"
	printf '%s\t%s\t%s\t%s\n' "$target" "$w" "$r" "$WORK/fio-$tag.json" >>"$RESULTS"
}

log "work directory $WORK; foliofs $FOLIOFS; extra options '${FOLIOFS_OPTS:-none}'"
log "$(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) RAM," \
	"kernel $(uname -r), $(df -T "$WORK" | awk 'NR == 2 {print $2 " on " $1}')," \
	"load $(cut -d' ' -f1-3 /proc/loadavg)"
for t in "${TARGET_LIST[@]}"; do
	if [[ $t == native ]]; then
		mkdir -p "$WORK/native"
	else
		mount_foliofs "$t"
	fi
	log "$t: laying out $JOBS x $SIZE"
	fio "${FIO_COMMON[@]}" --directory="$(dir_of "$t")" --bs=1M --create_only=1 \
		--output="$WORK/layout-$t.txt" >/dev/null || die "fio layout on $t"
done
# Rounds: the targets take turns first, so slow drift of a shared machine
# hits them alike; the report takes the median of the rounds.
n=${#TARGET_LIST[@]}
for ((r = 1; r <= ROUNDS; r++)); do
	for w in "${WORKLOAD_LIST[@]}"; do
		if ((w == 4)); then
			# Repeats take turns too: the disk's swings hit every target.
			for ((k = 1; k <= REPEATS; k++)); do
				for ((i = 0; i < n; i++)); do
					run_one "${TARGET_LIST[$(((i + r - 1) % n))]}" "$w" "$r.$k"
				done
			done
			continue
		fi
		for ((i = 0; i < n; i++)); do
			run_one "${TARGET_LIST[$(((i + r - 1) % n))]}" "$w" "$r"
		done
	done
done
for t in "${TARGET_LIST[@]}"; do
	[[ $t != native ]] && umount_foliofs "$t"
done

CUSTOM=
for t in "${!T_BASE[@]}"; do
	CUSTOM+="$t:$(target_opts "$t");"
done
python3 - "$RESULTS" "$DURATION" "$SIZE" "$JOBS" "$ROUNDS" "$REPEATS" "${FOLIOFS_OPTS:-}" \
	"$(IFS=,; echo "${TARGET_LIST[*]}")" "$WORKLOADS" "$CUSTOM" <<'EOF'
import json, os, statistics, sys

results, duration, size, jobs, rounds, repeats, extra, targets, workloads, custom = sys.argv[1:11]
TARGETS = targets.split(',')
WORKLOADS = workloads.split(',')
NAMES = {'1': 'randwrite-fdatasync 4k', '2': 'buffered-8k', '3': 'seqwrite-1m',
         '4': 'seqread-1m-cold', '5': 'seqread-1m-warm', '6': 'randread-8k-warm',
         '7': 'seqwrite-1m-unal-cold'}
READS = ('4', '5', '6')
OPTS = {'native': '-', 'block': 'wb_granularity=block', 'folio': 'wb_granularity=folio'}
for m in ('direct', 'writethrough', 'writeback'):
    OPTS[m] = 'cache=' + m
    OPTS[m + '-ring'] = 'cache=%s,uring=on' % m
OPTS.update({'pthp': 'passthrough_hp', 'pthp-direct': 'ph --direct-io --nopassthrough',
             'pthp-direct-ring': 'ph --direct-io --nopassthrough -o io_uring'})
OPTS.update(item.split(':', 1) for item in custom.split(';') if item)


def stats(path):
    out = {}
    for line in open(path):
        k, v = line.split()
        # Numbers; the policies in force are names (dirty_account page).
        out[k] = int(v) if v.isdigit() else v
    return out


def p99(lat):
    v = (lat.get('percentile') or {}).get('99.000000')
    return v / 1000.0 if v else None


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


runs = {}
for line in open(results):
    target, w, r, path = line.rstrip('\n').split('\t')
    j = json.load(open(path))['jobs'][0]
    if j.get('error'):
        sys.exit('fio reported error %s for %s' % (j['error'], path))
    io = j['read' if w in READS else 'write']
    res = {'iops': io['iops'], 'mbs': io['bw_bytes'] / 1e6, 'p99_io': p99(io['clat_ns']),
           'p99_sync': p99(j['sync']['lat_ns']) if j.get('sync', {}).get('lat_ns', {}).get('N') else None}
    # fio-TAG.json -> s-TAG: the file name only (WORKDIR may hold '/fio-').
    d, f = os.path.split(path)
    base = os.path.join(d, 's-' + f[len('fio-'):-len('.json')])
    sa, sb, sc = stats(base + '-a'), stats(base + '-b'), stats(base + '-c')
    if sa and w not in READS:
        app = sb['app_write_bytes'] - sa['app_write_bytes']
        res['app'] = app
        res['backing'] = sc['backing_write_bytes'] - sa['backing_write_bytes']
        res['dirtied'] = (sc['nr_dirtied'] - sa['nr_dirtied']) * 4096
        res['run'] = (sb['backing_write_bytes'] - sa['backing_write_bytes']) / app if app else None
        res['sync'] = res['backing'] / app if app else None
        res['per_dirtied'] = res['backing'] / res['dirtied'] if res['dirtied'] else None
        # Backing reads a write cost (blocks partly written that were not cached).
        res['bk_read'] = (sb['backing_read_bytes'] - sa['backing_read_bytes']) / app \
            if app else None
    if sa and w in READS:
        # Bytes the daemon's cache returned per byte fio read: 0 when the
        # kernel served the reads itself.
        res['daemon_read'] = (sb['app_read_bytes'] - sa['app_read_bytes']) / io['io_bytes'] \
            if io['io_bytes'] else None
    res['round'] = r
    runs.setdefault((target, w), []).append(res)

data = {}
for key, rs in runs.items():
    data[key] = {k: med([x.get(k) for x in rs])
                 for k in ('iops', 'mbs', 'p99_io', 'p99_sync', 'run', 'sync', 'per_dirtied',
                           'app', 'backing', 'dirtied', 'daemon_read', 'bk_read')}
    data[key]['all_iops'] = [x['iops'] for x in rs]
    data[key]['all_mbs'] = [x['mbs'] for x in rs]
# x native: the median over rounds of each round's ratio to native, so that
# a round the whole machine ran slow in counts as one ratio, not as one slow
# native and one slow target taken from different rounds.
for (t, w), rs in runs.items():
    nat = {x['round']: x['iops'] for x in runs.get(('native', w), [])}
    ratios = [x['iops'] / nat[x['round']] for x in rs if nat.get(x['round'])]
    data[(t, w)]['ratio'] = med(ratios)
    data[(t, w)]['all_ratios'] = ratios


def spread(vals, fmt):
    """' (LOW-HIGH)' over more than one run, else ''."""
    if len(vals) < 2:
        return ''
    return ' (' + fmt % min(vals) + '-' + fmt % max(vals) + ')'


def f(v, fmt):
    return fmt % v if v is not None else '-'


print()
print('fio, ioengine=psync, %s jobs x %s, %s s per timed run, %s round(s) (medians), '
      '%s cold read(s) per round; foliofs extra options: %s; transport: /dev/fuse (uring=off), '
      'FUSE over io_uring for the -ring targets (uring=on)' % (
          jobs, size, duration, rounds, repeats, extra or 'none'))
cols = '%-23s %-17s %-28s %8s %8s %8s %11s %11s %7s %7s %10s %8s %8s'
hdr = cols % ('workload', 'target', 'foliofs options', 'IOPS', 'MB/s', 'x native', 'p99 I/O',
              'p99 fdsync', 'bk/app', 'bk/app', 'bk/dirtied', 'daemon', 'bk read')
print(hdr)
print(cols % ('', '', '', '', '', '', '', '', 'run', '+sync', '+sync', 'read', '/app'))
print('-' * len(hdr))
for w in WORKLOADS:
    for t in TARGETS:
        r = data.get((t, w))
        if not r:
            continue
        print('%-23s %-17s %-28s %8.0f %8.0f %8s %8s us %8s us %7s %7s %10s %8s %8s' % (
            NAMES[w], t, OPTS[t], r['iops'], r['mbs'], f(r['ratio'], '%.2fx'),
            f(r['p99_io'], '%.0f'), f(r['p99_sync'], '%.0f'), f(r['run'], '%.2f'),
            f(r['sync'], '%.2f'), f(r['per_dirtied'], '%.2f'), f(r['daemon_read'], '%.2f'),
            f(r['bk_read'], '%.4f')))
print()
print('x native: median over the rounds of the IOPS ratio to native in the same round.')
print('bk/app: bytes written to the backing store per byte the application wrote '
      '("run": during the run; "+sync": with the fsync of every file after it).')
print('bk/dirtied: per byte of pages that became dirty (nr_dirtied x 4 KiB), i.e. '
      'write amplification of writeback.')
print('daemon read: bytes the daemon\'s cache returned per byte fio read (0: the kernel '
      'served the reads from its own pages).')
print('bk read/app: bytes the daemon read from the backing store per byte fio wrote '
      '(blocks a write covered only in part that were not cached).')
for w in WORKLOADS:
    for t in TARGETS:
        r = data.get((t, w))
        if r and len(r['all_iops']) > 1:
            print('  IOPS per run %-23s %-12s %s' % (NAMES[w], t,
                  ' '.join('%.0f' % v for v in r['all_iops'])))
for t in TARGETS:
    for w in WORKLOADS:
        r = data.get((t, w))
        if r and r.get('app'):
            print('  %-12s %-23s app wrote %6.0f MiB, pages dirtied %6.0f MiB, backing written '
                  '%6.0f MiB' % (t, NAMES[w], r['app'] / 2**20, r['dirtied'] / 2**20,
                                 r['backing'] / 2**20))
print()
print('x native (median of the per-round ratios), workload by target; in brackets the '
      'lowest and highest of the runs, where there were several:')
print()
print('| workload | ' + ' | '.join(TARGETS) + ' |')
print('|---|' + '---:|' * len(TARGETS))
for w in WORKLOADS:
    cells = []
    for t in TARGETS:
        r = data.get((t, w))
        if not r:
            cells.append('')
        elif t == 'native':
            cells.append('%.0f MB/s' % r['mbs'] + spread(r['all_mbs'], '%.0f')
                         if w in ('3', '4', '5', '7') else
                         '%.0f IOPS' % r['iops'] + spread(r['all_iops'], '%.0f'))
        else:
            cells.append(f(r['ratio'], '%.2f') + spread(r['all_ratios'], '%.2f'))
    print('| %s | %s |' % (NAMES[w], ' | '.join(cells)))
print()
print('targets (issue): block granularity writes 1.0x the dirtied bytes; '
      'randwrite+fdatasync >= 0.8x native IOPS; buffered 8K >= 0.6x native IOPS in every mode; '
      '1 MiB seq write >= 0.8x; 1 MiB seq read cold >= 0.9x; 8 KiB random read warm >= 0.8x '
      'in writethrough')
GOALS = {'1': 0.8, '2': 0.6, '3': 0.8, '4': 0.9, '6': 0.8}
for w in WORKLOADS:
    for t in TARGETS:
        r = data.get((t, w))
        if t == 'native' or t.startswith('pthp') or w not in GOALS or not r \
                or r['ratio'] is None:
            continue
        if w == '6' and t != 'writethrough':
            continue
        print('  %-23s %-12s %.2fx native IOPS: %s' % (
            NAMES[w], t, r['ratio'], 'met' if r['ratio'] >= GOALS[w] else 'NOT met'))
for w in WORKLOADS:
    r = data.get(('block', w))
    if r and r['per_dirtied'] is not None:
        print('  %-23s block %.3fx dirtied bytes written: %s' % (
            NAMES[w], r['per_dirtied'], 'met' if abs(r['per_dirtied'] - 1) < 0.005 else 'NOT met'))
EOF
