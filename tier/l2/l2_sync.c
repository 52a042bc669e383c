/*
 * l2_sync.c - making records durable: l2_sync (one record, for an fsync
 * of its chunk) and l2_sync_moved (what a reclaim moved, before the
 * segment it moved from is deleted).
 *
 * Records are written with O_DIRECT where the filesystem allows it, but
 * neither that nor a buffered write survives a machine crash by itself:
 * the drive's cache, the file's new size and, for a new segment, its
 * directory entry must reach the disk too. fdatasync(2) of the segment
 * does the first two; one fsync(2) of l2_dir per segment (the first time
 * a record of it is synced) the third, and with it l2.id, which every
 * record's header check needs. A daemon killed by a signal loses nothing
 * written already (the page cache has it): recovery scans what the
 * checkpoint does not cover, so a record on disk is found either way.
 */
#include <errno.h>
#include <unistd.h>

#include "tier/l2/l2_i.h"

/* fdatasync of seg (a ref held by the caller), and of l2_dir the first
 * time. 0 or -errno (counted and logged). */
static int seg_sync(struct l2 *l2, struct l2_seg *seg)
{
	bool dir;
	int rc = 0;

	pthread_mutex_lock(&l2->lock);
	dir = !seg->dir_synced;
	pthread_mutex_unlock(&l2->lock);
	if (fdatasync(seg->fd))
		rc = -errno;
	if (!rc && dir && fsync(l2->dir_fd))
		rc = -errno;
	pthread_mutex_lock(&l2->lock);
	if (!rc && dir)
		seg->dir_synced = true;
	l2->st.syncs++;
	pthread_mutex_unlock(&l2->lock);
	if (rc)
		l2_log_err(l2, rc, "fdatasync failed", seg->id);
	return rc;
}

int l2_sync(struct l2 *l2, const struct l2_loc *loc)
{
	struct l2_seg *seg;
	int rc;

	pthread_mutex_lock(&l2->lock);
	if (!l2_ent_at(l2, loc, &seg)) {
		pthread_mutex_unlock(&l2->lock);
		return -ENOENT;
	}
	seg->refs++;
	pthread_mutex_unlock(&l2->lock);
	rc = seg_sync(l2, seg);
	pthread_mutex_lock(&l2->lock);
	l2_seg_unref(l2, seg);
	pthread_mutex_unlock(&l2->lock);
	return rc;
}

int l2_sync_moved(struct l2 *l2, uint32_t lo, uint32_t hi)
{
	struct l2_seg *segs[8];
	size_t n = 0;
	int rc = 0;

	/* the moves of one reclaim fit in half a segment: one or two
	 * segments at the head of the log */
	pthread_mutex_lock(&l2->lock);
	for (size_t i = 0; i < l2->nsegs && n < 8; i++) {
		struct l2_seg *s = l2->segs[i];

		if (s->id < lo || s->id > hi)
			continue;
		s->refs++;
		segs[n++] = s;
	}
	pthread_mutex_unlock(&l2->lock);
	for (size_t i = 0; i < n; i++) {
		int r = seg_sync(l2, segs[i]);

		if (r && !rc)
			rc = r;
		pthread_mutex_lock(&l2->lock);
		l2_seg_unref(l2, segs[i]);
		pthread_mutex_unlock(&l2->lock);
	}
	return rc;
}
