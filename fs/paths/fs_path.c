/*
 * fs_path.c - the FUSE operations of path namespaces.
 *
 * A namespace in path mode (user.kvfs.names = paths) holds any tree of
 * directories and any file names, so an engine's own disk tier (vLLM's
 * file-system offloading tier, SGLang's HiCacheFile, LMCache's
 * LocalDiskBackend) runs on it unchanged. Every file is a chunk of the
 * engine whose key is XXH3-128 of its path below the namespace
 * (kvfs_path_key), so tiers, compression, checksums, eviction, leases,
 * stats and batched lookups apply as to key chunks.
 *
 * Versions. A file is written through an fs_wr (a temporary, in the
 * engine's terms) that its name (struct fs_pent) points to. It is
 * published under its path's key when it is closed: at once when a
 * rename moves a closed file onto a name (the write-then-rename idiom
 * costs no copy), else by the background thread FS_PATH_PUBLISH_MS after
 * its last close (so the rename that usually follows a close finds it
 * unpublished), or sooner when a reader opens it or too many wait.
 * Until then lookups, stat, readdir and reads see the writer's bytes. A
 * published file never changes in place: O_TRUNC starts a new version
 * that replaces it once closed, as os.replace does; readers that have the
 * old one open keep its bytes (the engine keeps a pinned chunk until its
 * last reader lets go); opening it for writing without O_TRUNC is EPERM.
 * A writer killed by a signal publishes nothing (fs_op_flush discards).
 *
 * Renaming a published file copies it to the new key (its key is its
 * path); renaming a directory that holds anything is EXDEV for the same
 * reason (mv(1) then copies), an empty one is moved.
 *
 * Locks: fs_priv.lock protects the tree (fs_ptree.h); a publication or
 * copy runs without it, with its entry marked busy: whatever would move
 * or remove a busy entry waits on fs_paths.idle first.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/paths/fs_ptree.h"
#include "tier/tier_order.h"

#define FS_PATH_PUBLISH_MS 200 /* a closed file waits this long for a rename */
#define FS_PATH_PENDING_MAX 64 /* closed files waiting, at most */

static struct fs_paths *paths_of(struct fs *fs)
{
	return fs->priv->paths;
}

/* Is w closed, as readers and renames see it: no fd open for writing, or
 * only those whose close(2) already returned (their RELEASE comes
 * asynchronously)? Readers that joined it do not keep it open: a
 * program's close publishes its file (and makes an fsync'ed one
 * durable) whoever reads it meanwhile. priv.lock held. */
static bool closed_locked(const struct fs_wr *w)
{
	return fs_path_wr_closed_locked(w);
}

bool fs_path_wr_closed_locked(const struct fs_wr *w)
{
	/* (several fds: each closed by its opener, the last one's FLUSH
	 * set closing; their RELEASEs may come in any order after) */
	return !w->wopens || (w->wopens == w->wflushed && w->closing);
}

static void pin_for_readers(struct fs *fs, struct fs_wr *w, uint32_t ns,
			    const struct kvfs_key *key, uint64_t gen);

/* ------------------------------------------------------ pending writers */

static void pending_add(struct fs_paths *t, struct fs_wr *w)
{
	if (w->pending)
		return;
	w->pnext = &t->pending;
	w->pprev = t->pending.pprev;
	w->pprev->pnext = w;
	t->pending.pprev = w;
	w->pending = true;
	t->npending++;
}

static void pending_del(struct fs_paths *t, struct fs_wr *w)
{
	if (!w->pending)
		return;
	w->pprev->pnext = w->pnext;
	w->pnext->pprev = w->pprev;
	w->pending = false;
	t->npending--;
}

/* e's name no longer has w (priv.lock held): drops the entry's reference
 * and, when nothing published holds the name, the name. */
void fs_path_detach_writer(struct fs *fs, struct fs_pent *e, struct fs_wr *w)
{
	struct fs_paths *t = paths_of(fs);

	pending_del(t, w);
	w->pent = NULL;
	if (e && e->wr == w) {
		e->wr = NULL;
		if (!e->keyed && !e->busy)
			fs_ptree_remove(t, e);
	}
	fs_wr_unref_locked(fs, w);
}

/* -------------------------------------------------------- publication */

/* A published file's name shows what its writer showed: mode, owner,
 * mtime (its last write or utimensat), st_ino. priv.lock held. */
void pth_name_takes_attr(struct fs_pent *e, struct fs_wr *w)
{
	uint64_t mt = __atomic_load_n(&w->mtime_ns, __ATOMIC_RELAXED);

	e->has_attr = true;
	e->mode = w->mode;
	e->uid = w->uid;
	e->gid = w->gid;
	e->has_mtime = true;
	e->mtime.tv_sec = (time_t)(mt / 1000000000ULL);
	e->mtime.tv_nsec = (long)(mt % 1000000000ULL);
}

/* key of ns was just published: the one published before it in ns (*prev,
 * true) if any; key becomes ns's last. priv.lock held. */
static bool follow_last(struct fs_paths *t, uint32_t ns,
			const struct kvfs_key *key, struct kvfs_key *prev)
{
	struct fs_plast *l = &t->last[ns % FS_PLAST];
	bool has = l->set && l->ns == ns && memcmp(&l->key, key, sizeof(*key));

	if (has)
		*prev = l->key;
	l->ns = ns;
	l->set = true;
	l->key = *key;
	return has;
}

