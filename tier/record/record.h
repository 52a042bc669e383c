/*
 * record.h - the self-checking chunk record: the on-disk format's manual.
 *
 * A record is one chunk stored outside L1: a 256-byte header, then the
 * payload (stored_len bytes: the chunk's bytes, raw or as one zstd frame
 * of the optionally byte-shuffled bytes, see codec.h). L2 writes records
 * into its segment files, each record starting on a 4096-byte boundary and
 * padded with zeros to the next one (l2.h); a shared L3 tier can store the
 * same bytes (header + payload, no padding) as one value. Whoever reads a
 * record back trusts nothing before it passed, in this order:
 *
 *   1. kvrec_hdr_check: magic, version, header length, hdr_sum (seeded
 *      with the store's salt, so bytes inside a payload can never pass for
 *      a header), codec/shuffle coherent, namespace NUL-terminated, sizes
 *      within the store's limit;
 *   2. the payload: stored_sum over the stored bytes (kvrec_payload_check;
 *      kvrec_verify does 1 and 2 on a buffer holding both), or, cheaper
 *      when the record is decoded anyway, raw_sum over the decoded bytes;
 *   3. the caller's own match: namespace name, key, seq (reads ask for
 *      one record; the header must name it).
 *
 * Little-endian hosts only, as kvfs is: fields are written in host order.
 * Every checksum is XXH3-64 (kvrec_sum). A change of layout or meaning
 * bumps KVREC_VERSION; readers reject versions they do not know (as a
 * corrupt record: a miss, never wrong bytes).
 *
 * Versions: 1 has no chain link (flags and reserved are zero, ignored).
 * 2 adds the chunk's chain link, so a restart knows its chains again
 * (readahead, the prefix policy): flags KVREC_F_PARENT says parent holds
 * the parent key (user.kvfs.parent), depth its depth (user.kvfs.depth,
 * 0 = not known). kvrec_hdr_build writes version 1 for a record without
 * a link (byte for byte what version 1 readers accept: L2 and L3 records
 * stay readable by older daemons) and version 2 only with one; readers
 * take both. 3 adds a path file's attributes (fs/paths/): flags
 * KVREC_F_ATTR says mode (permission bits, at most 07777), uid, gid and
 * the mtime (mtime_nsec below 10^9, seconds in mtime_lo/mtime_hi) are
 * its writer's, so a node that finds the file in L3 judges it as its
 * writer did. Only L3 records of path files and the markers of their
 * directories (fs/paths/fs_pl3.c: a directory's) carry them (version 3
 * only then: key chunks' records are what they were); older daemons reject
 * version 3 (a miss), and a record without them leaves the attributes
 * unknown to its reader (0644, the namespace's owner).
 *
 * All functions return 0 or a negative errno and never set errno.
 */
#ifndef KVFS_RECORD_H
#define KVFS_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kvfs.h"

#define KVREC_MAGIC 0x324c564bu /* "KVL2" little-endian */
#define KVREC_VERSION 3     /* the newest version (with attributes) */
#define KVREC_VERSION_MIN 1 /* the oldest still read */
#define KVREC_F_PARENT 1u   /* (v2) parent holds the parent key */
#define KVREC_F_ATTR 2u     /* (v3) mode..mtime_hi are a path file's */
#define KVREC_HDR_BYTES 256

