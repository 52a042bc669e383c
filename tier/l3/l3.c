/*
 * l3.c - the L3 store: key layout, bounded reads, batched existence
 * lookups, the asynchronous write queue and its writer threads (l3.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "tier/l3/l3.h"

#define L3_BATCH_ITEMS 32
#define L3_BATCH_BYTES (16u << 20)
#define L3_SCAN_COUNT "1000"
#define L3_ADMIN_MS 2000 /* a round trip of l3_drop_ns at least */

struct l3_item {
	struct l3_item *next;
	bool del;
	size_t klen;
	char key[L3_KEY_MAX];
	struct l3_src src;     /* put */
	void *val;             /* put: the value, once built */
	size_t vlen;
	bool built;
	int tries;             /* put: failed tries so far */
	void (*done)(void *arg, int err); /* del: l3_del_cb's */
	void *done_arg;
};

/* One writer thread and its queue (a chunk always goes to the same one,
 * so its writes and deletions stay in order). */
struct l3_wq {
	pthread_mutex_t mu;    /* protects the fields below */
	pthread_cond_t cv;     /* work queued, or stop (CLOCK_MONOTONIC:
				* also the retry backoff's wait) */
	pthread_cond_t idle;   /* queue empty and nothing in flight */
	struct l3_item *head, *tail;
	size_t inflight;       /* items taken, not finished */
	bool stop;
	pthread_t th;
	bool started;
	struct l3 *l3;
};

struct l3 {
	struct l3r *r;
	char prefix[L3_PREFIX_MAX + 1]; /* immutable */
	size_t plen;
	int timeout_ms, wtimeout_ms;
	uint64_t max_chunk, queue_cap;
	void (*log)(void *arg, const char *msg);
	void *log_arg;
	_Atomic bool close_failed; /* a try failed while closing */

	struct l3_wq wq[L3_WRITERS];

	_Atomic uint64_t queued, queued_bytes;
	_Atomic uint64_t gets, hits, misses, corrupt, errors, bytes_in,
		bytes_out, puts, dels, drops, lookups, lookup_keys, get_ns,
		get_max_ns, retries, del_drops;
};