/*
 * Publishes closed writer w under the key of its name's path. Does
 * nothing when w has no name any more (unlinked, replaced: it is dropped
 * by its last reference). priv.lock NOT held. Returns the error of the
 * fsync an earlier fsync of w asked for (fs_wr_sync), else 0.
 */
int fs_path_publish_closed(struct fs *fs, struct fs_wr *w)
{
	struct fs_paths *t = paths_of(fs);
	struct fs_priv *p = fs->priv;
	char path[FS_PATH_MAX + 1];
	struct kvfs_key key, old_key, prev;
	bool has_prev = false;
	struct fs_pent *e;
	uint64_t gen = 0;
	uint32_t ns;
	bool had_old = false;
	uint64_t dir_ino;
	int len, err;

	pthread_mutex_lock(&p->lock);
	while ((e = w->pent) && e->wr == w && e->busy)
		fs_ptree_wait_idle(fs, e);
	if (!e || e->wr != w || !closed_locked(w)) {
		/* published meanwhile by another thread (a reader's settle),
		 * whose sync of an fsync'ed w may not have ended: ours */
		bool again = w->has_key &&
			     __atomic_load_n(&w->sync, __ATOMIC_ACQUIRE);

		key = w->key;
		pthread_mutex_unlock(&p->lock);
		return again ? fs_wr_sync(fs, w, &key) : 0;
	}
	pending_del(t, w);
	len = fs_ptree_path(e->parent, e->name, e->len, path);
	if (len < 0) { /* checked at create and rename: cannot happen */
		pthread_mutex_unlock(&p->lock);
		return 0;
	}
	fs_ptree_busy(fs, e, true);
	ns = e->parent->ns;
	dir_ino = e->parent->ino;
	kvfs_path_key(path, (size_t)len, &key);
	/* its BlockStored carries the name's block hash (fs_pevent.c), its
	 * L3 record the writer's attributes (fs_pattr.c) */
	fs_pev_note(t, ns, &key, e->name, e->len);
	fs_pattr_note_writer(fs, ns, &key, w);
	w->key = key; /* for readers of the writer's fd (fs_op_read) */
	fs_ptree_pub(t, ns, &key, true); /* a GET of key waits for it */
	w->refs++;
	pthread_mutex_unlock(&p->lock);

	err = fs_wr_publish_replace(fs, w, &key);
	pthread_rwlock_rdlock(&w->lock);
	gen = w->final_gen;
	pthread_rwlock_unlock(&w->lock);
	if (!err) /* e is still busy: no next version yet */
		pin_for_readers(fs, w, ns, &key, gen);

	pthread_mutex_lock(&p->lock);
	fs_ptree_pub(t, ns, &key, false);
	fs_ptree_busy(fs, e, false);
	if (!err) {
		w->has_key = true;
		fs_ptree_key(t, e, &key, gen);
		pth_name_takes_attr(e, w);
		has_prev = follow_last(t, ns, &key, &prev);
	} else {
		/* not published (a write failed: close and fsync said so):
		 * the O_TRUNC that began it had removed the previous
		 * version for its caller; it leaves the engine below too */
		had_old = e->keyed;
		old_key = e->key;
		fs_ptree_unkey(t, e);
	}
	fs_path_detach_writer(fs, e, w);
	fs_wr_unref_locked(fs, w);
	pthread_mutex_unlock(&p->lock);
	if (!err && t->journal) /* with its attributes */
		fs_pjournal_add_file(fs, ns, &key);
	if (err && had_old)
		tier_unlink(fs->tier, ns, &old_key);
	if (err) /* old_key is key: the path's */
		fs_pev_forget(t, ns, &key);
	if (!err) /* other nodes find its directories by name */
		fs_path_l3_mark(fs, dir_ino);
	if (!err) /* the kernel's entry of an older version expires
		   * (pth_published): fs_wr_publish_replace queued it before
		   * the name had the key, so the background thread may have
		   * missed it */
		fs_queue_inval(fs, ns, &key, true);
	if (has_prev) /* read back in the order stored: readahead follows */
		tier_order_hint(fs->tier, ns, &prev, &key);
	if (err) {
		fs_log(fs, "path file discarded at publication: %s",
		       strerror(-err));
		return 0; /* close and fsync reported the write's error */
	}
	/* fsync'ed before: its record and its name durable now */
	return fs_wr_sync(fs, w, &key);
}

/* Publishes closed writers: those closed before cutoff_ms (every one for
 * UINT64_MAX), at most max; of those closed by their FLUSH whose RELEASE
 * has not come (an fd may still be open: a dup), only flushed_ns's
 * (UINT32_MAX: none). priv.lock NOT held. */
