#!/usr/bin/env bash
# test_preload_write.sh - writes through libkvfs_preload.so (lib/preload/,
# preload_wr.c) against a real mount: every scenario an engine can observe
# (bytes, mode/owner after publication, EEXIST of O_EXCL, EPERM of O_TRUNC
# on a published chunk, close's errors, fsync, fstat, lseek back, a hole,
# dup, ftruncate, fork, exec, exit without close, a writer killed, an empty
# chunk, chunk_bytes) is run twice, plainly in one namespace and preloaded
# in another, and the outcomes must be identical; then what only the
# preload shows: one KVFS_IOC_PUT and no FUSE CREATE per served chunk,
# nothing visible before close, a racing writer told EEXIST at close, the
# settling fallbacks going through CREATE, KVFS_PRELOAD_WRITES=lazy (no
# LOOKUP at open, EEXIST at close), another uid refused at open.
set -u
T=test_preload_write
# shellcheck source=tests/sh/preload_test.sh
. "$(dirname "$0")/preload_test.sh"
preload_mount || exit 1
for d in plain pre cb_plain cb_pre; do
	mkdir "$tmp/m/$d" || exit 1
done
for d in cb_plain cb_pre; do
	"$PY" -c 'import os, sys; os.setxattr(sys.argv[1], "user.kvfs.chunk_bytes", b"4096")' \
		"$tmp/m/$d" || exit 1
done

# The scenarios: one line of outcome each, the same plainly and preloaded.
cat >"$tmp/scen.py" <<'EOF'
import errno, hashlib, json, os, signal, subprocess, sys
ns, cbns = sys.argv[1], sys.argv[2]
data = bytes((i * 131 + int(sys.argv[3])) & 255 for i in range(300000))
out = {}
def key(i):
    return f"{ns}/{i:032x}"
def err(f):
    try:
        return ("ok", f())
    except OSError as e:
        return ("err", errno.errorcode[e.errno])
def published(i):
    p = key(i)
    if not os.path.exists(p):
        return None
    st = os.stat(p)
    with open(p, "rb") as f:
        b = f.read()
    return [oct(st.st_mode), st.st_uid, st.st_gid, st.st_size,
            hashlib.sha1(b).hexdigest()]
def wopen(i, flags=0, mode=0o640, p=None):
    return os.open(p or key(i), os.O_WRONLY | os.O_CREAT | flags, mode)

# 1 two writes, close
fd = wopen(1, os.O_EXCL)
os.write(fd, data[:100000]); os.write(fd, data[100000:])
out["basic"] = [err(lambda: os.close(fd)), published(1)]
# 2-4 an existing (published) key
out["excl existing"] = err(lambda: os.close(wopen(1, os.O_EXCL)))
out["trunc existing"] = err(lambda: os.close(wopen(1, os.O_TRUNC)))
out["creat existing"] = err(lambda: os.close(wopen(1)))
# 5 lseek back, overwrite, pwrite inside, O_TRUNC of a new key
fd = wopen(5, os.O_TRUNC)
os.write(fd, b"hello world"); os.lseek(fd, 0, os.SEEK_SET)
os.write(fd, b"J"); os.pwrite(fd, b"W", 6)
out["seek back"] = [os.lseek(fd, 0, os.SEEK_CUR), os.lseek(fd, 0, os.SEEK_END),
                    err(lambda: os.close(fd)), published(5)]
# 6 a hole
fd = wopen(6)
os.write(fd, b"ab")
out["hole"] = [err(lambda: os.pwrite(fd, b"cd", 10)),
               err(lambda: os.close(fd)), published(6)]
# 7 fsync, then more
fd = wopen(7)
os.write(fd, data[:5000])
out["fsync"] = [err(lambda: os.fsync(fd)), err(lambda: os.write(fd, data[5000:9000])),
                err(lambda: os.close(fd)), published(7)]