static void l3_logf(struct l3 *l3, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void l3_logf(struct l3 *l3, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	if (!l3->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	l3->log(l3->log_arg, msg);
}

/*
 * "{}" when the prefix or the name holds a '{': Redis Cluster would hash
 * only what a "{...}" in them encloses (a hash tag), putting every chunk
 * of the namespace in one slot. A leading "{}" is an empty tag, which
 * the specification ignores: the whole key is hashed. Other keys stay as
 * they are (and cannot collide: they hold no '{').
 */
static const char *untag(const struct l3 *l3, const char *ns)
{
	return strchr(l3->prefix, '{') ||
			       memchr(ns, '{', strnlen(ns, KVFS_NS_NAME_MAX))
		       ? "{}"
		       : "";
}

size_t l3_key(const struct l3 *l3, const char *ns, const struct kvfs_key *key,
	      char *buf)
{
	char hex[KVFS_KEY_HEX_LEN + 1];

	kvfs_key_hex(key, hex);
	return (size_t)snprintf(buf, L3_KEY_MAX, "%s%s%.*s:%s", untag(l3, ns),
				l3->prefix, KVFS_NS_NAME_MAX, ns, hex);
}

/* The deadline of an operation bounded by ms moving up to bytes of
 * values. */
static uint64_t deadline_ms(int ms, uint64_t bytes)
{
	return l3_now_ns() + (uint64_t)ms * 1000000ull +
	       bytes * 1000000000ull / L3_MIN_RATE;
}

/* ... of a read (l3_timeout_ms), of a batch of writes (the writers'). */
static uint64_t deadline(const struct l3 *l3, uint64_t bytes)
{
	return deadline_ms(l3->timeout_ms, bytes);
}

static uint64_t wdeadline(const struct l3 *l3, uint64_t bytes)
{
	return deadline_ms(l3->wtimeout_ms, bytes);
}

static int op_cmd(struct l3r_op *op, const char *cmd, const char *key,
		  size_t klen, const void *val, size_t vlen)
{
	const char *argv[3] = { cmd, key, val };
	size_t lens[3] = { strlen(cmd), klen, vlen };

	op->key = key;
	op->klen = klen;
	return l3r_format(&op->cmd, val ? 3 : 2, argv, lens);
}

static void op_done(struct l3r_op *op)
{
	if (op->reply)
		freeReplyObject(op->reply);
	op->reply = NULL;
	l3r_cmd_free(&op->cmd);
}

/* ---------------------------------------------------------------- reads */

/* Counts the time of a GET. */
static void get_time(struct l3 *l3, uint64_t t0)
{
	uint64_t dt = l3_now_ns() - t0, max;

	atomic_fetch_add(&l3->get_ns, dt);
	max = atomic_load(&l3->get_max_ns);
	while (dt > max &&
	       !atomic_compare_exchange_weak(&l3->get_max_ns, &max, dt))
		;
}

int l3_get(struct l3 *l3, const char *ns, const struct kvfs_key *key,
	   struct l3_val *v)
{
	char k[L3_KEY_MAX];
	struct l3r_op op = { 0 };
	uint64_t t0 = l3_now_ns();
	int err;

	v->data = NULL;
	v->len = 0;
	v->priv = NULL;
	err = op_cmd(&op, "GET", k, l3_key(l3, ns, key, k), NULL, 0);
	if (err)
		return err;
	atomic_fetch_add(&l3->gets, 1);
	l3r_batch(l3->r, &op, 1, deadline(l3, l3->max_chunk));
	err = op.err;
	if (!err && op.reply->type == REDIS_REPLY_NIL)
		err = -ENOENT;
	else if (!err && op.reply->type != REDIS_REPLY_STRING)
		err = -EREMOTEIO; /* a key of another type under our prefix */
	if (!err) {
		v->data = op.reply->str;
		v->len = op.reply->len;
		v->priv = op.reply;
		op.reply = NULL;
		atomic_fetch_add(&l3->hits, 1);
		atomic_fetch_add(&l3->bytes_in, v->len);
	} else {
		atomic_fetch_add(&l3->misses, 1);
		if (err != -ENOENT)
			atomic_fetch_add(&l3->errors, 1);
	}
	op_done(&op);
	get_time(l3, t0);
	return err;
}

/* A string reply given to a sink (hiredis parsed it already). */
static int sink_copy(const struct l3_sink *s, const redisReply *rep)
{
	size_t done = 0;
	int err = s->begin(s->arg, rep->len);

	while (!err && done < rep->len) {
		void *buf;
		size_t cap;

		err = s->room(s->arg, &buf, &cap);
		if (err)
			break;
		if (cap > rep->len - done)
			cap = rep->len - done;
		memcpy(buf, rep->str + done, cap);
		done += cap;
		err = s->got(s->arg, cap);
	}
	return err;
}

/* The sink of l3_get_into, counting the value's bytes. */
struct count_sink {
	const struct l3_sink *s;
	uint64_t len;
};

static int count_begin(void *arg, uint64_t len)
{
	struct count_sink *c = arg;

	c->len = len;
	return c->s->begin(c->s->arg, len);
}

static int count_room(void *arg, void **buf, size_t *cap)
{
	struct count_sink *c = arg;

	return c->s->room(c->s->arg, buf, cap);
}

static int count_got(void *arg, size_t n)
{
	struct count_sink *c = arg;

	return c->s->got(c->s->arg, n);
}

int l3_get_into(struct l3 *l3, const char *ns, const struct kvfs_key *key,
		const struct l3_sink *sink)
{
	struct count_sink cs = { .s = sink };
	struct l3_sink wrap = { count_begin, count_room, count_got, &cs };
	const char *argv[2];
	size_t lens[2];
	char k[L3_KEY_MAX];
	struct l3_cmd cmd;
	redisReply *other = NULL;
	uint64_t t0 = l3_now_ns();
	bool sink_err = false;
	long err;

	argv[0] = "GET";
	argv[1] = k;
	lens[0] = 3;
	lens[1] = l3_key(l3, ns, key, k);
	err = l3r_format(&cmd, 2, argv, lens);
	if (err)
		return (int)err;
	atomic_fetch_add(&l3->gets, 1);
	err = l3r_get_bulk(l3->r, k, lens[1], &cmd, &wrap, &other, &sink_err,
			   deadline(l3, l3->max_chunk));
	l3r_cmd_free(&cmd);
	if (err == 1) {
		err = other->type == REDIS_REPLY_NIL ? -ENOENT
		      : other->type == REDIS_REPLY_STRING
			      ? (sink_err = true, sink_copy(&wrap, other))
			      : -EREMOTEIO; /* a key of another type */
		if (other->type == REDIS_REPLY_STRING && !err)
			sink_err = false;
		freeReplyObject(other);
	}
	if (!err || sink_err) {
		atomic_fetch_add(&l3->hits, 1);
		atomic_fetch_add(&l3->bytes_in, cs.len);
	} else {
		atomic_fetch_add(&l3->misses, 1);
		if (err != -ENOENT)
			atomic_fetch_add(&l3->errors, 1);
	}
	get_time(l3, t0);
	return (int)err;
}

void l3_val_free(struct l3_val *v)
{
	if (v->priv)
		freeReplyObject(v->priv);
	v->priv = NULL;
	v->data = NULL;
	v->len = 0;
}

long l3_exists(struct l3 *l3, const char *ns, const struct kvfs_key *keys,
	       size_t n, uint8_t *present)
{
	struct l3r_op *ops;
	char (*k)[L3_KEY_MAX];
	size_t run = n, failed = 0;
	long err = 0;

	memset(present, 0, n);
	if (!n)
		return 0;
	ops = calloc(n, sizeof(*ops));
	k = malloc(n * sizeof(*k));
	if (!ops || !k) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n && !err; i++)
		err = op_cmd(&ops[i], "EXISTS", k[i],
			     l3_key(l3, ns, &keys[i], k[i]), NULL, 0);
	if (err)
		goto out;
	atomic_fetch_add(&l3->lookups, 1);
	atomic_fetch_add(&l3->lookup_keys, n);
	l3r_batch(l3->r, ops, n, deadline(l3, 0));
	for (size_t i = 0; i < n; i++) {
		present[i] = !ops[i].err &&
			     ops[i].reply->type == REDIS_REPLY_INTEGER &&
			     ops[i].reply->integer == 1;
		failed += ops[i].err != 0;
		if (!present[i] && run == n)
			run = i;
	}
	if (failed)
		atomic_fetch_add(&l3->errors, failed);
out:
	if (ops)
		for (size_t i = 0; i < n; i++)
			op_done(&ops[i]);
	free(ops);
	free(k);
	return err ? err : (long)run;
}

void l3_refused(struct l3 *l3)
{
	/* the GET that returned it was a miss after all, not a hit */
	atomic_fetch_sub(&l3->hits, 1);
	atomic_fetch_add(&l3->misses, 1);
}

int l3_del_bad(struct l3 *l3, const char *ns, const struct kvfs_key *key,
	       const void *bad, size_t len)
{
	/* compare-and-delete in one step on the server */
	static const char script[] =
		"if redis.call('GET', KEYS[1]) == ARGV[1] then "
		"return redis.call('UNLINK', KEYS[1]) end return 0";
	char k[L3_KEY_MAX];
	size_t klen = l3_key(l3, ns, key, k);
	const char *argv[5] = { "EVAL", script, "1", k, bad };
	size_t lens[5] = { 4, sizeof(script) - 1, 1, klen, len };
	struct l3r_op op = { .key = k, .klen = klen };
	int err;

	atomic_fetch_add(&l3->corrupt, 1);
	l3_refused(l3);
	err = l3r_format(&op.cmd, 5, argv, lens);
	if (err)
		return err;
	l3r_batch(l3->r, &op, 1, deadline(l3, len));
	err = op.err;
	if (err) {
		atomic_fetch_add(&l3->errors, 1);
		if (op.reply && op.reply->type == REDIS_REPLY_ERROR)
			l3_logf(l3, "l3: deleting a bad value of %s: %s", k,
				op.reply->str);
	}
	op_done(&op);
	return err;
}

/* ---------------------------------------------------------------- drop */

/* MATCH pattern of every key of a namespace: glob characters escaped. */
static void glob_escape(char *dst, size_t cap, const char *s)
{
	size_t j = 0;

	for (; *s && j + 3 < cap; s++) {
		if (strchr("*?[]\\", *s))
			dst[j++] = '\\';
		dst[j++] = *s;
	}
	dst[j] = '\0';
}

/* One lowercase hex digit of a key, as a MATCH pattern. */
#define HEX_CLASS "[0-9a-f]"

struct drop_ctx {
	struct l3 *l3;
	/* escaped prefix and name, ':', 32 hex classes */
	char pattern[2 + 2 * L3_PREFIX_MAX + 2 * KVFS_NS_NAME_MAX + 2 +
		     KVFS_KEY_HEX_LEN * (sizeof(HEX_CLASS) - 1) + 1];
	long deleted;
};

static int drop_node(void *arg, struct l3_node *node)
{
	struct drop_ctx *d = arg;
	struct l3 *l3 = d->l3;
	char cursor[32] = "0";
	int ms = l3->timeout_ms > L3_ADMIN_MS ? l3->timeout_ms : L3_ADMIN_MS;

	do {
		const char *argv[6] = { "SCAN", cursor, "MATCH", d->pattern,
					"COUNT", L3_SCAN_COUNT };
		size_t lens[6] = { 4, strlen(cursor), 5, strlen(d->pattern), 5,
				   strlen(L3_SCAN_COUNT) };
		struct l3_cmd cmd, *dels;
		redisReply *rep, *keys, **reps;
		int err;

		err = l3r_format(&cmd, 6, argv, lens);
		if (err)
			return err;
		err = l3_node_pipeline(node, &cmd, 1, &rep,
				       l3_now_ns() + ms * 1000000ull);
		l3r_cmd_free(&cmd);
		if (err)
			return err;
		if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
		    rep->element[0]->type != REDIS_REPLY_STRING ||
		    rep->element[1]->type != REDIS_REPLY_ARRAY ||
		    rep->element[0]->len >= sizeof(cursor)) {
			freeReplyObject(rep);
			return -EPROTO;
		}
		memcpy(cursor, rep->element[0]->str, rep->element[0]->len + 1);
		keys = rep->element[1];
		dels = calloc(keys->elements + 1, sizeof(*dels));
		reps = calloc(keys->elements + 1, sizeof(*reps));
		for (size_t i = 0; dels && reps && !err && i < keys->elements;
		     i++) {
			const char *dv[2] = { "UNLINK", keys->element[i]->str };
			size_t dl[2] = { 6, keys->element[i]->len };

			err = l3r_format(&dels[i], 2, dv, dl);
		}
		if (!dels || !reps)
			err = -ENOMEM;
		/* the keys SCAN gave live on this node: one pipeline */
		if (!err)
			err = l3_node_pipeline(node, dels, keys->elements, reps,
					       l3_now_ns() + ms * 1000000ull);
		for (size_t i = 0; dels && reps && i < keys->elements; i++) {
			if (!err && reps[i]->type == REDIS_REPLY_INTEGER)
				d->deleted += reps[i]->integer;
			if (reps[i])
				freeReplyObject(reps[i]);
			l3r_cmd_free(&dels[i]);
		}
		free(dels);
		free(reps);
		freeReplyObject(rep);
		if (err)
			return err;
	} while (strcmp(cursor, "0"));
	return 0;
}

