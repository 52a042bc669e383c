/*
 * fs_psetattr.c - SETATTR of path files and directories (chmod, chown,
 * utimensat), kept with the name (fs_path.c's publication copies a
 * writer's) and sent to the journal and L3 (fs_pattr.c); a change made
 * while an O_TRUNC version is written goes to that version in full and
 * to the version it replaces only as a narrowing. Also what a chunk
 * inode of a path namespace shows (pth_chunk_attr_locked).
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fs/paths/fs_ptree.h"

/* The attributes of published file e (keyed) or directory d changed
 * (chmod, chown, utimensat): the journal appends their record, L3's copy
 * is written again (priv.lock held). Not in fs_pattr.c, which the
 * journal and fs_pl3.c call. */
static void pattr_changed_file(struct fs *fs, const struct fs_pent *e)
{
	if (!e->keyed)
		return;
	fs_pjournal_changed(fs, e->parent->ns, &e->key, 0);
	fs_pattr_note(fs, e);
	tier_l3_pattr_changed(fs->tier, e->parent->ns, &e->key);
}

static void pattr_changed_dir(struct fs *fs, const struct fs_pdir *d)
{
	if (!d->self)
		return;
	fs_pjournal_changed(fs, d->ns, NULL, d->ino);
	fs_path_l3_remark_locked(fs, d);
}

static void owner_set(mode_t *mode, uid_t *uid, gid_t *gid,
		      const struct stat *attr, int to_set)
{
	if (to_set & FUSE_SET_ATTR_MODE)
		*mode = attr->st_mode & 07777;
	if (to_set & FUSE_SET_ATTR_UID)
		*uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		*gid = attr->st_gid;
}

static void set_mtime(struct timespec *mt, const struct stat *attr,
		      int to_set)
{
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		clock_gettime(CLOCK_REALTIME, mt);
	else if (to_set & FUSE_SET_ATTR_MTIME)
		*mt = attr->st_mtim;
}

/* ns since the epoch (as fs_wr.mtime_ns and KVFS_XFER_MTIME carry an
 * mtime, modulo 2^64) as a timespec */
static struct timespec ns_ts(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000u),
				  .tv_nsec = (long)(ns % 1000000000u) };
}

/* A chmod, chown or utimensat of a published file while an O_TRUNC
 * version of it is being written (priv.lock held): to the kernel they are
 * one inode, so the version that replaces it at close takes the change
 * (else an fchmod 0600 on the writer's fd would be undone by its close).
 * The version being replaced takes only what narrows who may read it
 * (mode bits cleared, never set; its owner stays): its bytes must never
 * reach users they did not reach before, as on a local filesystem, where
 * the O_TRUNC open already dropped them. */
static void writer_attr_set(struct fs_wr *w, const struct stat *attr,
			    int to_set, const struct timespec *mt)
{
	owner_set(&w->mode, &w->uid, &w->gid, attr, to_set);
	if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW))
		__atomic_store_n(&w->mtime_ns,
				 (uint64_t)mt->tv_sec * 1000000000ULL +
				 (uint64_t)mt->tv_nsec, __ATOMIC_RELAXED);
}

/*
 * The name a rename took file version (ns, key) off, whose inode the
 * kernel still holds (st_ino: the name's st_ino, as that inode showed
 * it): the entry with that st_ino now under another key
 * (fs_ptree_moved), or NULL. Under the same key, the inode is that of a
 * version its own O_TRUNC rewrite replaced: no redirection (see
 * writer_attr_set), unless the name was renamed away and back (f -> g ->
 * f: e->moved), whose copies replaced it (a file renamed once and later
 * rewritten with O_TRUNC is taken for that too: the owner's change then
 * reaches its name in full, as through the name's own inode). priv.lock
 * held.
 */
static struct fs_pent *renamed_ent(struct fs *fs, uint32_t ns,
				   uint64_t st_ino, const struct kvfs_key *key)
{
	struct fs_pent *e;

	if (!st_ino)
		return NULL;
	e = fs_ptree_by_ino(fs->priv->paths, ns, st_ino);
	if (!e || (e->keyed && !e->moved &&
		   !memcmp(e->key.b, key->b, sizeof(key->b))))
		return NULL;
	return e;
}

