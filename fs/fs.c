/*
 * fs.c - the kvfs file protocol over the libfuse low-level API.
 *
 * The tree:
 *   /                root: namespaces (directories) and .kvfs
 *   /.kvfs/          read-only control files (fs_ctl.c renders them)
 *   /<ns>/<key>      published chunks: 32 lowercase hex digits, mode 0444
 *   /<ns>/.<name>    temporaries: written, then renamed onto a key
 *
 * Inode numbers are never reused within a mount. A published chunk's inode
 * number is FS_INO_CHUNK + its publication number (tier_info.gen, unique per
 * engine), so a key that is evicted and written again gets a new inode and
 * the kernel can never serve the old bytes under the new file; every other
 * object (namespace, writer, temporary) takes a number from a counter with
 * the top bit set. Records follow the kernel's lookup count (forget and
 * forget_multi); namespaces live as long as they exist or are looked up.
 *
 * Publication: a keyed chunk (created under its key) is published by the
 * first FLUSH (close) from its writer's process after bytes arrived, so
 * close() reports EEXIST, EMSGSIZE (chunk_bytes), ENOSPC or EFBIG (a write
 * failed: the chunk is never published with a hole); otherwise at its last
 * close. A temporary ('.' name) is published by rename(2) onto a key. A
 * writer killed by a signal publishes nothing (fs_op_flush). Limitation: a
 * writer that dup()s its fd, writes, closes one copy and writes through
 * the other gets EPERM for the late writes (the first close published).
 *
 * Caching: chunk reads use direct_io (cache=direct, the default): each
 * read is answered from the pinned arena bytes with one copy, and the
 * arena is not duplicated in the page cache. Then mmap(MAP_PRIVATE,
 * PROT_READ) works (the kernel reads through the daemon) and
 * mmap(MAP_SHARED) fails with ENODEV, as for any direct_io file.
 * cache=page uses the kernel page cache with keep_cache (repeated reads at
 * memory speed, MAP_SHARED works); safe because chunks are immutable and a
 * new publication is a new inode.
 *
 * Permissions: default_permissions is always on, so the kernel checks
 * modes: a published chunk is 0444, so a non-root caller opening one for
 * writing (or truncating, or setting an xattr on it) gets EACCES from the
 * kernel; root reaches kvfs and gets EPERM.
 *
 * Locks: fs_priv.lock protects both inode tables, the temporary table and
 * list, the namespace records and every fs_inode field; fs_wr.lock
 * (rwlock: writes and reads of the chunk being written share it, publish
 * and abort take it exclusively) protects fs_wr.w and fs_wr.state;
 * fs_priv.qlock protects the invalidation queue only (a leaf: taken inside
 * the engine's fs_on_gone callback). Order: fs_wr.lock -> fs_priv.lock ->
 * tier.lock; fs_priv.qlock is taken with nothing else held, or on its own
 * inside tier calls. Kernel notifications are sent only from the
 * background thread, never from a request handler (the kernel would wait
 * on the very request being handled).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs_i.h"
#include "hash/htab.h"

const char *const fs_ctl_names[FS_CTL_NFILES] = {
	[FS_CTL_STATS] = "stats",
	[FS_CTL_METRICS] = "metrics",
	[FS_CTL_CONFIG] = "config",
	[FS_CTL_VERSION] = "version",
};

void fs_log(struct fs *fs, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fuse_log(FUSE_LOG_ERR, "kvfs: %s\n", msg);
}

static void tier_log_cb(void *arg, const char *msg)
{
	fuse_log(FUSE_LOG_ERR, "kvfs: %s\n", msg);
}

/* ------------------------------------------------------------ hash tables */

/* ----------------------------------------------------------------- inodes */

/* ---------------------------------------------------------------- writers */

/* ------------------------------------------------------------- attributes */

/* ------------------------------------------------------------------ names */

/* --------------------------------------------------------------- requests */

/* --------------------------------------------------------------- namespaces */

/* ------------------------------------------------------------------- chunks */

/* ---------------------------------------------------------------- readdir */

/* ----------------------------------------------------------------- xattrs */

