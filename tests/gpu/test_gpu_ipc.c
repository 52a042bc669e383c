/*
 * test_gpu_ipc.c - on a real GPU: kvfs mounted with l1=cuda and l1=pinned,
 * an engine in a second process takes handles on chunks written through
 * the mount, opens them on the device (CUDA IPC, or cudaMemcpyAsync from
 * the mmap'd chunk), compares the device bytes with what was written and
 * copies them into its own device buffer. Skips (77) when no CUDA device
 * is visible; test_gpu_sim runs the same scenario on a stand-in runtime.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tests/gpu/gpu_test.h"

static void test_cuda_ipc(void **state)
{
	(void)state;
	assert_int_equal(gt_scenario("cuda"), 0);
}

static void test_pinned_mmap(void **state)
{
	(void)state;
	assert_int_equal(gt_scenario("pinned"), 0);
}

/* Export buffers reused for their owner only, on the real driver: the
 * same handle opened once, the next chunk's bytes through it. */
static void test_reuse(void **state)
{
	(void)state;
	assert_int_equal(gt_reuse("cuda"), 0);
	assert_int_equal(gt_reuse("pinned"), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cuda_ipc),
		cmocka_unit_test(test_pinned_mmap),
		cmocka_unit_test(test_reuse),
	};
	char why[256];

	(void)argc;
	gt_asan_reexec(argv);
	if (gt_probe(why, sizeof(why)) <= 0) {
		printf("skipped: no CUDA device visible: %s\n", why);
		return 77;
	}
	if (gt_have_mount_bin() < 0)
		return 77;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
