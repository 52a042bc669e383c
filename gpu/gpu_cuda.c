/*
 * gpu_cuda.c - the "pinned" and "cuda" backends, built when the Makefile
 * finds CUDA (CUDA=1). The runtime is loaded at run time (gpu_rt.c), so the
 * binaries still start, and fail cleanly with -ENODEV, where the driver,
 * the device or libcudart is missing.
 *
 * pinned: the host backend's arena, page-locked with cudaHostRegister
 *   (portable, so every device's context can DMA from it; mapped, so kernels
 *   may read it in place). FUSE reads and writes are plain memcpy; engines
 *   mmap the chunk fd. No IPC handle: host memory cannot be exported.
 * cuda: the arena is one cudaMalloc block on the device. FUSE copies go
 *   through a few pinned bounce buffers (one stream each); a chunk handle is
 *   a private device buffer filled device-to-device (see struct gpu_export
 *   in gpu.h for why the arena itself is never exported).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "gpu/gpu_i.h"
#include "gpu/gpu_rt.h"
#include "kvfs.h"

/*
 * gpu_rt.h declares the runtime without CUDA headers; where they exist,
 * check that its constants are the real ones.
 */
#if defined(__has_include)
#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
_Static_assert(cudaSuccess == GPU_RT_SUCCESS, "cudaSuccess");
_Static_assert(cudaErrorInvalidValue == GPU_RT_ERR_INVALID_VALUE, "err 1");
_Static_assert(cudaErrorMemoryAllocation == GPU_RT_ERR_MEMORY_ALLOCATION,
	       "err 2");
_Static_assert(cudaErrorInsufficientDriver == GPU_RT_ERR_INSUFFICIENT_DRIVER,
	       "err 35");
_Static_assert(cudaErrorNoDevice == GPU_RT_ERR_NO_DEVICE, "err 100");
_Static_assert(cudaErrorInvalidDevice == GPU_RT_ERR_INVALID_DEVICE, "err 101");
_Static_assert(cudaErrorHostMemoryAlreadyRegistered ==
		       GPU_RT_ERR_HOST_MEMORY_ALREADY_REGISTERED,
	       "err 712");
_Static_assert(cudaErrorNotSupported == GPU_RT_ERR_NOT_SUPPORTED, "err 801");
_Static_assert(cudaMemcpyHostToHost == GPU_RT_H2H, "H2H");
_Static_assert(cudaMemcpyHostToDevice == GPU_RT_H2D, "H2D");
_Static_assert(cudaMemcpyDeviceToHost == GPU_RT_D2H, "D2H");
_Static_assert(cudaMemcpyDeviceToDevice == GPU_RT_D2D, "D2D");
_Static_assert(cudaHostAllocPortable == GPU_RT_HOST_ALLOC_PORTABLE, "flag");
_Static_assert(cudaHostRegisterPortable == GPU_RT_HOST_REGISTER_PORTABLE,
	       "flag");
_Static_assert(cudaHostRegisterMapped == GPU_RT_HOST_REGISTER_MAPPED, "flag");
_Static_assert(cudaHostRegisterReadOnly == GPU_RT_HOST_REGISTER_READONLY,
	       "flag");
_Static_assert(cudaStreamNonBlocking == GPU_RT_STREAM_NON_BLOCKING, "flag");
_Static_assert(cudaIpcMemLazyEnablePeerAccess == GPU_RT_IPC_LAZY_PEER, "flag");
_Static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(struct gpu_rt_ipc),
	       "ipc handle");
_Static_assert(sizeof(cudaError_t) == sizeof(int), "enum ABI");
_Static_assert(sizeof(enum cudaMemcpyKind) == sizeof(int), "enum ABI");
#endif
#endif

_Static_assert(sizeof(struct gpu_rt_ipc) ==
		       sizeof(((struct gpu_export *)0)->ipc),
	       "gpu_export.ipc holds a cudaIpcMemHandle_t");
