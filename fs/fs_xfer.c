/*
 * fs_xfer.c - batched GET and PUT (include/kvfs.h section 3b): many chunks
 * per ioctl, copied by the daemon straight between the L1 arena and the
 * memory of the process that called the ioctl.
 *
 * ------------------------------------------------------------ mechanism
 * process_vm_writev (GET) and process_vm_readv (PUT) on the pid of the FUSE
 * request. Why this and not shared buffers the client registers: the
 * engine's own buffers (a KV pool it page-locked for its GPU, numpy
 * arrays, a Python bytearray) are the destination, so the one copy the
 * kernel makes (pages of the caller pinned, memcpy from/to the arena) is
 * the only copy: nothing is staged through FUSE, nothing is mapped into the
 * daemon, and the arena is never exposed to the engine. A registered
 * shared-memory ring would cost the engine a second copy out of the ring
 * into its own buffers unless it allocated its KV pool from our memory.
 * A PUT entry of TIER_STREAM_MIN bytes or more bound for a host arena
 * (where TIER_STREAM) copies twice, on purpose: the caller's bytes into a
 * 256 KiB buffer of the daemon's thread that stays in the cache
 * (checksummed there), then into the arena with streaming stores
 * (tier_stream_copy), which do not read the arena's cold lines first:
 * 25-30% less daemon CPU than the kernel's one copy into the arena
 * (put_copy, thread_bounce).
 *
 * ------------------------------------------------------------- security
 * 1. Whose memory. The daemon only ever names the pid the kernel put in
 *    this FUSE request (fuse_req_ctx()->pid): the thread that is blocked in
 *    this ioctl, in the pid namespace of the mount. It copies only to and
 *    from addresses that thread's process gave, so a caller can only read
 *    or overwrite its own memory. The kernel checks the daemon may ptrace
 *    the caller (CAP_SYS_PTRACE, or the same uid, no capability the
 *    daemon lacks, a dumpable caller, and Yama's rule): a daemon without
 *    CAP_SYS_PTRACE cannot reach a process of another user even if asked
 *    to (tests/integ/test_xfer_callers.c, test_eperm).
 * 2. Who may. The namespace's mode is checked for the caller's uid and
 *    groups (fs_ns_access) before any entry: R_OK | X_OK for GET, W_OK |
 *    X_OK for PUT (search, as open(2) and creat(2) of a chunk need it).
 * 3. Pid reuse. A pid is reused only after its task was reaped. While this
 *    handler runs, the caller cannot be reaped: the kernel's
 *    request_wait_answer() (fs/fuse/dev.c) lets a signal end the wait only
 *    while the request is still queued (FR_PENDING); once the daemon has
 *    read it (FR_SENT: we are running) a signal, fatal or not, only queues
 *    a FUSE_INTERRUPT, and the thread then sleeps uninterruptibly
 *    (wait_event) until we reply. A SIGKILLed caller therefore stays a
 *    zombie-in-waiting, mm included, until the reply, and its pid names it
 *    throughout. We notice the interrupt (fuse_req_interrupted) between
 *    entries and stop early, so a dying caller is not kept waiting for
 *    a whole batch. The one way a request ends before its reply is an
 *    abort of the whole FUSE connection (umount -f, or
 *    /sys/fs/fuse/connections/N/abort: root only); for that case each batch
 *    also holds a pidfd of the calling thread, opened when the batch
 *    starts (while the caller is provably blocked), and checks it before
 *    every entry after the first: a thread that exited makes the rest of
 *    the batch stop with ESRCH, and reusing its pid in the microseconds
 *    between that check and the copy would need the pid counter to wrap
 *    through pid_max. A batch of one entry (the preload library's GET and
 *    PUT) opens none: its one copy follows the request's arrival as
 *    closely as it would follow the pidfd's opening.
 * 4. Bad addresses. process_vm_* fault in the caller's pages as the caller
 *    would (no FOLL_FORCE): unmapped or read-only memory gives EFAULT for
 *    that entry, never a write the caller itself could not make.
 * 5. Chunks. GET pins each chunk (tier_get) for its copy, so eviction or
 *    unlink cannot reuse the extent under the copy; PUT copies into a
 *    writer extent nobody else sees and publishes only after the whole copy
 *    succeeded, with its checksum.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fs/fs_wait.h"
#include "fs/fs_xfer.h"
#include "hash/hashkey.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* linux/pidfd.h, 6.9 */
#endif

/* Bytes copied per process_vm call when a checksum or a bounce buffer is
 * computed along: small enough to still be in the cache for the checksum,
 * large enough that the syscalls do not show. */
#define XFER_PIECE (256u << 10)

/* Batches running at once, at most: half the FUSE workers (fs_workers()).
 * A batch's copy may fault in caller pages that are themselves backed by
 * this mount (an mmap of a chunk), and those faults need a free worker to
 * serve their reads: if every worker sat in a batch, the mount would hang
 * for good. Past the cap a batch fails whole with EAGAIN, nothing done;
 * libkvfs retries it. The cap is fs_xfer.max_inflight, read once at
 * fs_xfer_create. */

