/*
 * tier_wr.c - chunks being written: reservation, staging in an L1 extent
 * owned by the writer, growth, and atomic publication.
 *
 * A writer's extent is private until publication, so its bytes are copied
 * without tier.lock, under the writer's own mutex (tier_wr.mu), which also
 * serializes concurrent pwrites on one writer. tier.lock is taken only to
 * allocate, free and publish. Writer extents count against l1_size like
 * published chunks (tier.writer_bytes), and are never evicted.
 *
 * Space is taken as bytes arrive, not at tier_wr_begin (unless its caller
 * gives the size it is about to write): a writer that writes nothing (an
 * idle temporary) holds no L1 and evicts nothing. The
 * first extent is the expected size (the namespace's chunk_bytes, the last
 * chunk's size) so one write pattern costs no copies, but only while such
 * guesses by all writers together stay within half of L1; beyond that a
 * writer gets what its bytes need, doubling as they come.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hash/hashkey.h"
#include "tier/tier_i.h"
#include "tier/tier_wait.h"

/* The keyed writer reserving (ns, key), or NULL (tier.lock held). */
static struct tier_wr *find_writer(struct tier *t, uint32_t ns,
				   const struct kvfs_key *key,
				   const struct tier_wr *except)
{
	struct tier_wr *w;

	for (w = t->writers; w; w = w->next)
		if (w != except && w->keyed && w->ns == ns &&
		    tier_key_eq(&w->key, key))
			return w;
	return NULL;
}

/* Unlinks w from the writers and frees its extent (tier.lock held). */
static void writer_drop(struct tier *t, struct tier_wr *w)
{
	struct tier_ns *ns = tier_ns_get(t, w->ns);

	if (w->prev)
		w->prev->next = w->next;
	else
		t->writers = w->next;
	if (w->next)
		w->next->prev = w->prev;
	t->nwriters--;
	if (ns) {
		ns->nwriters--;
		ns->wbytes -= w->charged;
	}
	w->charged = 0;
	if (w->cap) {
		l1_alloc_put(t->alloc, w->off, w->cap);
		t->writer_bytes -= w->cap;
		w->cap = 0;
	}
	tier_room_made(t); /* its extent freed, or published: evictable */
}

/*
 * Charges the quota of w's evict=never namespace for w growing to end
 * bytes (tier.lock held): 0, or -ENOSPC when the namespace's published
 * bytes and those of its writers would pass the quota, as on a full disk.
 */
static int wr_charge(struct tier *t, struct tier_wr *w, uint64_t end)
{
	struct tier_ns *ns = tier_ns_get(t, w->ns);

	if (!ns || end <= w->charged)
		return 0;
	if (ns->keep && ns->bytes + ns->wbytes + (end - w->charged) > ns->quota)
		return -ENOSPC;
	ns->wbytes += end - w->charged;
	w->charged = end;
	return 0;
}

static int room_wait(struct tier *t, struct tier_wr *w, uint64_t need,
		     const struct tier_wait *wait, struct timespec *dl,
		     bool *waited, unsigned *stuck);

static void ts_add_ms(struct timespec *ts, uint64_t ms);
static bool ts_before(const struct timespec *a, const struct timespec *b);

/* Whether key is taken (tier.lock held): published, or another writer's.
 * A writer its owner closed is waited for (it goes at its release), up to
 * TIER_WR_CLOSED_WAIT_MS; tier.lock is dropped meanwhile. */
static bool closed_wait(struct tier *t, uint32_t ns,
			const struct kvfs_key *key)
{
	struct timespec dl, now;
	struct tier_wr *o;
	bool timed = false;

	for (;;) {
		if (tier_idx_find(t, ns, key))
			return true;
		o = find_writer(t, ns, key, NULL);
		if (!o)
			return false;
		if (!o->closed)
			return true;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!timed) {
			timed = true;
			dl = now;
			ts_add_ms(&dl, TIER_WR_CLOSED_WAIT_MS);
		} else if (!ts_before(&now, &dl)) {
			return true;
		}
		/* writer_drop broadcasts room (tier_room_made) */
		t->room_sleepers++;
		pthread_cond_timedwait(&t->room, &t->lock, &dl);
		t->room_sleepers--;
	}
}

