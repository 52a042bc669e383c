/*
 * tier.h - the kvfs cache engine: chunk index, namespaces, publication,
 * pins, the L1 arena and its eviction policy, and (with l2_dir) the L2 log.
 * No FUSE in here: fs/ translates FUSE requests into these calls, and tests
 * and `kvfsctl replay` drive it directly.
 *
 * Conventions: every function returns 0 (or a count) or a negative errno and
 * never sets errno. All functions are thread-safe; a struct tier has one
 * mutex (tier.lock) that protects the index, the namespaces, the policy and
 * the allocator; chunk bytes are copied outside it while the chunk is pinned
 * (readers) or owned by its writer (struct tier_wr). Callbacks given in the
 * config are called WITHOUT tier.lock held.
 *
 * Lock order: fs locks (inode table) -> tier.lock -> l2 locks. Nothing takes
 * an fs lock while holding tier.lock.
 */
#ifndef KVFS_TIER_H
#define KVFS_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvfs.h"
#include "tier/l3/l3.h"
#include "tier/tier_events.h"

struct tier;
struct tier_wr;    /* a chunk being written; owned by one writer */
struct tier_chunk; /* a published chunk, pinned while the caller holds it */

enum tier_ingest {
	TIER_INGEST_EVICTED = 0, /* L1 victims go to L2 (default) */
	TIER_INGEST_ALL,         /* every published chunk also goes to L2 */
	TIER_INGEST_HOT,         /* chunks with >= hot_hits hits go to L2 */
	TIER_INGEST_TWICE,       /* L1 victims seen twice go to L2: hit in L1,
				  * or published before (tier/policy/seen.h) */
};

enum tier_where {
	TIER_NONE = 0,
	TIER_L1 = 1,
	TIER_L2 = 2,
};

/* Why a chunk left the namespace (for fs to invalidate kernel caches). */
enum tier_gone_reason {
	TIER_GONE_EVICTED = 1, /* evicted with no lower tier to keep it */
	TIER_GONE_DROPPED,     /* L2 reclaimed it, a corrupt record, or
				* another node stored a newer version of a
				* path file in L3 (tier_l3_notify.c) */
};

#define TIER_READAHEAD_DEFAULT 16
#define TIER_READAHEAD_MAX 1024
#define TIER_WAIT_RECHECK_MS_DEFAULT 50
#define TIER_WAIT_RECHECK_MS_MAX 100

/* The attributes of a file of a path namespace (fs/paths/), which the
 * engine carries in the file's L3 record (record.h version 3) so that a
 * node reading it from L3 judges it as its writer did: permission bits
 * (07777), owner, mtime. */
struct tier_pattr {
	uint32_t mode;
	uint32_t uid, gid;
	uint32_t mtime_nsec;  /* < 10^9 */
	int64_t mtime_sec;
};

struct tier_config {
	uint64_t l1_size;   /* bytes of arena; must hold at least one chunk */
	uint64_t max_chunk; /* largest chunk, bytes (default 64 MiB) */
	const char *policy; /* a tier/policy/policy.c name: "lru", "fifo", "s3fifo",
			     * "prefix" (default), "s2lru" */
	const char *l1;     /* gpu backend spec: "host" | "pinned" | "cuda[:N]" */

	/* L2: disabled when l2_dir is NULL. */
	const char *l2_dir;
	uint64_t l2_size;       /* bytes on disk; 0 = half the free space of
				 * l2_dir's filesystem (>= 256 MiB); must hold
				 * 4 chunks of max_chunk (else -EINVAL; when
				 * the default is too small L2 is disabled,
				 * logged, and L1 serves alone) */
	int compress_level;     /* 0 = none, else the zstd level */
	int shuffle;            /* default byte-plane shuffle: 0, 2 or 4 */
	enum tier_ingest ingest;
	uint32_t hot_hits;      /* threshold for TIER_INGEST_HOT */
	int l2_checkpoint_s;    /* seconds between checkpoints of the L2
				 * index (tier/record/record.h); 0 = only at a clean
				 * unmount; default 60 */
	bool flush_on_exit;     /* write L1 to L2 on tier_destroy */

	/* L3 (tier/l3/l3.h, tier_l3.c): disabled when l3 is NULL. The strings
	 * are used by tier_create only (copied where kept). */
	const char *l3;             /* redis://HOST:PORT[,HOST:PORT...] */
	enum l3r_mode l3_cluster;   /* auto (default), cluster, standalone */
	const char *l3_user;        /* AUTH user (ACL); NULL = default */
	const char *l3_password;    /* AUTH; NULL = none */
	enum tier_ingest l3_ingest; /* what goes to L3 (default evicted:
				     * chunks leaving L1) */
	int l3_timeout_ms;          /* 0 = L3_TIMEOUT_MS_DEFAULT */
	int l3_write_timeout_ms;    /* 0 = L3_WRITE_TIMEOUT_MS_DEFAULT */
	const char *l3_prefix;      /* NULL = L3_PREFIX_DEFAULT */

