/*
 * fs_wr.c - chunks being written: the writer record (struct fs_wr) and its
 * references, publication and discard of its chunk, and temporaries ('.'
 * names): their table and list, and the expiry of abandoned ones.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_i.h"
#include "fs/fs_pt.h"

static uint64_t hash_tmp(uint32_t ns, const char *name)
{
	return htab_hash(FS_SALT_TMP | ns, name, strlen(name));
}

struct fs_wr *fs_tmp_find(struct fs_priv *p, uint32_t ns, const char *name)
{
	uint64_t h = hash_tmp(ns, name);
	struct htab_node *e;

	htab_for_each_hash(&p->tmptab, h, e) {
		struct fs_wr *w = container_of(e, struct fs_wr, tnode);

		if (w->ns == ns && !strcmp(w->name, name))
			return w;
	}
	return NULL;
}

struct fs_wr *fs_wr_new(struct fs_priv *p)
{
	struct fs_wr *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	pthread_rwlock_init(&w->lock, NULL);
	w->ino = FS_INO_OBJ | p->next_obj++;
	w->refs = 1;
	/* what a path namespace's file shows while being written, as once
	 * published; a key namespace's create sets the create mode */
	w->mode = 0644;
	w->atime_ns = w->mtime_ns = w->ctime_ns = fs_now_ns();
	return w;
}

int fs_tmp_list(struct fs_priv *p, struct fs_wr *w)
{
	int err = htab_add(&p->tmptab, &w->tnode, hash_tmp(w->ns, w->name));

	if (err)
		return err;
	w->in_tmptab = true;
	w->refs++;
	w->tnext = &p->tmp_head;
	w->tprev = p->tmp_head.tprev;
	w->tprev->tnext = w;
	p->tmp_head.tprev = w;
	p->ntemps++;
	return 0;
}

/* The new name cannot fail to go in: the table has buckets already. */
void fs_tmp_rename(struct fs_priv *p, struct fs_wr *w, char *name)
{
	htab_del(&p->tmptab, &w->tnode);
	free(w->name);
	w->name = name;
	htab_add(&p->tmptab, &w->tnode, hash_tmp(w->ns, name));
}

void fs_tmp_unlist(struct fs_priv *p, struct fs_wr *w)
{
	if (!w->in_tmptab)
		return;
	htab_del(&p->tmptab, &w->tnode);
	w->tprev->tnext = w->tnext;
	w->tnext->tprev = w->tprev;
	w->in_tmptab = false;
	w->unlinked = true; /* nameless now (a publication says otherwise) */
	p->ntemps--;
}

static void count_discard(struct fs *fs, enum fs_discard why)
{
	__atomic_add_fetch(&fs->priv->discards[why], 1, __ATOMIC_RELAXED);
}

/*
 * Drops a reference. The last one aborts a chunk that was never published
 * (its name went: unlinked, replaced, its namespace removed).
 * fs_priv.lock held; the abort takes w->lock, which is fine: nobody holds a
 * reference any more, so nobody holds or waits for w->lock.
 */
void fs_wr_unref_locked(struct fs *fs, struct fs_wr *w)
{
	if (--w->refs)
		return;
	if (w->pub_chunk)
		tier_put(fs->tier, w->pub_chunk);
	if (w->w) {
		tier_wr_abort(fs->tier, w->w);
		w->w = NULL;
		count_discard(fs, fs_wr_error(w) ? FS_DISCARD_WRITE_ERROR
						 : FS_DISCARD_UNLINKED);
	}
	pthread_rwlock_destroy(&w->lock);
	free(w->name);
	free(w);
}

void fs_wr_unref(struct fs *fs, struct fs_wr *w)
{
	pthread_mutex_lock(&fs->priv->lock);
	fs_wr_unref_locked(fs, w);
	pthread_mutex_unlock(&fs->priv->lock);
}

/* Discards the chunk being written (w->lock held exclusively). */
void fs_wr_discard(struct fs *fs, struct fs_wr *w, enum fs_discard why)
{
	if (w->w) {
		tier_wr_abort(fs->tier, w->w);
		count_discard(fs, fs_wr_error(w) ? FS_DISCARD_WRITE_ERROR : why);
	}
	w->w = NULL;
	w->state = FS_WR_DISCARDED;
}

int fs_wr_error(const struct fs_wr *w)
{
	return __atomic_load_n(&w->write_err, __ATOMIC_RELAXED);
}

