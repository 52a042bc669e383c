/*
 * l2_test.h - what the L2 unit tests (test_l2*.c) share: the test data,
 * a small model of the engine beside the segment log (an index
 * (namespace, key) -> location with the remove-if-match rules l2.h asks
 * of the engine), temporary directories and tmpfs mounts, and the
 * helpers that drive the engine with L2 (tier.h).
 */
#ifndef KVFS_TESTS_UNIT_L2_TEST_H
#define KVFS_TESTS_UNIT_L2_TEST_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tier/record/codec.h"
#include "tier/l2/l2.h"
#include "tier/tier.h"
#include "tier/tier_i.h" /* nchildren and where of a record (white box) */

/* ------------------------------------------------------------ data */

static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline void fill_random(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)rng_next(&seed);
}

static inline void fill_bf16(void *buf, size_t len, uint64_t seed)
{
	uint16_t *p = buf;

	for (size_t i = 0; i < len / 2; i++) {
		double u1 = ((double)(rng_next(&seed) >> 11) + 1) / 9007199254740993.0;
		double u2 = (double)(rng_next(&seed) >> 11) / 9007199254740992.0;
		float f = (float)(sqrt(-2 * log(u1)) * cos(2 * M_PI * u2) *
				  (0.25 + (double)(i % 64) / 32.0));
		uint32_t bits;

		memcpy(&bits, &f, 4);
		p[i] = (uint16_t)(bits >> 16);
	}
	if (len & 1)
		((uint8_t *)buf)[len - 1] = 1;
}

static inline struct kvfs_key mkkey(uint64_t n)
{
	struct kvfs_key k;

	memset(&k, 0, sizeof(k));
	memcpy(k.b, &n, sizeof(n));
	k.b[15] = 0x42;
	return k;
}

/* ------------------------------------------------------ engine model */

#define MAX_ENTS 4096

struct ment {
	char ns[KVFS_NS_NAME_MAX + 1];
	struct kvfs_key key;
	struct l2_loc loc;
	uint64_t raw_len;
	bool present;
	bool hot;
	bool pinned; /* on_pinned says so */
	bool has_parent; /* the chain link recovery gave back */
	uint32_t depth;
	struct kvfs_key parent;
};

struct env {
	char dir[128];
	struct l2 *l2;
	pthread_mutex_t mu;
	struct ment ents[MAX_ENTS];
	size_t n;
	unsigned recovered, kept, dropped, moved_ok, moved_lost;
	char lastlog[512];
	unsigned nlogs;
	int ckpt_s; /* l2_config.checkpoint_s; env_new: -1, no checkpoint
		     * (the tests of the scan), test_l2_ckpt sets it */
	const struct kvfs_key *put_parent; /* put(): the link it records */
	uint32_t put_depth;
	const char *order;  /* ckpt_save's blob (a string), or NULL */
	char *order_back;   /* what ckpt_load gave back (malloc'ed) */
	size_t order_back_len;
};

static inline struct ment *find(struct env *e, const char *ns,
				const struct kvfs_key *key)
{
	for (size_t i = 0; i < e->n; i++)
		if (!strcmp(e->ents[i].ns, ns) &&
		    !memcmp(e->ents[i].key.b, key->b, 16))
			return &e->ents[i];
	return NULL;
}

static inline struct ment *find_or_add(struct env *e, const char *ns,
				       const struct kvfs_key *key)
{
	struct ment *m = find(e, ns, key);

	if (m)
		return m;
	assert_true(e->n < MAX_ENTS);
	m = &e->ents[e->n++];
	memset(m, 0, sizeof(*m));
	snprintf(m->ns, sizeof(m->ns), "%s", ns);
	m->key = *key;
	return m;
}

static inline void on_log(void *arg, const char *msg)
{
	struct env *e = arg;

	pthread_mutex_lock(&e->mu);
	snprintf(e->lastlog, sizeof(e->lastlog), "%s", msg);
	e->nlogs++;
	pthread_mutex_unlock(&e->mu);
}

