/*
 * fs_inval.c - the background thread: it takes the chunks fs_invq.c
 * queued (the engine let go of them, or just published them), sends the
 * kernel's notify_delete (or notify_inval_entry) and notify_inval_inode
 * for them, and expires abandoned temporaries; its start and stop
 * (fs_start, fs_stop), and the quiescing a stop begins with (fs_quiesce).
 *
 * An entry invalidation (notify_delete, notify_inval_entry) takes the
 * parent directory's lock in the kernel, uninterruptibly; a client's
 * create, unlink, rename or lookup holds that lock while it waits for this
 * daemon's reply. So the notifications go from this thread, which serves
 * no request (the serving threads answer, the lock is released, the
 * notification proceeds), and only where the kernel can hold the name: a
 * chunk inode it looked up, or a key just published (the writer's create
 * left its entry). But a daemon SIGKILLed while this thread waits
 * there cannot exit (the thread holds /dev/fuse open, so the kernel never
 * aborts the connection, so the client never gets its reply): the
 * watchdog of kvfs-mount (mount/mount_dead.c) aborts the connection then.
 * For the same reason a clean stop quiesces (fs_quiesce, which stops this
 * thread) while requests are still served (mount/mount_stop.c), not after
 * the loop returned.
 */
#include <errno.h>
#include <linux/fuse.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "fs/fs_i.h"
#include "fs/fs_pt.h"

#ifndef FUSE_EXPIRE_ONLY
#define FUSE_EXPIRE_ONLY (1 << 0)
#endif

int fs_expire_entry(struct fs *fs, uint64_t parent, const char *name,
		    size_t len)
{
	/* struct fuse_notify_inval_entry_out, whose flags older headers
	 * call padding */
	struct {
		uint64_t parent;
		uint32_t namelen;
		uint32_t flags;
	} arg = { parent, (uint32_t)len, FUSE_EXPIRE_ONLY };
	struct fuse_out_header out;
	struct iovec iov[3];

	if (!fs->se)
		return -ENOTCONN;
	out.unique = 0; /* a notification */
	out.error = FUSE_NOTIFY_INVAL_ENTRY;
	out.len = (uint32_t)(sizeof(out) + sizeof(arg) + len + 1);
	iov[0] = (struct iovec){ &out, sizeof(out) };
	iov[1] = (struct iovec){ &arg, sizeof(arg) };
	iov[2] = (struct iovec){ (void *)name, len + 1 }; /* and its NUL */
	if (writev(fuse_session_fd(fs->se), iov, 3) >= 0)
		return 0;
	if (errno == EINVAL) /* a kernel that refuses the flag: dropped */
		return fuse_lowlevel_notify_inval_entry(fs->se, parent, name,
							len);
	return -errno;
}

static void invalidate(struct fs *fs, const struct fs_gone *g)
{
	struct fs_priv *p = fs->priv;
	char hex[KVFS_KEY_HEX_LEN + 1];
	struct fs_inode *nsi, *in;
	uint64_t nsino = 0, ino = 0;
	bool keyns;

	if (!g->published) {
		fs_path_gone(fs, g->ns, &g->key); /* a path file vanishes */
		fs_pt_gone(fs, g->ns, &g->key);   /* its shadows */
	} else
		fs_path_published(fs, g->ns, &g->key); /* its name's entry */
	pthread_mutex_lock(&p->lock);
	nsi = fs_ns_find(p, g->ns);
	if (nsi)
		nsino = nsi->ino;
	keyns = nsi && !nsi->pdir;
	in = g->published ? NULL : fs_chunk_find(p, g->ns, &g->key);
	if (in)
		ino = in->ino;
	pthread_mutex_unlock(&p->lock);
	kvfs_key_hex(&g->key, hex);
	/* A key just published: the kernel's entry of its name, left by the
	 * writer's create, points at the writer's inode; a reader's open
	 * would revalidate it (a LOOKUP that answers another inode) and
	 * then look it up again. Dropped here, off the writer's path, the
	 * first read costs one LOOKUP. (Path files keep their inode across
	 * publication: fs_path_published above.) */
	if (g->published && keyns) {
		fuse_lowlevel_notify_inval_entry(fs->se, nsino, hex,
						 KVFS_KEY_HEX_LEN);
		__atomic_add_fetch(&p->invalidations, 1, __ATOMIC_RELAXED);
		return;
	}
	/* Nothing else where the kernel cannot hold the name: a chunk it
	 * never looked up. Each such notification would only take the
	 * directory's lock (above). */
	if (!ino)
		return;
	/* A chunk that left the engine, with a name the kernel knows: a
	 * delete notification, so inotify watchers see IN_DELETE as for an
	 * unlink. Where the kernel refuses it (no such dentry, or a kernel
	 * without it), a plain invalidation. */
	if (nsino &&
	    fuse_lowlevel_notify_delete(fs->se, nsino, ino, hex,
					KVFS_KEY_HEX_LEN) == 0)
		nsino = 0;
	if (nsino)
		fuse_lowlevel_notify_inval_entry(fs->se, nsino, hex,
						 KVFS_KEY_HEX_LEN);
	fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
	__atomic_add_fetch(&p->invalidations, 1, __ATOMIC_RELAXED);
}

