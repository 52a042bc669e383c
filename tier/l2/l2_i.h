/*
 * l2_i.h - internals of the L2 log (l2.h), shared by its files:
 *   l2.c          open/close, stats, logging, buffer and workspace pools
 *   l2_seg.c      the segment table, segment entries, space accounting
 *   record.h/.c   the record format: header, checksums, verification
 *   l2_rec.c      building a record and appending it
 *   l2_io.c       the I/O thread (io_uring: places appends, completes
 *                 reads, writes and punches)
 *   l2_read.c     synchronous bounded reads
 *   l2_decode.c   decoding a payload (parallel zstd frames)
 *   l2_free.c     freeing records (punches) and waiting for them
 *   l2_recover.c  the recovery at open: checkpoint + scan of the rest
 *   l2_ckpt.c     checkpoints of the index: check, write, the thread
 *   l2_flog.c     the unlink log (records freed since the checkpoint)
 *   l2_sync.c     making records durable (fsync of a chunk, moves)
 *   l2_reclaim.c  the reclaim thread (compacts the emptiest segment,
 *                 or evicts from the oldest by policy when L2 is full)
 *
 * Locks, in the order they are taken (never the other way):
 *
 *   (the engine's tier.lock) -> l2.lock
 *   l2.mt_lock: a leaf, never held together with l2.lock
 *
 *   l2.lock     every field marked l2.lock: segments and their entries,
 *               space, interned names, the request queues, pools, stats;
 *               read requests wait on their cond with it. A leaf for the
 *               engine: l2 never calls out (callbacks, logging) while
 *               holding it.
 *   l2.mt_lock  the decode jobs (fields marked mt_lock); nothing is taken
 *               under it.
 *   (imm)       set in l2_open before any thread starts, then only read.
 *   (io)        the I/O thread's own, no lock.
 */
#ifndef KVFS_L2_I_H
#define KVFS_L2_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <liburing.h>

#include "tier/record/codec.h"
#include "tier/l2/l2.h"

enum l2_ent_state {
	ENT_PENDING = 0, /* placed, write in flight */
	ENT_LIVE,        /* on disk, the engine may point at it */
	ENT_DEAD,        /* freed, failed, superseded or reclaimed */
};

/* One record of a segment; segments keep them sorted by blk. */
/* Every field: l2.lock. */
struct l2_ent {
	struct kvfs_key key;
	uint64_t seq, raw_len, stored_len, raw_sum;
	uint32_t blk, nblk;
	uint32_t ns;     /* index into l2.ns_names */
	uint8_t codec, shuffle;
	uint8_t state;   /* enum l2_ent_state */
	bool has_parent; /* the record's chain link (record.h, v2) */
	uint32_t depth;
	struct kvfs_key parent;
};

enum l2_seg_state {
	SEG_ACTIVE = 0, /* appends go here */
	SEG_SEALED,
	SEG_RECLAIM,    /* being reclaimed: no punching, reads still work */
};

struct l2_seg {
	uint32_t id;       /* (imm) once created */
	int fd;            /* (imm) once created; closed at the last ref */
	int refs;          /* l2.lock: 1 for the table + each request using fd */
	int state;         /* l2.lock: enum l2_seg_state */
	uint64_t tail;     /* l2.lock: bytes placed so far */
	uint64_t pending;  /* l2.lock: writes in flight into it */
	bool dir_synced;   /* l2.lock: l2_dir fsync'ed since it was made */
	struct l2_ent *ents; /* l2.lock: sorted by blk */
	size_t nents, cap; /* l2.lock */
};

/* A built record: one aligned buffer, header + payload + padding. Owned
 * by its caller until appended, then by the I/O thread until done. */
struct l2_rec {
	struct kvrec_hdr *hdr; /* the buffer (4096-aligned) */
	size_t cap;             /* its allocated bytes */
	uint32_t nblk;          /* bytes to write / L2_ALIGN */
	struct l2_loc loc;      /* set when written */
};

enum l2_req_op {
	REQ_WRITE = 1,
	REQ_READ,
	REQ_PUNCH,
};

/* A request for the I/O thread. Owned by the thread that made it until
 * queued (l2.lock), then by the I/O thread, except where marked. */
