/*
 * test_policy.c - the eviction policies, driven directly through
 * struct policy_ops on arrays of struct policy_item (no engine): order,
 * pins, S3-FIFO's scan resistance and ghost, the prefix policy's
 * leaves-before-parents and deeper-first ties, and a randomized check of
 * every policy against a model.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/unit/policy_test.h"
#include "tier/policy/policy.h"

/* ------------------------------------------------------------- table */

static void test_table(void **state)
{
	const char *const *names = policy_names();
	const char *want[] = { "lru", "fifo", "s3fifo", "prefix", "s2lru" };
	size_t n = 0;

	for (; names[n]; n++) {
		const struct policy_ops *ops = policy_find(names[n]);

		assert_non_null(ops);
		assert_string_equal(ops->name, names[n]);
		assert_non_null(ops->create);
		assert_non_null(ops->destroy);
		assert_non_null(ops->insert);
		assert_non_null(ops->access);
		assert_non_null(ops->remove);
		assert_non_null(ops->evict);
		assert_non_null(ops->meta_bytes);
	}
	assert_int_equal(n, 5);
	for (size_t i = 0; i < 5; i++)
		assert_non_null(policy_find(want[i]));
	assert_null(policy_find("LRU"));
	assert_null(policy_find("s3fifox"));
	assert_null(policy_find(""));
	assert_null(policy_find(NULL));
}

/* ------------------------------------------------------ basic orders */

static void test_lru_order(void **state)
{
	const struct policy_ops *ops;
	struct policy *p = mk("lru", 5, &ops);
	struct policy_item it[5];
	const int want[] = { 1, 3, 4, 0, 2 };

	items_init(it, 5);
	for (int i = 0; i < 5; i++)
		ops->insert(p, &it[i]);
	ops->access(p, &it[0]);
	ops->access(p, &it[2]);
	expect_order(ops, p, it, want, 5);
	ops->destroy(p);
}

static void test_fifo_order(void **state)
{
	const struct policy_ops *ops;
	struct policy *p = mk("fifo", 5, &ops);
	struct policy_item it[5];
	const int want[] = { 0, 1, 2, 3, 4 };

	items_init(it, 5);
	for (int i = 0; i < 5; i++)
		ops->insert(p, &it[i]);
	ops->access(p, &it[0]);
	ops->access(p, &it[2]);
	expect_order(ops, p, it, want, 5);
	ops->destroy(p);
}

/* S3-FIFO, all in S: items hit while in S move to M (freq cleared), the
 * others go first; then M in FIFO order. */
static void test_s3fifo_order(void **state)
{
	const struct policy_ops *ops;
	struct policy *p = mk("s3fifo", 6, &ops);
	struct policy_item it[6];
	const int want[] = { 1, 3, 5, 0, 2, 4 };

	items_init(it, 6);
	for (int i = 0; i < 6; i++)
		ops->insert(p, &it[i]);
	ops->access(p, &it[0]);
	ops->access(p, &it[2]);
	ops->access(p, &it[4]);
	ops->access(p, &it[4]);
	expect_order(ops, p, it, want, 6);
	ops->destroy(p);
}

/* S3-FIFO, M: a chunk with hits left is reinserted with freq - 1. */
static void test_s3fifo_main_reinsert(void **state)
{
	const struct policy_ops *ops;
	struct policy *p = mk("s3fifo", 4, &ops);
	struct policy_item it[4];
	struct policy_item *v;

	items_init(it, 4);
	for (int i = 0; i < 4; i++) {
		ops->insert(p, &it[i]);
		ops->access(p, &it[i]);
	}
	/* All four move S -> M with freq 0; 0 is the first victim. */
	assert_ptr_equal(ops->evict(p), &it[0]);
	/* M = 1, 2, 3. Two hits on 1: it survives two turns of M. */
	ops->access(p, &it[1]);
	ops->access(p, &it[1]);
	assert_ptr_equal(ops->evict(p), &it[2]);
	assert_ptr_equal(ops->evict(p), &it[3]);
	v = ops->evict(p);
	assert_ptr_equal(v, &it[1]);
	assert_null(ops->evict(p));
	ops->destroy(p);
}

/* ------------------------------------------------------------ remove */

