/*
 * l2_ckpt.c - the checkpoint of the L2 index (format: record.h): checking
 * a checkpoint's bytes, writing one (atomically: tmp, fsync, rename, fsync
 * of the directory), and the thread that writes one every
 * l2_checkpoint_s seconds. Loading is l2_recover's (l2_recover.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tier/l2/l2_i.h"

/* ------------------------------------------------------------ checking */

#define WHY(...) (snprintf(why, whylen, __VA_ARGS__), -EBADMSG)

static int check_ent(const struct kvckpt_ent *e, uint64_t scan_blk,
		     uint64_t *next_blk, uint32_t *max_ns, char *why,
		     size_t whylen)
{
	if (!e->nblk || e->blk < *next_blk ||
	    (uint64_t)e->blk + e->nblk > scan_blk)
		return WHY("an entry at block %" PRIu32 " is out of place",
			   e->blk);
	if ((e->codec != CODEC_NONE && e->codec != CODEC_ZSTD) ||
	    !codec_shuffle_ok(e->shuffle) ||
	    (e->codec == CODEC_NONE && e->shuffle) || e->zero ||
	    e->raw_len > (1ull << 40) ||
	    e->stored_len + KVREC_HDR_BYTES > (uint64_t)e->nblk * L2_ALIGN ||
	    (e->codec == CODEC_NONE && e->stored_len != e->raw_len))
		return WHY("an entry at block %" PRIu32 " is not a record",
			   e->blk);
	if (e->ns > *max_ns || *max_ns == UINT32_MAX)
		*max_ns = e->ns;
	*next_blk = (uint64_t)e->blk + e->nblk;
	return 0;
}

static int check_ns(const uint8_t *p, uint64_t len, uint32_t count,
		    char *why, size_t whylen)
{
	uint64_t pos = 0;

	for (uint32_t i = 0; i < count; i++) {
		uint16_t n;

		if (len - pos < 2)
			return WHY("the namespace block is short");
		memcpy(&n, p + pos, 2);
		pos += 2;
		if (!n || n > KVFS_NS_NAME_MAX || n > len - pos ||
		    memchr(p + pos, 0, n) || memchr(p + pos, '/', n))
			return WHY("namespace name %" PRIu32 " is invalid", i);
		pos += n;
	}
	if (pos != len)
		return WHY("the namespace block has trailing bytes");
	return 0;
}

/* A LINK block's payload, after a SEG block of nents entries. */
static int check_links(const uint8_t *pl, const struct kvckpt_blk *b,
		       uint32_t nents, uint64_t blkno, char *why,
		       size_t whylen)
{
	int64_t last = -1;

	if (!b->count || b->len != (uint64_t)b->count *
					   sizeof(struct kvckpt_link))
		return WHY("link block %" PRIu64 " is malformed", blkno);
	for (uint32_t i = 0; i < b->count; i++) {
		struct kvckpt_link l;

		memcpy(&l, pl + (size_t)i * sizeof(l), sizeof(l));
		if ((int64_t)l.ent <= last || l.ent >= nents ||
		    (l.flags & ~KVREC_F_PARENT) || l.zero)
			return WHY("link %" PRIu32 " of block %" PRIu64
				   " is malformed", i, blkno);
		last = l.ent;
	}
	return 0;
}

int l2_ckpt_check(const void *buf, size_t len, uint64_t salt,
		  struct l2_ckpt_info *ci, char *why, size_t whylen)
{
	const uint8_t *p = buf;
	struct kvckpt_hdr h;
	uint64_t pos = sizeof(h), blkno = 1, recs = 0;
	uint32_t max_ns = UINT32_MAX;
	int64_t last_seg = -1;
	bool have_ns = false, have_order = false;
	uint32_t prev_type = 0, prev_count = 0;