struct l2_req {
	struct l2_req *next;
	int op;
	int res;           /* 0 or -errno once finished */
	struct l2_seg *seg; /* a ref is held while the request lives */
	uint64_t off;      /* bytes in the segment */
	size_t len, pos;   /* bytes to transfer, bytes done */
	void *buf;
	size_t buf_cap;
	/* REQ_WRITE */
	struct l2_rec *rec;
	l2_done_fn done;
	void *arg;
	bool reserve;      /* a reclaim move: may use l2.reserve */
	bool counted_free; /* an l2_free punch: counts in frees_done */
	uint8_t tries;     /* placements that failed with ENOSPC */
	/* REQ_READ: l2.lock */
	bool finished, abandoned;
	pthread_cond_t cond;
};

struct l2_buf {
	struct l2_buf *next;
	void *p;
	size_t cap;
};

struct l2_ws_item {
	struct l2_ws_item *next;
	struct codec_ws *ws;
};

/* One chunk being decoded by several threads, a frame at a time. */
struct l2_mt {
	struct l2_mt *next;
	const uint8_t *src; /* src/out/f/n: set before queueing, then read */
	uint8_t *out;
	const struct codec_frame *f;
	size_t n;          /* frames */
	size_t next_frame; /* l2.mt_lock: the next frame to take */
	size_t done;       /* l2.mt_lock: frames decoded */
	int err;           /* l2.mt_lock */
};

#define L2_MT_MAX 3

struct l2 {
	struct l2_config cfg; /* (imm) */
	char *dir;          /* (imm) */
	int dir_fd;         /* (imm) */
	int lock_fd;        /* (imm) flock'ed l2_dir/LOCK */
	uint64_t salt;      /* (imm) seed of header checksums (l2.id) */
	bool salt_new;      /* (imm) l2.id was missing: written at this open */
	uint64_t seg_size;  /* (imm) the largest record (and segment) */
	uint32_t max_segs;  /* (imm) size / seg_size (sizes the fd limit) */
	bool direct;        /* l2.lock (or open): O_DIRECT works here;
			     * cleared once, when a segment open is refused */
	bool direct_logged; /* l2.lock */

	pthread_mutex_t lock; /* protects everything marked l2.lock */

	/* segments, sorted by id: l2.lock */
	struct l2_seg **segs;
	size_t nsegs, segs_cap;
	struct l2_seg *active;
	uint32_t next_seg;

	/*
	 * Space, l2.lock. used is the sum of the segments' tails: the most
	 * the log can occupy on disk (punched holes still count, slack after
	 * a sealed segment's last record does not). Normal appends keep used
	 * <= cap - reserve, reclaim moves <= cap, and cap <= l2_size, so the
	 * log never takes more than l2_size. cap starts at l2_size and is
	 * lowered (until the next open) when the filesystem fills up first.
	 */
	uint64_t cap;
	uint64_t used;
	uint64_t inflight;   /* bytes placed whose write has not completed */
	uint64_t seg_target; /* seal the active segment past this (<= seg_size) */
	uint64_t reserve;    /* room kept for moves: the reclaim budget */

	/* namespace names, interned: l2.lock */
	char **ns_names;
	size_t nns, ns_cap;

	_Atomic uint64_t next_seq; /* atomic: record numbers */

	/* requests for the I/O thread: l2.lock */
	struct l2_req *sub_head, *sub_tail;
	struct l2_req *move_head, *move_tail; /* reclaim moves, placed first */
	uint64_t queued_bytes;  /* appends accepted, not completed */
	uint64_t queued_count;
	bool closing;           /* no new appends */
	bool io_stop;           /* I/O thread: exit when idle */
	bool rc_stop;           /* reclaim thread: exit */
	bool parked;            /* an append waits for space */
	pthread_cond_t idle_cond;   /* queued_count reached 0 */
	pthread_cond_t free_cond;   /* frees_done moved */
	uint64_t frees_queued;      /* punches of l2_free queued, ever */
	uint64_t frees_done;        /* ... and completed */
	pthread_cond_t rc_cond;     /* reclaim thread wake-up */
	pthread_cond_t move_cond;   /* moves of the current reclaim done */
	uint64_t moves_pending;
	uint32_t mv_lo, mv_hi;      /* segments the current reclaim's moves
				     * landed in (mv_lo > mv_hi: none) */
	bool rc_stuck;              /* no segment could be reclaimed (logged) */

	struct io_uring ring; /* (io) */
	int efd;              /* (imm) eventfd: wakes the I/O thread */
	uint64_t efd_val;     /* (io) */
	pthread_t io_thread, rc_thread; /* open/close only */
	bool io_started, rc_started;    /* open/close only */

