/*
 * test_protocol.c - the file protocol on a real mount, with plain syscalls
 * from several threads and processes: names, publication at close and by
 * rename, invisibility before publication, immutability, EEXIST races,
 * EFBIG, reads past the end, chunk_bytes, a writer killed mid-chunk,
 * mmap, unlink under a reader, a reused key, rmdir, rewinddir, xattrs.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/common/kvfs_test.h"

/* paths are built from a short mount point: truncation cannot happen */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define MAX_CHUNK (4u << 20)

static struct kvfs_mnt mnt;
static uint64_t next_key = 1000;

static int setup(void **state)
{
	if (kvfs_test_mount(&mnt, "l1_size=96M,max_chunk=4M"))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	return kvfs_test_umount(&mnt) ? -1 : 0;
}

/* A fresh namespace directory and its path. */
static void new_ns(char *path, const char *name)
{
	snprintf(path, PATH_MAX, "%s/%s", mnt.dir, name);
	assert_int_equal(mkdir(path, 0755), 0);
}

static void key_path(char *out, const char *ns, uint64_t n)
{
	char key[33];

	kvfs_test_key_name(n, key);
	snprintf(out, PATH_MAX, "%s/%s", ns, key);
}

static int in_readdir(const char *dir, const char *name)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int found = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (!strcmp(de->d_name, name))
			found = 1;
	closedir(d);
	return found;
}

/* What another process sees of path: 0 = visible (stat and open work),
 * else the errno of stat (and open must agree). */
static int seen_by_other_process(const char *path)
{
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (pid == 0) {
		struct stat sb;
		int e1 = stat(path, &sb) ? errno : 0;
		int fd = open(path, O_RDONLY);
		int e2 = fd < 0 ? errno : 0;

		if (fd >= 0)
			close(fd);
		_exit(e1 != e2 ? 99 : e1);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* ------------------------------------------------------------------ names */

static void test_names(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX];
	const char *bad[] = {
		"README", "0123456789ABCDEF0123456789abcdef",
		"0123456789abcdef0123456789abcde",
		"0123456789abcdef0123456789abcdef0",
		"0123456789abcdefg123456789abcdef", "-", "key with spaces",
	};

	new_ns(ns, "names");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", ns, bad[i]);
		errno = 0;
		assert_int_equal(open(p, O_CREAT | O_EXCL | O_WRONLY, 0644),
				 -1);
		assert_int_equal(errno, EINVAL);
		assert_int_equal(mkdir(p, 0755), -1);
	}
	/* no directories inside a namespace, no files in the root */
	key_path(p, ns, next_key++);
	assert_int_equal(mkdir(p, 0755), -1);
	assert_int_equal(errno, EPERM);
	snprintf(p, sizeof(p), "%s/file", mnt.dir);
	assert_int_equal(open(p, O_CREAT | O_WRONLY, 0644), -1);
	assert_int_equal(errno, EPERM);
	/* namespace names: not '.'-prefixed, at most 127 bytes */
	snprintf(p, sizeof(p), "%s/.hidden", mnt.dir);
	assert_int_equal(mkdir(p, 0755), -1);
	assert_int_equal(errno, EINVAL);
	/* well-formed UTF-8 only (they appear in the JSON stats) */
	{
		static const char *const bad_utf8[] = {
			"u\xff", "\xc0\xaf", "a\xe2\x82", "\xed\xa0\x80",
		};

		for (size_t i = 0; i < sizeof(bad_utf8) / sizeof(*bad_utf8);
		     i++) {
			snprintf(p, sizeof(p), "%s/%s", mnt.dir, bad_utf8[i]);
			assert_int_equal(mkdir(p, 0755), -1);
			assert_int_equal(errno, EINVAL);
		}
		snprintf(p, sizeof(p), "%s/caf\xc3\xa9-\xf0\x9f\x98\x80",
			 mnt.dir);
		assert_int_equal(mkdir(p, 0755), 0);
		assert_int_equal(rmdir(p), 0);
	}
	snprintf(p, sizeof(p), "%s/%0128d", mnt.dir, 0);
	assert_int_equal(mkdir(p, 0755), -1);
	assert_int_equal(errno, ENAMETOOLONG);
	snprintf(p, sizeof(p), "%s/%0127d", mnt.dir, 0);
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(mkdir(p, 0755), -1);
	assert_int_equal(errno, EEXIST);
	assert_int_equal(rmdir(p), 0);
	/* lowercase key works */
	key_path(p, ns, next_key++);
	assert_int_equal(kvfs_test_write_file(p, 10, 1, 0), 0);
}

/* ------------------------------------------------------------ publication */

