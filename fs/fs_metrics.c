/*
 * fs_metrics.c - every counter of the mount, once: one table of
 * descriptors from which both /.kvfs/stats (JSON) and /.kvfs/metrics
 * (Prometheus text, exposition format 0.0.4) are rendered, so a figure
 * cannot be in one and not the other. kvfs(7) documents each row.
 *
 * Adding a counter is one line in metrics[] below, e.g.
 *
 *   C("l2", "checkpoints", "l2_checkpoints_total", NULL,
 *     "L2 index checkpoints written", t.l2_checkpoints),
 *
 * where the last argument is a uint64_t field of struct snap (most are
 * inside struct tier_stats `t`, struct fs_counters `fs`, struct
 * fs_ioctl_counts `ioc`...: add the field there and fill it where that
 * struct is filled). C = counter (the Prometheus name ends in _total),
 * G = gauge; rows that share a Prometheus name form one family told apart
 * by their labels (tier="l1|l2|l3", op=..., ...): keep such rows' HELP
 * the same. Then describe it in man/kvfs.7 (COUNTERS).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/fs_i.h"
#include "fs/fs_pt.h"
#include "fs/fs_metrics.h"
#include "fs/fs_wait.h"
#include "tier/tier_wait.h"

/* ------------------------------------------------------------- buffer */

void fs_sb_printf(struct fs_sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL,
			      b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if (b->p && (size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = (b->cap + (size_t)n + 1) * 2;
		char *p = realloc(b->p, cap);

		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

/* A JSON string: namespace names may hold quotes, backslashes, controls. */
static void sb_json_str(struct fs_sbuf *b, const char *s)
{
	fs_sb_printf(b, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fs_sb_printf(b, "\\%c", c);
		else if (c < 0x20)
			fs_sb_printf(b, "\\u%04x", c);
		else
			fs_sb_printf(b, "%c", c);
	}
	fs_sb_printf(b, "\"");
}

/* Prometheus label values escape backslash, quote and newline. */
static void sb_prom_str(struct fs_sbuf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fs_sb_printf(b, "\\%c", *s);
		else if (*s == '\n')
			fs_sb_printf(b, "\\n");
		else
			fs_sb_printf(b, "%c", *s);
	}
}

/* ----------------------------------------------------------- snapshot */

/* Everything the table points into, gathered once per rendering. */
struct snap {
	struct tier_stats t;
	struct tier_arena_info ai;
	struct fs_counters fs;
	struct fs_path_counts paths;
	struct fs_ioctl_counts ioc;
	struct tier_wait_stats wait;   /* waiting lookups and GETs */
	struct fs_wait_counts fwait;
	struct ev_stats ev;
	struct fs_uring_counts uring;  /* the daemon's transport */
	struct fs_pt_counts pt;        /* cache=passthrough's shadows */
	const char *version, *ev_ep, *ev_replay;
	uint64_t l3_on, ev_on;
	/* derived (sums and unit changes of the rows above) */
	uint64_t hits, misses, l3_get_avg_us, l3_get_max_us;
	double l2_ratio, l3_get_s, l3_get_max_s, lease_s;
	const char *l2_from;
	double l2_recover_s, l2_ckpt_write_s;
};

static void snap_take(struct fs *fs, struct snap *s)
{
	const struct l3_stats *l = &s->t.l3;

	memset(s, 0, sizeof(*s));
	tier_get_stats(fs->tier, &s->t);
	tier_arena_info(fs->tier, &s->ai);
	fs_counters(fs, &s->fs);
	fs_path_counts(fs, &s->paths);
	fs_ioctl_counts(fs, &s->ioc);
	tier_wait_stats(fs->tier, &s->wait);
	fs_wait_counts(fs->wait, &s->fwait);
	s->ev_on = fs_events_counts(fs, &s->ev, &s->ev_ep, &s->ev_replay);
	if (fs->cfg.uring_counts)
		fs->cfg.uring_counts(&s->uring);
	fs_pt_counts(fs, &s->pt);
	s->version = KVFS_VERSION_STRING;
	s->l3_on = s->t.l3_on;
	for (int i = 0; i < TIER_FROM_N; i++)
		s->hits += s->ioc.lookup_hits[i] + s->t.read_hits[i];
	s->misses = s->ioc.lookup_misses + s->t.read_misses +
		    s->t.name_misses;
	s->l2_ratio = s->t.l2_bytes ?
		(double)s->t.l2_raw_bytes / (double)s->t.l2_bytes : 1.0;
	s->l3_get_avg_us = l->gets ? l->get_ns / l->gets / 1000 : 0;
	s->l3_get_max_us = l->get_max_ns / 1000;
	s->l3_get_s = (double)l->get_ns / 1e9;
	s->l3_get_max_s = (double)l->get_max_ns / 1e9;
	s->lease_s = (double)s->ioc.leases.lease_ms / 1000.0;
	s->l2_from = s->t.l2_recover_ckpt ? "checkpoint" : "scan";
	s->l2_recover_s = (double)s->t.l2_recover_ns / 1e9;
	s->l2_ckpt_write_s = (double)s->t.l2_ckpt_write_ns / 1e9;
}

/* -------------------------------------------------------------- table */

enum { M_COUNTER = 1, M_GAUGE };      /* Prometheus TYPE */
enum { V_U64 = 0, V_F64, V_STR, V_BOOL }; /* the field's C type */
enum { W_ALWAYS = 0, W_L3, W_EV };    /* shown only when L3 / events are on */

struct fs_metric {
	const char *obj;    /* JSON object path in stats: "" top, "ioctl.xfer" */
	const char *key;    /* JSON key; NULL: metrics only (a derived unit) */
	const char *name;   /* Prometheus name after "kvfs_"; NULL: JSON only */
	const char *labels; /* e.g. "tier=\"l2\"", or NULL */
	unsigned char type, val, when;
	const char *help;   /* the family's HELP (its first row's) */
	size_t off;         /* of the field in struct snap */
};

#define ROW(o, k, n, l, ty, v, w, h, f) \
	{ o, k, n, l, ty, v, w, h, offsetof(struct snap, f) }
#define C(o, k, n, l, h, f) ROW(o, k, n, l, M_COUNTER, V_U64, W_ALWAYS, h, f)
#define G(o, k, n, l, h, f) ROW(o, k, n, l, M_GAUGE, V_U64, W_ALWAYS, h, f)
#define C3(o, k, n, l, h, f) ROW(o, k, n, l, M_COUNTER, V_U64, W_L3, h, f)
#define G3(o, k, n, l, h, f) ROW(o, k, n, l, M_GAUGE, V_U64, W_L3, h, f)
#define CE(o, k, n, l, h, f) ROW(o, k, n, l, M_COUNTER, V_U64, W_EV, h, f)
#define GE(o, k, n, l, h, f) ROW(o, k, n, l, M_GAUGE, V_U64, W_EV, h, f)
#define JSON_STR(o, k, w, f) ROW(o, k, NULL, NULL, 0, V_STR, w, NULL, f)
#define T(x) "tier=\"" x "\""

/* Shared HELP texts of the families with several rows. */
#define H_CAP "Bytes the tier may hold"
#define H_STORED "Bytes the tier holds (L2: on disk, after compression)"
#define H_CHUNKS "Chunks the tier holds"
#define H_READS "Records read from the tier (L2 reads, L3 GETs)"
#define H_REQ "FUSE requests the daemon received, by kind"
#define RQ(k, f) C("requests", k, "fs_requests_total", "op=\"" k "\"", \
		   H_REQ, fs.req[f])
#define H_WRITES "Records written to the tier (L2 appends, L3 SETs)"
#define H_ERRORS "Failed operations of the tier"
#define H_CORRUPT "Records of the tier that failed a check (served as misses)"
#define H_RECOV "Chunks the mount recovered into L2, by way"
#define H_PROMO "Chunks promoted from the tier into L1"
#define H_HITS "Keys found, by operation and tier (kvfs(7) HITS AND MISSES)"
#define H_MISSES "Keys not found, by operation (kvfs(7) HITS AND MISSES)"
#define H_LREL "Leases released, by reason"
#define H_XB "Batched transfer ioctls, by direction"
#define H_XE "Entries of batched transfers, by direction"
#define H_XBY "Bytes moved by batched transfers, by direction"
#define H_DISC "Files being written dropped unpublished, by reason"
#define DISC(k, r) C("fs.discards", k, "fs_discards_total", \
		     "reason=\"" k "\"", H_DISC, fs.discards[r])