static void test_remove(void **state)
{
	for (const char *const *n = policy_names(); *n; n++) {
		const struct policy_ops *ops;
		struct policy *p = mk(*n, 8, &ops);
		struct policy_item it[8];
		struct policy_item *v;
		int seen = 0;

		items_init(it, 8);
		for (int i = 0; i < 8; i++)
			ops->insert(p, &it[i]);
		ops->remove(p, &it[0]);
		ops->remove(p, &it[5]);
		ops->remove(p, &it[7]);
		/* A second remove of the same item is harmless. */
		ops->remove(p, &it[5]);
		while ((v = ops->evict(p))) {
			assert_true(v != &it[0] && v != &it[5] && v != &it[7]);
			seen++;
		}
		assert_int_equal(seen, 5);
		/* Removed items can come back. */
		ops->insert(p, &it[5]);
		assert_ptr_equal(ops->evict(p), &it[5]);
		assert_null(ops->evict(p));
		ops->destroy(p);
	}
}

/* -------------------------------------------------------------- pins */

static void test_pinned_never_evicted(void **state)
{
	for (const char *const *n = policy_names(); *n; n++) {
		const struct policy_ops *ops;
		struct policy *p = mk(*n, 10, &ops);
		struct policy_item it[10];
		struct policy_item *v;
		int got = 0;

		items_init(it, 10);
		for (int i = 0; i < 10; i++) {
			it[i].refs = (i % 3 == 0); /* 0, 3, 6, 9 pinned */
			ops->insert(p, &it[i]);
			if (i & 1)
				ops->access(p, &it[i]);
		}
		while ((v = ops->evict(p))) {
			if (v->refs)
				fail_msg("%s evicted pinned item %td", *n, v - it);
			got++;
		}
		assert_int_equal(got, 6);
		/* All pinned: NULL, repeatedly, and nothing is lost. */
		assert_null(ops->evict(p));
		assert_null(ops->evict(p));
		it[6].refs = 0;
		assert_ptr_equal(ops->evict(p), &it[6]);
		assert_null(ops->evict(p));
		for (int i = 0; i < 10; i += 3)
			it[i].refs = 0;
		got = 0;
		while ((v = ops->evict(p)))
			got++;
		assert_int_equal(got, 3);
		ops->destroy(p);
	}
}

/* An all-pinned cache of many items, evicted from repeatedly: returns
 * NULL each time and does not get stuck. */
static void test_all_pinned_large(void **state)
{
	enum { N = 5000 };
	struct policy_item *it = calloc(N, sizeof(*it));

	assert_non_null(it);
	for (const char *const *n = policy_names(); *n; n++) {
		const struct policy_ops *ops;
		struct policy *p = mk(*n, N, &ops);

		items_init(it, N);
		for (int i = 0; i < N; i++) {
			it[i].refs = 1;
			ops->insert(p, &it[i]);
			ops->access(p, &it[i]);
		}
		for (int k = 0; k < 20; k++)
			assert_null(ops->evict(p));
		it[N / 2].refs = 0;
		assert_ptr_equal(ops->evict(p), &it[N / 2]);
		for (int i = 0; i < N; i++)
			if (i != N / 2)
				ops->remove(p, &it[i]);
		assert_null(ops->evict(p));
		ops->destroy(p);
	}
	free(it);
}

/* ------------------------------------------------ a small cache model */

/*
 * Runs a reference string through a cache of cap items managed by policy
 * name, the way the engine would: a hit bumps the logical clock and
 * accesses, a miss evicts while full and inserts. Returns the hits counted
 * from request number count_from on; resident[] says who is cached.
 */
struct sim {
	const struct policy_ops *ops;
	struct policy *p;
	struct policy_item *it;
	unsigned char *resident;
	size_t nres, cap;
	uint64_t clock;
};

static void sim_init(struct sim *s, const char *name, size_t cap,
		     size_t nkeys)
{
	s->p = mk(name, cap, &s->ops);
	s->it = calloc(nkeys, sizeof(*s->it));
	s->resident = calloc(nkeys, 1);
	assert_non_null(s->it);
	assert_non_null(s->resident);
	for (size_t i = 0; i < nkeys; i++)
		s->it[i].hkey = 0x9e3779b97f4a7c15ull * (i + 1);
	s->nres = 0;
	s->cap = cap;
	s->clock = 0;
}

static void sim_fini(struct sim *s)
{
	s->ops->destroy(s->p);
	free(s->it);
	free(s->resident);
}

