/*
 * test_tier_events.c - the engine's event sink (tier/tier_events.h): one
 * report per change of a published chunk's tier, in order, with the right
 * tier, namespace, parent and chunk_tokens; silent before
 * tier_events_start, which announces what is already there (L2 recovery).
 * Real engine, real L2 directory, a corrupted record on disk.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "kvfs.h"
#include "tier/record/record.h"
#include "tier/tier.h"

#define CHUNK (64 << 10)

struct rec {
	enum tier_ev_kind kind;
	enum tier_ev_why why;
	int where;
	char ns[KVFS_NS_NAME_MAX + 1];
	uint32_t tokens;
	bool has_key, has_parent;
	struct kvfs_key key, parent;
};

static struct {
	pthread_mutex_t mu;
	struct rec ev[4096];
	size_t n;
} got = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void sink(void *arg, const struct tier_event *e)
{
	(void)arg;
	pthread_mutex_lock(&got.mu);
	if (got.n < sizeof(got.ev) / sizeof(got.ev[0])) {
		struct rec *r = &got.ev[got.n++];
		memset(r, 0, sizeof(*r));
		r->kind = e->kind;
		r->why = e->why;
		r->where = e->where;
		snprintf(r->ns, sizeof(r->ns), "%s", e->ns_name);
		r->tokens = e->chunk_tokens;
		if ((r->has_key = e->key != NULL))
			r->key = *e->key;
		if ((r->has_parent = e->parent != NULL))
			r->parent = *e->parent;
	}
	pthread_mutex_unlock(&got.mu);
}

static void reset(void)
{
	pthread_mutex_lock(&got.mu);
	got.n = 0;
	pthread_mutex_unlock(&got.mu);
}

/* The events about key k, in order (copied out). */
static size_t about(const struct kvfs_key *k, struct rec *out, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&got.mu);
	for (size_t i = 0; i < got.n; i++)
		if (got.ev[i].has_key && !memcmp(&got.ev[i].key, k, sizeof(*k)) &&
		    n < max)
			out[n++] = got.ev[i];
	pthread_mutex_unlock(&got.mu);
	return n;
}

static struct kvfs_key mkkey(uint32_t i)
{
	struct kvfs_key k;

	memset(&k, 0, sizeof(k));
	k.b[0] = 0xe7;
	memcpy(k.b + 12, &i, 4);
	return k;
}

static struct tier *mk(const char *l2dir, bool flush)
{
	struct tier_config c;
	struct tier *t;
	char err[256];

	tier_config_default(&c);
	c.l1_size = 16 * CHUNK;
	c.max_chunk = CHUNK;
	c.policy = "lru";
	c.l2_dir = l2dir;
	c.l2_size = 64 << 20;
	c.flush_on_exit = flush;
	c.events.event = sink;
	assert_int_equal(tier_create(&c, &t, err, sizeof(err)), 0);
	return t;
}

static void put(struct tier *t, uint32_t ns, uint32_t i, int parent)
{
	struct kvfs_key k = mkkey(i), p = mkkey((uint32_t)parent);
	struct tier_wr *w;
	uint8_t *buf = malloc(CHUNK);

	for (size_t j = 0; j < CHUNK; j++)
		buf[j] = (uint8_t)(rand() >> 7); /* incompressible */
	assert_int_equal(tier_wr_begin(t, ns, &k, CHUNK, &w), 0);
	assert_int_equal(tier_wr_pwrite(t, w, buf, CHUNK, 0), 0);
	if (parent >= 0)
		assert_int_equal(tier_wr_set_parent(t, w, &p, 0), 0);
	assert_int_equal(tier_wr_publish(t, w, NULL), 0);
	free(buf);
}

static int where(struct tier *t, uint32_t ns, uint32_t i)
{
	struct tier_info info;
	struct kvfs_key k = mkkey(i);

	return tier_stat(t, ns, &k, &info) ? TIER_NONE : (int)info.where;
}

/* Waits for the L2 writes of demoted chunks to land (where == L2 already,
 * the record is being written). */
static void settle(void)
{
	usleep(300 * 1000);
}

/* No L2: publish, evict, unlink, rmdir; nothing before start. */
static void test_l1_only(void **state)
{
	struct tier *t = mk(NULL, false);
	uint32_t ns;
	struct rec r[8];
	struct kvfs_key k0 = mkkey(0), k1 = mkkey(1), k2 = mkkey(2);

	reset();
	assert_int_equal(tier_ns_create(t, "m", &ns), 0);
	assert_int_equal(tier_ns_set_chunk_tokens(t, ns, 16), 0);
	put(t, ns, 0, -1); /* before start: silent */
	assert_int_equal(about(&k0, r, 8), 0);
	tier_events_start(t); /* announces chunk 0 */
	assert_int_equal(about(&k0, r, 8), 1);
	assert_int_equal(r[0].kind, TIER_EV_STORED);
	assert_int_equal(r[0].why, TIER_EV_RECOVER);
	assert_int_equal(r[0].where, TIER_L1);
	tier_events_start(t); /* once only */
	assert_int_equal(about(&k0, r, 8), 1);

	put(t, ns, 1, 0);
	assert_int_equal(about(&k1, r, 8), 1);
	assert_int_equal(r[0].kind, TIER_EV_STORED);
	assert_int_equal(r[0].why, TIER_EV_PUBLISH);
	assert_int_equal(r[0].where, TIER_L1);
	assert_string_equal(r[0].ns, "m");
	assert_int_equal(r[0].tokens, 16);
	assert_true(r[0].has_parent);
	assert_memory_equal(&r[0].parent, &k0, sizeof(k0));

	for (uint32_t i = 2; i < 40; i++)
		put(t, ns, i, (int)i - 1);
	/* chunk 0 (lru) was evicted with nothing below: removed from L1 */
	assert_int_equal(where(t, ns, 0), TIER_NONE);
	assert_int_equal(about(&k0, r, 8), 2);
	assert_int_equal(r[1].kind, TIER_EV_REMOVED);
	assert_int_equal(r[1].why, TIER_EV_EVICT);
	assert_int_equal(r[1].where, TIER_L1);

	assert_int_equal(tier_unlink(t, ns, &k2), -ENOENT); /* evicted too */
	struct kvfs_key k39 = mkkey(39);
	assert_int_equal(tier_unlink(t, ns, &k39), 0);
	assert_int_equal(about(&k39, r, 8), 2);
	assert_int_equal(r[1].kind, TIER_EV_REMOVED);
	assert_int_equal(r[1].why, TIER_EV_UNLINK);

	/* rmdir: AllBlocksCleared of that namespace */
	for (uint32_t i = 0; i < 40; i++) {
		struct kvfs_key k = mkkey(i);
		tier_unlink(t, ns, &k);
	}
	reset();
	assert_int_equal(tier_ns_remove(t, ns), 0);
	pthread_mutex_lock(&got.mu);
	assert_int_equal(got.n, 1);
	assert_int_equal(got.ev[0].kind, TIER_EV_CLEARED);
	assert_string_equal(got.ev[0].ns, "m");
	assert_false(got.ev[0].has_key);
	pthread_mutex_unlock(&got.mu);
	tier_destroy(t);
}

