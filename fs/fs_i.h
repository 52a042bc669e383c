/*
 * fs_i.h - private interface of fs/ (the FUSE low-level operations): the
 * state the files of fs/ share, the one lock order, and the calls between
 * them (fs_ioctl.c, owned by the engine-interface work, uses the per-open
 * contract below). Nothing outside fs/ includes this; mount/ uses fs/fs.h.
 *
 * ------------------------------------------------------ locks and ownership
 * Lock order (left before right, never the reverse):
 *
 *   fs_wr.lock     -> fs_priv.lock -> the tier's locks
 *   fs_nsmeta.lock -> fs_priv.lock
 *   fs_pjournal.lock -> fs_priv.lock (fs_pjournal.c: a record's
 *           attributes are read with the journal's lock held)
 *   fs_priv.qlock and fs_fh.ioctl_lock: leaves (nothing taken inside)
 *   fs_pt.lock (fs_pt.c, cache=passthrough's shadows): a leaf, taken
 *           under fs_wr.lock (a publication) and under tier.lock (the
 *           engine's readahead asks fs_pt_held); nothing else is taken
 *           or called into the engine while it is held
 *
 *   fs_priv.lock (mutex) protects the three tables (inodes by number,
 *           names, temporaries), the temporary list, the open-handle list,
 *           every fs_inode field, the fields of fs_wr marked "priv.lock",
 *           the root's attributes and the non-atomic counters. Held across
 *           tier_* calls where marked (rmdir's tier_ns_remove, the abort
 *           of a writer's last reference), so tier locks come after it.
 *   fs_wr.lock (rwlock) protects the chunk being written (fs_wr.w) and
 *           its publication state: writes, reads and truncates of that
 *           chunk share it; publish and discard take it exclusively.
 *           Taken before fs_priv.lock where both are held (xattr parent
 *           and depth); a writer's last reference drops under
 *           fs_priv.lock alone, when nobody else can hold or wait for it.
 *   fs_priv.qlock (mutex) protects the invalidation queue (q, qlen, qcap,
 *           stop) only. A leaf: nothing is taken while it is held, and it
 *           may be taken under any other lock (inside the engine's on_gone
 *           callback, in fs_wr_publish under fs_wr.lock).
 *   fs_nsmeta.lock (fs_nsmeta.c) serializes saves of l2_dir/namespaces;
 *           fs_nsmeta_save is called with no fs lock held.
 *   fs_fh.ioctl_lock protects ioctl_priv only (a leaf; fs_ioctl.c's).
 *   fs_pev.lock (fs_pevent.c) protects the event hashes and (with L3)
 *           the attributes of path files: a leaf, taken under tier.lock
 *           (the events sink, L3 writes) or priv.lock.
 *   Counters marked "atomic" are read and bumped with __atomic builtins.
 *
 * Kernel notifications are sent only from the background thread
 * (fs_inval.c), never from a request handler: the kernel would wait on the
 * very request being handled.
 *
 * Ownership: an fs_inode follows the kernel's lookup count (nlookup; freed
 * at zero by forget, except live namespaces, whose attributes outlive it).
 * An fs_wr is refcounted: its inode record, each open fh, and for
 * temporaries the temporary table hold one reference each; the last
 * reference aborts a chunk never published.
 *
 * ---------------------------------------------------------------- contract
 * Per-open state. Every open(2) and opendir(2) on the mount gets one
 * struct fs_fh; fuse_file_info.fh is (uint64_t)(uintptr_t) of it, for files
 * and directories alike. fs_ioctl() receives that fi, so fs_fh_of(fi) is
 * the fd's state. Fields are set at open and never change afterwards,
 * except ioctl_priv (see below); so fs_ioctl may read them without a lock.
 *
 *   kind    FS_FH_ROOT (mount root dir), FS_FH_NS (namespace dir),
 *           FS_FH_CHUNK (published chunk opened for reading),
 *           FS_FH_WRITER (chunk or temporary being written),
 *           FS_FH_CTL (.kvfs or a file in it).
 *   ns      namespace id (FS_FH_NS, FS_FH_CHUNK, FS_FH_WRITER), else 0.
 *   key     the chunk's key (FS_FH_CHUNK; FS_FH_WRITER when has_key).
 *   chunk   FS_FH_CHUNK only: the chunk, pinned by fs (tier_get at open,
 *           tier_put at release, AFTER fs_ioctl_release). Never NULL for
 *           FS_FH_CHUNK. Do not tier_put it yourself; a handle needs its own
 *           pin (tier_pin_key) only if it must survive the fd, which the
 *           ABI says it does not.
 *   uid, gid, pid   fuse_req_ctx() of the open/opendir request (the
 *           opener's credentials). For the caller of an ioctl use
 *           fuse_req_ctx(req) there; fs_ns_access() checks a namespace's
 *           mode for a request's caller.
 *   ioctl_priv  owned by fs_ioctl.c: NULL at open; fs_ioctl may set it
 *           (protected by ioctl_lock); fs_ioctl_release() must free it.
 *
 * Life: fs_ioctl_release(fs, fh) is called exactly once per fh, from
 * release/releasedir (or at unmount, before fs_ioctl_destroy, for fds the
 * kernel never released), before fs drops the chunk pin and frees the fh, so
 * leases and handles held by that fd can be dropped there. fs_ioctl_init()
 * runs once at fs_create (after the tier exists, before any request);
 * fs_ioctl_destroy() once at fs_destroy (after the last request, before
 * tier_destroy). fs->ioctl_state is theirs to use.
 */
#ifndef KVFS_FS_I_H
#define KVFS_FS_I_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "kvfs.h"
#include "tier/tier.h"
#include "fs/fs.h"
#include "hash/htab.h"
#include "events/events.h"
#include "tier/lease.h"

enum fs_fh_kind {
	FS_FH_ROOT = 1,
	FS_FH_NS,
	FS_FH_CHUNK,
	FS_FH_WRITER,
	FS_FH_CTL,
};

struct fs_wr;      /* fs_wr.c: a chunk being written (keyed or temporary) */
struct fs_pdir;    /* fs_ptree.c: a directory of a path namespace */
struct fs_pent;    /* fs_ptree.c: a name in such a directory */
struct fs_paths;   /* fs_ptree.c: the path namespaces of a mount */
struct fs_dirsnap; /* fs_dir.c: readdir snapshot */

struct fs_fh {
	enum fs_fh_kind kind;
	uint32_t ns;
	bool has_key;
	struct kvfs_key key;
	struct tier_chunk *chunk; /* FS_FH_CHUNK: pinned until release */
	int pt;                   /* FS_FH_CHUNK: enum fs_pt_mode (fs_pt.h) */
	uid_t uid;
	gid_t gid;
	pid_t pid;

	pthread_mutex_t ioctl_lock; /* protects ioctl_priv */
	void *ioctl_priv;           /* fs_ioctl.c's per-fd state */

	/* fs/ private below (not fs_ioctl.c's) */
	uint64_t ino;
	struct fs_wr *wr;          /* FS_FH_WRITER */
	bool wmode;                /* FS_FH_WRITER opened for writing
				    * (counted in wr->wopens) */
	bool wflushed;             /* wmode: its opener closed it (FLUSH;
				    * fs_wr.wflushed), priv.lock */
	struct fs_dirsnap *snap;   /* directories */
	bool snap_read;            /* readdir used snap: offset 0 retakes it */
	bool psnap;                /* snap is fs_path.c's (a path directory) */
	char *ctl_buf;             /* FS_FH_CTL: rendered file */
	size_t ctl_len;
	bool ctl_closed;           /* FS_FH_CTL: flushed (fs_priv.lock) */
	struct fs_fh *prev, *next; /* fs_priv.lock: open handles, freed at
				    * unmount if the kernel never released */
};

