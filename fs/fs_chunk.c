/*
 * fs_chunk.c - chunk files and open handles: CREATE, OPEN, READ, WRITE,
 * FLUSH, RELEASE and FSYNC of chunks, of writers and of /.kvfs's files.
 *
 * Publication: a keyed chunk (created under its key) is published by the
 * first FLUSH (close) from its writer's process after bytes arrived, so
 * close() reports EEXIST, EMSGSIZE (chunk_bytes), ENOSPC or EFBIG (a write
 * failed: the chunk is never published with a hole); otherwise at its last
 * close. A temporary ('.' name) is published by rename(2) onto a key
 * (fs_rename.c). A writer killed by a signal publishes nothing
 * (fs_op_flush). Limitation: a writer that dup()s its fd, writes, closes
 * one copy and writes through the other gets EPERM for the late writes
 * (the first close published).
 *
 * Caching: chunk reads use direct_io (cache=direct, the default): each
 * read is answered from the pinned arena bytes with one copy, and the
 * arena is not duplicated in the page cache. Then mmap(MAP_PRIVATE,
 * PROT_READ) works (the kernel reads through the daemon) and
 * mmap(MAP_SHARED) fails with ENODEV, as for any direct_io file.
 * cache=page uses the kernel page cache with keep_cache (repeated reads at
 * memory speed, MAP_SHARED works); safe because chunks are immutable and a
 * new publication is a new inode. cache=passthrough: the kernel reads a
 * key namespace's chunk from its shadow when it has one (fs_pt.c), else
 * as cache=direct.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/fs_i.h"
#include "fs/fs_pt.h"

struct fs_fh *fs_fh_new(fuse_req_t req, enum fs_fh_kind kind, uint64_t ino)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fs_priv *p = fs_req(req)->priv;
	struct fs_fh *fh = calloc(1, sizeof(*fh));

	if (!fh)
		return NULL;
	fh->kind = kind; /* before it is in the list */
	fh->ino = ino;
	pthread_mutex_lock(&p->lock);
	fh->next = &p->fh_head;
	fh->prev = p->fh_head.prev;
	fh->prev->next = fh;
	p->fh_head.prev = fh;
	pthread_mutex_unlock(&p->lock);
	fh->uid = ctx->uid;
	fh->gid = ctx->gid;
	fh->pid = ctx->pid;
	pthread_mutex_init(&fh->ioctl_lock, NULL);
	return fh;
}

void fs_fh_free(struct fs *fs, struct fs_fh *fh)
{
	struct tier_chunk *pinned = NULL;

	fs_ioctl_release(fs, (uint64_t)(uintptr_t)fh);
	pthread_mutex_lock(&fs->priv->lock);
	fh->prev->next = fh->next;
	fh->next->prev = fh->prev;
	if (fh->wr) {
		if (fh->wmode) {
			fh->wr->wopens--;
			if (fh->wflushed)
				fh->wr->wflushed--;
		}
		if (!--fh->wr->opens) {
			fh->wr->closed_ms = fs_now_ms();
			/* no fd reads it now (a read holds its fd) */
			pinned = fh->wr->pub_chunk;
			fh->wr->pub_chunk = NULL;
		}
		fs_wr_unref_locked(fs, fh->wr);
	}
	pthread_mutex_unlock(&fs->priv->lock);
	if (pinned)
		tier_put(fs->tier, pinned);
	fs_pt_close(fs, fh->ino, (enum fs_pt_mode)fh->pt);
	if (fh->chunk)
		tier_put(fs->tier, fh->chunk);
	free(fh->snap);
	free(fh->ctl_buf);
	pthread_mutex_destroy(&fh->ioctl_lock);
	free(fh);
}

void fs_fh_attach_wr_locked(struct fs_fh *fh, struct fs_wr *w, uint32_t ns)
{
	w->refs++;
	w->opens++;
	w->wopens++; /* a create, or an O_TRUNC start */
	fh->wmode = true;
	fh->wr = w;
	fh->ns = ns;
	fh->ino = w->ino;
}

