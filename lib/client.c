/*
 * client.c - libkvfs: the client side of the engine interface (kvfs.h
 * section 4). Plain syscalls on a mounted kvfs; no daemon code in here.
 * Every function returns 0 / a count or -errno, saving errno right after
 * the failing call (close() in a cleanup path can clobber it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvfs.h"
#include "lib/client_wait.h"

static int valid_ns_name(const char *ns)
{
	size_t n;

	if (!ns)
		return 0;
	n = strlen(ns);
	return n >= 1 && n <= KVFS_NS_NAME_MAX && ns[0] != '.' &&
	       !strchr(ns, '/');
}

int kvfs_mount_open(const char *mountpoint)
{
	int fd;

	if (!mountpoint)
		return -EINVAL;
	fd = open(mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int kvfs_ns_open(const char *mountpoint, const char *ns, unsigned flags,
		 unsigned mode)
{
	int root, fd, saved;

	if (!mountpoint || !valid_ns_name(ns) || (flags & ~KVFS_NS_CREATE))
		return -EINVAL;
	root = kvfs_mount_open(mountpoint);
	if (root < 0)
		return root;
	if ((flags & KVFS_NS_CREATE) &&
	    mkdirat(root, ns, (mode_t)mode) < 0 && errno != EEXIST) {
		saved = errno;
		close(root);
		return -saved;
	}
	fd = openat(root, ns, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	saved = errno;
	close(root);
	return fd < 0 ? -saved : fd;
}

int kvfs_chunk_open(int nsfd, const struct kvfs_key *key)
{
	char name[KVFS_KEY_HEX_LEN + 1];
	int fd;

	if (!key)
		return -EINVAL;
	kvfs_key_hex(key, name);
	fd = openat(nsfd, name, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int kvfs_exists(int nsfd, const struct kvfs_key *key)
{
	char name[KVFS_KEY_HEX_LEN + 1];
	struct statx stx;

	if (!key)
		return -EINVAL;
	kvfs_key_hex(key, name);
	/* the name alone: fstatat would ask for the atime as well, which
	 * the kernel marks stale after each read of the chunk (one GETATTR
	 * round trip more; see kvfs_get) */
	if (statx(nsfd, name, AT_SYMLINK_NOFOLLOW, STATX_TYPE, &stx) == 0)
		return 1;
	return errno == ENOENT ? 0 : -errno;
}

/*
 * Writes go to a temporary name, published by rename(2) onto the key. A
 * keyed O_CREAT|O_EXCL writer cannot be abandoned once a write failed (its
 * close publishes whatever was written), while a temporary is simply
 * unlinked: a failed put never publishes a partial chunk.
 */
int kvfs_put(int nsfd, const struct kvfs_key *key, const void *buf,
	     size_t len)
{
	char name[KVFS_KEY_HEX_LEN + 1], tmp[64];
	const char *p = buf;
	size_t done = 0;
	uint64_t r;
	int fd, saved, tries = 0;

	if (!key || (!buf && len))
		return -EINVAL;
	kvfs_key_hex(key, name);
	do {
		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
			r = (uint64_t)(uintptr_t)&r ^ (uint64_t)gettid() << 32 ^
			    (uint64_t)tries;
		snprintf(tmp, sizeof(tmp), ".put.%d.%016llx", (int)getpid(),
			 (unsigned long long)r);
		fd = openat(nsfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			    0644);
	} while (fd < 0 && errno == EEXIST && ++tries < 4);
	if (fd < 0)
		return -errno;
	while (done < len) {
		ssize_t n = write(fd, p + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			saved = n < 0 ? errno : EIO;
			goto err_unlink;
		}
		done += (size_t)n;
	}
	if (close(fd) < 0) {
		saved = errno;
		fd = -1;
		goto err_unlink;
	}
	/* Publication: EEXIST when the key is already there. */
	if (renameat(nsfd, tmp, nsfd, name) < 0) {
		saved = errno;
		fd = -1;
		goto err_unlink;
	}
	return 0;

err_unlink:
	(void)unlinkat(nsfd, tmp, 0);
	if (fd >= 0)
		close(fd);
	return -saved;
}