struct kvrec_hdr {
	uint32_t magic;      /* KVREC_MAGIC: where a record may start */
	uint16_t version;    /* KVREC_VERSION */
	uint8_t codec;       /* enum codec_id: CODEC_NONE (payload = raw
			      * bytes) or CODEC_ZSTD (one zstd frame) */
	uint8_t shuffle;     /* byte-shuffle element size applied before
			      * zstd: 0, 2 or 4; always 0 with CODEC_NONE */
	uint32_t hdr_len;    /* sizeof(struct kvrec_hdr), 256 */
	uint32_t flags;      /* v1: 0 (readers ignore it); v2: KVREC_F_PARENT
			      * or 0, v3: also KVREC_F_ATTR; other bits
			      * rejected */
	uint64_t seq;        /* record number, increasing per store: when
			      * several records hold one key, the highest
			      * seq is the current one */
	uint64_t raw_len;    /* the chunk's bytes (decoded size); at most
			      * 2^40 */
	uint64_t stored_len; /* payload bytes following the header; equal
			      * to raw_len with CODEC_NONE */
	uint64_t raw_sum;    /* XXH3-64, seed 0, of the raw_len decoded
			      * bytes; also the chunk's user.kvfs.checksum */
	uint64_t stored_sum; /* XXH3-64, seed 0, of the stored_len payload
			      * bytes (checkable without decoding) */
	uint8_t key[16];     /* the chunk's struct kvfs_key */
	char ns[KVFS_NS_NAME_MAX + 1]; /* namespace name: 1..KVFS_NS_NAME_MAX
			      * bytes, NUL-terminated, zero-padded (names,
			      * not ids: ids are per process) */
	uint8_t parent[16];  /* v2 with KVREC_F_PARENT: the parent's key;
			      * else zero */
	uint32_t depth;      /* v2: the chunk's depth in its chain, 0 = not
			      * known; v1: zero */
	uint32_t mode;       /* v3 with KVREC_F_ATTR: the path file's
			      * permission bits (<= 07777), */
	uint32_t uid, gid;   /* owner, */
	uint32_t mtime_nsec; /* mtime (nanoseconds < 10^9, */
	uint32_t mtime_lo, mtime_hi; /* seconds, signed 64 bits); else 0 */
	uint8_t reserved[4]; /* zero */
	uint64_t hdr_sum;    /* XXH3-64 of every byte before it, seeded with
			      * the store's salt (L2: l2_dir/l2.id) */
};
_Static_assert(sizeof(struct kvrec_hdr) == KVREC_HDR_BYTES,
	       "record header is 256 bytes");
_Static_assert(offsetof(struct kvrec_hdr, hdr_sum) == KVREC_HDR_BYTES - 8,
	       "hdr_sum closes the header");

/* A path file's attributes (version 3): as struct tier_pattr. */
struct kvrec_attr {
	uint32_t mode;        /* permission bits, <= 07777 */
	uint32_t uid, gid;
	uint32_t mtime_nsec;  /* < 10^9 */
	int64_t mtime_sec;
};

/* What a header says about its record, besides magic/version/checksum. */
struct kvrec_desc {
	const char *ns;             /* namespace name (1..KVFS_NS_NAME_MAX) */
	const struct kvfs_key *key;
	uint64_t seq;
	uint64_t raw_len, stored_len;
	uint8_t codec, shuffle;     /* enum codec_id; shuffle 0 with none */
	uint64_t raw_sum, stored_sum; /* kvrec_sum(..., 0) of raw / stored */
	const struct kvfs_key *parent; /* the chain link, or NULL ... */
	uint32_t depth;             /* ... and the depth (0: not known) */
	const struct kvrec_attr *attr; /* a path file's attributes, or NULL */
};

/* The chain link a checked header carries (version 2): true and *parent
 * set when it names a parent; *depth the depth, 0 when not known. */
static inline bool kvrec_hdr_link(const struct kvrec_hdr *h,
				  struct kvfs_key *parent, uint32_t *depth)
{
	bool has = h->version >= 2 && (h->flags & KVREC_F_PARENT);

	*depth = h->version >= 2 ? h->depth : 0;
	if (has)
		memcpy(parent->b, h->parent, sizeof(parent->b));
	return has;
}

/* The attributes a checked header carries (version 3): true and *a. */
static inline bool kvrec_hdr_attr(const struct kvrec_hdr *h,
				  struct kvrec_attr *a)
{
	if (h->version < 3 || !(h->flags & KVREC_F_ATTR))
		return false;
	a->mode = h->mode;
	a->uid = h->uid;
	a->gid = h->gid;
	a->mtime_nsec = h->mtime_nsec;
	a->mtime_sec = (int64_t)((uint64_t)h->mtime_lo |
				 (uint64_t)h->mtime_hi << 32);
	return true;
}

/* XXH3-64 of len bytes at p with seed (0 for raw_sum and stored_sum, the
 * store's salt for hdr_sum). */
uint64_t kvrec_sum(const void *p, size_t len, uint64_t seed);

/* kvrec_sum of bytes given in pieces, each hashed as it arrives (while
 * it is in the cache): kvrec_sum_new(seed), kvrec_sum_add for each piece
 * in order, kvrec_sum_end gives what kvrec_sum(seed) would over them all;
 * kvrec_sum_reset starts again. NULL when out of memory. */
