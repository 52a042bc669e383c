#!/usr/bin/env bash
# test_preload_fdtable.sh - libkvfs_preload.so's table of served fds
# against the kernel's fd table (lib/preload/README.md, "Calls on a served
# fd"), plainly and preloaded, the same answers expected:
#   vfork  a vfork child (the table is its parent's memory, the fds its
#          own) dup2s /dev/null onto the parent's served reader (fd 0 or
#          another) or served writer and execs; another dups, fstats,
#          fsyncs, closes, close_ranges and closefroms the parent's served
#          fds: the parent's reads get every byte, its writer publishes
#          every byte; CPython's subprocess.run(stdin=DEVNULL) with fd 0
#          served, and subprocess.run with served fds at 3 and up
#   race   one thread dup2s served fds A and B alternately onto fd 50
#          while another preads fd 50: no read fails or reads other
#          bytes, and fd 50 reads A after the last dup2 of A
#   efault read / pread / readv into address 16: EFAULT
#   spare  the socket a closed reader leaves (lib/preload/README.md,
#          "Spare sockets"): the next open gets the lowest free number
#          and its own bytes; a socket whose fd's dup is still open is
#          not reused (the dup reads its own chunk); spares closed
#          behind the library (a raw close_range) and their numbers
#          reused by the program's files: those files are left alone
#   closedup close(fd) of a served reader racing another thread's dup(fd),
#          then dup2(pipe, fd) (review 20): no dup ever shares a socket
#          with another chunk's fd (a raw dup3 of B's fd onto A's dup
#          never reads A's bytes), and the program's pipe is never kept
#          open by the library (its reader sees EOF)
# Runs in about 6 s.
set -u
T=test_preload_fdtable
# shellcheck source=tests/sh/preload_test.sh
. "$(dirname "$0")/preload_test.sh"
if ! command -v cc >/dev/null; then
	echo "$T: skip: no cc"
	exit 77
fi
preload_mount || exit 1
ns=$tmp/m/ns
mkdir "$ns" || exit 1
A=0000000000000000000000000000000a B=0000000000000000000000000000000b
head -c 300000 /dev/urandom >"$tmp/a"
head -c 4096 /dev/urandom >"$tmp/b"
cp "$tmp/a" "$ns/$A" && cp "$tmp/b" "$ns/$B" || exit 1

cat >"$tmp/fdtable.c" <<'EOF'
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *en(int e)
{
	return e == EFAULT ? "EFAULT" : e == EINVAL ? "EINVAL" :
	       e == ESPIPE ? "ESPIPE" : e == ENOTCONN ? "ENOTCONN" :
	       e == EBADF ? "EBADF" : strerror(e);
}