static int sim_req(struct sim *s, size_t k)
{
	struct policy_item *it = &s->it[k];

	it->atime = ++s->clock;
	if (s->resident[k]) {
		s->ops->access(s->p, it);
		return 1;
	}
	while (s->nres >= s->cap) {
		struct policy_item *v = s->ops->evict(s->p);

		assert_non_null(v);
		assert_true(s->resident[v - s->it]);
		s->resident[v - s->it] = 0;
		s->nres--;
	}
	it->freq = 0;
	it->q = 0;
	s->ops->insert(s->p, it);
	s->resident[k] = 1;
	s->nres++;
	return 0;
}

/*
 * Hot working set of 30 keys, each read 5 times, then a one-time scan of
 * 2000 new keys through a cache of 100, then the hot set again. LRU is
 * flushed by the scan; S3-FIFO lets the scan flow through S and keeps the
 * hot set in M.
 */
static size_t scan_keeps(const char *name, size_t *hits_after)
{
	enum { CAP = 100, HOT = 30, SCAN = 2000 };
	struct sim s;
	size_t kept = 0;

	sim_init(&s, name, CAP, HOT + SCAN);
	for (int r = 0; r < 5; r++)
		for (size_t k = 0; k < HOT; k++)
			sim_req(&s, k);
	for (size_t k = HOT; k < HOT + SCAN; k++)
		sim_req(&s, k);
	for (size_t k = 0; k < HOT; k++)
		kept += s.resident[k];
	*hits_after = 0;
	for (size_t k = 0; k < HOT; k++)
		*hits_after += sim_req(&s, k);
	sim_fini(&s);
	return kept;
}

static void test_scan_resistance(void **state)
{
	size_t lru_hits, s3_hits, fifo_hits;
	size_t lru = scan_keeps("lru", &lru_hits);
	size_t s3 = scan_keeps("s3fifo", &s3_hits);
	size_t fifo = scan_keeps("fifo", &fifo_hits);

	print_message("hot keys kept after the scan: lru %zu, fifo %zu, "
		      "s3fifo %zu of 30\n", lru, fifo, s3);
	assert_int_equal(lru, 0);
	assert_int_equal(fifo, 0);
	assert_int_equal(s3, 30);
	assert_true(s3_hits > lru_hits);
}

/*
 * s2lru's training: 30 hot keys re-read between runs of 100 one-off keys
 * through a cache of 100. LRU loses the hot set every round; second-sight
 * admission keeps it, so s2lru's shadows turn second_sight on. Returns the
 * hot hits of the last 10 rounds (of 300).
 */
static size_t s2_train(struct sim *s, size_t *next)
{
	size_t hits = 0;

	for (int round = 0; round < 40; round++) {
		for (size_t k = 0; k < 30; k++) {
			size_t h = sim_req(s, k);

			hits += round >= 30 ? h : 0;
		}
		for (int i = 0; i < 100; i++)
			sim_req(s, (*next)++);
	}
	return hits;
}

/* What it must resist, once trained: a scan of 2000 one-off keys flows
 * through P and out, and the hot set stays; LRU is flushed. */
static void test_s2lru_scan_resistance(void **state)
{
	const char *names[] = { "lru", "s2lru" };
	size_t trained[2], kept[2];

	for (int n = 0; n < 2; n++) {
		struct sim s;
		size_t next = 30;

		sim_init(&s, names[n], 100, 30 + 4000 + 2000);
		trained[n] = s2_train(&s, &next);
		for (int i = 0; i < 2000; i++)
			sim_req(&s, next++);
		kept[n] = 0;
		for (size_t k = 0; k < 30; k++)
			kept[n] += s.resident[k];
		sim_fini(&s);
	}
	print_message("hot hits while training: lru %zu, s2lru %zu of 300; "
		      "kept after the scan: lru %zu, s2lru %zu of 30\n",
		      trained[0], trained[1], kept[0], kept[1]);
	assert_int_equal(trained[0], 0);
	assert_true(trained[1] >= 290);
	assert_int_equal(kept[0], 0);
	assert_int_equal(kept[1], 30);
}

/*
 * What it must keep: LRU's hits where LRU is right. A loop over 90 keys,
 * each re-read soon after its first sight, in a cache of 100: LRU hits
 * everything after the first pass; s2lru, whose shadows see no gain in
 * second sight, inserts like LRU and hits exactly as often.
 */