static void publish_some(struct fs *fs, uint64_t cutoff_ms, size_t max,
			 uint32_t flushed_ns)
{
	struct fs_paths *t = paths_of(fs);
	struct fs_wr *batch[16];
	size_t n, done = 0;

	do {
		pthread_mutex_lock(&fs->priv->lock);
		n = 0;
		for (struct fs_wr *w = t->pending.pnext; w != &t->pending &&
		     n < 16 && done + n < max; w = w->pnext) {
			if (w->closed_ms > cutoff_ms)
				break; /* the list is in closing order */
			if (w->wopens && w->ns != flushed_ns)
				continue; /* flushed, its RELEASE to come */
			w->refs++;
			batch[n++] = w;
		}
		pthread_mutex_unlock(&fs->priv->lock);
		for (size_t i = 0; i < n; i++) {
			fs_path_publish_closed(fs, batch[i]);
			fs_wr_unref(fs, batch[i]);
		}
		done += n;
	} while (n == 16 && done < max);
}

void pth_publish_pending(struct fs *fs, uint64_t cutoff_ms, size_t max)
{
	publish_some(fs, cutoff_ms, max, UINT32_MAX);
}

void pth_publish_flushed(struct fs *fs, uint32_t ns)
{
	publish_some(fs, UINT64_MAX, SIZE_MAX, ns);
}

void pth_tick(struct fs *fs)
{
	uint64_t now = fs_now_ms();

	fs_path_publish_pending(fs, now > FS_PATH_PUBLISH_MS ?
			now - FS_PATH_PUBLISH_MS : 0, SIZE_MAX);
	fs_psuper_expire(fs);
	fs_pjournal_sync(fs);
}

/* ------------------------------------------------------------ writers */

static void release_fh(struct fs *fs, struct fs_fh *fh);

static void settle(struct fs *fs, uint32_t ns, const struct kvfs_key *key);

static bool path_writer(const struct fs_fh *fh)
{
	return fh && fh->kind == FS_FH_WRITER && fh->wr && fh->wr->path;
}

/*
 * Starts a new version of a file, written through a new fh: for a create,
 * the file name in directory dir_ino (a new name: -EEXIST if it appeared
 * meanwhile), with the writer's inode made with one lookup (the reply's);
 * for an O_TRUNC open of a published file (key in ns), its entry, and the
 * kernel keeps the published file's inode for the fd. When that file has
 * a new version being written already, the open joins it (truncating it:
 * several writers of the same bytes end with one complete file).
 * priv.lock NOT held. 0 or -errno.
 */
static int writer_start(fuse_req_t req, uint32_t ns, uint64_t dir_ino,
			const char *name, const struct kvfs_key *key,
			struct fs_fh **out)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct tier_wr *tw = NULL;
	struct fs_inode *in = NULL;
	struct fs_pdir *d;
	struct fs_fh *fh;
	struct fs_wr *w;
	struct fs_pent *e;
	int err;

	err = tier_wr_begin(fs->tier, ns, NULL, 0, &tw);
	if (err == -ENOSPC) { /* closed files hold arena: publish them */
		fs_path_publish_pending(fs, UINT64_MAX, SIZE_MAX);
		err = tier_wr_begin(fs->tier, ns, NULL, 0, &tw);
	}
	if (err)
		return err;
	fh = fs_fh_new(req, FS_FH_WRITER, 0);
	if (!fh) {
		tier_wr_abort(fs->tier, tw);
		return -ENOMEM;
	}
	pthread_mutex_lock(&p->lock);
again:
	if (key) {
		while ((e = fs_ptree_by_key(paths_of(fs), ns, key)) &&
		       e->busy)
			fs_ptree_wait_idle(fs, e);
		err = e ? 0 : -ENOENT;
	} else {
		d = fs_ptree_dir(fs, dir_ino);
		err = d ? fs_ptree_mkfile(paths_of(fs), d, name, strlen(name),
					  &e) : -ENOENT;
	}
	if (err)
		goto fail;
	if (key && e->wr && closed_locked(e->wr)) {
		/* closed, not yet published (its close returned): published
		 * first, then replaced as any published file (joined, a
		 * killed O_TRUNC writer would take it with its own) */
		w = e->wr;
		w->refs++;
		pthread_mutex_unlock(&p->lock);
		fs_path_publish_closed(fs, w);
		fs_wr_unref(fs, w);
		pthread_mutex_lock(&p->lock);
		goto again;
	}
	if (e->wr) {
		/* join the version being written (e is idle, so it is not
		 * being published; counted open, no publication starts) */
		w = e->wr;
		pending_del(paths_of(fs), w);
		w->closing = false;
		fs_fh_attach_wr_locked(fh, w, ns);
		pthread_mutex_unlock(&p->lock);
		tier_wr_abort(fs->tier, tw);
		pthread_rwlock_rdlock(&w->lock);
		err = w->w ? tier_wr_truncate(fs->tier, w->w, 0) : -ESTALE;
		pthread_rwlock_unlock(&w->lock);
		if (err) {
			release_fh(fs, fh);
			return err;
		}
		*out = fh;
		return 0;
	}
	w = fs_wr_new(p);
	if (w && !key) {
		in = fs_inode_new(p, FS_K_WRITER, w->ino);
		if (!in) {
			fs_wr_unref_locked(fs, w);
			w = NULL;
		}
	}
	if (!w) {
		if (!key)
			fs_ptree_remove(paths_of(fs), e);
		err = -ENOMEM;
		goto fail;
	}
	w->w = tw;
	tw = NULL;
	w->ns = ns;
	w->uid = ctx->uid;
	w->gid = ctx->gid;
	if (key && e->has_attr) { /* a new version keeps mode and owner */
		w->mode = e->mode;
		w->uid = e->uid;
		w->gid = e->gid;
		if (ctx->uid != 0) /* a write by another drops set-id bits */
			w->mode &= ~(mode_t)(S_ISUID |
						 ((w->mode & S_IXGRP) ? S_ISGID : 0));
	}
	w->st_ino = e->ino;
	w->creator_tid = ctx->pid;
	w->created_ticks = fs_boot_ticks();
	w->temp = true;
	w->path = true;
	if (in) { /* the inode owns the reference fs_wr_new made */
		in->ns = ns;
		in->wr = w;
		in->nlookup = 1;
		w->refs++;
	}
	e->wr = w;         /* the entry's reference */
	w->pent = e;
	fs_fh_attach_wr_locked(fh, w, ns);
	pthread_mutex_unlock(&p->lock);
	*out = fh;
	return 0;
