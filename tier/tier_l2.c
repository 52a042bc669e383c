/*
 * tier_l2.c - the engine's L2 parts: demotion, ingestion, promotion,
 * prefetch, recovery into the index, and the callbacks of the L2 log
 * (tier/l2.h). tier.c and tier_wr.c call in through small hooks (tier_i.h,
 * "L2 hooks"); everything about L2 lives here.
 *
 * A published chunk (struct tier_rec) and L2:
 *   where == L1, no flag          only in L1;
 *   where == L1, TREC_L2          in L1 with a valid L2 copy at r->l2;
 *   where == L2, TREC_L2          only in L2 (r->l2 is its location);
 *   TREC_L2W                      an L2 write is in flight: r->l2 holds the
 *                                 job (struct tl2_job *), the job pins r;
 *                                 with where == L2 (a demotion) the job
 *                                 holds the only copy of the bytes, and
 *                                 readers copy from it;
 *   TREC_PROMO                    a promotion is reading it (others wait).
 *
 * Threads: a demoter (compresses and appends, outside tier.lock) and a
 * prefetcher (promotes what tier_lookup asked for). Both wait on
 * tier_l2.cond with tier.lock. The log's callbacks run on its threads
 * without its locks and take tier.lock (order: tier.lock -> l2 locks).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "hash/hashkey.h"
#include "tier/codec.h"
#include "tier/l2.h"
#include "tier/tier_i.h"

/*
 * Memory the L2 path may hold beyond L1 (see "Memory" in kvfs-mount(8)):
 * copies of evicted chunks waiting to be compressed (raw_max), and built
 * records waiting for the disk (the l2 append queue, l2_config.max_queue):
 * l1_size/4 (at least 4 chunks of max_chunk) and l1_size/8 (at least 2
 * records), so that what waits for the disk scales with the cache instead
 * of 512 + 256 MiB whatever l1_size is. A full raw queue drops the evicted
 * chunk (as before, counted in l2 errors: the disk is not keeping up); a
 * full append queue makes the demoter wait.
 */
static uint64_t queue_cap(const struct tier *t, unsigned int div,
			  uint64_t min)
{
	uint64_t v = t->l1_cap / div;

	return v > min ? v : min;
}

#define TL2_MAX_PREFETCH 4096
/* Promotions ahead of readers run two at a time: one reads the disk while
 * the other decodes. */
#define TL2_PREFETCHERS 2

struct tl2_job {
	struct tl2_job *next;
	struct tier *t;
	struct tier_rec *r;   /* pinned by the job */
	void *raw;            /* the bytes of an evicted chunk, or NULL: read
			       * them from r's (pinned) L1 extent */
	uint64_t size;
	char ns[KVFS_NS_NAME_MAX + 1];
	struct kvfs_key key;
	int shuffle;
	unsigned readers;     /* tier.lock: promotions copying raw */
	bool finished;        /* tier.lock */
};

struct tl2_pf {
	struct tl2_pf *next;
	uint32_t ns;
	struct kvfs_key key;
	uint64_t size;
};

struct tier_l2 {
	struct l2 *l2;         /* NULL when L2 failed to open (disabled) */
	pthread_cond_t cond;   /* with tier.lock: queues, promotions */
	struct tl2_job *head, *tail;  /* tier.lock: demoter queue */
	struct tl2_pf *pf_head, *pf_tail; /* tier.lock: prefetch queue */
	uint64_t npf;          /* tier.lock */
	uint64_t pf_bytes;     /* tier.lock: bytes of the queued prefetches */
	uint64_t raw_queued;   /* tier.lock: bytes of job copies */
	uint64_t raw_max;      /* bound of raw_queued (queue_cap) */
	uint64_t l1_queued;    /* tier.lock: L1 bytes pinned by ingest jobs */
	uint64_t errors;       /* tier.lock: open failure, dropped demotions */
	bool stop;             /* tier.lock */
	bool rescan;           /* tier.lock: ingest=all skipped a chunk */
	bool threads;
	pthread_t demoter, prefetcher[TL2_PREFETCHERS];
	int level;
	uint32_t hot_hits;
};

