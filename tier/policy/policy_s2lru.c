/*
 * policy_s2lru.c - second-sight LRU: an LRU that, when the traffic shows
 * it pays, admits a chunk to its main part only when the key was seen
 * before, remembered by a decaying Bloom filter that reaches much further
 * back than the cache.
 *
 * What prefix traffic looks like (ctl_replay on Mooncake-format traces):
 * on document and system-prompt traffic (the shipped trace) most blocks
 * arrive in a request whose whole prefix is new, under half of those are
 * ever asked for again, and the re-use is far away; a block that HAS come
 * back once tends to come back again. On multi-turn chat and agent loops,
 * the new blocks of a turn are re-read by the next one, soon. So:
 *
 *   P, probation: a FIFO of first sights; a hit there promotes to M;
 *   M, main: an LRU for chunks seen before (a hit while in P, or an insert
 *      of a key the filter remembers: the second sight is a miss, the
 *      third a hit).
 *
 * With second_sight off, the victim is the older of P's and M's heads by
 * the engine's clock (atime): exactly LRU over both, P being in touch
 * order too. With it on, P is evicted first while it holds more than
 * S2_PROB_PCT (1%) of the resident chunks: in effect a first sight is
 * admitted only until the next insertion needs room (the engine always
 * inserts after evicting, so "admission" can only mean "first in line to
 * leave"). Switching on finds every first sight of the LRU phase already
 * in P, first to go, so the cache turns over at once.
 *
 * Which one: two shadow caches of keys (LRU insertion, second-sight
 * insertion) run on a spatial sample of the keys, at most S2_SHADOW_MAX
 * entries each (a miniature simulation, Waldspurger et al., ATC 2017); the
 * one ahead on the references where they disagree (decayed) sets
 * second_sight. It starts off:
 * without evidence the policy is an LRU, so on chat and agent traffic it
 * stays within 0.001 of LRU's prefix hit ratio (README has the table), and
 * a scan with no re-use in it flushes it as it flushes LRU; once the
 * shadows have shown second sight pays, one-off blocks leave from P.
 *
 * The memory of "seen before" is tier/policy/seen.h's decaying Bloom filter
 * (two generations, SEEN_BITS bits per remembered key, three probes in
 * one 64-bit word): every key inserted or hit is added; once the current
 * generation holds S2_GHOST_MULT x capacity keys the previous one is
 * dropped. So a key is remembered for 4 to 8 capacities of insertions,
 * for SEEN_BITS * 2 * S2_GHOST_MULT / 8 = 16 bytes per chunk of capacity.
 * A false positive (under 2%, seen.h) only admits a first sight into M;
 * it never serves anything wrong.
 *
 * Chains: each part evicts leaves first. A part is two lists in touch
 * order, its leaves (nchildren == 0: no child in L1) and its interior
 * chunks; the victim is the oldest leaf, an interior chunk only when the
 * part has no unpinned leaf (as the prefix policy orders the whole cache).
 * Every hit touches a prefix from the root down, so plain LRU evicts the
 * root of the oldest chain first and leaves the rest of it cached but
 * unreachable by any prefix run; leaf-first takes the chain from its end,
 * so what stays of it still serves a prefix. update() moves a chunk
 * between its part's lists when nchildren crosses zero: one that gained a
 * child to the back of the interior list (it was touched just before),
 * one that lost its last child to the front of the leaves when it is the
 * oldest (the child was the victim; a parent is touched before its
 * children), else to the back (a re-read shared prefix whose
 * continuations have left). On the shipped trace this raised the gap
 * closed at every capacity (1%: 0.08 to 0.10; README has the table).
 *
 * Costs: O(1) per call (list moves, 3 bit probes, for sampled keys two
 * shadow updates; update() puts a chunk at an end of a list); dropping a
 * generation clears its words once per S2_GHOST_MULT x capacity
 * insertions, O(1) amortised and never on the eviction path. Memory: 16
 * bytes per chunk of capacity for the filter, plus at most ~70 KiB for the
 * shadows and 32 bytes for the two extra lists (meta_bytes;
 * bench/kvfs_meta); no byte more per chunk (the list flag is in pflags).
 * Pinned chunks are skipped by policy_list.h's bounded walk.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tier/policy/policy.h"
#include "tier/policy/policy_list.h"
#include "tier/policy/seen.h"

enum { S2_NONE = 0, S2_PROB = 1, S2_MAIN = 2 }; /* policy_item.q */
#define S2_INNER 1 /* policy_item.pflags: in its part's interior list */