long l3_drop_ns(struct l3 *l3, const char *ns)
{
	struct drop_ctx d = { .l3 = l3 };
	/* room for every byte escaped (glob_escape stops 3 short) */
	char esc_p[2 * L3_PREFIX_MAX + 3], esc_n[2 * KVFS_NS_NAME_MAX + 3];
	int err, len;

	glob_escape(esc_p, sizeof(esc_p), l3->prefix);
	glob_escape(esc_n, sizeof(esc_n), ns);
	/* exactly 32 hex digits after "<name>:", not '*': namespace "a"
	 * must not match the keys of namespace "a:b" */
	len = snprintf(d.pattern, sizeof(d.pattern), "%s%s%s:", untag(l3, ns),
		       esc_p, esc_n);
	for (int i = 0; i < KVFS_KEY_HEX_LEN; i++, len += sizeof(HEX_CLASS) - 1)
		memcpy(d.pattern + len, HEX_CLASS, sizeof(HEX_CLASS));
	err = l3r_each_master(l3->r, drop_node, &d);
	l3_logf(l3, "l3: drop %s: %ld keys deleted%s%s", ns, d.deleted,
		err ? ", then " : "", err ? strerror(-err) : "");
	atomic_fetch_add(&l3->dels, (uint64_t)d.deleted);
	return err ? err : d.deleted;
}