/*
 * A chmod, chown or utimensat through the inode of a version renamed
 * away: renamed file e takes it, as through its own inode (a new version
 * being written in full, the published one only what narrows); mt: the
 * mtime set, if any. The kernel checked the caller (uid caller) against
 * that inode's owner, was_uid: unless e is still that user's (it was
 * chown'ed through its new inode since), only root may: else -EPERM,
 * nothing changed. priv.lock held.
 */
static int renamed_attr_set(struct fs *fs, struct fs_pent *e,
			    const struct stat *attr, int to_set,
			    const struct timespec *mt, uid_t was_uid,
			    uid_t caller)
{
	if (!e->has_attr) { /* 0644 and the namespace's owner, so far */
		const struct fs_inode *nsi =
			fs_ns_find(fs->priv, e->parent->ns);

		e->mode = 0644;
		e->uid = nsi ? nsi->uid : 0;
		e->gid = nsi ? nsi->gid : 0;
	}
	if (e->uid != was_uid && caller != 0)
		return -EPERM;
	e->has_attr = true;
	if (e->wr) {
		writer_attr_set(e->wr, attr, to_set, mt);
		if (to_set & FUSE_SET_ATTR_MODE)
			e->mode &= attr->st_mode & 07777;
	} else {
		owner_set(&e->mode, &e->uid, &e->gid, attr, to_set);
	}
	if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
		e->mtime = *mt;
		e->has_mtime = true;
	} else if (!e->has_mtime && e->keyed) {
		/* the time its name shows, kept as its own from now on */
		int64_t ns;

		if (pth_shown_mtime_locked(fs, e->parent->ns, e, e->gen, &ns)) {
			e->mtime = ns_ts((uint64_t)ns);
			e->has_mtime = true;
		}
	}
	pattr_changed_file(fs, e); /* journal, L3 */
	return 0;
}

int pth_writer_attr_set(struct fs *fs, struct fs_wr *w,
			const struct stat *attr, int to_set, uid_t was_uid,
			uid_t caller)
{
	struct fs_pent *e;

	if (!w->path || !w->has_key)
		return 0;
	e = fs_ptree_by_key(fs->priv->paths, w->ns, &w->key);
	if (!e || !e->keyed || e->gen != w->final_gen) {
		/* not its name's version: a rename may have moved the name
		 * on (w's inode is what the kernel has for it) */
		struct timespec mt = ns_ts(__atomic_load_n(&w->mtime_ns,
							   __ATOMIC_RELAXED));

		e = renamed_ent(fs, w->ns, w->st_ino, &w->key);
		return e ? renamed_attr_set(fs, e, attr, to_set, &mt, was_uid,
					    caller) : 0;
	}
	if (e->wr && e->wr != w) { /* an O_TRUNC version of it, one inode to
				    * the kernel: it takes the change; w, the
				    * version it replaces, only what narrows
				    * (writer_attr_set) */
		owner_set(&e->wr->mode, &e->wr->uid, &e->wr->gid, attr,
			  to_set);
		if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW))
			__atomic_store_n(&e->wr->mtime_ns,
					 __atomic_load_n(&w->mtime_ns,
							 __ATOMIC_RELAXED),
					 __ATOMIC_RELAXED);
		if (e->has_attr) {
			w->mode &= e->mode & 07777;
			w->uid = e->uid;
			w->gid = e->gid;
		}
	}
	if (!e->busy) {
		pth_name_takes_attr(e, w);
		pattr_changed_file(fs, e); /* journal, L3 */
	}
	return 0;
}

/* The file entry of published chunk inode ino in a path namespace
 * (priv.lock held), or NULL. */
static struct fs_pent *chunk_ent(struct fs *fs, uint64_t ino)
{
	struct fs_inode *in = fs_ino_find(fs->priv, ino), *nsi;
	struct fs_pent *e;

