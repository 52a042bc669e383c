#!/usr/bin/env bash
# run.sh - kvfs's GPU tests and benches, in one command, on a machine that
# has the NVIDIA driver and CUDA and nothing of kvfs's dependencies (make
# gpu-bundle builds this folder; copy it there whole and run as root):
#
#   ./run.sh [options] OUTDIR
#
# 1. Checks, each saying plainly what is missing: the glibc the bundle needs
#    (MANIFEST), that every program of the bundle loads, the NVIDIA driver
#    and a device (nvidia-smi, /proc/driver/nvidia, /dev/nvidia*), /dev/fuse
#    and the FUSE kernel module, and a CUDA runtime the driver can run
#    (bin/kvfs_cudacheck on each libcudart found: $KVFS_CUDART, the
#    loader's cache, /usr/local/cuda*/lib64, pip's nvidia-cuda-runtime and
#    torch/lib, then the bundle's lib/cuda; the first that works is used,
#    through CUDA_HOME, so the programs never see KVFS_CUDART).
# 2. Steps, each with a deadline: the GPU tests (test_gpu, test_gpu_nodev,
#    test_gpu_sim and test_gpu_xfer on the stand-in runtime, test_gpu_ipc
#    and test_gpu_xfer on the GPU), kvfs_gpubench, and the thread-scaling
#    runs of kvfs_bench (read/write) and kvfs_xbench (batched transfers) at
#    1,2,4,8,16 threads, each against tmpfs in the same run; then issue
#    26's benches of the other paths: kvfs_ibench (batched lookup against
#    stat), kvfs_l2bench (L2 against O_DIRECT pread), kvfs_l3bench (L3
#    against raw GETs; needs the bundled redis-server), kvfs_pbench
#    (the plain read path with and without the preload library) and
#    kvfs_bench again with -o cache=passthrough (1, 2 and 4 threads).
# Output: OUTDIR/checks.txt, OUTDIR/NN-step.txt per step (its command,
# output, exit status and time: every table), OUTDIR/summary.txt (printed at
# the end too): per step ok, FAILED (exit N), TIMEOUT or SKIPPED and why.
# A step that needs what a check found missing is skipped saying so. The
# whole run ends within --budget seconds (default 450, under 8 minutes):
# each step's deadline is cut to what is left, and a step that would get
# under 15 s is skipped. Exit status: 0 when no step failed or timed out.
#
# Options:
#   --budget S                  seconds for the whole run (450)
#   --threads LIST              the scaling runs' thread counts (1,2,4,8,16)
#   --bench-mib N --bench-trials N          kvfs_bench (256, 3)
#   --xbench-mib N --xbench-trials N        kvfs_xbench (256, 3)
#   --gpubench-chunks N --gpubench-rounds N kvfs_gpubench (64, 3)
#   --quick                     smallest sizes, one trial (a smoke run)
#   --skip STEP[,STEP...]       leave steps out (names as in summary.txt)
#   --only STEP[,STEP...]       run these steps alone
#   --l2-dir DIR                kvfs_l2bench's L2 and O_DIRECT files
#                               (a disk, not tmpfs: $TMPDIR or /var/tmp)
#   -v, --verbose               print every step's output too
# Environment:
#   KVFS_CUDART=PATH            the libcudart to use; tests/libfakecudart.so
#                               is the stand-in (no GPU: every step runs on
#                               it and the numbers mean nothing)
#   KVFS_BUNDLE_DEV_FUSE=PATH   checked instead of /dev/fuse
#   KVFS_BUNDLE_DEV_NVIDIA=P    device nodes P0, Pctl, P-uvm (/dev/nvidia)
#   KVFS_BUNDLE_NVIDIA_SMI=CMD  instead of nvidia-smi
#   KVFS_BUNDLE_PROC_NVIDIA=P   instead of /proc/driver/nvidia
# (the last four let a test simulate a machine that lacks them).
set -u
B=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T0=$(date +%s)

