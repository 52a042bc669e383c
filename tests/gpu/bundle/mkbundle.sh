#!/usr/bin/env bash
# mkbundle.sh BUILD OUT CUDA_HOME - assembles make gpu-bundle's folder OUT
# from the plain CUDA build in BUILD (the Makefile has built every program
# first). OUT is emptied and rebuilt:
#   bin/      kvfs-mount kvfsctl kvfs_gpubench kvfs_bench kvfs_xbench
#             kvfs_ibench kvfs_l2bench kvfs_l3bench kvfs_pbench
#             kvfs_cudacheck fusermount3 (not setuid: run as root), and
#             redis-server and redis-cli where this machine has them
#             (kvfs_l3bench's)
#   tests/    the GPU test programs, kvfs_devcheck, libfakecudart.so (the
#             tests look for both beside themselves)
#   lib/      libkvfs.so.0, libkvfs_preload.so (no libkvfs.so link: the folder holds no
#             symbolic link, so any copy keeps it whole) and every library the programs load that
#             is not glibc's, copied from this machine under its soname
#   lib/cxx/  libstdc++ and libgcc_s (they need a newer glibc than the rest;
#             env.sh uses the machine's own when these cannot load)
#   lib/cuda/ this toolkit's libcudart, the last resort when the machine
#             has none (kvfs_devcheck's RUNPATH finds it)
#   include/kvfs.h, python/kvfs/ (the package), run.sh, env.sh, README
#   MANIFEST  what was built (commit, CUDA, the glibc the files need,
#             every file with its size)
# Copies are stripped of debug sections (the symbol tables stay, for
# backtraces). Fails when a program needs a library that cannot be found
# or the folder reaches 64 MiB.
set -eu
BUILD=$1 OUT=$2 CUDA_HOME=${3:-/usr/local/cuda}
SRC=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$SRC/../../.." && pwd)
LIMIT_MIB=64

die() { echo "mkbundle: $*" >&2; exit 1; }
[ -x "$BUILD/kvfs-mount" ] || die "$BUILD/kvfs-mount not built"
case $OUT in /|"") die "refusing to empty '$OUT'" ;; esac
rm -rf "$OUT"
mkdir -p "$OUT"/bin "$OUT"/tests "$OUT"/lib/cxx "$OUT"/lib/cuda \
	"$OUT"/include "$OUT"/python

# glibc's own libraries: the machine's are used, never copies.
is_glibc() {
	case $1 in
	linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | \
		libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | \
		libutil.so.* | libanl.so.* | libmvec.so.* | libnsl.so.* | \
		libBrokenLocale.so.* | libnss_*.so.* | libthread_db.so.*) return 0 ;;
	esac
	return 1
}

put() { # src dest-dir [name]
	local dst=$2/${3:-$(basename "$1")}
	cp -L "$1" "$dst"
	chmod u+w "$dst"
	strip --strip-debug "$dst" 2>/dev/null || true
}

for p in kvfs-mount kvfsctl; do put "$BUILD/$p" "$OUT/bin"; done
for p in kvfs_gpubench kvfs_bench kvfs_xbench kvfs_ibench kvfs_l2bench \
	kvfs_l3bench kvfs_pbench; do
	put "$BUILD/bench/$p" "$OUT/bin"
done
# issue 26's benches on a quiet machine: kvfs_pbench's preload library
# (it looks for it beside kvfs-mount's KVFS_BUILD: run.sh points that at
# lib/), and this machine's redis-server for kvfs_l3bench (its libraries
# join the bundle's below; without one, the l3bench step skips saying so).
put "$BUILD/libkvfs_preload.so" "$OUT/lib"
for rs in redis-server redis-cli; do
	p=$(command -v "$rs") && put "$p" "$OUT/bin"
done
put "$BUILD/tests/gpu/bundle/kvfs_cudacheck" "$OUT/bin"
fm=$(command -v fusermount3) || die "fusermount3 not found (apt-get install fuse3)"
install -m 755 "$fm" "$OUT/bin/fusermount3"
for t in "$BUILD"/tests/gpu/test_* "$BUILD/tests/unit/test_gpu" \
	"$BUILD/tests/gpu/kvfs_devcheck"; do
	case $t in *.o | *.d | *.lsan) continue ;; esac
	[ -f "$t" ] && [ -x "$t" ] && put "$t" "$OUT/tests"
