/*
 * tier_lookup.c - batched lookup: how many chunks of a prefix chain are
 * cached (tier_lookup, tier_lookup_pinned), and key pins (pin_key,
 * unpin_key, unpin_gen) that hold a chunk for a later open.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "hash/hashkey.h"
#include "tier/lease.h"
#include "tier/tier_i.h"

/* Chunks whose access lookup_run tells the policy at a time without
 * allocating (an ioctl's KVFS_LOOKUP_MAX). */
#define LOOKUP_TOUCH_RUN 512

/*
 * The access of the n chunks in L1 of run[] (found by one lookup in chain
 * order, tier.lock held since), deepest first. They share one tick, and
 * the prefix policy orders equal ticks deepest first: told in chain order,
 * each chunk would be placed behind every shallower one of the run, a walk
 * of i places for the i-th key (O(n^2) per lookup, 25% of the daemon's CPU
 * in kvfs_ibench); told deepest first, each lands next to the one before
 * it. The final order is the same either way. A policy with access_run
 * takes the run at once: the prefix policy moves a chain that lies in
 * order as one block, or leaves it where it is (chunks of equal depth in
 * one run may then come out in either order: both are sorted).
 */
static void touch_run(struct tier *t, struct policy_item **run, uint32_t n,
		      uint64_t tick)
{
	if (t->pops->access_run) {
		t->pops->access_run(t->pol, run, n, tick);
		return;
	}
	for (uint32_t k = n; k-- > 0;) {
		run[k]->atime = tick;
		t->pops->access(t->pol, run[k]);
	}
}

/* The parts of tier_rec_set_parent a chunk looked up again needs: none
 * when its parent is this one, counted, and its depth known. */
static inline void set_parent(struct tier *t, struct tier_rec *r,
			      const struct kvfs_key *parent, uint32_t depth)
{
	if (parent && r->pi.depth &&
	    (r->flags & (TREC_HAS_PARENT | TREC_COUNTED)) ==
		    (TREC_HAS_PARENT | TREC_COUNTED) &&
	    tier_key_eq(parent, &r->parent))
		return;
	tier_rec_set_parent(t, r, parent, depth);
}

/*
 * A run's index misses overlap in a pipeline: key k's bucket is
 * prefetched BUCKET_AHEAD keys before k is looked up, its first record
 * (node, key and namespace lines) REC_AHEAD keys before, from the bucket
 * prefetched earlier; so each key's lookup finds its lines arriving or
 * there. (Blocks of 16, bucket and record prefetched back to back, left
 * each record's miss waiting on its bucket's.)
 */
#define PIPE 32
#define BUCKET_AHEAD 16
#define REC_AHEAD 8
_Static_assert(BUCKET_AHEAD < PIPE && REC_AHEAD < BUCKET_AHEAD,
	       "the pipeline's stages");

/* keys[k]'s index hash: from its key part kh[k] when given. */
static inline uint64_t key_hash(uint32_t ns, const struct kvfs_key *keys,
				const uint64_t *kh, uint32_t k)
{
	return kh ? hashkey_ns(ns, kh[k]) : hashkey_index(ns, &keys[k]);
}

/* tier_lookup and tier_lookup_pinned; gens (with pin) may be NULL.
 * Past the local run, L3 is asked about the rest in one round trip per
 * node: found counts the run L3 has too. With pin that part is promoted
 * first (a pin needs a local copy) and pinned like the rest; with
 * prefetch (no pin) it is promoted in the background. */
