/*
 * test_tier.c - the cache engine (tier/) with an L1 host arena: config
 * validation, namespaces, atomic publication, writer errors, concurrent
 * writes, stats of two engines, the key of a writer its owner closed. Pins are in test_tier_pin.c, eviction in
 * test_tier_evict.c, the device arena in test_tier_device.c.
 */
#include <time.h>

#include "tier_test.h"

/* ------------------------------------------------------------- config */

static void test_config(void **state)
{
	struct tier_config cfg;
	struct tier *t = NULL;
	char err[256];

	(void)state;
	tier_config_default(&cfg);
	assert_int_equal(cfg.max_chunk, 64ull << 20);
	assert_string_equal(cfg.policy, "prefix");

	cfg.l1_size = 100;
	cfg.max_chunk = 64;
	err[0] = 0;
	assert_int_equal(tier_create(&cfg, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "l1_size"));
	assert_null(t);

	tier_config_default(&cfg);
	cfg.l1_size = 1 << 20;
	cfg.max_chunk = 2 << 20;
	err[0] = 0;
	assert_int_equal(tier_create(&cfg, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "max_chunk"));

	tier_config_default(&cfg);
	cfg.l1_size = 1 << 20;
	cfg.max_chunk = 1 << 20;
	cfg.policy = "mru";
	err[0] = 0;
	assert_int_equal(tier_create(&cfg, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "mru"));
	for (const char *const *n = policy_names(); *n; n++)
		assert_non_null(strstr(err, *n));

	cfg.policy = NULL;
	assert_int_equal(tier_create(&cfg, &t, err, sizeof(err)), -EINVAL);

	cfg.policy = "lru";
	/* L2 config errors (tier_l2.c; the L2 tests are in test_l2.c) */
	cfg.l2_dir = "/tmp";
	cfg.l2_size = 4096;
	err[0] = 0;
	assert_int_equal(tier_create(&cfg, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "l2_size"));
	cfg.l2_size = 0;

	cfg.l2_dir = NULL;
	cfg.l1 = "bogus";
	assert_int_equal(tier_create(&cfg, &t, err, sizeof(err)), -EINVAL);
	assert_null(t);

	/* The smallest arena: one page, one chunk of one page. */
	cfg.l1 = "host";
	cfg.l1_size = PAGE;
	cfg.max_chunk = PAGE;
	assert_int_equal(tier_create(&cfg, &t, err, sizeof(err)), 0);
	tier_destroy(t);
}

/* --------------------------------------------------------- namespaces */

