/*
 * test_operator.c - kvfs-mount as an operator meets it: a second mount on
 * a kvfs mount point is refused (unless -o overmount), the default l2_size
 * works on a small filesystem and a missing l2_dir is called missing, and
 * a flood of bad requests is a few log lines and a "suppressed N similar"
 * count, not one line each.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"

/* Mounts with the daemon's stderr (its log in the foreground) going to a
 * new temporary file, whose path is left in log. */
static int mount_logged(struct kvfs_mnt *m, const char *opts, char *log)
{
	int fd, saved, rc;

	strcpy(log, "/tmp/kvfs-test-log.XXXXXX");
	fd = mkstemp(log);
	if (fd < 0)
		return -1;
	fflush(stderr);
	saved = dup(2);
	dup2(fd, 2);
	rc = kvfs_test_mount(m, opts);
	dup2(saved, 2);
	close(saved);
	close(fd);
	return rc;
}

static char *slurp(const char *path)
{
	static char buf[1 << 20];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	return buf;
}

/* ---------------------------------------------------------- defect 11 */

static void test_second_mount_refused(void **state)
{
	struct kvfs_mnt m;
	char out[4096], p[PATH_MAX];
	struct stat st;
	int fd;

	(void)state;
	assert_int_equal(kvfs_test_mount(&m, "l1_size=16M"), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "ns"), 0755), 0);
	{
		const char *argv[] = { kvfs_test_bin(), "-o", "l1_size=16M",
				       m.dir, NULL };

		assert_int_equal(kvfs_test_run(argv, out, sizeof(out)), 1);
		assert_non_null(strstr(out, "is a kvfs mount already"));
		assert_non_null(strstr(out, "overmount"));
	}
	/* the first mount is still what the directory shows */
	assert_int_equal(stat(kvfs_test_path(&m, p, "ns"), &st), 0);
	/* explicit consent: mounted over it, then unmounted again */
	{
		const char *argv[] = { kvfs_test_bin(), "-o",
				       "l1_size=16M,overmount", m.dir, NULL };
		const char *um[] = { "fusermount3", "-u", m.dir, NULL };

		assert_int_equal(kvfs_test_run(argv, out, sizeof(out)), 0);
		assert_int_equal(stat(kvfs_test_path(&m, p, "ns"), &st), -1);
		assert_int_equal(errno, ENOENT); /* the new, empty one */
		assert_int_equal(kvfs_test_run(um, out, sizeof(out)), 0);
	}
	fd = open(kvfs_test_path(&m, p, "ns"), O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(kvfs_test_umount(&m), 0);
}

/* ---------------------------------------------------------- defect 8 */

static char tmpfs_dir[64]; /* unmounted by teardown if an assert failed */

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

static long long stat_l2(const struct kvfs_mnt *m, const char *key)
{
	char p[PATH_MAX], pat[64];
	const char *s = slurp(kvfs_test_path(m, p, KVFS_CTL_STATS));

	s = strstr(s, "\"l2\"");
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	s = s ? strstr(s, pat) : NULL;
	return s ? atoll(s + strlen(pat)) : -1;
}

static void test_default_l2_size(void **state)
{
	char dir[] = "/var/tmp/kvfs-integ-l2def-XXXXXX", opts[PATH_MAX + 64];
	char log[64];
	struct kvfs_mnt m;

	(void)state;
	assert_non_null(mkdtemp(dir));
	/* 300 MiB: half of it is below 256 MiB, 4 chunks of the default
	 * max_chunk (64M) fit */
	if (mount("tmpfs", dir, "tmpfs", 0, "size=300m")) {
		fprintf(stderr, "# skip default l2_size: tmpfs: %s\n",
			strerror(errno));
		rmdir(dir);
		return;
	}
	snprintf(tmpfs_dir, sizeof(tmpfs_dir), "%s", dir);
	snprintf(opts, sizeof(opts), "l1_size=72M,l2_dir=%s", dir);
	assert_int_equal(mount_logged(&m, opts, log), 0);
	assert_true(stat_l2(&m, "capacity") >= 4 * (64ll << 20));
	assert_int_equal(stat_l2(&m, "errors"), 0);
	assert_int_equal(kvfs_test_umount(&m), 0);
	assert_null(strstr(slurp(log), "L2 disabled"));
	unlink(log);
	teardown(NULL);

	/* a missing l2_dir is called missing */
	assert_int_equal(mount_logged(&m, "l1_size=72M,l2_dir=/nonexistent/"
				      "kvfs-l2", log), 0);
	assert_true(stat_l2(&m, "errors") >= 1);
	assert_int_equal(kvfs_test_umount(&m), 0);
	{
		const char *out = slurp(log);

		assert_non_null(strstr(out, "l2_dir /nonexistent/kvfs-l2: No "
				       "such file or directory; L2 disabled"));
		assert_null(strstr(out, "l2_size"));
	}
	unlink(log);
}

/* ---------------------------------------------------------- defect 9 */

static void rm_l2(const char *dir)
{
	const char *argv[] = { "rm", "-rf", dir, NULL };
	char out[256];

	kvfs_test_run(argv, out, sizeof(out));
}