void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		  mode_t mode, struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct kvfs_key key;
	struct fs_inode *in;
	struct fs_wr *w;
	struct tier_wr *tw = NULL;
	struct fs_fh *fh;
	uint32_t ns;
	int err, r;

	r = fs_ns_child(fs, parent, name, &ns, &key);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if (r == 1) {
		/* an existing temporary: the kernel would have looked it up
		 * and opened it; here it appeared meanwhile */
		pthread_mutex_lock(&p->lock);
		w = fs_tmp_find(p, ns, name);
		pthread_mutex_unlock(&p->lock);
		if (w) {
			fuse_reply_err(req, EEXIST);
			return;
		}
	}
	err = tier_wr_begin(fs->tier, ns, r == 1 ? NULL : &key, 0, &tw);
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	if (r == 0) /* the kernel's lookup before a create is no miss */
		tier_count_name_misses(fs->tier, -1);
	fh = fs_fh_new(req, FS_FH_WRITER, 0);
	pthread_mutex_lock(&p->lock);
	w = fh ? fs_wr_new(p) : NULL;
	in = w ? fs_inode_new(p, FS_K_WRITER, w->ino) : NULL;
	if (!in)
		goto nomem;
	in->ns = ns;
	in->wr = w;      /* the inode owns the reference fs_wr_new made */
	w->w = tw;
	w->ns = ns;
	w->uid = ctx->uid;
	w->gid = ctx->gid;
	w->mode = mode & 07777; /* the kernel applied the umask */
	w->atime_ns = w->mtime_ns = w->ctime_ns = fs_now_ns();
	w->creator_tid = ctx->pid;
	w->created_ticks = fs_boot_ticks();
	if (r == 1) {
		w->temp = true;
		w->name = strdup(name);
		if (!w->name || fs_tmp_find(p, ns, name) || fs_tmp_list(p, w)) {
			err = w->name ? -EEXIST : -ENOMEM;
			goto fail;
		}
	} else {
		w->has_key = true;
		w->key = key;
		w->excl = fi->flags & O_EXCL;
		fh->has_key = true;
		fh->key = key;
	}
	in->nlookup = 1;
	fs_fh_attach_wr_locked(fh, w, ns);
	pthread_mutex_unlock(&p->lock);

	if (fs_writer_reply_create(fs, req, fh, fi))
		fs_fh_free(fs, fh);
	return;
fail:
	if (in)
		fs_inode_free(fs, in); /* drops fs_wr_new's ref: aborts tw */
	pthread_mutex_unlock(&p->lock);
	fs_fh_free(fs, fh);
	fuse_reply_err(req, -err);
	return;
nomem:
	if (w) {
		w->w = tw;
		fs_wr_unref_locked(fs, w);
	} else {
		tier_wr_abort(fs->tier, tw);
	}
	pthread_mutex_unlock(&p->lock);
	if (fh)
		fs_fh_free(fs, fh);
	fuse_reply_err(req, ENOMEM);
}

int fs_writer_reply_create(struct fs *fs, fuse_req_t req, struct fs_fh *fh,
			   struct fuse_file_info *fi)
{
	struct fs_priv *p = fs->priv;
	struct fuse_entry_param e;

	memset(&e, 0, sizeof(e));
	e.ino = fh->wr->ino;
	fs_writer_attr(fs, fh->wr, &e.attr);
	/* the kernel keeps the size current for its writer's own writes;
	 * attributes that expire at once cost a GETATTR before the first
	 * write */
	e.attr_timeout = FS_TTL;
	e.entry_timeout = 0;
	fi->fh = (uint64_t)(uintptr_t)fh;
	fi->direct_io = 1;
	fi->keep_cache = 0;
	__atomic_add_fetch(&p->opens, 1, __ATOMIC_RELAXED);
	if (fuse_reply_create(req, &e, fi) == 0)
		return 0;
	/* interrupted: the kernel has neither the inode nor the fd */
	pthread_mutex_lock(&p->lock);
	fs_forget_one(fs, e.ino, 1);
	pthread_mutex_unlock(&p->lock);
	return -1;
}

