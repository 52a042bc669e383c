/*
 * test_tier_pin.c - pins in the engine (tier/): a full L1 of pinned chunks
 * is ENOSPC for a writer, a writer growing into a full L1, unlinking a
 * pinned chunk, pins released on their own generation, lookups pinning a
 * parent, user pins, a replaced publication's pin (tier_pin_l1) and its
 * duplicate.
 */
#include "tier_test.h"

/* ---------------------------------------------------------- pins, full */

/* A writer takes L1 as its bytes arrive: begins (no space taken), then
 * writes one byte; returns what that write says (the writer is gone). */
static int begin_write(struct tier *t, uint32_t ns, const struct kvfs_key *k,
		       uint64_t hint)
{
	struct tier_wr *w;
	uint8_t b = 1;
	int rc = tier_wr_begin(t, ns, k, hint, &w);

	if (rc)
		return rc;
	rc = tier_wr_pwrite(t, w, &b, 1, 0);
	tier_wr_abort(t, w);
	return rc;
}

static void test_enospc_pinned(void **state)
{
	/* 16 pages of arena, 4-page chunks: 4 fit. */
	struct gone_log g;
	struct tier *t = mk(16 * PAGE, 4 * PAGE, "lru", &g);
	uint32_t ns = mkns(t, "ns");
	struct tier_chunk *c[4];
	struct kvfs_key k[6];
	struct tier_stats st;
	struct tier_wr *w;
	uint8_t buf[PAGE];

	(void)state;
	for (int i = 0; i < 6; i++)
		k[i] = mkkey((uint32_t)i + 10);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(put_chunk(t, ns, &k[i], 4 * PAGE, 0), 0);
		assert_int_equal(tier_get(t, ns, &k[i], &c[i]), 0);
	}
	/* Everything pinned: no room for the first byte, and nothing is
	 * evicted. */
	assert_int_equal(begin_write(t, ns, &k[4], 4 * PAGE), -ENOSPC);
	assert_int_equal(begin_write(t, ns, &k[4], 1), -ENOSPC);
	/* A temporary with no hint: no room either. */
	assert_int_equal(begin_write(t, ns, NULL, 0), -ENOSPC);
	/* In a fresh namespace a writer with no size yet starts, then fails
	 * on its first write without harm. */
	{
		uint32_t ns2 = mkns(t, "fresh");

		assert_int_equal(tier_wr_begin(t, ns2, &k[4], 0, &w), 0);
		assert_int_equal(tier_wr_pwrite(t, w, buf, 1, 0), -ENOSPC);
		assert_int_equal(tier_wr_size(w), 0);
		tier_wr_abort(t, w);
	}
	tier_get_stats(t, &st);
	assert_int_equal(st.evictions, 0);
	assert_int_equal(st.l1_chunks, 4);
	assert_int_equal(g.n, 0);
	for (int i = 0; i < 4; i++)
		check_chunk(t, ns, &k[i], 4 * PAGE);

	/* One unpinned: the next chunk evicts exactly that one. */
	tier_put(t, c[2]);
	assert_int_equal(put_chunk(t, ns, &k[4], 4 * PAGE, 0), 0);
	assert_int_equal(g.n, 1);
	assert_memory_equal(&g.keys[0], &k[2], sizeof(k[2]));
	assert_int_equal(g.ns[0], ns);
	assert_int_equal(g.stat_rc, -ENOENT);
	assert_int_equal(tier_stat(t, ns, &k[2], &(struct tier_info){0}),
			 -ENOENT);
	check_chunk(t, ns, &k[4], 4 * PAGE);

	/* A growing writer that hits the wall keeps its earlier bytes. */
	tier_put(t, c[0]);
	tier_put(t, c[1]);
	tier_put(t, c[3]);
	for (int i = 0; i < 4; i++)
		if (i != 2)
			assert_int_equal(tier_pin_key(t, ns, &k[i]), 0);
	assert_int_equal(tier_set_user_pin(t, ns, &k[4], true), 0);
	assert_int_equal(begin_write(t, ns, &k[5], 0), -ENOSPC);
	for (int i = 0; i < 4; i++)
		if (i != 2)
			tier_unpin_key(t, ns, &k[i]);
	assert_int_equal(tier_pin_key(t, ns, &k[0]), 0);
	assert_int_equal(tier_pin_key(t, ns, &k[1]), 0);
	/* Now 4 pages free after evicting k[3]. */
	assert_int_equal(tier_wr_begin(t, ns, &k[5], 0, &w), 0);
	memset(buf, 0x5A, sizeof(buf));
	for (int i = 0; i < 4; i++)
		assert_int_equal(tier_wr_pwrite(t, w, buf, PAGE, i * PAGE), 0);
	assert_int_equal(tier_wr_pwrite(t, w, buf, 1, 4 * PAGE), -EFBIG);
	{
		uint8_t back[4 * PAGE];

		assert_int_equal(tier_wr_pread(t, w, back, sizeof(back), 0),
				 4 * PAGE);
		for (size_t i = 0; i < sizeof(back); i++)
			assert_int_equal(back[i], 0x5A);
	}
	tier_wr_abort(t, w);
	tier_get_stats(t, &st);
	assert_int_equal(st.writer_bytes, 0);
	tier_unpin_key(t, ns, &k[0]);
	tier_unpin_key(t, ns, &k[1]);
	assert_int_equal(tier_set_user_pin(t, ns, &k[4], false), 0);
	tier_destroy(t);
}

