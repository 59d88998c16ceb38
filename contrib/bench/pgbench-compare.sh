#!/bin/bash
# pgbench-compare.sh: the PostgreSQL policy comparison, contrib/tools/pgcompare.py,
# under the name this benchmark has always had.  Options are pgcompare.py's
# (--help); the comparison this script used to make, foliofs against a plain
# directory on the same disk, is
#   contrib/bench/pgbench-compare.sh --config native --config foliofs=
# Debian's python3 first: it is the one python3-matplotlib is installed for.
set -euo pipefail
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
exec "$PY" "$(dirname "${BASH_SOURCE[0]}")/../tools/pgcompare.py" "$@"
