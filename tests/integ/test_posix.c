/*
 * test_posix.c - what POSIX tools see (tar, rsync, touch, chmod, fio): a
 * published chunk's mtime and ctime never move (atime honours noatime);
 * chmod, chown and utimensat on a temporary are applied (the mode governs
 * later opens) and its times are real; an unlinked open temporary has no
 * links; unimplemented rename flags are refused; an empty create + close
 * publishes nothing (fio's default jobs work); idle temporaries reserve no
 * L1 space.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"

static struct kvfs_mnt mnt;

static int setup(void **state)
{
	(void)state;
	return kvfs_test_mount(&mnt, "l1_size=64M,max_chunk=16M");
}

static int teardown(void **state)
{
	(void)state;
	return kvfs_test_umount(&mnt) == 0 ? 0 : -1;
}

static void mkns(const char *ns, mode_t mode)
{
	char p[PATH_MAX];

	assert_int_equal(mkdir(kvfs_test_path(&mnt, p, "%s", ns), mode), 0);
	assert_int_equal(chmod(p, mode), 0); /* past the umask */
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static bool ts_eq(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* ------------------------------------------- 1: published chunk times */

static void read_all(const char *p)
{
	char buf[65536];
	int fd = open(p, O_RDONLY);

	assert_true(fd >= 0);
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
}

static void test_published_times(void **state)
{
	char p[PATH_MAX], k[33], cmd[PATH_MAX + 64], out[4096];
	struct stat a, b, c;

	(void)state;
	mkns("ptimes", 0755);
	kvfs_test_key_name(7, k);
	kvfs_test_path(&mnt, p, "ptimes/%s", k);
	assert_int_equal(kvfs_test_write_file(p, 100000, 7, 0), 0);
	assert_int_equal(stat(p, &a), 0);
	sleep_ms(1100);
	read_all(p); /* cat */
	assert_int_equal(stat(p, &b), 0);
	/* immutable: the publication time, never moved by a read */
	assert_true(ts_eq(&a.st_mtim, &b.st_mtim));
	assert_true(ts_eq(&a.st_ctim, &b.st_ctim));
	assert_true(ts_eq(&a.st_mtim, &a.st_ctim));
	/* relatime: the first read after publication shows, the next
	 * within a day does not */
	assert_true(b.st_atim.tv_sec > a.st_mtim.tv_sec);
	sleep_ms(1100);
	read_all(p);
	assert_int_equal(stat(p, &c), 0);
	assert_true(ts_eq(&b.st_atim, &c.st_atim));
	assert_true(ts_eq(&a.st_mtim, &c.st_mtim));
	/* tar reads every file and compares its times before and after */
	if (access("/usr/bin/tar", X_OK) == 0 || access("/bin/tar", X_OK) == 0) {
		const char *argv[] = { "sh", "-c", cmd, NULL };

		snprintf(cmd, sizeof(cmd), "tar cf - -C '%s' ptimes | wc -c",
			 mnt.dir);
		assert_int_equal(kvfs_test_run(argv, out, sizeof(out)), 0);
		snprintf(cmd, sizeof(cmd), "tar cf - -C '%s' ptimes >/dev/null"
			 " </dev/null; echo rc=$?", mnt.dir);
		assert_int_equal(kvfs_test_run(argv, out, sizeof(out)), 0);
		assert_non_null(strstr(out, "rc=0"));
		assert_null(strstr(out, "changed as we read it"));
	} else {
		fprintf(stderr, "# tar not installed: its check skipped\n");
	}
}

/* noatime: a chunk's atime never moves */
static void test_noatime(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX], k[33];
	struct stat a, b;

	(void)state;
	assert_int_equal(kvfs_test_mount(&m, "l1_size=16M,noatime"), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "ns"), 0755), 0);
	kvfs_test_key_name(8, k);
	kvfs_test_path(&m, p, "ns/%s", k);
	assert_int_equal(kvfs_test_write_file(p, 5000, 8, 0), 0);
	assert_int_equal(stat(p, &a), 0);
	sleep_ms(1100);
	read_all(p);
	assert_int_equal(stat(p, &b), 0);
	assert_true(ts_eq(&a.st_atim, &b.st_atim));
	assert_true(ts_eq(&b.st_atim, &b.st_mtim));
	assert_int_equal(kvfs_test_umount(&m), 0);
}

/* ------------------------------------------------- 2, 3: temporaries */

