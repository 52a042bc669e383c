/*
 * preload.c - libkvfs_preload.so: an opt-in LD_PRELOAD library that serves
 * read-only opens of kvfs chunks through one KVFS_IOC_GET (kvfs.h 3b)
 * instead of FUSE's LOOKUP, OPEN, READ per MiB and RELEASE (issue 26;
 * DAOS's interception library does the same for its FUSE mount).
 *
 * open/open64/openat/openat64, glibc's fortified __open_2 family and
 * fopen/fopen64 are interposed. A read-only open of a file named by a key
 * (32 lowercase hex) in a key namespace of a kvfs mount, or of any file of
 * a path namespace, is answered after a stat of its name (what fstat of
 * the fd says; the GET's room) by one GET of its bytes into the library's
 * memory, behind a descriptor of preload_fd.c (KVFS_PRELOAD=memfd, and
 * fopen: a read-only memfd holding them). Calls on that descriptor are
 * served from memory (preload_fd.c), or made on the real file after the
 * descriptor is turned into it (preload_real.c). A new key opened for
 * writing is buffered and published at close (preload_wr.c).
 *
 * Anything else, and any doubt, is the real libc call unchanged: other
 * flags (O_RDWR, O_APPEND, O_PATH...), files outside kvfs, chunks larger
 * than KVFS_PRELOAD_MAX, a miss and every ioctl error (then the real open
 * runs, so the errno is the kernel's).
 * KVFS_PRELOAD=0 disables it. lib/preload/README.md is the manual.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "kvfs.h"
#include "lib/preload/preload_i.h"


#define MAX_DEFAULT (64ull << 20) /* largest chunk served (KVFS_PRELOAD_MAX) */
#define NS_SLOTS 64               /* namespaces remembered */
#define DEV_SLOTS 16              /* devices remembered (kvfs or not) */

/* Flags a served open for writing may carry besides O_WRONLY | O_CREAT
 * (not O_APPEND, O_SYNC, O_DSYNC, O_DIRECT, O_TMPFILE...). */
#define WRITE_FLAGS (O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC | O_NOCTTY | \
		     O_NONBLOCK | 0100000 | O_NOFOLLOW)

/* Flags a served open may carry; any other flag goes to the real call
 * (O_NOATIME too: the kernel's EPERM for a file not the caller's). */
#define SERVED_FLAGS (O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_LARGEFILE | 0100000 | \
		      O_NOFOLLOW)

/* ------------------------------------------------------- the real calls */

typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*open_fn)(const char *, int, ...);
typedef int (*open2_fn)(const char *, int);
typedef int (*openat2_fn)(int, const char *, int);
typedef FILE *(*fopen_fn)(const char *, const char *);

static struct {
	open_fn open, open64;
	openat_fn openat, openat64;
	open2_fn open_2, open64_2;
	openat2_fn openat_2, openat64_2;
	fopen_fn fopen, fopen64;
} real;

