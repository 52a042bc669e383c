/*
 * kvfs_ptprobe.c - what FUSE passthrough would give kvfs's plain reads and
 * writes on this kernel: the ceiling of issue 26's plain rows for a design
 * that keeps each L1 chunk in a file of its own (docs/time.md, "FUSE
 * passthrough"). Not kvfs: a FUSE server of a few hundred lines, speaking
 * the kernel's protocol by hand (libfuse 3.14 has no passthrough; the
 * kernel has it since 6.9), serving files that live on tmpfs, mounted
 * twice:
 *
 *   passthrough  OPEN and CREATE answer FOPEN_PASSTHROUGH with the
 *                tmpfs file registered as the backing file
 *                (FUSE_DEV_IOC_BACKING_OPEN): the kernel reads and writes
 *                it without the server. A read file is registered at its
 *                first open and stays so (as kvfs would keep one id per
 *                chunk in L1), a created one until its RELEASE
 *   copy         the classic path at its cheapest: READ replied from an
 *                mmap of the file (the kernel's one copy into the reader),
 *                WRITE a pwrite into it
 *
 * against the same files read and written on tmpfs itself: open, a whole
 * read (or write) of the file, close, per file; alternating rounds
 * (median, range). Both mounts answer every LOOKUP for an hour
 * (immutable, as kvfs's key chunks) and set FOPEN_NOFLUSH, so a read is
 * OPEN, READs (copy only) and an asynchronous RELEASE; a write LOOKUP
 * (the name is free), CREATE, WRITEs (copy only), RELEASE. Two server
 * threads per mount read /dev/fuse (no io_uring rings: the round trips
 * cost more than kvfs's on rings).
 *
 *   kvfs_ptprobe [--rounds N] [--files N]
 *
 * Needs root (mount(2), and CAP_SYS_ADMIN for the backing files) and a
 * kernel with FUSE passthrough; skips (77) saying why otherwise. Files on
 * /dev/shm, the mounts under $TMPDIR.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- the kernel's ABI (include/uapi/linux/fuse.h, 7.40 and later);
 * Debian 12's headers predate passthrough ---- */
struct pp_in {
	uint32_t len, opcode;
	uint64_t unique, nodeid;
	uint32_t uid, gid, pid;
	uint16_t extlen, pad;
};
struct pp_out {
	uint32_t len;
	int32_t error;
	uint64_t unique;
};
struct pp_attr {
	uint64_t ino, size, blocks, atime, mtime, ctime;
	uint32_t atimensec, mtimensec, ctimensec, mode, nlink, uid, gid, rdev,
		blksize, flags;
};
struct pp_entry {
	uint64_t nodeid, generation, entry_valid, attr_valid;
	uint32_t entry_nsec, attr_nsec;
	struct pp_attr attr;
};
struct pp_attr_out {
	uint64_t attr_valid;
	uint32_t attr_nsec, dummy;
	struct pp_attr attr;
};
struct pp_open_out {
	uint64_t fh;
	uint32_t open_flags;
	int32_t backing_id;
};
struct pp_init_in {
	uint32_t major, minor, max_readahead, flags, flags2, unused[11];
};
struct pp_init_out {
	uint32_t major, minor, max_readahead, flags;
	uint16_t max_background, congestion_threshold;
	uint32_t max_write, time_gran;
	uint16_t max_pages, map_alignment;
	uint32_t flags2, max_stack_depth;
	uint16_t request_timeout, unused[11];
};
struct pp_rw_in { /* fuse_read_in and fuse_write_in */
	uint64_t fh, offset;
	uint32_t size, rw_flags;
	uint64_t lock_owner;
	uint32_t flags, padding;
};
struct pp_create_in {
	uint32_t flags, mode, umask, open_flags;
};
struct pp_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define PP_BACKING_OPEN _IOW(229, 1, struct pp_backing_map)
#define PP_BACKING_CLOSE _IOW(229, 2, uint32_t)
enum {
	OP_LOOKUP = 1, OP_FORGET = 2, OP_GETATTR = 3, OP_SETATTR = 4,
	OP_UNLINK = 10, OP_OPEN = 14, OP_READ = 15, OP_WRITE = 16,
	OP_RELEASE = 18, OP_FLUSH = 25, OP_INIT = 26, OP_OPENDIR = 27,
	OP_RELEASEDIR = 29, OP_CREATE = 35, OP_DESTROY = 38,
	OP_BATCH_FORGET = 42,
};
#define INIT_ASYNC_READ (1u << 0)
#define INIT_ATOMIC_O_TRUNC (1u << 3)
#define INIT_BIG_WRITES (1u << 5)
#define INIT_MAX_PAGES (1u << 22)
#define INIT_EXT (1u << 30)
#define INIT2_PASSTHROUGH (1u << (37 - 32))
#define FOPEN_DIRECT (1u << 0)
#define FOPEN_NOFLUSH (1u << 5)
#define FOPEN_PT (1u << 7)

