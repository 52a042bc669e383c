/*
 * test_events.c - events/: the queue, the msgpack codec in both forms, and a
 * real publisher talking to a real ZeroMQ SUB and a DEALER replay client
 * over ipc:// sockets in a temporary directory (and tcp on an ephemeral
 * loopback port for the bind errors).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include <zmq.h>

#include "events/ev_encode.h"
#include "events/ev_queue.h"
#include "events/events.h"

static char tmpdir[] = "/tmp/kvfs-evtest-XXXXXX";

static struct kvfs_key mkkey(uint64_t hi, uint64_t lo)
{
	struct kvfs_key k;

	for (int i = 0; i < 8; i++) {
		k.b[i] = (uint8_t)(hi >> (56 - 8 * i));
		k.b[8 + i] = (uint8_t)(lo >> (56 - 8 * i));
	}
	return k;
}

static struct ev_event mkev(enum ev_kind kind, const char *ns, uint64_t lo,
			    int parent_lo, enum ev_medium m)
{
	struct ev_event e;

	memset(&e, 0, sizeof(e));
	e.kind = kind;
	e.medium = m;
	e.key = mkkey(0x1122334455667788ull, lo);
	if (parent_lo >= 0) {
		e.has_parent = 1;
		e.parent = mkkey(0x99, (uint64_t)parent_lo);
	}
	e.block_size = 16;
	snprintf(e.ns, sizeof(e.ns), "%s", ns);
	return e;
}

/* ================================================================ queue */

static void test_queue_full_drops(void **state)
{
	struct ev_queue q;
	struct ev_event e = mkev(EV_STORED, "a", 1, -1, EV_MEDIUM_CPU), out[8];

	assert_int_equal(ev_queue_init(&q, 4), 0);
	for (int i = 0; i < 4; i++) {
		e.block_size = (uint32_t)i;
		assert_int_equal(ev_queue_push(&q, &e), 0);
	}
	assert_int_equal(ev_queue_push(&q, &e), -EAGAIN);
	assert_int_equal(ev_queue_depth(&q), 4);
	assert_int_equal(ev_queue_pop(&q, out, 3), 3);
	assert_int_equal(out[0].block_size, 0);
	assert_int_equal(out[2].block_size, 2);
	assert_int_equal(ev_queue_push(&q, &e), 0); /* wraps */
	assert_int_equal(ev_queue_pop(&q, out, 8), 2);
	assert_int_equal(out[0].block_size, 3);
	assert_int_equal(ev_queue_pushed(&q), 5);
	ev_queue_fini(&q);
}

/* ================================================================ codec */

struct got {
	int n;
	struct ev_dec_event ev[8];
};

static int collect(void *arg, const struct ev_dec_event *ev)
{
	struct got *g = arg;

	if (g->n < 8)
		memcpy(&g->ev[g->n], ev, sizeof(*ev));
	g->n++;
	return 0;
}

static void roundtrip(enum ev_format fmt, enum ev_hash hash)
{
	struct ev_event evs[3] = {
		mkev(EV_STORED, "ns", 0xa1a2a3a4a5a6a7a8ull, 7, EV_MEDIUM_GPU),
		mkev(EV_REMOVED, "ns", 5, -1, EV_MEDIUM_DISK),
		mkev(EV_CLEARED, "ns", 0, -1, 0),
	};
	msgpack_sbuffer sb;
	struct got *g = calloc(1, sizeof(*g));
	double ts = 0;

	msgpack_sbuffer_init(&sb);
	assert_int_equal(ev_encode_batch(&sb, 1234.5, evs, 3, fmt, hash), 0);
	assert_int_equal(ev_decode_batch(sb.data, sb.size, &ts, collect, g), 0);
	assert_true(ts == 1234.5);
	assert_int_equal(g->n, 3);
	assert_int_equal(g->ev[0].kind, EV_STORED);
	assert_int_equal(g->ev[0].map_form, fmt == EV_FORMAT_MAP);
	assert_int_equal(g->ev[0].nhashes, 1);
	assert_true(g->ev[0].hashes[0] == 0xa1a2a3a4a5a6a7a8ull);
	assert_int_equal(g->ev[0].rawlen[0], hash == EV_HASH_BYTES ? 16 : 0);
	if (hash == EV_HASH_BYTES)
		assert_memory_equal(g->ev[0].raw[0], evs[0].key.b, 16);
	assert_true(g->ev[0].has_parent);
	assert_true(g->ev[0].parent == 7);
	assert_int_equal(g->ev[0].block_size, 16);
	assert_string_equal(g->ev[0].medium, "GPU");
	assert_int_equal(g->ev[1].kind, EV_REMOVED);
	assert_true(g->ev[1].hashes[0] == 5);
	assert_string_equal(g->ev[1].medium, "DISK");
	assert_int_equal(g->ev[2].kind, EV_CLEARED);

	/* Truncated, or garbage: -EBADMSG, never a crash. */
	assert_int_equal(ev_decode_batch(sb.data, sb.size - 1, &ts, collect, g),
			 -EBADMSG);
	assert_int_equal(ev_decode_batch("\x93\x01\x02\x03", 4, &ts, collect, g),
			 -EBADMSG);
	msgpack_sbuffer_destroy(&sb);
	free(g);
}

