/*
 * gpu_rt.c - loads the CUDA runtime with dlopen (see gpu_rt.h for why).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu_rt.h"

/* Sonames, newest first; a process that already has one loaded keeps it. */
static const char *const rt_sonames[] = {
	"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
	"libcudart.so",
};

static void *rt_try(const char *path, int extra, struct gpu_rt *rt,
		    char *last, size_t lastlen)
{
	void *dl;
	const char *e;

	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE | extra);
	if (dl) {
		snprintf(rt->path, sizeof(rt->path), "%s", path);
		return dl;
	}
	e = dlerror();
	/* RTLD_NOLOAD misses are expected; keep the reason of real tries. */
	if (!extra && e)
		snprintf(last, lastlen, "%s", e);
	return NULL;
}

static void *rt_open(struct gpu_rt *rt, char *last, size_t lastlen)
{
	const char *env = getenv("KVFS_CUDART");
	const char *home = getenv("CUDA_HOME");
	char path[512];
	void *dl;
	size_t i;

	if (env && *env)
		return rt_try(env, 0, rt, last, lastlen);
	for (i = 0; i < sizeof(rt_sonames) / sizeof(rt_sonames[0]); i++) {
		dl = rt_try(rt_sonames[i], RTLD_NOLOAD, rt, last, lastlen);
		if (dl)
			return dl;
	}
	if (home && *home) {
		snprintf(path, sizeof(path), "%s/lib64/libcudart.so", home);
		dl = rt_try(path, 0, rt, last, lastlen);
		if (dl)
			return dl;
	}
	for (i = 0; i < sizeof(rt_sonames) / sizeof(rt_sonames[0]); i++) {
		dl = rt_try(rt_sonames[i], 0, rt, last, lastlen);
		if (dl)
			return dl;
	}
	return rt_try("/usr/local/cuda/lib64/libcudart.so", 0, rt, last,
		      lastlen);
}

/* One row per function: its name in libcudart and where it goes in rt. */
#define RT_SYM(f) { "cuda" #f, offsetof(struct gpu_rt, f) }
static const struct {
	const char *name;
	size_t off;
} rt_syms[] = {
	RT_SYM(GetDeviceCount),
	RT_SYM(SetDevice),
	RT_SYM(GetDevice),
	RT_SYM(DriverGetVersion),
	RT_SYM(RuntimeGetVersion),
	RT_SYM(GetErrorString),
	RT_SYM(GetErrorName),
	RT_SYM(GetLastError),
	RT_SYM(Malloc),
	RT_SYM(Free),
	RT_SYM(HostAlloc),
	RT_SYM(FreeHost),
	RT_SYM(HostRegister),
	RT_SYM(HostUnregister),
	RT_SYM(Memcpy),
	RT_SYM(MemcpyAsync),
	RT_SYM(Memset),
	RT_SYM(MemsetAsync),
	RT_SYM(StreamCreateWithFlags),
	RT_SYM(StreamDestroy),
	RT_SYM(StreamSynchronize),
	RT_SYM(DeviceSynchronize),
	RT_SYM(IpcGetMemHandle),
	RT_SYM(IpcOpenMemHandle),
	RT_SYM(IpcCloseMemHandle),
	RT_SYM(MemGetInfo),
	RT_SYM(DeviceGetPCIBusId),
	RT_SYM(EventCreate),
	RT_SYM(EventRecord),
	RT_SYM(EventSynchronize),
	RT_SYM(EventElapsedTime),
	RT_SYM(EventDestroy),
};

