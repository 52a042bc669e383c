/*
 * l2_util.c - what the other files of the L2 log call: logging, the pools
 * of aligned buffers and codec workspaces, and deadlines on the monotonic
 * clock. Calls nothing else of tier/l2/ (the bottom of the folder; the
 * map of the files is at the top of l2_i.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tier/l2/l2_i.h"

#define L2_POOL_BUFS 16
/* Bytes the buffer pool may hold idle: up to 16 buffers as large as a
 * segment would be 1 GiB with max_chunk=64M; it keeps at most this much,
 * or one buffer when that one is larger (see "Memory" in kvfs-mount(8)). */
#define L2_POOL_BYTES (32u << 20)
#define L2_POOL_WS 8

void l2_logf(struct l2 *l2, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!l2->cfg.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	l2->cfg.log(l2->cfg.log_arg, msg);
}

/* Counts an error and logs it, but not a flood of the same one: the first
 * of each kind and then one in 1000. Takes l2.lock. */
void l2_log_err(struct l2 *l2, int err, const char *what, uint32_t seg)
{
	bool say;

	pthread_mutex_lock(&l2->lock);
	l2->st.errors++;
	say = err != l2->last_err_logged || ++l2->errs_since_log >= 1000;
	if (say) {
		l2->last_err_logged = err;
		l2->errs_since_log = 0;
	}
	pthread_mutex_unlock(&l2->lock);
	if (say)
		l2_logf(l2, "l2: %s (%s/seg-%016" PRIx32 ".kvl2): %s", what,
			l2->dir, seg, strerror(-err));
}

/* Aligned I/O buffers are pooled: a fresh 2 MiB buffer costs ~500 page
 * faults, about as long as decompressing the chunk. l2.lock taken here. */
void *l2_buf_get(struct l2 *l2, size_t len, size_t *cap)
{
	struct l2_buf **pp, *b;
	void *p;

	len = (len + 65535) & ~(size_t)65535;
	pthread_mutex_lock(&l2->lock);
	for (pp = &l2->bufs; (b = *pp); pp = &b->next) {
		if (b->cap >= len && b->cap <= 4 * len) {
			*pp = b->next;
			l2->nbufs--;
			l2->pool_bytes -= b->cap;
			pthread_mutex_unlock(&l2->lock);
			p = b->p;
			*cap = b->cap;
			free(b);
			return p;
		}
	}
	pthread_mutex_unlock(&l2->lock);
	if (posix_memalign(&p, L2_ALIGN, len))
		return NULL;
	*cap = len;
	return p;
}

void l2_buf_put(struct l2 *l2, void *p, size_t cap)
{
	struct l2_buf *b;

	if (!p)
		return;
	b = malloc(sizeof(*b));
	pthread_mutex_lock(&l2->lock);
	if (!b || l2->nbufs >= L2_POOL_BUFS ||
	    (l2->nbufs && l2->pool_bytes + cap > L2_POOL_BYTES)) {
		pthread_mutex_unlock(&l2->lock);
		free(b);
		free(p);
		return;
	}
	b->p = p;
	b->cap = cap;
	b->next = l2->bufs;
	l2->bufs = b;
	l2->nbufs++;
	l2->pool_bytes += cap;
	pthread_mutex_unlock(&l2->lock);
}

struct codec_ws *l2_ws_get(struct l2 *l2)
{
	struct l2_ws_item *it;
	struct codec_ws *ws;

	pthread_mutex_lock(&l2->lock);
	it = l2->wss;
	if (it)
		l2->wss = it->next;
	pthread_mutex_unlock(&l2->lock);
	if (!it)
		return codec_ws_new();
	ws = it->ws;
	free(it);
	return ws;
}

void l2_ws_put(struct l2 *l2, struct codec_ws *ws)
{
	struct l2_ws_item *it, *p;
	size_t n = 0;

	if (!ws)
		return;
	it = malloc(sizeof(*it));
	pthread_mutex_lock(&l2->lock);
	for (p = l2->wss; p; p = p->next)
		n++;
	if (!it || n >= L2_POOL_WS) {
		pthread_mutex_unlock(&l2->lock);
		free(it);
		codec_ws_free(ws);
		return;
	}
	it->ws = ws;
	it->next = l2->wss;
	l2->wss = it;
	pthread_mutex_unlock(&l2->lock);
}

/* A condition variable timed against CLOCK_MONOTONIC (see deadline). */
void l2_cond_init_monotonic(pthread_cond_t *c)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

/* *dl = now + ms on CLOCK_MONOTONIC. */
void l2_deadline(struct timespec *dl, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, dl);
	dl->tv_sec += ms / 1000;
	dl->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl->tv_nsec >= 1000000000L) {
		dl->tv_sec++;
		dl->tv_nsec -= 1000000000L;
	}
}
