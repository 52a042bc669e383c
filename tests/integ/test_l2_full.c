/*
 * test_l2_full.c - L2 on a filesystem that fills up long before l2_size
 * (a 24 MiB tmpfs under l2_size=1G, as the default l2_size's 256 MiB floor
 * on a small disk, or a disk other files fill): the first ENOSPC lowers
 * L2's capacity to what fits (l2.capacity in /.kvfs/stats), reclaim makes
 * room from the oldest segments, and L2 keeps taking the chunks L1
 * evicts: recently evicted ones read back with their bytes, older ones
 * are clean misses (ENOENT), the error count stays small, nothing wrong
 * is ever served.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <dirent.h>

#include <cmocka.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"

#define MIB (1u << 20)
#define TMPFS_MIB 24
#define NCHUNKS 96 /* 4x the tmpfs: the log wraps several times */

static char tmpfs_dir[PATH_MAX]; /* mounted by setup, "" when not */

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int setup(void **state)
{
	char opts[32];

	(void)state;
	snprintf(tmpfs_dir, sizeof(tmpfs_dir), "/var/tmp/kvfs-integ-l2full-XXXXXX");
	if (!mkdtemp(tmpfs_dir)) {
		tmpfs_dir[0] = 0;
		return -1;
	}
	snprintf(opts, sizeof(opts), "size=%dm", TMPFS_MIB);
	if (mount("tmpfs", tmpfs_dir, "tmpfs", 0, opts)) {
		fprintf(stderr, "# cannot mount a tmpfs on %s: %s\n", tmpfs_dir,
			strerror(errno));
		rmdir(tmpfs_dir);
		tmpfs_dir[0] = 0;
	}
	return 0;
}

/* Runs even when the test failed: the tmpfs never outlives the program. */
static int teardown(void **state)
{
	(void)state;
	if (tmpfs_dir[0]) {
		umount2(tmpfs_dir, MNT_DETACH);
		rmdir(tmpfs_dir);
		tmpfs_dir[0] = 0;
	}
	return 0;
}

static char *chunk_path(const struct kvfs_mnt *m, char *buf, uint64_t n)
{
	char name[33];

	kvfs_test_key_name(n, name);
	return kvfs_test_path(m, buf, "ns/%s", name);
}

/* The number after "key": in the "l2" object of /.kvfs/stats, or -1. */
static long long l2_stat(const struct kvfs_mnt *m, const char *key)
{
	return kvfs_test_stat(m, "l2", key);
}

/* "l1", "l2", or "" when the chunk is gone. */
static void tier_of(const struct kvfs_mnt *m, uint64_t n, char out[8])
{
	char p[PATH_MAX];
	ssize_t r;

	r = getxattr(chunk_path(m, p, n), KVFS_XATTR_TIER, out, 7);
	out[r > 0 ? r : 0] = 0;
}

static void test_l2_on_full_disk(void **state)
{
	char opts[PATH_MAX + 128], p[PATH_MAX], where[8];
	long long writes, prev = -1, cap, errors, bytes, reclaims;
	bool in_l2[NCHUNKS] = { false };
	unsigned nl2 = 0, l2_ok = 0, gone = 0, l1 = 0;
	uint64_t newest_l2 = 0;
	struct kvfs_mnt m;

	(void)state;
	if (!tmpfs_dir[0]) {
		fprintf(stderr, "# skip: no tmpfs (needs root)\n");
		skip();
	}
	/* readahead at its default: the chunks are read back in the order
	 * written, which readahead follows; with L1 and the log both full it
	 * pauses (readahead.paused) rather than evict the newest chunks
	 * (only in L1) into the log while it reclaims */
	snprintf(opts, sizeof(opts), "l1_size=8M,max_chunk=1M,compress=none,"
		 "l2_dir=%s,l2_size=1G", tmpfs_dir);
	assert_int_equal(kvfs_test_mount(&m, opts), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "ns"), 0755), 0);
	for (uint64_t i = 0; i < NCHUNKS; i++) {
		assert_int_equal(kvfs_test_write_file(chunk_path(&m, p, i), MIB,
						      i, 0), 0);
		if (i % 8 == 7)
			sleep_ms(20); /* let the demoter keep up under ASan */
	}
	/* demotion is asynchronous: wait until the writes stop (the same
	 * count three times in a row, 200 ms apart; 30 s at most) */
	for (int t = 0, same = 0; t < 150 && same < 2; t++) {
		sleep_ms(200);
		writes = l2_stat(&m, "writes");
		same = writes == prev ? same + 1 : 0;
		prev = writes;
	}

	cap = l2_stat(&m, "capacity");
	errors = l2_stat(&m, "errors");
	bytes = l2_stat(&m, "bytes");
	reclaims = l2_stat(&m, "reclaims");
	writes = l2_stat(&m, "writes");
	for (uint64_t i = 0; i < NCHUNKS; i++) {
		tier_of(&m, i, where);
		if (!strcmp(where, "l2")) {
			in_l2[i] = true;
			nl2++;
			newest_l2 = i;
		} else if (!strcmp(where, "l1")) {
			l1++;
		}
	}
	fprintf(stderr, "# %d MiB tmpfs, l2_size=1G: l2.capacity %lld, bytes "
		"%lld, writes %lld, reclaims %lld, errors %lld; %u chunks in "
		"L2, %u in L1\n", TMPFS_MIB, cap, bytes, writes, reclaims,
		errors, nl2, l1);

	/* the capacity came down to about the tmpfs */
	assert_true(cap > 0);
	assert_true(cap <= (long long)TMPFS_MIB * MIB);
	assert_true(cap >= (long long)TMPFS_MIB * MIB / 2);
	assert_true(bytes <= cap);
	/* L2 kept taking chunks: many more written than fit, few errors */
	assert_true(writes >= NCHUNKS / 2);
	assert_true(reclaims >= 2);
	assert_true(errors >= 0 && errors <= 5);
	/* the most recently evicted chunks are in L2 */
	assert_true(nl2 >= 8);
	assert_true(newest_l2 + l1 + 4 >= NCHUNKS);

	/* every chunk: exact bytes or a clean miss; oldest first, so that
	 * the demotions promotions cause reclaim mostly chunks already read
	 * (a reclaim takes a whole segment, a few chunks beyond them too) */
	for (uint64_t i = 0; i < NCHUNKS; i++) {
		int rc = kvfs_test_read_check(chunk_path(&m, p, i), MIB, i);

		if (rc == -ENOENT) {
			assert_false(i + 4 >= NCHUNKS); /* the newest stay */
			gone++;
			continue;
		}
		assert_int_equal(rc, 0);
		if (in_l2[i])
			l2_ok++;
	}
	fprintf(stderr, "# %u of %u L2 chunks read back exact, %u gone; "
		"readahead %lld promotions, %lld paused\n", l2_ok, nl2, gone,
		kvfs_test_stat(&m, "readahead", "promotions"),
		kvfs_test_stat(&m, "readahead", "paused"));
	assert_true(l2_ok >= nl2 / 2 && l2_ok >= 6);
	assert_true(gone >= NCHUNKS / 2); /* the old ones are gone cleanly */
	assert_int_equal(l2_stat(&m, "corrupt"), 0);
	assert_true(l2_stat(&m, "reads") >= l2_ok);
	/* readahead opened windows along the chunks read in order, and held
	 * them back: L1 and the log were full */
	assert_true(kvfs_test_stat(&m, "readahead", "paused") >= 1);
	assert_int_equal(kvfs_test_umount(&m), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_l2_on_full_disk, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