static void test_publish_at_close(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX];
	const size_t len = 3 * 1000 * 1000 + 17;
	uint8_t *buf = malloc(len);
	struct stat st;
	int fd;

	new_ns(ns, "publish");
	key_path(p, ns, next_key++);
	kvfs_test_fill(buf, len, 42, 0);
	fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
	assert_true(fd >= 0);
	/* pieces at any offsets, out of order */
	assert_int_equal(pwrite(fd, buf + 2000000, len - 2000000, 2000000),
			 (ssize_t)(len - 2000000));
	assert_int_equal(pwrite(fd, buf, 777, 0), 777);
	assert_int_equal(pwrite(fd, buf + 777, 2000000 - 777, 777),
			 2000000 - 777);
	/* the writer sees its file; nobody else does */
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, (off_t)len);
	assert_int_equal(seen_by_other_process(p), ENOENT);
	assert_false(in_readdir(ns, strrchr(p, '/') + 1));
	assert_int_equal(close(fd), 0);

	assert_int_equal(seen_by_other_process(p), 0);
	assert_true(in_readdir(ns, strrchr(p, '/') + 1));
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, (off_t)len);
	assert_int_equal(st.st_mode & 07777, 0444);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(kvfs_test_read_check(p, len, 42), 0);
	free(buf);
}

