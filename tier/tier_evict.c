/*
 * tier_evict.c - eviction driving: the policy's capacity estimate, the
 * ONE place a victim leaves L1 for space (tier_evict_one: demoted to L2
 * or dropped), and tier_alloc_evict, which evicts until an extent fits.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "tier/tier_i.h"

/* Tells the policy about a new L1 capacity estimate when the average chunk
 * size has moved by more than a quarter (tier.lock held). */
void tier_policy_capacity(struct tier *t)
{
	uint64_t est;

	if (t->l1_chunks < 16 || !t->l1_bytes || !t->pops->resize)
		return;
	est = (uint64_t)((double)t->l1_cap * (double)t->l1_chunks /
			 (double)t->l1_bytes);
	if (est < 16)
		est = 16;
	if (est > t->cap_items + t->cap_items / 4 ||
	    est < t->cap_items - t->cap_items / 4) {
		t->cap_items = est;
		t->pops->resize(t->pol, est);
	}
}

/* Takes r out of L1 bookkeeping (policy excluded): parent counts, stats,
 * its extent. tier.lock held. */
static void leave_l1(struct tier *t, struct tier_rec *r)
{
	tier_uncount_parent(t, r);
	t->l1_bytes -= rec_l1_len(r);
	t->l1_chunks--;
	if (r->pi.refs)
		t->pinned_bytes -= rec_l1_len(r);
	tier_free_extent(t, r);
	r->where = TIER_NONE;
}

/*
 * tier_evict_one - evicts one unpinned published chunk chosen by the policy
 * (tier.lock held). Returns 0, or -ENOSPC when every L1 chunk is pinned.
 *
 * This is the ONE place where a chunk leaves L1 because of space. Today the
 * victim is dropped: it leaves the index and on_gone(TIER_GONE_EVICTED) is
 * queued. The L2 engine hooks in here: with ingest=evicted it demotes the
 * victim to L2 instead (record stays in the index with where = TIER_L2 and
 * no on_gone call), and only drops it when L2 cannot take it. A chunk of
 * an evict=never namespace (tier_ns_set_keep) is never dropped: it is
 * demoted, or passed over for the next victim.
 */
int tier_evict_one(struct tier *t)
{
	/* evict=never chunks L2 cannot take now are passed over, and given
	 * back to the policy (as if inserted again, in the order met) once a
	 * victim is found or none is left */
	struct policy_item **skip = NULL;
	size_t nskip = 0, cap = 0;
	int rc = -ENOSPC;

	for (;;) {
		struct policy_item *it = t->pops->evict(t->pol);
		struct tier_ns *ns;
		struct tier_rec *r;

		if (!it)
			break;
		r = rec_of(it);
		if (r->pi.refs) {
			/* A policy bug; keep the chunk and refuse rather than
			 * free pinned bytes. */
			tier_log_locked(t, "tier: policy %s chose a pinned "
					"victim", t->pops->name);
			t->pops->insert(t->pol, &r->pi);
			break;
		}
		ns = tier_ns_get(t, r->ns);
		if (ns && ns->keep && !(t->l2 && tier_l2_evicting(t, r))) {
			/* never out of the last tier */
			if (nskip == cap) {
				size_t n = cap ? 2 * cap : 16;
				struct policy_item **a =
					realloc(skip, n * sizeof(*a));

				if (!a) {
					t->pops->insert(t->pol, it);
					break;
				}
				skip = a;
				cap = n;
			}
			skip[nskip++] = it;
			continue;
		}
		tier_l3_evicting(t, r); /* l3_ingest=evicted: a copy to L3 */
		tier_ra_leaving(t, r, true);
		rc = 0;
		/* (an evict=never chunk's demotion was queued just above) */
		if (t->l2 && ((ns && ns->keep) || tier_l2_evicting(t, r))) {
			/* demoted: stays indexed as an L2 chunk */
			leave_l1(t, r);
			r->where = TIER_L2;
			tier_ev_move(t, r, TIER_L1, TIER_L2, TIER_EV_DEMOTE);
			t->evictions++;
			t->demotions++;
			break;
		}
		tier_ev(t, r, TIER_EV_REMOVED, TIER_L1, TIER_EV_EVICT);
		tier_idx_remove(t, r);
		leave_l1(t, r);
		t->evictions++;
		tier_queue_gone(t, r, TIER_GONE_EVICTED);
		free(r);
		break;
	}
	for (size_t i = 0; i < nskip; i++)
		t->pops->insert(t->pol, skip[i]);
	free(skip);
	return rc;
}

/*
 * tier_alloc_evict - an arena extent of len bytes (len rounded, > 0),
 * evicting unpinned chunks by policy until one fits. -ENOSPC (nothing
 * evicted) when pinned chunks and writers leave too little room.
 * tier.lock held.
 */
int tier_alloc_evict(struct tier *t, uint64_t len, uint64_t *off)
{
	uint64_t held = t->pinned_bytes + t->writer_bytes;
	int rc;

	if ((held > t->l1_cap || len > t->l1_cap - held) &&
	    !tier_ra_unpin_all(t))
		return -ENOSPC;
	held = t->pinned_bytes + t->writer_bytes;
	if (held > t->l1_cap || len > t->l1_cap - held)
		return -ENOSPC;
	for (;;) {
		rc = l1_alloc_get(t->alloc, len, off);
		if (rc != -ENOSPC)
			return rc;
		/* every chunk left is pinned: readahead's may go */
		if (tier_evict_one(t) < 0 && !tier_ra_unpin_all(t))
			return -ENOSPC;
	}
}