#define MAX_FILES 4096
#define WR_BASE 100000u /* node ids of written files: WR_BASE + index */

struct srv {
	bool pt;
	int fd;
	const char *dir; /* the tmpfs directory of the read files */
	char wdir[352];  /* and of the written ones */
	char mnt[320];
	int nread;
	size_t size;
	char *map[MAX_FILES]; /* copy: the read files, mapped */
	int wfd[MAX_FILES];   /* the written files' tmpfs fds, -1: none */
	int bid[MAX_FILES];   /* passthrough: a read file's backing id, 0:
			       * not registered yet */
	pthread_mutex_t lock;
	pthread_t th[2];
	int nthreads;   /* started */
	bool mounted;
	unsigned conn;  /* /sys/fs/fuse/connections/<conn>, 0: not known */
	bool no_pt;     /* the kernel did not offer passthrough */
};

static void reply(struct srv *s, uint64_t unique, int err, const void *p,
		  size_t n)
{
	struct pp_out h = { (uint32_t)(sizeof(h) + (err ? 0 : n)), err,
			    unique };
	struct iovec v[2] = { { &h, sizeof(h) },
			      { (void *)p, err ? 0 : n } };

	if (writev(s->fd, v, 2) < 0 && errno != ENOENT)
		perror("kvfs_ptprobe: reply");
}

static void fill_attr(struct srv *s, uint64_t ino, struct pp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->blksize = 4096;
	a->nlink = 1;
	if (ino == 1) {
		a->mode = S_IFDIR | 0755;
		a->nlink = 2;
	} else if (ino >= WR_BASE) {
		struct stat st;
		int fd = s->wfd[ino - WR_BASE];

		a->mode = S_IFREG | 0644;
		if (fd >= 0 && fstat(fd, &st) == 0)
			a->size = (uint64_t)st.st_size;
	} else {
		a->mode = S_IFREG | 0644;
		a->size = s->size;
	}
	a->blocks = a->size / 512;
}

/* "r<N>" (a read file) or "w<N>" (a written one): its index, else -1 */
static int name_index(const char *name, char kind)
{
	char *end;
	long i;

	if (name[0] != kind || !name[1])
		return -1;
	i = strtol(name + 1, &end, 10);
	return *end || i < 0 || i >= MAX_FILES ? -1 : (int)i;
}

/* An open's answer: passthrough names backing id (registered by the
 * caller; fh's high half: the id to unregister at RELEASE, 0: none). */
static void open_reply(struct srv *s, int id, uint64_t fh,
		       struct pp_open_out *o)
{
	memset(o, 0, sizeof(*o));
	o->fh = fh;
	o->open_flags = FOPEN_NOFLUSH;
	if (!s->pt) {
		o->open_flags |= FOPEN_DIRECT;
		return;
	}
	o->open_flags |= FOPEN_PT;
	o->backing_id = id;
}

/* fd registered as a backing file: its id, or -errno */
static int backing_open(struct srv *s, int fd)
{
	struct pp_backing_map m = { .fd = fd };
	int id = ioctl(s->fd, PP_BACKING_OPEN, &m);

	return id < 0 ? -errno : id;
}

static void init_op(struct srv *s, struct pp_in *h, const void *arg)
{
	const struct pp_init_in *in = arg;
	struct pp_init_out o = { 0 };

	o.major = 7;
	o.minor = in->minor < 40 ? in->minor : 40;
	o.max_readahead = 1u << 20;
	o.flags = INIT_ASYNC_READ | INIT_ATOMIC_O_TRUNC | INIT_BIG_WRITES |
		  INIT_MAX_PAGES | INIT_EXT;
	o.max_write = 1u << 20;
	o.max_pages = 256;
	o.time_gran = 1;
	o.max_background = 64;
	o.congestion_threshold = 48;
	if (s->pt) {
		if (!(in->flags & INIT_EXT) ||
		    !(in->flags2 & INIT2_PASSTHROUGH) || in->minor < 40)
			s->no_pt = true;
		else
			o.flags2 = INIT2_PASSTHROUGH;
		o.max_stack_depth = 1;
	}
	reply(s, h->unique, 0, &o, sizeof(o));
}