static void *sym(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

/* Resolves the real calls once (also before our constructor ran: another
 * library's constructor may open files). */
static void resolve(void)
{
	real.open = (open_fn)sym("open");
	real.open64 = (open_fn)sym("open64");
	real.openat = (openat_fn)sym("openat");
	real.openat64 = (openat_fn)sym("openat64");
	real.open_2 = (open2_fn)sym("__open_2");
	real.open64_2 = (open2_fn)sym("__open64_2");
	real.openat_2 = (openat2_fn)sym("__openat_2");
	real.openat64_2 = (openat2_fn)sym("__openat64_2");
	real.fopen = (fopen_fn)sym("fopen");
	real.fopen64 = (fopen_fn)sym("fopen64");
}

static pthread_once_t resolve_once = PTHREAD_ONCE_INIT;

/* ------------------------------------------------------------- settings */

enum { OFF, SERVE_MEM, SERVE_MEMFD };
static int enabled = -1;     /* -1 until read, else OFF / SERVE_* */
static uint64_t max_bytes;   /* KVFS_PRELOAD_MAX */
static bool writes;          /* KVFS_PRELOAD_WRITES (default on) */
static bool lazy;            /* KVFS_PRELOAD_WRITES=lazy: no LOOKUP at open */
static bool lazy_reads;      /* KVFS_PRELOAD_READS=lazy: the GET at the
			      * first read, into the caller's buffer */
static bool sandbox_ok;      /* KVFS_PRELOAD_SANDBOXED=1 */

static void read_env(void)
{
	const char *e = getenv("KVFS_PRELOAD");
	const char *m = getenv("KVFS_PRELOAD_MAX"), *w;
	char *end;
	unsigned long long v;

	max_bytes = MAX_DEFAULT;
	if (m && *m) {
		v = strtoull(m, &end, 10);
		if (*end == '\0')
			max_bytes = v;
	}
	w = getenv("KVFS_PRELOAD_WRITES");
	writes = !(w && strcmp(w, "0") == 0);
	lazy = w && strcmp(w, "lazy") == 0;
	w = getenv("KVFS_PRELOAD_READS");
	lazy_reads = w && strcmp(w, "lazy") == 0;
	w = getenv("KVFS_PRELOAD_SANDBOXED");
	sandbox_ok = w && strcmp(w, "1") == 0;
	pl_wr_set_max(max_bytes);
	enabled = (e && strcmp(e, "0") == 0) || !max_bytes ? OFF :
		  e && strcmp(e, "memfd") == 0 ? SERVE_MEMFD : SERVE_MEM;
}

/*
 * A process with no_new_privs set may be in a Landlock or seccomp sandbox
 * whose rules (set after a namespace directory was opened here) the
 * daemon's GET could not know: every open is then the kernel's, unless
 * KVFS_PRELOAD_SANDBOXED=1 says no such rule limits the files below a
 * namespace (lib/preload/README.md).
 */
static bool sandboxed(void)
{
	return !sandbox_ok && prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
}

/* --------------------------------------------------- namespaces, devices */

enum ns_kind { NS_KEYS = 1, NS_PATHS = 2, NS_OTHER = 3 };

struct ns_slot {
	dev_t dev;        /* 0: free */
	ino_t ino;
	int fd;           /* the namespace directory, O_RDONLY; -1 for OTHER */
	enum ns_kind kind;
	char *path;       /* the directory's absolute path (/proc/self/fd),
			   * for a served chunk's pl_realize; NULL: none */
	uint64_t mnt_id;  /* statx's stx_mnt_id; 0: unknown */
	bool no_mtime;    /* (atomic) its daemon refused KVFS_XFER_MTIME
			   * (EINVAL: older than this library): its path
			   * files' GETs name the st_ino alone, at the open
			   * (README, "Path namespaces"), none read lazily */
};

struct dev_slot {
	dev_t dev;
	bool kvfs;
	bool used;
};

/* lock: protects every field below. Written for a change of the tables
 * (the first look at a namespace: mountinfo, opendir, getxattr; a drop);
 * read for a GET on a cached namespace fd,
 * which so cannot be closed under the GET (no dup of it per open). Fork:
 * the child gets it unlocked (atfork handlers below). */
static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static struct ns_slot ns_tab[NS_SLOTS];
static unsigned ns_next;       /* next slot to reuse when full */
static struct dev_slot dev_tab[DEV_SLOTS];
static unsigned dev_next;

static void fork_prepare(void) { pthread_rwlock_wrlock(&lock); }
static void fork_parent(void) { pthread_rwlock_unlock(&lock); }
/* the child's only thread is not the writer the lock names: a new lock */
static void fork_child(void)
{
	pthread_rwlock_init(&lock, NULL);
}

__attribute__((constructor)) static void preload_init(void)
{
	pthread_once(&resolve_once, resolve);
	read_env();
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* Whether dev is a kvfs mount: a FUSE device (major 0) whose mountinfo
 * line says fuse.kvfs. Read once per device. Caller holds lock. */
static bool dev_is_kvfs(dev_t dev)
{
	char want[32], line[4096];
	bool kvfs = false;
	FILE *f;
	int fd;

	for (unsigned i = 0; i < DEV_SLOTS; i++)
		if (dev_tab[i].used && dev_tab[i].dev == dev)
			return dev_tab[i].kvfs;
	if (major(dev) == 0) {
		snprintf(want, sizeof(want), " %u:%u ", major(dev), minor(dev));
		fd = real.openat(AT_FDCWD, "/proc/self/mountinfo",
				 O_RDONLY | O_CLOEXEC);
		f = fd >= 0 ? fdopen(fd, "r") : NULL;
		if (!f && fd >= 0)
			close(fd);
		while (f && !kvfs && fgets(line, sizeof(line), f)) {
			const char *sep = strstr(line, " - ");

			kvfs = strstr(line, want) && sep &&
			       strncmp(sep + 3, "fuse.kvfs ", 10) == 0;
		}
		if (f)
			fclose(f);
	}
	dev_tab[dev_next] = (struct dev_slot){ .dev = dev, .kvfs = kvfs,
					       .used = true };
	dev_next = (dev_next + 1) % DEV_SLOTS;
	return kvfs;
}

static struct ns_slot *ns_find(dev_t dev, ino_t ino)
{
	for (unsigned i = 0; i < NS_SLOTS; i++)
		if (ns_tab[i].dev == dev && ns_tab[i].ino == ino)
			return &ns_tab[i];
	return NULL;
}

static void ns_drop(struct ns_slot *s)
{
	struct stat fst;

	/* closed only while still the directory opened: a program may have
	 * dup2'd its own file onto that number since */
	if (s->fd >= 0 && !fstat(s->fd, &fst) && fst.st_dev == s->dev &&
	    fst.st_ino == s->ino)
		close(s->fd);
	free(s->path);
	memset(s, 0, sizeof(*s));
	s->fd = -1;
}

/* First look at directory dir (dev, ino) of a kvfs mount: opens it and
 * asks whether it is a namespace of keys. Caller holds lock. */
static struct ns_slot *ns_add(int dirfd, const char *dir, const struct stat *st)
{
	struct ns_slot *s = &ns_tab[ns_next];
	char names[16], link[40], path[PATH_MAX];
	struct statx sx;
	struct stat fst;
	ssize_t n;
	int fd;

	ns_next = (ns_next + 1) % NS_SLOTS;
	if (s->dev)
		ns_drop(s);
	s->dev = st->st_dev;
	s->ino = st->st_ino;
	s->fd = -1;
	s->kind = NS_OTHER;
	fd = real.openat(dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) { /* kept: away from the fd the caller gets next */
		int hi = pl_fd_high(fd);

		close(fd);
		fd = hi;
	}
	if (fd < 0) {
		/* no read permission now; another uid (setuid) may have it */
		memset(s, 0, sizeof(*s));
		s->fd = -1;
		return NULL;
	}
	n = fgetxattr(fd, KVFS_XATTR_NAMES, names, sizeof(names) - 1);
	if (fstat(fd, &fst) == 0 && fst.st_dev == st->st_dev &&
	    fst.st_ino == st->st_ino &&
	    ((n == 4 && !memcmp(names, "keys", 4)) ||
	     (n == 5 && !memcmp(names, "paths", 5)))) {
		s->kind = n == 4 ? NS_KEYS : NS_PATHS;
		s->fd = fd;
		/* where a served chunk's name is opened again (pl_realize) */
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, path, sizeof(path) - 1);
		if (n > 0 && path[0] == '/') {
			path[n] = '\0';
			s->path = strdup(path);
		}
		if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) == 0 &&
		    (sx.stx_mask & STATX_MNT_ID))
			s->mnt_id = sx.stx_mnt_id;
	} else {
		close(fd);
	}
	return s;
}

