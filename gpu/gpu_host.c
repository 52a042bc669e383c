/*
 * gpu_host.c - the host backend: the arena is anonymous memory of the
 * daemon, in transparent huge pages where the kernel gives them, not
 * inherited by children, and pre-faulted at start. Pre-faulting matters:
 * touching a fresh 4 KiB page costs microseconds, more than copying it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "gpu/gpu_i.h"
#include "kvfs.h"

/* MemAvailable of /proc/meminfo in bytes, or 0 when unknown. */
static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	unsigned long long kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb << 10;
}

/* Transparent huge pages are 2 MiB where kvfs runs (x86-64, arm64 with
 * 4 KiB base pages); on a kernel with other sizes the arena still works,
 * with whatever pages it gets. */
#define HOST_HUGE (2ull << 20)

int gpu_host_map(struct gpu_arena *a, uint64_t size, const char *tag,
		 char *err, size_t errlen)
{
	uint64_t avail = mem_available(), span, head;
	char *raw, *p;
	int saved;

	/*
	 * The arena is pre-faulted below: past the memory the machine has,
	 * that ends in the kernel's OOM killer (which may pick another
	 * process), not in an error. Refuse it up front instead.
	 */
	if (avail && size > avail) {
		snprintf(err, errlen, "l1 arena of %llu MiB is more than the "
			 "memory available (%llu MiB, MemAvailable): lower "
			 "l1_size", (unsigned long long)(size >> 20),
			 (unsigned long long)(avail >> 20));
		return -ENOMEM;
	}
	if (!size || size > UINT64_MAX - HOST_HUGE ||
	    size + HOST_HUGE > SIZE_MAX) {
		snprintf(err, errlen, "l1 arena of %llu bytes: invalid size",
			 (unsigned long long)size);
		return -EINVAL;
	}
	/*
	 * Anonymous memory, not a memfd: shared memory gets huge pages only
	 * where the host's shmem_enabled allows (never on the machines
	 * measured), anonymous memory wherever THP is "madvise" or
	 * "always". With 4 KiB pages every FUSE reply from the arena pinned
	 * 512 pages per 2 MiB (gup_fast_fallback, a fifth of the daemon's
	 * time serving reads); a huge page is pinned at once. Mapped one
	 * huge page larger and trimmed so that it starts on a huge page.
	 */
	span = size + HOST_HUGE;
	raw = mmap(NULL, (size_t)span, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED) {
		saved = errno;
		snprintf(err, errlen, "mmap l1 arena of %llu bytes: %s",
			 (unsigned long long)size, strerror(saved));
		return -saved;
	}
	head = (HOST_HUGE - (uintptr_t)raw % HOST_HUGE) % HOST_HUGE;
	p = raw + head;
	if (head)
		munmap(raw, (size_t)head);
	munmap(p + size, (size_t)(span - head - size));
	/*
	 * A fork (kvfs-mount's helpers: the watchdog, fusermount3) must not
	 * share it: the daemon's next write to each page would copy it
	 * (copy-on-write) while the child lives. No child uses the arena.
	 */
	if (madvise(p, (size_t)size, MADV_DONTFORK)) {
		saved = errno;
		snprintf(err, errlen, "madvise(MADV_DONTFORK) of the l1 "
			 "arena: %s", strerror(saved));
		munmap(p, (size_t)size);
		return -saved;
	}
	/* Best effort: THP "never" on the host, or none to be had, leaves
	 * 4 KiB pages (slower, not wrong). */
	(void)madvise(p, (size_t)size, MADV_HUGEPAGE);
	/* its name in /proc/PID/maps ([anon:kvfs-l1]), where the kernel
	 * names anonymous memory (CONFIG_ANON_VMA_NAME) */
	(void)prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)p,
		    (unsigned long)size, (unsigned long)tag);
	/*
	 * Pre-fault the arena: MADV_POPULATE_WRITE, then a write of one
	 * byte per page from user space. Measured on this VM (2 MiB chunk
	 * writes through the mount, same run): with MAP_POPULATE or
	 * MADV_POPULATE_WRITE alone the first write to each page stayed
	 * slow (0.25-0.43 GB/s into untouched arena against 2.3 GB/s into
	 * arena written before): the hypervisor fills its own page tables
	 * on the first user access, which only a user-space touch does ahead
	 * of time. Per GiB: populate 0.28 s + touch 0.32 s, against 2.9 s
	 * for the touch alone (/tmp micro-benchmark, 1 GiB memfd).
	 */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels: EINVAL */
#endif
	(void)madvise(p, (size_t)size, MADV_POPULATE_WRITE);
	for (uint64_t o = 0; o < size; o += 4096)
		((volatile char *)p)[o] = 0;
	a->size = size;
	a->host = p;
	a->device = -1;
	a->handle_kind = KVFS_HANDLE_HOST_MMAP;
	return 0;
}

void gpu_host_unmap(struct gpu_arena *a)
{
	if (a->host)
		munmap(a->host, (size_t)a->size);
	a->host = NULL;
}

static int host_alloc(struct gpu_arena *a, uint64_t size, int device,
		      char *err, size_t errlen)
{
	(void)device;
	return gpu_host_map(a, size, "kvfs-l1", err, errlen);
}

int gpu_host_copy_in(struct gpu_arena *a, uint64_t off, const void *src,
		     size_t len)
{
	if (off > a->size || len > a->size - off)
		return -EINVAL;
	memcpy((char *)a->host + off, src, len);
	return 0;
}

int gpu_host_copy_out(struct gpu_arena *a, uint64_t off, void *dst,
		      size_t len)
{
	if (off > a->size || len > a->size - off)
		return -EINVAL;
	memcpy(dst, (const char *)a->host + off, len);
	return 0;
}

int gpu_host_zero(struct gpu_arena *a, uint64_t off, size_t len)
{
	if (off > a->size || len > a->size - off)
		return -EINVAL;
	memset((char *)a->host + off, 0, len);
	return 0;
}

int gpu_move_ok(const struct gpu_arena *a, uint64_t dst, uint64_t src,
		size_t len)
{
	if (dst > a->size || src > a->size || len > a->size - dst ||
	    len > a->size - src)
		return 0;
	return dst + len <= src || src + len <= dst;
}

int gpu_host_move(struct gpu_arena *a, uint64_t dst, uint64_t src,
		  size_t len)
{
	if (!gpu_move_ok(a, dst, src, len))
		return -EINVAL;
	memcpy((char *)a->host + dst, (const char *)a->host + src, len);
	return 0;
}

/* Host arenas are reached by mmap of the chunk fd, not by a handle. */
int gpu_host_export(struct gpu_arena *a, uint64_t off, uint64_t len,
		    struct gpu_export *ex)
{
	(void)a;
	(void)off;
	(void)len;
	memset(ex, 0, sizeof(*ex));
	return -ENOTSUP;
}

void gpu_host_unexport(struct gpu_arena *a, void *cookie)
{
	(void)a;
	(void)cookie;
}

const struct gpu_ops gpu_host_ops = {
	.name = "host",
	.alloc = host_alloc,
	.free = gpu_host_unmap,
	.copy_in = gpu_host_copy_in,
	.copy_out = gpu_host_copy_out,
	.export_handle = gpu_host_export,
	.unexport = gpu_host_unexport,
	.zero = gpu_host_zero,
	.move = gpu_host_move,
};
