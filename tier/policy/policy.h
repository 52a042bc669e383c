/*
 * policy.h - the eviction policy interface of the L1 arena.
 *
 * A policy orders the published L1 chunks (struct policy_item, embedded in
 * the engine's chunk record) and picks victims. All calls are made with
 * tier.lock held, so policies need no locking of their own.
 *
 * Adding a policy: write tier/policy_NAME.c defining
 *   const struct policy_ops policy_NAME_ops = { .name = "NAME", ... };
 * and add one line to the table in tier/policy/policy.c.
 *
 * Admission. The engine makes room first (evict, until the new chunk's
 * extent fits) and inserts after, on publish and on promotion from L2 or
 * L3 alike, so a policy cannot refuse a chunk: it admits on probation by
 * placing the new item first in line to leave (s2lru's 1% FIFO), which
 * costs the chunk nothing until the next insertion needs room. An insert
 * is also a miss (the engine publishes what was not found), so a policy
 * counting accesses counts inserts and hits; it sees the key only as
 * hkey, a hash keyed with a per-process random seed, so anything it
 * derives from hkey (filters, sketches) varies slightly between runs.
 */
#ifndef KVFS_POLICY_H
#define KVFS_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "hash/htab.h"

/*
 * Per-chunk state a policy sees. The engine fills atime, depth, nchildren,
 * refs and hkey and keeps them current; prev/next/q/freq belong to the
 * policy. node is the engine's: its link in the chunk index (a struct
 * htab), whose hash node.h is hkey itself (one 64-bit field, two names),
 * so a chunk record pays for the index link and the hash once.
 */
struct policy_item {
	struct policy_item *prev, *next; /* policy-owned list links */
	uint64_t atime;     /* logical clock of the last access (engine) */
	union {
		struct htab_node node; /* engine: index link; node.h == hkey */
		struct {
			struct htab_node *node_next_; /* == node.next */
			uint64_t hkey; /* 64-bit hash of (namespace, key),
					* for ghosts */
		};
	};
	uint32_t depth;     /* position in its prefix chain, 0 = unknown */
	uint32_t nchildren; /* children currently cached in L1 (engine) */
	uint32_t refs;      /* pins; an item with refs > 0 is never a victim */
	uint8_t q;          /* policy-owned: which queue */
	uint8_t freq;       /* policy-owned: access counter */
	uint16_t pflags;    /* policy-owned */
};

_Static_assert(offsetof(struct policy_item, hkey) ==
	       offsetof(struct policy_item, node.h), "hkey is node.h");

struct policy; /* a policy instance; opaque to the engine */

struct policy_ops {
	const char *name;
	/* capacity_items: rough number of items L1 holds (for S3-FIFO's
	 * queue sizes and ghost); the engine updates it with resize. */
	int (*create)(struct policy **out, uint64_t capacity_items);
	void (*destroy)(struct policy *p);
	/* A chunk entered L1 (published or promoted). */
	void (*insert)(struct policy *p, struct policy_item *it);
	/* A hit on a chunk in L1. */
	void (*access)(struct policy *p, struct policy_item *it);
	/* Hits on a run of chunks in L1 at one logical time, items[0..n) in
	 * chain order (shallowest first): sets each one's atime to atime
	 * and does what access would, as if told deepest first. May be
	 * NULL: the engine sets atime and calls access on each, deepest
	 * first. */
	void (*access_run)(struct policy *p, struct policy_item **items,
			   uint32_t n, uint64_t atime);
	/* A chunk left L1 for a reason other than eviction by this policy
	 * (unlink, namespace removal). */
	void (*remove)(struct policy *p, struct policy_item *it);
	/* The engine changed depth or nchildren of it. May be NULL. */
	void (*update)(struct policy *p, struct policy_item *it);
	/* Pick a victim with refs == 0, unlink it from the policy's queues
	 * (recording a ghost if the policy keeps them) and return it; NULL
	 * when every item is pinned. */
	struct policy_item *(*evict)(struct policy *p);
	/* New capacity estimate. May be NULL. */
	void (*resize)(struct policy *p, uint64_t capacity_items);
	/* Bytes of policy state beyond the items (ghost tables...). */
	size_t (*meta_bytes)(const struct policy *p);
};

/* policy_find - the ops for a name, or NULL. */
const struct policy_ops *policy_find(const char *name);
/* policy_names - a NULL-terminated array of every policy name. */
const char *const *policy_names(void);

#endif /* KVFS_POLICY_H */