/* ------------------------------------------------------------- serving */

/* Splits path into its directory (into dir) and its last name; *is_key
 * says whether the name is a key (then in key). Returns the name, or
 * NULL (a directory name too long). */
static const char *split_name(const char *path, char dir[PATH_MAX],
			      struct kvfs_key *key, bool *is_key)
{
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	size_t dlen;

	*is_key = kvfs_key_parse(name, strlen(name), key) == 0;
	if (!slash) {
		strcpy(dir, ".");
		return name;
	}
	dlen = slash == path ? 1 : (size_t)(slash - path);
	if (dlen >= PATH_MAX)
		return NULL;
	memcpy(dir, path, dlen);
	dir[dlen] = '\0';
	return name;
}

/*
 * One GET of key from nsfd into [buf, buf + cap). Returns the chunk's size
 * (>= 0) or -1; *size is set to the chunk's size when the daemon said it
 * (a -EMSGSIZE answer included), *gone when the namespace itself is gone.
 * named: a path namespace's file, as the caller's stat of its name says
 * (KVFS_XFER_NAMED: only that file, now; KVFS_XFER_MTIME: only the
 * version that stat showed, unless its namespace's *no_mt says the
 * daemon refuses that; strict: then no GET at all), else NULL. *stale
 * (may be NULL): the daemon said the name shows another version now
 * (-ESTALE).
 */
