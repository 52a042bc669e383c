#!/usr/bin/env bash
# test_preload_lazy.sh - KVFS_PRELOAD_READS=lazy (lib/preload/preload_lazy.c)
# against a real mount: an open of a key namespace's chunk asks the
# daemon nothing (ioctl.xfer.gets and requests.open do not move); a read
# of the whole chunk is one KVFS_IOC_GET straight into the caller's
# buffer; partial reads, seeks, pread, readv, mmap, dup, numpy and cat
# read exactly the published bytes (one more GET fills the library's
# copy, once); threads agree; a chunk removed between the open and the
# first read is ESTALE, never other bytes, and a key written again is
# served; where no GET can be made at the read (the library's namespace
# fd dup2'd over) the kernel's reads serve the bytes instead; a fork
# while another thread reads (the child reading, or exec'ing) never
# hangs, in either mode; a path namespace's file is lazy too, but read
# only as the version its open's stat showed (a rewrite in between:
# ESTALE), and is fetched at the open by default.
set -u
T=test_preload_lazy
# shellcheck source=tests/sh/preload_test.sh
. "$(dirname "$0")/preload_test.sh"
preload_mount || exit 1
preload_chunks || exit 1 # $ns: K1 2 MiB, K2 256 KiB, K3 1,000 bytes
lazy() { KVFS_PRELOAD_READS=lazy LD_PRELOAD=$PRELOAD "$@"; }

# --- the GETs: none at the open, one per whole read
open0=$(stat requests.open)
read0=$(stat requests.read)
pyrun "lazy: no GET at the open, one per whole read, one fill" \
	lazy "$PY" - "$ns" "$tmp" "$K1" "$K2" "$K3" <<'EOF'
import json, os, sys
ns, tmp, keys = sys.argv[1], sys.argv[2], sys.argv[3:6]
want = [open(f"{tmp}/k{i + 1}", "rb").read() for i in range(3)]
stats = f"{ns}/../.kvfs/stats"
def gets():
    with open(stats) as f:
        return json.load(f)["ioctl"]["xfer"]["gets"]
from plt import check, done
g0 = gets()
fds = [os.open(f"{ns}/{k}", os.O_RDONLY) for k in keys]
check(gets() == g0, "three opens: no GET")
check([os.fstat(fd).st_size for fd in fds] == [len(w) for w in want],
      "fstat of an fd not read yet: the chunk's size")
for fd, w in zip(fds, want):
    check(os.read(fd, len(w) + 1) == w, f"a whole read of {len(w)} bytes")
check(gets() == g0 + 3, f"three whole reads: three GETs ({gets() - g0})")
check(all(os.read(fd, 10) == b"" for fd in fds), "then end of file")
check(os.pread(fds[0], 16, 100) == want[0][100:116],
      "a pread after the whole read")
check(os.pread(fds[0], 16, 200) == want[0][200:216], "another pread")
check(gets() == g0 + 4, f"the library's copy filled once ({gets() - g0})")
for fd in fds:
    os.close(fd)
done()
EOF
if [ "$(stat requests.open)" = "$open0" ] && [ "$(stat requests.read)" = "$read0" ]; then
	ok "lazy: requests.open and requests.read did not move"
else
	bad "lazy: requests.open $open0 -> $(stat requests.open), read $read0 -> $(stat requests.read)"
fi

# --- every way of reading: exact bytes
check "lazy: cat of a 2 MiB chunk (128 KiB reads): exact bytes" \
	cmp <(lazy cat "$ns/$K1") "$tmp/k1"
check "lazy: cat of a 1,000-byte chunk: exact bytes" \
	cmp <(lazy cat "$ns/$K3") "$tmp/k3"
pyrun "lazy, python: read/partial/seek/pread/readv/mmap/dup/numpy/threads" \
	lazy "$PY" - "$ns" "$tmp" "$K1" "$K2" "$K3" <<'EOF'