	/* pools: l2.lock */
	struct l2_buf *bufs;
	size_t nbufs;
	size_t pool_bytes;    /* the bufs' caps together */
	struct l2_ws_item *wss;
	void *zero;           /* L2_ALIGN zero bytes (punch fallback) */
	bool punch_ok;        /* (io) */

	/* decode helpers (mt_*: l2.mt_lock, a leaf) */
	pthread_mutex_t mt_lock;
	pthread_cond_t mt_cv, mt_done; /* with mt_lock */
	struct l2_mt *mt_head;         /* mt_lock: jobs with frames left */
	bool mt_stop;                  /* mt_lock */
	int mt_n;                      /* (imm) decode threads running */
	pthread_t mt_th[L2_MT_MAX];    /* open/close only */

	/* checkpoint (l2_ckpt.c) and unlink log (l2_flog.c) */
	pthread_mutex_t ckpt_lock; /* one checkpoint writer; before l2.lock */
	pthread_cond_t ck_cond;    /* with l2.lock: wakes the thread */
	pthread_t ck_thread;       /* open/close only */
	bool ck_started, ck_stop;  /* ck_stop: l2.lock */
	bool opened;               /* l2_open succeeded: close checkpoints */
	uint64_t changes;          /* l2.lock: entries made live or dead */
	uint64_t ckpt_changes;     /* l2.lock: changes at the last checkpoint */
	_Atomic uint64_t ext_changes; /* l2_ckpt_dirty calls */
	uint64_t ckpt_ext;         /* l2.lock: ext_changes at the last one */
	int flog_fd;               /* l2.lock: l2.freed, O_APPEND */
	uint64_t flog_bytes;       /* l2.lock: its length */
	bool flog_failed;          /* l2.lock: an append failed */

	/* stats: l2.lock */
	struct l2_stats st;
	int last_err_logged;
	uint64_t errs_since_log;
};

static inline uint64_t l2_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t l2_align_up(uint64_t v)
{
	return (v + L2_ALIGN - 1) & ~(uint64_t)(L2_ALIGN - 1);
}