	if (!in || in->kind != FS_K_CHUNK)
		return NULL;
	nsi = fs_ns_find(fs->priv, in->ns);
	if (!nsi || !nsi->pdir)
		return NULL;
	e = fs_ptree_by_key(fs->priv->paths, in->ns, &in->key);
	return e && e->gen == in->gen ? e : NULL;
}

/* The mtime that stat(2) of e's name shows for its publication gen (as
 * pth_chunk_attr_locked below: its own, else the publication's time), as
 * KVFS_XFER_MTIME carries it: ns since the epoch modulo 2^64 (an owner
 * may set any time: no signed overflow); priv.lock held. false: not
 * known (no such publication now). */
bool pth_shown_mtime_locked(struct fs *fs, uint32_t ns,
			    const struct fs_pent *e, uint64_t gen, int64_t *mt)
{
	struct tier_info info;

	if (e->has_mtime) {
		*mt = (int64_t)((uint64_t)e->mtime.tv_sec * 1000000000u +
				(uint64_t)e->mtime.tv_nsec);
		return true;
	}
	if (tier_stat(fs->tier, ns, &e->key, &info) || info.gen != gen)
		return false;
	*mt = (int64_t)info.ptime_ns;
	return true;
}

void pth_chunk_attr_locked(struct fs *fs, const struct fs_inode *nsi,
			   struct fs_inode *in, const struct kvfs_key *key,
			   uint64_t gen, struct stat *st)
{
	struct fs_inode mem;
	struct fs_pent *e;

	if (!nsi || !nsi->pdir)
		return;
	if (!in) {
		memset(&mem, 0, sizeof(mem));
		in = &mem;
	}
	e = fs_ptree_by_key(fs->priv->paths, nsi->ns, key);
	if (e && e->keyed && e->gen == gen) {
		/* its name's version: what the name shows, remembered for
		 * fds that outlive the name (or this version of it) */
		in->path_ino = e->ino;
		/* writable by its owner: O_TRUNC makes a new version */
		in->mode = e->has_attr ? e->mode : 0644;
		in->uid = e->has_attr ? e->uid : st->st_uid;
		in->gid = e->has_attr ? e->gid : st->st_gid;
		in->mtime = e->has_mtime ? e->mtime : st->st_mtim;
	} else if (!in->path_ino) {
		st->st_mode = S_IFREG | 0644; /* never seen by name here */
		return;
	}
	st->st_ino = in->path_ino;
	st->st_mode = S_IFREG | (in->mode & 07777);
	st->st_uid = in->uid;
	st->st_gid = in->gid;
	st->st_mtim = in->mtime;
	st->st_ctim = in->mtime;
}

/* The publication's time of in's version into *ts, what stat(2) shows
 * for a name without an mtime of its own: from the tier, else as in's
 * last lookup or getattr saw it (the chunk may have left in between).
 * false: not known. priv.lock held. */
static bool publication_mtime(struct fs *fs, const struct fs_inode *in,
			      struct timespec *ts)
{
	struct tier_info info;
	uint64_t ns = 0;

	if (!tier_stat(fs->tier, in->ns, &in->key, &info) &&
	    info.gen == in->gen)
		ns = info.ptime_ns;
	else if (in->info.gen == in->gen)
		ns = in->info.ptime_ns;
	if (!ns)
		return false;
	*ts = ns_ts(ns);
	return true;
}

/*
 * chmod, chown and utimensat of published path file ino (priv.lock
 * held): kept with its name (and remembered by the inode for fds that
 * outlive it); its bytes and size never change. 0, or -ENOENT when ino
 * is no published path file, -EPERM for a size or for a version renamed
 * away whose name is another's by now (renamed_attr_set).
 */