static const char *const chunk_xattrs[] = {
	KVFS_XATTR_TIER, KVFS_XATTR_HITS, KVFS_XATTR_ATIME, KVFS_XATTR_REFS,
	KVFS_XATTR_STORED_BYTES, KVFS_XATTR_CHECKSUM, KVFS_XATTR_PARENT,
	KVFS_XATTR_DEPTH, KVFS_XATTR_PIN,
};
static const char *const writer_xattrs[] = {
	KVFS_XATTR_PARENT, KVFS_XATTR_DEPTH, KVFS_XATTR_PIN,
};
static const char *const ns_xattrs[] = {
	KVFS_XATTR_CHUNK_BYTES, KVFS_XATTR_DTYPE,
};

static bool in_list(const char *name, const char *const *l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(name, l[i]))
			return true;
	return false;
}

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* What an inode is, for xattrs: a snapshot taken under the lock. */
struct xtarget {
	enum fs_kind kind;
	uint32_t ns;
	struct kvfs_key key;
	uint64_t gen;
	struct fs_wr *wr; /* referenced */
	char dtype[8];
};

static int xtarget_get(struct fs *fs, fuse_ino_t ino, struct xtarget *t)
{
	struct fs_priv *p = fs->priv;
	struct fs_inode *in;

	memset(t, 0, sizeof(*t));
	if (ino < FS_INO_CHUNK)
		return -ENODATA; /* root and .kvfs carry no kvfs xattrs */
	pthread_mutex_lock(&p->lock);
	in = fs_ino_find(p, ino);
	if (!in) {
		pthread_mutex_unlock(&p->lock);
		return -ENOENT;
	}
	t->kind = in->kind;
	t->ns = in->ns;
	t->key = in->key;
	t->gen = in->gen;
	memcpy(t->dtype, in->dtype, sizeof(t->dtype));
	if (in->kind == FS_K_WRITER) {
		t->wr = in->wr;
		t->wr->refs++;
	}
	pthread_mutex_unlock(&p->lock);
	return 0;
}

static void xtarget_put(struct fs *fs, struct xtarget *t)
{
	if (t->wr)
		fs_wr_unref(fs, t->wr);
}

static int parse_u64(const char *v, size_t len, uint64_t *out)
{
	char buf[32], *end;

	while (len && (v[len - 1] == '\n' || v[len - 1] == '\0'))
		len--;
	if (!len || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, v, len);
	buf[len] = '\0';
	if (buf[0] < '0' || buf[0] > '9')
		return -EINVAL;
	errno = 0;
	*out = strtoull(buf, &end, 10);
	if (errno || *end)
		return -EINVAL;
	return 0;
}

static void reply_xattr_value(fuse_req_t req, const char *val, size_t len,
			      size_t size)
{
	if (!size)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len);
}

