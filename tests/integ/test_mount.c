/*
 * test_mount.c - kvfs-mount's life: options (good, unknown, malformed), a
 * missing mount point, daemon mode returning only once mounted, unmount by
 * fusermount3 and by SIGTERM, two mounts side by side, the mount(8)
 * argument form, and the .kvfs control files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/common/kvfs_test.h"

/* Runs kvfs-mount with args (the mount point is a fresh directory named
 * @DIR@, or @MISSING@ for one that does not exist) expecting failure. */
static void expect_refused(const char *const *extra, const char *want_msg)
{
	char dir[] = "/tmp/kvfs-bad.XXXXXX", missing[PATH_MAX], out[4096];
	const char *argv[32];
	int n = 0, rc;

	assert_non_null(mkdtemp(dir));
	snprintf(missing, sizeof(missing), "%s/does-not-exist", dir);
	argv[n++] = kvfs_test_bin();
	for (int i = 0; extra[i]; i++)
		argv[n++] = !strcmp(extra[i], "@DIR@") ? dir :
			    !strcmp(extra[i], "@MISSING@") ? missing : extra[i];
	argv[n] = NULL;
	rc = kvfs_test_run(argv, out, sizeof(out));
	if (rc == 0 || !strstr(out, want_msg))
		fprintf(stderr, "rc %d, output: %s\n", rc, out);
	assert_int_not_equal(rc, 0);
	assert_true(rc > 0 && rc < 128); /* an exit, not a crash */
	assert_non_null(strstr(out, want_msg));
	assert_false(kvfs_test_is_mounted(dir));
	assert_int_equal(rmdir(dir), 0); /* empty, not mounted */
}

static void test_bad_options(void **state)
{
	expect_refused((const char *[]){ "-f", "-o", "bogus=1", "@DIR@", NULL },
		       "unknown option");
	expect_refused((const char *[]){ "-f", "-o", "l1_size=12Q", "@DIR@",
					 NULL }, "l1_size");
	expect_refused((const char *[]){ "-f", "-o", "l1_size=", "@DIR@",
					 NULL }, "l1_size");
	expect_refused((const char *[]){ "-f", "-o", "policy=random", "@DIR@",
					 NULL }, "policy");
	expect_refused((const char *[]){ "-f", "-o", "cache=maybe", "@DIR@",
					 NULL }, "cache");
	expect_refused((const char *[]){ "-f", "-o",
					 "l1_size=16M,max_chunk=32M", "@DIR@",
					 NULL }, "max_chunk");
	expect_refused((const char *[]){ "-f", "-o", "shuffle=3", "@DIR@",
					 NULL }, "shuffle");
	expect_refused((const char *[]){ "-f", "-o", "compress=lz4", "@DIR@",
					 NULL }, "compress");
	expect_refused((const char *[]){ "-f", "-o", "l1=tpu", "@DIR@",
					 NULL }, "l1");
	expect_refused((const char *[]){ "-f", "-o", "lease_ms=-5", "@DIR@",
					 NULL }, "lease_ms");
	expect_refused((const char *[]){ "-f", "-o", "readahead=-1", "@DIR@",
					 NULL }, "bad readahead");
	expect_refused((const char *[]){ "-f", "-o", "readahead=many", "@DIR@",
					 NULL }, "bad readahead");
	expect_refused((const char *[]){ "-f", "-o", "readahead=1025", "@DIR@",
					 NULL }, "bad readahead");
	expect_refused((const char *[]){ "-f", "--frobnicate", "@DIR@", NULL },
		       "unknown option");
	/* an arena larger than the machine's memory is refused up front
	 * (pre-faulting it would call the OOM killer), in both modes */
	expect_refused((const char *[]){ "-f", "-o", "l1_size=1000000T",
					 "@DIR@", NULL }, "memory available");
	expect_refused((const char *[]){ "-o", "l1_size=1000000T", "@DIR@",
					 NULL }, "memory available");
	/* daemon mode reports option errors the same way */
	expect_refused((const char *[]){ "-o", "bogus", "@DIR@", NULL },
		       "unknown option");
}

/* Issue 28: an option given twice is refused (which one was meant is a
 * guess); fsname= has a clear limit. */
