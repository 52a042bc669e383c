/*
 * fs_pname.c - the name operations of path namespaces: mkdir, rmdir,
 * unlink, rename, readdir, the namespace's mode (user.kvfs.names), the
 * names of chunks the engine let go, and the mount's path state from
 * creation to unmount. The tree is fs_ptree.c's, versions and
 * publication fs_path.c's (see there for the rules).
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/paths/fs_ptree.h"

static struct fs_paths *paths_of(struct fs *fs)
{
	return fs->priv->paths;
}

static void journal(struct fs *fs, char type, uint32_t ns, const char *path,
		    int len)
{
	struct tier_ns_info ni;

	if (!paths_of(fs)->journal || len < 0 || tier_ns_info(fs->tier, ns, &ni))
		return;
	fs_pjournal_add(fs, type, ni.name, path, (size_t)len);
}

/* ------------------------------------------------------ mkdir and rmdir */

void fs_path_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	char path[FS_PATH_MAX + 1];
	struct fuse_entry_param ep;
	struct fs_pdir *d, *sub;
	struct fs_pent *e;
	size_t len = strlen(name);
	int plen = -ENAMETOOLONG, err;

	pthread_mutex_lock(&p->lock);
	d = fs_ptree_dir(fs, parent);
	if (!d) {
		pthread_mutex_unlock(&p->lock);
		fs_op_mkdir(req, parent, name, mode);
		return;
	}
	if (len <= 255)
		plen = fs_ptree_path(d, name, len, path);
	err = plen < 0 ? plen : fs_ptree_mkdir(paths_of(fs), d, name, len, &e);
	if (err) {
		pthread_mutex_unlock(&p->lock);
		fuse_reply_err(req, -err);
		return;
	}
	sub = e->dir;
	sub->mode = S_IFDIR | (mode & 07777);
	sub->uid = ctx->uid;
	sub->gid = (d->mode & S_ISGID) ? d->gid : ctx->gid;
	if (d->mode & S_ISGID)
		sub->mode |= S_ISGID;
	clock_gettime(CLOCK_REALTIME, &sub->mtime);
	sub->ctime = sub->mtime;
	sub->nlookup = 1;
	memset(&ep, 0, sizeof(ep));
	ep.ino = sub->ino;
	ep.attr.st_ino = sub->ino;
	ep.attr.st_mode = sub->mode;
	ep.attr.st_nlink = 2;
	ep.attr.st_uid = sub->uid;
	ep.attr.st_gid = sub->gid;
	ep.attr.st_mtim = ep.attr.st_ctim = ep.attr.st_atim = sub->mtime;
	ep.attr_timeout = FS_PATH_TTL;
	ep.entry_timeout = FS_PATH_TTL;
	pthread_mutex_unlock(&p->lock);
	fs_pjournal_add_dir(fs, ep.ino); /* with its mode and owner */
	fs_reply_entry_counted(fs, req, &ep);
}

/* Is the root directory of path namespace nsi empty? (priv.lock held) */
static bool root_empty(struct fs_inode *nsi)
{
	return !nsi->pdir || !nsi->pdir->nent;
}

void fs_path_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	char path[FS_PATH_MAX + 1];
	struct fs_pdir *d;
	struct fs_pent *e;
	size_t len = strlen(name);
	int plen, err = 0;
	uint32_t ns;

	pthread_mutex_lock(&p->lock);
	d = fs_ptree_dir(fs, parent);
	if (!d) {
		/* a namespace: its directories are not the engine's */
		if (parent == FUSE_ROOT_ID) {
			uint32_t id;

			if (!fs_ns_name_check(name) &&
			    !tier_ns_find(fs->tier, name, &id)) {
				struct fs_inode *nsi = fs_ns_find(p, id);

				if (nsi && !root_empty(nsi))
					err = -ENOTEMPTY;
			}
		}
		pthread_mutex_unlock(&p->lock);
		if (err)
			fuse_reply_err(req, -err);
		else
			fs_op_rmdir(req, parent, name);
		return;
	}
	e = fs_ptree_find(paths_of(fs), d, name, len);
	if (!e)
		err = -ENOENT;
	else if (!e->dir)
		err = -ENOTDIR;
	else if (e->dir->nent)
		err = -ENOTEMPTY;
	if (err) {
		pthread_mutex_unlock(&p->lock);
		fuse_reply_err(req, -err);
		return;
	}
	plen = fs_ptree_path(d, name, len, path);
	ns = d->ns;
	fs_ptree_remove(paths_of(fs), e);
	pthread_mutex_unlock(&p->lock);
	journal(fs, 'X', ns, path, plen);
	fuse_reply_err(req, 0);
}

/* ------------------------------------------------------------- unlink */

/* Marks the published chunk inode of (ns, key) unlinked: fstat of open
 * fds still works, with no links (priv.lock held). */
static void chunk_unlinked(struct fs *fs, uint32_t ns,
			   const struct kvfs_key *key)
{
	struct fs_inode *in = fs_chunk_find(fs->priv, ns, key);

	if (in)
		in->unlinked = true;
}

