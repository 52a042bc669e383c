/*
 * l1_alloc.c - carves the L1 arena into page-aligned chunk extents.
 *
 * Why this design: within a namespace, chunks are mostly the same size (one
 * model, one KV layout, a fixed number of tokens per chunk), so the extent an
 * evicted chunk frees is exactly what the next chunk of that namespace needs.
 * Free extents are therefore kept in segregated size classes: one class per
 * exact page count below 64 pages (256 KiB), and above that 16 classes per
 * power of two (TLSF-style, at most 1/16 = 6% internal slack per class). A
 * request first scans its own class for an extent that fits (for equal-sized
 * chunks the first one does: O(1) exact reuse with no split and no
 * fragmentation), then takes the first extent of the next non-empty larger
 * class found through a bitmap (good fit, split from the front).
 *
 * Mixed sizes (several namespaces, writers that grow) fragment the arena, so
 * a freed extent is coalesced at once with its free neighbours, found through
 * two small hash tables (struct htab) keyed by the page where a free extent
 * starts and the page where it ends. Allocated extents are not tracked here at all (the
 * chunk record holds offset and length), so the allocator's memory is
 * proportional to the number of free extents, not to the arena or the number
 * of chunks. Freeing an aligned tail of an allocated extent is just a free of
 * that range, which is how writers trim their over-allocation at publish.
 *
 * Not thread-safe: the engine calls it under tier.lock.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hash/htab.h"
#include "tier/l1_alloc.h"

#define L1_SHIFT 12 /* log2(L1_ALIGN) */
#define L1_EXACT 64 /* page counts below this get one class each */
#define L1_SL_BITS 4
#define L1_SL (1u << L1_SL_BITS)
#define L1_NCLASS (L1_EXACT + (64 - 6) * L1_SL)
#define L1_WORDS ((L1_NCLASS + 63) / 64)
#define L1_SCAN 8 /* extents looked at in the request's own class */

_Static_assert(L1_ALIGN == 1u << L1_SHIFT, "L1_SHIFT");

struct l1_ext {
	uint64_t off, len;           /* bytes, both multiples of L1_ALIGN */
	struct l1_ext *prev, *next;  /* size-class list */
	struct htab_node snode, enode; /* in by_start / by_end */
	uint32_t cls;
};

struct l1_alloc {
	uint64_t size, used, nfree;
	struct l1_ext *cls[L1_NCLASS];
	uint64_t bits[L1_WORDS];       /* bit c set: cls[c] not empty */
	struct htab by_start, by_end;  /* free extents by first page /
					* by the page after their end */
};

static uint32_t class_of(uint64_t pages)
{
	uint32_t fl;

	if (pages < L1_EXACT)
		return (uint32_t)pages;
	fl = 63 - (uint32_t)__builtin_clzll(pages); /* >= 6 */
	return L1_EXACT + (fl - 6) * L1_SL +
	       (uint32_t)((pages >> (fl - L1_SL_BITS)) & (L1_SL - 1));
}

static void class_link(struct l1_alloc *a, struct l1_ext *e)
{
	uint32_t c = class_of(e->len >> L1_SHIFT);

	e->cls = c;
	e->prev = NULL;
	e->next = a->cls[c];
	if (e->next)
		e->next->prev = e;
	a->cls[c] = e;
	a->bits[c / 64] |= 1ull << (c % 64);
}

static void class_unlink(struct l1_alloc *a, struct l1_ext *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		a->cls[e->cls] = e->next;
	if (e->next)
		e->next->prev = e->prev;
	if (!a->cls[e->cls])
		a->bits[e->cls / 64] &= ~(1ull << (e->cls % 64));
}

/* The two tables' hashes of a page number (the keys are offsets the
 * allocator chose, but one table serves every in-memory map of kvfs). */
#define SALT_START 1
#define SALT_END 2

static void hash_link(struct l1_alloc *a, struct l1_ext *e)
{
	/* cannot fail: l1_alloc_create gave both tables buckets (a failed
	 * doubling keeps them: longer chains) */
	(void)htab_add(&a->by_start, &e->snode,
		       htab_hash_u64(SALT_START, e->off >> L1_SHIFT));
	(void)htab_add(&a->by_end, &e->enode,
		       htab_hash_u64(SALT_END, (e->off + e->len) >> L1_SHIFT));
}

static void hash_unlink(struct l1_alloc *a, struct l1_ext *e)
{
	htab_del(&a->by_start, &e->snode);
	htab_del(&a->by_end, &e->enode);
}

static struct l1_ext *find_start(struct l1_alloc *a, uint64_t off)
{
	struct htab_node *n;

	htab_for_each_hash(&a->by_start,
			   htab_hash_u64(SALT_START, off >> L1_SHIFT), n) {
		struct l1_ext *e = container_of(n, struct l1_ext, snode);

		if (e->off == off)
			return e;
	}
	return NULL;
}

static struct l1_ext *find_end(struct l1_alloc *a, uint64_t end)
{
	struct htab_node *n;

	htab_for_each_hash(&a->by_end,
			   htab_hash_u64(SALT_END, end >> L1_SHIFT), n) {
		struct l1_ext *e = container_of(n, struct l1_ext, enode);

		if (e->off + e->len == end)
			return e;
	}
	return NULL;
}

