#!/usr/bin/env bash
# test_preload.sh - libkvfs_preload.so (lib/preload/) against a real mount:
# with LD_PRELOAD, cat, Python's open().read(), numpy.fromfile, mmap and
# concurrent threads read exactly the published bytes, each open served by
# one KVFS_IOC_GET (ioctl.xfer.gets moves, requests.open/read do not); a
# miss is ENOENT; a namespace another uid may not read is EACCES for it;
# files outside kvfs, a chunk over KVFS_PRELOAD_MAX and KVFS_PRELOAD=0
# take the plain path; a path namespace's file named like a key is served
# as its path (tests/sh/test_preload_paths.sh: path namespaces); writes
# and O_RDWR are unchanged.
set -u
T=test_preload
# shellcheck source=tests/sh/preload_test.sh
. "$(dirname "$0")/preload_test.sh"
preload_mount || exit 1
preload_chunks || exit 1 # $ns: K1 2 MiB, K2 256 KiB, K3 1,000 bytes
MISS=ffffffffffffffffffffffffffffffff

# --- served: exact bytes, one GET per open, no FUSE open/read
gets0=$(stat ioctl.xfer.gets) open0=$(stat requests.open)
read0=$(stat requests.read)
check "cat of a 2 MiB chunk: exact bytes" \
	cmp <(pre cat "$ns/$K1") "$tmp/k1"
check "cat of a 256 KiB chunk: exact bytes" \
	cmp <(pre cat "$ns/$K2") "$tmp/k2"
check "cat of a 1,000-byte chunk: exact bytes" \
	cmp <(pre cat "$ns/$K3") "$tmp/k3"
gets1=$(stat ioctl.xfer.gets)
if [ $((gets1 - gets0)) -eq 3 ]; then
	ok "three opens, three KVFS_IOC_GET"
else
	bad "three opens gave $((gets1 - gets0)) GETs"
fi
if [ "$(stat requests.open)" = "$open0" ] && [ "$(stat requests.read)" = "$read0" ]; then
	ok "requests.open and requests.read did not move"
else
	bad "requests.open $open0 -> $(stat requests.open), read $read0 -> $(stat requests.read)"
fi

