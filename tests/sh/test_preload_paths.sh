#!/usr/bin/env bash
# test_preload_paths.sh - libkvfs_preload.so (lib/preload/) on the files
# of a path namespace (docs/paths.md), against a real mount: a read-only
# open (O_DIRECT included) of any file below a path namespace is served
# by one KVFS_IOC_GET with KVFS_XFER_NAMED (ioctl.xfer.gets +1,
# requests.open unchanged): vLLM's own load_block (O_RDONLY|O_DIRECT,
# readv into a page-aligned buffer), cat, sed, awk, head, tail, wc,
# md5sum, grep, cut, sort (fopen: a memfd), Python's
# open().read(), paths relative to the cwd and to a dirfd (of a
# directory, of the mount's root), a name with a space and a non-ASCII
# letter, the namespace or the whole mount bound elsewhere (a mount
# point with a space: mountinfo's escapes), KVFS_PRELOAD=memfd, another
# uid's readable file (also by a supplementary group); fstat of a served
# fd is the kernel's stat of the file. Every case the library leaves to
# the real open gives the kernel's bytes or errno: a "." or ".."
# component, a name whose O_TRUNC rewrite is open (the preloaded reader
# reads what a plain reader reads, before and after the writer's close),
# a bind mount of one directory over another (made before the library
# read mountinfo, or after: then only the daemon's st_ino check tells
# the two files of one size apart), a file another uid may not read
# (EACCES; also where its group or owner class forbids what others may),
# a miss (ENOENT), an empty file, a file over KVFS_PRELOAD_MAX,
# KVFS_PRELOAD=0, O_RDWR/O_WRONLY (EPERM), O_NOATIME (EPERM: not the
# caller's file), no_new_privs (served only with KVFS_PRELOAD_SANDBOXED=1).
# A reader's fd keeps its
# version across an O_TRUNC rewrite (fstat too, right after the writer's
# close), and readers racing 30 rewrites read whole versions, with no
# ESTALE, with the library and without; a reader racing same-size
# rewrites gets the bytes of the version its fstat describes (the GET's
# KVFS_XFER_MTIME), also with lazy reads. A key namespace's chunk
# is still served. About 9 s.
set -u
T=test_preload_paths
# shellcheck source=tests/sh/preload_test.sh
. "$(dirname "$0")/preload_test.sh"
binds=()
cleanup() {
	local b
	for b in "${binds[@]}"; do
		umount "$b" 2>/dev/null || umount -l "$b" 2>/dev/null
	done
	kvfs_sh_umount "$tmp/m" || echo "not ok - daemon lingered"
	rm -rf "$tmp"
}
trap cleanup EXIT

# counts: "GETS OPENS", ioctl.xfer.gets and requests.open
counts() { echo "$(stat ioctl.xfer.gets) $(stat requests.open)"; }
c0=
mark() { c0=$(counts); }
# served DESC: one GET and no FUSE open since mark
served() {
	local g0 o0 g1 o1
	read -r g0 o0 <<<"$c0"
	read -r g1 o1 <<<"$(counts)"
	if [ $((g1 - g0)) = 1 ] && [ "$o1" = "$o0" ]; then
		ok "$1: served (one GET, no FUSE open)"
	else
		bad "$1: gets +$((g1 - g0)), FUSE opens +$((o1 - o0)) (want +1, +0)"
	fi
}
# plain DESC MAXGETS: the real open since mark (a FUSE open), at most
# MAXGETS GETs (a GET the daemon refused before it)
plain() {
	local g0 o0 g1 o1
	read -r g0 o0 <<<"$c0"
	read -r g1 o1 <<<"$(counts)"
	if [ "$o1" -gt "$o0" ] && [ $((g1 - g0)) -le "$2" ]; then
		ok "$1: the real open (FUSE opens +$((o1 - o0)), gets +$((g1 - g0)))"
	else
		bad "$1: gets +$((g1 - g0)), FUSE opens +$((o1 - o0)) (want <= +$2, > 0)"
	fi
}

# allow_other: the EACCES check runs as another uid
opts=l1_size=64M
[ "$(id -u)" = 0 ] && opts=$opts,allow_other
kvfs_sh_mount "$tmp/m" -o "$opts" || exit 1
ns=$tmp/m/vllm
mkdir "$ns" &&
	"$PY" -c 'import os, sys; os.setxattr(sys.argv[1], "user.kvfs.names", b"paths")' "$ns" ||
	exit 1
