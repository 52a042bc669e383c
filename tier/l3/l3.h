/*
 * l3.h - the L3 store: chunks kept in Redis (standalone or Redis Cluster)
 * and shared by every kvfs node configured with the same servers, prefix
 * and password.
 *
 * Keys: "<prefix><namespace name>:<32 lowercase hex of the chunk key>",
 * e.g. "kvfs:llama3-8b.bf16.tp2.r0:00112233445566778899aabbccddeeff".
 * No hash tag is added: the keys of one namespace spread over every slot
 * of a cluster. A prefix or name holding a '{' would act as a hash tag
 * (every chunk of the namespace in one slot): such keys start with an
 * empty tag "{}", which makes Redis hash the whole key.
 * Values are opaque here: the engine stores self-checking records in them
 * and checks what it reads (a value from L3 is never trusted).
 *
 * Reads (l3_get, l3_exists) run on the caller's thread and are bounded by
 * l3_timeout_ms without progress and by l3_timeout_ms plus the transfer of
 * max_chunk at L3_MIN_RATE in all. Writes and deletions are queued and
 * sent by writer threads of their own (a chunk's operations stay in
 * order): a caller never waits for the network; a full queue drops the
 * write and counts it. The writers have their own bound,
 * l3_write_timeout_ms (nobody waits on them: a loaded server is given
 * time), and a failed item is retried after a backoff (L3_RETRY_MIN_MS
 * doubling to L3_RETRY_MAX_MS), ahead of what was queued after it: a
 * write up to L3_PUT_TRIES tries in all, then dropped (queue_drops); a
 * deletion until it succeeds, for as long as the store is open (a chunk
 * unlinked must not come back from L3), given up only by l3_close
 * (del_drops). Each retry is counted (retries).
 *
 * Thread safety: every function may be called from any thread. All return
 * 0 (or a count) or a negative errno and never set errno.
 */
#ifndef KVFS_L3_H
#define KVFS_L3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvfs.h"
#include "tier/l3/l3_redis.h"

#define L3_PREFIX_DEFAULT "kvfs:"
#define L3_PREFIX_MAX 64
#define L3_TIMEOUT_MS_DEFAULT 50
#define L3_WRITE_TIMEOUT_MS_DEFAULT 2000
#define L3_PUT_TRIES 6       /* a write's tries before it is dropped */
#define L3_RETRY_MIN_MS 50   /* the writers' backoff after a failed try, */
#define L3_RETRY_MAX_MS 1000 /* doubling up to this */
#define L3_QUEUE_BYTES_DEFAULT (256ull << 20)
#define L3_WRITERS 2
/* The slowest transfer rate a deadline allows for (bytes per second). */
#define L3_MIN_RATE (256ull << 20)
/* A key: ["{}"] prefix + namespace name + ':' + 32 hex + NUL. */
#define L3_KEY_MAX (2 + L3_PREFIX_MAX + KVFS_NS_NAME_MAX + 1 + 32 + 1)

struct l3_config {
	const char *servers;   /* l3=: redis://HOST:PORT[,HOST:PORT...] */
	enum l3r_mode mode;    /* l3_cluster=auto|yes|no */
	const char *user;      /* l3_user: an ACL user, NULL = default */
	const char *password;  /* from l3_auth_file, NULL = none */
	const char *prefix;    /* NULL = L3_PREFIX_DEFAULT */
	int timeout_ms;        /* 0 = L3_TIMEOUT_MS_DEFAULT */
	int write_timeout_ms;  /* 0 = L3_WRITE_TIMEOUT_MS_DEFAULT */
	uint64_t max_chunk;    /* the largest value read (sizes deadlines) */
	uint64_t queue_bytes;  /* 0 = L3_QUEUE_BYTES_DEFAULT */
	void (*log)(void *arg, const char *msg);
	void *log_arg;
};

struct l3_stats {
	uint64_t gets, hits, misses;  /* l3_get: found / not found, failed
				       * or refused (l3_del_bad) */
	uint64_t corrupt;             /* values the engine found bad */
	uint64_t errors;              /* failed operations (timeouts included) */
	uint64_t timeouts;            /* pipelines past their deadline */
	uint64_t bytes_in, bytes_out; /* value bytes read / written */
	uint64_t puts, dels;          /* writes / deletions sent */
	uint64_t queue_drops;         /* writes dropped: queue full or failed
				       * (after their retries) */
	uint64_t retries;             /* writes and deletions sent again
				       * after a failed try */
	uint64_t del_drops;           /* deletions given up (at l3_close) */
	uint64_t queued, queued_bytes;/* waiting now */
	uint64_t lookups, lookup_keys;/* l3_exists calls and keys asked */
	uint64_t get_ns, get_max_ns;  /* time in l3_get, total and worst */
	struct l3r_stats redis;
};

/* A value read by l3_get: data and len are valid until l3_val_free. */
struct l3_val {
	const void *data;
	size_t len;
	void *priv;
};

/*
 * What a queued write stores, built late: encode is called by a writer
 * thread to produce the value (the engine builds its record there, off the
 * caller's thread): *out (malloc'd, freed by l3) and *out_len; non-zero =
 * the write is dropped. release is called exactly once for an item
 * l3_put accepted, last, from a writer thread: with 0 when the value was
 * stored, else a negative errno (encode or server failure, shutdown).
 * bytes: what the item counts against queue_bytes.
 */
