/*
 * tier_l2_i.h - private to tier_l2*.c: the engine's L2 state (struct
 * tier_l2, demotion jobs, prefetch requests) and what a record's r->l2
 * holds.
 *
 * Files:
 *   tier_l2.c          hooks the engine calls, the log's callbacks
 *                      (recovery into the index, reclaim), open/close
 *   tier_l2_demote.c   demotion and ingestion: jobs, the demoter thread
 *   tier_l2_promote.c  promotion (tier_l2_fill) and prefetch
 *
 * A published chunk (struct tier_rec) and L2:
 *   where == L1, no flag          only in L1;
 *   where == L1, TREC_L2          in L1 with a valid L2 copy at r->l2;
 *   where == L2, TREC_L2          only in L2 (r->l2 is its location);
 *   TREC_L2W                      an L2 write is in flight: r->l2 holds the
 *                                 job (struct tl2_job *), the job pins r;
 *                                 with where == L2 (a demotion) the job
 *                                 holds the only copy of the bytes, and
 *                                 readers copy from it;
 *   TREC_PROMO                    a promotion is reading it (others wait).
 *
 * Threads: a demoter (compresses and appends, outside tier.lock) and
 * prefetchers (promote what tier_lookup asked for). They wait on
 * tier_l2.cond with tier.lock. The log's callbacks run on its threads
 * without its locks and take tier.lock (order: tier.lock -> l2 locks).
 * Everything here is protected by tier.lock unless marked.
 */
#ifndef KVFS_TIER_L2_I_H
#define KVFS_TIER_L2_I_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "tier/policy/seen.h"
#include "tier/l2/l2.h"
#include "tier/tier_i.h"

#define TL2_MAX_PREFETCH 4096
/* Promotions ahead of readers run two at a time: one reads the disk while
 * the other decodes. */
#define TL2_PREFETCHERS 2

struct tl2_job {
	struct tl2_job *next;
	struct tier *t;
	struct tier_rec *r;   /* pinned by the job */
	void *raw;            /* the bytes of an evicted chunk, or NULL: read
			       * them from r's (pinned) L1 extent */
	uint64_t size;
	char ns[KVFS_NS_NAME_MAX + 1];
	struct kvfs_key key;
	int shuffle;
	bool has_parent;      /* the chain link the record keeps (taken */
	uint32_t depth;       /* from r when the demoter builds it) */
	struct kvfs_key parent;
	struct tl2_sync *sw;  /* tier.lock: the fsync that made this job
			       * and waits for it (tl2_sync), or NULL */
	unsigned readers;     /* tier.lock: promotions copying raw */
	bool finished;        /* tier.lock */
};

/* An fsync waiting for its own L2 write (tier_l2_demote.c, tl2_sync). */
struct tl2_sync {
	bool done; /* tier.lock */
	int err;   /* tier.lock: the write's outcome once done */
};

struct tl2_pf {
	struct tl2_pf *next;
	uint32_t ns;
	struct kvfs_key key;
	uint64_t size;
};

struct tier_l2 {
	struct l2 *l2;         /* NULL when L2 failed to open (disabled) */
	pthread_cond_t cond;   /* with tier.lock: queues, promotions */
	struct tl2_job *head, *tail;  /* tier.lock: demoter queue */
	struct tl2_pf *pf_head, *pf_tail; /* tier.lock: prefetch queue */
	uint64_t npf;          /* tier.lock */
	uint64_t pf_bytes;     /* tier.lock: bytes of the queued prefetches */
	uint64_t raw_queued;   /* tier.lock: bytes of job copies */
	uint64_t raw_max;      /* bound of raw_queued (tier_l2.c, queue_cap) */
	uint64_t l1_queued;    /* tier.lock: L1 bytes pinned by ingest jobs */
	uint64_t errors;       /* tier.lock: open failure, dropped demotions */
	uint64_t sync_writes;  /* tier.lock: L2 writes an fsync made */
	uint64_t size;         /* l2_size as opened (its capacity until the
				* disk under it fills) */
	bool stop;             /* tier.lock */
	bool rescan;           /* tier.lock: ingest=all skipped a chunk */
	bool threads;
	pthread_t demoter, prefetcher[TL2_PREFETCHERS];
	int level;
	uint32_t hot_hits;
	struct seen2 seen;     /* tier.lock: ingest=twice's memory of keys */
};

