/*
 * test_tier_xfer.c - tier_xfer.c on its own (no mount): a writer's extent
 * handed out for a batched PUT's single copy (tier_wr_map), the checksum
 * the writer computed kept at publication (tier_wr_set_checksum), the
 * refusals of tier_wr_map, device imports refused by a host arena, and
 * the streaming copy into the arena (tier_stream_copy: every length and
 * alignment around its threshold and its 16-byte stores exact, nothing
 * written past the end; a plain writer's pieces at odd offsets).
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

/* tier_stream_copy copies exactly len bytes whatever the alignment of
 * either side and the length around TIER_STREAM_MIN, and stops there. */
static void test_stream_copy(void **state)
{
	static const size_t lens[] = {
		0, 1, 15, 16, 17, 63, 64, 65, TIER_STREAM_MIN - 1,
		TIER_STREAM_MIN, TIER_STREAM_MIN + 1, TIER_STREAM_MIN + 63,
		(256u << 10) + 13, (1u << 20) + 7,
	};
	const size_t cap = (1u << 20) + 256;
	uint8_t *src = malloc(cap), *dst = malloc(cap);

	(void)state;
	assert_non_null(src);
	assert_non_null(dst);
	for (size_t i = 0; i < cap; i++)
		src[i] = (uint8_t)(i * 131 + 7);
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
		for (size_t da = 0; da < 17; da += 3)
			for (size_t sa = 0; sa < 17; sa += 5) {
				memset(dst, 0xA5, cap);
				tier_stream_copy(dst + da, src + sa, lens[l]);
				assert_memory_equal(dst + da, src + sa,
						    lens[l]);
				for (size_t i = 0; i < da; i++)
					assert_int_equal(dst[i], 0xA5);
				for (size_t i = da + lens[l];
				     i < da + lens[l] + 64 && i < cap; i++)
					assert_int_equal(dst[i], 0xA5);
			}
	free(src);
	free(dst);
}

/* A plain writer's pieces (tier_wr_pwrite: streamed from TIER_STREAM_MIN
 * bytes) at offsets that are not 16-byte aligned read back exact, and the
 * checksum computed later is of those bytes. */
static void test_pwrite_streamed(void **state)
{
	struct tier *t = mk();
	const size_t len = (300u << 10) + 5, cut = 100001;
	uint8_t *buf = malloc(len);
	struct tier_wr *w;
	struct tier_chunk *c;
	struct kvfs_key k;
	uint64_t sum;
	uint32_t ns;

	(void)state;
	assert_non_null(buf);
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 29 + 3);
	assert_int_equal(tier_ns_create(t, "n", &ns), 0);
	key(&k, 9);
	assert_int_equal(tier_wr_begin(t, ns, &k, len, &w), 0);
	assert_int_equal(tier_wr_pwrite(t, w, buf + cut, len - cut, cut), 0);
	assert_int_equal(tier_wr_pwrite(t, w, buf, cut, 0), 0);
	assert_int_equal(tier_wr_publish(t, w, NULL), 0);
	assert_int_equal(tier_get(t, ns, &k, &c), 0);
	assert_int_equal(tier_chunk_size(c), len);
	assert_memory_equal(tier_chunk_ptr(c), buf, len);
	tier_put(t, c);
	assert_int_equal(tier_checksum(t, ns, &k, 0, &sum), 0);
	assert_true(sum == hashkey_checksum(buf, len));
	free(buf);
	tier_destroy(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_map_publish),
		cmocka_unit_test(test_map_refusals),
		cmocka_unit_test(test_import_host),
		cmocka_unit_test(test_stream_copy),
		cmocka_unit_test(test_pwrite_streamed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
