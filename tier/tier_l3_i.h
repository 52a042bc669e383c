/*
 * tier_l3_i.h - inside the engine's side of L3: what tier_l3.c and
 * tier_l3_rx.c (the receiving end of a promotion's GET) share.
 */
#ifndef KVFS_TIER_L3_I_H
#define KVFS_TIER_L3_I_H

#include <stdbool.h>
#include <stdint.h>

#include "kvfs.h"
#include "tier/l3/l3.h"
#include "tier/record/record.h"

struct tier;
struct tier_wr;
struct codec_ws;

/* A workspace (pooled: a promotion's buffers are not faulted in again
 * for each chunk): the codec's, the payload of a zstd record being
 * received, the raw checksum computed as bytes arrive. */
struct tl3_ws {
	struct tl3_ws *next;
	struct codec_ws *ws;
	uint8_t *stage;           /* a zstd payload as it arrives */
	size_t stage_cap;
	struct kvrec_sum_state *sum;
};

/*
 * A promotion's receiving end of its GET (the sink of l3_get_into; see
 * the top of tier_l3.c for the checks). The header comes first, into
 * hdr, and is checked as soon as it is in; then L1 room is taken and the
 * payload of a raw record is received straight into the extent, that of
 * a zstd record into the workspace's stage and decoded into the extent
 * frame by frame as they arrive; raw_sum is computed over the raw bytes as
 * they land. Nothing is published before all of it passed. A value
 * found bad is received whole all the same (in keep when its header is
 * bad, else in the extent or the stage) for l3_del_bad to compare.
 */
struct tl3_rx {
	struct tier *t;
	uint64_t salt;          /* the store's hdr_sum seed */
	const char *name;
	const struct kvfs_key *key;
	uint32_t ns;
	uint64_t len, got;      /* the value's length, bytes received */
	union {
		struct kvrec_hdr h;
		uint8_t b[KVREC_HDR_BYTES];
	} hdr;
	struct tl3_ws *ws;      /* stage, codec, sum */
	struct tier_wr *w;      /* once the header passed */
	bool locked;            /* w->mu held: the extent is ours */
	uint8_t *dst;           /* raw_len bytes: the extent, or tmp */
	void *tmp;              /* a device arena: a host buffer */
	bool bad;               /* a bad value (received whole) */
	uint8_t *keep;          /* a value whose header is bad, whole */
	int err;                /* why the transfer stopped */
};

/* The sink of l3_get_into for rx (t, name, key, ns, salt and ws set, the
 * rest zero). */
struct l3_sink tl3_rx_sink(struct tl3_rx *rx);

/* Every byte is in: the last checks (the frames whole, raw_sum), then
 * the bytes are the writer's (rx->w, to publish). 0, -EBADMSG (rx->bad),
 * -ENOMEM... */
int tl3_rx_finish(struct tl3_rx *rx);

/* The whole bad value, for l3_del_bad (rx->len bytes; rx owns it): keep,
 * or the header and the payload where it was received. NULL when it was
 * not received whole or out of memory. */
uint8_t *tl3_rx_value(struct tl3_rx *rx);

/* Undoes what the receive holds (the extent's lock, buffers); the writer
 * itself is the caller's to abort or publish. */
void tl3_rx_end(struct tl3_rx *rx);

#endif /* KVFS_TIER_L3_I_H */
