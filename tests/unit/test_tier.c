/*
 * test_tier.c - the cache engine (tier/) with an L1 host arena: config
 * validation, namespaces, atomic publication, writer errors, pins, unlink,
 * eviction through the policies, stats.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hash/hashkey.h"
#include "kvfs.h"
#include "tier/policy.h"
#include "tier/tier.h"
#include "tier/tier_i.h" /* nchildren of a record (white box) */

#define PAGE 4096u

static struct kvfs_key mkkey(uint32_t i)
{
	struct kvfs_key k;

	for (int j = 0; j < 16; j++)
		k.b[j] = (uint8_t)(i * 131u + (uint32_t)j * 7u + (i >> 8));
	memcpy(k.b, &i, sizeof(i));
	return k;
}

/* Bytes of chunk `key` at offset off: a function of key and offset only. */
static uint8_t pattern(const struct kvfs_key *k, uint64_t off)
{
	return (uint8_t)(k->b[off % 16] ^ (off * 2654435761u >> 13) ^ off);
}

static void fill(const struct kvfs_key *k, uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(k, i);
}

/* on_gone recorder */
struct gone_log {
	struct tier *t;
	int n;
	struct kvfs_key keys[64];
	uint32_t ns[64];
	int stat_rc; /* tier_stat from inside the callback: proves no lock */
};

static void on_gone(void *arg, uint32_t ns, const struct kvfs_key *key,
		    enum tier_gone_reason why)
{
	struct gone_log *g = arg;
	struct tier_info info;

	assert_int_equal(why, TIER_GONE_EVICTED);
	if (g->n < 64) {
		g->keys[g->n] = *key;
		g->ns[g->n] = ns;
	}
	g->n++;
	/* Would deadlock if tier.lock were held here. */
	if (g->t)
		g->stat_rc = tier_stat(g->t, ns, key, &info);
}

static struct tier *mk(uint64_t l1, uint64_t max_chunk, const char *policy,
		       struct gone_log *g)
{
	struct tier_config cfg;
	struct tier *t = NULL;
	char err[256] = "";
	int rc;

	tier_config_default(&cfg);
	cfg.l1_size = l1;
	cfg.max_chunk = max_chunk;
	cfg.policy = policy;
	if (g) {
		memset(g, 0, sizeof(*g));
		cfg.on_gone = on_gone;
		cfg.on_gone_arg = g;
	}
	rc = tier_create(&cfg, &t, err, sizeof(err));
	if (rc)
		fprintf(stderr, "tier_create: %s\n", err);
	assert_int_equal(rc, 0);
	if (g)
		g->t = t;
	return t;
}

static uint32_t mkns(struct tier *t, const char *name)
{
	uint32_t id = 0;

	assert_int_equal(tier_ns_create(t, name, &id), 0);
	assert_true(id > 0);
	return id;
}

/* Writes and publishes chunk k of size bytes with its pattern. */
static int put_chunk(struct tier *t, uint32_t ns, const struct kvfs_key *k,
		     size_t size, uint64_t hint)
{
	struct tier_wr *w;
	uint8_t *buf = malloc(size ? size : 1);
	int rc;

	assert_non_null(buf);
	fill(k, buf, size);
	rc = tier_wr_begin(t, ns, k, hint, &w);
	if (rc == 0) {
		rc = tier_wr_pwrite(t, w, buf, size, 0);
		if (rc == 0)
			rc = tier_wr_publish(t, w, NULL);
		else
			tier_wr_abort(t, w);
	}
	free(buf);
	return rc;
}

/* Reads chunk k fully and checks every byte and the size. */
static void check_chunk(struct tier *t, uint32_t ns, const struct kvfs_key *k,
			size_t size)
{
	struct tier_chunk *c;
	uint8_t *buf = malloc(size + 16);
	const uint8_t *p;

	assert_non_null(buf);
	assert_int_equal(tier_get(t, ns, k, &c), 0);
	assert_int_equal(tier_chunk_size(c), size);
	assert_int_equal(tier_chunk_read(t, c, buf, size + 16, 0), (long)size);
	for (size_t i = 0; i < size; i++)
		if (buf[i] != pattern(k, i))
			fail_msg("byte %zu differs", i);
	p = tier_chunk_ptr(c);
	assert_non_null(p);
	assert_memory_equal(p, buf, size);
	tier_put(t, c);
	free(buf);
}

