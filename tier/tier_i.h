/*
 * tier_i.h - private to tier/: the engine's structures, its lock order and
 * who owns what. fs/ and tests use tier.h only.
 *
 * Where things are (one concern per file), top down; a file calls only
 * those below it (tests/layers/filegraph.py checks it):
 *   tier.c         life cycle (config, create/destroy): calls the rest
 *   tier_l2.c, tier_l2_demote.c, tier_l2_promote.c, tier_l3.c
 *                  the engine's side of the stores: open/close, recovery
 *                  into the index, demotion, promotion and prefetch
 *                  (tier_l2_i.h), L3 ingest and promotion; they call the
 *                  core below, and the core calls them only through
 *                  struct tier_l2_ops / tier_l3_ops (the hooks). The
 *                  stores themselves: tier/l2/ (l2_i.h), tier/l3/ (l3.h)
 *   tier_lookup.c  batched lookup of prefix chains, key pins
 *   tier_readahead.c  chain readahead: per-reader windows along parent
 *                  links and learned read order, promoted from L2/L3 by
 *                  its workers (its fields: tier.lock)
 *   tier_xfer.c, tier_wr.c  writers: a chunk being written, then published
 *   tier_read.c    reads/changes of one chunk (stat, checksum, get/put,
 *                  unlink, user pin, parent)
 *   tier_evict.c   victim choice (through the policy) and eviction driving
 *   tier_stats.c   counters and memory use
 *   tier_ns.c      namespaces, and the snapshot readdir lists
 *   tier_l2_rec.c  records of chunks in L2 (shuffle, stored size, drop)
 *   tier_events.c  the event sink (tier_events.h): a call per tier change
 *   tier_arena.c   bytes in the L1 arena (write/read/zero/move/checksum,
 *                  export for zero-copy maps)
 *   tier_index.c   the chunk index (struct htab), parent/orphan counts,
 *                  namespaces by id
 *   tier_rec.c     a record's pins and the zombie list
 *   tier_lock.c    tier.lock, logging, the clock, the on_gone calls
 *                  queued under the lock
 *   l1_alloc.c     extents of the arena; lease.c leases;
 *   tier/policy/   victim order (policy.c's table, one file per policy)
 *   tier/record/   the on-disk record format (record.h) and its codec
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
#define TL3_REDO 4   /* with TL3_QUEUED: its attributes changed since the
		      * write was queued: written again once it is done */
#define TL3_STALE 8  /* with TL3_QUEUED: L3 may hold a copy with older
		      * attributes, deleted if this write fails */
#define TL3_SENDING 16 /* with TL3_IN: a copy of its bytes is queued, not
			* yet stored (never dropped for another node's
			* version: tier_l3_notify.c) */

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
	/* evict=never (tier_ns_set_keep): chunks leave only by unlink; the
	 * bytes published (bytes) plus charged to writers (wbytes) stay
	 * within quota, or writes get -ENOSPC */
	bool keep;
	uint64_t quota, wbytes;
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
	uint64_t l3_forgets;         /* (mu) from_l3: the key's unlink count
				      * (tier_l3_stale) before its GET */
	uint64_t hint;               /* expected size: the first extent's,
				      * once bytes arrive (wr_grow) */
	bool keep;                   /* tier.lock: its namespace is evict=
				      * never (set at begin): quota applies */
	uint64_t charged;            /* (mu + tier.lock): bytes charged to the
				      * namespace's quota (tier_ns.wbytes) */
	bool has_sum;                /* (mu) sum set by tier_wr_set_checksum */
	uint64_t sum;
	bool failed;                 /* (mu) tier_wr_fail: no extent, -EIO */
	uint64_t seq;                /* tier.lock: begin order (room_wait) */
	bool waiting;                /* tier.lock: in room_wait */
	bool closed;                 /* tier.lock: its owner closed it
				      * (tier_wr_closed) */
};

