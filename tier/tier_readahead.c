/*
 * tier_readahead.c - chain readahead: chunks that follow the one being
 * read (its children by parent link, or the chunk read right after it
 * before) are promoted from L2 or L3 in the background, ahead of a reader
 * that opens file after file, with no lookup.
 *
 * The window (per reader stream, TRA_STREAMS of them, like the kernel's
 *   per-file readahead state):
 *   - a stream is the reads of one reader (the thread that opens, as
 *     FUSE tells it; readers that are not known share streams matched
 *     by chunk) in one namespace; a read of the successor of the chunk
 *     it read last is in order; any other read (a jump) resets its
 *     stream to no window: a random reader never triggers readahead;
 *   - the second chunk read in chain order, or the head of a chain (no
 *     parent, a child by link: as a read at offset 0 is for the kernel),
 *     opens a window of TRA_INIT chunks (or the maximum, if smaller)
 *     ahead of the reader;
 *   - each time the reader has consumed half the window from chunks that
 *     readahead promoted (hits), the window doubles, up to readahead=N;
 *   - each read in order tops the window up: the successors past the
 *     last one queued are queued, in chain order, for the workers;
 *   - a jump resets the stream (window 0).
 * The successor of a chunk comes from one bounded table (TRA_SUCC_MAX
 * entries, least recently used out), three kinds of entries, strongest
 * last: WRITTEN (B, with no parent link, was published right after A in
 * their namespace: the order in which an engine stores a prompt's chunks
 * is the order in which it loads them, so the first reader after a
 * restart is followed even along chunks nobody read before; a reader that
 * does not read in that order jumps and opens no window; at most TRA_INIT
 * chunks are queued ahead along such entries, so the window that runs
 * past the last chunk a reader wants, into chunks merely written after
 * it, wastes at most that), SEEN (B was read right after A, when nothing
 * linked them: how chunks without parent links, e.g. path namespaces, are
 * learned), LINK
 * (B was published or stamped with parent A), FOLLOWED (a stream read B
 * right after A, B being A's child or A's successor then). An entry is
 * replaced by one of its kind or a stronger one. So where a chunk has
 * several children, the one read after it most recently is followed,
 * else the newest published; a jumping reader never overwrites a link.
 *
 * Bounds: what readahead promoted and nobody read yet is pinned (so the
 * policy cannot evict it before the reader gets there: s3fifo would
 * take an unread chunk first), until it is read, its stream jumps, or
 * TRA_HOLD_NS pass; with what is queued and the lookup prefetch queue it
 * stays within three quarters of L1 (the bound of tier_l2_prefetch) and
 * within the L1 not held by other pins and writers, and an allocation
 * that finds L1 full lets all of it go (tier_ra_unpin_all). Promotions
 * enter the policy as new chunks, never as accessed ones, so pinned
 * chunks (never victims) and hot ones (an s3fifo main queue) are not
 * pushed out for chunks nobody asked for.
 *
 * A full disk under L2: a promotion into a full L1 evicts a chunk, maybe
 * one only in L1 (written, never demoted), whose demotion into an L2 that
 * the disk cut below l2_size makes its reclaim drop another live chunk: a
 * chunk somebody wrote lost for one nobody asked for yet, in a log that
 * cannot grow. So readahead pauses there: a chunk that does not fit L1's
 * free room (l1_bytes and writers' extents against l1_cap) is neither
 * queued nor promoted while tier_l2_full says so (the disk filled, and
 * live records with pending writes reach the point where reclaim starts,
 * or fill half of what the disk left once a reclaim has dropped live
 * records). Counted in paused; the window stays where it was and the next
 * read in order tries again. An L2 merely at its l2_size (the steady
 * state of a cache) does not pause it: there a promotion's victim is
 * demoted and the log drops its oldest, the policy's work, and a chunk
 * the reader is about to read is worth that (what it wastes is counted in
 * wasted). Into free L1 (after a restart, say) it runs as ever.
 *
 * Workers: TRA_WORKERS threads take the queue in order; each promotion
 * is an io_uring read of L2 (tier_l2_fill) or an L3 GET, then the check
 * and the decompression, on the worker: several reads in flight, and the
 * decoding off the FUSE thread that serves the reader.
 *
 * Counters: promotions (done by readahead), hits (a promoted chunk read
 * later), wasted (a promoted chunk that left L1 unread), paused (held
 * back by a full L1 over a full disk, above).
 *
 * Restarts: the links come back with the chunks (the L2 record and the
 * checkpoint keep parent and depth: tier_ra_open relinks every indexed
 * chunk that has a parent), and the whole table (what was learned by
 * reading, too) is kept in the L2 checkpoint (tier_ra_save, KVCKPT_ORDER
 * in record.h) and taken back at the next mount (tier_ra_load): the
 * first reader after a restart is followed along its chain. Chunks
 * written after the last checkpoint (a kill before the next one) are
 * learned again as WRITTEN in the order L2's scan found their records
 * (t->ra_scanned, ra_restore).
 *
 * Everything here: tier.lock, except the worker threads' own life.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hash/hashkey.h"
#include "tier/tier_i.h"

#define TRA_STREAMS 16
#define TRA_INIT 4
#define TRA_WORKERS 4
#define TRA_SUCC_MAX 65536 /* successor entries (about 100 bytes each) */
#define TRA_QUEUE_MAX 1024
#define TRA_HOLD_NS 2000000000ULL /* a promotion nobody reads is unpinned */