# both ways of serving: from memory behind a socket fd (the default) and
# from a read-only memfd (KVFS_PRELOAD=memfd)
pyserve() { # MODE
out=$(KVFS_PRELOAD=$1 pre "$PY" - "$ns" "$tmp" "$K1" "$K2" "$K3" "$1" <<'EOF' 2>&1
import errno, mmap, os, sys, threading
ns, tmp, keys, mode = sys.argv[1], sys.argv[2], sys.argv[3:6], sys.argv[6]
want = [open(f"{tmp}/k{i + 1}", "rb").read() for i in range(3)]
from plt import check, fails
for k, w in zip(keys, want):
    with open(f"{ns}/{k}", "rb") as f:
        check(f.read() == w, f"open().read() of {len(w)} bytes")
        st = os.fstat(f.fileno())
        check(st.st_size == len(w), "fstat size")
        f.seek(len(w) // 2)
        check(f.read(100) == w[len(w) // 2:len(w) // 2 + 100], "seek+read")
        check(os.pread(f.fileno(), 10, 5) == w[5:15], "pread")
        for whence in (-1, 99):
            try:
                os.lseek(f.fileno(), 0, whence)
                check(False, f"lseek whence {whence} fails")
            except OSError as e:
                check(e.errno == errno.EINVAL, f"lseek whence {whence}: EINVAL")
        check(os.lseek(f.fileno(), -10, os.SEEK_END) == len(w) - 10,
              "lseek SEEK_END")
        with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            check(m[:] == w, "mmap")
        try:
            os.write(f.fileno(), b"x")
            check(False, "write to a served fd fails")
        except OSError as e:
            check(e.errno == errno.EBADF, f"write to a served fd: EBADF ({e})")
try:
    import numpy as np
    a = np.fromfile(f"{ns}/{keys[0]}", dtype=np.uint8)
    check(a.tobytes() == want[0], "numpy.fromfile")
except ImportError:
    print("skip: numpy not installed")
try:
    open(f"{ns}/ffffffffffffffffffffffffffffffff", "rb")
    check(False, "a miss fails")
except OSError as e:
    check(e.errno == errno.ENOENT, f"a miss is ENOENT ({e})")
try:
    os.open(f"{ns}/{keys[1]}", os.O_RDWR)
    check(False, "O_RDWR of a chunk fails")
except OSError as e:
    check(e.errno == errno.EPERM, f"O_RDWR of a chunk: EPERM as before ({e})")
# 4 threads x 50 opens of the three chunks
def worker(r):
    for i in range(50):
        j = (i + r) % 3
        with open(f"{ns}/{keys[j]}", "rb") as f:
            if f.read() != want[j]:
                r_fail.append(j)
r_fail = []
th = [threading.Thread(target=worker, args=(r,)) for r in range(4)]
[t.start() for t in th]
[t.join() for t in th]
check(not r_fail, "4 threads x 50 opens: exact bytes")
# a write through the preload is the plain path (create + write + close)
new = f"{ns}/0000000000000000000000000000000{'a' if mode == '1' else 'b'}"
with open(new, "xb") as f:
    f.write(b"written" * 1000)
check(open(new, "rb").read() == b"written" * 1000,
      "a write through the preload reads back")
# a served fd passed through dup, dup2, fcntl and fdopen (numpy's way)
fd = os.open(f"{ns}/{keys[2]}", os.O_RDONLY)
fd2 = os.dup(fd)
os.lseek(fd, 10, os.SEEK_SET)
check(os.read(fd2, 5) == want[2][10:15], "dup shares the offset")
fd3 = os.dup2(fd2, 100)
os.close(fd)
os.close(fd2)
check(os.pread(fd3, 8, 0) == want[2][:8], "dup2'ed fd after the others closed")
os.close(fd3)
if mode == "1":
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"{ns}/{keys[2]}", os.O_RDONLY)
    buf = ctypes.create_string_buffer(100)
    n = libc.syscall(0, fd, buf, 100)  # SYS_read, past the library
    check(n == -1 and ctypes.get_errno() in (errno.ENOTCONN, errno.EINVAL),
          f"a raw read(2) of a served fd fails, never other bytes ({n}, {ctypes.get_errno()})")
    # closed behind the library's back, the number reused by another file
    libc.syscall(3, fd)  # SYS_close
    other = os.open(f"{tmp}/k1", os.O_RDONLY)
    check(libc.syscall(33, other, fd) == fd,  # SYS_dup2, past the library
          "the fd number given to another file")
    check(os.read(fd, 64) == want[0][:64],
          "a reused fd number reads its own file, not the chunk")
    os.close(fd)
    if other != fd:  # the kernel may give the freed number itself
        os.close(other)
sys.exit(1 if fails else 0)
EOF
)
rc=$?
printf '%s\n' "$out" | sed 's/^/  # /'
check "KVFS_PRELOAD=$1, python: open/read/seek/pread/mmap/numpy/miss/O_RDWR/threads/write/dup" \
	test "$rc" = 0
gets2=$(stat ioctl.xfer.gets)
# one GET per served open, whatever its size (the chunk's stat gives the
# room), none for the miss (the stat found nothing)
if [ $((gets2 - gets1)) -ge 206 ]; then
	ok "KVFS_PRELOAD=$1: python's opens went through KVFS_IOC_GET ($((gets2 - gets1)))"
else
	bad "KVFS_PRELOAD=$1: python's opens: $((gets2 - gets1)) GETs, expected >= 206"
fi
gets1=$gets2
}
pyserve 1
pyserve memfd
if [ "$(stat requests.read)" = "$read0" ]; then
	ok "requests.read still did not move"
else
	bad "requests.read $read0 -> $(stat requests.read)"
fi

# --- descriptors the library did not see (a raw dup, a raw close): no
# fd it forgot is ever served another chunk's bytes, and served opens
# take the numbers the kernel would give
out=$(pre "$PY" - "$ns" "$tmp" "$K1" "$K2" "$K3" <<'EOF' 2>&1
import ctypes, errno, os, sys
ns, tmp, keys = sys.argv[1], sys.argv[2], sys.argv[3:6]
want = [open(f"{tmp}/k{i + 1}", "rb").read() for i in range(3)]
libc = ctypes.CDLL(None, use_errno=True)
from plt import check, fails
def low():
    return sorted(int(f) for f in os.listdir("/proc/self/fd"))
def lib_read(fd):  # the library's read (interposed), 64 bytes or -errno
    buf = ctypes.create_string_buffer(64)
    n = libc.read(fd, buf, 64)
    return buf.raw[:n] if n >= 0 else -ctypes.get_errno()
def show(r):
    return r if isinstance(r, int) else r[:8]
os.close(os.open(f"{ns}/{keys[1]}", os.O_RDONLY))  # the namespace fd opened
before = low()
fd = os.open(f"{ns}/{keys[1]}", os.O_RDONLY)
os.close(fd)
check(low() == before, "a served open and close leave the descriptors as they were")
plain = os.open(f"{tmp}/k3", os.O_RDONLY)
check(plain == fd, f"the next open gets the number closed ({plain}, {fd})")
os.close(plain)
# an untracked dup (raw syscall) of a closed served fd: never a later
# chunk's bytes through the socket they share
fa = os.open(f"{ns}/{keys[0]}", os.O_RDONLY)
j = libc.syscall(32, fa)  # SYS_dup, past the library
os.close(fa)
fb = os.open(f"{ns}/{keys[2]}", os.O_RDONLY)
check(os.fstat(fb).st_size == len(want[2]), "the next served open works")
r = lib_read(j)
check(r in (-errno.ENOTCONN, -errno.EINVAL),
      f"the untracked dup reads nothing, not the next chunk ({show(r)})")
check(os.read(fb, 64) == want[2][:64], "the served fd reads its own chunk")
os.close(fb)
libc.syscall(3, j)
# a descriptor closed behind the library's back: its number, given to
# another chunk's socket, never reads the old chunk
fa = os.open(f"{ns}/{keys[0]}", os.O_RDONLY)
fa2 = os.dup(fa)
libc.syscall(3, fa)        # SYS_close: the library still lists fa
hold = os.open("/dev/null", os.O_RDONLY)  # takes fa's number
os.close(fa2)              # fa's entry still stands for the chunk
fb = os.open(f"{ns}/{keys[1]}", os.O_RDONLY)
libc.syscall(3, hold)
check(libc.syscall(33, fb, fa) == fa,
      "another chunk's socket put at the old number (raw dup2)")
r = lib_read(fa)
check(r != want[0][:64], f"the old number never reads the old chunk ({show(r)})")
os.close(fb)
libc.syscall(3, fa)
sys.exit(1 if fails else 0)
EOF
)
rc=$?
printf '%s\n' "$out" | sed 's/^/  # /'
check "fd numbers, untracked dups, stale entries" test "$rc" = 0

# --- a miss: ENOENT, from cat too, and no GET (the chunk's stat said so)
gets3=$(stat ioctl.xfer.gets)
err=$(pre cat "$ns/$MISS" 2>&1 >/dev/null)
case $err in
*"No such file"*) ok "cat of a miss: ENOENT" ;;
*) bad "cat of a miss said: $err" ;;
esac
if [ "$(stat ioctl.xfer.gets)" = "$gets3" ]; then
	ok "a miss: no GET"
