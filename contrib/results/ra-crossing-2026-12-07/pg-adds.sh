#!/bin/bash
# Which kernel path adds PostgreSQL's small folios: every
# mm_filemap_add_to_page_cache of order <= 2 by a postgres task, with its
# kernel stack, streamed to TRACE from a tracefs instance of its own, while
# contrib/kernel/pg-seed.py runs with the arguments given; then
# adds-by-path.py TRACE counts them by order and path.
#   sudo ./pg-adds.sh TRACE --scale 100 --iters 1 --duration 30 --mem 704M \
#       --dirty-bytes 64M --dirty-background-bytes 32M
set -u
out=$1; shift
T=/sys/kernel/tracing
mounted=0
if [ ! -d $T/instances ]; then mount -t tracefs nodev $T && mounted=1; fi
I=$T/instances/pg-adds-$$
mkdir $I || exit 1
EV=$I/events/filemap/mm_filemap_add_to_page_cache
echo 32768 > $I/buffer_size_kb
echo 'order <= 2 && comm == "postgres"' > $EV/filter
echo 1 > $I/options/stacktrace
echo 1 > $EV/enable
cat $I/trace_pipe > "$out" &
reader=$!
"$(dirname "$0")"/../../kernel/pg-seed.py "$@"
rc=$?
echo 0 > $EV/enable
sleep 2
kill $reader; wait $reader 2>/dev/null
grep -h '^overrun' $I/per_cpu/cpu*/stats
echo 0 > $I/options/stacktrace
rmdir $I
[ $mounted = 1 ] && umount $T
exit $rc