static void test_temp_attrs(void **state)
{
	char p[PATH_MAX];
	struct timespec t[2] = { { 978307200, 0 }, { 978307200, 0 } };
	struct stat a, b;
	int fd;

	(void)state;
	mkns("tattr", 0777);
	fd = open(kvfs_test_path(&mnt, p, "tattr/.t"), O_CREAT | O_RDWR, 0600);
	assert_true(fd >= 0);
	/* the create mode is honoured */
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(a.st_mode & 07777, 0600);
	/* real times: set at create, not the time of the stat */
	sleep_ms(20);
	assert_int_equal(fstat(fd, &b), 0);
	assert_true(ts_eq(&a.st_mtim, &b.st_mtim));
	assert_true(ts_eq(&a.st_ctim, &b.st_ctim));
	assert_true(ts_eq(&a.st_atim, &b.st_atim));
	/* a write moves mtime and ctime */
	assert_int_equal(write(fd, "abc", 3), 3);
	assert_int_equal(fstat(fd, &b), 0);
	assert_false(ts_eq(&a.st_mtim, &b.st_mtim));
	assert_true(ts_eq(&a.st_atim, &b.st_atim));
	/* chmod, chown, utimensat: applied and shown */
	assert_int_equal(fchmod(fd, 0640), 0);
	assert_int_equal(fchown(fd, 65534, 65534), 0);
	assert_int_equal(futimens(fd, t), 0);
	assert_int_equal(stat(p, &b), 0);
	assert_int_equal(b.st_mode & 07777, 0640);
	assert_int_equal(b.st_uid, 65534);
	assert_int_equal(b.st_gid, 65534);
	assert_int_equal(b.st_mtim.tv_sec, 978307200);
	assert_int_equal(b.st_atim.tv_sec, 978307200);
	/* the mode governs later opens: 0640 owned by 65534, read by
	 * another user fails, by the owner works */
	{
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			int ok;

			if (setresgid(1234, 1234, 1234) ||
			    setresuid(1234, 1234, 1234))
				_exit(2);
			ok = open(p, O_RDONLY) < 0 && errno == EACCES;
			if (setresuid(0, 0, 0) == 0)
				_exit(3); /* could not drop root */
			_exit(ok ? 0 : 1);
		}
		assert_true(pid > 0);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
	assert_int_equal(close(fd), 0);
	assert_int_equal(unlink(p), 0);
}

/* ------------------------------------------------------ 4: st_nlink */

static void test_unlinked_temp_nlink(void **state)
{
	char p[PATH_MAX];
	struct stat st;
	int fd;

	(void)state;
	mkns("nlink", 0755);
	fd = open(kvfs_test_path(&mnt, p, "nlink/.t"), O_CREAT | O_RDWR, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_nlink, 1);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_nlink, 0);
	assert_int_equal(close(fd), 0);
}

/* ---------------------------------------------------- 5: rename flags */

static void test_rename_flags(void **state)
{
	char a[PATH_MAX], b[PATH_MAX];
	int fd;

	(void)state;
	mkns("rflags", 0755);
	fd = open(kvfs_test_path(&mnt, a, "rflags/.a"), O_CREAT | O_RDWR, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	close(fd);
	fd = open(kvfs_test_path(&mnt, b, "rflags/.c"), O_CREAT | O_RDWR, 0644);
	assert_true(fd >= 0);
	close(fd);
	/* EXCHANGE needs an existing target (.c) to reach the daemon */
	assert_int_equal(syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b,
				 RENAME_EXCHANGE), -1);
	assert_int_equal(errno, EINVAL);
	kvfs_test_path(&mnt, b, "rflags/.b");
	assert_int_equal(syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b,
				 RENAME_WHITEOUT), -1);
	assert_int_equal(errno, EINVAL);
	/* nothing moved */
	assert_int_equal(access(a, F_OK), 0);
	assert_int_equal(access(b, F_OK), -1);
	/* the flag that is implemented still works */
	assert_int_equal(syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b,
				 RENAME_NOREPLACE), 0);
	assert_int_equal(unlink(b), 0);
	assert_int_equal(unlink(kvfs_test_path(&mnt, b, "rflags/.c")), 0);
}

/* ---------------------------------------------------- 6: empty chunks */

static void test_empty_not_published(void **state)
{
	char p[PATH_MAX], k[33], t[PATH_MAX];
	struct stat st;
	int fd;

	(void)state;
	mkns("empty", 0755);
	kvfs_test_key_name(1, k);
	kvfs_test_path(&mnt, p, "empty/%s", k);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	assert_int_equal(close(fd), 0); /* close succeeds */
	sleep_ms(50);                   /* release is asynchronous */
	assert_int_equal(stat(p, &st), -1);
	assert_int_equal(errno, ENOENT); /* the name stays free */
	/* so the reopen creates it afresh */
	fd = open(p, O_CREAT | O_RDWR, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "data", 4), 4);
	assert_int_equal(close(fd), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, 4);
	/* an empty temporary renamed onto a key: refused, kept */
	fd = open(kvfs_test_path(&mnt, t, "empty/.e"), O_CREAT | O_RDWR, 0644);
	assert_true(fd >= 0);
	kvfs_test_key_name(2, k);
	kvfs_test_path(&mnt, p, "empty/%s", k);
	assert_int_equal(rename(t, p), -1);
	assert_int_equal(errno, ENODATA);
	assert_int_equal(access(t, F_OK), 0);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(close(fd), 0);
	assert_int_equal(unlink(t), 0);
}