done
put "$BUILD/tests/gpu/libfakecudart.so" "$OUT/tests"
# No symbolic links anywhere: a copy may not keep them.
put "$BUILD/libkvfs.so" "$OUT/lib" libkvfs.so.0
install -m 644 "$ROOT/include/kvfs.h" "$OUT/include/"
install -d "$OUT/python/kvfs"
install -m 644 "$ROOT"/python/kvfs/*.py "$OUT/python/kvfs/"
install -m 755 "$SRC/run.sh" "$SRC/env.sh" "$OUT/"
install -m 644 "$SRC/README" "$OUT/"

# The fallback runtime, under its soname.
rt=$(readlink -f "$CUDA_HOME/lib64/libcudart.so") ||
	die "no libcudart.so under $CUDA_HOME/lib64"
rtso=$(objdump -p "$rt" | awk '$1 == "SONAME" { print $2 }')
put "$rt" "$OUT/lib/cuda" "$rtso"

# Every library ldd resolves for every ELF file, glibc's excepted (ldd
# lists indirect needs too, so one pass is the whole closure).
elfs() {
	find "$OUT/bin" "$OUT/tests" "$OUT/lib" -type f | sort |
		while read -r f; do
			[ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = 177ELF ] &&
				echo "$f"
		done
}
for f in $(elfs); do
	while read -r name arrow path rest; do
		[ "$arrow" = "=>" ] || continue
		is_glibc "$name" && continue
		[ "$path" = "not" ] && die "$f: $name not found"
		case $name in
		libcudart.so.* | libcuda.so.*) continue ;; # lib/cuda, the driver's
		libstdc++.so.* | libgcc_s.so.*) dir=$OUT/lib/cxx ;;
		*) dir=$OUT/lib ;;
		esac
		[ -e "$dir/$name" ] || put "$path" "$dir" "$name"
	done < <(ldd "$f" 2>/dev/null)
done

# The newest glibc symbol version each part needs.
glibc_need() { # files...
	for f in "$@"; do
		objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*'
	done | sed 's/GLIBC_//' | sort -uV | tail -1
}
core=$(elfs | grep -v '/lib/cuda/' | grep -v '/lib/cxx/')
need_core=$(glibc_need $core)
need_cxx=$(glibc_need "$OUT"/lib/cxx/*)
need_cuda=$(glibc_need "$OUT"/lib/cuda/*)
# what the machine's libstdc++ must have when lib/cxx cannot load
need_glibcxx=$(for f in $core; do objdump -T "$f" 2>/dev/null; done |
	grep -o 'GLIBCXX_[0-9][0-9.]*' | sed 's/GLIBCXX_//' | sort -uV | tail -1)
cuda_ver=$(sed -n 's/.*release \([0-9][0-9.]*\).*/\1/p' \
	<("$CUDA_HOME/bin/nvcc" --version 2>/dev/null) | head -1)
[ -n "$cuda_ver" ] || cuda_ver=$(sed -n '/"cuda"/,/}/s/.*"version" *: *"\([0-9]*\.[0-9]*\).*/\1/p' \
	"$CUDA_HOME/version.json" 2>/dev/null | head -1)
{
	echo "# make gpu-bundle $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n)"
	echo "COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo +changes)"
	echo "BUILT_ON='$(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}"), glibc $(getconf GNU_LIBC_VERSION | awk '{print $2}')'"
	echo "CUDA_BUILD=${cuda_ver:-unknown}"
	echo "CUDART_FALLBACK=lib/cuda/$rtso"
	echo "GLIBC_NEEDED=$need_core"
	echo "GLIBC_NEEDED_CXX=$need_cxx"
	echo "GLIBC_NEEDED_CUDART=$need_cuda"
	echo "GLIBCXX_NEEDED=$need_glibcxx"
	echo "# files (bytes):"
	(cd "$OUT" && find . -type f ! -name MANIFEST | sort | while read -r f; do
		printf '%10d %s\n' "$(stat -c %s "$f")" "${f#./}"
	done)
} > "$OUT/MANIFEST"

kib=$(du -sk "$OUT" | awk '{print $1}')
echo "MANIFEST_SIZE_KIB=$kib" >> "$OUT/MANIFEST"
[ "$kib" -lt $((LIMIT_MIB * 1024)) ] ||
	die "$OUT is $kib KiB, over $LIMIT_MIB MiB"
printf 'gpu-bundle: %s, %d files, %s MiB; needs glibc >= %s (%s for lib/cxx); CUDA %s\n' \
	"$OUT" "$(find "$OUT" -type f | wc -l)" "$(awk -v k="$kib" 'BEGIN { printf "%.1f", k / 1024 }')" \
	"$need_core" "$need_cxx" "${cuda_ver:-unknown}"
