/*
 * fs_ptree.c - the directory trees of path namespaces: directories,
 * names, the tables that find them (by inode number, by parent and name,
 * by chunk key; files renamed since they were published also by st_ino)
 * and the paths that give files their keys. No FUSE
 * and no engine calls here; fs_priv.lock protects everything (the caller
 * holds it). See fs_ptree.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/paths/fs_ptree.h"

#define SALT_PINO  (UINT64_C(0x7069) << 48) /* path directory inodes */
#define SALT_PNAME (UINT64_C(0x706e) << 48) /* entries by (parent, name) */
#define SALT_PKEY  (UINT64_C(0x706b) << 48) /* | ns: files by key */
#define SALT_PMOVE (UINT64_C(0x706d) << 48) /* renamed files by st_ino */

/* An entry of fs_paths.mtab: fs_pent has no node of its own for it, as
 * few names are renamed once published (each such rename copies). */
struct fs_pmoved {
	struct htab_node node;
	uint64_t ino;
	struct fs_pent *e;
};

static uint64_t hash_name(uint64_t parent, const char *name, size_t len)
{
	return htab_hash(SALT_PNAME ^ parent, name, len);
}

static uint64_t hash_key(uint32_t ns, const struct kvfs_key *key)
{
	return htab_hash(SALT_PKEY | ns, key->b, sizeof(key->b));
}

int fs_ptree_init(struct fs_paths *t, uint64_t max_dirs)
{
	memset(t, 0, sizeof(*t));
	t->next_ino = 1;
	t->max_dirs = max_dirs ? max_dirs : FS_PATH_DIRS_DEFAULT;
	t->pending.pnext = t->pending.pprev = &t->pending;
	return -pthread_cond_init(&t->idle, NULL);
}

struct fs_pdir *fs_ptree_dir_of_ino(struct fs_paths *t, uint64_t ino)
{
	struct htab_node *n;

	htab_for_each_hash(&t->itab, htab_hash(SALT_PINO, &ino, sizeof(ino)),
			   n) {
		struct fs_pdir *d = container_of(n, struct fs_pdir, inode);

		if (d->ino == ino)
			return d;
	}
	return NULL;
}

struct fs_pdir *fs_ptree_dir(struct fs *fs, uint64_t ino)
{
	struct fs_inode *in;

	if (fs_is_pdir_ino(ino))
		return fs_ptree_dir_of_ino(fs->priv->paths, ino);
	in = fs_ino_find(fs->priv, ino);
	return in && in->kind == FS_K_NS && !in->removed ? in->pdir : NULL;
}

struct fs_pent *fs_ptree_find(struct fs_paths *t, const struct fs_pdir *d,
			      const char *name, size_t len)
{
	struct htab_node *n;

	htab_for_each_hash(&t->ntab, hash_name(d->ino, name, len), n) {
		struct fs_pent *e = container_of(n, struct fs_pent, nnode);

		if (e->parent == d && e->len == len &&
		    !memcmp(e->name, name, len))
			return e;
	}
	return NULL;
}

struct fs_pent *fs_ptree_by_key(struct fs_paths *t, uint32_t ns,
				const struct kvfs_key *key)
{
	struct htab_node *n;

	htab_for_each_hash(&t->ktab, hash_key(ns, key), n) {
		struct fs_pent *e = container_of(n, struct fs_pent, knode);

		if (e->parent->ns == ns && !memcmp(&e->key, key, sizeof(*key)))
			return e;
	}
	return NULL;
}

static struct fs_pmoved *moved_find(struct fs_paths *t, uint64_t ino)
{
	struct htab_node *n;

	htab_for_each_hash(&t->mtab, htab_hash(SALT_PMOVE, &ino, sizeof(ino)),
			   n) {
		struct fs_pmoved *m = container_of(n, struct fs_pmoved, node);

		if (m->ino == ino)
			return m;
	}
	return NULL;
}

