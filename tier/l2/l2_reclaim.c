/*
 * l2_reclaim.c - frees log space a segment at a time.
 *
 * Compaction first: while some sealed segment's live records all fit the
 * move budget, the one with the fewest live bytes is taken and every live
 * record in it is read back, verified and appended again verbatim (hot or
 * not: a record the engine still points at is never dropped while L2 has
 * room for it). Only when every segment holds more live bytes than a
 * reclaim may move (L2 is full of live data) does the eviction policy
 * decide: the oldest segment whose pinned records fit is taken, and the
 * engine is asked for each live record whether to keep it (hot) or drop
 * it. Either way the engine moves its entry with remove-if-match
 * semantics (l2.h: moved), and when all moves are done the segment file
 * is deleted. Recovery picks the highest seq of a key, so the order in
 * which segments go does not matter.
 *
 * Space is counted in bytes (l2.used, the segments' tails), not in whole
 * segments: normal appends may fill cap - reserve, moves the reserve
 * (half a segment). A reclaim moves at most the reserve and at most half
 * of the segment's bytes, so the moves always fit and every reclaim frees
 * half a segment at least (write amplification <= 2). It starts when
 * appends come within a quarter segment of their limit, or when one is
 * waiting for room. (Counting whole segments, with a whole segment held
 * back for moves and reclaim starting 1.5 segments early, left a small
 * L2 - four segments - about half empty.)
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
	if (!err) {
		l2->st.moves++;
		if (l2->mv_lo > loc->seg)
			l2->mv_lo = loc->seg;
		if (l2->mv_hi < loc->seg)
			l2->mv_hi = loc->seg;
	}
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

/* ------------------------------------------------------------ moves */

/* The moves of one reclaim, queued together when it has chosen them. */
struct moves {
	struct l2_req *head, *tail;
	uint64_t bytes, n;
};

/* Reads the record of info back and adds its move to mv: 0, or -errno
 * (the record was not added). */
static int move_add(struct l2 *l2, struct l2_seg *seg,
		    const struct l2_rec_info *info, struct moves *mv)
{
	struct l2_rec *rec = NULL;
	struct move_ctx *m;
	struct l2_req *r;
	int rc = read_back(l2, seg, info, &rec);
	struct kvfs_key parent;
	uint32_t depth;
	bool has;

	if (rc)
		return rc;
	/* a link learned after the record was written (l2_set_link) goes
	 * into the moved copy's header, so it outlives the checkpoint */
	has = kvrec_hdr_link(rec->hdr, &parent, &depth);
	if ((info->has_parent && !has) || (info->depth && !depth))
		l2_rec_set_link(l2, rec, info->has_parent ? &info->parent :
				has ? &parent : NULL,
				info->depth ? info->depth : depth);
	m = malloc(sizeof(*m));
	r = calloc(1, sizeof(*r));
	if (!m || !r) {
		free(m);
		free(r);
		l2_rec_free(l2, rec);
		return -ENOMEM;
	}
	m->l2 = l2;
	m->info = *info;
	r->op = REQ_WRITE;
	r->rec = rec;
	r->buf = rec->hdr;
	r->len = (size_t)rec->nblk * L2_ALIGN;
	r->done = move_done;
	r->arg = m;
	r->reserve = true;
	if (mv->tail)
		mv->tail->next = r;
	else
		mv->head = r;
	mv->tail = r;
	mv->bytes += r->len;
	mv->n++;
	return 0;
}

/* A record that was to move and could not (rc from move_add): it is
 * gone, and the engine drops its entry. */
static void move_lost(struct l2 *l2, struct l2_seg *seg, struct l2_ent *e,
		      const struct l2_rec_info *info, int rc)
{
	pthread_mutex_lock(&l2->lock);
	/* (not when an l2_free erased it while we read) */
	if (rc == -EBADMSG && e->state != ENT_DEAD)
		l2->st.corrupt++;
	l2_ent_kill(l2, e);
	pthread_mutex_unlock(&l2->lock);
	if (rc != -EBADMSG)
		l2_log_err(l2, rc, "reclaim cannot read a record", seg->id);
	if (l2->cfg.moved)
		l2->cfg.moved(l2->cfg.cb_arg, info, NULL);
}

/* ------------------------------------------------- choosing a segment */

/* l2.lock held: bytes of seg's records that are live or being written. */
static uint64_t seg_live(const struct l2_seg *seg)
{
	uint64_t b = 0;

	for (size_t i = 0; i < seg->nents; i++)
		if (seg->ents[i].state != ENT_DEAD)
			b += (uint64_t)seg->ents[i].nblk * L2_ALIGN;
	return b;
}

