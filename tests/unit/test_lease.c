/*
 * test_lease.c - the lease table on a real engine (no FUSE): pins owned by
 * leases come back on unpin, on expiry (the thread, and lazily), on owner
 * close and on table destroy; ids are never reused; uid checks; handles.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kvfs.h"
#include "tier/lease.h"
#include "tier/tier.h"

#define N 6

struct fx {
	struct tier *t;
	struct lease_table *lt;
	uint32_t ns;
	struct kvfs_key keys[N];
};

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static uint32_t refs(struct fx *f, int i)
{
	struct tier_info info;

	assert_int_equal(tier_stat(f->t, f->ns, &f->keys[i], &info), 0);
	return info.refs;
}

static int setup(void **state)
{
	struct tier_config cfg;
	struct fx *f = calloc(1, sizeof(*f));
	uint32_t tok[4];
	char err[256], buf[512];

	if (!f)
		return -1;
	tier_config_default(&cfg);
	cfg.l1_size = 8 << 20;
	cfg.max_chunk = 1 << 20;
	if (tier_create(&cfg, &f->t, err, sizeof(err))) {
		fprintf(stderr, "tier_create: %s\n", err);
		return -1;
	}
	if (tier_ns_create(f->t, "lease", &f->ns))
		return -1;
	memset(buf, 7, sizeof(buf));
	for (int i = 0; i < N; i++) {
		struct tier_wr *w;

		for (int j = 0; j < 4; j++)
			tok[j] = (uint32_t)(i * 4 + j);
		kvfs_key_chunk(i ? &f->keys[i - 1] : NULL, 0, NULL, 0, tok, 4,
			       &f->keys[i]);
		if (tier_wr_begin(f->t, f->ns, &f->keys[i], sizeof(buf), &w) ||
		    tier_wr_pwrite(f->t, w, buf, sizeof(buf), 0) ||
		    tier_wr_publish(f->t, w, NULL))
			return -1;
	}
	if (lease_table_create(f->t, 200, &f->lt))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	lease_table_destroy(f->lt);
	tier_destroy(f->t);
	free(f);
	return 0;
}

/* Pins keys[0..n) with tier_lookup and hands them to a new lease. */
static uint64_t take(struct fx *f, uint64_t owner, uid_t uid, uint32_t ms,
		     uint32_t n)
{
	struct lease_pin pins[N];
	uint32_t found, l1, l2;
	uint64_t id = 0, gens[N];

	assert_int_equal(tier_lookup_pinned(f->t, f->ns, f->keys, n, 0, false,
					    gens, &found, &l1, &l2), 0);
	assert_int_equal(found, n);
	for (uint32_t i = 0; i < n; i++) {
		pins[i].ns = f->ns;
		pins[i].key = f->keys[i];
		pins[i].gen = gens[i];
	}
	assert_int_equal(lease_add(f->lt, owner, uid, ms, pins, n, &id), 0);
	assert_true(id > 0);
	return id;
}

static void test_unpin(void **state)
{
	struct fx *f = *state;
	struct lease_stats st;
	uint64_t a, b;

	/* a user's leases last at most the table's default: make it long
	 * enough that nothing expires during this test */
	lease_table_destroy(f->lt);
	assert_int_equal(lease_table_create(f->t, 60000, &f->lt), 0);
	a = take(f, 1, 1000, 60000, N);

	for (int i = 0; i < N; i++)
		assert_int_equal(refs(f, i), 1);
	b = take(f, 1, 1000, 60000, 2);
	assert_true(b > a);
	assert_int_equal(refs(f, 0), 2);
	assert_int_equal(lease_release(f->lt, a, 99, 2000, 0), -EPERM);
	assert_int_equal(lease_release(f->lt, a, 99, 1000, 1), -ENOENT);
	assert_int_equal(lease_release(f->lt, a, 99, 1000, 0), 0);
	assert_int_equal(lease_release(f->lt, a, 99, 1000, 0), -ENOENT);
	assert_int_equal(refs(f, 0), 1);
	assert_int_equal(refs(f, 5), 0);
	assert_int_equal(lease_release(f->lt, b, 1, 0, 0), 0); /* root */
	assert_int_equal(refs(f, 0), 0);
	assert_int_equal(lease_release(f->lt, 0, 1, 0, 0), -ENOENT);
	lease_get_stats(f->lt, &st);
	assert_int_equal(st.active, 0);
	assert_int_equal(st.pinned, 0);
	assert_int_equal(st.unpinned, 2);
	assert_int_equal(lease_add(f->lt, 1, 0, 0, NULL, 0, &a), -EINVAL);
}

