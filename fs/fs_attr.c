/*
 * fs_attr.c - attributes: what stat(2) shows for the root, namespaces,
 * chunks, writers and /.kvfs (GETATTR), what SETATTR may change (the mode
 * and owner of directories, the size of a chunk being written), and
 * STATFS.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include "fs/fs_i.h"

static void fill_dir(struct stat *st, uint64_t ino, mode_t mode, uid_t uid,
		     gid_t gid, const struct timespec *mt,
		     const struct timespec *ct)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = mode;
	st->st_nlink = 2;
	st->st_uid = uid;
	st->st_gid = gid;
	st->st_blksize = 1 << 20;
	st->st_mtim = *mt;
	st->st_ctim = *ct;
	st->st_atim = *mt;
}

void fs_ns_attr(struct fs_inode *ns, struct stat *st)
{
	fill_dir(st, ns->ino, ns->mode, ns->uid, ns->gid, &ns->mtime,
		 &ns->ctime);
}

/* The atime to show for a chunk read last at atime, published at ptime
 * (ns), given what in showed before. */
static uint64_t shown_atime(const struct fs *fs, struct fs_inode *in,
			    uint64_t ptime, uint64_t atime)
{
	const uint64_t day = 86400ULL * 1000000000ULL;
	uint64_t shown;

	if (atime < ptime)
		atime = ptime;
	switch (fs->cfg.atime) {
	case FS_ATIME_NOATIME:
		return ptime;
	case FS_ATIME_STRICT:
		return atime;
	case FS_ATIME_RELATIME:
	default:
		break;
	}
	/* as Linux's relatime: moves when it is not after mtime (the first
	 * read since publication) or a day old */
	shown = in && in->shown_atime >= ptime ? in->shown_atime : ptime;
	if (shown <= ptime || atime - shown >= day)
		shown = atime;
	if (in)
		in->shown_atime = shown;
	return shown;
}

static void ns_to_ts(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000ULL);
	ts->tv_nsec = (long)(ns % 1000000000ULL);
}

void fs_chunk_attr(struct fs *fs, struct fs_inode *nsi, struct fs_inode *in,
		   uint64_t ino, const struct tier_info *info, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = S_IFREG | 0444;
	st->st_nlink = 1;
	st->st_uid = nsi ? nsi->uid : 0;
	st->st_gid = nsi ? nsi->gid : 0;
	st->st_size = (off_t)info->size;
	st->st_blocks = (blkcnt_t)((info->stored_bytes + 511) / 512);
	st->st_blksize = 1 << 20;
	/* immutable: mtime and ctime are the publication and never move
	 * (tar, rsync, make compare them); only atime follows reads */
	ns_to_ts(info->ptime_ns, &st->st_mtim);
	st->st_ctim = st->st_mtim;
	ns_to_ts(shown_atime(fs, in, info->ptime_ns, info->atime_ns),
		 &st->st_atim);
}

void fs_writer_attr(struct fs *fs, struct fs_wr *w, struct stat *st)
{
	uint64_t size;

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&fs->priv->lock);
	st->st_ino = w->st_ino ? w->st_ino : w->ino;
	st->st_nlink = w->unlinked ? 0 : 1;
	st->st_uid = w->uid;
	st->st_gid = w->gid;
	st->st_mode = S_IFREG | w->mode;
	pthread_mutex_unlock(&fs->priv->lock);
	st->st_blksize = 1 << 20;
	pthread_rwlock_rdlock(&w->lock);
	if (w->w) {
		size = tier_wr_size(w->w);
	} else {
		size = w->final_size;
		if (!w->path) /* published: immutable (a path file keeps
			       * the mode its name shows) */
			st->st_mode = S_IFREG | 0444;
	}
	pthread_rwlock_unlock(&w->lock);
	st->st_size = (off_t)size;
	st->st_blocks = (blkcnt_t)((size + 511) / 512);
	ns_to_ts(__atomic_load_n(&w->atime_ns, __ATOMIC_RELAXED), &st->st_atim);
	ns_to_ts(__atomic_load_n(&w->mtime_ns, __ATOMIC_RELAXED), &st->st_mtim);
	ns_to_ts(__atomic_load_n(&w->ctime_ns, __ATOMIC_RELAXED), &st->st_ctim);
}