int l1_alloc_create(uint64_t size, struct l1_alloc **out)
{
	struct l1_alloc *a;
	struct l1_ext *e;

	size &= ~(uint64_t)(L1_ALIGN - 1);
	if (size < L1_ALIGN)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	e = calloc(1, sizeof(*e));
	if (htab_init(&a->by_start, 0) || htab_init(&a->by_end, 0) || !e) {
		free(e);
		htab_free(&a->by_start);
		htab_free(&a->by_end);
		free(a);
		return -ENOMEM;
	}
	a->size = size;
	e->off = 0;
	e->len = size;
	class_link(a, e);
	hash_link(a, e);
	a->nfree = 1;
	*out = a;
	return 0;
}

void l1_alloc_destroy(struct l1_alloc *a)
{
	struct l1_ext *e, *next;

	if (!a)
		return;
	for (uint32_t c = 0; c < L1_NCLASS; c++)
		for (e = a->cls[c]; e; e = next) {
			next = e->next;
			free(e);
		}
	htab_free(&a->by_start);
	htab_free(&a->by_end);
	free(a);
}

/* The first extent of the lowest non-empty class above c, or NULL. */
static struct l1_ext *next_class(struct l1_alloc *a, uint32_t c)
{
	uint32_t w;
	uint64_t m;

	c++;
	if (c >= L1_NCLASS)
		return NULL;
	w = c / 64;
	m = a->bits[w] & (~0ull << (c % 64));
	for (;;) {
		if (m)
			return a->cls[w * 64 + (uint32_t)__builtin_ctzll(m)];
		if (++w >= L1_WORDS)
			return NULL;
		m = a->bits[w];
	}
}

/* Allocates the first len bytes of free extent e (len <= e->len). */
static void take_front(struct l1_alloc *a, struct l1_ext *e, uint64_t len)
{
	a->used += len;
	class_unlink(a, e);
	hash_unlink(a, e);
	if (e->len == len) {
		free(e);
		a->nfree--;
		return;
	}
	/* Split from the front; the remainder keeps its node. */
	e->off += len;
	e->len -= len;
	class_link(a, e);
	hash_link(a, e);
}

int l1_alloc_get(struct l1_alloc *a, uint64_t len, uint64_t *off)
{
	struct l1_ext *e;
	uint32_t c, n = 0;

	len = l1_alloc_round(len);
	if (len == 0)
		return -EINVAL;
	if (len > a->size - a->used)
		return -ENOSPC;
	c = class_of(len >> L1_SHIFT);
	for (e = a->cls[c]; e && n < L1_SCAN; e = e->next, n++)
		if (e->len >= len)
			break;
	if (!e || e->len < len)
		e = next_class(a, c);
	if (!e) /* last resort: the whole own class, never a false ENOSPC */
		for (e = a->cls[c]; e && e->len < len; e = e->next)
			;
	if (!e)
		return -ENOSPC;
	*off = e->off;
	take_front(a, e, len);
	return 0;
}

void l1_alloc_put(struct l1_alloc *a, uint64_t off, uint64_t len)
{
	struct l1_ext *lo, *hi, *e;

	len = l1_alloc_round(len);
	if (len == 0)
		return;
	lo = find_end(a, off);
	hi = find_start(a, off + len);
	if (lo) {
		class_unlink(a, lo);
		hash_unlink(a, lo);
		lo->len += len;
		e = lo;
		if (hi) {
			class_unlink(a, hi);
			hash_unlink(a, hi);
			e->len += hi->len;
			free(hi);
			a->nfree--;
		}
	} else if (hi) {
		class_unlink(a, hi);
		hash_unlink(a, hi);
		hi->off = off;
		hi->len += len;
		e = hi;
	} else {
		e = malloc(sizeof(*e));
		if (!e)
			return; /* untracked: stays counted as used */
		e->off = off;
		e->len = len;
		a->nfree++;
	}
	a->used -= len;
	class_link(a, e);
	hash_link(a, e);
}

int l1_alloc_extend(struct l1_alloc *a, uint64_t off, uint64_t len,
		    uint64_t newlen)
{
	struct l1_ext *e;
	uint64_t add;

	len = l1_alloc_round(len);
	newlen = l1_alloc_round(newlen);
	if (newlen <= len)
		return 0;
	add = newlen - len;
	e = find_start(a, off + len);
	if (!e || e->len < add)
		return -ENOSPC;
	take_front(a, e, add); /* the free neighbour, from its front */
	return 0;
}

uint64_t l1_alloc_used(const struct l1_alloc *a)
{
	return a->used;
}

uint64_t l1_alloc_largest(const struct l1_alloc *a)
{
	uint64_t best = 0;
	const struct l1_ext *e;

	for (int c = L1_NCLASS - 1; c >= 0; c--) {
		if (!(a->bits[c / 64] & (1ull << (c % 64))))
			continue;
		for (e = a->cls[c]; e; e = e->next)
			if (e->len > best)
				best = e->len;
		return best;
	}
	return 0;
}

size_t l1_alloc_meta_bytes(const struct l1_alloc *a)
{
	return sizeof(*a) +
	       (a->by_start.nb + a->by_end.nb) * sizeof(struct htab_node *) +
	       a->nfree * sizeof(struct l1_ext);
}
