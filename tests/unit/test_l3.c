/*
 * test_l3.c - tier/l3 against a real standalone redis-server: the key
 * layout, queued writes and deletions, batched existence, reads, the
 * compare-and-delete of a bad value, dropping a namespace (and only it),
 * a full queue dropping and counting, AUTH, deletions kept and retried
 * while the server does not answer and given up, bounded, at close.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "tests/common/redis_test.h"
#include "tier/l3/l3.h"
#include "tier/l3/l3_slot.h"

static struct rt_server srv;

static struct l3 *open_l3(const char *prefix, uint64_t queue_bytes)
{
	char url[128], err[256] = "";
	struct l3_config cfg = { .servers = rt_url(&srv, url, sizeof(url)),
				 .prefix = prefix, .timeout_ms = 200,
				 .queue_bytes = queue_bytes,
				 .password = srv.password };
	struct l3 *l3 = NULL;
	int rc = l3_open(&cfg, &l3, err, sizeof(err));

	if (rc)
		fprintf(stderr, "l3_open: %s\n", err);
	assert_int_equal(rc, 0);
	return l3;
}

static struct kvfs_key key_of(unsigned i)
{
	struct kvfs_key k;

	memset(&k, 0, sizeof(k));
	k.b[0] = (uint8_t)(i * 37);
	k.b[15] = (uint8_t)i;
	k.b[7] = (uint8_t)(i >> 8);
	return k;
}

static void *val_of(unsigned i, size_t *len)
{
	*len = 1000 + i * 13;
	char *v = malloc(*len);

	for (size_t j = 0; j < *len; j++)
		v[j] = (char)(i + j * 7);
	return v;
}

/* A queued value: a malloc'd buffer, encoded with an "E:" prefix when
 * prefix (the engine builds its record there), freed by release. */
struct val {
	void *data;
	size_t len;
	bool prefix;
	int *encoded, *released, last_err;
};

static int enc(void *arg, void **out, size_t *olen)
{
	struct val *v = arg;
	size_t extra = v->prefix ? 2 : 0;
	char *o = malloc(v->len + extra);

	if (!o)
		return -ENOMEM;
	memcpy(o, "E:", extra);
	memcpy(o + extra, v->data, v->len);
	*out = o;
	*olen = v->len + extra;
	if (v->encoded) /* the store's writer threads call this at once */
		__atomic_fetch_add(v->encoded, 1, __ATOMIC_RELAXED);
	return 0;
}

static int released_errs;

static void rel(void *arg, int err)
{
	struct val *v = arg;

	if (v->released)
		__atomic_fetch_add(v->released, 1, __ATOMIC_RELAXED);
	if (err)
		__atomic_fetch_add(&released_errs, 1, __ATOMIC_RELAXED);
	free(v->data);
	free(v);
}

static int put(struct l3 *l3, const char *ns, const struct kvfs_key *k,
	       void *data, size_t len, bool prefix, int *encoded)
{
	struct val *v = calloc(1, sizeof(*v));
	struct l3_src src = { enc, rel, v, len };

	v->data = data;
	v->len = len;
	v->prefix = prefix;
	v->encoded = encoded;
	int rc = l3_put(l3, ns, k, &src);

	if (rc) { /* still ours */
		released_errs++;
		free(data);
		free(v);
	}
	return rc;
}

static void test_key_layout(void **state)
{
	struct l3 *l3 = open_l3("pfx:", 0);
	struct kvfs_key k = key_of(1);
	char buf[L3_KEY_MAX];
	size_t n = l3_key(l3, "llama.r0", &k, buf);

	assert_int_equal(n, strlen("pfx:llama.r0:") + 32);
	assert_string_equal(buf, "pfx:llama.r0:25000000000000000000000000000001");
	/* a '{' in the name is no hash tag: a namespace spreads over slots */
	unsigned first = 0;
	bool spread = false;

	for (unsigned i = 0; i < 64; i++) {
		struct kvfs_key ki = key_of(i);

		n = l3_key(l3, "n{a}b", &ki, buf);
		if (!i)
			first = l3_key_slot(buf, n);
		spread |= l3_key_slot(buf, n) != first;
	}
	assert_true(spread);
	assert_string_equal(buf, "{}pfx:n{a}b:1b00000000000000000000000000003f");
	l3_close(l3);
}

