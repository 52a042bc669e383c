#!/usr/bin/env bash
# test_preload_fdcalls.sh - calls on a descriptor libkvfs_preload.so serves
# (lib/preload/README.md, "Calls on a served fd") against a real mount:
# each is made plainly, preloaded (a socket fd) and preloaded with
# KVFS_PRELOAD=memfd, and must give the same answer, the same bytes and
# the same attributes (never 0 with nothing done), numbered as the review
# of issue 26 numbered them:
#   1 fchmod / fchown / futimens / fsetxattr on a read fd change the file
#     (another uid is then refused), also on a FILE's fileno, by the fd's
#     /proc/self/fd link, and where the name was replaced meanwhile (the
#     old version changes, as the kernel's old inode)
#   2 statx(fd, "", AT_EMPTY_PATH) and libkvfs's kvfs_get under the preload
#   3 fstat of a key namespace's chunk is stat(2) of its name (st_ino, mtime,
#     blksize), so cp and cp -a of chunks work
#   4 flock / lockf / fcntl locks between two processes
#   5 close_range over a writer publishes it; a subprocess (vfork +
#     close_range in the child) leaves the parent's served fds alone
#   6 preadv2 (Python's os.preadv)
#   7 /proc/self/fd/N reopened, fstatfs, readahead, fadvise, the xattrs,
#     F_GETFL, fsync, faccessat(AT_EMPTY_PATH)
#   8 a path file rewritten in place (O_TRUNC: the same st_ino) after the
#     read-only open: fchmod, chmod of the fd's link (the old version's
#     mode changes), flock, fsync, fgetxattr (ESTALE) must not turn the fd
#     into the new version (its reads and fstat stay the old version's,
#     the name keeps its mode and new bytes)
#   9 one thread reads a served fd (or a dup of it) to EOF in 4 KiB reads
#     while another fchmods it (turning it into the real file): the bytes
#     read are the file's, no block twice or missed
# The preload's runs must have been served (GETs counted).
# Runs in about 5 s.
set -u
T=test_preload_fdcalls
# shellcheck source=tests/sh/preload_test.sh
. "$(dirname "$0")/preload_test.sh"
preload_mount || exit 1
ns=$tmp/m/ns pq=$tmp/m/pq wns=$tmp/m/w
mkdir "$ns" "$pq" "$wns" || exit 1
"$PY" -c 'import os, sys; os.setxattr(sys.argv[1], "user.kvfs.names", b"paths")' "$pq" || exit 1
K=0123456789abcdef0123456789abcdef  # 3 MiB
Z1=0000000000000000000000000000000a # first 8 bytes 0
Z2=0000000000000000000000000000000b # the same first 8 bytes
head -c 3145728 /dev/urandom >"$tmp/k"
head -c 5000 /dev/urandom >"$tmp/z"
cp "$tmp/k" "$ns/$K" && cp "$tmp/z" "$ns/$Z1" && cp "$tmp/z" "$ns/$Z2" &&
	cp "$tmp/z" "$pq/shared" || exit 1

# One line per answer, "N what: value", N the finding; the same plainly
# and preloaded. TAG names what each run creates.
cat >"$tmp/calls.py" <<'EOF'
import ctypes, errno, fcntl, hashlib, os, struct, subprocess, sys
ns, pq, wns, tag, K, Z1, Z2, libkvfs = sys.argv[1:9]
libc = ctypes.CDLL(None, use_errno=True)
def out(n, what, v):
    print(f"{n} {what}: {v}", flush=True)
def call(f):
    try:
        r = f()
        return "ok" if r is None else ("ok", r)
    except OSError as e:
        return errno.errorcode[e.errno]
def attrs(s):
    return (oct(s.st_mode), s.st_uid, s.st_gid, s.st_size, s.st_nlink,
            s.st_mtime_ns if s.st_mtime < 1.5e9 else "recent")