static inline int on_recover(void *arg, const struct l2_rec_info *r)
{
	struct env *e = arg;
	struct ment *m;

	pthread_mutex_lock(&e->mu);
	m = find_or_add(e, r->ns, &r->key);
	m->loc = r->loc;
	m->raw_len = r->raw_len;
	m->present = true;
	m->has_parent = r->has_parent;
	m->parent = r->parent;
	m->depth = r->depth;
	e->recovered++;
	pthread_mutex_unlock(&e->mu);
	return 0;
}

static inline enum l2_reclaim_verdict on_reclaim(void *arg,
						 const struct l2_rec_info *r,
						 bool may_keep)
{
	struct env *e = arg;
	enum l2_reclaim_verdict v = L2_DROP;
	struct ment *m;

	pthread_mutex_lock(&e->mu);
	m = find(e, r->ns, &r->key);
	if (m && m->present && l2_loc_eq(&m->loc, &r->loc)) {
		if (m->hot && may_keep) {
			v = L2_KEEP;
			e->kept++;
		} else {
			m->present = false; /* remove-if-match */
			e->dropped++;
		}
	}
	pthread_mutex_unlock(&e->mu);
	return v;
}

static inline bool on_pinned(void *arg, const struct l2_rec_info *r)
{
	struct env *e = arg;
	struct ment *m;
	bool pinned;

	pthread_mutex_lock(&e->mu);
	m = find(e, r->ns, &r->key);
	pinned = m && m->present && m->pinned && l2_loc_eq(&m->loc, &r->loc);
	pthread_mutex_unlock(&e->mu);
	return pinned;
}

static inline bool on_moved(void *arg, const struct l2_rec_info *r,
			    const struct l2_loc *to)
{
	struct env *e = arg;
	struct ment *m;
	bool matched = false;

	pthread_mutex_lock(&e->mu);
	m = find(e, r->ns, &r->key);
	if (m && m->present && l2_loc_eq(&m->loc, &r->loc)) {
		matched = true;
		if (to) {
			m->loc = *to;
			e->moved_ok++;
		} else {
			m->present = false;
			e->moved_lost++;
		}
	}
	pthread_mutex_unlock(&e->mu);
	return matched;
}

static inline void *on_ckpt_save(void *arg, size_t *len, uint32_t *count)
{
	struct env *e = arg;

	*len = e->order ? strlen(e->order) : 0;
	*count = 1;
	return e->order ? strdup(e->order) : NULL;
}

static inline void on_ckpt_load(void *arg, const void *blob, size_t len,
				uint32_t count)
{
	struct env *e = arg;

	assert_int_equal(count, 1);
	free(e->order_back);
	e->order_back = malloc(len + 1);
	assert_non_null(e->order_back);
	memcpy(e->order_back, blob, len);
	e->order_back[len] = 0;
	e->order_back_len = len;
}

static inline int env_open(struct env *e, uint64_t size, char *err,
			   size_t errlen)
{
	struct l2_config c = {
		.dir = e->dir, .size = size, .log = on_log, .log_arg = e,
		.recover = on_recover, .reclaim = on_reclaim,
		.pinned = on_pinned, .moved = on_moved, .cb_arg = e,
		.checkpoint_s = e->ckpt_s, .ckpt_save = on_ckpt_save,
		.ckpt_load = on_ckpt_load,
	};

	return l2_open(&c, &e->l2, err, errlen);
}

static inline void env_reset_index(struct env *e)
{
	e->n = 0;
	e->recovered = 0;
}

static inline struct env *env_new(void)
{
	struct env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	pthread_mutex_init(&e->mu, NULL);
	e->ckpt_s = -1;
	snprintf(e->dir, sizeof(e->dir), "/var/tmp/kvfs-test-l2-XXXXXX");
	assert_non_null(mkdtemp(e->dir));
	return e;
}

/*
 * tmpfs mounts the tests make, unmounted at exit as well: a failed
 * assertion jumps out of the test before its own umount.
 */
static char tmpfs_dirs[4][sizeof(((struct env *)0)->dir)];