void fs_wr_fail(struct fs *fs, struct fs_wr *w, int err)
{
	int zero = 0;

	if (!__atomic_compare_exchange_n(&w->write_err, &zero, err, false,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return; /* an earlier write failed: its room is gone already */
	/* its bytes will never be published: other writers may have the
	 * room now, not at its close */
	if (w->w)
		tier_wr_fail(fs->tier, w->w);
}

int fs_sync_chunk(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		  bool path)
{
	int err = tier_sync(fs->tier, ns, key);

	if (!err && path)
		err = fs_path_sync(fs);
	return err;
}

int fs_wr_sync(struct fs *fs, struct fs_wr *w, const struct kvfs_key *key)
{
	if (!__atomic_load_n(&w->sync, __ATOMIC_ACQUIRE))
		return 0;
	return fs_sync_chunk(fs, w->ns, key, w->path);
}

/*
 * Publishes the chunk under key (NULL: the key given at create). Takes
 * w->lock exclusively. Returns 0 or -errno; the chunk is published or
 * discarded either way, except -EPERM/-EINVAL which report a writer that
 * was already finished, and, with keep_refused (a rename), -EEXIST,
 * -EMSGSIZE and -ENODATA, which leave the writer open as it was.
 * A key namespace's chunk without bytes is never published (-ENODATA;
 * a path namespace's empty file is, as on any filesystem): a lookup would
 * report it found and a read would return nothing, and the name could
 * not be written again (fio's open, close, reopen).
 */
enum { PUB_DISCARD, PUB_KEEP, PUB_REPLACE };

static int publish_mode(struct fs *fs, struct fs_wr *w,
			const struct kvfs_key *key, int mode)
{
	struct tier_info info;
	int err;

	pthread_rwlock_wrlock(&w->lock);
	if (w->state != FS_WR_OPEN || !w->w) {
		pthread_rwlock_unlock(&w->lock);
		return w->state == FS_WR_PUBLISHED ? -EEXIST : -ENOENT;
	}
	err = fs_wr_error(w);
	if (err) {
		/* some of its bytes never arrived: a hole would be served as
		 * zeros, so the chunk is dropped and close() says why */
		fs_wr_discard(fs, w, FS_DISCARD_WRITE_ERROR);
		pthread_rwlock_unlock(&w->lock);
		return err;
	}
	w->final_size = tier_wr_size(w->w);
	if (!w->final_size && !w->path) {
		if (mode != PUB_KEEP)
			fs_wr_discard(fs, w, FS_DISCARD_EMPTY);
		pthread_rwlock_unlock(&w->lock);
		return -ENODATA;
	}
	if (mode == PUB_KEEP) {
		err = tier_wr_publish_or_keep(fs->tier, w->w, key);
		if (err == -EEXIST || err == -EMSGSIZE) {
			pthread_rwlock_unlock(&w->lock);
			return err; /* still open, still ours */
		}
	} else if (mode == PUB_REPLACE) {
		err = tier_wr_publish_replace(fs->tier, w->w, key);
	} else {
		err = tier_wr_publish(fs->tier, w->w, key);
	}
	w->w = NULL;
	w->state = err ? FS_WR_DISCARDED : FS_WR_PUBLISHED;
	if (err)
		count_discard(fs, FS_DISCARD_REFUSED);
	if (!err) {
		const struct kvfs_key *k = key ? key : &w->key;

		if (tier_stat(fs->tier, w->ns, k, &info) == 0) {
			w->final_gen = info.gen;
			/* read soon, most likely: its shadow is made now */
			if (!w->path)
				fs_pt_published(fs, w->ns, k, info.gen,
						info.size);
		}
		if (w->want_pin)
			tier_set_user_pin(fs->tier, w->ns, k, true);
		/*
		 * The kernel's dentry for the name still points at the
		 * writer's inode, so a reader's first lookup would find a
		 * new inode, drop the dentry and look up again: drop it now,
		 * off the writer's path, to save readers that round trip.
		 */
		fs_queue_inval(fs, w->ns, k, true);
	}
	pthread_rwlock_unlock(&w->lock);
	return err;
}

int fs_wr_publish(struct fs *fs, struct fs_wr *w, const struct kvfs_key *key,
		  bool keep_refused)
{
	return publish_mode(fs, w, key, keep_refused ? PUB_KEEP : PUB_DISCARD);
}

int fs_wr_publish_replace(struct fs *fs, struct fs_wr *w,
			  const struct kvfs_key *key)
{
	return publish_mode(fs, w, key, PUB_REPLACE);
}

/*
 * Forgets a closed temporary (p->lock held, w->opens == 0): it leaves the
 * name table, and its bytes go back to the arena now, not when the kernel
 * forgets the inode it may still cache. A writer lock held elsewhere (a
 * lookup racing us) only delays the discard to the last reference.
 */
void fs_tmp_drop(struct fs *fs, struct fs_wr *w, enum fs_discard why)
{
	fs_tmp_unlist(fs->priv, w);
	if (pthread_rwlock_trywrlock(&w->lock) == 0) {
		fs_wr_discard(fs, w, why);
		pthread_rwlock_unlock(&w->lock);
	}
	fs_wr_unref_locked(fs, w); /* the name table's ref */
}

void fs_tmp_expire(struct fs *fs)
{
	struct fs_priv *p = fs->priv;
	uint64_t now = fs_now_ms();

	pthread_mutex_lock(&p->lock);
	for (struct fs_wr *w = p->tmp_head.tnext, *next; w != &p->tmp_head;
	     w = next) {
		next = w->tnext;
		if (w->opens || now - w->closed_ms < fs->cfg.tmp_timeout_ms)
			continue;
		fs_tmp_drop(fs, w, FS_DISCARD_EXPIRED);
		p->tmp_expired++;
	}
	pthread_mutex_unlock(&p->lock);
}
