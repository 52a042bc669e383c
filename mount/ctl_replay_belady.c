/*
 * ctl_replay_belady.c - `kvfsctl replay --policy belady`: Belady's offline
 * optimum (MIN) on a loaded trace, the ceiling the real policies are
 * measured against. It needs the future, so it runs here, beside the
 * engine rather than in it.
 *
 * Ids come mapped to dense indexes (trace_load), then one backward pass gives each position the position of its id's next use in
 * a LATER request (uses inside the same request are served by the state at
 * the request's start, as in the engine replay). The cache is a max-heap
 * on next use with lazy deletion: an entry is live while it matches the
 * block's current next use. Never-reused blocks have next use "infinity",
 * so they go first, and a full cache does not admit a block used later
 * than everything it holds. O(n log n) time, O(n) memory.
 *
 * This is the optimum for block hits. For prefix hits it is the usual
 * reference rather than a proven optimum (a prefix-aware oracle could keep
 * fewer, leading blocks), which is how the issue defines the gap.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mount/ctl_replay.h"

#define NEVER UINT64_MAX

struct bel_ent {
	uint64_t next; /* position of the next use, NEVER if none */
	uint32_t id;   /* dense block index */
};

struct bel_heap {
	struct bel_ent *e;
	size_t n, cap;
};

static bool bel_above(const struct bel_ent *a, const struct bel_ent *b)
{
	return a->next > b->next;
}

static int bel_push(struct bel_heap *h, uint64_t next, uint32_t id)
{
	size_t i;

	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 1024;
		struct bel_ent *n = realloc(h->e, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		h->e = n;
		h->cap = cap;
	}
	i = h->n++;
	h->e[i] = (struct bel_ent){ .next = next, .id = id };
	while (i && bel_above(&h->e[i], &h->e[(i - 1) / 2])) {
		struct bel_ent tmp = h->e[i];

		h->e[i] = h->e[(i - 1) / 2];
		h->e[(i - 1) / 2] = tmp;
		i = (i - 1) / 2;
	}
	return 0;
}

static void bel_pop(struct bel_heap *h)
{
	size_t i = 0;

	h->e[0] = h->e[--h->n];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		struct bel_ent tmp;

		if (l < h->n && bel_above(&h->e[l], &h->e[m]))
			m = l;
		if (r < h->n && bel_above(&h->e[r], &h->e[m]))
			m = r;
		if (m == i)
			return;
		tmp = h->e[i];
		h->e[i] = h->e[m];
		h->e[m] = tmp;
		i = m;
	}
}

int replay_belady(const struct replay_trace *tr, uint64_t capacity,
		  struct replay_result *res)
{
	const uint32_t *dense = tr->dense;
	uint64_t *next = malloc((tr->nids ? tr->nids : 1) * sizeof(*next));
	uint64_t *last = NULL, *cur = NULL, held = 0;
	struct bel_heap h = { 0 };
	struct timespec t0, t1;
	size_t nuniq = tr->unique;
	int rc = -ENOMEM;

	memset(res, 0, sizeof(*res));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!next)
		goto out;
	last = malloc((nuniq ? nuniq : 1) * sizeof(*last));
	cur = malloc((nuniq ? nuniq : 1) * sizeof(*cur));
	if (!last || !cur)
		goto out;
	/* next[i]: first use of the id in a later request */
	for (size_t u = 0; u < nuniq; u++)
		last[u] = NEVER;
	for (size_t r = tr->nreq; r-- > 0;) {
		for (size_t i = tr->req[r]; i < tr->req[r + 1]; i++)
			next[i] = last[dense[i]];
		for (size_t i = tr->req[r + 1]; i-- > tr->req[r];)
			last[dense[i]] = i;
	}
	/* cur[u]: the live next use of a cached block; 0 = not cached
	 * (a next use is always a position > 0) */
	memset(cur, 0, nuniq * sizeof(*cur));

	for (size_t r = 0; r < tr->nreq; r++) {
		size_t b = tr->req[r], e = tr->req[r + 1];
		bool leading = true;

		for (size_t i = b; i < e; i++) {
			uint32_t u = dense[i];

			if (!cur[u]) {
				leading = false;
				continue;
			}
			res->hits++;
			res->prefix_hits += leading;
		}
		res->blocks += e - b;
		for (size_t i = b; i < e; i++) {
			uint32_t u = dense[i];

			if (cur[u]) {
				if (cur[u] != next[i]) { /* a hit: re-key */
					cur[u] = next[i];
					if (bel_push(&h, next[i], u))
						goto out;
				}
				continue;
			}
			if (held >= capacity) {
				/* drop stale heap entries */
				while (h.n && cur[h.e[0].id] != h.e[0].next)
					bel_pop(&h);
				res->evictions++;
				if (!h.n || next[i] >= h.e[0].next)
					continue; /* the newcomer is the victim */
				cur[h.e[0].id] = 0;
				bel_pop(&h);
				held--;
			}
			cur[u] = next[i];
			held++;
			if (bel_push(&h, next[i], u))
				goto out;
		}
	}
	res->cached = held;
	rc = 0;
out:
	clock_gettime(CLOCK_MONOTONIC, &t1);
	res->secs = (double)(t1.tv_sec - t0.tv_sec) +
		    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	free(h.e);
	free(cur);
	free(last);
	free(next);
	return rc;
}
