/*
 * tier_i.h - private to tier/: the engine's structures, its lock order and
 * who owns what. fs/ and tests use tier.h only.
 *
 * Where things are (one concern per file):
 *   tier.c         life cycle (config, create/destroy), tier.lock, logging,
 *                  the on_gone calls queued under the lock
 *   tier_arena.c   bytes in the L1 arena (write/read/zero/move/checksum,
 *                  export for zero-copy maps)
 *   tier_index.c   the chunk index (struct htab) and parent/orphan counts
 *   tier_ns.c      namespaces, and the snapshot readdir lists
 *   tier_wr.c      writers: a chunk being written, then published
 *   tier_read.c    pins, and reads/changes of one chunk (stat, checksum,
 *                  get/put, unlink, user pin, parent)
 *   tier_lookup.c  batched lookup of prefix chains, key pins
 *   tier_evict.c   victim choice (through the policy) and eviction driving
 *   tier_stats.c   counters and memory use
 *   tier_events.c  the event sink (tier_events.h): a call per tier change
 *   tier_l2*.c     the engine's side of L2 (tier_l2_i.h): hooks, recovery
 *                  into the index, demotion (tier_l2_demote.c), promotion
 *                  and prefetch (tier_l2_promote.c); the L2 log: l2_i.h
 *   tier_readahead.c  chain readahead: per-reader windows along parent
 *                  links and learned read order, promoted from L2/L3 by
 *                  its workers (its fields: tier.lock)
 *   tier_l3.c      the engine's side of L3 (shared, on Redis): ingest,
 *                  promotion, lookups past the local run, prefetch; the
 *                  store: l3.h (l3.c, l3_redis.c, l3_conn.c, l3_slot.c)
 *   l1_alloc.c     extents of the arena; policy_*.c victim order;
 *                  lease.c leases; codec.c compression; record.h/.c the
 *                  on-disk record format
 *
 * Locks, in the order they are taken (never the other way):
 *
 *   tier_wr.mu -> tier.lock -> l2.lock      (l2.mt_lock: a leaf)
 *
 *   tier_wr.mu    one writer's bytes and size (pwrite/pread/truncate of a
 *                 chunk being written); tier.lock is never held while
 *                 waiting for a tier_wr.mu.
 *   tier.lock     everything in struct tier, struct tier_ns, struct
 *                 tier_rec (with the policy's state inside pi), struct
 *                 tier_orphan, struct tier_l2 and its jobs, the L1
 *                 allocator and the policy instance (and so the
 *                 fields of tier_l2_i.h). No callback of
 *                 tier_config (log, on_gone) runs under it: they are
 *                 queued and made by tier_unlock. The exception is the
 *                 event sink (cfg.events), called under it so events
 *                 keep the index's order: it only copies into a queue
 *                 whose lock is a leaf (events/ev_queue.c). tier_l2.c
 *                 waits on tier_l2.cond with it.
 *   l2.lock, l2.mt_lock: the L2 log's (see l2_i.h), leaves for the
 *                 engine; the log's callbacks run without them and take
 *                 tier.lock.
 *   lease_table.lock (lease.c) is a leaf: leases are released into the
 *                 engine only after it is dropped.
 *
 * Not under any lock: the bytes of a chunk in the arena. They are written
 * only by the writer that owns the extent (serialized by tier_wr.mu) and are
 * immutable once published; readers copy them without tier.lock while they
 * hold a pin (refs > 0), and an extent is freed only when refs drops to 0.
 */
#ifndef KVFS_TIER_I_H
#define KVFS_TIER_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gpu/gpu.h"
#include "hash/htab.h"
#include "kvfs.h"
#include "tier/l1_alloc.h"
#include "tier/policy/policy.h"
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
 * of these (see tier_get_stats().meta_bytes). Every field: tier.lock.
 */
struct tier_rec {
	struct policy_item pi;       /* pi.refs is THE pin count; pi.hkey is
				      * hashkey_index(ns, key), also the
				      * index hash: pi.node is the record's
				      * link in tier.idx */
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
	uint8_t l2_heat;             /* hits since its L2 copy was written
				      * or moved (saturating; only > 0 is
				      * asked): what a reclaim calls hot */
	uint8_t l3;                  /* TL3_* (tier_l3.c) */
	uint32_t ptime_s;            /* CLOCK_REALTIME seconds of its
				      * publication (recovery, for a chunk
				      * found in L2 at start): its mtime */
};