struct l3_src {
	int (*encode)(void *arg, void **out, size_t *out_len);
	void (*release)(void *arg, int err);
	void *arg;
	size_t bytes;
};

struct l3;

/* l3_open - see l3r_open for the errors (-EINVAL also for a prefix longer
 * than L3_PREFIX_MAX or with a space or control byte). */
int l3_open(const struct l3_config *cfg, struct l3 **out, char *err,
	    size_t errlen);

/* l3_close - sends what is queued (bounded: once a try fails, the rest
 * is given up, so about l3_write_timeout_ms in all), stops the threads,
 * frees everything. NULL is a no-op. */
void l3_close(struct l3 *l3);

/* l3_key - the Redis key of (ns, key) into buf (L3_KEY_MAX bytes);
 * returns its length. */
size_t l3_key(const struct l3 *l3, const char *ns, const struct kvfs_key *key,
	      char *buf);

/*
 * l3_get - reads the value of (ns, key). 0 and *v (l3_val_free it), or
 * -ENOENT (no such key), -EHOSTDOWN / -ETIMEDOUT / -ECONNREFUSED ... (the
 * server could not be asked: also a miss to the engine), -EREMOTEIO (an
 * error reply), -ENOMEM.
 */
int l3_get(struct l3 *l3, const char *ns, const struct kvfs_key *key,
	   struct l3_val *v);
void l3_val_free(struct l3_val *v);

/*
 * l3_get_into - l3_get whose value goes straight to sink as it arrives
 * (l3_conn.h: begin(len), then room / got until len bytes are in),
 * bounded as l3_get. 0 (the value went to sink whole), -ENOENT, the
 * errors of l3_get, or the error a sink callback returned (the transfer
 * stopped there; counted as a hit: the caller says l3_refused or
 * l3_del_bad when it was not one).
 */
int l3_get_into(struct l3 *l3, const char *ns, const struct kvfs_key *key,
		const struct l3_sink *sink);

/*
 * l3_exists - which of keys[0..n-1] of ns exist: present[i] = 1 or 0 (0
 * too for keys whose node failed). One pipelined round trip per node (plus
 * one for redirected keys): all keys go at once, the run is cut after.
 * Returns the length of the leading run present, or -ENOMEM.
 */
long l3_exists(struct l3 *l3, const char *ns, const struct kvfs_key *keys,
	       size_t n, uint8_t *present);

/*
 * l3_put - queues a write of (ns, key) whose value src builds (SET).
 * Returns 0, or -EAGAIN when the queue holds queue_bytes already (dropped,
 * counted in queue_drops), -ENOMEM, -ESHUTDOWN; on an error src->release
 * is NOT called: what src holds is still the caller's (so a caller may
 * hold its own lock across l3_put even when release takes it).
 */
int l3_put(struct l3 *l3, const char *ns, const struct kvfs_key *key,
	   const struct l3_src *src);

/* l3_put_dropped - counts a write the caller dropped without queueing it
 * (it had no room, see l3_queue_room). */
void l3_put_dropped(struct l3 *l3);

/* l3_queue_room - true when a write of bytes would be queued now (a
 * hint, to skip building what would be dropped: the queue may fill
 * meanwhile; l3_put still decides and counts). */
bool l3_queue_room(struct l3 *l3, size_t bytes);

/* l3_del - queues the deletion (UNLINK) of (ns, key), after any write of
 * it queued before. Never dropped for space nor for a server that does
 * not answer (retried; see the top). 0 or -ENOMEM, -ESHUTDOWN. */
int l3_del(struct l3 *l3, const char *ns, const struct kvfs_key *key);

/* l3_del_cb - l3_del, and done(arg, err) is called exactly once when it
 * returned 0, from a writer thread: err 0 once the server deleted it
 * (or a later write of the key in the same batch replaced it), else
 * the error it was given up with (only at l3_close). */
int l3_del_cb(struct l3 *l3, const char *ns, const struct kvfs_key *key,
	      void (*done)(void *arg, int err), void *arg);

/* l3_refused - counts a value l3_get returned that the caller did not
 * use (once per such value): that GET moves from hits to misses. */
void l3_refused(struct l3 *l3);

/*
 * l3_del_bad - deletes (ns, key) only if its value is still bad (len bytes
 * at bad: the value l3_get returned and the engine refused), so a good
 * copy another node wrote meanwhile survives; counts it in corrupt and
 * calls l3_refused. Synchronous, bounded. 0 (deleted or already replaced),
 * or an error.
 */
int l3_del_bad(struct l3 *l3, const char *ns, const struct kvfs_key *key,
	       const void *bad, size_t len);

/*
 * l3_drop_ns - deletes every key of namespace ns from L3 (SCAN MATCH +
 * UNLINK on every master). Synchronous; each round trip is bounded.
 * Returns the number of keys deleted, or an error (some may be deleted).
 */
long l3_drop_ns(struct l3 *l3, const char *ns);

/* l3_flush - waits (at most timeout_ms) until the queue is empty and sent.
 * 0 or -ETIMEDOUT. */
int l3_flush(struct l3 *l3, int timeout_ms);

void l3_get_stats(struct l3 *l3, struct l3_stats *st);

/* l3_redis - the Redis client of l3 (for l3_notify.h's publishing). */
struct l3r *l3_redis(struct l3 *l3);

#endif /* KVFS_L3_H */