struct tra_succ {
	struct htab_node node;     /* in tier_ra.succ, by (ns, from) */
	struct tra_succ *prev, *next; /* LRU, newest first */
	uint32_t ns;
	uint8_t kind;              /* TRA_SEEN, TRA_LINK, TRA_FOLLOWED */
	struct kvfs_key from, to;
};

/* (saved in the checkpoint: values kept; strength is kind_rank's) */
enum { TRA_SEEN = 1, TRA_LINK, TRA_FOLLOWED, TRA_WRITTEN };

static int kind_rank(uint8_t kind)
{
	return kind == TRA_WRITTEN ? 0 : kind;
}

/* A chunk readahead promoted that nobody has read yet. */
struct tra_pend {
	struct htab_node node;     /* in tier_ra.pend, by (ns, key) */
	struct tra_pend *prev, *next; /* oldest first */
	uint32_t ns;
	struct kvfs_key key;
	uint64_t gen, bytes;
	uint64_t at_ns;            /* when it was promoted */
	struct tier_rec *rec;      /* pinned by this entry, or NULL */
	int stream;
};

struct tra_job {
	struct tra_job *next;
	uint32_t ns;
	struct kvfs_key key;
	uint64_t bytes;            /* the bound's estimate */
	int stream;
};

struct tra_stream {
	bool used;
	uint32_t ns;
	uint64_t reader;           /* who reads (0: not known) */
	struct kvfs_key last;      /* the chunk read last */
	struct kvfs_key tail;      /* the last chunk queued ahead */
	uint32_t win;              /* 0: no window (after a jump) */
	uint32_t ahead;            /* chunks queued ahead of last */
	uint32_t hits;             /* hits since the window last grew */
	uint64_t used_at;          /* tier.clock of the last read */
	bool shadowed;             /* its last read was a shadow's open
				    * (TIER_GET_NOFILL): what has a shadow
				    * needs no promotion for it */
};

/* The chunk published last in a namespace. */
struct tra_wlast {
	bool used;
	uint32_t ns;
	struct kvfs_key key;
	uint64_t at;               /* tier.clock then */
};

struct tier_ra {
	uint32_t max;              /* (imm) readahead=N */
	struct tra_wlast wl[TRA_STREAMS]; /* least recently published out */
	struct htab succ;
	struct tra_succ *lru_head, *lru_tail;
	struct htab pend;
	struct tra_pend *pend_head, *pend_tail;
	uint64_t pend_bytes, queued_bytes;
	uint64_t pinned_bytes;     /* of t->pinned_bytes: pending pins */
	struct tra_job *head, *tail;
	uint32_t nqueued;
	struct tra_stream st[TRA_STREAMS];
	pthread_cond_t cond;       /* with tier.lock: the queue */
	bool stop;
	int nthreads;
	pthread_t th[TRA_WORKERS];
	uint64_t promotions, hits, wasted, paused;
	bool changed;              /* succ changed since the L2 was told */
};

/* ------------------------------------------------------- successors */

static struct tra_succ *succ_find(struct tier_ra *ra, uint32_t ns,
				  const struct kvfs_key *from)
{
	uint64_t h = hashkey_index(ns, from);
	struct htab_node *e;

	htab_for_each_hash(&ra->succ, h, e) {
		struct tra_succ *s = container_of(e, struct tra_succ, node);

		if (s->ns == ns && tier_key_eq(&s->from, from))
			return s;
	}
	return NULL;
}

