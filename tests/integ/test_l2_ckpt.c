/*
 * test_l2_ckpt.c - the L2 index checkpoint on a real mount: a clean
 * unmount writes it and the next mount loads it (stats: l2_recovery from
 * "checkpoint", nothing scanned) and serves every chunk; chunks unlinked
 * after it stay gone when the daemon is killed with SIGKILL right after
 * the unlinks (the unlink log), while the rest comes back (checkpoint +
 * tail scan); a truncated checkpoint makes the mount scan (stats: "scan")
 * with the same chunks; the periodic checkpoint (l2_checkpoint_s=1) is
 * written while mounted; a bad l2_checkpoint_s is refused.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"
#include "tier/record/record.h"

#define LEN (256 * 1024)

static char l2dir[PATH_MAX];

static int setup(void **state)
{
	(void)state;
	snprintf(l2dir, sizeof(l2dir), "/var/tmp/kvfs-integ-ckpt-XXXXXX");
	return mkdtemp(l2dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	kvfs_test_rm_files(l2dir);
	rmdir(l2dir);
	return 0;
}

static int do_mount(struct kvfs_mnt *m, const char *extra)
{
	char opts[PATH_MAX + 512];

	/* L1 holds 8 of the 40 chunks: the rest are served from L2 */
	snprintf(opts, sizeof(opts), "l1_size=2M,max_chunk=1M,l2_dir=%s,"
		 "l2_size=128M,ingest=all%s%s", l2dir, extra ? "," : "",
		 extra ? extra : "");
	return kvfs_test_mount(m, opts);
}

static char *chunk(const struct kvfs_mnt *m, char *p, uint64_t n)
{
	char name[33];

	kvfs_test_key_name(n, name);
	return kvfs_test_path(m, p, "ns/%s", name);
}

static void put_all(struct kvfs_mnt *m, uint64_t from, uint64_t to)
{
	char p[PATH_MAX];

	for (uint64_t i = from; i < to; i++)
		assert_int_equal(kvfs_test_write_file(chunk(m, p, i), LEN, i, 0),
				 0);
}

/* Chunk i reads back with its bytes, or (gone) is not listed. */
static void expect(struct kvfs_mnt *m, uint64_t i, bool gone)
{
	char p[PATH_MAX];
	struct stat st;

	if (gone) {
		assert_int_equal(stat(chunk(m, p, i), &st), -1);
		assert_int_equal(errno, ENOENT);
	} else {
		assert_int_equal(kvfs_test_read_check(chunk(m, p, i), LEN, i), 0);
	}
}

static void wait_writes(struct kvfs_mnt *m, long long n)
{
	for (int tries = 0; kvfs_test_stat(m, "l2", "writes") < n; tries++) {
		struct timespec ts = { 0, 10000000L };

		assert_true(tries < 3000);
		nanosleep(&ts, NULL);
	}
}

static void test_clean_then_kill_after_unlinks(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX];

	(void)state;
	assert_int_equal(do_mount(&m, NULL), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "ns"), 0755), 0);
	put_all(&m, 0, 40);
	wait_writes(&m, 40);
	assert_int_equal(kvfs_test_umount(&m), 0);

	/* clean unmount: the checkpoint, nothing scanned */
	assert_int_equal(do_mount(&m, NULL), 0);
	assert_int_equal(kvfs_test_stat(&m, "l2_recovery", "ckpt_records"), 40);
	assert_int_equal(kvfs_test_stat(&m, "l2_recovery", "scan_records"), 0);
	assert_int_equal(kvfs_test_stat(&m, "l2_recovery", "scan_bytes"), 0);
	for (uint64_t i = 0; i < 40; i++)
		expect(&m, i, false);
	/* after the checkpoint: 10 new chunks, 10 unlinked, then SIGKILL */
	put_all(&m, 40, 50);
	wait_writes(&m, 10);
	for (uint64_t i = 0; i < 20; i += 2)
		assert_int_equal(unlink(chunk(&m, p, i)), 0);
	kill(m.pid, SIGKILL);
	kvfs_test_umount(&m); /* reaps the killed daemon, unmounts */

	assert_int_equal(do_mount(&m, NULL), 0);
	assert_int_equal(kvfs_test_stat(&m, "l2_recovery", "ckpt_records"), 30);
	assert_int_equal(kvfs_test_stat(&m, "l2_recovery", "scan_records"), 10);
	for (uint64_t i = 0; i < 50; i++)
		expect(&m, i, i < 20 && i % 2 == 0);
	assert_int_equal(kvfs_test_umount(&m), 0);
	kvfs_test_rm_files(l2dir);
}

static void test_truncated_checkpoint_scans(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX + 32];
	struct stat st;

	(void)state;
	assert_int_equal(do_mount(&m, NULL), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "ns"), 0755), 0);
	put_all(&m, 0, 20);
	wait_writes(&m, 20);
	assert_int_equal(kvfs_test_umount(&m), 0);
	snprintf(p, sizeof(p), "%s/%s", l2dir, KVCKPT_FILE);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(truncate(p, st.st_size / 2), 0);

	assert_int_equal(do_mount(&m, NULL), 0);
	assert_int_equal(kvfs_test_stat(&m, "l2_recovery", "ckpt_records"), 0);
	assert_int_equal(kvfs_test_stat(&m, "l2_recovery", "scan_records"), 20);
	assert_true(kvfs_test_stat(&m, "l2_recovery", "scan_bytes") >=
		    20 * LEN);
	for (uint64_t i = 0; i < 20; i++)
		expect(&m, i, false);
	assert_int_equal(kvfs_test_umount(&m), 0);
	kvfs_test_rm_files(l2dir);
}

static void test_periodic_checkpoint(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX + 32];
	struct stat st;

	(void)state;
	assert_int_equal(do_mount(&m, "l2_checkpoint_s=1"), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "ns"), 0755), 0);
	put_all(&m, 0, 12);
	wait_writes(&m, 12);
	for (int tries = 0;
	     kvfs_test_stat(&m, "l2_recovery", "checkpoints") < 1; tries++) {
		struct timespec ts = { 0, 50000000L };

		assert_true(tries < 200);
		nanosleep(&ts, NULL);
	}
	snprintf(p, sizeof(p), "%s/%s", l2dir, KVCKPT_FILE);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(kvfs_test_stat(&m, "l2_recovery", "checkpoint_errors"),
			 0);
	kill(m.pid, SIGKILL);
	kvfs_test_umount(&m);
	assert_int_equal(do_mount(&m, NULL), 0);
	assert_true(kvfs_test_stat(&m, "l2_recovery", "ckpt_records") >= 1);
	for (uint64_t i = 0; i < 12; i++)
		expect(&m, i, false);
	assert_int_equal(kvfs_test_umount(&m), 0);
	kvfs_test_rm_files(l2dir);
}

static void test_bad_option(void **state)
{
	struct kvfs_mnt m;

	(void)state;
	assert_int_equal(do_mount(&m, "l2_checkpoint_s=-1"), -1);
	assert_int_equal(do_mount(&m, "l2_checkpoint_s=x"), -1);
	assert_int_equal(do_mount(&m, "l2_checkpoint_s=86401"), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean_then_kill_after_unlinks),
		cmocka_unit_test(test_truncated_checkpoint_scans),
		cmocka_unit_test(test_periodic_checkpoint),
		cmocka_unit_test(test_bad_option),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
