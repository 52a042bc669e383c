/*
 * test_l1_alloc.c - the L1 extent allocator: bad sizes, exact-size reuse,
 * tail shrinking, fragmentation, and random churn checked against a shadow
 * page map (no overlap, in bounds, used-bytes accounting, full coalescing).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tier/l1_alloc.h"

#define PG L1_ALIGN

static void test_bad_sizes(void **state)
{
	struct l1_alloc *a;
	uint64_t off;

	(void)state;
	assert_int_equal(l1_alloc_create(0, &a), -EINVAL);
	assert_int_equal(l1_alloc_create(PG - 1, &a), -EINVAL);
	/* A size that is not a page multiple is rounded down. */
	assert_int_equal(l1_alloc_create(PG + 100, &a), 0);
	assert_int_equal(l1_alloc_largest(a), PG);
	assert_int_equal(l1_alloc_get(a, 0, &off), -EINVAL);
	assert_int_equal(l1_alloc_get(a, PG + 1, &off), -ENOSPC);
	assert_int_equal(l1_alloc_get(a, 1, &off), 0);
	assert_int_equal(off, 0);
	assert_int_equal(l1_alloc_used(a), PG);
	assert_int_equal(l1_alloc_get(a, 1, &off), -ENOSPC);
	assert_int_equal(l1_alloc_largest(a), 0);
	l1_alloc_put(a, 0, 1);
	assert_int_equal(l1_alloc_used(a), 0);
	assert_int_equal(l1_alloc_round(1), PG);
	assert_int_equal(l1_alloc_round(PG), PG);
	assert_int_equal(l1_alloc_round(0), 0);
	l1_alloc_destroy(a);
	l1_alloc_destroy(NULL);
}

/* Equal-sized chunks: a freed extent is handed out again as is. */
static void test_exact_reuse(void **state)
{
	struct l1_alloc *a;
	uint64_t off[16], o;

	(void)state;
	assert_int_equal(l1_alloc_create(16 * 5 * PG, &a), 0);
	for (int i = 0; i < 16; i++) {
		assert_int_equal(l1_alloc_get(a, 5 * PG - 10, &off[i]), 0);
		assert_int_equal(off[i] % PG, 0);
	}
	assert_int_equal(l1_alloc_used(a), 16 * 5 * PG);
	assert_int_equal(l1_alloc_get(a, 1, &o), -ENOSPC);
	for (int round = 0; round < 50; round++) {
		int i = (round * 7) % 16;

		l1_alloc_put(a, off[i], 5 * PG - 10);
		assert_int_equal(l1_alloc_get(a, 5 * PG, &o), 0);
		assert_int_equal(o, off[i]);
	}
	/* With two holes of different sizes, a request takes the one that
	 * fits best, not a split of the larger. */
	l1_alloc_put(a, off[3], 5 * PG);
	l1_alloc_put(a, off[8], 5 * PG);
	l1_alloc_put(a, off[9], 5 * PG); /* coalesced: a 10-page hole */
	assert_int_equal(l1_alloc_largest(a), 10 * PG);
	assert_int_equal(l1_alloc_get(a, 5 * PG, &o), 0);
	assert_int_equal(o, off[3]);
	assert_int_equal(l1_alloc_get(a, 10 * PG, &o), 0);
	assert_int_equal(o, off[8]);
	l1_alloc_destroy(a);
}

/* Shrinking an extent by freeing an aligned tail. */
static void test_shrink_tail(void **state)
{
	struct l1_alloc *a;
	uint64_t off, o2;

	(void)state;
	assert_int_equal(l1_alloc_create(10 * PG, &a), 0);
	assert_int_equal(l1_alloc_get(a, 10 * PG, &off), 0);
	l1_alloc_put(a, off + 4 * PG, 6 * PG);
	assert_int_equal(l1_alloc_used(a), 4 * PG);
	assert_int_equal(l1_alloc_largest(a), 6 * PG);
	assert_int_equal(l1_alloc_get(a, 6 * PG, &o2), 0);
	assert_int_equal(o2, off + 4 * PG);
	l1_alloc_put(a, o2 + 2 * PG, 4 * PG); /* tail of the second */
	l1_alloc_put(a, off, 4 * PG);
	assert_int_equal(l1_alloc_used(a), 2 * PG);
	l1_alloc_put(a, o2, 2 * PG);
	/* Everything coalesced back into one extent. */
	assert_int_equal(l1_alloc_used(a), 0);
	assert_int_equal(l1_alloc_largest(a), 10 * PG);
	assert_int_equal(l1_alloc_get(a, 10 * PG, &off), 0);
	assert_int_equal(off, 0);
	l1_alloc_destroy(a);
}

