/*
 * test_htab.c - hash/htab: the one intrusive keyed table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "hash/htab.h"

struct item {
	uint64_t key;
	struct htab_node node;
};

static struct item *find(struct htab *t, uint64_t key)
{
	uint64_t h = htab_hash_u64(7, key);
	struct htab_node *e;

	htab_for_each_hash(t, h, e) {
		struct item *it = container_of(e, struct item, node);

		if (it->key == key)
			return it;
	}
	return NULL;
}

static void test_add_find_del_grow(void **state)
{
	enum { N = 5000 };
	struct item *items = calloc(N, sizeof(*items));
	struct htab t = { 0 };
	struct htab_node *e, *nx;
	uint64_t i, seen = 0;

	assert_non_null(items);
	assert_null(find(&t, 1)); /* a zeroed table is empty */
	for (i = 0; i < N; i++) {
		items[i].key = i * 3;
		assert_int_equal(htab_add(&t, &items[i].node,
					  htab_hash_u64(7, i * 3)), 0);
	}
	assert_int_equal(t.n, N);
	assert_true(t.nb >= N); /* doubled as it filled */
	for (i = 0; i < N; i++)
		assert_ptr_equal(find(&t, i * 3), &items[i]);
	assert_null(find(&t, 1));
	for (i = 0; i < N; i += 2)
		htab_del(&t, &items[i].node);
	for (i = 0; i < N; i++)
		assert_ptr_equal(find(&t, i * 3), i % 2 ? &items[i] : NULL);
	htab_for_each_safe(&t, i, e, nx) {
		htab_del(&t, e);
		seen++;
	}
	assert_int_equal(seen, N / 2);
	assert_int_equal(t.n, 0);
	htab_free(&t);
	assert_int_equal(t.nb, 0);
	free(items);
}

static void test_init_and_salt(void **state)
{
	struct htab t;

	assert_int_equal(htab_init(&t, 1000), 0);
	assert_int_equal(t.nb, 1024);
	htab_free(&t);
	/* salts separate equal bytes; the hash is stable within a process */
	assert_true(htab_hash(1, "abc", 3) != htab_hash(2, "abc", 3));
	assert_true(htab_hash(1, "abc", 3) == htab_hash(1, "abc", 3));
	/* the fixed-length form is the same hash */
	for (uint64_t salt = 0; salt < 3; salt++)
		assert_true(htab_hash16(salt, "0123456789abcdef") ==
			    htab_hash(salt, "0123456789abcdef", 16));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add_find_del_grow),
		cmocka_unit_test(test_init_and_salt),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