/* What r->l2 holds when TREC_L2 is set. */
struct tl2_loc {
	struct l2_loc loc;
	uint32_t stored; /* payload bytes (user.kvfs.stored_bytes) */
};
_Static_assert(sizeof(struct tl2_loc) <= sizeof(struct tier_l2loc),
	       "tier_l2loc too small");
_Static_assert(sizeof(struct tl2_job *) <= sizeof(struct tier_l2loc),
	       "tier_l2loc too small");

static inline void loc_get(const struct tier_rec *r, struct tl2_loc *l)
{
	memcpy(l, r->l2.b, sizeof(*l));
}

static inline void loc_set(struct tier_rec *r, const struct l2_loc *loc,
		    uint64_t stored)
{
	struct tl2_loc l = { .loc = *loc, .stored = (uint32_t)stored };

	memset(r->l2.b, 0, sizeof(r->l2.b));
	memcpy(r->l2.b, &l, sizeof(l));
}

static inline struct tl2_job *job_of(const struct tier_rec *r)
{
	struct tl2_job *j;

	memcpy(&j, r->l2.b, sizeof(j));
	return j;
}

static inline void job_set(struct tier_rec *r, struct tl2_job *j)
{
	memset(r->l2.b, 0, sizeof(r->l2.b));
	memcpy(r->l2.b, &j, sizeof(j));
}

static inline bool rec_loc_is(const struct tier_rec *r, const struct l2_loc *loc)
{
	struct tl2_loc l;

	if (!(r->flags & TREC_L2))
		return false;
	loc_get(r, &l);
	return l2_loc_eq(&l.loc, loc);
}

/* tier_l2_rec.c */
/* The namespace's shuffle: the mount's default until user.kvfs.dtype
 * sets it. */
int tl2_ns_shuffle(struct tier *t, const struct tier_rec *r);
/* r's namespace is evict=never: never dropped from L2 for space. */
bool tl2_keeps(struct tier *t, const struct tier_rec *r);
/* Takes an L2-only chunk out of the engine (out of the index, on_gone
 * queued; a pinned one becomes a zombie). */
void tl2_drop_l2_only(struct tier *t, struct tier_rec *r,
		      enum tier_gone_reason why);

/* tier_l2_demote.c */
/* Queues an L2 write of r: raw is a copy of an evicted chunk's bytes
 * (the job owns it), or NULL to read r's pinned L1 extent. 0 or -errno. */
int tl2_queue_write(struct tier *t, struct tier_rec *r, void *raw);
/* Takes job off the demoter's queue (tier.lock held): false when it is
 * not there (the demoter, or an fsync, is writing it). */
bool tl2_queue_take(struct tier_l2 *t2, struct tl2_job *job);
/* ingest=all: queues the L1 chunks without an L2 copy, up to the bound. */
void tl2_rescan(struct tier *t);
void *tl2_demoter_main(void *arg);
/* tier_sync's work (tier.lock NOT held): see tier_sync in tier.h. */
int tl2_sync(struct tier *t, uint32_t ns, const struct kvfs_key *key);

/* tier_l2_promote.c: the prefetcher thread, and the promotion hooks (contracts: tier_l2_fill,
 * tier_l2_pin_promote, tier_l2_prefetch, tier_l2_prefetch_bytes in
 * tier_i.h), called through tier_l2.c's struct tier_l2_ops. */
int tl2_fill(struct tier *t, struct tier_rec *r, struct tier_chunk *c);
void tl2_pin_promote(struct tier *t, struct tier_rec *r);
void tl2_prefetch(struct tier *t, struct tier_rec *r);
uint64_t tl2_prefetch_bytes(const struct tier *t);
void *tl2_prefetcher_main(void *arg);

#endif /* KVFS_TIER_L2_I_H */
