/*
 * l2_reclaim.c - frees log space a segment at a time, oldest first.
 *
 * For each live record of the oldest segment the engine is asked whether
 * to keep it (hot) or drop it; kept records are read back, verified, and
 * appended again verbatim; the engine then moves its entry with
 * remove-if-match semantics (l2.h: moved). When all moves are done the
 * segment file is deleted.
 *
 * Space is counted in bytes (l2.used, the segments' tails), not in whole
 * segments: normal appends may fill cap - reserve, moves the reserve
 * (half a segment). A reclaim keeps at most the reserve and at most half
 * of the segment's bytes, so the moves always fit and every reclaim frees
 * space. It starts when appends come within a quarter segment of their
 * limit, or when one is waiting for room. (Counting whole segments, with
 * a whole segment held back for moves and reclaim starting 1.5 segments
 * early, left a small L2 - four segments - about half empty.)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tier/l2/l2_i.h"

struct move_ctx {
	struct l2 *l2;
	struct l2_rec_info info; /* info.ns points to an interned name */
};

static void move_done(void *arg, struct l2_rec *rec, int err,
		      const struct l2_loc *loc)
{
	struct move_ctx *m = arg;
	struct l2 *l2 = m->l2;
	bool matched = false;

	if (l2->cfg.moved)
		matched = l2->cfg.moved(l2->cfg.cb_arg, &m->info,
					err ? NULL : loc);
	if (!err && !matched)
		l2_free(l2, loc);
	l2_rec_free(l2, rec);
	pthread_mutex_lock(&l2->lock);
	if (!err)
		l2->st.moves++;
	l2->moves_pending--;
	pthread_cond_broadcast(&l2->move_cond);
	pthread_cond_broadcast(&l2->free_cond); /* l2_sync_frees */
	pthread_mutex_unlock(&l2->lock);
	free(m);
}

/* Reads a kept record back (blocking, on this thread) and checks it is
 * the record the engine was asked about. Returns a record to append. */