static inline struct fs_fh *fs_fh_of(const struct fuse_file_info *fi)
{
	return (struct fs_fh *)(uintptr_t)fi->fh;
}

/* The filesystem of one mount. Fields above "private" are read-only after
 * fs_create and may be used by fs_ioctl.c. */
struct fs {
	struct tier *tier;
	struct fuse_session *se;  /* set by fs_set_session before requests */
	struct fs_config cfg;     /* copy of the mount's fs options */
	void *ioctl_state;        /* owned by fs_ioctl.c */
	struct fs_wait *wait;     /* fs_wait.c: waiting lookups and GETs */
	struct fs_nsmeta *nsmeta; /* fs_nsmeta.c; NULL while L2 is off */
	struct fs_events *events; /* fs_events.c; NULL while events are off */

	struct fs_priv *priv;     /* private state of fs/, below */
};

/* --------------------------------------------- state shared inside fs/ */

#define FS_INO_KVFS 2       /* /.kvfs */
#define FS_INO_CTL_FIRST 3  /* /.kvfs/<file>, one per enum fs_ctl_file */
#define FS_INO_CHUNK FS_INO_NS_FIRST /* + gen */
#define FS_INO_OBJ (1ULL << 63)

/* Attribute and entry cache times (seconds). Chunks are immutable and
 * evictions are invalidated explicitly, so a second is safe; writers and
 * temporaries are never cached (other processes must not see them). */
#define FS_TTL 1.0

/*
 * Entry and attribute cache time of a published chunk of a key namespace
 * (seconds): its name can only go away by unlink (the kernel drops the
 * dentry itself) or by the engine letting it go (eviction, replacement:
 * fs_inval.c invalidates the dentry and inode), its bytes and size never
 * change, and every open still reaches the daemon, which refuses an
 * inode whose chunk is gone (ENOENT, or ESTALE for a name published
 * again: the kernel looks it up anew), so the cache never serves other
 * bytes. What may lag is what stat shows (atime, blocks after a
 * demotion, the namespace's owner after a chown) and, only if an
 * invalidation is lost (no memory), the name of an evicted chunk.
 * A re-read after FS_TTL then costs OPEN + READ, not LOOKUP + OPEN + READ.
 * Path namespaces (names that may stand for a new version) keep FS_TTL.
 */
#define FS_CHUNK_TTL 60.0


/* Salts of the tables' hashes (hash/htab.h), one per kind of name; the
 * namespace id goes in the low 32 bits where a name lives in one. */
#define FS_SALT_INO   (UINT64_C(0x6673) << 48) /* inode numbers */
#define FS_SALT_CHUNK (UINT64_C(0x6663) << 48) /* | ns: chunk keys */
#define FS_SALT_NS    (UINT64_C(0x666e) << 48) /* namespace ids */
#define FS_SALT_TMP   (UINT64_C(0x6674) << 48) /* | ns: temporary names */

enum fs_kind {
	FS_K_CHUNK = 1,
	FS_K_NS,
	FS_K_WRITER, /* keyed writer or temporary */
};

enum fs_wr_state {
	FS_WR_OPEN = 0,
	FS_WR_PUBLISHED,
	FS_WR_DISCARDED,
};

/* A chunk being written (keyed) or a temporary (fs_wr.c). Refcounted: the
 * inode record, each open fh, and for temporaries the temporary table. */
/* Why a file being written was dropped unpublished (stats fs.discards). */
enum fs_discard {
	FS_DISCARD_WRITE_ERROR, /* a write failed: close and fsync said so */
	FS_DISCARD_REFUSED,     /* publication refused (EEXIST, EMSGSIZE...) */
	FS_DISCARD_EMPTY,       /* a key namespace's chunk with no bytes */
	FS_DISCARD_KILLED,      /* its writer died by a signal */
	FS_DISCARD_EXPIRED,     /* a temporary closed past tmp_timeout */
	FS_DISCARD_UNLINKED,    /* its name went (unlink, rmdir, replaced) */
	FS_DISCARD_UNMOUNT,     /* still open when the mount went */
	FS_DISCARD_N
};

struct fs_wr {
	pthread_rwlock_t lock;
	struct tier_wr *w;      /* lock; NULL once published or discarded */
	enum fs_wr_state state; /* lock */
	uint64_t final_size;    /* lock; size at publication */
	uint64_t final_gen;     /* lock; gen at publication (0 unknown) */
	int write_err;          /* atomic: first failed write, never publish */
	uint64_t nwrites;       /* atomic: writes and truncates that landed */
	bool sync;              /* atomic: fsync'ed before its publication,
				 * which is then made durable (fs_wr_sync) */

	unsigned refs;          /* priv.lock */
	unsigned opens;         /* priv.lock: open fhs */
	struct tier_chunk *pub_chunk; /* path files: the published version,
				 * pinned for readers that joined the
				 * writer (read_published); dropped with
				 * the last fd. lock (set), priv.lock */
	unsigned wopens;        /* priv.lock: those that may write (a
				 * path file is closed when these are,
				 * whatever readers hold it) */
	uint64_t ino;           /* set at fs_wr_new, then constant */
	uint32_t ns;            /* priv.lock (set at create) */
	bool has_key;           /* priv.lock */
	struct kvfs_key key;    /* priv.lock */
	bool temp;              /* set at create, then constant */
	bool in_tmptab;         /* priv.lock */
	char *name;             /* priv.lock: temporaries */
	struct htab_node tnode; /* priv.lock: tmptab */
	struct fs_wr *tprev, *tnext; /* priv.lock: temporary list (expiry) */
	uint64_t closed_ms;     /* priv.lock: last close (fs_now_ms) */
	bool has_parent;        /* priv.lock */
	struct kvfs_key parent; /* priv.lock */
	uint32_t depth;         /* priv.lock */
	bool want_pin;          /* priv.lock */
	bool excl;              /* created with O_EXCL (see fs_op_flush) */
	pid_t creator_tid;      /* set at create, then constant */
	pid_t last_write_tid;   /* atomic: the thread whose write landed
				 * last (fs_wr_killed_writer) */
	uint64_t closed_nwrites; /* atomic: nwrites + 1 at the last close
				 * of a writable fd by its creator's
				 * process (0: none yet) */
	unsigned long long created_ticks; /* fs_boot_ticks() at create */
	uid_t uid;              /* priv.lock: the creator's; chown */
	gid_t gid;              /* priv.lock */
	mode_t mode;            /* priv.lock: permission bits (create, chmod);
				 * shown and enforced while being written */
	bool unlinked;          /* priv.lock: its name was removed (unlink,
				 * replaced by a rename, expired): nlink 0 */
	/* atomic: CLOCK_REALTIME ns; set at create, mtime and ctime moved by
	 * writes and truncates, all three by utimensat, ctime by chmod */
	uint64_t atime_ns, mtime_ns, ctime_ns;
	/* path namespaces (fs_path.c): the name the file has, NULL once
	 * unlinked or replaced (then it is discarded at its last close);
	 * closed, unpublished writers wait on the pending list */
	struct fs_pent *pent;   /* priv.lock */
	struct fs_wr *pprev, *pnext; /* priv.lock: fs_paths.pending */
	bool pending;           /* priv.lock: on that list */
	bool path;              /* a file of a path namespace (constant) */
	bool closing;           /* priv.lock: its last fd was closed (FLUSH);
				 * the RELEASE that follows is async */
	uint32_t wflushed;      /* priv.lock: of wopens, the fds whose
				 * opener's close (FLUSH) came already */
	uint64_t st_ino;        /* priv.lock: path files: the st_ino stat
				 * shows (its name's, fs_pent.ino), kept
				 * after publication; 0: ino */
};

