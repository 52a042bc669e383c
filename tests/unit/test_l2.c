/*
 * test_l2.c - the L2 segment log on real files (io_uring, O_DIRECT where
 * the filesystem allows it) in a temporary directory under /var/tmp.
 *
 * A small model of the engine stands beside it: an index (namespace, key)
 * -> location with the remove-if-match rules l2.h asks of the engine.
 */
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

#include "tier/codec.h"
#include "tier/l2.h"
#include "tier/tier.h"
#include "tier/tier_i.h" /* nchildren and where of a record (white box) */

/* ------------------------------------------------------------ data */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fill_random(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)rng_next(&seed);
}

static void fill_bf16(void *buf, size_t len, uint64_t seed)
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

static struct kvfs_key mkkey(uint64_t n)
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
};

static struct ment *find(struct env *e, const char *ns,
			 const struct kvfs_key *key)
{
	for (size_t i = 0; i < e->n; i++)
		if (!strcmp(e->ents[i].ns, ns) &&
		    !memcmp(e->ents[i].key.b, key->b, 16))
			return &e->ents[i];
	return NULL;
}

static struct ment *find_or_add(struct env *e, const char *ns,
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

static void on_log(void *arg, const char *msg)
{
	struct env *e = arg;

	pthread_mutex_lock(&e->mu);
	snprintf(e->lastlog, sizeof(e->lastlog), "%s", msg);
	e->nlogs++;
	pthread_mutex_unlock(&e->mu);
}

static int on_recover(void *arg, const struct l2_rec_info *r)
{
	struct env *e = arg;
	struct ment *m;

	pthread_mutex_lock(&e->mu);
	m = find_or_add(e, r->ns, &r->key);
	m->loc = r->loc;
	m->raw_len = r->raw_len;
	m->present = true;
	e->recovered++;
	pthread_mutex_unlock(&e->mu);
	return 0;
}

static enum l2_reclaim_verdict on_reclaim(void *arg,
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

static bool on_pinned(void *arg, const struct l2_rec_info *r)
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

static bool on_moved(void *arg, const struct l2_rec_info *r,
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

static int env_open(struct env *e, uint64_t size, char *err, size_t errlen)
{
	struct l2_config c = {
		.dir = e->dir, .size = size, .log = on_log, .log_arg = e,
		.recover = on_recover, .reclaim = on_reclaim,
		.pinned = on_pinned, .moved = on_moved, .cb_arg = e,
	};

	return l2_open(&c, &e->l2, err, errlen);
}

static void env_reset_index(struct env *e)
{
	e->n = 0;
	e->recovered = 0;
}

static struct env *env_new(void)
{
	struct env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	pthread_mutex_init(&e->mu, NULL);
	snprintf(e->dir, sizeof(e->dir), "/var/tmp/kvfs-test-l2-XXXXXX");
	assert_non_null(mkdtemp(e->dir));
	return e;
}

/*
 * tmpfs mounts the tests make, unmounted at exit as well: a failed
 * assertion jumps out of the test before its own umount.
 */
static char tmpfs_dirs[4][64];

static void tmpfs_umount_all(void)
{
	for (size_t i = 0; i < sizeof(tmpfs_dirs) / sizeof(tmpfs_dirs[0]); i++)
		if (tmpfs_dirs[i][0] && umount2(tmpfs_dirs[i], MNT_DETACH) == 0)
			rmdir(tmpfs_dirs[i]);
}

static int tmpfs_mount(const char *dir, unsigned long flags, const char *opts)
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

static void rm_dir_files(const char *dir)
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

static void env_free(struct env *e)
{
	l2_close(e->l2);
	rm_dir_files(e->dir);
	rmdir(e->dir);
	pthread_mutex_destroy(&e->mu);
	free(e);
}

struct wres {
	int err;
	bool called;
	struct l2_loc loc;
	struct l2 *l2;
};

static void wdone(void *arg, struct l2_rec *rec, int err,
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
static int put(struct env *e, const char *ns, const struct kvfs_key *key,
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

static int get(struct env *e, const char *ns, const struct kvfs_key *key,
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

static void seg_path(struct env *e, uint32_t seg, char *p, size_t len)
{
	snprintf(p, len, "%s/seg-%016" PRIx32 ".kvl2", e->dir, seg);
}

static void flip_byte(struct env *e, const struct l2_loc *loc, uint64_t off)
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

static uint64_t dir_bytes(const char *dir)
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

/* ------------------------------------------------------------ tests */

static void test_roundtrip(void **state)
{
	struct env *e = env_new();
	static const size_t sizes[] = { 1, 100, 4096, 4000, 256 * 1024,
					256 * 1024 + 1, 1 << 20, 300001 };
	char err[256];
	uint8_t *buf = malloc(2 << 20), *back = malloc(2 << 20);
	uint64_t raw = 0;
	struct l2_stats st;
	unsigned n = 0;

	(void)state;
	assert_int_equal(env_open(e, 256ull << 20, err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (int kind = 0; kind < 3; kind++) {
			struct kvfs_key k = mkkey(i * 10 + (size_t)kind);
			size_t len = sizes[i];

			if (kind == 0)
				fill_bf16(buf, len, i);
			else if (kind == 1)
				fill_random(buf, len, i);
			else
				memset(buf, 0, len);
			assert_int_equal(put(e, "model.bf16.r0", &k, buf, len, 1,
					     2, true, NULL), 0);
			raw += len;
			n++;
		}
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (int kind = 0; kind < 3; kind++) {
			struct kvfs_key k = mkkey(i * 10 + (size_t)kind);
			size_t len = sizes[i];

			if (kind == 0)
				fill_bf16(buf, len, i);
			else if (kind == 1)
				fill_random(buf, len, i);
			else
				memset(buf, 0, len);
			memset(back, 0xee, len);
			assert_int_equal(get(e, "model.bf16.r0", &k, back, len), 0);
			assert_memory_equal(buf, back, len);
			/* asking for another namespace or size is refused */
			assert_int_equal(get(e, "model.bf16.r0", &k, back, len + 1),
					 -EBADMSG);
		}
	}
	l2_get_stats(e->l2, &st);
	assert_int_equal(st.records, n);
	assert_int_equal(st.writes, n);
	assert_int_equal(st.raw_bytes, raw);
	assert_true(st.bytes < raw + n * 2 * L2_ALIGN);
	assert_int_equal(st.reads, n);
	/* each wrong-size read above counted as a mismatch */
	assert_int_equal(st.corrupt, sizeof(sizes) / sizeof(sizes[0]) * 3);
	assert_int_equal(st.errors, 0);
	free(buf);
	free(back);
	env_free(e);
}

/*
 * A chunk of more than 160 zstd frames (80 MiB; max_chunk may be up to
 * l1_size) decodes on the multi-threaded path like a small one: it used
 * to be reported corrupt and dropped.
 */
static void test_big_chunk(void **state)
{
	struct env *e = env_new();
	size_t len = (100u << 20) + 12345;
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct kvfs_key k = mkkey(4242);
	struct l2_stats st;
	char err[256];

	(void)state;
	assert_non_null(buf);
	assert_non_null(back);
	{
		/* segments sized for the chunk, as the engine does */
		struct l2_config c = {
			.dir = e->dir, .size = 1ull << 30,
			.seg_size = 128ull << 20, .log = on_log, .log_arg = e,
			.recover = on_recover, .reclaim = on_reclaim,
			.moved = on_moved, .cb_arg = e,
		};

		assert_int_equal(l2_open(&c, &e->l2, err, sizeof(err)), 0);
	}
	/* compressible enough to fit a segment, varied enough that every
	 * frame differs */
	memset(buf, 0, len);
	for (size_t i = 0; i < len; i += 4093)
		buf[i] = (uint8_t)(i / 4093);
	assert_int_equal(put(e, "big.bf16", &k, buf, len, 1, 2, true, NULL),
			 0);
	memset(back, 0xee, len);
	assert_int_equal(get(e, "big.bf16", &k, back, len), 0);
	assert_memory_equal(buf, back, len);
	l2_get_stats(e->l2, &st);
	assert_int_equal(st.corrupt, 0);
	free(buf);
	free(back);
	env_free(e);
}

static void test_zeros_and_random(void **state)
{
	struct env *e = env_new();
	size_t len = 1 << 20;
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct l2_rec_info info;
	struct l2_rec *rec;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	memset(buf, 0, len);
	assert_int_equal(l2_build(e->l2, "ns", &(struct kvfs_key){ { 1 } }, buf,
				  len, 1, 2, &rec), 0);
	l2_rec_info(rec, &info);
	assert_int_equal(info.codec, CODEC_ZSTD);
	assert_true(info.stored_len < 1024);
	/* a pending record decodes from memory */
	memset(back, 1, len);
	assert_int_equal(l2_rec_decode(e->l2, rec, back, len), 0);
	assert_memory_equal(buf, back, len);
	assert_int_equal(l2_rec_decode(e->l2, rec, back, len - 1), -EINVAL);
	l2_rec_free(e->l2, rec);

	fill_random(buf, len, 5);
	assert_int_equal(l2_build(e->l2, "ns", &(struct kvfs_key){ { 2 } }, buf,
				  len, 3, 2, &rec), 0);
	l2_rec_info(rec, &info);
	assert_int_equal(info.codec, CODEC_NONE); /* stored raw */
	assert_int_equal(info.stored_len, len);
	assert_int_equal(l2_rec_decode(e->l2, rec, back, len), 0);
	assert_memory_equal(buf, back, len);
	l2_rec_free(e->l2, rec);

	/* compress=none */
	fill_bf16(buf, len, 5);
	assert_int_equal(l2_build(e->l2, "ns", &(struct kvfs_key){ { 3 } }, buf,
				  len, 0, 2, &rec), 0);
	l2_rec_info(rec, &info);
	assert_int_equal(info.codec, CODEC_NONE);
	l2_rec_free(e->l2, rec);

	/* bad arguments */
	assert_int_equal(l2_build(e->l2, "", &(struct kvfs_key){ { 3 } }, buf,
				  len, 1, 2, &rec), -EINVAL);
	assert_int_equal(l2_build(e->l2, "ns", &(struct kvfs_key){ { 3 } }, buf,
				  len, 1, 3, &rec), -EINVAL);
	free(buf);
	free(back);
	env_free(e);
}

static void test_reopen_recovers(void **state)
{
	struct env *e = env_new();
	size_t len = 200 * 1024;
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct kvfs_key k;
	struct l2_stats st;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	for (uint64_t i = 0; i < 40; i++) {
		k = mkkey(i);
		fill_bf16(buf, len, i);
		assert_int_equal(put(e, i % 2 ? "a.r0" : "b.r1", &k, buf, len,
				     1, 2, true, NULL), 0);
	}
	/* key 3 rewritten: the old copy is not freed (as after a crash) */
	k = mkkey(3);
	fill_bf16(buf, len, 1003);
	assert_int_equal(put(e, "a.r0", &k, buf, len, 1, 2, false, NULL), 0);
	/* key 5 unlinked: freed, must not come back; once l2_sync_frees
	 * returns, its header is gone from the file (a crash now would not
	 * recover it) */
	k = mkkey(5);
	{
		struct l2_loc loc = find(e, "a.r0", &k)->loc;
		uint8_t hdr[64], zero[64] = { 0 };
		char p[256];
		int fd;

		l2_free(e->l2, &loc);
		assert_int_equal(l2_sync_frees(e->l2, 5000), 0);
		seg_path(e, loc.seg, p, sizeof(p));
		fd = open(p, O_RDONLY);
		assert_true(fd >= 0);
		assert_int_equal(pread(fd, hdr, sizeof(hdr),
				       (off_t)loc.blk * L2_ALIGN),
				 (ssize_t)sizeof(hdr));
		close(fd);
		assert_memory_equal(hdr, zero, sizeof(hdr));
	}
	l2_close(e->l2);
	e->l2 = NULL;

	env_reset_index(e);
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	l2_get_stats(e->l2, &st);
	assert_int_equal(e->recovered, 39);
	assert_int_equal(st.recovered, 39);
	assert_int_equal(st.records, 39);
	assert_int_equal(st.corrupt, 0);
	assert_int_equal(st.torn, 0);
	for (uint64_t i = 0; i < 40; i++) {
		const char *ns = i % 2 ? "a.r0" : "b.r1";

		k = mkkey(i);
		if (i == 5) {
			assert_int_equal(get(e, ns, &k, back, len), -ENOENT);
			continue;
		}
		fill_bf16(buf, len, i == 3 ? 1003 : i);
		assert_int_equal(find(e, ns, &k)->raw_len, len);
		assert_int_equal(get(e, ns, &k, back, len), 0);
		assert_memory_equal(buf, back, len);
	}
	/* new appends after a reopen go on with fresh records */
	k = mkkey(100);
	fill_bf16(buf, len, 100);
	assert_int_equal(put(e, "b.r1", &k, buf, len, 1, 2, true, NULL), 0);
	l2_close(e->l2);
	e->l2 = NULL;
	env_reset_index(e);
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	assert_int_equal(e->recovered, 40);
	assert_int_equal(get(e, "b.r1", &k, back, len), 0);
	assert_memory_equal(buf, back, len);
	free(buf);
	free(back);
	env_free(e);
}

static void corrupt_case(bool header)
{
	struct env *e = env_new();
	size_t len = 128 * 1024;
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct l2_loc loc[3];
	struct kvfs_key k;
	struct l2_stats st;
	char err[256];

	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	for (uint64_t i = 0; i < 3; i++) {
		k = mkkey(i);
		fill_bf16(buf, len, i);
		assert_int_equal(put(e, "ns", &k, buf, len, 1, 2, true, &loc[i]),
				 0);
	}
	/* header: a byte of the key; payload: a byte in the middle */
	flip_byte(e, &loc[1], header ? offsetof(struct l2_rec_hdr, key) + 3 :
		  sizeof(struct l2_rec_hdr) + 1000);
	k = mkkey(1);
	assert_int_equal(get(e, "ns", &k, back, len), -EBADMSG);
	l2_get_stats(e->l2, &st);
	assert_int_equal(st.corrupt, 1);
	assert_true(e->nlogs > 0);
	k = mkkey(2);
	assert_int_equal(get(e, "ns", &k, back, len), 0);
	l2_close(e->l2);
	e->l2 = NULL;

	/* recovery skips it and counts it; its neighbours are intact */
	env_reset_index(e);
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	l2_get_stats(e->l2, &st);
	assert_int_equal(e->recovered, 2);
	assert_int_equal(st.corrupt, 1);
	k = mkkey(1);
	assert_null(find(e, "ns", &k));
	for (uint64_t i = 0; i < 3; i += 2) {
		k = mkkey(i);
		fill_bf16(buf, len, i);
		assert_int_equal(get(e, "ns", &k, back, len), 0);
		assert_memory_equal(buf, back, len);
	}
	free(buf);
	free(back);
	env_free(e);
}

static void test_corrupt_payload(void **state)
{
	(void)state;
	corrupt_case(false);
}

static void test_corrupt_header(void **state)
{
	(void)state;
	corrupt_case(true);
}

static void test_torn_tail(void **state)
{
	struct env *e = env_new();
	size_t len = 256 * 1024;
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct l2_loc loc[3];
	struct kvfs_key k;
	struct l2_stats st;
	char err[256], p[256];

	(void)state;
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	for (uint64_t i = 0; i < 3; i++) {
		k = mkkey(i);
		fill_random(buf, len, i);
		assert_int_equal(put(e, "ns", &k, buf, len, 1, 0, true, &loc[i]),
				 0);
	}
	l2_close(e->l2);
	e->l2 = NULL;
	assert_int_equal(loc[2].seg, loc[0].seg);
	seg_path(e, loc[2].seg, p, sizeof(p));
	/* cut the last record in the middle of its payload */
	assert_int_equal(truncate(p, (off_t)loc[2].blk * L2_ALIGN + 100000), 0);

	env_reset_index(e);
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	l2_get_stats(e->l2, &st);
	assert_int_equal(e->recovered, 2);
	assert_int_equal(st.torn, 1);
	for (uint64_t i = 0; i < 2; i++) {
		k = mkkey(i);
		fill_random(buf, len, i);
		assert_int_equal(get(e, "ns", &k, back, len), 0);
		assert_memory_equal(buf, back, len);
	}
	k = mkkey(2);
	assert_null(find(e, "ns", &k));
	/* and the log goes on */
	fill_random(buf, len, 2);
	assert_int_equal(put(e, "ns", &k, buf, len, 1, 0, true, NULL), 0);
	assert_int_equal(get(e, "ns", &k, back, len), 0);
	assert_memory_equal(buf, back, len);
	free(buf);
	free(back);
	env_free(e);
}

static void test_lock(void **state)
{
	struct env *e = env_new();
	struct l2_config c = { .dir = e->dir, .size = 64ull << 20 };
	struct l2 *other = NULL;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	assert_int_equal(l2_open(&c, &other, err, sizeof(err)), -EBUSY);
	assert_null(other);
	assert_non_null(strstr(err, "in use"));
	l2_close(e->l2);
	e->l2 = NULL;
	assert_int_equal(l2_open(&c, &other, err, sizeof(err)), 0);
	l2_close(other);
	env_free(e);
}

static void test_bad_dirs_and_sizes(void **state)
{
	struct env *e = env_new();
	struct l2_config c = { .dir = "/nonexistent/kvfs-l2", .size = 1 << 30 };
	uint8_t *buf = calloc(1, 1 << 20);
	struct l2_rec *rec;
	struct l2 *l2 = NULL;
	char err[256];

	(void)state;
	assert_int_equal(l2_open(&c, &l2, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/kvfs-l2"));
	c.dir = "/etc/hostname";
	assert_int_equal(l2_open(&c, &l2, err, sizeof(err)), -ENOTDIR);

	/* l2_size too small for anything */
	c.dir = e->dir;
	c.size = 16 * 1024;
	assert_int_equal(l2_open(&c, &l2, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "l2_size"));
	/* l2_size smaller than one chunk: the chunk is refused, clearly */
	c.size = 256 * 1024;
	assert_int_equal(l2_open(&c, &l2, err, sizeof(err)), 0);
	fill_random(buf, 1 << 20, 1);
	assert_int_equal(l2_build(l2, "ns", &(struct kvfs_key){ { 1 } }, buf,
				  1 << 20, 1, 0, &rec), -EFBIG);
	/* a chunk that fits does work */
	assert_int_equal(l2_build(l2, "ns", &(struct kvfs_key){ { 1 } }, buf,
				  32 * 1024, 1, 0, &rec), 0);
	l2_rec_free(l2, rec);
	l2_close(l2);
	free(buf);
	env_free(e);
}

/*
 * A filesystem that fills up long before l2_size: the capacity drops to
 * what fits, the oldest records are reclaimed to make room, the appends
 * go on (each ENOSPC counted once), nothing wrong is ever read, and what
 * is live comes back after a reopen.
 */
static void test_full_filesystem(void **state)
{
	struct env *e = env_new();
	size_t len = 1 << 20;
	uint8_t *buf = malloc(len), *back = malloc(len);
	unsigned ok = 0, readable = 0, i;
	bool good[16] = { 0 };
	struct l2_stats st;
	struct kvfs_key k;
	uint64_t live;
	char err[256];

	(void)state;
	if (tmpfs_mount(e->dir, 0, "size=4m")) {
		fprintf(stderr, "skip: cannot mount a 4 MiB tmpfs on %s: %s\n",
			e->dir, strerror(errno));
		free(buf);
		free(back);
		env_free(e);
		skip();
	}
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	for (i = 0; i < 12; i++) {
		int rc;

		k = mkkey(i);
		fill_random(buf, len, i);
		rc = put(e, "ns", &k, buf, len, 1, 0, true, NULL);
		if (rc == 0) {
			ok++;
			good[i] = true;
		} else {
			assert_int_equal(rc, -ENOSPC);
		}
	}
	l2_get_stats(e->l2, &st);
	fprintf(stderr, "# 4 MiB tmpfs, l2_size 64M: %u of 12 appends ok, "
		"capacity %" PRIu64 ", %" PRIu64 " errors, %" PRIu64 " live\n",
		ok, st.capacity, st.errors, st.records);
	assert_true(ok >= 10);
	assert_true(good[11]);
	assert_true(st.errors >= 1 && st.errors <= 4);
	assert_true(st.capacity <= 4ull << 20 && st.capacity >= 2ull << 20);
	assert_true(st.disk_bytes <= st.capacity);
	assert_true(st.reclaims >= 1);
	assert_non_null(strstr(e->lastlog, "No space"));
	for (i = 0; i < 12; i++) {
		int rc;

		k = mkkey(i);
		rc = get(e, "ns", &k, back, len);
		if (rc == -ENOENT)
			continue;
		assert_int_equal(rc, 0);
		assert_true(good[i]);
		fill_random(buf, len, i);
		assert_memory_equal(buf, back, len);
		readable++;
	}
	assert_int_equal(readable, st.records);
	assert_true(readable >= 1);
	live = st.records;
	l2_close(e->l2);
	e->l2 = NULL;

	/* what was live survives; the failed writes left nothing that
	 * passes for a record */
	env_reset_index(e);
	assert_int_equal(env_open(e, 64ull << 20, err, sizeof(err)), 0);
	assert_int_equal(e->recovered, live);
	l2_get_stats(e->l2, &st);
	assert_int_equal(st.corrupt, 0);
	assert_int_equal(st.torn, 0); /* the failed tries were punched out */
	for (i = 0; i < 12; i++) {
		k = mkkey(i);
		if (!find(e, "ns", &k))
			continue;
		assert_true(good[i]);
		fill_random(buf, len, i);
		assert_int_equal(get(e, "ns", &k, back, len), 0);
		assert_memory_equal(buf, back, len);
	}
	l2_close(e->l2);
	e->l2 = NULL;
	umount2(e->dir, MNT_DETACH);
	free(buf);
	free(back);
	env_free(e);
}

static void test_reclaim_keeps_newer(void **state)
{
	struct env *e = env_new();
	const uint64_t size = 1 << 20; /* 4 segments of 256 KiB */
	size_t len = 60 * 1024;        /* raw (random): 16 blocks a record */
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct l2_loc a_old, a_new;
	struct l2_stats st;
	struct kvfs_key ka = mkkey(1000), kh = mkkey(2000), k;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, size, err, sizeof(err)), 0);
	/* A's first copy, then a hot chunk H */
	fill_random(buf, len, 1);
	assert_int_equal(put(e, "ns", &ka, buf, len, 1, 0, true, &a_old), 0);
	fill_random(buf, len, 2);
	assert_int_equal(put(e, "ns", &kh, buf, len, 1, 0, true, NULL), 0);
	pthread_mutex_lock(&e->mu);
	find(e, "ns", &kh)->hot = true;
	pthread_mutex_unlock(&e->mu);
	/* fill a segment, then A's newer copy; the engine (as after a race)
	 * has not freed the old copy, so the reclaim meets it live */
	for (uint64_t i = 0; i < 6; i++) {
		k = mkkey(i);
		fill_random(buf, len, 100 + i);
		assert_int_equal(put(e, "ns", &k, buf, len, 1, 0, true, NULL), 0);
	}
	fill_random(buf, len, 3);
	assert_int_equal(put(e, "ns", &ka, buf, len, 1, 0, false, &a_new), 0);
	pthread_mutex_lock(&e->mu);
	find(e, "ns", &ka)->hot = true;
	pthread_mutex_unlock(&e->mu);
	assert_true(a_new.seg > a_old.seg);

	/* many cold chunks: the log wraps several times */
	for (uint64_t i = 6; i < 120; i++) {
		k = mkkey(i);
		fill_random(buf, len, 100 + i);
		assert_int_equal(put(e, "ns", &k, buf, len, 1, 0, true, NULL), 0);
		assert_true(dir_bytes(e->dir) <= size);
		l2_get_stats(e->l2, &st);
		assert_true(st.disk_bytes <= size);
	}
	l2_get_stats(e->l2, &st);
	assert_true(st.reclaims >= 3);
	assert_true(st.moves >= 2);
	assert_true(e->dropped > 50);

	/* A: still the newer copy, readable, never deleted by a reclaim */
	fill_random(buf, len, 3);
	assert_int_equal(get(e, "ns", &ka, back, len), 0);
	assert_memory_equal(buf, back, len);
	/* H: hot, moved along instead of dropped */
	fill_random(buf, len, 2);
	assert_int_equal(get(e, "ns", &kh, back, len), 0);
	assert_memory_equal(buf, back, len);
	/* old cold chunks are gone from the index, recent ones readable */
	k = mkkey(0);
	assert_int_equal(get(e, "ns", &k, back, len), -ENOENT);
	k = mkkey(119);
	fill_random(buf, len, 219);
	assert_int_equal(get(e, "ns", &k, back, len), 0);
	assert_memory_equal(buf, back, len);
	assert_int_equal(st.corrupt, 0);
	assert_int_equal(st.errors, 0);

	/* reopen: only live records come back, the newest copy of A */
	l2_close(e->l2);
	e->l2 = NULL;
	env_reset_index(e);
	assert_int_equal(env_open(e, size, err, sizeof(err)), 0);
	fill_random(buf, len, 3);
	assert_int_equal(get(e, "ns", &ka, back, len), 0);
	assert_memory_equal(buf, back, len);
	fill_random(buf, len, 2);
	assert_int_equal(get(e, "ns", &kh, back, len), 0);
	assert_memory_equal(buf, back, len);
	free(buf);
	free(back);
	env_free(e);
}

/* Everything hot: reclaims can keep only part of each segment, appends
 * must still make progress and stay within l2_size. */
static void test_reclaim_all_hot(void **state)
{
	struct env *e = env_new();
	const uint64_t size = 1 << 20;
	size_t len = 60 * 1024;
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct l2_stats st;
	unsigned readable = 0;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, size, err, sizeof(err)), 0);
	for (uint64_t i = 0; i < 80; i++) {
		struct kvfs_key k = mkkey(i);

		fill_random(buf, len, i);
		assert_int_equal(put(e, "ns", &k, buf, len, 1, 0, true, NULL), 0);
		pthread_mutex_lock(&e->mu);
		find(e, "ns", &k)->hot = true;
		pthread_mutex_unlock(&e->mu);
		assert_true(dir_bytes(e->dir) <= size);
	}
	for (uint64_t i = 0; i < 80; i++) {
		struct kvfs_key k = mkkey(i);
		int rc;

		fill_random(buf, len, i);
		rc = get(e, "ns", &k, back, len);
		if (rc == -ENOENT)
			continue;
		assert_int_equal(rc, 0);
		assert_memory_equal(buf, back, len);
		readable++;
	}
	l2_get_stats(e->l2, &st);
	assert_int_equal(readable, st.records);
	assert_true(readable >= 8);
	assert_true(st.moves > 0);
	free(buf);
	free(back);
	env_free(e);
}

/*
 * Everything hot, and two records pinned (a reclaim moves at most half a
 * segment: two of these records): hot records ahead of them in a segment
 * must not spend the move budget they need. Both survive many reclaims.
 */
static void test_reclaim_pinned_first(void **state)
{
	struct env *e = env_new();
	const uint64_t size = 1 << 20;
	size_t len = 60 * 1024;
	uint8_t *buf = malloc(len), *back = malloc(len);
	static const uint64_t pinned[] = { 3, 23 };
	struct l2_stats st;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, size, err, sizeof(err)), 0);
	for (uint64_t i = 0; i < 120; i++) {
		struct kvfs_key k = mkkey(i);
		struct ment *m;

		fill_random(buf, len, i);
		assert_int_equal(put(e, "ns", &k, buf, len, 1, 0, true, NULL), 0);
		pthread_mutex_lock(&e->mu);
		m = find(e, "ns", &k);
		m->hot = true;
		m->pinned = i == 3 || i == 23;
		pthread_mutex_unlock(&e->mu);
		assert_true(dir_bytes(e->dir) <= size);
	}
	for (size_t j = 0; j < sizeof(pinned) / sizeof(pinned[0]); j++) {
		struct kvfs_key k = mkkey(pinned[j]);

		fill_random(buf, len, pinned[j]);
		assert_int_equal(get(e, "ns", &k, back, len), 0);
		assert_memory_equal(buf, back, len);
	}
	l2_get_stats(e->l2, &st);
	assert_true(st.reclaims >= 10);
	free(buf);
	free(back);
	env_free(e);
}

struct thr {
	struct env *e;
	int id;
	int fails;
};

static void *thr_main(void *arg)
{
	struct thr *t = arg;
	size_t len = 64 * 1024 + (size_t)t->id * 8;
	uint8_t *buf = malloc(len), *back = malloc(len);

	for (uint64_t i = 0; i < 40; i++) {
		struct kvfs_key k = mkkey((uint64_t)t->id * 1000 + i);
		struct wres w = { .l2 = t->e->l2 };
		struct l2_rec *rec;

		fill_bf16(buf, len, k.b[0] + 7ull * t->id);
		if (l2_build(t->e->l2, "mt", &k, buf, len, 1, 2, &rec) ||
		    l2_append(t->e->l2, rec, wdone, &w)) {
			t->fails++;
			continue;
		}
		/* wait for this append without l2_flush (others append too) */
		while (!__atomic_load_n(&w.called, __ATOMIC_ACQUIRE))
			usleep(100);
		if (w.err || l2_read(t->e->l2, &w.loc, "mt", &k, back, len) ||
		    memcmp(buf, back, len))
			t->fails++;
	}
	free(buf);
	free(back);
	return NULL;
}

static void test_threads(void **state)
{
	struct env *e = env_new();
	struct thr t[4];
	pthread_t th[4];
	struct l2_stats st;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, 256ull << 20, err, sizeof(err)), 0);
	for (int i = 0; i < 4; i++) {
		t[i] = (struct thr){ .e = e, .id = i };
		assert_int_equal(pthread_create(&th[i], NULL, thr_main, &t[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(t[i].fails, 0);
	}
	l2_get_stats(e->l2, &st);
	assert_int_equal(st.writes, 160);
	assert_int_equal(st.reads, 160);
	env_free(e);
}

/* ------------------------------------------- the engine with L2 (tier.h) */

struct elog {
	pthread_mutex_t mu;
	char last[512];
	unsigned n;
	unsigned gone;
};

static void elog_cb(void *arg, const char *msg)
{
	struct elog *l = arg;

	pthread_mutex_lock(&l->mu);
	snprintf(l->last, sizeof(l->last), "%s", msg);
	l->n++;
	pthread_mutex_unlock(&l->mu);
}

static void egone_cb(void *arg, uint32_t ns, const struct kvfs_key *key,
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

static void ecfg(struct tier_config *c, const char *dir)
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

static void chunk_bytes(void *buf, size_t len, uint64_t i)
{
	fill_bf16(buf, len, i * 31 + 7);
}

static int eput(struct tier *t, uint32_t ns, uint64_t i, size_t len)
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
static int echeck(struct tier *t, uint32_t ns, uint64_t i, size_t len,
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

static void ewait_writes(struct tier *t, uint64_t n)
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

static void test_engine_demote_promote(void **state)
{
	struct env *e = env_new();
	const size_t len = 512 * 1024;
	struct tier_config c;
	struct tier_stats st;
	struct tier_info info;
	struct tier *t;
	char err[256];
	uint32_t ns;

	(void)state;
	ecfg(&c, e->dir);
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "m.bf16.r0", &ns), 0);
	/* 24 chunks through a 4 MiB L1: the first ones are demoted */
	for (uint64_t i = 0; i < 24; i++) {
		assert_int_equal(eput(t, ns, i, len), 0);
		/* a chunk being demoted is served from the pending copy */
		if (i >= 8)
			assert_int_equal(echeck(t, ns, i - 8, len, NULL), 0);
	}
	tier_get_stats(t, &st);
	assert_true(st.demotions >= 16);
	ewait_writes(t, 16);
	/* every chunk reads back right, from L1 or promoted from L2 */
	for (uint64_t i = 0; i < 24; i++)
		assert_int_equal(echeck(t, ns, i, len, NULL), 0);
	tier_get_stats(t, &st);
	assert_true(st.promotions >= 8);
	assert_true(st.l2_reads >= 1);
	assert_true(st.l2_chunks >= 16);
	assert_true(st.l2_raw_bytes > st.l2_bytes); /* compressed */
	assert_int_equal(st.l2_corrupt, 0);
	assert_int_equal(st.l2_errors, 0);
	/* an L2-only chunk says so */
	for (uint64_t i = 0; i < 24; i++) {
		struct kvfs_key k = mkkey(i);

		assert_int_equal(tier_stat(t, ns, &k, &info), 0);
		if (info.where == TIER_L2) {
			assert_true(info.stored_bytes < info.size);
			break;
		}
	}
	tier_destroy(t);
	env_free(e);
}

static void test_engine_restart(void **state)
{
	struct env *e = env_new();
	const size_t len = 300 * 1000;
	struct tier_dirent *d;
	struct tier_config c;
	struct tier_stats st;
	struct tier *t, *t2;
	uint32_t ns, ns2;
	char err[256];
	size_t n;

	(void)state;
	ecfg(&c, e->dir);
	c.flush_on_exit = true;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "a.r0", &ns), 0);
	assert_int_equal(tier_ns_create(t, "b.r1", &ns2), 0);
	for (uint64_t i = 0; i < 20; i++)
		assert_int_equal(eput(t, i % 2 ? ns2 : ns, i, len), 0);
	/* a second daemon on the same l2_dir is refused */
	assert_int_equal(tier_create(&c, &t2, err, sizeof(err)), -EBUSY);
	assert_non_null(strstr(err, "in use"));
	/* an unlinked L2 chunk does not come back */
	{
		struct kvfs_key k = mkkey(0);

		assert_int_equal(tier_unlink(t, ns, &k), 0);
	}
	tier_destroy(t);

	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_find(t, "a.r0", &ns), 0);
	assert_int_equal(tier_ns_find(t, "b.r1", &ns2), 0);
	assert_int_equal(tier_ns_snapshot(t, ns, &d, &n), 0);
	assert_int_equal(n, 9);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(d[i].size, len);
	free(d);
	assert_int_equal(tier_ns_snapshot(t, ns2, &d, &n), 0);
	assert_int_equal(n, 10);
	free(d);
	for (uint64_t i = 1; i < 20; i++)
		assert_int_equal(echeck(t, i % 2 ? ns2 : ns, i, len, NULL), 0);
	{
		struct kvfs_key k = mkkey(0);
		struct tier_chunk *ch;

		assert_int_equal(tier_get(t, ns, &k, &ch), -ENOENT);
	}
	tier_get_stats(t, &st);
	assert_int_equal(st.l2_corrupt, 0);
	tier_destroy(t);
	env_free(e);
}

static void test_engine_corrupt_is_a_miss(void **state)
{
	struct env *e = env_new();
	const size_t len = 256 * 1024;
	struct tier_config c;
	struct tier_stats st;
	struct tier_info info;
	struct kvfs_key k = mkkey(3);
	struct tier *t;
	char err[256], p[512];
	uint32_t ns;
	DIR *d;
	struct dirent *de;

	(void)state;
	ecfg(&c, e->dir);
	c.flush_on_exit = true;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	for (uint64_t i = 0; i < 6; i++)
		assert_int_equal(eput(t, ns, i, len), 0);
	tier_destroy(t);
	/* flip one byte inside every record payload of the log: each record
	 * starts on a 4 KiB block; the payload of chunk 3 is hit too */
	d = opendir(e->dir);
	while ((de = readdir(d))) {
		struct stat sb;
		int fd;

		if (strncmp(de->d_name, "seg-", 4))
			continue;
		snprintf(p, sizeof(p), "%s/%s", e->dir, de->d_name);
		fd = open(p, O_RDWR);
		assert_true(fd >= 0);
		assert_int_equal(fstat(fd, &sb), 0);
		for (off_t off = 0; off + 8192 <= sb.st_size; off += 4096) {
			struct l2_rec_hdr h;

			if (pread(fd, &h, sizeof(h), off) == sizeof(h) &&
			    h.magic == L2_MAGIC && !memcmp(h.key, k.b, 16)) {
				uint8_t b;

				assert_int_equal(pread(fd, &b, 1, off + 5000), 1);
				b ^= 1;
				assert_int_equal(pwrite(fd, &b, 1, off + 5000), 1);
			}
		}
		close(fd);
	}
	closedir(d);
	/* recovery checks payloads: the record is skipped and counted */
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_find(t, "ns", &ns), 0);
	tier_get_stats(t, &st);
	assert_int_equal(st.l2_corrupt, 1);
	assert_int_equal(tier_stat(t, ns, &k, &info), -ENOENT);
	for (uint64_t i = 0; i < 6; i++)
		if (i != 3)
			assert_int_equal(echeck(t, ns, i, len, NULL), 0);
	tier_destroy(t);
	env_free(e);
}

