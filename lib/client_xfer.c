/*
 * client_xfer.c - libkvfs's batched transfers (kvfs.h section 4a):
 * kvfs_mget / kvfs_mput cut a list of chunks into KVFS_IOC_GET / _PUT
 * calls of KVFS_XFER_MAX entries (their _SMALL forms for a batch of
 * KVFS_XFER_SMALL_MAX or fewer: less for FUSE to copy in), send again what a
 * signal left undone, and name the daemon as this process's ptracer when
 * it asks (Yama).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>

#include <unistd.h>

#include "kvfs.h"
#include "lib/client_wait.h"

#ifndef PR_SET_PTRACER
#define PR_SET_PTRACER 0x59616d61
#endif

/* One ioctl; -errno on failure. Retried on EINTR (the daemon did
 * nothing then: a signal before it read the request) and on EAGAIN (the
 * daemon runs as many batches, or waiters, as it lets run at once,
 * nothing done), backing off from 50 us to 5 ms, for about 10 s at most.
 * With a deadline (a waiting GET) each try carries the time left, EAGAIN
 * is retried until the deadline and then for ~10 s without waiting, and
 * a signal during the wait ends it: -EINTR. */
static int xfer_ioctl(int fd, unsigned long cmd, struct kvfs_xfer *b,
		      uint64_t deadline)
{
	unsigned us = 50, waited = 0;
	int rc;

	for (;;) {
		if (deadline)
			b->flags = kvfs_wait_flags(b->flags, KVFS_XFER_WAIT,
						   deadline);
		rc = ioctl(fd, cmd, b);
		if (rc >= 0 || (errno != EINTR && errno != EAGAIN))
			break;
		if (errno == EINTR && deadline)
			break;
		if (errno == EAGAIN) {
			/* a waiting GET refused (past the daemon's waiter
			 * bounds) tries again until its deadline, then once
			 * more without waiting (kvfs_wait_flags drops the
			 * flag), as the lookup does; the rest for ~10 s */
			if (deadline && kvfs_wait_now_ns() < deadline)
				waited = 0;
			else if (waited >= 10u * 1000 * 1000)
				break;
			usleep(us);
			waited += us;
			us = us < 5000 ? us * 2 : 5000;
		}
	}
	return rc < 0 ? -errno : 0;
}

/* Set once a daemon answered a _SMALL form with ENOTTY where the long
 * one was taken (a daemon older than them): the long form from then on,
 * in this process (a process using an old and a new daemon at once sends
 * the new one the long form too: slower, never wrong). */
static atomic_bool small_unknown;

/* The _SMALL form of cmd (KVFS_IOC_GET or _PUT) when m entries fit it
 * and the daemon knows it, else cmd. */
static unsigned long form(unsigned long cmd, size_t m)
{
	if (m > KVFS_XFER_SMALL_MAX ||
	    atomic_load_explicit(&small_unknown, memory_order_relaxed))
		return cmd;
	return cmd == KVFS_IOC_PUT ? KVFS_IOC_PUT_SMALL : KVFS_IOC_GET_SMALL;
}

/* Fills b with the entries io[idx[0..m)) (those still to do), for the
 * ioctl cmd (the long form or the small one, whose struct is b's
 * prefix). */
static void fill(struct kvfs_xfer *b, unsigned long cmd, unsigned flags,
		 bool put, const struct kvfs_io *io, const size_t *idx,
		 size_t m)
{
	memset(b, 0, offsetof(struct kvfs_xfer, ents));
	b->version = KVFS_ABI_VERSION;
	b->size = cmd == KVFS_IOC_GET || cmd == KVFS_IOC_PUT ?
		  sizeof(*b) : sizeof(struct kvfs_xfer_small);
	b->flags = flags;
	b->nents = (uint32_t)m;
	for (size_t k = 0; k < m; k++) {
		const struct kvfs_io *s = &io[idx[k]];
		struct kvfs_xfer_ent *e = &b->ents[k];

		memset(e, 0, sizeof(*e));
		e->key = s->key;
		e->addr = (uint64_t)(uintptr_t)s->buf;
		if (put) {
			e->length = s->len;
		} else {
			e->cap = s->len;
			e->offset = s->offset;
			e->length = s->length;
			if (flags & KVFS_XFER_NAMED)
				e->size = s->size; /* the name's st_ino */
			if (flags & KVFS_XFER_MTIME)
				e->result = s->result; /* its stat's mtime */
		}
	}
}

/*
 * Runs the entries io[idx[0..m)) (m <= KVFS_XFER_MAX) to completion:
 * resends the -EINTR ones, names the daemon as ptracer once on EPERM.
 * Returns 0 or a whole-batch -errno.
 */
static int run_batch(int fd, unsigned long cmd, unsigned flags, bool put,
		     struct kvfs_io *io, size_t *idx, size_t m,
		     struct kvfs_xfer *b, bool *ptracer_set, uint64_t deadline)
{
	int rc;

