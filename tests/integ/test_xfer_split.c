/*
 * test_xfer_split.c - a GET entry of 512 KiB or more is copied in 256 KiB
 * pieces shared between the thread that pinned the chunk and the daemon's
 * idle copy helpers (fs/fs_xfer.c, struct split). On a real mount: the
 * bytes of single large entries, odd sizes and byte ranges come back whole
 * (ioctl.xfer.split counts them, entries under 512 KiB are not split); an
 * unmapped or read-only page anywhere in the destination gives that entry
 * -EFAULT and writes nothing past what the caller could write; and a chunk
 * replaced under a loop of GETs is served from one version per GET, never
 * a mix of pieces of two (the pin is held until every piece is done).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"

static struct kvfs_mnt mnt;
static int mounted;

static void key_of(uint64_t tag, struct kvfs_key *k)
{
	uint32_t tok[2] = { (uint32_t)tag, 7 };

	assert_int_equal(kvfs_key_chunk(NULL, tag, NULL, 0, tok, 2, k), 0);
}

/* Stores len bytes of kvfs_test_fill(seed) under key (tag). */
static void put(int fd, uint64_t tag, size_t len, uint64_t seed)
{
	struct kvfs_io io = { .len = len };
	char *buf = malloc(len ? len : 1);

	assert_non_null(buf);
	key_of(tag, &io.key);
	kvfs_test_fill(buf, len, seed, 0);
	io.buf = buf;
	assert_int_equal(kvfs_mput(fd, &io, 1), 1);
	assert_int_equal(io.result, 0);
	free(buf);
}

/* The number after "name": in .kvfs/stats's "xfer" object. */
static long long xfer_stat(const char *name)
{
	long long v = kvfs_test_stat(&mnt, "xfer", name);

	assert_true(v >= 0);
	return v;
}

static int setup(void **state)
{
	const char *args[] = { "-f", "-o", "l1_size=64M,max_chunk=4M",
			       "@DIR@", NULL };

	(void)state;
	if (kvfs_test_mount_args(&mnt, args) != 0)
		return -1;
	mounted = 1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (mounted && kvfs_test_umount(&mnt) != 0) {
		fprintf(stderr, "daemon did not exit cleanly\n");
		return -1;
	}
	return 0;
}

/* Single entries of every size around the piece boundaries, whole and in
 * byte ranges, and a batch of several large entries (helpers busy with the
 * batch's entries take pieces only when idle): every byte right. */
static void test_bytes(void **state)
{
	static const size_t sizes[] = {
		(512u << 10) - 1, 512u << 10, (512u << 10) + 1, 2u << 20,
		(2u << 20) + 4097, 4u << 20,
	};
	const size_t ns = sizeof(sizes) / sizeof(sizes[0]);
	int fd = kvfs_ns_open(mnt.dir, "split.bytes", KVFS_NS_CREATE, 0755);
	long long s0, s1;
	struct kvfs_io io[6];
	char *buf = malloc(4u << 20);

	(void)state;
	assert_true(fd >= 0);
	assert_non_null(buf);
	for (size_t i = 0; i < ns; i++)
		put(fd, i, sizes[i], 100 + i);
	s0 = xfer_stat("split");
	for (size_t i = 0; i < ns; i++) {
		struct kvfs_io g = { .buf = buf, .len = 4u << 20 };

		key_of(i, &g.key);
		memset(buf, 0xa5, 4u << 20);
		assert_int_equal(kvfs_mget(fd, &g, 1, 0), 1);
		assert_int_equal(g.result, (int64_t)sizes[i]);
		assert_int_equal(kvfs_test_check(buf, sizes[i], 100 + i, 0), 0);
		/* nothing past the chunk's end */
		for (size_t b = sizes[i]; b < sizes[i] + 64 && b < (4u << 20);
		     b++)
			assert_int_equal((unsigned char)buf[b], 0xa5);
	}
	s1 = xfer_stat("split");
	assert_int_equal(s1 - s0, ns - 1); /* all but the one under 512 KiB */

	/* a range: odd offset, odd length, across several pieces */
	{
		struct kvfs_io g = { .buf = buf, .len = 4u << 20,
				     .offset = 4097,
				     .length = (3u << 20) + 13 };

		key_of(5, &g.key);
		assert_int_equal(kvfs_mget(fd, &g, 1, 0), 1);
		assert_int_equal(g.result, (3 << 20) + 13);
		assert_int_equal(kvfs_test_check(buf, (3u << 20) + 13, 105,
						  4097), 0);
	}

	/* a batch of the large ones, each into its own buffer */
	{
		char *bufs = malloc((size_t)5 * (4u << 20));

		assert_non_null(bufs);
		memset(io, 0, sizeof(io));
		for (size_t i = 1; i < ns; i++) {
			key_of(i, &io[i - 1].key);
			io[i - 1].buf = bufs + (i - 1) * (4u << 20);
			io[i - 1].len = 4u << 20;
		}
		assert_int_equal(kvfs_mget(fd, io, ns - 1, 0), (int)ns - 1);
		for (size_t i = 1; i < ns; i++) {
			assert_int_equal(io[i - 1].result, (int64_t)sizes[i]);
			assert_int_equal(kvfs_test_check(io[i - 1].buf,
							  sizes[i], 100 + i,
							  0), 0);
		}
		free(bufs);
	}
	fprintf(stderr, "split entries %lld, pieces a helper copied %lld\n",
		xfer_stat("split"), xfer_stat("split_helped"));
	free(buf);
	close(fd);
}