int gpu_rt_load(struct gpu_rt *rt, char *err, size_t errlen)
{
	char last[256] = "not found";
	size_t i;

	memset(rt, 0, sizeof(*rt));
	rt->dl = rt_open(rt, last, sizeof(last));
	if (!rt->dl) {
		snprintf(err, errlen, "no CUDA runtime (libcudart: %s)", last);
		return -ENODEV;
	}
	for (i = 0; i < sizeof(rt_syms) / sizeof(rt_syms[0]); i++) {
		void *p = dlsym(rt->dl, rt_syms[i].name);

		if (!p) {
			snprintf(err, errlen, "CUDA runtime %s lacks %s",
				 rt->path, rt_syms[i].name);
			gpu_rt_unload(rt);
			return -ENODEV;
		}
		/* POSIX guarantees data and function pointers convert. */
		memcpy((char *)rt + rt_syms[i].off, &p, sizeof(p));
	}
	return 0;
}

void gpu_rt_unload(struct gpu_rt *rt)
{
	/* RTLD_NODELETE: dlclose only drops the reference. */
	if (rt->dl)
		dlclose(rt->dl);
	memset(rt, 0, sizeof(*rt));
}

const char *gpu_rt_errname(const struct gpu_rt *rt, int code)
{
	const char *s = rt->GetErrorName ? rt->GetErrorName(code) : NULL;

	return s ? s : "cudaErrorUnknown";
}

int gpu_rt_errno(int code)
{
	switch (code) {
	case GPU_RT_SUCCESS:
		return 0;
	case GPU_RT_ERR_MEMORY_ALLOCATION:
		return -ENOMEM;
	case GPU_RT_ERR_INVALID_VALUE:
		return -EINVAL;
	case GPU_RT_ERR_INSUFFICIENT_DRIVER:
	case GPU_RT_ERR_NO_DEVICE:
	case GPU_RT_ERR_INVALID_DEVICE:
		return -ENODEV;
	case GPU_RT_ERR_NOT_SUPPORTED:
		return -ENOTSUP;
	default:
		return -EIO;
	}
}

int gpu_rt_open_device(struct gpu_rt *rt, int device, char *err,
		       size_t errlen)
{
	int count = 0, rc;

	rc = rt->GetDeviceCount(&count);
	if (rc == GPU_RT_ERR_INSUFFICIENT_DRIVER) {
		int drv = 0, run = 0;

		rt->DriverGetVersion(&drv);
		rt->RuntimeGetVersion(&run);
		if (drv == 0)
			snprintf(err, errlen,
				 "no CUDA driver (cudaErrorInsufficientDriver: "
				 "%s; runtime %d.%d)",
				 rt->GetErrorString(rc), run / 1000,
				 run % 1000 / 10);
		else
			snprintf(err, errlen,
				 "CUDA driver too old (cudaErrorInsufficientDriver:"
				 " driver %d.%d, runtime %d.%d)",
				 drv / 1000, drv % 1000 / 10, run / 1000,
				 run % 1000 / 10);
		return -ENODEV;
	}
	if (rc != GPU_RT_SUCCESS) {
		snprintf(err, errlen, "no usable CUDA device (%s: %s)",
			 gpu_rt_errname(rt, rc), rt->GetErrorString(rc));
		return -ENODEV;
	}
	if (count <= 0) {
		snprintf(err, errlen, "no CUDA device visible");
		return -ENODEV;
	}
	if (device < 0 || device >= count) {
		snprintf(err, errlen, "CUDA device %d does not exist (%d device%s)",
			 device, count, count == 1 ? "" : "s");
		return -ENODEV;
	}
	rc = rt->SetDevice(device);
	if (rc != GPU_RT_SUCCESS) {
		snprintf(err, errlen, "CUDA device %d unusable (%s: %s)", device,
			 gpu_rt_errname(rt, rc), rt->GetErrorString(rc));
		return -ENODEV;
	}
	return count;
}

int gpu_rt_probe(char *err, size_t errlen)
{
	struct gpu_rt rt;
	int rc;

	rc = gpu_rt_load(&rt, err, errlen);
	if (rc < 0)
		return rc;
	rc = gpu_rt_open_device(&rt, 0, err, errlen);
	gpu_rt_unload(&rt);
	return rc;
}
