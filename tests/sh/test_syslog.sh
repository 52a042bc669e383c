#!/usr/bin/env bash
# test_syslog.sh - the detached daemon logs to syslog as "kvfs-mount[PID]"
# with facility LOG_DAEMON (openlog), and a repeated message is written
# 5 times, then summarized ("suppressed N similar messages") at exit.
#
# /dev/log is replaced by a socket of this test's own, in a private mount
# namespace (unshare -m), so nothing outside sees it; needs root.
set -u
MOUNT=${KVFS_MOUNT_BIN:-$PWD/build/kvfs-mount}
if [ "$(id -u)" != 0 ]; then
	echo "test_syslog: skip: needs root (a private mount namespace)"
	exit 77
fi
for c in unshare /usr/bin/python3 fusermount3; do
	if ! command -v "$c" >/dev/null; then
		echo "test_syslog: skip: $c not installed"
		exit 77
	fi
done
if [ ! -x "$MOUNT" ]; then
	echo "test_syslog: no kvfs-mount at $MOUNT" >&2
	exit 1
fi
tmp=$(mktemp -d /tmp/kvfs-syslog.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

unshare -m --propagation private bash -s "$MOUNT" "$tmp" <<'EOS'
set -u
MOUNT=$1 tmp=$2
fail() { echo "not ok - $*"; exit 1; }
# a /dev of our own (tmpfs), with the real nodes the daemon needs bound
# in, and /dev/log a socket this test reads
mkdir "$tmp/olddev" "$tmp/m" || exit 1
mount --bind /dev "$tmp/olddev" || { echo "skip: bind mount: $?"; exit 77; }
mount -t tmpfs tmpfs /dev || { echo "skip: tmpfs on /dev"; exit 77; }
for n in fuse null zero random urandom; do
	touch "/dev/$n" && mount --bind "$tmp/olddev/$n" "/dev/$n" ||
		fail "cannot bind /dev/$n"
done
/usr/bin/python3 - "$tmp/log.txt" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/dev/log")
s.settimeout(60)
with open(sys.argv[1], "a") as f:
    try:
        while True:
            f.write(s.recv(4096).decode(errors="replace").rstrip("\n") + "\n")
            f.flush()
    except socket.timeout:
        pass
PY
lpid=$!
for i in $(seq 50); do [ -S /dev/log ] && break; sleep 0.1; done
[ -S /dev/log ] || fail "no /dev/log listener"

"$MOUNT" -o l1_size=16M "$tmp/m" || fail "kvfs-mount failed"
mkdir "$tmp/m/ns" || fail "mkdir"
# ten writers killed in the middle of a chunk: ten identical log lines
for i in $(seq 10); do
	key=$(printf '%032x' "$i")
	# (not a shell: its redirections close dups of the fd, and a close
	# after a write publishes)
	/usr/bin/python3 -c 'import os, signal, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
os.write(fd, b"x")
os.kill(os.getpid(), signal.SIGKILL)' "$tmp/m/ns/$key"
done
sleep 1
fusermount3 -u "$tmp/m" || fail "unmount"
for i in $(seq 100); do
	grep -q "suppressed" "$tmp/log.txt" 2>/dev/null && break
	sleep 0.1
done
kill "$lpid" 2>/dev/null
echo "--- what syslog got:"
cat "$tmp/log.txt"
echo "---"
# <27>: LOG_DAEMON (3 << 3) | LOG_ERR (3); ident and pid from openlog
grep -Eq '^<27>.*kvfs-mount\[[0-9]+\]: kvfs: writer pid [0-9]+ killed' \
	"$tmp/log.txt" || fail "no 'kvfs-mount[PID]' line with facility daemon"
n=$(grep -c 'killed by a signal' "$tmp/log.txt")
# five lines, and the summary (which quotes the last one)
[ "$n" -eq 6 ] || fail "$n lines about killed writers, want 5 + summary"
grep -q 'kvfs-mount: suppressed 5 similar messages' "$tmp/log.txt" ||
	fail "no 'suppressed 5 similar messages' summary"
echo "ok - syslog: ident kvfs-mount[pid], LOG_DAEMON, 5 lines + summary"
EOS