static void test_engine_corrupt_live(void **state)
{
	struct env *e = env_new();
	const size_t len = 256 * 1024;
	struct tier_config c;
	struct tier_stats st;
	struct tier_info info;
	struct tier *t;
	char err[256];
	uint32_t ns;
	uint64_t victim = 0;
	bool found = false;

	(void)state;
	ecfg(&c, e->dir);
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	for (uint64_t i = 0; i < 30; i++)
		assert_int_equal(eput(t, ns, i, len), 0);
	ewait_writes(t, 10);
	/* find an L2-only chunk whose write completed, damage its record */
	for (uint64_t i = 0; i < 30 && !found; i++) {
		struct kvfs_key k = mkkey(i);

		if (tier_stat(t, ns, &k, &info) == 0 && info.where == TIER_L2 &&
		    info.stored_bytes < info.size) {
			victim = i;
			found = true;
		}
	}
	assert_true(found);
	{
		struct kvfs_key k = mkkey(victim);
		DIR *d = opendir(e->dir);
		struct dirent *de;
		char p[512];
		int hits = 0;

		while ((de = readdir(d))) {
			struct stat sb;
			int fd;

			if (strncmp(de->d_name, "seg-", 4))
				continue;
			snprintf(p, sizeof(p), "%s/%s", e->dir, de->d_name);
			fd = open(p, O_RDWR);
			fstat(fd, &sb);
			for (off_t off = 0; off + 8192 <= sb.st_size; off += 4096) {
				struct l2_rec_hdr h;
				uint8_t b;

				if (pread(fd, &h, sizeof(h), off) != sizeof(h) ||
				    h.magic != L2_MAGIC || memcmp(h.key, k.b, 16))
					continue;
				pread(fd, &b, 1, off + 6000);
				b ^= 0x80;
				pwrite(fd, &b, 1, off + 6000);
				hits++;
			}
			fsync(fd);
			close(fd);
		}
		closedir(d);
		assert_true(hits >= 1);
		/* never served: a miss, the chunk is dropped, counted */
		assert_int_equal(echeck(t, ns, victim, len, NULL), -ENOENT);
		assert_int_equal(tier_stat(t, ns, &k, &info), -ENOENT);
		tier_get_stats(t, &st);
		assert_int_equal(st.l2_corrupt, 1);
		assert_true(st.misses >= 1);
	}
	tier_destroy(t);
	env_free(e);
}

