/*
 * fs_pjournal.c - the names of path namespaces, kept in l2_dir/paths so a
 * warm restart finds every file the engine recovered under its path.
 *
 * The engine's L2 records carry a namespace and a key, not a path (a key
 * is XXH3-128 of the path, which cannot be inverted), so the names live
 * here: an append-only log of records, each
 *
 *   u32 magic "KVP1" (0x3150564b, little-endian), or "KVP2" (0x3250564b)
 *       for a record that carries attributes
 *   u32 check: low 32 bits of XXH3-64 of the bytes after it (type to the
 *       end of the path)
 *   u8  type: 'N' the namespace is in path mode, 'K' back to keys,
 *       'D' a directory, 'X' a directory removed, 'F' a file published,
 *       'Q' its eviction mode (user.kvfs.evict and quota_bytes): the
 *       "path" is "policy" or "never:QUOTA" (N and K reset it to policy)
 *   u8  length of the namespace's name (1..127)
 *   u16 length of the path (0..KVFS_PATH_MAX), little-endian
 *   KVP2 only (24 bytes, little-endian): u32 mode (permission bits,
 *       07777), u32 uid, u32 gid, u32 mtime nanoseconds (< 10^9), i64
 *       mtime seconds (0 s and 0 ns: the file has no mtime of its own,
 *       its name shows the publication's time; fs_pattr.c)
 *   the namespace's name, then the path (no NULs)
 *
 * appended with one write(2) when a file is published or a directory made
 * or removed, and fdatasync'ed by the background thread (so a machine
 * crash loses at most the last quarter second of names: those files are
 * then unreachable, and dropped). 'F' and 'D' records are KVP2: the
 * file's or directory's mode, owner and mtime as they were when the
 * record was written; a chmod, chown or utimensat of a published file or
 * of a directory appends its record again (by the background thread,
 * before its fdatasync: within a quarter second), so on replay the last
 * record of a name wins. The attributes are read under priv.lock while
 * the journal's lock is held, and written before that lock is dropped:
 * records reach the file in the order their attributes were read, so a
 * chmod racing a publication never ends with the older mode last. A
 * KVP1 'F' or 'D' (journals of older daemons, and files whose attributes
 * are not known: found in L3 in a record of an older daemon) comes back
 * as before: a file 0644, directories 0755, the namespace's owner, the
 * publication time. At mount the log is replayed in order:
 * a file counts only if the engine still holds the key of its path (the
 * check that the record names the right bytes: key = XXH3-128(path)); a
 * record that fails its check ends the replay (a torn tail), as does an
 * unknown magic, a mode past 07777 or nanoseconds past 10^9. Chunks of
 * path namespaces that no record names are unlinked (counted in
 * paths.orphans). The log is then rewritten compacted (a temporary,
 * fsync, rename) with every attribute, and kept open for appends.
 * Directories a file's path implies but no 'D' names come back with mode
 * 0755 and the namespace's owner.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "fs/paths/fs_ptree.h"

#define PJ_NAME "paths"
#define PJ_TMP "paths.tmp"
#define PJ_MAGIC 0x3150564bu
#define PJ_MAGIC_ATTR 0x3250564bu
#define PJ_HDR 12
#define PJ_ATTR 24 /* KVP2: the attributes after the header */
#define PJ_REC_MAX (PJ_HDR + PJ_ATTR + KVFS_NS_NAME_MAX + FS_PATH_MAX)
#define PJ_MAX_FILE (UINT64_C(1) << 32)

/* Records of lost path files kept by a compaction (see apply): at most
 * this many bytes (some 60,000 paths); past it a lost path is refused
 * from L3 for the mount's life only, so the log cannot grow without bound
 * when files are dropped faster than they are written again. */
#define PJ_LOST_MAX (8u << 20)

/* Lock order: lock, then priv.lock (fs_pjournal_add_file and _dir read
 * the attributes they write under both); nothing takes lock while it
 * holds priv.lock. */
struct fs_pjournal {
	pthread_mutex_t lock; /* fd, dirty */
	int dirfd, fd;
	bool dirty;
};

