/*
 * fs.c - the kvfs file protocol over the libfuse low-level API: the
 * operations table (which fs/ file answers each request), INIT, and the
 * life cycle of a mount's fs (fs_create, fs_destroy). It calls the other
 * files and none calls it.
 *
 * The tree:
 *   /                root: namespaces (directories, fs_ns.c) and .kvfs
 *   /.kvfs/          read-only control files (fs_ctl.c renders them)
 *   /<ns>/<key>      published chunks: 32 lowercase hex digits, mode 0444
 *                    (fs_chunk.c)
 *   /<ns>/.<name>    temporaries: written, then renamed onto a key
 *                    (fs_wr.c, fs_rename.c)
 *
 * Inode numbers and lookup counts: fs_inode.c. Locks and ownership: the
 * top of fs_i.h.
 *
 * Permissions: default_permissions is always on, so the kernel checks
 * modes: a published chunk is 0444, so a non-root caller opening one for
 * writing (or truncating, or setting an xattr on it) gets EACCES from the
 * kernel; root reaches kvfs and gets EPERM.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs_i.h"
#include "fs/fs_pt.h"

static void tier_log_cb(void *arg, const char *msg)
{
	fuse_log(FUSE_LOG_ERR, "kvfs: %s\n", msg);
}

/* ------------------------------------------------------------------ ioctl */

static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd,
		     void *arg, struct fuse_file_info *fi, unsigned flags,
		     const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
	/* closed path files a lookup may name: published first (fs_path.c;
	 * a GET does the same in fs_xfer.c, for path namespaces only) */
	if (cmd == KVFS_IOC_LOOKUP || cmd == KVFS_IOC_GROUP_LOOKUP)
		fs_path_publish_pending(fs_req(req), UINT64_MAX, SIZE_MAX);
	fs_ioctl(fs_req(req), req, ino, cmd, arg, fi, flags, in_buf, in_bufsz,
		 out_bufsz);
}

/* ------------------------------------------------------------ life cycle */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fs *fs = userdata;

	/* libfuse refuses an init() that disagrees with the mount option */
	if (fs->cfg.max_read)
		conn->max_read = fs->cfg.max_read;
	/* ioctls on namespace directories (batched lookups) */
	if (conn->capable & FUSE_CAP_IOCTL_DIR)
		conn->want |= FUSE_CAP_IOCTL_DIR;
	/* O_TRUNC arrives with the open: a published chunk says EPERM
	 * there, a published path file starts a new version (fs_path.c),
	 * which a setattr before the open could not tell from truncate(2) */
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* splice replies measured 4-6x slower for reads here */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
			FUSE_CAP_SPLICE_MOVE);
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	/* max_write stays libfuse's default: the largest request its
	 * buffers take (1 MiB with 3.14); asking for more makes the kernel
	 * refuse our reads of /dev/fuse. */
	conn->max_readahead = 1 << 20;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

/* ------------------------------------------- requests counted by kind */

/* Counts a request on ino (the parent, for lookup and create) when it is
 * inside a namespace: the root and /.kvfs are left out, so that reading
 * the counters does not move them. */
static void count(fuse_req_t req, fuse_ino_t ino, enum fs_req_kind k)
{
	if (ino >= FS_INO_NS_FIRST)
		__atomic_add_fetch(&fs_req(req)->priv->req[k], 1,
				   __ATOMIC_RELAXED);
}

/* A counted operation on an open file or an inode: (req, ino, fi). */
#define COUNTED_FI(name, kind, fn)                                          \
	static void name(fuse_req_t req, fuse_ino_t ino,                    \
			 struct fuse_file_info *fi)                          \
	{                                                                    \
		count(req, ino, kind);                                       \
		fn(req, ino, fi);                                            \
	}

COUNTED_FI(op_getattr, FS_RQ_GETATTR, fs_path_op_getattr)
COUNTED_FI(op_open, FS_RQ_OPEN, fs_path_op_open)
COUNTED_FI(op_flush, FS_RQ_FLUSH, fs_path_op_flush)
COUNTED_FI(op_release, FS_RQ_RELEASE, fs_path_op_release)

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	count(req, parent, FS_RQ_LOOKUP);
	fs_path_op_lookup(req, parent, name);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	count(req, ino, FS_RQ_READ);
	fs_op_read(req, ino, size, off, fi);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	count(req, parent, FS_RQ_CREATE);
	fs_path_op_create(req, parent, name, mode, fi);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	count(req, ino, FS_RQ_WRITE);
	fs_op_write(req, ino, buf, size, off, fi);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = fs_op_forget,
	.forget_multi = fs_op_forget_multi,
	.getattr = op_getattr,
	.setattr = fs_path_op_setattr,
	.mknod = fs_op_mknod,
	.mkdir = fs_path_op_mkdir,
	.unlink = fs_path_op_unlink,
	.rmdir = fs_path_op_rmdir,
	.symlink = fs_op_symlink,
	.link = fs_op_link,
	.rename = fs_path_op_rename,
	.create = op_create,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = fs_op_fsync,
	.fsyncdir = fs_op_fsyncdir,
	.opendir = fs_path_op_opendir,
	.readdir = fs_path_op_readdir,
	.releasedir = fs_op_releasedir,
	.statfs = fs_op_statfs,
	.setxattr = fs_path_op_setxattr,
	.getxattr = fs_path_op_getxattr,
	.listxattr = fs_path_op_listxattr,
	.removexattr = fs_path_op_removexattr,
	.ioctl = op_ioctl,
};