	/* Chain readahead (tier_readahead.c): the largest window, in
	 * chunks, promoted from L2/L3 ahead of a reader that follows a
	 * chain; 0 = off (tier_config_default: the engine alone does not
	 * promote behind its caller's back; kvfs-mount's default is
	 * TIER_READAHEAD_DEFAULT). At most TIER_READAHEAD_MAX. */
	uint32_t readahead;
	/* Waiters (tier_wait.h): with L3, how often a waiter re-checks L3
	 * (ms; 0 = TIER_WAIT_RECHECK_MS_DEFAULT), and whether L3 writes
	 * are announced to other nodes (tier/l3/l3_notify.h; l3_notify=0
	 * turns it off, re-checks only). */
	uint32_t wait_recheck_ms;
	bool l3_notify_off;

	/*
	 * Called (without tier.lock) after a published chunk left the engine
	 * entirely, so fs can invalidate the kernel's dentry and pages. May be
	 * called from any thread, including inside tier_* calls of the caller
	 * (so it must not call back into fs locks held by that caller: queue
	 * the work instead).
	 */
	void (*on_gone)(void *arg, uint32_t ns, const struct kvfs_key *key,
			enum tier_gone_reason why);
	void *on_gone_arg;

	/*
	 * With L3, the attributes of files of path namespaces (NULL: none
	 * are carried). pattr_get: as a write of (ns, key) to L3 is queued
	 * (tier.lock held: it may take only a leaf lock of its own), true
	 * and *a when the chunk is a path file whose attributes are known
	 * (its record carries them, record.h version 3). pattr_found: a
	 * promotion from L3 of (ns, key) is about to publish it, with the
	 * attributes its record carried (a NULL: none). No tier lock held.
	 */
	bool (*pattr_get)(void *arg, uint32_t ns, const struct kvfs_key *key,
			  struct tier_pattr *a);
	void (*pattr_found)(void *arg, uint32_t ns,
			    const struct kvfs_key *key,
			    const struct tier_pattr *a);
	void *pattr_arg;

	/*
	 * Whether publication gen of (ns, key) is read from a copy of the
	 * caller's own (a passthrough shadow, fs/fs_pt.c): readahead for a
	 * reader whose last read was such a copy's (TIER_GET_NOFILL) then
	 * leaves it in L2 and goes on past it, as past a chunk in L1
	 * (tier.lock held: it may take only a leaf lock of its own). NULL:
	 * never.
	 */
	bool (*held_elsewhere)(void *arg, uint32_t ns,
			       const struct kvfs_key *key, uint64_t gen);
	void *held_arg;

	/* Where every published chunk is, as it changes (tier_events.h):
	 * silent until tier_events_start. */
	struct tier_event_sink events;

	/* Error messages (e.g. "l2_dir: Permission denied") go here. */
	void (*log)(void *arg, const char *msg);
	void *log_arg;
};

/* Fills cfg with defaults (l1_size 1 GiB, max_chunk 64 MiB, prefix, host,
 * no L2, zstd level 1, shuffle 2, ingest evicted, hot_hits 2, no
 * readahead). */
void tier_config_default(struct tier_config *cfg);

/*
 * tier_create - allocates the L1 arena (through gpu/) and, with l2_dir,
 * opens and recovers L2 (namespaces and chunks found there are listed
 * before this returns). On failure writes a one-line reason to err.
 * Errors: -EINVAL (bad policy name, l1_size < 4096, max_chunk > l1_size...),
 * -ENOMEM, -ENODEV (no usable GPU for pinned/cuda), -EBUSY (l2_dir locked by
 * another daemon), and whatever the L2 directory gives.
 */
int tier_create(const struct tier_config *cfg, struct tier **out,
		char *err, size_t errlen);

/*
 * tier_events_start - announces every published chunk (STORED, where it
 * is: the chunks L2 recovery listed), then reports every change from now
 * on to cfg.events. Call once, when the namespaces' attributes are back
 * (fs: after the namespaces file). No-op without a sink.
 */
void tier_events_start(struct tier *t);

/* tier_destroy - frees everything. With flush_on_exit, writes L1 chunks to
 * L2 first. Chunks still pinned are freed anyway: call it last. */
void tier_destroy(struct tier *t);

/* ---------------------------------------------------------------- names */

/*
 * Namespaces have small integer ids (never reused within one struct tier).
 * Names follow KVFS_NS_NAME_MAX and kvfs.h's rules.
 * tier_ns_create: -EEXIST, -EINVAL (bad name), -ENAMETOOLONG.
 * tier_ns_find:   -ENOENT.
 * tier_ns_remove: -ENOTEMPTY while it holds chunks or writers, -ENOENT.
 */
int tier_ns_create(struct tier *t, const char *name, uint32_t *id);
int tier_ns_find(struct tier *t, const char *name, uint32_t *id);
int tier_ns_remove(struct tier *t, uint32_t id);

/* Namespace attributes. chunk_bytes 0 = any size. shuffle 0, 2 or 4 (set
 * by fs from user.kvfs.dtype). */
