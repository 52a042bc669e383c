/*
 * test_l2_ingest.c - the engine (tier.h) putting chunks into L2 before
 * L1 evicts them (ingest=all, ingest=hot), admitting only chunks seen
 * twice (ingest=twice), and prefetching them back:
 * the prefetch bound, reclaim by heat, unlinks while writes are queued,
 * hot chunks and pins; tier_sync (an fsync) writing a chunk to L2 whatever
 * the ingest mode.
 */
#include "l2_test.h"

static void test_engine_ingest_all_and_prefetch(void **state)
{
	struct env *e = env_new();
	const size_t len = 256 * 1024;
	struct kvfs_key keys[12];
	struct tier_config c;
	struct tier_stats st;
	struct tier *t;
	char err[256];
	uint32_t ns, found = 0, in1 = 0, in2 = 0;

	(void)state;
	ecfg(&c, e->dir);
	c.ingest = TIER_INGEST_ALL;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	for (uint64_t i = 0; i < 4; i++)
		assert_int_equal(eput(t, ns, i, len), 0);
	ewait_writes(t, 4); /* written without any eviction */
	for (uint64_t i = 4; i < 40; i++)
		assert_int_equal(eput(t, ns, i, len), 0);
	ewait_writes(t, 40);
	tier_get_stats(t, &st);
	assert_int_equal(st.l2_writes, 40); /* once each: evictions are free */
	/* prefetch the first 12 (now in L2) */
	for (int i = 0; i < 12; i++)
		keys[i] = mkkey((uint64_t)i);
	assert_int_equal(tier_lookup(t, ns, keys, 12, 1, false, true, &found,
				     &in1, &in2), 0);
	assert_int_equal(found, 12);
	assert_true(in2 >= 1);
	for (int i = 0; i < 2000; i++) {
		tier_get_stats(t, &st);
		if (st.promotions >= in2)
			break;
		usleep(1000);
	}
	assert_true(st.promotions >= in2);
	for (uint64_t i = 0; i < 40; i++)
		assert_int_equal(echeck(t, ns, i, len, NULL), 0);
	tier_destroy(t);
	env_free(e);
}

/*
 * A prefetch of a run larger than L1 promotes only three quarters of L1's
 * worth, from the head of the run (what the engine reads first), instead
 * of evicting the head to make room for the tail.
 */
static void test_engine_prefetch_bounded(void **state)
{
	struct env *e = env_new();
	const size_t len = 256 * 1024;
	struct kvfs_key keys[40];
	struct tier_config c;
	struct tier_stats st;
	struct tier_info info;
	struct tier *t;
	char err[256];
	uint32_t ns, found = 0, in1 = 0, in2 = 0;

	(void)state;
	ecfg(&c, e->dir); /* L1: 4 MiB, 16 chunks */
	c.ingest = TIER_INGEST_ALL;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	for (uint64_t i = 0; i < 40; i++) {
		assert_int_equal(eput(t, ns, i, len), 0);
		keys[i] = mkkey(i);
	}
	ewait_writes(t, 40);
	assert_int_equal(tier_lookup(t, ns, keys, 40, 0, false, true, &found,
				     &in1, &in2), 0);
	assert_int_equal(found, 40);
	assert_true(in2 >= 20);
	for (int i = 0; i < 3000; i++) {
		tier_get_stats(t, &st);
		if (st.promotions >= 12)
			break;
		usleep(1000);
	}
	usleep(200 * 1000); /* nothing more comes */
	tier_get_stats(t, &st);
	assert_int_equal(st.promotions, 12); /* 3 MiB of the 4 MiB L1 */
	for (int i = 0; i < 12; i++) {
		assert_int_equal(tier_stat(t, ns, &keys[i], &info), 0);
		assert_int_equal(info.where, TIER_L1);
	}
	for (uint64_t i = 0; i < 40; i++)
		assert_int_equal(echeck(t, ns, i, len, NULL), 0);
	tier_destroy(t);
	env_free(e);
}

/*
 * Reclaim keeps what was read since it was written or last kept, and
 * lets it go once it cools: chunk 0, read once after its L2 write,
 * survives the reclaim of its segment while its cold neighbours go; not
 * read again, it goes at the next reclaim of the segment it was moved to.
 */
