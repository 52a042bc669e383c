/*
 * lease.c - the lease table (see lease.h).
 *
 * Leases live in two hash tables (struct htab: by id, for UNPIN; by owner,
 * because every close of every file of the mount asks "does this fd own
 * leases?") and,
 * when they can expire, on one list sorted by deadline. Most leases use the
 * mount's default lease_ms, so a new lease almost always goes at the tail
 * and insertion is O(1) in practice; the expiry thread only looks at the
 * head.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hash/htab.h"
#include "tier/lease.h"
#include "tier/tier.h"
#include "tier/tier_i.h" /* tier_unpin_pins */

/* Salts of the three tables' hashes (htab_hash_u64). */
enum { SALT_ID = 1, SALT_OWNER, SALT_UID };

/* How many leases one non-root uid holds (LEASE_MAX_PER_UID). */
struct lease_uid {
	struct htab_node node;    /* in lt->by_uid */
	uid_t uid;
	uint32_t n;
};
#define LEASE_DEFAULT_MS 30000u

struct lease {
	struct htab_node id_node; /* in lt->by_id */
	struct htab_node own_node; /* in lt->by_owner */
	struct lease *prev, *next; /* lt->expiry list (deadline != 0) */
	struct lease *gone_next;  /* private list of leases being released */
	uint64_t id;
	uint64_t owner;
	uint64_t deadline_ns;     /* CLOCK_MONOTONIC; 0 = never (handles) */
	uid_t uid;
	bool is_handle;
	struct tier_chunk *chunk; /* handles: released with tier_put */
	void *cookie;             /* handles: tier_arena_export's, or NULL */
	size_t npins;
	struct lease_pin pins[];
};

struct lease_table {
	struct tier *tier;
	uint32_t default_ms;
	pthread_t thread;
	pthread_cond_t cond;      /* the thread waits on it */

	pthread_mutex_t lock;     /* protects every field below */
	bool stop;
	uint64_t wake_ns;         /* when the waiting thread looks next (a
				   * lease due before it needs a signal);
				   * 0 while the thread is awake */
	uint64_t next_id;
	struct htab by_id;        /* struct lease by id_node */
	struct htab by_owner;     /* struct lease by own_node */
	struct lease *head, *tail; /* expiry list, ascending deadline */
	struct htab by_uid;       /* struct lease_uid: non-root users */
	uint64_t nonroot;         /* leases held by non-root users */
	struct lease_stats st;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct lease_uid *uid_find(struct lease_table *lt, uid_t uid)
{
	struct htab_node *e;