/* The order is the stats JSON's: rows of one object stay together. */
static const struct fs_metric metrics[] = {
	JSON_STR("", "version", W_ALWAYS, version),
	/* L1 */
	JSON_STR("l1", "backend", W_ALWAYS, ai.backend),
	G("l1", "capacity", "capacity_bytes", T("l1"), H_CAP, t.l1_capacity),
	G("l1", "bytes", "stored_bytes", T("l1"), H_STORED, t.l1_bytes),
	G("l1", "chunks", "chunks", T("l1"), H_CHUNKS, t.l1_chunks),
	G("l1", "pinned_bytes", "l1_pinned_bytes", NULL,
	  "L1 bytes of chunks pinned now (opens, leases, handles, user pins): "
	  "never evicted", t.l1_pinned_bytes),
	/* L2 */
	G("l2", "capacity", "capacity_bytes", T("l2"), H_CAP, t.l2_capacity),
	G("l2", "bytes", "stored_bytes", T("l2"), H_STORED, t.l2_bytes),
	G("l2", "raw_bytes", "l2_raw_bytes", NULL,
	  "Bytes of the L2 chunks before compression", t.l2_raw_bytes),
	G("l2", "chunks", "chunks", T("l2"), H_CHUNKS, t.l2_chunks),
	C("l2", "reads", "tier_reads_total", T("l2"), H_READS, t.l2_reads),
	C("l2", "writes", "tier_writes_total", T("l2"), H_WRITES, t.l2_writes),
	C("l2", "reclaims", "l2_reclaims_total", NULL,
	  "L2 segments reclaimed", t.l2_reclaims),
	C("l2", "compactions", "l2_compactions_total", NULL,
	  "L2 reclaims that moved every live record (none dropped)",
	  t.l2_compactions),
	C("l2", "write_bytes", "l2_written_bytes_total", NULL,
	  "Bytes written to L2, reclaim moves included", t.l2_write_bytes),
	C("l2", "moved_bytes", "l2_moved_bytes_total", NULL,
	  "Bytes L2 reclaims moved (write amplification: written / "
	  "(written - moved))", t.l2_moved_bytes),
	C("l2", "syncs", "l2_syncs_total", NULL,
	  "fdatasyncs of L2 segments (fsyncs of chunks, reclaim moves)",
	  t.l2_syncs),
	C("l2", "sync_writes", "l2_sync_writes_total", NULL,
	  "L2 writes an fsync made (no L2 copy yet, or still queued)",
	  t.l2_sync_writes),
	C("l2", "corrupt", "tier_corrupt_total", T("l2"), H_CORRUPT,
	  t.l2_corrupt),
	C("l2", "errors", "tier_errors_total", T("l2"), H_ERRORS, t.l2_errors),
	ROW("l2", "compression_ratio", "l2_compression_ratio", NULL, M_GAUGE,
	    V_F64, W_ALWAYS, "L2 raw bytes per byte on disk (1 when empty)",
	    l2_ratio),
	/* how the mount recovered L2 (kvfs(7) L2 RECOVERY) */
	JSON_STR("l2_recovery", "from", W_ALWAYS, l2_from),
	ROW("l2_recovery", NULL, "l2_recovered_from_checkpoint", NULL, M_GAUGE,
	    V_U64, W_ALWAYS, "1 when the mount recovered L2 from its checkpoint",
	    t.l2_recover_ckpt),
	ROW("l2_recovery", "seconds", "l2_recovery_seconds", NULL, M_GAUGE,
	    V_F64, W_ALWAYS, "Time the mount's L2 recovery took", l2_recover_s),
	G("l2_recovery", "ckpt_records", "l2_recovered_records",
	  "from=\"checkpoint\"", H_RECOV, t.l2_recover_ckpt_records),
	G("l2_recovery", "scan_records", "l2_recovered_records",
	  "from=\"scan\"", H_RECOV, t.l2_recover_scan_records),
	G("l2_recovery", "scan_bytes", "l2_recovery_scanned_bytes", NULL,
	  "Segment bytes read by the L2 recovery scan",
	  t.l2_recover_scan_bytes),
	C("l2_recovery", "checkpoints", "l2_checkpoints_total", NULL,
	  "L2 index checkpoints written", t.l2_checkpoints),
	C("l2_recovery", "checkpoint_errors", "l2_checkpoint_errors_total",
	  NULL, "L2 index checkpoints that failed", t.l2_ckpt_errors),
	G("l2_recovery", "checkpoint_entries", "l2_checkpoint_entries", NULL,
	  "Records in the last L2 checkpoint", t.l2_ckpt_records),
	ROW("l2_recovery", "checkpoint_seconds", "l2_checkpoint_seconds", NULL,
	    M_GAUGE, V_F64, W_ALWAYS, "Time the last L2 checkpoint took",
	    l2_ckpt_write_s),
	/* L3 (its rows but "enabled" only when it is on) */
	G("l3", "enabled", "l3_enabled", NULL, "1 when L3 is configured",
	  l3_on),
	G3("l3", "nodes", "l3_nodes", NULL, "L3 Redis nodes known",
	   t.l3.redis.nodes),
	G3("l3", "nodes_down", "l3_nodes_down", NULL,
	   "L3 nodes backing off after a failure", t.l3.redis.nodes_down),
	G3("l3", "cluster", "l3_cluster", NULL, "1 when L3 is a Redis Cluster",
	   t.l3.redis.cluster),
	C3("l3", "gets", "tier_reads_total", T("l3"), H_READS, t.l3.gets),
	C3("l3", "hits", "l3_get_hits_total", NULL,
	   "L3 GETs that found a good value", t.l3.hits),
	C3("l3", "misses", "l3_get_misses_total", NULL,
	   "L3 GETs that found none, failed or were corrupt", t.l3.misses),
	C3("l3", "corrupt", "tier_corrupt_total", T("l3"), H_CORRUPT,
	   t.l3.corrupt),
	C3("l3", "errors", "tier_errors_total", T("l3"), H_ERRORS,
	   t.l3.errors),
	C3("l3", "timeouts", "l3_timeouts_total", NULL,
	   "L3 pipelines past their bound", t.l3.timeouts),
	C3("l3", "bytes_in", "tier_read_bytes_total", T("l3"),
	   "Value bytes read from the tier", t.l3.bytes_in),
	C3("l3", "bytes_out", "tier_written_bytes_total", T("l3"),
	   "Value bytes written to the tier", t.l3.bytes_out),
	C3("l3", "puts", "tier_writes_total", T("l3"), H_WRITES, t.l3.puts),
	C3("l3", "dels", "l3_deletes_total", NULL, "Chunks deleted from L3",
	   t.l3.dels),
	C3("l3", "queue_drops", "l3_queue_drops_total", NULL,
	   "L3 writes dropped (queue full, failed)", t.l3.queue_drops),
	C3("l3", "retries", "l3_retries_total", NULL,
	   "L3 writes and deletions sent again after a failed try",
	   t.l3.retries),
	C3("l3", "del_drops", "l3_delete_drops_total", NULL,
	   "L3 deletions given up (at unmount, server not answering)",
	   t.l3.del_drops),
	G3("l3", "tombstones", "l3_tombstones", NULL,
	   "Keys unlinked here whose L3 deletion is not confirmed yet",
	   t.l3_tombstones),
	G3("l3", "queued_bytes", "l3_queued_bytes", NULL,
	   "Bytes of the L3 write queue", t.l3.queued_bytes),
	C3("l3", "lookups", "l3_lookups_total", NULL,
	   "Batched L3 existence lookups", t.l3.lookups),
	C3("l3", "lookup_keys", "l3_lookup_keys_total", NULL,
	   "Keys asked by L3 existence lookups", t.l3.lookup_keys),
	C3("l3", "promotions", "promotions_total", T("l3"), H_PROMO,
	   t.l3_promotions),
	C3("l3", "skipped", "l3_skipped_total", NULL,
	   "L3 writes skipped (no memory for a copy)", t.l3_skipped),
	G3("l3", "pinned_bytes", "l3_pinned_bytes", NULL,
	   "L1 bytes pinned for queued L3 writes", t.l3_pinned_bytes),
	ROW("l3", "get_avg_us", NULL, NULL, 0, V_U64, W_L3, NULL,
	    l3_get_avg_us),
	ROW("l3", "get_max_us", NULL, NULL, 0, V_U64, W_L3, NULL,
	    l3_get_max_us),
	ROW("l3", NULL, "l3_get_seconds_total", NULL, M_COUNTER, V_F64, W_L3,
	    "Time spent in L3 GETs (rate / rate of tier_reads_total: the mean)",
	    l3_get_s),
	ROW("l3", NULL, "l3_get_max_seconds", NULL, M_GAUGE, V_F64, W_L3,
	    "The slowest L3 GET", l3_get_max_s),
	C3("l3", "roundtrips", "l3_roundtrips_total", NULL,
	   "L3 pipelines sent", t.l3.redis.roundtrips),
	C3("l3", "moved", "l3_moved_total", NULL,
	   "MOVED redirections followed", t.l3.redis.moved),
	C3("l3", "ask", "l3_ask_total", NULL, "ASK redirections followed",
	   t.l3.redis.ask),
	C3("l3", "refreshes", "l3_slot_refreshes_total", NULL,
	   "L3 cluster slot maps loaded", t.l3.redis.refreshes),
	C3("l3", "connects", "l3_connects_total", NULL,
	   "L3 connections made", t.l3.redis.connects),
	C3("l3", "failures", "l3_connect_failures_total", NULL,
	   "L3 connections lost or refused", t.l3.redis.failures),
	/* hits and misses: the sums first (JSON), then by operation */
	ROW("", "hits", NULL, NULL, 0, V_U64, W_ALWAYS, NULL, hits),
	ROW("", "misses", NULL, NULL, 0, V_U64, W_ALWAYS, NULL, misses),
	C("lookup", "hits_l1", "hits_total", "op=\"lookup\"," T("l1"), H_HITS,
	  ioc.lookup_hits[TIER_FROM_L1]),
	C("lookup", "hits_l2", "hits_total", "op=\"lookup\"," T("l2"), H_HITS,
	  ioc.lookup_hits[TIER_FROM_L2]),
	C("lookup", "hits_l3", "hits_total", "op=\"lookup\"," T("l3"), H_HITS,
	  ioc.lookup_hits[TIER_FROM_L3]),
	C("lookup", "misses", "misses_total", "op=\"lookup\"", H_MISSES,
	  ioc.lookup_misses),
	C("read", "hits_l1", "hits_total", "op=\"read\"," T("l1"), H_HITS,
	  t.read_hits[TIER_FROM_L1]),
	C("read", "hits_l2", "hits_total", "op=\"read\"," T("l2"), H_HITS,
	  t.read_hits[TIER_FROM_L2]),
	C("read", "hits_l3", "hits_total", "op=\"read\"," T("l3"), H_HITS,
	  t.read_hits[TIER_FROM_L3]),
	C("read", "misses", "misses_total", "op=\"read\"", H_MISSES,
	  t.read_misses),
	C("", "name_misses", "misses_total", "op=\"name\"", H_MISSES,
	  t.name_misses),
	C("", "evictions", "evictions_total", NULL, "Chunks evicted from L1",
	  t.evictions),
	C("", "publishes", "publishes_total", NULL, "Chunks published",
	  t.publishes),
	C("", "discards", "discards_total", NULL,
	  "Chunks discarded unpublished (short, or their writer died)",
	  t.discards),
	C("", "promotions", "promotions_total", T("l2"), H_PROMO,
	  t.promotions),
	C("", "demotions", "demotions_total", NULL,
	  "Chunks written from L1 to L2", t.demotions),
	C("", "bytes_in", "published_bytes_total", NULL,
	  "Chunk bytes published by writers (files, PUTs; not L3 promotions)",
	  t.bytes_in),
	C("", "bytes_out", "served_bytes_total", NULL,
	  "Chunk bytes served to readers (reads, GETs; a CUDA IPC handle "
	  "counts its chunk once)", t.bytes_out),
	G("", "writers", "writers", NULL, "Chunks being written now",
	  t.writers),
	G("", "writer_bytes", "writer_bytes", NULL,
	  "L1 bytes held by chunks being written", t.writer_bytes),
	C("", "room_waits", "write_room_waits_total", NULL,
	  "Writes that waited for room in L1 (write_wait_ms)", t.room_waits),
	C("", "room_timeouts", "write_room_timeouts_total", NULL,
	  "Writes that waited for room in L1 and got ENOSPC",
	  t.room_timeouts),
	G("", "meta_bytes", "meta_bytes", NULL,
	  "Bytes of the engine's index, records and policy state",
	  t.meta_bytes),
	/* chain readahead (tier_readahead.c) */
	G("readahead", "max", "readahead_max_chunks", NULL,
	  "Largest readahead window, chunks (readahead=N; 0 = off)",
	  t.ra_max),
	C("readahead", "promotions", "readahead_promotions_total", NULL,
	  "Chunks promoted from L2 or L3 ahead of readers along their chains",
	  t.ra_promotions),
	C("readahead", "hits", "readahead_hits_total", NULL,
	  "Readahead promotions read later", t.ra_hits),
	C("readahead", "wasted", "readahead_wasted_total", NULL,
	  "Readahead promotions evicted unread", t.ra_wasted),
	C("readahead", "paused", "readahead_paused_total", NULL,
	  "Readahead promotions held back: L1 and L2 full", t.ra_paused),
	/* the filesystem */
	G("fs", "inodes", "fs_inodes", NULL, "Inodes the kernel holds",
	  fs.inodes),
	G("fs", "temporaries", "fs_temporaries", NULL,
	  "Temporary names not yet renamed onto a key", fs.temporaries),
	C("fs", "temporaries_expired", "fs_temporaries_expired_total", NULL,
	  "Closed temporaries dropped after tmp_timeout", fs.tmp_expired),
	C("fs", "opens", "fs_opens_total", NULL, "Chunk files opened",
	  fs.opens),
	C("fs", "writers_killed", "fs_writers_killed_total", NULL,
	  "Chunks discarded because their writer died", fs.writers_killed),
	C("fs", "late_publishes", "fs_late_publishes_total", NULL,
	  "Chunks published at their last close rather than a flush",
	  fs.late_publishes),
	C("fs", "invalidations", "fs_invalidations_total", NULL,
	  "Kernel name and page cache invalidations sent", fs.invalidations),
	C("fs", "stale", "fs_stale_total", NULL,
	  "Requests on an inode whose chunk was replaced (ESTALE)", fs.stale),
	DISC("write_error", FS_DISCARD_WRITE_ERROR),
	DISC("refused", FS_DISCARD_REFUSED),
	DISC("empty", FS_DISCARD_EMPTY),
	DISC("killed", FS_DISCARD_KILLED),
	DISC("expired", FS_DISCARD_EXPIRED),
	DISC("unlinked", FS_DISCARD_UNLINKED),
	DISC("unmount", FS_DISCARD_UNMOUNT),
	/* FUSE requests by kind: round trips per file operation */
	RQ("lookup", FS_RQ_LOOKUP),
	RQ("getattr", FS_RQ_GETATTR),
	RQ("open", FS_RQ_OPEN),
	RQ("read", FS_RQ_READ),
	RQ("create", FS_RQ_CREATE),
	RQ("write", FS_RQ_WRITE),
	RQ("flush", FS_RQ_FLUSH),
	RQ("release", FS_RQ_RELEASE),
	/* the transport: FUSE over io_uring (mount/mount_uring.h) */
	G("fuse", "uring_queues", "fuse_uring_queues", NULL,
	  "Rings of FUSE over io_uring in use, one per possible CPU (0: "
	  "/dev/fuse alone serves)", uring.queues),
	G("fuse", "uring_entries", "fuse_uring_entries", NULL,
	  "Entries of those rings, each served by a thread of its own",
	  uring.entries),
	C("fuse", "uring_requests", "fuse_uring_requests_total", NULL,
	  "FUSE requests on namespaces' files and directories served through "
	  "the rings", uring.requests),
	C("fuse", "uring_foreign_replies", "fuse_uring_foreign_replies_total",
	  NULL, "Ring requests replied to by another thread than the "
	  "entry's", uring.foreign),
	/* cache=passthrough (fs/fs_pt.c): the kernel reads shadows */
	G("passthrough", "on", "passthrough_on", NULL,
	  "1 when cache=passthrough and the kernel took FUSE passthrough at "
	  "INIT", pt.on),
	C("passthrough", "opens", "passthrough_opens_total", NULL,
	  "Chunk opens the kernel reads from a shadow, with no READ to the "
	  "daemon", pt.opens),
	C("passthrough", "classic_opens", "passthrough_classic_opens_total",
	  NULL, "Chunk opens read through the daemon: no shadow yet",
	  pt.classic),
	C("passthrough", "made", "passthrough_shadows_made_total", NULL,
	  "Shadows made (sealed memfd copies of chunks in L1)", pt.made),
	C("passthrough", "dropped", "passthrough_shadows_dropped_total", NULL,
	  "Shadows dropped to stay within pt_mem", pt.dropped),
	C("passthrough", "skipped", "passthrough_shadows_skipped_total", NULL,
	  "Shadows not made: no room within pt_mem, queue full, or the chunk "
	  "left L1 first", pt.skipped),
	C("passthrough", "errors", "passthrough_errors_total", NULL,
	  "Shadows that could not be made or registered", pt.errors),
	G("passthrough", "shadows", "passthrough_shadows", NULL,
	  "Shadows now", pt.shadows),
	G("passthrough", "bytes", "passthrough_shadow_bytes", NULL,
	  "Bytes of shadows now (at most pt_mem)", pt.bytes),
	/* path namespaces */
	G("paths", "dirs", "path_dirs", NULL,
	  "Directories of path namespaces", paths.dirs),
	G("paths", "files", "path_files", NULL,
	  "File names of path namespaces", paths.files),
	G("paths", "meta_bytes", "path_meta_bytes", NULL,
	  "Bytes of path namespace trees (names, directories)",
	  paths.meta_bytes),
	G("paths", "pending", "path_pending", NULL,
	  "Closed path files not yet published", paths.pending),
	C("paths", "orphans", "path_orphans_total", NULL,
	  "Chunks without a name dropped at start", paths.orphans),
	C("paths", "superseded_opens", "path_superseded_opens_total", NULL,
	  "Opens that raced an O_TRUNC rewrite's close: the version they found",
	  paths.superseded_opens),
	/* ioctls */
	C("ioctl", "lookups", "ioctl_lookups_total", NULL,
	  "KVFS_IOC_LOOKUP calls answered", ioc.lookups),
	C("ioctl", "group_lookups", "ioctl_group_lookups_total", NULL,
	  "KVFS_IOC_GROUP_LOOKUP calls answered", ioc.group_lookups),
	C("ioctl", "keys", "ioctl_lookup_keys_total", NULL,
	  "Keys asked by lookups (a group: keys times namespaces)", ioc.keys),
	C("ioctl", "prefetches", "ioctl_prefetches_total", NULL,
	  "Lookups with KVFS_LOOKUP_PREFETCH", ioc.prefetches),
	C("ioctl", "handles", "ioctl_handles_total", NULL,
	  "Zero-copy handles given", ioc.handles),
	C("ioctl", "errors", "ioctl_errors_total", NULL,
	  "ioctls answered with an error", ioc.errors),
	G("ioctl.leases", "active", "leases_active", NULL,
	  "Leases held now (handles included)", ioc.leases.active),
	G("ioctl.leases", "handles", "leases_handles", NULL,
	  "Leases held now by zero-copy handles", ioc.leases.handles),
	G("ioctl.leases", "pinned_chunks", "leases_pinned_chunks", NULL,
	  "Chunk pins held by leases", ioc.leases.pinned),
	C("ioctl.leases", "taken", "leases_taken_total", NULL,
	  "Leases created", ioc.leases.taken),
	C("ioctl.leases", "unpinned", "leases_released_total",
	  "reason=\"unpin\"", H_LREL, ioc.leases.unpinned),
	C("ioctl.leases", "expired", "leases_released_total",
	  "reason=\"expired\"", H_LREL, ioc.leases.expired),
	C("ioctl.leases", "closed", "leases_released_total",
	  "reason=\"closed\"", H_LREL, ioc.leases.closed),
	G("ioctl.leases", "lease_ms", NULL, NULL, NULL, ioc.leases.lease_ms),
	ROW("ioctl.leases", NULL, "lease_default_seconds", NULL, M_GAUGE,
	    V_F64, W_ALWAYS, "The mount's lease time (lease_ms)", lease_s),
	C("ioctl.xfer", "gets", "xfer_batches_total", "op=\"get\"", H_XB,
	  ioc.xfer.gets),
	C("ioctl.xfer", "puts", "xfer_batches_total", "op=\"put\"", H_XB,
	  ioc.xfer.puts),
	C("ioctl.xfer", "small", "xfer_small_batches_total", NULL,
	  "Batches sent in the short form (KVFS_IOC_GET_SMALL, _PUT_SMALL)",
	  ioc.xfer.small),
	C("ioctl.xfer", "get_entries", "xfer_entries_total", "op=\"get\"",
	  H_XE, ioc.xfer.get_entries),
	C("ioctl.xfer", "put_entries", "xfer_entries_total", "op=\"put\"",
	  H_XE, ioc.xfer.put_entries),
	C("ioctl.xfer", "get_bytes", "xfer_bytes_total", "op=\"get\"", H_XBY,
	  ioc.xfer.get_bytes),
	C("ioctl.xfer", "put_bytes", "xfer_bytes_total", "op=\"put\"", H_XBY,
	  ioc.xfer.put_bytes),
	C("ioctl.xfer", "misses", "xfer_get_misses_total", NULL,
	  "GET entries whose key was absent", ioc.xfer.misses),
	C("ioctl.xfer", "exists", "xfer_put_exists_total", NULL,
	  "PUT entries whose key was already published", ioc.xfer.exists),
	C("ioctl.xfer", "entry_errors", "xfer_entry_errors_total", NULL,
	  "Entries that failed (misses and exists included)",
	  ioc.xfer.entry_errors),
	C("ioctl.xfer", "batch_errors", "xfer_batch_errors_total", NULL,
	  "Batches that failed whole", ioc.xfer.batch_errors),
	C("ioctl.xfer", "interrupted", "xfer_interrupted_total", NULL,
	  "Batches cut short by a signal", ioc.xfer.interrupted),
	C("ioctl.xfer", "busy", "xfer_busy_total", NULL,
	  "Batches refused (EAGAIN): every worker busy", ioc.xfer.busy),
	C("ioctl.xfer", "bounced", "xfer_bounced_entries_total", NULL,
	  "Entries copied through a bounce buffer", ioc.xfer.bounced),
	C("ioctl.xfer", "registers", "xfer_registers_total", NULL,
	  "Device buffers registered", ioc.xfer.registers),
	C("ioctl.xfer", "device_entries", "xfer_device_entries_total", NULL,
	  "GET entries copied to a device buffer", ioc.xfer.device_entries),
	/* waiting lookups and GETs (kvfs(7) HAND-OFF) */
	C("wait", "waits", "wait_total", NULL,
	  "Waiting lookups and GETs that had to wait", wait.waits),
	C("wait", "complete", "wait_complete_total", NULL,
	  "Waits that ended with the whole chain present", wait.complete),
	C("wait", "timeouts", "wait_timeouts_total", NULL,
	  "Waits that ended at their timeout with a partial run",
	  wait.timeouts),
	C("wait", "interrupted", "wait_interrupted_total", NULL,
	  "Waits ended by a signal (EINTR)", wait.interrupted),
	C("wait", "refused", "wait_refused_total", NULL,
	  "Waits refused past wait_max, wait_max_uid or half a FUSE ring "
	  "(EAGAIN)",
	  fwait.refused),
	C("wait", "wakeups", "wait_wakeups_total", NULL,
	  "Waiters woken by a publish here or a notification from L3",
	  wait.wakeups),
	C("wait", "rechecks", "wait_rechecks_total", NULL,
	  "Re-checks of L3 at wait_recheck_ms", wait.rechecks),
	G("wait", "waiting", "waiting", NULL, "Waiters sleeping now",
	  wait.waiting),
	C3("wait", "notify_sent", "l3_notify_sent_total", NULL,
	   "L3 store notifications published", wait.notify_sent),
	C3("wait", "notify_errors", "l3_notify_errors_total", NULL,
	   "L3 store notifications that could not be published",
	   wait.notify_errors),
	C3("wait", "notify_received", "l3_notify_received_total", NULL,
	   "L3 store notifications received (from every node)",
	   wait.notify_received),
	C3("wait", "notify_resubscribes", "l3_notify_subscriptions_total",
	   NULL, "Notification subscriptions (re-)established",
	   wait.notify_resubscribes),
	G3("wait", "notify_subscribed", "l3_notify_subscribed", NULL,
	   "1 while the notification subscription is up",
	   wait.notify_subscribed),
	C3("wait", "notify_superseded", "l3_notify_superseded_total", NULL,
	   "Path files let go of: another node stored another version in L3",
	   wait.notify_superseded),
	/* KV events (rows but "enabled" only when they are on) */
	ROW("events", "enabled", "events_enabled", NULL, M_GAUGE, V_BOOL,
	    W_ALWAYS, "1 when KV events are published", ev_on),
	JSON_STR("events", "endpoint", W_EV, ev_ep),
	JSON_STR("events", "replay_endpoint", W_EV, ev_replay),
	CE("events", "published", "events_published_total", NULL,
	   "KV events sent", ev.published),
	CE("events", "dropped", "events_dropped_total", NULL,
	   "KV events dropped: the queue was full", ev.dropped),
	CE("events", "batches", "events_batches_total", NULL,
	   "KV event batches sent", ev.batches),
	GE("events", "next_seq", "events_next_sequence", NULL,
	   "Sequence number of the next event batch", ev.next_seq),
	GE("events", "queued", "events_queued", NULL,
	   "KV events waiting to be sent", ev.queued),
	GE("events", "buffered", "events_buffered_batches", NULL,
	   "Batches kept for replay", ev.buffered),
	CE("events", "replay_requests", "events_replay_requests_total", NULL,
	   "Replay requests served", ev.replay_requests),
	CE("events", "replay_batches", "events_replay_batches_total", NULL,
	   "Batches re-sent by replay", ev.replay_batches),
	CE("events", "replay_bad", "events_replay_bad_total", NULL,
	   "Malformed replay requests ignored", ev.replay_bad),
	CE("events", "replay_limited", "events_replay_limited_total", NULL,
	   "Replay requests ignored over the rate limit", ev.replay_limited),
};