/*
 * Takes file entry e away from its name (priv.lock held, e idle): its
 * writer is detached (open fds keep writing into a nameless file that is
 * dropped with them), and the key it held is returned in *key (true) for
 * the caller to unlink from the engine once the lock is dropped.
 */
static bool take_file(struct fs *fs, struct fs_pent *e, struct kvfs_key *key)
{
	bool keyed = e->keyed;

	if (keyed) {
		*key = e->key;
		fs_ptree_unkey(paths_of(fs), e);
		chunk_unlinked(fs, e->parent->ns, key);
	}
	if (e->wr) {
		e->wr->unlinked = true; /* its open fds: st_nlink 0 */
		fs_path_detach_writer(fs, e, e->wr); /* may free e */
	} else {
		fs_ptree_remove(paths_of(fs), e);
	}
	return keyed;
}

void fs_path_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	struct fs_pdir *d;
	struct fs_pent *e;
	struct kvfs_key key;
	size_t len = strlen(name);
	bool keyed;
	uint32_t ns;

	pthread_mutex_lock(&p->lock);
	d = fs_ptree_dir(fs, parent);
	if (!d) {
		pthread_mutex_unlock(&p->lock);
		fs_op_unlink(req, parent, name);
		return;
	}
	while ((e = fs_ptree_find(paths_of(fs), d, name, len)) && e->busy)
		fs_ptree_wait_idle(fs, e);
	if (!e || e->dir) {
		pthread_mutex_unlock(&p->lock);
		fuse_reply_err(req, e ? EISDIR : ENOENT);
		return;
	}
	ns = d->ns;
	keyed = take_file(fs, e, &key);
	pthread_mutex_unlock(&p->lock);
	if (keyed) {
		tier_unlink(fs->tier, ns, &key); /* gone meanwhile: fine */
		fs_pev_forget(paths_of(fs), ns, &key);
	}
	fuse_reply_err(req, 0);
}

/* ------------------------------------------------------------- rename */

/*
 * Gives published file e (idle, no writer) a closed writer holding a copy
 * of its bytes, so a rename can publish them under the new path's key.
 * priv.lock held; dropped meanwhile, with e busy. 0 or -errno.
 */
static int copy_to_writer(struct fs *fs, struct fs_pent *e, uid_t uid,
			  gid_t gid)
{
	struct fs_priv *p = fs->priv;
	uint32_t ns = e->parent->ns;
	struct kvfs_key key = e->key;
	struct tier_chunk *c = NULL;
	struct tier_wr *tw = NULL;
	struct fs_wr *w = NULL;
	struct tier_info info;
	uint64_t size, off = 0;
	char *buf = NULL;
	bool durable;
	int err;

	fs_ptree_busy(fs, e, true);
	pthread_mutex_unlock(&p->lock);
	/* a file with an L2 record survives a crash (an fsync, ingest or an
	 * eviction put it there): so must its copy, before the rename that
	 * erases it returns (fs_wr_sync at its publication) */
	durable = !tier_stat(fs->tier, ns, &key, &info) && info.in_l2;
	err = tier_get_flags(fs->tier, ns, &key, TIER_GET_NOCOUNT, &c);
	if (!err)
		err = tier_wr_begin(fs->tier, ns, NULL, tier_chunk_size(c),
				    &tw);
	size = c ? tier_chunk_size(c) : 0;
	if (!err && !tier_chunk_ptr(c) && size)
		err = (buf = malloc(1 << 20)) ? 0 : -ENOMEM;
	while (!err && off < size) {
		size_t n = size - off < (1 << 20) ? size - off : (1 << 20);
		const char *src = tier_chunk_ptr(c);

		if (!src) {
			long r = tier_chunk_read(fs->tier, c, buf, n, off);

			err = r < 0 ? (int)r : 0;
			src = buf;
		} else {
			src += off;
		}
		if (!err)
			err = tier_wr_pwrite(fs->tier, tw, src, n, off);
		off += n;
	}
	free(buf);
	if (c)
		tier_put(fs->tier, c);
	pthread_mutex_lock(&p->lock);
	fs_ptree_busy(fs, e, false);
	if (!err && !(w = fs_wr_new(p)))
		err = -ENOMEM;
	if (err || e->wr || !e->keyed) { /* failed, or changed meanwhile */
		if (w)
			fs_wr_unref_locked(fs, w);
		if (tw) {
			pthread_mutex_unlock(&p->lock);
			tier_wr_abort(fs->tier, tw);
			pthread_mutex_lock(&p->lock);
		}
		return err ? err : -EBUSY;
	}
	w->w = tw;
	w->ns = ns;
	w->uid = uid;
	w->gid = gid;
	if (e->has_attr) { /* the file keeps its mode, owner and mtime */
		w->mode = e->mode;
		w->uid = e->uid;
		w->gid = e->gid;
	}
	if (e->has_mtime)
		w->mtime_ns = (uint64_t)e->mtime.tv_sec * 1000000000ULL +
			      (uint64_t)e->mtime.tv_nsec;
	w->st_ino = e->ino;
	w->temp = true;
	w->path = true;
	w->sync = durable;
	w->closed_ms = fs_now_ms();
	e->wr = w; /* the reference fs_wr_new made */
	w->pent = e;
	return 0;
}