void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct fs *fs = fs_req(req);
	struct xtarget t;
	struct tier_info info;
	struct tier_ns_info ni;
	char val[64];
	int err, n = -1;

	err = xtarget_get(fs, ino, &t);
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	switch (t.kind) {
	case FS_K_NS:
		if (!strcmp(name, KVFS_XATTR_CHUNK_BYTES)) {
			err = tier_ns_info(fs->tier, t.ns, &ni);
			if (!err)
				n = snprintf(val, sizeof(val), "%" PRIu64,
					     ni.chunk_bytes);
		} else if (!strcmp(name, KVFS_XATTR_DTYPE) && t.dtype[0]) {
			n = snprintf(val, sizeof(val), "%s", t.dtype);
		} else {
			err = -ENODATA;
		}
		break;
	case FS_K_WRITER: {
		struct fs_wr *w = t.wr;

		pthread_mutex_lock(&fs->priv->lock);
		if (!strcmp(name, KVFS_XATTR_PARENT) && w->has_parent) {
			kvfs_key_hex(&w->parent, val);
			n = KVFS_KEY_HEX_LEN;
		} else if (!strcmp(name, KVFS_XATTR_DEPTH) && w->depth) {
			n = snprintf(val, sizeof(val), "%u", w->depth);
		} else if (!strcmp(name, KVFS_XATTR_PIN)) {
			n = snprintf(val, sizeof(val), "%d", w->want_pin);
		} else {
			err = -ENODATA;
		}
		pthread_mutex_unlock(&fs->priv->lock);
		break;
	}
	case FS_K_CHUNK:
		if (!in_list(name, chunk_xattrs, ARRAY_SIZE(chunk_xattrs))) {
			err = -ENODATA;
			break;
		}
		err = tier_stat(fs->tier, t.ns, &t.key, &info);
		if (!err && info.gen != t.gen)
			err = -ESTALE;
		if (err)
			break;
		if (!strcmp(name, KVFS_XATTR_TIER))
			n = snprintf(val, sizeof(val), "%s",
				     info.where == TIER_L2 ? "l2" : "l1");
		else if (!strcmp(name, KVFS_XATTR_HITS))
			n = snprintf(val, sizeof(val), "%" PRIu64, info.hits);
		else if (!strcmp(name, KVFS_XATTR_ATIME))
			n = snprintf(val, sizeof(val), "%" PRIu64,
				     info.atime_ns);
		else if (!strcmp(name, KVFS_XATTR_REFS))
			n = snprintf(val, sizeof(val), "%u", info.refs);
		else if (!strcmp(name, KVFS_XATTR_STORED_BYTES))
			n = snprintf(val, sizeof(val), "%" PRIu64,
				     info.stored_bytes);
		else if (!strcmp(name, KVFS_XATTR_CHECKSUM) &&
			 (info.checksum_known ||
			  tier_checksum(fs->tier, t.ns, &t.key, t.gen,
					&info.checksum) == 0))
			n = snprintf(val, sizeof(val), "%016" PRIx64,
				     info.checksum);
		else if (!strcmp(name, KVFS_XATTR_PARENT) && info.has_parent) {
			kvfs_key_hex(&info.parent, val);
			n = KVFS_KEY_HEX_LEN;
		} else if (!strcmp(name, KVFS_XATTR_DEPTH))
			n = snprintf(val, sizeof(val), "%u", info.depth);
		else if (!strcmp(name, KVFS_XATTR_PIN))
			n = snprintf(val, sizeof(val), "%d", info.user_pin);
		else
			err = -ENODATA;
		break;
	}
	xtarget_put(fs, &t);
	if (err)
		fuse_reply_err(req, -err);
	else
		reply_xattr_value(req, val, (size_t)n, size);
}

void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct fs *fs = fs_req(req);
	struct tier_info info;
	struct xtarget t;
	char buf[512];
	size_t len = 0;
	int err;

	err = xtarget_get(fs, ino, &t);
	if (err == -ENODATA) {
		reply_xattr_value(req, buf, 0, size);
		return;
	}
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	/* only the names a getxattr would answer */
	switch (t.kind) {
	case FS_K_NS:
		for (size_t i = 0; i < ARRAY_SIZE(ns_xattrs); i++) {
			if (ns_xattrs[i] == ns_xattrs[1] && !t.dtype[0])
				continue;
			memcpy(buf + len, ns_xattrs[i], strlen(ns_xattrs[i]) + 1);
			len += strlen(ns_xattrs[i]) + 1;
		}
		break;
	case FS_K_WRITER:
		pthread_mutex_lock(&fs->priv->lock);
		for (size_t i = 0; i < ARRAY_SIZE(writer_xattrs); i++) {
			const char *x = writer_xattrs[i];

			if ((!strcmp(x, KVFS_XATTR_PARENT) && !t.wr->has_parent) ||
			    (!strcmp(x, KVFS_XATTR_DEPTH) && !t.wr->depth))
				continue;
			memcpy(buf + len, x, strlen(x) + 1);
			len += strlen(x) + 1;
		}
		pthread_mutex_unlock(&fs->priv->lock);
		break;
	case FS_K_CHUNK:
		err = tier_stat(fs->tier, t.ns, &t.key, &info);
		if (!err && info.gen != t.gen)
			err = -ESTALE;
		for (size_t i = 0; !err && i < ARRAY_SIZE(chunk_xattrs); i++) {
			const char *x = chunk_xattrs[i];

			if (!strcmp(x, KVFS_XATTR_PARENT) && !info.has_parent)
				continue;
			memcpy(buf + len, x, strlen(x) + 1);
			len += strlen(x) + 1;
		}
		break;
	}
	xtarget_put(fs, &t);
	if (err)
		fuse_reply_err(req, -err);
	else
		reply_xattr_value(req, buf, len, size);
}