#define NMETRICS (sizeof(metrics) / sizeof(metrics[0]))

/* One namespace's row; its table below works like metrics[]. */
struct ns_row {
	struct tier_ns_info info;
	uint64_t shuffle;
	const char *dtype;
};

struct fs_ns_metric {
	const char *key, *name;
	unsigned char type, val;
	const char *help;
	size_t off;
};

#define NSROW(k, n, ty, v, h, f) { k, n, ty, v, h, offsetof(struct ns_row, f) }
static const struct fs_ns_metric ns_metrics[] = {
	NSROW("chunks", "namespace_chunks", M_GAUGE, V_U64,
	      "Chunks of the namespace, any tier", info.chunks),
	NSROW("bytes", "namespace_bytes", M_GAUGE, V_U64,
	      "Bytes of the namespace's chunks (before compression)",
	      info.bytes),
	NSROW("hits", "namespace_hits_total", M_COUNTER, V_U64,
	      "Read hits of the namespace (hits_total op=\"read\")", info.hits),
	NSROW("chunk_bytes", "namespace_chunk_size_bytes", M_GAUGE, V_U64,
	      "The namespace's declared chunk size (0: any)",
	      info.chunk_bytes),
	NSROW("shuffle", NULL, 0, V_U64, NULL, shuffle),
	NSROW("dtype", NULL, 0, V_STR, NULL, dtype),
};

