#!/bin/bash
# Issue 31's last side-by-side rerun (2026-12-05, early afternoon, the
# machine quiet at its start): the commands the results README quotes.
# Run as root from the repository at the commit recorded in $OUT/commit.
# NEW: a release build of that commit.  HUGE: a release build of the same
# commit with 22d2a10's blockstate/file.c change taken back (a folio made
# by a stream of small requests asks for a huge page again), made by this
# script when HUGE is unset:
#   git worktree add --detach W HEAD && git -C W show 22d2a10 -- blockstate/file.c | git -C W apply -R
#   meson setup --buildtype=release B W && ninja -C B foliofs
set -x
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../.." && pwd)
cd "$REPO"
export PTHP=${PTHP:-/var/tmp/speed-pthp/build/example/passthrough_hp}
export FOLIOFS=${NEW:?release build of this commit}/foliofs
OUT=${OUT:-/var/tmp/speed-c/out}; mkdir -p "$OUT"
if [ -z "${HUGE:-}" ]; then
	HUGE=/var/tmp/speed-c/huge
	if [ ! -x "$HUGE/foliofs" ]; then
		rm -rf /var/tmp/speed-c/huge-src "$HUGE"
		git worktree add --detach /var/tmp/speed-c/huge-src HEAD
		git -C /var/tmp/speed-c/huge-src show 22d2a10 -- blockstate/file.c |
			git -C /var/tmp/speed-c/huge-src apply -R
		meson setup --buildtype=release "$HUGE" /var/tmp/speed-c/huge-src
		ninja -C "$HUGE" foliofs
	fi
fi
old=$(cat /sys/module/fuse/parameters/enable_uring); echo Y > /sys/module/fuse/parameters/enable_uring
trap 'echo $old > /sys/module/fuse/parameters/enable_uring' EXIT
git rev-parse HEAD > "$OUT/commit"
date -u > "$OUT/start"
uptime > "$OUT/load-start"
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
# D. fio, the rows of the issue's table: the default mode, writethrough,
# passthrough_hp with and without the kernel's cache, and the default mode
# with huge pages for stream-made folios (HUGE)
contrib/bench/bench-fio.sh -r 3 -T 10 -w 1,2,6 \
  -t native,direct,writethrough,pthp,pthp-direct,stream-huge=direct@"$HUGE"/foliofs \
  > "$OUT/fio.txt" 2> "$OUT/fio.log"
date -u > "$OUT/end-d"
# E. metadata, beside passthrough_hp
contrib/bench/bench-meta.sh -r 3 > "$OUT/meta.txt" 2> "$OUT/meta.log"
date -u > "$OUT/end-e"
uptime > "$OUT/load-end"
