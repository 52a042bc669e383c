/*
 * fs_psuper.c - versions of path files replaced in their writer's close.
 *
 * A new version published in its writer's close (fs_path_op_flush): the
 * close invalidates the kernel's entry of the name before it returns, so
 * afterwards no walk of the name leads to the version it replaced; only
 * fds open on that version, and opens and stats whose walk found it
 * before (they raced the close, and may come before it), reach its inode.
 * That inode is marked superseded before the publication: GETATTR
 * answers its own attributes (fstat of an fd of the old version: POSIX,
 * where ESTALE was the only answer while a stat of the name through a
 * stale entry could not be told from it), and OPEN opens its bytes, kept
 * pinned for FS_PHELD_MS (at most FS_PHELD versions, l1_cap / 8 bytes,
 * and only what L1 holds), where ESTALE and the kernel's one retry could
 * lose to the next publication. Where the publication or the
 * invalidation fails, the mark goes (ESTALE then, as before).
 *
 * The invalidation takes the directory's lock in the kernel. No daemon
 * lock is held meanwhile, and FLUSH is none of the requests that may hold
 * it while they wait for this daemon (libfuse's rules for notify calls
 * from a handler: lookup, create, mknod, mkdir, symlink, link, unlink,
 * rename of the parent), so the wait ends when the requests in that
 * directory are answered; at most a quarter of the workers wait so at
 * once (nsync), so they are never all taken. Past that, the background
 * thread invalidates (pth_published) and the old version's inode stays
 * unmarked until it did. A stop (fs_quiesce) lets those in flight end
 * while requests are still served, and no close starts one after.
 */
#include <errno.h>
#include <string.h>

#include "fs/paths/fs_ptree.h"

static struct fs_paths *paths_of(struct fs *fs)
{
	return fs->priv->paths;
}

static void held_drop_locked(struct fs *fs, uint64_t ino)
{
	struct fs_paths *t = paths_of(fs);
	struct fs_inode *in = fs_ino_find(fs->priv, ino);

	for (unsigned i = 0; i < FS_PHELD; i++) {
		if (t->held[i].ino != ino)
			continue;
		t->held_bytes -= t->held[i].bytes;
		t->held[i].ino = 0;
		break;
	}
	if (in && in->prev) {
		tier_put(fs->tier, in->prev);
		in->prev = NULL;
	}
}

/* Pins the bytes of in's version for its racing opens, letting go of the
 * oldest pins where room is short (their racing opens came long ago, as
 * a rule). priv.lock held. */
static void held_add_locked(struct fs *fs, struct fs_inode *in)
{
	struct fs_paths *t = paths_of(fs);
	struct tier_chunk *c;
	unsigned i, slot, old;

	if (!t->l1_cap) {
		struct tier_stats ts;

		tier_get_stats(fs->tier, &ts);
		t->l1_cap = ts.l1_capacity;
	}
	if (in->prev || in->info.size > t->l1_cap / 8)
		return;
	for (;;) {
		slot = old = FS_PHELD;
		for (i = 0; i < FS_PHELD; i++) {
			if (!t->held[i].ino)
				slot = slot == FS_PHELD ? i : slot;
			else if (old == FS_PHELD ||
				 t->held[i].at_ms < t->held[old].at_ms)
				old = i;
		}
		if (slot < FS_PHELD &&
		    t->held_bytes + in->info.size <= t->l1_cap / 8)
			break;
		if (old == FS_PHELD)
			return;
		held_drop_locked(fs, t->held[old].ino);
	}
	if (tier_pin_l1(fs->tier, in->ns, &in->key, in->gen, &c))
		return;
	in->prev = c;
	t->held[slot].ino = in->ino;
	t->held[slot].at_ms = fs_now_ms();
	t->held[slot].bytes = tier_chunk_size(c);
	t->held_bytes += t->held[slot].bytes;
}

void fs_psuper_expire(struct fs *fs)
{
	struct fs_paths *t = paths_of(fs);
	uint64_t now = fs_now_ms();

	pthread_mutex_lock(&fs->priv->lock);
	for (unsigned i = 0; i < FS_PHELD; i++)
		if (t->held[i].ino && now - t->held[i].at_ms >= FS_PHELD_MS)
			held_drop_locked(fs, t->held[i].ino);
	pthread_mutex_unlock(&fs->priv->lock);
}

