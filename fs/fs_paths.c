/*
 * fs_paths.c - fs/'s doorway to path namespaces (fs/paths/): each
 * fs_path_* hook of fs_i.h calls struct fs_path_ops, set by fs_path_create
 * when fs_create starts the mount (before it serves a request); before
 * that, no namespace is in path mode. Calls no file of fs/.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "fs/fs_i.h"

void fs_path_tick(struct fs *fs)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	if (o)
		o->tick(fs);
}

void fs_path_publish_pending(struct fs *fs, uint64_t cutoff_ms, size_t max)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	if (o)
		o->publish_pending(fs, cutoff_ms, max);
}

void fs_path_publish_flushed(struct fs *fs, uint32_t ns)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	if (o)
		o->publish_flushed(fs, ns);
}

uint32_t fs_path_reach(struct fs *fs, uint32_t ns, const struct kvfs_key *keys,
		       uint32_t n, struct fs_cred *c, int mask, int *why)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	if (why)
		*why = 0;
	return o && !(c->uid == 0 &&
		      __atomic_load_n(&c->dac, __ATOMIC_ACQUIRE) > 0) ?
	       o->reach(fs, ns, keys, n, c, mask, why) : n;
}

int fs_path_check(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		  uint64_t gen, struct fs_cred *c, bool named,
		  uint64_t st_ino, const int64_t *mtime_ns)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	if (c && c->uid == 0 && __atomic_load_n(&c->dac, __ATOMIC_ACQUIRE) > 0)
		c = NULL;
	if (!o)
		return named ? -ESTALE : 0;
	return c || named ? o->check(fs, ns, key, gen, c, named, st_ino,
				     mtime_ns) : 0;
}

void fs_path_gone(struct fs *fs, uint32_t ns, const struct kvfs_key *key)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	if (o)
		o->gone(fs, ns, key);
}

unsigned fs_path_quiesce_locked(struct fs *fs)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	return o ? o->quiesce_locked(fs) : 0;
}

void fs_path_published(struct fs *fs, uint32_t ns, const struct kvfs_key *key)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	if (o)
		o->published(fs, ns, key);
}

int fs_path_attach_locked(struct fs *fs, struct fs_inode *nsi)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	return o ? o->attach_locked(fs, nsi) : -EOPNOTSUPP;
}

void fs_path_detach_locked(struct fs *fs, struct fs_inode *nsi)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	if (o)
		o->detach_locked(fs, nsi);
}

void fs_path_forget_locked(struct fs *fs, uint64_t ino, uint64_t n)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	if (o)
		o->forget_locked(fs, ino, n);
}

int fs_path_writer_attr_set(struct fs *fs, struct fs_wr *w,
			    const struct stat *attr, int to_set,
			    uid_t was_uid, uid_t caller)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	return o ? o->writer_attr_set(fs, w, attr, to_set, was_uid, caller) :
		   0;
}

void fs_path_chunk_attr_locked(struct fs *fs, const struct fs_inode *nsi,
			       struct fs_inode *in, const struct kvfs_key *key,
			       uint64_t gen, struct stat *st)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	if (o)
		o->chunk_attr_locked(fs, nsi, in, key, gen, st);
}

int fs_path_names_set(struct fs *fs, uint32_t ns, const char *v, size_t len)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	return o ? o->names_set(fs, ns, v, len) : -EOPNOTSUPP;
}

int fs_path_evict_set(struct fs *fs, uint32_t ns, const char *v, size_t len)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	return o ? o->evict_set(fs, ns, v, len) : -EOPNOTSUPP;
}

int fs_path_quota_set(struct fs *fs, uint32_t ns, uint64_t quota)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	return o ? o->quota_set(fs, ns, quota) : -EOPNOTSUPP;
}

int fs_path_sync(struct fs *fs)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	return o ? o->sync(fs) : 0;
}

bool fs_path_ns(struct fs *fs, uint32_t ns)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	return o ? o->ns(fs, ns) : false;
}

void fs_path_mode_saved(struct fs *fs, const char *ns, bool paths)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	if (o)
		o->mode_saved(fs, ns, paths);
}

bool fs_path_event_hash(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
			uint64_t *h)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	return o ? o->event_hash(fs, ns, key, h) : false;
}

bool fs_path_pattr_get(void *arg, uint32_t ns, const struct kvfs_key *key,
		       struct tier_pattr *a)
{
	struct fs *fs = arg;
	const struct fs_path_ops *o = fs->priv->pathops;

	return o ? o->pattr_get(fs, ns, key, a) : false;
}

void fs_path_pattr_found(void *arg, uint32_t ns, const struct kvfs_key *key,
			 const struct tier_pattr *a)
{
	struct fs *fs = arg;
	const struct fs_path_ops *o = fs->priv->pathops;

	if (o)
		o->pattr_found(fs, ns, key, a);
}

void fs_path_counts(struct fs *fs, struct fs_path_counts *c)
{
	const struct fs_path_ops *o = fs->priv->pathops;

	if (o)
		o->counts(fs, c);
	else
		memset(c, 0, sizeof(*c));
}