static void handle(struct srv *s, struct pp_in *h, char *arg)
{
	char path[512];

	switch (h->opcode) {
	case OP_INIT:
		init_op(s, h, arg);
		break;
	case OP_LOOKUP: {
		struct pp_entry e = { 0 };
		int i = name_index(arg, 'r'), w = name_index(arg, 'w');

		if (i >= 0 && i < s->nread)
			e.nodeid = 2 + (uint64_t)i;
		else if (w >= 0 && s->wfd[w] >= 0)
			e.nodeid = WR_BASE + (uint64_t)w;
		else {
			reply(s, h->unique, -ENOENT, NULL, 0);
			break;
		}
		e.entry_valid = e.attr_valid = 3600;
		fill_attr(s, e.nodeid, &e.attr);
		reply(s, h->unique, 0, &e, sizeof(e));
		break;
	}
	case OP_GETATTR:
	case OP_SETATTR: {
		struct pp_attr_out a = { .attr_valid = 3600 };

		fill_attr(s, h->nodeid, &a.attr);
		reply(s, h->unique, 0, &a, sizeof(a));
		break;
	}
	case OP_OPEN: {
		/* a read file's backing id is registered at its first open
		 * and kept, as kvfs would keep one per chunk in L1 */
		struct pp_open_out o = { 0 };
		uint64_t i = h->nodeid - 2;
		int id = 0;

		if (h->nodeid < 2 || i >= (uint64_t)s->nread) {
			/* a written file reopened: never, the rounds write
			 * names unlinked before (pass) */
			reply(s, h->unique, -EACCES, NULL, 0);
			break;
		}
		pthread_mutex_lock(&s->lock);
		if (s->pt && !s->bid[i]) {
			int fd;

			snprintf(path, sizeof(path), "%s/r%u", s->dir,
				 (unsigned)i);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			s->bid[i] = fd < 0 ? -errno : backing_open(s, fd);
			if (fd >= 0)
				close(fd); /* the backing id holds it */
		}
		id = s->pt ? s->bid[i] : 0;
		if (id < 0)
			s->bid[i] = 0;
		pthread_mutex_unlock(&s->lock);
		open_reply(s, id, h->nodeid, &o);
		reply(s, h->unique, id < 0 ? id : 0, &o, sizeof(o));
		break;
	}
	case OP_CREATE: {
		const struct pp_create_in *c = (const void *)arg;
		struct {
			struct pp_entry e;
			struct pp_open_out o;
		} r;
		int w = name_index(arg + sizeof(*c), 'w'), fd, err;

		memset(&r, 0, sizeof(r));
		if (w < 0) {
			reply(s, h->unique, -EPERM, NULL, 0);
			break;
		}
		snprintf(path, sizeof(path), "%s/w%d", s->wdir, w);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			reply(s, h->unique, -errno, NULL, 0);
			break;
		}
		pthread_mutex_lock(&s->lock);
		if (s->wfd[w] >= 0)
			close(s->wfd[w]);
		s->wfd[w] = fd;
		pthread_mutex_unlock(&s->lock);
		r.e.nodeid = WR_BASE + (uint64_t)w;
		r.e.entry_valid = r.e.attr_valid = 3600;
		fill_attr(s, r.e.nodeid, &r.e.attr);
		/* a new file's id: unregistered at its RELEASE */
		err = s->pt ? backing_open(s, fd) : 0;
		open_reply(s, err, r.e.nodeid | (uint64_t)(err > 0 ? err : 0)
				   << 32, &r.o);
		reply(s, h->unique, err < 0 ? err : 0, &r, sizeof(r));
		break;
	}
	case OP_READ: {
		const struct pp_rw_in *r = (const void *)arg;
		uint64_t i = (r->fh & 0xffffffffu) - 2;
		size_t len = r->size;

		if (i >= (uint64_t)s->nread || !s->map[i]) {
			reply(s, h->unique, -EIO, NULL, 0); /* passthrough's */
			break;
		}
		if (r->offset >= s->size)
			len = 0;
		else if (r->offset + len > s->size)
			len = s->size - r->offset;
		reply(s, h->unique, 0, s->map[i] + r->offset, len);
		break;
	}
	case OP_WRITE: {
		const struct pp_rw_in *r = (const void *)arg;
		uint64_t w = (r->fh & 0xffffffffu) - WR_BASE;
		struct { uint32_t size, padding; } o = { 0, 0 };
		ssize_t n = -1;

		errno = EIO;
		if (w < MAX_FILES && s->wfd[w] >= 0)
			n = pwrite(s->wfd[w], arg + sizeof(*r), r->size,
				   (off_t)r->offset);

		o.size = n < 0 ? 0 : (uint32_t)n;
		reply(s, h->unique, n < 0 ? -errno : 0, &o, sizeof(o));
		break;
	}
	case OP_RELEASE: {
		const struct pp_rw_in *r = (const void *)arg; /* fh first */
		uint32_t id = (uint32_t)(r->fh >> 32);

		if (id)
			(void)ioctl(s->fd, PP_BACKING_CLOSE, &id);
		reply(s, h->unique, 0, NULL, 0);
		break;
	}
	case OP_UNLINK: {
		int w = name_index(arg, 'w');

		if (w >= 0) {
			snprintf(path, sizeof(path), "%s/w%d", s->wdir, w);
			unlink(path);
			pthread_mutex_lock(&s->lock);
			if (s->wfd[w] >= 0)
				close(s->wfd[w]);
			s->wfd[w] = -1;
			pthread_mutex_unlock(&s->lock);
		}
		reply(s, h->unique, w >= 0 ? 0 : -EPERM, NULL, 0);
		break;
	}
	case OP_OPENDIR: {
		struct pp_open_out o = { 0 };

		reply(s, h->unique, 0, &o, sizeof(o));
		break;
	}
	case OP_FORGET:
	case OP_BATCH_FORGET:
		break;
	case OP_FLUSH:
	case OP_RELEASEDIR:
	case OP_DESTROY:
		reply(s, h->unique, 0, NULL, 0);
		break;
	default:
		reply(s, h->unique, -ENOSYS, NULL, 0);
	}
}

