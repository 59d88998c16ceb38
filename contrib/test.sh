#!/usr/bin/env bash
# contrib/test.sh: the test command of foliofs (README and CI).
#
# Stages, each announced by a "==>" header and timed:
#   a. install what is missing (as root, with apt-get) and make /dev/fuse 0666
#   b. build build/ (-Dwerror=true -Ddebug_checks=true, debugoptimized) and
#      run the meson unit tests
#   b2. contrib/tools/file-cycles.py on writeback/ and sim/: one test per
#      layer, failed by a call cycle between its files other than a pair
#      named an owner/worker pair in its source
#   c. the pytest mount tests against build/foliofs (junit: build/pytest.xml)
#   c2. as root, on a kernel with FUSE over io_uring: the data,
#      throttling, cache-mode, durability and kill-priv tests again with
#      every mount on the ring (-o uring=on; enable_uring set to Y, then
#      restored)
#   d. ASan+UBSan build in build-asan/: the unit tests, then the mount tests
#      against build-asan/foliofs (without the tests that run PostgreSQL and
#      the crash loops, for time), over /dev/fuse
#   d2. the FUSE over io_uring tests against build-asan/foliofs
#   e. TSan build in build-tsan/ (clang): the unit tests
#   f. clang-tidy's bugprone checks on every C file (with build/'s
#      compile_commands.json): one test per file, failed if it warns
#   g. libFuzzer build in build-fuzz/ (clang, -Dfuzz=true, ASan+UBSan):
#      each target of tests/fuzz replays its regress/ inputs, then fuzzes
#      for FOLIOFS_FUZZ_SECONDS (default 8) from its corpus/; one test per
#      target, passed when it exits 0; skipped when clang cannot link
#      -fsanitize=fuzzer
#
# Stages b-c2 run in order (b2 also with --quick); d (but its FUSE over io_uring tests, d2,
# which run after c2), e, f and g run in the background beside them,
# niced (see "in the background" below).
# Every stage runs even when an earlier one failed (except the tests of a
# build that failed).  Results are counted exactly: meson tests from
# meson-logs/testlog.json, pytest from its junit XML; a build or a runner
# that fails without reporting a failed test counts as 1 failed.  The last
# line is always "N passed, M failed, K skipped"; the exit status is 1 if
# M > 0 or a stage could not run, else 0.
#
# Usage: contrib/test.sh [--quick] [--no-install]
#   --quick       only stages b, b2 and c (a still runs unless --no-install)
#   --no-install  skip stage a
# Environment: FOLIOFS_TEST_BUDGET (seconds, default 4800): wall-clock budget
# for the whole run; each stage's timeout is cut to what is left of it, so
# that the summary is printed before CI's own limit.
# FOLIOFS_FUZZ_SECONDS (default 8): fuzzing time of each target in stage g.

set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$PWD

QUICK=0
INSTALL=1
for arg in "$@"; do
	case $arg in
	--quick) QUICK=1 ;;
	--no-install) INSTALL=0 ;;
	-h | --help)
		sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
		exit 0
		;;
	*)
		echo "usage: $0 [--quick] [--no-install]" >&2
		exit 2
		;;
	esac
done

# Debian's python (the one python3-pytest is installed for), not a pyenv one.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# Per-stage timeouts (seconds), cut to the remaining budget.
T_BUILD=600
T_UNIT=600
T_UNIT_SAN=900
T_PYTEST=1200
T_PYTEST_SAN=1500
START=$(date +%s)
DEADLINE=$((START + ${FOLIOFS_TEST_BUDGET:-4800}))