# 8 fstat while written (not st_ino/times: the writer's own)
fd = wopen(8, os.O_EXCL, 0o600)
os.write(fd, data[:777])
st = os.fstat(fd)
out["fstat"] = [oct(st.st_mode), st.st_uid, st.st_gid, st.st_size,
                st.st_nlink, err(lambda: os.write(fd, b"x")),
                err(lambda: os.close(fd)), published(8)]
# 9 dup: both fds write, both closed
fd = wopen(9)
os.write(fd, b"one ")
fd2 = os.dup(fd)
os.write(fd2, b"two ")
os.write(fd, b"three")
out["dup"] = [err(lambda: os.close(fd2)), err(lambda: os.close(fd)),
              published(9)]
# 10 ftruncate
fd = wopen(10)
os.write(fd, data[:3000])
out["ftruncate"] = [err(lambda: os.ftruncate(fd, 1000)),
                    err(lambda: os.write(fd, b"tail")),
                    err(lambda: os.close(fd)), published(10)]
# 11 read on a write-only fd, F_GETFL
import fcntl
fd = wopen(11)
os.write(fd, b"abc")
out["read wronly"] = [err(lambda: os.read(fd, 1)),
                      fcntl.fcntl(fd, fcntl.F_GETFL) & (os.O_ACCMODE | os.O_NONBLOCK),
                      err(lambda: os.close(fd)), published(11)]
# 12 fork: the child exits at once, the parent goes on
fd = wopen(12)
os.write(fd, data[:4000])
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
os.write(fd, data[4000:8000])
out["fork"] = [err(lambda: os.close(fd)), published(12)]
# 12b fork at the fd limit (the library cannot settle its writer then):
# the child's close publishes nothing, the parent's writes all land
import resource
fd = wopen(91)
os.write(fd, data[:4000])
top = os.dup(0)
os.close(top)
lim = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (top, lim[1]))
pid = os.fork()
if pid == 0:
    os._exit(0 if err(lambda: os.close(fd)) == ("ok", None) else 1)
st = os.waitpid(pid, 0)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, lim)
os.write(fd, data[4000:8000])
out["fork_at_fd_limit"] = [os.waitstatus_to_exitcode(st),
                               err(lambda: os.close(fd)), published(91)]
# 13 exit, _exit, SIGKILL, exec without a close (a child process each)
prog = """
import os, signal, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"x" * 70000)
how = sys.argv[2]
if how == "exit": sys.exit(0)
if how == "_exit": os._exit(0)
if how == "kill": os.kill(os.getpid(), signal.SIGKILL)
if how == "exec": os.execv("/bin/true", ["true"])
"""
for i, how in ((13, "exit"), (14, "_exit"), (15, "kill"), (16, "exec")):
    subprocess.run([sys.executable, "-c", prog, key(i), how])
    out["no_close_" + how] = published(i)
# 17 an empty chunk
fd = wopen(17, os.O_EXCL)
out["empty"] = [err(lambda: os.close(fd)), published(17)]
# 18 chunk_bytes 4096: a wrong size, an empty O_EXCL, the right size
p = f"{cbns}/{18:032x}"
fd = wopen(0, 0, 0o644, p)
os.write(fd, data[:1000])
r1 = err(lambda: os.close(fd))
fd = wopen(0, os.O_EXCL, 0o644, p)
r2 = err(lambda: os.close(fd))
fd = wopen(0, os.O_EXCL, 0o644, p)
os.write(fd, data[:4096])
r3 = err(lambda: os.close(fd))
out["chunk_bytes"] = [r1, r2, r3, os.path.getsize(p)]
# 19 writev, pwritev
fd = wopen(19)
os.writev(fd, [b"a" * 10, b"b" * 20])
os.pwritev(fd, [b"c" * 5], 30)
out["writev"] = [err(lambda: os.close(fd)), published(19)]
# 20 O_APPEND (not served: the plain path either way)
fd = wopen(20, os.O_APPEND)
os.write(fd, b"appended")
out["append"] = [err(lambda: os.close(fd)), published(20)]
for k, v in out.items():
    print(k, json.dumps(v))