struct kvrec_sum_state;
struct kvrec_sum_state *kvrec_sum_new(void);
void kvrec_sum_reset(struct kvrec_sum_state *s, uint64_t seed);
void kvrec_sum_add(struct kvrec_sum_state *s, const void *p, size_t len);
uint64_t kvrec_sum_end(const struct kvrec_sum_state *s);
void kvrec_sum_free(struct kvrec_sum_state *s);

/* Fills *h (every byte: reserved and padding zeroed) from d and seals it
 * with hdr_sum under salt: version 3 when d has attributes, else version
 * 1 when d has no link (parent NULL, depth 0), else version 2. -EINVAL for a namespace name that is empty or
 * longer than KVFS_NS_NAME_MAX. It does not judge the codec: build only
 * what kvrec_hdr_check accepts. */
int kvrec_hdr_build(struct kvrec_hdr *h, const struct kvrec_desc *d,
		    uint64_t salt);

/* Sets (or clears, parent NULL and depth 0) the chain link of a header
 * kvrec_hdr_build made (its attributes stay), and seals it again under
 * salt. */
void kvrec_hdr_set_link(struct kvrec_hdr *h, const struct kvfs_key *parent,
			uint32_t depth, uint64_t salt);

/* Step 1 above: 0, or -EBADMSG for anything but a well-formed header
 * sealed under salt whose stored_len is at most max_stored. */
int kvrec_hdr_check(const struct kvrec_hdr *h, uint64_t salt,
		    uint64_t max_stored);

/* Step 2 above on a checked header: 0, or -EBADMSG when the stored_len
 * bytes at payload do not sum to stored_sum. */
int kvrec_payload_check(const struct kvrec_hdr *h, const void *payload);

/* Steps 1 and 2 on len bytes at buf (header, then payload; trailing bytes
 * such as padding are allowed): 0, -EBADMSG, or -EMSGSIZE when buf is too
 * short for the header or for the stored_len its header claims. */
int kvrec_verify(const void *buf, size_t len, uint64_t salt,
		 uint64_t max_stored);

/*
 * ------------------------------------------------ the L2 index checkpoint
 *
 * l2_dir/l2.ckpt is a snapshot of the L2 index (which records are live
 * where), so that a mount reads it instead of every record. It is written
 * at clean unmount and every l2_checkpoint_s seconds (l2.ckpt.tmp, fsync,
 * rename, fsync of l2_dir: a reader sees the old file or the new one,
 * whole). It is a cache of what the segments say, never more: a loader
 * that finds it missing, from another l2.id, or damaged in any block does
 * today's full scan of the segments instead (and says why in one line).
 * Layout, little-endian, every checksum XXH3-64 (kvrec_sum) seeded with
 * the store's salt (l2.id) plus the block's number, so blocks of another
 * l2_dir, another checkpoint or another place in this one do not verify:
 *
 *   struct kvckpt_hdr      (64 bytes; its sum seeded with salt + 0)
 *   block 1 .. n           each a struct kvckpt_blk, then len bytes of
 *                          payload, then the 8-byte sum of blk + payload
 *                          seeded with salt + its number:
 *     KVCKPT_SEG  one per segment file: a struct kvckpt_seg, then
 *                 seg.nents struct kvckpt_ent sorted by blk, each ending
 *                 at or before seg.scan_from (records from there on are
 *                 not in the checkpoint: the loader scans them);
 *     KVCKPT_NS   the namespace names the entries' ns index into:
 *                 count names, each a uint16 length and that many bytes
 *                 (1..KVFS_NS_NAME_MAX, no NUL), in index order;
 *     KVCKPT_LINK (version 2) right after a SEG block some of whose
 *                 entries carry a chain link (record header v2): count
 *                 struct kvckpt_link, by increasing ent (the entry's
 *                 index in that SEG block);
 *     KVCKPT_ORDER (version 2) at most one, after the NS block: the
 *                 engine's learned read order (readahead's successors),
 *                 opaque to L2 (count = its entries; the layout is
 *                 tier/tier_readahead.c's), handed back to the engine
 *                 at the next mount, so it survives restarts;
 *     KVCKPT_END  no payload; count = the number of blocks before it. A
 *                 file that ends anywhere else is torn.
 *   A SEG block names segments in increasing id order; exactly one NS
 *   block, after the last SEG block. Version 1 files (no LINK, no ORDER)
 *   are still read.
 *
 * A checkpoint entry says where a record was; the loader does not read
 * the record. Reads check its header against (ns, key, seq) as every L2
 * read does, so a record erased, moved or reclaimed since the checkpoint
 * is a miss (dropped at that first touch), never wrong bytes. Segments
 * missing on disk drop their entries at load; segments not in the
 * checkpoint (newer) are scanned whole.
 *
 * l2_dir/l2.freed, the unlink log: every l2_free (unlink, replace, a
 * corrupt record) appends one struct kvckpt_freed (write(2) before the
 * free returns: it survives a kill of the daemon, like the punch). Every
 * mount applies it (checkpoint or scan: a record freed just before a kill,
 * its punch not done yet, stays dead) by erasing the named records again.
 * A checkpoint that commits drops the entries older than its snapshot.
 * The log ends at its first entry whose sum fails (a torn append).
 */