struct tier_ns_info {
	uint32_t id;
	char name[KVFS_NS_NAME_MAX + 1];
	uint64_t chunk_bytes;
	uint32_t chunk_tokens; /* 0 = unset */
	int shuffle;
	uint64_t chunks; /* published, any tier */
	uint64_t bytes;  /* raw bytes of those chunks */
	uint64_t hits;
	bool keep;       /* evict=never (tier_ns_set_keep) */
	uint64_t quota;  /* its byte quota (keep only) */
};
int tier_ns_info(struct tier *t, uint32_t id, struct tier_ns_info *info);
int tier_ns_set_chunk_bytes(struct tier *t, uint32_t id, uint64_t bytes);
int tier_ns_set_shuffle(struct tier *t, uint32_t id, int shuffle);
/* tier_ns_set_chunk_tokens - tokens per chunk (user.kvfs.chunk_tokens),
 * reported as block_size in events; 0 = unset. -ENOENT. */
int tier_ns_set_chunk_tokens(struct tier *t, uint32_t id, uint32_t tokens);

/*
 * tier_ns_set_keep - evict=never for namespace id (keep true): its chunks
 * leave only by tier_unlink (or a failed check), never by eviction out of
 * the last tier; L1 -> L2 demotion still happens (without L2 they stay in
 * L1). Writes that would take the namespace's bytes (published, plus
 * those being written) past quota fail with -ENOSPC, as on a full disk;
 * unlinks give the room back. quota 0: the largest allowed. keep false:
 * back to eviction by policy (quota ignored).
 * The quotas of all evict=never namespaces together may not pass half of
 * the last tier (L2's capacity, or l1_size without L2), so that L2 can
 * always keep them while it reclaims and L1 always has room for others.
 * restore: a warm restart putting back what was set (no such limit: the
 * mode is kept even where the sizes changed).
 * Errors: -ENOENT, -EINVAL (quota above that half on its own), -ENOSPC
 * (the other evict=never namespaces' quotas leave less than quota).
 */
int tier_ns_set_keep(struct tier *t, uint32_t id, bool keep, uint64_t quota,
		     bool restore);

/* tier_ns_list - fills ids with up to max namespace ids; returns the total
 * number of namespaces (may exceed max). */
long tier_ns_list(struct tier *t, uint32_t *ids, size_t max);

/* --------------------------------------------------------------- writes */

/*
 * tier_wr_begin - starts writing a chunk.
 * key != NULL: the chunk will be published under key; the key is reserved
 *   now: a published chunk or another writer of the same key gives -EEXIST
 *   (a writer its owner closed, tier_wr_closed, is waited for first, up to
 *   TIER_WR_CLOSED_WAIT_MS: the kernel's release of it follows the close).
 * key == NULL: a temporary, published later by tier_wr_publish(key).
 * size_hint: the size about to be written, taken in L1 now (-ENOSPC when
 *   it cannot be, even after eviction); or 0 (unknown): nothing is taken
 *   here, the first write takes an extent of the expected size (the
 *   namespace's chunk_bytes or its last chunk's size, while such guesses
 *   of all writers stay within half of L1) and later ones grow it, so an
 *   idle writer costs no L1.
 * Errors: -ENOENT (namespace), -EEXIST, -ENOSPC (size_hint only), -EFBIG
 * (size_hint > max_chunk).
 */
int tier_wr_begin(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		  uint64_t size_hint, struct tier_wr **out);

/*
 * tier_wr_closed - the owner of keyed writer w closed it without a
 * publication (nothing written yet: fs/'s FLUSH of an empty chunk), and it
 * stays only for a dup of the fd that may still write, or until the
 * kernel's RELEASE, which FUSE sends asynchronously right after the
 * close. A new writer of its key (tier_wr_begin) waits up to
 * TIER_WR_CLOSED_WAIT_MS for it to go before saying -EEXIST, so that the
 * owner's next O_EXCL create of the name, or a PUT of it, does not fail
 * on that race.
 */
#define TIER_WR_CLOSED_WAIT_MS 500
void tier_wr_closed(struct tier *t, struct tier_wr *w);

struct tier_wait;
/* tier_wr_begin_wait - tier_wr_begin whose size_hint, when L1 is short of
 * room for it, waits as wait says (see struct tier_wait, below; NULL: not
 * at all): -ENOSPC once that passed, -EINTR, -EEXIST when another writer
 * took the key meanwhile. */
int tier_wr_begin_wait(struct tier *t, uint32_t ns,
		       const struct kvfs_key *key, uint64_t size_hint,
		       const struct tier_wait *wait, struct tier_wr **out);

/*
 * tier_wr_pwrite - copies len bytes at off into the chunk being written;
 * the chunk's size becomes max(size, off + len); holes read as zeros.
 * Concurrent calls on the same tier_wr are serialized.
 * Errors: -EFBIG (off + len > max_chunk), -ENOSPC (arena full of pinned
 * chunks and writers; the chunk's earlier bytes are unharmed).
 */
int tier_wr_pwrite(struct tier *t, struct tier_wr *w, const void *buf,
		   size_t len, uint64_t off);

/*
 * How long a write may wait for room in L1 (tier_wr_pwrite_wait): when
 * pinned chunks and other writers leave too little, the writer sleeps
 * (tier.lock released) until a publication, an unpin or a freed extent
 * makes room, or ms pass, or stop(arg) says the caller was interrupted
 * (asked every TIER_WAIT_POLL_MS; NULL: never).
 */
struct tier_wait {
	uint32_t ms;
	bool (*stop)(void *arg);
	void *arg;
};
#define TIER_WAIT_POLL_MS 50

