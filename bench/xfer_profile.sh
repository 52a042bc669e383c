#!/usr/bin/env bash
# bench/xfer_profile.sh [BUILD] - where the daemon's time goes during
# batched transfers: mounts kvfs (BUILD/kvfs-mount, default build/), runs
# Connector.get_many / put_many of 16 x 2 MiB chunks in a loop, records
# the daemon with `perf record -g` and prints the top symbols. What to look
# for: the bytes are copied once, by the kernel inside process_vm_writev
# (_copy_from_iter, GET) and process_vm_readv (_copy_to_iter, PUT); no
# user-space memcpy in the daemon; XXH3 is PUT's checksum (a read).
# Exits 77 when perf is missing or not allowed.
set -u
BUILD=${1:-build}
cd "$(dirname "$0")/.." || exit 1
command -v perf >/dev/null || { echo "skipped: no perf"; exit 77; }
MNT=$(mktemp -d /tmp/kvfs-prof.XXXXXX) || exit 1
"$BUILD/kvfs-mount" -f -o l1_size=1G "$MNT" &
DPID=$!
cleanup() {
	fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	wait "$DPID" 2>/dev/null
	rm -rf "$MNT" "$MNT.perf"
}
trap cleanup EXIT
for _ in $(seq 300); do
	[ "$(stat -f -c %T "$MNT")" = fuseblk ] || [ "$(stat -f -c %T "$MNT")" = fuse ] && break
	sleep 0.1
done
perf record -q -g -o "$MNT.perf" -p "$DPID" -- sleep 6 >/dev/null 2>&1 &
PERF=$!
sleep 0.5
KVFS_LIB=${KVFS_LIB:-$PWD/$BUILD/libkvfs.so} /usr/bin/python3 - "$MNT" <<'PY'
import sys, time
sys.path.insert(0, "python")
import kvfs
c = kvfs.Connector(sys.argv[1], "prof", chunk_tokens=16)
keys = kvfs.keys(range(16 * 16), 16, seed=7)
bufs = [bytearray(2 << 20) for _ in keys]
c.put_many(keys, bufs)
end = time.monotonic() + 4
n = 0
while time.monotonic() < end:
    c.get_many(keys, bufs)
    n += 1
    if n % 4 == 0:  # some PUTs too: new keys, then unlink them
        ks = kvfs.keys(range(16 * 16), 16, seed=1000 + n)
        c.put_many(ks, bufs)
        for k in ks:
            import os
            os.unlink(kvfs.key_hex(k), dir_fd=c.fd)
print("profile: %d GET batches of 16 x 2 MiB" % n)
PY
wait "$PERF"
perf report -i "$MNT.perf" --no-children --sort symbol --stdio -g none \
	2>/dev/null | grep -v '^#' | grep -v '^$' | head -25
