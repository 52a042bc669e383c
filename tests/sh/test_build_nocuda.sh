#!/usr/bin/env bash
# test_build_nocuda.sh - kvfs builds without CUDA, and no binary links the
# CUDA runtime (it is loaded with dlopen at run time).
#   1. `make CUDA=0` builds libkvfs.a and kvfsctl into a temporary BUILD,
#      with gpu_nocuda.o and not gpu_cuda.o;
#   2. a machine without the toolkit (CUDA_HOME=/nonexistent) auto-detects
#      CUDA=0;
#   3. neither that build nor the plain build ($PLAIN_BUILD, when built)
#      references libcudart or any cuda* symbol at link time.
# Kept fast: -O0, only the library and kvfsctl.
set -u
cd "$(dirname "$0")/../.." || exit 1
T=$(mktemp -d /tmp/kvfs-nocuda.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
fail=0
# A clean make: not the flags or jobserver of a `make test` around us.
unset MAKEFLAGS MFLAGS MAKELEVEL SANITIZE SANITIZER CUDA BUILD
bad() { echo "FAIL: $*"; fail=1; }

# Make-only check first: it costs nothing.
cuda=$(make -s --no-print-directory CUDA_HOME=/nonexistent -f Makefile \
	-f <(printf 'kvfs-print-cuda:\n\t@echo $(CUDA)\n') kvfs-print-cuda 2>&1 | tail -1)
[ "$cuda" = 0 ] || bad "without a toolkit CUDA should be auto-detected as 0, got '$cuda'"

B=$T/b0
if ! make -s --no-print-directory -j2 CUDA=0 CFLAGS=-O0 BUILD="$B" \
	"$B/libkvfs.a" "$B/kvfsctl" >"$T/log" 2>&1; then
	cat "$T/log"
	bad "make CUDA=0 failed"
	exit 1
fi
[ -f "$B/gpu/gpu_nocuda.o" ] || bad "CUDA=0 did not build gpu/gpu_nocuda.o"
[ -f "$B/gpu/gpu_cuda.o" ] && bad "CUDA=0 built gpu/gpu_cuda.o"

# No undefined cuda* symbol, no libcudart in NEEDED, in anything built.
check_bin() { # file
	local f=$1
	[ -e "$f" ] || return 0
	if nm -u "$f" 2>/dev/null | grep -E ' (cuda|cu)[A-Z][A-Za-z_]*$' >"$T/syms"; then
		bad "$f references CUDA symbols: $(head -3 "$T/syms" | tr '\n' ' ')"
	fi
	if readelf -d "$f" 2>/dev/null | grep -qi 'libcudart\|libcuda\.so'; then
		bad "$f links the CUDA runtime: $(readelf -d "$f" | grep -i cuda)"
	fi
	echo "ok: $f"
}
check_bin "$B/libkvfs.a"
check_bin "$B/kvfsctl"
"$B/kvfsctl" --help >/dev/null 2>&1
rc=$?
[ $rc -lt 126 ] || bad "CUDA=0 kvfsctl does not run (exit $rc)"

# The default build (CUDA auto-detected) must not link libcudart either.
P=${PLAIN_BUILD:-build}
for f in "$P/libkvfs.so" "$P/libkvfs.a" "$P/kvfsctl" "$P/kvfs-mount"; do
	check_bin "$f"
done

[ $fail = 0 ] && echo "PASS: builds without CUDA, nothing links libcudart"
exit $fail
