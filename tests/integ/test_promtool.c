/*
 * test_promtool.c - `promtool check metrics` (Debian's prometheus package)
 * on the real /.kvfs/metrics of a real mount with L2, L3 (a real
 * redis-server) and KV events on, after real traffic: no error and no
 * lint warning. promtool is not installed by `make deps` (the package is
 * ~96 MB with the server): `make deps-promtool` adds it; without it this
 * program exits 77 and says so (test_metrics.c checks the format rules it
 * can on its own).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "kvfs.h"
#include "tests/common/kvfs_test.h"
#include "tests/common/redis_test.h"

#define CHUNK 4096
#define N 40

static struct rt_server redis;
static bool with_l3;

static void test_promtool(void **state)
{
	struct kvfs_mnt m;
	char tmp[] = "/tmp/kvfs-promtool.XXXXXX", opts[PATH_MAX * 2];
	char p[PATH_MAX], name[KVFS_KEY_HEX_LEN + 1], cmd[PATH_MAX * 2];
	char out[16384];
	struct kvfs_key k[N];
	struct kvfs_result res;
	char *text;
	int fd, n;

	(void)state;
	assert_non_null(mkdtemp(tmp));
	n = snprintf(opts, sizeof(opts), "l1_size=64K,l2_dir=%s/l2,"
		     "events=ipc://%s/pub.sock", tmp, tmp);
	if (with_l3)
		snprintf(opts + n, sizeof(opts) - (size_t)n,
			 ",l3=redis://127.0.0.1:%d,l3_timeout_ms=2000",
			 redis.port);
	snprintf(p, sizeof(p), "%s/l2", tmp);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(kvfs_test_mount(&m, opts), 0);
	assert_int_equal(mkdir(kvfs_test_path(&m, p, "model \"a\"\\b"), 0755),
			 0); /* a label value that needs escapes */
	for (int i = 0; i < N; i++) {
		uint32_t tok[2] = { (uint32_t)i, 6 };

		assert_int_equal(kvfs_key_chunk(i ? &k[i - 1] : NULL, 0, NULL,
						0, tok, 2, &k[i]), 0);
		kvfs_key_hex(&k[i], name);
		assert_int_equal(kvfs_test_write_file(kvfs_test_path(&m, p,
			"model \"a\"\\b/%s", name), CHUNK, (uint64_t)i, 0), 0);
	}
	for (int i = 0; i < N; i++) {
		kvfs_key_hex(&k[i], name);
		assert_int_equal(kvfs_test_read_check(kvfs_test_path(&m, p,
			"model \"a\"\\b/%s", name), CHUNK, (uint64_t)i), 0);
	}
	fd = kvfs_ns_open(m.dir, "model \"a\"\\b", 0, 0);
	assert_true(fd >= 0);
	assert_true(kvfs_lookup(fd, k, 8, 0, KVFS_LOOKUP_PIN, 0, &res) > 0);
	assert_int_equal(kvfs_release(fd, &res), 0);
	close(fd);

	text = kvfs_test_slurp(kvfs_test_path(&m, p, ".kvfs/metrics"), NULL);
	assert_non_null(text);
	assert_true(kvfs_test_metric(text,
		"kvfs_tier_reads_total{tier=\"l2\"}") > 0);
	assert_true(kvfs_test_metric(text, "kvfs_events_published_total") > 0);
	if (with_l3)
		assert_int_equal(kvfs_test_metric(text, "kvfs_l3_nodes"), 1);
	assert_non_null(strstr(text,
		"{namespace=\"model \\\"a\\\"\\\\b\"}"));
	{ /* kvfs(7) describes every family, L3's and the events' too */
		char *undoc = kvfs_test_undocumented(text);

		if (undoc)
			fprintf(stderr, "not in man/kvfs.7: %s\n", undoc);
		assert_null(undoc);
	}
	free(text);
	/* promtool reads the file from stdin; its findings go to out */
	snprintf(cmd, sizeof(cmd), "cat %s/.kvfs/metrics > %s/metrics.txt",
		 m.dir, tmp);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s/metrics.txt",
		 tmp);
	{
		const char *argv[] = { "sh", "-c", cmd, NULL };
		int rc = kvfs_test_run(argv, out, sizeof(out));

		printf("promtool check metrics (L2, events%s): exit %d, "
		       "output: \"%s\"\n", with_l3 ? ", L3" : "", rc, out);
		assert_int_equal(rc, 0);
		assert_string_equal(out, ""); /* not even a lint warning */
	}
	assert_int_equal(kvfs_test_umount(&m), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_promtool),
	};
	const char *argv[] = { "promtool", "--version", NULL };
	const char *why;
	char out[4096];
	int rc;

	if (geteuid() != 0) {
		fprintf(stderr, "test_promtool: needs root (FUSE mounts)\n");
		return 77;
	}
	if (kvfs_test_run(argv, out, sizeof(out)) != 0) {
		fprintf(stderr, "test_promtool: promtool is not installed "
			"(Debian's prometheus package, ~96 MB: `make "
			"deps-promtool`); skipped\n");
		return 77;
	}
	why = rt_skip_reason();
	if (why)
		fprintf(stderr, "test_promtool: %s: checking without L3\n", why);
	else if (rt_start(&redis, false, NULL) == 0)
		with_l3 = true;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	if (with_l3)
		rt_stop(&redis, false);
	return rc;
}
