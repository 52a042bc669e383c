/* gpu_i.h - private to gpu/: the backends and shared host mapping. */
#ifndef KVFS_GPU_I_H
#define KVFS_GPU_I_H

#include "gpu/gpu.h"

extern const struct gpu_ops gpu_host_ops;

/* Maps a pre-faulted memfd arena of size bytes into a (host, memfd). */
int gpu_host_map(struct gpu_arena *a, uint64_t size, const char *tag,
		 char *err, size_t errlen);
void gpu_host_unmap(struct gpu_arena *a);

/*
 * gpu_cuda_backend - the ops for "pinned" or "cuda", or NULL with a reason
 * in err when this build has no CUDA support (gpu_nocuda.c) .
 */
const struct gpu_ops *gpu_cuda_backend(const char *kind, char *err,
				       size_t errlen);

#endif
