#!/usr/bin/env bash
# contrib/demo.sh: foliofs in one command.
#
# Installs what is missing (as root, with apt-get), builds a release binary
# in build-demo/, mounts foliofs (daemonized) over a scratch backing
# directory, shows it working step by step, unmounts it and removes the
# scratch directories again (also on error or ^C).  Runs as root or as a
# normal user (who needs read-write /dev/fuse, as on a stock Debian).
#
# Usage: contrib/demo.sh
# Environment: FOLIOFS=/path/to/foliofs uses that binary instead of building
# (and FOLIOFSCTL, or tools/foliofsctl beside it).

set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

if [ -t 1 ]; then
	BOLD=$'\e[1m'
	OFF=$'\e[0m'
else
	BOLD=
	OFF=
fi
STEP=0

say() {
	STEP=$((STEP + 1))
	printf '\n%s%d. %s%s\n' "$BOLD" "$STEP" "$*" "$OFF"
}

# show CMD...: print a command as one would type it.
show() {
	local arg line='$'
	for arg in "$@"; do
		if [[ $arg =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then
			line+=" $arg"
		else
			line+=" '${arg//\'/\'\\\'\'}'"
		fi
	done
	printf '%s\n' "$line"
}

# run CMD...: show a command, then run it.
run() {
	show "$@"
	"$@"
}

# quietly CMD...: show a command and run it; show its output only if it fails.
quietly() {
	show "$@"
	if ! "$@" >"$TMP/cmd.log" 2>&1 </dev/null; then
		cat "$TMP/cmd.log"
		die "failed: $*"
	fi
}

die() {
	echo "demo: $*" >&2
	exit 1
}

is_root() { [ "$(id -u)" -eq 0 ]; }

# ---------------------------------------------------------------------------
# dependencies and build

PKGS=(meson ninja-build pkg-config gcc libfuse3-dev fuse3 liburing-dev zlib1g-dev systemtap-sdt-dev scdoc)

install_deps() {
	local p missing=()
	command -v dpkg-query >/dev/null || return 0
	for p in "${PKGS[@]}"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
			grep -q '^install ok installed$' || missing+=("$p")
	done
	[ "${#missing[@]}" -gt 0 ] || return 0
	if ! is_root; then
		die "missing packages: ${missing[*]}
as root: apt-get install --no-install-recommends ${missing[*]}"
	fi
	say "Installing what is missing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q </dev/null || echo "(apt-get update failed; trying anyway)"
	apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
}

build() {
	local dir=$ROOT/build-demo
	if [ -n "${FOLIOFS:-}" ]; then
		[ -x "$FOLIOFS" ] || die "FOLIOFS=$FOLIOFS is not an executable"
		CTL=${FOLIOFSCTL:-$(dirname "$FOLIOFS")/tools/foliofsctl}
		return 0
	fi
	install_deps
	# A normal user may not own the checkout: build in the scratch dir then.
	if ! [ -w "$ROOT" ] && ! [ -w "$dir" ]; then
		dir=$TMP/build
	fi
	say "Building a release binary in $dir"
	if ! [ -f "$dir/meson-private/coredata.dat" ]; then
		quietly meson setup "$dir" --buildtype=release
	fi
	quietly ninja -C "$dir"
	FOLIOFS=$dir/foliofs
	CTL=$dir/tools/foliofsctl
	echo "built $FOLIOFS and $CTL"
}

# ---------------------------------------------------------------------------
# mount helpers

# is_mounted DIR: something is mounted at DIR (reads no file of the mount).
is_mounted() {
	awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# find_daemon: the pid of the foliofs process serving $MNT (its last
# argument), found through /proc since it daemonized.
find_daemon() {
	local d
	local -a argv
	for d in /proc/[0-9]*; do
		mapfile -d '' -t argv <"$d/cmdline" 2>/dev/null || continue
		[ "${#argv[@]}" -ge 2 ] || continue
		[ "${argv[-1]}" = "$MNT" ] || continue
		case ${argv[0]} in
		*foliofs)
			echo "${d#/proc/}"
			return 0
			;;
		esac
	done
	return 1
}

# wait_gone PID SECONDS: wait for a process that is not our child to exit.
wait_gone() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

TMP=
MNT=
DAEMON=

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	if [ -n "$MNT" ] && is_mounted "$MNT"; then
		echo "cleanup: unmounting $MNT"
		fusermount3 -u -z "$MNT" 2>/dev/null || { is_root && umount -l "$MNT"; }
	fi
	if [ -n "$DAEMON" ] && kill -0 "$DAEMON" 2>/dev/null; then
		wait_gone "$DAEMON" 10 || {
			echo "cleanup: daemon $DAEMON still running, sending SIGTERM"
			kill "$DAEMON"
			wait_gone "$DAEMON" 5 || kill -KILL "$DAEMON"
		}
	fi
	if [ -n "$TMP" ] && [ -d "$TMP" ]; then
		if [ -n "$MNT" ] && is_mounted "$MNT"; then
			echo "cleanup: $MNT is still mounted; leaving $TMP" >&2
		else
			rm -rf "$TMP" && echo "removed $TMP"
		fi
	fi
	[ "$rc" -eq 0 ] || echo "demo: failed (status $rc)" >&2
	exit "$rc"
}

# ---------------------------------------------------------------------------

TMP=$(mktemp -d "${TMPDIR:-/tmp}/foliofs-demo.XXXXXX")
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

build

[ -e /dev/fuse ] || die "/dev/fuse is missing (modprobe fuse, or give the container the device)"
if ! [ -r /dev/fuse ] || ! [ -w /dev/fuse ]; then
	die "/dev/fuse is not read-writable for $(id -un): as root, chmod 0666 /dev/fuse"
fi
command -v fusermount3 >/dev/null || die "fusermount3 is missing (apt-get install fuse3)"

BACKING=$TMP/backing
MNT=$TMP/mnt
mkdir "$BACKING" "$MNT"

say "Mounting foliofs: backing directory $BACKING on $MNT"
run "$FOLIOFS" "$BACKING" "$MNT"
for ((i = 0; i < 100; i++)); do
	is_mounted "$MNT" && break
	sleep 0.1
done
is_mounted "$MNT" || die "$MNT did not get mounted"
DAEMON=$(find_daemon) || die "cannot find the foliofs daemon of $MNT"
grep -F " $MNT " /proc/self/mountinfo | sed 's/^/  mountinfo: /'
echo "daemon: pid $DAEMON ($(tr '\0' ' ' <"/proc/$DAEMON/cmdline"))"

say "Writing a file through the mount"
printf '$ echo "hello from foliofs" > %s\n' "$MNT/hello.txt"
echo "hello from foliofs" >"$MNT/hello.txt"
run cat "$MNT/hello.txt"

say "The mount and the backing directory side by side"
ls -la "$MNT" >"$TMP/ls.mnt"
ls -la "$BACKING" >"$TMP/ls.back"
paste -d '\t' "$TMP/ls.mnt" "$TMP/ls.back" |
	awk -F '\t' '
		NR == 1 { printf "%-60s | %s\n", "ls -la (mount)", "ls -la (backing)" }
		{ printf "%-60s | %s\n", $1, $2 }'
rm -f "$TMP/ls.mnt" "$TMP/ls.back"
echo "(hello.txt is still empty in the backing directory: foliofs is a write-back"
echo " cache, like the page cache it models; the bytes get there at fsync, from the"
echo " flushers once they are older than dirty_expire_ms, or at unmount, as below)"

say "stat through the mount, and the backing file's size, mode and mtime"
run stat "$MNT/hello.txt"
run stat -c '%n: %s bytes, %A, modified %y' "$BACKING/hello.txt"

say "df of the mount (statfs passes through to the backing file system)"
run df -h "$MNT"

say "64 MiB through the mount with dd conv=fsync (fsync writes back every dirty block)"
head -c 64M /dev/urandom >"$TMP/random.bin"
run dd if="$TMP/random.bin" of="$MNT/big.bin" bs=1M conv=fsync
if [ -r "$MNT/.foliofs/stats" ]; then
	echo "daemon counters ($MNT/.foliofs/stats):"
	grep -E '^(nr_dirtied|nr_written|app_write_bytes|backing_write_bytes|backing_write_ios|folios|cache_bytes) ' \
		"$MNT/.foliofs/stats" | sed 's/^/  /' || true
fi

# policies CTL MNT FILE COUNT SECS: for dirty_account=folio, page and block
# in turn, COUNT random 8 KiB pwrites into FILE (the same offsets each time;
# at most SECS seconds), then foliofsctl sync; prints one table row per
# policy from the mount's stats, sampled every 20 ms for the peaks.
policies() {
	python3 - "$@" <<'PY'
import os, random, subprocess, sys, threading, time
ctl, mnt, path, count, secs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
MiB = 1 << 20

def stats():
    with open(os.path.join(mnt, '.foliofs', 'stats')) as f:
        return {k: int(v) for k, v in (l.split() for l in f) if v.isdigit()}

def run(*cmd):
    print('$ foliofsctl ' + ' '.join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

def updates():
    """COUNT 8 KiB pwrites; returns (writes done, seconds, peak nr_dirty
    pages, peak dirty_bytes_exact) with the peaks sampled alongside."""
    peak = {'nr_dirty': 0, 'dirty_bytes_exact': 0}
    done = threading.Event()
    def sample():
        while not done.wait(0.02):
            s = stats()
            for k in peak:
                peak[k] = max(peak[k], s[k])
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        fd = os.open(path, os.O_RDWR)
        blocks, rng, data = os.fstat(fd).st_size // 8192, random.Random(7), os.urandom(8192)
        t0 = time.monotonic()
        n = 0
        while n < count and time.monotonic() - t0 < secs:
            os.pwrite(fd, data, rng.randrange(blocks) * 8192)
            n += 1
        t = time.monotonic() - t0
        os.close(fd)
    finally:
        done.set()
        sampler.join()
    return n, t, peak['nr_dirty'], peak['dirty_bytes_exact']

rows = []
for acct in ('folio', 'page', 'block'):
    run(ctl, 'set', mnt, 'dirty_bytes=16M', 'dirty_account=' + acct)
    s0 = stats()
    n, t, peak_charged, peak_exact = updates()
    print('  %d writes in %.1f s' % (n, t), flush=True)
    run(ctl, 'sync', mnt)
    d = {k: v - s0[k] for k, v in stats().items()}
    rows.append((acct, str(n), '%.0f' % (n / t),
                 '%.1f' % (d['nr_dirtied'] * 4096 / MiB), '%.1f' % (peak_charged * 4096 / MiB),
                 '%.1f' % (peak_exact / MiB), '%.1f' % (d['backing_write_bytes'] / MiB),
                 '%.0f' % (d['nr_written'] * 4096 / MiB),
                 str(d['throttle_events']), '%.1f' % (d['throttle_ms'] / 1000)))
head = [('', '', '', 'charged', 'charged', 'exact', 'written', 'written', '', 'paused'),
        ('policy', 'writes', 'writes/s', 'total', 'peak', 'peak', 'backing', 'folios', 'pauses', 's'),
        ('', '', '', 'MiB', 'MiB', 'MiB', 'MiB', 'MiB', '', '')]
width = [max(len(r[i]) for r in head + rows) for i in range(len(head[0]))]
print()
for r in head + rows:
    print('  ' + '  '.join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, width))))
