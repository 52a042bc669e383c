/*
 * tier_l3.c - the engine's side of L3 (the store is tier/l3/l3.h): which
 * chunks go to Redis (l3_ingest), promotion of a chunk found there (GET,
 * every check of the record format, decode, publish into L1 through a
 * writer), the part of a batched lookup past the local run, prefetch,
 * unlink, stats.
 *
 * A value in L3 is a tier/record/record.h record (header + payload, no padding)
 * whose hdr_sum is seeded with a salt derived from l3_prefix: every node
 * using the same prefix writes and checks the same way. Nothing read from
 * L3 is trusted before kvrec_hdr_check, the header's namespace and key,
 * the exact length, and raw_sum over the decoded bytes (which covers the
 * payload: record.h's step 2 for a record decoded anyway) all passed; anything
 * else is a miss, counted, and deleted from L3 if it is still the same
 * bad value (l3_del_bad). The value is received as it arrives
 * (tier_l3_rx.c): the header checked first, the payload of a raw record
 * straight into the L1 extent, a zstd one decoded frame by frame, raw_sum
 * computed on the way; nothing is published before every check passed.
 *
 * Writes to L3 never block the caller: ingest=all and hot pin the chunk
 * and let an L3 writer thread build the record from the arena (at most a
 * quarter of L1 pinned for L3 at a time; past that the bytes are copied
 * instead, bounded by the store's queue); ingest=evicted copies the
 * victim's bytes under tier.lock (the victim is leaving L1) as L2's
 * demotion does. A chunk that came from L3, or was stored there by this
 * node, is not written again (rec.l3); once stored, a chunk whose
 * checksum was not computed takes the record's raw_sum (a path file's
 * announcement carries it: tier_l3_notify.c compares it with another
 * node's version).
 *
 * A record of a file of a path namespace carries the file's mode, owner
 * and mtime (record.h version 3), taken from the mount (cfg.pattr_get)
 * as the write is queued; a promotion hands those it finds back
 * (cfg.pattr_found) before and after it publishes the chunk. A change of
 * them (tier_l3_pattr_changed) writes this node's copy again from L1, or
 * deletes it from L3 when only L2 holds it here, so L3 never keeps a
 * looser mode than the file has.
 *
 * Unlinks: a chunk unlinked here is never served here again from L3. The
 * unlink queues an L3 deletion and leaves a tombstone of (namespace, key)
 * until the store confirms it: meanwhile promotions (GET, prefetch, a
 * name lookup) and lookups' L3 runs treat the key as absent, and a
 * promotion whose GET raced the unlink is refused at publication. The
 * deletion itself is retried by the store while the server does not
 * answer (tier/l3/l3.h), so it reaches Redis and other nodes stop finding
 * the chunk there.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hash/hashkey.h"
#include "tier/record/codec.h"
#include "tier/l3/l3.h"
#include "tier/record/record.h"
#include "tier/tier_i.h"
#include "tier/tier_l3_i.h"

#define TL3_PREFETCH_MAX 1024 /* promotions waiting for the prefetchers */
#define TL3_PREFETCHERS 2      /* promotions at once in the background */
#define TL3_FORGET_BUCKETS 256 /* unlink counters, by key hash */

/* A tombstone: deletions of (ns, key) sent to L3 and not yet confirmed. */
struct tl3_tomb {
	struct htab_node node;    /* in tier_l3.tombs */
	struct tier *t;
	uint32_t ns;
	struct kvfs_key key;
	uint32_t pending;         /* tier.lock: deletions in flight */
};

struct tl3_pf {
	struct tl3_pf *next;
	uint32_t ns;
	struct kvfs_key key;
};

struct tier_l3 {
	struct l3 *l3;            /* (imm) */
	uint64_t salt;            /* (imm) hdr_sum seed */
	int level;                /* (imm) compress level, 0 = raw */
	uint64_t pin_cap;         /* (imm) L1 bytes that may be pinned for
				   * L3 writes at once */
	uint64_t pinned;          /* tier.lock: bytes pinned for L3 writes */
	uint64_t promotions;      /* tier.lock */
	uint64_t skipped;         /* tier.lock: writes skipped (pin bound) */
	uint64_t forgets[TL3_FORGET_BUCKETS]; /* tier.lock: unlinks
					       * (tier_l3_forget) by key hash */
	struct htab tombs;        /* tier.lock: struct tl3_tomb by node */

	pthread_mutex_t mu;       /* a leaf: ws and the prefetch queue */
	pthread_cond_t cv;
	struct tl3_ws *ws;        /* mu: idle codec workspaces */
	struct tl3_pf *pf_head, *pf_tail; /* mu */
	size_t pf_n;              /* mu */
	bool stop;                /* mu */
	pthread_t pf_th[TL3_PREFETCHERS];
	int pf_started;
};

/* One queued write: either a pinned chunk (r, read from the arena by the
 * writer thread) or a copy (raw). */
