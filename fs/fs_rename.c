/*
 * fs_rename.c - names in a namespace: UNLINK of chunks and temporaries,
 * RENAME of a temporary (to another temporary, or onto a key: that
 * publishes it), and the refusal of what a namespace cannot hold (MKNOD,
 * LINK, SYMLINK: EPERM).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_i.h"
#include "fs/fs_pt.h"

/* The kernel's inode of (ns, key), if any, is an unlinked file's. */
static void mark_unlinked(struct fs *fs, uint32_t ns,
			  const struct kvfs_key *key)
{
	struct fs_inode *in;

	pthread_mutex_lock(&fs->priv->lock);
	in = fs_chunk_find(fs->priv, ns, key);
	if (in)
		in->unlinked = true;
	pthread_mutex_unlock(&fs->priv->lock);
}

void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	struct kvfs_key key;
	uint32_t ns;
	int err, r;

	r = fs_ns_child(fs, parent, name, &ns, &key);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if (r == 1) {
		struct fs_wr *w;

		pthread_mutex_lock(&p->lock);
		w = fs_tmp_find(p, ns, name);
		if (w) {
			fs_tmp_unlist(p, w);
			/* open fds keep writing into a nameless chunk that
			 * is dropped with the last reference */
			fs_wr_unref_locked(fs, w);
		}
		pthread_mutex_unlock(&p->lock);
		fuse_reply_err(req, w ? 0 : ENOENT);
		return;
	}
	/* marked first: a GETATTR of an fd's inode (fstat) between the
	 * engine's unlink and the mark would find neither the chunk nor the
	 * mark (ENOENT: review 26); marked, it is the open file's, with no
	 * links. (No lookup of the name runs meanwhile: the kernel holds the
	 * directory for the unlink. tier_unlink fails only with ENOENT: the
	 * chunk went already, and the mark stays.) */
	mark_unlinked(fs, ns, &key);
	err = tier_unlink(fs->tier, ns, &key);
	if (!err) /* an unlink makes no on_gone call: its shadow goes here
		   * (once no reader has it open) */
		fs_pt_gone(fs, ns, &key);
	fuse_reply_err(req, -err);
}

void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		  fuse_ino_t newparent, const char *newname,
		  unsigned int flags)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	struct kvfs_key key, tkey;
	struct fs_wr *w;
	bool gone;
	uint32_t ns, ns2;
	int err, r;

	/* RENAME_NOREPLACE is honoured; EXCHANGE, WHITEOUT and any flag
	 * of a later kernel are not implemented: refused, never ignored */
	if (flags & ~(unsigned int)RENAME_NOREPLACE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	err = fs_ns_of(fs, parent, &ns);
	if (!err)
		err = fs_ns_of(fs, newparent, &ns2);
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	if (ns != ns2) {
		fuse_reply_err(req, EXDEV);
		return;
	}
	r = fs_chunk_name(name, &key);
	if (r == 0) {
		fuse_reply_err(req, EPERM); /* published chunks keep their key */
		return;
	}
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	r = fs_chunk_name(newname, &tkey);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	pthread_mutex_lock(&p->lock);
	w = fs_tmp_find(p, ns, name);
	if (!w) {
		pthread_mutex_unlock(&p->lock);
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (r == 1) {
		/* temporary -> temporary: just a new name */
		struct fs_wr *o = fs_tmp_find(p, ns, newname);
		char *nm;

		if (o == w) {
			pthread_mutex_unlock(&p->lock);
			fuse_reply_err(req, 0);
			return;
		}
		if (o && (flags & RENAME_NOREPLACE)) {
			pthread_mutex_unlock(&p->lock);
			fuse_reply_err(req, EEXIST);
			return;
		}
		nm = strdup(newname);
		if (!nm) {
			pthread_mutex_unlock(&p->lock);
			fuse_reply_err(req, ENOMEM);
			return;
		}
		if (o) {
			fs_tmp_unlist(p, o);
			fs_wr_unref_locked(fs, o);
		}
		fs_tmp_rename(p, w, nm);
		pthread_mutex_unlock(&p->lock);
		fuse_reply_err(req, 0);
		return;
	}
	/*
	 * temporary -> key: publication. The temporary's name goes with a
	 * publication or a discard (bytes missing, namespace gone); a
	 * refusal (EEXIST: the key exists or is being written; EMSGSIZE:
	 * not chunk_bytes long) leaves the temporary as it was, as rename(2)
	 * leaves its source: the writer may unlink it, or write the rest
	 * and rename it again.
	 */
	w->refs++;
	pthread_mutex_unlock(&p->lock);
	err = fs_wr_publish(fs, w, &tkey, true);
	pthread_rwlock_rdlock(&w->lock);
	gone = w->state != FS_WR_OPEN;
	pthread_rwlock_unlock(&w->lock);
	pthread_mutex_lock(&p->lock);
	if (gone && w->in_tmptab) {
		fs_tmp_unlist(p, w);
		fs_wr_unref_locked(fs, w); /* the name table's ref */
	}
	if (!err) {
		w->has_key = true;
		w->key = tkey;
		w->unlinked = false; /* its name is the key now */
	}
	pthread_mutex_unlock(&p->lock);
	if (!err) /* the kernel looked the new name up first: not a miss */
		tier_count_name_misses(fs->tier, -1);
	if (!err) /* fsync'ed before: durable before rename(2) returns */
		err = fs_wr_sync(fs, w, &tkey);
	fs_wr_unref(fs, w);
	fuse_reply_err(req, -err);
}

void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		 mode_t mode, dev_t rdev)
{
	fuse_reply_err(req, EPERM);
}

void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		const char *newname)
{
	fuse_reply_err(req, EPERM);
}

void fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		   const char *name)
{
	fuse_reply_err(req, EPERM);
}
