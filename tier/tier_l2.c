/*
 * tier_l2.c - the engine's side of L2 (tier/l2/l2.h): the hooks the core
 * calls through struct tier_l2_ops (tier_i.h, "L2 hooks"), the callbacks of the L2 log (recovery into the
 * index, reclaim verdicts, moves), and open/close. Demotion is in
 * tier_l2_demote.c, promotion and prefetch in tier_l2_promote.c; the
 * states of a record and the threads are described in tier_l2_i.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "hash/hashkey.h"
#include "tier/record/codec.h"
#include "tier/tier_l2_i.h"

/*
 * Memory the L2 path may hold beyond L1 (see "Memory" in kvfs-mount(8)):
 * copies of evicted chunks waiting to be compressed (raw_max), and built
 * records waiting for the disk (the l2 append queue, l2_config.max_queue):
 * l1_size/4 (at least 4 chunks of max_chunk) and l1_size/8 (at least 2
 * records), so that what waits for the disk scales with the cache instead
 * of 512 + 256 MiB whatever l1_size is. Writers wait for room in the raw
 * queue before they evict (tier_l2_throttle; an eviction that still finds
 * it full drops the chunk, counted in l2 errors); a full append queue
 * makes the demoter wait.
 */
static uint64_t queue_cap(const struct tier *t, unsigned int div,
			  uint64_t min)
{
	uint64_t v = t->l1_cap / div;

	return v > min ? v : min;
}

/* ------------------------------------------------------------- hooks */

static bool tl2_evicting(struct tier *t, struct tier_rec *r)
{
	struct tier_l2 *t2 = t->l2;
	void *raw = NULL;

	if (!t2 || !t2->l2)
		return false;
	if (r->flags & TREC_L2)
		return true; /* a clean copy is on disk already */
	if (r->flags & TREC_L2W)
		return false; /* cannot happen: the job pins r */
	/* (an evict=never chunk goes to L2 whatever ingest says) */
	if (!tl2_keeps(t, r) && t->cfg.ingest == TIER_INGEST_HOT &&
	    r->hits < t2->hot_hits)
		return false;
	if (!tl2_keeps(t, r) && t->cfg.ingest == TIER_INGEST_TWICE &&
	    !r->hits && !seen2_twice(&t2->seen, r->pi.hkey))
		return false; /* a first sight: not worth a disk write */
	if (t2->raw_queued + r->size > t2->raw_max) {
		t2->errors++;
		return false;
	}
	/* Copy the bytes out now (a memcpy under tier.lock), compress them
	 * later on the demoter, outside it: the caller needs the space. */
	if (r->size) {
		raw = malloc(r->size);
		if (!raw)
			return false;
		if (tier_arena_read(t, r->l1_off, raw, r->size)) {
			free(raw);
			return false;
		}
	} else {
		raw = malloc(1);
		if (!raw)
			return false;
	}
	if (tl2_queue_write(t, r, raw)) {
		free(raw);
		return false;
	}
	return true;
}

static void tl2_on_publish(struct tier *t, struct tier_rec *r)
{
	struct tier_l2 *t2 = t->l2;

	if (t2 && t->cfg.ingest == TIER_INGEST_TWICE)
		seen2_note(&t2->seen, r->pi.hkey);
	if (!t2 || !t2->l2 || t->cfg.ingest != TIER_INGEST_ALL)
		return;
	/* the job pins the chunk until it is written: bounded so writers
	 * always keep three quarters of L1 */
	if (t2->l1_queued && t2->l1_queued + r->size > t->l1_cap / 4) {
		t2->rescan = true; /* the demoter comes back for it */
		return;
	}
	tl2_queue_write(t, r, NULL);
}

static void tl2_on_hit(struct tier *t, struct tier_rec *r)
{
	struct tier_l2 *t2 = t->l2;

	if (!t2 || !t2->l2 || t->cfg.ingest != TIER_INGEST_HOT ||
	    r->where != TIER_L1 || (r->flags & (TREC_L2 | TREC_L2W)) ||
	    r->hits < t2->hot_hits || t2->l1_queued + r->size > t->l1_cap / 4)
		return;
	tl2_queue_write(t, r, NULL);
}