budget=450 threads=1,2,4,8,16 verbose=0 skip=,
bench_mib=256 bench_trials=3 xbench_mib=256 xbench_trials=3
gb_chunks=64 gb_rounds=3
ibench_iters=200 l2_args= l3_args= pb_args= only=
l2_dir=${TMPDIR:-/var/tmp}
usage() {
	sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case $1 in
	--budget) budget=$2; shift ;;
	--threads) threads=$2; shift ;;
	--bench-mib) bench_mib=$2; shift ;;
	--bench-trials) bench_trials=$2; shift ;;
	--xbench-mib) xbench_mib=$2; shift ;;
	--xbench-trials) xbench_trials=$2; shift ;;
	--gpubench-chunks) gb_chunks=$2; shift ;;
	--gpubench-rounds) gb_rounds=$2; shift ;;
	--quick)
		bench_mib=4 bench_trials=1 xbench_mib=32 xbench_trials=1
		gb_chunks=4 gb_rounds=1 ibench_iters=5 l2_args=--quick
		l3_args="--n 8 --trials 1" pb_args="--mib 4 --rounds 1" ;;
	--skip) skip=,$2, ; shift ;;
	--only) only=,$2, ; shift ;;
	--l2-dir) l2_dir=$2; shift ;;
	-v | --verbose) verbose=1 ;;
	-h | --help) usage ;;
	-*) echo "run.sh: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
	shift
done
[ $# -eq 1 ] || usage
OUT=$1
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
case $budget in '' | *[!0-9]*) echo "run.sh: --budget wants seconds" >&2; exit 2 ;; esac

