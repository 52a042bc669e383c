/*
 * tier_ns.c - namespaces: names (validated UTF-8), create/find/remove,
 * per-namespace settings and info, the id list, and the snapshot of a
 * namespace's chunks that readdir lists.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tier/tier_i.h"

/* Well-formed UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF): names are shown in JSON stats and metrics. */
static bool utf8_valid(const unsigned char *s)
{
	while (*s) {
		uint32_t c = *s, min;
		int n;

		if (c < 0x80) {
			s++;
			continue;
		}
		if ((c & 0xE0) == 0xC0)
			n = 1, min = 0x80, c &= 0x1F;
		else if ((c & 0xF0) == 0xE0)
			n = 2, min = 0x800, c &= 0x0F;
		else if ((c & 0xF8) == 0xF0)
			n = 3, min = 0x10000, c &= 0x07;
		else
			return false;
		for (int i = 1; i <= n; i++) {
			if ((s[i] & 0xC0) != 0x80)
				return false;
			c = c << 6 | (s[i] & 0x3F);
		}
		if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
			return false;
		s += n + 1;
	}
	return true;
}

static int check_ns_name(const char *name)
{
	size_t n;

	if (!name || !name[0] || name[0] == '.' || strchr(name, '/'))
		return -EINVAL;
	n = strlen(name);
	if (n > KVFS_NS_NAME_MAX)
		return -ENAMETOOLONG;
	if (!utf8_valid((const unsigned char *)name))
		return -EINVAL;
	return 0;
}

struct tier_ns *tier_ns_by_name(struct tier *t, const char *name)
{
	for (uint32_t i = 1; i < t->ns_next; i++)
		if (t->ns[i] && !strcmp(t->ns[i]->name, name))
			return t->ns[i];
	return NULL;
}