#define S2_PROB_PCT 1   /* P's share of the resident chunks */
#define S2_GHOST_MULT 4 /* keys per filter generation, in capacities */

#define S2_SHADOW_MAX 1024 /* entries of each shadow cache, at most */
#define S2_DECAY 8ULL      /* shadow-fulls of samples between halvings */

/* --------------------------------------------------------- shadow caches */

/*
 * A shadow cache: keys only, in one or two lists over index arrays (node
 * 0 is nil), with a chained hash of its keys. Two of them, one inserting
 * like LRU and one like s2lru, run on a spatial sample of the keys (those
 * whose hash is 0 modulo rate) with capacity / rate entries (Waldspurger
 * et al., "Cache modeling and optimization using miniature simulations",
 * ATC 2017): the one with more hits decides which list evict takes from.
 */
struct s2_shadow {
	uint64_t *key;
	uint32_t *prev, *next, *chain, *bucket;
	uint8_t *q;             /* 0 free, S2_PROB, S2_MAIN */
	uint32_t head[3], tail[3], n[3];
	uint32_t cap, nbuckets; /* nbuckets: a power of two */
	uint32_t free_head;
	uint64_t hits;          /* decayed */
};

struct policy {
	/* Everything is protected by tier.lock. head = next victim. Each part
	 * is two lists: leaves (nchildren == 0) and interior chunks. */
	struct plist prob, probi, main, maini;
	struct seen_filter seen; /* every key inserted or hit lately */
	uint64_t cap;      /* capacity estimate the filter is sized for */
	uint64_t max_res;  /* most chunks resident at an eviction */
	struct s2_shadow sh[2]; /* [0] inserts like LRU, [1] like s2lru */
	uint64_t rate;     /* shadows see keys with hash % rate == 0 */
	uint64_t refs;     /* sampled references since the last decay */
	int64_t lead;      /* s2lru shadow's hits minus LRU's, decayed */
	bool second_sight; /* evict P first (else the older of P and M) */
};

static void shadow_free(struct s2_shadow *sh)
{
	free(sh->key);
	free(sh->prev);
	free(sh->next);
	free(sh->chain);
	free(sh->bucket);
	free(sh->q);
	memset(sh, 0, sizeof(*sh));
}

static int shadow_init(struct s2_shadow *sh, uint32_t cap)
{
	uint32_t nb = 1;

	while (nb < cap)
		nb <<= 1;
	shadow_free(sh);
	sh->key = calloc(cap + 1, sizeof(*sh->key));
	sh->prev = calloc(cap + 1, sizeof(*sh->prev));
	sh->next = calloc(cap + 1, sizeof(*sh->next));
	sh->chain = calloc(cap + 1, sizeof(*sh->chain));
	sh->q = calloc(cap + 1, sizeof(*sh->q));
	sh->bucket = calloc(nb, sizeof(*sh->bucket));
	if (!sh->key || !sh->prev || !sh->next || !sh->chain || !sh->q ||
	    !sh->bucket) {
		shadow_free(sh);
		return -ENOMEM;
	}
	sh->cap = cap;
	sh->nbuckets = nb;
	for (uint32_t i = 1; i <= cap; i++) /* the free list, via next */
		sh->next[i] = i < cap ? i + 1 : 0;
	sh->free_head = 1;
	return 0;
}

static uint32_t shadow_bucket(const struct s2_shadow *sh, uint64_t h)
{
	return (uint32_t)(h >> 20) & (sh->nbuckets - 1);
}

static uint32_t shadow_find(const struct s2_shadow *sh, uint64_t h)
{
	uint32_t i = sh->bucket[shadow_bucket(sh, h)];

	while (i && sh->key[i] != h)
		i = sh->chain[i];
	return i;
}

static void shadow_unlink(struct s2_shadow *sh, uint32_t i)
{
	uint8_t q = sh->q[i];

	if (sh->prev[i])
		sh->next[sh->prev[i]] = sh->next[i];
	else
		sh->head[q] = sh->next[i];
	if (sh->next[i])
		sh->prev[sh->next[i]] = sh->prev[i];
	else
		sh->tail[q] = sh->prev[i];
	sh->n[q]--;
}

static void shadow_push(struct s2_shadow *sh, uint32_t i, uint8_t q)
{
	sh->q[i] = q;
	sh->next[i] = 0;
	sh->prev[i] = sh->tail[q];
	if (sh->tail[q])
		sh->next[sh->tail[q]] = i;
	else
		sh->head[q] = i;
	sh->tail[q] = i;
	sh->n[q]++;
}

