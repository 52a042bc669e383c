# tests/sh/preload_test.sh - sourced by tests/sh/test_preload*.sh, after
# setting T (the test's name, for messages): mounts come from kvfs_mount.sh;
# this finds the library (PRELOAD: KVFS_PRELOAD_LIB, else the plain
# build's libkvfs_preload.so) and the tools (exits 1 or 77), makes tmp
# (0755, for other uids), and gives the TAP helpers ok / bad / check DESC
# CMD... (fails, n: the count), pyrun DESC CMD..., stat NAME (a counter of $tmp/m/.kvfs/stats
# by dotted path: requests.open) and pre CMD... (CMD with LD_PRELOAD).
# preload_mount mounts $tmp/m (l1_size=64M, allow_other as root: checks
# run as another uid) with an EXIT trap that unmounts it and removes tmp;
# a caller that mounts otherwise sets its own trap; preload_chunks (below)
# writes three chunks. The caller ends with
# `echo "1..$n"; [ "$fails" = 0 ]`.
# shellcheck shell=bash
PY=/usr/bin/python3
# shellcheck source=tests/sh/kvfs_mount.sh
. "$(dirname "$0")/kvfs_mount.sh"
PRELOAD=${KVFS_PRELOAD_LIB:-$PWD/${KVFS_PLAIN_BUILD:-build}/libkvfs_preload.so}
for f in "$MOUNT" "$PRELOAD"; do
	if [ ! -e "$f" ]; then
		echo "$T: no $f (make all first)" >&2
		exit 1
	fi
done
for c in fusermount3 "$PY" cmp; do
	if ! command -v "$c" >/dev/null; then
		echo "$T: skip: $c not installed (make deps)"
		exit 77
	fi
done
tmp=$(mktemp -d "/tmp/kvfs-$T.XXXXXX") || exit 1
chmod 755 "$tmp"
fails=0 n=0
ok()  { n=$((n + 1)); printf 'ok %d - %s\n' "$n" "$1"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); printf 'not ok %d - %s\n' "$n" "$1"; }
skip() { n=$((n + 1)); printf 'ok %d # skip %s\n' "$n" "$1"; }
say() { printf '%s\n' "$1" | sed 's/^/  # /'; } # TEXT as TAP comments
check() { # DESC CMD...: ok when CMD succeeds
	local d=$1; shift
	if "$@"; then ok "$d"; else bad "$d"; fi
}
stat() {
	"$PY" -c 'import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[k]
print(v)' "$tmp/m/.kvfs/stats" "$1"
}
pre() { LD_PRELOAD=$PRELOAD "$@"; }
# what the Python parts share (imported through PYTHONPATH=$tmp)
cat >"$tmp/plt.py" <<'EOF'
"""The preload tests' Python helpers (preload_test.sh): TAP-ish lines,
the daemon's counters (PLT_STATS: its .kvfs/stats), a whole read."""
import json
import os
import sys

fails = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        fails.append(what)


def counts():
    """(ioctl.xfer.gets, requests.open) of the daemon now."""
    with open(os.environ["PLT_STATS"]) as f:
        v = json.load(f)
    return v["ioctl"]["xfer"]["gets"], v["requests"]["open"]


def pyread(p):
    with open(p, "rb") as f:
        return f.read()


def done():
    sys.exit(1 if fails else 0)
EOF
export PLT_STATS=$tmp/m/.kvfs/stats PYTHONPATH=$tmp
# pyrun DESC CMD... (a Python script on stdin, as CMD's): its output as
# TAP comments, ok when it exits 0
pyrun() {
	local d=$1 out rc
	shift
	out=$("$@" 2>&1)
	rc=$?
	printf '%s\n' "$out" | sed 's/^/  # /'
	if [ "$rc" = 0 ]; then ok "$d"; else bad "$d"; fi
}
preload_cleanup() {
	kvfs_sh_umount "$tmp/m" || echo "not ok - daemon lingered"
	rm -rf "$tmp"
}
preload_mount() {
	local opts=l1_size=64M
	[ "$(id -u)" = 0 ] && opts=$opts,allow_other
	trap preload_cleanup EXIT
	kvfs_sh_mount "$tmp/m" -o "$opts"
}
# preload_chunks: after preload_mount, the key namespace ns=$tmp/m/ns with
# three chunks of random bytes, their copies in $tmp/k1..k3: K1 (2 MiB),
# K2 (256 KiB), K3 (1,000 bytes).
preload_chunks() {
	ns=$tmp/m/ns
	K1=0123456789abcdef0123456789abcdef
	K2=00000000000000000000000000000002
	K3=00000000000000000000000000000003
	mkdir "$ns" || return 1
	head -c 2097152 /dev/urandom >"$tmp/k1" &&
		head -c 262144 /dev/urandom >"$tmp/k2" &&
		head -c 1000 /dev/urandom >"$tmp/k3" &&
		cp "$tmp/k1" "$ns/$K1" && cp "$tmp/k2" "$ns/$K2" &&
		cp "$tmp/k3" "$ns/$K3"
}
