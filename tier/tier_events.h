/*
 * tier_events.h - the engine's event sink: every change in where a
 * published chunk is, for whoever must know what this node holds (the KV
 * event publisher of events/, wired by fs/fs_events.c). No network code in
 * tier/: the engine only calls a function.
 *
 * What is reported (one call per change, in the order of the changes):
 *   STORED   a chunk became available in a tier: publication (in L1), a
 *            demotion's arrival in L2, a promotion's arrival in L1, and,
 *            at tier_events_start, every chunk already indexed (recovered
 *            from L2 at mount)
 *   REMOVED  a chunk left a tier: a demotion or promotion leaving the old
 *            one, an eviction with no lower tier keeping it, an unlink, an
 *            L2 reclaim or a corrupt record dropping it, a path file's
 *            version another node superseded in L3 (tier_l3_notify.c)
 *   CLEARED  a namespace was removed (rmdir); also sent by fs per
 *            namespace at a clean unmount
 * and, with L3 (where = TIER_EV_L3, the shared tier):
 *   STORED   this node's write of the chunk to L3 succeeded (from the L3
 *            writer thread, when it completes)
 *   REMOVED  an unlink deleted a chunk this node knew to be in L3 (stored
 *            or promoted from there), or a bad value in L3 was dropped
 * A chunk leaving L1/L2 while L3 keeps it is REMOVED from the local tier
 * only; a promotion from L3 is a STORED in L1. What L3 held before the
 * mount is not announced (other nodes wrote it).
 * A chunk that is in two tiers at once (promoted from L2 while its record
 * stays valid there) is reported where tier_stat says it is: the sink sees
 * REMOVED(L2) and STORED(L1), as a router needs.
 */
#ifndef KVFS_TIER_EVENTS_H
#define KVFS_TIER_EVENTS_H

#include <stdint.h>

#include "kvfs.h"

enum tier_ev_kind {
	TIER_EV_STORED = 1,
	TIER_EV_REMOVED,
	TIER_EV_CLEARED,
};

/* Why (for logs and tests; the wire only carries kind and tier). */
enum tier_ev_why {
	TIER_EV_PUBLISH = 1,
	TIER_EV_DEMOTE,
	TIER_EV_PROMOTE,
	TIER_EV_EVICT,
	TIER_EV_UNLINK,
	TIER_EV_DROP,    /* L2 reclaim, a corrupt record, or a path file's
			  * version superseded in L3 by another node's */
	TIER_EV_RECOVER, /* announced by tier_events_start */
	TIER_EV_RMDIR,
};

/* where of an event about L3 (not an enum tier_where: L3 is no place a
 * published chunk is served from). */
#define TIER_EV_L3 3

struct tier_event {
	enum tier_ev_kind kind;
	enum tier_ev_why why;
	int where;                     /* enum tier_where: L1, L2, or
					* TIER_EV_L3 */
	uint32_t ns;
	const char *ns_name;
	uint32_t chunk_tokens;         /* the namespace's, 0 = unset */
	const struct kvfs_key *key;    /* NULL for CLEARED */
	const struct kvfs_key *parent; /* NULL when unknown */
};

/*
 * The sink, in struct tier_config. event is called WITH tier.lock held
 * (so events come in the order of the index changes), from any thread: it
 * must not block and must not call back into the engine. NULL = no
 * events. Nothing is reported before tier_events_start.
 */
struct tier_event_sink {
	void (*event)(void *arg, const struct tier_event *ev);
	void *arg;
};

#endif /* KVFS_TIER_EVENTS_H */
