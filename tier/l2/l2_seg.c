/*
 * l2_seg.c - the segment table and what each segment holds: find,
 * create and release segments (seg-<16 hex>.kvl2), the entries of their
 * records (add, find, live/dead, interned namespace names), and the space
 * accounting of the log (cap, used, reserve, disk full).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tier/l2/l2_i.h"

/* l2.lock held. Binary search: segments are sorted by id. */
struct l2_seg *l2_seg_find(struct l2 *l2, uint32_t id)
{
	size_t lo = 0, hi = l2->nsegs;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (l2->segs[mid]->id == id)
			return l2->segs[mid];
		if (l2->segs[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* l2.lock held. */
struct l2_ent *l2_ent_find(struct l2_seg *seg, uint32_t blk)
{
	size_t lo = 0, hi = seg->nents;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (seg->ents[mid].blk == blk)
			return &seg->ents[mid];
		if (seg->ents[mid].blk < blk)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

struct l2_ent *l2_ent_at(struct l2 *l2, const struct l2_loc *loc,
			 struct l2_seg **seg)
{
	struct l2_seg *s = l2_seg_find(l2, loc->seg);
	struct l2_ent *e = s ? l2_ent_find(s, loc->blk) : NULL;

	if (!e || e->state != ENT_LIVE || e->nblk != loc->nblk)
		return NULL;
	if (seg)
		*seg = s;
	return e;
}

/* l2.lock held: a record leaves the live set. */
void l2_ent_kill(struct l2 *l2, struct l2_ent *e)
{
	if (e->state == ENT_LIVE) {
		l2->st.bytes -= (uint64_t)e->nblk * L2_ALIGN;
		l2->st.raw_bytes -= e->raw_len;
		l2->st.records--;
		l2->changes++;
	}
	e->state = ENT_DEAD;
}

/* l2.lock held. */
void l2_ent_live(struct l2 *l2, struct l2_ent *e)
{
	if (e->state != ENT_LIVE) {
		l2->st.bytes += (uint64_t)e->nblk * L2_ALIGN;
		l2->st.raw_bytes += e->raw_len;
		l2->st.records++;
		l2->changes++;
	}
	e->state = ENT_LIVE;
}

int l2_set_link(struct l2 *l2, const struct l2_loc *loc,
		const struct kvfs_key *parent, uint32_t depth)
{
	struct l2_ent *e;
	bool changed = false;

	pthread_mutex_lock(&l2->lock);
	e = l2_ent_at(l2, loc, NULL);
	if (!e) {
		pthread_mutex_unlock(&l2->lock);
		return -ENOENT;
	}
	if (parent && !e->has_parent) {
		e->parent = *parent;
		e->has_parent = true;
		changed = true;
	}
	if (depth && !e->depth) {
		e->depth = depth;
		changed = true;
	}
	if (changed)
		l2->changes++; /* the next checkpoint keeps it */
	pthread_mutex_unlock(&l2->lock);
	return 0;
}

/* l2.lock held. The fd stays open while requests use it, so a reclaimed
 * (unlinked) segment can still finish its reads. */
void l2_seg_unref(struct l2 *l2, struct l2_seg *seg)
{
	if (--seg->refs > 0)
		return;
	if (seg->fd >= 0)
		close(seg->fd);
	free(seg->ents);
	free(seg);
}

void l2_seg_name(char *buf, size_t len, uint32_t id)
{
	snprintf(buf, len, "seg-%016" PRIx32 ".kvl2", id);
}

/* Opens a segment file, with O_DIRECT unless the filesystem refuses it
 * (tmpfs on older kernels, some FUSE filesystems): then buffered, logged
 * once. */
int l2_seg_open_fd(struct l2 *l2, uint32_t id, int flags)
{
	char name[64];
	int fd;

	l2_seg_name(name, sizeof(name), id);
	if (l2->direct) {
		fd = openat(l2->dir_fd, name, flags | O_RDWR | O_CLOEXEC | O_DIRECT,
			    0600);
		if (fd >= 0 || errno != EINVAL)
			return fd >= 0 ? fd : -errno;
		l2->direct = false;
		l2_logf(l2, "l2: %s refuses O_DIRECT (%s); using buffered I/O",
			l2->dir, strerror(EINVAL));
	}
	fd = openat(l2->dir_fd, name, flags | O_RDWR | O_CLOEXEC, 0600);
	return fd >= 0 ? fd : -errno;
}

int l2_seg_insert(struct l2 *l2, struct l2_seg *seg)
{
	size_t i;

	if (l2->nsegs == l2->segs_cap) {
		size_t n = l2->segs_cap ? 2 * l2->segs_cap : 16;
		struct l2_seg **s = realloc(l2->segs, n * sizeof(*s));

		if (!s)
			return -ENOMEM;
		l2->segs = s;
		l2->segs_cap = n;
	}
	for (i = l2->nsegs; i > 0 && l2->segs[i - 1]->id > seg->id; i--)
		l2->segs[i] = l2->segs[i - 1];
	l2->segs[i] = seg;
	l2->nsegs++;
	return 0;
}

/* l2.lock held (called by the I/O thread while placing). Creates the next
 * segment file and makes it the table's newest entry. */
int l2_seg_create(struct l2 *l2, struct l2_seg **out)
{
	struct l2_seg *seg = calloc(1, sizeof(*seg));
	int fd, rc;

	if (!seg)
		return -ENOMEM;
	fd = l2_seg_open_fd(l2, l2->next_seg, O_CREAT | O_EXCL);
	if (fd < 0) {
		free(seg);
		return fd;
	}
	seg->id = l2->next_seg++;
	seg->fd = fd;
	seg->refs = 1;
	seg->state = SEG_ACTIVE;
	rc = l2_seg_insert(l2, seg);
	if (rc) {
		char name[64];

		l2_seg_name(name, sizeof(name), seg->id);
		unlinkat(l2->dir_fd, name, 0);
		close(fd);
		free(seg);
		return rc;
	}
	l2->st.segments = l2->nsegs;
	*out = seg;
	return 0;
}

/* ------------------------------------------------------------- space */

/*
 * l2.lock held (or l2_open). Sizes the log for cap bytes on a filesystem
 * expected to hold about est of them: segments are sealed at a quarter of
 * that (at most seg_size), so an older segment is there to reclaim well
 * before the disk or cap is reached, and half a segment is kept for the
 * moves of a reclaim (its budget). With est = cap and a seg_size of
 * l2_size/4 or less this is seg_size, as before.
 */
void l2_set_space(struct l2 *l2, uint64_t cap, uint64_t est)
{
	uint64_t t = est < cap ? est : cap;

	t = (t / 4) & ~(uint64_t)(L2_ALIGN - 1);
	if (t > l2->seg_size)
		t = l2->seg_size;
	if (t < 2 * L2_ALIGN)
		t = 2 * L2_ALIGN;
	l2->cap = cap;
	l2->st.capacity = cap;
	l2->seg_target = t;
	l2->reserve = (t / 2) & ~(uint64_t)(L2_ALIGN - 1);
}

/* l2.lock held. The bytes normal appends may fill (moves: cap). */
uint64_t l2_room(const struct l2 *l2)
{
	return l2->cap > l2->reserve ? l2->cap - l2->reserve : 0;
}

/*
 * l2.lock held. An append or a segment creation failed with ENOSPC or
 * EDQUOT: the filesystem filled up before cap. What the log has written
 * (placed less in flight) becomes the capacity, so reclaim starts making
 * room for new records instead of every later write failing. It stays
 * there until the next l2_open even if space comes back (a daemon that
 * shares its disk should not chase it up and down). Returns the new
 * capacity, or 0 when it was not lowered.
 */
uint64_t l2_disk_full(struct l2 *l2)
{
	uint64_t now = l2->used > l2->inflight ? l2->used - l2->inflight : 0;

	now &= ~(uint64_t)(L2_ALIGN - 1);
	if (now < 8 * L2_ALIGN)
		now = 8 * L2_ALIGN; /* l2_open's minimum; nothing big fits */
	if (now >= l2->cap)
		return 0;
	l2_set_space(l2, now, now);
	return now;
}

/* Without l2.lock: the log line for a capacity l2_disk_full lowered. */
void l2_log_disk_full(struct l2 *l2, uint64_t cap, int err)
{
	l2_logf(l2, "l2: disk full (%s, %s) at %" PRIu64 " bytes, below "
		"l2_size %" PRIu64 ": using that as capacity until restart",
		l2->dir, strerror(-err), cap, l2->cfg.size);
}

void l2_info_from_ent(const struct l2 *l2, const struct l2_seg *seg,
		      const struct l2_ent *e, struct l2_rec_info *info)
{
	memset(info, 0, sizeof(*info));
	info->loc.seg = seg->id;
	info->loc.blk = e->blk;
	info->loc.nblk = e->nblk;
	info->ns = l2->ns_names[e->ns];
	info->key = e->key;
	info->seq = e->seq;
	info->raw_len = e->raw_len;
	info->stored_len = e->stored_len;
	info->raw_sum = e->raw_sum;
	info->codec = e->codec;
	info->shuffle = e->shuffle;
	info->has_parent = e->has_parent;
	info->depth = e->depth;
	info->parent = e->parent;
}

/* l2.lock held. Index of the interned name, or -ENOMEM. */
long l2_ns_intern(struct l2 *l2, const char *ns)
{
	size_t i;
	char *s;

	for (i = l2->nns; i > 0; i--)
		if (!strcmp(l2->ns_names[i - 1], ns))
			return (long)(i - 1);
	if (l2->nns == l2->ns_cap) {
		size_t n = l2->ns_cap ? 2 * l2->ns_cap : 16;
		char **a = realloc(l2->ns_names, n * sizeof(*a));

		if (!a)
			return -ENOMEM;
		l2->ns_names = a;
		l2->ns_cap = n;
	}
	s = strdup(ns);
	if (!s)
		return -ENOMEM;
	l2->ns_names[l2->nns] = s;
	return (long)l2->nns++;
}

struct l2_ent *l2_ent_append(struct l2_seg *seg)
{
	struct l2_ent *e;

	if (seg->nents == seg->cap) {
		size_t n = seg->cap ? 2 * seg->cap : 64;
		struct l2_ent *a = realloc(seg->ents, n * sizeof(*a));

		if (!a)
			return NULL;
		seg->ents = a;
		seg->cap = n;
	}
	e = &seg->ents[seg->nents++];
	memset(e, 0, sizeof(*e));
	return e;
}

/* l2.lock held. Appends an entry to a segment (callers keep blk order). */
struct l2_ent *l2_ent_add(struct l2 *l2, struct l2_seg *seg,
			      const struct kvrec_hdr *h, uint32_t blk,
			      uint32_t nblk)
{
	struct l2_ent *e;
	long ns;

	ns = l2_ns_intern(l2, h->ns);
	if (ns < 0)
		return NULL;
	e = l2_ent_append(seg);
	if (!e)
		return NULL;
	memcpy(e->key.b, h->key, sizeof(e->key.b));
	e->seq = h->seq;
	e->raw_len = h->raw_len;
	e->stored_len = h->stored_len;
	e->raw_sum = h->raw_sum;
	e->blk = blk;
	e->nblk = nblk;
	e->ns = (uint32_t)ns;
	e->codec = h->codec;
	e->shuffle = h->shuffle;
	e->state = ENT_PENDING;
	e->has_parent = kvrec_hdr_link(h, &e->parent, &e->depth);
	return e;
}

/* Used by the I/O thread when placing a write (l2.lock held). */
struct l2_ent *l2_ent_add_rec(struct l2 *l2, struct l2_seg *seg,
			      const struct l2_rec *rec, uint32_t blk)
{
	return l2_ent_add(l2, seg, rec->hdr, blk, rec->nblk);
}

/* Whether the reclaimer has work: the oldest sealed segment must go (a
 * parked write waits, or room is short). l2.lock held. */
bool l2_need_reclaim(const struct l2 *l2)
{
	if (l2->rc_stop || !l2->nsegs || l2->segs[0] == l2->active)
		return false;
	if (l2->parked)
		return true;
	return l2->used + l2->seg_target / 4 > l2_room(l2);
}
