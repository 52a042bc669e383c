#!/usr/bin/env bash
# tests/sh/test_systemd_unit.sh - `systemd-analyze verify` on kvfs@.service
# as make install writes it (issue 17). Installed under a temporary PREFIX
# so ExecStart= and the man pages of Documentation= exist; a copy whose
# ExecStart= names a missing program must fail verify (the check works).
# Exit 77 without systemd-analyze or the plain build. The notify protocol
# itself is tested by tests/python/test_notify.py.
set -u
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PLAIN_BUILD=${PLAIN_BUILD:-build}
unset MAKEFLAGS MFLAGS MAKELEVEL BUILD SANITIZE SANITIZER
if ! command -v systemd-analyze >/dev/null; then
	echo "skip: no systemd-analyze (Debian package systemd)"
	exit 77
fi
if [ ! -x "$REPO/$PLAIN_BUILD/kvfs-mount" ]; then
	echo "skip: $PLAIN_BUILD/kvfs-mount is not built (make all)"
	exit 77
fi
T=$(mktemp -d /tmp/kvfs-unit.XXXXXX)
trap 'rm -rf "$T"' EXIT
P=$T/prefix
make --no-print-directory -s -C "$REPO" -o all BUILD="$PLAIN_BUILD" install \
	PREFIX="$P" SBINDIR="$P/sbin" SYSCONFDIR="$P/etc" \
	PYTHONDIR="$P/python" >"$T/log" 2>&1 || { cat "$T/log"; exit 1; }
U=$P/lib/systemd/system/kvfs@.service
export MANPATH=$P/share/man # Documentation=man:kvfs-mount(8) is checked
fail=0
if systemd-analyze verify "$U" >"$T/out" 2>&1; then
	echo "ok: systemd-analyze verify kvfs@.service"
else
	echo "FAIL: systemd-analyze verify kvfs@.service:"
	cat "$T/out"
	fail=1
fi
sed 's|^ExecStart=[^ ]*|ExecStart=/nonexistent/kvfs-mount|' "$U" >"$T/kvfs@.service"
if systemd-analyze verify "$T/kvfs@.service" >"$T/out" 2>&1; then
	echo "FAIL: verify accepted an ExecStart= that does not exist"
	fail=1
elif grep -q 'nonexistent' "$T/out"; then
	echo "ok: verify rejects a missing ExecStart= program"
else
	echo "FAIL: verify failed for another reason:"
	cat "$T/out"
	fail=1
fi
exit $fail
