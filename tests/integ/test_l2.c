/*
 * test_l2.c - L2 on a real mount: chunks evicted from a small L1 come back
 * from the compressed log with their bytes; a warm restart lists and serves
 * them again with their namespaces; a damaged record is never served; a
 * daemon killed with SIGKILL during heavy writes serves nothing wrong after
 * a remount, and namespaces come back with their mode, owner, chunk_bytes
 * and dtype (or fail closed, 0700, when l2_dir/namespaces is damaged or
 * missing); a missing, read-only, full or too small l2_dir leaves L1
 * serving (with the error in /.kvfs/stats); a
 * second daemon on the same l2_dir is refused.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"
#include "tier/l2/l2.h"

#define MIB (1u << 20)

static char l2dir[PATH_MAX];
static char tmpfs_dir[PATH_MAX]; /* a tmpfs this program mounted, or "" */

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int setup(void **state)
{
	(void)state;
	snprintf(l2dir, sizeof(l2dir), "/var/tmp/kvfs-integ-l2-XXXXXX");
	return mkdtemp(l2dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	if (tmpfs_dir[0]) { /* a failed test left it mounted */
		umount2(tmpfs_dir, MNT_DETACH);
		rmdir(tmpfs_dir);
	}
	kvfs_test_rm_files(l2dir);
	rmdir(l2dir);
	return 0;
}

static int do_mount_sz(struct kvfs_mnt *m, const char *l2_size,
		       const char *extra)
{
	char opts[PATH_MAX + 512];

	snprintf(opts, sizeof(opts), "l1_size=8M,max_chunk=1M,l2_dir=%s,"
		 "l2_size=%s%s%s", l2dir, l2_size, extra ? "," : "",
		 extra ? extra : "");
	return kvfs_test_mount(m, opts);
}

static int do_mount(struct kvfs_mnt *m, const char *extra)
{
	return do_mount_sz(m, "96M", extra);
}

static char *chunk_path(const struct kvfs_mnt *m, char *buf, const char *ns,
			uint64_t n)
{
	char name[33];

	kvfs_test_key_name(n, name);
	return kvfs_test_path(m, buf, "%s/%s", ns, name);
}

static void mkns(const struct kvfs_mnt *m, const char *ns)
{
	char p[PATH_MAX];

	assert_int_equal(mkdir(kvfs_test_path(m, p, "%s", ns), 0755), 0);
}

static int put(const struct kvfs_mnt *m, const char *ns, uint64_t n,
	       size_t len)
{
	char p[PATH_MAX];

	return kvfs_test_write_file(chunk_path(m, p, ns, n), len, n, 0);
}

static int check(const struct kvfs_mnt *m, const char *ns, uint64_t n,
		 size_t len)
{
	char p[PATH_MAX];

	return kvfs_test_read_check(chunk_path(m, p, ns, n), len, n);
}

static int tier_of(const struct kvfs_mnt *m, const char *ns, uint64_t n,
		   char out[8])
{
	char p[PATH_MAX];
	ssize_t r;

	r = getxattr(chunk_path(m, p, ns, n), KVFS_XATTR_TIER, out, 7);
	if (r < 0)
		return -errno;
	out[r] = 0;
	return 0;
}

/*
 * /.kvfs/stats, read once into st (few reads on purpose: each open/read/
 * close of a control file is a round trip through the daemon).
 */
struct stats_text {
	char buf[16384];
};

static int stats_read(const struct kvfs_mnt *m, struct stats_text *st)
{
	char p[PATH_MAX];
	ssize_t n;
	int fd;

	fd = open(kvfs_test_path(m, p, KVFS_CTL_STATS), O_RDONLY);
	if (fd < 0)
		return -1;
	n = read(fd, st->buf, sizeof(st->buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	st->buf[n] = 0;
	return 0;
}

/* The value after "key": (inside the "l2" object when l2). */
static long long stat_num(const struct stats_text *st, bool l2,
			  const char *key)
{
	const char *s = st->buf;
	char pat[64];

	if (l2) {
		s = strstr(st->buf, "\"l2\"");
		if (!s)
			return -1;
	}
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	s = strstr(s, pat);
	return s ? strtoll(s + strlen(pat), NULL, 10) : -1;
}

/* Waits until chunk n of ns is in L2 and its write had time to land. */
static void wait_in_l2(const struct kvfs_mnt *m, const char *ns, uint64_t n)
{
	char where[8] = "";
	char p[PATH_MAX];
	char name[33];
	ssize_t r;

	kvfs_test_key_name(n, name);
	kvfs_test_path(m, p, "%s/%s", ns, name);
	for (int i = 0; i < 200; i++) {
		r = getxattr(p, KVFS_XATTR_TIER, where, sizeof(where) - 1);
		if (r > 0) {
			where[r] = 0;
			if (!strcmp(where, "l2"))
				break;
		}
		sleep_ms(25);
	}
	sleep_ms(500);
}

/* Flips a byte inside the payload of every record of key n in the log. */
static int damage_record(uint64_t n)
{
	return kvfs_test_l2_damage(l2dir, n);
}

/* ------------------------------------------------------------- tests */

static void test_evicted_come_back(void **state)
{
	struct kvfs_mnt m;
	char where[8];
	bool saw_l2 = false;
	struct stats_text st;

	(void)state;
	assert_int_equal(do_mount(&m, NULL), 0);
	mkns(&m, "m.bf16.r0");
	for (uint64_t i = 0; i < 24; i++)
		assert_int_equal(put(&m, "m.bf16.r0", i, MIB), 0);
	wait_in_l2(&m, "m.bf16.r0", 0);
	for (uint64_t i = 0; i < 24 && !saw_l2; i++) {
		assert_int_equal(tier_of(&m, "m.bf16.r0", i, where), 0);
		saw_l2 = !strcmp(where, "l2");
	}
	assert_true(saw_l2);
	for (uint64_t i = 0; i < 24; i++)
		assert_int_equal(check(&m, "m.bf16.r0", i, MIB), 0);
	assert_int_equal(stats_read(&m, &st), 0);
	assert_true(stat_num(&st, false, "promotions") >= 8);
	assert_true(stat_num(&st, true, "reads") >= 1);
	assert_int_equal(stat_num(&st, true, "corrupt"), 0);
	assert_int_equal(kvfs_test_umount(&m), 0);
	kvfs_test_rm_files(l2dir);
}

static void test_warm_restart(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX];
	struct dirent *de;
	int n = 0;
	DIR *d;

	(void)state;
	assert_int_equal(do_mount(&m, "flush_on_exit"), 0);
	mkns(&m, "a.r0");
	mkns(&m, "b.r1");
	for (uint64_t i = 0; i < 20; i++)
		assert_int_equal(put(&m, i % 2 ? "b.r1" : "a.r0", i, 700000), 0);
	assert_int_equal(kvfs_test_umount(&m), 0);

	assert_int_equal(do_mount(&m, NULL), 0);
	d = opendir(kvfs_test_path(&m, p, "a.r0"));
	assert_non_null(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	assert_int_equal(n, 10);
	for (uint64_t i = 0; i < 20; i++)
		assert_int_equal(check(&m, i % 2 ? "b.r1" : "a.r0", i, 700000), 0);
	assert_int_equal(kvfs_test_umount(&m), 0);
	kvfs_test_rm_files(l2dir);
}

/* ------------------------------------ namespace attributes across restarts */

#define NS_CHUNK 65536

/*
 * In a child with uid and gid id (no supplementary groups): open path with
 * flags; with O_CREAT, write NS_CHUNK bytes of seed n and close. Returns 0,
 * the errno that failed, or -1. _exit: the child must not run the parent's
 * atexit safety net (it would unmount the test's mount).
 */
static int as_user(uid_t id, const char *path, int flags, uint64_t n)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd;

		if (setgroups(0, NULL) || setresgid(id, id, id) ||
		    setresuid(id, id, id))
			_exit(100);
		if (flags & O_CREAT)
			_exit(-kvfs_test_write_file(path, NS_CHUNK, n, 0));
		fd = open(path, flags | O_CLOEXEC);
		if (fd < 0)
			_exit(errno);
		close(fd);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static void expect_dir(const struct kvfs_mnt *m, const char *ns, mode_t mode,
		       uid_t uid, gid_t gid)
{
	char p[PATH_MAX];
	struct stat st;

	assert_int_equal(stat(kvfs_test_path(m, p, "%s", ns), &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, mode);
	assert_int_equal(st.st_uid, uid);
	assert_int_equal(st.st_gid, gid);
}

static void expect_xattr(const struct kvfs_mnt *m, const char *ns,
			 const char *name, const char *want)
{
	char p[PATH_MAX], v[64];
	ssize_t r;

	r = getxattr(kvfs_test_path(m, p, "%s", ns), name, v, sizeof(v) - 1);
	assert_true(r > 0);
	v[r] = 0;
	assert_string_equal(v, want);
}

/* The "shuffle" of namespace ns in /.kvfs/stats. */
static long long ns_shuffle(const struct kvfs_mnt *m, const char *ns)
{
	struct stats_text st;
	char pat[160];
	const char *s;

	assert_int_equal(stats_read(m, &st), 0);
	snprintf(pat, sizeof(pat), "\"%s\": {", ns);
	s = strstr(st.buf, pat);
	assert_non_null(s);
	s = strstr(s, "\"shuffle\": ");
	assert_non_null(s);
	return strtoll(s + 11, NULL, 10);
}

/* A chunk shorter than chunk_bytes: close() must fail with EMSGSIZE. */
static void expect_short_rejected(const struct kvfs_mnt *m, const char *ns,
				  uint64_t n)
{
	char p[PATH_MAX], buf[100];
	int fd;

	fd = open(chunk_path(m, p, ns, n), O_CREAT | O_EXCL | O_WRONLY, 0644);
	assert_true(fd >= 0);
	memset(buf, 7, sizeof(buf));
	assert_int_equal(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	assert_int_equal(close(fd), -1);
	assert_int_equal(errno, EMSGSIZE);
	assert_int_equal(access(p, F_OK), -1);
}

/*
 * A warm restart brings namespaces back with mode, owner, chunk_bytes and
 * dtype (and its shuffle), the root with its mode, and an empty namespace
 * too: a private namespace must not come back readable by everyone.
 */
static void test_ns_attrs_survive_restart(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX];

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "skip test_ns_attrs_survive_restart: needs root "
			"(chown, setuid)\n");
		skip();
	}
	assert_int_equal(do_mount(&m, "flush_on_exit,allow_other,shuffle=0"),
			 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "private"), 0700), 0);
	assert_int_equal(chown(p, 1000, 1000), 0);
	assert_int_equal(setxattr(p, KVFS_XATTR_CHUNK_BYTES, "65536", 5, 0), 0);
	assert_int_equal(setxattr(p, KVFS_XATTR_DTYPE, "bf16", 4, 0), 0);
	assert_int_equal(put(&m, "private", 1, NS_CHUNK), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "empty"), 0755), 0);
	assert_int_equal(chmod(p, 0750), 0);
	assert_int_equal(chmod(m.dir, 0751), 0);
	assert_int_equal(ns_shuffle(&m, "private"), 2);
	assert_int_equal(kvfs_test_umount(&m), 0);

	assert_int_equal(do_mount(&m, "allow_other,shuffle=0"), 0);
	expect_dir(&m, "private", 0700, 1000, 1000);
	expect_xattr(&m, "private", KVFS_XATTR_CHUNK_BYTES, "65536");
	expect_xattr(&m, "private", KVFS_XATTR_DTYPE, "bf16");
	assert_int_equal(ns_shuffle(&m, "private"), 2);
	expect_dir(&m, "empty", 0750, 0, 0);
	expect_dir(&m, ".", 0751, getuid(), getgid());
	assert_int_equal(check(&m, "private", 1, NS_CHUNK), 0);
	expect_short_rejected(&m, "private", 2);
	/* others are kept out; the owner still reads and writes */
	assert_int_equal(as_user(65534, chunk_path(&m, p, "private", 1),
				 O_RDONLY, 0), EACCES);
	assert_int_equal(as_user(1000, chunk_path(&m, p, "private", 1),
				 O_RDONLY, 0), 0);
	assert_int_equal(as_user(1000, chunk_path(&m, p, "private", 3),
				 O_CREAT, 3), 0);
	assert_int_equal(check(&m, "private", 3, NS_CHUNK), 0);
	/* rmdir is kept too */
	assert_int_equal(rmdir(kvfs_test_path(&m, p, "empty")), 0);
	assert_int_equal(kvfs_test_umount(&m), 0);

	assert_int_equal(do_mount(&m, "allow_other"), 0);
	assert_int_equal(access(kvfs_test_path(&m, p, "empty"), F_OK), -1);
	assert_int_equal(errno, ENOENT);
	expect_dir(&m, "private", 0700, 1000, 1000);
	assert_int_equal(kvfs_test_umount(&m), 0);
	kvfs_test_rm_files(l2dir);
}

