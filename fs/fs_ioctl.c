/*
 * fs_ioctl.c - the daemon side of the ioctls of include/kvfs.h: batched
 * lookup, group lookup, unpin, chunk handles. fs.c forwards the FUSE ioctl
 * callback here (restricted ioctls: the kernel copies _IOC_SIZE(cmd) bytes
 * in and out, so in_buf holds the caller's struct).
 *
 * Leases live in tier/lease.c; this file checks the arguments, the fd kind
 * and the caller's right to read each namespace, calls the engine, and
 * replies once. Errors come back as the ioctl's errno (fuse_reply_err), or
 * for a group with missing namespaces as a negative ioctl result WITH the
 * struct copied out, so the caller sees missing[].
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/fs_i.h"
#include "fs/fs_wait.h"
#include "fs/fs_xfer.h"
#include "tier/lease.h"

struct fs_ioctl_state {
	struct lease_table *leases;
	struct fs_xfer *xfer; /* batched GET/PUT: fs_xfer.c */
	/* counters, updated with atomics (no lock) */
	uint64_t lookups, group_lookups, keys, prefetches, handles, errors;
	/* what lookups told the engine: keys of the run found, by tier
	 * (enum tier_from), and keys past it */
	uint64_t lookup_hits[TIER_FROM_N], lookup_misses;
};

