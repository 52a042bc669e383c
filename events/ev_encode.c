/*
 * ev_encode.c - EventBatch <-> msgpack, with msgpack-c.
 *
 * Field lists follow vLLM's vllm/distributed/kv_events.py (msgspec structs
 * with tag=True): the map form is {"type": tag, field: value...} in
 * declaration order; the array form is [tag, value...] as llm-d's
 * kvevents decoder reads it (BlockStored: block_hashes, parent_block_hash,
 * token_ids, block_size, lora_id, medium, lora_name; BlockRemoved:
 * block_hashes, medium). kvfs knows no token ids (an empty list), no LoRA
 * (nil), and sends no data_parallel_rank (nil).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "events/ev_encode.h"

static const char *const medium_names[EV_MEDIUM_COUNT] = {
	[EV_MEDIUM_GPU] = KVFS_EV_MEDIUM_GPU,
	[EV_MEDIUM_CPU] = KVFS_EV_MEDIUM_CPU,
	[EV_MEDIUM_DISK] = KVFS_EV_MEDIUM_DISK,
	[EV_MEDIUM_REMOTE] = KVFS_EV_MEDIUM_REMOTE,
};

const char *ev_medium_name(enum ev_medium m)
{
	return (unsigned)m < EV_MEDIUM_COUNT ? medium_names[m] : NULL;
}

int ev_medium_parse(const char *name)
{
	for (int i = 0; i < EV_MEDIUM_COUNT; i++)
		if (!strcasecmp(name, medium_names[i]))
			return i;
	return -EINVAL;
}

const char *ev_kind_name(enum ev_kind k)
{
	switch (k) {
	case EV_STORED: return "BlockStored";
	case EV_REMOVED: return "BlockRemoved";
	case EV_CLEARED: return "AllBlocksCleared";
	}
	return NULL;
}

/* ================================================================ encode */

static int pack_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);

	return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, s, n);
}

static int pack_hash(msgpack_packer *pk, const struct kvfs_key *k,
		     enum ev_hash hash)
{
	if (hash == EV_HASH_BYTES)
		return msgpack_pack_bin(pk, sizeof(k->b)) ||
		       msgpack_pack_bin_body(pk, k->b, sizeof(k->b));
	uint64_t v = 0;
	for (int i = 8; i < 16; i++)
		v = v << 8 | k->b[i];
	return msgpack_pack_uint64(pk, v);
}

/* A field's key, in the map form only. */
static int pack_key(msgpack_packer *pk, bool map, const char *name)
{
	return map ? pack_str(pk, name) : 0;
}

static int pack_event(msgpack_packer *pk, const struct ev_event *e,
		      enum ev_format fmt, enum ev_hash hash)
{
	bool map = fmt == EV_FORMAT_MAP;
	const char *tag = ev_kind_name(e->kind);
	size_t nfields = e->kind == EV_STORED ? 7 : e->kind == EV_REMOVED ? 2 : 0;
	int rc;

	if (!tag)
		return -EINVAL;
	rc = map ? msgpack_pack_map(pk, nfields + 1)
		 : msgpack_pack_array(pk, nfields + 1);
	if (map)
		rc = rc || pack_str(pk, "type");
	rc = rc || pack_str(pk, tag);
	if (e->kind == EV_CLEARED)
		return rc ? -ENOMEM : 0;

	rc = rc || pack_key(pk, map, "block_hashes") ||
	     msgpack_pack_array(pk, 1) || pack_hash(pk, &e->key, hash);
	if (e->kind == EV_STORED) {
		rc = rc || pack_key(pk, map, "parent_block_hash") ||
		     (e->has_parent ? pack_hash(pk, &e->parent, hash)
				    : msgpack_pack_nil(pk));
		rc = rc || pack_key(pk, map, "token_ids") ||
		     msgpack_pack_array(pk, 0);
		rc = rc || pack_key(pk, map, "block_size") ||
		     msgpack_pack_uint32(pk, e->block_size);
		rc = rc || pack_key(pk, map, "lora_id") || msgpack_pack_nil(pk);
	}
	rc = rc || pack_key(pk, map, "medium") ||
	     pack_str(pk, ev_medium_name(e->medium) ? ev_medium_name(e->medium)
						     : "");
	if (e->kind == EV_STORED)
		rc = rc || pack_key(pk, map, "lora_name") ||
		     msgpack_pack_nil(pk);
	return rc ? -ENOMEM : 0;
}

int ev_encode_batch(msgpack_sbuffer *buf, double ts,
		    const struct ev_event *ev, size_t n, enum ev_format fmt,
		    enum ev_hash hash)
{
	msgpack_packer pk;

	msgpack_sbuffer_clear(buf);
	msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
	if (msgpack_pack_array(&pk, 3) || msgpack_pack_double(&pk, ts) ||
	    msgpack_pack_array(&pk, n))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int rc = pack_event(&pk, &ev[i], fmt, hash);
		if (rc)
			return rc;
	}
	return msgpack_pack_nil(&pk) ? -ENOMEM : 0;
}

