/*
 * preload_realize.c - a served fd turned into a real file: its name
 * opened again, if it still holds the served bytes (pl_realize: size and
 * user.kvfs.checksum against XXH3-64 of what was served); a memfd of the
 * bytes (pl_to_memfd, for fdopen); and opens of a served fd's name
 * (/proc/self/fd/N, /dev/fd/N). lib/preload/README.md, "Calls on a
 * served fd".
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define XXH_INLINE_ALL /* header-only: the library links libc alone */
#include <xxhash.h>

#include "lib/preload/preload_i.h"

/* A new chunk of the same version as c (its stat, name, namespace) with
 * room for cap bytes (none: 0), or NULL. */
static struct pl_chunk *chunk_like(struct pl_chunk *c, size_t cap)
{
	struct pl_chunk *n = pl_chunk_new(cap);

	if (!n)
		return NULL;
	n->path = c->path ? strdup(c->path) : NULL;
	if (c->path && !n->path) {
		pl_chunk_free(n);
		return NULL;
	}
	pthread_mutex_lock(&c->lock);
	n->st = c->st;
	n->sum = c->sum; /* the same bytes */
	n->has_sum = c->has_sum;
	pthread_mutex_unlock(&c->lock);
	n->dirlen = c->dirlen;
	n->oflags = c->oflags;
	n->keyns = c->keyns;
	n->mnt_id = c->mnt_id;
	return n;
}

/*
 * fd, served from c, becomes a memfd holding the chunk's bytes at the same
 * number (pl_take_place), read-only, at the same offset: a real file from
 * then on, for callers that need one (a FILE's fileno), which stands for
 * c's version (pl_fd_track). Returns 0, or -1 (fd unchanged).
 */
int pl_to_memfd(int fd, struct pl_chunk *c)
{
	struct pl_chunk *meta = chunk_like(c, 0);
	char p[40];
	int mfd, rfd = -1, rc = -1;

	REAL(openat);
	REAL(close);
	if (pl_fill(c)) { /* a lazy chunk's bytes, first */
		if (meta)
			pl_chunk_free(meta);
		return -1;
	}
	mfd = memfd_create("kvfs-preload", MFD_CLOEXEC);
	if (mfd < 0) {
		if (meta)
			pl_chunk_free(meta);
		return -1;
	}
	if (pl_chunk_write(mfd, c) == 0) {
		snprintf(p, sizeof(p), "/proc/self/fd/%d", mfd);
		rfd = r_openat(AT_FDCWD, p, O_RDONLY | O_CLOEXEC);
	}
	if (rfd >= 0) {
		pthread_mutex_lock(&c->lock);
		rc = pl_take_place(fd, c, rfd);
		pthread_mutex_unlock(&c->lock);
		r_close(rfd);
	}
	r_close(mfd);
	if (meta && !rc)
		pl_fd_track(fd, meta);
	else if (meta)
		pl_chunk_free(meta);
	return rc;
}

/* XXH3-64 of the bytes c serves (its buffer; a memfd entry's: fd's
 * pages), computed once. Returns 0, or -1. */
static int served_sum(int fd, struct pl_chunk *c, uint64_t *sum)
{
	struct stat st;
	uint64_t s;
	size_t len;
	void *p;
	int has;

	pthread_mutex_lock(&c->lock);
	has = c->has_sum;
	*sum = c->sum;
	len = (size_t)c->st.st_size;
	pthread_mutex_unlock(&c->lock);
	if (has)
		return 0;
	if (pl_fill(c)) /* a lazy chunk's bytes, first */
		return -1;
	if (!c->memfd) {
		s = XXH3_64bits(pl_bytes(c), c->size);
	} else {
		REAL(fstat);
		REAL(mmap);
		/* the memfd holds the version's st_size bytes, read-only */
		if (r_fstat(fd, &st) || st.st_size != (off_t)len || !len)
			return -1;
		p = r_mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			return -1;
		s = XXH3_64bits(p, len);
		munmap(p, len);
	}
	pthread_mutex_lock(&c->lock);
	c->sum = s;
	c->has_sum = 1;
	pthread_mutex_unlock(&c->lock);
	*sum = s;
	return 0;
}

/*
 * Whether rfd, c's name opened again, holds the very bytes c serves: the
 * same file (st_dev, st_ino) and size, and user.kvfs.checksum of the
 * version rfd opened (the daemon's XXH3-64 of its bytes; each version has
 * its own inode in the kernel, so fgetxattr of rfd answers for that one,
 * and ENODATA or ESTALE for a replaced one it no longer knows) is XXH3-64
 * of the served bytes. st_ino alone is not enough: a path file keeps it
 * through new versions (kvfs(7)), so an O_TRUNC rewrite of the name would
 * pass.
 */