# vLLM's layout: <model>_<hash>_r0/<hhh>/<hh>_g0/<hash>.bin, 2 MiB blocks
blocks=()
for i in 0 1 2 3; do
	h=$(printf 'block %d' "$i" | sha256sum | cut -c1-64)
	blocks+=("llama_0a1b2c3d4e5f_r0/${h:0:3}/${h:3:2}_g0/$h.bin")
	mkdir -p "$ns/$(dirname "${blocks[$i]}")" || exit 1
	head -c 2097152 /dev/urandom >"$tmp/b$i"
	cp "$tmp/b$i" "$ns/${blocks[$i]}" || exit 1
done
mkdir -p "$ns/a/b" "$ns/x" "$ns/y" || exit 1
head -c 1000 /dev/urandom >"$tmp/small"
cp "$tmp/small" "$ns/a/b/small.txt" || exit 1
cp "$tmp/small" "$ns/top.bin" && cp "$tmp/small" "$ns/a/b/sp ace é.bin" ||
	exit 1
: >"$ns/a/empty"


# --- served: vLLM's load_block, Python's open, relative paths, dirfd,
# fstat; "." and ".." components and a miss take the real open
out=$(pre "$PY" - "$ns" "$tmp" "${blocks[@]}" <<'EOF' 2>&1
import errno, mmap, os, stat, sys
from plt import check, counts, done, pyread
ns, tmp, blocks = sys.argv[1], sys.argv[2], sys.argv[3:]
def served(what, fn, n=1):
    g0, o0 = counts()
    r = fn()
    g1, o1 = counts()
    check(g1 - g0 == n and o1 == o0,
          f"{what}: served (gets +{g1 - g0}, FUSE opens +{o1 - o0}; "
          f"want +{n}, +0)")
    return r
def real(what, fn, gets=0):
    g0, o0 = counts()
    r = fn()
    g1, o1 = counts()
    check(g1 - g0 == gets and o1 > o0,
          f"{what}: the real open (gets +{g1 - g0}, FUSE opens "
          f"+{o1 - o0}; want +{gets}, > 0)")
    return r
want = [pyread(f"{tmp}/b{i}") for i in range(len(blocks))]
small = pyread(f"{tmp}/small")

# vLLM's load_block (vllm/v1/kv_offload/tiering/fs/io.py)
m = mmap.mmap(-1, 2 << 20)
view = memoryview(m)
def load_block(src):
    fd = os.open(src, os.O_RDONLY | os.O_DIRECT)
    try:
        if os.readv(fd, [view]) != len(view):
            raise OSError("short read")
    finally:
        os.close(fd)
def loads():
    for i, b in enumerate(blocks):
        load_block(f"{ns}/{b}")
        check(m[:] == want[i], f"load_block {i}: exact bytes")
served("vLLM's load_block of 4 blocks (O_RDONLY|O_DIRECT, readv)", loads,
       len(blocks))

check(served("open().read() of a 1,000-byte file",
             lambda: pyread(f"{ns}/a/b/small.txt")) == small,
      "open().read(): exact bytes")

# relative to the cwd, and to a dirfd (openat)
os.chdir(f"{ns}/a")
check(served("a path relative to the cwd", lambda: pyread("b/small.txt"))
      == small, "relative to the cwd: exact bytes")
os.chdir("b")
check(served("a bare name in the cwd", lambda: pyread("small.txt"))
      == small, "a bare name: exact bytes")
os.chdir("/")
dfd = os.open(f"{ns}/a", os.O_RDONLY | os.O_DIRECTORY)
def at():
    fd = os.open("b/small.txt", os.O_RDONLY, dir_fd=dfd)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)
check(served("openat(dirfd, \"b/small.txt\")", at) == small,
      "openat: exact bytes")
os.close(dfd)
# a dirfd of the mount's root; a file right below the namespace; a name
# with a space and a non-ASCII letter
rfd = os.open(os.path.dirname(ns), os.O_RDONLY | os.O_DIRECTORY)
def at_root():
    fd = os.open(os.path.basename(ns) + "/a/b/small.txt", os.O_RDONLY,
                 dir_fd=rfd)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)