static void test_s2lru_lru_without_evidence(void **state)
{
	const char *names[] = { "lru", "s2lru" };
	size_t hits[2];

	for (int n = 0; n < 2; n++) {
		struct sim s;

		sim_init(&s, names[n], 100, 2000);
		hits[n] = 0;
		for (size_t base = 0; base + 90 < 2000; base += 10)
			for (size_t k = base; k < base + 90; k++)
				hits[n] += sim_req(&s, k);
		sim_fini(&s);
	}
	print_message("sliding window hits: lru %zu, s2lru %zu\n", hits[0],
		      hits[1]);
	assert_true(hits[0] > 10000);
	assert_int_equal(hits[1], hits[0]);
}

/*
 * Once trained, a key that comes back after it was evicted (its second
 * sight, remembered by the filter long after the chunk left) goes straight
 * to M and survives a following run of first sights twice the cache.
 */
static void test_s2lru_second_sight(void **state)
{
	enum { CAP = 100, BACK = 20, ONEOFF = 200 };
	struct sim s;
	size_t next = 30, kept = 0, first;

	sim_init(&s, "s2lru", CAP, 30 + 4000 + BACK + 2 * ONEOFF);
	s2_train(&s, &next);
	first = next;
	for (size_t k = 0; k < BACK; k++)
		sim_req(&s, next++);
	for (size_t i = 0; i < ONEOFF; i++)
		sim_req(&s, next++);
	for (size_t k = first; k < first + BACK; k++)
		assert_false(s.resident[k]);
	/* second sight: a miss, inserted into M */
	for (size_t k = first; k < first + BACK; k++)
		assert_int_equal(sim_req(&s, k), 0);
	for (size_t i = 0; i < ONEOFF; i++)
		sim_req(&s, next++);
	for (size_t k = first; k < first + BACK; k++)
		kept += s.resident[k];
	print_message("s2lru: second-sight keys kept: %zu of %d\n", kept, BACK);
	assert_int_equal(kept, BACK);
	sim_fini(&s);
}

/*
 * Chains in s2lru, as the engine drives them: a child's insert raises its
 * parent's nchildren (update), an eviction lowers it. Each part evicts
 * its leaves first, so the chain r0 -> r1 -> r2 leaves from its end and
 * what stays is still a prefix (LRU would take the root first and leave
 * r1, r2 unreachable); a parent whose last child left goes first in line
 * when it is older than every leaf, else (a re-read shared prefix: s,
 * touched after x) behind them.
 */
static void s2_child(const struct policy_ops *ops, struct policy *p,
		     struct policy_item *parent, struct policy_item *child)
{
	ops->insert(p, child);
	parent->nchildren++;
	ops->update(p, parent);
}

static struct policy_item *s2_evict_engine(const struct policy_ops *ops,
					   struct policy *p,
					   struct policy_item *it, size_t n)
{
	struct policy_item *v = ops->evict(p);

	assert_non_null(v);
	/* the engine's parent count: it[i]'s parent is it[i - 1] when the
	 * two share a chain (hkey / 100 below) */
	for (size_t i = 1; i < n; i++)
		if (v == &it[i] && it[i].hkey / 100 == it[i - 1].hkey / 100) {
			it[i - 1].nchildren--;
			ops->update(p, &it[i - 1]);
		}
	return v;
}

static void test_s2lru_chain_from_its_end(void **state)
{
	const struct policy_ops *ops;
	struct policy *p = mk("s2lru", 100, &ops);
	/* r0 r1 r2 (a chain), x (alone), s s1 (a chain) */
	struct policy_item it[6];
	const int want[] = { 2, 1, 0, 5, 3, 4 };

	items_init(it, 6);
	it[0].hkey = 100; it[1].hkey = 101; it[2].hkey = 102;
	it[3].hkey = 300;
	it[4].hkey = 400; it[5].hkey = 401;
	ops->insert(p, &it[0]);
	s2_child(ops, p, &it[0], &it[1]);
	s2_child(ops, p, &it[1], &it[2]);
	ops->insert(p, &it[4]);
	s2_child(ops, p, &it[4], &it[5]);
	ops->insert(p, &it[3]);
	/* touches: r0 r1 r2 s s1, then x and s re-read (both go to M) */
	it[5].atime = 5;
	it[3].atime = 8;
	ops->access(p, &it[3]);
	it[4].atime = 10;
	ops->access(p, &it[4]);
	for (size_t i = 0; i < 6; i++) {
		struct policy_item *v = s2_evict_engine(ops, p, it, 6);

		if (v != &it[want[i]])
			fail_msg("victim %zu is item %td, want %d", i, v - it,
				 want[i]);
	}
	assert_null(ops->evict(p));
	ops->destroy(p);
}

