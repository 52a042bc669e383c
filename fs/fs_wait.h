/*
 * fs_wait.h - waiting lookups and GETs (KVFS_LOOKUP_WAIT, KVFS_XFER_WAIT
 * of include/kvfs.h), the FUSE side: bounds on waiters per caller uid and
 * in all (mount options wait_max, wait_max_uid), and FUSE INTERRUPT ->
 * the end of the wait with EINTR. The sleeping itself is the engine's
 * (tier/tier_wait.h).
 *
 * A waiting request occupies a FUSE worker thread while it sleeps:
 * kvfs-mount runs fs_workers() + wait_max workers, so waiters never
 * take the workers every other request needs (and INTERRUPT, which
 * another worker delivers, always finds one). With FUSE over io_uring a
 * request stays on its caller's CPU's ring: there, at most half of a
 * ring's entries wait or transfer at once (fs_ring_hold).
 */
#ifndef KVFS_FS_WAIT_H
#define KVFS_FS_WAIT_H

#include "fs/fs_i.h"

struct fs_wait;

/* Counters (kvfs(7) COUNTERS): waits refused past a bound (EAGAIN). */
struct fs_wait_counts {
	uint64_t refused;
};

int fs_wait_create(struct fs *fs, struct fs_wait **out);
void fs_wait_destroy(struct fs_wait *fw);
void fs_wait_counts(struct fs_wait *fw, struct fs_wait_counts *c);

/*
 * fs_wait_chain - for request req: waits (at most timeout_ms) until
 * keys[0..nkeys) of namespace ns are present, as tier_wait_chain. The
 * caller checked the caller's right to read ns. Nothing is pinned. In a
 * path namespace a file the caller may not reach (fs_path_reach) is
 * waited for as an absent one: the chain is never complete past it.
 * Returns 0 (*found: the leading run present; nkeys when complete),
 * -EINTR (FUSE INTERRUPT: the caller got a signal), -EAGAIN (the chain is
 * incomplete and the caller's uid, or the mount, has as many waiters as
 * it allows; nothing waited), -ENOENT (namespace removed).
 */
int fs_wait_chain(struct fs *fs, fuse_req_t req, uint32_t ns,
		  const struct kvfs_key *keys, uint32_t nkeys,
		  uint32_t depth_base, uint32_t timeout_ms, uint32_t *found);

/*
 * fs_ring_hold - before a request that may hold its FUSE ring entry long
 * (wait: a waiting lookup or GET; else a batched transfer): takes a place
 * on the calling thread's ring (fs_config ring_cpu). Waits may hold
 * ring_hold_max entries of a ring, waits and batches together half as
 * many again: a batch that would end the waits (a PUT of what they wait
 * for) still finds a place. Returns the place (>= 0), -1 when no bound
 * applies (/dev/fuse, or no rings), -EAGAIN past the bound (the caller
 * counts it: wait.refused, ioctl.xfer.busy). fs_ring_release gives back
 * what fs_ring_hold returned (< 0: nothing).
 */
int fs_ring_hold(struct fs *fs, bool wait);
void fs_ring_release(struct fs *fs, int place);

#endif /* KVFS_FS_WAIT_H */
