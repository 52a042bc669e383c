/*
 * test_buf.c - libkvfs's transfer buffers (kvfs.h section 4a,
 * kvfs_buf_alloc / kvfs_buf_free): their shape (2 MiB-aligned, rounded
 * up to 2 MiB, zeroed, in huge pages where THP is on), their bad
 * arguments, and batched transfers through a real mount into and out of
 * them at offsets that cross their huge pages, every byte checked.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"

#define MIB (1ul << 20)

/* A buffer of 5 MiB + 3 is three huge pages, aligned, zeroed, writable
 * to its rounded end, in huge pages where the kernel has them; freeing
 * it unmaps all three. */
static void test_shape(void **state)
{
	const size_t len = 5 * MIB + 3;
	unsigned char *b;
	long kb;

	(void)state;
	b = kvfs_buf_alloc(len);
	assert_non_null(b);
	assert_int_equal((uintptr_t)b % (2 * MIB), 0);
	for (size_t i = 0; i < 6 * MIB; i += 4096)
		assert_int_equal(b[i], 0);
	assert_int_equal(b[6 * MIB - 1], 0);
	memset(b, 0xa5, 6 * MIB); /* the rounded tail is the caller's too */
	kb = kvfs_test_huge_kb(b);
	assert_true(kb >= 0);
	if (kvfs_test_thp_on())
		assert_true(kb >= 2048);
	else
		print_message("THP off here: %ld kB in huge pages\n", kb);
	assert_int_equal(kvfs_buf_free(b, len), 0);
	/* gone, the rounded tail with it: msync of an unmapped page */
	assert_int_equal(msync(b + 4 * MIB, 4096, MS_ASYNC), -1);
	assert_int_equal(errno, ENOMEM);

	b = kvfs_buf_alloc(1); /* one byte is one huge page */
	assert_non_null(b);
	assert_int_equal((uintptr_t)b % (2 * MIB), 0);
	b[2 * MIB - 1] = 1;
	assert_int_equal(kvfs_buf_free(b, 1), 0);
}

/* Whether the kernel refuses a mapping past what it could commit. */
static bool overcommit_counts(void)
{
	char *v = kvfs_test_slurp("/proc/sys/vm/overcommit_memory", NULL);
	bool yes = v && v[0] != '1';

	free(v);
	return yes;
}

static void test_bad_args(void **state)
{
	void *b;

	(void)state;
	errno = 0;
	assert_null(kvfs_buf_alloc(0));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(kvfs_buf_alloc(SIZE_MAX));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(kvfs_buf_alloc(SIZE_MAX / 2));
	assert_int_equal(errno, EINVAL);
	/* more than the machine has: ENOMEM, not an OOM kill (where the
	 * kernel counts what it commits: overcommit_memory 0 or 2) */
	if (overcommit_counts()) {
		errno = 0;
		assert_null(kvfs_buf_alloc((size_t)1 << 46));
		assert_int_equal(errno, ENOMEM);
	} else {
		print_message("vm.overcommit_memory is 1: 64 TiB not tried\n");
	}

	assert_int_equal(kvfs_buf_free(NULL, 4096), 0);
	b = kvfs_buf_alloc(4096);
	assert_non_null(b);
	assert_int_equal(kvfs_buf_free((char *)b + 4096, 4096), -EINVAL);
	assert_int_equal(kvfs_buf_free(b, 0), -EINVAL);
	assert_int_equal(kvfs_buf_free(b, SIZE_MAX), -EINVAL);
	assert_int_equal(kvfs_buf_free(b, 4096), 0);
}

/*
 * kvfs_mput from one such buffer and kvfs_mget into another, through a
 * real mount: 6 chunks of 3 MiB + 5 at odd offsets (each crosses a huge
 * page of both buffers), a byte range of one, and a chunk that does not
 * fit the room given (-EMSGSIZE, nothing written past the room).
 */
static void test_transfers(void **state)
{
	const size_t csz = 3 * MIB + 5, n = 6, stride = csz + 4093;
	struct kvfs_io io[6];
	struct kvfs_mnt m;
	unsigned char *src, *dst;
	int nsfd;

	(void)state;
	assert_int_equal(kvfs_test_mount(&m, "l1_size=128M"), 0);
	nsfd = kvfs_ns_open(m.dir, "buf", KVFS_NS_CREATE, 0755);
	assert_true(nsfd >= 0);
	src = kvfs_buf_alloc(n * stride + 7);
	dst = kvfs_buf_alloc(n * stride + 7);
	assert_non_null(src);
	assert_non_null(dst);
	memset(io, 0, sizeof(io));
	for (size_t i = 0; i < n; i++) {
		kvfs_test_fill(src + 7 + i * stride, csz, 100 + i, 0);
		io[i].key.b[0] = 0xb0;
		io[i].key.b[15] = (uint8_t)(i + 1);
		io[i].buf = src + 7 + i * stride;
		io[i].len = csz;
	}
	assert_int_equal(kvfs_mput(nsfd, io, n), (long)n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(io[i].result, 0);
		io[i].buf = dst + 7 + i * stride;
		io[i].len = csz;
	}
	memset(dst, 0xee, n * stride + 7);
	assert_int_equal(kvfs_mget(nsfd, io, n, 0), (long)n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(io[i].result, (int64_t)csz);
		assert_int_equal(io[i].size, csz);
		assert_int_equal(kvfs_test_check(dst + 7 + i * stride, csz,
						 100 + i, 0), 0);
		/* the gap after each chunk is untouched */
		assert_int_equal(dst[7 + i * stride + csz], 0xee);
	}
	assert_int_equal(dst[6], 0xee);

	/* a byte range across the chunk's 2 MiB mark */
	memset(dst, 0xee, 3 * MIB);
	io[0].buf = dst + 1;
	io[0].len = MIB;
	io[0].offset = 2 * MIB - 100;
	io[0].length = MIB;
	assert_int_equal(kvfs_mget(nsfd, io, 1, 0), 1);
	assert_int_equal(io[0].result, (int64_t)MIB);
	assert_int_equal(kvfs_test_check(dst + 1, MIB, 100, 2 * MIB - 100),
			 0);
	assert_int_equal(dst[0], 0xee);
	assert_int_equal(dst[1 + MIB], 0xee);

	/* room for less than the chunk: -EMSGSIZE with the size, and the
	 * room past what was given stays as it was */
	memset(dst, 0xee, 4 * MIB);
	io[0].offset = 0;
	io[0].length = 0;
	io[0].len = 2 * MIB;
	assert_int_equal(kvfs_mget(nsfd, io, 1, 0), 0);
	assert_int_equal(io[0].result, -EMSGSIZE);
	assert_int_equal(io[0].size, csz);
	assert_int_equal(dst[1 + 2 * MIB], 0xee);

	assert_int_equal(kvfs_buf_free(src, n * stride + 7), 0);
	assert_int_equal(kvfs_buf_free(dst, n * stride + 7), 0);
	close(nsfd);
	assert_int_equal(kvfs_test_umount(&m), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shape),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_transfers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
