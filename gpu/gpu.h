/*
 * gpu.h - the one memory interface under the L1 arena.
 *
 * Backends: "host" (a memfd mapped MAP_SHARED|MAP_POPULATE, always built),
 * "pinned" (the same memfd arena registered with cudaHostRegister) and
 * "cuda[:DEVICE]" (cudaMalloc; host reads and writes go through copies).
 * CUDA is loaded at run time; only gpu/ knows about it (no #ifdef CUDA
 * outside gpu/).
 *
 * Functions return 0 or -errno; thread-safe for distinct ranges.
 */
#ifndef KVFS_GPU_H
#define KVFS_GPU_H

#include <stddef.h>
#include <stdint.h>

struct gpu_arena {
	const struct gpu_ops *ops;
	uint64_t size;
	void *host;   /* host-addressable bytes, or NULL (device memory) */
	int memfd;    /* backing memfd of host/pinned arenas, else -1 */
	int device;   /* CUDA device, or -1 */
	int handle_kind; /* KVFS_HANDLE_HOST_MMAP or KVFS_HANDLE_CUDA_IPC */
	void *priv;   /* backend state */
};

struct gpu_ops {
	const char *name;
	int (*alloc)(struct gpu_arena *a, uint64_t size, int device,
		     char *err, size_t errlen);
	void (*free)(struct gpu_arena *a);
	int (*copy_in)(struct gpu_arena *a, uint64_t off, const void *src,
		       size_t len);
	int (*copy_out)(struct gpu_arena *a, uint64_t off, void *dst,
			size_t len);
	/* Fills ipc (64 bytes) with a handle to the whole arena. -ENOTSUP
	 * for host arenas. */
	int (*export_handle)(struct gpu_arena *a, uint8_t ipc[64]);
};

/*
 * gpu_arena_open - parses spec ("host", "pinned", "cuda", "cuda:N") and
 * allocates size bytes. On failure writes a one-line reason to err:
 * -EINVAL (bad spec), -ENODEV (no usable GPU or CUDA runtime), -ENOMEM.
 */
int gpu_arena_open(const char *spec, uint64_t size, struct gpu_arena *a,
		   char *err, size_t errlen);
void gpu_arena_close(struct gpu_arena *a);

static inline int gpu_copy_in(struct gpu_arena *a, uint64_t off,
			      const void *src, size_t len)
{
	return a->ops->copy_in(a, off, src, len);
}

static inline int gpu_copy_out(struct gpu_arena *a, uint64_t off, void *dst,
			       size_t len)
{
	return a->ops->copy_out(a, off, dst, len);
}

#endif /* KVFS_GPU_H */
