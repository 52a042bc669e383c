/*
 * fs_ctl.c - the read-only files of /.kvfs: stats (JSON), metrics
 * (Prometheus text), both from fs_metrics.c's table, config (the mount's
 * effective options) and version.
 *
 * Sizes: a stat renders the file for its caller and reports that length;
 * the rendering is kept (ctl_snap, a few slots) for the same process's
 * next open within a short while, so `tar`, `rsync` and `cp -a`, which
 * stat and then open, read exactly as many bytes as stat said; the same
 * process's stats within a second report it again (the open's permission
 * check asks too). An open
 * without such a stat renders afresh; fstat on the open file reports its
 * snapshot's length. Each open has its own snapshot, so reads at any
 * offset agree.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs_i.h"

#include "fs/fs_metrics.h"

/* The files of /.kvfs, by number (fs_dir.c lists them, fs_inode.c finds
 * them by name). */
const char *const fs_ctl_names[FS_CTL_NFILES] = {
	[FS_CTL_STATS] = "stats",
	[FS_CTL_METRICS] = "metrics",
	[FS_CTL_CONFIG] = "config",
	[FS_CTL_VERSION] = "version",
};

/* How long a stat's rendering waits for the same process's open. */
#define CTL_KEEP_NS 2000000000LL
/* How long the same process's next stat reports that rendering again
 * instead of rendering afresh: the kernel asks again (attributes of these
 * files are never cached) for the permission check of the open that
 * follows a stat, once a clock tick has passed, and that must not replace
 * what the stat sized. */
#define CTL_RESTAT_NS 1000000000LL

static int render(struct fs *fs, const struct fs_cred *who, int file,
		  char **buf, size_t *len)
{
	struct fs_sbuf b = { 0 };
	int err = 0;

	switch (file) {
	case FS_CTL_STATS:
		err = fs_metrics_render(fs, FS_METRICS_JSON, who, &b);
		break;
	case FS_CTL_METRICS:
		err = fs_metrics_render(fs, FS_METRICS_PROM, who, &b);
		break;
	case FS_CTL_CONFIG:
		fs_sb_printf(&b, "%s", fs->cfg.config_text);
		break;
	case FS_CTL_VERSION:
		fs_sb_printf(&b, "kvfs %s\n", KVFS_VERSION_STRING);
		break;
	default:
		return -ENOENT;
	}
	if (!err && b.oom)
		err = -ENOMEM;
	if (!err && !b.p) /* nothing printed (an empty config) */
		b.p = calloc(1, 1);
	if (!err && !b.p)
		err = -ENOMEM;
	if (err) {
		free(b.p);
		return err;
	}
	*buf = b.p;
	*len = b.len;
	return 0;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static bool snap_is(const struct fs_ctl_snap *s, int file,
		    const struct fuse_ctx *c)
{
	return s->buf && s->file == file && s->pid == c->pid &&
	       s->uid == c->uid && s->gid == c->gid;
}

/* Keeps buf (taken over) as the caller's latest rendering of file. */
static void snap_keep(struct fs *fs, const struct fuse_ctx *c, int file,
		      char *buf, size_t len)
{
	struct fs_priv *p = fs->priv;
	struct fs_ctl_snap *slot = NULL;
	int64_t now = mono_ns(), oldest = INT64_MAX;

	pthread_mutex_lock(&p->ctl_lock);
	for (size_t i = 0; i < sizeof(p->ctl_snap) / sizeof(p->ctl_snap[0]);
	     i++) {
		struct fs_ctl_snap *s = &p->ctl_snap[i];
		int64_t at = (int64_t)s->at.tv_sec * 1000000000LL +
			     s->at.tv_nsec;

		if (snap_is(s, file, c) || !s->buf) {
			slot = s;
			break;
		}
		if (at < oldest) {
			oldest = at;
			slot = s;
		}
	}
	free(slot->buf);
	*slot = (struct fs_ctl_snap){ buf, len, file, c->pid, c->uid, c->gid,
				      { now / 1000000000LL,
					now % 1000000000LL } };
	pthread_mutex_unlock(&p->ctl_lock);
}

/* The caller's kept rendering of file and its age in ns, or NULL; with
 * ctl_lock held. */
static struct fs_ctl_snap *snap_find(struct fs_priv *p,
				     const struct fuse_ctx *c, int file,
				     int64_t *age)
{
	for (size_t i = 0; i < sizeof(p->ctl_snap) / sizeof(p->ctl_snap[0]);
	     i++) {
		struct fs_ctl_snap *s = &p->ctl_snap[i];

		if (snap_is(s, file, c)) {
			*age = mono_ns() - ((int64_t)s->at.tv_sec *
					    1000000000LL + s->at.tv_nsec);
			return s;
		}
	}
	return NULL;
}

/* The length of the caller's kept rendering of file, when it is younger
 * than CTL_RESTAT_NS; it stays kept. */
static bool snap_len(struct fs *fs, const struct fuse_ctx *c, int file,
		     size_t *len)
{
	struct fs_priv *p = fs->priv;
	struct fs_ctl_snap *s;
	bool found = false;
	int64_t age;

	pthread_mutex_lock(&p->ctl_lock);
	s = snap_find(p, c, file, &age);
	if (s && age <= CTL_RESTAT_NS) {
		*len = s->len;
		found = true;
	}
	pthread_mutex_unlock(&p->ctl_lock);
	return found;
}

/* The caller's kept rendering of file, taken out of its slot (fresh
 * enough), or NULL. */
static char *snap_take(struct fs *fs, const struct fuse_ctx *c, int file,
		       size_t *len)
{
	struct fs_priv *p = fs->priv;
	struct fs_ctl_snap *s;
	char *buf = NULL;
	int64_t age;

	pthread_mutex_lock(&p->ctl_lock);
	s = snap_find(p, c, file, &age);
	if (s) {
		if (age <= CTL_KEEP_NS) {
			buf = s->buf;
			*len = s->len;
		} else {
			free(s->buf);
		}
		s->buf = NULL;
	}
	pthread_mutex_unlock(&p->ctl_lock);
	return buf;
}

void fs_ctl_destroy(struct fs *fs)
{
	struct fs_priv *p = fs->priv;

	for (size_t i = 0; i < sizeof(p->ctl_snap) / sizeof(p->ctl_snap[0]);
	     i++)
		free(p->ctl_snap[i].buf);
	pthread_mutex_destroy(&p->ctl_lock);
}

/* The reader's credentials, NULL when it sees everything anyway. */
static const struct fs_cred *reader(fuse_req_t req, struct fs_cred *c)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	if (ctx->uid == 0 || ctx->uid == getuid())
		return NULL;
	fs_cred_of_req(req, c);
	return c;
}

