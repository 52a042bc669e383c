/*
 * tier_wait.c - waiters on chunks not yet published (tier_wait.h): the
 * wait queue, the chain wait loop, wake-ups from publication and from
 * L3 notifications.
 *
 * No lost wake-up: a waiter arms itself on its key (under wait.mu) BEFORE
 * it looks the chain up; a publish that lands between the look-up and the
 * sleep finds it armed and sets woken, which the sleep checks first.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hash/hashkey.h"
#include "tier/tier_i.h"
#include "tier/tier_wait.h"

#define WAIT_BUCKETS 256

struct tier_waitq {
	pthread_mutex_t mu;                   /* wait.mu: a leaf */
	struct tier_waiter *b[WAIT_BUCKETS];  /* wait.mu: armed waiters */
	struct tier_wait_stats st;            /* wait.mu */
};

uint64_t tier_now_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t bucket_of(uint32_t ns, const struct kvfs_key *key)
{
	return (uint32_t)(hashkey_index(ns, key) % WAIT_BUCKETS);
}

void tier_waiter_init(struct tier_waiter *w)
{
	pthread_condattr_t a;

	memset(w, 0, sizeof(*w));
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &a);
	pthread_condattr_destroy(&a);
}

void tier_waiter_fini(struct tier_waiter *w)
{
	pthread_cond_destroy(&w->cv);
}

/* wait.mu held */
static void unlink_locked(struct tier_waitq *q, struct tier_waiter *w)
{
	if (!w->armed)
		return;
	if (w->prev)
		w->prev->next = w->next;
	else
		q->b[w->bucket] = w->next;
	if (w->next)
		w->next->prev = w->prev;
	w->next = w->prev = NULL;
	w->armed = false;
}

/* Arms w on (ns, key): a publish of it from now on sets woken. */
static void arm(struct tier_waitq *q, struct tier_waiter *w, uint32_t ns,
		const struct kvfs_key *key)
{
	pthread_mutex_lock(&q->mu);
	unlink_locked(q, w);
	w->ns = ns;
	w->key = *key;
	w->bucket = bucket_of(ns, key);
	w->woken = false;
	w->next = q->b[w->bucket];
	w->prev = NULL;
	if (w->next)
		w->next->prev = w;
	q->b[w->bucket] = w;
	w->armed = true;
	pthread_mutex_unlock(&q->mu);
}

/* Sleeps until woken, interrupted or until_ns: 0, -ETIMEDOUT, -EINTR. */
static int sleep_until(struct tier_waitq *q, struct tier_waiter *w,
		       uint64_t until_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(until_ns / 1000000000ull),
		.tv_nsec = (long)(until_ns % 1000000000ull),
	};
	int rc = 0;

	pthread_mutex_lock(&q->mu);
	q->st.waiting++;
	while (!w->woken && !w->interrupted && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&w->cv, &q->mu, &ts);
	q->st.waiting--;
	if (w->interrupted)
		rc = -EINTR;
	else if (w->woken)
		rc = 0;
	else
		rc = -ETIMEDOUT;
	pthread_mutex_unlock(&q->mu);
	return rc;
}

int tier_wait_chain(struct tier *t, struct tier_waiter *w, uint32_t ns,
		    const struct kvfs_key *keys, uint32_t nkeys,
		    uint32_t depth_base, uint64_t deadline_ns,
		    uint32_t *found)
{
	struct tier_waitq *q = t->wq;
	/* with L3, a notification may be lost: re-check at the interval;
	 * without, only a local publish can complete the chain */
	uint64_t every = t->l3 ? (uint64_t)t->cfg.wait_recheck_ms * 1000000ull
			       : 0;
	uint64_t poll = w->stop ? TIER_WAIT_STOP_POLL_MS * 1000000ull : 0;
	uint32_t have = 0, f;
	bool counted = false, stopped = false;
	int rc = 0;

	for (;;) {
		uint64_t now, until, nap;

		arm(q, w, ns, &keys[have]);
		rc = tier_lookup(t, ns, keys + have, nkeys - have,
				 depth_base + have, false, false, &f, NULL,
				 NULL);
		if (rc)
			break;
		have += f;
		if (have == nkeys)
			break;
		if (f)
			continue; /* re-arm on the next missing key */
		now = tier_now_mono_ns();
		if (now >= deadline_ns)
			break;
		if (!counted) {
			counted = true;
			pthread_mutex_lock(&q->mu);
			q->st.waits++;
			pthread_mutex_unlock(&q->mu);
		}
		until = every && now + every < deadline_ns ? now + every
							   : deadline_ns;
		/* sleeps of at most poll until then, asking stop between */
		do {
			nap = poll && now + poll < until ? now + poll : until;
			rc = sleep_until(q, w, nap);
			stopped = w->stop && w->stop(w->stop_arg);
			now = tier_now_mono_ns();
		} while (rc == -ETIMEDOUT && !stopped && now < until);
		if (rc == -EINTR || stopped) {
			rc = rc == -EINTR ? rc : 0;
			break;
		}
		if (rc == -ETIMEDOUT && until < deadline_ns) {
			pthread_mutex_lock(&q->mu);
			q->st.rechecks++;
			pthread_mutex_unlock(&q->mu);
		}
		rc = 0;
	}
	pthread_mutex_lock(&q->mu);
	unlink_locked(q, w);
	if (counted && rc == -EINTR)
		q->st.interrupted++;
	else if (counted && !rc && have == nkeys)
		q->st.complete++;
	else if (counted && !rc)
		q->st.timeouts++;
	pthread_mutex_unlock(&q->mu);
	*found = have;
	return rc;
}

void tier_wait_interrupt(struct tier *t, struct tier_waiter *w)
{
	pthread_mutex_lock(&t->wq->mu);
	w->interrupted = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&t->wq->mu);
}

void tier_wait_wake(struct tier *t, uint32_t ns, const struct kvfs_key *key)
{
	struct tier_waitq *q = t->wq;
	struct tier_waiter *w;
	uint32_t b = bucket_of(ns, key);

	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	for (w = q->b[b]; w; w = w->next)
		if (w->ns == ns && !w->woken && tier_key_eq(&w->key, key)) {
			w->woken = true;
			q->st.wakeups++;
			pthread_cond_signal(&w->cv);
		}
	pthread_mutex_unlock(&q->mu);
}

void tier_wait_wake_name(struct tier *t, const char *name,
			 const struct kvfs_key *key)
{
	uint32_t id;

	if (tier_ns_find(t, name, &id) == 0)
		tier_wait_wake(t, id, key);
}

void tier_wait_wake_all(struct tier *t)
{
	struct tier_waitq *q = t->wq;

	pthread_mutex_lock(&q->mu);
	for (int b = 0; b < WAIT_BUCKETS; b++)
		for (struct tier_waiter *w = q->b[b]; w; w = w->next) {
			w->woken = true;
			pthread_cond_signal(&w->cv);
		}
	pthread_mutex_unlock(&q->mu);
}

void tier_wait_queue_stats(struct tier *t, struct tier_wait_stats *st)
{
	pthread_mutex_lock(&t->wq->mu);
	*st = t->wq->st;
	pthread_mutex_unlock(&t->wq->mu);
}

int tier_wait_open(struct tier *t)
{
	struct tier_waitq *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	pthread_mutex_init(&q->mu, NULL);
	t->wq = q;
	return 0;
}

void tier_wait_close(struct tier *t)
{
	if (!t->wq)
		return;
	pthread_mutex_destroy(&t->wq->mu);
	free(t->wq);
	t->wq = NULL;
}