/* What r->l2 holds when TREC_L2 is set. */
struct tl2_loc {
	struct l2_loc loc;
	uint32_t stored; /* payload bytes (user.kvfs.stored_bytes) */
};
_Static_assert(sizeof(struct tl2_loc) <= sizeof(struct tier_l2loc),
	       "tier_l2loc too small");
_Static_assert(sizeof(struct tl2_job *) <= sizeof(struct tier_l2loc),
	       "tier_l2loc too small");

static void loc_get(const struct tier_rec *r, struct tl2_loc *l)
{
	memcpy(l, r->l2.b, sizeof(*l));
}

static void loc_set(struct tier_rec *r, const struct l2_loc *loc,
		    uint64_t stored)
{
	struct tl2_loc l = { .loc = *loc, .stored = (uint32_t)stored };

	memset(r->l2.b, 0, sizeof(r->l2.b));
	memcpy(r->l2.b, &l, sizeof(l));
}

static struct tl2_job *job_of(const struct tier_rec *r)
{
	struct tl2_job *j;

	memcpy(&j, r->l2.b, sizeof(j));
	return j;
}

static void job_set(struct tier_rec *r, struct tl2_job *j)
{
	memset(r->l2.b, 0, sizeof(r->l2.b));
	memcpy(r->l2.b, &j, sizeof(j));
}

static bool rec_loc_is(const struct tier_rec *r, const struct l2_loc *loc)
{
	struct tl2_loc l;

	if (!(r->flags & TREC_L2))
		return false;
	loc_get(r, &l);
	return l2_loc_eq(&l.loc, loc);
}

/* The namespace's shuffle: the mount's default until user.kvfs.dtype
 * sets it (tier_ns_create copies the default). */
static int ns_shuffle(struct tier *t, const struct tier_rec *r)
{
	struct tier_ns *ns = tier_ns_get(t, r->ns);

	return ns ? ns->shuffle : t->cfg.shuffle;
}

/*
 * Takes an L2-only chunk out of the engine (its record failed verification,
 * or L2 reclaimed it): out of the index, on_gone queued; pinned records
 * become zombies freed by their last tier_unref. tier.lock held.
 */
static void drop_l2_only(struct tier *t, struct tier_rec *r,
			 enum tier_gone_reason why)
{
	tier_idx_remove(t, r);
	r->flags &= (uint8_t)~TREC_L2;
	if (r->flags & TREC_USER_PIN) {
		r->flags &= (uint8_t)~TREC_USER_PIN;
		r->pi.refs--;
	}
	tier_queue_gone(t, r, why);
	if (r->pi.refs) {
		r->flags |= TREC_ZOMBIE;
		r->ns_prev = NULL;
		r->ns_next = t->zombies;
		if (t->zombies)
			t->zombies->ns_prev = r;
		t->zombies = r;
		t->nzombies++;
	} else {
		free(r);
	}
}

/* ------------------------------------------------------------ writes */

static void write_done(void *arg, struct l2_rec *rec, int err,
		       const struct l2_loc *loc)
{
	struct tl2_job *job = arg;
	struct tier *t = job->t;
	struct tier_l2 *t2 = t->l2;
	struct tier_rec *r = job->r;
	struct l2_rec_info info = { 0 };
	bool free_job;

	if (rec)
		l2_rec_info(rec, &info);
	tier_lock(t);
	if (!(r->flags & TREC_ZOMBIE) && (r->flags & TREC_L2W) &&
	    job_of(r) == job) {
		r->flags &= (uint8_t)~TREC_L2W;
		memset(r->l2.b, 0, sizeof(r->l2.b));
		if (!err) {
			loc_set(r, loc, info.stored_len);
			r->flags |= TREC_L2;
			if (r->flags & TREC_NOSUM) {
				/* the L2 write hashed the same bytes */
				r->checksum = info.raw_sum;
				r->flags &= (uint8_t)~TREC_NOSUM;
			}
		} else if (r->where != TIER_L1) {
			/* the demoted bytes are lost: a miss from now on */
			t2->errors++;
			drop_l2_only(t, r, TIER_GONE_DROPPED);
		}
	} else if (!err) {
		l2_free(t2->l2, loc); /* unlinked while being written */
	}
	job->finished = true;
	if (job->raw)
		t2->raw_queued -= job->size;
	else
		t2->l1_queued -= job->size;
	/* the demoter's rescan, and an unlink waiting for this write */
	pthread_cond_broadcast(&t2->cond);
	tier_unref(t, r);
	free_job = job->readers == 0;
	tier_unlock(t);
	if (rec)
		l2_rec_free(t2->l2, rec);
	if (free_job) {
		free(job->raw);
		free(job);
	}
}

