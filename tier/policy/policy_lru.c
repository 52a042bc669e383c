/*
 * policy_lru.c - least recently used: one list, a hit moves the chunk to
 * the most recently used end, victims come from the other end.
 *
 * Pinned chunks are skipped in place up to PLIST_PIN_SCAN of them (exact
 * LRU order); further pinned chunks met by evict move to the MRU end, as
 * if used now, which is what a pinned chunk is (policy_list.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "tier/policy/policy.h"
#include "tier/policy/policy_list.h"

#define LRU_IN 1 /* policy_item.q: linked in the list */

struct policy {
	struct plist list; /* head = least recently used; tier.lock */
};

static int lru_create(struct policy **out, uint64_t capacity_items)
{
	struct policy *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	plist_init(&p->list);
	*out = p;
	return 0;
}

static void lru_destroy(struct policy *p)
{
	free(p);
}

static void lru_insert(struct policy *p, struct policy_item *it)
{
	it->q = LRU_IN;
	it->freq = 0;
	plist_push_tail(&p->list, it);
}

static void lru_access(struct policy *p, struct policy_item *it)
{
	if (it->q != LRU_IN)
		return;
	plist_del(&p->list, it);
	plist_push_tail(&p->list, it);
}

static void lru_remove(struct policy *p, struct policy_item *it)
{
	if (it->q != LRU_IN)
		return;
	plist_del(&p->list, it);
	it->q = 0;
}

static struct policy_item *lru_evict(struct policy *p)
{
	struct policy_item *it = plist_evict_rotate(&p->list);

	if (it)
		it->q = 0;
	return it;
}

static size_t lru_meta_bytes(const struct policy *p)
{
	return sizeof(*p);
}

const struct policy_ops policy_lru_ops = {
	.name = "lru",
	.create = lru_create,
	.destroy = lru_destroy,
	.insert = lru_insert,
	.access = lru_access,
	.remove = lru_remove,
	.update = NULL,
	.evict = lru_evict,
	.resize = NULL,
	.meta_bytes = lru_meta_bytes,
};
