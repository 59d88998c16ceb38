#!/bin/bash
# init.sh BIN|native OPTS: initdb, pgbench -i -s 20 (phase times), checkpoint, stop; daemon CPU.
set -euo pipefail
BIN=$1 OPTS=$2
PGBIN=/usr/lib/postgresql/15/bin
R=$(mktemp -d /var/tmp/speed-prof/init.XXXX); chmod 755 $R
mkdir -p $R/back $R/mnt $R/sock; chown -R foliofs-test $R
u() { runuser -u foliofs-test -- sh -c "$1"; }
cleanup() { u "$PGBIN/pg_ctl -D $DATA -m immediate -w stop" >/dev/null 2>&1 || true; u "fusermount3 -u $R/mnt" 2>/dev/null || true; sleep 0.5; rm -rf $R; }
trap cleanup EXIT
D=
if [[ $BIN == native ]]; then DATA=$R/back/data
elif [[ $BIN == pthp ]]; then
	u "$PTHP --foreground $OPTS $R/back $R/mnt >$R/pthp.log 2>&1 &"
	for _ in $(seq 100); do grep -q " $R/mnt fuse" /proc/self/mounts && break; sleep 0.05; done
	D=$(pgrep -n -f "^$PTHP .*$R/mnt\$"); DATA=$R/mnt/data
else
	u "$BIN ${OPTS:+-o $OPTS} $R/back $R/mnt"; D=$(pgrep -n -f "^$BIN .*$R/mnt\$"); DATA=$R/mnt/data
fi
tk() { [[ -n $D ]] && awk '{ sub(/.*\) /, ""); print $12 + $13 }' /proc/$D/stat || echo 0; }
u "$PGBIN/initdb -D $DATA --data-checksums -A trust" >/dev/null
u "$PGBIN/pg_ctl -D $DATA -l $R/pg.log -w start -o \"-c shared_buffers=128MB -c max_wal_size=1GB -c listen_addresses= -k $R/sock -p 5499\"" >/dev/null
[[ -n ${STRACE:-} ]] && { strace -c -f -p $D -o $STRACE >/dev/null 2>&1 & SP=$!; sleep 0.5; }
[[ -n ${PERF:-} ]] && { perf record -q ${PERFARGS:--a -g} -F 999 -o $PERF ${PERFPID:+-p $D} >/dev/null 2>&1 & PP=$!; }
c0=$(tk); t0=$(date +%s%N)
u "$PGBIN/pgbench -h $R/sock -p 5499 -i -s 20 postgres" > $R/init.out 2>&1
t1=$(date +%s%N); c1=$(tk)
[[ -n $D ]] && u "cat $R/mnt/.foliofs/stats" > $R/stats1 2>/dev/null || true
u "$PGBIN/psql -h $R/sock -p 5499 -q -c checkpoint postgres"
t2=$(date +%s%N)
u "$PGBIN/pg_ctl -D $DATA -m fast -w stop" >/dev/null
t3=$(date +%s%N); c3=$(tk)
[[ -n ${STRACE:-} ]] && { kill -INT $SP; wait $SP || true; }
[[ -n ${PERF:-} ]] && { kill -INT $PP; wait $PP || true; }
hz=$(getconf CLK_TCK)
echo "$BIN $OPTS: init $(( (t1-t0)/1000000 )) ms, checkpoint $(( (t2-t1)/1000000 )) ms, stop $(( (t3-t2)/1000000 )) ms, total $(( (t3-t0)/1000000 )) ms; daemon cpu init $(( (c1-c0)*1000/hz )) ms total $(( (c3-c0)*1000/hz )) ms"
grep "^done" $R/init.out
[[ -s $R/stats1 && -n ${STATS:-} ]] && cp $R/stats1 $STATS || true
