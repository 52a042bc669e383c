/*
 * l2_recover.c - recovery at open: take the index from the checkpoint
 * (record.h) when one verifies, scan the segments (or their parts) it
 * does not cover for valid records (record.h's checks), apply the unlink
 * log, keep the newest copy of each key, punch the rest, and hand the
 * survivors to the engine.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tier/l2/l2_i.h"

#define L2_SCAN_WINDOW (8u << 20)

/* ---------------------------------------------------------- recovery */

struct scan_cand {
	struct l2_seg *seg;
	size_t ent;      /* index in seg->ents */
	uint32_t ns;
	struct kvfs_key key;
	uint64_t seq;
	bool ckpt;       /* from the checkpoint (else found by the scan) */
};

struct scan {
	struct scan_cand *c;
	size_t n, cap;
	uint8_t *win;
	size_t win_cap;
	uint64_t win_off, win_len;
};

/* Makes [off, off + len) of the file (size fsize) available in the
 * window; returns a pointer to off, or NULL (with *err) when the bytes
 * cannot be read. */
static const uint8_t *scan_get(struct scan *s, int fd, uint64_t fsize,
			       uint64_t off, uint64_t len, int *err)
{
	uint64_t want;
	size_t got = 0;

	if (off >= s->win_off && off + len <= s->win_off + s->win_len)
		return s->win + (off - s->win_off);
	want = len > L2_SCAN_WINDOW ? len : L2_SCAN_WINDOW;
	if (off + want > fsize)
		want = fsize - off;
	if (want < len) {
		*err = -ENODATA;
		return NULL;
	}
	if (want > s->win_cap) {
		void *p = realloc(s->win, want);

		if (!p) {
			*err = -ENOMEM;
			return NULL;
		}
		s->win = p;
		s->win_cap = want;
	}
	while (got < want) {
		ssize_t n = pread(fd, s->win + got, want - got, (off_t)(off + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			*err = n < 0 ? -errno : -ENODATA;
			s->win_len = 0;
			return NULL;
		}
		got += (size_t)n;
	}
	s->win_off = off;
	s->win_len = want;
	return s->win;
}

static int add_cand_ent(struct scan *s, struct l2_seg *seg)
{
	const struct l2_ent *e = &seg->ents[seg->nents - 1];

	if (s->n == s->cap) {
		size_t n = s->cap ? 2 * s->cap : 1024;
		struct scan_cand *c = realloc(s->c, n * sizeof(*c));

		if (!c)
			return -ENOMEM;
		s->c = c;
		s->cap = n;
	}
	s->c[s->n++] = (struct scan_cand){
		.seg = seg, .ent = seg->nents - 1, .ns = e->ns,
		.key = e->key, .seq = e->seq,
	};
	return 0;
}

/* Scans one segment file from byte off, adding every record whose header
 * and payload verify to seg->ents (as PENDING) and to the candidates. */
static int scan_segment(struct l2 *l2, struct l2_seg *seg, struct scan *s,
			uint64_t off)
{
	char name[64];
	struct stat sb;
	uint64_t fsize, off0 = off;
	int fd, err = 0;

	l2_seg_name(name, sizeof(name), seg->id);
	fd = openat(l2->dir_fd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb)) {
		err = -errno;
		close(fd);
		return err;
	}
	fsize = (uint64_t)sb.st_size;
	if (off >= fsize) {
		seg->tail = l2_align_up(fsize);
		close(fd);
		return 0;
	}
	posix_fadvise(fd, (off_t)off, 0, POSIX_FADV_SEQUENTIAL);
	s->win_len = 0;
	while (off + sizeof(struct kvrec_hdr) <= fsize) {
		const struct kvrec_hdr *h;
		const uint8_t *p;
		uint64_t rec_len;
		struct l2_ent *e;

		p = scan_get(s, fd, fsize, off, sizeof(*h), &err);
		if (!p)
			break;
		h = (const struct kvrec_hdr *)p;
		if (h->magic != KVREC_MAGIC) {
			/* a hole, padding of a failed write, or a punched
			 * (freed) record: resynchronize on the next block */
			off += L2_ALIGN;
			continue;
		}
		if (l2_hdr_check(l2, h)) {
			l2->st.corrupt++;
			off += L2_ALIGN;
			continue;
		}
		rec_len = l2_record_bytes(h->stored_len);
		if (off + sizeof(*h) + h->stored_len > fsize) {
			/* cut off by the end of the file: a torn append */
			l2->st.torn++;
			off += L2_ALIGN;
			continue;
		}
		p = scan_get(s, fd, fsize, off, sizeof(*h) + h->stored_len, &err);
		if (!p)
			break;
		h = (const struct kvrec_hdr *)p;
		if (kvrec_payload_check(h, p + sizeof(*h))) {
			l2->st.corrupt++;
			off += L2_ALIGN;
			continue;
		}
		if (seg->nents && seg->ents[seg->nents - 1].blk >= off / L2_ALIGN) {
			off += L2_ALIGN;
			continue;
		}
		e = l2_ent_add(l2, seg, h, (uint32_t)(off / L2_ALIGN),
			    (uint32_t)(rec_len / L2_ALIGN));
		if (!e || add_cand_ent(s, seg)) {
			err = -ENOMEM;
			break;
		}
		if (h->seq >= atomic_load(&l2->next_seq))
			atomic_store(&l2->next_seq, h->seq + 1);
		off += rec_len;
	}
	seg->tail = l2_align_up(fsize);
	if (fsize > off0)
		l2->st.recover_scan_bytes += fsize - off0;
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	if (err == -ENODATA)
		err = 0; /* a short file: what it held was scanned */
	return err;
}