def child(f, nobody=False):  # f() in a child process (uid 65534): its answer
    if nobody and os.getuid() != 0:
        return "skip"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        if nobody:
            os.setgroups([]); os.setgid(65534); os.setuid(65534)
        os.write(w, repr(call(f)).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    v = os.read(r, 200).decode()
    os.close(r)
    return v
def section(n, f):  # one finding's calls; an exception ends only them
    try:
        f()
    except Exception as e:
        out(n, "raised", repr(e))
libc.fopen.restype = ctypes.c_void_p
def rd(p, n=20):
    with open(p, "rb") as f:
        return f.read(n)

# 1: a path namespace's file, opened read-only by its owner
def s1():
    p = f"{pq}/{tag}-private"
    with open(p + ".t", "wb") as f:
        f.write(b"tenant A's secret\n" * 100)
    os.rename(p + ".t", p)
    os.chmod(p, 0o644)
    fd = os.open(p, os.O_RDONLY)
    out(1, "fchmod 0600", call(lambda: os.fchmod(fd, 0o600)))
    out(1, "stat after fchmod", attrs(os.stat(p)))
    out(1, "another uid opens it", child(lambda: os.open(p, os.O_RDONLY) and None, True))
    out(1, "fchown 65534", call(lambda: os.fchown(fd, 65534, 65534)))
    out(1, "stat after fchown", attrs(os.stat(p)))
    out(1, "futimens", call(lambda: os.utime(fd, (1000000000, 1000000000))))
    out(1, "stat after futimens", attrs(os.stat(p)))
    out(1, "fstat", attrs(os.fstat(fd)))
    out(1, "fsetxattr", call(lambda: os.setxattr(fd, "user.x", b"1")))
    out(1, "fremovexattr", call(lambda: os.removexattr(fd, "user.x")))
    out(1, "read after", os.read(fd, 8))
    os.close(fd)
    # a FILE of fopen (a memfd under the preload)
    f = ctypes.c_void_p(libc.fopen(p.encode(), b"r"))
    out(1, "fopen: fchmod 0640 of its fileno", call(lambda: os.fchmod(libc.fileno(f), 0o640)))
    out(1, "fopen: stat after", attrs(os.stat(p)))
    libc.fclose(f)
    # the name replaced by a new version while the fd is open: the old
    # version changes (fstat of the fd), the new one does not
    p = f"{pq}/{tag}-replaced"
    with open(p + ".t", "wb") as f:
        f.write(b"one" * 100)
    os.rename(p + ".t", p)
    os.chmod(p, 0o644)
    fd = os.open(p, os.O_RDONLY)
    with open(p + ".t", "wb") as f:
        f.write(b"two" * 50)
    os.rename(p + ".t", p)
    out(1, "replaced: fchmod 0600", call(lambda: os.fchmod(fd, 0o600)))
    out(1, "replaced: futimens", call(lambda: os.utime(fd, (5, 5))))
    out(1, "replaced: fchown", call(lambda: os.fchown(fd, 1, 1)))
    out(1, "replaced: fstat of the fd", attrs(os.fstat(fd)))
    out(1, "replaced: stat of the name", attrs(os.stat(p)))
    out(1, "replaced: read", os.read(fd, 6))
    os.close(fd)
    # calls by the fd's /proc/self/fd link
    p = f"{pq}/{tag}-link"
    with open(p + ".t", "wb") as f:
        f.write(b"link" * 10)
    os.rename(p + ".t", p)
    fd = os.open(p, os.O_RDONLY)
    out(1, "link: readlink", os.readlink(f"/proc/self/fd/{fd}") == p)
    out(1, "link: stat", attrs(os.stat(f"/proc/self/fd/{fd}")))
    out(1, "link: chmod 0604", call(lambda: os.chmod(f"/proc/self/fd/{fd}", 0o604)))
    out(1, "link: stat of the name", attrs(os.stat(p)))
    os.close(fd)
    # a key namespace's chunk never changes
    fd = os.open(f"{ns}/{K}", os.O_RDONLY)
    out(1, "key: fchmod", call(lambda: os.fchmod(fd, 0o400)))
    out(1, "key: fchown", call(lambda: os.fchown(fd, 1, 1)))
    out(1, "key: futimens", call(lambda: os.utime(fd, (5, 5))))
    out(1, "key: fsetxattr", call(lambda: os.setxattr(fd, "user.x", b"1")))
    os.close(fd)

section(1, s1)
# 2: statx of the fd, and kvfs_get (openat + statx + read) in libkvfs
def s2():
    class Ts(ctypes.Structure):
        _fields_ = [("sec", ctypes.c_int64), ("nsec", ctypes.c_uint32), ("r", ctypes.c_int32)]
    class Statx(ctypes.Structure):
        _fields_ = [("mask", ctypes.c_uint32), ("blksize", ctypes.c_uint32),
                    ("attributes", ctypes.c_uint64), ("nlink", ctypes.c_uint32),
                    ("uid", ctypes.c_uint32), ("gid", ctypes.c_uint32),
                    ("mode", ctypes.c_uint16), ("pad", ctypes.c_uint16),
                    ("ino", ctypes.c_uint64), ("size", ctypes.c_uint64),
                    ("blocks", ctypes.c_uint64), ("amask", ctypes.c_uint64),
                    ("atime", Ts), ("btime", Ts), ("ctime", Ts), ("mtime", Ts),
                    ("rdev_major", ctypes.c_uint32), ("rdev_minor", ctypes.c_uint32),
                    ("dev_major", ctypes.c_uint32), ("dev_minor", ctypes.c_uint32),
                    ("mnt_id", ctypes.c_uint64), ("spare", ctypes.c_uint64 * 13)]
    def statx(fd, path=b"", flags=0x1000):  # AT_EMPTY_PATH
        sx = Statx()
        if libc.statx(fd, path, flags, 0xfff, ctypes.byref(sx)):
            return errno.errorcode[ctypes.get_errno()]
        return (hex(sx.mask & 0x17ff), oct(sx.mode), sx.size, sx.ino, sx.nlink,
                sx.uid, sx.gid, sx.blksize, sx.blocks, sx.mtime.sec,
                sx.mtime.nsec, sx.ctime.sec, sx.dev_major, sx.dev_minor,
                sx.mnt_id)
    for name in (K, Z1):
        fd = os.open(f"{ns}/{name}", os.O_RDONLY)
        out(2, f"statx of the fd {name}", statx(fd))
        out(2, f"statx of the fd, NULL path {name}", statx(fd, None))
        out(2, f"statx of the name {name}", statx(-100, f"{ns}/{name}".encode(), 0x100))
        os.close(fd)
    fd = os.open(f"{pq}/shared", os.O_RDONLY)
    out(2, "statx of a path file's fd", statx(fd))
    os.close(fd)
    kv = ctypes.CDLL(libkvfs)
    kv.kvfs_get.restype = ctypes.c_long
    key = ctypes.create_string_buffer(16)
    nsfd = os.open(ns, os.O_RDONLY | os.O_DIRECTORY)
    buf = ctypes.create_string_buffer(4 << 20)
    kv.kvfs_key_parse(K.encode(), 32, key)
    n = kv.kvfs_get(nsfd, key, buf, len(buf))
    out(2, "kvfs_get", (n, hashlib.sha1(buf.raw[:max(n, 0)]).hexdigest()))
    os.close(nsfd)

section(2, s2)
# 3: fstat of a key namespace's chunk is stat(2) of its name
def s3():
    inos = []
    for name in (K, Z1, Z2):
        fd = os.open(f"{ns}/{name}", os.O_RDONLY)
        s, t = os.fstat(fd), os.stat(f"{ns}/{name}")
        f = ("st_ino", "st_dev", "st_mode", "st_uid", "st_gid", "st_size",
             "st_nlink", "st_mtime_ns", "st_ctime_ns", "st_blksize", "st_blocks")
        out(3, f"fstat == stat {name}", [x for x in f if getattr(s, x) != getattr(t, x)] or "equal")
        inos.append(s.st_ino)
        os.close(fd)
    out(3, "st_ino nonzero and distinct", 0 not in inos and len(set(inos)) == 3)
    # what programs built against glibc < 2.33 call for fstat
    fd = os.open(f"{ns}/{K}", os.O_RDONLY)
    b, b2 = ctypes.create_string_buffer(144), ctypes.create_string_buffer(144)
    r = (libc.__fxstat64(1, fd, b), libc.__fxstatat64(1, fd, b"", b2, 0x1000))
    ino_size = lambda x: (int.from_bytes(x.raw[8:16], "little"), int.from_bytes(x.raw[48:56], "little"))
    t = os.stat(f"{ns}/{K}")
    out(3, "__fxstat64, __fxstatat64 == stat", (r, ino_size(b) == ino_size(b2) == (t.st_ino, t.st_size)))
    os.close(fd)
    f = ctypes.c_void_p(libc.fopen(f"{ns}/{K}".encode(), b"r"))
    s, t = os.fstat(libc.fileno(f)), os.stat(f"{ns}/{K}")
    out(3, "fopen: fstat of its fileno == stat", [x for x in ("st_ino", "st_dev", "st_mtime_ns", "st_size", "st_mode") if getattr(s, x) != getattr(t, x)] or "equal")
    libc.fclose(f)
    d = f"{os.path.dirname(pq)}/../{tag}-cp"
    os.makedirs(d, exist_ok=True)
    r = subprocess.run(["cp", f"{ns}/{K}", f"{d}/k"], capture_output=True)
    out(3, "cp of a chunk", (r.returncode, r.stderr[:80], hashlib.sha1(rd(f"{d}/k", 1 << 30)).hexdigest()))
    r = subprocess.run(["cp", "-a", ns, f"{d}/a"], capture_output=True)
    out(3, "cp -a of the namespace", (r.returncode, r.stderr[:80], sorted(os.listdir(f"{d}/a"))))

section(3, s3)
# 4: locks between two processes, each with its own read fd
def s4():
    fd = os.open(f"{ns}/{K}", os.O_RDONLY)
    out(4, "flock LOCK_EX", call(lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)))
    def other(f):  # f on another process's own fd of the chunk
        return child(lambda: f(os.open(f"{ns}/{K}", os.O_RDONLY)))
    out(4, "another process's flock LOCK_EX", other(lambda b: fcntl.flock(b, fcntl.LOCK_EX | fcntl.LOCK_NB)))
    out(4, "lockf LOCK_EX on a read fd", call(lambda: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)))
    out(4, "lockf LOCK_SH", call(lambda: fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)))
    out(4, "another process's lockf LOCK_SH", other(lambda b: fcntl.lockf(b, fcntl.LOCK_SH | fcntl.LOCK_NB)))
    os.close(fd)
    # fcntl's locks, on a fresh fd (the first call that needs the file)
    fd = os.open(f"{ns}/{Z2}", os.O_RDONLY)
    out(4, "lockf LOCK_SH (fcntl F_SETLK)", call(lambda: fcntl.lockf(fd, fcntl.LOCK_SH)))
    def getlk(b):  # the lock F_GETLK finds for a write lock, its type
        fl = struct.pack("@hhqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0)
        return struct.unpack("@hhqqi4x", fcntl.fcntl(b, fcntl.F_GETLK, fl))[0]
    out(4, "another process's F_GETLK finds it", child(lambda: getlk(os.open(f"{ns}/{Z2}", os.O_RDONLY)) == fcntl.F_RDLCK))
    os.close(fd)
    fd = os.open(f"{ns}/{Z1}", os.O_RDONLY)
    out(4, "flock LOCK_SH, then read", (call(lambda: fcntl.flock(fd, fcntl.LOCK_SH)), os.read(fd, 5000) == rd(f"{ns}/{Z1}", 5000)))
    os.close(fd)

section(4, s4)
# 5: close_range over a writer publishes it (as close); a subprocess
# (vfork, close_range in the child) leaves the parent's served fds
def s5():
    w = f"{wns}/{'abc'['plain pre memfd'.split().index(tag)]}{'0' * 31}"
    data = os.urandom(3000)
    fd = os.open(w, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, data)
    os.closerange(fd, fd + 1)
    out(5, "closerange over a writer: published", os.path.exists(w) and rd(w, 5000) == data)
    fd = os.open(f"{ns}/{K}", os.O_RDONLY)
    subprocess.run(["true"], close_fds=True)
    out(5, "a served fd after a subprocess", os.read(fd, 16) == rd(f"{ns}/{K}", 16))
    os.closerange(fd, fd + 1)
    out(5, "read after closerange", call(lambda: os.read(fd, 1)))

section(5, s5)
# 6: preadv2
def s6():
    fd = os.open(f"{ns}/{K}", os.O_RDONLY)
    want = rd(f"{ns}/{K}", 100)
    b = bytearray(10)
    out(6, "preadv at 5", (call(lambda: os.preadv(fd, [b], 5)), bytes(b) == want[5:15]))
    os.lseek(fd, 20, 0)
    out(6, "preadv2 at -1 (the offset)", (call(lambda: os.preadv(fd, [b], -1)), bytes(b) == want[20:30], os.lseek(fd, 0, 1)))
    out(6, "preadv2 RWF_HIPRI", call(lambda: os.preadv(fd, [b], 0, os.RWF_HIPRI)))
    out(6, "preadv2 RWF_NOWAIT", call(lambda: os.preadv(fd, [b], 0, os.RWF_NOWAIT)))
    out(6, "preadv2 bad flag", call(lambda: os.preadv(fd, [b], 0, 1 << 30)))
    os.close(fd)

section(6, s6)
# 7: the rest
def s7():
    want = rd(f"{ns}/{K}", 100)
    fd = os.open(f"{ns}/{K}", os.O_RDONLY)
    os.lseek(fd, 7, 0)
    try:
        g = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
        out(7, "/proc/self/fd/N reopened", (os.read(g, 10) == want[:10], os.lseek(fd, 0, 1), attrs(os.fstat(g))))
        os.close(g)
    except OSError as e:
        out(7, "/proc/self/fd/N reopened", errno.errorcode[e.errno])
    try:
        g = os.open(f"/dev/fd/{fd}", os.O_RDONLY)
        out(7, "/dev/fd/N reopened", os.pread(g, 10, 0) == want[:10])
        os.close(g)
    except OSError as e:
        out(7, "/dev/fd/N reopened", errno.errorcode[e.errno])
    sfs = ctypes.create_string_buffer(120)
    out(7, "fstatfs f_type", (libc.fstatfs(fd, sfs), hex(int.from_bytes(sfs.raw[:8], "little"))))
    v = os.fstatvfs(fd)
    out(7, "fstatvfs", (v.f_bsize, v.f_frsize, v.f_namemax, v.f_blocks > 0))
    out(7, "readahead", libc.readahead(fd, ctypes.c_int64(0), ctypes.c_size_t(4096)))
    out(7, "posix_fadvise", (call(lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)), call(lambda: os.posix_fadvise(fd, 0, 0, 99))))
    out(7, "flistxattr", call(lambda: sorted(os.listxattr(fd))))
    out(7, "fgetxattr checksum", call(lambda: os.getxattr(fd, "user.kvfs.checksum")))
    out(7, "F_GETFL", fcntl.fcntl(fd, fcntl.F_GETFL))
    out(7, "fsync", call(lambda: os.fsync(fd)))
    out(7, "read after", (os.lseek(fd, 0, 1), os.read(fd, 10) == want[7:17]))
    os.close(fd)
    fd = os.open(f"{ns}/{K}", os.O_RDONLY)
    out(7, "faccessat(fd, \"\", W_OK, AT_EMPTY_PATH)", child(lambda: libc.faccessat(fd, b"", os.W_OK, 0x1000) and errno.errorcode[ctypes.get_errno()], True))
    os.close(fd)
    fd = os.open(f"{ns}/{Z1}", os.O_RDONLY | os.O_NONBLOCK)
    out(7, "F_GETFL O_NONBLOCK", fcntl.fcntl(fd, fcntl.F_GETFL))
    os.close(fd)
