#!/bin/bash
# cpu.sh NEW OLD TREE MNT [ROUNDS]: the daemon's CPU (utime + stime, clock
# ticks of 10 ms) and the wall time of `find` + stat over TREE through
# foliofs, cold (the kernel's dentries and inodes dropped first) and warm,
# NEW and OLD taking turns.  Run as root, with no pytest session running
# (the drop is machine-wide).
set -eu
new=$1 old=$2 tree=$3 mnt=$4 rounds=${5:-5}
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for r in $(seq "$rounds"); do
	for bin in "$new" "$old"; do
		"$bin" -f "$tree" "$mnt" 2>/dev/null & d=$!
		for i in $(seq 50); do mountpoint -q "$mnt" && break; sleep 0.1; done
		stat "$mnt" >/dev/null
		sync; echo 2 >/proc/sys/vm/drop_caches; sleep 0.2
		c0=$(cpu $d); t0=$(date +%s.%N)
		find "$mnt" -printf '%s\n' >/dev/null
		t1=$(date +%s.%N); c1=$(cpu $d)
		find "$mnt" -printf '%s\n' >/dev/null
		c2=$(cpu $d); t2=$(date +%s.%N)
		echo "$bin cold_wall $(awk "BEGIN {print $t1 - $t0}") cold_cpu_ticks $((c1 - c0))" \
			"warm_wall $(awk "BEGIN {print $t2 - $t1}") warm_cpu_ticks $((c2 - c1))"
		fusermount3 -u "$mnt"; wait $d
	done
done