static long get_into(int nsfd, const struct kvfs_key *key, void *buf,
		     uint64_t cap, uint64_t *size, bool *gone,
		     const struct stat *named, bool *no_mt, bool strict,
		     bool *stale)
{
	bool mt = named && no_mt && !__atomic_load_n(no_mt, __ATOMIC_RELAXED);
	struct kvfs_io io;
	long rc;

again:
	memset(&io, 0, sizeof(io));
	io.key = *key;
	io.buf = buf;
	io.len = cap;
	if (named)
		io.size = (uint64_t)named->st_ino;
	if (mt)
		io.result = pl_mtime_ns(&named->st_mtim);
	rc = kvfs_mget(nsfd, &io, 1, named ? KVFS_XFER_NAMED |
			       (mt ? KVFS_XFER_MTIME : 0) : 0);
	if (rc == -EINVAL && mt) { /* an older daemon */
		__atomic_store_n(no_mt, true, __ATOMIC_RELAXED);
		mt = false;
		if (!strict)
			goto again;
	}
	if (stale)
		*stale = rc == 0 && io.result == -ESTALE;
	*gone = rc == -ENOENT || rc == -ENOTTY;
	if (rc == 1 || io.result == -EMSGSIZE)
		*size = rc == 1 ? (uint64_t)io.result : io.size;
	return rc == 1 ? (long)io.result : -1;
}

/* KVFS_PRELOAD=memfd: the chunk in a new memfd (mode 0444), or -1 when
 * it is not exactly cap bytes. */
static int get_memfd(int nsfd, const struct kvfs_key *key, uint64_t cap,
		     uint64_t *size, bool *gone, const struct stat *named,
		     bool *no_mt)
{
	void *p;
	long n;
	int mfd;

	mfd = memfd_create("kvfs-preload", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return -1;
	if (ftruncate(mfd, (off_t)cap))
		goto err_close;
	/* populated at once: the daemon's copy then takes no page faults */
	p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		 mfd, 0);
	if (p == MAP_FAILED)
		goto err_close;
	n = get_into(nsfd, key, p, cap, size, gone, named, no_mt, false,
		     NULL);
	munmap(p, cap);
	if (n < 0 || (uint64_t)n != cap ||
	    ftruncate(mfd, (off_t)n) || fchmod(mfd, 0444))
		goto err_close;
	return mfd;

err_close:
	close(mfd);
	return -1;
}

/* What a served chunk being read is, beside its bytes. */
struct src {
	const struct stat *st; /* stat(2) of its name, as open(2) found it */
	const char *dir;       /* the namespace directory, absolute */
	const char *below;     /* the name below it */
	uint64_t mnt_id;       /* the namespace's (statx) */
	bool keyns;            /* a key namespace's chunk */
	bool *no_mt;           /* a path file's: its ns_slot's no_mtime */
};

/* c stands for the version src says (what fstat says: the stat of its
 * name, its own st_ino, mode, owner, times, not a made-up one; its name,
 * for pl_realize). Returns 0, or -1 (no memory). */
static int describe(struct pl_chunk *c, const struct src *src, int flags)
{
	size_t dlen = strlen(src->dir);

	c->path = malloc(dlen + strlen(src->below) + 2);
	if (!c->path)
		return -1;
	sprintf(c->path, "%s/%s", src->dir, src->below);
	c->dirlen = dlen;
	c->st = *src->st;
	c->oflags = flags & (O_NONBLOCK | O_DIRECT | O_NOFOLLOW);
	c->keyns = src->keyns;
	c->mnt_id = src->mnt_id;
	return 0;
}

/* A memfd served for src (KVFS_PRELOAD=memfd, fopen) stands for its
 * version too (pl_fd_track: fstat, statx, the calls that need the file);
 * where there is no memory for that, it is the memfd's own. */
static int track(int fd, const struct src *src, int flags)
{
	struct pl_chunk *c = fd >= 0 ? pl_chunk_new(0) : NULL;

	if (c && describe(c, src, flags) == 0)
		pl_fd_track(fd, c);
	else if (c)
		pl_chunk_free(c);
	return fd;
}

/* KVFS_PRELOAD=1: the chunk in memory, behind a descriptor of
 * preload_fd.c; -1 when not served. Exactly the bytes of the version the
 * stat found (a path namespace's: KVFS_XFER_NAMED; a key's: as many),
 * else the real open answers. */
static int get_mem(int nsfd, const struct kvfs_key *key, uint64_t *size,
		   bool *gone, const struct src *src, int flags)
{
	const struct stat *st = src->st;
	struct pl_chunk *c = pl_chunk_new((size_t)st->st_size);
	long n;

	if (!c)
		return -1;
	n = get_into(nsfd, key, c->buf, c->cap, size, gone,
		     src->keyns ? NULL : st, src->no_mt, false, NULL);
	if (n != st->st_size || describe(c, src, flags)) {
		pl_chunk_free(c);
		return -1;
	}
	c->size = (uint64_t)n;
	return pl_fd_serve(c, flags);
}

