/*
 * tier_store.c - the core's doorway to the stores below L1: each
 * tier_l2_* / tier_l3_* hook of tier_i.h calls the store's struct of
 * operations (set by tier_l2_open / tier_l3_open, both called first by
 * tier_create), or does nothing (returns "not there") before that. Calls
 * no file of the engine; the stores' files call the core, never the
 * reverse.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "tier/tier_i.h"

/* What may be promoted ahead of readers (lookup prefetch and readahead
 * together): three quarters of L1, so a run never evicts its own head. */
uint64_t tier_prefetch_bound(const struct tier *t)
{
	return t->l1_cap / 4 * 3;
}


bool tier_l2_evicting(struct tier *t, struct tier_rec *r)
{
	return t->l2ops ? t->l2ops->evicting(t, r) : false;
}

void tier_l2_throttle(struct tier *t, uint64_t need)
{
	if (t->l2ops)
		t->l2ops->throttle(t, need);
}

int tier_l2_fill(struct tier *t, struct tier_rec *r, struct tier_chunk *c)
{
	return t->l2ops ? t->l2ops->fill(t, r, c) : -ENOENT;
}

void tier_l2_on_publish(struct tier *t, struct tier_rec *r)
{
	if (t->l2ops)
		t->l2ops->on_publish(t, r);
}

void tier_l2_on_hit(struct tier *t, struct tier_rec *r)
{
	if (t->l2ops)
		t->l2ops->on_hit(t, r);
}

bool tier_l2_forget(struct tier *t, struct tier_rec *r)
{
	return t->l2ops ? t->l2ops->forget(t, r) : false;
}

bool tier_l2_wait_write(struct tier *t, struct tier_rec *r)
{
	return t->l2ops ? t->l2ops->wait_write(t, r) : false;
}

void tier_l2_sync_frees(struct tier *t)
{
	if (t->l2ops)
		t->l2ops->sync_frees(t);
}

void tier_l2_prefetch(struct tier *t, struct tier_rec *r)
{
	if (t->l2ops)
		t->l2ops->prefetch(t, r);
}

uint64_t tier_l2_prefetch_bytes(const struct tier *t)
{
	return t->l2ops ? t->l2ops->prefetch_bytes(t) : 0;
}

void tier_l2_pin_promote(struct tier *t, struct tier_rec *r)
{
	if (t->l2ops)
		t->l2ops->pin_promote(t, r);
}

void tier_l2_stats(struct tier *t, struct tier_stats *st)
{
	if (t->l2ops)
		t->l2ops->stats(t, st);
}

void tier_l3_on_publish(struct tier *t, struct tier_rec *r)
{
	if (t->l3ops)
		t->l3ops->on_publish(t, r);
}

void tier_l3_on_hit(struct tier *t, struct tier_rec *r)
{
	if (t->l3ops)
		t->l3ops->on_hit(t, r);
}

void tier_l3_evicting(struct tier *t, struct tier_rec *r)
{
	if (t->l3ops)
		t->l3ops->evicting(t, r);
}

void tier_l3_forget(struct tier *t, struct tier_rec *r)
{
	if (t->l3ops)
		t->l3ops->forget(t, r);
}

int tier_l3_promote(struct tier *t, uint32_t ns, const struct kvfs_key *key)
{
	return t->l3ops ? t->l3ops->promote(t, ns, key) : -ENOENT;
}

uint32_t tier_l3_run(struct tier *t, uint32_t ns, const struct kvfs_key *keys,
		     uint32_t n)
{
	return t->l3ops ? t->l3ops->run(t, ns, keys, n) : 0;
}

void tier_l3_prefetch(struct tier *t, uint32_t ns, const struct kvfs_key *keys,
		      uint32_t n)
{
	if (t->l3ops)
		t->l3ops->prefetch(t, ns, keys, n);
}

void tier_l3_stats(struct tier *t, struct tier_stats *st)
{
	if (t->l3ops)
		t->l3ops->stats(t, st);
}

void tier_l3_store_stats(struct tier *t, struct tier_stats *st)
{
	if (t->l3ops)
		t->l3ops->store_stats(t, st);
}