#define NNS (sizeof(ns_metrics) / sizeof(ns_metrics[0]))

/* ------------------------------------------------------------ values */

static const void *field(const void *base, size_t off)
{
	return (const char *)base + off;
}

/* The value as JSON or Prometheus text. */
static void put_value(struct fs_sbuf *b, const void *p, int val, bool json)
{
	uint64_t u;
	double d;
	const char *s;

	switch (val) {
	case V_F64:
		memcpy(&d, p, sizeof(d));
		fs_sb_printf(b, "%.9g", d);
		break;
	case V_STR:
		memcpy(&s, p, sizeof(s));
		sb_json_str(b, s ? s : "");
		break;
	case V_BOOL:
		memcpy(&u, p, sizeof(u));
		fs_sb_printf(b, "%s", json ? (u ? "true" : "false") :
					    (u ? "1" : "0"));
		break;
	default:
		memcpy(&u, p, sizeof(u));
		fs_sb_printf(b, "%" PRIu64, u);
	}
}

static bool shown(const struct fs_metric *m, const struct snap *s)
{
	return m->when == W_ALWAYS || (m->when == W_L3 && s->l3_on) ||
	       (m->when == W_EV && s->ev_on);
}

/* The namespaces the reader may list (who NULL: all), with their rows:
 * malloc'd (caller frees), or -errno. */
