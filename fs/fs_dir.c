/*
 * fs_dir.c - directory listings: OPENDIR takes a snapshot of the root
 * (namespaces and .kvfs), of /.kvfs or of a namespace (its published
 * chunks), READDIR serves it by offset and retakes it at offset 0, and
 * RELEASEDIR frees it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_i.h"

struct fs_dirsnap {
	size_t n;
	struct fs_dirent {
		uint64_t ino;
		mode_t type;
		char name[KVFS_NS_NAME_MAX + 2];
	} e[];
};

static struct fs_dirsnap *snap_alloc(size_t n)
{
	return calloc(1, sizeof(struct fs_dirsnap) + n * sizeof(struct fs_dirent));
}

static void snap_add(struct fs_dirsnap *s, uint64_t ino, mode_t type,
		     const char *name)
{
	struct fs_dirent *d = &s->e[s->n++];

	d->ino = ino;
	d->type = type;
	snprintf(d->name, sizeof(d->name), "%s", name);
}

static int snap_root(struct fs *fs, struct fs_dirsnap **out)
{
	struct fs_priv *p = fs->priv;
	struct fs_dirsnap *s;
	uint32_t *ids;
	long got = fs_ns_ids(fs, &ids);

	if (got < 0)
		return (int)got;
	s = snap_alloc((size_t)got + 3);
	if (!s) {
		free(ids);
		return -ENOMEM;
	}
	snap_add(s, FUSE_ROOT_ID, S_IFDIR, ".");
	snap_add(s, FUSE_ROOT_ID, S_IFDIR, "..");
	snap_add(s, FS_INO_KVFS, S_IFDIR, KVFS_CTL_DIR);
	for (long i = 0; i < got; i++) {
		struct tier_ns_info info;
		struct fs_inode *in;

		if (tier_ns_info(fs->tier, ids[i], &info))
			continue;
		pthread_mutex_lock(&p->lock);
		in = fs_ns_get(fs, ids[i]);
		if (in)
			snap_add(s, in->ino, S_IFDIR, info.name);
		pthread_mutex_unlock(&p->lock);
	}
	free(ids);
	*out = s;
	return 0;
}

static int snap_ns(struct fs *fs, uint64_t ino, uint32_t ns,
		   struct fs_dirsnap **out)
{
	struct tier_dirent *d;
	struct fs_dirsnap *s;
	size_t n;
	int err = tier_ns_snapshot(fs->tier, ns, &d, &n);

	if (err)
		return err;
	s = snap_alloc(n + 2);
	if (!s) {
		free(d);
		return -ENOMEM;
	}
	snap_add(s, ino, S_IFDIR, ".");
	snap_add(s, FUSE_ROOT_ID, S_IFDIR, "..");
	for (size_t i = 0; i < n; i++) {
		char hex[KVFS_KEY_HEX_LEN + 1];

		kvfs_key_hex(&d[i].key, hex);
		snap_add(s, FS_INO_CHUNK + d[i].gen, S_IFREG, hex);
	}
	free(d);
	*out = s;
	return 0;
}

static int snap_ctl(struct fs_dirsnap **out)
{
	struct fs_dirsnap *s = snap_alloc(2 + FS_CTL_NFILES);

	if (!s)
		return -ENOMEM;
	snap_add(s, FS_INO_KVFS, S_IFDIR, ".");
	snap_add(s, FUSE_ROOT_ID, S_IFDIR, "..");
	for (int i = 0; i < FS_CTL_NFILES; i++)
		snap_add(s, FS_INO_CTL_FIRST + i, S_IFREG, fs_ctl_names[i]);
	*out = s;
	return 0;
}

/* The listing of directory fh->ino as of now (root, .kvfs or a
 * namespace). */
static int snap_take(struct fs *fs, struct fs_fh *fh,
		     struct fs_dirsnap **out)
{
	if (fh->ino == FUSE_ROOT_ID)
		return snap_root(fs, out);
	if (fh->ino == FS_INO_KVFS)
		return snap_ctl(out);
	return snap_ns(fs, fh->ino, fh->ns, out);
}

void fs_op_opendir(fuse_req_t req, fuse_ino_t ino,
		   struct fuse_file_info *fi)
{
	struct fs *fs = fs_req(req);
	struct fs_fh *fh;
	uint32_t ns = 0;
	int err = 0;

	if (ino == FUSE_ROOT_ID) {
		fh = fs_fh_new(req, FS_FH_ROOT, ino);
		if (fh)
			err = snap_root(fs, &fh->snap);
	} else if (ino == FS_INO_KVFS) {
		fh = fs_fh_new(req, FS_FH_CTL, ino);
		if (fh)
			err = snap_ctl(&fh->snap);
	} else {
		err = fs_ns_of(fs, ino, &ns);
		if (err == -EPERM)
			err = -ENOTDIR;
		if (err) {
			fuse_reply_err(req, -err);
			return;
		}
		fh = fs_fh_new(req, FS_FH_NS, ino);
		if (fh) {
			fh->ns = ns;
			err = snap_ns(fs, ino, ns, &fh->snap);
		}
	}
	if (!fh) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (err) {
		fs_fh_free(fs, fh);
		fuse_reply_err(req, -err);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)fh;
	if (fuse_reply_open(req, fi))
		fs_fh_free(fs, fh);
}

void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct fs_fh *fh = fs_fh_of(fi);
	struct fs_dirsnap *s;
	char *buf = malloc(size);
	size_t used = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/*
	 * opendir took the snapshot; offset 0 again (rewinddir, or a reader
	 * polling a namespace through one fd) takes a fresh one, so chunks
	 * published or evicted since show up or vanish. The kernel does
	 * not run two readdirs of one open directory at once.
	 */
	if (off <= 0 && fh->snap_read) {
		struct fs_dirsnap *fresh = NULL;
		int err = snap_take(fs_req(req), fh, &fresh);

		if (err) {
			free(buf);
			fuse_reply_err(req, -err);
			return;
		}
		free(fh->snap);
		fh->snap = fresh;
	}
	fh->snap_read = true;
	s = fh->snap;
	for (size_t i = off < 0 ? 0 : (size_t)off; s && i < s->n; i++) {
		struct stat st = { .st_ino = s->e[i].ino,
				   .st_mode = s->e[i].type };
		size_t n = fuse_add_direntry(req, buf + used, size - used,
					     s->e[i].name, &st, (off_t)i + 1);

		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi)
{
	fs_fh_free(fs_req(req), fs_fh_of(fi));
	fuse_reply_err(req, 0);
}
