/*
 * test_l2_reclaim.c - reclaim of the L2 segment log: newer copies and hot
 * or pinned records survive it (remove-if-match, moves), and a small L2
 * fills most of its size before its first reclaim.
 */
#include "l2_test.h"

static void test_reclaim_keeps_newer(void **state)
{
	struct env *e = env_new();
	const uint64_t size = 1 << 20; /* 4 segments of 256 KiB */
	size_t len = 60 * 1024;        /* raw (random): 16 blocks a record */
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct l2_loc a_old, a_new;
	struct l2_stats st;
	struct kvfs_key ka = mkkey(1000), kh = mkkey(2000), k;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, size, err, sizeof(err)), 0);
	/* A's first copy, then a hot chunk H */
	fill_random(buf, len, 1);
	assert_int_equal(put(e, "ns", &ka, buf, len, 1, 0, true, &a_old), 0);
	fill_random(buf, len, 2);
	assert_int_equal(put(e, "ns", &kh, buf, len, 1, 0, true, NULL), 0);
	pthread_mutex_lock(&e->mu);
	find(e, "ns", &kh)->hot = true;
	pthread_mutex_unlock(&e->mu);
	/* fill a segment, then A's newer copy; the engine (as after a race)
	 * has not freed the old copy, so the reclaim meets it live */
	for (uint64_t i = 0; i < 6; i++) {
		k = mkkey(i);
		fill_random(buf, len, 100 + i);
		assert_int_equal(put(e, "ns", &k, buf, len, 1, 0, true, NULL), 0);
	}
	fill_random(buf, len, 3);
	assert_int_equal(put(e, "ns", &ka, buf, len, 1, 0, false, &a_new), 0);
	pthread_mutex_lock(&e->mu);
	find(e, "ns", &ka)->hot = true;
	pthread_mutex_unlock(&e->mu);
	assert_true(a_new.seg > a_old.seg);

	/* many cold chunks: the log wraps several times */
	for (uint64_t i = 6; i < 120; i++) {
		k = mkkey(i);
		fill_random(buf, len, 100 + i);
		assert_int_equal(put(e, "ns", &k, buf, len, 1, 0, true, NULL), 0);
		assert_true(dir_bytes(e->dir) <= size);
		l2_get_stats(e->l2, &st);
		assert_true(st.disk_bytes <= size);
	}
	l2_get_stats(e->l2, &st);
	assert_true(st.reclaims >= 3);
	assert_true(st.moves >= 2);
	assert_true(e->dropped > 50);
	/* the moved copies were fdatasync'ed before their segment went */
	assert_true(st.syncs >= 1);

	/* A: still the newer copy, readable, never deleted by a reclaim */
	fill_random(buf, len, 3);
	assert_int_equal(get(e, "ns", &ka, back, len), 0);
	assert_memory_equal(buf, back, len);
	/* H: hot, moved along instead of dropped */
	fill_random(buf, len, 2);
	assert_int_equal(get(e, "ns", &kh, back, len), 0);
	assert_memory_equal(buf, back, len);
	/* old cold chunks are gone from the index, recent ones readable */
	k = mkkey(0);
	assert_int_equal(get(e, "ns", &k, back, len), -ENOENT);
	k = mkkey(119);
	fill_random(buf, len, 219);
	assert_int_equal(get(e, "ns", &k, back, len), 0);
	assert_memory_equal(buf, back, len);
	assert_int_equal(st.corrupt, 0);
	assert_int_equal(st.errors, 0);

	/* reopen: only live records come back, the newest copy of A */
	l2_close(e->l2);
	e->l2 = NULL;
	env_reset_index(e);
	assert_int_equal(env_open(e, size, err, sizeof(err)), 0);
	fill_random(buf, len, 3);
	assert_int_equal(get(e, "ns", &ka, back, len), 0);
	assert_memory_equal(buf, back, len);
	fill_random(buf, len, 2);
	assert_int_equal(get(e, "ns", &kh, back, len), 0);
	assert_memory_equal(buf, back, len);
	free(buf);
	free(back);
	env_free(e);
}

/* Everything hot: reclaims can keep only part of each segment, appends
 * must still make progress and stay within l2_size. */