struct fs_xfer {
	struct fs *fs;
	/* counters, atomics (no lock) */
	uint64_t gets, puts;             /* batches */
	uint64_t small;                  /* of them, in the _SMALL form */
	uint64_t get_entries, put_entries;
	uint64_t get_bytes, put_bytes;
	uint64_t entry_errors;           /* entries with a result < 0,
					  * -EEXIST of PUT and misses excluded */
	uint64_t misses;                 /* GET entries that were -ENOENT */
	uint64_t exists;                 /* PUT entries that were -EEXIST */
	uint64_t interrupted;            /* batches cut short by a signal */
	uint64_t busy;                   /* batches refused (EAGAIN): the
					  * max_inflight cap */
	int inflight;                    /* batches running now */
	int max_inflight;                /* fs_workers() / 2 (above) */
	uint64_t batch_errors;           /* batches failed whole */
	uint64_t bounced;                /* entries copied through a bounce
					  * buffer (device-memory L1) */
	uint64_t registers;              /* device buffers registered */
	uint64_t device_entries;         /* GET entries copied to a device */
	struct pool *pool_p;             /* copy helpers (below) */

	/* device buffers (KVFS_IOC_XFER_REGISTER), one per open file:
	 * batches read them under the read lock for their whole run */
	pthread_rwlock_t reg_lock;
	struct reg *regs;                /* (reg_lock) */
	uint64_t reg_ids;                /* (reg_lock) last id given */
	int nregs;                       /* (reg_lock to write, atomic to
					  * read) entries in regs */
};

struct reg {
	struct reg *next;
	uint64_t owner;                  /* fuse_file_info.fh */
	uint64_t id, len;
	struct gpu_import *im;
};

static void count(uint64_t *c, uint64_t n)
{
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ the caller */

struct caller {
	pid_t pid;
	int pidfd; /* the calling thread, or -1 where pidfd_open is missing */
};

/* The caller of req; its pidfd only for a batch of more than one entry
 * (nents): the first entry runs unchecked (job_run), so a one-entry
 * batch (every open the preload library serves) would open, poll and
 * close a pidfd for nothing, ~8-10 us of the caller's wait here. */
static int caller_open(struct caller *c, fuse_req_t req, uint32_t nents)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	c->pidfd = -1;
	c->pid = ctx ? ctx->pid : 0;
	/* 0: the caller lives in a pid namespace the mount cannot see. */
	if (c->pid <= 0)
		return -ESRCH;
	if (nents <= 1)
		return 0;
	c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, PIDFD_THREAD);
	if (c->pidfd < 0 && errno == EINVAL) /* before 6.9: a tgid only */
		c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
	if (c->pidfd < 0 && errno == ESRCH)
		return -ESRCH;
	/* ENOSYS, EINVAL for a non-leader thread on old kernels, EMFILE:
	 * go on with the FUSE guarantee alone (see the comment at the top). */
	return 0;
}

static void caller_close(struct caller *c)
{
	if (c->pidfd >= 0)
		close(c->pidfd);
	c->pidfd = -1;
}

/* Whether the caller's thread still exists (a pidfd polls readable once
 * it exited). */
static bool caller_alive(const struct caller *c)
{
	struct pollfd p = { .fd = c->pidfd, .events = POLLIN };

	return c->pidfd < 0 || poll(&p, 1, 0) == 0;
}

/*
 * Copies len bytes between local memory and the caller's address remote:
 * into the caller (to_caller) or out of it. Returns 0, -EFAULT (the range
 * is not mapped with the needed access, or wraps), -EPERM / -ESRCH (the
 * daemon may not reach the caller at all), -ENOMEM.
 */