import mmap, os, sys, threading
ns, tmp, keys = sys.argv[1], sys.argv[2], sys.argv[3:6]
want = [open(f"{tmp}/k{i + 1}", "rb").read() for i in range(3)]
from plt import check, done
for k, w in zip(keys, want):
    p = f"{ns}/{k}"
    with open(p, "rb") as f:
        check(f.read() == w, f"open().read() of {len(w)} bytes")
    with open(p, "rb") as f:  # the first read a part: the copy filled
        check(f.read(100) == w[:100], "a first read of 100 bytes")
        check(f.read() == w[100:], "the rest")
    with open(p, "rb") as f:
        f.seek(len(w) // 2)
        check(f.read(100) == w[len(w) // 2:len(w) // 2 + 100], "seek+read")
    fd = os.open(p, os.O_RDONLY)
    check(os.pread(fd, 10, 5) == w[5:15], "a first pread")
    os.close(fd)
    fd = os.open(p, os.O_RDONLY)
    a, b = bytearray(7), bytearray(len(w))
    check(os.readv(fd, [a, b]) == len(w) and bytes(a + b)[:len(w)] == w,
          "a first readv of two buffers")
    os.close(fd)
    fd = os.open(p, os.O_RDONLY)
    with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as m:
        check(m[:] == w, "a first mmap")
    os.close(fd)
    fd = os.open(p, os.O_RDONLY)
    d = os.dup(fd)
    check(os.read(d, len(w)) == w and os.read(fd, 1) == b"",
          "a dup shares the offset the whole read moved")
    os.close(d)
    os.close(fd)
try:
    import numpy as np
    a = np.fromfile(f"{ns}/{keys[0]}", dtype=np.uint8)
    check(a.tobytes() == want[0], "numpy.fromfile")
except ImportError:
    print("skip: numpy not installed")
bad = []
def worker(r):
    for i in range(50):
        j = (i + r) % 3
        with open(f"{ns}/{keys[j]}", "rb") as f:
            if (f.read() if i % 2 else f.read(333) + f.read()) != want[j]:
                bad.append(j)
th = [threading.Thread(target=worker, args=(r,)) for r in range(4)]
[t.start() for t in th]
[t.join() for t in th]
check(not bad, "4 threads x 50 opens, whole and partial reads: exact bytes")
# one fd, many threads' first preads at once: one fill, the same bytes
fd = os.open(f"{ns}/{keys[1]}", os.O_RDONLY)
got = []
def pr(off):
    got.append(os.pread(fd, 4096, off) == want[1][off:off + 4096])
th = [threading.Thread(target=pr, args=(o * 4096,)) for o in range(8)]
[t.start() for t in th]
[t.join() for t in th]
os.close(fd)
check(len(got) == 8 and all(got), "8 threads' first preads of one fd")
done()
EOF

# --- gone between the open and the first read: ESTALE, never other bytes
pyrun "lazy: unlinked before the first read: ESTALE; written again: served" \
	lazy "$PY" - "$ns" "$tmp" "$K3" <<'EOF'
import errno, os, shutil, sys
ns, tmp, key = sys.argv[1], sys.argv[2], sys.argv[3]
want = open(f"{tmp}/k3", "rb").read()
p = f"{ns}/{key}"
from plt import check, done
fd = os.open(p, os.O_RDONLY)
os.unlink(p)
for how in ("read", "pread"):
    try:
        r = os.read(fd, 4096) if how == "read" else os.pread(fd, 10, 0)
        check(False, f"a {how} after the unlink fails ({len(r)} bytes)")
    except OSError as e:
        check(e.errno == errno.ESTALE, f"a {how} after the unlink: ESTALE ({e})")
os.close(fd)
fd = os.open(f"{tmp}/k3", os.O_RDONLY)  # not kvfs: the real call
check(os.read(fd, 5) == want[:5], "a file elsewhere is untouched")
os.close(fd)
# the key written again before the read: its bytes are the key's
shutil.copyfile(f"{tmp}/k3", p)
fd = os.open(p, os.O_RDONLY)
os.unlink(p)
shutil.copyfile(f"{tmp}/k3", p)
check(os.read(fd, 4096) == want, "the key written again: served")
os.close(fd)
done()
EOF

# --- no GET possible at the read (the library's namespace fd taken over
# by the program's dup2): the kernel's reads serve the bytes. The
# namespace fd is found first (a look at /proc/self/fd/N of a served fd
# would hand that fd over to the real file, and its read would never
# need the library)
pyrun "lazy, the namespace fd dup2'd over before the read: exact bytes, through the kernel" \
	lazy "$PY" - "$ns" "$tmp" "$K2" <<'EOF'
import json, os, sys
ns, tmp, key = sys.argv[1], sys.argv[2], sys.argv[3]
want = open(f"{tmp}/k2", "rb").read()
stats = f"{ns}/../.kvfs/stats"
def reads():
    with open(stats) as f:
        return json.load(f)["requests"]["read"]
open(f"{ns}/{key}", "rb").close()  # the library opens the namespace
nsfd = [int(f) for f in os.listdir("/proc/self/fd")
        if os.path.realpath(f"/proc/self/fd/{f}") == os.path.realpath(ns)]
print("namespace fds", nsfd)
fd = os.open(f"{ns}/{key}", os.O_RDONLY)
other = os.open("/dev/null", os.O_RDONLY)
for n in nsfd:
    os.dup2(other, n)
r0 = reads()
got = os.read(fd, len(want) + 1)
got2 = os.pread(fd, 100, 7)
moved = reads() - r0
os.close(fd)
print("exact" if got == want and got2 == want[7:107] else "WRONG",
      "requests.read moved by", moved)
sys.exit(0 if nsfd and got == want and got2 == want[7:107] and moved > 0
         else 1)
EOF

# --- fork while another thread reads: the child's reads and its exec
# (which hands the inherited served fds over to the real files) never
# wait on a lock that thread held at the fork; default and lazy
for mode in 1 lazy; do
	pyrun "KVFS_PRELOAD_READS=$mode: forks and fork+exec while a thread reads" \
		env KVFS_PRELOAD_READS=$mode LD_PRELOAD="$PRELOAD" \
		"$PY" - "$ns" "$tmp" "$K2" <<'EOF'
import os, signal, sys, threading
ns, tmp, key = sys.argv[1], sys.argv[2], sys.argv[3]
want = open(f"{tmp}/k2", "rb").read()
p = f"{ns}/{key}"
stop, bad = False, []
def reader():
    while not stop:
        f = os.open(p, os.O_RDONLY)
        os.set_inheritable(f, True)  # the exec'd child inherits it
        if os.read(f, len(want) + 1) != want:  # c->lock held across it
            bad.append("thread")
        os.close(f)
t = threading.Thread(target=reader)
t.start()
hung = 0
for i in range(150):
    f = os.open(p, os.O_RDONLY)
    pid = os.fork()
    if pid == 0:
        signal.alarm(10)
        if i % 2:
            os.execv("/bin/true", ["true"])
        os._exit(0 if os.pread(f, 16, 1) == want[1:17] else 3)
    _, st = os.waitpid(pid, 0)
    os.close(f)
    if os.WIFSIGNALED(st):
        hung += 1
    elif os.WEXITSTATUS(st):
        bad.append(f"child {i} exit {os.WEXITSTATUS(st)}")
stop = True
t.join()
print(f"150 forks: {hung} children hung, {len(bad)} wrong", bad[:3])
sys.exit(0 if not hung and not bad else 1)
EOF
done

# --- a path namespace's file: lazy too, but only the version the open's
# stat showed (KVFS_XFER_NAMED | KVFS_XFER_MTIME)
pns=$tmp/m/pns
mkdir "$pns" &&
	"$PY" -c 'import os, sys; os.setxattr(sys.argv[1], "user.kvfs.names", b"paths")' "$pns" &&
	mkdir -p "$pns/a/b" &&
	printf 'version one' >"$pns/f.bin" &&
	head -c 300000 /dev/urandom >"$pns/a/b/blk.bin" || exit 1
open0=$(stat requests.open)
pyrun "lazy, a path namespace: no GET at the open, one at the whole read" \
	lazy "$PY" - "$pns" <<'EOF'
import json, os, sys
pns = sys.argv[1]
p = f"{pns}/a/b/blk.bin"
want = open(p, "rb").read()  # through the library too: one GET
stats = f"{pns}/../.kvfs/stats"
def gets():
    with open(stats) as f:
        return json.load(f)["ioctl"]["xfer"]["gets"]
from plt import check, done
g0 = gets()
fd = os.open(p, os.O_RDONLY | os.O_DIRECT)  # vLLM's load_block
check(gets() == g0, "an O_DIRECT open: no GET")
check(os.fstat(fd).st_size == len(want), "fstat: the file's size")
buf = bytearray(len(want))
check(os.readv(fd, [buf]) == len(want) and bytes(buf) == want,
      "readv of the whole file: exact bytes")
check(gets() == g0 + 1, f"one GET ({gets() - g0})")
os.close(fd)
fd = os.open(p, os.O_RDONLY)
check(os.pread(fd, 100, 1000) == want[1000:1100], "a partial pread first")
check(os.read(fd, 10) == want[:10], "then a read at offset 0")
os.close(fd)
done()
EOF
if [ "$(stat requests.open)" = "$open0" ]; then
	ok "lazy, a path namespace: requests.open did not move"
else
	bad "lazy, a path namespace: requests.open $open0 -> $(stat requests.open)"
fi
pyrun "lazy, a path namespace: a rewrite between the open and the read is ESTALE, never its bytes" \
	lazy "$PY" - "$pns/f.bin" <<'EOF'
import errno, os, sys, time
p = sys.argv[1]
from plt import check, done
for size_kept in (True, False):
    with open(p, "wb") as f:
        f.write(b"version one")
    fd = os.open(p, os.O_RDONLY)
    time.sleep(0.002)  # another mtime for the next version
    with open(p, "wb") as f:  # O_TRUNC: a new version of the same name
        f.write(b"version two" if size_kept else b"version three")
    try:
        r = os.read(fd, 100)
        check(False, f"read gave {r!r}")
    except OSError as e:
        check(e.errno == errno.ESTALE,
              f"{'same' if size_kept else 'another'} size: "
              f"{errno.errorcode.get(e.errno)}")
    os.close(fd)
fd = os.open(p, os.O_RDONLY)
check(os.read(fd, 100) == b"version three", "a new open: the new version")
os.close(fd)
done()
EOF
pyrun "lazy, a path namespace: a rewrite still open (its mtime set by futimens, as cp -p does) is ESTALE, never the old bytes under its stat" \
	lazy "$PY" - "$pns" "$PY" <<'EOF'
import errno, os, subprocess, sys
ns, py = sys.argv[1], sys.argv[2]
p = f"{ns}/cpp.bin"
old, new = b"O" * 65536, b"N" * 65536
with open(p, "wb") as f:
    f.write(old)
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
w = subprocess.Popen([py, "-c", f'''
import os, sys
fd = os.open({p!r}, os.O_WRONLY | os.O_TRUNC)
os.write(fd, {new!r})
os.utime(fd, ns=(1600000000 * 10**9 + 7, 1600000000 * 10**9 + 7))
print("ready", flush=True)
sys.stdin.read()
os.close(fd)'''], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
w.stdout.readline()
fd = os.open(p, os.O_RDONLY)
st = os.fstat(fd)
try:
    b = os.read(fd, st.st_size + 1)
    r = "OLD" if b == old else "NEW" if b == new else f"{len(b)} bytes"
except OSError as e:
    r = errno.errorcode.get(e.errno, e.errno)
os.close(fd)
w.stdin.close()
w.wait()
print(f"fstat mtime {st.st_mtime_ns}: read {r}")
sys.exit(0 if r == "ESTALE" else 1)
EOF
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	skip "lazy, a path namespace, another uid: needs root and setpriv"
else
	head -c 5000 /dev/urandom >"$pns/secret" && chmod 600 "$pns/secret" &&
		chmod 755 "$pns" || exit 1
	out=$(setpriv --reuid=65534 --regid=65534 --clear-groups \
		env KVFS_PRELOAD_READS=lazy LD_PRELOAD="$PRELOAD" "$PY" -c '
import errno, os, sys
try:
    os.open(sys.argv[1], os.O_RDONLY)
    print("opened")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))' "$pns/secret" 2>&1)
	say "$out"
	check "lazy, a path namespace: a file the caller may not read is EACCES at the open, as open(2)" \
		test "$out" = EACCES
fi

pyrun "default (eager), a path namespace: the version the open saw" \
	pre "$PY" - "$pns/f.bin" <<'EOF'
import os, sys
p = sys.argv[1]
with open(p, "wb") as f:
    f.write(b"version one")
fd = os.open(p, os.O_RDONLY)
with open(p, "wb") as f:
    f.write(b"version two")
r = os.read(fd, 100)
os.close(fd)
print(r)
sys.exit(0 if r == b"version one" else 1)
EOF

echo "1..$n"
[ "$fails" = 0 ]