_Static_assert(sizeof(struct gpu_rt_ipc) ==
		       sizeof(((struct kvfs_handle *)0)->ipc),
	       "kvfs_handle.ipc holds a cudaIpcMemHandle_t");

/* Bounce buffers of the cuda backend: enough for a few FUSE threads at
 * once, each the size of a whole 2 MiB chunk or a 1 MiB FUSE request. */
#define CUDA_NBOUNCE 4
#define CUDA_BOUNCE_BYTES (4u << 20)

/* IPC shares whole allocations, and CUDA may sub-allocate smaller blocks
 * from one 2 MiB page: export buffers are sized in 2 MiB units. */
#define CUDA_EXPORT_ALIGN (2ull << 20)

/* Released export buffers kept for the next handle of the same owner (see
 * export_new): at most this many, and never more than the export budget.
 * A reused buffer keeps its IPC handle, so an engine that keeps it mapped
 * (libkvfs does, lib/client_cuda.c) opens it once, not per chunk. */
#define CUDA_POOL_MAX 64

struct cuda_slot {
	void *buf;            /* pinned host memory, CUDA_BOUNCE_BYTES */
	gpu_rt_stream stream; /* non-blocking; only this slot's holder uses it */
	bool busy;            /* cuda_priv.lock */
};

struct cuda_priv {
	struct gpu_rt rt;   /* read-only after alloc */
	bool registered;    /* pinned: the host arena is registered */
	void *dev;          /* cuda: the arena, device memory */
	pthread_mutex_t lock;
	pthread_cond_t freed; /* a slot became free */
	struct cuda_slot slot[CUDA_NBOUNCE]; /* busy: lock */
	unsigned long exports; /* outstanding exports: lock */
	uint64_t export_bytes; /* their device bytes, pooled ones too: lock */
	uint64_t export_cap;   /* what exports may take (set at alloc) */
	struct cuda_export *pool; /* released buffers, newest first: lock */
	unsigned npool;           /* how many: lock */
};

/* One export: its device buffer, what it counts against the budget, its
 * IPC handle and its owner (buffers are reused for that owner alone). */
struct cuda_export {
	void *buf;
	uint64_t cap;
	uint8_t ipc[64];
	uint32_t uid, gid, ns;
	struct cuda_export *next; /* in the pool */
};

static struct cuda_priv *cuda_priv(const struct gpu_arena *a)
{
	return a->priv;
}

static int cuda_range_ok(const struct gpu_arena *a, uint64_t off,
			 uint64_t len)
{
	return off <= a->size && len <= a->size - off;
}

/* ------------------------------------------------------------ common */

static int cuda_priv_new(struct gpu_arena *a, const char *kind, int device,
			 char *err, size_t errlen)
{
	struct cuda_priv *p;
	char why[384], spec[32];
	int rc;

	/* Name the option as the user wrote it: l1=cuda, l1=cuda:1. */
	if (strcmp(kind, "cuda") == 0 && device != 0)
		snprintf(spec, sizeof(spec), "%s:%d", kind, device);
	else
		snprintf(spec, sizeof(spec), "%s", kind);
	p = calloc(1, sizeof(*p));
	if (!p) {
		snprintf(err, errlen, "l1=%s: out of memory", spec);
		return -ENOMEM;
	}
	rc = gpu_rt_load(&p->rt, why, sizeof(why));
	if (rc == 0) {
		rc = gpu_rt_open_device(&p->rt, device, why, sizeof(why));
		if (rc < 0)
			gpu_rt_unload(&p->rt);
	}
	if (rc < 0) {
		snprintf(err, errlen, "l1=%s: %s", spec, why);
		free(p);
		return rc;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->freed, NULL);
	a->priv = p;
	a->device = device;
	return 0;
}

/* Frees pooled buffers until at most keep are left (oldest first).
 * Takes p->lock. */
