/*
 * test_l3_redis.c - tier/l3_redis + l3_conn against real servers started
 * on loopback (tests/common/redis_test.h): standalone and a three-master
 * cluster; routing checked against the server's own CLUSTER KEYSLOT, one
 * pipeline per node for a batch, ASK and MOVED followed during a slot
 * migration, AUTH, a killed / paused / restarted server; a GET's value
 * received straight into the caller's memory (l3r_get_bulk), also across
 * ASK and MOVED.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <hiredis/hiredis.h>

#include "tests/common/redis_test.h"
#include "tier/l3/l3_redis.h"

#define TIMEOUT_MS 200

static struct rt_cluster cl;
static struct rt_server solo;

static void logcb(void *arg, const char *msg)
{
	fprintf(stderr, "  [log] %s\n", msg);
}

static struct l3r *open_client(const char *url, enum l3r_mode mode,
			       const char *pw)
{
	struct l3r_config cfg = { .servers = url, .mode = mode,
				  .password = pw, .timeout_ms = TIMEOUT_MS,
				  .log = logcb };
	struct l3r *r = NULL;
	char err[256] = "";
	int rc = l3r_open(&cfg, &r, err, sizeof(err));

	if (rc)
		fprintf(stderr, "l3r_open: %d %s\n", rc, err);
	assert_int_equal(rc, 0);
	return r;
}

/* n ops of one command each over keys "k:<i>" (+ value for SET) */
struct batch {
	struct l3r_op *ops;
	char (*keys)[32];
	size_t n;
};

static void batch_make(struct batch *b, size_t n, const char *cmd,
		       const char *val)
{
	b->n = n;
	b->ops = calloc(n, sizeof(*b->ops));
	b->keys = calloc(n, sizeof(*b->keys));
	for (size_t i = 0; i < n; i++) {
		const char *argv[3] = { cmd, b->keys[i], val };
		size_t lens[3];

		snprintf(b->keys[i], sizeof(b->keys[i]), "k:%zu", i);
		lens[0] = strlen(cmd);
		lens[1] = strlen(b->keys[i]);
		lens[2] = val ? strlen(val) : 0;
		b->ops[i].key = b->keys[i];
		b->ops[i].klen = lens[1];
		assert_int_equal(l3r_format(&b->ops[i].cmd, val ? 3 : 2, argv,
					    lens), 0);
	}
}

static long batch_run(struct l3r *r, struct batch *b, int ms)
{
	return l3r_batch(r, b->ops, b->n, l3_now_ns() + ms * 1000000ull);
}

static void batch_free(struct batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		if (b->ops[i].reply)
			freeReplyObject(b->ops[i].reply);
		l3r_cmd_free(&b->ops[i].cmd);
	}
	free(b->ops);
	free(b->keys);
}

static void test_standalone(void **state)
{
	char url[128];
	struct l3r *r;
	struct batch b;
	struct l3r_stats st;

	r = open_client(rt_url(&solo, url, sizeof(url)), L3R_AUTO, NULL);
	assert_int_equal(l3r_mode_now(r), L3R_STANDALONE);
	batch_make(&b, 100, "SET", "v");
	assert_int_equal(batch_run(r, &b, 2000), 100);
	batch_free(&b);
	batch_make(&b, 120, "EXISTS", NULL);
	l3r_get_stats(r, &st);
	uint64_t rt0 = st.roundtrips;
	assert_int_equal(batch_run(r, &b, 2000), 120);
	l3r_get_stats(r, &st);
	assert_int_equal(st.roundtrips - rt0, 1); /* one pipeline */
	for (size_t i = 0; i < 120; i++)
		assert_int_equal(b.ops[i].reply->integer, i < 100);
	batch_free(&b);
	l3r_close(r);

	/* the configured mode must match the server's */
	struct l3r_config cfg = { .servers = url, .mode = L3R_CLUSTER,
				  .timeout_ms = TIMEOUT_MS };
	char err[256];
	assert_int_equal(l3r_open(&cfg, &r, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "cluster support disabled"));
}

