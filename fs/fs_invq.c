/*
 * fs_invq.c - the queue of kernel invalidations: chunks the engine let go
 * of (its on_gone callback) or just published, pushed by any thread under
 * qlock alone; fs_inval.c's background thread sends them to the kernel.
 * Calls no file of fs/.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_i.h"

/* Queues a kernel invalidation of (ns, key) for the background thread. */
void fs_queue_inval(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		    bool published)
{
	struct fs_priv *p = fs->priv;

	pthread_mutex_lock(&p->qlock);
	if (!p->stop) {
		if (p->qlen == p->qcap) {
			size_t cap = p->qcap ? p->qcap * 2 : 256;
			struct fs_gone *q = realloc(p->q, cap * sizeof(*q));

			if (q) {
				p->q = q;
				p->qcap = cap;
			}
		}
		/* without memory the entry just times out (FS_TTL) */
		if (p->qlen < p->qcap) {
			p->q[p->qlen].ns = ns;
			p->q[p->qlen].published = published;
			p->q[p->qlen].key = *key;
			p->qlen++;
			pthread_cond_signal(&p->qcond);
		}
	}
	pthread_mutex_unlock(&p->qlock);
}

/* Called by the engine, maybe inside one of our tier_* calls: queue only. */
void fs_on_gone(void *arg, uint32_t ns, const struct kvfs_key *key,
		enum tier_gone_reason why)
{
	fs_queue_inval(arg, ns, key, false);
}