/* ------------------------------------------- l2.c: helpers, open/close */
void l2_logf(struct l2 *l2, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void l2_log_err(struct l2 *l2, int err, const char *what, uint32_t seg);
void *l2_buf_get(struct l2 *l2, size_t len, size_t *cap);
void l2_buf_put(struct l2 *l2, void *p, size_t cap);
/* A pooled codec workspace (NULL when out of memory); l2.lock taken. */
struct codec_ws *l2_ws_get(struct l2 *l2);
void l2_ws_put(struct l2 *l2, struct codec_ws *ws);
/* A condition variable timed against CLOCK_MONOTONIC (see l2_deadline). */
void l2_cond_init_monotonic(pthread_cond_t *c);
/* *dl = now + ms on CLOCK_MONOTONIC. */
void l2_deadline(struct timespec *dl, int ms);

/* ------------------------------------------- l2_seg.c: segments, space */
/* seg-<16 hex>.kvl2 of segment id. */
void l2_seg_name(char *buf, size_t len, uint32_t id);
int l2_seg_open_fd(struct l2 *l2, uint32_t id, int flags);
/* Adds seg to the sorted table (l2.lock held or before threads run). */
int l2_seg_insert(struct l2 *l2, struct l2_seg *seg);
/* Appends an entry for header h at blk to seg (callers keep blk order;
 * l2.lock held). NULL when out of memory. */
struct l2_ent *l2_ent_add(struct l2 *l2, struct l2_seg *seg,
			  const struct kvrec_hdr *h, uint32_t blk,
			  uint32_t nblk);
/* The same for a built record (the I/O thread placing a write). */
struct l2_ent *l2_ent_add_rec(struct l2 *l2, struct l2_seg *seg,
			      const struct l2_rec *rec, uint32_t blk);
struct l2_seg *l2_seg_find(struct l2 *l2, uint32_t id);
struct l2_ent *l2_ent_find(struct l2_seg *seg, uint32_t blk);
/* l2.lock held: the live entry at loc (all three fields) and its
 * segment, or NULL. */
struct l2_ent *l2_ent_at(struct l2 *l2, const struct l2_loc *loc,
			 struct l2_seg **seg);
/* l2.lock held: a zeroed entry at the end of seg (NULL: no memory). */
struct l2_ent *l2_ent_append(struct l2_seg *seg);
/* l2.lock held: the index of the interned name, or -ENOMEM. */
long l2_ns_intern(struct l2 *l2, const char *ns);
void l2_ent_kill(struct l2 *l2, struct l2_ent *e);
void l2_ent_live(struct l2 *l2, struct l2_ent *e);
void l2_seg_unref(struct l2 *l2, struct l2_seg *seg);
int l2_seg_create(struct l2 *l2, struct l2_seg **out);
void l2_set_space(struct l2 *l2, uint64_t cap, uint64_t est);
uint64_t l2_room(const struct l2 *l2);
uint64_t l2_disk_full(struct l2 *l2);
void l2_log_disk_full(struct l2 *l2, uint64_t cap, int err);
void l2_info_from_ent(const struct l2 *l2, const struct l2_seg *seg,
		      const struct l2_ent *e, struct l2_rec_info *info);

/* ------------------------------------------- l2_decode.c */
void l2_mt_start(struct l2 *l2);
void l2_mt_stop(struct l2 *l2);
/* Decodes the payload following the checked header h into len bytes at
 * dst and checks raw_sum: 0, -EBADMSG or -ENOMEM. */
int l2_decode(struct l2 *l2, const struct kvrec_hdr *h, void *dst,
	      size_t len);

/* ------------------------------------------- l2_recover.c */
/* The recovery scan of l2_open (before the threads start). */
int l2_recover(struct l2 *l2, char *err, size_t errlen);

/* record.h's header check with this store's salt and size limit. */
static inline int l2_hdr_check(const struct l2 *l2, const struct kvrec_hdr *h)
{
	return kvrec_hdr_check(h, l2->salt, l2->seg_size);
}

/* ------------------------------------------- l2_ckpt.c, l2_flog.c */
/* What l2_ckpt_check found in a checkpoint that verifies. */
struct l2_ckpt_info {
	uint64_t next_seq, records;
	uint32_t next_seg, flags, nsegs, nns;
	size_t ns_off, ns_len;     /* the NS block's payload in the buffer */
	size_t order_off, order_len; /* the ORDER block's (len 0: none) */
	uint32_t order_count;
};
/* Checks len bytes of a checkpoint (every block's sum, structure, ranges)
 * against salt: 0, -ESTALE (another l2.id) or -EBADMSG, with why. Pure:
 * no l2 needed (the fuzz target calls it). */
int l2_ckpt_check(const void *buf, size_t len, uint64_t salt,
		  struct l2_ckpt_info *ci, char *why, size_t whylen);
/* Walks the SEG blocks of a checked checkpoint: *pos starts at 0; the
 * LINK block that follows one (if any) in *links, *nlinks (else 0). */
const struct kvckpt_seg *l2_ckpt_next_seg(const void *buf, size_t len,
					  size_t *pos,
					  const struct kvckpt_ent **ents,
					  const struct kvckpt_link **links,
					  uint32_t *nlinks);
/* Writes l2.ckpt (takes ckpt_lock, then l2.lock in short holds). */
int l2_ckpt_write(struct l2 *l2, bool clean);
int l2_ckpt_start(struct l2 *l2);
void l2_ckpt_stop(struct l2 *l2);
/* Reads the unlink log (its valid prefix; *damaged when anything follows
 * it) and opens it for appends. */
int l2_flog_load(struct l2 *l2, struct kvckpt_freed **out, size_t *n,
		 bool *damaged);
/* l2.lock held: logs the free of the record (seg, blk, seq). */
void l2_flog_append(struct l2 *l2, uint32_t seg, uint32_t blk, uint64_t seq);
/* Without l2.lock: drops the log's first mark bytes (a checkpoint that
 * holds them committed). */
void l2_flog_trim(struct l2 *l2, uint64_t mark);

/* l2_io.c */
int l2_io_start(struct l2 *l2);
void l2_io_stop(struct l2 *l2);
void l2_io_submit(struct l2 *l2, struct l2_req *r);
void l2_io_wake(struct l2 *l2);

/* l2_sync.c: fdatasync of the segments with ids in lo..hi (a reclaim's
 * moves, before the segment they left is deleted). 0 or -errno. */
int l2_sync_moved(struct l2 *l2, uint32_t lo, uint32_t hi);

/* l2_reclaim.c */
int l2_reclaim_start(struct l2 *l2);
void l2_reclaim_stop(struct l2 *l2);
bool l2_need_reclaim(const struct l2 *l2);

#endif /* KVFS_L2_I_H */
