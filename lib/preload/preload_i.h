/*
 * preload_i.h - inside libkvfs_preload.so: the open side (preload.c) and
 * the served descriptors (preload_fd.c).
 */
#ifndef KVFS_PRELOAD_I_H
#define KVFS_PRELOAD_I_H

#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/*
 * A chunk served from memory: its bytes, copied by one KVFS_IOC_GET, and
 * the offset its descriptors share (dup'ed descriptors share one, as for
 * any file). Freed when the last descriptor is closed.
 */
struct pl_chunk {
	pthread_mutex_t lock; /* protects off */
	off_t off;
	unsigned refs;        /* descriptors + calls in flight (table lock) */
	ino_t sock_ino;       /* the socket that stands for it (see pl_fd_serve) */
	char *buf;            /* cap bytes, the first size are the chunk's */
	size_t cap;
	uint64_t size;
	struct stat st;       /* what fstat says */
};

/* pl_chunk_new - a chunk with a buffer of at least cap bytes (from the
 * pool of buffers freed chunks left, so its pages are already there);
 * NULL without memory. */
struct pl_chunk *pl_chunk_new(size_t cap);

/* pl_chunk_grow - gives c a buffer of at least cap bytes (contents lost).
 * Returns 0 or -1. */
int pl_chunk_grow(struct pl_chunk *c, size_t cap);

/* pl_chunk_free - frees a chunk no descriptor stands for. */
void pl_chunk_free(struct pl_chunk *c);

/* pl_fd_serve - a new descriptor that stands for c (takes c): an
 * unconnected AF_UNIX socket, so that any call this library does not
 * interpose fails (ENOTCONN, EINVAL, ENODEV) instead of reading other
 * bytes; O_CLOEXEC as flags ask. Returns the fd, or -1 (c freed). */
int pl_fd_serve(struct pl_chunk *c, int flags);

#endif