/* fs_hexval - the value of hex digit c (either case), or -1. */
static inline int fs_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* fs_now_ns - CLOCK_REALTIME in nanoseconds (file times). */
static inline uint64_t fs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* fs_wr_touch - w's bytes changed: mtime and ctime are now. */
static inline void fs_wr_touch(struct fs_wr *w)
{
	uint64_t now = fs_now_ns();

	__atomic_store_n(&w->mtime_ns, now, __ATOMIC_RELAXED);
	__atomic_store_n(&w->ctime_ns, now, __ATOMIC_RELAXED);
}

/* One record per inode the kernel knows (fs_inode.c); every field is
 * protected by fs_priv.lock. */
struct fs_inode {
	struct htab_node inode; /* itab */
	struct htab_node nnode; /* ntab (chunks by key, namespaces) */
	bool named;             /* in ntab */
	enum fs_kind kind;
	uint64_t ino;
	uint64_t nlookup;       /* the kernel's lookup count */
	uint32_t ns;
	/* chunks */
	struct kvfs_key key;
	uint64_t gen;
	bool unlinked;          /* by unlink(2): fstat of open fds still works */
	struct tier_info info;  /* as of the last lookup or getattr */
	uint64_t shown_atime;   /* the atime stat shows (fs_chunk_attr) */
	/* namespaces */
	mode_t mode;
	uid_t uid;
	gid_t gid;
	bool removed;
	char dtype[8];
	struct timespec mtime, ctime;
	/* writers */
	struct fs_wr *wr;       /* a reference */
	/* a namespace in path mode: its root directory (fs_path.c) */
	struct fs_pdir *pdir;
	/* a file of a path namespace (fs_path.c): its st_ino, and mode,
	 * uid, gid and mtime above as its name showed them last, for fds
	 * still open once the name went or has a newer version; 0: none */
	uint64_t path_ino;
	/* a path file's version that a new one replaced in its writer's
	 * close, which invalidated the kernel's entry of the name before it
	 * returned (fs/paths/fs_psuper.c): only fds and opens that found it
	 * before then reach it, so GETATTR answers its own attributes and
	 * OPEN opens prev, a pin of its bytes kept a short while (NULL:
	 * none, or let go) */
	bool superseded;
	struct tier_chunk *prev;
};

/* The cache time of a chunk in namespace nsi (may be NULL). */
static inline double fs_chunk_ttl(const struct fs_inode *nsi)
{
	return nsi && !nsi->pdir ? FS_CHUNK_TTL : FS_TTL;
}

/* A queued kernel invalidation (fs_inval.c). */
struct fs_gone {
	uint32_t ns;
	bool published; /* a new publication: only the name's dentry */
	struct kvfs_key key;
};

/* The FUSE requests counted by kind (stats "requests", metric
 * kvfs_fs_requests_total{op=...}): what each file operation costs in
 * round trips to the daemon. */
enum fs_req_kind {
	FS_RQ_LOOKUP, FS_RQ_GETATTR, FS_RQ_OPEN, FS_RQ_READ, FS_RQ_CREATE,
	FS_RQ_WRITE, FS_RQ_FLUSH, FS_RQ_RELEASE, FS_RQ_NR
};

struct fs_pt;

struct fs_priv {
	struct fs_pt *pt;          /* cache=passthrough (fs_pt.c), or NULL */
	pthread_mutex_t lock;
	struct htab itab;      /* lock: ino -> fs_inode.inode */
	struct htab ntab;      /* lock: (kind, ns, key) -> fs_inode.nnode */
	struct htab tmptab;    /* lock: (ns, name) -> fs_wr.tnode */
	struct fs_wr tmp_head; /* lock: list of temporaries */
	struct fs_fh fh_head;  /* lock: list of open handles */
	uint64_t next_obj;     /* lock: FS_INO_OBJ numbers */
	uint64_t ninodes, ntemps; /* lock */

	/* root attributes (lock) */
	mode_t root_mode;
	uid_t root_uid;
	gid_t root_gid;
	struct timespec mount_time; /* set at fs_create, then constant */
	/* fs_ctl.c: control files rendered by a stat, kept for the same
	 * process's open (so stat's size is what it reads) */
	pthread_mutex_t ctl_lock;
	struct fs_ctl_snap {
		char *buf;             /* NULL: free slot */
		size_t len;
		int file;              /* enum fs_ctl_file */
		pid_t pid;
		uid_t uid;
		gid_t gid;
		struct timespec at;    /* CLOCK_MONOTONIC */
	} ctl_snap[8];

	/* invalidation queue (qlock) */
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct fs_gone *q;
	size_t qlen, qcap;
	bool stop;
	bool bg_done;           /* qlock: the background thread returned */
	bool thread_started;    /* fs_start/fs_stop only */
	pthread_t thread;

	struct fs_paths *paths; /* lock: path namespaces (fs_path.c) */
	const struct fs_path_ops *pathops; /* (imm) set by fs_path_create */
	uint64_t tmp_expired;   /* lock */
	/* atomic counters */
	uint64_t opens, writers_killed, late_publishes, invalidations, stale;
	uint64_t discards[FS_DISCARD_N]; /* atomic: fs_wr.c counts them */
	uint64_t req[FS_RQ_NR]; /* FUSE requests received, by kind */
};

