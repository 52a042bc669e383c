/*
 * test_hash.c - prefix keys, hex names, checksums (hash/).
 *
 * How the known-answer vectors were obtained (independently of hash/):
 * for each case the exact input bytes of the layout in include/kvfs.h
 * (16-byte previous key, little-endian uint32 length of extra, extra, tokens
 * as little-endian uint32) were written to a file by a Python script and
 * hashed with Debian's xxhsum 0.8.1 (`xxhsum -H2 FILE`, XXH3-128, printed
 * in canonical big-endian form = the key's 16 bytes). xxhsum has no seed
 * option, so the seeded vector (and, as a cross-check, all others) came
 * from Debian's python3-xxhash 3.2.0: xxhash.xxh3_128(bytes,
 * seed=S).digest(). The checksums are `xxhsum -H3 FILE` (XXH3-64), equal
 * to xxhash.xxh3_64_intdigest(bytes). Path keys: see test_path_keys.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <stdlib.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "hash/hashkey.h"
#include "tier/record/record.h"
#include "kvfs.h"

static void hex_of(const struct kvfs_key *k, char out[33])
{
	kvfs_key_hex(k, out);
}

static void expect_key(const struct kvfs_key *k, const char *hex)
{
	char got[33];

	hex_of(k, got);
	assert_string_equal(got, hex);
}

/* The 512 tokens of vectors k5/k6: (i * 2654435761) mod 2^32. */
/* Keys of path namespaces: XXH3-128 of the path's bytes; vectors from
 * python3-xxhash 3.2.0, xxhash.xxh3_128(path).hexdigest(). */
static void test_path_keys(void **state)
{
	const char *const v[][2] = {
		{ "a/b", "354b81d0032a270248f71e9475860604" },
		{ "config.json", "62d620758a955d6c9602d3ad368df2c1" },
		{ "meta-llama_Llama-3.1-8B_0a1b2c3d4e5f_r0/abc/de_g0/"
		  "abcdef0123456789.bin", "f1816275dc43bff2bcc42051e8fbc758" },
	};
	char path[KVFS_PATH_MAX + 1];
	const char *bad[] = { "", "/a", "a/", "a//b", "a/./b", "a/../b", ".",
			      ".." };
	const char *one[1];
	struct kvfs_key k, keys[3];

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(kvfs_path_key(v[i][0], strlen(v[i][0]), &k), 0);
		expect_key(&k, v[i][1]);
		one[0] = v[i][0];
		assert_int_equal(kvfs_path_keys(one, 1, &keys[i]), 1);
		assert_memory_equal(&keys[i], &k, sizeof(k));
	}
	memset(path, 'x', KVFS_PATH_MAX);
	path[KVFS_PATH_MAX] = '\0';
	one[0] = path;
	/* 1024 bytes: a path at the limit, one component too long */
	assert_int_equal(kvfs_path_keys(one, 1, &k), -ENAMETOOLONG);
	assert_int_equal(kvfs_path_key(path, KVFS_PATH_MAX, &k), 0);
	expect_key(&k, "445dcf97d7880d62fc56a7ce85b3164a");
	for (size_t i = 200; i < KVFS_PATH_MAX - 1; i += 200)
		path[i] = '/';
	assert_int_equal(kvfs_path_keys(one, 1, &k), 1);
	{
		char longer[KVFS_PATH_MAX + 2];

		memcpy(longer, path, KVFS_PATH_MAX);
		longer[KVFS_PATH_MAX] = 'z';
		longer[KVFS_PATH_MAX + 1] = '\0';
		one[0] = longer;
		assert_int_equal(kvfs_path_keys(one, 1, &k), -ENAMETOOLONG);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		one[0] = bad[i];
		assert_int_equal(kvfs_path_keys(one, 1, &k), -EINVAL);
	}
	one[0] = NULL;
	assert_int_equal(kvfs_path_keys(one, 1, &k), -EINVAL);
	assert_int_equal(kvfs_path_key(NULL, 1, &k), -EINVAL);
	assert_int_equal(kvfs_path_key("a", 1, NULL), -EINVAL);
}

