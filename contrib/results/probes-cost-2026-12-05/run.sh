#!/bin/bash
# Alternate the two builds, one round each, three times.
cd /work/wt-users
for i in 1 2 3; do
  for b in build-rel build-rel-np; do
    echo "=== $b round $i"
    FOLIOFS=$PWD/$b/foliofs bash contrib/bench/bench-fio.sh -T 15 -s 256M -j 2 -t native,block -w 2 -d /var/tmp 2>&1 | grep -E "^buffered-8k +(native|block) "
  done
done
