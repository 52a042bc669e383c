/*
 * fs_pt.c - cache=passthrough (fs_pt.h): published chunks of key
 * namespaces read by the kernel from shadows, sealed memfd copies of
 * their bytes registered as backing files.
 *
 * Why a copy: the kernel reads a backing file at the FUSE file's own
 * offsets, so a chunk must be a whole file of its own, and the arena is
 * one mapping. Why never reused: a reader's mmap of a passthrough file
 * maps the backing file and outlives the reader's release, so a shadow
 * holds one publication's bytes for as long as anyone maps it (sealed:
 * nothing can write it, the daemon included). The kernel holds the file
 * while a backing id or an open refers to it; this table holds the id.
 *
 * When: a thread copies each chunk published through a key namespace
 * from L1 (in the background, while it is still in L1), and each chunk
 * opened without a shadow yet; the open itself never waits for a copy.
 * Room: pt_mem bytes of shadows at most; past it the least recently
 * opened shadow without opens goes, and a chunk that finds no room gets
 * none (classic reads).
 *
 * The kernel's rule (fs/fuse/iomode.c): while an inode has an open file
 * in passthrough mode, every open of it must be passthrough with the same
 * backing file, or the open fails (EIO). So each inode's answers are
 * counted from the decision to the release: a shadow answer only while
 * no classic one is counted, a classic one only while no shadow one is
 * (classic answers are direct_io, which takes no io mode of its own), and
 * a shadow is never dropped while a shadow answer is counted.
 *
 * Path namespaces are not shadowed: an O_TRUNC open rewrites a path file
 * through the inode of the version it replaces, a classic writer the
 * kernel would refuse (EIO) beside a reader of that version's shadow; a
 * path file's readers keep that rewrite working (tools copy over files
 * so), and shadows measured no faster for vLLM's 2 MiB loads here.
 *
 * A forgotten inode keeps its shadow: the kernel may look the same
 * publication up again. (A revalidating LOOKUP that answers another node
 * than the dentry's, as for a name whose dentry still holds its writer
 * just after the publication, makes the kernel forget the node answered
 * and look the name up anew; drop_caches forgets every unused inode.)
 * Shadows go with their chunk (fs_pt_gone: the engine's gone events and
 * unlinks), with a newer publication of their key (fs_pt_published), or
 * for room; so at most pt_mem of them stay.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs_i.h"
#include "fs/fs_pt.h"

/* ---- the kernel's ABI (include/uapi/linux/fuse.h, protocol 7.40):
 * Debian 12's headers and libfuse 3.14 predate passthrough ---- */
#define PT_INIT2_PASSTHROUGH (1u << (37 - 32)) /* flags2 bit */
#define PT_INIT_OUT_FLAGS 12
#define PT_INIT_OUT_FLAGS2 32
#define PT_INIT_OUT_STACK 36   /* max_stack_depth */
#define PT_INIT_OUT_MIN 64
#define PT_MINOR_MIN 40
#define PT_FOPEN_DIRECT_IO (1u << 0)
#define PT_FOPEN_PASSTHROUGH (1u << 7)
#define PT_OPEN_OUT_FLAGS 8    /* fuse_open_out.open_flags */
#define PT_OPEN_OUT_ID 12      /* fuse_open_out.backing_id */
#define PT_OPEN_OUT_SZ 16
struct pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define PT_BACKING_OPEN _IOW(229, 1, struct pt_backing_map)
#define PT_BACKING_CLOSE _IOW(229, 2, uint32_t)

#define PT_QUEUE_MAX 8192 /* shadows waiting to be made */
/* A shadow made or opened this recently is not dropped for the room of
 * a copy an open queued: a reader cycling through more chunks than
 * pt_mem holds keeps the shadows it has instead of each miss copying a
 * chunk over the next one it wants (review 26); the rest are read
 * classic. A chunk just published may take any shadow's room (the newest
 * chunks are the likeliest read). */
#define PT_KEEP_NS 1000000000ull
#define PT_COPY_BUF (1u << 20)

/* ------------------------------------------------------ the transport */

static struct {
	bool want;
	uint64_t init_unique; /* INIT offered passthrough: its unique */
	int on;
} ptk;

/* The backing id of the OPEN reply this thread is sending (0: none). */
static __thread int32_t pt_reply_id;

void fs_pt_want(bool on)
{
	ptk.want = on;
}