/* ------------------------------------------------------------- config */

static void test_config(void **state)
{
	struct tier_config cfg;
	struct tier *t = NULL;
	char err[256];

	(void)state;
	tier_config_default(&cfg);
	assert_int_equal(cfg.max_chunk, 64ull << 20);
	assert_string_equal(cfg.policy, "s3fifo");

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
	assert_int_equal(tier_chunk_read(t, c, back, sizeof(back), 0),
			 4 * PAGE);
	for (size_t i = 0; i < sizeof(back); i++)
		assert_int_equal(back[i], pattern(&other, i));
	assert_int_equal(tier_get(t, ns, &other, &c2), 0);
	assert_int_equal(tier_chunk_size(c2), 100);
	assert_true(tier_chunk_gen(c2) > tier_chunk_gen(c));
	tier_put(t, c2);
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

/* ---------------------------------------------------------- eviction */

static void test_evict_lru_order(void **state)
{
	struct gone_log g;
	struct tier *t = mk(3 * PAGE, PAGE, "lru", &g);
	uint32_t ns = mkns(t, "ns");
	struct kvfs_key a = mkkey(1), b = mkkey(2), c = mkkey(3), d = mkkey(4);
	struct tier_chunk *h;
	struct tier_stats st;

	(void)state;
	assert_int_equal(put_chunk(t, ns, &a, 100, 0), 0);
	assert_int_equal(put_chunk(t, ns, &b, 100, 0), 0);
	assert_int_equal(put_chunk(t, ns, &c, 100, 0), 0);
	assert_int_equal(tier_get(t, ns, &a, &h), 0); /* a is now newest */
	tier_put(t, h);
	assert_int_equal(put_chunk(t, ns, &d, 100, 0), 0);
	assert_int_equal(g.n, 1);
	assert_memory_equal(&g.keys[0], &b, sizeof(b));
	/* A lookup is an access too. */
	assert_int_equal(tier_lookup(t, ns, &c, 1, 0, false, false, NULL,
				     NULL, NULL), 0);
	assert_int_equal(put_chunk(t, ns, &b, 100, 0), 0);
	assert_int_equal(g.n, 2);
	assert_memory_equal(&g.keys[1], &a, sizeof(a));
	tier_get_stats(t, &st);
	assert_int_equal(st.evictions, 2);
	assert_int_equal(st.l1_chunks, 3);
	assert_int_equal(st.hits, 1);
	tier_destroy(t);
}

static void test_evict_prefix_leaves_first(void **state)
{
	/* A chain p0 <- p1 <- p2 published in order (p0 oldest): the prefix
	 * policy must evict the leaf p2 first although p0 is least recently
	 * used, which needs the engine's nchildren bookkeeping. */
	struct gone_log g;
	struct tier *t = mk(3 * PAGE, PAGE, "prefix", &g);
	uint32_t ns = mkns(t, "ns");
	struct kvfs_key p[3], x = mkkey(99), y = mkkey(98);
	struct tier_info info;
	struct tier_wr *w;

	(void)state;
	for (int i = 0; i < 3; i++) {
		p[i] = mkkey((uint32_t)i + 1);
		assert_int_equal(tier_wr_begin(t, ns, &p[i], 0, &w), 0);
		assert_int_equal(tier_wr_pwrite(t, w, "kv", 2, 0), 0);
		assert_int_equal(tier_wr_set_parent(t, w, i ? &p[i - 1] : NULL,
						    (uint32_t)i + 1), 0);
		assert_int_equal(tier_wr_publish(t, w, NULL), 0);
	}
	assert_int_equal(tier_stat(t, ns, &p[1], &info), 0);
	assert_true(info.has_parent);
	assert_memory_equal(&info.parent, &p[0], sizeof(p[0]));
	assert_int_equal(info.depth, 2);
	assert_int_equal(put_chunk(t, ns, &x, 10, 0), 0);
	assert_int_equal(g.n, 1);
	assert_memory_equal(&g.keys[0], &p[2], sizeof(p[2]));
	/* p1 lost its child: now a leaf, older than x, so it goes next. */
	assert_int_equal(put_chunk(t, ns, &y, 10, 0), 0);
	assert_int_equal(g.n, 2);
	assert_memory_equal(&g.keys[1], &p[1], sizeof(p[1]));
	tier_destroy(t);
}

/* Publishes a 2-byte chunk k with parent (may be NULL). */
static void put_child(struct tier *t, uint32_t ns, const struct kvfs_key *k,
		      const struct kvfs_key *parent)
{
	struct tier_wr *w;

	assert_int_equal(tier_wr_begin(t, ns, k, 0, &w), 0);
	assert_int_equal(tier_wr_pwrite(t, w, "kv", 2, 0), 0);
	if (parent)
		assert_int_equal(tier_wr_set_parent(t, w, parent, 0), 0);
	assert_int_equal(tier_wr_publish(t, w, NULL), 0);
}

static uint32_t nchildren(struct tier *t, uint32_t ns,
			  const struct kvfs_key *k)
{
	struct tier_rec *r;
	uint32_t n;

	tier_lock(t);
	r = tier_idx_find(t, ns, k);
	assert_non_null(r);
	n = r->pi.nchildren;
	tier_unlock(t);
	return n;
}

static void test_parent_count_republish(void **state)
{
	/* Children counts belong to the parent's key: a child published
	 * before its parent, or a parent unlinked and published again,
	 * still counts its children in L1 (it used to start at 0 and stay
	 * a "leaf" until some lookup re-counted it). */
	struct gone_log g;
	struct tier *t = mk(3 * PAGE, PAGE, "prefix", &g);
	uint32_t ns = mkns(t, "ns");
	struct kvfs_key P = mkkey(1), C = mkkey(2), X = mkkey(3),
			Y = mkkey(4), C2 = mkkey(5);
	struct tier_chunk *old;
	struct tier_stats st;

	(void)state;
	put_child(t, ns, &C, &P);          /* the child first */
	put_child(t, ns, &P, NULL);
	assert_int_equal(nchildren(t, ns, &P), 1);
	/* C is used after P: P is the least recently used, but interior */
	assert_int_equal(tier_get(t, ns, &C, &old), 0);
	tier_put(t, old);
	put_child(t, ns, &X, NULL);
	put_child(t, ns, &Y, NULL);        /* one eviction: a leaf, C */
	assert_int_equal(g.n, 1);
	assert_memory_equal(&g.keys[0], &C, sizeof(C));
	assert_int_equal(nchildren(t, ns, &P), 0);

	/* unlink the parent (pinned: a zombie) while its child is in L1,
	 * then publish it again */
	assert_int_equal(tier_unlink(t, ns, &X), 0);
	put_child(t, ns, &C, &P);
	assert_int_equal(nchildren(t, ns, &P), 1);
	assert_int_equal(tier_get(t, ns, &P, &old), 0);
	assert_int_equal(tier_unlink(t, ns, &P), 0);
	put_child(t, ns, &P, NULL);
	assert_int_equal(nchildren(t, ns, &P), 1);
	tier_put(t, old);                  /* the zombie goes */
	assert_int_equal(nchildren(t, ns, &P), 1);
	/* the old child goes, a new one comes: never below 0, never stale */
	assert_int_equal(tier_unlink(t, ns, &C), 0);
	assert_int_equal(nchildren(t, ns, &P), 0);
	assert_int_equal(tier_unlink(t, ns, &P), 0);
	tier_unlink(t, ns, &Y); /* (may have been evicted by P's return) */
	put_child(t, ns, &C2, &P);
	put_child(t, ns, &P, NULL);
	assert_int_equal(nchildren(t, ns, &P), 1);
	assert_int_equal(tier_unlink(t, ns, &C2), 0);
	assert_int_equal(nchildren(t, ns, &P), 0);
	assert_int_equal(tier_unlink(t, ns, &P), 0);
	/* nothing left behind for keys without children */
	tier_lock(t);
	assert_int_equal(t->orphans.n, 0);
	tier_unlock(t);
	tier_get_stats(t, &st);
	assert_int_equal(st.l1_chunks, 0);
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
	/* the two keys past the run are the engine's misses */
	tier_get_stats(t, &st);
	assert_int_equal(st.misses, 2);
	tier_count_misses(t, -5); /* never below zero */
	tier_get_stats(t, &st);
	assert_int_equal(st.misses, 0);
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
	assert_int_equal(tier_arena_export(t1, c, ipc, &off, &cookie),
			 -ENOTSUP);
	assert_null(cookie);
	tier_arena_unexport(t1, NULL);
	tier_put(t1, c);
	tier_get_stats(t1, &st);
	assert_int_equal(st.l1_capacity, 1 << 20);
	assert_int_equal(st.l1_chunks, 1);
	assert_int_equal(st.l1_bytes, 2 * PAGE);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.publishes, 1);
	assert_int_equal(st.l2_capacity, 0);
	assert_true(st.meta_bytes > 0);
	tier_get_stats(t2, &st);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.publishes, 0);
	assert_int_equal(tier_ns_info(t1, n1, &ni), 0);
	assert_int_equal(ni.chunks, 1);
	assert_int_equal(ni.bytes, 5000);
	assert_int_equal(ni.hits, 1);
	tier_arena_info(t1, &ai);
	assert_true(ai.memfd >= 0);
	assert_int_equal(ai.kind, KVFS_HANDLE_HOST_MMAP);
	assert_int_equal(ai.size, 1 << 20);
	assert_string_equal(ai.backend, "host");
	tier_destroy(t1);
	tier_destroy(t2);
}

