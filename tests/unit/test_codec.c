/*
 * test_codec.c - byte-plane shuffle and zstd codec of the L2 tier.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tier/record/codec.h"
#include "tier/record/record.h"

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fill_random(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)rng_next(&seed);
}

/* bf16 values ~ N(0, scale[channel]) with per-channel scales: the shape of
 * a KV tensor, which a 2-byte shuffle helps zstd with. */
static void fill_bf16(void *buf, size_t len, uint64_t seed)
{
	uint16_t *p = buf;
	size_t n = len / 2;

	for (size_t i = 0; i < n; i++) {
		double u1 = ((double)(rng_next(&seed) >> 11) + 1) / 9007199254740993.0;
		double u2 = (double)(rng_next(&seed) >> 11) / 9007199254740992.0;
		double g = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
		float f = (float)(g * (0.5 + (double)(i % 128) / 64.0));
		uint32_t bits;

		memcpy(&bits, &f, 4);
		p[i] = (uint16_t)(bits >> 16);
	}
	if (len & 1)
		((uint8_t *)buf)[len - 1] = 0x5a;
}

static void test_shuffle_roundtrip(void **state)
{
	static const size_t lens[] = { 0, 1, 3, 31, 32, 33, 4095, 65536 + 7 };
	static const int elems[] = { 0, 2, 4 };

	(void)state;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		for (size_t j = 0; j < 3; j++) {
			size_t len = lens[i];
			uint8_t *a = malloc(len + 1), *b = malloc(len + 1),
				*c = malloc(len + 1);

			fill_random(a, len, len * 3 + j);
			codec_shuffle(b, a, len, elems[j]);
			codec_unshuffle(c, b, len, elems[j]);
			assert_memory_equal(a, c, len);
			free(a);
			free(b);
			free(c);
		}
	}
}

static void test_shuffle_layout(void **state)
{
	uint8_t in[10] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }, out[10];
	const uint8_t want2[10] = { 0, 2, 4, 6, 8, 1, 3, 5, 7, 9 };
	const uint8_t want4[10] = { 0, 4, 1, 5, 2, 6, 3, 7, 8, 9 };

	(void)state;
	codec_shuffle(out, in, 10, 2);
	assert_memory_equal(out, want2, 10);
	codec_shuffle(out, in, 10, 4);
	assert_memory_equal(out, want4, 10); /* tail of 2 bytes copied */
	/* the SIMD path (>= 32 bytes) must agree with the scalar layout */
	{
		uint8_t big[70], sh[70];

		for (int i = 0; i < 70; i++)
			big[i] = (uint8_t)i;
		codec_shuffle(sh, big, 70, 2);
		for (int i = 0; i < 35; i++) {
			assert_int_equal(sh[i], 2 * i);
			assert_int_equal(sh[35 + i], 2 * i + 1);
		}
	}
}

static void roundtrip(struct codec_ws *ws, const void *src, size_t len,
		      int level, int shuffle, long *stored)
{
	size_t cap = len + len / 2 + 1024;
	uint8_t *z = malloc(cap), *back = malloc(len ? len : 1);
	long n = codec_compress(ws, level, shuffle, src, len, z, cap);

	assert_true(n > 0);
	assert_int_equal(codec_decompress(ws, CODEC_ZSTD, shuffle, z, (size_t)n,
					  back, len), 0);
	assert_memory_equal(src, back, len);
	*stored = n;
	free(z);
	free(back);
}

static void test_zstd_levels_and_shuffles(void **state)
{
	struct codec_ws *ws = codec_ws_new();
	size_t len = 256 * 1024 + 3;
	uint8_t *kv = malloc(len);
	long s0, s2, s4, s9;

	(void)state;
	assert_non_null(ws);
	fill_bf16(kv, len, 7);
	roundtrip(ws, kv, len, 1, 0, &s0);
	roundtrip(ws, kv, len, 1, 2, &s2);
	roundtrip(ws, kv, len, 3, 4, &s4);
	roundtrip(ws, kv, len, 9, 2, &s9);
	/* several frames: a 1.5 MiB chunk is 3 of them */
	{
		size_t big = 3 * CODEC_FRAME_BYTES - 5;
		uint8_t *b = malloc(big), *z = malloc(big + 4096);
		struct codec_frame f[8];
		long n, nf;

		fill_bf16(b, big, 11);
		roundtrip(ws, b, big, 1, 2, &n);
		n = codec_compress(ws, 1, 2, b, big, z, big + 4096);
		assert_true(n > 0);
		nf = codec_frames(z, (size_t)n, big, f, 8);
		assert_int_equal(nf, 3);
		assert_int_equal(f[2].dst_off + f[2].dst_len, big);
		assert_int_equal(codec_frames(z, (size_t)n, big + 1, f, 8),
				 -EBADMSG);
		assert_int_equal(codec_frames(z, (size_t)n, big, f, 2), -EBADMSG);
		assert_int_equal(codec_frames(z, (size_t)n - 1, big, f, 8),
				 -EBADMSG);
		free(b);
		free(z);
	}
	/* the shuffle is the point: it must help on bf16 */
	assert_true(s2 < s0);
	assert_true((double)len / (double)s2 > 1.25);
	free(kv);
	codec_ws_free(ws);
}

