/*
 * test_served.c - what the byte counters and L2's compression say (issue
 * 27, item 10), on a real mount with L2:
 *  - bytes_out counts the bytes readers got, not the chunk's size per
 *    open: a chunk opened twice and read once counts once, half a chunk
 *    read counts half;
 *  - incompressible bytes are stored raw in L2 (stored_bytes = size, the
 *    compression ratio stays 1.00), compressible ones still compressed.
 *    (That finding them out is cheap, a sample rather than the whole
 *    chunk through zstd, is tests/unit/test_codec.c's.)
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"

/* paths are built from a short mount point: truncation cannot happen */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define MIB (1u << 20)

/* An L2 directory of its own for each mount (so a failed test's mount,
 * still up until the exit, blocks no other). */
static char *new_l2dir(char buf[32])
{
	strcpy(buf, "/tmp/kvfs-served.XXXXXX");
	assert_non_null(mkdtemp(buf));
	return buf;
}

static void drop_l2dir(char *dir)
{
	kvfs_test_rm_files(dir);
	rmdir(dir);
}

/* Mounts with L2 (ingest=all) in a new l2dir, plus opts; makes "ns". */
static void mount_l2(struct kvfs_mnt *m, char l2dir[32], const char *opts)
{
	char o[PATH_MAX + 128], p[PATH_MAX];

	snprintf(o, sizeof(o), "l1_size=16M,max_chunk=4M,l2_dir=%s,"
		 "l2_size=64M,ingest=all%s", new_l2dir(l2dir), opts);
	assert_int_equal(kvfs_test_mount(m, o), 0);
	assert_int_equal(mkdir(kvfs_test_path(m, p, "ns"), 0755), 0);
}

/* The path of key n's chunk in "ns". */
static char *chunk(const struct kvfs_mnt *m, char *out, uint64_t n)
{
	char key[33];

	kvfs_test_key_name(n, key);
	return kvfs_test_path(m, out, "ns/%s", key);
}

static double stat_f(const struct kvfs_mnt *m, const char *key)
{
	char p[PATH_MAX], pat[64], *buf, *s;
	double v = -1;

	buf = kvfs_test_slurp(kvfs_test_path(m, p, KVFS_CTL_STATS), NULL);
	if (!buf)
		return -1;
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	s = strstr(buf, pat);
	if (s)
		v = strtod(s + strlen(pat), NULL);
	free(buf);
	return v;
}

static long long stored_bytes(const char *p)
{
	char v[32];
	ssize_t n = getxattr(p, KVFS_XATTR_STORED_BYTES, v, sizeof(v) - 1);

	if (n <= 0)
		return -1;
	v[n] = 0;
	return strtoll(v, NULL, 10);
}

/* Waits (10 s at most) until L2 wrote n records. */
static void wait_l2_writes(const struct kvfs_mnt *m, long long n)
{
	for (int i = 0; i < 200 && kvfs_test_stat(m, "l2", "writes") < n; i++)
		usleep(50000);
	assert_true(kvfs_test_stat(m, "l2", "writes") >= n);
}

static void write_chunk(const char *p, const void *buf, size_t len)
{
	int fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

static void test_bytes_out_counts_reads(void **state)
{
	char a[PATH_MAX], b[PATH_MAX];
	uint8_t *buf = malloc(MIB);
	struct kvfs_mnt m;
	char l2dir[32];
	int f1, f2, f3;

	(void)state;
	assert_non_null(buf);
	mount_l2(&m, l2dir, "");
	kvfs_test_fill(buf, MIB, 1, 0);
	write_chunk(chunk(&m, a, 1), buf, MIB);
	write_chunk(chunk(&m, b, 2), buf, MIB);
	assert_int_equal(kvfs_test_stat(&m, NULL, "bytes_out"), 0);
	/* opened twice, read once */
	f1 = open(a, O_RDONLY);
	f2 = open(a, O_RDONLY);
	assert_true(f1 >= 0 && f2 >= 0);
	assert_int_equal(kvfs_test_stat(&m, NULL, "bytes_out"), 0);
	assert_int_equal(pread(f1, buf, MIB, 0), MIB);
	assert_int_equal(kvfs_test_check(buf, MIB, 1, 0), 0);
	close(f1);
	close(f2);
	assert_int_equal(kvfs_test_stat(&m, NULL, "bytes_out"), MIB);
	/* half of another */
	f3 = open(b, O_RDONLY);
	assert_true(f3 >= 0);
	assert_int_equal(pread(f3, buf, MIB / 2, MIB / 4), MIB / 2);
	close(f3);
	assert_int_equal(kvfs_test_stat(&m, NULL, "bytes_out"),
			 MIB + MIB / 2);
	free(buf);
	assert_int_equal(kvfs_test_umount(&m), 0);
	drop_l2dir(l2dir);
}

static void test_incompressible_stored_raw(void **state)
{
	char a[PATH_MAX], b[PATH_MAX];
	size_t len = 2 * MIB;
	uint8_t *buf = malloc(len);
	struct kvfs_mnt m;
	char l2dir[32];
	long long sa, sb;
	double ratio;

	(void)state;
	assert_non_null(buf);
	mount_l2(&m, l2dir, ",compress=zstd:3");
	/* random bytes: stored raw, the ratio stays 1 */
	chunk(&m, a, 1);
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = kvfs_test_mix64(i + 12345);

		memcpy(buf + i, &v, 8);
	}
	write_chunk(a, buf, len);
	wait_l2_writes(&m, 1);
	sa = stored_bytes(a);
	ratio = stat_f(&m, "compression_ratio");
	fprintf(stderr, "# random: stored %lld of %zu, ratio %.3f\n", sa, len,
		ratio);
	assert_int_equal(sa, (long long)len);
	assert_true(ratio > 0.99 && ratio < 1.01);
	/* compressible (small integers): compressed */
	chunk(&m, b, 2);
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(kvfs_test_mix64(i) % 5);
	write_chunk(b, buf, len);
	wait_l2_writes(&m, 2);
	sb = stored_bytes(b);
	ratio = stat_f(&m, "compression_ratio");
	fprintf(stderr, "# compressible: stored %lld of %zu, ratio %.3f\n", sb,
		len, ratio);
	assert_true(sb > 0 && sb < (long long)len / 2);
	assert_true(ratio > 1.3);
	free(buf);
	assert_int_equal(kvfs_test_umount(&m), 0);
	drop_l2dir(l2dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bytes_out_counts_reads),
		cmocka_unit_test(test_incompressible_stored_raw),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
