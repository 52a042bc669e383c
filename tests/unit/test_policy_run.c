/*
 * test_policy_run.c - the prefix policy told a lookup's run of hits at once
 * (policy_ops.access_run): chains moved as one block, left in place, or
 * placed chunk by chunk, and a differential check against telling each
 * chunk on its own.
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

/*
 * access_run on prefix: two chains (0-3 and 4-7, depth 1-4, the last of
 * each a leaf) touched as runs in turn, the second time each lying in
 * order at the tail (moved as a block, or left in place); a run whose
 * chunks are not linked in order (reversed depths) is placed chunk by
 * chunk; a block that cannot go in whole (an item of the same atime and
 * a depth between its own) falls back to one at a time. The order after
 * each is what access on each would give.
 */
static void test_prefix_access_run(void **state)
{
	const struct policy_ops *ops;
	struct policy *p = mk("prefix", 16, &ops);
	struct policy_item it[10], *a[4], *b[4];
	/* interior (0-2, 4-6) evicted after every leaf (3, 7, 8, 9) */
	const int want1[] = { 8, 9, 7, 3, 6, 5, 4, 2, 1, 0 };
	const int want2[] = { 8, 9, 3, 7, 2, 1, 0, 6, 5, 4 };

	assert_non_null(ops->access_run);
	items_init(it, 10);
	for (int i = 0; i < 8; i++) {
		it[i].depth = (uint32_t)(i % 4 + 1);
		it[i].nchildren = i % 4 == 3 ? 0 : 1;
	}
	for (int i = 0; i < 4; i++) {
		a[i] = &it[i];
		b[i] = &it[4 + i];
	}
	for (int i = 0; i < 10; i++)
		ops->insert(p, &it[i]);
	touch_run(ops, p, a, 4, 20);
	touch_run(ops, p, b, 4, 21);
	touch_run(ops, p, a, 4, 22); /* a block, moved to the tail */
	touch_run(ops, p, a, 4, 23); /* a block in place */
	expect_order(ops, p, it, want1, 10);

	for (int i = 0; i < 10; i++)
		ops->insert(p, &it[i]);
	touch_run(ops, p, b, 4, 30);
	touch_run(ops, p, a, 4, 31);
	touch_run(ops, p, b, 4, 32);
	/* reversed: 7, 6, 5, 4 not linked in the order told */
	for (int i = 0; i < 4; i++)
		b[i] = &it[7 - i];
	touch_run(ops, p, b, 4, 33);
	expect_order(ops, p, it, want2, 10);
	ops->destroy(p);
}

/* A block whose place is split by a chunk of the same atime and a depth
 * between its first and last: placed chunk by chunk, in order. */
static void test_prefix_access_run_split(void **state)
{
	const struct policy_ops *ops;
	struct policy *p = mk("prefix", 16, &ops);
	struct policy_item it[4], *run[3];
	const int want[] = { 0, 3, 1, 2 }; /* depth 5, 4, 3, 1 */

	items_init(it, 4);
	it[0].depth = 5;
	it[1].depth = 3;
	it[2].depth = 1;
	it[3].depth = 4;
	for (int i = 0; i < 4; i++) {
		it[i].nchildren = 1;
		ops->insert(p, &it[i]); /* in order 0..3 (atime 1..4) */
	}
	it[3].atime = 9;
	ops->access(p, &it[3]); /* 0 1 2 3 */
	run[0] = &it[2]; /* chain order: 2 (depth 1), 1, 0 (depth 5) */
	run[1] = &it[1];
	run[2] = &it[0];
	touch_run(ops, p, run, 3, 9); /* 3 (depth 4) belongs inside */
	expect_order(ops, p, it, want, 4);
	ops->destroy(p);
}

/*
 * access_run against the reference (atime set and access called on each,
 * deepest first) on two prefix instances driven alike: every item a depth
 * of its own (no ties), so every victim must be the same item on both.
 * Runs are chains (items in index order, depth rising with it), repeated
 * often (a chain lying in order: the block paths), with duplicates,
 * outsiders and stale ticks; pins (some parked) and nchildren changes
 * between them.
 */
static void test_prefix_access_run_differential(void **state)
{
	enum { N = 300, OPS = 40000, PINS = 48 };
	struct policy_item *a = calloc(N, sizeof(*a)), *b = calloc(N, sizeof(*b));
	struct policy_item *ra[40], *rb[40];
	unsigned char *in = calloc(N, 1);
	const struct policy_ops *ops;
	struct policy *pa = mk("prefix", N, &ops), *pb = mk("prefix", N, &ops);
	uint64_t clock = 0;
	uint32_t n = 0, runs = 0;
	unsigned npinned = 0;

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(in);
	for (size_t i = 0; i < N; i++)
		a[i].depth = b[i].depth = (uint32_t)i + 1;
	for (int op = 0; op < OPS; op++) {
		size_t k = rng() % N;
		unsigned r = rng() % 100;

		if (r < 25 && !in[k]) {
			a[k].atime = b[k].atime = ++clock;
			ops->insert(pa, &a[k]);
			ops->insert(pb, &b[k]);
			in[k] = 1;
		} else if (r < 30 && in[k]) {
			ops->remove(pa, &a[k]);
			ops->remove(pb, &b[k]);
			in[k] = 0;
		} else if (r < 36) {
			if (a[k].refs) {
				a[k].refs = b[k].refs = 0;
				npinned--;
			} else if (npinned < PINS) {
				a[k].refs = b[k].refs = 1;
				npinned++;
			}
		} else if (r < 42 && in[k]) {
			a[k].nchildren = b[k].nchildren = (uint32_t)(rng() % 3);
			ops->update(pa, &a[k]);
			ops->update(pb, &b[k]);
		} else if (r < 80) {
			uint64_t t;

			if (!n || rng() % 3 == 0) { /* a new chain from k */
				n = 0;
				for (size_t j = k; j < N && n < 32; j++)
					if (in[j] && rng() % 6)
						ra[n++] = &a[j];
				if (n && rng() % 5 == 0) { /* a duplicate or
							   * outsider */
					struct policy_item *x =
						rng() % 2 ? ra[rng() % n] :
							    &a[rng() % N];

					ra[n++] = x;
				}
			}
			if (!n)
				continue;
			t = rng() % 8 ? ++clock : clock - rng() % 2;
			for (uint32_t j = 0; j < n; j++)
				rb[j] = &b[ra[j] - a];
			touch_run(ops, pa, ra, n, t);
			for (uint32_t j = n; j-- > 0;) {
				rb[j]->atime = t;
				ops->access(pb, rb[j]);
			}
			runs++;
		} else {
			struct policy_item *va = ops->evict(pa), *vb = ops->evict(pb);

			assert_true(!va == !vb);
			if (!va)
				continue;
			if (va - a != vb - b)
				fail_msg("op %d: access_run evicts %td, access %td",
					 op, va - a, vb - b);
			in[va - a] = 0;
			n = 0; /* the last run may hold it */
		}
	}
	for (size_t i = 0; i < N; i++)
		a[i].refs = b[i].refs = 0;
	for (struct policy_item *va; (va = ops->evict(pa));) {
		struct policy_item *vb = ops->evict(pb);

		assert_non_null(vb);
		assert_int_equal(va - a, vb - b);
	}
	assert_null(ops->evict(pb));
	assert_true(runs > 10000);
	ops->destroy(pa);
	ops->destroy(pb);
	free(a);
	free(b);
	free(in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prefix_access_run),
		cmocka_unit_test(test_prefix_access_run_split),
		cmocka_unit_test(test_prefix_access_run_differential),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
