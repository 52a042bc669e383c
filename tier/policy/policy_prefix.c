/*
 * policy_prefix.c - prefix-aware LRU (RadixAttention-like).
 *
 * Victims, in order of preference:
 *   - never a pinned chunk (refs > 0);
 *   - a leaf (nchildren == 0: none of its children is in L1) before any
 *     interior chunk, because evicting a parent whose children stay cached
 *     breaks every prefix run through it while the children stay useless;
 *   - least recently used first (policy_item.atime, the engine's logical
 *     clock);
 *   - among equal atime, the deeper chunk first (it extends the longest
 *     prefix, which fewer requests share); depth 0 (unknown) counts as the
 *     shallowest; equal depth: insertion order, except within one
 *     lookup's run (access_run), where either may come first.
 *
 * Two lists, leaves and interior, each kept sorted by that order; update()
 * moves a chunk between them when its nchildren crosses zero. A chunk is
 * placed by walking from whichever end its atime is closer to, so the usual
 * cases are O(1): a fresh or touched chunk goes near the tail, a parent
 * whose last child was evicted (old atime) goes near the head.
 *
 * Pins: evict walks past up to PLIST_PIN_SCAN pinned chunks in place, so
 * with few pins the order above is exact. Further pinned chunks met are
 * parked on a third list; each evict gives PFX_UNPARK_PER_EVICT of them a
 * look and puts the unpinned back in order, and before a parent is ever
 * taken every parked chunk is looked at, so "a leaf first" always holds.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "tier/policy/policy.h"
#include "tier/policy/policy_list.h"

/* policy_item.q */
enum { PFX_NONE = 0, PFX_LEAF = 1, PFX_INNER = 2, PFX_PARKED = 3 };

/* Chunks access_run moves as one block at most. */
#define PFX_BLOCK 128

/* Parked chunks looked at again per eviction (see pfx_unpark). */
#define PFX_UNPARK_PER_EVICT 4

struct policy {
	/* All protected by tier.lock. head = next victim. */
	struct plist leaves;   /* nchildren == 0 */
	struct plist interior; /* nchildren > 0 */
	struct plist parked;   /* pinned chunks moved out of the way */
};

/* True when a must be evicted before b. */
static bool pfx_before(const struct policy_item *a,
		       const struct policy_item *b)
{
	if (a->atime != b->atime)
		return a->atime < b->atime;
	return a->depth > b->depth;
}

/* Where it goes in sorted l: the item it goes before (NULL: the tail),
 * walking from whichever end its atime is closer to. */
static struct policy_item *pfx_pos(const struct plist *l,
				   const struct policy_item *it)
{
	struct policy_item *pos;

	if (!l->head)
		return NULL;
	if (it->atime < l->head->atime ||
	    (it->atime <= l->tail->atime &&
	     it->atime - l->head->atime < l->tail->atime - it->atime)) {
		/* From the head: skip everything not after it. */
		for (pos = l->head; pos && !pfx_before(it, pos); pos = pos->next)
			;
		return pos;
	}
	/* From the tail: skip everything after it. */
	for (pos = l->tail; pos && pfx_before(it, pos); pos = pos->prev)
		;
	return pos ? pos->next : l->head;
}

static void pfx_place(struct policy *p, struct policy_item *it)
{
	struct plist *l = it->nchildren ? &p->interior : &p->leaves;

	it->q = it->nchildren ? PFX_INNER : PFX_LEAF;
	plist_insert_before(l, pfx_pos(l, it), it);
}

static void pfx_unlink(struct policy *p, struct policy_item *it)
{
	if (it->q == PFX_LEAF)
		plist_del(&p->leaves, it);
	else if (it->q == PFX_INNER)
		plist_del(&p->interior, it);
	else if (it->q == PFX_PARKED)
		plist_del(&p->parked, it);
	it->q = PFX_NONE;
}

static int pfx_create(struct policy **out, uint64_t capacity_items)
{
	struct policy *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	plist_init(&p->leaves);
	plist_init(&p->interior);
	plist_init(&p->parked);
	*out = p;
	return 0;
}

static void pfx_destroy(struct policy *p)
{
	free(p);
}

static void pfx_insert(struct policy *p, struct policy_item *it)
{
	it->freq = 0;
	pfx_place(p, it);
}

/* The engine has already moved atime forward; re-place the chunk. Also
 * serves update(): depth or nchildren changed. */
static void pfx_reposition(struct policy *p, struct policy_item *it)
{
	if (it->q == PFX_NONE || (it->q == PFX_PARKED && it->refs))
		return; /* a parked chunk comes back once unpinned */
	/* Still in the right list and in order with its neighbours (e.g. a
	 * parent gaining a second child, a hit on the newest chunk): the
	 * common case costs O(1). */
	if (it->q == (it->nchildren ? PFX_INNER : PFX_LEAF) &&
	    (!it->prev || !pfx_before(it, it->prev)) &&
	    (!it->next || !pfx_before(it->next, it)))
		return;
	pfx_unlink(p, it);
	pfx_place(p, it);
}

/* The list (queue) it belongs in. */
static uint8_t pfx_want(const struct policy_item *it)
{
	return it->nchildren ? PFX_INNER : PFX_LEAF;
}