int fs_ptree_moved(struct fs_paths *t, struct fs_pent *e)
{
	struct fs_pmoved *m;

	if (e->moved)
		return 0;
	m = malloc(sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->ino = e->ino;
	m->e = e;
	if (htab_add(&t->mtab, &m->node,
		     htab_hash(SALT_PMOVE, &m->ino, sizeof(m->ino)))) {
		free(m);
		return -ENOMEM;
	}
	e->moved = true;
	t->bytes += sizeof(*m);
	return 0;
}

struct fs_pent *fs_ptree_by_ino(struct fs_paths *t, uint32_t ns,
				uint64_t ino)
{
	struct fs_pmoved *m = moved_find(t, ino);

	return m && m->e->parent->ns == ns ? m->e : NULL;
}

struct fs_pdir *fs_ptree_root(uint32_t ns, uint64_t ino)
{
	struct fs_pdir *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->ns = ns;
	d->ino = ino;
	return d;
}

static struct fs_pent *ent_new(const char *name, size_t len)
{
	struct fs_pent *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->name = strndup(name, len);
	if (!e->name) {
		free(e);
		return NULL;
	}
	e->len = (uint16_t)len;
	return e;
}

static void ent_free(struct fs_pent *e)
{
	free(e->name);
	free(e);
}

/* Links e into d under its name (e->name). */
static int ent_link(struct fs_paths *t, struct fs_pdir *d, struct fs_pent *e)
{
	if (htab_add(&t->ntab, &e->nnode, hash_name(d->ino, e->name, e->len)))
		return -ENOMEM;
	e->parent = d;
	e->prev = NULL;
	e->next = d->head;
	if (d->head)
		d->head->prev = e;
	d->head = e;
	d->nent++;
	clock_gettime(CLOCK_REALTIME, &d->mtime);
	d->ctime = d->mtime;
	return 0;
}

static void ent_unlink(struct fs_paths *t, struct fs_pent *e)
{
	struct fs_pdir *d = e->parent;

	htab_del(&t->ntab, &e->nnode);
	if (e->prev)
		e->prev->next = e->next;
	else
		d->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	d->nent--;
	clock_gettime(CLOCK_REALTIME, &d->mtime);
	d->ctime = d->mtime;
}

int fs_ptree_mkdir(struct fs_paths *t, struct fs_pdir *d, const char *name,
		   size_t len, struct fs_pent **out)
{
	struct fs_pent *e;
	struct fs_pdir *sub;

	if (fs_ptree_find(t, d, name, len))
		return -EEXIST;
	if (t->ndirs >= t->max_dirs)
		return -ENOSPC;
	e = ent_new(name, len);
	sub = e ? calloc(1, sizeof(*sub)) : NULL;
	if (!sub)
		goto nomem;
	sub->ino = FS_INO_PDIR | t->next_ino++;
	sub->ns = d->ns;
	sub->self = e;
	e->dir = sub;
	if (htab_add(&t->itab, &sub->inode,
		     htab_hash(SALT_PINO, &sub->ino, sizeof(sub->ino))))
		goto nomem;
	if (ent_link(t, d, e)) {
		htab_del(&t->itab, &sub->inode);
		goto nomem;
	}
	t->ndirs++;
	t->bytes += sizeof(*sub) + sizeof(*e) + len + 1;
	*out = e;
	return 0;
nomem:
	free(sub);
	if (e)
		ent_free(e);
	return -ENOMEM;
}

int fs_ptree_mkfile(struct fs_paths *t, struct fs_pdir *d, const char *name,
		    size_t len, struct fs_pent **out)
{
	struct fs_pent *e;

	if (fs_ptree_find(t, d, name, len))
		return -EEXIST;
	e = ent_new(name, len);
	if (!e)
		return -ENOMEM;
	if (ent_link(t, d, e)) {
		ent_free(e);
		return -ENOMEM;
	}
	/* st_ino: from the directories' counter (their numbers are their
	 * st_ino too), so no two live files or directories share one */
	e->ino = FS_INO_PDIR | t->next_ino++;
	t->nfiles++;
	t->bytes += sizeof(*e) + len + 1;
	*out = e;
	return 0;
}

void fs_ptree_release_dir(struct fs_paths *t, struct fs_pdir *d)
{
	if (!d->removed || d->nlookup)
		return;
	htab_del(&t->itab, &d->inode);
	free(d);
}

/* Once, not while (e->busy): the entry may be freed before the lock
 * comes back (see fs_ptree.h). */
void fs_ptree_wait_idle(struct fs *fs, struct fs_pent *e)
{
	if (e->busy)
		pthread_cond_wait(&fs->priv->paths->idle, &fs->priv->lock);
}

void fs_ptree_remove(struct fs_paths *t, struct fs_pent *e)
{
	ent_unlink(t, e);
	if (e->keyed)
		fs_ptree_unkey(t, e);
	if (e->moved) {
		struct fs_pmoved *m = moved_find(t, e->ino);

		htab_del(&t->mtab, &m->node);
		free(m);
		t->bytes -= sizeof(*m);
	}
	t->bytes -= sizeof(*e) + e->len + 1;
	if (e->dir) {
		t->ndirs--;
		t->bytes -= sizeof(*e->dir);
		e->dir->removed = true;
		e->dir->self = NULL;
		fs_ptree_release_dir(t, e->dir);
	} else {
		t->nfiles--;
	}
	ent_free(e);
}

int fs_ptree_move(struct fs_paths *t, struct fs_pent *e, struct fs_pdir *d,
		  const char *name, size_t len)
{
	char *nm = strndup(name, len), *old_name = e->name;
	struct fs_pdir *old = e->parent;
	uint16_t old_len = e->len;

	if (!nm)
		return -ENOMEM;
	ent_unlink(t, e);
	e->name = nm;
	e->len = (uint16_t)len;
	if (ent_link(t, d, e)) {
		e->name = old_name;
		e->len = old_len;
		ent_link(t, old, e); /* a table that has buckets cannot fail */
		free(nm);
		return -ENOMEM;
	}
	if (e->keyed) {
		htab_del(&t->ktab, &e->knode);
		htab_add(&t->ktab, &e->knode, hash_key(d->ns, &e->key));
	}
	t->bytes += len;
	t->bytes -= old_len;
	free(old_name);
	return 0;
}

void fs_ptree_key(struct fs_paths *t, struct fs_pent *e,
		  const struct kvfs_key *key, uint64_t gen)
{
	if (e->keyed && !memcmp(e->key.b, key->b, sizeof(key->b))) {
		e->gen = gen; /* a new version: the name keeps its key */
		return;
	}
	if (e->keyed)
		fs_ptree_unkey(t, e);
	e->key = *key;
	e->gen = gen;
	if (!htab_add(&t->ktab, &e->knode, hash_key(e->parent->ns, key)))
		e->keyed = true;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool key_eq(uint32_t ns, const struct kvfs_key *k, uint32_t ns2,
		   const struct kvfs_key *k2)
{
	return ns == ns2 && !memcmp(k->b, k2->b, sizeof(k->b));
}

void fs_ptree_unkey(struct fs_paths *t, struct fs_pent *e)
{
	struct fs_plimbo *l;
	uint64_t now;

	if (!e->keyed)
		return;
	htab_del(&t->ktab, &e->knode);
	e->keyed = false;
	now = now_ms();
	l = &t->limbo[t->limbo_next++ % FS_PLIMBO];
	if (l->at_ms && now - l->at_ms < FS_PLIMBO_MS)
		t->limbo_full_until = now + FS_PLIMBO_MS; /* overwritten young */
	l->ns = e->parent->ns;
	l->key = e->key;
	l->at_ms = now ? now : 1;
}

bool fs_ptree_in_limbo(const struct fs_paths *t, uint32_t ns,
		       const struct kvfs_key *key)
{
	uint64_t now = now_ms();

	if (now < t->limbo_full_until)
		return true;
	for (unsigned i = 0; i < FS_PLIMBO; i++)
		if (t->limbo[i].at_ms && now - t->limbo[i].at_ms < FS_PLIMBO_MS &&
		    key_eq(t->limbo[i].ns, &t->limbo[i].key, ns, key))
			return true;
	return false;
}

void fs_ptree_pub(struct fs_paths *t, uint32_t ns,
		  const struct kvfs_key *key, bool start)
{
	for (unsigned i = 0; i < FS_PPUBS; i++) {
		struct fs_ppub *q = &t->pubs[i];

		if (start && !q->set) {
			*q = (struct fs_ppub){ .ns = ns, .set = true,
					       .key = *key };
			return;
		}
		if (!start && q->set && key_eq(q->ns, &q->key, ns, key)) {
			q->set = false;
			return;
		}
	}
	if (start)
		t->npubs_over++;
	else if (t->npubs_over)
		t->npubs_over--;
}

bool fs_ptree_publishing(const struct fs_paths *t, uint32_t ns,
			 const struct kvfs_key *key)
{
	if (t->npubs_over)
		return true;
	for (unsigned i = 0; i < FS_PPUBS; i++)
		if (t->pubs[i].set &&
		    key_eq(t->pubs[i].ns, &t->pubs[i].key, ns, key))
			return true;
	return false;
}

void fs_ptree_busy(struct fs *fs, struct fs_pent *e, bool busy)
{
	struct fs_paths *t = fs->priv->paths;

	if (e->busy == busy)
		return;
	e->busy = busy;
	if (!busy)
		pthread_cond_broadcast(&t->idle);
}

int fs_ptree_path(const struct fs_pdir *d, const char *name, size_t len,
		  char *buf)
{
	size_t at = FS_PATH_MAX + 1, total = 0;
	const struct fs_pent *e;

	/* built from the end: name, then each parent's name */
	if (name) {
		if (len > FS_PATH_MAX)
			return -ENAMETOOLONG;
		at -= len;
		memcpy(buf + at, name, len);
		total = len;
	}
	for (; d && (e = d->self); d = e->parent) {
		size_t need = e->len + (total ? 1 : 0);

		if (total + need > FS_PATH_MAX)
			return -ENAMETOOLONG;
		if (total)
			buf[--at] = '/';
		at -= e->len;
		memcpy(buf + at, e->name, e->len);
		total += need;
	}
	memmove(buf, buf + at, total);
	buf[total] = '\0';
	return (int)total;
}

bool fs_ptree_within(const struct fs_pdir *a, const struct fs_pdir *d)
{
	for (; a; a = a->self ? a->self->parent : NULL)
		if (a == d)
			return true;
	return false;
}

/* Frees the entries below d, dropping their writers' references
 * (priv.lock held). */
void fs_ptree_clear(struct fs *fs, struct fs_paths *t, struct fs_pdir *d)
{
	while (d->head) {
		struct fs_pent *e = d->head;

		if (e->dir)
			fs_ptree_clear(fs, t, e->dir);
		if (e->wr) {
			e->wr->pent = NULL;
			if (e->wr->pending) {
				e->wr->pprev->pnext = e->wr->pnext;
				e->wr->pnext->pprev = e->wr->pprev;
				e->wr->pending = false;
				t->npending--;
			}
			fs_wr_unref_locked(fs, e->wr);
			e->wr = NULL;
		}
		fs_ptree_remove(t, e); /* a directory: freed if forgotten */
	}
}

/* At unmount, after every namespace's tree was cleared. */
void fs_ptree_free(struct fs *fs, struct fs_paths *t)
{
	uint64_t i;
	struct htab_node *n, *nx;

	/* removed directories the kernel never forgot */
	htab_for_each_safe(&t->itab, i, n, nx) {
		struct fs_pdir *d = container_of(n, struct fs_pdir, inode);

		htab_del(&t->itab, n);
		free(d);
	}
	htab_free(&t->itab);
	htab_free(&t->ntab);
	htab_free(&t->ktab);
	htab_free(&t->mtab); /* empty: every entry was removed */
	pthread_cond_destroy(&t->idle);
}

uint64_t fs_ptree_event_hash(const char *name, size_t len,
			     const struct kvfs_key *key)
{
	uint64_t h = 0;
	size_t n = 0;

	while (n < len && fs_hexval(name[n]) >= 0)
		h = h << 4 | (uint64_t)fs_hexval(name[n++]); /* keeps the low 64 */
	if (n >= 16)
		return h;
	h = 0;
	for (int i = 8; i < 16; i++)
		h = h << 8 | key->b[i];
	return h;
}