static void test_expiry(void **state)
{
	struct fx *f = *state;
	struct lease_stats st;
	uint64_t a, b, c;

	a = take(f, 2, 0, 30, N);   /* short */
	b = take(f, 2, 0, 0, 3);    /* the table's default, 200 ms */
	c = take(f, 2, 0, 60000, 1);
	sleep_ms(100);
	/* The thread released the short one by itself. */
	assert_int_equal(refs(f, 5), 0);
	assert_int_equal(refs(f, 0), 2);
	assert_int_equal(lease_release(f->lt, a, 2, 0, 0), -ENOENT);
	sleep_ms(250);
	assert_int_equal(refs(f, 2), 0);
	assert_int_equal(refs(f, 0), 1);
	assert_int_equal(lease_release(f->lt, b, 2, 0, 0), -ENOENT);
	lease_get_stats(f->lt, &st);
	assert_int_equal(st.expired, 2);
	assert_int_equal(st.active, 1);
	assert_int_equal(lease_release(f->lt, c, 2, 0, 0), 0);
	assert_int_equal(refs(f, 0), 0);
}

/* The thread idles until a default lease's time from now when no lease
 * is held, and linking a lease due later wakes nobody: a shorter lease
 * taken then, alone or after such a long one, must still wake it and
 * expire on time. */
static void test_expiry_while_idle(void **state)
{
	struct fx *f = *state;
	uint64_t a;

	lease_table_destroy(f->lt);
	assert_int_equal(lease_table_create(f->t, 60000, &f->lt), 0);
	sleep_ms(20); /* the thread waits, with nothing held */
	take(f, 4, 0, 30, 3);
	sleep_ms(300);
	assert_int_equal(refs(f, 0), 0); /* released by the thread */
	a = take(f, 4, 0, 60000, 1); /* due after its wake-up: no signal */
	take(f, 4, 0, 30, 3);
	sleep_ms(300);
	assert_int_equal(refs(f, 2), 0);
	assert_int_equal(refs(f, 0), 1);
	assert_int_equal(lease_release(f->lt, a, 4, 0, 0), 0);
	assert_int_equal(refs(f, 0), 0);
}

static void test_lazy_expiry(void **state)
{
	struct fx *f = *state;
	uint64_t a = take(f, 3, 0, 1, 2);

	/* Past its deadline: ENOENT even if the thread has not run. */
	sleep_ms(5);
	assert_int_equal(lease_release(f->lt, a, 3, 0, 0), -ENOENT);
	assert_int_equal(refs(f, 0), 0);
	assert_int_equal(lease_expire_now(f->lt), 0);
}

static void test_owner_close(void **state)
{
	struct fx *f = *state;
	struct tier_chunk *c;
	uint64_t h, h2;

	take(f, 10, 0, 60000, N);
	take(f, 10, 0, 60000, 2);
	take(f, 11, 0, 60000, 1);
	assert_int_equal(tier_get(f->t, f->ns, &f->keys[3], &c), 0);
	assert_int_equal(lease_add_handle(f->lt, 10, 0, c, NULL, &h), 0);
	assert_int_equal(lease_owner_handle(f->lt, 10), h);
	assert_int_equal(lease_owner_handle(f->lt, 11), 0);
	assert_int_equal(lease_add_handle(f->lt, 10, 0, c, NULL, &h2), -EBUSY);
	assert_int_equal(refs(f, 3), 2);
	/* Handles are released only by their own fd, and not by UNPIN. */
	assert_int_equal(lease_release(f->lt, h, 11, 0, 1), -ENOENT);
	assert_int_equal(lease_release(f->lt, h, 10, 0, 0), -ENOENT);
	assert_int_equal(refs(f, 0), 3);
	assert_int_equal(lease_release_owner(f->lt, 10), 3);
	assert_int_equal(refs(f, 0), 1);
	assert_int_equal(refs(f, 3), 0);
	assert_int_equal(lease_release_owner(f->lt, 10), 0);
	assert_int_equal(lease_release_owner(f->lt, 11), 1);
	assert_int_equal(refs(f, 0), 0);
}

