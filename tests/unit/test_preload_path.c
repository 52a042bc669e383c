/*
 * test_preload_path.c - how libkvfs_preload.so names a path namespace's
 * file (lib/preload/preload_path.c, pl_path_split): the namespace
 * directory and the path below it, from an absolute or relative path and
 * the kvfs lines of a mountinfo (here a file of this test's, given through
 * the open_real argument): component joins, "." and "..", mount points
 * with escapes, bind mounts of a namespace and of a directory below one,
 * nested mounts, the control directory, paths too long, a mount that
 * appears later.
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
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/preload/preload_i.h"

static char info[PATH_MAX]; /* the mountinfo this test writes */
static char tmp[256];       /* a real directory for relative paths */
static int opens;           /* mountinfo reads */

#define DEV_A makedev(0, 50)
#define DEV_B makedev(0, 51)
#define DEV_C makedev(0, 52)

static int open_info(int dirfd, const char *path, int flags, ...)
{
	(void)dirfd;
	assert_string_equal(path, "/proc/self/mountinfo");
	opens++;
	return open(info, flags);
}

static void write_info(const char *extra)
{
	FILE *f = fopen(info, "w");

	assert_non_null(f);
	fprintf(f,
		"20 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
		/* the whole mount */
		"30 20 0:50 / /mnt/kv rw,nosuid - fuse.kvfs kvfs rw\n"
		/* a bind mount of namespace vllm, and of a directory below */
		"31 20 0:50 /vllm /srv/v rw - fuse.kvfs kvfs rw\n"
		"32 20 0:50 /vllm/a /srv/a rw - fuse.kvfs kvfs rw\n"
		/* nested in the first: a directory bound inside the tree */
		"33 30 0:50 /vllm/a /mnt/kv/vllm/b rw - fuse.kvfs kvfs rw\n"
		/* a mount point with a space and a backslash */
		"34 20 0:51 / /mnt/k\\040v\\134x rw - fuse.kvfs kvfs rw\n"
		/* another FUSE file system on the same kind of device */
		"35 20 0:52 / /mnt/other rw - fuse.sshfs host: rw\n"
		"%s",
		extra);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	snprintf(info, sizeof(info), "/tmp/kvfs-test-mi.%d", (int)getpid());
	snprintf(tmp, sizeof(tmp), "/tmp/kvfs-test-pp.%d", (int)getpid());
	write_info("");
	return 0;
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	unlink(info);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	return system(cmd) == 0 ? 0 : -1;
}

/* split of (dirfd, path): 0 with the mount's device and the two names,
 * or -1 */
static int split(int dirfd, const char *path, dev_t dev, const char *ns,
		 const char *below)
{
	char nsdir[PATH_MAX], rest[PATH_MAX];
	dev_t got = 0;
	int rc = pl_path_split(dirfd, path, open_info, &got, nsdir, rest);

	if (rc == 0) {
		assert_non_null(ns);
		assert_true(got == dev);
		assert_string_equal(nsdir, ns);
		assert_string_equal(rest, below);
	}
	return rc;
}

static void test_whole_mount(void **state)
{
	(void)state;
	assert_int_equal(split(AT_FDCWD, "/mnt/kv/vllm/a/b.bin", DEV_A,
			       "/mnt/kv/vllm", "a/b.bin"), 0);
	/* empty components are dropped */
	assert_int_equal(split(AT_FDCWD, "//mnt//kv/vllm///a/b.bin", DEV_A,
			       "/mnt/kv/vllm", "a/b.bin"), 0);
	assert_int_equal(split(AT_FDCWD, "/mnt/kv/vllm/f", DEV_A,
			       "/mnt/kv/vllm", "f"), 0);
	/* names that look like "." or ".." but are not */
	assert_int_equal(split(AT_FDCWD, "/mnt/kv/vllm/.a/..b/...", DEV_A,
			       "/mnt/kv/vllm", ".a/..b/..."), 0);
}

static void test_not_a_file_of_a_namespace(void **state)
{
	(void)state;
	/* "." and "..": the kernel resolves them, the lexical path cannot */
	assert_int_equal(split(AT_FDCWD, "/mnt/kv/vllm/./a", DEV_A, NULL, NULL),
			 -1);
	assert_int_equal(split(AT_FDCWD, "/mnt/kv/vllm/x/../a", DEV_A, NULL,
			       NULL), -1);
	assert_int_equal(split(AT_FDCWD, "/mnt/kv/vllm/a/..", DEV_A, NULL,
			       NULL), -1);
	/* the mount's root, a namespace itself, a file at the root, the
	 * control directory */
	assert_int_equal(split(AT_FDCWD, "/mnt/kv", DEV_A, NULL, NULL), -1);
	assert_int_equal(split(AT_FDCWD, "/mnt/kv/", DEV_A, NULL, NULL), -1);
	assert_int_equal(split(AT_FDCWD, "/mnt/kv/vllm", DEV_A, NULL, NULL),
			 -1);
	assert_int_equal(split(AT_FDCWD, "/mnt/kv/vllm/", DEV_A, NULL, NULL),
			 -1);
	assert_int_equal(split(AT_FDCWD, "/mnt/kv/.kvfs/stats", DEV_A, NULL,
			       NULL), -1);
	/* not below the mount point (a prefix of a name is not a parent) */
	assert_int_equal(split(AT_FDCWD, "/mnt/kvx/vllm/f", DEV_A, NULL,
			       NULL), -1);
	/* below another file system's mount point (not a kvfs line) */
	assert_int_equal(split(AT_FDCWD, "/mnt/other/vllm/f", DEV_C, NULL,
			       NULL), -1);
	assert_int_equal(split(AT_FDCWD, "/etc/passwd", DEV_C, NULL, NULL),
			 -1);
	assert_int_equal(split(AT_FDCWD, "", DEV_A, NULL, NULL), -1);
}

