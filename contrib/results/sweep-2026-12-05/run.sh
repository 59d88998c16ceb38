#!/bin/sh
# The sweep of README.md: 96 configurations of the committed pgbench trace,
# run directly (twice, compared) and through GNU parallel (merged, compared).
# Usage: contrib/results/sweep-2026-12-05/run.sh [FOLIOFS_SIM] (from the repo root)
set -e
S=${1:-build-rel/sim/foliofs-sim}
D=contrib/results/sweep-2026-12-05
set -- -o cache_size=64M,folio_size=2M,dev_bw=20M \
	-a throttle=bdp,strictlimit -a dirty_account=folio,page,block \
	-a dirty_bytes=2M,4M,8M,16M -a dirty_pinned_bytes=2M,4M,8M,0 \
	tests/sim-golden/pgbench.trace
T=$(mktemp -d)
/usr/bin/time -f "direct: wall %e s" "$S" sweep "$@" --csv "$T/a.csv"
/usr/bin/time -f "direct again: wall %e s" "$S" sweep "$@" --csv "$T/b.csv"
cmp "$T/a.csv" "$T/b.csv" && echo "the two CSVs are byte-identical"
/usr/bin/time -f "--jobs | parallel: wall %e s" sh -c "\"$S\" sweep $* --jobs | parallel > $T/pieces.csv"
"$S" sweep "$@" --merge "$T/pieces.csv" --csv "$D/sweep.csv" --plot "$D/sweep.png" 2>"$D/front.txt"
cmp "$T/a.csv" "$D/sweep.csv" && echo "the merged CSV is the direct one"
rm -r "$T"