/* KVFS_PRELOAD_READS=lazy: a chunk of a key namespace, or a file of a
 * path namespace (src->keyns false: its GETs are KVFS_XFER_NAMED with the
 * st_ino of src's stat), served without its bytes yet (pl_fill,
 * pl_lazy_get fetch them when a call needs them): the open asks the
 * daemon nothing. nsst: its namespace directory's stat. Returns the fd,
 * or -1. */
static int get_lazy(const struct kvfs_key *key, const struct stat *nsst,
		    const struct src *src, int flags)
{
	struct pl_chunk *c = pl_chunk_new(0);

	if (!c)
		return -1;
	if (describe(c, src, flags)) {
		pl_chunk_free(c);
		return -1;
	}
	c->size = (uint64_t)src->st->st_size;
	c->key = *key;
	c->ns_dev = nsst->st_dev;
	c->ns_ino = nsst->st_ino;
	c->lazy_ino = src->st->st_ino;
	c->lazy_mtim = src->st->st_mtim;
	c->lazy = 1;
	return pl_fd_serve(c, flags);
}

/* The memfd as the caller asked for it: reopened read-only (so a write is
 * EBADF and F_GETFL says O_RDONLY, as for the chunk), with O_CLOEXEC and
 * O_NONBLOCK as asked, at mfd's number (the lowest free at the open, as
 * open(2) returns: dup3 over mfd). Takes mfd. */
static int reopen_rdonly(int mfd, int flags)
{
	char p[40];
	int fd, r;

	REAL(dup3);
	snprintf(p, sizeof(p), "/proc/self/fd/%d", mfd);
	fd = real.openat(AT_FDCWD, p, O_RDONLY |
			 (flags & (O_CLOEXEC | O_NONBLOCK)));
	if (fd >= 0) {
		r = r_dup3(fd, mfd, flags & O_CLOEXEC);
		close(fd);
		if (r < 0)
			close(mfd);
		return r;
	}
	/* no /proc: the memfd itself, sealed (writes fail EPERM there) */
	if (fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
		  F_SEAL_WRITE | F_SEAL_SEAL)) {
		close(mfd);
		return -1;
	}
	if (!(flags & O_CLOEXEC))
		fcntl(mfd, F_SETFD, 0);
	return mfd;
}

/*
 * A new chunk opened for writing (O_WRONLY | O_CREAT...) in namespace
 * nsfd (taken) is served when the caller may create there (write and
 * search permission, the kernel's check of the directory, read-only
 * mounts included) and nothing is at the name (no chunk, no writer: the
 * kernel's lookup says ENOENT); else the real open answers (EEXIST of
 * O_EXCL, EPERM of a published chunk, EACCES, EROFS...). Returns the fd
 * or -1. KVFS_PRELOAD_WRITES=lazy skips the lookup, the one round trip
 * of the open: a key already there is then the PUT's EEXIST at close.
 */
static int serve_write(int nsfd, const char *name,
		       const struct kvfs_key *key, int flags, mode_t mode)
{
	struct stat st;

	if (faccessat(nsfd, ".", W_OK | X_OK, AT_EACCESS) ||
	    (!lazy && (!fstatat(nsfd, name, &st, AT_SYMLINK_NOFOLLOW) ||
		       errno != ENOENT))) {
		close(nsfd);
		return -1;
	}
	return pl_wr_open(nsfd, key, name, flags, mode);
}

/* The slot of directory dir (st), looked at first if new. Returns with
 * the read lock held; NULL when dir is not on kvfs or could not be
 * opened. */
static struct ns_slot *ns_get(int dirfd, const char *dir,
			      const struct stat *st)
{
	struct ns_slot *s;

	pthread_rwlock_rdlock(&lock);
	s = ns_find(st->st_dev, st->st_ino);
	if (!s) {
		/* first look: under the write lock, then read again */
		pthread_rwlock_unlock(&lock);
		pthread_rwlock_wrlock(&lock);
		if (!ns_find(st->st_dev, st->st_ino) && dev_is_kvfs(st->st_dev))
			ns_add(dirfd, dir, st);
		pthread_rwlock_unlock(&lock);
		pthread_rwlock_rdlock(&lock);
		s = ns_find(st->st_dev, st->st_ino);
	}
	return s;
}

/* Whether s (read lock held) is a namespace of kind whose fd is still its
 * directory: the fd may have been closed under us (closefrom, a raw
 * close) and its number reused. *stale: it was, and is not any more. */
static bool ns_live(const struct ns_slot *s, enum ns_kind kind, bool *stale)
{
	struct stat fst;

	*stale = false;
	if (!s || s->kind != kind)
		return false;
	*stale = fstat(s->fd, &fst) || fst.st_dev != s->dev ||
		 fst.st_ino != s->ino;
	return !*stale;
}