EOF
"$PY" "$tmp/scen.py" "$tmp/m/plain" "$tmp/m/cb_plain" 7 >"$tmp/plain.out" 2>&1
puts0=$(stat ioctl.xfer.puts) creates0=$(stat requests.create)
pre "$PY" "$tmp/scen.py" "$tmp/m/pre" "$tmp/m/cb_pre" 7 >"$tmp/pre.out" 2>&1
puts1=$(stat ioctl.xfer.puts) creates1=$(stat requests.create)
while read -r name rest; do
	got=$(grep -F "$name " "$tmp/pre.out" | head -1)
	if [ "$got" = "$name $rest" ]; then
		ok "same outcome preloaded and plain: $name $rest"
	else
		bad "$name: plain $rest, preloaded ${got#"$name "}"
	fi
done <"$tmp/plain.out"
# a run that stopped says where (its traceback), as TAP comments
if ! cmp -s "$tmp/plain.out" "$tmp/pre.out"; then
	sed 's/^/# plain: /' "$tmp/plain.out" | tail -n 15
	sed 's/^/# preloaded: /' "$tmp/pre.out" | tail -n 15
fi
if [ "$(wc -l <"$tmp/plain.out")" -ge 20 ]; then
	ok "every scenario ran"
else
	bad "scenarios: $(cat "$tmp/plain.out")"
fi
# served without FUSE's CREATE: the basic, seek back, writev, exit and
# _exit chunks, and the chunk_bytes ones (but the empty O_EXCL)
if [ $((puts1 - puts0)) -ge 7 ]; then
	ok "served chunks published by KVFS_IOC_PUT ($((puts1 - puts0)))"
else
	bad "only $((puts1 - puts0)) PUTs"
fi

# --- what only the preload shows
k=00000000000000000000000000000abc
creates0=$(stat requests.create) puts0=$(stat ioctl.xfer.puts)
out=$(pre "$PY" - "$tmp/m/pre/$k" <<'EOF' 2>&1
import errno, os, sys
p = sys.argv[1]
fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"first" * 1000)
print("visible before close:", os.path.exists(p))
fd2 = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd2, b"second" * 1000)
os.close(fd)
try:
    os.close(fd2)
    print("racing close: 0")
except OSError as e:
    print("racing close:", errno.errorcode[e.errno])
print("bytes are the first writer's:", open(p, "rb").read() == b"first" * 1000)
EOF
)
for want in "visible before close: False" "racing close: EEXIST" \
	"bytes are the first writer's: True"; do
	case $out in
	*"$want"*) ok "preloaded: $want" ;;
	*) bad "preloaded: want '$want', got: $out" ;;
	esac
done
if [ "$(stat requests.create)" = "$creates0" ] &&
   [ $(($(stat ioctl.xfer.puts) - puts0)) -ge 1 ]; then
	ok "a served write: no FUSE CREATE, a PUT"
else
	bad "creates $creates0 -> $(stat requests.create), puts $puts0 -> $(stat ioctl.xfer.puts)"
fi
# fsync settles: the plain path's CREATE
k2=00000000000000000000000000000abd
creates0=$(stat requests.create)
pre "$PY" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"z" * 100); os.fsync(fd); os.close(fd)' "$tmp/m/pre/$k2"
if [ "$(stat requests.create)" -gt "$creates0" ] &&
   [ "$(head -c 100 "$tmp/m/pre/$k2")" = "$(printf 'z%.0s' $(seq 100))" ]; then
	ok "fsync settled the chunk onto the plain path, bytes exact"
else
	bad "fsync: creates $creates0 -> $(stat requests.create)"