# A copy that lost the modes (a plain file transfer) still runs.
chmod a+x "$B"/bin/* "$B"/tests/* 2>/dev/null
. "$B/env.sh" --no-ld
CHECKS=$OUT/checks.txt SUMMARY=$OUT/summary.txt
: >"$CHECKS"
missing=() # what the checks found missing, for the summary
say() { printf '%s\n' "$*" | tee -a "$CHECKS"; }
miss() { missing+=("$1"); say "MISSING: $1"; }
left() { echo $((budget - ($(date +%s) - T0))); }
manifest() { sed -n "s/^$1=//p" "$B/MANIFEST" 2>/dev/null | head -1 | tr -d "'"; }
ver_ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$2" ]; }
# The bundle's programs with the bundle's libraries; nothing else gets them.
bx() { LD_LIBRARY_PATH=$KVFS_BUNDLE_LD "$@"; }

# with_deadline SECS CMD...: timeout(1), or a watchdog where it is missing.
# Either way the whole process group of the step is signalled.
with_deadline() {
	local secs=$1
	shift
	if command -v timeout >/dev/null; then
		timeout -k 10 "$secs" "$@"
		return
	fi
	"$@" &
	local pid=$! rc
	(sleep "$secs"; kill -TERM "$pid" 2>/dev/null; sleep 10
		kill -KILL "$pid" 2>/dev/null) &
	local dog=$!
	wait "$pid"
	rc=$?
	kill "$dog" 2>/dev/null
	wait "$dog" 2>/dev/null
	[ $rc -eq 143 ] || [ $rc -eq 137 ] && rc=124
	return $rc
}

say "kvfs gpu-bundle run.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${budget}s"
say "bundle: $B ($(manifest COMMIT), built with CUDA $(manifest CUDA_BUILD) on $(manifest BUILT_ON))"
say "machine: $(uname -n), kernel $(uname -r), $(nproc 2>/dev/null || echo '?') CPUs," \
	"$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null)," \
	"$( (. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-?}") || echo '?')"
[ "$(id -u)" = 0 ] || say "note: not root: mounting needs root here (the bundle's fusermount3 is not setuid)"

# ------------------------------------------------------------ glibc
need=$(manifest GLIBC_NEEDED) need_cxx=$(manifest GLIBC_NEEDED_CXX)
have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')
[ -n "$have" ] || have=$(ldd --version 2>/dev/null | head -1 | grep -o '[0-9][0-9.]*$')
if [ -z "$have" ]; then
	say "glibc: version unknown (no getconf, no ldd); the bundle needs >= $need"
elif ver_ge "$have" "$need"; then
	say "glibc: $have (the bundle needs >= $need): ok"
else
	miss "glibc >= $need (this machine has $have): no program of the bundle can load"
fi
case $KVFS_BUNDLE_CXX in
bundle) say "libstdc++: the bundle's (lib/cxx, needs glibc >= $need_cxx)" ;;
system) say "libstdc++: the machine's (the bundle's needs glibc >= $need_cxx)" ;;
*) miss "a libstdc++ that loads (the bundle's needs glibc >= $need_cxx; the machine's is missing or lacks GLIBCXX_$(manifest GLIBCXX_NEEDED))" ;;
esac

# ------------------------------------------------------------ loading
# Every program resolves every library (ldd, else the dynamic loader).
list_libs() {
	if command -v ldd >/dev/null; then
		bx ldd "$1" 2>&1
	else
		local ld
		for ld in /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-x86-64.so.2; do
			[ -x "$ld" ] && { bx "$ld" --list "$1" 2>&1; return; }
		done
		echo "(no ldd and no dynamic loader found)"
	fi
}
bad_load=() bad_names=,
for f in "$B"/bin/* "$B"/tests/* "$B"/lib/libkvfs.so.0; do
	[ -f "$f" ] || continue
	out=$(list_libs "$f")
	if echo "$out" | grep -q 'not found\|No such file\|version `\|error while loading'; then
		bad_names+="$(basename "$f"),"
		bad_load+=("$(basename "$f"): $(echo "$out" | grep 'not found\|No such file\|version `\|error while loading' | head -2 | tr -s ' \t' ' ' | tr '\n' ';')")
	fi
done
if [ ${#bad_load[@]} -eq 0 ]; then
	say "libraries: every program of the bundle loads"
else
	for m in ${bad_load[@]+"${bad_load[@]}"}; do miss "libraries: $m"; done
fi

# ------------------------------------------------------------ driver
SMI=${KVFS_BUNDLE_NVIDIA_SMI:-nvidia-smi}
DEVN=${KVFS_BUNDLE_DEV_NVIDIA:-/dev/nvidia}
PROCN=${KVFS_BUNDLE_PROC_NVIDIA:-/proc/driver/nvidia}
driver=0 device=0 smi_cuda=
if [ -r "$PROCN/version" ]; then
	driver=1
	say "driver: $(head -1 "$PROCN/version" | tr -s ' \t' ' ')"
fi
if command -v "$SMI" >/dev/null 2>&1; then
	if q=$(with_deadline 20 "$SMI" --query-gpu=index,name,driver_version,memory.total,pci.bus_id \
		--format=csv,noheader 2>&1) && [ -n "$q" ]; then
		driver=1 device=1
		echo "$q" | while read -r l; do say "gpu: $l"; done
		smi_cuda=$(with_deadline 20 "$SMI" 2>/dev/null | grep -o 'CUDA Version: *[0-9.]*' | grep -o '[0-9.]*$')
		[ -n "$smi_cuda" ] && say "driver: supports CUDA $smi_cuda (nvidia-smi)"
	else
		say "nvidia-smi: failed: $(echo "$q" | head -2 | tr '\n' ' ')"
	fi
else
	say "nvidia-smi: not found ($SMI)"
fi
nodes=$(ls -d "$DEVN"[0-9]* "${DEVN}ctl" "${DEVN}-uvm" 2>/dev/null | tr '\n' ' ')
if [ ! -e "${DEVN}-uvm" ] && [ -e "${DEVN}ctl" ] && [ -z "${KVFS_BUNDLE_DEV_NVIDIA:-}" ] &&
	command -v nvidia-modprobe >/dev/null; then
	# CUDA needs /dev/nvidia-uvm; nvidia-modprobe creates it (as root).
	nvidia-modprobe -u -c=0 >/dev/null 2>&1 &&
		say "driver: created ${DEVN}-uvm with nvidia-modprobe -u -c=0"
	nodes=$(ls -d "$DEVN"[0-9]* "${DEVN}ctl" "${DEVN}-uvm" 2>/dev/null | tr '\n' ' ')
fi
say "device nodes: ${nodes:-none} (${DEVN}*)"
ls -d "$DEVN"[0-9]* >/dev/null 2>&1 && device=1
[ -e "${DEVN}ctl" ] && driver=1
[ $driver = 1 ] || miss "the NVIDIA driver (no $PROCN/version, no working $SMI, no ${DEVN}ctl)"
[ $driver = 0 ] || [ $device = 1 ] || miss "an NVIDIA device (nvidia-smi lists none, no ${DEVN}0)"
[ $device = 0 ] || [ -e "${DEVN}-uvm" ] || say "warning: no ${DEVN}-uvm: CUDA will not initialize (nvidia-modprobe -u -c=0, or modprobe nvidia-uvm)"

# ------------------------------------------------------------ FUSE
DEVF=${KVFS_BUNDLE_DEV_FUSE:-/dev/fuse}
fusemod=0 fuse=0 fuse_why=
if grep -qw fuse /proc/filesystems 2>/dev/null || [ -d /sys/module/fuse ]; then
	fusemod=1
elif command -v modprobe >/dev/null && modprobe fuse 2>/dev/null &&
	grep -qw fuse /proc/filesystems; then
	fusemod=1
	say "fuse: loaded the kernel module (modprobe fuse)"
fi
if [ $fusemod = 1 ]; then
	say "fuse: the kernel module is there (/proc/filesystems)"
else
	fuse_why="no FUSE kernel module"
	miss "the FUSE kernel module (no 'fuse' in /proc/filesystems; modprobe fuse failed or is absent)"
fi
if [ ! -e "$DEVF" ] && [ -z "${KVFS_BUNDLE_DEV_FUSE:-}" ] && [ $fusemod = 1 ] &&
	[ "$(id -u)" = 0 ]; then
	mknod -m 666 /dev/fuse c 10 229 2>/dev/null &&
		say "fuse: created /dev/fuse (mknod c 10 229)"
fi
if [ ! -e "$DEVF" ]; then
	fuse_why="no $DEVF${fuse_why:+, $fuse_why}"
	miss "$DEVF (the FUSE device): every step that mounts kvfs is skipped"
elif [ ! -c "$DEVF" ] || [ ! -r "$DEVF" ] || [ ! -w "$DEVF" ]; then
	fuse_why="$DEVF not usable${fuse_why:+, $fuse_why}"
	miss "$DEVF is not a character device this user can read and write"
else
	[ $fusemod = 1 ] && fuse=1
	say "fuse: $DEVF: ok"
fi

# ------------------------------------------------------------ CUDA runtime
# Candidates, in order; the first kvfs_cudacheck accepts is used.
cands=()
add_cand() {
	local r c
	[ -f "$1" ] || return 0
	r=$(readlink -f "$1")
	for c in ${cands[@]+"${cands[@]}"}; do
		[ "$(readlink -f "$c")" = "$r" ] && return 0
	done
	cands+=("$1")
}
gpu=0 standin=0 gpu_why= gpu_short= cudart= drv_ver=0
if [ -n "${KVFS_CUDART:-}" ]; then
	if [ ! -f "$KVFS_CUDART" ]; then
		gpu_why="KVFS_CUDART=$KVFS_CUDART: no such file" gpu_short="no file KVFS_CUDART=$KVFS_CUDART"
		miss "$gpu_why"
	elif grep -qa fakecuda_alloc_size "$KVFS_CUDART"; then
		standin=1
	else
		add_cand "$KVFS_CUDART"
	fi
else
	for c in $( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null) |
		awk '/libcudart\.so\.[0-9]/ { print $NF }' | sort -rV); do
		add_cand "$c"
	done
	for c in ${CUDA_HOME:+$CUDA_HOME/lib64/libcudart.so.*} \
		/usr/local/cuda/lib64/libcudart.so.* /usr/local/cuda-*/lib64/libcudart.so.* \
		/usr/lib/x86_64-linux-gnu/libcudart.so.* /usr/lib64/libcudart.so.*; do
		add_cand "$c"
	done
	# pip wheels (PyTorch's nvidia-cuda-runtime-cuXX, torch/lib)
	if command -v python3 >/dev/null; then
		for d in $(with_deadline 20 python3 -c 'import site, sys
print("\n".join(site.getsitepackages() + [site.getusersitepackages()] + sys.path))' 2>/dev/null |
			sort -u); do
			for c in "$d"/nvidia/cuda_runtime/lib/libcudart.so.* "$d"/nvidia/cu*/lib/libcudart.so.* \
				"$d"/torch/lib/libcudart*.so*; do
				add_cand "$c"
			done
		done
	fi
	add_cand "$B/$(manifest CUDART_FALLBACK)"