static void test_engine_pinned_l1_tmp_buffer(void **state)
{
	struct env *e = env_new();
	const size_t len = 1 << 20;
	struct tier_chunk *pins[4];
	struct tier_config c;
	struct tier *t;
	char err[256];
	uint32_t ns;
	bool tmp = false;

	(void)state;
	ecfg(&c, e->dir);
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	for (uint64_t i = 0; i < 8; i++)
		assert_int_equal(eput(t, ns, i, len), 0);
	ewait_writes(t, 4);
	/* pin the four chunks in L1: L1 is full of pinned chunks */
	for (uint64_t i = 4; i < 8; i++) {
		struct kvfs_key k = mkkey(i);

		assert_int_equal(tier_get(t, ns, &k, &pins[i - 4]), 0);
	}
	assert_int_equal(echeck(t, ns, 1, len, &tmp), 0);
	assert_true(tmp);
	for (int i = 0; i < 4; i++)
		tier_put(t, pins[i]);
	/* with room again it is promoted */
	assert_int_equal(echeck(t, ns, 1, len, &tmp), 0);
	assert_false(tmp);
	tier_destroy(t);
	env_free(e);
}

static void test_engine_ingest_all_and_prefetch(void **state)
{
	struct env *e = env_new();
	const size_t len = 256 * 1024;
	struct kvfs_key keys[12];
	struct tier_config c;
	struct tier_stats st;
	struct tier *t;
	char err[256];
	uint32_t ns, found = 0, in1 = 0, in2 = 0;

	(void)state;
	ecfg(&c, e->dir);
	c.ingest = TIER_INGEST_ALL;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	for (uint64_t i = 0; i < 4; i++)
		assert_int_equal(eput(t, ns, i, len), 0);
	ewait_writes(t, 4); /* written without any eviction */
	for (uint64_t i = 4; i < 40; i++)
		assert_int_equal(eput(t, ns, i, len), 0);
	ewait_writes(t, 40);
	tier_get_stats(t, &st);
	assert_int_equal(st.l2_writes, 40); /* once each: evictions are free */
	/* prefetch the first 12 (now in L2) */
	for (int i = 0; i < 12; i++)
		keys[i] = mkkey((uint64_t)i);
	assert_int_equal(tier_lookup(t, ns, keys, 12, 1, false, true, &found,
				     &in1, &in2), 0);
	assert_int_equal(found, 12);
	assert_true(in2 >= 1);
	for (int i = 0; i < 2000; i++) {
		tier_get_stats(t, &st);
		if (st.promotions >= in2)
			break;
		usleep(1000);
	}
	assert_true(st.promotions >= in2);
	for (uint64_t i = 0; i < 40; i++)
		assert_int_equal(echeck(t, ns, i, len, NULL), 0);
	tier_destroy(t);
	env_free(e);
}

