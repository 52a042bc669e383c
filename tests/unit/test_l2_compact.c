/*
 * test_l2_compact.c - L2 keeps live data it has room for (issue 27, item
 * 4): the engine with L1 4 MiB and L2 16 MiB (the 256 MiB : 1 GiB of the
 * report, scaled), three files written once and never read, then 1.2 L2
 * of other files passing through while L2's live bytes fit: the three
 * are still there, because reclaim compacts instead of dropping what was
 * not read. And when the live bytes do not fit, the policy still drops the
 * cold ones and L2 stays within its size.
 */
#include "l2_test.h"

#define CHUNK (256u << 10)
#define L2SZ ((uint64_t)16 << 20)

static struct tier *mk_engine(struct env *e)
{
	struct tier_config c;
	struct tier *t;
	char err[256];

	ecfg(&c, e->dir);
	c.l1_size = 4 << 20;
	c.l2_size = L2SZ;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	return t;
}

static bool present(struct tier *t, uint32_t ns, uint64_t i)
{
	struct kvfs_key k = mkkey((uint32_t)i);
	struct tier_info info;

	return tier_stat(t, ns, &k, &info) == 0; /* no read: no heat */
}

/* Waits until the demoter and L2 are idle (writes stop moving). */
static void settle(struct tier *t)
{
	struct tier_stats a, b;

	tier_get_stats(t, &a);
	for (int i = 0; i < 200; i++) {
		usleep(20000);
		tier_get_stats(t, &b);
		if (b.l2_writes == a.l2_writes && b.l2_reclaims == a.l2_reclaims)
			return;
		a = b;
	}
}

static void test_cold_files_survive_churn(void **state)
{
	struct env *e = env_new();
	/* a file = 3 chunks of 256 KiB (50 MiB of 1 GiB, scaled) */
	const uint64_t files = 3 * 3, live_window = 48; /* ~45% of L2 live */
	struct tier_stats st;
	uint64_t others = 0;
	struct tier *t = mk_engine(e);
	uint32_t ns;
	uint64_t wa_x100;

	(void)state;
	assert_int_equal(tier_ns_create(t, "lmc.r0", &ns), 0);
	for (uint64_t i = 0; i < files; i++)
		assert_int_equal(eput(t, ns, i, CHUNK), 0);
	/* other files pass through until 1.2 L2 of them was written to L2
	 * (compressed): each written, later unlinked, so L2 holds garbage
	 * and at most the window plus the three files live */
	for (uint64_t j = 0;; j++) {
		uint64_t id = 1000 + j;

		if (j >= live_window) {
			tier_get_stats(t, &st);
			if (st.l2_write_bytes >= L2SZ * 12 / 10) {
				others = j;
				break;
			}
		}

		assert_int_equal(eput(t, ns, id, CHUNK), 0);
		if (j >= live_window) {
			struct kvfs_key k = mkkey((uint32_t)(id - live_window));

			assert_int_equal(tier_unlink(t, ns, &k), 0);
		}
	}
	settle(t);
	tier_get_stats(t, &st);
	fprintf(stderr, "# %" PRIu64 " reclaims, %" PRIu64 " compactions, "
		"%" PRIu64 " KiB written, %" PRIu64 " KiB moved, L2 live "
		"%" PRIu64 " KiB of %" PRIu64 " KiB\n", st.l2_reclaims,
		st.l2_compactions, st.l2_write_bytes >> 10,
		st.l2_moved_bytes >> 10, st.l2_bytes >> 10, L2SZ >> 10);
	assert_true(st.l2_reclaims >= 2); /* L2 did wrap */
	for (uint64_t i = 0; i < files; i++)
		if (!present(t, ns, i))
			fail_msg("chunk %" PRIu64 " of the never-read files was "
				 "dropped with L2 mostly garbage", i);
	assert_true(st.l2_compactions >= 1);
	/* the window of recent files too */
	for (uint64_t j = others - live_window; j < others; j++)
		assert_true(present(t, ns, 1000 + j));
	/* and every byte of them reads back */
	for (uint64_t i = 0; i < files; i++)
		assert_int_equal(echeck(t, ns, i, CHUNK, NULL), 0);
	/* the price: write amplification at most 2 */
	assert_true(st.l2_write_bytes > st.l2_moved_bytes);
	wa_x100 = st.l2_write_bytes * 100 /
		  (st.l2_write_bytes - st.l2_moved_bytes);
	assert_true(wa_x100 <= 200);
	assert_true(dir_bytes(e->dir) <= L2SZ);
	assert_int_equal(st.l2_corrupt, 0);
	assert_int_equal(st.l2_errors, 0);
	tier_destroy(t);
	env_free(e);
}

/* Live bytes beyond what L2 holds: the policy drops the cold oldest, L2
 * stays within l2_size, and what was read stays. */
static void test_full_of_live_evicts_by_policy(void **state)
{
	struct env *e = env_new();
	const uint64_t n = (L2SZ * 2) / CHUNK; /* twice L2, all live */
	struct tier_stats st;
	struct tier *t = mk_engine(e);
	uint64_t gone = 0;
	uint32_t ns;

	(void)state;
	assert_int_equal(tier_ns_create(t, "full.r0", &ns), 0);
	assert_int_equal(eput(t, ns, 0, CHUNK), 0);
	for (uint64_t i = 1; i < n; i++) {
		assert_int_equal(eput(t, ns, i, CHUNK), 0);
		/* chunk 0 is read now and then: hot, kept by the policy */
		if (i % 16 == 0)
			assert_int_equal(echeck(t, ns, 0, CHUNK, NULL), 0);
	}
	settle(t);
	tier_get_stats(t, &st);
	for (uint64_t i = 1; i < n / 4; i++)
		gone += !present(t, ns, i);
	assert_true(gone > n / 8); /* the cold oldest went */
	assert_true(present(t, ns, 0));
	assert_true(present(t, ns, n - 1));
	assert_true(dir_bytes(e->dir) <= L2SZ);
	assert_true(st.l2_bytes <= L2SZ);
	assert_int_equal(st.l2_corrupt, 0);
	tier_destroy(t);
	env_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cold_files_survive_churn),
		cmocka_unit_test(test_full_of_live_evicts_by_policy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