static void count(uint64_t *c, uint64_t n)
{
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

/* One namespace's answer: found of nkeys, the first l1 + l2 of the run
 * local (capped at found: a group's common run may be shorter than the
 * rank's own), the rest from L3. */
static void count_lookup(struct fs_ioctl_state *st, uint32_t nkeys,
			 uint32_t found, uint32_t l1, uint32_t l2)
{
	l1 = l1 < found ? l1 : found;
	l2 = l2 < found - l1 ? l2 : found - l1;
	count(&st->lookup_hits[TIER_FROM_L1], l1);
	count(&st->lookup_hits[TIER_FROM_L2], l2);
	count(&st->lookup_hits[TIER_FROM_L3], found - l1 - l2);
	count(&st->lookup_misses, nkeys - found);
}

static int reply_err(struct fs *fs, fuse_req_t req, const char *what, int err)
{
	struct fs_ioctl_state *st = fs->ioctl_state;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	count(&st->errors, 1);
	/* A miss, an expired lease, a wait ended by a signal or refused
	 * past its bound are routine; bad input is worth a line
	 * (the daemon's log, rate-limited there: a retry loop of bad calls
	 * is a few lines and a count) */
	if (err != ENOENT && err != EINTR && err != EAGAIN)
		fs_log(fs, "ioctl %s from pid %d: %s", what,
		       ctx ? (int)ctx->pid : -1, strerror(err));
	fuse_reply_err(req, err);
	return 0;
}

/* The argument header every ioctl struct starts with. */
struct ioc_head {
	uint32_t version;
	uint32_t size;
};

/* Version and size of the struct in in_buf; -EINVAL on any mismatch. */
static int check_head(const void *in_buf, size_t in_bufsz, size_t out_bufsz,
		      size_t want)
{
	struct ioc_head h;

	if (!in_buf || in_bufsz != want || out_bufsz != want)
		return -EINVAL;
	memcpy(&h, in_buf, sizeof(h));
	if (h.version != KVFS_ABI_VERSION || h.size != want)
		return -EINVAL;
	return 0;
}

/* ----------------------------------------------------------- lookup */

/*
 * The leading run of keys[0..nkeys) in namespace ns, KVFS_LOOKUP_MAX keys
 * per engine call, in order, as that many ioctls would (a chain given by
 * address is as long as KVFS_LOOKUP_AT_MAX: each part holds tier.lock
 * alone and is one access time for the policy); stops at the first part
 * found short. With gens (PIN) gens[0..*found) are the pins' generations;
 * on an error nothing stays pinned.
 */
static int lookup_parts(struct fs *fs, uint32_t ns,
			const struct kvfs_key *keys, uint32_t nkeys,
			uint32_t depth_base, bool prefetch, uint64_t *gens,
			uint32_t *found, uint32_t *in_l1, uint32_t *in_l2)
{
	uint32_t off = 0, f = 0, l1, l2;
	int rc = 0;

	*found = *in_l1 = *in_l2 = 0;
	while (off < nkeys && rc == 0) {
		uint32_t n = nkeys - off < KVFS_LOOKUP_MAX ?
			     nkeys - off : KVFS_LOOKUP_MAX;

		if (gens)
			rc = tier_lookup_pinned(fs->tier, ns, keys + off, n,
						depth_base + off, prefetch,
						gens + off, &f, &l1, &l2);
		else
			rc = tier_lookup(fs->tier, ns, keys + off, n,
					 depth_base + off, false, prefetch,
					 &f, &l1, &l2);
		if (rc)
			break;
		*found += f;
		*in_l1 += l1;
		*in_l2 += l2;
		if (f < n)
			break;
		off += n;
	}
	if (rc && gens) /* the earlier parts' pins: nobody owns them */
		for (uint32_t i = 0; i < *found; i++)
			tier_unpin_gen(fs->tier, ns, &keys[i], gens[i]);
	return rc;
}

static int do_lookup(struct fs *fs, fuse_req_t req, struct fs_fh *fh,
		     uint64_t owner, const void *in_buf)
{
	struct fs_ioctl_state *st = fs->ioctl_state;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct kvfs_lookup *lk;
	struct kvfs_key *keys, *keys_at = NULL;
	struct lease_pin *pins = NULL;
	uint32_t found = 0, in_l1 = 0, in_l2 = 0, nkeys;
	uint64_t *gens = NULL;
	bool pin;
	int rc;

	if (fh->kind != FS_FH_NS)
		return reply_err(fs, req, "LOOKUP", ENOTTY);
	lk = malloc(sizeof(*lk));
	if (!lk)
		return reply_err(fs, req, "LOOKUP", ENOMEM);
	memcpy(lk, in_buf, sizeof(*lk));
	rc = fs_ns_access(fs, req, fh->ns, R_OK);
	if (rc)
		goto out;
	keys = lk->keys;
	if (lk->flags & KVFS_LOOKUP_KEYS_AT) {
		/* the chain in the caller's memory (fs_ioctl_check bounded
		 * nkeys): one round trip for 1,024 keys or more */
		keys_at = malloc((size_t)lk->nkeys * sizeof(*keys_at));
		rc = keys_at ? fs_xfer_read_caller(req, keys_at, lk->keys_at,
						   (size_t)lk->nkeys *
						   sizeof(*keys_at)) : -ENOMEM;
		if (rc)
			goto out;
		keys = keys_at;
	}
	/* wait first, pinning nothing; then the lookup as asked, which
	 * pins what is there now (the normal lease pins) */
	if ((lk->flags & KVFS_LOOKUP_WAIT) && KVFS_WAIT_MS_OF(lk->flags)) {
		rc = fs_wait_chain(fs, req, fh->ns, keys, lk->nkeys,
				   lk->depth_base, KVFS_WAIT_MS_OF(lk->flags),
				   &found);
		if (rc)
			goto out;
	}
	/* a path namespace: the run stops at the first file whose name the
	 * caller could not stat (fs_path_reach), as if it were absent */
	nkeys = lk->nkeys;
	if (fs_path_ns(fs, fh->ns)) {
		struct fs_cred c;

		fs_cred_of_caller(req, &c);
		nkeys = fs_path_reach(fs, fh->ns, keys, nkeys, &c, 0, NULL);
	}
	pin = lk->flags & KVFS_LOOKUP_PIN;
	if (pin) {
		/* each pin remembers its generation (see tier_unpin_gen) */
		gens = malloc(lk->nkeys * sizeof(*gens));
		if (!gens) {
			rc = -ENOMEM;
			goto out;
		}
	}
	rc = lookup_parts(fs, fh->ns, keys, nkeys, lk->depth_base,
			  lk->flags & KVFS_LOOKUP_PREFETCH, gens, &found,
			  &in_l1, &in_l2);
	if (rc)
		goto out;
	count(&st->lookups, 1);
	count(&st->keys, lk->nkeys);
	count_lookup(st, lk->nkeys, found, in_l1, in_l2);
	if (lk->flags & KVFS_LOOKUP_PREFETCH)
		count(&st->prefetches, 1);
	lk->lease_id = 0;
	if (pin && found) {
		pins = malloc(found * sizeof(*pins));
		rc = pins ? 0 : -ENOMEM;
		for (uint32_t i = 0; pins && i < found; i++) {
			pins[i].ns = fh->ns;
			pins[i].key = keys[i];
			pins[i].gen = gens[i];
		}
		/* non-root callers get at most the mount's lease_ms */
		lk->lease_ms = lease_grant_ms(st->leases, ctx->uid,
					      lk->lease_ms);
		if (!rc)
			rc = lease_add(st->leases, owner, ctx->uid, lk->lease_ms,
				       pins, found, &lk->lease_id);
		if (rc) {
			/* Nobody owns the pins: give them back now. */
			for (uint32_t i = 0; i < found; i++)
				tier_unpin_gen(fs->tier, fh->ns, &keys[i],
					       gens[i]);
			goto out;
		}
	}
	lk->found = found;
	lk->in_l1 = in_l1;
	lk->in_l2 = in_l2;
	lk->in_l3 = found - in_l1 - in_l2; /* the run found in L3 */
	/* The keys did not change: copy back only the header. */
	fuse_reply_ioctl(req, 0, lk, offsetof(struct kvfs_lookup, keys));
out:
	free(gens);
	free(pins);
	free(keys_at);
	free(lk);
	return rc ? reply_err(fs, req, "LOOKUP", -rc) : 0;
}

/* ------------------------------------------------------ group lookup */

static int do_group(struct fs *fs, fuse_req_t req, struct fs_fh *fh,
		    uint64_t owner, const void *in_buf)
{
	struct fs_ioctl_state *st = fs->ioctl_state;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct kvfs_group_lookup *g;
	uint32_t ids[KVFS_GROUP_MAX], got[KVFS_GROUP_MAX] = { 0 };
	uint32_t gl1[KVFS_GROUP_MAX] = { 0 }, gl2[KVFS_GROUP_MAX] = { 0 };
	uint64_t kh[KVFS_GROUP_KEYS_MAX];
	uint32_t n, l1, l2, i, k, npinned = 0;
	struct lease_pin *pins = NULL;
	uint64_t *gens = NULL; /* with PIN: [rank * nkeys + k] */
	bool pin, any_missing = false;
	struct fs_cred cred, pcred;
	int rc = 0;

	if (fh->kind != FS_FH_NS && fh->kind != FS_FH_ROOT)
		return reply_err(fs, req, "GROUP_LOOKUP", ENOTTY);
	g = malloc(sizeof(*g));
	if (!g)
		return reply_err(fs, req, "GROUP_LOOKUP", ENOMEM);
	memcpy(g, in_buf, sizeof(*g));
	memset(g->missing, 0, sizeof(g->missing));
	for (i = 0; i < g->nns; i++) {
		rc = tier_ns_find(fs->tier, g->ns[i], &ids[i]);
		if (rc == -ENOENT) {
			g->missing[i] = 1;
			any_missing = true;
			rc = 0;
		} else if (rc) {
			goto out;
		}
	}
	/* the ranks that exist must be readable before anything is said of
	 * the others (missing[] would tell which names exist) */
	cred.ngroups = -1; /* the caller's groups: read once, if needed */
	for (i = 0; i < g->nns; i++) {
		rc = g->missing[i] ? 0 : fs_ns_access_cred(fs, req, ids[i],
							   R_OK, &cred);
		if (rc)
			goto out;
	}
	if (any_missing) {
		g->found = 0;
		g->lease_id = 0;
		/* Negative result + data: the caller gets ENOENT and missing[]. */
		fuse_reply_ioctl(req, -ENOENT, g,
				 offsetof(struct kvfs_group_lookup, ns));
		count(&st->errors, 1);
		goto out;
	}

	/*
	 * Pin then trim: each rank is looked up (and with PIN pinned) only as
	 * far as the shortest run seen so far, then every rank drops the pins
	 * past the final common run. A chunk of the common run is pinned from
	 * the moment it is found, so nothing of it can be evicted between the
	 * ranks' lookups.
	 */
	pin = g->flags & KVFS_LOOKUP_PIN;
	if (pin) {
		gens = malloc((size_t)g->nns * g->nkeys * sizeof(*gens));
		if (!gens) {
			rc = -ENOMEM;
			goto out;
		}
	}
	n = g->nkeys;
	/* path namespaces: only as far as every rank's names are the
	 * caller's to stat (fs_path_reach) */
	for (i = 0, pcred.ngroups = -1; i < g->nns && n; i++)
		if (fs_path_ns(fs, ids[i])) {
			if (pcred.ngroups < 0)
				fs_cred_of_caller(req, &pcred);
			n = fs_path_reach(fs, ids[i], g->keys, n, &pcred, 0,
					  NULL);
		}
	/* the chain hashed once for all the ranks */
	if (n)
		tier_key_hashes(g->keys, n, kh);
	for (i = 0; i < g->nns && n; i++) {
		rc = tier_lookup_kh(fs->tier, ids[i], g->keys, kh, n,
				    g->depth_base,
				    g->flags & KVFS_LOOKUP_PREFETCH,
				    pin ? &gens[(size_t)i * g->nkeys] : NULL,
				    &got[i], &l1, &l2);
		if (rc) {
			got[i] = 0;
			break;
		}
		gl1[i] = l1;
		gl2[i] = l2;
		if (got[i] < n)
			n = got[i];
	}
	if (rc) {
		for (uint32_t j = 0; pin && j < i; j++)
			for (k = 0; k < got[j]; k++)
				tier_unpin_gen(fs->tier, ids[j], &g->keys[k],
					       gens[(size_t)j * g->nkeys + k]);
		if (rc == -ENOENT) { /* removed since tier_ns_find */
			g->missing[i] = 1;
			any_missing = true;
		}
		goto out;
	}
	count(&st->group_lookups, 1);
	count(&st->keys, (uint64_t)g->nkeys * g->nns);
	for (i = 0; i < g->nns; i++) /* every rank is told the common run */
		count_lookup(st, g->nkeys, n, gl1[i], gl2[i]);
	g->lease_id = 0;
	if (pin) {
		for (i = 0; i < g->nns; i++)
			for (k = n; k < got[i]; k++)
				tier_unpin_gen(fs->tier, ids[i], &g->keys[k],
					       gens[(size_t)i * g->nkeys + k]);
		if (n) {
			pins = malloc((size_t)n * g->nns * sizeof(*pins));
			rc = pins ? 0 : -ENOMEM;
			for (i = 0; pins && i < g->nns; i++)
				for (k = 0; k < n; k++) {
					pins[npinned].ns = ids[i];
					pins[npinned].key = g->keys[k];
					pins[npinned++].gen =
						gens[(size_t)i * g->nkeys + k];
				}
			/* non-root callers get at most the mount's
			 * lease_ms */
			g->lease_ms = lease_grant_ms(st->leases, ctx->uid,
						     g->lease_ms);
			if (!rc)
				rc = lease_add(st->leases, owner, ctx->uid,
					       g->lease_ms, pins, npinned,
					       &g->lease_id);
			if (rc) {
				for (i = 0; i < g->nns; i++)
					for (k = 0; k < n; k++)
						tier_unpin_gen(fs->tier, ids[i],
							&g->keys[k],
							gens[(size_t)i *
							     g->nkeys + k]);
				goto out;
			}
		}
	}
	g->found = n;
	fuse_reply_ioctl(req, 0, g, offsetof(struct kvfs_group_lookup, ns));
out:
	if (rc == -ENOENT && any_missing) {
		g->found = 0;
		g->lease_id = 0;
		fuse_reply_ioctl(req, -ENOENT, g,
				 offsetof(struct kvfs_group_lookup, ns));
		count(&st->errors, 1);
		rc = 0;
	}
	free(gens);
	free(pins);
	free(g);
	return rc ? reply_err(fs, req, "GROUP_LOOKUP", -rc) : 0;
}

/* ------------------------------------------------------------ unpin */

static int do_unpin(struct fs *fs, fuse_req_t req, struct fs_fh *fh,
		    uint64_t owner, const void *in_buf)
{
	struct fs_ioctl_state *st = fs->ioctl_state;
	struct kvfs_unpin u;
	int rc;

	if (fh->kind != FS_FH_NS && fh->kind != FS_FH_ROOT)
		return reply_err(fs, req, "UNPIN", ENOTTY);
	memcpy(&u, in_buf, sizeof(u));
	rc = u.lease_id ? lease_release(st->leases, u.lease_id, owner,
					fuse_req_ctx(req)->uid, 0) : -ENOENT;
	if (rc)
		return reply_err(fs, req, "UNPIN", -rc);
	fuse_reply_ioctl(req, 0, &u, sizeof(u));
	return 0;
}

/* ---------------------------------------------------------- handles */

static int do_handle(struct fs *fs, fuse_req_t req, struct fs_fh *fh,
		     uint64_t owner, struct fuse_file_info *fi,
		     const void *in_buf)
{
	struct fs_ioctl_state *st = fs->ioctl_state;
	struct tier_arena_info ai;
	struct tier_chunk *c;
	struct kvfs_handle h;
	void *cookie = NULL;
	uint32_t want;
	int rc;

	if (fh->kind != FS_FH_CHUNK || !fh->chunk)
		return reply_err(fs, req, "HANDLE", ENOTTY);
	if ((fi->flags & O_ACCMODE) == O_WRONLY)
		return reply_err(fs, req, "HANDLE", EBADF);
	/* The fd may have been passed to a process that cannot read the
	 * namespace: check the caller, not the opener. */
	rc = fs_ns_access(fs, req, fh->ns, R_OK);
	if (rc)
		return reply_err(fs, req, "HANDLE", -rc);
	if (lease_owner_handle(st->leases, owner))
		return reply_err(fs, req, "HANDLE", EBUSY);

	memcpy(&h, in_buf, sizeof(h));
	want = h.kind; /* in: 0 = the arena's own kind (fs_ioctl_check) */
	rc = tier_get_flags(fs->tier, fh->ns, &fh->key, TIER_GET_NOCOUNT, &c);
	if (rc)
		return reply_err(fs, req, "HANDLE", -rc);
	/* Unlinked and published again since this fd was opened: the handle
	 * would describe other bytes than the fd reads. */
	if (tier_chunk_gen(c) != tier_chunk_gen(fh->chunk)) {
		rc = -ENOENT;
		goto err_put;
	}
	memset((char *)&h + sizeof(struct ioc_head), 0,
	       sizeof(h) - sizeof(struct ioc_head));
	tier_arena_info(fs->tier, &ai);
	h.length = tier_chunk_size(c);
	h.device = -1;
	if (!want)
		want = (uint32_t)ai.kind;
	if (want == KVFS_HANDLE_CUDA_IPC) {
		/* cuda L1, or pinned L1 on request: a device buffer of this
		 * chunk alone (gpu/gpu.h, struct gpu_export); host L1 has no
		 * device to export from (EOPNOTSUPP) */
		rc = tier_arena_export(fs->tier, c, fuse_req_ctx(req)->uid,
				       fuse_req_ctx(req)->gid, h.ipc,
				       &h.offset, &cookie);
		if (rc)
			goto err_put;
		h.kind = KVFS_HANDLE_CUDA_IPC;
		h.device = ai.device;
		/* the device reads it without us: counted once, here */
		tier_count_served(fs->tier, h.length);
	} else {
		/* Any L1: the chunk fd itself is mmap-able from offset 0
		 * (for cuda L1 its pages are read through the bounce
		 * buffers). */
		h.kind = KVFS_HANDLE_HOST_MMAP;
		h.offset = 0;
	}
	rc = lease_add_handle(st->leases, owner, fuse_req_ctx(req)->uid, c,
			      cookie, &h.handle_id);
	if (rc)
		goto err_put;
	count(&st->handles, 1);
	fuse_reply_ioctl(req, 0, &h, sizeof(h));
	return 0;

err_put:
	tier_arena_unexport(fs->tier, cookie);
	tier_put(fs->tier, c);
	return reply_err(fs, req, "HANDLE", rc == -ENOTSUP ? EOPNOTSUPP : -rc);
}

static int do_handle_release(struct fs *fs, fuse_req_t req, struct fs_fh *fh,
			     uint64_t owner, const void *in_buf)
{
	struct fs_ioctl_state *st = fs->ioctl_state;
	struct kvfs_handle_release r;
	int rc;

	if (fh->kind != FS_FH_CHUNK)
		return reply_err(fs, req, "HANDLE_RELEASE", ENOTTY);
	memcpy(&r, in_buf, sizeof(r));
	/* handle_id 0: whatever handle this fd holds. */
	if (!r.handle_id)
		r.handle_id = lease_owner_handle(st->leases, owner);
	/* The fd is the capability: only its owner matches, any uid. */
	rc = r.handle_id ? lease_release(st->leases, r.handle_id, owner, 0, 1)
			 : -ENOENT;
	if (rc)
		return reply_err(fs, req, "HANDLE_RELEASE", -rc);
	fuse_reply_ioctl(req, 0, &r, sizeof(r));
	return 0;
}

/* ------------------------------------------------------------- L3 */

/* KVFS_IOC_L3_DROP: a namespace's chunks out of the shared L3 (root or
 * the user who mounted: it affects every node). */
static int do_l3_drop(struct fs *fs, fuse_req_t req, struct fs_fh *fh,
		      const void *in_buf)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct kvfs_l3_drop d;
	long n;

	if (fh->kind != FS_FH_ROOT)
		return reply_err(fs, req, "L3_DROP", ENOTTY);
	if (ctx->uid != 0 && ctx->uid != getuid())
		return reply_err(fs, req, "L3_DROP", EPERM);
	memcpy(&d, in_buf, sizeof(d));
	if (!memchr(d.ns, '\0', sizeof(d.ns)))
		return reply_err(fs, req, "L3_DROP", EINVAL);
	n = tier_l3_drop(fs->tier, d.ns);
	/* routers stop counting what any node could fetch from there (also
	 * after a partial drop: forgetting too much only costs a miss) */
	fs_events_l3_dropped(fs, d.ns);
	if (n < 0)
		return reply_err(fs, req, "L3_DROP", (int)-n);
	d.deleted = (uint64_t)n;
	fuse_reply_ioctl(req, 0, &d, sizeof(d));
	return 0;
}

