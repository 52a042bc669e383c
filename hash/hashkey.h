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

/* A well-mixed 64-bit hash of (namespace id, key), for hash tables: keyed
 * with a random per-process seed, so writers cannot aim keys at one bucket
 * (the value differs between processes: never store it). */
uint64_t hashkey_index(uint32_t ns, const struct kvfs_key *key);

#endif
