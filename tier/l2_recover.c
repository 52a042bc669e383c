/*
 * l2_recover.c - recovery at open: scan every segment for valid records
 * (record.h's checks), keep the newest copy of each key, punch the rest,
 * and hand the survivors to the engine.
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

#include "tier/l2_i.h"

#define L2_SCAN_WINDOW (8u << 20)

/* ---------------------------------------------------------- recovery */

struct scan_cand {
	struct l2_seg *seg;
	size_t ent;      /* index in seg->ents */
	uint32_t ns;
	struct kvfs_key key;
	uint64_t seq;
};

static int cand_by_key(const void *a, const void *b)
{
	const struct scan_cand *x = a, *y = b;
	int c;

	if (x->ns != y->ns)
		return x->ns < y->ns ? -1 : 1;
	c = memcmp(x->key.b, y->key.b, sizeof(x->key.b));
	if (c)
		return c;
	/* newest first */
	return x->seq > y->seq ? -1 : x->seq < y->seq ? 1 : 0;
}

static int cand_by_seq(const void *a, const void *b)
{
	const struct scan_cand *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq ? 1 : 0;
}

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

/* Scans one segment file, adding every record whose header and payload
 * verify to seg->ents (as PENDING) and to the candidates. */
static int scan_segment(struct l2 *l2, struct l2_seg *seg, struct scan *s)
{
	char name[64];
	struct stat sb;
	uint64_t off = 0, fsize;
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
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
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
		if (!e) {
			err = -ENOMEM;
			break;
		}
		if (s->n == s->cap) {
			size_t n = s->cap ? 2 * s->cap : 1024;
			struct scan_cand *c = realloc(s->c, n * sizeof(*c));

			if (!c) {
				err = -ENOMEM;
				break;
			}
			s->c = c;
			s->cap = n;
		}
		s->c[s->n++] = (struct scan_cand){
			.seg = seg, .ent = seg->nents - 1, .ns = e->ns,
			.key = e->key, .seq = e->seq,
		};
		if (h->seq >= atomic_load(&l2->next_seq))
			atomic_store(&l2->next_seq, h->seq + 1);
		off += rec_len;
	}
	seg->tail = l2_align_up(fsize);
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

	if (fallocate(seg->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      off, len) == 0)
		return;
	/* no hole punching here: zero the header block instead */
	if (pwrite(seg->fd, l2->zero, L2_ALIGN, off) != L2_ALIGN)
		l2_logf(l2, "l2: cannot erase a freed record in seg %" PRIu32
			": %s", seg->id, strerror(errno));
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

int l2_recover(struct l2 *l2, char *err, size_t errlen)
{
	struct scan s = { 0 };
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

	for (i = first; i < nids; i++) {
		struct l2_seg *seg = calloc(1, sizeof(*seg));

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
		rc = scan_segment(l2, seg, &s);
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

	/* newest copy of each (namespace, key) wins; older ones are freed so
	 * they cannot come back once the winner is unlinked */
	if (s.n)
		qsort(s.c, s.n, sizeof(*s.c), cand_by_key);
	{
		size_t w = 0;

		for (i = 0; i < s.n; i++) {
			if (i > 0 && s.c[i].ns == s.c[i - 1].ns &&
			    !memcmp(s.c[i].key.b, s.c[i - 1].key.b, 16)) {
				struct l2_ent *e = &s.c[i].seg->ents[s.c[i].ent];

				e->state = ENT_DEAD;
				punch_sync(l2, s.c[i].seg, e);
				continue;
			}
			s.c[w++] = s.c[i];
		}
		s.n = w;
	}
	if (s.n)
		qsort(s.c, s.n, sizeof(*s.c), cand_by_seq);
	for (i = 0; i < s.n; i++) {
		struct l2_seg *seg = s.c[i].seg;
		struct l2_ent *e = &seg->ents[s.c[i].ent];
		struct l2_rec_info info;

		l2_info_from_ent(l2, seg, e, &info);
		if (l2->cfg.recover && l2->cfg.recover(l2->cfg.cb_arg, &info)) {
			e->state = ENT_DEAD;
			punch_sync(l2, seg, e);
			continue;
		}
		l2_ent_live(l2, e);
		l2->st.recovered++;
	}
	for (i = 0; i < l2->nsegs; i++) {
		struct l2_seg *seg = l2->segs[i];

		for (size_t j = 0; j < seg->nents; j++)
			if (seg->ents[j].state == ENT_PENDING)
				seg->ents[j].state = ENT_DEAD;
	}
	l2->st.recover_ns = l2_now_ns() - t0;
	log_losses(l2, nids - first, l2->st.corrupt - corrupt0,
		   l2->st.torn - torn0, s.n);
out:
	closedir(d);
	free(ids);
	free(s.c);
	free(s.win);
	if (rc && !err[0])
		snprintf(err, errlen, "l2_dir %s: recovery: %s", l2->dir,
			 strerror(-rc));
	return rc;
}
