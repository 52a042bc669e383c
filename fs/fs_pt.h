/*
 * fs_pt.h - cache=passthrough (fs_pt.c): the kernel reads published chunks
 * of key namespaces from a sealed copy of each chunk in a memfd ("shadow"),
 * registered as the open's backing file (FUSE passthrough, Linux 6.9 and
 * later), so a read(2) of such a chunk is no FUSE request at all.
 *
 * The transport's hooks (fs_pt_in, fs_pt_out) are called by the daemon's
 * custom io (mount/mount_uring.c) for every request read and every reply
 * written: they say yes to FUSE_PASSTHROUGH in INIT's reply, and put the
 * backing id into the OPEN replies fs_pt_reply_open sends.
 */
#ifndef KVFS_FS_PT_H
#define KVFS_FS_PT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct fs;
struct kvfs_key;
struct fuse_file_info;
struct fuse_req;
struct tier_chunk;

/* ---- the transport (any thread; one session per process) ---- */

/* fs_pt_want - asks for passthrough at INIT (before the session runs). */
void fs_pt_want(bool on);
/* fs_pt_in - a request of r bytes as read from /dev/fuse. */
void fs_pt_in(const void *buf, ssize_t r);
/* fs_pt_out - a reply about to be written (iov[0]: fuse_out_header). */
void fs_pt_out(struct iovec *iov, int count);
/* fs_pt_on - true once the kernel took FUSE_PASSTHROUGH at INIT. */
bool fs_pt_on(void);

/* ---- the shadows of one mount ---- */

/* How an open of a published chunk was answered (struct fs_fh.pt). */
enum fs_pt_mode { FS_PT_NONE = 0, FS_PT_SHADOW, FS_PT_CLASSIC };

struct fs_pt_counts {
	uint64_t on;       /* 1: the kernel took passthrough at INIT */
	uint64_t opens;    /* opens answered with a shadow */
	uint64_t classic;  /* opens answered the classic way: no shadow yet */
	uint64_t made;     /* shadows made */
	uint64_t dropped;  /* shadows dropped for room (pt_mem) */
	uint64_t skipped;  /* shadows not made: no room, queue full, not in
			    * L1 any more */
	uint64_t errors;   /* shadows that failed (memfd, backing ioctl) */
	uint64_t shadows;  /* shadows now */
	uint64_t bytes;    /* their bytes */
};

/* fs_pt_start - with cache=passthrough: the table and its copying thread
 * (fs_start). 0 or -errno. fs_pt_stop stops the thread (fs_stop);
 * fs_pt_destroy closes every shadow (fs_destroy, after the inodes). */
int fs_pt_start(struct fs *fs);
void fs_pt_stop(struct fs *fs);
void fs_pt_destroy(struct fs *fs);

/* fs_pt_published - publication gen (size bytes) of (ns, key) of a key
 * namespace: queued for a shadow; the shadows of the key's earlier
 * publications (smaller gens) go. */
void fs_pt_published(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		     uint64_t gen, uint64_t size);

/*
 * fs_pt_open - how to answer a read-only open of inode ino (publication
 * gen of (ns, key), size bytes, whose chunk the caller holds): *mode
 * FS_PT_SHADOW with *id, or FS_PT_CLASSIC (a shadow is then queued), or
 * FS_PT_NONE when passthrough is off. 0, or -ENOMEM. The kernel refuses an inode's classic open while
 * it has a passthrough one, and the reverse: each answer is counted until
 * fs_pt_close (its fh's release, or a reply the kernel never got), and
 * an inode gets a shadow answer only while no classic one is counted.
 * A chunk taken without its bytes (TIER_GET_NOFILL, after fs_pt_ready:
 * no pin either) gets a shadow answer or -EAGAIN, nothing counted: the
 * caller then pins it with its bytes and asks again.
 */
int fs_pt_open(struct fs *fs, uint64_t ino, uint32_t ns,
	       const struct kvfs_key *key, const struct tier_chunk *c,
	       enum fs_pt_mode *mode, int32_t *id);
void fs_pt_close(struct fs *fs, uint64_t ino, enum fs_pt_mode mode);

/* fs_pt_ready - inode ino (publication gen) has a shadow an open would
 * be answered with now: its chunk need not be read into L1 for the open
 * (TIER_GET_NOFILL); fs_pt_open says for sure. */
bool fs_pt_ready(struct fs *fs, uint64_t ino, uint64_t gen);

/* fs_pt_held - tier_config.held_elsewhere (arg: the fs): publication gen
 * of (ns, key) has a shadow its opens are answered with, so readahead
 * need not promote it. Takes only fs_pt.lock (a leaf). */
bool fs_pt_held(void *arg, uint32_t ns, const struct kvfs_key *key,
		uint64_t gen);

/* fs_pt_gone - (ns, key) left the engine (an on_gone event, or an
 * unlink): the shadows of its publications go (at their last release, if
 * later), but the current one's, if it was published again meanwhile. A
 * forgotten inode keeps its shadow: the kernel may look the same
 * publication up again (a revalidating LOOKUP that answers another node
 * than the dentry's makes it forget that node and look the name up anew;
 * drop_caches forgets unused inodes); fs_pt_published lets older versions
 * go, and pt_mem bounds the rest. */
void fs_pt_gone(struct fs *fs, uint32_t ns, const struct kvfs_key *key);

/* fs_pt_reply_open - fuse_reply_open with backing id (FOPEN_PASSTHROUGH). */
int fs_pt_reply_open(struct fuse_req *req, struct fuse_file_info *fi, int32_t id);

void fs_pt_counts(struct fs *fs, struct fs_pt_counts *c);

#endif
