/*
 * tier_l3_rx.c - the receiving end of a promotion's GET (tier_l3_i.h):
 * the record's header checked as soon as it is in, then the payload of a
 * raw record received straight into the L1 extent, that of a zstd record
 * decoded a frame at a time as it arrives, the raw checksum computed as
 * the raw bytes land; a bad value still received whole for l3_del_bad.
 * tier_l3.c's tl3_promote drives it (and publishes).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tier/l3/l3.h"
#include "tier/record/codec.h"
#include "tier/record/record.h"
#include "tier/tier_i.h"
#include "tier/tier_l3_i.h"

#define TL3_RX_STEP (256u << 10) /* bytes received between two hash or
				  * decode steps: still in the cache */

/* The header's checks, once its bytes are in: 0, -EBADMSG (a bad value),
 * or -EFBIG (a good record of a chunk larger than this node's
 * max_chunk: a miss here, but not bad, nor deleted: that node and its
 * peers read it). */
static int check_header(const struct tl3_rx *rx)
{
	const struct kvrec_hdr *h = &rx->hdr.h;
	uint64_t stored = rx->len - KVREC_HDR_BYTES;

	/* kvrec_hdr_check: a raw record's stored_len is its raw_len, so
	 * the extent (raw_len) takes the payload exactly; the payload is
	 * checked by raw_sum over the raw bytes (record.h allows it when
	 * they are computed anyway: one pass instead of two) */
	if (kvrec_hdr_check(h, rx->salt, stored) ||
	    h->stored_len != stored || strcmp(h->ns, rx->name) ||
	    memcmp(h->key, rx->key->b, sizeof(h->key)) ||
	    (h->codec == CODEC_NONE && h->stored_sum != h->raw_sum))
		return -EBADMSG;
	if (h->raw_len > rx->t->cfg.max_chunk)
		return -EFBIG;
	return 0;
}

/* The header is bad: the rest of the value goes to keep (l3_del_bad
 * compares all of it), unless it is larger than any record this node
 * takes (then the transfer stops: a miss, not deleted). */
static int rx_keep(struct tl3_rx *rx)
{
	size_t have = rx->got < KVREC_HDR_BYTES ? rx->got : KVREC_HDR_BYTES;

	rx->bad = true;
	if (rx->len > KVREC_HDR_BYTES + rx->t->cfg.max_chunk)
		return rx->err = -EBADMSG;
	rx->keep = malloc(rx->len ? rx->len : 1);
	if (!rx->keep)
		return rx->err = -ENOMEM;
	memcpy(rx->keep, rx->hdr.b, have);
	return 0;
}

static int rx_begin(void *arg, uint64_t len)
{
	struct tl3_rx *rx = arg;

	rx->len = len;
	return len < KVREC_HDR_BYTES ? rx_keep(rx) : 0;
}

/* The header is in: checked, then L1 room for raw_len (the extent held
 * until the end), the stage for a zstd payload. */
static int rx_header(struct tl3_rx *rx)
{
	const struct kvrec_hdr *h = &rx->hdr.h;
	struct tier *t = rx->t;
	struct tl3_ws *ws = rx->ws;
	int rc = check_header(rx);

	if (rc == -EBADMSG)
		return rx_keep(rx);
	if (!rc)
		rc = tier_wr_begin(t, rx->ns, rx->key, h->raw_len, &rx->w);
	if (rc) {
		rx->w = NULL;
		return rx->err = rc;
	}
	if (h->codec != CODEC_NONE && ws->stage_cap < h->stored_len) {
		free(ws->stage);
		ws->stage_cap = 0;
		ws->stage = malloc(h->stored_len);
		if (!ws->stage)
			return rx->err = -ENOMEM;
		ws->stage_cap = h->stored_len;
	}
	if (t->arena.host && rx->w->cap >= h->raw_len) {
		rx->dst = (uint8_t *)t->arena.host + rx->w->off;
	} else {
		rx->dst = rx->tmp = malloc(h->raw_len ? h->raw_len : 1);
		if (!rx->tmp)
			return rx->err = -ENOMEM;
	}
	pthread_mutex_lock(&rx->w->mu); /* the writer's extent is ours */
	rx->locked = true;
	kvrec_sum_reset(ws->sum, 0);
	if (h->codec != CODEC_NONE) {
		rc = codec_dec_begin(ws->ws, h->shuffle, rx->dst, h->raw_len);
		if (rc == -ENOMEM)
			return rx->err = rc;
		rx->bad = rc != 0;
	}
	return 0;
}

