#!/bin/bash
# pgrun.sh BIN OPTS CLIENTS SECONDS [MAXCONN]: fresh copy of the template cluster on a foliofs
# mount, pgbench -N; prints tps, daemon CPU us/tx, syscr/syscw per tx, us per reply.
set -euo pipefail
BIN=$1 OPTS=$2 CL=$3 SEC=$4 MAXC=${5:-100}
PGBIN=/usr/lib/postgresql/15/bin
T=/var/tmp/speed-prof/tmpl
R=$(mktemp -d /var/tmp/speed-prof/run.XXXX)
chown foliofs-test "$R"; chmod 755 "$R"
u() { runuser -u foliofs-test -- sh -c "$1"; }
if [[ ! -d $T/data ]]; then
	mkdir -p $T; chown foliofs-test $T
	u "$PGBIN/initdb -D $T/data --data-checksums -A trust >/dev/null"
	u "$PGBIN/pg_ctl -D $T/data -l $T/pg.log -w start -o '-c listen_addresses= -k $T -p 5498'" >/dev/null
	u "$PGBIN/pgbench -h $T -p 5498 -i -q -s 20 postgres" >/dev/null 2>&1
	u "$PGBIN/pg_ctl -D $T/data -m fast -w stop" >/dev/null
fi
mkdir -p $R/back $R/mnt $R/sock; chown -R foliofs-test $R
cp -a $T/data $R/back/data
cleanup() {
	u "$PGBIN/pg_ctl -D $R/mnt/data -m immediate -w stop" >/dev/null 2>&1 || true
	u "fusermount3 -u $R/mnt" 2>/dev/null || umount -l $R/mnt 2>/dev/null || true
	rm -rf $R
}
trap cleanup EXIT
u "$BIN ${OPTS:+-o $OPTS} $R/back $R/mnt"
D=$(pgrep -n -f "^$BIN .*$R/mnt\$")
u "$PGBIN/pg_ctl -D $R/mnt/data -l $R/pg.log -w start -o '-c shared_buffers=128MB -c max_wal_size=1GB -c max_connections=$MAXC -c listen_addresses= -k $R/sock -p 5498'" >/dev/null
u "cat $R/mnt/data/base/*/* $R/mnt/data/pg_wal/0* > /dev/null"
u "$PGBIN/pgbench -h $R/sock -p 5498 -N -M prepared -c 8 -j 2 -T ${WARM:-5} postgres" >/dev/null 2>&1
tk() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' /proc/$D/stat; }
ut() { awk '{ sub(/.*\) /, ""); print $12 }' /proc/$D/stat; }
io() { awk '/^syscr/ {r=$2} /^syscw/ {w=$2} END {print r, w}' /proc/$D/io; }
[[ -n ${BULK:-} ]] && { setpriv --reuid=foliofs-test --regid=foliofs-test --init-groups /usr/bin/python3 -c "
import os
fd = os.open('$R/mnt/bulk', os.O_WRONLY | os.O_CREAT, 0o644)
b = b'b' * (1 << 20); i = 0
while True:
    os.pwrite(fd, b, (i % 64) << 20); i += 1
" & BP=$!; }
t0=$(tk); u0=$(ut); read r0 w0 < <(io)
[[ -n ${STRACE:-} ]] && { timeout -s INT ${PERFSEC:-8} strace -c -f -p $D -o $STRACE >/dev/null 2>&1 & }
[[ -n ${PERF:-} ]] && { perf record -q -F 499 ${PERFEV:-} --call-graph dwarf,16384 -p $D -o $PERF sleep ${PERFSEC:-8} >/dev/null 2>&1 & }
u "ulimit -n 4096; $PGBIN/pgbench -h $R/sock -p 5498 -N -M prepared -c $CL -j 2 -T $SEC -P 1 postgres" > $R/out 2>&1 || { tail -20 $R/out; echo PGBENCH FAILED; }
t1=$(tk); u1=$(ut); read r1 w1 < <(io)
[[ -n ${BULK:-} ]] && { kill $BP 2>/dev/null; wait $BP 2>/dev/null || true; }
u "cat $R/mnt/.foliofs/stats" | grep -E "^(throttle_events|throttle_ms|dirty_thresh|backing_write_bytes|app_write_bytes) " | tr "\n" " "; echo
tps=$(awk '/^tps/ {print $3; exit}' $R/out)
fail=$(awk '/number of failed transactions/ {print $5}' $R/out)
prog=$(awk '/^progress:/ {t=$4; if (min == "" || t < min) min = t; if ($7 > maxl) maxl = $7} END {print "min_tps_1s", min, "max_lat_1s_ms", maxl}' $R/out)
maxlat=$(awk '/latency average/ {print "lat_avg", $4}' $R/out)
tx=$(awk '/number of transactions actually processed/ {print $NF}' $R/out | cut -d/ -f1)
awk -v tps=$tps -v tx=$tx -v t=$((t1-t0)) -v r=$((r1-r0)) -v w=$((w1-w0)) -v hz=$(getconf CLK_TCK) -v fail="$fail" -v cl=$CL -v ut=$((u1-u0)) 'BEGIN {
	printf "clients %d tps %.0f tx %d failed %s daemon_us/tx %.1f (user %.1f) reads/tx %.2f writes/tx %.2f us/reply %.2f\n", cl, tps, tx, fail, t*1e6/hz/tx, ut*1e6/hz/tx, r/tx, w/tx, t*1e6/hz/w }'
grep "^progress" $R/out | tr "\n" " " | cut -c1-2000; echo
echo "   $prog $maxlat"; grep -iE "error|fatal|abort" $R/out | head -5 || true
