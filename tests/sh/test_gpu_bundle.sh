#!/usr/bin/env bash
# test_gpu_bundle.sh - make gpu-bundle builds a folder a bare GPU machine
# can run, and its run.sh reports instead of crashing (issue 30):
#   1. `make gpu-bundle` (plain build, $PLAIN_BUILD) into a temporary
#      folder: every program of the list is there, the MANIFEST says the
#      glibc it needs, the folder is under 64 MiB;
#   2. every ELF file of the bundle resolves every library from the bundle
#      alone, glibc's excepted (ldd with the bundle's library path; any
#      other path, or "not found", fails);
#   3. run.sh on the stand-in CUDA runtime (KVFS_CUDART=libfakecudart.so)
#      in a mount namespace where this machine's copies of every bundled
#      library are hidden (bind-mounted over with an empty file): every
#      step runs and passes, or skips saying why; the thread-scaling
#      tables (1,2,4,8,16 threads against tmpfs) are in OUTDIR;
#   4. run.sh with no /dev/fuse (KVFS_BUNDLE_DEV_FUSE=/nonexistent) and no
#      driver (the nvidia overrides) and no KVFS_CUDART: both reported as
#      missing, every step that needs them skipped saying so, no crash;
#   5. run.sh of a bundle that lacks a library: the check names it, and the
#      steps whose programs cannot load are skipped saying so.
# Skips (77) where the CUDA toolkit is missing (make gpu-bundle needs it).
# Kept fast: run.sh --quick (4 MiB / 32 MiB bench phases, one trial).
set -u
cd "$(dirname "$0")/../.." || exit 1
T=$(mktemp -d /tmp/kvfs-gpubundle.XXXXXX) || exit 1
trap 'rm -rf --one-file-system "$T"' EXIT
unset MAKEFLAGS MFLAGS MAKELEVEL SANITIZE SANITIZER CUDA BUILD KVFS_CUDART
P=${PLAIN_BUILD:-build}
B=$T/bundle
fail=0
bad() { echo "FAIL: $*"; fail=1; }

cuda=$(make -s --no-print-directory -f Makefile \
	-f <(printf 'kvfs-print-cuda:\n\t@echo $(CUDA)\n') kvfs-print-cuda 2>&1 | tail -1)
if [ "$cuda" != 1 ]; then
	echo "skipped: no CUDA toolkit here (make gpu-bundle needs one)"
	exit 77
fi

# ---------------------------------------------------------------- 1
if ! make -s --no-print-directory -j2 BUILD="$P" GPU_BUNDLE="$B" gpu-bundle \
	>"$T/make.log" 2>&1; then
	cat "$T/make.log"
	bad "make gpu-bundle failed"
	exit 1
fi
tail -1 "$T/make.log"
for f in run.sh env.sh README MANIFEST bin/kvfs-mount bin/kvfsctl \
	bin/fusermount3 bin/kvfs_gpubench bin/kvfs_bench bin/kvfs_xbench \
	bin/kvfs_cudacheck lib/libkvfs.so.0 lib/libfuse3.so.3 lib/liburing.so.2 \
	lib/libzstd.so.1 lib/libhiredis.so.0.14 lib/libzmq.so.5 \
	tests/test_gpu tests/test_gpu_ipc tests/test_gpu_sim tests/test_gpu_xfer \
	tests/test_gpu_nodev tests/libfakecudart.so include/kvfs.h \
	python/kvfs/__init__.py; do
	[ -e "$B/$f" ] || bad "the bundle lacks $f"
done
[ -x "$(make -s --no-print-directory -f Makefile -f <(printf 'p:\n\t@echo $(NVCC)\n') p)" ] &&
	{ [ -e "$B/tests/kvfs_devcheck" ] || bad "the bundle lacks tests/kvfs_devcheck"; }
grep -q '^GLIBC_NEEDED=2\.[0-9]' "$B/MANIFEST" || bad "MANIFEST has no GLIBC_NEEDED"
kib=$(du -sk "$B" | awk '{ print $1 }')
[ "$kib" -lt 65536 ] || bad "the bundle is $kib KiB, not under 64 MiB"
[ -u "$B/bin/fusermount3" ] && bad "the bundle's fusermount3 is setuid"