/* l2.lock held: the most a reclaim of seg may move. Moves fit in cap
 * (after a disk-full lowering, maybe nothing does) and free half the
 * segment at least. */
static uint64_t move_budget(const struct l2 *l2, const struct l2_seg *seg)
{
	uint64_t b = l2->cap > l2->used ? l2->cap - l2->used : 0;

	if (b > l2->reserve)
		b = l2->reserve;
	if (b > seg->tail / 2)
		b = seg->tail / 2;
	return b;
}

/* l2.lock held: the sealed segment with the fewest live bytes (the
 * oldest of equals) when all of them fit its move budget, else NULL. */
static struct l2_seg *pick_compact(struct l2 *l2)
{
	struct l2_seg *best = NULL;
	uint64_t best_live = 0;

	for (size_t i = 0; i < l2->nsegs; i++) {
		struct l2_seg *s = l2->segs[i];
		uint64_t live;

		if (s == l2->active || s->state != SEG_SEALED || s->pending)
			continue;
		live = seg_live(s);
		if (live > move_budget(l2, s) || (best && live >= best_live))
			continue;
		best = s;
		best_live = live;
		if (!live)
			break;
	}
	return best;
}

/*
 * The live records of seg (a snapshot: infos[i] of ents[idx[i]]) and
 * which of them the engine says are pinned. Takes and leaves l2.lock
 * unlocked; l2.lock is not held on entry. 0 or -ENOMEM.
 */
struct seg_scan {
	struct l2_rec_info *infos;
	size_t *idx;
	bool *pinned;
	size_t n;
	uint64_t pinned_bytes;
};

static int scan_seg(struct l2 *l2, struct l2_seg *seg, struct seg_scan *sc)
{
	size_t n;

	memset(sc, 0, sizeof(*sc));
	pthread_mutex_lock(&l2->lock);
	n = seg->nents; /* no entries are added to a sealed segment */
	sc->infos = calloc(n ? n : 1, sizeof(*sc->infos));
	sc->idx = calloc(n ? n : 1, sizeof(*sc->idx));
	sc->pinned = calloc(n ? n : 1, sizeof(*sc->pinned));
	if (!sc->infos || !sc->idx || !sc->pinned) {
		pthread_mutex_unlock(&l2->lock);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		if (seg->ents[i].state != ENT_LIVE)
			continue;
		l2_info_from_ent(l2, seg, &seg->ents[i], &sc->infos[sc->n]);
		sc->idx[sc->n++] = i;
	}
	pthread_mutex_unlock(&l2->lock);
	/* infos[].ns points to interned names, which live as long as l2 */
	for (size_t i = 0; l2->cfg.pinned && i < sc->n; i++) {
		sc->pinned[i] = l2->cfg.pinned(l2->cfg.cb_arg, &sc->infos[i]);
		if (sc->pinned[i])
			sc->pinned_bytes +=
				(uint64_t)sc->infos[i].loc.nblk * L2_ALIGN;
	}
	return 0;
}

static void scan_free(struct seg_scan *sc)
{
	free(sc->infos);
	free(sc->idx);
	free(sc->pinned);
}

/*
 * l2.lock not held. The segment a policy reclaim takes: the oldest whose
 * pinned records (l2_config.pinned) fit its move budget, so that a record
 * the engine must not lose is never dropped for space; its scan in *sc.
 * NULL when no sealed segment qualifies.
 */
static struct l2_seg *pick_policy(struct l2 *l2, struct seg_scan *sc)
{
	for (size_t i = 0;; i++) {
		struct l2_seg *seg;
		bool fits;

		pthread_mutex_lock(&l2->lock);
		/* only this thread removes segments: index i stays put */
		seg = i < l2->nsegs ? l2->segs[i] : NULL;
		while (seg && seg != l2->active && seg->pending && !l2->rc_stop)
			pthread_cond_wait(&l2->rc_cond, &l2->lock);
		if (l2->rc_stop || !seg || seg == l2->active) {
			pthread_mutex_unlock(&l2->lock);
			return NULL;
		}
		pthread_mutex_unlock(&l2->lock);
		if (scan_seg(l2, seg, sc)) {
			scan_free(sc);
			return NULL;
		}
		pthread_mutex_lock(&l2->lock);
		fits = sc->pinned_bytes <= move_budget(l2, seg);
		pthread_mutex_unlock(&l2->lock);
		if (fits)
			return seg;
		scan_free(sc);
	}
}