/* A scan interleaved with the hot set (one hot read every 20 scan keys):
 * S3-FIFO still hits more than LRU. */
static void test_scan_interleaved(void **state)
{
	enum { CAP = 100, HOT = 40, SCAN = 4000 };
	const char *names[] = { "lru", "s3fifo" };
	size_t hits[2] = { 0, 0 };

	for (int n = 0; n < 2; n++) {
		struct sim s;
		size_t h = 0;

		sim_init(&s, names[n], CAP, HOT + SCAN);
		for (size_t k = 0; k < HOT; k++) {
			sim_req(&s, k);
			sim_req(&s, k);
		}
		for (size_t i = 0; i < SCAN; i++) {
			sim_req(&s, HOT + i);
			if (i % 20 == 0)
				h += sim_req(&s, (i / 20) % HOT);
		}
		hits[n] = h;
		sim_fini(&s);
	}
	print_message("interleaved hot hits: lru %zu, s3fifo %zu of %d\n",
		      hits[0], hits[1], SCAN / 20);
	assert_true(hits[1] > hits[0] + SCAN / 40);
}

/* ------------------------------------------------------------- ghost */

static void test_s3fifo_ghost(void **state)
{
	for (int ghost = 0; ghost < 2; ghost++) {
		const struct policy_ops *ops;
		struct policy *p = mk("s3fifo", 10, &ops);
		struct policy_item it[10], y, z, w;

		items_init(it, 10);
		memset(&y, 0, sizeof(y));
		memset(&z, 0, sizeof(z));
		memset(&w, 0, sizeof(w));
		y.hkey = 100;
		z.hkey = ghost ? 100 : 300; /* y's key comes back as z */
		w.hkey = 200;
		for (int i = 0; i < 10; i++) {
			ops->insert(p, &it[i]);
			ops->access(p, &it[i]);
		}
		/* All of S moves to M; 0 is evicted from M (no ghost). */
		assert_ptr_equal(ops->evict(p), &it[0]);
		/* M = 1..9. y enters S (1 of 10 = 10%) and is evicted from
		 * S unread: its hkey goes to the ghost. */
		ops->insert(p, &y);
		assert_ptr_equal(ops->evict(p), &y);
		/* z: a ghost hit goes straight to M; with S = {w}
		 * (1 of 11 < 10%) the victim comes from M. Without the
		 * ghost hit, S = {z, w} and z, unread, is the victim. */
		ops->insert(p, &z);
		ops->insert(p, &w);
		if (ghost)
			assert_ptr_equal(ops->evict(p), &it[1]);
		else
			assert_ptr_equal(ops->evict(p), &z);
		ops->destroy(p);
	}
}

/* The ghost forgets: only about |M| hkeys are remembered. */
static void test_s3fifo_ghost_bounded(void **state)
{
	enum { CAP = 50, N = 20000 };
	struct sim s;
	size_t hits = 0;
	const struct policy_ops *ops;
	size_t meta;

	sim_init(&s, "s3fifo", CAP, N);
	ops = s.ops;
	for (size_t k = 0; k < N; k++)
		sim_req(&s, k);
	meta = ops->meta_bytes(s.p);
	/* The ghost holds ~45 hkeys: well under a kilobyte per slot. */
	assert_true(meta < 8192);
	/* The oldest keys fell out of the ghost: coming back they go to
	 * S, and a fresh scan flushes them again (no hits). */
	for (size_t k = 0; k < 10; k++)
		hits += sim_req(&s, k);
	assert_int_equal(hits, 0);
	sim_fini(&s);
}

/*
 * A loop of 60 keys through a cache of 50: LRU and FIFO never hit (each key
 * is evicted just before it comes back). S3-FIFO's ghost sends returning
 * keys to M, where they stay, so it hits; and the ghost, hit all the time,
 * stays bounded in memory.
 */
