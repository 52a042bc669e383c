/*
 * preload_fd.c - the descriptors libkvfs_preload.so serves from memory
 * (lib/preload/README.md): a table from fd to struct pl_chunk, and the
 * libc calls interposed on such an fd (its buffer: preload_buf.c): read,
 * pread, readv, preadv, preadv2, lseek, write, pwrite, writev (EBADF),
 * fcntl, dup, dup2, dup3, close, close_range, closefrom (fdopen, mmap,
 * sendfile, copy_file_range: preload_map.c); an open of /proc/self/fd/N
 * (pl_fd_reopen); pl_realize, which
 * turns a served fd into the real file for the calls the library does not
 * emulate (preload_real.c). fstat and fstatat: preload_stat.c.
 * Every other fd goes straight to libc after one atomic load.
 *
 * The fd is an unconnected AF_UNIX socket: a call that bypasses this
 * table (glibc-internal reads, a child after exec, a raw syscall) fails
 * on it and never sees other bytes. Each call checks that the fd is still
 * that socket (a closefrom() or a raw close may have let the kernel give
 * the number to another file), else it forgets the entry (once no dup2
 * onto the number is under way: dup_lock) and passes the call on. A
 * vfork child, which shares this table but not the fds, never changes
 * it (pl_table_mine).
 * The close of the last fd that stands for a chunk being read keeps its
 * socket for the next open (preload_spare.c); only then (nfds), so two
 * chunks never share one.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <linux/close_range.h>

#include "lib/preload/preload_i.h"




/* tab_lock: protects tab writes and refs. tab is read without it (an
 * atomic load) to let other fds through at once. */
static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pl_chunk *_Atomic tab[TAB_MAX];
/* one more than the highest fd ever served (set under tab_lock): what a
 * walk of the whole table (a fork's child, exec) needs to look at */
static atomic_int tab_top;
static atomic_uint writers; /* chunks being written (pl_wr_each) */
/* dup_lock: held across a dup2/dup3 onto a served number (the kernel's
 * call and the table's update), and by get() before it forgets an entry
 * whose fd is another file now (a dup2 onto it may be between the two:
 * it looks again once that is done). Lock order: a chunk's lock,
 * dup_lock, tab_lock. */
static pthread_mutex_t dup_lock = PTHREAD_MUTEX_INITIALIZER;
/* the process whose table this is (set again in a fork's child): a
 * vfork child, or posix_spawn's clone(CLONE_VM), shares this memory but
 * has fds of its own, and leaves the table alone (pl_table_mine) */
static pid_t owner;
/* the lowest address a process may map (vm.mmap_min_addr): a read into
 * a buffer below it is EFAULT, as the kernel's */
static uintptr_t min_addr = 4096;

static void atfork_prepare(void)
{
	pthread_mutex_lock(&dup_lock);
	pthread_mutex_lock(&tab_lock);
}
static void atfork_unlock(void)
{
	pthread_mutex_unlock(&tab_lock);
	pthread_mutex_unlock(&dup_lock);
}
static void atfork_child(void)
{
	owner = getpid();
	/* the child's one thread: a chunk's lock another thread held at
	 * the fork (a read of a served fd in flight, a lazy chunk's GET
	 * among them) would stay held for ever, and the child's reads and
	 * its exec (which hands inherited readers over to the real files)
	 * would wait on it; what it guarded is as that thread left it (an
	 * offset it had not moved yet: the child reads those bytes again) */
	for (int fd = 0; fd < atomic_load(&tab_top); fd++) {
		struct pl_chunk *c = atomic_load_explicit(&tab[fd],
							  memory_order_relaxed);

		if (c)
			pthread_mutex_init(&c->lock, NULL);
	}
	atfork_unlock();
}