/* Moves an empty directory's entry (priv.lock held). */
static int rename_dir(struct fs *fs, struct fs_pent *e, struct fs_pdir *nd,
		      const char *nname, struct fs_pent *o, unsigned flags)
{
	struct fs_paths *t = paths_of(fs);

	if (o && !o->dir)
		return -ENOTDIR;
	if (o && (flags & RENAME_NOREPLACE))
		return -EEXIST;
	if (o && o->dir->nent)
		return -ENOTEMPTY;
	if (fs_ptree_within(nd, e->dir))
		return -EINVAL;
	/* the keys of the files below would all change: mv(1) copies */
	if (e->dir->nent)
		return -EXDEV;
	if (o)
		fs_ptree_remove(t, o);
	return fs_ptree_move(t, e, nd, nname, strlen(nname));
}

void fs_path_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		       fuse_ino_t newparent, const char *newname,
		       unsigned int flags)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	char opath[FS_PATH_MAX + 1], npath[FS_PATH_MAX + 1];
	struct fs_pdir *d, *nd;
	struct fs_pent *e, *o, oattr = { 0 };
	struct kvfs_key okey, skey;
	struct fs_wr *w = NULL;
	bool okeyed = false, skeyed = false, publish = false, isdir = false;
	size_t len = strlen(name), nlen = strlen(newname);
	int olen = -1, plen = -1, err = 0;
	uint64_t ogen = 0, dino = 0;
	uint32_t ns = 0;

	pthread_mutex_lock(&p->lock);
	d = fs_ptree_dir(fs, parent);
	nd = fs_ptree_dir(fs, newparent);
	if (!d && !nd) {
		pthread_mutex_unlock(&p->lock);
		fs_op_rename(req, parent, name, newparent, newname, flags);
		return;
	}
	if (!d || !nd || d->ns != nd->ns)
		err = -EXDEV; /* keys are per namespace */
	else if (flags & RENAME_EXCHANGE)
		err = -EINVAL;
	else if (nlen > 255)
		err = -ENAMETOOLONG;
	if (err)
		goto out;
	ns = d->ns;
again:
	e = fs_ptree_find(paths_of(fs), d, name, len);
	o = fs_ptree_find(paths_of(fs), nd, newname, nlen);
	if (!e) {
		err = -ENOENT;
		goto out;
	}
	if (e->busy || (o && o->busy)) {
		fs_ptree_wait_idle(fs, e->busy ? e : o);
		goto again;
	}
	if (e == o)
		goto out;
	plen = fs_ptree_path(nd, newname, nlen, npath);
	if (plen < 0) {
		err = plen;
		goto out;
	}
	if (e->dir) {
		isdir = true;
		dino = e->dir->ino;
		olen = fs_ptree_path(d, name, len, opath);
		err = rename_dir(fs, e, nd, newname, o, flags);
		goto out;
	}
	if (o && o->dir) {
		err = -EISDIR;
		goto out;
	}
	if (o && (flags & RENAME_NOREPLACE)) {
		err = -EEXIST;
		goto out;
	}
	/* the kernel's inode of e's published version stays the name's:
	 * its chmod and chown go to e (fs_psetattr.c) */
	if (e->keyed && (err = fs_ptree_moved(paths_of(fs), e)))
		goto out;
	if (!e->wr) { /* published: its bytes move to the new key */
		err = copy_to_writer(fs, e, ctx->uid, ctx->gid);
		if (err == -EBUSY)
			goto again;
		if (err)
			goto out;
		goto again; /* the names may have changed meanwhile */
	}
	/* e's old key: the name goes, and so does what it published */
	if (e->keyed) {
		skeyed = true;
		skey = e->key;
		fs_ptree_unkey(paths_of(fs), e);
		chunk_unlinked(fs, ns, &skey);
	}
	/* the target's published version stays until e's replaces it */
	if (o) {
		if (o->keyed) {
			okeyed = true;
			okey = o->key;
			ogen = o->gen;
			oattr = *o; /* its mode and owner guard that version */
			fs_ptree_unkey(paths_of(fs), o);
			/* replaced: fds open on it keep its attributes */
			chunk_unlinked(fs, ns, &okey);
		}
		if (o->wr) {
			o->wr->unlinked = true; /* replaced: st_nlink 0 */
			fs_path_detach_writer(fs, o, o->wr); /* frees o */
		}
		else
			fs_ptree_remove(paths_of(fs), o);
	}
	err = fs_ptree_move(paths_of(fs), e, nd, newname, nlen);
	if (err)
		goto out;
	w = e->wr;
	if (okeyed) {
		/* the name shows the target's version until e's replaces it
		 * (e's writer open), with the target's mode, owner and mtime,
		 * not those of a file not yet published: its publication
		 * gives the name e's (name_takes_attr) */
		fs_ptree_key(paths_of(fs), e, &okey, ogen);
		e->has_attr = oattr.has_attr;
		e->mode = oattr.mode;
		e->uid = oattr.uid;
		e->gid = oattr.gid;
		e->has_mtime = oattr.has_mtime;
		e->mtime = oattr.mtime;
	}
	if (fs_path_wr_closed_locked(w)) {
		/* closed: published now, under the new name */
		publish = true;
		w->refs++;
	}
