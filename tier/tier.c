/*
 * tier.c - the cache engine core: config, create/destroy, the chunk index,
 * namespaces, eviction, pins and stats. Writers are in tier_wr.c.
 *
 * The index is one hash table for all namespaces, keyed by
 * hashkey_index(ns, key) (kept in each record's policy_item.hkey, so a
 * resize rehashes without touching keys), with intrusive chaining through
 * tier_rec.hnext, doubled when it holds more records than buckets.
 *
 * See tier_i.h for what tier.lock protects and the lock order.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hash/hashkey.h"
#include "tier/tier_i.h"

#define TIER_MIN_BUCKETS 1024

#define rec_of(it) \
	((struct tier_rec *)((char *)(it) - offsetof(struct tier_rec, pi)))

/* Writes a one-line message to err (may be NULL). */
static void errf(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

void tier_log(struct tier *t, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	if (!t->cfg.log)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	t->cfg.log(t->cfg.log_arg, buf);
}

/* The same with tier.lock held: the message waits in t->logbuf (only the
 * first one if several come) until tier_unlock, because config callbacks
 * never run under tier.lock. */
static void log_locked(struct tier *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void log_locked(struct tier *t, const char *fmt, ...)
{
	va_list ap;

	if (!t->cfg.log || t->logbuf[0])
		return;
	va_start(ap, fmt);
	vsnprintf(t->logbuf, sizeof(t->logbuf), fmt, ap);
	va_end(ap);
}

uint64_t tier_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ locking */

void tier_lock(struct tier *t)
{
	pthread_mutex_lock(&t->lock);
}

/*
 * tier_unlock - drops tier.lock, then makes the on_gone calls queued while
 * it was held (callbacks never run under tier.lock).
 */
void tier_unlock(struct tier *t)
{
	struct tier_gone *g;
	char msg[sizeof(t->logbuf)];
	size_t n;

	if (!t->ngone && !t->logbuf[0]) {
		pthread_mutex_unlock(&t->lock);
		return;
	}
	g = t->gone;
	n = t->ngone;
	t->gone = NULL;
	t->ngone = t->gone_cap = 0;
	memcpy(msg, t->logbuf, sizeof(msg));
	t->logbuf[0] = '\0';
	pthread_mutex_unlock(&t->lock);
	if (msg[0])
		tier_log(t, "%s", msg);
	for (size_t i = 0; i < n; i++)
		if (t->cfg.on_gone)
			t->cfg.on_gone(t->cfg.on_gone_arg, g[i].ns, &g[i].key,
				       g[i].why);
	free(g);
}

/* Queues an on_gone call (tier.lock held). */
static void queue_gone(struct tier *t, const struct tier_rec *r,
		       enum tier_gone_reason why)
{
	if (!t->cfg.on_gone)
		return;
	if (t->ngone == t->gone_cap) {
		size_t n = t->gone_cap ? t->gone_cap * 2 : 16;
		struct tier_gone *g = realloc(t->gone, n * sizeof(*g));

		if (!g) {
			log_locked(t, "tier: out of memory queueing an eviction "
				    "notice; a kernel cache entry may stay stale");
			return;
		}
		t->gone = g;
		t->gone_cap = n;
	}
	t->gone[t->ngone].ns = r->ns;
	t->gone[t->ngone].key = r->key;
	t->gone[t->ngone].why = why;
	t->ngone++;
}

void tier_queue_gone(struct tier *t, const struct tier_rec *r,
		     enum tier_gone_reason why)
{
	queue_gone(t, r, why);
}

/* -------------------------------------------------------------- arena */

int tier_arena_write(struct tier *t, uint64_t off, const void *src,
		     size_t len)
{
	if (!len)
		return 0;
	if (t->arena.host) {
		memcpy((char *)t->arena.host + off, src, len);
		return 0;
	}
	return gpu_copy_in(&t->arena, off, src, len);
}

int tier_arena_read(struct tier *t, uint64_t off, void *dst, size_t len)
{
	if (!len)
		return 0;
	if (t->arena.host) {
		memcpy(dst, (const char *)t->arena.host + off, len);
		return 0;
	}
	return gpu_copy_out(&t->arena, off, dst, len);
}

int tier_arena_zero(struct tier *t, uint64_t off, uint64_t len)
{
	if (!len)
		return 0;
	if (t->arena.host) {
		memset((char *)t->arena.host + off, 0, len);
		return 0;
	}
	return gpu_zero(&t->arena, off, len);
}

/* Copies len bytes between two disjoint extents of the arena. */
int tier_arena_move(struct tier *t, uint64_t dst, uint64_t src, uint64_t len)
{
	char *buf;
	int rc = 0;

	if (!len)
		return 0;
	if (t->arena.host) {
		memcpy((char *)t->arena.host + dst,
		       (const char *)t->arena.host + src, len);
		return 0;
	}
	buf = malloc(1u << 20);
	if (!buf)
		return -ENOMEM;
	while (len && rc == 0) {
		size_t n = len < (1u << 20) ? len : (1u << 20);

		rc = gpu_copy_out(&t->arena, src, buf, n);
		if (rc == 0)
			rc = gpu_copy_in(&t->arena, dst, buf, n);
		src += n;
		dst += n;
		len -= n;
	}
	free(buf);
	return rc;
}

/* XXH3-64 of bytes in the arena (device arenas through a bounce buffer). */
int tier_arena_checksum(struct tier *t, uint64_t off, uint64_t len,
			uint64_t *sum)
{
	struct hashkey_sum *s;
	char *buf;
	int rc = 0;

	if (t->arena.host) {
		*sum = hashkey_checksum((const char *)t->arena.host + off, len);
		return 0;
	}
	s = malloc(sizeof(*s));
	buf = malloc(1u << 20);
	if (!s || !buf) {
		free(s);
		free(buf);
		return -ENOMEM;
	}
	hashkey_sum_init(s);
	while (len && rc == 0) {
		size_t n = len < (1u << 20) ? len : (1u << 20);

		rc = gpu_copy_out(&t->arena, off, buf, n);
		hashkey_sum_update(s, buf, n);
		off += n;
		len -= n;
	}
	*sum = hashkey_sum_final(s);
	free(s);
	free(buf);
	return rc;
}

/* -------------------------------------------------------------- index */

static inline bool key_eq(const struct kvfs_key *a, const struct kvfs_key *b)
{
	return memcmp(a->b, b->b, sizeof(a->b)) == 0;
}

struct tier_rec *tier_idx_find(struct tier *t, uint32_t ns,
			       const struct kvfs_key *key)
{
	uint64_t h = hashkey_index(ns, key);
	struct tier_rec *r = t->buckets[h & (t->nbuckets - 1)];

	for (; r; r = r->hnext)
		if (r->pi.hkey == h && r->ns == ns && key_eq(&r->key, key))
			return r;
	return NULL;
}

static void idx_grow(struct tier *t)
{
	uint64_t n = t->nbuckets * 2;
	struct tier_rec **b = calloc(n, sizeof(*b)), *r, *next;

	if (!b)
		return; /* longer chains, still correct */
	for (uint64_t i = 0; i < t->nbuckets; i++)
		for (r = t->buckets[i]; r; r = next) {
			next = r->hnext;
			r->hnext = b[r->pi.hkey & (n - 1)];
			b[r->pi.hkey & (n - 1)] = r;
		}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = n;
}

static bool orphan_add(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		       uint32_t n);
static uint32_t orphan_take(struct tier *t, uint32_t ns,
			    const struct kvfs_key *key, uint64_t h);

/* Inserts r (r->pi.hkey set) into the index and its namespace list. */
void tier_idx_insert(struct tier *t, struct tier_ns *ns, struct tier_rec *r)
{
	struct tier_rec **b = &t->buckets[r->pi.hkey & (t->nbuckets - 1)];

	/* Children already in L1 (published before it, or counted against
	 * an earlier record of this key) are its children now. */
	if (t->norphans)
		r->pi.nchildren += orphan_take(t, r->ns, &r->key, r->pi.hkey);
	r->hnext = *b;
	*b = r;
	r->ns_prev = NULL;
	r->ns_next = ns->head;
	if (ns->head)
		ns->head->ns_prev = r;
	ns->head = r;
	ns->chunks++;
	ns->bytes += r->size;
	t->nrecs++;
	if (t->nrecs > t->nbuckets)
		idx_grow(t);
}

static void idx_remove(struct tier *t, struct tier_rec *r)
{
	struct tier_rec **pp = &t->buckets[r->pi.hkey & (t->nbuckets - 1)];
	struct tier_ns *ns = t->ns[r->ns];

	while (*pp != r)
		pp = &(*pp)->hnext;
	*pp = r->hnext;
	r->hnext = NULL;
	if (r->ns_prev)
		r->ns_prev->ns_next = r->ns_next;
	else
		ns->head = r->ns_next;
	if (r->ns_next)
		r->ns_next->ns_prev = r->ns_prev;
	r->ns_prev = r->ns_next = NULL;
	ns->chunks--;
	ns->bytes -= r->size;
	t->nrecs--;
	/* Its children stay counted under its key (see parent counts). */
	if (r->pi.nchildren &&
	    !orphan_add(t, r->ns, &r->key, r->pi.nchildren))
		log_locked(t, "tier: out of memory keeping a parent's child "
			   "count; prefix eviction order may be off");
	r->pi.nchildren = 0;
}

void tier_idx_remove(struct tier *t, struct tier_rec *r)
{
	idx_remove(t, r);
}

struct tier_ns *tier_ns_get(struct tier *t, uint32_t id)
{
	if (id == 0 || id >= t->ns_next)
		return NULL;
	return t->ns[id];
}

/* ------------------------------------------------------ parent counts */

/*
 * The invariant: for every key K of a namespace, the number of L1 records
 * with TREC_COUNTED whose parent is K equals the nchildren of the record
 * indexed under K, or, when none is indexed, the count of K's orphan entry.
 * The parent's own tier does not matter (a parent demoted to L2 keeps its
 * count and brings it back when promoted); a parent leaving the index
 * leaves its count behind as an orphan entry, which the next record
 * published (or recovered) under that key takes over. So a child counted
 * once is always decremented exactly once, from whichever record holds
 * its key's count, and no generation check is needed.
 */
struct tier_orphan {
	struct tier_orphan *next;
	uint64_t hkey;               /* hashkey_index(ns, key) */
	struct kvfs_key key;
	uint32_t ns;
	uint32_t nchildren;
};

#define TIER_ORPHAN_MIN_BUCKETS 64

static struct tier_orphan **orphan_slot(struct tier *t, uint32_t ns,
					const struct kvfs_key *key,
					uint64_t h)
{
	struct tier_orphan **pp;

	if (!t->orphans)
		return NULL;
	pp = &t->orphans[h & (t->norphan_buckets - 1)];
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->hkey == h && (*pp)->ns == ns &&
		    key_eq(&(*pp)->key, key))
			return pp;
	return pp; /* the end of the chain: *pp == NULL */
}

static void orphan_grow(struct tier *t)
{
	uint64_t n = t->norphan_buckets ? t->norphan_buckets * 2
					: TIER_ORPHAN_MIN_BUCKETS;
	struct tier_orphan **b = calloc(n, sizeof(*b)), *o, *next;

	if (!b)
		return; /* longer chains (or, with none yet, a lost count) */
	for (uint64_t i = 0; i < t->norphan_buckets; i++)
		for (o = t->orphans[i]; o; o = next) {
			next = o->next;
			o->next = b[o->hkey & (n - 1)];
			b[o->hkey & (n - 1)] = o;
		}
	free(t->orphans);
	t->orphans = b;
	t->norphan_buckets = n;
}

/* Adds n children to the orphan count of (ns, key). false when out of
 * memory (the count is lost: the parent, if it comes back, undercounts). */
static bool orphan_add(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		       uint32_t n)
{
	uint64_t h = hashkey_index(ns, key);
	struct tier_orphan **pp, *o;

	if (!n)
		return true;
	if (t->norphans >= t->norphan_buckets)
		orphan_grow(t);
	pp = orphan_slot(t, ns, key, h);
	if (!pp)
		return false;
	if (*pp) {
		(*pp)->nchildren += n;
		return true;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return false;
	o->hkey = h;
	o->key = *key;
	o->ns = ns;
	o->nchildren = n;
	*pp = o;
	t->norphans++;
	return true;
}

/* Removes the orphan entry of (ns, key); returns its count (0 if none). */
static uint32_t orphan_take(struct tier *t, uint32_t ns,
			    const struct kvfs_key *key, uint64_t h)
{
	struct tier_orphan **pp = orphan_slot(t, ns, key, h), *o;
	uint32_t n;

	if (!pp || !*pp)
		return 0;
	o = *pp;
	*pp = o->next;
	n = o->nchildren;
	free(o);
	t->norphans--;
	return n;
}

static void orphan_dec(struct tier *t, uint32_t ns, const struct kvfs_key *key)
{
	uint64_t h = hashkey_index(ns, key);
	struct tier_orphan **pp = orphan_slot(t, ns, key, h);

	if (!pp || !*pp)
		return; /* lost to an allocation failure */
	if (--(*pp)->nchildren == 0)
		orphan_take(t, ns, key, h);
}

static void orphans_free(struct tier *t)
{
	struct tier_orphan *o, *next;

	for (uint64_t i = 0; i < t->norphan_buckets; i++)
		for (o = t->orphans[i]; o; o = next) {
			next = o->next;
			free(o);
		}
	free(t->orphans);
	t->orphans = NULL;
	t->norphan_buckets = t->norphans = 0;
}

/* p's nchildren changed: tell the policy if it tracks p (only L1). */
static void nchildren_changed(struct tier *t, struct tier_rec *p)
{
	if (p->where == TIER_L1 && t->pops->update)
		t->pops->update(t->pol, &p->pi);
}

/*
 * Counts r, an L1 chunk with a known parent, in its parent key's count:
 * the indexed parent's nchildren whatever tier the parent is in, else the
 * key's orphan entry (tier.lock held). Idempotent.
 */
void tier_count_parent(struct tier *t, struct tier_rec *r)
{
	struct tier_rec *p;

	if (!(r->flags & TREC_HAS_PARENT) || r->where != TIER_L1 ||
	    (r->flags & (TREC_COUNTED | TREC_ZOMBIE)))
		return;
	p = tier_idx_find(t, r->ns, &r->parent);
	if (p == r)
		return;
	if (p) {
		p->pi.nchildren++;
		nchildren_changed(t, p);
	} else if (!orphan_add(t, r->ns, &r->parent, 1)) {
		log_locked(t, "tier: out of memory counting a chunk's parent; "
			   "prefix eviction order may be off");
		return;
	}
	r->flags |= TREC_COUNTED;
}

/* Undoes tier_count_parent when r leaves L1 or the index (tier.lock
 * held). */
static void uncount_parent(struct tier *t, struct tier_rec *r)
{
	struct tier_rec *p;

	if (!(r->flags & TREC_COUNTED))
		return;
	r->flags &= (uint8_t)~TREC_COUNTED;
	p = tier_idx_find(t, r->ns, &r->parent);
	if (!p) {
		orphan_dec(t, r->ns, &r->parent);
		return;
	}
	if (!p->pi.nchildren)
		return; /* a count lost to an allocation failure */
	p->pi.nchildren--;
	nchildren_changed(t, p);
}

/* -------------------------------------------------------------- pins */

void tier_ref(struct tier *t, struct tier_rec *r)
{
	if (r->pi.refs++ == 0)
		t->pinned_bytes += rec_l1_len(r);
}

static void free_extent(struct tier *t, struct tier_rec *r)
{
	if (r->l1_pages)
		l1_alloc_put(t->alloc, r->l1_off, rec_l1_len(r));
	r->l1_pages = 0;
}

void tier_unref(struct tier *t, struct tier_rec *r)
{
	if (!r->pi.refs || --r->pi.refs)
		return;
	t->pinned_bytes -= rec_l1_len(r);
	if (!(r->flags & TREC_ZOMBIE))
		return;
	/* The last pin of an unlinked chunk: now its bytes can go. */
	if (r->ns_prev)
		r->ns_prev->ns_next = r->ns_next;
	else
		t->zombies = r->ns_next;
	if (r->ns_next)
		r->ns_next->ns_prev = r->ns_prev;
	t->nzombies--;
	free_extent(t, r);
	free(r);
}

/* ----------------------------------------------------------- eviction */

/* Tells the policy about a new L1 capacity estimate when the average chunk
 * size has moved by more than a quarter (tier.lock held). */
void tier_policy_capacity(struct tier *t)
{
	uint64_t est;

	if (t->l1_chunks < 16 || !t->l1_bytes || !t->pops->resize)
		return;
	est = (uint64_t)((double)t->l1_cap * (double)t->l1_chunks /
			 (double)t->l1_bytes);
	if (est < 16)
		est = 16;
	if (est > t->cap_items + t->cap_items / 4 ||
	    est < t->cap_items - t->cap_items / 4) {
		t->cap_items = est;
		t->pops->resize(t->pol, est);
	}
}

/* Takes r out of L1 bookkeeping (policy excluded): parent counts, stats,
 * its extent. tier.lock held. */
static void leave_l1(struct tier *t, struct tier_rec *r)
{
	uncount_parent(t, r);
	t->l1_bytes -= rec_l1_len(r);
	t->l1_chunks--;
	if (r->pi.refs)
		t->pinned_bytes -= rec_l1_len(r);
	free_extent(t, r);
	r->where = TIER_NONE;
}

/*
 * tier_evict_one - evicts one unpinned published chunk chosen by the policy
 * (tier.lock held). Returns 0, or -ENOSPC when every L1 chunk is pinned.
 *
 * This is the ONE place where a chunk leaves L1 because of space. Today the
 * victim is dropped: it leaves the index and on_gone(TIER_GONE_EVICTED) is
 * queued. The L2 engine hooks in here: with ingest=evicted it demotes the
 * victim to L2 instead (record stays in the index with where = TIER_L2 and
 * no on_gone call), and only drops it when L2 cannot take it.
 */
int tier_evict_one(struct tier *t)
{
	struct policy_item *it = t->pops->evict(t->pol);
	struct tier_rec *r;

	if (!it)
		return -ENOSPC;
	r = rec_of(it);
	if (r->pi.refs) {
		/* A policy bug; keep the chunk and refuse rather than free
		 * pinned bytes. */
		log_locked(t, "tier: policy %s chose a pinned victim",
			 t->pops->name);
		t->pops->insert(t->pol, &r->pi);
		return -ENOSPC;
	}
	if (t->l2 && tier_l2_evicting(t, r)) {
		/* demoted: stays indexed as an L2 chunk */
		leave_l1(t, r);
		r->where = TIER_L2;
		t->evictions++;
		t->demotions++;
		return 0;
	}
	idx_remove(t, r);
	leave_l1(t, r);
	t->evictions++;
	queue_gone(t, r, TIER_GONE_EVICTED);
	free(r);
	return 0;
}

/*
 * tier_alloc_evict - an arena extent of len bytes (len rounded, > 0),
 * evicting unpinned chunks by policy until one fits. -ENOSPC (nothing
 * evicted) when pinned chunks and writers leave too little room.
 * tier.lock held.
 */
int tier_alloc_evict(struct tier *t, uint64_t len, uint64_t *off)
{
	uint64_t held = t->pinned_bytes + t->writer_bytes;
	int rc;

	if (held > t->l1_cap || len > t->l1_cap - held)
		return -ENOSPC;
	for (;;) {
		rc = l1_alloc_get(t->alloc, len, off);
		if (rc != -ENOSPC)
			return rc;
		if (tier_evict_one(t) < 0)
			return -ENOSPC;
	}
}

/* ------------------------------------------------------ create/destroy */

void tier_config_default(struct tier_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->l1_size = 1ull << 30;
	cfg->max_chunk = 64ull << 20;
	cfg->policy = "s3fifo";
	cfg->l1 = "host";
	cfg->compress_level = 1;
	cfg->ingest = TIER_INGEST_EVICTED;
	cfg->hot_hits = 2;
	cfg->shuffle = 2; /* KV caches are mostly bf16/fp16 */
}

static int check_config(const struct tier_config *cfg, char *err,
			size_t errlen)
{
	const char *const *names;
	char list[128] = "";
	size_t n = 0;

	if (!policy_find(cfg->policy)) {
		for (names = policy_names(); *names; names++)
			n += (size_t)snprintf(list + n, n < sizeof(list) ?
					      sizeof(list) - n : 0, "%s%s",
					      n ? ", " : "", *names);
		errf(err, errlen, "unknown policy '%s' (valid: %s)",
		     cfg->policy ? cfg->policy : "(null)", list);
		return -EINVAL;
	}
	if (cfg->l1_size < L1_ALIGN) {
		errf(err, errlen,
		     "l1_size %llu is smaller than one chunk (%u bytes minimum)",
		     (unsigned long long)cfg->l1_size, L1_ALIGN);
		return -EINVAL;
	}
	if (cfg->max_chunk == 0) {
		errf(err, errlen, "max_chunk must be > 0");
		return -EINVAL;
	}
	if (cfg->max_chunk > (cfg->l1_size & ~(uint64_t)(L1_ALIGN - 1))) {
		errf(err, errlen,
		     "max_chunk %llu is larger than l1_size %llu: a chunk "
		     "must fit in L1",
		     (unsigned long long)cfg->max_chunk,
		     (unsigned long long)cfg->l1_size);
		return -EINVAL;
	}
	if (cfg->max_chunk / L1_ALIGN > UINT32_MAX) {
		errf(err, errlen, "max_chunk %llu is too large",
		     (unsigned long long)cfg->max_chunk);
		return -EINVAL;
	}
	return 0; /* L2 options: tier_l2_open */
}

static char *dup_or_null(const char *s, bool *fail)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*fail = true;
	return d;
}

int tier_create(const struct tier_config *cfg, struct tier **out,
		char *err, size_t errlen)
{
	struct tier *t;
	bool fail = false;
	int rc;

	if (!cfg || !out) {
		errf(err, errlen, "tier_create: no config");
		return -EINVAL;
	}
	rc = check_config(cfg, err, errlen);
	if (rc < 0)
		return rc;
	t = calloc(1, sizeof(*t));
	if (!t) {
		errf(err, errlen, "tier_create: out of memory");
		return -ENOMEM;
	}
	t->cfg = *cfg;
	t->policy_name = dup_or_null(cfg->policy, &fail);
	t->l1_spec = dup_or_null(cfg->l1, &fail);
	t->l2_dir = dup_or_null(cfg->l2_dir, &fail);
	t->cfg.policy = t->policy_name;
	t->cfg.l1 = t->l1_spec;
	t->cfg.l2_dir = t->l2_dir;
	t->l1_cap = cfg->l1_size & ~(uint64_t)(L1_ALIGN - 1);
	t->nbuckets = TIER_MIN_BUCKETS;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	t->ns_cap = 16;
	t->ns_next = 1; /* id 0 is never a namespace */
	t->ns = calloc(t->ns_cap, sizeof(*t->ns));
	if (fail || !t->buckets || !t->ns) {
		errf(err, errlen, "tier_create: out of memory");
		rc = -ENOMEM;
		goto err_free;
	}
	pthread_mutex_init(&t->lock, NULL);
	t->arena.memfd = -1;
	rc = gpu_arena_open(t->cfg.l1, t->l1_cap, &t->arena, err, errlen);
	if (rc < 0)
		goto err_mutex;
	rc = l1_alloc_create(t->l1_cap, &t->alloc);
	if (rc < 0) {
		errf(err, errlen, "l1 allocator: %s", strerror(-rc));
		goto err_arena;
	}
	t->pops = policy_find(t->cfg.policy);
	/* First guess: 1 MiB chunks; corrected once chunks arrive. */
	t->cap_items = t->l1_cap >> 20 > 16 ? t->l1_cap >> 20 : 16;
	rc = t->pops->create(&t->pol, t->cap_items);
	if (rc < 0) {
		errf(err, errlen, "policy %s: %s", t->pops->name,
		     strerror(-rc));
		goto err_alloc;
	}
	rc = tier_l2_open(t, err, errlen);
	if (rc < 0) {
		tier_destroy(t);
		return rc;
	}
	*out = t;
	return 0;

err_alloc:
	l1_alloc_destroy(t->alloc);
err_arena:
	gpu_arena_close(&t->arena);
err_mutex:
	pthread_mutex_destroy(&t->lock);
err_free:
	free(t->buckets);
	free(t->ns);
	free(t->policy_name);
	free(t->l1_spec);
	free(t->l2_dir);
	free(t);
	return rc;
}

void tier_destroy(struct tier *t)
{
	struct tier_rec *r, *next;
	struct tier_wr *w, *wnext;

	if (!t)
		return;
	tier_l2_close(t); /* flush_on_exit; callbacks still see the index */
	/* The policy only links records; drop it before freeing them. */
	t->pops->destroy(t->pol);
	for (uint64_t i = 0; i < t->nbuckets; i++)
		for (r = t->buckets[i]; r; r = next) {
			next = r->hnext;
			free(r);
		}
	for (r = t->zombies; r; r = next) {
		next = r->ns_next;
		free(r);
	}
	for (w = t->writers; w; w = wnext) {
		wnext = w->next;
		pthread_mutex_destroy(&w->mu);
		free(w);
	}
	for (uint32_t i = 0; i < t->ns_next; i++)
		free(t->ns[i]);
	free(t->ns);
	free(t->buckets);
	orphans_free(t);
	free(t->gone);
	l1_alloc_destroy(t->alloc);
	gpu_arena_close(&t->arena);
	pthread_mutex_destroy(&t->lock);
	free(t->policy_name);
	free(t->l1_spec);
	free(t->l2_dir);
	free(t);
}

/* ---------------------------------------------------------- namespaces */

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

static struct tier_ns *ns_by_name(struct tier *t, const char *name)
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
	if (ns_by_name(t, name)) {
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
	ns = ns_by_name(t, name);
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
		info->shuffle = ns->shuffle;
		info->chunks = ns->chunks;
		info->bytes = ns->bytes;
		info->hits = ns->hits;
	}
	tier_unlock(t);
	return ns ? 0 : -ENOENT;
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

/* --------------------------------------------------------------- reads */

static void fill_info(const struct tier_rec *r, struct tier_info *info)
{
	memset(info, 0, sizeof(*info));
	info->size = r->size;
	info->stored_bytes = tier_l2_stored(r);
	info->checksum = r->checksum;
	info->checksum_known = !(r->flags & TREC_NOSUM);
	info->atime_ns = r->atime_ns;
	info->hits = r->hits;
	info->gen = r->gen;
	info->refs = r->pi.refs;
	info->depth = r->pi.depth;
	info->where = (enum tier_where)r->where;
	info->has_parent = r->flags & TREC_HAS_PARENT;
	info->user_pin = r->flags & TREC_USER_PIN;
	if (info->has_parent)
		info->parent = r->parent;
}

int tier_stat(struct tier *t, uint32_t ns, const struct kvfs_key *key,
	      struct tier_info *info)
{
	struct tier_rec *r;

	tier_lock(t);
	r = tier_idx_find(t, ns, key);
	if (r)
		fill_info(r, info);
	tier_unlock(t);
	return r ? 0 : -ENOENT;
}

int tier_checksum(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		  uint64_t gen, uint64_t *sum)
{
	struct tier_rec *r;
	uint64_t off, len, s;
	int rc;

	tier_lock(t);
	r = tier_idx_find(t, ns, key);
	if (!r || (gen && r->gen != gen)) {
		tier_unlock(t);
		return r ? -ESTALE : -ENOENT;
	}
	if (!(r->flags & TREC_NOSUM) || r->where != TIER_L1) {
		*sum = r->checksum;
		tier_unlock(t);
		return 0;
	}
	/* Only published L1 chunks lack a sum (an L2 copy brings its own):
	 * hold a reference so the extent stays while we read it unlocked. */
	tier_ref(t, r);
	off = r->l1_off;
	len = r->size;
	tier_unlock(t);
	rc = tier_arena_checksum(t, off, len, &s);
	tier_lock(t);
	if (rc == 0) {
		r->checksum = s;
		r->flags &= (uint8_t)~TREC_NOSUM;
		*sum = s;
	}
	tier_unref(t, r);
	tier_unlock(t);
	return rc;
}

void tier_count_misses(struct tier *t, int64_t n)
{
	tier_lock(t);
	if (n >= 0)
		t->misses += (uint64_t)n;
	else
		t->misses -= t->misses < (uint64_t)-n ? t->misses : (uint64_t)-n;
	tier_unlock(t);
}

/* An access at logical time tick (for the policy), wall clock for the
 * xattr. */
static void touch_at(struct tier *t, struct tier_rec *r, uint64_t tick)
{
	r->pi.atime = tick;
	r->atime_ns = tier_now_ns();
	if (r->where == TIER_L1)
		t->pops->access(t->pol, &r->pi);
}

static void touch(struct tier *t, struct tier_rec *r)
{
	touch_at(t, r, ++t->clock);
}

int tier_get(struct tier *t, uint32_t ns, const struct kvfs_key *key,
	     struct tier_chunk **out)
{
	struct tier_chunk *c = malloc(sizeof(*c));
	struct tier_rec *r;
	struct tier_ns *n;

	if (!c)
		return -ENOMEM;
	tier_lock(t);
	n = tier_ns_get(t, ns);
	r = n ? tier_idx_find(t, ns, key) : NULL;
	if (!r) {
		t->misses++;
		tier_unlock(t);
		free(c);
		return -ENOENT;
	}
	touch(t, r);
	r->hits++;
	if (r->l2_heat < UINT16_MAX)
		r->l2_heat++;
	n->hits++;
	t->hits++;
	tier_ref(t, r);
	t->nchunks_handed++;
	c->rec = r;
	c->off = r->l1_off;
	c->ptr = t->arena.host ? (const char *)t->arena.host + r->l1_off
			       : NULL;
	c->size = r->size;
	c->gen = r->gen;
	c->tmp = NULL;
	if (r->where != TIER_L1) {
		int rc = tier_l2_fill(t, r, c);

		if (rc < 0) {
			/* a miss: not served (see tier_l2_fill) */
			t->hits--;
			t->misses++;
			if (!(r->flags & TREC_ZOMBIE))
				n->hits--;
			t->nchunks_handed--;
			tier_unref(t, r);
			tier_unlock(t);
			free(c);
			return rc == -ENOMEM ? rc : -ENOENT;
		}
	} else {
		tier_l2_on_hit(t, r);
	}
	tier_unlock(t);
	*out = c;
	return 0;
}

const void *tier_chunk_ptr(const struct tier_chunk *c)
{
	return c->tmp ? c->tmp : c->ptr;
}

uint64_t tier_chunk_size(const struct tier_chunk *c)
{
	return c->size;
}

uint64_t tier_chunk_gen(const struct tier_chunk *c)
{
	return c->gen;
}

long tier_chunk_read(struct tier *t, const struct tier_chunk *c, void *buf,
		     size_t len, uint64_t off)
{
	int rc;

	if (off >= c->size)
		return 0;
	if (len > c->size - off)
		len = (size_t)(c->size - off);
	if (c->tmp) {
		memcpy(buf, (const char *)c->tmp + off, len);
		return (long)len;
	}
	rc = tier_arena_read(t, c->off + off, buf, len);
	return rc < 0 ? rc : (long)len;
}

void tier_put(struct tier *t, struct tier_chunk *c)
{
	if (!c)
		return;
	tier_lock(t);
	tier_unref(t, c->rec);
	t->nchunks_handed--;
	tier_unlock(t);
	free(c->tmp);
	free(c);
}

int tier_unlink(struct tier *t, uint32_t ns, const struct kvfs_key *key)
{
	struct tier_rec *r;
	bool waited = false, sync;
	int waits = 0;

	tier_lock(t);
again:
	r = tier_idx_find(t, ns, key);
	if (!r) {
		tier_unlock(t);
		if (waited)
			tier_l2_sync_frees(t);
		return -ENOENT;
	}
	/* An L2 write of the chunk in flight: let it land, then erase it
	 * with the rest, so a daemon killed after the unlink returns does
	 * not bring the chunk back from L2. */
	if (waits < 3 && tier_l2_wait_write(t, r)) {
		waited = true;
		waits++; /* republished meanwhile and written again: a few */
		goto again;
	}
	idx_remove(t, r);
	sync = tier_l2_forget(t, r) || waited;
	if (r->where == TIER_L1) {
		t->pops->remove(t->pol, &r->pi);
		/* Keep the extent while pinned: only the bookkeeping goes. */
		uncount_parent(t, r);
		t->l1_bytes -= rec_l1_len(r);
		t->l1_chunks--;
	}
	if (r->flags & TREC_USER_PIN) {
		r->flags &= (uint8_t)~TREC_USER_PIN;
		r->pi.refs--;
		if (!r->pi.refs)
			t->pinned_bytes -= rec_l1_len(r);
	}
	if (r->pi.refs) {
		/* Readers and key pins keep the bytes until they let go. */
		r->flags |= TREC_ZOMBIE;
		r->ns_prev = NULL;
		r->ns_next = t->zombies;
		if (t->zombies)
			t->zombies->ns_prev = r;
		t->zombies = r;
		t->nzombies++;
	} else {
		free_extent(t, r);
		free(r);
	}
	tier_unlock(t);
	if (sync)
		tier_l2_sync_frees(t);
	return 0;
}

int tier_set_user_pin(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		      bool on)
{
	struct tier_rec *r;

	tier_lock(t);
	r = tier_idx_find(t, ns, key);
	if (r && on && !(r->flags & TREC_USER_PIN)) {
		r->flags |= TREC_USER_PIN;
		tier_ref(t, r);
		if (r->where == TIER_L2)
			tier_l2_pin_promote(t, r); /* "keeps it in L1" */
	} else if (r && !on && (r->flags & TREC_USER_PIN)) {
		r->flags &= (uint8_t)~TREC_USER_PIN;
		tier_unref(t, r);
	}
	tier_unlock(t);
	return r ? 0 : -ENOENT;
}

/* Fills unknown parent/depth of r (tier.lock held). */
static void set_parent(struct tier *t, struct tier_rec *r,
		       const struct kvfs_key *parent, uint32_t depth)
{
	if (parent && !(r->flags & TREC_HAS_PARENT) &&
	    !key_eq(parent, &r->key)) {
		r->parent = *parent;
		r->flags |= TREC_HAS_PARENT;
	}
	if (depth && !r->pi.depth) {
		r->pi.depth = depth;
		if (r->where == TIER_L1 && t->pops->update)
			t->pops->update(t->pol, &r->pi);
	}
	/* Also (re)counts a child whose parent was published after it. */
	if (parent && (r->flags & TREC_HAS_PARENT) && key_eq(parent, &r->parent))
		tier_count_parent(t, r);
}

int tier_set_parent(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		    const struct kvfs_key *parent, uint32_t depth)
{
	struct tier_rec *r;

	tier_lock(t);
	r = tier_idx_find(t, ns, key);
	if (r)
		set_parent(t, r, parent, depth);
	tier_unlock(t);
	return r ? 0 : -ENOENT;
}

/* ------------------------------------------------------ batched lookup */

/* tier_lookup and tier_lookup_pinned; gens (with pin) may be NULL. */
static int lookup_run(struct tier *t, uint32_t ns,
		      const struct kvfs_key *keys, uint32_t nkeys,
		      uint32_t depth_base, bool pin, bool prefetch,
		      uint64_t *gens, uint32_t *found, uint32_t *in_l1,
		      uint32_t *in_l2)
{
	uint32_t i, l1 = 0, l2 = 0;
	struct tier_rec *r;
	uint64_t tick;

	tier_lock(t);
	if (!tier_ns_get(t, ns)) {
		tier_unlock(t);
		return -ENOENT;
	}
	/* The chunks of one request's chain are used together: one logical
	 * time for all of them, so the prefix policy's tie rule (the deeper
	 * chunk first) orders them. */
	tick = ++t->clock;
	for (i = 0; i < nkeys; i++) {
		r = tier_idx_find(t, ns, &keys[i]);
		if (!r)
			break;
		set_parent(t, r, i ? &keys[i - 1] : NULL, depth_base + i);
		touch_at(t, r, tick);
		if (r->where == TIER_L1)
			l1++;
		else
			l2++;
		if (prefetch && r->where == TIER_L2)
			tier_l2_prefetch(t, r);
		if (pin) {
			tier_ref(t, r);
			r->kpins++;
			if (gens)
				gens[i] = r->gen;
		}
	}
	/* the keys past the cached run: the engine recomputes them */
	t->misses += nkeys - i;
	tier_unlock(t);
	if (found)
		*found = i;
	if (in_l1)
		*in_l1 = l1;
	if (in_l2)
		*in_l2 = l2;
	return 0;
}

int tier_lookup(struct tier *t, uint32_t ns, const struct kvfs_key *keys,
		uint32_t nkeys, uint32_t depth_base, bool pin, bool prefetch,
		uint32_t *found, uint32_t *in_l1, uint32_t *in_l2)
{
	return lookup_run(t, ns, keys, nkeys, depth_base, pin, prefetch, NULL,
			  found, in_l1, in_l2);
}

int tier_lookup_pinned(struct tier *t, uint32_t ns,
		       const struct kvfs_key *keys, uint32_t nkeys,
		       uint32_t depth_base, bool prefetch, uint64_t *gens,
		       uint32_t *found, uint32_t *in_l1, uint32_t *in_l2)
{
	if (!gens)
		return -EINVAL;
	return lookup_run(t, ns, keys, nkeys, depth_base, true, prefetch, gens,
			  found, in_l1, in_l2);
}

int tier_pin_key(struct tier *t, uint32_t ns, const struct kvfs_key *key)
{
	struct tier_rec *r;

	tier_lock(t);
	r = tier_idx_find(t, ns, key);
	if (r) {
		tier_ref(t, r);
		r->kpins++;
	}
	tier_unlock(t);
	return r ? 0 : -ENOENT;
}

/*
 * Key pins are interchangeable: the one released is the indexed chunk's if
 * it holds any, else an unlinked (zombie) chunk's of the same key, so every
 * tier_pin_key / tier_lookup(pin) is balanced by exactly one release even
 * across an unlink and re-publication of the key.
 */
void tier_unpin_key(struct tier *t, uint32_t ns, const struct kvfs_key *key)
{
	struct tier_rec *r;

	tier_lock(t);
	r = tier_idx_find(t, ns, key);
	if (!r || !r->kpins)
		for (r = t->zombies; r; r = r->ns_next)
			if (r->ns == ns && r->kpins && key_eq(&r->key, key))
				break;
	if (r) {
		r->kpins--;
		tier_unref(t, r);
	}
	tier_unlock(t);
}

/*
 * A pin remembers the generation it was taken on: the chunk released is the
 * one of that publication, indexed or unlinked, never a later copy of the
 * same key that someone else may have pinned meanwhile.
 */
void tier_unpin_gen(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		    uint64_t gen)
{
	struct tier_rec *r;

	if (!gen) {
		tier_unpin_key(t, ns, key);
		return;
	}
	tier_lock(t);
	r = tier_idx_find(t, ns, key);
	if (!r || r->gen != gen || !r->kpins)
		for (r = t->zombies; r; r = r->ns_next)
			if (r->gen == gen && r->ns == ns && r->kpins &&
			    key_eq(&r->key, key))
				break;
	if (r) {
		r->kpins--;
		tier_unref(t, r);
	} else {
		log_locked(t, "tier: unpin of a chunk (gen %llu) that holds no "
			   "key pin", (unsigned long long)gen);
	}
	tier_unlock(t);
}

/* ------------------------------------------------------------- listing */

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

/* --------------------------------------------------------------- stats */

void tier_get_stats(struct tier *t, struct tier_stats *st)
{
	uint64_t meta;

	memset(st, 0, sizeof(*st));
	tier_lock(t);
	st->l1_capacity = t->l1_cap;
	st->l1_bytes = t->l1_bytes;
	st->l1_chunks = t->l1_chunks;
	tier_l2_stats(t, st);
	st->hits = t->hits;
	st->misses = t->misses;
	st->evictions = t->evictions;
	st->publishes = t->publishes;
	st->discards = t->discards;
	st->promotions = t->promotions;
	st->demotions = t->demotions;
	st->writers = t->nwriters;
	st->writer_bytes = t->writer_bytes;
	meta = sizeof(*t);
	meta += (t->nrecs + t->nzombies) * sizeof(struct tier_rec);
	meta += t->nbuckets * sizeof(*t->buckets);
	meta += t->nwriters * sizeof(struct tier_wr);
	meta += t->nchunks_handed * sizeof(struct tier_chunk);
	meta += t->ns_cap * sizeof(*t->ns) + t->ns_count * sizeof(struct tier_ns);
	meta += t->gone_cap * sizeof(struct tier_gone);
	meta += t->norphan_buckets * sizeof(*t->orphans) +
		t->norphans * sizeof(struct tier_orphan);
	meta += l1_alloc_meta_bytes(t->alloc);
	if (t->pops->meta_bytes)
		meta += t->pops->meta_bytes(t->pol);
	st->meta_bytes = meta;
	tier_unlock(t);
}

void tier_arena_info(struct tier *t, struct tier_arena_info *info)
{
	info->memfd = t->arena.memfd;
	info->kind = t->arena.handle_kind;
	info->device = t->arena.device;
	info->size = t->l1_cap;
	info->backend = t->arena.ops->name;
}

long long tier_chunk_offset(const struct tier_chunk *c)
{
	if (c->tmp)
		return -ENODATA;
	return (long long)c->off;
}

int tier_arena_export(struct tier *t, const struct tier_chunk *c,
		      uint8_t ipc[64], uint64_t *offset, void **cookie)
{
	struct gpu_export ex;
	int rc;

	*cookie = NULL;
	if (c->tmp)
		return -ENODATA;
	/* host: -ENOTSUP from the backend; pinned: a DMA into a buffer of
	 * its own; cuda: a device-to-device copy into one */
	if (!t->arena.ops->export_handle)
		return -ENOTSUP;
	/* c is pinned: its extent cannot move or be freed meanwhile. */
	memset(&ex, 0, sizeof(ex));
	rc = gpu_export_range(&t->arena, c->off, c->size, &ex);
	if (rc < 0)
		return rc;
	memcpy(ipc, ex.ipc, sizeof(ex.ipc));
	*offset = ex.offset;
	*cookie = ex.cookie;
	return 0;
}

void tier_arena_unexport(struct tier *t, void *cookie)
{
	if (cookie)
		gpu_unexport(&t->arena, cookie);
}