	memset(ci, 0, sizeof(*ci));
	if (len < sizeof(h))
		return WHY("it is %zu bytes, shorter than its header", len);
	memcpy(&h, p, sizeof(h));
	if (h.magic != KVCKPT_MAGIC)
		return WHY("bad magic");
	if (h.version < KVCKPT_VERSION_MIN || h.version > KVCKPT_VERSION ||
	    h.hdr_len != sizeof(h))
		return WHY("version %" PRIu32 " is not %d..%d", h.version,
			   KVCKPT_VERSION_MIN, KVCKPT_VERSION);
	if (h.salt != salt) {
		snprintf(why, whylen, "it belongs to another l2_dir (l2.id "
			 "%016" PRIx64 ", this one is %016" PRIx64 ")", h.salt,
			 salt);
		return -ESTALE;
	}
	if (kvrec_sum(&h, offsetof(struct kvckpt_hdr, sum), salt) != h.sum)
		return WHY("its header checksum fails");
	for (;;) {
		struct kvckpt_blk b;
		const uint8_t *pl;
		uint64_t sum;

		if (len - pos < sizeof(b) + 8)
			return WHY("it is torn after block %" PRIu64, blkno - 1);
		memcpy(&b, p + pos, sizeof(b));
		if (b.len > len - pos - sizeof(b) - 8)
			return WHY("block %" PRIu64 " is torn", blkno);
		memcpy(&sum, p + pos + sizeof(b) + b.len, 8);
		if (kvrec_sum(p + pos, sizeof(b) + b.len, salt + blkno) != sum)
			return WHY("block %" PRIu64 " fails its checksum", blkno);
		pl = p + pos + sizeof(b);
		if (b.type == KVCKPT_END) {
			if (b.len || b.count != blkno - 1 ||
			    pos + sizeof(b) + 8 != len)
				return WHY("its end block is out of place");
			break;
		}
		if (b.type == KVCKPT_SEG) {
			struct kvckpt_seg sg;
			uint64_t next_blk = 0;

			if (have_ns || b.len < sizeof(sg) ||
			    (b.len - sizeof(sg)) / sizeof(struct kvckpt_ent) !=
				    b.count ||
			    (b.len - sizeof(sg)) % sizeof(struct kvckpt_ent))
				return WHY("segment block %" PRIu64
					   " is malformed", blkno);
			memcpy(&sg, pl, sizeof(sg));
			if (sg.nents != b.count || (int64_t)sg.id <= last_seg ||
			    sg.id >= h.next_seg || sg.scan_from % L2_ALIGN ||
			    sg.scan_from / L2_ALIGN > UINT32_MAX)
				return WHY("segment block %" PRIu64
					   " is malformed", blkno);
			last_seg = sg.id;
			for (uint32_t i = 0; i < b.count; i++) {
				struct kvckpt_ent e;
				int rc;

				memcpy(&e, pl + sizeof(sg) + (size_t)i * sizeof(e),
				       sizeof(e));
				rc = check_ent(&e, sg.scan_from / L2_ALIGN,
					       &next_blk, &max_ns, why, whylen);
				if (rc)
					return rc;
				if (e.seq >= h.next_seq)
					return WHY("an entry's seq is beyond "
						   "next_seq");
			}
			recs += b.count;
			ci->nsegs++;
		} else if (b.type == KVCKPT_NS) {
			int rc;

			if (have_ns)
				return WHY("two namespace blocks");
			rc = check_ns(pl, b.len, b.count, why, whylen);
			if (rc)
				return rc;
			have_ns = true;
			ci->nns = b.count;
			ci->ns_off = (size_t)(pl - p);
			ci->ns_len = (size_t)b.len;
		} else if (b.type == KVCKPT_LINK && h.version >= 2) {
			int rc = check_links(pl, &b, prev_type == KVCKPT_SEG ?
					     prev_count : 0, blkno, why, whylen);

			if (rc)
				return rc;
		} else if (b.type == KVCKPT_ORDER && h.version >= 2) {
			if (!have_ns || have_order)
				return WHY("order block %" PRIu64 " is out of "
					   "place", blkno);
			have_order = true;
			ci->order_off = (size_t)(pl - p);
			ci->order_len = (size_t)b.len;
			ci->order_count = b.count;
		} else {
			return WHY("block %" PRIu64 " has unknown type %" PRIu32,
				   blkno, b.type);
		}
		prev_type = b.type;
		prev_count = b.count;
		pos += sizeof(b) + b.len + 8;
		blkno++;
	}
	if (!have_ns)
		return WHY("it has no namespace block");
	if (max_ns != UINT32_MAX && max_ns >= ci->nns)
		return WHY("an entry names namespace %" PRIu32 " of %" PRIu32,
			   max_ns, ci->nns);
	if (recs != h.records)
		return WHY("it holds %" PRIu64 " entries, its header says %"
			   PRIu64, recs, h.records);
	ci->next_seq = h.next_seq;
	ci->next_seg = h.next_seg;
	ci->flags = h.flags;
	ci->records = recs;
	return 0;
}