/*
 * tier_wr_pwrite_wait - tier_wr_pwrite that waits as wait says (NULL:
 * not at all) for room in L1 rather than fail at once. -ENOSPC at once
 * when waiting cannot help: the chunk would not fit in L1 even with
 * nothing else in it (its extent is copied as it grows, so the old and
 * the new extent together); else -ENOSPC once wait->ms passed, -EINTR
 * when stop said so. Counted in tier_stats room_waits, room_timeouts.
 */
int tier_wr_pwrite_wait(struct tier *t, struct tier_wr *w, const void *buf,
			size_t len, uint64_t off,
			const struct tier_wait *wait);

/*
 * tier_wr_fail - w will never be published (a write of it failed): its
 * extent goes back to L1 now, for other writers, rather than at its
 * abort. Every later pwrite, pread, truncate or publication of w fails
 * with -EIO; tier_wr_abort still frees it.
 */
void tier_wr_fail(struct tier *t, struct tier_wr *w);

/* tier_wr_pread - reads back bytes of a chunk being written (for O_RDWR
 * writers). Returns bytes read (0 past the end). */
long tier_wr_pread(struct tier *t, struct tier_wr *w, void *buf, size_t len,
		   uint64_t off);

/* tier_wr_truncate - sets the size of a chunk being written. -EFBIG. */
int tier_wr_truncate(struct tier *t, struct tier_wr *w, uint64_t size);

uint64_t tier_wr_size(const struct tier_wr *w);

/* tier_wr_set_parent - records the chunk's parent key and depth (from the
 * user.kvfs.parent / user.kvfs.depth xattrs) for the prefix policy. parent
 * may be NULL to set only depth. */
int tier_wr_set_parent(struct tier *t, struct tier_wr *w,
		       const struct kvfs_key *parent, uint32_t depth);

/*
 * tier_wr_publish - makes the chunk visible, atomically, and consumes w
 * (on success and on failure: w is freed either way).
 * key: NULL to publish under the key given to tier_wr_begin; for a
 *   temporary, the key to publish under (rename of a temporary onto a key).
 * Checks the namespace's chunk_bytes (when not 0).
 * Errors (the chunk is discarded): -EEXIST (key published meanwhile, or
 * reserved by another writer), -EMSGSIZE (size != the namespace's
 * chunk_bytes: a short chunk is never published), -EINVAL (temporary
 * without key, or a key that differs from a keyed writer's), -ENOENT
 * (namespace removed).
 */
int tier_wr_publish(struct tier *t, struct tier_wr *w,
		    const struct kvfs_key *key);

/*
 * tier_wr_publish_or_keep - tier_wr_publish, except that a refusal,
 * -EEXIST or -EMSGSIZE, leaves w as it was (still the caller's, still
 * writable): rename(2) of a temporary leaves its source in place when it
 * fails. Other errors consume w as tier_wr_publish does.
 */
int tier_wr_publish_or_keep(struct tier *t, struct tier_wr *w,
			    const struct kvfs_key *key);

/*
 * tier_wr_publish_replace - tier_wr_publish, except that a chunk published
 * under key is replaced, atomically: in the same critical section it is
 * taken out of every tier (as tier_unlink does; readers that pinned it keep
 * its bytes) and w published, so no reader finds the key missing between
 * the two (path namespaces: a new version of a file, os.replace onto it).
 * Unlike tier_unlink it does not wait for an L2 write of the old chunk in
 * flight: after a crash that old copy may come back under the key (it was
 * the file's previous version). -EEXIST only when another writer reserved
 * the key; the other errors as tier_wr_publish (w consumed either way).
 */
int tier_wr_publish_replace(struct tier *t, struct tier_wr *w,
			    const struct kvfs_key *key);

/*
 * tier_wr_map (tier_xfer.c) - for batched PUTs: the host address of the
 * extent of a writer begun (tier_wr_begin) with size_hint >= len and not
 * written to yet, and sets its size to len. The caller fills exactly
 * [*ptr, *ptr + len) before tier_wr_publish / tier_wr_abort, and must not
 * call tier_wr_pwrite/truncate meanwhile. -ENOTSUP when the arena is
 * device memory (use tier_wr_pwrite), -EINVAL when the extent is smaller
 * than len or the writer was written to.
 */
int tier_wr_map(struct tier *t, struct tier_wr *w, uint64_t len, void **ptr);

/*
 * tier_stream_copy (tier_arena.c) - fills len bytes at dst, in an extent
 * tier_wr_map gave, from src: with streaming stores from TIER_STREAM_MIN
 * bytes where TIER_STREAM is 1 (x86-64; memcpy elsewhere and below),
 * which write the arena's lines without reading them first and leave
 * them out of the cache, all of them done (ordered) before the call
 * returns. A writer's bytes reach a host arena this way (tier_wr_pwrite,
 * a batched PUT); promotions from L2 and L3, read at once by the reader
 * waiting for them, keep plain stores.
 */
#define TIER_STREAM_MIN (64u << 10)
#if defined(__x86_64__)
#define TIER_STREAM 1
#else
#define TIER_STREAM 0
#endif
void tier_stream_copy(void *dst, const void *src, size_t len);

