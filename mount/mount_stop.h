/*
 * mount_stop.h - how kvfs-mount stops on SIGTERM, SIGINT or SIGHUP
 * (mount_stop.c), in place of libfuse's fuse_set_signal_handlers.
 *
 * The daemon's background thread (fs_inval.c) sends the kernel entry
 * invalidations, and an invalidation waits, uninterruptibly, for its
 * directory's lock, which a client's create or lookup holds until this
 * daemon answers it. libfuse's handler ends the session at once: the
 * serving threads stop reading requests, a create caught in flight is
 * never answered, the background thread (or a close of a path file
 * invalidating its name, fs/paths/fs_psuper.c) waits for its lock for
 * ever, and the daemon, joining it, never exits (with every process that
 * touches the mount stuck too). So a stop signal here wakes a thread of
 * its own that first quiesces the filesystem (fs_quiesce) while requests
 * are still served (by the loop's workers or the rings), and only then
 * ends the session and wakes the loop.
 */
#ifndef KVFS_MOUNT_STOP_H
#define KVFS_MOUNT_STOP_H

#include <stdbool.h>
#include <sys/types.h>

struct fs;
struct fuse_session;
struct mount_stop;

/*
 * mount_stop_install - the stop signals' handler (each one not left
 * ignored by the parent) and the thread that acts on them. dev: the FUSE
 * connection's device (mount_dead_find), aborted where quiescing does not
 * end; 0 if unknown. Call from the thread that will run the session loop
 * (the one woken at a stop), after fs_start, with the stop signals
 * blocked (the stop thread keeps them blocked). 0 or -errno; *out is NULL
 * on failure.
 */
int mount_stop_install(struct fuse_session *se, struct fs *fs, dev_t dev,
		       struct mount_stop **out);

/*
 * mount_stop_settle - the loop returned: waits for a stop in progress
 * (its fs_stop) and ends the stop thread; a later stop signal does
 * nothing more. Call before the transport's threads stop and before
 * fs_stop. NULL-safe, idempotent.
 */
void mount_stop_settle(struct mount_stop *ms);

/* mount_stop_requested - whether a stop signal was acted on (it told
 * systemd STOPPING=1 then). NULL-safe. */
bool mount_stop_requested(struct mount_stop *ms);

/* mount_stop_aborted - whether the stop had to abort the FUSE connection
 * (callers' requests failed: kvfs-mount exits 1). NULL-safe. */
bool mount_stop_aborted(struct mount_stop *ms);

/* mount_stop_ready - tells systemd READY=1 (STATUS=serving mnt) unless a
 * stop began: false then, and nothing is sent (a stop's STOPPING=1 never
 * comes before READY=1). NULL-safe (no stop thread: sends). */
bool mount_stop_ready(struct mount_stop *ms, const char *mnt);

/* mount_stop_remove - settles, then gives the signals their earlier
 * handlers back and frees ms. Call last (a second stop signal during the
 * teardown, an L2 flush, does nothing until then). NULL-safe. */
void mount_stop_remove(struct mount_stop *ms);

#endif
