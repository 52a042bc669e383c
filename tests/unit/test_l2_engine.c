/*
 * test_l2_engine.c - the engine (tier.h) with an L2 directory: demotion
 * and promotion, a warm restart, corrupt records as misses, temp buffers
 * for pinned L1, a bad l2_dir, empty chunks through every L2 path, parent
 * counts across tiers, readers on many threads. Ingest and prefetch are
 * in test_l2_ingest.c.
 */
#include "l2_test.h"

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
	/* without a checkpoint recovery scans and checks payloads: the
	 * record is skipped and counted (with one, the read finds it:
	 * test_l2_ckpt.c) */
	snprintf(p, sizeof(p), "%s/l2.ckpt", e->dir);
	assert_int_equal(unlink(p), 0);
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
		assert_true(st.read_misses >= 1);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_engine_demote_promote),
		cmocka_unit_test(test_engine_restart),
		cmocka_unit_test(test_engine_corrupt_is_a_miss),
		cmocka_unit_test(test_engine_corrupt_live),
		cmocka_unit_test(test_engine_pinned_l1_tmp_buffer),
		cmocka_unit_test(test_engine_bad_l2_dir),
		cmocka_unit_test(test_engine_empty_chunk),
		cmocka_unit_test(test_engine_prefix_parent_in_l2),
		cmocka_unit_test(test_engine_threads),
	};

	atexit(tmpfs_umount_all);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
