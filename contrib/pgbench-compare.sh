#!/bin/bash
# pgbench-compare.sh: pgbench simple-update (-N) on a plain directory versus
# a foliofs mount, side by side on the same disk.
#
# Both clusters live under one work directory: WORK/native/pgdata directly on
# the disk, and WORK/mnt/pgdata on a foliofs mount of WORK/backing.  Each gets
# initdb and `pgbench -i` once; then every repeat runs pgbench on both, the
# order alternating (native first on odd repeats, foliofs first on even ones)
# so that slow drift of the machine hits both targets alike.  Only one server
# runs at a time; each is stopped (a clean shutdown checkpoint) after its run.
# The foliofs daemon stays mounted for the whole script, just as the native
# directory keeps its page cache.
#
# Prints tps per repeat, the median of each target, the ratio of the medians
# (foliofs/native) and the coefficient of variation (sample stddev / mean) of
# each.  Exits non-zero if any step failed, including pgbench reporting failed
# transactions or the daemon not exiting 0 after the unmount.
#
# As root, everything (daemon, servers, pgbench) runs as the unprivileged
# user foliofs-test, created if missing; /dev/fuse is made 0666 for it.
#
# Environment: FOLIOFS (daemon binary, default <repo>/build/foliofs),
# PGBIN (PostgreSQL bindir, default /usr/lib/postgresql/15/bin, else
# `pg_config --bindir`).

set -euo pipefail

usage() {
	cat <<EOF
usage: $0 [-s SCALE] [-c CLIENTS] [-T SECONDS] [-r REPEATS] [-o "foliofs options"] [-d WORKDIR] [-k]
  -s SCALE    pgbench scale factor (default 20)
  -c CLIENTS  pgbench clients (default 8); threads = min(CLIENTS, nproc)
  -T SECONDS  duration of each pgbench run (default 30)
  -r REPEATS  runs per target (default 3)
  -o OPTIONS  foliofs -o options, comma-separated (default none)
  -d WORKDIR  directory on the disk to test; a private subdirectory is made
              inside it and removed afterwards (default /var/tmp)
  -k          keep the clusters and logs afterwards
EOF
}

