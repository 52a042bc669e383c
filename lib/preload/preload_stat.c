/*
 * preload_stat.c - fstat(2) and fstatat(2) with AT_EMPTY_PATH (and glibc's
 * fstat64, fstatat64 and the __fxstat* names programs built against glibc
 * before 2.33 call) on a descriptor libkvfs_preload.so serves
 * (preload_fd.c): the attributes the daemon gave at open, as stat(2) of
 * the name gives them; a chunk being written is settled first and the
 * kernel answers (lib/preload/README.md, "Calls on a served fd").
 */
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/preload/preload_i.h"

static int stat_common(struct pl_chunk *c, void *st)
{
	/* struct stat and struct stat64 are one layout on LP64; lock:
	 * preload_real.c's old_version may change it */
	pthread_mutex_lock(&c->lock);
	memcpy(st, &c->st, sizeof(c->st));
	pthread_mutex_unlock(&c->lock);
	pl_put(c);
	return 0;
}

/* A chunk being written: settled, then the kernel's answer (its writer's
 * inode, mode, owner and times are the daemon's). */
#define WR_SETTLED(name, params, args)                                   \
	EXPORT int name params                                           \
	{                                                                \
		struct pl_chunk *c = pl_get_any(fd);                     \
		REAL(name);                                              \
		if (c && c->wr) {                                        \
			if (pl_settle(fd, c))                         \
				return -1;                               \
			c = NULL;                                        \
		}                                                        \
		if (!c)                                                  \
			return r_##name args;                            \
		return stat_common(c, st);                               \
	}
WR_SETTLED(fstat, (int fd, struct stat *st), (fd, st))
WR_SETTLED(fstat64, (int fd, struct stat64 *st), (fd, st))
/* what programs built against glibc before 2.33 call for fstat (manylinux
 * wheels, conda's builds): still glibc's (compat) symbols */
int __fxstat(int ver, int fd, struct stat *st);
int __fxstat64(int ver, int fd, struct stat64 *st);
int __fxstatat(int ver, int fd, const char *path, struct stat *st,
	       int flags);
int __fxstatat64(int ver, int fd, const char *path, struct stat64 *st,
		 int flags);
WR_SETTLED(__fxstat, (int ver, int fd, struct stat *st), (ver, fd, st))
WR_SETTLED(__fxstat64, (int ver, int fd, struct stat64 *st), (ver, fd, st))

#define COMMA ,

/* fstatat(fd, "", st, AT_EMPTY_PATH) is fstat(fd) (NULL too, Linux 6.11) */
static bool empty_path(const char *path)
{
	return !path || !*path;
}

#define FSTATAT(name, type, ver, vers)                                    \
	EXPORT int name(ver int fd, const char *path, type *st, int flags) \
	{                                                                \
		struct pl_chunk *c = NULL;                               \
		if ((flags & AT_EMPTY_PATH) && empty_path(path))         \
			c = pl_get_any(fd);                              \
		if (c && c->wr) {                                        \
			if (pl_settle(fd, c))                         \
				return -1;                               \
			c = NULL;                                        \
		}                                                        \
		if (!c) {                                                \
			REAL(name);                                      \
			return r_##name(vers fd, path, st, flags);       \
		}                                                        \
		return stat_common(c, st);                               \
	}
FSTATAT(fstatat, struct stat, , )
FSTATAT(fstatat64, struct stat64, , )
FSTATAT(__fxstatat, struct stat, int v COMMA, v COMMA)
FSTATAT(__fxstatat64, struct stat64, int v COMMA, v COMMA)
