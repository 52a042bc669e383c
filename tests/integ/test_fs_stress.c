/*
 * test_fs_stress.c - threads racing on a small set of keys on a mount with
 * a tiny L1 (constant eviction): create/write/close, write-then-rename,
 * read and verify, unlink, readdir, xattrs and stat, while the kernel is
 * told to drop its dentries (forget). Every byte read must be one that was
 * written for that key, and the daemon (under ASan in make test) must exit
 * cleanly. Then the same with a small L2 behind L1, in both ingestion
 * modes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/common/kvfs_test.h"

/* paths are built from a short mount point: truncation cannot happen */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define NKEYS 40
#define NTHREADS 6
#define MAXLEN 60000

struct ctx {
	char dir[PATH_MAX];
	int stop; /* atomic */
	long bad, reads, writes;
};

struct th {
	struct ctx *c;
	unsigned seed;
	int id;
};

static void *worker(void *arg)
{
	struct th *t = arg;
	struct ctx *c = t->c;
	char p[PATH_MAX], tmp[PATH_MAX], key[33];
	uint8_t *buf = malloc(MAXLEN);

	snprintf(tmp, sizeof(tmp), "%s/.tmp%d", c->dir, t->id);
	while (!__atomic_load_n(&c->stop, __ATOMIC_RELAXED)) {
		int k = (int)(rand_r(&t->seed) % NKEYS);
		int op = (int)(rand_r(&t->seed) % 7);
		size_t n = 1000 + rand_r(&t->seed) % (MAXLEN - 1000);
		int fd;

		kvfs_test_key_name((uint64_t)k, key);
		snprintf(p, sizeof(p), "%s/%s", c->dir, key);
		switch (op) {
		case 0:
		case 1: /* every version of key k holds fill(k) */
			if (kvfs_test_write_file(p, n, (uint64_t)k, 16384) == 0)
				__atomic_add_fetch(&c->writes, 1,
						   __ATOMIC_RELAXED);
			break;
		case 2:
		case 3:
			fd = open(p, O_RDONLY);
			if (fd >= 0) {
				ssize_t r = read(fd, buf, MAXLEN);

				if (r < 0 || kvfs_test_check(buf, (size_t)r,
							     (uint64_t)k, 0))
					__atomic_add_fetch(&c->bad, 1,
							   __ATOMIC_RELAXED);
				__atomic_add_fetch(&c->reads, 1,
						   __ATOMIC_RELAXED);
				close(fd);
			} else if (errno != ENOENT) {
				__atomic_add_fetch(&c->bad, 1, __ATOMIC_RELAXED);
			}
			break;
		case 4:
			unlink(p);
			break;
		case 5: {
			DIR *d = opendir(c->dir);
			struct dirent *de;

			while (d && (de = readdir(d))) {
				if (de->d_name[0] != '.' &&
				    strlen(de->d_name) != 32)
					__atomic_add_fetch(&c->bad, 1,
							   __ATOMIC_RELAXED);
			}
			if (d)
				closedir(d);
			break;
		}
		default: {
			char v[64];
			struct stat st;

			getxattr(p, "user.kvfs.hits", v, sizeof(v));
			stat(p, &st);
			unlink(tmp);
			if (kvfs_test_write_file(tmp, n, (uint64_t)k, 0) == 0)
				rename(tmp, p); /* EEXIST when k exists */
			break;
		}
		}
	}
	free(buf);
	return NULL;
}

/* The number after "key": in the l2 section of .kvfs/stats. */
static unsigned long long l2_stat(const struct kvfs_mnt *m, const char *key)
{
	char p[PATH_MAX], buf[16384], want[64];
	const char *l2, *v;
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s/.kvfs/stats", m->dir);
	fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
	l2 = strstr(buf, "\"l2\": {");
	assert_non_null(l2);
	snprintf(want, sizeof(want), "\"%s\": ", key);
	v = strstr(l2, want);
	assert_non_null(v);
	return strtoull(v + strlen(want), NULL, 10);
}

static void stress(const char *opts)
{
	struct kvfs_mnt m;
	struct ctx c;
	struct th t[NTHREADS];
	pthread_t tid[NTHREADS];
	int fd;

	assert_int_equal(kvfs_test_mount(&m, opts), 0);
	memset(&c, 0, sizeof(c));
	snprintf(c.dir, sizeof(c.dir), "%s/s", m.dir);
	assert_int_equal(mkdir(c.dir, 0755), 0);
	for (int i = 0; i < NTHREADS; i++) {
		t[i] = (struct th){ &c, (unsigned)(i * 7919 + 1), i };
		assert_int_equal(pthread_create(&tid[i], NULL, worker, &t[i]),
				 0);
	}
	/* let the kernel forget inodes meanwhile (root only) */
	for (int i = 0; i < 8; i++) {
		usleep(500 * 1000);
		fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
		if (fd >= 0) {
			if (write(fd, "2", 1) < 0) {
				/* not allowed: fine */
			}
			close(fd);
		}
	}
	__atomic_store_n(&c.stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(tid[i], NULL);
	fprintf(stderr, "# %ld writes, %ld reads verified\n", c.writes,
		c.reads);
	assert_int_equal(c.bad, 0);
	assert_true(c.writes > 20);
	assert_true(c.reads > 20);
	if (strstr(opts, "l2_dir=")) {
		unsigned long long rd = l2_stat(&m, "reads"),
				   rc = l2_stat(&m, "reclaims"),
				   bad = l2_stat(&m, "corrupt");

		fprintf(stderr, "# L2: %llu reads, %llu reclaims, %llu "
			"corrupt\n", rd, rc, bad);
		/* the L2 was really in play, and nothing read from it
		 * failed its checks */
		assert_true(rd > 0);
		assert_true(rc > 0);
		assert_int_equal(bad, 0);
	}
	assert_int_equal(kvfs_test_umount(&m), 0);
}

static void test_stress(void **state)
{
	stress("l1_size=1M,max_chunk=128K");
}

/*
 * The same with an L2 small enough to reclaim all the time, in both
 * ingestion modes: promotions, demotions, background writes, reclaim
 * moves and unlinks (which cancel, wait for and erase L2 records) race
 * with the readers, who must still see only bytes written for their key.
 */
static void stress_l2(const char *ingest)
{
	char dir[] = "/var/tmp/kvfs-stress-l2.XXXXXX", opts[PATH_MAX + 128];
	char cmd[PATH_MAX + 32];

	assert_non_null(mkdtemp(dir));
	snprintf(opts, sizeof(opts), "l1_size=1M,max_chunk=128K,l2_dir=%s,"
		 "l2_size=2M,ingest=%s", dir, ingest);
	stress(opts);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_stress_l2_evicted(void **state)
{
	stress_l2("evicted");
}

static void test_stress_l2_all(void **state)
{
	stress_l2("all");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stress),
		cmocka_unit_test(test_stress_l2_evicted),
		cmocka_unit_test(test_stress_l2_all),
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