	while (m) {
		unsigned long c = form(cmd, m);
		size_t left = 0;

		fill(b, c, flags, put, io, idx, m);
		rc = xfer_ioctl(fd, c, b, deadline);
		if (rc == -ENOTTY && c != cmd) {
			/* a daemon without the small form, or not a
			 * namespace fd: the long form says which (a signal
			 * or a busy daemon says neither) */
			fill(b, cmd, flags, put, io, idx, m);
			rc = xfer_ioctl(fd, cmd, b, deadline);
			if (rc != -ENOTTY && rc != -EINTR && rc != -EAGAIN)
				atomic_store(&small_unknown, true);
		}
		if (rc == -EPERM && !*ptracer_set && b->daemon_pid > 0) {
			/* Yama: let the daemon reach this process */
			*ptracer_set = true;
			if (prctl(PR_SET_PTRACER, (unsigned long)b->daemon_pid,
				  0, 0, 0) == 0)
				continue;
		}
		if (rc)
			return rc;
		for (size_t k = 0; k < m; k++) {
			struct kvfs_io *d = &io[idx[k]];

			if (b->ents[k].result == -EINTR) {
				/* size (and with KVFS_XFER_MTIME, result):
				 * still the input */
				idx[left++] = idx[k];
				if (!(flags & KVFS_XFER_MTIME))
					d->result = -EINTR;
				continue;
			}
			d->result = b->ents[k].result;
			d->size = b->ents[k].size;
		}
		m = left;
	}
	return 0;
}

static int key_cmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct kvfs_key));
}

/* Whether a key appears twice in io (a PUT of both is ambiguous). */
static int has_duplicates(const struct kvfs_io *io, size_t n)
{
	struct kvfs_key *k = malloc(n * sizeof(*k));
	int dup = 0;

	if (!k)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		k[i] = io[i].key;
	qsort(k, n, sizeof(*k), key_cmp);
	for (size_t i = 1; i < n && !dup; i++)
		dup = !key_cmp(&k[i - 1], &k[i]);
	free(k);
	return dup;
}

static long mxfer(int fd, unsigned long cmd, unsigned flags, bool put,
		  struct kvfs_io *io, size_t n, uint64_t deadline)
{
	struct kvfs_xfer *b;
	size_t idx[KVFS_XFER_MAX];
	bool ptracer_set = false;
	long ok = 0;
	int rc = 0;

	if (!io || n == 0)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!io[i].buf && io[i].len && !(flags & KVFS_XFER_DEVICE))
			return -EINVAL;
	if (put) {
		rc = has_duplicates(io, n);
		if (rc)
			return rc < 0 ? rc : -EINVAL;
	}
	b = malloc(sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (size_t off = 0; off < n && !rc; off += KVFS_XFER_MAX) {
		size_t m = n - off < KVFS_XFER_MAX ? n - off : KVFS_XFER_MAX;

		for (size_t k = 0; k < m; k++)
			idx[k] = off + k;
		rc = run_batch(fd, cmd, flags, put, io, idx, m, b,
			       &ptracer_set, deadline);
		if (rc) {
			for (size_t i = off; i < n; i++) {
				io[i].result = rc;
				io[i].size = 0;
			}
			break;
		}
		for (size_t k = 0; k < m; k++) {
			int64_t r = io[off + k].result;

			ok += r >= 0 || (put && r == -EEXIST);
		}
	}
	free(b);
	return rc ? rc : ok;
}

long kvfs_mget(int nsfd, struct kvfs_io *io, size_t n, unsigned flags)
{
	if ((flags & ~(KVFS_XFER_DEVICE | KVFS_XFER_NAMED | KVFS_XFER_MTIME)) ||
	    ((flags & KVFS_XFER_MTIME) && !(flags & KVFS_XFER_NAMED)))
		return -EINVAL;
	return mxfer(nsfd, KVFS_IOC_GET, flags, false, io, n, 0);
}

long kvfs_mget_wait(int nsfd, struct kvfs_io *io, size_t n, unsigned flags,
		    uint32_t timeout_ms)
{
	if (flags & ~KVFS_XFER_DEVICE)
		return -EINVAL;
	return mxfer(nsfd, KVFS_IOC_GET, flags, false, io, n,
		     kvfs_wait_deadline(timeout_ms));
}

long kvfs_mget_device(int nsfd, struct kvfs_io *io, size_t n)
{
	return mxfer(nsfd, KVFS_IOC_GET, KVFS_XFER_DEVICE, false, io, n, 0);
}

long kvfs_mput(int nsfd, struct kvfs_io *io, size_t n)
{
	return mxfer(nsfd, KVFS_IOC_PUT, 0, true, io, n, 0);
}

int kvfs_xfer_register(int nsfd, const void *ipc, size_t length, int device)
{
	struct kvfs_xfer_register r;

	if (length && !ipc)
		return -EINVAL;
	memset(&r, 0, sizeof(r));
	r.version = KVFS_ABI_VERSION;
	r.size = sizeof(r);
	r.device = device;
	r.length = length;
	if (length)
		memcpy(r.ipc, ipc, sizeof(r.ipc));
	return ioctl(nsfd, KVFS_IOC_XFER_REGISTER, &r) < 0 ? -errno : 0;
}