static void punch_sync(struct l2 *l2, struct l2_seg *seg,
		       const struct l2_ent *e)
{
	off_t off = (off_t)e->blk * L2_ALIGN, len = (off_t)e->nblk * L2_ALIGN;

	/* logged too: a checkpoint that still lists it must not bring it
	 * back after a kill */
	l2_flog_append(l2, seg->id, e->blk, e->seq);
	if (fallocate(seg->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      off, len) == 0)
		return;
	/* no hole punching here: zero the header block instead */
	if (pwrite(seg->fd, l2->zero, L2_ALIGN, off) != L2_ALIGN)
		l2_logf(l2, "l2: cannot erase a freed record in seg %" PRIu32
			": %s", seg->id, strerror(errno));
}

/*
 * Newest copy of each (namespace, key) wins (the highest seq; on a tie, a
 * reclaim's move, the later one in log order); the others are marked dead
 * and erased so they cannot come back once the winner is unlinked. A hash
 * table of candidate indexes (linear probing): O(n) for the millions of
 * entries a checkpoint brings, where sorting them took seconds.
 */
static int dedupe(struct l2 *l2, struct scan_cand *c, size_t n)
{
	size_t cap = 64, mask, i;
	uint32_t *slot;

	while (cap < 2 * n)
		cap *= 2;
	slot = malloc(cap * sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	memset(slot, 0xff, cap * sizeof(*slot));
	mask = cap - 1;
	for (i = 0; i < n; i++) {
		size_t h;

		if (c[i].seg->ents[c[i].ent].state == ENT_DEAD)
			continue; /* the unlink log's */
		h = (size_t)kvrec_sum(c[i].key.b, sizeof(c[i].key.b), c[i].ns) &
		    mask;
		for (;; h = (h + 1) & mask) {
			struct scan_cand *o, *lose;

			if (slot[h] == UINT32_MAX) {
				slot[h] = (uint32_t)i;
				break;
			}
			o = &c[slot[h]];
			if (o->ns != c[i].ns ||
			    memcmp(o->key.b, c[i].key.b, sizeof(o->key.b)))
				continue;
			lose = c[i].seq >= o->seq ? o : &c[i];
			if (lose == o)
				slot[h] = (uint32_t)i;
			lose->seg->ents[lose->ent].state = ENT_DEAD;
			punch_sync(l2, lose->seg, &lose->seg->ents[lose->ent]);
			break;
		}
	}
	free(slot);
	return 0;
}

static int seg_id_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Lists seg-*.kvl2, deletes the oldest beyond what size allows, scans the
 * rest and reports the newest copy of each key. */
/*
 * Says, in one line each, what recovery could not take: segments written
 * under an l2.id that is gone or changed (nothing verifies: the whole L2 is
 * lost, which is worth knowing), and corrupt or torn records (counted in
 * the stats too; one summary line, not one per record).
 */
static void log_losses(struct l2 *l2, size_t nsegs, uint64_t corrupt,
		       uint64_t torn, uint64_t valid)
{
	if (l2->salt_new && nsegs)
		l2_logf(l2, "l2_dir %s: l2.id was missing (deleted?) and a new "
			"one was written: the %zu segment file(s) there cannot "
			"be verified, %" PRIu64 " record(s) dropped; L2 starts "
			"empty", l2->dir, nsegs, corrupt);
	else if (corrupt && !valid)
		l2_logf(l2, "l2_dir %s: none of the %" PRIu64 " record(s) in "
			"%zu segment(s) verifies against l2.id: l2.id was "
			"changed or replaced (or every record is damaged); "
			"they are dropped, L2 starts empty", l2->dir, corrupt,
			nsegs);
	else if (corrupt || torn)
		l2_logf(l2, "l2_dir %s: recovery skipped %" PRIu64 " corrupt "
			"and %" PRIu64 " torn record(s) (never served; %" PRIu64
			" recovered)", l2->dir, corrupt, torn, valid);
}

/* ---------------------------------------------------------- checkpoint */

struct ckpt {
	uint8_t *buf;     /* the whole file, checked */
	size_t len;
	struct l2_ckpt_info ci;
	uint32_t *nsmap;  /* checkpoint namespace index -> l2's */
	size_t pos;       /* l2_ckpt_next_seg cursor */
	const struct kvckpt_seg *cur;
	const struct kvckpt_ent *cur_ents;
	const struct kvckpt_link *cur_links;
	uint32_t cur_nlinks;
	uint64_t gone;    /* entries of segments no longer on disk */
};

/* The next SEG block (and its links) of the checkpoint, in ck->cur. */
static void ckpt_next(struct ckpt *ck)
{
	ck->cur = l2_ckpt_next_seg(ck->buf, ck->len, &ck->pos, &ck->cur_ents,
				   &ck->cur_links, &ck->cur_nlinks);
}

/* Reads and checks l2.ckpt: 0, or -errno with why (the fallback's
 * reason: ENOENT missing, ESTALE another l2_dir, EBADMSG damaged). */
static int ckpt_read(struct l2 *l2, struct ckpt *ck, char *why,
		     size_t whylen)
{
	struct stat sb;
	size_t got = 0;
	int fd, rc;

	fd = openat(l2->dir_fd, KVCKPT_FILE, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(why, whylen, "%s", rc == -ENOENT ? "there is none" :
			 strerror(-rc));
		return rc;
	}
	if (fstat(fd, &sb) || !(ck->buf = malloc(sb.st_size ? sb.st_size : 1))) {
		rc = errno ? -errno : -ENOMEM;
		close(fd);
		snprintf(why, whylen, "%s", strerror(-rc));
		return rc;
	}
	while (got < (size_t)sb.st_size) {
		ssize_t n = read(fd, ck->buf + got, (size_t)sb.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	ck->len = got;
	rc = l2_ckpt_check(ck->buf, ck->len, l2->salt, &ck->ci, why, whylen);
	if (rc)
		return rc;
	ck->nsmap = malloc((ck->ci.nns ? ck->ci.nns : 1) * sizeof(*ck->nsmap));
	if (!ck->nsmap) {
		snprintf(why, whylen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	{
		const uint8_t *p = ck->buf + ck->ci.ns_off;
		char name[KVFS_NS_NAME_MAX + 1];

		for (uint32_t i = 0; i < ck->ci.nns; i++) {
			uint16_t n;
			long id;

			memcpy(&n, p, 2);
			memcpy(name, p + 2, n);
			name[n] = 0;
			p += 2 + n;
			id = l2_ns_intern(l2, name);
			if (id < 0) {
				snprintf(why, whylen, "%s", strerror(ENOMEM));
				return -ENOMEM;
			}
			ck->nsmap[i] = (uint32_t)id;
		}
	}
	ckpt_next(ck);
	return 0;
}

/* Adds the checkpoint's entries for seg (file size fsize) to seg->ents
 * (PENDING) and the candidates; returns where the scan starts. */
static int ckpt_segment(struct l2 *l2, struct ckpt *ck, struct l2_seg *seg,
			uint64_t fsize, struct scan *s, uint64_t *scan_from)
{
	*scan_from = 0;
	/* segments of the checkpoint deleted since (reclaim, by hand) */
	while (ck->cur && ck->cur->id < seg->id) {
		ck->gone += ck->cur->nents;
		ckpt_next(ck);
	}
	if (!ck->cur || ck->cur->id != seg->id)
		return 0; /* newer than the checkpoint: scanned whole */
	if (seg->cap < seg->nents + ck->cur->nents) {
		/* one allocation, not a doubling series, per segment */
		size_t n = seg->nents + ck->cur->nents + 64;
		struct l2_ent *a = realloc(seg->ents, n * sizeof(*a));

		if (!a)
			return -ENOMEM;
		seg->ents = a;
		seg->cap = n;
	}
	for (uint32_t i = 0, li = 0; i < ck->cur->nents; i++) {
		struct kvckpt_ent ce;
		struct kvckpt_link cl = { 0 };
		struct l2_ent *e;

		/* links come by increasing entry index (checked) */
		if (li < ck->cur_nlinks) {
			memcpy(&cl, &ck->cur_links[li], sizeof(cl));
			if (cl.ent == i)
				li++;
			else
				memset(&cl, 0, sizeof(cl));
		}
		memcpy(&ce, &ck->cur_ents[i], sizeof(ce));
		if ((uint64_t)(ce.blk + ce.nblk) * L2_ALIGN > fsize) {
			ck->gone++; /* the file was cut short */
			continue;
		}
		e = l2_ent_append(seg);
		if (!e || add_cand_ent(s, seg))
			return -ENOMEM;
		memcpy(e->key.b, ce.key, sizeof(e->key.b));
		e->seq = ce.seq;
		e->raw_len = ce.raw_len;
		e->stored_len = ce.stored_len;
		e->raw_sum = ce.raw_sum;
		e->blk = ce.blk;
		e->nblk = ce.nblk;
		e->ns = ck->nsmap[ce.ns];
		e->codec = ce.codec;
		e->shuffle = ce.shuffle;
		e->state = ENT_PENDING;
		e->depth = cl.depth;
		e->has_parent = cl.flags & KVREC_F_PARENT;
		memcpy(e->parent.b, cl.parent, sizeof(e->parent.b));
		s->c[s->n - 1].ns = e->ns;
		s->c[s->n - 1].key = e->key;
		s->c[s->n - 1].seq = e->seq;
		s->c[s->n - 1].ckpt = true;
	}
	*scan_from = ck->cur->scan_from;
	ckpt_next(ck);
	return 0;
}

/* Erases again what the unlink log names (its punch may not have run
 * before a kill; a checkpoint may list it). */
static void apply_flog(struct l2 *l2, const struct kvckpt_freed *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct l2_seg *seg = l2_seg_find(l2, f[i].seg);
		struct l2_ent *e = seg ? l2_ent_find(seg, f[i].blk) : NULL;

		if (!e || e->seq != f[i].seq || e->state == ENT_DEAD)
			continue;
		e->state = ENT_DEAD;
		punch_sync(l2, seg, e);
	}
}

int l2_recover(struct l2 *l2, char *err, size_t errlen)
{
	struct scan s = { 0 };
	struct ckpt ck = { 0 };
	struct kvckpt_freed *freed = NULL;
	size_t nfreed = 0, valid = 0;
	bool use_ckpt, flog_damaged = false;
	char why[160];
	uint32_t *ids = NULL;
	size_t nids = 0, cap = 0, i, first = 0, keep;
	uint64_t t0 = l2_now_ns(), room;
	uint64_t corrupt0 = l2->st.corrupt, torn0 = l2->st.torn;
	struct dirent *de;
	DIR *d;
	int rc = 0, dfd;

	dfd = dup(l2->dir_fd);
	if (dfd < 0 || !(d = fdopendir(dfd))) {
		rc = -errno;
		if (dfd >= 0)
			close(dfd);
		snprintf(err, errlen, "l2_dir %s: %s", l2->dir, strerror(-rc));
		return rc;
	}
	while ((de = readdir(d))) {
		unsigned long long id;
		char *end;

		if (strncmp(de->d_name, "seg-", 4))
			continue;
		id = strtoull(de->d_name + 4, &end, 16);
		if (end != de->d_name + 20 || strcmp(end, ".kvl2") || id > UINT32_MAX - 1)
			continue;
		if (nids == cap) {
			uint32_t *a;

			cap = cap ? 2 * cap : 64;
			a = realloc(ids, cap * sizeof(*a));
			if (!a) {
				rc = -ENOMEM;
				goto out;
			}
			ids = a;
		}
		ids[nids++] = (uint32_t)id;
	}
	if (nids) {
		qsort(ids, nids, sizeof(*ids), seg_id_cmp);
		l2->next_seg = ids[nids - 1] + 1;
	}

	/* l2_size shrank since the last run: drop the oldest segments.
	 * Everything up to cap is kept, reserve included: a crash between a
	 * reclaim's moves (which use the reserve) and the deletion of its
	 * segment leaves that much with l2_size unchanged, and reclaim
	 * brings it back under cap - reserve as soon as the log runs. */
	for (keep = 0, room = 0; keep < nids; keep++) {
		char name[64];
		struct stat sb;
		uint64_t sz = 0;

		l2_seg_name(name, sizeof(name), ids[nids - 1 - keep]);
		if (fstatat(l2->dir_fd, name, &sb, 0) == 0)
			sz = l2_align_up((uint64_t)sb.st_size);
		if (room + sz > l2->cap)
			break;
		room += sz;
	}
	if (nids > keep) {
		first = nids - keep;
		for (i = 0; i < first; i++) {
			char name[64];

			l2_seg_name(name, sizeof(name), ids[i]);
			unlinkat(l2->dir_fd, name, 0);
		}
		l2_logf(l2, "l2: %zu old segments beyond l2_size deleted", first);
	}

	/* the unlink log first: a damaged one makes the checkpoint unsafe */
	rc = l2_flog_load(l2, &freed, &nfreed, &flog_damaged);
	if (rc) {
		snprintf(err, errlen, "l2_dir %s: unlink log %s: %s", l2->dir,
			 KVCKPT_FREED_FILE, strerror(-rc));
		goto out;
	}
	if (l2->salt_new) {
		use_ckpt = false;
		snprintf(why, sizeof(why), "l2.id is new");
	} else if (flog_damaged) {
		use_ckpt = false;
		snprintf(why, sizeof(why), "the unlink log %s is damaged",
			 KVCKPT_FREED_FILE);
	} else {
		int crc = ckpt_read(l2, &ck, why, sizeof(why));

		if (crc == -ENOMEM) {
			rc = crc;
			goto out;
		}
		use_ckpt = crc == 0;
	}
	if (use_ckpt) {
		/* room for a tail too: growing this array later copies all
		 * of it (untouched capacity costs no memory) */
		s.cap = (size_t)ck.ci.records + (size_t)ck.ci.records / 2 +
			65536;
		s.c = malloc(s.cap * sizeof(*s.c));
		if (!s.c) {
			rc = -ENOMEM;
			goto out;
		}
		if (ck.ci.next_seg > l2->next_seg)
			l2->next_seg = ck.ci.next_seg;
		if (ck.ci.next_seq > atomic_load(&l2->next_seq))
			atomic_store(&l2->next_seq, ck.ci.next_seq);
	} else if (nids - first || l2->nns) {
		/* not for an empty l2_dir: nothing to say there */
		if (!(l2->salt_new))
			l2_logf(l2, "l2_dir %s: no usable checkpoint (%s: %s): "
				"scanning every segment", l2->dir,
				KVCKPT_FILE, why);
		/* never trusted later either (it may miss frees the scan
		 * applies now) */
		unlinkat(l2->dir_fd, KVCKPT_FILE, 0);
	} else {
		unlinkat(l2->dir_fd, KVCKPT_FILE, 0);
	}

	for (i = first; i < nids; i++) {
		struct l2_seg *seg = calloc(1, sizeof(*seg));
		uint64_t from = 0;

		if (!seg) {
			rc = -ENOMEM;
			goto out;
		}
		seg->id = ids[i];
		seg->refs = 1;
		seg->state = SEG_SEALED;
		seg->fd = -1;
		rc = l2_seg_insert(l2, seg);
		if (rc) {
			free(seg);
			goto out;
		}
		if (use_ckpt) {
			char name[64];
			struct stat sb;

			l2_seg_name(name, sizeof(name), seg->id);
			rc = fstatat(l2->dir_fd, name, &sb, 0) ? -errno : 0;
			if (!rc)
				rc = ckpt_segment(l2, &ck, seg,
						  (uint64_t)sb.st_size, &s, &from);
		}
		if (!rc)
			rc = scan_segment(l2, seg, &s, from);
		l2->used += seg->tail;
		if (rc == 0) {
			rc = l2_seg_open_fd(l2, seg->id, 0);
			if (rc >= 0) {
				seg->fd = rc;
				rc = 0;
			}
		}
		if (rc) {
			snprintf(err, errlen, "l2_dir %s: segment %" PRIu32 ": %s",
				 l2->dir, seg->id, strerror(-rc));
			goto out;
		}
	}
	if (use_ckpt)
		while (ck.cur) {
			ck.gone += ck.cur->nents;
			ckpt_next(&ck);
		}
	apply_flog(l2, freed, nfreed);

	/* in log order (segment, block): about seq order, and what a
	 * checkpoint holds already */
	if (s.n > UINT32_MAX - 1) {
		rc = -EOVERFLOW;
		goto out;
	}
	rc = dedupe(l2, s.c, s.n);
	if (rc)
		goto out;
	for (i = 0; i < s.n; i++) {
		struct l2_seg *seg = s.c[i].seg;
		struct l2_ent *e = &seg->ents[s.c[i].ent];
		struct l2_rec_info info;

		if (e->state == ENT_DEAD)
			continue;
		valid++;
		l2_info_from_ent(l2, seg, e, &info);
		info.scanned = !s.c[i].ckpt;
		if (l2->cfg.recover && l2->cfg.recover(l2->cfg.cb_arg, &info)) {
			e->state = ENT_DEAD;
			punch_sync(l2, seg, e);
			continue;
		}
		l2_ent_live(l2, e);
		l2->st.recovered++;
		if (s.c[i].ckpt)
			l2->st.recover_ckpt_records++;
		else
			l2->st.recover_scan_records++;
	}
	for (i = 0; i < l2->nsegs; i++) {
		struct l2_seg *seg = l2->segs[i];

		for (size_t j = 0; j < seg->nents; j++)
			if (seg->ents[j].state == ENT_PENDING)
				seg->ents[j].state = ENT_DEAD;
	}
	if (use_ckpt && ck.ci.order_len && l2->cfg.ckpt_load)
		l2->cfg.ckpt_load(l2->cfg.cb_arg, ck.buf + ck.ci.order_off,
				  ck.ci.order_len, ck.ci.order_count);
	l2->st.recover_ckpt = use_ckpt;
	l2->changes = 0;
	/* the periodic thread writes a fresh checkpoint first thing when
	 * this one left anything to scan, drop or erase */
	l2->ckpt_changes = use_ckpt && !l2->st.recover_scan_records &&
			   !ck.gone && !nfreed ? 0 : 1;
	l2->st.recover_ns = l2_now_ns() - t0;
	log_losses(l2, nids - first, l2->st.corrupt - corrupt0,
		   l2->st.torn - torn0, valid);
out:
	closedir(d);
	free(ids);
	free(s.c);
	free(s.win);
	free(ck.buf);
	free(ck.nsmap);
	free(freed);
	if (rc && !err[0])
		snprintf(err, errlen, "l2_dir %s: recovery: %s", l2->dir,
			 strerror(-rc));
	return rc;
}