/* before preload_wr.c's (see there) */
__attribute__((constructor(102))) static void pl_fd_init(void)
{
	char v[32];
	long fd, n;

	owner = getpid();
	pthread_atfork(atfork_prepare, atfork_unlock, atfork_child);
	/* raw calls: this library's open is not ready yet */
	fd = syscall(SYS_openat, AT_FDCWD, "/proc/sys/vm/mmap_min_addr",
		     O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = syscall(SYS_read, fd, v, sizeof(v) - 1);
	syscall(SYS_close, fd);
	if (n > 0) {
		v[n] = '\0';
		min_addr = (uintptr_t)strtoull(v, NULL, 10);
	}
}

bool pl_table_mine(void)
{
	return getpid() == owner;
}

struct pl_chunk *pl_chunk_new(size_t cap)
{
	struct pl_chunk *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->buf = cap ? pl_buf_get(&cap) : NULL;
	if (!c->buf && cap) {
		free(c);
		return NULL;
	}
	c->cap = cap;
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

int pl_chunk_resize(struct pl_chunk *c, size_t cap)
{
	char *p = pl_buf_get(&cap);

	if (!p)
		return -1;
	memcpy(p, c->buf, c->size);
	pl_buf_put(c->buf, c->cap);
	c->buf = p;
	c->cap = cap;
	return 0;
}

void pl_chunk_free(struct pl_chunk *c)
{
	pl_buf_put(c->buf, c->cap);
	if (c->wr && pl_wr_nsfd(c->wr) >= 0) {
		REAL(close);
		r_close(c->wr->nsfd);
	}
	if (c->wr)
		atomic_fetch_sub(&writers, 1);
	free(c->wr);
	free(c->path);
	pthread_mutex_destroy(&c->lock);
	if (c->fill) {
		pl_buf_put(c->fill->buf, c->fill->cap);
		free(c->fill);
	}
	free(c);
}

/* ------------------------------------------------------------- table */

/* Drops one reference (tab_lock not held). */
void pl_put(struct pl_chunk *c)
{
	bool last;

	pthread_mutex_lock(&tab_lock);
	last = --c->refs == 0;
	pthread_mutex_unlock(&tab_lock);
	if (last)
		pl_chunk_free(c);
}

/* Forgets fd's entry (its fd is not ours, or is being closed). */
void pl_forget(int fd)
{
	struct pl_chunk *c;

	pthread_mutex_lock(&tab_lock);
	c = atomic_exchange(&tab[fd], NULL);
	if (c)
		c->nfds--;
	pthread_mutex_unlock(&tab_lock);
	if (c)
		pl_put(c);
}

static void forget_if(int fd, struct pl_chunk *c);

/* Whether fd is still the socket that stands for c. */
static inline __attribute__((always_inline)) bool is_ours(int fd,
						     const struct pl_chunk *c)
{
	struct stat st;

	REAL(fstat);
	return !r_fstat(fd, &st) && st.st_dev == c->sock_dev &&
	       st.st_ino == c->sock_ino;
}

/* fd's entry, with a reference (for get(): not a memfd's unless memfd) */
static inline struct pl_chunk *ref(int fd, bool memfd)
{
	struct pl_chunk *c;

	pthread_mutex_lock(&tab_lock);
	c = atomic_load(&tab[fd]);
	if (c)
		c->refs++;
	pthread_mutex_unlock(&tab_lock);
	if (c && c->memfd && !memfd) { /* its reads are the kernel's */
		pl_put(c);
		c = NULL;
	}
	return c;
}

/* get() of an fd that is not c's socket (c referenced): a raw close and
 * the number reused, or a dup2 onto fd that changed the kernel's fd and
 * not yet the table: once no dup2 is under way, looked at again, and
 * the entry forgotten if it still is not fd's. A vfork child (its fd,
 * the parent's table) forgets nothing. */
static __attribute__((noinline)) struct pl_chunk *
get_stale(int fd, struct pl_chunk *c, bool memfd)
{
	if (!pl_table_mine()) {
		pl_put(c);
		return NULL;
	}
	/* a chunk being written whose fd another thread is settling
	 * (preload_wr.c, settle_locked: c->lock held from the dup3 of the
	 * real writer onto fd until its bytes and offset are in): the call
	 * waits for that, so it writes after them, at the chunk's offset */
	if (c->wr) {
		pthread_mutex_lock(&c->lock);
		pthread_mutex_unlock(&c->lock);
	}
	pl_put(c);
	pthread_mutex_lock(&dup_lock);
	c = ref(fd, memfd);
	if (c && !is_ours(fd, c)) {
		forget_if(fd, c);
		pl_put(c);
		c = NULL;
	}
	pthread_mutex_unlock(&dup_lock);
	return c;
}

/* The chunk fd stands for, with a reference for the call (memfd: its
 * memfd entries too); NULL for any fd this library does not serve. */
static struct pl_chunk *get(int fd, bool memfd)
{
	struct pl_chunk *c;

	if (fd < 0 || fd >= TAB_MAX || !atomic_load_explicit(&tab[fd],
							      memory_order_acquire))
		return NULL;
	c = ref(fd, memfd);
	/* still our socket (memfd)? */
	if (!c || is_ours(fd, c))
		return c;
	return get_stale(fd, c, memfd);
}

struct pl_chunk *pl_get(int fd)
{
	return get(fd, false);
}

struct pl_chunk *pl_get_any(int fd)
{
	return get(fd, true);
}

/* Makes fd stand for c too (a dup); replaces what fd stood for. */
static void add(int fd, struct pl_chunk *c)
{
	struct pl_chunk *old;

	if (fd < 0 || fd >= TAB_MAX)
		return; /* unreachable by get(): calls on it fail, safely */
	pthread_mutex_lock(&tab_lock);
	c->refs++;
	c->nfds++;
	old = atomic_exchange(&tab[fd], c);
	if (old)
		old->nfds--;
	if (fd >= atomic_load_explicit(&tab_top, memory_order_relaxed))
		atomic_store(&tab_top, fd + 1);
	pthread_mutex_unlock(&tab_lock);
	if (old)
		pl_put(old);
}

/* fn(fd, c) for every fd standing for a chunk being written (wr) or
 * read from memory (!wr), c referenced for the call. */
static void each(bool wr, void (*fn)(int fd, struct pl_chunk *c))
{
	int top = atomic_load(&tab_top);

	for (int fd = 0; fd < top; fd++) {
		struct pl_chunk *c;

		/* referenced before it is looked at: a close in another
		 * thread may free an entry read from the table alone */
		if (!atomic_load_explicit(&tab[fd], memory_order_acquire) ||
		    (c = pl_get(fd)) == NULL)
			continue;
		if (!c->wr == !wr)
			fn(fd, c);
		else
			pl_put(c);
	}
}

void pl_wr_each(void (*fn)(int fd, struct pl_chunk *c))
{
	if (atomic_load(&writers))
		each(true, fn);
}

void pl_rd_each(void (*fn)(int fd, struct pl_chunk *c))
{
	each(false, fn);
}

int pl_fd_serve(struct pl_chunk *c, int flags)
{
	struct stat st;
	int fd;

	REAL(fstat);
	if (!pl_table_mine()) { /* a vfork child: the real open's */
		pl_chunk_free(c);
		return -1;
	}
	fd = pl_spare_take(flags & O_CLOEXEC, &st.st_dev, &st.st_ino);
	if (fd < 0) {
		fd = socket(AF_UNIX, SOCK_STREAM |
			    ((flags & O_CLOEXEC) ? SOCK_CLOEXEC : 0), 0);
		if (fd < 0 || fd >= TAB_MAX || r_fstat(fd, &st)) {
			if (fd >= 0)
				close(fd);
			pl_chunk_free(c);
			return -1;
		}
	}
	c->sock_dev = st.st_dev;
	c->sock_ino = st.st_ino;
	if (c->wr)
		atomic_fetch_add(&writers, 1);
	add(fd, c);
	return fd;
}

void pl_fd_track(int fd, struct pl_chunk *c)
{
	struct stat st;

	REAL(fstat);
	/* (a vfork child's memfd stays the kernel's alone) */
	if (fd < 0 || fd >= TAB_MAX || r_fstat(fd, &st) || !pl_table_mine()) {
		pl_chunk_free(c);
		return;
	}
	c->memfd = 1;
	c->sock_dev = st.st_dev;
	c->sock_ino = st.st_ino;
	add(fd, c); /* its reference is the fd's */
}

int pl_settle(int fd, struct pl_chunk *c)
{
	if (!pl_table_mine()) {
		pl_put(c);
		return 0;
	}
	return pl_wr_settle(fd, c);
}

int pl_settle_fd(int fd)
{
	struct pl_chunk *c = pl_get(fd);

	if (c && !c->wr) {
		pl_put(c);
		c = NULL;
	}
	return c ? pl_settle(fd, c) : 0;
}

/* ------------------------------------------------------------- reads */

/* What a served call answers when c was handed to the real file
 * (pl_realize, fdopen's memfd) while the call waited for c->lock: the
 * call is made again, on what the fd is now. */
#define RETRY (-2)

/* c->lock held: whether c is gone (handed over); if so the lock is let
 * go, fd forgotten where it still stands for c (a socket dup'ed while
 * the hand-over ran: its reads then fail, never other bytes) and c
 * dropped. */
static bool gone_unlock(int fd, struct pl_chunk *c)
{
	if (!c->gone)
		return false;
	pthread_mutex_unlock(&c->lock);
	forget_if(fd, c);
	pl_put(c);
	return true;
}

/* r = call, the kernel's on a memfd entry's fd, made under c->lock where
 * it moves the fd's offset (read, readv, lseek, preadv2 at -1), so that
 * pl_realize (the offset taken, the real file dup3'd onto the fd) never
 * falls inside it; RETRY where c was handed over meanwhile. Drops c. */
#define MEMFD_LOCKED(fd, c, r, call)                                     \
	do {                                                             \
		int err_;                                                \
		pthread_mutex_lock(&(c)->lock);                          \
		if (gone_unlock(fd, c)) {                                \
			(r) = RETRY;                                     \
			break;                                           \
		}                                                        \
		(r) = call;                                              \
		err_ = errno;                                            \
		pthread_mutex_unlock(&(c)->lock);                        \
		pl_put(c);                                               \
		errno = err_;                                            \
	} while (0)

/* name(params), a call at and moving the fd's offset: served (an
 * expression that may answer RETRY), the kernel's under c->lock on a
 * memfd entry, else the real call; made again after a hand-over. */
#define AT_OFFSET(ret, name, params, args, served)                       \
	EXPORT ret name params                                           \
	{                                                                \
		struct pl_chunk *c;                                      \
		ret r;                                                   \
		REAL(name);                                              \
		do {                                                     \
			c = pl_get_any(fd);                              \
			if (!c)                                          \
				return r_##name args;                    \
			if (c->memfd)                                    \
				MEMFD_LOCKED(fd, c, r, r_##name args);   \
			else                                             \
				r = served;                              \
		} while (r == RETRY);                                    \
		return r;                                                \
	}

/* EBADF: a write on an fd opened for reading, a read on one opened for
 * writing. */
static ssize_t refuse(struct pl_chunk *c)
{
	pl_put(c);
	errno = EBADF;
	return -1;
}

/* Copies up to n bytes at off into buf; returns how many, or -1 with
 * errno: EFAULT for a buffer below the lowest mappable address (NULL and
 * near it; any other unmapped buffer faults in memcpy: README,
 * "Limits"), or, for a lazy chunk, why its bytes could not be had
 * (pl_lazy_copy). */
static ssize_t copy_at(struct pl_chunk *c, void *buf, size_t n, off_t off)
{
	if (off < 0 || (uint64_t)off >= c->size || !n)
		return 0;
	if (n > c->size - (uint64_t)off)
		n = (size_t)(c->size - (uint64_t)off);
	if ((uintptr_t)buf < min_addr) {
		errno = EFAULT;
		return -1;
	}
	if (c->lazy && !pl_bytes(c))
		return pl_lazy_copy(c, buf, n, off);
	memcpy(buf, pl_bytes(c) + off, n);
	return (ssize_t)n;
}

ssize_t pl_copy_at(struct pl_chunk *c, void *buf, size_t n, off_t off)
{
	return copy_at(c, buf, n, off);
}

/* Drops the call's reference to c and returns r, errno kept. */
static ssize_t put_ret(struct pl_chunk *c, ssize_t r)
{
	int err = errno;

	pl_put(c);
	errno = err;
	return r;
}

static ssize_t read_common(int fd, struct pl_chunk *c, void *buf, size_t n)
{
	ssize_t k;

	if (c->wr)
		return refuse(c); /* opened for writing only */
	pthread_mutex_lock(&c->lock);
	if (gone_unlock(fd, c))
		return RETRY;
	k = copy_at(c, buf, n, c->off);
	if (k > 0)
		c->off += (off_t)k;
	pthread_mutex_unlock(&c->lock);
	return put_ret(c, k);
}

AT_OFFSET(ssize_t, read, (int fd, void *buf, size_t n), (fd, buf, n),
	  read_common(fd, c, buf, n))

static ssize_t pread_common(struct pl_chunk *c, void *buf, size_t n,
			    off_t off)
{
	ssize_t k;

	if (c->wr)
		return refuse(c);
	if (off < 0) {
		pl_put(c);
		errno = EINVAL;
		return -1;
	}
	k = copy_at(c, buf, n, off);
	return put_ret(c, k);
}

/* name(params): the expression served on a served fd (c holds a reference
 * that served drops), else the real call. */
#define SERVED(ret, name, params, args, served)                          \
	EXPORT ret name params                                           \
	{                                                                \
		struct pl_chunk *c = pl_get(fd);                            \
		if (!c) {                                                \
			REAL(name);                                      \
			return r_##name args;                            \
		}                                                        \
		return served;                                           \
	}
SERVED(ssize_t, pread, (int fd, void *buf, size_t n, off_t off),
       (fd, buf, n, off), pread_common(c, buf, n, off))
SERVED(ssize_t, pread64, (int fd, void *buf, size_t n, off_t off),
       (fd, buf, n, off), pread_common(c, buf, n, off))

/* readv/preadv: off < 0 means "at and moving the shared offset" (then
 * RETRY where c was handed over meanwhile). */
static ssize_t vec_common(int fd, struct pl_chunk *c, const struct iovec *iov,
			  int cnt, off_t off)
{
	bool cur = off < 0;
	size_t total = 0;
	bool fault = false;

	if (c->wr)
		return refuse(c);
	if (cnt < 0 || cnt > IOV_MAX) {
		pl_put(c);
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&c->lock);
	if (cur && gone_unlock(fd, c))
		return RETRY;
	if (cur)
		off = c->off;
	for (int i = 0; i < cnt; i++) {
		ssize_t k = copy_at(c, iov[i].iov_base, iov[i].iov_len,
				    off + (off_t)total);

		if (k < 0) { /* the error, unless bytes came before */
			fault = !total;
			break;
		}
		total += (size_t)k;
		if ((size_t)k < iov[i].iov_len)
			break;
	}
	if (cur)
		c->off += (off_t)total;
	pthread_mutex_unlock(&c->lock);
	return put_ret(c, fault ? -1 : (ssize_t)total);
}

AT_OFFSET(ssize_t, readv, (int fd, const struct iovec *iov, int cnt),
	  (fd, iov, cnt), vec_common(fd, c, iov, cnt, -1))

static ssize_t preadv_common(int fd, struct pl_chunk *c,
			     const struct iovec *iov, int cnt, off_t off)
{
	if (off < 0 && !c->wr) {
		pl_put(c);
		errno = EINVAL;
		return -1;
	}
	return vec_common(fd, c, iov, cnt, off);
}

SERVED(ssize_t, preadv, (int fd, const struct iovec *iov, int cnt, off_t off),
       (fd, iov, cnt, off), preadv_common(fd, c, iov, cnt, off))
SERVED(ssize_t, preadv64,
       (int fd, const struct iovec *iov, int cnt, off_t off),
       (fd, iov, cnt, off), preadv_common(fd, c, iov, cnt, off))

/* preadv2's flags served from memory (RWF_HIPRI, RWF_DSYNC, RWF_SYNC,
 * RWF_APPEND: nothing to a read of memory); any other (RWF_NOWAIT...)
 * goes to the real file, which answers it (a memfd's too). */
#define PREADV2_SERVED 0x17

#define PREADV2(name, offt)                                              \
	EXPORT ssize_t name(int fd, const struct iovec *iov, int cnt,     \
			    offt off, int flags)                         \
	{                                                                \
		struct pl_chunk *c;                                      \
		ssize_t r;                                               \
		REAL(name);                                              \
	again:                                                           \
		c = pl_get_any(fd);                                      \
		if (c && !c->wr && (flags & ~PREADV2_SERVED)) {          \
			if (pl_realize(fd, c))                           \
				return -1;                               \
			c = NULL;                                        \
		}                                                        \
		if (c && c->memfd && off == -1) { /* the kernel's read */ \
			MEMFD_LOCKED(fd, c, r,                           \
				     r_##name(fd, iov, cnt, off, flags)); \
			if (r == RETRY)                                  \
				goto again;                              \
			return r;                                        \
		}                                                        \
		if (c && c->memfd) {                                     \
			pl_put(c);                                       \
			c = NULL;                                        \
		}                                                        \
		if (!c)                                                  \
			return r_##name(fd, iov, cnt, off, flags);       \
		if (off < -1) {                                          \
			pl_put(c);                                       \
			errno = EINVAL;                                  \
			return -1;                                       \
		}                                                        \
		r = vec_common(fd, c, iov, cnt, off); /* -1: the offset's */ \
		if (r == RETRY)                                          \
			goto again;                                      \
		return r;                                                \
	}
PREADV2(preadv2, off_t)
PREADV2(preadv64v2, off64_t)

static off_t seek_common(int fd, struct pl_chunk *c, off_t off, int whence)
{
	off_t base, r = -1;
	int err = EINVAL;

	if (c->wr)
		return pl_wr_seek(fd, c, off, whence);
	pthread_mutex_lock(&c->lock);
	if (gone_unlock(fd, c))
		return RETRY;
	base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? c->off :
	       (off_t)c->size;
	if (whence == SEEK_DATA || whence == SEEK_HOLE) {
		if (off < 0 || (uint64_t)off >= c->size)
			err = off < 0 ? EINVAL : ENXIO;
		else
			r = c->off = whence == SEEK_DATA ? off : (off_t)c->size;
	} else if (whence >= SEEK_SET && whence <= SEEK_END &&
		   base + off >= 0) {
		r = c->off = base + off;
	}
	pthread_mutex_unlock(&c->lock);
	pl_put(c);
	if (r < 0)
		errno = err;
	return r;
}

AT_OFFSET(off_t, lseek, (int fd, off_t off, int whence), (fd, off, whence),
	  seek_common(fd, c, off, whence))
AT_OFFSET(off_t, lseek64, (int fd, off_t off, int whence), (fd, off, whence),
	  seek_common(fd, c, off, whence))


/* Writes: EBADF on a chunk opened for reading; buffered on one being
 * written (at < 0: at the fd's offset). */
static ssize_t write_common(int fd, struct pl_chunk *c, const void *buf,
			    size_t n, off_t at)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = n };

	if (!c->wr)
		return refuse(c);
	if (at < 0) {
		pl_put(c);
		errno = EINVAL;
		return -1;
	}
	return pl_wr_write(fd, c, &v, 1, at);
}

SERVED(ssize_t, write, (int fd, const void *buf, size_t n), (fd, buf, n),
       c->wr ? pl_wr_write(fd, c, &(struct iovec){ (void *)buf, n }, 1, -1)
	     : refuse(c))
SERVED(ssize_t, pwrite, (int fd, const void *buf, size_t n, off_t off),
       (fd, buf, n, off), write_common(fd, c, buf, n, off))
SERVED(ssize_t, pwrite64, (int fd, const void *buf, size_t n, off_t off),
       (fd, buf, n, off), write_common(fd, c, buf, n, off))
SERVED(ssize_t, writev, (int fd, const struct iovec *iov, int cnt),
       (fd, iov, cnt), c->wr ? pl_wr_write(fd, c, iov, cnt, -1) : refuse(c))

/* ------------------------------------------------------------ fcntl */

static int fcntl_common(int fd, int cmd, unsigned long arg, bool is64)
{
	struct pl_chunk *c = pl_get_any(fd);
	bool own = cmd == F_GETFL || cmd == F_GETFD || cmd == F_SETFD ||
		   cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC;
	int r;

	if (c && c->memfd && own) { /* the memfd's answer is the file's */
		pl_put(c);
		c = NULL;
	}
	if (c && c->wr) {
		if (cmd == F_GETFL) {
			pl_put(c);
			/* as the kernel says of O_WRONLY | O_CREAT...: the
			 * access mode, O_LARGEFILE (forced on 64-bit), and
			 * the status flags kept */
			return O_WRONLY | 0100000 | (c->wr->flags & O_NONBLOCK);
		}
		if (cmd != F_GETFD && cmd != F_SETFD) {
			if (pl_settle(fd, c))
				return -1;
		} else {
			pl_put(c); /* the socket's fd flags are the fd's */
		}
		c = NULL;
	}
	/* locks, leases, F_SETFL, seals...: the real file's */
	if (c && !own) {
		if (pl_realize(fd, c))
			return -1;
		c = NULL;
	}
	/* a vfork child's dup is its own (the table is its parent's) */
	if (c && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) &&
	    !pl_table_mine()) {
		pl_put(c);
		c = NULL;
	}
	/* a dup: under c->lock, so that a hand-over to the real file
	 * (pl_realize) comes wholly before it or after */
	if (c && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
		pthread_mutex_lock(&c->lock);
	if (is64) {
		REAL(fcntl64);
		r = c && cmd == F_GETFL ? 0 : r_fcntl64(fd, cmd, arg);
	} else {
		REAL(fcntl);
		r = c && cmd == F_GETFL ? 0 : r_fcntl(fd, cmd, arg);
	}
	if (c && cmd == F_GETFL) /* what the chunk's own fd says: */
		r = O_RDONLY | 0100000 | c->oflags; /* O_LARGEFILE, forced */
	if (c && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) {
		if (r >= 0 && !c->gone && !c->kept)
			add(r, c);
		pthread_mutex_unlock(&c->lock);
	}
	if (c)
		pl_put(c);
	return r;
}

EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	unsigned long arg;

	va_start(ap, cmd);
	arg = va_arg(ap, unsigned long);
	va_end(ap);
	return fcntl_common(fd, cmd, arg, false);
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	unsigned long arg;

	va_start(ap, cmd);
	arg = va_arg(ap, unsigned long);
	va_end(ap);
	return fcntl_common(fd, cmd, arg, true);
}

/* ------------------------------------------------- dup, close */

/* A served chunk being written is settled first (fd's writer then
 * shares its description with the copy, as the kernel's). */
struct pl_chunk *pl_get_settled(int fd, int *err)
{
	struct pl_chunk *c = pl_get(fd);

	*err = 0;
	if (c && c->wr) {
		*err = pl_settle(fd, c);
		c = NULL;
	}
	/* a vfork child's fd is its own: the kernel's call on the socket */
	if (c && !pl_table_mine()) {
		pl_put(c);
		c = NULL;
	}
	return c;
}

EXPORT int dup(int fd)
{
	int err;
	struct pl_chunk *c = pl_get_settled(fd, &err);
	int r;

	if (err)
		return -1;
	REAL(dup);
	if (c) /* see fcntl_common */
		pthread_mutex_lock(&c->lock);
	r = r_dup(fd);
	if (c && r >= 0 && !c->gone && !c->kept)
		add(r, c);
	if (c) {
		pthread_mutex_unlock(&c->lock);
		pl_put(c);
	}
	return r;
}

static int real_dup_onto(int fd, int nfd, int flags, bool three)
{
	if (three) {
		REAL(dup3);
		return r_dup3(fd, nfd, flags);
	}
	REAL(dup2);
	return r_dup2(fd, nfd);
}

static bool in_tab(int fd)
{
	return fd >= 0 && fd < TAB_MAX &&
	       atomic_load_explicit(&tab[fd], memory_order_acquire);
}

/* dup2/dup3 from or onto a served fd: the kernel's call and the table's
 * update under dup_lock (get() waits for both before it forgets nfd's
 * entry); nfd's entry, if the copy is not served, forgotten. In a vfork
 * child: the kernel's call alone. */
static int dup_onto(int fd, int nfd, int flags, bool three)
{
	int err;
	struct pl_chunk *c;
	int r;

	if ((!in_tab(fd) && !in_tab(nfd)) || !pl_table_mine())
		return real_dup_onto(fd, nfd, flags, three);
	c = pl_get_settled(fd, &err);
	if (err)
		return -1;
	/* nfd being written: settled, so the implicit close publishes it
	 * as the kernel's close would (a close that reports nothing) */
	if (fd != nfd && pl_settle_fd(nfd)) {
		if (c)
			pl_put(c);
		return -1;
	}
	if (c) /* see fcntl_common */
		pthread_mutex_lock(&c->lock);
	pthread_mutex_lock(&dup_lock);
	r = real_dup_onto(fd, nfd, flags, three);
	if (r >= 0 && fd != nfd) {
		if (c && !c->gone && !c->kept)
			add(r, c);
		else if (in_tab(nfd))
			pl_forget(nfd);
	}
	pthread_mutex_unlock(&dup_lock);
	if (c) {
		pthread_mutex_unlock(&c->lock);
		pl_put(c);
	}
	return r;
}

EXPORT int dup2(int fd, int nfd)
{
	return dup_onto(fd, nfd, 0, false);
}

EXPORT int dup3(int fd, int nfd, int flags)
{
	return dup_onto(fd, nfd, flags, true);
}

/*
 * close(fd), fd standing for c (referenced; dropped here): fd's entry
 * forgotten, and where fd is the last fd standing for c, c's socket kept
 * for the next open (preload_spare.c). That is decided, the socket moved
 * and fd closed under c->lock, which a dup holds from its kernel call to
 * its entry, and fd's entry is forgotten only after the kernel closed fd
 * (a call that finds no entry makes the kernel's call: a dup of fd
 * between the two would be a copy of the socket the library no longer
 * knows of). So a dup of fd comes wholly before (fd is not the last
 * then) or after fd is closed (the kernel's EBADF, and c is kept: it adds
 * no entry): no entry ever stands for a kept socket, nor any fd but the
 * spare's.
 */
static int close_reader(int fd, struct pl_chunk *c)
{
	bool keep;
	int r, err;

	REAL(close);
	pthread_mutex_lock(&c->lock);
	pthread_mutex_lock(&tab_lock);
	keep = !c->memfd && !c->gone && c->nfds == 1 &&
	       atomic_load(&tab[fd]) == c;
	if (keep)
		c->kept = 1;
	pthread_mutex_unlock(&tab_lock);
	if (!keep) {
		pthread_mutex_unlock(&c->lock);
		pl_put(c);
		pl_forget(fd);
		return r_close(fd);
	}
	pl_spare_keep(fd, c->sock_dev, c->sock_ino);
	r = r_close(fd);
	err = errno;
	/* (fd's number may be another open's entry already: left alone) */
	forget_if(fd, c);
	pthread_mutex_unlock(&c->lock);
	pl_put(c);
	errno = err;
	return r;
}

EXPORT int close(int fd)
{
	struct pl_chunk *c;

	REAL(close);
	/* (a vfork child's close is its own: the table is its parent's) */
	if (in_tab(fd) && pl_table_mine()) {
		c = pl_get(fd); /* (fd checked to be still its socket) */
		if (c && c->wr)
			return pl_wr_close(fd, c); /* publishes */
		if (c)
			return close_reader(fd, c);
		pl_forget(fd);
	}
	return r_close(fd);
}

/* The served fds of [lo, hi] closed as close() would (a chunk being
 * written published, one being read forgotten), before the real call
 * closes the rest (close() leaves the table alone in a vfork child). */
static void close_served(unsigned lo, unsigned hi)
{
	int mine = -1; /* pl_table_mine(), asked at the first served fd */
	unsigned top = (unsigned)atomic_load(&tab_top);

	for (unsigned fd = lo; fd <= hi && fd < top; fd++) {
		if (!atomic_load_explicit(&tab[fd], memory_order_acquire))
			continue;
		if (mine < 0)
			mine = pl_table_mine();
		if (!mine)
			return;
		close((int)fd);
	}
}

EXPORT int close_range(unsigned lo, unsigned hi, int flags)
{
	/* CLOSE_RANGE_CLOEXEC closes nothing now (exec settles writers);
	 * CLOSE_RANGE_UNSHARE closes in a copy of the fd table, this
	 * process's other threads keep theirs (and so the table) */
	if (!(flags & (CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE)) &&
	    lo <= hi)
		close_served(lo, hi);
	return (int)syscall(SYS_close_range, lo, hi, flags);
}

EXPORT void closefrom(int lo)
{
	if (lo < 0)
		lo = 0;
	close_served((unsigned)lo, ~0u);
	if (syscall(SYS_close_range, (unsigned)lo, ~0u, 0)) {
		REAL(closefrom); /* no close_range (Linux < 5.9): glibc's */
		if (r_closefrom)
			r_closefrom(lo);
	}
}

/* ------------------------------------------- writing a chunk, hand-over */

int pl_chunk_write(int fd, const struct pl_chunk *c)
{
	REAL(pwrite);
	for (uint64_t done = 0; done < c->size;) {
		ssize_t k = r_pwrite(fd, pl_bytes(c) + done, c->size - done,
				     (off_t)done);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		done += (uint64_t)k;
	}
	return 0;
}

/* Forgets fd's entry if it still stands for c. */
static void forget_if(int fd, struct pl_chunk *c)
{
	struct pl_chunk *e = c;

	pthread_mutex_lock(&tab_lock);
	if (!atomic_compare_exchange_strong(&tab[fd], &e, NULL))
		c = NULL;
	else
		c->nfds--;
	pthread_mutex_unlock(&tab_lock);
	if (c)
		pl_put(c);
}

/*
 * rfd, a real fd of c's bytes (the file, or a memfd of them), takes the
 * place of fd and of every dup of it in the table (dup3, each one's
 * close-on-exec kept), at c's offset: they then share rfd's description,
 * as the kernel's dups would, and leave the table; c is marked gone (a
 * call that waited for c->lock is made again, on the real file). c->lock
 * held. Returns 0, or -1 with errno (fd unchanged).
 */
int pl_take_place(int fd, struct pl_chunk *c, int rfd)
{
	unsigned refs;
	int fdfl;

	REAL(fcntl);
	REAL(dup3);
	REAL(lseek);
	fdfl = r_fcntl(fd, F_GETFD);
	if (fdfl < 0 || r_lseek(rfd, c->off, SEEK_SET) < 0 ||
	    r_dup3(rfd, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0)
		return -1;
	c->gone = 1;
	forget_if(fd, c);
	pthread_mutex_lock(&tab_lock);
	refs = c->refs; /* the caller's, and one per other fd or call */
	pthread_mutex_unlock(&tab_lock);
	for (int i = 0; refs > 1 && i < atomic_load(&tab_top); i++) {
		if (atomic_load_explicit(&tab[i], memory_order_acquire) != c)
			continue;
		fdfl = is_ours(i, c) ? r_fcntl(i, F_GETFD) : -1;
		if (fdfl >= 0)
			r_dup3(rfd, i, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0);
		forget_if(i, c); /* a dup, or a number reused behind us */
	}
	return 0;
}