/* Queues an L2 write of r (tier.lock held). raw: a copy of the bytes that
 * the job takes over (demotion), or NULL to read r's L1 extent, which the
 * job keeps pinned. */
static int queue_write(struct tier *t, struct tier_rec *r, void *raw)
{
	struct tier_l2 *t2 = t->l2;
	struct tier_ns *ns = tier_ns_get(t, r->ns);
	struct tl2_job *job;

	if (!ns)
		return -ENOENT;
	job = calloc(1, sizeof(*job));
	if (!job)
		return -ENOMEM;
	job->t = t;
	job->r = r;
	job->raw = raw;
	job->size = r->size;
	memcpy(job->ns, ns->name, sizeof(job->ns));
	job->key = r->key;
	job->shuffle = ns_shuffle(t, r);
	tier_ref(t, r);
	r->flags |= TREC_L2W;
	r->l2_heat = 0; /* reads from now on make the new copy hot */
	job_set(r, job);
	if (raw)
		t2->raw_queued += r->size;
	else
		t2->l1_queued += r->size;
	if (t2->tail)
		t2->tail->next = job;
	else
		t2->head = job;
	t2->tail = job;
	pthread_cond_broadcast(&t2->cond);
	return 0;
}

/* ingest=all skipped chunks while too many writes were in flight: queue
 * the L1 chunks that have no L2 copy yet, up to the bound (tier.lock
 * held; a walk of the index, only after a skip). */
static void rescan(struct tier *t)
{
	struct tier_l2 *t2 = t->l2;

	t2->rescan = false;
	for (uint64_t i = 0; i < t->nbuckets; i++)
		for (struct tier_rec *r = t->buckets[i]; r; r = r->hnext) {
			if (r->where != TIER_L1 ||
			    (r->flags & (TREC_L2 | TREC_L2W)))
				continue;
			if (t2->l1_queued + r->size > t->l1_cap / 4 &&
			    t2->l1_queued) {
				t2->rescan = true; /* more after these */
				return;
			}
			queue_write(t, r, NULL);
		}
}

static void *demoter_main(void *arg)
{
	struct tier *t = arg;
	struct tier_l2 *t2 = t->l2;

	tier_lock(t);
	for (;;) {
		struct tl2_job *job = t2->head;
		struct l2_rec *rec = NULL;
		const void *src;
		void *bounce = NULL;
		int rc;

		/* only once the earlier ingest writes are done (write_done
		 * wakes us): otherwise the bound stops the walk at once and
		 * we would spin here holding tier.lock */
		if (!job && t2->rescan && !t2->stop && !t2->l1_queued) {
			rescan(t);
			continue;
		}
		if (!job) {
			if (t2->stop)
				break;
			pthread_cond_wait(&t2->cond, &t->lock);
			continue;
		}
		t2->head = job->next;
		if (!t2->head)
			t2->tail = NULL;
		/* r is pinned by the job: its extent cannot move */
		src = job->raw;
		if (!src && job->size && t->arena.host)
			src = (const char *)t->arena.host + job->r->l1_off;
		else if (!src && job->size) {
			bounce = malloc(job->size);
			if (bounce && tier_arena_read(t, job->r->l1_off, bounce,
						      job->size) == 0)
				src = bounce;
		}
		tier_unlock(t);

		rc = src || !job->size ? 0 : -ENOMEM;
		if (rc == 0)
			rc = l2_build(t2->l2, job->ns, &job->key, src, job->size,
				      t2->level, job->shuffle, &rec);
		free(bounce);
		if (rc == 0) {
			while ((rc = l2_append(t2->l2, rec, write_done, job)) ==
			       -EAGAIN) {
				struct timespec ts = { 0, 1000000 };

				nanosleep(&ts, NULL);
			}
			if (rc)
				l2_rec_free(t2->l2, rec);
		}
		if (rc) {
			if (rc == -EFBIG)
				tier_log(t, "l2: chunk of %" PRIu64 " bytes does not "
					 "fit in L2 (l2_size too small)", job->size);
			write_done(job, NULL, rc, NULL);
		}
		tier_lock(t);
	}
	tier_unlock(t);
	return NULL;
}