static void test_stats(void **state)
{
	struct fx *f = *state;
	struct lease_stats st;

	take(f, 20, 0, 60000, 2);
	lease_get_stats(f->lt, &st);
	assert_int_equal(st.active, 1);
	assert_int_equal(st.pinned, 2);
	assert_int_equal(st.lease_ms, 200);
	/* Left held on purpose: lease_table_destroy must give it back. */
}

/* Threads taking, releasing, closing and letting leases expire at once,
 * with the expiry thread running: every pin must come back exactly once. */
struct churn {
	struct fx *f;
	uint64_t owner;
	int bad;
};

static void *churn_main(void *arg)
{
	struct churn *c = arg;
	struct fx *f = c->f;

	for (int i = 0; i < 300; i++) {
		struct lease_pin pins[N];
		uint32_t n = 1 + (uint32_t)(i % N), found, l1, l2;
		uint64_t id, gens[N];

		if (tier_lookup_pinned(f->t, f->ns, f->keys, n, 0, false, gens,
				       &found, &l1, &l2) || found != n) {
			c->bad = 1;
			return NULL;
		}
		for (uint32_t k = 0; k < n; k++) {
			pins[k].ns = f->ns;
			pins[k].key = f->keys[k];
			pins[k].gen = gens[k];
		}
		if (lease_add(f->lt, c->owner, 0, i % 3 ? 60000 : 1 + i % 5,
			      pins, n, &id)) {
			c->bad = 1;
			return NULL;
		}
		if (i % 3 == 1 && lease_release(f->lt, id, c->owner, 0, 0))
			c->bad = 1;
		if (i % 50 == 0)
			lease_release_owner(f->lt, c->owner);
	}
	lease_release_owner(f->lt, c->owner);
	return NULL;
}