static void tokens512(uint32_t *t)
{
	for (uint32_t i = 0; i < 512; i++)
		t[i] = (uint32_t)((uint64_t)i * 2654435761u);
}

static void test_known_answers(void **state)
{
	const uint32_t t1[] = { 1, 2, 3, 4 }, t2[] = { 5, 6, 7, 8 };
	uint32_t big[512], rev[512];
	struct kvfs_key k0, k1, k;

	(void)state;
	/* k0: chunk 0, seed 0, no extra, tokens 1 2 3 4 */
	assert_int_equal(kvfs_key_chunk(NULL, 0, NULL, 0, t1, 4, &k0), 0);
	expect_key(&k0, "8c36b7b16cf05927453e09a463548af2");
	/* k1: chained on k0, tokens 5 6 7 8 */
	assert_int_equal(kvfs_key_chunk(&k0, 0, NULL, 0, t2, 4, &k1), 0);
	expect_key(&k1, "e158ef29b9b874e7d9f8324e8372aa47");
	/* k2: extra "lora-A" */
	assert_int_equal(kvfs_key_chunk(NULL, 0, "lora-A", 6, t1, 4, &k), 0);
	expect_key(&k, "75fa2a1726236f48b07a3bf6f2865e3a");
	/* k3: seed 0x123456789abcdef0 */
	assert_int_equal(kvfs_key_chunk(NULL, 0x123456789abcdef0ull, NULL, 0,
					t1, 4, &k), 0);
	expect_key(&k, "71b16cec6c5aaf40c4c340cea4f1d16e");
	/* k4: no tokens at all (20 bytes of input) */
	assert_int_equal(kvfs_key_chunk(NULL, 0, NULL, 0, NULL, 0, &k), 0);
	expect_key(&k, "9098098c9951f3d716773ceb7fe497b1");
	/* k5: 512 tokens (2068 bytes: XXH3's long-input path) */
	tokens512(big);
	assert_int_equal(kvfs_key_chunk(NULL, 0, NULL, 0, big, 512, &k), 0);
	expect_key(&k, "99762b3936c11d245658d99be602daa4");
	/* k6: chained on k5, the same tokens reversed */
	for (int i = 0; i < 512; i++)
		rev[i] = big[511 - i];
	assert_int_equal(kvfs_key_chunk(&k, 0, NULL, 0, rev, 512, &k), 0);
	expect_key(&k, "bb0844429a2a39e5ffff79e5fcc99cb1");
}

