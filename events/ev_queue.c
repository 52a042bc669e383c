/*
 * ev_queue.c - bounded, never-blocking event ring (see ev_queue.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "events/ev_queue.h"

int ev_queue_init(struct ev_queue *q, uint64_t cap)
{
	memset(q, 0, sizeof(*q));
	if (cap < 1)
		return -EINVAL;
	q->ring = calloc(cap, sizeof(*q->ring));
	if (!q->ring)
		return -ENOMEM;
	q->cap = cap;
	pthread_mutex_init(&q->lock, NULL);
	return 0;
}

void ev_queue_fini(struct ev_queue *q)
{
	if (!q->ring)
		return;
	pthread_mutex_destroy(&q->lock);
	free(q->ring);
	q->ring = NULL;
}

int ev_queue_push(struct ev_queue *q, const struct ev_event *e)
{
	int rc = -EAGAIN;

	pthread_mutex_lock(&q->lock);
	if (q->tail - q->head < q->cap) {
		q->ring[q->tail % q->cap] = *e;
		q->tail++;
		rc = 0;
	}
	pthread_mutex_unlock(&q->lock);
	return rc;
}

size_t ev_queue_pop(struct ev_queue *q, struct ev_event *out, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&q->lock);
	while (n < max && q->head < q->tail) {
		out[n++] = q->ring[q->head % q->cap];
		q->head++;
	}
	pthread_mutex_unlock(&q->lock);
	return n;
}

uint64_t ev_queue_pushed(struct ev_queue *q)
{
	pthread_mutex_lock(&q->lock);
	uint64_t v = q->tail;
	pthread_mutex_unlock(&q->lock);
	return v;
}

uint64_t ev_queue_depth(struct ev_queue *q)
{
	pthread_mutex_lock(&q->lock);
	uint64_t v = q->tail - q->head;
	pthread_mutex_unlock(&q->lock);
	return v;
}