static void test_grow_enospc(void **state)
{
	/* A writer whose growth finds only pinned chunks keeps its bytes. */
	struct tier *t = mk(8 * PAGE, 8 * PAGE, "lru", NULL);
	uint32_t ns = mkns(t, "ns");
	struct kvfs_key a = mkkey(1), b = mkkey(2);
	struct tier_chunk *c;
	struct tier_wr *w;
	uint8_t buf[4 * PAGE], back[4 * PAGE];

	(void)state;
	assert_int_equal(put_chunk(t, ns, &a, 4 * PAGE, 0), 0);
	assert_int_equal(tier_get(t, ns, &a, &c), 0);
	assert_int_equal(tier_wr_begin(t, ns, &b, 0, &w), 0);
	memset(buf, 7, sizeof(buf));
	assert_int_equal(tier_wr_pwrite(t, w, buf, 3 * PAGE, 0), 0);
	/* Growing to 5 pages needs a new 5-page extent: only 4 are free. */
	assert_int_equal(tier_wr_pwrite(t, w, buf, 2 * PAGE, 3 * PAGE),
			 -ENOSPC);
	assert_int_equal(tier_wr_size(w), 3 * PAGE);
	assert_int_equal(tier_wr_pread(t, w, back, sizeof(back), 0), 3 * PAGE);
	assert_memory_equal(back, buf, 3 * PAGE);
	assert_int_equal(tier_wr_publish(t, w, NULL), 0);
	tier_put(t, c);
	check_chunk(t, ns, &a, 4 * PAGE);
	tier_destroy(t);
}

/* c pins the old 4-page publication of k, whose new one (published
 * since) is 100 bytes: c still reads the old bytes, a new reader the new
 * ones. */
static void check_old_new(struct tier *t, uint32_t ns, const struct kvfs_key *k,
			  const struct tier_chunk *c)
{
	uint8_t back[4 * PAGE];
	struct tier_chunk *cur;

	assert_int_equal(tier_chunk_read(t, c, back, sizeof(back), 0),
			 4 * PAGE);
	for (size_t i = 0; i < sizeof(back); i++)
		assert_int_equal(back[i], pattern(k, i));
	assert_int_equal(tier_get(t, ns, k, &cur), 0);
	assert_int_equal(tier_chunk_size(cur), 100);
	assert_true(tier_chunk_gen(cur) > tier_chunk_gen(c));
	tier_put(t, cur);
}

