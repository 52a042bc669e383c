/*
 * test_xfer.c - batched GET/PUT (KVFS_IOC_GET / KVFS_IOC_PUT, kvfs_mget /
 * kvfs_mput) on a real mount: round trips across batch boundaries, byte
 * ranges, per-entry errors (ENOENT, EMSGSIZE, ERANGE, EFAULT for unmapped
 * and read-only memory, EEXIST, EFBIG, EMSGSIZE of chunk_bytes), malformed
 * batches (EINVAL, nothing done), EACCES for a user who may not read or
 * write, ENOTTY, overlapping entries, a caller SIGKILLed mid-batch, eviction
 * racing GETs, L2 promotion, the ioctl count of a 1,024-chunk prompt, and
 * empty chunks that evict nothing.
 *
 * The mount uses allow_other so that a child that setuid()s to nobody
 * reaches the daemon and is refused by kvfs's own namespace check.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <stdbool.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"

#define CHUNK (64u << 10)

static struct kvfs_mnt mnt;
static int mounted;

/* ------------------------------------------------------------ helpers */

static void key_of(uint64_t tag, uint64_t i, struct kvfs_key *k)
{
	uint32_t tok[2] = { (uint32_t)i, (uint32_t)(i >> 32) };

	assert_int_equal(kvfs_key_chunk(NULL, tag, NULL, 0, tok, 2, k), 0);
}

static int ns_create(const char *name, unsigned mode)
{
	int fd = kvfs_ns_open(mnt.dir, name, KVFS_NS_CREATE, mode);

	assert_true(fd >= 0);
	return fd;
}

/* n chunks of len bytes: keys (tag, i), bytes kvfs_test_fill(tag * 1000 +
 * i); io[i].buf points into one malloc'd block (returned). */
static char *make_io(struct kvfs_io *io, size_t n, uint64_t tag, size_t len)
{
	char *buf = malloc(n * len);

	assert_non_null(buf);
	memset(io, 0, n * sizeof(*io));
	for (size_t i = 0; i < n; i++) {
		key_of(tag, i, &io[i].key);
		io[i].buf = buf + i * len;
		io[i].len = len;
		kvfs_test_fill(io[i].buf, len, tag * 1000 + i, 0);
	}
	return buf;
}

static int raw_ioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) < 0 ? -errno : 0;
}

static struct kvfs_xfer *xfer_arg(uint32_t nents)
{
	struct kvfs_xfer *b = calloc(1, sizeof(*b));

	assert_non_null(b);
	b->version = KVFS_ABI_VERSION;
	b->size = sizeof(*b);
	b->nents = nents;
	return b;
}

/* A counter of .kvfs/stats: the number after "name": following "after"
 * ("" for the first occurrence). */
static unsigned long long stat_in(const struct kvfs_mnt *m,
				  const char *after, const char *name)
{
	char path[PATH_MAX], buf[65536], pat[64];
	const char *p;
	ssize_t n;
	int fd;

	kvfs_test_path(m, path, "%s", KVFS_CTL_STATS);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
	p = after[0] ? strstr(buf, after) : buf;
	assert_non_null(p);
	snprintf(pat, sizeof(pat), "\"%s\":", name);
	p = strstr(p, pat);
	assert_non_null(p);
	p += strlen(pat);
	while (*p == ' ')
		p++;
	return strtoull(p, NULL, 10);
}

static unsigned long long stat_of(const char *after, const char *name)
{
	return stat_in(&mnt, after, name);
}

static int exists(int nsfd, const struct kvfs_key *k)
{
	return kvfs_exists(nsfd, k);
}

/* ------------------------------------------------------------- setup */

static int setup(void **state)
{
	const char *args[] = { "-f", "-o",
		"l1_size=96M,max_chunk=4M,allow_other", "@DIR@", NULL };

	if (kvfs_test_mount_args(&mnt, args) != 0)
		return -1;
	mounted = 1;
	return 0;
}

static int teardown(void **state)
{
	if (mounted && kvfs_test_umount(&mnt) != 0) {
		fprintf(stderr, "daemon did not exit cleanly\n");
		return -1;
	}
	return 0;
}

/* -------------------------------------------------------------- tests */

/* 500 chunks (three ioctls each way) go in and come back byte for byte;
 * the files read the same through read(2); the checksum kept at PUT is
 * the bytes' own. A second PUT of the same keys is EEXIST, counted as
 * stored. */
static void test_roundtrip(void **state)
{
	enum { N = 500 };
	struct kvfs_io *io = calloc(N, sizeof(*io)), *back;
	char *src, *dst, path[PATH_MAX], hex[33], sum[32];
	unsigned long long puts0 = stat_of("\"xfer\"", "puts");
	int fd = ns_create("rt", 0755);

	assert_non_null(io);
	src = make_io(io, N, 1, CHUNK);
	assert_int_equal(kvfs_mput(fd, io, N), N);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(io[i].result, 0);
	assert_int_equal(stat_of("\"xfer\"", "puts") - puts0, 3);

	back = calloc(N, sizeof(*back));
	dst = calloc(N, CHUNK);
	assert_true(back && dst);
	for (size_t i = 0; i < N; i++) {
		back[i].key = io[i].key;
		back[i].buf = dst + i * CHUNK;
		back[i].len = CHUNK;
	}
	assert_int_equal(kvfs_mget(fd, back, N, 0), N);
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(back[i].result, CHUNK);
		assert_int_equal(back[i].size, CHUNK);
	}
	assert_memory_equal(src, dst, (size_t)N * CHUNK);

	kvfs_key_hex(&io[7].key, hex);
	kvfs_test_path(&mnt, path, "rt/%s", hex);
	assert_int_equal(kvfs_test_read_check(path, CHUNK, 1 * 1000 + 7), 0);
	memset(sum, 0, sizeof(sum));
	assert_int_equal(getxattr(path, KVFS_XATTR_CHECKSUM, sum, 31), 16);

	/* again: every entry already there */
	assert_int_equal(kvfs_mput(fd, io, N), N);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(io[i].result, -EEXIST);
	free(src);
	free(dst);
	free(io);
	free(back);
	close(fd);
}

