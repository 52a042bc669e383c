/*
 * l2.h - the L2 tier: a log of large segment files in l2_dir holding
 * compressed chunk records, written and read with io_uring.
 *
 * On disk: l2_dir/LOCK (flock'ed by the owning daemon), l2_dir/l2.id (a
 * random salt for header checksums, so bytes inside a payload can never
 * pass for a record header), and segment files seg-<16 hex>.kvl2, numbered
 * in creation order. A segment is a sequence of records, each starting on a
 * 4096-byte boundary: a record of record.h (a struct kvrec_hdr, then the
 * payload, stored_len bytes), zero padding to the next 4096 bytes.
 * Segments are appended only, and reclaimed (deleted) whole: the emptiest
 * first while their live records can move (compaction), else the oldest,
 * dropping what the engine does not keep (l2_reclaim.c).
 *
 * Who owns what: l2 knows where records are and which of them are live; the
 * engine (tier/) owns the index from (namespace, key) to a record's
 * location. Every index change l2 asks for is remove-if-match: the engine
 * drops or moves its entry only if it still names the location l2 gives,
 * so a reclaim never deletes a newer copy of the same key.
 *
 * Threads: l2 runs an I/O thread (owns the io_uring, places appends,
 * completes reads and writes) and a reclaim thread. Callbacks are called
 * from those threads (or from l2_open for recovery) with no l2 lock held;
 * they may call l2_free, l2_append and l2_stats but must not wait for an
 * append or read to complete.
 *
 * Lock order: tier.lock -> l2.lock (a leaf: l2 never calls out while
 * holding it). All functions return 0 (or a count) or a negative errno and
 * never set errno.
 */
#ifndef KVFS_L2_H
#define KVFS_L2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvfs.h"
#include "tier/record/record.h"

#define L2_ALIGN 4096u
#define L2_MAGIC KVREC_MAGIC
#define L2_FORMAT_VERSION KVREC_VERSION
#define L2_SEG_SIZE_DEFAULT (64ull << 20)
#define L2_READ_TIMEOUT_MS_DEFAULT 5000

/* The record format (header, checksums) is record.h's; the L2 names of
 * it, kept for the code and tests that read segment files: */
#define l2_rec_hdr kvrec_hdr

/* Where a record lives. Compare all three fields for remove-if-match. */
struct l2_loc {
	uint32_t seg;  /* segment number (its file name) */
	uint32_t blk;  /* offset in the segment, in L2_ALIGN blocks */
	uint32_t nblk; /* length on disk, in L2_ALIGN blocks */
};

static inline bool l2_loc_eq(const struct l2_loc *a, const struct l2_loc *b)
{
	return a->seg == b->seg && a->blk == b->blk && a->nblk == b->nblk;
}

/* What l2 tells the engine about a record. ns points into l2 memory, valid
 * for the duration of the callback only. */
struct l2_rec_info {
	struct l2_loc loc;
	const char *ns;
	struct kvfs_key key;
	uint64_t seq;
	uint64_t raw_len;
	uint64_t stored_len;
	uint64_t raw_sum;
	int codec;
	int shuffle;
	bool compacted; /* moved: by a compaction (every live record of its
			 * segment kept, no verdict asked), not for hotness */
	bool has_parent;        /* the chain link the record carries */
	uint32_t depth;         /* 0: not known */
	struct kvfs_key parent; /* when has_parent */
	bool scanned;           /* recover: found by scanning a segment, not
				 * in the checkpoint */
};

enum l2_reclaim_verdict {
	L2_DROP = 0, /* forget it (the engine removed its entry if it matched) */
	L2_KEEP = 1, /* still hot: move it to the head of the log */
};

struct l2_config {
	const char *dir;     /* must exist; created files are 0600 */
	uint64_t size;       /* bytes on disk, all segments together */
	uint64_t seg_size;   /* 0 = min(64 MiB, size / 4), rounded to 4 KiB;
			      * the largest record. Segments are sealed
			      * smaller on a filesystem with less free space
			      * than size (a quarter of what fits) */
	uint64_t max_queue;  /* bytes of appends waiting; 0 = 256 MiB */
	int read_timeout_ms; /* bound of a synchronous read; 0 = 5000 */
	int checkpoint_s;    /* seconds between checkpoints of the index
			      * (record.h) while open; 0 = only at l2_close;
			      * < 0 = never (l2_open still reads one) */

