#!/usr/bin/env bash
# bench/run.sh BUILD - what `make bench` runs, after building everything
# into BUILD (build/ by default).
#
# Runs each benchmark that exists, in this order, and says which are
# missing:
#   BUILD/bench/kvfs_bench     mount vs tmpfs: 2 MiB / 256 KiB chunks
#                              (and kvfs_bench_passthrough: the same with
#                              -o cache=passthrough, after kvfs_evbench)
#   BUILD/bench/kvfs_pbench    plain reads vs LD_PRELOAD=libkvfs_preload.so
#                              vs tmpfs
#   BUILD/bench/kvfs_ptprobe   not kvfs: FUSE passthrough against the
#                              classic FUSE path and tmpfs, files on a tmpfs
#                              it mounts under TMPDIR (the ceiling of plain
#                              reads and writes with L1 chunks in files:
#                              docs/time.md)
#   BUILD/bench/kvfs_meta      metadata bytes per chunk, replay
#   BUILD/bench/kvfs_l2bench   compression, L2 promotion vs O_DIRECT
#   BUILD/bench/kvfs_ckptbench L2 warm restart: checkpoint vs SIGKILL vs full scan
#   BUILD/bench/kvfs_l2churn   L2's effective capacity under churn, and
#                              its write amplification
#   BUILD/bench/kvfs_l3bench   L3 (Redis) promotion vs raw GETs, lookups, misses
#   BUILD/bench/kvfs_hbench    prefill -> decode hand-off through L3: latency,
#                              throughput vs raw SET+GET, notifications off
#   BUILD/bench/kvfs_ibench    batched lookup vs stat, group lookup
#   BUILD/bench/kvfs_xbench    batched GET/PUT vs tmpfs read()/write(); again
#                              with the other core busy, into malloc'd and
#                              into kvfs_buf_alloc's buffers; each ends
#                              with memcpy's rate for the 256 KiB chunks
#                              (the floor under that target)
#   BUILD/bench/kvfs_gpubench  GPU copy paths (skips without a GPU)
#   BUILD/bench/kvfs_evbench   KV events: publisher rate, writes off vs on
#   bench/py_bench.py          the Python binding vs os.read/os.write; again
#                              with the other core busy (--busy)
#   bench/paths_bench.py       vLLM's FS tier on a path namespace vs tmpfs
#                              and the disk (O_DIRECT)
#   paths_bench_preload        the same, its loads in child processes,
#                              kvfs's with LD_PRELOAD=BUILD/libkvfs_preload.so
#                              (load L1 also plain, and with the library's
#                              KVFS_PRELOAD_READS=lazy: "kvfs lazy")
#   BUILD/bench/kvfs_pmeta     metadata bytes per directory and file of a
#                              path namespace
#
# Contract for a benchmark program: it takes no arguments (extra ones come
# from KVFS_BENCH_ARGS_<name>, e.g. KVFS_BENCH_ARGS_kvfs_bench="--mib 64"),
# finds the programs in these variables, puts every temporary file and mount
# under $TMPDIR (a directory this script owns and cleans up, unmounting
# anything left mounted in it), prints its own table, and exits 0, 77 to
# say "skipped" (with the reason printed), or anything else for a failure:
#   KVFS_BUILD        the build directory (absolute)
#   KVFS_MOUNT_BIN    BUILD/kvfs-mount
#   KVFS_CTL_BIN      BUILD/kvfsctl
#   KVFS_LIB          BUILD/libkvfs.so (for Python's ctypes)
#   TMPDIR            a fresh directory for this run
# Each program has a deadline (KVFS_BENCH_TIMEOUT seconds, default 180).
#
# FUSE over io_uring: the mounts use it where the kernel offers it
# (fuse_uring=auto; kvfs-mount(8)); run as root, this script turns the
# fuse module's enable_uring on for the run and back as it was after
# (KVFS_BENCH_URING=0: leave it as it is, e.g. to compare /dev/fuse).
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.." || exit 1
BUILD_ABS=$(cd "$BUILD" 2>/dev/null && pwd) || {
	echo "bench/run.sh: no build directory '$BUILD' (run make first)" >&2
	exit 1
}
LIMIT=${KVFS_BENCH_TIMEOUT:-180}
WORK=$(mktemp -d /tmp/kvfs-bench.XXXXXX) || exit 1

export KVFS_BUILD=$BUILD_ABS KVFS_MOUNT_BIN=$BUILD_ABS/kvfs-mount \
	KVFS_CTL_BIN=$BUILD_ABS/kvfsctl KVFS_LIB=$BUILD_ABS/libkvfs.so \
	TMPDIR=$WORK

