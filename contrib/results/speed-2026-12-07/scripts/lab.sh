#!/bin/bash
# lab.sh: long-lived mounts with a PostgreSQL cluster each, for measuring by
# hand (issue 43, contrib/results/speed-2026-12-07).  As root; the daemons
# and servers run as foliofs-test.
#   lab.sh up NAME FOLIOFS_BINARY [OPTIONS]   a foliofs mount in $LAB/NAME
#   lab.sh up NAME pthp [ARGS]                passthrough_hp ($PTHP) instead
#   lab.sh init NAME [SCALE]                  initdb and pgbench -i (scale 20)
#   lab.sh start|stop NAME                    the server
#   lab.sh bench NAME PGBENCH_ARGS...         pgbench against it
#   lab.sh pid NAME                           the daemon's pid
#   lab.sh down NAME                          stop, unmount, remove
set -e
L=${LAB:-/var/tmp/speed-lab}
U=foliofs-test
PG=/usr/lib/postgresql/15/bin
PTHP=${PTHP:-passthrough_hp}
cmd=$1 name=$2; shift 2
d=$L/$name
case $cmd in
up)
	kind=$1; shift
	mkdir -p $d/b $d/m $d/sock; chown -R $U $d
	if [ $kind = pthp ]; then
		runuser -u $U -- sh -c "$PTHP --foreground $* $d/b $d/m > $d/daemon.log 2>&1 &"
	else
		runuser -u $U -- sh -c "$kind -f ${1:+-o $1} $d/b $d/m > $d/daemon.log 2>&1 &"
	fi
	for i in $(seq 100); do grep -q " $d/m fuse" /proc/mounts && break; sleep 0.1; done
	grep " $d/m fuse" /proc/mounts
	;;
init)
	runuser -u $U -- $PG/initdb --data-checksums -D $d/m/pg -A trust >/dev/null
	printf "listen_addresses=''\nunix_socket_directories='$d/sock'\nshared_buffers=128MB\nmax_wal_size=1GB\n" | runuser -u $U -- sh -c "cat >> $d/m/pg/postgresql.conf"
	runuser -u $U -- $PG/pg_ctl -D $d/m/pg -l $d/pg.log -w start >/dev/null
	runuser -u $U -- $PG/pgbench -h $d/sock -i -s ${1:-20} postgres > $d/init.log 2>&1
	runuser -u $U -- $PG/pg_ctl -D $d/m/pg -m fast -w stop >/dev/null
	;;
start) runuser -u $U -- $PG/pg_ctl -D $d/m/pg -l $d/pg.log -w start >/dev/null ;;
stop) runuser -u $U -- $PG/pg_ctl -D $d/m/pg -m fast -w stop >/dev/null ;;
bench) runuser -u $U -- $PG/pgbench -h $d/sock "$@" postgres ;;
pid) pgrep -f "$d/b $d/m" | head -1 ;;
down)
	runuser -u $U -- $PG/pg_ctl -D $d/m/pg -m immediate -w stop >/dev/null 2>&1 || true
	runuser -u $U -- fusermount3 -u $d/m || true
	sleep 2; rm -rf $d
	;;
esac