static void *serve(void *arg)
{
	struct srv *s = arg;
	size_t cap = (1u << 20) + 8192;
	char *buf = malloc(cap);

	for (;;) {
		ssize_t n = buf ? read(s->fd, buf, cap) : -1;

		if (n < 0 && (errno == EINTR || errno == ENOENT ||
			      errno == EAGAIN))
			continue;
		if (n < (ssize_t)sizeof(struct pp_in))
			break; /* ENODEV: aborted or unmounted */
		handle(s, (struct pp_in *)buf, buf + sizeof(struct pp_in));
	}
	free(buf);
	return NULL;
}

/* s (zeroed, its lock made, fd and wfd[] -1: probe) set up and mounted
 * at top/pt or top/copy, its threads started; whatever was done is
 * undone by srv_stop. */
static int srv_start(struct srv *s, bool pt, const char *dir, int nread,
		     size_t size, const char *top)
{
	char opts[256], path[512];
	struct stat st;

	s->pt = pt;
	s->dir = dir;
	s->nread = nread;
	s->size = size;
	snprintf(s->wdir, sizeof(s->wdir), "%s/%s-w", dir, pt ? "pt" : "cp");
	if (mkdir(s->wdir, 0755))
		return -errno;
	for (int i = 0; i < nread && !pt; i++) {
		int fd;
		void *m;

		snprintf(path, sizeof(path), "%s/r%d", dir, i);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		if (m == MAP_FAILED)
			return -errno;
		s->map[i] = m;
	}
	snprintf(s->mnt, sizeof(s->mnt), "%s/%s", top, pt ? "pt" : "copy");
	if (mkdir(s->mnt, 0755))
		return -errno;
	s->fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (s->fd < 0)
		return -errno;
	snprintf(opts, sizeof(opts),
		 "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other,"
		 "default_permissions", s->fd);
	if (mount("kvfs-ptprobe", s->mnt, "fuse.kvfs-ptprobe",
		  MS_NOSUID | MS_NODEV, opts))
		return -errno;
	s->mounted = true;
	for (int t = 0; t < 2; t++) {
		if (pthread_create(&s->th[t], NULL, serve, s))
			return -EAGAIN;
		s->nthreads++;
	}
	/* the connection's number (its abort file): st_dev of the mount's
	 * root (INIT, then GETATTR, answered by the threads) */
	if (lstat(s->mnt, &st))
		return -errno;
	s->conn = minor(st.st_dev);
	return 0;
}