# Sanitizer runtime options.  fast_unwind_on_malloc=0: full allocation
# stacks through libfuse (built without frame pointers), for ~10% more time.
ASAN_OPTS="detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0"
# Only glibc's perror() (see the file); print_suppressions=0 keeps stderr clean.
LSAN_OPTS="suppressions=$ROOT/tests/lsan.supp:print_suppressions=0"
UBSAN_OPTS="halt_on_error=1:print_stacktrace=1"
TSAN_OPTS="halt_on_error=1:second_deadlock_stack=1"
# Fuzzing: full allocation stacks would cost most of the executions.
FUZZ_ASAN_OPTS="detect_leaks=1:abort_on_error=1"
FUZZ_SECONDS=${FOLIOFS_FUZZ_SECONDS:-8}
if [ -f "$ROOT/tests/tsan_suppressions.txt" ]; then
	TSAN_OPTS="$TSAN_OPTS:suppressions=$ROOT/tests/tsan_suppressions.txt"
fi

# Each stage's result is one line of $RESULTS (name, seconds, passed,
# failed, skipped, note; "-" seconds for a stage that could not run), so
# that the stages run in the background (below) count like the others.
RESULTS=$(mktemp "${TMPDIR:-/tmp}/foliofs-test-results.XXXXXX") || exit 1
trap 'rm -f "$RESULTS" "$RESULTS".*' EXIT

is_root() { [ "$(id -u)" -eq 0 ]; }

header() {
	printf '\n==> [%s] %s\n' "$(date +%H:%M:%S)" "$*"
}

# record NAME SECONDS PASSED FAILED SKIPPED [NOTE]: add one stage's result.
record() {
	local name=$1 secs=$2 p=$3 f=$4 s=$5 note=${6:-}
	local what="$p passed, $f failed, $s skipped${note:+ ($note)}"
	[ "$((p + f + s))" -eq 0 ] && [ -n "$note" ] && what=$note
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$secs" "$p" "$f" "$s" "$what" >>"$RESULTS"
	printf -- '--> %s: %s [%ss]\n' "$name" "$what" "$secs"
}

# not_run NAME WHY: a stage that could not run (fails the whole run).
not_run() {
	printf '%s\t-\t0\t0\t0\tnot run: %s\n' "$1" "$2" >>"$RESULTS"
	printf -- '--> %s: not run: %s\n' "$1" "$2"
}