static void pool_drain(struct gpu_arena *a, struct cuda_priv *p,
		       unsigned keep)
{
	while (1) {
		struct cuda_export **pp, *e;

		pthread_mutex_lock(&p->lock);
		if (p->npool <= keep) {
			pthread_mutex_unlock(&p->lock);
			return;
		}
		for (pp = &p->pool; (*pp)->next; pp = &(*pp)->next)
			;
		e = *pp;
		*pp = NULL;
		p->npool--;
		p->export_bytes -= e->cap;
		pthread_mutex_unlock(&p->lock);
		if (a->device >= 0)
			p->rt.SetDevice(a->device);
		p->rt.Free(e->buf);
		free(e);
	}
}

static void cuda_priv_free(struct gpu_arena *a)
{
	struct cuda_priv *p = cuda_priv(a);

	if (!p)
		return;
	pool_drain(a, p, 0);
	pthread_cond_destroy(&p->freed);
	pthread_mutex_destroy(&p->lock);
	gpu_rt_unload(&p->rt);
	free(p);
	a->priv = NULL;
}

/* ------------------------------------------------------------ pinned */

static int pinned_alloc(struct gpu_arena *a, uint64_t size, int device,
			char *err, size_t errlen)
{
	struct cuda_priv *p;
	int rc, cr;

	rc = cuda_priv_new(a, "pinned", device, err, errlen);
	if (rc < 0)
		return rc;
	p = cuda_priv(a);
	rc = gpu_host_map(a, size, "kvfs-l1-pinned", err, errlen);
	if (rc < 0)
		goto err_priv;
	cr = p->rt.HostRegister(a->host, size,
				GPU_RT_HOST_REGISTER_PORTABLE |
					GPU_RT_HOST_REGISTER_MAPPED);
	if (cr == GPU_RT_ERR_NOT_SUPPORTED) {
		/* Some platforms cannot map host memory for the device;
		 * page-locked is what DMA needs. */
		p->rt.GetLastError();
		cr = p->rt.HostRegister(a->host, size,
					GPU_RT_HOST_REGISTER_PORTABLE);
	}
	if (cr != GPU_RT_SUCCESS) {
		snprintf(err, errlen,
			 "l1=pinned: cudaHostRegister of %llu bytes: %s (%s)",
			 (unsigned long long)size, p->rt.GetErrorString(cr),
			 gpu_rt_errname(&p->rt, cr));
		rc = gpu_rt_errno(cr);
		if (rc == -EIO || rc == -EINVAL)
			rc = -ENOMEM; /* mostly RLIMIT_MEMLOCK or no memory */
		goto err_unmap;
	}
	p->registered = true;
	{
		/* Exports of a pinned arena are device memory the engines'
		 * GPU shares: at most a quarter of it, nor more than the
		 * arena. */
		size_t fr = 0, tot = 0;

		p->export_cap = size;
		if (p->rt.MemGetInfo(&fr, &tot) == GPU_RT_SUCCESS && tot &&
		    tot / 4 < p->export_cap)
			p->export_cap = tot / 4;
	}
	a->device = device;
	a->handle_kind = KVFS_HANDLE_HOST_MMAP;
	return 0;

err_unmap:
	gpu_host_unmap(a);
err_priv:
	cuda_priv_free(a);
	a->device = -1;
	return rc;
}

static void pinned_free(struct gpu_arena *a)
{
	struct cuda_priv *p = cuda_priv(a);

	if (p && p->registered && a->host) {
		p->rt.SetDevice(a->device);
		p->rt.HostUnregister(a->host);
		p->registered = false;
	}
	gpu_host_unmap(a);
	cuda_priv_free(a);
}

/* -------------------------------------------------------------- cuda */

static struct cuda_slot *slot_get(struct cuda_priv *p)
{
	struct cuda_slot *s = NULL;
	int i;

