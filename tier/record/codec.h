/*
 * codec.h - chunk compression for the L2 tier: an optional byte-plane
 * shuffle (for 2- or 4-byte elements such as bf16/fp16 or fp32) followed by
 * zstd, or nothing at all.
 *
 * Why the shuffle: in bf16 KV tensors the high byte of every element (sign,
 * exponent, top mantissa bit) is highly repetitive while the low byte is
 * nearly random. Interleaved, zstd sees noise; split into two planes, the
 * high plane compresses well and the low plane costs its entropy only.
 *
 * Thread safety: functions taking a struct codec_ws use that workspace and
 * nothing else, so any number of threads may compress at once with one
 * workspace each. A workspace itself is not thread-safe.
 * All functions return a count or 0 on success and a negative errno on
 * failure; none sets errno.
 */
#ifndef KVFS_CODEC_H
#define KVFS_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Stored in L2 record headers: values are part of the on-disk format. */
enum codec_id {
	CODEC_NONE = 0, /* payload is the raw bytes */
	CODEC_ZSTD = 1, /* payload is one zstd frame (of the shuffled bytes) */
};

#define CODEC_LEVEL_MIN 1
#define CODEC_LEVEL_MAX 22
/* The default zstd level (see bench/kvfs_l2bench.c: level 1 with a 2-byte
 * shuffle reaches nearly the ratio of level 3 on bf16 KV at a much higher
 * speed; higher levels buy almost nothing on this data). */
#define CODEC_LEVEL_DEFAULT 1

/* A per-thread workspace: zstd contexts and a scratch buffer that grows to
 * the largest chunk seen (so no page faults per chunk). */
struct codec_ws;

/* codec_ws_new - a workspace, or NULL when out of memory. */
struct codec_ws *codec_ws_new(void);
void codec_ws_free(struct codec_ws *ws);

/* codec_shuffle_ok - true for 0 (none), 2 and 4. */
int codec_shuffle_ok(int shuffle);

/*
 * codec_shuffle - splits len bytes of elem-byte elements into elem planes
 * (byte 0 of every element, then byte 1, ...); a tail of len % elem bytes
 * is copied as is. elem 0 or 1 copies. dst and src must not overlap.
 * codec_unshuffle - the inverse.
 */
void codec_shuffle(void *dst, const void *src, size_t len, int elem);
void codec_unshuffle(void *dst, const void *src, size_t len, int elem);
/* codec_unshuffle_part - the bytes [from, to) of codec_unshuffle's output
 * (from a multiple of elem; to too, or len), so a caller can check each
 * part while it is in cache. */
void codec_unshuffle_part(void *dst, const void *src, size_t len, int elem,
			  size_t from, size_t to);

/*
 * codec_compress - shuffles src (shuffle 0, 2 or 4) and compresses it with
 * zstd at level into dst, which holds cap bytes.
 * Returns the compressed length (<= cap), or:
 *   -E2BIG   the result would not fit in cap: the caller sets cap to the
 *            largest size worth storing and stores the raw bytes on -E2BIG.
 *            Cheap for incompressible bytes: when cap < len, a sample of
 *            CODEC_SAMPLE_BYTES from the middle is compressed first, and
 *            one that saves less than 1/32 of itself gives -E2BIG at once
 *            (chunks of 4 samples and more);
 *   -EINVAL  level outside [CODEC_LEVEL_MIN, CODEC_LEVEL_MAX], bad shuffle;
 *   -ENOMEM.
 */
long codec_compress(struct codec_ws *ws, int level, int shuffle,
		    const void *src, size_t len, void *dst, size_t cap);

/*
 * codec_decompress - the inverse: decodes slen bytes of codec/shuffle into
 * exactly raw_len bytes at dst. CODEC_NONE copies (slen must equal raw_len).
 * Returns 0, or -EBADMSG when the payload is not a valid frame of exactly
 * raw_len bytes (never writes past dst + raw_len), -EINVAL (unknown codec
 * or shuffle), -ENOMEM.
 */
int codec_decompress(struct codec_ws *ws, int codec, int shuffle,
		     const void *src, size_t slen, void *dst, size_t raw_len);

/*
 * Large chunks are compressed as a sequence of independent zstd frames of
 * CODEC_FRAME_BYTES of (shuffled) input each, so a reader can decode the
 * frames of one chunk on several cores. The payload is just the frames
 * back to back (zstd frames are self-delimiting).
 */
#define CODEC_FRAME_BYTES (512u << 10)

struct codec_frame {
	size_t src_off, src_len; /* in the payload */
	size_t dst_off, dst_len; /* in the (shuffled) output */
};

/* codec_frames - lists the frames of a zstd payload that must decode to
 * exactly raw_len bytes. Returns the count (<= max), or -EBADMSG. */
long codec_frames(const void *src, size_t slen, size_t raw_len,
		  struct codec_frame *f, size_t max);

/* codec_decode_frame - decodes one frame of exactly dlen bytes. 0 or
 * -EBADMSG (-ENOMEM). */
int codec_decode_frame(struct codec_ws *ws, const void *src, size_t slen,
		       void *dst, size_t dlen);

/*
 * codec_decompress of a zstd payload as it arrives (a GET being received),
 * with the same checks and outcome: codec_dec_begin(ws, shuffle, dst,
 * raw_len); codec_dec_feed each time more bytes came, with the payload
 * received so far (avail bytes, contiguous, last true once it is whole):
 * it decodes every frame that is complete, in one pass each, and when
 * there is no shuffle says which new raw bytes it wrote (*out, *outlen:
 * hash them while they are in the cache); codec_dec_end. With a shuffle
 * the planes are decoded into the workspace's scratch and end unshuffles
 * them into dst, calling each(arg, p, n) (when not NULL) on every piece
 * of dst, in order, as soon as it is written (for the same purpose).
 * 0, or -EBADMSG (not frames of exactly raw_len bytes in all, each
 * announcing its size; a frame cut short once last), -EINVAL (shuffle),
 * -ENOMEM. ws serves one decode at a time and nothing else meanwhile.
 */
int codec_dec_begin(struct codec_ws *ws, int shuffle, void *dst,
		    size_t raw_len);
int codec_dec_feed(struct codec_ws *ws, const void *payload, size_t avail,
		   bool last, const void **out, size_t *outlen);
int codec_dec_end(struct codec_ws *ws,
		  void (*each)(void *arg, const void *p, size_t n), void *arg);

/* The sample codec_compress tries first (see there). */
#define CODEC_SAMPLE_BYTES (64u << 10)

/* codec_ws_fed - bytes ws's compressor was given so far (samples
 * included): what compression cost. */
uint64_t codec_ws_fed(const struct codec_ws *ws);

/* codec_ws_scratch - the workspace's scratch buffer, grown to len bytes
 * (valid until the next call on ws), or NULL. */
void *codec_ws_scratch(struct codec_ws *ws, size_t len);

/* codec_parse - parses "zstd", "zstd:LEVEL" or "none" (the compress= mount
 * option) into a level (0 = none). -EINVAL otherwise. */
int codec_parse(const char *s, int *level);

#endif /* KVFS_CODEC_H */