static int published_attr_set(struct fs *fs, uint64_t ino,
			      const struct stat *attr, int to_set,
			      uid_t caller, struct stat *st)
{
	struct fs_inode *in = fs_ino_find(fs->priv, ino), *nsi;
	struct fs_pent *e;
	bool known_mtime = true;

	if (!in || in->kind != FS_K_CHUNK)
		return -ENOENT;
	nsi = fs_ns_find(fs->priv, in->ns);
	if (!nsi || !nsi->pdir)
		return -ENOENT;
	if (to_set & FUSE_SET_ATTR_SIZE)
		return -EPERM;
	e = chunk_ent(fs, ino);
	if (!e && !in->path_ino)
		return -ENOENT; /* never shown by name: as before */
	/* in's fields as its name shows them now: a name without an mtime
	 * of its own (restored from a record without attributes) shows its
	 * publication's time, which the change keeps */
	memset(st, 0, sizeof(*st));
	st->st_uid = nsi->uid;
	st->st_gid = nsi->gid;
	if (e && !e->has_mtime)
		known_mtime = publication_mtime(fs, in, &st->st_mtim);
	fs_path_chunk_attr_locked(fs, nsi, in, &in->key, in->gen, st);
	if (!e && (e = renamed_ent(fs, in->ns, in->path_ino, &in->key))) {
		/* a version renamed away: the name takes the change */
		struct timespec mt = in->mtime;
		int err;

		set_mtime(&mt, attr, to_set);
		err = renamed_attr_set(fs, e, attr, to_set, &mt, in->uid,
				       caller);
		if (!err) {
			in->mtime = mt;
			owner_set(&in->mode, &in->uid, &in->gid, attr, to_set);
		}
		return err;
	}
	set_mtime(&in->mtime, attr, to_set);
	if (e && e->wr) { /* a new version being written: see there */
		writer_attr_set(e->wr, attr, to_set, &in->mtime);
		if (to_set & FUSE_SET_ATTR_MODE)
			in->mode &= attr->st_mode & 07777;
	} else {
		owner_set(&in->mode, &in->uid, &in->gid, attr, to_set);
	}
	if (e) {
		e->has_attr = true;
		e->mode = in->mode;
		e->uid = in->uid;
		e->gid = in->gid;
		e->mtime = in->mtime;
		/* not known (the chunk gone in between): still none of its
		 * own, rather than 1970 */
		e->has_mtime = known_mtime ||
			       (to_set & (FUSE_SET_ATTR_MTIME |
					  FUSE_SET_ATTR_MTIME_NOW));
		pattr_changed_file(fs, e); /* journal, L3 */
	}
	return 0;
}

void fs_path_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
			int to_set, struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	struct fs_pdir *d;
	struct fs_pent *e;
	struct stat st;
	int rc;

	pthread_mutex_lock(&p->lock);
	if (fs_is_pdir_ino(ino)) {
		d = fs_ptree_dir(fs, ino);
		if (!d || d->removed) {
			pthread_mutex_unlock(&p->lock);
			fuse_reply_err(req, ENOENT);
			return;
		}
		if (to_set & FUSE_SET_ATTR_SIZE) {
			pthread_mutex_unlock(&p->lock);
			fuse_reply_err(req, EISDIR);
			return;
		}
		if (to_set & FUSE_SET_ATTR_MODE)
			d->mode = S_IFDIR | (attr->st_mode & 07777);
		if (to_set & FUSE_SET_ATTR_UID)
			d->uid = attr->st_uid;
		if (to_set & FUSE_SET_ATTR_GID)
			d->gid = attr->st_gid;
		set_mtime(&d->mtime, attr, to_set);
		clock_gettime(CLOCK_REALTIME, &d->ctime);
		pattr_changed_dir(fs, d); /* the journal */
		pth_dir_attr(d, &st);
		pthread_mutex_unlock(&p->lock);
		fuse_reply_attr(req, &st, FS_PATH_TTL);
		return;
	}
	rc = published_attr_set(fs, ino, attr, to_set, fuse_req_ctx(req)->uid,
				&st);
	if (rc == 0) {
		pthread_mutex_unlock(&p->lock);
		fs_op_getattr(req, ino, fi);
		return;
	}
	e = chunk_ent(fs, ino);
	pthread_mutex_unlock(&p->lock);
	/* a size (published files never change), or a file renamed away
	 * that is another's by now */
	if (e || rc == -EPERM) {
		fuse_reply_err(req, EPERM);
		return;
	}
	fs_op_setattr(req, ino, attr, to_set, fi);
}