section(7, s7)
# 8: the name rewritten in place (O_TRUNC) after the open; lines "8x"
# (the calls' own answers: ESTALE preloaded where the plain fd's old inode
# answers) are shown, not compared
def s8():
    v1, v2 = b"1" * 300000, b"2" * 1000
    for what in ("fchmod", "flock", "fsync", "fgetxattr", "link chmod"):
        p = f"{pq}/{tag}-trunc-{what.replace(' ', '')}"
        with open(p, "wb") as f:
            f.write(v1)
        fd = os.open(p, os.O_RDONLY)
        b = os.read(fd, 10)
        with open(p, "wb") as f:  # O_TRUNC: a new version, the same st_ino
            f.write(v2)
        call_ = None
        if what == "fchmod":
            out(8, what, call(lambda: os.fchmod(fd, 0o600)))
        elif what == "link chmod":  # as fchmod
            out(8, what, call(lambda: os.chmod(f"/proc/self/fd/{fd}", 0o600)))
        elif what == "flock":
            call_ = lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        elif what == "fsync":
            call_ = lambda: os.fsync(fd)
        else:
            call_ = lambda: os.getxattr(fd, "user.kvfs.tier")
        if call_:
            out("8x", what, call(call_))
        b += os.read(fd, 400000)
        out(8, f"{what}: the fd reads the old version", (len(b), b == v1))
        out(8, f"{what}: fstat size, mode", (os.fstat(fd).st_size, oct(os.fstat(fd).st_mode)))
        out(8, f"{what}: pread at 0", os.pread(fd, 5, 0))
        os.close(fd)
        out(8, f"{what}: the name", (oct(os.stat(p).st_mode), rd(p, 1 << 20) == v2))

