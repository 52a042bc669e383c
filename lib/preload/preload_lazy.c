/*
 * preload_lazy.c - KVFS_PRELOAD_READS=lazy: a chunk of a key namespace
 * whose open asked the daemon nothing (preload.c's get_lazy). The first
 * read of the whole chunk at offset 0 is one KVFS_IOC_GET straight into
 * the caller's buffer (one copy: the daemon's); any other call that needs
 * the bytes fills the chunk's own buffer once (pl_fill) and is served
 * from it as an eager chunk is. lib/preload/README.md, "Lazy reads".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/preload/preload_i.h"

/* The chunk's bytes from the real file (c->path through the kernel: the
 * plain FUSE open and reads) into p: where the GET was refused (EPERM of
 * a process the daemon may not ptrace, the namespace gone from the
 * library's table) or missed. Returns 0, or -1 with errno (ESTALE: no
 * such chunk now, or one of another size). */
static int fill_real(struct pl_chunk *c, char *p)
{
	struct stat st;
	uint64_t done = 0;
	int fd, err = 0;

	REAL(openat);
	REAL(fstat);
	REAL(pread);
	REAL(close);
	fd = c->path ? r_openat(AT_FDCWD, c->path, O_RDONLY | O_CLOEXEC |
				(c->oflags & O_NOFOLLOW)) : -1;
	if (fd < 0) {
		errno = !c->path || errno == ENOENT || errno == ENOTDIR ||
			errno == ESTALE ? ESTALE : errno;
		return -1;
	}
	if (r_fstat(fd, &st) || (uint64_t)st.st_size != c->size)
		err = ESTALE;
	while (!err && done < c->size) {
		ssize_t k = r_pread(fd, p + done, c->size - done, (off_t)done);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			err = k < 0 ? errno : ESTALE;
		else
			done += (uint64_t)k;
	}
	r_close(fd);
	errno = err;
	return err ? -1 : 0;
}

int pl_fill(struct pl_chunk *c)
{
	size_t cap = (size_t)c->size;
	int rc = 0;
	char *p;

	if (!c->lazy || atomic_load_explicit(&c->filled, memory_order_acquire))
		return 0;
	pthread_mutex_lock(&c->fill_mu);
	if (atomic_load_explicit(&c->filled, memory_order_relaxed))
		goto out;
	p = pl_buf_get(&cap);
	if (!p) {
		errno = ENOMEM;
		rc = -1;
		goto out;
	}
	if (pl_lazy_get(c, p, cap) != (long)c->size && fill_real(c, p)) {
		int err = errno;

		pl_buf_put(p, cap);
		errno = err;
		rc = -1;
		goto out;
	}
	c->buf = p;
	c->cap = cap;
	atomic_store_explicit(&c->filled, 1, memory_order_release);
out:
	pthread_mutex_unlock(&c->fill_mu);
	return rc;
}

ssize_t pl_lazy_copy(struct pl_chunk *c, void *buf, size_t n, off_t off)
{
	/* the whole chunk: one GET into the caller's buffer, exactly the
	 * chunk's size (a larger chunk now is EMSGSIZE: nothing copied) */
	if (off == 0 && n == c->size) {
		long got = pl_lazy_get(c, buf, n);

		if (got == (long)n)
			return (ssize_t)n;
		if (got == -EFAULT) {
			errno = EFAULT;
			return -1;
		}
	}
	if (pl_fill(c))
		return -1;
	memcpy(buf, c->buf + off, n);
	return (ssize_t)n;
}