/* ------------------------------------------------------------ entry */

static const char *ioc_name(unsigned int nr)
{
	static const char *const names[] = { "(unknown)", "LOOKUP",
		"GROUP_LOOKUP", "UNPIN", "HANDLE", "HANDLE_RELEASE", "GET",
		"PUT", "XFER_REGISTER", "GET_SMALL", "PUT_SMALL" };

	return nr < sizeof(names) / sizeof(names[0]) ? names[nr] : names[0];
}

static size_t ioc_size(unsigned int nr)
{
	switch (nr) {
	case _IOC_NR(KVFS_IOC_LOOKUP):
		return sizeof(struct kvfs_lookup);
	case _IOC_NR(KVFS_IOC_GROUP_LOOKUP):
		return sizeof(struct kvfs_group_lookup);
	case _IOC_NR(KVFS_IOC_UNPIN):
		return sizeof(struct kvfs_unpin);
	case _IOC_NR(KVFS_IOC_HANDLE):
		return sizeof(struct kvfs_handle);
	case _IOC_NR(KVFS_IOC_HANDLE_RELEASE):
		return sizeof(struct kvfs_handle_release);
	case _IOC_NR(KVFS_IOC_L3_DROP):
		return sizeof(struct kvfs_l3_drop);
	case _IOC_NR(KVFS_IOC_GET):
	case _IOC_NR(KVFS_IOC_PUT):
		return sizeof(struct kvfs_xfer);
	case _IOC_NR(KVFS_IOC_GET_SMALL):
	case _IOC_NR(KVFS_IOC_PUT_SMALL):
		return sizeof(struct kvfs_xfer_small);
	case _IOC_NR(KVFS_IOC_XFER_REGISTER):
		return sizeof(struct kvfs_xfer_register);
	default:
		return 0;
	}
}