static void test_engine_reclaim_heat(void **state)
{
	struct env *e = env_new();
	const size_t len = 256 * 1024;
	struct tier_config c;
	struct kvfs_key k0 = mkkey(0), k1 = mkkey(1);
	struct tier_stats st;
	struct tier_info info;
	struct tier *t;
	char err[256];
	uint32_t ns;
	uint64_t n = 0;

	(void)state;
	ecfg(&c, e->dir);
	c.ingest = TIER_INGEST_ALL;
	c.l2_size = 8 << 20;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	for (; n < 10; n++)
		assert_int_equal(eput(t, ns, n, len), 0);
	ewait_writes(t, n);
	assert_int_equal(echeck(t, ns, 0, len, NULL), 0); /* a read */
	/* until the first reclaim (of the oldest segment, 0's and 1's) */
	do {
		assert_true(n < 400);
		assert_int_equal(eput(t, ns, n, len), 0);
		ewait_writes(t, ++n);
		tier_get_stats(t, &st);
	} while (st.l2_reclaims == 0);
	/* both evicted from L1 long ago; chunk 1 was never read */
	assert_int_equal(tier_stat(t, ns, &k1, &info), -ENOENT);
	assert_int_equal(tier_stat(t, ns, &k0, &info), 0);
	assert_int_equal(info.where, TIER_L2); /* kept, in L2 only */
	/* not read again: its moved copy goes with its new segment */
	while (tier_stat(t, ns, &k0, &info) == 0) {
		assert_true(n < 1000);
		assert_int_equal(eput(t, ns, n, len), 0);
		ewait_writes(t, ++n);
	}
	assert_int_equal(echeck(t, ns, 0, len, NULL), -ENOENT);
	tier_destroy(t);
	env_free(e);
}

/*
 * Unlinks while ingest=all writes are queued or in flight: queued writes
 * are cancelled, written ones erased; when the unlinks return nothing of
 * them is left in L2 and the queue counters are back to zero.
 */
static void test_engine_unlink_during_ingest(void **state)
{
	struct env *e = env_new();
	const size_t len = 256 * 1024;
	struct tier_config c;
	struct tier_stats st;
	struct kvfs_key k;
	struct tier *t;
	char err[256];
	uint32_t ns;

	(void)state;
	ecfg(&c, e->dir);
	c.ingest = TIER_INGEST_ALL;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	/* each unlinked right after its publication: its write is queued
	 * (cancelled) or being written (waited for, then erased) */
	for (uint64_t i = 0; i < 24; i++) {
		assert_int_equal(eput(t, ns, i, len), 0);
		k = mkkey(i);
		assert_int_equal(tier_unlink(t, ns, &k), 0);
	}
	/* a batch, then its unlinks: mostly written by then */
	for (uint64_t i = 24; i < 48; i++)
		assert_int_equal(eput(t, ns, i, len), 0);
	for (uint64_t i = 24; i < 48; i++) {
		k = mkkey(i);
		assert_int_equal(tier_unlink(t, ns, &k), 0);
	}
	tier_get_stats(t, &st);
	print_message("# %llu of 48 L2 writes happened before their unlink\n",
		      (unsigned long long)st.l2_writes);
	assert_int_equal(st.l2_bytes, 0);
	assert_int_equal(st.l2_chunks, 0);
	assert_int_equal(st.l2_errors, 0);
	/* nothing lands later either */
	usleep(300 * 1000);
	tier_get_stats(t, &st);
	assert_int_equal(st.l2_bytes, 0);
	assert_int_equal(st.l2_chunks, 0);
	tier_destroy(t);
	env_free(e);
}

static void test_engine_ingest_hot_and_pin(void **state)
{
	struct env *e = env_new();
	const size_t len = 256 * 1024;
	struct tier_config c;
	struct tier_stats st;
	struct tier_info info;
	struct kvfs_key k0 = mkkey(0);
	struct tier *t;
	char err[256];
	uint32_t ns;

	(void)state;
	ecfg(&c, e->dir);
	c.ingest = TIER_INGEST_HOT;
	c.hot_hits = 2;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	for (uint64_t i = 0; i < 4; i++)
		assert_int_equal(eput(t, ns, i, len), 0);
	/* chunk 0 gets two hits: written to L2 while still in L1 */
	assert_int_equal(echeck(t, ns, 0, len, NULL), 0);
	assert_int_equal(echeck(t, ns, 0, len, NULL), 0);
	ewait_writes(t, 1);
	tier_get_stats(t, &st);
	assert_int_equal(st.l2_writes, 1);
	/* a flood of cold chunks: they are dropped, not written; chunk 0
	 * survives in L2 */
	for (uint64_t i = 4; i < 40; i++)
		assert_int_equal(eput(t, ns, i, len), 0);
	tier_get_stats(t, &st);
	assert_int_equal(st.l2_writes, 1);
	assert_int_equal(tier_stat(t, ns, &k0, &info), 0);
	assert_int_equal(info.where, TIER_L2);
	/* user.kvfs.pin = 1 brings it back into L1 */
	assert_int_equal(tier_set_user_pin(t, ns, &k0, true), 0);
	assert_int_equal(tier_stat(t, ns, &k0, &info), 0);
	assert_int_equal(info.where, TIER_L1);
	assert_int_equal(echeck(t, ns, 0, len, NULL), 0);
	assert_int_equal(tier_set_user_pin(t, ns, &k0, false), 0);
	{
		struct kvfs_key k1 = mkkey(1);

		assert_int_equal(tier_stat(t, ns, &k1, &info), -ENOENT);
	}
	tier_destroy(t);
	env_free(e);
}