# stage_timeout MAX: MAX cut to the remaining budget (less a margin for the
# summary); prints nothing and fails when the budget is spent.
stage_timeout() {
	local left=$((DEADLINE - $(date +%s) - 30))
	[ "$left" -ge 10 ] || return 1
	if [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

# run_limited SECONDS CMD...: CMD with a timeout, stdin from /dev/null.
run_limited() {
	local t=$1
	shift
	timeout --kill-after=30 "$t" "$@" </dev/null
	local rc=$?
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		printf '\n*** timed out after %ss: %s\n' "$t" "$*"
	fi
	return "$rc"
}

# count_meson LOG: "passed failed skipped" from a meson testlog.json, or
# "none" if there is no log.  OK and EXPECTEDFAIL pass, SKIP skips, and
# everything else (FAIL, TIMEOUT, ERROR, UNEXPECTEDPASS, INTERRUPT) fails.
count_meson() {
	"$PY" - "$1" <<'EOF'
import json, sys
p = f = s = 0
try:
    fh = open(sys.argv[1])
except OSError:
    print("none")
    sys.exit(0)
with fh:
    for line in fh:
        line = line.strip()
        if not line:
            continue
        try:
            res = json.loads(line).get("result")
        except ValueError:
            f += 1
            continue
        if res in ("OK", "EXPECTEDFAIL"):
            p += 1
        elif res == "SKIP":
            s += 1
        else:
            f += 1
print(p, f, s)
EOF
}

# count_junit XML: "passed failed skipped" from a pytest junit XML, or "none"
# if it is missing or unreadable.  Each test counts once: pytest writes a
# second <testcase> for a test that fails and then errors in teardown.  A
# test with a <failure> or <error> (setup/teardown errors, collection
# errors) fails; else with <skipped> (skip, xfail) skips; else passes.
count_junit() {
	"$PY" - "$1" <<'EOF'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print("none")
    sys.exit(0)
tests = {}
for tc in root.iter("testcase"):
    key = (tc.get("file"), tc.get("classname"), tc.get("name"))
    tests.setdefault(key, set()).update(child.tag for child in tc)
p = f = s = 0
for tags in tests.values():
    if tags & {"failure", "error"}:
        f += 1
    elif "skipped" in tags:
        s += 1
    else:
        p += 1
print(p, f, s)
EOF
}

# --------------------------------------------------------------------------
# a. dependencies

# PostgreSQL: postgresql (the server, initdb, pg_checksums), postgresql-client
# (pgbench, psql, pg_amcheck), postgresql-contrib; its tests fail under CI
# without them.  python3-prometheus-client and prometheus (promtool) check
# foliofsctl's OpenMetrics and Prometheus text; parallel runs a sweep's jobs.
PKGS=(meson ninja-build pkg-config gcc clang clang-tidy libclang-rt-dev libfuse3-dev fuse3
	liburing-dev zlib1g-dev systemtap-sdt-dev bpftrace scdoc python3-pytest python3-matplotlib
	python3-prometheus-client prometheus fio postgresql postgresql-client postgresql-contrib
	valgrind xfsprogs parallel)

stage_install() {
	local t0 p note missing=()
	t0=$(date +%s)
	header "a. dependencies"
	if command -v dpkg-query >/dev/null; then
		for p in "${PKGS[@]}"; do
			dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
				grep -q '^install ok installed$' || missing+=("$p")
		done
	fi
	if [ "${#missing[@]}" -eq 0 ]; then
		note="all present"
	elif is_root && command -v apt-get >/dev/null; then
		echo "installing: ${missing[*]}"
		note="installed ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q </dev/null || echo "*** apt-get update failed"
		if ! apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null; then
			record "a. install" $(($(date +%s) - t0)) 0 1 0 "apt-get install failed"
			return
		fi
		# prometheus is here for promtool: the server it starts is not wanted.
		if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null; then
			systemctl disable --now prometheus >/dev/null 2>&1 || true
		fi
	else
		echo "as root: apt-get install --no-install-recommends ${missing[*]}"
		note="missing (not root): ${missing[*]}"
	fi
	if is_root && [ -c /dev/fuse ]; then
		chmod 0666 /dev/fuse && echo "/dev/fuse: mode 0666"
	fi
	[ -e /dev/fuse ] || note="$note; no /dev/fuse: the mount tests will skip"
	record "a. install" $(($(date +%s) - t0)) 0 0 0 "$note"
}

# --------------------------------------------------------------------------
# builds and test runs

# build NAME DIR CC MESON_OPTION...: configure (or reconfigure) and build.
# Records a failed build; returns 0 if DIR/foliofs can be tested.
build() {
	local name=$1 dir=$2 cc=$3 t0 t rc
	shift 3
	t0=$(date +%s)
	header "$name: meson setup + ninja in $dir/ ($cc $*)"
	if ! t=$(stage_timeout "$T_BUILD"); then
		not_run "$name" "time budget spent"
		return 1
	fi
	if [ -f "$dir/meson-private/coredata.dat" ]; then
		run_limited "$t" meson setup --reconfigure "$dir" "$@" ||
			CC=$cc run_limited "$t" meson setup --wipe "$dir" "$@"
	else
		CC=$cc run_limited "$t" meson setup "$dir" "$@"
	fi
	rc=$?
	if [ "$rc" -eq 0 ]; then
		t=$(stage_timeout "$T_BUILD") || t=10
		run_limited "$t" ninja -C "$dir"
		rc=$?
	fi
	if [ "$rc" -ne 0 ]; then
		record "$name" $(($(date +%s) - t0)) 0 1 0 "build failed"
		return 1
	fi
	record "$name" $(($(date +%s) - t0)) 0 0 0 "built"
	return 0
}

# unit NAME DIR TIMEOUT_MULTIPLIER MAX_SECONDS [VAR=VALUE...]: meson test
# in DIR, with the environment VAR=VALUE...
unit() {
	local name=$1 dir=$2 mult=$3 t0 t rc counts p f s note=""
	t=$(stage_timeout "$4")
	shift 4
	t0=$(date +%s)
	header "$name: meson test -C $dir"
	if [ -z "$t" ]; then
		not_run "$name" "time budget spent"
		return
	fi
	rm -f "$dir/meson-logs/testlog.json"
	env "$@" timeout --kill-after=30 "$t" \
		meson test -C "$dir" --print-errorlogs --no-rebuild \
		--timeout-multiplier "$mult" </dev/null
	rc=$?
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		printf '\n*** meson test timed out after %ss\n' "$t"
		note="timed out after ${t}s"
	fi
	# testlog.json is written test by test: after a timeout it still has
	# the tests that finished.
	counts=$(count_meson "$dir/meson-logs/testlog.json")
	if [ "$counts" = none ]; then
		if [ "$rc" -eq 0 ]; then
			counts="0 0 0"
			note="no test log"
		else
			counts="0 1 0"
			note="meson test exited $rc without a test log"
		fi
	fi
	read -r p f s <<<"$counts"
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		f=$((f + 1)) # the test that was running, not in the log
	elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		note=${note:-meson test exited $rc}
	fi
	[ "$((p + f + s))" -eq 0 ] && [ -z "$note" ] && note="no tests defined"
	record "$name" $(($(date +%s) - t0)) "$p" "$f" "$s" "$note"
}

# fuse_mounts: mountpoints of the FUSE mounts that look like foliofs's
# (fuse or fuse.* file system type, "foliofs" in the type, source or
# mountpoint: the tests mount under mkdtemp dirs named foliofs-*).
fuse_mounts() {
	awk '{ split($0, a, " - "); split(a[2], b, " ") }
		b[1] ~ /^fuse(\.|$)/ && $0 ~ /foliofs/ { print $5 }' /proc/self/mountinfo |
		sort
}

# mounttests NAME FOLIOFS JUNIT MAX_SECONDS [VAR=VALUE...] -- PYTEST_ARGS...
mounttests() {
	local name=$1 bin=$2 xml=$3 t0 t rc counts p f s note="" before leaked m
	local -a envs=()
	t=$(stage_timeout "$4")
	shift 4
	while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
		envs+=("$1")
		shift
	done
	[ "$#" -gt 0 ] && shift
	t0=$(date +%s)
	header "$name: pytest tests/ with FOLIOFS=$bin${*:+ $*}"
	if [ -z "$t" ]; then
		not_run "$name" "time budget spent"
		return
	fi
	before=$(fuse_mounts)
	rm -f "$xml"
	# On timeout SIGINT, as for a ^C: pytest stops, prints its summary and
	# still writes the junit XML of the tests that ran; the foreground
	# daemons of the tests (same process group) unmount and exit.
	env ${envs[@]+"${envs[@]}"} FOLIOFS="$bin" \
		timeout --signal=INT --kill-after=60 "$t" \
		"$PY" -m pytest "$ROOT/tests" -q -rfEs --junitxml="$xml" "$@" </dev/null
	rc=$?
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		printf '\n*** pytest timed out after %ss\n' "$t"
		note="timed out after ${t}s"
		# Detach the mounts that killed daemons may have left behind:
		# those new since the stage began whose daemon is gone (ENOTCONN).
		# A live one may be another session's on this machine: left alone.
		leaked=$(comm -13 <(echo "$before") <(fuse_mounts))
		for m in $leaked; do
			case $(timeout 10 stat -c %i "$m" 2>&1 >/dev/null) in
			*"not connected"*)
				echo "lazy-unmounting leftover $m (its daemon is gone)"
				fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m"
				;;
			*) echo "left mounted: $m (its daemon answers; maybe not this run's)" ;;
			esac
		done
	fi
	counts=$(count_junit "$xml")
	if [ "$counts" = none ]; then
		counts="0 1 0"
		note=${note:-pytest exited $rc without junit XML}
	fi
	read -r p f s <<<"$counts"
	# 5: no tests collected (e.g. all deselected) is not a failure.
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		f=$((f + 1)) # the test that was running, not in the XML
	elif [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ] && [ "$f" -eq 0 ]; then
		f=1
		note=${note:-pytest exited $rc}
	fi
	[ "$rc" -eq 5 ] && note="no tests collected"
	record "$name" $(($(date +%s) - t0)) "$p" "$f" "$s" "$note"
}

