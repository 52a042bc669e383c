/*
 * test_paths_crash.c - after a crash, a file of a path namespace is its
 * last acknowledged version or absent, never an older one (issue 27,
 * item 8). Each round rewrites every file of a path namespace, half with
 * open(O_TRUNC) + write + close and half with a temporary + rename (as
 * os.replace), SIGKILLs the daemon right after the last rewrite returned,
 * remounts on the same l2_dir and reads every file: the bytes of the
 * version acknowledged last, or ENOENT; an older version fails the test.
 * Then the same with L3 (a real redis-server, l3_ingest=all) beside L2.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/common/kvfs_test.h"
#include "tests/common/redis_test.h"

#define NFILES 24
#define ROUNDS 4

struct crash_tally {
	int current, absent, older, wrong;
};

/* The bytes of version v of file i, and their length. */
static uint64_t seed_of(int i, int v)
{
	return (uint64_t)i * 1000 + (uint64_t)v;
}

static size_t len_of(int i, int v)
{
	return (size_t)(32 << 10) + (size_t)((i * 7 + v * 13) % 16) * 4096;
}

/* Writes version v of file i, len bytes: O_TRUNC in place (odd i) or a
 * temporary renamed onto it. 0 once every call returned success
 * (acknowledged). */
static int write_version(const struct kvfs_mnt *m, int i, int v, size_t len)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	char *buf = malloc(len);
	int fd, rc = -1;

	kvfs_test_fill(buf, len, seed_of(i, v), 0);
	kvfs_test_path(m, path, "ns/d%d/f%d", i % 3, i);
	kvfs_test_path(m, tmp, "ns/d%d/.f%d.tmp", i % 3, i);
	fd = i % 2 ? open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)
		   : open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd >= 0) {
		rc = kvfs_test_write_all(fd, buf, len);
		rc |= close(fd);
		if (!(i % 2))
			rc |= rename(tmp, path);
	}
	free(buf);
	return rc;
}

static int rewrite(const struct kvfs_mnt *m, int i, int v)
{
	return write_version(m, i, v, len_of(i, v));
}

/* Which version file i holds: -1 absent, 0 none of want's and older's. */
static int version_of(const struct kvfs_mnt *m, int i, int want)
{
	char path[PATH_MAX];
	size_t max = (32 << 10) + 16 * 4096, len = 0;
	char *got = malloc(max + 1), *exp = malloc(max);
	int fd, v = -1;
	ssize_t n;

	kvfs_test_path(m, path, "ns/d%d/f%d", i % 3, i);
	fd = open(path, O_RDONLY);
	if (fd >= 0) {
		while ((n = read(fd, got + len, max + 1 - len)) > 0)
			len += (size_t)n;
		close(fd);
		for (v = want; v >= 1; v--) {
			kvfs_test_fill(exp, len_of(i, v), seed_of(i, v), 0);
			if (len == len_of(i, v) && !memcmp(got, exp, len))
				break;
		}
	}
	free(got);
	free(exp);
	return v;
}

static void crash(struct kvfs_mnt *m)
{
	kill(m->pid, SIGKILL);
	kvfs_test_umount(m); /* the mount is gone; reports the kill */
}

/*
 * ROUNDS rounds of: rewrite every file, SIGKILL, remount, check. acked[i]
 * is the version file i was last acknowledged at (0: none); a file found
 * absent starts over. Returns the tally of every round's checks.
 */
static struct crash_tally crash_rounds(const char *opts)
{
	struct crash_tally t = { 0 };
	int acked[NFILES] = { 0 }, next = 1;
	struct kvfs_mnt m;
	char p[PATH_MAX];