fail:
	pthread_mutex_unlock(&p->lock);
	if (tw)
		tier_wr_abort(fs->tier, tw);
	fs_fh_free(fs, fh);
	return err;
}

/* Readers that joined w while it was written keep reading the version
 * it became, as any reader of a published file, after a next version
 * replaced it: that version is pinned for them until the last fd of w
 * goes (fs_fh_free). No lock held. */
static void pin_for_readers(struct fs *fs, struct fs_wr *w, uint32_t ns,
			    const struct kvfs_key *key, uint64_t gen)
{
	struct tier_chunk *c = NULL;
	bool readers;

	pthread_mutex_lock(&fs->priv->lock);
	readers = w->opens > w->wopens;
	pthread_mutex_unlock(&fs->priv->lock);
	if (!readers || tier_get_flags(fs->tier, ns, key, TIER_GET_NOCOUNT, &c))
		return;
	if (tier_chunk_gen(c) == gen) {
		pthread_rwlock_wrlock(&w->lock);
		pthread_mutex_lock(&fs->priv->lock);
		if (!w->pub_chunk && w->opens > w->wopens) {
			w->pub_chunk = c; /* fs_fh_free drops it */
			c = NULL;
		}
		pthread_mutex_unlock(&fs->priv->lock);
		pthread_rwlock_unlock(&w->lock);
	}
	if (c)
		tier_put(fs->tier, c);
}

/* The last close of a path writer (fs_op_release dropped the fh). */
static void writer_closed(struct fs *fs, struct fs_wr *w)
{
	struct fs_paths *t = paths_of(fs);
	struct fs_priv *p = fs->priv;
	enum fs_wr_state st;
	bool over = false;

	pthread_rwlock_rdlock(&w->lock);
	st = w->state;
	pthread_rwlock_unlock(&w->lock);
	pthread_mutex_lock(&p->lock);
	if (w->wopens || st == FS_WR_PUBLISHED) {
		/* still open for writing, or published when its close(2)
		 * returned */
		pthread_mutex_unlock(&p->lock);
		return;
	}
	if (st != FS_WR_OPEN || !w->pent) {
		/* killed (discarded by flush), or nameless: dropped once the
		 * last fd goes (an unlinked file's readers read on) */
		if (w->opens) {
			pthread_mutex_unlock(&p->lock);
			return;
		}
		if (w->pent) {
			w->refs++;
			fs_path_detach_writer(fs, w->pent, w);
		} else {
			w->refs++;
		}
		pthread_mutex_unlock(&p->lock);
		pthread_rwlock_wrlock(&w->lock);
		fs_wr_discard(fs, w, FS_DISCARD_UNLINKED);
		pthread_rwlock_unlock(&w->lock);
		fs_wr_unref(fs, w);
		return;
	}
	if (w->pending) { /* a reader's last close, after the writer's */
		pthread_mutex_unlock(&p->lock);
		return;
	}
	w->closed_ms = fs_now_ms();
	pending_add(t, w);
	over = t->npending > FS_PATH_PENDING_MAX;
	pthread_mutex_unlock(&p->lock);
	if (!over) {
		struct tier_stats ts;

		/* writers are never evicted: keep room for new ones */
		tier_get_stats(fs->tier, &ts);
		over = ts.writer_bytes > ts.l1_capacity / 4;
	}
	if (over)
		fs_path_publish_pending(fs, UINT64_MAX, SIZE_MAX);
}

/* --------------------------------------------------------- attributes */

void pth_dir_attr(const struct fs_pdir *d, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = d->ino;
	st->st_mode = d->mode;
	st->st_nlink = 2;
	st->st_uid = d->uid;
	st->st_gid = d->gid;
	st->st_size = d->nent;
	st->st_blksize = 1 << 20;
	st->st_mtim = d->mtime;
	st->st_ctim = d->ctime;
	st->st_atim = d->mtime;
}

/* ------------------------------------------------------------- lookup */

/* Checks name (a component) and, with d, the path it makes. */
static int name_check(const struct fs_pdir *d, const char *name, size_t len)
{
	char path[FS_PATH_MAX + 1];

	if (len > 255)
		return -ENAMETOOLONG;
	return fs_ptree_path(d, name, len, path) < 0 ? -ENAMETOOLONG : 0;
}