static void test_incompressible_gives_e2big(void **state)
{
	struct codec_ws *ws = codec_ws_new();
	size_t len = 128 * 1024;
	uint8_t *r = malloc(len), *z = malloc(len);

	(void)state;
	fill_random(r, len, 99);
	assert_int_equal(codec_compress(ws, 1, 0, r, len, z, len - len / 16),
			 -E2BIG);
	assert_int_equal(codec_compress(ws, 1, 2, r, len, z, len - len / 16),
			 -E2BIG);
	free(r);
	free(z);
	codec_ws_free(ws);
}

/* Incompressible chunks are found out cheaply (a sample, not the whole
 * chunk, goes through zstd); compressible ones are still compressed, and
 * a chunk whose middle compresses is not judged by anything else. */
static void test_incompressible_is_cheap(void **state)
{
	struct codec_ws *ws = codec_ws_new();
	size_t len = 4u << 20;
	uint8_t *r = malloc(len), *z = malloc(len);
	uint64_t fed;
	long n;

	(void)state;
	assert_true(ws && r && z);
	fill_random(r, len, 5);
	for (int shuffle = 0; shuffle <= 2; shuffle += 2) {
		fed = codec_ws_fed(ws);
		assert_int_equal(codec_compress(ws, 3, shuffle, r, len, z,
						len - len / 16), -E2BIG);
		assert_true(codec_ws_fed(ws) - fed <= CODEC_SAMPLE_BYTES);
	}
	/* compressible: compressed whole, and it round-trips */
	fill_bf16(r, len, 6);
	fed = codec_ws_fed(ws);
	roundtrip(ws, r, len, 1, 2, &n);
	assert_true(codec_ws_fed(ws) - fed >= len);
	assert_true((size_t)n < len - len / 16);
	/* a cap >= len asks no saving: no sample, the whole is tried */
	fill_random(r, len, 7);
	fed = codec_ws_fed(ws);
	n = codec_compress(ws, 1, 0, r, len, z, len);
	assert_true(n == -E2BIG || n > 0);
	assert_true(codec_ws_fed(ws) - fed >= len / 2);
	free(r);
	free(z);
	codec_ws_free(ws);
}

static void test_zeros_compress_hugely(void **state)
{
	struct codec_ws *ws = codec_ws_new();
	size_t len = 1 << 20;
	uint8_t *r = calloc(1, len);
	long n;

	(void)state;
	roundtrip(ws, r, len, 1, 2, &n);
	assert_true(n < 1024);
	free(r);
	codec_ws_free(ws);
}

static void test_bad_input(void **state)
{
	struct codec_ws *ws = codec_ws_new();
	size_t len = 64 * 1024;
	uint8_t *kv = malloc(len), *z = malloc(2 * len), *back = malloc(len + 16);
	long n;

	(void)state;
	fill_bf16(kv, len, 3);
	assert_int_equal(codec_compress(ws, 0, 0, kv, len, z, 2 * len), -EINVAL);
	assert_int_equal(codec_compress(ws, 1, 3, kv, len, z, 2 * len), -EINVAL);
	assert_int_equal(codec_compress(ws, 99, 0, kv, len, z, 2 * len), -EINVAL);
	n = codec_compress(ws, 1, 2, kv, len, z, 2 * len);
	assert_true(n > 0);
	/* wrong expected size: never decoded into a different length */
	assert_int_equal(codec_decompress(ws, CODEC_ZSTD, 2, z, (size_t)n, back,
					  len - 2), -EBADMSG);
	assert_int_equal(codec_decompress(ws, CODEC_ZSTD, 2, z, (size_t)n, back,
					  len + 2), -EBADMSG);
	/* truncated frame */
	assert_int_equal(codec_decompress(ws, CODEC_ZSTD, 2, z, (size_t)n / 2,
					  back, len), -EBADMSG);
	/* garbage */
	memset(z, 0xa5, 64);
	assert_int_equal(codec_decompress(ws, CODEC_ZSTD, 2, z, (size_t)n, back,
					  len), -EBADMSG);
	/* raw payload of the wrong size */
	assert_int_equal(codec_decompress(ws, CODEC_NONE, 0, kv, len - 1, back,
					  len), -EBADMSG);
	assert_int_equal(codec_decompress(ws, 7, 0, kv, len, back, len), -EINVAL);
	free(kv);
	free(z);
	free(back);
	codec_ws_free(ws);
}

static void sum_piece(void *arg, const void *p, size_t n)
{
	kvrec_sum_add(arg, p, n);
}

/* Decodes the stored bytes src[0..slen) in pieces of `piece` bytes
 * through codec_dec_*, hashing what feed says it wrote: the result, and
 * *sum (kvrec_sum over the raw bytes, as a promotion computes it). */