/* Newer vLLMs encode the batch as a map (no array_like) with
 * data_parallel_rank omitted: decoded too. */
static void test_codec_map_batch(void **state)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	struct got *g = calloc(1, sizeof(*g));
	double ts = 0;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 2);
	msgpack_pack_str(&pk, 2);
	msgpack_pack_str_body(&pk, "ts", 2);
	msgpack_pack_double(&pk, 7.5);
	msgpack_pack_str(&pk, 6);
	msgpack_pack_str_body(&pk, "events", 6);
	msgpack_pack_array(&pk, 1);
	msgpack_pack_map(&pk, 3);
	msgpack_pack_str(&pk, 4);
	msgpack_pack_str_body(&pk, "type", 4);
	msgpack_pack_str(&pk, 12);
	msgpack_pack_str_body(&pk, "BlockRemoved", 12);
	msgpack_pack_str(&pk, 12);
	msgpack_pack_str_body(&pk, "block_hashes", 12);
	msgpack_pack_array(&pk, 2);
	msgpack_pack_uint64(&pk, 11);
	msgpack_pack_int64(&pk, -2); /* vLLM's hashes may be signed */
	msgpack_pack_str(&pk, 9);
	msgpack_pack_str_body(&pk, "group_idx", 9); /* unknown: skipped */
	msgpack_pack_int(&pk, 0);
	assert_int_equal(ev_decode_batch(sb.data, sb.size, &ts, collect, g), 0);
	assert_true(ts == 7.5);
	assert_int_equal(g->n, 1);
	assert_int_equal(g->ev[0].kind, EV_REMOVED);
	assert_int_equal(g->ev[0].nhashes, 2);
	assert_true(g->ev[0].hashes[1] == (uint64_t)-2);
	assert_string_equal(g->ev[0].medium, "");
	msgpack_sbuffer_destroy(&sb);
	free(g);
}

static int count_only(void *arg, const struct ev_dec_event *ev)
{
	(void)ev;
	(*(int *)arg)++;
	return 0;
}

/* Mutated and truncated payloads (what a hostile publisher could send to
 * kvfsctl): decoded or refused with -EBADMSG / -E2BIG, never a crash
 * (ASan and UBSan watch). */
static void test_codec_garbage(void **state)
{
	struct ev_event evs[4] = {
		mkev(EV_STORED, "g", 1, 0, EV_MEDIUM_CPU),
		mkev(EV_REMOVED, "g", 2, -1, EV_MEDIUM_DISK),
		mkev(EV_CLEARED, "g", 0, -1, 0),
		mkev(EV_STORED, "g", 3, -1, EV_MEDIUM_GPU),
	};
	msgpack_sbuffer sb;
	uint64_t x = 88172645463325252ull;
	double ts;

	msgpack_sbuffer_init(&sb);
	for (int form = 0; form < 4; form++) {
		assert_int_equal(ev_encode_batch(&sb, 1.0, evs, 4, form & 1,
						 form >> 1), 0);
		uint8_t *buf = malloc(sb.size);
		for (int round = 0; round < 20000; round++) {
			memcpy(buf, sb.data, sb.size);
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			size_t len = round % 3 ? sb.size : x % (sb.size + 1);
			for (int k = 0; k < 1 + (int)(x >> 60); k++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				if (len)
					buf[x % len] = (uint8_t)(x >> 32);
			}
			int n = 0;
			int rc = ev_decode_batch(buf, len, &ts, count_only, &n);
			assert_true(rc == 0 || rc == -EBADMSG || rc == -E2BIG ||
				    rc == -ENOMEM);
		}
		free(buf);
	}
	msgpack_sbuffer_destroy(&sb);
}

