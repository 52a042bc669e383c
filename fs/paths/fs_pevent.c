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
	uint64_t h;
};

struct fs_pev {
	pthread_mutex_t lock; /* a leaf: taken under tier.lock or priv.lock */
	struct htab tab;
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

int fs_pev_create(struct fs_paths *t)
{
	t->pev = calloc(1, sizeof(*t->pev));
	if (!t->pev)
		return -ENOMEM;
	pthread_mutex_init(&t->pev->lock, NULL);
	return 0;
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
	if (!find(t->pev, ns, key) && (x = calloc(1, sizeof(*x)))) {
		x->ns = ns;
		x->key = *key;
		x->h = h;
		if (htab_add(&t->pev->tab, &x->node, hash_of(ns, key)))
			free(x);
	}
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
	if (x)
		*h = x->h;
	pthread_mutex_unlock(&t->pev->lock);
	return x != NULL;
}