static void test_namespaces(void **state)
{
	struct tier *t = mk(1 << 20, 1 << 16, "lru", NULL);
	char longname[KVFS_NS_NAME_MAX + 2];
	struct tier_ns_info info;
	uint32_t a, b, id, ids[4];
	struct kvfs_key k = mkkey(1);

	(void)state;
	a = mkns(t, "llama.bf16.tp2.r0");
	b = mkns(t, "other");
	assert_int_not_equal(a, b);
	assert_int_equal(tier_ns_create(t, "other", &id), -EEXIST);
	assert_int_equal(tier_ns_create(t, ".hidden", &id), -EINVAL);
	assert_int_equal(tier_ns_create(t, "a/b", &id), -EINVAL);
	assert_int_equal(tier_ns_create(t, "", &id), -EINVAL);
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	assert_int_equal(tier_ns_create(t, longname, &id), -ENAMETOOLONG);
	longname[KVFS_NS_NAME_MAX] = 0;
	assert_int_equal(tier_ns_create(t, longname, &id), 0);

	assert_int_equal(tier_ns_find(t, "other", &id), 0);
	assert_int_equal(id, b);
	assert_int_equal(tier_ns_find(t, "nope", &id), -ENOENT);
	assert_int_equal(tier_ns_list(t, ids, 2), 3);

	assert_int_equal(tier_ns_set_chunk_bytes(t, a, 8192), 0);
	assert_int_equal(tier_ns_set_chunk_bytes(t, a, 1 << 20), -EFBIG);
	assert_int_equal(tier_ns_set_shuffle(t, a, 3), -EINVAL);
	assert_int_equal(tier_ns_set_shuffle(t, a, 2), 0);
	assert_int_equal(tier_ns_info(t, a, &info), 0);
	assert_string_equal(info.name, "llama.bf16.tp2.r0");
	assert_int_equal(info.chunk_bytes, 8192);
	assert_int_equal(info.shuffle, 2);

	/* Chunks in the same key space of two namespaces are distinct. */
	assert_int_equal(put_chunk(t, b, &k, 100, 0), 0);
	assert_int_equal(tier_stat(t, a, &k, &(struct tier_info){0}), -ENOENT);
	assert_int_equal(tier_ns_remove(t, b), -ENOTEMPTY);
	assert_int_equal(tier_unlink(t, b, &k), 0);
	{
		/* A writer in flight keeps the namespace too. */
		struct tier_wr *w;

		assert_int_equal(tier_wr_begin(t, b, NULL, 0, &w), 0);
		assert_int_equal(tier_ns_remove(t, b), -ENOTEMPTY);
		tier_wr_abort(t, w);
	}
	assert_int_equal(tier_ns_remove(t, b), 0);
	assert_int_equal(tier_ns_remove(t, b), -ENOENT);
	assert_int_equal(tier_ns_find(t, "other", &id), -ENOENT);
	/* Ids are not reused. */
	assert_int_equal(tier_ns_create(t, "other", &id), 0);
	assert_int_not_equal(id, b);
	assert_int_equal(tier_ns_info(t, b, &info), -ENOENT);
	tier_destroy(t);
}

/* -------------------------------------------------------- publication */

static void test_publish_invisible(void **state)
{
	struct tier *t = mk(1 << 20, 1 << 18, "lru", NULL);
	uint32_t ns = mkns(t, "ns"), found = 9, l1, l2;
	struct kvfs_key k = mkkey(7);
	struct tier_dirent *d;
	struct tier_chunk *c;
	struct tier_info info;
	struct tier_wr *w;
	uint8_t buf[10000], back[10000];
	uint64_t sum;
	size_t n;

	(void)state;
	fill(&k, buf, sizeof(buf));
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w), 0);
	assert_int_equal(tier_wr_pwrite(t, w, buf, 5000, 0), 0);
	assert_int_equal(tier_wr_pwrite(t, w, buf + 5000, 5000, 5000), 0);
	assert_int_equal(tier_wr_size(w), 10000);
	/* Readable by the writer (O_RDWR), by nobody else. */
	assert_int_equal(tier_wr_pread(t, w, back, sizeof(back), 0), 10000);
	assert_memory_equal(back, buf, sizeof(buf));
	assert_int_equal(tier_wr_pread(t, w, back, 10, 10000), 0);
	assert_int_equal(tier_stat(t, ns, &k, &info), -ENOENT);
	assert_int_equal(tier_get(t, ns, &k, &c), -ENOENT);
	assert_int_equal(tier_lookup(t, ns, &k, 1, 0, false, false, &found,
				     &l1, &l2), 0);
	assert_int_equal(found, 0);
	assert_int_equal(tier_ns_snapshot(t, ns, &d, &n), 0);
	assert_int_equal(n, 0);
	free(d);

	assert_int_equal(tier_wr_publish(t, w, NULL), 0);
	assert_int_equal(tier_stat(t, ns, &k, &info), 0);
	assert_int_equal(info.size, 10000);
	assert_int_equal(info.stored_bytes, 10000);
	assert_int_equal(info.where, TIER_L1);
	assert_int_equal(info.refs, 0);
	/* computed on first request, not at publication */
	assert_false(info.checksum_known);
	assert_int_equal(tier_checksum(t, ns, &k, info.gen + 1, &sum), -ESTALE);
	assert_int_equal(tier_checksum(t, ns, &k, info.gen, &sum), 0);
	assert_int_equal(sum, hashkey_checksum(buf, sizeof(buf)));
	assert_int_equal(tier_stat(t, ns, &k, &info), 0);
	assert_true(info.checksum_known);
	assert_int_equal(info.checksum, sum);
	assert_true(info.gen > 0);
	assert_true(info.atime_ns > 0);
	assert_int_equal(tier_ns_snapshot(t, ns, &d, &n), 0);
	assert_int_equal(n, 1);
	assert_memory_equal(&d[0].key, &k, sizeof(k));
	assert_int_equal(d[0].size, 10000);
	assert_int_equal(d[0].gen, info.gen);
	free(d);
	check_chunk(t, ns, &k, 10000);
	assert_int_equal(tier_stat(t, ns, &k, &info), 0);
	assert_int_equal(info.hits, 1);
	tier_destroy(t);
}

