/*
 * test_tier_xfer.c - tier_xfer.c on its own (no mount): a writer's extent
 * handed out for a batched PUT's single copy (tier_wr_map), the checksum
 * the writer computed kept at publication (tier_wr_set_checksum), the
 * refusals of tier_wr_map, and device imports refused by a host arena.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hash/hashkey.h"
#include "tier/tier.h"

static struct tier *mk(void)
{
	struct tier_config cfg;
	struct tier *t;
	char err[256];

	tier_config_default(&cfg);
	cfg.l1_size = 16u << 20;
	cfg.max_chunk = 4u << 20;
	cfg.l1 = "host";
	assert_int_equal(tier_create(&cfg, &t, err, sizeof(err)), 0);
	return t;
}

static void key(struct kvfs_key *k, uint8_t v)
{
	memset(k, 0, sizeof(*k));
	k->b[15] = v;
}

/* The mapped extent is where the chunk's bytes are published from, and
 * the writer's checksum is the one kept. */
static void test_map_publish(void **state)
{
	struct tier *t = mk();
	struct tier_wr *w;
	struct tier_chunk *c;
	struct kvfs_key k;
	uint64_t sum;
	uint32_t ns;
	char *p, buf[5000];

	(void)state;
	assert_int_equal(tier_ns_create(t, "n", &ns), 0);
	key(&k, 1);
	assert_int_equal(tier_wr_begin(t, ns, &k, sizeof(buf), &w), 0);
	assert_int_equal(tier_wr_map(t, w, sizeof(buf), (void **)&p), 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		p[i] = buf[i] = (char)(i * 7);
	tier_wr_set_checksum(w, hashkey_checksum(buf, sizeof(buf)));
	assert_int_equal(tier_wr_publish(t, w, NULL), 0);
	assert_int_equal(tier_get(t, ns, &k, &c), 0);
	assert_int_equal(tier_chunk_size(c), sizeof(buf));
	assert_memory_equal(tier_chunk_ptr(c), buf, sizeof(buf));
	tier_put(t, c);
	assert_int_equal(tier_checksum(t, ns, &k, 0, &sum), 0);
	assert_true(sum == hashkey_checksum(buf, sizeof(buf)));

	/* a wrong checksum given is what is kept: the writer vouches for
	 * it (fs_xfer.c computes it over the bytes it copied) */
	key(&k, 2);
	assert_int_equal(tier_wr_begin(t, ns, &k, 10, &w), 0);
	assert_int_equal(tier_wr_map(t, w, 10, (void **)&p), 0);
	memset(p, 1, 10);
	tier_wr_set_checksum(w, 42);
	assert_int_equal(tier_wr_publish(t, w, NULL), 0);
	assert_int_equal(tier_checksum(t, ns, &k, 0, &sum), 0);
	assert_true(sum == 42);
	tier_destroy(t);
}

/* tier_wr_map refuses a length past the extent and a writer already
 * written to; an empty chunk maps. */
static void test_map_refusals(void **state)
{
	struct tier *t = mk();
	struct tier_wr *w;
	struct kvfs_key k;
	uint32_t ns;
	void *p;

	(void)state;
	assert_int_equal(tier_ns_create(t, "n", &ns), 0);
	key(&k, 3);
	assert_int_equal(tier_wr_begin(t, ns, &k, 4096, &w), 0);
	assert_int_equal(tier_wr_map(t, w, 1u << 20, &p), -EINVAL);
	assert_int_equal(tier_wr_pwrite(t, w, "x", 1, 0), 0);
	assert_int_equal(tier_wr_map(t, w, 1, &p), -EINVAL);
	tier_wr_abort(t, w);
	key(&k, 4);
	assert_int_equal(tier_wr_begin(t, ns, &k, 0, &w), 0);
	assert_int_equal(tier_wr_map(t, w, 0, &p), 0);
	assert_int_equal(tier_wr_publish(t, w, NULL), 0);
	tier_destroy(t);
}

static void test_import_host(void **state)
{
	struct tier *t = mk();
	struct gpu_import *im = (struct gpu_import *)&im;
	uint8_t ipc[64] = { 0 };

	(void)state;
	assert_int_equal(tier_import_open(t, ipc, 4096, &im), -ENOTSUP);
	assert_null(im);
	tier_destroy(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_map_publish),
		cmocka_unit_test(test_map_refusals),
		cmocka_unit_test(test_import_host),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