out:
	pthread_mutex_unlock(&p->lock);
	if (!err && isdir) {
		journal(fs, 'X', ns, opath, olen);
		fs_pjournal_add_dir(fs, dino); /* with its attributes */
	}
	if (skeyed) {
		tier_unlink(fs->tier, ns, &skey);
		fs_pev_forget(paths_of(fs), ns, &skey);
	}
	if (publish) {
		/* fsync'ed before: durable before rename(2) returns */
		int serr = fs_path_publish_closed(fs, w);

		if (!err)
			err = serr;
		fs_wr_unref(fs, w);
	}
	fuse_reply_err(req, -err);
}

/* ------------------------------------------------------------ readdir */

/* A listing of a path directory, as of opendir (or a rewind): one
 * malloc'd block, so fs_fh_free's free(fh->snap) frees it. */
struct psnap {
	size_t n;
	struct psnap_ent {
		uint64_t ino;
		uint32_t type;
		uint32_t name; /* offset in the names after e[n] */
	} e[];
};

static int psnap_take(struct fs *fs, uint64_t ino, struct psnap **out)
{
	struct fs_priv *p = fs->priv;
	struct fs_pdir *d;
	struct psnap *s;
	size_t names = 6, n = 2;
	char *pool;

	pthread_mutex_lock(&p->lock);
	d = fs_ptree_dir(fs, ino);
	if (!d || d->removed) {
		pthread_mutex_unlock(&p->lock);
		return -ENOENT;
	}
	for (struct fs_pent *e = d->head; e; e = e->next, n++)
		names += e->len + 1u;
	s = malloc(sizeof(*s) + n * sizeof(s->e[0]) + names);
	if (!s) {
		pthread_mutex_unlock(&p->lock);
		return -ENOMEM;
	}
	pool = (char *)&s->e[n];
	memcpy(pool, ".\0..", 5);
	s->e[0] = (struct psnap_ent){ d->ino, S_IFDIR, 0 };
	s->e[1] = (struct psnap_ent){ d->self ? d->self->parent->ino :
				      FUSE_ROOT_ID, S_IFDIR, 2 };
	names = 5;
	s->n = 2;
	for (struct fs_pent *e = d->head; e; e = e->next) {
		struct psnap_ent *x = &s->e[s->n++];

		x->type = e->dir ? S_IFDIR : S_IFREG;
		x->ino = e->dir ? e->dir->ino : e->ino; /* as stat says */
		x->name = (uint32_t)names;
		memcpy(pool + names, e->name, e->len + 1u);
		names += e->len + 1u;
	}
	pthread_mutex_unlock(&p->lock);
	*out = s;
	return 0;
}

void fs_path_op_opendir(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct psnap *s = NULL;
	struct fs_fh *fh;
	bool path;
	int err;

	pthread_mutex_lock(&fs->priv->lock);
	path = fs_ptree_dir(fs, ino) != NULL;
	pthread_mutex_unlock(&fs->priv->lock);
	if (!path) {
		fs_op_opendir(req, ino, fi);
		return;
	}
	err = psnap_take(fs, ino, &s);
	fh = err ? NULL : fs_fh_new(req, FS_FH_NS, ino);
	if (!fh) {
		free(s);
		fuse_reply_err(req, err ? -err : ENOMEM);
		return;
	}
	pthread_mutex_lock(&fs->priv->lock);
	fh->ns = fs_ptree_dir(fs, ino) ? fs_ptree_dir(fs, ino)->ns : 0;
	pthread_mutex_unlock(&fs->priv->lock);
	fh->snap = (struct fs_dirsnap *)s;
	fh->psnap = true;
	fi->fh = (uint64_t)(uintptr_t)fh;
	if (fuse_reply_open(req, fi))
		fs_fh_free(fs, fh);
}

