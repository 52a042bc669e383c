/*
 * record.c - building and checking the self-checking chunk record of
 * record.h (header fields, checksums); nothing about where records live.
 */
#include "tier/record/record.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "hash/xxh_fast.h"
#include "tier/record/codec.h"

uint64_t kvrec_sum(const void *p, size_t len, uint64_t seed)
{
	return xxh_fast_seed(p, len, seed);
}

struct kvrec_sum_state {
	XXH3_state_t x;
};

struct kvrec_sum_state *kvrec_sum_new(void)
{
	/* XXH3_state_t wants 64-byte alignment */
	struct kvrec_sum_state *s = aligned_alloc(64, sizeof(*s));

	if (s)
		XXH3_INITSTATE(&s->x);
	return s;
}

void kvrec_sum_reset(struct kvrec_sum_state *s, uint64_t seed)
{
	XXH3_64bits_reset_withSeed(&s->x, seed);
}

void kvrec_sum_add(struct kvrec_sum_state *s, const void *p, size_t len)
{
	xxh_fast_update(&s->x, p, len);
}

uint64_t kvrec_sum_end(const struct kvrec_sum_state *s)
{
	return XXH3_64bits_digest(&s->x);
}

void kvrec_sum_free(struct kvrec_sum_state *s)
{
	free(s);
}

int kvrec_hdr_build(struct kvrec_hdr *h, const struct kvrec_desc *d,
		    uint64_t salt)
{
	size_t nslen = d->ns ? strnlen(d->ns, KVFS_NS_NAME_MAX + 1) : 0;

	if (nslen == 0 || nslen > KVFS_NS_NAME_MAX)
		return -EINVAL;
	memset(h, 0, sizeof(*h));
	h->magic = KVREC_MAGIC;
	h->version = KVREC_VERSION;
	h->codec = d->codec;
	h->shuffle = d->shuffle;
	h->hdr_len = sizeof(*h);
	h->seq = d->seq;
	h->raw_len = d->raw_len;
	h->stored_len = d->stored_len;
	h->raw_sum = d->raw_sum;
	h->stored_sum = d->stored_sum;
	memcpy(h->key, d->key->b, sizeof(h->key));
	memcpy(h->ns, d->ns, nslen);
	if (d->attr) {
		h->flags = KVREC_F_ATTR;
		h->mode = d->attr->mode & 07777;
		h->uid = d->attr->uid;
		h->gid = d->attr->gid;
		h->mtime_nsec = d->attr->mtime_nsec % 1000000000u;
		h->mtime_lo = (uint32_t)(uint64_t)d->attr->mtime_sec;
		h->mtime_hi = (uint32_t)((uint64_t)d->attr->mtime_sec >> 32);
	}
	kvrec_hdr_set_link(h, d->parent, d->depth, salt);
	return 0;
}

void kvrec_hdr_set_link(struct kvrec_hdr *h, const struct kvfs_key *parent,
			uint32_t depth, uint64_t salt)
{
	bool attr = h->version >= 3 && (h->flags & KVREC_F_ATTR);

	/* without a link or attributes, version 1: what older readers take */
	h->version = attr ? 3 : parent || depth ? 2 : KVREC_VERSION_MIN;
	h->flags = (parent ? KVREC_F_PARENT : 0) | (attr ? KVREC_F_ATTR : 0);
	memset(h->parent, 0, sizeof(h->parent));
	if (parent)
		memcpy(h->parent, parent->b, sizeof(h->parent));
	h->depth = depth;
	h->hdr_sum = kvrec_sum(h, offsetof(struct kvrec_hdr, hdr_sum), salt);
}

int kvrec_hdr_check(const struct kvrec_hdr *h, uint64_t salt,
		    uint64_t max_stored)
{
	if (h->magic != KVREC_MAGIC || h->version < KVREC_VERSION_MIN ||
	    h->version > KVREC_VERSION || h->hdr_len != sizeof(*h))
		return -EBADMSG;
	if (h->version >= 2 &&
	    (h->flags & ~(KVREC_F_PARENT |
			  (h->version >= 3 ? KVREC_F_ATTR : 0))))
		return -EBADMSG;
	if (h->version >= 3 && (h->flags & KVREC_F_ATTR) &&
	    (h->mode > 07777 || h->mtime_nsec >= 1000000000u))
		return -EBADMSG;
	if (h->hdr_sum != kvrec_sum(h, offsetof(struct kvrec_hdr, hdr_sum),
				    salt))
		return -EBADMSG;
	if (h->codec == CODEC_NONE) {
		if (h->stored_len != h->raw_len || h->shuffle)
			return -EBADMSG;
	} else if (h->codec != CODEC_ZSTD || !codec_shuffle_ok(h->shuffle)) {
		return -EBADMSG;
	}
	if (!h->ns[0] || memchr(h->ns, 0, sizeof(h->ns)) == NULL)
		return -EBADMSG;
	if (h->stored_len > max_stored || h->raw_len > (1ull << 40))
		return -EBADMSG;
	return 0;
}

int kvrec_payload_check(const struct kvrec_hdr *h, const void *payload)
{
	return kvrec_sum(payload, h->stored_len, 0) == h->stored_sum ?
	       0 : -EBADMSG;
}

int kvrec_verify(const void *buf, size_t len, uint64_t salt,
		 uint64_t max_stored)
{
	const struct kvrec_hdr *h = buf;
	int rc;

	if (len < sizeof(*h))
		return -EMSGSIZE;
	rc = kvrec_hdr_check(h, salt, max_stored);
	if (rc)
		return rc;
	if (h->stored_len > len - sizeof(*h))
		return -EMSGSIZE;
	return kvrec_payload_check(h, (const uint8_t *)buf + sizeof(*h));
}