struct tl3_job {
	struct tier *t;
	struct tier_rec *r; /* pinned, or NULL */
	void *raw;
	uint64_t size;
	int shuffle;
	char ns[KVFS_NS_NAME_MAX + 1];
	struct kvfs_key key;
	/* for its BlockStored(REMOTE) (stored_event) */
	uint32_t ns_id;
	bool has_parent;  /* and in the record's header (its chain link) */
	struct kvfs_key parent;
	uint32_t depth;
	uint64_t gen;     /* the record's, at queueing */
	uint32_t bucket;  /* of tier_l3.forgets */
	uint64_t forgets; /* tier_l3.forgets[bucket] at queueing */
	bool has_attr;    /* a path file's attributes (cfg.pattr_get) */
	struct kvrec_attr attr;
	uint64_t raw_sum; /* the record's, once built */
};

static void pattr_stale(struct tier *t, struct tier_rec *r);
static void pattr_drop(struct tier *t, struct tier_rec *r);

/* ------------------------------------------------------- workspaces */

static void ws_free(struct tl3_ws *w)
{
	codec_ws_free(w->ws);
	kvrec_sum_free(w->sum);
	free(w->stage);
	free(w);
}

static struct tl3_ws *ws_get(struct tier_l3 *t3)
{
	struct tl3_ws *w;

	pthread_mutex_lock(&t3->mu);
	w = t3->ws;
	if (w)
		t3->ws = w->next;
	pthread_mutex_unlock(&t3->mu);
	if (w)
		return w;
	w = calloc(1, sizeof(*w));
	if (w && (!(w->ws = codec_ws_new()) || !(w->sum = kvrec_sum_new()))) {
		ws_free(w);
		w = NULL;
	}
	return w;
}

static void ws_put(struct tier_l3 *t3, struct tl3_ws *w)
{
	pthread_mutex_lock(&t3->mu);
	w->next = t3->ws;
	t3->ws = w;
	pthread_mutex_unlock(&t3->mu);
}

/* ----------------------------------------------------------- writes */

