/*
 * tier_wait.h - waiters: a lookup or GET that sleeps until the chunks it
 * asked for are published (the prefill -> decode hand-off, kvfs(7)
 * HAND-OFF). A waiter sleeps on one key at a time, the first key of its
 * chain that is missing; a publish of that key on this node
 * (tier_wr.c) wakes it at once, and so does a notification from another
 * node that stored it in L3 (tier_l3_notify.c). With L3 a waiter also
 * re-checks L3 every recheck_ms, so a lost notification costs at most
 * that long.
 *
 * Locking: the wait queue has a mutex of its own (wait.mu), a leaf taken
 * after tier.lock; nothing sleeps holding tier.lock (a waiter sleeps on a
 * condition variable of wait.mu only). All functions are thread-safe and
 * return 0 or a negative errno.
 */
#ifndef KVFS_TIER_WAIT_H
#define KVFS_TIER_WAIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "kvfs.h"

struct tier;

/* How often a waiter with a stop callback asks it (ms). */
#define TIER_WAIT_STOP_POLL_MS 250

/* One waiter; on the caller's stack. stop (set by the caller after
 * tier_waiter_init, may be NULL): asked every TIER_WAIT_STOP_POLL_MS
 * while it sleeps; true ends the wait as a timeout (the daemon is
 * stopping: its FUSE loop waits for every worker). Other fields: wait.mu
 * (private). */
struct tier_waiter {
	bool (*stop)(void *arg);
	void *stop_arg;
	struct tier_waiter *next, *prev;
	uint32_t ns;
	uint32_t bucket;
	struct kvfs_key key;
	bool armed, woken, interrupted;
	pthread_cond_t cv;
};

/* Counters (kvfs(7) COUNTERS, "wait_*"). */
struct tier_wait_stats {
	uint64_t waits;       /* chains waited on (not already complete) */
	uint64_t complete;    /* of which ended complete before the timeout */
	uint64_t timeouts;    /* ended at the timeout with a partial run */
	uint64_t interrupted; /* ended by a signal (EINTR) */
	uint64_t wakeups;     /* waiters woken by a publish or notification */
	uint64_t rechecks;    /* re-checks of L3 at the interval */
	uint64_t waiting;     /* sleeping now */
	/* L3 notifications (tier/l3/l3_notify.h; 0 without L3) */
	uint64_t notify_sent, notify_errors, notify_received;
	uint64_t notify_resubscribes, notify_subscribed;
	/* path files this node let go of: another node stored another
	 * version in L3 (tier_l3_notify.c) */
	uint64_t notify_superseded;
};

/* tier_waiter_init / tier_waiter_fini - before the first and after the
 * last use of w. */
void tier_waiter_init(struct tier_waiter *w);
void tier_waiter_fini(struct tier_waiter *w);

/*
 * tier_wait_chain - waits until keys[0..nkeys) of namespace ns are all
 * present (in L1, L2 or L3), or until deadline_ns (CLOCK_MONOTONIC), or
 * until tier_wait_interrupt(w). *found: the leading run present when it
 * returned. Nothing is pinned. depth_base as tier_lookup's.
 * Returns 0 (complete or timed out: see *found), -EINTR (interrupted),
 * -ENOENT (namespace removed).
 */
int tier_wait_chain(struct tier *t, struct tier_waiter *w, uint32_t ns,
		    const struct kvfs_key *keys, uint32_t nkeys,
		    uint32_t depth_base, uint64_t deadline_ns,
		    uint32_t *found);

/* tier_wait_interrupt - ends w's wait (now or its next sleep) with
 * -EINTR. Any thread. */
void tier_wait_interrupt(struct tier *t, struct tier_waiter *w);

/* tier_wait_wake - wakes the waiters sleeping on (ns, key). Call without
 * tier.lock (it may be held: wait.mu is a leaf). */
void tier_wait_wake(struct tier *t, uint32_t ns, const struct kvfs_key *key);

/* tier_wait_wake_name - the same for a namespace named by name (a
 * notification from another node); unknown names are ignored. Call
 * WITHOUT tier.lock. */
void tier_wait_wake_name(struct tier *t, const char *name,
			 const struct kvfs_key *key);

/* tier_wait_wake_all - wakes every waiter (they re-check): a
 * notification channel came back after a gap. */
void tier_wait_wake_all(struct tier *t);

/* tier_wait_queue_stats: the waiters' counters alone (tier_wait.c);
 * tier_wait_stats (tier_l3_notify.c) adds the notifications'. */
void tier_wait_queue_stats(struct tier *t, struct tier_wait_stats *st);
void tier_wait_stats(struct tier *t, struct tier_wait_stats *st);

/* Engine life (tier.c). */
int tier_wait_open(struct tier *t);
void tier_wait_close(struct tier *t);

/* tier_now_mono_ns - CLOCK_MONOTONIC in ns (deadlines above). */
uint64_t tier_now_mono_ns(void);

#endif /* KVFS_TIER_WAIT_H */
