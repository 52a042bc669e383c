/*
 * test_exec.c - writers closed by execve() or by another process than
 * their creator's, on a real mount. The exec closes a close-on-exec
 * writer's fd (Python opens every fd so), an implicit close that must
 * neither hang nor publish another process's unfinished chunk; a forked
 * child that writes the chunk and is killed half way must not have it
 * published by the last close. The FLUSH of such a close used to read
 * /proc/PID/stat of the exec'ing task, which waits for the exec to end:
 * execve and a daemon worker stuck for good, the process beyond SIGKILL.
 * Each case fails (and aborts the mount) after 20 s instead of hanging.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/common/kvfs_test.h"

/* paths are built from a short mount point: truncation cannot happen */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static struct kvfs_mnt mnt;
static uint64_t next_key = 1;

static int setup(void **state)
{
	return kvfs_test_mount(&mnt, "l1_size=64M,max_chunk=4M") ? -1 : 0;
}

static int teardown(void **state)
{
	return kvfs_test_umount(&mnt) ? -1 : 0;
}

static void new_ns(char *path, const char *name, bool paths)
{
	snprintf(path, PATH_MAX, "%s/%s", mnt.dir, name);
	assert_int_equal(mkdir(path, 0755), 0);
	if (paths)
		assert_int_equal(setxattr(path, "user.kvfs.names", "paths", 5,
					  0), 0);
}

static void key_path(char *out, const char *ns)
{
	snprintf(out, PATH_MAX, "%s/%032llx", ns,
		 (unsigned long long)next_key++);
}

/* What the mount answers for path p within 2 s (publication at the last
 * close comes with the RELEASE, just after the exec's FLUSH). */
static int wait_check(const char *p, size_t len, uint64_t seed)
{
	int r = -1;

	for (int i = 0; i < 200 && r; i++) {
		r = kvfs_test_read_check(p, len, seed);
		if (r)
			usleep(10000);
	}
	return r;
}

/* Aborts the FUSE connection of the mount (its /sys/fs/fuse/connections
 * entry): what a test does when the daemon no longer answers, so that a
 * hang fails the test instead of wedging every process that touches it. */
static void abort_mount(void)
{
	char path[128];
	struct stat sb;
	FILE *f;

	if (stat(mnt.dir, &sb) != 0 && errno != ENOTCONN)
		return;
	snprintf(path, sizeof(path), "/sys/fs/fuse/connections/%u/abort",
		 minor(sb.st_dev));
	f = fopen(path, "w");
	if (f) {
		fputs("1", f);
		fclose(f);
	}
}

/* Waits up to 20 s for child pid; a hang fails the test (and aborts the
 * mount: the tests after it would hang too). */
static void wait_child(pid_t pid, const char *what)
{
	int st = 0, waited = 0;

	while (waitpid(pid, &st, WNOHANG) == 0 && waited < 20000) {
		usleep(10000);
		waited += 10;
	}
	if (waited >= 20000) {
		abort_mount();
		waitpid(pid, &st, 0);
		fail_msg("%s hung for 20 s (FLUSH)", what);
	}
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* A writer that execs without closing: execve() closes its close-on-exec
 * fd, an implicit close that publishes, as exit's does. It used to hang
 * both the exec and a daemon worker for good: the FLUSH asked
 * /proc/PID/stat whether the writer was being killed, and that read waits
 * for the exec to end. The child's fd is O_CLOEXEC, as Python's open()
 * makes every fd. */
static void test_exec_closes_writer(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX];
	pid_t pid;

	new_ns(ns, "exec", false);
	key_path(p, ns);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char buf[8192];
		int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC,
			      0644);

		kvfs_test_fill(buf, sizeof(buf), 43, 0);
		if (fd < 0 || write(fd, buf, sizeof(buf)) != sizeof(buf))
			_exit(1);
		execl("/bin/true", "true", (char *)NULL);
		_exit(2);
	}
	wait_child(pid, "the exec of a writer");
	assert_int_equal(kvfs_test_read_check(p, 8192, 43), 0);
}

struct opener {
	const char *path;
	size_t len;
	uint64_t seed;
	int fd;
};

/* Opens o->path close-on-exec and writes o->len bytes; the thread then
 * ends, its fd left open. */
