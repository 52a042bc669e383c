/*
 * preload_real.c - the calls libkvfs_preload.so does not emulate on a
 * served fd (lib/preload/README.md, "Calls on a served fd"): the fd is
 * made the real file's first (pl_fd_real: a chunk being written is
 * settled, one being read is realized: its name opened again, checked
 * to hold the same bytes (preload_fd.c, same_bytes), dup3'd onto the
 * fd), then the real call runs
 * on it, so its answer is the kernel's. Where the name no longer holds
 * the version served (replaced, removed), fchmod, fchown and futimens
 * change that version as the kernel would change the old inode (the
 * served stat; fstat shows it), other calls fail ESTALE.
 *
 * Answered here without a round trip, on a chunk being read: statx of
 * the fd (the served stat), fstatfs / fstatvfs (the mount's, by the
 * namespace directory), syncfs (the namespace directory's), readahead
 * and posix_fadvise (0: the bytes are in memory), ioctl FIONREAD.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "lib/preload/preload_i.h"



/* ------------------------------- paths through a served fd's link */

/* The fd number path names through its magic link (/proc/self/fd/N,
 * /dev/fd/N), else -1 (NULL allowed). */
static int link_fd(const char *path)
{
	const char *volatile p = path;

	return p && p[0] == '/' ? pl_fd_of_name(p) : -1;
}

/* A path through a served fd's magic link: the fd is made the real
 * file's first, so that the call reaches the file, not the socket (or
 * memfd). Returns 0, or -1 with errno. */
static int link_real(const char *path)
{
	int fd = link_fd(path);

	return fd >= 0 ? pl_fd_real(fd) : 0;
}

/* The served fd (a chunk being read or written) that path names through
 * its magic link, else -1. */
static int served_link(const char *path)
{
	int fd = link_fd(path);
	struct pl_chunk *c = fd >= 0 ? pl_get_any(fd) : NULL;

	if (!c)
		return -1;
	pl_put(c);
	return fd;
}

/* ---------------------------------------- the real file's answer */

/* name(params) on a served fd: the fd made the real file's, then the
 * real call. */
#define REAL_FIRST(ret, name, params, args)                              \
	EXPORT ret name params                                           \
	{                                                                \
		REAL(name);                                              \
		if (pl_fd_real(fd))                                      \
			return -1;                                       \
		return r_##name args;                                    \
	}

REAL_FIRST(int, ftruncate, (int fd, off_t len), (fd, len))
REAL_FIRST(int, ftruncate64, (int fd, off64_t len), (fd, len))
REAL_FIRST(int, fallocate, (int fd, int mode, off_t off, off_t len),
	   (fd, mode, off, len))
REAL_FIRST(int, fallocate64, (int fd, int mode, off64_t off, off64_t len),
	   (fd, mode, off, len))
REAL_FIRST(int, fsync, (int fd), (fd))
REAL_FIRST(int, fdatasync, (int fd), (fd))
REAL_FIRST(int, sync_file_range,
	   (int fd, off64_t off, off64_t n, unsigned int flags),
	   (fd, off, n, flags))
REAL_FIRST(int, fsetxattr,
	   (int fd, const char *name, const void *v, size_t n, int flags),
	   (fd, name, v, n, flags))
REAL_FIRST(ssize_t, fgetxattr, (int fd, const char *name, void *v, size_t n),
	   (fd, name, v, n))
REAL_FIRST(ssize_t, flistxattr, (int fd, char *list, size_t n), (fd, list, n))
REAL_FIRST(int, fremovexattr, (int fd, const char *name), (fd, name))
REAL_FIRST(int, flock, (int fd, int op), (fd, op))
REAL_FIRST(int, lockf, (int fd, int cmd, off_t len), (fd, cmd, len))
REAL_FIRST(int, lockf64, (int fd, int cmd, off64_t len), (fd, cmd, len))
REAL_FIRST(int, fchdir, (int fd), (fd))
REAL_FIRST(ssize_t, pwritev2,
	   (int fd, const struct iovec *iov, int cnt, off_t off, int flags),
	   (fd, iov, cnt, off, flags))
REAL_FIRST(ssize_t, pwritev64v2,
	   (int fd, const struct iovec *iov, int cnt, off64_t off, int flags),
	   (fd, iov, cnt, off, flags))