static inline struct fs *fs_req(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* A request waiting for room in L1 was interrupted (FUSE's INTERRUPT). */
static inline bool fs_req_stop(void *req)
{
	return fuse_req_interrupted(req);
}

/* How long a write of req waits for room in L1 (write_wait_ms), ended
 * early by an interrupt (the write then fails with EINTR). */
static inline struct tier_wait fs_write_wait(struct fs *fs, fuse_req_t req)
{
	return (struct tier_wait){ .ms = fs->cfg.write_wait_ms,
				   .stop = fs_req_stop, .arg = req };
}

static inline uint64_t fs_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------- fs_itab.c: the inode table; fs_inode.c: LOOKUP and FORGET */

/* The ntab hash of a chunk record (priv.lock held). */
uint64_t fs_chunk_hash(uint32_t ns, const struct kvfs_key *key);
/* Finders (priv.lock held): NULL when fs has no such record. */
struct fs_inode *fs_ino_find(struct fs_priv *p, uint64_t ino);
struct fs_inode *fs_chunk_find(struct fs_priv *p, uint32_t ns,
			       const struct kvfs_key *key);
struct fs_inode *fs_ns_find(struct fs_priv *p, uint32_t ns);
/* A new record in the inode table (priv.lock held); NULL without memory. */
struct fs_inode *fs_inode_new(struct fs_priv *p, enum fs_kind kind,
			      uint64_t ino);
/* Unhashes and frees in, dropping a writer's reference (priv.lock held). */
void fs_inode_free(struct fs *fs, struct fs_inode *in);
/* The record of namespace id, made with fail-closed defaults if fs has not
 * seen it (priv.lock held); NULL without memory. */
struct fs_inode *fs_ns_get(struct fs *fs, uint32_t id);
/* Drops n of ino's lookups (priv.lock held). */
void fs_forget_one(struct fs *fs, fuse_ino_t ino, uint64_t n);
/* fuse_reply_entry; undoes the lookup count if the kernel never got it. */
int fs_reply_entry_counted(struct fs *fs, fuse_req_t req,
			   struct fuse_entry_param *e);
/* A namespace's name: 0, -ENAMETOOLONG or -EINVAL. */
int fs_ns_name_check(const char *name);
/* What a name in a namespace is: 1 a temporary, 0 a key (parsed into key),
 * or -EINVAL / -ENAMETOOLONG. */
int fs_chunk_name(const char *name, struct kvfs_key *key);

/* The entry of writer w (a temporary or a path file) / of the published
 * chunk (ns, key) for a lookup reply: counts one lookup. priv.lock NOT
 * held. fs_entry_chunk: -ENOENT (counted as a miss), -ENOMEM. */
int fs_entry_writer(struct fs *fs, uint32_t ns, struct fs_wr *w,
		    struct fuse_entry_param *e);
int fs_entry_chunk(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		   struct fuse_entry_param *e);
/* The entry of namespace directory in for a lookup or mkdir reply: counts
 * one lookup. priv.lock held. */
void fs_entry_ns_locked(struct fs_inode *in, struct fuse_entry_param *e);

void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void fs_op_forget_multi(fuse_req_t req, size_t count,
			struct fuse_forget_data *forgets);

/* ------------------------------------ fs_wr.c: writers and temporaries */

/* A writer with one reference and a new inode number (priv.lock held). */
struct fs_wr *fs_wr_new(struct fs_priv *p);
/* Drops a reference; the last aborts an unpublished chunk. unref_locked:
 * priv.lock held; unref takes it. */
void fs_wr_unref_locked(struct fs *fs, struct fs_wr *w);
void fs_wr_unref(struct fs *fs, struct fs_wr *w);
/* Discards the chunk being written (w->lock held exclusively), counted
 * under why when there were bytes to drop. */
void fs_wr_discard(struct fs *fs, struct fs_wr *w, enum fs_discard why);
/* fs_wr_error - the error a write of w got (0 if none): fsync and close
 * report it, the file is never published. */
int fs_wr_error(const struct fs_wr *w);
/* fs_wr_fail - records err, the first failed write of w, and frees the
 * room its bytes hold in L1 (they will never be published; w->lock held
 * shared or exclusively). */
void fs_wr_fail(struct fs *fs, struct fs_wr *w, int err);
/* fs_sync_chunk - fsync of the published chunk (ns, key): tier_sync, and
 * for a path namespace (path) the journal of its name. 0 or -errno. */
int fs_sync_chunk(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		  bool path);
/* fs_wr_sync - after w's publication under key: when an fsync of w came
 * before it, fs_sync_chunk (0 otherwise, at no cost). */
int fs_wr_sync(struct fs *fs, struct fs_wr *w, const struct kvfs_key *key);
/* Publishes w under key (NULL: its own). See fs_wr.c. 0 or -errno. */
int fs_wr_publish(struct fs *fs, struct fs_wr *w, const struct kvfs_key *key,
		  bool keep_refused);
/* Publishes w under key replacing a published chunk there, atomically
 * (tier_wr_publish_replace; path namespaces' versions). 0 or -errno; w is
 * published or discarded either way. */
int fs_wr_publish_replace(struct fs *fs, struct fs_wr *w,
			  const struct kvfs_key *key);
/* The temporary table and list (priv.lock held). find: NULL if none. list:
 * adds w under w->name, taking a reference (0, or -ENOMEM). rename: moves
 * w to name (malloc'd, now w's). unlist: removes it, keeping the table's
 * reference for the caller to drop. drop: unlists a closed temporary and
 * discards its bytes now. */
struct fs_wr *fs_tmp_find(struct fs_priv *p, uint32_t ns, const char *name);
int fs_tmp_list(struct fs_priv *p, struct fs_wr *w);
void fs_tmp_rename(struct fs_priv *p, struct fs_wr *w, char *name);
void fs_tmp_unlist(struct fs_priv *p, struct fs_wr *w);
void fs_tmp_drop(struct fs *fs, struct fs_wr *w, enum fs_discard why);
/* Drops temporaries closed longer than tmp_timeout_ms (takes priv.lock). */
void fs_tmp_expire(struct fs *fs);

/* ---------------------------------------------- fs_attr.c: attributes */

void fs_ns_attr(struct fs_inode *ns, struct stat *st);
/* A published chunk's attributes (priv.lock held): in (may be NULL) is its
 * inode, whose shown atime moves as fs->cfg.atime says. */
void fs_chunk_attr(struct fs *fs, struct fs_inode *nsi, struct fs_inode *in,
		   uint64_t ino, const struct tier_info *info, struct stat *st);
/* Takes w->lock shared. */
void fs_writer_attr(struct fs *fs, struct fs_wr *w, struct stat *st);
/* fs_ctl_attr (fs_ctl.c) - attributes of /.kvfs or a file in it for the
 * caller of req; a file's size is that of its contents as the caller
 * would read them now (fi: the open file's snapshot). 0 or -ENOMEM. */
int fs_ctl_attr(struct fs *fs, fuse_req_t req, fuse_ino_t ino,
		struct fuse_file_info *fi, struct stat *st);

void fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		   int to_set, struct fuse_file_info *fi);
void fs_op_statfs(fuse_req_t req, fuse_ino_t ino);

/* ------------------------------------------ fs_ns.c: namespace directories */

/* The namespace id of directory inode ino (priv.lock NOT held): -EPERM
 * for the root and .kvfs, -ENOENT, -ENOTDIR. */
int fs_ns_of(struct fs *fs, fuse_ino_t ino, uint32_t *id);
/* fs_ns_of(parent), then fs_chunk_name(name): 1 a temporary, 0 a key, or
 * the first -errno. */
int fs_ns_child(struct fs *fs, fuse_ino_t parent, const char *name,
		uint32_t *ns, struct kvfs_key *key);
/* The engine's namespace ids, malloc'd into *out (free it): the count or
 * -errno (then *out is untouched). */
long fs_ns_ids(struct fs *fs, uint32_t **out);

void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		 mode_t mode);
void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);

/* ------------------------------------------------ fs_chunk.c: chunk files */

/* A new open handle for req's caller, on the open-handle list; NULL
 * without memory. fs_fh_free: releases it (ioctl state, chunk pin, writer
 * reference) and frees it. Both take priv.lock. */
struct fs_fh *fs_fh_new(fuse_req_t req, enum fs_fh_kind kind, uint64_t ino);
void fs_fh_free(struct fs *fs, struct fs_fh *fh);
/* fh becomes an open of writer w in namespace ns: w gains a reference
 * and an open, fh takes w's inode. priv.lock held. */
void fs_fh_attach_wr_locked(struct fs_fh *fh, struct fs_wr *w, uint32_t ns);

/* fs_writer_reply_create: replies to a create with writer fh->wr's new
 * inode (one lookup, counted by the caller) and fh. Nonzero when the
 * kernel never got them (the lookup is undone; free fh then). */
int fs_writer_reply_create(struct fs *fs, fuse_req_t req, struct fs_fh *fh,
			   struct fuse_file_info *fi);
/* fs_writer_reply_open: replies to an open that joined writer fh->wr
 * (O_TRUNC empties the chunk being written). Returns fuse_reply_open's
 * result: nonzero when the kernel never got the fd (free fh then). */
int fs_writer_reply_open(struct fs *fs, fuse_req_t req, struct fs_fh *fh,
			 struct fuse_file_info *fi);