static void test_published_immutable(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX], q[PATH_MAX];

	new_ns(ns, "immutable");
	key_path(p, ns, next_key++);
	assert_int_equal(kvfs_test_write_file(p, 5000, 3, 0), 0);
	errno = 0;
	assert_int_equal(open(p, O_WRONLY), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(open(p, O_RDWR), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(open(p, O_WRONLY | O_CREAT, 0644), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(open(p, O_WRONLY | O_CREAT | O_EXCL, 0644), -1);
	assert_int_equal(errno, EEXIST);
	assert_int_equal(truncate(p, 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(truncate(p, 100000), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(open(p, O_RDONLY | O_TRUNC), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(chmod(p, 0644), -1);
	assert_int_equal(errno, EPERM);
	key_path(q, ns, next_key++);
	assert_int_equal(rename(p, q), -1);
	assert_int_equal(errno, EPERM);
	/* still intact */
	assert_int_equal(kvfs_test_read_check(p, 5000, 3), 0);
}

/* Two processes race to create the same key, many times: exactly one
 * wins each round, the loser sees EEXIST, the winner's bytes are intact. */
static void test_eexist_race(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX];

	new_ns(ns, "race");
	for (int round = 0; round < 20; round++) {
		pid_t pid[2];
		int st[2], wins = 0, winner = -1;
		int sync[2];

		key_path(p, ns, next_key++);
		assert_int_equal(pipe(sync), 0);
		for (int i = 0; i < 2; i++) {
			pid[i] = fork();
			assert_true(pid[i] >= 0);
			if (pid[i] == 0) {
				char c;
				int r;

				close(sync[1]);
				/* both start together */
				if (read(sync[0], &c, 1) < 0)
					_exit(98);
				r = kvfs_test_write_file(p, 300000 + i,
							 (uint64_t)(100 + i),
							 65536);
				_exit(r == 0 ? 0 : r == -EEXIST ? 1 : 97);
			}
		}
		close(sync[0]);
		close(sync[1]); /* EOF releases both */
		for (int i = 0; i < 2; i++) {
			assert_int_equal(waitpid(pid[i], &st[i], 0), pid[i]);
			assert_true(WIFEXITED(st[i]));
			assert_true(WEXITSTATUS(st[i]) <= 1);
			if (WEXITSTATUS(st[i]) == 0) {
				wins++;
				winner = i;
			}
		}
		assert_int_equal(wins, 1);
		assert_int_equal(kvfs_test_read_check(p, 300000 + winner,
						      (uint64_t)(100 + winner)),
				 0);
	}
}

static void test_efbig_and_past_end(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX], buf[4096];
	int fd;

	new_ns(ns, "limits");
	key_path(p, ns, next_key++);
	fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
	assert_true(fd >= 0);
	kvfs_test_fill(buf, sizeof(buf), 9, 0);
	assert_int_equal(pwrite(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	errno = 0;
	assert_int_equal(pwrite(fd, buf, 100, MAX_CHUNK - 50), -1);
	assert_int_equal(errno, EFBIG);
	assert_int_equal(pwrite(fd, buf, 100, (off_t)MAX_CHUNK * 4), -1);
	assert_int_equal(errno, EFBIG);
	/* a chunk that lost a write is never published: close says why */
	assert_int_equal(close(fd), -1);
	assert_int_equal(errno, EFBIG);
	assert_int_equal(seen_by_other_process(p), ENOENT);

	fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	/* a write that ends exactly at max_chunk is fine */
	assert_int_equal(pwrite(fd, buf, 50, MAX_CHUNK - 50), 50);
	assert_int_equal(close(fd), 0);

	fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, sizeof(buf), MAX_CHUNK), 0);
	assert_int_equal(pread(fd, buf, sizeof(buf), MAX_CHUNK + 12345), 0);
	assert_int_equal(pread(fd, buf, sizeof(buf), 1LL << 40), 0);
	assert_int_equal(pread(fd, buf, 100, MAX_CHUNK - 30), 30);
	assert_int_equal(kvfs_test_check(buf, 30, 9, 20), 0);
	/* the hole in between reads as zeros */
	assert_int_equal(pread(fd, buf, 16, 1 << 20), 16);
	for (int i = 0; i < 16; i++)
		assert_int_equal(buf[i], 0);
	close(fd);
}

static void test_rename_publish(void **state)
{
	char ns[PATH_MAX], tmp[PATH_MAX], p[PATH_MAX], q[PATH_MAX];
	struct stat st;
	int fd;

	new_ns(ns, "rename");
	snprintf(tmp, sizeof(tmp), "%s/.tmp.%d", ns, getpid());
	key_path(p, ns, next_key++);
	/* the idiom: write a temporary, close, rename onto the key */
	assert_int_equal(kvfs_test_write_file(tmp, 1 << 20, 11, 100000), 0);
	assert_int_equal(stat(tmp, &st), 0); /* by exact name: yes */
	assert_int_equal(st.st_size, 1 << 20);
	assert_false(in_readdir(ns, strrchr(tmp, '/') + 1)); /* listed: no */
	assert_int_equal(seen_by_other_process(p), ENOENT);
	assert_int_equal(rename(tmp, p), 0);
	assert_int_equal(stat(tmp, &st), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(seen_by_other_process(p), 0);
	assert_int_equal(kvfs_test_read_check(p, 1 << 20, 11), 0);

	/* rename while still open, then close */
	key_path(q, ns, next_key++);
	fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY, 0644);
	assert_true(fd >= 0);
	{
		char buf[8192];

		kvfs_test_fill(buf, sizeof(buf), 12, 0);
		assert_int_equal(write(fd, buf, sizeof(buf)), sizeof(buf));
	}
	assert_int_equal(rename(tmp, q), 0);
	assert_int_equal(write(fd, "x", 1), -1); /* published: immutable */
	assert_int_equal(errno, EPERM);
	assert_int_equal(close(fd), 0);
	assert_int_equal(kvfs_test_read_check(q, 8192, 12), 0);

	/* onto an existing key: EEXIST, the existing chunk is untouched and
	 * the temporary is left as it was (as rename(2) leaves its source:
	 * the write-then-rename idiom unlinks it next) */
	assert_int_equal(kvfs_test_write_file(tmp, 100, 13, 0), 0);
	assert_int_equal(rename(tmp, q), -1);
	assert_int_equal(errno, EEXIST);
	assert_int_equal(kvfs_test_read_check(q, 8192, 12), 0);
	assert_int_equal(stat(tmp, &st), 0);
	assert_int_equal(st.st_size, 100);
	assert_int_equal(kvfs_test_read_check(tmp, 100, 13), 0);
	assert_int_equal(unlink(tmp), 0);

	/* temporary to temporary, then unlink */
	assert_int_equal(kvfs_test_write_file(tmp, 100, 14, 0), 0);
	snprintf(p, sizeof(p), "%s/.other", ns);
	assert_int_equal(rename(tmp, p), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(stat(p, &st), -1);
	assert_int_equal(errno, ENOENT);
	/* invalid target name */
	assert_int_equal(kvfs_test_write_file(tmp, 100, 14, 0), 0);
	snprintf(p, sizeof(p), "%s/NOTAKEY", ns);
	assert_int_equal(rename(tmp, p), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(unlink(tmp), 0);
	/* namespace must be empty for rmdir now */
	assert_int_equal(rmdir(ns), -1);
	assert_int_equal(errno, ENOTEMPTY);
}

static void test_chunk_bytes(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX], tmp[PATH_MAX], val[32];
	struct stat st;

	new_ns(ns, "sized");
	assert_int_equal(setxattr(ns, "user.kvfs.chunk_bytes", "65536", 5, 0),
			 0);
	assert_int_equal(getxattr(ns, "user.kvfs.chunk_bytes", val,
				  sizeof(val)), 5);
	assert_memory_equal(val, "65536", 5);
	key_path(p, ns, next_key++);
	/* short: close reports it, the chunk is discarded */
	assert_int_equal(kvfs_test_write_file(p, 60000, 21, 0), -EMSGSIZE);
	assert_int_equal(stat(p, &st), -1);
	assert_int_equal(errno, ENOENT);
	/* long: the same */
	assert_int_equal(kvfs_test_write_file(p, 70000, 21, 0), -EMSGSIZE);
	assert_int_equal(stat(p, &st), -1);
	/* empty (O_EXCL, closed without a write): close reports it too */
	{
		int fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);

		assert_true(fd >= 0);
		assert_int_equal(close(fd), -1);
		assert_int_equal(errno, EMSGSIZE);
		assert_int_equal(stat(p, &st), -1);
		assert_int_equal(errno, ENOENT);
	}
	/* exact: published */
	assert_int_equal(kvfs_test_write_file(p, 65536, 22, 0), 0);
	assert_int_equal(kvfs_test_read_check(p, 65536, 22), 0);
	/* by rename: the rename reports it, nothing is published, and the
	 * temporary stays: the rest can be written and the rename retried */
	snprintf(tmp, sizeof(tmp), "%s/.t", ns);
	key_path(p, ns, next_key++);
	assert_int_equal(kvfs_test_write_file(tmp, 1000, 23, 0), 0);
	assert_int_equal(rename(tmp, p), -1);
	assert_int_equal(errno, EMSGSIZE);
	assert_int_equal(stat(p, &st), -1);
	assert_int_equal(stat(tmp, &st), 0);
	assert_int_equal(st.st_size, 1000);
	{
		static char rest[65536 - 1000];
		int fd = open(tmp, O_WRONLY);

		assert_true(fd >= 0);
		kvfs_test_fill(rest, sizeof(rest), 23, 1000);
		assert_int_equal(pwrite(fd, rest, sizeof(rest), 1000),
				 (ssize_t)sizeof(rest));
		assert_int_equal(close(fd), 0);
	}
	assert_int_equal(rename(tmp, p), 0);
	assert_int_equal(kvfs_test_read_check(p, 65536, 23), 0);
	assert_int_equal(stat(tmp, &st), -1);
	assert_int_equal(setxattr(ns, "user.kvfs.chunk_bytes", "abc", 3, 0),
			 -1);
	assert_int_equal(errno, EINVAL);
}

/* A writer killed by SIGKILL mid-chunk publishes nothing, with or without
 * chunk_bytes; the key can be written again afterwards. */
static void test_killed_writer(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX], tmp[PATH_MAX];

	new_ns(ns, "killed");
	for (int variant = 0; variant < 2; variant++) {
		int sync[2], st;
		pid_t pid;
		char c;
		struct stat sb;

		key_path(p, ns, next_key++);
		snprintf(tmp, sizeof(tmp), "%s/.dying", ns);
		assert_int_equal(pipe(sync), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			char buf[65536];
			int fd = open(variant ? tmp : p,
				      O_CREAT | O_EXCL | O_WRONLY, 0644);

			if (fd < 0)
				_exit(1);
			kvfs_test_fill(buf, sizeof(buf), 31, 0);
			for (int i = 0; i < 8; i++)
				if (write(fd, buf, sizeof(buf)) != sizeof(buf))
					_exit(2);
			if (write(sync[1], "k", 1) != 1)
				_exit(3);
			for (;;)
				pause();
		}
		close(sync[1]);
		assert_int_equal(read(sync[0], &c, 1), 1);
		close(sync[0]);
		assert_int_equal(kill(pid, SIGKILL), 0);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFSIGNALED(st));
		/* the close of the dead writer's fd has been handled by now
		 * (exit waits for the flush) */
		assert_int_equal(stat(p, &sb), -1);
		assert_int_equal(errno, ENOENT);
		assert_int_equal(seen_by_other_process(p), ENOENT);
		assert_false(in_readdir(ns, strrchr(p, '/') + 1));
		if (variant) {
			/* the temporary died with its writer */
			assert_int_equal(stat(tmp, &sb), -1);
			assert_int_equal(errno, ENOENT);
			assert_int_equal(rename(tmp, p), -1);
		}
		/* not stuck as in-flight */
		assert_int_equal(kvfs_test_write_file(p, 1000, 32, 0), 0);
		assert_int_equal(kvfs_test_read_check(p, 1000, 32), 0);
	}
}

/* A thread that creates a chunk, writes its first 100 bytes (of seed
 * 44) and exits, the fd left open. */
struct opener {
	const char *path;
	int fd;
};

static void *open_100(void *arg)
{
	struct opener *o = arg;
	char buf[4096];

	kvfs_test_fill(buf, sizeof(buf), 44, 0);
	o->fd = open(o->path, O_CREAT | O_EXCL | O_WRONLY, 0644);
	if (o->fd >= 0 && write(o->fd, buf, 100) != 100) {
		close(o->fd);
		o->fd = -1;
	}
	return NULL;
}

/* A forked child closes its copy of writer fd and exits: path p is
 * still not published. */
static void child_closes(int fd, const char *p)
{
	struct stat sb;
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (pid == 0) {
		close(fd);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(stat(p, &sb), -1); /* not published by the child */
}

/* A child that exits normally without closing still publishes (exit
 * closes its fds); a forked child closing an inherited fd does not
 * publish for its parent, whether or not the thread that created the
 * chunk still lives. */
static void test_exit_and_fork(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX];
	struct stat sb;
	pid_t pid;
	int st, fd;
	char buf[4096];

	new_ns(ns, "exits");
	key_path(p, ns, next_key++);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
		kvfs_test_fill(buf, sizeof(buf), 41, 0);
		if (fd < 0 || write(fd, buf, sizeof(buf)) != sizeof(buf))
			_exit(1);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(kvfs_test_read_check(p, 4096, 41), 0);

	key_path(p, ns, next_key++);
	fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
	assert_true(fd >= 0);
	kvfs_test_fill(buf, sizeof(buf), 42, 0);
	assert_int_equal(write(fd, buf, 100), 100);
	child_closes(fd, p);
	assert_int_equal(write(fd, buf + 100, sizeof(buf) - 100),
			 sizeof(buf) - 100);
	assert_int_equal(close(fd), 0);
	assert_int_equal(kvfs_test_read_check(p, 4096, 42), 0);

	/* the same when the thread that created the chunk has exited: its
	 * process is unknown then, and the child's close published the
	 * parent's first 100 bytes (the parent's next write EPERM) */
	key_path(p, ns, next_key++);
	{
		struct opener o = { p, -1 };
		pthread_t th;

		assert_int_equal(pthread_create(&th, NULL, open_100, &o), 0);
		assert_int_equal(pthread_join(th, NULL), 0);
		fd = o.fd;
	}
	assert_true(fd >= 0);
	child_closes(fd, p);
	kvfs_test_fill(buf, sizeof(buf), 44, 0);
	assert_int_equal(pwrite(fd, buf + 100, sizeof(buf) - 100, 100),
			 sizeof(buf) - 100);
	assert_int_equal(close(fd), 0);
	assert_int_equal(kvfs_test_read_check(p, 4096, 44), 0);

	/* killed by a signal after its creator thread exited: nothing
	 * published (the flush that publishes for the creator's process
	 * checks for a killed writer first; its last close must not
	 * publish the half-written chunk either) */
	key_path(p, ns, next_key++);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct opener o = { p, -1 };
		pthread_t th;

		if (pthread_create(&th, NULL, open_100, &o) ||
		    pthread_join(th, NULL) || o.fd < 0)
			_exit(1);
		kill(getpid(), SIGKILL);
		_exit(2);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	usleep(200000); /* the release of the killed process's fd */
	assert_int_equal(stat(p, &sb), -1);
}

/* Shell redirection (`cmd > key`) opens, dup2()s and closes the original
 * fd before any byte is written; `touch key` writes nothing at all (and
 * publishes nothing). */
static void test_dup_and_shell(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX], cmd[PATH_MAX + 64];
	char buf[5000];
	struct stat st;
	int fd, fd2;

	new_ns(ns, "dups");
	key_path(p, ns, next_key++);
	fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
	assert_true(fd >= 0);
	fd2 = dup(fd);
	assert_true(fd2 >= 0);
	assert_int_equal(close(fd), 0); /* nothing written yet: no publish */
	kvfs_test_fill(buf, sizeof(buf), 91, 0);
	assert_int_equal(write(fd2, buf, sizeof(buf)), sizeof(buf));
	assert_int_equal(close(fd2), 0);
	assert_int_equal(kvfs_test_read_check(p, sizeof(buf), 91), 0);

	key_path(p, ns, next_key++);
	snprintf(cmd, sizeof(cmd), "printf 'hello kvfs' > %s", p);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, 10);
	/* again onto the published key: refused */
	assert_int_not_equal(system(cmd), 0);

	key_path(p, ns, next_key++);
	snprintf(cmd, sizeof(cmd), "touch %s", p);
	assert_int_equal(system(cmd), 0);
	/* a chunk without bytes is never published: the name stays free
	 * (the last close is asynchronous: give it time to be wrong) */
	usleep(100000);
	assert_int_equal(stat(p, &st), -1);
	assert_int_equal(errno, ENOENT);
}

