#!/bin/bash
# load-prof.sh: one `pgbench -i -s 20` and the stop after it on a fresh
# foliofs mount (as foliofs-test), with the daemon's CPU ticks and peak
# RSS; PERF=1 adds perf record -g on the daemon (perf.data), BT=1 runs
# bpftrace script ${BTS:-fuse-requests.bt} around it (bt.txt).
# BIN: the foliofs binary; OPTS: its -o options (default cache=direct).
set -e
B=${WORK:-/var/tmp/k31}; PGBIN=/usr/lib/postgresql/15/bin; U=foliofs-test
HERE=$(cd "$(dirname "$0")" && pwd)
fusermount3 -u $B/pm 2>/dev/null || true
rm -rf $B/pback; mkdir -p $B/pback $B/pm $B/sock; chown $U $B/pback $B/pm $B/sock
su $U -s /bin/bash -c "${BIN:?foliofs binary} -o ${OPTS:-cache=direct} $B/pback $B/pm"
DPID=$(pgrep -n -f "foliofs.*$B/pback")
su $U -s /bin/bash -c "$PGBIN/initdb -D $B/pm/data --data-checksums -A trust >/dev/null"
su $U -s /bin/bash -c "$PGBIN/pg_ctl -D $B/pm/data -l $B/sock/pg.log -w start -o '-c shared_buffers=128MB -c max_wal_size=1GB -c listen_addresses= -k $B/sock -p 5497'" >/dev/null
read -r u0 s0 < <(awk '{print $14, $15}' /proc/$DPID/stat)
t0=$(date +%s.%N)
[ -n "$BT" ] && { bpftrace "$HERE/${BTS:-fuse-requests.bt}" -o $B/bt.txt & BP=$!; sleep 3; }
[ -n "$PERF" ] && { perf record -F 2000 -g -p $DPID -o $B/perf.data 2>/dev/null & PP=$!; sleep 0.5; }
su $U -s /bin/bash -c "$PGBIN/pgbench -h $B/sock -p 5497 -i -s 20 postgres" 2>&1 | grep done
su $U -s /bin/bash -c "$PGBIN/pg_ctl -D $B/pm/data -m fast -w stop" >/dev/null
t1=$(date +%s.%N)
read -r u1 s1 < <(awk '{print $14, $15}' /proc/$DPID/stat)
[ -n "$BT" ] && { kill -INT $BP; wait $BP || true; }
[ -n "$PERF" ] && { kill -INT $PP; wait $PP || true; }
echo "wall $(echo "$t1 - $t0" | bc) daemon user $((u1 - u0)) sys $((s1 - s0)) ticks"
su $U -s /bin/bash -c "cat $B/pm/.foliofs/stats" > $B/stats.txt
grep -E "VmHWM|VmRSS" /proc/$DPID/status
fusermount3 -u $B/pm