/* Byte ranges: a slice of many chunks in one call (layer by layer),
 * length 0 = to the end, a range past the end (ERANGE), a range larger
 * than the room (EMSGSIZE, size still reported), misses (ENOENT) beside
 * hits. */
static void test_ranges_and_misses(void **state)
{
	struct kvfs_io io[4], g[6];
	char *src, out[6][CHUNK];
	int fd = ns_create("rng", 0755);

	src = make_io(io, 4, 2, CHUNK);
	assert_int_equal(kvfs_mput(fd, io, 4), 4);
	memset(g, 0, sizeof(g));
	for (int i = 0; i < 6; i++) {
		g[i].key = io[i % 4].key;
		g[i].buf = out[i];
		g[i].len = CHUNK;
	}
	g[0].offset = 4096;
	g[0].length = 8192; /* slice */
	g[1].offset = 1000; /* to the end */
	g[2].offset = CHUNK - 10;
	g[2].length = 11; /* past the end */
	g[3].len = CHUNK - 1; /* too small */
	key_of(99, 99, &g[4].key); /* miss */
	g[5].offset = CHUNK; /* empty range at the end */
	assert_int_equal(kvfs_mget(fd, g, 6, 0), 3);
	assert_int_equal(g[0].result, 8192);
	assert_memory_equal(out[0], src + 0 * CHUNK + 4096, 8192);
	assert_int_equal(g[1].result, CHUNK - 1000);
	assert_memory_equal(out[1], src + 1 * CHUNK + 1000, CHUNK - 1000);
	assert_int_equal(g[2].result, -ERANGE);
	assert_int_equal(g[2].size, CHUNK);
	assert_int_equal(g[3].result, -EMSGSIZE);
	assert_int_equal(g[3].size, CHUNK);
	assert_int_equal(g[4].result, -ENOENT);
	assert_int_equal(g[5].result, 0);
	free(src);
	close(fd);
}

/* Unmapped and read-only destinations fail their entry alone with EFAULT;
 * an unmapped PUT source publishes nothing for its key. */