static void test_put_get_exists_del(void **state)
{
	enum { N = 60 };
	struct l3 *l3 = open_l3(NULL, 0);
	struct kvfs_key keys[N + 5];
	uint8_t present[N + 5];
	struct l3_stats st;
	int encoded = 0;

	for (unsigned i = 0; i < N + 5; i++)
		keys[i] = key_of(i);
	for (unsigned i = 0; i < N; i++) {
		size_t len;
		void *v = val_of(i, &len);

		assert_int_equal(put(l3, "ns1", &keys[i], v, len, true,
				     &encoded), 0);
	}
	assert_int_equal(l3_flush(l3, 5000), 0);
	assert_int_equal(encoded, N);
	assert_int_equal(l3_exists(l3, "ns1", keys, N + 5, present), N);
	for (unsigned i = 0; i < N + 5; i++)
		assert_int_equal(present[i], i < N);
	assert_int_equal(l3_exists(l3, "ns2", keys, N, present), 0);
	for (unsigned i = 0; i < N; i++) {
		struct l3_val v;
		size_t len;
		void *want = val_of(i, &len);

		assert_int_equal(l3_get(l3, "ns1", &keys[i], &v), 0);
		assert_int_equal(v.len, len + 2);
		assert_memory_equal(v.data, "E:", 2);
		assert_memory_equal((const char *)v.data + 2, want, len);
		l3_val_free(&v);
		free(want);
	}
	struct l3_val v;
	assert_int_equal(l3_get(l3, "ns1", &keys[N], &v), -ENOENT);
	/* a deletion follows the write queued before it */
	size_t len;
	void *x = val_of(99, &len);
	assert_int_equal(put(l3, "ns1", &keys[N], x, len, false, NULL), 0);
	assert_int_equal(l3_del(l3, "ns1", &keys[N]), 0);
	assert_int_equal(l3_del(l3, "ns1", &keys[0]), 0);
	assert_int_equal(l3_flush(l3, 5000), 0);
	assert_int_equal(l3_get(l3, "ns1", &keys[N], &v), -ENOENT);
	assert_int_equal(l3_get(l3, "ns1", &keys[0], &v), -ENOENT);
	assert_int_equal(l3_exists(l3, "ns1", keys, N, present), 0);
	assert_int_equal(present[1], 1);

	l3_get_stats(l3, &st);
	assert_int_equal(st.puts, N + 1);
	assert_int_equal(st.dels, 2);
	assert_int_equal(st.hits, N);
	assert_int_equal(st.misses, 3);
	assert_int_equal(st.errors, 0);
	assert_int_equal(st.queue_drops, 0);
	assert_true(st.bytes_in > N * 1000);
	assert_true(st.bytes_out > N * 1000);
	l3_close(l3);
}

static void test_del_bad(void **state)
{
	struct l3 *l3 = open_l3(NULL, 0);
	struct kvfs_key k = key_of(200);
	char name[L3_KEY_MAX], out[256];
	struct l3_val v;
	struct l3_stats st;

	l3_key(l3, "nsbad", &k, name);
	assert_int_equal(rt_cli(&srv, out, sizeof(out), "SET", name, "garbage",
				NULL), 0);
	assert_int_equal(l3_get(l3, "nsbad", &k, &v), 0);
	/* another node writes a good copy before we delete the bad one */
	assert_int_equal(rt_cli(&srv, out, sizeof(out), "SET", name, "good",
				NULL), 0);
	assert_int_equal(l3_del_bad(l3, "nsbad", &k, v.data, v.len), 0);
	l3_val_free(&v);
	assert_int_equal(l3_get(l3, "nsbad", &k, &v), 0);
	assert_int_equal(v.len, 4); /* the good copy survived */
	assert_int_equal(l3_del_bad(l3, "nsbad", &k, "good", 4), 0);
	l3_val_free(&v);
	assert_int_equal(l3_get(l3, "nsbad", &k, &v), -ENOENT);
	l3_get_stats(l3, &st);
	assert_int_equal(st.corrupt, 2);
	/* the refused values are misses, not hits */
	assert_int_equal(st.gets, 3);
	assert_int_equal(st.hits, 0);
	assert_int_equal(st.misses, 3);
	/* a key of another type under the prefix: an error, a miss */
	assert_int_equal(rt_cli(&srv, out, sizeof(out), "LPUSH", name, "x",
				NULL), 0);
	assert_int_equal(l3_get(l3, "nsbad", &k, &v), -EREMOTEIO);
	l3_close(l3);
}