void fs_path_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
			off_t off, struct fuse_file_info *fi)
{
	struct fs_fh *fh = fs_fh_of(fi);
	struct psnap *s;
	size_t used = 0;
	char *buf;

	if (!fh->psnap) {
		fs_op_readdir(req, ino, size, off, fi);
		return;
	}
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* offset 0 again (rewinddir) takes a fresh listing */
	if (off <= 0 && fh->snap_read) {
		struct psnap *fresh;
		int err = psnap_take(fs_req(req), fh->ino, &fresh);

		if (err) {
			free(buf);
			fuse_reply_err(req, -err);
			return;
		}
		free(fh->snap);
		fh->snap = (struct fs_dirsnap *)fresh;
	}
	fh->snap_read = true;
	s = (struct psnap *)fh->snap;
	for (size_t i = off < 0 ? 0 : (size_t)off; i < s->n; i++) {
		struct stat st = { .st_ino = s->e[i].ino,
				   .st_mode = s->e[i].type };
		const char *name = (const char *)&s->e[s->n] + s->e[i].name;
		size_t n = fuse_add_direntry(req, buf + used, size - used,
					     name, &st, (off_t)i + 1);

		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

/* -------------------------------------------------------------- xattrs */

/*
 * Path directories carry no xattrs and take none: EOPNOTSUPP, as files
 * answer for any name kvfs does not define and as a filesystem without
 * xattrs (or ACLs) answers, which cp -a, mv and rsync -a accept. A path
 * file's user.kvfs.* attributes are computed: getxattr answers them by
 * name, but listxattr does not offer them (a copier would copy them onto
 * other files, and back onto kvfs, where they are read-only).
 */
void fs_path_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			 size_t size)
{
	if (fs_is_pdir_ino(ino))
		fuse_reply_err(req, ENODATA);
	else
		fs_op_getxattr(req, ino, name, size);
}

/* A file of a path namespace (chunk or writer inode ino)? Takes
 * priv.lock. */
static bool path_file(struct fs *fs, uint64_t ino)
{
	struct fs_inode *in, *nsi = NULL;

	pthread_mutex_lock(&fs->priv->lock);
	in = fs_ino_find(fs->priv, ino);
	if (in && in->kind != FS_K_NS)
		nsi = fs_ns_find(fs->priv, in->ns);
	pthread_mutex_unlock(&fs->priv->lock);
	return nsi && nsi->pdir;
}

void fs_path_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	if (!fs_is_pdir_ino(ino) && !path_file(fs_req(req), ino))
		fs_op_listxattr(req, ino, size);
	else if (size)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_xattr(req, 0);
}

void fs_path_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			 const char *value, size_t size, int flags)
{
	if (fs_is_pdir_ino(ino))
		fuse_reply_err(req, EOPNOTSUPP);
	else
		fs_op_setxattr(req, ino, name, value, size, flags);
}

void fs_path_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	if (fs_is_pdir_ino(ino))
		fuse_reply_err(req, ENODATA);
	else
		fs_op_removexattr(req, ino, name);
}

/* ------------------------------------------------- a namespace's mode */

int pth_attach_locked(struct fs *fs, struct fs_inode *nsi)
{
	if (nsi->pdir)
		return 0;
	nsi->pdir = fs_ptree_root(nsi->ns, nsi->ino);
	if (!nsi->pdir)
		return -ENOMEM;
	/* the root's attributes are the namespace's (fs_ns.c) */
	nsi->pdir->mode = nsi->mode;
	return 0;
}

void pth_detach_locked(struct fs *fs, struct fs_inode *nsi)
{
	if (!nsi->pdir)
		return;
	fs_ptree_clear(fs, paths_of(fs), nsi->pdir);
	free(nsi->pdir);
	nsi->pdir = NULL;
}

/* Temporaries of key namespace ns (priv.lock held). */
static unsigned temps_of(struct fs_priv *p, uint32_t ns)
{
	unsigned n = 0;

	for (struct fs_wr *w = p->tmp_head.tnext; w != &p->tmp_head;
	     w = w->tnext)
		n += w->ns == ns;
	return n;
}

int pth_names_set(struct fs *fs, uint32_t ns, const char *v, size_t len)
{
	struct fs_priv *p = fs->priv;
	struct tier_ns_info ni;
	struct fs_inode *nsi;
	bool paths;
	int err = 0;

	if (len == 5 && !memcmp(v, "paths", 5))
		paths = true;
	else if (len == 4 && !memcmp(v, "keys", 4))
		paths = false;
	else
		return -EINVAL;
	err = tier_ns_info(fs->tier, ns, &ni);
	if (err)
		return err;
	pthread_mutex_lock(&p->lock);
	nsi = fs_ns_get(fs, ns);
	if (!nsi)
		err = -ENOMEM;
	else if (!!nsi->pdir == paths)
		err = 1; /* no change */
	else if (ni.chunks || !root_empty(nsi) || temps_of(p, ns))
		err = -EBUSY;
	else if (paths)
		err = fs_path_attach_locked(fs, nsi);
	else
		fs_path_detach_locked(fs, nsi);
	pthread_mutex_unlock(&p->lock);
	if (err == 1)
		return 0;
	if (!err)
		fs_path_mode_saved(fs, ni.name, paths);
	return err;
}

/* ------------------------------------------------- evict=never */

/* Journals namespace ns's eviction mode as it is now. */
static void keep_saved(struct fs *fs, uint32_t ns)
{
	struct tier_ns_info ni;
	char v[40];
	int n;

	if (!paths_of(fs)->journal || tier_ns_info(fs->tier, ns, &ni))
		return;
	n = fs_path_keep_text(ni.keep, ni.quota, v, sizeof(v));
	fs_pjournal_add(fs, 'Q', ni.name, v, (size_t)n);
}

int pth_evict_set(struct fs *fs, uint32_t ns, const char *v, size_t len)
{
	struct tier_ns_info ni;
	int err;

	if (!fs_path_ns(fs, ns))
		return -EINVAL; /* path namespaces only */
	err = tier_ns_info(fs->tier, ns, &ni);
	if (err)
		return err;
	while (len && (v[len - 1] == '\n' || v[len - 1] == '\0'))
		len--;
	if (len == 5 && !memcmp(v, "never", 5))
		err = ni.keep ? 0 : tier_ns_set_keep(fs->tier, ns, true, 0,
						     false);
	else if (len == 6 && !memcmp(v, "policy", 6))
		err = tier_ns_set_keep(fs->tier, ns, false, 0, false);
	else
		err = -EINVAL;
	if (!err)
		keep_saved(fs, ns);
	return err;
}