else
	bad "a miss: gets $gets3 -> $(stat ioctl.xfer.gets)"
fi

# --- not served: plain path, same bytes
open1=$(stat requests.open) gets3=$(stat ioctl.xfer.gets)
check "KVFS_PRELOAD=0: exact bytes" \
	cmp <(KVFS_PRELOAD=0 pre cat "$ns/$K2") "$tmp/k2"
if [ "$(stat ioctl.xfer.gets)" = "$gets3" ] && [ "$(stat requests.open)" -gt "$open1" ]; then
	ok "KVFS_PRELOAD=0: a FUSE open, no GET"
else
	bad "KVFS_PRELOAD=0: gets $gets3 -> $(stat ioctl.xfer.gets), open $open1 -> $(stat requests.open)"
fi
open1=$(stat requests.open)
check "a chunk over KVFS_PRELOAD_MAX: exact bytes" \
	cmp <(KVFS_PRELOAD_MAX=1048576 pre cat "$ns/$K1") "$tmp/k1"
if [ "$(stat requests.open)" -gt "$open1" ]; then
	ok "a chunk over KVFS_PRELOAD_MAX took the plain open"
else
	bad "a chunk over KVFS_PRELOAD_MAX: no FUSE open"
fi
mkdir "$tmp/plain" && cp "$tmp/k2" "$tmp/plain/$K2"
gets3=$(stat ioctl.xfer.gets)
check "a file outside kvfs named like a key: exact bytes" \
	cmp <(pre cat "$tmp/plain/$K2") "$tmp/k2"