/* ================================================================ decode */

static bool str_is(const msgpack_object *o, const char *s)
{
	size_t n = strlen(s);

	return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
	       !memcmp(o->via.str.ptr, s, n);
}

/* A hash: a non-negative integer, or bytes reduced as llm-d does. */
static int dec_hash(const msgpack_object *o, uint64_t *h, uint8_t raw[16],
		    uint8_t *rawlen)
{
	*rawlen = 0;
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		*h = o->via.u64;
		return 0;
	}
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*h = (uint64_t)o->via.i64;
		return 0;
	}
	if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size == 0)
		return -EBADMSG;
	const uint8_t *p = (const uint8_t *)o->via.bin.ptr;
	size_t n = o->via.bin.size;
	size_t from = n > 8 ? n - 8 : 0;
	*h = 0;
	for (size_t i = from; i < n; i++)
		*h = *h << 8 | p[i];
	*rawlen = n > 16 ? 16 : (uint8_t)n;
	memcpy(raw, p + (n - *rawlen), *rawlen);
	return 0;
}

/* Fills ev's field called name from o. Unknown fields are skipped (newer
 * vLLMs add some: extra_keys, group_idx...). */
static int dec_field(struct ev_dec_event *ev, const char *name,
		     const msgpack_object *o)
{
	int rc;

	if (!strcmp(name, "block_hashes")) {
		if (o->type != MSGPACK_OBJECT_ARRAY)
			return -EBADMSG;
		if (o->via.array.size > EV_DEC_HASHES_MAX)
			return -E2BIG;
		ev->nhashes = o->via.array.size;
		for (size_t i = 0; i < ev->nhashes; i++) {
			rc = dec_hash(&o->via.array.ptr[i], &ev->hashes[i],
				      ev->raw[i], &ev->rawlen[i]);
			if (rc)
				return rc;
		}
	} else if (!strcmp(name, "parent_block_hash")) {
		ev->has_parent = o->type != MSGPACK_OBJECT_NIL;
		if (ev->has_parent)
			return dec_hash(o, &ev->parent, ev->parent_raw,
					&ev->parent_rawlen);
	} else if (!strcmp(name, "block_size")) {
		if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
			ev->block_size = (int64_t)o->via.u64;
		else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
			ev->block_size = o->via.i64;
		else
			return -EBADMSG;
	} else if (!strcmp(name, "medium")) {
		if (o->type == MSGPACK_OBJECT_NIL)
			return 0;
		if (o->type != MSGPACK_OBJECT_STR)
			return -EBADMSG;
		size_t n = o->via.str.size;
		if (n >= sizeof(ev->medium))
			n = sizeof(ev->medium) - 1;
		memcpy(ev->medium, o->via.str.ptr, n);
		ev->medium[n] = 0;
	}
	return 0;
}

/* Positional field names of the array form, after the tag. */
static const char *const stored_fields[] = {
	"block_hashes", "parent_block_hash", "token_ids", "block_size",
	"lora_id", "medium", "lora_name",
};
static const char *const removed_fields[] = { "block_hashes", "medium" };

static int dec_kind(const msgpack_object *tag, enum ev_kind *k)
{
	for (int i = EV_STORED; i <= EV_CLEARED; i++)
		if (str_is(tag, ev_kind_name(i))) {
			*k = i;
			return 0;
		}
	return -EBADMSG;
}