static inline void tmpfs_umount_all(void)
{
	for (size_t i = 0; i < sizeof(tmpfs_dirs) / sizeof(tmpfs_dirs[0]); i++)
		if (tmpfs_dirs[i][0] && umount2(tmpfs_dirs[i], MNT_DETACH) == 0)
			rmdir(tmpfs_dirs[i]);
}

static inline int tmpfs_mount(const char *dir, unsigned long flags,
			      const char *opts)
{
	if (mount("tmpfs", dir, "tmpfs", flags, opts))
		return -1;
	for (size_t i = 0; i < sizeof(tmpfs_dirs) / sizeof(tmpfs_dirs[0]); i++)
		if (!tmpfs_dirs[i][0]) {
			snprintf(tmpfs_dirs[i], sizeof(tmpfs_dirs[i]), "%s", dir);
			break;
		}
	return 0;
}

static inline void rm_dir_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[512];

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		unlink(p);
	}
	closedir(d);
}

static inline void env_free(struct env *e)
{
	l2_close(e->l2);
	rm_dir_files(e->dir);
	rmdir(e->dir);
	pthread_mutex_destroy(&e->mu);
	free(e->order_back);
	free(e);
}

struct wres {
	int err;
	bool called;
	struct l2_loc loc;
	struct l2 *l2;
};

static inline void wdone(void *arg, struct l2_rec *rec, int err,
			 const struct l2_loc *loc)
{
	struct wres *w = arg;

	l2_rec_free(w->l2, rec);
	w->err = err;
	if (loc)
		w->loc = *loc;
	__atomic_store_n(&w->called, true, __ATOMIC_RELEASE);
}

/* Writes a chunk as the engine would: build, append, wait, then point the
 * index at it (freeing the copy it replaces when free_old). */
static inline int put(struct env *e, const char *ns, const struct kvfs_key *key,
		      const void *data, size_t len, int level, int shuffle,
		      bool free_old, struct l2_loc *loc_out)
{
	struct wres w = { .l2 = e->l2 };
	struct l2_rec *rec;
	struct ment *m;
	int rc;

	rc = l2_build(e->l2, ns, key, data, len, level, shuffle, &rec);
	if (rc)
		return rc;
	if (e->put_parent || e->put_depth)
		l2_rec_set_link(e->l2, rec, e->put_parent, e->put_depth);
	rc = l2_append(e->l2, rec, wdone, &w);
	if (rc) {
		l2_rec_free(e->l2, rec);
		return rc;
	}
	l2_flush(e->l2);
	assert_true(w.called);
	if (w.err)
		return w.err;
	pthread_mutex_lock(&e->mu);
	m = find_or_add(e, ns, key);
	if (m->present && free_old)
		l2_free(e->l2, &m->loc);
	m->loc = w.loc;
	m->raw_len = len;
	m->present = true;
	pthread_mutex_unlock(&e->mu);
	if (loc_out)
		*loc_out = w.loc;
	return 0;
}

static inline int get(struct env *e, const char *ns, const struct kvfs_key *key,
		      void *buf, size_t len)
{
	struct l2_loc loc;
	struct ment *m;
	bool present;

	/* the reclaim thread's callbacks change entries under e->mu */
	pthread_mutex_lock(&e->mu);
	m = find(e, ns, key);
	present = m && m->present;
	if (present)
		loc = m->loc;
	pthread_mutex_unlock(&e->mu);
	if (!present)
		return -ENOENT;
	return l2_read(e->l2, &loc, ns, key, buf, len);
}

static inline void seg_path(struct env *e, uint32_t seg, char *p, size_t len)
{
	snprintf(p, len, "%s/seg-%016" PRIx32 ".kvl2", e->dir, seg);
}