/* The per-command checks of fs_ioctl_check, on an argument whose header
 * was checked. */
static int check_args(unsigned int nr, const void *in_buf)
{
	const uint32_t flags_ok = KVFS_LOOKUP_PIN | KVFS_LOOKUP_PREFETCH;

	switch (nr) {
	case _IOC_NR(KVFS_IOC_LOOKUP): {
		struct kvfs_lookup lk;

		memcpy(&lk, in_buf, offsetof(struct kvfs_lookup, keys));
		/* a timeout only with KVFS_LOOKUP_WAIT */
		if (lk.nkeys == 0 ||
		    lk.nkeys > ((lk.flags & KVFS_LOOKUP_KEYS_AT) ?
				KVFS_LOOKUP_AT_MAX : KVFS_LOOKUP_MAX) ||
		    (lk.flags & ~(flags_ok | KVFS_LOOKUP_WAIT |
				  KVFS_LOOKUP_KEYS_AT | KVFS_WAIT_MS_MASK)) ||
		    (!(lk.flags & KVFS_LOOKUP_WAIT) &&
		     KVFS_WAIT_MS_OF(lk.flags)) ||
		    (uint64_t)lk.depth_base + lk.nkeys > UINT32_MAX)
			return -EINVAL;
		return 0;
	}
	case _IOC_NR(KVFS_IOC_GROUP_LOOKUP): {
		const struct kvfs_group_lookup *g = in_buf;
		uint32_t hdr[6]; /* version size flags nkeys nns lease_ms */
		uint32_t depth_base;

		memcpy(hdr, in_buf, sizeof(hdr));
		memcpy(&depth_base, (const char *)in_buf +
		       offsetof(struct kvfs_group_lookup, depth_base),
		       sizeof(depth_base));
		if (hdr[3] == 0 || hdr[3] > KVFS_GROUP_KEYS_MAX || hdr[4] == 0 ||
		    hdr[4] > KVFS_GROUP_MAX || (hdr[2] & ~flags_ok) ||
		    (uint64_t)depth_base + hdr[3] > UINT32_MAX)
			return -EINVAL;
		for (uint32_t i = 0; i < hdr[4]; i++) {
			size_t len = strnlen(g->ns[i], sizeof(g->ns[i]));

			if (len == 0 || len == sizeof(g->ns[i]) ||
			    g->ns[i][0] == '.' || memchr(g->ns[i], '/', len))
				return -EINVAL;
		}
		return 0;
	}
	case _IOC_NR(KVFS_IOC_HANDLE): {
		struct kvfs_handle h;

		memcpy(&h, in_buf, sizeof(h));
		return h.kind > KVFS_HANDLE_CUDA_IPC ? -EINVAL : 0;
	}
	default:
		return 0; /* UNPIN, HANDLE_RELEASE: any id; unknown ones ENOENT */
	}
}

