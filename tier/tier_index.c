/*
 * tier_index.c - the chunk index (one struct htab for every namespace,
 * keyed by hashkey_index(ns, key)) and the parent counts that prefix
 * eviction needs: each indexed record's nchildren, and the orphan table
 * holding the counts of parent keys that are not indexed; and the table
 * of namespaces by id (tier_ns_get).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "hash/hashkey.h"
#include "tier/tier_i.h"

/* The namespace of an id, or NULL (tier.lock held). */
struct tier_ns *tier_ns_get(struct tier *t, uint32_t id)
{
	if (id == 0 || id >= t->ns_next)
		return NULL;
	return t->ns[id];
}

struct tier_rec *tier_idx_find(struct tier *t, uint32_t ns,
			       const struct kvfs_key *key)
{
	return tier_idx_find_h(t, ns, key, hashkey_index(ns, key));
}

/* Starts loading the buckets of h[0..n) (at most TIER_IDX_AHEAD), then
 * the first record of each chain (its link, key and namespace lines): a
 * batch's misses overlap instead of following one another. Only hints:
 * nothing is changed or faulted in. */
void tier_idx_prefetch_h(struct tier *t, const uint64_t *h, uint32_t n)
{
	uint32_t k;

	for (k = 0; k < n && t->idx.nb; k++)
		__builtin_prefetch(&t->idx.b[h[k] & (t->idx.nb - 1)]);
	for (k = 0; k < n; k++) {
		struct htab_node *e = htab_first(&t->idx, h[k]);

		if (e) {
			__builtin_prefetch(e);
			__builtin_prefetch(&idx_rec(e)->key);
			__builtin_prefetch(&idx_rec(e)->ns);
		}
	}
}

static bool orphan_add(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		       uint32_t n);
static uint32_t orphan_take(struct tier *t, uint32_t ns,
			    const struct kvfs_key *key, uint64_t h);

/* Inserts r (r->pi.hkey set) into the index and its namespace list. */
void tier_idx_insert(struct tier *t, struct tier_ns *ns, struct tier_rec *r)
{
	/* Children already in L1 (published before it, or counted against
	 * an earlier record of this key) are its children now. */
	if (t->orphans.n)
		r->pi.nchildren += orphan_take(t, r->ns, &r->key, r->pi.hkey);
	/* Cannot fail: tier_create gave the index its buckets (a failed
	 * doubling keeps them: longer chains, still correct). */
	(void)htab_add(&t->idx, &r->pi.node, r->pi.hkey);
	rec_list_push(&ns->head, r);
	ns->chunks++;
	ns->bytes += r->size;
}

void tier_idx_remove(struct tier *t, struct tier_rec *r)
{
	struct tier_ns *ns = t->ns[r->ns];

	htab_del(&t->idx, &r->pi.node);
	rec_list_del(&ns->head, r);
	ns->chunks--;
	ns->bytes -= r->size;
	/* Its children stay counted under its key (see parent counts). */
	if (r->pi.nchildren &&
	    !orphan_add(t, r->ns, &r->key, r->pi.nchildren))
		tier_log_locked(t, "tier: out of memory keeping a parent's child "
			   "count; prefix eviction order may be off");
	r->pi.nchildren = 0;
}

/*
 * The invariant: for every key K of a namespace, the number of L1 records
 * with TREC_COUNTED whose parent is K equals the nchildren of the record
 * indexed under K, or, when none is indexed, the count of K's orphan entry.
 * The parent's own tier does not matter (a parent demoted to L2 keeps its
 * count and brings it back when promoted); a parent leaving the index
 * leaves its count behind as an orphan entry, which the next record
 * published (or recovered) under that key takes over. So a child counted
 * once is always decremented exactly once, from whichever record holds
 * its key's count, and no generation check is needed.
 */