static void test_bad_config(void **state)
{
	const char *bad[] = { "", "redis://", "redis://h", "h:0", "h:1,",
			      "redis://:6379", "rediss://h:1" };
	struct l3r *r;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct l3r_config cfg = { .servers = bad[i], .timeout_ms = 50 };

		err[0] = '\0';
		assert_int_equal(l3r_open(&cfg, &r, err, sizeof(err)), -EINVAL);
		assert_true(err[0]);
	}
	struct l3r_config two = { .servers = "a:1,b:2", .mode = L3R_STANDALONE };
	assert_int_equal(l3r_open(&two, &r, err, sizeof(err)), -EINVAL);
}

static void test_auth(void **state)
{
	struct rt_server s;
	struct l3r *r;
	struct batch b;
	char url[128], err[256];

	assert_int_equal(rt_start(&s, false, "sekret-pw"), 0);
	rt_url(&s, url, sizeof(url));
	r = open_client(url, L3R_STANDALONE, "sekret-pw");
	batch_make(&b, 10, "SET", "x");
	assert_int_equal(batch_run(r, &b, 2000), 10);
	batch_free(&b);
	l3r_close(r);

	struct l3r_config cfg = { .servers = url, .password = "wrong",
				  .timeout_ms = TIMEOUT_MS };
	assert_int_equal(l3r_open(&cfg, &r, err, sizeof(err)), -EACCES);
	cfg.mode = L3R_STANDALONE;
	assert_int_equal(l3r_open(&cfg, &r, err, sizeof(err)), -EACCES);
	/* a server unreachable at open, with the wrong password once up:
	 * the operations fail, nothing is served */
	rt_stop(&s, true);
	assert_int_equal(l3r_open(&cfg, &r, err, sizeof(err)), 0);
	assert_int_equal(rt_restart(&s), 0);
	struct timespec nap = { 1, 100000000 }; /* past the backoff */
	nanosleep(&nap, NULL);
	batch_make(&b, 3, "EXISTS", NULL);
	assert_int_equal(batch_run(r, &b, 1000), 0);
	assert_int_equal(b.ops[0].err, -EACCES);
	batch_free(&b);
	l3r_close(r);
	rt_stop(&s, true);
}

static void test_cluster_routing(void **state)
{
	char url[128], out[256];
	struct l3r *r;
	struct batch b;
	struct l3r_stats st;

	/* one seed is enough: the others come from the map */
	r = open_client(rt_url(&cl.node[1], url, sizeof(url)), L3R_AUTO, NULL);
	assert_int_equal(l3r_mode_now(r), L3R_CLUSTER);
	l3r_get_stats(r, &st);
	assert_int_equal(st.nodes, 3);
	for (int i = 0; i < 20; i++) { /* our slots are the server's */
		char k[32];

		snprintf(k, sizeof(k), "kvfs:ns%d:%x", i, i * 7919);
		assert_int_equal(rt_cli(&cl.node[0], out, sizeof(out),
					"CLUSTER", "KEYSLOT", k, NULL), 0);
		assert_int_equal(atoi(out), l3_key_slot(k, strlen(k)));
	}
	batch_make(&b, 300, "SET", "v");
	assert_int_equal(batch_run(r, &b, 3000), 300);
	batch_free(&b);
	batch_make(&b, 400, "EXISTS", NULL);
	l3r_get_stats(r, &st);
	uint64_t rt0 = st.roundtrips;
	assert_int_equal(batch_run(r, &b, 3000), 400);
	l3r_get_stats(r, &st);
	assert_int_equal(st.roundtrips - rt0, 3); /* one per master */
	assert_int_equal(st.moved, 0);
	for (size_t i = 0; i < 400; i++)
		assert_int_equal(b.ops[i].reply->integer, i < 300);
	batch_free(&b);
	/* every master got its share */
	for (int i = 0; i < 3; i++) {
		assert_int_equal(rt_cli(&cl.node[i], out, sizeof(out), "DBSIZE",
					NULL), 0);
		assert_true(atoi(out) > 50);
	}
	l3r_close(r);
}

