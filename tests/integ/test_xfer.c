/*
 * test_xfer.c - batched GET/PUT (KVFS_IOC_GET / KVFS_IOC_PUT, kvfs_mget /
 * kvfs_mput) on a real mount, what a batch does: round trips across batch
 * boundaries, byte ranges, per-entry errors (ENOENT, EMSGSIZE, ERANGE,
 * EFAULT for unmapped and read-only memory, EEXIST, EFBIG, EMSGSIZE of
 * chunk_bytes), malformed batches (EINVAL, nothing done), ENOTTY,
 * overlapping entries, a source mapped from the mount itself, the
 * checksum a PUT keeps (sizes around the streaming threshold), L2
 * promotion, the ioctl count of a 1,024-chunk prompt, and empty chunks
 * that evict nothing.
 *
 * Who calls and how (EACCES, EPERM, callers killed or signalled
 * mid-batch, eviction racing GETs, a flood of self-backed GETs):
 * test_xfer_callers.c.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <sys/mman.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "hash/hashkey.h"
#include "tests/integ/xfer_test.h"

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
	unsigned long long puts0 = stat_of("xfer", "puts");
	int fd = ns_create("rt", 0755);

	assert_non_null(io);
	src = make_io(io, N, 1, CHUNK);
	assert_int_equal(kvfs_mput(fd, io, N), N);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(io[i].result, 0);
	assert_int_equal(stat_of("xfer", "puts") - puts0, 3);

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

/* The checksum a PUT keeps is the XXH3-64 of exactly the bytes stored, for
 * chunk sizes on either side of the streaming threshold (64 KiB) and of
 * the daemon's 256 KiB pieces, from sources at odd addresses; so is the
 * one computed for a file written with write(2) in odd pieces. */