static void test_holes_growth_truncate(void **state)
{
	struct tier *t = mk(1 << 20, 1 << 18, "fifo", NULL);
	uint32_t ns = mkns(t, "ns");
	struct kvfs_key k = mkkey(3);
	struct tier_chunk *c;
	struct tier_wr *w;
	uint8_t buf[3 * PAGE], back[20000];
	struct tier_stats st;

	(void)state;
	/* Dirty the arena so holes that are not zeroed would show. */
	memset(buf, 0xAA, sizeof(buf));
	for (uint32_t i = 100; i < 150; i++) {
		struct kvfs_key x = mkkey(i);

		assert_int_equal(tier_wr_begin(t, ns, &x, 0, &w), 0);
		assert_int_equal(tier_wr_pwrite(t, w, buf, sizeof(buf), 0), 0);
		tier_wr_abort(t, w);
	}
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w), 0);
	/* Unknown size, writes out of order, with a hole at [100, 12000). */
	assert_int_equal(tier_wr_pwrite(t, w, "tail", 4, 19996), 0);
	assert_int_equal(tier_wr_pwrite(t, w, buf, 100, 0), 0);
	assert_int_equal(tier_wr_size(w), 20000);
	assert_int_equal(tier_wr_truncate(t, w, 30000), 0);
	assert_int_equal(tier_wr_truncate(t, w, 20000), 0);
	tier_get_stats(t, &st);
	assert_int_equal(st.writers, 1);
	assert_true(st.writer_bytes >= 20000);
	assert_int_equal(tier_wr_truncate(t, w, (1 << 18) + 1), -EFBIG);
	assert_int_equal(tier_wr_publish(t, w, NULL), 0);
	tier_get_stats(t, &st);
	assert_int_equal(st.writers, 0);
	assert_int_equal(st.writer_bytes, 0);
	/* The tail was trimmed: 20000 bytes take 5 pages. */
	assert_int_equal(st.l1_bytes, 5 * PAGE);

	assert_int_equal(tier_get(t, ns, &k, &c), 0);
	assert_int_equal(tier_chunk_read(t, c, back, sizeof(back), 0), 20000);
	for (int i = 0; i < 100; i++)
		assert_int_equal(back[i], 0xAA);
	for (int i = 100; i < 19996; i++)
		if (back[i])
			fail_msg("hole byte %d is %d", i, back[i]);
	assert_memory_equal(back + 19996, "tail", 4);
	assert_int_equal(tier_chunk_read(t, c, back, 10, 20000), 0);
	assert_int_equal(tier_chunk_read(t, c, back, 10, 19998), 2);
	assert_int_equal(tier_chunk_offset(c) % PAGE, 0);
	tier_put(t, c);

	/* An empty chunk is a valid chunk to the engine and takes no arena
	 * (fs never publishes one: fs_wr_publish, fs_xfer's PUT). */
	k = mkkey(4);
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w), 0);
	assert_int_equal(tier_wr_truncate(t, w, 0), 0);
	assert_int_equal(tier_wr_publish(t, w, NULL), 0);
	assert_int_equal(tier_get(t, ns, &k, &c), 0);
	assert_int_equal(tier_chunk_size(c), 0);
	assert_int_equal(tier_chunk_read(t, c, back, 10, 0), 0);
	tier_put(t, c);
	tier_destroy(t);
}