# Unmount whatever a benchmark left mounted under WORK (deepest first), then
# remove WORK without ever crossing into a mount.
cleanup() {
	local m left
	for m in $(awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r); do
		fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
	done
	left=$(awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/mounts)
	if [ -n "$left" ]; then
		echo "bench/run.sh: could not unmount: $left" >&2
		return
	fi
	rm -rf --one-file-system "$WORK"
}
URING_PARAM=/sys/module/fuse/parameters/enable_uring
URING_SAVED=
if [ "${KVFS_BENCH_URING:-1}" = 1 ] && [ -w "$URING_PARAM" ]; then
	URING_SAVED=$(cat "$URING_PARAM")
	echo Y >"$URING_PARAM" || URING_SAVED=
fi
trap 'cleanup; [ -z "$URING_SAVED" ] || echo "$URING_SAVED" >"$URING_PARAM"' EXIT
trap 'exit 130' INT TERM HUP

failed=() skipped=() ran=0 order=()

run() { # name cmd...
	local name=$1 rc extra_var extra
	shift
	extra_var=KVFS_BENCH_ARGS_${name//[^A-Za-z0-9_]/_}
	extra=${!extra_var:-}
	order+=("$name")
	# the previous benchmark's dirty pages (L2 segments, checkpoints)
	# written back now, not under the next one's timing
	sync
	printf '\n=== %s (load average %s)\n' "$name" \
		"$(cut -d' ' -f1-3 /proc/loadavg)"
	# shellcheck disable=SC2086 # extra args are meant to be split
	timeout -k 10 "$LIMIT" "$@" $extra 2>&1 | tee "$WORK/$name.log"
	rc=${PIPESTATUS[0]}
	case $rc in
	0) ran=$((ran + 1)) ;;
	77) skipped+=("$name") ;;
	124 | 137) failed+=("$name (ran past ${LIMIT} s)") ;;
	*) failed+=("$name (exit $rc)") ;;
	esac
}

echo "kvfs benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, build $BUILD"
echo "FUSE over io_uring (fuse module's enable_uring): $(cat "$URING_PARAM" 2>/dev/null || echo 'not in this kernel')"
for b in kvfs_bench kvfs_pbench kvfs_ptprobe kvfs_meta kvfs_pmeta kvfs_l2bench kvfs_ckptbench kvfs_l2churn kvfs_l3bench kvfs_hbench kvfs_ibench \
	kvfs_xbench kvfs_gpubench kvfs_evbench; do
	if [ -x "$BUILD/bench/$b" ]; then
		run "$b" "$BUILD/bench/$b"
	else
		printf '\n=== %s\n(not built: bench/%s.c does not exist yet)\n' "$b" "$b"
	fi
done
# the plain rows again with cache=passthrough (kvfs-mount(8)): the kernel
# reads chunks from their shadows
if [ -x "$BUILD/bench/kvfs_bench" ]; then
	run kvfs_bench_passthrough "$BUILD/bench/kvfs_bench" \
		-o l1_size=1G,cache=passthrough
fi
# issue 26's batched-transfer row: one engine thread while the other core
# runs a busy loop, into malloc'd buffers (4 KiB pages) and into buffers
# from kvfs_buf_alloc (huge pages, what kvfs.h section 4a advises)
if [ -x "$BUILD/bench/kvfs_xbench" ]; then
	run kvfs_xbench_busy "$BUILD/bench/kvfs_xbench" --threads 1 --busy 1
	run kvfs_xbench_busy_huge "$BUILD/bench/kvfs_xbench" --threads 1 \
		--busy 1 --huge 1
fi
if [ -f bench/py_bench.py ]; then
	run py_bench.py /usr/bin/python3 bench/py_bench.py
	run py_bench_busy /usr/bin/python3 bench/py_bench.py --busy
else
	printf '\n=== py_bench.py\n(missing: bench/py_bench.py does not exist yet)\n'
fi

if [ -f bench/paths_bench.py ]; then
	run paths_bench.py /usr/bin/python3 bench/paths_bench.py
	if [ -f "$BUILD/libkvfs_preload.so" ]; then
		run paths_bench_preload /usr/bin/python3 bench/paths_bench.py \
			--preload "$BUILD_ABS/libkvfs_preload.so"
	fi
fi

# every target verdict the benchmarks printed, in one place
printf '\n=== targets (issue 26), as each benchmark printed them\n'
for b in "${order[@]}"; do
	[ -f "$WORK/$b.log" ] || continue
	grep -E '(^|[^a-z])(met|MISSED)([^a-z]|$)' "$WORK/$b.log" |
		sed "s|^ *|$b: |"
done

printf '\n=== bench summary: %d ran, %d skipped, %d failed\n' \
	"$ran" "${#skipped[@]}" "${#failed[@]}"
for s in "${skipped[@]}"; do printf '  skipped: %s\n' "$s"; done
for f in "${failed[@]}"; do printf '  FAILED: %s\n' "$f"; done
[ ${#failed[@]} -eq 0 ]
