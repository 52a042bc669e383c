/*
 * test_gpu_sim.c - the GPU scenario of test_gpu_ipc on every machine: the
 * daemon and the engine load tests/gpu/fake's libfakecudart.so instead of
 * libcudart (KVFS_CUDART), whose "device memory" is shared memory that a
 * second process can map through an IPC handle. This runs the cuda
 * backend's bounce buffers behind FUSE reads and writes, the per-handle
 * export buffers, the handle ioctl and kvfs_cuda_open across processes,
 * and checks a handle reaches its own chunk's buffer and nothing more.
 * It cannot say anything about real DMA or the real driver: that is
 * test_gpu_ipc's job on a GPU.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpu/gpu_i.h"
#include "tests/gpu/gpu_test.h"

static void test_sim_cuda(void **state)
{
	(void)state;
	assert_int_equal(gt_scenario("cuda"), 0);
}

static void test_sim_pinned(void **state)
{
	(void)state;
	assert_int_equal(gt_scenario("pinned"), 0);
}

/* Export buffers reused for their owner only (gpu/gpu.h). */
static void test_sim_reuse_cuda(void **state)
{
	(void)state;
	assert_int_equal(gt_reuse("cuda"), 0);
}

static void test_sim_reuse_pinned(void **state)
{
	(void)state;
	assert_int_equal(gt_reuse("pinned"), 0);
}

/* No l1= given: pinned where a CUDA runtime sees a GPU (here the stand-in
 * one), and .kvfs/stats says which backend L1 became. */
static void test_sim_default_pinned(void **state)
{
	struct kvfs_mnt m;
	char p[PATH_MAX], buf[8192];
	ssize_t n;
	int fd;

	(void)state;
	assert_int_equal(kvfs_test_mount(&m, "l1_size=16M"), 0);
	fd = open(kvfs_test_path(&m, p, ".kvfs/stats"), O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = 0;
	assert_non_null(strstr(buf, "\"backend\": \"pinned\""));
	assert_int_equal(kvfs_test_umount(&m), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sim_cuda),
		cmocka_unit_test(test_sim_pinned),
		cmocka_unit_test(test_sim_default_pinned),
		cmocka_unit_test(test_sim_reuse_cuda),
		cmocka_unit_test(test_sim_reuse_pinned),
	};
	char fake[PATH_MAX], why[256];

	if (gt_fake_path(fake, sizeof(fake)) != 0) {
		printf("skipped: no stand-in CUDA runtime at %s (make tests "
		       "builds it)\n",
		       fake);
		return 77;
	}
	if (gt_have_mount_bin() < 0)
		return 77;
	/* A CUDA=0 build (the daemon's too) has no pinned/cuda backends. */
	if (!gpu_cuda_backend("cuda", why, sizeof(why))) {
		printf("skipped: %s\n", why);
		return 77;
	}
	/* The daemon started by the scenario inherits both. */
	setenv("KVFS_CUDART", fake, 1);
	unsetenv("FAKECUDA_DEVICES");
	if (gt_probe(why, sizeof(why)) != 1) {
		fprintf(stderr, "stand-in runtime %s unusable: %s\n", fake,
			why);
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
