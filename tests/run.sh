#!/usr/bin/env bash
# tests/run.sh - runs every kvfs test program; called by `make test`.
#   BUILD        the sanitizer build holding tests/ and kvfs-mount
#   PLAIN_BUILD  the plain build (its libkvfs.so is what Python loads)
# Each program runs with a deadline; the summary lists failures. Exit 77
# from a program means "skipped" (it prints why).
set -u
BUILD=${BUILD:-build/asan}
PLAIN_BUILD=${PLAIN_BUILD:-build}
export KVFS_BUILD=$BUILD KVFS_PLAIN_BUILD=$PLAIN_BUILD
export KVFS_MOUNT_BIN=$PWD/$BUILD/kvfs-mount KVFS_CTL_BIN=$PWD/$BUILD/kvfsctl
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=() skipped=() passed=0
kvfs_mounts() { awk '$3 == "fuse.kvfs" { print $2 }' /proc/mounts | sort; }
mounts_before=$(kvfs_mounts) # the user's own mounts are not ours to judge

run() { # name timeout cmd...
	local name=$1 limit=$2; shift 2
	printf '=== %s\n' "$name"
	timeout -k 10 "$limit" "$@"
	local rc=$?
	case $rc in
	0) passed=$((passed + 1)) ;;
	77) skipped+=("$name") ;;
	*) failed+=("$name (exit $rc)") ;;
	esac
}

for t in "$BUILD"/tests/unit/test_*; do
	[ -x "$t" ] && run "unit/$(basename "$t")" 300 "$t"
done
for t in "$BUILD"/tests/integ/test_*; do
	[ -x "$t" ] && run "integ/$(basename "$t")" 300 "$t"
done
for t in "$BUILD"/tests/gpu/test_*; do
	[ -x "$t" ] && run "gpu/$(basename "$t")" 300 "$t"
done
for t in tests/python/test_*.py; do
	[ -f "$t" ] && run "python/$(basename "$t")" 300 /usr/bin/python3 "$t" -v
done
for t in tests/sh/test_*.sh; do
	[ -f "$t" ] && run "sh/$(basename "$t")" 300 bash "$t"
done

# Issue 12: each fuzz target for a few seconds (its seeds and what it
# finds), and two rounds of the crash-consistency harness.
if [ -d build/fuzz ]; then
	run "fuzz/smoke" 300 env FUZZ_SECONDS="${FUZZ_SMOKE_SECONDS:-3}" \
		bash tests/fuzz/run.sh build/fuzz
fi
[ -x "$BUILD/tests/load/kvfs_faults" ] &&
	run "load/kvfs_faults" 300 "$BUILD/tests/load/kvfs_faults" -r 2
# issue 19: the L2 index checkpoint under SIGKILL, and damaged
if [ -x "$BUILD/tests/load/kvfs_faults" ]; then
	run "load/kvfs_faults ckpt" 300 "$BUILD/tests/load/kvfs_faults" -f 4 -r 1
	run "load/kvfs_faults ckptbad" 300 "$BUILD/tests/load/kvfs_faults" -f 5 -r 2
	# issue 27: path files after SIGKILL (with L3 on the second round)
	run "load/kvfs_faults paths" 300 "$BUILD/tests/load/kvfs_faults" -f 6 -r 2
fi

# No test may leave a kvfs mount behind.
left=$(comm -13 <(echo "$mounts_before") <(kvfs_mounts) | tr '\n' ' ')
if [ -n "${left// /}" ]; then
	failed+=("stale kvfs mounts: $left")
fi

printf '\n=== summary: %d passed, %d skipped, %d failed\n' \
	"$passed" "${#skipped[@]}" "${#failed[@]}"
for s in "${skipped[@]}"; do printf '  skipped: %s\n' "$s"; done
for f in "${failed[@]}"; do printf '  FAILED: %s\n' "$f"; done
[ ${#failed[@]} -eq 0 ]