void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		  mode_t mode, struct fuse_file_info *fi);
void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* Replies to a read-only open of chunk inode ino of (ns, key) with an fh
 * that owns pin c (its bytes: whichever publication c pins). shadow: the
 * inode is publication c of a key namespace (FS_INO_CHUNK + its gen), so
 * with cache=passthrough the kernel may read a shadow of it (fs_pt.h). */
void fs_open_chunk_reply(struct fs *fs, fuse_req_t req, fuse_ino_t ino,
			 uint32_t ns, const struct kvfs_key *key,
			 struct tier_chunk *c, bool shadow,
			 struct fuse_file_info *fi);
void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		 size_t size, off_t off, struct fuse_file_info *fi);
void fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* Is task pid exiting because a signal killed it (fs_task.c)? */
bool fs_task_killed_by_signal(pid_t pid);
/* Does task pid hold an fd open for writing on st_ino ino (fs_task.c)? */
bool fs_task_writes_ino(pid_t pid, uint64_t ino);
/* fs_boot_ticks - now, in the clock ticks since boot of /proc/<pid>/stat's
 * start times (a writer's created_ticks). */
unsigned long long fs_boot_ticks(void);
/* fs_wr_killed_writer - whether thread tid (a FLUSH of a writable fd, not
 * told to be the creator's process in time) is of a process killed by a
 * signal that is w's creator's or made w's last write, with bytes
 * written since the creator's last close: its chunk may be half written
 * (fs_task.c). */
bool fs_wr_killed_writer(const struct fs_wr *w, pid_t tid);
/* fs_wr_same_process - whether thread tid (a FLUSH's) is of the process
 * that created w (fs_task.c; a task in execve(): false, after at most
 * 250 ms). */
bool fs_wr_same_process(const struct fs_wr *w, pid_t tid);
void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi);
void fs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		    struct fuse_file_info *fi);

/* ------------------------------------ fs_rename.c: unlink, rename, links */

void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		  fuse_ino_t newparent, const char *newname, unsigned int flags);
void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		 mode_t mode, dev_t rdev);
void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		const char *newname);
void fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		   const char *name);

/* ------------------------------------------- fs_dir.c: directory listings */

void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi);
void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi);

/* --------------------------------------------------- fs_xattr.c: xattrs */

void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		    size_t size);
void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		    const char *value, size_t size, int flags);
void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);

/* ---------- fs_invq.c: the invalidation queue; fs_inval.c: the thread */

/* Queues a kernel invalidation of (ns, key) for the background thread
 * (published: only the name's dentry). Takes qlock only. */
void fs_queue_inval(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		    bool published);
/* fs_expire_entry (fs_inval.c; the background thread, or a handler that
 * may notify): the kernel's cached entry of name (NUL-terminated at len)
 * in directory parent is expired, not dropped: the next walk of the name
 * asks this daemon (a LOOKUP) and keeps the entry where it still names
 * the same inode. libfuse 3.16's fuse_lowlevel_notify_expire_entry; 3.14
 * has none, so the notification (FUSE_EXPIRE_ONLY, kernel 6.2 on) is
 * written to the session's fd here; kernels before 6.2 take the flag for
 * padding and drop the entry, as fuse_lowlevel_notify_inval_entry does.
 * A dropped entry that a reader opened the name through turns that fd's
 * /proc/self/fd link into "NAME (deleted)", a live file shown as gone.
 * 0, or -errno (-ENOENT: the kernel holds no such entry). */
int fs_expire_entry(struct fs *fs, uint64_t parent, const char *name,
		    size_t len);
/* The engine's on_gone callback (tier_config.on_gone, arg: the fs). */
void fs_on_gone(void *arg, uint32_t ns, const struct kvfs_key *key,
		enum tier_gone_reason why);

/* ------------------------- fs_ptree.c, fs_path.c, fs_pjournal.c: paths */

/*
 * Path namespaces (kvfs(7) "PATH NAMESPACES"). A namespace in path mode
 * holds a tree of directories; every file in it is a chunk whose key is
 * XXH3-128 of its path below the namespace (kvfs_path_key). The tree lives
 * in fs_ptree.c: directories (struct fs_pdir, inode numbers FS_INO_PDIR |
 * n) and names (struct fs_pent), all under fs_priv.lock. A file is
 * written through an fs_wr (a temporary in the engine's terms) and
 * published under its path's key once closed; fs_path.c holds the FUSE
 * operations, fs_pjournal.c the names kept in l2_dir for a warm restart.
 */
#define FS_INO_PDIR (UINT64_C(3) << 62)  /* | n: path directories */
#define FS_PATH_MAX KVFS_PATH_MAX        /* bytes of a path below its ns */

static inline bool fs_is_pdir_ino(uint64_t ino)
{
	return (ino & FS_INO_PDIR) == FS_INO_PDIR;
}

/*
 * fs/'s core (fs_inode.c, fs_attr.c, fs_chunk.c, fs_inval.c, fs_ns.c,
 * fs_xattr.c, fs_xfer.c, fs_events.c, fs_metrics.c) calls path namespaces
 * through the fs_path_* hooks below, defined in fs_paths.c, which call
 * struct fs_path_ops (set by fs_path_create): so the core never names a
 * file of fs/paths/, and fs/paths/ calls the core (inodes, writers, the
 * key namespaces' operations it hands over to) downward only.
 */
struct fs_path_counts;
struct fs_cred;
struct fs_path_ops {
	void (*tick)(struct fs *fs);
	void (*publish_pending)(struct fs *fs, uint64_t cutoff_ms, size_t max);
	void (*publish_flushed)(struct fs *fs, uint32_t ns);
	void (*gone)(struct fs *fs, uint32_t ns, const struct kvfs_key *key);
	void (*published)(struct fs *fs, uint32_t ns,
			  const struct kvfs_key *key);
	int (*attach_locked)(struct fs *fs, struct fs_inode *nsi);
	void (*detach_locked)(struct fs *fs, struct fs_inode *nsi);
	void (*forget_locked)(struct fs *fs, uint64_t ino, uint64_t n);
	int (*writer_attr_set)(struct fs *fs, struct fs_wr *w,
			       const struct stat *attr, int to_set,
			       uid_t was_uid, uid_t caller);
	void (*chunk_attr_locked)(struct fs *fs, const struct fs_inode *nsi,
				  struct fs_inode *in,
				  const struct kvfs_key *key, uint64_t gen,
				  struct stat *st);
	int (*names_set)(struct fs *fs, uint32_t ns, const char *v,
			 size_t len);
	int (*evict_set)(struct fs *fs, uint32_t ns, const char *v,
			 size_t len);
	int (*quota_set)(struct fs *fs, uint32_t ns, uint64_t quota);
	bool (*ns)(struct fs *fs, uint32_t ns);
	uint32_t (*reach)(struct fs *fs, uint32_t ns,
			  const struct kvfs_key *keys, uint32_t n,
			  struct fs_cred *c, int mask, int *why);
	int (*check)(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		     uint64_t gen, struct fs_cred *c, bool named,
		     uint64_t st_ino, const int64_t *mtime_ns);
	void (*mode_saved)(struct fs *fs, const char *ns, bool paths);
	bool (*event_hash)(struct fs *fs, uint32_t ns,
			   const struct kvfs_key *key, uint64_t *h);
	bool (*pattr_get)(struct fs *fs, uint32_t ns,
			  const struct kvfs_key *key, struct tier_pattr *a);
	void (*pattr_found)(struct fs *fs, uint32_t ns,
			    const struct kvfs_key *key,
			    const struct tier_pattr *a);
	void (*counts)(struct fs *fs, struct fs_path_counts *c);
	int (*sync)(struct fs *fs);
	unsigned (*quiesce_locked)(struct fs *fs);
};