# ---------------------------------------------------------------- 2
is_glibc() {
	case $1 in
	linux-vdso.so.* | ld-linux*.so.* | /lib*/ld-linux*.so.* | libc.so.* | \
		libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | \
		libresolv.so.* | libutil.so.* | libmvec.so.*) return 0 ;;
	esac
	return 1
}
n=0
while read -r f; do
	[ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = 177ELF ] || continue
	n=$((n + 1))
	out=$(LD_LIBRARY_PATH=$B/lib:$B/lib/cxx ldd "$f" 2>&1)
	echo "$out" | grep -q 'not a dynamic executable' && continue
	while read -r name arrow path rest; do
		if [ "$arrow" != "=>" ]; then
			is_glibc "$name" || bad "$f: ldd line '$name $arrow $path'"
			continue
		fi
		if [ "$path" = not ]; then
			bad "$f: $name not found"
		elif is_glibc "$name"; then
			:
		elif [ "${path#"$B"/}" = "$path" ]; then
			bad "$f: $name resolves outside the bundle: $path"
		fi
	done <<<"$out"
done < <(find "$B" -type f | sort)
echo "ok: $n ELF files resolve every library from the bundle (glibc's excepted)"
[ $n -ge 15 ] || bad "only $n ELF files in the bundle"

# ---------------------------------------------------------------- 3, 4
# run.sh where this machine's copies of the bundled libraries are hidden:
# a private mount namespace with an empty file over each of them.
hidden=()
for l in "$B"/lib/*.so* "$B"/lib/cxx/*.so*; do
	name=$(basename "$l")
	for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /usr/local/lib \
		/lib64 /usr/lib64; do
		[ -e "$d/$name" ] && hidden+=("$(readlink -f "$d/$name")")
	done
done
: >"$T/empty"
isolated() { # cmd... (falls back to the plain environment, saying so)
	if unshare -m --propagation private true 2>/dev/null; then
		unshare -m --propagation private bash -c '
			e=$1; shift; n=$1; shift
			for ((i = 0; i < n; i++)); do
				mount --bind "$e" "$1" || exit 99; shift
			done
			exec "$@"' _ "$T/empty" ${#hidden[@]} ${hidden[@]+"${hidden[@]}"} "$@"
	else
		echo "note: no mount namespace here: run.sh sees this machine's libraries too"
		"$@"
	fi
}
# Shown hidden: kvfs-mount cannot load without the bundle's path.
if isolated env -u LD_LIBRARY_PATH "$B/bin/kvfs-mount" --version >"$T/plain.log" 2>&1; then
	grep -q 'no mount namespace' "$T/plain.log" ||
		bad "kvfs-mount loads with the system's libraries hidden and no bundle path"
else
	echo "ok: with the system's copies hidden ($(echo ${#hidden[@]}) files), kvfs-mount needs the bundle: $(grep -m1 'error' "$T/plain.log")"
fi

check_summary() { # outdir log
	local o=$1 log=$2
	[ -f "$o/summary.txt" ] || { bad "no $o/summary.txt"; return; }
	if grep -E 'unbound variable|syntax error|command not found|Segmentation|Aborted|core dumped' "$log"; then
		bad "run.sh printed shell or crash errors (above)"
	fi
	# every step: ok, or SKIPPED with a reason
	while read -r name st why; do
		case $st in
		ok) ;;
		SKIPPED) [ -n "$why" ] || bad "step $name skipped without a reason" ;;
		*) bad "step $name: $st $why" ;;
		esac
	done < <(sed -n '/^steps:/,/^files:/p' "$o/summary.txt" | sed '1d;$d')
}
step_is() { # outdir step status [reason-pattern]
	local l
	l=$(sed -n "s/^  $2  *//p" "$1/summary.txt")
	case $l in
	"$3"*) [ -z "${4:-}" ] || echo "$l" | grep -q "$4" ||
		bad "step $2: '$l' does not say '$4'" ;;
	*) bad "step $2: '$l', want $3" ;;
	esac
}

O1=$T/out-standin
isolated env KVFS_CUDART="$B/tests/libfakecudart.so" \
	bash "$B/run.sh" --quick --budget 200 --skip l2bench "$O1" >"$T/run1.log" 2>&1
