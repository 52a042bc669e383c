/*
 * preload_wr.c - chunks written through libkvfs_preload.so
 * (lib/preload/README.md, "Writes"): an open(O_WRONLY | O_CREAT...) of a
 * new key in a key namespace (preload.c decides) is served by a
 * descriptor of preload_fd.c's table whose writes are buffered here, and
 * its close publishes the chunk with one KVFS_IOC_PUT (kvfs_mput) and
 * returns the PUT's error as the plain close would (EEXIST, EMSGSIZE,
 * EFBIG, ENOSPC...).
 *
 * Every call this file does not serve exactly first "settles" the fd: a
 * real writer is opened (O_CREAT | O_EXCL, the open's mode), put in the
 * fd's place with dup3 before a byte is written to it (so closing the
 * extra fd publishes nothing), and given the buffered bytes and the
 * offset; from then on the fd is the plain path's. fstat, fsync,
 * ftruncate, fcntl (but F_GETFL/F_GETFD/F_SETFD), dup, mmap, fdopen,
 * xattrs, ioctl (preload_real.c's calls), a write past KVFS_PRELOAD_MAX
 * or one there is no memory for, fork, exec and posix_spawn all settle;
 * a whole-batch error of the PUT (EACCES, EPERM, a removed namespace...)
 * and an empty chunk settle at close, so that the kernel answers. A write
 * past the end is buffered, the hole zeroed (buffers are reused).
 *
 * A write that can be neither buffered nor settled (the settling's open
 * failed: EEXIST of a key published meanwhile, EMFILE...) fails with that
 * errno, copies nothing, and dooms the chunk as the daemon dooms a writer
 * whose write failed: later writes, the settling and close fail with the
 * same errno, and nothing is published.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "kvfs.h"
#include "lib/preload/preload_i.h"

static uint64_t max_bytes = 64ull << 20; /* KVFS_PRELOAD_MAX */
static _Atomic size_t size_hint = 256u << 10; /* last chunk published */

void pl_wr_set_max(uint64_t max)
{
	max_bytes = max;
}

/*
 * Exit and exec walk the table once (publishing, or settling, the chunks
 * being written); a writer another thread opened after the walk had
 * passed would be lost with the process image, its writes having said
 * success. So from the walk on, new writers are not served (the real
 * open: the kernel's close at exit or exec publishes them): walking,
 * set under walk_lock, which each served writer's open holds (read)
 * from its check to its place in the table. An exec that fails, and a
 * spawn, clear it again. A fork holds it (write) across its own walk,
 * so no writer is opened between that walk and the fork.
 */
static pthread_rwlock_t walk_lock = PTHREAD_RWLOCK_INITIALIZER;
static bool walking;

static int wr_open(int nsfd, const struct kvfs_key *key, const char *name,
		   int flags, mode_t mode);

int pl_wr_open(int nsfd, const struct kvfs_key *key, const char *name,
	       int flags, mode_t mode)
{
	int fd;

	pthread_rwlock_rdlock(&walk_lock);
	if (walking) { /* exiting or exec'ing: the real open */
		pthread_rwlock_unlock(&walk_lock);
		REAL(close);
		r_close(nsfd);
		return -1;
	}
	fd = wr_open(nsfd, key, name, flags, mode);
	pthread_rwlock_unlock(&walk_lock);
	return fd;
}

static int wr_open(int nsfd, const struct kvfs_key *key, const char *name,
		   int flags, mode_t mode)
{
	struct pl_chunk *c = pl_chunk_new(atomic_load(&size_hint));
	struct pl_wr *w = calloc(1, sizeof(*w));

	if (!c || !w) {
		if (c)
			pl_chunk_free(c);
		free(w);
		close(nsfd);
		return -1;
	}
	{
		struct stat st;

		REAL(fstat);
		if (r_fstat(nsfd, &st)) {
			pl_chunk_free(c);
			free(w);
			close(nsfd);
			return -1;
		}
		w->ns_dev = st.st_dev;
		w->ns_ino = st.st_ino;
	}
	w->nsfd = nsfd;
	w->key = *key;
	snprintf(w->name, sizeof(w->name), "%s", name);
	w->mode = mode & 07777;
	w->flags = flags;
	w->pid = getpid();
	c->wr = w;
	return pl_fd_serve(c, flags);
}

int pl_wr_nsfd(const struct pl_wr *w)
{
	struct stat st;

	REAL(fstat);
	if (w->nsfd < 0 || r_fstat(w->nsfd, &st) || st.st_dev != w->ns_dev ||
	    st.st_ino != w->ns_ino || !S_ISDIR(st.st_mode)) {
		errno = EBADF;
		return -1;
	}
	return w->nsfd;
}