static void lru_unlink(struct tier_ra *ra, struct tra_succ *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		ra->lru_head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		ra->lru_tail = s->prev;
	s->prev = s->next = NULL;
}

static void lru_push(struct tier_ra *ra, struct tra_succ *s)
{
	s->prev = NULL;
	s->next = ra->lru_head;
	if (ra->lru_head)
		ra->lru_head->prev = s;
	ra->lru_head = s;
	if (!ra->lru_tail)
		ra->lru_tail = s;
}

/* Sets from's successor to `to` unless a stronger kind says otherwise. */
static void succ_set(struct tier_ra *ra, uint32_t ns,
		     const struct kvfs_key *from, const struct kvfs_key *to,
		     uint8_t kind)
{
	struct tra_succ *s = succ_find(ra, ns, from);

	if (tier_key_eq(from, to))
		return;
	if (s) {
		if (kind_rank(kind) < kind_rank(s->kind))
			return;
		if (kind != s->kind || !tier_key_eq(&s->to, to))
			ra->changed = true;
		lru_unlink(ra, s);
	} else {
		if (ra->succ.n >= TRA_SUCC_MAX) {
			/* the least recently used entry is recycled */
			s = ra->lru_tail;
			lru_unlink(ra, s);
			htab_del(&ra->succ, &s->node);
		} else {
			s = malloc(sizeof(*s));
			if (!s)
				return;
		}
		memset(s, 0, sizeof(*s));
		ra->changed = true;
		s->ns = ns;
		s->from = *from;
		if (htab_add(&ra->succ, &s->node, hashkey_index(ns, from))) {
			free(s);
			return;
		}
	}
	s->to = *to;
	s->kind = kind;
	lru_push(ra, s);
}

/* from's successor entry (now the most recently used), or NULL. */
static struct tra_succ *succ_use(struct tier_ra *ra, uint32_t ns,
				 const struct kvfs_key *from)
{
	struct tra_succ *s = succ_find(ra, ns, from);

	if (!s)
		return NULL;
	lru_unlink(ra, s);
	lru_push(ra, s);
	return s;
}

/* from's successor, or NULL. */
static const struct kvfs_key *succ_of(struct tier_ra *ra, uint32_t ns,
				      const struct kvfs_key *from)
{
	struct tra_succ *s = succ_use(ra, ns, from);

	return s ? &s->to : NULL;
}

/* What changed in the table reaches the next L2 checkpoint. */
static void ra_tell_l2(struct tier *t)
{
	if (t->ra->changed) {
		t->ra->changed = false;
		tier_l2_order_changed(t);
	}
}

void tier_ra_link(struct tier *t, uint32_t ns, const struct kvfs_key *parent,
		  const struct kvfs_key *child)
{
	if (t->ra) {
		succ_set(t->ra, ns, parent, child, TRA_LINK);
		ra_tell_l2(t);
	}
}

void tier_ra_published(struct tier *t, const struct tier_rec *r)
{
	struct tier_ra *ra = t->ra;
	int slot = -1, free_slot = 0;

	if (!ra)
		return;
	for (int i = 0; i < TRA_STREAMS && slot < 0; i++) {
		if (ra->wl[i].used && ra->wl[i].ns == r->ns)
			slot = i;
		else if (!ra->wl[i].used ||
			 (ra->wl[free_slot].used &&
			  ra->wl[i].at < ra->wl[free_slot].at))
			free_slot = i;
	}
	if (slot >= 0 && !(r->flags & TREC_HAS_PARENT)) {
		/* a linked chunk is followed by its link (stronger) */
		succ_set(ra, r->ns, &ra->wl[slot].key, &r->key, TRA_WRITTEN);
		ra_tell_l2(t);
	}
	if (slot < 0)
		slot = free_slot;
	ra->wl[slot].used = true;
	ra->wl[slot].ns = r->ns;
	ra->wl[slot].key = r->key;
	ra->wl[slot].at = t->clock;
}

/* ---------------------------------------------------------- pending */

static struct tra_pend *pend_find(struct tier_ra *ra, uint32_t ns,
				  const struct kvfs_key *key, uint64_t h)
{
	struct htab_node *e;

	htab_for_each_hash(&ra->pend, h, e) {
		struct tra_pend *p = container_of(e, struct tra_pend, node);

		if (p->ns == ns && tier_key_eq(&p->key, key))
			return p;
	}
	return NULL;
}

