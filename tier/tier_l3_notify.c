/*
 * tier_l3_notify.c - the engine's side of L3 notifications
 * (tier/l3/l3_notify.h): after the L3 writer stored a chunk, it is
 * announced (tier_l3_notify_stored); a notification from any node wakes
 * this node's waiters on that key (tier_wait.h), and a subscription that
 * comes back after a gap wakes every waiter to re-check.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tier/l3/l3.h"
#include "tier/l3/l3_notify.h"
#include "tier/tier_i.h"
#include "tier/tier_wait.h"

struct tier_l3_notify {
	struct l3n *n;
	struct l3 *l3;
};

static void on_key(void *arg, const char *ns, size_t nslen,
		   const struct kvfs_key *key)
{
	char name[KVFS_NS_NAME_MAX + 1];

	if (nslen == 0 || nslen > KVFS_NS_NAME_MAX)
		return;
	memcpy(name, ns, nslen);
	name[nslen] = '\0';
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
			   const struct kvfs_key *key)
{
	char k[L3_KEY_MAX];
	size_t klen;

	if (!t->l3n)
		return;
	klen = l3_key(t->l3n->l3, ns, key, k);
	(void)l3n_publish(t->l3n->n, ns, key, k, klen);
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
}