/*
 * A prefetch of a run larger than L1 promotes only three quarters of L1's
 * worth, from the head of the run (what the engine reads first), instead
 * of evicting the head to make room for the tail.
 */
static void test_engine_prefetch_bounded(void **state)
{
	struct env *e = env_new();
	const size_t len = 256 * 1024;
	struct kvfs_key keys[40];
	struct tier_config c;
	struct tier_stats st;
	struct tier_info info;
	struct tier *t;
	char err[256];
	uint32_t ns, found = 0, in1 = 0, in2 = 0;

	(void)state;
	ecfg(&c, e->dir); /* L1: 4 MiB, 16 chunks */
	c.ingest = TIER_INGEST_ALL;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	for (uint64_t i = 0; i < 40; i++) {
		assert_int_equal(eput(t, ns, i, len), 0);
		keys[i] = mkkey(i);
	}
	ewait_writes(t, 40);
	assert_int_equal(tier_lookup(t, ns, keys, 40, 0, false, true, &found,
				     &in1, &in2), 0);
	assert_int_equal(found, 40);
	assert_true(in2 >= 20);
	for (int i = 0; i < 3000; i++) {
		tier_get_stats(t, &st);
		if (st.promotions >= 12)
			break;
		usleep(1000);
	}
	usleep(200 * 1000); /* nothing more comes */
	tier_get_stats(t, &st);
	assert_int_equal(st.promotions, 12); /* 3 MiB of the 4 MiB L1 */
	for (int i = 0; i < 12; i++) {
		assert_int_equal(tier_stat(t, ns, &keys[i], &info), 0);
		assert_int_equal(info.where, TIER_L1);
	}
	for (uint64_t i = 0; i < 40; i++)
		assert_int_equal(echeck(t, ns, i, len, NULL), 0);
	tier_destroy(t);
	env_free(e);
}