/* all of fd from offset 0: "bytes hash" */
static void drain(const char *what, int fd)
{
	static char buf[1 << 16];
	uint64_t h = 1469598103934665603ull, n = 0;
	ssize_t k;

	while ((k = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < k; i++, n++)
			h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
	if (k < 0)
		printf("%s: read %s\n", what, en(errno));
	else
		printf("%s: %llu bytes, hash %016llx\n", what,
		       (unsigned long long)n, (unsigned long long)h);
}

/* vfork; the child runs f(fd) then execs true */
static void in_vfork(void (*f)(int), int fd)
{
	int st;
	pid_t p = vfork();

	if (!p) {
		f(fd);
		execlp("true", "true", (char *)NULL);
		_exit(127);
	}
	waitpid(p, &st, 0);
}

static void onto_null(int fd)
{
	int d = open("/dev/null", O_RDWR);

	dup2(d, fd);
	dup3(d, fd, O_CLOEXEC);
}

static void every_call(int fd)
{
	struct stat st;

	dup(fd);
	fcntl(fd, F_DUPFD, 100);
	dup2(fd, 60);
	dup3(fd, 61, O_CLOEXEC);
	fstat(fd, &st);
	fsync(fd);
	lseek(fd, 0, SEEK_HOLE); /* a writer's: the kernel's (settles) */
	close(fd);
	syscall(SYS_close_range, 3u, ~0u, 0); /* raw: must not matter */
	close_range(3, ~0u, 0);
	closefrom(3);
}

static int vfork_main(const char *a, const char *key)
{
	static char buf[1000];
	int fd, w;

	/* a served reader at fd 0, /dev/null dup2'd onto it in the child
	 * (the namespace opened once before: the preload keeps a directory
	 * fd of its own) */
	close(open(a, O_RDONLY));
	close(0);
	fd = open(a, O_RDONLY);
	printf("reader at %d\n", fd);
	in_vfork(onto_null, 0);
	drain("fd 0 after the child's dup2", 0);
	/* readers at 3 and up, every call in the child */
	fd = open(a, O_RDONLY);
	w = dup(fd);
	in_vfork(every_call, fd);
	drain("reader after the child's calls", fd);
	lseek(fd, 0, SEEK_SET);
	drain("its dup", w);
	close(fd);
	close(w);
	/* a served writer, /dev/null dup2'd onto it in the child */
	w = open(key, O_WRONLY | O_CREAT | O_EXCL, 0644);
	memset(buf, 'A', sizeof(buf));
	printf("write 1: %zd\n", write(w, buf, sizeof(buf)));
	in_vfork(onto_null, w);
	in_vfork(every_call, w);
	memset(buf, 'B', sizeof(buf));
	printf("write 2: %zd\n", write(w, buf, sizeof(buf)));
	printf("close: %d\n", close(w));
	fd = open(key, O_RDONLY);
	drain("the key written", fd);
	return 0;
}

static int T = 50, fa, fb;
static atomic_int stop;
static char ba[64], bb[64];
static long errs, wrong;

static void *reader(void *x)
{
	char b[64];

	while (!atomic_load(&stop)) {
		ssize_t r = pread(T, b, 64, 0);

		if (r < 0)
			errs++;
		else if (r != 64 || (memcmp(b, ba, 64) && memcmp(b, bb, 64)))
			wrong++;
	}
	return x;
}

static int race_main(const char *a, const char *b, int rounds)
{
	int broken = 0;
	pthread_t t;

	fa = open(a, O_RDONLY);
	fb = open(b, O_RDONLY);
	pread(fa, ba, 64, 0);
	pread(fb, bb, 64, 0);
	for (int k = 0; k < 5; k++) {
		char c[64];

		dup2(fa, T);
		atomic_store(&stop, 0);
		pthread_create(&t, NULL, reader, NULL);
		for (int i = 0; i < rounds; i++) {
			dup2(fb, T);
			dup2(fa, T);
		}
		atomic_store(&stop, 1);
		pthread_join(t, NULL);
		if (pread(T, c, 64, 0) != 64 || memcmp(c, ba, 64))
			broken++;
	}
	printf("race: reads failed %ld, wrong %ld; fd 50 not A after %d of 5 rounds\n",
	       errs, wrong, broken);
	return 0;
}

static int efault_main(const char *a)
{
	void *volatile bad = (void *)16; /* (no compile-time warning) */
	int fd = open(a, O_RDONLY);
	struct iovec v = { bad, 100 };
	ssize_t r;

	r = read(fd, bad, 100);
	printf("read: %zd %s\n", r, r < 0 ? en(errno) : "");
	r = pread(fd, bad, 100, 0);
	printf("pread: %zd %s\n", r, r < 0 ? en(errno) : "");
	r = readv(fd, &v, 1);
	printf("readv: %zd %s\n", r, r < 0 ? en(errno) : "");
	r = read(fd, NULL, 0);
	printf("read of 0 into NULL: %zd\n", r);
	drain("then", fd);
	return 0;
}

/* whether fd is still the file st says */
static int same(int fd, const struct stat *st)
{
	struct stat s2;

	return !fstat(fd, &s2) && s2.st_dev == st->st_dev &&
	       s2.st_ino == st->st_ino;
}

static int spare_main(const char *a, const char *b, const char *log)
{
	struct stat lst;
	int fd, x, y, z, lg, kept = 0;

	fd = open(a, O_RDONLY);
	close(fd);
	x = open(a, O_RDONLY);
	printf("spare: reopened at the same number: %d\n", x == fd);
	drain("spare: reopened", x);
	close(x);
	/* b's dup outlives its fd: b's socket is not a spare */
	x = open(b, O_RDONLY);
	pread(x, bb, 64, 0);
	y = dup(x);
	close(x);
	z = open(a, O_RDONLY);
	drain("spare: the dup of b", y);
	drain("spare: a, opened after", z);
	/* a raw dup2 of a's fd onto b's dup: the kernel's y is a's now,
	 * and the library must not serve b there */
	syscall(SYS_dup3, z, y, 0);
	printf("spare: b's bytes at y after a raw dup2 of a's fd onto it: %d\n",
	       pread(y, ba, 64, 0) == 64 && !memcmp(ba, bb, 64));
	close(y);
	close(z);
	/* every number from 40 closed behind the library, then the
	 * program's own file at 40..63 */
	syscall(SYS_close_range, 40u, ~0u, 0);
	lg = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	fstat(lg, &lst);
	for (int i = 40; i < 64; i++)
		dup2(lg, i);
	for (int i = 0; i < 4; i++) {
		x = open(a, O_RDONLY);
		drain("spare: a, after the raw close_range", x);
		close(x);
	}
	for (int i = 40; i < 64; i++)
		kept += same(i, &lst);
	printf("spare: the program's fds at 40..63 kept: %d of 24\n", kept);
	printf("spare: write to fd 48: %zd\n", write(48, "mine\n", 5));
	return 0;
}

static atomic_int go, acted, racefd, racesrc;
static int dupres;

/* waits for go, then dup(racefd) (racesrc < 0) or dup2(racesrc, racefd) */
static void *racer(void *x)
{
	for (;;) {
		int g;

		while (!(g = atomic_load(&go)))
			;
		if (g < 0)
			return x;
		if (atomic_load(&racesrc) < 0)
			dupres = dup(atomic_load(&racefd));
		else
			dup2(atomic_load(&racesrc), atomic_load(&racefd));
		atomic_store(&go, 0);
		atomic_store(&acted, 1);
	}
}

/* close(fd) in this thread, the racer's call in the other, their start
 * a few cycles apart (i varies it) */
static void race_close(int fd, int src, int i)
{
	atomic_store(&racefd, fd);
	atomic_store(&racesrc, src);
	atomic_store(&acted, 0);
	atomic_store(&go, 1);
	for (volatile int s = 0; s < (i % 64) * 8; s++)
		;
	close(fd);
	while (!atomic_load(&acted))
		;
}

static ino_t raw_ino(int fd)
{
	struct stat st;

	return syscall(SYS_fstat, fd, &st) ? 0 : st.st_ino;
}

static int closedup_main(const char *a, const char *b, int iters)
{
	static char ra[4096], x[4096];
	int shared = 0, wrong = 0, same = 0, p[2], fd;
	pthread_t t;
	char c;

	fd = open(a, O_RDONLY);
	pread(fd, ra, sizeof(ra), 0);
	close(fd);
	if (pipe(p))
		return 1;
	pthread_create(&t, NULL, racer, NULL);
	for (int i = 0; i < iters; i++) {
		race_close(open(a, O_RDONLY), -1, i);
		if (dupres < 0)
			continue;
		fd = open(b, O_RDONLY);
		if (raw_ino(fd) == raw_ino(dupres)) {
			shared++;
			syscall(SYS_dup3, fd, dupres, 0);
			wrong += pread(dupres, x, sizeof(x), 0) ==
				 (ssize_t)sizeof(x) && !memcmp(x, ra, sizeof(x));
		}
		close(fd);
		close(dupres);
	}
	for (int i = 0; i < iters; i++) {
		fd = open(a, O_RDONLY);
		race_close(fd, p[1], i);
		close(fd); /* whichever file is there now */
	}
	atomic_store(&go, -1);
	pthread_join(t, NULL);
	for (int k = 0; k < 4; k++) {
		int fa = open(a, O_RDONLY), fb = open(b, O_RDONLY);

		same += raw_ino(fa) == raw_ino(fb);
		close(fa);
		close(fb);
	}
	close(p[1]);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	printf("closedup: A's dup and B on one socket %d times, A's bytes on B's copy %d\n",
	       shared, wrong);
	printf("closedup: then A and B on one socket %d of 4 times\n", same);
	printf("closedup: the pipe's reader after its last write end closed: %s\n",
	       read(p[0], &c, 1) == 0 ? "EOF" : "no EOF");
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "closedup"))
		return closedup_main(argv[2], argv[3], atoi(argv[4]));
	if (!strcmp(argv[1], "spare"))
		return spare_main(argv[2], argv[3], argv[4]);
	if (!strcmp(argv[1], "vfork"))
		return vfork_main(argv[2], argv[3]);
	if (!strcmp(argv[1], "race"))
		return race_main(argv[2], argv[3], atoi(argv[4]));
	return efault_main(argv[2]);
}
EOF
if ! cc -std=gnu11 -O1 -Wall -pthread -o "$tmp/fdtable" "$tmp/fdtable.c"; then
	bad "cc fdtable.c"
	echo "1..$n"
	exit 1