static void test_s3fifo_ghost_churn(void **state)
{
	enum { CAP = 50, KEYS = 60, REQS = 60000 };
	const char *names[] = { "lru", "fifo", "s3fifo" };
	size_t hits[3];
	size_t meta = 0;

	for (int n = 0; n < 3; n++) {
		struct sim s;

		sim_init(&s, names[n], CAP, KEYS);
		hits[n] = 0;
		for (size_t r = 0; r < REQS; r++)
			hits[n] += sim_req(&s, r % KEYS);
		if (n == 2)
			meta = s.ops->meta_bytes(s.p);
		sim_fini(&s);
	}
	print_message("loop of %d over %d: hits lru %zu, fifo %zu, s3fifo %zu; "
		      "s3fifo state %zu bytes\n", KEYS, CAP, hits[0], hits[1],
		      hits[2], meta);
	assert_int_equal(hits[0], 0);
	assert_int_equal(hits[1], 0);
	assert_true(hits[2] > REQS / 2);
	assert_true(meta < 8192);
}

/* ------------------------------------------------------------ prefix */

static void test_prefix_leaves_first(void **state)
{
	const struct policy_ops *ops;
	struct policy *p = mk("prefix", 8, &ops);
	struct policy_item it[4];
	/* 0 <- 1 <- 2 is a chain (0 the root); 3 is a lone leaf touched
	 * last. The root is the least recently used but has children. */
	enum { R = 0, C = 1, G = 2, X = 3 };

	items_init(it, 4);
	it[R].depth = 1, it[R].atime = 1, it[R].nchildren = 1;
	it[C].depth = 2, it[C].atime = 2, it[C].nchildren = 1;
	it[G].depth = 3, it[G].atime = 3;
	it[X].depth = 1, it[X].atime = 10;
	for (int i = 0; i < 4; i++)
		ops->insert(p, &it[i]);

	assert_ptr_equal(ops->evict(p), &it[G]);
	/* The engine tells the policy C lost its last cached child. */
	it[C].nchildren = 0;
	ops->update(p, &it[C]);
	assert_ptr_equal(ops->evict(p), &it[C]);
	it[R].nchildren = 0;
	ops->update(p, &it[R]);
	assert_ptr_equal(ops->evict(p), &it[R]);
	assert_ptr_equal(ops->evict(p), &it[X]);
	assert_null(ops->evict(p));
	ops->destroy(p);
}

/* A parent is evicted while its children are cached only when no unpinned
 * leaf is left; then the least recently used parent. */
static void test_prefix_parent_when_leaves_pinned(void **state)
{
	const struct policy_ops *ops;
	struct policy *p = mk("prefix", 8, &ops);
	struct policy_item it[4];

	items_init(it, 4);
	it[0].depth = 1, it[0].atime = 5, it[0].nchildren = 1;
	it[1].depth = 1, it[1].atime = 2, it[1].nchildren = 2;
	it[2].depth = 2, it[2].atime = 1, it[2].refs = 1; /* pinned leaf */
	it[3].depth = 2, it[3].atime = 9, it[3].refs = 1;
	for (int i = 0; i < 4; i++)
		ops->insert(p, &it[i]);
	assert_ptr_equal(ops->evict(p), &it[1]);
	assert_ptr_equal(ops->evict(p), &it[0]);
	assert_null(ops->evict(p));
	it[3].refs = 0;
	assert_ptr_equal(ops->evict(p), &it[3]);
	ops->destroy(p);
}

/* Equal atime: deeper first; then equal depth keeps insertion order;
 * unknown depth (0) is the shallowest. */
static void test_prefix_ties_deeper_first(void **state)
{
	const struct policy_ops *ops;
	struct policy *p = mk("prefix", 8, &ops);
	struct policy_item it[6];
	const uint32_t depth[6] = { 2, 5, 0, 3, 5, 9 };
	const int want[] = { 1, 4, 3, 0, 2, 5 };

	items_init(it, 6);
	for (int i = 0; i < 6; i++) {
		it[i].depth = depth[i];
		it[i].atime = 7;
	}
	it[5].atime = 8; /* deepest, but more recent */
	/* Insert in a scrambled order; placement must sort. */
	const int ins[6] = { 5, 2, 0, 1, 3, 4 };
	for (int i = 0; i < 6; i++)
		ops->insert(p, &it[ins[i]]);
	/* 1 and 4 tie on (7, 5): 1 was inserted first. */
	expect_order(ops, p, it, want, 6);
	ops->destroy(p);
}

