/*
 * fs_inode.c - LOOKUP, the entries it replies with, and the kernel's
 * lookup counts (FORGET, BATCH_FORGET) over the inode table of fs_itab.c
 * (the records of what the kernel knows by number: chunks, namespaces,
 * writers).
 *
 * Inode numbers are never reused within a mount. A published chunk's inode
 * number is FS_INO_CHUNK + its publication number (tier_info.gen, unique per
 * engine), so a key that is evicted and written again gets a new inode and
 * the kernel can never serve the old bytes under the new file; every other
 * object (namespace, writer, temporary) takes a number from a counter with
 * the top bit set. Records follow the kernel's lookup count (forget and
 * forget_multi); namespaces live as long as they exist or are looked up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs_i.h"

static void unref_inode(struct fs *fs, struct fs_inode *in, uint64_t n)
{
	in->nlookup = n > in->nlookup ? 0 : in->nlookup - n;
	if (in->nlookup)
		return;
	if (in->kind == FS_K_NS && !in->removed)
		return; /* the namespace's attributes outlive the kernel's ref */
	fs_inode_free(fs, in);
}

void fs_forget_one(struct fs *fs, fuse_ino_t ino, uint64_t n)
{
	struct fs_inode *in;

	if (ino < FS_INO_CHUNK)
		return; /* root and control files are static */
	if (fs_is_pdir_ino(ino)) { /* a directory of a path namespace */
		fs_path_forget_locked(fs, ino, n);
		return;
	}
	in = fs_ino_find(fs->priv, ino);
	if (in)
		unref_inode(fs, in, n);
}

int fs_reply_entry_counted(struct fs *fs, fuse_req_t req,
			   struct fuse_entry_param *e)
{
	if (fuse_reply_entry(req, e) == 0)
		return 0;
	/* The kernel never got the entry (interrupted): undo its count. */
	pthread_mutex_lock(&fs->priv->lock);
	fs_forget_one(fs, e->ino, 1);
	pthread_mutex_unlock(&fs->priv->lock);
	return -1;
}

int fs_entry_writer(struct fs *fs, uint32_t ns, struct fs_wr *w,
		    struct fuse_entry_param *e)
{
	struct fs_priv *p = fs->priv;
	struct fs_inode *in;

	pthread_mutex_lock(&p->lock);
	in = fs_ino_find(p, w->ino);
	if (!in) {
		in = fs_inode_new(p, FS_K_WRITER, w->ino);
		if (!in) {
			pthread_mutex_unlock(&p->lock);
			return -ENOMEM;
		}
		in->ns = ns;
		in->wr = w;
		w->refs++;
	}
	in->nlookup++;
	w->refs++; /* for fs_writer_attr outside the lock */
	pthread_mutex_unlock(&p->lock);
	fs_writer_attr(fs, w, &e->attr);
	fs_wr_unref(fs, w);
	e->ino = w->ino;
	e->attr_timeout = 0;
	e->entry_timeout = 0;
	return 0;
}

void fs_entry_ns_locked(struct fs_inode *in, struct fuse_entry_param *e)
{
	in->nlookup++;
	fs_ns_attr(in, &e->attr);
	e->ino = in->ino;
	e->attr_timeout = e->entry_timeout = FS_TTL;
}

int fs_entry_chunk(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		   struct fuse_entry_param *e)
{
	struct fs_priv *p = fs->priv;
	struct tier_info info;
	struct fs_inode *in, *nsi;
	/* not local: promoted from L3 when L3 has it (bounded) */
	int r = tier_stat_fetch(fs->tier, ns, key, &info);

	if (r) {
		if (r == -ENOENT)
			tier_count_name_misses(fs->tier, 1);
		return r;
	}
	pthread_mutex_lock(&p->lock);
	nsi = fs_ns_get(fs, ns);
	in = fs_ino_find(p, FS_INO_CHUNK + info.gen);
	if (!in) {
		struct fs_inode *old = fs_chunk_find(p, ns, key);

		in = fs_inode_new(p, FS_K_CHUNK, FS_INO_CHUNK + info.gen);
		if (!in) {
			pthread_mutex_unlock(&p->lock);
			return -ENOMEM;
		}
		in->ns = ns;
		in->key = *key;
		in->gen = info.gen;
		if (old && old->gen < info.gen) {
			htab_del(&p->ntab, &old->nnode);
			old->named = false;
			/* a path file's name leads to its new version from
			 * this reply on: fds of the old one keep its
			 * attributes (fstat), with no links */
			if (nsi && nsi->pdir)
				old->unlinked = true;
			old = NULL;
		}
		if (!old && !htab_add(&p->ntab, &in->nnode,
				      fs_chunk_hash(ns, key)))
			in->named = true;
	}
	in->nlookup++;
	in->info = info;
	fs_chunk_attr(fs, nsi, in, in->ino, &info, &e->attr);
	fs_path_chunk_attr_locked(fs, nsi, in, key, info.gen, &e->attr);
	e->attr_timeout = e->entry_timeout = fs_chunk_ttl(nsi);
	pthread_mutex_unlock(&p->lock);
	e->ino = in->ino;
	return 0;
}