/* tier_wr_set_checksum (tier_xfer.c) - the XXH3-64 (seed 0) of the bytes
 * the writer will publish, computed by the caller while they were hot:
 * publication keeps it instead of computing it later (tier_checksum). */
void tier_wr_set_checksum(struct tier_wr *w, uint64_t sum);

/* tier_wr_abort - discards the chunk being written and frees w. */
void tier_wr_abort(struct tier *t, struct tier_wr *w);

/* ---------------------------------------------------------------- reads */

/* Info on a published chunk, without pinning it. */
struct tier_info {
	uint64_t size;         /* raw bytes */
	uint64_t stored_bytes; /* on L2 after compression, else size */
	uint64_t checksum;     /* XXH3-64 of the raw bytes, seed 0; valid
				* only with checksum_known (tier_checksum) */
	uint64_t atime_ns;     /* CLOCK_REALTIME of the last access */
	uint64_t ptime_ns;     /* CLOCK_REALTIME of the publication (whole
				* seconds; for chunks recovered from L2 at
				* start, the recovery): never changes */
	uint64_t hits;
	uint64_t gen;          /* publication number, unique per tier */
	uint32_t refs;         /* pins: opens, leases, handles, user pin */
	uint32_t depth;        /* 0 = unknown */
	enum tier_where where;
	bool has_parent;
	bool checksum_known;  /* else see tier_checksum */
	bool user_pin;         /* user.kvfs.pin = 1 */
	bool in_l2;            /* has an L2 record, or one being written */
	struct kvfs_key parent;
};

/* tier_stat - -ENOENT when the key is not published (writers are
 * invisible). Does not count as an access. */
int tier_stat(struct tier *t, uint32_t ns, const struct kvfs_key *key,
	      struct tier_info *info);

/*
 * tier_checksum - the XXH3-64 (seed 0) of a published chunk's raw bytes.
 * Publication does not compute it (it would cost the writer's close a
 * pass over the bytes): it is computed here on first request, or by the
 * L2 write of the chunk, and then kept. Does not count as an access.
 * gen: the publication asked about (tier_info.gen), or 0 for any.
 * Errors: -ENOENT (not published), -ESTALE (published again since gen),
 * -ENOMEM.
 */
int tier_checksum(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		  uint64_t gen, uint64_t *sum);

/*
 * tier_count_name_misses - adds n (may be negative; the count never goes
 * below zero) to the name-miss counter: a name looked up through the
 * filesystem and not found (+1: an open, stat or access of an absent key,
 * which the daemon cannot tell apart), and the lookup the kernel makes
 * before it creates or renames onto a new key, which is nobody's miss (-1
 * at the create). tier_get counts reads; fs counts the batched lookups.
 */
void tier_count_name_misses(struct tier *t, int64_t n);

/* Where a read or lookup found a chunk: the tiers, as the tier="" label. */
enum tier_from { TIER_FROM_L1, TIER_FROM_L2, TIER_FROM_L3, TIER_FROM_N };

/* tier_get_flags: TIER_GET_NOCOUNT = not an engine's read (a further
 * reference to a chunk already opened, a copy-up): no read hit or miss,
 * no namespace hit. TIER_GET_NOFILL = the reader's bytes come from
 * elsewhere (a passthrough shadow of the publication, fs/fs_pt.c): a
 * chunk not in L1 is neither read from L2 nor promoted, and handed out
 * without bytes (tier_chunk_has_bytes false) and without a pin (it may
 * leave L2 meanwhile; its size and gen stay); the access is told as any
 * read's. */
#define TIER_GET_NOCOUNT 1u
#define TIER_GET_NOFILL 2u

/*
 * tier_get - pins a published chunk for reading and counts a read hit (by
 * the tier it came from), or a read miss on -ENOENT. If it lives only in
 * L2 it is read, verified and
 * promoted into L1 first (evicting by policy); if L1 is full of pinned
 * chunks it is served from a temporary buffer instead. Never blocks on the
 * disk longer than a bounded wait.
 * Errors: -ENOENT (not published, or an L2 record failed verification: a
 * miss, so the engine recomputes), -ENOMEM.
 * tier_get_flags - the same with flags (TIER_GET_NOCOUNT).
 */
int tier_get_flags(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		   unsigned flags, struct tier_chunk **out);
int tier_get(struct tier *t, uint32_t ns, const struct kvfs_key *key,
	     struct tier_chunk **out);
/* tier_get_by - tier_get for a known reader (an id of whoever reads, e.g.
 * the thread FUSE names; 0 = not known), so chain readahead follows each
 * reader's order on its own. */
int tier_get_by(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		uint64_t reader, struct tier_chunk **out);
int tier_get_flags_by(struct tier *t, uint32_t ns,
		      const struct kvfs_key *key, unsigned flags,
		      uint64_t reader, struct tier_chunk **out);

/* tier_chunk_ptr - host address of a pinned chunk's bytes, or NULL when the
 * arena is device memory (then use tier_chunk_read). Valid until tier_put. */
const void *tier_chunk_ptr(const struct tier_chunk *c);
uint64_t tier_chunk_size(const struct tier_chunk *c);
uint64_t tier_chunk_gen(const struct tier_chunk *c);

