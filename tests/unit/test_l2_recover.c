/*
 * test_l2_recover.c - recovery of the L2 segment log: a reopen finds every
 * live record again; a corrupt payload or header and a torn tail are
 * dropped (a miss, never wrong bytes).
 */
#include "l2_test.h"

static void test_reopen_recovers(void **state)
{
	struct env *e = env_new();
	size_t len = 200 * 1024;
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct kvfs_key k;
	struct l2_stats st;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	for (uint64_t i = 0; i < 40; i++) {
		k = mkkey(i);
		fill_bf16(buf, len, i);
		assert_int_equal(put(e, i % 2 ? "a.r0" : "b.r1", &k, buf, len,
				     1, 2, true, NULL), 0);
	}
	/* key 3 rewritten: the old copy is not freed (as after a crash) */
	k = mkkey(3);
	fill_bf16(buf, len, 1003);
	assert_int_equal(put(e, "a.r0", &k, buf, len, 1, 2, false, NULL), 0);
	/* key 5 unlinked: freed, must not come back; once l2_sync_frees
	 * returns, its header is gone from the file (a crash now would not
	 * recover it) */
	k = mkkey(5);
	{
		struct l2_loc loc = find(e, "a.r0", &k)->loc;
		uint8_t hdr[64], zero[64] = { 0 };
		char p[256];
		int fd;

		l2_free(e->l2, &loc);
		assert_int_equal(l2_sync_frees(e->l2, 5000), 0);
		seg_path(e, loc.seg, p, sizeof(p));
		fd = open(p, O_RDONLY);
		assert_true(fd >= 0);
		assert_int_equal(pread(fd, hdr, sizeof(hdr),
				       (off_t)loc.blk * L2_ALIGN),
				 (ssize_t)sizeof(hdr));
		close(fd);
		assert_memory_equal(hdr, zero, sizeof(hdr));
	}
	l2_close(e->l2);
	e->l2 = NULL;

	env_reset_index(e);
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	l2_get_stats(e->l2, &st);
	assert_int_equal(e->recovered, 39);
	assert_int_equal(st.recovered, 39);
	assert_int_equal(st.records, 39);
	assert_int_equal(st.corrupt, 0);
	assert_int_equal(st.torn, 0);
	for (uint64_t i = 0; i < 40; i++) {
		const char *ns = i % 2 ? "a.r0" : "b.r1";

		k = mkkey(i);
		if (i == 5) {
			assert_int_equal(get(e, ns, &k, back, len), -ENOENT);
			continue;
		}
		fill_bf16(buf, len, i == 3 ? 1003 : i);
		assert_int_equal(find(e, ns, &k)->raw_len, len);
		assert_int_equal(get(e, ns, &k, back, len), 0);
		assert_memory_equal(buf, back, len);
	}
	/* new appends after a reopen go on with fresh records */
	k = mkkey(100);
	fill_bf16(buf, len, 100);
	assert_int_equal(put(e, "b.r1", &k, buf, len, 1, 2, true, NULL), 0);
	l2_close(e->l2);
	e->l2 = NULL;
	env_reset_index(e);
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	assert_int_equal(e->recovered, 40);
	assert_int_equal(get(e, "b.r1", &k, back, len), 0);
	assert_memory_equal(buf, back, len);
	free(buf);
	free(back);
	env_free(e);
}

static void corrupt_case(bool header)
{
	struct env *e = env_new();
	size_t len = 128 * 1024;
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct l2_loc loc[3];
	struct kvfs_key k;
	struct l2_stats st;
	char err[256];

	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	for (uint64_t i = 0; i < 3; i++) {
		k = mkkey(i);
		fill_bf16(buf, len, i);
		assert_int_equal(put(e, "ns", &k, buf, len, 1, 2, true, &loc[i]),
				 0);
	}
	/* header: a byte of the key; payload: a byte in the middle */
	flip_byte(e, &loc[1], header ? offsetof(struct l2_rec_hdr, key) + 3 :
		  sizeof(struct l2_rec_hdr) + 1000);
	k = mkkey(1);
	assert_int_equal(get(e, "ns", &k, back, len), -EBADMSG);
	l2_get_stats(e->l2, &st);
	assert_int_equal(st.corrupt, 1);
	assert_true(e->nlogs > 0);
	k = mkkey(2);
	assert_int_equal(get(e, "ns", &k, back, len), 0);
	l2_close(e->l2);
	e->l2 = NULL;

	/* recovery skips it and counts it; its neighbours are intact */
	env_reset_index(e);
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	l2_get_stats(e->l2, &st);
	assert_int_equal(e->recovered, 2);
	assert_int_equal(st.corrupt, 1);
	k = mkkey(1);
	assert_null(find(e, "ns", &k));
	for (uint64_t i = 0; i < 3; i += 2) {
		k = mkkey(i);
		fill_bf16(buf, len, i);
		assert_int_equal(get(e, "ns", &k, back, len), 0);
		assert_memory_equal(buf, back, len);
	}
	free(buf);
	free(back);
	env_free(e);
}

static void test_corrupt_payload(void **state)
{
	(void)state;
	corrupt_case(false);
}

static void test_corrupt_header(void **state)
{
	(void)state;
	corrupt_case(true);
}

static void test_torn_tail(void **state)
{
	struct env *e = env_new();
	size_t len = 256 * 1024;
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct l2_loc loc[3];
	struct kvfs_key k;
	struct l2_stats st;
	char err[256], p[256];

	(void)state;
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	for (uint64_t i = 0; i < 3; i++) {
		k = mkkey(i);
		fill_random(buf, len, i);
		assert_int_equal(put(e, "ns", &k, buf, len, 1, 0, true, &loc[i]),
				 0);
	}
	l2_close(e->l2);
	e->l2 = NULL;
	assert_int_equal(loc[2].seg, loc[0].seg);
	seg_path(e, loc[2].seg, p, sizeof(p));
	/* cut the last record in the middle of its payload */
	assert_int_equal(truncate(p, (off_t)loc[2].blk * L2_ALIGN + 100000), 0);

	env_reset_index(e);
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	l2_get_stats(e->l2, &st);
	assert_int_equal(e->recovered, 2);
	assert_int_equal(st.torn, 1);
	for (uint64_t i = 0; i < 2; i++) {
		k = mkkey(i);
		fill_random(buf, len, i);
		assert_int_equal(get(e, "ns", &k, back, len), 0);
		assert_memory_equal(buf, back, len);
	}
	k = mkkey(2);
	assert_null(find(e, "ns", &k));
	/* and the log goes on */
	fill_random(buf, len, 2);
	assert_int_equal(put(e, "ns", &k, buf, len, 1, 0, true, NULL), 0);
	assert_int_equal(get(e, "ns", &k, back, len), 0);
	assert_memory_equal(buf, back, len);
	free(buf);
	free(back);
	env_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reopen_recovers),
		cmocka_unit_test(test_corrupt_payload),
		cmocka_unit_test(test_corrupt_header),
		cmocka_unit_test(test_torn_tail),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
