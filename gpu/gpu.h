/*
 * gpu.h - the one memory interface under the L1 arena.
 *
 * Backends: "host" (anonymous memory of the daemon in huge pages where the
 * kernel gives them, pre-faulted, always built), "pinned" (the same arena
 * registered with cudaHostRegister) and
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

struct gpu_export;

struct gpu_arena {
	const struct gpu_ops *ops;
	uint64_t size;
	void *host;   /* host-addressable bytes, or NULL (device memory) */
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
	/*
	 * Exports [off, off + len) of the arena to another process: fills
	 * ex (ipc, offset, length, device, cookie). The handle never covers
	 * more than that range (see struct gpu_export). May block for a
	 * device copy: call it without engine locks held (pinned: a DMA
	 * from the page-locked arena into the buffer). -ENOTSUP for host
	 * arenas (mmap the chunk instead), -EINVAL for a
	 * range outside the arena, -ENOSPC (the exports held already use as
	 * much device memory as the arena), -ENOMEM, -EIO (CUDA error).
	 */
	int (*export_handle)(struct gpu_arena *a, uint64_t off, uint64_t len,
			     struct gpu_export *ex);
	/* Releases what export_handle made (ex->cookie); NULL is a no-op. */
	void (*unexport)(struct gpu_arena *a, void *cookie);
	/* Zeroes [off, off + len) (holes of a chunk being written). */
	int (*zero)(struct gpu_arena *a, uint64_t off, size_t len);
	/* Copies len bytes from src to dst inside the arena (a growing
	 * writer's extent): device to device for cuda. The ranges must not
	 * overlap. -EINVAL for ranges outside the arena or overlapping. */
	int (*move)(struct gpu_arena *a, uint64_t dst, uint64_t src,
		    size_t len);
};

/*
 * An exported range. Isolation: a CUDA IPC handle maps a whole cudaMalloc
 * allocation, so the cuda backend never exports the arena itself (that
 * would hand one namespace's reader every namespace's chunks). Each export
 * gets its own device buffer, sized up to a multiple of 2 MiB (CUDA may
 * sub-allocate smaller cudaMalloc blocks from a shared page, and IPC would
 * then share the neighbours too) with the tail zeroed, filled by a
 * device-to-device copy from the arena; unexport keeps it for the same
 * owner's next export (or frees it). The importer must not read through
 * its mapping after the handle is released: the next chunk of that owner
 * may be copied there.
 */
struct gpu_export {
	/* in: the owner (the caller's uid and gid, the chunk's namespace).
	 * A released buffer is kept and reused, with its IPC handle, for the
	 * next export of the same owner only (gpu_cuda.c, export_new). */
	uint32_t uid, gid, ns;
	uint8_t ipc[64];  /* cudaIpcMemHandle_t of the per-export buffer */
	uint64_t offset;  /* where the range starts in that buffer */
	uint64_t length;  /* bytes of the range */
	int device;       /* CUDA device of the buffer */
	void *cookie;     /* backend state; NULL once released */
};

/*
 * gpu_arena_open - parses spec ("host", "pinned", "cuda", "cuda:N", or
 * "auto": pinned where gpu_default_spec says so and it opens, else host)
 * and allocates size bytes. On failure writes a one-line reason to err:
 * -EINVAL (bad spec), -ENODEV (no usable GPU or CUDA runtime), -ENOMEM.
 * CUDA does not survive fork(): open pinned/cuda arenas (and call
 * gpu_default_spec) in the process that will use them, after daemonizing.
 */
int gpu_arena_open(const char *spec, uint64_t size, struct gpu_arena *a,
		   char *err, size_t errlen);
void gpu_arena_close(struct gpu_arena *a);

/*
 * gpu_default_spec - the l1 spec to use when the user gave none: "pinned"
 * where this build has CUDA and the driver reports a device, else "host".
 * Loads the runtime and counts devices (creates no CUDA context). A caller
 * using it should fall back to "host", with a log line, if opening the
 * pinned arena then fails (e.g. RLIMIT_MEMLOCK).
 */
const char *gpu_default_spec(void);

/*
 * gpu_arena_describe - one line for logs and .kvfs/config, e.g.
 * "cuda:0 1073741824 bytes (device memory)". Returns the snprintf length.
 */
int gpu_arena_describe(const struct gpu_arena *a, char *buf, size_t len);

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

static inline int gpu_zero(struct gpu_arena *a, uint64_t off, size_t len)
{
	return a->ops->zero(a, off, len);
}

static inline int gpu_move(struct gpu_arena *a, uint64_t dst, uint64_t src,
			   size_t len)
{
	return a->ops->move(a, dst, src, len);
}

static inline int gpu_export_range(struct gpu_arena *a, uint64_t off,
				   uint64_t len, struct gpu_export *ex)
{
	return a->ops->export_handle(a, off, len, ex);
}

static inline void gpu_unexport(struct gpu_arena *a, void *cookie)
{
	a->ops->unexport(a, cookie);
}

/*
 * Imports: a device buffer of ANOTHER process (an engine's KV pool, given
 * as a CUDA IPC handle) opened by the daemon once, so batched GETs can copy
 * chunks straight into it (pinned arena: one host-to-device DMA; cuda
 * arena: device to device). gpu_cuda.c; gpu_nocuda.c and host arenas say
 * -ENOTSUP.
 * gpu_import_open: opens ipc (64 bytes) for len bytes in the arena's
 *   device context. -ENOTSUP (host arena), -EIO (not a live handle),
 *   -ENOMEM.
 * gpu_import_copy: copies len bytes into the import at dst_off, from the
 *   arena at arena_off, or from host memory host_src when it is not NULL
 *   (a chunk served from a temporary buffer). -EFAULT when
 *   [dst_off, dst_off + len) is outside the import, -EINVAL outside the
 *   arena, -EIO. Blocks until the copy is done. Thread-safe.
 * gpu_import_close: closes it (no copy may be running on it).
 */
struct gpu_import;
int gpu_import_open(struct gpu_arena *a, const uint8_t ipc[64], uint64_t len,
		    struct gpu_import **out);
int gpu_import_copy(struct gpu_arena *a, struct gpu_import *im,
		    uint64_t dst_off, uint64_t arena_off, const void *host_src,
		    size_t len);
void gpu_import_close(struct gpu_arena *a, struct gpu_import *im);

#endif /* KVFS_GPU_H */