/*
 * Reclaim keeps what was read since it was written or last kept, and
 * lets it go once it cools: chunk 0, read once after its L2 write,
 * survives the reclaim of its segment while its cold neighbours go; not
 * read again, it goes at the next reclaim of the segment it was moved to.
 */
static void test_engine_reclaim_heat(void **state)
{
	struct env *e = env_new();
	const size_t len = 256 * 1024;
	struct tier_config c;
	struct kvfs_key k0 = mkkey(0), k1 = mkkey(1);
	struct tier_stats st;
	struct tier_info info;
	struct tier *t;
	char err[256];
	uint32_t ns;
	uint64_t n = 0;

	(void)state;
	ecfg(&c, e->dir);
	c.ingest = TIER_INGEST_ALL;
	c.l2_size = 8 << 20;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	for (; n < 10; n++)
		assert_int_equal(eput(t, ns, n, len), 0);
	ewait_writes(t, n);
	assert_int_equal(echeck(t, ns, 0, len, NULL), 0); /* a read */
	/* until the first reclaim (of the oldest segment, 0's and 1's) */
	do {
		assert_true(n < 400);
		assert_int_equal(eput(t, ns, n, len), 0);
		ewait_writes(t, ++n);
		tier_get_stats(t, &st);
	} while (st.l2_reclaims == 0);
	/* both evicted from L1 long ago; chunk 1 was never read */
	assert_int_equal(tier_stat(t, ns, &k1, &info), -ENOENT);
	assert_int_equal(tier_stat(t, ns, &k0, &info), 0);
	assert_int_equal(info.where, TIER_L2); /* kept, in L2 only */
	/* not read again: its moved copy goes with its new segment */
	while (tier_stat(t, ns, &k0, &info) == 0) {
		assert_true(n < 1000);
		assert_int_equal(eput(t, ns, n, len), 0);
		ewait_writes(t, ++n);
	}
	assert_int_equal(echeck(t, ns, 0, len, NULL), -ENOENT);
	tier_destroy(t);
	env_free(e);
}

