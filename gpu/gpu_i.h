/* gpu_i.h - private to gpu/: the backends and shared host mapping. */
#ifndef KVFS_GPU_I_H
#define KVFS_GPU_I_H

#include "gpu/gpu.h"

extern const struct gpu_ops gpu_host_ops;

/* Maps a pre-faulted arena of size bytes (anonymous memory, huge pages
 * where the kernel gives them, not inherited by fork) into a->host; tag
 * names it in /proc/PID/maps. */
int gpu_host_map(struct gpu_arena *a, uint64_t size, const char *tag,
		 char *err, size_t errlen);
void gpu_host_unmap(struct gpu_arena *a);

/* The host backend's ops on a->host, shared with the pinned backend. */
int gpu_host_copy_in(struct gpu_arena *a, uint64_t off, const void *src,
		     size_t len);
int gpu_host_copy_out(struct gpu_arena *a, uint64_t off, void *dst,
		      size_t len);
int gpu_host_zero(struct gpu_arena *a, uint64_t off, size_t len);
int gpu_host_move(struct gpu_arena *a, uint64_t dst, uint64_t src,
		  size_t len);
/* 1 when [dst, dst + len) and [src, src + len) lie in the arena and do not
 * overlap (the contract of ops->move). */
int gpu_move_ok(const struct gpu_arena *a, uint64_t dst, uint64_t src,
		size_t len);
int gpu_host_export(struct gpu_arena *a, uint64_t off, uint64_t len,
		    struct gpu_export *ex);
void gpu_host_unexport(struct gpu_arena *a, void *cookie);

/*
 * gpu_cuda_backend - the ops for "pinned" or "cuda", or NULL with a reason
 * in err when this build has no CUDA support (gpu_nocuda.c) .
 */
const struct gpu_ops *gpu_cuda_backend(const char *kind, char *err,
				       size_t errlen);

#endif
