/*
 * ctl_replay.h - what the pieces of `kvfsctl replay` share (private to
 * mount/ctl_replay*.c): the loaded trace and one run's counts.
 */
#ifndef KVFS_CTL_REPLAY_H
#define KVFS_CTL_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct replay_trace {
	uint64_t *ids;    /* every request's hash_ids, back to back */
	size_t nids, ids_cap;
	size_t *req;      /* request i is ids[req[i] .. req[i + 1]) */
	size_t nreq, req_cap;
	uint64_t unique;  /* distinct ids */
	uint64_t *uids;   /* the distinct ids, sorted (unique of them) */
	uint32_t *dense;  /* per position: its id's index in uids */
};

/* replay_dense_of (ctl_replay.c) - id's index in tr->uids, SIZE_MAX when
 * the trace does not hold it. */
size_t replay_dense_of(const struct replay_trace *tr, uint64_t id);

struct replay_result {
	uint64_t blocks;      /* blocks requested */
	uint64_t hits;        /* found in any tier */
	uint64_t prefix_hits; /* found, in the leading run of the request */
	uint64_t l2_hits;     /* of hits, found in L2 (two-tier runs) */
	uint64_t l2_writes;   /* chunks written to L2 (two-tier runs) */
	uint64_t evictions, cached;
	double secs;
};

/*
 * replay_belady (ctl_replay_belady.c) - the offline optimum on tr with room
 * for capacity blocks: on a miss, the block whose next use (in a later
 * request) is farthest leaves, the incoming block included (so a block
 * never used again is never admitted into a full cache). Lookups and
 * inserts are ordered as in the engine replay: a request's blocks are
 * looked up first, then its misses inserted. Fills res (evictions counts
 * blocks dropped or not admitted). 0 or -ENOMEM.
 */
int replay_belady(const struct replay_trace *tr, uint64_t capacity,
		  struct replay_result *res);

/*
 * The L2 model of a two-tier replay (ctl_replay_l2.c). L1 is the real
 * engine; what leaves it (on_gone) is offered to this model of L2: a FIFO
 * log of `capacity` blocks (the engine's l2_policy=fifo: segments are
 * reclaimed oldest first), admitting as the engine's ingest= modes do:
 *   evicted  every L1 victim without a copy in L2;
 *   hot      victims hit at least REPLAY_HOT_HITS times in L1 (hot_hits);
 *   twice    victims hit in L1, or whose key was published before
 *            (tier/policy/seen.h's seen2, as tier_l2.c does);
 *   all      every published block, when published.
 * A read that misses L1 and finds the block in L2 is an L2 hit (the caller
 * then publishes it into L1, as a promotion does; the L2 copy stays).
 * Blocks are the trace's dense indexes.
 */
enum replay_ingest {
	REPLAY_INGEST_EVICTED,
	REPLAY_INGEST_HOT,
	REPLAY_INGEST_TWICE,
	REPLAY_INGEST_ALL,
	REPLAY_INGEST_NMODES,
};
#define REPLAY_HOT_HITS 2 /* tier_config_default's hot_hits */

struct replay_l2;

/* Parses an ingest mode name; -EINVAL if unknown. */
int replay_ingest_parse(const char *s, enum replay_ingest *out);
const char *replay_ingest_name(enum replay_ingest m);
/* 0 or -ENOMEM. */
int replay_l2_create(struct replay_l2 **out, uint64_t capacity,
		     enum replay_ingest mode, size_t nblocks);
void replay_l2_destroy(struct replay_l2 *m);
/* An L1 miss on block u: true when L2 has it (counted as an L2 hit). */
bool replay_l2_read(struct replay_l2 *m, uint32_t u);
/* Block u was published into L1 (a miss refilled, or a promotion). */
void replay_l2_published(struct replay_l2 *m, uint32_t u);
/* A hit on block u in L1. */
void replay_l2_l1_hit(struct replay_l2 *m, uint32_t u);
/* Block u left L1 (evicted). */
void replay_l2_evicted(struct replay_l2 *m, uint32_t u);
/* L2 hits and blocks written so far. */
void replay_l2_counts(const struct replay_l2 *m, uint64_t *hits,
		      uint64_t *writes);

#endif