/* tier_chunk_has_bytes - false for a chunk TIER_GET_NOFILL found in L2:
 * tier_chunk_ptr is NULL, tier_chunk_read fails (-EIO), tier_chunk_dup
 * (-EINVAL); tier_put frees it. */
bool tier_chunk_has_bytes(const struct tier_chunk *c);

/* tier_chunk_read - copies bytes of a pinned chunk; returns bytes copied,
 * 0 at or past the end. */
long tier_chunk_read(struct tier *t, const struct tier_chunk *c, void *buf,
		     size_t len, uint64_t off);

/* tier_put - unpins what tier_get pinned. */
void tier_put(struct tier *t, struct tier_chunk *c);

/*
 * tier_pin_l1 - pins publication gen of (ns, key) as tier_get does, but
 * only where it is that publication and in L1 now: no promotion, no
 * disk, no read counted, no access (a pin kept for an inode's racing
 * opens, fs/paths/). -ENOENT otherwise, -ENOMEM.
 * tier_chunk_dup - a further pin of what c pins (its own tier_put).
 */
int tier_pin_l1(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		uint64_t gen, struct tier_chunk **out);
int tier_chunk_dup(struct tier *t, const struct tier_chunk *c,
		   struct tier_chunk **out);

/* tier_count_served - bytes of a published chunk a reader got (a read's
 * reply, a GET's copy; a zero-copy handle counts its chunk once): stats
 * bytes_out. tier_get itself counts no bytes (an open reads nothing yet).
 * Any thread, no lock needed. */
void tier_count_served(struct tier *t, uint64_t bytes);

/* tier_unlink - removes a published chunk from every tier. Pinned readers
 * keep their bytes until they tier_put. -ENOENT. */
int tier_unlink(struct tier *t, uint32_t ns, const struct kvfs_key *key);

/*
 * tier_sync - makes the published chunk (ns, key) survive a crash of the
 * daemon or of the machine (fsync): its L2 record is written now on the
 * calling thread if it has none (whatever the ingest mode; one being
 * written is waited for), and fdatasync'ed with what recovery needs to
 * find it (l2_sync). Blocks on the disk; takes and drops tier.lock.
 * Returns 0 also when the chunk is gone (unlinked, evicted) and without
 * L2 (memory only: nothing survives a crash, as on tmpfs). Errors: -EIO
 * (an L2 write or fdatasync failed, no answer within 30 s, or L2 is
 * configured but disabled), -ENOSPC (L2 found no room), -ENOMEM.
 */
int tier_sync(struct tier *t, uint32_t ns, const struct kvfs_key *key);

/* tier_set_user_pin - user.kvfs.pin: on = true keeps the chunk in L1
 * (promoting it first if needed). -ENOENT. */
int tier_set_user_pin(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		      bool on);

/* tier_set_parent - records parent/depth of a published chunk (from
 * lookups); only fills what is unknown. -ENOENT. */
int tier_set_parent(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		    const struct kvfs_key *parent, uint32_t depth);

/* -------------------------------------------------------- batched lookup */

/*
 * tier_lookup - the leading run of keys present in ns, touching each found
 * chunk (an access for the policy), recording depth_base + i as the depth
 * and keys[i-1] as the parent of keys[i].
 * With pin: each chunk of the run is pinned (refs + 1); release each with
 * tier_unpin_key. With prefetch: the L2 part of the run is promoted into L1
 * in the background.
 * With L3, the keys past the local run are asked of L3 (one pipelined
 * round trip per node, bounded by l3_timeout_ms): *found includes the run
 * L3 holds, so found - in_l1 - in_l2 is the part found in L3. With pin
 * that part is promoted first (then pinned like the rest; what could not
 * be promoted ends the run); with prefetch it is promoted in the
 * background.
 * Out: *found, *in_l1, *in_l2. Returns 0 or -ENOENT (namespace).
 */
int tier_lookup(struct tier *t, uint32_t ns, const struct kvfs_key *keys,
		uint32_t nkeys, uint32_t depth_base, bool pin, bool prefetch,
		uint32_t *found, uint32_t *in_l1, uint32_t *in_l2);

/* tier_pin_key / tier_unpin_key - refs + 1 / - 1 on a published chunk
 * (leases and handles). tier_pin_key: -ENOENT. */
int tier_pin_key(struct tier *t, uint32_t ns, const struct kvfs_key *key);
void tier_unpin_key(struct tier *t, uint32_t ns, const struct kvfs_key *key);

/*
 * tier_lookup_pinned - tier_lookup with pin that also writes the
 * publication number (gen) of each pinned chunk to gens[0..*found-1]
 * (gens holds nkeys entries). Give each pin back with tier_unpin_gen.
 * Returns 0, -EINVAL (gens NULL) or -ENOENT (namespace).
 */
int tier_lookup_pinned(struct tier *t, uint32_t ns,
		       const struct kvfs_key *keys, uint32_t nkeys,
		       uint32_t depth_base, bool prefetch, uint64_t *gens,
		       uint32_t *found, uint32_t *in_l1, uint32_t *in_l2);

