/*
 * l1_alloc.h - the allocator that carves the L1 arena into chunk extents.
 * Offsets and lengths are bytes; every extent is aligned to L1_ALIGN and its
 * length rounded up to L1_ALIGN. Not thread-safe: the engine calls it under
 * tier.lock.
 */
#ifndef KVFS_L1_ALLOC_H
#define KVFS_L1_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#define L1_ALIGN 4096u

struct l1_alloc;

/* l1_alloc_create - manages [0, size). -EINVAL when size < L1_ALIGN. */
int l1_alloc_create(uint64_t size, struct l1_alloc **out);
void l1_alloc_destroy(struct l1_alloc *a);

/* l1_alloc_get - an extent of at least len bytes; -ENOSPC when no free
 * extent is large enough (the caller evicts and retries). */
int l1_alloc_get(struct l1_alloc *a, uint64_t len, uint64_t *off);

/* l1_alloc_put - frees [off, off + len) (len as given to get, or any
 * aligned tail of it to shrink an extent in place). */
void l1_alloc_put(struct l1_alloc *a, uint64_t off, uint64_t len);

/* l1_alloc_extend - grows the allocated extent [off, off + len) in place
 * to newlen bytes, when the free space right after it is large enough;
 * else -ENOSPC and nothing changes (a writer's extent that grows without
 * a copy, so without holding old and new at once). */
int l1_alloc_extend(struct l1_alloc *a, uint64_t off, uint64_t len,
		    uint64_t newlen);

/* l1_alloc_round - len rounded up to L1_ALIGN. */
static inline uint64_t l1_alloc_round(uint64_t len)
{
	return (len + L1_ALIGN - 1) & ~(uint64_t)(L1_ALIGN - 1);
}

uint64_t l1_alloc_used(const struct l1_alloc *a);     /* bytes allocated */
uint64_t l1_alloc_largest(const struct l1_alloc *a);  /* largest free extent */
size_t l1_alloc_meta_bytes(const struct l1_alloc *a); /* allocator state */

#endif /* KVFS_L1_ALLOC_H */