static void test_bind_mounts(void **state)
{
	(void)state;
	/* the namespace itself bound elsewhere: its mount point is it */
	assert_int_equal(split(AT_FDCWD, "/srv/v/a/b.bin", DEV_A, "/srv/v",
			       "a/b.bin"), 0);
	assert_int_equal(split(AT_FDCWD, "/srv/v", DEV_A, NULL, NULL), -1);
	/* a directory below a namespace: the namespace is out of reach */
	assert_int_equal(split(AT_FDCWD, "/srv/a/b.bin", DEV_A, NULL, NULL),
			 -1);
	/* nested inside the tree: the deepest mount point names it (the
	 * kernel's resolution), not the lexical path of the outer one */
	assert_int_equal(split(AT_FDCWD, "/mnt/kv/vllm/b/f", DEV_A, NULL,
			       NULL), -1);
	assert_int_equal(split(AT_FDCWD, "/mnt/kv/vllm/bb/f", DEV_A,
			       "/mnt/kv/vllm", "bb/f"), 0);
}

static void test_escaped_mount_point(void **state)
{
	(void)state;
	assert_int_equal(split(AT_FDCWD, "/mnt/k v\\x/ns/f", DEV_B,
			       "/mnt/k v\\x/ns", "f"), 0);
	assert_int_equal(split(AT_FDCWD, "/mnt/k\\040v\\134x/ns/f", DEV_B,
			       NULL, NULL), -1);
}

static void test_relative(void **state)
{
	char mnt[512], dir[1024], cwd[PATH_MAX], line[1024];
	int fd;

	(void)state;
	snprintf(mnt, sizeof(mnt), "%s/m", tmp);
	snprintf(line, sizeof(line),
		 "36 20 0:53 / %s rw - fuse.kvfs kvfs rw\n", mnt);
	assert_int_equal(mkdir(tmp, 0700), 0);
	assert_int_equal(mkdir(mnt, 0700), 0);
	snprintf(dir, sizeof(dir), "%s/ns", mnt);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(dir, sizeof(dir), "%s/ns/a", mnt);
	assert_int_equal(mkdir(dir, 0700), 0);
	/* a mount the table has not seen yet: found once a second passed
	 * since the last read of mountinfo */
	write_info(line);
	sleep(1);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(dir), 0);
	snprintf(mnt + strlen(mnt), sizeof(mnt) - strlen(mnt), "/ns");
	assert_int_equal(split(AT_FDCWD, "b/f.bin", makedev(0, 53), mnt,
			       "a/b/f.bin"), 0);
	assert_int_equal(split(AT_FDCWD, "f.bin", makedev(0, 53), mnt,
			       "a/f.bin"), 0);
	assert_int_equal(split(AT_FDCWD, "../f.bin", makedev(0, 53), NULL,
			       NULL), -1);
	/* relative to a directory fd */
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(split(fd, "x/y", makedev(0, 53), mnt, "a/x/y"), 0);
	close(fd);
	/* a fd that is no directory of a path: not split */
	fd = open("/dev/null", O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(split(fd, "x", makedev(0, 53), NULL, NULL), -1);
	close(fd);
}

static void test_rescan_at_most_once_a_second(void **state)
{
	int before;

	(void)state;
	assert_int_equal(split(AT_FDCWD, "/mnt/kv/vllm/f", DEV_A,
			       "/mnt/kv/vllm", "f"), 0);
	before = opens;
	/* below no kvfs mount point: mountinfo is read again at most once
	 * a second, however many opens ask */
	for (int i = 0; i < 100; i++)
		assert_int_equal(split(AT_FDCWD, "/mnt/none/ns/f",
				       makedev(0, 99), NULL, NULL), -1);
	assert_true(opens - before <= 2);
}

static void test_too_long(void **state)
{
	char *p = malloc(PATH_MAX + 64);

	(void)state;
	assert_non_null(p);
	strcpy(p, "/mnt/kv/vllm/");
	memset(p + strlen(p), 'a', PATH_MAX + 40);
	p[PATH_MAX + 50] = '\0';
	assert_int_equal(split(AT_FDCWD, p, DEV_A, NULL, NULL), -1);
	/* components each within NAME_MAX, the whole past PATH_MAX */
	for (size_t i = 20; i < PATH_MAX + 50; i += 100)
		p[i] = '/';
	assert_int_equal(split(AT_FDCWD, p, DEV_A, NULL, NULL), -1);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_mount),
		cmocka_unit_test(test_not_a_file_of_a_namespace),
		cmocka_unit_test(test_bind_mounts),
		cmocka_unit_test(test_escaped_mount_point),
		cmocka_unit_test(test_rescan_at_most_once_a_second),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_relative),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