static void test_threads(void **state)
{
	struct fx *f = *state;
	struct churn c[4];
	pthread_t th[4];
	struct lease_stats st;

	for (int i = 0; i < 4; i++) {
		c[i] = (struct churn){ f, 100 + (uint64_t)i, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, churn_main, &c[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(c[i].bad, 0);
	}
	sleep_ms(20);
	lease_expire_now(f->lt);
	lease_get_stats(f->lt, &st);
	assert_int_equal(st.active, 0);
	assert_int_equal(st.pinned, 0);
	assert_int_equal(st.taken, 1200);
	assert_int_equal(st.taken, st.unpinned + st.expired + st.closed);
	for (int i = 0; i < N; i++)
		assert_int_equal(refs(f, i), 0);
}

/*
 * A non-root caller cannot hold pins longer than the mount's lease_ms
 * (the table's default): asking for a minute gets 200 ms. Root may ask for
 * more, up to LEASE_MAX_MS.
 */
static void test_lease_cap(void **state)
{
	struct fx *f = *state;
	uint64_t a, b;

	assert_int_equal(lease_grant_ms(f->lt, 1000, 0), 200);
	assert_int_equal(lease_grant_ms(f->lt, 1000, 60000), 200);
	assert_int_equal(lease_grant_ms(f->lt, 1000, 50), 50);
	assert_int_equal(lease_grant_ms(f->lt, 0, 0), 200);
	assert_int_equal(lease_grant_ms(f->lt, 0, 60000), 60000);
	assert_int_equal(lease_grant_ms(f->lt, 0, UINT32_MAX), LEASE_MAX_MS);
	a = take(f, 30, 1000, 60000, 1); /* a user asks for a minute */
	b = take(f, 31, 0, 60000, 2);    /* root asks for a minute */
	assert_int_equal(refs(f, 0), 2);
	sleep_ms(350);
	lease_expire_now(f->lt);
	assert_int_equal(refs(f, 0), 1);  /* the user's lease is gone */
	assert_int_equal(refs(f, 1), 1);
	assert_int_equal(lease_release(f->lt, a, 30, 1000, 0), -ENOENT);
	assert_int_equal(lease_release(f->lt, b, 31, 0, 0), 0);
	assert_int_equal(refs(f, 0), 0);
	assert_int_equal(refs(f, 1), 0);
}

/*
 * One non-root user cannot fill the table: past LEASE_MAX_PER_UID its
 * lookups get -ENOSPC while another user and root still get leases, and
 * releasing one lease gives the user room again.
 */
static void test_uid_share(void **state)
{
	struct fx *f = *state;
	struct lease_pin pin = { .ns = f->ns, .key = f->keys[0] };
	uint32_t found, l1, l2;
	uint64_t id = 0, first = 0;

	for (int i = 0; i < LEASE_MAX_PER_UID; i++) {
		assert_int_equal(tier_lookup_pinned(f->t, f->ns, f->keys, 1, 0,
						    false, &pin.gen, &found,
						    &l1, &l2), 0);
		assert_int_equal(lease_add(f->lt, 40, 1000, 0, &pin, 1, &id), 0);
		if (!first)
			first = id;
	}
	assert_int_equal(refs(f, 0), LEASE_MAX_PER_UID);
	assert_int_equal(tier_lookup_pinned(f->t, f->ns, f->keys, 1, 0, false,
					    &pin.gen, &found, &l1, &l2), 0);
	assert_int_equal(lease_add(f->lt, 40, 1000, 0, &pin, 1, &id), -ENOSPC);
	/* the caller still owns the pin of a refused lease */
	assert_int_equal(lease_add(f->lt, 41, 1001, 0, &pin, 1, &id), 0);
	take(f, 42, 0, 0, 1);
	assert_int_equal(lease_release(f->lt, first, 40, 1000, 0), 0);
	take(f, 40, 1000, 0, 1);
	assert_int_equal(lease_release_owner(f->lt, 40), LEASE_MAX_PER_UID);
	assert_int_equal(lease_release_owner(f->lt, 41), 1);
	assert_int_equal(lease_release_owner(f->lt, 42), 1);
	assert_int_equal(refs(f, 0), 0);
}

/* Publishes keys[i] again (new bytes, a new generation). */
static void republish(struct fx *f, int i)
{
	char buf[100];
	struct tier_wr *w;

	memset(buf, 9, sizeof(buf));
	assert_int_equal(tier_unlink(f->t, f->ns, &f->keys[i]), 0);
	assert_int_equal(tier_wr_begin(f->t, f->ns, &f->keys[i], sizeof(buf),
				       &w), 0);
	assert_int_equal(tier_wr_pwrite(f->t, w, buf, sizeof(buf), 0), 0);
	assert_int_equal(tier_wr_publish(f->t, w, NULL), 0);
}

/*
 * A lease releases exactly the chunks it pinned: a key unlinked and
 * published again while the lease holds the old copy keeps the new copy's
 * pins (another lease's) when the old lease goes.
 */
static void test_release_own_generation(void **state)
{
	struct fx *f = *state;
	struct tier_stats st0, st;
	uint64_t a, b;

	tier_get_stats(f->t, &st0);
	a = take(f, 40, 0, 60000, 2);
	republish(f, 1);
	assert_int_equal(refs(f, 1), 0);
	b = take(f, 41, 0, 60000, 2);
	assert_int_equal(refs(f, 0), 2);
	assert_int_equal(refs(f, 1), 1);
	assert_int_equal(lease_release(f->lt, a, 40, 0, 0), 0);
	assert_int_equal(refs(f, 0), 1);
	assert_int_equal(refs(f, 1), 1);  /* still b's */
	/* b expiring by close releases the new copy, once */
	assert_int_equal(lease_release_owner(f->lt, 41), 1);
	assert_int_equal(refs(f, 0), 0);
	assert_int_equal(refs(f, 1), 0);
	(void)b;
	/* no chunk left over */
	tier_get_stats(f->t, &st);
	assert_int_equal(st.l1_chunks, st0.l1_chunks);
}


/*
 * A lease of many pins over two namespaces (a group lookup's), given back
 * in runs under one hold of the engine lock (tier_unpin_pins): every pin
 * lands where it was taken, across the 16-key prefetch blocks and the
 * 512-pin runs, a pin of unknown generation (0) by key, and a key
 * unlinked and published again meanwhile gives back its old copy's pin,
 * not the new copy's (another lease's).
 */
static void test_release_many(void **state)
{
	enum { M = 600 };
	struct fx *f = *state;
	struct lease_pin *pins = calloc(2 * M + 3, sizeof(*pins));
	struct kvfs_key *k = calloc(M, sizeof(*k));
	uint32_t ns[2], found, l1, l2;
	uint64_t *gens = calloc(M, sizeof(*gens)), a, b;
	struct tier_stats st0, st;
	struct tier_info info;
	size_t n = 0;
	char buf[64];

	assert_non_null(pins);
	assert_non_null(k);
	assert_non_null(gens);
	memset(buf, 5, sizeof(buf));
	assert_int_equal(tier_ns_create(f->t, "many.a", &ns[0]), 0);
	assert_int_equal(tier_ns_create(f->t, "many.b", &ns[1]), 0);
	for (uint32_t i = 0; i < M; i++) {
		memset(&k[i], 0, sizeof(k[i]));
		memcpy(k[i].b, &i, sizeof(i));
		k[i].b[15] = 0x5a;
		for (int j = 0; j < 2; j++) {
			struct tier_wr *w;

			assert_int_equal(tier_wr_begin(f->t, ns[j], &k[i],
						       sizeof(buf), &w), 0);
			assert_int_equal(tier_wr_pwrite(f->t, w, buf,
							sizeof(buf), 0), 0);
			assert_int_equal(tier_wr_publish(f->t, w, NULL), 0);
		}
	}
	tier_get_stats(f->t, &st0);
	for (int j = 0; j < 2; j++) {
		assert_int_equal(tier_lookup_pinned(f->t, ns[j], k, M, 0, false,
						    gens, &found, &l1, &l2), 0);
		assert_int_equal(found, M);
		for (uint32_t i = 0; i < M; i++)
			pins[n++] = (struct lease_pin){ ns[j], k[i], gens[i] };
	}
	/* the fixture's keys 0 and 1 with their generations, key 2 with 0 */
	assert_int_equal(tier_lookup_pinned(f->t, f->ns, f->keys, 2, 0, false,
					    gens, &found, &l1, &l2), 0);
	pins[n++] = (struct lease_pin){ f->ns, f->keys[0], gens[0] };
	pins[n++] = (struct lease_pin){ f->ns, f->keys[1], gens[1] };
	assert_int_equal(tier_pin_key(f->t, f->ns, &f->keys[2]), 0);
	pins[n++] = (struct lease_pin){ f->ns, f->keys[2], 0 };
	assert_int_equal(lease_add(f->lt, 50, 0, 60000, pins, n, &a), 0);
	republish(f, 1);
	b = take(f, 51, 0, 60000, 2);
	assert_int_equal(refs(f, 1), 1); /* the new copy: b's */
	assert_int_equal(lease_release(f->lt, a, 50, 0, 0), 0);
	for (uint32_t i = 0; i < M; i++)
		for (int j = 0; j < 2; j++) {
			assert_int_equal(tier_stat(f->t, ns[j], &k[i], &info), 0);
			assert_int_equal(info.refs, 0);
		}
	assert_int_equal(refs(f, 0), 1); /* b's */
	assert_int_equal(refs(f, 1), 1); /* b's, on the new copy */
	assert_int_equal(refs(f, 2), 0);
	assert_int_equal(lease_release(f->lt, b, 51, 0, 0), 0);
	assert_int_equal(refs(f, 0), 0);
	assert_int_equal(refs(f, 1), 0);
	/* the old copy of key 1 went with its last pin */
	tier_get_stats(f->t, &st);
	assert_int_equal(st.l1_chunks, st0.l1_chunks);
	free(gens);
	free(k);
	free(pins);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_unpin, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expiry_while_idle, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lazy_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_owner_close, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stats, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lease_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_uid_share, setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_own_generation,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_release_many, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