static void test_unlink_pinned(void **state)
{
	struct tier *t = mk(8 * PAGE, 4 * PAGE, "lru", NULL);
	uint32_t ns = mkns(t, "ns");
	struct kvfs_key k = mkkey(5), other = mkkey(6);
	struct tier_chunk *c, *c2;
	struct tier_stats st;
	struct tier_wr *w;
	uint8_t back[4 * PAGE];

	(void)state;
	assert_int_equal(put_chunk(t, ns, &k, 4 * PAGE, 0), 0);
	assert_int_equal(tier_get(t, ns, &k, &c), 0);
	assert_int_equal(tier_pin_key(t, ns, &k), 0); /* a lease */
	assert_int_equal(tier_unlink(t, ns, &k), 0);
	assert_int_equal(tier_unlink(t, ns, &k), -ENOENT);
	assert_int_equal(tier_stat(t, ns, &k, &(struct tier_info){0}), -ENOENT);
	assert_int_equal(tier_get(t, ns, &k, &c2), -ENOENT);
	assert_int_equal(tier_pin_key(t, ns, &k), -ENOENT);

	/* The unlinked bytes are not reused while pinned: with `other`
	 * pinned too, a new 4-page chunk finds no room. */
	assert_int_equal(put_chunk(t, ns, &other, 4 * PAGE, 0), 0);
	assert_int_equal(tier_get(t, ns, &other, &c2), 0);
	assert_int_equal(begin_write(t, ns, &k, 4 * PAGE), -ENOSPC);
	assert_int_equal(tier_chunk_read(t, c, back, sizeof(back), 0),
			 4 * PAGE);
	for (size_t i = 0; i < sizeof(back); i++)
		assert_int_equal(back[i], pattern(&k, i));
	tier_put(t, c);
	/* The lease still holds the bytes. */
	assert_int_equal(begin_write(t, ns, &k, 4 * PAGE), -ENOSPC);
	tier_unpin_key(t, ns, &k);
	tier_get_stats(t, &st);
	assert_int_equal(st.l1_chunks, 1);
	assert_int_equal(st.l1_bytes, 4 * PAGE);
	/* Now the space is back, without evicting the pinned chunk. */
	assert_int_equal(tier_wr_begin(t, ns, &k, 4 * PAGE, &w), 0);
	tier_wr_abort(t, w);
	check_chunk(t, ns, &other, 4 * PAGE);
	tier_put(t, c2);

	/* Unlink, re-publish the key, and the old reader still reads the
	 * old bytes while new readers get the new ones. */
	assert_int_equal(tier_get(t, ns, &other, &c), 0);
	assert_int_equal(tier_pin_key(t, ns, &other), 0);
	assert_int_equal(tier_unlink(t, ns, &other), 0);
	assert_int_equal(tier_wr_begin(t, ns, &other, 0, &w), 0);
	memset(back, 0xEE, sizeof(back));
	assert_int_equal(tier_wr_pwrite(t, w, back, 100, 0), 0);
	assert_int_equal(tier_wr_publish(t, w, NULL), 0);
	assert_int_equal(tier_pin_key(t, ns, &other), 0);
	check_old_new(t, ns, &other, c);
	tier_put(t, c);
	/* Two key pins on `other` (one per incarnation): both releases
	 * balance, whichever order. */
	tier_unpin_key(t, ns, &other);
	tier_unpin_key(t, ns, &other);
	{
		struct tier_info info;

		assert_int_equal(tier_stat(t, ns, &other, &info), 0);
		assert_int_equal(info.refs, 0);
	}
	tier_get_stats(t, &st);
	assert_int_equal(st.l1_bytes, PAGE);
	tier_destroy(t);
}

/*
 * A key pin is released on the generation it was taken on: with the
 * key unlinked and published again, and both generations pinned, the old
 * lease's release must not unpin the new copy (it once did, leaving the
 * new chunk evictable under its lease and the old bytes pinned forever).
 */
static void test_unpin_generation(void **state)
{
	struct tier *t = mk(8 * PAGE, 4 * PAGE, "lru", NULL);
	uint32_t ns = mkns(t, "ns"), found, l1, l2;
	struct kvfs_key k = mkkey(7), k8 = mkkey(8);
	uint64_t g1, g2, gx;
	struct tier_info info;
	struct tier_wr *w;

	(void)state;
	assert_int_equal(put_chunk(t, ns, &k, 4 * PAGE, 0), 0);
	assert_int_equal(tier_lookup_pinned(t, ns, &k, 1, 0, false, NULL,
					    &found, &l1, &l2), -EINVAL);
	assert_int_equal(tier_lookup_pinned(t, ns, &k, 1, 0, false, &g1,
					    &found, &l1, &l2), 0);
	assert_int_equal(found, 1);
	assert_int_equal(tier_stat(t, ns, &k, &info), 0);
	assert_int_equal(info.gen, g1);
	assert_int_equal(tier_unlink(t, ns, &k), 0);
	assert_int_equal(put_chunk(t, ns, &k, PAGE, 0), 0);
	assert_int_equal(tier_lookup_pinned(t, ns, &k, 1, 0, false, &g2,
					    &found, &l1, &l2), 0);
	assert_true(g2 > g1);
	/* the old lease lets go: the new copy keeps its pin */
	tier_unpin_gen(t, ns, &k, g1);
	assert_int_equal(tier_stat(t, ns, &k, &info), 0);
	assert_int_equal(info.refs, 1);
	/* and the old bytes are free again: 4 pages fit beside the new
	 * pinned page and the rest */
	assert_int_equal(tier_wr_begin(t, ns, &k8, 4 * PAGE, &w), 0);
	assert_int_equal(tier_wr_pwrite(t, w, "x", 1, 4 * PAGE - 1), 0);
	tier_wr_abort(t, w);
	/* a stray release of a generation nobody pins changes nothing */
	gx = g2 + 1000;
	tier_unpin_gen(t, ns, &k, gx);
	assert_int_equal(tier_stat(t, ns, &k, &info), 0);
	assert_int_equal(info.refs, 1);
	tier_unpin_gen(t, ns, &k, g2);
	assert_int_equal(tier_stat(t, ns, &k, &info), 0);
	assert_int_equal(info.refs, 0);
	tier_destroy(t);
}

