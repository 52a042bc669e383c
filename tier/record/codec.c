/*
 * codec.c - byte-plane shuffle + zstd for L2 records (see codec.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>
#include <zstd_errors.h>

#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>
#define CODEC_SSE2 1
#endif

#include "tier/record/codec.h"

struct codec_ws {
	ZSTD_CCtx *cctx;
	ZSTD_DCtx *dctx;
	void *scratch;      /* shuffled bytes, grows to the largest chunk */
	size_t scratch_cap;
	void *sample;       /* ZSTD_compressBound(CODEC_SAMPLE_BYTES) */
	uint64_t fed;       /* bytes given to the compressor, in all */
	/* a decode as the payload arrives (codec_dec_*) */
	void *d_dst, *d_out; /* the raw bytes; where zstd writes */
	size_t d_raw, d_pos; /* raw_len, bytes decoded */
	size_t d_in;         /* payload bytes decoded (whole frames) */
	int d_shuffle;
};

struct codec_ws *codec_ws_new(void)
{
	struct codec_ws *ws = calloc(1, sizeof(*ws));

	if (!ws)
		return NULL;
	ws->cctx = ZSTD_createCCtx();
	ws->dctx = ZSTD_createDCtx();
	if (!ws->cctx || !ws->dctx) {
		codec_ws_free(ws);
		return NULL;
	}
	return ws;
}

void codec_ws_free(struct codec_ws *ws)
{
	if (!ws)
		return;
	ZSTD_freeCCtx(ws->cctx);
	ZSTD_freeDCtx(ws->dctx);
	free(ws->scratch);
	free(ws->sample);
	free(ws);
}

static void *ws_scratch(struct codec_ws *ws, size_t len)
{
	void *p;

	if (ws->scratch_cap >= len)
		return ws->scratch;
	free(ws->scratch);
	ws->scratch = NULL;
	ws->scratch_cap = 0;
	/* 64-byte aligned for the SIMD loops; rounded so tiny growths do not
	 * reallocate every time */
	len = (len + 65535) & ~(size_t)65535;
	if (posix_memalign(&p, 64, len))
		return NULL;
	ws->scratch = p;
	ws->scratch_cap = len;
	return p;
}

int codec_shuffle_ok(int shuffle)
{
	return shuffle == 0 || shuffle == 2 || shuffle == 4;
}

/* ------------------------------------------------------------- shuffle */

static void shuffle2(uint8_t *dst, const uint8_t *src, size_t n)
{
	uint8_t *lo = dst, *hi = dst + n;
	size_t i = 0;

#ifdef CODEC_SSE2
	const __m128i mask = _mm_set1_epi16(0xff);

	for (; i + 16 <= n; i += 16) {
		__m128i a = _mm_loadu_si128((const __m128i *)(src + 2 * i));
		__m128i b = _mm_loadu_si128((const __m128i *)(src + 2 * i + 16));
		__m128i l = _mm_packus_epi16(_mm_and_si128(a, mask),
					     _mm_and_si128(b, mask));
		__m128i h = _mm_packus_epi16(_mm_srli_epi16(a, 8),
					     _mm_srli_epi16(b, 8));

		_mm_storeu_si128((__m128i *)(lo + i), l);
		_mm_storeu_si128((__m128i *)(hi + i), h);
	}
#endif
	for (; i < n; i++) {
		lo[i] = src[2 * i];
		hi[i] = src[2 * i + 1];
	}
}

/* Values i0..i1-1 of the n in the planes at src, into dst (whole). */
static void unshuffle2(uint8_t *dst, const uint8_t *src, size_t n, size_t i0,
		       size_t i1)
{
	const uint8_t *lo = src, *hi = src + n;
	size_t i = i0;

#ifdef CODEC_SSE2
	for (; i + 16 <= i1; i += 16) {
		__m128i l = _mm_loadu_si128((const __m128i *)(lo + i));
		__m128i h = _mm_loadu_si128((const __m128i *)(hi + i));

		_mm_storeu_si128((__m128i *)(dst + 2 * i),
				 _mm_unpacklo_epi8(l, h));
		_mm_storeu_si128((__m128i *)(dst + 2 * i + 16),
				 _mm_unpackhi_epi8(l, h));
	}
#endif
	for (; i < i1; i++) {
		dst[2 * i] = lo[i];
		dst[2 * i + 1] = hi[i];
	}
}

