#!/usr/bin/env bash
# test_layers.sh - no two files of kvfs call each other, even through
# others, and no arrow points up the layers (mount -> fs.c -> fs/paths ->
# fs -> events -> tier -> tier/{l2,l3} -> tier/policy -> tier/record ->
# gpu, hash -> lib): tests/layers/filegraph.py reads the plain build's
# object files with nm(1) (file A -> file B when A refers to a global
# symbol B defines) and fails on a cycle or an upward arrow.
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${KVFS_PLAIN_BUILD:-build}
[ -f "$B/tier/tier.o" ] || { echo "FAIL: $B not built (make all)"; exit 1; }
out=$(python3 tests/layers/filegraph.py "$B")
rc=$?
echo "$out"
[ $rc = 0 ] && echo "ok - file graph: no cycle, no upward arrow"
exit $rc