void tier_wr_closed(struct tier *t, struct tier_wr *w)
{
	if (!w)
		return;
	tier_lock(t);
	w->closed = true;
	tier_unlock(t);
}

int tier_wr_begin(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		  uint64_t size_hint, struct tier_wr **out)
{
	return tier_wr_begin_wait(t, ns, key, size_hint, NULL, out);
}

int tier_wr_begin_wait(struct tier *t, uint32_t ns,
		       const struct kvfs_key *key, uint64_t size_hint,
		       const struct tier_wait *wait, struct tier_wr **out)
{
	struct tier_wr *w;
	struct tier_ns *n;
	struct timespec dl;
	bool waited = false;
	unsigned stuck = 0;
	int rc = 0;

	if (size_hint > t->cfg.max_chunk)
		return -EFBIG;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->mu, NULL);
	w->ns = ns;
	if (key) {
		w->keyed = true;
		w->key = *key;
	}
	tier_lock(t);
	n = tier_ns_get(t, ns);
	if (!n) {
		rc = -ENOENT;
		goto err_unlock;
	}
	if (key && closed_wait(t, ns, key)) {
		rc = -EEXIST;
		goto err_unlock;
	}
	n = tier_ns_get(t, ns); /* tier.lock may have been dropped */
	if (!n) {
		rc = -ENOENT;
		goto err_unlock;
	}
	w->hint = size_hint ? size_hint : n->chunk_bytes ? n->chunk_bytes
							 : n->last_size;
	w->keep = n->keep;
	if (w->keep && size_hint) {
		rc = wr_charge(t, w, size_hint);
		if (rc < 0)
			goto err_unlock;
	}
	if (size_hint) {
		/* the caller's own size (a batched PUT about to copy its
		 * bytes, tier_wr_map): taken now, as bytes that arrive */
		uint64_t len = l1_alloc_round(size_hint);

		do {
			tier_l2_throttle(t, len);
			rc = tier_alloc_evict(t, len, &w->off);
		} while (rc == -ENOSPC &&
			 (rc = room_wait(t, w, len, wait, &dl, &waited,
					 &stuck)) == 0);
		/* while it slept, another writer may have taken the key */
		if (rc == 0 && waited && key &&
		    (tier_idx_find(t, ns, key) || find_writer(t, ns, key, NULL))) {
			l1_alloc_put(t->alloc, w->off, len);
			tier_room_made(t);
			rc = -EEXIST;
		}
		if (rc < 0) {
			/* (looked up again: tier.lock was dropped to wait) */
			n = tier_ns_get(t, ns);
			if (n)
				n->wbytes -= w->charged;
			goto err_unlock;
		}
		w->cap = len;
		t->writer_bytes += len;
	}
	w->seq = ++t->wr_seq;
	w->next = t->writers;
	if (t->writers)
		t->writers->prev = w;
	t->writers = w;
	t->nwriters++;
	n->nwriters++;
	tier_unlock(t);
	*out = w;
	return 0;

err_unlock:
	tier_unlock(t);
	pthread_mutex_destroy(&w->mu);
	free(w);
	return rc;
}