/* What tier_get hands out: a pin on a record, plus where its bytes are. */
struct tier_chunk {
	struct tier_rec *rec;
	const void *ptr;     /* host address of the bytes, or NULL */
	uint64_t off;        /* arena offset */
	uint64_t size, gen;
	void *tmp;           /* temporary buffer (L2 reads), or NULL */
	bool nobytes;        /* TIER_GET_NOFILL of a chunk not in L1 */
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
	const struct tier_l2_ops *l2ops; /* (imm) set by tier_l2_open */
	const struct tier_l3_ops *l3ops; /* (imm) set by tier_l3_open */
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
	/* Writers waiting for room in L1 (tier_wr_pwrite_wait) sleep on
	 * room, broadcast by tier_room_made: an extent freed, a pin
	 * dropped, a writer published or gone (tier.lock). room_sleepers:
	 * all of them; room_waiters: those holding L1 already */
	pthread_cond_t room;         /* CLOCK_MONOTONIC */
	uint64_t room_sleepers, room_waiters; /* tier.lock */
	uint64_t room_waits, room_timeouts; /* tier.lock */
	uint64_t wr_seq;             /* tier.lock: last tier_wr.seq */
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
	/* chunk bytes published by writers (not L3 promotions) (tier.lock),
	 * and served to readers (atomic: tier_count_served) */
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
	void *ra_saved;              /* tier.lock: the learned read order
				      * while readahead is not running (from
				      * the L2 checkpoint, for the next one;
				      * tier_ra_save's layout), or NULL */
	size_t ra_saved_len;         /* tier.lock */
	uint32_t ra_saved_count;     /* tier.lock */
	/* tier.lock: the chunks L2's recovery found by scanning (written
	 * after its checkpoint: a crash lost their order of writing with
	 * the checkpoint it never wrote), in log order, for readahead's
	 * open to learn that order again (with ingest=all log order is the
	 * order of publication; otherwise that of fsyncs and evictions,
	 * the best order of time that survived); freed there */
	struct tier_ra_scanned {
		uint32_t ns;
		struct kvfs_key key;
	} *ra_scanned;
	size_t ra_scanned_n, ra_scanned_cap; /* tier.lock */
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
int tier_l3_notify_open(struct tier *t, struct l3 *store);
/* Before tier_l3_close: stops the subscriber (it uses the L3 client);
 * the L3 writers may still announce what they finish storing. */
void tier_l3_notify_stop(struct tier *t);
/* After tier_l3_close (no writer left): frees it. */
void tier_l3_notify_close(struct tier *t);
/* Announces (ns, key) stored in L3 (the L3 writer thread, after the
 * SET succeeded; no lock held), with the raw checksum of the version
 * stored for a file of a path namespace (sum), NULL for a key chunk. */
void tier_l3_notify_stored(struct tier *t, const char *ns,
			   const struct kvfs_key *key, const uint64_t *sum);
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
/* The namespace named name, or NULL. */
struct tier_ns *tier_ns_by_name(struct tier *t, const char *name);

/* ------------------------------------------- tier_index.c */
struct tier_rec *tier_idx_find(struct tier *t, uint32_t ns,
			       const struct kvfs_key *key);
/* tier_idx_find with the key's hashkey_index(ns, key) already in h
 * (inline: a batched lookup's inner loop). */
static inline struct tier_rec *tier_idx_find_h(struct tier *t, uint32_t ns,
					       const struct kvfs_key *key,
					       uint64_t h)
{
	struct htab_node *e;

	htab_for_each_hash(&t->idx, h, e) {
		struct tier_rec *r = idx_rec(e);

		if (r->ns == ns && tier_key_eq(&r->key, key))
			return r;
	}
	return NULL;
}
/* Keys a batched lookup hashes and prefetches at a time. */
#define TIER_IDX_AHEAD 16
/* Prefetches the buckets and first records of n <= TIER_IDX_AHEAD index
 * hashes (hints only), for tier_idx_find_h. */
void tier_idx_prefetch_h(struct tier *t, const uint64_t *h, uint32_t n);
/* A lookup run's pipeline (tier_lookup.c), one key at a time: the bucket
 * of hash h prefetched (stage 1), then, some keys later, read and its
 * first record's lines prefetched (stage 2); hints only. */
static inline void tier_idx_prefetch_bucket(struct tier *t, uint64_t h)
{
	if (t->idx.nb)
		__builtin_prefetch(&t->idx.b[h & (t->idx.nb - 1)]);
}

static inline void tier_idx_prefetch_rec(struct tier *t, uint64_t h)
{
	struct htab_node *e = htab_first(&t->idx, h);

	if (e) {
		__builtin_prefetch(e);
		__builtin_prefetch(&idx_rec(e)->key);
		__builtin_prefetch(&idx_rec(e)->ns);
	}
}
struct lease_pin;
/* tier_unpin_gen of pins[0..n) (tier_lookup.c): the engine lock taken
 * once per run of them and their index misses overlapped, as a lookup
 * takes them (lease.c gives a lease's pins back so). */
void tier_unpin_pins(struct tier *t, const struct lease_pin *pins, size_t n);
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
/* tier_drop_rec_locked (tier_read.c) - the same, but L3 is left alone (no
 * deletion, no tombstone) and on_gone is queued as for an eviction: this
 * node lets go of its copy (another node stored a newer version in L3). */
bool tier_drop_rec_locked(struct tier *t, struct tier_rec *r);
/* Frees r's L1 extent (if any). */
void tier_free_extent(struct tier *t, struct tier_rec *r);
/* Room may have been made in L1: wakes writers waiting for it. */
static inline void tier_room_made(struct tier *t)
{
	if (t->room_sleepers)
		pthread_cond_broadcast(&t->room);
}
/* An access at logical time tick (for the policy), wall clock now_ns
 * (tier_now_ns: one read serves a batch) for the xattr; tier_touch ticks
 * the clock. */
void tier_touch_at(struct tier *t, struct tier_rec *r, uint64_t tick,
		   uint64_t now_ns);
void tier_touch(struct tier *t, struct tier_rec *r);
void tier_fill_info(const struct tier_rec *r, struct tier_info *info);
/* Records r's parent key and depth (a chunk learns them once). */
void tier_rec_set_parent(struct tier *t, struct tier_rec *r,
			 const struct kvfs_key *parent, uint32_t depth);

/* ------------------------------------------- tier_evict.c */
void tier_policy_capacity(struct tier *t);
int tier_evict_one(struct tier *t);
int tier_alloc_evict(struct tier *t, uint64_t len, uint64_t *off);

/* ------------------------------------------- the stores below L1
 *
 * The core (tier_read.c, tier_wr.c, tier_evict.c, tier_readahead.c,
 * tier_lookup.c, tier_stats.c) calls L2 and L3 through the tier_l2_* and
 * tier_l3_* hooks below: each calls the store's struct of operations,
 * tier_l2_hooks (tier_l2.c) and tier_l3_hooks (tier_l3.c), which
 * tier_create puts in t->l2ops / t->l3ops before it opens the stores
 * (each operation does nothing while its store is not open). The stores'
 * files call the core back for what a promotion needs (tier_wr_*,
 * tier_alloc_evict...). So the core never names a store's file, and a
 * store's file calls down only: a store below L3 is one more struct. The
 * contract of each operation is written at its hook below.
 */
struct tier_chunk;
struct tier_l2_ops {
	bool (*evicting)(struct tier *t, struct tier_rec *r);
	void (*throttle)(struct tier *t, uint64_t need);
	int (*fill)(struct tier *t, struct tier_rec *r, struct tier_chunk *c);
	void (*on_publish)(struct tier *t, struct tier_rec *r);
	void (*on_hit)(struct tier *t, struct tier_rec *r);
	bool (*forget)(struct tier *t, struct tier_rec *r);
	bool (*wait_write)(struct tier *t, struct tier_rec *r);
	void (*sync_frees)(struct tier *t);
	int (*sync)(struct tier *t, uint32_t ns, const struct kvfs_key *key);
	void (*prefetch)(struct tier *t, struct tier_rec *r);
	uint64_t (*prefetch_bytes)(const struct tier *t);
	void (*pin_promote)(struct tier *t, struct tier_rec *r);
	void (*stats)(struct tier *t, struct tier_stats *st);
	uint64_t (*capacity)(struct tier *t);
	bool (*full)(struct tier *t, uint64_t need);
	void (*order_changed)(struct tier *t);
	void (*ahead_thread)(void);
	void (*link_learned)(struct tier *t, struct tier_rec *r);
};
struct tier_l3_ops {
	void (*on_publish)(struct tier *t, struct tier_rec *r);
	void (*on_hit)(struct tier *t, struct tier_rec *r);
	void (*evicting)(struct tier *t, struct tier_rec *r);
	void (*forget)(struct tier *t, struct tier_rec *r);
	bool (*stale)(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		      uint64_t forgets);
	int (*promote)(struct tier *t, uint32_t ns, const struct kvfs_key *key);
	uint32_t (*run)(struct tier *t, uint32_t ns, const struct kvfs_key *keys,
			uint32_t n);
	void (*prefetch)(struct tier *t, uint32_t ns,
			 const struct kvfs_key *keys, uint32_t n);
	void (*stats)(struct tier *t, struct tier_stats *st);
	void (*store_stats)(struct tier *t, struct tier_stats *st);
};
extern const struct tier_l2_ops tier_l2_hooks;
extern const struct tier_l3_ops tier_l3_hooks;

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
#define tier_l2_throttle(t, need) \
	((t)->l2ops->throttle(t, need))
#define tier_l2_evicting(t, r) \
	((t)->l2ops->evicting(t, r))
/* Makes the pinned L2 chunk r readable through c (promotion, or a
 * temporary buffer); drops and retakes tier.lock. 0 or -errno. */
#define tier_l2_fill(t, r, c) \
	((t)->l2ops->fill(t, r, c))
#define tier_l2_on_publish(t, r) \
	((t)->l2ops->on_publish(t, r))
#define tier_l2_on_hit(t, r) \
	((t)->l2ops->on_hit(t, r))
/* The calling thread promotes ahead of readers, with others doing the
 * same: its L2 reads decode on it alone (l2_read_alone). */
#define tier_l2_ahead_thread(t) \
	((t)->l2ops->ahead_thread())
/* Readahead's learned order changed: the periodic checkpoint keeps it. */
#define tier_l2_order_changed(t) \
	((t)->l2ops->order_changed(t))
/* r learned its parent or depth after its L2 record was written (a
 * batched lookup stamped it): the record's entry takes it, so the
 * checkpoint keeps it across a restart (item 3 of issue 26). */
#define tier_l2_link_learned(t, r) \
	((t)->l2ops->link_learned(t, r))
/* r is being unlinked: frees its L2 record; true when there was one (then
 * call tier_l2_sync_frees after dropping tier.lock). */
#define tier_l2_forget(t, r) \
	((t)->l2ops->forget(t, r))
/* An unlink of r: an L2 write of r still queued is cancelled (false);
 * one being written is waited for (bounded, dropping tier.lock) so the
 * unlink can erase what it wrote: true (r may have changed or gone: look
 * it up again). */
#define tier_l2_wait_write(t, r) \
	((t)->l2ops->wait_write(t, r))
/* tier.lock NOT held: waits until the L2 records freed so far are erased
 * on disk (bounded), so a daemon killed next does not recover them. */
#define tier_l2_sync_frees(t) \
	((t)->l2ops->sync_frees(t))
/* tier.lock NOT held: tier_sync's work (tier.h). */
#define tier_l2_sync(t, ns, key) \
	((t)->l2ops->sync(t, ns, key))
#define tier_l2_prefetch(t, r) \
	((t)->l2ops->prefetch(t, r))
/* What may be promoted ahead of readers (lookup prefetch and readahead
 * together): three quarters of L1, so a run never evicts its own head. */
static inline uint64_t tier_prefetch_bound(const struct tier *t)
{
	return t->l1_cap / 4 * 3;
}
/* Bytes of the lookup prefetches queued now. */
#define tier_l2_prefetch_bytes(t) \
	((t)->l2ops->prefetch_bytes(t))
/* r (L2, just user-pinned) is promoted into L1 if there is room. */
#define tier_l2_pin_promote(t, r) \
	((t)->l2ops->pin_promote(t, r))
uint64_t tier_l2_stored(const struct tier_rec *r);
#define tier_l2_stats(t, st) \
	((t)->l2ops->stats(t, st))
/* L2's capacity now, 0 without L2 (or with L2 disabled). */
#define tier_l2_capacity(t) \
	((t)->l2ops->capacity(t))
/* Whether L2 is full: need more bytes written to it now would make its
 * reclaim drop live chunks (false without L2). */
#define tier_l2_full(t, need) \
	((t)->l2ops->full(t, need))

/* ------------------------------------------- L3 hooks (tier_l3.c) */

/* tier_create / tier_destroy (tier.lock NOT held). tier_l3_open fails
 * tier_create on a bad configuration (-EINVAL, -EACCES); an unreachable
 * server is not a failure. tier_l3_close first sends what is queued. */
int tier_l3_open(struct tier *t, char *err, size_t errlen);
void tier_l3_close(struct tier *t);
/* tier.lock held; no-ops without L3. */
#define tier_l3_on_publish(t, r) \
	((t)->l3ops->on_publish(t, r))
#define tier_l3_on_hit(t, r) \
	((t)->l3ops->on_hit(t, r))
/* r is leaving L1 for space (ingest=evicted copies it to L3). */
#define tier_l3_evicting(t, r) \
	((t)->l3ops->evicting(t, r))
/* r is being unlinked: its L3 copy is deleted (queued), and the key is
 * tombstoned here until L3 confirms it. */
#define tier_l3_forget(t, r) \
	((t)->l3ops->forget(t, r))
/* (ns, key) was unlinked here and L3 has not confirmed its deletion yet:
 * L3's copy must not be served (tier.lock held). */
/* A value of (ns, key) read from L3 when the key's unlink count was
 * forgets: stale if the key is tombstoned, or an unlink of a key of its
 * bucket came since (its deletion may be confirmed already): refused,
 * a miss (tier.lock held). */
#define tier_l3_stale(t, ns, key, forgets) \
	((t)->l3ops->stale(t, ns, key, forgets))
#define tier_l3_stats(t, st) \
	((t)->l3ops->stats(t, st))
/* tier.lock NOT held. */
/* Reads (ns, key) from L3 into L1 (published, TL3_IN) unless it is
 * indexed already: 0 when it is indexed now, -ENOENT (a miss: absent,
 * unreachable, or a bad value, counted and deleted), -ENOMEM. */
#define tier_l3_promote(t, ns, key) \
	((t)->l3ops->promote(t, ns, key))
/* The leading run of keys[0..n) present in L3 (one round trip per
 * node); 0 without L3 or on failure. */
#define tier_l3_run(t, ns, keys, n) \
	((t)->l3ops->run(t, ns, keys, n))
/* Queues background promotions of keys[0..n) (bounded). */
#define tier_l3_prefetch(t, ns, keys, n) \
	((t)->l3ops->prefetch(t, ns, keys, n))
#define tier_l3_store_stats(t, st) \
	((t)->l3ops->store_stats(t, st))

/* ------------------------------------------- tier_readahead.c */

/* tier_create / tier_destroy (tier.lock NOT held): starts the workers
 * when readahead is on and there is L2 or L3 (0 or -ENOMEM); stops them
 * (before L2 and L3 close). */
int tier_ra_open(struct tier *t);
void tier_ra_close(struct tier *t);
/* The rest: tier.lock held, no-ops when readahead is off. */
/* r (indexed, pinned) was just handed to reader (tier_get_by): follows
 * its stream and queues the window ahead. */
void tier_ra_on_read(struct tier *t, struct tier_rec *r, uint64_t reader,
		     bool shadowed);
/* child was published (or stamped) with parent as its parent. */
void tier_ra_link(struct tier *t, uint32_t ns, const struct kvfs_key *parent,
		  const struct kvfs_key *child);
/* r (indexed) was just published by a writer (not promoted from L3): an
 * unlinked r is the successor of the chunk published before it in its
 * namespace, until a reader reads otherwise. */
void tier_ra_published(struct tier *t, const struct tier_rec *r);
/* r leaves L1 (evicted: counted as wasted when readahead promoted it and
 * nobody read it) or the index. */
void tier_ra_leaving(struct tier *t, const struct tier_rec *r, bool evicted);
/* L1 is full: lets go of every chunk readahead holds for its readers;
 * true when there was one. */
bool tier_ra_unpin_all(struct tier *t);
void tier_ra_stats(struct tier *t, struct tier_stats *st);
uint64_t tier_ra_meta_bytes(struct tier *t);
/* The learned read order (the successor table) as a malloc'ed blob of
 * *len bytes, *count entries, for the L2 checkpoint (record.h,
 * KVCKPT_ORDER), or NULL (none, no memory). */
void *tier_ra_save(struct tier *t, size_t *len, uint32_t *count);
/* Takes such a blob back (entries of unknown namespaces, or that do not
 * parse, are skipped: it is a hint, never trusted for bytes). */
void tier_ra_load(struct tier *t, const void *blob, size_t len);

#endif /* KVFS_TIER_I_H */