static void test_put_checksums(void **state)
{
	static const size_t lens[] = {
		1000, (64u << 10) - 1, 64u << 10, (64u << 10) + 1,
		(100u << 10) + 3, 256u << 10, (256u << 10) + 13, 300u << 10,
		(512u << 10) + (64u << 10) - 1, 1u << 20, (2u << 20) + 77,
	};
	enum { N = sizeof(lens) / sizeof(lens[0]) };
	const size_t slot = 3u << 20;
	struct kvfs_io io[N], back[N];
	char *src = malloc(N * slot), *dst = malloc(N * slot);
	char path[PATH_MAX], hex[33], sum[32], want[32];
	size_t off;
	int fd = ns_create("cks", 0755), wfd;

	(void)state;
	assert_true(src && dst);
	memset(io, 0, sizeof(io));
	memset(back, 0, sizeof(back));
	for (int i = 0; i < N; i++) {
		key_of(31, (unsigned)i, &io[i].key);
		io[i].buf = src + (size_t)i * slot + (size_t)(i * 7) % 61;
		io[i].len = lens[i];
		kvfs_test_fill(io[i].buf, lens[i], 900 + (uint64_t)i, 0);
		back[i].key = io[i].key;
		back[i].buf = dst + (size_t)i * slot;
		back[i].len = slot;
	}
	assert_int_equal(kvfs_mput(fd, io, N), N);
	assert_int_equal(kvfs_mget(fd, back, N, 0), N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(io[i].result, 0);
		assert_int_equal(back[i].result, (int64_t)lens[i]);
		assert_memory_equal(back[i].buf, io[i].buf, lens[i]);
		kvfs_key_hex(&io[i].key, hex);
		kvfs_test_path(&mnt, path, "cks/%s", hex);
		memset(sum, 0, sizeof(sum));
		assert_int_equal(getxattr(path, KVFS_XATTR_CHECKSUM, sum, 31),
				 16);
		snprintf(want, sizeof(want), "%016" PRIx64,
			 hashkey_checksum(io[i].buf, lens[i]));
		assert_string_equal(sum, want);
	}

	/* a plain writer: 128 KiB + 5 byte pieces, the last one short */
	kvfs_test_path(&mnt, path, "cks/%032x", 0xC0FFEEu);
	wfd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(wfd >= 0);
	for (off = 0; off < lens[N - 1]; off += (128u << 10) + 5) {
		size_t n = lens[N - 1] - off < (128u << 10) + 5
				   ? lens[N - 1] - off
				   : (128u << 10) + 5;

		assert_int_equal(write(wfd, (const char *)io[N - 1].buf + off,
				       n),
				 (ssize_t)n);
	}
	assert_int_equal(close(wfd), 0);
	assert_int_equal(kvfs_test_read_check(path, lens[N - 1], 900 + N - 1),
			 0);
	memset(sum, 0, sizeof(sum));
	assert_int_equal(getxattr(path, KVFS_XATTR_CHECKSUM, sum, 31), 16);
	snprintf(want, sizeof(want), "%016" PRIx64,
		 hashkey_checksum(io[N - 1].buf, lens[N - 1]));
	assert_string_equal(sum, want);
	free(src);
	free(dst);
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
	unsigned long long errs0 = stat_of("xfer", "batch_errors");

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
	assert_int_equal(stat_of("xfer", "batch_errors") - errs0, 7);

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

/* The short form (KVFS_IOC_GET_SMALL / _PUT_SMALL), raw: the results of
 * the long form; more than KVFS_XFER_SMALL_MAX entries, none, or the long
 * form's size under its number is EINVAL, the root ENOTTY. kvfs_mput /
 * kvfs_mget send a batch of 8 in it (xfer.small) and one of 9 in the
 * long form, the bytes the same. */
static void test_small_form(void **state)
{
	struct kvfs_xfer *b = xfer_arg(2);
	struct kvfs_io io[9], back[9];
	char data[2][300], out[2][300], *src, *dst;
	unsigned long long s0 = stat_of("xfer", "small");
	int fd = ns_create("small", 0755), rfd;

	(void)state;
	b->size = sizeof(struct kvfs_xfer_small);
	for (int i = 0; i < 2; i++) {
		memset(data[i], 'a' + i, sizeof(data[i]));
		key_of(6, (uint32_t)i, &b->ents[i].key);
		b->ents[i].addr = (uintptr_t)data[i];
		b->ents[i].length = sizeof(data[i]);
	}
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_PUT_SMALL, b), 0);
	assert_int_equal(b->done, 2);
	assert_int_equal(b->ents[0].result, 0);
	assert_int_equal(b->ents[1].result, 0);
	memset(out, 0, sizeof(out));
	for (int i = 0; i < 2; i++) {
		b->ents[i].addr = (uintptr_t)out[i];
		b->ents[i].cap = sizeof(out[i]);
		b->ents[i].length = 0;
	}
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_GET_SMALL, b), 0);
	assert_int_equal(b->done, 2);
	assert_int_equal(b->bytes, sizeof(out));
	assert_int_equal(b->ents[1].result, sizeof(out[1]));
	assert_int_equal(b->ents[1].size, sizeof(out[1]));
	assert_memory_equal(out, data, sizeof(data));
	assert_int_equal(stat_of("xfer", "small") - s0, 2);

	b->nents = KVFS_XFER_SMALL_MAX + 1;
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_GET_SMALL, b), -EINVAL);
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_PUT_SMALL, b), -EINVAL);
	b->nents = 0;
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_GET_SMALL, b), -EINVAL);
	b->nents = 2;
	b->size = sizeof(*b); /* the long form's size, the short number */
	assert_int_equal(raw_ioctl(fd, KVFS_IOC_GET_SMALL, b), -EINVAL);
	b->size = sizeof(struct kvfs_xfer_small);
	rfd = kvfs_mount_open(mnt.dir);
	assert_true(rfd >= 0);
	assert_int_equal(raw_ioctl(rfd, KVFS_IOC_GET_SMALL, b), -ENOTTY);
	close(rfd);
	assert_int_equal(stat_of("xfer", "small") - s0, 2);

	src = make_io(io, 9, 7, CHUNK);
	dst = calloc(9, CHUNK);
	assert_non_null(dst);
	assert_int_equal(kvfs_mput(fd, io, 8), 8);
	assert_int_equal(stat_of("xfer", "small") - s0, 3);
	assert_int_equal(kvfs_mput(fd, io, 9), 9); /* 8 there already */
	assert_int_equal(io[7].result, -EEXIST);
	assert_int_equal(io[8].result, 0);
	assert_int_equal(stat_of("xfer", "small") - s0, 3);
	memset(back, 0, sizeof(back));
	for (size_t i = 0; i < 9; i++) {
		back[i].key = io[i].key;
		back[i].buf = dst + i * CHUNK;
		back[i].len = CHUNK;
	}
	assert_int_equal(kvfs_mget(fd, back, 8, 0), 8);
	assert_int_equal(stat_of("xfer", "small") - s0, 4);
	assert_memory_equal(src, dst, 8 * (size_t)CHUNK);
	memset(dst, 0, 9 * (size_t)CHUNK);
	assert_int_equal(kvfs_mget(fd, back, 9, 0), 9);
	assert_int_equal(stat_of("xfer", "small") - s0, 4);
	assert_memory_equal(src, dst, 9 * (size_t)CHUNK);
	free(src);
	free(dst);
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
	ev = stat_in(&m2, NULL, "evictions");
	memset(e, 0, sizeof(e));
	key_of(15, 100, &e[0].key);
	key_of(15, 101, &e[1].key);
	/* a chunk without bytes is never published (issue 12): ENODATA per
	 * entry, and nothing reserved or evicted for it */
	assert_int_equal(kvfs_mput(fd, e, 2), 0);
	assert_int_equal(e[0].result, -ENODATA);
	assert_int_equal(e[1].result, -ENODATA);
	assert_int_equal(stat_in(&m2, NULL, "evictions") - ev, 0);
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
	prom = stat_in(&m2, NULL, "promotions");
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
	l0 = stat_of("ioctl", "lookups");
	g0 = stat_of("xfer", "gets");
	assert_int_equal(kvfs_lookup(fd, keys, N, 0, 0, 0, &res), N);
	assert_int_equal(kvfs_mget(fd, io, N, 0), N);
	l1 = stat_of("ioctl", "lookups");
	g1 = stat_of("xfer", "gets");
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
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_put_checksums),
		cmocka_unit_test(test_ranges_and_misses),
		cmocka_unit_test(test_efault),
		cmocka_unit_test(test_overlap),
		cmocka_unit_test(test_source_on_mount),
		cmocka_unit_test(test_bad_batches),
		cmocka_unit_test(test_small_form),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_l2),
		cmocka_unit_test(test_empty_put),
	};

	if (access(kvfs_test_bin(), X_OK) != 0) {
		printf("skip: %s is not built\n", kvfs_test_bin());
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