/* --------------------------------------------------------------- writes */

static struct l3_wq *wq_of(struct l3 *l3, const struct kvfs_key *key)
{
	return &l3->wq[key->b[0] % L3_WRITERS];
}

static int enqueue(struct l3 *l3, const struct kvfs_key *key,
		   struct l3_item *it)
{
	struct l3_wq *q = wq_of(l3, key);

	pthread_mutex_lock(&q->mu);
	if (q->stop) {
		pthread_mutex_unlock(&q->mu);
		return -ESHUTDOWN;
	}
	it->next = NULL;
	if (q->tail)
		q->tail->next = it;
	else
		q->head = it;
	q->tail = it;
	atomic_fetch_add(&l3->queued, 1);
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	return 0;
}

int l3_put(struct l3 *l3, const char *ns, const struct kvfs_key *key,
	   const struct l3_src *src)
{
	struct l3_item *it = NULL;
	uint64_t q = atomic_fetch_add(&l3->queued_bytes, src->bytes);
	int err = 0;

	if (q + src->bytes > l3->queue_cap)
		err = -EAGAIN;
	else if (!(it = calloc(1, sizeof(*it))))
		err = -ENOMEM;
	if (!err) {
		it->del = false;
		it->klen = l3_key(l3, ns, key, it->key);
		it->src = *src;
		err = enqueue(l3, key, it);
	}
	if (err) {
		atomic_fetch_sub(&l3->queued_bytes, src->bytes);
		atomic_fetch_add(&l3->drops, 1);
		free(it);
	}
	return err;
}