static void test_drop_ns(void **state)
{
	struct l3 *l3 = open_l3(NULL, 0);
	const char *nss[] = { "dropme", "dropme2", "drop*", "keep" };
	struct kvfs_key keys[300];
	uint8_t present[300];

	for (unsigned i = 0; i < 300; i++)
		keys[i] = key_of(i + 1000);
	for (size_t n = 0; n < 4; n++)
		for (unsigned i = 0; i < 300; i++) {
			char *v = strdup("v");

			assert_int_equal(put(l3, nss[n], &keys[i], v, 1, false,
					     NULL), 0);
		}
	assert_int_equal(l3_flush(l3, 5000), 0);
	assert_int_equal(l3_drop_ns(l3, "drop*"), 300);
	/* the '*' in the name is a character, not a pattern */
	assert_int_equal(l3_exists(l3, "dropme", keys, 300, present), 300);
	assert_int_equal(l3_drop_ns(l3, "dropme"), 300);
	assert_int_equal(l3_exists(l3, "dropme", keys, 300, present), 0);
	assert_int_equal(l3_exists(l3, "dropme2", keys, 300, present), 300);
	assert_int_equal(l3_exists(l3, "keep", keys, 300, present), 300);
	assert_int_equal(l3_drop_ns(l3, "nothing"), 0);
	l3_close(l3);
}

static void test_queue_full(void **state)
{
	struct l3 *l3 = open_l3(NULL, 64 << 10);
	struct l3_stats st;
	int dropped = 0;

	for (unsigned i = 0; i < 200; i++) {
		size_t len = 32 << 10;
		void *v = calloc(1, len);
		struct kvfs_key k = key_of(i + 5000);
		int rc = put(l3, "q", &k, v, len, false, NULL);

		assert_true(rc == 0 || rc == -EAGAIN);
		dropped += rc == -EAGAIN;
	}
	assert_int_equal(l3_flush(l3, 5000), 0);
	l3_get_stats(l3, &st);
	assert_true(dropped > 0);
	assert_int_equal(st.queue_drops, dropped);
	assert_int_equal(st.puts + st.queue_drops, 200);
	assert_int_equal(st.queued_bytes, 0);
	assert_int_equal(released_errs, dropped); /* release said so */
	assert_true(l3_queue_room(l3, 64 << 10)); /* empty again */
	assert_false(l3_queue_room(l3, (64 << 10) + 1));
	released_errs = 0;
	l3_close(l3);
}

static void test_bad_prefix(void **state)
{
	struct l3_config cfg = { .servers = "127.0.0.1:1", .prefix = "a b" };
	struct l3 *l3;
	char err[256];
	char longp[100];

	assert_int_equal(l3_open(&cfg, &l3, err, sizeof(err)), -EINVAL);
	memset(longp, 'p', 99);
	longp[99] = 0;
	cfg.prefix = longp;
	assert_int_equal(l3_open(&cfg, &l3, err, sizeof(err)), -EINVAL);
}

static void test_server_down(void **state)
{
	struct l3 *l3 = open_l3(NULL, 0);
	struct kvfs_key k = key_of(1);
	struct l3_val v;
	struct l3_stats st;
	uint64_t t0;

	rt_stop(&srv, true);
	t0 = l3_now_ns();
	assert_int_not_equal(l3_get(l3, "ns1", &k, &v), 0);
	assert_int_not_equal(l3_get(l3, "ns1", &k, &v), 0);
	assert_true(l3_now_ns() - t0 < 500000000ull);
	char *x = strdup("x");
	assert_int_equal(put(l3, "ns1", &k, x, 1, false, NULL), 0);
	assert_int_equal(l3_flush(l3, 5000), 0);
	l3_get_stats(l3, &st);
	assert_int_equal(st.misses, 2);
	assert_true(st.errors >= 3);
	assert_int_equal(st.queue_drops, 1);
	assert_int_equal(released_errs, 1); /* the server failure, reported */
	released_errs = 0;
	assert_int_equal(rt_restart(&srv), 0);
	for (int i = 0; i < 50 && l3_get(l3, "ns1", &k, &v) == -EHOSTDOWN; i++) {
		struct timespec ts = { 0, 50000000 };

		nanosleep(&ts, NULL);
	}
	assert_int_equal(l3_get(l3, "ns1", &k, &v), -ENOENT); /* reachable */
	l3_close(l3);
}

