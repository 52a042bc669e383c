/*
 * client_buf.c - libkvfs's transfer buffers (kvfs.h section 4a):
 * kvfs_buf_alloc / kvfs_buf_free, memory in transparent huge pages.
 *
 * Why: the daemon copies a GET into the caller's memory (and a PUT out of
 * it) with process_vm_writev / _readv, which pins every page it touches
 * and copies page by page: 512 pins per 2 MiB of 4 KiB pages, one for a
 * huge page. Measured here (docs/performance.md, "Batched transfers"):
 * 5 GB/s into 4 KiB pages against 10 GB/s into huge pages, the second as
 * fast as memcpy. The preload library's buffers come from here too.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#include "kvfs.h"

#define HUGE (2ul << 20)

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

void *kvfs_buf_alloc(size_t len)
{
	size_t n;
	char *p, *a;

	/* room for the rounding and the alignment slack */
	if (len == 0 || len > SIZE_MAX / 2 - 2 * HUGE) {
		errno = EINVAL;
		return NULL;
	}
	n = (len + HUGE - 1) & ~(HUGE - 1);
	/* accounted (no MAP_NORESERVE): what cannot be had is ENOMEM here,
	 * not an OOM kill while populating */
	p = mmap(NULL, n + HUGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	a = (char *)(((uintptr_t)p + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (a + n < p + n + HUGE)
		munmap(a + n, (size_t)(p + n + HUGE - (a + n)));
	/* no THP (disabled, or an old kernel): 4 KiB pages, still right */
	madvise(a, n, MADV_HUGEPAGE);
	if (madvise(a, n, MADV_POPULATE_WRITE) == 0)
		return a;
	if (errno == ENOMEM) {
		munmap(a, n);
		errno = ENOMEM;
		return NULL;
	}
	for (size_t k = 0; k < n; k += 4096)
		a[k] = 0; /* before Linux 5.14 (EINVAL) */
	return a;
}

int kvfs_buf_free(void *buf, size_t len)
{
	if (!buf)
		return 0;
	if (len == 0 || len > SIZE_MAX / 2 - 2 * HUGE ||
	    ((uintptr_t)buf & (HUGE - 1)))
		return -EINVAL;
	return munmap(buf, (len + HUGE - 1) & ~(HUGE - 1)) ? -errno : 0;
}