# uring_mounttests NAME: stage c2.  The kernel offers FUSE over io_uring
# only while the fuse module's enable_uring is Y, a machine-wide setting:
# set for the stage, put back after.
URING_PARAM=/sys/module/fuse/parameters/enable_uring
uring_mounttests() {
	local old
	if ! is_root || [ ! -w "$URING_PARAM" ]; then
		record "$1" 0 0 0 0 "skipped: needs root and a kernel with FUSE over io_uring"
		return
	fi
	old=$(cat "$URING_PARAM")
	echo Y >"$URING_PARAM"
	mounttests "$1" "$ROOT/build/foliofs" "$ROOT/build/pytest-uring.xml" "$T_PYTEST" \
		FOLIOFS_EXTRA_OPTIONS=uring=on -- \
		-k "(test_data or test_throttle or test_cache_modes or test_durability or test_killpriv) and not test_fuse_uring"
	echo "$old" >"$URING_PARAM"
}

# cycles NAME DIR...: stage b2, contrib/tools/file-cycles.py on each layer
# DIR; one test per DIR.
cycles() {
	local name=$1 t0 d p=0 fails=0
	shift
	t0=$(date +%s)
	header "$name: contrib/tools/file-cycles.py on $*"
	for d in "$@"; do
		if run_limited 60 "$PY" "$ROOT/contrib/tools/file-cycles.py" "$d"; then
			p=$((p + 1))
		else
			fails=$((fails + 1))
		fi
	done
	record "$name" $(($(date +%s) - t0)) "$p" "$fails" 0
}