static bool tl2_forget(struct tier *t, struct tier_rec *r)
{
	struct tier_l2 *t2 = t->l2;
	struct tl2_loc l;

	if (!t2 || !(r->flags & TREC_L2))
		return false;
	loc_get(r, &l);
	if (t2->l2)
		l2_free(t2->l2, &l.loc);
	r->flags &= (uint8_t)~TREC_L2;
	return t2->l2 != NULL;
}

/* How long an unlink waits for an L2 write of its chunk, and for the
 * erasure of its record. */
#define TL2_UNLINK_WAIT_MS 2000

/* Takes r's L2 write job off the demoter's queue if it has not started:
 * nothing was written, nothing needs erasing. True when it did. */
static bool cancel_queued(struct tier *t, struct tier_rec *r)
{
	struct tier_l2 *t2 = t->l2;
	struct tl2_job *job = job_of(r);

	if (!tl2_queue_take(t2, job))
		return false; /* the demoter has it: being written */
	r->flags &= (uint8_t)~TREC_L2W;
	memset(r->l2.b, 0, sizeof(r->l2.b));
	job->finished = true;
	if (job->raw)
		t2->raw_queued -= job->size;
	else
		t2->l1_queued -= job->size;
	if (!job->readers) { /* else the last promotion copying frees it */
		free(job->raw);
		free(job);
	}
	tier_unref(t, r); /* the job's pin; r stays indexed */
	pthread_cond_broadcast(&t2->cond); /* the demoter's tl2_rescan */
	return true;
}

/* The longest a writer waits for the demoter (tier_l2_throttle). */
#define TL2_THROTTLE_MS 5000

static void tl2_throttle(struct tier *t, uint64_t need)
{
	struct tier_l2 *t2 = t->l2;
	struct timespec dl;

	/* at half the bound: an eviction may free more than need (a
	 * fragmented arena), and only the bound itself drops chunks */
	if (!t2 || !t2->l2 || t2->raw_queued + need <= t2->raw_max / 2)
		return;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += TL2_THROTTLE_MS / 1000;
	/* each finished demotion broadcasts t2->cond */
	while (t2->raw_queued && t2->raw_queued + need > t2->raw_max / 2 &&
	       pthread_cond_timedwait(&t2->cond, &t->lock, &dl) != ETIMEDOUT)
		;
}

static bool tl2_wait_write(struct tier *t, struct tier_rec *r)
{
	struct tier_l2 *t2 = t->l2;
	struct timespec dl;

	if (!t2 || !(r->flags & TREC_L2W) || (r->flags & TREC_ZOMBIE))
		return false;
	if (cancel_queued(t, r))
		return false;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += TL2_UNLINK_WAIT_MS / 1000;
	tier_ref(t, r);
	while ((r->flags & TREC_L2W) && !(r->flags & TREC_ZOMBIE) &&
	       pthread_cond_timedwait(&t2->cond, &t->lock, &dl) != ETIMEDOUT)
		;
	tier_unref(t, r);
	return true;
}

static void tl2_sync_frees(struct tier *t)
{
	if (t->l2 && t->l2->l2)
		l2_sync_frees(t->l2->l2, TL2_UNLINK_WAIT_MS);
}

/* --------------------------------------------------- log callbacks */

/* A chunk recovered by scanning, for readahead's order of writing
 * (tier.lock held; t->ra_scanned). Without memory: not learned. */
static void scanned_add(struct tier *t, uint32_t ns,
			const struct kvfs_key *key)
{
	if (t->ra_scanned_n == t->ra_scanned_cap) {
		size_t cap = t->ra_scanned_cap ? 2 * t->ra_scanned_cap : 1024;
		struct tier_ra_scanned *v = realloc(t->ra_scanned,
						    cap * sizeof(*v));

		if (!v)
			return;
		t->ra_scanned = v;
		t->ra_scanned_cap = cap;
	}
	t->ra_scanned[t->ra_scanned_n].ns = ns;
	t->ra_scanned[t->ra_scanned_n++].key = *key;
}