int fs_writer_reply_open(struct fs *fs, fuse_req_t req, struct fs_fh *fh,
			 struct fuse_file_info *fi)
{
	struct fs_wr *w = fh->wr;

	if (fi->flags & O_TRUNC) {
		pthread_rwlock_rdlock(&w->lock);
		if (w->w)
			tier_wr_truncate(fs->tier, w->w, 0);
		pthread_rwlock_unlock(&w->lock);
	}
	fi->fh = (uint64_t)(uintptr_t)fh;
	fi->direct_io = 1;
	return fuse_reply_open(req, fi);
}

/* A read-only open of publication gen of (ns, key) as inode ino's file:
 * replies to req (ESTALE where that publication is gone: the kernel looks
 * the name up again). */
static void open_published(struct fs *fs, fuse_req_t req, fuse_ino_t ino,
			   uint32_t ns, const struct kvfs_key *key,
			   uint64_t gen, bool paths, struct fuse_file_info *fi)
{
	struct fs_priv *p = fs->priv;
	struct tier_chunk *c;
	unsigned flags = 0;
	int err;

	/* a shadow's reader needs no copy in L1: a chunk in L2 is left
	 * there (no bytes, no pin), not read and promoted for nothing */
	if (!paths && fs_pt_ready(fs, ino, gen))
		flags = TIER_GET_NOFILL;
	/* the opener's thread: readahead follows each reader's order */
	err = tier_get_flags_by(fs->tier, ns, key, flags,
				(uint64_t)fuse_req_ctx(req)->pid, &c);
	/* a path namespace's name may stand for a new version (or a new
	 * file) by now: a new lookup decides (fs_path.c) */
	if (err == -ENOENT && paths)
		err = -ESTALE;
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	if (tier_chunk_gen(c) != gen) {
		/*
		 * The key was evicted or unlinked and written again: this
		 * inode is the old chunk. ESTALE makes the kernel look the
		 * name up again (LOOKUP_REVAL) and open the new inode.
		 */
		tier_put(fs->tier, c);
		__atomic_add_fetch(&p->stale, 1, __ATOMIC_RELAXED);
		fuse_reply_err(req, ESTALE);
		return;
	}
	fs_open_chunk_reply(fs, req, ino, ns, key, c, !paths, fi);
}

void fs_open_chunk_reply(struct fs *fs, fuse_req_t req, fuse_ino_t ino,
			 uint32_t ns, const struct kvfs_key *key,
			 struct tier_chunk *c, bool shadow,
			 struct fuse_file_info *fi)
{
	struct fs_priv *p = fs->priv;
	enum fs_pt_mode pt = FS_PT_NONE;
	struct fs_fh *fh;
	int32_t id = 0;
	int r;

