/*
 * events.h - KV events in vLLM's wire format, published over ZeroMQ.
 *
 * A fleet router (llm-d's KV-cache indexer, Dynamo's router...) learns what
 * each node holds from BlockStored / BlockRemoved / AllBlocksCleared events.
 * This module is a sink of the engine's callbacks: ev_post() copies one
 * event into a bounded queue and returns at once (a full queue drops the
 * event and counts it: no FUSE request ever waits on a subscriber); a thread
 * of its own groups queued events into batches per namespace, encodes each
 * batch with msgpack-c (events/ev_encode.c) and sends it on a PUB socket,
 * keeping the last `buffer` batches for replay on a ROUTER socket.
 *
 * Wire format (vLLM's, vllm/distributed/kv_events.py): three frames per
 * message: topic "kv@<node>@<namespace>" (events of L3, the tier every
 * node shares: "kv@SHARED_STORAGE@<namespace>"), the sequence number as 8 bytes
 * big-endian (per publisher, from 0, never reused while it runs), and the
 * msgpack EventBatch [ts (float seconds), [events...], nil].
 * Replay: a client sends [identity, "", start_seq (8 bytes BE)] to the
 * ROUTER; it gets [identity, "", seq, payload] for every buffered batch with
 * seq >= start_seq, then [identity, "", -1 (8 bytes), ""].
 *
 * No globals: two publishers can live in one process. All functions are
 * thread-safe and return 0 or -errno, never set errno.
 */
#ifndef KVFS_EVENTS_H
#define KVFS_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "kvfs.h"

struct ev_pub;

enum ev_kind {
	EV_STORED = 1, /* BlockStored */
	EV_REMOVED,    /* BlockRemoved */
	EV_CLEARED,    /* AllBlocksCleared (of the event's namespace) */
};

/* Where a chunk is (BlockStored) or was (BlockRemoved). The names on the
 * wire are ev_medium_name()'s: "GPU" and "CPU" are vLLM's own; "DISK" (the
 * L2 log on local SSD) and "REMOTE" (a tier shared by nodes) are kvfs's. */
enum ev_medium {
	EV_MEDIUM_GPU = 0, /* L1 in CUDA memory */
	EV_MEDIUM_CPU,     /* L1 in host or pinned host memory */
	EV_MEDIUM_DISK,    /* L2 */
	EV_MEDIUM_REMOTE,  /* L3 */
	EV_MEDIUM_COUNT
};

/* The medium's wire name, or NULL for an out-of-range value. */
const char *ev_medium_name(enum ev_medium m);
/* The medium named name (case-insensitive), or -EINVAL. */
int ev_medium_parse(const char *name);

enum ev_format {
	EV_FORMAT_MAP = 0, /* {"type": "BlockStored", "block_hashes": ...}
			    * (msgspec's tagged structs, vLLM 0.26 and later) */
	EV_FORMAT_ARRAY,   /* ["BlockStored", [hashes], parent, ...]
			    * (array_like tagged unions, older consumers) */
};

enum ev_hash {
	EV_HASH_U64 = 0, /* the key's last 8 bytes, big-endian, as an
			  * unsigned integer (what llm-d reduces hashes to) */
	EV_HASH_BYTES,   /* the 16 key bytes, msgpack bin */
};

/* The node part of the topic of shared-tier events (llm-d's kvevents). */
#define EV_SHARED_NODE "SHARED_STORAGE"

/* One event, as queued. ns is the namespace's name (the topic's last
 * part); for EV_CLEARED only ns matters. */
struct ev_event {
	uint8_t kind;       /* enum ev_kind */
	uint8_t medium;     /* enum ev_medium */
	uint8_t has_parent; /* parent is valid (BlockStored) */
	uint8_t shared;     /* 1: an event of the tier every node reaches
			     * (L3): sent on topic
			     * "kv@" EV_SHARED_NODE "@<namespace>" instead of
			     * the node's own, so a router learns what any
			     * node can fetch (llm-d's shared storage) */
	uint32_t block_size; /* tokens per block (user.kvfs.chunk_tokens) */
	struct kvfs_key key;
	struct kvfs_key parent;
	char ns[KVFS_NS_NAME_MAX + 1];
};