static long ns_rows(struct fs *fs, const struct fs_cred *who,
		    struct ns_row **out, char (**dtypes)[8])
{
	uint32_t *ids;
	long got = fs_ns_ids(fs, &ids), k = 0;
	struct ns_row *rows;
	char (*dt)[8];
	bool all = !who || who->uid == 0 || who->uid == getuid();

	if (got < 0)
		return got;
	rows = calloc((size_t)(got ? got : 1), sizeof(*rows));
	dt = calloc((size_t)(got ? got : 1), sizeof(*dt));
	if (!rows || !dt) {
		free(rows);
		free(dt);
		free(ids);
		return -ENOMEM;
	}
	for (long i = 0; i < got; i++) {
		struct fs_nsattr a = { 0 };

		if (tier_ns_info(fs->tier, ids[i], &rows[k].info))
			continue;
		if (fs_nsattr_get(fs, ids[i], &a) == 0) {
			memcpy(dt[k], a.dtype, sizeof(dt[k]));
			dt[k][7] = '\0';
		} else if (!all) {
			continue; /* no record to check against: hidden */
		}
		if (!all && !fs_cred_may(who, a.mode, a.uid, a.gid, R_OK))
			continue;
		rows[k].shuffle = (uint64_t)rows[k].info.shuffle;
		rows[k].dtype = dt[k];
		k++;
	}
	free(ids);
	*out = rows;
	*dtypes = dt;
	return k;
}