/* Flips a payload byte of every record of key k under dir. */
static int damage(const char *dir, const struct kvfs_key *k)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int hits = 0;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char p[4096];
		struct stat sb;
		if (strncmp(de->d_name, "seg-", 4))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		int fd = open(p, O_RDWR);
		if (fd < 0)
			continue;
		fstat(fd, &sb);
		for (off_t off = 0; off + 4096 <= sb.st_size; off += 4096) {
			struct kvrec_hdr h;
			uint8_t b;
			if (pread(fd, &h, sizeof(h), off) != sizeof(h) ||
			    h.magic != KVREC_MAGIC || memcmp(h.key, k->b, 16))
				continue;
			off_t at = off + (off_t)sizeof(h) + 100;
			if (pread(fd, &b, 1, at) == 1) {
				b ^= 0x5a;
				if (pwrite(fd, &b, 1, at) == 1)
					hits++;
			}
		}
		fsync(fd);
		close(fd);
	}
	closedir(d);
	return hits;
}

/* L2: demotion, promotion, recovery, a corrupt record dropped. */
static void test_l2_moves(void **state)
{
	char dir[] = "/tmp/kvfs-tevtest-XXXXXX";
	struct tier *t;
	uint32_t ns;
	struct rec r[8];
	struct kvfs_key k0 = mkkey(0), k5 = mkkey(5);
	struct tier_chunk *c;
	size_t n;

	assert_non_null(mkdtemp(dir));
	t = mk(dir, true);
	tier_events_start(t);
	reset();
	assert_int_equal(tier_ns_create(t, "d", &ns), 0);
	for (uint32_t i = 0; i < 24; i++)
		put(t, ns, i, -1);
	settle();
	assert_int_equal(where(t, ns, 0), TIER_L2);
	n = about(&k0, r, 8);
	assert_int_equal(n, 3); /* stored L1, removed L1, stored L2 */
	assert_int_equal(r[1].kind, TIER_EV_REMOVED);
	assert_int_equal(r[1].where, TIER_L1);
	assert_int_equal(r[1].why, TIER_EV_DEMOTE);
	assert_int_equal(r[2].kind, TIER_EV_STORED);
	assert_int_equal(r[2].where, TIER_L2);

	/* promotion: the reverse */
	assert_int_equal(tier_get(t, ns, &k0, &c), 0);
	tier_put(t, c);
	assert_int_equal(where(t, ns, 0), TIER_L1);
	n = about(&k0, r, 8);
	assert_true(n >= 5);
	assert_int_equal(r[3].kind, TIER_EV_REMOVED);
	assert_int_equal(r[3].where, TIER_L2);
	assert_int_equal(r[3].why, TIER_EV_PROMOTE);
	assert_int_equal(r[4].kind, TIER_EV_STORED);
	assert_int_equal(r[4].where, TIER_L1);

	/* restart: silent until start, which announces every chunk in L2 */
	tier_destroy(t); /* flush_on_exit: everything goes to L2 */
	reset();
	t = mk(dir, false);
	assert_int_equal(tier_ns_find(t, "d", &ns), 0);
	pthread_mutex_lock(&got.mu);
	assert_int_equal(got.n, 0);
	pthread_mutex_unlock(&got.mu);
	tier_events_start(t);
	for (uint32_t i = 0; i < 24; i++) {
		struct kvfs_key k = mkkey(i);
		assert_int_equal(about(&k, r, 8), 1);
		assert_int_equal(r[0].kind, TIER_EV_STORED);
		assert_int_equal(r[0].where, TIER_L2);
		assert_int_equal(r[0].why, TIER_EV_RECOVER);
		assert_string_equal(r[0].ns, "d");
	}

	/* a corrupt record: read as a miss, dropped, removed from L2 */
	assert_true(damage(dir, &k5) >= 1);
	assert_int_equal(tier_get(t, ns, &k5, &c), -ENOENT);
	n = about(&k5, r, 8);
	assert_int_equal(n, 2);
	assert_int_equal(r[1].kind, TIER_EV_REMOVED);
	assert_int_equal(r[1].where, TIER_L2);
	assert_int_equal(r[1].why, TIER_EV_DROP);
	tier_destroy(t);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_l1_only),
		cmocka_unit_test(test_l2_moves),
	};

	srand(1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