static void test_codec_map_u64(void **state) { roundtrip(EV_FORMAT_MAP, EV_HASH_U64); }
static void test_codec_array_bytes(void **state) { roundtrip(EV_FORMAT_ARRAY, EV_HASH_BYTES); }

/* The exact bytes of a map-form BlockStored: the field names and order of
 * vLLM's BlockStored struct. */
static void test_codec_map_layout(void **state)
{
	struct ev_event e = mkev(EV_STORED, "n", 0x0102, -1, EV_MEDIUM_CPU);
	msgpack_sbuffer sb;
	msgpack_unpacked u;
	size_t off = 0;
	static const char *const keys[] = {
		"type", "block_hashes", "parent_block_hash", "token_ids",
		"block_size", "lora_id", "medium", "lora_name",
	};

	msgpack_sbuffer_init(&sb);
	assert_int_equal(ev_encode_batch(&sb, 1.0, &e, 1, EV_FORMAT_MAP,
					 EV_HASH_U64), 0);
	msgpack_unpacked_init(&u);
	assert_int_equal(msgpack_unpack_next(&u, sb.data, sb.size, &off),
			 MSGPACK_UNPACK_SUCCESS);
	msgpack_object b = u.data;
	assert_int_equal(b.type, MSGPACK_OBJECT_ARRAY);
	assert_int_equal(b.via.array.size, 3);
	assert_int_equal(b.via.array.ptr[0].type, MSGPACK_OBJECT_FLOAT64);
	assert_int_equal(b.via.array.ptr[2].type, MSGPACK_OBJECT_NIL);
	msgpack_object m = b.via.array.ptr[1].via.array.ptr[0];
	assert_int_equal(m.type, MSGPACK_OBJECT_MAP);
	assert_int_equal(m.via.map.size, 8);
	for (int i = 0; i < 8; i++) {
		msgpack_object k = m.via.map.ptr[i].key;
		assert_int_equal(k.via.str.size, strlen(keys[i]));
		assert_memory_equal(k.via.str.ptr, keys[i], strlen(keys[i]));
	}
	assert_int_equal(m.via.map.ptr[1].val.via.array.ptr[0].via.u64, 0x0102);
	assert_int_equal(m.via.map.ptr[2].val.type, MSGPACK_OBJECT_NIL);
	assert_int_equal(m.via.map.ptr[3].val.via.array.size, 0);
	assert_int_equal(m.via.map.ptr[5].val.type, MSGPACK_OBJECT_NIL);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
}

/* ============================================================ publisher */

static void ep(char *buf, const char *name)
{
	snprintf(buf, 256, "ipc://%s/%s", tmpdir, name);
}

static struct ev_pub *mkpub(const char *pubname, const char *repname,
			    uint32_t buffer, uint32_t queue)
{
	char e1[256], e2[256], err[256];
	struct ev_config c;
	struct ev_pub *p;

	ev_config_default(&c);
	ep(e1, pubname);
	c.endpoint = e1;
	if (repname) {
		ep(e2, repname);
		c.replay_endpoint = e2;
	}
	c.node = "nodeA";
	if (buffer)
		c.buffer = buffer;
	if (queue)
		c.queue = queue;
	assert_int_equal(ev_pub_create(&c, &p, err, sizeof(err)), 0);
	return p;
}

static void *sub_open(void *ctx, const char *name)
{
	char e[256];
	void *s = zmq_socket(ctx, ZMQ_SUB);
	int tmo = 5000;

	ep(e, name);
	assert_non_null(s);
	assert_int_equal(zmq_setsockopt(s, ZMQ_SUBSCRIBE, "kv@", 3), 0);
	assert_int_equal(zmq_setsockopt(s, ZMQ_RCVTIMEO, &tmo, sizeof(tmo)), 0);
	assert_int_equal(zmq_connect(s, e), 0);
	return s;
}

