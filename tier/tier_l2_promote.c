/*
 * tier_l2_promote.c - chunks coming back from L2: tier_l2_fill (promote
 * into L1, or read into a temporary buffer), promotion of user-pinned
 * chunks, and the prefetchers that promote ahead of readers.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tier/tier_l2_i.h"

static int wait_promo(struct tier *t, struct tier_rec *r)
{
	struct timespec dl;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += L2_READ_TIMEOUT_MS_DEFAULT / 1000 + 1;
	while (r->flags & TREC_PROMO)
		if (pthread_cond_timedwait(&t->l2->cond, &t->lock, &dl) ==
		    ETIMEDOUT)
			return -ETIMEDOUT;
	return 0;
}

/*
 * tier_l2_fill - makes the pinned L2 chunk r readable through c: promotes
 * it into L1 (evicting by policy), or, when L1 has no room (pinned chunks),
 * reads it into a temporary buffer (c->tmp). tier.lock held on entry and
 * on return; dropped while reading. Returns 0, or -ENOENT (the record
 * failed verification and was dropped, or the chunk was unlinked
 * meanwhile), -ETIMEDOUT / -EIO (the disk did not answer in time or
 * failed: a miss this time, the record stays), -ENOMEM.
 */
int tl2_fill(struct tier *t, struct tier_rec *r, struct tier_chunk *c)
{
	struct tier_l2 *t2 = t->l2;
	uint64_t len = l1_alloc_round(r->size), off = 0;
	char ns[KVFS_NS_NAME_MAX + 1];
	struct tl2_job *job = NULL;
	struct tier_ns *n;
	struct tl2_loc l = { 0 };
	bool have_extent = false;
	void *tmp = NULL, *dst;
	bool retried = false;
	int rc;

	if (!t2 || !t2->l2)
		return -ENOENT;
again:
	off = 0;
	job = NULL;
	memset(&l, 0, sizeof(l));
	have_extent = false;
	tmp = NULL;
	/* its extent may evict chunks whose copies wait for the disk: at
	 * the disk's pace (r is pinned; its state is looked at after) */
	tier_l2_throttle(t, len);
	rc = wait_promo(t, r);
	if (rc)
		return rc;
	if (r->flags & TREC_ZOMBIE)
		return -ENOENT;
	if (r->where == TIER_L1)
		goto in_l1;
	n = tier_ns_get(t, r->ns);
	if (!n)
		return -ENOENT;
	memcpy(ns, n->name, sizeof(ns));
	if (r->flags & TREC_L2W) {
		job = job_of(r);
		job->readers++;
	} else if (r->flags & TREC_L2) {
		loc_get(r, &l);
	} else {
		return -ENOENT;
	}
	if (!len) {
		/* an empty chunk needs no extent: it goes back to L1 as one
		 * with l1_pages 0, like a freshly published empty chunk */
		have_extent = true;
	} else if (tier_alloc_evict(t, len, &off) == 0) {
		have_extent = true;
		t->writer_bytes += len; /* held like a writer's until done */
	}
	r->flags |= TREC_PROMO;
	tier_unlock(t);

	if (have_extent && t->arena.host && len) {
		dst = (char *)t->arena.host + off;
	} else {
		tmp = malloc(r->size ? r->size : 1);
		dst = tmp;
	}
	if (!dst)
		rc = -ENOMEM;
	else if (job) {
		if (r->size) /* job->raw may be NULL for an empty chunk */
			memcpy(dst, job->raw, r->size);
	} else {
		rc = l2_read(t2->l2, &l.loc, ns, &r->key, dst, r->size);
	}
	if (rc == 0 && have_extent && (!t->arena.host || !len)) {
		rc = tier_arena_write(t, off, tmp, r->size);
		free(tmp);
		tmp = NULL;
	}

	tier_lock(t);
	r->flags &= (uint8_t)~TREC_PROMO;
	pthread_cond_broadcast(&t2->cond);
	if (job && --job->readers == 0 && job->finished) {
		free(job->raw);
		free(job);
	}
	if (have_extent)
		t->writer_bytes -= len;
	if (rc || (r->flags & TREC_ZOMBIE)) {
		if (have_extent && len)
			l1_alloc_put(t->alloc, off, len);
		free(tmp);
		if (rc == -ENOENT && !job && !retried &&
		    !(r->flags & TREC_ZOMBIE) && r->where == TIER_L2 &&
		    (r->flags & TREC_L2) && !rec_loc_is(r, &l.loc)) {
			/* a reclaim moved the record while we read the old
			 * place (gone now): read it where it is */
			retried = true;
			goto again;
		}
		if (rc == -EBADMSG && !(r->flags & TREC_ZOMBIE) &&
		    rec_loc_is(r, &l.loc)) {
			/* never served: the engine recomputes (a miss) */
			l2_free(t2->l2, &l.loc);
			tl2_drop_l2_only(t, r, TIER_GONE_DROPPED);
		}
		/* (l2 logged what went wrong; no callbacks under tier.lock) */
		if (rc == -EBADMSG || rc == 0)
			rc = -ENOENT;
		return rc;
	}
	if (!have_extent) {
		/* L1 is full of pinned chunks: serve from the buffer */
		c->tmp = tmp;
		c->ptr = NULL;
		c->off = 0;
		return 0;
	}
	r->l1_off = off;
	r->l1_pages = (uint32_t)(len / L1_ALIGN);
	r->where = TIER_L1;
	tier_ev_move(t, r, TIER_L2, TIER_L1, TIER_EV_PROMOTE);
	t->l1_bytes += len;
	t->l1_chunks++;
	if (r->pi.refs)
		t->pinned_bytes += len;
	t->pops->insert(t->pol, &r->pi);
	tier_count_parent(t, r);
	t->promotions++;
	tier_policy_capacity(t);
in_l1:
	c->off = r->l1_off;
	c->ptr = t->arena.host ? (const char *)t->arena.host + r->l1_off : NULL;
	c->tmp = NULL;
	return 0;
}