/*
 * The settling, c->lock held: a real writer takes fd's number, then gets
 * the bytes and the offset. Returns 0 or -1 with errno (fd then still the
 * library's, nothing published).
 */
static int settle_locked(int fd, struct pl_chunk *c)
{
	struct pl_wr *w = c->wr;
	int rfd, fdfl, err;

	REAL(openat);
	REAL(fcntl);
	REAL(dup3);
	REAL(close);
	REAL(lseek);
	if (w->settled)
		return 0;
	if (w->closed) { /* closed by another thread meanwhile */
		errno = EBADF;
		return -1;
	}
	if (w->err) { /* doomed: a real writer would publish the rest */
		errno = w->err;
		return -1;
	}
	fdfl = r_fcntl(fd, F_GETFD);
	rfd = pl_wr_nsfd(w) < 0 ? -1 :
	      r_openat(w->nsfd, w->name, O_WRONLY | O_CREAT | O_EXCL |
		       O_CLOEXEC | (w->flags & (O_NONBLOCK | O_NOCTTY)),
		       w->mode);
	if (rfd < 0 || fdfl < 0)
		goto fail;
	/* before any byte: closing rfd (a FLUSH) publishes nothing. From
	 * the dup3 on, fd is the real writer, but its entry stays in the
	 * table until the buffered bytes are in and the offset is the
	 * chunk's: another thread's call on fd finds fd is no longer the
	 * socket and waits for c->lock (get_stale) before it writes, else
	 * its write would land at offset 0 under the buffered bytes */
	if (r_dup3(rfd, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0)
		goto fail;
	r_close(rfd);
	w->settled = 1;
	err = pl_chunk_write(fd, c) || r_lseek(fd, c->off, SEEK_SET) < 0 ?
	      errno : 0;
	pl_forget(fd);
	if (err) { /* the writer is doomed: close says so */
		errno = err;
		return -1;
	}
	return 0;
fail:
	err = errno;
	if (rfd >= 0)
		r_close(rfd);
	errno = err;
	return -1;
}

int pl_wr_settle(int fd, struct pl_chunk *c)
{
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = settle_locked(fd, c);
	pthread_mutex_unlock(&c->lock);
	pl_put(c);
	return rc;
}

int pl_wr_settle_fd(int fd)
{
	struct pl_chunk *c = pl_get(fd);

	if (!c)
		return 0;
	if (!c->wr) {
		pl_put(c);
		return 0;
	}
	return pl_wr_settle(fd, c);
}

/* Makes room for at least need bytes, keeping the bytes written. */
static int room(struct pl_chunk *c, uint64_t need)
{
	size_t cap = c->cap;

	if (need > SIZE_MAX / 2) { /* KVFS_PRELOAD_MAX set past memory */
		errno = ENOMEM;
		return -1;
	}
	while (cap < need)
		cap *= 2;
	return cap == c->cap ? 0 : pl_chunk_resize(c, cap);
}

/*
 * Whether a write of total bytes at pos can be buffered: it fits in
 * KVFS_PRELOAD_MAX and in memory. Else the chunk is settled (c->lock
 * held); where that fails too, the chunk is doomed with its errno
 * (returns -1): the write must copy nothing.
 */
static int can_buffer(int fd, struct pl_chunk *c, uint64_t pos,
		      uint64_t total)
{
	if (pos + total <= max_bytes && !room(c, pos + total))
		return 0;
	if (!pl_table_mine()) {
		/* a vfork child: the parent's writer (this memory is the
		 * parent's), neither settled nor doomed from here */
		errno = EBADF;
		return -1;
	}
	if (!settle_locked(fd, c) || c->wr->settled)
		return 0; /* settled (a failed copy: the daemon dooms it) */
	c->wr->err = errno ? errno : EIO;
	return -1;
}

ssize_t pl_wr_write(int fd, struct pl_chunk *c, const struct iovec *iov,
		    int cnt, off_t at)
{
	uint64_t pos, total = 0;
	ssize_t r;

	if (cnt < 0 || cnt > IOV_MAX) {
		pl_put(c);
		errno = EINVAL;
		return -1;
	}
	for (int i = 0; i < cnt; i++) {
		total += iov[i].iov_len;
		if (total > SSIZE_MAX) {
			pl_put(c);
			errno = EINVAL;
			return -1;
		}
	}
	pthread_mutex_lock(&c->lock);
	pos = at < 0 ? (uint64_t)c->off : (uint64_t)at;
	if (!c->wr->settled && (c->wr->closed || c->wr->err || (total &&
	    can_buffer(fd, c, pos, total)))) {
		/* closed by another thread while this one waited (its bytes
		 * would be in no chunk: EBADF, as a write after the kernel's
		 * close), or doomed: what the daemon answers a doomed
		 * writer's write */
		int e = c->wr->closed ? EBADF : c->wr->err ? c->wr->err : errno;

		pthread_mutex_unlock(&c->lock);
		pl_put(c);
		errno = e;
		return -1;
	}
	if (c->wr->settled) {
		pthread_mutex_unlock(&c->lock);
		pl_put(c);
		if (at < 0) {
			REAL(writev);
			return r_writev(fd, iov, cnt);
		}
		REAL(pwritev);
		return r_pwritev(fd, iov, cnt, at);
	}
	/* a hole: zeros, as the kernel's (the buffer may be another
	 * chunk's, reused); a write of nothing makes none, nor copies */
	if (total && pos > c->size)
		memset(c->buf + c->size, 0, pos - c->size);
	for (int i = 0; i < cnt && total; i++) {
		memcpy(c->buf + pos, iov[i].iov_base, iov[i].iov_len);
		pos += iov[i].iov_len;
	}
	if (total && pos > c->size)
		c->size = pos;
	if (at < 0)
		c->off = (off_t)pos;
	r = (ssize_t)total;
	pthread_mutex_unlock(&c->lock);
	pl_put(c);
	return r;
}

off_t pl_wr_seek(int fd, struct pl_chunk *c, off_t off, int whence)
{
	off_t base, r = -1;

	pthread_mutex_lock(&c->lock);
	if (!c->wr->settled && c->wr->closed) { /* closed meanwhile */
		pthread_mutex_unlock(&c->lock);
		pl_put(c);
		errno = EBADF;
		return -1;
	}
	if (!c->wr->settled && whence != SEEK_SET && whence != SEEK_CUR &&
	    whence != SEEK_END) {
		/* SEEK_DATA, SEEK_HOLE...: the kernel's, on the real writer
		 * (never from a vfork child: the parent's writer); where it
		 * cannot be had, that error */
		int e = EBADF;

		if (pl_table_mine() && settle_locked(fd, c))
			e = errno;
		if (!c->wr->settled) {
			pthread_mutex_unlock(&c->lock);
			pl_put(c);
			errno = e;
			return -1;
		}
	}
	if (c->wr->settled) {
		pthread_mutex_unlock(&c->lock);
		pl_put(c);
		REAL(lseek);
		return r_lseek(fd, off, whence);
	}
	base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? c->off :
	       (off_t)c->size;
	if (base + off >= 0)
		r = c->off = base + off; /* a write there past the end settles */
	pthread_mutex_unlock(&c->lock);
	pl_put(c);
	if (r < 0)
		errno = EINVAL;
	return r;
}

int pl_wr_close(int fd, struct pl_chunk *c)
{
	struct kvfs_io io;
	long rc = -1;
	int err = 0;

	REAL(close);
	pthread_mutex_lock(&c->lock);
	if (c->wr->closed) {
		/* closed already, by the thread whose close this walk (exit,
		 * closefrom) raced: fd may be another file's by now */
		pthread_mutex_unlock(&c->lock);
		pl_put(c);
		errno = EBADF;
		return -1;
	}
	if (!c->wr->settled && c->wr->pid != getpid()) {
		/* a fork's copy of the parent's chunk, settled or not by the
		 * fork (one another thread opened while the fork settled the
		 * others): the parent's to publish, never this copy */
		rc = 0;
	} else if (!c->wr->settled && c->wr->err) {
		err = c->wr->err; /* doomed: nothing published */
		rc = 0;
	} else if (!c->wr->settled && c->size > 0) {
		memset(&io, 0, sizeof(io));
		io.key = c->wr->key;
		io.buf = c->buf;
		io.len = c->size;
		rc = pl_wr_nsfd(c->wr) < 0 ? -EBADF :
		     kvfs_mput(c->wr->nsfd, &io, 1);
		if (rc >= 0) {
			/* stored, or an error of this chunk's own (EEXIST,
			 * EMSGSIZE, EFBIG, ENOSPC...): the close's answer */
			err = io.result < 0 ? (int)-io.result : 0;
			if (!err)
				atomic_store(&size_hint, c->size);
		}
	}
	/* an empty chunk, or the whole batch refused (EACCES, EPERM, the
	 * namespace gone...): the kernel answers, as without the library */
	if (rc < 0 && !c->wr->settled && settle_locked(fd, c))
		err = errno;
	c->wr->closed = 1;
	pthread_mutex_unlock(&c->lock);
	pl_put(c);
	pl_forget(fd);
	if (r_close(fd) && !err)
		return -1; /* the settled writer's close: its errno */
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

/* ---------------------------------------- fork, exec, spawn, exit */

static void settle_one(int fd, struct pl_chunk *c)
{
	/* a vfork child shares this memory but not the fds: leave them */
	if (c->wr->pid != getpid()) {
		pl_put(c);
		return;
	}
	/* under c->lock, and c read only before it is let go: a close in
	 * another thread may drop the last other reference meanwhile */
	pthread_mutex_lock(&c->lock);
	c->wr->fork_err = 0;
	if (settle_locked(fd, c) && !c->wr->settled && !c->wr->closed)
		c->wr->fork_err = errno ? errno : EIO;
	pthread_mutex_unlock(&c->lock);
	pl_put(c);
}

/* In a fork's child: a chunk the fork did not settle is the parent's
 * alone: one it could not (fork_err), or one another thread opened
 * after the fork's walk had passed (the open raced the fork). The
 * child's copy is doomed (its writes fail with fork_err, else EIO; its
 * bytes dropped), and its close publishes nothing and says 0, as the
 * close of one of two descriptors of a real writer would: the parent's
 * bytes are the parent's to publish (pl_wr_close). The child is
 * single-threaded here: no lock is taken (the chunks' locks were set free
 * by preload_fd.c's handler). */
static void doom_in_child(int fd, struct pl_chunk *c)
{
	(void)fd;
	if (!c->wr->settled) {
		if (!c->wr->err)
			c->wr->err = c->wr->fork_err ? c->wr->fork_err : EIO;
		/* its buffer is as the parent's writing thread left it at
		 * the fork, maybe halfway through a resize (the old buffer
		 * given back, the new one not yet set): never used nor
		 * given back here (left to the child's exit) */
		c->buf = NULL;
		c->cap = 0;
		c->size = 0;
	}
	pl_put(c);
}

static void fork_child(void)
{
	pthread_rwlock_init(&walk_lock, NULL);
	pl_wr_each(doom_in_child);
}

static void close_one(int fd, struct pl_chunk *c)
{
	if (c->wr->pid != getpid()) {
		pl_put(c);
		return;
	}
	pl_wr_close(fd, c);
}

/* Before fork the chunks being written are settled (parent and child
 * then share the real writers, as they would without the library); at
 * exit (exit, a return from main, _exit) they are published as the
 * kernel's close of the fds would; before exec settled, so the kernel's
 * close-on-exec or the new program's fds hold them. */
static void fork_prepare(void)
{
	pthread_rwlock_wrlock(&walk_lock);
	pl_wr_each(settle_one);
}

static void fork_parent(void)
{
	pthread_rwlock_unlock(&walk_lock);
}

/* Before exec (or a spawn) a served reader the new program inherits (not
 * close-on-exec) becomes the real file (pl_realize: the same bytes), or,
 * where its name holds another version by now, a memfd of the served
 * bytes: the new program, which has no table of ours, reads through the
 * kernel what this one would have read, from the same offset. Never in
 * a vfork child (the table is its parent's: the socket is inherited, the
 * documented limit). */
static void realize_inherited(int fd, struct pl_chunk *c)
{
	int fl;

	REAL(fcntl);
	fl = pl_table_mine() ? r_fcntl(fd, F_GETFD) : -1;
	if (fl < 0 || (fl & FD_CLOEXEC)) {
		pl_put(c);
		return;
	}
	if (pl_realize(fd, c) && (c = pl_get(fd)) != NULL) {
		pl_to_memfd(fd, c);
		pl_put(c);
	}
}

/* From here on new writers take the plain open (walking, above). Not in
 * a vfork child: it shares this memory, and its exec or _exit ends no
 * writer of the parent's. */
static void walk_begin(void)
{
	if (!pl_table_mine())
		return;
	pthread_rwlock_wrlock(&walk_lock);
	walking = true;
	pthread_rwlock_unlock(&walk_lock);
}

/* rc, after an exec that returned (failed) or a spawn: writers are
 * served again; errno kept. */
static int walk_end(int rc)
{
	int err = errno;

	if (pl_table_mine()) {
		pthread_rwlock_wrlock(&walk_lock);
		walking = false;
		pthread_rwlock_unlock(&walk_lock);
	}
	errno = err;
	return rc;
}

static void before_exec(void)
{
	walk_begin();
	pl_wr_each(settle_one);
	pl_rd_each(realize_inherited);
}

__attribute__((constructor(103))) static void pl_wr_init(void)
{
	/* registered after preload_fd.c's (102) and preload_buf.c's (101):
	 * prepare handlers run last-registered first, so this settles (and
	 * frees buffers) before the table's and the buffers' locks are
	 * taken */
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

__attribute__((destructor)) static void pl_wr_fini(void)
{
	walk_begin();
	pl_wr_each(close_one);
}

EXPORT void _exit(int status)
{
	REAL(_exit);
	walk_begin();
	pl_wr_each(close_one);
	r__exit(status);
	__builtin_unreachable();
}

EXPORT void _Exit(int status)
{
	_exit(status);
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	REAL(execve);
	before_exec();
	return walk_end(r_execve(path, argv, envp));
}

EXPORT int execv(const char *path, char *const argv[])
{
	REAL(execv);
	before_exec();
	return walk_end(r_execv(path, argv));
}

EXPORT int execvp(const char *file, char *const argv[])
{
	REAL(execvp);
	before_exec();
	return walk_end(r_execvp(file, argv));
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	REAL(execvpe);
	before_exec();
	return walk_end(r_execvpe(file, argv, envp));
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	REAL(fexecve);
	before_exec();
	return walk_end(r_fexecve(fd, argv, envp));
}

/* execl, execlp, execle: their arguments as an argv (and envp). */
#define ARGV_OF(first, ap, argv, envp, with_env)                         \
	do {                                                             \
		size_t n_ = 1;                                           \
		va_list cp_;                                             \
		va_copy(cp_, ap);                                        \
		while (va_arg(cp_, char *))                              \
			n_++;                                            \
		va_end(cp_);                                             \
		argv = alloca((n_ + 1) * sizeof(char *));                \
		argv[0] = (char *)(first);                               \
		for (size_t i_ = 1; i_ <= n_; i_++)                      \
			argv[i_] = va_arg(ap, char *);                   \
		if (with_env)                                            \
			envp = va_arg(ap, char **);                      \
	} while (0)

/* execl(path, ...) and execlp(file, ...): the v form of their argv */
#define EXECL(name, vname)                                               \
	EXPORT int name(const char *path, const char *arg, ...)          \
	{                                                                \
		char **argv, **envp = NULL;                              \
		va_list ap;                                              \
		va_start(ap, arg);                                       \
		ARGV_OF(arg, ap, argv, envp, 0);                         \
		va_end(ap);                                              \
		(void)envp;                                              \
		return vname(path, argv);                                \
	}
EXECL(execl, execv)
EXECL(execlp, execvp)

EXPORT int execle(const char *path, const char *arg, ...)
{
	char **argv, **envp;
	va_list ap;

	va_start(ap, arg);
	ARGV_OF(arg, ap, argv, envp, 1);
	va_end(ap);
	return execve(path, argv, envp);
}

EXPORT int posix_spawn(pid_t *pid, const char *path,
		       const posix_spawn_file_actions_t *fa,
		       const posix_spawnattr_t *attr, char *const argv[],
		       char *const envp[])
{
	REAL(posix_spawn);
	before_exec();
	return walk_end(r_posix_spawn(pid, path, fa, attr, argv, envp));
}

EXPORT int posix_spawnp(pid_t *pid, const char *file,
			const posix_spawn_file_actions_t *fa,
			const posix_spawnattr_t *attr, char *const argv[],
			char *const envp[])
{
	REAL(posix_spawnp);
	before_exec();
	return walk_end(r_posix_spawnp(pid, file, fa, attr, argv, envp));
}

/* The calls that settle a chunk being written (and realize one being
 * read) are preload_real.c's. */

/* pwritev: buffered as pwrite on a chunk being written, EBADF on one
 * being read */
#define PWRITEV(name, offt)                                              \
	EXPORT ssize_t name(int fd, const struct iovec *iov, int cnt,     \
			    offt off)                                    \
	{                                                                \
		struct pl_chunk *c = pl_get(fd);                         \
		REAL(name);                                              \
		if (!c)                                                  \
			return r_##name(fd, iov, cnt, off);              \
		if (!c->wr || off < 0) {                                 \
			errno = c->wr ? EINVAL : EBADF;                  \
			pl_put(c);                                       \
			return -1;                                       \
		}                                                        \
		return pl_wr_write(fd, c, iov, cnt, (off_t)off);         \
	}
PWRITEV(pwritev, off_t)
PWRITEV(pwritev64, off64_t)
