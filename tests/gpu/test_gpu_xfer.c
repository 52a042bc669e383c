/*
 * test_gpu_xfer.c - batched GETs straight into an engine's CUDA buffer
 * (KVFS_IOC_XFER_REGISTER + KVFS_XFER_DEVICE, kvfs_xfer_register /
 * kvfs_mget_device) on l1=pinned (host-to-device copies from the
 * page-locked arena) and l1=cuda (device to device), and the refusals:
 * EOPNOTSUPP on l1=host, ENODEV with no buffer registered (or after
 * unregistering), EFAULT for an entry outside the buffer, EIO for a handle
 * that is not a live buffer.
 *
 * Runs on the stand-in runtime (tests/gpu/fake, KVFS_CUDART) like
 * test_gpu_sim: the engine's "device memory" is shared memory the daemon
 * maps through the IPC handle, and copies check each pointer is on the side
 * its kind says. With KVFS_GPU_REAL=1 it uses the real libcudart and GPU
 * instead (skipped when there is none).
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

#define POOL (24u * GT_MIB)
#define SLOT (2u * GT_MIB + GT_MIB / 2) /* room per chunk in the pool */
#define NCH 6

/* The engine: a device KV pool, registered, filled by batched GETs of the
 * chunks (seed base + i) at scattered offsets, a byte range of one, then
 * checked on the device. Runs in a child (fresh CUDA state). */
static int engine(const struct kvfs_mnt *m, const char *ns, uint64_t base)
{
	struct gpu_rt rt;
	struct gpu_rt_ipc ipc;
	struct kvfs_io io[NCH + 2];
	struct kvfs_key keys[NCH];
	char err[256], *host;
	void *pool;
	long n;
	int fd, cr, rc = 0;

	if (gpu_rt_load(&rt, err, sizeof(err)) < 0 ||
	    gpu_rt_open_device(&rt, 0, err, sizeof(err)) < 0)
		return gt_fail("engine: %s", err);
	fd = kvfs_ns_open(m->dir, ns, 0, 0);
	if (fd < 0)
		return gt_fail("open ns: %s", strerror(-fd));
	cr = rt.Malloc(&pool, POOL);
	if (cr == GPU_RT_SUCCESS)
		cr = rt.Memset(pool, 0xEE, POOL);
	if (cr == GPU_RT_SUCCESS)
		cr = rt.IpcGetMemHandle(&ipc, pool);
	if (cr != GPU_RT_SUCCESS)
		return gt_fail("engine: cudaMalloc/IpcGetMemHandle: %d", cr);

	memset(io, 0, sizeof(io));
	for (int i = 0; i < NCH; i++) {
		char name[33];

		kvfs_test_key_name(3000 + (uint64_t)i, name);
		kvfs_key_parse(name, 32, &keys[i]);
		io[i].key = keys[i];
		io[i].buf = (void *)(uintptr_t)((uint64_t)i * SLOT + 512);
		io[i].len = SLOT - 512;
	}
	/* not registered yet */
	n = kvfs_mget_device(fd, io, NCH);
	if (n != -ENODEV)
		return gt_fail("mget_device before register: %ld", n);
	/* a handle that is not a live buffer */
	{
		uint8_t junk[64];

		memset(junk, 0x5A, sizeof(junk));
		rc = kvfs_xfer_register(fd, junk, POOL, 0);
		if (rc != -EIO)
			return gt_fail("register junk: %d", rc);
	}
	rc = kvfs_xfer_register(fd, &ipc, POOL, 0);
	if (rc < 0)
		return gt_fail("kvfs_xfer_register: %s", strerror(-rc));
	/* entry NCH: a slice of chunk 0 (bytes 4096..4096+8192); entry
	 * NCH+1 past the end of the pool */
	io[NCH].key = keys[0];
	io[NCH].buf = (void *)(uintptr_t)(POOL - 3 * GT_MIB);
	io[NCH].len = GT_MIB;
	io[NCH].offset = 4096;
	io[NCH].length = 8192;
	io[NCH + 1].key = keys[1];
	io[NCH + 1].buf = (void *)(uintptr_t)(POOL - GT_MIB);
	io[NCH + 1].len = 2 * GT_MIB;
	n = kvfs_mget_device(fd, io, NCH + 2);
	if (n != NCH + 1 || io[NCH + 1].result != -EFAULT)
		return gt_fail("mget_device: %ld, last %lld", n,
			       (long long)io[NCH + 1].result);
	host = malloc(POOL);
	if (!host)
		return gt_fail("out of memory");
	cr = rt.Memcpy(host, pool, POOL, GPU_RT_D2H);
	if (cr != GPU_RT_SUCCESS)
		return gt_fail("D2H: %d", cr);
	for (int i = 0; i < NCH; i++) {
		size_t len = gt_size((size_t)i);
		size_t off = (size_t)i * SLOT + 512;

		if (io[i].result != (int64_t)len)
			return gt_fail("entry %d: %lld, want %zu", i,
				       (long long)io[i].result, len);
		if (kvfs_test_check(host + off, len, base + (uint64_t)i, 0))
			return gt_fail("entry %d: device bytes differ", i);
		if ((unsigned char)host[off - 1] != 0xEE)
			return gt_fail("entry %d: byte before written", i);
	}
	if (io[NCH].result != 8192 ||
	    kvfs_test_check(host + POOL - 3 * GT_MIB, 8192, base, 4096))
		return gt_fail("range entry: %lld", (long long)io[NCH].result);
	free(host);
	/* unregister: back to ENODEV */
	rc = kvfs_xfer_register(fd, NULL, 0, 0);
	n = kvfs_mget_device(fd, io, 1);
	if (rc != 0 || n != -ENODEV)
		return gt_fail("after unregister: %d, %ld", rc, n);
	/* registered again, then the fd closed with it registered: the
	 * daemon closes the import (the pool is freed after) */
	if (kvfs_xfer_register(fd, &ipc, POOL, 0) != 0)
		return gt_fail("register again");
	close(fd);
	rt.Free(pool);
	gpu_rt_unload(&rt);
	return 0;
}

