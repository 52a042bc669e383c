#!/usr/bin/env bash
# tests/sh/test_install.sh - make install / make uninstall (issue 17).
#
# Installs the plain build ($PLAIN_BUILD) into temporary trees and checks:
# the exact list of files (DESTDIR, PREFIX=/usr), what the files say
# (unit paths, the .so man links, the module's library path), that
# `man mount.kvfs` finds kvfs-mount(8) through MANPATH, that Debian's
# python3 searches the Python directory for PREFIX=/usr/local, that the
# installed module loads the installed libkvfs, and that make uninstall
# leaves no file behind. Exit 77 when the plain build is missing.
set -u
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PLAIN_BUILD=${PLAIN_BUILD:-build}
# the parent make's flags are not ours (jobserver fds, -s...)
unset MAKEFLAGS MFLAGS MAKELEVEL BUILD SANITIZE SANITIZER
for f in kvfs-mount kvfsctl libkvfs.so libkvfs.a kvfs.pc; do
	if [ ! -e "$REPO/$PLAIN_BUILD/$f" ]; then
		echo "skip: $PLAIN_BUILD/$f is not built (make all)"
		exit 77
	fi
done
T=$(mktemp -d /tmp/kvfs-install.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$REPO/tests/sh/check.sh"
# `-o all`: install what is built, never rebuild from a test
mk() { make --no-print-directory -s -C "$REPO" -o all BUILD="$PLAIN_BUILD" "$@"; }
files() { (cd "$1" && find . ! -type d | sort); }

# -- DESTDIR, PREFIX=/usr: the exact list
D=$T/dest
mk install DESTDIR="$D" PREFIX=/usr >"$T/log" 2>&1 || { cat "$T/log"; exit 1; }
cat >"$T/want" <<'EOF'
./sbin/mount.fuse.kvfs
./sbin/mount.kvfs
./usr/bin/kvfs-mount
./usr/bin/kvfsctl
./usr/include/kvfs.h
./usr/lib/libkvfs.a
./usr/lib/libkvfs.so
./usr/lib/libkvfs.so.0
./usr/lib/libkvfs_preload.so
./usr/lib/pkgconfig/kvfs.pc
./usr/lib/python3/dist-packages/kvfs/__init__.py
./usr/lib/python3/dist-packages/kvfs/_abi.py
./usr/lib/python3/dist-packages/kvfs/_buffer.py
./usr/lib/python3/dist-packages/kvfs/_client.py
./usr/lib/python3/dist-packages/kvfs/_handle.py
./usr/lib/systemd/system/kvfs@.service
./usr/share/doc/kvfs/kvfs.conf.example
./usr/share/man/man1/kvfsctl.1
./usr/share/man/man7/kvfs.7
./usr/share/man/man8/kvfs-mount.8
./usr/share/man/man8/mount.fuse.kvfs.8
./usr/share/man/man8/mount.kvfs.8
EOF
files "$D" >"$T/got"
check "installed files (DESTDIR, PREFIX=/usr)" diff -u "$T/want" "$T/got"
U=$D/usr/lib/systemd/system/kvfs@.service
check "unit runs /usr/bin/kvfs-mount -f" \
	grep -qx 'ExecStart=/usr/bin/kvfs-mount -f $KVFS_OPTIONS ${KVFS_MOUNTPOINT}' "$U"
check "unit reads /etc/kvfs/%i.conf" grep -qx 'EnvironmentFile=/etc/kvfs/%i.conf' "$U"
check "unit is Type=notify" grep -qx 'Type=notify' "$U"
check "no @VAR@ left in the unit" bash -c "! grep -q '@[A-Z]*@' '$U'"
check "mount.kvfs.8 is a .so link" \
	grep -qx '.so man8/kvfs-mount.8' "$D/usr/share/man/man8/mount.kvfs.8"
check "mount.kvfs -> kvfs-mount" \
	test "$(readlink "$D/sbin/mount.kvfs")" = /usr/bin/kvfs-mount
check "kvfs/_client.py loads /usr/lib/libkvfs.so.0" grep -qx \
	'_INSTALLED_LIB = "/usr/lib/libkvfs.so.0"' \
	"$D/usr/lib/python3/dist-packages/kvfs/_client.py"
if command -v man >/dev/null; then
	check "man -w mount.kvfs finds kvfs-mount.8" test \
		"$(MANPATH=$D/usr/share/man man -w mount.kvfs)" = \
		"$D/usr/share/man/man8/kvfs-mount.8"
	MANPATH=$D/usr/share/man MANPAGER=cat MANWIDTH=80 man mount.kvfs \
		>"$T/page" 2>&1
	check "man mount.kvfs shows kvfs-mount(8)" \
		grep -Eq 'kvfs-mount, +mount\.kvfs' "$T/page"
	(cd "$D/usr/share/man" && MANPAGER=cat man -l man8/mount.fuse.kvfs.8) \
		>"$T/page" 2>&1
	check "man -l mount.fuse.kvfs.8 shows kvfs-mount(8)" \
		grep -q 'KVFS-MOUNT(8)' "$T/page"
else
	echo "FAIL: man(1) is missing (Makefile APT_PKGS has man-db)"
	fail=1
fi
mk uninstall DESTDIR="$D" PREFIX=/usr >"$T/log" 2>&1 || { cat "$T/log"; exit 1; }
check "uninstall removed every file" test -z "$(files "$D")"
check "uninstall removed share/doc/kvfs" test ! -e "$D/usr/share/doc/kvfs"

# -- PREFIX=/usr/local: a directory Debian's python3 searches
D=$T/local
mk install DESTDIR="$D" PREFIX=/usr/local >"$T/log" 2>&1 || { cat "$T/log"; exit 1; }
py=$(cd "$D" && find . -path '*/kvfs/__init__.py' | sed 's|^\.||')
check "kvfs/ in a dist-packages of sys.path ($py)" /usr/bin/python3 -c \
	'import sys; sys.exit(sys.argv[1].rsplit("/", 2)[0] not in sys.path)' "$py"
check "unit in /usr/local/lib/systemd/system" \
	test -f "$D/usr/local/lib/systemd/system/kvfs@.service"
mk uninstall DESTDIR="$D" PREFIX=/usr/local >"$T/log" 2>&1 || { cat "$T/log"; exit 1; }
check "uninstall (/usr/local) removed every file" test -z "$(files "$D")"

# -- no DESTDIR: the installed module imports and loads its libkvfs
P=$T/prefix
mk install PREFIX="$P" SBINDIR="$P/sbin" SYSCONFDIR="$P/etc" \
	PYTHONDIR="$P/python" >"$T/log" 2>&1 || { cat "$T/log"; exit 1; }
got=$(cd / && env -u KVFS_LIB -u KVFS_PLAIN_BUILD PYTHONPATH="$P/python" \
	/usr/bin/python3 -c 'import kvfs; lib = kvfs.load_library()
print(kvfs.__file__, lib._name, len(kvfs.keys(range(8), 4)))')
check "installed module loads the installed library ($got)" test "$got" = \
	"$P/python/kvfs/__init__.py $P/lib/libkvfs.so.0 2"
mk uninstall PREFIX="$P" SBINDIR="$P/sbin" SYSCONFDIR="$P/etc" \
	PYTHONDIR="$P/python" >"$T/log" 2>&1 || { cat "$T/log"; exit 1; }
check "uninstall (PREFIX) removed every file" test -z "$(files "$P")"
exit $fail