static void test_eexist(void **state)
{
	struct tier *t = mk(1 << 20, 1 << 16, "lru", NULL);
	uint32_t ns = mkns(t, "ns");
	struct kvfs_key k = mkkey(1), k2 = mkkey(2);
	struct tier_wr *w1, *w2, *tmp;
	struct tier_stats st;

	(void)state;
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w1), 0);
	/* In-flight key: a second writer loses. */
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w2), -EEXIST);
	/* A temporary renamed onto an in-flight key loses too. */
	assert_int_equal(tier_wr_begin(t, ns, NULL, 0, &tmp), 0);
	assert_int_equal(tier_wr_pwrite(t, tmp, "x", 1, 0), 0);
	assert_int_equal(tier_wr_publish(t, tmp, &k), -EEXIST);
	assert_int_equal(tier_wr_pwrite(t, w1, "winner", 6, 0), 0);
	assert_int_equal(tier_wr_publish(t, w1, NULL), 0);
	/* Published key: begin and temporary publication both lose. */
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w2), -EEXIST);
	assert_int_equal(tier_wr_begin(t, ns, NULL, 0, &tmp), 0);
	assert_int_equal(tier_wr_pwrite(t, tmp, "loser!", 6, 0), 0);
	assert_int_equal(tier_wr_publish(t, tmp, &k), -EEXIST);
	/* The winner's bytes are intact. */
	{
		struct tier_chunk *c;
		char b[8];

		assert_int_equal(tier_get(t, ns, &k, &c), 0);
		assert_int_equal(tier_chunk_read(t, c, b, 8, 0), 6);
		assert_memory_equal(b, "winner", 6);
		tier_put(t, c);
	}
	/* A temporary without a key, a keyed writer given another key. */
	assert_int_equal(tier_wr_begin(t, ns, NULL, 0, &tmp), 0);
	assert_int_equal(tier_wr_publish(t, tmp, NULL), -EINVAL);
	assert_int_equal(tier_wr_begin(t, ns, &k2, 0, &w2), 0);
	assert_int_equal(tier_wr_publish(t, w2, &k), -EINVAL);
	/* The failed keyed writer released its reservation. */
	assert_int_equal(tier_wr_begin(t, ns, &k2, 0, &w2), 0);
	assert_int_equal(tier_wr_pwrite(t, w2, "x", 1, 0), 0);
	assert_int_equal(tier_wr_publish(t, w2, &k2), 0);
	/* A temporary published under a free key works. */
	k2 = mkkey(3);
	assert_int_equal(tier_wr_begin(t, ns, NULL, 0, &tmp), 0);
	assert_int_equal(tier_wr_pwrite(t, tmp, "abc", 3, 0), 0);
	assert_int_equal(tier_wr_publish(t, tmp, &k2), 0);
	tier_get_stats(t, &st);
	assert_int_equal(st.publishes, 3);
	assert_int_equal(st.discards, 4);
	assert_int_equal(st.writers, 0);
	assert_int_equal(tier_wr_begin(t, 999, &k2, 0, &w2), -ENOENT);
	tier_destroy(t);
}

static void test_efbig(void **state)
{
	struct tier *t = mk(1 << 20, 3 * PAGE, "lru", NULL);
	uint32_t ns = mkns(t, "ns");
	struct kvfs_key k = mkkey(1);
	struct tier_wr *w;
	uint8_t buf[PAGE] = { 1 };

	(void)state;
	assert_int_equal(tier_wr_begin(t, ns, &k, 3 * PAGE + 1, &w), -EFBIG);
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w), 0);
	assert_int_equal(tier_wr_pwrite(t, w, buf, PAGE, 2 * PAGE), 0);
	assert_int_equal(tier_wr_pwrite(t, w, buf, 2, 3 * PAGE - 1), -EFBIG);
	assert_int_equal(tier_wr_pwrite(t, w, buf, 1, UINT64_MAX), -EFBIG);
	assert_int_equal(tier_wr_pwrite(t, w, buf, 1, 3 * PAGE), -EFBIG);
	/* Earlier bytes unharmed, size unchanged. */
	assert_int_equal(tier_wr_size(w), 3 * PAGE);
	assert_int_equal(tier_wr_publish(t, w, NULL), 0);
	tier_destroy(t);
}

