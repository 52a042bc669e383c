/*
 * fs_ns.c - namespace directories: MKDIR and RMDIR at the root, the
 * mapping of a directory inode to its namespace, permission checks against
 * a namespace's mode (fs_ns_access), and the namespace attributes that
 * fs_nsmeta.c and fs_ctl.c read and restore.
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

/*
 * The supplementary groups of the caller of req, from /proc/PID/status.
 * (Added by the engine-interface work: libfuse 3.14's fuse_req_getgroups
 * runs strstr over a buffer it never NUL-terminates, which ASan reports
 * as a heap overflow.) Returns the count (at most max) or -errno.
 */
static int req_groups(fuse_req_t req, gid_t *list, int max)
{
	char path[64], buf[4096], *s;
	ssize_t len;
	int fd, n = 0;

	snprintf(path, sizeof(path), "/proc/%d/status",
		 (int)fuse_req_ctx(req)->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len < 0)
		return -EIO;
	buf[len] = '\0';
	s = strstr(buf, "\nGroups:");
	if (!s)
		return -EIO;
	s += 8;
	while (n < max) {
		char *end;
		unsigned long g = strtoul(s, &end, 10);

		if (end == s)
			break;
		list[n++] = (gid_t)g;
		s = end;
	}
	return n;
}

int fs_ns_access(struct fs *fs, fuse_req_t req, uint32_t ns, int mask)
{
	struct fs_priv *p = fs->priv;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fs_inode *in;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	struct fs_cred c;
	int n, err;

	err = tier_ns_info(fs->tier, ns, &(struct tier_ns_info){ 0 });
	if (err)
		return err;
	pthread_mutex_lock(&p->lock);
	in = fs_ns_get(fs, ns);
	if (!in) {
		pthread_mutex_unlock(&p->lock);
		return -ENOMEM;
	}
	mode = in->mode;
	uid = in->uid;
	gid = in->gid;
	pthread_mutex_unlock(&p->lock);
	c.uid = ctx->uid;
	c.gid = ctx->gid;
	c.ngroups = 0;
	/* the supplementary groups (from /proc) only when they matter */
	if (c.uid && c.uid != uid && c.gid != gid) {
		n = req_groups(req, c.groups, FS_CRED_GROUPS);
		c.ngroups = n > 0 ? n : 0;
	}
	return fs_cred_may(&c, mode, uid, gid, mask) ? 0 : -EACCES;
}

void fs_cred_of_req(fuse_req_t req, struct fs_cred *c)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	int n = req_groups(req, c->groups, FS_CRED_GROUPS);

	c->uid = ctx->uid;
	c->gid = ctx->gid;
	c->ngroups = n > 0 ? n : 0;
}

bool fs_cred_may(const struct fs_cred *c, mode_t mode, uid_t uid, gid_t gid,
		 int mask)
{
	int perm;

	if (c->uid == 0)
		return true;
	if (c->uid == uid) {
		perm = (mode >> 6) & 7;
	} else {
		bool ingroup = c->gid == gid;

		for (int i = 0; i < c->ngroups && !ingroup; i++)
			ingroup = c->groups[i] == gid;
		perm = ingroup ? (mode >> 3) & 7 : mode & 7;
	}
	return (perm & mask) == mask;
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