static bool same_bytes(int fd, struct pl_chunk *c, int rfd)
{
	struct stat st;
	char v[24], *end;
	uint64_t want, sum;
	ssize_t n;

	REAL(fstat);
	REAL(fgetxattr);
	pthread_mutex_lock(&c->lock);
	want = (uint64_t)c->st.st_size;
	pthread_mutex_unlock(&c->lock);
	if (r_fstat(rfd, &st) || st.st_dev != c->st.st_dev ||
	    st.st_ino != c->st.st_ino || (uint64_t)st.st_size != want)
		return false;
	n = r_fgetxattr(rfd, KVFS_XATTR_CHECKSUM, v, sizeof(v) - 1);
	if (n != 16)
		return false;
	v[n] = '\0';
	errno = 0;
	want = strtoull(v, &end, 16);
	return !errno && end == v + 16 && served_sum(fd, c, &sum) == 0 &&
	       sum == want;
}

int pl_realize(int fd, struct pl_chunk *c)
{
	int rfd = -1, err = ESTALE;

	REAL(openat);
	REAL(close);
	if (c->wr)
		return pl_settle(fd, c);
	if (!pl_table_mine()) { /* a vfork child: the socket answers */
		pl_put(c);
		return 0;
	}
	/* the name as the open reached it, its bytes checked: a name that
	 * now holds another version (or none) is ESTALE, never that one */
	if (c->path)
		rfd = r_openat(AT_FDCWD, c->path, O_RDONLY | O_CLOEXEC |
			       c->oflags);
	if (rfd < 0 && c->path && errno != ENOENT && errno != ELOOP &&
	    errno != ENOTDIR && errno != ESTALE)
		err = errno;
	if (rfd >= 0 && same_bytes(fd, c, rfd)) {
		REAL(lseek);
		/* the hand-over under c->lock: a read or seek of fd or a
		 * dup comes wholly before (the offset taken here has it) or
		 * after (it finds c gone and is made on the real file) */
		pthread_mutex_lock(&c->lock);
		if (c->gone) /* another thread's hand-over came first */
			err = 0;
		else if (c->memfd) /* its offset is the kernel's */
			c->off = r_lseek(fd, 0, SEEK_CUR);
		if (!c->gone)
			err = c->off < 0 ? errno :
			      pl_take_place(fd, c, rfd) ? errno : 0;
		pthread_mutex_unlock(&c->lock);
	}
	if (rfd >= 0)
		r_close(rfd);
	pl_put(c);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

int pl_fd_real(int fd)
{
	struct pl_chunk *c = pl_get_any(fd);

	return c ? pl_realize(fd, c) : 0;
}

int pl_fd_of_name(const char *path)
{
	static const char *const pre[] = { "/dev/fd/", "/proc/self/fd/",
					   "/proc/thread-self/fd/" };
	const char *p = NULL;
	char own[40];
	long n;
	char *end;

	for (unsigned i = 0; !p && i < sizeof(pre) / sizeof(pre[0]); i++)
		if (!strncmp(path, pre[i], strlen(pre[i])))
			p = path + strlen(pre[i]);
	if (!p && !strncmp(path, "/proc/", 6)) {
		snprintf(own, sizeof(own), "/proc/%d/fd/", (int)getpid());
		if (!strncmp(path, own, strlen(own)))
			p = path + strlen(own);
	}
	if (!p || *p < '0' || *p > '9')
		return -1;
	n = strtol(p, &end, 10);
	return *end || n >= TAB_MAX ? -1 : (int)n;
}

int pl_fd_reopen(const char *path, int flags, int served_flags)
{
	struct pl_chunk *c, *n;
	int fd = pl_fd_of_name(path), nfd;

	if (fd < 0 || !(c = pl_get_any(fd)))
		return -1;
	if (c->wr) { /* the real writer's link answers */
		pl_settle(fd, c);
		return -1;
	}
	/* a memfd's link: the kernel's reopen, standing for the same
	 * version */
	if (c->memfd && (flags & O_ACCMODE) == O_RDONLY) {
		REAL(openat);
		n = chunk_like(c, 0);
		pl_put(c);
		nfd = r_openat(AT_FDCWD, path, flags);
		if (n && nfd >= 0) {
			n->oflags = flags & (O_NONBLOCK | O_DIRECT | O_NOFOLLOW);
			pl_fd_track(nfd, n);
		} else if (n) {
			pl_chunk_free(n);
		}
		return nfd;
	}
	/* a new open of the same version, read-only: its own copy and
	 * offset, as the kernel's reopen is a new description */
	if ((flags & O_ACCMODE) == O_RDONLY && !(flags & ~served_flags) &&
	    !pl_fill(c) && (n = chunk_like(c, c->size)) != NULL) {
		memcpy(n->buf, pl_bytes(c), c->size);
		n->size = c->size;
		n->oflags = flags & (O_NONBLOCK | O_DIRECT | O_NOFOLLOW);
		pl_put(c);
		return pl_fd_serve(n, flags);
	}
	/* anything else: the real file's link, opened by the caller */
	pl_realize(fd, c);
	return -1;
}