static int on_recover(void *arg, const struct l2_rec_info *ri)
{
	struct tier *t = arg;
	struct tier_rec *r;
	struct tier_ns *ns;
	uint32_t id;
	int rc;

	if (ri->raw_len > t->cfg.max_chunk)
		return -EFBIG;
	rc = tier_ns_find(t, ri->ns, &id);
	if (rc == -ENOENT)
		rc = tier_ns_create(t, ri->ns, &id);
	if (rc)
		return rc;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	tier_lock(t);
	ns = tier_ns_get(t, id);
	if (!ns || tier_idx_find(t, id, &ri->key)) {
		tier_unlock(t);
		free(r);
		return -EEXIST;
	}
	r->key = ri->key;
	r->ns = id;
	r->size = ri->raw_len;
	r->checksum = ri->raw_sum;
	r->gen = ++t->gen;
	r->where = TIER_L2;
	r->flags = TREC_L2;
	loc_set(r, &ri->loc, ri->stored_len);
	/* the chain link the record kept (readahead relinks at its open;
	 * the prefix policy counts the child once it is in L1 again) */
	if (ri->has_parent && !tier_key_eq(&ri->parent, &ri->key)) {
		r->parent = ri->parent;
		r->flags |= TREC_HAS_PARENT;
	}
	r->pi.depth = ri->depth;
	r->pi.hkey = hashkey_index(id, &ri->key);
	r->pi.atime = ++t->clock;
	r->atime_ns = tier_now_ns();
	r->ptime_s = (uint32_t)(r->atime_ns / 1000000000ULL);
	/* not yet read: atime = mtime (relatime shows the first read) */
	r->atime_ns = (uint64_t)r->ptime_s * 1000000000ULL;
	tier_idx_insert(t, ns, r);
	if (ns->last_size < ri->raw_len)
		ns->last_size = ri->raw_len;
	if (ri->scanned && !(r->flags & TREC_HAS_PARENT))
		scanned_add(t, id, &ri->key);
	tier_unlock(t);
	return 0;
}

static void tl2_order_changed(struct tier *t)
{
	if (t->l2)
		l2_ckpt_dirty(t->l2->l2);
}

static void tl2_link_learned(struct tier *t, struct tier_rec *r)
{
	struct tier_l2 *t2 = t->l2;
	struct tl2_loc l;

	if (!t2 || !t2->l2 || !(r->flags & TREC_L2))
		return;
	loc_get(r, &l);
	l2_set_link(t2->l2, &l.loc, (r->flags & TREC_HAS_PARENT) ?
		    &r->parent : NULL, r->pi.depth);
}

static void tl2_ahead_thread(void)
{
	l2_read_alone(true);
}

/* The engine's part of each checkpoint: readahead's learned order. */
static void *on_ckpt_save(void *arg, size_t *len, uint32_t *count)
{
	struct tier *t = arg;
	void *blob;

	tier_lock(t);
	blob = tier_ra_save(t, len, count);
	tier_unlock(t);
	return blob;
}

/* The order the loaded checkpoint kept: readahead takes it at its open
 * (after L2's), until then it waits in t->ra_saved. */
static void on_ckpt_load(void *arg, const void *blob, size_t len,
			 uint32_t count)
{
	struct tier *t = arg;
	void *copy = malloc(len);

	if (!copy)
		return;
	memcpy(copy, blob, len);
	tier_lock(t);
	free(t->ra_saved);
	t->ra_saved = copy;
	t->ra_saved_len = len;
	t->ra_saved_count = count;
	tier_unlock(t);
}

/* Takes tier.lock and returns the record whose L2 copy is ri, or NULL
 * (not our entry: a newer copy, or gone); the lock is held either way. */