/*
 * Unlinks while ingest=all writes are queued or in flight: queued writes
 * are cancelled, written ones erased; when the unlinks return nothing of
 * them is left in L2 and the queue counters are back to zero.
 */
static void test_engine_unlink_during_ingest(void **state)
{
	struct env *e = env_new();
	const size_t len = 256 * 1024;
	struct tier_config c;
	struct tier_stats st;
	struct kvfs_key k;
	struct tier *t;
	char err[256];
	uint32_t ns;

	(void)state;
	ecfg(&c, e->dir);
	c.ingest = TIER_INGEST_ALL;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	/* each unlinked right after its publication: its write is queued
	 * (cancelled) or being written (waited for, then erased) */
	for (uint64_t i = 0; i < 24; i++) {
		assert_int_equal(eput(t, ns, i, len), 0);
		k = mkkey(i);
		assert_int_equal(tier_unlink(t, ns, &k), 0);
	}
	/* a batch, then its unlinks: mostly written by then */
	for (uint64_t i = 24; i < 48; i++)
		assert_int_equal(eput(t, ns, i, len), 0);
	for (uint64_t i = 24; i < 48; i++) {
		k = mkkey(i);
		assert_int_equal(tier_unlink(t, ns, &k), 0);
	}
	tier_get_stats(t, &st);
	print_message("# %llu of 48 L2 writes happened before their unlink\n",
		      (unsigned long long)st.l2_writes);
	assert_int_equal(st.l2_bytes, 0);
	assert_int_equal(st.l2_chunks, 0);
	assert_int_equal(st.l2_errors, 0);
	/* nothing lands later either */
	usleep(300 * 1000);
	tier_get_stats(t, &st);
	assert_int_equal(st.l2_bytes, 0);
	assert_int_equal(st.l2_chunks, 0);
	tier_destroy(t);
	env_free(e);
}

static void test_engine_ingest_hot_and_pin(void **state)
{
	struct env *e = env_new();
	const size_t len = 256 * 1024;
	struct tier_config c;
	struct tier_stats st;
	struct tier_info info;
	struct kvfs_key k0 = mkkey(0);
	struct tier *t;
	char err[256];
	uint32_t ns;

	(void)state;
	ecfg(&c, e->dir);
	c.ingest = TIER_INGEST_HOT;
	c.hot_hits = 2;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	for (uint64_t i = 0; i < 4; i++)
		assert_int_equal(eput(t, ns, i, len), 0);
	/* chunk 0 gets two hits: written to L2 while still in L1 */
	assert_int_equal(echeck(t, ns, 0, len, NULL), 0);
	assert_int_equal(echeck(t, ns, 0, len, NULL), 0);
	ewait_writes(t, 1);
	tier_get_stats(t, &st);
	assert_int_equal(st.l2_writes, 1);
	/* a flood of cold chunks: they are dropped, not written; chunk 0
	 * survives in L2 */
	for (uint64_t i = 4; i < 40; i++)
		assert_int_equal(eput(t, ns, i, len), 0);
	tier_get_stats(t, &st);
	assert_int_equal(st.l2_writes, 1);
	assert_int_equal(tier_stat(t, ns, &k0, &info), 0);
	assert_int_equal(info.where, TIER_L2);
	/* user.kvfs.pin = 1 brings it back into L1 */
	assert_int_equal(tier_set_user_pin(t, ns, &k0, true), 0);
	assert_int_equal(tier_stat(t, ns, &k0, &info), 0);
	assert_int_equal(info.where, TIER_L1);
	assert_int_equal(echeck(t, ns, 0, len, NULL), 0);
	assert_int_equal(tier_set_user_pin(t, ns, &k0, false), 0);
	{
		struct kvfs_key k1 = mkkey(1);

		assert_int_equal(tier_stat(t, ns, &k1, &info), -ENOENT);
	}
	tier_destroy(t);
	env_free(e);
}

