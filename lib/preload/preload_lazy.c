/*
 * preload_lazy.c - KVFS_PRELOAD_READS=lazy: a chunk of a key namespace,
 * or a file of a path namespace, whose open asked the daemon nothing
 * (preload.c's get_lazy). The first read of the whole chunk at offset 0
 * is one KVFS_IOC_GET straight into the caller's buffer (one copy: the
 * daemon's; a path file's only of the version the open's stat showed:
 * KVFS_XFER_NAMED | KVFS_XFER_MTIME); any other call that needs the bytes
 * fills the chunk's own copy once (pl_fill) and is served from it as an
 * eager chunk is. lib/preload/README.md, "Lazy reads".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/preload/preload_i.h"

/* The chunk's bytes from the real file (c->path through the kernel: the
 * plain FUSE open and reads) into p: where the GET was refused (EPERM of
 * a process the daemon may not ptrace, the namespace gone from the
 * library's table) or missed. Returns 0, or -1 with errno (ESTALE: no
 * such chunk now, or one of another size; a path file: of another
 * st_ino or mtime, another version than the open's stat showed). */
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
	if (r_fstat(fd, &st) || (uint64_t)st.st_size != c->size ||
	    (!c->keyns && (st.st_ino != c->lazy_ino ||
			   st.st_mtim.tv_sec != c->lazy_mtim.tv_sec ||
			   st.st_mtim.tv_nsec != c->lazy_mtim.tv_nsec)))
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

/* pl_fill, the GET first (get) or straight to the real file. */
static int fill(struct pl_chunk *c, bool get)
{
	struct pl_fill *f, *none = NULL;
	long n;
	int err;

	if (!c->lazy || atomic_load_explicit(&c->fill, memory_order_acquire))
		return 0;
	f = malloc(sizeof(*f));
	if (!f) {
		errno = ENOMEM;
		return -1;
	}
	f->cap = (size_t)c->size;
	f->buf = pl_buf_get(&f->cap);
	if (!f->buf) {
		free(f);
		errno = ENOMEM;
		return -1;
	}
	n = get ? pl_lazy_get(c, f->buf, f->cap) : -1;
	if (n == PL_LAZY_STALE) {
		pl_buf_put(f->buf, f->cap);
		free(f);
		errno = ESTALE;
		return -1;
	}
	if (n != (long)c->size && fill_real(c, f->buf)) {
		err = errno;
		pl_buf_put(f->buf, f->cap);
		free(f);
		errno = err;
		return -1;
	}
	/* no lock: a fork while one was held would leave it held in the
	 * child for ever; where another thread's copy came first, this one
	 * goes (the same key's bytes) */
	if (!atomic_compare_exchange_strong_explicit(&c->fill, &none, f,
						     memory_order_acq_rel,
						     memory_order_acquire)) {
		pl_buf_put(f->buf, f->cap);
		free(f);
	}
	return 0;
}

int pl_fill(struct pl_chunk *c)
{
	return fill(c, true);
}

ssize_t pl_lazy_copy(struct pl_chunk *c, void *buf, size_t n, off_t off)
{
	bool get = true;

	/* the whole chunk: one GET into the caller's buffer, exactly the
	 * chunk's size (a larger chunk now is EMSGSIZE: nothing copied);
	 * where it did not copy that, the GET is not tried again: the
	 * kernel's reads (a miss is theirs to say; memory the daemon could
	 * not write, a device's, is written here by memcpy) */
	if (off == 0 && n == c->size) {
		long k = pl_lazy_get(c, buf, n);

		if (k == (long)n)
			return (ssize_t)n;
		if (k == PL_LAZY_STALE) {
			errno = ESTALE;
			return -1;
		}
		get = false;
	}
	if (fill(c, get))
		return -1;
	memcpy(buf, pl_bytes(c) + off, n);
	return (ssize_t)n;
}