/* access() after the engine moved atime: LRU among leaves. */
static void test_prefix_access(void **state)
{
	const struct policy_ops *ops;
	struct policy *p = mk("prefix", 8, &ops);
	struct policy_item it[4];
	const int want[] = { 1, 3, 0, 2 };

	items_init(it, 4); /* atime 1..4 */
	for (int i = 0; i < 4; i++)
		ops->insert(p, &it[i]);
	it[0].atime = 10;
	ops->access(p, &it[0]);
	it[2].atime = 11;
	ops->access(p, &it[2]);
	expect_order(ops, p, it, want, 4);
	ops->destroy(p);
}

/* --------------------------------------------------- randomized model */

static int before_prefix(const struct policy_item *a,
			 const struct policy_item *b)
{
	int la = a->nchildren == 0, lb = b->nchildren == 0;

	if (la != lb)
		return la;
	if (a->atime != b->atime)
		return a->atime < b->atime;
	return a->depth > b->depth;
}

/*
 * Random inserts, hits, removes, pins and evictions against a model of who
 * is in the policy. Every victim must be in and unpinned, NULL only when
 * everything in is pinned, and prefix takes a parent only when no unpinned
 * leaf is left. With at most max_pinned pins at a time (below the
 * policies' in-place pin window, PLIST_PIN_SCAN = 32) lru / fifo / prefix
 * must also pick exactly the best candidate by their rule; with more,
 * pinned chunks may be rotated or parked and only safety is checked.
 */
static void random_model(const char *name, unsigned max_pinned, int exact)
{
	enum { N = 300, OPS = 30000 };
	struct policy_item *it = calloc(N, sizeof(*it));
	unsigned char *in = calloc(N, 1);
	uint64_t *seq = calloc(N, sizeof(*seq));
	const struct policy_ops *ops;
	struct policy *p = mk(name, N / 2, &ops);
	uint64_t clock = 0, seqno = 0;
	unsigned npinned = 0;
	struct policy_item *run[16], *last[16];
	uint32_t nrun, nlast = 0;
	int is_lru = !strcmp(name, "lru"), is_fifo = !strcmp(name, "fifo");
	int is_pfx = !strcmp(name, "prefix");
	size_t evicted = 0, nulls = 0;

	assert_non_null(it);
	assert_non_null(in);
	assert_non_null(seq);
	for (size_t i = 0; i < N; i++)
		it[i].hkey = rng();
	for (int op = 0; op < OPS; op++) {
		size_t k = rng() % N;
		unsigned r = rng() % 100;

		if (r < 30) {
			if (!in[k]) {
				it[k].atime = ++clock;
				it[k].depth = rng() % 4;
				seq[k] = ++seqno;
				ops->insert(p, &it[k]);
				in[k] = 1;
			}
		} else if (r < 55) {
			if (in[k]) {
				it[k].atime = ++clock;
				ops->access(p, &it[k]);
			}
		} else if (r < 60) {
			if (in[k]) {
				ops->remove(p, &it[k]);
				in[k] = 0;
			}
		} else if (r < 68) {
			if (it[k].refs) {
				it[k].refs = 0;
				npinned--;
			} else if (npinned < max_pinned) {
				it[k].refs = 1;
				npinned++;
			}
		} else if (r < 68 + 4 && r >= 68 + 2) {
			/* a run of hits: the last one again (a chain lying in
			 * order), or up to 16 chunks in from k */
			nrun = 0;
			if (nlast && rng() % 2) {
				for (uint32_t j = 0; j < nlast; j++)
					if (in[last[j] - it])
						run[nrun++] = last[j];
			} else {
				for (size_t j = k; j < N && nrun < 16; j++)
					if (in[j] && rng() % 4)
						run[nrun++] = &it[j];
			}
			if (nrun) {
				touch_run(ops, p, run, nrun, ++clock);
				memcpy(last, run, nrun * sizeof(*run));
				nlast = nrun;
			}
		} else if (r < 72) {
			if (in[k] && ops->update) {
				it[k].nchildren = rng() % 3;
				ops->update(p, &it[k]);
			}
		} else {
			struct policy_item *v = ops->evict(p);
			size_t best = N, unpinned = 0, leaves = 0, vi;

			for (size_t i = 0; i < N; i++) {
				if (!in[i] || it[i].refs)
					continue;
				unpinned++;
				leaves += it[i].nchildren == 0;
				if (best == N ||
				    (is_lru && it[i].atime < it[best].atime) ||
				    (is_fifo && seq[i] < seq[best]) ||
				    (is_pfx && before_prefix(&it[i], &it[best])))
					best = i;
			}
			if (!v) {
				assert_int_equal(unpinned, 0);
				nulls++;
				continue;
			}
			vi = (size_t)(v - it);
			assert_true(vi < N);
			assert_true(in[vi]);
			assert_int_equal(v->refs, 0);
			if (is_pfx && v->nchildren)
				assert_int_equal(leaves, 0);
			/* chunks of one run share an atime: for lru, any of
			 * them; for prefix, any of the same leafness and depth */
			if (exact && vi != best &&
			    ((is_lru && v->atime == it[best].atime) ||
			     (is_pfx && !before_prefix(v, &it[best]) &&
			      !before_prefix(&it[best], v))))
				best = vi;
			if (exact && (is_lru || is_fifo || is_pfx) && vi != best)
				fail_msg("%s: op %d victim %zu, want %zu", name, op,
					 vi, best);
			in[vi] = 0;
			evicted++;
		}
	}
	/* Everything left comes out once unpinned. */
	for (size_t i = 0; i < N; i++)
		it[i].refs = 0;
	for (struct policy_item *v; (v = ops->evict(p));) {
		assert_true(in[v - it]);
		in[v - it] = 0;
	}
	for (size_t i = 0; i < N; i++)
		assert_int_equal(in[i], 0);
	assert_true(evicted > 1000);
	ops->destroy(p);
	free(it);
	free(in);
	free(seq);
}

