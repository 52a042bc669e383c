/*
 * tier_test.h - what the engine's unit tests (test_tier*.c) share: keys
 * and their byte patterns, an on_gone recorder, an engine with an L1 host
 * arena, and writing / checking whole chunks.
 */
#ifndef KVFS_TESTS_UNIT_TIER_TEST_H
#define KVFS_TESTS_UNIT_TIER_TEST_H

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
#include "tier/policy/policy.h"
#include "tier/tier.h"
#include "tier/tier_i.h" /* nchildren of a record (white box) */

#define PAGE 4096u

static inline struct kvfs_key mkkey(uint32_t i)
{
	struct kvfs_key k;

	for (int j = 0; j < 16; j++)
		k.b[j] = (uint8_t)(i * 131u + (uint32_t)j * 7u + (i >> 8));
	memcpy(k.b, &i, sizeof(i));
	return k;
}

/* Bytes of chunk `key` at offset off: a function of key and offset only. */
static inline uint8_t pattern(const struct kvfs_key *k, uint64_t off)
{
	return (uint8_t)(k->b[off % 16] ^ (off * 2654435761u >> 13) ^ off);
}

static inline void fill(const struct kvfs_key *k, uint8_t *buf, size_t len)
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

static inline void on_gone(void *arg, uint32_t ns, const struct kvfs_key *key,
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

static inline struct tier *mk(uint64_t l1, uint64_t max_chunk,
			      const char *policy, struct gone_log *g)
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

static inline uint32_t mkns(struct tier *t, const char *name)
{
	uint32_t id = 0;

	assert_int_equal(tier_ns_create(t, name, &id), 0);
	assert_true(id > 0);
	return id;
}

/* Writes and publishes chunk k of size bytes with its pattern. */
static inline int put_chunk(struct tier *t, uint32_t ns,
			    const struct kvfs_key *k, size_t size,
			    uint64_t hint)
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
static inline void check_chunk(struct tier *t, uint32_t ns,
			       const struct kvfs_key *k, size_t size)
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

#endif /* KVFS_TESTS_UNIT_TIER_TEST_H */