int pth_quota_set(struct fs *fs, uint32_t ns, uint64_t quota)
{
	struct tier_ns_info ni;
	int err;

	if (!fs_path_ns(fs, ns))
		return -EINVAL;
	err = tier_ns_info(fs->tier, ns, &ni);
	if (!err && !ni.keep)
		err = -EINVAL; /* evict=never first */
	if (!err)
		err = tier_ns_set_keep(fs->tier, ns, true, quota, false);
	if (!err)
		keep_saved(fs, ns);
	return err;
}

bool pth_ns(struct fs *fs, uint32_t ns)
{
	struct fs_inode *nsi;
	bool paths;

	pthread_mutex_lock(&fs->priv->lock);
	nsi = fs_ns_find(fs->priv, ns);
	paths = nsi && nsi->pdir;
	pthread_mutex_unlock(&fs->priv->lock);
	return paths;
}

/* A denial for c: err, or -EAGAIN where c is root whose capabilities
 * are not read yet (the caller reads them, fs_cred_caps, and asks again) */
static int denied(const struct fs_cred *c, int err)
{
	return c->uid == 0 && __atomic_load_n(&c->dac, __ATOMIC_ACQUIRE) < 0 ?
	       -EAGAIN : err;
}

/* Whether c may reach file e: search on each directory between it and
 * the namespace's root (the root's own: pth_reach), and mask on the file
 * (0644 until chmod). 0, -ENOENT (a directory), -EACCES (the file),
 * -EAGAIN (see denied). priv.lock held. */
static int pent_reach(const struct fs_pent *e, const struct fs_cred *c,
		      int mask)
{
	for (const struct fs_pdir *d = e->parent; d && d->self;
	     d = d->self->parent)
		if (!fs_cred_may(c, d->mode, d->uid, d->gid, X_OK))
			return denied(c, -ENOENT);
	if (mask && !fs_cred_may(c, e->has_attr ? e->mode : 0644, e->uid,
				 e->gid, mask))
		return denied(c, -EACCES);
	return 0;
}

/* Whether c may reach a file with no name here, (ns, key): one known
 * through L3 only is judged by the attributes its record carried (its
 * writer's), an orphan or one whose record had none as a 0644 file
 * (the directories of its path are not known: 0755). 0, -EACCES,
 * -EAGAIN (see denied). */
static int nameless_reach(struct fs *fs, uint32_t ns,
			  const struct kvfs_key *key, const struct fs_cred *c,
			  int mask)
{
	struct tier_pattr a;

	if (mask && fs_pev_attr_get(paths_of(fs), ns, key, &a) &&
	    !fs_cred_may(c, a.mode, a.uid, a.gid, mask))
		return denied(c, -EACCES);
	return 0;
}

/* How long a GET of a key that has no name waits for its publication in
 * flight, or one whose name is being republished for that */
#define CHECK_WAIT_MS 200

/* Waits, at most CHECK_WAIT_MS, for publications of keys[0..n) in flight
 * (another thread publishing a file closed before this request: its key
 * is not in the engine yet). No lock held. */
static void wait_published(struct fs *fs, uint32_t ns,
			   const struct kvfs_key *keys, uint32_t n)
{
	struct timespec until;
	uint32_t i = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += CHECK_WAIT_MS * 1000000L;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&fs->priv->lock);
	while (i < n) {
		if (!fs_ptree_publishing(paths_of(fs), ns, &keys[i])) {
			i++;
			continue;
		}
		if (pthread_cond_timedwait(&paths_of(fs)->idle,
					   &fs->priv->lock, &until))
			break; /* still in flight: the caller sees a miss */
	}
	pthread_mutex_unlock(&fs->priv->lock);
}

uint32_t pth_reach(struct fs *fs, uint32_t ns, const struct kvfs_key *keys,
		   uint32_t n, struct fs_cred *c, int mask, int *why)
{
	struct fs_inode *nsi;
	uint32_t i = 0, first_wr = UINT32_MAX;
	bool pubs = false;
	int rc = 0;

	pthread_mutex_lock(&fs->priv->lock);
again:
	nsi = fs_ns_find(fs->priv, ns);
	if (!nsi || !nsi->pdir) {
		i = n;
	} else if (!fs_cred_may(c, nsi->mode, nsi->uid, nsi->gid, X_OK)) {
		/* nothing below the root: no search */
		rc = n ? denied(c, -ENOENT) : 0;
	} else {
		for (; i < n; i++) {
			const struct fs_pent *e =
				fs_ptree_by_key(paths_of(fs), ns, &keys[i]);

			/* a key with no name here (a file known through L3
			 * only, an orphan): what a lookup of its name would
			 * make of it */
			rc = e && e->keyed ? pent_reach(e, c, mask) :
			     nameless_reach(fs, ns, &keys[i], c, mask);
			if (rc)
				break;
			if (e && e->wr && first_wr == UINT32_MAX)
				first_wr = i;
			if (!pubs)
				pubs = fs_ptree_publishing(paths_of(fs), ns,
							   &keys[i]);
		}
	}
	if (rc == -EAGAIN) {
		pthread_mutex_unlock(&fs->priv->lock);
		fs_cred_caps(c);
		pthread_mutex_lock(&fs->priv->lock);
		rc = 0;
		goto again;
	}
	pthread_mutex_unlock(&fs->priv->lock);
	/* names being written: one whose close(2) returned is published
	 * now, as an open of it would (its RELEASE may come after this
	 * request, on another CPU's ring: mount/mount_uring.h) */
	for (uint32_t j = first_wr; j < i; j++)
		pth_settle_key(fs, ns, &keys[j]);
	if (pubs)
		wait_published(fs, ns, keys, i);
	if (why)
		*why = rc;
	return i;
}