static struct tier_rec *lock_entry(struct tier *t,
				   const struct l2_rec_info *ri)
{
	struct tier_rec *r = NULL;
	uint32_t id;
	bool known = tier_ns_find(t, ri->ns, &id) == 0;

	tier_lock(t);
	if (known)
		r = tier_idx_find(t, id, &ri->key);
	return r && rec_loc_is(r, &ri->loc) ? r : NULL;
}

static enum l2_reclaim_verdict on_reclaim(void *arg,
					  const struct l2_rec_info *ri,
					  bool may_keep)
{
	struct tier *t = arg;
	struct tier_rec *r = lock_entry(t, ri);
	bool hot;

	if (!r) {
		tier_unlock(t);
		return L2_DROP;
	}
	/* hot: in use, or read since this copy was written or last moved
	 * (hotness decays: a chunk read long ago is not carried forward
	 * at every reclaim) */
	hot = r->pi.refs > 0 || (r->flags & TREC_PROMO) || r->l2_heat > 0 ||
	      tl2_keeps(t, r);
	if (hot && may_keep) {
		tier_unlock(t);
		return L2_KEEP;
	}
	if (r->where == TIER_L1)
		r->flags &= (uint8_t)~TREC_L2; /* L1 still has it */
	else
		tl2_drop_l2_only(t, r, TIER_GONE_DROPPED);
	tier_unlock(t);
	return L2_DROP;
}

/* Pinned and only in L2 (see l2_config.pinned): a lease or a reader needs
 * these bytes and there is no other copy. */
static bool on_pinned(void *arg, const struct l2_rec_info *ri)
{
	struct tier *t = arg;
	struct tier_rec *r = lock_entry(t, ri);
	bool pinned = false;

	if (r && r->where == TIER_L2)
		pinned = r->pi.refs > 0 || (r->flags & TREC_PROMO) ||
			 tl2_keeps(t, r);
	tier_unlock(t);
	return pinned;
}

static bool on_moved(void *arg, const struct l2_rec_info *ri,
		     const struct l2_loc *to)
{
	struct tier *t = arg;
	struct tier_rec *r = lock_entry(t, ri);
	bool matched = false;

	if (r) {
		matched = true;
		if (to) {
			loc_set(r, to, ri->stored_len);
			/* kept once for hotness: must be read again (a
			 * compaction keeps everything, hot or not) */
			if (!ri->compacted)
				r->l2_heat = 0;
		} else if (r->where == TIER_L1)
			r->flags &= (uint8_t)~TREC_L2;
		else
			tl2_drop_l2_only(t, r, TIER_GONE_DROPPED);
	}
	tier_unlock(t);
	return matched;
}

static void on_log(void *arg, const char *msg)
{
	struct tier *t = arg;

	if (t->cfg.log)
		t->cfg.log(t->cfg.log_arg, msg);
}

/* ------------------------------------------------------ open, close */

/* l2_size 0: half of the free space of l2_dir's filesystem, and at least
 * what the checks of tier_l2_open need (4 records of max_chunk, and 256
 * MiB), so that the default always passes them; the free space itself
 * is checked there. */
static uint64_t default_size(const struct statvfs *sv, uint64_t need)
{
	uint64_t f = (uint64_t)sv->f_bavail * sv->f_frsize / 2, v = 256ull << 20;

	if (v < 4 * need)
		v = 4 * need;
	return f > v ? f : v;
}

/* Leaves L2 disabled (t->l2 set, t->l2->l2 NULL) with the reason logged
 * and counted in l2_errors: kvfs keeps serving from L1. */
static int l2_disable(struct tier *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int l2_disable(struct tier *t, const char *fmt, ...)
{
	struct tier_l2 *t2 = calloc(1, sizeof(*t2));
	pthread_condattr_t ca;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tier_log(t, "%s; L2 disabled, serving from L1 only", msg);
	if (!t2)
		return 0; /* no error counter, but still serving */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t2->cond, &ca);
	pthread_condattr_destroy(&ca);
	t2->errors = 1;
	t->l2 = t2;
	return 0;
}