/* rec.l3: what this node knows of the chunk's copy in L3 */
#define TL3_QUEUED 1 /* a write of it is queued (it is pinned for it) */
#define TL3_IN 2     /* stored there by this node, or read from there */

/* 184 bytes: with malloc's 8-byte header, one 192-byte heap chunk. */
_Static_assert(sizeof(struct tier_rec) <= 184, "tier_rec grew");

/* The record of an index node (tier.idx). */
#define idx_rec(e) container_of((e), struct tier_rec, pi.node)

/* The record holding policy item it. */
#define rec_of(it) \
	((struct tier_rec *)((char *)(it) - offsetof(struct tier_rec, pi)))

static inline bool tier_key_eq(const struct kvfs_key *a,
			       const struct kvfs_key *b)
{
	return memcmp(a->b, b->b, sizeof(a->b)) == 0;
}

/* Namespace lists and the zombie list (ns_prev/ns_next, newest first). */
static inline void rec_list_push(struct tier_rec **head, struct tier_rec *r)
{
	r->ns_prev = NULL;
	r->ns_next = *head;
	if (*head)
		(*head)->ns_prev = r;
	*head = r;
}

static inline void rec_list_del(struct tier_rec **head, struct tier_rec *r)
{
	if (r->ns_prev)
		r->ns_prev->ns_next = r->ns_next;
	else
		*head = r->ns_next;
	if (r->ns_next)
		r->ns_next->ns_prev = r->ns_prev;
	r->ns_prev = r->ns_next = NULL;
}

/* Bytes of r's L1 extent. */
static inline uint64_t rec_l1_len(const struct tier_rec *r)
{
	return (uint64_t)r->l1_pages * L1_ALIGN;
}

/* The children count of a parent key that is not indexed (tier_index.c).
 * Every field: tier.lock. */
struct tier_orphan {
	struct htab_node node;       /* in tier.orphans; node.h is
				      * hashkey_index(ns, key) */
	struct kvfs_key key;
	uint32_t ns;
	uint32_t nchildren;
};

/* A namespace. Every field: tier.lock (id and name never change). */
struct tier_ns {
	uint32_t id;
	char name[KVFS_NS_NAME_MAX + 1];
	uint64_t chunk_bytes;        /* 0 = any size */
	uint32_t chunk_tokens;       /* user.kvfs.chunk_tokens, for events */
	uint64_t last_size;          /* size of the last published chunk */
	int shuffle;
	uint64_t chunks, bytes, hits;
	uint32_t nwriters;           /* tier_wr in flight */
	struct tier_rec *head;       /* published chunks, newest first */
};

/* A chunk being written. Fields marked (mu) are protected by w->mu; the
 * extent fields change under both mu and tier.lock; the rest: tier.lock. */
struct tier_wr {
	struct tier_wr *prev, *next; /* tier.lock: tier.writers */
	pthread_mutex_t mu;          /* serializes pwrite/pread/truncate */
	uint32_t ns;                 /* tier.lock */
	bool keyed;                  /* tier.lock */
	bool has_parent;             /* tier.lock */
	struct kvfs_key key;         /* tier.lock; valid when keyed */
	struct kvfs_key parent;      /* tier.lock */
	uint32_t depth;              /* tier.lock */
	uint64_t size;               /* (mu) bytes written so far */
	uint64_t off, cap;           /* (mu + tier.lock) extent; cap 0 = none */
	bool from_l3;                /* (mu) a promotion from L3: its record
				      * is marked TL3_IN, not written back */
	uint64_t hint;               /* expected size: the first extent's,
				      * once bytes arrive (wr_grow) */
	bool has_sum;                /* (mu) sum set by tier_wr_set_checksum */
	uint64_t sum;
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

/* The engine. (imm) = set by tier_create, read without a lock after it;
 * every other field: tier.lock. */
struct tier {
	pthread_mutex_t lock;        /* tier.lock */
	struct tier_config cfg;      /* (imm) strings point into the copies
				      * below */
	char *policy_name, *l1_spec, *l2_dir; /* (imm) */
	uint64_t l1_cap;             /* (imm) l1_size rounded down to
				      * L1_ALIGN */

	struct gpu_arena arena;      /* (imm); its bytes: see above */
	struct l1_alloc *alloc;      /* tier.lock: free extents */
	const struct policy_ops *pops; /* (imm) */
	struct policy *pol;          /* tier.lock: the policy's state */
	uint64_t cap_items;          /* tier.lock: last capacity given to the
				      * policy */