	/* Log lines (errors, the O_DIRECT fallback). May be NULL. */
	void (*log)(void *arg, const char *msg);
	void *log_arg;

	/*
	 * recover - called from l2_open, once per recovered key (only the
	 * newest valid copy), in record order. Return 0 to take it; anything
	 * else makes l2 free the record (e.g. the engine has no room for it
	 * or its namespace name is invalid).
	 */
	int (*recover)(void *arg, const struct l2_rec_info *rec);

	/*
	 * reclaim - the segment holding rec is being reclaimed by the
	 * policy (L2 holds more live records than it can keep; a compaction
	 * moves every live record without asking). The engine answers
	 * L2_KEEP if the record is still its entry for (ns, key) and hot
	 * enough to keep (only when may_keep), else it removes its entry if
	 * that entry's location equals rec->loc and answers L2_DROP.
	 */
	enum l2_reclaim_verdict (*reclaim)(void *arg,
					   const struct l2_rec_info *rec,
					   bool may_keep);

	/*
	 * pinned - optional: true when rec is the engine's entry for its key
	 * and must not be lost (a lease or a reader holds it, or its
	 * namespace is never evicted, and L1 has no copy). A policy reclaim
	 * takes the oldest segment whose pinned records fit its move budget
	 * and offers them the budget before any merely hot one, so a pinned
	 * record is never dropped for space (when no segment qualifies,
	 * appends wait). No side effects.
	 */
	bool (*pinned)(void *arg, const struct l2_rec_info *rec);

	/*
	 * moved - the outcome of an L2_KEEP: the record now lives at *to, or
	 * was lost (to == NULL: read or write failed, no space). The engine
	 * replaces its entry's location (remove it, when to == NULL) only if
	 * it still equals rec->loc, and returns true when it did; on false
	 * l2 frees the new copy.
	 */
	bool (*moved)(void *arg, const struct l2_rec_info *rec,
		      const struct l2_loc *to);

	/*
	 * ckpt_save - optional: called by each checkpoint write (no l2 lock
	 * held, before the checkpoint's own locks) for what the engine keeps
	 * with the index (record.h, KVCKPT_ORDER): a malloc'ed blob of *len
	 * bytes and *count entries that l2 frees, or NULL for none.
	 * ckpt_load - optional: called once at the end of l2_open's recovery
	 * with the blob of the checkpoint it loaded (not when it scanned).
	 */
	void *(*ckpt_save)(void *arg, size_t *len, uint32_t *count);
	void (*ckpt_load)(void *arg, const void *blob, size_t len,
			  uint32_t count);
	void *cb_arg;
};

struct l2_stats {
	uint64_t capacity;   /* l2_size, or less: see l2_append (disk full) */
	uint64_t disk_bytes; /* segment bytes placed (what capacity bounds) */
	uint64_t seg_target; /* bytes a segment is sealed at (what a
			      * reclaim frees at most) */
	uint64_t reserve;    /* of capacity, kept for a reclaim's moves */
	uint64_t bytes;      /* live records, bytes on disk */
	uint64_t raw_bytes;  /* live records, raw bytes */
	uint64_t records;    /* live records */
	uint64_t segments;
	uint64_t reads, writes, reclaims, corrupt, errors; /* writes: moves too */
	uint64_t moves;      /* records re-inserted by reclaims */
	uint64_t write_bytes; /* bytes written, moves included */
	uint64_t moved_bytes; /* bytes of moves (write amplification:
			       * write_bytes / (write_bytes - moved_bytes)) */
	uint64_t compactions; /* reclaims that kept every live record */
	uint64_t queued_bytes; /* appends waiting or in flight */
	uint64_t recovered;  /* records recovered by l2_open */
	uint64_t recover_ns; /* time l2_open spent scanning */
	uint64_t torn;       /* records cut short (crash) found by recovery */
	bool recover_ckpt;   /* l2_open loaded a checkpoint (else scanned) */
	uint64_t recover_ckpt_records; /* recovered from the checkpoint */
	uint64_t recover_scan_records; /* recovered by scanning segments */
	uint64_t recover_scan_bytes;   /* segment bytes scanned by l2_open */
	uint64_t checkpoints;  /* checkpoints written since l2_open */
	uint64_t ckpt_errors;  /* checkpoint writes that failed */
	uint64_t ckpt_records; /* entries of the last checkpoint written */
	uint64_t ckpt_write_ns;/* time the last checkpoint took to write */
	uint64_t syncs;        /* fdatasyncs of segments (l2_sync, moves) */
	bool direct;         /* O_DIRECT in use */
};