static int read_back(struct l2 *l2, struct l2_seg *seg,
		     const struct l2_rec_info *info, struct l2_rec **out)
{
	size_t len = (size_t)info->loc.nblk * L2_ALIGN, got = 0;
	struct l2_rec *rec = calloc(1, sizeof(*rec));
	struct kvrec_hdr *h;

	if (!rec)
		return -ENOMEM;
	rec->hdr = l2_buf_get(l2, len, &rec->cap);
	if (!rec->hdr) {
		free(rec);
		return -ENOMEM;
	}
	rec->nblk = info->loc.nblk;
	while (got < len) {
		ssize_t n = pread(seg->fd, (uint8_t *)rec->hdr + got, len - got,
				  (off_t)info->loc.blk * L2_ALIGN + (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int rc = n < 0 ? -errno : -ENODATA;

			l2_rec_free(l2, rec);
			return rc;
		}
		got += (size_t)n;
	}
	h = rec->hdr;
	if (l2_hdr_check(l2, h) || h->seq != info->seq ||
	    memcmp(h->key, info->key.b, sizeof(h->key)) ||
	    l2_record_bytes(h->stored_len) != len ||
	    kvrec_payload_check(h, (uint8_t *)h + sizeof(*h))) {
		l2_rec_free(l2, rec);
		return -EBADMSG;
	}
	*out = rec;
	return 0;
}

/* Reclaims the oldest segment. Returns false when there was nothing to
 * do. */
static bool reclaim_one(struct l2 *l2)
{
	struct l2_req *moves = NULL, *mtail = NULL;
	uint64_t budget, mbytes = 0, nmoves = 0;
	struct l2_seg *seg;
	uint8_t *done;
	char name[64];
	size_t i, n;

	pthread_mutex_lock(&l2->lock);
	if (!l2_need_reclaim(l2)) {
		pthread_mutex_unlock(&l2->lock);
		return false;
	}
	seg = l2->segs[0];
	while (seg->pending && !l2->rc_stop)
		pthread_cond_wait(&l2->rc_cond, &l2->lock);
	if (l2->rc_stop || seg != l2->segs[0] || seg == l2->active) {
		pthread_mutex_unlock(&l2->lock);
		return false;
	}
	seg->state = SEG_RECLAIM;
	seg->refs++;
	n = seg->nents; /* no entries are added to a sealed segment */
	/* moves fit in cap (after a disk-full lowering, maybe nothing
	 * does), and free half the segment at least */
	budget = l2->cap > l2->used ? l2->cap - l2->used : 0;
	if (budget > l2->reserve)
		budget = l2->reserve;
	if (budget > seg->tail / 2)
		budget = seg->tail / 2;
	pthread_mutex_unlock(&l2->lock);

	/*
	 * Two passes when the engine says what is pinned: pinned records get
	 * the move budget first (pass 0), everything else after (pass 1),
	 * so hot records met earlier in the segment cannot spend the budget
	 * a pinned one needs. done[i] marks what pass 0 handled. (Without
	 * memory for done[], one pass, as without the callback.)
	 */
	done = l2->cfg.pinned ? calloc(n ? n : 1, 1) : NULL;
	for (size_t k = 0; k < (done ? 2 * n : n); k++) {
		enum l2_reclaim_verdict v = L2_DROP;
		struct l2_rec_info info;
		struct l2_rec *rec = NULL;
		bool may_keep;
		int rc;

		i = k % n;
		if (done && done[i])
			continue;
		pthread_mutex_lock(&l2->lock);
		if (seg->ents[i].state != ENT_LIVE) {
			pthread_mutex_unlock(&l2->lock);
			continue;
		}
		l2_info_from_ent(l2, seg, &seg->ents[i], &info);
		pthread_mutex_unlock(&l2->lock);
		if (done) {
			if (k < n && !l2->cfg.pinned(l2->cfg.cb_arg, &info))
				continue; /* pass 1 */
			done[i] = 1;
		}

		may_keep = l2->cfg.moved &&
			   (uint64_t)info.loc.nblk * L2_ALIGN <= budget;
		if (l2->cfg.reclaim)
			v = l2->cfg.reclaim(l2->cfg.cb_arg, &info, may_keep);
		if (v != L2_KEEP || !may_keep) {
			pthread_mutex_lock(&l2->lock);
			l2_ent_kill(l2, &seg->ents[i]);
			pthread_mutex_unlock(&l2->lock);
			continue;
		}
		rc = read_back(l2, seg, &info, &rec);
		if (rc == 0) {
			struct move_ctx *m = malloc(sizeof(*m));
			struct l2_req *r = calloc(1, sizeof(*r));

			if (!m || !r) {
				free(m);
				free(r);
				l2_rec_free(l2, rec);
				rc = -ENOMEM;
			} else {
				m->l2 = l2;
				m->info = info;
				r->op = REQ_WRITE;
				r->rec = rec;
				r->buf = rec->hdr;
				r->len = (size_t)rec->nblk * L2_ALIGN;
				r->done = move_done;
				r->arg = m;
				r->reserve = true;
				if (mtail)
					mtail->next = r;
				else
					moves = r;
				mtail = r;
				budget -= r->len;
				mbytes += r->len;
				nmoves++;
			}
		}
		if (rc) {
			pthread_mutex_lock(&l2->lock);
			/* (not when an l2_free erased it while we read) */
			if (rc == -EBADMSG &&
			    seg->ents[i].state != ENT_DEAD)
				l2->st.corrupt++;
			l2_ent_kill(l2, &seg->ents[i]);
			pthread_mutex_unlock(&l2->lock);
			if (rc != -EBADMSG)
				l2_log_err(l2, rc, "reclaim cannot read a record",
					   seg->id);
			if (l2->cfg.moved)
				l2->cfg.moved(l2->cfg.cb_arg, &info, NULL);
		}
	}

	free(done);

	/* all moves at once, ahead of every other append: they fit in the
	 * reserved segment together */
	pthread_mutex_lock(&l2->lock);
	if (moves) {
		if (l2->move_tail)
			l2->move_tail->next = moves;
		else
			l2->move_head = moves;
		l2->move_tail = mtail;
		l2->moves_pending += nmoves;
		l2->queued_bytes += mbytes;
		l2->queued_count += nmoves;
	}
	pthread_mutex_unlock(&l2->lock);
	if (moves)
		l2_io_wake(l2);

	pthread_mutex_lock(&l2->lock);
	while (l2->moves_pending)
		pthread_cond_wait(&l2->move_cond, &l2->lock);
	for (i = 0; i < l2->nsegs; i++)
		if (l2->segs[i] == seg)
			break;
	if (i < l2->nsegs) {
		memmove(&l2->segs[i], &l2->segs[i + 1],
			(l2->nsegs - i - 1) * sizeof(*l2->segs));
		l2->nsegs--;
		l2->used -= seg->tail;
	}
	for (i = 0; i < seg->nents; i++)
		l2_ent_kill(l2, &seg->ents[i]);
	l2->st.reclaims++;
	l2->st.segments = l2->nsegs;
	l2->st.disk_bytes = l2->used;
	snprintf(name, sizeof(name), "seg-%016" PRIx32 ".kvl2", seg->id);
	/* the fd lives on while reads of it are in flight */
	unlinkat(l2->dir_fd, name, 0);
	l2_seg_unref(l2, seg); /* the table's */
	l2_seg_unref(l2, seg); /* ours */
	pthread_mutex_unlock(&l2->lock);
	l2_io_wake(l2);
	return true;
}

static void *rc_main(void *arg)
{
	struct l2 *l2 = arg;

	pthread_mutex_lock(&l2->lock);
	while (!l2->rc_stop) {
		if (!l2_need_reclaim(l2)) {
			pthread_cond_wait(&l2->rc_cond, &l2->lock);
			continue;
		}
		pthread_mutex_unlock(&l2->lock);
		if (!reclaim_one(l2)) {
			struct timespec ts = { 0, 10 * 1000 * 1000 };

			nanosleep(&ts, NULL);
		}
		pthread_mutex_lock(&l2->lock);
	}
	pthread_mutex_unlock(&l2->lock);
	return NULL;
}

int l2_reclaim_start(struct l2 *l2)
{
	int rc = -pthread_create(&l2->rc_thread, NULL, rc_main, l2);

	if (rc == 0)
		l2->rc_started = true;
	return rc;
}

void l2_reclaim_stop(struct l2 *l2)
{
	if (!l2->rc_started)
		return;
	pthread_mutex_lock(&l2->lock);
	l2->rc_stop = true;
	pthread_cond_broadcast(&l2->rc_cond);
	pthread_mutex_unlock(&l2->lock);
	pthread_join(l2->rc_thread, NULL);
	l2->rc_started = false;
	l2_io_wake(l2);
}
