#!/usr/bin/env bash
# bench/demo.sh BUILD - what `make demo` runs (the Makefile has built BUILD).
#
# Mounts kvfs with its defaults on a temporary directory (daemon mode: the
# mount command returns once the mount is ready), runs bench/kvfs_demo (an
# engine-like workload: multi-turn conversations sharing system prompts,
# keys from libkvfs, lookup, read + verify the hits, write the misses), shows
# what an operator sees (ls -l, getfattr, .kvfs/stats), then unmounts. The
# unmount runs on every exit path.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.." || exit 1
MOUNT_BIN=$BUILD/kvfs-mount
CTL_BIN=$BUILD/kvfsctl
DEMO_BIN=$BUILD/bench/kvfs_demo
DEMO_ARGS=${KVFS_DEMO_ARGS:-}

# `make demo` builds `all`; the demo program is a bench program.
if [ ! -x "$DEMO_BIN" ] || [ bench/kvfs_demo.c -nt "$DEMO_BIN" ]; then
	make --no-print-directory BUILD="$BUILD" "$DEMO_BIN" || exit 1
fi
if [ ! -x "$MOUNT_BIN" ]; then
	echo "demo: $MOUNT_BIN is not built (run make)" >&2
	exit 1
fi

MNT=$(mktemp -d /tmp/kvfs-demo.XXXXXX) || exit 1
mounted=0
cleanup() {
	local i
	if [ "$mounted" = 1 ]; then
		for i in 1 2 3 4 5 6 7 8 9 10; do
			fusermount3 -u "$MNT" 2>/dev/null && break
			sleep 0.3 # a process may still hold a file open
		done
		if grep -q " $MNT " /proc/mounts; then
			echo "demo: lazy unmount of $MNT" >&2
			fusermount3 -uz "$MNT" 2>/dev/null || umount -l "$MNT"
		fi
		# The daemon exits after the unmount; give it a moment.
		for i in $(seq 50); do
			pgrep -f -- "kvfs-mount $MNT\$" >/dev/null || break
			sleep 0.1
		done
	fi
	rmdir "$MNT" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

if [ -t 1 ]; then
	section() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
	section() { printf '\n== %s\n' "$*"; }
fi

section "mount: $MOUNT_BIN $MNT   (defaults; returns once the mount is ready)"
if ! timeout 60 "$MOUNT_BIN" "$MNT"; then
	echo "demo: kvfs-mount failed" >&2
	grep -q " $MNT " /proc/mounts && mounted=1
	exit 1
fi
mounted=1
if ! grep -q " $MNT fuse" /proc/mounts; then
	echo "demo: kvfs-mount returned but $MNT is not mounted" >&2
	exit 1
fi
grep " $MNT " /proc/mounts | cut -d' ' -f1-4
df -h "$MNT" | tail -n 1

section "workload: $DEMO_BIN $MNT $DEMO_ARGS"
out=$(mktemp /tmp/kvfs-demo-out.XXXXXX)
# shellcheck disable=SC2086 # DEMO_ARGS are words on purpose
timeout 120 "$DEMO_BIN" "$MNT" $DEMO_ARGS | tee "$out"
rc=${PIPESTATUS[0]}
chunk=$(sed -n 's/^shared chunk: //p' "$out")
ns=${chunk%%/*}
rm -f "$out"
if [ "$rc" != 0 ]; then
	echo "demo: the workload failed (exit $rc)" >&2
	exit "$rc"
fi

section "ls -l $ns | head   (one file per chunk: 32 hex digits of its prefix key)"
ls -l "$MNT/$ns" | head -n 8
echo "... $(find "$MNT/$ns" -maxdepth 1 -type f | wc -l) chunks"

if [ -n "$chunk" ]; then
	section "getfattr -d -m user.kvfs $chunk   (the first chunk of a shared system prompt)"
	(cd "$MNT" && getfattr -d -m user.kvfs "$chunk")
fi
section "getfattr -d -m user.kvfs $ns   (the namespace)"
(cd "$MNT" && getfattr -d -m user.kvfs "$ns")

section "kvfsctl stats"
if ! "$CTL_BIN" stats "$MNT" 2>/dev/null; then
	echo "(kvfsctl stats not available here; the raw file:)"
	cat "$MNT/.kvfs/stats" 2>&1 | head -n 40
fi

section "unmount: fusermount3 -u $MNT"
cleanup
mounted=0
trap - EXIT
if grep -q " $MNT " /proc/mounts; then
	echo "demo: $MNT is still mounted" >&2
	exit 1
fi
echo "unmounted; demo done"