check(served("openat(the mount's root, \"vllm/a/b/small.txt\")", at_root)
      == small, "openat from the root: exact bytes")
os.close(rfd)
check(served("a file right below the namespace",
             lambda: pyread(f"{ns}/top.bin")) == small,
      "top.bin: exact bytes")
check(served("a name with a space and an é",
             lambda: pyread(f"{ns}/a/b/sp ace é.bin")) == small,
      "\"sp ace é.bin\": exact bytes")

# fstat of a served fd: the kernel's stat of the file
for p, size in ((f"{ns}/{blocks[0]}", 2 << 20),
                (f"{ns}/a/b/small.txt", 1000)):
    fd = served(f"open of {os.path.basename(p)} for fstat",
                lambda: os.open(p, os.O_RDONLY))
    a, b = os.fstat(fd), os.stat(p)
    for f in ("st_ino", "st_mode", "st_size", "st_uid", "st_gid",
              "st_dev", "st_mtime_ns", "st_nlink"):
        check(getattr(a, f) == getattr(b, f),
              f"fstat {f} = stat's ({getattr(a, f)}, {getattr(b, f)})")
    check(stat.S_ISREG(a.st_mode) and a.st_size == size,
          "fstat: a regular file of its size")
    os.close(fd)

# "." and "..": no GET, the real open, the kernel's bytes
check(real("a \"..\" component",
           lambda: pyread(f"{ns}/a/../a/b/small.txt")) == small,
      "\"..\": exact bytes")
check(real("a \".\" component", lambda: pyread(f"{ns}/a/./b/small.txt"))
      == small, "\".\": exact bytes")
os.chdir(f"{ns}/a/b")
check(real("a relative \"../b/small.txt\"", lambda: pyread("../b/small.txt"))
      == small, "relative \"..\": exact bytes")
os.chdir("/")
# an empty file: the real open
check(real("an empty file", lambda: pyread(f"{ns}/a/empty")) == b"",
      "an empty file reads empty")
# a miss: ENOENT, nothing asked of the daemon but the lookup
g0, o0 = counts()
for p in (f"{ns}/a/b/none.bin", f"{ns}/nodir/none.bin"):
    try:
        pyread(p)
        check(False, f"a miss ({p}) fails")
    except OSError as e:
        check(e.errno == errno.ENOENT, f"a miss: ENOENT ({e})")
check(counts() == (g0, o0), "a miss: no GET, no FUSE open")
# O_RDWR and O_WRONLY are never served: the kernel's EPERM
for fl, name in ((os.O_RDWR, "O_RDWR"), (os.O_WRONLY, "O_WRONLY")):
    try:
        os.close(os.open(f"{ns}/a/b/small.txt", fl))
        check(False, f"{name} of a published file fails")
    except OSError as e:
        check(e.errno == errno.EPERM, f"{name} of a published file: "
              f"EPERM as before ({e})")
done()
EOF
)
rc=$?
say "$out"
check "python, preloaded: load_block, open().read(), cwd, dirfds, odd names, fstat, \".\", \"..\", empty, miss" \
	test "$rc" = 0

# --- cat
mark
check "cat of a 2 MiB block: exact bytes" cmp <(pre cat "$ns/${blocks[1]}") "$tmp/b1"
served "cat of a 2 MiB block"
mark
check "cat through \"..\": exact bytes" \
	cmp <(pre cat "$ns/x/../${blocks[1]}") "$tmp/b1"
plain "cat through \"..\"" 0

# --- the usual tools (stdio's fopen, lseek from the end, fstat): the
# output they give without the library, each open served
seq 20000 >"$ns/a/t.txt" || exit 1
same_output() { # CMD...: with the library, CMD's output without it
	local want
	want=$("$@" 2>&1 | md5sum)
	mark # the preloaded run's counts
	[ "$(pre "$@" 2>&1 | md5sum)" = "$want" ]
}
for c in "sed -n 5p" "awk NR==7" "head -c 100" "tail -n 3" "wc" "md5sum" \
	"grep -c 77" "cut -c1-3"; do
	# shellcheck disable=SC2086 # the command's words
	check "$c of a path file: the same output" same_output $c "$ns/a/t.txt"
	served "$c of a path file"