static int dec_pieces(struct codec_ws *ws, int shuffle, const uint8_t *src,
		      size_t slen, uint8_t *dst, size_t raw, size_t piece,
		      uint64_t *sum)
{
	struct kvrec_sum_state *st = kvrec_sum_new();
	int rc = codec_dec_begin(ws, shuffle, dst, raw);

	assert_non_null(st);
	kvrec_sum_reset(st, 0);
	for (size_t off = 0; !rc && off < slen; off += piece) {
		size_t n = slen - off < piece ? slen - off : piece, outlen;
		const void *out;

		rc = codec_dec_feed(ws, src, off + n, off + n == slen, &out,
				    &outlen);
		if (!rc && outlen) { /* new raw bytes, inside dst */
			assert_false(shuffle);
			assert_true((const uint8_t *)out >= dst &&
				    (const uint8_t *)out + outlen <= dst + raw);
			kvrec_sum_add(st, out, outlen);
		}
	}
	if (!rc)
		rc = codec_dec_end(ws, shuffle ? sum_piece : NULL, st);
	*sum = kvrec_sum_end(st);
	kvrec_sum_free(st);
	return rc;
}

/* The streaming decode (a GET's payload decoded as it arrives) gives
 * what codec_decompress gives, in any pieces, with and without the
 * shuffle, over several frames; the streaming sum is kvrec_sum; a
 * payload cut short, one with bytes after it, or a flipped byte is
 * -EBADMSG (or a wrong sum), never more than raw_len bytes written. */
static void test_streaming_decode(void **state)
{
	const size_t raw = 3 * CODEC_FRAME_BYTES + 12345;
	uint8_t *src = malloc(raw), *dst = malloc(raw + 64), *z = malloc(raw);
	const size_t pieces[] = { 1, 7, 4096, 65536 + 3, 1u << 30 };
	struct codec_ws *ws = codec_ws_new();
	uint64_t sum, want;

	fill_bf16(src, raw, 3);
	want = kvrec_sum(src, raw, 0);
	for (int sh = 0; sh <= 2; sh += 2) {
		long n = codec_compress(ws, 1, sh, src, raw, z, raw);

		assert_true(n > 0);
		for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
			if (pieces[i] == 1 && sh)
				continue; /* slow under ASan; 7 covers it */
			memset(dst, 0xee, raw + 64);
			assert_int_equal(dec_pieces(ws, sh, z, (size_t)n, dst, raw,
						    pieces[i], &sum), 0);
			assert_memory_equal(dst, src, raw);
			assert_int_equal(sum, want);
			for (size_t j = raw; j < raw + 64; j++)
				assert_int_equal(dst[j], 0xee);
		}
		/* cut short: the last frame is not whole */
		assert_int_equal(dec_pieces(ws, sh, z, (size_t)n - 1, dst, raw,
					    4096, &sum), -EBADMSG);
		/* a frame too many: more than raw_len bytes */
		{
			uint8_t *zz = malloc((size_t)n * 2);

			memcpy(zz, z, (size_t)n);
			memcpy(zz + n, z, (size_t)n);
			assert_int_equal(dec_pieces(ws, sh, zz, (size_t)n * 2,
						    dst, raw, 65536, &sum),
					 -EBADMSG);
			free(zz);
		}
		/* one byte flipped in the middle: refused, or a wrong sum */
		z[n / 2] ^= 0x20;
		memset(dst, 0xee, raw + 64);
		if (dec_pieces(ws, sh, z, (size_t)n, dst, raw, 65536, &sum) == 0)
			assert_true(sum != want);
		for (size_t j = raw; j < raw + 64; j++)
			assert_int_equal(dst[j], 0xee);
		z[n / 2] ^= 0x20;
	}
	/* nothing given at all is not a record of raw_len bytes */
	assert_int_equal(dec_pieces(ws, 0, z, 0, dst, raw, 1, &sum), -EBADMSG);
	codec_ws_free(ws);
	free(src);
	free(dst);
	free(z);
}

static void test_parse(void **state)
{
	int lvl = -1;

	(void)state;
	assert_int_equal(codec_parse("none", &lvl), 0);
	assert_int_equal(lvl, 0);
	assert_int_equal(codec_parse("zstd", &lvl), 0);
	assert_int_equal(lvl, CODEC_LEVEL_DEFAULT);
	assert_int_equal(codec_parse("zstd:7", &lvl), 0);
	assert_int_equal(lvl, 7);
	assert_int_equal(codec_parse("zstd:", &lvl), -EINVAL);
	assert_int_equal(codec_parse("zstd:0", &lvl), -EINVAL);
	assert_int_equal(codec_parse("zstd:23", &lvl), -EINVAL);
	assert_int_equal(codec_parse("zstd:3x", &lvl), -EINVAL);
	assert_int_equal(codec_parse("lz4", &lvl), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shuffle_roundtrip),
		cmocka_unit_test(test_shuffle_layout),
		cmocka_unit_test(test_zstd_levels_and_shuffles),
		cmocka_unit_test(test_incompressible_gives_e2big),
		cmocka_unit_test(test_incompressible_is_cheap),
		cmocka_unit_test(test_zeros_compress_hugely),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_streaming_decode),
		cmocka_unit_test(test_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
