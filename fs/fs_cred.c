/*
 * fs_cred.c - who may: the credentials of a request's caller (uid, gid,
 * supplementary groups) and the permission check of a namespace's mode
 * (fs_ns_access) that the ioctls, batched transfers and control files
 * make. Calls fs_itab.c only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs_i.h"

/*
 * The supplementary groups of the caller of req, from /proc/PID/status.
 * (Added by the engine-interface work: libfuse 3.14's fuse_req_getgroups
 * runs strstr over a buffer it never NUL-terminates, which ASan reports
 * as a heap overflow.) Returns the count (at most max) or -errno.
 */
static int pid_groups(pid_t pid, gid_t *list, int max, uint64_t *capeff)
{
	char path[64], buf[4096], *s;
	ssize_t len;
	int fd, n = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len < 0)
		return -EIO;
	buf[len] = '\0';
	if (capeff) {
		s = strstr(buf, "\nCapEff:");
		*capeff = s ? strtoull(s + 8, NULL, 16) : 0;
	}
	s = strstr(buf, "\nGroups:");
	if (!s)
		return -EIO;
	s += 8;
	while (n < max) {
		char *end;
		unsigned long g = strtoul(s, &end, 10);

		if (end == s)
			break;
		list[n++] = (gid_t)g;
		s = end;
	}
	return n;
}

static int req_groups(fuse_req_t req, gid_t *list, int max)
{
	return pid_groups(fuse_req_ctx(req)->pid, list, max, NULL);
}

int fs_ns_access(struct fs *fs, fuse_req_t req, uint32_t ns, int mask)
{
	struct fs_cred c;

	c.ngroups = -1;
	return fs_ns_access_cred(fs, req, ns, mask, &c);
}

int fs_ns_access_cred(struct fs *fs, fuse_req_t req, uint32_t ns, int mask,
		      struct fs_cred *c)
{
	struct fs_priv *p = fs->priv;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fs_inode *in;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	int n, err;

	err = tier_ns_info(fs->tier, ns, &(struct tier_ns_info){ 0 });
	if (err)
		return err;
	pthread_mutex_lock(&p->lock);
	in = fs_ns_get(fs, ns);
	if (!in) {
		pthread_mutex_unlock(&p->lock);
		return -ENOMEM;
	}
	mode = in->mode;
	uid = in->uid;
	gid = in->gid;
	pthread_mutex_unlock(&p->lock);
	c->uid = ctx->uid;
	c->gid = ctx->gid;
	c->pid = ctx->pid;
	c->dac = c->uid == 0;
	/*
	 * The supplementary groups (a read of /proc/PID/status, about 12 us
	 * of CPU) only when they can change the answer: a caller other than
	 * root and the owner, whose own gid is not the namespace's, and a
	 * mode whose group bits answer mask otherwise than its other bits
	 * (0755 for R_OK: both allow; 0750: they differ). Read once per c.
	 */
	if (c->ngroups < 0 && c->uid && c->uid != uid && c->gid != gid &&
	    ((((int)mode >> 3) & 7 & mask) == mask) !=
		    (((int)mode & 7 & mask) == mask)) {
		n = req_groups(req, c->groups, FS_CRED_GROUPS);
		c->ngroups = n > 0 ? n : 0;
	}
	return fs_cred_may(c, mode, uid, gid, mask) ? 0 : -EACCES;
}

void fs_cred_of_req(fuse_req_t req, struct fs_cred *c)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	int n = req_groups(req, c->groups, FS_CRED_GROUPS);

	c->uid = ctx->uid;
	c->gid = ctx->gid;
	c->pid = ctx->pid;
	c->dac = c->uid == 0;
	c->ngroups = n > 0 ? n : 0;
}

void fs_cred_of_caller(fuse_req_t req, struct fs_cred *c)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	if (ctx->uid != 0) {
		fs_cred_of_req(req, c);
		c->dac = 0;
		return;
	}
	c->uid = 0;
	c->gid = ctx->gid;
	c->pid = ctx->pid;
	c->ngroups = 0;
	c->dac = -1; /* root reading its own files needs no /proc read */
}

/* CAP_DAC_OVERRIDE (1) and CAP_DAC_READ_SEARCH (2): either lets a read
 * and a directory search past the mode bits */
#define DAC_CAPS ((1ull << 1) | (1ull << 2))

bool fs_cred_caps(struct fs_cred *c)
{
	uint64_t capeff = 0;
	gid_t none[1];
	int n;

	if (__atomic_load_n(&c->dac, __ATOMIC_ACQUIRE) >= 0)
		return false;
	/* CapEff only: a batch's helpers may share c (the groups stay
	 * root's gid alone: without capabilities, root's supplementary
	 * groups are not counted, which can only deny). No /proc (the
	 * caller is gone): the bits alone. */
	n = pid_groups(c->pid, none, 0, &capeff);
	__atomic_store_n(&c->dac, n >= 0 && (capeff & DAC_CAPS) ? 1 : 0,
			 __ATOMIC_RELEASE);
	return true;
}

bool fs_cred_may(const struct fs_cred *c, mode_t mode, uid_t uid, gid_t gid,
		 int mask)
{
	int perm;

	if (c->uid == 0 && __atomic_load_n(&c->dac, __ATOMIC_ACQUIRE) > 0)
		return true;
	if (c->uid == uid) {
		perm = (mode >> 6) & 7;
	} else {
		bool ingroup = c->gid == gid;

		for (int i = 0; i < c->ngroups && !ingroup; i++)
			ingroup = c->groups[i] == gid;
		perm = ingroup ? (mode >> 3) & 7 : mode & 7;
	}
	return (perm & mask) == mask;
}
