/* hashkey.h - internal helpers of hash/: checksums and hashing of keys. */
#ifndef KVFS_HASHKEY_H
#define KVFS_HASHKEY_H

#include <stddef.h>
#include <stdint.h>

#include "kvfs.h"

/* XXH3-64 (seed 0) of len bytes: the checksum of a chunk's raw bytes. */
uint64_t hashkey_checksum(const void *buf, size_t len);

/* Streaming checksum, for bytes that arrive in pieces. */
struct hashkey_sum {
	unsigned char state[640] __attribute__((aligned(64)));
};
void hashkey_sum_init(struct hashkey_sum *s);
void hashkey_sum_update(struct hashkey_sum *s, const void *buf, size_t len);
uint64_t hashkey_sum_final(struct hashkey_sum *s);

/* The key's part of hashkey_index: XXH3 of its 16 bytes, keyed with a
 * random per-process seed, so writers cannot aim keys at one bucket (the
 * value differs between processes: never store it). */
uint64_t hashkey_key(const struct kvfs_key *key);

/* hashkey_index from the key's part: the namespace id times an odd
 * constant, xored in. The same key in different namespaces (a chain's
 * tensor-parallel ranks) lands in buckets that differ in their low bits,
 * and a group lookup hashes its chain once for all its ranks. */
static inline uint64_t hashkey_ns(uint32_t ns, uint64_t kh)
{
	return kh ^ ((uint64_t)ns * 0xD6E8FEB86659FD93ull);
}

/* A well-mixed 64-bit hash of (namespace id, key), for hash tables:
 * hashkey_ns(ns, hashkey_key(key)). */
uint64_t hashkey_index(uint32_t ns, const struct kvfs_key *key);

#endif
