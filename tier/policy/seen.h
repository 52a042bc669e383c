/*
 * seen.h - "was this key seen lately?": a decaying Bloom filter over 64-bit
 * key hashes, in two generations. Used by the s2lru policy (admission on
 * second sight) and by ingest=twice (L2 admits chunks seen twice).
 *
 * Every key added goes to the current generation; once it holds `keys`
 * keys it becomes the previous one and the old previous is cleared, so a
 * key is remembered for between `keys` and 2 x `keys` later additions.
 * SEEN_BITS bits per key and three probes in one 64-bit word (a blocked
 * filter: one cache line per lookup): under 1% false positives with one
 * full generation, under 2% with both (tests/unit/test_seen.c measures
 * it; at 8 bits a key it was 7%, enough for a long scan to leak into
 * s2lru's main list). A
 * false positive only ever admits a chunk early; it never serves anything
 * wrong. Not thread safe: callers hold their lock.
 */
#ifndef KVFS_SEEN_H
#define KVFS_SEEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SEEN_BITS 16 /* filter bits per remembered key */

struct seen_filter {
	uint64_t *gen[2]; /* current, previous; nwords each */
	uint64_t nwords;  /* keys * SEEN_BITS / 64, rounded up */
	uint64_t added;   /* keys added to the current generation */
	uint64_t per_gen; /* keys a generation takes before it ages */
};

/* seen_init - an empty filter for `keys` keys a generation (>= 1),
 * replacing what f held (f zeroed or initialised before). 0 or -ENOMEM
 * (f unchanged). */
int seen_init(struct seen_filter *f, uint64_t keys);
void seen_free(struct seen_filter *f);
bool seen_has(const struct seen_filter *f, uint64_t h);
/* seen_add - remembers h; clearing the old generation when the current
 * one is full costs O(nwords) once per per_gen additions: O(1) amortised. */
void seen_add(struct seen_filter *f, uint64_t h);
/* Bytes of both generations. */
size_t seen_bytes(const struct seen_filter *f);

/*
 * Keys seen at least twice (a doorkeeper in front of a second filter, as
 * Dynamo's disk tier admits blocks of frequency >= 2): seen2_note on each
 * sighting, seen2_twice says whether one came before the last.
 */
struct seen2 {
	struct seen_filter once, twice;
};

int seen2_init(struct seen2 *s, uint64_t keys);
void seen2_free(struct seen2 *s);
void seen2_note(struct seen2 *s, uint64_t h);
bool seen2_twice(const struct seen2 *s, uint64_t h);
size_t seen2_bytes(const struct seen2 *s);

#endif