static void test_emsgsize(void **state)
{
	struct tier *t = mk(1 << 20, 1 << 16, "lru", NULL);
	uint32_t ns = mkns(t, "ns");
	struct kvfs_key k = mkkey(1);
	struct tier_info info;
	struct tier_stats st;
	struct tier_wr *w;
	uint8_t buf[8192];

	(void)state;
	fill(&k, buf, sizeof(buf));
	assert_int_equal(tier_ns_set_chunk_bytes(t, ns, 8192), 0);
	/* Short: discarded, never visible, the key is free again. */
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w), 0);
	assert_int_equal(tier_wr_pwrite(t, w, buf, 8000, 0), 0);
	assert_int_equal(tier_wr_publish(t, w, NULL), -EMSGSIZE);
	assert_int_equal(tier_stat(t, ns, &k, &info), -ENOENT);
	/* Long: same. */
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w), 0);
	assert_int_equal(tier_wr_pwrite(t, w, buf, 8192, 1), 0);
	assert_int_equal(tier_wr_publish(t, w, NULL), -EMSGSIZE);
	tier_get_stats(t, &st);
	assert_int_equal(st.discards, 2);
	assert_int_equal(st.publishes, 0);
	assert_int_equal(st.writer_bytes, 0);
	/* Exact: published. */
	assert_int_equal(put_chunk(t, ns, &k, 8192, 0), 0);
	check_chunk(t, ns, &k, 8192);
	tier_destroy(t);
}

/* Concurrent pwrites on one writer, with growth, are serialized: every
 * byte lands. */
struct pw_arg {
	struct tier *t;
	struct tier_wr *w;
	const struct kvfs_key *k;
	int part;
};

static void *pw_thread(void *arg)
{
	struct pw_arg *a = arg;
	uint8_t buf[PAGE];

	/* Part p writes pages p, p + 4, p + 8, ... in increasing order, so
	 * the extent grows while the others write. */
	for (uint32_t pg = (uint32_t)a->part; pg < 64; pg += 4) {
		for (uint32_t i = 0; i < PAGE; i++)
			buf[i] = pattern(a->k, (uint64_t)pg * PAGE + i);
		if (tier_wr_pwrite(a->t, a->w, buf, PAGE,
				   (uint64_t)pg * PAGE) != 0)
			return (void *)1;
	}
	return NULL;
}