/* Receives one message; returns its frame count (<= 4 kept). */
static int recv_frames(void *s, zmq_msg_t fr[4])
{
	int n = 0, more = 1;
	size_t ml = sizeof(more);

	while (more) {
		zmq_msg_t m;
		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, s, 0) < 0) {
			zmq_msg_close(&m);
			return -errno;
		}
		zmq_getsockopt(s, ZMQ_RCVMORE, &more, &ml);
		if (n < 4)
			fr[n++] = m;
		else
			zmq_msg_close(&m);
	}
	return n;
}

static uint64_t rd64(const zmq_msg_t *m)
{
	const uint8_t *p = zmq_msg_data((zmq_msg_t *)m);
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void close_frames(zmq_msg_t *fr, int n)
{
	for (int i = 0; i < n; i++)
		zmq_msg_close(&fr[i]);
}

/* PUB and SUB need a moment to connect: post probes until one arrives. */
static uint64_t sync_sub(struct ev_pub *p, void *s)
{
	struct ev_event e = mkev(EV_CLEARED, "sync", 0, -1, 0);
	int tmo = 20;

	zmq_setsockopt(s, ZMQ_RCVTIMEO, &tmo, sizeof(tmo));
	for (int i = 0; i < 500; i++) {
		zmq_msg_t fr[4];
		assert_int_equal(ev_post(p, &e), 0);
		int n = recv_frames(s, fr);
		if (n > 0) {
			uint64_t seq = rd64(&fr[1]);
			close_frames(fr, n);
			/* drain the other probes */
			ev_flush(p, 1000);
			while ((n = recv_frames(s, fr)) > 0) {
				seq = rd64(&fr[1]);
				close_frames(fr, n);
			}
			tmo = 5000;
			zmq_setsockopt(s, ZMQ_RCVTIMEO, &tmo, sizeof(tmo));
			return seq;
		}
	}
	fail_msg("subscriber never connected");
	return 0;
}

static void test_pub_frames_seq(void **state)
{
	void *ctx = zmq_ctx_new();
	struct ev_pub *p = mkpub("p1", NULL, 0, 0);
	void *s = sub_open(ctx, "p1");
	uint64_t last = sync_sub(p, s);
	struct ev_event a = mkev(EV_STORED, "model.a", 42, 41, EV_MEDIUM_CPU);
	struct ev_event b = mkev(EV_REMOVED, "model.b", 42, -1, EV_MEDIUM_DISK);
	zmq_msg_t fr[4];
	struct got g = { 0 };
	double ts;
	struct stat st;
	char path[256];

	assert_int_equal(ev_post(p, &a), 0);
	assert_int_equal(ev_post(p, &b), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(recv_frames(s, fr), 3);
		const char *want = i ? "kv@nodeA@model.b" : "kv@nodeA@model.a";
		assert_int_equal(zmq_msg_size(&fr[0]), strlen(want));
		assert_memory_equal(zmq_msg_data(&fr[0]), want, strlen(want));
		assert_int_equal(zmq_msg_size(&fr[1]), 8);
		assert_true(rd64(&fr[1]) == last + 1 + (uint64_t)i);
		assert_int_equal(ev_decode_batch(zmq_msg_data(&fr[2]),
						 zmq_msg_size(&fr[2]), &ts,
						 collect, &g), 0);
		close_frames(fr, 3);
	}
	assert_int_equal(g.n, 2);
	assert_true(g.ev[0].hashes[0] == 42 && g.ev[0].parent == 41);
	assert_string_equal(g.ev[1].medium, "DISK");

	/* the ipc socket file is the daemon user's alone */
	snprintf(path, sizeof(path), "%s/p1", tmpdir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	struct ev_stats es;
	ev_stats(p, &es);
	assert_true(es.published >= 2 && es.batches == es.next_seq);
	zmq_close(s);
	ev_pub_destroy(p);
	zmq_ctx_term(ctx);
}

/* Many events: published + dropped == posted, and what arrives has
 * contiguous sequence numbers. */
static void test_pub_batches_and_drops(void **state)
{
	void *ctx = zmq_ctx_new();
	struct ev_pub *p = mkpub("p2", NULL, 0, 64);
	void *s = sub_open(ctx, "p2");
	uint64_t last = sync_sub(p, s), posted = 0, fails = 0;
	struct ev_stats st0, st;
	zmq_msg_t fr[4];

	ev_stats(p, &st0);
	for (int i = 0; i < 20000; i++) {
		struct ev_event e = mkev(EV_STORED, i % 2000 < 1000 ? "x" : "y",
					 (uint64_t)i, -1, EV_MEDIUM_CPU);
		posted++;
		if (ev_post(p, &e))
			fails++;
	}
	assert_int_equal(ev_flush(p, 5000), 0);
	ev_stats(p, &st);
	assert_true(st.published - st0.published + st.dropped - st0.dropped ==
		    posted);
	assert_true(st.dropped - st0.dropped == fails);
	uint64_t got = 0;
	while (last + 1 < st.next_seq) {
		int n = recv_frames(s, fr);
		assert_int_equal(n, 3);
		assert_true(rd64(&fr[1]) == last + 1);
		last++;
		got++;
		close_frames(fr, n);
	}
	assert_true(got == st.batches - st0.batches);

	/* ev_post_wait waits for room instead of dropping */
	ev_stats(p, &st0);
	for (int i = 0; i < 5000; i++) {
		struct ev_event e = mkev(EV_STORED, "w", (uint64_t)i, -1,
					 EV_MEDIUM_DISK);
		assert_int_equal(ev_post_wait(p, &e, 5000), 0);
	}
	assert_int_equal(ev_flush(p, 5000), 0);
	ev_stats(p, &st);
	assert_true(st.dropped == st0.dropped);
	assert_true(st.published - st0.published == 5000);
	zmq_close(s);
	ev_pub_destroy(p);
	zmq_ctx_term(ctx);
}

static void *dealer_open(void *ctx, const char *name)
{
	char e[256];
	void *d = zmq_socket(ctx, ZMQ_DEALER);
	int tmo = 5000;

	ep(e, name);
	zmq_setsockopt(d, ZMQ_RCVTIMEO, &tmo, sizeof(tmo));
	assert_int_equal(zmq_connect(d, e), 0);
	return d;
}

static void send_req(void *d, uint64_t from)
{
	uint8_t b[8];

	for (int i = 7; i >= 0; i--, from >>= 8)
		b[i] = (uint8_t)from;
	assert_int_equal(zmq_send(d, "", 0, ZMQ_SNDMORE), 0);
	assert_int_equal(zmq_send(d, b, 8, 0), 8);
}

static void test_replay(void **state)
{
	void *ctx = zmq_ctx_new();
	struct ev_pub *p = mkpub("p3", "r3", 5, 0);
	void *d = dealer_open(ctx, "r3");
	zmq_msg_t fr[4];
	struct ev_stats st;

	/* 8 batches (namespaces alternate); the buffer keeps the last 5 */
	for (int i = 0; i < 8; i++) {
		struct ev_event e = mkev(EV_STORED, i % 2 ? "o" : "e",
					 (uint64_t)i, -1, EV_MEDIUM_CPU);
		assert_int_equal(ev_post(p, &e), 0);
		assert_int_equal(ev_flush(p, 2000), 0);
	}
	ev_stats(p, &st);
	assert_int_equal(st.next_seq, 8);
	assert_int_equal(st.buffered, 5);

	send_req(d, 4);
	for (uint64_t want = 4; want < 8; want++) {
		struct got g = { 0 };
		double ts;
		assert_int_equal(recv_frames(d, fr), 3); /* "", seq, payload */
		assert_int_equal(zmq_msg_size(&fr[0]), 0);
		assert_true(rd64(&fr[1]) == want);
		assert_int_equal(ev_decode_batch(zmq_msg_data(&fr[2]),
						 zmq_msg_size(&fr[2]), &ts,
						 collect, &g), 0);
		assert_true(g.ev[0].hashes[0] == want);
		close_frames(fr, 3);
	}
	assert_int_equal(recv_frames(d, fr), 3);
	assert_true(rd64(&fr[1]) == UINT64_MAX); /* -1: the end */
	assert_int_equal(zmq_msg_size(&fr[2]), 0);
	close_frames(fr, 3);

	/* from 0: only what is still buffered (3..7) */
	send_req(d, 0);
	assert_int_equal(recv_frames(d, fr), 3);
	assert_true(rd64(&fr[1]) == 3);
	close_frames(fr, 3);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(recv_frames(d, fr), 3);
		uint64_t seq = rd64(&fr[1]);
		close_frames(fr, 3);
		assert_true(seq == (i < 4 ? 4 + (uint64_t)i : UINT64_MAX));
	}

	/* bad requests: a short sequence, a long one, extra frames */
	assert_int_equal(zmq_send(d, "", 0, ZMQ_SNDMORE), 0);
	assert_int_equal(zmq_send(d, "abc", 3, 0), 3);
	char seq300[300];
	memset(seq300, 1, sizeof(seq300));
	assert_int_equal(zmq_send(d, "", 0, ZMQ_SNDMORE), 0);
	assert_int_equal(zmq_send(d, seq300, sizeof(seq300), 0), 300);
	assert_int_equal(zmq_send(d, "", 0, ZMQ_SNDMORE), 0);
	assert_int_equal(zmq_send(d, "12345678", 8, ZMQ_SNDMORE), 8);
	assert_int_equal(zmq_send(d, "x", 1, 0), 1);
	/* an oversized frame gets the peer disconnected, nothing else */
	char big[8192];
	memset(big, 7, sizeof(big));
	void *d2 = dealer_open(ctx, "r3");
	zmq_send(d2, "", 0, ZMQ_SNDMORE);
	zmq_send(d2, big, sizeof(big), 0);
	for (int i = 0; i < 200; i++) {
		ev_stats(p, &st);
		if (st.replay_bad >= 3)
			break;
		usleep(10000);
	}
	usleep(100 * 1000); /* and nothing more comes of the big frame */
	ev_stats(p, &st);
	assert_int_equal(st.replay_bad, 3);
	assert_int_equal(st.replay_requests, 2);

	/* a flood: served at replay_rate, the rest ignored and counted */
	for (int i = 0; i < 200; i++)
		send_req(d, 100); /* nothing that far: only end markers */
	uint64_t ends = 0;
	int tmo = 300;
	zmq_setsockopt(d, ZMQ_RCVTIMEO, &tmo, sizeof(tmo));
	int n;
	while ((n = recv_frames(d, fr)) > 0) {
		ends++;
		close_frames(fr, n);
	}
	ev_stats(p, &st);
	assert_true(st.replay_limited > 0);
	assert_true(st.replay_requests - 2 == ends);
	assert_true(st.replay_requests - 2 + st.replay_limited == 200);

	/* the publisher still works */
	struct ev_event e = mkev(EV_STORED, "e", 99, -1, EV_MEDIUM_CPU);
	assert_int_equal(ev_post(p, &e), 0);
	assert_int_equal(ev_flush(p, 2000), 0);
	ev_stats(p, &st);
	assert_int_equal(st.next_seq, 9);
	zmq_close(d);
	zmq_close(d2);
	ev_pub_destroy(p);
	zmq_ctx_term(ctx);
}

static bool have_ipv6_loopback(void)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6,
				  .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	bool ok = fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a));

	if (fd >= 0)
		close(fd);
	return ok;
}

