/*
 * lease.h - the lease table: pins taken on behalf of an engine (batched
 * lookup with KVFS_LOOKUP_PIN, group lookup, chunk handles), each owned by
 * one open file of the mount and released by KVFS_IOC_UNPIN, by expiry
 * after its lease_ms, or when that file is closed (fs_ioctl_release).
 *
 * No FUSE in here: fs/fs_ioctl.c maps ioctls onto these calls. Every
 * function returns 0 or -errno and never sets errno.
 *
 * Locking: each table has one mutex (lease_table.lock) protecting the
 * lease index, the expiry list and the counters. Pins are released with
 * tier_unpin_key / tier_put AFTER the lease is unlinked and lease_table.lock
 * is dropped, so the lock order is lease_table.lock -> (nothing); tier.lock
 * is never taken while holding lease_table.lock.
 *
 * Expiry: one thread per table sleeps until the earliest deadline (or a
 * change) and releases expired leases; lookups also expire lazily, so an
 * expired id is ENOENT even if the thread has not run yet.
 */
#ifndef KVFS_LEASE_H
#define KVFS_LEASE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kvfs.h"

struct tier;
struct tier_chunk;
struct lease_table;

/* One pinned chunk of a lease: refs + 1 taken with tier_lookup_pinned
 * (or tier_lookup(pin) / tier_pin_key), given back with tier_unpin_gen. */
struct lease_pin {
	uint32_t ns;
	struct kvfs_key key;
	uint64_t gen;   /* the generation pinned (tier_lookup_pinned), so the
			 * release never lands on a re-published copy of the
			 * key; 0 = unknown (released like tier_unpin_key) */
};

/* Most leases a table holds at once (KVFS_IOC_LOOKUP then fails with
 * ENOSPC): a bound on what a runaway engine can pin and on daemon memory. */
#define LEASE_MAX 65536

/* Of those, what users other than root may hold: each user at most
 * LEASE_MAX_PER_UID (one user's runaway engine, or a hostile reader of one
 * namespace, cannot take every other engine's leases), and all of them
 * together at most LEASE_MAX_NONROOT, so root (kvfsctl pin, an
 * administrator) always finds room. Past either: -ENOSPC. */
#define LEASE_MAX_PER_UID (LEASE_MAX / 4)
#define LEASE_MAX_NONROOT (LEASE_MAX - LEASE_MAX / 8)

/* The longest lease root may ask for (24 h, also the largest lease_ms mount
 * option); other users get at most the table's default_ms. */
#define LEASE_MAX_MS 86400000u

/* Counters for /.kvfs/stats (all under lease_table.lock). */
struct lease_stats {
	uint64_t active;      /* leases held now (handles included) */
	uint64_t handles;     /* of which chunk handles */
	uint64_t pinned;      /* chunk pins held by those leases */
	uint64_t taken;       /* leases ever created */
	uint64_t unpinned;    /* released by KVFS_IOC_UNPIN / HANDLE_RELEASE */
	uint64_t expired;     /* released because lease_ms passed */
	uint64_t closed;      /* released because their fd was closed */
	uint64_t lease_ms;    /* the table's default lease time (a gauge) */
};

/*
 * lease_table_create - a table whose leases pin chunks of t.
 * default_ms: the lease time used when a caller passes 0 (the mount's
 * lease_ms; 0 here means 30000). Starts the expiry thread.
 * Errors: -ENOMEM, or what pthread_create returned.
 */
int lease_table_create(struct tier *t, uint32_t default_ms,
		       struct lease_table **out);

/* lease_table_destroy - releases every pin still held (tier must still be
 * alive), stops the thread, frees the table. NULL is a no-op. */
void lease_table_destroy(struct lease_table *lt);

/*
 * lease_grant_ms - the lease time a caller of uid asking for ms gets:
 * ms 0 = the table's default (the mount's lease_ms); a non-root caller is
 * capped at that default, so it cannot hold pins (and L1 space) longer
 * than the administrator chose; root (uid 0) may ask for longer, up to
 * LEASE_MAX_MS.
 */
uint32_t lease_grant_ms(struct lease_table *lt, uid_t uid, uint32_t ms);

/*
 * lease_add - records pins the caller already took and returns a new lease
 * id (> 0, never reused by this table) owning them.
 * owner: an opaque token for the open file that took it (the FUSE fh);
 * uid: the caller's uid (only that uid or root may unpin it);
 * ms: lease time in milliseconds, 0 = the table's default; capped as
 * lease_grant_ms says.
 * pins: npins (>= 1) entries, copied. On success the table owns the pins;
 * on failure the caller still does (and must unpin them).
 * Errors: -EINVAL (npins 0), -ENOSPC (LEASE_MAX leases held, or uid over
 * its share: LEASE_MAX_PER_UID, LEASE_MAX_NONROOT), -ENOMEM.
 */
int lease_add(struct lease_table *lt, uint64_t owner, uid_t uid, uint32_t ms,
	      const struct lease_pin *pins, size_t npins, uint64_t *id);

/*
 * lease_add_handle - records a chunk handle: c was pinned with tier_get
 * and is released with tier_put; cookie (may be NULL) came from
 * tier_arena_export and is given to tier_arena_unexport first. Handles do
 * not expire; one per owner.
 * Errors: -EBUSY (owner already holds a handle), -ENOSPC, -ENOMEM. On
 * failure the caller still owns c and cookie.
 */
int lease_add_handle(struct lease_table *lt, uint64_t owner, uid_t uid,
		     struct tier_chunk *c, void *cookie, uint64_t *id);

/*
 * lease_release - releases lease id (a pin lease or a handle) and unpins.
 * uid: the caller's uid; root (0) may release any lease.
 * owner: for handles, the releasing fd must be the one that took it (pass
 * the caller's fh); for pin leases any fd of the mount may release.
 * handle: true for KVFS_IOC_HANDLE_RELEASE (only handles match), false for
 * KVFS_IOC_UNPIN (only pin leases match).
 * Errors: -ENOENT (unknown, expired, or already released; or the wrong
 * kind), -EPERM (another user's lease).
 */
int lease_release(struct lease_table *lt, uint64_t id, uint64_t owner,
		  uid_t uid, int handle);

/* lease_release_owner - releases every lease and handle that owner took
 * (its fd was closed). Returns how many were released. */
long lease_release_owner(struct lease_table *lt, uint64_t owner);

/* lease_owner_handle - the id of the handle owner holds, or 0. */
uint64_t lease_owner_handle(struct lease_table *lt, uint64_t owner);

/* lease_expire_now - releases leases whose deadline has passed (the thread
 * does this by itself; tests call it to avoid waiting). Returns how many. */
long lease_expire_now(struct lease_table *lt);

void lease_get_stats(struct lease_table *lt, struct lease_stats *st);

#endif /* KVFS_LEASE_H */