void l3_put_dropped(struct l3 *l3)
{
	atomic_fetch_add(&l3->drops, 1);
}

bool l3_queue_room(struct l3 *l3, size_t bytes)
{
	return atomic_load(&l3->queued_bytes) + bytes <= l3->queue_cap;
}

int l3_del(struct l3 *l3, const char *ns, const struct kvfs_key *key)
{
	return l3_del_cb(l3, ns, key, NULL, NULL);
}

int l3_del_cb(struct l3 *l3, const char *ns, const struct kvfs_key *key,
	      void (*done)(void *arg, int err), void *arg)
{
	struct l3_item *it = calloc(1, sizeof(*it));
	int err;

	if (!it)
		return -ENOMEM;
	it->del = true;
	it->done = done;
	it->done_arg = arg;
	it->klen = l3_key(l3, ns, key, it->key);
	err = enqueue(l3, key, it);
	if (err)
		free(it);
	return err;
}

/* Finishes it: releases what it holds (its src, its deletion's done)
 * with err, and frees it. */
static void item_finish(struct l3 *l3, struct l3_item *it, int err)
{
	if (it->del) {
		if (it->done)
			it->done(it->done_arg, err);
	} else {
		atomic_fetch_sub(&l3->queued_bytes, it->src.bytes);
		it->src.release(it->src.arg, err);
	}
	atomic_fetch_sub(&l3->queued, 1);
	free(it->val);
	free(it);
}

