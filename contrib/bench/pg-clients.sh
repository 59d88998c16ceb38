#!/bin/bash
# pg-clients.sh: the seed's 1,024 pgbench clients on a default foliofs
# mount, beside 8 and 256 (issue 41).  contrib/tools/pgcompare.py does the
# work: one default mount and cluster per client count (foliofs-c8,
# foliofs-c256, foliofs-c1024), taking turns for 10 iterations of 60 s of
# pgbench -N -M prepared, so that the machine's drift hits all three alike.
# As the seed's reproducer (aws/repro-collection, workloads/postgresql)
# does, max_connections is 4096 and the open-file limits are raised, here
# to 8192 for the daemon, the server and pgbench (pgbench refuses more
# clients than its limit allows, less three).  Reported: tps and its ratio
# to 8 clients, failed transactions, latency percentiles (pgbench -l), and
# the daemon's peak threads, descriptors and resident memory.
# Options are pgcompare.py's and come last, so they win (--quick, -r, -T,
# -O DIR, ...); as root, everything runs as the user foliofs-test.
# Debian's python3 first: it is the one python3-matplotlib is installed for.
set -euo pipefail
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
exec "$PY" "$(dirname "${BASH_SOURCE[0]}")/../tools/pgcompare.py" \
	--default-mount --config foliofs= -c 8,256,1024 -r 10 -T 60 \
	--nofile 8192 --pg-conf max_connections=4096 --latency --count-failed "$@"
