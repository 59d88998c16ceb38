#!/bin/bash
# The seed's scenario, 10 x 30 s, 6.17-folio, replayed with the feed
# unbounded (sim_feed_window=0) and with the default window.
# Usage: run.sh FOLIOFS_SIM OUTDIR (OUTDIR needs 7 GB for the trace).
set -e
[ $# -eq 2 ] || { echo "usage: $0 FOLIOFS_SIM OUTDIR" >&2; exit 2; }
S=$(realpath "$1")
cd "$2"
GEN='pgbench,clients=1024,scale=8470,fillfactor=90,tps=200000,shared_buffers=96G,checkpoint_s=300,ckpt_target=90,fpw=1,hint_fpw=1,index=1,wal_seg=64M,wal_files=64,wal_each=1,scan=1,iterations=10,duration=30,warmup_s=400,deadline=1,scan=2,scan_s=60,gap_s=5'
OPTS='sim_data=0,cache_size=275G,dirty_ratio=20,dirty_background_ratio=10,folio_size=2M,folio_policy=kernel,throttle=bdp,dev_raid=12,dev_iops=32000,dev_bw=1000M,dev_lat_us=300,dev_qd=32,dev_flush_us=200,dev_stripe=512K,ra_model=6.17,dirty_account=folio'
[ -f seed.trace ] || nice -n 10 $S gen "$GEN" -o seed.trace > gen.out
for w in 0 default; do
  o=$OPTS; [ $w = default ] || o="$OPTS,sim_feed_window=$w"
  echo "# $S seed.trace -o $o" > w$w.out
  nice -n 10 /usr/bin/time -f "wall %e s, user %U s, sys %S s, max RSS %M KiB" $S seed.trace -o "$o" >> w$w.out 2> w$w.err
done
