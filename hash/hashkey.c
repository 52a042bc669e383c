/*
 * hashkey.c - chunk checksums and the index hash of keys (the keys
 * themselves are derived in lib/key.c, part of libkvfs).
 *
 * xxHash is compiled in (XXH_INLINE_ALL) for keys; checksums of chunks
 * go through libxxhash's run-time dispatch (hash/xxh_fast.h).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "hash/hashkey.h"
#include "hash/xxh_fast.h"
#include "hash/htab.h"
#include "kvfs.h"

_Static_assert(sizeof(XXH3_state_t) <= sizeof(((struct hashkey_sum *)0)->state),
	       "hashkey_sum too small for XXH3_state_t");

uint64_t hashkey_checksum(const void *buf, size_t len)
{
	return xxh_fast(buf, len);
}

void hashkey_sum_init(struct hashkey_sum *s)
{
	XXH3_INITSTATE((XXH3_state_t *)(void *)s->state);
	XXH3_64bits_reset((XXH3_state_t *)(void *)s->state);
}

void hashkey_sum_update(struct hashkey_sum *s, const void *buf, size_t len)
{
	xxh_fast_update((XXH3_state_t *)(void *)s->state, buf, len);
}

uint64_t hashkey_sum_final(struct hashkey_sum *s)
{
	return XXH3_64bits_digest((XXH3_state_t *)(void *)s->state);
}

/* The index hash is htab_hash (hash/htab.h) of the key's 16 bytes: XXH3
 * keyed with a seed drawn at random once per process, so writers cannot
 * aim keys at one bucket. The namespace id is xored in after it
 * (hashkey_ns) rather than joining the key's bytes: a 20-byte copy of
 * both, read back by XXH3 as 8-byte words one of which spans the two
 * stores, stalled every lookup on a failed store-to-load forward (a third
 * of tier_lookup's time); and a group lookup hashes its chain once for
 * all of its ranks. */
uint64_t hashkey_key(const struct kvfs_key *key)
{
	_Static_assert(sizeof(key->b) == 16, "htab_hash16");
	return htab_hash16(0, key->b);
}

uint64_t hashkey_index(uint32_t ns, const struct kvfs_key *key)
{
	return hashkey_ns(ns, hashkey_key(key));
}
