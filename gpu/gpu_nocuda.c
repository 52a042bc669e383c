/* gpu_nocuda.c - built instead of gpu_cuda.c when CUDA is not available. */
#include <errno.h>
#include <stdio.h>

#include "gpu/gpu_i.h"

const struct gpu_ops *gpu_cuda_backend(const char *kind, char *err,
				       size_t errlen)
{
	snprintf(err, errlen,
		 "l1=%s: this kvfs was built without CUDA (make CUDA=0 or no "
		 "CUDA toolkit found); use l1=host",
		 kind);
	return NULL;
}

int gpu_import_open(struct gpu_arena *a, const uint8_t ipc[64], uint64_t len,
		    struct gpu_import **out)
{
	(void)a;
	(void)ipc;
	(void)len;
	*out = NULL;
	return -ENOTSUP;
}

int gpu_import_copy(struct gpu_arena *a, struct gpu_import *im,
		    uint64_t dst_off, uint64_t arena_off, const void *host_src,
		    size_t len)
{
	(void)a;
	(void)im;
	(void)dst_off;
	(void)arena_off;
	(void)host_src;
	(void)len;
	return -ENOTSUP;
}

void gpu_import_close(struct gpu_arena *a, struct gpu_import *im)
{
	(void)a;
	(void)im;
}
