#!/bin/bash
# Issue 31's side-by-side rerun (2026-12-05, afternoon): the commands the
# results README quotes.  Run as root from the repository at the commit
# recorded in $OUT/commit; NEW and OLD are release builds of that commit
# and of f546a26 (the head before this session's changes).
set -x
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)
cd "$REPO"
export PTHP=${PTHP:-/var/tmp/speed-pthp/build/example/passthrough_hp}
export FOLIOFS=${NEW:?release build of this commit}/foliofs
OLD=${OLD:?release build of f546a26}
OUT=${OUT:-/var/tmp/speed-b/out}; mkdir -p "$OUT"
old=$(cat /sys/module/fuse/parameters/enable_uring); echo Y > /sys/module/fuse/parameters/enable_uring
trap 'echo $old > /sys/module/fuse/parameters/enable_uring' EXIT
git rev-parse HEAD > "$OUT/commit"
date -u > "$OUT/start"
# A. pgbench -N, scale 20, 8 clients, 3 iterations, configurations in turns
contrib/tools/pgcompare.py -r 3 -T 20 -o dirty_bytes=0 \
  --config native --config default=cache=direct,uring=off --config best=cache=writethrough,uring=on \
  --config pthp --config pthp-direct --config pthp-direct-ring \
  -O "$OUT/pg" > "$OUT/pg.log" 2>&1
date -u > "$OUT/end-a"
# B. pgbench -i -s 20 + stop, 3 rounds
contrib/bench/pg-load.sh -r 3 native default=uring=off default-ring=uring=on \
  best=cache=writethrough,uring=on pthp-direct pthp-direct-ring > "$OUT/load.txt" 2> "$OUT/load.log"
date -u > "$OUT/end-b"
echo "$old" > /sys/module/fuse/parameters/enable_uring
# C. many clients: native beside the default mount (/dev/fuse), 3 iterations each
for c in 8 256; do
  contrib/tools/pgcompare.py -r 3 -T 20 -c $c --pg-conf max_connections=300 -o dirty_bytes=0 \
    --config native --config default=cache=direct,uring=off \
    -O "$OUT/clients-$c" > "$OUT/clients-$c.log" 2>&1
done
date -u > "$OUT/end-c"
# D. fio: the head before this session against this commit, default mode
contrib/bench/bench-fio.sh -r 3 -T 10 -w 1,2,6 \
  -t native,before=direct@"$OLD"/foliofs,after=direct@"$FOLIOFS" > "$OUT/fio.txt" 2> "$OUT/fio.log"
date -u > "$OUT/end-d"
# E. what a round trip costs here, and how much of it is the idle vCPU's
# wake-up: this VM's cpuidle haltpoll polls 0 ns before halting
# (guest_halt_poll_ns=0); the kernel's default is 200000.  The same probes
# and the load phase with polling on, then the machine's setting back.
RT=contrib/results/speed-2026-12-05/scripts/rt.sh
mkdir -p /var/tmp/speed-prof
poll=$(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns)
trap 'echo $old > /sys/module/fuse/parameters/enable_uring; echo $poll > /sys/module/haltpoll/parameters/guest_halt_poll_ns' EXIT
for round in 1 2 3; do
  for p in 0 200000; do
    echo $p > /sys/module/haltpoll/parameters/guest_halt_poll_ns
    for t in native default pthp-direct; do
      case $t in
      native) args=(native "") ;;
      default) args=("$FOLIOFS" "cache=direct,uring=off") ;;
      pthp-direct) args=(pthp "--direct-io --nopassthrough") ;;
      esac
      echo "== round $round poll_ns=$p $t"
      bash $RT "${args[@]}" 5
    done
  done
done > "$OUT/rt.txt" 2>&1
echo 200000 > /sys/module/haltpoll/parameters/guest_halt_poll_ns
contrib/bench/pg-load.sh -r 3 native default=uring=off pthp-direct > "$OUT/load-haltpoll.txt" 2> "$OUT/load-haltpoll.log"
echo "$poll" > /sys/module/haltpoll/parameters/guest_halt_poll_ns
date -u > "$OUT/end-e"