void fs_path_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	struct fuse_entry_param ep;
	struct fs_pdir *d;
	struct fs_pent *e;
	struct fs_wr *w = NULL;
	struct kvfs_key key;
	size_t len = strlen(name);
	bool l3_tried = false;
	uint32_t ns;
	int err;

again:
	pthread_mutex_lock(&p->lock);
	d = fs_ptree_dir(fs, parent);
	if (!d) {
		pthread_mutex_unlock(&p->lock);
		fs_op_lookup(req, parent, name);
		return;
	}
	memset(&ep, 0, sizeof(ep));
	e = len > 255 ? NULL : fs_ptree_find(paths_of(fs), d, name, len);
	if (!e && len <= 255 && !l3_tried) {
		/* not here: maybe another node stored it in L3 */
		pthread_mutex_unlock(&p->lock);
		l3_tried = true;
		if (fs_path_l3_find(fs, parent, name, len) == 0)
			goto again;
		pthread_mutex_lock(&p->lock);
		d = fs_ptree_dir(fs, parent);
		e = d ? fs_ptree_find(paths_of(fs), d, name, len) : NULL;
	}
	if (!e) {
		pthread_mutex_unlock(&p->lock);
		if (len <= 255 && !tier_l3_on(fs->tier)) {
			/* Without L3 a name appears only through this kernel
			 * (create, mkdir, rename: each replaces the kernel's
			 * negative entry itself; the journal is replayed
			 * before the first lookup), so its absence
			 * is cached for FS_TTL: vLLM's exists(), makedirs()
			 * and mkdir() of one new directory cost one LOOKUP,
			 * not three. With L3, another node may store the
			 * name at any time: every lookup asks. */
			ep.ino = 0;
			ep.entry_timeout = FS_TTL;
			fuse_reply_entry(req, &ep);
			return;
		}
		fuse_reply_err(req, len > 255 ? ENAMETOOLONG : ENOENT);
		return;
	}
	ns = d->ns;
	if (e->dir) {
		e->dir->nlookup++;
		pth_dir_attr(e->dir, &ep.attr);
		ep.ino = e->dir->ino;
		/* names change only through this kernel, which updates its
		 * cache itself; a file's cached entry that a new version or
		 * an eviction made stale answers ESTALE or ENOENT at open,
		 * as key chunks do */
		ep.attr_timeout = FS_PATH_TTL;
		ep.entry_timeout = FS_PATH_TTL;
		pthread_mutex_unlock(&p->lock);
		fs_reply_entry_counted(fs, req, &ep);
		return;
	}
	/* a new version of a published file replaces it once closed */
	if (e->wr && (!e->keyed || closed_locked(e->wr))) {
		w = e->wr;
		w->refs++;
	} else {
		key = e->key;
	}
	pthread_mutex_unlock(&p->lock);
	if (w) {
		err = fs_entry_writer(fs, ns, w, &ep);
		fs_wr_unref(fs, w);
	} else {
		err = fs_entry_chunk(fs, ns, &key, &ep);
		if (err == -ENOENT) /* evicted: drop the name now */
			fs_path_drop_gone(fs, ns, &key, false);
		ep.attr_timeout = ep.entry_timeout = FS_PATH_TTL;
	}
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	fs_reply_entry_counted(fs, req, &ep);
}

void pth_forget_locked(struct fs *fs, uint64_t ino, uint64_t n)
{
	struct fs_pdir *d = fs_ptree_dir(fs, ino);

	if (!d)
		return;
	d->nlookup = n > d->nlookup ? 0 : d->nlookup - n;
	fs_ptree_release_dir(paths_of(fs), d);
}

/* ------------------------------------------------- getattr and setattr */

void fs_path_op_getattr(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct fs_pdir *d;
	struct stat st;

	if (fi && path_writer(fs_fh_of(fi))) {
		/* an fd writing a new version of a published file: its own
		 * size (the kernel's inode is the published one's) */
		fs_writer_attr(fs, fs_fh_of(fi)->wr, &st);
		fuse_reply_attr(req, &st, 0);
		return;
	}
	if (!fs_is_pdir_ino(ino)) {
		struct fs_inode *in, *nsi;

		pthread_mutex_lock(&fs->priv->lock);
		in = fs_ino_find(fs->priv, ino);
		nsi = in && in->kind == FS_K_CHUNK ?
		      fs_ns_find(fs->priv, in->ns) : NULL;
		if (nsi && nsi->pdir) {
			struct kvfs_key key = in->key;

			/* a name being replaced answers ESTALE (a new
			 * lookup), not ENOENT from the gap between the old
			 * version's unlink and the new one's publication */
			settle(fs, nsi->ns, &key); /* drops priv.lock */
		} else {
			pthread_mutex_unlock(&fs->priv->lock);
		}
		fs_op_getattr(req, ino, fi);
		return;
	}
	pthread_mutex_lock(&fs->priv->lock);
	d = fs_ptree_dir(fs, ino);
	if (d && !d->removed)
		pth_dir_attr(d, &st);
	pthread_mutex_unlock(&fs->priv->lock);
	if (!d || d->removed)
		fuse_reply_err(req, ENOENT);
	else
		fuse_reply_attr(req, &st, FS_PATH_TTL);
}

/* ------------------------------------------------ create, open, release */