/*
 * tier_pin_l1 pins only the publication asked for (fs/paths/ keeps a
 * replaced version's bytes for the opens racing its replacement), and
 * tier_chunk_dup is a pin of its own: the replaced bytes stay readable
 * through either until both let go, while new readers get the new ones.
 */
static void test_pin_l1_dup(void **state)
{
	struct tier *t = mk(8 * PAGE, 4 * PAGE, "lru", NULL);
	uint32_t ns = mkns(t, "ns");
	struct kvfs_key k = mkkey(9), none = mkkey(10);
	struct tier_chunk *c, *d;
	struct tier_info info;
	struct tier_stats st;
	struct tier_wr *w;
	uint8_t back[4 * PAGE];
	uint64_t g0;

	(void)state;
	assert_int_equal(put_chunk(t, ns, &k, 4 * PAGE, 0), 0);
	assert_int_equal(tier_stat(t, ns, &k, &info), 0);
	g0 = info.gen;
	assert_int_equal(tier_pin_l1(t, ns, &k, info.gen + 1, &c), -ENOENT);
	assert_int_equal(tier_pin_l1(t, ns, &none, info.gen, &c), -ENOENT);
	assert_int_equal(tier_pin_l1(t, ns + 100, &k, info.gen, &c), -ENOENT);
	assert_int_equal(tier_pin_l1(t, ns, &k, info.gen, &c), 0);
	assert_int_equal(tier_chunk_gen(c), info.gen);
	assert_int_equal(tier_stat(t, ns, &k, &info), 0);
	assert_int_equal(info.refs, 1);
	/* a new version replaces it: the pin keeps the old bytes */
	assert_int_equal(tier_wr_begin(t, ns, NULL, 0, &w), 0);
	memset(back, 0xEE, sizeof(back));
	assert_int_equal(tier_wr_pwrite(t, w, back, 100, 0), 0);
	assert_int_equal(tier_wr_publish_replace(t, w, &k), 0);
	assert_int_equal(tier_pin_l1(t, ns, &k, g0, &d), -ENOENT);
	assert_int_equal(tier_chunk_dup(t, c, &d), 0);
	tier_put(t, c);
	assert_int_equal(tier_chunk_gen(d), g0);
	check_old_new(t, ns, &k, d);
	tier_get_stats(t, &st);
	assert_int_equal(st.l1_pinned_bytes, 4 * PAGE);
	tier_put(t, d);
	tier_get_stats(t, &st);
	assert_int_equal(st.l1_pinned_bytes, 0);
	assert_int_equal(st.l1_bytes, PAGE);
	tier_destroy(t);
}

