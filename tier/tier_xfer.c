/*
 * tier_xfer.c - what batched transfers (fs/fs_xfer.c) need of a writer
 * beyond tier_wr.c's pwrite: the writer's extent itself, so the daemon can
 * copy a caller's bytes into the arena once (process_vm_readv straight
 * into it) instead of through a staging buffer, and a checksum computed
 * while those bytes are still in the cache; and the device path: chunks
 * copied from a pinned or cuda arena into an engine's CUDA buffer.
 */
#include <errno.h>

#include "tier/tier_i.h"

int tier_wr_map(struct tier *t, struct tier_wr *w, uint64_t len, void **ptr)
{
	int rc = 0;

	if (!t->arena.host)
		return -ENOTSUP;
	pthread_mutex_lock(&w->mu);
	/* The extent is fixed while nobody pwrites: it only moves in
	 * wr_grow, which runs under mu from pwrite/truncate. */
	if (w->size || len > w->cap)
		rc = -EINVAL;
	else {
		w->size = len;
		*ptr = (char *)t->arena.host + w->off;
	}
	pthread_mutex_unlock(&w->mu);
	return rc;
}

void tier_wr_set_checksum(struct tier_wr *w, uint64_t sum)
{
	pthread_mutex_lock(&w->mu);
	w->has_sum = true;
	w->sum = sum;
	pthread_mutex_unlock(&w->mu);
}

int tier_import_open(struct tier *t, const uint8_t ipc[64], uint64_t len,
		     struct gpu_import **out)
{
	return gpu_import_open(&t->arena, ipc, len, out);
}

int tier_import_copy(struct tier *t, struct gpu_import *im,
		     const struct tier_chunk *c, uint64_t off, uint64_t len,
		     uint64_t dst_off)
{
	if (off > c->size || len > c->size - off)
		return -EINVAL;
	/* a chunk served from a temporary buffer (L1 full of pins) is in
	 * host memory: copied host to device from there */
	if (c->tmp)
		return gpu_import_copy(&t->arena, im, dst_off, 0,
				       (const char *)c->tmp + off, len);
	return gpu_import_copy(&t->arena, im, dst_off, c->off + off, NULL,
			       len);
}

void tier_import_close(struct tier *t, struct gpu_import *im)
{
	gpu_import_close(&t->arena, im);
}
