#!/usr/bin/env bash
# test_make_fresh.sh - `make demo` passes the first time on a machine that
# has none of the packages (issue 27, item 1).
#
# Simulated, without removing anything from this machine: a copy of the
# source tree is built with PKG_CONFIG= a wrapper that fails (as on a
# machine without pkg-config's .pc files) until a fake APT_GET= ran
# `install`, and then answers as the real pkg-config. A Makefile that reads
# the compiler flags when make starts, and builds in that same make after
# check-deps, compiles fs/ and mount/ without fuse3's include directory and
# fails: `fuse_lowlevel.h: No such file or directory`.
# bench/demo.sh is replaced in the copy by a stub (no mount here: the
# demo's workload is not what is tested), which checks what was built.
set -u
cd "$(dirname "$0")/../.." || exit 1
T=$(mktemp -d /tmp/kvfs-fresh.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
unset MAKEFLAGS MFLAGS MAKELEVEL SANITIZE SANITIZER BUILD
REAL_PKG_CONFIG=$(command -v pkg-config) || {
	echo "SKIP: no pkg-config"
	exit 77
}

mkdir -p "$T/src" "$T/bin"
if git rev-parse --git-dir >/dev/null 2>&1; then
	git ls-files -z --cached --others --exclude-standard |
		grep -zv '^build/' | xargs -0 tar cf - 2>/dev/null | tar xf - -C "$T/src"
else
	tar cf - --exclude=./build . | tar xf - -C "$T/src"
fi

cat >"$T/bin/pkg-config" <<EOF
#!/bin/sh
[ -e "$T/installed" ] || exit 1
exec "$REAL_PKG_CONFIG" "\$@"
EOF
cat >"$T/bin/apt-get" <<EOF
#!/bin/sh
echo "apt-get \$*" >>"$T/apt.log"
case "\$1" in install) touch "$T/installed" ;; esac
EOF
cat >"$T/src/bench/demo.sh" <<'EOF'
#!/usr/bin/env bash
B=${1:?}
for f in kvfs-mount kvfsctl libkvfs.so bench/kvfs_demo; do
	[ -x "$B/$f" ] || [ -f "$B/$f" ] || { echo "stub demo: no $B/$f"; exit 1; }
done
"$B/kvfs-mount" --help >/dev/null 2>&1
[ $? -lt 126 ] || { echo "stub demo: kvfs-mount does not run"; exit 1; }
echo "stub demo: built"
EOF
chmod +x "$T/bin/pkg-config" "$T/bin/apt-get"

fail=0
bad() { echo "FAIL: $*"; fail=1; }
# On PATH too, so that no real apt-get runs whatever the Makefile calls.
if ! (cd "$T/src" && PATH=$T/bin:$PATH make --no-print-directory -j2 demo CFLAGS=-O0 \
	BUILD="$T/b" PKG_CONFIG="$T/bin/pkg-config" APT_GET="$T/bin/apt-get") \
	>"$T/log" 2>&1; then
	tail -n 20 "$T/log"
	bad "make demo failed on a machine whose packages make deps installs"
fi
grep -q '^apt-get install -y .*libfuse3-dev' "$T/apt.log" 2>/dev/null ||
	bad "make demo did not install the packages (apt log: $(cat "$T/apt.log" 2>/dev/null))"
grep -q '^stub demo: built' "$T/log" || bad "the demo did not run"

[ $fail = 0 ] && echo "PASS: make demo builds the first time, after make deps"
exit $fail
