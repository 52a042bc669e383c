#!/usr/bin/env bash
# test_preload_lowfd.sh - a served open returns the fd the plain open
# would: the lowest free one (POSIX), with libkvfs_preload.so's own fds
# (a namespace directory opened at the first open of its namespace, a
# writer's namespace fd, KVFS_PRELOAD=memfd's memfd) out of its way
# (review3 t11, t14): `close(0); open(chunk)` gets 0, in memory, memfd and
# fopen, key and path namespaces alike; `close(1); open(new key,
# O_WRONLY | O_CREAT); exec echo` gets 1 and the key holds echo's line.
set -u
T=test_preload_lowfd
# shellcheck source=tests/sh/preload_test.sh
. "$(dirname "$0")/preload_test.sh"
preload_mount || exit 1
mkdir "$tmp/m/k" "$tmp/m/p" || exit 1
"$PY" -c 'import os, sys; os.setxattr(sys.argv[1], "user.kvfs.names", b"paths")' \
	"$tmp/m/p" || exit 1
K=00000000000000000000000000000001
echo CHUNKDATA >"$tmp/m/k/$K" && echo PATHDATA >"$tmp/m/p/f" || exit 1

# FILE MODE [fopen]: in a new process (its first open of the namespace),
# what the open of FILE returns after close(0), and read(0)
lowread() {
	KVFS_PRELOAD=$2 pre "$PY" - "$1" "${3:-}" <<'EOF' 2>&1
import ctypes, os, sys
low = os.dup(2); os.close(low); os.close(0)  # the lowest free: 0
if sys.argv[2]:
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    f = libc.fopen(sys.argv[1].encode(), b"r")
    fd = libc.fileno(ctypes.c_void_p(f)) if f else -1
else:
    fd = os.open(sys.argv[1], os.O_RDONLY)
print(fd, os.read(0, 100).decode().strip())
EOF
}
for mode in 1 memfd; do
	for f in "k/$K CHUNKDATA" "p/f PATHDATA"; do
		read -r rel want <<<"$f"
		gets0=$(stat ioctl.xfer.gets)
		got=$(lowread "$tmp/m/$rel" "$mode")
		if [ "$got" = "0 $want" ] && [ "$(stat ioctl.xfer.gets)" -gt "$gets0" ]; then
			ok "KVFS_PRELOAD=$mode: close(0), first open of $rel: served as fd 0"
		else
			bad "KVFS_PRELOAD=$mode: close(0), open of $rel: $got (want fd 0, one GET)"
		fi
	done
done
gets0=$(stat ioctl.xfer.gets)
got=$(lowread "$tmp/m/k/$K" 1 fopen)
if [ "$got" = "0 CHUNKDATA" ] && [ "$(stat ioctl.xfer.gets)" -gt "$gets0" ]; then
	ok "close(0), fopen of a chunk: served, fileno 0"
else
	bad "close(0), fopen of a chunk: $got (want fileno 0, one GET)"
fi

# the writer: close(1); open(new key); exec echo (a namespace already
# seen, then a new one), and KVFS_PRELOAD_WRITES=lazy
n_w=0
for env in "" KVFS_PRELOAD_WRITES=lazy; do
	for warm in 1 0; do
		n_w=$((n_w + 1))
		k=$(printf %032x $((0x100 + n_w)))
		got=$(env $env LD_PRELOAD="$PRELOAD" "$PY" - "$tmp/m/k" "$k" \
			"$warm" <<'EOF' 2>&1
import os, sys
ns, k, warm = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
if warm:  # the namespace seen (read) first
    os.close(os.open(f"{ns}/{1:032x}", os.O_RDONLY))
os.close(1)
fd = os.open(f"{ns}/{k}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
# served: nothing at the name before close (the plain path's writer shows)
os.write(2, b"writer open returned %d, served %s\n"
         % (fd, str(not os.path.exists(f"{ns}/{k}")).encode()))
os.set_inheritable(fd, True)  # os.open's fds are close-on-exec
os.execv("/bin/echo", ["echo", "hello from echo"])
EOF
)
		sleep 0.1 # echo's exit closes the writer (the kernel's release)
		if [ "$got" = "writer open returned 1, served True" ] &&
		   [ "$(cat "$tmp/m/k/$k" 2>&1)" = "hello from echo" ]; then
			ok "close(1), open(new key) ${env:-default} (seen: $warm): fd 1, exec echo wrote the key"
		else
			bad "close(1), open(new key) ${env:-default} (seen: $warm): $got; key: $(cat "$tmp/m/k/$k" 2>&1)"
		fi
	done
done

# a program's own file dup2'd onto the number the library's first
# namespace fd took, then more namespaces than the library remembers (64):
# the slot's reuse never closes the program's file (it did, and the next
# namespace's fd took its number)
for i in $(seq 0 70); do
	mkdir "$tmp/m/n$i" && echo "N$i" >"$tmp/m/n$i/$K" || exit 1
done
got=$(pre "$PY" - "$tmp/m" "$K" "$tmp/log" <<'EOF' 2>&1
import os, sys
top, k, log = sys.argv[1:]
before = set(os.listdir("/proc/self/fd"))
os.close(os.open(f"{top}/n0/{k}", os.O_RDONLY))
libfd = min(int(f) for f in set(os.listdir("/proc/self/fd")) - before)
fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.dup2(fd, libfd)
for i in range(1, 71):
    with open(f"{top}/n{i}/{k}", "rb") as f:
        f.read()
print(os.write(libfd, b"still mine\n"), os.readlink(f"/proc/self/fd/{libfd}"))
EOF
)
if [ "$got" = "11 $tmp/log" ] && [ "$(cat "$tmp/log")" = "still mine" ]; then
	ok "a program's fd on the library's old number survives 70 namespaces"
else
	bad "a program's fd on the library's old number: $got"
fi

echo "1..$n"
[ "$fails" = 0 ]
