/*
 * policy_s3fifo.c - S3-FIFO (Yang et al., "FIFO queues are all you need
 * for cache eviction", SOSP 2023).
 *
 * Three FIFO queues: small (S, ~10% of the cache) takes new chunks, main
 * (M, the rest) takes chunks that proved themselves, and ghost (G) keeps
 * only a 32-bit fingerprint of the hkey of chunks recently evicted from S,
 * as many as M holds. Hits only bump a counter capped at 3; no list moves on a hit,
 * which is what makes it cheap and scan resistant: a one-time scan flows
 * through S and out without touching M.
 *
 *   insert:   hkey in G -> remove it from G, push to M; else push to S.
 *   evict S:  head with freq >= S3_MOVE_THRESHOLD (1: hit at least once
 *             while in S) moves to M with freq cleared; else it is the
 *             victim and its hkey enters G.
 *   evict M:  head with freq > 0 is reinserted at the tail with freq - 1
 *             (FIFO-reinsertion / 2-bit CLOCK); else it is the victim.
 *   which:    evict from S while |S| >= 10% of the chunks resident (or M
 *             is empty), else from M.
 *
 * The move-to-main threshold is 1, the paper's rule ("if the object in S
 * is accessed, move it to M"): an insert does not count as an access, so a
 * scanned chunk that is never read again never reaches M.
 *
 * Capacity. The cache size the 10% is taken of is the number of chunks
 * resident when evict is called (the engine evicts only when the arena is
 * full, so that count is the real capacity in chunks whatever their size).
 * The ghost is sized like M: 90% of the capacity_items hint until the first
 * eviction, then 90% of the most chunks ever resident.
 *
 * Pinned chunks (refs > 0) are in use: at the head of S they move to M as
 * if accessed, at the head of M they are reinserted. A bounded walk returns
 * NULL when every chunk is pinned.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "tier/policy/policy.h"
#include "tier/policy/policy_list.h"

enum { S3_NONE = 0, S3_SMALL = 1, S3_MAIN = 2 }; /* policy_item.q */

#define S3_FREQ_MAX 3
#define S3_MOVE_THRESHOLD 1
#define S3_SMALL_PERCENT 10

/*
 * The ghost keeps 32-bit fingerprints of hkeys, as the paper suggests: 4
 * bytes in the ring and 8 in the table per ghost, ~24 bytes per cached
 * chunk in all. Two hkeys sharing a fingerprint (odds ~|G| / 2^32 per
 * insert) share a ghost entry; that can only send a chunk to M early,
 * never serve wrong data.
 */
struct s3_slot {
	uint32_t fp;  /* 0 = empty */
	uint32_t seq; /* low bits of the sequence the fp was last pushed with */
};

/*
 * The ghost FIFO: a ring of fingerprints in push order (sequence numbers
 * [first, next)) and an open-addressing set fp -> latest sequence, so
 * membership is O(1). Popping the oldest ring entry removes the set entry
 * only if it still carries that sequence (remove-if-match), so an hkey
 * pushed again later survives the pop of its older copy. Entries taken by
 * a ghost hit stay in the ring, dead, until popped or compacted away.
 */
struct s3_ghost {
	uint32_t *ring;        /* ring_cap entries, a power of two */
	uint64_t ring_cap;
	uint64_t first, next;  /* sequence numbers of oldest, next push */
	struct s3_slot *slots; /* slot_cap entries, a power of two */
	uint64_t slot_cap;
	uint64_t used;         /* live ghosts = occupied slots */
	uint64_t target;       /* live ghosts kept: ~|M| */
};

struct policy {
	/* Everything below is protected by tier.lock. */
	struct plist small, main;
	struct s3_ghost ghost;
	uint64_t hint;      /* capacity_items from create/resize, 0 = unknown */
	uint64_t hwm;       /* most chunks resident at an eviction */
	uint64_t evictions;
};

/* ------------------------------------------------------------ ghost set */

static uint32_t s3_fp(uint64_t hkey)
{
	uint32_t fp = (uint32_t)(htab_mix64(hkey) >> 32);

	return fp ? fp : 1;
}

static uint64_t s3_home(const struct s3_ghost *g, uint32_t fp)
{
	return htab_mix64(fp) & (g->slot_cap - 1);
}

static struct s3_slot *s3_slot_find(const struct s3_ghost *g, uint32_t fp)
{
	uint64_t mask = g->slot_cap - 1, i;

	if (!g->slot_cap)
		return NULL;
	for (i = s3_home(g, fp);; i = (i + 1) & mask) {
		struct s3_slot *s = &g->slots[i];

		if (!s->fp)
			return NULL;
		if (s->fp == fp)
			return s;
	}
}