void fs_path_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		       mode_t mode, struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	struct fs_pdir *d;
	struct fs_fh *fh;
	size_t len = strlen(name);
	uint32_t ns;
	int err;

	pthread_mutex_lock(&p->lock);
	d = fs_ptree_dir(fs, parent);
	if (!d) {
		pthread_mutex_unlock(&p->lock);
		fs_op_create(req, parent, name, mode, fi);
		return;
	}
	err = name_check(d, name, len);
	ns = d->ns;
	pthread_mutex_unlock(&p->lock);
	if (!err)
		err = writer_start(req, ns, parent, name, NULL, &fh);
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	pthread_mutex_lock(&p->lock);
	fh->wr->mode = mode & 07777; /* the kernel applied the umask */
	pthread_mutex_unlock(&p->lock);
	if (fs_writer_reply_create(fs, req, fh, fi))
		release_fh(fs, fh);
}

/*
 * Opens of what lives in a path namespace that differ from key
 * namespaces: a published file opened for writing (O_TRUNC: a new
 * version; else EPERM), and a writer's inode once that writer was
 * published (ESTALE: the kernel looks the name up again) or closed and
 * waiting (published first: a reader pins the chunk rather than a writer
 * that goes away, a writer starts a new version or gets EPERM).
 */
/*
 * Before a reader opens the published chunk (ns, key) through an inode the
 * kernel cached: a publication of that name in flight (which replaces the
 * chunk: unlink, then publish) is waited for, and a closed new version is
 * published, so the open finds the name's current version (or ESTALE,
 * which makes the kernel look the name up again), never the gap between.
 * Called with priv.lock held; returns with it dropped.
 */
static void settle(struct fs *fs, uint32_t ns, const struct kvfs_key *key)
{
	struct fs_pent *e;
	struct fs_wr *w = NULL;

	while ((e = fs_ptree_by_key(paths_of(fs), ns, key)) && e->busy)
		fs_ptree_wait_idle(fs, e);
	if (e && e->wr && closed_locked(e->wr)) {
		w = e->wr;
		w->refs++;
	}
	pthread_mutex_unlock(&fs->priv->lock);
	if (w) {
		fs_path_publish_closed(fs, w);
		fs_wr_unref(fs, w);
	}
}

void pth_settle_key(struct fs *fs, uint32_t ns, const struct kvfs_key *key)
{
	pthread_mutex_lock(&fs->priv->lock);
	settle(fs, ns, key); /* drops priv.lock */
}

/*
 * An open of path writer w's inode (w referenced, priv.lock NOT held).
 * While w is being written, the open joins it (readers read what was
 * written so far; O_TRUNC truncates it) and is replied to: 0. A closed w
 * is published first (as far as opens can tell, closed is published).
 * Once published, an O_TRUNC writer gets 1 and the key (the caller starts
 * the next version); a reader -ESTALE (the kernel looks the name up
 * again), another writer -EPERM. Discarded or nameless: -ESTALE.
 */
static int open_writer(fuse_req_t req, fuse_ino_t ino, struct fs_wr *w,
		       struct fuse_file_info *fi, bool trunc,
		       struct kvfs_key *key)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	struct fs_fh *fh = fs_fh_new(req, FS_FH_WRITER, ino);
	enum fs_wr_state st;
	struct fs_pent *e;
	bool closed = false;

	if (!fh)
		return -ENOMEM;
again:
	pthread_mutex_lock(&p->lock);
	while ((e = w->pent) && e->wr == w && e->busy)
		fs_ptree_wait_idle(fs, e);
	if (e && e->wr == w && w->opens && !closed_locked(w)) {
		/* being written, and no publication can start now */
		pending_del(paths_of(fs), w);
		w->refs++;
		w->opens++;
		if ((fi->flags & O_ACCMODE) != O_RDONLY) {
			w->wopens++;
			fh->wmode = true;
		}
		fh->wr = w;
		fh->ns = w->ns;
		pthread_mutex_unlock(&p->lock);
		__atomic_add_fetch(&p->opens, 1, __ATOMIC_RELAXED);
		if (fs_writer_reply_open(fs, req, fh, fi))
			release_fh(fs, fh);
		return 0;
	}
	closed = e && e->wr == w;
	pthread_mutex_unlock(&p->lock);
	if (closed)
		fs_path_publish_closed(fs, w);
	pthread_rwlock_rdlock(&w->lock);
	st = w->state;
	pthread_rwlock_unlock(&w->lock);
	if (closed && st == FS_WR_OPEN)
		goto again; /* reopened meanwhile: join it */
	fs_fh_free(fs, fh);
	*key = w->key;
	/* no longer its name's file (replaced, unlinked, discarded): the
	 * kernel looks the name up again and finds what it is now */
	if (st != FS_WR_PUBLISHED)
		return -ESTALE;
	if (trunc)
		return 1;
	return (fi->flags & O_ACCMODE) == O_RDONLY ? -ESTALE : -EPERM;
}

/*
 * A read-only open of a version replaced in its writer's close, whose
 * bytes are still pinned (fs_psuper.c): only an open whose lookup found
 * that version before the close returned gets here, and it opens that
 * version, as if it came before the publication. The kernel checked the
 * caller's access against the attributes it showed (its own). true:
 * replied. false: nothing pinned (the caller's ESTALE or current version).
 */