fi
# KVFS_PRELOAD_WRITES=0: the plain path
k3=00000000000000000000000000000abe
creates0=$(stat requests.create)
KVFS_PRELOAD_WRITES=0 pre "$PY" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"q" * 100); os.close(fd)' "$tmp/m/pre/$k3"
if [ "$(stat requests.create)" -gt "$creates0" ]; then
	ok "KVFS_PRELOAD_WRITES=0: the plain path"
else
	bad "KVFS_PRELOAD_WRITES=0: no CREATE"
fi

# KVFS_PRELOAD_WRITES=lazy: no LOOKUP at open (one round trip per chunk,
# the PUT); a key already there is EEXIST at close, its bytes untouched
k4=00000000000000000000000000000ac0 k5=00000000000000000000000000000ac1
lookups0=$(stat requests.lookup) puts0=$(stat ioctl.xfer.puts)
KVFS_PRELOAD_WRITES=lazy pre "$PY" -c 'import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"lazy" * 1000); os.close(fd)' "$tmp/m/pre/$k4" "$tmp/m/pre/$k5"
# at most one LOOKUP: the namespace's own name, when its entry expired
if [ $(($(stat requests.lookup) - lookups0)) -le 1 ] &&
   [ $(($(stat ioctl.xfer.puts) - puts0)) -eq 2 ] &&
   [ "$(cat "$tmp/m/pre/$k4")" = "$(printf 'lazy%.0s' $(seq 1000))" ]; then
	ok "KVFS_PRELOAD_WRITES=lazy: two chunks, two PUTs, no LOOKUP of their keys"
else
	bad "lazy: lookups $lookups0 -> $(stat requests.lookup), puts $puts0 -> $(stat ioctl.xfer.puts)"
