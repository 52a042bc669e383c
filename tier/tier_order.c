/*
 * tier_order.c - read-order hints from callers (tier_order.h) into chain
 * readahead's successor table.
 */
#include "tier/tier_i.h"
#include "tier/tier_order.h"

void tier_order_hint(struct tier *t, uint32_t ns, const struct kvfs_key *from,
		     const struct kvfs_key *to)
{
	tier_lock(t);
	tier_ra_link(t, ns, from, to);
	tier_unlock(t);
}
