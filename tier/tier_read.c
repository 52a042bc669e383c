/*
 * tier_read.c - everything that reads or changes one published chunk
 * (pins are in tier_rec.c): stat, checksum, get/put (the bytes handed
 * to fs/), unlink, the user pin and the parent key.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tier/tier_i.h"

void tier_count_served(struct tier *t, uint64_t bytes)
{
	__atomic_add_fetch(&t->bytes_out, bytes, __ATOMIC_RELAXED);
}

void tier_fill_info(const struct tier_rec *r, struct tier_info *info)
{
	memset(info, 0, sizeof(*info));
	info->size = r->size;
	info->stored_bytes = tier_l2_stored(r);
	info->checksum = r->checksum;
	info->checksum_known = !(r->flags & TREC_NOSUM);
	info->atime_ns = r->atime_ns;
	info->ptime_ns = (uint64_t)r->ptime_s * 1000000000ULL;
	info->hits = r->hits;
	info->gen = r->gen;
	info->refs = r->pi.refs;
	info->depth = r->pi.depth;
	info->where = (enum tier_where)r->where;
	info->has_parent = r->flags & TREC_HAS_PARENT;
	info->user_pin = r->flags & TREC_USER_PIN;
	info->in_l2 = r->flags & (TREC_L2 | TREC_L2W);
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
		tier_fill_info(r, info);
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

void tier_count_name_misses(struct tier *t, int64_t n)
{
	uint64_t *m = &t->name_misses;

	tier_lock(t);
	if (n >= 0)
		*m += (uint64_t)n;
	else
		*m -= *m < (uint64_t)-n ? *m : (uint64_t)-n;
	tier_unlock(t);
}

/* An access at logical time tick (for the policy), wall clock now_ns
 * (tier_now_ns) for the xattr. */
void tier_touch_at(struct tier *t, struct tier_rec *r, uint64_t tick,
		   uint64_t now_ns)
{
	r->pi.atime = tick;
	r->atime_ns = now_ns;
	if (r->where == TIER_L1)
		t->pops->access(t->pol, &r->pi);
}

void tier_touch(struct tier *t, struct tier_rec *r)
{
	tier_touch_at(t, r, ++t->clock, tier_now_ns());
}

int tier_get(struct tier *t, uint32_t ns, const struct kvfs_key *key,
	     struct tier_chunk **out)
{
	return tier_get_flags(t, ns, key, 0, out);
}

/* tier_unlink_rec_locked (unlink) or tier_drop_rec_locked (below). */
static bool rec_leave(struct tier *t, struct tier_rec *r, bool unlink);

static int get(struct tier *t, uint32_t ns, const struct kvfs_key *key,
	       unsigned flags, uint64_t reader, struct tier_chunk **out);

int tier_get_flags(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		   unsigned flags, struct tier_chunk **out)
{
	return get(t, ns, key, flags, 0, out);
}

int tier_get_by(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		uint64_t reader, struct tier_chunk **out)
{
	return get(t, ns, key, 0, reader, out);
}

int tier_get_flags_by(struct tier *t, uint32_t ns,
		      const struct kvfs_key *key, unsigned flags,
		      uint64_t reader, struct tier_chunk **out)
{
	return get(t, ns, key, flags, reader, out);
}

/* c pins r (tier.lock held). */
static void hand_out(struct tier *t, struct tier_rec *r, struct tier_chunk *c)
{
	tier_ref(t, r);
	t->nchunks_handed++;
	c->rec = r;
	c->off = r->l1_off;
	c->ptr = t->arena.host ? (const char *)t->arena.host + r->l1_off
			       : NULL;
	c->size = r->size;
	c->gen = r->gen;
	c->tmp = NULL;
	c->nobytes = false;
}

/* tier_get_flags for reader (0: not known). */
static int get(struct tier *t, uint32_t ns, const struct kvfs_key *key,
	       unsigned flags, uint64_t reader, struct tier_chunk **out)
{
	bool count = !(flags & TIER_GET_NOCOUNT);
	enum tier_from from = TIER_FROM_L1;
	struct tier_chunk *c = malloc(sizeof(*c));
	struct tier_rec *r;
	struct tier_ns *n;
	bool tried_l3 = false;

	if (!c)
		return -ENOMEM;
again:
	tier_lock(t);
	n = tier_ns_get(t, ns);
	r = n ? tier_idx_find(t, ns, key) : NULL;
	if (!r && n && t->l3 && !tried_l3) {
		/* not local: L3 may have it (another node wrote it) */
		tier_unlock(t);
		tried_l3 = true;
		if (tier_l3_promote(t, ns, key) == 0) {
			from = TIER_FROM_L3;
			goto again;
		}
		tier_lock(t);
	}
	if (!r) {
		t->read_misses += count;
		tier_unlock(t);
		free(c);
		return -ENOENT;
	}
	if (r->where != TIER_L1)
		from = TIER_FROM_L2;
	tier_touch(t, r);
	r->hits++;
	if (r->l2_heat < UINT8_MAX)
		r->l2_heat++;
	n->hits += count;
	t->read_hits[from] += count;
	if (r->where != TIER_L1 && (flags & TIER_GET_NOFILL)) {
		/* not pinned: the reader's bytes are the caller's own copy's,
		 * so the chunk may leave L2 meanwhile (a pin here would hold
		 * L2's room for bytes nobody reads from it: held opens of
		 * such chunks filled L2 and stalled its appends, review 28) */
		memset(c, 0, sizeof(*c));
		c->size = r->size;
		c->gen = r->gen;
		c->nobytes = true;
	} else {
		hand_out(t, r, c);
	}
	if (r->where != TIER_L1 && !c->nobytes) {
		int rc = tier_l2_fill(t, r, c);

		if (rc < 0) {
			/* a miss: not served (see tier_l2_fill) */
			t->read_hits[from] -= count;
			t->read_misses += count;
			if (!(r->flags & TREC_ZOMBIE))
				n->hits -= count;
			t->nchunks_handed--;
			tier_unref(t, r);
			tier_unlock(t);
			free(c);
			return rc == -ENOMEM ? rc : -ENOENT;
		}
	} else if (r->where == TIER_L1) {
		tier_l2_on_hit(t, r);
		tier_l3_on_hit(t, r);
	}
	if (count) /* an engine's read: readahead follows it */
		tier_ra_on_read(t, r, reader, flags & TIER_GET_NOFILL);
	tier_unlock(t);
	*out = c;
	return 0;
}