/* Looks up name in namespace ns (lock NOT held). Fills e and counts a
 * lookup on success. */
static int lookup_in_ns(struct fs *fs, uint32_t ns, const char *name,
			struct fuse_entry_param *e)
{
	struct fs_priv *p = fs->priv;
	struct kvfs_key key;
	struct fs_wr *w;
	int r = fs_chunk_name(name, &key);

	if (r < 0)
		return r;
	if (r == 0)
		return fs_entry_chunk(fs, ns, &key, e);
	pthread_mutex_lock(&p->lock);
	w = fs_tmp_find(p, ns, name);
	if (w)
		w->refs++;
	pthread_mutex_unlock(&p->lock);
	if (!w)
		return -ENOENT;
	r = fs_entry_writer(fs, ns, w, e);
	fs_wr_unref(fs, w);
	return r;
}

void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	struct fuse_entry_param e;
	struct fs_inode *in;
	uint32_t id;
	int err;

	memset(&e, 0, sizeof(e));
	if (parent == FUSE_ROOT_ID) {
		if (!strcmp(name, KVFS_CTL_DIR)) {
			e.ino = FS_INO_KVFS;
			fs_ctl_attr(fs, req, e.ino, NULL, &e.attr);
			e.attr_timeout = e.entry_timeout = 3600;
			fuse_reply_entry(req, &e);
			return;
		}
		if (fs_ns_name_check(name)) {
			fuse_reply_err(req, ENOENT);
			return;
		}
		err = tier_ns_find(fs->tier, name, &id);
		if (err) {
			fuse_reply_err(req, -err);
			return;
		}
		pthread_mutex_lock(&p->lock);
		in = fs_ns_get(fs, id);
		if (!in) {
			pthread_mutex_unlock(&p->lock);
			fuse_reply_err(req, ENOMEM);
			return;
		}
		fs_entry_ns_locked(in, &e);
		pthread_mutex_unlock(&p->lock);
		fs_reply_entry_counted(fs, req, &e);
		return;
	}
	if (parent == FS_INO_KVFS) {
		for (int i = 0; i < FS_CTL_NFILES; i++) {
			if (strcmp(name, fs_ctl_names[i]))
				continue;
			e.ino = FS_INO_CTL_FIRST + i;
			err = fs_ctl_attr(fs, req, e.ino, NULL, &e.attr);
			if (err) {
				fuse_reply_err(req, -err);
				return;
			}
			e.attr_timeout = 0;
			e.entry_timeout = 3600;
			fuse_reply_entry(req, &e);
			return;
		}
		fuse_reply_err(req, ENOENT);
		return;
	}
	pthread_mutex_lock(&p->lock);
	in = fs_ino_find(p, parent);
	if (!in || in->kind != FS_K_NS || in->removed) {
		pthread_mutex_unlock(&p->lock);
		fuse_reply_err(req, in && in->kind == FS_K_NS ? ENOENT :
			       ENOTDIR);
		return;
	}
	id = in->ns;
	pthread_mutex_unlock(&p->lock);
	err = lookup_in_ns(fs, id, name, &e);
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	fs_reply_entry_counted(fs, req, &e);
}

void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct fs *fs = fs_req(req);

	pthread_mutex_lock(&fs->priv->lock);
	fs_forget_one(fs, ino, nlookup);
	pthread_mutex_unlock(&fs->priv->lock);
	fuse_reply_none(req);
}

void fs_op_forget_multi(fuse_req_t req, size_t count,
			struct fuse_forget_data *forgets)
{
	struct fs *fs = fs_req(req);

	pthread_mutex_lock(&fs->priv->lock);
	for (size_t i = 0; i < count; i++)
		fs_forget_one(fs, forgets[i].ino, forgets[i].nlookup);
	pthread_mutex_unlock(&fs->priv->lock);
	fuse_reply_none(req);
}