static int dec_event(struct ev_dec_event *ev, const msgpack_object *o)
{
	int rc;

	memset(ev, 0, offsetof(struct ev_dec_event, hashes));
	ev->has_parent = false;
	ev->parent_rawlen = 0;
	ev->block_size = 0;
	ev->medium[0] = 0;
	if (o->type == MSGPACK_OBJECT_MAP) {
		const msgpack_object_kv *kv = o->via.map.ptr;
		size_t n = o->via.map.size;
		size_t i;

		ev->map_form = true;
		for (i = 0; i < n && !str_is(&kv[i].key, "type"); i++)
			;
		if (i == n || (rc = dec_kind(&kv[i].val, &ev->kind)))
			return -EBADMSG;
		for (i = 0; i < n; i++) {
			char name[64];
			if (kv[i].key.type != MSGPACK_OBJECT_STR ||
			    kv[i].key.via.str.size >= sizeof(name))
				continue;
			memcpy(name, kv[i].key.via.str.ptr, kv[i].key.via.str.size);
			name[kv[i].key.via.str.size] = 0;
			rc = dec_field(ev, name, &kv[i].val);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 1)
		return -EBADMSG;
	if ((rc = dec_kind(&o->via.array.ptr[0], &ev->kind)))
		return rc;
	const char *const *names = ev->kind == EV_STORED ? stored_fields
				 : removed_fields;
	size_t nnames = ev->kind == EV_STORED ? 7
		      : ev->kind == EV_REMOVED ? 2 : 0;
	for (size_t i = 1; i < o->via.array.size && i - 1 < nnames; i++) {
		rc = dec_field(ev, names[i - 1], &o->via.array.ptr[i]);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Walks the msgpack bytes without building anything and checks that every
 * array and map declares no more elements than bytes remain: msgpack-c
 * allocates a container's elements from its declared count before reading
 * them, so 5 hostile bytes could otherwise ask for gigabytes. Also rejects
 * truncation and trailing bytes. 0 or -EBADMSG.
 */
static int check_sizes(const uint8_t *p, size_t len)
{
	static const uint8_t fixed[32] = {
		/* extra bytes after the type byte for 0xc0..0xdf, or 0xff for
		 * length-prefixed and container types handled below */
		[0x00] = 0, [0x01] = 0xff /* 0xc1: never used */, [0x02] = 0,
		[0x03] = 0, [0x0a] = 4, [0x0b] = 8, [0x0c] = 1, [0x0d] = 2,
		[0x0e] = 4, [0x0f] = 8, [0x10] = 1, [0x11] = 2, [0x12] = 4,
		[0x13] = 8, [0x14] = 2, [0x15] = 3, [0x16] = 5, [0x17] = 9,
		[0x18] = 17,
	};
	size_t pos = 0, pending = 1;

	while (pending) {
		uint64_t n = 0, skip = 0, elems = 0;
		int lb = 0; /* bytes of a big-endian length that follows */
		uint8_t b;

		if (pos >= len || pending > len - pos)
			return -EBADMSG;
		b = p[pos++];
		pending--;
		if (b <= 0x7f || b >= 0xe0)
			continue;
		if (b <= 0x8f) {
			elems = 2 * (uint64_t)(b & 0x0f);
		} else if (b <= 0x9f) {
			elems = b & 0x0f;
		} else if (b <= 0xbf) {
			skip = b & 0x1f;
		} else {
			switch (b) {
			case 0xc4: case 0xd9: lb = 1; break;
			case 0xc5: case 0xda: lb = 2; break;
			case 0xc6: case 0xdb: lb = 4; break;
			case 0xc7: lb = 1; skip = 1; break; /* ext: + type */
			case 0xc8: lb = 2; skip = 1; break;
			case 0xc9: lb = 4; skip = 1; break;
			case 0xdc: case 0xde: lb = 2; break;
			case 0xdd: case 0xdf: lb = 4; break;
			default:
				if (fixed[b - 0xc0] == 0xff)
					return -EBADMSG;
				skip = fixed[b - 0xc0];
			}
			if (lb) {
				if ((size_t)lb > len - pos)
					return -EBADMSG;
				for (int i = 0; i < lb; i++)
					n = n << 8 | p[pos++];
				if (b >= 0xdc)
					elems = b >= 0xde ? 2 * n : n;
				else
					skip += n;
			}
		}
		if (skip > len - pos)
			return -EBADMSG;
		pos += skip;
		if (elems > len - pos || pending + elems > len - pos)
			return -EBADMSG;
		pending += elems;
	}
	return pos == len ? 0 : -EBADMSG;
}

int ev_decode_batch(const void *data, size_t len, double *ts,
		    int (*fn)(void *arg, const struct ev_dec_event *ev),
		    void *arg)
{
	msgpack_unpacked u;
	size_t off = 0;
	struct ev_dec_event *ev;
	int rc;

	if (check_sizes(data, len))
		return -EBADMSG;
	ev = malloc(sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, data, len, &off) != MSGPACK_UNPACK_SUCCESS ||
	    off != len) {
		rc = -EBADMSG;
		goto out;
	}
	/* [ts, events, dp_rank] (array_like, what kvfs and llm-d use), or
	 * {"ts": .., "events": [..], ...} (newer vLLMs' plain struct) */
	const msgpack_object *b = &u.data, *t = NULL, *evs = NULL;
	if (b->type == MSGPACK_OBJECT_ARRAY && b->via.array.size >= 2 &&
	    b->via.array.size <= 3) {
		t = &b->via.array.ptr[0];
		evs = &b->via.array.ptr[1];
	} else if (b->type == MSGPACK_OBJECT_MAP) {
		for (size_t i = 0; i < b->via.map.size; i++) {
			if (str_is(&b->via.map.ptr[i].key, "ts"))
				t = &b->via.map.ptr[i].val;
			else if (str_is(&b->via.map.ptr[i].key, "events"))
				evs = &b->via.map.ptr[i].val;
		}
	}
	if (!t || !evs || evs->type != MSGPACK_OBJECT_ARRAY ||
	    (t->type != MSGPACK_OBJECT_FLOAT64 &&
	     t->type != MSGPACK_OBJECT_FLOAT32)) {
		rc = -EBADMSG;
		goto out;
	}
	*ts = t->via.f64;
	rc = 0;
	for (size_t i = 0; i < evs->via.array.size && !rc; i++) {
		rc = dec_event(ev, &evs->via.array.ptr[i]);
		if (!rc)
			rc = fn(arg, ev);
	}
out:
	msgpack_unpacked_destroy(&u);
	free(ev);
	return rc;
}
