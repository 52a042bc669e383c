/*
 * client_cuda.c - libkvfs: opening CUDA IPC handles in the engine's process.
 *
 * No CUDA headers and no libcudart at link time: the runtime is loaded by
 * gpu/gpu_rt.c when a handle is opened, so an engine whose process already
 * has a libcudart loaded (PyTorch's, say) shares that copy, and libkvfs
 * still loads on machines without CUDA.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu/gpu_rt.h"
#include "kvfs.h"

/*
 * The mappings this process opened, kept after kvfs_cuda_close for reuse:
 * the daemon hands the same buffer (and so the same IPC handle) back for
 * the next chunk of the same uid, gid and namespace (gpu/gpu.h), and
 * cudaIpcOpenMemHandle / cudaIpcCloseMemHandle cost far more than the copy
 * of a chunk. An entry in use (refs > 0) is never closed; an idle one is
 * closed when the table needs its place (least recently used first) or
 * when idle for CUDA_MAP_IDLE_NS at a later open or close. Each holds the
 * runtime it was opened with (loaded per new mapping, so $KVFS_CUDART is
 * read as before).
 */
#define CUDA_MAPS 32
#define CUDA_MAP_IDLE_NS (10ull * 1000000000ull)

struct cuda_map_priv {
	struct gpu_rt rt;
	uint8_t ipc[64];
	void *base; /* what cudaIpcOpenMemHandle returned; NULL: free slot */
	int device;
	unsigned refs;
	uint64_t used_ns; /* last open or close */
	bool cached;      /* in maps[] (else closed on its close) */
};

static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cuda_map_priv maps[CUDA_MAPS]; /* maps_lock */
static pid_t maps_pid; /* the process they belong to */

/* After fork, the parent's mappings and runtime state are not this
 * process's (CUDA does not survive fork): forgotten, never closed here. */
