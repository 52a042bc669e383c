/*
 * l2_flog.c - the unlink log (l2_dir/l2.freed, format: record.h): every
 * l2_free appends the freed record's (seg, blk, seq), so that a record
 * freed after the checkpoint was written does not come back from it after
 * a kill; a committed checkpoint trims what it already holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KVFS_FLOG_TMP KVCKPT_FREED_FILE ".tmp"

#include "tier/l2/l2_i.h"

static int open_log(struct l2 *l2, const char *name, int flags)
{
	int fd = openat(l2->dir_fd, name, O_WRONLY | O_APPEND | O_CREAT |
			O_CLOEXEC | flags, 0600);

	return fd < 0 ? -errno : fd;
}

int l2_flog_load(struct l2 *l2, struct kvckpt_freed **out, size_t *n,
		 bool *damaged)
{
	struct kvckpt_freed *v = NULL;
	struct stat sb;
	size_t cnt, i, good;
	ssize_t got;
	int fd;

	*out = NULL;
	*n = 0;
	*damaged = false;
	fd = openat(l2->dir_fd, KVCKPT_FREED_FILE, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT)
		return -errno;
	if (fd >= 0) {
		if (fstat(fd, &sb)) {
			close(fd);
			return -errno;
		}
		cnt = (size_t)sb.st_size / sizeof(*v);
		v = malloc((cnt ? cnt : 1) * sizeof(*v));
		if (!v) {
			close(fd);
			return -ENOMEM;
		}
		got = cnt ? pread(fd, v, cnt * sizeof(*v), 0) : 0;
		close(fd);
		if (got < 0) {
			free(v);
			return -errno;
		}
		cnt = (size_t)got / sizeof(*v);
		for (good = 0, i = 0; i < cnt; i++) {
			if (kvrec_sum(&v[i], offsetof(struct kvckpt_freed, sum),
				      l2->salt) != v[i].sum)
				break;
			good++;
		}
		*damaged = good != cnt ||
			   (uint64_t)sb.st_size % sizeof(*v) != 0;
		*out = v;
		*n = good;
	}
	fd = open_log(l2, KVCKPT_FREED_FILE, 0);
	if (fd < 0) {
		free(v);
		*out = NULL;
		return fd;
	}
	l2->flog_fd = fd;
	l2->flog_bytes = *n * sizeof(*v);
	if (*damaged && ftruncate(fd, (off_t)l2->flog_bytes))
		l2_logf(l2, "l2_dir %s: cannot cut the unlink log's damaged "
			"tail: %s", l2->dir, strerror(errno));
	return 0;
}

void l2_flog_append(struct l2 *l2, uint32_t seg, uint32_t blk, uint64_t seq)
{
	struct kvckpt_freed f = { .seg = seg, .blk = blk, .seq = seq };

	if (l2->flog_fd < 0)
		return;
	f.sum = kvrec_sum(&f, offsetof(struct kvckpt_freed, sum), l2->salt);
	if (write(l2->flog_fd, &f, sizeof(f)) == (ssize_t)sizeof(f)) {
		l2->flog_bytes += sizeof(f);
		return;
	}
	/* cannot record it: no later checkpoint may be trusted without it
	 * (the next mount scans instead) */
	l2->flog_failed = true;
	unlinkat(l2->dir_fd, KVCKPT_FILE, 0);
}

void l2_flog_trim(struct l2 *l2, uint64_t mark)
{
	uint8_t *keep = NULL;
	size_t len;
	int fd, rc = 0;

	pthread_mutex_lock(&l2->lock);
	if (l2->flog_fd < 0 || mark > l2->flog_bytes)
		goto out;
	len = (size_t)(l2->flog_bytes - mark);
	if (len && !(keep = malloc(len))) {
		rc = -ENOMEM;
		goto out;
	}
	fd = openat(l2->dir_fd, KVCKPT_FREED_FILE, O_RDONLY | O_CLOEXEC);
	if (fd < 0 ||
	    (len && pread(fd, keep, len, (off_t)mark) != (ssize_t)len))
		rc = errno ? -errno : -EIO;
	if (fd >= 0)
		close(fd);
	if (rc)
		goto out;
	fd = openat(l2->dir_fd, KVFS_FLOG_TMP, O_WRONLY | O_CREAT | O_TRUNC |
		    O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	if ((len && write(fd, keep, len) != (ssize_t)len) || fsync(fd))
		rc = errno ? -errno : -EIO;
	close(fd);
	if (!rc && renameat(l2->dir_fd, KVFS_FLOG_TMP, l2->dir_fd,
			    KVCKPT_FREED_FILE))
		rc = -errno;
	if (!rc) {
		fd = open_log(l2, KVCKPT_FREED_FILE, 0);
		if (fd < 0) {
			/* appends would go to the old, unlinked file */
			rc = fd;
			l2->flog_failed = true;
			unlinkat(l2->dir_fd, KVCKPT_FILE, 0);
		} else {
			close(l2->flog_fd);
			l2->flog_fd = fd;
			l2->flog_bytes = len;
		}
	}
out:
	pthread_mutex_unlock(&l2->lock);
	free(keep);
	if (rc) {
		/* the untrimmed log is a superset: still right, only longer */
		unlinkat(l2->dir_fd, KVFS_FLOG_TMP, 0);
		l2_logf(l2, "l2_dir %s: cannot trim the unlink log: %s",
			l2->dir, strerror(-rc));
	}
}