/* Drops the LRU end of P (while over 1%) or of M, as s2_evict does. */
static void shadow_evict(struct s2_shadow *sh)
{
	uint32_t floor_n = sh->cap / 100, i, *pp;
	uint8_t q = sh->n[S2_PROB] > floor_n || !sh->n[S2_MAIN] ?
		    S2_PROB : S2_MAIN;

	i = sh->head[q];
	shadow_unlink(sh, i);
	for (pp = &sh->bucket[shadow_bucket(sh, sh->key[i])]; *pp != i;
	     pp = &sh->chain[*pp])
		;
	*pp = sh->chain[i];
	sh->q[i] = 0;
	sh->next[i] = sh->free_head;
	sh->free_head = i;
}

/* One reference to h: a hit moves it to M's MRU end; a miss inserts it,
 * into P when to_prob. */
static void shadow_ref(struct s2_shadow *sh, uint64_t h, bool to_prob)
{
	uint32_t i = shadow_find(sh, h), b;

	if (i) {
		sh->hits++;
		shadow_unlink(sh, i);
		shadow_push(sh, i, S2_MAIN);
		return;
	}
	if (!sh->free_head)
		shadow_evict(sh);
	i = sh->free_head;
	sh->free_head = sh->next[i];
	sh->key[i] = h;
	b = shadow_bucket(sh, h);
	sh->chain[i] = sh->bucket[b];
	sh->bucket[b] = i;
	shadow_push(sh, i, to_prob ? S2_PROB : S2_MAIN);
}

static int s2_shadows(struct policy *p, uint64_t capacity)
{
	uint64_t rate = 1;

	while (capacity / rate > S2_SHADOW_MAX)
		rate <<= 1;
	if (shadow_init(&p->sh[0], (uint32_t)(capacity / rate)) ||
	    shadow_init(&p->sh[1], (uint32_t)(capacity / rate)))
		return -ENOMEM;
	p->rate = rate;
	p->refs = 0;
	return 0;
}

/*
 * A reference (insert: a miss; access: a hit) the shadows sample; seen:
 * whether the key was seen before it. lead counts the references where
 * one shadow hit and the other missed (+1 for second sight, -1 for LRU);
 * the mode follows its sign, and a lead of 0 keeps it. Every 8
 * shadow-fulls of references lead and the hit counts halve, so the choice
 * follows the traffic. (Comparing the two hit totals with a 1/32 margin,
 * as this did first, switched late in big caches: the hits both shadows
 * share while the cache fills swell the margin, so on the shipped trace
 * at 40% second sight came on half way through it.)
 */
static void s2_sample(struct policy *p, uint64_t hkey, bool seen)
{
	uint64_t h = htab_mix64(hkey);
	uint64_t lru, s2;

	if (!p->sh[0].cap || (h & (p->rate - 1)))
		return;
	lru = p->sh[0].hits;
	s2 = p->sh[1].hits;
	shadow_ref(&p->sh[0], h, false);
	shadow_ref(&p->sh[1], h, !seen);
	p->lead += (int64_t)(p->sh[1].hits - s2) -
		   (int64_t)(p->sh[0].hits - lru);
	if (++p->refs >= S2_DECAY * p->sh[0].cap) {
		p->refs = 0;
		p->sh[0].hits /= 2;
		p->sh[1].hits /= 2;
		p->lead /= 2;
	}
	if (p->lead > 0)
		p->second_sight = true;
	else if (p->lead < 0)
		p->second_sight = false;
}

static void s2_destroy(struct policy *p)
{
	seen_free(&p->seen);
	shadow_free(&p->sh[0]);
	shadow_free(&p->sh[1]);
	free(p);
}