# --------------------------------------------------------------------------

# tidy NAME: clang-tidy's bugprone checks (but the one that flags any two
# adjacent parameters of one type) on each C file; one test per file.
tidy() {
	local name=$1 t0 t f d rc p=0 fails=0 out
	local -a fuzz_inc=() extra=()
	t0=$(date +%s)
	header "$name: clang-tidy -checks=bugprone-* on every C file"
	if ! command -v clang-tidy >/dev/null; then
		not_run "$name" "clang-tidy is not installed"
		return
	fi
	if [ ! -f build/compile_commands.json ]; then
		not_run "$name" "build/compile_commands.json is missing"
		return
	fi
	# tests/fuzz is built only with -Dfuzz=true, so build/ has no compile
	# commands for it: give its files the include directories they get.
	for d in blockstate writeback fusefs trace probes include; do
		fuzz_inc+=("--extra-arg=-I$ROOT/$d")
	done
	for d in $(pkg-config --cflags-only-I fuse3 2>/dev/null); do
		fuzz_inc+=("--extra-arg=$d")
	done
	for f in $(git ls-files '*.c' 2>/dev/null || find blockstate writeback fusefs tests contrib -name '*.c'); do
		t=$(stage_timeout 300) || { not_run "$name" "out of time budget"; return; }
		case $f in
		tests/fuzz/*) extra=("${fuzz_inc[@]}") ;;
		*) extra=() ;;
		esac
		out=$(run_limited "$t" clang-tidy -p build --quiet \
			--checks='-*,bugprone-*,-bugprone-easily-swappable-parameters' \
			${extra[@]+"${extra[@]}"} "$f" 2>/dev/null)
		rc=$?
		out=$(printf '%s\n' "$out" | grep -E 'warning:|error:|timed out')
		if [ -n "$out" ] || [ "$rc" -ne 0 ]; then
			printf '%s: %s\n' "$f" "${out:-clang-tidy exited with $rc}"
			fails=$((fails + 1))
		else
			p=$((p + 1))
		fi
	done
	record "$name" $(($(date +%s) - t0)) "$p" "$fails" 0
}


# fuzz_env CMD...: CMD (a shell function too) with the sanitizers' options.
fuzz_env() {
	(
		export ASAN_OPTIONS="$FUZZ_ASAN_OPTS" UBSAN_OPTIONS="$UBSAN_OPTS"
		export LSAN_OPTIONS="$LSAN_OPTS"
		"$@"
	)
}

# fuzz_one NAME TARGET BIN: replay tests/fuzz/regress/TARGET/*, then fuzz
# for FUZZ_SECONDS from tests/fuzz/corpus/TARGET (new inputs go to
# build-fuzz/fuzz-corpus/TARGET, crashes to build-fuzz/fuzz-crashes/).
# Prints libFuzzer's final stats; returns its exit status.
fuzz_one() {
	local name=$1 tgt=$2 bin=$3 t log rc=0 work=$ROOT/build-fuzz
	local -a regress=() dirs=("$work/fuzz-corpus/$tgt" "$ROOT/tests/fuzz/corpus/$tgt")
	log=$work/fuzz-$tgt.log
	mkdir -p "$work/fuzz-corpus/$tgt" "$work/fuzz-crashes"
	: >"$log"
	if [ -d "$ROOT/tests/fuzz/regress/$tgt" ]; then
		dirs+=("$ROOT/tests/fuzz/regress/$tgt")
		mapfile -t regress < <(find "$ROOT/tests/fuzz/regress/$tgt" -type f | sort)
	fi
	if [ "${#regress[@]}" -gt 0 ]; then
		t=$(stage_timeout 120) || return 124
		fuzz_env run_limited "$t" "$bin" "${regress[@]}" >>"$log" 2>&1
		rc=$?
		if [ "$rc" -ne 0 ]; then
			echo "$tgt: a regress input fails (exit $rc):"
			tail -n 40 "$log"
			return "$rc"
		fi
		echo "$tgt: ${#regress[@]} regress input(s) pass"
	fi
	t=$(stage_timeout $((FUZZ_SECONDS + 60))) || return 124
	fuzz_env run_limited "$t" "$bin" -max_total_time="$FUZZ_SECONDS" \
		-timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$work/fuzz-crashes/$tgt-" "${dirs[@]}" >>"$log" 2>&1
	rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "$tgt: libFuzzer exited $rc; crash inputs in build-fuzz/fuzz-crashes/:"
		tail -n 60 "$log"
	fi
	# "Done N runs in S second(s)" and the executions per second.
	printf '%s: %s (%s exec/s)\n' "$tgt" \
		"$(grep -a '^Done [0-9]* runs' "$log" | tail -n 1)" \
		"$(grep -a '^stat::average_exec_per_sec' "$log" | awk '{ print $2 }')"
	return "$rc"
}

# fuzzing NAME: stage g.
fuzzing() {
	local name=$1 t0 tgt bin p=0 fails=0 runs=0 n secs targets=()
	t0=$(date +%s)
	header "$name: libFuzzer targets of tests/fuzz, ${FUZZ_SECONDS}s each"
	for tgt in "$ROOT"/tests/fuzz/corpus/*/; do
		[ -d "$tgt" ] && targets+=("$(basename "$tgt")")
	done
	if [ "${#targets[@]}" -eq 0 ]; then
		not_run "$name" "no targets in tests/fuzz/corpus/"
		return
	fi
	# libFuzzer's runtime (libclang-rt-dev) is separate from clang itself.
	if ! command -v clang >/dev/null ||
		! printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
			'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
			'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' |
		clang -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
		echo "clang cannot link -fsanitize=fuzzer (install clang and libclang-rt-dev)"
		record "$name" $(($(date +%s) - t0)) 0 0 "${#targets[@]}" "no libFuzzer runtime"
		return
	fi
	if ! build "g. fuzz build" build-fuzz clang -Dfuzz=true \
		-Db_sanitize=address,undefined -Db_lundef=false -Ddebug_checks=true \
		--buildtype=debugoptimized \
		"-Dc_args=-fsanitize=fuzzer-no-link -fno-omit-frame-pointer"; then
		not_run "$name" "build-fuzz/ not built"
		return
	fi
	t0=$(date +%s)
	for tgt in "${targets[@]}"; do
		bin=$ROOT/build-fuzz/tests/fuzz/fuzz_$tgt
		if [ ! -x "$bin" ]; then
			echo "$tgt: build-fuzz/tests/fuzz/fuzz_$tgt was not built (is tests/fuzz in meson.build?)"
			fails=$((fails + 1))
			continue
		fi
		if fuzz_one "$name" "$tgt" "$bin"; then
			p=$((p + 1))
		else
			fails=$((fails + 1))
		fi
		n=$(grep -a '^stat::number_of_executed_units' "$ROOT/build-fuzz/fuzz-$tgt.log" |
			tail -n 1 | awk '{ print $2 }')
		runs=$((runs + ${n:-0}))
	done
	secs=$(($(date +%s) - t0))
	record "$name" "$secs" "$p" "$fails" 0 "$runs executions"
}

