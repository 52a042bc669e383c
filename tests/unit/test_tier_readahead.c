/*
 * test_tier_readahead.c - chain readahead in the engine (tier_readahead.c)
 * with a real L2 log: a chain read in order is promoted ahead of its
 * reader; two readers interleaved each keep their window; chunks without
 * parent links are followed in the order read before; readahead=0 starts
 * nothing; an unlink of a chunk readahead holds pinned frees it; what
 * readahead pins stays within its bound and is taken back when L1 is
 * full; of two children, the one read after the parent last is followed.
 */
#include "tests/unit/l2_test.h"

#define CH (64u << 10) /* chunk bytes; L1 holds 16 */
#define LEN 24         /* chain length */

/* Chunk i (bytes of chunk_bytes(i)); its parent is chunk parent, or none
 * when parent < 0. */
static void put_chunk(struct tier *t, uint32_t ns, uint64_t i, int64_t parent)
{
	struct kvfs_key k = mkkey(i), p = mkkey((uint64_t)parent);
	uint8_t *buf = malloc(CH);
	struct tier_wr *w;

	assert_non_null(buf);
	chunk_bytes(buf, CH, i);
	assert_int_equal(tier_wr_begin(t, ns, &k, CH, &w), 0);
	if (parent >= 0)
		assert_int_equal(tier_wr_set_parent(t, w, &p, 0), 0);
	assert_int_equal(tier_wr_pwrite(t, w, buf, CH, 0), 0);
	assert_int_equal(tier_wr_publish(t, w, NULL), 0);
	free(buf);
}

/* Reads chunk i as reader and checks its bytes. */
static void get_chunk(struct tier *t, uint32_t ns, uint64_t i, uint64_t reader)
{
	struct kvfs_key k = mkkey(i);
	uint8_t *want = malloc(CH), *got = malloc(CH);
	struct tier_chunk *c;

	chunk_bytes(want, CH, i);
	assert_int_equal(tier_get_by(t, ns, &k, reader, &c), 0);
	assert_int_equal(tier_chunk_read(t, c, got, CH, 0), (long)CH);
	assert_memory_equal(want, got, CH);
	tier_put(t, c);
	free(want);
	free(got);
}

static struct tier *mk(struct env *e, uint32_t readahead, uint32_t *ns)
{
	struct tier_config c;
	struct tier *t;
	char err[256];

	ecfg(&c, e->dir);
	c.l1_size = 16 * CH;
	c.max_chunk = CH;
	c.ingest = TIER_INGEST_ALL;
	c.readahead = readahead;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ra", ns), 0);
	return t;
}

/* Chains [first, first + n) of LEN chunks (links unless bare; bare ones
 * written last to first, so only reading teaches their order, unless
 * in_order), then enough other chunks that the chains are only in L2. */
static void fill_order(struct tier *t, uint32_t ns, uint64_t first, int n,
		       bool bare, bool in_order)
{
	for (int c = 0; c < n; c++)
		for (uint64_t k = 0; k < LEN; k++) {
			uint64_t j = bare && !in_order ? LEN - 1 - k : k;
			uint64_t i = first + (uint64_t)c * 1000 + j;

			put_chunk(t, ns, i, bare || !j ? -1 : (int64_t)i - 1);
		}
	for (uint64_t j = 0; j < 16; j++)
		put_chunk(t, ns, 900000 + first + j, -1);
	ewait_writes(t, (uint64_t)n * LEN + 16);
}

static void fill(struct tier *t, uint32_t ns, uint64_t first, int n, bool bare)
{
	fill_order(t, ns, first, n, bare, false);
}

static void stats(struct tier *t, struct tier_stats *st)
{
	/* the workers finish what they queued */
	for (int i = 0; i < 50; i++) {
		uint64_t before;

		tier_get_stats(t, st);
		before = st->ra_promotions;
		usleep(20000);
		tier_get_stats(t, st);
		if (st->ra_promotions == before)
			break;
	}
}

static void test_chain_in_order(void **state)
{
	struct env *e = env_new();
	struct tier_stats st;
	struct tier *t;
	uint32_t ns;

	(void)state;
	t = mk(e, 8, &ns);
	fill(t, ns, 0, 1, false);
	for (uint64_t j = 0; j < LEN; j++)
		get_chunk(t, ns, j, 7);
	stats(t, &st);
	assert_int_equal(st.ra_max, 8);
	assert_true(st.ra_promotions >= LEN / 2);
	assert_true(st.ra_hits >= LEN / 2);
	assert_true(st.ra_hits <= st.ra_promotions);
	tier_destroy(t);
	env_free(e);
}

/* Two readers, each in its own chain, their reads interleaved: each
 * follows its own chain (the streams are per reader). */