static void test_engine_bad_l2_dir(void **state)
{
	struct tier_config c;
	struct tier_stats st;
	struct tier *t;
	char err[256];
	uint32_t ns;

	(void)state;
	ecfg(&c, "/nonexistent/kvfs-l2");
	elog.n = 0;
	/* kvfs keeps serving from L1 and says why */
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_true(elog.n >= 1);
	assert_non_null(strstr(elog.last, "/nonexistent/kvfs-l2"));
	assert_non_null(strstr(elog.last, "L1 only"));
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	for (uint64_t i = 0; i < 12; i++)
		assert_int_equal(eput(t, ns, i, 512 * 1024), 0);
	assert_int_equal(echeck(t, ns, 11, 512 * 1024, NULL), 0);
	assert_int_equal(echeck(t, ns, 0, 512 * 1024, NULL), -ENOENT);
	tier_get_stats(t, &st);
	assert_true(st.l2_errors >= 1);
	tier_destroy(t);

	/* l2_size smaller than one chunk: refused clearly */
	ecfg(&c, "/tmp");
	c.l2_size = 512 * 1024;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "l2_size"));
	/* a read-only filesystem: serves L1 */
	{
		struct env *e = env_new();

		if (tmpfs_mount(e->dir, MS_RDONLY, "size=1m") == 0) {
			ecfg(&c, e->dir);
			elog.n = 0;
			assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
			assert_true(elog.n >= 1);
			tier_destroy(t);
			umount2(e->dir, MNT_DETACH);
		} else {
			fprintf(stderr, "note: no read-only tmpfs: %s\n",
				strerror(errno));
		}
		env_free(e);
	}
}

/* ---------------------------------------------- empty chunks in L2 */

/* Publishes an empty (0-byte) chunk under key i. */
static int eput_empty(struct tier *t, uint32_t ns, uint64_t i)
{
	struct kvfs_key k = mkkey(i);
	struct tier_wr *w;
	int rc = tier_wr_begin(t, ns, &k, 0, &w);

	return rc ? rc : tier_wr_publish(t, w, NULL);
}

static enum tier_where ewhere(struct tier *t, uint32_t ns, uint64_t i)
{
	struct kvfs_key k = mkkey(i);
	struct tier_info info;

	assert_int_equal(tier_stat(t, ns, &k, &info), 0);
	return info.where;
}

/*
 * A 0-byte chunk goes through every L2 path (ingest=all, a demotion, the
 * flush on exit, a warm restart) and always comes back as a 0-byte chunk
 * (it once reached l2_build as src NULL, len 0: memcpy(NULL), a UBSan
 * abort).
 */
static void test_engine_empty_chunk(void **state)
{
	struct env *e = env_new();
	const size_t len = 512 * 1024;
	static const enum tier_ingest modes[] = {
		TIER_INGEST_ALL, TIER_INGEST_HOT, TIER_INGEST_EVICTED,
	};
	struct tier_config c;
	struct tier_stats st;
	struct tier *t;
	char err[256];
	uint32_t ns;

	(void)state;
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		ecfg(&c, e->dir);
		c.ingest = modes[m];
		c.hot_hits = 1;
		c.flush_on_exit = true;
		assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
		if (tier_ns_find(t, "empty", &ns))
			assert_int_equal(tier_ns_create(t, "empty", &ns), 0);
		/* keys 100 + m: empty; a hit makes it hot for ingest=hot */
		assert_int_equal(eput_empty(t, ns, 100 + m), 0);
		assert_int_equal(echeck(t, ns, 100 + m, 0, NULL), 0);
		if (modes[m] == TIER_INGEST_EVICTED) {
			/* push it out of the 4 MiB L1: demoted */
			for (uint64_t i = 0; i < 12; i++)
				assert_int_equal(eput(t, ns, 1000 + i, len), 0);
			assert_int_equal(ewhere(t, ns, 100 + m), TIER_L2);
			/* read back from L2 (or the pending copy), promoted */
			assert_int_equal(echeck(t, ns, 100 + m, 0, NULL), 0);
			ewait_writes(t, 1);
			assert_int_equal(ewhere(t, ns, 100 + m), TIER_L1);
			for (uint64_t i = 0; i < 12; i++) {
				struct kvfs_key k = mkkey(1000 + i);

				tier_unlink(t, ns, &k);
			}
		} else {
			ewait_writes(t, 1);
		}
		tier_get_stats(t, &st);
		assert_int_equal(st.l2_errors, 0);
		tier_destroy(t); /* flush_on_exit writes what is left */

		/* warm restart: every empty chunk so far is an L2 record */
		assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
		assert_int_equal(tier_ns_find(t, "empty", &ns), 0);
		for (size_t j = 0; j <= m; j++) {
			bool tmp = true;

			assert_int_equal(ewhere(t, ns, 100 + j), TIER_L2);
			assert_int_equal(echeck(t, ns, 100 + j, 0, &tmp), 0);
			/* promoted as an empty L1 chunk, not a temp buffer */
			assert_false(tmp);
			assert_int_equal(ewhere(t, ns, 100 + j), TIER_L1);
			assert_int_equal(echeck(t, ns, 100 + j, 0, NULL), 0);
		}
		tier_get_stats(t, &st);
		assert_int_equal(st.l2_corrupt, 0);
		assert_int_equal(st.l2_errors, 0);
		tier_destroy(t);
	}
	env_free(e);
}

/* -------------------------------------- parent counts across tiers */

static int eput_child(struct tier *t, uint32_t ns, uint64_t i,
		      const struct kvfs_key *parent)
{
	struct kvfs_key k = mkkey(i);
	uint8_t buf[4096];
	struct tier_wr *w;
	int rc;

	chunk_bytes(buf, sizeof(buf), i);
	rc = tier_wr_begin(t, ns, &k, sizeof(buf), &w);
	if (rc)
		return rc;
	if (parent)
		assert_int_equal(tier_wr_set_parent(t, w, parent, 0), 0);
	rc = tier_wr_pwrite(t, w, buf, sizeof(buf), 0);
	if (rc) {
		tier_wr_abort(t, w);
		return rc;
	}
	return tier_wr_publish(t, w, NULL);
}

/* Waits until chunk i has no pins (an L2 write in flight holds one). */
static void eidle(struct tier *t, uint32_t ns, uint64_t i)
{
	struct kvfs_key k = mkkey(i);
	struct tier_info info;

	for (int n = 0; n < 5000; n++) {
		assert_int_equal(tier_stat(t, ns, &k, &info), 0);
		if (!info.refs)
			return;
		usleep(1000);
	}
	fail_msg("chunk %" PRIu64 " stays pinned", i);
}

static struct tier_rec *erec(struct tier *t, uint32_t ns, uint64_t i)
{
	struct kvfs_key k = mkkey(i);
	struct tier_rec *r;

	tier_lock(t);
	r = tier_idx_find(t, ns, &k);
	tier_unlock(t);
	assert_non_null(r);
	return r;
}

static uint32_t enchildren(struct tier *t, uint32_t ns, uint64_t i)
{
	struct tier_rec *r = erec(t, ns, i);
	uint32_t n;

	tier_lock(t);
	n = r->pi.nchildren;
	tier_unlock(t);
	return n;
}

/*
 * A parent's nchildren counts its children in L1 whatever tier the parent
 * is in: a child leaving L1 while the parent sits in L2 is uncounted, so
 * the promoted parent is a leaf again and prefix evicts it before newer
 * leaves (it once kept a stale count and stayed "interior").
 */
