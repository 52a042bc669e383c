# env.sh - source it from bash (". /path/to/gpu-bundle/env.sh") to use the
# bundle by hand: PATH gets bin/ (kvfs-mount, kvfsctl, fusermount3, the
# benches), LD_LIBRARY_PATH the bundle's libraries, and the variables the
# tests, benches and python/kvfs/ read (KVFS_MOUNT_BIN, KVFS_CTL_BIN,
# KVFS_FAKECUDART, KVFS_LIB, PYTHONPATH). run.sh sources it with --no-ld and
# gives the library path to the bundle's programs alone (KVFS_BUNDLE_LD).
#
# libstdc++: the bundle's (lib/cxx) where this glibc is as new as it needs
# (MANIFEST GLIBC_NEEDED_CXX, newer than the rest needs), else the
# machine's own if it has GLIBCXX_NEEDED (KVFS_BUNDLE_CXX says which:
# bundle, system, or none when neither will do).
# Do not start python/torch with this LD_LIBRARY_PATH: an engine needs only
# KVFS_LIB (libkvfs links libc alone).
KVFS_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KVFS_BUNDLE_LD=$KVFS_BUNDLE/lib
_kb_m() { sed -n "s/^$1=//p" "$KVFS_BUNDLE/MANIFEST" 2>/dev/null | head -1; }
_kb_glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print $2 }')
_kb_cxx=$(_kb_m GLIBC_NEEDED_CXX)
_kb_sys=$( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null) |
	awk '/libstdc\+\+\.so\.6 .*x86-64/ { print $NF; exit }')
if [ -n "$_kb_glibc" ] && [ -n "$_kb_cxx" ] &&
	[ "$(printf '%s\n%s\n' "$_kb_glibc" "$_kb_cxx" | sort -V | head -1)" = "$_kb_cxx" ]; then
	KVFS_BUNDLE_LD=$KVFS_BUNDLE_LD:$KVFS_BUNDLE/lib/cxx KVFS_BUNDLE_CXX=bundle
elif [ -n "$_kb_sys" ] && grep -qa "GLIBCXX_$(_kb_m GLIBCXX_NEEDED)" "$_kb_sys"; then
	KVFS_BUNDLE_CXX=system
else
	KVFS_BUNDLE_LD=$KVFS_BUNDLE_LD:$KVFS_BUNDLE/lib/cxx KVFS_BUNDLE_CXX=none
fi
unset -f _kb_m
unset _kb_glibc _kb_cxx _kb_sys
KVFS_BUNDLE_LD=$KVFS_BUNDLE_LD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export KVFS_BUNDLE KVFS_BUNDLE_LD KVFS_BUNDLE_CXX
export PATH=$KVFS_BUNDLE/bin:$PATH
export KVFS_MOUNT_BIN=$KVFS_BUNDLE/bin/kvfs-mount
export KVFS_CTL_BIN=$KVFS_BUNDLE/bin/kvfsctl
export KVFS_FAKECUDART=$KVFS_BUNDLE/tests/libfakecudart.so
export KVFS_LIB=$KVFS_BUNDLE/lib/libkvfs.so.0
export PYTHONPATH=$KVFS_BUNDLE/python${PYTHONPATH:+:$PYTHONPATH}
[ "${1:-}" = --no-ld ] || export LD_LIBRARY_PATH=$KVFS_BUNDLE_LD