static void write_chunks(const struct kvfs_mnt *m, const char *ns,
			 uint64_t base)
{
	char path[PATH_MAX], name[33];

	kvfs_test_path(m, path, "%s", ns);
	assert_int_equal(mkdir(path, 0755), 0);
	for (int i = 0; i < NCH; i++) {
		kvfs_test_key_name(3000 + (uint64_t)i, name);
		kvfs_test_path(m, path, "%s/%s", ns, name);
		assert_int_equal(kvfs_test_write_file(path, gt_size((size_t)i),
						      base + (uint64_t)i, 0),
				 0);
	}
}

/* Host-memory kvfs_mput / kvfs_mget on this L1 (cuda: through the
 * daemon's bounce buffer, two copies; pinned: one). */
static void host_roundtrip(const struct kvfs_mnt *m)
{
	struct kvfs_io io[3];
	char *src = malloc(3 * GT_MIB), *dst = calloc(1, 3 * GT_MIB);
	int fd = kvfs_ns_open(m->dir, "xhost", KVFS_NS_CREATE, 0755);

	assert_true(src && dst && fd >= 0);
	memset(io, 0, sizeof(io));
	for (int i = 0; i < 3; i++) {
		io[i].key.b[0] = (uint8_t)i;
		io[i].buf = src + (size_t)i * GT_MIB;
		io[i].len = GT_MIB - (size_t)i * 1000;
		kvfs_test_fill(io[i].buf, io[i].len, 700 + (uint64_t)i, 0);
	}
	assert_int_equal(kvfs_mput(fd, io, 3), 3);
	for (int i = 0; i < 3; i++) {
		io[i].buf = dst + (size_t)i * GT_MIB;
		io[i].len = GT_MIB;
	}
	assert_int_equal(kvfs_mget(fd, io, 3, 0), 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(io[i].result, GT_MIB - i * 1000);
		assert_int_equal(kvfs_test_check(io[i].buf, (size_t)io[i].result,
						 700 + (uint64_t)i, 0), 0);
	}
	close(fd);
	free(src);
	free(dst);
}

static void run_on(const char *l1)
{
	struct kvfs_mnt m;
	char opts[64], stats[PATH_MAX], buf[16384];
	ssize_t n;
	int fd;

	snprintf(opts, sizeof(opts), "l1=%s,l1_size=64M", l1);
	assert_int_equal(kvfs_test_mount(&m, opts), 0);
	write_chunks(&m, "xdev", 500);
	assert_int_equal(gt_in_child(engine, &m, "xdev", 500), 0);
	host_roundtrip(&m);
	fd = open(kvfs_test_path(&m, stats, ".kvfs/stats"), O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
	printf("l1=%s: %s\n", l1, strstr(buf, "\"xfer\""));
	assert_non_null(strstr(buf, "\"device_entries\": 7"));
	assert_int_equal(kvfs_test_umount(&m), 0);
}

static void test_pinned(void **state)
{
	(void)state;
	run_on("pinned");
}

static void test_cuda(void **state)
{
	(void)state;
	run_on("cuda");
}

/* l1=host: registering says EOPNOTSUPP, and so does a device GET. */
static void test_host(void **state)
{
	struct kvfs_mnt m;
	struct kvfs_io io;
	uint8_t ipc[64] = { 0 };
	int fd;

	(void)state;
	assert_int_equal(kvfs_test_mount(&m, "l1=host,l1_size=16M"), 0);
	fd = kvfs_ns_open(m.dir, "h", KVFS_NS_CREATE, 0755);
	assert_true(fd >= 0);
	assert_int_equal(kvfs_xfer_register(fd, ipc, 4096, 0), -EOPNOTSUPP);
	memset(&io, 0, sizeof(io));
	io.len = 4096;
	assert_int_equal(kvfs_mget_device(fd, &io, 1), -EOPNOTSUPP);
	close(fd);
	assert_int_equal(kvfs_test_umount(&m), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host),
		cmocka_unit_test(test_pinned),
		cmocka_unit_test(test_cuda),
	};
	const char *real = getenv("KVFS_GPU_REAL");
	char fake[PATH_MAX], why[256];

	gt_asan_reexec(argv);
	(void)argc;
	if (gt_have_mount_bin() < 0)
		return 77;
	if (!gpu_cuda_backend("cuda", why, sizeof(why))) {
		printf("skipped: %s\n", why);
		return 77;
	}
	if (!real || strcmp(real, "1")) {
		if (gt_fake_path(fake, sizeof(fake)) != 0) {
			printf("skipped: no stand-in CUDA runtime at %s\n",
			       fake);
			return 77;
		}
		setenv("KVFS_CUDART", fake, 1);
		unsetenv("FAKECUDA_DEVICES");
	}
	if (gt_probe(why, sizeof(why)) < 1) {
		printf("skipped: no usable CUDA runtime: %s\n", why);
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
