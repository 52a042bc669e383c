/* gpu_nocuda.c - built instead of gpu_cuda.c when CUDA is not available. */
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
