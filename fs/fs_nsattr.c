/*
 * fs_nsattr.c - the attributes of namespaces (and of the root directory)
 * as fs_nsmeta.c saves and restores them and the metrics show them
 * (fs_nsattr_get, fs_nsattr_set), and the list of namespace ids. Calls
 * fs_itab.c and the engine only.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs_i.h"

/* fs_i.h */
long fs_ns_ids(struct fs *fs, uint32_t **out)
{
	size_t cap = 64;
	uint32_t *ids = NULL;
	long n;

	for (;;) {
		uint32_t *a = realloc(ids, cap * sizeof(*a));

		if (!a) {
			free(ids);
			return -ENOMEM;
		}
		ids = a;
		n = tier_ns_list(fs->tier, ids, cap);
		if (n < 0 || (size_t)n <= cap)
			break;
		cap = (size_t)n + 16; /* created meanwhile */
	}
	if (n < 0)
		free(ids);
	else
		*out = ids;
	return n;
}

int fs_nsattr_get(struct fs *fs, uint32_t ns, struct fs_nsattr *a)
{
	struct fs_priv *p = fs->priv;
	struct fs_inode *in = NULL;
	int err = 0;

	memset(a, 0, sizeof(*a));
	pthread_mutex_lock(&p->lock);
	if (!ns) {
		a->mode = p->root_mode;
		a->uid = p->root_uid;
		a->gid = p->root_gid;
		a->mtime = a->ctime = p->mount_time;
	} else if ((in = fs_ns_find(p, ns)) && !in->removed) {
		a->mode = in->mode;
		a->uid = in->uid;
		a->gid = in->gid;
		memcpy(a->dtype, in->dtype, sizeof(a->dtype));
		a->mtime = in->mtime;
		a->ctime = in->ctime;
	} else {
		err = -ENOENT;
	}
	pthread_mutex_unlock(&p->lock);
	return err;
}

int fs_nsattr_set(struct fs *fs, uint32_t ns, const struct fs_nsattr *a)
{
	struct fs_priv *p = fs->priv;
	struct fs_inode *in = NULL;
	int err = 0;

	pthread_mutex_lock(&p->lock);
	if (!ns) {
		p->root_mode = S_IFDIR | (a->mode & 07777);
		p->root_uid = a->uid;
		p->root_gid = a->gid;
	} else if ((in = fs_ns_get(fs, ns))) {
		in->mode = S_IFDIR | (a->mode & 07777);
		in->uid = a->uid;
		in->gid = a->gid;
		memcpy(in->dtype, a->dtype, sizeof(in->dtype));
		in->dtype[sizeof(in->dtype) - 1] = '\0';
		in->mtime = a->mtime;
		in->ctime = a->ctime;
	} else {
		err = -ENOMEM;
	}
	pthread_mutex_unlock(&p->lock);
	return err;
}
