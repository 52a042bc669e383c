/*
 * l2_rec.c - building a record from a chunk (compress, fill the header
 * of record.h) and handing it to the I/O thread: l2_build, l2_append,
 * l2_flush, and the accessors of a built record.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tier/l2/l2_i.h"

/* ----------------------------------------------------------- records */

int l2_build(struct l2 *l2, const char *ns, const struct kvfs_key *key,
	     const void *raw, size_t len, int level, int shuffle,
	     struct l2_rec **out)
{
	uint64_t max_bytes = l2_record_bytes(len);
	struct kvrec_hdr *h;
	struct l2_rec *rec;
	size_t nslen, cap;
	long stored = -E2BIG;
	uint8_t *payload;
	struct kvrec_desc desc;
	uint8_t codec;

	if (!ns || !key || (!raw && len) || !out || !codec_shuffle_ok(shuffle) ||
	    level < 0 || level > CODEC_LEVEL_MAX)
		return -EINVAL;
	nslen = strnlen(ns, KVFS_NS_NAME_MAX + 1);
	if (nslen == 0 || nslen > KVFS_NS_NAME_MAX)
		return -EINVAL;
	if (max_bytes > l2->seg_size)
		return -EFBIG;
	rec = calloc(1, sizeof(*rec));
	if (!rec)
		return -ENOMEM;
	rec->hdr = l2_buf_get(l2, max_bytes, &rec->cap);
	if (!rec->hdr) {
		free(rec);
		return -ENOMEM;
	}
	h = rec->hdr;
	memset(h, 0, sizeof(*h));
	payload = (uint8_t *)h + sizeof(*h);

	/* Worth compressing only if it saves 1/16 and at least one block. */
	cap = len - len / 16;
	if (max_bytes / L2_ALIGN > 1 &&
	    max_bytes - L2_ALIGN - sizeof(*h) < cap)
		cap = max_bytes - L2_ALIGN - sizeof(*h);
	if (level > 0 && len >= 64 && max_bytes > L2_ALIGN) {
		struct codec_ws *ws = l2_ws_get(l2);

		if (!ws) {
			l2_rec_free(l2, rec);
			return -ENOMEM;
		}
		stored = codec_compress(ws, level, shuffle, raw, len, payload,
					cap);
		l2_ws_put(l2, ws);
		if (stored < 0 && stored != -E2BIG) {
			l2_rec_free(l2, rec);
			return (int)stored;
		}
	}
	if (stored >= 0) {
		codec = CODEC_ZSTD;
	} else {
		if (len) /* an empty chunk may come with raw == NULL */
			memcpy(payload, raw, len);
		stored = (long)len;
		codec = CODEC_NONE;
		shuffle = 0;
	}
	rec->nblk = (uint32_t)(l2_record_bytes((uint64_t)stored) / L2_ALIGN);
	memset(payload + stored, 0,
	       (size_t)rec->nblk * L2_ALIGN - sizeof(*h) - (size_t)stored);

	desc = (struct kvrec_desc){
		.ns = ns,
		.key = key,
		.seq = atomic_fetch_add(&l2->next_seq, 1),
		.raw_len = len,
		.stored_len = (uint64_t)stored,
		.codec = codec,
		.shuffle = (uint8_t)shuffle,
		.raw_sum = kvrec_sum(raw, len, 0),
		.stored_sum = kvrec_sum(payload, (size_t)stored, 0),
	};
	kvrec_hdr_build(h, &desc, l2->salt); /* ns checked above */
	*out = rec;
	return 0;
}

void l2_rec_info(const struct l2_rec *rec, struct l2_rec_info *info)
{
	const struct kvrec_hdr *h = rec->hdr;

	memset(info, 0, sizeof(*info));
	info->loc = rec->loc;
	info->ns = h->ns;
	memcpy(info->key.b, h->key, sizeof(info->key.b));
	info->seq = h->seq;
	info->raw_len = h->raw_len;
	info->stored_len = h->stored_len;
	info->raw_sum = h->raw_sum;
	info->codec = h->codec;
	info->shuffle = h->shuffle;
	info->has_parent = kvrec_hdr_link(h, &info->parent, &info->depth);
}

void l2_rec_set_link(struct l2 *l2, struct l2_rec *rec,
		     const struct kvfs_key *parent, uint32_t depth)
{
	kvrec_hdr_set_link(rec->hdr, parent, depth, l2->salt);
}

int l2_rec_decode(struct l2 *l2, const struct l2_rec *rec, void *dst,
		  size_t len)
{
	if (!rec || rec->hdr->raw_len != len)
		return -EINVAL;
	return l2_decode(l2, rec->hdr, dst, len);
}

void l2_rec_free(struct l2 *l2, struct l2_rec *rec)
{
	if (!rec)
		return;
	l2_buf_put(l2, rec->hdr, rec->cap);
	free(rec);
}

int l2_append(struct l2 *l2, struct l2_rec *rec, l2_done_fn done, void *arg)
{
	uint64_t bytes = (uint64_t)rec->nblk * L2_ALIGN;
	struct l2_req *r;

	pthread_mutex_lock(&l2->lock);
	if (l2->closing) {
		pthread_mutex_unlock(&l2->lock);
		return -ESHUTDOWN;
	}
	if (l2->queued_bytes && l2->queued_bytes + bytes > l2->cfg.max_queue) {
		pthread_mutex_unlock(&l2->lock);
		return -EAGAIN;
	}
	l2->queued_bytes += bytes;
	l2->queued_count++;
	pthread_mutex_unlock(&l2->lock);

	r = calloc(1, sizeof(*r));
	if (!r) {
		pthread_mutex_lock(&l2->lock);
		l2->queued_bytes -= bytes;
		if (--l2->queued_count == 0)
			pthread_cond_broadcast(&l2->idle_cond);
		pthread_mutex_unlock(&l2->lock);
		return -ENOMEM;
	}
	r->op = REQ_WRITE;
	r->rec = rec;
	r->done = done;
	r->arg = arg;
	r->buf = rec->hdr;
	r->len = bytes;
	l2_io_submit(l2, r);
	return 0;
}

void l2_flush(struct l2 *l2)
{
	pthread_mutex_lock(&l2->lock);
	while (l2->queued_count)
		pthread_cond_wait(&l2->idle_cond, &l2->lock);
	pthread_mutex_unlock(&l2->lock);
}
