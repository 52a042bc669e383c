/*
 * l2.c - the L2 segment log: open and lock, recovery, building and
 * decoding records, synchronous bounded reads, freeing, stats.
 * The I/O thread is in l2_io.c, the reclaim thread in l2_reclaim.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "tier/l2_i.h"

#define L2_POOL_BUFS 16
#define L2_POOL_WS 8
#define L2_SCAN_WINDOW (8u << 20)

/* ----------------------------------------------------------- helpers */

void l2_logf(struct l2 *l2, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!l2->cfg.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	l2->cfg.log(l2->cfg.log_arg, msg);
}

/* Counts an error and logs it, but not a flood of the same one: the first
 * of each kind and then one in 1000. Takes l2.lock. */
void l2_log_err(struct l2 *l2, int err, const char *what, uint32_t seg)
{
	bool say;

	pthread_mutex_lock(&l2->lock);
	l2->st.errors++;
	say = err != l2->last_err_logged || ++l2->errs_since_log >= 1000;
	if (say) {
		l2->last_err_logged = err;
		l2->errs_since_log = 0;
	}
	pthread_mutex_unlock(&l2->lock);
	if (say)
		l2_logf(l2, "l2: %s (%s/seg-%016" PRIx32 ".kvl2): %s", what,
			l2->dir, seg, strerror(-err));
}