static void node_id(const struct rt_server *s, char id[64])
{
	char out[128];

	assert_int_equal(rt_cli(s, out, sizeof(out), "CLUSTER", "MYID", NULL), 0);
	out[strcspn(out, "\r\n")] = '\0';
	snprintf(id, 64, "%.63s", out);
}

static int owner_of(unsigned slot)
{
	char out[8192], line[64];

	assert_int_equal(rt_cli(&cl.node[0], out, sizeof(out), "CLUSTER",
				"NODES", NULL), 0);
	for (int i = 0; i < 3; i++) {
		char id[64];
		const char *p;

		node_id(&cl.node[i], id);
		p = strstr(out, id);
		assert_non_null(p);
		/* "... master - 0 0 1 connected 0-5460" */
		const char *eol = strchr(p, '\n');
		const char *c = strstr(p, "connected ");

		snprintf(line, sizeof(line), "%.*s", 0, "");
		if (!c || (eol && c > eol))
			continue;
		for (c += 10; c && (!eol || c < eol);) {
			unsigned a = (unsigned)strtoul(c, (char **)&c, 10), z = a;

			if (*c == '-')
				z = (unsigned)strtoul(c + 1, (char **)&c, 10);
			if (slot >= a && slot <= z)
				return i;
			c = *c == ' ' ? c + 1 : NULL;
		}
	}
	return -1;
}

/* Starts moving key's slot from its owner to the next node: the key
 * migrated, the slot still the owner's (it answers ASK). slotbuf: the
 * slot; idb: the new owner's id (for CLUSTER SETSLOT ... NODE). */
static void migrate_start(const char *key, char slotbuf[16], char idb[64])
{
	unsigned slot = l3_key_slot(key, strlen(key));
	char out[256], ida[64], port[16];
	int a = owner_of(slot), bn;

	assert_true(a >= 0);
	bn = (a + 1) % 3;
	node_id(&cl.node[a], ida);
	node_id(&cl.node[bn], idb);
	snprintf(slotbuf, 16, "%u", slot);
	snprintf(port, sizeof(port), "%d", cl.node[bn].port);
	assert_int_equal(rt_cli(&cl.node[bn], out, sizeof(out), "CLUSTER",
				"SETSLOT", slotbuf, "IMPORTING", ida, NULL), 0);
	assert_int_equal(rt_cli(&cl.node[a], out, sizeof(out), "CLUSTER",
				"SETSLOT", slotbuf, "MIGRATING", idb, NULL), 0);
	assert_int_equal(rt_cli(&cl.node[a], out, sizeof(out), "MIGRATE",
				"127.0.0.1", port, key, "0", "5000", NULL), 0);
	assert_non_null(strstr(out, "OK"));
}