static void shuffle4(uint8_t *dst, const uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		dst[i] = src[4 * i];
		dst[n + i] = src[4 * i + 1];
		dst[2 * n + i] = src[4 * i + 2];
		dst[3 * n + i] = src[4 * i + 3];
	}
}

static void unshuffle4(uint8_t *dst, const uint8_t *src, size_t n, size_t i0,
		       size_t i1)
{
	for (size_t i = i0; i < i1; i++) {
		dst[4 * i] = src[i];
		dst[4 * i + 1] = src[n + i];
		dst[4 * i + 2] = src[2 * n + i];
		dst[4 * i + 3] = src[3 * n + i];
	}
}

void codec_shuffle(void *dst, const void *src, size_t len, int elem)
{
	size_t n, body;

	/* the planes of elem-byte values (2 or 4); any other elem, and the
	 * bytes past the last whole value, are copied as they are */
	if (elem != 2 && elem != 4) {
		memcpy(dst, src, len);
		return;
	}
	n = len / (size_t)elem;
	body = n * (size_t)elem;
	(elem == 2 ? shuffle2 : shuffle4)(dst, src, n);
	memcpy((uint8_t *)dst + body, (const uint8_t *)src + body, len - body);
}

void codec_unshuffle_part(void *dst, const void *src, size_t len, int elem,
			  size_t from, size_t to)
{
	size_t n, body, e;

	if (elem != 2 && elem != 4) {
		memcpy((uint8_t *)dst + from, (const uint8_t *)src + from,
		       to - from);
		return;
	}
	n = len / (size_t)elem;
	body = n * (size_t)elem;
	e = to < body ? to : body;
	if (from < e)
		(elem == 2 ? unshuffle2 : unshuffle4)(dst, src, n,
						     from / (size_t)elem,
						     e / (size_t)elem);
	from = from > body ? from : body;
	if (from < to)
		memcpy((uint8_t *)dst + from, (const uint8_t *)src + from,
		       to - from);
}

void codec_unshuffle(void *dst, const void *src, size_t len, int elem)
{
	codec_unshuffle_part(dst, src, len, elem, 0, len);
}

/* ---------------------------------------------------------------- zstd */

uint64_t codec_ws_fed(const struct codec_ws *ws)
{
	return ws->fed;
}

/*
 * Would compressing len bytes at in not fit in cap (< len)? Decided on a
 * sample of CODEC_SAMPLE_BYTES from the middle, compressed alone: one
 * that does not save 1/32 of itself says the whole will not save what
 * the caller asks (a sixteenth: random bytes, already compressed data),
 * at a small part of the cost of trying it all. Chunks under four samples
 * are tried whole. A sample that fails for another reason decides
 * nothing.
 */
static bool sample_says_raw(struct codec_ws *ws, int level, const void *in,
			    size_t len, size_t cap)
{
	const size_t n = CODEC_SAMPLE_BYTES, bound = ZSTD_compressBound(n);
	size_t r;

	if (cap >= len || len < 4 * n)
		return false;
	if (!ws->sample && !(ws->sample = malloc(bound)))
		return false;
	r = ZSTD_compressCCtx(ws->cctx, ws->sample, bound,
			      (const uint8_t *)in + (len - n) / 2, n, level);
	ws->fed += n;
	return !ZSTD_isError(r) && r > n - n / 32;
}

