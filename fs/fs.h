/*
 * fs.h - the kvfs filesystem as libfuse low-level operations, for
 * mount/kvfs_mount.c. One struct fs per mount; no globals, so two mounts can
 * live in one process.
 */
#ifndef KVFS_FS_H
#define KVFS_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

struct fs;
struct fuse_session;
struct fuse_lowlevel_ops;
struct tier_config;
struct ev_pub;

/* FUSE worker threads the mount serves with (mount/kvfs_mount.c): at
 * least FS_MAX_THREADS, two per online CPU where there are more (a GPU
 * server's engines run many ranks at once), at most FS_MAX_THREADS_CAP.
 * The batched transfers keep half of them free (fs/fs_xfer.c). */
#define FS_MAX_THREADS 16
#define FS_MAX_THREADS_CAP 256
static inline unsigned fs_workers(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned v = cpus > FS_MAX_THREADS / 2 ? 2 * (unsigned)cpus
					       : FS_MAX_THREADS;

	return v > FS_MAX_THREADS_CAP ? FS_MAX_THREADS_CAP : v;
}
/* Waiting lookups and GETs (fs/fs_wait.h): defaults of wait_max and
 * wait_max_uid, and the most wait_max may be. */
#define FS_WAIT_MAX_DEFAULT 32
#define FS_WAIT_MAX_UID_DEFAULT 8
#define FS_WAIT_MAX_LIMIT 1024

enum fs_cache {
	FS_CACHE_DIRECT = 0, /* direct_io: reads reply from the arena */
	FS_CACHE_PAGE,       /* page cache + keep_cache for published chunks */
	FS_CACHE_PASSTHROUGH, /* the kernel reads shadows (fs_pt.h) */
};

/* -o max_dirs default: directories of path namespaces, in all */
#define FS_PATH_DIRS_DEFAULT (UINT64_C(4) << 20)
/* A published chunk's mtime and ctime are its publication time and never
 * move; its atime follows reads as the mount's atime option says. */
enum fs_atime {
	FS_ATIME_RELATIME = 0, /* relatime (default): the first read after
				* publication, then at most once a day */
	FS_ATIME_NOATIME,      /* noatime: never moves (= mtime) */
	FS_ATIME_STRICT,       /* strictatime: every read */
};

/* Inodes below this are the root and /.kvfs: requests on them are left
 * out of the request counters, so that reading the counters does not
 * move them (fs.c, mount/mount_uring.c). */
#define FS_INO_NS_FIRST 16ULL

/* The daemon's FUSE transport (mount/mount_uring.h), for the stats
 * (kvfs(7) COUNTERS, fuse.*). */
struct fs_uring_counts {
	uint64_t queues;   /* rings in use (one per possible CPU), 0 when
			    * /dev/fuse alone serves */
	uint64_t entries;  /* ring entries, each with a thread of its own */
	uint64_t requests; /* requests served through the rings (on inodes
			    * from FS_INO_NS_FIRST) */
	uint64_t foreign;  /* their replies sent by another thread */
};

struct fs_config {
	enum fs_cache cache;
	uint64_t pt_mem;         /* cache=passthrough: bytes of shadows */
	uint32_t lease_ms;       /* default lease of KVFS_LOOKUP_PIN */
	/* waiting lookups and GETs (fs/fs_wait.h): waiters in all and per
	 * caller uid (0 = the defaults there); kvfs-mount adds wait_max
	 * FUSE workers to FS_MAX_THREADS for them */
	uint32_t wait_max, wait_max_uid;
	uint64_t seed;           /* key seed engines should use (shown) */
	uint32_t tmp_timeout_ms; /* closed, unrenamed temporaries are dropped */
	uint32_t write_wait_ms;  /* a write waits this long for room in L1
				  * before ENOSPC (0: not at all) */
	uint32_t max_read;       /* the max_read mount option, or 0 */
	bool names_paths;        /* names=paths: new namespaces hold paths */
	uint64_t max_dirs;       /* directories of path namespaces, in all
				  * (0: FS_PATH_DIRS_DEFAULT) */
	enum fs_atime atime;     /* what a chunk's atime shows */
	char config_text[4096];  /* the effective options, for .kvfs/config */
	struct ev_pub *events;   /* KV event publisher (events/events.h),
				  * the caller's; NULL = events off */
	bool ctl_mode_set;       /* /.kvfs's files have mode ctl_mode (read
				  * bits only), else 0444 */
	mode_t ctl_mode;
	bool ctl_gid_set;        /* /.kvfs's group is ctl_gid, else the
				  * mount owner's */
	gid_t ctl_gid;
	/* FUSE requests over io_uring (mount/mount_uring.h): 0 off, 1 auto,
	 * 2 on; the daemon's transport, shown in .kvfs/config, its counters
	 * read through uring_counts (NULL: zeros) */
	int fuse_uring;
	void (*uring_counts)(struct fs_uring_counts *c);
	/* ring_cpu (NULL: no rings): the CPU whose ring serves the calling
	 * handler thread's request, -1 for /dev/fuse. Waits are at most
	 * ring_hold_max at once on one ring, waits and batched transfers
	 * half as many again, the rest refused EAGAIN as past wait_max: each
	 * CPU keeps entries for its other requests, the READs a batch's page
	 * faults on a kvfs mmap need among them (fs_wait.h fs_ring_hold) */
	int (*ring_cpu)(void);
	uint32_t ring_hold_max;
};

/*
 * fs_create - creates the engine (tier_create with tc; fs installs its own
 * on_gone callback) and the filesystem state around it. On failure writes a
 * one-line reason to err and returns -errno; nothing is left allocated.
 */
int fs_create(const struct fs_config *fc, struct tier_config *tc,
	      struct fs **out, char *err, size_t errlen);

/* fs_ops - the operations table to give fuse_session_new with fs as
 * userdata. */
const struct fuse_lowlevel_ops *fs_ops(void);

/*
 * fs_start - records the session (for kernel cache invalidation) and starts
 * the background thread (evictions -> invalidations, expiry of abandoned
 * temporaries). Call after fuse_session_mount, before the loop. 0 or -errno.
 */
int fs_start(struct fs *fs, struct fuse_session *se);

/*
 * fs_quiesce - the first step of a stop, while the loop still serves: no
 * request handler starts a kernel invalidation from now on, those in
 * flight end (they wait for directory locks that clients' requests hold
 * until they are answered), and the background thread stops (fs_stop),
 * within timeout_ms. 0, or -ETIMEDOUT (a notification still waits in the
 * kernel: abort the connection, then fs_stop joins what is left).
 */
int fs_quiesce(struct fs *fs, unsigned timeout_ms);

/* fs_stop - stops the background thread; call while the loop still
 * serves (a stop signal: mount/mount_stop.c; the thread's invalidations may
 * wait for requests to be answered) or after it returned, before
 * fuse_session_unmount/destroy, from one thread at a time. Idempotent. */
void fs_stop(struct fs *fs);

/* fs_metrics_prom (fs_metrics.c) - the Prometheus text root reads in
 * /.kvfs/metrics (every namespace), malloc'd into *buf (the caller frees).
 * Thread-safe. 0 or -ENOMEM. */
int fs_metrics_prom(struct fs *fs, char **buf, size_t *len);

/* fs_destroy - frees every inode, handle and writer, then the engine. */
void fs_destroy(struct fs *fs);

#endif /* KVFS_FS_H */