static void test_cluster_ask_moved(void **state)
{
	char url[128], out[256], idb[64], slotbuf[16];
	const char *key = "kvfs:migrating:1";
	unsigned slot = l3_key_slot(key, strlen(key));
	struct l3r *r;
	struct l3r_op op = { .key = key, .klen = strlen(key) };
	const char *argv[2] = { "GET", key };
	size_t lens[2] = { 3, strlen(key) };
	struct l3r_stats st;

	r = open_client(rt_cluster_url(&cl, url, sizeof(url)), L3R_CLUSTER,
			NULL);
	assert_int_equal(rt_cli(&cl.node[owner_of(slot)], out, sizeof(out),
				"SET", key, "moving", NULL), 0);
	migrate_start(key, slotbuf, idb);

	/* mid-migration: the old owner answers ASK */
	assert_int_equal(l3r_format(&op.cmd, 2, argv, lens), 0);
	assert_int_equal(l3r_batch(r, &op, 1, l3_now_ns() + 2000000000ull), 1);
	assert_int_equal(op.reply->type, REDIS_REPLY_STRING);
	assert_string_equal(op.reply->str, "moving");
	freeReplyObject(op.reply);
	l3r_get_stats(r, &st);
	assert_int_equal(st.ask, 1);

	/* the migration ends: the client's map is stale, MOVED follows */
	for (int i = 0; i < 3; i++)
		assert_int_equal(rt_cli(&cl.node[i], out, sizeof(out), "CLUSTER",
					"SETSLOT", slotbuf, "NODE", idb, NULL), 0);
	assert_int_equal(l3r_batch(r, &op, 1, l3_now_ns() + 2000000000ull), 1);
	assert_string_equal(op.reply->str, "moving");
	freeReplyObject(op.reply);
	l3r_get_stats(r, &st);
	assert_int_equal(st.moved, 1);
	/* the map learned it: no more redirections */
	assert_int_equal(l3r_batch(r, &op, 1, l3_now_ns() + 2000000000ull), 1);
	freeReplyObject(op.reply);
	l3r_get_stats(r, &st);
	assert_int_equal(st.moved, 1);
	l3r_cmd_free(&op.cmd);
	l3r_close(r);
}

/* ------------------------------------------------ bulk replies (GET) */

/* A sink receiving into buf in steps of `step` bytes; stops with
 * -ECANCELED once stop_at bytes are in (0: never). */
struct tsink {
	uint8_t *buf;
	size_t cap, got, step, stop_at;
	uint64_t len;
	int begins;
	int slow_ms; /* begin takes this long (an engine short of L1) */
};

static int ts_begin(void *arg, uint64_t len)
{
	struct tsink *t = arg;
	struct timespec ts = { t->slow_ms / 1000,
			       (long)(t->slow_ms % 1000) * 1000000L };

	if (t->slow_ms)
		nanosleep(&ts, NULL);
	t->begins++;
	t->len = len;
	t->got = 0;
	return len > t->cap ? -EFBIG : 0;
}

static int ts_room(void *arg, void **buf, size_t *cap)
{
	struct tsink *t = arg;

	*buf = t->buf + t->got;
	*cap = t->step;
	return 0;
}

static int ts_got(void *arg, size_t n)
{
	struct tsink *t = arg;

	assert_true(n > 0 && n <= t->step);
	t->got += n;
	return t->stop_at && t->got >= t->stop_at ? -ECANCELED : 0;
}

/* GET key through l3r_get_bulk into t, within ms. */
static long bulk_get_ms(struct l3r *r, const char *key, struct tsink *t,
			redisReply **other, bool *sink_err, uint64_t ms)
{
	const char *argv[2] = { "GET", key };
	size_t lens[2] = { 3, strlen(key) };
	struct l3_sink s = { ts_begin, ts_room, ts_got, t };
	struct l3_cmd cmd;
	long rc;

	assert_int_equal(l3r_format(&cmd, 2, argv, lens), 0);
	rc = l3r_get_bulk(r, key, strlen(key), &cmd, &s, other, sink_err,
			  l3_now_ns() + ms * 1000000ull);
	l3r_cmd_free(&cmd);
	return rc;
}

static long bulk_get(struct l3r *r, const char *key, struct tsink *t,
		     redisReply **other, bool *sink_err)
{
	return bulk_get_ms(r, key, t, other, sink_err, 5000);
}

static void set_value(struct l3r *r, const char *key, const void *v,
		      size_t len)
{
	const char *argv[3] = { "SET", key, v };
	size_t lens[3] = { 3, strlen(key), len };
	struct l3r_op op = { .key = key, .klen = strlen(key) };

	assert_int_equal(l3r_format(&op.cmd, 3, argv, lens), 0);
	assert_int_equal(l3r_batch(r, &op, 1, l3_now_ns() + 5000000000ull), 1);
	freeReplyObject(op.reply);
	l3r_cmd_free(&op.cmd);
}

static uint8_t *pattern(size_t len, unsigned seed)
{
	uint8_t *p = malloc(len);

	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 31 + seed + (i >> 12));
	return p;
}