/* A later item of the batch (items[i+1..n-1]) for the same key that
 * succeeded: it supersedes items[i] (a write it deleted or overwrote, a
 * deletion it overwrote), which then needs no retry. */
static bool superseded(struct l3_item **items, const int *errs, size_t i,
		       size_t n)
{
	for (size_t j = i + 1; j < n; j++)
		if (!errs[j] && items[j]->klen == items[i]->klen &&
		    !memcmp(items[j]->key, items[i]->key, items[i]->klen))
			return true;
	return false;
}

/*
 * Sends one batch of items. Those that succeeded, and those given up
 * (a write after L3_PUT_TRIES tries or one that could not be built, any
 * item once stopping) are finished; the rest (to retry, in their order)
 * go to retry[], their count returned.
 */
static size_t send_batch(struct l3 *l3, struct l3_item **items, size_t n,
			 bool stopping, struct l3_item **retry)
{
	struct l3r_op ops[L3_BATCH_ITEMS];
	int errs[L3_BATCH_ITEMS];
	bool built[L3_BATCH_ITEMS];
	size_t nops = 0, bytes = 0, nretry = 0;

	if (stopping && atomic_load(&l3->close_failed)) {
		/* closing, and the server failed already: one bound paid,
		 * not one per batch */
		for (size_t i = 0; i < n; i++) {
			atomic_fetch_add(items[i]->del ? &l3->del_drops
						       : &l3->drops, 1);
			item_finish(l3, items[i], -ESHUTDOWN);
		}
		return 0;
	}

	for (size_t i = 0; i < n; i++) {
		struct l3_item *it = items[i];
		int err = 0;

		errs[i] = 0;
		built[i] = false;
		if (!it->del && !it->built) {
			/* built once: a retry sends the same value */
			err = it->src.encode(it->src.arg, &it->val, &it->vlen);
			it->built = !err;
		}
		memset(&ops[nops], 0, sizeof(ops[nops]));
		if (!err)
			err = it->del ? op_cmd(&ops[nops], "UNLINK", it->key,
					       it->klen, NULL, 0)
				      : op_cmd(&ops[nops], "SET", it->key,
					       it->klen,
					       it->val ? it->val : "",
					       it->vlen);
		if (err) {
			errs[i] = err;
			continue;
		}
		built[i] = true;
		if (!it->del)
			bytes += it->vlen;
		nops++;
	}
	l3r_batch_idle(l3->r, ops, nops, wdeadline(l3, bytes),
		       (uint64_t)l3->wtimeout_ms * 1000000ull);
	for (size_t i = 0, j = 0; i < n; i++) {
		struct l3_item *it = items[i];

		if (!built[i])
			continue;
		errs[i] = ops[j].err;
		if (ops[j].err) {
			atomic_fetch_add(&l3->errors, 1);
		} else if (it->del) {
			atomic_fetch_add(&l3->dels, 1);
		} else {
			atomic_fetch_add(&l3->puts, 1);
			atomic_fetch_add(&l3->bytes_out, it->vlen);
		}
		op_done(&ops[j]);
		j++;
	}
	for (size_t i = 0; i < n; i++) {
		struct l3_item *it = items[i];
		int err = errs[i];

		if (err && superseded(items, errs, i, n))
			err = it->del ? 0 : -ESTALE;
		else if (err && built[i] && !stopping &&
			 (it->del || ++it->tries < L3_PUT_TRIES)) {
			/* a deletion is kept while the mount is: a chunk
			 * unlinked must not come back from L3 */
			atomic_fetch_add(&l3->retries, 1);
			retry[nretry++] = it;
			continue;
		}
		if (err && built[i] && stopping)
			atomic_store(&l3->close_failed, true);
		if (err && it->del)
			atomic_fetch_add(&l3->del_drops, 1);
		else if (err && err != -ESTALE)
			atomic_fetch_add(&l3->drops, 1);
		item_finish(l3, it, err);
	}
	return nretry;
}