	fh = fs_fh_new(req, FS_FH_CHUNK, ino);
	if (!fh) {
		tier_put(fs->tier, c);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fh->ns = ns;
	fh->has_key = true;
	fh->key = *key;
	fh->chunk = c;
	fi->fh = (uint64_t)(uintptr_t)fh;
	/* a reader's close has nothing to flush: save the round trip */
	fi->noflush = 1;
	if (fs->cfg.cache == FS_CACHE_PAGE) {
		/* immutable, and a new publication is a new inode */
		fi->keep_cache = 1;
	} else {
		fi->direct_io = 1;
	}
	r = shadow ? fs_pt_open(fs, ino, ns, key, c, &pt, &id) : 0;
	if (r == -EAGAIN) {
		/* taken without its bytes, and the shadow went meanwhile:
		 * the bytes and a pin after all (counted as a read once) */
		uint64_t gen = tier_chunk_gen(c);

		fh->chunk = NULL;
		tier_put(fs->tier, c);
		r = tier_get_flags(fs->tier, ns, key, TIER_GET_NOCOUNT, &c);
		if (!r && tier_chunk_gen(c) != gen) {
			tier_put(fs->tier, c);
			r = -ESTALE; /* published again: a new lookup */
			__atomic_add_fetch(&p->stale, 1, __ATOMIC_RELAXED);
		}
		if (r) {
			fs_fh_free(fs, fh);
			fuse_reply_err(req, -r);
			return;
		}
		fh->chunk = c;
		r = fs_pt_open(fs, ino, ns, key, c, &pt, &id);
	}
	if (r) {
		fs_fh_free(fs, fh);
		fuse_reply_err(req, -r);
		return;
	}
	fh->pt = (int)pt;
	__atomic_add_fetch(&p->opens, 1, __ATOMIC_RELAXED);
	if (pt == FS_PT_SHADOW) {
		/* the kernel reads it: no READ will count its bytes */
		tier_count_served(fs->tier, tier_chunk_size(c));
		r = fs_pt_reply_open(req, fi, id);
	} else {
		r = fuse_reply_open(req, fi);
	}
	if (r)
		fs_fh_free(fs, fh);
}

void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char *ctl_buf;
	size_t ctl_len;
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	struct fs_inode *in, *nsi;
	bool paths;
	struct fs_fh *fh;
	uint32_t ns;
	struct kvfs_key key;
	uint64_t gen;
	int acc = fi->flags & O_ACCMODE;
	int err;

