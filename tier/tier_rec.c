/*
 * tier_rec.c - the life of a chunk's record: pins (tier_ref/tier_unref),
 * the zombie list where an unlinked chunk waits for its last pin, and the
 * release of its L1 extent. Calls only l1_alloc; tier.lock held for all.
 */
#include <stdlib.h>

#include "tier/tier_i.h"

void tier_ref(struct tier *t, struct tier_rec *r)
{
	if (r->pi.refs++ == 0)
		t->pinned_bytes += rec_l1_len(r);
}

void tier_free_extent(struct tier *t, struct tier_rec *r)
{
	if (r->l1_pages) {
		l1_alloc_put(t->alloc, r->l1_off, rec_l1_len(r));
		tier_room_made(t);
	}
	r->l1_pages = 0;
}

/* r, out of the index but pinned, waits on the zombie list for its last
 * tier_unref (tier.lock held). */
void tier_zombie(struct tier *t, struct tier_rec *r)
{
	r->flags |= TREC_ZOMBIE;
	rec_list_push(&t->zombies, r);
	t->nzombies++;
}

void tier_unref(struct tier *t, struct tier_rec *r)
{
	if (!r->pi.refs || --r->pi.refs)
		return;
	t->pinned_bytes -= rec_l1_len(r);
	tier_room_made(t); /* evictable again */
	if (!(r->flags & TREC_ZOMBIE))
		return;
	/* The last pin of an unlinked chunk: now its bytes can go. */
	rec_list_del(&t->zombies, r);
	t->nzombies--;
	tier_free_extent(t, r);
	free(r);
}