/* A value received straight into the caller's buffer, in steps; nil, a
 * value of another type, an empty value; a sink that stops midway costs
 * its connection only (no backoff), and the next GET works. */
static void test_bulk_standalone(void **state)
{
	const size_t big = (3u << 20) + 17;
	char url[128];
	struct l3r *r = open_client(rt_url(&solo, url, sizeof(url)),
				    L3R_STANDALONE, NULL);
	uint8_t *v = pattern(big, 5);
	struct tsink t = { .buf = malloc(big), .cap = big, .step = 100003 };
	struct l3r_stats st;
	redisReply *other;
	bool serr;
	char out[64];

	set_value(r, "bulk:big", v, big);
	assert_int_equal(bulk_get(r, "bulk:big", &t, &other, &serr), 0);
	assert_null(other);
	assert_int_equal(t.begins, 1);
	assert_int_equal(t.len, big);
	assert_int_equal(t.got, big);
	assert_memory_equal(t.buf, v, big);

	assert_int_equal(bulk_get(r, "bulk:none", &t, &other, &serr), 1);
	assert_non_null(other);
	assert_int_equal(other->type, REDIS_REPLY_NIL);
	freeReplyObject(other);
	assert_int_equal(t.begins, 1);

	assert_int_equal(rt_cli(&solo, out, sizeof(out), "RPUSH", "bulk:list",
				"a", NULL), 0);
	assert_int_equal(bulk_get(r, "bulk:list", &t, &other, &serr),
			 -EREMOTEIO);
	assert_false(serr);

	set_value(r, "bulk:empty", "", 0);
	assert_int_equal(bulk_get(r, "bulk:empty", &t, &other, &serr), 0);
	assert_int_equal(t.begins, 2);
	assert_int_equal(t.len, 0);

	/* stopped midway, then at begin: the connection goes, the node
	 * is not blamed */
	t.stop_at = 1u << 20;
	assert_int_equal(bulk_get(r, "bulk:big", &t, &other, &serr),
			 -ECANCELED);
	assert_true(serr);
	t.stop_at = 0;
	t.cap = 10;
	assert_int_equal(bulk_get(r, "bulk:big", &t, &other, &serr), -EFBIG);
	assert_true(serr);
	t.cap = big;
	memset(t.buf, 0, big);
	assert_int_equal(bulk_get(r, "bulk:big", &t, &other, &serr), 0);
	assert_memory_equal(t.buf, v, big);
	l3r_get_stats(r, &st);
	assert_int_equal(st.failures, 0);
	assert_int_equal(st.nodes_down, 0);

	free(t.buf);
	free(v);

	/* a sink slower than the GET's whole bound (the engine waiting for
	 * L1 room): its time is not the server's, the value still comes
	 * whole, the node is not blamed */
	const size_t huge = 6u << 20;

	v = pattern(huge, 7);
	t = (struct tsink){ .buf = malloc(huge), .cap = huge,
			    .step = 1u << 20, .slow_ms = 3 * TIMEOUT_MS };
	set_value(r, "bulk:huge", v, huge);
	assert_int_equal(bulk_get_ms(r, "bulk:huge", &t, &other, &serr,
				     2 * TIMEOUT_MS), 0);
	assert_memory_equal(t.buf, v, huge);
	l3r_get_stats(r, &st);
	assert_int_equal(st.failures, 0);
	assert_int_equal(st.timeouts, 0);
	free(t.buf);
	free(v);
	l3r_close(r);
}

/* A streamed GET during a slot migration: the ASK and then the MOVED
 * come before any byte of the value, so the sink sees only the owner's
 * value, once, whole. */
