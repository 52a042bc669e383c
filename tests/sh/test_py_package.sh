#!/usr/bin/env bash
# tests/sh/test_py_package.sh - the Python binding as a package (issue 25).
#
# pip-installs python/ (pyproject.toml, setuptools) into a fresh virtual
# environment, offline (--no-build-isolation --no-index: Debian's
# setuptools and wheel build it), then, from another directory and with
# no PYTHONPATH, checks what a user gets: `import kvfs` comes from the
# venv's site-packages, it has every public name of the source tree's
# package, its keys are the ones kvfsctl hash prints, a missing library is
# an OSError that says to set KVFS_LIB, and pip uninstall leaves nothing.
# Exit 77 (saying why) without venv, pip, setuptools or wheel, or without
# the plain build's libkvfs.so and kvfsctl.
set -u
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PLAIN_BUILD=${PLAIN_BUILD:-${KVFS_PLAIN_BUILD:-build}}
case $PLAIN_BUILD in /*) B=$PLAIN_BUILD ;; *) B=$REPO/$PLAIN_BUILD ;; esac
PY=/usr/bin/python3
for f in libkvfs.so kvfsctl; do
	if [ ! -e "$B/$f" ]; then
		echo "skip: $B/$f is not built (make all)"
		exit 77
	fi
done
if ! $PY -c 'import venv, ensurepip' 2>/dev/null; then
	echo "skip: python3 has no venv/ensurepip (apt-get install python3-venv)"
	exit 77
fi
# (one import each: pip's distutils import upsets setuptools' in one process)
if ! $PY -c 'import setuptools, wheel' 2>/dev/null ||
	! $PY -c 'import pip' 2>/dev/null; then
	echo "skip: python3 lacks pip, setuptools or wheel" \
		"(apt-get install python3-pip python3-setuptools python3-wheel)"
	exit 77
fi
T=$(mktemp -d /tmp/kvfs-pypkg.XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$REPO/tests/sh/check.sh"

# a copy of python/, so the build's egg-info and build/ stay out of the tree
cp -r "$REPO/python" "$T/src"
rm -rf "$T/src/build" "$T/src"/*.egg-info
find "$T/src" -name __pycache__ -prune -exec rm -rf {} +
# --system-site-packages: Debian's setuptools and wheel build it offline
if ! $PY -m venv --system-site-packages "$T/venv" >"$T/log" 2>&1; then
	cat "$T/log"
	echo "skip: python3 -m venv failed (python3-venv installed?)"
	exit 77
fi
V=$T/venv/bin/python
logged() { "$@" >"$T/log" 2>&1 || { cat "$T/log"; false; }; }
check "pip install --no-build-isolation --no-index (offline)" \
	logged env -u PIP_FIND_LINKS "$V" -m pip install --no-build-isolation \
	--no-index --disable-pip-version-check "$T/src"

# Python in another directory, no PYTHONPATH, the library by KVFS_LIB
mkdir "$T/elsewhere"
user() { (cd "$T/elsewhere" && env -u PYTHONPATH -u KVFS_PLAIN_BUILD "$@"); }
site=$(user "$V" -c \
	'import sysconfig; print(sysconfig.get_paths()["purelib"])')
got=$(user KVFS_LIB="$B/libkvfs.so" "$V" -c \
	'import kvfs; print(kvfs.__file__)' 2>&1)
check "import kvfs from the venv ($got)" test "$got" = "$site/kvfs/__init__.py"

# every public name of the source tree's package, and the same ones
names='import kvfs, types; print(sorted(n for n, v in vars(kvfs).items()
    if not n.startswith("__") and not isinstance(v, types.ModuleType)))'
user KVFS_LIB="$B/libkvfs.so" "$V" -c "$names" >"$T/names.venv" 2>&1
(cd "$REPO/python" && env -u PYTHONPATH $PY -c "$names") >"$T/names.tree" 2>&1
check "the installed package has the tree's names" \
	diff -u "$T/names.tree" "$T/names.venv"
check "Connector, keys, path_keys, _ioctl among them" \
	grep -q "'Connector'.*'_ioctl'.*'keys'.*'path_keys'" "$T/names.venv"

# its keys are libkvfs's (kvfsctl hash computes them in C)
seq 1 1024 | "$B/kvfsctl" hash --chunk-tokens 256 >"$T/keys.ctl"
user KVFS_LIB="$B/libkvfs.so" "$V" -c 'import kvfs
for k in kvfs.keys(range(1, 1025), chunk_tokens=256): print(kvfs.key_hex(k))' \
	>"$T/keys.py" 2>&1
check "kvfs.keys == kvfsctl hash (4 keys)" \
	test "$(wc -l <"$T/keys.py")" = 4 -a -z "$(diff "$T/keys.ctl" "$T/keys.py")"

# no library: a clear OSError, never the repository's build/ (not a source
# tree here); skipped where a libkvfs is installed system-wide
if ldconfig -p 2>/dev/null | grep -q 'libkvfs\.so'; then
	echo "ok: (not checked: a libkvfs is installed, the loader finds it)"
else
	user "$V" -c 'import errno, kvfs
try:
    kvfs.load_library()
except OSError as e:
    assert e.errno == errno.ENOENT and "set KVFS_LIB" in str(e), e
    assert "/build/libkvfs.so" not in str(e), e
    print("OSError:", e.strerror)
else:
    raise SystemExit("loaded a library")' >"$T/err" 2>&1
	check "no library: OSError saying to set KVFS_LIB ($(cat "$T/err"))" \
		grep -q '^OSError: libkvfs.so not found (set KVFS_LIB)' "$T/err"
fi

check "pip uninstall" logged "$V" -m pip uninstall -y kvfs
check "nothing of kvfs left in site-packages" \
	test -z "$(cd "$site" && ls -d kvfs* 2>/dev/null)"
exit $fail