/* Attributes of ino; fi (may be NULL) lets an open fd answer for an inode
 * whose chunk was unlinked or replaced meanwhile. */
static int get_attr(struct fs *fs, fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi, struct stat *st, double *ttl)
{
	struct fs_priv *p = fs->priv;
	struct fs_inode *in, *nsi;
	struct tier_info info;
	uint32_t ns;
	struct kvfs_key key;
	uint64_t gen;
	bool gone = false;
	int err;

	*ttl = FS_TTL;
	if (ino == FUSE_ROOT_ID) {
		pthread_mutex_lock(&p->lock);
		fill_dir(st, ino, p->root_mode, p->root_uid, p->root_gid,
			 &p->mount_time, &p->mount_time);
		pthread_mutex_unlock(&p->lock);
		return 0;
	}
	if (ino < FS_INO_CHUNK) {
		if (ino > FS_INO_CTL_FIRST + FS_CTL_NFILES - 1)
			return -ENOENT;
		*ttl = ino == FS_INO_KVFS ? 3600 : 0;
		return fs_ctl_attr(fs, req, ino, fi, st);
	}
	pthread_mutex_lock(&p->lock);
	in = fs_ino_find(p, ino);
	if (!in) {
		pthread_mutex_unlock(&p->lock);
		return -ENOENT;
	}
	switch (in->kind) {
	case FS_K_NS:
		fs_ns_attr(in, st);
		err = in->removed ? -ENOENT : 0;
		pthread_mutex_unlock(&p->lock);
		return err;
	case FS_K_WRITER: {
		struct fs_wr *w = in->wr;

		w->refs++;
		pthread_mutex_unlock(&p->lock);
		fs_writer_attr(fs, w, st);
		fs_wr_unref(fs, w);
		*ttl = 0;
		return 0;
	}
	case FS_K_CHUNK:
		break;
	}
	ns = in->ns;
	key = in->key;
	gen = in->gen;
	pthread_mutex_unlock(&p->lock);

	err = tier_stat(fs->tier, ns, &key, &info);
	if (!err && info.gen != gen)
		err = -ESTALE;
	pthread_mutex_lock(&p->lock);
	in = fs_ino_find(p, ino);
	if (!err && in) {
		in->info = info;
	} else if (err && in && (in->unlinked || in->superseded)) {
		/* POSIX: an unlinked file open somewhere still has its
		 * attributes (fstat), with no links; so has a path file's
		 * version replaced in its writer's close (which left no
		 * kernel entry of the name leading here) */
		info = in->info;
		err = 0;
		gone = true;
	} else if (err && fi && fs_fh_of(fi) && fs_fh_of(fi)->chunk) {
		/* the fd's pinned bytes (times as last seen, if at all) */
		if (in)
			info = in->info;
		else
			memset(&info, 0, sizeof(info));
		info.size = tier_chunk_size(fs_fh_of(fi)->chunk);
		info.stored_bytes = info.size;
		err = 0;
	}
	nsi = fs_ns_find(p, ns);
	/* path namespaces: the name may stand for another file by now (a new
	 * version, or a new file after an eviction): a new lookup decides */
	if (err == -ENOENT && nsi && nsi->pdir)
		err = -ESTALE;
	if (!err) {
		fs_chunk_attr(fs, nsi, in, ino, &info, st);
		fs_path_chunk_attr_locked(fs, nsi, in, &key, gen, st);
		if (in && (in->unlinked || gone))
			st->st_nlink = 0;
		else
			*ttl = fs_chunk_ttl(nsi);
	}
	pthread_mutex_unlock(&p->lock);
	/*
	 * A chunk evicted or replaced by a new publication: ESTALE makes the
	 * kernel look a path up again (LOOKUP_REVAL) instead of trusting the
	 * dentry it cached.
	 */
	if (err == -ESTALE)
		__atomic_add_fetch(&p->stale, 1, __ATOMIC_RELAXED);
	return err;
}