# --------------------------------------------------------------------------
# The mount tests mostly wait (on the disk, on PostgreSQL, on FUSE round
# trips), the builds, sanitizer runs, clang-tidy and fuzzing mostly compute:
# so the latter run in the background, niced, beside stages b-c2, in two
# groups with a log each, printed when the group ends.
#  - ASan+UBSan: build, unit tests, then the mount tests but those of the
#    FUSE over io_uring transport, every mount with uring=off (stages c and
#    c2 switch the kernel's enable_uring on and off meanwhile).  The ring's
#    own tests run under ASan after c2, alone.
#  - TSan (build, unit tests), clang-tidy, fuzzing.

# bg NAME LOG FUNCTION...: run the functions in order in the background,
# niced, output to LOG; the job's pid is left in BG_PID.
bg() {
	local name=$1 log=$2
	shift 2
	(
		renice -n 10 -p "$BASHPID" >/dev/null 2>&1 || true
		header "$name (in the background)"
		for fn in "$@"; do "$fn"; done
	) >"$log" 2>&1 </dev/null &
	BG_PID=$!
}

# bg_wait PID LOG: wait for a background group and print its log.
bg_wait() {
	wait "$1"
	cat "$2"
}

ASAN_ENV=(ASAN_OPTIONS="$ASAN_OPTS" UBSAN_OPTIONS="$UBSAN_OPTS" LSAN_OPTIONS="$LSAN_OPTS")
# PostgreSQL's runs (and the kernel comparisons, which run it), the crash
# loops, the write-amplification measurements and the POSIX table: they
# exercise no daemon code the others do not, for most of the stage's time.
ASAN_SKIP="not postgres and not pg_crash and not test_pg_clients and not test_pg_speed"
ASAN_SKIP+=" and not test_kernel_ref and not test_calibrate and not write_amplification"
ASAN_SKIP+=" and not test_posix"

