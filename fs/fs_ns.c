/*
 * fs_ns.c - namespace directories: MKDIR and RMDIR at the root and the
 * mapping of a directory inode to its namespace. Permission checks against
 * a namespace's mode are in fs_cred.c, its attributes in fs_nsattr.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs_i.h"

void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		 mode_t mode)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fuse_entry_param e;
	struct fs_inode *in;
	uint32_t id;
	int err;

	if (parent != FUSE_ROOT_ID) {
		/* namespaces hold chunks only; .kvfs is read-only */
		fuse_reply_err(req, EPERM);
		return;
	}
	if (!strcmp(name, KVFS_CTL_DIR)) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	err = fs_ns_name_check(name);
	if (!err)
		err = tier_ns_create(fs->tier, name, &id);
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	memset(&e, 0, sizeof(e));
	pthread_mutex_lock(&p->lock);
	in = fs_ns_get(fs, id);
	if (!in) {
		pthread_mutex_unlock(&p->lock);
		tier_ns_remove(fs->tier, id);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	in->mode = S_IFDIR | (mode & 07777);
	in->uid = ctx->uid;
	in->gid = (p->root_mode & S_ISGID) ? p->root_gid : ctx->gid;
	clock_gettime(CLOCK_REALTIME, &in->mtime);
	in->ctime = in->mtime;
	/* -o names=paths: new namespaces hold paths (fs_pname.c) */
	if (fs->cfg.names_paths && fs_path_attach_locked(fs, in)) {
		pthread_mutex_unlock(&p->lock);
		tier_ns_remove(fs->tier, id);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fs_entry_ns_locked(in, &e);
	pthread_mutex_unlock(&p->lock);
	if (fs->cfg.names_paths)
		fs_path_mode_saved(fs, name, true);
	fs_nsmeta_save(fs); /* on disk before mkdir returns */
	fs_reply_entry_counted(fs, req, &e);
}

/* How long rmdir waits for the release of a just-closed temporary. */
#define FS_RMDIR_WAIT_MS 200

/* Drops the closed temporaries of namespace ns (lock held). Returns how
 * many are still open. */
static unsigned drop_closed_temps(struct fs *fs, uint32_t ns)
{
	struct fs_priv *p = fs->priv;
	unsigned open = 0;

	for (struct fs_wr *w = p->tmp_head.tnext, *next; w != &p->tmp_head;
	     w = next) {
		next = w->tnext;
		if (w->ns != ns)
			continue;
		if (w->opens) {
			open++;
			continue;
		}
		fs_tmp_drop(fs, w, FS_DISCARD_UNLINKED);
	}
	return open;
}

void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	struct fs_inode *in;
	uint32_t id;
	int err;

	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, parent == FS_INO_KVFS ? EPERM : ENOTDIR);
		return;
	}
	if (!strcmp(name, KVFS_CTL_DIR)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	err = fs_ns_name_check(name) ? -ENOENT : 0;
	if (!err)
		err = tier_ns_find(fs->tier, name, &id);
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	/*
	 * Closed, unrenamed temporaries are invisible in readdir, so an empty
	 * looking namespace must not fail with ENOTEMPTY because of them:
	 * drop them first. Temporaries still open keep it busy. The kernel
	 * sends RELEASE after close(2) returns, asynchronously, so `close;
	 * rmdir` can arrive first: a temporary that looks open is given up to
	 * FS_RMDIR_WAIT_MS for its release before rmdir says ENOTEMPTY.
	 */
	pthread_mutex_lock(&p->lock);
	for (unsigned waited = 0; drop_closed_temps(fs, id); waited++) {
		if (waited >= FS_RMDIR_WAIT_MS) {
			pthread_mutex_unlock(&p->lock);
			fuse_reply_err(req, ENOTEMPTY);
			return;
		}
		pthread_mutex_unlock(&p->lock);
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
		pthread_mutex_lock(&p->lock);
	}
	err = tier_ns_remove(fs->tier, id);
	if (!err) {
		in = fs_ns_find(p, id);
		if (in) {
			in->removed = true;
			if (!in->nlookup)
				fs_inode_free(fs, in);
		}
	}
	pthread_mutex_unlock(&p->lock);
	if (!err)
		fs_nsmeta_save(fs);
	fuse_reply_err(req, -err);
}

/* Looks up namespace inode ino (lock NOT held) -> id. */
int fs_ns_of(struct fs *fs, fuse_ino_t ino, uint32_t *id)
{
	struct fs_priv *p = fs->priv;
	struct fs_inode *in;
	int err = 0;

	if (ino == FUSE_ROOT_ID)
		return -EPERM; /* the root holds namespaces, not chunks */
	if (ino < FS_INO_CHUNK)
		return -EPERM;
	pthread_mutex_lock(&p->lock);
	in = fs_ino_find(p, ino);
	if (!in || (in->kind == FS_K_NS && in->removed))
		err = -ENOENT;
	else if (in->kind != FS_K_NS)
		err = -ENOTDIR;
	else
		*id = in->ns;
	pthread_mutex_unlock(&p->lock);
	return err;
}

int fs_ns_child(struct fs *fs, fuse_ino_t parent, const char *name,
		uint32_t *ns, struct kvfs_key *key)
{
	int err = fs_ns_of(fs, parent, ns);

	return err ? err : fs_chunk_name(name, key);
}

