/*
 * client_wait.h - libkvfs's private helpers for waiting calls
 * (kvfs_lookup_wait, kvfs_mget_wait): one deadline for a call that takes
 * several ioctls, each sent with the time left.
 */
#ifndef KVFS_CLIENT_WAIT_H
#define KVFS_CLIENT_WAIT_H

#include <stdint.h>
#include <time.h>

#include "kvfs.h"

static inline uint64_t kvfs_wait_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The deadline of a wait of timeout_ms from now (0: no wait). */
static inline uint64_t kvfs_wait_deadline(uint32_t timeout_ms)
{
	if (timeout_ms > KVFS_WAIT_MS_MAX)
		timeout_ms = KVFS_WAIT_MS_MAX;
	return timeout_ms ? kvfs_wait_now_ns() +
				    (uint64_t)timeout_ms * 1000000ull
			  : 0;
}

/* flags with wait_flag and the time left until deadline (rounded up to
 * a ms) in its timeout bits; without either when none is left. */
static inline uint32_t kvfs_wait_flags(uint32_t flags, uint32_t wait_flag,
				       uint64_t deadline)
{
	uint64_t now = kvfs_wait_now_ns(), ms;

	flags &= ~(wait_flag | KVFS_WAIT_MS_MASK);
	if (!deadline || now >= deadline)
		return flags;
	ms = (deadline - now + 999999) / 1000000;
	return flags | wait_flag | KVFS_WAIT_MS(ms);
}

#endif /* KVFS_CLIENT_WAIT_H */
