/*
 * ctl_replay.h - what the pieces of `kvfsctl replay` share (private to
 * mount/ctl_replay*.c): the loaded trace and one run's counts.
 */
#ifndef KVFS_CTL_REPLAY_H
#define KVFS_CTL_REPLAY_H

#include <stddef.h>
#include <stdint.h>

struct replay_trace {
	uint64_t *ids;    /* every request's hash_ids, back to back */
	size_t nids, ids_cap;
	size_t *req;      /* request i is ids[req[i] .. req[i + 1]) */
	size_t nreq, req_cap;
	uint64_t unique;  /* distinct ids */
};

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

#endif