int tier_l2_open(struct tier *t, char *err, size_t errlen)
{
	const struct tier_config *cfg = &t->cfg;
	struct l2_config lc = { 0 };
	struct tier_l2 *t2;
	pthread_condattr_t ca;
	struct statvfs sv;
	uint64_t need;
	int rc;

	if (!cfg->l2_dir)
		return 0;
	if (cfg->compress_level < 0 || cfg->compress_level > CODEC_LEVEL_MAX) {
		snprintf(err, errlen, "compress level %d out of range (1..%d, or "
			 "none)", cfg->compress_level, CODEC_LEVEL_MAX);
		return -EINVAL;
	}
	if (!codec_shuffle_ok(cfg->shuffle)) {
		snprintf(err, errlen, "shuffle %d: must be 0, 2 or 4",
			 cfg->shuffle);
		return -EINVAL;
	}
	if (cfg->ingest != TIER_INGEST_EVICTED && cfg->ingest != TIER_INGEST_ALL &&
	    cfg->ingest != TIER_INGEST_HOT && cfg->ingest != TIER_INGEST_TWICE) {
		snprintf(err, errlen, "ingest %d: unknown", (int)cfg->ingest);
		return -EINVAL;
	}
	lc.dir = cfg->l2_dir;
	/* a segment holds at least one chunk of max_chunk, and l2 keeps at
	 * least four segments */
	need = l2_record_bytes(cfg->max_chunk);
	if (statvfs(cfg->l2_dir, &sv))
		/* missing, not a directory, unreadable: say that, not
		 * something about sizes */
		return l2_disable(t, "l2_dir %s: %s", cfg->l2_dir,
				  strerror(errno));
	lc.size = cfg->l2_size ? cfg->l2_size : default_size(&sv, need);
	if (lc.size / 4 < need && cfg->l2_size) {
		/* the user's own l2_size: a clear error is the right answer */
		snprintf(err, errlen, "l2_size %" PRIu64 " is too small for "
			 "chunks of max_chunk %" PRIu64 ": it must hold 4 of "
			 "them (l2_size >= %" PRIu64 "), or lower max_chunk",
			 lc.size, cfg->max_chunk, 4 * need);
		return -EINVAL;
	}
	if (!cfg->l2_size &&
	    (uint64_t)sv.f_bavail * sv.f_frsize < 4 * need)
		/* Not room for 4 chunks of max_chunk on that filesystem: an
		 * L2 problem, not a reason to refuse the mount. */
		return l2_disable(t, "l2_dir %s: its filesystem has %" PRIu64
				  " bytes free, fewer than 4 chunks of "
				  "max_chunk %" PRIu64 " need (%" PRIu64 "); "
				  "free space there, give l2_size= or lower "
				  "max_chunk", cfg->l2_dir,
				  (uint64_t)sv.f_bavail * sv.f_frsize,
				  cfg->max_chunk, 4 * need);
	lc.seg_size = need > L2_SEG_SIZE_DEFAULT ? need : L2_SEG_SIZE_DEFAULT;
	lc.max_queue = queue_cap(t, 8, 2 * need);
	lc.checkpoint_s = cfg->l2_checkpoint_s;
	lc.log = on_log;
	lc.log_arg = t;
	lc.recover = on_recover;
	lc.reclaim = on_reclaim;
	lc.pinned = on_pinned;
	lc.moved = on_moved;
	lc.ckpt_save = on_ckpt_save;
	lc.ckpt_load = on_ckpt_load;
	lc.cb_arg = t;

	t2 = calloc(1, sizeof(*t2));
	if (!t2) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t2->cond, &ca);
	pthread_condattr_destroy(&ca);
	t2->level = cfg->compress_level;
	t2->size = lc.size;
	t2->raw_max = queue_cap(t, 4, 4 * cfg->max_chunk);
	t2->hot_hits = cfg->hot_hits ? cfg->hot_hits : 1;
	/* ingest=twice remembers keys for 1-2 L2-fulls of 256 KiB chunks
	 * (at least 4096): 8 bytes per key (seen.h) */
	if (cfg->ingest == TIER_INGEST_TWICE &&
	    seen2_init(&t2->seen, lc.size / (256 << 10) > 4096 ?
		       lc.size / (256 << 10) : 4096)) {
		pthread_cond_destroy(&t2->cond);
		free(t2);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	t->l2 = t2;

	rc = l2_open(&lc, &t2->l2, err, errlen);
	if (rc == -EBUSY || rc == -EINVAL) {
		t->l2 = NULL;
		pthread_cond_destroy(&t2->cond);
		seen2_free(&t2->seen);
		free(t2);
		return rc;
	}
	if (rc) {
		/* kvfs keeps serving from L1; stats count the error. Chunks
		 * recovered before the failure (io_uring or threads failed
		 * after the scan) cannot be read: forget them. */
		struct htab_node *e, *nx;
		uint64_t bkt;

		tier_lock(t);
		htab_for_each_safe(&t->idx, bkt, e, nx) {
			struct tier_rec *r = idx_rec(e);

			if (r->where == TIER_L2) {
				tier_idx_remove(t, r);
				free(r);
			}
		}
		tier_unlock(t);
		tier_log(t, "%s; L2 disabled, serving from L1 only", err);
		err[0] = 0;
		t2->l2 = NULL;
		t2->errors++;
		return 0;
	}
	if (pthread_create(&t2->demoter, NULL, tl2_demoter_main, t))
		goto no_threads;
	for (int i = 0; i < TL2_PREFETCHERS; i++) {
		if (pthread_create(&t2->prefetcher[i], NULL, tl2_prefetcher_main, t)) {
			tier_lock(t);
			t2->stop = true;
			pthread_cond_broadcast(&t2->cond);
			tier_unlock(t);
			pthread_join(t2->demoter, NULL);
			while (i-- > 0)
				pthread_join(t2->prefetcher[i], NULL);
			goto no_threads;
		}
	}
	t2->threads = true;
	return 0;
no_threads:
	l2_close(t2->l2);
	t->l2 = NULL;
	pthread_cond_destroy(&t2->cond);
	seen2_free(&t2->seen);
	free(t2);
	snprintf(err, errlen, "l2: cannot start threads");
	return -ENOMEM;
}