static void test_bulk_cluster_ask_moved(void **state)
{
	const size_t big = 2u << 20;
	char url[128], out[256], idb[64], slotbuf[16];
	const char *key = "kvfs:bulkmig:1";
	uint8_t *v = pattern(big, 9);
	struct tsink t = { .buf = malloc(big), .cap = big, .step = 65536 };
	struct l3r_stats st;
	redisReply *other;
	struct l3r *r;
	bool serr;

	r = open_client(rt_cluster_url(&cl, url, sizeof(url)), L3R_CLUSTER,
			NULL);
	set_value(r, key, v, big);
	migrate_start(key, slotbuf, idb);

	assert_int_equal(bulk_get(r, key, &t, &other, &serr), 0);
	assert_int_equal(t.begins, 1);
	assert_memory_equal(t.buf, v, big);
	l3r_get_stats(r, &st);
	assert_int_equal(st.ask, 1);

	for (int i = 0; i < 3; i++)
		assert_int_equal(rt_cli(&cl.node[i], out, sizeof(out), "CLUSTER",
					"SETSLOT", slotbuf, "NODE", idb, NULL), 0);
	memset(t.buf, 0, big);
	assert_int_equal(bulk_get(r, key, &t, &other, &serr), 0);
	assert_int_equal(t.begins, 2);
	assert_memory_equal(t.buf, v, big);
	l3r_get_stats(r, &st);
	assert_int_equal(st.moved, 1);
	/* a key nowhere, after the move: nil, not a redirection */
	assert_int_equal(bulk_get(r, "kvfs:bulkmig:none", &t, &other, &serr),
			 1);
	assert_int_equal(other->type, REDIS_REPLY_NIL);
	freeReplyObject(other);
	free(t.buf);
	free(v);
	l3r_close(r);
}

/* A failover: a cluster with a replica per master loses a master; once
 * the replica took over, the client follows (its map refreshed after the
 * node failed) and reads the keys the replica had. */
static void test_cluster_failover(void **state)
{
	struct rt_cluster rc;
	struct l3r *r;
	struct batch b;
	struct l3r_stats st;
	char url[128], out[8192];
	int victim = -1;
	size_t hit;

	memset(&rc, 0, sizeof(rc));
	assert_int_equal(rt_cluster_start_replicas(&rc, NULL, 1), 0);
	r = open_client(rt_url(&rc.node[0], url, sizeof(url)), L3R_AUTO, NULL);
	batch_make(&b, 300, "SET", "v");
	assert_int_equal(batch_run(r, &b, 3000), 300);
	batch_free(&b);
	/* a master, and time for its replica to have the writes */
	for (int i = 0; i < rc.n && victim < 0; i++) {
		assert_int_equal(rt_cli(&rc.node[i], out, sizeof(out), "ROLE",
					NULL), 0);
		if (!strncmp(out, "master", 6) && i != 0)
			victim = i;
	}
	assert_true(victim > 0);
	/* its replica has every write (WAIT: acknowledged by 1 replica) */
	for (int t = 0; t < 50; t++) {
		assert_int_equal(rt_cli(&rc.node[victim], out, sizeof(out),
					"WAIT", "1", "200", NULL), 0);
		if (atoi(out) >= 1)
			break;
	}
	assert_int_equal(atoi(out), 1);
	rt_stop(&rc.node[victim], true);
	assert_int_equal(rt_cluster_wait(&rc), 0); /* the replica took over */
	l3r_get_stats(r, &st);
	uint64_t refreshes = st.refreshes;
	hit = 0;
	for (int t = 0; t < 100 && hit < 300; t++) {
		struct timespec ts = { 0, 100000000 };

		batch_make(&b, 300, "EXISTS", NULL);
		batch_run(r, &b, 1000);
		hit = 0;
		for (size_t i = 0; i < 300; i++)
			hit += !b.ops[i].err && b.ops[i].reply->integer == 1;
		batch_free(&b);
		if (hit < 300)
			nanosleep(&ts, NULL);
	}
	l3r_get_stats(r, &st);
	fprintf(stderr, "  after the failover: %zu of 300 keys (refreshes "
		"%llu -> %llu, nodes %llu, down %llu)\n", hit,
		(unsigned long long)refreshes,
		(unsigned long long)st.refreshes,
		(unsigned long long)st.nodes,
		(unsigned long long)st.nodes_down);
	assert_int_equal(hit, 300);
	l3r_get_stats(r, &st);
	assert_true(st.refreshes > refreshes);
	l3r_close(r);
	rt_cluster_stop(&rc);
}