/* The background thread: kernel invalidations for chunks the engine let go
 * of, and expiry of abandoned temporaries. */
static void *bg_main(void *arg)
{
	struct fs *fs = arg;
	struct fs_priv *p = fs->priv;
	struct fs_gone *batch = NULL;
	size_t cap = 0;
	uint64_t last_sweep = fs_now_ms();

	pthread_mutex_lock(&p->qlock);
	while (!p->stop) {
		size_t n;

		if (!p->qlen) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 250 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&p->qcond, &p->qlock, &ts);
		}
		n = p->qlen;
		if (n > cap) {
			struct fs_gone *b = realloc(batch, n * sizeof(*b));

			if (b) {
				batch = b;
				cap = n;
			} else {
				n = cap;
			}
		}
		if (n) {
			memcpy(batch, p->q, n * sizeof(*batch));
			memmove(p->q, p->q + n,
				(p->qlen - n) * sizeof(*batch));
			p->qlen -= n;
		}
		pthread_mutex_unlock(&p->qlock);
		for (size_t i = 0; i < n; i++)
			invalidate(fs, &batch[i]);
		if (fs_now_ms() - last_sweep >= 250) {
			fs_tmp_expire(fs);
			fs_path_tick(fs);
			last_sweep = fs_now_ms();
		}
		pthread_mutex_lock(&p->qlock);
	}
	p->bg_done = true;
	pthread_mutex_unlock(&p->qlock);
	free(batch);
	return NULL;
}

int fs_start(struct fs *fs, struct fuse_session *se)
{
	struct fs_priv *p = fs->priv;
	int r;

	fs->se = se;
	r = fs_pt_start(fs);
	if (r)
		return r;
	r = pthread_create(&p->thread, NULL, bg_main, fs);
	if (r)
		return -r;
	p->thread_started = true;
	return 0;
}

int fs_quiesce(struct fs *fs, unsigned timeout_ms)
{
	struct fs_priv *p = fs->priv;
	const struct timespec nap = { 0, 1000000 };
	uint64_t end = fs_now_ms() + timeout_ms;
	unsigned busy;
	bool done;

	for (;;) { /* closes invalidating their names' entries (fs_psuper) */
		pthread_mutex_lock(&p->lock);
		busy = fs_path_quiesce_locked(fs);
		pthread_mutex_unlock(&p->lock);
		if (!busy || fs_now_ms() >= end)
			break;
		nanosleep(&nap, NULL);
	}
	pthread_mutex_lock(&p->qlock);
	p->stop = true;
	pthread_cond_signal(&p->qcond);
	pthread_mutex_unlock(&p->qlock);
	for (;;) {
		pthread_mutex_lock(&p->qlock);
		done = !p->thread_started || p->bg_done;
		pthread_mutex_unlock(&p->qlock);
		if (done || fs_now_ms() >= end)
			break;
		nanosleep(&nap, NULL);
	}
	if (!done || busy)
		return -ETIMEDOUT;
	fs_stop(fs); /* (the thread has returned: the join is at once) */
	return 0;
}

void fs_stop(struct fs *fs)
{
	struct fs_priv *p = fs->priv;

	pthread_mutex_lock(&p->qlock);
	p->stop = true;
	pthread_cond_signal(&p->qcond);
	pthread_mutex_unlock(&p->qlock);
	if (p->thread_started) {
		pthread_join(p->thread, NULL);
		p->thread_started = false;
	}
	fs_pt_stop(fs);
}