fi
if [ $standin = 1 ]; then
	out=$(KVFS_CUDART=$KVFS_CUDART with_deadline 30 env LD_LIBRARY_PATH="$KVFS_BUNDLE_LD" "$B/bin/kvfs_cudacheck" 2>&1)
	echo "$out" | sed 's/^/  /' >>"$CHECKS"
	if echo "$out" | grep -q '^verdict: ok'; then
		gpu=1
		say "cuda: the STAND-IN runtime $KVFS_CUDART (KVFS_CUDART): the GPU steps run on it; numbers mean nothing"
	else
		v=$(echo "$out" | sed -n 's/^verdict: //p')
		gpu_why="the stand-in runtime does not work: ${v:-$(echo "$out" | tail -1)}"
		gpu_short=$gpu_why
		miss "cuda: $gpu_why"
	fi
elif [ -z "$gpu_why" ]; then
	say "cuda: runtimes found: ${cands[*]:-none}"
	verdicts=
	for c in ${cands[@]+"${cands[@]}"}; do
		t=$(($(left) - 20))
		[ $t -lt 40 ] || t=40
		if [ $t -lt 10 ]; then
			verdicts+="${verdicts:+
}out of time before trying $c"
			break
		fi
		out=$(KVFS_CUDART=$c with_deadline $t env LD_LIBRARY_PATH="$KVFS_BUNDLE_LD" "$B/bin/kvfs_cudacheck" 2>&1)
		rc=$?
		echo "  kvfs_cudacheck with $c (exit $rc):" >>"$CHECKS"
		echo "$out" | sed 's/^/    /' >>"$CHECKS"
		v=$(echo "$out" | sed -n 's/^verdict: //p')
		[ -n "$v" ] || v="exit $rc: $(echo "$out" | tail -1)"
		say "cuda: $c: $v"
		dv=$(echo "$out" | sed -n 's/^DRIVER_VERSION=//p')
		[ -n "$dv" ] && [ "$dv" -gt "$drv_ver" ] && drv_ver=$dv
		if [ $rc = 0 ]; then
			cudart=$c gpu=1
			break
		fi
		verdicts+="${verdicts:+
}${v#MISSING: }"
	done
	if [ $gpu = 1 ]; then
		# CUDA_HOME, not KVFS_CUDART: the tests read KVFS_CUDART as "the
		# stand-in" (and skip kvfs_devcheck); gpu_rt_load tries
		# $CUDA_HOME/lib64/libcudart.so before the loader's path.
		mkdir -p "$OUT/.cudart/lib64"
		ln -sfn "$cudart" "$OUT/.cudart/lib64/libcudart.so"
		export CUDA_HOME=$OUT/.cudart
		say "cuda: using $cudart (through CUDA_HOME=$CUDA_HOME)"
	else
		# the same verdict from several runtimes is said once
		gpu_why="no CUDA runtime this machine can run: $(echo "${verdicts:-no libcudart found}" |
			awk '!seen[$0]++' | paste -sd '|' | sed 's/|/; /g')"
		gpu_short="missing $(echo "${verdicts:-a CUDA runtime (no libcudart found)}" | head -1 | sed 's/ (.*//')"
		miss "cuda: $gpu_why"
	fi
	unset KVFS_CUDART