/* One pass of pth_check (priv.lock held): 0 or -errno, or 1 to wait for
 * an entry to go idle. */
static int check_locked(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
			uint64_t gen, const struct fs_cred *c, bool named,
			uint64_t st_ino, const int64_t *mtime_ns)
{
	struct fs_paths *t = paths_of(fs);
	struct fs_inode *nsi = fs_ns_find(fs->priv, ns);
	const struct fs_pent *e;
	struct tier_info info;
	int64_t mt;
	int rc;

	if (!t || !nsi || !nsi->pdir) /* not (any more) a path namespace */
		return named ? -ESTALE : 0;
	e = fs_ptree_by_key(t, ns, key);
	/* KVFS_XFER_NAMED: the publication the caller's name shows now; a
	 * new version being written (an open shows it once its writer
	 * closed, before its publication) or copied is left to the open */
	if (named && !(e && e->keyed && !e->wr && !e->busy &&
		       e->ino == st_ino && e->gen == gen))
		return -ESTALE;
	/* KVFS_XFER_MTIME: and the version the caller's stat showed (a
	 * version published since has its writer's mtime) */
	if (named && mtime_ns &&
	    (!pth_shown_mtime_locked(fs, ns, e, gen, &mt) ||
	     mt != *mtime_ns))
		return -ESTALE;
	if (!c)
		return 0;
	if (!fs_cred_may(c, nsi->mode, nsi->uid, nsi->gid, X_OK))
		return denied(c, -ENOENT);
	if (e && e->keyed) {
		if (e->busy)
			return 1; /* a new version being published */
		/* the name's own version, else not what its mode guards */
		rc = e->gen == gen ? pent_reach(e, c, R_OK) :
				     denied(c, -ENOENT);
		return rc;
	}
	/* no name: root's capabilities decide first (with them, nothing to
	 * check); then a file known only through L3, an orphan... unless it
	 * is being published (not keyed yet: wait for it), it just lost its
	 * name (a rename or unlink whose engine unlink is still to come), or
	 * the engine holds another publication of it by now */
	if (c->uid == 0 && __atomic_load_n(&c->dac, __ATOMIC_ACQUIRE) < 0)
		return -EAGAIN;
	if (fs_ptree_publishing(t, ns, key))
		return 1;
	if (fs_ptree_in_limbo(t, ns, key))
		return -ENOENT;
	return tier_stat(fs->tier, ns, key, &info) || info.gen != gen ?
	       -ENOENT : nameless_reach(fs, ns, key, c, R_OK);
}

static int pth_check(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
	      uint64_t gen, struct fs_cred *c, bool named, uint64_t st_ino,
	      const int64_t *mtime_ns)
{
	struct timespec until;
	bool timed = false;
	int rc;

	pthread_mutex_lock(&fs->priv->lock);
	while ((rc = check_locked(fs, ns, key, gen, c, named, st_ino,
				  mtime_ns))) {
		if (rc == -EAGAIN) {
			pthread_mutex_unlock(&fs->priv->lock);
			fs_cred_caps(c);
			pthread_mutex_lock(&fs->priv->lock);
			if (c && c->uid == 0 &&
			    __atomic_load_n(&c->dac, __ATOMIC_ACQUIRE) > 0)
				c = NULL; /* root with them: the name only */
			continue;
		}
		if (rc < 0)
			break;
		if (!timed) {
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += CHECK_WAIT_MS * 1000000L;
			until.tv_sec += until.tv_nsec / 1000000000L;
			until.tv_nsec %= 1000000000L;
			timed = true;
		}
		if (pthread_cond_timedwait(&paths_of(fs)->idle,
					   &fs->priv->lock, &until)) {
			rc = -ENOENT; /* still in flight: a miss */
			break;
		}
	}
	pthread_mutex_unlock(&fs->priv->lock);
	return rc;
}

void pth_mode_saved(struct fs *fs, const char *ns, bool paths)
{
	if (paths_of(fs)->journal)
		fs_pjournal_add(fs, paths ? 'N' : 'K', ns, "", 0);
}

/* ------------------------------------------- chunks the engine let go */

