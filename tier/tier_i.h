/*
 * tier_i.h - private to tier/: the engine's structures. fs/ and tests use
 * tier.h only.
 *
 * Locking: every field of struct tier, struct tier_ns and struct tier_rec is
 * protected by tier.lock unless its comment says otherwise. The bytes of a
 * chunk in the arena are not: they are written only by the writer that owns
 * the extent (serialized by tier_wr.mu) and are immutable once published;
 * readers copy them without tier.lock while they hold a pin (refs > 0), and
 * an extent is freed only when refs drops to 0.
 *
 * Lock order: tier_wr.mu -> tier.lock -> (L2 locks). tier.lock is never held
 * while waiting for a tier_wr.mu.
 */
#ifndef KVFS_TIER_I_H
#define KVFS_TIER_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "kvfs.h"
#include "tier/l1_alloc.h"
#include "tier/policy.h"
#include "tier/tier.h"

/* Where an L2 copy of a chunk lives; opaque to the L1 code, filled by the L2
 * engine (segment number, offset, stored length...). */
struct tier_l2loc {
	uint8_t b[16];
};

/* Record flags */
#define TREC_USER_PIN 0x01   /* user.kvfs.pin = 1 (holds one ref) */
#define TREC_HAS_PARENT 0x02 /* parent is known */
#define TREC_ZOMBIE 0x04     /* unlinked while pinned: not in the index */
#define TREC_COUNTED 0x08    /* counted in its parent's nchildren (or in
			      * the orphan count of its parent's key) */
#define TREC_L2 0x10         /* r->l2 is a valid L2 copy (tier_l2.c) */
#define TREC_L2W 0x20        /* an L2 write is in flight (tier_l2.c) */
#define TREC_PROMO 0x40      /* a promotion from L2 is reading it */
#define TREC_NOSUM 0x80      /* checksum not computed yet (tier_checksum) */

/*
 * One published chunk. Compact on purpose: a million chunks cost a million
 * of these (see tier_get_stats().meta_bytes).
 */
struct tier_rec {
	struct policy_item pi;       /* pi.refs is THE pin count; pi.hkey is
				      * hashkey_index(ns, key), also the
				      * index hash */
	struct tier_rec *hnext;      /* index chain */
	struct tier_rec *ns_prev, *ns_next; /* namespace list (or zombies) */
	struct kvfs_key key;
	struct kvfs_key parent;      /* valid with TREC_HAS_PARENT */
	uint64_t size;               /* raw bytes */
	uint64_t checksum;           /* XXH3-64 of the raw bytes */
	uint64_t gen;                /* publication number */
	uint64_t atime_ns;           /* CLOCK_REALTIME of the last access */
	uint64_t l1_off;             /* extent in the arena (where == L1) */
	struct tier_l2loc l2;        /* for the L2 engine */
	uint32_t l1_pages;           /* extent length in L1_ALIGN pages, 0 for
				      * empty chunks (rec_l1_len) */
	uint32_t ns;
	uint32_t hits;
	uint32_t kpins;              /* of refs: key pins (lookup, pin_key) */
	uint8_t where;               /* enum tier_where */
	uint8_t flags;               /* TREC_* */
	uint16_t l2_heat;            /* hits since its L2 copy was written
				      * or moved (saturating): what a reclaim
				      * calls hot */
};

/* 184 bytes: with malloc's 8-byte header, one 192-byte heap chunk. */
_Static_assert(sizeof(struct tier_rec) <= 184, "tier_rec grew");

/* Bytes of r's L1 extent. */
static inline uint64_t rec_l1_len(const struct tier_rec *r)
{
	return (uint64_t)r->l1_pages * L1_ALIGN;
}

struct tier_ns {
	uint32_t id;
	char name[KVFS_NS_NAME_MAX + 1];
	uint64_t chunk_bytes;        /* 0 = any size */
	uint64_t last_size;          /* size of the last published chunk */
	int shuffle;
	uint64_t chunks, bytes, hits;
	uint32_t nwriters;           /* tier_wr in flight */
	struct tier_rec *head;       /* published chunks, newest first */
};

/* A chunk being written. Fields marked (mu) are protected by w->mu; the
 * extent fields change under both mu and tier.lock. */
struct tier_wr {
	struct tier_wr *prev, *next; /* tier.writers */
	pthread_mutex_t mu;          /* serializes pwrite/pread/truncate */
	uint32_t ns;
	bool keyed;
	bool has_parent;
	struct kvfs_key key;         /* valid when keyed */
	struct kvfs_key parent;
	uint32_t depth;
	uint64_t size;               /* (mu) bytes written so far */
	uint64_t off, cap;           /* (mu + tier.lock) extent; cap 0 = none */
	uint64_t hint;               /* expected size: the first extent's,
				      * once bytes arrive (wr_grow) */
};

/* What tier_get hands out: a pin on a record, plus where its bytes are. */
struct tier_chunk {
	struct tier_rec *rec;
	const void *ptr;     /* host address of the bytes, or NULL */
	uint64_t off;        /* arena offset */
	uint64_t size, gen;
	void *tmp;           /* temporary buffer (L2 reads), or NULL */
};

/* An on_gone call to make after tier.lock is dropped. */
struct tier_gone {
	uint32_t ns;
	struct kvfs_key key;
	enum tier_gone_reason why;
};

struct tier {
	pthread_mutex_t lock;
	struct tier_config cfg;      /* strings point into the copies below
				      * (immutable after create) */
	char *policy_name, *l1_spec, *l2_dir;
	uint64_t l1_cap;             /* l1_size rounded down to L1_ALIGN */

