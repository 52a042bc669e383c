/*
 * preload_map.c - the calls on a served fd whose bytes would leave the
 * library's table another way than read: fdopen (the fd made a memfd, or
 * a stream of this library's reads), mmap (a private copy of the bytes),
 * and sendfile / copy_file_range (EINVAL: the kernel cannot reach a
 * served chunk, and cp, cat and friends fall back to read()).
 * lib/preload/README.md, "Calls on a served fd".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "lib/preload/preload_i.h"

static ssize_t ck_read(void *ck, char *buf, size_t n)
{
	return read((int)(intptr_t)ck, buf, n);
}

static int ck_seek(void *ck, off64_t *pos, int whence)
{
	off_t r = lseek((int)(intptr_t)ck, *pos, whence);

	if (r < 0)
		return -1;
	*pos = r;
	return 0;
}

static int ck_close(void *ck)
{
	return close((int)(intptr_t)ck);
}

/* A FILE on a served fd: the fd becomes a memfd first (pl_to_memfd), so
 * fileno, fstat, fadvise and glibc's own reads work on it; where that
 * fails, a stream whose reads, seeks and close come back here (fileno
 * -1). */
EXPORT FILE *fdopen(int fd, const char *mode)
{
	static const cookie_io_functions_t io = { .read = ck_read,
		.seek = ck_seek, .close = ck_close };
	int err, saved = errno;
	struct pl_chunk *c = pl_get_settled(fd, &err);

	if (err)
		return NULL;
	if (c && mode && mode[0] == 'r' && !strchr(mode, '+') &&
	    pl_to_memfd(fd, c) == 0) {
		pl_put(c);
		c = NULL;
		errno = saved;
	}
	if (!c) {
		REAL(fdopen);
		return r_fdopen(fd, mode);
	}
	pl_put(c);
	if (!mode || mode[0] != 'r' || strchr(mode, '+')) {
		errno = EINVAL;
		return NULL;
	}
	return fopencookie((void *)(intptr_t)fd, "r", io);
}

/* A private copy: a served chunk has no pages to share. MAP_SHARED with
 * PROT_WRITE is EACCES, as for a file opened read-only. */
static void *mmap_common(struct pl_chunk *c, void *addr, size_t len,
			 int prot, int flags, off_t off)
{
	void *p;
	int err;

	if ((flags & MAP_TYPE) != MAP_PRIVATE && (prot & PROT_WRITE)) {
		pl_put(c);
		errno = EACCES;
		return MAP_FAILED;
	}
	if (off < 0 || off % sysconf(_SC_PAGESIZE) || !len) {
		pl_put(c);
		errno = EINVAL;
		return MAP_FAILED;
	}
	REAL(mmap);
	p = r_mmap(addr, len, PROT_READ | PROT_WRITE,
		   (flags & ~MAP_TYPE) | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED) {
		if (pl_copy_at(c, p, len, off) < 0 || mprotect(p, len, prot)) {
			err = errno;
			munmap(p, len);
			errno = err;
			p = MAP_FAILED;
		}
	}
	err = errno;
	pl_put(c);
	errno = err;
	return p;
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd,
		  off_t off)
{
	int err = 0;
	struct pl_chunk *c = (flags & MAP_ANONYMOUS) ? NULL :
			     pl_get_settled(fd, &err);

	if (err)
		return MAP_FAILED;
	if (!c) {
		REAL(mmap);
		return r_mmap(addr, len, prot, flags, fd, off);
	}
	return mmap_common(c, addr, len, prot, flags, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd,
		    off_t off)
{
	return mmap(addr, len, prot, flags, fd, off);
}

/* Kernel-side copies cannot reach a served chunk: EINVAL, on which cp,
 * cat and friends fall back to read(). */
EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
	int err = pl_settle_fd(out);
	struct pl_chunk *c = err ? NULL : pl_get_settled(in, &err);

	if (err)
		return -1;
	if (!c) {
		REAL(sendfile);
		return r_sendfile(out, in, off, n);
	}
	pl_put(c);
	errno = EINVAL;
	return -1;
}

EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t n)
{
	return sendfile(out, in, off, n);
}

EXPORT ssize_t copy_file_range(int in, off_t *inoff, int out, off_t *outoff,
			       size_t n, unsigned flags)
{
	int err = pl_settle_fd(out);
	struct pl_chunk *c = err ? NULL : pl_get_settled(in, &err);

	if (err)
		return -1;
	if (!c) {
		REAL(copy_file_range);
		return r_copy_file_range(in, inoff, out, outoff, n, flags);
	}
	pl_put(c);
	errno = EINVAL;
	return -1;
}
