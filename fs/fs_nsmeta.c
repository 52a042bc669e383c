/*
 * fs_nsmeta.c - namespace attributes across a warm restart.
 *
 * L2 records carry a chunk's namespace name, so recovery brings every
 * namespace back, but not what fs and the engine keep about it: mode,
 * owner, user.kvfs.chunk_bytes, user.kvfs.dtype (with its shuffle) and
 * user.kvfs.chunk_tokens.
 * Without them a private namespace would come back world-readable, its
 * owner could no longer write, and short chunks would be accepted. So
 * while L2 is on, fs keeps them (and the root directory's mode and owner)
 * in l2_dir/namespaces (format: fs_nsfile.c), rewritten whole and
 * atomically after every change; namespace changes are rare, so the
 * rewrite is synchronous and the syscall returns only once it is on disk.
 *
 * Fail closed: when the file is missing or does not verify, or does not
 * describe a namespace that L2 recovery brought back, that namespace gets
 * mode 0700 owned by the daemon's user (root for a system mount): only
 * that user can read its chunks until an operator chmods or chowns it. A
 * damaged file is kept as namespaces.bad for inspection and a fresh one
 * written.
 *
 * Without L2 (no l2_dir, or L2 disabled at run time because l2_dir is
 * missing or unwritable) nothing survives a restart, and nothing is kept.
 *
 * Locks: fs_nsmeta.lock serializes saves, snapshot and write together, so
 * the last write always holds the state after the last change. Order:
 * fs_nsmeta.lock -> fs_priv.lock -> tier.lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs_i.h"

struct fs_nsmeta {
	pthread_mutex_t lock;
	int dirfd;   /* l2_dir; set at load */
	char *dir;   /* for log lines */
	bool dirty;  /* lock: the last save failed */
};

/* What the file must hold now. 0 or -ENOMEM. */
static int snapshot(struct fs *fs, struct fs_nsfile *f)
{
	uint32_t *ids;
	long n = fs_ns_ids(fs, &ids);

	memset(f, 0, sizeof(*f));
	if (n < 0)
		return (int)n;
	f->ent = calloc(n ? (size_t)n : 1, sizeof(*f->ent));
	if (!f->ent) {
		free(ids);
		return -ENOMEM;
	}
	fs_nsattr_get(fs, 0, &f->root);
	for (long i = 0; i < n; i++) {
		struct fs_nsfile_ent *e = &f->ent[f->n];
		struct tier_ns_info ni;

		/* gone meanwhile, or mkdir has not filled its record yet (it
		 * saves again once it has) */
		if (tier_ns_info(fs->tier, ids[i], &ni) ||
		    fs_nsattr_get(fs, ids[i], &e->a))
			continue;
		memcpy(e->name, ni.name, sizeof(e->name));
		e->chunk_bytes = ni.chunk_bytes;
		e->chunk_tokens = ni.chunk_tokens;
		e->shuffle = ni.shuffle;
		f->n++;
	}
	free(ids);
	return 0;
}

static int save_locked(struct fs *fs, struct fs_nsmeta *nm)
{
	struct fs_nsfile f;
	char *buf = NULL;
	size_t len = 0;
	int rc;

	rc = snapshot(fs, &f);
	if (!rc)
		rc = fs_nsfile_format(&f, &buf, &len);
	fs_nsfile_free(&f);
	if (!rc)
		rc = fs_nsfile_write(nm->dirfd, buf, len);
	free(buf);
	if (rc)
		fs_log(fs, "l2_dir %s: cannot save namespace attributes to %s: %s "
			"(retried at the next change and at unmount)", nm->dir,
			FS_NSFILE_NAME, strerror(-rc));
	nm->dirty = rc != 0;
	return rc;
}

void fs_nsmeta_save(struct fs *fs)
{
	struct fs_nsmeta *nm = fs->nsmeta;

	if (!nm)
		return;
	pthread_mutex_lock(&nm->lock);
	save_locked(fs, nm);
	pthread_mutex_unlock(&nm->lock);
}

/* Applies the file's entries; marks the ids it described in *done (a
 * malloc'd array of *ndone ids). */
static void apply(struct fs *fs, struct fs_nsmeta *nm,
		  const struct fs_nsfile *f, uint32_t *done, size_t *ndone)
{
	fs_nsattr_set(fs, 0, &f->root);
	for (size_t i = 0; i < f->n; i++) {
		const struct fs_nsfile_ent *e = &f->ent[i];
		uint32_t id;
		int rc;

		rc = tier_ns_find(fs->tier, e->name, &id);
		if (rc == -ENOENT) /* no chunks in L2: the operator made it */
			rc = tier_ns_create(fs->tier, e->name, &id);
		if (rc) {
			fs_log(fs, "l2_dir %s: namespace %s: %s", nm->dir,
				e->name, strerror(-rc));
			continue;
		}
		if (e->chunk_bytes) {
			rc = tier_ns_set_chunk_bytes(fs->tier, id,
						     e->chunk_bytes);
			if (rc)
				fs_log(fs, "l2_dir %s: namespace %s: chunk_bytes "
					"%llu not restored: %s (max_chunk is "
					"smaller now?)", nm->dir, e->name,
					(unsigned long long)e->chunk_bytes,
					strerror(-rc));
		}
		if (e->chunk_tokens)
			tier_ns_set_chunk_tokens(fs->tier, id, e->chunk_tokens);
		if (e->a.dtype[0]) {
			rc = tier_ns_set_shuffle(fs->tier, id, e->shuffle);
			if (rc)
				fs_log(fs, "l2_dir %s: namespace %s: shuffle %d "
					"not restored: %s", nm->dir, e->name,
					e->shuffle, strerror(-rc));
		}
		if (fs_nsattr_set(fs, id, &e->a))
			continue; /* ENOMEM: fs's default is fail-closed too */
		done[(*ndone)++] = id;
	}
}