/* Growing an extent in place into the free space right after it. */
static void test_extend(void **state)
{
	struct l1_alloc *a;
	uint64_t x, y, o;

	(void)state;
	assert_int_equal(l1_alloc_create(10 * PG, &a), 0);
	assert_int_equal(l1_alloc_get(a, 2 * PG, &x), 0);
	assert_int_equal(l1_alloc_extend(a, x, 2 * PG, 2 * PG), 0);
	assert_int_equal(l1_alloc_extend(a, x, 2 * PG, 5 * PG - 7), 0);
	assert_int_equal(l1_alloc_used(a), 5 * PG);
	assert_int_equal(l1_alloc_get(a, PG, &y), 0);
	assert_int_equal(y, x + 5 * PG); /* after the grown extent */
	/* blocked by y: nothing changes */
	assert_int_equal(l1_alloc_extend(a, x, 5 * PG, 6 * PG), -ENOSPC);
	assert_int_equal(l1_alloc_used(a), 6 * PG);
	/* y's neighbour taken whole (no remainder), then too much */
	assert_int_equal(l1_alloc_extend(a, y, PG, 5 * PG), 0);
	assert_int_equal(l1_alloc_get(a, 1, &o), -ENOSPC);
	assert_int_equal(l1_alloc_extend(a, y, 5 * PG, 6 * PG), -ENOSPC);
	l1_alloc_put(a, y, 5 * PG);
	l1_alloc_put(a, x, 5 * PG);
	assert_int_equal(l1_alloc_used(a), 0);
	assert_int_equal(l1_alloc_largest(a), 10 * PG);
	l1_alloc_destroy(a);
}

/* Fragmentation: free space that is not contiguous cannot serve a large
 * request; freeing the neighbours coalesces it. */
static void test_fragmentation(void **state)
{
	enum { N = 256 };
	struct l1_alloc *a;
	uint64_t off[N], o;
	size_t meta_full;

	(void)state;
	assert_int_equal(l1_alloc_create(N * PG, &a), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(l1_alloc_get(a, PG, &off[i]), 0);
	meta_full = l1_alloc_meta_bytes(a);
	for (int i = 0; i < N; i += 2)
		l1_alloc_put(a, off[i], PG);
	assert_int_equal(l1_alloc_used(a), N / 2 * PG);
	assert_int_equal(l1_alloc_largest(a), PG);
	assert_int_equal(l1_alloc_get(a, 2 * PG, &o), -ENOSPC);
	/* The free list costs memory only while fragmented. */
	assert_true(l1_alloc_meta_bytes(a) > meta_full);
	for (int i = 1; i < N; i += 2)
		l1_alloc_put(a, off[i], PG);
	assert_int_equal(l1_alloc_used(a), 0);
	assert_int_equal(l1_alloc_largest(a), N * PG);
	assert_true(l1_alloc_meta_bytes(a) <= meta_full + 4096);
	assert_int_equal(l1_alloc_get(a, N * PG, &o), 0);
	l1_alloc_destroy(a);
}

/* Random churn against a shadow page map. */
static void test_churn(void **state)
{
	enum { PAGES = 4096, SLOTS = 512 };
	struct l1_alloc *a;
	uint8_t *map = calloc(PAGES, 1);
	uint64_t off[SLOTS], len[SLOTS], used = 0, o;
	uint32_t seed = 42;
	int fails = 0, ok = 0;

	(void)state;
	assert_non_null(map);
	memset(len, 0, sizeof(len));
	assert_int_equal(l1_alloc_create((uint64_t)PAGES * PG, &a), 0);
	for (int step = 0; step < 40000; step++) {
		int s;
		uint64_t want;

		seed = seed * 1103515245u + 12345u;
		s = (int)((seed >> 8) % SLOTS);
		if (len[s]) {
			uint64_t p = off[s] / PG, n = l1_alloc_round(len[s]) / PG;

			if ((seed >> 4) % 4 == 0 && n > 1) {
				/* Shrink: free the tail half. */
				uint64_t keep = n / 2;

				l1_alloc_put(a, off[s] + keep * PG,
					     (n - keep) * PG);
				for (uint64_t i = keep; i < n; i++)
					map[p + i] = 0;
				used -= (n - keep) * PG;
				len[s] = keep * PG;
			} else {
				l1_alloc_put(a, off[s], len[s]);
				for (uint64_t i = 0; i < n; i++)
					map[p + i] = 0;
				used -= n * PG;
				len[s] = 0;
			}
		} else {
			/* Mostly a few equal sizes (namespaces), sometimes
			 * anything up to 300 pages. */
			seed = seed * 1103515245u + 12345u;
			if ((seed >> 8) % 4)
				want = ((seed >> 12) % 3 + 1) * 16 * PG;
			else
				want = 1 + (seed >> 10) % (300 * PG);
			if (l1_alloc_get(a, want, &o) < 0) {
				/* Only when no free extent is that large. */
				assert_true(l1_alloc_largest(a) <
					    l1_alloc_round(want));
				fails++;
				continue;
			}
			ok++;
			assert_int_equal(o % PG, 0);
			assert_true(o + l1_alloc_round(want) <=
				    (uint64_t)PAGES * PG);
			for (uint64_t i = 0; i < l1_alloc_round(want) / PG; i++) {
				if (map[o / PG + i])
					fail_msg("page %llu handed out twice",
						 (unsigned long long)(o / PG + i));
				map[o / PG + i] = 1;
			}
			off[s] = o;
			len[s] = want;
			used += l1_alloc_round(want);
		}
		assert_int_equal(l1_alloc_used(a), used);
	}
	assert_true(ok > 10000);
	assert_true(fails > 0); /* the arena was really full at times */
	for (int s = 0; s < SLOTS; s++)
		if (len[s])
			l1_alloc_put(a, off[s], len[s]);
	assert_int_equal(l1_alloc_used(a), 0);
	assert_int_equal(l1_alloc_largest(a), (uint64_t)PAGES * PG);
	l1_alloc_destroy(a);
	free(map);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_sizes),
		cmocka_unit_test(test_exact_reuse),
		cmocka_unit_test(test_shrink_tail),
		cmocka_unit_test(test_extend),
		cmocka_unit_test(test_fragmentation),
		cmocka_unit_test(test_churn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