/* Runs at the end: stops, pauses and restarts cluster nodes. */
static void test_cluster_failures(void **state)
{
	char url[128];
	struct l3r *r;
	struct batch b;
	struct l3r_stats st;
	uint64_t t0, dt;
	size_t hit = 0, miss = 0;

	r = open_client(rt_cluster_url(&cl, url, sizeof(url)), L3R_AUTO, NULL);
	batch_make(&b, 300, "SET", "v");
	assert_int_equal(batch_run(r, &b, 3000), 300);
	batch_free(&b);

	/* a killed master: its keys fail within the bound, others work */
	rt_stop(&cl.node[2], true);
	batch_make(&b, 300, "EXISTS", NULL);
	t0 = l3_now_ns();
	batch_run(r, &b, TIMEOUT_MS);
	dt = l3_now_ns() - t0;
	for (size_t i = 0; i < 300; i++) {
		if (b.ops[i].err == 0 && b.ops[i].reply->integer == 1)
			hit++;
		else
			miss++;
	}
	fprintf(stderr, "  one master down: %zu hit, %zu failed, %.1f ms\n",
		hit, miss, dt / 1e6);
	assert_true(hit > 100 && miss > 50);
	assert_true(dt < (TIMEOUT_MS + 100) * 1000000ull);
	batch_free(&b);
	/* backing off: the dead node's keys fail at once now */
	batch_make(&b, 300, "EXISTS", NULL);
	t0 = l3_now_ns();
	batch_run(r, &b, TIMEOUT_MS);
	dt = l3_now_ns() - t0;
	assert_true(dt < (TIMEOUT_MS + 100) * 1000000ull);
	batch_free(&b);
	l3r_get_stats(r, &st);
	assert_true(st.failures >= 1);

	/* restarted (empty: no persistence): reconnected after the backoff */
	assert_int_equal(rt_restart(&cl.node[2]), 0);
	for (int t = 0; t < 100; t++) {
		struct timespec ts = { 0, 100000000 };

		batch_make(&b, 300, "SET", "v");
		hit = (size_t)batch_run(r, &b, 1000);
		batch_free(&b);
		if (hit == 300)
			break;
		nanosleep(&ts, NULL);
	}
	assert_int_equal(hit, 300);

	/* a paused master (a hung server): given up on once TIMEOUT_MS
	 * pass without a byte, however far the deadline */
	rt_pause(&cl.node[0]);
	batch_make(&b, 300, "EXISTS", NULL);
	t0 = l3_now_ns();
	hit = (size_t)batch_run(r, &b, 5000);
	dt = l3_now_ns() - t0;
	assert_true(hit > 100 && hit < 300);
	assert_true(dt < (TIMEOUT_MS + 100) * 1000000ull);
	l3r_get_stats(r, &st);
	assert_true(st.timeouts >= 1);
	batch_free(&b);
	rt_resume(&cl.node[0]);
	l3r_close(r);
}

static int setup(void **state)
{
	if (rt_start(&solo, false, NULL) || rt_cluster_start(&cl, NULL))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	rt_cluster_stop(&cl);
	rt_stop(&solo, true);
	return 0;
}

int main(void)
{
	const char *why = rt_skip_reason();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_config),
		cmocka_unit_test(test_standalone),
		cmocka_unit_test(test_auth),
		cmocka_unit_test(test_cluster_routing),
		cmocka_unit_test(test_cluster_ask_moved),
		cmocka_unit_test(test_bulk_standalone),
		cmocka_unit_test(test_bulk_cluster_ask_moved),
		cmocka_unit_test(test_cluster_failover),
		cmocka_unit_test(test_cluster_failures),
	};

	if (why) {
		printf("skipped: %s\n", why);
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
