/*
 * tier_order.h - hints of the order in which chunks will be read, for
 * callers that know it without parent links (path namespaces: the order
 * in which an engine stored its files is the order in which it loads
 * them back).
 */
#ifndef KVFS_TIER_ORDER_H
#define KVFS_TIER_ORDER_H

#include <stdint.h>

#include "kvfs.h"

struct tier;

/*
 * tier_order_hint - chunk `to` of namespace ns was stored right after
 * chunk `from`: chain readahead (tier_readahead.c) takes `to` as from's
 * successor (as a parent link does) unless a reader was seen following
 * another one; the table is kept in the L2 checkpoint like what readers
 * taught it. A hint only: it moves no bytes and is never trusted for
 * them. A no-op when readahead is off. tier.lock NOT held.
 */
void tier_order_hint(struct tier *t, uint32_t ns, const struct kvfs_key *from,
		     const struct kvfs_key *to);

#endif /* KVFS_TIER_ORDER_H */