static void test_two_readers(void **state)
{
	struct env *e = env_new();
	struct tier_stats st;
	struct tier *t;
	uint32_t ns;

	(void)state;
	t = mk(e, 4, &ns);
	fill(t, ns, 0, 2, false);
	for (uint64_t j = 0; j < LEN; j++) {
		get_chunk(t, ns, j, 1);
		get_chunk(t, ns, 1000 + j, 2);
	}
	stats(t, &st);
	assert_true(st.ra_hits >= LEN);
	tier_destroy(t);
	env_free(e);
}

/* No links: the first pass teaches the order, the second is read ahead;
 * a reader that jumps gets nothing ahead. */
/* Chunks without links published one after the other are followed in
 * that order by the first reader in order, at most 4 chunks ahead (the
 * order is only that of writing); a reader jumping among them (never to
 * the chunk written after the one it read) promotes nothing. */
static void test_write_order(void **state)
{
	static const int jumps[] = { 20, 17, 23, 19, 16, 22, 18, 21 };
	struct env *e = env_new();
	struct tier_stats st;
	struct tier *t;
	uint32_t ns;

	(void)state;
	t = mk(e, 8, &ns);
	fill_order(t, ns, 0, 1, true, true);
	for (size_t k = 0; k < sizeof(jumps) / sizeof(jumps[0]); k++)
		get_chunk(t, ns, (uint64_t)jumps[k], 3);
	stats(t, &st);
	assert_int_equal(st.ra_promotions, 0);
	for (uint64_t j = 0; j < 8; j++)
		get_chunk(t, ns, j, 3);
	stats(t, &st);
	assert_true(st.ra_promotions >= 4);
	assert_true(st.ra_hits >= 4);
	/* past chunk 7 (8..15 only in L2), at most 4 queued ahead */
	assert_true(st.ra_promotions <= st.ra_hits + 4);
	tier_destroy(t);
	env_free(e);
}

static void test_learned_and_jumps(void **state)
{
	static const int jumps[] = { 5, 17, 2, 11, 20, 8, 14, 0, 22, 3 };
	struct env *e = env_new();
	struct tier_stats st;
	struct tier *t;
	uint32_t ns;

	(void)state;
	t = mk(e, 8, &ns);
	fill(t, ns, 0, 1, true);
	for (size_t k = 0; k < sizeof(jumps) / sizeof(jumps[0]); k++)
		get_chunk(t, ns, (uint64_t)jumps[k], 3);
	for (uint64_t j = 0; j < LEN; j++)
		get_chunk(t, ns, j, 3);
	stats(t, &st);
	assert_int_equal(st.ra_promotions, 0);
	for (uint64_t j = 0; j < 16; j++) /* the chain leaves L1 */
		get_chunk(t, ns, 900000 + j, 4);
	for (uint64_t j = 0; j < LEN; j++)
		get_chunk(t, ns, j, 3);
	stats(t, &st);
	assert_true(st.ra_promotions >= LEN / 2);
	assert_true(st.ra_hits >= LEN / 2);
	tier_destroy(t);
	env_free(e);
}

/* L1 full of what readahead holds and of a reader's own pins: the next
 * promotion takes readahead's chunks back instead of falling back to a
 * temporary buffer. */
static void test_pressure_unpins(void **state)
{
	struct env *e = env_new();
	struct tier_chunk *held[12];
	struct tier_stats st;
	struct tier *t;
	uint32_t ns;

	(void)state;
	t = mk(e, 16, &ns);
	fill(t, ns, 0, 2, false);
	for (uint64_t j = 0; j < 3; j++)
		get_chunk(t, ns, j, 5);
	stats(t, &st);
	assert_true(st.ra_promotions - st.ra_hits >= 8); /* held ahead */
	for (int k = 0; k < 12; k++) {
		struct kvfs_key key = mkkey(1000 + (uint64_t)(k * 2));

		/* every other chunk of chain 2: jumps, nothing more ahead */
		assert_int_equal(tier_get_by(t, ns, &key, 6, &held[k]), 0);
		assert_true(tier_chunk_offset(held[k]) >= 0); /* in L1 */
	}
	for (int k = 0; k < 12; k++)
		tier_put(t, held[k]);
	tier_destroy(t);
	env_free(e);
}

/* A chunk with two children: readahead follows the newest published one
 * until a reader goes down the other; from then on, that one. */