static bool open_superseded(fuse_req_t req, fuse_ino_t ino,
			    struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct tier_chunk *c;
	struct kvfs_key key;
	uint32_t ns;

	if (fs_psuper_pin(fs, ino, &c, &ns, &key))
		return false;
	fs_open_chunk_reply(fs, req, ino, ns, &key, c, false, fi);
	return true;
}

void fs_path_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	int acc = fi->flags & O_ACCMODE;
	bool trunc = acc != O_RDONLY && (fi->flags & O_TRUNC) &&
		     !(fi->flags & O_APPEND);
	struct fs_inode *in, *nsi;
	struct fs_wr *w = NULL;
	struct fs_fh *fh;
	struct kvfs_key key;
	uint32_t ns;
	int err;

	pthread_mutex_lock(&p->lock);
	in = ino >= FS_INO_CHUNK ? fs_ino_find(p, ino) : NULL;
	nsi = in ? fs_ns_find(p, in->ns) : NULL;
	if (!in || !nsi || !nsi->pdir || in->kind == FS_K_NS) {
		pthread_mutex_unlock(&p->lock);
		if (fs_is_pdir_ino(ino))
			fuse_reply_err(req, EISDIR);
		else
			fs_op_open(req, ino, fi);
		return;
	}
	ns = in->ns;
	if (in->kind == FS_K_WRITER) {
		w = in->wr;
		w->refs++;
		pthread_mutex_unlock(&p->lock);
		err = open_writer(req, ino, w, fi, trunc, &key);
		fs_wr_unref(fs, w);
		if (err <= 0) { /* joined and replied (0), or failed */
			if (err)
				fuse_reply_err(req, -err);
			return;
		}
		/* published: an O_TRUNC open starts the next version */
	} else {
		/* a published file (maybe replaced meanwhile: the name's
		 * current version is what an O_TRUNC open replaces) */
		key = in->key;
		if (acc == O_RDONLY && !(fi->flags & O_TRUNC)) {
			settle(fs, ns, &key); /* drops priv.lock */
			if (!open_superseded(req, ino, fi))
				fs_op_open(req, ino, fi);
			return;
		}
		pthread_mutex_unlock(&p->lock);
		if (!trunc) {
			fuse_reply_err(req, EPERM); /* never changed in place */
			return;
		}
	}
	err = writer_start(req, ns, 0, NULL, &key, &fh);
	if (err) {
		/* the name went (evicted, unlinked) since the kernel cached
		 * it: a new lookup (an O_CREAT open then creates it) */
		fuse_reply_err(req, err == -ENOENT ? ESTALE : -err);
		return;
	}
	fh->ino = ino;
	fi->fh = (uint64_t)(uintptr_t)fh;
	fi->direct_io = 1;
	fi->keep_cache = 0;
	__atomic_add_fetch(&p->opens, 1, __ATOMIC_RELAXED);
	if (fuse_reply_open(req, fi))
		release_fh(fs, fh);
}

/* Closes fh of a path writer that the kernel never got or released. */
static void release_fh(struct fs *fs, struct fs_fh *fh)
{
	struct fs_wr *w = fh->wr;

	pthread_mutex_lock(&fs->priv->lock);
	w->refs++;
	pthread_mutex_unlock(&fs->priv->lock);
	fs_fh_free(fs, fh);
	writer_closed(fs, w);
	fs_wr_unref(fs, w);
}

void fs_path_op_release(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct fs_fh *fh = fs_fh_of(fi);

	if (!path_writer(fh)) {
		fs_op_release(req, ino, fi);
		return;
	}
	release_fh(fs, fh);
	fuse_reply_err(req, 0);
}

/*
 * close(2) of a path writer's fd by the thread that opened it, when no
 * other fd has the file open: the file counts as closed from here (a
 * reader's open, a lookup, a rename publish it), not from the RELEASE
 * the kernel sends after close(2) returned. fs_op_flush still replies
 * (and discards the file of a writer killed by a signal).
 */