/* ------------------------------------------------------------- hooks */

bool tier_l2_evicting(struct tier *t, struct tier_rec *r)
{
	struct tier_l2 *t2 = t->l2;
	void *raw = NULL;

	if (!t2 || !t2->l2)
		return false;
	if (r->flags & TREC_L2)
		return true; /* a clean copy is on disk already */
	if (r->flags & TREC_L2W)
		return false; /* cannot happen: the job pins r */
	if (t->cfg.ingest == TIER_INGEST_HOT && r->hits < t2->hot_hits)
		return false;
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
	if (queue_write(t, r, raw)) {
		free(raw);
		return false;
	}
	return true;
}

void tier_l2_on_publish(struct tier *t, struct tier_rec *r)
{
	struct tier_l2 *t2 = t->l2;

	if (!t2 || !t2->l2 || t->cfg.ingest != TIER_INGEST_ALL)
		return;
	/* the job pins the chunk until it is written: bounded so writers
	 * always keep three quarters of L1 */
	if (t2->l1_queued && t2->l1_queued + r->size > t->l1_cap / 4) {
		t2->rescan = true; /* the demoter comes back for it */
		return;
	}
	queue_write(t, r, NULL);
}

void tier_l2_on_hit(struct tier *t, struct tier_rec *r)
{
	struct tier_l2 *t2 = t->l2;

	if (!t2 || !t2->l2 || t->cfg.ingest != TIER_INGEST_HOT ||
	    r->where != TIER_L1 || (r->flags & (TREC_L2 | TREC_L2W)) ||
	    r->hits < t2->hot_hits || t2->l1_queued + r->size > t->l1_cap / 4)
		return;
	queue_write(t, r, NULL);
}

bool tier_l2_forget(struct tier *t, struct tier_rec *r)
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
	struct tl2_job *job = job_of(r), *prev = NULL, *j;

	for (j = t2->head; j && j != job; j = j->next)
		prev = j;
	if (!j)
		return false; /* the demoter has it: being written */
	if (prev)
		prev->next = j->next;
	else
		t2->head = j->next;
	if (t2->tail == j)
		t2->tail = prev;
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
	pthread_cond_broadcast(&t2->cond); /* the demoter's rescan */
	return true;
}

bool tier_l2_wait_write(struct tier *t, struct tier_rec *r)
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

void tier_l2_sync_frees(struct tier *t)
{
	if (t->l2 && t->l2->l2)
		l2_sync_frees(t->l2->l2, TL2_UNLINK_WAIT_MS);
}

uint64_t tier_l2_stored(const struct tier_rec *r)
{
	struct tl2_loc l;

	if (!(r->flags & TREC_L2))
		return r->size;
	loc_get(r, &l);
	return l.stored;
}

/* --------------------------------------------------------- promotion */

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
int tier_l2_fill(struct tier *t, struct tier_rec *r, struct tier_chunk *c)
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
			drop_l2_only(t, r, TIER_GONE_DROPPED);
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

void tier_l2_pin_promote(struct tier *t, struct tier_rec *r)
{
	struct tier_chunk c = { 0 };

	if (!t->l2 || !t->l2->l2 || r->where != TIER_L2)
		return;
	if (tier_l2_fill(t, r, &c) == 0)
		free(c.tmp); /* no room in L1 now: stays in L2, pinned */
}