const struct kvckpt_seg *l2_ckpt_next_seg(const void *buf, size_t len,
					  size_t *pos,
					  const struct kvckpt_ent **ents,
					  const struct kvckpt_link **links,
					  uint32_t *nlinks)
{
	const uint8_t *p = buf;

	*links = NULL;
	*nlinks = 0;

	if (!*pos)
		*pos = sizeof(struct kvckpt_hdr);
	while (*pos + sizeof(struct kvckpt_blk) <= len) {
		struct kvckpt_blk b;
		size_t at = *pos;

		memcpy(&b, p + at, sizeof(b));
		*pos = at + sizeof(b) + b.len + 8;
		if (b.type == KVCKPT_SEG) {
			struct kvckpt_blk nb;

			*ents = (const struct kvckpt_ent *)(p + at + sizeof(b) +
							    sizeof(struct kvckpt_seg));
			if (*pos + sizeof(nb) <= len) {
				memcpy(&nb, p + *pos, sizeof(nb));
				if (nb.type == KVCKPT_LINK) {
					*links = (const struct kvckpt_link *)
						(p + *pos + sizeof(nb));
					*nlinks = nb.count;
					*pos += sizeof(nb) + nb.len + 8;
				}
			}
			return (const struct kvckpt_seg *)(p + at + sizeof(b));
		}
		if (b.type == KVCKPT_END)
			break;
	}
	return NULL;
}

/* ------------------------------------------------------------- writing */

struct wbuf {
	uint8_t *p;
	size_t len, cap;
};

