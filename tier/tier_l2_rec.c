/*
 * tier_l2_rec.c - records of chunks held in L2, as the rest of the engine's
 * L2 side and the core need them: a namespace's shuffle, the bytes a record
 * takes on disk, and the drop of an L2-only chunk. Calls only the core's
 * bottom files (index, records, events, tier_lock.c).
 */
#include <stdlib.h>

#include "tier/tier_l2_i.h"

/* The namespace's shuffle: the mount's default until user.kvfs.dtype
 * sets it (tier_ns_create copies the default). */
int tl2_ns_shuffle(struct tier *t, const struct tier_rec *r)
{
	struct tier_ns *ns = tier_ns_get(t, r->ns);

	return ns ? ns->shuffle : t->cfg.shuffle;
}

/* r's namespace is evict=never (tier_ns_set_keep). tier.lock held. */
bool tl2_keeps(struct tier *t, const struct tier_rec *r)
{
	struct tier_ns *ns = tier_ns_get(t, r->ns);

	return ns && ns->keep;
}

/*
 * Takes an L2-only chunk out of the engine (its record failed verification,
 * or L2 reclaimed it): out of the index, on_gone queued; pinned records
 * become zombies freed by their last tier_unref. tier.lock held.
 */
void tl2_drop_l2_only(struct tier *t, struct tier_rec *r,
		      enum tier_gone_reason why)
{
	tier_ev(t, r, TIER_EV_REMOVED, TIER_L2, TIER_EV_DROP);
	tier_idx_remove(t, r);
	r->flags &= (uint8_t)~TREC_L2;
	if (r->flags & TREC_USER_PIN) {
		r->flags &= (uint8_t)~TREC_USER_PIN;
		r->pi.refs--;
	}
	tier_queue_gone(t, r, why);
	if (r->pi.refs) {
		tier_zombie(t, r);
	} else {
		free(r);
	}
}

uint64_t tier_l2_stored(const struct tier_rec *r)
{
	struct tl2_loc l;

	if (!(r->flags & TREC_L2))
		return r->size;
	loc_get(r, &l);
	return l.stored;
}
