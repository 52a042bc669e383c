/*
 * fs_wait.c - waiting lookups and GETs, the FUSE side (fs_wait.h): who
 * may wait (bounds per uid and in all), and INTERRUPT.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "fs/fs_wait.h"
#include "tier/tier_wait.h"

struct fs_wait_user {
	uid_t uid;
	uint32_t n;
};

struct fs_wait {
	pthread_mutex_t mu;          /* a leaf */
	uint32_t max, max_uid;       /* (imm) */
	uint32_t n;                  /* mu: waiters now */
	uint32_t nusers;             /* mu: users[0..nusers) have n > 0 */
	struct fs_wait_user *users;  /* mu: max entries */
	uint64_t refused;            /* mu */
	uint32_t *ring;              /* mu: holders per ring (fs_ring_hold),
				      * two per ring: [2c] waits, [2c+1] all;
				      * NULL without rings */
	uint32_t ring_max;           /* (imm) waits per ring */
	uint32_t ring_all_max;       /* (imm) waits and batches per ring */
};

/* rings, at most (a CPU number beyond: no bound) */
#define FS_RING_SLOTS 4096

int fs_wait_create(struct fs *fs, struct fs_wait **out)
{
	struct fs_wait *fw = calloc(1, sizeof(*fw));

	if (!fw)
		return -ENOMEM;
	fw->max = fs->cfg.wait_max ? fs->cfg.wait_max : FS_WAIT_MAX_DEFAULT;
	fw->max_uid = fs->cfg.wait_max_uid ? fs->cfg.wait_max_uid
					   : FS_WAIT_MAX_UID_DEFAULT;
	fw->users = calloc(fw->max, sizeof(*fw->users));
	if (!fw->users) {
		free(fw);
		return -ENOMEM;
	}
	if (fs->cfg.ring_cpu && fs->cfg.ring_hold_max) {
		fw->ring = calloc(2 * FS_RING_SLOTS, sizeof(*fw->ring));
		if (!fw->ring) {
			free(fw->users);
			free(fw);
			return -ENOMEM;
		}
		fw->ring_max = fs->cfg.ring_hold_max;
		/* batches past the waits' half, to three quarters: a PUT that
		 * would end the waits is never refused for them */
		fw->ring_all_max = fs->cfg.ring_hold_max +
				   (fs->cfg.ring_hold_max + 1) / 2;
	}
	pthread_mutex_init(&fw->mu, NULL);
	*out = fw;
	return 0;
}

int fs_ring_hold(struct fs *fs, bool wait)
{
	struct fs_wait *fw = fs->wait;
	int cpu = fw && fw->ring ? fs->cfg.ring_cpu() : -1;
	uint32_t *w, *all;
	int rc;

	if (cpu < 0 || cpu >= FS_RING_SLOTS)
		return -1;
	w = &fw->ring[2 * cpu];
	all = w + 1;
	pthread_mutex_lock(&fw->mu);
	if (*all < fw->ring_all_max && (!wait || *w < fw->ring_max)) {
		++*all;
		*w += wait;
		/* the place: ring * 2 + 1 for a wait */
		rc = 2 * cpu + wait;
	} else {
		rc = -EAGAIN; /* the caller counts it */
	}
	pthread_mutex_unlock(&fw->mu);
	return rc;
}

void fs_ring_release(struct fs *fs, int place)
{
	struct fs_wait *fw = fs->wait;
	int cpu = place / 2;

	if (place < 0 || !fw || !fw->ring)
		return;
	pthread_mutex_lock(&fw->mu);
	fw->ring[2 * cpu + 1]--;
	fw->ring[2 * cpu] -= (uint32_t)(place & 1);
	pthread_mutex_unlock(&fw->mu);
}

void fs_wait_destroy(struct fs_wait *fw)
{
	if (!fw)
		return;
	pthread_mutex_destroy(&fw->mu);
	free(fw->ring);
	free(fw->users);
	free(fw);
}

void fs_wait_counts(struct fs_wait *fw, struct fs_wait_counts *c)
{
	memset(c, 0, sizeof(*c));
	if (!fw)
		return;
	pthread_mutex_lock(&fw->mu);
	c->refused = fw->refused;
	pthread_mutex_unlock(&fw->mu);
}

/* A waiter's place for uid, or false past a bound (counted). */
static bool take(struct fs_wait *fw, uid_t uid)
{
	uint32_t i;
	bool ok = false;

	pthread_mutex_lock(&fw->mu);
	for (i = 0; i < fw->nusers && fw->users[i].uid != uid; i++)
		;
	if (fw->n < fw->max &&
	    (i == fw->nusers || fw->users[i].n < fw->max_uid)) {
		if (i == fw->nusers) {
			/* nusers <= n < max: room for one more user */
			fw->users[fw->nusers].uid = uid;
			fw->users[fw->nusers++].n = 0;
		}
		fw->users[i].n++;
		fw->n++;
		ok = true;
	} else {
		fw->refused++;
	}
	pthread_mutex_unlock(&fw->mu);
	return ok;
}

