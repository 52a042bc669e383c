/*
 * ev_queue.h - the bounded event queue between the engine's callbacks and
 * the publisher thread: a ring of fixed-size struct ev_event slots under one
 * mutex held only for a copy. A push to a full ring fails at once (the
 * caller counts the drop); nothing ever waits for space.
 */
#ifndef KVFS_EV_QUEUE_H
#define KVFS_EV_QUEUE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "events/events.h"

struct ev_queue {
	pthread_mutex_t lock;
	struct ev_event *ring; /* cap slots */
	uint64_t cap;
	uint64_t head;   /* lock: next slot to pop (monotonic) */
	uint64_t tail;   /* lock: next slot to push (monotonic) */
};

/* 0 or -ENOMEM; cap >= 1. */
int ev_queue_init(struct ev_queue *q, uint64_t cap);
void ev_queue_fini(struct ev_queue *q);

/* 0, or -EAGAIN when full. */
int ev_queue_push(struct ev_queue *q, const struct ev_event *e);

/* Moves up to max events into out, oldest first; returns how many. */
size_t ev_queue_pop(struct ev_queue *q, struct ev_event *out, size_t max);

/* Events pushed so far (the tail), and waiting now. */
uint64_t ev_queue_pushed(struct ev_queue *q);
uint64_t ev_queue_depth(struct ev_queue *q);

#endif /* KVFS_EV_QUEUE_H */
