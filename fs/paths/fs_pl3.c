/*
 * fs_pl3.c - names of path namespaces found in L3: what another node
 * stored in the shared tier is found here by its path, as key chunks are
 * found by their key.
 *
 * A file's key is its path's (kvfs_path_key), so a name lookup that misses
 * in the local tree asks the engine for that key, which promotes it from
 * L3 (tier_stat_fetch: every check of the record, a miss when in doubt);
 * found, the name joins the tree (and the journal) as a published file,
 * with the mode, owner and mtime its record carried (the promotion left
 * them in fs_pevent.c's table; a record of an older daemon carries none:
 * 0644, the namespace's owner), and the lookup answers it. Directories have no bytes, so a node that
 * publishes a file marks every directory above it in L3 once: an empty
 * record under the key of the directory's path with a '/' appended (a
 * key no file can have: names hold no '/'). A lookup that finds neither
 * a file nor a file's bytes finds the marker (one GET of its 256 bytes)
 * and makes the directory here with the mode, owner and mtime the marker
 * carries (those the directory had when it was marked, or chmod'ed
 * since: a chmod, chown or utimensat of a marked directory marks it
 * again); a marker of an older daemon carries none: mode 0755 and the
 * namespace's owner, as a warm restart makes the directories its files
 * imply. Markers are never deleted by rmdir
 * (files of other nodes may still be below); kvfsctl l3 drop deletes them
 * with the namespace's chunks. Only while L3 is on: without it a lookup
 * never asks the engine for a name the tree lacks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/paths/fs_ptree.h"

/* The key of directory path p (len bytes; p holds len + 2 bytes). */
static void dir_key(char *p, size_t len, struct kvfs_key *key)
{
	p[len] = '/';
	kvfs_path_key(p, len + 1, key);
	p[len] = '\0';
}

int fs_path_l3_find(struct fs *fs, uint64_t dir_ino, const char *name,
		    size_t len)
{
	struct fs_priv *p = fs->priv;
	struct fs_paths *t = p->paths;
	char path[FS_PATH_MAX + 2];
	struct tier_info info;
	struct kvfs_key key;
	struct fs_pdir *d;
	struct fs_pent *e;
	struct tier_pattr a;
	bool file = false, has_a = false;
	uint64_t dino = 0;
	uint32_t ns;
	int plen, err;

	if (!tier_l3_on(fs->tier) || len > 255)
		return -ENOENT;
	pthread_mutex_lock(&p->lock);
	d = fs_ptree_dir(fs, dir_ino);
	plen = d && !d->removed ? fs_ptree_path(d, name, len, path) : -ENOENT;
	ns = d ? d->ns : 0;
	pthread_mutex_unlock(&p->lock);
	if (plen < 0)
		return -ENOENT;
	kvfs_path_key(path, (size_t)plen, &key);
	if (tier_stat_fetch(fs->tier, ns, &key, &info) == 0) {
		file = true;
	} else {
		dir_key(path, (size_t)plen, &key);
		if (!tier_l3_has(fs->tier, ns, &key, &a, &has_a))
			return -ENOENT;
	}
	pthread_mutex_lock(&p->lock);
	d = fs_ptree_dir(fs, dir_ino);
	if (!d || d->removed) {
		err = -ENOENT;
	} else if (fs_ptree_find(t, d, name, len)) {
		err = 0; /* made here meanwhile: the lookup finds it */
	} else if (file) {
		err = fs_ptree_mkfile(t, d, name, len, &e);
		if (!err) {
			fs_ptree_key(t, e, &key, info.gen);
			fs_pev_note(t, ns, &key, e->name, e->len);
			/* its writer's, carried by its L3 record (left
			 * there by the promotion); else 0644, the
			 * namespace's owner */
			fs_pattr_to_file(fs_pev_attr_get(t, ns, &key, &a) ?
					 &a : NULL, e);
		}
	} else {
		err = fs_ptree_mkdir(t, d, name, len, &e);
		if (!err && has_a) {
			fs_pattr_to_dir(&a, e->dir);
		} else if (!err) {
			struct fs_inode *nsi = fs_ns_find(p, ns);

			e->dir->mode = S_IFDIR | 0755;
			e->dir->uid = nsi ? nsi->uid : 0;
			e->dir->gid = nsi ? nsi->gid : 0;
			clock_gettime(CLOCK_REALTIME, &e->dir->mtime);
			e->dir->ctime = e->dir->mtime;
		}
		if (!err) {
			e->dir->l3_marked = true;
			dino = e->dir->ino;
		}
	}
	pthread_mutex_unlock(&p->lock);
	if (!err && file)
		fs_pjournal_add_file(fs, ns, &key);
	else if (!err && dino)
		fs_pjournal_add_dir(fs, dino);
	return err;
}

void fs_path_l3_mark(struct fs *fs, uint64_t dir_ino)
{
	char path[FS_PATH_MAX + 2];
	struct tier_pattr *attrs = NULL;
	struct kvfs_key key;
	struct fs_pdir *d, *x;
	uint32_t ns = 0;
	size_t n = 0, k = 0;
	int len = 0;

	if (!tier_l3_on(fs->tier))
		return;
	pthread_mutex_lock(&fs->priv->lock);
	d = fs_ptree_dir(fs, dir_ino);
	if (d && d->self && !d->l3_marked && !d->removed) {
		for (x = d; x && x->self; x = x->self->parent)
			n++;
		attrs = calloc(n, sizeof(*attrs));
	}
	if (attrs) {
		ns = d->ns;
		len = fs_ptree_path(d->self->parent, d->self->name,
				    d->self->len, path);
		/* its ancestors are marked with it, each with its own
		 * attributes (attrs[0]: the top one) */
		k = n;
		for (x = d; x && x->self; x = x->self->parent) {
			x->l3_marked = true;
			fs_pattr_of_dir(x, &attrs[--k]);
		}
	}
	pthread_mutex_unlock(&fs->priv->lock);
	/* "a/", "a/b/", ... "a/b/c/": each directory of the path */
	for (int i = 1; i <= len && k < n; i++) {
		if (i < len && path[i] != '/')
			continue;
		{
			char c = path[i];

			dir_key(path, (size_t)i, &key);
			path[i] = c;
		}
		tier_l3_mark(fs->tier, ns, &key, &attrs[k++]);
	}
	free(attrs);
}

void fs_path_l3_remark_locked(struct fs *fs, const struct fs_pdir *d)
{
	char path[FS_PATH_MAX + 2];
	struct tier_pattr a;
	struct kvfs_key key;
	int len;

	if (!d->l3_marked || !d->self || d->removed || !tier_l3_on(fs->tier))
		return;
	len = fs_ptree_path(d->self->parent, d->self->name, d->self->len,
			    path);
	if (len <= 0)
		return;
	fs_pattr_of_dir(d, &a);
	dir_key(path, (size_t)len, &key);
	tier_l3_mark(fs->tier, d->ns, &key, &a);
}