/* After a GET: the namespace removed or replaced (gone), or its fd not
 * ours any more (stale): look again next time (a stale fd is forgotten,
 * never closed). */
static void ns_forget(const struct stat *st, bool gone, bool stale)
{
	struct ns_slot *s;
	struct stat fst;

	if (!gone && !stale)
		return;
	pthread_rwlock_wrlock(&lock);
	s = ns_find(st->st_dev, st->st_ino);
	if (s && stale && (fstat(s->fd, &fst) ||
			   fst.st_dev != s->dev || fst.st_ino != s->ino))
		s->fd = -1;
	if (s && (gone || s->fd < 0))
		ns_drop(s);
	pthread_rwlock_unlock(&lock);
}

long pl_lazy_get(const struct pl_chunk *c, void *buf, uint64_t cap)
{
	struct stat nsst = { .st_dev = c->ns_dev, .st_ino = c->ns_ino };
	/* a path file: the st_ino and mtime of the open's stat (c->st may
	 * change under c->lock: pl_realize's version) */
	struct stat named = { .st_ino = c->lazy_ino, .st_mtim = c->lazy_mtim };
	struct ns_slot *s;
	uint64_t size = 0;
	bool gone = false, stale = false, other = false;
	long n = -1;

	pthread_rwlock_rdlock(&lock);
	s = ns_find(c->ns_dev, c->ns_ino);
	/* a path namespace's file: only the version the open's stat found
	 * (KVFS_XFER_NAMED | KVFS_XFER_MTIME); where the daemon cannot tell
	 * versions apart, no GET (the kernel's reads then, checked) */
	if (ns_live(s, c->keyns ? NS_KEYS : NS_PATHS, &stale) &&
	    (c->keyns || !__atomic_load_n(&s->no_mtime, __ATOMIC_RELAXED)))
		n = get_into(s->fd, &c->key, buf, cap, &size, &gone,
			     c->keyns ? NULL : &named,
			     c->keyns ? NULL : &s->no_mtime, true, &other);
	pthread_rwlock_unlock(&lock);
	ns_forget(&nsst, gone, stale);
	/* another version is the name's now: never the kernel's reads,
	 * whose open would find that one (or the old bytes under the new
	 * stat while a rewrite is open) */
	return n < 0 && other && !c->keyns ? PL_LAZY_STALE : n;
}

/*
 * A read-only open of a chunk of a key namespace, or a new one for
 * writing, dir (st) being the directory of its name. Returns the fd, or
 * -1 (not served); *other when dir is on kvfs but no key namespace (so a
 * path namespace's may be tried).
 */
static int serve_key(int dirfd, const char *dir, const struct stat *st,
		     const char *name, const struct kvfs_key *key, int flags,
		     mode_t mode, bool writing, int kind, bool *other)
{
	struct ns_slot *s;
	uint64_t size = 0;
	bool gone = false, stale;
	int nsfd, mfd = -1;
	struct stat fst;
	struct src src;

	s = ns_get(dirfd, dir, st);
	if (!ns_live(s, NS_KEYS, &stale)) {
		*other = s && s->kind != NS_KEYS;
		pthread_rwlock_unlock(&lock);
		ns_forget(st, false, stale);
		return -1;
	}
	if (writing) {
		/* the writer's own: kept until its close or settling */
		nsfd = pl_fd_high(s->fd);
		pthread_rwlock_unlock(&lock);
		return nsfd >= 0 ? serve_write(nsfd, name, key, flags, mode) :
				   -1;
	}
	nsfd = s->fd; /* kept open by the read lock */
	/* the chunk's own stat, as open(2) finds it (the kernel keeps a
	 * chunk's attributes FS_CHUNK_TTL: rarely a LOOKUP): what fstat
	 * says, the GET's room (one GET), and a miss without a GET */
	if (fstatat(nsfd, name, &fst, AT_SYMLINK_NOFOLLOW) ||
	    !S_ISREG(fst.st_mode) || fst.st_size <= 0 ||
	    (uint64_t)fst.st_size > max_bytes || !s->path) {
		pthread_rwlock_unlock(&lock);
		return -1;
	}
	src = (struct src){ .st = &fst, .dir = s->path, .below = name,
			    .mnt_id = s->mnt_id, .keyns = true };
	if (kind == SERVE_MEM && lazy_reads) {
		mfd = get_lazy(key, st, &src, flags);
	} else if (kind == SERVE_MEM) {
		mfd = get_mem(nsfd, key, &size, &gone, &src, flags);
	} else {
		mfd = get_memfd(nsfd, key, (uint64_t)fst.st_size, &size,
				&gone, NULL, NULL);
		if (mfd >= 0)
			mfd = track(reopen_rdonly(mfd, flags), &src, flags);
	}
	pthread_rwlock_unlock(&lock);
	ns_forget(st, gone, false);
	return mfd;
}

