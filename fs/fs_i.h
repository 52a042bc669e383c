/*
 * fs_i.h - private interface of fs/ (the FUSE low-level operations), shared
 * between fs.c (namespaces, inodes, publication, xattrs, control files) and
 * fs_ioctl.c (the ioctls of include/kvfs.h, owned by the engine-interface
 * work). Nothing outside fs/ includes this; mount/ uses fs/fs.h.
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

enum fs_fh_kind {
	FS_FH_ROOT = 1,
	FS_FH_NS,
	FS_FH_CHUNK,
	FS_FH_WRITER,
	FS_FH_CTL,
};

struct fs_wr;    /* fs.c: a chunk being written (keyed or temporary) */
struct fs_dirsnap; /* fs.c: readdir snapshot */

struct fs_fh {
	enum fs_fh_kind kind;
	uint32_t ns;
	bool has_key;
	struct kvfs_key key;
	struct tier_chunk *chunk; /* FS_FH_CHUNK: pinned until release */
	uid_t uid;
	gid_t gid;
	pid_t pid;

	pthread_mutex_t ioctl_lock; /* protects ioctl_priv */
	void *ioctl_priv;           /* fs_ioctl.c's per-fd state */

	/* fs.c private below */
	uint64_t ino;
	struct fs_wr *wr;          /* FS_FH_WRITER */
	struct fs_dirsnap *snap;   /* directories */
	bool snap_read;            /* readdir used snap: offset 0 retakes it */
	char *ctl_buf;             /* FS_FH_CTL: rendered file */
	size_t ctl_len;
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
	struct fs_nsmeta *nsmeta; /* fs_nsmeta.c; NULL while L2 is off */

	struct fs_priv *priv;     /* fs.c: inode tables, threads, counters */
};

/*
 * fs_ns_access - may the caller of req access namespace ns with mask
 * (R_OK | W_OK | X_OK, as access(2))? Uses the namespace's mode, uid and gid
 * as kvfs stores them and the caller's uid, gid and supplementary groups
 * (root may do anything). Returns 0, -EACCES, or -ENOENT (no such
 * namespace).
 */
int fs_ns_access(struct fs *fs, fuse_req_t req, uint32_t ns, int mask);

/* ------------------------------------------------------ fs.c <-> fs_ctl.c */

/* The files of /.kvfs, in inode order. */
enum fs_ctl_file {
	FS_CTL_STATS = 0, /* JSON */
	FS_CTL_METRICS,   /* Prometheus text */
	FS_CTL_CONFIG,    /* the mount's effective options */
	FS_CTL_VERSION,
	FS_CTL_NFILES
};

/* fs_ctl_render - malloc'd contents of a control file. 0 or -errno. */
int fs_ctl_render(struct fs *fs, int file, char **buf, size_t *len);

struct fs_counters {
	uint64_t inodes, temporaries, tmp_expired, opens;
	uint64_t writers_killed; /* discarded: the writer died by a signal */
	uint64_t late_publishes; /* published at the last close, not a flush */
	uint64_t invalidations, stale;
};
void fs_counters(struct fs *fs, struct fs_counters *c);

/* fs_ns_attrs - dtype ("" when unset) and mode of a namespace. -ENOENT. */
int fs_ns_attrs(struct fs *fs, uint32_t ns, char dtype[8], mode_t *mode);

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
 * fs_nsattr_get / fs_nsattr_set (fs.c) - a namespace's attributes (ns 0:
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
#define FS_NSFILE_VERSION 1

struct fs_nsfile_ent {
	char name[KVFS_NS_NAME_MAX + 1];
	struct fs_nsattr a;
	uint64_t chunk_bytes;
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

/*
 * fs_ioctl_stats_json - writes one JSON value (an object, e.g.
 * {"leases_active":1,...}) describing ioctl state into buf (NUL-terminated,
 * at most size bytes); fs embeds it in .kvfs/stats as "ioctl". Returns the
 * length written.
 */
size_t fs_ioctl_stats_json(struct fs *fs, char *buf, size_t size);

#endif /* KVFS_FS_I_H */
