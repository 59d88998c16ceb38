#!/bin/bash
# The seed's scenario, 10 x 30 s: the checkpointer paced (ckpt_pace=1, the
# default) against its recorded waits (ckpt_pace=0), per-folio and per-page
# charging, 6.17 readahead; two replays at a time at nice 10.
# Usage: run.sh FOLIOFS_SIM OUTDIR (OUTDIR needs 14 GB for the two traces).
set -e
[ $# -eq 2 ] || { echo "usage: $0 FOLIOFS_SIM OUTDIR" >&2; exit 2; }
S=$(realpath "$1")
cd "$2"
GEN='pgbench,clients=1024,scale=8470,fillfactor=90,tps=200000,shared_buffers=96G,checkpoint_s=300,ckpt_target=90,fpw=1,hint_fpw=1,index=1,wal_seg=64M,wal_files=64,wal_each=1,scan=1,iterations=10,duration=30,warmup_s=400,deadline=1,scan=2,scan_s=60,gap_s=5'
OPTS='sim_data=0,cache_size=275G,dirty_ratio=20,dirty_background_ratio=10,folio_size=2M,folio_policy=kernel,throttle=bdp,dev_raid=12,dev_iops=32000,dev_bw=1000M,dev_lat_us=300,dev_qd=32,dev_flush_us=200,dev_stripe=512K,ra_model=6.17'
for p in 0 1; do
  [ -f pace$p.trace ] || nice -n 10 $S gen "$GEN,ckpt_pace=$p" -o pace$p.trace > gen-pace$p.out
done
run() {	# trace config
  echo "# $S $1.trace -o $OPTS,dirty_account=$2" > $1-$2.out
  nice -n 10 /usr/bin/time -f "wall %e s, user %U s, sys %S s, max RSS %M KiB" \
    $S $1.trace -o "$OPTS,dirty_account=$2" >> $1-$2.out 2> $1-$2.err
}
run pace1 folio & run pace1 page & wait
run pace0 folio & run pace0 page & wait