static int s2_create(struct policy **out, uint64_t capacity_items)
{
	struct policy *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	plist_init(&p->prob);
	plist_init(&p->probi);
	plist_init(&p->main);
	plist_init(&p->maini);
	p->cap = capacity_items < 16 ? 16 : capacity_items;
	if (seen_init(&p->seen, p->cap * S2_GHOST_MULT) ||
	    s2_shadows(p, p->cap)) {
		s2_destroy(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

/* A capacity estimate 2x away from the filter's: resize the filter (what
 * it remembered is lost; the lists keep their order). */
static void s2_resize(struct policy *p, uint64_t capacity_items)
{
	if (capacity_items < 16)
		capacity_items = 16;
	if ((capacity_items > p->cap * 2 || capacity_items * 2 < p->cap) &&
	    !seen_init(&p->seen, capacity_items * S2_GHOST_MULT) &&
	    !s2_shadows(p, capacity_items))
		p->cap = capacity_items;
}

static struct plist *s2_list(struct policy *p, const struct policy_item *it)
{
	bool inner = it->pflags & S2_INNER;

	switch (it->q) {
	case S2_PROB: return inner ? &p->probi : &p->prob;
	case S2_MAIN: return inner ? &p->maini : &p->main;
	default: return NULL;
	}
}

static void s2_push(struct policy *p, struct policy_item *it, uint8_t q)
{
	it->q = q;
	it->pflags = it->nchildren ? S2_INNER : 0;
	plist_push_tail(s2_list(p, it), it);
}

static void s2_insert(struct policy *p, struct policy_item *it)
{
	bool seen = seen_has(&p->seen, it->hkey);

	it->freq = 0;
	s2_sample(p, it->hkey, seen);
	s2_push(p, it, seen ? S2_MAIN : S2_PROB);
	seen_add(&p->seen, it->hkey);
}

static void s2_access(struct policy *p, struct policy_item *it)
{
	if (it->q == S2_NONE)
		return;
	s2_sample(p, it->hkey, true);
	plist_del(s2_list(p, it), it);
	s2_push(p, it, S2_MAIN);
	seen_add(&p->seen, it->hkey);
}

/*
 * nchildren crossed zero. A chunk that gained a child joins the back of
 * its part's interior list (it was touched just before the child came).
 * One that lost its last child goes first in line when it is older than
 * the leaves' head (its child was the victim, and a parent is touched
 * before its children), else to the back: a shared prefix whose
 * continuations have all left is still hot.
 */
static void s2_update(struct policy *p, struct policy_item *it)
{
	bool inner = it->nchildren != 0;
	struct plist *l;

	if (it->q == S2_NONE || inner == !!(it->pflags & S2_INNER))
		return;
	plist_del(s2_list(p, it), it);
	it->pflags = inner ? S2_INNER : 0;
	l = s2_list(p, it);
	if (!inner && (!l->head || it->atime <= l->head->atime))
		plist_insert_before(l, l->head, it);
	else
		plist_push_tail(l, it);
}

static void s2_remove(struct policy *p, struct policy_item *it)
{
	if (it->q == S2_NONE)
		return;
	plist_del(s2_list(p, it), it);
	it->q = S2_NONE;
}

/* A part's next victim by order: its oldest leaf, else its oldest
 * interior chunk (pins aside). */
static const struct policy_item *s2_first(const struct plist *leaves,
					  const struct plist *inner)
{
	return leaves->head ? leaves->head : inner->head;
}

/* Takes a part's victim: a leaf first, so a chain is evicted from its
 * end and its prefix keeps serving. */
static struct policy_item *s2_take(struct plist *leaves, struct plist *inner)
{
	struct policy_item *it = plist_evict_rotate(leaves);

	return it ? it : plist_evict_rotate(inner);
}

static struct policy_item *s2_evict(struct policy *p)
{
	uint64_t np = p->prob.n + p->probi.n, nm = p->main.n + p->maini.n;
	const struct policy_item *ph = s2_first(&p->prob, &p->probi);
	const struct policy_item *mh = s2_first(&p->main, &p->maini);
	struct policy_item *it = NULL;

	if (np + nm > p->max_res)
		p->max_res = np + nm;
	if (!nm ||
	    (p->second_sight ? np * 100 > p->max_res * S2_PROB_PCT :
	     ph && ph->atime < mh->atime))
		it = s2_take(&p->prob, &p->probi);
	if (!it)
		it = s2_take(&p->main, &p->maini);
	if (!it)
		it = s2_take(&p->prob, &p->probi);
	if (it) {
		it->q = S2_NONE;
		it->pflags = 0;
	}
	return it;
}

static size_t s2_meta_bytes(const struct policy *p)
{
	size_t sh = 0;

	for (int i = 0; i < 2; i++)
		sh += (size_t)p->sh[i].cap * (sizeof(uint64_t) +
					      4 * sizeof(uint32_t) + 1) +
		      (size_t)p->sh[i].nbuckets * sizeof(uint32_t);
	return sizeof(*p) + seen_bytes(&p->seen) + sh;
}

const struct policy_ops policy_s2lru_ops = {
	.name = "s2lru",
	.create = s2_create,
	.destroy = s2_destroy,
	.insert = s2_insert,
	.access = s2_access,
	.remove = s2_remove,
	.update = s2_update,
	.evict = s2_evict,
	.resize = s2_resize,
	.meta_bytes = s2_meta_bytes,
};