fi

cat >"$tmp/sub.py" <<'EOF'
import os, subprocess, sys, zlib
a, data = sys.argv[1], open(sys.argv[2], "rb").read()
os.close(os.open(a, os.O_RDONLY))  # the namespace opened once (see vfork_main)
os.close(0)
fd = os.open(a, os.O_RDONLY)
subprocess.run(["true"], stdin=subprocess.DEVNULL)
try:
    got = b"".join(iter(lambda: os.read(0, 1 << 16), b""))
    print("fd", fd, "after subprocess.run(stdin=DEVNULL):", len(got), got == data)
except OSError as e:
    print("fd", fd, "after subprocess.run(stdin=DEVNULL):", e)
os.close(0)
os.open("/dev/null", os.O_RDONLY)
fds = [os.open(a, os.O_RDONLY) for _ in range(3)]
subprocess.run(["true"])
def rd(f):
    try:
        return os.pread(f, 1 << 20, 0) == data
    except OSError as e:
        return e.strerror
print("fds 3+ after subprocess.run:", [rd(f) for f in fds])
EOF

run() { # TAG [preload]
	local p=${2:+$PRELOAD}
	{
		LD_PRELOAD=$p "$tmp/fdtable" vfork "$ns/$A" "$ns/0000000000000000000000000000$1"
		LD_PRELOAD=$p "$tmp/fdtable" race "$ns/$A" "$ns/$B" 5000
		LD_PRELOAD=$p "$tmp/fdtable" efault "$ns/$A"
		LD_PRELOAD=$p "$tmp/fdtable" spare "$ns/$A" "$ns/$B" "$tmp/log$1"
		LD_PRELOAD=$p "$tmp/fdtable" closedup "$ns/$A" "$ns/$B" 10000
		LD_PRELOAD=$p "$PY" "$tmp/sub.py" "$ns/$A" "$tmp/a"
		# a served fd a new program inherits (exec after fork)
		LD_PRELOAD=$p bash -c "md5sum < '$ns/$A'" | sed 's/^/exec stdin: /'
		LD_PRELOAD=$p bash -c "exec 7< '$ns/$A'; read -r -N 10 x <&7; md5sum <&7" |
			sed 's/^/exec fd 7 after 10 bytes: /'
	} >"$tmp/$1.out" 2>&1
}
gets0=$(stat ioctl.xfer.gets)
run 0001
gets1=$(stat ioctl.xfer.gets)
run 0002 preload
gets2=$(stat ioctl.xfer.gets)
sed 's/^/  # plain: /' "$tmp/0001.out"
diff "$tmp/0001.out" "$tmp/0002.out" | sed 's/^/  # preloaded: /'
check "plain: no GET" test "$gets1" = "$gets0"
if [ $((gets2 - gets1)) -ge 8 ]; then
	ok "preloaded: the opens were served ($((gets2 - gets1)) GETs)"