void tier_l2_close(struct tier *t)
{
	struct tier_l2 *t2 = t->l2;

	if (!t2)
		return;
	if (t2->l2 && t2->threads && t->cfg.flush_on_exit) {
		/* every L1 chunk without an L2 copy is written before exit */
		struct htab_node *e, *nx;
		uint64_t bkt;

		tier_lock(t);
		htab_for_each_safe(&t->idx, bkt, e, nx) {
			struct tier_rec *r = idx_rec(e);

			if (r->where == TIER_L1 &&
			    !(r->flags & (TREC_L2 | TREC_L2W)))
				tl2_queue_write(t, r, NULL);
		}
		tier_unlock(t);
	}
	if (t2->threads) {
		tier_lock(t);
		t2->stop = true;
		pthread_cond_broadcast(&t2->cond);
		tier_unlock(t);
		pthread_join(t2->demoter, NULL);
		for (int i = 0; i < TL2_PREFETCHERS; i++)
			pthread_join(t2->prefetcher[i], NULL);
	}
	/* waits for the appends in flight; their callbacks still run */
	l2_close(t2->l2);
	while (t2->pf_head) {
		struct tl2_pf *p = t2->pf_head;

		t2->pf_head = p->next;
		free(p);
	}
	t->l2 = NULL;
	pthread_cond_destroy(&t2->cond);
	seen2_free(&t2->seen);
	free(t2);
}

