/*
 * seen.c - the decaying two-generation Bloom filter of seen.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash/htab.h"
#include "tier/policy/seen.h"

int seen_init(struct seen_filter *f, uint64_t keys)
{
	uint64_t nw, *g0, *g1;

	if (!keys)
		keys = 1;
	if (keys > (UINT32_MAX / SEEN_BITS) * 64ULL)
		keys = (UINT32_MAX / SEEN_BITS) * 64ULL; /* word index: 32 bits */
	nw = (keys * SEEN_BITS + 63) / 64;
	g0 = calloc(nw, sizeof(*g0));
	g1 = calloc(nw, sizeof(*g1));
	if (!g0 || !g1) {
		free(g0);
		free(g1);
		return -ENOMEM;
	}
	seen_free(f);
	f->gen[0] = g0;
	f->gen[1] = g1;
	f->nwords = nw;
	f->added = 0;
	f->per_gen = keys;
	return 0;
}

void seen_free(struct seen_filter *f)
{
	free(f->gen[0]);
	free(f->gen[1]);
	memset(f, 0, sizeof(*f));
}

/* The word and the three bits of a key: one cache line per lookup. */
static uint64_t seen_mask(const struct seen_filter *f, uint64_t h,
			  uint64_t *word)
{
	h = htab_mix64(h);
	/* Lemire's multiply-shift: any word count, no power-of-two rounding */
	*word = ((h & 0xffffffffULL) * f->nwords) >> 32;
	return (1ULL << ((h >> 40) & 63)) | (1ULL << ((h >> 46) & 63)) |
	       (1ULL << ((h >> 52) & 63));
}

bool seen_has(const struct seen_filter *f, uint64_t h)
{
	uint64_t w, m;

	if (!f->nwords)
		return false;
	m = seen_mask(f, h, &w);
	return (f->gen[0][w] & m) == m || (f->gen[1][w] & m) == m;
}

void seen_add(struct seen_filter *f, uint64_t h)
{
	uint64_t w, m, *old;

	if (!f->nwords)
		return;
	m = seen_mask(f, h, &w);
	if ((f->gen[0][w] & m) == m)
		return;
	f->gen[0][w] |= m;
	if (++f->added < f->per_gen)
		return;
	/* the current generation is full: it becomes the previous one */
	old = f->gen[1];
	memset(old, 0, f->nwords * sizeof(*old));
	f->gen[1] = f->gen[0];
	f->gen[0] = old;
	f->added = 0;
}

size_t seen_bytes(const struct seen_filter *f)
{
	return 2 * f->nwords * sizeof(uint64_t);
}

int seen2_init(struct seen2 *s, uint64_t keys)
{
	struct seen_filter once = { 0 }, twice = { 0 };

	if (seen_init(&once, keys) || seen_init(&twice, keys)) {
		seen_free(&once);
		seen_free(&twice);
		return -ENOMEM;
	}
	seen2_free(s);
	s->once = once;
	s->twice = twice;
	return 0;
}

void seen2_free(struct seen2 *s)
{
	seen_free(&s->once);
	seen_free(&s->twice);
}

void seen2_note(struct seen2 *s, uint64_t h)
{
	if (seen_has(&s->once, h))
		seen_add(&s->twice, h);
	else
		seen_add(&s->once, h);
}

bool seen2_twice(const struct seen2 *s, uint64_t h)
{
	return seen_has(&s->twice, h);
}

size_t seen2_bytes(const struct seen2 *s)
{
	return seen_bytes(&s->once) + seen_bytes(&s->twice);
}
