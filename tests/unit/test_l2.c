/*
 * test_l2.c - the L2 segment log on real files (io_uring, O_DIRECT where
 * the filesystem allows it) in a temporary directory under /var/tmp: round
 * trips of every kind of chunk, the directory lock, bad directories and
 * sizes, a filesystem that fills up, appends and reads from many threads.
 * Recovery is in test_l2_recover.c, reclaim in test_l2_reclaim.c, the
 * engine with L2 in test_l2_engine.c and test_l2_ingest.c.
 */
#include "l2_test.h"

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

/* Values of elem bytes whose first byte is random and the others nearly
 * constant: the shuffled first plane is stored as raw zstd blocks (a
 * copy, no check of its own), the rest compresses. */
static void fill_planes(uint8_t *buf, size_t len, int elem, uint64_t seed)
{
	fill_random(buf, len, seed);
	for (size_t i = 0; i + (size_t)elem <= len; i += (size_t)elem)
		for (int b = 1; b < elem; b++)
			buf[i + (size_t)b] = (uint8_t)(0x3f + (buf[i] & 1));
}

/*
 * Chunks of 1 MiB and more decode on the threaded path, unshuffled and
 * checksummed a part at a time: sizes around the parts and the planes,
 * with tails past the last whole value, both shuffles, come back exact.
 */
static void test_threaded_decode_sizes(void **state)
{
	static const size_t sizes[] = { (1u << 20), (1u << 20) + 1,
					(1u << 20) + 2, (2u << 20) + 3,
					(3u << 20) + 65537, (2u << 20) - 6 };
	static const int elems[] = { 2, 4 };
	struct env *e = env_new();
	uint8_t *buf = malloc(4 << 20), *back = malloc(4 << 20);
	struct l2_stats st;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, 256ull << 20, err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (size_t s = 0; s < 2; s++) {
			struct kvfs_key k = mkkey(100 + i * 2 + s);

			fill_planes(buf, sizes[i], elems[s], i * 2 + s);
			assert_int_equal(put(e, "model.bf16", &k, buf, sizes[i],
					     1, elems[s], true, NULL), 0);
			memset(back, 0xee, sizes[i]);
			assert_int_equal(get(e, "model.bf16", &k, back,
					     sizes[i]), 0);
			assert_memory_equal(buf, back, sizes[i]);
		}
	l2_get_stats(e->l2, &st);
	assert_int_equal(st.corrupt, 0);
	/* compressed: the threaded zstd path, not the raw one */
	assert_true(st.bytes < st.raw_bytes * 3 / 4);
	free(buf);
	free(back);
	env_free(e);
}

/*
 * A byte flipped inside a raw zstd block decodes without complaint; only
 * the checksum of the chunk, now computed a part at a time as the chunk
 * is unshuffled, finds it: the read is refused (a miss), at the start of
 * the chunk or in its last part, and the intact record beside it reads.
 */
static void test_threaded_corrupt_raw_block(void **state)
{
	size_t len = (2u << 20) + 3;
	struct env *e = env_new();
	uint8_t *buf = malloc(len), *back = malloc(len);
	/* payload offsets: early in frame 0, late in frame 1 (the end of
	 * the first plane: the chunk's last 64 KiB once unshuffled) */
	static const uint64_t at[] = { 1000, (1u << 20) - 200 };
	struct l2_loc loc[3];
	struct l2_stats st;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, 256ull << 20, err, sizeof(err)), 0);
	for (int i = 0; i < 3; i++) {
		struct kvfs_key k = mkkey(200 + (uint64_t)i);

		fill_planes(buf, len, 2, 50 + (uint64_t)i);
		assert_int_equal(put(e, "model.bf16", &k, buf, len, 1, 2, true,
				     &loc[i]), 0);
	}
	l2_get_stats(e->l2, &st);
	assert_true(st.bytes < st.raw_bytes * 3 / 4);
	for (int i = 0; i < 2; i++) {
		struct kvfs_key k = mkkey(200 + (uint64_t)i);

		flip_byte(e, &loc[i], sizeof(struct l2_rec_hdr) + at[i]);
		assert_int_equal(get(e, "model.bf16", &k, back, len), -EBADMSG);
	}
	l2_get_stats(e->l2, &st);
	assert_int_equal(st.corrupt, 2);
	{
		struct kvfs_key k = mkkey(202);

		fill_planes(buf, len, 2, 52);
		assert_int_equal(get(e, "model.bf16", &k, back, len), 0);
		assert_memory_equal(buf, back, len);
	}
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

/* l2_sync (an fsync of a chunk): a live record is fdatasync'ed and
 * counted; a location that holds no live record (unknown segment or
 * block, freed) is -ENOENT, so the engine looks its index up again. */
static void test_sync(void **state)
{
	struct env *e = env_new();
	uint8_t buf[10000];
	struct kvfs_key k = mkkey(7);
	struct l2_loc loc, bad;
	struct l2_stats st;
	char err[256];

	(void)state;
	assert_int_equal(env_open(e, 256ull << 20, err, sizeof(err)), 0);
	fill_bf16(buf, sizeof(buf), 7);
	assert_int_equal(put(e, "ns", &k, buf, sizeof(buf), 1, 2, true, &loc),
			 0);
	assert_int_equal(l2_sync(e->l2, &loc), 0);
	assert_int_equal(l2_sync(e->l2, &loc), 0);
	l2_get_stats(e->l2, &st);
	assert_int_equal(st.syncs, 2);
	assert_int_equal(st.errors, 0);
	bad = loc;
	bad.blk++;
	assert_int_equal(l2_sync(e->l2, &bad), -ENOENT);
	bad = loc;
	bad.seg += 100;
	assert_int_equal(l2_sync(e->l2, &bad), -ENOENT);
	bad = loc;
	bad.nblk++;
	assert_int_equal(l2_sync(e->l2, &bad), -ENOENT);
	l2_free(e->l2, &loc);
	assert_int_equal(l2_sync_frees(e->l2, 2000), 0);
	assert_int_equal(l2_sync(e->l2, &loc), -ENOENT);
	l2_get_stats(e->l2, &st);
	assert_int_equal(st.syncs, 2);
	env_free(e);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_big_chunk),
		cmocka_unit_test(test_threaded_decode_sizes),
		cmocka_unit_test(test_threaded_corrupt_raw_block),
		cmocka_unit_test(test_zeros_and_random),
		cmocka_unit_test(test_lock),
		cmocka_unit_test(test_bad_dirs_and_sizes),
		cmocka_unit_test(test_full_filesystem),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_sync),
	};

	atexit(tmpfs_umount_all);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