echo more >"$tmp/plain/out"
check "a write outside kvfs through the preload" \
	pre sh -c "echo more >>'$tmp/plain/out' && test \"\$(cat '$tmp/plain/out')\" = 'more
more'"
if [ "$(stat ioctl.xfer.gets)" = "$gets3" ]; then
	ok "files outside kvfs: no GET"
else
	bad "files outside kvfs: gets $gets3 -> $(stat ioctl.xfer.gets)"
fi
# a path namespace's file named like a key is a file of that path (not
# the key): served by one GET by its path's key (KVFS_XFER_NAMED), no
# FUSE open (the rest of path namespaces: test_preload_paths.sh)
mkdir "$tmp/m/pns" &&
	"$PY" -c 'import os, sys; os.setxattr(sys.argv[1], "user.kvfs.names", b"paths")' "$tmp/m/pns" &&
	cp "$tmp/k3" "$tmp/m/pns/$K3"
gets3=$(stat ioctl.xfer.gets) open1=$(stat requests.open)
check "a path namespace's file named like a key: exact bytes" \
	cmp <(pre cat "$tmp/m/pns/$K3") "$tmp/k3"
if [ "$(stat ioctl.xfer.gets)" = $((gets3 + 1)) ] &&
	[ "$(stat requests.open)" = "$open1" ]; then
	ok "a path namespace's file: one GET, no FUSE open"
else
	bad "a path namespace's file: gets $gets3 -> $(stat ioctl.xfer.gets), open $open1 -> $(stat requests.open)"
fi

# --- permission: the daemon's, for the caller's uid
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	echo "ok $((n + 1)) # skip EACCES as another uid: needs root and setpriv"
	n=$((n + 1))
else
	mkdir "$tmp/m/open" "$tmp/m/closed" && chmod 755 "$tmp/m/open" &&
		chmod 700 "$tmp/m/closed" &&
		cp "$tmp/k3" "$tmp/m/open/$K3" && cp "$tmp/k3" "$tmp/m/closed/$K3"
	as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	gets3=$(stat ioctl.xfer.gets)
	check "another uid, a readable namespace: exact bytes" \
		cmp <(as_nobody env LD_PRELOAD="$PRELOAD" cat "$tmp/m/open/$K3") "$tmp/k3"
	if [ "$(stat ioctl.xfer.gets)" -gt "$gets3" ]; then
		ok "another uid: served by GET"
	else
		bad "another uid: no GET"
	fi
	err=$(as_nobody env LD_PRELOAD="$PRELOAD" cat "$tmp/m/closed/$K3" 2>&1 >/dev/null)
	case $err in
	*"Permission denied"*) ok "another uid, a 0700 namespace: EACCES" ;;
	*) bad "another uid, a 0700 namespace said: $err" ;;
	esac
	err=$(as_nobody env LD_PRELOAD="$PRELOAD" "$PY" -c '
import sys
try:
    open(sys.argv[1], "rb").read()
except PermissionError:
    print("EACCES")' "$tmp/m/closed/$K3" 2>&1)
	case $err in
	EACCES) ok "another uid, python open: PermissionError" ;;
	*) bad "another uid, python open said: $err" ;;
	esac
fi

echo "1..$n"
[ "$fails" = 0 ]
