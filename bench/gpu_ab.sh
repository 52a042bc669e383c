#!/usr/bin/env bash
# gpu_ab.sh - issue 26's benches on a lent GPU machine, one build's daemon
# against another's, alternating: the bundle of this tree (make gpu-bundle)
# and a copy of it whose kvfs-mount and libkvfs_preload.so come from BASE
# (a directory holding those two files from the other build, e.g. a
# worktree of an older commit after `make build/kvfs-mount
# build/libkvfs_preload.so`). The benches' binaries are the same in both.
#
#   make gpu-bundle; mkdir -p build/base-bin; cp OLD/build/kvfs-mount \
#       OLD/build/libkvfs_preload.so build/base-bin/
#   run(command="ROUNDS='1 2' bash bench/gpu_ab.sh build/base-bin",
#       carry=["build/gpu-bundle", "build/base-bin"], timeout_s=560)
#
# Out: $OUT/ab.tgz (base<r>/ and new<r>/: run.sh's files per round).
# Environment: ROUNDS (1), BUDGET per run.sh (240 s), STEPS (below).
# docs/time.md, "Issue 26 on a quiet machine", came from this script.
set -u
BASE=${1:?usage: gpu_ab.sh BASE_DIR}
B=$PWD/build/gpu-bundle A=/tmp/base-bundle O=/tmp/ab
rm -rf "$A" "$O"; mkdir -p "$O"
cp -r "$B" "$A"
cp "$BASE/kvfs-mount" "$A/bin/kvfs-mount"
cp "$BASE/libkvfs_preload.so" "$A/lib/libkvfs_preload.so"
steps=${STEPS:-bench-threads,xbench-threads,ibench,l2bench,l3bench,pbench}
for r in ${ROUNDS:-1}; do
	for x in base new; do
		d=$B; [ $x = base ] && d=$A
		bash "$d/run.sh" --budget "${BUDGET:-240}" --only "$steps" \
			--threads 1,2,8,16 --bench-mib 128 --bench-trials 3 \
			--xbench-mib 128 --xbench-trials 2 \
			--l2-dir /var/tmp "$O/$x$r" >/dev/null 2>&1
		sed -n '/^steps/,/^files/p' "$O/$x$r/summary.txt"
	done
done
tar -czf "${OUT:-/tmp}/ab.tgz" -C /tmp ab