/* ----------------------------------------------------------- renderers */

/* o ("a.b") split at its dots into at most 3 components of 31 bytes. */
static int split_path(const char *o, char comp[3][32])
{
	int n = 0;

	while (*o && n < 3) {
		size_t len = strcspn(o, ".");

		snprintf(comp[n++], 32, "%.*s", (int)len, o);
		o += len + (o[len] == '.');
	}
	return n;
}

static void render_json(struct fs_sbuf *b, const struct snap *s,
			const struct ns_row *ns, long nns)
{
	char cur[3][32], want[3][32]; /* the open objects, the row's */
	bool first[4] = { true, true, true, true };
	int depth = 0;

	fs_sb_printf(b, "{\n  ");
	for (size_t i = 0; i < NMETRICS; i++) {
		const struct fs_metric *m = &metrics[i];
		int nc, keep = 0;

		if (!m->key || !shown(m, s))
			continue;
		nc = split_path(m->obj, want);
		while (keep < depth && keep < nc && !strcmp(cur[keep], want[keep]))
			keep++;
		for (; depth > keep; depth--)
			fs_sb_printf(b, "}");
		for (; depth < nc; depth++) {
			fs_sb_printf(b, "%s\"%s\": {", first[depth] ? "" :
				     depth ? ", " : ",\n  ", want[depth]);
			first[depth] = false;
			first[depth + 1] = true;
			memcpy(cur[depth], want[depth], sizeof(cur[depth]));
		}
		fs_sb_printf(b, "%s\"%s\": ", first[depth] ? "" :
			     depth ? ", " : ",\n  ", m->key);
		first[depth] = false;
		put_value(b, field(s, m->off), m->val, true);
	}
	while (depth-- > 0)
		fs_sb_printf(b, "}");
	fs_sb_printf(b, ",\n  \"namespaces\": {");
	for (long i = 0; i < nns; i++) {
		fs_sb_printf(b, "%s\n    ", i ? "," : "");
		sb_json_str(b, ns[i].info.name);
		fs_sb_printf(b, ": {");
		for (size_t j = 0; j < NNS; j++) {
			fs_sb_printf(b, "%s\"%s\": ", j ? ", " : "",
				     ns_metrics[j].key);
			put_value(b, field(&ns[i], ns_metrics[j].off),
				  ns_metrics[j].val, true);
		}
		fs_sb_printf(b, "}");
	}
	fs_sb_printf(b, "%s}\n}\n", nns > 0 ? "\n  " : "");
}