else
	bad "preloaded: $((gets2 - gets1)) GETs"
fi
# each line as plain, and the lines that make plain right
expect() { # DESC PATTERN: the lines matching PATTERN, the same in both
	if grep -q "$2" "$tmp/0001.out" &&
		diff <(grep "$2" "$tmp/0001.out") <(grep "$2" "$tmp/0002.out") >/dev/null; then
		ok "$1"
	else
		bad "$1"
	fi
}
h=$(wc -c <"$tmp/a")
grep -q "^fd 0 after the child's dup2: $h bytes" "$tmp/0001.out" || bad "plain: fd 0 read whole"
expect "vfork: the parent's fd 0 after the child's dup2 onto it" "^fd 0 after"
expect "vfork: the parent's fds after the child's dup/close/close_range" "^reader after\|^its dup"
expect "vfork: the parent's writer after the child's dup2 onto it" "^write \|^close:"
expect "vfork: the key holds both writes" "^the key written: 2000 bytes"
expect "race: no failed or wrong read, fd 50 reads A" \
	"^race: reads failed 0, wrong 0; fd 50 not A after 0 of 5 rounds"
expect "efault: read, pread, readv into address 16: EFAULT" "^read: \|^pread: \|^readv: \|^read of 0\|^then"
expect "python: subprocess.run(stdin=DEVNULL) with fd 0 served" "^fd 0 after subprocess.run(stdin=DEVNULL): $h True"
expect "python: subprocess.run with served fds at 3+" "^fds 3+ after subprocess.run: \[True, True, True\]"
expect "exec: a served stdin read by the new program" "^exec stdin: "
expect "spare: a reopened reader gets the lowest number and its bytes" \
	"^spare: reopened"
expect "spare: a socket whose dup is open is not reused" \
	"^spare: the dup of b: 4096 \|^spare: a, opened after: $h \|^spare: b's bytes at y after a raw dup2 of a's fd onto it: 0"
expect "spare: spares closed behind the library, numbers reused: the program's files kept" \
	"^spare: a, after the raw close_range: $h \|^spare: the program's fds at 40..63 kept: 24 of 24\|^spare: write to fd 48: 5"
check "spare: the program's writes landed in its file" test "$(cat "$tmp/log0002")" = "mine"
expect "closedup: a dup racing close: no socket shared with another chunk, never its bytes" \
	"^closedup: A's dup and B on one socket 0 times, A's bytes on B's copy 0\|^closedup: then A and B on one socket 0 of 4"
expect "closedup: a dup2 racing close: the program's pipe not kept open" \
	"^closedup: the pipe's reader after its last write end closed: EOF"
expect "exec: a served fd 7 read on from its offset by the new program" "^exec fd 7 after 10 bytes: "

echo "1..$n"
[ "$fails" = 0 ]
