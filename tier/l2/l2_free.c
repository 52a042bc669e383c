/*
 * l2_free.c - freeing records: l2_free marks an entry dead and queues
 * the punch that erases it on disk; l2_sync_frees waits for those punches.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "tier/l2/l2_i.h"

/* -------------------------------------------------------------- free */

void l2_free(struct l2 *l2, const struct l2_loc *loc)
{
	struct l2_seg *seg;
	struct l2_ent *e;
	struct l2_req *r;

	if (!loc)
		return;
	r = calloc(1, sizeof(*r));
	pthread_mutex_lock(&l2->lock);
	seg = l2_seg_find(l2, loc->seg);
	e = seg ? l2_ent_find(seg, loc->blk) : NULL;
	if (!e || e->nblk != loc->nblk || e->state == ENT_DEAD) {
		pthread_mutex_unlock(&l2->lock);
		free(r);
		return;
	}
	l2_ent_kill(l2, e);
	/* before the punch: a kill between the two must not let a
	 * checkpoint bring it back */
	l2_flog_append(l2, seg->id, e->blk, e->seq);
	/* Erased even in a segment being reclaimed (deleted soon, but a
	 * crash before that would recover the record); its fd stays open
	 * while the punch holds a reference. */
	if (!r || l2->io_stop) {
		pthread_mutex_unlock(&l2->lock);
		free(r);
		return;
	}
	seg->refs++;
	r->op = REQ_PUNCH;
	r->seg = seg;
	r->off = (uint64_t)loc->blk * L2_ALIGN;
	r->len = (size_t)loc->nblk * L2_ALIGN;
	r->counted_free = true;
	l2->frees_queued++;
	pthread_mutex_unlock(&l2->lock);
	l2_io_submit(l2, r);
}

int l2_sync_frees(struct l2 *l2, int timeout_ms)
{
	struct timespec dl;
	uint64_t target;
	int rc = 0;

	l2_deadline(&dl, timeout_ms);
	pthread_mutex_lock(&l2->lock);
	/* A reclaim move of a freed record writes a copy that move_done
	 * frees (before moves_pending drops): wait for the moves first. */
	while (l2->moves_pending && !rc)
		rc = pthread_cond_timedwait(&l2->free_cond, &l2->lock, &dl);
	target = l2->frees_queued;
	while (l2->frees_done < target && !rc)
		rc = pthread_cond_timedwait(&l2->free_cond, &l2->lock, &dl);
	pthread_mutex_unlock(&l2->lock);
	return rc ? -ETIMEDOUT : 0;
}