/*
 * tier_key_hashes / tier_lookup_kh - a chain looked up in several
 * namespaces (a group lookup's ranks) hashed once: tier_key_hashes writes
 * the namespace-free part of each key's index hash to kh[0..n), and
 * tier_lookup_kh is tier_lookup (gens NULL: no pins) or tier_lookup_pinned
 * (gens non-NULL) of keys with their kh[]. The hashes change with every
 * process: never store them.
 */
void tier_key_hashes(const struct kvfs_key *keys, uint32_t n, uint64_t *kh);
int tier_lookup_kh(struct tier *t, uint32_t ns, const struct kvfs_key *keys,
		   const uint64_t *kh, uint32_t nkeys, uint32_t depth_base,
		   bool prefetch, uint64_t *gens, uint32_t *found,
		   uint32_t *in_l1, uint32_t *in_l2);

/*
 * tier_unpin_gen - gives back one key pin taken on generation gen of key:
 * the indexed chunk if it is that generation, else the unlinked chunk of
 * that generation still held by pins. Unlike tier_unpin_key it never
 * releases a pin of a re-published copy of the key. gen 0: tier_unpin_key.
 */
void tier_unpin_gen(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		    uint64_t gen);

/* ------------------------------------------------------------- listing */

struct tier_dirent {
	struct kvfs_key key;
	uint64_t size;
	uint64_t gen;
};

/* tier_ns_snapshot - a malloc'd array of the published chunks of ns (caller
 * frees). -ENOENT, -ENOMEM. */
int tier_ns_snapshot(struct tier *t, uint32_t ns, struct tier_dirent **out,
		     size_t *n);

/* ------------------------------------------------------------------- L3 */

/*
 * tier_l3_pattr_changed - the attributes of path file (ns, key) changed
 * (chmod, chown, utimensat; pattr_get gives the new ones): a copy this
 * node wrote to L3, or read from there, is written again while L1 holds
 * the chunk (or when a write in flight ends), else deleted from L3 (only
 * L2 holds it here: L3 must not keep the old mode). Any lock but
 * tier.lock may be held.
 */
void tier_l3_pattr_changed(struct tier *t, uint32_t ns,
			   const struct kvfs_key *key);

/* tier_l3_on - does the engine have an L3? */
bool tier_l3_on(const struct tier *t);
/*
 * tier_l3_mark - stores an empty record under (ns, key) in L3, queued as
 * every L3 write (never waits for the network; a full queue drops it),
 * with attributes a (a directory's mode, owner, mtime; NULL: none): path
 * namespaces mark the directories their files imply there
 * (fs/paths/fs_pl3.c). tier_l3_has - is (ns, key) in L3 (one GET of its
 * record, bounded by l3_timeout_ms; false when L3 is off or
 * unreachable)? true and *a set, *has_a true, when the record there is
 * one that passes every check and carries attributes; *has_a false for
 * any other value (an older daemon's marker): present, attributes not
 * known. mark: 0, -EOPNOTSUPP (no L3), -ENOENT (no namespace ns),
 * -EAGAIN (queue full), -ENOMEM.
 */
int tier_l3_mark(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		 const struct tier_pattr *a);
bool tier_l3_has(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		 struct tier_pattr *a, bool *has_a);
/*
 * tier_l3_refuse - (ns, key) is absent from L3 for this node until it
 * unmounts: no promotion, lookup or prefetch takes it from there (a
 * tombstone never released; nothing is deleted in L3). For path files a
 * crash lost (fs/paths/fs_pjournal.c): their key is the path's, shared by
 * every version, so L3 may hold an older one. 0, or -ENOMEM (then not
 * refused).
 */
int tier_l3_refuse(struct tier *t, uint32_t ns, const struct kvfs_key *key);
/*
 * tier_stat_fetch - tier_stat, and when the chunk is not local and L3 is
 * on, a promotion from L3 first (GET, every check, decode into L1; bounded
 * by l3_timeout_ms): what a name lookup of an open uses. -ENOENT (a miss,
 * also for a bad value in L3, counted and deleted there), -ENOMEM.
 */
int tier_stat_fetch(struct tier *t, uint32_t ns, const struct kvfs_key *key,
		    struct tier_info *info);

/*
 * tier_l3_drop - deletes every chunk of the namespace named ns (it need
 * not exist here) from L3, for every node. Returns the number deleted, or
 * -EOPNOTSUPP (no L3), -EINVAL (bad name), or the store's error (some may
 * be deleted).
 */
long tier_l3_drop(struct tier *t, const char *ns);

/* ---------------------------------------------------------------- stats */