static int dtype_shuffle(const char *v, size_t len, char out[8])
{
	static const struct { const char *name; int shuffle; } t[] = {
		{ "bf16", 2 }, { "fp16", 2 }, { "fp32", 4 }, { "fp8", 0 },
	};

	while (len && (v[len - 1] == '\n' || v[len - 1] == '\0'))
		len--;
	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		if (len == strlen(t[i].name) && !memcmp(v, t[i].name, len)) {
			snprintf(out, 8, "%s", t[i].name);
			return t[i].shuffle;
		}
	}
	return -EINVAL;
}

/*
 * Unknown names: ENOTSUP on set (kvfs stores no free-form xattrs), ENODATA
 * on get and remove. Known read-only names: EPERM on set.
 */
void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct fs *fs = fs_req(req);
	struct fs_priv *p = fs->priv;
	struct xtarget t;
	struct kvfs_key key;
	uint64_t v;
	int err;

	err = xtarget_get(fs, ino, &t);
	if (err) {
		fuse_reply_err(req, err == -ENODATA ? ENOTSUP : -err);
		return;
	}
	switch (t.kind) {
	case FS_K_NS:
		if (!strcmp(name, KVFS_XATTR_CHUNK_BYTES)) {
			err = parse_u64(value, size, &v);
			if (!err)
				err = tier_ns_set_chunk_bytes(fs->tier, t.ns, v);
		} else if (!strcmp(name, KVFS_XATTR_DTYPE)) {
			char dt[8];
			int sh = dtype_shuffle(value, size, dt);

			err = sh < 0 ? sh : tier_ns_set_shuffle(fs->tier, t.ns,
								sh);
			if (!err) {
				struct fs_inode *in;

				pthread_mutex_lock(&p->lock);
				in = fs_ns_find(p, t.ns);
				if (in)
					memcpy(in->dtype, dt, sizeof(dt));
				pthread_mutex_unlock(&p->lock);
			}
		} else {
			err = -ENOTSUP;
		}
		if (!err)
			fs_nsmeta_save(fs);
		break;
	case FS_K_WRITER: {
		struct fs_wr *w = t.wr;
		bool is_parent = !strcmp(name, KVFS_XATTR_PARENT);
		bool is_depth = !strcmp(name, KVFS_XATTR_DEPTH);

		if (!strcmp(name, KVFS_XATTR_PIN)) {
			err = parse_u64(value, size, &v);
			if (!err && v > 1)
				err = -EINVAL;
			if (!err) {
				pthread_mutex_lock(&p->lock);
				w->want_pin = v;
				pthread_mutex_unlock(&p->lock);
			}
			break;
		}
		if (!is_parent && !is_depth) {
			err = in_list(name, chunk_xattrs,
				      ARRAY_SIZE(chunk_xattrs)) ? -EPERM :
								  -ENOTSUP;
			break;
		}
		if (is_parent) {
			size_t l = size;

			while (l && (value[l - 1] == '\n' || !value[l - 1]))
				l--;
			err = kvfs_key_parse(value, l, &key);
		} else {
			err = parse_u64(value, size, &v);
			if (!err && v > UINT32_MAX)
				err = -EINVAL;
		}
		if (err)
			break;
		pthread_rwlock_rdlock(&w->lock);
		if (!w->w) {
			err = -EPERM; /* published: parent/depth are fixed */
		} else {
			pthread_mutex_lock(&p->lock);
			if (is_parent) {
				w->has_parent = true;
				w->parent = key;
			} else {
				w->depth = (uint32_t)v;
			}
			key = w->parent;
			v = w->depth;
			is_parent = w->has_parent;
			pthread_mutex_unlock(&p->lock);
			err = tier_wr_set_parent(fs->tier, w->w,
						 is_parent ? &key : NULL,
						 (uint32_t)v);
		}
		pthread_rwlock_unlock(&w->lock);
		break;
	}
	case FS_K_CHUNK:
		if (!strcmp(name, KVFS_XATTR_PIN)) {
			struct tier_info info;

			err = parse_u64(value, size, &v);
			if (!err && v > 1)
				err = -EINVAL;
			if (!err)
				err = tier_stat(fs->tier, t.ns, &t.key, &info);
			if (!err && info.gen != t.gen)
				err = -ESTALE;
			if (!err)
				err = tier_set_user_pin(fs->tier, t.ns, &t.key,
							v == 1);
		} else {
			err = in_list(name, chunk_xattrs,
				      ARRAY_SIZE(chunk_xattrs)) ? -EPERM :
								  -ENOTSUP;
		}
		break;
	}
	xtarget_put(fs, &t);
	fuse_reply_err(req, -err);
}