	pthread_mutex_lock(&p->lock);
	while (!s) {
		for (i = 0; i < CUDA_NBOUNCE; i++) {
			if (!p->slot[i].busy) {
				s = &p->slot[i];
				s->busy = true;
				break;
			}
		}
		if (!s)
			pthread_cond_wait(&p->freed, &p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return s;
}

static void slot_put(struct cuda_priv *p, struct cuda_slot *s)
{
	pthread_mutex_lock(&p->lock);
	s->busy = false;
	pthread_cond_signal(&p->freed);
	pthread_mutex_unlock(&p->lock);
}

static void cuda_slots_free(struct cuda_priv *p)
{
	int i;

	for (i = 0; i < CUDA_NBOUNCE; i++) {
		if (p->slot[i].stream)
			p->rt.StreamDestroy(p->slot[i].stream);
		if (p->slot[i].buf)
			p->rt.FreeHost(p->slot[i].buf);
		p->slot[i].stream = NULL;
		p->slot[i].buf = NULL;
	}
}

static int cuda_fail(struct cuda_priv *p, int cr, const char *what,
		     uint64_t bytes, char *err, size_t errlen)
{
	snprintf(err, errlen, "l1=cuda: %s of %llu bytes: %s (%s)", what,
		 (unsigned long long)bytes, p->rt.GetErrorString(cr),
		 gpu_rt_errname(&p->rt, cr));
	return gpu_rt_errno(cr);
}

static int cuda_alloc(struct gpu_arena *a, uint64_t size, int device,
		      char *err, size_t errlen)
{
	struct cuda_priv *p;
	int rc, cr, i;

	rc = cuda_priv_new(a, "cuda", device, err, errlen);
	if (rc < 0)
		return rc;
	p = cuda_priv(a);
	cr = p->rt.Malloc(&p->dev, size);
	if (cr != GPU_RT_SUCCESS) {
		p->dev = NULL;
		rc = cuda_fail(p, cr, "cudaMalloc", size, err, errlen);
		goto err_priv;
	}
	/* Stale device memory of an earlier process must not show through
	 * the holes of a chunk. */
	cr = p->rt.Memset(p->dev, 0, size);
	if (cr == GPU_RT_SUCCESS)
		cr = p->rt.DeviceSynchronize();
	if (cr != GPU_RT_SUCCESS) {
		rc = cuda_fail(p, cr, "cudaMemset", size, err, errlen);
		goto err_dev;
	}
	for (i = 0; i < CUDA_NBOUNCE; i++) {
		cr = p->rt.HostAlloc(&p->slot[i].buf, CUDA_BOUNCE_BYTES,
				     GPU_RT_HOST_ALLOC_PORTABLE);
		if (cr != GPU_RT_SUCCESS) {
			p->slot[i].buf = NULL;
			rc = cuda_fail(p, cr, "cudaHostAlloc (bounce)",
				       CUDA_BOUNCE_BYTES, err, errlen);
			goto err_slots;
		}
		cr = p->rt.StreamCreateWithFlags(&p->slot[i].stream,
						 GPU_RT_STREAM_NON_BLOCKING);
		if (cr != GPU_RT_SUCCESS) {
			p->slot[i].stream = NULL;
			rc = cuda_fail(p, cr, "cudaStreamCreate", 0, err,
				       errlen);
			goto err_slots;
		}
	}
	a->size = size;
	a->host = NULL;
	a->device = device;
	a->handle_kind = KVFS_HANDLE_CUDA_IPC;
	p->export_cap = size; /* handles: at most the arena again */
	return 0;

err_slots:
	cuda_slots_free(p);
err_dev:
	p->rt.Free(p->dev);
err_priv:
	cuda_priv_free(a);
	a->device = -1;
	return rc;
}

static void cuda_free(struct gpu_arena *a)
{
	struct cuda_priv *p = cuda_priv(a);

	if (!p)
		return;
	p->rt.SetDevice(a->device);
	cuda_slots_free(p);
	if (p->dev)
		p->rt.Free(p->dev);
	p->dev = NULL;
	cuda_priv_free(a);
}

/* Copies through one bounce buffer; pieces of CUDA_BOUNCE_BYTES. */
static int cuda_copy(struct gpu_arena *a, uint64_t off, void *host,
		     size_t len, bool in)
{
	struct cuda_priv *p = cuda_priv(a);
	struct cuda_slot *s;
	size_t done = 0;
	int cr = GPU_RT_SUCCESS;

	if (!cuda_range_ok(a, off, len))
		return -EINVAL;
	if (len == 0)
		return 0;
	/* The current device is per thread, and FUSE threads are many. */
	cr = p->rt.SetDevice(a->device);
	if (cr != GPU_RT_SUCCESS)
		return gpu_rt_errno(cr);
	s = slot_get(p);
	while (done < len) {
		size_t n = len - done;
		char *d = (char *)p->dev + off + done;

		if (n > CUDA_BOUNCE_BYTES)
			n = CUDA_BOUNCE_BYTES;
		if (in) {
			memcpy(s->buf, (const char *)host + done, n);
			cr = p->rt.MemcpyAsync(d, s->buf, n, GPU_RT_H2D,
					       s->stream);
		} else {
			cr = p->rt.MemcpyAsync(s->buf, d, n, GPU_RT_D2H,
					       s->stream);
		}
		if (cr == GPU_RT_SUCCESS)
			cr = p->rt.StreamSynchronize(s->stream);
		if (cr != GPU_RT_SUCCESS)
			break;
		if (!in)
			memcpy((char *)host + done, s->buf, n);
		done += n;
	}
	slot_put(p, s);
	return gpu_rt_errno(cr);
}

static int cuda_copy_in(struct gpu_arena *a, uint64_t off, const void *src,
			size_t len)
{
	return cuda_copy(a, off, (void *)src, len, true);
}

static int cuda_copy_out(struct gpu_arena *a, uint64_t off, void *dst,
			 size_t len)
{
	return cuda_copy(a, off, dst, len, false);
}

static int cuda_zero(struct gpu_arena *a, uint64_t off, size_t len)
{
	struct cuda_priv *p = cuda_priv(a);
	struct cuda_slot *s;
	int cr;

	if (!cuda_range_ok(a, off, len))
		return -EINVAL;
	if (len == 0)
		return 0;
	cr = p->rt.SetDevice(a->device);
	if (cr != GPU_RT_SUCCESS)
		return gpu_rt_errno(cr);
	s = slot_get(p);
	cr = p->rt.MemsetAsync((char *)p->dev + off, 0, len, s->stream);
	if (cr == GPU_RT_SUCCESS)
		cr = p->rt.StreamSynchronize(s->stream);
	slot_put(p, s);
	return gpu_rt_errno(cr);
}

static int cuda_move(struct gpu_arena *a, uint64_t dst, uint64_t src,
		     size_t len)
{
	struct cuda_priv *p = cuda_priv(a);
	struct cuda_slot *s;
	int cr;

	if (!gpu_move_ok(a, dst, src, len))
		return -EINVAL;
	if (len == 0)
		return 0;
	cr = p->rt.SetDevice(a->device);
	if (cr != GPU_RT_SUCCESS)
		return gpu_rt_errno(cr);
	s = slot_get(p);
	cr = p->rt.MemcpyAsync((char *)p->dev + dst, (char *)p->dev + src,
			       len, GPU_RT_D2D, s->stream);
	if (cr == GPU_RT_SUCCESS)
		cr = p->rt.StreamSynchronize(s->stream);
	slot_put(p, s);
	return gpu_rt_errno(cr);
}

/*
 * One export (see struct gpu_export): a device buffer of its own, counted
 * against the budget, filled from src (kind GPU_RT_D2D: the device arena,
 * on a slot's stream; GPU_RT_H2D: the registered host arena, a DMA on the
 * legacy stream), its tail zeroed, and its IPC handle.
 *
 * A released buffer goes to the pool and is reused, with its IPC handle,
 * for the next export of the same owner (uid, gid and namespace) and the
 * same size: no cudaMalloc, cudaIpcGetMemHandle or cudaFree per chunk, and
 * an engine that keeps the buffer mapped reads the next chunk through the
 * mapping it has. Isolation: whoever still maps a released buffer sees
 * what is put in it next, so that is only ever a chunk of the same
 * namespace given to the same uid and gid, who passed its permission
 * check for that handle (fs_ioctl.c); a buffer never changes owner (the
 * budget frees it instead).
 */
static void gpu_cuda_unexport_free(struct gpu_arena *a,
				   struct cuda_export *e);

static struct cuda_export *pool_take(struct cuda_priv *p, uint64_t cap,
				     const struct gpu_export *ex)
{
	struct cuda_export **pp, *e;

	for (pp = &p->pool; (e = *pp); pp = &e->next)
		if (e->cap == cap && e->uid == ex->uid && e->gid == ex->gid &&
		    e->ns == ex->ns) {
			*pp = e->next;
			p->npool--;
			p->exports++;
			return e;
		}
	return NULL;
}

static int export_fill(struct cuda_priv *p, struct gpu_arena *a,
		       struct cuda_export *e, const void *src, uint64_t len,
		       int kind)
{
	struct cuda_slot *s;
	int cr;

	cr = p->rt.SetDevice(a->device);
	if (cr != GPU_RT_SUCCESS)
		return cr;
	if (kind == GPU_RT_D2D) {
		s = slot_get(p);
		if (len)
			cr = p->rt.MemcpyAsync(e->buf, src, len, GPU_RT_D2D,
					       s->stream);
		/* The tail is readable through the handle: no stale bytes
		 * in it. */
		if (cr == GPU_RT_SUCCESS && e->cap > len)
			cr = p->rt.MemsetAsync((char *)e->buf + len, 0,
					       e->cap - len, s->stream);
		if (cr == GPU_RT_SUCCESS)
			cr = p->rt.StreamSynchronize(s->stream);
		slot_put(p, s);
	} else {
		/* from page-locked memory: a DMA at PCIe speed */
		if (len)
			cr = p->rt.Memcpy(e->buf, src, len, kind);
		if (cr == GPU_RT_SUCCESS && e->cap > len)
			cr = p->rt.Memset((char *)e->buf + len, 0,
					  e->cap - len);
		if (cr == GPU_RT_SUCCESS)
			cr = p->rt.DeviceSynchronize();
	}
	return cr;
}

static int export_new(struct gpu_arena *a, const void *src, uint64_t len,
		      int kind, struct gpu_export *ex)
{
	struct cuda_priv *p = cuda_priv(a);
	struct cuda_export *e = NULL;
	struct gpu_rt_ipc ipc;
	uint64_t cap;
	int cr;

	cap = (len + CUDA_EXPORT_ALIGN - 1) / CUDA_EXPORT_ALIGN *
	      CUDA_EXPORT_ALIGN;
	if (cap == 0)
		cap = CUDA_EXPORT_ALIGN; /* an empty chunk still has a buffer */
	pthread_mutex_lock(&p->lock);
	e = pool_take(p, cap, ex);
	pthread_mutex_unlock(&p->lock);
	if (e) {
		cr = export_fill(p, a, e, src, len, kind);
		if (cr != GPU_RT_SUCCESS) {
			gpu_cuda_unexport_free(a, e);
			return gpu_rt_errno(cr);
		}
		goto done;
	}
	/*
	 * Handle buffers are device memory outside the arena: together they
	 * may take at most export_cap (cuda: the arena's size; pinned: also
	 * at most a quarter of the GPU) plus one buffer, so readers holding
	 * handles cannot exhaust the GPU. Pooled buffers count too and are
	 * freed first. Past it: -ENOSPC until handles are released.
	 */
	for (;;) {
		unsigned npool;

		pthread_mutex_lock(&p->lock);
		if (p->export_bytes + cap <= p->export_cap + CUDA_EXPORT_ALIGN ||
		    !p->export_bytes) {
			p->export_bytes += cap;
			pthread_mutex_unlock(&p->lock);
			break;
		}
		npool = p->npool;
		pthread_mutex_unlock(&p->lock);
		if (!npool)
			return -ENOSPC;
		pool_drain(a, p, npool - 1);
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		cr = GPU_RT_SUCCESS;
		goto err_budget;
	}
	e->cap = cap;
	e->uid = ex->uid;
	e->gid = ex->gid;
	e->ns = ex->ns;
	cr = p->rt.SetDevice(a->device);
	if (cr == GPU_RT_SUCCESS)
		cr = p->rt.Malloc(&e->buf, cap);
	if (cr != GPU_RT_SUCCESS)
		goto err_budget;
	cr = export_fill(p, a, e, src, len, kind);
	if (cr == GPU_RT_SUCCESS)
		cr = p->rt.IpcGetMemHandle(&ipc, e->buf);
	if (cr != GPU_RT_SUCCESS) {
		p->rt.Free(e->buf);
		goto err_budget;
	}
	memcpy(e->ipc, ipc.reserved, sizeof(e->ipc));
	pthread_mutex_lock(&p->lock);
	p->exports++;
	pthread_mutex_unlock(&p->lock);
done:
	memcpy(ex->ipc, e->ipc, sizeof(ex->ipc));
	ex->offset = 0;
	ex->length = len;
	ex->device = a->device;
	ex->cookie = e;
	return 0;

err_budget:
	free(e);
	pthread_mutex_lock(&p->lock);
	p->export_bytes -= cap;
	pthread_mutex_unlock(&p->lock);
	return cr == GPU_RT_SUCCESS ? -ENOMEM : gpu_rt_errno(cr);
}

/* Clears what an export fills, keeping its owner (the caller's input). */
static void export_clear(struct gpu_export *ex)
{
	uint32_t uid = ex->uid, gid = ex->gid, ns = ex->ns;

	memset(ex, 0, sizeof(*ex));
	ex->uid = uid;
	ex->gid = gid;
	ex->ns = ns;
}

static int cuda_export(struct gpu_arena *a, uint64_t off, uint64_t len,
		       struct gpu_export *ex)
{
	struct cuda_priv *p = cuda_priv(a);

	export_clear(ex);
	if (!cuda_range_ok(a, off, len))
		return -EINVAL;
	return export_new(a, (const char *)p->dev + off, len, GPU_RT_D2D, ex);
}

/* pinned L1 on request (KVFS_IOC_HANDLE with kind CUDA_IPC): the chunk
 * DMA'd from the page-locked arena into a device buffer of its own. */
static int pinned_export(struct gpu_arena *a, uint64_t off, uint64_t len,
			 struct gpu_export *ex)
{
	export_clear(ex);
	if (!cuda_range_ok(a, off, len))
		return -EINVAL;
	return export_new(a, (const char *)a->host + off, len, GPU_RT_H2D, ex);
}

/* A buffer that failed or that the pool cannot keep: freed. */
static void gpu_cuda_unexport_free(struct gpu_arena *a, struct cuda_export *e)
{
	struct cuda_priv *p = cuda_priv(a);

	p->rt.SetDevice(a->device);
	p->rt.Free(e->buf);
	pthread_mutex_lock(&p->lock);
	p->exports--;
	p->export_bytes -= e->cap;
	pthread_mutex_unlock(&p->lock);
	free(e);
}

static void cuda_unexport(struct gpu_arena *a, void *cookie)
{
	struct cuda_priv *p = cuda_priv(a);
	struct cuda_export *e = cookie;

	if (!e)
		return;
	pthread_mutex_lock(&p->lock);
	p->exports--;
	e->next = p->pool;
	p->pool = e;
	p->npool++;
	pthread_mutex_unlock(&p->lock);
	pool_drain(a, p, CUDA_POOL_MAX);
}

/* ------------------------------------------------------------ imports */

/* An engine's device buffer, opened from its IPC handle (gpu.h). */
struct gpu_import {
	void *dptr;
	uint64_t len;
};

static const struct gpu_ops gpu_pinned_ops, gpu_cuda_ops;

int gpu_import_open(struct gpu_arena *a, const uint8_t ipc[64], uint64_t len,
		    struct gpu_import **out)
{
	struct cuda_priv *p = cuda_priv(a);
	struct gpu_rt_ipc h;
	struct gpu_import *im;
	int cr;

	*out = NULL;
	if (a->ops != &gpu_pinned_ops && a->ops != &gpu_cuda_ops)
		return -ENOTSUP;
	im = calloc(1, sizeof(*im));
	if (!im)
		return -ENOMEM;
	memcpy(&h, ipc, sizeof(h));
	p->rt.SetDevice(a->device);
	cr = p->rt.IpcOpenMemHandle(&im->dptr, h, GPU_RT_IPC_LAZY_PEER);
	if (cr != GPU_RT_SUCCESS) {
		free(im);
		return -EIO;
	}
	im->len = len;
	*out = im;
	return 0;
}

int gpu_import_copy(struct gpu_arena *a, struct gpu_import *im,
		    uint64_t dst_off, uint64_t arena_off, const void *host_src,
		    size_t len)
{
	struct cuda_priv *p = cuda_priv(a);
	const void *src;
	int kind;

	if (dst_off > im->len || len > im->len - dst_off)
		return -EFAULT;
	if (host_src) {
		src = host_src;
		kind = GPU_RT_H2D;
	} else if (!cuda_range_ok(a, arena_off, len)) {
		return -EINVAL;
	} else if (a->host) { /* pinned: DMA from the page-locked arena */
		src = (const char *)a->host + arena_off;
		kind = GPU_RT_H2D;
	} else {
		src = (const char *)p->dev + arena_off;
		kind = GPU_RT_D2D;
	}
	p->rt.SetDevice(a->device);
	return p->rt.Memcpy((char *)im->dptr + dst_off, src, len, kind) ==
			       GPU_RT_SUCCESS
		       ? 0
		       : -EIO;
}

void gpu_import_close(struct gpu_arena *a, struct gpu_import *im)
{
	struct cuda_priv *p = cuda_priv(a);

	if (!im)
		return;
	p->rt.SetDevice(a->device);
	p->rt.IpcCloseMemHandle(im->dptr);
	free(im);
}

static const struct gpu_ops gpu_pinned_ops = {
	.name = "pinned",
	.alloc = pinned_alloc,
	.free = pinned_free,
	.copy_in = gpu_host_copy_in,
	.copy_out = gpu_host_copy_out,
	.export_handle = pinned_export,
	.unexport = cuda_unexport,
	.zero = gpu_host_zero,
	.move = gpu_host_move,
};

static const struct gpu_ops gpu_cuda_ops = {
	.name = "cuda",
	.alloc = cuda_alloc,
	.free = cuda_free,
	.copy_in = cuda_copy_in,
	.copy_out = cuda_copy_out,
	.export_handle = cuda_export,
	.unexport = cuda_unexport,
	.zero = cuda_zero,
	.move = cuda_move,
};

/* ------------------------------------------------------------ select */

const struct gpu_ops *gpu_cuda_backend(const char *kind, char *err,
				       size_t errlen)
{
	if (strcmp(kind, "pinned") == 0)
		return &gpu_pinned_ops;
	if (strcmp(kind, "cuda") == 0)
		return &gpu_cuda_ops;
	snprintf(err, errlen, "l1=%s: unknown CUDA backend", kind);
	return NULL;
}
