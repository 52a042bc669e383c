/*
 * preload_i.h - inside libkvfs_preload.so: the open side (preload.c) and
 * the served descriptors (preload_fd.c, preload_realize.c).
 */
#ifndef KVFS_PRELOAD_I_H
#define KVFS_PRELOAD_I_H

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "kvfs.h"

/* fds served: 0..TAB_MAX-1 (preload_fd.c) */
#define TAB_MAX 65536

/* The library's own fds (namespace directories, a writer's, the spare
 * sockets of preload_fd.c): at or above. Under 64, the fds a process's
 * table holds before the kernel must grow it (NR_OPEN_DEFAULT): growing
 * it in a process with threads waits for an RCU grace period
 * (expand_fdtable's synchronize_rcu), 10-15 ms here, which at 512 every
 * reader process paid once at its first namespace (kvfs_pbench's 2 MiB
 * preloaded reads: 23 ms a 32-file run against 9-11 ms). */
#define FD_BASE 48

/* An interposed call, exported from the library. */
#define EXPORT __attribute__((visibility("default")))

/* The real call: resolved once, on first use. */
#define REAL(name)                                                       \
	static __typeof__(&name) r_##name;                               \
	if (!r_##name)                                                   \
		r_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

/*
 * A chunk being written through the library (preload_wr.c): its bytes
 * are buffered in the pl_chunk (size = bytes written so far) and
 * published by one KVFS_IOC_PUT at close, or handed to a real writer fd
 * (settled) before any call the library does not serve itself.
 */
struct pl_wr {
	int nsfd;             /* the namespace directory (a dup, O_CLOEXEC,
			       * at 48+: pl_wr_nsfd checks it is still) */
	dev_t ns_dev;         /* nsfd's fstat at the open */
	ino_t ns_ino;
	struct kvfs_key key;
	char name[33];        /* the key as named */
	mode_t mode;          /* the open's mode (the kernel applies umask) */
	int flags;            /* the open's flags */
	int settled;          /* the fd is a real writer fd now */
	int closed;           /* its close has been made (c->lock): a
			       * settling after it (a fork's, racing the
			       * close in another thread) does nothing, as
			       * fd may be another file's by then */
	int err;              /* a write failed (it could not be buffered
			       * nor settled): never published, later
			       * writes, the settling and close fail with
			       * it (as the daemon dooms a writer) */
	pid_t pid;            /* the process that opened it */
	int fork_err;         /* why its settling before a fork failed (the
			       * fd limit...): the child dooms its copy */
};

/* A lazy chunk's copy of its bytes (pl_fill). */
struct pl_fill {
	char *buf;            /* cap bytes from pl_buf_get, the chunk's first */
	size_t cap;
};

/*
 * A chunk served from memory: its bytes, copied by one KVFS_IOC_GET, and
 * the offset its descriptors share (dup'ed descriptors share one, as for
 * any file). Freed when the last descriptor is closed.
 */
struct pl_chunk {
	pthread_mutex_t lock; /* protects off, gone, st; held across a
			       * memfd's offset-moving read or seek and
			       * across pl_realize's hand-over */
	off_t off;
	int gone;             /* realized (or made a memfd by fdopen): its
			       * fds are the real file's now; a call that
			       * waited on lock retries as the real call */
	unsigned refs;        /* descriptors + calls in flight (table lock) */
	unsigned nfds;        /* of refs: the table's entries (table lock) */
	int kept;             /* its socket was kept (preload_spare.c) at the
			       * close of its last fd (lock and table lock):
			       * no fd stands for it again (a dup waiting
			       * for lock finds fd closed) */
	dev_t sock_dev;       /* the socket that stands for it (see */
	ino_t sock_ino;       /* pl_fd_serve), or the memfd */
	int memfd;            /* the fd is a memfd of the bytes (KVFS_PRELOAD=
			       * memfd, fopen, fdopen), buf NULL: reads are
			       * the kernel's; pl_get_any finds it, for
			       * fstat, statx and pl_realize */
	char *buf;            /* cap bytes, the first size are the chunk's */
	size_t cap;
	uint64_t size;
	struct stat st;       /* what fstat says (the stat of its name at
			       * open; lock held to change it) */
	struct pl_wr *wr;     /* a chunk being written, else NULL */
	/* a chunk being read: */
	char *path;           /* its name as the open reached it, absolute
			       * (pl_realize opens it again) */
	size_t dirlen;        /* path[dirlen] is the '/' after the
			       * namespace directory */
	int oflags;           /* the open's status flags (O_NONBLOCK,
			       * O_DIRECT): F_GETFL, pl_realize */
	int keyns;            /* a key namespace's (immutable) chunk */
	uint64_t mnt_id;      /* statx's stx_mnt_id of the namespace; 0:
			       * unknown */
	uint64_t sum;         /* XXH3-64 of the bytes (user.kvfs.checksum),
			       * when has_sum: pl_realize's version check */
	int has_sum;
	/* KVFS_PRELOAD_READS=lazy (a key namespace's chunk): the bytes are
	 * fetched at the first call that needs them, not at the open; a
	 * read of the whole chunk at offset 0 is one GET straight into the
	 * caller's buffer, any other call fills the chunk's copy first
	 * (pl_fill; pl_bytes then finds it) */
	int lazy;
	struct pl_fill *_Atomic fill; /* the copy: set once (a compare and
			       * exchange, no lock: a fork may land
			       * anywhere), NULL until then */
	struct kvfs_key key;  /* the chunk's key, for the GET */
	dev_t ns_dev;         /* its namespace directory (preload.c's */
	ino_t ns_ino;         /* table of them: the GET's fd) */
	ino_t lazy_ino;       /* a path file: the st_ino and mtime of the */
	struct timespec lazy_mtim; /* open's stat (set once): the version */
};

/* An mtime as KVFS_XFER_MTIME carries it: ns since the epoch, modulo
 * 2^64 (times before 1678 or after 2262 wrap, the same on both sides). */
static inline int64_t pl_mtime_ns(const struct timespec *t)
{
	return (int64_t)((uint64_t)t->tv_sec * 1000000000u +
			 (uint64_t)t->tv_nsec);
}

/* pl_lazy_get's answer for a path file whose name shows another version
 * now (the daemon's -ESTALE): ESTALE, no read through the kernel. */
#define PL_LAZY_STALE (-2)

/* pl_lazy_get - one GET of lazy chunk c's key into [buf, buf + cap) on
 * its namespace's fd (the library's table of namespaces; none there any
 * more: -1). Returns the bytes the daemon copied, -1, or PL_LAZY_STALE.
 * (preload.c) */
long pl_lazy_get(const struct pl_chunk *c, void *buf, uint64_t cap);

/* pl_fill - gives lazy chunk c its copy of the bytes (no-op for any
 * other, or once it has one): pl_lazy_get into a buffer of pl_buf_get,
 * else, where the GET could not copy exactly c->size bytes (a miss, a
 * refused GET), the real file at c->path read through the kernel (a
 * key's bytes are the key's, whichever copy). Threads filling one chunk
 * at once each fetch; the first copy set is kept. Returns 0, or -1 with
 * errno: ESTALE when the chunk is gone (removed or evicted since the
 * open), ENOMEM, else the real open's or read's (EACCES: the process
 * may no longer read it). (preload_lazy.c) */
int pl_fill(struct pl_chunk *c);

/* pl_lazy_copy - copy_at of a lazy chunk without its copy: n bytes at
 * off (within the chunk) into buf; the whole chunk at 0 by one GET into
 * buf, else (or where that GET did not copy it) pl_fill and a copy.
 * Returns n, or -1 with pl_fill's errno. (preload_lazy.c) */
ssize_t pl_lazy_copy(struct pl_chunk *c, void *buf, size_t n, off_t off);

/* pl_bytes - where c's bytes are: a lazy chunk's copy (NULL before
 * pl_fill), else its buffer. */
static inline const char *pl_bytes(const struct pl_chunk *c)
{
	struct pl_fill *f;

	if (!c->lazy)
		return c->buf;
	f = atomic_load_explicit(&((struct pl_chunk *)c)->fill,
				 memory_order_acquire);
	return f ? f->buf : NULL;
}

/* pl_buf_get - a buffer of at least *cap bytes (its room in *cap): a
 * 2 MiB-aligned THP mapping of its own (from a pool of freed ones) above
 * 1 MiB, else a slot of a 2 MiB slab; pages populated. NULL without
 * memory. (preload_buf.c) */
char *pl_buf_get(size_t *cap);

/* pl_buf_put - gives back a buffer of pl_buf_get (NULL: nothing). */
void pl_buf_put(char *p, size_t cap);

/* pl_chunk_new - a chunk with a buffer of at least cap bytes (from the
 * pool of buffers freed chunks left, so its pages are already there; none
 * for 0); NULL without memory. */
struct pl_chunk *pl_chunk_new(size_t cap);

/* pl_chunk_resize - gives c a buffer of at least cap bytes, keeping its
 * first size bytes. Returns 0 or -1. */
int pl_chunk_resize(struct pl_chunk *c, size_t cap);

/* pl_chunk_write - writes c's size bytes to fd from offset 0 (the real
 * pwrite, EINTR retried). Returns 0, or -1 with errno. */
int pl_chunk_write(int fd, const struct pl_chunk *c);

/* pl_chunk_free - frees a chunk no descriptor stands for. */
void pl_chunk_free(struct pl_chunk *c);

/* pl_fd_serve - a new descriptor that stands for c (takes c): an
 * unconnected AF_UNIX socket, so that any call this library does not
 * interpose fails (ENOTCONN, EINVAL, ENODEV) instead of reading other
 * bytes (a spare one the close of a served fd kept, else a new one);
 * O_CLOEXEC as flags ask. Returns the fd, or -1 (c freed). */
int pl_fd_serve(struct pl_chunk *c, int flags);

/* The table of served fds (preload_fd.c), for preload_wr.c. */

/* pl_get - the chunk fd stands for, with a reference for the call (and
 * fd checked to be still its socket); NULL for an fd not served. */
struct pl_chunk *pl_get(int fd);

/* pl_get_any - pl_get, memfd entries included. */
struct pl_chunk *pl_get_any(int fd);

/* pl_fd_track - fd, a memfd holding c's bytes (served by the kernel),
 * stands for c (taken; buf NULL): its fstat, statx and the calls that
 * need the file are the library's, as for a socket's. */
void pl_fd_track(int fd, struct pl_chunk *c);

/* pl_get_settled - pl_get, a chunk being written settled onto its real
 * writer first (then NULL: the fd is the real file's; *err the
 * settling's failure, else 0); NULL in a vfork child (the fd is its
 * own). (preload_fd.c) */
struct pl_chunk *pl_get_settled(int fd, int *err);

/* pl_copy_at - up to n bytes of c at off into buf (a lazy chunk's
 * fetched first); how many, or -1 with errno (EFAULT for a buffer below
 * the lowest mappable address). (preload_fd.c) */
ssize_t pl_copy_at(struct pl_chunk *c, void *buf, size_t n, off_t off);

/* pl_put - drops a reference pl_get or pl_fd_serve took. */
void pl_put(struct pl_chunk *c);

/* pl_forget - fd stands for nothing any more (closed or settled). */
void pl_forget(int fd);

/* pl_take_place - rfd, a real fd of c's bytes, takes the place of fd and
 * of every dup of it in the table, at c's offset; c is marked gone. c->lock
 * held. 0, or -1 with errno (fd unchanged). (preload_fd.c) */
int pl_take_place(int fd, struct pl_chunk *c, int rfd);
/* pl_to_memfd - fd, served from c, becomes a read-only memfd of its bytes
 * at the same number and offset (fdopen). 0, or -1. (preload_realize.c) */
int pl_to_memfd(int fd, struct pl_chunk *c);

/* pl_realize - fd, served from c (a chunk being read; c referenced,
 * the reference dropped), becomes the real file, before a call the
 * library does not emulate: c->path opened again, checked to hold the
 * same bytes (st_dev, st_ino and st_size of the served stat, and the
 * opened version's user.kvfs.checksum equal to XXH3-64 of the served
 * bytes: a path file keeps its st_ino through new versions), and dup3'd
 * onto fd and every dup of it (the offset and close-on-exec kept), c
 * marked gone, all under c->lock; they leave the table. Returns 0, or -1
 * with errno (ESTALE: the name holds another version or none; else the
 * real open's errno), fd then still served. */
int pl_realize(int fd, struct pl_chunk *c);

/* pl_fd_real - pl_realize of fd when it stands for a chunk being read,
 * pl_wr_settle when it stands for one being written; 0 when it stands
 * for none. */
int pl_fd_real(int fd);

/* pl_fd_of_name - the fd number path names (/proc/self/fd/N, /dev/fd/N,
 * /proc/thread-self/fd/N, /proc/PID/fd/N of this process), else -1. */
int pl_fd_of_name(const char *path);

/* pl_fd_reopen - an open of path, when it names a served fd (/proc/self/fd/N,
 * /dev/fd/N...): for reading (flags within served_flags) a new served fd
 * of the same version (a copy, its own offset); else the fd is made the
 * real file's first (pl_fd_real) and -1 says the caller opens path.
 * -1 too for any other path. */
int pl_fd_reopen(const char *path, int flags, int served_flags);

/* pl_fd_high - a dup of fd (close-on-exec) at FD_BASE or above (below
 * RLIMIT_NOFILE: half of it, where the limit is lower), for a descriptor
 * the library keeps (a namespace directory, a writer's, a spare socket):
 * open(2) returns the lowest free fd, and `close(1); open(key); exec`
 * must get 1. Returns it, or -1. (preload_spare.c) */
int pl_fd_high(int fd);

/* pl_spare_take - a socket the close of a served fd kept (its fstat
 * identity in *dev, *ino), dup'ed down to the lowest free fd
 * (close-on-exec if cloexec); -1 when none is kept, or none is still the
 * socket it was. (preload_spare.c) */
int pl_spare_take(bool cloexec, dev_t *dev, ino_t *ino);

/* pl_spare_keep - fd, the last descriptor of a chunk being read (dev,
 * ino: its socket, checked; about to be closed), has its socket kept
 * for pl_spare_take at a number of the library's while there is room.
 * (preload_spare.c) */
void pl_spare_keep(int fd, dev_t dev, ino_t ino);

/* pl_table_mine - whether the table is this process's: false in a vfork
 * child (or posix_spawn's clone(CLONE_VM) child), which shares the
 * parent's memory but has fds of its own: there the calls that would
 * change the table (dup*, close*, a settling, pl_realize, a new served
 * fd) are the kernel's alone, on the child's own descriptors. One
 * getpid(): only where the table would change. */
bool pl_table_mine(void);

/* pl_settle - pl_wr_settle, but in a process whose table is not its own
 * (pl_table_mine) c dropped and 0 (fd left the socket it is there). */
int pl_settle(int fd, struct pl_chunk *c);

/* pl_settle_fd - pl_settle of fd when it stands for a chunk being
 * written; 0 when it does not. */
int pl_settle_fd(int fd);

/* pl_wr_each - calls fn(fd, c) for every fd that stands for a chunk
 * being written (c with a reference for the call). */
void pl_wr_each(void (*fn)(int fd, struct pl_chunk *c));

/* pl_rd_each - the same for every fd served from memory for reading (a
 * socket's; memfd entries are the kernel's already). */
void pl_rd_each(void (*fn)(int fd, struct pl_chunk *c));

/* The written side (preload_wr.c). */

/* pl_wr_nsfd - w's namespace fd when it still is the directory the open
 * dup'ed (a program may dup2 anything onto a number the library took),
 * else -1 with errno EBADF: never used nor closed then. */
int pl_wr_nsfd(const struct pl_wr *w);

/* pl_wr_open - serves openat(dirfd, path, flags, mode) of a new key for
 * writing (O_WRONLY | O_CREAT...), nsfd being the namespace's (taken);
 * returns the fd, or -1: not served (nsfd closed, errno untouched). */
int pl_wr_open(int nsfd, const struct kvfs_key *key, const char *name,
	       int flags, mode_t mode);

/* pl_wr_set_max - the most bytes buffered (KVFS_PRELOAD_MAX); past that
 * a chunk being written is settled. */
void pl_wr_set_max(uint64_t max);

/* Calls on an fd that stands for a chunk being written (c referenced;
 * each drops the reference). */
ssize_t pl_wr_write(int fd, struct pl_chunk *c, const struct iovec *iov,
		    int cnt, off_t at);
off_t pl_wr_seek(int fd, struct pl_chunk *c, off_t off, int whence);
int pl_wr_close(int fd, struct pl_chunk *c);

/* pl_wr_settle - hands the buffered bytes to a real writer fd that takes
 * fd's number (the plain path from then on) and drops c's reference.
 * Returns 0, or -1 with errno (then fd may still be the library's). */
int pl_wr_settle(int fd, struct pl_chunk *c);

/* pl_wr_settle_fd - pl_wr_settle of fd when it stands for a chunk being
 * written; 0 when it does not. */
int pl_wr_settle_fd(int fd);

/* The path namespaces (preload_path.c). */

/* pl_path_split - for an open of path (relative to dirfd, or absolute):
 * the kvfs mount this process reaches it through (the deepest mount
 * point of /proc/self/mountinfo's fuse.kvfs lines above it; its device in
 * *dev), the namespace directory as this process reaches it (nsdir) and
 * the path below it as kvfs_path_key takes it (below). Lexical, no stat:
 * 0, or -1 where path has a "." or ".." component, is below no kvfs
 * mount point (mountinfo is read again, at most once a second, when none
 * matches), names no file below a namespace, or is too long. open_real
 * opens mountinfo. */
int pl_path_split(int dirfd, const char *path,
		  int (*open_real)(int, const char *, int, ...), dev_t *dev,
		  char nsdir[PATH_MAX], char below[PATH_MAX]);

#endif
