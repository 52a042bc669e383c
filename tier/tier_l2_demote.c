/*
 * tier_l2_demote.c - chunks going down to L2: write jobs (a copy of an
 * evicted chunk, or a pin on an L1 chunk for ingestion), the demoter
 * thread that compresses and appends them, and their completion.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tier/tier_l2_i.h"

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
			tl2_drop_l2_only(t, r, TIER_GONE_DROPPED);
		}
	} else if (!err) {
		l2_free(t2->l2, loc); /* unlinked while being written */
	}
	if (job->sw) { /* an fsync waits for this write (tl2_sync) */
		job->sw->err = err;
		job->sw->done = true;
	}
	job->finished = true;
	if (job->raw)
		t2->raw_queued -= job->size;
	else
		t2->l1_queued -= job->size;
	/* the demoter's tl2_rescan, and an unlink waiting for this write */
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

/* A write job of r (tier.lock held), not queued yet: r is marked
 * TREC_L2W and pinned by it. raw as for tl2_queue_write. */
static int job_new(struct tier *t, struct tier_rec *r, void *raw,
		   struct tl2_job **out)
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
	job->shuffle = tl2_ns_shuffle(t, r);
	tier_ref(t, r);
	r->flags |= TREC_L2W;
	r->l2_heat = 0; /* reads from now on make the new copy hot */
	job_set(r, job);
	if (raw)
		t2->raw_queued += r->size;
	else
		t2->l1_queued += r->size;
	*out = job;
	return 0;
}

/* Queues an L2 write of r (tier.lock held). raw: a copy of the bytes that
 * the job takes over (demotion), or NULL to read r's L1 extent, which the
 * job keeps pinned. */
int tl2_queue_write(struct tier *t, struct tier_rec *r, void *raw)
{
	struct tier_l2 *t2 = t->l2;
	struct tl2_job *job;
	int rc = job_new(t, r, raw, &job);

	if (rc)
		return rc;
	if (t2->tail)
		t2->tail->next = job;
	else
		t2->head = job;
	t2->tail = job;
	pthread_cond_broadcast(&t2->cond);
	return 0;
}

bool tl2_queue_take(struct tier_l2 *t2, struct tl2_job *job)
{
	struct tl2_job *prev = NULL, *j;

	for (j = t2->head; j && j != job; j = j->next)
		prev = j;
	if (!j)
		return false;
	if (prev)
		prev->next = j->next;
	else
		t2->head = j->next;
	if (t2->tail == j)
		t2->tail = prev;
	j->next = NULL;
	return true;
}

/* ingest=all skipped chunks while too many writes were in flight: queue
 * the L1 chunks that have no L2 copy yet, up to the bound (tier.lock
 * held; a walk of the index, only after a skip). */
void tl2_rescan(struct tier *t)
{
	struct tier_l2 *t2 = t->l2;
	struct htab_node *e, *nx;
	uint64_t i;

	t2->rescan = false;
	htab_for_each_safe(&t->idx, i, e, nx) {
		struct tier_rec *r = idx_rec(e);

		if (r->where != TIER_L1 ||
		    (r->flags & (TREC_L2 | TREC_L2W)))
			continue;
		if (t2->l1_queued + r->size > t->l1_cap / 4 &&
		    t2->l1_queued) {
			t2->rescan = true; /* more after these */
			return;
		}
		tl2_queue_write(t, r, NULL);
	}
}

/* Builds the record of job and appends it: tier.lock held, dropped while
 * compressing and appending, held again on return. The outcome reaches
 * write_done (from the log's I/O thread, or from here on an error). */