/*
 * Places seg[0..n) as one block: they are linked in that order in one list
 * (the one each belongs in), share one atime and are in order among
 * themselves. A block already in order with its neighbours stays (a chain
 * hit again with nothing touched since: the usual case); else it is cut
 * out and put where its first chunk goes, if its last one is in order
 * there too, or else chunk by chunk.
 */
static void pfx_place_block(struct policy *p, struct policy_item **seg,
			    uint32_t n)
{
	struct policy_item *first = seg[0], *last = seg[n - 1];
	struct plist *l = first->q == PFX_INNER ? &p->interior : &p->leaves;
	struct policy_item *prev = first->prev, *next = last->next, *pos;

	if ((!prev || !pfx_before(first, prev)) &&
	    (!next || !pfx_before(next, last)))
		return;
	plist_cut(l, first, last, n);
	pos = pfx_pos(l, first); /* where pfx_place would put first */
	if (pos && pfx_before(pos, last)) { /* pos belongs inside: one by one */
		for (uint32_t k = 0; k < n; k++) {
			seg[k]->prev = seg[k]->next = NULL;
			pfx_place(p, seg[k]);
		}
		return;
	}
	plist_splice_before(l, pos, first, last, n);
}

/*
 * access_run: the chunks of a chain told together, items[] shallowest
 * first. Each block of them linked deepest first in their list (a chain
 * placed by an earlier lookup lies so, at the tail) takes its new atime
 * and moves as one, or not at all; the others are re-placed one at a
 * time, deepest first. Each chunk's atime is set only as its block is
 * placed, so the lists stay sorted for every walk in between.
 */
static void pfx_access_run(struct policy *p, struct policy_item **items,
			   uint32_t n, uint64_t atime)
{
	struct policy_item *blk[PFX_BLOCK];
	uint32_t i = n, m;

	while (i > 0) {
		struct policy_item *a = items[--i];

		if (a->q != pfx_want(a)) { /* parked, or in the wrong list */
			a->atime = atime;
			pfx_reposition(p, a);
			continue;
		}
		/* the block, in list order: linked one after the other, each
		 * in its list, depth not increasing (their order once they
		 * share an atime) */
		blk[0] = a;
		a->atime = atime;
		for (m = 1; i > 0 && m < PFX_BLOCK; m++) {
			struct policy_item *b = items[i - 1];

			if (a->next != b || pfx_want(b) != a->q ||
			    b->depth > a->depth)
				break;
			b->atime = atime;
			blk[m] = a = b;
			i--;
		}
		pfx_place_block(p, blk, m);
	}
}

static void pfx_remove(struct policy *p, struct policy_item *it)
{
	pfx_unlink(p, it);
}

/*
 * Looks at up to max parked chunks, oldest parked first: the unpinned go
 * back to their sorted place (their atime is old, so near the head: O(1)),
 * the pinned to the back of the parking.
 */
static void pfx_unpark(struct policy *p, uint64_t max)
{
	if (max > p->parked.n)
		max = p->parked.n;
	while (max--) {
		struct policy_item *it = p->parked.head;

		plist_del(&p->parked, it);
		if (it->refs) {
			plist_push_tail(&p->parked, it);
		} else {
			it->q = PFX_NONE;
			pfx_place(p, it);
		}
	}
}

/*
 * The first unpinned chunk of l, unlinked. The first PLIST_PIN_SCAN pinned
 * chunks met keep their place, so with few pins the order is exact; further
 * pinned ones are parked, so many long-lived pins do not make every
 * eviction walk past all of them.
 */
static struct policy_item *pfx_take(struct policy *p, struct plist *l)
{
	struct policy_item *it = l->head, *next;
	uint64_t skipped = 0;

	for (; it; it = next) {
		next = it->next;
		if (!it->refs) {
			pfx_unlink(p, it);
			return it;
		}
		if (++skipped > PLIST_PIN_SCAN) {
			plist_del(l, it);
			it->q = PFX_PARKED;
			plist_push_tail(&p->parked, it);
		}
	}
	return NULL;
}

static struct policy_item *pfx_evict(struct policy *p)
{
	struct policy_item *it;

	pfx_unpark(p, PFX_UNPARK_PER_EVICT);
	if ((it = pfx_take(p, &p->leaves)))
		return it;
	/* No unpinned leaf in the list: before taking a parent, bring back
	 * every parked chunk that was unpinned since (rare: costs O(parked)). */
	if (p->parked.n) {
		pfx_unpark(p, p->parked.n);
		if ((it = pfx_take(p, &p->leaves)))
			return it;
	}
	return pfx_take(p, &p->interior);
}

static size_t pfx_meta_bytes(const struct policy *p)
{
	return sizeof(*p);
}

const struct policy_ops policy_prefix_ops = {
	.name = "prefix",
	.create = pfx_create,
	.destroy = pfx_destroy,
	.insert = pfx_insert,
	.access = pfx_reposition,
	.access_run = pfx_access_run,
	.remove = pfx_remove,
	.update = pfx_reposition,
	.evict = pfx_evict,
	.resize = NULL,
	.meta_bytes = pfx_meta_bytes,
};