void fs_op_getattr(fuse_req_t req, fuse_ino_t ino,
		   struct fuse_file_info *fi)
{
	struct stat st;
	double ttl;
	int err = get_attr(fs_req(req), req, ino, fi, &st, &ttl);

	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_attr(req, &st, ttl);
}

/* chmod and chown of a directory (the root or a namespace): priv.lock
 * held. */
static void set_owner(mode_t *mode, uid_t *uid, gid_t *gid,
		      const struct stat *attr, int to_set)
{
	if (to_set & FUSE_SET_ATTR_MODE)
		*mode = S_IFDIR | (attr->st_mode & 07777);
	if (to_set & FUSE_SET_ATTR_UID)
		*uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		*gid = attr->st_gid;
}

static void set_times(struct timespec *mt, struct timespec *ct,
		      const struct stat *attr, int to_set)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		*mt = now;
	else if (to_set & FUSE_SET_ATTR_MTIME)
		*mt = attr->st_mtim;
	*ct = now;
}

/*
 * SETATTR of a chunk being written (a temporary, or a key before its
 * close): size, mode, owner and times are applied for real, and shown by
 * later stats; the mode governs later opens of a temporary by name (the
 * kernel checks it: default_permissions). Once published the chunk is
 * immutable: EPERM; a path file's mode, owner and times stay its own
 * (its name shows them), only its size is fixed. The kernel has checked
 * the caller's right to each change (owner or root; chown is root's).
 * w.lock is held throughout, so a publication copies what is set here.
 */
static int set_writer(struct fs *fs, struct fs_wr *w, const struct stat *attr,
		      int to_set, uid_t caller)
{
	struct fs_priv *p = fs->priv;
	uint64_t now = fs_now_ns();
	uint64_t was_ns[3] = {
		__atomic_load_n(&w->atime_ns, __ATOMIC_RELAXED),
		__atomic_load_n(&w->mtime_ns, __ATOMIC_RELAXED),
		__atomic_load_n(&w->ctime_ns, __ATOMIC_RELAXED),
	};
	mode_t was_mode;
	uid_t was_uid;
	gid_t was_gid;
	bool published;
	int err = 0;

	pthread_rwlock_rdlock(&w->lock);
	published = !w->w;
	if (published && (!w->path || (to_set & FUSE_SET_ATTR_SIZE) ||
			  w->state != FS_WR_PUBLISHED)) {
		pthread_rwlock_unlock(&w->lock);
		return -EPERM; /* published (or discarded): immutable */
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		err = tier_wr_truncate(fs->tier, w->w, (uint64_t)attr->st_size);
		if (!err) {
			__atomic_add_fetch(&w->nwrites, 1, __ATOMIC_RELAXED);
			fs_wr_touch(w);
		}
	}
	if (err) {
		pthread_rwlock_unlock(&w->lock);
		return err;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		__atomic_store_n(&w->atime_ns, now, __ATOMIC_RELAXED);
	else if (to_set & FUSE_SET_ATTR_ATIME)
		__atomic_store_n(&w->atime_ns,
				 (uint64_t)attr->st_atim.tv_sec * 1000000000ULL +
				 (uint64_t)attr->st_atim.tv_nsec,
				 __ATOMIC_RELAXED);
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		__atomic_store_n(&w->mtime_ns, now, __ATOMIC_RELAXED);
	else if (to_set & FUSE_SET_ATTR_MTIME)
		__atomic_store_n(&w->mtime_ns,
				 (uint64_t)attr->st_mtim.tv_sec * 1000000000ULL +
				 (uint64_t)attr->st_mtim.tv_nsec,
				 __ATOMIC_RELAXED);
	if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
		      FUSE_SET_ATTR_GID | FUSE_SET_ATTR_ATIME |
		      FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
		      FUSE_SET_ATTR_MTIME_NOW))
		__atomic_store_n(&w->ctime_ns, now, __ATOMIC_RELAXED);
	pthread_mutex_lock(&p->lock);
	was_mode = w->mode;
	was_uid = w->uid;
	was_gid = w->gid;
	if (to_set & FUSE_SET_ATTR_MODE)
		w->mode = attr->st_mode & 07777;
	if (to_set & FUSE_SET_ATTR_UID)
		w->uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		w->gid = attr->st_gid;
	/* in the same hold: a new version being written over a published
	 * path file takes the change, the version it replaces only what
	 * narrows (never shown wider in between); one renamed away, the
	 * name it has now, unless that is another's by now (undone) */
	if (published)
		err = fs_path_writer_attr_set(fs, w, attr, to_set, was_uid,
					      caller);
	if (err) {
		w->mode = was_mode;
		w->uid = was_uid;
		w->gid = was_gid;
		__atomic_store_n(&w->atime_ns, was_ns[0], __ATOMIC_RELAXED);
		__atomic_store_n(&w->mtime_ns, was_ns[1], __ATOMIC_RELAXED);
		__atomic_store_n(&w->ctime_ns, was_ns[2], __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&p->lock);
	pthread_rwlock_unlock(&w->lock);
	return err;
}