static void test_option_limits(void **state)
{
	char name[5000 + 8], opts[600];
	struct kvfs_mnt m;

	expect_refused((const char *[]){ "-f", "-o", "l1_size=16M,l1_size=32M",
					 "@DIR@", NULL }, "'l1_size' given twice");
	expect_refused((const char *[]){ "-f", "-o", "l1_size=16M", "-o",
					 "policy=lru,l1_size=32M", "@DIR@", NULL },
		       "'l1_size' given twice");
	expect_refused((const char *[]){ "-f", "-ol3_prefix=a,l3_prefix=b",
					 "@DIR@", NULL }, "'l3_prefix' given twice");
	memcpy(name, "fsname=", 7);
	memset(name + 7, 'n', 5000);
	name[7 + 5000] = '\0';
	expect_refused((const char *[]){ "-f", "-o", name, "@DIR@", NULL },
		       "fsname is 5000 bytes; at most 255");
	/* 255 bytes: mounted, and shown */
	name[7 + 255] = '\0';
	snprintf(opts, sizeof(opts), "l1_size=16M,%s", name);
	assert_int_equal(kvfs_test_mount(&m, opts), 0);
	{
		size_t len;
		char *mounts = kvfs_test_slurp("/proc/mounts", &len);

		assert_non_null(mounts);
		assert_non_null(strstr(mounts, name + 7));
		free(mounts);
	}
	assert_int_equal(kvfs_test_umount(&m), 0);
}

static void test_missing_mountpoint(void **state)
{
	expect_refused((const char *[]){ "-f", "-o", "l1_size=16M",
					 "@MISSING@", NULL }, "mount point");
	expect_refused((const char *[]){ "-o", "l1_size=16M", "@MISSING@",
					 NULL }, "mount point");
	expect_refused((const char *[]){ "-f", NULL }, "no mount point");
}

static void test_mount_umount(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX];
	struct statvfs sv;
	struct stat st;

	assert_int_equal(kvfs_test_mount(&m, "l1_size=32M,rw,nosuid,nodev,"
					 "noauto,_netdev,defaults,user,nofail,"
					 "x-systemd.automount,comment=kvfs"),
			 0);
	assert_true(kvfs_test_is_mounted(m.dir));
	assert_int_equal(statvfs(m.dir, &sv), 0);
	assert_int_equal((uint64_t)sv.f_blocks * sv.f_frsize, 32ULL << 20);
	assert_int_equal(sv.f_bfree, sv.f_blocks);
	assert_int_equal(stat(kvfs_test_path(&m, p, ".kvfs"), &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(kvfs_test_umount(&m), 0);
}

static void test_control_files(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX], key[33];
	char *s;
	DIR *d;
	struct dirent *de;
	int seen = 0;

	assert_int_equal(kvfs_test_mount(&m, "l1_size=32M,policy=lru,seed=7"),
			 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "model.bf16"), 0755), 0);
	kvfs_test_key_name(1, key);
	assert_int_equal(kvfs_test_write_file(kvfs_test_path(&m, p,
			 "model.bf16/%s", key), 100000, 1, 0), 0);
	assert_int_equal(kvfs_test_read_check(p, 100000, 1), 0);
	{
		/* inodes: one chunk used, plenty free (df -i) */
		struct statvfs sv;

		assert_int_equal(statvfs(m.dir, &sv), 0);
		assert_int_equal(sv.f_files - sv.f_ffree, 1);
		assert_true(sv.f_ffree > 1000000);
	}

	/* stat renders it: its size is what the same process then reads
	 * (test_metrics.c: cp -a, tar, rsync) */
	{
		struct stat st;
		size_t len;

		assert_int_equal(stat(kvfs_test_path(&m, p, ".kvfs/stats"),
				      &st), 0);
		s = kvfs_test_slurp(p, &len);
		assert_non_null(s);
		assert_int_equal(st.st_size, len);
		free(s);
	}
	s = kvfs_test_slurp(kvfs_test_path(&m, p, ".kvfs/stats"), NULL);
	assert_non_null(s);
	assert_non_null(strstr(s, "\"capacity\": 33554432"));
	assert_non_null(strstr(s, "\"compression_ratio\": 1}"));
	assert_non_null(strstr(s, "\"publishes\": 1"));
	assert_non_null(strstr(s, "\"hits\": 1"));
	assert_non_null(strstr(s, "\"model.bf16\": {\"chunks\": 1, "
			       "\"bytes\": 100000"));
	free(s);
	s = kvfs_test_slurp(kvfs_test_path(&m, p, ".kvfs/config"), NULL);
	assert_non_null(s);
	assert_non_null(strstr(s, "policy=lru\n"));
	assert_non_null(strstr(s, "seed=7\n"));
	assert_non_null(strstr(s, "l1_size=33554432\n"));
	free(s);
	s = kvfs_test_slurp(kvfs_test_path(&m, p, ".kvfs/version"), NULL);
	assert_non_null(s);
	assert_non_null(strstr(s, "kvfs "));
	free(s);
	s = kvfs_test_slurp(kvfs_test_path(&m, p, ".kvfs/metrics"), NULL);
	assert_non_null(s);
	assert_non_null(strstr(s, "kvfs_publishes_total 1\n"));
	free(s);

	/* read-only */
	assert_int_equal(open(kvfs_test_path(&m, p, ".kvfs/stats"), O_WRONLY),
			 -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, ".kvfs/x"), 0755), -1);
	assert_int_equal(rmdir(kvfs_test_path(&m, p, ".kvfs")), -1);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, ".kvfs"), 0755), -1);
	assert_int_equal(errno, EEXIST);

	/* kvfsctl stats, for people and as JSON */
	{
		const char *ctl = getenv("KVFS_CTL_BIN");
		char out[16384];
		const char *a1[] = { NULL, "stats", m.dir, NULL };
		const char *a2[] = { NULL, "stats", "--json", m.dir, NULL };
		const char *a3[] = { NULL, "stats", "/nonexistent-kvfs", NULL };

		if (!ctl || !*ctl)
			ctl = "build/asan/kvfsctl";
		a1[0] = a2[0] = a3[0] = ctl;
		if (access(ctl, X_OK) == 0) {
			assert_int_equal(kvfs_test_run(a1, out, sizeof(out)), 0);
			assert_non_null(strstr(out, "publishes:"));
			assert_non_null(strstr(out, "model.bf16:"));
			assert_non_null(strstr(out, "32.0 MiB"));
			assert_int_equal(kvfs_test_run(a2, out, sizeof(out)), 0);
			assert_non_null(strstr(out, "\"publishes\": 1"));
			assert_int_not_equal(kvfs_test_run(a3, out,
							   sizeof(out)), 0);
		} else {
			fprintf(stderr, "note: %s not built; kvfsctl stats "
				"not checked\n", ctl);
		}
	}

	d = opendir(kvfs_test_path(&m, p, ".kvfs"));
	assert_non_null(d);
	while ((de = readdir(d)))
		seen += !strcmp(de->d_name, "stats") ||
			!strcmp(de->d_name, "config");
	closedir(d);
	assert_int_equal(seen, 2);
	assert_int_equal(kvfs_test_umount(&m), 0);
}