/*
 * A read-only open of a file of a path namespace (any name; O_DIRECT
 * allowed: the bytes are the same). The file is stat'ed as open(2) would
 * resolve it, its namespace and key named from the path
 * (preload_path.c), and one GET with KVFS_XFER_NAMED copies it only if
 * that key is the file the stat found, as it is now: the daemon checks
 * st_ino, the publication, and that no new version is being written over
 * it. Returns the fd, or -1 (not served).
 */
static int serve_path(int dirfd, const char *path, int flags, int kind)
{
	char nsdir[PATH_MAX], below[PATH_MAX];
	struct kvfs_key key;
	struct stat nst, fst;
	struct ns_slot *s;
	uint64_t size = 0;
	bool gone = false, stale;
	int mfd = -1;
	struct src src;
	dev_t dev;

	/* lexical first: a file outside every kvfs mount costs no stat */
	if (pl_path_split(dirfd, path, real.openat, &dev, nsdir, below) ||
	    fstatat(dirfd, path, &fst,
		    flags & O_NOFOLLOW ? AT_SYMLINK_NOFOLLOW : 0) ||
	    !S_ISREG(fst.st_mode) || fst.st_dev != dev || fst.st_size <= 0 ||
	    (uint64_t)fst.st_size > max_bytes ||
	    kvfs_path_key(below, strlen(below), &key) ||
	    fstatat(AT_FDCWD, nsdir, &nst, 0) || !S_ISDIR(nst.st_mode) ||
	    nst.st_dev != dev)
		return -1;
	s = ns_get(AT_FDCWD, nsdir, &nst);
	if (!ns_live(s, NS_PATHS, &stale)) {
		pthread_rwlock_unlock(&lock);
		ns_forget(&nst, false, stale);
		return -1;
	}
	src = (struct src){ .st = &fst, .dir = nsdir, .below = below,
			    .mnt_id = s->mnt_id, .no_mt = &s->no_mtime };
	/* lazy: the version check needs KVFS_XFER_MTIME, and the open's
	 * permission is the kernel's now (a path file has a mode of its
	 * own: EACCES at the open, as open(2), not at the read) */
	if (kind == SERVE_MEM && lazy_reads &&
	    !__atomic_load_n(&s->no_mtime, __ATOMIC_RELAXED) &&
	    !faccessat(dirfd, path, R_OK, AT_EACCESS)) {
		mfd = get_lazy(&key, &nst, &src, flags);
	} else if (kind == SERVE_MEM) {
		mfd = get_mem(s->fd, &key, &size, &gone, &src, flags);
	} else {
		mfd = get_memfd(s->fd, &key, (uint64_t)fst.st_size, &size,
				&gone, &fst, &s->no_mtime);
		if (mfd >= 0)
			mfd = track(reopen_rdonly(mfd, flags), &src, flags);
	}
	pthread_rwlock_unlock(&lock);
	ns_forget(&nst, gone, false);
	return mfd;
}

/*
 * Serves openat(dirfd, path, flags) from one GET when it is a read-only
 * open of a chunk of a kvfs key namespace or of a file of a path
 * namespace (or a new chunk of a key namespace opened for writing).
 * Returns the fd, or -1: not served (the caller makes the real call),
 * errno untouched.
 */