/* The connection aborted (its threads' reads end with ENODEV), then
 * unmounted, the threads joined, everything else let go. */
static void srv_stop(struct srv *s)
{
	char path[96];
	int fd;

	if (s->mounted && s->conn) {
		snprintf(path, sizeof(path),
			 "/sys/fs/fuse/connections/%u/abort", s->conn);
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (write(fd, "1", 1) < 0)
				perror("kvfs_ptprobe: abort");
			close(fd);
		}
	}
	if (s->mounted && umount2(s->mnt, MNT_DETACH))
		perror("kvfs_ptprobe: umount");
	for (int t = 0; t < s->nthreads; t++)
		pthread_join(s->th[t], NULL);
	if (s->fd >= 0)
		close(s->fd);
	for (int i = 0; i < MAX_FILES; i++) {
		if (s->map[i])
			munmap(s->map[i], s->size);
		if (s->wfd[i] >= 0)
			close(s->wfd[i]);
	}
	if (s->mnt[0])
		rmdir(s->mnt);
	pthread_mutex_destroy(&s->lock);
}

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* us per file: open, whole read or write, close, of n files in dir:
 * reads of r<i>, writes of w<i> (in one half of the names or the other,
 * round by round: the other half is unlinked for the next round); -1
 * after an error (said). */
static double pass(const char *dir, int n, char *buf, size_t size,
		   bool wr, int round)
{
	char path[1024];
	double t0 = now_us();

	for (int i = 0; i < n; i++) {
		int fd;
		size_t done = 0;

		if (wr) {
			snprintf(path, sizeof(path), "%s/w%d", dir,
				 round % 2 * n + i);
			fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		} else {
			snprintf(path, sizeof(path), "%s/r%d", dir, i);
			fd = open(path, O_RDONLY);
		}
		if (fd < 0) {
			fprintf(stderr, "kvfs_ptprobe: %s: %s\n", path,
				strerror(errno));
			return -1;
		}
		while (done < size) {
			ssize_t r = wr ? write(fd, buf + done, size - done) :
					 read(fd, buf + done, size - done);

			if (r <= 0) {
				fprintf(stderr, "kvfs_ptprobe: %s: %s\n",
					path, r ? strerror(errno) : "short");
				close(fd);
				return -1;
			}
			done += (size_t)r;
		}
		close(fd);
	}
	double us = (now_us() - t0) / n;

	/* the next round of this kind writes the other half's names */
	for (int i = 0; wr && i < n; i++) {
		snprintf(path, sizeof(path), "%s/w%d", dir,
			 (round + 1) % 2 * n + i);
		unlink(path);
	}
	return us;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* the median of v[0..n), sorted */
static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Prints one size's table: tmpfs, passthrough and copy alternating (the
 * order rotating), reads then writes, in rounds. */
static int rounds_run(struct srv *pt, struct srv *cp, const char *shm,
		      const char *tw, char *buf, size_t size, int n,
		      int rounds)
{
	static double t[2][3][64];
	const char *name[3] = { "tmpfs", "passthrough", "copy" };

	for (int r = 0; r < rounds; r++)
		for (int wr = 0; wr < 2; wr++)
			for (int k = 0; k < 3; k++) {
				int m = (k + r) % 3;
				const char *dir = m == 0 ? (wr ? tw : shm) :
						  m == 1 ? pt->mnt : cp->mnt;

				t[wr][m][r] = pass(dir, n, buf, size, wr, r);
				if (t[wr][m][r] < 0)
					return 1;
			}
	printf("\n%zu KiB files, %d per round, %d rounds (us per file: "
	       "open, whole read or write, close)\n", size >> 10, n, rounds);
	printf("| path | op | us/file median (range) | files/s | vs tmpfs |\n"
	       "|---|---|---|---|---|\n");
	for (int wr = 0; wr < 2; wr++) {
		double med[3];

		for (int m = 0; m < 3; m++)
			med[m] = median(t[wr][m], rounds);
		for (int m = 0; m < 3; m++)
			printf("| %s | %s | %.1f (%.1f-%.1f) | %.0f | "
			       "%.2fx |\n", name[m], wr ? "write" : "read",
			       med[m], t[wr][m][0], t[wr][m][rounds - 1],
			       1e6 / med[m], med[0] / med[m]);
	}
	return 0;
}

