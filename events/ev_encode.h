/*
 * ev_encode.h - the EventBatch msgpack codec (msgpack-c), both directions:
 * the publisher encodes, kvfsctl events / score and the tests decode.
 * Internal to events/ and mount/.
 */
#ifndef KVFS_EV_ENCODE_H
#define KVFS_EV_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "events/events.h"

/*
 * ev_encode_batch - appends the EventBatch [ts, [n events], nil] to buf
 * (cleared first). Events are maps or arrays per fmt, hashes per hash.
 * 0 or -ENOMEM.
 */
int ev_encode_batch(msgpack_sbuffer *buf, double ts,
		    const struct ev_event *ev, size_t n, enum ev_format fmt,
		    enum ev_hash hash);

/* The largest number of hashes ev_decode hands over per event. */
#define EV_DEC_HASHES_MAX 1024

/* One decoded event. Hashes are reduced to 64 bits the way llm-d does
 * (an integer as is; bytes: the last 8, big-endian); raw keeps the bytes
 * of bin hashes (up to 16) for display. */
struct ev_dec_event {
	enum ev_kind kind;
	bool map_form;        /* a map with "type", else an array */
	size_t nhashes;
	uint64_t hashes[EV_DEC_HASHES_MAX];
	uint8_t raw[EV_DEC_HASHES_MAX][16];
	uint8_t rawlen[EV_DEC_HASHES_MAX]; /* 0: the hash was an integer */
	bool has_parent;
	uint64_t parent;
	uint8_t parent_raw[16];
	uint8_t parent_rawlen;
	int64_t block_size;
	char medium[32]; /* "" when nil */
};

/*
 * ev_decode_batch - decodes an EventBatch payload (an array [ts, events,
 * dp_rank], or a map with "ts" and "events" as vLLM's newest versions
 * send) and calls fn for each
 * event (ev is scratch memory reused between calls). ts gets the batch's
 * timestamp. 0, or -EBADMSG (not an EventBatch, an unknown tag, a field of
 * the wrong type), -ENOMEM. Events with more than EV_DEC_HASHES_MAX hashes
 * give -E2BIG.
 */
int ev_decode_batch(const void *data, size_t len, double *ts,
		    int (*fn)(void *arg, const struct ev_dec_event *ev),
		    void *arg);

/* The tag of kind ("BlockStored"...), NULL for a bad kind. */
const char *ev_kind_name(enum ev_kind k);

#endif /* KVFS_EV_ENCODE_H */