PY
}

if [ -x "$CTL" ] && [ -d "$MNT/.foliofs/tunables" ]; then
	say "The seed's effect: 8 KiB updates of a 256 MiB table, charged per folio, per page, per block"
	echo "(2 MiB folios, a 16 MiB dirty limit, the same 2000 random updates under each"
	echo " policy, then foliofsctl sync.  Per folio, each update of a clean folio charges"
	echo " all 2 MiB, so the writer is paused while almost nothing is dirty; per page or"
	echo " per block it is charged 8 KiB and runs free.)"
	run dd if=/dev/zero of="$MNT/table" bs=1M count=256 conv=fsync status=none
	policies "$CTL" "$MNT" "$MNT/table" 2000 15
	echo "charged total: pages charged (nr_dirtied); charged peak: the most charged at"
	echo "once (nr_dirty, against the 16 MiB limit); exact peak: the most bytes really"
	echo "dirty (dirty_bytes_exact); written backing: bytes written to the backing file;"
	echo "written folios: whole folios whose writeback ended (nr_written, what write_bw"
	echo "is measured from); pauses: throttle_events and throttle_ms.  Peaks are sampled"
	echo "every 20 ms; the numbers move from run to run, the gap between policies is the point."
fi

say "Verifying: the source, the file through the mount and the backing file agree"
run cmp "$TMP/random.bin" "$BACKING/big.bin"
echo "cmp: identical"
run sha256sum "$TMP/random.bin" "$MNT/big.bin" "$BACKING/big.bin"

say "Unmounting with fusermount3 -u"
run fusermount3 -u "$MNT"
if wait_gone "$DAEMON" 30; then
	echo "daemon pid $DAEMON has exited"
else
	die "daemon pid $DAEMON still running 30 s after the unmount"
fi
is_mounted "$MNT" && die "$MNT is still mounted"
echo "$MNT is no longer mounted; the data stays in the backing directory:"
run ls -la "$BACKING"

say "Cleaning up the scratch directories"
# The EXIT trap removes $TMP.