void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct fs *fs = fs_req(req);
	struct xtarget t;
	int err = xtarget_get(fs, ino, &t);

	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	if (t.kind == FS_K_CHUNK && !strcmp(name, KVFS_XATTR_PIN))
		err = tier_set_user_pin(fs->tier, t.ns, &t.key, false);
	else if ((t.kind == FS_K_CHUNK &&
		  in_list(name, chunk_xattrs, ARRAY_SIZE(chunk_xattrs))) ||
		 (t.kind == FS_K_NS &&
		  in_list(name, ns_xattrs, ARRAY_SIZE(ns_xattrs))) ||
		 (t.kind == FS_K_WRITER &&
		  in_list(name, writer_xattrs, ARRAY_SIZE(writer_xattrs))))
		err = -EPERM;
	else
		err = -ENODATA;
	xtarget_put(fs, &t);
	fuse_reply_err(req, -err);
}

/* ------------------------------------------------------------------ ioctl */

static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd,
		     void *arg, struct fuse_file_info *fi, unsigned flags,
		     const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
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
	/* O_TRUNC must arrive as setattr, where published chunks say EPERM */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
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

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = fs_op_lookup,
	.forget = fs_op_forget,
	.forget_multi = fs_op_forget_multi,
	.getattr = fs_op_getattr,
	.setattr = fs_op_setattr,
	.mknod = fs_op_mknod,
	.mkdir = fs_op_mkdir,
	.unlink = fs_op_unlink,
	.rmdir = fs_op_rmdir,
	.symlink = fs_op_symlink,
	.link = fs_op_link,
	.rename = fs_op_rename,
	.create = fs_op_create,
	.open = fs_op_open,
	.read = fs_op_read,
	.write = fs_op_write,
	.flush = fs_op_flush,
	.release = fs_op_release,
	.fsync = fs_op_fsync,
	.opendir = fs_op_opendir,
	.readdir = fs_op_readdir,
	.releasedir = fs_op_releasedir,
	.statfs = fs_op_statfs,
	.setxattr = fs_op_setxattr,
	.getxattr = fs_op_getxattr,
	.listxattr = fs_op_listxattr,
	.removexattr = fs_op_removexattr,
	.ioctl = op_ioctl,
};

const struct fuse_lowlevel_ops *fs_ops(void)
{
	return &ops;
}

/* Called by the engine, maybe inside one of our tier_* calls: queue only. */
/* Queues a kernel invalidation of (ns, key) for the background thread. */
void fs_queue_inval(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
			bool published)
{
	struct fs_priv *p = fs->priv;

	pthread_mutex_lock(&p->qlock);
	if (!p->stop) {
		if (p->qlen == p->qcap) {
			size_t cap = p->qcap ? p->qcap * 2 : 256;
			struct fs_gone *q = realloc(p->q, cap * sizeof(*q));

			if (q) {
				p->q = q;
				p->qcap = cap;
			}
		}
		/* without memory the entry just times out (FS_TTL) */
		if (p->qlen < p->qcap) {
			p->q[p->qlen].ns = ns;
			p->q[p->qlen].published = published;
			p->q[p->qlen].key = *key;
			p->qlen++;
			pthread_cond_signal(&p->qcond);
		}
	}
	pthread_mutex_unlock(&p->qlock);
}

void fs_on_gone(void *arg, uint32_t ns, const struct kvfs_key *key,
		    enum tier_gone_reason why)
{
	fs_queue_inval(arg, ns, key, false);
}

static void invalidate(struct fs *fs, const struct fs_gone *g)
{
	struct fs_priv *p = fs->priv;
	char hex[KVFS_KEY_HEX_LEN + 1];
	struct fs_inode *nsi, *in;
	uint64_t nsino = 0, ino = 0;

	pthread_mutex_lock(&p->lock);
	nsi = fs_ns_find(p, g->ns);
	if (nsi)
		nsino = nsi->ino;
	in = g->published ? NULL : fs_chunk_find(p, g->ns, &g->key);
	if (in)
		ino = in->ino;
	pthread_mutex_unlock(&p->lock);
	kvfs_key_hex(&g->key, hex);
	if (nsino)
		fuse_lowlevel_notify_inval_entry(fs->se, nsino, hex,
						 KVFS_KEY_HEX_LEN);
	if (ino)
		fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
	__atomic_add_fetch(&p->invalidations, 1, __ATOMIC_RELAXED);
}