/* Finds the daemon serving dir by its command line. */
static pid_t find_daemon(const char *dir)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;

	while (d && (de = readdir(d))) {
		char path[300], cmd[4096];
		int fd;
		ssize_t n;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, cmd, sizeof(cmd) - 1);
		close(fd);
		if (n <= 0)
			continue;
		for (ssize_t i = 0; i < n; i++)
			if (!cmd[i])
				cmd[i] = ' ';
		cmd[n] = '\0';
		if (strstr(cmd, "kvfs") && strstr(cmd, dir))
			found = atoi(de->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

static int wait_gone(pid_t pid)
{
	for (int i = 0; i < KVFS_TEST_DEADLINE * 100; i++) {
		if (kill(pid, 0) < 0 && errno == ESRCH)
			return 0;
		usleep(10000);
	}
	return -1;
}

static void test_daemon_mode(void **state)
{
	/* max_read: a libfuse option that FUSE INIT must agree with */
	static const char *const opts[] = { "l1_size=16M",
					    "l1_size=16M,max_read=131072" };

	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		char dir[] = "/tmp/kvfs-daemon.XXXXXX", out[4096], p[PATH_MAX];
		char key[33];
		const char *argv[] = { kvfs_test_bin(), "-o", opts[i], dir,
				       NULL };
		const char *um[] = { "fusermount3", "-u", dir, NULL };
		pid_t pid;

		assert_non_null(mkdtemp(dir));
		/* returns only once the mount is usable */
		assert_int_equal(kvfs_test_run(argv, out, sizeof(out)), 0);
		assert_true(kvfs_test_is_mounted(dir));
		pid = find_daemon(dir);
		assert_true(pid > 0);
		snprintf(p, sizeof(p), "%s/ns", dir);
		assert_int_equal(mkdir(p, 0700), 0);
		/* 300000 bytes: several reads of max_read */
		kvfs_test_key_name(3, key);
		snprintf(p, sizeof(p), "%s/ns/%s", dir, key);
		assert_int_equal(kvfs_test_write_file(p, 300000, 9, 0), 0);
		assert_int_equal(kvfs_test_read_check(p, 300000, 9), 0);
		assert_int_equal(kvfs_test_run(um, out, sizeof(out)), 0);
		assert_false(kvfs_test_is_mounted(dir));
		assert_int_equal(wait_gone(pid), 0);
		assert_int_equal(rmdir(dir), 0);
	}
}

static void test_sigterm(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX], key[33];

	assert_int_equal(kvfs_test_mount(&m, "l1_size=16M"), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "ns"), 0755), 0);
	kvfs_test_key_name(5, key);
	assert_int_equal(kvfs_test_write_file(kvfs_test_path(&m, p, "ns/%s",
			 key), 4096, 5, 0), 0);
	assert_int_equal(kill(m.pid, SIGTERM), 0);
	/* exits 0 and leaves nothing mounted */
	assert_int_equal(kvfs_test_wait_exit(&m), 0);
}