static void test_branch_read_most_recently(void **state)
{
	struct env *e = env_new();
	struct tier_info info;
	struct tier *t;
	uint32_t ns;
	struct kvfs_key a = mkkey(5001), b = mkkey(6001);

	(void)state;
	t = mk(e, 4, &ns);
	/* trunk 0..7, then branch A (5000.., parent 7) and branch B (6000..,
	 * parent 7, published last) */
	for (uint64_t j = 0; j < 8; j++)
		put_chunk(t, ns, j, j ? (int64_t)j - 1 : -1);
	for (uint64_t j = 0; j < 6; j++)
		put_chunk(t, ns, 5000 + j, j ? (int64_t)(5000 + j - 1) : 7);
	for (uint64_t j = 0; j < 6; j++)
		put_chunk(t, ns, 6000 + j, j ? (int64_t)(6000 + j - 1) : 7);
	for (uint64_t j = 0; j < 16; j++)
		put_chunk(t, ns, 900000 + j, -1);
	ewait_writes(t, 8 + 12 + 16);
	/* down branch A: 0..7, 5000..5005 */
	for (uint64_t j = 0; j < 8; j++)
		get_chunk(t, ns, j, 1);
	for (uint64_t j = 0; j < 6; j++)
		get_chunk(t, ns, 5000 + j, 1);
	for (uint64_t j = 0; j < 16; j++) /* everything back to L2 */
		get_chunk(t, ns, 900000 + j, 2);
	usleep(2100 * 1000); /* what readahead held is let go */
	for (uint64_t j = 0; j < 16; j++)
		get_chunk(t, ns, 900000 + j, 2);
	assert_int_equal(tier_stat(t, ns, &a, &info), 0);
	assert_int_equal(info.where, TIER_L2);
	assert_int_equal(tier_stat(t, ns, &b, &info), 0);
	assert_int_equal(info.where, TIER_L2);
	/* the trunk again, up to 7: the window reaches past the branch point
	 * into A (read after 7 last time), not B (the newest child) */
	for (uint64_t j = 0; j < 8; j++)
		get_chunk(t, ns, j, 3);
	for (int i = 0; i < 100; i++) {
		assert_int_equal(tier_stat(t, ns, &a, &info), 0);
		if (info.where == TIER_L1)
			break;
		usleep(10000);
	}
	assert_int_equal(info.where, TIER_L1);
	assert_int_equal(tier_stat(t, ns, &b, &info), 0);
	assert_int_equal(info.where, TIER_L2);
	tier_destroy(t);
	env_free(e);
}

static void test_bad_config(void **state)
{
	struct tier_config c;
	struct tier *t = NULL;
	char err[256] = "";

	(void)state;
	tier_config_default(&c);
	assert_int_equal(c.readahead, 0); /* the engine alone: off */
	c.l1_size = 16 * CH;
	c.max_chunk = CH;
	c.readahead = TIER_READAHEAD_MAX + 1;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "readahead"));
	assert_null(t);
}

static void test_off(void **state)
{
	struct env *e = env_new();
	struct tier_stats st;
	struct tier *t;
	uint32_t ns;

	(void)state;
	t = mk(e, 0, &ns);
	fill(t, ns, 0, 1, false);
	for (uint64_t j = 0; j < LEN; j++)
		get_chunk(t, ns, j, 9);
	stats(t, &st);
	assert_int_equal(st.ra_max, 0);
	assert_int_equal(st.ra_promotions, 0);
	tier_destroy(t);
	env_free(e);
}

/* Promoted and pinned for a reader that stops: unlinking those chunks
 * frees them (ASan: no leak), and the pins stay within three quarters
 * of L1 meanwhile. */
static void test_unlink_pending(void **state)
{
	struct env *e = env_new();
	struct tier_info info;
	struct tier_stats st;
	struct tier *t;
	uint32_t ns;

	(void)state;
	t = mk(e, 16, &ns);
	fill(t, ns, 0, 1, false);
	for (uint64_t j = 0; j < 4; j++)
		get_chunk(t, ns, j, 5);
	stats(t, &st);
	assert_true(st.ra_promotions >= 2);
	assert_true((st.ra_promotions - st.ra_hits) * CH <= 16 * CH / 4 * 3);
	for (uint64_t j = 4; j < LEN; j++) {
		struct kvfs_key k = mkkey(j);

		if (tier_stat(t, ns, &k, &info) == 0 && info.refs)
			assert_int_equal(info.where, TIER_L1); /* held ahead */
		assert_int_equal(tier_unlink(t, ns, &k), 0);
	}
	tier_destroy(t);
	env_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chain_in_order),
		cmocka_unit_test(test_two_readers),
		cmocka_unit_test(test_learned_and_jumps),
		cmocka_unit_test(test_write_order),
		cmocka_unit_test(test_off),
		cmocka_unit_test(test_bad_config),
		cmocka_unit_test(test_pressure_unpins),
		cmocka_unit_test(test_branch_read_most_recently),
		cmocka_unit_test(test_unlink_pending),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