done
# fopen is served with a memfd (a FILE needs a real fd: sort calls
# fstat(fileno(fp)) and posix_fadvise on it)
check "sort -r of a path file (fopen, then fstat(fileno)): the same output" \
	same_output sort -r "$ns/a/t.txt"
served "sort -r of a path file"

# --- an O_TRUNC rewrite in progress: a plain (unpreloaded) driver holds
# the writer open; the preloaded reader reads what a plain reader reads,
# with the writer open and after its close
out=$("$PY" - "$ns/${blocks[2]}" "$PRELOAD" "$tmp/b2" <<'EOF' 2>&1
import os, subprocess, sys
from plt import check, counts, done
path, lib, old_file = sys.argv[1:4]
old = open(old_file, "rb").read()
new = os.urandom(1 << 20)
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
def cat(preload):
    e = dict(env, LD_PRELOAD=lib) if preload else env
    r = subprocess.run(["cat", path], env=e, stdout=subprocess.PIPE)
    return r.stdout if r.returncode == 0 else r.returncode
w = os.open(path, os.O_WRONLY | os.O_TRUNC)
os.write(w, new)
g0, o0 = counts()
got = cat(True)
g1, o1 = counts()
ref = cat(False)
check(got == ref, f"writer open: preloaded reader = plain reader "
      f"({'old bytes' if ref == old else 'new' if ref == new else ref})")
check(o1 > o0 and g1 - g0 <= 1,
      f"writer open: the real open (gets +{g1 - g0}, FUSE opens +{o1 - o0})")
os.close(w)
g0, o0 = counts()
got = cat(True)
g1, o1 = counts()
ref = cat(False)
check(got == ref == new, "writer closed: preloaded reader = plain reader "
      "= the new bytes")
check(g1 - g0 == 1 and o1 == o0,
      f"writer closed: served (gets +{g1 - g0}, FUSE opens +{o1 - o0})")
done()
EOF
)
rc=$?
say "$out"
check "an O_TRUNC rewrite in progress, then closed: the plain reader's bytes" \
	test "$rc" = 0

# --- a reader's fd across an O_TRUNC rewrite's close: it keeps its
# version's bytes and fstat (POSIX), with the library (a served fd) and
# without, while a stat of the name right after the close shows the new
# version; 100 rounds (before the fix: fstat ESTALE in up to 1 round in
# 4, and stats of the old size: the daemon's background thread dropped
# the kernel's entry of the name after the close returned, and until
# then the daemon could not tell fstat's GETATTR of the old version from
# a stat of the name through that entry; now the close drops it).
cat >"$tmp/keep.py" <<'EOF'
import errno, os, sys
from plt import check, done
path, rounds = sys.argv[1], 100
bad_fstat, bad_stat, bad_read = [], [], []
for i in range(rounds):
    old, new = b"old" * 1000, b"new!" * (100 + i % 7)
    with open(path, "wb") as f:
        f.write(old)
    fd = os.open(path, os.O_RDONLY)
    w = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(w, new)
    os.close(w)
    try:
        size = os.fstat(fd).st_size
    except OSError as e:
        size = errno.errorcode.get(e.errno, e.errno)
    if size != len(old):
        bad_fstat.append(size)
    if os.stat(path).st_size != len(new):
        bad_stat.append(i)
    if os.pread(fd, 4000, 0) != old:
        bad_read.append(i)
    os.close(fd)
print(f"fstat: {rounds - len(bad_fstat)}/{rounds} {bad_fstat[:5]}")
check(not bad_read, f"the fd reads its version, {rounds} rounds ({bad_read[:5]})")
check(not bad_stat, f"stat of the name after the rewrite's close: the new "
      f"version's size, {rounds} rounds ({bad_stat[:5]})")
done()
EOF
for how in plain preloaded; do
	if [ $how = plain ]; then
		out=$("$PY" "$tmp/keep.py" "$ns/keep_plain.bin" 2>&1)
	else
		out=$(pre "$PY" "$tmp/keep.py" "$ns/keep_pre.bin" 2>&1)
	fi
	rc=$?
	say "$out"
	check "a reader's fd across an O_TRUNC rewrite, $how: its bytes" \
		test "$rc" = 0
	got=$(printf '%s\n' "$out" | sed -n 's/^fstat: //p')
	if [ "${got%% *}" = 100/100 ]; then
		ok "$how: fstat right after the rewrite's close: the fd's version, 100/100"
	else
		bad "$how: fstat right after the rewrite's close: the fd's version, $got"
	fi