	struct gpu_arena arena;      /* immutable after create */
	struct l1_alloc *alloc;
	const struct policy_ops *pops;
	struct policy *pol;
	uint64_t cap_items;          /* last capacity given to the policy */

	struct tier_rec **buckets;   /* the index */
	uint64_t nbuckets, nrecs;    /* nbuckets a power of two */

	struct tier_ns **ns;         /* by id; NULL once removed */
	uint32_t ns_cap, ns_next, ns_count;

	struct tier_wr *writers;     /* in flight */
	uint64_t nwriters, writer_bytes;
	struct tier_rec *zombies;    /* unlinked while pinned */
	uint64_t nzombies;
	/* Children counts of parent keys that are not indexed (the parent
	 * was never published, or was unlinked / dropped): an indexed
	 * record takes its count over when it is inserted (tier.c). */
	struct tier_orphan **orphans;
	uint64_t norphan_buckets, norphans; /* buckets: a power of two */

	uint64_t clock;              /* logical time for the policy */
	uint64_t gen;                /* last publication number */
	uint64_t pinned_bytes;       /* extents of records with refs > 0 */
	uint64_t l1_bytes, l1_chunks;/* extents / count of indexed L1 records */
	uint64_t nchunks_handed;     /* struct tier_chunk outstanding */

	uint64_t hits, misses, evictions, publishes, discards;
	uint64_t promotions, demotions;

	struct tier_gone *gone;      /* queued on_gone calls */
	size_t ngone, gone_cap;
	struct tier_l2 *l2;          /* the L2 engine (tier_l2.c), NULL without
				      * l2_dir; set at create */
	char logbuf[256];            /* a log line waiting for tier_unlock */
};

/* ------------------------------------------- shared inside tier/ (tier.c) */

/* Logs through cfg.log; call WITHOUT tier.lock (callbacks never run under
 * it; tier.c queues messages made under the lock until tier_unlock). */
void tier_log(struct tier *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
uint64_t tier_now_ns(void);
void tier_lock(struct tier *t);
/* Unlocks, then makes the queued on_gone calls. */
void tier_unlock(struct tier *t);

/* Arena byte access (no lock needed: callers own or pin the extent). */
int tier_arena_write(struct tier *t, uint64_t off, const void *src,
		     size_t len);
int tier_arena_read(struct tier *t, uint64_t off, void *dst, size_t len);
int tier_arena_zero(struct tier *t, uint64_t off, uint64_t len);
int tier_arena_move(struct tier *t, uint64_t dst, uint64_t src, uint64_t len);
int tier_arena_checksum(struct tier *t, uint64_t off, uint64_t len,
			uint64_t *sum);

/* The rest: tier.lock held. */
struct tier_ns *tier_ns_get(struct tier *t, uint32_t id);
struct tier_rec *tier_idx_find(struct tier *t, uint32_t ns,
			       const struct kvfs_key *key);
void tier_idx_insert(struct tier *t, struct tier_ns *ns, struct tier_rec *r);
void tier_count_parent(struct tier *t, struct tier_rec *r);
void tier_ref(struct tier *t, struct tier_rec *r);
void tier_unref(struct tier *t, struct tier_rec *r);
void tier_policy_capacity(struct tier *t);
int tier_evict_one(struct tier *t);
int tier_alloc_evict(struct tier *t, uint64_t len, uint64_t *off);

/* Exported for tier_l2.c (tier.lock held). */
void tier_idx_remove(struct tier *t, struct tier_rec *r);
void tier_queue_gone(struct tier *t, const struct tier_rec *r,
		     enum tier_gone_reason why);

/* ------------------------------------------- L2 hooks (tier_l2.c) */

/* tier_create / tier_destroy: open (recovering chunks into the index) and
 * close L2. tier_l2_open returns -EBUSY / -EINVAL (create fails); other L2
 * failures are logged and leave L1 serving alone. */
int tier_l2_open(struct tier *t, char *err, size_t errlen);
void tier_l2_close(struct tier *t);
/* The rest: tier.lock held, no-ops without L2. */
/* The victim r is about to leave L1: true when it stays indexed as an L2
 * chunk (a clean copy exists, or a demotion was queued). */
bool tier_l2_evicting(struct tier *t, struct tier_rec *r);
/* Makes the pinned L2 chunk r readable through c (promotion, or a
 * temporary buffer); drops and retakes tier.lock. 0 or -errno. */
int tier_l2_fill(struct tier *t, struct tier_rec *r, struct tier_chunk *c);
void tier_l2_on_publish(struct tier *t, struct tier_rec *r);
void tier_l2_on_hit(struct tier *t, struct tier_rec *r);
/* r is being unlinked: frees its L2 record; true when there was one (then
 * call tier_l2_sync_frees after dropping tier.lock). */
bool tier_l2_forget(struct tier *t, struct tier_rec *r);
/* An unlink of r: an L2 write of r still queued is cancelled (false);
 * one being written is waited for (bounded, dropping tier.lock) so the
 * unlink can erase what it wrote: true (r may have changed or gone: look
 * it up again). */
bool tier_l2_wait_write(struct tier *t, struct tier_rec *r);
/* tier.lock NOT held: waits until the L2 records freed so far are erased
 * on disk (bounded), so a daemon killed next does not recover them. */
void tier_l2_sync_frees(struct tier *t);
void tier_l2_prefetch(struct tier *t, struct tier_rec *r);
/* r (L2, just user-pinned) is promoted into L1 if there is room. */
void tier_l2_pin_promote(struct tier *t, struct tier_rec *r);
uint64_t tier_l2_stored(const struct tier_rec *r);
void tier_l2_stats(struct tier *t, struct tier_stats *st);

#endif /* KVFS_TIER_I_H */