static uint64_t tl2_capacity(struct tier *t)
{
	struct l2_stats ls;

	if (!t->l2 || !t->l2->l2)
		return 0;
	l2_get_stats(t->l2->l2, &ls);
	return ls.capacity;
}

/* Whether L2 is full (tier_l2_full): the disk under it filled up (its
 * capacity was cut below l2_size: a degraded log, not a cache that is
 * merely at its size), and need more bytes written would make it drop
 * live records: its live records and the writes waiting (raw and built),
 * need included, fill more than half that capacity after a reclaim has
 * dropped records since it opened (not only compacted), or reach the
 * point where a reclaim starts (a quarter segment short of the capacity
 * less the moves' reserve: there is nothing to compact). An L2 at
 * l2_size with the disk not full is a cache at its size, where dropping
 * the oldest is the policy's work: not full here. */
static bool tl2_full(struct tier *t, uint64_t need)
{
	struct tier_l2 *t2 = t->l2;
	struct l2_stats ls;
	uint64_t live;

	if (!t2 || !t2->l2)
		return false;
	l2_get_stats(t2->l2, &ls);
	if (ls.capacity >= t2->size)
		return false;
	live = ls.bytes + ls.queued_bytes + t2->raw_queued + need;
	if (ls.reclaims > ls.compactions && live > ls.capacity / 2)
		return true;
	return live + ls.seg_target / 4 + ls.reserve > ls.capacity;
}

static void tl2_stats(struct tier *t, struct tier_stats *st)
{
	struct tier_l2 *t2 = t->l2;
	struct l2_stats ls;

	if (!t2)
		return;
	st->l2_errors = t2->errors;
	st->l2_sync_writes = t2->sync_writes;
	if (!t2->l2)
		return;
	l2_get_stats(t2->l2, &ls);
	st->l2_capacity = ls.capacity;
	st->l2_bytes = ls.bytes;
	st->l2_raw_bytes = ls.raw_bytes;
	st->l2_chunks = ls.records;
	st->l2_reads = ls.reads;
	st->l2_writes = ls.writes;
	st->l2_reclaims = ls.reclaims;
	st->l2_compactions = ls.compactions;
	st->l2_write_bytes = ls.write_bytes;
	st->l2_moved_bytes = ls.moved_bytes;
	st->l2_corrupt = ls.corrupt;
	st->l2_errors += ls.errors;
	st->l2_recover_ckpt = ls.recover_ckpt;
	st->l2_recover_ns = ls.recover_ns;
	st->l2_recover_ckpt_records = ls.recover_ckpt_records;
	st->l2_recover_scan_records = ls.recover_scan_records;
	st->l2_recover_scan_bytes = ls.recover_scan_bytes;
	st->l2_checkpoints = ls.checkpoints;
	st->l2_ckpt_errors = ls.ckpt_errors;
	st->l2_ckpt_records = ls.ckpt_records;
	st->l2_ckpt_write_ns = ls.ckpt_write_ns;
	st->l2_syncs = ls.syncs;
}

/* What the core calls through the tier_l2_* hooks of tier_i.h (tier_create
 * sets t->l2ops before it opens the store; each does nothing while the store
 * is not open). */
const struct tier_l2_ops tier_l2_hooks = {
	.evicting = tl2_evicting,
	.throttle = tl2_throttle,
	.fill = tl2_fill,
	.on_publish = tl2_on_publish,
	.on_hit = tl2_on_hit,
	.forget = tl2_forget,
	.wait_write = tl2_wait_write,
	.sync_frees = tl2_sync_frees,
	.sync = tl2_sync,
	.prefetch = tl2_prefetch,
	.prefetch_bytes = tl2_prefetch_bytes,
	.pin_promote = tl2_pin_promote,
	.stats = tl2_stats,
	.capacity = tl2_capacity,
	.full = tl2_full,
	.order_changed = tl2_order_changed,
	.ahead_thread = tl2_ahead_thread,
	.link_learned = tl2_link_learned,
};
