/*
 * l3_notify.c - L3 store notifications (l3_notify.h): the channel of a
 * key, PUBLISH / SPUBLISH through the L3 client, and the subscriber
 * thread with its own hiredis connections, one per master.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "tier/l3/l3.h"
#include "tier/l3/l3_notify.h"
#include "tier/l3/l3_slot.h"

#define L3N_SUFFIX "handoff"
#define L3N_SUM_LEN 16 /* hex digits of a version's raw checksum */
#define L3N_MAX_CONNS L3R_MAX_NODES

struct l3n {
	struct l3n_config cfg;      /* (imm) strings point below */
	char prefix[L3_PREFIX_MAX + 1];
	char *user, *password;      /* (imm) copies */
	uint32_t tag[L3_SLOTS];     /* (imm) a tag whose slot is the index */
	pthread_t th;
	bool started;
	int stop_fd[2];             /* a pipe: written once to stop */
	_Atomic bool stop;
	_Atomic uint64_t published, pub_errors, received, resubscribes,
		subscribed;
};

/* One subscribed connection (the subscriber thread's only). */
struct sub {
	redisContext *c;
	struct l3_addr addr;
	long pending;               /* subscribe confirmations to come */
};

static void logf_(struct l3n *n, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void logf_(struct l3n *n, const char *fmt, ...)
{
	char msg[320];
	va_list ap;

	if (!n->cfg.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	n->cfg.log(n->cfg.arg, msg);
}

/* --------------------------------------------------------- channels */

/* For every slot the smallest decimal tag that hashes to it (about
 * 160,000 CRC16s of a few bytes: a millisecond, once). */
static void build_tags(struct l3n *n)
{
	static bool seen[L3_SLOTS];
	unsigned left = L3_SLOTS;
	char s[16];

	memset(seen, 0, sizeof(seen));
	for (uint32_t i = 0; left; i++) {
		int len = snprintf(s, sizeof(s), "%u", i);
		unsigned slot = l3_crc16(s, (size_t)len) & (L3_SLOTS - 1);

		if (!seen[slot]) {
			seen[slot] = true;
			n->tag[slot] = i;
			left--;
		}
	}
}

/* The channel of slot (cluster) or the one channel (slot < 0). */
static int channel(const struct l3n *n, int slot, char *buf)
{
	if (slot < 0)
		return snprintf(buf, L3N_CHANNEL_MAX, "%s" L3N_SUFFIX,
				n->prefix);
	return snprintf(buf, L3N_CHANNEL_MAX, "{%u}%s" L3N_SUFFIX,
			n->tag[slot], n->prefix);
}

int l3n_publish(struct l3n *n, const char *ns, const struct kvfs_key *key,
		const char *l3key, size_t l3klen, const uint64_t *sum)
{
	enum l3r_mode mode = l3r_mode_now(n->cfg.r);
	char ch[L3N_CHANNEL_MAX],
		msg[KVFS_KEY_HEX_LEN + KVFS_NS_NAME_MAX + L3N_SUM_LEN + 2];
	const char *argv[3];
	size_t lens[3];
	struct l3r_op op;
	int chlen, rc;

	if (mode == L3R_AUTO) {
		rc = -EHOSTDOWN;
		goto out;
	}
	chlen = channel(n, mode == L3R_CLUSTER ?
				   (int)l3_key_slot(l3key, l3klen) : -1, ch);
	kvfs_key_hex(key, msg);
	if (sum) /* a path file's version: "<key><ns>/<raw_sum>" */
		snprintf(msg + KVFS_KEY_HEX_LEN, sizeof(msg) - KVFS_KEY_HEX_LEN,
			 "%s/%016" PRIx64, ns, *sum);
	else
		snprintf(msg + KVFS_KEY_HEX_LEN,
			 sizeof(msg) - KVFS_KEY_HEX_LEN, "%s", ns);
	argv[0] = mode == L3R_CLUSTER ? "SPUBLISH" : "PUBLISH";
	argv[1] = ch;
	argv[2] = msg;
	lens[0] = strlen(argv[0]);
	lens[1] = (size_t)chlen;
	lens[2] = strlen(msg);
	memset(&op, 0, sizeof(op));
	/* the channel's slot is the key's: routed to the key's master */
	op.key = ch;
	op.klen = (size_t)chlen;
	rc = l3r_format(&op.cmd, 3, argv, lens);
	if (rc)
		goto out;
	l3r_batch(n->cfg.r, &op, 1,
		  l3_now_ns() + (uint64_t)n->cfg.timeout_ms * 1000000ull);
	rc = op.err;
	if (op.reply)
		freeReplyObject(op.reply);
	l3r_cmd_free(&op.cmd);
out:
	atomic_fetch_add(rc ? &n->pub_errors : &n->published, 1);
	return rc;
}

/* ------------------------------------------------------- subscriber */

static struct timeval tv_ms(int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	return tv;
}

/* A blocking connection to addr with AUTH, bounded by the timeout. */
static redisContext *sub_connect(struct l3n *n, const struct l3_addr *a)
{
	int ms = n->cfg.timeout_ms > 500 ? n->cfg.timeout_ms : 500;
	redisContext *c = redisConnectWithTimeout(a->host, a->port, tv_ms(ms));
	redisReply *r = NULL;

	if (!c)
		return NULL;
	if (c->err || redisSetTimeout(c, tv_ms(ms)) != REDIS_OK)
		goto fail;
	if (n->password) {
		if (n->user)
			r = redisCommand(c, "AUTH %s %s", n->user, n->password);
		else
			r = redisCommand(c, "AUTH %s", n->password);
		if (!r || r->type == REDIS_REPLY_ERROR)
			goto fail;
		freeReplyObject(r);
	}
	return c;
fail:
	if (r)
		freeReplyObject(r);
	logf_(n, "l3 notify: %s:%d: %s", a->host, a->port,
	      c->err ? c->errstr : "AUTH refused");
	redisFree(c);
	return NULL;
}

struct masters {
	struct l3_addr a[L3N_MAX_CONNS];
	int n;
};

static int add_master(void *arg, struct l3_node *node)
{
	struct masters *m = arg;

	if (m->n < L3N_MAX_CONNS)
		m->a[m->n++] = *l3_node_addr(node);
	return 0;
}

/* Subscribes c to the channels of slots [first, last] (pipelined). */
static int sub_slots(struct l3n *n, struct sub *s, unsigned first,
		     unsigned last)
{
	char ch[L3N_CHANNEL_MAX];

	for (unsigned slot = first; slot <= last; slot++) {
		const char *argv[2] = { "SSUBSCRIBE", ch };
		size_t lens[2] = { 10, 0 };

		lens[1] = (size_t)channel(n, (int)slot, ch);
		if (redisAppendCommandArgv(s->c, 2, argv, lens) != REDIS_OK)
			return -ENOMEM;
		s->pending++;
	}
	return 0;
}

/* The sub of addr in subs[0..*ns), opened when new; NULL on failure. */
static struct sub *sub_of(struct l3n *n, struct sub *subs, int *ns,
			  const struct l3_addr *a)
{
	for (int i = 0; i < *ns; i++)
		if (subs[i].addr.port == a->port &&
		    !strcmp(subs[i].addr.host, a->host))
			return &subs[i];
	if (*ns == L3N_MAX_CONNS)
		return NULL;
	subs[*ns].addr = *a;
	subs[*ns].pending = 0;
	subs[*ns].c = sub_connect(n, a);
	return subs[*ns].c ? &subs[(*ns)++] : NULL;
}

/* Cluster: the slot map from the first master, then every master's
 * slots' channels on a connection to it. */
static int sub_cluster(struct l3n *n, const struct masters *m,
		       struct sub *subs, int *ns)
{
	struct l3_slot_range *rg = NULL;
	redisContext *c = sub_connect(n, &m->a[0]);
	redisReply *r;
	long nr;
	int rc = 0;

	if (!c)
		return -EHOSTDOWN;
	r = redisCommand(c, "CLUSTER SLOTS");
	nr = r ? l3_slots_parse(r, &rg) : -EPROTO;
	if (r)
		freeReplyObject(r);
	for (long i = 0; i < nr && !rc; i++) {
		struct l3_addr a = rg[i].master;
		struct sub *s;

		if (!a.host[0])
			memcpy(a.host, m->a[0].host, sizeof(a.host));
		s = sub_of(n, subs, ns, &a);
		rc = s ? sub_slots(n, s, rg[i].first, rg[i].last) : -EHOSTDOWN;
	}
	free(rg);
	redisFree(c);
	return nr < 0 ? (int)nr : rc;
}

/* Opens and subscribes every connection; the subscriptions are in place
 * once every pending confirmation came (see listen_all). */
static int sub_all(struct l3n *n, struct sub *subs, int *ns)
{
	struct masters m = { .n = 0 };
	enum l3r_mode mode = l3r_mode_now(n->cfg.r);
	int rc;

	*ns = 0;
	if (mode == L3R_AUTO ||
	    l3r_each_master(n->cfg.r, add_master, &m) || m.n == 0)
		return -EHOSTDOWN;
	if (mode == L3R_CLUSTER) {
		rc = sub_cluster(n, &m, subs, ns);
	} else {
		char ch[L3N_CHANNEL_MAX];
		struct sub *s = sub_of(n, subs, ns, &m.a[0]);
		const char *argv[2] = { "SUBSCRIBE", ch };
		size_t lens[2] = { 9, 0 };

		lens[1] = (size_t)channel(n, -1, ch);
		rc = !s ? -EHOSTDOWN
		     : redisAppendCommandArgv(s->c, 2, argv, lens) != REDIS_OK
			     ? -ENOMEM
			     : 0;
		if (s && !rc)
			s->pending = 1;
	}
	for (int i = 0; i < *ns && !rc; i++) {
		int done = 0;

		while (!done && !rc)
			if (redisBufferWrite(subs[i].c, &done) != REDIS_OK)
				rc = -EPIPE;
	}
	return rc;
}

/* A message's payload: "<key hex><ns>" or "<key hex><ns>/<raw_sum hex>"
 * (l3n_publish); anything else is not ours and ignored. */
static void on_message(struct l3n *n, const char *p, size_t len)
{
	const char *ns, *slash;
	struct kvfs_key key;
	uint64_t sum = 0;
	size_t nslen;

	if (len <= KVFS_KEY_HEX_LEN || kvfs_key_parse(p, KVFS_KEY_HEX_LEN, &key))
		return;
	ns = p + KVFS_KEY_HEX_LEN;
	nslen = len - KVFS_KEY_HEX_LEN;
	slash = memchr(ns, '/', nslen);
	if (slash) {
		char h[L3N_SUM_LEN + 1];

		if (slash == ns || (size_t)(p + len - slash - 1) != L3N_SUM_LEN)
			return;
		memcpy(h, slash + 1, L3N_SUM_LEN);
		h[L3N_SUM_LEN] = '\0';
		if (strspn(h, "0123456789abcdef") != L3N_SUM_LEN)
			return;
		sum = strtoull(h, NULL, 16);
		nslen = (size_t)(slash - ns);
	}
	atomic_fetch_add(&n->received, 1);
	n->cfg.on_key(n->cfg.arg, ns, nslen, &key, slash ? &sum : NULL);
}

/* One reply on a subscribed connection: 0, or -EAGAIN when the
 * subscriptions must be made again (dropped by the server, an error). */
static int on_reply(struct l3n *n, struct sub *s, redisReply *r,
		    long *pending)
{
	const redisReply *kind, *pay;

	if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
	    r->element[0]->type != REDIS_REPLY_STRING)
		return -EAGAIN; /* an error (MOVED...): the map changed */
	kind = r->element[0];
	pay = r->element[2];
	if (!strcmp(kind->str, "message") || !strcmp(kind->str, "smessage")) {
		if (pay->type == REDIS_REPLY_STRING)
			on_message(n, pay->str, pay->len);
		return 0;
	}
	if (!strcmp(kind->str, "subscribe") ||
	    !strcmp(kind->str, "ssubscribe")) {
		s->pending--;
		if (--*pending == 0) {
			/* every channel in place: waiters re-check what a
			 * gap may have hidden from them */
			atomic_store(&n->subscribed, 1);
			atomic_fetch_add(&n->resubscribes, 1);
			n->cfg.on_resync(n->cfg.arg);
		}
		return 0;
	}
	/* sunsubscribe: the server dropped a channel (its slot moved) */
	return -EAGAIN;
}

/* Reads notifications until a connection fails or stop. */
static int listen_all(struct l3n *n, struct sub *subs, int ns)
{
	struct pollfd pf[L3N_MAX_CONNS + 1];
	long pending = 0;

	for (int i = 0; i < ns; i++) {
		pf[i].fd = subs[i].c->fd;
		pf[i].events = POLLIN;
		pending += subs[i].pending;
	}
	pf[ns].fd = n->stop_fd[0];
	pf[ns].events = POLLIN;
	while (!atomic_load(&n->stop)) {
		if (poll(pf, (nfds_t)ns + 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (int i = 0; i < ns; i++) {
			void *rep;
			int rc = 0;

			if (!pf[i].revents)
				continue;
			if (redisBufferRead(subs[i].c) != REDIS_OK) {
				logf_(n, "l3 notify: %s:%d: %s (subscribing "
				      "again)", subs[i].addr.host,
				      subs[i].addr.port, subs[i].c->errstr);
				return -EPIPE;
			}
			while (!rc && redisGetReplyFromReader(subs[i].c, &rep) ==
					      REDIS_OK && rep) {
				rc = on_reply(n, &subs[i], rep, &pending);
				freeReplyObject(rep);
			}
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Sleeps ms unless stop comes first. */
static void nap(struct l3n *n, int ms)
{
	struct pollfd pf = { .fd = n->stop_fd[0], .events = POLLIN };

	(void)poll(&pf, 1, ms);
}

static void *sub_main(void *arg)
{
	struct l3n *n = arg;
	struct sub subs[L3N_MAX_CONNS];
	int backoff = L3N_BACKOFF_MIN_MS, ns = 0;

	while (!atomic_load(&n->stop)) {
		int rc = sub_all(n, subs, &ns);
		uint64_t before = atomic_load(&n->resubscribes);

		if (rc == 0)
			rc = listen_all(n, subs, ns);
		atomic_store(&n->subscribed, 0);
		/* a subscription that came up starts the backoff afresh */
		if (atomic_load(&n->resubscribes) != before)
			backoff = L3N_BACKOFF_MIN_MS;
		for (int i = 0; i < ns; i++)
			redisFree(subs[i].c);
		ns = 0;
		if (atomic_load(&n->stop))
			break;
		nap(n, backoff);
		backoff = backoff * 2 < L3N_BACKOFF_MAX_MS ? backoff * 2
							   : L3N_BACKOFF_MAX_MS;
	}
	return NULL;
}

/* ------------------------------------------------------------- life */

int l3n_open(const struct l3n_config *cfg, struct l3n **out)
{
	struct l3n *n = calloc(1, sizeof(*n));

	if (!n)
		return -ENOMEM;
	n->cfg = *cfg;
	snprintf(n->prefix, sizeof(n->prefix), "%s",
		 cfg->prefix ? cfg->prefix : L3_PREFIX_DEFAULT);
	n->user = cfg->user ? strdup(cfg->user) : NULL;
	n->password = cfg->password ? strdup(cfg->password) : NULL;
	n->stop_fd[0] = n->stop_fd[1] = -1;
	if ((cfg->user && !n->user) || (cfg->password && !n->password) ||
	    pipe2(n->stop_fd, O_CLOEXEC) < 0) {
		l3n_close(n);
		return -ENOMEM;
	}
	build_tags(n);
	if (pthread_create(&n->th, NULL, sub_main, n)) {
		l3n_close(n);
		return -EAGAIN;
	}
	n->started = true;
	*out = n;
	return 0;
}

void l3n_stop(struct l3n *n)
{
	if (!n)
		return;
	atomic_store(&n->stop, true);
	if (n->stop_fd[1] >= 0)
		(void)!write(n->stop_fd[1], "x", 1);
	if (n->started)
		pthread_join(n->th, NULL);
	n->started = false;
}

void l3n_close(struct l3n *n)
{
	if (!n)
		return;
	l3n_stop(n);
	for (int i = 0; i < 2; i++)
		if (n->stop_fd[i] >= 0)
			close(n->stop_fd[i]);
	free(n->user);
	if (n->password) {
		explicit_bzero(n->password, strlen(n->password));
		free(n->password);
	}
	free(n);
}

void l3n_get_stats(struct l3n *n, struct l3n_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!n)
		return;
	st->published = atomic_load(&n->published);
	st->pub_errors = atomic_load(&n->pub_errors);
	st->received = atomic_load(&n->received);
	st->resubscribes = atomic_load(&n->resubscribes);
	st->subscribed = atomic_load(&n->subscribed);
}