static void test_efault(void **state)
{
	struct kvfs_io io[3], g[4];
	char *src, *ro, *gone, good[CHUNK];
	int fd = ns_create("fault", 0755);

	src = make_io(io, 3, 3, CHUNK);
	gone = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(gone != MAP_FAILED);
	munmap(gone, CHUNK);
	io[1].buf = gone; /* unmapped source */
	assert_int_equal(kvfs_mput(fd, io, 3), 2);
	assert_int_equal(io[0].result, 0);
	assert_int_equal(io[1].result, -EFAULT);
	assert_int_equal(io[2].result, 0);
	assert_int_equal(exists(fd, &io[1].key), 0);

	ro = mmap(NULL, CHUNK, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(ro != MAP_FAILED);
	memset(g, 0, sizeof(g));
	for (int i = 0; i < 4; i++) {
		g[i].key = io[i == 1 ? 0 : 2].key;
		g[i].len = CHUNK;
	}
	g[0].buf = gone;
	g[1].buf = ro;
	g[2].buf = good;
	g[3].buf = (void *)(uintptr_t)-4096; /* kernel half / wraps */
	assert_int_equal(kvfs_mget(fd, g, 4, 0), 1);
	assert_int_equal(g[0].result, -EFAULT);
	assert_int_equal(g[1].result, -EFAULT);
	assert_int_equal(g[2].result, CHUNK);
	assert_int_equal(g[3].result, -EFAULT);
	assert_memory_equal(good, src + 2 * CHUNK, CHUNK);
	/* the read-only page was not written */
	for (size_t i = 0; i < CHUNK; i++)
		if (ro[i])
			fail_msg("read-only page written at %zu", i);
	munmap(ro, CHUNK);
	free(src);
	close(fd);
}

/* Overlapping PUT sources are just read; overlapping GET destinations
 * (here the overlap holds the same bytes in both chunks, so any order of
 * the copies gives one answer) are written, and nothing else is. */
static void test_overlap(void **state)
{
	struct kvfs_io io[2], g[2];
	char *src, *out = calloc(1, 3 * CHUNK);
	int fd = ns_create("ovl", 0755);

	assert_non_null(out);
	src = make_io(io, 2, 4, CHUNK);
	io[1].buf = src + CHUNK / 2; /* overlaps io[0]'s source */
	assert_int_equal(kvfs_mput(fd, io, 2), 2);
	memset(g, 0, sizeof(g));
	g[0].key = io[0].key;
	g[0].buf = out + CHUNK;
	g[0].len = CHUNK;
	g[1].key = io[1].key;
	g[1].buf = out + CHUNK + CHUNK / 2;
	g[1].len = CHUNK;
	assert_int_equal(kvfs_mget(fd, g, 2, 0), 2);
	assert_memory_equal(out + CHUNK, src, CHUNK / 2);
	assert_memory_equal(out + CHUNK + CHUNK / 2, src + CHUNK / 2, CHUNK);
	for (size_t i = 0; i < CHUNK; i++)
		if (out[i] || out[2 * CHUNK + CHUNK / 2 + i % (CHUNK / 2)])
			fail_msg("written outside the entries at %zu", i);

	/* two different chunks, destinations overlapping by half: outside
	 * the overlap each entry's own bytes, inside one or the other's */
	{
		struct kvfs_io d[2];
		char *a = make_io(d, 2, 14, CHUNK), *o = calloc(1, 3 * CHUNK);
		char *x = o + CHUNK / 2, *y = o + CHUNK;

		assert_non_null(o);
		assert_int_equal(kvfs_mput(fd, d, 2), 2);
		d[0].buf = x;
		d[1].buf = y;
		for (int r = 0; r < 20; r++) {
			assert_int_equal(kvfs_mget(fd, d, 2, 0), 2);
			assert_memory_equal(x, a, CHUNK / 2);
			assert_memory_equal(y + CHUNK / 2, a + CHUNK + CHUNK / 2,
					    CHUNK / 2);
			for (size_t i = 0; i < CHUNK / 2; i++)
				if (y[i] != a[CHUNK / 2 + i] &&
				    y[i] != a[CHUNK + i])
					fail_msg("overlap byte %zu from neither",
						 i);
		}
		for (size_t i = 0; i < CHUNK / 2; i++)
			if (o[i] || o[2 * CHUNK + CHUNK / 2 + i])
				fail_msg("written outside at %zu", i);
		free(a);
		free(o);
	}
	free(src);
	free(out);
	close(fd);
}

/* A PUT whose source is a chunk of this very mount, mapped MAP_PRIVATE:
 * the daemon's copy faults those pages in through FUSE reads, which other
 * daemon threads serve. */
static void test_source_on_mount(void **state)
{
	struct kvfs_io io[2], cp;
	char *src, hex[33], path[PATH_MAX], *out = malloc(CHUNK);
	void *map;
	int fd = ns_create("self", 0755), cfd;

	assert_non_null(out);
	src = make_io(io, 1, 11, CHUNK);
	assert_int_equal(kvfs_mput(fd, io, 1), 1);
	kvfs_key_hex(&io[0].key, hex);
	kvfs_test_path(&mnt, path, "self/%s", hex);
	cfd = open(path, O_RDONLY);
	assert_true(cfd >= 0);
	map = mmap(NULL, CHUNK, PROT_READ, MAP_PRIVATE, cfd, 0);
	assert_true(map != MAP_FAILED);
	memset(&cp, 0, sizeof(cp));
	key_of(11, 1, &cp.key);
	cp.buf = map;
	cp.len = CHUNK;
	assert_int_equal(kvfs_mput(fd, &cp, 1), 1);
	assert_int_equal(cp.result, 0);
	munmap(map, CHUNK);
	/* back out of the copy, byte for byte */
	cp.buf = out;
	assert_int_equal(kvfs_mget(fd, &cp, 1, 0), 1);
	assert_memory_equal(out, src, CHUNK);
	close(cfd);
	free(out);
	free(src);
	close(fd);
}

/* Malformed batches fail whole with EINVAL and do nothing: wrong
 * version, wrong size, nents 0 and > KVFS_XFER_MAX, unknown flags,
 * PUT reserved fields, a key twice in one PUT (raw and through
 * kvfs_mput). ENOTTY on a chunk fd and the root. */
static void test_bad_batches(void **state)
{
	struct kvfs_xfer *b = xfer_arg(2);
	char data[100];
	struct kvfs_io io[2];
	int fd = ns_create("bad", 0755), rfd, cfd;
	unsigned long long errs0 = stat_of("\"xfer\"", "batch_errors");

	memset(data, 7, sizeof(data));
	key_of(5, 0, &b->ents[0].key);
	key_of(5, 1, &b->ents[1].key);
	for (int i = 0; i < 2; i++) {
		b->ents[i].addr = (uintptr_t)data;
		b->ents[i].length = sizeof(data);
	}
	b->version = 2;
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_PUT, b), -EINVAL);
	b->version = KVFS_ABI_VERSION;
	b->size = sizeof(*b) - 1;
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_PUT, b), -EINVAL);
	b->size = sizeof(*b);
	b->nents = 0;
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_PUT, b), -EINVAL);
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_GET, b), -EINVAL);
	b->nents = KVFS_XFER_MAX + 1;
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_PUT, b), -EINVAL);
	b->nents = 2;
	b->flags = 0x80;
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_GET, b), -EINVAL);
	b->flags = KVFS_XFER_DEVICE; /* a GET flag only */
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_PUT, b), -EINVAL);
	b->flags = 0;
	b->ents[1].offset = 1; /* reserved for PUT */
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_PUT, b), -EINVAL);
	b->ents[1].offset = 0;
	b->ents[1].key = b->ents[0].key; /* duplicate */
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_PUT, b), -EINVAL);
	assert_int_equal(exists(fd, &b->ents[0].key), 0);
	/* version and size are refused by fs_ioctl.c's common check */
	assert_int_equal(stat_of("\"xfer\"", "batch_errors") - errs0, 7);

	memset(io, 0, sizeof(io));
	io[0].key = io[1].key = b->ents[0].key;
	io[0].buf = io[1].buf = data;
	io[0].len = io[1].len = sizeof(data);
	assert_int_equal(kvfs_mput(fd, io, 2), -EINVAL);
	assert_int_equal(exists(fd, &io[0].key), 0);
	assert_int_equal(kvfs_mput(fd, io, 0), -EINVAL);
	assert_int_equal(kvfs_mget(fd, io, 1, 0x80), -EINVAL);

	/* the fd kinds that are not a namespace */
	b->ents[1].key = io[0].key;
	key_of(5, 1, &b->ents[1].key);
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_PUT, b), 0);
	assert_int_equal(b->done, 2);
	cfd = kvfs_chunk_open(fd, &b->ents[0].key);
	assert_true(cfd >= 0);
	assert_int_equal(raw_ioctl(cfd, KVFS_IOC_GET, b), -ENOTTY);
	rfd = kvfs_mount_open(mnt.dir);
	assert_true(rfd >= 0);
	assert_int_equal(raw_ioctl(rfd, KVFS_IOC_GET, b), -ENOTTY);
	close(rfd);
	close(cfd);
	free(b);
	close(fd);
}