SCALE=20
CLIENTS=8
DURATION=30
REPEATS=3
FOLIOFS_OPTS=""
WORKDIR=/var/tmp
KEEP=0
while getopts "s:c:T:r:o:d:kh" opt; do
	case $opt in
	s) SCALE=$OPTARG ;;
	c) CLIENTS=$OPTARG ;;
	T) DURATION=$OPTARG ;;
	r) REPEATS=$OPTARG ;;
	o) FOLIOFS_OPTS=$OPTARG ;;
	d) WORKDIR=$OPTARG ;;
	k) KEEP=1 ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if (($# != 0)); then
	usage >&2
	exit 2
fi
for v in "$SCALE" "$CLIENTS" "$DURATION" "$REPEATS"; do
	if ! [[ $v =~ ^[1-9][0-9]*$ ]]; then
		echo "$0: '$v' is not a positive integer" >&2
		exit 2
	fi
done

# fd 3, 4: the script's own stderr and stdout, for log() and cleanup(), which
# may run while a command's output is redirected to a log file.  Closed for
# the server and the daemon, which outlive the command that starts them.
exec 3>&2 4>&1
log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&3; }
die() {
	log "FAILED: $*"
	exit 1
}

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FOLIOFS=${FOLIOFS:-$SCRIPT_DIR/../build/foliofs}
if [[ -z ${PGBIN:-} ]]; then
	PGBIN=/usr/lib/postgresql/15/bin
	if [[ ! -x $PGBIN/postgres ]] && command -v pg_config >/dev/null; then
		PGBIN=$(pg_config --bindir)
	fi
fi
FUSERMOUNT=$(command -v fusermount3 || echo /usr/bin/fusermount3)
for p in initdb pg_ctl postgres pgbench; do
	[[ -x $PGBIN/$p ]] || die "$PGBIN/$p not found (set PGBIN)"
done
[[ -x $FOLIOFS ]] || die "foliofs binary $FOLIOFS not found (set FOLIOFS or build it)"
FOLIOFS=$(realpath "$FOLIOFS")
[[ -x $FUSERMOUNT ]] || die "fusermount3 not found"

RUN_USER=""
RUN_GROUP=""
if ((EUID == 0)); then
	RUN_USER=foliofs-test
	if ! id -u "$RUN_USER" >/dev/null 2>&1; then
		useradd -M -s /usr/sbin/nologin "$RUN_USER" || die "useradd $RUN_USER"
	fi
	RUN_GROUP=$(id -gn "$RUN_USER")
	chmod 0666 /dev/fuse || die "chmod /dev/fuse"
fi

# "${AS_USER[@]}" CMD...: run CMD as the unprivileged user (or as ourselves).
# A plain command prefix, not a function, and setpriv execs CMD in place
# (runuser would fork and wait): so "${AS_USER[@]}" daemon & gives the
# daemon's own pid in $!, to wait for its exit status or to kill it.
AS_USER=(env)
if [[ -n $RUN_USER ]]; then
	AS_USER=(setpriv --reuid="$RUN_USER" --regid="$RUN_GROUP" --init-groups --)
fi
as_user() { "${AS_USER[@]}" "$@"; }

# bg_wait CMD...: as_user CMD in the background and wait for it.  Bash runs
# traps only between commands; waiting in the builtin `wait` instead of a
# foreground child lets SIGTERM/SIGINT reach cleanup() at once.
bg_wait() {
	"${AS_USER[@]}" "$@" &
	wait "$!"
}

mkdir -p "$WORKDIR" || die "mkdir $WORKDIR"
RUN=$(mktemp -d "$WORKDIR/pgbench-compare.XXXXXX") || die "mktemp in $WORKDIR"
RUN=$(realpath "$RUN")
chmod 0755 "$RUN"
[[ -n $RUN_USER ]] && chown "$RUN_USER:" "$RUN"
cd "$RUN"   # the programs run as RUN_USER need a cwd they may enter

NATIVE_DATA=$RUN/native/pgdata
BACKING=$RUN/backing
MNT=$RUN/mnt
FOLIOFS_DATA=$MNT/pgdata
SOCK=$RUN/sock
LOGS=$RUN/log
PORT=5432   # only names the Unix socket in the private $SOCK
THREADS=$(nproc)
((THREADS > CLIENTS)) && THREADS=$CLIENTS

RUNNING_PGDATA=""   # data directory of the server now running, if any
DAEMON_PID=""       # foliofs -f in the background, while mounted
DAEMON_LOG=$LOGS/foliofs.log

is_mounted() {
	local fstype
	fstype=$(findmnt -rn -M "$MNT" -o FSTYPE 2>/dev/null | tail -n 1) || return 1
	[[ $fstype == fuse* ]]
}

cleanup() {
	local rc=$? i
	trap - EXIT INT TERM
	set +e
	exec 1>&4 2>&3
	if [[ -n $RUNNING_PGDATA ]]; then
		log "stopping the server on $RUNNING_PGDATA"
		as_user "$PGBIN/pg_ctl" stop -m immediate -w -t 60 -D "$RUNNING_PGDATA" >/dev/null 2>&1
	fi
	if [[ -n $DAEMON_PID ]]; then
		if is_mounted; then
			as_user "$FUSERMOUNT" -u "$MNT" || as_user "$FUSERMOUNT" -u -z "$MNT"
		fi
		for ((i = 0; i < 600; i++)); do
			kill -0 "$DAEMON_PID" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$DAEMON_PID" 2>/dev/null; then
			log "foliofs (pid $DAEMON_PID) did not exit after unmount; killing it"
			kill -KILL "$DAEMON_PID"
		fi
		wait "$DAEMON_PID"
		log "foliofs exited with status $? (aborted run)"
		rc=1
	fi
	if ((KEEP)); then
		log "kept $RUN"
	elif ((rc != 0)); then
		rm -rf "$RUN/native" "$BACKING"
		rmdir "$MNT" "$SOCK" 2>/dev/null
		log "logs kept in $LOGS"
	else
		rm -rf "$RUN"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$RUN/native" "$BACKING" "$MNT" "$SOCK" "$LOGS"
chmod 0700 "$SOCK"
[[ -n $RUN_USER ]] && chown "$RUN_USER:" "$RUN/native" "$BACKING" "$MNT" "$SOCK" "$LOGS"
as_user test -w "$RUN" || die "$RUN is not writable by ${RUN_USER:-$USER}"

mount_foliofs() {
	local args=(-f) i
	[[ -n $FOLIOFS_OPTS ]] && args+=(-o "$FOLIOFS_OPTS")
	log "mounting: $FOLIOFS ${args[*]} $BACKING $MNT"
	"${AS_USER[@]}" "$FOLIOFS" "${args[@]}" "$BACKING" "$MNT" </dev/null >"$DAEMON_LOG" 2>&1 3>&- 4>&- &
	DAEMON_PID=$!
	for ((i = 0; i < 300; i++)); do
		is_mounted && return 0
		if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
			wait "$DAEMON_PID" || true
			DAEMON_PID=""
			cat "$DAEMON_LOG" >&2
			die "foliofs exited before the mount appeared"
		fi
		sleep 0.05
	done
	cat "$DAEMON_LOG" >&2
	die "$MNT not mounted after 15 s"
}

umount_foliofs() {
	local rc=0
	log "unmounting $MNT"
	as_user "$FUSERMOUNT" -u "$MNT" || die "fusermount3 -u $MNT failed"
	wait "$DAEMON_PID" || rc=$?
	DAEMON_PID=""
	if ((rc != 0)); then
		cat "$DAEMON_LOG" >&2
		die "foliofs exited with status $rc after unmount"
	fi
}

check_daemon() {
	[[ -n $DAEMON_PID ]] && kill -0 "$DAEMON_PID" 2>/dev/null && is_mounted && return 0
	cat "$DAEMON_LOG" >&2
	die "the foliofs daemon died or the mount is gone"
}

# pg_init TARGET DATADIR: initdb with the settings shared by both targets.
pg_init() {
	local target=$1 data=$2
	log "$target: initdb $data"
	as_user "$PGBIN/initdb" -D "$data" -U postgres --auth=trust --locale=C \
		--encoding=UTF8 >"$LOGS/initdb-$target.log" 2>&1 ||
		{ cat "$LOGS/initdb-$target.log" >&2; die "$target: initdb failed"; }
	as_user tee -a "$data/postgresql.conf" >/dev/null <<EOF

# pgbench-compare.sh: identical on both targets
listen_addresses = ''
unix_socket_directories = '$SOCK'
port = $PORT
shared_buffers = 128MB
EOF
}

pg_start() {
	local target=$1 data=$2
	as_user "$PGBIN/pg_ctl" start -w -t 300 -D "$data" -l "$LOGS/server-$target.log" \
		>/dev/null 3>&- 4>&- || { tail -n 50 "$LOGS/server-$target.log" >&2; die "$target: server did not start"; }
	RUNNING_PGDATA=$data
}

pg_stop() {
	local target=$1 data=$2
	as_user "$PGBIN/pg_ctl" stop -m fast -w -t 600 -D "$data" >/dev/null ||
		{ tail -n 50 "$LOGS/server-$target.log" >&2; die "$target: server did not stop"; }
	RUNNING_PGDATA=""
}

PGBENCH_CONN=(-h "$SOCK" -p "$PORT" -U postgres)

pg_load() {
	local target=$1 data=$2
	pg_start "$target" "$data"
	log "$target: pgbench -i -s $SCALE"
	bg_wait "$PGBIN/pgbench" -i -s "$SCALE" "${PGBENCH_CONN[@]}" postgres \
		>"$LOGS/pgbench-init-$target.log" 2>&1 ||
		{ cat "$LOGS/pgbench-init-$target.log" >&2; die "$target: pgbench -i failed"; }
	pg_stop "$target" "$data"
}

# pg_run TARGET DATADIR REPEAT: one pgbench run; sets TPS.  (Not called in
# $(...): a failure must exit the main shell, which knows the running server.)
pg_run() {
	local target=$1 data=$2 repeat=$3 out tps failed
	out=$LOGS/pgbench-$target-$repeat.log
	pg_start "$target" "$data"
	log "$target: run $repeat: pgbench -N -c $CLIENTS -j $THREADS -T $DURATION"
	bg_wait "$PGBIN/pgbench" -N -c "$CLIENTS" -j "$THREADS" -T "$DURATION" \
		"${PGBENCH_CONN[@]}" postgres >"$out" 2>&1 ||
		{ cat "$out" >&2; tail -n 50 "$LOGS/server-$target.log" >&2; die "$target: pgbench failed"; }
	tps=$(awk '/^tps = /{print $3; exit}' "$out")
	failed=$(awk '/^number of failed transactions:/{print $5; exit}' "$out")
	[[ -n $tps ]] || { cat "$out" >&2; die "$target: pgbench printed no tps"; }
	[[ ${failed:-0} == 0 ]] || { cat "$out" >&2; die "$target: $failed failed transactions"; }
	pg_stop "$target" "$data"
	if [[ $target == foliofs ]]; then
		check_daemon
		as_user cat "$MNT/.foliofs/stats" >"$LOGS/foliofs-stats-$repeat.txt" 2>/dev/null || true
	fi
	TPS=$(printf '%.1f' "$tps")
	log "$target: run $repeat: $TPS tps"
}

# stats V...: prints "median mean cv%" (cv: sample stddev / mean).
stats() {
	printf '%s\n' "$@" | sort -g | awk '
		{ v[NR] = $1; s += $1 }
		END {
			n = NR; mean = s / n
			med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
			for (i = 1; i <= n; i++) ss += (v[i] - mean) ^ 2
			cv = (n > 1 && mean > 0) ? 100 * sqrt(ss / (n - 1)) / mean : 0
			printf "%.1f %.1f %.2f\n", med, mean, cv
		}'
}

log "work directory $RUN ($(findmnt -rn -T "$RUN" -o FSTYPE,SOURCE | tail -n 1))"
mount_foliofs
pg_init native "$NATIVE_DATA"
pg_init foliofs "$FOLIOFS_DATA"
pg_load native "$NATIVE_DATA"
pg_load foliofs "$FOLIOFS_DATA"

TPS=""
declare -a TPS_NATIVE TPS_FOLIOFS ORDER
for ((r = 1; r <= REPEATS; r++)); do
	if ((r % 2)); then
		ORDER[r]="native,foliofs"
		pg_run native "$NATIVE_DATA" "$r"
		TPS_NATIVE[r]=$TPS
		pg_run foliofs "$FOLIOFS_DATA" "$r"
		TPS_FOLIOFS[r]=$TPS
	else
		ORDER[r]="foliofs,native"
		pg_run foliofs "$FOLIOFS_DATA" "$r"
		TPS_FOLIOFS[r]=$TPS
		pg_run native "$NATIVE_DATA" "$r"
		TPS_NATIVE[r]=$TPS
	fi
done
umount_foliofs

read -r MED_N MEAN_N CV_N < <(stats "${TPS_NATIVE[@]}")
read -r MED_F MEAN_F CV_F < <(stats "${TPS_FOLIOFS[@]}")
RATIO=$(awk -v f="$MED_F" -v n="$MED_N" 'BEGIN { printf "%.3f", (n > 0) ? f / n : 0 }')

echo
echo "pgbench -N (simple-update), scale $SCALE, $CLIENTS clients, $THREADS threads, ${DURATION} s, $REPEATS repeats"
echo "$("$PGBIN/postgres" --version), shared_buffers=128MB, fsync=on"
echo "disk: $(findmnt -rn -T "$WORKDIR" -o FSTYPE,SOURCE | tail -n 1); foliofs -o '${FOLIOFS_OPTS}'"
echo
printf '%-8s %-16s %12s %12s\n' repeat order "native tps" "foliofs tps"
for ((r = 1; r <= REPEATS; r++)); do
	printf '%-8s %-16s %12s %12s\n' "$r" "${ORDER[r]}" "${TPS_NATIVE[r]}" "${TPS_FOLIOFS[r]}"
done
printf '%-25s %12s %12s\n' median "$MED_N" "$MED_F"
printf '%-25s %12s %12s\n' mean "$MEAN_N" "$MEAN_F"
printf '%-25s %11s%% %11s%%\n' "cv (stddev/mean)" "$CV_N" "$CV_F"
printf 'ratio foliofs/native (medians): %s\n' "$RATIO"
printf 'pgbench -i -s %s (load, once): native %s s, foliofs %s s\n' "$SCALE" \
	"$(awk '/^done in/{print $3; exit}' "$LOGS/pgbench-init-native.log")" \
	"$(awk '/^done in/{print $3; exit}' "$LOGS/pgbench-init-foliofs.log")"