asan() {
	if build "d. ASan+UBSan build" build-asan "$SAN_CC" \
		-Db_sanitize=address,undefined -Db_lundef=false -Ddebug_checks=true \
		--buildtype=debugoptimized -Dc_args=-fno-omit-frame-pointer; then
		unit "d. ASan+UBSan unit tests" build-asan 3 "$T_UNIT_SAN" "${ASAN_ENV[@]}"
		mounttests "d. ASan+UBSan mount tests" "$ROOT/build-asan/foliofs" \
			"$ROOT/build-asan/pytest.xml" "$T_PYTEST_SAN" \
			"${ASAN_ENV[@]}" FOLIOFS_EXTRA_OPTIONS=uring=off -- \
			-p no:cacheprovider -k "$ASAN_SKIP and not test_fuse_uring"
	else
		not_run "d. ASan+UBSan unit tests" "build-asan/ not built"
		not_run "d. ASan+UBSan mount tests" "build-asan/ not built"
	fi
}

# built NAME: the build stage NAME is recorded as built in this run.
built() {
	awk -F'\t' -v n="$1" '$1 == n && $6 == "built" { ok = 1 } END { exit !ok }' "$RESULTS"
}

asan_uring_mounttests() {
	if built "d. ASan+UBSan build"; then
		mounttests "d2. ASan+UBSan ring tests" "$ROOT/build-asan/foliofs" \
			"$ROOT/build-asan/pytest-uring.xml" "$T_PYTEST_SAN" "${ASAN_ENV[@]}" -- \
			-k "$ASAN_SKIP and test_fuse_uring"
	else
		not_run "d2. ASan+UBSan ring tests" "build-asan/ not built"
	fi
}