/* Per-entry size errors: above max_chunk (4M here) EFBIG; against the
 * namespace's chunk_bytes EMSGSIZE; the others in the batch are stored. */
static void test_sizes(void **state)
{
	struct kvfs_io io[3];
	char *big = calloc(1, (4u << 20) + 1), small[CHUNK];
	int fd = ns_create("sizes", 0755), cfd;
	char path[PATH_MAX];

	assert_non_null(big);
	memset(io, 0, sizeof(io));
	for (int i = 0; i < 3; i++) {
		key_of(6, (uint64_t)i, &io[i].key);
		io[i].buf = big;
		io[i].len = 1000;
	}
	io[1].len = (4u << 20) + 1;
	assert_int_equal(kvfs_mput(fd, io, 3), 2);
	assert_int_equal(io[1].result, -EFBIG);
	assert_int_equal(exists(fd, &io[1].key), 0);

	cfd = ns_create("sized", 0755);
	kvfs_test_path(&mnt, path, "sized");
	assert_int_equal(setxattr(path, KVFS_XATTR_CHUNK_BYTES, "65536", 5,
				  0), 0);
	kvfs_test_fill(small, CHUNK, 6, 0);
	for (int i = 0; i < 3; i++) {
		io[i].buf = small;
		io[i].len = i == 2 ? CHUNK - 1 : CHUNK;
	}
	assert_int_equal(kvfs_mput(cfd, io, 3), 2);
	assert_int_equal(io[2].result, -EMSGSIZE);
	assert_int_equal(exists(cfd, &io[2].key), 0);
	free(big);
	close(cfd);
	close(fd);
}

/* A user who may not read (GET) or write (PUT) the namespace gets EACCES
 * for the whole batch, with fds root opened; reading a 0755 namespace is
 * fine and writing it is not. Without search permission (0706: read and
 * write, no x) open(2) and creat(2) of a chunk are refused, so GET and PUT
 * are too. */
static void test_eacces(void **state)
{
	struct kvfs_io io[2];
	char *src, hex[33], path[PATH_MAX];
	int sfd, pfd, xfd, status;
	pid_t pid;

	if (geteuid() != 0) {
		fprintf(stderr, "skip test_eacces: needs root to setuid\n");
		skip();
	}
	sfd = ns_create("xsec", 0700);
	pfd = ns_create("xpub", 0755);
	xfd = ns_create("xnox", 0706);
	assert_int_equal(fchmod(sfd, 0700), 0);
	assert_int_equal(fchmod(pfd, 0755), 0);
	assert_int_equal(fchmod(xfd, 0706), 0);
	src = make_io(io, 2, 7, CHUNK);
	assert_int_equal(kvfs_mput(sfd, io, 2), 2);
	assert_int_equal(kvfs_mput(pfd, io, 1), 1);
	assert_int_equal(kvfs_mput(xfd, io, 1), 1);
	kvfs_key_hex(&io[0].key, hex);
	kvfs_test_path(&mnt, path, "xnox/%s", hex);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *out = malloc(CHUNK);
		struct kvfs_io g = { .key = io[0].key, .buf = out,
				     .len = CHUNK };
		int fails = 0;

		if (!out || setgroups(0, NULL) < 0 || setgid(65534) < 0 ||
		    setuid(65534) < 0)
			_exit(100);
		if (kvfs_mget(sfd, &g, 1, 0) != -EACCES)
			fails |= 1;
		if (kvfs_mput(sfd, &io[1], 1) != -EACCES)
			fails |= 2;
		if (kvfs_mget(pfd, &g, 1, 0) != 1 || g.result != CHUNK ||
		    memcmp(out, io[0].buf, CHUNK))
			fails |= 4;
		if (kvfs_mput(pfd, &io[1], 1) != -EACCES)
			fails |= 8;
		/* no search permission: the files are out of reach */
		if (open(path, O_RDONLY) >= 0 || errno != EACCES)
			fails |= 16;
		memset(out, 0, CHUNK);
		if (kvfs_mget(xfd, &g, 1, 0) != -EACCES || out[0])
			fails |= 32;
		if (kvfs_mput(xfd, &io[1], 1) != -EACCES)
			fails |= 64;
		_exit(fails);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(exists(pfd, &io[1].key), 0);
	assert_int_equal(exists(xfd, &io[1].key), 0);
	free(src);
	close(sfd);
	close(pfd);
	close(xfd);
}

/* Callers SIGKILLed in the middle of large GETs and PUTs: the daemon goes
 * on, nothing stays pinned, and every key that got published reads back
 * whole and right (a partial chunk is never published). */