/* Puts items[0..n-1] back at the head of q, in their order (q->mu held). */
static void requeue(struct l3_wq *q, struct l3_item **items, size_t n)
{
	for (size_t i = n; i-- > 0;) {
		items[i]->next = q->head;
		q->head = items[i];
		if (!q->tail)
			q->tail = items[i];
	}
}

static void *writer_main(void *arg)
{
	struct l3_wq *q = arg;
	struct l3 *l3 = q->l3;
	int backoff_ms = L3_RETRY_MIN_MS;

	pthread_mutex_lock(&q->mu);
	for (;;) {
		struct l3_item *items[L3_BATCH_ITEMS], *retry[L3_BATCH_ITEMS];
		size_t n = 0, bytes = 0, nretry;
		bool stopping;

		while (!q->head && !q->stop)
			pthread_cond_wait(&q->cv, &q->mu);
		if (!q->head)
			break; /* stopping, and nothing left */
		while (q->head && n < L3_BATCH_ITEMS &&
		       (n == 0 || bytes + (q->head->del ? 0 : q->head->src.bytes) <=
					  L3_BATCH_BYTES)) {
			items[n] = q->head;
			bytes += q->head->del ? 0 : q->head->src.bytes;
			q->head = q->head->next;
			n++;
		}
		if (!q->head)
			q->tail = NULL;
		q->inflight = n;
		stopping = q->stop;
		pthread_mutex_unlock(&q->mu);
		nretry = send_batch(l3, items, n, stopping, retry);
		pthread_mutex_lock(&q->mu);
		q->inflight = 0;
		if (nretry) {
			/* first in the queue again (a key's operations stay
			 * in order), after a backoff that stop cuts short */
			struct timespec ts;
			uint64_t at = l3_now_ns() +
				      (uint64_t)backoff_ms * 1000000ull;

			requeue(q, retry, nretry);
			ts.tv_sec = (time_t)(at / 1000000000ull);
			ts.tv_nsec = (long)(at % 1000000000ull);
			while (!q->stop && l3_now_ns() < at &&
			       pthread_cond_timedwait(&q->cv, &q->mu,
						      &ts) != ETIMEDOUT)
				;
			backoff_ms = backoff_ms * 2 > L3_RETRY_MAX_MS
					     ? L3_RETRY_MAX_MS
					     : backoff_ms * 2;
		} else {
			backoff_ms = L3_RETRY_MIN_MS;
		}
		if (!q->head)
			pthread_cond_broadcast(&q->idle);
	}
	pthread_cond_broadcast(&q->idle);
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

int l3_flush(struct l3 *l3, int timeout_ms)
{
	uint64_t at = l3_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	struct timespec ts = { (time_t)(at / 1000000000ull),
			       (long)(at % 1000000000ull) };
	int err = 0;

	for (int i = 0; i < L3_WRITERS && !err; i++) {
		struct l3_wq *q = &l3->wq[i];

		pthread_mutex_lock(&q->mu);
		while ((q->head || q->inflight) && !err)
			if (pthread_cond_timedwait(&q->idle, &q->mu, &ts) ==
			    ETIMEDOUT)
				err = -ETIMEDOUT;
		pthread_mutex_unlock(&q->mu);
	}
	return err;
}

/* ---------------------------------------------------------- open / close */

int l3_open(const struct l3_config *cfg, struct l3 **out, char *errbuf,
	    size_t errlen)
{
	struct l3 *l3 = calloc(1, sizeof(*l3));
	const char *prefix = cfg->prefix ? cfg->prefix : L3_PREFIX_DEFAULT;
	struct l3r_config rc = {
		.servers = cfg->servers, .mode = cfg->mode,
		.user = cfg->user, .password = cfg->password, .log = cfg->log,
		.log_arg = cfg->log_arg,
	};
	pthread_condattr_t ca;
	int err;

	if (!l3)
		return -ENOMEM;
	if (strlen(prefix) > L3_PREFIX_MAX) {
		snprintf(errbuf, errlen, "l3_prefix: longer than %d bytes",
			 L3_PREFIX_MAX);
		free(l3);
		return -EINVAL;
	}
	for (const char *p = prefix; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f) {
			snprintf(errbuf, errlen,
				 "l3_prefix: no spaces or control characters");
			free(l3);
			return -EINVAL;
		}
	strcpy(l3->prefix, prefix);
	l3->plen = strlen(prefix);
	l3->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms
					     : L3_TIMEOUT_MS_DEFAULT;
	l3->wtimeout_ms = cfg->write_timeout_ms > 0
				  ? cfg->write_timeout_ms
				  : L3_WRITE_TIMEOUT_MS_DEFAULT;
	l3->max_chunk = cfg->max_chunk ? cfg->max_chunk : (64ull << 20);
	l3->queue_cap = cfg->queue_bytes ? cfg->queue_bytes
					 : L3_QUEUE_BYTES_DEFAULT;
	l3->log = cfg->log;
	l3->log_arg = cfg->log_arg;
	rc.timeout_ms = l3->timeout_ms;
	err = l3r_open(&rc, &l3->r, errbuf, errlen);
	if (err) {
		free(l3);
		return err;
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	for (int i = 0; i < L3_WRITERS; i++) {
		struct l3_wq *q = &l3->wq[i];

		q->l3 = l3;
		pthread_mutex_init(&q->mu, NULL);
		pthread_cond_init(&q->cv, &ca);
		pthread_cond_init(&q->idle, &ca);
	}
	pthread_condattr_destroy(&ca);
	for (int i = 0; i < L3_WRITERS; i++) {
		err = -pthread_create(&l3->wq[i].th, NULL, writer_main,
				      &l3->wq[i]);
		if (err) {
			snprintf(errbuf, errlen, "l3: no writer thread: %s",
				 strerror(-err));
			l3_close(l3);
			return err;
		}
		l3->wq[i].started = true;
	}
	*out = l3;
	return 0;
}

void l3_close(struct l3 *l3)
{
	if (!l3)
		return;
	for (int i = 0; i < L3_WRITERS; i++) {
		struct l3_wq *q = &l3->wq[i];

		pthread_mutex_lock(&q->mu);
		q->stop = true;
		pthread_cond_signal(&q->cv);
		pthread_mutex_unlock(&q->mu);
	}
	for (int i = 0; i < L3_WRITERS; i++) {
		struct l3_wq *q = &l3->wq[i];

		if (q->started)
			pthread_join(q->th, NULL);
		pthread_mutex_destroy(&q->mu);
		pthread_cond_destroy(&q->cv);
		pthread_cond_destroy(&q->idle);
	}
	l3r_close(l3->r);
	free(l3);
}

void l3_get_stats(struct l3 *l3, struct l3_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->gets = atomic_load(&l3->gets);
	st->hits = atomic_load(&l3->hits);
	st->misses = atomic_load(&l3->misses);
	st->corrupt = atomic_load(&l3->corrupt);
	st->errors = atomic_load(&l3->errors);
	st->bytes_in = atomic_load(&l3->bytes_in);
	st->bytes_out = atomic_load(&l3->bytes_out);
	st->puts = atomic_load(&l3->puts);
	st->dels = atomic_load(&l3->dels);
	st->queue_drops = atomic_load(&l3->drops);
	st->retries = atomic_load(&l3->retries);
	st->del_drops = atomic_load(&l3->del_drops);
	st->queued = atomic_load(&l3->queued);
	st->queued_bytes = atomic_load(&l3->queued_bytes);
	st->lookups = atomic_load(&l3->lookups);
	st->lookup_keys = atomic_load(&l3->lookup_keys);
	st->get_ns = atomic_load(&l3->get_ns);
	st->get_max_ns = atomic_load(&l3->get_max_ns);
	l3r_get_stats(l3->r, &st->redis);
	st->timeouts = st->redis.timeouts;
}

struct l3r *l3_redis(struct l3 *l3)
{
	return l3->r;
}