/* Lets go of p's pin (the chunk may be evicted from now on). */
static void pend_unpin(struct tier *t, struct tra_pend *p)
{
	if (!p->rec)
		return;
	t->ra->pinned_bytes -= p->bytes;
	tier_unref(t, p->rec);
	p->rec = NULL;
}

static void pend_del(struct tier *t, struct tra_pend *p)
{
	struct tier_ra *ra = t->ra;

	pend_unpin(t, p);
	htab_del(&ra->pend, &p->node);
	if (p->prev)
		p->prev->next = p->next;
	else
		ra->pend_head = p->next;
	if (p->next)
		p->next->prev = p->prev;
	else
		ra->pend_tail = p->prev;
	ra->pend_bytes -= p->bytes;
	free(p);
}

/* r (in L1) was promoted for stream si: pinned until read, until its
 * stream jumps or TRA_HOLD_NS pass, whichever is first. */
static void pend_add(struct tier *t, struct tier_rec *r, int si)
{
	struct tier_ra *ra = t->ra;
	uint64_t h = r->pi.hkey;
	struct tra_pend *p = pend_find(ra, r->ns, &r->key, h);

	if (p)
		return;
	p = calloc(1, sizeof(*p));
	if (!p)
		return;
	p->ns = r->ns;
	p->key = r->key;
	p->gen = r->gen;
	p->bytes = rec_l1_len(r);
	p->stream = si;
	p->at_ns = tier_now_ns();
	if (htab_add(&ra->pend, &p->node, h)) {
		free(p);
		return;
	}
	p->prev = ra->pend_tail;
	if (ra->pend_tail)
		ra->pend_tail->next = p;
	else
		ra->pend_head = p;
	ra->pend_tail = p;
	ra->pend_bytes += p->bytes;
	tier_ref(t, r);
	p->rec = r;
	ra->pinned_bytes += p->bytes;
}

/* Takes r's pending entry out: true when readahead promoted this
 * publication of it. */
static bool pend_take(struct tier *t, const struct tier_rec *r)
{
	struct tra_pend *p;
	bool ours;

	if (!t->ra->pend.n)
		return false;
	p = pend_find(t->ra, r->ns, &r->key, r->pi.hkey);
	if (!p)
		return false;
	ours = p->gen == r->gen;
	pend_del(t, p);
	return ours;
}

/* Unpins what stream si (or, with si < 0, nobody read for TRA_HOLD_NS)
 * holds. */
static void pend_release(struct tier *t, int si)
{
	uint64_t old = tier_now_ns() - TRA_HOLD_NS;

	for (struct tra_pend *p = t->ra->pend_head; p; p = p->next)
		if (si >= 0 ? p->stream == si : p->at_ns < old)
			pend_unpin(t, p);
		else if (si < 0)
			break; /* oldest first */
}

bool tier_ra_unpin_all(struct tier *t)
{
	bool any = false;

	if (!t->ra)
		return false;
	for (struct tra_pend *p = t->ra->pend_head; p; p = p->next)
		if (p->rec) {
			pend_unpin(t, p);
			any = true;
		}
	return any;
}

void tier_ra_leaving(struct tier *t, const struct tier_rec *r, bool evicted)
{
	if (t->ra && pend_take(t, r) && evicted)
		t->ra->wasted++;
}

/* ------------------------------------------------------------ queue */

/* Room for bytes more of readahead (see the bounds above). */
static bool ra_room(struct tier *t, uint64_t bytes)
{
	struct tier_ra *ra = t->ra;
	uint64_t held = t->pinned_bytes - ra->pinned_bytes + t->writer_bytes;
	uint64_t ahead = ra->pend_bytes + ra->queued_bytes + bytes +
			 tier_l2_prefetch_bytes(t);

	return ahead <= tier_prefetch_bound(t) && held <= t->l1_cap &&
	       ahead <= t->l1_cap - held;
}

/* Whether a promotion of bytes must wait: it would evict from L1 into a
 * full L2 (see "A full L2" above); counted. */
static bool ra_paused(struct tier *t, uint64_t bytes)
{
	uint64_t used = t->l1_bytes + t->writer_bytes;

	bytes = l1_alloc_round(bytes);
	if (used <= t->l1_cap && bytes <= t->l1_cap - used)
		return false; /* free L1 */
	if (!tier_l2_full(t, bytes))
		return false;
	t->ra->paused++;
	return true;
}

/* Queues key (size bytes, 0 = unknown) for stream s; false when the
 * bound stops it. */