/* Builds the record of src (size bytes) into *out. */
static int build(struct tier *t, struct tl3_job *j, const void *src,
		 void **out, size_t *out_len)
{
	struct tier_l3 *t3 = t->l3;
	struct kvrec_desc d = { .ns = j->ns, .key = &j->key,
				.raw_len = j->size,
				.parent = j->has_parent ? &j->parent : NULL,
				.depth = j->depth,
				.attr = j->has_attr ? &j->attr : NULL };
	struct timespec now;
	uint8_t *buf;
	long n = -E2BIG;
	int rc;

	buf = malloc(KVREC_HDR_BYTES + (j->size ? j->size : 1));
	if (!buf)
		return -ENOMEM;
	if (t3->level && j->size >= 4096) {
		struct tl3_ws *ws = ws_get(t3);

		/* worth storing only when it saves a sixteenth */
		n = ws ? codec_compress(ws->ws, t3->level, j->shuffle, src,
					j->size, buf + KVREC_HDR_BYTES,
					j->size - j->size / 16)
		       : -ENOMEM;
		if (ws)
			ws_put(t3, ws);
	}
	if (n >= 0) {
		d.codec = CODEC_ZSTD;
		d.shuffle = (uint8_t)j->shuffle;
		d.stored_len = (uint64_t)n;
	} else if (n == -E2BIG) {
		memcpy(buf + KVREC_HDR_BYTES, src, j->size);
		d.codec = CODEC_NONE;
		d.stored_len = j->size;
	} else {
		free(buf);
		return (int)n;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	d.seq = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	d.raw_sum = j->raw_sum = kvrec_sum(src, j->size, 0);
	d.stored_sum = kvrec_sum(buf + KVREC_HDR_BYTES, d.stored_len, 0);
	rc = kvrec_hdr_build((struct kvrec_hdr *)buf, &d, t3->salt);
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	*out_len = KVREC_HDR_BYTES + d.stored_len;
	return 0;
}

static int job_encode(void *arg, void **out, size_t *out_len)
{
	struct tl3_job *j = arg;
	struct tier *t = j->t;
	const void *src = j->raw;
	void *bounce = NULL;
	int rc;

	if (!src && t->arena.host) {
		src = (const char *)t->arena.host + j->r->l1_off;
	} else if (!src) {
		/* device arena: one copy to the host (r is pinned) */
		bounce = malloc(j->size ? j->size : 1);
		if (!bounce)
			return -ENOMEM;
		rc = tier_arena_read(t, j->r->l1_off, bounce, j->size);
		if (rc) {
			free(bounce);
			return rc;
		}
		src = bounce;
	}
	rc = build(t, j, src, out, out_len);
	free(bounce);
	return rc;
}

/* The BlockStored(REMOTE) of a write that succeeded (tier.lock held),
 * unless the chunk was unlinked meanwhile: that unlink's REMOVED(REMOTE)
 * came already and its delete follows this write in the store's queue.
 * A record of the same generation is still it; no record is a chunk that
 * left L1/L2, unless an unlink of a key of its hash bucket may have
 * taken it (then: no event, a miss for a router, never a stale hit). */
static void stored_event(struct tier *t, const struct tl3_job *j)
{
	const struct tier_rec *r = tier_idx_find(t, j->ns_id, &j->key);

	if (r ? r->gen == j->gen : t->l3->forgets[j->bucket] == j->forgets)
		tier_ev_key(t, j->ns_id, &j->key,
			    j->has_parent ? &j->parent : NULL, TIER_EV_STORED,
			    TIER_EV_L3, TIER_EV_DEMOTE);
}

/* A stored chunk's record (tier.lock held): its checksum is the
 * record's raw_sum when it was not computed yet (compared with another
 * node's version by tier_l3_notify.c); a copy's write is no longer in
 * flight. */
static void stored_sum(struct tier *t, const struct tl3_job *j)
{
	struct tier_rec *r = j->r ? j->r : tier_idx_find(t, j->ns_id, &j->key);

	if (!r || r->gen != j->gen)
		return;
	if (r->flags & TREC_NOSUM) {
		r->checksum = j->raw_sum;
		r->flags &= (uint8_t)~TREC_NOSUM;
	}
	if (!j->r)
		r->l3 &= (uint8_t)~TL3_SENDING;
}

static void job_release(void *arg, int err)
{
	struct tl3_job *j = arg;
	struct tier *t = j->t;

	/* stored: other nodes' waiters may go, and a path file's other
	 * version there is superseded (no lock held) */
	if (!err)
		tier_l3_notify_stored(t, j->ns, &j->key,
				      j->has_attr ? &j->raw_sum : NULL);
	tier_lock(t);
	if (!err)
		stored_sum(t, j);
	if (j->r) {
		uint8_t was = j->r->l3;

		t->l3->pinned -= j->size;
		j->r->l3 = err ? 0 : TL3_IN;
		if (!err && (was & TL3_REDO)) /* attributes changed since */
			pattr_stale(t, j->r);
		else if (err && (was & (TL3_REDO | TL3_STALE)))
			pattr_drop(t, j->r);
	}
	if (!err)
		stored_event(t, j);
	if (j->r)
		tier_unref(t, j->r);
	tier_unlock(t);
	free(j->raw);
	free(j);
}

/* Queues a write of r (tier.lock held): raw is a copy of its bytes, or
 * NULL to pin r and read it from the arena later. */
static void queue_put(struct tier *t, struct tier_rec *r, void *raw)
{
	struct tier_l3 *t3 = t->l3;
	struct tier_ns *ns = tier_ns_get(t, r->ns);
	struct tl3_job *j;
	struct l3_src src;

	if (!ns || !(j = calloc(1, sizeof(*j)))) {
		free(raw);
		return;
	}
	j->t = t;
	j->raw = raw;
	j->size = r->size;
	j->shuffle = ns->shuffle;
	memcpy(j->ns, ns->name, sizeof(j->ns));
	j->key = r->key;
	j->ns_id = r->ns;
	j->has_parent = (r->flags & TREC_HAS_PARENT) != 0;
	j->parent = r->parent;
	j->depth = r->pi.depth;
	j->gen = r->gen;
	if (t->cfg.pattr_get) {
		struct tier_pattr a;

		j->has_attr = t->cfg.pattr_get(t->cfg.pattr_arg, r->ns, &r->key,
					       &a);
		if (j->has_attr)
			j->attr = (struct kvrec_attr){ a.mode, a.uid, a.gid,
						       a.mtime_nsec,
						       a.mtime_sec };
	}
	j->bucket = (uint32_t)(r->pi.hkey % TL3_FORGET_BUCKETS);
	j->forgets = t3->forgets[j->bucket];
	if (!raw) {
		j->r = r;
		tier_ref(t, r);
		t3->pinned += r->size;
		r->l3 = TL3_QUEUED;
	} else {
		/* leaving L1: a later copy would be the same */
		r->l3 = TL3_IN | TL3_SENDING;
	}
	src.encode = job_encode;
	src.release = job_release;
	src.arg = j;
	src.bytes = r->size;
	if (l3_put(t3->l3, j->ns, &j->key, &src) == 0)
		return;
	/* refused (queue full: counted there): undone here, under the lock
	 * job_release would take */
	if (j->r) {
		t3->pinned -= j->size;
		r->l3 = 0;
		tier_unref(t, r);
	}
	free(j->raw);
	free(j);
}

/* A copy of r's bytes (tier.lock held), or NULL (also when the queue
 * has no room for it: not copied only to be dropped; counted as a drop). */
static void *copy_bytes(struct tier *t, struct tier_rec *r)
{
	void *raw;

	if (!l3_queue_room(t->l3->l3, r->size)) {
		l3_put_dropped(t->l3->l3);
		return NULL;
	}
	raw = malloc(r->size ? r->size : 1);
	if (raw && tier_arena_read(t, r->l1_off, raw, r->size)) {
		free(raw);
		raw = NULL;
	}
	if (!raw)
		t->l3->skipped++;
	return raw;
}

/* Queues a write of the L1 chunk r (tier.lock held): pinned while a
 * quarter of L1 allows, else a copy (a memcpy under tier.lock, bounded
 * by the queue's size). */
static void queue_pinned(struct tier *t, struct tier_rec *r)
{
	struct tier_l3 *t3 = t->l3;
	void *raw;

	if (r->l3 || r->where != TIER_L1)
		return;
	if (t3->pinned + r->size <= t3->pin_cap || !t3->pinned) {
		queue_put(t, r, NULL);
		return;
	}
	raw = copy_bytes(t, r);
	if (raw)
		queue_put(t, r, raw);
}

/* ------------------------------------------------------------ hooks */

static void tl3_on_publish(struct tier *t, struct tier_rec *r)
{
	if (t->l3 && t->cfg.l3_ingest == TIER_INGEST_ALL)
		queue_pinned(t, r);
}

static void tl3_on_hit(struct tier *t, struct tier_rec *r)
{
	if (t->l3 && t->cfg.l3_ingest == TIER_INGEST_HOT &&
	    r->hits >= t->cfg.hot_hits)
		queue_pinned(t, r);
}

static void tl3_evicting(struct tier *t, struct tier_rec *r)
{
	void *raw;

	if (!t->l3 || t->cfg.l3_ingest != TIER_INGEST_EVICTED || r->l3)
		return;
	/* a memcpy under tier.lock, as L2's demotion: the space is needed */
	raw = copy_bytes(t, r);
	if (raw)
		queue_put(t, r, raw);
}

/* ------------------------------------------------------- tombstones */

static struct tl3_tomb *tomb_find(struct tier *t, uint32_t ns,
				  const struct kvfs_key *key)
{
	struct htab_node *e;

	htab_for_each_hash(&t->l3->tombs, hashkey_index(ns, key), e) {
		struct tl3_tomb *tb = container_of(e, struct tl3_tomb, node);

		if (tb->ns == ns && tier_key_eq(&tb->key, key))
			return tb;
	}
	return NULL;
}

static bool tl3_tombstoned(struct tier *t, uint32_t ns,
			   const struct kvfs_key *key)
{
	return t->l3 && t->l3->tombs.n && tomb_find(t, ns, key) != NULL;
}

static uint64_t *forgets_of(struct tier *t, uint32_t ns,
			    const struct kvfs_key *key)
{
	return &t->l3->forgets[hashkey_index(ns, key) % TL3_FORGET_BUCKETS];
}

static bool tl3_stale(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		   uint64_t forgets)
{
	return t->l3 && (*forgets_of(t, ns, key) != forgets ||
			 tl3_tombstoned(t, ns, key));
}

/* tier.h. A tombstone never released: the key is absent from L3 for this
 * mount (a path file whose acknowledged version a crash lost: L3 may hold
 * an older one). No deletion is sent: another node's copy stays its own. */
int tier_l3_refuse(struct tier *t, uint32_t ns, const struct kvfs_key *key)
{
	struct tl3_tomb *tb;
	int rc = 0;

	if (!t->l3)
		return 0;
	tier_lock(t);
	tb = tomb_find(t, ns, key);
	if (!tb && (tb = calloc(1, sizeof(*tb)))) {
		tb->t = t;
		tb->ns = ns;
		tb->key = *key;
		if (htab_add(&t->l3->tombs, &tb->node, hashkey_index(ns, key))) {
			free(tb);
			tb = NULL;
		}
	}
	if (tb)
		tb->pending++; /* never given back */
	else
		rc = -ENOMEM;
	tier_unlock(t);
	return rc;
}

/* The store's answer to one deletion (a writer thread, no lock held). */
static void tomb_done(void *arg, int err)
{
	struct tl3_tomb *tb = arg;
	struct tier *t = tb->t;

	tier_lock(t);
	if (err) /* given up at close only: said once, the mount is going */
		tier_log(t, "l3: a deletion not sent (%s): the chunk may be "
			 "found in L3 again", strerror(-err));
	if (!--tb->pending) {
		htab_del(&t->l3->tombs, &tb->node);
		free(tb);
	}
	tier_unlock(t);
}

/* Queues the deletion of r from L3 behind a tombstone (tier.lock held). */
static void tomb_add(struct tier *t, const char *name, struct tier_rec *r)
{
	struct tl3_tomb *tb = tomb_find(t, r->ns, &r->key);
	bool fresh = !tb;
	int rc;

	if (fresh && (tb = calloc(1, sizeof(*tb)))) {
		tb->t = t;
		tb->ns = r->ns;
		tb->key = r->key;
		if (htab_add(&t->l3->tombs, &tb->node,
			     hashkey_index(r->ns, &r->key))) {
			free(tb);
			tb = NULL;
		}
	}
	if (!tb) { /* no memory: the deletion still goes */
		l3_del(t->l3->l3, name, &r->key);
		return;
	}
	tb->pending++;
	rc = l3_del_cb(t->l3->l3, name, &r->key, tomb_done, tb);
	if (rc) {
		tier_log(t, "l3: a deletion not queued: %s", strerror(-rc));
		if (!--tb->pending) {
			htab_del(&t->l3->tombs, &tb->node);
			free(tb);
		}
	}
}

/* r's copy in L3 may carry attributes older than the file's (tier.lock
 * held): written again from L1, else (only L2 holds it, or the write
 * could not be queued) deleted from L3, where another node would judge
 * the file by its old mode. */
static void pattr_stale(struct tier *t, struct tier_rec *r)
{
	r->l3 = 0;
	queue_pinned(t, r); /* L1 only */
	if (r->l3)
		r->l3 |= TL3_STALE;
	else
		pattr_drop(t, r);
}

/* Deletes r's copy from L3 (tier.lock held); r stays here. */
static void pattr_drop(struct tier *t, struct tier_rec *r)
{
	struct tier_ns *ns = tier_ns_get(t, r->ns);

	r->l3 = 0; /* written again (with its attributes) if it leaves */
	if (!ns)
		return;
	tomb_add(t, ns->name, r);
	tier_ev(t, r, TIER_EV_REMOVED, TIER_EV_L3, TIER_EV_DROP);
}

void tier_l3_pattr_changed(struct tier *t, uint32_t ns,
			   const struct kvfs_key *key)
{
	struct tier_rec *r;

	if (!t->l3)
		return;
	tier_lock(t);
	r = tier_idx_find(t, ns, key);
	if (r && (r->l3 & TL3_QUEUED)) /* job_release writes it again */
		r->l3 |= TL3_REDO;
	else if (r && (r->l3 & ~TL3_SENDING) == TL3_IN)
		pattr_stale(t, r);
	tier_unlock(t);
}

/* The attributes a promoted record carried, to the mount. */
static void pattr_found(struct tier *t, uint32_t ns, const struct kvfs_key *key,
			const struct kvrec_hdr *h)
{
	struct kvrec_attr a;
	struct tier_pattr pa;
	bool has;

	if (!t->cfg.pattr_found)
		return;
	has = kvrec_hdr_attr(h, &a);
	if (has)
		pa = (struct tier_pattr){ a.mode, a.uid, a.gid, a.mtime_nsec,
					  a.mtime_sec };
	t->cfg.pattr_found(t->cfg.pattr_arg, ns, key, has ? &pa : NULL);
}

static void tl3_forget(struct tier *t, struct tier_rec *r)
{
	struct tier_ns *ns = t->l3 ? tier_ns_get(t, r->ns) : NULL;

	/* other nodes may have stored it: deleted whatever we know */
	if (!ns)
		return;
	t->l3->forgets[r->pi.hkey % TL3_FORGET_BUCKETS]++;
	tomb_add(t, ns->name, r);
	if (r->l3) /* stored (or being stored) by us, or read from there */
		tier_ev(t, r, TIER_EV_REMOVED, TIER_EV_L3, TIER_EV_UNLINK);
}

/* -------------------------------------------------------- promotion */

/* A writer of (ns, key) in flight (tier.lock held). */
static bool writer_of(struct tier *t, uint32_t ns, const struct kvfs_key *key)
{
	for (struct tier_wr *w = t->writers; w; w = w->next)
		if (w->keyed && w->ns == ns && tier_key_eq(&w->key, key))
			return true;
	return false;
}

/* Another promotion of the key (a prefetch, readahead) or a local writer
 * holds it: waits, bounded, until it is published or given up. 0 or
 * -ENOENT. Sleeps on tier.room, which a writer's publish or abort
 * broadcasts (writer_drop: tier_room_made), not in naps: a reader that
 * opens the chunk readahead is promoting goes on as soon as it is in. */
static int wait_published(struct tier *t, uint32_t ns,
			  const struct kvfs_key *key)
{
	uint64_t end = l3_now_ns() +
		       (uint64_t)(t->cfg.l3_timeout_ms ? t->cfg.l3_timeout_ms
						       : L3_TIMEOUT_MS_DEFAULT) *
			       1000000ull +
		       t->cfg.max_chunk * 1000000000ull / L3_MIN_RATE;
	int rc = -ENOENT;

	tier_lock(t);
	for (;;) {
		uint64_t now = l3_now_ns(), at;
		struct timespec until;

		if (tier_idx_find(t, ns, key)) {
			rc = 0;
			break;
		}
		if (!writer_of(t, ns, key) || now > end)
			break;
		/* a wake-up missed costs at most 2 ms */
		at = now + 2000000ull < end ? now + 2000000ull : end;
		until.tv_sec = (time_t)(at / 1000000000ull);
		until.tv_nsec = (long)(at % 1000000000ull);
		t->room_sleepers++;
		pthread_cond_timedwait(&t->room, &t->lock, &until);
		t->room_sleepers--;
	}
	tier_unlock(t);
	return rc;
}

static int tl3_promote(struct tier *t, uint32_t ns, const struct kvfs_key *key)
{
	struct tier_l3 *t3 = t->l3;
	char name[KVFS_NS_NAME_MAX + 1];
	struct tl3_rx rx = { .t = t, .name = name, .key = key, .ns = ns,
			     .salt = t3->salt };
	struct l3_sink sink = tl3_rx_sink(&rx);
	uint64_t forgets = 0;
	int rc;

	if (!t3)
		return -ENOENT;
	tier_lock(t);
	forgets = *forgets_of(t, ns, key);
	{
		struct tier_ns *n = tier_ns_get(t, ns);

		rc = !n ? -ENOENT : tier_idx_find(t, ns, key) ? 1
				  : writer_of(t, ns, key) ? 2
				  : tl3_tombstoned(t, ns, key) ? -ENOENT
								 : 0;
		if (n)
			memcpy(name, n->name, sizeof(name));
	}
	tier_unlock(t);
	if (rc == 2) /* a prefetch is promoting it, or a writer writing it */
		return wait_published(t, ns, key);
	if (rc)
		return rc < 0 ? rc : 0;
	rx.ws = ws_get(t3);
	if (!rx.ws)
		return -ENOMEM;
	rc = l3_get_into(t3->l3, name, key, &sink);
	if (rx.err) /* the receive stopped itself: its reason */
		rc = rx.err;
	else if (!rc)
		rc = tl3_rx_finish(&rx);
	else if (rx.bad)
		rc = -EIO; /* bad, but not all of it came: not deleted */
	if (rc == -EBADMSG && rx.bad) {
		const uint8_t *bad = tl3_rx_value(&rx);

		tier_log(t, "l3: %s: a bad record in L3 (a miss; deleted)",
			 name);
		if (bad && l3_del_bad(t3->l3, name, key, bad, rx.len) == 0) {
			tier_lock(t);
			tier_ev_key(t, ns, key, NULL, TIER_EV_REMOVED,
				    TIER_EV_L3, TIER_EV_DROP);
			tier_unlock(t);
		} else if (!bad) {
			l3_refused(t3->l3);
		}
	} else if (rc == -EBADMSG || rc == -EFBIG) {
		/* too large to be a record here, or a good record of a
		 * node with a larger max_chunk: a miss, left for others */
		l3_refused(t3->l3);
	}
	tl3_rx_end(&rx);
	ws_put(t3, rx.ws);
	if (rc == -EEXIST) /* published here meanwhile, or being so */
		return wait_published(t, ns, key);
	if (rc) {
		if (rx.w)
			tier_wr_abort(t, rx.w);
		return rc == -ENOMEM ? rc : -ENOENT;
	}
	rx.w->from_l3 = true;
	rx.w->l3_forgets = forgets;
	/* checked: kept, not recomputed */
	tier_wr_set_checksum(rx.w, rx.hdr.h.raw_sum);
	/* the chain link its writer's node knew (user.kvfs.parent, depth):
	 * the prefix policy and readahead know the chain here too */
	{
		struct kvfs_key parent;
		uint32_t depth;
		bool has = kvrec_hdr_link(&rx.hdr.h, &parent, &depth);

		if (has || depth)
			tier_wr_set_parent(t, rx.w, has ? &parent : NULL,
					   depth);
	}
	/* its attributes, known to the mount before anyone can open it
	 * (and again after: the mount may have dropped them meanwhile, as
	 * the key's earlier copy left) */
	pattr_found(t, ns, key, &rx.hdr.h);
	rc = tier_wr_publish(t, rx.w, NULL);
	if (rc == -EEXIST)
		return wait_published(t, ns, key);
	if (rc)
		return rc == -ENOMEM ? rc : -ENOENT;
	pattr_found(t, ns, key, &rx.hdr.h);
	tier_lock(t);
	t3->promotions++;
	t->promotions++;
	tier_unlock(t);
	return 0;
}

/* --------------------------------------------------- lookup, prefetch */

static uint32_t tl3_run(struct tier *t, uint32_t ns, const struct kvfs_key *keys,
		     uint32_t n)
{
	char name[KVFS_NS_NAME_MAX + 1];
	uint8_t *present;
	long run;

	if (!t->l3 || !n)
		return 0;
	tier_lock(t);
	{
		struct tier_ns *s = tier_ns_get(t, ns);

		if (s)
			memcpy(name, s->name, sizeof(name));
		else
			n = 0;
	}
	tier_unlock(t);
	present = n ? malloc(n) : NULL;
	if (!present)
		return 0;
	run = l3_exists(t->l3->l3, name, keys, n, present);
	free(present);
	if (run > 0) { /* unlinked here: absent, whatever L3 says yet */
		tier_lock(t);
		for (long i = 0; i < run; i++)
			if (tl3_tombstoned(t, ns, &keys[i]))
				run = i;
		tier_unlock(t);
	}
	return run > 0 ? (uint32_t)run : 0;
}

static void *prefetch_main(void *arg)
{
	struct tier *t = arg;
	struct tier_l3 *t3 = t->l3;

	pthread_mutex_lock(&t3->mu);
	for (;;) {
		struct tl3_pf *p;

		while (!t3->pf_head && !t3->stop)
			pthread_cond_wait(&t3->cv, &t3->mu);
		if (t3->stop)
			break;
		p = t3->pf_head;
		t3->pf_head = p->next;
		if (!t3->pf_head)
			t3->pf_tail = NULL;
		t3->pf_n--;
		pthread_mutex_unlock(&t3->mu);
		tl3_promote(t, p->ns, &p->key);
		free(p);
		pthread_mutex_lock(&t3->mu);
	}
	pthread_mutex_unlock(&t3->mu);
	return NULL;
}

static void tl3_prefetch(struct tier *t, uint32_t ns, const struct kvfs_key *keys,
		      uint32_t n)
{
	struct tier_l3 *t3 = t->l3;

	if (!t3)
		return;
	pthread_mutex_lock(&t3->mu);
	for (uint32_t i = 0; i < n && t3->pf_n < TL3_PREFETCH_MAX; i++) {
		struct tl3_pf *p = malloc(sizeof(*p));

		if (!p)
			break;
		p->next = NULL;
		p->ns = ns;
		p->key = keys[i];
		if (t3->pf_tail)
			t3->pf_tail->next = p;
		else
			t3->pf_head = p;
		t3->pf_tail = p;
		t3->pf_n++;
	}
	pthread_cond_signal(&t3->cv);
	pthread_mutex_unlock(&t3->mu);
}

/* ------------------------------------------------------ admin, stats */

long tier_l3_drop(struct tier *t, const char *ns)
{
	size_t len = strnlen(ns, KVFS_NS_NAME_MAX + 1);

	if (!t->l3)
		return -EOPNOTSUPP;
	if (!len || len > KVFS_NS_NAME_MAX || strchr(ns, '/') || ns[0] == '.')
		return -EINVAL;
	return l3_drop_ns(t->l3->l3, ns);
}

int tier_stat_fetch(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		    struct tier_info *info)
{
	int rc = tier_stat(t, ns, key, info);

	if (rc == -ENOENT && t->l3) {
		rc = tl3_promote(t, ns, key);
		if (rc == 0)
			rc = tier_stat(t, ns, key, info);
	}
	return rc;
}

bool tier_l3_on(const struct tier *t)
{
	return t->l3 != NULL;
}

/* A marker's value: an empty record (a good 0-byte chunk), built late. */
static int mark_encode(void *arg, void **out, size_t *out_len)
{
	struct tl3_job *j = arg;

	return build(j->t, j, "", out, out_len);
}

static void mark_release(void *arg, int err)
{
	(void)err;
	free(arg);
}

int tier_l3_mark(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		 const struct tier_pattr *a)
{
	struct tl3_job *j;
	struct tier_ns *n;
	struct l3_src src;
	int rc;

	if (!t->l3)
		return -EOPNOTSUPP;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	tier_lock(t);
	n = tier_ns_get(t, ns);
	if (n)
		memcpy(j->ns, n->name, sizeof(j->ns));
	tier_unlock(t);
	if (!n) {
		free(j);
		return -ENOENT;
	}
	j->t = t;
	j->key = *key;
	if (a) {
		j->has_attr = true;
		j->attr = (struct kvrec_attr){ a->mode, a->uid, a->gid,
					       a->mtime_nsec, a->mtime_sec };
	}
	src.encode = mark_encode;
	src.release = mark_release;
	src.arg = j;
	src.bytes = KVREC_HDR_BYTES;
	rc = l3_put(t->l3->l3, j->ns, &j->key, &src);
	if (rc)
		free(j);
	return rc;
}

bool tier_l3_has(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		 struct tier_pattr *a, bool *has_a)
{
	char name[KVFS_NS_NAME_MAX + 1];
	const struct kvrec_hdr *h;
	struct kvrec_attr ka;
	struct tier_ns *n;
	struct l3_val v;
	bool gone;

	*has_a = false;
	if (!t->l3)
		return false;
	tier_lock(t);
	n = tier_ns_get(t, ns);
	if (n)
		memcpy(name, n->name, sizeof(name));
	gone = !n || tl3_tombstoned(t, ns, key);
	tier_unlock(t);
	if (gone || l3_get(t->l3->l3, name, key, &v))
		return false;
	/* its attributes only from a record that names it and passed its
	 * checks; any other value still says the directory is there */
	h = v.data;
	if (v.len == KVREC_HDR_BYTES && !kvrec_hdr_check(h, t->l3->salt, 0) &&
	    !h->raw_len && !strcmp(h->ns, name) &&
	    !memcmp(h->key, key->b, sizeof(h->key)) &&
	    kvrec_hdr_attr(h, &ka)) {
		*a = (struct tier_pattr){ ka.mode, ka.uid, ka.gid,
					  ka.mtime_nsec, ka.mtime_sec };
		*has_a = true;
	}
	l3_val_free(&v);
	return true;
}

static void tl3_stats(struct tier *t, struct tier_stats *st)
{
	if (!t->l3)
		return;
	st->l3_on = 1;
	st->l3_promotions = t->l3->promotions;
	st->l3_skipped = t->l3->skipped;
	st->l3_pinned_bytes = t->l3->pinned;
	st->l3_tombstones = t->l3->tombs.n;
}

/* Outside tier.lock (the store's counters are atomics). */
static void tl3_store_stats(struct tier *t, struct tier_stats *st)
{
	if (t->l3)
		l3_get_stats(t->l3->l3, &st->l3);
}

struct l3 *tier_l3_store(struct tier *t)
{
	return t->l3->l3;
}

/* ------------------------------------------------------- open/close */

static void on_log(void *arg, const char *msg)
{
	tier_log(arg, "%s", msg);
}

/* What the core calls through the tier_l3_* hooks of tier_i.h (tier_create
 * sets t->l3ops before it opens the store; each does nothing while the store
 * is not open). */
const struct tier_l3_ops tier_l3_hooks = {
	.on_publish = tl3_on_publish,
	.on_hit = tl3_on_hit,
	.evicting = tl3_evicting,
	.forget = tl3_forget,
	.stale = tl3_stale,
	.promote = tl3_promote,
	.run = tl3_run,
	.prefetch = tl3_prefetch,
	.stats = tl3_stats,
	.store_stats = tl3_store_stats,
};

int tier_l3_open(struct tier *t, char *err, size_t errlen)
{
	const struct tier_config *c = &t->cfg;
	struct l3_config lc = {
		.servers = c->l3, .mode = (enum l3r_mode)c->l3_cluster,
		.user = c->l3_user, .password = c->l3_password,
		.prefix = c->l3_prefix,
		.timeout_ms = c->l3_timeout_ms, .max_chunk = c->max_chunk,
		.write_timeout_ms = c->l3_write_timeout_ms,
		.log = on_log, .log_arg = t,
	};
	const char *prefix = c->l3_prefix ? c->l3_prefix : L3_PREFIX_DEFAULT;
	struct tier_l3 *t3;
	int rc;

	if (!c->l3)
		return 0;
	t3 = calloc(1, sizeof(*t3));
	if (!t3)
		return -ENOMEM;
	pthread_mutex_init(&t3->mu, NULL);
	pthread_cond_init(&t3->cv, NULL);
	/* one salt per prefix: nodes sharing a prefix share the format */
	t3->salt = kvrec_sum(prefix, strlen(prefix), 0x4b5646534c33ull);
	t3->level = c->compress_level;
	t3->pin_cap = t->l1_cap / 4;
	rc = l3_open(&lc, &t3->l3, err, errlen);
	if (rc)
		goto fail;
	t->l3 = t3;
	for (int i = 0; i < TL3_PREFETCHERS; i++) {
		rc = -pthread_create(&t3->pf_th[i], NULL, prefetch_main, t);
		if (rc) {
			snprintf(err, errlen, "l3: no prefetch thread");
			tier_l3_close(t);
			return rc;
		}
		t3->pf_started++;
	}
	return 0;
fail:
	l3_close(t3->l3);
	pthread_mutex_destroy(&t3->mu);
	pthread_cond_destroy(&t3->cv);
	free(t3);
	return rc;
}

void tier_l3_close(struct tier *t)
{
	struct tier_l3 *t3 = t->l3;

	if (!t3)
		return;
	pthread_mutex_lock(&t3->mu);
	t3->stop = true;
	pthread_cond_broadcast(&t3->cv);
	pthread_mutex_unlock(&t3->mu);
	for (int i = 0; i < t3->pf_started; i++)
		pthread_join(t3->pf_th[i], NULL);
	while (t3->pf_head) {
		struct tl3_pf *p = t3->pf_head;

		t3->pf_head = p->next;
		free(p);
	}
	/* sends what is queued (releases take tier.lock: not held here);
	 * every deletion's tomb_done has run after it */
	l3_close(t3->l3);
	{ /* what is left: keys refused for the mount's life */
		struct htab_node *e, *nx;
		uint64_t i;

		htab_for_each_safe(&t3->tombs, i, e, nx)
			free(container_of(e, struct tl3_tomb, node));
	}
	htab_free(&t3->tombs);
	while (t3->ws) {
		struct tl3_ws *w = t3->ws;

		t3->ws = w->next;
		ws_free(w);
	}
	pthread_mutex_destroy(&t3->mu);
	pthread_cond_destroy(&t3->cv);
	t->l3 = NULL;
	free(t3);
}
