#!/usr/bin/env bash
# test_libkvfs_abi.sh - libkvfs is the client library and only that:
#   1. libkvfs.so exports exactly the calls listed in lib/libkvfs.map (all
#      kvfs_*, each under its version node), its soname is
#      libkvfs.so.0, and it needs libc alone (no hiredis, uring, zstd,
#      xxhash, fuse);
#   2. libkvfs.a's only global symbols are the same calls;
#   3. an engine that defines its own tier_init, l2_open, gpu_rt_load and
#      hashkey_checksum links with libkvfs.a and with libkvfs.so and runs
#      (no collision with kvfs's internals), and computes the same key as
#      kvfsctl hash;
#   4. the pkg-config file names no private library but -pthread.
# Uses the plain build ($KVFS_PLAIN_BUILD, default build/).
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${KVFS_PLAIN_BUILD:-build}
T=$(mktemp -d /tmp/kvfs-abi.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
for f in "$B/libkvfs.so" "$B/libkvfs.a" "$B/kvfs.pc"; do
	[ -e "$f" ] || { echo "FAIL: $f not built (make all)"; exit 1; }
done

want=$(sed -n 's/^[[:space:]]*\(kvfs_[a-z0-9_]*\);.*/\1/p' lib/libkvfs.map | sort)
[ "$(echo "$want" | wc -l)" -ge 30 ] || bad "lib/libkvfs.map lists too few calls"
# every call kvfs.h declares is in the map, and nothing else
decl=$(grep -o '^[a-z][a-z0-9_ *]*\bkvfs_[a-z0-9_]*(' include/kvfs.h |
	grep -o 'kvfs_[a-z0-9_]*(' | tr -d '(' | sort -u)
[ "$decl" = "$want" ] || bad "kvfs.h and libkvfs.map differ: $(diff <(echo "$decl") <(echo "$want") | grep '^[<>]' | tr '\n' ' ')"

# 1. the shared library
got=$(nm -D --defined-only "$B/libkvfs.so" | awk '$2 != "A" { print $3 }' |
	sed 's/@.*//' | sort)
[ "$got" = "$want" ] || bad "libkvfs.so exports other than the map: $(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | head -10 | tr '\n' ' ')"
# each call under the version node the map gives it
nver=0
while read -r node syms; do
	for f in $syms; do
		nm -D --defined-only "$B/libkvfs.so" | grep -q " $f@@$node\$" ||
			bad "$f is not exported as $f@@$node"
		nver=$((nver + 1))
	done
done < <(awk '/^KVFS_[0-9.]* *\{/ { node = $1 } /^\t\tkvfs_/ { sub(";", "", $1); s[node] = s[node] " " $1 } END { for (n in s) print n, s[n] }' lib/libkvfs.map)
[ "$nver" = "$(echo "$want" | wc -l)" ] || bad "$nver calls under version nodes, $(echo "$want" | wc -l) in the map"
soname=$(readelf -d "$B/libkvfs.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = libkvfs.so.0 ] || bad "soname is '$soname', want libkvfs.so.0"
needed=$(readelf -d "$B/libkvfs.so" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
[ "$needed" = "libc.so.6 " ] || bad "libkvfs.so needs '$needed', want libc.so.6 alone"
if ldd "$B/libkvfs.so" | grep -E 'hiredis|uring|zstd|xxhash|fuse|zmq|msgpack'; then
	bad "ldd shows a daemon library"
fi

# 2. the static library
sglob=$(nm -g --defined-only "$B/libkvfs.a" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u)
[ "$sglob" = "$want" ] || bad "libkvfs.a's global symbols differ from the map: $(diff <(echo "$want") <(echo "$sglob") | grep '^[<>]' | head -10 | tr '\n' ' ')"

# 3. an engine with names of its own
cat > "$T/engine.c" <<'C'
#include <stdio.h>
#include <string.h>
#include "kvfs.h"
/* names kvfs uses inside: an engine may have its own */
int tier_init(void) { return 7; }
int l2_open(void) { return 8; }
int gpu_rt_load(void) { return 9; }
unsigned long hashkey_checksum(void) { return 10; }
int main(void)
{
	const unsigned tok[4] = { 1, 2, 3, 4 };
	struct kvfs_key k;
	char hex[KVFS_KEY_HEX_LEN + 1];

	if (kvfs_key_chunk(NULL, 0, NULL, 0, tok, 4, &k))
		return 1;
	kvfs_key_hex(&k, hex);
	printf("%s %d\n", hex, tier_init() + l2_open() + gpu_rt_load() +
	       (int)hashkey_checksum());
	return 0;
}
C
if ! cc -std=gnu11 -Wall -Werror -Iinclude -o "$T/engine_static" "$T/engine.c" \
	"$B/libkvfs.a" -pthread 2>"$T/log"; then
	bad "an engine with its own tier_init/l2_open does not link with libkvfs.a: $(head -5 "$T/log")"
fi
if ! cc -std=gnu11 -Wall -Werror -Iinclude -o "$T/engine_shared" "$T/engine.c" \
	-L"$B" -l:libkvfs.so -Wl,-rpath,"$PWD/$B" 2>"$T/log"; then
	bad "the same engine does not link with libkvfs.so: $(head -5 "$T/log")"
fi
ref=$(echo 1 2 3 4 | "$B/kvfsctl" hash --chunk-tokens 4 2>/dev/null | awk 'NR == 1 { print $NF }')
[ -n "$ref" ] || bad "kvfsctl hash printed no key"
for e in engine_static engine_shared; do
	[ -x "$T/$e" ] || continue
	out=$("$T/$e") || bad "$e exited $?"
	case $out in
	*" 34") ;;
	*) bad "$e: its own functions were not called: '$out'" ;;
	esac
	if [ "${out%% *}" != "$ref" ]; then
		bad "$e computed key ${out%% *}, kvfsctl hash says $ref"
	fi
done

# 4. pkg-config
grep -q '^Libs.private: -pthread$' "$B/kvfs.pc" || bad "kvfs.pc: $(grep Libs.private "$B/kvfs.pc")"

[ $fail = 0 ] && echo "ok - libkvfs: $(echo "$want" | wc -l) calls exported (versioned, soname $soname), needs: $needed; static library: the same globals; an engine's own tier_init/l2_open link beside it"
exit $fail