const void *tier_chunk_ptr(const struct tier_chunk *c)
{
	return c->tmp ? c->tmp : c->ptr;
}

bool tier_chunk_has_bytes(const struct tier_chunk *c)
{
	return !c->nobytes;
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

	if (c->nobytes)
		return -EIO;
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

int tier_pin_l1(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		uint64_t gen, struct tier_chunk **out)
{
	struct tier_chunk *c = malloc(sizeof(*c));
	struct tier_rec *r;

	if (!c)
		return -ENOMEM;
	tier_lock(t);
	r = tier_ns_get(t, ns) ? tier_idx_find(t, ns, key) : NULL;
	if (!r || r->gen != gen || r->where != TIER_L1) {
		tier_unlock(t);
		free(c);
		return -ENOENT;
	}
	hand_out(t, r, c);
	tier_unlock(t);
	*out = c;
	return 0;
}

int tier_chunk_dup(struct tier *t, const struct tier_chunk *c,
		   struct tier_chunk **out)
{
	struct tier_chunk *d;

	if (c->nobytes)
		return -EINVAL; /* pins nothing: nothing to pin again */
	d = malloc(sizeof(*d));
	if (!d)
		return -ENOMEM;
	*d = *c;
	if (c->tmp) { /* served from a buffer of its own: a copy */
		d->tmp = malloc(c->size ? c->size : 1);
		if (!d->tmp) {
			free(d);
			return -ENOMEM;
		}
		memcpy(d->tmp, c->tmp, c->size);
	}
	tier_lock(t);
	tier_ref(t, c->rec);
	t->nchunks_handed++;
	tier_unlock(t);
	*out = d;
	return 0;
}

void tier_put(struct tier *t, struct tier_chunk *c)
{
	if (!c)
		return;
	if (c->rec) { /* (TIER_GET_NOFILL's chunks pin nothing) */
		tier_lock(t);
		tier_unref(t, c->rec);
		t->nchunks_handed--;
		tier_unlock(t);
	}
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
	sync = tier_unlink_rec_locked(t, r) || waited;
	tier_unlock(t);
	if (sync)
		tier_l2_sync_frees(t);
	return 0;
}

int tier_sync(struct tier *t, uint32_t ns, const struct kvfs_key *key)
{
	return tier_l2_sync(t, ns, key);
}

bool tier_unlink_rec_locked(struct tier *t, struct tier_rec *r)
{
	return rec_leave(t, r, true);
}

bool tier_drop_rec_locked(struct tier *t, struct tier_rec *r)
{
	return rec_leave(t, r, false);
}

static bool rec_leave(struct tier *t, struct tier_rec *r, bool unlink)
{
	bool sync;

	tier_ev(t, r, TIER_EV_REMOVED, r->where,
		unlink ? TIER_EV_UNLINK : TIER_EV_DROP);
	tier_ra_leaving(t, r, false);
	tier_idx_remove(t, r);
	sync = tier_l2_forget(t, r);
	if (unlink)
		tier_l3_forget(t, r);
	else
		tier_queue_gone(t, r, TIER_GONE_DROPPED);
	if (r->where == TIER_L1) {
		t->pops->remove(t->pol, &r->pi);
		/* Keep the extent while pinned: only the bookkeeping goes. */
		tier_uncount_parent(t, r);
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
		tier_zombie(t, r);
	} else {
		tier_free_extent(t, r);
		free(r);
	}
	return sync;
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
void tier_rec_set_parent(struct tier *t, struct tier_rec *r,
			 const struct kvfs_key *parent, uint32_t depth)
{
	bool learned = false;

	if (parent && !(r->flags & TREC_HAS_PARENT) &&
	    !tier_key_eq(parent, &r->key)) {
		r->parent = *parent;
		r->flags |= TREC_HAS_PARENT;
		tier_ra_link(t, r->ns, parent, &r->key);
		learned = true;
	}
	if (depth && !r->pi.depth) {
		r->pi.depth = depth;
		if (r->where == TIER_L1 && t->pops->update)
			t->pops->update(t->pol, &r->pi);
		learned = true;
	}
	/* a record already on disk keeps it through its entry there */
	if (learned && (r->flags & TREC_L2))
		tier_l2_link_learned(t, r);
	/* Also (re)counts a child whose parent was published after it. */
	if (parent && (r->flags & TREC_HAS_PARENT) && tier_key_eq(parent, &r->parent))
		tier_count_parent(t, r);
}

int tier_set_parent(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		    const struct kvfs_key *parent, uint32_t depth)
{
	struct tier_rec *r;

	tier_lock(t);
	r = tier_idx_find(t, ns, key);
	if (r)
		tier_rec_set_parent(t, r, parent, depth);
	tier_unlock(t);
	return r ? 0 : -ENOENT;
}