static inline void flip_byte(struct env *e, const struct l2_loc *loc,
			     uint64_t off)
{
	char p[256];
	uint8_t b;
	int fd;

	seg_path(e, loc->seg, p, sizeof(p));
	fd = open(p, O_RDWR);
	assert_true(fd >= 0);
	off += (uint64_t)loc->blk * L2_ALIGN;
	assert_int_equal(pread(fd, &b, 1, (off_t)off), 1);
	b ^= 0x10;
	assert_int_equal(pwrite(fd, &b, 1, (off_t)off), 1);
	fsync(fd);
	close(fd);
}

static inline uint64_t dir_bytes(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	uint64_t sum = 0;
	char p[512];
	struct stat sb;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "seg-", 4))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (stat(p, &sb) == 0)
			sum += (uint64_t)sb.st_size;
	}
	closedir(d);
	return sum;
}

/* ------------------------------------------- the engine with L2 (tier.h) */

struct elog {
	pthread_mutex_t mu;
	char last[512];
	unsigned n;
	unsigned gone;
};

static inline void elog_cb(void *arg, const char *msg)
{
	struct elog *l = arg;

	pthread_mutex_lock(&l->mu);
	snprintf(l->last, sizeof(l->last), "%s", msg);
	l->n++;
	pthread_mutex_unlock(&l->mu);
}

static inline void egone_cb(void *arg, uint32_t ns, const struct kvfs_key *key,
			    enum tier_gone_reason why)
{
	struct elog *l = arg;

	(void)ns;
	(void)key;
	(void)why;
	pthread_mutex_lock(&l->mu);
	l->gone++;
	pthread_mutex_unlock(&l->mu);
}

static struct elog elog = { .mu = PTHREAD_MUTEX_INITIALIZER };

static inline void ecfg(struct tier_config *c, const char *dir)
{
	tier_config_default(c);
	c->l1_size = 4 << 20;
	c->max_chunk = 1 << 20;
	c->policy = "lru";
	c->l2_dir = dir;
	c->l2_size = 64 << 20;
	c->log = elog_cb;
	c->log_arg = &elog;
	c->on_gone = egone_cb;
	c->on_gone_arg = &elog;
}

static inline void chunk_bytes(void *buf, size_t len, uint64_t i)
{
	fill_bf16(buf, len, i * 31 + 7);
}

static inline int eput(struct tier *t, uint32_t ns, uint64_t i, size_t len)
{
	struct kvfs_key k = mkkey(i);
	uint8_t *buf = malloc(len);
	struct tier_wr *w;
	int rc;

	chunk_bytes(buf, len, i);
	rc = tier_wr_begin(t, ns, &k, len, &w);
	if (rc == 0) {
		rc = tier_wr_pwrite(t, w, buf, len, 0);
		if (rc)
			tier_wr_abort(t, w);
		else
			rc = tier_wr_publish(t, w, NULL);
	}
	free(buf);
	return rc;
}

/* Reads chunk i through tier_get and compares it; returns tier_get's
 * error, or 1 when the bytes differ. */
static inline int echeck(struct tier *t, uint32_t ns, uint64_t i, size_t len,
			 bool *tmp_buffer)
{
	struct kvfs_key k = mkkey(i);
	uint8_t *want = malloc(len), *got = malloc(len);
	struct tier_chunk *c;
	int rc;

	chunk_bytes(want, len, i);
	rc = tier_get(t, ns, &k, &c);
	if (rc == 0) {
		if (tier_chunk_size(c) != len ||
		    tier_chunk_read(t, c, got, len, 0) != (long)len ||
		    memcmp(want, got, len))
			rc = 1;
		if (tmp_buffer)
			*tmp_buffer = tier_chunk_offset(c) == -ENODATA;
		tier_put(t, c);
	}
	free(want);
	free(got);
	return rc;
}

static inline void ewait_writes(struct tier *t, uint64_t n)
{
	struct tier_stats st;

	for (int i = 0; i < 5000; i++) {
		tier_get_stats(t, &st);
		if (st.l2_writes >= n)
			return;
		usleep(1000);
	}
	fail_msg("L2 writes did not complete (%" PRIu64 " of %" PRIu64 ")",
		 st.l2_writes, n);
}

#endif /* KVFS_TESTS_UNIT_L2_TEST_H */