tsan() {
	if ! command -v clang >/dev/null; then
		not_run "e. TSan" "clang is not installed"
	elif build "e. TSan build" build-tsan clang -Db_sanitize=thread \
		-Db_lundef=false -Ddebug_checks=true --buildtype=debugoptimized \
		-Dc_args=-fno-omit-frame-pointer; then
		unit "e. TSan unit tests" build-tsan 5 "$T_UNIT_SAN" TSAN_OPTIONS="$TSAN_OPTS"
	else
		not_run "e. TSan unit tests" "build-tsan/ not built"
	fi
}

tidy_stage() { tidy "f. clang-tidy bugprone"; }
fuzz_stage() { fuzzing "g. fuzzing"; }

# --------------------------------------------------------------------------

[ "$INSTALL" -eq 1 ] && stage_install

SAN_CC=gcc
command -v clang >/dev/null && SAN_CC=clang

BUILT=0
build "b. build" build gcc -Dwerror=true -Ddebug_checks=true \
	--buildtype=debugoptimized && BUILT=1

ASAN_PID="" REST_PID=""
if [ "$QUICK" -eq 0 ]; then
	bg "ASan+UBSan build, unit and mount tests" "$RESULTS.asan" asan
	ASAN_PID=$BG_PID
	# clang-tidy reads build/'s compile_commands.json.
	if [ "$BUILT" -eq 1 ]; then
		bg "TSan, clang-tidy, fuzzing" "$RESULTS.rest" tsan tidy_stage fuzz_stage
	else
		bg "TSan, fuzzing" "$RESULTS.rest" tsan fuzz_stage
		not_run "f. clang-tidy bugprone" "build/ not built"
	fi
	REST_PID=$BG_PID
fi

# No build needed: the sources are read as text.
cycles "b2. file cycles" writeback sim

if [ "$BUILT" -eq 1 ]; then
	unit "b. unit tests" build 1 "$T_UNIT"
	mounttests "c. mount tests" "$ROOT/build/foliofs" "$ROOT/build/pytest.xml" "$T_PYTEST" --
	uring_mounttests "c2. mount tests over io_uring"
else
	not_run "b. unit tests" "build/ not built"
	not_run "c. mount tests" "build/ not built"
fi

if [ "$QUICK" -eq 0 ]; then
	bg_wait "$ASAN_PID" "$RESULTS.asan"
	asan_uring_mounttests
	bg_wait "$REST_PID" "$RESULTS.rest"
	rm -f "$RESULTS.asan" "$RESULTS.rest"
fi

header "summary (total $(($(date +%s) - START))s)"
# The stages in the order they ended; then the totals.
awk -F'\t' '{ printf "%-28s %5s%s  %s\n", $1, $2, ($2 == "-" ? " " : "s"), $6 }' "$RESULTS"
awk -F'\t' '
	{ p += $3; f += $4; s += $5; if ($2 == "-") notrun = 1 }
	END {
		printf "%d passed, %d failed, %d skipped\n", p, f, s
		exit (f > 0 || notrun) ? 1 : 0
	}' "$RESULTS"