static int vm_copy(const struct caller *c, bool to_caller, void *local,
		   uint64_t remote, size_t len)
{
	char *l = local;

	if (remote + len < remote)
		return -EFAULT;
	while (len) {
		struct iovec li = { l, len };
		struct iovec ri = { (void *)(uintptr_t)remote, len };
		ssize_t n = to_caller ?
			process_vm_writev(c->pid, &li, 1, &ri, 1, 0) :
			process_vm_readv(c->pid, &li, 1, &ri, 1, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) /* a partial copy stops at the faulting page */
			return -EFAULT;
		l += n;
		remote += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads len bytes at address remote of the process that made request
 * req: a lookup's chain given by address (KVFS_LOOKUP_KEYS_AT). Whose
 * memory, who may and bad addresses as for PUT ("security" above, 1, 2
 * and 4); no pidfd (3): its open, poll and close cost as much as the read
 * (pidfs allocates an inode per pidfd: 10% of the daemon's samples in a
 * loop of such lookups), and what it guards against, a pid reused after a
 * connection abort, could here only feed another process's bytes into a
 * lookup whose answer reaches nobody. 0, -EFAULT, -EPERM, -ESRCH,
 * -ENOMEM. */
int fs_xfer_read_caller(fuse_req_t req, void *local, uint64_t remote,
			size_t len)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct caller c = { ctx ? ctx->pid : 0, -1 };

	/* 0: the caller lives in a pid namespace the mount cannot see */
	return c.pid > 0 ? vm_copy(&c, false, local, remote, len) : -ESRCH;
}

/* The errors that say nothing about an entry: the caller is out of reach. */
static bool caller_fatal(long rc)
{
	return rc == -EPERM || rc == -ESRCH;
}

/* ------------------------------------------------------------------ GET */

/* Copies bytes [off, off + n) of pinned chunk c to the caller at addr, or
 * with im to offset addr of the caller's registered device buffer. */
static int get_copy(struct fs *fs, const struct caller *cl,
		    struct fs_xfer *x, struct gpu_import *im,
		    struct tier_chunk *c, uint64_t off, uint64_t n,
		    uint64_t addr)
{
	const char *p = tier_chunk_ptr(c);
	char *bounce;
	int rc = 0;

	if (im) { /* pinned L1: a DMA; cuda L1: device to device */
		rc = tier_import_copy(fs->tier, im, c, off, n, addr);
		if (rc == 0)
			count(&x->device_entries, 1);
		return rc;
	}
	if (p) /* host or pinned L1: the one copy, arena -> caller */
		return vm_copy(cl, true, (void *)(p + off), addr, n);
	/* device-memory L1: through host memory, a piece at a time */
	bounce = malloc(n < XFER_PIECE ? n : XFER_PIECE);
	if (!bounce)
		return -ENOMEM;
	count(&x->bounced, 1);
	for (uint64_t done = 0; rc == 0 && done < n;) {
		uint64_t k = n - done < XFER_PIECE ? n - done : XFER_PIECE;
		long got = tier_chunk_read(fs->tier, c, bounce, k, off + done);

		if (got < 0)
			rc = (int)got;
		else if ((uint64_t)got != k)
			rc = -EIO;
		else
			rc = vm_copy(cl, true, bounce, addr + done, k);
		done += k;
	}
	free(bounce);
	return rc;
}

/* One GET entry: its result (bytes copied or -errno); e->size is set when
 * the chunk was found. */
static int64_t get_one(struct fs *fs, struct fs_xfer *x, uint32_t ns,
		       const struct caller *cl, struct fs_cred *pcred,
		       struct gpu_import *im, struct kvfs_xfer_ent *e,
		       bool named, uint64_t st_ino, const int64_t *mtime_ns)
{
	struct tier_chunk *c;
	uint64_t size, n;
	int rc;

	/* a path namespace's file only as its name's caller could read it
	 * (fs_path_reach): -ENOENT past a directory it may not search,
	 * -EACCES for the file's mode */
	if (pcred && fs_path_reach(fs, ns, &e->key, 1, pcred, R_OK, &rc) == 0)
		return rc;
	/* pins, promotes; readahead follows the calling thread */
	rc = tier_get_by(fs->tier, ns, &e->key, (uint64_t)cl->pid, &c);
	if (rc)
		return rc;
	/* a path namespace: decided again once pinned, with the name as it
	 * is now (a rename, unlink or new version may have come between);
	 * KVFS_XFER_NAMED: only the publication the caller's name shows */
	if (pcred || named) {
		rc = fs_path_check(fs, ns, &e->key, tier_chunk_gen(c), pcred,
				   named, st_ino, mtime_ns);
		if (rc) {
			tier_put(fs->tier, c);
			return rc;
		}
	}
	size = tier_chunk_size(c);
	e->size = size;
	n = e->length ? e->length : size - (e->offset <= size ? e->offset : 0);
	if (e->offset > size || e->length > size - e->offset)
		rc = -ERANGE;
	else if (n > e->cap)
		rc = -EMSGSIZE;
	else
		rc = get_copy(fs, cl, x, im, c, e->offset, n, e->addr);
	if (rc == 0)
		tier_count_served(fs->tier, n);
	tier_put(fs->tier, c);
	return rc ? rc : (int64_t)n;
}

/* ------------------------------------------------------------------ PUT */

/*
 * Each thread's bounce buffer for PUTs (XFER_PIECE bytes, kept for the
 * thread's life, freed at its exit), or NULL without memory. The caller's
 * bytes land there first, in the cache (process_vm_readv into a host
 * extent read every line of it from memory first), are checksummed there
 * and go on into L1 with streaming stores (tier_stream_copy): preloaded
 * writes of 256 KiB, alternating rounds (bench/preload_ab.py, 15 rounds):
 * daemon CPU per file 68.9 -> 48.0 us, 8,524 -> 11,153 files/s.
 */
static pthread_key_t bounce_key;
static pthread_once_t bounce_once = PTHREAD_ONCE_INIT;
static bool bounce_key_ok;

static void bounce_key_make(void)
{
	bounce_key_ok = pthread_key_create(&bounce_key, free) == 0;
}

static char *thread_bounce(void)
{
	char *b;

	pthread_once(&bounce_once, bounce_key_make);
	if (!bounce_key_ok)
		return NULL;
	b = pthread_getspecific(bounce_key);
	if (!b) {
		b = aligned_alloc(64, XFER_PIECE);
		if (b && pthread_setspecific(bounce_key, b)) {
			free(b);
			b = NULL;
		}
	}
	return b;
}

/* Copies the caller's len bytes at addr into the writer w, checksumming
 * them a piece at a time while they are in the cache: through the
 * thread's bounce buffer (device-memory L1: then tier_wr_pwrite; pieces
 * of TIER_STREAM_MIN bytes or more of a host extent, where TIER_STREAM:
 * then streaming stores), or straight into the host extent. */
static int put_copy(struct fs *fs, const struct caller *cl,
		    struct fs_xfer *x, struct tier_wr *w, uint64_t addr,
		    uint64_t len)
{
	struct hashkey_sum sum;
	char *p = NULL, *bounce = NULL;
	bool device = false;
	int rc;

	rc = tier_wr_map(fs->tier, w, len, (void **)&p);
	if (rc == -ENOTSUP) { /* device-memory L1 */
		bounce = thread_bounce();
		if (!bounce)
			return -ENOMEM;
		count(&x->bounced, 1);
		device = true;
		rc = 0;
	} else if (rc == 0 && TIER_STREAM && len >= TIER_STREAM_MIN) {
		bounce = thread_bounce(); /* NULL: straight in, as below */
	}
	if (rc)
		return rc;
	hashkey_sum_init(&sum);
	for (uint64_t done = 0; rc == 0 && done < len;) {
		uint64_t k = len - done < XFER_PIECE ? len - done : XFER_PIECE;
		/* a host extent's short last piece goes straight in: too short
		 * to stream (tier_stream_copy would memcpy it again) */
		bool via = device || (bounce && k >= TIER_STREAM_MIN);
		char *dst = via ? bounce : p + done;

		rc = vm_copy(cl, false, dst, addr + done, k);
		if (rc == 0)
			hashkey_sum_update(&sum, dst, k);
		if (rc == 0 && device)
			rc = tier_wr_pwrite(fs->tier, w, bounce, k, done);
		else if (rc == 0 && via)
			tier_stream_copy(p + done, bounce, k);
		done += k;
	}
	if (rc == 0)
		tier_wr_set_checksum(w, hashkey_sum_final(&sum));
	return rc;
}

/* One PUT entry: 0 (stored), -EEXIST (already there), or -errno. */
static int64_t put_one(struct fs *fs, fuse_req_t req, struct fs_xfer *x,
		       uint32_t ns, uint64_t chunk_bytes,
		       const struct caller *cl, const struct kvfs_xfer_ent *e)
{
	struct tier_wait wait = fs_write_wait(fs, req);
	struct tier_wr *w;
	int rc;

	/* refused before any byte moves (publication would refuse too) */
	if (chunk_bytes && e->length != chunk_bytes)
		return -EMSGSIZE;
	/* a path namespace's files are written through their names */
	if (fs_path_ns(fs, ns))
		return -EPERM;
	if (!e->length)
		return -ENODATA; /* a chunk without bytes is never published */
	/* reserves the key: -EEXIST, -EFBIG (> max_chunk), -ENOSPC (after
	 * write_wait_ms), -EINTR */
	rc = tier_wr_begin_wait(fs->tier, ns, &e->key, e->length, &wait, &w);
	if (rc)
		return rc;
	rc = put_copy(fs, cl, x, w, e->addr, e->length);
	if (rc) {
		tier_wr_abort(fs->tier, w);
		return rc;
	}
	return tier_wr_publish(fs->tier, w, NULL);
}

/* ---------------------------------------------------------------- batch */

static bool key_eq(const struct kvfs_key *a, const struct kvfs_key *b)
{
	return memcmp(a->b, b->b, sizeof(a->b)) == 0;
}

/* EINVAL checks of a whole batch of at most max entries (the form's),
 * before anything is done. */
static int check_batch(const struct kvfs_xfer *b, bool put, uint32_t max)
{
	const uint32_t get_ok = KVFS_XFER_DEVICE | KVFS_XFER_WAIT |
				KVFS_XFER_NAMED | KVFS_XFER_MTIME |
				KVFS_WAIT_MS_MASK;

	/* a timeout only with KVFS_XFER_WAIT, a version only with a name */
	if (b->nents == 0 || b->nents > max ||
	    (b->flags & ~(put ? 0u : get_ok)) ||
	    (!(b->flags & KVFS_XFER_WAIT) && KVFS_WAIT_MS_OF(b->flags)) ||
	    ((b->flags & KVFS_XFER_MTIME) && !(b->flags & KVFS_XFER_NAMED)))
		return -EINVAL;
	if (!put)
		return 0;
	for (uint32_t i = 0; i < b->nents; i++) {
		if (b->ents[i].cap || b->ents[i].offset)
			return -EINVAL; /* reserved for PUT */
		/* n <= 240: a quadratic scan is cheaper than a table */
		for (uint32_t j = 0; j < i; j++)
			if (key_eq(&b->ents[i].key, &b->ents[j].key))
				return -EINVAL;
	}
	return 0;
}

static int reply_batch_err(struct fs *fs, struct fs_xfer *x, fuse_req_t req,
			   const char *what, struct kvfs_xfer *b, int err)
{
	count(&x->batch_errors, 1);
	/* a caller out of reach is told which pid to name as its ptracer */
	if (err == EPERM && b) {
		b->daemon_pid = (int32_t)getpid();
		fuse_reply_ioctl(req, -EPERM, b,
				 offsetof(struct kvfs_xfer, ents));
		return 0;
	}
	fs_log(fs, "ioctl %s from pid %d: %s", what,
	       (int)fuse_req_ctx(req)->pid, strerror(err));
	fuse_reply_err(req, err);
	return 0;
}

/*
 * One batch in flight. The handler thread and any idle helper (see struct
 * fs_xfer) take entries one at a time from next, so a batch of 2 MiB
 * chunks is copied by as many cores as are free. Fields marked (atomic)
 * are shared between them; the rest is set before the job is offered.
 */
struct job {
	struct fs *fs;
	struct fs_xfer *x;
	fuse_req_t req;
	struct kvfs_xfer *b;
	const struct caller *cl;
	struct fs_cred *pcred; /* GET in a path namespace (shared by the
				* helpers: root's capabilities are read
				* once, when first needed: fs_cred_caps) */
	uint32_t ns;
	uint64_t chunk_bytes;
	struct gpu_import *im; /* GET into a device buffer, else NULL */
	bool put;
	bool named;        /* KVFS_XFER_NAMED */
	bool mtime;        /* KVFS_XFER_MTIME */
	uint32_t next;     /* (atomic) next entry to take */
	int stop;          /* (atomic) interrupted, or the caller is gone */
	int fatal;         /* (atomic) -EPERM / -ESRCH seen, else 0 */
	uint32_t done, ok; /* (atomic) entries attempted, succeeded */
	uint64_t bytes;    /* (atomic) */
	int offers;        /* (pool lock) helpers it may still take */
	int active;        /* (pool lock) helpers inside job_run */
	struct job *qnext; /* (pool lock) offered jobs */
};

/* Marks an entry the batch stopped before: set to -EINTR / -ESRCH at the
 * reply. Not an errno any entry can have. */
#define NOT_DONE INT64_MIN

static void job_run(struct job *j)
{
	struct fs_xfer *x = j->x;
	uint32_t i;

	while ((i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) <
	       j->b->nents) {
		struct kvfs_xfer_ent *e = &j->b->ents[i];
		uint64_t st_ino = e->size; /* in: KVFS_XFER_NAMED's */
		int64_t mt = e->result;    /* in: KVFS_XFER_MTIME's */
		int64_t r;

		e->size = 0;
		e->result = NOT_DONE;
		if (__atomic_load_n(&j->stop, __ATOMIC_RELAXED))
			continue;
		/* a signal (SIGKILL included) ends the batch early, after at
		 * least one entry so a retry always makes progress */
		if (__atomic_load_n(&j->done, __ATOMIC_RELAXED) &&
		    (fuse_req_interrupted(j->req) || !caller_alive(j->cl))) {
			__atomic_store_n(&j->stop, 1, __ATOMIC_RELAXED);
			continue;
		}
		r = j->put ? put_one(j->fs, j->req, x, j->ns, j->chunk_bytes,
				     j->cl, e)
			   : get_one(j->fs, x, j->ns, j->cl, j->pcred, j->im,
				     e, j->named, st_ino, j->mtime ? &mt : NULL);
		if (caller_fatal(r)) {
			__atomic_store_n(&j->fatal, (int)r, __ATOMIC_RELAXED);
			__atomic_store_n(&j->stop, 1, __ATOMIC_RELAXED);
			continue;
		}
		e->result = r;
		__atomic_fetch_add(&j->done, 1, __ATOMIC_RELAXED);
		if (r >= 0 || (j->put && r == -EEXIST)) {
			__atomic_fetch_add(&j->ok, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&j->bytes,
					   j->put ? (r == 0 ? e->length : 0)
						  : (uint64_t)r,
					   __ATOMIC_RELAXED);
		}
		if (r == -ENOENT && !j->put)
			count(&x->misses, 1);
		else if (r == -EEXIST && j->put)
			count(&x->exists, 1);
		else if (r < 0)
			count(&x->entry_errors, 1);
	}
}

/* ------------------------------------------------------ copy helpers */

/*
 * The daemon's own copy helpers: a batch's entries are spread over the
 * FUSE thread that got it and the helpers that are idle, because one
 * thread's copy between two address spaces (about 7 GB/s here) is well
 * below what the memory can do. Started at the first batch (threads do
 * not survive the daemon's fork), one fewer than the CPUs, at most
 * XFER_HELPERS_MAX.
 */
#define XFER_HELPERS_MAX 3

struct pool {
	pthread_mutex_t lock;
	pthread_cond_t work;  /* a job was offered, or quit */
	pthread_cond_t idle;  /* a job's last helper left it */
	struct job *queue;    /* jobs taking helpers */
	bool started, quit;
	int n;
	pthread_t th[XFER_HELPERS_MAX];
};

static void *helper_main(void *arg)
{
	struct pool *p = arg;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct job *j;

		while (!p->quit && !p->queue)
			pthread_cond_wait(&p->work, &p->lock);
		if (p->quit)
			break;
		j = p->queue;
		if (--j->offers == 0) { /* its last helper: off the queue */
			p->queue = j->qnext;
			j->qnext = NULL;
		}
		j->active++;
		pthread_mutex_unlock(&p->lock);
		job_run(j);
		pthread_mutex_lock(&p->lock);
		if (--j->active == 0)
			pthread_cond_broadcast(&p->idle);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static void pool_start(struct pool *p)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int want = cpus > 1 ? (int)(cpus - 1) : 0;

	if (want > XFER_HELPERS_MAX)
		want = XFER_HELPERS_MAX;
	p->started = true;
	for (int i = 0; i < want; i++)
		if (pthread_create(&p->th[p->n], NULL, helper_main, p) == 0)
			p->n++;
}

/* Runs j on this thread and on up to nents - 1 idle helpers. */
static void pool_run(struct pool *p, struct job *j)
{
	int offers;

	pthread_mutex_lock(&p->lock);
	if (!p->started)
		pool_start(p);
	offers = (int)j->b->nents - 1 < p->n ? (int)j->b->nents - 1 : p->n;
	if (offers > 0) { /* at the tail: batches are helped in order */
		struct job **q = &p->queue;

		while (*q)
			q = &(*q)->qnext;
		*q = j;
		j->offers = offers;
		pthread_cond_broadcast(&p->work);
	}
	pthread_mutex_unlock(&p->lock);
	job_run(j);
	pthread_mutex_lock(&p->lock);
	/* withdraw what nobody took, then wait for the takers */
	for (struct job **q = &p->queue; j->offers && *q; q = &(*q)->qnext)
		if (*q == j) {
			*q = j->qnext;
			j->offers = 0;
			break;
		}
	while (j->active)
		pthread_cond_wait(&p->idle, &p->lock);
	pthread_mutex_unlock(&p->lock);
}

static void pool_stop(struct pool *p)
{
	pthread_mutex_lock(&p->lock);
	p->quit = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (int i = 0; i < p->n; i++)
		pthread_join(p->th[i], NULL);
}

/* ---------------------------------------------------------- the batch */

static int run_batch(struct fs *fs, struct fs_xfer *x, fuse_req_t req,
		     struct fs_fh *fh, uint64_t owner, const void *in_buf,
		     bool put, uint32_t max)
{
	const char *what = put ? "PUT" : "GET";
	struct tier_ns_info nsi;
	struct kvfs_xfer *b;
	struct caller cl = { 0, -1 };
	struct fs_cred cred;
	struct job j;
	struct reg *r = NULL;
	bool alive, paths, dev = false;
	int rc;

	if (fh->kind != FS_FH_NS)
		return reply_batch_err(fs, x, req, what, NULL, ENOTTY);
	b = malloc(sizeof(*b));
	if (!b)
		return reply_batch_err(fs, x, req, what, NULL, ENOMEM);
	/* the small form's struct is the long one's first entries */
	memcpy(b, in_buf, max == KVFS_XFER_MAX ? sizeof(*b) :
	       sizeof(struct kvfs_xfer_small));
	/* Entries name keys; in a path namespace, the keys of paths
	 * (kvfs_path_key), each checked against its name (get_one). */
	rc = check_batch(b, put, max);
	/* X_OK too: open(2) and creat(2) of a chunk need search permission
	 * on its namespace, and a batch must not reach what they cannot */
	if (rc == 0)
		rc = fs_ns_access(fs, req, fh->ns,
				  (put ? W_OK : R_OK) | X_OK);
	if (rc == 0)
		rc = tier_ns_info(fs->tier, fh->ns, &nsi);
	if (rc == 0)
		rc = caller_open(&cl, req, b->nents);
	if (rc == 0 && (b->flags & KVFS_XFER_DEVICE)) {
		struct tier_arena_info ai;

		tier_arena_info(fs->tier, &ai);
		dev = true;
		pthread_rwlock_rdlock(&x->reg_lock);
		for (r = x->regs; r && r->owner != owner; r = r->next)
			;
		if (!r)
			rc = strcmp(ai.backend, "host") ? -ENODEV : -EOPNOTSUPP;
	}
	if (rc)
		goto fail;
	b->daemon_pid = (int32_t)getpid();
	j = (struct job){ .fs = fs, .x = x, .req = req, .b = b, .cl = &cl,
			  .ns = fh->ns, .chunk_bytes = nsi.chunk_bytes,
			  .im = r ? r->im : NULL, .put = put };
	paths = !put && fs_path_ns(fs, fh->ns);
	j.named = !put && (b->flags & KVFS_XFER_NAMED);
	j.mtime = j.named && (b->flags & KVFS_XFER_MTIME);
	if (j.named && !paths) {
		rc = -EINVAL; /* a key namespace's names are its keys */
		goto fail;
	}
	if (paths) {
		/* files closed before this GET are its to read: published
		 * first, as a lookup does (fs.c), and in its namespace also
		 * those whose close(2) returned before their RELEASE came
		 * (one pass over the pending list does both) */
		fs_path_publish_flushed(fs, fh->ns);
		/* groups: dirs differ; root: its capabilities say, read
		 * when a mode first denies it (root reading its own files
		 * reads none; helpers may share cred: fs_cred_caps) */
		fs_cred_of_caller(req, &cred);
		j.pcred = &cred;
	}
	pool_run(x->pool_p, &j);
	if (dev)
		pthread_rwlock_unlock(&x->reg_lock);
	dev = false;
	/* nothing done and the caller out of reach: fail it whole */
	if (j.fatal && !j.ok) {
		rc = j.fatal;
		goto fail;
	}
	alive = caller_alive(&cl);
	caller_close(&cl);
	if (j.stop)
		count(&x->interrupted, 1);
	for (uint32_t i = 0; i < b->nents; i++)
		if (b->ents[i].result == NOT_DONE)
			b->ents[i].result = alive ? -EINTR : -ESRCH;
	b->done = j.ok;
	b->bytes = j.bytes;
	count(put ? &x->puts : &x->gets, 1);
	if (max != KVFS_XFER_MAX)
		count(&x->small, 1);
	count(put ? &x->put_entries : &x->get_entries, j.done);
	count(put ? &x->put_bytes : &x->get_bytes, j.bytes);
	fuse_reply_ioctl(req, 0, b,
			 offsetof(struct kvfs_xfer, ents) +
				 (size_t)b->nents * sizeof(b->ents[0]));
	free(b);
	return 0;

fail:
	if (dev)
		pthread_rwlock_unlock(&x->reg_lock);
	caller_close(&cl);
	reply_batch_err(fs, x, req, what, b, -rc);
	free(b);
	return 0;
}

/*
 * A GET with KVFS_XFER_WAIT: waits (fs_wait.c) until every entry's key is
 * present, taking the entries in order as a chain, or the timeout; the
 * batch then runs as any other (what is still missing is -ENOENT). The
 * wait holds no batch place (max_inflight) and pins nothing.
 * 0 (go on), or -errno for the whole batch (EINTR, EAGAIN, EINVAL,
 * EACCES, ENOENT).
 */
static int wait_batch(struct fs *fs, fuse_req_t req, struct fs_fh *fh,
		      const void *in_buf, uint32_t max)
{
	const struct kvfs_xfer *b = in_buf;
	struct kvfs_key *keys;
	uint32_t flags, nents, found;
	int rc;

	memcpy(&flags, &b->flags, sizeof(flags));
	memcpy(&nents, &b->nents, sizeof(nents));
	if (!(flags & KVFS_XFER_WAIT) || !KVFS_WAIT_MS_OF(flags))
		return 0;
	if (fh->kind != FS_FH_NS)
		return -ENOTTY;
	if (nents == 0 || nents > max)
		return -EINVAL; /* check_batch says the rest */
	rc = fs_ns_access(fs, req, fh->ns, R_OK | X_OK);
	if (rc)
		return rc;
	keys = malloc(nents * sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	for (uint32_t i = 0; i < nents; i++)
		memcpy(&keys[i], &b->ents[i].key, sizeof(keys[i]));
	rc = fs_wait_chain(fs, req, fh->ns, keys, nents, 0,
			   KVFS_WAIT_MS_OF(flags), &found);
	free(keys);
	return rc;
}

/* Admission: at most max_inflight batches at once (see the cap above). */
static int do_batch(struct fs *fs, struct fs_xfer *x, fuse_req_t req,
		    struct fs_fh *fh, uint64_t owner, const void *in_buf,
		    bool put, uint32_t max)
{
	int rc, ring;

	if (!put && (rc = wait_batch(fs, req, fh, in_buf, max)) < 0) {
		if (rc != -EINTR && rc != -EAGAIN)
			return reply_batch_err(fs, x, req, "GET", NULL, -rc);
		/* a signal, or past the waiter bounds: routine, not logged */
		count(&x->batch_errors, 1);
		fuse_reply_err(req, -rc);
		return 0;
	}
	/* and a bounded share of a FUSE ring's entries (fs_ring_hold) */
	ring = fs_ring_hold(fs, false);
	if (ring == -EAGAIN ||
	    __atomic_add_fetch(&x->inflight, 1, __ATOMIC_ACQ_REL) >
	    x->max_inflight) {
		if (ring != -EAGAIN)
			__atomic_sub_fetch(&x->inflight, 1, __ATOMIC_ACQ_REL);
		fs_ring_release(fs, ring);
		count(&x->busy, 1);
		fuse_reply_err(req, EAGAIN); /* not logged: libkvfs retries */
		return 0;
	}
	rc = run_batch(fs, x, req, fh, owner, in_buf, put, max);
	__atomic_sub_fetch(&x->inflight, 1, __ATOMIC_ACQ_REL);
	fs_ring_release(fs, ring);
	return rc;
}

/* ------------------------------------------------------ device buffers */

/* Unlinks and returns owner's registration (reg_lock held for writing). */
static struct reg *reg_take(struct fs_xfer *x, uint64_t owner)
{
	for (struct reg **p = &x->regs; *p; p = &(*p)->next)
		if ((*p)->owner == owner) {
			struct reg *r = *p;

			*p = r->next;
			__atomic_fetch_sub(&x->nregs, 1, __ATOMIC_RELEASE);
			return r;
		}
	return NULL;
}

static void reg_free(struct fs *fs, struct reg *r)
{
	if (r) {
		tier_import_close(fs->tier, r->im);
		free(r);
	}
}

static int do_register(struct fs *fs, struct fs_xfer *x, fuse_req_t req,
		       struct fs_fh *fh, uint64_t owner, const void *in_buf)
{
	struct kvfs_xfer_register a;
	struct reg *r = NULL, *old;
	int rc = 0;

	if (fh->kind != FS_FH_NS)
		return reply_batch_err(fs, x, req, "XFER_REGISTER", NULL,
				       ENOTTY);
	memcpy(&a, in_buf, sizeof(a));
	if (a.reserved)
		rc = -EINVAL;
	if (rc == 0)
		rc = fs_ns_access(fs, req, fh->ns, R_OK);
	if (rc == 0 && a.length) {
		r = calloc(1, sizeof(*r));
		rc = r ? tier_import_open(fs->tier, a.ipc, a.length, &r->im)
		       : -ENOMEM;
	}
	if (rc) {
		free(r);
		return reply_batch_err(fs, x, req, "XFER_REGISTER", NULL,
				       rc == -ENOTSUP ? EOPNOTSUPP : -rc);
	}
	pthread_rwlock_wrlock(&x->reg_lock); /* waits for device batches */
	old = reg_take(x, owner);
	a.buffer_id = 0;
	if (r) {
		r->owner = owner;
		r->len = a.length;
		r->id = a.buffer_id = ++x->reg_ids;
		r->next = x->regs;
		x->regs = r;
		__atomic_fetch_add(&x->nregs, 1, __ATOMIC_RELEASE);
	}
	pthread_rwlock_unlock(&x->reg_lock);
	reg_free(fs, old);
	if (r)
		count(&x->registers, 1);
	fuse_reply_ioctl(req, 0, &a, sizeof(a));
	return 0;
}

/* ---------------------------------------------------------------- entry */

int fs_xfer_ioctl(struct fs *fs, struct fs_xfer *x, fuse_req_t req,
		  struct fuse_file_info *fi, unsigned int nr,
		  const void *in_buf)
{
	struct fs_fh *fh = fs_fh_of(fi);
	bool put = nr == _IOC_NR(KVFS_IOC_PUT) ||
		   nr == _IOC_NR(KVFS_IOC_PUT_SMALL);
	bool small = nr == _IOC_NR(KVFS_IOC_GET_SMALL) ||
		     nr == _IOC_NR(KVFS_IOC_PUT_SMALL);

	if (nr == _IOC_NR(KVFS_IOC_XFER_REGISTER))
		return do_register(fs, x, req, fh, fi->fh, in_buf);
	/* a GET or a PUT, in either form: the same batch, its own limit */
	return do_batch(fs, x, req, fh, fi->fh, in_buf, put,
			small ? KVFS_XFER_SMALL_MAX : KVFS_XFER_MAX);
}

void fs_xfer_release(struct fs_xfer *x, uint64_t owner)
{
	struct reg *r;

	/* every close of the mount comes here: most have nothing */
	if (!x || !__atomic_load_n(&x->nregs, __ATOMIC_ACQUIRE))
		return;
	pthread_rwlock_wrlock(&x->reg_lock);
	r = reg_take(x, owner);
	pthread_rwlock_unlock(&x->reg_lock);
	reg_free(x->fs, r);
}

int fs_xfer_create(struct fs *fs, struct fs_xfer **out)
{
	struct fs_xfer *x = calloc(1, sizeof(*x));

	if (x)
		x->pool_p = calloc(1, sizeof(*x->pool_p));
	if (!x || !x->pool_p) {
		free(x);
		return -ENOMEM;
	}
	x->max_inflight = (int)fs_workers() / 2;
	pthread_mutex_init(&x->pool_p->lock, NULL);
	pthread_cond_init(&x->pool_p->work, NULL);
	pthread_cond_init(&x->pool_p->idle, NULL);
	pthread_rwlock_init(&x->reg_lock, NULL);
	x->fs = fs;
	*out = x;
	return 0;
}

void fs_xfer_destroy(struct fs_xfer *x)
{
	if (!x)
		return;
	pool_stop(x->pool_p);
	while (x->regs) /* fds the kernel never released */
		reg_free(x->fs, reg_take(x, x->regs->owner));
	pthread_rwlock_destroy(&x->reg_lock);
	pthread_mutex_destroy(&x->pool_p->lock);
	pthread_cond_destroy(&x->pool_p->work);
	pthread_cond_destroy(&x->pool_p->idle);
	free(x->pool_p);
	free(x);
}

#define LD(f) ((unsigned long long)__atomic_load_n(&x->f, __ATOMIC_RELAXED))

void fs_xfer_counts(struct fs_xfer *x, struct fs_xfer_counts *c)
{
	memset(c, 0, sizeof(*c));
	if (!x)
		return;
	c->gets = LD(gets);
	c->puts = LD(puts);
	c->small = LD(small);
	c->get_entries = LD(get_entries);
	c->put_entries = LD(put_entries);
	c->get_bytes = LD(get_bytes);
	c->put_bytes = LD(put_bytes);
	c->misses = LD(misses);
	c->exists = LD(exists);
	c->entry_errors = LD(entry_errors);
	c->batch_errors = LD(batch_errors);
	c->interrupted = LD(interrupted);
	c->busy = LD(busy);
	c->bounced = LD(bounced);
	c->registers = LD(registers);
	c->device_entries = LD(device_entries);
}
