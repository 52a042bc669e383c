/*
 * htab.c - the intrusive keyed hash table of htab.h and the per-process
 * random seed that keys every in-memory hash of kvfs.
 */
#include "hash/htab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

static uint64_t seed;

/* Drawn once per process, before main (a constructor: no pthread_once
 * on every hash, which sat on the index's hottest path), and never stored
 * (L2 recovery recomputes every hash), so a writer cannot learn it. */
__attribute__((constructor)) static void seed_init(void)
{
	uint64_t s = 0;

	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		s = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^
		    (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 32) ^
		    (uint64_t)(uintptr_t)&s;
	}
	seed = s;
}

uint64_t htab_hash(uint64_t salt, const void *p, size_t n)
{
	return XXH3_64bits_withSeed(p, n, seed ^ (salt * 0x9E3779B97F4A7C15ull));
}

uint64_t htab_hash16(uint64_t salt, const void *p)
{
	/* the length a constant: XXH3's 9-16 byte path (two loads, one
	 * 128-bit multiply), inlined */
	return XXH3_64bits_withSeed(p, 16, seed ^ (salt * 0x9E3779B97F4A7C15ull));
}

uint64_t htab_hash_u64(uint64_t salt, uint64_t v)
{
	return htab_hash(salt, &v, sizeof(v));
}

static int resize(struct htab *t, uint64_t nb)
{
	struct htab_node **b = calloc(nb, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (uint64_t i = 0; i < t->nb; i++) {
		struct htab_node *e = t->b[i], *next;

		for (; e; e = next) {
			next = e->next;
			e->next = b[e->h & (nb - 1)];
			b[e->h & (nb - 1)] = e;
		}
	}
	free(t->b);
	t->b = b;
	t->nb = nb;
	return 0;
}

int htab_init(struct htab *t, uint64_t min)
{
	uint64_t nb = HTAB_MIN_BUCKETS;

	while (nb < min && nb < (UINT64_C(1) << 62))
		nb <<= 1;
	memset(t, 0, sizeof(*t));
	return resize(t, nb);
}

void htab_free(struct htab *t)
{
	free(t->b);
	memset(t, 0, sizeof(*t));
}

int htab_add(struct htab *t, struct htab_node *e, uint64_t h)
{
	if (t->n >= t->nb) {
		int rc = resize(t, t->nb ? t->nb * 2 : HTAB_MIN_BUCKETS);

		if (rc && !t->nb)
			return rc;
	}
	e->h = h;
	e->next = t->b[h & (t->nb - 1)];
	t->b[h & (t->nb - 1)] = e;
	t->n++;
	return 0;
}

void htab_del(struct htab *t, struct htab_node *e)
{
	struct htab_node **pp = &t->b[e->h & (t->nb - 1)];

	for (; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			e->next = NULL;
			t->n--;
			return;
		}
	}
}