section(8, s8)
# 9: reads in one thread, a realize (fchmod) in another, on one fd
def s9():
    import threading
    p = f"{pq}/{tag}-threads"
    data = os.urandom(1 << 20)
    with open(p, "wb") as f:
        f.write(data)
    bad = []
    for it in range(150):
        fd = os.open(p, os.O_RDONLY)
        rfd = os.dup(fd) if it % 2 else fd
        got = []
        def reader():
            b = []
            while True:
                x = os.read(rfd, 4096)
                if not x:
                    break
                b.append(x)
            got.append(b"".join(b))
        t = threading.Thread(target=reader)
        t.start()
        os.fchmod(fd, 0o644)
        t.join()
        if rfd != fd:
            os.close(rfd)
        os.close(fd)
        if got[0] != data:
            bad.append(len(got[0]))
    out(9, "wrong reads of 150", (len(bad), bad[:4]))

section(9, s9)
EOF

libkvfs=$PWD/${KVFS_PLAIN_BUILD:-build}/libkvfs.so
run() { # TAG [KVFS_PRELOAD]
	(cd "$tmp" && ${2:+env LD_PRELOAD=$PRELOAD KVFS_PRELOAD=$2} "$PY" calls.py \
		"$ns" "$pq" "$wns" "$1" "$K" "$Z1" "$Z2" "$libkvfs") >"$tmp/$1.out" 2>&1
}
gets0=$(stat ioctl.xfer.gets)
run plain
sed 's/^/  # plain: /' "$tmp/plain.out"
gets1=$(stat ioctl.xfer.gets)
check "plain: no GET" test "$gets1" = "$gets0"
# served from memory (a socket fd), and as a memfd (KVFS_PRELOAD=memfd,
# as fopen's FILEs are)
for mode in pre memfd; do
	run "$mode" "$([ $mode = pre ] && echo 1 || echo memfd)"
	gets2=$(stat ioctl.xfer.gets)
	if [ $((gets2 - gets1)) -ge 20 ]; then
		ok "$mode: the opens were served ($((gets2 - gets1)) GETs)"
	else
		bad "$mode: $((gets2 - gets1)) GETs"
	fi
	gets1=$gets2
	diff "$tmp/plain.out" "$tmp/$mode.out" | sed "s/^/  # $mode: /"
	for f in 1 2 3 4 5 6 7 8 9; do
		if [ -s "$tmp/plain.out" ] && grep -q "^$f " "$tmp/$mode.out" &&
			diff <(grep "^$f " "$tmp/plain.out") <(grep "^$f " "$tmp/$mode.out") >/dev/null; then
			ok "$mode $f: answers as plain"
		else
			bad "$mode $f: differs from plain"
		fi
	done
