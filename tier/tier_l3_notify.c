/*
 * tier_l3_notify.c - the engine's side of L3 notifications
 * (tier/l3/l3_notify.h): after the L3 writer stored a chunk, it is
 * announced (tier_l3_notify_stored); a notification from any node wakes
 * this node's waiters on that key (tier_wait.h), and a subscription that
 * comes back after a gap wakes every waiter to re-check.
 *
 * Versions of path files. A file of a path namespace changes (O_TRUNC,
 * a rename onto its name) under the same key, so the announcement of a
 * path file carries the raw checksum of the version stored. A node that
 * holds that key as another version (its checksum differs) lets go of
 * its copy, from every local tier, as an eviction would (on_gone: the
 * name vanishes from its tree and from the kernel's caches; readers that
 * have it open keep its bytes), so the next lookup of the name finds the
 * new version in L3, with the attributes its record carries. Only a copy
 * L3 has or had: stored there by this node or read from there (TL3_IN),
 * nothing of it queued for L3 (TL3_QUEUED, TL3_SENDING) and its checksum
 * known; a version of this node not yet stored is never dropped (its own
 * SET comes later and wins in L3, and its announcement tells the others
 * in turn), nor a copy whose L3 write failed. The same version (this
 * node's own announcement included) is kept. No L3 deletion, no
 * tombstone. Key chunks' announcements carry no checksum: a key chunk is
 * never rewritten, and a different copy of a key on two nodes is left
 * alone. A notification missed (subscription down, node down, an older
 * writer's announcement without a checksum) leaves the copy as it is
 * until this node evicts or unlinks it (kvfs(7) EVICTION).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tier/l3/l3.h"
#include "tier/l3/l3_notify.h"
#include "tier/tier_i.h"
#include "tier/tier_wait.h"

struct tier_l3_notify {
	struct l3n *n;
	struct l3 *l3;
	_Atomic uint64_t superseded; /* copies let go of (wait stats) */
};

/* Version sum of (name, key) is in L3: this node's copy of another
 * version goes (see the top; subscriber thread, no lock held). */
static void superseded(struct tier *t, const char *name,
		       const struct kvfs_key *key, uint64_t sum)
{
	struct tier_ns *n;
	struct tier_rec *r;
	bool sync = false, waited = false;
	int waits = 0;
	uint32_t ns;

	tier_lock(t);
	n = tier_ns_by_name(t, name);
	if (!n) {
		tier_unlock(t);
		return;
	}
	ns = n->id;
again:
	r = tier_idx_find(t, ns, key);
	if (r && r->l3 == TL3_IN && !(r->flags & TREC_NOSUM) &&
	    r->checksum != sum) {
		/* an L2 write of it in flight: let it land, then erase it
		 * with the rest, as an unlink does (tier_unlink) */
		if (waits < 3 && tier_l2_wait_write(t, r)) {
			waited = true;
			waits++;
			goto again;
		}
		sync = tier_drop_rec_locked(t, r) || waited;
		atomic_fetch_add(&t->l3n->superseded, 1);
	}
	tier_unlock(t);
	if (sync)
		tier_l2_sync_frees(t);
}

static void on_key(void *arg, const char *ns, size_t nslen,
		   const struct kvfs_key *key, const uint64_t *sum)
{
	char name[KVFS_NS_NAME_MAX + 1];

	if (nslen == 0 || nslen > KVFS_NS_NAME_MAX)
		return;
	memcpy(name, ns, nslen);
	name[nslen] = '\0';
	if (sum)
		superseded(arg, name, key, *sum);
	tier_wait_wake_name(arg, name, key);
}

static void on_resync(void *arg)
{
	tier_wait_wake_all(arg);
}

static void on_log(void *arg, const char *msg)
{
	tier_log(arg, "%s", msg);
}

int tier_l3_notify_open(struct tier *t, struct l3 *store)
{
	const struct tier_config *c = &t->cfg;
	struct tier_l3_notify *tn;
	struct l3n_config nc = {
		.prefix = c->l3_prefix, .user = c->l3_user,
		.password = c->l3_password,
		.timeout_ms = c->l3_timeout_ms ? c->l3_timeout_ms
					       : L3_TIMEOUT_MS_DEFAULT,
		.on_key = on_key, .on_resync = on_resync, .log = on_log,
		.arg = t,
	};
	int rc;

	if (!t->l3 || c->l3_notify_off)
		return 0;
	tn = calloc(1, sizeof(*tn));
	if (!tn)
		return -ENOMEM;
	tn->l3 = store;
	nc.r = l3_redis(tn->l3);
	rc = l3n_open(&nc, &tn->n);
	if (rc) {
		free(tn);
		return rc;
	}
	t->l3n = tn;
	return 0;
}

void tier_l3_notify_stop(struct tier *t)
{
	if (t->l3n)
		l3n_stop(t->l3n->n);
}

void tier_l3_notify_close(struct tier *t)
{
	if (!t->l3n)
		return;
	l3n_close(t->l3n->n);
	free(t->l3n);
	t->l3n = NULL;
}

void tier_l3_notify_stored(struct tier *t, const char *ns,
			   const struct kvfs_key *key, const uint64_t *sum)
{
	char k[L3_KEY_MAX];
	size_t klen;

	if (!t->l3n)
		return;
	klen = l3_key(t->l3n->l3, ns, key, k);
	(void)l3n_publish(t->l3n->n, ns, key, k, klen, sum);
}

void tier_l3_notify_stats(struct tier *t, struct l3n_stats *st)
{
	l3n_get_stats(t->l3n ? t->l3n->n : NULL, st);
}

/* tier_wait.h: the waiters' counters (tier_wait.c) and the notifications'
 * (here), together. */
void tier_wait_stats(struct tier *t, struct tier_wait_stats *st)
{
	struct l3n_stats ns;

	tier_wait_queue_stats(t, st);
	tier_l3_notify_stats(t, &ns);
	st->notify_sent = ns.published;
	st->notify_errors = ns.pub_errors;
	st->notify_received = ns.received;
	st->notify_resubscribes = ns.resubscribes;
	st->notify_subscribed = ns.subscribed;
	st->notify_superseded = t->l3n ? atomic_load(&t->l3n->superseded) : 0;
}