static void job_write(struct tier *t, struct tl2_job *job)
{
	struct tier_l2 *t2 = t->l2;
	struct l2_rec *rec = NULL;
	const void *src;
	void *bounce = NULL;
	int rc;

	/* r is pinned by the job: its extent cannot move; its link
	 * as of now (a parent stamped after publication too) */
	job->has_parent = (job->r->flags & TREC_HAS_PARENT) != 0;
	job->parent = job->r->parent;
	job->depth = job->r->pi.depth;
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
	if (rc == 0 && (job->has_parent || job->depth))
		l2_rec_set_link(t2->l2, rec, job->has_parent ?
				&job->parent : NULL, job->depth);
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

void *tl2_demoter_main(void *arg)
{
	struct tier *t = arg;
	struct tier_l2 *t2 = t->l2;

	tier_lock(t);
	for (;;) {
		struct tl2_job *job = t2->head;

		/* only once the earlier ingest writes are done (write_done
		 * wakes us): otherwise the bound stops the walk at once and
		 * we would spin here holding tier.lock */
		if (!job && t2->rescan && !t2->stop && !t2->l1_queued) {
			tl2_rescan(t);
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
		job_write(t, job);
	}
	tier_unlock(t);
	return NULL;
}

/* ------------------------------------------------------------ fsync */

/* How long an fsync waits for one L2 write (its own, or one in flight);
 * past it the fsync fails with EIO (the disk does not answer). */
#define TL2_SYNC_WAIT_S 30
/* Tries before an fsync gives up on a chunk whose record keeps moving
 * or whose writes keep failing. */
#define TL2_SYNC_TRIES 4

/* tier.lock held: waits for the L2 write of r in flight (someone else's:
 * ingest, a demotion) to end. False on the deadline. */
static bool wait_other(struct tier *t, struct tier_rec *r,
		       const struct timespec *dl)
{
	struct tier_l2 *t2 = t->l2;
	bool ok = true;

	tier_ref(t, r);
	while ((r->flags & TREC_L2W) && !(r->flags & TREC_ZOMBIE)) {
		if (pthread_cond_timedwait(&t2->cond, &t->lock, dl) ==
		    ETIMEDOUT) {
			ok = false;
			break;
		}
	}
	tier_unref(t, r);
	return ok;
}

/* tier.lock held: writes job (not on the demoter's queue) to L2 on the
 * calling thread and waits for the outcome: 0 or -errno. */
static int write_own(struct tier *t, struct tl2_job *job,
		     const struct timespec *dl)
{
	struct tier_l2 *t2 = t->l2;
	struct tl2_sync sw = { 0 };

	job->sw = &sw;
	t2->sync_writes++;
	/* not on the demoter's queue: an unlink meanwhile waits for it as
	 * for a write under way (tl2_wait_write) */
	job_write(t, job);
	while (!sw.done)
		if (pthread_cond_timedwait(&t2->cond, &t->lock, dl) ==
		    ETIMEDOUT)
			break;
	if (!sw.done) {
		job->sw = NULL; /* still in flight: the job lives on */
		return -EIO;
	}
	return sw.err;
}

int tl2_sync(struct tier *t, uint32_t ns, const struct kvfs_key *key)
{
	struct tier_l2 *t2 = t->l2;
	struct timespec dl;
	int tries = 0, rc = 0;

	if (!t->cfg.l2_dir)
		return 0; /* memory only: nothing survives a crash (tmpfs) */
	if (!t2 || !t2->l2)
		return -EIO; /* L2 configured, but disabled (its log says why) */
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += TL2_SYNC_WAIT_S;
	tier_lock(t);
	for (;;) {
		struct tier_rec *r = tier_idx_find(t, ns, key);
		struct tl2_job *job;
		struct tl2_loc l;

		if (!r || (r->flags & TREC_ZOMBIE)) {
			rc = 0; /* unlinked (or dropped by the policy) */
			break;
		}
		if (++tries > TL2_SYNC_TRIES) {
			rc = -EIO;
			break;
		}
		if (r->flags & TREC_L2W) {
			bool l2_only = r->where != TIER_L1;

			job = job_of(r);
			if (tl2_queue_take(t2, job)) {
				/* queued behind others (ingest, evictions):
				 * written here and now instead */
				rc = write_own(t, job, &dl);
				if (rc)
					break;
				continue;
			}
			if (!wait_other(t, r, &dl)) {
				rc = -EIO;
				break;
			}
			r = tier_idx_find(t, ns, key);
			if (!r && l2_only) {
				rc = -EIO; /* its demotion failed: bytes lost */
				break;
			}
			continue;
		}
		if (r->flags & TREC_L2) {
			loc_get(r, &l);
			tier_unlock(t);
			rc = l2_sync(t2->l2, &l.loc);
			tier_lock(t);
			if (rc == -ENOENT)
				continue; /* moved or reclaimed: look again */
			r = tier_idx_find(t, ns, key);
			if (rc && r && r->where == TIER_L1 && rec_loc_is(r, &l.loc)) {
				/* a failed fdatasync may have lost the record:
				 * the next fsync writes it again */
				l2_free(t2->l2, &l.loc);
				r->flags &= (uint8_t)~TREC_L2;
			}
			break;
		}
		if (r->where != TIER_L1) {
			rc = -EIO; /* cannot happen: L2-only without a record */
			break;
		}
		rc = job_new(t, r, NULL, &job);
		if (!rc)
			rc = write_own(t, job, &dl);
		if (rc)
			break;
	}
	tier_unlock(t);
	return rc;
}