static void test_caller_killed(void **state)
{
	enum { N = 16, LEN = 2u << 20 };
	struct kvfs_io io[N];
	char *src, hex[33], path[PATH_MAX], val[16];
	int fd = ns_create("kill", 0755);
	unsigned long long intr = stat_of("\"xfer\"", "interrupted");

	src = make_io(io, N, 8, LEN);
	assert_int_equal(kvfs_mput(fd, io, N), N);
	for (int round = 0; round < 6; round++) {
		bool put = round & 1;
		pid_t pid = fork();
		int status;

		assert_true(pid >= 0);
		if (pid == 0) {
			struct kvfs_io g[N];
			char *out = malloc((size_t)N * LEN);

			for (uint64_t it = 0; out; it++) {
				memcpy(g, io, sizeof(g));
				for (int i = 0; i < N; i++) {
					if (put) {
						key_of(100 + (uint64_t)round,
						       it * N + (uint64_t)i,
						       &g[i].key);
						continue;
					}
					g[i].buf = out + (size_t)i * LEN;
				}
				if (put)
					kvfs_mput(fd, g, N);
				else
					kvfs_mget(fd, g, N, 0);
			}
			_exit(1);
		}
		usleep(150000 + 50000 * round);
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFSIGNALED(status));
		if (put) { /* what got published is whole */
			for (uint64_t i = 0; i < 2048; i++) {
				struct kvfs_key k;

				key_of(100 + (uint64_t)round, i, &k);
				if (!exists(fd, &k)) /* not put, or evicted */
					continue;
				kvfs_key_hex(&k, hex);
				kvfs_test_path(&mnt, path, "kill/%s", hex);
				assert_int_equal(kvfs_test_read_check(
					path, LEN, 8 * 1000 + i % N), 0);
			}
		}
	}
	/* no pin left behind by the killed GETs */
	for (int i = 0; i < N; i++) {
		ssize_t n;

		kvfs_key_hex(&io[i].key, hex);
		kvfs_test_path(&mnt, path, "kill/%s", hex);
		n = getxattr(path, KVFS_XATTR_REFS, val, sizeof(val) - 1);
		if (n < 0 && errno == ENOENT)
			continue; /* evicted by the PUTs: not pinned either */
		assert_true(n > 0);
		val[n] = '\0';
		assert_string_equal(val, "0");
	}
	fprintf(stderr, "batches cut short by a signal: %llu\n",
		stat_of("\"xfer\"", "interrupted") - intr);
	free(src);
	close(fd);
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* A caller that keeps getting (non-fatal) signals: the daemon cuts
 * batches short (entries -EINTR, at least one done each time) and
 * kvfs_mget / kvfs_mput send the rest again, so every call completes with
 * the right bytes. */
static void test_signals(void **state)
{
	enum { N = 16, LEN = 2u << 20 };
	struct kvfs_io io[N];
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval it = { { 0, 300 }, { 0, 300 } }, off = { 0 };
	unsigned long long intr = stat_of("\"xfer\"", "interrupted");
	char *src, *out = malloc((size_t)N * LEN);
	int fd = ns_create("sig", 0755);

	assert_non_null(out);
	src = make_io(io, N, 12, LEN);
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGALRM, &sa, NULL), 0); /* no SA_RESTART */
	assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
	assert_int_equal(kvfs_mput(fd, io, N), N);
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < N; i++)
			io[i].buf = out + (size_t)i * LEN;
		memset(out, 0, (size_t)N * LEN);
		long got = kvfs_mget(fd, io, N, 0);

		for (int i = 0; got != N && i < N; i++)
			fprintf(stderr, "entry %d: %lld\n", i,
				(long long)io[i].result);
		assert_int_equal(got, N);
		for (int i = 0; i < N; i++)
			assert_int_equal(io[i].result, LEN);
		assert_memory_equal(out, src, (size_t)N * LEN);
	}
	assert_int_equal(setitimer(ITIMER_REAL, &off, NULL), 0);
	signal(SIGALRM, SIG_DFL);
	intr = stat_of("\"xfer\"", "interrupted") - intr;
	fprintf(stderr, "batches cut short by SIGALRM: %llu\n", intr);
	assert_true(intr > 0); /* the resend path did run */
	free(src);
	free(out);
	close(fd);
}

/* Drops CAP_SYS_PTRACE from this process's capability sets (so a daemon
 * without it may ptrace us: its caps are then a superset of ours). */
static int drop_ptrace_cap(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) < 0)
		return -1;
	d[0].effective &= ~(1u << CAP_SYS_PTRACE);
	d[0].permitted &= ~(1u << CAP_SYS_PTRACE);
	d[0].inheritable &= ~(1u << CAP_SYS_PTRACE);
	return (int)syscall(SYS_capset, &h, d);
}

/*
 * A daemon that may not reach its caller: kvfs-mount started as root
 * without CAP_SYS_PTRACE (setpriv), so the kernel's ptrace rules decide.
 * Refused with EPERM for the whole batch (nothing published, the reply
 * names the daemon's pid for prctl(PR_SET_PTRACER)): a root caller with
 * more capabilities than the daemon, a caller of another uid, a caller
 * that made itself non-dumpable. Let in: a root caller whose capabilities
 * the daemon's include.
 */