static bool queue_job(struct tier *t, int s, uint32_t ns,
		      const struct kvfs_key *key, uint64_t bytes)
{
	struct tier_ra *ra = t->ra;
	struct tra_job *j;

	bytes = l1_alloc_round(bytes);
	if (ra->nqueued >= TRA_QUEUE_MAX || !ra_room(t, bytes))
		return false;
	j = malloc(sizeof(*j));
	if (!j)
		return false;
	j->next = NULL;
	j->ns = ns;
	j->key = *key;
	j->bytes = bytes;
	j->stream = s;
	if (ra->tail)
		ra->tail->next = j;
	else
		ra->head = j;
	ra->tail = j;
	ra->nqueued++;
	ra->queued_bytes += bytes;
	pthread_cond_signal(&ra->cond);
	return true;
}

/* Stream si jumped (or is recycled): what it queued and no worker took
 * yet is not promoted (its reader went elsewhere). */
static void queue_drop(struct tier *t, int si)
{
	struct tier_ra *ra = t->ra;
	struct tra_job **pp = &ra->head, *j;

	ra->tail = NULL;
	while ((j = *pp)) {
		if (j->stream != si) {
			ra->tail = j;
			pp = &j->next;
			continue;
		}
		*pp = j->next;
		ra->nqueued--;
		ra->queued_bytes -= j->bytes;
		free(j);
	}
}

/* Queues the successors past stream s's tail until its window is full. */
static void top_up(struct tier *t, int si)
{
	struct tier_ra *ra = t->ra;
	struct tra_stream *s = &ra->st[si];
	struct tier_ns *n = tier_ns_get(t, s->ns);
	uint32_t steps = 0;

	while (n && s->ahead < s->win && steps++ < 2 * ra->max) {
		const struct tra_succ *e = succ_use(ra, s->ns, &s->tail);
		struct tier_rec *r;
		struct kvfs_key k;

		if (!e || (e->kind == TRA_WRITTEN && s->ahead >= TRA_INIT))
			break;
		k = e->to;
		r = tier_idx_find(t, s->ns, &k);
		if (r && r->where == TIER_L2 && !(r->flags & TREC_PROMO) &&
		    !(s->shadowed && t->cfg.held_elsewhere &&
		      t->cfg.held_elsewhere(t->cfg.held_arg, r->ns, &r->key,
					    r->gen))) {
			if (ra_paused(t, r->size) ||
			    !queue_job(t, si, s->ns, &k, r->size))
				break;
		} else if (!r && t->l3) {
			/* not local: maybe in L3 (its size: the namespace's
			 * last one, for the bound) */
			if (ra_paused(t, n->last_size) ||
			    !queue_job(t, si, s->ns, &k, n->last_size))
				break;
		} else if (!r) {
			break; /* the chain ends here */
		}
		s->tail = k;
		s->ahead++;
	}
}

/* ---------------------------------------------------------- streams */

/* Whether r heads a chain: no parent, and a child by a link. */
static bool chain_head(struct tier_ra *ra, const struct tier_rec *r)
{
	struct tra_succ *s;

	if (r->flags & TREC_HAS_PARENT)
		return false;
	s = succ_find(ra, r->ns, &r->key);
	return s && s->kind == TRA_LINK;
}

/* Whether r follows the chunk stream s read last. */
static bool follows(struct tier_ra *ra, const struct tra_stream *s,
		    const struct tier_rec *r)
{
	const struct kvfs_key *nx;

	if (!s->used || s->ns != r->ns)
		return false;
	if ((r->flags & TREC_HAS_PARENT) && tier_key_eq(&r->parent, &s->last))
		return true;
	nx = succ_of(ra, s->ns, &s->last);
	return nx && tier_key_eq(nx, &r->key);
}

/* The stream of reader in r's namespace (reader 0: the one whose last
 * chunk r follows), or -1. */
static int stream_of(struct tier_ra *ra, const struct tier_rec *r,
		     uint64_t reader)
{
	for (int i = 0; i < TRA_STREAMS; i++) {
		struct tra_stream *s = &ra->st[i];

		if (!s->used || s->ns != r->ns || s->reader != reader)
			continue;
		if (reader || follows(ra, s, r))
			return i;
	}
	return -1;
}

/* The most recent stream of reader 0 in ns (learning), or -1. */
static int stream_recent(struct tier_ra *ra, uint32_t ns)
{
	int best = -1;

	for (int i = 0; i < TRA_STREAMS; i++)
		if (ra->st[i].used && ra->st[i].ns == ns && !ra->st[i].reader &&
		    (best < 0 || ra->st[i].used_at > ra->st[best].used_at))
			best = i;
	return best;
}