static void test_mmap(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX];
	const size_t len = (2 << 20) + 100;
	void *m;
	int fd;

	new_ns(ns, "mmap");
	key_path(p, ns, next_key++);
	assert_int_equal(kvfs_test_write_file(p, len, 51, 1 << 20), 0);
	fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(m != MAP_FAILED);
	assert_int_equal(kvfs_test_check(m, len, 51, 0), 0);
	assert_int_equal(munmap(m, len), 0);
	/* With cache=direct (the default) MAP_SHARED is refused by the
	 * kernel (ENODEV); with cache=page it works. Either is fine, but it
	 * must never map wrong bytes. */
	m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (m != MAP_FAILED) {
		assert_int_equal(kvfs_test_check(m, len, 51, 0), 0);
		munmap(m, len);
	} else {
		assert_int_equal(errno, ENODEV);
	}
	close(fd);
}

static void test_unlink_under_reader(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX];
	char *buf = malloc(200000);
	struct stat st;
	int fd;

	new_ns(ns, "unlink");
	key_path(p, ns, next_key++);
	assert_int_equal(kvfs_test_write_file(p, 200000, 61, 0), 0);
	fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(stat(p, &st), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(unlink(p), -1);
	assert_int_equal(errno, ENOENT);
	/* the same key written again with other bytes */
	assert_int_equal(kvfs_test_write_file(p, 150000, 62, 0), 0);
	/* the open reader still has the old bytes, the path the new ones */
	assert_int_equal(pread(fd, buf, 200000, 0), 200000);
	assert_int_equal(kvfs_test_check(buf, 200000, 61, 0), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 200000);
	assert_int_equal(st.st_nlink, 0);
	close(fd);
	assert_int_equal(kvfs_test_read_check(p, 150000, 62), 0);
	free(buf);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(rmdir(ns), 0);
}