struct l2;
struct l2_rec; /* a record built in memory, ready to append */

/*
 * l2_open - opens (creating files as needed) the log in cfg->dir, takes
 * its lock, loads the index checkpoint (record.h) when one verifies,
 * scans the segments (or parts) it does not cover, applies the unlink
 * log, and calls cfg->recover for each recovered record before returning
 * (a missing, stale or damaged checkpoint: every segment is scanned, and
 * one log line says why). Records that fail verification are skipped and
 * counted (corrupt; torn for a record cut off by the end of its file).
 * On failure writes a one-line reason to err.
 * Errors: -EBUSY (another process holds the lock), -EINVAL (size too small
 * for 4 segments of 2 records of 4 KiB, or bad dir), -ENOENT / -ENOTDIR /
 * -EACCES / -EROFS ... (from the directory), -ENOMEM, and io_uring setup
 * errors.
 */
int l2_open(const struct l2_config *cfg, struct l2 **out, char *err,
	    size_t errlen);

/* l2_close - waits for queued appends (their callbacks run), stops the
 * threads, writes the checkpoint (unless checkpoint_s < 0), releases the
 * lock and frees everything. NULL is a no-op. */
void l2_close(struct l2 *l2);

/*
 * l2_build - compresses a chunk into a new record: CPU only, no l2 lock
 * held for any length of time, callable from any thread (use it outside
 * the engine lock). level 0 stores raw; a chunk that does not shrink by at
 * least 1/16 (after padding) is stored raw too. shuffle 0, 2 or 4.
 * Errors: -EINVAL (name, level or shuffle), -EFBIG (the record would not
 * fit in one segment: l2_size too small for this chunk), -ENOMEM.
 */
int l2_build(struct l2 *l2, const char *ns, const struct kvfs_key *key,
	     const void *raw, size_t len, int level, int shuffle,
	     struct l2_rec **out);

/* l2_rec_set_link - gives a built record (not yet appended) the chunk's
 * chain link (record.h, version 2): parent (or NULL) and depth (0: not
 * known), kept with the record so a restart knows the chain again. */
void l2_rec_set_link(struct l2 *l2, struct l2_rec *rec,
		     const struct kvfs_key *parent, uint32_t depth);

/* l2_rec_info - what the record holds (loc is zero until appended). */
void l2_rec_info(const struct l2_rec *rec, struct l2_rec_info *info);

/* l2_rec_decode - decodes a built record (one whose append is pending)
 * into dst, which holds exactly the record's raw_len bytes, and verifies
 * it. -EINVAL (len differs), -EBADMSG, -ENOMEM. Safe while the append is
 * in flight (the I/O thread only reads the buffer). */
int l2_rec_decode(struct l2 *l2, const struct l2_rec *rec, void *dst,
		  size_t len);

/* l2_rec_free - frees a record the caller owns. NULL is a no-op. */
void l2_rec_free(struct l2 *l2, struct l2_rec *rec);

/*
 * l2_append - queues rec for writing at the head of the log. Returns 0 and
 * then calls done exactly once, from the I/O thread: with err 0 and the
 * record's location once it is on disk, or a negative errno (-ENOSPC,
 * -EIO, ... also counted in errors and logged). done receives rec back and
 * owns it again (it may read it, then must l2_rec_free it). Until done,
 * the caller may read rec (l2_rec_decode) but not free it.
 * A filesystem that fills up before l2_size (ENOSPC, EDQUOT) lowers the
 * capacity to what the log holds, until the next l2_open: the append is
 * placed again (up to 3 tries) after reclaim made room, and later ones
 * reclaim the oldest segments as at l2_size. Each failed try is counted
 * in errors; done gets -ENOSPC only when every try failed.
 * Errors (done is not called, the caller still owns rec): -EAGAIN (more
 * than max_queue bytes waiting), -ESHUTDOWN (closing).
 */
typedef void (*l2_done_fn)(void *arg, struct l2_rec *rec, int err,
			   const struct l2_loc *loc);
