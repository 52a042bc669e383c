/*
 * l3_slot.c - Redis Cluster slot routing (see l3_slot.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "tier/l3/l3_slot.h"

/* ---------------------------------------------------------------- CRC16 */

/* The table of the cluster specification (CRC16-CCITT, XMODEM), built
 * once from the polynomial instead of 256 literals. */
static uint16_t crc_tab[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint16_t c = (uint16_t)(i << 8);

		for (int b = 0; b < 8; b++)
			c = (c & 0x8000) ? (uint16_t)((c << 1) ^ 0x1021)
					 : (uint16_t)(c << 1);
		crc_tab[i] = c;
	}
}

uint16_t l3_crc16(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint16_t crc = 0;

	pthread_once(&crc_once, crc_init);
	for (size_t i = 0; i < len; i++)
		crc = (uint16_t)((crc << 8) ^ crc_tab[((crc >> 8) ^ p[i]) & 0xff]);
	return crc;
}

unsigned l3_key_slot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len);

	if (open) {
		size_t o = (size_t)(open - key);
		const char *close = memchr(open + 1, '}', len - o - 1);

		/* "{}" is no tag: the whole key is hashed */
		if (close && close > open + 1)
			return l3_crc16(open + 1, (size_t)(close - open - 1)) &
			       (L3_SLOTS - 1);
	}
	return l3_crc16(key, len) & (L3_SLOTS - 1);
}

/* ------------------------------------------------------------ addresses */

static int parse_port(const char *s, size_t len, int *port)
{
	long v = 0;

	if (len == 0 || len > 5)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (s[i] - '0');
	}
	if (v < 1 || v > 65535)
		return -EINVAL;
	*port = (int)v;
	return 0;
}

static int set_host(struct l3_addr *a, const char *h, size_t n)
{
	if (n > L3_HOST_MAX || memchr(h, '\0', n))
		return -EINVAL;
	/* "?" is what Redis 7 says for an unknown endpoint */
	if (n == 1 && h[0] == '?')
		n = 0;
	memcpy(a->host, h, n);
	a->host[n] = '\0';
	return 0;
}

int l3_addr_parse(const char *s, size_t len, struct l3_addr *out)
{
	const char *colon;
	size_t hlen;
	int err;

	if (len && s[0] == '[') {
		const char *rb = memchr(s, ']', len);

		if (!rb || (size_t)(rb - s) + 1 >= len || rb[1] != ':')
			return -EINVAL;
		err = parse_port(rb + 2, len - (size_t)(rb - s) - 2, &out->port);
		return err ? err : set_host(out, s + 1, (size_t)(rb - s) - 1);
	}
	colon = NULL;
	for (size_t i = len; i > 0; i--)
		if (s[i - 1] == ':') {
			colon = s + i - 1;
			break;
		}
	if (!colon)
		return -EINVAL;
	hlen = (size_t)(colon - s);
	err = parse_port(colon + 1, len - hlen - 1, &out->port);
	return err ? err : set_host(out, s, hlen);
}

int l3_redirect_parse(const char *err, size_t len, struct l3_redirect *out)
{
	const char *p = err, *end = err + len, *sp;
	unsigned slot = 0;
	size_t n;

	if (len > 6 && !memcmp(err, "MOVED ", 6)) {
		out->ask = false;
		p += 6;
	} else if (len > 4 && !memcmp(err, "ASK ", 4)) {
		out->ask = true;
		p += 4;
	} else {
		return -EINVAL;
	}
	sp = memchr(p, ' ', (size_t)(end - p));
	if (!sp || sp == p || sp - p > 5)
		return -EINVAL;
	for (; p < sp; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		slot = slot * 10 + (unsigned)(*p - '0');
	}
	if (slot >= L3_SLOTS)
		return -EINVAL;
	out->slot = slot;
	p = sp + 1;
	n = (size_t)(end - p);
	while (n && (p[n - 1] == '\r' || p[n - 1] == '\n'))
		n--;
	return l3_addr_parse(p, n, &out->to);
}

/* --------------------------------------------------------- CLUSTER SLOTS */

static int node_addr(const redisReply *n, struct l3_addr *a)
{
	if (n->type != REDIS_REPLY_ARRAY || n->elements < 2 ||
	    n->element[0]->type != REDIS_REPLY_STRING ||
	    n->element[1]->type != REDIS_REPLY_INTEGER ||
	    n->element[1]->integer < 1 || n->element[1]->integer > 65535)
		return -EPROTO;
	a->port = (int)n->element[1]->integer;
	return set_host(a, n->element[0]->str, n->element[0]->len) ? -EPROTO
								      : 0;
}

static int cmp_range(const void *a, const void *b)
{
	const struct l3_slot_range *x = a, *y = b;

	return (x->first > y->first) - (x->first < y->first);
}

long l3_slots_parse(const struct redisReply *r, struct l3_slot_range **out)
{
	struct l3_slot_range *v;
	size_t i;

	*out = NULL;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements > L3_SLOTS)
		return -EPROTO;
	v = calloc(r->elements ? r->elements : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i];

		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_INTEGER)
			goto bad;
		if (e->element[0]->integer < 0 ||
		    e->element[1]->integer < e->element[0]->integer ||
		    e->element[1]->integer >= L3_SLOTS)
			goto bad;
		v[i].first = (unsigned)e->element[0]->integer;
		v[i].last = (unsigned)e->element[1]->integer;
		if (node_addr(e->element[2], &v[i].master))
			goto bad;
	}
	qsort(v, r->elements, sizeof(*v), cmp_range);
	for (i = 1; i < r->elements; i++)
		if (v[i].first <= v[i - 1].last)
			goto bad; /* overlapping ranges */
	*out = v;
	return (long)r->elements;
bad:
	free(v);
	return -EPROTO;
}