/* A deletion's done: counts calls (dels_done) and failures. The store's
 * writer threads call it, several at once: atomic counts. */
static int dels_done, dels_failed;

static void del_done(void *arg, int err)
{
	(void)arg;
	__atomic_add_fetch(&dels_done, 1, __ATOMIC_RELAXED);
	if (err)
		__atomic_add_fetch(&dels_failed, 1, __ATOMIC_RELAXED);
}

/* A server that does not answer: deletions are kept and retried (not
 * dropped) until it does; l3_close gives up what is left, bounded. */
static void test_del_kept_close_bounded(void **state)
{
	char url[128], err[256] = "";
	struct l3_config cfg = { .servers = rt_url(&srv, url, sizeof(url)),
				 .timeout_ms = 50, .write_timeout_ms = 200,
				 .password = srv.password };
	struct kvfs_key k = key_of(7);
	struct timespec nap = { 1, 500000000 };
	struct l3_stats st;
	struct l3 *l3;
	uint64_t t0;

	assert_int_equal(l3_open(&cfg, &l3, err, sizeof(err)), 0);
	assert_int_equal(put(l3, "nsk", &k, strdup("v"), 1, false, NULL), 0);
	assert_int_equal(l3_flush(l3, 5000), 0);
	dels_done = dels_failed = 0;
	rt_pause(&srv);
	assert_int_equal(l3_del_cb(l3, "nsk", &k, del_done, NULL), 0);
	nanosleep(&nap, NULL); /* the writers' bound, seven times */
	l3_get_stats(l3, &st);
	assert_true(st.retries >= 1);
	assert_int_equal(st.del_drops, 0);
	assert_int_equal(dels_done, 0); /* kept */
	rt_resume(&srv);
	assert_int_equal(l3_flush(l3, 10000), 0);
	assert_int_equal(dels_done, 1);
	assert_int_equal(dels_failed, 0);
	struct l3_val v;
	assert_int_equal(l3_get(l3, "nsk", &k, &v), -ENOENT);
	l3_get_stats(l3, &st);
	assert_int_equal(st.dels, 1);

	/* closing while it does not answer: about one bound, not one per
	 * item nor forever; every deletion's done says it was given up */
	rt_pause(&srv);
	for (unsigned i = 0; i < 40; i++) {
		struct kvfs_key ki = key_of(100 + i);

		assert_int_equal(l3_del_cb(l3, "nsk", &ki, del_done, NULL), 0);
	}
	t0 = l3_now_ns();
	l3_close(l3);
	fprintf(stderr, "  l3_close, server stopped: %.0f ms\n",
		(double)(l3_now_ns() - t0) / 1e6);
	assert_true(l3_now_ns() - t0 < 3000000000ull); /* not 40 bounds */
	assert_int_equal(dels_done, 41);
	assert_int_equal(dels_failed, 40);
	rt_resume(&srv);
}

static int setup(void **state)
{
	return rt_start(&srv, false, "l3-test-pw");
}

static int teardown(void **state)
{
	rt_stop(&srv, true);
	return 0;
}

int main(void)
{
	const char *why = rt_skip_reason();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_layout),
		cmocka_unit_test(test_put_get_exists_del),
		cmocka_unit_test(test_del_bad),
		cmocka_unit_test(test_drop_ns),
		cmocka_unit_test(test_queue_full),
		cmocka_unit_test(test_bad_prefix),
		cmocka_unit_test(test_server_down),
		cmocka_unit_test(test_del_kept_close_bounded),
	};

	if (why) {
		printf("skipped: %s\n", why);
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
