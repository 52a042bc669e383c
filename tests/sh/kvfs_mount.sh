# tests/sh/kvfs_mount.sh - sourced by tests/sh/test_*.sh: mounts a real
# kvfs (kvfs-mount -f in the background, so its pid is known) with a
# deadline, and unmounts it in the caller's EXIT trap, failing when the
# daemon outlives the unmount (as tests/common/kvfs_test.c does).
#
#   kvfs_sh_mount DIR [-o OPTS]   sets KVFS_SH_PID; returns 1 on failure
#   kvfs_sh_umount DIR            returns 1 when the daemon lingered

MOUNT=${KVFS_MOUNT_BIN:-$PWD/build/kvfs-mount}
KVFS_SH_PID=

kvfs_sh_mount() {
	local dir=$1; shift
	mkdir -p "$dir" || return 1
	"$MOUNT" -f "$@" "$dir" 2>>"$dir.log" &
	KVFS_SH_PID=$!
	for _ in $(seq 100); do
		[ -r "$dir/.kvfs/stats" ] && return 0
		kill -0 "$KVFS_SH_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "kvfs_sh_mount: $dir not mounted within 10 s:" >&2
	cat "$dir.log" >&2
	kill "$KVFS_SH_PID" 2>/dev/null
	return 1
}

kvfs_sh_umount() {
	local dir=$1
	[ -n "$KVFS_SH_PID" ] || return 0
	fusermount3 -u "$dir" 2>/dev/null || fusermount3 -uz "$dir" 2>/dev/null
	for _ in $(seq 100); do
		if ! kill -0 "$KVFS_SH_PID" 2>/dev/null; then
			wait "$KVFS_SH_PID" 2>/dev/null
			KVFS_SH_PID=
			return 0
		fi
		sleep 0.1
	done
	echo "kvfs_sh_umount: daemon $KVFS_SH_PID outlived the unmount" >&2
	kill -9 "$KVFS_SH_PID" 2>/dev/null
	KVFS_SH_PID=
	return 1
}
