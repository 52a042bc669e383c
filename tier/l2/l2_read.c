/*
 * l2_read.c - l2_read: one synchronous, bounded read of a record,
 * checked against the caller's namespace and key, then decoded.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tier/l2/l2_i.h"

int l2_read(struct l2 *l2, const struct l2_loc *loc, const char *ns,
	    const struct kvfs_key *key, void *dst, size_t len)
{
	struct kvrec_hdr *h;
	struct l2_seg *seg;
	struct timespec dl;
	struct l2_req *r;
	struct l2_ent *e;
	uint64_t want_seq = 0;
	int rc = 0;

	if (!loc || !ns || !key || (!dst && len) || !loc->nblk ||
	    (uint64_t)loc->nblk * L2_ALIGN > l2->seg_size)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->op = REQ_READ;
	r->off = (uint64_t)loc->blk * L2_ALIGN;
	r->len = (size_t)loc->nblk * L2_ALIGN;
	r->buf = l2_buf_get(l2, r->len, &r->buf_cap);
	if (!r->buf) {
		free(r);
		return -ENOMEM;
	}
	l2_cond_init_monotonic(&r->cond);

	pthread_mutex_lock(&l2->lock);
	seg = l2_seg_find(l2, loc->seg);
	if (!seg || (uint64_t)loc->blk * L2_ALIGN + r->len > seg->tail) {
		pthread_mutex_unlock(&l2->lock);
		rc = -ENOENT;
		goto free_req;
	}
	/* the record l2 knows there (from a checkpoint, maybe erased or
	 * replaced on disk since): its header must carry the same seq */
	e = l2_ent_find(seg, loc->blk);
	if (e && e->nblk == loc->nblk)
		want_seq = e->seq;
	seg->refs++;
	r->seg = seg;
	pthread_mutex_unlock(&l2->lock);

	l2_io_submit(l2, r);

	l2_deadline(&dl, l2->cfg.read_timeout_ms);
	pthread_mutex_lock(&l2->lock);
	while (!r->finished) {
		if (pthread_cond_timedwait(&r->cond, &l2->lock, &dl) ==
		    ETIMEDOUT && !r->finished) {
			/* the I/O thread frees the request when the read ends */
			r->abandoned = true;
			l2->st.errors++;
			pthread_mutex_unlock(&l2->lock);
			l2_logf(l2, "l2: read of seg %" PRIu32 " timed out after %d ms",
				loc->seg, l2->cfg.read_timeout_ms);
			return -ETIMEDOUT;
		}
	}
	l2_seg_unref(l2, seg);
	r->seg = NULL;
	pthread_mutex_unlock(&l2->lock);

	if (r->res < 0) {
		rc = r->res == -ENODATA ? -EBADMSG : -EIO;
		if (rc == -EIO)
			l2_log_err(l2, r->res, "read failed", loc->seg);
		goto count;
	}
	h = r->buf;
	if (l2_hdr_check(l2, h) || memcmp(h->key, key->b, sizeof(h->key)) ||
	    strncmp(h->ns, ns, sizeof(h->ns)) ||
	    (want_seq && h->seq != want_seq) ||
	    l2_record_bytes(h->stored_len) != r->len) {
		rc = -EBADMSG;
		goto count;
	}
	rc = l2_decode(l2, h, dst, len);
count:
	pthread_mutex_lock(&l2->lock);
	if (rc == -EBADMSG) {
		/* freed meanwhile (an unlink erased it under the read): a
		 * miss, not a corrupt record */
		struct l2_seg *s2 = l2_seg_find(l2, loc->seg);

		e = s2 ? l2_ent_find(s2, loc->blk) : NULL;

		if (!e || e->nblk != loc->nblk || e->state == ENT_DEAD)
			rc = -ENOENT;
	}
	if (rc == 0)
		l2->st.reads++;
	else if (rc == -EBADMSG)
		l2->st.corrupt++;
	pthread_mutex_unlock(&l2->lock);
	if (rc == -EBADMSG)
		l2_logf(l2, "l2: corrupt record in seg %" PRIu32 " at block %" PRIu32
			" (namespace %s): not served", loc->seg, loc->blk, ns);
free_req:
	l2_buf_put(l2, r->buf, r->buf_cap);
	pthread_cond_destroy(&r->cond);
	free(r);
	return rc;
}