	struct htab idx;             /* tier.lock: the index, every indexed
				      * record (L1 and L2, all namespaces)
				      * by pi.node, hashed by
				      * hashkey_index(ns, key); idx.n
				      * records */

	struct tier_ns **ns;         /* tier.lock: by id; NULL once removed */
	uint32_t ns_cap, ns_next, ns_count; /* tier.lock */

	struct tier_wr *writers;     /* tier.lock: in flight */
	uint64_t nwriters, writer_bytes; /* tier.lock */
	struct tier_rec *zombies;    /* tier.lock: unlinked while pinned */
	uint64_t nzombies;           /* tier.lock */
	/* Children counts of parent keys that are not indexed (the parent
	 * was never published, or was unlinked / dropped): an indexed
	 * record takes its count over when it is inserted (tier_index.c). */
	struct htab orphans;         /* tier.lock: struct tier_orphan by node */

	uint64_t clock;              /* tier.lock: logical time (policy) */
	uint64_t gen;                /* tier.lock: last publication number */
	uint64_t pinned_bytes;       /* tier.lock: extents of records with
				      * refs > 0 */
	uint64_t l1_bytes, l1_chunks;/* tier.lock: extents / count of indexed
				      * L1 records */
	uint64_t nchunks_handed;     /* tier.lock: struct tier_chunk out */

	uint64_t evictions, publishes, discards; /* tier.lock */
	/* tier_get's reads, by where the chunk came from (enum tier_from),
	 * and its misses; name lookups of absent keys (tier.lock) */
	uint64_t read_hits[TIER_FROM_N], read_misses, name_misses;
	/* chunk bytes published by writers (not L3 promotions), and handed
	 * to readers by tier_get (tier.lock) */
	uint64_t bytes_in, bytes_out;
	uint64_t promotions, demotions; /* tier.lock */