	htab_for_each_hash(&lt->by_uid, htab_hash_u64(SALT_UID, uid), e) {
		struct lease_uid *u = container_of(e, struct lease_uid, node);

		if (u->uid == uid)
			return u;
	}
	return NULL;
}

/* Room for one more lease of uid? Counts it if so. Caller holds lt->lock;
 * unlink_lease gives the count back. */
static int admit(struct lease_table *lt, uid_t uid)
{
	struct lease_uid *u;

	if (lt->st.active >= LEASE_MAX)
		return -ENOSPC;
	if (uid == 0)
		return 0;
	if (lt->nonroot >= LEASE_MAX_NONROOT)
		return -ENOSPC;
	u = uid_find(lt, uid);
	if (u && u->n >= LEASE_MAX_PER_UID)
		return -ENOSPC;
	if (!u) {
		u = calloc(1, sizeof(*u));
		if (!u)
			return -ENOMEM;
		u->uid = uid;
		/* cannot fail: lease_table_create gave it buckets */
		(void)htab_add(&lt->by_uid, &u->node,
			       htab_hash_u64(SALT_UID, uid));
	}
	u->n++;
	lt->nonroot++;
	return 0;
}

static void unadmit(struct lease_table *lt, uid_t uid)
{
	struct lease_uid *u;

	if (uid == 0)
		return;
	u = uid_find(lt, uid);
	if (!u)
		return;
	lt->nonroot--;
	if (!--u->n) {
		htab_del(&lt->by_uid, &u->node);
		free(u);
	}
}

/* Unlinks l from every index and updates the counters. Caller holds
 * lt->lock; the pins are released later by release_list. */
static void unlink_lease(struct lease_table *lt, struct lease *l,
			 uint64_t *counter)
{
	htab_del(&lt->by_id, &l->id_node);
	htab_del(&lt->by_owner, &l->own_node);
	if (l->deadline_ns) {
		if (l->prev)
			l->prev->next = l->next;
		else
			lt->head = l->next;
		if (l->next)
			l->next->prev = l->prev;
		else
			lt->tail = l->prev;
	}
	unadmit(lt, l->uid);
	lt->st.active--;
	if (l->is_handle)
		lt->st.handles--;
	lt->st.pinned -= l->is_handle ? 1 : l->npins;
	(*counter)++;
}

/* Gives back the pins of unlinked leases and frees them. Called WITHOUT
 * lt->lock (tier calls take tier.lock). */
static void release_list(struct lease_table *lt, struct lease *l)
{
	while (l) {
		struct lease *next = l->gone_next;

		if (l->cookie)
			tier_arena_unexport(lt->tier, l->cookie);
		if (l->chunk)
			tier_put(lt->tier, l->chunk);
		tier_unpin_pins(lt->tier, l->pins, l->npins);
		free(l);
		l = next;
	}
}

/* Unlinks every lease past its deadline; returns them as a gone list.
 * Caller holds lt->lock. */
static struct lease *collect_expired(struct lease_table *lt, uint64_t now,
				     long *n)
{
	struct lease *gone = NULL;

	while (lt->head && lt->head->deadline_ns <= now) {
		struct lease *l = lt->head;

		unlink_lease(lt, l, &lt->st.expired);
		l->gone_next = gone;
		gone = l;
		(*n)++;
	}
	return gone;
}

static void *lease_thread(void *arg)
{
	struct lease_table *lt = arg;

	pthread_mutex_lock(&lt->lock);
	while (!lt->stop) {
		long n = 0;
		struct lease *gone;
		struct timespec ts;
		uint64_t now = now_ns(), d;

		lt->wake_ns = 0; /* awake: it sees every lease linked */
		gone = collect_expired(lt, now, &n);
		if (gone) {
			pthread_mutex_unlock(&lt->lock);
			release_list(lt, gone);
			pthread_mutex_lock(&lt->lock);
			continue;
		}
		/*
		 * With no lease, it looks again after a default lease's time
		 * (not never): a lease of the default length or longer, taken
		 * meanwhile, is then due after that, and linking it wakes
		 * nobody. Waking the thread for each such lease was a futex
		 * wake and two context switches per pinned lookup whenever
		 * none was held (10% of the daemon's samples in a loop of
		 * group lookups with PIN and release).
		 */
		d = lt->head ? lt->head->deadline_ns :
			       now + (uint64_t)lt->default_ms * 1000000ull;
		lt->wake_ns = d;
		ts.tv_sec = (time_t)(d / 1000000000ull);
		ts.tv_nsec = (long)(d % 1000000000ull);
		pthread_cond_timedwait(&lt->cond, &lt->lock, &ts);
	}
	pthread_mutex_unlock(&lt->lock);
	return NULL;
}

int lease_table_create(struct tier *t, uint32_t default_ms,
		       struct lease_table **out)
{
	struct lease_table *lt;
	pthread_condattr_t ca;
	int rc;

	lt = calloc(1, sizeof(*lt));
	if (!lt)
		return -ENOMEM;
	lt->tier = t;
	lt->default_ms = default_ms ? default_ms : LEASE_DEFAULT_MS;
	lt->next_id = 1;
	if (htab_init(&lt->by_id, 0) || htab_init(&lt->by_owner, 0) ||
	    htab_init(&lt->by_uid, 0)) {
		rc = -ENOMEM;
		goto err_tables;
	}
	pthread_mutex_init(&lt->lock, NULL);
	pthread_condattr_init(&ca);
	/* Deadlines are monotonic: a clock step must not expire leases. */
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&lt->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&lt->thread, NULL, lease_thread, lt);
	if (rc) {
		pthread_cond_destroy(&lt->cond);
		pthread_mutex_destroy(&lt->lock);
		rc = -rc;
		goto err_tables;
	}
	*out = lt;
	return 0;

err_tables:
	htab_free(&lt->by_id);
	htab_free(&lt->by_owner);
	htab_free(&lt->by_uid);
	free(lt);
	return rc;
}