static int lookup_run(struct tier *t, uint32_t ns,
		      const struct kvfs_key *keys, const uint64_t *kh,
		      uint32_t nkeys, uint32_t depth_base, bool pin,
		      bool prefetch, uint64_t *gens, uint32_t *found,
		      uint32_t *in_l1, uint32_t *in_l2)
{
	uint32_t i = 0, l1 = 0, l2 = 0, l3run = 0, l3from = 0, promoted = 0;
	uint32_t nrun = 0; /* the found chunks in L1 not yet told the policy */
	uint64_t hs[PIPE]; /* key k's index hash at hs[k % PIPE] */
	bool asked_l3 = false, repromoted = false;
	struct policy_item *stack_run[LOOKUP_TOUCH_RUN], **run = stack_run;
	struct tier_rec *r;
	uint32_t cap = LOOKUP_TOUCH_RUN;
	uint64_t tick, now_ns;

	/* a longer chain (the engine's API; an ioctl has at most 512 keys)
	 * is told in one run too; without the memory, a run at a time */
	if (nkeys > cap) {
		run = malloc(nkeys * sizeof(*run));
		if (run)
			cap = nkeys;
		else
			run = stack_run;
	}

	tier_lock(t);
	if (!tier_ns_get(t, ns)) {
		tier_unlock(t);
		if (run != stack_run)
			free(run);
		return -ENOENT;
	}
	/* The chunks of one request's chain are used together: one logical
	 * time for all of them, so the prefix policy's tie rule (the deeper
	 * chunk first) orders them. */
	tick = ++t->clock;
	now_ns = tier_now_ns();
local:
	/* the pipeline filled from key i: buckets to BUCKET_AHEAD, records
	 * to REC_AHEAD */
	for (uint32_t k = i; k < nkeys && k < i + BUCKET_AHEAD; k++) {
		hs[k % PIPE] = key_hash(ns, keys, kh, k);
		tier_idx_prefetch_bucket(t, hs[k % PIPE]);
	}
	for (uint32_t k = i; k < nkeys && k < i + REC_AHEAD; k++)
		tier_idx_prefetch_rec(t, hs[k % PIPE]);
	for (; i < nkeys; i++) {
		if (i + BUCKET_AHEAD < nkeys) {
			uint32_t k = i + BUCKET_AHEAD;

			hs[k % PIPE] = key_hash(ns, keys, kh, k);
			tier_idx_prefetch_bucket(t, hs[k % PIPE]);
		}
		if (i + REC_AHEAD < nkeys)
			tier_idx_prefetch_rec(t, hs[(i + REC_AHEAD) % PIPE]);
		r = tier_idx_find_h(t, ns, &keys[i], hs[i % PIPE]);
		if (!r)
			break;
		set_parent(t, r, i ? &keys[i - 1] : NULL, depth_base + i);
		r->atime_ns = now_ns;
		if (r->where == TIER_L1) {
			if (nrun == cap) {
				touch_run(t, run, nrun, tick);
				nrun = 0;
			}
			run[nrun++] = &r->pi;
			l1++;
		} else {
			r->pi.atime = tick;
			l2++;
		}
		if (prefetch && r->where == TIER_L2)
			tier_l2_prefetch(t, r);
		if (pin) {
			tier_ref(t, r);
			r->kpins++;
			if (gens)
				gens[i] = r->gen;
		}
	}
	touch_run(t, run, nrun, tick);
	nrun = 0;
	/* a chunk promoted for the pins was evicted before it was pinned
	 * (L1 under pressure): promoted once more, from there */
	if (pin && asked_l3 && !repromoted && i < l3from + promoted) {
		uint32_t end = l3from + promoted, k = i;

		repromoted = true;
		tier_unlock(t);
		while (k < end && tier_l3_promote(t, ns, &keys[k]) == 0)
			k++;
		tier_lock(t);
		if (k > i)
			goto local;
	}
	if (i < nkeys && t->l3 && !asked_l3) {
		asked_l3 = true;
		tier_unlock(t);
		l3from = i;
		l3run = tier_l3_run(t, ns, keys + i, nkeys - i);
		if (l3run && pin) {
			while (promoted < l3run &&
			       tier_l3_promote(t, ns, &keys[i + promoted]) == 0)
				promoted++;
			l3run = 0; /* local now, as far as it went: pinned above */
			tier_lock(t);
			goto local;
		}
		if (l3run && prefetch)
			tier_l3_prefetch(t, ns, keys + i, l3run);
		tier_lock(t);
	}
	/* hits and misses of lookups are counted by the caller (fs), which
	 * sees what the engine is told (a group lookup's common run) */
	tier_unlock(t);
	if (run != stack_run)
		free(run);
	/* promoted from L3 for the pins: they count as L3's */
	if (promoted) {
		uint32_t p = i - l3from < promoted ? i - l3from : promoted;

		l1 -= p < l1 ? p : l1;
	}
	if (found)
		*found = i + l3run;
	if (in_l1)
		*in_l1 = l1;
	if (in_l2)
		*in_l2 = l2;
	return 0;
}

int tier_lookup(struct tier *t, uint32_t ns, const struct kvfs_key *keys,
		uint32_t nkeys, uint32_t depth_base, bool pin, bool prefetch,
		uint32_t *found, uint32_t *in_l1, uint32_t *in_l2)
{
	return lookup_run(t, ns, keys, NULL, nkeys, depth_base, pin, prefetch,
			  NULL, found, in_l1, in_l2);
}

int tier_lookup_pinned(struct tier *t, uint32_t ns,
		       const struct kvfs_key *keys, uint32_t nkeys,
		       uint32_t depth_base, bool prefetch, uint64_t *gens,
		       uint32_t *found, uint32_t *in_l1, uint32_t *in_l2)
{
	if (!gens)
		return -EINVAL;
	return lookup_run(t, ns, keys, NULL, nkeys, depth_base, true, prefetch,
			  gens, found, in_l1, in_l2);
}