static void put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	put16(p + 2, (uint16_t)(v >> 16));
}

static uint32_t get32(const unsigned char *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* Formats one record into buf (PJ_REC_MAX bytes): KVP2 with attributes
 * a, KVP1 without (a NULL). */
static size_t rec_format(unsigned char *buf, char type, const char *ns,
			 const char *path, size_t len,
			 const struct tier_pattr *a)
{
	size_t nl = strlen(ns), at = a ? PJ_ATTR : 0;

	buf[8] = (unsigned char)type;
	buf[9] = (unsigned char)nl;
	put16(buf + 10, (uint16_t)len);
	if (a) {
		put32(buf + PJ_HDR, a->mode & 07777);
		put32(buf + PJ_HDR + 4, a->uid);
		put32(buf + PJ_HDR + 8, a->gid);
		put32(buf + PJ_HDR + 12, a->mtime_nsec);
		put32(buf + PJ_HDR + 16, (uint32_t)(uint64_t)a->mtime_sec);
		put32(buf + PJ_HDR + 20,
		      (uint32_t)((uint64_t)a->mtime_sec >> 32));
	}
	memcpy(buf + PJ_HDR + at, ns, nl);
	memcpy(buf + PJ_HDR + at + nl, path, len);
	put32(buf, a ? PJ_MAGIC_ATTR : PJ_MAGIC);
	put32(buf + 4, (uint32_t)XXH3_64bits(buf + 8, 4 + at + nl + len));
	return PJ_HDR + at + nl + len;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Writes n bytes of records (j->lock held). */
static void append_locked(struct fs *fs, struct fs_pjournal *j,
			  const void *buf, size_t n)
{
	int err;

	if (!n)
		return;
	err = j->fd >= 0 ? write_all(j->fd, buf, n) : 0;
	j->dirty = true;
	if (err)
		fs_log(fs, "l2_dir/%s: %s (names written since are lost at "
		       "the next mount)", PJ_NAME, strerror(-err));
}

void fs_pjournal_add(struct fs *fs, char type, const char *ns,
		     const char *path, size_t len)
{
	struct fs_pjournal *j = fs->priv->paths->journal;
	unsigned char buf[PJ_REC_MAX];
	size_t n;

	if (!j || !ns[0] || len > FS_PATH_MAX)
		return;
	n = rec_format(buf, type, ns, path, len, NULL);
	pthread_mutex_lock(&j->lock);
	append_locked(fs, j, buf, n);
	pthread_mutex_unlock(&j->lock);
}

/* ---------------------------------------------------- attribute records */

/* The record of a file (dir_ino 0: the name holding (ns, key)) or of
 * directory dir_ino as it is now, into buf (priv.lock held): its length,
 * 0 when the name is gone (nothing to write). */
static size_t ent_format(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
			 uint64_t dir_ino, unsigned char *buf)
{
	struct fs_paths *t = fs->priv->paths;
	char path[FS_PATH_MAX + 1];
	struct tier_ns_info ni;
	struct tier_pattr a;
	const struct fs_pent *e;
	const struct fs_pdir *d = NULL;
	int len;

	if (dir_ino) {
		d = fs_ptree_dir_of_ino(t, dir_ino);
		e = d && !d->removed ? d->self : NULL;
	} else {
		e = fs_ptree_by_key(t, ns, key);
		e = e && e->keyed ? e : NULL;
	}
	if (!e || tier_ns_info(fs->tier, e->parent->ns, &ni))
		return 0;
	len = fs_ptree_path(e->parent, e->name, e->len, path);
	if (len < 0)
		return 0;
	if (d)
		fs_pattr_of_dir(d, &a);
	return rec_format(buf, d ? 'D' : 'F', ni.name, path, (size_t)len,
			  d || fs_pattr_of_file(e, &a) ? &a : NULL);
}

/* Appends the record of a file or directory (ent_format): its
 * attributes read under priv.lock with the journal's lock held. */
static void add_ent(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		    uint64_t dir_ino)
{
	struct fs_pjournal *j = fs->priv->paths->journal;
	unsigned char buf[PJ_REC_MAX];
	size_t n;

	if (!j)
		return;
	pthread_mutex_lock(&j->lock);
	pthread_mutex_lock(&fs->priv->lock);
	n = ent_format(fs, ns, key, dir_ino, buf);
	pthread_mutex_unlock(&fs->priv->lock);
	append_locked(fs, j, buf, n);
	pthread_mutex_unlock(&j->lock);
}

void fs_pjournal_add_file(struct fs *fs, uint32_t ns,
			  const struct kvfs_key *key)
{
	add_ent(fs, ns, key, 0);
}

void fs_pjournal_add_dir(struct fs *fs, uint64_t dir_ino)
{
	add_ent(fs, 0, NULL, dir_ino);
}

void fs_pjournal_changed(struct fs *fs, uint32_t ns,
			 const struct kvfs_key *key, uint64_t dir_ino)
{
	struct fs_paths *t = fs->priv->paths;
	struct fs_pjchange *c;

	if (!t->journal)
		return;
	if (t->nchanged) { /* a chmod then a chown: one record */
		c = &t->changed[t->nchanged - 1];
		if (c->dir_ino == dir_ino && c->ns == ns &&
		    (dir_ino || !memcmp(&c->key, key, sizeof(*key))))
			return;
	}
	if (t->nchanged == t->changed_cap) {
		size_t cap = t->changed_cap ? t->changed_cap * 2 : 16;
		struct fs_pjchange *n = realloc(t->changed, cap * sizeof(*n));

		if (!n) { /* said once per failure: lost at a restart */
			fs_log(fs, "l2_dir/%s: out of memory: an attribute "
			       "change is not kept across a restart", PJ_NAME);
			return;
		}
		t->changed = n;
		t->changed_cap = cap;
	}
	c = &t->changed[t->nchanged++];
	memset(c, 0, sizeof(*c));
	c->ns = ns;
	c->dir_ino = dir_ino;
	if (!dir_ino)
		c->key = *key;
}

/* Appends the records of the names whose attributes changed (j->lock
 * held, priv.lock not). */
static void flush_changed(struct fs *fs, struct fs_pjournal *j)
{
	struct fs_paths *t = fs->priv->paths;
	unsigned char *buf = NULL;
	size_t n = 0;

	pthread_mutex_lock(&fs->priv->lock);
	if (t->nchanged)
		buf = malloc(t->nchanged * PJ_REC_MAX);
	for (size_t i = 0; buf && i < t->nchanged; i++) {
		const struct fs_pjchange *c = &t->changed[i];

		n += ent_format(fs, c->ns, &c->key, c->dir_ino, buf + n);
	}
	if (buf || !t->nchanged) { /* else (no memory): the next try */
		t->nchanged = 0;
		if (t->changed_cap > 1024) { /* a burst's memory goes */
			free(t->changed);
			t->changed = NULL;
			t->changed_cap = 0;
		}
	}
	pthread_mutex_unlock(&fs->priv->lock);
	append_locked(fs, j, buf, n);
	free(buf);
}

/* Appends what fs_pjournal_changed asked for, then fdatasyncs when
 * anything was appended since the last one (force: always, an fsync).
 * 0 or -errno (then the next one tries again). */
static int sync_journal(struct fs *fs, bool force)
{
	struct fs_pjournal *j = fs->priv->paths ? fs->priv->paths->journal :
						  NULL;
	bool dirty;
	int err = 0;

	if (!j)
		return 0;
	pthread_mutex_lock(&j->lock);
	flush_changed(fs, j);
	dirty = j->dirty;
	j->dirty = false;
	pthread_mutex_unlock(&j->lock);
	/* j->fd is set at open and closed at unmount only */
	if ((dirty || force) && j->fd >= 0 && fdatasync(j->fd)) {
		err = -errno;
		pthread_mutex_lock(&j->lock);
		j->dirty = true;
		pthread_mutex_unlock(&j->lock);
	}
	return err;
}

void fs_pjournal_sync(struct fs *fs)
{
	sync_journal(fs, false);
}

int fs_pjournal_flush(struct fs *fs)
{
	return sync_journal(fs, true);
}

/* ------------------------------------------------------------- replay */

/* The directory at path's components (all of them, or all but the last
 * with file), made as needed (priv.lock held). NULL: a bad path, a file
 * in the way, the directory limit. */
static struct fs_pdir *walk(struct fs *fs, struct fs_pdir *root,
			    const char *path, size_t len, bool file,
			    const char **last, size_t *lastlen)
{
	struct fs_paths *t = fs->priv->paths;
	struct fs_pdir *d = root;
	size_t i = 0;

	while (i <= len) {
		size_t j = i;
		struct fs_pent *e;

		while (j < len && path[j] != '/')
			j++;
		if (j == i || j - i > 255 ||
		    (j - i == 1 && path[i] == '.') ||
		    (j - i == 2 && path[i] == '.' && path[i + 1] == '.') ||
		    memchr(path + i, '\0', j - i))
			return NULL;
		if (file && j == len) {
			*last = path + i;
			*lastlen = j - i;
			return d;
		}
		e = fs_ptree_find(t, d, path + i, j - i);
		if (!e) {
			if (fs_ptree_mkdir(t, d, path + i, j - i, &e))
				return NULL;
			e->dir->mode = S_IFDIR | 0755;
			e->dir->uid = root->uid;
			e->dir->gid = root->gid;
			clock_gettime(CLOCK_REALTIME, &e->dir->mtime);
			e->dir->ctime = e->dir->mtime;
		} else if (!e->dir) {
			return NULL;
		}
		d = e->dir;
		i = j + 1;
	}
	return d;
}

/* Records being written out (compaction, and the lost files' below). */
struct out {
	unsigned char *buf;
	size_t len, cap;
	int err;
};
static void out_rec(struct out *o, char type, const char *ns,
		    const char *path, size_t len, const struct tier_pattr *a);

/* lost: where the records of files a crash lost go (see below), to be
 * written again by the compaction. */
static void apply(struct fs *fs, char type, const char *ns, const char *path,
		  size_t len, const struct tier_pattr *a, struct out *lost)
{
	struct fs_priv *p = fs->priv;
	struct fs_paths *t = p->paths;
	struct fs_inode *nsi;
	struct tier_info info;
	struct kvfs_key key;
	struct fs_pdir *d;
	struct fs_pent *e;
	const char *last;
	size_t lastlen;
	uint32_t id;

	/* namespaces come back through L2 and l2_dir/namespaces
	 * (fs_nsmeta.c): one that did not was removed */
	if (tier_ns_find(fs->tier, ns, &id))
		return;
	if (type == 'F') {
		kvfs_path_key(path, len, &key);
		if (tier_stat(fs->tier, id, &key, &info)) {
			/* Not recovered, or unlinked since. Every version of
			 * a path has the path's key, and L3 may still hold an
			 * older one than this node acknowledged (its own
			 * newer one lost in the crash before L2 or L3 had
			 * it), or one it unlinked: refused from L3 here, and
			 * the record kept so the next mount refuses it too
			 * (until the path is published here again). */
			if (lost && tier_l3_on(fs->tier) &&
			    !tier_l3_refuse(fs->tier, id, &key) &&
			    lost->len < PJ_LOST_MAX)
				out_rec(lost, 'F', ns, path, len, NULL);
			return;
		}
	}
	if (type == 'N' || type == 'K' || type == 'Q') {
		bool keep = false;
		uint64_t quota = 0;

		/* a namespace (re)made a path namespace starts at policy */
		if (type == 'Q' && fs_path_keep_parse(path, len, &keep, &quota))
			fs_log(fs, "l2_dir/%s: namespace %s: eviction mode "
			       "%.*s not understood: kept at policy", PJ_NAME,
			       ns, (int)len, path);
		tier_ns_set_keep(fs->tier, id, keep, quota, true);
		if (type == 'Q')
			return;
	}
	pthread_mutex_lock(&p->lock);
	nsi = fs_ns_get(fs, id);
	if (!nsi)
		goto out;
	if (type == 'N') {
		if (!fs_path_attach_locked(fs, nsi)) {
			nsi->pdir->uid = nsi->uid;
			nsi->pdir->gid = nsi->gid;
		}
		goto out;
	}
	if (type == 'K') {
		if (nsi->pdir && !nsi->pdir->nent)
			fs_path_detach_locked(fs, nsi);
		goto out;
	}
	if (!nsi->pdir || !len)
		goto out;
	nsi->pdir->uid = nsi->uid;
	nsi->pdir->gid = nsi->gid;
	if (type == 'D') {
		d = walk(fs, nsi->pdir, path, len, false, NULL, NULL);
		if (d && a) /* else 0755, the namespace's owner (walk) */
			fs_pattr_to_dir(a, d);
	} else if (type == 'X') {
		d = walk(fs, nsi->pdir, path, len, true, &last, &lastlen);
		e = d ? fs_ptree_find(t, d, last, lastlen) : NULL;
		if (e && e->dir && !e->dir->nent)
			fs_ptree_remove(t, e);
	} else if (type == 'F') {
		d = walk(fs, nsi->pdir, path, len, true, &last, &lastlen);
		if (!d)
			goto out;
		e = fs_ptree_find(t, d, last, lastlen);
		if (!e && fs_ptree_mkfile(t, d, last, lastlen, &e))
			goto out;
		if (!e->dir) {
			fs_ptree_key(t, e, &key, info.gen);
			fs_pev_note(t, id, &key, last, lastlen);
			/* the last record wins: without attributes, unknown */
			fs_pattr_to_file(a, e);
			fs_pattr_note(fs, e);
		}
	}
out:
	pthread_mutex_unlock(&p->lock);
}

static void replay(struct fs *fs, const unsigned char *buf, size_t len,
		   struct out *lost)
{
	size_t at = 0;

	while (at + PJ_HDR <= len) {
		const unsigned char *r = buf + at;
		size_t nl = r[9], pl = r[10] | (size_t)r[11] << 8;
		bool has_a = get32(r) == PJ_MAGIC_ATTR;
		size_t al = has_a ? PJ_ATTR : 0, h = PJ_HDR + al;
		char ns[KVFS_NS_NAME_MAX + 1], path[FS_PATH_MAX + 1];
		struct tier_pattr a;

		if ((get32(r) != PJ_MAGIC && !has_a) || !nl ||
		    nl > KVFS_NS_NAME_MAX || pl > FS_PATH_MAX ||
		    at + h + nl + pl > len ||
		    get32(r + 4) != (uint32_t)XXH3_64bits(r + 8,
							  4 + al + nl + pl) ||
		    (has_a && (get32(r + 12) > 07777 ||
			       get32(r + 24) >= 1000000000u))) {
			fs_log(fs, "l2_dir/%s: damaged record at offset %zu: "
			       "the rest is ignored", PJ_NAME, at);
			return;
		}
		if (has_a) {
			a.mode = get32(r + 12);
			a.uid = get32(r + 16);
			a.gid = get32(r + 20);
			a.mtime_nsec = get32(r + 24);
			a.mtime_sec = (int64_t)((uint64_t)get32(r + 28) |
						(uint64_t)get32(r + 32) << 32);
		}
		memcpy(ns, r + h, nl);
		ns[nl] = '\0';
		memcpy(path, r + h + nl, pl);
		path[pl] = '\0';
		if (!memchr(ns, '\0', nl))
			apply(fs, (char)r[8], ns, path, pl, has_a ? &a : NULL,
			      lost);
		at += h + nl + pl;
	}
}

/* ---------------------------------------------------------- compaction */


static void out_rec(struct out *o, char type, const char *ns,
		    const char *path, size_t len, const struct tier_pattr *a)
{
	size_t need = PJ_REC_MAX;

	if (o->err)
		return;
	if (o->cap - o->len < need) {
		size_t cap = o->cap ? o->cap * 2 : 1 << 16;
		unsigned char *b = realloc(o->buf, cap);

		if (!b) {
			o->err = -ENOMEM;
			return;
		}
		o->buf = b;
		o->cap = cap;
	}
	o->len += rec_format(o->buf + o->len, type, ns, path, len, a);
}

/* Records of d's subtree, directories before what they hold, with
 * their attributes (a file's when known). */
static void out_dir(struct out *o, const char *ns, const struct fs_pdir *d)
{
	char path[FS_PATH_MAX + 1];
	struct tier_pattr a;

	for (const struct fs_pent *e = d->head; e; e = e->next) {
		int len = fs_ptree_path(d, e->name, e->len, path);

		if (len < 0)
			continue;
		if (e->dir) {
			fs_pattr_of_dir(e->dir, &a);
			out_rec(o, 'D', ns, path, (size_t)len, &a);
			out_dir(o, ns, e->dir);
		} else if (e->keyed) {
			out_rec(o, 'F', ns, path, (size_t)len,
				fs_pattr_of_file(e, &a) ? &a : NULL);
		}
	}
}

/* Unlinks the chunks of path namespace ns that have no name. */
static uint64_t drop_orphans(struct fs *fs, uint32_t ns)
{
	struct tier_dirent *d;
	uint64_t n = 0;
	size_t cnt;

	if (tier_ns_snapshot(fs->tier, ns, &d, &cnt))
		return 0;
	for (size_t i = 0; i < cnt; i++) {
		bool named;

		pthread_mutex_lock(&fs->priv->lock);
		named = fs_ptree_by_key(fs->priv->paths, ns, &d[i].key);
		pthread_mutex_unlock(&fs->priv->lock);
		if (!named && !tier_unlink(fs->tier, ns, &d[i].key))
			n++;
	}
	free(d);
	return n;
}

static int compact(struct fs *fs, int dirfd, const struct out *lost)
{
	struct out o = { 0 };
	uint32_t *ids = NULL;
	long n;
	int fd, err;

	n = tier_ns_list(fs->tier, NULL, 0);
	if (n > 0 && !(ids = calloc((size_t)n, sizeof(*ids))))
		return -ENOMEM;
	if (n > 0)
		n = tier_ns_list(fs->tier, ids, (size_t)n);
	for (long i = 0; i < n; i++) {
		struct tier_ns_info ni;
		struct fs_inode *nsi;
		bool paths;

		if (tier_ns_info(fs->tier, ids[i], &ni))
			continue;
		pthread_mutex_lock(&fs->priv->lock);
		nsi = fs_ns_find(fs->priv, ids[i]);
		paths = nsi && nsi->pdir;
		pthread_mutex_unlock(&fs->priv->lock);
		if (!paths)
			continue;
		fs->priv->paths->orphans += drop_orphans(fs, ids[i]);
		pthread_mutex_lock(&fs->priv->lock);
		out_rec(&o, 'N', ni.name, "", 0, NULL);
		if (ni.keep) {
			char v[40];
			int vl = fs_path_keep_text(true, ni.quota, v, sizeof(v));

			out_rec(&o, 'Q', ni.name, v, (size_t)vl, NULL);
		}
		out_dir(&o, ni.name, nsi->pdir);
		pthread_mutex_unlock(&fs->priv->lock);
	}
	free(ids);
	/* the records of files lost in a crash, refused from L3 (apply):
	 * KVP1, as apply wrote them */
	if (lost->err)
		o.err = lost->err;
	for (size_t at = 0; !o.err && at + PJ_HDR <= lost->len;) {
		const unsigned char *r = lost->buf + at;
		size_t nl = r[9], pl = r[10] | (size_t)r[11] << 8;
		char ns[KVFS_NS_NAME_MAX + 1];

		memcpy(ns, r + PJ_HDR, nl);
		ns[nl] = '\0';
		out_rec(&o, 'F', ns, (const char *)r + PJ_HDR + nl, pl, NULL);
		at += PJ_HDR + nl + pl;
	}
	err = o.err;
	fd = err ? -1 : openat(dirfd, PJ_TMP, O_WRONLY | O_CREAT | O_TRUNC |
			       O_CLOEXEC, 0600);
	if (!err && fd < 0)
		err = -errno;
	if (!err)
		err = write_all(fd, o.buf, o.len);
	if (!err && fsync(fd))
		err = -errno;
	if (fd >= 0)
		close(fd);
	if (!err && renameat(dirfd, PJ_TMP, dirfd, PJ_NAME))
		err = -errno;
	if (!err)
		fsync(dirfd);
	free(o.buf);
	return err;
}

int fs_pjournal_open(struct fs *fs, const char *l2_dir)
{
	struct fs_pjournal *j = calloc(1, sizeof(*j));
	struct out lost = { 0 };
	unsigned char *buf = NULL;
	struct stat st;
	size_t got = 0;
	int fd, err;

	if (!j)
		return -ENOMEM;
	pthread_mutex_init(&j->lock, NULL);
	j->fd = -1;
	j->dirfd = open(l2_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j->dirfd < 0) {
		err = -errno;
		goto fail;
	}
	fd = openat(j->dirfd, PJ_NAME, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && !fstat(fd, &st) && (uint64_t)st.st_size < PJ_MAX_FILE &&
	    (buf = malloc((size_t)st.st_size + 1))) {
		while (got < (size_t)st.st_size) {
			ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

			if (n <= 0)
				break;
			got += (size_t)n;
		}
	}
	if (fd >= 0)
		close(fd);
	if (buf)
		replay(fs, buf, got, &lost);
	free(buf);
	err = compact(fs, j->dirfd, &lost);
	free(lost.buf);
	if (err)
		fs_log(fs, "l2_dir/%s: %s", PJ_NAME, strerror(-err));
	j->fd = openat(j->dirfd, PJ_NAME, O_WRONLY | O_APPEND | O_CREAT |
		       O_CLOEXEC, 0600);
	if (j->fd < 0) {
		err = -errno;
		goto fail;
	}
	fs->priv->paths->journal = j;
	if (fs->priv->paths->orphans)
		fs_log(fs, "%" PRIu64 " chunks of path namespaces had no name "
		       "in l2_dir/%s: dropped", fs->priv->paths->orphans,
		       PJ_NAME);
	return 0;
fail:
	fs_log(fs, "l2_dir/%s: %s: names of path namespaces will not "
	       "survive a restart", PJ_NAME, strerror(-err));
	if (j->dirfd >= 0)
		close(j->dirfd);
	pthread_mutex_destroy(&j->lock);
	free(j);
	return err;
}

void fs_pjournal_close(struct fs *fs)
{
	struct fs_pjournal *j = fs->priv->paths->journal;

	if (!j)
		return;
	pthread_mutex_lock(&j->lock); /* the last attribute changes */
	flush_changed(fs, j);
	pthread_mutex_unlock(&j->lock);
	pthread_mutex_lock(&fs->priv->lock);
	fs->priv->paths->journal = NULL;
	free(fs->priv->paths->changed);
	fs->priv->paths->changed = NULL;
	fs->priv->paths->nchanged = fs->priv->paths->changed_cap = 0;
	pthread_mutex_unlock(&fs->priv->lock);
	if (j->fd >= 0) {
		fdatasync(j->fd);
		close(j->fd);
	}
	close(j->dirfd);
	pthread_mutex_destroy(&j->lock);
	free(j);
}

int fs_path_keep_text(bool keep, uint64_t quota, char *buf, size_t len)
{
	return keep ? snprintf(buf, len, "never:%" PRIu64, quota) :
		      snprintf(buf, len, "policy");
}

int fs_path_keep_parse(const char *v, size_t len, bool *keep,
		       uint64_t *quota)
{
	char buf[32], *end;

	if (len == 6 && !memcmp(v, "policy", 6)) {
		*keep = false;
		*quota = 0;
		return 0;
	}
	if (len < 7 || len >= sizeof(buf) || memcmp(v, "never:", 6) ||
	    v[6] < '0' || v[6] > '9')
		return -EINVAL;
	memcpy(buf, v, len);
	buf[len] = '\0';
	errno = 0;
	*quota = strtoull(buf + 6, &end, 10);
	*keep = true;
	return errno || *end ? -EINVAL : 0;
}