/*
 * ingest=twice: an L1 victim goes to L2 only when it was seen twice - hit
 * while in L1, or published before (remembered across its eviction). A
 * flood of first sights writes nothing.
 */
static void test_engine_ingest_twice(void **state)
{
	struct env *e = env_new();
	const size_t len = 256 * 1024; /* L1 holds 16 */
	struct tier_config c;
	struct tier_stats st;
	struct tier_info info;
	struct kvfs_key k;
	struct tier *t;
	char err[256];
	uint32_t ns;

	(void)state;
	ecfg(&c, e->dir);
	c.ingest = TIER_INGEST_TWICE;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	/* 32 first sights through 16 slots: 0..15 are dropped, unwritten */
	for (uint64_t i = 0; i < 32; i++)
		assert_int_equal(eput(t, ns, i, len), 0);
	for (uint64_t i = 0; i < 16; i++) {
		k = mkkey(i);
		assert_int_equal(tier_stat(t, ns, &k, &info), -ENOENT);
	}
	/* 31 is hit in L1; 0 comes back (its second sight) */
	assert_int_equal(echeck(t, ns, 31, len, NULL), 0);
	assert_int_equal(eput(t, ns, 0, len), 0);
	/* 16 more first sights evict 16..31 and 0: only 31 and 0 go down */
	for (uint64_t i = 32; i < 48; i++)
		assert_int_equal(eput(t, ns, i, len), 0);
	ewait_writes(t, 2);
	tier_get_stats(t, &st);
	assert_int_equal(st.l2_writes, 2);
	k = mkkey(0);
	assert_int_equal(tier_stat(t, ns, &k, &info), 0);
	assert_int_equal(info.where, TIER_L2);
	k = mkkey(31);
	assert_int_equal(tier_stat(t, ns, &k, &info), 0);
	assert_int_equal(info.where, TIER_L2);
	k = mkkey(17);
	assert_int_equal(tier_stat(t, ns, &k, &info), -ENOENT);
	assert_int_equal(echeck(t, ns, 0, len, NULL), 0);
	assert_int_equal(echeck(t, ns, 31, len, NULL), 0);
	tier_destroy(t);
	env_free(e);
}

/*
 * tier_sync under ingest=evicted: the chunk (never evicted) is written to
 * L2 by the call and fdatasync'ed; again: no second write, one more
 * fdatasync; an absent key is 0. The next open on the same l2_dir has
 * the synced chunk and not the other (no flush_on_exit). Without L2, 0.
 */
static void test_engine_sync(void **state)
{
	struct env *e = env_new();
	const size_t len = 100000;
	struct kvfs_key k1 = mkkey(1), k9 = mkkey(9);
	struct tier_config c;
	struct tier_stats st;
	struct tier *t;
	char err[256];
	uint32_t ns;

	(void)state;
	ecfg(&c, e->dir);
	assert_int_equal(c.ingest, TIER_INGEST_EVICTED);
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	assert_int_equal(eput(t, ns, 1, len), 0);
	assert_int_equal(eput(t, ns, 2, len), 0);
	tier_get_stats(t, &st);
	assert_int_equal(st.l2_writes, 0);
	assert_int_equal(tier_sync(t, ns, &k1), 0);
	tier_get_stats(t, &st);
	assert_int_equal(st.l2_writes, 1);
	assert_int_equal(st.l2_sync_writes, 1);
	assert_int_equal(st.l2_syncs, 1);
	assert_int_equal(tier_sync(t, ns, &k1), 0);
	assert_int_equal(tier_sync(t, ns, &k9), 0); /* not there: nothing */
	tier_get_stats(t, &st);
	assert_int_equal(st.l2_writes, 1);
	assert_int_equal(st.l2_syncs, 2);
	assert_int_equal(st.l2_errors, 0);
	assert_int_equal(echeck(t, ns, 1, len, NULL), 0);
	tier_destroy(t);

	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_find(t, "ns", &ns), 0);
	assert_int_equal(echeck(t, ns, 1, len, NULL), 0);
	assert_int_equal(echeck(t, ns, 2, len, NULL), -ENOENT);
	tier_destroy(t);

	c.l2_dir = NULL; /* memory only */
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	assert_int_equal(eput(t, ns, 1, len), 0);
	assert_int_equal(tier_sync(t, ns, &k1), 0);
	tier_get_stats(t, &st);
	assert_int_equal(st.l2_syncs, 0);
	tier_destroy(t);
	env_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_engine_ingest_all_and_prefetch),
		cmocka_unit_test(test_engine_prefetch_bounded),
		cmocka_unit_test(test_engine_reclaim_heat),
		cmocka_unit_test(test_engine_unlink_during_ingest),
		cmocka_unit_test(test_engine_ingest_hot_and_pin),
		cmocka_unit_test(test_engine_ingest_twice),
		cmocka_unit_test(test_engine_sync),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