void tier_key_hashes(const struct kvfs_key *keys, uint32_t n, uint64_t *kh)
{
	for (uint32_t k = 0; k < n; k++)
		kh[k] = hashkey_key(&keys[k]);
}

int tier_lookup_kh(struct tier *t, uint32_t ns, const struct kvfs_key *keys,
		   const uint64_t *kh, uint32_t nkeys, uint32_t depth_base,
		   bool prefetch, uint64_t *gens, uint32_t *found,
		   uint32_t *in_l1, uint32_t *in_l2)
{
	return lookup_run(t, ns, keys, kh, nkeys, depth_base, gens != NULL,
			  prefetch, gens, found, in_l1, in_l2);
}

int tier_pin_key(struct tier *t, uint32_t ns, const struct kvfs_key *key)
{
	struct tier_rec *r;

	tier_lock(t);
	r = tier_idx_find(t, ns, key);
	if (r) {
		tier_ref(t, r);
		r->kpins++;
	}
	tier_unlock(t);
	return r ? 0 : -ENOENT;
}

/*
 * Key pins are interchangeable: the one released is the indexed chunk's if
 * it holds any, else an unlinked (zombie) chunk's of the same key, so every
 * tier_pin_key / tier_lookup(pin) is balanced by exactly one release even
 * across an unlink and re-publication of the key.
 */
static void unpin_key_locked(struct tier *t, uint32_t ns,
			     const struct kvfs_key *key)
{
	struct tier_rec *r = tier_idx_find(t, ns, key);

	if (!r || !r->kpins)
		for (r = t->zombies; r; r = r->ns_next)
			if (r->ns == ns && r->kpins && tier_key_eq(&r->key, key))
				break;
	if (r) {
		r->kpins--;
		tier_unref(t, r);
	}
}

void tier_unpin_key(struct tier *t, uint32_t ns, const struct kvfs_key *key)
{
	tier_lock(t);
	unpin_key_locked(t, ns, key);
	tier_unlock(t);
}

/*
 * A pin remembers the generation it was taken on: the chunk released is the
 * one of that publication, indexed or unlinked, never a later copy of the
 * same key that someone else may have pinned meanwhile. tier.lock held;
 * h is hashkey_index(ns, key).
 */
static void unpin_gen_locked(struct tier *t, uint32_t ns,
			     const struct kvfs_key *key, uint64_t gen,
			     uint64_t h)
{
	struct tier_rec *r = tier_idx_find_h(t, ns, key, h);

	if (!r || r->gen != gen || !r->kpins)
		for (r = t->zombies; r; r = r->ns_next)
			if (r->gen == gen && r->ns == ns && r->kpins &&
			    tier_key_eq(&r->key, key))
				break;
	if (r) {
		r->kpins--;
		tier_unref(t, r);
	} else {
		tier_log_locked(t, "tier: unpin of a chunk (gen %llu) that holds no "
			   "key pin", (unsigned long long)gen);
	}
}

void tier_unpin_gen(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		    uint64_t gen)
{
	if (!gen) {
		tier_unpin_key(t, ns, key);
		return;
	}
	tier_lock(t);
	unpin_gen_locked(t, ns, key, gen, hashkey_index(ns, key));
	tier_unlock(t);
}

/* Pins given back per hold of tier.lock: other engine calls wait at most
 * about one lookup's time behind a release of thousands. */
#define UNPIN_RUN 512

void tier_unpin_pins(struct tier *t, const struct lease_pin *pins, size_t n)
{
	uint64_t hs[TIER_IDX_AHEAD];
	size_t i, k;

	for (i = 0; i < n; i++) {
		if (i % UNPIN_RUN == 0) {
			if (i)
				tier_unlock(t);
			tier_lock(t);
		}
		if (i % TIER_IDX_AHEAD == 0) {
			for (k = 0; k < TIER_IDX_AHEAD && i + k < n; k++)
				hs[k] = hashkey_index(pins[i + k].ns,
						      &pins[i + k].key);
			tier_idx_prefetch_h(t, hs, (uint32_t)k);
		}
		if (pins[i].gen)
			unpin_gen_locked(t, pins[i].ns, &pins[i].key,
					 pins[i].gen, hs[i % TIER_IDX_AHEAD]);
		else /* unknown generation: by key */
			unpin_key_locked(t, pins[i].ns, &pins[i].key);
	}
	if (n)
		tier_unlock(t);
}