long codec_compress(struct codec_ws *ws, int level, int shuffle,
		    const void *src, size_t len, void *dst, size_t cap)
{
	const void *in = src;
	size_t r;

	if (level < CODEC_LEVEL_MIN || level > CODEC_LEVEL_MAX ||
	    !codec_shuffle_ok(shuffle))
		return -EINVAL;
	if (shuffle) {
		void *s = ws_scratch(ws, len);

		if (!s)
			return -ENOMEM;
		codec_shuffle(s, src, len, shuffle);
		in = s;
	}
	if (sample_says_raw(ws, level, in, len, cap))
		return -E2BIG;
	{
		size_t pos = 0, out = 0;

		do {
			size_t n = len - pos < CODEC_FRAME_BYTES ? len - pos
								 : CODEC_FRAME_BYTES;

			r = ZSTD_compressCCtx(ws->cctx, (uint8_t *)dst + out,
					      cap - out, (const uint8_t *)in + pos,
					      n, level);
			ws->fed += n;
			if (ZSTD_isError(r)) {
				if (ZSTD_getErrorCode(r) ==
				    ZSTD_error_dstSize_tooSmall)
					return -E2BIG;
				if (ZSTD_getErrorCode(r) ==
				    ZSTD_error_memory_allocation)
					return -ENOMEM;
				return -EINVAL;
			}
			out += r;
			pos += n;
		} while (pos < len);
		return (long)out;
	}
}

void *codec_ws_scratch(struct codec_ws *ws, size_t len)
{
	return ws_scratch(ws, len);
}

long codec_frames(const void *src, size_t slen, size_t raw_len,
		  struct codec_frame *f, size_t max)
{
	size_t off = 0, dst = 0, k = 0;

	while (off < slen) {
		size_t fsz = ZSTD_findFrameCompressedSize((const uint8_t *)src + off,
							  slen - off);
		unsigned long long fcs;

		if (ZSTD_isError(fsz) || k == max)
			return -EBADMSG;
		fcs = ZSTD_getFrameContentSize((const uint8_t *)src + off, fsz);
		if (fcs == ZSTD_CONTENTSIZE_UNKNOWN ||
		    fcs == ZSTD_CONTENTSIZE_ERROR || fcs > raw_len - dst)
			return -EBADMSG;
		f[k].src_off = off;
		f[k].src_len = fsz;
		f[k].dst_off = dst;
		f[k].dst_len = (size_t)fcs;
		k++;
		off += fsz;
		dst += (size_t)fcs;
	}
	if (dst != raw_len || k == 0)
		return -EBADMSG;
	return (long)k;
}

int codec_decode_frame(struct codec_ws *ws, const void *src, size_t slen,
		       void *dst, size_t dlen)
{
	size_t r = ZSTD_decompressDCtx(ws->dctx, dst, dlen, src, slen);

	if (ZSTD_isError(r)) {
		if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
			return -ENOMEM;
		return -EBADMSG;
	}
	return r == dlen ? 0 : -EBADMSG;
}

int codec_decompress(struct codec_ws *ws, int codec, int shuffle,
		     const void *src, size_t slen, void *dst, size_t raw_len)
{
	unsigned long long fcs;
	void *out = dst;
	size_t r;

	if (!codec_shuffle_ok(shuffle))
		return -EINVAL;
	if (codec == CODEC_NONE) {
		if (slen != raw_len)
			return -EBADMSG;
		memcpy(dst, src, raw_len);
		return 0;
	}
	if (codec != CODEC_ZSTD)
		return -EINVAL;
	if (shuffle) {
		out = ws_scratch(ws, raw_len);
		if (!out)
			return -ENOMEM;
	}
	/* the frames must announce exactly raw_len bytes in all: fewer is as
	 * wrong as a frame that fails */
	{
		size_t off = 0, dst_off = 0;

		while (off < slen) {
			size_t fsz = ZSTD_findFrameCompressedSize(
				(const uint8_t *)src + off, slen - off);
			int rc;

			if (ZSTD_isError(fsz))
				return -EBADMSG;
			fcs = ZSTD_getFrameContentSize((const uint8_t *)src + off,
						       fsz);
			if (fcs == ZSTD_CONTENTSIZE_UNKNOWN ||
			    fcs == ZSTD_CONTENTSIZE_ERROR ||
			    fcs > raw_len - dst_off)
				return -EBADMSG;
			rc = codec_decode_frame(ws, (const uint8_t *)src + off,
						fsz, (uint8_t *)out + dst_off,
						(size_t)fcs);
			if (rc)
				return rc;
			off += fsz;
			dst_off += (size_t)fcs;
		}
		if (dst_off != raw_len || slen == 0)
			return -EBADMSG;
	}
	(void)r;
	if (shuffle)
		codec_unshuffle(dst, out, raw_len, shuffle);
	return 0;
}