/* A 2 MiB destination with a hole (an unmapped page) in its third piece,
 * or a read-only last page: -EFAULT for the entry, the read-only page
 * untouched, the chunk still served whole afterwards. */
static void test_efault(void **state)
{
	const size_t len = 2u << 20, pg = 4096;
	int fd = kvfs_ns_open(mnt.dir, "split.fault", KVFS_NS_CREATE, 0755);
	struct kvfs_io g = { .len = len };
	char *m;

	(void)state;
	assert_true(fd >= 0);
	put(fd, 1, len, 7);
	key_of(1, &g.key);

	m = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(m != MAP_FAILED);
	assert_int_equal(munmap(m + (600u << 10), pg), 0);
	g.buf = m;
	assert_int_equal(kvfs_mget(fd, &g, 1, 0), 0);
	assert_int_equal(g.result, -EFAULT);
	munmap(m, len);

	m = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(m != MAP_FAILED);
	assert_int_equal(mprotect(m + len - pg, pg, PROT_READ), 0);
	g.buf = m;
	assert_int_equal(kvfs_mget(fd, &g, 1, 0), 0);
	assert_int_equal(g.result, -EFAULT);
	for (size_t b = len - pg; b < len; b++)
		if (m[b])
			fail_msg("read-only page written at %zu", b);
	assert_int_equal(mprotect(m + len - pg, pg, PROT_READ | PROT_WRITE),
			 0);
	assert_int_equal(kvfs_mget(fd, &g, 1, 0), 1);
	assert_int_equal(g.result, (int64_t)len);
	assert_int_equal(kvfs_test_check(m, len, 7, 0), 0);
	munmap(m, len);
	close(fd);
}

struct replacer {
	int fd;
	int stop;
	int rounds;
};

/* Replaces chunk 1 with versions of seed 1000, 1001, ... until stop. */
static void *replace_loop(void *arg)
{
	struct replacer *r = arg;
	char name[KVFS_KEY_HEX_LEN + 1], path[PATH_MAX + 64];
	struct kvfs_key k;

	key_of(1, &k);
	kvfs_key_hex(&k, name);
	if (snprintf(path, sizeof(path), "%s/split.race/%s", mnt.dir, name) >=
	    (int)sizeof(path))
		return NULL;
	while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
		if (unlink(path) == 0 || errno == ENOENT) {
			put(r->fd, 1, 4u << 20, 1000 + (uint64_t)r->rounds % 2);
			r->rounds++;
		}
	}
	return NULL;
}

/* GETs of a 4 MiB chunk (16 pieces) while another thread unlinks and
 * stores it again with other bytes: each GET that finds it returns all
 * of one version's bytes. */
static void test_one_version(void **state)
{
	const size_t len = 4u << 20;
	int fd = kvfs_ns_open(mnt.dir, "split.race", KVFS_NS_CREATE, 0755);
	struct replacer r = { 0 };
	struct kvfs_io g = { .len = len };
	char *buf = malloc(len), *v[2] = { malloc(len), malloc(len) };
	int found = 0, missed = 0;
	pthread_t th;
	time_t end;

	(void)state;
	assert_true(fd >= 0);
	assert_non_null(buf);
	assert_non_null(v[0]);
	assert_non_null(v[1]);
	kvfs_test_fill(v[0], len, 1000, 0);
	kvfs_test_fill(v[1], len, 1001, 0);
	put(fd, 1, len, 1000);
	r.fd = fd;
	r.rounds = 1;
	key_of(1, &g.key);
	g.buf = buf;
	assert_int_equal(pthread_create(&th, NULL, replace_loop, &r), 0);
	end = time(NULL) + 2;
	while (time(NULL) < end || found < 20) {
		kvfs_mget(fd, &g, 1, 0);
		if (g.result == -ENOENT) {
			missed++;
			continue;
		}
		assert_int_equal(g.result, (int64_t)len);
		if (memcmp(buf, v[0], len) && memcmp(buf, v[1], len))
			fail_msg("GET %d: bytes of neither version (mixed)",
				 found);
		found++;
		if (found > 100000)
			break;
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELAXED);
	pthread_join(th, NULL);
	fprintf(stderr, "%d GETs whole, %d misses, %d replacements\n", found,
		missed, r.rounds);
	assert_true(r.rounds > 2);
	free(v[0]);
	free(v[1]);
	free(buf);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bytes),
		cmocka_unit_test(test_efault),
		cmocka_unit_test(test_one_version),
	};

	if (access(kvfs_test_bin(), X_OK) != 0) {
		printf("skip: %s is not built\n", kvfs_test_bin());
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