void lease_table_destroy(struct lease_table *lt)
{
	struct lease *gone = NULL;
	struct htab_node *e, *nx;
	uint64_t b;

	if (!lt)
		return;
	pthread_mutex_lock(&lt->lock);
	lt->stop = true;
	pthread_cond_signal(&lt->cond);
	pthread_mutex_unlock(&lt->lock);
	pthread_join(lt->thread, NULL);

	htab_for_each_safe(&lt->by_id, b, e, nx) {
		struct lease *l = container_of(e, struct lease, id_node);

		unlink_lease(lt, l, &lt->st.closed);
		l->gone_next = gone;
		gone = l;
	}
	release_list(lt, gone);
	pthread_cond_destroy(&lt->cond);
	pthread_mutex_destroy(&lt->lock);
	htab_free(&lt->by_id);
	htab_free(&lt->by_owner);
	htab_free(&lt->by_uid); /* empty: unlink_lease gave every count back */
	free(lt);
}

/* Links a filled lease into the table. Caller holds lt->lock. */
static void link_lease(struct lease_table *lt, struct lease *l)
{
	l->id = lt->next_id++;
	/* cannot fail: lease_table_create gave both tables buckets */
	(void)htab_add(&lt->by_id, &l->id_node, htab_hash_u64(SALT_ID, l->id));
	(void)htab_add(&lt->by_owner, &l->own_node,
		       htab_hash_u64(SALT_OWNER, l->owner));
	if (l->deadline_ns) {
		struct lease *p = lt->tail;

		while (p && p->deadline_ns > l->deadline_ns)
			p = p->prev;
		l->prev = p;
		l->next = p ? p->next : lt->head;
		if (l->next)
			l->next->prev = l;
		else
			lt->tail = l;
		if (p)
			p->next = l;
		else
			lt->head = l;
		/* Due before the thread looks next: it would sleep too
		 * long. (Awake, wake_ns 0, it sees the list anyway.) */
		if (l->deadline_ns < lt->wake_ns)
			pthread_cond_signal(&lt->cond);
	}
	lt->st.active++;
	lt->st.taken++;
}

uint32_t lease_grant_ms(struct lease_table *lt, uid_t uid, uint32_t ms)
{
	if (!ms)
		return lt->default_ms;
	if (uid != 0)
		return ms < lt->default_ms ? ms : lt->default_ms;
	return ms < LEASE_MAX_MS ? ms : LEASE_MAX_MS;
}

int lease_add(struct lease_table *lt, uint64_t owner, uid_t uid, uint32_t ms,
	      const struct lease_pin *pins, size_t npins, uint64_t *id)
{
	struct lease *l;
	int rc;

	if (!npins || !pins || !id)
		return -EINVAL;
	l = calloc(1, sizeof(*l) + npins * sizeof(l->pins[0]));
	if (!l)
		return -ENOMEM;
	memcpy(l->pins, pins, npins * sizeof(pins[0]));
	l->npins = npins;
	l->owner = owner;
	l->uid = uid;
	l->deadline_ns = now_ns() +
		(uint64_t)lease_grant_ms(lt, uid, ms) * 1000000ull;

	pthread_mutex_lock(&lt->lock);
	rc = admit(lt, uid);
	if (rc) {
		pthread_mutex_unlock(&lt->lock);
		free(l);
		return rc;
	}
	link_lease(lt, l);
	lt->st.pinned += npins;
	*id = l->id;
	pthread_mutex_unlock(&lt->lock);
	return 0;
}

static struct lease *find_owner_handle(struct lease_table *lt, uint64_t owner)
{
	struct htab_node *e;

	htab_for_each_hash(&lt->by_owner, htab_hash_u64(SALT_OWNER, owner), e) {
		struct lease *l = container_of(e, struct lease, own_node);

		if (l->owner == owner && l->is_handle)
			return l;
	}
	return NULL;
}

