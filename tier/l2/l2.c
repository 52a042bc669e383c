/*
 * l2.c - the L2 engine's life cycle: l2_open (lock the directory, read or
 * make the salt, recover, start the threads), l2_close and stats. It calls
 * the other files and none calls it (their shared helpers: l2_util.c).
 * The map of the other l2_*.c files, the lock order and what each lock
 * protects are at the top of l2_i.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "tier/l2/l2_i.h"

int l2_checkpoint(struct l2 *l2)
{
	return l2 ? l2_ckpt_write(l2, false) : -EINVAL;
}

void l2_get_stats(struct l2 *l2, struct l2_stats *st)
{
	pthread_mutex_lock(&l2->lock);
	*st = l2->st;
	st->queued_bytes = l2->queued_bytes;
	st->segments = l2->nsegs;
	st->capacity = l2->cap;
	st->disk_bytes = l2->used;
	st->seg_target = l2->seg_target;
	st->reserve = l2->reserve;
	st->direct = l2->direct;
	pthread_mutex_unlock(&l2->lock);
}

/* ------------------------------------------------------- open, close */

static int read_salt(struct l2 *l2, char *err, size_t errlen)
{
	char buf[32] = { 0 };
	ssize_t n;
	int fd;

	fd = openat(l2->dir_fd, "l2.id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char *end;

		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n >= 16) {
			buf[16] = 0;
			l2->salt = strtoull(buf, &end, 16);
			if (end == buf + 16)
				return 0;
		}
		snprintf(err, errlen, "l2_dir %s: l2.id is damaged; remove the "
			 "directory's contents to start an empty L2", l2->dir);
		return -EBADMSG;
	}
	if (errno != ENOENT)
		goto fail;
	l2->salt_new = true; /* l2_recover says so if segments were there */
	if (getrandom(&l2->salt, sizeof(l2->salt), 0) != sizeof(l2->salt)) {
		uint64_t t = l2_now_ns();

		l2->salt = kvrec_sum(&t, sizeof(t), 0) ^ (uint64_t)getpid();
	}
	fd = openat(l2->dir_fd, "l2.id.tmp", O_WRONLY | O_CREAT | O_TRUNC |
		    O_CLOEXEC, 0600);
	if (fd < 0)
		goto fail;
	n = snprintf(buf, sizeof(buf), "%016" PRIx64 "\n", l2->salt);
	if (write(fd, buf, (size_t)n) != n || fsync(fd)) {
		int e = errno ? errno : EIO;

		close(fd);
		errno = e;
		goto fail;
	}
	close(fd);
	if (renameat(l2->dir_fd, "l2.id.tmp", l2->dir_fd, "l2.id"))
		goto fail;
	return 0;
fail:
	n = -errno;
	snprintf(err, errlen, "l2_dir %s: %s", l2->dir, strerror((int)-n));
	return (int)n;
}

/* Raise the soft fd limit when the log has many segments (one fd each). */
static void raise_nofile(struct l2 *l2)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)l2->max_segs + 1024;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
}