void pth_published(struct fs *fs, uint32_t ns, const struct kvfs_key *key)
{
	struct fs_inode *in;
	struct fs_pent *e;
	uint64_t parent = 0, gen = 0;
	char *name = NULL;
	size_t len = 0;

	pthread_mutex_lock(&fs->priv->lock);
	e = paths_of(fs) ? fs_ptree_by_key(paths_of(fs), ns, key) : NULL;
	/* Where the kernel may hold the name's entry of an older version
	 * (an inode of it looked up, with FS_PATH_TTL), that entry is
	 * expired (fs_expire_entry): the next walk asks and finds the new
	 * version. Never dropped: a reader may have opened the name since
	 * the publication, through an entry of the new version, and a drop
	 * would turn its fd's /proc/self/fd link into "NAME (deleted)"
	 * (about 1 in 300 opens right after a rename did, when the writer's
	 * entry was dropped here; the kernel checks no inode before it
	 * drops). Nothing where the kernel looked the new version up since
	 * (its entry is that version's), nor for the writer's own entry
	 * (its create or rename left it, expired: fs_entry_writer): the
	 * first read after a rename costs two LOOKUPs (the kernel's check
	 * of the writer's entry, then the name's), kvfs.7. */
	if (e && !e->wr && e->dropped_gen != e->gen &&
	    fs_chunk_find(fs->priv, ns, key)) {
		gen = e->gen;
		if (!fs_pversion_inode(fs, ns, key, gen)) {
			parent = e->parent->ino;
			len = e->len;
			name = strndup(e->name, len);
		}
	}
	pthread_mutex_unlock(&fs->priv->lock);
	if (name && fs->se)
		fs_expire_entry(fs, parent, name, len);
	free(name);
	if (!gen)
		return;
	/* the kernel's name no longer leads to an older version (an O_TRUNC
	 * one replaced): fds still open on it keep its attributes */
	pthread_mutex_lock(&fs->priv->lock);
	in = fs_chunk_find(fs->priv, ns, key);
	if (in && in->gen < gen)
		in->unlinked = true;
	pthread_mutex_unlock(&fs->priv->lock);
}

void pth_gone(struct fs *fs, uint32_t ns, const struct kvfs_key *key)
{
	fs_path_drop_gone(fs, ns, key, true);
	fs_pattr_gone(fs, ns, key); /* a key with no name: its attributes */
}

/* ---------------------------------------------------------- life cycle */

/* What fs/'s core calls (fs_paths.c dispatches to it). */
static const struct fs_path_ops pth_ops = {
	.tick = pth_tick,
	.publish_pending = pth_publish_pending,
	.publish_flushed = pth_publish_flushed,
	.gone = pth_gone,
	.published = pth_published,
	.attach_locked = pth_attach_locked,
	.detach_locked = pth_detach_locked,
	.forget_locked = pth_forget_locked,
	.writer_attr_set = pth_writer_attr_set,
	.chunk_attr_locked = pth_chunk_attr_locked,
	.names_set = pth_names_set,
	.evict_set = pth_evict_set,
	.quota_set = pth_quota_set,
	.ns = pth_ns,
	.reach = pth_reach,
	.check = pth_check,
	.mode_saved = pth_mode_saved,
	.event_hash = pth_event_hash,
	.pattr_get = pth_pattr_get,
	.pattr_found = pth_pattr_found,
	.counts = pth_counts,
	.sync = fs_pjournal_flush,
	.quiesce_locked = fs_psuper_quiesce_locked,
};

int fs_path_create(struct fs *fs, const char *l2_dir)
{
	struct fs_paths *t = calloc(1, sizeof(*t));
	int err;

	fs->priv->pathops = &pth_ops;
	if (!t)
		return -ENOMEM;
	err = fs_ptree_init(t, fs->cfg.max_dirs);
	if (!err)
		err = fs_pev_create(t, tier_l3_on(fs->tier));
	if (err) {
		free(t);
		return err;
	}
	fs->priv->paths = t;
	if (l2_dir)
		fs_pjournal_open(fs, l2_dir);
	return 0;
}

void fs_path_destroy(struct fs *fs)
{
	struct fs_paths *t = paths_of(fs);

	if (!t)
		return;
	/* closed files the kernel released: published, so flush_on_exit
	 * writes them to L2 with the rest and the journal names them */
	fs_path_publish_pending(fs, UINT64_MAX, SIZE_MAX);
	fs_pjournal_close(fs);
}

/* After fs_destroy freed the writers and inodes' references. */
void fs_path_free(struct fs *fs)
{
	struct fs_paths *t = paths_of(fs);

	if (!t)
		return;
	fs_ptree_free(fs, t);
	fs_pev_destroy(t);
	free(t);
	fs->priv->paths = NULL;
}

void pth_counts(struct fs *fs, struct fs_path_counts *c)
{
	struct fs_paths *t = paths_of(fs);

	pthread_mutex_lock(&fs->priv->lock);
	c->dirs = t->ndirs;
	c->files = t->nfiles;
	c->meta_bytes = t->bytes;
	c->pending = t->npending;
	c->orphans = t->orphans;
	c->superseded_opens = t->superseded_opens;
	pthread_mutex_unlock(&fs->priv->lock);
}
