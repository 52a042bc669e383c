/*
 * htab.h - the one hash table of kvfs: small, intrusive, chained, keyed.
 *
 * The caller embeds a struct htab_node in its own object and computes the
 * 64-bit hash itself, with htab_hash() (or hashkey_index(): htab_hash()
 * of a key, its namespace id xored in after it). Both are XXH3 keyed
 * with a seed drawn at random once per process, so names and keys chosen
 * by whoever writes to the mount cannot be aimed at one bucket (hash
 * flooding).
 *
 * Lookups walk one chain: for each node e from htab_first(t, h), compare
 * e->h == h first, then the caller's own key (container_of the node).
 * The table doubles when it holds more nodes than buckets; when that
 * allocation fails it keeps its size (longer chains, still correct), so
 * htab_add fails only while the table has no buckets at all.
 *
 * Not thread-safe: the owner's lock protects the table and its nodes.
 * A zeroed struct htab is an empty table; htab_free() frees the buckets
 * (never the nodes).
 */
#ifndef KVFS_HTAB_H
#define KVFS_HTAB_H

#include <stddef.h>
#include <stdint.h>

struct htab_node {
	struct htab_node *next; /* chain */
	uint64_t h;             /* the node's hash, set by htab_add */
};

struct htab {
	struct htab_node **b; /* nb buckets, NULL while empty-and-new */
	uint64_t nb;          /* 0 or a power of two */
	uint64_t n;           /* nodes in the table */
};

#define HTAB_MIN_BUCKETS 64

#ifndef container_of
#define container_of(p, type, member) \
	((type *)((char *)(p) - offsetof(type, member)))
#endif

/* Allocates at least min buckets (a power of two >= HTAB_MIN_BUCKETS).
 * Optional: htab_add allocates on first use. 0 or -ENOMEM. */
int htab_init(struct htab *t, uint64_t min);

/* Frees the bucket array (not the nodes) and empties t. */
void htab_free(struct htab *t);

/* Inserts e with hash h (duplicates are the caller's business).
 * 0, or -ENOMEM only when the table has no buckets and cannot get any. */
int htab_add(struct htab *t, struct htab_node *e, uint64_t h);

/* Removes e, which must be in t. */
void htab_del(struct htab *t, struct htab_node *e);

/* The head of h's chain (NULL if none); walk with e->next and skip nodes
 * whose e->h differs from h. */
static inline struct htab_node *htab_first(const struct htab *t, uint64_t h)
{
	return t->nb ? t->b[h & (t->nb - 1)] : NULL;
}

/* Iterates over the nodes whose hash is h (candidates: compare keys). */
#define htab_for_each_hash(t, hash, e) \
	for ((e) = htab_first((t), (hash)); (e); (e) = (e)->next) \
		if ((e)->h == (hash))

/* Iterates over every node; the body may htab_del(e) (next is saved). */
#define htab_for_each_safe(t, i, e, nx) \
	for ((i) = 0; (i) < (t)->nb; (i)++) \
		for ((e) = (t)->b[(i)]; (e) && ((nx) = (e)->next, 1); (e) = (nx))

/* XXH3-64 of n bytes at p, keyed with this process's random seed, mixed
 * with salt (a namespace id, a kind tag) so equal bytes in different
 * tables or namespaces spread differently. Never stored: it changes with
 * every process. */
uint64_t htab_hash(uint64_t salt, const void *p, size_t n);

/* htab_hash(salt, p, 16), the length known at compile time (a key:
 * hashkey_key, on every index lookup). */
uint64_t htab_hash16(uint64_t salt, const void *p);

/* htab_hash of a 64-bit integer (inode numbers, lease ids, uids). */
uint64_t htab_hash_u64(uint64_t salt, uint64_t v);

/* MurmurHash3's 64-bit finaliser (fmix64): well-mixed bits from a value
 * that may be a weak hash (a counter in tests, block ids in the replay).
 * Deterministic, unlike htab_hash: for bits of a key that is already a
 * hash (policies' ghosts and filters). */
static inline uint64_t htab_mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

#endif
