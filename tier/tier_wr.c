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
	if (ns)
		ns->nwriters--;
	if (w->cap) {
		l1_alloc_put(t->alloc, w->off, w->cap);
		t->writer_bytes -= w->cap;
		w->cap = 0;
	}
}

int tier_wr_begin(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		  uint64_t size_hint, struct tier_wr **out)
{
	struct tier_wr *w;
	struct tier_ns *n;
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
	if (key && (tier_idx_find(t, ns, key) ||
		    find_writer(t, ns, key, NULL))) {
		rc = -EEXIST;
		goto err_unlock;
	}
	w->hint = size_hint ? size_hint : n->chunk_bytes ? n->chunk_bytes
							 : n->last_size;
	if (size_hint) {
		/* the caller's own size (a batched PUT about to copy its
		 * bytes, tier_wr_map): taken now, as bytes that arrive */
		uint64_t len = l1_alloc_round(size_hint);

		tier_l2_throttle(t, len);
		rc = tier_alloc_evict(t, len, &w->off);
		if (rc < 0)
			goto err_unlock;
		w->cap = len;
		t->writer_bytes += len;
	}
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

/*
 * Makes w's extent hold at least need bytes (w->mu held): a new extent,
 * twice the old one (at most max_chunk) so sequential writes of unknown
 * size copy O(size) bytes in all, or exactly need when that fails; the
 * bytes written so far are copied over outside tier.lock. On failure the
 * old extent and its bytes are untouched.
 */
static int wr_grow(struct tier *t, struct tier_wr *w, uint64_t need)
{
	uint64_t want = l1_alloc_round(need), dbl, off;
	int rc;

	tier_lock(t);
	tier_l2_throttle(t, need); /* the disk's pace, not dropped evictions */
	/* the first bytes: the expected size, if guesses fit (see above) */
	dbl = !w->cap && w->hint > need &&
	      t->writer_bytes + w->hint <= t->l1_cap / 2 ? w->hint : w->cap * 2;
	dbl = l1_alloc_round(dbl);
	if (dbl > l1_alloc_round(t->cfg.max_chunk))
		dbl = l1_alloc_round(t->cfg.max_chunk);
	if (dbl > want)
		want = dbl;
	rc = tier_alloc_evict(t, want, &off);
	if (rc == -ENOSPC && want > l1_alloc_round(need)) {
		want = l1_alloc_round(need);
		rc = tier_alloc_evict(t, want, &off);
	}
	if (rc == 0)
		t->writer_bytes += want;
	tier_unlock(t);
	if (rc < 0)
		return rc;
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
	tier_unlock(t);
	return rc;
}

/* Sets w->size to at least end, growing the extent and zeroing any hole
 * between the old size and start (w->mu held). */
static int wr_extend(struct tier *t, struct tier_wr *w, uint64_t start,
		     uint64_t end)
{
	int rc;

	if (end > w->cap) {
		rc = wr_grow(t, w, end);
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
	int rc;

	if (off > t->cfg.max_chunk || len > t->cfg.max_chunk - off)
		return -EFBIG;
	if (!len)
		return 0;
	pthread_mutex_lock(&w->mu);
	rc = wr_extend(t, w, off, off + len);
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
	if (off < w->size) {
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
	if (size > w->size)
		rc = wr_extend(t, w, size, size);
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
	if (rc == 0) {
		old = tier_idx_find(t, w->ns, pkey);
		if ((old && !replace) || find_writer(t, w->ns, pkey, w))
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
	if (old)
		sync = tier_unlink_rec_locked(t, old);
	/* Trim the over-allocation: the tail goes back to the allocator. */
	keep = l1_alloc_round(w->size);
	if (w->cap > keep)
		l1_alloc_put(t->alloc, w->off + keep, w->cap - keep);
	t->writer_bytes -= w->cap;
	w->cap = 0; /* the extent now belongs to r */
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
