/*
 * fs_itab.c - the inode table itself: records of what the kernel knows by
 * number (chunks, namespaces, writers) created, found by number, by chunk
 * key and by namespace id, and freed; and the checks of names. The bottom
 * of fs/ with fs_log.c and fs_invq.c: it calls only fs_wr.c (a writer
 * inode's reference) and the path hooks (fs_paths.c). LOOKUP and FORGET
 * are in fs_inode.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs_i.h"
#include "fs/fs_pt.h"

static uint64_t hash_ino(uint64_t ino)
{
	return htab_hash_u64(FS_SALT_INO, ino);
}

uint64_t fs_chunk_hash(uint32_t ns, const struct kvfs_key *key)
{
	return htab_hash(FS_SALT_CHUNK | ns, key->b, sizeof(key->b));
}

static uint64_t hash_ns(uint32_t ns)
{
	return htab_hash_u64(FS_SALT_NS, ns);
}

struct fs_inode *fs_ino_find(struct fs_priv *p, uint64_t ino)
{
	uint64_t h = hash_ino(ino);
	struct htab_node *e;

	htab_for_each_hash(&p->itab, h, e) {
		struct fs_inode *in = container_of(e, struct fs_inode, inode);

		if (in->ino == ino)
			return in;
	}
	return NULL;
}

struct fs_inode *fs_chunk_find(struct fs_priv *p, uint32_t ns,
			       const struct kvfs_key *key)
{
	uint64_t h = fs_chunk_hash(ns, key);
	struct htab_node *e;

	htab_for_each_hash(&p->ntab, h, e) {
		struct fs_inode *in = container_of(e, struct fs_inode, nnode);

		if (in->kind == FS_K_CHUNK && in->ns == ns &&
		    !memcmp(&in->key, key, sizeof(*key)))
			return in;
	}
	return NULL;
}

struct fs_inode *fs_ns_find(struct fs_priv *p, uint32_t ns)
{
	uint64_t h = hash_ns(ns);
	struct htab_node *e;

	htab_for_each_hash(&p->ntab, h, e) {
		struct fs_inode *in = container_of(e, struct fs_inode, nnode);

		if (in->kind == FS_K_NS && in->ns == ns)
			return in;
	}
	return NULL;
}

struct fs_inode *fs_inode_new(struct fs_priv *p, enum fs_kind kind,
			      uint64_t ino)
{
	struct fs_inode *in = calloc(1, sizeof(*in));

	if (!in)
		return NULL;
	in->kind = kind;
	in->ino = ino;
	if (htab_add(&p->itab, &in->inode, hash_ino(ino))) {
		free(in);
		return NULL;
	}
	p->ninodes++;
	return in;
}

void fs_inode_free(struct fs *fs, struct fs_inode *in)
{
	struct fs_priv *p = fs->priv;

	htab_del(&p->itab, &in->inode);
	if (in->named)
		htab_del(&p->ntab, &in->nnode);
	if (in->kind == FS_K_WRITER && in->wr)
		fs_wr_unref_locked(fs, in->wr);
	if (in->pdir) /* a path namespace's tree */
		fs_path_detach_locked(fs, in);
	if (in->prev) /* a replaced version's pin (fs/paths/fs_psuper.c) */
		tier_put(fs->tier, in->prev);
	p->ninodes--;
	free(in);
}

/* Namespace record for id, created with defaults when the engine has a
 * namespace fs has not seen (recovered from L2 at start, attributes not
 * restored by fs_nsmeta.c): fail closed, only the daemon's user may read
 * its chunks. lock held. */
struct fs_inode *fs_ns_get(struct fs *fs, uint32_t id)
{
	struct fs_priv *p = fs->priv;
	struct fs_inode *in = fs_ns_find(p, id);

	if (in)
		return in;
	in = fs_inode_new(p, FS_K_NS, FS_INO_OBJ | p->next_obj++);
	if (!in)
		return NULL;
	in->ns = id;
	in->mode = S_IFDIR | 0700;
	in->uid = getuid();
	in->gid = getgid();
	in->mtime = in->ctime = p->mount_time;
	if (htab_add(&p->ntab, &in->nnode, hash_ns(id))) {
		fs_inode_free(fs, in);
		return NULL;
	}
	in->named = true;
	return in;
}

int fs_ns_name_check(const char *name)
{
	size_t len = strlen(name);

	if (len > KVFS_NS_NAME_MAX)
		return -ENAMETOOLONG;
	if (!len || name[0] == '.')
		return -EINVAL;
	return 0;
}

static bool is_temp_name(const char *name)
{
	return name[0] == '.';
}

/* What a name in a namespace is: 1 a temporary, 0 a key (parsed), or
 * -EINVAL. */
int fs_chunk_name(const char *name, struct kvfs_key *key)
{
	size_t len = strlen(name);

	if (is_temp_name(name))
		return len > 255 ? -ENAMETOOLONG : 1;
	if (kvfs_key_parse(name, len, key))
		return -EINVAL;
	return 0;
}