void fs_path_op_flush(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct fs_fh *fh = fs_fh_of(fi);
	struct fs_psuper sup = { .on = false };
	bool doomed = false, replaces = false;
	struct kvfs_key key;
	uint32_t ns = 0;
	bool synced = false;
	int err = 0;

	pid_t tid = fuse_req_ctx(req)->pid;

	/* the opener's close, or another thread's of its process (a
	 * thread pool: fsync'ed and closed there, the publication must be
	 * made durable before close returns all the same) */
	if (path_writer(fh) && fh->wmode &&
	    (tid == fh->pid || fs_wr_same_process(fh->wr, tid))) {
		struct fs_wr *w = fh->wr;
		bool dup = false, blank, last;
		uint64_t sino;

		/* a new version with nothing written yet (nor fsync'ed),
		 * whose closer holds another fd writing to it: a dup (a
		 * shell's `cmd > file` closes the fd it opened, then fstats
		 * and writes through its dup), so it stays open, to
		 * readers' settles too, until its release publishes it, as
		 * fs_op_flush leaves an empty key chunk; else it is
		 * published now as any new version */
		pthread_mutex_lock(&fs->priv->lock);
		/* the last fd open for writing: the others' openers closed
		 * them (their RELEASE may come after this FLUSH) */
		last = w->wopens - w->wflushed - !fh->wflushed == 0;
		blank = last && w->pent && w->pent->wr == w &&
			!__atomic_load_n(&w->nwrites, __ATOMIC_RELAXED) &&
			!__atomic_load_n(&w->sync, __ATOMIC_ACQUIRE);
		sino = w->st_ino;
		pthread_mutex_unlock(&fs->priv->lock);
		if (blank)
			dup = fs_task_writes_ino(tid, sino);
		pthread_mutex_lock(&fs->priv->lock);
		last = w->wopens - w->wflushed - !fh->wflushed == 0;
		if (last) {
			bool rewrite = w->pent && w->pent->wr == w &&
				       w->pent->keyed;
			/* a dup writes on (a new name too: `cmd > new`
			 * with a reader's open meanwhile published it
			 * empty, and cmd's writes got EPERM) */
			bool stays = dup &&
				     !__atomic_load_n(&w->nwrites,
						      __ATOMIC_RELAXED) &&
				     !__atomic_load_n(&w->sync,
						      __ATOMIC_ACQUIRE);
			bool empty = rewrite && stays;

			w->closing = !stays;
			if (!stays && !fh->wflushed) {
				fh->wflushed = true;
				w->wflushed++;
			}
			/* a write failed: close() reports it (fs_op_flush)
			 * and the file goes now, not at publication */
			doomed = fs_wr_error(w) != 0;
			replaces = !doomed && rewrite && !empty;
			/* a new name fsync'ed before its close: published
			 * (and made durable) now too */
			synced = !doomed && !replaces && w->pent &&
				 w->pent->wr == w &&
				 __atomic_load_n(&w->sync, __ATOMIC_ACQUIRE);
			/* closed as readers see it from now on: a GET in
			 * its namespace publishes it first (its RELEASE may
			 * be served after the GET, on another thread); the
			 * rest wait for the RELEASE (a dup may write on) */
			if (w->closing && !doomed && w->pent &&
			    w->pent->wr == w && !w->pending) {
				w->closed_ms = fs_now_ms();
				pending_add(paths_of(fs), w);
			}
		} else if (!fh->wflushed) {
			/* another fd of it stays open: this one is closed */
			fh->wflushed = true;
			w->wflushed++;
		}
		if (replaces) {
			/* the kernel's entry of the name goes before the
			 * close returns (fs_psuper.c) */
			ns = w->ns;
			key = w->pent->key;
			fs_psuper_begin(fs, w->pent, ns, &key, &sup);
		}
		pthread_mutex_unlock(&fs->priv->lock);
		/* A new version of a published file (O_TRUNC) is published
		 * before close(2) returns, not FS_PATH_PUBLISH_MS later: the
		 * replacement, and the erasure of the version it replaces,
		 * are done when the caller is told, so a daemon killed
		 * afterwards never brings the older version back. (A new
		 * name waits for its rename as before: lost in a crash, it
		 * is absent, not older, unless it was fsync'ed: then it is
		 * published and made durable before close(2) returns, and
		 * close reports an L2 error.) fh holds w meanwhile. A
		 * reader's open or stat may publish it first (settle): the
		 * entry goes here all the same. */
		if (replaces) {
			bool published;
			uint64_t gen;

			if (!fs_task_killed_by_signal(tid))
				err = fs_path_publish_closed(fs, w);
			pthread_rwlock_rdlock(&w->lock);
			published = w->state == FS_WR_PUBLISHED;
			gen = w->final_gen;
			pthread_rwlock_unlock(&w->lock);
			fs_psuper_end(fs, &sup, ns, &key, published, gen);
		} else if (synced && !fs_task_killed_by_signal(tid)) {
			err = fs_path_publish_closed(fs, w);
		}
	}
	if (doomed)
		fs_path_publish_closed(fs, fh->wr);
	if (err) {
		fuse_reply_err(req, -err); /* published, not durable */
		return;
	}
	fs_op_flush(req, ino, fi);
}

/* ------------------------------------------- chunks the engine let go */

void fs_path_drop_gone(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		       bool notify)
{
	struct fs_priv *p = fs->priv;
	struct tier_info info;
	struct fs_pent *e;
	uint64_t parent = 0;
	char *name = NULL;
	size_t len = 0;

	pthread_mutex_lock(&p->lock);
	e = fs_ptree_by_key(paths_of(fs), ns, key);
	if (e && !e->busy && tier_stat(fs->tier, ns, key, &info) == -ENOENT) {
		/* evicted (or dropped by L2): the file vanishes, unless a
		 * new version of it is being written */
		fs_ptree_unkey(paths_of(fs), e);
		fs_pev_forget(paths_of(fs), ns, key);
		if (!e->wr) {
			/* only a name the kernel holds (fs_inval.c) */
			if (notify && fs_chunk_find(p, ns, key)) {
				parent = e->parent->ino;
				len = e->len;
				name = strndup(e->name, len);
			}
			fs_ptree_remove(paths_of(fs), e);
		}
	}
	pthread_mutex_unlock(&p->lock);
	/* the kernel's cached entry of the name goes too (background thread
	 * only: a request handler must not wait on the kernel) */
	if (name && fs->se)
		fuse_lowlevel_notify_inval_entry(fs->se, parent, name, len);
	free(name);
}