fi
out=$(KVFS_PRELOAD_WRITES=lazy pre "$PY" -c 'import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
print("open: 0")
os.write(fd, b"other" * 1000)
try:
    os.close(fd); print("close: 0")
except OSError as e:
    print("close:", errno.errorcode[e.errno])
print("bytes kept:", open(sys.argv[1], "rb").read() == b"first" * 1000)' \
	"$tmp/m/pre/$k" 2>&1)
if [ "$out" = "open: 0
close: EEXIST
bytes kept: True" ]; then
	ok "KVFS_PRELOAD_WRITES=lazy: an existing key is EEXIST at close, its bytes kept"
else
	bad "lazy, an existing key: $out"
fi

# a program that dup2s another directory onto the library's own fd of
# the writer's namespace (512+): never published elsewhere (it was, in
# that directory's namespace), the close says EBADF
mkdir "$tmp/m/other" || exit 1
k6=00000000000000000000000000000ac2
out=$(pre "$PY" -c 'import errno, os, sys
before = set(os.listdir("/proc/self/fd"))
fd = os.open(sys.argv[1] + "/" + sys.argv[3], os.O_WRONLY | os.O_CREAT, 0o644)
mine = sorted(int(f) for f in set(os.listdir("/proc/self/fd")) - before
              if int(f) >= 48)
d = os.open(sys.argv[2], os.O_RDONLY | os.O_DIRECTORY)
for f in mine:
    os.dup2(d, f)
os.write(fd, b"a" * 100)
try:
    os.close(fd); print("close: 0")
except OSError as e:
    print("close:", errno.errorcode[e.errno])
print("elsewhere:", os.path.exists(sys.argv[2] + "/" + sys.argv[3]))' 	"$tmp/m/pre" "$tmp/m/other" "$k6" 2>&1)
if [ "$out" = "close: EBADF
elsewhere: False" ]; then
	ok "the writer's namespace fd clobbered: EBADF at close, nothing elsewhere"
else
	bad "the writer's namespace fd clobbered: $out"
fi

# --- who may create: the kernel's answer at open, for another uid
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	echo "ok $((n + 1)) # skip EACCES as another uid: needs root and setpriv"
	n=$((n + 1))
else
	mkdir "$tmp/m/ro" "$tmp/m/rw" && chmod 755 "$tmp/m/ro" &&
		chmod 777 "$tmp/m/rw"
	as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	wr() { # DIR: what a create of a key there says, at open and close
		as_nobody env LD_PRELOAD="$PRELOAD" "$PY" -c 'import errno, os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
except OSError as e:
    print("open", errno.errorcode[e.errno]); sys.exit()
os.write(fd, b"n" * 5000); os.close(fd); print("stored")' "$1/$k"
	}
	case $(wr "$tmp/m/ro") in
	"open EACCES") ok "another uid, a 0755 namespace: EACCES at open" ;;
	*) bad "another uid, a 0755 namespace: $(wr "$tmp/m/ro")" ;;
	esac
	puts0=$(stat ioctl.xfer.puts)
	r=$(wr "$tmp/m/rw")
	if [ "$r" = stored ] && [ "$(stat ioctl.xfer.puts)" -gt "$puts0" ] &&
	   [ "$(ls -ln "$tmp/m/rw/$k" | awk '{print $1, $3}')" = "-r--r--r-- 0" ]; then
		ok "another uid, a 0777 namespace: stored by PUT, 0444, owned as the namespace"
	else
		bad "another uid, a 0777 namespace: $r, $(ls -ln "$tmp/m/rw/$k")"
	fi
fi

# --- a write the library can neither buffer nor settle (review3 t19,
# t20): it fails with the settling's errno, copies nothing (a served
# reader's buffer beside the writer's stays the chunk's), and close
# publishes nothing; a hole is zeros even in a reused buffer, at the fd
# limit too (no settling)
mkdir "$tmp/m/wf" || exit 1
head -c 200000 /dev/urandom >"$tmp/wf_r"
cp "$tmp/wf_r" "$tmp/m/wf/00000000000000000000000000000001" || exit 1
echo EXISTING >"$tmp/m/wf/00000000000000000000000000000002" || exit 1
cat >"$tmp/wf.py" <<'EOF2'
import errno, os, resource, subprocess, sys
ns, ref, case = sys.argv[1], sys.argv[2], sys.argv[3]
R, E = f"{ns}/{1:032x}", f"{ns}/{2:032x}"
want = open(ref, "rb").read()
def err(f):
    try:
        return f()
    except OSError as e:
        return errno.errorcode[e.errno]
def at_fd_limit(f):
    """f() with no fd left (the lowest free fd is the limit)"""
    old = resource.getrlimit(resource.RLIMIT_NOFILE)
    top = os.dup(0); os.close(top)
    resource.setrlimit(resource.RLIMIT_NOFILE, (top, old[1]))
    try:
        return err(f)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, old)
def reader():
    return os.open(R, os.O_RDONLY)
def intact(r):
    return os.pread(r, 300000, 0) == want
if case == "hole":  # a buffer another chunk's read left behind
    r = reader(); os.read(r, 300000); os.close(r)
    k = f"{ns}/{0x10:032x}"
    w = os.open(k, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(w, b"hello")
    out = [at_fd_limit(lambda: os.pwrite(w, b"Z", 200000)),
           os.pwrite(w, b"", 500000), os.lseek(w, 0, os.SEEK_END),
           err(lambda: os.close(w))]
    b = open(k, "rb").read()
    out.append(b == b"hello" + bytes(200000 - 5) + b"Z")
elif case == "max":  # past KVFS_PRELOAD_MAX at the fd limit: EMFILE
    r = reader(); os.read(r, 300000); os.close(r)
    k = f"{ns}/{0x11:032x}"
    w = os.open(k, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(w, b"hello")
    out = [at_fd_limit(lambda: os.pwrite(w, b"Z", 300000)),
           err(lambda: os.write(w, b"more")), err(lambda: os.close(w)),
           os.path.exists(k)]
elif case == "lazy":  # an existing key: settling is EEXIST
    w = os.open(E, os.O_WRONLY | os.O_CREAT, 0o644)
    r = reader()  # its buffer: the slab slot after the writer's
    os.write(w, b"hello")
    out = [err(lambda: os.pwrite(w, b"Z" * 65536, 262144)), intact(r),
           err(lambda: os.write(w, b"Z" * 1100000)), intact(r),
           err(lambda: os.write(w, b"x")), err(lambda: os.fsync(w)),
           err(lambda: os.close(w)), open(E, "rb").read().decode()]
elif case == "race":  # default mode: another process publishes the key
    k = f"{ns}/{0x12:032x}"
    env = dict(os.environ); env.pop("LD_PRELOAD")
    # started first: no child is made while the writer is open
    other = subprocess.Popen(["sh", "-c", f"read x; echo OTHER > {k}"],
                             env=env, stdin=subprocess.PIPE)
    w = os.open(k, os.O_WRONLY | os.O_CREAT, 0o644)
    other.stdin.write(b"go\n"); other.stdin.close()
    other.wait()
    r = reader()
    os.write(w, b"hello")
    out = [err(lambda: os.write(w, b"Z" * 1100000)), intact(r),
           err(lambda: os.close(w)), open(k, "rb").read().decode()]
print(case, out)
EOF2
wf() { # CASE WANT [ENV...]: the case's outcome, preloaded
	local case=$1 want=$2 got; shift 2
	got=$(env "$@" LD_PRELOAD="$PRELOAD" "$PY" "$tmp/wf.py" "$tmp/m/wf" \
		"$tmp/wf_r" "$case" 2>&1)
	if [ "$got" = "$case $want" ]; then
		ok "write not served nor settled: $case: $want"
	else
		bad "write not served nor settled: $case: want $want, got $got"
	fi
}
wf hole "[1, 0, 200001, None, True]"
wf max "['EMFILE', 'EMFILE', 'EMFILE', False]" KVFS_PRELOAD_MAX=300000
wf lazy "[65536, True, 'EEXIST', True, 'EEXIST', 'EEXIST', 'EEXIST', 'EXISTING\n']" \
	KVFS_PRELOAD_WRITES=lazy KVFS_PRELOAD_MAX=1000000
wf race "['EEXIST', True, 'EEXIST', 'OTHER\n']" KVFS_PRELOAD_MAX=1000000

# --- forks while another thread writes: each fork settles the chunks
# being written (the real writer takes the fd's number); the writing
# thread's next write must land after the buffered bytes, never under
# them (before the fix 1-8 chunks in 120 were published short, their
# writes and close having said success), and a child closing its fds
# (closerange, as before an exec) or just exiting never publishes the
# parent's chunk (before: EEXIST at the parent's close)
mkdir "$tmp/m/fk" || exit 1
for child in exit closerange; do
	pyrun "forks while a thread writes, children $child: every chunk whole, every close 0" \
		pre "$PY" - "$tmp/m/fk" "$child" <<'EOF'
import os, sys, threading
d, child = sys.argv[1], sys.argv[2]
N, piece = 60, 65536
errs, done = [], False
def writer():
    global done
    for i in range(N):
        p = f"{d}/{child[0]}{i:031x}"
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            for k in range(16):
                os.write(fd, bytes([i, k]) * (piece // 2))
            os.close(fd)
        except OSError as e:
            errs.append(f"{i}: {e}")
    done = True
t = threading.Thread(target=writer)
t.start()
forks = 0
while not done:
    pid = os.fork()
    if pid == 0:
        if child == "closerange":
            os.closerange(3, 4096)
        os._exit(0)
    os.waitpid(pid, 0)
    forks += 1
t.join()
bad = []
for i in range(N):
    got = open(f"{d}/{child[0]}{i:031x}", "rb").read()
    want = b"".join(bytes([i, k]) * (piece // 2) for k in range(16))
    if got != want:
        bad.append(f"{i}: {len(got)} bytes")
print(f"{forks} forks; errors {errs[:3]}; wrong chunks {bad[:3]}")
sys.exit(1 if errs or bad else 0)
EOF
done

# --- a write racing the close in another thread: EBADF, or its bytes in
# the published chunk, never a success whose bytes were dropped (before:
# the write waited for the close's PUT, then went into the buffer of a
# chunk already published: every chunk short by a record)
pyrun "a write racing close: every byte a write said it wrote is published" \
	pre "$PY" - "$tmp/m/fk" <<'EOF'
import os, sys, threading, time
d = sys.argv[1]
lost = []
for i in range(60):
    p = f"{d}/a{i:031x}"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    said, stop = [0], [False]
    def wr():
        while not stop[0]:
            try:
                said[0] += os.write(fd, b"x" * 4096)
            except OSError:
                break
    t = threading.Thread(target=wr)
    t.start()
    time.sleep(0.0002 + (i % 7) * 0.00005)
    os.close(fd)
    time.sleep(0.002)
    stop[0] = True
    t.join()
    pub = os.stat(p).st_size if os.path.exists(p) else 0
    if pub != said[0]:
        lost.append((i, said[0], pub))
print(f"chunks whose writes said more than was published: {lost[:3]}")
sys.exit(1 if lost else 0)
EOF

# --- exit and exec while threads write: every write that said success
# is published (before: a writer opened after the exit's or the exec's
# walk of the table was dropped with the process: 1-2 keys in 8 runs);
# a C program (Python's threads rarely open in that window)
if ! command -v cc >/dev/null; then
	echo "ok $((n + 1)) # skip exit/exec while threads write: no cc"
	n=$((n + 1))
else
	cat >"$tmp/wrexit.c" <<'EOF'
/* wrexit.c (review 17): writer threads (open/write 4 KiB records/close, new keys) while
 * main calls exit() / execv("/bin/true") / closefrom(3) (mode).
 * usage: wrexit run DIR LOG BASE NTHR MODE DELAY_US   (run under LD_PRELOAD or not)
 *        wrexit check DIR LOG BASE                     (run WITHOUT LD_PRELOAD)
 * LOG records per key: bytes acknowledged by successful writes, first
 * write error, close rc/errno. check: a key whose writes all said success
 * and whose close said 0 (or was never reached: exit/exec publishes) must be
 * published with exactly those bytes; any published key must hold only its
 * own records. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#define NK 4096 /* the last entry's werr: main's exit flag */
#define REC 4096
#define NREC 16
struct ent { volatile int after, closing, opened, ok, werr, closed, crc, cerr, fd; };
static struct ent *L; static const char *D; static unsigned long BASE;
static volatile int nextk; static int NT;
static void keyname(char *b, unsigned long k) { snprintf(b, 64, "%s/%032lx", D, k); }
static void fill(char *b, int k, int r) { memset(b, 'a' + (k * 7 + r) % 26, REC); snprintf(b, 32, "K%06dR%03d|", k, r); }
static void *thr(void *a) {
	char buf[REC], p[128];
	(void)a;
	for (;;) {
		int k = __sync_fetch_and_add(&nextk, 1);
		if (k >= NK - 1) return 0;
		keyname(p, BASE + k);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd < 0) { L[k].werr = errno; continue; }
		L[k].fd = fd; L[k].opened = 1; L[k].after = L[NK-1].werr;
		for (int r = 0; r < NREC; r++) {
			fill(buf, k, r);
			ssize_t w = write(fd, buf, REC);
			if (w != REC) { L[k].werr = w < 0 ? errno : 999; break; }
			L[k].ok += REC;
		}
		L[k].closing = 1;
		int c = close(fd);
		L[k].cerr = c ? errno : 0; L[k].crc = c; L[k].closed = 1;
	}
}
int main(int argc, char **argv) {
	D = argv[2]; BASE = strtoul(argv[4], 0, 0);
	int lf = open(argv[3], O_RDWR | O_CREAT, 0644);
	ftruncate(lf, sizeof(struct ent) * NK);
	L = mmap(0, sizeof(struct ent) * NK, PROT_READ | PROT_WRITE, MAP_SHARED, lf, 0);
	if (!strcmp(argv[1], "run")) {
		memset(L, 0, sizeof(struct ent) * NK);
		NT = atoi(argv[5]);
		for (int i = 0; i < NT; i++) { pthread_t t; pthread_create(&t, 0, thr, 0); }
		usleep(atoi(argv[7]));
		L[NK-1].werr = 1; /* the exit/exec flag */
		if (!strcmp(argv[6], "exit")) exit(0);
		if (!strcmp(argv[6], "_exit")) _exit(0);
		if (!strcmp(argv[6], "exec")) { execl("/bin/true", "true", (char *)0); perror("exec"); }
		if (!strcmp(argv[6], "closefrom")) { closefrom(4); usleep(200000); exit(0); }
		return 1;
	}
	int bad = 0, n = 0, lost = 0, wrong = 0;
	char p[128], want[REC], *got = malloc(REC * NREC + 1);
	for (int k = 0; k < NK; k++) {
		if (!L[k].opened) continue;
		n++;
		keyname(p, BASE + k);
		int fd = open(p, O_RDONLY);
		ssize_t g = 0;
		if (fd >= 0) { g = read(fd, got, REC * NREC + 1); close(fd); }
		int acked = !L[k].werr && !(L[k].closed && L[k].crc);
		/* own records only */
		int own = 1;
		for (ssize_t o = 0; fd >= 0 && o < g; o += REC) { fill(want, k, o / REC); if (memcmp(got + o, want, g - o < REC ? g - o : REC)) own = 0; }
		if (fd >= 0 && !own) { wrong++; printf("WRONG key %d: published %zd bytes not its own (ok=%d werr=%d closed=%d crc=%d/%d)\n", k, g, L[k].ok, L[k].werr, L[k].closed, L[k].crc, L[k].cerr); }
		if (acked && L[k].ok > 0 && (fd < 0 || g < L[k].ok)) {
			lost++; if (lost <= 5) printf("LOST key %d fd %d: acked %d bytes (opened after main began exit/exec=%d, in close=%d, writes ok, closed=%d crc=%d), published %s %zd\n", k, L[k].fd, L[k].ok, L[k].after, L[k].closing, L[k].closed, L[k].crc, fd < 0 ? "nothing" : "", g);
		}
	}
	bad = lost + wrong;
	printf("keys opened %d, lost %d, wrong %d\n", n, lost, wrong);
	return bad != 0;
}
EOF
	if ! cc -std=gnu11 -O1 -pthread -o "$tmp/wrexit" "$tmp/wrexit.c"; then
		bad "cc wrexit.c"
	else
		mkdir "$tmp/m/wx" || exit 1
		for how in exit _exit exec; do
			out="" base=$((0x4000000))
			[ "$how" = _exit ] && base=$((0x5000000))
			[ "$how" = exec ] && base=$((0x6000000))
			for r in 1 2 3 4 5 6 7 8; do
				base=$((base + 0x10000))
				pre "$tmp/wrexit" run "$tmp/m/wx" "$tmp/wx.log" \
					"$base" 3 "$how" $((2000 + r * 1500)) \
					>/dev/null 2>&1
				out+=$("$tmp/wrexit" check "$tmp/m/wx" "$tmp/wx.log" \
					"$base" | grep -E "LOST|WRONG")
			done
			if [ -z "$out" ]; then
				ok "$how while 3 threads write (8 runs): every acknowledged write published, only its own bytes"
			else
				bad "$how while 3 threads write: $(printf '%s' "$out" | head -c 300)"
			fi
		done
	fi
fi

echo "1..$n"
[ "$fails" = 0 ]
