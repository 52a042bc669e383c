# env.sh - source it from bash (". /path/to/gpu-bundle/env.sh") to use the
# bundle by hand: PATH gets bin/ (kvfs-mount, kvfsctl, fusermount3, the
# benches), LD_LIBRARY_PATH the bundle's libraries, and the variables the
# tests, benches and python/kvfs.py read (KVFS_MOUNT_BIN, KVFS_CTL_BIN,
# KVFS_FAKECUDART, KVFS_LIB, PYTHONPATH). run.sh sources it with --no-ld and
# gives the library path to the bundle's programs alone (KVFS_BUNDLE_LD).
#
# libstdc++: the bundle's (lib/cxx, built for a newer glibc than the rest,
# see MANIFEST) when it loads here, else the machine's own
# (KVFS_BUNDLE_CXX says which: bundle, system, or none when neither loads).
# Do not start python/torch with this LD_LIBRARY_PATH: an engine needs only
# KVFS_LIB (libkvfs links libc alone).
KVFS_BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KVFS_BUNDLE_LD=$KVFS_BUNDLE/lib
if LD_LIBRARY_PATH=$KVFS_BUNDLE_LD:$KVFS_BUNDLE/lib/cxx \
	"$KVFS_BUNDLE/bin/kvfsctl" --version >/dev/null 2>&1; then
	KVFS_BUNDLE_LD=$KVFS_BUNDLE_LD:$KVFS_BUNDLE/lib/cxx KVFS_BUNDLE_CXX=bundle
elif LD_LIBRARY_PATH=$KVFS_BUNDLE_LD "$KVFS_BUNDLE/bin/kvfsctl" --version \
	>/dev/null 2>&1; then
	KVFS_BUNDLE_CXX=system
else
	KVFS_BUNDLE_LD=$KVFS_BUNDLE_LD:$KVFS_BUNDLE/lib/cxx KVFS_BUNDLE_CXX=none
fi
KVFS_BUNDLE_LD=$KVFS_BUNDLE_LD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export KVFS_BUNDLE KVFS_BUNDLE_LD KVFS_BUNDLE_CXX
export PATH=$KVFS_BUNDLE/bin:$PATH
export KVFS_MOUNT_BIN=$KVFS_BUNDLE/bin/kvfs-mount
export KVFS_CTL_BIN=$KVFS_BUNDLE/bin/kvfsctl
export KVFS_FAKECUDART=$KVFS_BUNDLE/tests/libfakecudart.so
export KVFS_LIB=$KVFS_BUNDLE/lib/libkvfs.so.0
export PYTHONPATH=$KVFS_BUNDLE/python${PYTHONPATH:+:$PYTHONPATH}
[ "${1:-}" = --no-ld ] || export LD_LIBRARY_PATH=$KVFS_BUNDLE_LD