static void *open_write(void *arg)
{
	struct opener *o = arg;
	char buf[8192];

	kvfs_test_fill(buf, sizeof(buf), o->seed, 0);
	o->fd = open(o->path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	if (o->fd >= 0 && write(o->fd, buf, o->len) != (ssize_t)o->len) {
		close(o->fd);
		o->fd = -1;
	}
	return NULL;
}

static int thread_opens(struct opener *o)
{
	pthread_t th;

	if (pthread_create(&th, NULL, open_write, o) ||
	    pthread_join(th, NULL))
		return -1;
	return o->fd;
}

/* A thread's writer (the thread ended), then the process execs: the
 * exec's close publishes it, without a hang; in a key namespace and in a
 * path namespace. */
static void test_exec_closes_thread_writer(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX];

	for (int paths = 0; paths < 2; paths++) {
		pid_t pid;

		new_ns(ns, paths ? "exec-thr-paths" : "exec-thr", paths);
		if (paths)
			snprintf(p, sizeof(p), "%s/config.json", ns);
		else
			key_path(p, ns);
		fflush(NULL);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct opener o = { p, 8192, 47, -1 };

			if (thread_opens(&o) < 0)
				_exit(1);
			execl("/bin/true", "true", (char *)NULL);
			_exit(2);
		}
		wait_child(pid, "the exec of a thread's writer");
		assert_int_equal(wait_check(p, 8192, 47), 0);
	}
}

/* A thread's writer (the thread ended); a child forked since execs, its
 * copy of the fd closed by the exec: no hang, and the parent's chunk,
 * half written, is not published by it; the parent's own close then
 * publishes all of it. */
static void test_child_exec_leaves_parent_writer(void **state)
{
	struct opener o = { NULL, 100, 48, -1 };
	char ns[PATH_MAX], p[PATH_MAX], buf[8192];
	struct stat sb;
	pid_t pid;

	new_ns(ns, "exec-child", false);
	key_path(p, ns);
	o.path = p;
	assert_true(thread_opens(&o) >= 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(2);
	}
	wait_child(pid, "a child's exec");
	usleep(100000);
	assert_int_equal(stat(p, &sb), -1); /* not published by the child */
	assert_int_equal(errno, ENOENT);
	kvfs_test_fill(buf, sizeof(buf), 48, 0);
	assert_int_equal(pwrite(o.fd, buf + 100, sizeof(buf) - 100, 100),
			 sizeof(buf) - 100);
	assert_int_equal(close(o.fd), 0);
	assert_int_equal(kvfs_test_read_check(p, sizeof(buf), 48), 0);
}

struct writer_arg {
	int fd;
	const char *buf;
	size_t len; /* 0 once written */
};

static void *write_part(void *arg)
{
	struct writer_arg *a = arg;

	if (write(a->fd, a->buf, a->len) == (ssize_t)a->len)
		a->len = 0;
	return NULL;
}

/* The parent creates the chunk and closes its fd with nothing written;
 * a forked child writes it (the last close, the child's, publishes):
 * killed half way, nothing is published; done, all of it is. A child
 * that only held the fd and was killed leaves the parent's chunk. */
static void test_child_killed_writing(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX], buf[8192];
	struct stat sb;
	int fd, st;
	pid_t pid;

	new_ns(ns, "child-writes", false);
	kvfs_test_fill(buf, sizeof(buf), 49, 0);
	for (int killed = 1; killed >= 0; killed--) {
		key_path(p, ns);
		fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
		assert_true(fd >= 0);
		fflush(NULL);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			usleep(100000); /* the parent's close first */
			if (write(fd, buf, 4096) != 4096)
				_exit(1);
			if (killed)
				kill(getpid(), SIGKILL);
			if (write(fd, buf + 4096, 4096) != 4096)
				_exit(1);
			_exit(0);
		}
		assert_int_equal(close(fd), 0);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		if (killed) {
			assert_true(WIFSIGNALED(st));
			usleep(200000); /* the RELEASE of its fd */
			assert_int_equal(stat(p, &sb), -1);
			assert_int_equal(errno, ENOENT);
		} else {
			assert_true(WIFEXITED(st) && !WEXITSTATUS(st));
			assert_int_equal(wait_check(p, sizeof(buf), 49), 0);
		}
	}
	/* a killed child that never wrote (holding the parent's fd and a
	 * reader's of its own): the parent's chunk stands, also where the
	 * thread that wrote it last has exited */
	for (int thread = 0; thread < 2; thread++) {
		key_path(p, ns);
		fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
		assert_true(fd >= 0);
		if (thread) {
			struct writer_arg a = { fd, buf, 4096 };
			pthread_t th;

			assert_int_equal(pthread_create(&th, NULL, write_part,
							&a), 0);
			assert_int_equal(pthread_join(th, NULL), 0);
			assert_int_equal(a.len, 0);
		} else {
			assert_int_equal(write(fd, buf, 4096), 4096);
		}
		fflush(NULL);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			if (open(p, O_RDONLY) < 0)
				_exit(1);
			kill(getpid(), SIGKILL);
			_exit(1);
		}
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_int_equal(write(fd, buf + 4096, 4096), 4096);
		assert_int_equal(close(fd), 0);
		assert_int_equal(kvfs_test_read_check(p, sizeof(buf), 49), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exec_closes_writer),
		cmocka_unit_test(test_exec_closes_thread_writer),
		cmocka_unit_test(test_child_exec_leaves_parent_writer),
		cmocka_unit_test(test_child_killed_writing),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