fi
# kvfs_devcheck links the CUDA it was built with; an older driver cannot
# run it, and test_gpu_ipc then says so instead of failing.
cb=$(manifest CUDA_BUILD)
if [ $standin = 0 ] && [ $gpu = 1 ] && [ -n "$cb" ] && [ "$drv_ver" -gt 0 ]; then
	dvs=$((drv_ver / 1000)).$((drv_ver % 1000 / 10))
	if ! ver_ge "$dvs" "$cb"; then
		export KVFS_DEVCHECK_SKIP="built with CUDA $cb, the driver supports CUDA $dvs"
		say "note: kvfs_devcheck not run: $KVFS_DEVCHECK_SKIP"
	fi
fi

# ------------------------------------------------------------ tmpfs
shm=/dev/shm tmpfs_mnt= shm_own=
if [ "$(stat -f -c %T "$shm" 2>/dev/null)" = tmpfs ]; then
	# a folder of our own: a bench killed at its deadline leaves files
	shm_own=$(mktemp -d /dev/shm/kvfs-bundle.XXXXXX) && shm=$shm_own
else
	shm=$(mktemp -d /tmp/kvfs-bundle-tmpfs.XXXXXX)
	if mount -t tmpfs -o size=8g tmpfs "$shm" 2>/dev/null; then
		tmpfs_mnt=$shm
		say "tmpfs: /dev/shm is not a tmpfs; mounted one on $shm"
	else
		rmdir "$shm"
		shm=
		say "tmpfs: /dev/shm is not a tmpfs and mounting one failed: kvfs_xbench will skip"
	fi