int l2_append(struct l2 *l2, struct l2_rec *rec, l2_done_fn done, void *arg);

/*
 * l2_read - reads the record at loc with a bounded wait, checks that it is
 * the record of (ns, key) with raw_len == len, and decodes it into dst.
 * Callable from any thread; decompression runs on the caller's thread.
 * Errors: -EBADMSG (checksum or header mismatch: counted in corrupt; the
 * engine drops its entry and l2_frees loc), -EIO (the disk failed, counted
 * in errors), -ETIMEDOUT (no answer within read_timeout_ms; the read goes
 * on in the background and its buffer is freed when it ends), -ENOENT (no
 * such segment: reclaimed), -ENOMEM.
 */
int l2_read(struct l2 *l2, const struct l2_loc *loc, const char *ns,
	    const struct kvfs_key *key, void *dst, size_t len);

/*
 * l2_read_alone - from now on, l2_read on the calling thread decodes a
 * large chunk on that thread alone instead of sharing its frames with the
 * decode threads: for threads that promote ahead of readers, several at a
 * time, where the cores are busy with their siblings and sharing a chunk
 * only adds wakeups (about a fifth more CPU per 2 MiB chunk here). A
 * reader waiting for its chunk keeps the shared decode (less latency).
 */
void l2_read_alone(bool on);

/* l2_free - the record at loc is no longer wanted (unlinked, replaced or
 * corrupt): its space is released and it will not come back at the next
 * open. Asynchronous, never blocks on the disk. Unknown locations are
 * ignored. */
void l2_free(struct l2 *l2, const struct l2_loc *loc);

/* l2_sync_frees - waits until the records of every l2_free called before
 * it are erased on disk (punched, or their header zeroed), and copies a
 * reclaim was moving meanwhile too, so that a daemon killed afterwards
 * does not recover them; at most timeout_ms.
 * Returns 0 or -ETIMEDOUT. (Not fsync: a power loss may still bring a
 * record back, with its own bytes, checksummed.) */
int l2_sync_frees(struct l2 *l2, int timeout_ms);

/*
 * l2_sync - makes the record at loc durable: fdatasync of its segment
 * (the bytes, the file's size), and an fsync of l2_dir the first time
 * for that segment (its name, and l2.id), so that after a crash of the
 * daemon or of the machine l2_open recovers it. Blocks on the disk: call
 * it outside the engine's locks. Records a reclaim moves are synced
 * before the segment they leave is deleted, so a synced record stays
 * durable where it goes.
 * Errors: -ENOENT (no live record at loc: moved, freed or reclaimed;
 * ask the index again), -EIO and the other errors of fdatasync (counted
 * in errors, logged).
 */
int l2_sync(struct l2 *l2, const struct l2_loc *loc);

/* l2_flush - waits until every append queued before the call has
 * completed (its done callback returned). Do not call from a callback. */
void l2_flush(struct l2 *l2);

void l2_get_stats(struct l2 *l2, struct l2_stats *st);

/* l2_set_link - the chain link (parent key, depth) of the live record at
 * loc, learned after the record was written (a batched lookup stamped
 * it): the next checkpoint keeps it, and a reclaim that moves the record
 * writes it into the moved copy's header. Fills only what the record does
 * not know yet, as tier_rec_set_parent does. 0, or -ENOENT (no such live
 * record). */
int l2_set_link(struct l2 *l2, const struct l2_loc *loc,
		const struct kvfs_key *parent, uint32_t depth);

/* l2_ckpt_dirty - what ckpt_save returns has changed: the periodic
 * checkpoint is due even when no record changed. Any thread, any lock
 * (one atomic add). */
void l2_ckpt_dirty(struct l2 *l2);

/* l2_checkpoint - writes the checkpoint of the index now (record.h), as
 * the periodic one does: 0, or -errno (the previous one stays). */
int l2_checkpoint(struct l2 *l2);

/* l2_record_bytes - bytes a chunk of len raw bytes takes on disk at most
 * (header + payload, padded): what l2_size must at least hold. */
static inline uint64_t l2_record_bytes(uint64_t len)
{
	return (sizeof(struct l2_rec_hdr) + len + L2_ALIGN - 1) &
	       ~(uint64_t)(L2_ALIGN - 1);
}

#endif /* KVFS_L2_H */
