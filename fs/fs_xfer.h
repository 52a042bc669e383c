/*
 * fs_xfer.h - batched transfers (KVFS_IOC_GET, KVFS_IOC_PUT,
 * KVFS_IOC_XFER_REGISTER of include/kvfs.h), the daemon side. fs_ioctl.c
 * checks the argument header (version, size, direction) and forwards the
 * request here; this file replies once.
 */
#ifndef KVFS_FS_XFER_H
#define KVFS_FS_XFER_H

#include "fs/fs_i.h"

struct fs_xfer;

/* fs_xfer_create / fs_xfer_destroy - per-mount state (counters, device
 * buffer registrations). create: 0 or -ENOMEM. */
int fs_xfer_create(struct fs *fs, struct fs_xfer **out);
void fs_xfer_destroy(struct fs_xfer *x);

/*
 * fs_xfer_ioctl - handles ioctl number nr (_IOC_NR of KVFS_IOC_GET,
 * _PUT, their _SMALL forms or _XFER_REGISTER) on the open file fi whose
 * header fs_ioctl.c checked; in_buf holds the caller's struct. Replies to
 * req exactly once; returns 0.
 */
int fs_xfer_ioctl(struct fs *fs, struct fs_xfer *x, fuse_req_t req,
		  struct fuse_file_info *fi, unsigned int nr,
		  const void *in_buf);

/* fs_xfer_release - the open file owner (fi->fh) is closing: closes the
 * device buffer it registered, if any. */
void fs_xfer_release(struct fs_xfer *x, uint64_t owner);

/* fs_xfer_read_caller - copies len bytes at address remote of the process
 * that made req into local, with process_vm_readv under the checks of a
 * PUT (KVFS_IOC_LOOKUP with KVFS_LOOKUP_KEYS_AT). Returns 0, -EFAULT (not
 * readable), -EPERM or -ESRCH (the daemon may not reach the caller, or
 * cannot see its pid), -ENOMEM. */
int fs_xfer_read_caller(fuse_req_t req, void *local, uint64_t remote,
			size_t len);


#endif /* KVFS_FS_XFER_H */