/* posix_fallocate returns the error, not -1 */
#define REAL_FIRST_RET(name, params, args)                               \
	EXPORT int name params                                           \
	{                                                                \
		REAL(name);                                              \
		if (pl_fd_real(fd))                                      \
			return errno;                                    \
		return r_##name args;                                    \
	}

REAL_FIRST_RET(posix_fallocate, (int fd, off_t off, off_t len),
	       (fd, off, len))
REAL_FIRST_RET(posix_fallocate64, (int fd, off64_t off, off64_t len),
	       (fd, off, len))

EXPORT ssize_t splice(int in, off64_t *inoff, int out, off64_t *outoff,
		      size_t n, unsigned int flags)
{
	REAL(splice);
	/* a chunk being read stays served: the socket answers EINVAL (as
	 * sendfile's), and callers fall back to read */
	if (pl_settle_fd(in) || pl_settle_fd(out))
		return -1;
	return r_splice(in, inoff, out, outoff, n, flags);
}

/* ------------------------------- the served chunk, without the file */

/* The chunk fd stands for when it is one being read (referenced; any:
 * a memfd's too); a chunk being written is settled (*err set where that
 * failed). */
static struct pl_chunk *reader(int fd, int *err, bool any)
{
	struct pl_chunk *c = any ? pl_get_any(fd) : pl_get(fd);

	*err = 0;
	if (c && c->wr) {
		*err = pl_settle(fd, c);
		c = NULL;
	}
	return c;
}

/* The namespace directory of c: its path (the part of c->path before
 * dirlen) opened, or -1 with errno. */