long kvfs_get(int nsfd, const struct kvfs_key *key, void *buf, size_t len)
{
	struct statx stx;
	size_t size, done = 0;
	int fd, saved;

	if (!buf && len)
		return -EINVAL;
	fd = kvfs_chunk_open(nsfd, key);
	if (fd < 0)
		return fd;
	/*
	 * The size alone: a published chunk never changes it (a new
	 * publication is a new inode), and the attributes the lookup gave
	 * the kernel stay valid for the entry's timeout. fstat(2) asks for
	 * the atime too, which the kernel marks stale after every read of
	 * the inode, so fstat of a chunk read before is one more FUSE
	 * round trip (GETATTR) per get. (glibc emulates statx with fstatat
	 * on kernels without it.)
	 */
	if (statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &stx) < 0) {
		saved = errno;
		goto err_close;
	}
	size = (size_t)stx.stx_size;
	if (size > len) {
		saved = ENOBUFS;
		goto err_close;
	}
	while (done < size) {
		ssize_t n = read(fd, (char *)buf + done, size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			saved = errno;
			goto err_close;
		}
		if (n == 0)
			break; /* immutable chunks never shrink; be safe */
		done += (size_t)n;
	}
	close(fd);
	return (long)done;

err_close:
	close(fd);
	return -saved;
}

/* ------------------------------------------------------------- lookups */

static int do_ioctl(int fd, unsigned long cmd, void *arg)
{
	int rc;

	do
		rc = ioctl(fd, cmd, arg);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : rc;
}

/* Releases the leases res took so far (error paths). */
static void drop_leases(int fd, struct kvfs_result *res)
{
	struct kvfs_unpin u = { KVFS_ABI_VERSION, sizeof(u), 0 };

	for (uint32_t i = 0; i < res->nleases; i++) {
		u.lease_id = res->leases[i];
		(void)do_ioctl(fd, KVFS_IOC_UNPIN, &u);
	}
	res->nleases = 0;
}

static int check_lookup_args(const struct kvfs_key *keys, size_t nkeys,
			     uint32_t depth_base, unsigned flags,
			     size_t per_call, const struct kvfs_result *res)
{
	/* depths past 2^32 - 1: the daemon's EINVAL, said here (a refused
	 * KVFS_LOOKUP_KEYS_AT would be taken for an old daemon's) */
	if (!keys || nkeys == 0 || nkeys > UINT32_MAX - depth_base ||
	    (flags & ~(KVFS_LOOKUP_PIN | KVFS_LOOKUP_PREFETCH)))
		return -EINVAL;
	if ((flags & KVFS_LOOKUP_PIN) &&
	    (!res || nkeys > (size_t)KVFS_RESULT_LEASES * per_call))
		return -EINVAL;
	return 0;
}

/* KVFS_IOC_LOOKUP with a deadline (0: none): each try carries the time
 * left; a signal during the wait ends it (-EINTR); EAGAIN (past the
 * daemon's waiter bounds) backs off from 50 us to 5 ms and tries again
 * until the deadline, then looks up without waiting. */
static int lookup_ioctl(int fd, struct kvfs_lookup *lk, uint64_t deadline)
{
	unsigned us = 50;
	int rc;

	if (!deadline)
		return do_ioctl(fd, KVFS_IOC_LOOKUP, lk);
	for (;;) {
		lk->flags = kvfs_wait_flags(lk->flags, KVFS_LOOKUP_WAIT,
					    deadline);
		rc = ioctl(fd, KVFS_IOC_LOOKUP, lk);
		if (rc >= 0)
			return rc;
		if (errno != EAGAIN)
			return -errno;
		usleep(us);
		us = us < 5000 ? us * 2 : 5000;
	}
}

/* Set once a daemon refused a chain by address (KVFS_LOOKUP_KEYS_AT:
 * EPERM or ESRCH, it may not read this process's memory; EINVAL, it is
 * older than the flag): from then on this process sends its keys inside
 * the struct, so a refusal costs one round trip and one log line of the
 * daemon once, not on every lookup. */
static int keys_at_refused;

static long lookup_chain(int nsfd, const struct kvfs_key *keys, size_t nkeys,
			 uint32_t depth_base, unsigned flags,
			 uint32_t lease_ms, uint64_t deadline,
			 struct kvfs_result *res)
{
	struct kvfs_result local;
	struct kvfs_lookup *lk;
	size_t off = 0;
	int rc;