static void test_engine_prefix_parent_in_l2(void **state)
{
	struct env *e = env_new();
	struct kvfs_key P = mkkey(1);
	struct tier_chunk *hc, *hx, *ch;
	struct tier_config c;
	struct tier *t;
	char err[256];
	uint32_t ns;

	(void)state;
	ecfg(&c, e->dir);
	c.l1_size = 3 * 4096;
	c.max_chunk = 4096;
	c.policy = "prefix";
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "pfx", &ns), 0);
	assert_int_equal(eput_child(t, ns, 1, NULL), 0);   /* P */
	assert_int_equal(eput_child(t, ns, 2, &P), 0);     /* C, child of P */
	assert_int_equal(enchildren(t, ns, 1), 1);
	{
		struct kvfs_key C = mkkey(2), X = mkkey(3);

		assert_int_equal(tier_get(t, ns, &C, &hc), 0);
		assert_int_equal(eput_child(t, ns, 3, NULL), 0); /* X */
		assert_int_equal(tier_get(t, ns, &X, &hx), 0);
	}
	/* Y: P is the only unpinned chunk, so P goes to L2 */
	assert_int_equal(eput_child(t, ns, 4, NULL), 0);
	assert_int_equal(ewhere(t, ns, 1), TIER_L2);
	assert_int_equal(enchildren(t, ns, 1), 1); /* C still in L1 */
	tier_put(t, hc);
	tier_put(t, hx);
	/* Z: C (the oldest leaf) leaves L1 while P is in L2 */
	assert_int_equal(eput_child(t, ns, 5, NULL), 0);
	assert_int_equal(ewhere(t, ns, 2), TIER_L2);
	assert_int_equal(enchildren(t, ns, 1), 0);
	/* P comes back: a leaf */
	assert_int_equal(tier_get(t, ns, &P, &ch), 0);
	tier_put(t, ch);
	assert_int_equal(ewhere(t, ns, 1), TIER_L1);
	assert_int_equal(enchildren(t, ns, 1), 0);
	/* every other L1 chunk is touched after P: P is the oldest leaf */
	for (uint64_t i = 1; i <= 5; i++)
		eidle(t, ns, i); /* no L2 write holds a pin any more */
	for (uint64_t i = 3; i <= 5; i++)
		if (ewhere(t, ns, i) == TIER_L1)
			assert_int_equal(echeck(t, ns, i, 4096, NULL), 0);
	assert_int_equal(eput_child(t, ns, 6, NULL), 0);
	assert_int_equal(ewhere(t, ns, 1), TIER_L2);

	/* C promoted while P is in L2: counted again */
	assert_int_equal(echeck(t, ns, 2, 4096, NULL), 0);
	assert_int_equal(ewhere(t, ns, 2), TIER_L1);
	assert_int_equal(ewhere(t, ns, 1), TIER_L2);
	assert_int_equal(enchildren(t, ns, 1), 1);
	/* and P promoted now is interior: the next victim is not P */
	assert_int_equal(tier_get(t, ns, &P, &ch), 0);
	tier_put(t, ch);
	assert_int_equal(enchildren(t, ns, 1), 1);
	assert_int_equal(eput_child(t, ns, 7, NULL), 0);
	assert_int_equal(ewhere(t, ns, 1), TIER_L1);
	/* unlinking the child while P is in L1 uncounts it */
	{
		struct kvfs_key C = mkkey(2);

		assert_int_equal(tier_unlink(t, ns, &C), 0);
	}
	assert_int_equal(enchildren(t, ns, 1), 0);
	tier_destroy(t);
	env_free(e);
}

struct ethr {
	struct tier *t;
	uint32_t ns;
	int id;
	int bad;
};

static void *ethr_main(void *arg)
{
	struct ethr *x = arg;
	uint64_t s = (uint64_t)x->id + 1;

	for (int i = 0; i < 150; i++) {
		uint64_t k = rng_next(&s) % 40;
		int rc = echeck(x->t, x->ns, k, 256 * 1024, NULL);

		if (rc != 0)
			x->bad++;
	}
	return NULL;
}

static void test_engine_threads(void **state)
{
	struct env *e = env_new();
	struct tier_config c;
	struct ethr x[3];
	pthread_t th[3];
	struct tier *t;
	char err[256];
	uint32_t ns;

	(void)state;
	ecfg(&c, e->dir);
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(t, "ns", &ns), 0);
	for (uint64_t i = 0; i < 40; i++)
		assert_int_equal(eput(t, ns, i, 256 * 1024), 0);
	for (int i = 0; i < 3; i++) {
		x[i] = (struct ethr){ .t = t, .ns = ns, .id = i };
		pthread_create(&th[i], NULL, ethr_main, &x[i]);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(x[i].bad, 0);
	}
	tier_destroy(t);
	env_free(e);
}

/*
 * A small L2 uses most of l2_size: with l2_size=8M and 700 KB records
 * (random bytes, stored raw) the log fills to well over 70% of l2_size
 * before its first reclaim and stays above half of it afterwards, never
 * going past l2_size on disk; the newest records stay readable.
 */
static void test_small_l2_fills_up(void **state)
{
	struct env *e = env_new();
	const uint64_t size = 8ull << 20;
	size_t len = 700 * 1000;
	uint8_t *buf = malloc(len), *back = malloc(len);
	uint64_t peak = 0, low = UINT64_MAX;
	struct l2_stats st;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, size, err, sizeof(err)), 0);
	for (uint64_t i = 0; i < 60; i++) {
		struct kvfs_key k = mkkey(i);

		fill_random(buf, len, 7000 + i);
		assert_int_equal(put(e, "ns", &k, buf, len, 1, 0, true, NULL), 0);
		l2_get_stats(e->l2, &st);
		assert_true(st.disk_bytes <= size);
		assert_true(dir_bytes(e->dir) <= size);
		if (st.reclaims == 0 && st.bytes > peak)
			peak = st.bytes;
		if (i >= 30 && st.bytes < low)
			low = st.bytes;
	}
	fprintf(stderr, "# l2_size 8M, 700 KB records: %" PRIu64 " bytes before "
		"the first reclaim (%.0f%%), at least %" PRIu64 " (%.0f%%) after, "
		"%" PRIu64 " reclaims\n", peak, 100.0 * (double)peak / (double)size,
		low, 100.0 * (double)low / (double)size, st.reclaims);
	assert_true(peak >= size * 7 / 10);
	assert_true(low >= size / 2);
	assert_true(st.reclaims >= 1);
	assert_int_equal(st.errors, 0);
	for (uint64_t i = 55; i < 60; i++) {
		struct kvfs_key k = mkkey(i);

		fill_random(buf, len, 7000 + i);
		assert_int_equal(get(e, "ns", &k, back, len), 0);
		assert_memory_equal(buf, back, len);
	}
	free(buf);
	free(back);
	env_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_big_chunk),
		cmocka_unit_test(test_reclaim_pinned_first),
		cmocka_unit_test(test_zeros_and_random),
		cmocka_unit_test(test_reopen_recovers),
		cmocka_unit_test(test_corrupt_payload),
		cmocka_unit_test(test_corrupt_header),
		cmocka_unit_test(test_torn_tail),
		cmocka_unit_test(test_lock),
		cmocka_unit_test(test_bad_dirs_and_sizes),
		cmocka_unit_test(test_full_filesystem),
		cmocka_unit_test(test_reclaim_keeps_newer),
		cmocka_unit_test(test_reclaim_all_hot),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_engine_demote_promote),
		cmocka_unit_test(test_engine_restart),
		cmocka_unit_test(test_engine_corrupt_is_a_miss),
		cmocka_unit_test(test_engine_corrupt_live),
		cmocka_unit_test(test_engine_pinned_l1_tmp_buffer),
		cmocka_unit_test(test_engine_ingest_all_and_prefetch),
		cmocka_unit_test(test_engine_prefetch_bounded),
		cmocka_unit_test(test_engine_reclaim_heat),
		cmocka_unit_test(test_engine_unlink_during_ingest),
		cmocka_unit_test(test_engine_ingest_hot_and_pin),
		cmocka_unit_test(test_engine_bad_l2_dir),
		cmocka_unit_test(test_engine_empty_chunk),
		cmocka_unit_test(test_engine_prefix_parent_in_l2),
		cmocka_unit_test(test_engine_threads),
		cmocka_unit_test(test_small_l2_fills_up),
	};

	atexit(tmpfs_umount_all);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