done

# --- readers racing O_TRUNC rewrites (3 versions, two of one size):
# each read is one whole version, and its fstat says its size; no call
# fails (an open racing a publication opens the version its lookup
# found, or the new one; fstat says its fd's version), and the writer's
# own stat and read right after each close see its new version; run
# without the library first (what the kernel's path gives), then with.
# Before the fix: ESTALE in every run (fstat of a replaced version's fd,
# and an open whose retried LOOKUP lost to a second publication).
cat >"$tmp/race.py" <<'EOF'
import collections, errno, json, os, sys, threading, time
from plt import check, counts, done, pyread
path, preloaded = sys.argv[1], sys.argv[2] == "1"
vers = [os.urandom(65536), os.urandom(65536), os.urandom(40000)]
with open(path, "wb") as f:
    f.write(vers[0])
stop, bad, reads, zeros = threading.Event(), [], [0], [0]
errs = collections.Counter()
def reader():
    while not stop.is_set():
        call = "open"
        try:
            with open(path, "rb") as f:
                call = "read"
                d = f.read()
                call = "fstat"
                size = os.fstat(f.fileno()).st_size
                # the kernel's: the writer's O_TRUNC open of the inode
                # this fd shares (the published version's) sets its size
                # to 0 an instant before it drops the cached attributes
                # (fuse_truncate_update_attr); then fstat asks the daemon
                for _ in range(100):
                    if size or not d:
                        break
                    zeros[0] += 1
                    time.sleep(0.001)
                    size = os.fstat(f.fileno()).st_size
        except OSError as e:
            errs[(call, errno.errorcode.get(e.errno, e.errno))] += 1
            continue
        reads[0] += 1
        if d not in vers or size != len(d):
            bad.append((len(d), size))
def superseded_opens():
    with open(os.environ["PLT_STATS"]) as f:
        return json.load(f)["paths"].get("superseded_opens", 0)
s0 = superseded_opens()
g0, o0 = counts()
th = [threading.Thread(target=reader) for _ in range(3)]
[t.start() for t in th]
late = []
for k in range(1, 31):
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, vers[k % 3])
    os.close(fd)
    # the close returned: the name is the new version, to a stat and an
    # open alike
    try:
        if os.stat(path).st_size != len(vers[k % 3]):
            late.append((k, "stat"))
        if pyread(path) != vers[k % 3]:
            late.append((k, "read"))
    except OSError as e:
        late.append((k, errno.errorcode.get(e.errno, e.errno)))
stop.set()
[t.join() for t in th]
g1, o1 = counts()
check(reads[0] > 0 and not bad, f"{reads[0]} reads racing 30 rewrites: "
      f"each a whole version of fstat's size ({bad[:5]})")
check(not late, f"stat and read right after each rewrite's close: the new "
      f"version ({late[:5]})")
if preloaded:
    check(g1 > g0, f"some reads were served (gets +{g1 - g0}, FUSE opens "
          f"+{o1 - o0})")
print(f"failed: {sum(errs.values())} {dict(errs)}; opens of the version "
      f"their lookup found: {superseded_opens() - s0}; fstat in the "
      f"kernel's truncate window: {zeros[0]}")
done()
EOF
for how in plain preloaded; do
	if [ $how = plain ]; then
		out=$("$PY" "$tmp/race.py" "$ns/race_plain.bin" 0 2>&1)
	else
		out=$(pre "$PY" "$tmp/race.py" "$ns/race_pre.bin" 1 2>&1)
	fi
	rc=$?
	say "$out"
	check "readers racing O_TRUNC rewrites, $how: whole versions" test "$rc" = 0
	est=$(printf '%s\n' "$out" | sed -n 's/^failed: //p')
	if [ "${est%% *}" = 0 ]; then
		ok "racing rewrites, $how: no open, read or fstat failed"
	else
		bad "racing rewrites, $how: failed calls $est"
	fi
done