	rc = check_lookup_args(keys, nkeys, depth_base, flags, KVFS_LOOKUP_MAX,
			       res);
	if (rc)
		return rc;
	if (!res)
		res = &local;
	memset(res, 0, sizeof(*res));
	/* 8 KiB: too big for some engines' thread stacks. */
	lk = malloc(sizeof(*lk));
	if (!lk)
		return -ENOMEM;
	while (off < nkeys) {
		/* more than one struct's worth: by address, one round trip
		 * (the 16 KiB of a restricted ioctl cannot carry 1,024 keys) */
		bool at = nkeys - off > KVFS_LOOKUP_MAX &&
			  !__atomic_load_n(&keys_at_refused, __ATOMIC_RELAXED);
		size_t max = at ? KVFS_LOOKUP_AT_MAX : KVFS_LOOKUP_MAX;
		uint32_t n = nkeys - off > max ? (uint32_t)max :
						 (uint32_t)(nkeys - off);

		memset(lk, 0, offsetof(struct kvfs_lookup, keys));
		lk->version = KVFS_ABI_VERSION;
		lk->size = sizeof(*lk);
		lk->flags = flags | (at ? KVFS_LOOKUP_KEYS_AT : 0);
		lk->nkeys = n;
		lk->lease_ms = lease_ms;
		lk->depth_base = depth_base + (uint32_t)off;
		if (at)
			lk->keys_at = (uint64_t)(uintptr_t)(keys + off);
		else
			memcpy(lk->keys, keys + off, n * sizeof(keys[0]));
		rc = lookup_ioctl(nsfd, lk, deadline);
		if (at && (rc == -EPERM || rc == -ESRCH || rc == -EINVAL)) {
			__atomic_store_n(&keys_at_refused, 1, __ATOMIC_RELAXED);
			continue; /* the same keys again, in the struct */
		}
		if (rc < 0)
			goto err;
		res->found += lk->found;
		res->in_l1 += lk->in_l1;
		res->in_l2 += lk->in_l2;
		res->in_l3 += lk->in_l3;
		if (lk->lease_id) {
			res->leases[res->nleases++] = lk->lease_id;
			res->lease_ms = lk->lease_ms; /* granted */
		}
		if (lk->found < n)
			break;
		off += n;
	}
	free(lk);
	return res->found;

err:
	free(lk);
	drop_leases(nsfd, res);
	return rc;
}

long kvfs_lookup(int nsfd, const struct kvfs_key *keys, size_t nkeys,
		 uint32_t depth_base, unsigned flags, uint32_t lease_ms,
		 struct kvfs_result *res)
{
	return lookup_chain(nsfd, keys, nkeys, depth_base, flags, lease_ms, 0,
			    res);
}

long kvfs_lookup_wait(int nsfd, const struct kvfs_key *keys, size_t nkeys,
		      uint32_t depth_base, unsigned flags, uint32_t lease_ms,
		      uint32_t timeout_ms, struct kvfs_result *res)
{
	return lookup_chain(nsfd, keys, nkeys, depth_base, flags, lease_ms,
			    kvfs_wait_deadline(timeout_ms), res);
}

long kvfs_group_lookup(int fd, const char *const *ns, size_t nns,
		       const struct kvfs_key *keys, size_t nkeys,
		       unsigned flags, uint32_t lease_ms,
		       struct kvfs_result *res)
{
	return kvfs_group_lookup_at(fd, ns, nns, keys, nkeys, 0, flags,
				    lease_ms, res);
}

