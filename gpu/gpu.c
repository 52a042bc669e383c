/* gpu.c - backend selection by spec string. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "gpu/gpu_i.h"
#include "gpu/gpu_rt.h"

int gpu_arena_open(const char *spec, uint64_t size, struct gpu_arena *a,
		   char *err, size_t errlen)
{
	const struct gpu_ops *ops;
	int device = 0, rc;

	/* "auto": pinned where a GPU is usable, else (or if pinning fails,
	 * e.g. RLIMIT_MEMLOCK) host; a->ops->name says which it became. */
	if (spec && strcmp(spec, "auto") == 0) {
		if (strcmp(gpu_default_spec(), "pinned") == 0 &&
		    gpu_arena_open("pinned", size, a, err, errlen) == 0)
			return 0;
		spec = "host";
	}
	memset(a, 0, sizeof(*a));
	a->device = -1;
	if (spec == NULL || strcmp(spec, "host") == 0) {
		ops = &gpu_host_ops;
	} else if (strcmp(spec, "pinned") == 0) {
		ops = gpu_cuda_backend("pinned", err, errlen);
		if (!ops)
			return -ENODEV;
	} else if (strncmp(spec, "cuda", 4) == 0 &&
		   (spec[4] == '\0' || spec[4] == ':')) {
		if (spec[4] == ':') {
			char *end;
			long v = strtol(spec + 5, &end, 10);

			if (end == spec + 5 || *end != '\0' || v < 0 ||
			    v > 1024) {
				snprintf(err, errlen,
					 "l1=%s: bad CUDA device number", spec);
				return -EINVAL;
			}
			device = (int)v;
		}
		ops = gpu_cuda_backend("cuda", err, errlen);
		if (!ops)
			return -ENODEV;
	} else {
		snprintf(err, errlen,
			 "l1=%s: expected host, pinned, cuda[:N] or auto", spec);
		return -EINVAL;
	}
	a->ops = ops;
	rc = ops->alloc(a, size, device, err, errlen);
	if (rc < 0)
		a->ops = NULL;
	return rc;
}

void gpu_arena_close(struct gpu_arena *a)
{
	if (a->ops)
		a->ops->free(a);
	a->ops = NULL;
}

int gpu_arena_describe(const struct gpu_arena *a, char *buf, size_t len)
{
	const char *name = a->ops ? a->ops->name : "closed";

	if (a->device >= 0)
		return snprintf(buf, len, "%s:%d %llu bytes (%s memory)", name,
				a->device, (unsigned long long)a->size,
				a->host ? "pinned host" : "device");
	return snprintf(buf, len, "%s %llu bytes (host memory)", name,
			(unsigned long long)a->size);
}

const char *gpu_default_spec(void)
{
	struct gpu_rt rt;
	char err[256];
	int n = 0;

	if (!gpu_cuda_backend("pinned", err, sizeof(err)))
		return "host";
	if (gpu_rt_load(&rt, err, sizeof(err)) < 0)
		return "host";
	if (rt.GetDeviceCount(&n) != GPU_RT_SUCCESS)
		n = 0;
	gpu_rt_unload(&rt);
	return n > 0 ? "pinned" : "host";
}