void tl2_pin_promote(struct tier *t, struct tier_rec *r)
{
	struct tier_chunk c = { 0 };

	if (!t->l2 || !t->l2->l2 || r->where != TIER_L2)
		return;
	if (tier_l2_fill(t, r, &c) == 0)
		free(c.tmp); /* no room in L1 now: stays in L2, pinned */
}

uint64_t tl2_prefetch_bytes(const struct tier *t)
{
	return t->l2 ? t->l2->pf_bytes : 0;
}

void tl2_prefetch(struct tier *t, struct tier_rec *r)
{
	struct tier_l2 *t2 = t->l2;
	struct tl2_pf *p;

	if (!t2 || !t2->l2 || r->where != TIER_L2 || t2->npf >= TL2_MAX_PREFETCH)
		return;
	/* A run larger than L1 would evict its own head (what the engine
	 * reads first) to make room for its tail: prefetch at most three
	 * quarters of L1 ahead; the rest is promoted when it is read. */
	if (t2->pf_bytes + r->size > tier_prefetch_bound(t))
		return;
	p = malloc(sizeof(*p));
	if (!p)
		return;
	p->next = NULL;
	p->ns = r->ns;
	p->key = r->key;
	p->size = r->size;
	t2->pf_bytes += r->size;
	if (t2->pf_tail)
		t2->pf_tail->next = p;
	else
		t2->pf_head = p;
	t2->pf_tail = p;
	t2->npf++;
	pthread_cond_broadcast(&t2->cond);
}

void *tl2_prefetcher_main(void *arg)
{
	struct tier *t = arg;
	struct tier_l2 *t2 = t->l2;

	l2_read_alone(true); /* ahead of the readers, as readahead's workers */
	tier_lock(t);
	for (;;) {
		struct tl2_pf *p = t2->pf_head;
		struct tier_rec *r;

		if (t2->stop)
			break;
		if (!p) {
			pthread_cond_wait(&t2->cond, &t->lock);
			continue;
		}
		t2->pf_head = p->next;
		if (!t2->pf_head)
			t2->pf_tail = NULL;
		t2->npf--;
		t2->pf_bytes -= p->size;
		r = tier_idx_find(t, p->ns, &p->key);
		if (r && r->where == TIER_L2 && !(r->flags & TREC_PROMO)) {
			struct tier_chunk c = { 0 };

			tier_ref(t, r);
			if (tier_l2_fill(t, r, &c) == 0) {
				free(c.tmp);
				/* asked for: an access, so a scan-resistant
				 * policy (s3fifo) does not evict it before
				 * the read that the lookup announced */
				if (r->where == TIER_L1 && !(r->flags & TREC_ZOMBIE))
					t->pops->access(t->pol, &r->pi);
			}
			tier_unref(t, r);
		}
		free(p);
	}
	tier_unlock(t);
	return NULL;
}