static void test_chaining(void **state)
{
	uint32_t toks[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	struct kvfs_key keys[4], other[4], k;
	long n;

	(void)state;
	/* kvfs_keys agrees with chained kvfs_key_chunk calls. */
	n = kvfs_keys(toks, 8, 4, 0, NULL, 0, keys, 4);
	assert_int_equal(n, 2);
	expect_key(&keys[0], "8c36b7b16cf05927453e09a463548af2");
	expect_key(&keys[1], "e158ef29b9b874e7d9f8324e8372aa47");
	/* A trailing partial chunk gets no key. */
	memset(other, 0xEE, sizeof(other));
	assert_int_equal(kvfs_keys(toks, 10, 4, 0, NULL, 0, other, 4), 2);
	assert_memory_equal(other, keys, 2 * sizeof(k));
	assert_int_equal(other[2].b[0], 0xEE);
	assert_int_equal(kvfs_keys(toks, 3, 4, 0, NULL, 0, other, 4), 0);
	/* max caps the count. */
	assert_int_equal(kvfs_keys(toks, 8, 4, 0, NULL, 0, other, 1), 1);
	assert_memory_equal(&other[0], &keys[0], sizeof(k));
	/* Key i depends on key i-1: changing a token of chunk 0 changes
	 * chunk 1's key although chunk 1's tokens are equal. */
	toks[0] = 999;
	assert_int_equal(kvfs_keys(toks, 8, 4, 0, NULL, 0, other, 4), 2);
	assert_memory_not_equal(&other[0], &keys[0], sizeof(k));
	assert_memory_not_equal(&other[1], &keys[1], sizeof(k));
	toks[0] = 1;
	/* Chunk 1 of one sequence equals a direct chained computation. */
	assert_int_equal(kvfs_key_chunk(&keys[0], 0, NULL, 0, toks + 4, 4, &k),
			 0);
	assert_memory_equal(&k, &keys[1], sizeof(k));
	/* extra and seed change every key. */
	assert_int_equal(kvfs_keys(toks, 8, 4, 0, "a", 1, other, 4), 2);
	assert_memory_not_equal(&other[0], &keys[0], sizeof(k));
	assert_memory_not_equal(&other[1], &keys[1], sizeof(k));
	assert_int_equal(kvfs_keys(toks, 8, 4, 1, NULL, 0, other, 4), 2);
	assert_memory_not_equal(&other[0], &keys[0], sizeof(k));
	/* The length of extra is hashed: "ab"+tokens differs from "a" with
	 * the 'b' moved into the token stream. */
	{
		struct kvfs_key x, y;
		uint32_t t = 1;

		assert_int_equal(kvfs_key_chunk(NULL, 0, "", 0, &t, 1, &x), 0);
		assert_int_equal(kvfs_key_chunk(NULL, 0, NULL, 0, &t, 1, &y), 0);
		assert_memory_equal(&x, &y, sizeof(x)); /* empty == none */
		assert_int_equal(kvfs_key_chunk(NULL, 0, "abcd", 4, NULL, 0,
						&x), 0);
		memcpy(&t, "abcd", 4);
		assert_int_equal(kvfs_key_chunk(NULL, 0, NULL, 0, &t, 1, &y), 0);
		assert_memory_not_equal(&x, &y, sizeof(x));
	}
	/* Bad arguments. */
	assert_int_equal(kvfs_keys(toks, 8, 0, 0, NULL, 0, other, 4), -EINVAL);
	assert_int_equal(kvfs_keys(NULL, 8, 4, 0, NULL, 0, other, 4), -EINVAL);
	assert_int_equal(kvfs_keys(toks, 8, 4, 0, NULL, 0, NULL, 4), -EINVAL);
	assert_int_equal(kvfs_key_chunk(NULL, 0, NULL, 0, toks, 4, NULL),
			 -EINVAL);
	assert_int_equal(kvfs_key_chunk(NULL, 0, NULL, 3, toks, 4, &k),
			 -EINVAL);
	assert_int_equal(kvfs_key_chunk(NULL, 0, NULL, 0, NULL, 4, &k),
			 -EINVAL);
}

static void test_hex(void **state)
{
	struct kvfs_key k, back;
	char hex[33];

	(void)state;
	for (int i = 0; i < 16; i++)
		k.b[i] = (uint8_t)(i * 17 + 0x0f);
	hex_of(&k, hex);
	assert_int_equal(strlen(hex), 32);
	assert_string_equal(hex, "0f2031425364758697a8b9cadbecfd0e");
	assert_int_equal(kvfs_key_parse(hex, 32, &back), 0);
	assert_memory_equal(&k, &back, sizeof(k));
	assert_int_equal(kvfs_key_parse(hex, 32, NULL), 0);
	/* Every byte value survives the round trip. */
	for (int v = 0; v < 256; v++) {
		memset(&k, v, sizeof(k));
		hex_of(&k, hex);
		assert_int_equal(kvfs_key_parse(hex, 32, &back), 0);
		assert_memory_equal(&k, &back, sizeof(k));
	}
	hex_of(&(struct kvfs_key){ { 0xab } }, hex);
	assert_string_equal(hex, "ab000000000000000000000000000000");

	/* Wrong lengths. */
	assert_int_equal(kvfs_key_parse(hex, 31, &back), -EINVAL);
	assert_int_equal(kvfs_key_parse("ab00000000000000000000000000000000",
					33, &back), -EINVAL);
	assert_int_equal(kvfs_key_parse("", 0, &back), -EINVAL);
	assert_int_equal(kvfs_key_parse(NULL, 32, &back), -EINVAL);
	/* Uppercase: names are canonical. */
	assert_int_equal(kvfs_key_parse("AB000000000000000000000000000000",
					32, &back), -EINVAL);
	assert_int_equal(kvfs_key_parse("ab00000000000000000000000000000F",
					32, &back), -EINVAL);
	/* Non-hex characters, a NUL inside, a sign, a space. */
	assert_int_equal(kvfs_key_parse("ag000000000000000000000000000000",
					32, &back), -EINVAL);
	{
		char nul[33] = "ab000000000000000000000000000000";

		nul[15] = '\0';
		assert_int_equal(kvfs_key_parse(nul, 32, &back), -EINVAL);
	}
	assert_int_equal(kvfs_key_parse("-b000000000000000000000000000000",
					32, &back), -EINVAL);
	assert_int_equal(kvfs_key_parse("ab00000000000000 000000000000000",
					32, &back), -EINVAL);
	assert_int_equal(kvfs_key_parse(".tmp0000000000000000000000000000",
					32, &back), -EINVAL);
	/* A failed parse leaves out untouched. */
	memset(&back, 0x77, sizeof(back));
	assert_int_equal(kvfs_key_parse("zz000000000000000000000000000000",
					32, &back), -EINVAL);
	for (int i = 0; i < 16; i++)
		assert_int_equal(back.b[i], 0x77);
}

static void test_checksum(void **state)
{
	unsigned char buf[10240];
	struct hashkey_sum s;

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)i;
	assert_int_equal(hashkey_checksum("", 0), 0x2d06800538d394c2ull);
	assert_int_equal(hashkey_checksum("kvfs", 4), 0xafe524a0a44e9f1aull);
	assert_int_equal(hashkey_checksum(buf, sizeof(buf)),
			 0xc03d2231ab9348f3ull);
	/* Streaming in uneven pieces gives the same value. */
	hashkey_sum_init(&s);
	hashkey_sum_update(&s, buf, 1);
	hashkey_sum_update(&s, buf + 1, 999);
	hashkey_sum_update(&s, buf + 1000, 0);
	hashkey_sum_update(&s, buf + 1000, sizeof(buf) - 1000);
	assert_int_equal(hashkey_sum_final(&s), 0xc03d2231ab9348f3ull);
	hashkey_sum_init(&s);
	assert_int_equal(hashkey_sum_final(&s), 0x2d06800538d394c2ull);
}

