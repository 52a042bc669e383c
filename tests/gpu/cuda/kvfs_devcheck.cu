/*
 * kvfs_devcheck.cu - an engine-side check written in CUDA C++ and built
 * with nvcc: proves include/kvfs.h and libkvfs build and link into a CUDA
 * program, and compares chunk bytes on the device with a kernel.
 *
 *   kvfs_devcheck FILE...   (chunk files on a kvfs mount)
 *
 * For each chunk: read() it (the reference, copied to the device), take a
 * handle, bring the chunk onto the device the zero-copy way (CUDA IPC
 * handle -> kvfs_cuda_open; HOST_MMAP -> mmap + cudaMemcpy), and count
 * differing bytes with a kernel. Exit 0 when every chunk matches, 1 on a
 * mismatch or error, 77 when no CUDA device is visible. Links the shared
 * libcudart, so kvfs_cuda_open finds and shares this process's runtime.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvfs.h"

__global__ void count_diff(const unsigned char *a, const unsigned char *b,
			   size_t n, unsigned long long *bad)
{
	unsigned long long mine = 0;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		mine += a[i] != b[i];
	if (mine)
		atomicAdd(bad, mine);
}

static int fail(const char *path, const char *what, const char *why)
{
	fprintf(stderr, "kvfs_devcheck: %s: %s: %s\n", path, what, why);
	return 1;
}

#define CU(call, what)                                                       \
	do {                                                                 \
		cudaError_t e_ = (call);                                     \
		if (e_ != cudaSuccess)                                       \
			return fail(path, what, cudaGetErrorString(e_));     \
	} while (0)

static int check_one(const char *path)
{
	struct kvfs_handle h;
	struct kvfs_cuda_map m;
	unsigned char *host = NULL, *ref = NULL, *tmp = NULL;
	const unsigned char *chunk;
	const void *map = NULL;
	unsigned long long *bad = NULL, nbad = 0;
	size_t len = 0, cap = 1 << 20;
	ssize_t n;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(path, "open", strerror(errno));
	host = (unsigned char *)malloc(cap);
	while (host && (n = read(fd, host + len, cap - len)) > 0) {
		len += (size_t)n;
		if (len == cap)
			host = (unsigned char *)realloc(host, cap *= 2);
	}
	if (!host || len == 0)
		return fail(path, "read", "failed or empty");
	CU(cudaMalloc((void **)&ref, len), "cudaMalloc");
	CU(cudaMemcpy(ref, host, len, cudaMemcpyHostToDevice), "H2D");
	CU(cudaMalloc((void **)&bad, sizeof(*bad)), "cudaMalloc");
	CU(cudaMemset(bad, 0, sizeof(*bad)), "cudaMemset");

	rc = kvfs_handle_get(fd, &h);
	if (rc < 0)
		return fail(path, "KVFS_IOC_HANDLE", strerror(-rc));
	if (h.length != len)
		return fail(path, "handle", "length differs from read()");
	if (h.kind == KVFS_HANDLE_CUDA_IPC) {
		rc = kvfs_cuda_open(&h, -1, &m);
		if (rc < 0)
			return fail(path, "kvfs_cuda_open", strerror(-rc));
		chunk = (const unsigned char *)m.dptr;
	} else {
		rc = kvfs_handle_map(fd, &h, &map);
		if (rc < 0)
			return fail(path, "kvfs_handle_map", strerror(-rc));
		CU(cudaMalloc((void **)&tmp, len), "cudaMalloc");
		CU(cudaMemcpy(tmp, map, len, cudaMemcpyHostToDevice),
		   "H2D from the mmap");
		chunk = tmp;
	}
	count_diff<<<64, 256>>>(chunk, ref, len, bad);
	CU(cudaGetLastError(), "kernel launch");
	CU(cudaMemcpy(&nbad, bad, sizeof(nbad), cudaMemcpyDeviceToHost),
	   "D2H");
	if (h.kind == KVFS_HANDLE_CUDA_IPC)
		kvfs_cuda_close(&m); /* before the release, always */
	else
		kvfs_handle_unmap(map, &h);
	kvfs_handle_put(fd, &h);
	close(fd);
	cudaFree(tmp);
	cudaFree(ref);
	cudaFree(bad);
	free(host);
	if (nbad) {
		char why[64];

		snprintf(why, sizeof(why), "%llu of %zu bytes differ", nbad,
			 len);
		return fail(path, "device compare", why);
	}
	printf("ok %s (%zu bytes, %s)\n", path, len,
	       h.kind == KVFS_HANDLE_CUDA_IPC ? "CUDA IPC" : "mmap");
	return 0;
}

int main(int argc, char **argv)
{
	char why[256];
	int i, rc = 0;

	if (kvfs_cuda_probe(why, sizeof(why)) <= 0) {
		printf("skipped: no CUDA device visible: %s\n", why);
		return 77;
	}
	for (i = 1; i < argc; i++)
		rc |= check_one(argv[i]);
	return rc;
}