/* The orphan entry of (ns, key) with hash h, or NULL. */
static struct tier_orphan *orphan_find(struct tier *t, uint32_t ns,
				       const struct kvfs_key *key, uint64_t h)
{
	struct htab_node *e;

	htab_for_each_hash(&t->orphans, h, e) {
		struct tier_orphan *o = container_of(e, struct tier_orphan,
						     node);

		if (o->ns == ns && tier_key_eq(&o->key, key))
			return o;
	}
	return NULL;
}

/* Adds n children to the orphan count of (ns, key). false when out of
 * memory (the count is lost: the parent, if it comes back, undercounts). */
static bool orphan_add(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		       uint32_t n)
{
	uint64_t h = hashkey_index(ns, key);
	struct tier_orphan *o;

	if (!n)
		return true;
	o = orphan_find(t, ns, key, h);
	if (o) {
		o->nchildren += n;
		return true;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return false;
	o->key = *key;
	o->ns = ns;
	o->nchildren = n;
	if (htab_add(&t->orphans, &o->node, h)) {
		free(o);
		return false;
	}
	return true;
}

/* Removes the orphan entry of (ns, key); returns its count (0 if none). */
static uint32_t orphan_take(struct tier *t, uint32_t ns,
			    const struct kvfs_key *key, uint64_t h)
{
	struct tier_orphan *o = orphan_find(t, ns, key, h);
	uint32_t n;

	if (!o)
		return 0;
	htab_del(&t->orphans, &o->node);
	n = o->nchildren;
	free(o);
	return n;
}

static void orphan_dec(struct tier *t, uint32_t ns, const struct kvfs_key *key)
{
	uint64_t h = hashkey_index(ns, key);
	struct tier_orphan *o = orphan_find(t, ns, key, h);

	if (!o)
		return; /* lost to an allocation failure */
	if (--o->nchildren == 0)
		orphan_take(t, ns, key, h);
}

void tier_orphans_free(struct tier *t)
{
	struct htab_node *e, *nx;
	uint64_t i;

	htab_for_each_safe(&t->orphans, i, e, nx)
		free(container_of(e, struct tier_orphan, node));
	htab_free(&t->orphans);
}

/* p's nchildren changed: tell the policy if it tracks p (only L1). */
static void nchildren_changed(struct tier *t, struct tier_rec *p)
{
	if (p->where == TIER_L1 && t->pops->update)
		t->pops->update(t->pol, &p->pi);
}

/*
 * Counts r, an L1 chunk with a known parent, in its parent key's count:
 * the indexed parent's nchildren whatever tier the parent is in, else the
 * key's orphan entry (tier.lock held). Idempotent.
 */
void tier_count_parent(struct tier *t, struct tier_rec *r)
{
	struct tier_rec *p;

	if (!(r->flags & TREC_HAS_PARENT) || r->where != TIER_L1 ||
	    (r->flags & (TREC_COUNTED | TREC_ZOMBIE)))
		return;
	p = tier_idx_find(t, r->ns, &r->parent);
	if (p == r)
		return;
	if (p) {
		p->pi.nchildren++;
		nchildren_changed(t, p);
	} else if (!orphan_add(t, r->ns, &r->parent, 1)) {
		tier_log_locked(t, "tier: out of memory counting a chunk's parent; "
			   "prefix eviction order may be off");
		return;
	}
	r->flags |= TREC_COUNTED;
}

/* Undoes tier_count_parent when r leaves L1 or the index (tier.lock
 * held). */
void tier_uncount_parent(struct tier *t, struct tier_rec *r)
{
	struct tier_rec *p;

	if (!(r->flags & TREC_COUNTED))
		return;
	r->flags &= (uint8_t)~TREC_COUNTED;
	p = tier_idx_find(t, r->ns, &r->parent);
	if (!p) {
		orphan_dec(t, r->ns, &r->parent);
		return;
	}
	if (!p->pi.nchildren)
		return; /* a count lost to an allocation failure */
	p->pi.nchildren--;
	nchildren_changed(t, p);
}