static void test_concurrent_pwrite(void **state)
{
	struct tier *t = mk(1 << 20, 64 * PAGE, "lru", NULL);
	uint32_t ns = mkns(t, "ns");
	struct kvfs_key k = mkkey(9);
	struct pw_arg args[4];
	pthread_t th[4];
	struct tier_wr *w;

	(void)state;
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w), 0);
	for (int i = 0; i < 4; i++) {
		args[i] = (struct pw_arg){ t, w, &k, i };
		assert_int_equal(pthread_create(&th[i], NULL, pw_thread,
						&args[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		void *rc;

		pthread_join(th[i], &rc);
		assert_null(rc);
	}
	assert_int_equal(tier_wr_size(w), 64 * PAGE);
	assert_int_equal(tier_wr_publish(t, w, NULL), 0);
	check_chunk(t, ns, &k, 64 * PAGE);
	tier_destroy(t);
}

static void test_stats_two_engines(void **state)
{
	struct tier *t1 = mk(1 << 20, 1 << 16, "s3fifo", NULL);
	struct tier *t2 = mk(1 << 20, 1 << 16, "lru", NULL);
	uint32_t n1 = mkns(t1, "a"), n2 = mkns(t2, "a");
	struct kvfs_key k = mkkey(1), m = mkkey(2);
	struct tier_arena_info ai;
	struct tier_ns_info ni;
	struct tier_stats st;
	struct tier_chunk *c;
	uint8_t ipc[64];
	uint64_t off;
	void *cookie = (void *)1;

	(void)state;
	assert_int_equal(put_chunk(t1, n1, &k, 5000, 0), 0);
	assert_int_equal(tier_get(t2, n2, &k, &c), -ENOENT);
	assert_int_equal(tier_get(t1, n1, &m, &c), -ENOENT);
	assert_int_equal(tier_get(t1, n1, &k, &c), 0);
	assert_int_equal(tier_chunk_gen(c), 1);
	assert_int_equal(tier_arena_export(t1, c, 0, 0, ipc, &off, &cookie),
			 -ENOTSUP);
	assert_null(cookie);
	tier_arena_unexport(t1, NULL);
	tier_put(t1, c);
	tier_get_stats(t1, &st);
	assert_int_equal(st.l1_capacity, 1 << 20);
	assert_int_equal(st.l1_chunks, 1);
	assert_int_equal(st.l1_bytes, 2 * PAGE);
	assert_int_equal(st.read_hits[TIER_FROM_L1], 1);
	assert_int_equal(st.read_misses, 1);
	assert_int_equal(st.publishes, 1);
	assert_int_equal(st.l2_capacity, 0);
	assert_true(st.meta_bytes > 0);
	tier_get_stats(t2, &st);
	assert_int_equal(st.read_misses, 1);
	assert_int_equal(st.publishes, 0);
	assert_int_equal(tier_ns_info(t1, n1, &ni), 0);
	assert_int_equal(ni.chunks, 1);
	assert_int_equal(ni.bytes, 5000);
	assert_int_equal(ni.hits, 1);
	tier_arena_info(t1, &ai);
	assert_non_null(ai.backend);
	assert_int_equal(ai.kind, KVFS_HANDLE_HOST_MMAP);
	assert_int_equal(ai.size, 1 << 20);
	assert_string_equal(ai.backend, "host");
	tier_destroy(t1);
	tier_destroy(t2);
}

/* A writer its owner closed (tier_wr_closed) holds its key only until its
 * abort, which a new writer of the key waits for; an open writer's key is
 * EEXIST at once, a closed one that stays is EEXIST after the wait. */
struct abort_later {
	struct tier *t;
	struct tier_wr *w;
};

static void *abort_later_main(void *arg)
{
	struct abort_later *a = arg;

	usleep(50000);
	tier_wr_abort(a->t, a->w);
	return NULL;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_closed_writer(void **state)
{
	struct tier *t = mk(8u << 20, 1u << 20, "lru", NULL);
	uint32_t ns = mkns(t, "cw");
	struct kvfs_key k = mkkey(7);
	struct tier_wr *w1, *w2;
	struct abort_later a;
	pthread_t th;
	double t0;

	(void)state;
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w1), 0);
	/* open: taken, no wait */
	t0 = mono_s();
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w2), -EEXIST);
	assert_true(mono_s() - t0 < TIER_WR_CLOSED_WAIT_MS / 2000.0);
	/* closed, then gone (its release): the new writer gets the key */
	tier_wr_closed(t, w1);
	a = (struct abort_later){ t, w1 };
	assert_int_equal(pthread_create(&th, NULL, abort_later_main, &a), 0);
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w2), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	/* closed and staying (a dup of the fd lives on): EEXIST after the
	 * wait */
	tier_wr_closed(t, w2);
	t0 = mono_s();
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w1), -EEXIST);
	assert_true(mono_s() - t0 >= TIER_WR_CLOSED_WAIT_MS / 2000.0);
	tier_wr_abort(t, w2);
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w1), 0);
	tier_wr_abort(t, w1);
	tier_destroy(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_namespaces),
		cmocka_unit_test(test_publish_invisible),
		cmocka_unit_test(test_holes_growth_truncate),
		cmocka_unit_test(test_eexist),
		cmocka_unit_test(test_efbig),
		cmocka_unit_test(test_emsgsize),
		cmocka_unit_test(test_concurrent_pwrite),
		cmocka_unit_test(test_stats_two_engines),
		cmocka_unit_test(test_closed_writer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