int tier_ns_create(struct tier *t, const char *name, uint32_t *id)
{
	struct tier_ns *ns;
	int rc = check_ns_name(name);

	if (rc < 0)
		return rc;
	ns = calloc(1, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	strcpy(ns->name, name);
	ns->shuffle = t->cfg.shuffle; /* until user.kvfs.dtype says */
	tier_lock(t);
	if (tier_ns_by_name(t, name)) {
		rc = -EEXIST;
		goto err_unlock;
	}
	if (t->ns_next == UINT32_MAX) {
		rc = -ENOSPC;
		goto err_unlock;
	}
	if (t->ns_next == t->ns_cap) {
		uint32_t n = t->ns_cap * 2;
		struct tier_ns **a = realloc(t->ns, n * sizeof(*a));

		if (!a) {
			rc = -ENOMEM;
			goto err_unlock;
		}
		memset(a + t->ns_cap, 0, (n - t->ns_cap) * sizeof(*a));
		t->ns = a;
		t->ns_cap = n;
	}
	ns->id = t->ns_next++;
	t->ns[ns->id] = ns;
	t->ns_count++;
	if (id)
		*id = ns->id;
	tier_unlock(t);
	return 0;

err_unlock:
	tier_unlock(t);
	free(ns);
	return rc;
}

int tier_ns_find(struct tier *t, const char *name, uint32_t *id)
{
	struct tier_ns *ns;

	if (!name)
		return -ENOENT;
	tier_lock(t);
	ns = tier_ns_by_name(t, name);
	if (ns && id)
		*id = ns->id;
	tier_unlock(t);
	return ns ? 0 : -ENOENT;
}

int tier_ns_remove(struct tier *t, uint32_t id)
{
	struct tier_ns *ns;
	int rc = 0;

	tier_lock(t);
	ns = tier_ns_get(t, id);
	if (!ns)
		rc = -ENOENT;
	else if (ns->chunks || ns->nwriters)
		rc = -ENOTEMPTY;
	else {
		tier_ev_cleared(t, ns);
		t->ns[id] = NULL;
		t->ns_count--;
	}
	tier_unlock(t);
	if (rc == 0)
		free(ns);
	return rc;
}

int tier_ns_info(struct tier *t, uint32_t id, struct tier_ns_info *info)
{
	struct tier_ns *ns;

	tier_lock(t);
	ns = tier_ns_get(t, id);
	if (ns) {
		memset(info, 0, sizeof(*info));
		info->id = ns->id;
		memcpy(info->name, ns->name, sizeof(info->name));
		info->chunk_bytes = ns->chunk_bytes;
		info->chunk_tokens = ns->chunk_tokens;
		info->shuffle = ns->shuffle;
		info->chunks = ns->chunks;
		info->bytes = ns->bytes;
		info->hits = ns->hits;
		info->keep = ns->keep;
		info->quota = ns->quota;
	}
	tier_unlock(t);
	return ns ? 0 : -ENOENT;
}

int tier_ns_set_keep(struct tier *t, uint32_t id, bool keep, uint64_t quota,
		     bool restore)
{
	struct tier_ns *ns;
	uint64_t cap, others = 0;
	int rc = 0;

	tier_lock(t);
	ns = tier_ns_get(t, id);
	if (!ns) {
		rc = -ENOENT;
		goto out;
	}
	if (!keep) {
		ns->keep = false;
		goto out;
	}
	/* half of the last tier for all evict=never namespaces together */
	cap = tier_l2_capacity(t);
	cap = (cap ? cap : t->l1_cap) / 2;
	for (uint32_t i = 0; i < t->ns_cap; i++)
		if (t->ns[i] && t->ns[i] != ns && t->ns[i]->keep)
			others += t->ns[i]->quota;
	if (!restore) {
		if (quota > cap) {
			rc = -EINVAL;
			goto out;
		}
		if (!quota)
			quota = cap > others ? cap - others : 0;
		if (!quota || others + quota > cap) {
			rc = -ENOSPC;
			goto out;
		}
	}
	ns->keep = true;
	ns->quota = quota;
out:
	tier_unlock(t);
	return rc;
}

/* chunk_bytes above max_chunk could never be written: -EFBIG. Applies to
 * chunks published from now on. */
int tier_ns_set_chunk_bytes(struct tier *t, uint32_t id, uint64_t bytes)
{
	struct tier_ns *ns;
	int rc = 0;

	if (bytes > t->cfg.max_chunk)
		return -EFBIG;
	tier_lock(t);
	ns = tier_ns_get(t, id);
	if (ns)
		ns->chunk_bytes = bytes;
	else
		rc = -ENOENT;
	tier_unlock(t);
	return rc;
}

int tier_ns_set_shuffle(struct tier *t, uint32_t id, int shuffle)
{
	struct tier_ns *ns;
	int rc = 0;

	if (shuffle != 0 && shuffle != 2 && shuffle != 4)
		return -EINVAL;
	tier_lock(t);
	ns = tier_ns_get(t, id);
	if (ns)
		ns->shuffle = shuffle;
	else
		rc = -ENOENT;
	tier_unlock(t);
	return rc;
}

int tier_ns_set_chunk_tokens(struct tier *t, uint32_t id, uint32_t tokens)
{
	struct tier_ns *ns;

	tier_lock(t);
	ns = tier_ns_get(t, id);
	if (ns)
		ns->chunk_tokens = tokens;
	tier_unlock(t);
	return ns ? 0 : -ENOENT;
}

long tier_ns_list(struct tier *t, uint32_t *ids, size_t max)
{
	size_t n = 0;
	long total;

	tier_lock(t);
	for (uint32_t i = 1; i < t->ns_next; i++)
		if (t->ns[i] && n < max)
			ids[n++] = i;
	total = t->ns_count;
	tier_unlock(t);
	return total;
}

int tier_ns_snapshot(struct tier *t, uint32_t ns, struct tier_dirent **out,
		     size_t *n)
{
	struct tier_dirent *d;
	struct tier_rec *r;
	struct tier_ns *s;
	size_t i = 0;

	tier_lock(t);
	s = tier_ns_get(t, ns);
	if (!s) {
		tier_unlock(t);
		return -ENOENT;
	}
	d = malloc((s->chunks ? s->chunks : 1) * sizeof(*d));
	if (!d) {
		tier_unlock(t);
		return -ENOMEM;
	}
	for (r = s->head; r; r = r->ns_next, i++) {
		d[i].key = r->key;
		d[i].size = r->size;
		d[i].gen = r->gen;
	}
	tier_unlock(t);
	*out = d;
	*n = i;
	return 0;
}