static int ns_open(const struct pl_chunk *c)
{
	char dir[PATH_MAX];

	REAL(openat);
	if (!c->path || c->dirlen >= sizeof(dir)) {
		errno = ESTALE;
		return -1;
	}
	memcpy(dir, c->path, c->dirlen);
	dir[c->dirlen] = '\0';
	return r_openat(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* fstatfs, fstatvfs, syncfs of a chunk being read: the call on its
 * namespace directory (the same mount), which needs no version. */
#define ON_NS(name, params, args)                                        \
	EXPORT int name params                                           \
	{                                                                \
		int err, nfd, r;                                         \
		struct pl_chunk *c = reader(fd, &err, true);             \
		REAL(name);                                              \
		if (err)                                                 \
			return -1;                                       \
		if (!c)                                                  \
			return r_##name args;                            \
		nfd = ns_open(c);                                        \
		pl_put(c);                                               \
		if (nfd < 0)                                             \
			return -1;                                       \
		fd = nfd;                                                \
		r = r_##name args;                                       \
		err = errno;                                             \
		close(nfd);                                              \
		errno = err;                                             \
		return r;                                                \
	}
ON_NS(fstatfs, (int fd, struct statfs *st), (fd, st))
ON_NS(fstatfs64, (int fd, struct statfs64 *st), (fd, st))
ON_NS(fstatvfs, (int fd, struct statvfs *st), (fd, st))
ON_NS(fstatvfs64, (int fd, struct statvfs64 *st), (fd, st))
ON_NS(syncfs, (int fd), (fd))

/* posix_fadvise: advice on bytes already in memory does nothing; a bad
 * one is EINVAL, as the kernel's */
#define FADVISE(name, offt)                                              \
	EXPORT int name(int fd, offt off, offt len, int adv)             \
	{                                                                \
		int err;                                                 \
		struct pl_chunk *c = reader(fd, &err, false);            \
		REAL(name);                                              \
		if (err)                                                 \
			return errno;                                    \
		if (!c)                                                  \
			return r_##name(fd, off, len, adv);              \
		pl_put(c);                                               \
		return len < 0 || adv < POSIX_FADV_NORMAL ||             \
		       adv > POSIX_FADV_NOREUSE ? EINVAL : 0;            \
	}
FADVISE(posix_fadvise, off_t)
FADVISE(posix_fadvise64, off64_t)

EXPORT ssize_t readahead(int fd, off64_t off, size_t n)
{
	int err;
	struct pl_chunk *c = reader(fd, &err, false);

	REAL(readahead);
	if (err)
		return -1;
	if (!c)
		return r_readahead(fd, off, n);
	pl_put(c);
	return 0; /* the bytes are in memory */
}

/*
 * ioctl: FIONREAD on a chunk being read is the bytes left past its
 * offset (as for a regular file); the other terminal ioctls ('T': TCGETS
 * of isatty, FIOCLEX...) the socket answers as the file would (ENOTTY,
 * or the fd's flags); any other (KVFS_IOC_HANDLE, FS_IOC_*...) reaches
 * the real file.
 */
EXPORT int ioctl(int fd, unsigned long req, ...)
{
	struct pl_chunk *c;
	va_list ap;
	void *arg;
	int err;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	REAL(ioctl);
	c = reader(fd, &err, true);
	if (err)
		return -1;
	if (c && c->memfd && (req == FIONREAD || _IOC_TYPE(req) == 'T')) {
		pl_put(c); /* the memfd's answer is the file's */
		c = NULL;
	}
	if (c && req == FIONREAD) {
		pthread_mutex_lock(&c->lock);
		*(int *)arg = c->off >= c->st.st_size ? 0 :
			      c->st.st_size - c->off > INT_MAX ? INT_MAX :
			      (int)(c->st.st_size - c->off);
		pthread_mutex_unlock(&c->lock);
		pl_put(c);
		return 0;
	}
	if (c && _IOC_TYPE(req) == 'T') {
		pl_put(c);
		c = NULL;
	}
	if (c && pl_realize(fd, c))
		return -1;
	return r_ioctl(fd, req, arg);
}

/* statx of the fd itself (AT_EMPTY_PATH and "" or NULL, Linux 6.11):
 * a chunk being written settled, one being read its served stat, every
 * field statx gives that a stat has (and the namespace's mount id). */
EXPORT int statx(int fd, const char *path, int flags, unsigned int mask,
		 struct statx *sx)
{
	const char *volatile p = path; /* NULL is allowed (Linux 6.11) */
	struct pl_chunk *c = NULL;
	struct stat st;
	uint64_t mnt_id;
	int err;

	REAL(statx);
	if ((flags & AT_EMPTY_PATH) && (!p || !*p)) {
		c = reader(fd, &err, true);
		if (err)
			return -1;
	} else if (link_real(path)) {
		return -1;
	}
	if (!c)
		return r_statx(fd, path, flags, mask, sx);
	pthread_mutex_lock(&c->lock);
	st = c->st;
	pthread_mutex_unlock(&c->lock);
	mnt_id = c->mnt_id;
	pl_put(c);
	memset(sx, 0, sizeof(*sx));
	sx->stx_mask = STATX_BASIC_STATS | (mnt_id ? STATX_MNT_ID : 0);
	sx->stx_blksize = (uint32_t)st.st_blksize;
	sx->stx_nlink = (uint32_t)st.st_nlink;
	sx->stx_uid = st.st_uid;
	sx->stx_gid = st.st_gid;
	sx->stx_mode = (uint16_t)st.st_mode;
	sx->stx_ino = st.st_ino;
	sx->stx_size = (uint64_t)st.st_size;
	sx->stx_blocks = (uint64_t)st.st_blocks;
	sx->stx_atime.tv_sec = st.st_atim.tv_sec;
	sx->stx_atime.tv_nsec = (uint32_t)st.st_atim.tv_nsec;
	sx->stx_mtime.tv_sec = st.st_mtim.tv_sec;
	sx->stx_mtime.tv_nsec = (uint32_t)st.st_mtim.tv_nsec;
	sx->stx_ctime.tv_sec = st.st_ctim.tv_sec;
	sx->stx_ctime.tv_nsec = (uint32_t)st.st_ctim.tv_nsec;
	sx->stx_dev_major = major(st.st_dev);
	sx->stx_dev_minor = minor(st.st_dev);
	sx->stx_mnt_id = mnt_id;
	return 0;
}

/* ------------------------------------- attributes: fchmod, fchown... */

/* Whether the caller is in group gid (its egid or a supplementary one). */
static bool in_group(gid_t gid)
{
	gid_t g[256];
	int n;

	if (getegid() == gid)
		return true;
	n = getgroups(256, g);
	for (int i = 0; i < n; i++)
		if (g[i] == gid)
			return true;
	return false;
}

enum attr_op { OP_CHMOD, OP_CHOWN, OP_TIMES };

/*
 * A change of attributes on a chunk being read whose name no longer holds
 * its version (pl_realize said ESTALE): what the kernel does to the old
 * inode (an open fd of it keeps working): the change is made to that
 * version alone, kept in the served stat (fstat, statx show it), with
 * the kernel's checks (the owner or root; chown of the owner by root
 * only, of the group to one of the caller's; explicit times by the owner
 * or root, "now" also by who may write it). A key namespace's chunk
 * never changes (the daemon refuses: EPERM). c referenced, dropped.
 */
static int old_version(struct pl_chunk *c, enum attr_op op, mode_t mode,
		       uid_t uid, gid_t gid, const struct timespec *t)
{
	struct stat *st = &c->st;
	uid_t me = geteuid();
	struct timespec now;
	bool owner, root = me == 0;
	int err = 0;

	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&c->lock);
	st->st_nlink = 0; /* its name leads elsewhere now */
	owner = me == st->st_uid;
	if (c->keyns) {
		err = EPERM;
	} else if (op == OP_CHMOD) {
		if (!owner && !root)
			err = EPERM;
		else if (!root && !in_group(st->st_gid))
			mode &= (mode_t)~S_ISGID;
		if (!err)
			st->st_mode = (st->st_mode & S_IFMT) | (mode & 07777);
	} else if (op == OP_CHOWN) {
		if (uid == (uid_t)-1)
			uid = st->st_uid;
		if (gid == (gid_t)-1)
			gid = st->st_gid;
		if (!root && (uid != st->st_uid ||
			      (gid != st->st_gid && (!owner || !in_group(gid)))))
			err = EPERM;
		if (!err && (uid != st->st_uid || gid != st->st_gid ||
			     uid != (uid_t)-1)) {
			st->st_uid = uid;
			st->st_gid = gid;
			st->st_mode &= (mode_t)~S_ISUID;
			if (st->st_mode & S_IXGRP)
				st->st_mode &= (mode_t)~S_ISGID;
		}
	} else {
		bool set_now = !t || (t[0].tv_nsec == UTIME_NOW &&
				      t[1].tv_nsec == UTIME_NOW);
		bool may_write = owner ? (st->st_mode & S_IWUSR) :
				 in_group(st->st_gid) ? (st->st_mode & S_IWGRP) :
				 (st->st_mode & S_IWOTH);

		if (!owner && !root)
			err = set_now ? (may_write ? 0 : EACCES) : EPERM;
		for (int i = 0; !err && i < 2; i++) {
			struct timespec v = !t || t[i].tv_nsec == UTIME_NOW ?
					    now : t[i];

			if (t && t[i].tv_nsec == UTIME_OMIT)
				continue;
			if (i == 0)
				st->st_atim = v;
			else
				st->st_mtim = v;
		}
	}
	if (!err)
		st->st_ctim = now;
	pthread_mutex_unlock(&c->lock);
	pl_put(c);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

/* fd made real (0: then the real call), or -1: failed (errno), or 1: a
 * chunk being read whose version is gone (*cp referenced). */
static int attr_real(int fd, struct pl_chunk **cp)
{
	struct pl_chunk *c = pl_get_any(fd), *kept;
	int err;

	*cp = NULL;
	if (!c)
		return 0;
	if (c->wr)
		return pl_settle(fd, c);
	kept = pl_get_any(fd); /* for old_version */
	if (!pl_realize(fd, c)) {
		if (kept)
			pl_put(kept);
		return 0;
	}
	if (errno == ESTALE && kept == c) {
		*cp = c;
		return 1;
	}
	err = errno;
	if (kept)
		pl_put(kept);
	errno = err;
	return -1;
}

/* name(params): the real file's call, or old_version(c, ...) where the
 * served version is no longer at its name */
#define ATTR(name, params, args, old)                                    \
	EXPORT int name params                                           \
	{                                                                \
		struct pl_chunk *c;                                      \
		int r = attr_real(fd, &c);                               \
		REAL(name);                                              \
		if (r < 0)                                               \
			return -1;                                       \
		return r ? old : r_##name args;                          \
	}
ATTR(fchmod, (int fd, mode_t mode), (fd, mode),
     old_version(c, OP_CHMOD, mode, 0, 0, NULL))
ATTR(fchown, (int fd, uid_t uid, gid_t gid), (fd, uid, gid),
     old_version(c, OP_CHOWN, 0, uid, gid, NULL))
ATTR(futimens, (int fd, const struct timespec t[2]), (fd, t),
     old_version(c, OP_TIMES, 0, 0, 0, t))

static const struct timespec *tv_ts(const struct timeval *tv,
				    struct timespec ts[2])
{
	if (!tv)
		return NULL;
	for (int i = 0; i < 2; i++) {
		ts[i].tv_sec = tv[i].tv_sec;
		ts[i].tv_nsec = tv[i].tv_usec * 1000;
	}
	return ts;
}

EXPORT int futimes(int fd, const struct timeval tv[2])
{
	struct timespec ts[2];

	if (tv && (tv[0].tv_usec < 0 || tv[0].tv_usec >= 1000000 ||
		   tv[1].tv_usec < 0 || tv[1].tv_usec >= 1000000)) {
		errno = EINVAL;
		return -1;
	}
	return futimens(fd, tv_ts(tv, ts));
}

/* chmod, chown, utimes of a served fd's link (/proc/self/fd/N) are its
 * fchmod, fchown, futimes (they follow the link to the fd's file): the
 * real file's where the name still holds the bytes served, else the
 * served version's alone, as for the fd */
EXPORT int chmod(const char *path, mode_t mode)
{
	int fd = served_link(path);

	REAL(chmod);
	return fd >= 0 ? fchmod(fd, mode) : r_chmod(path, mode);
}

EXPORT int chown(const char *path, uid_t uid, gid_t gid)
{
	int fd = served_link(path);

	REAL(chown);
	return fd >= 0 ? fchown(fd, uid, gid) : r_chown(path, uid, gid);
}

EXPORT int utimes(const char *path, const struct timeval t[2])
{
	int fd = served_link(path);

	REAL(utimes);
	return fd >= 0 ? futimes(fd, t) : r_utimes(path, t);
}

/* utimensat(fd, NULL, t, 0) is futimens(fd, t) */
EXPORT int utimensat(int fd, const char *path, const struct timespec t[2],
		     int flags)
{
	const char *volatile p = path;
	int lfd;

	REAL(utimensat);
	if (!p && !flags && fd >= 0)
		return futimens(fd, t);
	if (!flags && (lfd = served_link(path)) >= 0)
		return futimens(lfd, t);
	if (link_real(path))
		return -1;
	return r_utimensat(fd, path, t, flags);
}

/* fchownat(fd, "", uid, gid, AT_EMPTY_PATH) is fchown(fd, uid, gid) */
EXPORT int fchownat(int fd, const char *path, uid_t uid, gid_t gid,
		    int flags)
{
	const char *volatile p = path;

	REAL(fchownat);
	if ((flags & AT_EMPTY_PATH) && p && !*p &&
	    !(flags & ~(AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)))
		return fchown(fd, uid, gid);
	return r_fchownat(fd, path, uid, gid, flags);
}

/* fchmodat(fd, "", mode, AT_EMPTY_PATH) is fchmod(fd, mode) */
EXPORT int fchmodat(int fd, const char *path, mode_t mode, int flags)
{
	const char *volatile p = path;

	REAL(fchmodat);
	if ((flags & AT_EMPTY_PATH) && p && !*p &&
	    !(flags & ~(AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)))
		return fchmod(fd, mode);
	return r_fchmodat(fd, path, mode, flags);
}

/* faccessat(fd, "", mode, AT_EMPTY_PATH): the real file's permissions,
 * not the socket's */
EXPORT int faccessat(int fd, const char *path, int mode, int flags)
{
	const char *volatile p = path;

	REAL(faccessat);
	if ((flags & AT_EMPTY_PATH) && (!p || !*p) && pl_fd_real(fd))
		return -1;
	return r_faccessat(fd, path, mode, flags);
}

#define VIA_LINK(ret, name, params, args)                                \
	EXPORT ret name params                                           \
	{                                                                \
		REAL(name);                                              \
		if (link_real(path))                                     \
			return -1;                                       \
		return r_##name args;                                    \
	}
VIA_LINK(int, truncate, (const char *path, off_t len), (path, len))
VIA_LINK(int, truncate64, (const char *path, off64_t len), (path, len))
VIA_LINK(int, setxattr, (const char *path, const char *name, const void *v,
			 size_t n, int flags), (path, name, v, n, flags))
VIA_LINK(ssize_t, getxattr, (const char *path, const char *name, void *v,
			     size_t n), (path, name, v, n))
VIA_LINK(ssize_t, listxattr, (const char *path, char *list, size_t n),
	 (path, list, n))
VIA_LINK(int, removexattr, (const char *path, const char *name),
	 (path, name))
VIA_LINK(int, stat, (const char *path, struct stat *st), (path, st))
VIA_LINK(int, stat64, (const char *path, struct stat64 *st), (path, st))
VIA_LINK(int, access, (const char *path, int mode), (path, mode))
VIA_LINK(ssize_t, readlink, (const char *path, char *buf, size_t n),
	 (path, buf, n))
