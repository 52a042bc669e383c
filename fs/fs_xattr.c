/*
 * fs_xattr.c - extended attributes, the user.kvfs.* names of
 * include/kvfs.h: a chunk's tier, hits, checksum, lineage and pin; a
 * writer's parent, depth and pin; a namespace's chunk_bytes, dtype,
 * chunk_tokens, names, and (path namespaces) evict and quota_bytes.
 * GETXATTR, LISTXATTR, SETXATTR and REMOVEXATTR.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "fs/fs_i.h"

static const char *const chunk_xattrs[] = {
	KVFS_XATTR_TIER, KVFS_XATTR_HITS, KVFS_XATTR_ATIME, KVFS_XATTR_REFS,
	KVFS_XATTR_STORED_BYTES, KVFS_XATTR_CHECKSUM, KVFS_XATTR_PARENT,
	KVFS_XATTR_DEPTH, KVFS_XATTR_PIN,
};

static const char *const writer_xattrs[] = {
	KVFS_XATTR_PARENT, KVFS_XATTR_DEPTH, KVFS_XATTR_PIN,
};

static const char *const ns_xattrs[] = {
	KVFS_XATTR_CHUNK_BYTES, KVFS_XATTR_DTYPE, KVFS_XATTR_CHUNK_TOKENS,
	KVFS_XATTR_NAMES, KVFS_XATTR_EVICT, KVFS_XATTR_QUOTA_BYTES,
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
struct xtarget;
static int chunk_info(struct fs *fs, const struct xtarget *t,
		      struct tier_info *info);
struct xtarget {
	enum fs_kind kind;
	uint32_t ns;
	struct kvfs_key key;
	uint64_t gen;
	struct fs_wr *wr; /* referenced */
	char dtype[8];
	bool paths;       /* a namespace in path mode */
	bool unlinked;    /* a chunk whose name went: info as last seen */
	struct tier_info info;
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
	t->paths = in->pdir != NULL;
	t->unlinked = in->kind == FS_K_CHUNK &&
		       (in->unlinked || in->superseded);
	t->info = in->info;
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

/* A chunk's info: the engine's, or for a chunk whose name went (unlinked,
 * replaced) while an fd holds it, as last seen (POSIX: an open file keeps
 * its attributes). -ESTALE: the name stands for another chunk now. */
static int chunk_info(struct fs *fs, const struct xtarget *t,
		      struct tier_info *info)
{
	int err = tier_stat(fs->tier, t->ns, &t->key, info);

	if (!err && info->gen != t->gen)
		err = -ESTALE;
	if (err && t->unlinked) {
		*info = t->info;
		err = 0;
	}
	return err;
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
		} else if (!strcmp(name, KVFS_XATTR_CHUNK_TOKENS)) {
			err = tier_ns_info(fs->tier, t.ns, &ni);
			if (!err)
				n = snprintf(val, sizeof(val), "%" PRIu32,
					     ni.chunk_tokens);
		} else if (!strcmp(name, KVFS_XATTR_DTYPE) && t.dtype[0]) {
			n = snprintf(val, sizeof(val), "%s", t.dtype);
		} else if (!strcmp(name, KVFS_XATTR_NAMES)) {
			n = snprintf(val, sizeof(val), "%s",
				     t.paths ? "paths" : "keys");
		} else if (t.paths && (!strcmp(name, KVFS_XATTR_EVICT) ||
				       !strcmp(name, KVFS_XATTR_QUOTA_BYTES))) {
			err = tier_ns_info(fs->tier, t.ns, &ni);
			if (!err && !strcmp(name, KVFS_XATTR_EVICT))
				n = snprintf(val, sizeof(val), "%s",
					     ni.keep ? "never" : "policy");
			else if (!err && ni.keep)
				n = snprintf(val, sizeof(val), "%" PRIu64,
					     ni.quota);
			else if (!err)
				err = -ENODATA;
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
		err = chunk_info(fs, &t, &info);
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
	case FS_K_NS: {
		struct tier_ns_info ni;
		bool keep = t.paths && !tier_ns_info(fs->tier, t.ns, &ni) &&
			    ni.keep;

		for (size_t i = 0; i < ARRAY_SIZE(ns_xattrs); i++) {
			if ((ns_xattrs[i] == ns_xattrs[1] && !t.dtype[0]) ||
			    (ns_xattrs[i] == ns_xattrs[4] && !t.paths) ||
			    (ns_xattrs[i] == ns_xattrs[5] && !keep))
				continue;
			memcpy(buf + len, ns_xattrs[i], strlen(ns_xattrs[i]) + 1);
			len += strlen(ns_xattrs[i]) + 1;
		}
		break;
	}
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
		err = chunk_info(fs, &t, &info);
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

/* user.kvfs.parent's value: a key's 32 hex digits (a trailing newline or
 * NUL allowed, as echo and setfattr give them). */
static int parse_parent(const char *v, size_t len, struct kvfs_key *key)
{
	while (len && (v[len - 1] == '\n' || !v[len - 1]))
		len--;
	return kvfs_key_parse(v, len, key);
}

int fs_xattr_value_check(const char *name, const char *value, size_t size)
{
	struct kvfs_key key;
	char dt[8];
	uint64_t v;
	int err;

	if (!strcmp(name, KVFS_XATTR_CHUNK_BYTES))
		return parse_u64(value, size, &v);
	if (!strcmp(name, KVFS_XATTR_DTYPE))
		return dtype_shuffle(value, size, dt) < 0 ? -EINVAL : 0;
	if (!strcmp(name, KVFS_XATTR_PARENT))
		return parse_parent(value, size, &key);
	if (!strcmp(name, KVFS_XATTR_PIN) || !strcmp(name, KVFS_XATTR_DEPTH)) {
		err = parse_u64(value, size, &v);
		if (!err && v > (strcmp(name, KVFS_XATTR_PIN) ? UINT32_MAX : 1))
			err = -EINVAL;
		return err;
	}
	return -ENOTSUP;
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
		} else if (!strcmp(name, KVFS_XATTR_CHUNK_TOKENS)) {
			/* block_size of the namespace's KV events */
			err = parse_u64(value, size, &v);
			if (!err && v > UINT32_MAX)
				err = -EINVAL;
			if (!err)
				err = tier_ns_set_chunk_tokens(fs->tier, t.ns,
							       (uint32_t)v);
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
		} else if (!strcmp(name, KVFS_XATTR_NAMES)) {
			err = fs_path_names_set(fs, t.ns, value, size);
		} else if (!strcmp(name, KVFS_XATTR_EVICT)) {
			err = fs_path_evict_set(fs, t.ns, value, size);
		} else if (!strcmp(name, KVFS_XATTR_QUOTA_BYTES)) {
			err = parse_u64(value, size, &v);
			if (!err)
				err = fs_path_quota_set(fs, t.ns, v);
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
			err = parse_parent(value, size, &key);
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