bool fs_pt_on(void)
{
	return __atomic_load_n(&ptk.on, __ATOMIC_ACQUIRE) != 0;
}

void fs_pt_in(const void *buf, ssize_t r)
{
	const struct fuse_in_header *ih = buf;
	const struct fuse_init_in *in = (const void *)(ih + 1);

	if (!ptk.want || r < (ssize_t)sizeof(*ih) || ih->opcode != FUSE_INIT)
		return;
	/* (an INIT shorter than 7.36's predates passthrough) */
	if (r >= (ssize_t)(sizeof(*ih) + sizeof(*in)) &&
	    in->major == 7 && in->minor >= PT_MINOR_MIN &&
	    (in->flags & FUSE_INIT_EXT) &&
	    (in->flags2 & PT_INIT2_PASSTHROUGH))
		__atomic_store_n(&ptk.init_unique, ih->unique,
				 __ATOMIC_RELEASE);
	else
		fuse_log(FUSE_LOG_WARNING, "kvfs-mount: cache=passthrough: "
			 "this kernel offers no FUSE passthrough (Linux 6.9 "
			 "and later, CONFIG_FUSE_PASSTHROUGH): chunks are read "
			 "through the daemon\n");
}

static void init_reply(struct iovec *iov, int count)
{
	unsigned char *o;
	uint32_t flags, flags2, depth = 1;

	if (count < 2 || iov[1].iov_len < PT_INIT_OUT_MIN)
		return;
	o = iov[1].iov_base;
	memcpy(&flags, o + PT_INIT_OUT_FLAGS, 4);
	memcpy(&flags2, o + PT_INIT_OUT_FLAGS2, 4);
	/* the kernel refuses passthrough beside the writeback cache */
	if (!(flags & FUSE_INIT_EXT) || (flags & FUSE_WRITEBACK_CACHE))
		return;
	flags2 |= PT_INIT2_PASSTHROUGH;
	memcpy(o + PT_INIT_OUT_FLAGS2, &flags2, 4);
	memcpy(o + PT_INIT_OUT_STACK, &depth, 4); /* shmem's depth is 0 */
	__atomic_store_n(&ptk.on, 1, __ATOMIC_RELEASE);
}

void fs_pt_out(struct iovec *iov, int count)
{
	struct fuse_out_header *oh = iov[0].iov_base;
	uint64_t u = __atomic_load_n(&ptk.init_unique, __ATOMIC_ACQUIRE);

	if (u && oh->unique == u) {
		__atomic_store_n(&ptk.init_unique, 0, __ATOMIC_RELEASE);
		if (!oh->error)
			init_reply(iov, count);
		return;
	}
	if (pt_reply_id && !oh->error && count == 2 &&
	    iov[1].iov_len == PT_OPEN_OUT_SZ) {
		unsigned char *o = iov[1].iov_base;
		uint32_t fl;

		memcpy(&fl, o + PT_OPEN_OUT_FLAGS, 4);
		fl = (fl & ~PT_FOPEN_DIRECT_IO) | PT_FOPEN_PASSTHROUGH;
		memcpy(o + PT_OPEN_OUT_FLAGS, &fl, 4);
		memcpy(o + PT_OPEN_OUT_ID, &pt_reply_id, 4);
	}
}

int fs_pt_reply_open(struct fuse_req *req, struct fuse_file_info *fi,
		     int32_t id)
{
	int r;

	fi->direct_io = 0;
	fi->keep_cache = 0;
	pt_reply_id = id;
	r = fuse_reply_open(req, fi);
	pt_reply_id = 0;
	return r;
}

/* ------------------------------------------------------- the shadows */

struct pt_ent {
	struct htab_node node;        /* fs_pt.tab, by inode number */
	struct htab_node knode;       /* fs_pt.ktab, by (ns, key) */
	struct pt_ent *prev, *next;   /* lru while it has a shadow */
	uint64_t ino;
	uint32_t ns;
	struct kvfs_key key;
	uint64_t gen, size;
	uint64_t used_ns;             /* shadow made, or last opened */
	int32_t id;                   /* backing id, 0: no shadow */
	bool queued;                  /* a copy is queued or running */
	bool gone;                    /* replaced by a new version, or
				       * the chunk left the engine */
	uint32_t pt_opens;            /* shadow answers not yet closed */
	uint32_t classic;             /* classic answers not yet closed */
};

struct pt_job {
	uint64_t ino;
	bool opened;                  /* queued by a classic open */
};