/* One size, in a directory of its own under tmp holding a private tmpfs
 * (the files; bench/run.sh unmounts what a killed run leaves) and the
 * two mounts; 0, 1 (a failure, said), or 77 (skipped, said). */
static int probe(const char *tmp, size_t size, int n, int rounds)
{
	char top[256], shm[288], tw[320], path[400];
	char *buf = aligned_alloc(4096, size);
	struct srv *pt = calloc(1, sizeof(*pt)), *cp = calloc(1, sizeof(*cp));
	bool shm_mounted = false;
	int rc = 1, fd;

	snprintf(top, sizeof(top), "%s/kvfs-ptprobe.XXXXXX", tmp);
	if (!buf || !pt || !cp || !mkdtemp(top)) {
		perror("kvfs_ptprobe: setup");
		free(buf);
		free(pt);
		free(cp);
		return 1;
	}
	pt->fd = cp->fd = -1;
	pthread_mutex_init(&pt->lock, NULL);
	pthread_mutex_init(&cp->lock, NULL);
	for (int i = 0; i < MAX_FILES; i++)
		pt->wfd[i] = cp->wfd[i] = -1;
	snprintf(shm, sizeof(shm), "%s/tmpfs", top);
	snprintf(tw, sizeof(tw), "%s/tmpfs-w", shm);
	if (mkdir(shm, 0755) ||
	    mount("kvfs-ptprobe", shm, "tmpfs", MS_NOSUID | MS_NODEV,
		  "mode=0755")) {
		printf("kvfs_ptprobe: a tmpfs at %s: %s: skipped\n", shm,
		       strerror(errno));
		rc = 77;
		goto out;
	}
	shm_mounted = true;
	if (mkdir(tw, 0755))
		goto out;
	for (size_t k = 0; k < size; k++)
		buf[k] = (char)(k * 2654435761u >> 13);
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/r%d", shm, i);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		buf[0] = (char)i;
		if (fd < 0 || write(fd, buf, size) != (ssize_t)size) {
			perror(path);
			if (fd >= 0)
				close(fd);
			goto out;
		}
		close(fd);
	}
	if ((rc = srv_start(pt, true, shm, n, size, top)) ||
	    (rc = srv_start(cp, false, shm, n, size, top))) {
		printf("kvfs_ptprobe: mount: %s: skipped\n", strerror(-rc));
		rc = 77;
		goto out;
	}
	/* the first open: passthrough refused (no kernel support, or no
	 * CAP_SYS_ADMIN for backing files) is EIO or EPERM here */
	snprintf(path, sizeof(path), "%s/r0", pt->mnt);
	fd = open(path, O_RDONLY);
	if (fd < 0 || pt->no_pt) {
		printf("kvfs_ptprobe: FUSE passthrough refused (%s): "
		       "skipped\n", pt->no_pt ? "the kernel does not offer "
		       "it" : strerror(errno));
		if (fd >= 0)
			close(fd);
		rc = 77;
		goto out;
	}
	close(fd);
	rc = rounds_run(pt, cp, shm, tw, buf, size, n, rounds);
out:
	srv_stop(pt);
	srv_stop(cp);
	if (shm_mounted && umount2(shm, MNT_DETACH))
		perror("kvfs_ptprobe: umount tmpfs");
	rmdir(shm);
	rmdir(top);
	free(buf);
	free(pt);
	free(cp);
	return rc;
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	int rounds = 5, files = 256, rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--files") && i + 1 < argc)
			files = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: kvfs_ptprobe [--rounds N] "
				"[--files N]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > 64 || files < 1 || files > MAX_FILES / 2) {
		fprintf(stderr, "kvfs_ptprobe: --rounds 1..64, --files "
			"1..%d\n", MAX_FILES / 2);
		return 2;
	}
	if (geteuid() != 0) {
		printf("kvfs_ptprobe: needs root (mount(2), backing files): "
		       "skipped\n");
		return 77;
	}
	printf("# FUSE passthrough probe (not kvfs: the ceiling of a design "
	       "with each L1 chunk in a file)\n");
	rc = probe(tmp ? tmp : "/tmp", 256u << 10, files, rounds);
	if (rc == 0)
		rc = probe(tmp ? tmp : "/tmp", 2u << 20,
			   files / 4 ? files / 4 : 1, rounds);
	return rc;
}