# --- a version's bytes with that version's stat: a writer rewriting one
# name (O_TRUNC, the same size: st_ino kept) while a reader opens,
# fstats and reads it; each read's first 8 bytes name its version, whose
# mtime the writer noted (stat after its close). The GET names the
# stat's st_ino and mtime (KVFS_XFER_MTIME), so a served fd's bytes are
# the version its fstat describes. Before: 15,990 of 40,048 preloaded
# opens in 4 s had another version's bytes (0 plain). Lazy reads: the
# same, but a version replaced, or being rewritten, between the open and
# the read is ESTALE (most reads, with the writer never idle: only some
# need be served).
cat >"$tmp/gap.py" <<'EOF'
import os, sys, threading, time
p, secs, N = sys.argv[1], float(sys.argv[2]), 65536
least = float(sys.argv[3])  # of the opens, served with a known mtime
mt, stop, samples = {}, [False], []
def body(k):
    return k.to_bytes(8, "little") * (N // 8)
with open(p, "wb") as f:
    f.write(body(0))
mt[os.stat(p).st_mtime_ns] = 0
def writer():
    k = 1
    while not stop[0]:
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
        os.write(fd, body(k))
        os.close(fd)
        mt[os.stat(p).st_mtime_ns] = k
        k += 1
def reader():
    while not stop[0]:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            d = os.read(fd, N + 1)
        except OSError as e:
            samples.append((None, e.errno))
            os.close(fd)
            continue
        os.close(fd)
        if len(d) == N:
            samples.append((st.st_mtime_ns, int.from_bytes(d[:8], "little")))
ts = [threading.Thread(target=writer), threading.Thread(target=reader)]
[t.start() for t in ts]
time.sleep(secs)
stop[0] = True
[t.join() for t in ts]
bad = sum(1 for m, k in samples if m is not None and m in mt and mt[m] != k)
known = sum(1 for m, k in samples if m is not None and m in mt)
errs = sum(1 for m, k in samples if m is None)
print(f"opens {len(samples)}, mtime known {known}, another version's "
      f"bytes {bad}, errors {errs}, versions {len(mt)}")
sys.exit(1 if bad or not known or known < len(samples) * least else 0)
EOF
for how in plain preloaded lazy; do
	case $how in
	plain) out=$("$PY" "$tmp/gap.py" "$ns/gap_$how.bin" 1.5 0.25 2>&1) ;;
	preloaded) out=$(pre "$PY" "$tmp/gap.py" "$ns/gap_$how.bin" 1.5 0.25 \
		2>&1) ;;
	lazy) out=$(KVFS_PRELOAD_READS=lazy pre "$PY" "$tmp/gap.py" \
		"$ns/gap_$how.bin" 1.5 0 2>&1) ;;
	esac
	rc=$?
	say "$out"
	check "same-size rewrites, $how: each read's bytes are its fstat's version" \
		test "$rc" = 0
done

# --- not served: KVFS_PRELOAD=0, KVFS_PRELOAD_MAX
mark
check "KVFS_PRELOAD=0: exact bytes" \
	cmp <(KVFS_PRELOAD=0 pre cat "$ns/${blocks[3]}") "$tmp/b3"
plain "KVFS_PRELOAD=0" 0
mark
check "a file over KVFS_PRELOAD_MAX: exact bytes" \
	cmp <(KVFS_PRELOAD_MAX=1048576 pre cat "$ns/${blocks[3]}") "$tmp/b3"
plain "a file over KVFS_PRELOAD_MAX" 0
mark
check "KVFS_PRELOAD=memfd: exact bytes" \
	cmp <(KVFS_PRELOAD=memfd pre cat "$ns/${blocks[3]}") "$tmp/b3"
served "KVFS_PRELOAD=memfd"

# --- a key namespace's chunk: served as before
K=0123456789abcdef0123456789abcdef
mkdir "$tmp/m/keys" && cp "$tmp/small" "$tmp/m/keys/$K" || exit 1
mark
check "a key namespace's chunk: exact bytes" \
	cmp <(pre cat "$tmp/m/keys/$K") "$tmp/small"
served "a key namespace's chunk"

# --- bind mounts (root only)
if [ "$(id -u)" != 0 ]; then
	skip "bind mounts: needs root"