void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		   int to_set, struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	struct fs_inode *in;
	struct fs_wr *w = NULL;
	struct stat st;
	double ttl;
	int err = 0;

	if (ino != FUSE_ROOT_ID && ino < FS_INO_CHUNK) {
		fuse_reply_err(req, EPERM); /* .kvfs is read-only */
		return;
	}
	pthread_mutex_lock(&p->lock);
	if (ino == FUSE_ROOT_ID) {
		if (to_set & FUSE_SET_ATTR_SIZE)
			err = -EISDIR;
		else
			set_owner(&p->root_mode, &p->root_uid, &p->root_gid,
				  attr, to_set);
	} else if (!(in = fs_ino_find(p, ino))) {
		err = -ENOENT;
	} else if (in->kind == FS_K_NS) {
		if (in->removed)
			err = -ENOENT;
		else if (to_set & FUSE_SET_ATTR_SIZE)
			err = -EISDIR;
		if (!err) {
			set_owner(&in->mode, &in->uid, &in->gid, attr, to_set);
			set_times(&in->mtime, &in->ctime, attr, to_set);
		}
	} else if (in->kind == FS_K_CHUNK) {
		err = -EPERM; /* published chunks are immutable */
	} else {
		w = in->wr;
		w->refs++;
	}
	pthread_mutex_unlock(&p->lock);
	/* the root or a namespace changed mode or owner: keep it for L2 */
	if (!err && !w && (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
				     FUSE_SET_ATTR_GID)))
		fs_nsmeta_save(fs);
	if (w) {
		err = set_writer(fs, w, attr, to_set, fuse_req_ctx(req)->uid);
		fs_wr_unref(fs, w);
	}
	if (!err)
		err = get_attr(fs, req, ino, fi, &st, &ttl);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_attr(req, &st, ttl);
}

void fs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_req(req);
	struct tier_stats st;
	struct statvfs sv;
	uint64_t held;

	tier_get_stats(fs->tier, &st);
	/*
	 * A cache is full by design, so "free" here is what a writer can
	 * get: everything but the L1 bytes nothing may evict (pinned chunks,
	 * writers in flight). Size is L1 + L2 (the space the daemon
	 * manages); L2 is always reclaimable. Without L2, df then warns only
	 * when writes are about to fail with ENOSPC; with L2, never (used
	 * tops out at L1 / (L1 + L2)); how full the cache is, is in
	 * .kvfs/stats (kvfs(7), "df").
	 */
	held = st.l1_pinned_bytes + st.writer_bytes;
	if (held > st.l1_capacity)
		held = st.l1_capacity;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = (st.l1_capacity + st.l2_capacity) / 4096;
	held = (held + 4095) / 4096;
	sv.f_bfree = sv.f_blocks > held ? sv.f_blocks - held : 0;
	sv.f_bavail = sv.f_bfree;
	/* chunks are inodes; there is no inode table to run out of, so
	 * report a large free count and keep used = files - free sane */
	sv.f_ffree = UINT32_MAX;
	sv.f_favail = sv.f_ffree;
	sv.f_files = sv.f_ffree + st.l1_chunks + st.l2_chunks;
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}
