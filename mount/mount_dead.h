/*
 * mount_dead.h - dead kvfs mounts: finding a mount's FUSE connection,
 * aborting it, recovering a mount point whose daemon died, and the
 * watchdog that aborts the connection of a daemon killed while one of its
 * threads is stuck in the kernel (mount_dead.c).
 */
#ifndef KVFS_MOUNT_DEAD_H
#define KVFS_MOUNT_DEAD_H

#include <stdbool.h>
#include <sys/types.h>

/* mount_dead_find - whether dir (a full path) is the mount point of a
 * kvfs (fstype fuse.kvfs, the last one mounted there), with its device
 * (the FUSE connection's number is its minor) in *dev when found. */
bool mount_dead_find(const char *dir, dev_t *dev);

/* mount_conn_abort - writes 1 to /sys/fs/fuse/connections/N/abort for
 * the connection of dev (mounting fusectl there first if it is not):
 * every request waiting on it fails with ENOTCONN, and a daemon thread
 * stuck in the kernel on it is released. 0 or -errno. */
int mount_conn_abort(dev_t dev);

/*
 * mount_dead_recover - path (as the user gave it) could not be resolved
 * because its mount is dead (ENOTCONN): when it is a kvfs mount, aborts
 * its connection, detaches it (a lazy unmount) and says so on stderr.
 * Returns 0 when the mount point is usable again, -errno otherwise
 * (-ENOENT: not a kvfs mount; nothing was touched).
 */
int mount_dead_recover(const char *prog, const char *path);

/*
 * The watchdog: a small process forked before the daemon starts threads
 * or opens /dev/fuse, holding no descriptor but its pipe (and stderr, for
 * its one log line, also sent to syslog). A daemon thread
 * killed in a kernel invalidation that waits on a directory lock held by
 * a request only the daemon could answer keeps the daemon's /dev/fuse
 * open, so the kernel never aborts the connection: the daemon can never
 * exit, and every process touching the mount hangs. When the daemon's
 * main thread dies (PR_SET_PDEATHSIG) without having said goodbye, and
 * the rest of it has not gone within a second, the watchdog aborts the
 * connection, which releases the stuck thread; then it exits.
 *
 * mount_watchdog_start - forks it (call with no other thread running);
 * 0 or -errno (then the daemon runs without one).
 * mount_watchdog_conn - tells it the mount's device once mounted.
 * mount_watchdog_stop - a clean exit: the watchdog leaves at once.
 */
int mount_watchdog_start(bool keep_stderr);
void mount_watchdog_conn(dev_t dev);
void mount_watchdog_stop(void);

#endif /* KVFS_MOUNT_DEAD_H */
