/*
 * tier_events.c - the event sink's side of the engine (tier_events.h):
 * one call per change of a published chunk's tier, made under tier.lock so
 * the sink sees changes in the order the index made them.
 */
#include <stdbool.h>
#include <stddef.h>

#include "tier/tier_i.h"

/* The sink's view of (ns, key, parent). ns may be NULL for a removed
 * namespace; key NULL for CLEARED. */
static void emit(struct tier *t, uint32_t ns_id, const struct tier_ns *ns,
		 const struct kvfs_key *key, const struct kvfs_key *parent,
		 int kind, int where, int why)
{
	struct tier_event ev = {
		.kind = (enum tier_ev_kind)kind,
		.why = (enum tier_ev_why)why,
		.where = where,
		.ns = ns ? ns->id : ns_id,
		.ns_name = ns ? ns->name : "",
		.chunk_tokens = ns ? ns->chunk_tokens : 0,
		.key = key,
		.parent = parent,
	};

	t->cfg.events.event(t->cfg.events.arg, &ev);
}

void tier_ev(struct tier *t, const struct tier_rec *r, int kind, int where,
	     int why)
{
	if (!t->events_on || where == TIER_NONE)
		return;
	emit(t, r->ns, tier_ns_get(t, r->ns), &r->key,
	     r->flags & TREC_HAS_PARENT ? &r->parent : NULL, kind, where, why);
}

void tier_ev_key(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		 const struct kvfs_key *parent, int kind, int where, int why)
{
	struct tier_ns *n = t->events_on ? tier_ns_get(t, ns) : NULL;

	if (n) /* a namespace removed meanwhile: its CLEARED said it all */
		emit(t, ns, n, key, parent, kind, where, why);
}

void tier_ev_move(struct tier *t, const struct tier_rec *r, int from, int to,
		  int why)
{
	tier_ev(t, r, TIER_EV_REMOVED, from, why);
	tier_ev(t, r, TIER_EV_STORED, to, why);
}

/* A namespace removed (tier.lock held; ns still readable). */
void tier_ev_cleared(struct tier *t, const struct tier_ns *ns)
{
	if (t->events_on)
		emit(t, ns->id, ns, NULL, NULL, TIER_EV_CLEARED, TIER_NONE,
		     TIER_EV_RMDIR);
}

void tier_events_start(struct tier *t)
{
	struct htab_node *e, *nx;
	uint64_t b;

	if (!t->cfg.events.event)
		return;
	tier_lock(t);
	if (!t->events_on) {
		t->events_on = true;
		htab_for_each_safe(&t->idx, b, e, nx) {
			const struct tier_rec *r = idx_rec(e);
			tier_ev(t, r, TIER_EV_STORED, r->where,
				TIER_EV_RECOVER);
		}
	}
	tier_unlock(t);
}
