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
 * All functions return 0 or a negative errno and never set errno.
 */
#ifndef KVFS_RECORD_H
#define KVFS_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "kvfs.h"

#define KVREC_MAGIC 0x324c564bu /* "KVL2" little-endian */
#define KVREC_VERSION 1
#define KVREC_HDR_BYTES 256

struct kvrec_hdr {
	uint32_t magic;      /* KVREC_MAGIC: where a record may start */
	uint16_t version;    /* KVREC_VERSION */
	uint8_t codec;       /* enum codec_id: CODEC_NONE (payload = raw
			      * bytes) or CODEC_ZSTD (one zstd frame) */
	uint8_t shuffle;     /* byte-shuffle element size applied before
			      * zstd: 0, 2 or 4; always 0 with CODEC_NONE */
	uint32_t hdr_len;    /* sizeof(struct kvrec_hdr), 256 */
	uint32_t flags;      /* 0; reserved (readers ignore it) */
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
	uint8_t reserved[48];/* zero */
	uint64_t hdr_sum;    /* XXH3-64 of every byte before it, seeded with
			      * the store's salt (L2: l2_dir/l2.id) */
};
_Static_assert(sizeof(struct kvrec_hdr) == KVREC_HDR_BYTES,
	       "record header is 256 bytes");
_Static_assert(offsetof(struct kvrec_hdr, hdr_sum) == KVREC_HDR_BYTES - 8,
	       "hdr_sum closes the header");

/* What a header says about its record, besides magic/version/checksum. */
struct kvrec_desc {
	const char *ns;             /* namespace name (1..KVFS_NS_NAME_MAX) */
	const struct kvfs_key *key;
	uint64_t seq;
	uint64_t raw_len, stored_len;
	uint8_t codec, shuffle;     /* enum codec_id; shuffle 0 with none */
	uint64_t raw_sum, stored_sum; /* kvrec_sum(..., 0) of raw / stored */
};

/* XXH3-64 of len bytes at p with seed (0 for raw_sum and stored_sum, the
 * store's salt for hdr_sum). */
uint64_t kvrec_sum(const void *p, size_t len, uint64_t seed);

/* Fills *h (every byte: reserved and padding zeroed) from d and seals it
 * with hdr_sum under salt. -EINVAL for a namespace name that is empty or
 * longer than KVFS_NS_NAME_MAX. It does not judge the codec: build only
 * what kvrec_hdr_check accepts. */
int kvrec_hdr_build(struct kvrec_hdr *h, const struct kvrec_desc *d,
		    uint64_t salt);

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

#endif /* KVFS_RECORD_H */