else
	# one directory of the namespace over another, both holding f.bin of
	# the same size: the lexical path names y/f.bin, the kernel's
	# resolution x/f.bin
	head -c 5000 /dev/urandom >"$tmp/fx"
	head -c 5000 /dev/urandom >"$tmp/fy"
	cp "$tmp/fx" "$ns/x/f.bin" && cp "$tmp/fy" "$ns/y/f.bin" || exit 1
	# made after the library read mountinfo (the mount table it has does
	# not show it): only the daemon's st_ino check tells the files apart
	out=$(pre "$PY" - "$ns" "$tmp" <<'EOF2' 2>&1
import os, subprocess, sys
from plt import check, counts, done, pyread
ns, tmp = sys.argv[1:3]
fx, fy = (pyread(f"{tmp}/f{c}") for c in "xy")
env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
g0, o0 = counts()
check(pyread(f"{ns}/y/f.bin") == fy, "y/f.bin before the bind mount")
g1, o1 = counts()
check(g1 - g0 == 1 and o1 == o0, "served (mountinfo read)")
r = subprocess.run(["mount", "--bind", f"{ns}/x", f"{ns}/y"], env=env,
                   stderr=subprocess.PIPE, universal_newlines=True)
if r.returncode:
    print("skip: mount --bind: " + r.stderr.strip())
    sys.exit(77)
try:
    g0, o0 = counts()
    got = pyread(f"{ns}/y/f.bin")
    g1, o1 = counts()
    check(got == fx, "x bound over y: y/f.bin reads x's file, as the kernel"
          + ("" if got == fx else " (got y's: WRONG BYTES)"
             if got == fy else " (got other bytes)"))
    check(o1 > o0 and g1 - g0 <= 1,
          f"x bound over y: the real open (gets +{g1 - g0}, FUSE opens "
          f"+{o1 - o0})")
finally:
    subprocess.run(["umount", f"{ns}/y"], env=env)
check(pyread(f"{ns}/y/f.bin") == fy, "unbound: y/f.bin is y's again")
done()
EOF2
)
	rc=$?
	say "$out"
	if [ "$rc" = 77 ]; then
		skip "a bind mount made after mountinfo was read: mount --bind failed"
	else
		check "a bind mount made after mountinfo was read: the kernel's file" \
			test "$rc" = 0
	fi
	# made before: the library sees it in mountinfo
	if mount --bind "$ns/x" "$ns/y" 2>"$tmp/bind.err"; then
		binds+=("$ns/y")
		mark
		check "a bind mount of x over y: y/f.bin reads as without the preload" \
			cmp <(pre cat "$ns/y/f.bin") <(cat "$ns/y/f.bin")
		check "a bind mount of x over y: y/f.bin is x's file" \
			cmp <(pre cat "$ns/y/f.bin") "$tmp/fx"
		plain "a bind mount of x over y" 2
		umount "$ns/y" && binds=()
		check "after the bind mount: y/f.bin is its own again" \
			cmp <(pre cat "$ns/y/f.bin") "$tmp/fy"
	else
		skip "mount --bind x y: $(head -1 "$tmp/bind.err")"
	fi
	# bound_served DESC SRC DST REL: with SRC bound at DST, DST/REL (a
	# copy of $tmp/small) is served with its bytes
	bound_served() {
		mkdir "$3"
		if mount --bind "$2" "$3" 2>"$tmp/bind.err"; then
			binds+=("$3")
			mark
			check "$1: exact bytes" \
				cmp <(pre cat "$3/$4") "$tmp/small"
			served "$1"
			umount "$3" && binds=()
		else
			skip "$1: mount --bind: $(head -1 "$tmp/bind.err")"
		fi
	}
	bound_served "the namespace bound elsewhere" "$ns" "$tmp/nsbind" \
		a/b/small.txt
	# a mount point with a space: mountinfo says \040
	bound_served "the whole mount bound at a path with a space" "$tmp/m" \
		"$tmp/kv bind" vllm/a/b/small.txt
fi