static void test_bad_endpoints(void **state)
{
	struct ev_config c;
	struct ev_pub *p, *q;
	char err[256];

	ev_config_default(&c);
	c.endpoint = "nonsense";
	assert_int_equal(ev_pub_create(&c, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "nonsense"));
	c.endpoint = "tcp://*:notaport";
	assert_true(ev_pub_create(&c, &p, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "notaport"));
	/* ports libzmq would truncate, or 0 to connect to: refused */
	static const char *const bad[] = {
		"tcp://127.0.0.1:99999", "tcp://127.0.0.1:65536",
		"tcp://127.0.0.1:5557x", "tcp://127.0.0.1:0",
		"tcp://127.0.0.1:", "tcp://*:99999",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		c.endpoint = bad[i];
		assert_int_equal(ev_pub_create(&c, &p, err, sizeof(err)),
				 -EINVAL);
		assert_non_null(strstr(err, bad[i]));
	}
	/* an IPv6 address works where the host has ::1 */
	if (have_ipv6_loopback()) {
		c.endpoint = "tcp://[::1]:*";
		assert_int_equal(ev_pub_create(&c, &p, err, sizeof(err)), 0);
		assert_non_null(strstr(ev_pub_endpoint(p), "tcp://[::1]:"));
		ev_pub_destroy(p);
	}
	c.endpoint = "tcp://127.0.0.1:*";
	c.node = "a@b";
	assert_int_equal(ev_pub_create(&c, &p, err, sizeof(err)), -EINVAL);
	c.node = "n";
	assert_int_equal(ev_pub_create(&c, &p, err, sizeof(err)), 0);
	/* the same port again: taken */
	const char *used = ev_pub_endpoint(p);
	assert_non_null(strstr(used, "tcp://127.0.0.1:"));
	assert_null(strchr(used, '*'));
	char taken[64];
	snprintf(taken, sizeof(taken), "tcp://*:%s", strrchr(used, ':') + 1);
	c.endpoint = taken;
	assert_int_equal(ev_pub_create(&c, &q, err, sizeof(err)), -EADDRINUSE);
	assert_non_null(strstr(err, taken));
	/* a replay endpoint (always bound) on the taken port */
	c.endpoint = "tcp://127.0.0.1:*";
	c.replay_endpoint = used;
	assert_int_equal(ev_pub_create(&c, &q, err, sizeof(err)), -EADDRINUSE);
	assert_non_null(strstr(err, "events_replay="));
	ev_pub_destroy(p);
}