struct fs_pt {
	struct fs *fs;
	int fd;                       /* a dup of the session's /dev/fuse
				       * (libfuse closes its own first) */
	uint64_t budget;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct htab tab;
	struct htab ktab;
	struct pt_ent lru;            /* most recently opened first */
	struct pt_job *q;
	unsigned qhead, qlen;
	bool stop, started;
	pthread_t thread;
	bool warned;
	bool refused;                 /* no backing files for this daemon */
	uint32_t *closing;            /* backing ids to close (the copier
				       * closes them, no lock held: freeing a
				       * big shadow takes milliseconds) */
	size_t nclosing, capclosing;
	struct fs_pt_counts n;        /* lock */
	uint64_t max_gen;             /* of every entry made (fs_pt_gone) */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t ino_hash(uint64_t ino)
{
	return htab_hash(0x7074, &ino, sizeof(ino));
}

static uint64_t key_hash(uint32_t ns, const struct kvfs_key *key)
{
	return htab_hash(ns, key, sizeof(*key));
}

static struct pt_ent *ent_find(struct fs_pt *pt, uint64_t ino)
{
	uint64_t h = ino_hash(ino);
	struct htab_node *e;

	htab_for_each_hash(&pt->tab, h, e) {
		struct pt_ent *x = container_of(e, struct pt_ent, node);

		if (x->ino == ino)
			return x;
	}
	return NULL;
}

static void lru_del(struct pt_ent *e)
{
	if (!e->next)
		return;
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->prev = e->next = NULL;
}

static void lru_front(struct fs_pt *pt, struct pt_ent *e)
{
	lru_del(e);
	e->next = pt->lru.next;
	e->prev = &pt->lru;
	e->next->prev = e;
	pt->lru.next = e;
}

/* Closes backing ids (no lock held). */
static void close_ids(struct fs_pt *pt, const uint32_t *ids, size_t n)
{
	unsigned errs = 0;

	for (size_t i = 0; i < n; i++) {
		uint32_t id = ids[i];

		if (ioctl(pt->fd, PT_BACKING_CLOSE, &id) < 0)
			errs++; /* the connection is gone: so is the file */
	}
	if (errs) {
		pthread_mutex_lock(&pt->lock);
		pt->n.errors += errs;
		pthread_mutex_unlock(&pt->lock);
	}
}

/* Lets e's shadow go (no shadow answer counted): its id is closed by the
 * copier, off every lock. lock held. */
static void shadow_close(struct fs_pt *pt, struct pt_ent *e)
{
	uint32_t id = (uint32_t)e->id;

	if (!e->id)
		return;
	if (pt->nclosing == pt->capclosing) {
		size_t cap = pt->capclosing ? pt->capclosing * 2 : 64;
		uint32_t *a = realloc(pt->closing, cap * sizeof(*a));

		if (a) {
			pt->closing = a;
			pt->capclosing = cap;
		}
	}
	if (pt->nclosing < pt->capclosing) {
		pt->closing[pt->nclosing++] = id;
		pthread_cond_signal(&pt->cond);
	} else if (ioctl(pt->fd, PT_BACKING_CLOSE, &id) < 0) {
		pt->n.errors++; /* no memory to defer it: at once */
	}
	e->id = 0;
	pt->n.shadows--;
	pt->n.bytes -= e->size;
	lru_del(e);
}

/* Frees e when nothing refers to it any more. lock held. */
static void ent_maybe_free(struct fs_pt *pt, struct pt_ent *e)
{
	if (e->gone && !e->pt_opens)
		shadow_close(pt, e);
	if (e->id || e->queued || e->pt_opens || e->classic)
		return;
	htab_del(&pt->tab, &e->node);
	htab_del(&pt->ktab, &e->knode);
	free(e);
}

static struct pt_ent *ent_get(struct fs_pt *pt, uint64_t ino, uint32_t ns,
			      const struct kvfs_key *key, uint64_t gen,
			      uint64_t size)
{
	struct pt_ent *e = ent_find(pt, ino);

	if (e)
		return e; /* (gone stays: an open of a publication that went
			   * meanwhile, its pin taken before) */
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->ino = ino;
	e->ns = ns;
	e->key = *key;
	e->gen = gen;
	e->size = size;
	if (gen > pt->max_gen)
		pt->max_gen = gen;
	if (htab_add(&pt->tab, &e->node, ino_hash(ino))) {
		free(e);
		return NULL;
	}
	if (htab_add(&pt->ktab, &e->knode, key_hash(ns, key))) {
		htab_del(&pt->tab, &e->node);
		free(e);
		return NULL;
	}
	return e;
}

/* Queues e's copy (no shadow, none queued); opened: by an open.
 * lock held. */
static void enqueue(struct fs_pt *pt, struct pt_ent *e, bool opened)
{
	struct pt_job *j;

	if (e->id || e->queued)
		return;
	if (pt->qlen == PT_QUEUE_MAX || pt->stop) {
		pt->n.skipped++;
		return;
	}
	j = &pt->q[(pt->qhead + pt->qlen++) % PT_QUEUE_MAX];
	j->ino = e->ino;
	j->opened = opened;
	e->queued = true;
	pthread_cond_signal(&pt->cond);
}

/* Makes room for size more bytes: drops the least recently opened
 * shadows without shadow answers; with keep, none at all unless those
 * made or opened before PT_KEEP_NS free enough (the list is in that
 * order, so the drops below then end before the first younger one).
 * lock held. */
static bool make_room(struct fs_pt *pt, uint64_t size, bool keep)
{
	struct pt_ent *e = pt->lru.prev, *prev;
	uint64_t now = keep ? now_ns() : 0, can = 0;

	if (keep && pt->n.bytes + size > pt->budget) {
		for (prev = e; prev != &pt->lru &&
		     now - prev->used_ns >= PT_KEEP_NS; prev = prev->prev)
			if (!prev->pt_opens)
				can += prev->size;
		if (pt->n.bytes + size > pt->budget + can)
			return false;
	}

	while (pt->n.bytes + size > pt->budget && e != &pt->lru) {
		prev = e->prev;
		if (!e->pt_opens) {
			shadow_close(pt, e);
			pt->n.dropped++;
			ent_maybe_free(pt, e);
		}
		e = prev;
	}
	return pt->n.bytes + size <= pt->budget;
}

/* A sealed memfd holding c's bytes, registered: its backing id, or
 * -errno. Called without the lock. */
static int shadow_make(struct fs_pt *pt, const struct tier_chunk *c)
{
	struct pt_backing_map m;
	uint64_t size = tier_chunk_size(c), off = 0;
	const char *src = tier_chunk_ptr(c);
	char *bounce = NULL;
	int fd, id, err = 0;

	fd = memfd_create("kvfs-shadow", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (!src && !(bounce = malloc(PT_COPY_BUF)))
		err = -ENOMEM;
	while (!err && off < size) {
		size_t n = size - off > PT_COPY_BUF ? PT_COPY_BUF :
			   (size_t)(size - off);
		const char *p = src ? src + off : bounce;
		ssize_t w;

		if (!src && tier_chunk_read(pt->fs->tier, c, bounce, n, off) !=
			    (long)n) {
			err = -EIO;
			break;
		}
		w = pwrite(fd, p, n, (off_t)off);
		if (w <= 0)
			err = w < 0 ? -errno : -EIO;
		else
			off += (uint64_t)w;
	}
	free(bounce);
	if (!err && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
			  F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		err = -errno;
	if (err) {
		close(fd);
		return err;
	}
	memset(&m, 0, sizeof(m));
	m.fd = fd;
	id = ioctl(pt->fd, PT_BACKING_OPEN, &m);
	if (id < 0)
		err = -errno;
	close(fd); /* the backing id holds the file */
	if (!err && id <= 0)
		err = -EIO;
	return err ? err : id;
}

/* The copier's scheduling: SCHED_IDLE while it copies (only a CPU nothing
 * else wants), normal otherwise (closes and bookkeeping never starve). */
static void copier_idle(bool idle)
{
	struct sched_param sp = { .sched_priority = 0 };

	(void)pthread_setschedparam(pthread_self(),
				    idle ? SCHED_IDLE : SCHED_OTHER, &sp);
}

/* Ends job e without a shadow. lock held. */
static void job_skip(struct fs_pt *pt, struct pt_ent *e)
{
	pt->n.skipped++;
	e->queued = false;
	ent_maybe_free(pt, e);
}

/* Makes e's shadow (the job of inode ino; opened: an open queued it). */
static void copy_one(struct fs_pt *pt, uint64_t ino, bool opened)
{
	struct tier_chunk *c = NULL;
	struct pt_ent *e;
	uint32_t ns;
	struct kvfs_key key;
	uint64_t gen;
	int id;

	pthread_mutex_lock(&pt->lock);
	e = ent_find(pt, ino);
	if (!e) {
		pthread_mutex_unlock(&pt->lock);
		return;
	}
	/* a chunk larger than pt_mem would empty it for nothing */
	if (e->gone || pt->refused || e->size > pt->budget) {
		job_skip(pt, e);
		pthread_mutex_unlock(&pt->lock);
		return;
	}
	ns = e->ns;
	key = e->key;
	gen = e->gen;
	pthread_mutex_unlock(&pt->lock);

	/* only while that publication is in L1 (no promotion, no read
	 * counted), and pinned before any shadow goes for its room; e
	 * stays meanwhile (ent_maybe_free keeps a queued entry) */
	id = tier_pin_l1(pt->fs->tier, ns, &key, gen, &c);
	if (!id) {
		bool room;

		pthread_mutex_lock(&pt->lock);
		room = !e->gone && make_room(pt, e->size, opened);
		pthread_mutex_unlock(&pt->lock);
		if (room) {
			copier_idle(true);
			id = shadow_make(pt, c);
			copier_idle(false);
		} else {
			id = -ENOSPC; /* no room, or nobody wants it now */
		}
		tier_put(pt->fs->tier, c);
	}
	pthread_mutex_lock(&pt->lock);
	if (id > 0 && !e->id && !e->gone) {
		e->id = id;
		e->used_ns = now_ns();
		pt->n.made++;
		pt->n.shadows++;
		pt->n.bytes += e->size;
		lru_front(pt, e);
	} else if (id > 0) { /* gone meanwhile */
		uint32_t u = (uint32_t)id;

		(void)ioctl(pt->fd, PT_BACKING_CLOSE, &u);
	} else if (id == -ENOENT || id == -ENOSPC) {
		pt->n.skipped++; /* left L1, replaced, or no room */
	} else {
		pt->n.errors++;
		/* backing files need CAP_SYS_ADMIN (and the kernel's
		 * passthrough): none will be made */
		if (id == -EPERM)
			pt->refused = true;
		if (!pt->warned) {
			pt->warned = true;
			fs_log(pt->fs, "passthrough: cannot make a shadow "
			       "file (%s%s): those chunks are read through the "
			       "daemon", strerror(-id), id == -EPERM ?
			       "; backing files need CAP_SYS_ADMIN" : "");
		}
	}
	e->queued = false;
	ent_maybe_free(pt, e);
	pthread_mutex_unlock(&pt->lock);
}

/* Takes the backing ids waiting to be closed and closes them. lock held;
 * dropped and taken again. */
static void flush_closing(struct fs_pt *pt)
{
	uint32_t *ids = pt->closing;
	size_t n = pt->nclosing;

	pt->closing = NULL;
	pt->nclosing = pt->capclosing = 0;
	pthread_mutex_unlock(&pt->lock);
	close_ids(pt, ids, n);
	free(ids);
	pthread_mutex_lock(&pt->lock);
}

/* The copier: closes what shadow_close deferred, and makes the queued
 * shadows, copying at SCHED_IDLE (writers and readers never wait for it:
 * an open without a shadow yet is read through the daemon). */
static void *copier(void *arg)
{
	struct fs_pt *pt = arg;

	pthread_mutex_lock(&pt->lock);
	for (;;) {
		uint64_t ino;
		bool opened;

		while (!pt->qlen && !pt->nclosing && !pt->stop)
			pthread_cond_wait(&pt->cond, &pt->lock);
		if (pt->nclosing) {
			flush_closing(pt);
			continue;
		}
		if (pt->stop)
			break;
		ino = pt->q[pt->qhead].ino;
		opened = pt->q[pt->qhead].opened;
		pt->qhead = (pt->qhead + 1) % PT_QUEUE_MAX;
		pt->qlen--;
		pthread_mutex_unlock(&pt->lock);
		copy_one(pt, ino, opened);
		pthread_mutex_lock(&pt->lock);
	}
	pthread_mutex_unlock(&pt->lock);
	return NULL;
}

int fs_pt_start(struct fs *fs)
{
	struct fs_pt *pt;
	int r;

	if (fs->cfg.cache != FS_CACHE_PASSTHROUGH || !fs->se)
		return 0;
	pt = calloc(1, sizeof(*pt));
	if (!pt)
		return -ENOMEM;
	pt->q = calloc(PT_QUEUE_MAX, sizeof(*pt->q));
	if (!pt->q) {
		free(pt);
		return -ENOMEM;
	}
	pt->fs = fs;
	pt->fd = fcntl(fuse_session_fd(fs->se), F_DUPFD_CLOEXEC, 3);
	if (pt->fd < 0) {
		r = -errno;
		free(pt->q);
		free(pt);
		return r;
	}
	pt->budget = fs->cfg.pt_mem;
	pt->lru.next = pt->lru.prev = &pt->lru;
	pthread_mutex_init(&pt->lock, NULL);
	pthread_cond_init(&pt->cond, NULL);
	r = pthread_create(&pt->thread, NULL, copier, pt);
	if (r) {
		pthread_cond_destroy(&pt->cond);
		pthread_mutex_destroy(&pt->lock);
		close(pt->fd);
		free(pt->q);
		free(pt);
		return -r;
	}
	pt->started = true;
	fs->priv->pt = pt;
	return 0;
}

void fs_pt_stop(struct fs *fs)
{
	struct fs_pt *pt = fs->priv->pt;

	if (!pt || !pt->started)
		return;
	pthread_mutex_lock(&pt->lock);
	pt->stop = true;
	pthread_cond_signal(&pt->cond);
	pthread_mutex_unlock(&pt->lock);
	pthread_join(pt->thread, NULL);
	pt->started = false;
}

void fs_pt_destroy(struct fs *fs)
{
	struct fs_pt *pt = fs->priv->pt;
	struct htab_node *n, *nx;
	uint64_t i;

	if (!pt)
		return;
	fs_pt_stop(fs);
	pthread_mutex_lock(&pt->lock);
	htab_for_each_safe(&pt->tab, i, n, nx) {
		struct pt_ent *e = container_of(n, struct pt_ent, node);

		shadow_close(pt, e);
		htab_del(&pt->tab, &e->node);
		htab_del(&pt->ktab, &e->knode);
		free(e);
	}
	flush_closing(pt);
	pthread_mutex_unlock(&pt->lock);
	close(pt->fd);
	free(pt->closing);
	htab_free(&pt->tab);
	htab_free(&pt->ktab);
	pthread_cond_destroy(&pt->cond);
	pthread_mutex_destroy(&pt->lock);
	free(pt->q);
	free(pt);
	fs->priv->pt = NULL;
}

/* The publications of (ns, key) older than below (gens only grow), but
 * keep's, have left the engine: their shadows go (at their last release,
 * if later). lock held. */
static void key_gone(struct fs_pt *pt, uint32_t ns, const struct kvfs_key *key,
		     uint64_t below, uint64_t keep)
{
	uint64_t h = key_hash(ns, key);
	struct htab_node *n, *next;

	for (n = htab_first(&pt->ktab, h); n; n = next) {
		struct pt_ent *e = container_of(n, struct pt_ent, knode);

		next = n->next; /* e may be freed */
		if (n->h == h && e->ns == ns && e->gen < below &&
		    e->gen != keep && !memcmp(&e->key, key, sizeof(*key))) {
			e->gone = true;
			ent_maybe_free(pt, e);
		}
	}
}

void fs_pt_published(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		     uint64_t gen, uint64_t size)
{
	struct fs_pt *pt = fs->priv->pt;
	struct pt_ent *e;

	if (!pt || !fs_pt_on())
		return;
	pthread_mutex_lock(&pt->lock);
	key_gone(pt, ns, key, gen, 0); /* the versions before this one */
	e = ent_get(pt, FS_INO_CHUNK + gen, ns, key, gen, size);
	if (e) {
		enqueue(pt, e, false);
		ent_maybe_free(pt, e); /* not queued: nothing refers to it */
	}
	pthread_mutex_unlock(&pt->lock);
}

/* Whether e (or NULL) is publication gen's with a shadow an open would
 * be answered with now (no classic answer counted). lock held. */
static bool shadow_answers(const struct pt_ent *e, uint64_t gen)
{
	return e && e->id && !e->classic && e->gen == gen;
}

int fs_pt_open(struct fs *fs, uint64_t ino, uint32_t ns,
	       const struct kvfs_key *key, const struct tier_chunk *c,
	       enum fs_pt_mode *mode, int32_t *id)
{
	struct fs_pt *pt = fs->priv->pt;
	uint64_t gen = tier_chunk_gen(c), size = tier_chunk_size(c);
	struct pt_ent *e;

	*mode = FS_PT_NONE;
	if (!pt || !fs_pt_on())
		return tier_chunk_has_bytes(c) ? 0 : -EAGAIN;
	pthread_mutex_lock(&pt->lock);
	if (!tier_chunk_has_bytes(c)) {
		/* taken without its bytes for the shadow fs_pt_ready saw:
		 * gone since (room), or a classic open came first */
		e = ent_find(pt, ino);
		if (!shadow_answers(e, gen)) {
			pthread_mutex_unlock(&pt->lock);
			return -EAGAIN;
		}
	}
	/* an answer that is not counted could meet a shadow answer of the
	 * same inode in the kernel: none at all then */
	e = ent_get(pt, ino, ns, key, gen, size);
	if (!e) {
		pthread_mutex_unlock(&pt->lock);
		return -ENOMEM;
	}
	if (e->id && !e->classic) {
		e->pt_opens++;
		*id = e->id;
		*mode = FS_PT_SHADOW;
		pt->n.opens++;
		e->used_ns = now_ns();
		lru_front(pt, e);
	} else {
		e->classic++;
		*mode = FS_PT_CLASSIC;
		pt->n.classic++;
		enqueue(pt, e, true);
	}
	pthread_mutex_unlock(&pt->lock);
	return 0;
}

bool fs_pt_held(void *arg, uint32_t ns, const struct kvfs_key *key,
		uint64_t gen)
{
	struct fs *fs = arg;
	struct fs_pt *pt = fs->priv ? fs->priv->pt : NULL;
	struct htab_node *n;
	bool held = false;

	if (!pt || !fs_pt_on())
		return false;
	pthread_mutex_lock(&pt->lock);
	htab_for_each_hash(&pt->ktab, key_hash(ns, key), n) {
		struct pt_ent *x = container_of(n, struct pt_ent, knode);

		if (x->ns == ns && shadow_answers(x, gen) && !x->gone &&
		    !memcmp(&x->key, key, sizeof(*key))) {
			held = true;
			break;
		}
	}
	pthread_mutex_unlock(&pt->lock);
	return held;
}

bool fs_pt_ready(struct fs *fs, uint64_t ino, uint64_t gen)
{
	struct fs_pt *pt = fs->priv->pt;
	struct pt_ent *e;
	bool ready;

	if (!pt || !fs_pt_on())
		return false;
	pthread_mutex_lock(&pt->lock);
	e = ent_find(pt, ino);
	ready = shadow_answers(e, gen);
	pthread_mutex_unlock(&pt->lock);
	return ready;
}

void fs_pt_close(struct fs *fs, uint64_t ino, enum fs_pt_mode mode)
{
	struct fs_pt *pt = fs->priv->pt;
	struct pt_ent *e;

	if (!pt || mode == FS_PT_NONE)
		return;
	pthread_mutex_lock(&pt->lock);
	e = ent_find(pt, ino);
	if (e) {
		if (mode == FS_PT_SHADOW && e->pt_opens)
			e->pt_opens--;
		else if (mode == FS_PT_CLASSIC && e->classic)
			e->classic--;
		ent_maybe_free(pt, e);
	}
	pthread_mutex_unlock(&pt->lock);
}

void fs_pt_gone(struct fs *fs, uint32_t ns, const struct kvfs_key *key)
{
	struct fs_pt *pt = fs->priv->pt;
	struct tier_info info;
	uint64_t cur = 0, seen;

	if (!pt)
		return;
	/* a late event of an older publication leaves the key's current
	 * one (published again since) its shadow, and one published after
	 * the look (its entry's gen is past every gen seen before it) */
	pthread_mutex_lock(&pt->lock);
	seen = pt->max_gen;
	pthread_mutex_unlock(&pt->lock);
	if (tier_stat(fs->tier, ns, key, &info) == 0)
		cur = info.gen;
	pthread_mutex_lock(&pt->lock);
	key_gone(pt, ns, key, seen + 1, cur);
	pthread_mutex_unlock(&pt->lock);
}

void fs_pt_counts(struct fs *fs, struct fs_pt_counts *c)
{
	struct fs_pt *pt = fs->priv->pt;

	memset(c, 0, sizeof(*c));
	if (!pt)
		return;
	pthread_mutex_lock(&pt->lock);
	*c = pt->n;
	c->on = fs_pt_on() && !pt->refused;
	pthread_mutex_unlock(&pt->lock);
}
