/*
 * gpu_host.c - the host backend: the arena is a memfd mapped MAP_SHARED and
 * pre-faulted (MAP_POPULATE), with transparent huge pages requested. A memfd
 * lets later work hand the arena to engines (mmap) and splice from it.
 * Pre-faulting matters: touching a fresh 4 KiB page costs microseconds,
 * more than copying it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "gpu/gpu_i.h"
#include "kvfs.h"

int gpu_host_map(struct gpu_arena *a, uint64_t size, const char *tag,
		 char *err, size_t errlen)
{
	int fd, saved;
	void *p;

	fd = memfd_create(tag, MFD_CLOEXEC);
	if (fd < 0) {
		saved = errno;
		snprintf(err, errlen, "memfd_create: %s", strerror(saved));
		return -saved;
	}
	if (ftruncate(fd, (off_t)size) < 0) {
		saved = errno;
		snprintf(err, errlen, "l1 arena of %llu bytes: %s",
			 (unsigned long long)size, strerror(saved));
		goto err_close;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_POPULATE, fd, 0);
	if (p == MAP_FAILED) {
		saved = errno;
		snprintf(err, errlen, "mmap l1 arena of %llu bytes: %s",
			 (unsigned long long)size, strerror(saved));
		goto err_close;
	}
	/* Best effort: shmem THP depends on the kernel's shmem_enabled. */
	(void)madvise(p, size, MADV_HUGEPAGE);
	a->size = size;
	a->host = p;
	a->memfd = fd;
	a->device = -1;
	a->handle_kind = KVFS_HANDLE_HOST_MMAP;
	return 0;

err_close:
	close(fd);
	return -saved;
}

void gpu_host_unmap(struct gpu_arena *a)
{
	if (a->host)
		munmap(a->host, a->size);
	if (a->memfd >= 0)
		close(a->memfd);
	a->host = NULL;
	a->memfd = -1;
}

static int host_alloc(struct gpu_arena *a, uint64_t size, int device,
		      char *err, size_t errlen)
{
	(void)device;
	return gpu_host_map(a, size, "kvfs-l1", err, errlen);
}

static int host_copy_in(struct gpu_arena *a, uint64_t off, const void *src,
			size_t len)
{
	if (off > a->size || len > a->size - off)
		return -EINVAL;
	memcpy((char *)a->host + off, src, len);
	return 0;
}

static int host_copy_out(struct gpu_arena *a, uint64_t off, void *dst,
			 size_t len)
{
	if (off > a->size || len > a->size - off)
		return -EINVAL;
	memcpy(dst, (const char *)a->host + off, len);
	return 0;
}

static int host_export(struct gpu_arena *a, uint8_t ipc[64])
{
	(void)a;
	(void)ipc;
	return -ENOTSUP;
}

const struct gpu_ops gpu_host_ops = {
	.name = "host",
	.alloc = host_alloc,
	.free = gpu_host_unmap,
	.copy_in = host_copy_in,
	.copy_out = host_copy_out,
	.export_handle = host_export,
};
