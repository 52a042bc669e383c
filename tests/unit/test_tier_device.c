/*
 * test_tier_device.c - the engine (tier/) with a device-memory L1 arena,
 * through tests/gpu/fake's stand-in CUDA runtime (skipped without it).
 */
#include "tier_test.h"

/*
 * The device-memory paths (tier_chunk_ptr NULL; copies, zeroing, growth and
 * checksums through gpu_copy_in/out), with tests/gpu/fake's stand-in CUDA
 * runtime when this build has the cuda backend; skipped otherwise.
 */
static void test_device_arena(void **state)
{
	char fake[4096], err[256];
	struct tier_config cfg;
	struct tier *t = NULL;
	struct kvfs_key k = mkkey(77), k2 = mkkey(78);
	struct tier_chunk *c;
	struct tier_info info;
	struct tier_wr *w;
	uint8_t buf[3 * PAGE + 100], back[3 * PAGE + 200];
	uint8_t ipc[64];
	uint64_t off = 0;
	void *cookie = NULL;
	ssize_t n;
	uint32_t ns;
	char *slash;
	int rc;

	(void)state;
	/* $BUILD/tests/unit/test_tier_device -> $BUILD/tests/gpu/libfakecudart.so */
	n = readlink("/proc/self/exe", fake, sizeof(fake) - 64);
	if (n <= 0)
		skip();
	fake[n] = 0;
	slash = strrchr(fake, '/');
	if (!slash)
		skip();
	strcpy(slash, "/../gpu/libfakecudart.so");
	if (access(fake, R_OK) != 0) {
		printf("device arena: skipped, no %s\n", fake);
		skip();
	}
	setenv("KVFS_CUDART", fake, 1);
	tier_config_default(&cfg);
	cfg.l1_size = 16 * PAGE;
	cfg.max_chunk = 8 * PAGE;
	cfg.policy = "lru";
	cfg.l1 = "cuda";
	rc = tier_create(&cfg, &t, err, sizeof(err));
	if (rc == -ENODEV) {
		printf("device arena: skipped, %s\n", err);
		unsetenv("KVFS_CUDART");
		skip();
	}
	assert_int_equal(rc, 0);
	ns = mkns(t, "dev");
	/* Dirty the device memory, so unzeroed holes would show. */
	memset(buf, 0xCC, sizeof(buf));
	assert_int_equal(tier_wr_begin(t, ns, NULL, 0, &w), 0);
	for (uint32_t i = 0; i < 8; i++)
		assert_int_equal(tier_wr_pwrite(t, w, buf, PAGE, i * PAGE), 0);
	tier_wr_abort(t, w);

	fill(&k, buf, sizeof(buf));
	assert_int_equal(tier_wr_begin(t, ns, &k, PAGE, &w), 0);
	/* A hole, then growth past the first page (a device-side move). */
	assert_int_equal(tier_wr_pwrite(t, w, buf, 100, 0), 0);
	assert_int_equal(tier_wr_pwrite(t, w, buf + 2 * PAGE, PAGE + 100,
					2 * PAGE), 0);
	assert_int_equal(tier_wr_pread(t, w, back, sizeof(back), 0),
			 3 * PAGE + 100);
	assert_memory_equal(back, buf, 100);
	for (size_t i = 100; i < 2 * PAGE; i++)
		assert_int_equal(back[i], 0);
	assert_memory_equal(back + 2 * PAGE, buf + 2 * PAGE, PAGE + 100);
	assert_int_equal(tier_wr_publish(t, w, NULL), 0);

	assert_int_equal(tier_get(t, ns, &k, &c), 0);
	assert_null(tier_chunk_ptr(c));
	assert_int_equal(tier_chunk_read(t, c, back, sizeof(back), 0),
			 3 * PAGE + 100);
	assert_memory_equal(back, buf, 100);
	assert_int_equal(tier_chunk_read(t, c, back, 50, 2 * PAGE + 10), 50);
	assert_memory_equal(back, buf + 2 * PAGE + 10, 50);
	assert_int_equal(tier_stat(t, ns, &k, &info), 0);
	memset(buf + 100, 0, 2 * PAGE - 100);
	assert_int_equal(tier_checksum(t, ns, &k, 0, &info.checksum), 0);
	assert_int_equal(info.checksum, hashkey_checksum(buf, 3 * PAGE + 100));
	rc = tier_arena_export(t, c, 0, 0, ipc, &off, &cookie);
	assert_true(rc == 0 || rc == -ENOTSUP);
	if (rc == 0) {
		assert_non_null(cookie);
		tier_arena_unexport(t, cookie);
	}
	tier_put(t, c);
	/* Eviction works the same on device memory. */
	for (uint32_t i = 0; i < 8; i++) {
		k2 = mkkey(200 + i);
		assert_int_equal(put_chunk(t, ns, &k2, 3 * PAGE, 0), 0);
	}
	assert_int_equal(tier_stat(t, ns, &k, &info), -ENOENT);
	tier_destroy(t);
	unsetenv("KVFS_CUDART");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_device_arena),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
