#!/bin/sh
# mtime.sh MOUNTPOINT: three writes and a chmod, a second apart, each
# followed by stat (size, mtime, ctime), as the mount's user.
set -e
f=$1/f
printf a > "$f"; stat -c 'after write 1: size %s mtime %y ctime %z' "$f"
sleep 1.2; printf bb >> "$f"; stat -c 'after write 2: size %s mtime %y ctime %z' "$f"
sleep 1.2; dd if=/dev/zero of="$f" bs=1 count=1 seek=10 conv=notrunc status=none
stat -c 'after pwrite:  size %s mtime %y ctime %z' "$f"
sleep 1.2; chmod 640 "$f"; stat -c 'after chmod:   size %s mtime %y ctime %z' "$f"
