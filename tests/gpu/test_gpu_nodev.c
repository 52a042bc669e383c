/*
 * test_gpu_nodev.c - `kvfs-mount -o l1=pinned` and `l1=cuda[:N]` where the
 * GPU is not usable fail with a clear message, a non-zero exit and nothing
 * mounted (never a crash). Without a GPU (as on the build machine) every
 * GPU spec must fail with the reason (e.g. "no CUDA driver
 * (cudaErrorInsufficientDriver ...)"); with one, a device number past the
 * last must. Bad specs fail the same way everywhere.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/gpu/gpu_test.h"

static int ndev;
static char why[256];

/* Runs kvfs-mount (daemonizing, as a user would) and expects failure with
 * all of want[] in its output and no mount left. */
static void expect_refused(const char *spec, const char *const *want)
{
	char dir[PATH_MAX], opt[128], out[4096];
	const char *tmp = getenv("TMPDIR");
	const char *argv[6];
	int st;

	snprintf(dir, sizeof(dir), "%s/kvfs-nodev.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(dir));
	snprintf(opt, sizeof(opt), "l1=%s,l1_size=16M", spec);
	argv[0] = kvfs_test_bin();
	argv[1] = "-o";
	argv[2] = opt;
	argv[3] = dir;
	argv[4] = NULL;
	st = kvfs_test_run(argv, out, sizeof(out));
	printf("kvfs-mount -o %s: exit %d: %s", opt, st, out);
	if (kvfs_test_is_mounted(dir)) {
		const char *um[] = { "fusermount3", "-u", dir, NULL };

		kvfs_test_run(um, out, sizeof(out));
		rmdir(dir);
		fail_msg("l1=%s mounted", spec);
	}
	rmdir(dir);
	assert_true(st > 0 && st < 128); /* an exit, not a signal */
	for (; *want; want++) {
		if (!strstr(out, *want))
			fail_msg("l1=%s: '%s' missing from the message", spec,
				 *want);
	}
}

static void test_no_gpu_refused(void **state)
{
	/* Every reason names CUDA: "no CUDA driver (...)", "no CUDA runtime
	 * (...)", "built without CUDA" (CUDA=0), "no CUDA device visible". */
	const char *pinned[] = { "l1=pinned", "CUDA", NULL };
	const char *cuda[] = { "l1=cuda", "CUDA", NULL };

	(void)state;
	if (ndev > 0) {
		print_message("skipped: a GPU is usable here\n");
		skip();
	}
	expect_refused("pinned", pinned);
	expect_refused("cuda", cuda);
	expect_refused("cuda:1", cuda);
}

static void test_no_such_device(void **state)
{
	char spec[32];
	const char *want[] = { "does not exist", NULL };

	(void)state;
	if (ndev <= 0) {
		print_message("skipped: no GPU usable here\n");
		skip();
	}
	snprintf(spec, sizeof(spec), "cuda:%d", ndev);
	expect_refused(spec, want);
}

static void test_bad_spec(void **state)
{
	const char *want[] = { "gpu", NULL };
	const char *want2[] = { "cuda:x", NULL };

	(void)state;
	expect_refused("gpu", want);
	expect_refused("cuda:x", want2);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_gpu_refused),
		cmocka_unit_test(test_no_such_device),
		cmocka_unit_test(test_bad_spec),
	};

	(void)argc;
	gt_asan_reexec(argv);
	/* The real runtime only: a stand-in would make every spec work. */
	unsetenv("KVFS_CUDART");
	if (gt_have_mount_bin() < 0)
		return 77;
	ndev = gt_probe(why, sizeof(why));
	printf("CUDA here: %s\n", ndev > 0 ? "usable" : why);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