/* The background thread: kernel invalidations for chunks the engine let go
 * of, and expiry of abandoned temporaries. */
static void *bg_main(void *arg)
{
	struct fs *fs = arg;
	struct fs_priv *p = fs->priv;
	struct fs_gone *batch = NULL;
	size_t cap = 0;
	uint64_t last_sweep = fs_now_ms();

	pthread_mutex_lock(&p->qlock);
	while (!p->stop) {
		size_t n;

		if (!p->qlen) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 250 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&p->qcond, &p->qlock, &ts);
		}
		n = p->qlen;
		if (n > cap) {
			struct fs_gone *b = realloc(batch, n * sizeof(*b));

			if (b) {
				batch = b;
				cap = n;
			} else {
				n = cap;
			}
		}
		if (n) {
			memcpy(batch, p->q, n * sizeof(*batch));
			memmove(p->q, p->q + n,
				(p->qlen - n) * sizeof(*batch));
			p->qlen -= n;
		}
		pthread_mutex_unlock(&p->qlock);
		for (size_t i = 0; i < n; i++)
			invalidate(fs, &batch[i]);
		if (fs_now_ms() - last_sweep >= 250) {
			fs_tmp_expire(fs);
			last_sweep = fs_now_ms();
		}
		pthread_mutex_lock(&p->qlock);
	}
	pthread_mutex_unlock(&p->qlock);
	free(batch);
	return NULL;
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
	if (!tc->log) {
		tc->log = tier_log_cb;
		tc->log_arg = fs;
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
	*out = fs;
	return 0;
fail:
	pthread_cond_destroy(&p->qcond);
	pthread_mutex_destroy(&p->qlock);
	pthread_mutex_destroy(&p->lock);
	free(p);
	free(fs);
	return r;
}

int fs_start(struct fs *fs, struct fuse_session *se)
{
	struct fs_priv *p = fs->priv;
	int r;

	fs->se = se;
	r = pthread_create(&p->thread, NULL, bg_main, fs);
	if (r)
		return -r;
	p->thread_started = true;
	return 0;
}

void fs_stop(struct fs *fs)
{
	struct fs_priv *p = fs->priv;

	pthread_mutex_lock(&p->qlock);
	p->stop = true;
	pthread_cond_signal(&p->qcond);
	pthread_mutex_unlock(&p->qlock);
	if (p->thread_started) {
		pthread_join(p->thread, NULL);
		p->thread_started = false;
	}
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
			fs_wr_discard(fs, fh->wr);
			pthread_rwlock_unlock(&fh->wr->lock);
		}
		fs_fh_free(fs, fh);
	}
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
	pthread_mutex_unlock(&p->lock);
	tier_destroy(fs->tier);
	htab_free(&p->itab);
	htab_free(&p->ntab);
	htab_free(&p->tmptab);
	free(p->q);
	pthread_cond_destroy(&p->qcond);
	pthread_mutex_destroy(&p->qlock);
	pthread_mutex_destroy(&p->lock);
	free(p);
	free(fs);
}

/* ------------------------------------------------------- stats for fs_ctl */

void fs_counters(struct fs *fs, struct fs_counters *c)
{
	struct fs_priv *p = fs->priv;

	pthread_mutex_lock(&p->lock);
	c->inodes = p->ninodes;
	c->temporaries = p->ntemps;
	c->tmp_expired = p->tmp_expired;
	pthread_mutex_unlock(&p->lock);
	c->opens = __atomic_load_n(&p->opens, __ATOMIC_RELAXED);
	c->writers_killed = __atomic_load_n(&p->writers_killed,
					    __ATOMIC_RELAXED);
	c->late_publishes = __atomic_load_n(&p->late_publishes, __ATOMIC_RELAXED);
	c->invalidations = __atomic_load_n(&p->invalidations,
					   __ATOMIC_RELAXED);
	c->stale = __atomic_load_n(&p->stale, __ATOMIC_RELAXED);
}
