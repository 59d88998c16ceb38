#!/bin/bash
# The side-by-side comparison of issue 31 (commands recorded in the results README).
set -x
cd /work/wt-speed
export PTHP=/var/tmp/speed-pthp/build/example/passthrough_hp FOLIOFS=/work/wt-speed/build-rel/foliofs
OUT=/var/tmp/speed-cmp/out; mkdir -p $OUT
old=$(cat /sys/module/fuse/parameters/enable_uring); echo Y > /sys/module/fuse/parameters/enable_uring
trap 'echo $old > /sys/module/fuse/parameters/enable_uring' EXIT
git -C /work/wt-speed rev-parse HEAD > $OUT/commit
date -u > $OUT/start
# A. pgbench -N, scale 20, 8 clients, 3 iterations, configurations in turns
contrib/tools/pgcompare.py -r 3 -T 20 -o dirty_bytes=0 \
  --config native --config default=cache=direct,uring=off --config best=cache=writethrough,uring=on \
  --config pthp --config pthp-direct --config pthp-direct-ring \
  -O $OUT/pg > $OUT/pg.log 2>&1
date -u > $OUT/end-a
# B. pgbench -i -s 20 + stop, 3 rounds
contrib/bench/pg-load.sh -r 3 native default=uring=off best=cache=writethrough,uring=on \
  pthp pthp-direct pthp-direct-ring > $OUT/load.txt 2> $OUT/load.log
date -u > $OUT/end-b
echo $old > /sys/module/fuse/parameters/enable_uring
# C. many clients, default mount (/dev/fuse), the ratio limits and a 32 MiB budget
for c in 8 256; do
  contrib/tools/pgcompare.py -r 1 -T 20 -c $c --pg-conf max_connections=300 -o dirty_bytes=0 \
    --config default=cache=direct,uring=off --config throttled=cache=direct,uring=off,dirty_bytes=32M \
    -O $OUT/clients-$c > $OUT/clients-$c.log 2>&1
done
(ulimit -n 8192; contrib/tools/pgcompare.py -r 1 -T 20 -c 1024 --pg-conf max_connections=1100 -o dirty_bytes=0 \
    --config default=cache=direct,uring=off --config throttled=cache=direct,uring=off,dirty_bytes=32M \
    -O $OUT/clients-1024 > $OUT/clients-1024.log 2>&1)
date -u > $OUT/end-c