/* The checksums of chunks and records go through libxxhash's run-time
 * dispatch (hash/xxh_fast.h: AVX-512 / AVX2): every value must be the
 * compiled-in XXH3's, which earlier builds stored in L2 and L3 records,
 * whole and streamed, at lengths around each of XXH3's paths (<= 16,
 * <= 128, <= 240 bytes, stripes of 64, blocks of 1,024, 2 MiB). */
static void test_checksum_dispatch(void **state)
{
	static const size_t lens[] = { 0, 1, 16, 17, 128, 129, 240, 241,
				       1023, 1024, 1025, 4096 + 13, 65536,
				       262144, 262144 + 63, 2u << 20 };
	size_t max = (2u << 20) + 64;
	unsigned char *buf = malloc(max);
	struct kvrec_sum_state *rs = kvrec_sum_new();
	struct hashkey_sum s;
	uint64_t x = 0x9E3779B97F4A7C15ull;

	(void)state;
	assert_non_null(buf);
	assert_non_null(rs);
	for (size_t i = 0; i < max; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (unsigned char)x;
	}
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		size_t n = lens[k], cut = n / 3;
		/* an unaligned start too */
		for (size_t at = 0; at < 2; at++) {
			const unsigned char *p = buf + at * 7;
			uint64_t want = XXH3_64bits(p, n);

			assert_int_equal(hashkey_checksum(p, n), want);
			hashkey_sum_init(&s);
			hashkey_sum_update(&s, p, cut);
			hashkey_sum_update(&s, p + cut, n - cut);
			assert_int_equal(hashkey_sum_final(&s), want);
			assert_int_equal(kvrec_sum(p, n, 0), want);
			assert_int_equal(kvrec_sum(p, n, 12345),
					 XXH3_64bits_withSeed(p, n, 12345));
			kvrec_sum_reset(rs, 777);
			kvrec_sum_add(rs, p, cut);
			kvrec_sum_add(rs, p + cut, n - cut);
			assert_int_equal(kvrec_sum_end(rs),
					 XXH3_64bits_withSeed(p, n, 777));
		}
	}
	kvrec_sum_free(rs);
	free(buf);
}