/*
 * A damaged or missing namespaces file fails closed: namespaces that L2
 * brings back are 0700, owned by the daemon's user (root here), whose
 * chunks stay readable by that user only.
 */
static void test_ns_attrs_fail_closed(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX], f[PATH_MAX + 32], buf[4096], *s;
	ssize_t n;
	int fd;

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "skip test_ns_attrs_fail_closed: needs root "
			"(setuid)\n");
		skip();
	}
	assert_int_equal(do_mount(&m, "flush_on_exit,allow_other"), 0);
	mkns(&m, "pub");
	assert_int_equal(put(&m, "pub", 1, NS_CHUNK), 0);
	assert_int_equal(as_user(65534, chunk_path(&m, p, "pub", 1), O_RDONLY,
				 0), 0);
	assert_int_equal(kvfs_test_umount(&m), 0);

	/* one byte of the file changed: the checksum does not verify */
	snprintf(f, sizeof(f), "%s/namespaces", l2dir);
	fd = open(f, O_RDWR);
	assert_true(fd >= 0);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	assert_true(n > 0);
	buf[n] = 0;
	s = strstr(buf, "ns pub 0755 ");
	assert_non_null(s);
	assert_int_equal(pwrite(fd, "7", 1, s - buf + 9), 1);
	close(fd);

	assert_int_equal(do_mount(&m, "allow_other"), 0);
	expect_dir(&m, "pub", 0700, getuid(), getgid());
	assert_int_equal(check(&m, "pub", 1, NS_CHUNK), 0);
	assert_int_equal(as_user(65534, chunk_path(&m, p, "pub", 1), O_RDONLY,
				 0), EACCES);
	/* kept for inspection */
	snprintf(f, sizeof(f), "%s/namespaces.bad", l2dir);
	assert_int_equal(access(f, F_OK), 0);
	/* an operator opens it again; then the file goes missing */
	assert_int_equal(chmod(kvfs_test_path(&m, p, "pub"), 0755), 0);
	assert_int_equal(kvfs_test_umount(&m), 0);
	snprintf(f, sizeof(f), "%s/namespaces", l2dir);
	assert_int_equal(unlink(f), 0);

	assert_int_equal(do_mount(&m, "allow_other"), 0);
	expect_dir(&m, "pub", 0700, getuid(), getgid());
	assert_int_equal(check(&m, "pub", 1, NS_CHUNK), 0);
	assert_int_equal(as_user(65534, chunk_path(&m, p, "pub", 1), O_RDONLY,
				 0), EACCES);
	assert_int_equal(kvfs_test_umount(&m), 0);
	kvfs_test_rm_files(l2dir);
}