/* A free or the least recently used stream. */
static int stream_new(struct tier_ra *ra)
{
	int best = 0;

	for (int i = 0; i < TRA_STREAMS; i++) {
		if (!ra->st[i].used)
			return i;
		if (ra->st[i].used_at < ra->st[best].used_at)
			best = i;
	}
	return best;
}

static void on_read(struct tier *t, struct tier_rec *r, uint64_t reader,
		    bool shadowed)
{
	struct tier_ra *ra = t->ra;
	struct tra_stream *s;
	int si, prev;
	bool hit;

	hit = pend_take(t, r);
	if (hit)
		ra->hits++;
	si = stream_of(ra, r, reader);
	if (ra->pend_head)
		pend_release(t, -1);
	if (si < 0 || !follows(ra, &ra->st[si], r) ||
	    chain_head(ra, r)) {
		/* a jump: the chunk read before (by this reader, or in this
		 * namespace when readers are not known) learns its
		 * successor, and the stream starts over with no window */
		prev = si >= 0 ? si : reader ? -1 : stream_recent(ra, r->ns);
		if (prev >= 0)
			succ_set(ra, r->ns, &ra->st[prev].last, &r->key,
				 TRA_SEEN);
		if (si < 0)
			si = stream_new(ra);
		pend_release(t, si); /* what it read ahead may go */
		queue_drop(t, si);
		s = &ra->st[si];
		memset(s, 0, sizeof(*s));
		s->used = true;
		s->ns = r->ns;
		s->reader = reader;
		s->last = s->tail = r->key;
		s->used_at = t->clock;
		s->shadowed = shadowed;
		if (!chain_head(ra, r))
			return;
		/* the head of a chain: its reader starts there, as a read at
		 * offset 0 starts the kernel's window */
		s->win = ra->max < TRA_INIT ? ra->max : TRA_INIT;
		top_up(t, si);
		return;
	}
	s = &ra->st[si];
	/* read in order: remembered as the successor read most recently */
	succ_set(ra, r->ns, &s->last, &r->key, TRA_FOLLOWED);
	s->last = r->key;
	s->used_at = t->clock;
	s->shadowed = shadowed;
	if (s->ahead)
		s->ahead--;
	else
		s->tail = r->key; /* the reader is at (or past) the window */
	if (!s->win) {
		s->win = ra->max < TRA_INIT ? ra->max : TRA_INIT;
		s->hits = 0;
	} else if (hit && ++s->hits >= (s->win + 1) / 2) {
		s->win = s->win * 2 < ra->max ? s->win * 2 : ra->max;
		s->hits = 0;
	}
	top_up(t, si);
}

void tier_ra_on_read(struct tier *t, struct tier_rec *r, uint64_t reader,
		     bool shadowed)
{
	if (!t->ra || (r->flags & TREC_ZOMBIE))
		return;
	on_read(t, r, reader, shadowed);
	ra_tell_l2(t);
}

/* ---------------------------------------------------------- workers */

/* r was promoted for stream si: pending (and pinned) until read. */
static void promoted(struct tier *t, struct tier_rec *r, int si)
{
	pend_add(t, r, si);
	t->ra->promotions++;
}

/* One promotion; tier.lock held (dropped meanwhile). */
static void promote_one(struct tier *t, const struct tra_job *j)
{
	struct tier_rec *r = tier_idx_find(t, j->ns, &j->key);

	if (((r && r->where == TIER_L2) || (!r && t->l3)) &&
	    ra_paused(t, j->bytes))
		return; /* L1 and L2 filled up since it was queued */
	if (r && r->where == TIER_L2 && !(r->flags & TREC_PROMO)) {
		struct tier_chunk c = { 0 };

		tier_ref(t, r);
		if (tier_l2_fill(t, r, &c) == 0 && !c.tmp &&
		    r->where == TIER_L1 && !(r->flags & TREC_ZOMBIE)) {
			promoted(t, r, j->stream);
		}
		free(c.tmp); /* no room in L1: it stays in L2 */
		tier_unref(t, r);
	} else if (!r && t->l3 && tier_ns_get(t, j->ns)) {
		int rc;

		tier_unlock(t);
		rc = tier_l3_promote(t, j->ns, &j->key);
		tier_lock(t);
		r = rc == 0 ? tier_idx_find(t, j->ns, &j->key) : NULL;
		if (r && r->where == TIER_L1 && !r->hits)
			promoted(t, r, j->stream);
	}
}