/* umount(8) (a plain umount(2) as root) also ends the daemon cleanly */
static void test_plain_umount(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX];

	if (geteuid() != 0) {
		fprintf(stderr, "note: not root: plain umount not checked\n");
		return;
	}
	assert_int_equal(kvfs_test_mount(&m, "l1_size=16M"), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "ns"), 0755), 0);
	assert_int_equal(umount(m.dir), 0);
	assert_int_equal(kvfs_test_wait_exit(&m), 0);
}

static void test_two_mounts(void **state)
{
	struct kvfs_mnt a, b;
	char p[PATH_MAX], q[PATH_MAX], key[33];
	struct stat st;

	assert_int_equal(kvfs_test_mount(&a, "l1_size=16M"), 0);
	assert_int_equal(kvfs_test_mount(&b, "l1_size=24M"), 0);
	kvfs_test_key_name(9, key);
	assert_int_equal(mkdir(kvfs_test_path(&a, p, "ns"), 0755), 0);
	assert_int_equal(mkdir(kvfs_test_path(&b, q, "ns"), 0755), 0);
	assert_int_equal(kvfs_test_write_file(kvfs_test_path(&a, p, "ns/%s",
			 key), 50000, 1, 0), 0);
	assert_int_equal(kvfs_test_write_file(kvfs_test_path(&b, q, "ns/%s",
			 key), 70000, 2, 0), 0);
	assert_int_equal(kvfs_test_read_check(p, 50000, 1), 0);
	assert_int_equal(kvfs_test_read_check(q, 70000, 2), 0);
	assert_int_equal(kvfs_test_umount(&a), 0);
	/* b is unaffected by a's unmount */
	assert_int_equal(stat(q, &st), 0);
	assert_int_equal(kvfs_test_read_check(q, 70000, 2), 0);
	assert_int_equal(kvfs_test_umount(&b), 0);
}

/* mount(8) calls /sbin/mount.kvfs SOURCE DIR -o OPTS and expects it to
 * return once mounted (fstab: rw,nosuid,... noise included). */
static void test_mount_helper_form(void **state)
{
	char tdir[] = "/tmp/kvfs-helper.XXXXXX", link[PATH_MAX];
	char dir[] = "/tmp/kvfs-helper-mnt.XXXXXX";
	char bin[PATH_MAX], out[4096], line[8192];
	const char *um[] = { "fusermount3", "-u", dir, NULL };
	FILE *f;
	pid_t pid;
	int found = 0;

	assert_non_null(mkdtemp(tdir));
	assert_non_null(mkdtemp(dir));
	assert_non_null(realpath(kvfs_test_bin(), bin));
	snprintf(link, sizeof(link), "%s/mount.kvfs", tdir);
	assert_int_equal(symlink(bin, link), 0);
	{
		const char *argv[] = { link, "kvfs", "/nonexistent-kvfs",
				       "-o", "rw", NULL };

		assert_int_not_equal(kvfs_test_run(argv, out, sizeof(out)), 0);
		assert_non_null(strstr(out, "mount point"));
	}
	{
		const char *argv[] = { link, "mykvfs", dir, "-o",
				       "rw,nosuid,nodev,noauto,_netdev,"
				       "l1_size=16M", NULL };

		assert_int_equal(kvfs_test_run(argv, out, sizeof(out)), 0);
	}
	f = fopen("/proc/self/mounts", "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, dir) && !strncmp(line, "mykvfs ", 7) &&
		    strstr(line, " fuse.kvfs "))
			found = 1;
	fclose(f);
	pid = find_daemon(dir);
	assert_true(pid > 0);
	assert_int_equal(kvfs_test_run(um, out, sizeof(out)), 0);
	assert_true(found);
	assert_int_equal(wait_gone(pid), 0);
	assert_false(kvfs_test_is_mounted(dir));
	unlink(link);
	rmdir(tdir);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_option_limits),
		cmocka_unit_test(test_missing_mountpoint),
		cmocka_unit_test(test_mount_umount),
		cmocka_unit_test(test_control_files),
		cmocka_unit_test(test_daemon_mode),
		cmocka_unit_test(test_sigterm),
		cmocka_unit_test(test_plain_umount),
		cmocka_unit_test(test_two_mounts),
		cmocka_unit_test(test_mount_helper_form),
	};

	if (access("/dev/fuse", R_OK | W_OK)) {
		printf("skipped: /dev/fuse is not usable here\n");
		return 77;
	}
	if (access(kvfs_test_bin(), X_OK)) {
		printf("skipped: %s not built\n", kvfs_test_bin());
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