/*
 * A damaged record reads as ENOENT: a miss, so the engine recomputes the
 * prefill, exactly as when the chunk was never cached. EIO would make a
 * cache failure look like a storage failure to the engine, and the
 * record is dropped anyway (the next lookup says "absent").
 */
static void test_corrupt_record_is_enoent(void **state)
{
	struct kvfs_mnt m;
	char where[8], p[PATH_MAX];
	int64_t victim = -1;
	struct stats_text st;

	(void)state;
	assert_int_equal(do_mount(&m, NULL), 0);
	mkns(&m, "ns");
	for (uint64_t i = 0; i < 24; i++)
		assert_int_equal(put(&m, "ns", i, MIB), 0);
	wait_in_l2(&m, "ns", 0);
	for (uint64_t i = 0; i < 8 && victim < 0; i++)
		if (tier_of(&m, "ns", i, where) == 0 && !strcmp(where, "l2"))
			victim = (int64_t)i;
	assert_true(victim >= 0);
	assert_true(damage_record((uint64_t)victim) >= 1);
	errno = 0;
	assert_int_equal(open(chunk_path(&m, p, "ns", (uint64_t)victim),
			      O_RDONLY), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(stats_read(&m, &st), 0);
	assert_int_equal(stat_num(&st, true, "corrupt"), 1);
	/* dropped: gone from the namespace */
	assert_int_equal(access(p, F_OK), -1);
	/* the others are fine */
	for (uint64_t i = 0; i < 24; i++)
		if ((int64_t)i != victim)
			assert_int_equal(check(&m, "ns", i, MIB), 0);
	assert_int_equal(kvfs_test_umount(&m), 0);
	kvfs_test_rm_files(l2dir);
}

static void test_sigkill_during_writes(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX];
	struct dirent *de;
	int pfd[2], listed = 0, bad = 0;
	uint8_t done[400] = { 0 };
	uint64_t n;
	pid_t w;
	DIR *d;

	(void)state;
	/* room for everything: no reclaim in this test */
	assert_int_equal(do_mount_sz(&m, "512M", "ingest=all"), 0);
	mkns(&m, "ns");
	assert_int_equal(pipe(pfd), 0);
	w = fork();
	assert_true(w >= 0);
	if (w == 0) {
		close(pfd[0]);
		for (n = 0; n < 400; n++) {
			if (put(&m, "ns", n, 256 * 1024))
				_exit(0);
			if (write(pfd[1], &n, sizeof(n)) != sizeof(n))
				_exit(0);
		}
		_exit(0);
	}
	close(pfd[1]);
	sleep_ms(1500);
	kill(m.pid, SIGKILL);
	waitpid(w, NULL, 0);
	while (read(pfd[0], &n, sizeof(n)) == sizeof(n))
		if (n < 400)
			done[n] = 1;
	close(pfd[0]);
	kvfs_test_umount(&m); /* reaps the killed daemon, unmounts */

	assert_int_equal(do_mount_sz(&m, "512M", NULL), 0);
	d = opendir(kvfs_test_path(&m, p, "ns"));
	if (d) {
		while ((de = readdir(d))) {
			struct kvfs_key k;
			uint64_t i;

			if (de->d_name[0] == '.')
				continue;
			listed++;
			/* names are kvfs_test_key_name(i): find i */
			for (i = 0; i < 400; i++) {
				char name[33];

				kvfs_test_key_name(i, name);
				if (!strcmp(name, de->d_name))
					break;
			}
			assert_true(i < 400);
			assert_int_equal(kvfs_key_parse(de->d_name, 32, &k), 0);
			/* nothing wrong is ever served: every listed chunk
			 * reads back exactly, or is a miss */
			{
				int rc = check(&m, "ns", i, 256 * 1024);

				if (rc != 0 && rc != -ENOENT)
					bad++;
			}
		}
		closedir(d);
	}
	assert_int_equal(bad, 0);
	fprintf(stderr, "# after SIGKILL: %d chunks recovered and verified\n",
		listed);
	/* with ingest=all, chunks written well before the kill are on disk */
	{
		int early = 0, found = 0;

		for (uint64_t i = 0; i < 400; i++) {
			if (!done[i])
				break;
			early++;
		}
		for (uint64_t i = 0; i < (uint64_t)early / 2; i++)
			found += check(&m, "ns", i, 256 * 1024) == 0;
		assert_true(early == 0 || found >= early / 4);
	}
	assert_int_equal(kvfs_test_umount(&m), 0);
	kvfs_test_rm_files(l2dir);
}

