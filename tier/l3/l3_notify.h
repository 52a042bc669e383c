/*
 * l3_notify.h - L3 store notifications, the Redis side of the cross-node
 * hand-off (kvfs(7) HAND-OFF): a node that stored a chunk in L3 publishes
 * its name, and every node subscribed wakes its waiters on it.
 *
 * Channels. Standalone: PUBLISH / SUBSCRIBE on "<prefix>handoff". Redis
 * Cluster: shard channels (SPUBLISH / SSUBSCRIBE), one per slot,
 * "{T}<prefix>handoff" where T is a tag whose slot is the slot of the
 * chunk's key: a notification is published on the master that holds the
 * key (and fails over and moves with its slot), and each subscriber
 * subscribes on every master to the channels of the slots it serves.
 * The message: 32 hex digits of the chunk key, then the namespace name;
 * for a file of a path namespace (a record that carries attributes,
 * record.h version 3) then '/' and 16 hex digits of the stored version's
 * raw checksum (record.h raw_sum), "<key hex><ns>/<raw_sum hex>": a
 * namespace name never holds '/', so a subscriber takes the name up to
 * it (an older one fails to match the whole string as a name: its
 * waiters re-check at their interval instead).
 *
 * Publishing (l3n_publish) runs on the caller's thread through the L3
 * client (tier/l3/l3_redis.h), after the value was stored, bounded by
 * l3_timeout_ms. Subscribing runs on a thread of its own over dedicated
 * hiredis connections (never the pooled ones: a subscribed connection
 * takes no other command). A subscription lost (connection dropped,
 * CLIENT KILL, server restart, failover, slot moved) is re-established
 * with backoff (L3N_BACKOFF_MIN_MS doubling to L3N_BACKOFF_MAX_MS); each
 * time the subscriptions are in place again on_resync is called, so
 * waiters re-check what they may have missed. Messages are a hint: a
 * woken waiter always checks L3 itself, and never trusts the message.
 *
 * Thread safety: every function may be called from any thread; the
 * callbacks run on the subscriber thread with no lock of this module
 * held. Functions return 0 or a negative errno and never set errno.
 */
#ifndef KVFS_L3_NOTIFY_H
#define KVFS_L3_NOTIFY_H

#include <stdint.h>

#include "kvfs.h"
#include "tier/l3/l3_redis.h"

#define L3N_BACKOFF_MIN_MS 50
#define L3N_BACKOFF_MAX_MS 2000
#define L3N_CHANNEL_MAX (2 + 10 + 64 + 16)

struct l3n_config {
	struct l3r *r;          /* the L3 client (routing, the masters) */
	const char *prefix;     /* the L3 key prefix */
	const char *user;       /* AUTH user, NULL = default */
	const char *password;   /* AUTH, NULL = none (copied) */
	int timeout_ms;         /* connect, AUTH, publish */
	/* a chunk (ns of nslen bytes, key) was stored in L3 by some node;
	 * sum: the raw checksum of the version stored, NULL when the
	 * message carries none */
	void (*on_key)(void *arg, const char *ns, size_t nslen,
		       const struct kvfs_key *key, const uint64_t *sum);
	/* subscribed again after a gap */
	void (*on_resync)(void *arg);
	void (*log)(void *arg, const char *msg);
	void *arg;
};

struct l3n_stats {
	uint64_t published;    /* notifications sent */
	uint64_t pub_errors;   /* notifications that failed (a waiter's
				* re-check covers them) */
	uint64_t received;     /* notifications received */
	uint64_t resubscribes; /* subscriptions (re-)established */
	uint64_t subscribed;   /* 1 while every master's subscription is up */
};

struct l3n;

/* l3n_open - starts the subscriber thread. -ENOMEM, -EAGAIN (thread). */
int l3n_open(const struct l3n_config *cfg, struct l3n **out);
/* l3n_stop - stops and joins the subscriber thread (l3n_publish still
 * works: the L3 writers may still be finishing). Idempotent. */
void l3n_stop(struct l3n *n);
/* l3n_close - l3n_stop, then frees everything. NULL: no-op. */
void l3n_close(struct l3n *n);

/*
 * l3n_publish - announces that (ns, key) is stored in L3 (the Redis key
 * of l3_key), with the raw checksum of the version stored when sum is
 * not NULL. Synchronous, bounded by timeout_ms. 0, or the error of the
 * L3 client (-EHOSTDOWN, -ETIMEDOUT...), counted in pub_errors.
 */
int l3n_publish(struct l3n *n, const char *ns, const struct kvfs_key *key,
		const char *l3key, size_t l3klen, const uint64_t *sum);

void l3n_get_stats(struct l3n *n, struct l3n_stats *st);

#endif /* KVFS_L3_NOTIFY_H */
