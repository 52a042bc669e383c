/*
 * policy_s2lru.c - second-sight LRU: an LRU that admits a chunk to its
 * main part only when the key was seen before, remembered by a decaying
 * Bloom filter that reaches much further back than the cache.
 *
 * What prefix traffic looks like (ctl_replay on Mooncake-format traces):
 * most blocks arrive in a request whose whole prefix is new; under half of
 * those are ever asked for again, and the re-use, when it comes, is far
 * away (hundreds of requests: the next turn of a conversation, the next
 * agent step, the next user of a document) - further than any LRU or
 * S3-FIFO small queue of a small cache reaches. A block that HAS come back
 * once tends to come back again. So the policy keeps two lists:
 *
 *   P, probation: a FIFO for first sights, evicted first while it holds
 *      more than S2_PROB_PCT (1%) of the resident chunks: in effect a
 *      first sight is admitted only until the next insertion needs room
 *      (the engine always inserts after evicting, so "admission" can only
 *      mean "first in line to leave"); a hit while there promotes it;
 *   M, main: an LRU for chunks seen before (a hit while in P, or an insert
 *      of a key the filter remembers: the second sight is a miss, the
 *      third a hit).
 *
 * The memory of "seen before" is tier/seen.h's decaying Bloom filter
 * (two generations, SEEN_BITS bits per remembered key, three probes in
 * one 64-bit word): every key inserted or hit is added; once the current
 * generation holds S2_GHOST_MULT x capacity keys the previous one is
 * dropped. So a key is remembered for 8 to 16 capacities of insertions,
 * for SEEN_BITS * 2 * S2_GHOST_MULT / 8 = 16 bytes per chunk of capacity.
 * A false positive (4-7%, seen.h) only admits a first sight into M; it
 * never serves anything wrong.
 *
 * Chains. Every hit in a request touches its prefix from the root down,
 * so M's LRU end holds the root of the least recently used chain first;
 * ties do not exist (the engine's clock orders every touch), and the
 * leaves of a chain whose root left go soon after: they are older than
 * anything touched since.
 *
 * Costs: O(1) per call (list moves, 3 bit probes); dropping a generation
 * clears its words once per S2_GHOST_MULT x capacity insertions, O(1)
 * amortised and never on the eviction path. Pinned chunks are skipped by
 * policy_list.h's bounded walk.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "tier/policy.h"
#include "tier/policy_list.h"
#include "tier/seen.h"

enum { S2_NONE = 0, S2_PROB = 1, S2_MAIN = 2 }; /* policy_item.q */

#define S2_PROB_PCT 1   /* P's share of the resident chunks */
#define S2_GHOST_MULT 8 /* keys per filter generation, in capacities */

struct policy {
	/* Everything is protected by tier.lock. head = next victim. */
	struct plist prob, main;
	struct seen_filter seen; /* every key inserted or hit lately */
	uint64_t cap;      /* capacity estimate the filter is sized for */
	uint64_t max_res;  /* most chunks resident at an eviction */
};

static int s2_create(struct policy **out, uint64_t capacity_items)
{
	struct policy *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	plist_init(&p->prob);
	plist_init(&p->main);
	p->cap = capacity_items < 16 ? 16 : capacity_items;
	if (seen_init(&p->seen, p->cap * S2_GHOST_MULT)) {
		free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

static void s2_destroy(struct policy *p)
{
	seen_free(&p->seen);
	free(p);
}

/* A capacity estimate 2x away from the filter's: resize the filter (what
 * it remembered is lost; the lists keep their order). */
static void s2_resize(struct policy *p, uint64_t capacity_items)
{
	if (capacity_items < 16)
		capacity_items = 16;
	if ((capacity_items > p->cap * 2 || capacity_items * 2 < p->cap) &&
	    !seen_init(&p->seen, capacity_items * S2_GHOST_MULT))
		p->cap = capacity_items;
}

static struct plist *s2_list(struct policy *p, uint8_t q)
{
	switch (q) {
	case S2_PROB: return &p->prob;
	case S2_MAIN: return &p->main;
	default: return NULL;
	}
}

static void s2_push(struct policy *p, struct policy_item *it, uint8_t q)
{
	it->q = q;
	plist_push_tail(s2_list(p, q), it);
}

static void s2_insert(struct policy *p, struct policy_item *it)
{
	it->freq = 0;
	s2_push(p, it, seen_has(&p->seen, it->hkey) ? S2_MAIN : S2_PROB);
	seen_add(&p->seen, it->hkey);
}

static void s2_access(struct policy *p, struct policy_item *it)
{
	if (it->q == S2_NONE)
		return;
	plist_del(s2_list(p, it->q), it);
	s2_push(p, it, S2_MAIN);
	seen_add(&p->seen, it->hkey);
}

static void s2_remove(struct policy *p, struct policy_item *it)
{
	if (it->q == S2_NONE)
		return;
	plist_del(s2_list(p, it->q), it);
	it->q = S2_NONE;
}

static struct policy_item *s2_evict(struct policy *p)
{
	uint64_t res = p->prob.n + p->main.n;
	struct policy_item *it = NULL;

	if (res > p->max_res)
		p->max_res = res;
	if (p->prob.n * 100 > p->max_res * S2_PROB_PCT || !p->main.n)
		it = plist_evict_rotate(&p->prob);
	if (!it)
		it = plist_evict_rotate(&p->main);
	if (!it)
		it = plist_evict_rotate(&p->prob);
	if (it)
		it->q = S2_NONE;
	return it;
}

static size_t s2_meta_bytes(const struct policy *p)
{
	return sizeof(*p) + seen_bytes(&p->seen);
}

const struct policy_ops policy_s2lru_ops = {
	.name = "s2lru",
	.create = s2_create,
	.destroy = s2_destroy,
	.insert = s2_insert,
	.access = s2_access,
	.remove = s2_remove,
	.update = NULL,
	.evict = s2_evict,
	.resize = s2_resize,
	.meta_bytes = s2_meta_bytes,
};