static void test_index_hash(void **state)
{
	struct kvfs_key k = { { 1, 2, 3 } };
	uint64_t h1 = hashkey_index(1, &k), h2 = hashkey_index(2, &k);

	(void)state;
	assert_int_equal(h1, hashkey_index(1, &k));
	assert_true(h1 != h2);
	k.b[15] ^= 1;
	assert_true(hashkey_index(1, &k) != h1);
	/* a group lookup hashes a key once for all ranks */
	assert_int_equal(hashkey_index(9, &k), hashkey_ns(9, hashkey_key(&k)));
}

/*
 * One chain of 384 keys in 8 namespaces (tensor-parallel ranks, ids 1-8):
 * each key's 8 copies land in 8 different buckets of a 4096-bucket table,
 * and the 3,072 copies spread as random keys would (no bucket with more
 * than 12: the load is about Poisson(0.75), so more than 8 happens once
 * in ~2,400 seeds, more than 12 practically never).
 */
static void test_index_ranks(void **state)
{
	static uint8_t load[4096];
	struct kvfs_key k;
	unsigned most = 0;

	(void)state;
	for (uint64_t i = 0; i < 384; i++) {
		uint64_t seen[8];

		memset(k.b, 0, sizeof(k.b));
		memcpy(k.b, &i, sizeof(i));
		for (uint32_t ns = 1; ns <= 8; ns++) {
			uint64_t b = hashkey_index(ns, &k) & 4095;

			for (uint32_t j = 1; j < ns; j++)
				assert_true(seen[j - 1] != b);
			seen[ns - 1] = b;
			if (++load[b] > most)
				most = load[b];
		}
	}
	assert_true(most <= 12);
}

/*
 * Keys chosen so that their two 8-byte halves XOR to one value (what an
 * unkeyed a ^ b mix sends to one bucket) still spread over the buckets of
 * a 4096-bucket table: at least half the buckets used by 4096 such keys.
 */
static void test_index_flood(void **state)
{
	static uint8_t used[4096];
	struct kvfs_key k;
	unsigned distinct = 0;

	(void)state;
	for (uint64_t i = 0; i < 4096; i++) {
		uint64_t a = i * 0x10001ull, b = a ^ 0x5555aaaa5555aaaaull;
		uint64_t h;

		memcpy(k.b, &a, 8);
		memcpy(k.b + 8, &b, 8);
		h = hashkey_index(7, &k) & 4095;
		distinct += !used[h];
		used[h] = 1;
	}
	assert_true(distinct > 2048);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_answers),
		cmocka_unit_test(test_path_keys),
		cmocka_unit_test(test_chaining),
		cmocka_unit_test(test_hex),
		cmocka_unit_test(test_checksum),
		cmocka_unit_test(test_checksum_dispatch),
		cmocka_unit_test(test_index_hash),
		cmocka_unit_test(test_index_flood),
		cmocka_unit_test(test_index_ranks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