rc=$?
cat "$T/run1.log"
[ $rc = 0 ] || bad "run.sh on the stand-in exited $rc"
check_summary "$O1" "$T/run1.log"
for s in unit-gpu gpu-nodev gpu-sim gpu-xfer-sim gpu-ipc gpubench \
	bench-threads xbench-threads; do
	step_is "$O1" $s ok
done
step_is "$O1" gpu-xfer SKIPPED "stand-in"
# issue 26's benches ride along (redis-server is bundled where the machine
# building it has one; make test's machine has). kvfs_l2bench is left out
# here (a minute even with --quick: restarts and alternating rounds); the
# load check above ran it far enough to know it loads.
for s in ibench pbench; do step_is "$O1" $s ok; done
step_is "$O1" l2bench SKIPPED "left out"
if [ -x "$B/bin/redis-server" ]; then step_is "$O1" l3bench ok; fi
grep -q 'batched lookup of 1,024 keys' "$O1"/*-ibench.txt || bad "no kvfs_ibench targets"
grep -q 'libraries: every program of the bundle loads' "$O1/checks.txt" ||
	bad "run.sh's load check did not pass with the system's copies hidden"
for f in "$O1"/*-bench-threads.txt "$O1"/*-xbench-threads.txt; do
	grep -q '^scaling: throughput over 1 thread' "$f" || bad "$f has no scaling table"
	grep -q ' 16 thr' "$f" || bad "$f has no 16-thread column"
	grep -q 'tmpfs' "$f" || bad "$f does not compare with tmpfs"
done
grep -q 'IPC handle D2D' "$O1"/*-gpubench.txt || bad "no kvfs_gpubench table"
if [ ! -e /proc/driver/nvidia/version ]; then
	grep -q 'MISSING: the NVIDIA driver' "$O1/checks.txt" ||
		bad "no driver here, and run.sh did not say so"
fi

O2=$T/out-nofuse
isolated env KVFS_BUNDLE_DEV_FUSE=/nonexistent \
	KVFS_BUNDLE_NVIDIA_SMI=/nonexistent/nvidia-smi \
	KVFS_BUNDLE_DEV_NVIDIA=/nonexistent/nvidia \
	KVFS_BUNDLE_PROC_NVIDIA=/nonexistent/proc \
	bash "$B/run.sh" --quick --budget 60 "$O2" >"$T/run2.log" 2>&1
rc=$?
cat "$T/run2.log"
[ $rc = 0 ] || bad "run.sh without /dev/fuse and a driver exited $rc"
check_summary "$O2" "$T/run2.log"
grep -q -- '- /nonexistent (the FUSE device)' "$O2/summary.txt" ||
	bad "the summary does not say /dev/fuse is missing"
grep -q -- '- the NVIDIA driver' "$O2/summary.txt" ||
	bad "the summary does not say the driver is missing"
for s in gpu-sim gpu-xfer-sim gpu-ipc gpubench bench-threads xbench-threads; do
	step_is "$O2" $s SKIPPED "no /nonexistent\|no GPU"
done
step_is "$O2" unit-gpu ok
step_is "$O2" gpu-nodev ok

# A bundle that lacks a library (libzstd, which kvfs-mount and the tests
# load): the check names it, and what cannot load is skipped, not run.
cp -r "$B" "$T/broken"
rm "$T/broken/lib/libzstd.so.1"
O3=$T/out-broken
isolated env KVFS_CUDART="$T/broken/tests/libfakecudart.so" \
	bash "$T/broken/run.sh" --quick --budget 60 "$O3" >"$T/run3.log" 2>&1
rc=$?
[ $rc = 0 ] || { cat "$T/run3.log"; bad "run.sh with a library missing exited $rc"; }
check_summary "$O3" "$T/run3.log"
grep -q 'libraries: kvfs-mount: .*libzstd.so.1' "$O3/summary.txt" ||
	bad "the summary does not say kvfs-mount lacks libzstd.so.1"
for s in gpu-nodev gpu-sim gpu-ipc gpubench bench-threads xbench-threads; do
	step_is "$O3" $s SKIPPED "kvfs-mount cannot load"
done
echo "ok: a bundle without libzstd.so.1: $(grep -c SKIPPED "$O3/summary.txt") steps skipped, saying why"

[ $fail = 0 ] && echo "PASS: gpu-bundle builds, loads from itself alone, and run.sh runs or skips every step saying why"
exit $fail