/* codec_unshuffle in pieces of CODEC_PIECE_BYTES of dst, each given to
 * each(arg) as soon as it is written (hashed while in the cache). */
#define CODEC_PIECE_BYTES (64u << 10)
static void unshuffle_pieces(uint8_t *dst, const uint8_t *src, size_t len,
			     int elem,
			     void (*each)(void *arg, const void *p, size_t n),
			     void *arg)
{
	/* a multiple of 2 and 4: codec_unshuffle_part's parts start on a
	 * whole value */
	const size_t step = CODEC_PIECE_BYTES;

	for (size_t from = 0; from < len; from += step) {
		size_t to = len - from < step ? len : from + step;

		codec_unshuffle_part(dst, src, len, elem, from, to);
		each(arg, dst + from, to - from);
	}
}

int codec_dec_begin(struct codec_ws *ws, int shuffle, void *dst,
		    size_t raw_len)
{
	if (!codec_shuffle_ok(shuffle))
		return -EINVAL;
	ws->d_dst = ws->d_out = dst;
	ws->d_raw = raw_len;
	ws->d_pos = 0;
	ws->d_in = 0;
	ws->d_shuffle = shuffle;
	if (shuffle && !(ws->d_out = ws_scratch(ws, raw_len ? raw_len : 1)))
		return -ENOMEM;
	return 0;
}

int codec_dec_feed(struct codec_ws *ws, const void *payload, size_t avail,
		   bool last, const void **out, size_t *outlen)
{
	const uint8_t *src = payload;
	size_t before = ws->d_pos;

	*out = (uint8_t *)ws->d_out + before;
	*outlen = 0;
	/* every frame that is whole: decoded in one pass straight into the
	 * output (no copy through zstd's stream buffers), each announcing
	 * its size, all of them exactly raw_len bytes (codec_decompress) */
	while (ws->d_in < avail) {
		size_t fsz = ZSTD_findFrameCompressedSize(src + ws->d_in,
							  avail - ws->d_in);
		unsigned long long fcs;
		int rc;

		if (ZSTD_isError(fsz)) {
			if (!last &&
			    ZSTD_getErrorCode(fsz) == ZSTD_error_srcSize_wrong)
				break; /* the rest of the frame is coming */
			return -EBADMSG;
		}
		fcs = ZSTD_getFrameContentSize(src + ws->d_in, fsz);
		if (fcs == ZSTD_CONTENTSIZE_UNKNOWN ||
		    fcs == ZSTD_CONTENTSIZE_ERROR ||
		    fcs > ws->d_raw - ws->d_pos)
			return -EBADMSG;
		rc = codec_decode_frame(ws, src + ws->d_in, fsz,
					(uint8_t *)ws->d_out + ws->d_pos,
					(size_t)fcs);
		if (rc)
			return rc;
		ws->d_in += fsz;
		ws->d_pos += (size_t)fcs;
	}
	if (!ws->d_shuffle)
		*outlen = ws->d_pos - before;
	return 0;
}

int codec_dec_end(struct codec_ws *ws,
		  void (*each)(void *arg, const void *p, size_t n), void *arg)
{
	/* every frame decoded (feed's last), raw_len in all */
	if (ws->d_pos != ws->d_raw || !ws->d_in)
		return -EBADMSG;
	if (ws->d_shuffle && each)
		unshuffle_pieces(ws->d_dst, ws->d_out, ws->d_raw,
				 ws->d_shuffle, each, arg);
	else if (ws->d_shuffle)
		codec_unshuffle(ws->d_dst, ws->d_out, ws->d_raw, ws->d_shuffle);
	return 0;
}

int codec_parse(const char *s, int *level)
{
	char *end;
	long v;

	if (!s || !level)
		return -EINVAL;
	if (!strcmp(s, "none")) {
		*level = 0;
		return 0;
	}
	if (!strcmp(s, "zstd")) {
		*level = CODEC_LEVEL_DEFAULT;
		return 0;
	}
	if (strncmp(s, "zstd:", 5) || !s[5])
		return -EINVAL;
	v = strtol(s + 5, &end, 10);
	if (*end || v < CODEC_LEVEL_MIN || v > CODEC_LEVEL_MAX)
		return -EINVAL;
	*level = (int)v;
	return 0;
}
