/*
 * policy_fifo.c - first in, first out: chunks leave L1 in the order they
 * entered it; hits change nothing. The baseline the others are judged by.
 *
 * Pinned chunks are skipped in place up to PLIST_PIN_SCAN of them (exact
 * FIFO order); further pinned chunks met by evict are reinserted at the
 * tail, so many long-lived pins stay cheap (policy_list.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "tier/policy/policy.h"
#include "tier/policy/policy_list.h"

#define FIFO_IN 1 /* policy_item.q: linked in the queue */

struct policy {
	struct plist queue; /* head = oldest insertion; tier.lock */
};

static int fifo_create(struct policy **out, uint64_t capacity_items)
{
	struct policy *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	plist_init(&p->queue);
	*out = p;
	return 0;
}

static void fifo_destroy(struct policy *p)
{
	free(p);
}

static void fifo_insert(struct policy *p, struct policy_item *it)
{
	it->q = FIFO_IN;
	it->freq = 0;
	plist_push_tail(&p->queue, it);
}

static void fifo_access(struct policy *p, struct policy_item *it)
{
}

static void fifo_remove(struct policy *p, struct policy_item *it)
{
	if (it->q != FIFO_IN)
		return;
	plist_del(&p->queue, it);
	it->q = 0;
}

static struct policy_item *fifo_evict(struct policy *p)
{
	struct policy_item *it = plist_evict_rotate(&p->queue);

	if (it)
		it->q = 0;
	return it;
}

static size_t fifo_meta_bytes(const struct policy *p)
{
	return sizeof(*p);
}

const struct policy_ops policy_fifo_ops = {
	.name = "fifo",
	.create = fifo_create,
	.destroy = fifo_destroy,
	.insert = fifo_insert,
	.access = fifo_access,
	.remove = fifo_remove,
	.update = NULL,
	.evict = fifo_evict,
	.resize = NULL,
	.meta_bytes = fifo_meta_bytes,
};