static void ts_add_ms(struct timespec *ts, uint64_t ms)
{
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/*
 * Writers that hold L1 and all wait for more (tier.lock held): none can
 * go on until one gives its room up, unless readers' pins go. True when
 * w is the youngest of them (the one that gives up: it has the least
 * work to lose, usually).
 */
static bool room_deadlock(const struct tier *t, const struct tier_wr *w)
{
	const struct tier_wr *o;

	if (t->pinned_bytes)
		return false; /* a reader, or an L2 write, lets go later */
	for (o = t->writers; o; o = o->next)
		if (o != w && o->cap && (!o->waiting || o->seq > w->seq))
			return false;
	return true;
}

/* The size writer o is expected to reach (tier.lock held): its
 * namespace's chunk size or last chunk's, or what it holds already. */
static uint64_t room_expect(struct tier *t, const struct tier_wr *o)
{
	const struct tier_ns *n = tier_ns_get(t, o->ns);
	uint64_t e = o->hint > o->cap ? o->hint : o->cap;

	if (n && n->last_size > e)
		e = n->last_size;
	return l1_alloc_round(e);
}

/*
 * The first extent of w (tier.lock held): the size it is expected to
 * reach, and a quarter more for a file of a sixteenth of L1 or more whose
 * namespace does not fix the size: such a file a little larger than the
 * last would grow, and while few of them fit, growing may wait for
 * writers that wait for it (the tail goes back at publication). Small
 * chunks get their size exactly, so that the extent an evicted chunk
 * frees fits the next one (l1_alloc.c).
 */
static uint64_t first_guess(struct tier *t, const struct tier_wr *w)
{
	const struct tier_ns *n = tier_ns_get(t, w->ns);
	uint64_t e = room_expect(t, w);

	if (e >= t->l1_cap / 16 && n && !n->chunk_bytes)
		e = l1_alloc_round(e + e / 4);
	return e;
}

/*
 * Before w's first extent of len bytes, under pressure (tier.lock held):
 * may it start now? Not while writers that hold L1 wait for more (then
 * less than a write's worth is free anyway), nor while the sizes other
 * writers holding L1 are expected to reach, and len, do not fit beside
 * the pinned chunks: all of them started together would fill L1
 * half-written and wait for each other (room_deadlock); w waits its turn
 * holding nothing, until one of them publishes.
 */
static bool room_admit(struct tier *t, const struct tier_wr *w, uint64_t len)
{
	uint64_t sum = t->pinned_bytes;
	const struct tier_wr *o;
	bool others = false;

	if (t->room_waiters)
		return false;
	for (o = t->writers; o; o = o->next)
		if (o != w && o->cap) {
			sum += room_expect(t, o);
			others = true;
		}
	/* with no other writer, only readers could make room: go ahead */
	return !others || (sum <= t->l1_cap && len <= t->l1_cap - sum);
}

/*
 * After -ENOSPC for need bytes of w (tier.lock held): sleeps, tier.lock
 * released, until room may have been made (tier_room_made) or a poll
 * interval passed. 0: try again. -ENOSPC: waiting cannot help (need does
 * not fit in L1 even with nothing else in it: grown in place it would
 * pass the arena's end, moved it needs its old extent too; or w is the
 * youngest of writers that all wait, twice in a row) or the bound *dl
 * passed; -EINTR: stop said so. *dl is set at the first wait (*waited).
 */
static int room_wait(struct tier *t, struct tier_wr *w, uint64_t need,
		     const struct tier_wait *wait, struct timespec *dl,
		     bool *waited, unsigned *stuck)
{
	struct timespec now, until;

	need = l1_alloc_round(need);
	if (!wait || !wait->ms || need > t->l1_cap ||
	    (w->cap && w->off > t->l1_cap - need &&
	     w->cap > t->l1_cap - need))
		return -ENOSPC;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (!*waited) {
		*waited = true;
		t->room_waits++;
		*dl = now;
		ts_add_ms(dl, wait->ms);
	} else if (!ts_before(&now, dl) ||
		   (w->cap && room_deadlock(t, w) && ++*stuck >= 2)) {
		t->room_timeouts++;
		return -ENOSPC;
	} else if (!w->cap || !room_deadlock(t, w)) {
		*stuck = 0;
	}
	if (wait->stop && wait->stop(wait->arg))
		return -EINTR;
	until = now;
	ts_add_ms(&until, TIER_WAIT_POLL_MS);
	if (ts_before(dl, &until))
		until = *dl;
	/* only writers holding L1 count as waiters: room_admit */
	if (w->cap)
		t->room_waiters++;
	t->room_sleepers++;
	w->waiting = true;
	pthread_cond_timedwait(&t->room, &t->lock, &until);
	w->waiting = false;
	t->room_sleepers--;
	if (w->cap)
		t->room_waiters--;
	return 0;
}

/*
 * Room for w's extent (w->cap > 0) to hold need bytes (tier.lock held):
 * the extent grown in place (*in_place: no copy) to want while writers
 * hold at most half of L1, else to need (growing in place costs no copy,
 * so there is no reason to take more under pressure); else a new extent
 * of want or need bytes. Evicts by policy until one of these fits.
 * -ENOSPC when pinned chunks and writers leave too little.
 */
static int grow_room(struct tier *t, struct tier_wr *w, uint64_t need,
		     uint64_t want, uint64_t *off, uint64_t *len,
		     bool *in_place)
{
	uint64_t held = t->pinned_bytes + t->writer_bytes; /* w's included */
	uint64_t extra = need - w->cap;

	if ((held > t->l1_cap || extra > t->l1_cap - held) &&
	    !tier_ra_unpin_all(t))
		return -ENOSPC;
	for (;;) {
		*in_place = true;
		*len = want;
		if (t->writer_bytes + (want - w->cap) <= t->l1_cap / 2 &&
		    !l1_alloc_extend(t->alloc, w->off, w->cap, want))
			return 0;
		*len = need;
		if (!l1_alloc_extend(t->alloc, w->off, w->cap, need))
			return 0;
		*in_place = false;
		*len = want;
		if (!l1_alloc_get(t->alloc, want, off))
			return 0;
		*len = need;
		if (!l1_alloc_get(t->alloc, need, off))
			return 0;
		/* every chunk left is pinned: readahead's may go */
		if (tier_evict_one(t) < 0 && !tier_ra_unpin_all(t))
			return -ENOSPC;
	}
}

/*
 * Makes w's extent hold at least need bytes (w->mu held): grown in place
 * when the space after it is free (grow_room), else a new extent,
 * twice the old one (at most max_chunk) so sequential writes of unknown
 * size copy O(size) bytes in all, or exactly need when that fails; the
 * bytes written so far are copied over outside tier.lock. When neither
 * fits, waits for room as wait says (room_wait). On failure the old
 * extent and its bytes are untouched.
 */
static int wr_grow(struct tier *t, struct tier_wr *w, uint64_t need,
		   const struct tier_wait *wait)
{
	uint64_t want, dbl, guess, off = 0, len = 0;
	struct timespec dl;
	bool waited = false, in_place = false;
	unsigned stuck = 0;
	int rc;

	tier_lock(t);
	do {
		/* the disk's pace, not dropped evictions */
		tier_l2_throttle(t, need);
		want = l1_alloc_round(need);
		/* the first bytes: the expected size, if guesses fit (see
		 * above), or if this writer waited its turn when they did
		 * not (room_admit) */
		guess = first_guess(t, w);
		if (w->cap || guess <= need)
			dbl = w->cap * 2;
		else if (t->writer_bytes + guess <= t->l1_cap / 2)
			dbl = guess;
		else if (!wait || !wait->ms)
			dbl = 0;
		else
			dbl = room_admit(t, w, guess) ? guess : UINT64_MAX;
		if (dbl == UINT64_MAX) {
			rc = -ENOSPC; /* waits its turn */
			continue;
		}
		dbl = l1_alloc_round(dbl);
		if (dbl > l1_alloc_round(t->cfg.max_chunk))
			dbl = l1_alloc_round(t->cfg.max_chunk);
		if (dbl > want)
			want = dbl;
		if (w->cap) {
			rc = grow_room(t, w, l1_alloc_round(need), want, &off,
				       &len, &in_place);
		} else {
			len = want;
			rc = tier_alloc_evict(t, len, &off);
			if (rc == -ENOSPC && want > l1_alloc_round(need)) {
				len = l1_alloc_round(need);
				rc = tier_alloc_evict(t, len, &off);
			}
		}
	} while (rc == -ENOSPC &&
		 (rc = room_wait(t, w, need, wait, &dl, &waited, &stuck)) == 0);
	if (rc == 0 && in_place) {
		t->writer_bytes += len - w->cap;
		w->cap = len;
	} else if (rc == 0) {
		t->writer_bytes += len;
	}
	tier_unlock(t);
	if (rc < 0 || in_place)
		return rc;
	want = len;
	rc = tier_arena_move(t, off, w->off, w->size);
	tier_lock(t);
	if (rc < 0) {
		l1_alloc_put(t->alloc, off, want);
		t->writer_bytes -= want;
	} else {
		if (w->cap) {
			l1_alloc_put(t->alloc, w->off, w->cap);
			t->writer_bytes -= w->cap;
		}
		w->off = off;
		w->cap = want;
	}
	tier_room_made(t);
	tier_unlock(t);
	return rc;
}

/* Sets w->size to at least end, growing the extent and zeroing any hole
 * between the old size and start (w->mu held). */
static int wr_extend(struct tier *t, struct tier_wr *w, uint64_t start,
		     uint64_t end, const struct tier_wait *wait)
{
	int rc;

	if (w->failed)
		return -EIO;
	if (w->keep && end > w->charged) {
		tier_lock(t);
		rc = wr_charge(t, w, end);
		tier_unlock(t);
		if (rc < 0)
			return rc;
	}
	if (end > w->cap) {
		rc = wr_grow(t, w, end, wait);
		if (rc < 0)
			return rc;
	}
	if (start > w->size) {
		rc = tier_arena_zero(t, w->off + w->size, start - w->size);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int tier_wr_pwrite(struct tier *t, struct tier_wr *w, const void *buf,
		   size_t len, uint64_t off)
{
	return tier_wr_pwrite_wait(t, w, buf, len, off, NULL);
}

int tier_wr_pwrite_wait(struct tier *t, struct tier_wr *w, const void *buf,
			size_t len, uint64_t off,
			const struct tier_wait *wait)
{
	int rc;

	if (off > t->cfg.max_chunk || len > t->cfg.max_chunk - off)
		return -EFBIG;
	if (!len)
		return 0;
	pthread_mutex_lock(&w->mu);
	rc = wr_extend(t, w, off, off + len, wait);
	if (rc == 0)
		rc = tier_arena_write(t, w->off + off, buf, len);
	if (rc == 0 && off + len > w->size)
		w->size = off + len;
	pthread_mutex_unlock(&w->mu);
	return rc;
}

long tier_wr_pread(struct tier *t, struct tier_wr *w, void *buf, size_t len,
		   uint64_t off)
{
	long n = 0;
	int rc;

	pthread_mutex_lock(&w->mu);
	if (w->failed)
		n = -EIO;
	else if (off < w->size) {
		if (len > w->size - off)
			len = (size_t)(w->size - off);
		rc = tier_arena_read(t, w->off + off, buf, len);
		n = rc < 0 ? rc : (long)len;
	}
	pthread_mutex_unlock(&w->mu);
	return n;
}

int tier_wr_truncate(struct tier *t, struct tier_wr *w, uint64_t size)
{
	int rc = 0;

	if (size > t->cfg.max_chunk)
		return -EFBIG;
	pthread_mutex_lock(&w->mu);
	if (w->failed)
		rc = -EIO;
	else if (size > w->size)
		rc = wr_extend(t, w, size, size, NULL);
	if (rc == 0)
		w->size = size;
	pthread_mutex_unlock(&w->mu);
	return rc;
}

uint64_t tier_wr_size(const struct tier_wr *w)
{
	uint64_t n;

	pthread_mutex_lock((pthread_mutex_t *)&w->mu);
	n = w->size;
	pthread_mutex_unlock((pthread_mutex_t *)&w->mu);
	return n;
}

int tier_wr_set_parent(struct tier *t, struct tier_wr *w,
		       const struct kvfs_key *parent, uint32_t depth)
{
	(void)t;
	pthread_mutex_lock(&w->mu);
	if (parent) {
		w->parent = *parent;
		w->has_parent = true;
	}
	w->depth = depth;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

void tier_wr_fail(struct tier *t, struct tier_wr *w)
{
	pthread_mutex_lock(&w->mu);
	tier_lock(t);
	if (w->cap) {
		l1_alloc_put(t->alloc, w->off, w->cap);
		t->writer_bytes -= w->cap;
		w->cap = 0;
		tier_room_made(t);
	}
	w->size = 0;
	w->failed = true;
	tier_unlock(t);
	pthread_mutex_unlock(&w->mu);
}

static void wr_free(struct tier_wr *w)
{
	pthread_mutex_destroy(&w->mu);
	free(w);
}

void tier_wr_abort(struct tier *t, struct tier_wr *w)
{
	if (!w)
		return;
	/* Waits for a pwrite still copying into the extent. */
	pthread_mutex_lock(&w->mu);
	pthread_mutex_unlock(&w->mu);
	tier_lock(t);
	writer_drop(t, w);
	t->discards++;
	tier_unlock(t);
	wr_free(w);
}

static int publish(struct tier *t, struct tier_wr *w,
		   const struct kvfs_key *key, bool keep_refused, bool replace)
{
	const struct kvfs_key *pkey;
	struct tier_rec *r, *old = NULL;
	struct tier_ns *ns;
	uint64_t keep;
	bool sync = false;
	int rc = 0;

	/* No pwrite can still be copying once we hold and drop mu; the
	 * caller gave w up, so its bytes are final from here. */
	pthread_mutex_lock(&w->mu);
	pthread_mutex_unlock(&w->mu);
	r = calloc(1, sizeof(*r));
	if (!r) {
		rc = -ENOMEM;
		goto discard;
	}
	tier_lock(t);
	ns = tier_ns_get(t, w->ns);
	if (w->keyed) {
		pkey = &w->key;
		if (key && !tier_key_eq(key, &w->key))
			rc = -EINVAL;
	} else {
		pkey = key;
		if (!key)
			rc = -EINVAL;
	}
	if (rc == 0 && !ns)
		rc = -ENOENT;
	if (rc == 0 && w->failed)
		rc = -EIO; /* tier_wr_fail: its bytes are gone */
	/* a promotion whose GET came before an unlink of the key here */
	if (rc == 0 && w->from_l3 &&
	    tier_l3_stale(t, w->ns, pkey, w->l3_forgets))
		rc = -ENOENT;
	if (rc == 0) {
		old = tier_idx_find(t, w->ns, pkey);
		/* replace: an L2 write of the old version in flight lands
		 * first (or is cancelled), so that its erasure below, made
		 * durable before we return, covers it: a daemon killed after
		 * the replacement was acknowledged must not recover the old
		 * version (tier_unlink does the same) */
		for (int waits = 0; replace && old && waits < 3 &&
		     tier_l2_wait_write(t, old); waits++) {
			sync = true;
			old = tier_idx_find(t, w->ns, pkey);
			ns = tier_ns_get(t, w->ns);
			if (!ns) {
				rc = -ENOENT;
				break;
			}
		}
		if (rc == 0 &&
		    ((old && !replace) || find_writer(t, w->ns, pkey, w)))
			rc = -EEXIST;
	}
	if (rc == 0 && ns->chunk_bytes && w->size != ns->chunk_bytes)
		rc = -EMSGSIZE;
	if (rc < 0 && keep_refused && (rc == -EEXIST || rc == -EMSGSIZE)) {
		/* refused, not failed: w is left as it was */
		tier_unlock(t);
		free(r);
		return rc;
	}
	if (rc < 0) {
		writer_drop(t, w);
		t->discards++;
		tier_unlock(t);
		goto out_free;
	}

	/* replace: the old chunk goes in the same critical section, so no
	 * reader ever finds the key missing (its readers keep its bytes) */
	if (old && tier_unlink_rec_locked(t, old))
		sync = true;
	/* Trim the over-allocation: the tail goes back to the allocator. */
	keep = l1_alloc_round(w->size);
	if (w->cap > keep)
		l1_alloc_put(t->alloc, w->off + keep, w->cap - keep);
	t->writer_bytes -= w->cap;
	w->cap = 0; /* the extent now belongs to r (writer_drop wakes the
		     * writers waiting for room: r is evictable) */
	r->key = *pkey;
	r->ns = w->ns;
	r->size = w->size;
	if (w->has_sum) /* tier_wr_set_checksum: computed by the writer */
		r->checksum = w->sum;
	else
		r->flags |= TREC_NOSUM; /* tier_checksum computes it if asked */
	r->gen = ++t->gen;
	r->l1_off = keep ? w->off : 0;
	r->l1_pages = (uint32_t)(keep / L1_ALIGN);
	r->where = TIER_L1;
	r->pi.hkey = hashkey_index(w->ns, pkey);
	r->pi.depth = w->depth;
	r->pi.atime = ++t->clock;
	r->atime_ns = tier_now_ns();
	r->ptime_s = (uint32_t)(r->atime_ns / 1000000000ULL);
	/* not yet read: atime = mtime (relatime shows the first read) */
	r->atime_ns = (uint64_t)r->ptime_s * 1000000000ULL;
	if (w->has_parent && !tier_key_eq(&w->parent, pkey)) {
		r->parent = w->parent;
		r->flags |= TREC_HAS_PARENT;
		tier_ra_link(t, w->ns, &w->parent, pkey);
	}
	tier_idx_insert(t, ns, r);
	if (!w->from_l3)
		tier_ra_published(t, r);
	tier_ev(t, r, TIER_EV_STORED, TIER_L1,
		w->from_l3 ? TIER_EV_PROMOTE : TIER_EV_PUBLISH);
	t->l1_bytes += keep;
	t->l1_chunks++;
	t->pops->insert(t->pol, &r->pi);
	tier_count_parent(t, r);
	ns->last_size = w->size;
	t->publishes++;
	if (!w->from_l3)
		t->bytes_in += w->size;
	tier_l2_on_publish(t, r); /* ingest=all */
	if (w->from_l3)
		r->l3 = TL3_IN; /* L3 has it: never written back */
	else
		tier_l3_on_publish(t, r); /* l3_ingest=all */
	writer_drop(t, w);
	tier_policy_capacity(t);
	tier_unlock(t);
	tier_wait_wake(t, w->ns, pkey); /* w and pkey live until wr_free */
	wr_free(w);
	if (sync)
		tier_l2_sync_frees(t);
	return 0;

discard:
	tier_lock(t);
	writer_drop(t, w);
	t->discards++;
	tier_unlock(t);
out_free:
	free(r);
	wr_free(w);
	return rc;
}

int tier_wr_publish(struct tier *t, struct tier_wr *w,
		    const struct kvfs_key *key)
{
	return publish(t, w, key, false, false);
}

int tier_wr_publish_or_keep(struct tier *t, struct tier_wr *w,
			    const struct kvfs_key *key)
{
	return publish(t, w, key, true, false);
}

int tier_wr_publish_replace(struct tier *t, struct tier_wr *w,
			    const struct kvfs_key *key)
{
	return publish(t, w, key, false, true);
}