/* Sets fp -> seq in a table with a free slot. */
static void s3_slot_set(struct s3_ghost *g, uint32_t fp, uint32_t seq)
{
	uint64_t mask = g->slot_cap - 1, i;

	for (i = s3_home(g, fp);; i = (i + 1) & mask) {
		struct s3_slot *s = &g->slots[i];

		if (!s->fp) {
			s->fp = fp;
			s->seq = seq;
			g->used++;
			return;
		}
		if (s->fp == fp) {
			s->seq = seq;
			return;
		}
	}
}

/* Rehashes into a table of cap slots. -ENOMEM leaves the old one. */
static int s3_slots_resize(struct s3_ghost *g, uint64_t cap)
{
	struct s3_slot *old = g->slots, *n = calloc(cap, sizeof(*n));
	uint64_t ocap = g->slot_cap;

	if (!n)
		return -ENOMEM;
	g->slots = n;
	g->slot_cap = cap;
	g->used = 0;
	for (uint64_t i = 0; i < ocap; i++)
		if (old[i].fp)
			s3_slot_set(g, old[i].fp, old[i].seq);
	free(old);
	return 0;
}

/* Deletes a slot with backward-shift, so linear probing needs no
 * tombstones. */
static void s3_slot_del(struct s3_ghost *g, struct s3_slot *s)
{
	uint64_t mask = g->slot_cap - 1;
	uint64_t hole = (uint64_t)(s - g->slots), i = hole;

	for (;;) {
		uint64_t home;

		i = (i + 1) & mask;
		if (!g->slots[i].fp)
			break;
		home = s3_home(g, g->slots[i].fp);
		/* Move slot i into the hole unless its home lies cyclically
		 * in (hole, i]. */
		if (((i - home) & mask) >= ((i - hole) & mask)) {
			g->slots[hole] = g->slots[i];
			hole = i;
		}
	}
	g->slots[hole].fp = 0;
	g->slots[hole].seq = 0;
	g->used--;
}

/* Doubles the ring (16 entries at first). -ENOMEM keeps the old one. */
static int s3_ring_grow(struct s3_ghost *g)
{
	uint64_t cap = g->ring_cap ? g->ring_cap * 2 : 16, s;
	uint32_t *ring = malloc(cap * sizeof(*ring));

	if (!ring)
		return -ENOMEM;
	for (s = g->first; s != g->next; s++)
		ring[s & (cap - 1)] = g->ring[s & (g->ring_cap - 1)];
	free(g->ring);
	g->ring = ring;
	g->ring_cap = cap;
	return 0;
}

static void s3_ghost_pop(struct s3_ghost *g)
{
	uint64_t seq = g->first++;
	uint32_t fp = g->ring[seq & (g->ring_cap - 1)];
	struct s3_slot *s = s3_slot_find(g, fp);

	if (s && s->seq == (uint32_t)seq)
		s3_slot_del(g, s);
}

/*
 * Drops the dead entries from the ring (taken by a ghost hit, or pushed
 * again later), renumbering the live ones in order. Keeps the ring within
 * 1.5x the target however many ghost hits there are.
 */
static void s3_ghost_compact(struct s3_ghost *g)
{
	uint64_t mask = g->ring_cap - 1, w = g->first, s;

	for (s = g->first; s != g->next; s++) {
		uint32_t fp = g->ring[s & mask];
		struct s3_slot *slot = s3_slot_find(g, fp);

		if (!slot || slot->seq != (uint32_t)s)
			continue;
		slot->seq = (uint32_t)w;
		g->ring[w & mask] = fp;
		w++;
	}
	g->next = w;
}

/* The ghost remembers at most target live fingerprints, as the paper's
 * ghost FIFO holds as many entries as M. */
static void s3_ghost_trim(struct s3_ghost *g)
{
	while (g->used > g->target)
		s3_ghost_pop(g);
	if (g->next - g->first > g->target + g->target / 2 + 16)
		s3_ghost_compact(g);
}

static void s3_ghost_push(struct s3_ghost *g, uint64_t hkey)
{
	uint32_t fp = s3_fp(hkey);

	if (g->target == 0)
		return;
	if (g->next - g->first >= g->ring_cap && s3_ring_grow(g)) {
		if (g->next == g->first)
			return; /* no memory for a first ghost */
		s3_ghost_pop(g); /* no memory to grow: make room instead */
	}
	/* Load factor at most 1/2; if the table cannot grow, fill it up to
	 * all but one slot, then forget the oldest ghost instead. */
	if ((g->used + 1) * 2 > g->slot_cap &&
	    s3_slots_resize(g, g->slot_cap ? g->slot_cap * 2 : 16)) {
		while (g->used + 1 >= g->slot_cap && g->next != g->first)
			s3_ghost_pop(g);
		if (g->used + 1 >= g->slot_cap)
			return;
	}
	g->ring[g->next & (g->ring_cap - 1)] = fp;
	s3_slot_set(g, fp, (uint32_t)g->next);
	g->next++;
	s3_ghost_trim(g);
}