static void *worker_main(void *arg)
{
	struct tier *t = arg;
	struct tier_ra *ra = t->ra;

	tier_l2_ahead_thread(t); /* one of TRA_WORKERS */
	tier_lock(t);
	for (;;) {
		struct tra_job *j = ra->head;

		if (ra->stop)
			break;
		if (!j) {
			struct timespec dl;

			/* idle: what nobody read for TRA_HOLD_NS is let go,
			 * reads or not */
			clock_gettime(CLOCK_REALTIME, &dl);
			dl.tv_sec += 1;
			pthread_cond_timedwait(&ra->cond, &t->lock, &dl);
			if (ra->pend_head)
				pend_release(t, -1);
			continue;
		}
		ra->head = j->next;
		if (!ra->head)
			ra->tail = NULL;
		ra->nqueued--;
		ra->queued_bytes -= j->bytes;
		promote_one(t, j);
		free(j);
	}
	tier_unlock(t);
	return NULL;
}

/* ------------------------------------------------ kept across mounts */

/*
 * The learned order as the L2 checkpoint keeps it (KVCKPT_ORDER's
 * payload): entries oldest first (so loading them in order rebuilds the
 * LRU), each a struct tra_saved then nslen bytes of its namespace name
 * (names: ids are per mount).
 */
struct tra_saved {
	uint8_t kind;  /* TRA_SEEN, TRA_LINK, TRA_FOLLOWED */
	uint8_t nslen; /* 1..KVFS_NS_NAME_MAX */
	uint8_t from[16], to[16];
};
_Static_assert(sizeof(struct tra_saved) == 34, "saved successor");

void *tier_ra_save(struct tier *t, size_t *len, uint32_t *count)
{
	struct tier_ra *ra = t->ra;
	uint8_t *blob, *p;
	size_t cap = 0;

	*len = 0;
	*count = 0;
	if (!ra) {
		/* not running: what the last checkpoint had, unchanged */
		if (!t->ra_saved || !(blob = malloc(t->ra_saved_len)))
			return NULL;
		memcpy(blob, t->ra_saved, t->ra_saved_len);
		*len = t->ra_saved_len;
		*count = t->ra_saved_count;
		return blob;
	}
	for (struct tra_succ *s = ra->lru_tail; s; s = s->prev) {
		struct tier_ns *n = tier_ns_get(t, s->ns);

		if (n)
			cap += sizeof(struct tra_saved) + strlen(n->name);
	}
	if (!cap || !(blob = malloc(cap)))
		return NULL;
	p = blob;
	for (struct tra_succ *s = ra->lru_tail; s; s = s->prev) {
		struct tier_ns *n = tier_ns_get(t, s->ns);
		struct tra_saved e;

		if (!n)
			continue;
		e.kind = s->kind;
		e.nslen = (uint8_t)strlen(n->name);
		memcpy(e.from, s->from.b, sizeof(e.from));
		memcpy(e.to, s->to.b, sizeof(e.to));
		memcpy(p, &e, sizeof(e));
		memcpy(p + sizeof(e), n->name, e.nslen);
		p += sizeof(e) + e.nslen;
		(*count)++;
	}
	*len = (size_t)(p - blob);
	return blob;
}

void tier_ra_load(struct tier *t, const void *blob, size_t len)
{
	const uint8_t *p = blob, *end = p + len;
	char name[KVFS_NS_NAME_MAX + 1];
	struct tier_ns *n = NULL;

	if (!t->ra)
		return;
	while (end - p >= (ptrdiff_t)sizeof(struct tra_saved)) {
		struct tra_saved e;
		struct kvfs_key from, to;

		memcpy(&e, p, sizeof(e));
		p += sizeof(e);
		if (!e.nslen || e.nslen > KVFS_NS_NAME_MAX ||
		    end - p < e.nslen || e.kind < TRA_SEEN ||
		    e.kind > TRA_WRITTEN)
			return; /* not ours: stop at the first doubt */
		memcpy(name, p, e.nslen);
		name[e.nslen] = 0;
		p += e.nslen;
		if (!n || strcmp(n->name, name))
			n = tier_ns_by_name(t, name);
		if (!n)
			continue;
		memcpy(from.b, e.from, sizeof(from.b));
		memcpy(to.b, e.to, sizeof(to.b));
		succ_set(t->ra, n->id, &from, &to, e.kind);
	}
}