/* fs_path_create / fs_path_destroy (fs.c): the mount's path state, and at
 * fs_create, once the engine recovered L2, the names kept there; at
 * fs_destroy (after the last request, before the inodes go) closed files
 * are published and the journal closed. */
int fs_path_create(struct fs *fs, const char *l2_dir);
void fs_path_destroy(struct fs *fs);
/* fs_path_free (fs_destroy, priv.lock held, after the inodes went): the
 * rest of the trees. */
void fs_path_free(struct fs *fs);
/* fs_path_tick (background thread, no lock held): publishes files closed
 * a while ago, syncs the journal. */
void fs_path_tick(struct fs *fs);
/* fs_path_quiesce_locked (fs/paths/fs_psuper.c; priv.lock held): from now
 * on no close invalidates a name's entry itself (fs_quiesce); returns how
 * many closes are doing so now. */
unsigned fs_path_quiesce_locked(struct fs *fs);
/* fs_path_publish_pending: publishes the closed path files closed before
 * cutoff_ms (UINT64_MAX: all), at most max. No lock held (a writer's
 * lock may be: others' are taken). */
void fs_path_publish_pending(struct fs *fs, uint64_t cutoff_ms, size_t max);
/* fs_path_publish_flushed: as fs_path_publish_pending for every one, and
 * also those of namespace ns whose FLUSH said closed, their RELEASE not
 * come yet (a GET by key right after close). */
void fs_path_publish_flushed(struct fs *fs, uint32_t ns);
/* fs_path_gone (background thread, no lock held): (ns, key) left the
 * engine; its name goes too unless a newer version holds it. */
void fs_path_gone(struct fs *fs, uint32_t ns, const struct kvfs_key *key);
/* fs_path_published (background thread, no lock held): chunk (ns, key)
 * was just published; when it is a path file, the kernel's entry of its
 * name (which points at the writer's inode) is dropped, so a reader's
 * first open looks the name up once instead of twice. */
void fs_path_published(struct fs *fs, uint32_t ns, const struct kvfs_key *key);
/* fs_path_attach_locked: namespace record nsi becomes a path namespace
 * (a new root directory; -ENOMEM). fs_path_detach_locked frees its tree
 * (writers' references dropped): when it becomes a key namespace again,
 * and when its record is freed. priv.lock held. */
int fs_path_attach_locked(struct fs *fs, struct fs_inode *nsi);
void fs_path_detach_locked(struct fs *fs, struct fs_inode *nsi);
/* fs_path_forget_locked: the kernel forgot n lookups of path directory
 * ino (priv.lock held). */
void fs_path_forget_locked(struct fs *fs, uint64_t ino, uint64_t n);
/* fs_path_chunk_attr_locked: st of published chunk (key, gen) of
 * namespace nsi as a path file shows it (st_ino, mode, owner, mtime: its
 * name's while it is that name's version, remembered in chunk inode in,
 * which may be NULL, for later); does nothing for key namespaces.
 * priv.lock held. */
void fs_path_chunk_attr_locked(struct fs *fs, const struct fs_inode *nsi,
			       struct fs_inode *in, const struct kvfs_key *key,
			       uint64_t gen, struct stat *st);
/* fs_path_writer_attr_set: path writer w, already published, had its
 * mode, owner or times changed by attr/to_set (fs_attr.c, in the same
 * priv.lock hold; was_uid: its owner before, caller: the caller's uid):
 * its name shows them too, and a new version being written over it takes
 * them (fs_psetattr.c). 0, or -EPERM where its name is another's by now
 * (renamed, then chown'ed): the caller undoes the change. w.lock held
 * (read), priv.lock held. */
int fs_path_writer_attr_set(struct fs *fs, struct fs_wr *w,
			    const struct stat *attr, int to_set,
			    uid_t was_uid, uid_t caller);
/* fs_path_names_set: user.kvfs.names of namespace ns ("keys"|"paths"):
 * -EINVAL, -EBUSY (not empty), -ENOENT, -ENOMEM. No lock held. */
int fs_path_names_set(struct fs *fs, uint32_t ns, const char *v, size_t len);
/* fs_path_sync: the path namespaces' journal of names (l2_dir/paths)
 * fdatasync'ed now (an fsync): 0 or -errno; 0 without L2. */
int fs_path_sync(struct fs *fs);
/* fs_path_ns: is namespace ns in path mode? Takes priv.lock. */
bool fs_path_ns(struct fs *fs, uint32_t ns);
/*
 * fs_path_reach (no lock held): of keys[0..n) of namespace ns, how many in
 * a row the caller c (fs_cred_of_caller) may reach by name, as open(2) or
 * stat(2) of their paths would: the namespace's root and each directory
 * below it down to the file's name c may search, and with mask (R_OK) a
 * file c may read; root as its capabilities say (CAP_DAC_OVERRIDE or
 * CAP_DAC_READ_SEARCH: everything; without them, the mode bits). A key
 * with no name here (a file known only through L3, an orphan) is judged
 * as a lookup of its name would make it: 0755 directories, a 0644 file.
 * *why (when not NULL) says what stopped the run: -ENOENT (a directory c
 * may not search: the file is hidden, as stat could not tell it from an
 * absent one) or -EACCES (the file's mode). Every key of a namespace that
 * is not a path namespace is reachable: n. The batched lookups, GETs and
 * their waits call it: a path namespace's files are theirs by key only as
 * far as their names are the caller's.
 */
uint32_t fs_path_reach(struct fs *fs, uint32_t ns, const struct kvfs_key *keys,
		       uint32_t n, struct fs_cred *c, int mask, int *why);
/*
 * fs_path_check (no lock held): once a GET pinned publication gen of key
 * (ns, key) of a path namespace, whether it may copy it, decided in one
 * hold of priv.lock with the name as it is now (fs_path_reach's answer
 * before the pin may be stale: a rename, an unlink or a new version may
 * have come in between). c (NULL: no permission check): the name holds
 * that publication (else -ENOENT) and c may reach it (-ENOENT, -EACCES;
 * a republication of the name in flight is waited for); a key with no
 * name is a file known only through L3 unless its own publication is in
 * flight (waited for, up to 200 ms, then -ENOENT), it lost its name in
 * the last second (or too many keys did to tell: -ENOENT), or the engine
 * holds another publication of it by now (-ENOENT). Root's capabilities
 * are read when a check would deny it (with them: no check). named
 * (KVFS_XFER_NAMED): the name also has st_ino and shows no new version
 * being written or copied (else -ESTALE); with mtime_ns
 * (KVFS_XFER_MTIME), its stat's mtime is also *mtime_ns (else -ESTALE).
 * 0 or -errno.
 */
int fs_path_check(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		  uint64_t gen, struct fs_cred *c, bool named,
		  uint64_t st_ino, const int64_t *mtime_ns);
/* fs_path_evict_set, fs_path_quota_set: user.kvfs.evict ("policy" |
 * "never") and user.kvfs.quota_bytes of namespace ns, kept in the path
 * journal for a warm restart: 0 or -errno (kvfs.h). No lock held. */
int fs_path_evict_set(struct fs *fs, uint32_t ns, const char *v, size_t len);
int fs_path_quota_set(struct fs *fs, uint32_t ns, uint64_t quota);
/* The journal's record of an eviction mode: "policy" or "never:QUOTA"
 * (fs_path_keep_parse reads it back: 0 or -EINVAL). */
