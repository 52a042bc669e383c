/*
 * test_seen.c - tier/policy/seen.c: the decaying Bloom filter behind s2lru and
 * ingest=twice. It remembers what was added for at least one generation,
 * forgets it after two, keeps false positives near its design rate, and
 * seen2 says "twice" only after a second sighting.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "tier/policy/seen.h"

enum { KEYS = 1000 };

static void test_remembers_one_generation(void **state)
{
	struct seen_filter f = { 0 };

	(void)state;
	assert_int_equal(seen_init(&f, KEYS), 0);
	for (uint64_t i = 0; i < KEYS; i++)
		seen_add(&f, i);
	/* the first generation just aged: all still there */
	for (uint64_t i = 0; i < KEYS; i++)
		assert_true(seen_has(&f, i));
	/* one more generation: the first is the previous one, still there */
	for (uint64_t i = KEYS; i < 2 * KEYS - 1; i++)
		seen_add(&f, i);
	for (uint64_t i = 0; i < KEYS; i++)
		assert_true(seen_has(&f, i));
	seen_free(&f);
}

static void test_forgets_after_two(void **state)
{
	struct seen_filter f = { 0 };
	unsigned left = 0;

	(void)state;
	assert_int_equal(seen_init(&f, KEYS), 0);
	for (uint64_t i = 0; i < 3 * KEYS; i++)
		seen_add(&f, i);
	for (uint64_t i = 0; i < KEYS; i++)
		left += seen_has(&f, i);
	print_message("after two generations: %u of %d still seen\n", left,
		      KEYS);
	assert_true(left < KEYS / 10); /* only false positives */
	seen_free(&f);
}

static void test_false_positives(void **state)
{
	struct seen_filter f = { 0 };
	unsigned fp = 0;

	(void)state;
	assert_int_equal(seen_init(&f, KEYS), 0);
	for (uint64_t i = 0; i < 2 * KEYS - 1; i++)
		seen_add(&f, 0x9e3779b97f4a7c15ull * (i + 1));
	for (uint64_t i = 0; i < 10 * KEYS; i++)
		fp += seen_has(&f, 0xc2b2ae3d27d4eb4full * (i + 1) + 1);
	print_message("false positives: %u of %d\n", fp, 10 * KEYS);
	assert_true(fp < 10 * KEYS / 10); /* under 10%, both generations full */
	assert_int_equal(seen_bytes(&f), 2 * f.nwords * 8);
	seen_free(&f);
}

static void test_seen2(void **state)
{
	struct seen2 s = { 0 };

	(void)state;
	assert_int_equal(seen2_init(&s, KEYS), 0);
	assert_false(seen2_twice(&s, 42));
	seen2_note(&s, 42);
	assert_false(seen2_twice(&s, 42));
	seen2_note(&s, 42);
	assert_true(seen2_twice(&s, 42));
	assert_false(seen2_twice(&s, 43));
	assert_true(seen2_bytes(&s) > 0);
	seen2_free(&s);
	seen2_free(&s); /* idempotent */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_remembers_one_generation),
		cmocka_unit_test(test_forgets_after_two),
		cmocka_unit_test(test_false_positives),
		cmocka_unit_test(test_seen2),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
