#!/bin/bash
# The round trip, the load phase and pgbench -N with the guest's halt
# polling off (this VM's setting, guest_halt_poll_ns=0) and on (the
# kernel's default, 200000), on the quiet machine after run.sh (13:29-13:37
# UTC).  Root; NEW as for run.sh.  Writes $OUT/haltpoll/.
set -x
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)
cd "$REPO"
export PTHP=${PTHP:-/var/tmp/speed-pthp/build/example/passthrough_hp}
export FOLIOFS=${NEW:?release build of this commit}/foliofs
OUT=${OUT:-/var/tmp/speed-c/out}/haltpoll; mkdir -p "$OUT" /var/tmp/speed-prof
HP=/sys/module/haltpoll/parameters/guest_halt_poll_ns
poll=$(cat $HP); trap 'echo $poll > $HP' EXIT
RT=$(dirname "${BASH_SOURCE[0]}")/rt.sh
for round in 1 2; do
  for p in 0 200000; do
    echo $p > $HP
    for t in native default; do
      echo "== round $round poll_ns=$p $t"
      if [ $t = native ]; then bash $RT native "" 4; else bash $RT "$FOLIOFS" cache=direct,uring=off 4; fi
    done
  done
done > "$OUT/rt.txt" 2>&1
for p in 0 200000; do
  echo $p > $HP; echo "== poll $p"
  contrib/bench/pg-load.sh -r 3 native default=uring=off 2>/dev/null | tail -4
done > "$OUT/load-hp.txt"
echo 200000 > $HP
contrib/tools/pgcompare.py -r 3 -T 20 -o dirty_bytes=0 --config native \
  --config default=cache=direct,uring=off --config pthp-direct -O "$OUT/pg-hp" > "$OUT/pg-hp.log" 2>&1