int fs_ioctl_check(unsigned int cmd, const void *in_buf, size_t in_bufsz,
		   size_t out_bufsz)
{
	size_t want;

	if (_IOC_TYPE(cmd) != KVFS_IOC_MAGIC)
		return -ENOTTY;
	want = ioc_size(_IOC_NR(cmd));
	if (!want)
		return -ENOTTY;
	/*
	 * Same number, other size or direction: a caller built against
	 * another version of kvfs.h. Restricted ioctls copy _IOC_SIZE(cmd)
	 * bytes, so that is what arrives; report the mismatch as EINVAL.
	 */
	if (_IOC_DIR(cmd) != (_IOC_READ | _IOC_WRITE) ||
	    _IOC_SIZE(cmd) != want ||
	    check_head(in_buf, in_bufsz, out_bufsz, want))
		return -EINVAL;
	return check_args(_IOC_NR(cmd), in_buf);
}

int fs_ioctl(struct fs *fs, fuse_req_t req, fuse_ino_t ino, unsigned int cmd,
	     void *arg, struct fuse_file_info *fi, unsigned flags,
	     const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
	struct fs_fh *fh = fi ? fs_fh_of(fi) : NULL;
	int rc;

	if (_IOC_TYPE(cmd) != KVFS_IOC_MAGIC || !fh) {
		/* Not ours (isatty()'s TCGETS on every Python open, say):
		 * the answer any filesystem gives, neither counted as an
		 * error nor logged. */
		fuse_reply_err(req, ENOTTY);
		return 0;
	}
	rc = fs_ioctl_check(cmd, in_buf, in_bufsz, out_bufsz);
	if (rc == -ENOTTY)
		return reply_err(fs, req, "(unknown)", ENOTTY);
	if (rc)
		return reply_err(fs, req, ioc_name(_IOC_NR(cmd)), -rc);

	switch (_IOC_NR(cmd)) {
	case _IOC_NR(KVFS_IOC_LOOKUP):
		return do_lookup(fs, req, fh, fi->fh, in_buf);
	case _IOC_NR(KVFS_IOC_GROUP_LOOKUP):
		return do_group(fs, req, fh, fi->fh, in_buf);
	case _IOC_NR(KVFS_IOC_UNPIN):
		return do_unpin(fs, req, fh, fi->fh, in_buf);
	case _IOC_NR(KVFS_IOC_HANDLE):
		return do_handle(fs, req, fh, fi->fh, fi, in_buf);
	case _IOC_NR(KVFS_IOC_L3_DROP):
		return do_l3_drop(fs, req, fh, in_buf);
	case _IOC_NR(KVFS_IOC_GET):
	case _IOC_NR(KVFS_IOC_PUT):
	case _IOC_NR(KVFS_IOC_GET_SMALL):
	case _IOC_NR(KVFS_IOC_PUT_SMALL):
	case _IOC_NR(KVFS_IOC_XFER_REGISTER):
		return fs_xfer_ioctl(fs, ((struct fs_ioctl_state *)
					  fs->ioctl_state)->xfer,
				     req, fi, _IOC_NR(cmd), in_buf);
	default:
		return do_handle_release(fs, req, fh, fi->fh, in_buf);
	}
}

