/*
 * l3_redis.c - the L3 Redis client: standalone or cluster routing, slot
 * map refreshes, MOVED / ASK, batches pipelined per node (l3_redis.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "tier/l3/l3_redis.h"

#define L3R_REFRESH_EVERY_MS 5000 /* a periodic look at the map */

struct l3r {
	struct l3_conn_cfg ccfg;   /* immutable */
	char *password;            /* immutable: ccfg.password, NULL = none */
	char *user;                /* immutable: ccfg.user, NULL = default */
	enum l3r_mode want;        /* immutable: the configured mode */
	int timeout_ms;            /* immutable */
	void (*log)(void *arg, const char *msg);
	void *log_arg;

	pthread_mutex_t mu;        /* protects the fields below */
	pthread_cond_t cv;         /* wakes the refresh thread */
	struct l3_node *nodes[L3R_MAX_NODES]; /* never removed before close */
	int nnodes, nseeds;
	int16_t slot_node[L3_SLOTS]; /* node index, -1 = not served */
	enum l3r_mode mode;        /* L3R_AUTO until known */
	bool want_refresh, stop, mismatch_logged;
	pthread_t th;
	bool th_started;

	_Atomic uint64_t moved, ask, refreshes;
};

static void r_logf(struct l3r *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void r_logf(struct l3r *r, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	if (!r->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->log(r->log_arg, msg);
}

int l3r_format(struct l3_cmd *cmd, int argc, const char **argv,
	       const size_t *lens)
{
	char *buf;
	int len = redisFormatCommandArgv(&buf, argc, argv, lens);

	if (len < 0)
		return -ENOMEM;
	cmd->buf = buf;
	cmd->len = (size_t)len;
	return 0;
}

void l3r_cmd_free(struct l3_cmd *cmd)
{
	if (cmd->buf)
		redisFreeCommand((char *)cmd->buf);
	cmd->buf = NULL;
	cmd->len = 0;
}

/* ------------------------------------------------------------- nodes */

/* The index of the node at addr, added when new; -ENOSPC. r->mu held. */
static int node_index(struct l3r *r, const struct l3_addr *a)
{
	for (int i = 0; i < r->nnodes; i++) {
		const struct l3_addr *b = l3_node_addr(r->nodes[i]);

		if (b->port == a->port && !strcmp(b->host, a->host))
			return i;
	}
	if (r->nnodes == L3R_MAX_NODES)
		return -ENOSPC;
	r->nodes[r->nnodes] = l3_node_new(a, &r->ccfg);
	if (!r->nodes[r->nnodes])
		return -ENOMEM;
	return r->nnodes++;
}

/* An address as a reply gives it: an empty host is the replier's. */
static void fill_host(struct l3_addr *a, const struct l3_node *from)
{
	if (!a->host[0])
		strcpy(a->host, l3_node_addr(from)->host);
}

static void kick_refresh(struct l3r *r)
{
	pthread_mutex_lock(&r->mu);
	if (r->want != L3R_STANDALONE) {
		r->want_refresh = true;
		pthread_cond_signal(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
}

/* Applies a CLUSTER SLOTS reply from node `from`. */
static int apply_slots(struct l3r *r, const redisReply *rep,
		       const struct l3_node *from)
{
	struct l3_slot_range *v;
	long n = l3_slots_parse(rep, &v);

	if (n < 0)
		return (int)n;
	pthread_mutex_lock(&r->mu);
	for (unsigned s = 0; s < L3_SLOTS; s++)
		r->slot_node[s] = -1;
	for (long i = 0; i < n; i++) {
		int k;

		fill_host(&v[i].master, from);
		k = node_index(r, &v[i].master);
		if (k < 0)
			continue; /* those slots miss */
		for (unsigned s = v[i].first; s <= v[i].last; s++)
			r->slot_node[s] = (int16_t)k;
	}
	r->mode = L3R_CLUSTER;
	pthread_mutex_unlock(&r->mu);
	atomic_fetch_add(&r->refreshes, 1);
	free(v);
	return 0;
}

/*
 * Asks the known nodes, seeds first, for the slot map until one answers;
 * learns the mode on the way. 0, -EINVAL (the mode differs from the one
 * configured), -EACCES (password refused), -EPERM (a password is needed
 * and none was given), or the last node's error.
 */
static int refresh(struct l3r *r)
{
	static const char *argv[2] = { "CLUSTER", "SLOTS" };
	static const size_t lens[2] = { 7, 5 };
	struct l3_node *list[L3R_MAX_NODES];
	struct l3_cmd cmd;
	int n, err = -EHOSTDOWN;

	if (l3r_format(&cmd, 2, argv, lens))
		return -ENOMEM;
	pthread_mutex_lock(&r->mu);
	n = r->nnodes;
	memcpy(list, r->nodes, sizeof(list[0]) * (size_t)n);
	pthread_mutex_unlock(&r->mu);
	for (int i = 0; i < n; i++) {
		uint64_t dl = l3_now_ns() + (uint64_t)r->timeout_ms * 1000000;
		redisReply *rep;

		err = l3_node_pipeline(list[i], &cmd, 1, &rep, dl);
		if (err)
			continue;
		if (rep->type == REDIS_REPLY_ERROR &&
		    !strncmp(rep->str, "NOAUTH", 6)) {
			/* a password is needed and none was given */
			r_logf(r, "l3: %s:%d: %s", l3_node_addr(list[i])->host,
			       l3_node_addr(list[i])->port, rep->str);
			err = -EPERM;
		} else if (rep->type == REDIS_REPLY_ERROR &&
		    strstr(rep->str, "cluster support disabled")) {
			err = 0;
			pthread_mutex_lock(&r->mu);
			if (r->want == L3R_CLUSTER) {
				err = -EINVAL;
			} else {
				r->mode = L3R_STANDALONE;
				for (unsigned s = 0; s < L3_SLOTS; s++)
					r->slot_node[s] = 0;
			}
			pthread_mutex_unlock(&r->mu);
		} else if (r->want == L3R_STANDALONE) {
			err = -EINVAL;
		} else {
			err = apply_slots(r, rep, list[i]);
			if (err)
				r_logf(r, "l3: CLUSTER SLOTS from %s:%d: %s",
				       l3_node_addr(list[i])->host,
				       l3_node_addr(list[i])->port,
				       strerror(-err));
		}
		freeReplyObject(rep);
		if (err != -EPROTO)
			break;
	}
	l3r_cmd_free(&cmd);
	return err;
}

static void *refresh_main(void *arg)
{
	struct l3r *r = arg;
	pthread_mutex_lock(&r->mu);
	while (!r->stop) {
		struct timespec ts;
		/* a standalone server has no map: only asked again when
		 * something failed */
		uint64_t wait_ms = r->want_refresh ? 0
				   : r->mode == L3R_STANDALONE
					   ? 3600000
					   : L3R_REFRESH_EVERY_MS;
		uint64_t at = l3_now_ns() + wait_ms * 1000000ull;
		int err;

		ts.tv_sec = (time_t)(at / 1000000000ull);
		ts.tv_nsec = (long)(at % 1000000000ull);
		if (wait_ms)
			pthread_cond_timedwait(&r->cv, &r->mu, &ts);
		if (r->stop)
			break;
		r->want_refresh = false;
		pthread_mutex_unlock(&r->mu);
		err = refresh(r);
		if (err == -EINVAL && !r->mismatch_logged) {
			r->mismatch_logged = true;
			r_logf(r, "l3: the server's mode is not the l3_cluster "
				  "configured: L3 misses until it is");
		}
		/* at most one refresh per L3R_REFRESH_MIN_MS */
		struct timespec nap = { 0, L3R_REFRESH_MIN_MS * 1000000l };
		nanosleep(&nap, NULL);
		pthread_mutex_lock(&r->mu);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* --------------------------------------------------------- open / close */

static int parse_servers(struct l3r *r, const char *s, char *errbuf,
			 size_t errlen)
{
	const char *p = s;

	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		struct l3_addr a;

		if (len >= 8 && !strncmp(p, "redis://", 8)) {
			p += 8;
			len -= 8;
		}
		if (!len || l3_addr_parse(p, len, &a) || !a.host[0] ||
		    strpbrk(a.host, "/@ ")) {
			snprintf(errbuf, errlen,
				 "l3: bad server address '%.*s' (want "
				 "redis://HOST:PORT[,HOST:PORT...])",
				 (int)len, p);
			return -EINVAL;
		}
		if (node_index(r, &a) < 0) {
			snprintf(errbuf, errlen, "l3: too many servers");
			return -EINVAL;
		}
		p += len;
		if (*p == ',' && !*++p)
			len = 0; /* a trailing comma */
		if (!len) {
			snprintf(errbuf, errlen, "l3: empty server address");
			return -EINVAL;
		}
	}
	if (!r->nnodes) {
		snprintf(errbuf, errlen, "l3: no server address");
		return -EINVAL;
	}
	return 0;
}

int l3r_open(const struct l3r_config *cfg, struct l3r **out, char *errbuf,
	     size_t errlen)
{
	struct l3r *r = calloc(1, sizeof(*r));
	pthread_condattr_t ca;
	int err;

	if (!r)
		return -ENOMEM;
	if ((cfg->password && !(r->password = strdup(cfg->password))) ||
	    (cfg->user && !(r->user = strdup(cfg->user)))) {
		free(r->password);
		free(r);
		return -ENOMEM;
	}
	r->ccfg.password = r->password;
	r->ccfg.user = r->user;
	r->ccfg.pool = cfg->pool ? cfg->pool : 4;
	r->ccfg.log = cfg->log;
	r->ccfg.log_arg = cfg->log_arg;
	r->want = cfg->mode;
	r->mode = cfg->mode == L3R_STANDALONE ? L3R_STANDALONE : L3R_AUTO;
	r->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 50;
	r->log = cfg->log;
	r->log_arg = cfg->log_arg;
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	for (unsigned s = 0; s < L3_SLOTS; s++)
		r->slot_node[s] = r->mode == L3R_STANDALONE ? 0 : -1;

	err = parse_servers(r, cfg->servers ? cfg->servers : "", errbuf,
			    errlen);
	if (err)
		goto fail;
	r->nseeds = r->nnodes;
	if (r->want == L3R_STANDALONE && r->nnodes > 1) {
		snprintf(errbuf, errlen, "l3: l3_cluster=no takes one server");
		err = -EINVAL;
		goto fail;
	}
	/* a standalone server is asked too: a cluster node contradicts
	 * l3_cluster=no (and a wrong password fails the mount either way) */
	err = refresh(r);
	if (err == -EINVAL || err == -EACCES || err == -EPERM) {
		snprintf(errbuf, errlen, "%s",
			 err == -EACCES
				 ? "l3: the server refused the password"
			 : err == -EPERM
				 ? "l3: the server wants a password "
				   "(l3_auth_file=)"
			 : r->want == L3R_CLUSTER
				 ? "l3: l3_cluster=yes but the server has "
				   "cluster support disabled"
				 : "l3: l3_cluster=no but the server is a "
				   "cluster node");
		goto fail;
	}
	if (err)
		r_logf(r, "l3: no server answered yet (%s)%s", strerror(-err),
		       r->want == L3R_STANDALONE ? ""
						 : "; retrying in the background");
	err = 0;
	if (r->want != L3R_STANDALONE) {
		err = pthread_create(&r->th, NULL, refresh_main, r);
		if (err) {
			err = -err;
			goto fail;
		}
		r->th_started = true;
	}
	*out = r;
	return 0;
fail:
	l3r_close(r);
	return err;
}

void l3r_close(struct l3r *r)
{
	if (!r)
		return;
	if (r->th_started) {
		pthread_mutex_lock(&r->mu);
		r->stop = true;
		pthread_cond_signal(&r->cv);
		pthread_mutex_unlock(&r->mu);
		pthread_join(r->th, NULL);
	}
	for (int i = 0; i < r->nnodes; i++)
		l3_node_free(r->nodes[i]);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	if (r->password) {
		explicit_bzero(r->password, strlen(r->password));
		free(r->password);
	}
	free(r->user);
	free(r);
}

/* ------------------------------------------------------------- batches */

static const char asking_buf[] = "*1\r\n$6\r\nASKING\r\n";

/* Sets op->node for a pending op; false (err set) when it cannot go. */
static bool route(struct l3r *r, struct l3r_op *op, bool *want_refresh)
{
	int k;

	if (op->node >= 0)
		return true;
	k = r->mode == L3R_STANDALONE ? 0
	    : r->mode == L3R_CLUSTER
		    ? r->slot_node[l3_key_slot(op->key, op->klen)]
		    : -1;
	if (k < 0) {
		op->err = -EHOSTDOWN;
		*want_refresh = true;
		return false;
	}
	op->node = k;
	return true;
}

/* The reply of one op: done, or a redirection to follow (op stays
 * pending: -EAGAIN). */
static void take_reply(struct l3r *r, struct l3r_op *op, redisReply *rep,
		       struct l3_node *from, bool *want_refresh)
{
	struct l3_redirect rd;
	int k;

	if (rep->type != REDIS_REPLY_ERROR) {
		op->reply = rep;
		op->err = 0;
		return;
	}
	if (l3_redirect_parse(rep->str, rep->len, &rd)) {
		if (!strncmp(rep->str, "CLUSTERDOWN", 11) ||
		    !strncmp(rep->str, "TRYAGAIN", 8)) {
			freeReplyObject(rep);
			op->err = -EHOSTDOWN;
			*want_refresh = true;
			return;
		}
		op->reply = rep;
		op->err = -EREMOTEIO;
		return;
	}
	freeReplyObject(rep);
	if (++op->hops > L3R_MAX_REDIRECTS) {
		op->err = -ELOOP;
		*want_refresh = true;
		return;
	}
	fill_host(&rd.to, from);
	pthread_mutex_lock(&r->mu);
	k = node_index(r, &rd.to);
	if (k >= 0 && !rd.ask)
		r->slot_node[rd.slot] = (int16_t)k;
	pthread_mutex_unlock(&r->mu);
	if (k < 0) {
		op->err = k;
		return;
	}
	atomic_fetch_add(rd.ask ? &r->ask : &r->moved, 1);
	if (!rd.ask)
		*want_refresh = true;
	op->node = k;
	op->ask = rd.ask;
	op->err = -EAGAIN;
}

long l3r_batch(struct l3r *r, struct l3r_op *ops, size_t n,
	       uint64_t deadline_ns)
{
	return l3r_batch_idle(r, ops, n, deadline_ns, 0);
}

long l3r_batch_idle(struct l3r *r, struct l3r_op *ops, size_t n,
		    uint64_t deadline_ns, uint64_t idle_ns)
{
	struct l3_pipe pipes[L3R_MAX_NODES];
	size_t cnt[L3R_MAX_NODES], start[L3R_MAX_NODES], pos[L3R_MAX_NODES];
	struct l3_cmd *cmds = NULL;
	redisReply **reps = NULL;
	long *who = NULL; /* op index of each command; -1 for ASKING */
	bool want_refresh = false;
	size_t pending = n, ok = 0;

	for (size_t i = 0; i < n; i++) {
		ops[i].reply = NULL;
		ops[i].err = -EAGAIN;
		ops[i].node = -1;
		ops[i].ask = false;
		ops[i].hops = 0;
	}
	if (!n)
		return 0;
	cmds = malloc(2 * n * sizeof(*cmds));
	reps = malloc(2 * n * sizeof(*reps));
	who = malloc(2 * n * sizeof(*who));
	if (!cmds || !reps || !who) {
		for (size_t i = 0; i < n; i++)
			ops[i].err = -ENOMEM;
		pending = 0;
	}
	while (pending) {
		struct l3_node *nodes[L3R_MAX_NODES];
		size_t total = 0;
		int nn;

		memset(cnt, 0, sizeof(cnt));
		pthread_mutex_lock(&r->mu);
		nn = r->nnodes;
		memcpy(nodes, r->nodes, sizeof(nodes[0]) * (size_t)nn);
		for (size_t i = 0; i < n; i++)
			if (ops[i].err == -EAGAIN &&
			    route(r, &ops[i], &want_refresh))
				cnt[ops[i].node] += ops[i].ask ? 2 : 1;
		pthread_mutex_unlock(&r->mu);
		for (int k = 0; k < nn; k++) {
			start[k] = pos[k] = total;
			total += cnt[k];
		}
		for (size_t i = 0; i < n; i++) {
			struct l3r_op *op = &ops[i];

			if (op->err != -EAGAIN)
				continue;
			if (op->ask) {
				cmds[pos[op->node]].buf = asking_buf;
				cmds[pos[op->node]].len = sizeof(asking_buf) - 1;
				who[pos[op->node]++] = -1;
			}
			cmds[pos[op->node]] = op->cmd;
			who[pos[op->node]++] = (long)i;
		}
		/* every node's pipeline goes out before any reply is read */
		for (int k = 0; k < nn; k++)
			if (cnt[k])
				l3_pipe_send(&pipes[k], nodes[k], cmds + start[k],
					     cnt[k], deadline_ns,
					     idle_ns ? idle_ns
						     : (uint64_t)r->timeout_ms *
							       1000000);
		for (int k = 0; k < nn; k++) {
			int err;

			if (!cnt[k])
				continue;
			err = l3_pipe_recv(&pipes[k], reps + start[k],
					   deadline_ns);
			for (size_t j = start[k]; j < start[k] + cnt[k]; j++) {
				struct l3r_op *op;

				if (who[j] < 0) { /* ASKING's +OK */
					if (reps[j])
						freeReplyObject(reps[j]);
					continue;
				}
				op = &ops[who[j]];
				op->ask = false;
				if (err) {
					op->err = err;
					continue;
				}
				take_reply(r, op, reps[j], nodes[k],
					   &want_refresh);
			}
			/* a node lost in a cluster (or still backing off):
			 * maybe a failover moved its slots; the refresh
			 * thread asks at most every L3R_REFRESH_MIN_MS */
			if (err && r->mode == L3R_CLUSTER)
				want_refresh = true;
		}
		pending = 0;
		for (size_t i = 0; i < n; i++)
			if (ops[i].err == -EAGAIN)
				pending++;
	}
	for (size_t i = 0; i < n; i++)
		if (!ops[i].err)
			ok++;
	free(cmds);
	free(reps);
	free(who);
	if (want_refresh)
		kick_refresh(r);
	return (long)ok;
}

long l3r_get_bulk(struct l3r *r, const char *key, size_t klen,
		  const struct l3_cmd *cmd, const struct l3_sink *sink,
		  struct redisReply **other, bool *sink_err,
		  uint64_t deadline_ns)
{
	struct l3r_op op = { .key = key, .klen = klen, .cmd = *cmd,
			     .node = -1 };
	bool want_refresh = false;
	long err;

	*other = NULL;
	*sink_err = false;
	for (;;) {
		struct l3_cmd cmds[2];
		struct l3_node *node;
		struct l3_pipe pipe;
		redisReply *rep = NULL;
		size_t nc = 0;
		bool ok;

		pthread_mutex_lock(&r->mu);
		ok = route(r, &op, &want_refresh);
		node = ok ? r->nodes[op.node] : NULL;
		pthread_mutex_unlock(&r->mu);
		if (!ok) {
			err = op.err;
			break;
		}
		if (op.ask) {
			cmds[nc].buf = asking_buf;
			cmds[nc++].len = sizeof(asking_buf) - 1;
		}
		cmds[nc++] = op.cmd;
		op.ask = false;
		l3_pipe_send(&pipe, node, cmds, nc, deadline_ns,
			     (uint64_t)r->timeout_ms * 1000000);
		err = l3_pipe_recv_bulk(&pipe, sink, &rep, sink_err,
					deadline_ns);
		if (err == 1) {
			take_reply(r, &op, rep, node, &want_refresh);
			if (op.err == -EAGAIN)
				continue; /* MOVED or ASK: to the node named */
			err = op.err ? op.err : 1;
			if (op.err && op.reply)
				freeReplyObject(op.reply);
			else if (!op.err)
				*other = op.reply;
		} else if (err && !*sink_err && r->mode == L3R_CLUSTER) {
			want_refresh = true; /* as l3r_batch: a lost node */
		}
		break;
	}
	if (want_refresh)
		kick_refresh(r);
	return err;
}

/* --------------------------------------------------------------- misc */

int l3r_each_master(struct l3r *r,
		    int (*fn)(void *arg, struct l3_node *node), void *arg)
{
	bool seen[L3R_MAX_NODES] = { false };
	struct l3_node *list[L3R_MAX_NODES];
	int n = 0, err = 0;

	pthread_mutex_lock(&r->mu);
	if (r->mode == L3R_STANDALONE) {
		list[n++] = r->nodes[0];
	} else if (r->mode == L3R_CLUSTER) {
		for (unsigned s = 0; s < L3_SLOTS; s++) {
			int k = r->slot_node[s];

			if (k >= 0 && !seen[k]) {
				seen[k] = true;
				list[n++] = r->nodes[k];
			}
		}
	} else {
		err = -EHOSTDOWN;
	}
	pthread_mutex_unlock(&r->mu);
	for (int i = 0; i < n && !err; i++)
		err = fn(arg, list[i]);
	return err;
}

enum l3r_mode l3r_mode_now(struct l3r *r)
{
	enum l3r_mode m;

	pthread_mutex_lock(&r->mu);
	m = r->mode;
	pthread_mutex_unlock(&r->mu);
	return m;
}

void l3r_get_stats(struct l3r *r, struct l3r_stats *st)
{
	struct l3_node *list[L3R_MAX_NODES];
	int n;

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&r->mu);
	n = r->nnodes;
	memcpy(list, r->nodes, sizeof(list[0]) * (size_t)n);
	st->cluster = r->mode == L3R_CLUSTER;
	pthread_mutex_unlock(&r->mu);
	st->nodes = (uint64_t)n;
	for (int i = 0; i < n; i++) {
		struct l3_conn_stats *c = l3_node_stats(list[i]);

		st->nodes_down += l3_node_down(list[i]);
		st->connects += atomic_load(&c->connects);
		st->failures += atomic_load(&c->failures);
		st->timeouts += atomic_load(&c->timeouts);
		st->backoffs += atomic_load(&c->backoffs);
		st->roundtrips += atomic_load(&c->roundtrips);
	}
	st->moved = atomic_load(&r->moved);
	st->ask = atomic_load(&r->ask);
	st->refreshes = atomic_load(&r->refreshes);
}