static void test_rmdir(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX];
	struct stat st;

	new_ns(ns, "rmdir");
	key_path(p, ns, next_key++);
	assert_int_equal(kvfs_test_write_file(p, 10, 71, 0), 0);
	assert_int_equal(rmdir(ns), -1);
	assert_int_equal(errno, ENOTEMPTY);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(rmdir(ns), 0);
	assert_int_equal(stat(ns, &st), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(rmdir(ns), -1);
	assert_int_equal(errno, ENOENT);
	/* a namespace of the same name is a new, empty one */
	assert_int_equal(mkdir(ns, 0700), 0);
	assert_int_equal(stat(p, &st), -1);
	assert_int_equal(stat(ns, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	/* chmod / chown are kept */
	assert_int_equal(chmod(ns, 0750), 0);
	assert_int_equal(chown(ns, 1234, 5678), 0);
	assert_int_equal(stat(ns, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0750);
	assert_int_equal(st.st_uid, 1234);
	assert_int_equal(st.st_gid, 5678);
	assert_int_equal(rmdir(ns), 0);

	/* a closed temporary never renamed does not keep it busy, even
	 * while the kernel still caches its dentry; an open one does */
	assert_int_equal(mkdir(ns, 0755), 0);
	snprintf(p, sizeof(p), "%s/.tmp", ns);
	assert_int_equal(kvfs_test_write_file(p, 3, 72, 0), 0);
	assert_int_equal(stat(p, &st), 0);
	{
		int fd;
		char t2[PATH_MAX];

		snprintf(t2, sizeof(t2), "%s/.open", ns);
		fd = open(t2, O_CREAT | O_WRONLY, 0644);
		assert_true(fd >= 0);
		assert_int_equal(rmdir(ns), -1);
		assert_int_equal(errno, ENOTEMPTY);
		close(fd);
	}
	assert_int_equal(rmdir(ns), 0);
}

/* The "misses" counter of /.kvfs/stats. */
static uint64_t stats_misses(void)
{
	char p[PATH_MAX], buf[65536];
	const char *m;
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s/.kvfs/stats", mnt.dir);
	fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = 0;
	m = strstr(buf, "\"misses\": ");
	assert_non_null(m);
	return strtoull(m + 10, NULL, 10);
}

/* A reader's lookup of an absent key is a miss; the lookup the kernel
 * makes before creating or renaming onto a new key is not. */
static void test_misses(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX], tmp[PATH_MAX];
	uint64_t m0;
	struct stat st;

	new_ns(ns, "misses");
	key_path(p, ns, next_key++);
	m0 = stats_misses();
	assert_int_equal(open(p, O_RDONLY), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(stats_misses(), m0 + 1);
	assert_int_equal(stat(p, &st), -1);
	assert_int_equal(stats_misses(), m0 + 2);
	assert_int_equal(kvfs_test_write_file(p, 100, 3, 0), 0);
	assert_int_equal(stats_misses(), m0 + 2);
	key_path(p, ns, next_key++);
	snprintf(tmp, sizeof(tmp), "%s/.t", ns);
	assert_int_equal(kvfs_test_write_file(tmp, 100, 3, 0), 0);
	assert_int_equal(rename(tmp, p), 0);
	assert_int_equal(stats_misses(), m0 + 2);
	assert_int_equal(kvfs_test_read_check(p, 100, 3), 0);
	assert_int_equal(stats_misses(), m0 + 2);
}

/* Whether the open directory d lists name, read from its start. */
static int dir_lists(DIR *d, const char *name)
{
	struct dirent *de;
	int found = 0;

	rewinddir(d);
	while ((de = readdir(d)))
		if (!strcmp(de->d_name, name))
			found = 1;
	return found;
}

/* One open directory, read again from the start after each change (as a
 * process polling a namespace does): rewinddir sees the change. */
static void test_rewinddir(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX], key[33];
	uint64_t n = next_key++;
	DIR *d;

	new_ns(ns, "rewind");
	kvfs_test_key_name(n, key);
	key_path(p, ns, n);
	d = opendir(ns);
	assert_non_null(d);
	assert_false(dir_lists(d, key));
	assert_int_equal(kvfs_test_write_file(p, 4096, 5, 0), 0);
	assert_true(dir_lists(d, key));
	assert_int_equal(unlink(p), 0);
	assert_false(dir_lists(d, key));
	closedir(d);
	assert_int_equal(rmdir(ns), 0);
}

static void test_xattrs(void **state)
{
	char ns[PATH_MAX], p[PATH_MAX], parent[33], val[256], list[1024];
	ssize_t n;
	int fd;
	char buf[1000];

	new_ns(ns, "xattr");
	assert_int_equal(setxattr(ns, "user.kvfs.dtype", "bf16", 4, 0), 0);
	n = getxattr(ns, "user.kvfs.dtype", val, sizeof(val));
	assert_int_equal(n, 4);
	assert_memory_equal(val, "bf16", 4);
	assert_int_equal(setxattr(ns, "user.kvfs.dtype", "int3", 4, 0), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(setxattr(ns, "user.other", "1", 1, 0), -1);
	assert_int_equal(errno, ENOTSUP);
	assert_int_equal(getxattr(ns, "user.other", val, sizeof(val)), -1);
	assert_int_equal(errno, ENODATA);

	kvfs_test_key_name(next_key++, parent);
	key_path(p, ns, next_key++);
	fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
	assert_true(fd >= 0);
	kvfs_test_fill(buf, sizeof(buf), 81, 0);
	assert_int_equal(write(fd, buf, sizeof(buf)), sizeof(buf));
	/* the writer sets parent and depth before publishing */
	assert_int_equal(fsetxattr(fd, "user.kvfs.parent", parent, 32, 0), 0);
	assert_int_equal(fsetxattr(fd, "user.kvfs.depth", "7", 1, 0), 0);
	assert_int_equal(fsetxattr(fd, "user.kvfs.parent", "xyz", 3, 0), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(close(fd), 0);

	n = getxattr(p, "user.kvfs.parent", val, sizeof(val));
	assert_int_equal(n, 32);
	assert_memory_equal(val, parent, 32);
	n = getxattr(p, "user.kvfs.depth", val, sizeof(val));
	assert_int_equal(n, 1);
	assert_memory_equal(val, "7", 1);
	n = getxattr(p, "user.kvfs.tier", val, sizeof(val));
	assert_int_equal(n, 2);
	assert_memory_equal(val, "l1", 2);
	n = getxattr(p, "user.kvfs.checksum", val, sizeof(val));
	assert_int_equal(n, 16);
	n = getxattr(p, "user.kvfs.stored_bytes", val, sizeof(val) - 1);
	assert_true(n > 0);
	val[n] = '\0';
	assert_string_equal(val, "1000");
	/* the size query protocol and ERANGE */
	assert_int_equal(getxattr(p, "user.kvfs.tier", NULL, 0), 2);
	assert_int_equal(getxattr(p, "user.kvfs.checksum", val, 3), -1);
	assert_int_equal(errno, ERANGE);
	/* after publishing parent/depth are fixed */
	assert_int_equal(setxattr(p, "user.kvfs.depth", "9", 1, 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(setxattr(p, "user.kvfs.hits", "9", 1, 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(setxattr(p, "user.whatever", "9", 1, 0), -1);
	assert_int_equal(errno, ENOTSUP);
	assert_int_equal(getxattr(p, "user.whatever", val, sizeof(val)), -1);
	assert_int_equal(errno, ENODATA);

	/* hits and refs move with reads and opens */
	n = getxattr(p, "user.kvfs.hits", val, sizeof(val) - 1);
	val[n > 0 ? n : 0] = '\0';
	{
		long before = atol(val);

		assert_int_equal(kvfs_test_read_check(p, 1000, 81), 0);
		n = getxattr(p, "user.kvfs.hits", val, sizeof(val) - 1);
		val[n > 0 ? n : 0] = '\0';
		assert_true(atol(val) > before);
	}
	fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	n = getxattr(p, "user.kvfs.refs", val, sizeof(val) - 1);
	val[n > 0 ? n : 0] = '\0';
	assert_true(atol(val) >= 1);
	close(fd);

	/* pin is settable */
	assert_int_equal(setxattr(p, "user.kvfs.pin", "1", 1, 0), 0);
	n = getxattr(p, "user.kvfs.pin", val, sizeof(val));
	assert_int_equal(n, 1);
	assert_memory_equal(val, "1", 1);
	assert_int_equal(setxattr(p, "user.kvfs.pin", "0", 1, 0), 0);
	n = getxattr(p, "user.kvfs.pin", val, sizeof(val));
	assert_memory_equal(val, "0", 1);
	assert_int_equal(setxattr(p, "user.kvfs.pin", "2", 1, 0), -1);
	assert_int_equal(errno, EINVAL);

	n = listxattr(p, list, sizeof(list));
	assert_true(n > 0);
	{
		const char *want[] = { "user.kvfs.tier", "user.kvfs.hits",
			"user.kvfs.atime", "user.kvfs.refs",
			"user.kvfs.stored_bytes", "user.kvfs.checksum",
			"user.kvfs.parent", "user.kvfs.depth",
			"user.kvfs.pin" };

		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			int found = 0;

			for (ssize_t o = 0; o < n; o += strlen(list + o) + 1)
				if (!strcmp(list + o, want[i]))
					found = 1;
			assert_true(found);
		}
	}
	n = listxattr(ns, list, sizeof(list));
	assert_true(n > 0);
	assert_non_null(memmem(list, (size_t)n, "user.kvfs.chunk_bytes", 21));
	assert_non_null(memmem(list, (size_t)n, "user.kvfs.dtype", 15));
}

/* Writers and readers in several threads of this process, and a second
 * process, every byte verified. */
#define NTHREADS 4
#define PER_THREAD 24

struct worker {
	const char *ns;
	int id;
	int failed;
};

static size_t size_of(int t, int i)
{
	return 1000 + (size_t)((t * 7919 + i * 104729) % (1 << 20));
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char p[PATH_MAX];

	for (int i = 0; i < PER_THREAD; i++) {
		snprintf(p, sizeof(p), "%s/", w->ns);
		kvfs_test_key_name((uint64_t)(w->id * 1000 + i), p +
				   strlen(p));
		if (kvfs_test_write_file(p, size_of(w->id, i),
					 (uint64_t)(w->id * 1000 + i),
					 (size_t)(4096 << (i % 8)))) {
			w->failed = 1;
			return NULL;
		}
	}
	/* read what the others wrote (they may still be writing) */
	for (int t = 0; t < NTHREADS; t++) {
		for (int i = 0; i < PER_THREAD; i++) {
			int r;

			snprintf(p, sizeof(p), "%s/", w->ns);
			kvfs_test_key_name((uint64_t)(t * 1000 + i),
					   p + strlen(p));
			r = kvfs_test_read_check(p, size_of(t, i),
						 (uint64_t)(t * 1000 + i));
			if (r && r != -ENOENT) {
				w->failed = 1;
				return NULL;
			}
		}
	}
	return NULL;
}

static void test_threads_and_processes(void **state)
{
	char ns[PATH_MAX];
	pthread_t th[NTHREADS];
	struct worker w[NTHREADS];
	pid_t pid;
	int st;

	new_ns(ns, "threads");
	/* another process reads everything as it appears */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int left = 200;

		while (left-- > 0) {
			int done = 1;
			char p[PATH_MAX];

			for (int t = 0; t < NTHREADS; t++) {
				for (int i = 0; i < PER_THREAD; i++) {
					int r;

					snprintf(p, sizeof(p), "%s/", ns);
					kvfs_test_key_name((uint64_t)(t * 1000 + i),
							   p + strlen(p));
					r = kvfs_test_read_check(p, size_of(t, i),
								 (uint64_t)(t * 1000 + i));
					if (r == -ENOENT)
						done = 0;
					else if (r)
						_exit(1);
				}
			}
			if (done)
				_exit(0);
			usleep(20000);
		}
		_exit(2);
	}
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){ ns, i, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, worker_main,
						&w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].failed, 0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	/* all listed */
	{
		DIR *d = opendir(ns);
		struct dirent *de;
		int n = 0;

		assert_non_null(d);
		while ((de = readdir(d)))
			n += de->d_name[0] != '.';
		closedir(d);
		assert_int_equal(n, NTHREADS * PER_THREAD);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_publish_at_close),
		cmocka_unit_test(test_published_immutable),
		cmocka_unit_test(test_eexist_race),
		cmocka_unit_test(test_efbig_and_past_end),
		cmocka_unit_test(test_rename_publish),
		cmocka_unit_test(test_chunk_bytes),
		cmocka_unit_test(test_killed_writer),
		cmocka_unit_test(test_exit_and_fork),
		cmocka_unit_test(test_dup_and_shell),
		cmocka_unit_test(test_mmap),
		cmocka_unit_test(test_unlink_under_reader),
		cmocka_unit_test(test_rmdir),
		cmocka_unit_test(test_rewinddir),
		cmocka_unit_test(test_misses),
		cmocka_unit_test(test_xattrs),
		cmocka_unit_test(test_threads_and_processes),
	};

	if (access("/dev/fuse", R_OK | W_OK)) {
		printf("skipped: /dev/fuse is not usable here\n");
		return 77;
	}
	if (access(kvfs_test_bin(), X_OK)) {
		printf("skipped: %s not built\n", kvfs_test_bin());
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
