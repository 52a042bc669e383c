/*
 * mount_uring.h - FUSE requests over io_uring (mount option fuse_uring;
 * kernels 6.14 and later with the fuse module's enable_uring set), written
 * here because libfuse 3.14 has no io_uring transport (mount_uring.c).
 *
 * Why: the kernel queues each request on the ring of the CPU its caller
 * runs on, and kvfs-mount serves each CPU's ring with threads pinned to
 * that CPU, so a request and its reply are two wake-ups on one CPU
 * instead of two across CPUs. Where a cross-CPU wake-up is dear (a VM
 * without guest halt polling: 20-30 us each, docs/time.md "Round trips
 * on one CPU"), that is most of what a small read or a metadata call
 * costs through FUSE.
 *
 * How: libfuse still parses every request and runs the same handlers
 * (fuse_session_process_buf); its replies go through a custom io
 * (fuse_session_custom_io) that writes a ring request's reply into the
 * ring entry and every other message (classic requests, notifications)
 * to /dev/fuse as before. INIT, FORGET and INTERRUPT stay on /dev/fuse.
 */
#ifndef KVFS_MOUNT_URING_H
#define KVFS_MOUNT_URING_H

#include <stdbool.h>
#include <stdint.h>

#include "fs/fs.h"

struct fuse_session;

enum mount_uring_mode {
	MOUNT_URING_OFF,  /* classic /dev/fuse only */
	MOUNT_URING_AUTO, /* the ring when the kernel offers it (default) */
	MOUNT_URING_ON,   /* the ring, enable_uring set if it is not; the
			   * mount fails where the kernel's fuse has no
			   * io_uring (a ring the kernel then refuses at
			   * REGISTER is logged, /dev/fuse serves) */
};

/*
 * mount_uring_prepare - before fuse_session_mount: for MOUNT_URING_ON,
 * sets /sys/module/fuse/parameters/enable_uring when it is not (root).
 * Returns 0, or -errno (ENOTSUP: no io_uring support in this kernel's
 * fuse; EACCES/EPERM: not allowed to set it).
 */
int mount_uring_prepare(enum mount_uring_mode mode);

/*
 * mount_uring_install - after fuse_session_mount, before the session loop:
 * routes se's messages through the custom io, which negotiates the ring
 * at INIT when the kernel offers it and mode is not OFF, and FUSE
 * passthrough when passthrough (cache=passthrough: fs/fs_pt.h). per_cpu:
 * threads (ring entries) per online CPU's ring. Returns 0 or -errno.
 */
int mount_uring_install(struct fuse_session *se, enum mount_uring_mode mode,
			unsigned per_cpu, bool passthrough);

/* mount_uring_stop - after the session loop returned: stops and joins the
 * ring threads (each finishes the request it serves first). */
void mount_uring_stop(void);

/* mount_uring_cpu - the ring (CPU) whose request the calling thread
 * serves, or -1 (/dev/fuse, or another thread): fs_config's ring_cpu. */
int mount_uring_cpu(void);

/* mount_uring_counts - struct fs_uring_counts (fs/fs.h; zeros while
 * /dev/fuse alone serves): the fs_config's uring_counts. */
void mount_uring_counts(struct fs_uring_counts *c);

#endif
