/*
 * tier_stats.c - tier_get_stats: the engine's counters and memory use,
 * summed under tier.lock (L2's through tier_l2_stats).
 */
#include <stdint.h>
#include <string.h>

#include "tier/tier_i.h"

void tier_get_stats(struct tier *t, struct tier_stats *st)
{
	uint64_t meta;

	memset(st, 0, sizeof(*st));
	tier_l3_store_stats(t, st); /* atomics: outside the lock */
	tier_lock(t);
	tier_l3_stats(t, st);
	st->l1_capacity = t->l1_cap;
	st->l1_bytes = t->l1_bytes;
	st->l1_chunks = t->l1_chunks;
	tier_l2_stats(t, st);
	memcpy(st->read_hits, t->read_hits, sizeof(st->read_hits));
	st->read_misses = t->read_misses;
	st->name_misses = t->name_misses;
	st->evictions = t->evictions;
	st->publishes = t->publishes;
	st->bytes_in = t->bytes_in;
	st->bytes_out = __atomic_load_n(&t->bytes_out, __ATOMIC_RELAXED);
	st->discards = t->discards;
	st->promotions = t->promotions;
	st->demotions = t->demotions;
	tier_ra_stats(t, st);
	st->writers = t->nwriters;
	st->writer_bytes = t->writer_bytes;
	st->room_waits = t->room_waits;
	st->room_timeouts = t->room_timeouts;
	st->l1_pinned_bytes = t->pinned_bytes;
	meta = sizeof(*t);
	meta += (t->idx.n + t->nzombies) * sizeof(struct tier_rec);
	meta += t->idx.nb * sizeof(*t->idx.b);
	meta += t->nwriters * sizeof(struct tier_wr);
	meta += t->nchunks_handed * sizeof(struct tier_chunk);
	meta += t->ns_cap * sizeof(*t->ns) + t->ns_count * sizeof(struct tier_ns);
	meta += t->gone_cap * sizeof(struct tier_gone);
	meta += t->orphans.nb * sizeof(*t->orphans.b) +
		t->orphans.n * sizeof(struct tier_orphan);
	meta += l1_alloc_meta_bytes(t->alloc);
	meta += tier_ra_meta_bytes(t);
	if (t->pops->meta_bytes)
		meta += t->pops->meta_bytes(t->pol);
	st->meta_bytes = meta;
	tier_unlock(t);
}