struct tier_stats {
	/* L1 */
	uint64_t l1_capacity, l1_bytes, l1_chunks;
	/* L2 (zero without l2_dir) */
	uint64_t l2_capacity, l2_bytes, l2_raw_bytes, l2_chunks;
	uint64_t l2_reads, l2_writes, l2_reclaims, l2_corrupt, l2_errors;
	/* reclaims that moved every live record (compactions), bytes
	 * written to L2 (moves included) and bytes of moves */
	uint64_t l2_compactions, l2_write_bytes, l2_moved_bytes;
	/* how the last mount recovered L2: from the checkpoint (1) or by a
	 * scan of every segment (0); its time; records each way */
	uint64_t l2_recover_ckpt, l2_recover_ns;
	uint64_t l2_recover_ckpt_records, l2_recover_scan_records;
	uint64_t l2_recover_scan_bytes;
	/* checkpoints written since the mount, failed, the last one's
	 * entries and write time */
	uint64_t l2_checkpoints, l2_ckpt_errors, l2_ckpt_records;
	uint64_t l2_ckpt_write_ns;
	/* fsync: fdatasyncs of L2 segments, L2 writes an fsync made */
	uint64_t l2_syncs, l2_sync_writes;
	/* events; reads (tier_get) by where the chunk came from, read
	 * misses, name lookups of absent keys (see kvfs(7)) */
	uint64_t read_hits[TIER_FROM_N], read_misses, name_misses;
	uint64_t evictions, publishes, discards;
	/* bytes_in: chunk bytes published by writers (files and PUTs; not
	 * promotions from L3); bytes_out: chunk bytes served to readers
	 * (tier_count_served: what reads and GETs returned, a handle's
	 * chunk once) */
	uint64_t bytes_in, bytes_out;
	uint64_t promotions, demotions;
	/* writers in flight and their arena bytes */
	uint64_t writers, writer_bytes;
	/* writes that waited for room in L1 (tier_wr_pwrite_wait), and those
	 * of them that got -ENOSPC once their bound passed */
	uint64_t room_waits, room_timeouts;
	/* L1 bytes of chunks pinned now (opens, leases, handles, user
	 * pins): not evictable (statfs counts them, with writer_bytes, as
	 * used) */
	uint64_t l1_pinned_bytes;
	/* engine metadata: bytes of index + chunk records + policy state */
	uint64_t meta_bytes;
	/* L3 (all zero without l3): the store's counters, and the engine's
	 * promotions from L3, writes skipped (no memory to copy the chunk),
	 * and the L1 bytes pinned for queued L3 writes now */
	bool l3_on;
	struct l3_stats l3;
	uint64_t l3_promotions, l3_skipped, l3_pinned_bytes;
	uint64_t l3_tombstones; /* keys unlinked here whose L3 deletion is
				 * not confirmed yet */
	/* chain readahead: its maximum window (readahead=N, 0 = off), chunks
	 * it promoted, of those read later (hits) and evicted unread
	 * (wasted), promotions held back because L1 and L2 were full
	 * (paused) */
	uint64_t ra_max, ra_promotions, ra_hits, ra_wasted, ra_paused;
};
void tier_get_stats(struct tier *t, struct tier_stats *st);

/* Description of the L1 arena (for handles and mmap). */
struct tier_arena_info {
	int kind;        /* KVFS_HANDLE_HOST_MMAP or KVFS_HANDLE_CUDA_IPC */
	int device;
	uint64_t size;
	const char *backend; /* "host" | "pinned" | "cuda" */
};
void tier_arena_info(struct tier *t, struct tier_arena_info *info);

/* tier_chunk_offset - the chunk's offset in the L1 arena, or -ENODATA when
 * it is served from a temporary buffer or has no bytes (TIER_GET_NOFILL). */
long long tier_chunk_offset(const struct tier_chunk *c);

/* tier_arena_export - an IPC handle (64 bytes, e.g. cudaIpcMemHandle_t) for
 * the device memory holding the pinned chunk c, and the chunk's offset in
 * it. The gpu backend decides what the handle covers (see gpu/gpu.h: the
 * cuda backend copies the chunk into a buffer of its own, so the handle
 * reaches this chunk only). *cookie must be passed to tier_arena_unexport
 * when the handle is released (before or after tier_put). May block for a
 * device copy: call without fs locks. The pinned backend DMAs the chunk
 * from its page-locked arena into such a buffer. -ENOTSUP for host arenas
 * (mmap the chunk fd instead), -ENODATA when c is not in the arena,
 * -ENOSPC (export budget), -ENOMEM, -EIO. uid and gid are the caller's:
 * a released buffer is reused, IPC handle and all, only for the same uid,
 * gid and namespace (an engine keeps its mapping open: gpu/gpu.h). */
int tier_arena_export(struct tier *t, const struct tier_chunk *c,
		      uint32_t uid, uint32_t gid, uint8_t ipc[64],
		      uint64_t *offset, void **cookie);
/* tier_arena_unexport - frees what tier_arena_export made; NULL is a no-op. */
void tier_arena_unexport(struct tier *t, void *cookie);

/*
 * Device imports (tier_xfer.c) - batched GETs straight into an engine's
 * CUDA buffer (gpu.h, gpu_import_*). tier_import_open: -ENOTSUP on a host
 * arena, -EIO, -ENOMEM. tier_import_copy: bytes [off, off + len) of the
 * pinned chunk c to the import at dst_off (-EFAULT outside the import,
 * -EIO); blocks for the copy. tier_import_close: no copy may be running.
 */
struct gpu_import;
int tier_import_open(struct tier *t, const uint8_t ipc[64], uint64_t len,
		     struct gpu_import **out);
int tier_import_copy(struct tier *t, struct gpu_import *im,
		     const struct tier_chunk *c, uint64_t off, uint64_t len,
		     uint64_t dst_off);
void tier_import_close(struct tier *t, struct gpu_import *im);

#endif /* KVFS_TIER_H */