static void maps_forked(void)
{
	if (maps_pid == getpid())
		return;
	memset(maps, 0, sizeof(maps));
	maps_pid = getpid();
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* cudaIpcCloseMemHandle of p->base on its device, and its runtime
 * unloaded; maps_lock held. */
static int map_close(struct cuda_map_priv *p)
{
	int cur = 0, cr;

	if (p->rt.GetDevice(&cur) == GPU_RT_SUCCESS &&
	    p->rt.SetDevice(p->device) == GPU_RT_SUCCESS) {
		cr = p->rt.IpcCloseMemHandle(p->base);
		p->rt.SetDevice(cur);
	} else {
		cr = p->rt.IpcCloseMemHandle(p->base);
	}
	gpu_rt_unload(&p->rt);
	p->base = NULL;
	return cr;
}

/* Closes idle mappings unused since before now - CUDA_MAP_IDLE_NS. */
static void maps_trim(uint64_t now)
{
	for (int i = 0; i < CUDA_MAPS; i++)
		if (maps[i].base && !maps[i].refs &&
		    now - maps[i].used_ns > CUDA_MAP_IDLE_NS)
			(void)map_close(&maps[i]);
}

/* A slot for a new mapping: a free one, else the least recently used idle
 * one (closed first), else NULL (every mapping in use). */
static struct cuda_map_priv *maps_slot(void)
{
	struct cuda_map_priv *lru = NULL;

	for (int i = 0; i < CUDA_MAPS; i++) {
		if (!maps[i].base)
			return &maps[i];
		if (!maps[i].refs && (!lru || maps[i].used_ns < lru->used_ns))
			lru = &maps[i];
	}
	if (lru)
		(void)map_close(lru);
	return lru;
}

int kvfs_cuda_probe(char *err, size_t errlen)
{
	char buf[256];

	if (!err || errlen == 0) {
		err = buf;
		errlen = sizeof(buf);
	}
	return gpu_rt_probe(err, errlen);
}

/* Maps a runtime error of the IPC calls: a bad or released handle is -EIO. */
static int cuda_map_errno(int cr)
{
	int rc = gpu_rt_errno(cr);

	return (rc == -ENODEV || rc == -ENOMEM) ? rc : -EIO;
}

int kvfs_cuda_open(const struct kvfs_handle *h, int device,
		   struct kvfs_cuda_map *m)
{
	struct cuda_map_priv *p = NULL;
	struct gpu_rt rt;
	struct gpu_rt_ipc ipc;
	uint64_t now;
	char why[256];
	int cur = 0, cr, rc, i;
	void *base;

	if (!h || !m)
		return -EINVAL;
	memset(m, 0, sizeof(*m));
	if (h->version != KVFS_ABI_VERSION || h->size != sizeof(*h))
		return -EINVAL;
	if (h->kind != KVFS_HANDLE_CUDA_IPC)
		return -ENOTSUP;
	if (device < 0)
		device = h->device;
	if (device < 0)
		return -EINVAL;
	pthread_mutex_lock(&maps_lock);
	maps_forked();
	now = mono_ns();
	maps_trim(now);
	for (i = 0; i < CUDA_MAPS; i++)
		if (maps[i].base && maps[i].device == device &&
		    !memcmp(maps[i].ipc, h->ipc, sizeof(maps[i].ipc))) {
			p = &maps[i];
			goto mapped;
		}
	rc = gpu_rt_load(&rt, why, sizeof(why));
	if (rc < 0)
		goto out;
	/* Leave the engine's current device as it was. */
	cr = rt.GetDevice(&cur);
	if (cr != GPU_RT_SUCCESS) {
		rc = cuda_map_errno(cr);
		goto err_unload;
	}
	cr = rt.SetDevice(device);
	if (cr != GPU_RT_SUCCESS) {
		rc = -ENODEV;
		goto err_unload;
	}
	memcpy(ipc.reserved, h->ipc, sizeof(ipc.reserved));
	cr = rt.IpcOpenMemHandle(&base, ipc, GPU_RT_IPC_LAZY_PEER);
	rt.SetDevice(cur);
	if (cr != GPU_RT_SUCCESS) {
		/* Do not leave it for the engine's next cudaGetLastError. */
		rt.GetLastError();
		rc = cuda_map_errno(cr);
		goto err_unload;
	}
	p = maps_slot();
	if (!p) { /* every slot in use: this one is closed on its close */
		p = calloc(1, sizeof(*p));
		if (!p) {
			struct cuda_map_priv tmp = { .rt = rt, .base = base,
						     .device = device };

			(void)map_close(&tmp);
			rc = -ENOMEM;
			goto out;
		}
	} else {
		p->cached = true;
	}
	p->rt = rt;
	memcpy(p->ipc, h->ipc, sizeof(p->ipc));
	p->base = base;
	p->device = device;
mapped:
	p->refs++;
	p->used_ns = now;
	m->dptr = (char *)p->base + h->offset;
	m->length = h->length;
	m->device = device;
	m->priv = p;
	rc = 0;
	goto out;
err_unload:
	gpu_rt_unload(&rt);
out:
	pthread_mutex_unlock(&maps_lock);
	return rc;
}

int kvfs_cuda_close(struct kvfs_cuda_map *m)
{
	struct cuda_map_priv *p;
	int rc = 0;

	if (!m || !m->priv)
		return -EINVAL;
	p = m->priv;
	pthread_mutex_lock(&maps_lock);
	if (maps_pid != getpid()) { /* opened before a fork: not ours */
		pthread_mutex_unlock(&maps_lock);
		memset(m, 0, sizeof(*m));
		return 0;
	}
	p->used_ns = mono_ns();
	if (p->refs)
		p->refs--;
	if (!p->cached && !p->refs) {
		if (map_close(p) != GPU_RT_SUCCESS)
			rc = -EIO;
		free(p);
	}
	maps_trim(mono_ns());
	pthread_mutex_unlock(&maps_lock);
	memset(m, 0, sizeof(*m));
	return rc;
}