static void test_eperm(void **state)
{
	char wrap[] = "/tmp/kvfs-xfer-wrap.XXXXXX", script[PATH_MAX + 64];
	const char *args[] = { "-f", "-o", "l1_size=16M,allow_other", "@DIR@",
			       NULL };
	const char *real = kvfs_test_bin();
	char realabs[PATH_MAX], data[4096];
	struct kvfs_mnt m2;
	struct kvfs_io io;
	struct kvfs_xfer *b = xfer_arg(1);
	int fd, status;
	pid_t pid;
	FILE *f;

	if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK)) {
		fprintf(stderr, "skip test_eperm: needs root and setpriv\n");
		skip();
	}
	assert_non_null(realpath(real, realabs));
	assert_non_null(mkdtemp(wrap));
	snprintf(script, sizeof(script), "%s/kvfs-mount", wrap);
	f = fopen(script, "w");
	assert_non_null(f);
	fprintf(f, "#!/bin/sh\nexec /usr/bin/setpriv --inh-caps=-sys_ptrace "
		   "--bounding-set=-sys_ptrace -- %s \"$@\"\n", realabs);
	fclose(f);
	assert_int_equal(chmod(script, 0755), 0);
	setenv("KVFS_MOUNT_BIN", script, 1);
	status = kvfs_test_mount_args(&m2, args);
	setenv("KVFS_MOUNT_BIN", realabs, 1);
	assert_int_equal(status, 0);
	fd = kvfs_ns_open(m2.dir, "perm", KVFS_NS_CREATE, 0777);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0777), 0);
	memset(data, 9, sizeof(data));
	memset(&io, 0, sizeof(io));
	key_of(13, 0, &io.key);
	io.buf = data;
	io.len = sizeof(data);
	/* a caller more privileged than the daemon */
	assert_int_equal(kvfs_mput(fd, &io, 1), -EPERM);
	assert_int_equal(exists(fd, &io.key), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) /* same uid, no more capabilities, dumpable: let in */
		_exit(drop_ptrace_cap() == 0 && kvfs_mput(fd, &io, 1) == 1 ?
			      0 : 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(exists(fd, &io.key), 1);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fails = 0;

		key_of(13, 1, &io.key);
		if (setgroups(0, NULL) < 0 || setgid(65534) < 0 ||
		    setuid(65534) < 0)
			_exit(100);
		if (kvfs_mput(fd, &io, 1) != -EPERM)
			fails |= 1;
		b->ents[0].key = io.key;
		b->ents[0].addr = (uintptr_t)data;
		b->ents[0].length = sizeof(data);
		if (raw_ioctl(fd, KVFS_IOC_PUT, b) != -EPERM ||
		    b->daemon_pid != m2.pid)
			fails |= 2;
		_exit(fails);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	key_of(13, 1, &io.key);
	assert_int_equal(exists(fd, &io.key), 0);

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) { /* not dumpable: only CAP_SYS_PTRACE may */
		char out[4096];

		key_of(13, 0, &io.key);
		io.buf = out;
		if (drop_ptrace_cap() < 0 ||
		    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
			_exit(100);
		_exit(kvfs_mget(fd, &io, 1, 0) == -EPERM ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	/* A lookup's chain by address (KVFS_LOOKUP_KEYS_AT) needs the same
	 * right: refused with EPERM, and kvfs_lookup sends the keys in the
	 * struct instead (in a child: it remembers the refusal for the rest
	 * of its process). */
	{
		static struct kvfs_key chain[600];
		struct kvfs_lookup *lk = calloc(1, sizeof(*lk));

		assert_non_null(lk);
		for (int i = 0; i < 600; i++) {
			key_of(14, (uint64_t)i, &chain[i]);
			assert_int_equal(kvfs_put(fd, &chain[i], data, 64), 0);
		}
		lk->version = KVFS_ABI_VERSION;
		lk->size = sizeof(*lk);
		lk->flags = KVFS_LOOKUP_KEYS_AT;
		lk->nkeys = 600;
		lk->keys_at = (uint64_t)(uintptr_t)chain;
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct kvfs_result res;
			int fails = 0;

			if (raw_ioctl(fd, KVFS_IOC_LOOKUP, lk) != -EPERM)
				fails |= 1;
			if (kvfs_lookup(fd, chain, 600, 0, 0, 0, &res) != 600)
				fails |= 2;
			if (kvfs_lookup(fd, chain, 600, 0, KVFS_LOOKUP_PIN, 0,
					&res) != 600 || res.nleases != 2 ||
			    kvfs_release(fd, &res) != 0)
				fails |= 4;
			_exit(fails);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		free(lk);
	}
	close(fd);
	free(b);
	assert_int_equal(kvfs_test_umount(&m2), 0);
	unlink(script);
	rmdir(wrap);
}

/* ---------------------------------------- eviction racing GETs (pins) */

struct race {
	int fd;
	volatile int stop;
	unsigned long long gets, bad, hits;
};

#define RACE_LEN (256u << 10)

static void *race_writer(void *arg)
{
	struct race *r = arg;
	char *buf = malloc(RACE_LEN);
	struct kvfs_io io;

	for (uint64_t i = 0; buf && !r->stop; i++) {
		memset(&io, 0, sizeof(io));
		key_of(9, i % 2000, &io.key);
		kvfs_test_fill(buf, RACE_LEN, 9000000 + i % 2000, 0);
		io.buf = buf;
		io.len = RACE_LEN;
		kvfs_mput(r->fd, &io, 1);
	}
	free(buf);
	return NULL;
}

static void *race_reader(void *arg)
{
	struct race *r = arg;
	enum { B = 16 };
	struct kvfs_io g[B];
	uint64_t idx[B];
	char *out = malloc((size_t)B * RACE_LEN);
	uint64_t seed = 1;

	while (out && !r->stop) {
		memset(g, 0, sizeof(g));
		for (int i = 0; i < B; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			idx[i] = (seed >> 33) % 2000;
			key_of(9, idx[i], &g[i].key);
			g[i].buf = out + (size_t)i * RACE_LEN;
			g[i].len = RACE_LEN;
		}
		if (kvfs_mget(r->fd, g, B, 0) < 0) {
			__atomic_fetch_add(&r->bad, 1, __ATOMIC_RELAXED);
			continue;
		}
		for (int i = 0; i < B; i++) {
			uint64_t k = idx[i];

			__atomic_fetch_add(&r->gets, 1, __ATOMIC_RELAXED);
			if (g[i].result == -ENOENT)
				continue;
			if (g[i].result != RACE_LEN ||
			    kvfs_test_check(g[i].buf, RACE_LEN, 9000000 + k, 0))
				__atomic_fetch_add(&r->bad, 1, __ATOMIC_RELAXED);
			else
				__atomic_fetch_add(&r->hits, 1,
						   __ATOMIC_RELAXED);
		}
	}
	free(out);
	return NULL;
}

/* A 16 MiB L1 holds 64 of the 256 KiB chunks a writer keeps putting (and
 * evicting); readers GET random batches meanwhile: every hit is the key's
 * own bytes, whole. */
static void test_evict_race(void **state)
{
	struct kvfs_mnt m2;
	const char *args[] = { "-f", "-o", "l1_size=16M,max_chunk=1M",
			       "@DIR@", NULL };
	struct race r = { 0 };
	pthread_t w, rd[2];

	assert_int_equal(kvfs_test_mount_args(&m2, args), 0);
	r.fd = kvfs_ns_open(m2.dir, "race", KVFS_NS_CREATE, 0755);
	assert_true(r.fd >= 0);
	assert_int_equal(pthread_create(&w, NULL, race_writer, &r), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&rd[i], NULL, race_reader, &r),
				 0);
	sleep(3);
	r.stop = 1;
	pthread_join(w, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(rd[i], NULL);
	fprintf(stderr, "race: %llu entries, %llu hits, %llu bad\n", r.gets,
		r.hits, r.bad);
	assert_int_equal(r.bad, 0);
	assert_true(r.hits > 0);
	close(r.fd);
	assert_int_equal(kvfs_test_umount(&m2), 0);
}

/* An empty chunk is never published and reserves nothing: in an 8 MiB L1
 * holding 4 + 3 MiB, PUTs of empty chunks get ENODATA and evict nothing (a
 * writer of unknown size once reserved the namespace's last size, 3 MiB,
 * and evicted); a GET of one is a miss. */
static void test_empty_put(void **state)
{
	struct kvfs_mnt m2;
	const char *args[] = { "-f", "-o", "l1_size=8M,max_chunk=4M",
			       "@DIR@", NULL };
	struct kvfs_io io[2], e[2], g;
	char *src, out[1];
	unsigned long long ev;
	int fd;

	assert_int_equal(kvfs_test_mount_args(&m2, args), 0);
	fd = kvfs_ns_open(m2.dir, "empty", KVFS_NS_CREATE, 0755);
	assert_true(fd >= 0);
	src = make_io(io, 2, 15, 4u << 20);
	io[1].len = 3u << 20;
	assert_int_equal(kvfs_mput(fd, &io[0], 1), 1);
	assert_int_equal(kvfs_mput(fd, &io[1], 1), 1);
	ev = stat_in(&m2, "", "evictions");
	memset(e, 0, sizeof(e));
	key_of(15, 100, &e[0].key);
	key_of(15, 101, &e[1].key);
	/* a chunk without bytes is never published (issue 12): ENODATA per
	 * entry, and nothing reserved or evicted for it */
	assert_int_equal(kvfs_mput(fd, e, 2), 0);
	assert_int_equal(e[0].result, -ENODATA);
	assert_int_equal(e[1].result, -ENODATA);
	assert_int_equal(stat_in(&m2, "", "evictions") - ev, 0);
	assert_int_equal(exists(fd, &io[0].key), 1);
	assert_int_equal(exists(fd, &io[1].key), 1);
	memset(&g, 0, sizeof(g));
	g.key = e[0].key;
	g.buf = out;
	g.len = sizeof(out);
	assert_int_equal(kvfs_mget(fd, &g, 1, 0), 0);
	assert_int_equal(g.result, -ENOENT);
	free(src);
	close(fd);
	assert_int_equal(kvfs_test_umount(&m2), 0);
}

/* Aborts m's FUSE connection (root), so a test that wedged it can still
 * unmount. The connection is found in /proc/self/mountinfo: a stat of the
 * wedged mount itself would hang. */
static void abort_conn(struct kvfs_mnt *m)
{
	char line[4096], p[128];
	unsigned maj, min;
	FILE *f = fopen("/proc/self/mountinfo", "r");
	int fd;

	while (f && fgets(line, sizeof(line), f)) {
		char dev[64], dir[PATH_MAX];

		if (sscanf(line, "%*d %*d %63s %*s %4095s", dev, dir) != 2 ||
		    strcmp(dir, m->dir) || sscanf(dev, "%u:%u", &maj, &min) != 2)
			continue;
		snprintf(p, sizeof(p), "/sys/fs/fuse/connections/%u/abort", min);
		fd = open(p, O_WRONLY);
		if (fd >= 0) {
			if (write(fd, "1", 1) < 0)
				perror(p);
			close(fd);
		}
	}
	if (f)
		fclose(f);
}

/* 40 callers at once (more than the daemon's FUSE workers, fs_workers(),
 * on up to 20 CPUs) each GET a chunk into an mmap of a never-read chunk
 * file of the same mount: the copies fault, and the faults need workers
 * to serve their reads. The daemon runs at most half its workers' worth
 * of batches at once (the rest get EAGAIN, which libkvfs retries), so
 * every caller finishes and the mount keeps answering; before that cap the
 * mount hung for good. */
static void test_self_backed_flood(void **state)
{
	enum { N = 40, LEN = 1u << 20 };
	struct kvfs_mnt m2;
	const char *args[] = { "-f", "-o", "l1_size=128M,max_chunk=4M",
			       "@DIR@", NULL };
	struct kvfs_io io[N];
	char *src, hex[33], path[PATH_MAX];
	pid_t kids[N];
	int fd, pp[2], ok = 0, left = N;

	assert_int_equal(kvfs_test_mount_args(&m2, args), 0);
	fd = kvfs_ns_open(m2.dir, "flood", KVFS_NS_CREATE, 0755);
	assert_true(fd >= 0);
	src = make_io(io, N, 21, LEN);
	assert_int_equal(kvfs_mput(fd, io, N), N);
	assert_int_equal(pipe(pp), 0);
	for (int i = 0; i < N; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0) {
			struct kvfs_io g = io[i];
			void *map;
			char c;
			int cfd;

			kvfs_key_hex(&g.key, hex);
			kvfs_test_path(&m2, path, "flood/%s", hex);
			cfd = open(path, O_RDONLY);
			map = cfd < 0 ? MAP_FAILED :
				mmap(NULL, LEN, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE, cfd, 0);
			if (map == MAP_FAILED)
				_exit(2);
			close(pp[1]);
			if (read(pp[0], &c, 1) < 0)
				_exit(2);
			g.buf = map;
			g.len = LEN;
			_exit(kvfs_mget(fd, &g, 1, 0) == 1 &&
			      g.result == (int64_t)LEN &&
			      !memcmp(map, src + (size_t)i * LEN, LEN) ? 0 : 3);
		}
	}
	close(pp[0]);
	close(pp[1]); /* go */
	for (int t = 0; t < 600 && left; t++) { /* 60 s */
		int st;
		pid_t p;

		while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
			left--;
			ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
		}
		if (left)
			usleep(100 * 1000);
	}
	if (left) { /* wedged: free the children and the mount */
		abort_conn(&m2);
		for (int i = 0; i < N; i++)
			kill(kids[i], SIGKILL);
		while (waitpid(-1, NULL, 0) > 0)
			;
	}
	assert_int_equal(left, 0);
	assert_int_equal(ok, N);
	assert_true(stat_in(&m2, "\"xfer\"", "busy") > 0);
	free(src);
	close(fd);
	assert_int_equal(kvfs_test_umount(&m2), 0);
}