static int id_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Namespaces L2 recovery brought back that the file did not describe:
 * 0700, owned by the daemon's user. Returns how many.
 */
static long fail_closed(struct fs *fs, uint32_t *done, size_t ndone)
{
	struct fs_nsattr a = { .mode = S_IFDIR | 0700 };
	uint32_t *ids;
	long n = fs_ns_ids(fs, &ids), count = 0;

	if (n < 0)
		return n;
	a.uid = getuid();
	a.gid = getgid();
	clock_gettime(CLOCK_REALTIME, &a.mtime);
	a.ctime = a.mtime;
	if (ndone)
		qsort(done, ndone, sizeof(*done), id_cmp);
	for (long i = 0; i < n; i++) {
		if (ndone && bsearch(&ids[i], done, ndone, sizeof(*done),
				     id_cmp))
			continue;
		fs_nsattr_set(fs, ids[i], &a);
		count++;
	}
	free(ids);
	return count;
}

void fs_nsmeta_load(struct fs *fs, const char *l2_dir)
{
	struct fs_nsmeta *nm;
	struct tier_stats st;
	struct fs_nsfile f = { 0 };
	uint32_t *done = NULL;
	size_t ndone = 0;
	char *buf = NULL;
	size_t len = 0;
	long nfc;
	int rc;

	if (!l2_dir)
		return;
	tier_get_stats(fs->tier, &st);
	if (!st.l2_capacity)
		return; /* L2 is off: nothing survives a restart */
	nm = calloc(1, sizeof(*nm));
	if (!nm || !(nm->dir = strdup(l2_dir))) {
		free(nm);
		fs_log(fs, "l2_dir %s: namespace attributes are not kept: out of "
			"memory", l2_dir);
		return;
	}
	nm->dirfd = open(l2_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (nm->dirfd < 0) {
		fs_log(fs, "l2_dir %s: namespace attributes are not kept: %s",
			l2_dir, strerror(errno));
		free(nm->dir);
		free(nm);
		return;
	}
	pthread_mutex_init(&nm->lock, NULL);
	fs->nsmeta = nm;

	rc = fs_nsfile_read(nm->dirfd, &buf, &len);
	if (!rc) {
		rc = fs_nsfile_parse(buf, len, &f);
		if (rc == -ENOMEM) {
			fs_log(fs, "l2_dir %s: cannot load %s: %s", l2_dir,
				FS_NSFILE_NAME, strerror(-rc));
		} else if (rc) {
			fs_log(fs, "l2_dir %s: %s is damaged (%s); kept as %s.bad",
				l2_dir, FS_NSFILE_NAME, rc == -ENOTSUP ?
				"unknown format version" : strerror(-rc),
				FS_NSFILE_NAME);
			renameat(nm->dirfd, FS_NSFILE_NAME, nm->dirfd,
				 FS_NSFILE_NAME ".bad");
		}
	} else if (rc != -ENOENT) {
		fs_log(fs, "l2_dir %s: cannot read %s: %s", l2_dir,
			FS_NSFILE_NAME, strerror(-rc));
	}
	free(buf);
	if (!rc) {
		done = malloc((f.n ? f.n : 1) * sizeof(*done));
		if (done)
			apply(fs, nm, &f, done, &ndone);
		else
			rc = -ENOMEM;
		fs_nsfile_free(&f);
	}
	nfc = fail_closed(fs, done, ndone);
	free(done);
	if (nfc > 0)
		fs_log(fs, "l2_dir %s: %ld namespace(s) recovered from L2 have no "
			"saved attributes (%s %s); failing closed: mode 0700, "
			"owner uid %u gid %u, until an operator sets them",
			l2_dir, nfc, FS_NSFILE_NAME, rc == -ENOENT ?
			"is missing" : rc ? "is unusable" :
			"does not list them", (unsigned)getuid(),
			(unsigned)getgid());
	else if (nfc < 0)
		fs_log(fs, "l2_dir %s: %s; namespaces keep fs's fail-closed "
			"default", l2_dir, strerror((int)-nfc));
	/* the file describes what is served from now on */
	if (rc || nfc)
		fs_nsmeta_save(fs);
}

void fs_nsmeta_destroy(struct fs *fs)
{
	struct fs_nsmeta *nm = fs->nsmeta;

	if (!nm)
		return;
	pthread_mutex_lock(&nm->lock);
	if (nm->dirty)
		save_locked(fs, nm);
	pthread_mutex_unlock(&nm->lock);
	fs->nsmeta = NULL;
	close(nm->dirfd);
	free(nm->dir);
	pthread_mutex_destroy(&nm->lock);
	free(nm);
}