void tier_l2_prefetch(struct tier *t, struct tier_rec *r)
{
	struct tier_l2 *t2 = t->l2;
	struct tl2_pf *p;

	if (!t2 || !t2->l2 || r->where != TIER_L2 || t2->npf >= TL2_MAX_PREFETCH)
		return;
	/* A run larger than L1 would evict its own head (what the engine
	 * reads first) to make room for its tail: prefetch at most three
	 * quarters of L1 ahead; the rest is promoted when it is read. */
	if (t2->pf_bytes + r->size > t->l1_cap / 4 * 3)
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

static void *prefetcher_main(void *arg)
{
	struct tier *t = arg;
	struct tier_l2 *t2 = t->l2;

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

/* --------------------------------------------------- log callbacks */

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
	r->pi.hkey = hashkey_index(id, &ri->key);
	r->pi.atime = ++t->clock;
	r->atime_ns = tier_now_ns();
	tier_idx_insert(t, ns, r);
	if (ns->last_size < ri->raw_len)
		ns->last_size = ri->raw_len;
	tier_unlock(t);
	return 0;
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
	hot = r->pi.refs > 0 || (r->flags & TREC_PROMO) || r->l2_heat > 0;
	if (hot && may_keep) {
		tier_unlock(t);
		return L2_KEEP;
	}
	if (r->where == TIER_L1)
		r->flags &= (uint8_t)~TREC_L2; /* L1 still has it */
	else
		drop_l2_only(t, r, TIER_GONE_DROPPED);
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
		pinned = r->pi.refs > 0 || (r->flags & TREC_PROMO);
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
			r->l2_heat = 0; /* kept once: must be read again */
		} else if (r->where == TIER_L1)
			r->flags &= (uint8_t)~TREC_L2;
		else
			drop_l2_only(t, r, TIER_GONE_DROPPED);
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
	    cfg->ingest != TIER_INGEST_HOT) {
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
	lc.log = on_log;
	lc.log_arg = t;
	lc.recover = on_recover;
	lc.reclaim = on_reclaim;
	lc.pinned = on_pinned;
	lc.moved = on_moved;
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
	t2->raw_max = queue_cap(t, 4, 4 * cfg->max_chunk);
	t2->hot_hits = cfg->hot_hits ? cfg->hot_hits : 1;
	t->l2 = t2;

	rc = l2_open(&lc, &t2->l2, err, errlen);
	if (rc == -EBUSY || rc == -EINVAL) {
		t->l2 = NULL;
		pthread_cond_destroy(&t2->cond);
		free(t2);
		return rc;
	}
	if (rc) {
		/* kvfs keeps serving from L1; stats count the error. Chunks
		 * recovered before the failure (io_uring or threads failed
		 * after the scan) cannot be read: forget them. */
		tier_lock(t);
		for (uint64_t i = 0; i < t->nbuckets; i++) {
			struct tier_rec *r = t->buckets[i], *next;

			for (; r; r = next) {
				next = r->hnext;
				if (r->where == TIER_L2) {
					tier_idx_remove(t, r);
					free(r);
				}
			}
		}
		tier_unlock(t);
		tier_log(t, "%s; L2 disabled, serving from L1 only", err);
		err[0] = 0;
		t2->l2 = NULL;
		t2->errors++;
		return 0;
	}
	if (pthread_create(&t2->demoter, NULL, demoter_main, t))
		goto no_threads;
	for (int i = 0; i < TL2_PREFETCHERS; i++) {
		if (pthread_create(&t2->prefetcher[i], NULL, prefetcher_main, t)) {
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
		tier_lock(t);
		for (uint64_t i = 0; i < t->nbuckets; i++)
			for (struct tier_rec *r = t->buckets[i]; r; r = r->hnext)
				if (r->where == TIER_L1 &&
				    !(r->flags & (TREC_L2 | TREC_L2W)))
					queue_write(t, r, NULL);
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
	free(t2);
}

void tier_l2_stats(struct tier *t, struct tier_stats *st)
{
	struct tier_l2 *t2 = t->l2;
	struct l2_stats ls;

	if (!t2)
		return;
	st->l2_errors = t2->errors;
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
	st->l2_corrupt = ls.corrupt;
	st->l2_errors += ls.errors;
}
