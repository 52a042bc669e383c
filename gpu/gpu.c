/* gpu.c - backend selection by spec string. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "gpu/gpu_i.h"

int gpu_arena_open(const char *spec, uint64_t size, struct gpu_arena *a,
		   char *err, size_t errlen)
{
	const struct gpu_ops *ops;
	int device = 0, rc;

	memset(a, 0, sizeof(*a));
	a->memfd = -1;
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
		snprintf(err, errlen, "l1=%s: expected host, pinned or cuda[:N]",
			 spec);
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