const struct fuse_lowlevel_ops *fs_ops(void)
{
	return &ops;
}

int fs_create(const struct fs_config *fc, struct tier_config *tc,
	      struct fs **out, char *err, size_t errlen)
{
	struct fs *fs = calloc(1, sizeof(*fs));
	struct fs_priv *p = calloc(1, sizeof(*p));
	int r;

	if (!fs || !p) {
		snprintf(err, errlen, "out of memory");
		free(fs);
		free(p);
		return -ENOMEM;
	}
	fs->priv = p;
	fs->cfg = *fc;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->ctl_lock, NULL);
	pthread_mutex_init(&p->qlock, NULL);
	pthread_cond_init(&p->qcond, NULL);
	p->tmp_head.tnext = p->tmp_head.tprev = &p->tmp_head;
	p->fh_head.next = p->fh_head.prev = &p->fh_head;
	p->next_obj = 1;
	p->root_mode = S_IFDIR | 0755;
	p->root_uid = getuid();
	p->root_gid = getgid();
	clock_gettime(CLOCK_REALTIME, &p->mount_time);

	tc->on_gone = fs_on_gone;
	tc->on_gone_arg = fs;
	tc->pattr_get = fs_path_pattr_get; /* path files' modes in L3 */
	tc->pattr_found = fs_path_pattr_found;
	tc->pattr_arg = fs;
	tc->held_elsewhere = fs_pt_held; /* shadows need no readahead */
	tc->held_arg = fs;
	if (!tc->log) {
		tc->log = tier_log_cb;
		tc->log_arg = fs;
	}
	r = fs_events_init(fs, tc);
	if (r) {
		snprintf(err, errlen, "events: %s", strerror(-r));
		goto fail;
	}
	r = tier_create(tc, &fs->tier, err, errlen);
	if (r)
		goto fail;
	r = fs_ioctl_init(fs);
	if (r) {
		snprintf(err, errlen, "ioctl state: %s", strerror(-r));
		tier_destroy(fs->tier);
		goto fail;
	}
	/* before the mount is ready: the first stat sees them */
	fs_nsmeta_load(fs, tc->l2_dir);
	r = fs_path_create(fs, tc->l2_dir);
	if (r) {
		snprintf(err, errlen, "path namespaces: %s", strerror(-r));
		fs_nsmeta_destroy(fs);
		fs_ioctl_destroy(fs);
		tier_destroy(fs->tier);
		goto fail;
	}
	fs_events_start(fs); /* announces what L2 recovery brought back */
	*out = fs;
	return 0;
fail:
	fs_events_destroy(fs);
	pthread_cond_destroy(&p->qcond);
	pthread_mutex_destroy(&p->qlock);
	pthread_mutex_destroy(&p->ctl_lock);
	pthread_mutex_destroy(&p->lock);
	free(p);
	free(fs);
	return r;
}

void fs_destroy(struct fs *fs)
{
	struct htab_node *e, *nx;
	struct fs_priv *p;
	uint64_t i;

	if (!fs)
		return;
	p = fs->priv;
	fs_stop(fs);
	/* handles the kernel never released (stopped by a signal) */
	while (p->fh_head.next != &p->fh_head) {
		struct fs_fh *fh = p->fh_head.next;

		if (fh->kind == FS_FH_WRITER && fh->wr->state == FS_WR_OPEN &&
		    !fh->wr->temp) {
			pthread_rwlock_wrlock(&fh->wr->lock);
			fs_wr_discard(fs, fh->wr, FS_DISCARD_UNMOUNT);
			pthread_rwlock_unlock(&fh->wr->lock);
		}
		fs_fh_free(fs, fh);
	}
	fs_path_destroy(fs); /* closed path files published, names kept */
	fs_ioctl_destroy(fs);
	fs_nsmeta_destroy(fs); /* while the namespace records exist */
	pthread_mutex_lock(&p->lock);
	/* temporaries first (they hold writer references), then inodes */
	while (p->tmp_head.tnext != &p->tmp_head) {
		struct fs_wr *w = p->tmp_head.tnext;

		fs_tmp_unlist(p, w);
		fs_wr_unref_locked(fs, w);
	}
	htab_for_each_safe(&p->itab, i, e, nx)
		fs_inode_free(fs, container_of(e, struct fs_inode, inode));
	fs_path_free(fs);
	pthread_mutex_unlock(&p->lock);
	fs_pt_destroy(fs); /* the shadows, once no inode refers to them */
	fs_events_unmount(fs);
	tier_destroy(fs->tier);
	fs_events_destroy(fs);
	htab_free(&p->itab);
	htab_free(&p->ntab);
	htab_free(&p->tmptab);
	free(p->q);
	fs_ctl_destroy(fs);
	pthread_cond_destroy(&p->qcond);
	pthread_mutex_destroy(&p->qlock);
	pthread_mutex_destroy(&p->lock);
	free(p);
	free(fs);
}