/* tier.lock held, at open: every indexed chunk with a parent (recovered
 * from L2 with its link) links its parent to it again, then the order
 * kept by the last checkpoint goes on top (learned reads win over links,
 * as they did before the restart). */
static void ra_restore(struct tier *t)
{
	struct htab_node *e, *nx;
	uint64_t i;

	htab_for_each_safe(&t->idx, i, e, nx) {
		struct tier_rec *r = idx_rec(e);

		if ((r->flags & TREC_HAS_PARENT) && !(r->flags & TREC_ZOMBIE))
			succ_set(t->ra, r->ns, &r->parent, &r->key, TRA_LINK);
	}
	if (t->ra_saved)
		tier_ra_load(t, t->ra_saved, t->ra_saved_len);
	free(t->ra_saved);
	t->ra_saved = NULL;
	t->ra_saved_len = 0;
	t->ra_saved_count = 0;
	t->ra->changed = false; /* as the checkpoint has it */
	/* what the checkpoint could not hold (written after it, then a
	 * crash): learned again in the order L2's scan found it, as their
	 * publications taught it (the next checkpoint keeps it) */
	for (size_t k = 0; k < t->ra_scanned_n; k++) {
		struct tier_rec *r = tier_idx_find(t, t->ra_scanned[k].ns,
						   &t->ra_scanned[k].key);

		if (r && !(r->flags & (TREC_HAS_PARENT | TREC_ZOMBIE)))
			tier_ra_published(t, r);
	}
	free(t->ra_scanned);
	t->ra_scanned = NULL;
	t->ra_scanned_n = t->ra_scanned_cap = 0;
}

/* ------------------------------------------------------- life cycle */

int tier_ra_open(struct tier *t)
{
	struct tier_ra *ra;

	if (!t->cfg.readahead || (!t->l2 && !t->l3))
		return 0;
	ra = calloc(1, sizeof(*ra));
	if (!ra)
		return -ENOMEM;
	ra->max = t->cfg.readahead;
	pthread_cond_init(&ra->cond, NULL);
	tier_lock(t);
	t->ra = ra;
	ra_restore(t);
	tier_unlock(t);
	for (int i = 0; i < TRA_WORKERS; i++) {
		if (pthread_create(&ra->th[i], NULL, worker_main, t))
			break;
		ra->nthreads++;
	}
	if (!ra->nthreads) {
		tier_ra_close(t);
		return -ENOMEM;
	}
	return 0;
}

void tier_ra_close(struct tier *t)
{
	struct tier_ra *ra = t->ra;
	struct htab_node *e, *nx;
	uint64_t i;

	if (!ra)
		return;
	tier_lock(t);
	ra->stop = true;
	pthread_cond_broadcast(&ra->cond);
	tier_unlock(t);
	for (int k = 0; k < ra->nthreads; k++)
		pthread_join(ra->th[k], NULL);
	/* what it learned, for the checkpoint L2 writes as it closes */
	tier_lock(t);
	free(t->ra_saved);
	t->ra_saved = tier_ra_save(t, &t->ra_saved_len, &t->ra_saved_count);
	tier_unlock(t);
	while (ra->head) {
		struct tra_job *j = ra->head;

		ra->head = j->next;
		free(j);
	}
	htab_for_each_safe(&ra->succ, i, e, nx)
		free(container_of(e, struct tra_succ, node));
	htab_free(&ra->succ);
	tier_lock(t);
	while (ra->pend_head)
		pend_del(t, ra->pend_head);
	tier_unlock(t);
	htab_free(&ra->pend);
	pthread_cond_destroy(&ra->cond);
	free(ra);
	t->ra = NULL;
}

void tier_ra_stats(struct tier *t, struct tier_stats *st)
{
	st->ra_max = t->cfg.readahead;
	if (!t->ra)
		return;
	st->ra_promotions = t->ra->promotions;
	st->ra_hits = t->ra->hits;
	st->ra_wasted = t->ra->wasted;
	st->ra_paused = t->ra->paused;
}

uint64_t tier_ra_meta_bytes(struct tier *t)
{
	struct tier_ra *ra = t->ra;

	if (!ra)
		return 0;
	return sizeof(*ra) + ra->succ.nb * sizeof(*ra->succ.b) +
	       ra->succ.n * sizeof(struct tra_succ) +
	       ra->pend.nb * sizeof(*ra->pend.b) +
	       ra->pend.n * sizeof(struct tra_pend) +
	       ra->nqueued * sizeof(struct tra_job);
}