/* Churn through every policy with mixed sizes: the arena never overflows,
 * stats stay consistent, every surviving chunk reads back intact. */
static void test_churn_policies(void **state)
{
	static const char *const names[] = { "lru", "fifo", "s3fifo",
					     "prefix" };

	(void)state;
	for (size_t p = 0; p < 4; p++) {
		struct tier *t = mk(64 * PAGE, 8 * PAGE, names[p], NULL);
		uint32_t ns = mkns(t, "ns");
		struct tier_stats st;
		uint32_t seed = 12345;
		struct tier_dirent *d;
		size_t n;

		for (uint32_t i = 0; i < 600; i++) {
			struct kvfs_key k = mkkey(i);
			size_t sz;

			seed = seed * 1103515245u + 12345u;
			sz = 1 + (seed >> 8) % (8 * PAGE);
			assert_int_equal(put_chunk(t, ns, &k, sz, 0), 0);
			if (i % 3 == 0) {
				struct kvfs_key o = mkkey(i / 2);
				struct tier_chunk *c;

				if (tier_get(t, ns, &o, &c) == 0)
					tier_put(t, c);
			}
			tier_get_stats(t, &st);
			assert_true(st.l1_bytes <= st.l1_capacity);
		}
		assert_int_equal(tier_ns_snapshot(t, ns, &d, &n), 0);
		assert_int_equal(n, st.l1_chunks);
		assert_int_equal(st.publishes, 600);
		assert_int_equal(st.evictions + st.l1_chunks, 600);
		for (size_t i = 0; i < n; i++)
			check_chunk(t, ns, &d[i].key, d[i].size);
		free(d);
		tier_destroy(t);
	}
}

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
	/* $BUILD/tests/unit/test_tier -> $BUILD/tests/gpu/libfakecudart.so */
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
	rc = tier_arena_export(t, c, ipc, &off, &cookie);
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
		cmocka_unit_test(test_config),
		cmocka_unit_test(test_namespaces),
		cmocka_unit_test(test_publish_invisible),
		cmocka_unit_test(test_holes_growth_truncate),
		cmocka_unit_test(test_eexist),
		cmocka_unit_test(test_efbig),
		cmocka_unit_test(test_emsgsize),
		cmocka_unit_test(test_concurrent_pwrite),
		cmocka_unit_test(test_enospc_pinned),
		cmocka_unit_test(test_grow_enospc),
		cmocka_unit_test(test_unlink_pinned),
		cmocka_unit_test(test_evict_lru_order),
		cmocka_unit_test(test_evict_prefix_leaves_first),
		cmocka_unit_test(test_parent_count_republish),
		cmocka_unit_test(test_unpin_generation),
		cmocka_unit_test(test_lookup_pin_parent),
		cmocka_unit_test(test_user_pin),
		cmocka_unit_test(test_stats_two_engines),
		cmocka_unit_test(test_churn_policies),
		cmocka_unit_test(test_device_arena),
	};

	alarm(120); /* a deadlock fails instead of hanging */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
