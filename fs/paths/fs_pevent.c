/*
 * fs_pevent.c - the block hash KV events report for files of path
 * namespaces (fs_ptree_event_hash: the leading hex digits of a file name,
 * an engine's own block hash). The events sink runs with tier.lock held
 * and cannot take fs_priv.lock, so the hashes of files whose names carry
 * one are kept here, by (namespace, key), under a leaf lock of their own:
 * noted before a file's publication (so its BlockStored already carries
 * it), forgotten once its key left the engine. A key is the hash of a
 * path and the hash a function of the path's last name, so an entry is
 * never wrong, only possibly kept longer than needed.
 *
 * With L3, the same table keeps each published file's attributes (mode,
 * owner, mtime; fs_pattr.c sets them before its publication and at each
 * change), which the engine writes into the file's L3 record as it
 * queues it (tier.lock held, often as the file leaves L1, when its name
 * may be dropped right after), and where a promotion from L3 leaves the
 * attributes its record carried, for the lookup that names the file.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/paths/fs_ptree.h"

#define SALT_PEV (UINT64_C(0x7065) << 48) /* | ns */

struct pev {
	struct htab_node node;
	uint32_t ns;
	struct kvfs_key key;
	uint64_t h;           /* 0: none (not a hex name) */
	bool has_a;
	struct tier_pattr a;
};

struct fs_pev {
	pthread_mutex_t lock; /* a leaf: taken under tier.lock or priv.lock */
	struct htab tab;
	bool attrs;           /* (imm) keep attributes: L3 is on */
};

static uint64_t hash_of(uint32_t ns, const struct kvfs_key *key)
{
	return htab_hash(SALT_PEV | ns, key->b, sizeof(key->b));
}

static struct pev *find(struct fs_pev *v, uint32_t ns,
			const struct kvfs_key *key)
{
	struct htab_node *n;

	htab_for_each_hash(&v->tab, hash_of(ns, key), n) {
		struct pev *x = container_of(n, struct pev, node);

		if (x->ns == ns && !memcmp(&x->key, key, sizeof(*key)))
			return x;
	}
	return NULL;
}

int fs_pev_create(struct fs_paths *t, bool attrs)
{
	t->pev = calloc(1, sizeof(*t->pev));
	if (!t->pev)
		return -ENOMEM;
	pthread_mutex_init(&t->pev->lock, NULL);
	t->pev->attrs = attrs;
	return 0;
}

/* The entry of (ns, key), made if need be (lock held); NULL: no memory. */
static struct pev *get(struct fs_pev *v, uint32_t ns,
		       const struct kvfs_key *key)
{
	struct pev *x = find(v, ns, key);

	if (x || !(x = calloc(1, sizeof(*x))))
		return x;
	x->ns = ns;
	x->key = *key;
	if (htab_add(&v->tab, &x->node, hash_of(ns, key))) {
		free(x);
		return NULL;
	}
	return x;
}

void fs_pev_destroy(struct fs_paths *t)
{
	struct htab_node *n, *nx;
	uint64_t i;

	if (!t->pev)
		return;
	htab_for_each_safe(&t->pev->tab, i, n, nx)
		free(container_of(n, struct pev, node));
	htab_free(&t->pev->tab);
	pthread_mutex_destroy(&t->pev->lock);
	free(t->pev);
	t->pev = NULL;
}

void fs_pev_note(struct fs_paths *t, uint32_t ns, const struct kvfs_key *key,
		 const char *name, size_t len)
{
	struct kvfs_key zero = { { 0 } };
	struct pev *x;
	uint64_t h;

	/* fs_ptree_event_hash of the zero key is 0 unless the name has one */
	h = fs_ptree_event_hash(name, len, &zero);
	if (!h || !t->pev)
		return; /* no hex name: the key's own hash, as key chunks */
	pthread_mutex_lock(&t->pev->lock);
	x = get(t->pev, ns, key);
	if (x)
		x->h = h;
	pthread_mutex_unlock(&t->pev->lock);
}

void fs_pev_forget(struct fs_paths *t, uint32_t ns, const struct kvfs_key *key)
{
	struct pev *x;

	if (!t->pev)
		return;
	pthread_mutex_lock(&t->pev->lock);
	x = find(t->pev, ns, key);
	if (x)
		htab_del(&t->pev->tab, &x->node);
	pthread_mutex_unlock(&t->pev->lock);
	free(x);
}

bool pth_event_hash(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
			uint64_t *h)
{
	struct fs_paths *t = fs->priv->paths;
	struct pev *x;

	if (!t || !t->pev)
		return false;
	pthread_mutex_lock(&t->pev->lock);
	x = find(t->pev, ns, key);
	if (x && x->h)
		*h = x->h;
	pthread_mutex_unlock(&t->pev->lock);
	return x && x->h;
}

void fs_pev_attr_set(struct fs_paths *t, uint32_t ns,
		     const struct kvfs_key *key, const struct tier_pattr *a)
{
	struct pev *x;

	if (!t->pev || !t->pev->attrs)
		return;
	pthread_mutex_lock(&t->pev->lock);
	x = a ? get(t->pev, ns, key) : find(t->pev, ns, key);
	if (x) {
		x->has_a = a != NULL;
		if (a)
			x->a = *a;
	}
	pthread_mutex_unlock(&t->pev->lock);
}

bool pth_pattr_get(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		   struct tier_pattr *a)
{
	struct fs_paths *t = fs->priv->paths;

	return t && fs_pev_attr_get(t, ns, key, a);
}

/* Attributes a promotion found in L3: kept unless the key has some
 * already (a local publication of it in flight noted its writer's). */
void pth_pattr_found(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		     const struct tier_pattr *a)
{
	struct fs_paths *t = fs->priv->paths;
	struct pev *x;

	if (!t || !a || !t->pev || !t->pev->attrs)
		return;
	pthread_mutex_lock(&t->pev->lock);
	x = get(t->pev, ns, key);
	if (x && !x->has_a) {
		x->has_a = true;
		x->a = *a;
	}
	pthread_mutex_unlock(&t->pev->lock);
}

bool fs_pev_attr_get(struct fs_paths *t, uint32_t ns,
		     const struct kvfs_key *key, struct tier_pattr *a)
{
	struct pev *x;
	bool has;

	if (!t->pev || !t->pev->attrs)
		return false;
	pthread_mutex_lock(&t->pev->lock);
	x = find(t->pev, ns, key);
	has = x && x->has_a;
	if (has)
		*a = x->a;
	pthread_mutex_unlock(&t->pev->lock);
	return has;
}