/* An ipc path: libzmq would unlink what is there (a file, another
 * daemon's live socket) and bind over it; refused. A stale one is
 * replaced. */
static void test_ipc_path_taken(void **state)
{
	char dir[] = "/tmp/kvfs-evipc.XXXXXX", file[64], ep[80], err[256];
	struct ev_config c;
	struct ev_pub *p, *q;
	char buf[8] = { 0 };
	int fd;

	assert_non_null(mkdtemp(dir));
	ev_config_default(&c);
	c.node = "n";
	snprintf(file, sizeof(file), "%s/precious", dir);
	fd = open(file, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "keep", 4), 4);
	close(fd);
	snprintf(ep, sizeof(ep), "ipc://%s", file);
	c.endpoint = ep;
	assert_int_equal(ev_pub_create(&c, &p, err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, ep));
	fd = open(file, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf)), 4);
	close(fd);
	assert_string_equal(buf, "keep");
	unlink(file);

	snprintf(ep, sizeof(ep), "ipc://%s/pub.sock", dir);
	assert_int_equal(ev_pub_create(&c, &p, err, sizeof(err)), 0);
	assert_int_equal(ev_pub_create(&c, &q, err, sizeof(err)), -EADDRINUSE);
	assert_non_null(strstr(err, ep));
	c.endpoint = "tcp://127.0.0.1:*";
	c.replay_endpoint = ep;
	assert_int_equal(ev_pub_create(&c, &q, err, sizeof(err)), -EADDRINUSE);
	ev_pub_destroy(p);

	/* a stale socket file (nobody listening) is replaced */
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s/pub.sock", dir);
	unlink(a.sun_path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	close(fd);
	c.endpoint = ep;
	c.replay_endpoint = NULL;
	assert_int_equal(ev_pub_create(&c, &p, err, sizeof(err)), 0);
	ev_pub_destroy(p);
	unlink(a.sun_path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_queue_full_drops),
		cmocka_unit_test(test_codec_map_u64),
		cmocka_unit_test(test_codec_array_bytes),
		cmocka_unit_test(test_codec_map_layout),
		cmocka_unit_test(test_codec_map_batch),
		cmocka_unit_test(test_codec_garbage),
		cmocka_unit_test(test_pub_frames_seq),
		cmocka_unit_test(test_pub_batches_and_drops),
		cmocka_unit_test(test_replay),
		cmocka_unit_test(test_bad_endpoints),
		cmocka_unit_test(test_ipc_path_taken),
	};
	int rc;

	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd))
		rc = rc ? rc : 1;
	return rc;
}