uint64_t l2_sum(const void *p, size_t len, uint64_t seed)
{
	return XXH3_64bits_withSeed(p, len, seed);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t align_up(uint64_t v)
{
	return (v + L2_ALIGN - 1) & ~(uint64_t)(L2_ALIGN - 1);
}

/* Aligned I/O buffers are pooled: a fresh 2 MiB buffer costs ~500 page
 * faults, about as long as decompressing the chunk. l2.lock taken here. */
void *l2_buf_get(struct l2 *l2, size_t len, size_t *cap)
{
	struct l2_buf **pp, *b;
	void *p;

	len = (len + 65535) & ~(size_t)65535;
	pthread_mutex_lock(&l2->lock);
	for (pp = &l2->bufs; (b = *pp); pp = &b->next) {
		if (b->cap >= len && b->cap <= 4 * len) {
			*pp = b->next;
			l2->nbufs--;
			pthread_mutex_unlock(&l2->lock);
			p = b->p;
			*cap = b->cap;
			free(b);
			return p;
		}
	}
	pthread_mutex_unlock(&l2->lock);
	if (posix_memalign(&p, L2_ALIGN, len))
		return NULL;
	*cap = len;
	return p;
}

void l2_buf_put(struct l2 *l2, void *p, size_t cap)
{
	struct l2_buf *b;

	if (!p)
		return;
	b = malloc(sizeof(*b));
	pthread_mutex_lock(&l2->lock);
	if (!b || l2->nbufs >= L2_POOL_BUFS) {
		pthread_mutex_unlock(&l2->lock);
		free(b);
		free(p);
		return;
	}
	b->p = p;
	b->cap = cap;
	b->next = l2->bufs;
	l2->bufs = b;
	l2->nbufs++;
	pthread_mutex_unlock(&l2->lock);
}

static struct codec_ws *ws_get(struct l2 *l2)
{
	struct l2_ws_item *it;
	struct codec_ws *ws;

	pthread_mutex_lock(&l2->lock);
	it = l2->wss;
	if (it)
		l2->wss = it->next;
	pthread_mutex_unlock(&l2->lock);
	if (!it)
		return codec_ws_new();
	ws = it->ws;
	free(it);
	return ws;
}

static void ws_put(struct l2 *l2, struct codec_ws *ws)
{
	struct l2_ws_item *it, *p;
	size_t n = 0;

	if (!ws)
		return;
	it = malloc(sizeof(*it));
	pthread_mutex_lock(&l2->lock);
	for (p = l2->wss; p; p = p->next)
		n++;
	if (!it || n >= L2_POOL_WS) {
		pthread_mutex_unlock(&l2->lock);
		free(it);
		codec_ws_free(ws);
		return;
	}
	it->ws = ws;
	it->next = l2->wss;
	l2->wss = it;
	pthread_mutex_unlock(&l2->lock);
}

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

/* l2.lock held: a record leaves the live set. */
void l2_ent_kill(struct l2 *l2, struct l2_ent *e)
{
	if (e->state == ENT_LIVE) {
		l2->st.bytes -= (uint64_t)e->nblk * L2_ALIGN;
		l2->st.raw_bytes -= e->raw_len;
		l2->st.records--;
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
	}
	e->state = ENT_LIVE;
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

static void seg_name(char *buf, size_t len, uint32_t id)
{
	snprintf(buf, len, "seg-%016" PRIx32 ".kvl2", id);
}

/* Opens a segment file, with O_DIRECT unless the filesystem refuses it
 * (tmpfs on older kernels, some FUSE filesystems): then buffered, logged
 * once. */
static int seg_open_fd(struct l2 *l2, uint32_t id, int flags)
{
	char name[64];
	int fd;

	seg_name(name, sizeof(name), id);
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

static int seg_insert(struct l2 *l2, struct l2_seg *seg)
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
	fd = seg_open_fd(l2, l2->next_seg, O_CREAT | O_EXCL);
	if (fd < 0) {
		free(seg);
		return fd;
	}
	seg->id = l2->next_seg++;
	seg->fd = fd;
	seg->refs = 1;
	seg->state = SEG_ACTIVE;
	rc = seg_insert(l2, seg);
	if (rc) {
		char name[64];

		seg_name(name, sizeof(name), seg->id);
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

/* ----------------------------------------------------------- headers */

int l2_hdr_check(const struct l2 *l2, const struct l2_rec_hdr *h)
{
	if (h->magic != L2_MAGIC || h->version != L2_FORMAT_VERSION ||
	    h->hdr_len != sizeof(*h))
		return -EBADMSG;
	if (h->hdr_sum != l2_sum(h, offsetof(struct l2_rec_hdr, hdr_sum),
				 l2->salt))
		return -EBADMSG;
	if (h->codec == CODEC_NONE) {
		if (h->stored_len != h->raw_len || h->shuffle)
			return -EBADMSG;
	} else if (h->codec != CODEC_ZSTD || !codec_shuffle_ok(h->shuffle)) {
		return -EBADMSG;
	}
	if (!h->ns[0] || memchr(h->ns, 0, sizeof(h->ns)) == NULL)
		return -EBADMSG;
	if (h->stored_len > l2->seg_size || h->raw_len > (1ull << 40))
		return -EBADMSG;
	return 0;
}

/* ----------------------------------------------- parallel decoding */

/* mt_lock held: takes job out of the queue (its last frame is taken). */
static void mt_unlink(struct l2 *l2, struct l2_mt *job)
{
	struct l2_mt **pp;

	for (pp = &l2->mt_head; *pp; pp = &(*pp)->next)
		if (*pp == job) {
			*pp = job->next;
			return;
		}
}

/* Decodes frames of job until none is left to take (mt_lock held on entry
 * and return). */
static void mt_work(struct l2 *l2, struct l2_mt *job, struct codec_ws *ws)
{
	while (job->next_frame < job->n) {
		const struct codec_frame *f = &job->f[job->next_frame++];
		int rc;

		if (job->next_frame == job->n)
			mt_unlink(l2, job);
		pthread_mutex_unlock(&l2->mt_lock);
		rc = ws ? codec_decode_frame(ws, job->src + f->src_off,
					     f->src_len, job->out + f->dst_off,
					     f->dst_len) : -ENOMEM;
		pthread_mutex_lock(&l2->mt_lock);
		if (rc && !job->err)
			job->err = rc;
		if (++job->done == job->n)
			pthread_cond_broadcast(&l2->mt_done);
	}
}

static void *mt_main(void *arg)
{
	struct l2 *l2 = arg;
	struct codec_ws *ws = codec_ws_new();

	pthread_mutex_lock(&l2->mt_lock);
	while (!l2->mt_stop) {
		if (!l2->mt_head) {
			pthread_cond_wait(&l2->mt_cv, &l2->mt_lock);
			continue;
		}
		mt_work(l2, l2->mt_head, ws);
	}
	pthread_mutex_unlock(&l2->mt_lock);
	codec_ws_free(ws);
	return NULL;
}

/* Decodes the frames f[0..n) of src into out on this thread and the
 * helpers: a 2 MiB chunk is 4 frames, so one reader uses every core. */
static int mt_decode(struct l2 *l2, struct codec_ws *ws, const uint8_t *src,
		     uint8_t *out, const struct codec_frame *f, size_t n)
{
	struct l2_mt job = { .src = src, .out = out, .f = f, .n = n };

	pthread_mutex_lock(&l2->mt_lock);
	job.next = l2->mt_head;
	l2->mt_head = &job;
	pthread_cond_broadcast(&l2->mt_cv);
	mt_work(l2, &job, ws);
	while (job.done < job.n)
		pthread_cond_wait(&l2->mt_done, &l2->mt_lock);
	pthread_mutex_unlock(&l2->mt_lock);
	return job.err;
}

static void mt_start(struct l2 *l2)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int want = ncpu > 1 ? (int)(ncpu - 1) : 0;

	if (want > L2_MT_MAX)
		want = L2_MT_MAX;
	for (int i = 0; i < want; i++) {
		if (pthread_create(&l2->mt_th[i], NULL, mt_main, l2))
			break;
		l2->mt_n++;
	}
}

static void mt_stop(struct l2 *l2)
{
	pthread_mutex_lock(&l2->mt_lock);
	l2->mt_stop = true;
	pthread_cond_broadcast(&l2->mt_cv);
	pthread_mutex_unlock(&l2->mt_lock);
	for (int i = 0; i < l2->mt_n; i++)
		pthread_join(l2->mt_th[i], NULL);
	l2->mt_n = 0;
}

/* Verifies the payload and decodes it: the common tail of reads, pending
 * record decodes and nothing else. */
static int rec_decode(struct l2 *l2, const struct l2_rec_hdr *h, void *dst,
		      size_t len)
{
	const void *payload = (const uint8_t *)h + sizeof(*h);
	struct codec_ws *ws;
	int rc;

	if (h->raw_len != len)
		return -EBADMSG;
	/* No stored_sum check here (recovery and reclaim check it): raw_sum
	 * below covers every byte served end to end, and zstd decodes any
	 * input safely into at most len bytes. It saves a pass over the
	 * payload on every promotion. */
	ws = h->codec == CODEC_NONE ? NULL : ws_get(l2);
	if (h->codec != CODEC_NONE && !ws)
		return -ENOMEM;
	if (h->codec == CODEC_ZSTD && l2->mt_n > 0 &&
	    len >= 2 * (size_t)CODEC_FRAME_BYTES) {
		/* one frame per CODEC_FRAME_BYTES of input: 128 for a 64 MiB
		 * chunk, more for larger max_chunk */
		size_t maxf = (len + CODEC_FRAME_BYTES - 1) / CODEC_FRAME_BYTES;
		struct codec_frame fbuf[160];
		struct codec_frame *f = maxf <= 160 ? fbuf :
					malloc(maxf * sizeof(*f));
		long n = f ? codec_frames(payload, h->stored_len, len, f, maxf)
			   : -ENOMEM;
		uint8_t *out = dst;

		if (n < 0) {
			rc = (int)n;
		} else {
			if (h->shuffle)
				out = codec_ws_scratch(ws, len);
			rc = out ? mt_decode(l2, ws, payload, out, f, (size_t)n)
				 : -ENOMEM;
			if (rc == 0 && h->shuffle)
				codec_unshuffle(dst, out, len, h->shuffle);
		}
		if (f != fbuf)
			free(f);
	} else {
		rc = codec_decompress(ws, h->codec, h->shuffle, payload,
				      h->stored_len, dst, len);
	}
	ws_put(l2, ws);
	if (rc)
		return rc == -ENOMEM ? rc : -EBADMSG;
	if (l2_sum(dst, len, 0) != h->raw_sum)
		return -EBADMSG;
	return 0;
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
}

/* l2.lock held. Index of the interned name, or -ENOMEM. */
static long ns_intern(struct l2 *l2, const char *ns)
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

/* l2.lock held. Appends an entry to a segment (callers keep blk order). */
static struct l2_ent *ent_add(struct l2 *l2, struct l2_seg *seg,
			      const struct l2_rec_hdr *h, uint32_t blk,
			      uint32_t nblk)
{
	struct l2_ent *e;
	long ns;

	if (seg->nents == seg->cap) {
		size_t n = seg->cap ? 2 * seg->cap : 64;
		struct l2_ent *a = realloc(seg->ents, n * sizeof(*a));

		if (!a)
			return NULL;
		seg->ents = a;
		seg->cap = n;
	}
	ns = ns_intern(l2, h->ns);
	if (ns < 0)
		return NULL;
	e = &seg->ents[seg->nents++];
	memset(e, 0, sizeof(*e));
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
	return e;
}

/* Used by the I/O thread when placing a write (l2.lock held). */
struct l2_ent *l2_ent_add_rec(struct l2 *l2, struct l2_seg *seg,
			      const struct l2_rec *rec, uint32_t blk);
struct l2_ent *l2_ent_add_rec(struct l2 *l2, struct l2_seg *seg,
			      const struct l2_rec *rec, uint32_t blk)
{
	return ent_add(l2, seg, rec->hdr, blk, rec->nblk);
}

/* ----------------------------------------------------------- records */

int l2_build(struct l2 *l2, const char *ns, const struct kvfs_key *key,
	     const void *raw, size_t len, int level, int shuffle,
	     struct l2_rec **out)
{
	uint64_t max_bytes = l2_record_bytes(len);
	struct l2_rec_hdr *h;
	struct l2_rec *rec;
	size_t nslen, cap;
	long stored = -E2BIG;
	uint8_t *payload;

	if (!ns || !key || (!raw && len) || !out || !codec_shuffle_ok(shuffle) ||
	    level < 0 || level > CODEC_LEVEL_MAX)
		return -EINVAL;
	nslen = strnlen(ns, KVFS_NS_NAME_MAX + 1);
	if (nslen == 0 || nslen > KVFS_NS_NAME_MAX)
		return -EINVAL;
	if (max_bytes > l2->seg_size)
		return -EFBIG;
	rec = calloc(1, sizeof(*rec));
	if (!rec)
		return -ENOMEM;
	rec->hdr = l2_buf_get(l2, max_bytes, &rec->cap);
	if (!rec->hdr) {
		free(rec);
		return -ENOMEM;
	}
	h = rec->hdr;
	memset(h, 0, sizeof(*h));
	payload = (uint8_t *)h + sizeof(*h);

	/* Worth compressing only if it saves 1/16 and at least one block. */
	cap = len - len / 16;
	if (max_bytes / L2_ALIGN > 1 &&
	    max_bytes - L2_ALIGN - sizeof(*h) < cap)
		cap = max_bytes - L2_ALIGN - sizeof(*h);
	if (level > 0 && len >= 64 && max_bytes > L2_ALIGN) {
		struct codec_ws *ws = ws_get(l2);

		if (!ws) {
			l2_rec_free(l2, rec);
			return -ENOMEM;
		}
		stored = codec_compress(ws, level, shuffle, raw, len, payload,
					cap);
		ws_put(l2, ws);
		if (stored < 0 && stored != -E2BIG) {
			l2_rec_free(l2, rec);
			return (int)stored;
		}
	}
	if (stored >= 0) {
		h->codec = CODEC_ZSTD;
		h->shuffle = (uint8_t)shuffle;
	} else {
		if (len) /* an empty chunk may come with raw == NULL */
			memcpy(payload, raw, len);
		stored = (long)len;
		h->codec = CODEC_NONE;
		h->shuffle = 0;
	}
	rec->nblk = (uint32_t)(l2_record_bytes((uint64_t)stored) / L2_ALIGN);
	memset(payload + stored, 0,
	       (size_t)rec->nblk * L2_ALIGN - sizeof(*h) - (size_t)stored);

	h->magic = L2_MAGIC;
	h->version = L2_FORMAT_VERSION;
	h->hdr_len = sizeof(*h);
	h->seq = atomic_fetch_add(&l2->next_seq, 1);
	h->raw_len = len;
	h->stored_len = (uint64_t)stored;
	h->raw_sum = l2_sum(raw, len, 0);
	h->stored_sum = l2_sum(payload, (size_t)stored, 0);
	memcpy(h->key, key->b, sizeof(h->key));
	memcpy(h->ns, ns, nslen);
	h->hdr_sum = l2_sum(h, offsetof(struct l2_rec_hdr, hdr_sum), l2->salt);
	*out = rec;
	return 0;
}

void l2_rec_info(const struct l2_rec *rec, struct l2_rec_info *info)
{
	const struct l2_rec_hdr *h = rec->hdr;

	memset(info, 0, sizeof(*info));
	info->loc = rec->loc;
	info->ns = h->ns;
	memcpy(info->key.b, h->key, sizeof(info->key.b));
	info->seq = h->seq;
	info->raw_len = h->raw_len;
	info->stored_len = h->stored_len;
	info->raw_sum = h->raw_sum;
	info->codec = h->codec;
	info->shuffle = h->shuffle;
}

int l2_rec_decode(struct l2 *l2, const struct l2_rec *rec, void *dst,
		  size_t len)
{
	if (!rec || rec->hdr->raw_len != len)
		return -EINVAL;
	return rec_decode(l2, rec->hdr, dst, len);
}

void l2_rec_free(struct l2 *l2, struct l2_rec *rec)
{
	if (!rec)
		return;
	l2_buf_put(l2, rec->hdr, rec->cap);
	free(rec);
}

int l2_append(struct l2 *l2, struct l2_rec *rec, l2_done_fn done, void *arg)
{
	uint64_t bytes = (uint64_t)rec->nblk * L2_ALIGN;
	struct l2_req *r;

	pthread_mutex_lock(&l2->lock);
	if (l2->closing) {
		pthread_mutex_unlock(&l2->lock);
		return -ESHUTDOWN;
	}
	if (l2->queued_bytes && l2->queued_bytes + bytes > l2->cfg.max_queue) {
		pthread_mutex_unlock(&l2->lock);
		return -EAGAIN;
	}
	l2->queued_bytes += bytes;
	l2->queued_count++;
	pthread_mutex_unlock(&l2->lock);

	r = calloc(1, sizeof(*r));
	if (!r) {
		pthread_mutex_lock(&l2->lock);
		l2->queued_bytes -= bytes;
		if (--l2->queued_count == 0)
			pthread_cond_broadcast(&l2->idle_cond);
		pthread_mutex_unlock(&l2->lock);
		return -ENOMEM;
	}
	r->op = REQ_WRITE;
	r->rec = rec;
	r->done = done;
	r->arg = arg;
	r->buf = rec->hdr;
	r->len = bytes;
	l2_io_submit(l2, r);
	return 0;
}

void l2_flush(struct l2 *l2)
{
	pthread_mutex_lock(&l2->lock);
	while (l2->queued_count)
		pthread_cond_wait(&l2->idle_cond, &l2->lock);
	pthread_mutex_unlock(&l2->lock);
}

/* ------------------------------------------------------------- reads */

/* A condition variable timed against CLOCK_MONOTONIC (see deadline). */
static void cond_init_monotonic(pthread_cond_t *c)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

/* *dl = now + ms on CLOCK_MONOTONIC. */
static void deadline(struct timespec *dl, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, dl);
	dl->tv_sec += ms / 1000;
	dl->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl->tv_nsec >= 1000000000L) {
		dl->tv_sec++;
		dl->tv_nsec -= 1000000000L;
	}
}

int l2_read(struct l2 *l2, const struct l2_loc *loc, const char *ns,
	    const struct kvfs_key *key, void *dst, size_t len)
{
	struct l2_rec_hdr *h;
	struct l2_seg *seg;
	struct timespec dl;
	struct l2_req *r;
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
	cond_init_monotonic(&r->cond);

	pthread_mutex_lock(&l2->lock);
	seg = l2_seg_find(l2, loc->seg);
	if (!seg || (uint64_t)loc->blk * L2_ALIGN + r->len > seg->tail) {
		pthread_mutex_unlock(&l2->lock);
		rc = -ENOENT;
		goto free_req;
	}
	seg->refs++;
	r->seg = seg;
	pthread_mutex_unlock(&l2->lock);

	l2_io_submit(l2, r);

	deadline(&dl, l2->cfg.read_timeout_ms);
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
	    l2_record_bytes(h->stored_len) != r->len) {
		rc = -EBADMSG;
		goto count;
	}
	rc = rec_decode(l2, h, dst, len);
count:
	pthread_mutex_lock(&l2->lock);
	if (rc == -EBADMSG) {
		/* freed meanwhile (an unlink erased it under the read): a
		 * miss, not a corrupt record */
		struct l2_seg *s2 = l2_seg_find(l2, loc->seg);
		struct l2_ent *e = s2 ? l2_ent_find(s2, loc->blk) : NULL;

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

/* -------------------------------------------------------------- free */

void l2_free(struct l2 *l2, const struct l2_loc *loc)
{
	struct l2_seg *seg;
	struct l2_ent *e;
	struct l2_req *r;

	if (!loc)
		return;
	r = calloc(1, sizeof(*r));
	pthread_mutex_lock(&l2->lock);
	seg = l2_seg_find(l2, loc->seg);
	e = seg ? l2_ent_find(seg, loc->blk) : NULL;
	if (!e || e->nblk != loc->nblk || e->state == ENT_DEAD) {
		pthread_mutex_unlock(&l2->lock);
		free(r);
		return;
	}
	l2_ent_kill(l2, e);
	/* Erased even in a segment being reclaimed (deleted soon, but a
	 * crash before that would recover the record); its fd stays open
	 * while the punch holds a reference. */
	if (!r || l2->io_stop) {
		pthread_mutex_unlock(&l2->lock);
		free(r);
		return;
	}
	seg->refs++;
	r->op = REQ_PUNCH;
	r->seg = seg;
	r->off = (uint64_t)loc->blk * L2_ALIGN;
	r->len = (size_t)loc->nblk * L2_ALIGN;
	r->counted_free = true;
	l2->frees_queued++;
	pthread_mutex_unlock(&l2->lock);
	l2_io_submit(l2, r);
}

int l2_sync_frees(struct l2 *l2, int timeout_ms)
{
	struct timespec dl;
	uint64_t target;
	int rc = 0;

	deadline(&dl, timeout_ms);
	pthread_mutex_lock(&l2->lock);
	/* A reclaim move of a freed record writes a copy that move_done
	 * frees (before moves_pending drops): wait for the moves first. */
	while (l2->moves_pending && !rc)
		rc = pthread_cond_timedwait(&l2->free_cond, &l2->lock, &dl);
	target = l2->frees_queued;
	while (l2->frees_done < target && !rc)
		rc = pthread_cond_timedwait(&l2->free_cond, &l2->lock, &dl);
	pthread_mutex_unlock(&l2->lock);
	return rc ? -ETIMEDOUT : 0;
}

void l2_get_stats(struct l2 *l2, struct l2_stats *st)
{
	pthread_mutex_lock(&l2->lock);
	*st = l2->st;
	st->queued_bytes = l2->queued_bytes;
	st->segments = l2->nsegs;
	st->capacity = l2->cap;
	st->disk_bytes = l2->used;
	st->direct = l2->direct;
	pthread_mutex_unlock(&l2->lock);
}

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

	seg_name(name, sizeof(name), seg->id);
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
	while (off + sizeof(struct l2_rec_hdr) <= fsize) {
		const struct l2_rec_hdr *h;
		const uint8_t *p;
		uint64_t rec_len;
		struct l2_ent *e;

		p = scan_get(s, fd, fsize, off, sizeof(*h), &err);
		if (!p)
			break;
		h = (const struct l2_rec_hdr *)p;
		if (h->magic != L2_MAGIC) {
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
		h = (const struct l2_rec_hdr *)p;
		if (l2_sum(p + sizeof(*h), h->stored_len, 0) != h->stored_sum) {
			l2->st.corrupt++;
			off += L2_ALIGN;
			continue;
		}
		if (seg->nents && seg->ents[seg->nents - 1].blk >= off / L2_ALIGN) {
			off += L2_ALIGN;
			continue;
		}
		e = ent_add(l2, seg, h, (uint32_t)(off / L2_ALIGN),
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
	seg->tail = align_up(fsize);
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
static int recover(struct l2 *l2, char *err, size_t errlen)
{
	struct scan s = { 0 };
	uint32_t *ids = NULL;
	size_t nids = 0, cap = 0, i, first = 0, keep;
	uint64_t t0 = now_ns(), room;
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

		seg_name(name, sizeof(name), ids[nids - 1 - keep]);
		if (fstatat(l2->dir_fd, name, &sb, 0) == 0)
			sz = align_up((uint64_t)sb.st_size);
		if (room + sz > l2->cap)
			break;
		room += sz;
	}
	if (nids > keep) {
		first = nids - keep;
		for (i = 0; i < first; i++) {
			char name[64];

			seg_name(name, sizeof(name), ids[i]);
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
		rc = seg_insert(l2, seg);
		if (rc) {
			free(seg);
			goto out;
		}
		rc = scan_segment(l2, seg, &s);
		l2->used += seg->tail;
		if (rc == 0) {
			rc = seg_open_fd(l2, seg->id, 0);
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
	l2->st.recover_ns = now_ns() - t0;
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

/* ------------------------------------------------------- open, close */

static int read_salt(struct l2 *l2, char *err, size_t errlen)
{
	char buf[32] = { 0 };
	ssize_t n;
	int fd;

	fd = openat(l2->dir_fd, "l2.id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char *end;

		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n >= 16) {
			buf[16] = 0;
			l2->salt = strtoull(buf, &end, 16);
			if (end == buf + 16)
				return 0;
		}
		snprintf(err, errlen, "l2_dir %s: l2.id is damaged; remove the "
			 "directory's contents to start an empty L2", l2->dir);
		return -EBADMSG;
	}
	if (errno != ENOENT)
		goto fail;
	if (getrandom(&l2->salt, sizeof(l2->salt), 0) != sizeof(l2->salt)) {
		uint64_t t = now_ns();

		l2->salt = XXH3_64bits(&t, sizeof(t)) ^ (uint64_t)getpid();
	}
	fd = openat(l2->dir_fd, "l2.id.tmp", O_WRONLY | O_CREAT | O_TRUNC |
		    O_CLOEXEC, 0600);
	if (fd < 0)
		goto fail;
	n = snprintf(buf, sizeof(buf), "%016" PRIx64 "\n", l2->salt);
	if (write(fd, buf, (size_t)n) != n || fsync(fd)) {
		int e = errno ? errno : EIO;

		close(fd);
		errno = e;
		goto fail;
	}
	close(fd);
	if (renameat(l2->dir_fd, "l2.id.tmp", l2->dir_fd, "l2.id"))
		goto fail;
	return 0;
fail:
	n = -errno;
	snprintf(err, errlen, "l2_dir %s: %s", l2->dir, strerror((int)-n));
	return (int)n;
}

/* Raise the soft fd limit when the log has many segments (one fd each). */
static void raise_nofile(struct l2 *l2)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)l2->max_segs + 1024;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
}

int l2_open(const struct l2_config *cfg, struct l2 **out, char *err,
	    size_t errlen)
{
	struct l2 *l2;
	struct stat sb;
	int rc;

	if (errlen)
		err[0] = 0;
	if (!cfg || !cfg->dir || !cfg->dir[0] || !out) {
		snprintf(err, errlen, "l2: no l2_dir");
		return -EINVAL;
	}
	l2 = calloc(1, sizeof(*l2));
	if (!l2)
		return -ENOMEM;
	l2->cfg = *cfg;
	l2->dir_fd = -1;
	l2->lock_fd = -1;
	l2->efd = -1;
	l2->direct = true;
	l2->punch_ok = true;
	l2->next_seq = 1;
	l2->next_seg = 1;
	pthread_mutex_init(&l2->lock, NULL);
	pthread_cond_init(&l2->idle_cond, NULL);
	cond_init_monotonic(&l2->free_cond); /* l2_sync_frees */
	pthread_cond_init(&l2->rc_cond, NULL);
	pthread_cond_init(&l2->move_cond, NULL);
	pthread_mutex_init(&l2->mt_lock, NULL);
	pthread_cond_init(&l2->mt_cv, NULL);
	pthread_cond_init(&l2->mt_done, NULL);
	if (!l2->cfg.max_queue)
		l2->cfg.max_queue = 256ull << 20;
	if (l2->cfg.read_timeout_ms <= 0)
		l2->cfg.read_timeout_ms = L2_READ_TIMEOUT_MS_DEFAULT;
	l2->dir = strdup(cfg->dir);
	if (!l2->dir || posix_memalign(&l2->zero, L2_ALIGN, L2_ALIGN)) {
		rc = -ENOMEM;
		goto fail;
	}
	memset(l2->zero, 0, L2_ALIGN);

	/* four segments of at least two 4 KiB records */
	if (cfg->size < 8ull * L2_ALIGN) {
		snprintf(err, errlen, "l2_size %" PRIu64 " is too small (at least "
			 "%u bytes)", cfg->size, 8 * L2_ALIGN);
		rc = -EINVAL;
		goto fail;
	}
	l2->seg_size = cfg->seg_size ? cfg->seg_size : L2_SEG_SIZE_DEFAULT;
	if (l2->seg_size > cfg->size / 4)
		l2->seg_size = cfg->size / 4;
	l2->seg_size &= ~(uint64_t)(L2_ALIGN - 1);
	if (l2->seg_size < 2 * L2_ALIGN)
		l2->seg_size = 2 * L2_ALIGN;
	if (l2->seg_size > (uint64_t)UINT32_MAX * L2_ALIGN / 2)
		l2->seg_size = (uint64_t)UINT32_MAX * L2_ALIGN / 2;
	l2->max_segs = (uint32_t)(cfg->size / l2->seg_size);
	l2_set_space(l2, cfg->size, cfg->size);

	l2->dir_fd = open(cfg->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l2->dir_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "l2_dir %s: %s", cfg->dir, strerror(-rc));
		goto fail;
	}
	if (fstat(l2->dir_fd, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
		rc = -ENOTDIR;
		snprintf(err, errlen, "l2_dir %s: %s", cfg->dir, strerror(-rc));
		goto fail;
	}
	l2->lock_fd = openat(l2->dir_fd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC,
			     0600);
	if (l2->lock_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "l2_dir %s: %s", cfg->dir, strerror(-rc));
		goto fail;
	}
	if (flock(l2->lock_fd, LOCK_EX | LOCK_NB)) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		snprintf(err, errlen, "l2_dir %s is in use by another kvfs "
			 "(its LOCK file is held)", cfg->dir);
		goto fail;
	}
	/* may the directory be written? (root ignores modes; a read-only
	 * mount does not) */
	if (faccessat(l2->dir_fd, ".", W_OK, AT_EACCESS) ||
	    access(cfg->dir, W_OK)) {
		rc = -errno;
		snprintf(err, errlen, "l2_dir %s: %s", cfg->dir, strerror(-rc));
		goto fail;
	}
	rc = read_salt(l2, err, errlen);
	if (rc)
		goto fail;
	raise_nofile(l2);
	rc = recover(l2, err, errlen);
	if (rc)
		goto fail;
	{
		/* l2_size beyond what the filesystem can give (the default's
		 * 256 MiB floor on a small disk, a disk shared with others):
		 * smaller segments now, so that when it fills up (see
		 * l2_disk_full) reclaim frees a part of the log, not all */
		struct statvfs sv;

		if (fstatvfs(l2->dir_fd, &sv) == 0) {
			uint64_t est = (uint64_t)sv.f_bavail * sv.f_frsize +
				       l2->used;

			if (est < cfg->size)
				l2_set_space(l2, cfg->size, est);
		}
	}
	rc = l2_io_start(l2);
	if (rc) {
		snprintf(err, errlen, "l2: io_uring: %s", strerror(-rc));
		goto fail;
	}
	rc = l2_reclaim_start(l2);
	if (rc) {
		snprintf(err, errlen, "l2: reclaim thread: %s", strerror(-rc));
		goto fail;
	}
	mt_start(l2);
	*out = l2;
	return 0;
fail:
	l2_close(l2);
	return rc;
}

void l2_close(struct l2 *l2)
{
	size_t i;

	if (!l2)
		return;
	pthread_mutex_lock(&l2->lock);
	l2->closing = true;
	pthread_mutex_unlock(&l2->lock);
	/* queued appends finish first (the reclaim thread may be needed to
	 * make room for them), then the threads stop */
	if (l2->io_started && l2->rc_started)
		l2_flush(l2);
	l2_reclaim_stop(l2);
	l2_io_stop(l2);
	mt_stop(l2);
	pthread_mutex_lock(&l2->lock);
	for (i = 0; i < l2->nsegs; i++)
		l2_seg_unref(l2, l2->segs[i]);
	pthread_mutex_unlock(&l2->lock);
	free(l2->segs);
	for (i = 0; i < l2->nns; i++)
		free(l2->ns_names[i]);
	free(l2->ns_names);
	while (l2->bufs) {
		struct l2_buf *b = l2->bufs;

		l2->bufs = b->next;
		free(b->p);
		free(b);
	}
	while (l2->wss) {
		struct l2_ws_item *it = l2->wss;

		l2->wss = it->next;
		codec_ws_free(it->ws);
		free(it);
	}
	if (l2->lock_fd >= 0)
		close(l2->lock_fd); /* releases the flock */
	if (l2->dir_fd >= 0)
		close(l2->dir_fd);
	pthread_cond_destroy(&l2->idle_cond);
	pthread_cond_destroy(&l2->free_cond);
	pthread_cond_destroy(&l2->rc_cond);
	pthread_cond_destroy(&l2->move_cond);
	pthread_cond_destroy(&l2->mt_cv);
	pthread_cond_destroy(&l2->mt_done);
	pthread_mutex_destroy(&l2->mt_lock);
	pthread_mutex_destroy(&l2->lock);
	free(l2->zero);
	free(l2->dir);
	free(l2);
}