fi
[ -n "$shm" ] && export KVFS_TMPFS_DIR=$shm
# The steps' mounts and files go under WORK (their TMPDIR), so a mount a
# step leaves behind is told from anyone else's by its path.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kvfs-bundle.XXXXXX") || exit 2
export TMPDIR=$WORK
cleanup() {
	[ -n "$tmpfs_mnt" ] && umount "$tmpfs_mnt" 2>/dev/null && rmdir "$tmpfs_mnt"
	rm -rf "$OUT/.cudart"
	rm -rf --one-file-system "$WORK" ${shm_own:+"$shm_own"} 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------ steps
kvfs_mounts() { # ours: fuse.kvfs mounts under WORK
	awk -v w="$WORK/" '$3 == "fuse.kvfs" && index($2, w) == 1 { print $2 }' /proc/mounts | sort
}
results=() nstep=0 nfail=0
record() { # name status detail
	results+=("$(printf '%-16s %-9s %s' "$1" "$2" "$3")")
	printf '%-16s %-9s %s\n' "$1" "$2" "$3"
}
# step NAME DEADLINE NEEDS CMD...: NEEDS is a comma list of fuse (mounts
# kvfs), mount (runs kvfs-mount), gpu, real (a real GPU, not the stand-in).
step() {
	local name=$1 limit=$2 needs=$3 why= t rc t1 f before after stale a
	shift 3
	nstep=$((nstep + 1))
	f=$OUT/$(printf '%02d' $nstep)-$name.txt
	case $skip in *,"$name",*) why="left out (--skip)" ;; esac
	[ -z "$only" ] || case $only in *,"$name",*) ;; *) why="left out (--only)" ;; esac
	for a in "$@"; do
		case $a in "$B"/*) case $bad_names in *,"$(basename "$a")",*)
			[ -n "$why" ] || why="$(basename "$a") cannot load here (see checks.txt)" ;;
			esac ;; esac
	done
	[ -z "$why" ] && case ,$needs, in *,fuse,*) [ $fuse = 1 ] || why=$fuse_why ;; esac
	[ -z "$why" ] && case ,$needs, in *,fuse,* | *,mount,*)
		case $bad_names in *,kvfs-mount,*)
			why="kvfs-mount cannot load here (see checks.txt)" ;;
		esac ;; esac
	[ -z "$why" ] && case ,$needs, in *,gpu,*) [ $gpu = 1 ] ||
		why="no GPU: $gpu_short" ;; esac
	[ -z "$why" ] && case ,$needs, in *,real,*) [ $standin = 0 ] ||
		why="on the stand-in runtime (its steps cover this)" ;; esac
	t=$(left)
	t=$((t - 10))
	[ $t -lt "$limit" ] || t=$limit
	[ -z "$why" ] && [ $t -lt 15 ] && why="out of time (${t}s left of the ${budget}s budget)"
	if [ -n "$why" ]; then
		echo "SKIPPED: $why" >"$f"
		record "$name" SKIPPED "$why"
		return
	fi
	before=$(kvfs_mounts)
	{
		echo "\$ $*"
		echo "# deadline ${t}s; CUDA_HOME=${CUDA_HOME:-} KVFS_CUDART=${KVFS_CUDART:-}"
	} >"$f"
	local s=$(date +%s.%N)
	if [ $verbose = 1 ]; then
		with_deadline "$t" env LD_LIBRARY_PATH="$KVFS_BUNDLE_LD" "$@" 2>&1 | tee -a "$f"
		rc=${PIPESTATUS[0]}
	else
		with_deadline "$t" env LD_LIBRARY_PATH="$KVFS_BUNDLE_LD" "$@" >>"$f" 2>&1
		rc=$?
	fi
	t1=$(awk -v s="$s" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
	# a daemon signalled at the deadline may still be unmounting: 5 s
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		after=$(kvfs_mounts)
		stale=$(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')
		[ -n "${stale// /}" ] && [ $rc != 0 ] || break
		sleep 0.5
	done
	if [ -n "${stale// /}" ]; then
		for m in $stale; do bx fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m"; done
		echo "# left kvfs mounted on $stale (detached)" >>"$f"
	fi
	echo "# exit $rc after ${t1}s" >>"$f"
	case $rc in
	0) record "$name" ok "${t1}s${stale:+, left a mount (detached)}" ;;
	77) record "$name" SKIPPED "$(grep -m1 -i 'skipped' "$f" | cut -c1-150) (${t1}s)" ;;
	124 | 137) nfail=$((nfail + 1)); record "$name" TIMEOUT "after ${t}s (deadline)" ;;
	*) nfail=$((nfail + 1))
		record "$name" FAILED "exit $rc after ${t1}s: $(grep -m1 'FAIL\|ERROR\|error' "$f" | cut -c1-120)" ;;
	esac
}

echo
echo "=== steps (output in $OUT)"
T=$B/tests
step unit-gpu 60 "" "$T/test_gpu"
step gpu-nodev 60 mount "$T/test_gpu_nodev"
step gpu-sim 60 fuse env KVFS_CUDART= "$T/test_gpu_sim"
step gpu-xfer-sim 60 fuse env KVFS_CUDART= KVFS_GPU_REAL= "$T/test_gpu_xfer"
step gpu-ipc 90 fuse,gpu "$T/test_gpu_ipc"
step gpu-xfer 60 fuse,gpu,real env KVFS_GPU_REAL=1 "$T/test_gpu_xfer"
step gpubench 90 fuse,gpu "$B/bin/kvfs_gpubench" --chunks "$gb_chunks" --rounds "$gb_rounds"
step bench-threads 150 fuse "$B/bin/kvfs_bench" --threads "$threads" \
	--mib "$bench_mib" --trials "$bench_trials"
step xbench-threads 150 fuse "$B/bin/kvfs_xbench" --threads "$threads" \
	--mib "$xbench_mib" --trials "$xbench_trials"
# issue 26's benches of the other paths, each against its medium in the
# same run (on a quiet machine their ratios mean more than on a shared one)
step ibench 90 fuse "$B/bin/kvfs_ibench" -i "$ibench_iters"
step l2bench 150 fuse env TMPDIR="$l2_dir" "$B/bin/kvfs_l2bench" $l2_args
step l3bench 120 fuse "$B/bin/kvfs_l3bench" $l3_args
step pbench 120 fuse env KVFS_BUILD="$B/lib" "$B/bin/kvfs_pbench" $pb_args
# the plain rows with -o cache=passthrough (kvfs-mount(8)): shadows made on
# CPUs to spare; last, so it only takes what the budget has left
step bench-passthrough 120 fuse "$B/bin/kvfs_bench" --threads 1,2,4 \
	--mib "$bench_mib" --trials "$bench_trials" \
	-o l1_size=1G,cache=passthrough

{
	echo "kvfs gpu-bundle run.sh summary ($(manifest COMMIT); $(( $(date +%s) - T0 ))s of ${budget}s)"
	echo "machine: $(uname -n), kernel $(uname -r)"
	if [ $standin = 1 ]; then
		echo "cuda: STAND-IN runtime ($KVFS_CUDART): no real GPU was used"
	elif [ $gpu = 1 ]; then
		echo "cuda: $cudart; $(grep -m1 '^gpu: ' "$CHECKS" || echo 'gpu: ?')"
	fi
	if [ ${#missing[@]} -gt 0 ]; then
		echo "missing:"
		for m in ${missing[@]+"${missing[@]}"}; do echo "  - $m"; done
	else
		echo "missing: nothing"
	fi
	echo "steps:"
	for r in ${results[@]+"${results[@]}"}; do echo "  $r"; done
	echo "files: $OUT"
} >"$SUMMARY"
echo
cat "$SUMMARY"
[ $nfail = 0 ]