static void test_reclaim_all_hot(void **state)
{
	struct env *e = env_new();
	const uint64_t size = 1 << 20;
	size_t len = 60 * 1024;
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct l2_stats st;
	unsigned readable = 0;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, size, err, sizeof(err)), 0);
	for (uint64_t i = 0; i < 80; i++) {
		struct kvfs_key k = mkkey(i);

		fill_random(buf, len, i);
		assert_int_equal(put(e, "ns", &k, buf, len, 1, 0, true, NULL), 0);
		pthread_mutex_lock(&e->mu);
		find(e, "ns", &k)->hot = true;
		pthread_mutex_unlock(&e->mu);
		assert_true(dir_bytes(e->dir) <= size);
	}
	for (uint64_t i = 0; i < 80; i++) {
		struct kvfs_key k = mkkey(i);
		int rc;

		fill_random(buf, len, i);
		rc = get(e, "ns", &k, back, len);
		if (rc == -ENOENT)
			continue;
		assert_int_equal(rc, 0);
		assert_memory_equal(buf, back, len);
		readable++;
	}
	l2_get_stats(e->l2, &st);
	assert_int_equal(readable, st.records);
	assert_true(readable >= 8);
	assert_true(st.moves > 0);
	free(buf);
	free(back);
	env_free(e);
}

/*
 * Everything hot, and two records pinned (a reclaim moves at most half a
 * segment: two of these records): hot records ahead of them in a segment
 * must not spend the move budget they need. Both survive many reclaims.
 */
static void test_reclaim_pinned_first(void **state)
{
	struct env *e = env_new();
	const uint64_t size = 1 << 20;
	size_t len = 60 * 1024;
	uint8_t *buf = malloc(len), *back = malloc(len);
	static const uint64_t pinned[] = { 3, 23 };
	struct l2_stats st;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, size, err, sizeof(err)), 0);
	for (uint64_t i = 0; i < 120; i++) {
		struct kvfs_key k = mkkey(i);
		struct ment *m;

		fill_random(buf, len, i);
		assert_int_equal(put(e, "ns", &k, buf, len, 1, 0, true, NULL), 0);
		pthread_mutex_lock(&e->mu);
		m = find(e, "ns", &k);
		m->hot = true;
		m->pinned = i == 3 || i == 23;
		pthread_mutex_unlock(&e->mu);
		assert_true(dir_bytes(e->dir) <= size);
	}
	for (size_t j = 0; j < sizeof(pinned) / sizeof(pinned[0]); j++) {
		struct kvfs_key k = mkkey(pinned[j]);

		fill_random(buf, len, pinned[j]);
		assert_int_equal(get(e, "ns", &k, back, len), 0);
		assert_memory_equal(buf, back, len);
	}
	l2_get_stats(e->l2, &st);
	assert_true(st.reclaims >= 10);
	free(buf);
	free(back);
	env_free(e);
}

/*
 * A small L2 uses most of l2_size: with l2_size=8M and 700 KB records
 * (random bytes, stored raw) the log fills to well over 70% of l2_size
 * before its first reclaim and stays above half of it afterwards, never
 * going past l2_size on disk; the newest records stay readable.
 */
static void test_small_l2_fills_up(void **state)
{
	struct env *e = env_new();
	const uint64_t size = 8ull << 20;
	size_t len = 700 * 1000;
	uint8_t *buf = malloc(len), *back = malloc(len);
	uint64_t peak = 0, low = UINT64_MAX;
	struct l2_stats st;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, size, err, sizeof(err)), 0);
	for (uint64_t i = 0; i < 60; i++) {
		struct kvfs_key k = mkkey(i);

		fill_random(buf, len, 7000 + i);
		assert_int_equal(put(e, "ns", &k, buf, len, 1, 0, true, NULL), 0);
		l2_get_stats(e->l2, &st);
		assert_true(st.disk_bytes <= size);
		assert_true(dir_bytes(e->dir) <= size);
		if (st.reclaims == 0 && st.bytes > peak)
			peak = st.bytes;
		if (i >= 30 && st.bytes < low)
			low = st.bytes;
	}
	fprintf(stderr, "# l2_size 8M, 700 KB records: %" PRIu64 " bytes before "
		"the first reclaim (%.0f%%), at least %" PRIu64 " (%.0f%%) after, "
		"%" PRIu64 " reclaims\n", peak, 100.0 * (double)peak / (double)size,
		low, 100.0 * (double)low / (double)size, st.reclaims);
	assert_true(peak >= size * 7 / 10);
	assert_true(low >= size / 2);
	assert_true(st.reclaims >= 1);
	assert_int_equal(st.errors, 0);
	for (uint64_t i = 55; i < 60; i++) {
		struct kvfs_key k = mkkey(i);

		fill_random(buf, len, 7000 + i);
		assert_int_equal(get(e, "ns", &k, back, len), 0);
		assert_memory_equal(buf, back, len);
	}
	free(buf);
	free(back);
	env_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reclaim_pinned_first),
		cmocka_unit_test(test_reclaim_keeps_newer),
		cmocka_unit_test(test_reclaim_all_hot),
		cmocka_unit_test(test_small_l2_fills_up),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