/*
 * Reclaims one segment. Returns false when there was nothing to do.
 *
 * While the live records fit (a sealed segment whose live bytes fit its
 * move budget: pick_compact), the segment with the fewest live bytes is
 * compacted: every live record moves, none is dropped, whether hot or
 * not. Only when no segment is that empty (L2 holds more live bytes than
 * it can keep) does the policy decide: the oldest segment whose pinned
 * records fit is taken, pinned records get the budget first (pass 0),
 * then what the engine calls hot (pass 1); the rest is dropped.
 */
static bool reclaim_one(struct l2 *l2)
{
	struct moves mv = { 0 };
	struct seg_scan sc = { 0 };
	struct l2_seg *seg;
	uint64_t budget;
	bool compact;
	char name[64];
	size_t i;

	pthread_mutex_lock(&l2->lock);
	if (!l2_need_reclaim(l2)) {
		pthread_mutex_unlock(&l2->lock);
		return false;
	}
	seg = l2->cfg.moved ? pick_compact(l2) : NULL;
	compact = seg != NULL;
	pthread_mutex_unlock(&l2->lock);
	if (compact && scan_seg(l2, seg, &sc)) {
		scan_free(&sc);
		return false;
	}
	if (!compact) {
		seg = pick_policy(l2, &sc);
		if (!seg) {
			pthread_mutex_lock(&l2->lock);
			if (!l2->rc_stop && !l2->rc_stuck)
				l2_logf(l2, "l2: no segment can be reclaimed "
					"without dropping pinned records "
					"(evict=never namespaces larger than L2 "
					"can keep?): appends wait");
			l2->rc_stuck = true;
			pthread_mutex_unlock(&l2->lock);
			return false;
		}
	}
	pthread_mutex_lock(&l2->lock);
	seg->state = SEG_RECLAIM;
	seg->refs++;
	budget = move_budget(l2, seg);
	pthread_mutex_unlock(&l2->lock);

	for (int pass = 0; pass < 2; pass++) {
		for (i = 0; i < sc.n; i++) {
			struct l2_rec_info *info = &sc.infos[i];
			struct l2_ent *e = &seg->ents[sc.idx[i]];
			uint64_t len = (uint64_t)info->loc.nblk * L2_ALIGN;
			enum l2_reclaim_verdict v = L2_DROP;
			bool live, keep;
			int rc;

			if (compact ? pass == 1 : sc.pinned[i] != (pass == 0))
				continue;
			pthread_mutex_lock(&l2->lock);
			live = e->state == ENT_LIVE;
			pthread_mutex_unlock(&l2->lock);
			if (!live)
				continue;
			if (compact && len <= budget) {
				keep = true;
				info->compacted = true;
			} else {
				bool may_keep = l2->cfg.moved && len <= budget;

				if (l2->cfg.reclaim)
					v = l2->cfg.reclaim(l2->cfg.cb_arg, info,
							    may_keep);
				keep = v == L2_KEEP && may_keep;
			}
			if (!keep) {
				pthread_mutex_lock(&l2->lock);
				l2_ent_kill(l2, e);
				pthread_mutex_unlock(&l2->lock);
				continue;
			}
			rc = move_add(l2, seg, info, &mv);
			if (rc)
				move_lost(l2, seg, e, info, rc);
			else
				budget -= len;
		}
	}
	scan_free(&sc);

	/* all moves at once, ahead of every other append: they fit in the
	 * reserved segment together */
	pthread_mutex_lock(&l2->lock);
	if (mv.head) {
		if (l2->move_tail)
			l2->move_tail->next = mv.head;
		else
			l2->move_head = mv.head;
		l2->move_tail = mv.tail;
		l2->moves_pending += mv.n;
		l2->queued_bytes += mv.bytes;
		l2->queued_count += mv.n;
	}
	pthread_mutex_unlock(&l2->lock);
	if (mv.head)
		l2_io_wake(l2);

	pthread_mutex_lock(&l2->lock);
	while (l2->moves_pending)
		pthread_cond_wait(&l2->move_cond, &l2->lock);
	if (l2->mv_lo <= l2->mv_hi) {
		uint32_t lo = l2->mv_lo, hi = l2->mv_hi;

		/* the moved copies reach the disk before the segment they
		 * left is deleted: a record synced once (an fsync of its
		 * chunk) survives a machine crash wherever it moves */
		l2->mv_lo = UINT32_MAX;
		l2->mv_hi = 0;
		pthread_mutex_unlock(&l2->lock);
		l2_sync_moved(l2, lo, hi);
		pthread_mutex_lock(&l2->lock);
	}
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
	if (compact)
		l2->st.compactions++;
	l2->rc_stuck = false;
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