/* Tests membership and forgets hkey if present: a ghost hit is used once. */
static bool s3_ghost_take(struct s3_ghost *g, uint64_t hkey)
{
	struct s3_slot *s = s3_slot_find(g, s3_fp(hkey));

	if (!s)
		return false;
	s3_slot_del(g, s);
	return true;
}

static void s3_set_target(struct policy *p)
{
	/* Observed beats estimated: after an eviction, hwm is what L1 holds. */
	uint64_t cap = p->evictions && p->hwm ? p->hwm : p->hint;

	p->ghost.target = cap - cap * S3_SMALL_PERCENT / 100;
	s3_ghost_trim(&p->ghost);
}

/* -------------------------------------------------------------- the ops */

static int s3_create(struct policy **out, uint64_t capacity_items)
{
	struct policy *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	plist_init(&p->small);
	plist_init(&p->main);
	p->hint = capacity_items;
	s3_set_target(p);
	*out = p;
	return 0;
}

static void s3_destroy(struct policy *p)
{
	if (!p)
		return;
	free(p->ghost.ring);
	free(p->ghost.slots);
	free(p);
}

static void s3_insert(struct policy *p, struct policy_item *it)
{
	it->freq = 0;
	if (s3_ghost_take(&p->ghost, it->hkey)) {
		it->q = S3_MAIN;
		plist_push_tail(&p->main, it);
	} else {
		it->q = S3_SMALL;
		plist_push_tail(&p->small, it);
	}
}

static void s3_access(struct policy *p, struct policy_item *it)
{
	if (it->q != S3_NONE && it->freq < S3_FREQ_MAX)
		it->freq++;
}

static void s3_remove(struct policy *p, struct policy_item *it)
{
	if (it->q == S3_SMALL)
		plist_del(&p->small, it);
	else if (it->q == S3_MAIN)
		plist_del(&p->main, it);
	it->q = S3_NONE;
}

static struct policy_item *s3_victim(struct policy *p, struct plist *l,
				     struct policy_item *it)
{
	plist_del(l, it);
	it->q = S3_NONE;
	return it;
}

static struct policy_item *s3_evict(struct policy *p)
{
	uint64_t resident = p->small.n + p->main.n;
	uint64_t budget = 6 * resident + 8, run = 0;
	bool main_stuck = false; /* a full turn of M met only pinned chunks */
	struct policy_item *it;

	if (!resident)
		return NULL;
	if (resident > p->hwm)
		p->hwm = resident;
	p->evictions++;
	s3_set_target(p);

	while (budget--) {
		uint64_t total = p->small.n + p->main.n;

		if (p->small.n && (!p->main.n || main_stuck ||
		    p->small.n * 100 >= total * S3_SMALL_PERCENT)) {
			it = p->small.head;
			plist_del(&p->small, it);
			if (it->refs || it->freq >= S3_MOVE_THRESHOLD) {
				if (!it->refs) {
					main_stuck = false;
					run = 0;
				}
				it->freq = 0;
				it->q = S3_MAIN;
				plist_push_tail(&p->main, it);
				continue;
			}
			it->q = S3_NONE;
			s3_ghost_push(&p->ghost, it->hkey);
			return it;
		}
		if (!p->main.n || main_stuck)
			return NULL;
		it = p->main.head;
		if (it->refs) {
			plist_del(&p->main, it);
			plist_push_tail(&p->main, it);
			if (++run >= p->main.n)
				main_stuck = true;
			continue;
		}
		run = 0;
		if (it->freq) {
			it->freq--;
			plist_del(&p->main, it);
			plist_push_tail(&p->main, it);
			continue;
		}
		return s3_victim(p, &p->main, it);
	}
	/* Not reached with the budget above; stay correct regardless. */
	if ((it = plist_first_unpinned(&p->main)))
		return s3_victim(p, &p->main, it);
	if ((it = plist_first_unpinned(&p->small)))
		return s3_victim(p, &p->small, it);
	return NULL;
}

static void s3_resize(struct policy *p, uint64_t capacity_items)
{
	p->hint = capacity_items;
	/* The old high-water mark describes the old L1 size. */
	p->hwm = p->small.n + p->main.n;
	p->evictions = 0;
	s3_set_target(p);
}

static size_t s3_meta_bytes(const struct policy *p)
{
	return sizeof(*p) + p->ghost.ring_cap * sizeof(*p->ghost.ring) +
	       p->ghost.slot_cap * sizeof(*p->ghost.slots);
}

const struct policy_ops policy_s3fifo_ops = {
	.name = "s3fifo",
	.create = s3_create,
	.destroy = s3_destroy,
	.insert = s3_insert,
	.access = s3_access,
	.remove = s3_remove,
	.update = NULL,
	.evict = s3_evict,
	.resize = s3_resize,
	.meta_bytes = s3_meta_bytes,
};