static void test_random_model(void **state)
{
	for (const char *const *n = policy_names(); *n; n++)
		random_model(*n, 16, 1);
}

static void test_random_many_pins(void **state)
{
	for (const char *const *n = policy_names(); *n; n++)
		random_model(*n, 1000, 0);
}

/*
 * 200 long-lived pins at the old end of a 2000-chunk cache (more than the
 * in-place window, so they get rotated or parked) through 200000 misses:
 * none is ever a victim, and every other chunk still cycles through.
 */
static void test_many_pins_stay(void **state)
{
	enum { CAP = 2000, PINS = 200, N = 200000 };

	for (const char *const *n = policy_names(); *n; n++) {
		struct sim s;
		size_t kept = 0;

		sim_init(&s, *n, CAP, N);
		for (size_t k = 0; k < PINS; k++)
			s.it[k].refs = 1;
		for (size_t k = 0; k < N; k++)
			sim_req(&s, k);
		for (size_t k = 0; k < PINS; k++)
			kept += s.resident[k];
		assert_int_equal(kept, PINS);
		sim_fini(&s);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_lru_order),
		cmocka_unit_test(test_fifo_order),
		cmocka_unit_test(test_s3fifo_order),
		cmocka_unit_test(test_s3fifo_main_reinsert),
		cmocka_unit_test(test_remove),
		cmocka_unit_test(test_pinned_never_evicted),
		cmocka_unit_test(test_all_pinned_large),
		cmocka_unit_test(test_scan_resistance),
		cmocka_unit_test(test_scan_interleaved),
		cmocka_unit_test(test_s2lru_scan_resistance),
		cmocka_unit_test(test_s2lru_lru_without_evidence),
		cmocka_unit_test(test_s2lru_second_sight),
		cmocka_unit_test(test_s2lru_chain_from_its_end),
		cmocka_unit_test(test_s3fifo_ghost),
		cmocka_unit_test(test_s3fifo_ghost_bounded),
		cmocka_unit_test(test_s3fifo_ghost_churn),
		cmocka_unit_test(test_prefix_leaves_first),
		cmocka_unit_test(test_prefix_parent_when_leaves_pinned),
		cmocka_unit_test(test_prefix_ties_deeper_first),
		cmocka_unit_test(test_prefix_access),
		cmocka_unit_test(test_random_model),
		cmocka_unit_test(test_random_many_pins),
		cmocka_unit_test(test_many_pins_stay),
	};

	return cmocka_run_group_tests_name("policy", tests, NULL, NULL);
}