static int rx_room(void *arg, void **buf, size_t *cap)
{
	struct tl3_rx *rx = arg;
	uint64_t left = rx->len - rx->got;

	if (rx->keep) {
		*buf = rx->keep + rx->got;
		*cap = left;
	} else if (rx->got < KVREC_HDR_BYTES) {
		*buf = rx->hdr.b + rx->got; /* the header alone first */
		*cap = KVREC_HDR_BYTES - rx->got;
	} else {
		uint64_t off = rx->got - KVREC_HDR_BYTES;

		*buf = (rx->hdr.h.codec == CODEC_NONE ? rx->dst
						       : rx->ws->stage) + off;
		*cap = left < TL3_RX_STEP ? left : TL3_RX_STEP;
	}
	return 0;
}

static int rx_got(void *arg, size_t n)
{
	struct tl3_rx *rx = arg;
	bool in_hdr = rx->got < KVREC_HDR_BYTES;
	uint64_t off = in_hdr ? 0 : rx->got - KVREC_HDR_BYTES;
	const void *out;
	size_t outlen;
	int rc;

	rx->got += n;
	if (rx->keep)
		return 0;
	if (in_hdr)
		return rx->got == KVREC_HDR_BYTES ? rx_header(rx) : 0;
	if (rx->bad)
		return 0; /* received whole, for l3_del_bad */
	if (rx->hdr.h.codec == CODEC_NONE) {
		kvrec_sum_add(rx->ws->sum, rx->dst + off, n);
		return 0;
	}
	rc = codec_dec_feed(rx->ws->ws, rx->ws->stage, off + n,
			    rx->got == rx->len, &out, &outlen);
	if (rc == -ENOMEM)
		return rx->err = rc;
	rx->bad = rc != 0;
	if (!rc && outlen)
		kvrec_sum_add(rx->ws->sum, out, outlen);
	return 0;
}

static void sum_piece(void *arg, const void *p, size_t n)
{
	kvrec_sum_add(arg, p, n);
}

/* tier_l3_i.h */
int tl3_rx_finish(struct tl3_rx *rx)
{
	const struct kvrec_hdr *h = &rx->hdr.h;
	int rc = 0;

	if (rx->bad || !rx->w)
		return -EBADMSG;
	if (h->codec != CODEC_NONE) /* planes: hashed as unshuffled */
		rc = codec_dec_end(rx->ws->ws, h->shuffle ? sum_piece : NULL,
				   rx->ws->sum);
	if (rc || kvrec_sum_end(rx->ws->sum) != h->raw_sum) {
		rx->bad = true;
		return -EBADMSG;
	}
	if (!rx->tmp)
		rx->w->size = h->raw_len;
	pthread_mutex_unlock(&rx->w->mu);
	rx->locked = false;
	return rx->tmp ? tier_wr_pwrite(rx->t, rx->w, rx->tmp, h->raw_len, 0)
		       : 0;
}

/* tier_l3_i.h */
uint8_t *tl3_rx_value(struct tl3_rx *rx)
{
	uint8_t *v;

	if (rx->keep || rx->got != rx->len || rx->len < KVREC_HDR_BYTES)
		return rx->keep;
	v = malloc(rx->len);
	if (!v)
		return NULL;
	memcpy(v, rx->hdr.b, KVREC_HDR_BYTES);
	memcpy(v + KVREC_HDR_BYTES,
	       rx->hdr.h.codec == CODEC_NONE ? rx->dst : rx->ws->stage,
	       rx->len - KVREC_HDR_BYTES);
	rx->keep = v;
	return v;
}

/* tier_l3_i.h */
void tl3_rx_end(struct tl3_rx *rx)
{
	if (rx->locked)
		pthread_mutex_unlock(&rx->w->mu);
	rx->locked = false;
	free(rx->tmp);
	free(rx->keep);
	rx->tmp = NULL;
	rx->keep = NULL;
}

struct l3_sink tl3_rx_sink(struct tl3_rx *rx)
{
	struct l3_sink s = { rx_begin, rx_room, rx_got, rx };

	return s;
}
