/*
 * policy_test.h - what the policy tests (test_policy.c, test_policy_run.c)
 * share: a policy by name, items with rising atimes, draining a policy
 * against an expected order, a run of hits told as the engine tells it,
 * and a small deterministic generator.
 */
#ifndef KVFS_TESTS_UNIT_POLICY_TEST_H
#define KVFS_TESTS_UNIT_POLICY_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tier/policy/policy.h"

static inline struct policy *mk(const char *name, uint64_t cap,
				const struct policy_ops **ops)
{
	struct policy *p = NULL;

	*ops = policy_find(name);
	assert_non_null(*ops);
	assert_int_equal((*ops)->create(&p, cap), 0);
	assert_non_null(p);
	return p;
}

static inline void items_init(struct policy_item *it, size_t n)
{
	memset(it, 0, n * sizeof(*it));
	for (size_t i = 0; i < n; i++) {
		it[i].hkey = 1000 + i;
		it[i].atime = i + 1;
	}
}

/* Evicts everything and checks the victims come out as want[] (indices
 * into it[]), then NULL. */
static inline void expect_order(const struct policy_ops *ops,
				struct policy *p, struct policy_item *it,
				const int *want, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct policy_item *v = ops->evict(p);

		assert_non_null(v);
		if (v != &it[want[i]])
			fail_msg("%s: victim %zu is item %td, want %d", ops->name,
				 i, v - it, want[i]);
	}
	assert_null(ops->evict(p));
}

/*
 * A run of hits as the engine tells it (tier_lookup.c touch_run): items in
 * chain order, through access_run where the policy has it, else atime set
 * and access called on each, deepest first.
 */
static inline void touch_run(const struct policy_ops *ops,
			     struct policy *p, struct policy_item **items,
			     uint32_t n, uint64_t atime)
{
	if (ops->access_run) {
		ops->access_run(p, items, n, atime);
		return;
	}
	for (uint32_t k = n; k-- > 0;) {
		items[k]->atime = atime;
		ops->access(p, items[k]);
	}
}

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static inline uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

#endif