	assert_int_equal(kvfs_test_mount(&m, opts), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "ns"), 0755), 0);
	for (int d = 0; d < 3; d++)
		assert_int_equal(mkdir(kvfs_test_path(&m, p, "ns/d%d", d),
				       0755), 0);
	/* the first versions reach L2 (and L3) before the rounds begin */
	for (int i = 0; i < NFILES; i++) {
		assert_int_equal(rewrite(&m, i, next), 0);
		acked[i] = next;
	}
	kvfs_test_sleep_ms(1500);
	for (int r = 0; r < ROUNDS; r++) {
		next++;
		for (int i = 0; i < NFILES; i++)
			if (!rewrite(&m, i, next))
				acked[i] = next;
		crash(&m);
		assert_int_equal(kvfs_test_mount(&m, opts), 0);
		for (int i = 0; i < NFILES; i++) {
			int v = version_of(&m, i, acked[i]);

			if (v == acked[i]) {
				t.current++;
			} else if (v < 0) {
				t.absent++;
				acked[i] = 0;
			} else if (v > 0) {
				fprintf(stderr, "  round %d: f%d (%s) is "
					"version %d, acknowledged %d\n", r, i,
					i % 2 ? "O_TRUNC" : "rename", v,
					acked[i]);
				t.older++;
			} else {
				t.wrong++;
			}
		}
		/* directories lost with their files come back for the next
		 * round */
		mkdir(kvfs_test_path(&m, p, "ns"), 0755);
		for (int d = 0; d < 3; d++)
			mkdir(kvfs_test_path(&m, p, "ns/d%d", d), 0755);
		kvfs_test_sleep_ms(300 + 300 * r);
	}
	assert_int_equal(kvfs_test_umount(&m), 0);
	fprintf(stderr, "  %d rounds: %d checks current, %d absent, %d older "
		"versions, %d wrong\n", ROUNDS, t.current, t.absent, t.older,
		t.wrong);
	return t;
}

static char l2dir[PATH_MAX];

static void fresh_l2(void)
{
	char cmd[PATH_MAX + 16];

	if (l2dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", l2dir);
		assert_int_equal(system(cmd), 0);
	}
	snprintf(l2dir, sizeof(l2dir), "/var/tmp/kvfs-pcrash.XXXXXX");
	assert_non_null(mkdtemp(l2dir));
}

#define BASE_OPTS "names=paths,l1_size=64M,max_chunk=1M,l2_size=256M," \
		  "ingest=all,tmp_timeout=2"

static void test_crash_l2(void **state)
{
	char opts[PATH_MAX + 256];
	struct crash_tally t;

	(void)state;
	fresh_l2();
	snprintf(opts, sizeof(opts), BASE_OPTS ",l2_dir=%s", l2dir);
	t = crash_rounds(opts);
	assert_int_equal(t.older, 0);
	assert_int_equal(t.wrong, 0);
}

static void test_crash_l2_l3(void **state)
{
	char opts[PATH_MAX + 512], url[128];
	struct rt_server srv;
	struct crash_tally t;
	const char *why = rt_skip_reason();

	(void)state;
	if (why) {
		fprintf(stderr, "  skipped: %s\n", why);
		skip();
	}
	assert_int_equal(rt_start(&srv, false, NULL), 0);
	fresh_l2();
	snprintf(opts, sizeof(opts), BASE_OPTS ",l2_dir=%s,l3=%s,"
		 "l3_ingest=all,l3_timeout_ms=1000", l2dir,
		 rt_url(&srv, url, sizeof(url)));
	t = crash_rounds(opts);
	rt_stop(&srv, true);
	assert_int_equal(t.older, 0);
	assert_int_equal(t.wrong, 0);
}

/* What file i holds: 1 version 1's bytes, 2 big version 2's, -1 absent,
 * 0 anything else. */