/* Chunks only in L2 are promoted (verified) and copied out. */
static void test_l2(void **state)
{
	enum { N = 48, LEN = 1u << 20 };
	struct kvfs_mnt m2;
	char l2[] = "/tmp/kvfs-xfer-l2.XXXXXX", opts[256];
	const char *args[] = { "-f", "-o", opts, "@DIR@", NULL };
	struct kvfs_io io[N];
	char *src, *out = malloc((size_t)N * LEN);
	unsigned long long prom;
	int fd;

	assert_non_null(out);
	assert_non_null(mkdtemp(l2));
	snprintf(opts, sizeof(opts),
		 "l1_size=16M,max_chunk=1M,l2_dir=%s,l2_size=256M", l2);
	assert_int_equal(kvfs_test_mount_args(&m2, args), 0);
	fd = kvfs_ns_open(m2.dir, "l2", KVFS_NS_CREATE, 0755);
	assert_true(fd >= 0);
	src = make_io(io, N, 10, LEN);
	assert_int_equal(kvfs_mput(fd, io, N), N);
	for (int i = 0; i < N; i++)
		io[i].buf = out + (size_t)i * LEN;
	assert_int_equal(kvfs_mget(fd, io, N, 0), N);
	assert_memory_equal(src, out, (size_t)N * LEN);
	prom = stat_in(&m2, "", "promotions");
	assert_true(prom > 0);
	free(src);
	free(out);
	close(fd);
	assert_int_equal(kvfs_test_umount(&m2), 0);
	{
		char cmd[PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", l2);
		assert_int_equal(system(cmd), 0);
	}
}

/* lookup + get of a 1,024-chunk prompt: at most 8 ioctls (2 lookups of
 * 512 keys, 5 GETs of 240 entries), counted by the daemon. */
static void test_ioctl_count(void **state)
{
	enum { N = 1024, LEN = 4096 };
	struct kvfs_key keys[N];
	struct kvfs_io *io = calloc(N, sizeof(*io));
	uint32_t *tok = malloc(N * 16 * sizeof(*tok));
	char *buf = malloc((size_t)N * LEN);
	unsigned long long l0, g0, l1, g1;
	struct kvfs_result res;
	int fd = ns_create("prompt", 0755);

	assert_true(io && tok && buf);
	for (size_t i = 0; i < N * 16; i++)
		tok[i] = (uint32_t)(i * 31 + 7);
	assert_int_equal(kvfs_keys(tok, N * 16, 16, 0, NULL, 0, keys, N), N);
	for (size_t i = 0; i < N; i++) {
		io[i].key = keys[i];
		io[i].buf = buf + i * LEN;
		io[i].len = LEN;
		kvfs_test_fill(io[i].buf, LEN, 20000 + i, 0);
	}
	assert_int_equal(kvfs_mput(fd, io, N), N);
	memset(buf, 0, (size_t)N * LEN);
	l0 = stat_of("\"ioctl\"", "lookups");
	g0 = stat_of("\"xfer\"", "gets");
	assert_int_equal(kvfs_lookup(fd, keys, N, 0, 0, 0, &res), N);
	assert_int_equal(kvfs_mget(fd, io, N, 0), N);
	l1 = stat_of("\"ioctl\"", "lookups");
	g1 = stat_of("\"xfer\"", "gets");
	fprintf(stderr, "1024-chunk prompt: %llu lookups + %llu gets\n",
		l1 - l0, g1 - g0);
	assert_true((l1 - l0) + (g1 - g0) <= 8);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(kvfs_test_check(io[i].buf, LEN, 20000 + i, 0),
				 0);
	free(io);
	free(tok);
	free(buf);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* first, while L1 has room for the whole prompt */
		cmocka_unit_test(test_ioctl_count),
		cmocka_unit_test(test_signals), /* 32 MiB: L1 still has room */
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_ranges_and_misses),
		cmocka_unit_test(test_efault),
		cmocka_unit_test(test_overlap),
		cmocka_unit_test(test_source_on_mount),
		cmocka_unit_test(test_bad_batches),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_eacces),
		cmocka_unit_test(test_eperm),
		cmocka_unit_test(test_caller_killed),
		cmocka_unit_test(test_evict_race),
		cmocka_unit_test(test_l2),
		cmocka_unit_test(test_empty_put),
		cmocka_unit_test(test_self_backed_flood),
	};

	if (access(kvfs_test_bin(), X_OK) != 0) {
		printf("skip: %s is not built\n", kvfs_test_bin());
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