	struct tier_gone *gone;      /* tier.lock: queued on_gone calls */
	size_t ngone, gone_cap;      /* tier.lock */
	struct tier_l2 *l2;          /* (imm) the L2 engine (tier_l2.c), NULL
				      * without l2_dir; its fields: tier.lock */
	struct tier_l3 *l3;          /* (imm) the L3 engine (tier_l3.c), NULL
				      * without l3; see its fields */
	struct tier_ra *ra;          /* (imm) chain readahead
				      * (tier_readahead.c), NULL when off;
				      * its fields: tier.lock */
	char logbuf[256];            /* tier.lock: a log line waiting for
				      * tier_unlock */
	bool events_on;              /* tier.lock: tier_events_start ran */
	struct tier_waitq *wq;       /* (imm) waiters (tier_wait.c); its
				      * fields: wait.mu, after tier.lock */
	struct tier_l3_notify *l3n;  /* (imm) L3 notifications
				      * (tier_l3_notify.c), NULL when off */
};

/* ------------------------------------------- tier.c: logging, locking */

/* Logs through cfg.log; call WITHOUT tier.lock (callbacks never run under
 * it; tier.c queues messages made under the lock until tier_unlock). */
void tier_log(struct tier *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The same with tier.lock held: the message waits in t->logbuf (only the
 * first one if several come) until tier_unlock. */
void tier_log_locked(struct tier *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
uint64_t tier_now_ns(void);
void tier_lock(struct tier *t);
/* Unlocks, then makes the queued on_gone calls. */
void tier_unlock(struct tier *t);
/* ------------------------------------- tier_l3_notify.c (hand-off) */

/* Starts (with L3 and without l3_notify_off) the subscriber that turns
 * other nodes' L3 stores into wake-ups of this node's waiters. 0 or
 * -errno (the mount fails: -ENOMEM, no thread). */
int tier_l3_notify_open(struct tier *t);
/* Before tier_l3_close: stops the subscriber (it uses the L3 client);
 * the L3 writers may still announce what they finish storing. */
void tier_l3_notify_stop(struct tier *t);
/* After tier_l3_close (no writer left): frees it. */
void tier_l3_notify_close(struct tier *t);
/* Announces (ns, key) stored in L3 (the L3 writer thread, after the
 * SET succeeded; no lock held). */
void tier_l3_notify_stored(struct tier *t, const char *ns,
			   const struct kvfs_key *key);
struct l3n_stats;
void tier_l3_notify_stats(struct tier *t, struct l3n_stats *st);
/* tier_l3_store (tier_l3.c) - the L3 store of t (t->l3 not NULL). */
struct l3 *tier_l3_store(struct tier *t);

/* ------------------------------------------------ tier_events.c (events) */

/* Reports r (published, indexed) as stored in or removed from tier
 * `where` to the event sink (cfg.events), when events are on. tier.lock
 * held; never blocks. */
void tier_ev(struct tier *t, const struct tier_rec *r, int kind, int where,
	     int why);
/* The same for a chunk known by key only (L3's events: its record may be
 * gone); nothing when the namespace is. tier.lock held. */
void tier_ev_key(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		 const struct kvfs_key *parent, int kind, int where, int why);
/* A namespace's AllBlocksCleared (tier.lock held). */
void tier_ev_cleared(struct tier *t, const struct tier_ns *ns);
/* A tier change of r: REMOVED(from) then STORED(to). tier.lock held. */
void tier_ev_move(struct tier *t, const struct tier_rec *r, int from, int to,
		  int why);

/* Queues an on_gone call for r, made at tier_unlock (tier.lock held). */
void tier_queue_gone(struct tier *t, const struct tier_rec *r,
		     enum tier_gone_reason why);

/* ------------------------------------------- tier_arena.c */

/* Arena byte access (no lock needed: callers own or pin the extent). */
int tier_arena_write(struct tier *t, uint64_t off, const void *src,
		     size_t len);
int tier_arena_read(struct tier *t, uint64_t off, void *dst, size_t len);
int tier_arena_zero(struct tier *t, uint64_t off, uint64_t len);
int tier_arena_move(struct tier *t, uint64_t dst, uint64_t src, uint64_t len);
int tier_arena_checksum(struct tier *t, uint64_t off, uint64_t len,
			uint64_t *sum);

/* The rest of this header: tier.lock held. */

/* ------------------------------------------- tier_ns.c */
struct tier_ns *tier_ns_get(struct tier *t, uint32_t id);

/* ------------------------------------------- tier_index.c */
struct tier_rec *tier_idx_find(struct tier *t, uint32_t ns,
			       const struct kvfs_key *key);
/* Inserts r (r->pi.hkey set) into the index and its namespace list. */
void tier_idx_insert(struct tier *t, struct tier_ns *ns, struct tier_rec *r);
/* Takes r out of the index and its namespace list; its children's count
 * stays behind as an orphan entry. */
void tier_idx_remove(struct tier *t, struct tier_rec *r);
void tier_count_parent(struct tier *t, struct tier_rec *r);
void tier_uncount_parent(struct tier *t, struct tier_rec *r);
void tier_orphans_free(struct tier *t);

/* ------------------------------------------- tier_read.c */
void tier_ref(struct tier *t, struct tier_rec *r);
void tier_unref(struct tier *t, struct tier_rec *r);
/* r, unlinked from the index but pinned, waits on tier.zombies for its
 * last tier_unref, which frees it. */
void tier_zombie(struct tier *t, struct tier_rec *r);
/* tier_unlink_rec_locked (tier_read.c) - takes published record r out of
 * every tier (tier.lock held): the index, L2 (its erasure queued), L1's
 * bookkeeping; pinned bytes stay with their readers (a zombie). Returns
 * whether the caller must tier_l2_sync_frees once it dropped the lock. */
bool tier_unlink_rec_locked(struct tier *t, struct tier_rec *r);
/* Frees r's L1 extent (if any). */
void tier_free_extent(struct tier *t, struct tier_rec *r);
/* An access at logical time tick (for the policy), wall clock for the
 * xattr; tier_touch ticks the clock. */
void tier_touch_at(struct tier *t, struct tier_rec *r, uint64_t tick);
void tier_touch(struct tier *t, struct tier_rec *r);
void tier_fill_info(const struct tier_rec *r, struct tier_info *info);
/* Records r's parent key and depth (a chunk learns them once). */
void tier_rec_set_parent(struct tier *t, struct tier_rec *r,
			 const struct kvfs_key *parent, uint32_t depth);

/* ------------------------------------------- tier_evict.c */
void tier_policy_capacity(struct tier *t);
int tier_evict_one(struct tier *t);
int tier_alloc_evict(struct tier *t, uint64_t len, uint64_t *off);

/* ------------------------------------------- L2 hooks (tier_l2.c) */

/* tier_create / tier_destroy: open (recovering chunks into the index) and
 * close L2. tier_l2_open returns -EBUSY / -EINVAL (create fails); other L2
 * failures are logged and leave L1 serving alone. */
int tier_l2_open(struct tier *t, char *err, size_t errlen);
void tier_l2_close(struct tier *t);
/* The rest: tier.lock held, no-ops without L2. */
/* The victim r is about to leave L1: true when it stays indexed as an L2
 * chunk (a clean copy exists, or a demotion was queued). */
/* Before evicting need bytes for a writer or a promotion (tier.lock held,
 * released while waiting): waits, at most 5 s, while the copies of evicted
 * chunks waiting for the disk are at half their bound, so writers and
 * readers slow to the disk's pace instead of evictions being dropped. */
void tier_l2_throttle(struct tier *t, uint64_t need);
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
/* What may be promoted ahead of readers (lookup prefetch and readahead
 * together): three quarters of L1, so a run never evicts its own head. */
uint64_t tier_prefetch_bound(const struct tier *t);
/* Bytes of the lookup prefetches queued now. */
uint64_t tier_l2_prefetch_bytes(const struct tier *t);
/* r (L2, just user-pinned) is promoted into L1 if there is room. */
void tier_l2_pin_promote(struct tier *t, struct tier_rec *r);
uint64_t tier_l2_stored(const struct tier_rec *r);
void tier_l2_stats(struct tier *t, struct tier_stats *st);

/* ------------------------------------------- L3 hooks (tier_l3.c) */

/* tier_create / tier_destroy (tier.lock NOT held). tier_l3_open fails
 * tier_create on a bad configuration (-EINVAL, -EACCES); an unreachable
 * server is not a failure. tier_l3_close first sends what is queued. */
int tier_l3_open(struct tier *t, char *err, size_t errlen);
void tier_l3_close(struct tier *t);
/* tier.lock held; no-ops without L3. */
void tier_l3_on_publish(struct tier *t, struct tier_rec *r);
void tier_l3_on_hit(struct tier *t, struct tier_rec *r);
/* r is leaving L1 for space (ingest=evicted copies it to L3). */
void tier_l3_evicting(struct tier *t, struct tier_rec *r);
/* r is being unlinked: its L3 copy is deleted (queued). */
void tier_l3_forget(struct tier *t, struct tier_rec *r);
void tier_l3_stats(struct tier *t, struct tier_stats *st);
/* tier.lock NOT held. */
/* Reads (ns, key) from L3 into L1 (published, TL3_IN) unless it is
 * indexed already: 0 when it is indexed now, -ENOENT (a miss: absent,
 * unreachable, or a bad value, counted and deleted), -ENOMEM. */
int tier_l3_promote(struct tier *t, uint32_t ns, const struct kvfs_key *key);
/* The leading run of keys[0..n) present in L3 (one round trip per
 * node); 0 without L3 or on failure. */
uint32_t tier_l3_run(struct tier *t, uint32_t ns, const struct kvfs_key *keys,
		     uint32_t n);
/* Queues background promotions of keys[0..n) (bounded). */
void tier_l3_prefetch(struct tier *t, uint32_t ns, const struct kvfs_key *keys,
		      uint32_t n);
void tier_l3_store_stats(struct tier *t, struct tier_stats *st);

/* ------------------------------------------- tier_readahead.c */

/* tier_create / tier_destroy (tier.lock NOT held): starts the workers
 * when readahead is on and there is L2 or L3 (0 or -ENOMEM); stops them
 * (before L2 and L3 close). */
int tier_ra_open(struct tier *t);
void tier_ra_close(struct tier *t);
/* The rest: tier.lock held, no-ops when readahead is off. */
/* r (indexed, pinned) was just handed to reader (tier_get_by): follows
 * its stream and queues the window ahead. */
void tier_ra_on_read(struct tier *t, struct tier_rec *r, uint64_t reader);
/* child was published (or stamped) with parent as its parent. */
void tier_ra_link(struct tier *t, uint32_t ns, const struct kvfs_key *parent,
		  const struct kvfs_key *child);
/* r leaves L1 (evicted: counted as wasted when readahead promoted it and
 * nobody read it) or the index. */
void tier_ra_leaving(struct tier *t, const struct tier_rec *r, bool evicted);
/* L1 is full: lets go of every chunk readahead holds for its readers;
 * true when there was one. */
bool tier_ra_unpin_all(struct tier *t);
void tier_ra_stats(struct tier *t, struct tier_stats *st);
uint64_t tier_ra_meta_bytes(struct tier *t);

#endif /* KVFS_TIER_I_H */