done
# what must hold in both (so that "the same" is the right answer)
expect() { # DESC LINE
	if grep -qxF "$2" "$tmp/pre.out" && grep -qxF "$2" "$tmp/plain.out" &&
		grep -qxF "$2" "$tmp/memfd.out"; then
		ok "$1"
	else
		bad "$1: no line '$2'"
	fi
}
[ "$(id -u)" = 0 ] && expect "1: after fchmod 0600 another uid is refused" "1 another uid opens it: 'EACCES'"
expect "1: a replaced version's fchmod: the old one changed" "1 replaced: fstat of the fd: ('0o100600', 1, 1, 300, 0, 5000000000)"
expect "3: st_ino of chunks nonzero and distinct" "3 st_ino nonzero and distinct: True"
expect "4: the other process's flock is refused" "4 another process's flock LOCK_EX: 'EAGAIN'"
expect "4: the other process's F_GETLK finds the lock" "4 another process's F_GETLK finds it: ('ok', True)"
expect "5: close_range over a writer publishes" "5 closerange over a writer: published: True"
expect "5: a subprocess leaves served fds" "5 a served fd after a subprocess: True"
expect "8: fchmod of an fd whose name was rewritten (O_TRUNC): 0" "8 fchmod: ok"
expect "8: ... the fd still reads the old version" "8 fchmod: the fd reads the old version: (300000, True)"
expect "8: ... the name keeps its mode" "8 fchmod: the name: ('0o100644', True)"
expect "8: ... the fd's fstat: the old size, the new mode" "8 fchmod: fstat size, mode: (300000, '0o100600')"
expect "8: chmod of its /proc/self/fd link: as fchmod" "8 link chmod: fstat size, mode: (300000, '0o100600')"
expect "9: reads racing a realize: all the file's bytes" "9 wrong reads of 150: (0, [])"
# the calls that need the file, where the name holds another version now:
# ESTALE preloaded (lib/preload/README.md), the fd kept as it was
for what in flock fsync fgetxattr; do
	if grep -qxF "8x $what: ESTALE" "$tmp/pre.out" &&
		grep -qxF "8x $what: ESTALE" "$tmp/memfd.out"; then
		ok "8: $what of a rewritten name's fd: ESTALE"
	else
		bad "8: $what of a rewritten name's fd: not ESTALE"
	fi
done
expect "2: kvfs_get under the preload: the 3 MiB chunk" \
	"2 kvfs_get: (3145728, '$(sha1sum <"$tmp/k" | cut -c1-40)')"

echo "1..$n"
[ "$fails" = 0 ]