int fs_path_keep_text(bool keep, uint64_t quota, char *buf, size_t len);
int fs_path_keep_parse(const char *v, size_t len, bool *keep,
		       uint64_t *quota);
/* fs_path_mode_saved: namespace ns became a path (or key) namespace:
 * kept for a warm restart. No lock held. */
void fs_path_mode_saved(struct fs *fs, const char *ns, bool paths);
/* fs_path_event_hash: the block hash KV events report for chunk key of
 * namespace ns when it is a file of a path namespace whose name begins
 * with at least 16 hex digits (fs_ptree_event_hash): true and *h; false
 * otherwise (the key's own hash applies). Takes only a leaf lock of its
 * own: the events sink calls it with tier.lock held (fs_pevent.c). */
bool fs_path_event_hash(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
			uint64_t *h);
/* The engine's tier_config.pattr_get and pattr_found (arg: the fs): the
 * attributes of path files that their L3 records carry. Take only a leaf
 * lock of their own (fs_pevent.c). */
bool fs_path_pattr_get(void *arg, uint32_t ns, const struct kvfs_key *key,
		       struct tier_pattr *a);
void fs_path_pattr_found(void *arg, uint32_t ns, const struct kvfs_key *key,
			 const struct tier_pattr *a);
/* fs_path_counts: the path namespaces' numbers for .kvfs/stats. */
struct fs_path_counts {
	uint64_t dirs;       /* directories, all path namespaces */
	uint64_t files;      /* file names */
	uint64_t meta_bytes; /* the trees' own count of their bytes */
	uint64_t pending;    /* closed files not yet published */
	uint64_t orphans;    /* chunks without a name dropped at start */
	uint64_t superseded_opens; /* opens that raced a rewrite's close:
				    * its replaced version (fs_psuper.c) */
};
void fs_path_counts(struct fs *fs, struct fs_path_counts *c);

/* The FUSE operations of fs.c's table that path namespaces change: each
 * handles what lies in a path namespace and hands the rest to fs_op_*. */
void fs_path_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_path_op_getattr(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi);
void fs_path_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
			int to_set, struct fuse_file_info *fi);
void fs_path_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode);
void fs_path_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_path_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		       mode_t mode, struct fuse_file_info *fi);
void fs_path_op_open(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi);
void fs_path_op_release(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi);
void fs_path_op_flush(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi);
void fs_path_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_path_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		       fuse_ino_t newparent, const char *newname,
		       unsigned int flags);
void fs_path_op_opendir(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi);
void fs_path_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
			off_t off, struct fuse_file_info *fi);
void fs_path_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			 size_t size);
void fs_path_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void fs_path_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			 const char *value, size_t size, int flags);
void fs_path_op_removexattr(fuse_req_t req, fuse_ino_t ino,
			    const char *name);

/*
 * fs_ns_access - may the caller of req access namespace ns with mask
 * (R_OK | W_OK | X_OK, as access(2))? Uses the namespace's mode, uid and gid
 * as kvfs stores them and the caller's uid, gid and supplementary groups
 * (root may do anything). Returns 0, -EACCES, or -ENOENT (no such
 * namespace).
 */
int fs_ns_access(struct fs *fs, fuse_req_t req, uint32_t ns, int mask);
struct fs_cred;
/* fs_ns_access for several namespaces of one request: c (ngroups -1
 * before the first call) keeps the caller's groups once read. */
int fs_ns_access_cred(struct fs *fs, fuse_req_t req, uint32_t ns, int mask,
		      struct fs_cred *c);

/* A caller's credentials, kept to check many namespaces at once. */
#define FS_CRED_GROUPS 64
struct fs_cred {
	uid_t uid;
	gid_t gid;
	pid_t pid;
	int ngroups;                  /* -1: not read yet (fs_ns_access_cred) */
	/* uid 0: 1 may read and search anything, 0 only what the mode bits
	 * allow (its capabilities lack CAP_DAC_OVERRIDE and
	 * CAP_DAC_READ_SEARCH, as in a container that dropped them), -1 not
	 * read yet (fs_cred_caps). Other uids: 0. */
	int dac;
	gid_t groups[FS_CRED_GROUPS]; /* supplementary groups */
};
/* fs_cred_of_req - the caller of req (its groups from /proc; none when
 * that fails); root may do anything. */
void fs_cred_of_req(fuse_req_t req, struct fs_cred *c);
/* fs_cred_of_caller - the caller of req as the kernel judges a file's
 * permission (path namespaces): as fs_cred_of_req, but root's
 * capabilities are read when a mode first denies it (dac -1:
 * fs_cred_caps). */
void fs_cred_of_caller(fuse_req_t req, struct fs_cred *c);
/* fs_cred_caps - reads root's capabilities from /proc when not read yet
 * (dac -1; threads sharing c may call it at once); no lock held. Root
 * without CAP_DAC_* is judged by its gid alone, not its supplementary
 * groups (that can only deny). Returns whether it read them (so a check
 * denied for want of them is worth repeating). */
bool fs_cred_caps(struct fs_cred *c);
/* fs_cred_may - as fs_ns_access, for a mode, owner and group. Root
 * (dac 1) may do anything; with dac 0 or -1 the bits decide. */
bool fs_cred_may(const struct fs_cred *c, mode_t mode, uid_t uid, gid_t gid,
		 int mask);

/* ----------------------------------------------------- fs/ <-> fs_ctl.c */

/* The files of /.kvfs, in inode order. */
enum fs_ctl_file {
	FS_CTL_STATS = 0, /* JSON */
	FS_CTL_METRICS,   /* Prometheus text */
	FS_CTL_CONFIG,    /* the mount's effective options */
	FS_CTL_VERSION,
	FS_CTL_NFILES
};

/* fs.c: the names of /.kvfs's files, by enum fs_ctl_file. */
extern const char *const fs_ctl_names[FS_CTL_NFILES];

/*
 * fs_ctl_open - the contents of control file `file` for the caller of req
 * (malloc'd, *buf and *len): the snapshot the same process's stat just
 * rendered when there is one (so the size stat gave is what it reads),
 * else a new rendering. Per-namespace rows only for the namespaces the
 * caller may list (fs_metrics.h). 0 or -errno.
 */
int fs_ctl_open(struct fs *fs, fuse_req_t req, int file, char **buf,
		size_t *len);
/* fs_ctl_destroy - frees the kept snapshots (fs_destroy). */
void fs_ctl_destroy(struct fs *fs);

struct fs_counters {
	uint64_t req[FS_RQ_NR];  /* FUSE requests received, by kind */
	uint64_t inodes, temporaries, tmp_expired, opens;
	uint64_t writers_killed; /* discarded: the writer died by a signal */
	uint64_t late_publishes; /* published at the last close, not a flush */
	uint64_t invalidations, stale;
	uint64_t discards[FS_DISCARD_N]; /* by enum fs_discard */
};
void fs_counters(struct fs *fs, struct fs_counters *c);


/* ------------------------------------ namespace attributes across restarts */

/* Attributes of a namespace, or of the root directory, as fs keeps them. */
struct fs_nsattr {
	mode_t mode;       /* S_IFDIR | permission bits */
	uid_t uid;
	gid_t gid;
	char dtype[8];     /* user.kvfs.dtype, "" when unset (namespaces) */
	struct timespec mtime, ctime; /* namespaces */
};

/*
 * fs_nsattr_get / fs_nsattr_set (fs_nsattr.c) - a namespace's attributes (ns 0:
 * the root's mode, uid and gid). get: -ENOENT when fs has no live record.
 * set creates the record when the engine has the namespace but fs has not
 * seen it yet; -ENOMEM. Both take fs_priv.lock: call with it not held.
 */