long kvfs_group_lookup_at(int fd, const char *const *ns, size_t nns,
			  const struct kvfs_key *keys, size_t nkeys,
			  uint32_t depth_base, unsigned flags,
			  uint32_t lease_ms, struct kvfs_result *res)
{
	struct kvfs_result local;
	struct kvfs_group_lookup *g;
	size_t off = 0;
	int rc;

	rc = check_lookup_args(keys, nkeys, depth_base, flags,
			       KVFS_GROUP_KEYS_MAX, res);
	if (rc)
		return rc;
	if (!ns || nns == 0 || nns > KVFS_GROUP_MAX)
		return -EINVAL;
	for (size_t i = 0; i < nns; i++)
		if (!valid_ns_name(ns[i]))
			return -EINVAL;
	if (!res)
		res = &local;
	memset(res, 0, sizeof(*res));
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	for (size_t i = 0; i < nns; i++)
		strcpy(g->ns[i], ns[i]); /* length checked above */
	while (off < nkeys) {
		uint32_t n = nkeys - off > KVFS_GROUP_KEYS_MAX ?
			KVFS_GROUP_KEYS_MAX : (uint32_t)(nkeys - off);

		g->version = KVFS_ABI_VERSION;
		g->size = sizeof(*g);
		g->flags = flags;
		g->nkeys = n;
		g->nns = (uint32_t)nns;
		g->lease_ms = lease_ms;
		g->found = 0;
		g->depth_base = depth_base + (uint32_t)off;
		g->lease_id = 0;
		memset(g->missing, 0, sizeof(g->missing));
		memcpy(g->keys, keys + off, n * sizeof(keys[0]));
		rc = do_ioctl(fd, KVFS_IOC_GROUP_LOOKUP, g);
		if (rc < 0) {
			if (rc == -ENOENT)
				memcpy(res->missing, g->missing,
				       sizeof(res->missing));
			goto err;
		}
		res->found += g->found;
		if (g->lease_id) {
			res->leases[res->nleases++] = g->lease_id;
			res->lease_ms = g->lease_ms; /* granted */
		}
		if (g->found < n)
			break;
		off += n;
	}
	/* The group ioctl has no per-tier counts; the run is in L1 or L2. */
	free(g);
	return res->found;

err:
	free(g);
	drop_leases(fd, res);
	return rc;
}

int kvfs_unpin(int fd, uint64_t lease_id)
{
	struct kvfs_unpin u = { KVFS_ABI_VERSION, sizeof(u), lease_id };

	int rc = do_ioctl(fd, KVFS_IOC_UNPIN, &u);

	return rc < 0 ? rc : 0;
}

int kvfs_release(int fd, struct kvfs_result *res)
{
	int first = 0;

	if (!res)
		return -EINVAL;
	for (uint32_t i = 0; i < res->nleases && i < KVFS_RESULT_LEASES; i++) {
		int rc = kvfs_unpin(fd, res->leases[i]);

		if (rc && !first)
			first = rc;
	}
	res->nleases = 0;
	return first;
}

/* ------------------------------------------------------------- handles */

int kvfs_handle_get_kind(int fd, uint32_t kind, struct kvfs_handle *h)
{
	int rc;

	if (!h || kind > KVFS_HANDLE_CUDA_IPC)
		return -EINVAL;
	memset(h, 0, sizeof(*h));
	h->version = KVFS_ABI_VERSION;
	h->size = sizeof(*h);
	h->kind = kind;
	rc = do_ioctl(fd, KVFS_IOC_HANDLE, h);
	if (rc < 0)
		return rc;
	if (kind && h->kind != kind) {
		/* a daemon from before kinds could be asked for */
		kvfs_handle_put(fd, h);
		memset(h, 0, sizeof(*h));
		return -EOPNOTSUPP;
	}
	return 0;
}

int kvfs_handle_get(int fd, struct kvfs_handle *h)
{
	return kvfs_handle_get_kind(fd, 0, h);
}

int kvfs_handle_put(int fd, const struct kvfs_handle *h)
{
	struct kvfs_handle_release r = { KVFS_ABI_VERSION, sizeof(r), 0 };
	int rc;

	if (!h)
		return -EINVAL;
	r.handle_id = h->handle_id;
	rc = do_ioctl(fd, KVFS_IOC_HANDLE_RELEASE, &r);
	return rc < 0 ? rc : 0;
}

int kvfs_handle_map(int fd, const struct kvfs_handle *h, const void **addr)
{
	void *p;

	if (!h || !addr || h->kind != KVFS_HANDLE_HOST_MMAP || !h->length)
		return -EINVAL;
	/* MAP_PRIVATE: with direct_io, MAP_SHARED fails (ENODEV). */
	p = mmap(NULL, h->length, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	*addr = p;
	return 0;
}

void kvfs_handle_unmap(const void *addr, const struct kvfs_handle *h)
{
	if (addr && h && h->length)
		munmap((void *)addr, h->length);
}