static int wb_put(struct wbuf *w, const void *src, size_t n)
{
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap : 1 << 16;
		uint8_t *q;

		while (cap < w->len + n)
			cap *= 2;
		q = realloc(w->p, cap);
		if (!q)
			return -ENOMEM;
		w->p = q;
		w->cap = cap;
	}
	memcpy(w->p + w->len, src, n);
	w->len += n;
	return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *c = p;

	while (n) {
		ssize_t k = write(fd, c, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Seals the block in w (a struct kvckpt_blk at its start) as block blkno
 * and writes it. */
static int put_block(struct l2 *l2, int fd, struct wbuf *w, uint64_t blkno)
{
	struct kvckpt_blk b;
	uint64_t sum;
	int rc;

	memcpy(&b, w->p, sizeof(b));
	b.len = w->len - sizeof(b);
	memcpy(w->p, &b, sizeof(b));
	sum = kvrec_sum(w->p, w->len, l2->salt + blkno);
	rc = wb_put(w, &sum, sizeof(sum));
	if (!rc)
		rc = write_all(fd, w->p, w->len);
	w->len = 0;
	return rc;
}

/* l2.lock held: a SEG block for seg into w, and the LINK block of its
 * entries' chain links into lw (left empty when none has one); both
 * cleared first. */
static int seg_block(struct wbuf *w, struct wbuf *lw,
		     const struct l2_seg *seg, uint64_t *records)
{
	struct kvckpt_blk b = { .type = KVCKPT_SEG };
	struct kvckpt_blk lb = { .type = KVCKPT_LINK };
	struct kvckpt_seg sg = { .id = seg->id, .scan_from = seg->tail };
	size_t i, n = 0;
	int rc;

	for (i = 0; i < seg->nents; i++)
		if (seg->ents[i].state == ENT_PENDING) {
			sg.scan_from = (uint64_t)seg->ents[i].blk * L2_ALIGN;
			break;
		}
	w->len = 0;
	lw->len = 0;
	rc = wb_put(w, &b, sizeof(b));
	rc = rc ? rc : wb_put(w, &sg, sizeof(sg));
	for (i = 0; i < seg->nents && !rc; i++) {
		const struct l2_ent *e = &seg->ents[i];
		struct kvckpt_ent ce;

		if ((uint64_t)e->blk * L2_ALIGN >= sg.scan_from)
			break;
		if (e->state != ENT_LIVE)
			continue;
		memset(&ce, 0, sizeof(ce));
		memcpy(ce.key, e->key.b, sizeof(ce.key));
		ce.seq = e->seq;
		ce.raw_len = e->raw_len;
		ce.stored_len = e->stored_len;
		ce.raw_sum = e->raw_sum;
		ce.blk = e->blk;
		ce.nblk = e->nblk;
		ce.ns = e->ns;
		ce.codec = e->codec;
		ce.shuffle = e->shuffle;
		rc = wb_put(w, &ce, sizeof(ce));
		if (!rc && (e->has_parent || e->depth)) {
			struct kvckpt_link l = { .ent = (uint32_t)n,
						 .depth = e->depth };

			if (e->has_parent) {
				l.flags = KVREC_F_PARENT;
				memcpy(l.parent, e->parent.b, sizeof(l.parent));
			}
			if (!lw->len)
				rc = wb_put(lw, &lb, sizeof(lb));
			rc = rc ? rc : wb_put(lw, &l, sizeof(l));
			lb.count++;
		}
		n++;
	}
	if (rc)
		return rc;
	if (lw->len)
		memcpy(lw->p, &lb, sizeof(lb));
	b.count = (uint32_t)n;
	sg.nents = (uint32_t)n;
	memcpy(w->p, &b, sizeof(b));
	memcpy(w->p + sizeof(b), &sg, sizeof(sg));
	*records += n;
	return 0;
}

/* The snapshot's segment ids (l2.lock held). */
static uint32_t *seg_ids(struct l2 *l2, size_t *n)
{
	uint32_t *ids = malloc((l2->nsegs ? l2->nsegs : 1) * sizeof(*ids));

	*n = 0;
	if (!ids)
		return NULL;
	for (size_t i = 0; i < l2->nsegs; i++)
		ids[(*n)++] = l2->segs[i]->id;
	return ids;
}

int l2_ckpt_write(struct l2 *l2, bool clean)
{
	struct kvckpt_hdr h = { .magic = KVCKPT_MAGIC,
				.version = KVCKPT_VERSION,
				.hdr_len = sizeof(h), .salt = l2->salt };
	struct kvckpt_blk b;
	struct wbuf w = { 0 }, lw = { 0 };
	struct timespec ts;
	void *order = NULL;
	size_t order_len = 0;
	uint32_t order_count = 0;
	uint64_t blkno = 1, t0 = l2_now_ns(), flog_mark, changes, ext;
	/* read before the engine's part is taken: a change made meanwhile
	 * makes the next one due */
	uint64_t ext0 = atomic_load(&l2->ext_changes);
	uint32_t *ids;
	size_t nids, i;
	int fd, rc = 0;

	/* the engine's part first, outside every l2 lock */
	if (l2->cfg.ckpt_save)
		order = l2->cfg.ckpt_save(l2->cfg.cb_arg, &order_len,
					  &order_count);
	pthread_mutex_lock(&l2->ckpt_lock); /* one writer at a time */
	pthread_mutex_lock(&l2->lock);
	if (l2->flog_failed) {
		/* a free could not be logged: no checkpoint may stand */
		pthread_mutex_unlock(&l2->lock);
		pthread_mutex_unlock(&l2->ckpt_lock);
		unlinkat(l2->dir_fd, KVCKPT_FILE, 0);
		free(order);
		return -EIO;
	}
	flog_mark = l2->flog_bytes;
	changes = l2->changes;
	ext = ext0;
	ids = seg_ids(l2, &nids);
	pthread_mutex_unlock(&l2->lock);
	if (!ids) {
		pthread_mutex_unlock(&l2->ckpt_lock);
		free(order);
		return -ENOMEM;
	}
	fd = openat(l2->dir_fd, KVCKPT_TMP, O_WRONLY | O_CREAT | O_TRUNC |
		    O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	rc = write_all(fd, &h, sizeof(h)); /* sealed at the end */
	for (i = 0; i < nids && !rc; i++) {
		struct l2_seg *seg;

		pthread_mutex_lock(&l2->lock);
		seg = l2_seg_find(l2, ids[i]);
		rc = seg ? seg_block(&w, &lw, seg, &h.records) : 0;
		pthread_mutex_unlock(&l2->lock);
		if (seg && !rc)
			rc = put_block(l2, fd, &w, blkno++);
		if (seg && !rc && lw.len)
			rc = put_block(l2, fd, &lw, blkno++);
	}
	if (!rc) {
		/* names last: entries of segments snapshotted above index
		 * into this table, which only grows */
		b = (struct kvckpt_blk){ .type = KVCKPT_NS };
		rc = wb_put(&w, &b, sizeof(b));
		pthread_mutex_lock(&l2->lock);
		for (i = 0; i < l2->nns && !rc; i++) {
			uint16_t n = (uint16_t)strlen(l2->ns_names[i]);

			rc = wb_put(&w, &n, 2);
			rc = rc ? rc : wb_put(&w, l2->ns_names[i], n);
		}
		b.count = (uint32_t)l2->nns;
		h.next_seq = atomic_load(&l2->next_seq);
		h.next_seg = l2->next_seg;
		pthread_mutex_unlock(&l2->lock);
		if (!rc) {
			memcpy(w.p, &b, sizeof(b));
			rc = put_block(l2, fd, &w, blkno++);
		}
	}
	if (!rc && order && order_len) {
		b = (struct kvckpt_blk){ .type = KVCKPT_ORDER,
					 .count = order_count };
		rc = wb_put(&w, &b, sizeof(b));
		rc = rc ? rc : wb_put(&w, order, order_len);
		rc = rc ? rc : put_block(l2, fd, &w, blkno++);
	}
	if (!rc) {
		b = (struct kvckpt_blk){ .type = KVCKPT_END,
					 .count = (uint32_t)(blkno - 1) };
		rc = wb_put(&w, &b, sizeof(b));
		rc = rc ? rc : put_block(l2, fd, &w, blkno++);
	}
	if (!rc) {
		clock_gettime(CLOCK_REALTIME, &ts);
		h.time_ns = (uint64_t)ts.tv_sec * 1000000000ull +
			    (uint64_t)ts.tv_nsec;
		h.flags = clean ? KVCKPT_CLEAN : 0;
		h.sum = kvrec_sum(&h, offsetof(struct kvckpt_hdr, sum),
				  l2->salt);
		if (pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
			rc = errno ? -errno : -EIO;
	}
	if (!rc && fsync(fd))
		rc = -errno;
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && renameat(l2->dir_fd, KVCKPT_TMP, l2->dir_fd, KVCKPT_FILE))
		rc = -errno;
	if (!rc && fsync(l2->dir_fd))
		rc = -errno;
	if (rc)
		unlinkat(l2->dir_fd, KVCKPT_TMP, 0);
	else
		/* the checkpoint holds every free before its snapshot */
		l2_flog_trim(l2, flog_mark);
out:
	free(ids);
	free(w.p);
	free(lw.p);
	free(order);
	pthread_mutex_lock(&l2->lock);
	if (rc) {
		l2->st.ckpt_errors++;
	} else {
		l2->st.checkpoints++;
		l2->st.ckpt_write_ns = l2_now_ns() - t0;
		l2->st.ckpt_records = h.records;
		l2->ckpt_changes = changes;
		l2->ckpt_ext = ext;
	}
	pthread_mutex_unlock(&l2->lock);
	pthread_mutex_unlock(&l2->ckpt_lock);
	if (rc)
		l2_logf(l2, "l2_dir %s: cannot write the checkpoint: %s",
			l2->dir, strerror(-rc));
	return rc;
}

/* ------------------------------------------------------------- thread */

static void *ckpt_main(void *arg)
{
	struct l2 *l2 = arg;

	pthread_mutex_lock(&l2->lock);
	while (!l2->ck_stop) {
		struct timespec dl;
		bool dirty;

		l2_deadline(&dl, l2->cfg.checkpoint_s * 1000);
		while (!l2->ck_stop &&
		       pthread_cond_timedwait(&l2->ck_cond, &l2->lock, &dl) !=
			       ETIMEDOUT)
			;
		if (l2->ck_stop)
			break;
		dirty = l2->changes != l2->ckpt_changes ||
			atomic_load(&l2->ext_changes) != l2->ckpt_ext;
		pthread_mutex_unlock(&l2->lock);
		if (dirty)
			l2_ckpt_write(l2, false);
		pthread_mutex_lock(&l2->lock);
	}
	pthread_mutex_unlock(&l2->lock);
	return NULL;
}

void l2_ckpt_dirty(struct l2 *l2)
{
	if (l2)
		atomic_fetch_add(&l2->ext_changes, 1);
}

int l2_ckpt_start(struct l2 *l2)
{
	int rc;

	if (l2->cfg.checkpoint_s <= 0)
		return 0;
	rc = pthread_create(&l2->ck_thread, NULL, ckpt_main, l2);
	if (rc)
		return -rc;
	l2->ck_started = true;
	return 0;
}

void l2_ckpt_stop(struct l2 *l2)
{
	if (!l2->ck_started)
		return;
	pthread_mutex_lock(&l2->lock);
	l2->ck_stop = true;
	pthread_cond_broadcast(&l2->ck_cond);
	pthread_mutex_unlock(&l2->lock);
	pthread_join(l2->ck_thread, NULL);
	l2->ck_started = false;
}