	if (ino < FS_INO_CHUNK) {
		if (ino == FUSE_ROOT_ID || ino == FS_INO_KVFS ||
		    ino >= FS_INO_CTL_FIRST + FS_CTL_NFILES) {
			fuse_reply_err(req, EISDIR);
			return;
		}
		if (acc != O_RDONLY) {
			fuse_reply_err(req, EPERM);
			return;
		}
		fh = fs_fh_new(req, FS_FH_CTL, ino);
		if (!fh) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		/* rendered once per open so reads at offsets agree */
		err = fs_ctl_open(fs, req, (int)(ino - FS_INO_CTL_FIRST),
				  &ctl_buf, &ctl_len);
		if (err) {
			fs_fh_free(fs, fh);
			fuse_reply_err(req, -err);
			return;
		}
		pthread_mutex_lock(&p->lock); /* fs_ctl_attr looks */
		fh->ctl_buf = ctl_buf;
		fh->ctl_len = ctl_len;
		pthread_mutex_unlock(&p->lock);
		fi->fh = (uint64_t)(uintptr_t)fh;
		fi->direct_io = 1; /* a FLUSH at close: see fs_op_flush */
		if (fuse_reply_open(req, fi))
			fs_fh_free(fs, fh);
		return;
	}
	pthread_mutex_lock(&p->lock);
	in = fs_ino_find(p, ino);
	if (!in) {
		pthread_mutex_unlock(&p->lock);
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (in->kind == FS_K_NS) {
		pthread_mutex_unlock(&p->lock);
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (in->kind == FS_K_WRITER) {
		struct fs_wr *w = in->wr;

		/* Only temporaries can be opened by name while written. */
		if (!w->temp || w->state != FS_WR_OPEN) {
			pthread_mutex_unlock(&p->lock);
			fuse_reply_err(req, w->state == FS_WR_OPEN ? EBUSY :
				       ENOENT);
			return;
		}
		/* fs_fh_new takes the lock: allocate outside, then look again */
		w->refs++;
		pthread_mutex_unlock(&p->lock);
		fh = fs_fh_new(req, FS_FH_WRITER, ino);
		pthread_mutex_lock(&p->lock);
		if (!fh || w->state != FS_WR_OPEN) {
			fs_wr_unref_locked(fs, w);
			pthread_mutex_unlock(&p->lock);
			if (fh)
				fs_fh_free(fs, fh);
			fuse_reply_err(req, fh ? ENOENT : ENOMEM);
			return;
		}
		w->opens++;
		if ((fi->flags & O_ACCMODE) != O_RDONLY) {
			w->wopens++;
			fh->wmode = true;
		}
		fh->wr = w;
		fh->ns = w->ns;
		pthread_mutex_unlock(&p->lock);
		if (fs_writer_reply_open(fs, req, fh, fi))
			fs_fh_free(fs, fh);
		return;
	}
	ns = in->ns;
	key = in->key;
	gen = in->gen;
	nsi = fs_ns_find(p, ns);
	paths = nsi && nsi->pdir;
	pthread_mutex_unlock(&p->lock);

	if (acc != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EPERM); /* published chunks are immutable */
		return;
	}
	open_published(fs, req, ino, ns, &key, gen, paths, fi);
}


/* Replies r bytes of buf (or the error -r) and frees buf. */
static void reply_read(fuse_req_t req, char *buf, long r)
{
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_buf(req, buf, (size_t)r);
	free(buf);
}

/*
 * A path file opened while it was written, read after its publication
 * (fs_path.c): the bytes are the published chunk's, as long as that
 * publication is still the key's (w->lock held shared). -EBADF otherwise.
 */
static long read_published(struct fs *fs, struct fs_wr *w, void *buf,
			   size_t size, uint64_t off)
{
	struct tier_chunk *c;
	long r;

	if (w->pub_chunk) { /* pinned for readers that joined the writer */
		r = tier_chunk_read(fs->tier, w->pub_chunk, buf, size, off);
		if (r > 0)
			tier_count_served(fs->tier, (uint64_t)r);
		return r;
	}
	if (tier_get_flags(fs->tier, w->ns, &w->key, TIER_GET_NOCOUNT, &c))
		return -EBADF;
	r = tier_chunk_gen(c) == w->final_gen ?
	    tier_chunk_read(fs->tier, c, buf, size, off) : -EBADF;
	if (r > 0)
		tier_count_served(fs->tier, (uint64_t)r);
	tier_put(fs->tier, c);
	return r;
}

void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct fs_fh *fh = fs_fh_of(fi);
	uint64_t total;
	size_t n;
	char *buf;
	long r;

	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	switch (fh->kind) {
	case FS_FH_CTL:
		if ((uint64_t)off >= fh->ctl_len) {
			fuse_reply_buf(req, NULL, 0);
			return;
		}
		n = fh->ctl_len - (size_t)off;
		if (n > size)
			n = size;
		{
			/* a copy: once the reply is written the reader may
			 * close, and release frees ctl_buf while libfuse (and
			 * ASan's writev check) still looks at the iovec */
			char *copy = malloc(n);

			if (!copy) {
				fuse_reply_err(req, ENOMEM);
				return;
			}
			memcpy(copy, fh->ctl_buf + off, n);
			fuse_reply_buf(req, copy, n);
			free(copy);
		}
		return;
	case FS_FH_CHUNK: {
		const char *ptr = tier_chunk_ptr(fh->chunk);

		total = tier_chunk_size(fh->chunk);
		if ((uint64_t)off >= total) {
			fuse_reply_buf(req, NULL, 0);
			return;
		}
		n = total - (uint64_t)off < size ? (size_t)(total - off) : size;
		tier_count_served(fs->tier, n);
		if (ptr && tier_chunk_offset(fh->chunk) >= 0) {
			/* straight from the pinned arena: no copy here */
			fuse_reply_buf(req, ptr + off, n);
			return;
		}
		/* a temporary buffer (L1 full of pinned chunks) is freed by
		 * the release that may follow the reply at once, while
		 * libfuse (and ASan's writev check) still looks at the
		 * iovec: reply from a copy, as for control files */
		buf = malloc(n);
		if (!buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		r = tier_chunk_read(fs->tier, fh->chunk, buf, n, (uint64_t)off);
		reply_read(req, buf, r);
		return;
	}
	case FS_FH_WRITER: {
		struct fs_wr *w = fh->wr;

		buf = malloc(size ? size : 1);
		if (!buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		pthread_rwlock_rdlock(&w->lock);
		r = w->w ? tier_wr_pread(fs->tier, w->w, buf, size,
					 (uint64_t)off) : -EBADF;
		if (r == -EBADF && w->path && w->state == FS_WR_PUBLISHED)
			r = read_published(fs, w, buf, size, (uint64_t)off);
		pthread_rwlock_unlock(&w->lock);
		reply_read(req, buf, r);
		return;
	}
	default:
		fuse_reply_err(req, EISDIR);
	}
}

void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		 size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct fs_fh *fh = fs_fh_of(fi);
	struct fs_wr *w = fh->wr;
	struct tier_wait wait = fs_write_wait(fs, req);
	bool pending = false;
	int err;

	if (fh->kind != FS_FH_WRITER) {
		fuse_reply_err(req, fh->kind == FS_FH_CHUNK ? EPERM : EBADF);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (w->path) {
		struct fs_path_counts pc;

		fs_path_counts(fs, &pc);
		pending = pc.pending != 0;
	}
	pthread_rwlock_rdlock(&w->lock);
	/* after publication (or a discard) the chunk is immutable; after a
	 * failed write it is doomed (never published): later writes fail */
	err = !w->w ? -EPERM : fs_wr_error(w);
	/* when L1 is short of room: a write waits, bounded, for writers to
	 * publish and readers to let go; but first closed path files
	 * waiting for publication, which hold arena that eviction cannot
	 * take, are published (then it tries again) */
	if (!err)
		err = tier_wr_pwrite_wait(fs->tier, w->w, buf, size,
					  (uint64_t)off, pending ? NULL : &wait);
	if (err == -ENOSPC && pending) {
		pthread_rwlock_unlock(&w->lock);
		fs_path_publish_pending(fs, UINT64_MAX, SIZE_MAX);
		pthread_rwlock_rdlock(&w->lock);
		err = w->w ? tier_wr_pwrite_wait(fs->tier, w->w, buf, size,
						 (uint64_t)off, &wait)
			   : -EPERM;
	}
	if (!err) {
		__atomic_add_fetch(&w->nwrites, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&w->last_write_tid, fuse_req_ctx(req)->pid,
				 __ATOMIC_RELAXED);
		fs_wr_touch(w);
	}
	if (err && err != -EINTR && w->w)
		fs_wr_fail(fs, w, err);
	pthread_rwlock_unlock(&w->lock);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_write(req, size);
}

/*
 * FLUSH comes with every close(2) of an fd (and of each dup of it), from
 * the closing task. A keyed writer publishes on a flush from its own
 * thread group once bytes have arrived, so close() reports EEXIST,
 * EMSGSIZE, ENOSPC or EFBIG. Flushes that publish nothing:
 *  - from another process (a forked child closing an inherited fd); if
 *    that process was killed by a signal and made the last write, the
 *    chunk is failed, never published (fs_wr_killed_writer);
 *  - before any write: a shell's `cmd > key` opens, dup2()s and closes
 *    the original fd before cmd writes a byte (an O_EXCL writer in a
 *    namespace with chunk_bytes still gets EMSGSIZE from that close);
 *  - from a writer being killed by a signal: its chunk may be half
 *    written, so it is discarded (see fs_task_killed_by_signal).
 * What was not published by a flush is published at release (the last
 * close), where errors can only be logged.
 */
void fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	struct fs_fh *fh = fs_fh_of(fi);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fs_wr *w = fh->wr;
	int err = 0;

	if (fh->kind == FS_FH_CTL) {
		/* closed: its RELEASE may come after the same process's
		 * next stat, which must not be sized by it (open_by) */
		pthread_mutex_lock(&p->lock);
		fh->ctl_closed = true;
		pthread_mutex_unlock(&p->lock);
	}
	if (fh->kind != FS_FH_WRITER) {
		fuse_reply_err(req, 0);
		return;
	}
	pthread_rwlock_rdlock(&w->lock);
	err = fs_wr_error(w);
	if (err && (w->temp || w->state != FS_WR_OPEN)) {
		/* a write failed: the file will never be published (the
		 * rename of a temporary fails too), and close() says so */
		pthread_rwlock_unlock(&w->lock);
		fuse_reply_err(req, -err);
		return;
	}
	if (w->state != FS_WR_OPEN) {
		pthread_rwlock_unlock(&w->lock);
		fuse_reply_err(req, 0);
		return;
	}
	pthread_rwlock_unlock(&w->lock);
	/* a reader's fd (joined while the file was written) never wrote:
	 * its close is nobody's, whoever closes it */
	if (!fh->wmode) {
		fuse_reply_err(req, 0);
		return;
	}
	/* the creator thread usually closes itself */
	if (ctx->pid != w->creator_tid && !fs_wr_same_process(w, ctx->pid)) {
		/* another process's close publishes nothing; one killed by
		 * a signal that wrote the chunk last leaves it failed: its
		 * last close (RELEASE) or its owner's would publish it half
		 * written (the owner's close and writes then say EIO) */
		if (fs_wr_killed_writer(w, ctx->pid)) {
			pthread_rwlock_rdlock(&w->lock);
			fs_wr_fail(fs, w, -EIO);
			pthread_rwlock_unlock(&w->lock);
			__atomic_add_fetch(&p->writers_killed, 1,
					   __ATOMIC_RELAXED);
			fs_log(fs, "writer pid %d (another process than its "
			       "creator's) killed by a signal: chunk "
			       "discarded", (int)ctx->pid);
		}
		fuse_reply_err(req, 0);
		return;
	}
	if (fs_task_killed_by_signal(ctx->pid)) {
		pthread_rwlock_wrlock(&w->lock);
		fs_wr_discard(fs, w, FS_DISCARD_KILLED);
		pthread_rwlock_unlock(&w->lock);
		pthread_mutex_lock(&p->lock);
		if (w->in_tmptab) {
			fs_tmp_unlist(p, w);
			fs_wr_unref_locked(fs, w); /* the name table's ref */
		}
		pthread_mutex_unlock(&p->lock);
		__atomic_add_fetch(&p->writers_killed, 1, __ATOMIC_RELAXED);
		fs_log(fs, "writer pid %d killed by a signal: chunk discarded",
		       (int)ctx->pid);
		fuse_reply_err(req, 0);
		return;
	}
	/* its owner's close: what was written so far is what it meant
	 * (fs_wr_killed_writer) */
	__atomic_store_n(&w->closed_nwrites,
			 __atomic_load_n(&w->nwrites, __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELAXED);
	if (w->temp || !__atomic_load_n(&w->nwrites, __ATOMIC_RELAXED)) {
		struct tier_ns_info ni;

		/* Nothing written yet. An O_EXCL writer (the protocol's way)
		 * closing an empty chunk in a namespace with chunk_bytes is
		 * told so (EMSGSIZE); release discards the chunk. Nothing is
		 * discarded here: if a dup of the fd lives on (a shell's `cmd
		 * > key` closes its first fd before writing; that is O_TRUNC
		 * without O_EXCL, so it is not even told), its writes still
		 * publish. */
		err = !w->temp && w->excl &&
		      !tier_ns_info(fs->tier, w->ns, &ni) &&
		      ni.chunk_bytes > 0 ? EMSGSIZE : 0;
		/* its key stays taken until the release, which the kernel
		 * sends after this reply: a new writer of the key waits for
		 * it (tier_wr_closed) rather than fail on the race */
		if (!w->temp) {
			pthread_rwlock_rdlock(&w->lock);
			if (w->state == FS_WR_OPEN)
				tier_wr_closed(fs->tier, w->w);
			pthread_rwlock_unlock(&w->lock);
		}
		fuse_reply_err(req, err); /* rename publishes; or nothing yet */
		return;
	}
	err = fs_wr_publish(fs, w, NULL, false);
	/* fsync'ed before: durable before close(2) returns (an error, the
	 * chunk stays published in memory) */
	if (!err)
		err = fs_wr_sync(fs, w, &w->key);
	/* truncated back to no bytes: nothing published, the name free */
	fuse_reply_err(req, err == -ENODATA ? 0 : -err);
}

void fs_op_release(fuse_req_t req, fuse_ino_t ino,
		   struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct fs_fh *fh = fs_fh_of(fi);
	struct fs_wr *w = fh->wr;

	if (fh->kind == FS_FH_WRITER && !w->temp) {
		int err;

		/* the last close, and no flush published it: the writer's
		 * process closed early and a child wrote the bytes; or no
		 * bytes at all (`touch key`, fio's layout open): nothing is
		 * published and the name stays free (-ENODATA) */
		err = fs_wr_publish(fs, w, NULL, false);
		if (!err)
			__atomic_add_fetch(&fs->priv->late_publishes, 1,
					   __ATOMIC_RELAXED);
		if (!err)
			err = fs_wr_sync(fs, w, &w->key);
		if (err && err != -EEXIST && err != -ENOENT && err != -ENODATA)
			fs_log(fs, "chunk discarded at last close: %s",
			       strerror(-err));
	}
	fs_fh_free(fs, fh);
	fuse_reply_err(req, 0);
}

/*
 * fsync and fdatasync (the same: a chunk's bytes are its data). Where the
 * mount has an L2, 0 means the file survives a crash of the daemon and of
 * the machine (kvfs(7), "fsync"):
 *  - a published chunk (a reader's fd, a writer's after its publication):
 *    fs_sync_chunk writes its L2 record if it has none and fdatasyncs it,
 *    and for a path namespace's file the journal of its name;
 *  - a writer's fd before publication: the bytes are no file yet (a
 *    writer killed now publishes nothing), so the writer is marked and
 *    its publication (close, rename) is made durable before it returns;
 *    writers that never fsync pay nothing.
 * Without L2 nothing survives a crash: 0, as on tmpfs. A file one of
 * whose writes failed will never be published (its bytes are gone):
 * fsync reports that error on every call, as Linux reports a failed
 * writeback; so does a failed L2 write or fdatasync.
 */
void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct fs_fh *fh = fi ? fs_fh_of(fi) : NULL;
	struct kvfs_key key;
	struct fs_wr *w;
	bool published;
	int err = 0;

	if (fh && fh->kind == FS_FH_CHUNK && fh->has_key) {
		err = fs_sync_chunk(fs, fh->ns, &fh->key, fs_path_ns(fs, fh->ns));
	} else if (fh && fh->kind == FS_FH_WRITER) {
		w = fh->wr;
		err = fs_wr_error(w);
		pthread_rwlock_rdlock(&w->lock);
		/* before publication (which takes the lock exclusively and
		 * reads the mark after): the publication syncs */
		if (w->state == FS_WR_OPEN)
			__atomic_store_n(&w->sync, true, __ATOMIC_RELEASE);
		published = w->state == FS_WR_PUBLISHED;
		pthread_rwlock_unlock(&w->lock);
		if (!err && published) {
			pthread_mutex_lock(&fs->priv->lock);
			key = w->key;
			pthread_mutex_unlock(&fs->priv->lock);
			err = fs_sync_chunk(fs, w->ns, &key, w->path);
		}
	}
	fuse_reply_err(req, -err);
}

/* fsync of a directory: the names of path namespaces (directories made,
 * files renamed or published) are in the journal, fdatasync'ed now
 * rather than within the background thread's quarter second. A key
 * namespace's names are its chunks (fsync them). */
void fs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		    struct fuse_file_info *fi)
{
	fuse_reply_err(req, -fs_path_sync(fs_req(req)));
}