int lease_add_handle(struct lease_table *lt, uint64_t owner, uid_t uid,
		     struct tier_chunk *c, void *cookie, uint64_t *id)
{
	struct lease *l;
	int rc;

	if (!c || !id)
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->owner = owner;
	l->uid = uid;
	l->is_handle = true;
	l->chunk = c;
	l->cookie = cookie;

	pthread_mutex_lock(&lt->lock);
	if (find_owner_handle(lt, owner)) {
		pthread_mutex_unlock(&lt->lock);
		free(l);
		return -EBUSY;
	}
	rc = admit(lt, uid);
	if (rc) {
		pthread_mutex_unlock(&lt->lock);
		free(l);
		return rc;
	}
	link_lease(lt, l);
	lt->st.handles++;
	lt->st.pinned++;
	*id = l->id;
	pthread_mutex_unlock(&lt->lock);
	return 0;
}

int lease_release(struct lease_table *lt, uint64_t id, uint64_t owner,
		  uid_t uid, int handle)
{
	struct lease *l = NULL;
	struct htab_node *e;

	pthread_mutex_lock(&lt->lock);
	htab_for_each_hash(&lt->by_id, htab_hash_u64(SALT_ID, id), e) {
		if (container_of(e, struct lease, id_node)->id == id) {
			l = container_of(e, struct lease, id_node);
			break;
		}
	}
	if (!l || l->is_handle != !!handle ||
	    (l->is_handle && l->owner != owner)) {
		pthread_mutex_unlock(&lt->lock);
		return -ENOENT;
	}
	if (l->deadline_ns && l->deadline_ns <= now_ns()) {
		/* Expired but the thread has not run yet: still a miss. */
		unlink_lease(lt, l, &lt->st.expired);
		pthread_mutex_unlock(&lt->lock);
		l->gone_next = NULL;
		release_list(lt, l);
		return -ENOENT;
	}
	if (uid != 0 && uid != l->uid) {
		pthread_mutex_unlock(&lt->lock);
		return -EPERM;
	}
	unlink_lease(lt, l, &lt->st.unpinned);
	pthread_mutex_unlock(&lt->lock);
	l->gone_next = NULL;
	release_list(lt, l);
	return 0;
}

long lease_release_owner(struct lease_table *lt, uint64_t owner)
{
	uint64_t h = htab_hash_u64(SALT_OWNER, owner);
	struct lease *gone = NULL, *l;
	struct htab_node *e, *nx;
	long n = 0;

	pthread_mutex_lock(&lt->lock);
	if (!lt->st.active) {
		pthread_mutex_unlock(&lt->lock);
		return 0;
	}
	for (e = htab_first(&lt->by_owner, h); e; e = nx) {
		nx = e->next;
		l = container_of(e, struct lease, own_node);
		if (e->h != h || l->owner != owner)
			continue;
		unlink_lease(lt, l, &lt->st.closed);
		l->gone_next = gone;
		gone = l;
		n++;
	}
	pthread_mutex_unlock(&lt->lock);
	release_list(lt, gone);
	return n;
}

uint64_t lease_owner_handle(struct lease_table *lt, uint64_t owner)
{
	struct lease *l;
	uint64_t id;

	pthread_mutex_lock(&lt->lock);
	l = find_owner_handle(lt, owner);
	id = l ? l->id : 0;
	pthread_mutex_unlock(&lt->lock);
	return id;
}

long lease_expire_now(struct lease_table *lt)
{
	struct lease *gone;
	long n = 0;

	pthread_mutex_lock(&lt->lock);
	gone = collect_expired(lt, now_ns(), &n);
	pthread_mutex_unlock(&lt->lock);
	release_list(lt, gone);
	return n;
}

void lease_get_stats(struct lease_table *lt, struct lease_stats *st)
{
	pthread_mutex_lock(&lt->lock);
	*st = lt->st;
	pthread_mutex_unlock(&lt->lock);
	st->lease_ms = lt->default_ms;
}
