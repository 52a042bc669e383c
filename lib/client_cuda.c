/*
 * client_cuda.c - libkvfs: opening CUDA IPC handles in the engine's process.
 *
 * No CUDA headers and no libcudart at link time: the runtime is loaded by
 * gpu/gpu_rt.c when a handle is opened, so an engine whose process already
 * has a libcudart loaded (PyTorch's, say) shares that copy, and libkvfs
 * still loads on machines without CUDA.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu_rt.h"
#include "kvfs.h"

/* Behind kvfs_cuda_map.priv; owned by one mapping. */
struct cuda_map_priv {
	struct gpu_rt rt;
	void *base; /* what cudaIpcOpenMemHandle returned */
	int device;
};

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
	struct cuda_map_priv *p;
	struct gpu_rt_ipc ipc;
	char why[256];
	int cur = 0, cr, rc;

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
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	rc = gpu_rt_load(&p->rt, why, sizeof(why));
	if (rc < 0)
		goto err_free;
	/* Leave the engine's current device as it was. */
	cr = p->rt.GetDevice(&cur);
	if (cr != GPU_RT_SUCCESS) {
		rc = cuda_map_errno(cr);
		goto err_unload;
	}
	cr = p->rt.SetDevice(device);
	if (cr != GPU_RT_SUCCESS) {
		rc = -ENODEV;
		goto err_unload;
	}
	memcpy(ipc.reserved, h->ipc, sizeof(ipc.reserved));
	cr = p->rt.IpcOpenMemHandle(&p->base, ipc, GPU_RT_IPC_LAZY_PEER);
	p->rt.SetDevice(cur);
	if (cr != GPU_RT_SUCCESS) {
		/* Do not leave it for the engine's next cudaGetLastError. */
		p->rt.GetLastError();
		rc = cuda_map_errno(cr);
		goto err_unload;
	}
	p->device = device;
	m->dptr = (char *)p->base + h->offset;
	m->length = h->length;
	m->device = device;
	m->priv = p;
	return 0;

err_unload:
	gpu_rt_unload(&p->rt);
err_free:
	free(p);
	return rc;
}

int kvfs_cuda_close(struct kvfs_cuda_map *m)
{
	struct cuda_map_priv *p;
	int cur = 0, cr, rc = 0;

	if (!m || !m->priv)
		return -EINVAL;
	p = m->priv;
	/* The mapping belongs to its device's context. */
	if (p->rt.GetDevice(&cur) == GPU_RT_SUCCESS &&
	    p->rt.SetDevice(p->device) == GPU_RT_SUCCESS) {
		cr = p->rt.IpcCloseMemHandle(p->base);
		p->rt.SetDevice(cur);
	} else {
		cr = p->rt.IpcCloseMemHandle(p->base);
	}
	if (cr != GPU_RT_SUCCESS)
		rc = cuda_map_errno(cr);
	gpu_rt_unload(&p->rt);
	free(p);
	memset(m, 0, sizeof(*m));
	return rc;
}