void fs_ioctl_release(struct fs *fs, uint64_t fh)
{
	struct fs_ioctl_state *st = fs->ioctl_state;
	struct fs_fh *f = (struct fs_fh *)(uintptr_t)fh;

	if (st) {
		lease_release_owner(st->leases, fh);
		fs_xfer_release(st->xfer, fh);
	}
	/* ioctl_priv is unused: leases and handles are found by owner. */
	if (f)
		f->ioctl_priv = NULL;
}

int fs_ioctl_init(struct fs *fs)
{
	struct fs_ioctl_state *st;
	int rc;

	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	rc = lease_table_create(fs->tier, fs->cfg.lease_ms, &st->leases);
	if (rc) {
		free(st);
		return rc;
	}
	rc = fs_xfer_create(fs, &st->xfer);
	if (rc == 0) {
		rc = fs_wait_create(fs, &fs->wait);
		if (rc)
			fs_xfer_destroy(st->xfer);
	}
	if (rc) {
		lease_table_destroy(st->leases);
		free(st);
		return rc;
	}
	fs->ioctl_state = st;
	return 0;
}

void fs_ioctl_destroy(struct fs *fs)
{
	struct fs_ioctl_state *st = fs->ioctl_state;

	if (!st)
		return;
	fs_xfer_destroy(st->xfer);
	fs_wait_destroy(fs->wait);
	fs->wait = NULL;
	lease_table_destroy(st->leases);
	free(st);
	fs->ioctl_state = NULL;
}

void fs_ioctl_counts(struct fs *fs, struct fs_ioctl_counts *c)
{
	struct fs_ioctl_state *st = fs->ioctl_state;

	memset(c, 0, sizeof(*c));
	if (!st)
		return;
#define LD(f) __atomic_load_n(&st->f, __ATOMIC_RELAXED)
	c->lookups = LD(lookups);
	c->group_lookups = LD(group_lookups);
	c->keys = LD(keys);
	c->prefetches = LD(prefetches);
	c->handles = LD(handles);
	c->errors = LD(errors);
	for (int i = 0; i < TIER_FROM_N; i++)
		c->lookup_hits[i] = LD(lookup_hits[i]);
	c->lookup_misses = LD(lookup_misses);
#undef LD
	lease_get_stats(st->leases, &c->leases);
	fs_xfer_counts(st->xfer, &c->xfer);
}
