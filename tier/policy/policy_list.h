/*
 * policy_list.h - the intrusive FIFO/LRU list the policies share, threaded
 * through struct policy_item's prev/next. Private to tier/policy_*.c.
 *
 * Head is the oldest end (the next victim), tail the newest. Items are not
 * owned: the engine owns the memory, the list only links it. Callers hold
 * tier.lock, like every policy call.
 */
#ifndef KVFS_POLICY_LIST_H
#define KVFS_POLICY_LIST_H

#include <stddef.h>
#include <stdint.h>

#include "tier/policy/policy.h"

struct plist {
	struct policy_item *head; /* oldest / least recently used */
	struct policy_item *tail; /* newest / most recently used */
	uint64_t n;
};

static inline void plist_init(struct plist *l)
{
	l->head = l->tail = NULL;
	l->n = 0;
}

static inline void plist_push_tail(struct plist *l, struct policy_item *it)
{
	it->next = NULL;
	it->prev = l->tail;
	if (l->tail)
		l->tail->next = it;
	else
		l->head = it;
	l->tail = it;
	l->n++;
}

/* Inserts it just before pos (pos == NULL: at the tail). */
static inline void plist_insert_before(struct plist *l,
				       struct policy_item *pos,
				       struct policy_item *it)
{
	if (!pos) {
		plist_push_tail(l, it);
		return;
	}
	it->next = pos;
	it->prev = pos->prev;
	if (pos->prev)
		pos->prev->next = it;
	else
		l->head = it;
	pos->prev = it;
	l->n++;
}

static inline void plist_del(struct plist *l, struct policy_item *it)
{
	if (it->prev)
		it->prev->next = it->next;
	else
		l->head = it->next;
	if (it->next)
		it->next->prev = it->prev;
	else
		l->tail = it->prev;
	it->prev = it->next = NULL;
	l->n--;
}

/* Unlinks the n items first..last, linked in that order in l; they keep
 * the links among themselves (first->prev and last->next are cleared). */
static inline void plist_cut(struct plist *l, struct policy_item *first,
			     struct policy_item *last, uint64_t n)
{
	if (first->prev)
		first->prev->next = last->next;
	else
		l->head = last->next;
	if (last->next)
		last->next->prev = first->prev;
	else
		l->tail = first->prev;
	first->prev = last->next = NULL;
	l->n -= n;
}

/* Links the n items first..last (linked among themselves) into l just
 * before pos (pos == NULL: at the tail). */
static inline void plist_splice_before(struct plist *l,
				       struct policy_item *pos,
				       struct policy_item *first,
				       struct policy_item *last, uint64_t n)
{
	struct policy_item *prev = pos ? pos->prev : l->tail;

	first->prev = prev;
	if (prev)
		prev->next = first;
	else
		l->head = first;
	last->next = pos;
	if (pos)
		pos->prev = last;
	else
		l->tail = last;
	l->n += n;
}

/*
 * How many pinned items evict walks past in place before it starts moving
 * them out of the way. Up to this many, the victim is exactly the oldest
 * unpinned item; beyond it, each further pinned item met is rotated (LRU,
 * FIFO: to the tail, as if used now, which a pinned chunk is) or parked
 * (prefix), so a crowd of long-lived pins (user.kvfs.pin, leases) costs
 * O(1) amortized per eviction instead of O(pinned). The engine does not
 * tell policies when refs changes, so a lazy walk is the only way to
 * notice an unpin.
 */
#define PLIST_PIN_SCAN 32

/* The oldest item nobody pins, walking the whole list in place, or NULL. */
static inline struct policy_item *plist_first_unpinned(const struct plist *l)
{
	struct policy_item *it;

	for (it = l->head; it; it = it->next)
		if (it->refs == 0)
			return it;
	return NULL;
}

/*
 * Unlinks and returns the oldest unpinned item; the first PLIST_PIN_SCAN
 * pinned items keep their places, later pinned ones met on the way move to
 * the tail. Each item is looked at once per call: NULL means every item is
 * pinned.
 */
static inline struct policy_item *plist_evict_rotate(struct plist *l)
{
	struct policy_item *it = l->head, *next;
	uint64_t budget = l->n, skipped = 0;

	while (it && budget--) {
		next = it->next;
		if (it->refs == 0) {
			plist_del(l, it);
			return it;
		}
		if (++skipped > PLIST_PIN_SCAN && next) {
			plist_del(l, it);
			plist_push_tail(l, it);
		}
		it = next;
	}
	return NULL;
}

#endif /* KVFS_POLICY_LIST_H */