int fs_nsattr_get(struct fs *fs, uint32_t ns, struct fs_nsattr *a);
int fs_nsattr_set(struct fs *fs, uint32_t ns, const struct fs_nsattr *a);

/* fs_log (fs.c) - one line to the daemon's log (stderr in the foreground,
 * syslog once daemonized), prefixed "kvfs: ". */
void fs_log(struct fs *fs, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * fs_nsmeta.c - keeps the attributes of namespaces and of the root in
 * l2_dir/namespaces while L2 is on, so a warm restart brings them back.
 * fs_nsmeta_load: at fs_create, after the engine recovered L2 and before
 * any request: applies the file (creating its empty namespaces), logs a
 * missing or damaged file; namespaces it does not describe keep fs's
 * fail-closed default (0700, owned by the daemon's user). Never fails the
 * mount. fs_nsmeta_save: after every change of a namespace's existence,
 * mode, owner, chunk_bytes or dtype, or of the root's mode or owner;
 * rewrites the file atomically and synchronously (failures are logged and
 * retried at the next save or at unmount). Call with no fs lock held.
 * fs_nsmeta_destroy: at fs_destroy, while the namespace records exist.
 * All three do nothing while L2 is off.
 */
struct fs_nsmeta;
void fs_nsmeta_load(struct fs *fs, const char *l2_dir);
void fs_nsmeta_save(struct fs *fs);
void fs_nsmeta_destroy(struct fs *fs);

/* fs_nsfile.c - the format of l2_dir/namespaces (described there). */
#define FS_NSFILE_NAME "namespaces"
#define FS_NSFILE_VERSION 2 /* 2 added CHUNK_TOKENS; 1 still reads */

struct fs_nsfile_ent {
	char name[KVFS_NS_NAME_MAX + 1];
	struct fs_nsattr a;
	uint64_t chunk_bytes;
	uint32_t chunk_tokens; /* user.kvfs.chunk_tokens (version 2) */
	int shuffle;           /* the engine's; applied when a.dtype is set */
};

struct fs_nsfile {
	struct fs_nsattr root; /* mode, uid, gid */
	size_t n;
	struct fs_nsfile_ent *ent; /* malloc'd; parse sorts it by name */
};

/* fs_nsfile_format - the file's bytes (malloc'd) for f. 0 or -ENOMEM. */
int fs_nsfile_format(const struct fs_nsfile *f, char **buf, size_t *len);
/* fs_nsfile_parse - fills f (free with fs_nsfile_free) from the file's
 * bytes. -EBADMSG (checksum, syntax, a duplicate name), -ENOTSUP (another
 * format version), -ENOMEM; on error f holds nothing. */
int fs_nsfile_parse(const char *buf, size_t len, struct fs_nsfile *f);
void fs_nsfile_free(struct fs_nsfile *f);
/* fs_nsfile_write - replaces dirfd/namespaces by buf atomically: a
 * temporary, fsync, rename, fsync of the directory. 0 or -errno. */
int fs_nsfile_write(int dirfd, const char *buf, size_t len);
/* fs_nsfile_read - the whole file, malloc'd and NUL-terminated. -ENOENT
 * when missing, -EFBIG past 64 MiB, or another -errno. */
int fs_nsfile_read(int dirfd, char **buf, size_t *len);

/* ------------------------------------------------ implemented in fs_ioctl.c */

/*
 * fs_ioctl - the FUSE ioctl callback, forwarded unchanged (fi is the fd's
 * fuse_file_info; flags carry FUSE_IOCTL_DIR for directory fds). Must reply
 * to req exactly once (fuse_reply_ioctl / fuse_reply_err) and return 0.
 */
int fs_ioctl(struct fs *fs, fuse_req_t req, fuse_ino_t ino, unsigned int cmd,
	     void *arg, struct fuse_file_info *fi, unsigned flags,
	     const void *in_buf, size_t in_bufsz, size_t out_bufsz);

/*
 * fs_xattr_value_check (fs_xattr.c) - parses a value for the settable
 * attribute name as setxattr does, without applying it: 0, -EINVAL for a
 * malformed value, -ENOTSUP for a name kvfs never sets. Pure (the fuzz
 * target calls it).
 */
int fs_xattr_value_check(const char *name, const char *value, size_t size);

/*
 * fs_ioctl_check - the validation fs_ioctl applies to an ioctl's argument
 * before it looks at the fd or the engine: kvfs's magic (-ENOTTY if not,
 * or an unknown number), direction, size and version header (-EINVAL),
 * and each command's own fields (counts in range, known flags, namespace
 * names, handle kinds: -EINVAL). 0 when the command may run. Pure: no
 * state, safe on any bytes (the fuzz target calls it).
 */
int fs_ioctl_check(unsigned int cmd, const void *in_buf, size_t in_bufsz,
		   size_t out_bufsz);

/* fs_ioctl_release - the fd fh is closing: drop what fs_ioctl attached to
 * it (leases, handles) and free ioctl_priv. Called once per fh. */
void fs_ioctl_release(struct fs *fs, uint64_t fh);

/* fs_ioctl_init / fs_ioctl_destroy - per-mount state (fs->ioctl_state).
 * init returns 0 or -errno (the mount fails). */
int fs_ioctl_init(struct fs *fs);
void fs_ioctl_destroy(struct fs *fs);

/* The transfer counters (see struct fs_xfer in fs_xfer.c, kvfs(7)). */
struct fs_xfer_counts {
	uint64_t gets, puts, get_entries, put_entries, get_bytes, put_bytes;
	uint64_t misses, exists, entry_errors, batch_errors, interrupted;
	uint64_t busy, bounced, registers, device_entries, small;
};
struct fs_xfer;
void fs_xfer_counts(struct fs_xfer *x, struct fs_xfer_counts *c);

/* fs_ioctl_counts - the ioctl, lease and transfer counters (kvfs(7)),
 * for .kvfs/stats and .kvfs/metrics (fs_metrics.c). */
struct fs_ioctl_counts {
	uint64_t lookups, group_lookups, keys, prefetches, handles, errors;
	uint64_t lookup_hits[TIER_FROM_N], lookup_misses;
	struct lease_stats leases;
	struct fs_xfer_counts xfer;
};
void fs_ioctl_counts(struct fs *fs, struct fs_ioctl_counts *c);

/* ------------------------------------------------------- fs_events.c */

/* Installs the event sink in tc when fs->cfg.events is set. -ENOMEM. */
int fs_events_init(struct fs *fs, struct tier_config *tc);
/* Once the namespaces' attributes are back: announces the chunks present
 * and starts reporting changes. */
void fs_events_start(struct fs *fs);
/* Before tier_destroy: remembers the namespaces to clear. */
void fs_events_unmount(struct fs *fs);
/* After `kvfsctl l3 drop NS` deleted NS's chunks from L3: an
 * AllBlocksCleared on the shared tier's topic (kv@SHARED_STORAGE@NS). */
void fs_events_l3_dropped(struct fs *fs, const char *ns);
/* After tier_destroy: AllBlocksCleared per namespace; frees the sink.
 * Also on fs_create's failure path. */
void fs_events_destroy(struct fs *fs);
/* fs_events_counts - the publisher's counters and endpoints (valid while
 * the mount lives); false (st zeroed) when events are off. */
bool fs_events_counts(struct fs *fs, struct ev_stats *st, const char **ep,
		      const char **replay_ep);

#endif /* KVFS_FS_I_H */