static void prom_head(struct fs_sbuf *b, const char *name, int type,
		      const char *help)
{
	fs_sb_printf(b, "# HELP kvfs_%s %s\n# TYPE kvfs_%s %s\n", name, help,
		     name, type == M_COUNTER ? "counter" : "gauge");
}

static void render_prom(struct fs_sbuf *b, const struct snap *s,
			const struct ns_row *ns, long nns)
{
	bool done[NMETRICS] = { false };

	for (size_t i = 0; i < NMETRICS; i++) {
		const struct fs_metric *m = &metrics[i];
		bool head = false;

		if (done[i] || !m->name)
			continue;
		/* the whole family here, under one HELP and TYPE */
		for (size_t j = i; j < NMETRICS; j++) {
			const struct fs_metric *r = &metrics[j];

			if (done[j] || !r->name || strcmp(r->name, m->name))
				continue;
			done[j] = true;
			if (!shown(r, s))
				continue;
			if (!head)
				prom_head(b, m->name, m->type, m->help);
			head = true;
			fs_sb_printf(b, "kvfs_%s", r->name);
			if (r->labels)
				fs_sb_printf(b, "{%s}", r->labels);
			fs_sb_printf(b, " ");
			put_value(b, field(s, r->off), r->val, false);
			fs_sb_printf(b, "\n");
		}
	}
	for (size_t j = 0; j < NNS; j++) {
		const struct fs_ns_metric *m = &ns_metrics[j];

		if (!m->name)
			continue;
		prom_head(b, m->name, m->type, m->help);
		for (long i = 0; i < nns; i++) {
			fs_sb_printf(b, "kvfs_%s{namespace=\"", m->name);
			sb_prom_str(b, ns[i].info.name);
			fs_sb_printf(b, "\"} ");
			put_value(b, field(&ns[i], m->off), m->val, false);
			fs_sb_printf(b, "\n");
		}
	}
}