struct ev_config {
	const char *endpoint;        /* PUB: bound when it contains '*' or
				      * "::" or is ipc:// or inproc://,
				      * else connected (vLLM's rule) */
	const char *replay_endpoint; /* ROUTER, always bound; NULL = none */
	const char *node;            /* topic's node part; NULL = host name */
	enum ev_format format;
	enum ev_hash hash;
	uint32_t buffer;    /* batches kept for replay (default 10,000) */
	uint32_t queue;     /* events the queue holds (default 65,536) */
	uint32_t batch_max; /* events per batch at most (default 512) */
	uint32_t flush_ms;  /* the thread's wake-up period (default 2) */
	uint64_t buffer_bytes; /* replay buffer's byte cap (default 64 MiB):
				* the oldest batches go first */
	uint32_t replay_rate;  /* replay requests served per second at most
				* (default 20; more are ignored, counted) */
	uint32_t ipc_mode;     /* mode of ipc:// socket files (default 0600) */
	void (*log)(void *arg, const char *msg);
	void *log_arg;
};

/* Fills cfg with the defaults above (endpoint NULL). */
void ev_config_default(struct ev_config *cfg);

/*
 * ev_pub_create - opens the sockets (binding or connecting as above; ipc
 * socket files get ipc_mode, created under umask 077) and starts the
 * publisher thread. On failure writes a one-line reason naming the
 * endpoint to err and returns -errno: -EINVAL (malformed endpoint, node
 * with '@' or empty), -EADDRINUSE (port taken), -EPROTONOSUPPORT, ...;
 * nothing is left open.
 */
int ev_pub_create(const struct ev_config *cfg, struct ev_pub **out,
		  char *err, size_t errlen);

/*
 * ev_pub_destroy - publishes what is still queued, closes the sockets
 * (waiting at most 500 ms for queued messages to leave) and frees p.
 * NULL is a no-op.
 */
void ev_pub_destroy(struct ev_pub *p);

/*
 * ev_post - queues a copy of e. Never blocks on the network or on the
 * publisher thread (only on a short mutex held for a copy), so it may be
 * called with engine locks held. 0, or -EAGAIN when the queue is full (the
 * event is dropped and counted in ev_stats.dropped), -EINVAL for a bad
 * kind or medium.
 */
int ev_post(struct ev_pub *p, const struct ev_event *e);

/*
 * ev_post_wait - ev_post, but waits (up to timeout_ms) for room in the
 * queue instead of dropping: for announcing what a node holds at mount,
 * before any request can be waiting. -EAGAIN (dropped, counted) after the
 * timeout.
 */
int ev_post_wait(struct ev_pub *p, const struct ev_event *e,
		 uint32_t timeout_ms);

/* ev_flush - waits until every event posted before the call has been sent
 * (for tests and clean shutdown), at most timeout_ms. 0 or -ETIMEDOUT. */
int ev_flush(struct ev_pub *p, uint32_t timeout_ms);

struct ev_stats {
	uint64_t published;       /* events sent */
	uint64_t dropped;         /* events dropped: queue full */
	uint64_t batches;         /* batches (messages) sent */
	uint64_t next_seq;        /* the next batch's sequence number */
	uint64_t queued;          /* events waiting now */
	uint64_t replay_requests; /* well-formed replay requests served */
	uint64_t replay_batches;  /* batches re-sent by replay */
	uint64_t replay_bad;      /* malformed replay requests ignored */
	uint64_t replay_limited;  /* requests ignored over replay_rate */
	uint64_t buffered;        /* batches in the replay buffer now */
};
void ev_stats(struct ev_pub *p, struct ev_stats *st);

/* The endpoints actually bound (ZMQ_LAST_ENDPOINT: a "tcp://...:*" gets
 * its port), or the connected endpoint; replay "" when none. */
const char *ev_pub_endpoint(const struct ev_pub *p);
const char *ev_pub_replay_endpoint(const struct ev_pub *p);
const char *ev_pub_node(const struct ev_pub *p);

#endif /* KVFS_EVENTS_H */