#define KVCKPT_MAGIC 0x54504b43324c564bull /* "KVL2CKPT" little-endian */
#define KVCKPT_VERSION 2
#define KVCKPT_VERSION_MIN 1
#define KVCKPT_FILE "l2.ckpt"
#define KVCKPT_TMP "l2.ckpt.tmp"
#define KVCKPT_FREED_FILE "l2.freed"

struct kvckpt_hdr {
	uint64_t magic;     /* KVCKPT_MAGIC */
	uint32_t version;   /* KVCKPT_VERSION */
	uint32_t hdr_len;   /* 64 */
	uint64_t salt;      /* the l2.id it belongs to (checked first: a
			     * checkpoint of another l2_dir is "stale") */
	uint64_t next_seq;  /* record numbers in use are below it */
	uint32_t next_seg;  /* segment ids in use are below it */
	uint32_t flags;     /* KVCKPT_CLEAN: written at a clean unmount */
	uint64_t records;   /* entries in all SEG blocks */
	uint64_t time_ns;   /* CLOCK_REALTIME of the snapshot (for people) */
	uint64_t sum;       /* of the 56 bytes before it, seed salt + 0 */
};
_Static_assert(sizeof(struct kvckpt_hdr) == 64, "checkpoint header");
#define KVCKPT_CLEAN 1u

enum kvckpt_blk_type {
	KVCKPT_SEG = 1,
	KVCKPT_NS = 2,
	KVCKPT_END = 3,
	KVCKPT_LINK = 4,  /* version 2 */
	KVCKPT_ORDER = 5, /* version 2 */
};

struct kvckpt_blk {
	uint32_t type;  /* enum kvckpt_blk_type */
	uint32_t count; /* SEG: entries; NS: names; END: blocks before */
	uint64_t len;   /* payload bytes after this struct (sum excluded) */
};

struct kvckpt_seg {
	uint32_t id;        /* seg-<id>.kvl2 */
	uint32_t nents;     /* = the block's count */
	uint64_t scan_from; /* bytes: scanned at load from here (4 KiB
			     * aligned; the segment's tail, or its first
			     * write still in flight at the snapshot) */
};

struct kvckpt_ent {
	uint8_t key[16];
	uint64_t seq;        /* the record header's seq */
	uint64_t raw_len;    /* as in the record header */
	uint64_t stored_len;
	uint64_t raw_sum;    /* the chunk's checksum (record raw_sum) */
	uint32_t blk, nblk;  /* place in the segment, in 4 KiB blocks */
	uint32_t ns;         /* index into the NS block */
	uint8_t codec, shuffle;
	uint16_t zero;
};
_Static_assert(sizeof(struct kvckpt_ent) == 64, "checkpoint entry");

/* The chain link of one entry of the SEG block before (KVCKPT_LINK). */
struct kvckpt_link {
	uint32_t ent;        /* index of the entry in its SEG block */
	uint32_t depth;      /* 0: not known */
	uint8_t parent[16];  /* with KVREC_F_PARENT in flags */
	uint32_t flags;      /* KVREC_F_PARENT or 0 */
	uint32_t zero;
};
_Static_assert(sizeof(struct kvckpt_link) == 32, "checkpoint link");

struct kvckpt_freed {
	uint32_t seg, blk;   /* where the freed record was */
	uint64_t seq;        /* its seq (the erase needs all three to match) */
	uint64_t sum;        /* of the 16 bytes before it, seed salt */
};
_Static_assert(sizeof(struct kvckpt_freed) == 24, "unlink log entry");

#endif /* KVFS_RECORD_H */