/*
 * An unlink is not undone by a crash: with ingest=all every chunk has (or
 * is getting) an L2 copy; unlinked ones, some right after their write
 * (the L2 write still in flight), some after it landed, stay gone when
 * the daemon is killed with SIGKILL right after the unlinks and the same
 * l2_dir is mounted again. The chunks not unlinked come back.
 */
static void test_unlink_survives_sigkill(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX], name[33];
	struct stat st;

	(void)state;
	assert_int_equal(do_mount_sz(&m, "256M", "ingest=all"), 0);
	mkns(&m, "ns");
	for (uint64_t i = 0; i < 40; i++)
		assert_int_equal(put(&m, "ns", i, 256 * 1024), 0);
	/* the background L2 writes of these 40 land (so the odd ones, not
	 * unlinked, must come back) */
	for (int tries = 0;; tries++) {
		struct stats_text sx;

		assert_int_equal(stats_read(&m, &sx), 0);
		if (stat_num(&sx, true, "writes") >= 40)
			break;
		assert_true(tries < 2000);
		sleep_ms(10);
	}
	for (uint64_t i = 40; i < 60; i++) {
		assert_int_equal(put(&m, "ns", i, 256 * 1024), 0);
		kvfs_test_key_name(i, name);
		/* right after the write: its L2 copy is being written */
		assert_int_equal(unlink(kvfs_test_path(&m, p, "ns/%s", name)),
				 0);
	}
	for (uint64_t i = 0; i < 40; i += 2) {
		kvfs_test_key_name(i, name);
		assert_int_equal(unlink(kvfs_test_path(&m, p, "ns/%s", name)),
				 0);
	}
	kill(m.pid, SIGKILL);
	kvfs_test_umount(&m); /* reaps the killed daemon, unmounts */

	assert_int_equal(do_mount_sz(&m, "256M", NULL), 0);
	for (uint64_t i = 0; i < 60; i++) {
		kvfs_test_key_name(i, name);
		if (i >= 40 || i % 2 == 0) {
			assert_int_equal(stat(kvfs_test_path(&m, p, "ns/%s",
							     name), &st), -1);
			assert_int_equal(errno, ENOENT);
		} else {
			assert_int_equal(check(&m, "ns", i, 256 * 1024), 0);
		}
	}
	assert_int_equal(kvfs_test_umount(&m), 0);
	kvfs_test_rm_files(l2dir);
}