# --- another uid: the daemon's permission check, the kernel's EACCES
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	skip "another uid: needs root and setpriv"
else
	# nobody, with 1234 as a supplementary group
	as_nobody() { setpriv --reuid=65534 --regid=65534 --groups=1234 "$@"; }
	mkdir "$ns/closed" && chmod 700 "$ns/closed" &&
		cp "$tmp/small" "$ns/closed/f" &&
		cp "$tmp/small" "$ns/a/secret" && chmod 600 "$ns/a/secret" &&
		chmod 644 "$ns/a/b/small.txt" || exit 1
	# the class that matches decides: group 1234 may read g640; g604's
	# group class may not (though others may); o064's owner may not
	for f in g640:0:1234:640 g604:0:1234:604 o064:65534:65534:064; do
		IFS=: read -r name uid gid mode <<<"$f"
		cp "$tmp/small" "$ns/a/$name" &&
			chown "$uid:$gid" "$ns/a/$name" &&
			chmod "$mode" "$ns/a/$name" || exit 1
	done
	mark
	check "another uid, a 0640 file of its supplementary group: exact bytes" \
		cmp <(as_nobody env LD_PRELOAD="$PRELOAD" cat "$ns/a/g640") "$tmp/small"
	served "another uid, a 0640 file of its supplementary group"
	mark
	check "another uid, a 0644 file: exact bytes" \
		cmp <(as_nobody env LD_PRELOAD="$PRELOAD" cat "$ns/a/b/small.txt") "$tmp/small"
	served "another uid, a 0644 file"
	# a directory it may search but not list: its files are readable
	mkdir "$ns/s711" && chmod 711 "$ns/s711" &&
		cp "$tmp/small" "$ns/s711/f" || exit 1
	mark
	check "another uid, a 0644 file in a 0711 directory: exact bytes" \
		cmp <(as_nobody env LD_PRELOAD="$PRELOAD" cat "$ns/s711/f") "$tmp/small"
	served "another uid, a 0644 file in a 0711 directory"
	nobody_open() { # LIB FILE: what Python's open().read() says, as nobody
		as_nobody env LD_PRELOAD="$1" "$PY" -c '
import os, sys
try:
    open(sys.argv[1], "rb").read()
    print("read")
except OSError as e:
    print(os.strerror(e.errno))' "$2" 2>&1
	}
	for f in a/secret closed/f a/g604 a/o064; do
		r_pre=$(nobody_open "$PRELOAD" "$ns/$f")
		r_plain=$(nobody_open "" "$ns/$f")
		if [ "$r_pre" = "$r_plain" ] && [ "$r_plain" = "Permission denied" ]; then
			ok "another uid, $f: EACCES, as without the preload"
		else
			bad "another uid, $f: preloaded '$r_pre', plain '$r_plain'"
		fi
	done
fi

# --- O_NOATIME: the kernel's EPERM for a file not the caller's, so never
# served; no_new_privs (a Landlock or seccomp sandbox may limit files
# below the namespace): the real open, unless KVFS_PRELOAD_SANDBOXED=1
noatime_open() { # LIB FILE: os.open(O_NOATIME) as nobody
	setpriv --reuid=65534 --regid=65534 --clear-groups env LD_PRELOAD="$1" \
		"$PY" -c '
import os, sys
try:
    os.close(os.open(sys.argv[1], os.O_RDONLY | os.O_NOATIME))
    print("opened")
except OSError as e:
    print(os.strerror(e.errno))' "$2" 2>&1
}
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	skip "O_NOATIME and no_new_privs: need root and setpriv"
else
	r_pre=$(noatime_open "$PRELOAD" "$ns/a/t.txt")
	r_plain=$(noatime_open "" "$ns/a/t.txt")
	if [ "$r_pre" = "$r_plain" ] && [ "$r_plain" = "Operation not permitted" ]; then
		ok "O_NOATIME on another's file: EPERM, as without the preload"
	else
		bad "O_NOATIME on another's file: preloaded '$r_pre', plain '$r_plain'"
	fi
	mark
	check "no_new_privs: exact bytes" \
		cmp <(setpriv --no-new-privs env LD_PRELOAD="$PRELOAD" cat "$ns/a/t.txt") <(seq 20000)
	plain "no_new_privs" 0
	mark
	check "no_new_privs, KVFS_PRELOAD_SANDBOXED=1: exact bytes" \
		cmp <(setpriv --no-new-privs env LD_PRELOAD="$PRELOAD" \
			KVFS_PRELOAD_SANDBOXED=1 cat "$ns/a/t.txt") <(seq 20000)
	served "no_new_privs, KVFS_PRELOAD_SANDBOXED=1"
fi

echo "1..$n"
[ "$fails" = 0 ]