int l2_open(const struct l2_config *cfg, struct l2 **out, char *err,
	    size_t errlen)
{
	struct l2 *l2;
	struct stat sb;
	int rc;

	if (errlen)
		err[0] = 0;
	if (!cfg || !cfg->dir || !cfg->dir[0] || !out) {
		snprintf(err, errlen, "l2: no l2_dir");
		return -EINVAL;
	}
	l2 = calloc(1, sizeof(*l2));
	if (!l2)
		return -ENOMEM;
	l2->cfg = *cfg;
	l2->dir_fd = -1;
	l2->lock_fd = -1;
	l2->efd = -1;
	l2->direct = true;
	l2->punch_ok = true;
	l2->next_seq = 1;
	l2->next_seg = 1;
	l2->flog_fd = -1;
	l2->mv_lo = UINT32_MAX; /* no moves yet (l2_reclaim.c) */
	pthread_mutex_init(&l2->ckpt_lock, NULL);
	l2_cond_init_monotonic(&l2->ck_cond); /* timed (l2_deadline) */
	pthread_mutex_init(&l2->lock, NULL);
	pthread_cond_init(&l2->idle_cond, NULL);
	l2_cond_init_monotonic(&l2->free_cond); /* l2_sync_frees */
	pthread_cond_init(&l2->rc_cond, NULL);
	pthread_cond_init(&l2->move_cond, NULL);
	pthread_mutex_init(&l2->mt_lock, NULL);
	pthread_cond_init(&l2->mt_cv, NULL);
	pthread_cond_init(&l2->mt_done, NULL);
	if (!l2->cfg.max_queue)
		l2->cfg.max_queue = 256ull << 20;
	if (l2->cfg.read_timeout_ms <= 0)
		l2->cfg.read_timeout_ms = L2_READ_TIMEOUT_MS_DEFAULT;
	l2->dir = strdup(cfg->dir);
	if (!l2->dir || posix_memalign(&l2->zero, L2_ALIGN, L2_ALIGN)) {
		rc = -ENOMEM;
		goto fail;
	}
	memset(l2->zero, 0, L2_ALIGN);

	/* four segments of at least two 4 KiB records */
	if (cfg->size < 8ull * L2_ALIGN) {
		snprintf(err, errlen, "l2_size %" PRIu64 " is too small (at least "
			 "%u bytes)", cfg->size, 8 * L2_ALIGN);
		rc = -EINVAL;
		goto fail;
	}
	l2->seg_size = cfg->seg_size ? cfg->seg_size : L2_SEG_SIZE_DEFAULT;
	if (l2->seg_size > cfg->size / 4)
		l2->seg_size = cfg->size / 4;
	l2->seg_size &= ~(uint64_t)(L2_ALIGN - 1);
	if (l2->seg_size < 2 * L2_ALIGN)
		l2->seg_size = 2 * L2_ALIGN;
	if (l2->seg_size > (uint64_t)UINT32_MAX * L2_ALIGN / 2)
		l2->seg_size = (uint64_t)UINT32_MAX * L2_ALIGN / 2;
	l2->max_segs = (uint32_t)(cfg->size / l2->seg_size);
	l2_set_space(l2, cfg->size, cfg->size);

	l2->dir_fd = open(cfg->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l2->dir_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "l2_dir %s: %s", cfg->dir, strerror(-rc));
		goto fail;
	}
	if (fstat(l2->dir_fd, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
		rc = -ENOTDIR;
		snprintf(err, errlen, "l2_dir %s: %s", cfg->dir, strerror(-rc));
		goto fail;
	}
	l2->lock_fd = openat(l2->dir_fd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC,
			     0600);
	if (l2->lock_fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "l2_dir %s: %s", cfg->dir, strerror(-rc));
		goto fail;
	}
	if (flock(l2->lock_fd, LOCK_EX | LOCK_NB)) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		snprintf(err, errlen, "l2_dir %s is in use by another kvfs "
			 "(its LOCK file is held)", cfg->dir);
		goto fail;
	}
	/* may the directory be written? (root ignores modes; a read-only
	 * mount does not) */
	if (faccessat(l2->dir_fd, ".", W_OK, AT_EACCESS) ||
	    access(cfg->dir, W_OK)) {
		rc = -errno;
		snprintf(err, errlen, "l2_dir %s: %s", cfg->dir, strerror(-rc));
		goto fail;
	}
	rc = read_salt(l2, err, errlen);
	if (rc)
		goto fail;
	raise_nofile(l2);
	rc = l2_recover(l2, err, errlen);
	if (rc)
		goto fail;
	{
		/* l2_size beyond what the filesystem can give (the default's
		 * 256 MiB floor on a small disk, a disk shared with others):
		 * smaller segments now, so that when it fills up (see
		 * l2_disk_full) reclaim frees a part of the log, not all */
		struct statvfs sv;

		if (fstatvfs(l2->dir_fd, &sv) == 0) {
			uint64_t est = (uint64_t)sv.f_bavail * sv.f_frsize +
				       l2->used;

			if (est < cfg->size)
				l2_set_space(l2, cfg->size, est);
		}
	}
	rc = l2_io_start(l2);
	if (rc) {
		snprintf(err, errlen, "l2: io_uring: %s", strerror(-rc));
		goto fail;
	}
	rc = l2_reclaim_start(l2);
	if (rc) {
		snprintf(err, errlen, "l2: reclaim thread: %s", strerror(-rc));
		goto fail;
	}
	rc = l2_ckpt_start(l2);
	if (rc) {
		snprintf(err, errlen, "l2: checkpoint thread: %s", strerror(-rc));
		goto fail;
	}
	l2_mt_start(l2);
	l2->opened = true;
	*out = l2;
	return 0;
fail:
	l2_close(l2);
	return rc;
}

void l2_close(struct l2 *l2)
{
	size_t i;

	if (!l2)
		return;
	pthread_mutex_lock(&l2->lock);
	l2->closing = true;
	pthread_mutex_unlock(&l2->lock);
	/* queued appends finish first (the reclaim thread may be needed to
	 * make room for them), then the threads stop */
	if (l2->io_started && l2->rc_started)
		l2_flush(l2);
	l2_ckpt_stop(l2);
	l2_reclaim_stop(l2);
	l2_io_stop(l2);
	l2_mt_stop(l2);
	/* quiet now: the index as it stands, for a fast next open */
	if (l2->opened && l2->cfg.checkpoint_s >= 0)
		l2_ckpt_write(l2, true);
	if (l2->flog_fd >= 0)
		close(l2->flog_fd);
	pthread_mutex_lock(&l2->lock);
	for (i = 0; i < l2->nsegs; i++)
		l2_seg_unref(l2, l2->segs[i]);
	pthread_mutex_unlock(&l2->lock);
	free(l2->segs);
	for (i = 0; i < l2->nns; i++)
		free(l2->ns_names[i]);
	free(l2->ns_names);
	while (l2->bufs) {
		struct l2_buf *b = l2->bufs;

		l2->bufs = b->next;
		free(b->p);
		free(b);
	}
	while (l2->wss) {
		struct l2_ws_item *it = l2->wss;

		l2->wss = it->next;
		codec_ws_free(it->ws);
		free(it);
	}
	if (l2->lock_fd >= 0)
		close(l2->lock_fd); /* releases the flock */
	if (l2->dir_fd >= 0)
		close(l2->dir_fd);
	pthread_cond_destroy(&l2->idle_cond);
	pthread_cond_destroy(&l2->free_cond);
	pthread_cond_destroy(&l2->rc_cond);
	pthread_cond_destroy(&l2->move_cond);
	pthread_cond_destroy(&l2->mt_cv);
	pthread_cond_destroy(&l2->mt_done);
	pthread_mutex_destroy(&l2->mt_lock);
	pthread_cond_destroy(&l2->ck_cond);
	pthread_mutex_destroy(&l2->ckpt_lock);
	pthread_mutex_destroy(&l2->lock);
	free(l2->zero);
	free(l2->dir);
	free(l2);
}