static void l1_keeps_serving(const char *opts_dir, bool expect_errors)
{
	struct kvfs_mnt m;
	char opts[PATH_MAX + 256];

	snprintf(opts, sizeof(opts), "l1_size=8M,max_chunk=1M,l2_dir=%s,"
		 "l2_size=96M", opts_dir);
	assert_int_equal(kvfs_test_mount(&m, opts), 0);
	mkns(&m, "ns");
	for (uint64_t i = 0; i < 16; i++)
		assert_int_equal(put(&m, "ns", i, MIB), 0);
	for (uint64_t i = 12; i < 16; i++)
		assert_int_equal(check(&m, "ns", i, MIB), 0);
	/* evicted ones are misses, never wrong bytes */
	for (uint64_t i = 0; i < 12; i++) {
		int rc = check(&m, "ns", i, MIB);

		assert_true(rc == 0 || rc == -ENOENT);
	}
	if (expect_errors) {
		struct stats_text st;

		assert_int_equal(stats_read(&m, &st), 0);
		assert_true(stat_num(&st, true, "errors") >= 1);
	}
	assert_int_equal(kvfs_test_umount(&m), 0);
}

static void test_bad_l2_dirs(void **state)
{
	char dir[PATH_MAX];

	(void)state;
	l1_keeps_serving("/nonexistent/kvfs-l2", true);
	/* l2_size smaller than one chunk: the mount is refused */
	{
		struct kvfs_mnt m;

		assert_int_equal(do_mount_sz(&m, "1M", NULL), -1);
	}
	snprintf(dir, sizeof(dir), "/var/tmp/kvfs-integ-l2ro-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(tmpfs_dir, sizeof(tmpfs_dir), "%s", dir);
	if (mount("tmpfs", dir, "tmpfs", MS_RDONLY, "size=1m") == 0) {
		l1_keeps_serving(dir, true);
		umount2(dir, MNT_DETACH);
	} else {
		fprintf(stderr, "# skip read-only l2_dir: %s\n", strerror(errno));
	}
	/* a full filesystem: writes fail, are counted, nothing wrong served */
	if (mount("tmpfs", dir, "tmpfs", 0, "size=4m") == 0) {
		l1_keeps_serving(dir, true);
		kvfs_test_rm_files(dir);
		umount2(dir, MNT_DETACH);
	} else {
		fprintf(stderr, "# skip full l2_dir: %s\n", strerror(errno));
	}
	rmdir(dir);
	tmpfs_dir[0] = 0;
}

/*
 * l2_dir without l2_size on a filesystem too small for the default (half
 * its free space, at least 256 MiB) to hold 4 chunks of max_chunk=64M:
 * an L2 problem, so the mount comes up serving from L1 alone and
 * /.kvfs/stats shows the error (it used to refuse the mount).
 */
static void test_default_l2_size_too_small(void **state)
{
	char dir[PATH_MAX], opts[PATH_MAX + 256];
	struct stats_text st;
	struct kvfs_mnt m;

	(void)state;
	snprintf(dir, sizeof(dir), "/var/tmp/kvfs-integ-l2small-XXXXXX");
	assert_non_null(mkdtemp(dir));
	if (mount("tmpfs", dir, "tmpfs", 0, "size=16m")) {
		fprintf(stderr, "# skip small l2_dir: %s\n", strerror(errno));
		rmdir(dir);
		return;
	}
	snprintf(tmpfs_dir, sizeof(tmpfs_dir), "%s", dir);
	snprintf(opts, sizeof(opts), "l1_size=72M,max_chunk=64M,l2_dir=%s",
		 dir);
	assert_int_equal(kvfs_test_mount(&m, opts), 0);
	mkns(&m, "ns");
	for (uint64_t i = 0; i < 4; i++)
		assert_int_equal(put(&m, "ns", i, MIB), 0);
	for (uint64_t i = 0; i < 4; i++)
		assert_int_equal(check(&m, "ns", i, MIB), 0);
	assert_int_equal(stats_read(&m, &st), 0);
	assert_true(stat_num(&st, true, "errors") >= 1);
	assert_int_equal(stat_num(&st, true, "capacity"), 0);
	assert_int_equal(kvfs_test_umount(&m), 0);
	/* an explicit l2_size below 4 chunks is still refused clearly */
	snprintf(opts, sizeof(opts), "l1_size=72M,max_chunk=64M,l2_dir=%s,"
		 "l2_size=8M", dir);
	assert_int_equal(kvfs_test_mount(&m, opts), -1);
	kvfs_test_rm_files(dir);
	umount2(dir, MNT_DETACH);
	rmdir(dir);
	tmpfs_dir[0] = 0;
}

static void test_second_daemon_refused(void **state)
{
	struct kvfs_mnt a, b;

	(void)state;
	assert_int_equal(do_mount(&a, NULL), 0);
	assert_int_equal(do_mount(&b, NULL), -1);
	assert_int_equal(kvfs_test_umount(&a), 0);
	/* free again once the first is gone */
	assert_int_equal(do_mount(&b, NULL), 0);
	assert_int_equal(kvfs_test_umount(&b), 0);
	kvfs_test_rm_files(l2dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_evicted_come_back),
		cmocka_unit_test(test_warm_restart),
		cmocka_unit_test(test_ns_attrs_survive_restart),
		cmocka_unit_test(test_ns_attrs_fail_closed),
		cmocka_unit_test(test_corrupt_record_is_enoent),
		cmocka_unit_test(test_sigkill_during_writes),
		cmocka_unit_test(test_unlink_survives_sigkill),
		cmocka_unit_test(test_bad_l2_dirs),
		cmocka_unit_test(test_default_l2_size_too_small),
		cmocka_unit_test(test_second_daemon_refused),
	};

	if (access("/dev/fuse", R_OK | W_OK)) {
		fprintf(stderr, "skip: no /dev/fuse\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
