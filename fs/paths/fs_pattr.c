/*
 * fs_pattr.c - the attributes of path files and directories (mode,
 * owner, mtime) beyond the daemon's memory: in the journal's records
 * (fs_pjournal.c), so a warm restart or a crash gives every name back the
 * attributes it had, and in a file's L3 record (the engine writes what
 * fs_pev_attr_set keeps for its key), so a node that finds it in L3 (this
 * one after it left L1 and L2, or another) judges it as its writer did.
 * What is not known (records of older daemons, a journal lost) stays as
 * before: files 0644, directories 0755, the namespace's owner.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/paths/fs_ptree.h"

bool fs_pattr_of_file(const struct fs_pent *e, struct tier_pattr *a)
{
	if (!e->has_attr)
		return false;
	a->mode = e->mode & 07777;
	a->uid = e->uid;
	a->gid = e->gid;
	/* 0 s and 0 ns: none of its own (fs_pattr_to_file) */
	a->mtime_sec = e->has_mtime ? (int64_t)e->mtime.tv_sec : 0;
	a->mtime_nsec = e->has_mtime ? (uint32_t)e->mtime.tv_nsec : 0;
	return true;
}

void fs_pattr_of_dir(const struct fs_pdir *d, struct tier_pattr *a)
{
	a->mode = d->mode & 07777;
	a->uid = d->uid;
	a->gid = d->gid;
	a->mtime_sec = (int64_t)d->mtime.tv_sec;
	a->mtime_nsec = (uint32_t)d->mtime.tv_nsec;
}

void fs_pattr_to_file(const struct tier_pattr *a, struct fs_pent *e)
{
	/* an mtime of 0 s and 0 ns is none: what fs_pattr_of_file writes
	 * for a file whose mtime was never its own (the name shows the
	 * publication's time), not 1970 */
	e->has_attr = a != NULL;
	e->has_mtime = a && (a->mtime_sec || a->mtime_nsec);
	if (!a)
		return;
	e->mode = a->mode & 07777;
	e->uid = a->uid;
	e->gid = a->gid;
	e->mtime.tv_sec = (time_t)a->mtime_sec;
	e->mtime.tv_nsec = (long)a->mtime_nsec;
}

void fs_pattr_to_dir(const struct tier_pattr *a, struct fs_pdir *d)
{
	d->mode = S_IFDIR | (a->mode & 07777);
	d->uid = a->uid;
	d->gid = a->gid;
	d->mtime.tv_sec = (time_t)a->mtime_sec;
	d->mtime.tv_nsec = (long)a->mtime_nsec;
	d->ctime = d->mtime;
}

void fs_pattr_note(struct fs *fs, const struct fs_pent *e)
{
	struct tier_pattr a;

	if (e->keyed)
		fs_pev_attr_set(fs->priv->paths, e->parent->ns, &e->key,
				fs_pattr_of_file(e, &a) ? &a : NULL);
}

void fs_pattr_note_writer(struct fs *fs, uint32_t ns,
			  const struct kvfs_key *key, const struct fs_wr *w)
{
	uint64_t mt = __atomic_load_n(&w->mtime_ns, __ATOMIC_RELAXED);
	struct tier_pattr a = {
		.mode = w->mode & 07777, .uid = w->uid, .gid = w->gid,
		.mtime_sec = (int64_t)(mt / 1000000000ULL),
		.mtime_nsec = (uint32_t)(mt % 1000000000ULL),
	};

	fs_pev_attr_set(fs->priv->paths, ns, key, &a);
}

void fs_pattr_gone(struct fs *fs, uint32_t ns, const struct kvfs_key *key)
{
	struct fs_paths *t = fs->priv->paths;
	const struct fs_pent *e;
	struct tier_info info;

	pthread_mutex_lock(&fs->priv->lock);
	e = fs_ptree_by_key(t, ns, key);
	if (!(e && e->keyed) && !fs_ptree_publishing(t, ns, key) &&
	    tier_stat(fs->tier, ns, key, &info) == -ENOENT)
		fs_pev_forget(t, ns, key);
	pthread_mutex_unlock(&fs->priv->lock);
}
