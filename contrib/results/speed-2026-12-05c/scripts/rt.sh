#!/bin/bash
# rt.sh BIN|native|pthp OPTS [SECONDS]: per-request cost of one synchronous FUSE request:
# fio psync 1 job, 8 KiB random writes then reads of a cached 64 MiB file, as a non-root user.
set -euo pipefail
BIN=$1 OPTS=$2 SEC=${3:-10}
R=$(mktemp -d /var/tmp/speed-prof/rt.XXXX); chmod 755 $R
mkdir -p $R/back $R/mnt; chown -R foliofs-test $R
u() { runuser -u foliofs-test -- sh -c "$1"; }
cleanup() { u "fusermount3 -u $R/mnt" 2>/dev/null || true; sleep 0.5; rm -rf $R; }
trap cleanup EXIT
D=
if [[ $BIN == native ]]; then DIR=$R/back
elif [[ $BIN == pthp ]]; then
	u "$PTHP --foreground $OPTS $R/back $R/mnt >$R/pthp.log 2>&1 &"
	for _ in $(seq 100); do grep -q " $R/mnt fuse" /proc/self/mounts && break; sleep 0.05; done
	D=$(pgrep -n -f "^$PTHP .*$R/mnt\$"); DIR=$R/mnt
else
	u "$BIN ${OPTS:+-o $OPTS} $R/back $R/mnt"; D=$(pgrep -n -f "foliofs .*$R/mnt\$"); DIR=$R/mnt
fi
u "fio --name=l --directory=$DIR --filename=f --size=64M --rw=write --bs=1M --end_fsync=1 >/dev/null"
tk() { [[ -n $D ]] && awk '{ sub(/.*\) /, ""); print $12 + $13 }' /proc/$D/stat || echo 0; }
for rw in ${RWS:-randwrite randread}; do
	[[ -n ${PERF:-} ]] && { perf record -q ${PERFARGS:--a -g} ${PERFPID:+-p $D} -F 999 -o $PERF.$rw sleep $((SEC - 1)) >/dev/null 2>&1 & }
	t0=$(tk)
	u "fio --name=r --directory=$DIR --filename=f --size=64M --rw=$rw --bs=8k --ioengine=psync --runtime=$SEC --time_based --invalidate=0 --output-format=json" > $R/o.json
	t1=$(tk)
	python3 - $R/o.json $((t1-t0)) $(getconf CLK_TCK) $rw <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))['jobs'][0]
rw = sys.argv[4]; io = j['write' if 'write' in rw else 'read']
n = io['total_ios']; cpu = int(sys.argv[2]) / int(sys.argv[3])
print('%-9s IOPS %7.0f  clat mean %6.2f us  client cpu/req %5.2f us  daemon cpu/req %5.2f us' % (
    rw, io['iops'], io['clat_ns']['mean'] / 1000, (j['usr_cpu'] + j['sys_cpu']) / 100 * j['job_runtime'] / 1000 / n * 1e6,
    cpu / n * 1e6))
PY
done