int fs_metrics_render(struct fs *fs, enum fs_metrics_format f,
		      const struct fs_cred *who, struct fs_sbuf *b)
{
	struct snap s;
	struct ns_row *ns = NULL;
	char (*dt)[8] = NULL;
	long n;

	snap_take(fs, &s);
	n = ns_rows(fs, who, &ns, &dt);
	if (n < 0)
		return (int)n;
	if (f == FS_METRICS_JSON)
		render_json(b, &s, ns, n);
	else
		render_prom(b, &s, ns, n);
	free(ns);
	free(dt);
	return b->oom ? -ENOMEM : 0;
}

int fs_metrics_prom(struct fs *fs, char **buf, size_t *len)
{
	struct fs_sbuf b = { 0 };
	int err = fs_metrics_render(fs, FS_METRICS_PROM, NULL, &b);

	if (err) {
		free(b.p);
		return err;
	}
	*buf = b.p;
	*len = b.len;
	return 0;
}

/* ------------------------------------------ the counters of struct fs_priv */

void fs_counters(struct fs *fs, struct fs_counters *c)
{
	struct fs_priv *p = fs->priv;

	pthread_mutex_lock(&p->lock);
	c->inodes = p->ninodes;
	c->temporaries = p->ntemps;
	c->tmp_expired = p->tmp_expired;
	pthread_mutex_unlock(&p->lock);
	c->opens = __atomic_load_n(&p->opens, __ATOMIC_RELAXED);
	c->writers_killed = __atomic_load_n(&p->writers_killed,
					    __ATOMIC_RELAXED);
	c->late_publishes = __atomic_load_n(&p->late_publishes, __ATOMIC_RELAXED);
	c->invalidations = __atomic_load_n(&p->invalidations,
					   __ATOMIC_RELAXED);
	c->stale = __atomic_load_n(&p->stale, __ATOMIC_RELAXED);
	for (int i = 0; i < FS_DISCARD_N; i++)
		c->discards[i] = __atomic_load_n(&p->discards[i],
						 __ATOMIC_RELAXED);
	for (int k = 0; k < FS_RQ_NR; k++)
		c->req[k] = __atomic_load_n(&p->req[k], __ATOMIC_RELAXED);
}