/* The inode of publication gen of (ns, key), if the kernel has it
 * (priv.lock held). */
struct fs_inode *fs_pversion_inode(struct fs *fs, uint32_t ns,
				   const struct kvfs_key *key, uint64_t gen)
{
	struct fs_inode *in = gen ? fs_ino_find(fs->priv, FS_INO_CHUNK + gen)
				  : NULL;

	return in && in->kind == FS_K_CHUNK && in->ns == ns &&
	       !memcmp(&in->key, key, sizeof(*key)) ? in : NULL;
}

void fs_psuper_begin(struct fs *fs, struct fs_pent *e, uint32_t ns,
		     const struct kvfs_key *key, struct fs_psuper *s)
{
	struct fs_paths *t = paths_of(fs);
	struct fs_inode *in;

	s->on = false;
	if (!t->nsync_max)
		t->nsync_max = fs_workers() / 4 ? fs_workers() / 4 : 1;
	if (!fs->se || t->stopping || t->nsync >= t->nsync_max ||
	    e->len >= sizeof(s->name))
		return;
	s->on = true;
	t->nsync++;
	s->parent = e->parent->ino;
	s->len = e->len;
	memcpy(s->name, e->name, e->len);
	s->name[e->len] = '\0';
	s->gen = e->keyed ? e->gen : 0;
	s->ino = 0;
	in = fs_pversion_inode(fs, ns, key, s->gen);
	if (!in || in->superseded)
		return;
	in->superseded = true;
	s->ino = in->ino;
	held_add_locked(fs, in);
}

unsigned fs_psuper_quiesce_locked(struct fs *fs)
{
	struct fs_paths *t = paths_of(fs);

	if (!t)
		return 0;
	t->stopping = true;
	return t->nsync;
}

void fs_psuper_end(struct fs *fs, struct fs_psuper *s, uint32_t ns,
		   const struct kvfs_key *key, bool published, uint64_t pub_gen)
{
	struct fs_priv *p = fs->priv;
	struct fs_inode *in;
	struct fs_pent *e;
	int rc = 0;

	if (!s->on)
		return;
	if (published) {
		/* ENOENT: the kernel holds no such entry */
		rc = fuse_lowlevel_notify_inval_entry(fs->se, s->parent,
						      s->name, s->len);
		if (rc == -ENOENT)
			rc = 0;
		if (!rc)
			__atomic_add_fetch(&p->invalidations, 1,
					   __ATOMIC_RELAXED);
	}
	pthread_mutex_lock(&p->lock);
	paths_of(fs)->nsync--;
	if (s->ino && (!published || rc) &&
	    (in = fs_ino_find(p, s->ino)) != NULL) {
		in->superseded = false;
		held_drop_locked(fs, s->ino);
	} else if (published && !rc &&
		   (in = fs_pversion_inode(fs, ns, key, s->gen)) != NULL) {
		/* made by a lookup that found the old version before the
		 * publication (its entry went with the invalidation, which
		 * waited for that lookup's reply) */
		in->superseded = true;
	}
	if (published && !rc && pub_gen &&
	    (e = fs_ptree_by_key(paths_of(fs), ns, key)) && e->gen == pub_gen)
		e->dropped_gen = pub_gen;
	pthread_mutex_unlock(&p->lock);
}

int fs_psuper_pin(struct fs *fs, uint64_t ino, struct tier_chunk **c,
		  uint32_t *ns, struct kvfs_key *key)
{
	struct fs_priv *p = fs->priv;
	struct fs_inode *in;
	int err = -ENOENT;

	pthread_mutex_lock(&p->lock);
	in = fs_ino_find(p, ino);
	if (in && in->kind == FS_K_CHUNK && in->superseded && in->prev)
		err = tier_chunk_dup(fs->tier, in->prev, c);
	if (!err) {
		*ns = in->ns;
		*key = in->key;
		paths_of(fs)->superseded_opens++;
	}
	pthread_mutex_unlock(&p->lock);
	return err;
}