static int which(const struct kvfs_mnt *m, int i, size_t big)
{
	char path[PATH_MAX];
	char *got = malloc(big + 1), *exp = malloc(big);
	size_t len = 0;
	ssize_t n;
	int fd, v = 0;

	kvfs_test_path(m, path, "ns/d%d/f%d", i % 3, i);
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		v = -1;
		goto out;
	}
	while ((n = read(fd, got + len, big + 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	kvfs_test_fill(exp, len_of(i, 1), seed_of(i, 1), 0);
	if (len == len_of(i, 1) && !memcmp(got, exp, len))
		v = 1;
	kvfs_test_fill(exp, big, seed_of(i, 2), 0);
	if (len == big && !memcmp(got, exp, len))
		v = 2;
out:
	free(got);
	free(exp);
	return v;
}

/*
 * A version lost in a crash never comes back older through L3. Every
 * version of a path has the path's key, so L3 holds whichever version was
 * stored there last: here version 1 (stored), while version 2 (by rename,
 * and by O_TRUNC) is acknowledged, kept in L1 only (ingest=evicted: not in
 * L2) and cannot reach L3 (the server stopped, the value -- 24 MiB --
 * larger than loopback's socket buffers) before the daemon is killed.
 * After the remount the name's key is not in L2: the file is absent (or version 2), never
 * version 1 from L3 -- after the crash, and after a clean restart again.
 */
static void test_lost_version_not_from_l3(void **state)
{
	char opts[PATH_MAX + 512], url[128], p[PATH_MAX];
	const size_t big = 24u << 20;
	struct rt_server srv;
	struct kvfs_mnt m;
	const char *why = rt_skip_reason();

	(void)state;
	if (why) {
		fprintf(stderr, "  skipped: %s\n", why);
		skip();
	}
	assert_int_equal(rt_start(&srv, false, NULL), 0);
	fresh_l2();
	snprintf(opts, sizeof(opts), "names=paths,l1_size=256M,max_chunk=32M,"
		 "ingest=evicted,l2_size=512M,l2_dir=%s,l3=%s,l3_ingest=all,"
		 "l3_timeout_ms=200,l3_write_timeout_ms=200", l2dir,
		 rt_url(&srv, url, sizeof(url)));
	assert_int_equal(kvfs_test_mount(&m, opts), 0);
	kvfs_test_path(&m, p, "ns");
	assert_int_equal(mkdir(p, 0755), 0);
	for (int d = 0; d < 2; d++) {
		kvfs_test_path(&m, p, "ns/d%d", d);
		assert_int_equal(mkdir(p, 0755), 0);
	}
	assert_int_equal(rewrite(&m, 0, 1), 0); /* by rename */
	assert_int_equal(rewrite(&m, 1, 1), 0); /* O_TRUNC */
	/* both in Redis: two values and the directories' marks */
	for (int i = 0; kvfs_test_stat(&m, "l3", "puts") < 4 ||
			kvfs_test_stat(&m, "l3", "queued_bytes") > 0; i++) {
		assert_true(i < 500);
		usleep(10000);
	}
	rt_pause(&srv);
	assert_int_equal(write_version(&m, 0, 2, big), 0);
	assert_int_equal(write_version(&m, 1, 2, big), 0);
	usleep(1000 * 1000); /* the names' journal is synced */
	crash(&m);
	rt_resume(&srv);
	for (int round = 0; round < 2; round++) {
		assert_int_equal(kvfs_test_mount(&m, opts), 0);
		for (int i = 0; i < 2; i++) {
			int v = which(&m, i, big);

			fprintf(stderr, "  f%d after the %s: %s\n", i,
				round ? "clean restart" : "crash",
				v == -1 ? "absent" : v == 2 ? "version 2"
				: v == 1 ? "version 1 (older)" : "other bytes");
			assert_true(v == -1 || v == 2);
		}
		assert_int_equal(kvfs_test_umount(&m), 0);
	}
	rt_stop(&srv, true);
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	if (l2dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", l2dir);
		if (system(cmd))
			return -1;
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crash_l2),
		cmocka_unit_test(test_crash_l2_l3),
		cmocka_unit_test(test_lost_version_not_from_l3),
	};

	return cmocka_run_group_tests(tests, NULL, teardown);
}