/* fio's default sequential write job, then its read job, on a key name. */
static void test_fio(void **state)
{
	char dir[PATH_MAX], k[33], out[8192], fname[PATH_MAX + 64];
	const char *fio = "/usr/bin/fio";

	(void)state;
	if (access(fio, X_OK)) {
		fprintf(stderr, "# skip fio jobs: %s not installed (Debian "
			"package fio)\n", fio);
		skip();
	}
	mkns("fio", 0755);
	kvfs_test_path(&mnt, dir, "fio");
	kvfs_test_key_name(3, k);
	/* a full path: fio ignores --directory when --filename is given */
	snprintf(fname, sizeof(fname), "--filename=%s/%s", dir, k);
	{
		const char *argv[] = { fio, "--name=w", "--rw=write",
				       "--size=4m", "--bs=128k", fname,
				       NULL };
		int rc = kvfs_test_run(argv, out, sizeof(out));

		if (rc)
			fprintf(stderr, "fio: exit %d (%s): %s\n", rc,
				strerror(errno), out);
		assert_int_equal(rc, 0);
	}
	{
		const char *argv[] = { fio, "--name=r", "--rw=read",
				       "--size=4m", "--bs=128k", fname,
				       NULL };
		int rc = kvfs_test_run(argv, out, sizeof(out));

		if (rc)
			fprintf(stderr, "fio: exit %d (%s): %s\n", rc,
				strerror(errno), out);
		assert_int_equal(rc, 0);
	}
	{
		char p[PATH_MAX];
		struct stat st;

		assert_int_equal(stat(kvfs_test_path(&mnt, p, "fio/%s", k),
				      &st), 0);
		assert_int_equal(st.st_size, 4 << 20);
	}
}

/* --------------------------------------------- 7: idle temporaries */

static long long stat_num(const char *key)
{
	char p[PATH_MAX], buf[16384], pat[64];
	int fd = open(kvfs_test_path(&mnt, p, KVFS_CTL_STATS), O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	const char *s;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	s = strstr(buf, pat);
	return s ? atoll(s + strlen(pat)) : -1;
}

static void test_idle_temps_evict_nothing(void **state)
{
	static int fds[1000];
	char p[PATH_MAX], k[33];
	struct rlimit rl = { 4096, 4096 };
	bool present[30];
	long long ev;
	int n = 0;

	(void)state;
	setrlimit(RLIMIT_NOFILE, &rl);
	mkns("idle", 0755);
	mkns("big", 0755);
	/* a namespace whose last chunk had 16M (before, each new writer
	 * there reserved 16M up front), and L1 (64M) mostly full */
	kvfs_test_key_name(99, k);
	assert_int_equal(kvfs_test_write_file(kvfs_test_path(&mnt, p,
				"big/%s", k), 16 << 20, 99, 1 << 20), 0);
	for (int i = 0; i < 30; i++) {
		kvfs_test_key_name(100 + (uint64_t)i, k);
		assert_int_equal(kvfs_test_write_file(
			kvfs_test_path(&mnt, p, "idle/%s", k), 1 << 20,
			100 + (uint64_t)i, 0), 0);
	}
	for (int i = 0; i < 30; i++) {
		kvfs_test_key_name(100 + (uint64_t)i, k);
		present[i] = access(kvfs_test_path(&mnt, p, "idle/%s", k),
				    F_OK) == 0;
		n += present[i];
	}
	assert_true(n >= 25);
	ev = stat_num("evictions");
	for (int i = 0; i < 1000; i++) {
		fds[i] = open(kvfs_test_path(&mnt, p, "big/.t%d", i),
			      O_CREAT | O_RDWR, 0644);
		if (fds[i] < 0)
			fprintf(stderr, "temporary %d: %s\n", i,
				strerror(errno));
		assert_true(fds[i] >= 0);
	}
	/* nothing was evicted for them, everything is still there */
	assert_int_equal(stat_num("evictions"), ev);
	for (int i = 0; i < 30; i++) {
		if (!present[i])
			continue;
		kvfs_test_key_name(100 + (uint64_t)i, k);
		assert_int_equal(kvfs_test_read_check(
			kvfs_test_path(&mnt, p, "idle/%s", k), 1 << 20,
			100 + (uint64_t)i), 0);
	}
	for (int i = 0; i < 1000; i++) {
		close(fds[i]);
		unlink(kvfs_test_path(&mnt, p, "big/.t%d", i));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_published_times),
		cmocka_unit_test(test_noatime),
		cmocka_unit_test(test_temp_attrs),
		cmocka_unit_test(test_unlinked_temp_nlink),
		cmocka_unit_test(test_rename_flags),
		cmocka_unit_test(test_empty_not_published),
		cmocka_unit_test(test_fio),
		cmocka_unit_test(test_idle_temps_evict_nothing),
	};

	if (access("/dev/fuse", R_OK | W_OK)) {
		fprintf(stderr, "skip: no /dev/fuse\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
