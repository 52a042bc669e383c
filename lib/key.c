/*
 * key.c - the keys of include/kvfs.h section 1: prefix keys of token
 * chunks, keys of paths, hex names and their parsing. Part of libkvfs (an
 * engine derives keys without a mount); the daemon links libkvfs for them.
 * Calls only libc and xxHash (compiled in: XXH_INLINE_ALL, so libkvfs
 * needs no libxxhash at run time).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kvfs.h"

static void put_le32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

static int little_endian(void)
{
	const uint16_t one = 1;

	return *(const unsigned char *)&one == 1;
}

int kvfs_key_chunk(const struct kvfs_key *prev, uint64_t seed,
		   const void *extra, uint32_t extra_len,
		   const uint32_t *tokens, size_t ntokens,
		   struct kvfs_key *out)
{
	static const struct kvfs_key zero;
	XXH3_state_t st;
	XXH128_hash_t h;
	XXH128_canonical_t canon;
	unsigned char le[4];

	if (!out || (!tokens && ntokens) || (!extra && extra_len))
		return -EINVAL;
	XXH3_INITSTATE(&st);
	if (XXH3_128bits_reset_withSeed(&st, seed) != XXH_OK)
		return -EINVAL;
	XXH3_128bits_update(&st, prev ? prev->b : zero.b, 16);
	put_le32(le, extra_len);
	XXH3_128bits_update(&st, le, 4);
	if (extra_len)
		XXH3_128bits_update(&st, extra, extra_len);
	if (little_endian()) {
		if (ntokens)
			XXH3_128bits_update(&st, tokens, ntokens * 4);
	} else {
		for (size_t i = 0; i < ntokens; i++) {
			put_le32(le, tokens[i]);
			XXH3_128bits_update(&st, le, 4);
		}
	}
	h = XXH3_128bits_digest(&st);
	XXH128_canonicalFromHash(&canon, h);
	memcpy(out->b, canon.digest, 16);
	return 0;
}

int kvfs_path_key(const char *path, size_t len, struct kvfs_key *out)
{
	XXH128_canonical_t canon;

	if (!out || (!path && len))
		return -EINVAL;
	XXH128_canonicalFromHash(&canon, XXH3_128bits(path, len));
	memcpy(out->b, canon.digest, 16);
	return 0;
}

long kvfs_keys(const uint32_t *tokens, size_t ntokens, size_t chunk_tokens,
	       uint64_t seed, const void *extra, uint32_t extra_len,
	       struct kvfs_key *out, size_t max)
{
	size_t n, i;
	int rc;

	if (chunk_tokens == 0 || (!tokens && ntokens) || (!out && max))
		return -EINVAL;
	n = ntokens / chunk_tokens;
	if (n > max)
		n = max;
	for (i = 0; i < n; i++) {
		rc = kvfs_key_chunk(i ? &out[i - 1] : NULL, seed, extra,
				    extra_len, tokens + i * chunk_tokens,
				    chunk_tokens, &out[i]);
		if (rc < 0)
			return rc;
	}
	return (long)n;
}

long kvfs_layer_keys(const uint32_t *tokens, size_t ntokens,
		     size_t chunk_tokens, uint64_t seed, const void *extra,
		     uint32_t extra_len, uint32_t layer, struct kvfs_key *out,
		     size_t max)
{
	static const char tag[] = KVFS_LAYER_TAG;
	const size_t tl = sizeof(tag) - 1;
	unsigned char *x;
	long n;

	if ((!extra && extra_len) || extra_len > UINT32_MAX - tl - 4)
		return -EINVAL;
	x = malloc(extra_len + tl + 4);
	if (!x)
		return -ENOMEM;
	if (extra_len)
		memcpy(x, extra, extra_len);
	memcpy(x + extra_len, tag, tl);
	put_le32(x + extra_len + tl, layer);
	n = kvfs_keys(tokens, ntokens, chunk_tokens, seed, x,
		      extra_len + (uint32_t)tl + 4, out, max);
	free(x);
	return n;
}

void kvfs_key_hex(const struct kvfs_key *key, char out[KVFS_KEY_HEX_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < 16; i++) {
		out[2 * i] = digits[key->b[i] >> 4];
		out[2 * i + 1] = digits[key->b[i] & 15];
	}
	out[KVFS_KEY_HEX_LEN] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int kvfs_key_parse(const char *name, size_t len, struct kvfs_key *out)
{
	struct kvfs_key k;

	if (!name || len != KVFS_KEY_HEX_LEN)
		return -EINVAL;
	for (int i = 0; i < 16; i++) {
		int hi = hexval(name[2 * i]), lo = hexval(name[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		k.b[i] = (uint8_t)(hi << 4 | lo);
	}
	if (out)
		*out = k;
	return 0;
}