int fs_ctl_open(struct fs *fs, fuse_req_t req, int file, char **buf,
		size_t *len)
{
	struct fs_cred c;

	*buf = snap_take(fs, fuse_req_ctx(req), file, len);
	if (*buf)
		return 0;
	return render(fs, reader(req, &c), file, buf, len);
}

/*
 * The length of the snapshot of ino that process pid has open, if any:
 * the kernel does not say which file an fstat(2) is about, and tar
 * compares the size it gets there with the one it archived.
 */
static bool open_by(struct fs *fs, pid_t pid, fuse_ino_t ino, size_t *len)
{
	struct fs_priv *p = fs->priv;
	bool found = false;

	pthread_mutex_lock(&p->lock);
	for (struct fs_fh *fh = p->fh_head.next; fh != &p->fh_head && !found;
	     fh = fh->next)
		if (fh->kind == FS_FH_CTL && fh->ino == ino &&
		    fh->pid == pid && fh->ctl_buf && !fh->ctl_closed) {
			found = true;
			*len = fh->ctl_len;
		}
	pthread_mutex_unlock(&p->lock);
	return found;
}

int fs_ctl_attr(struct fs *fs, fuse_req_t req, fuse_ino_t ino,
		struct fuse_file_info *fi, struct stat *st)
{
	struct fs_priv *p = fs->priv;
	mode_t mode = fs->cfg.ctl_mode_set ? fs->cfg.ctl_mode : 0444;
	int file = (int)(ino - FS_INO_CTL_FIRST);
	struct fs_fh *fh;
	struct fs_cred c;
	char *buf;
	size_t len;
	bool found;
	int err;

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = getuid(); /* the mount's owner */
	st->st_gid = fs->cfg.ctl_gid_set ? fs->cfg.ctl_gid : getgid();
	st->st_mtim = st->st_atim = st->st_ctim = p->mount_time;
	if (ino == FS_INO_KVFS) {
		/* searchable by whoever may read the files */
		st->st_mode = S_IFDIR | mode | ((mode & 0444) >> 2);
		st->st_nlink = 2;
		return 0;
	}
	st->st_mode = S_IFREG | mode;
	st->st_nlink = 1;
	clock_gettime(CLOCK_REALTIME, &st->st_mtim);
	fh = fi ? (struct fs_fh *)(uintptr_t)fi->fh : NULL;
	if (fh && fh->kind == FS_FH_CTL && fh->ino == ino) {
		len = fh->ctl_len; /* the request's own open file */
		found = true;
	} else {
		found = open_by(fs, fuse_req_ctx(req)->pid, ino, &len);
	}
	if (found || /* fstat: the open file's snapshot */
	    snap_len(fs, fuse_req_ctx(req), file, &len)) { /* restat */
		st->st_size = (off_t)len;
		st->st_blocks = (blkcnt_t)((len + 511) / 512);
		return 0;
	}
	err = render(fs, reader(req, &c), file, &buf, &len);
	if (err)
		return err;
	st->st_size = (off_t)len;
	st->st_blocks = (blkcnt_t)((len + 511) / 512); /* not sparse */
	snap_keep(fs, fuse_req_ctx(req), file, buf, len);
	return 0;
}