/* Mounts on l2dir with the log captured, returns the log's text after
 * the unmount (static). */
static const char *remount_log(const char *l2dir)
{
	char opts[PATH_MAX + 128], log[64];
	struct kvfs_mnt m;
	const char *out;

	snprintf(opts, sizeof(opts), "l1_size=16M,max_chunk=1M,l2_dir=%s,"
		 "l2_size=64M,ingest=all", l2dir);
	assert_int_equal(mount_logged(&m, opts, log), 0);
	assert_int_equal(kvfs_test_umount(&m), 0);
	out = slurp(log);
	unlink(log);
	return out;
}

static void test_l2_losses_logged(void **state)
{
	char l2dir[] = "/var/tmp/kvfs-integ-l2log-XXXXXX", p[PATH_MAX];
	char opts[PATH_MAX + 128], k[33], seg[PATH_MAX];
	struct kvfs_mnt m;
	const char *out;
	int fd, flipped = 0;

	(void)state;
	assert_non_null(mkdtemp(l2dir));
	snprintf(opts, sizeof(opts), "l1_size=16M,max_chunk=1M,l2_dir=%s,"
		 "l2_size=64M,ingest=all", l2dir);
	assert_int_equal(kvfs_test_mount(&m, opts), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "ns"), 0755), 0);
	for (uint64_t i = 0; i < 6; i++) {
		kvfs_test_key_name(i, k);
		assert_int_equal(kvfs_test_write_file(kvfs_test_path(&m, p,
					"ns/%s", k), 100000, i, 0), 0);
	}
	assert_int_equal(kvfs_test_umount(&m), 0); /* L2 writes flushed */

	/* three records damaged: one summary line, not three */
	snprintf(seg, sizeof(seg), "%s/seg-0000000000000001.kvl2", l2dir);
	fd = open(seg, O_RDWR);
	assert_true(fd >= 0);
	for (off_t off = 0; flipped < 3; off += 4096) {
		uint32_t magic = 0;
		unsigned char b;

		if (pread(fd, &magic, 4, off) != 4)
			break;
		if (magic != 0x324c564bu)
			continue;
		assert_int_equal(pread(fd, &b, 1, off + 1000), 1);
		b ^= 0x40;
		assert_int_equal(pwrite(fd, &b, 1, off + 1000), 1);
		flipped++;
	}
	close(fd);
	assert_int_equal(flipped, 3);
	/* the scan's summary: without the unmount's index checkpoint (with
	 * it, a damaged record is found at its first read instead) */
	snprintf(p, sizeof(p), "%s/l2.ckpt", l2dir);
	assert_int_equal(unlink(p), 0);
	out = remount_log(l2dir);
	assert_int_equal(kvfs_test_count(out, "corrupt"), 1);
	assert_non_null(strstr(out, "recovery skipped 3 corrupt and 0 torn "
			       "record(s)"));

	/* l2.id changed: nothing verifies, and the log says why */
	snprintf(p, sizeof(p), "%s/l2.id", l2dir);
	fd = open(p, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789abcdef\n", 17), 17);
	close(fd);
	out = remount_log(l2dir);
	assert_int_equal(kvfs_test_count(out, "verifies against l2.id"), 1);

	/* l2.id deleted: a new one is written, and the log says what that
	 * cost */
	assert_int_equal(unlink(p), 0);
	out = remount_log(l2dir);
	assert_int_equal(kvfs_test_count(out, "l2.id was missing"), 1);
	rm_l2(l2dir);
}

/* ---------------------------------------------------------- defect 10 */

static void test_log_flood(void **state)
{
	struct kvfs_mnt m;
	struct kvfs_lookup *lk = calloc(1, sizeof(*lk));
	char p[PATH_MAX], log[64];
	const char *out;
	int fd;

	(void)state;
	assert_non_null(lk);
	assert_int_equal(mount_logged(&m, "l1_size=16M", log), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "ns"), 0755), 0);
	fd = open(p, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	/* 2,000 bad lookups (no keys): each one EINVAL */
	lk->version = KVFS_ABI_VERSION;
	lk->size = sizeof(*lk);
	for (int i = 0; i < 2000; i++) {
		assert_int_equal(ioctl(fd, KVFS_IOC_LOOKUP, lk), -1);
		assert_int_equal(errno, EINVAL);
	}
	close(fd);
	assert_int_equal(kvfs_test_umount(&m), 0);
	out = slurp(log);
	/* the first five, then one summary (at exit) of the rest */
	assert_int_equal(kvfs_test_count(out, "kvfs: ioctl LOOKUP from pid"),
			 5 + 1); /* + the summary's "last:" */
	assert_non_null(strstr(out, "suppressed 1995 similar messages"));
	unlink(log);
	free(lk);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_second_mount_refused),
		cmocka_unit_test_teardown(test_default_l2_size, teardown),
		cmocka_unit_test(test_log_flood),
		cmocka_unit_test(test_l2_losses_logged),
	};

	if (access("/dev/fuse", R_OK | W_OK)) {
		fprintf(stderr, "skip: no /dev/fuse\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