static void test_lookup_pin_parent(void **state)
{
	struct gone_log g;
	struct tier *t = mk(4 * PAGE, PAGE, "prefix", &g);
	uint32_t ns = mkns(t, "ns"), found, l1, l2;
	struct kvfs_key k[5];
	struct tier_info info;
	struct tier_stats st;

	(void)state;
	for (int i = 0; i < 5; i++)
		k[i] = mkkey((uint32_t)i + 40);
	/* Published in reverse, parents unknown to the writers. */
	for (int i = 2; i >= 0; i--)
		assert_int_equal(put_chunk(t, ns, &k[i], 10, 0), 0);
	assert_int_equal(tier_lookup(t, ns, k, 5, 10, true, true, &found, &l1,
				     &l2), 0);
	assert_int_equal(found, 3);
	/* lookups count no hits or misses in the engine (fs counts what
	 * the caller is told); name misses never go below zero */
	tier_get_stats(t, &st);
	assert_int_equal(st.read_misses, 0);
	assert_int_equal(st.read_hits[TIER_FROM_L1], 0);
	tier_count_name_misses(t, 2);
	tier_count_name_misses(t, -5);
	tier_get_stats(t, &st);
	assert_int_equal(st.name_misses, 0);
	assert_int_equal(l1, 3);
	assert_int_equal(l2, 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(tier_stat(t, ns, &k[i], &info), 0);
		assert_int_equal(info.refs, 1);
		assert_int_equal(info.depth, 10 + (uint32_t)i);
		assert_int_equal(info.has_parent, i > 0);
		if (i)
			assert_memory_equal(&info.parent, &k[i - 1], 16);
	}
	/* Pinned run: only one free page left, and the pins hold. */
	assert_int_equal(put_chunk(t, ns, &k[3], 10, 0), 0);
	assert_int_equal(put_chunk(t, ns, &k[4], 10, 0), 0);
	assert_int_equal(g.n, 1);
	assert_memory_equal(&g.keys[0], &k[3], 16);
	for (int i = 0; i < 3; i++)
		tier_unpin_key(t, ns, &k[i]);
	/* Extra unpins are ignored (no underflow). */
	tier_unpin_key(t, ns, &k[0]);
	assert_int_equal(tier_stat(t, ns, &k[0], &info), 0);
	assert_int_equal(info.refs, 0);
	/* The lookup taught the engine the chain: leaves go first. */
	assert_int_equal(put_chunk(t, ns, &k[3], 10, 0), 0);
	assert_int_equal(g.n, 2);
	assert_memory_equal(&g.keys[1], &k[2], 16);
	assert_int_equal(tier_set_parent(t, ns, &k[3], &k[4], 7), 0);
	assert_int_equal(tier_stat(t, ns, &k[3], &info), 0);
	assert_memory_equal(&info.parent, &k[4], 16);
	assert_int_equal(info.depth, 7);
	/* Known values are not overwritten. */
	assert_int_equal(tier_set_parent(t, ns, &k[3], &k[0], 9), 0);
	assert_int_equal(tier_stat(t, ns, &k[3], &info), 0);
	assert_memory_equal(&info.parent, &k[4], 16);
	assert_int_equal(info.depth, 7);
	assert_int_equal(tier_set_parent(t, ns, &k[2], &k[1], 1), -ENOENT);
	assert_int_equal(tier_lookup(t, 77, k, 1, 0, 0, 0, &found, &l1, &l2),
			 -ENOENT);
	tier_destroy(t);
}

static void test_user_pin(void **state)
{
	struct gone_log g;
	struct tier *t = mk(2 * PAGE, PAGE, "fifo", &g);
	uint32_t ns = mkns(t, "ns");
	struct kvfs_key a = mkkey(1), b = mkkey(2), c = mkkey(3);
	struct tier_info info;

	(void)state;
	assert_int_equal(put_chunk(t, ns, &a, 10, 0), 0);
	assert_int_equal(put_chunk(t, ns, &b, 10, 0), 0);
	assert_int_equal(tier_set_user_pin(t, ns, &a, true), 0);
	assert_int_equal(tier_set_user_pin(t, ns, &a, true), 0); /* idempotent */
	assert_int_equal(tier_stat(t, ns, &a, &info), 0);
	assert_true(info.user_pin);
	assert_int_equal(info.refs, 1);
	assert_int_equal(put_chunk(t, ns, &c, 10, 0), 0);
	assert_int_equal(g.n, 1);
	assert_memory_equal(&g.keys[0], &b, 16); /* FIFO would take a */
	assert_int_equal(tier_set_user_pin(t, ns, &a, false), 0);
	assert_int_equal(tier_stat(t, ns, &a, &info), 0);
	assert_false(info.user_pin);
	assert_int_equal(info.refs, 0);
	assert_int_equal(tier_set_user_pin(t, ns, &b, true), -ENOENT);
	/* Unlink drops the user pin with the chunk. */
	assert_int_equal(tier_set_user_pin(t, ns, &c, true), 0);
	assert_int_equal(tier_unlink(t, ns, &c), 0);
	assert_int_equal(put_chunk(t, ns, &b, PAGE, 0), 0);
	assert_int_equal(g.n, 1);
	tier_destroy(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_enospc_pinned),
		cmocka_unit_test(test_grow_enospc),
		cmocka_unit_test(test_unlink_pinned),
		cmocka_unit_test(test_unpin_generation),
		cmocka_unit_test(test_pin_l1_dup),
		cmocka_unit_test(test_lookup_pin_parent),
		cmocka_unit_test(test_user_pin),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