static int try_serve(int dirfd, const char *path, int flags, mode_t mode,
		     bool stdio)
{
	char dir[PATH_MAX];
	struct kvfs_key key;
	struct stat st;
	bool writing, reading, is_key, other = false;
	const char *name;
	int saved = errno, mfd = -1, kind;

	if (enabled < 0)
		read_env();
	writing = writes && (flags & O_ACCMODE) == O_WRONLY &&
		  (flags & O_CREAT) && !(flags & ~(O_ACCMODE | WRITE_FLAGS));
	reading = (flags & O_ACCMODE) == O_RDONLY &&
		  !(flags & ~(O_ACCMODE | SERVED_FLAGS | O_DIRECT));
	if (!enabled || !path)
		return -1;
	/* a served fd's name (/proc/self/fd/N): that chunk's (never kvfs) */
	if (path[0] == '/' && (path[1] == 'p' || path[1] == 'd')) {
		mfd = pl_fd_reopen(path, flags, SERVED_FLAGS & ~O_NOFOLLOW);
		if (mfd >= 0 || !strncmp(path, "/proc/", 6) ||
		    !strncmp(path, "/dev/fd/", 8)) {
			errno = saved;
			return mfd;
		}
	}
	if ((!writing && !reading) || sandboxed())
		return -1;
	/* stdio: a FILE needs a real fd (fileno, fstat): a memfd */
	kind = stdio ? SERVE_MEMFD : enabled;
	name = split_name(path, dir, &key, &is_key);
	if (!name || (writing && !is_key))
		return -1;
	pthread_once(&resolve_once, resolve);
	/* a key namespace's chunks are opened by their key, and never
	 * O_DIRECT here (the plain path takes that); the rest may be a path
	 * namespace's file: its own stat, not its directory's, says */
	if (is_key && !(flags & O_DIRECT)) {
		if (fstatat(dirfd, dir, &st, 0) || !S_ISDIR(st.st_mode))
			goto out;
		mfd = serve_key(dirfd, dir, &st, name, &key, flags, mode,
				writing, kind, &other);
	} else {
		other = reading;
	}
	if (mfd < 0 && other && reading)
		mfd = serve_path(dirfd, path, flags, kind);
out:
	errno = saved;
	return mfd;
}

/* --------------------------------------------------------- interposers */

static mode_t va_mode(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ?
	       (mode_t)va_arg(ap, int) : 0;
}

#define OPEN_BODY(call)                                                  \
	do {                                                             \
		va_list ap;                                              \
		mode_t mode;                                             \
		int fd;                                                  \
		va_start(ap, flags);                                     \
		mode = va_mode(flags, ap);                               \
		va_end(ap);                                              \
		fd = try_serve(DIRFD, path, flags, mode, false);         \
		if (fd >= 0)                                             \
			return fd;                                       \
		pthread_once(&resolve_once, resolve);                    \
		return call;                                             \
	} while (0)

#define DIRFD AT_FDCWD
EXPORT int open(const char *path, int flags, ...)
{
	OPEN_BODY(real.open(path, flags, mode));
}

EXPORT int open64(const char *path, int flags, ...)
{
	OPEN_BODY(real.open64(path, flags, mode));
}
#undef DIRFD
#define DIRFD dirfd
EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	OPEN_BODY(real.openat(dirfd, path, flags, mode));
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	OPEN_BODY(real.openat64(dirfd, path, flags, mode));
}
#undef DIRFD

/* glibc's _FORTIFY_SOURCE forms (no mode: O_CREAT is refused there) */
EXPORT int __open_2(const char *path, int flags);
EXPORT int __open64_2(const char *path, int flags);
EXPORT int __openat_2(int dirfd, const char *path, int flags);
EXPORT int __openat64_2(int dirfd, const char *path, int flags);

EXPORT int __open_2(const char *path, int flags)
{
	int fd = try_serve(AT_FDCWD, path, flags, 0, false);

	pthread_once(&resolve_once, resolve);
	return fd >= 0 ? fd : real.open_2(path, flags);
}

EXPORT int __open64_2(const char *path, int flags)
{
	int fd = try_serve(AT_FDCWD, path, flags, 0, false);

	pthread_once(&resolve_once, resolve);
	return fd >= 0 ? fd : real.open64_2(path, flags);
}

EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	int fd = try_serve(dirfd, path, flags, 0, false);

	pthread_once(&resolve_once, resolve);
	return fd >= 0 ? fd : real.openat_2(dirfd, path, flags);
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	int fd = try_serve(dirfd, path, flags, 0, false);

	pthread_once(&resolve_once, resolve);
	return fd >= 0 ? fd : real.openat64_2(dirfd, path, flags);
}

/* fopen's own open is inside libc, out of reach: "r", "rb", "re"... are
 * served here and handed to fdopen. */
static FILE *fopen_served(const char *path, const char *mode)
{
	FILE *f;
	int fd, err;

	if (!path || !mode || mode[0] != 'r' ||
	    strspn(mode + 1, "bemc") != strlen(mode + 1))
		return NULL;
	fd = try_serve(AT_FDCWD, path, O_RDONLY |
		       (strchr(mode, 'e') ? O_CLOEXEC : 0), 0, true);
	if (fd < 0)
		return NULL;
	f = fdopen(fd, mode);
	if (!f) {
		err = errno;
		close(fd);
		errno = err;
	}
	return f;
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
	FILE *f = fopen_served(path, mode);

	pthread_once(&resolve_once, resolve);
	return f ? f : real.fopen(path, mode);
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
	FILE *f = fopen_served(path, mode);

	pthread_once(&resolve_once, resolve);
	return f ? f : real.fopen64(path, mode);
}