static void give(struct fs_wait *fw, uid_t uid)
{
	uint32_t i;

	pthread_mutex_lock(&fw->mu);
	for (i = 0; i < fw->nusers && fw->users[i].uid != uid; i++)
		;
	if (i < fw->nusers) {
		fw->n--;
		if (--fw->users[i].n == 0)
			fw->users[i] = fw->users[--fw->nusers];
	}
	pthread_mutex_unlock(&fw->mu);
}

struct intr_ctx {
	struct tier *t;
	struct tier_waiter *w;
};

/* libfuse calls it (under the request's lock) when the kernel sends
 * INTERRUPT for req, or at once if that came already. */
static void on_interrupt(fuse_req_t req, void *data)
{
	struct intr_ctx *c = data;

	(void)req;
	tier_wait_interrupt(c->t, c->w);
}

/* The daemon is stopping (SIGTERM...): libfuse's loop then waits for
 * every worker, and cannot cancel one that is handling a request. */
static bool session_exited(void *arg)
{
	return arg && fuse_session_exited(arg);
}

/*
 * keys[0..nkeys) as the caller of req may wait for them: in a path
 * namespace, the chain up to the first file the caller may not reach
 * (fs_path_reach: below a directory it may not search), then a key
 * nobody publishes, so that the wait for a hidden file lasts as long as
 * for an absent one (and a caller past its waiter bound gets EAGAIN for
 * both): how long a wait takes must not tell the file is there. NULL
 * (keys as they are) or a malloc'd chain of *n keys (-ENOMEM in *err).
 */
static struct kvfs_key *reachable_chain(struct fs *fs, fuse_req_t req,
					uint32_t ns,
					const struct kvfs_key *keys,
					uint32_t *n, int *err)
{
	struct kvfs_key *chain;
	struct fs_cred c;
	uint32_t p;

	*err = 0;
	if (!fuse_req_ctx(req) || !fs_path_ns(fs, ns))
		return NULL;
	fs_cred_of_caller(req, &c);
	p = fs_path_reach(fs, ns, keys, *n, &c, 0, NULL);
	if (p == *n)
		return NULL;
	chain = malloc(((size_t)p + 1) * sizeof(*chain));
	if (!chain) {
		*err = -ENOMEM;
		return NULL;
	}
	memcpy(chain, keys, (size_t)p * sizeof(*chain));
	/* 128 random bits: no chunk has that key */
	if (getrandom(&chain[p], sizeof(chain[p]), 0) !=
	    (ssize_t)sizeof(chain[p]))
		for (size_t i = 0; i < sizeof(chain[p].b); i++)
			chain[p].b[i] = (uint8_t)(rand() >> 7);
	*n = p + 1;
	return chain;
}

int fs_wait_chain(struct fs *fs, fuse_req_t req, uint32_t ns,
		  const struct kvfs_key *keys, uint32_t nkeys,
		  uint32_t depth_base, uint32_t timeout_ms, uint32_t *found)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	uid_t uid = ctx ? ctx->uid : (uid_t)-1;
	struct kvfs_key *chain;
	struct tier_waiter w;
	struct intr_ctx ic;
	uint64_t deadline;
	int rc, ring;

	deadline = tier_now_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	chain = reachable_chain(fs, req, ns, keys, &nkeys, &rc);
	if (rc)
		return rc;
	if (chain)
		keys = chain;
	ring = fs_ring_hold(fs, true);
	if (ring == -EAGAIN) {
		pthread_mutex_lock(&fs->wait->mu);
		fs->wait->refused++;
		pthread_mutex_unlock(&fs->wait->mu);
	}
	if (ring == -EAGAIN || !take(fs->wait, uid)) {
		fs_ring_release(fs, ring);
		/* past a bound: a complete chain is still an answer */
		rc = tier_lookup(fs->tier, ns, keys, nkeys, depth_base, false,
				 false, found, NULL, NULL);
		if (rc == 0 && *found < nkeys)
			rc = -EAGAIN;
		free(chain);
		return rc;
	}
	tier_waiter_init(&w);
	w.stop = session_exited;
	w.stop_arg = fs->se;
	ic.t = fs->tier;
	ic.w = &w;
	fuse_req_interrupt_func(req, on_interrupt, &ic);
	rc = tier_wait_chain(fs->tier, &w, ns, keys, nkeys, depth_base,
			     deadline, found);
	/* after this no on_interrupt runs or will run (libfuse takes the
	 * request's lock for both) */
	fuse_req_interrupt_func(req, NULL, NULL);
	tier_waiter_fini(&w);
	give(fs->wait, uid);
	fs_ring_release(fs, ring);
	free(chain);
	return rc;
}
