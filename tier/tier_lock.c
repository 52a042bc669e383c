/*
 * tier_lock.c - what every file of the engine calls: tier.lock
 * (tier_lock/tier_unlock, which makes the on_gone calls and logs queued
 * while it was held), the log, and the clock. Calls nothing of the engine:
 * the bottom of tier/'s core (tier_i.h has the map and the lock order).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tier/tier_i.h"

void tier_log(struct tier *t, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	if (!t->cfg.log)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	t->cfg.log(t->cfg.log_arg, buf);
}

/* The same with tier.lock held: the message waits in t->logbuf (only the
 * first one if several come) until tier_unlock, because config callbacks
 * never run under tier.lock. */
void tier_log_locked(struct tier *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void tier_log_locked(struct tier *t, const char *fmt, ...)
{
	va_list ap;

	if (!t->cfg.log || t->logbuf[0])
		return;
	va_start(ap, fmt);
	vsnprintf(t->logbuf, sizeof(t->logbuf), fmt, ap);
	va_end(ap);
}

uint64_t tier_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ locking */

void tier_lock(struct tier *t)
{
	pthread_mutex_lock(&t->lock);
}

/*
 * tier_unlock - drops tier.lock, then makes the on_gone calls queued while
 * it was held (callbacks never run under tier.lock).
 */
void tier_unlock(struct tier *t)
{
	struct tier_gone *g;
	char msg[sizeof(t->logbuf)];
	size_t n;

	if (!t->ngone && !t->logbuf[0]) {
		pthread_mutex_unlock(&t->lock);
		return;
	}
	g = t->gone;
	n = t->ngone;
	t->gone = NULL;
	t->ngone = t->gone_cap = 0;
	memcpy(msg, t->logbuf, sizeof(msg));
	t->logbuf[0] = '\0';
	pthread_mutex_unlock(&t->lock);
	if (msg[0])
		tier_log(t, "%s", msg);
	for (size_t i = 0; i < n; i++)
		if (t->cfg.on_gone)
			t->cfg.on_gone(t->cfg.on_gone_arg, g[i].ns, &g[i].key,
				       g[i].why);
	free(g);
}

/* Queues an on_gone call (tier.lock held). */
void tier_queue_gone(struct tier *t, const struct tier_rec *r,
		       enum tier_gone_reason why)
{
	if (!t->cfg.on_gone)
		return;
	if (t->ngone == t->gone_cap) {
		size_t n = t->gone_cap ? t->gone_cap * 2 : 16;
		struct tier_gone *g = realloc(t->gone, n * sizeof(*g));

		if (!g) {
			tier_log_locked(t, "tier: out of memory queueing an eviction "
				    "notice; a kernel cache entry may stay stale");
			return;
		}
		t->gone = g;
		t->gone_cap = n;
	}
	t->gone[t->ngone].ns = r->ns;
	t->gone[t->ngone].key = r->key;
	t->gone[t->ngone].why = why;
	t->ngone++;
}
