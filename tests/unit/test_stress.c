/*
 * test_stress.c - 8 threads publish, pin, read, unpin, unlink and evict on
 * one engine with a small arena, so eviction runs all the time. A chunk's
 * size and bytes are a function of its key alone, so every byte any thread
 * reads is checked against what any writer of that key wrote, across
 * evictions, unlinks and re-publications. Runs about 2.5 seconds.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "hash/hashkey.h"
#include "kvfs.h"
#include "tier/tier.h"

#define PAGE 4096u
#define NTHREADS 8
#define NKEYS 60
#define RUN_NS 2500000000ull

struct shared {
	struct tier *t;
	uint32_t ns[2];
	atomic_ulong reads, bytes_read, publishes, eexist, enospc, gone;
	atomic_int bad;
	atomic_bool stop;
};

static struct kvfs_key key_of(uint32_t i)
{
	struct kvfs_key k;

	memset(&k, 0, sizeof(k));
	memcpy(k.b, &i, sizeof(i));
	k.b[15] = 0x5A;
	return k;
}

static uint32_t id_of(const struct kvfs_key *k)
{
	uint32_t i;

	memcpy(&i, k->b, sizeof(i));
	return i;
}

/* Sizes: mostly 2 pages (one namespace layout), some odd sizes, some
 * empty, up to 5 pages: they fragment the arena. */
static size_t size_of(uint32_t i)
{
	switch (i % 7) {
	case 0:
		return 0;
	case 1:
		return 1 + (i * 977u) % (5 * PAGE);
	case 2:
		return 3 * PAGE + 11;
	default:
		return 2 * PAGE;
	}
}

static uint8_t byte_at(uint32_t i, uint32_t ns, uint64_t off)
{
	uint64_t x = (off + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)i << 20 ^ ns;

	return (uint8_t)(x >> 29);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (uint32_t)(*s >> 16);
}

static void on_gone(void *arg, uint32_t ns, const struct kvfs_key *key,
		    enum tier_gone_reason why)
{
	struct shared *sh = arg;

	(void)ns;
	(void)key;
	if (why != TIER_GONE_EVICTED)
		atomic_store(&sh->bad, 1);
	atomic_fetch_add(&sh->gone, 1);
}

static void do_publish(struct shared *sh, uint32_t ns, uint32_t i,
		       uint64_t *seed, uint8_t *buf)
{
	struct kvfs_key k = key_of(i);
	size_t size = size_of(i), a, b;
	bool temp = rnd(seed) % 4 == 0;
	struct tier_wr *w;
	int rc;

	for (size_t j = 0; j < size; j++)
		buf[j] = byte_at(i, ns, j);
	rc = tier_wr_begin(sh->t, ns, temp ? NULL : &k,
			   rnd(seed) % 2 ? size : 0, &w);
	if (rc == -EEXIST || rc == -ENOSPC) {
		atomic_fetch_add(rc == -EEXIST ? &sh->eexist : &sh->enospc, 1);
		return;
	}
	if (rc) {
		fprintf(stderr, "wr_begin: %d\n", rc);
		atomic_store(&sh->bad, 1);
		return;
	}
	/* Three pieces, the last one first, so growth and holes happen. */
	a = size ? rnd(seed) % size : 0;
	b = a + (size - a) / 2;
	rc = tier_wr_pwrite(sh->t, w, buf + b, size - b, b);
	if (!rc)
		rc = tier_wr_pwrite(sh->t, w, buf, a, 0);
	if (!rc)
		rc = tier_wr_pwrite(sh->t, w, buf + a, b - a, a);
	if (rc == -ENOSPC) {
		atomic_fetch_add(&sh->enospc, 1);
		tier_wr_abort(sh->t, w);
		return;
	}
	if (rc) {
		fprintf(stderr, "pwrite: %d\n", rc);
		atomic_store(&sh->bad, 1);
		tier_wr_abort(sh->t, w);
		return;
	}
	if (tier_wr_size(w) != size) {
		fprintf(stderr, "writer size %llu != %zu\n",
			(unsigned long long)tier_wr_size(w), size);
		atomic_store(&sh->bad, 1);
	}
	rc = tier_wr_publish(sh->t, w, temp ? &k : NULL);
	if (rc == 0)
		atomic_fetch_add(&sh->publishes, 1);
	else if (rc == -EEXIST)
		atomic_fetch_add(&sh->eexist, 1);
	else {
		fprintf(stderr, "publish: %d\n", rc);
		atomic_store(&sh->bad, 1);
	}
}

static void verify(struct shared *sh, uint32_t ns, struct tier_chunk *c,
		   uint32_t i, uint64_t *seed, uint8_t *buf)
{
	size_t size = size_of(i), off = 0;
	const uint8_t *p = tier_chunk_ptr(c);

	if (tier_chunk_size(c) != size) {
		fprintf(stderr, "key %u: size %llu != %zu\n", i,
			(unsigned long long)tier_chunk_size(c), size);
		atomic_store(&sh->bad, 1);
		return;
	}
	/* Read in random pieces through tier_chunk_read. */
	while (off < size) {
		size_t n = 1 + rnd(seed) % (2 * PAGE);
		long got = tier_chunk_read(sh->t, c, buf, n, off);

		if (got <= 0 || (size_t)got > n) {
			atomic_store(&sh->bad, 1);
			return;
		}
		for (long j = 0; j < got; j++)
			if (buf[j] != byte_at(i, ns, off + (size_t)j)) {
				fprintf(stderr, "key %u ns %u: byte %zu bad\n",
					i, ns, off + (size_t)j);
				atomic_store(&sh->bad, 1);
				return;
			}
		off += (size_t)got;
	}
	if (tier_chunk_read(sh->t, c, buf, 1, size) != 0)
		atomic_store(&sh->bad, 1);
	/* And through the pointer. */
	for (size_t j = 0; j < size; j++)
		if (p[j] != byte_at(i, ns, j)) {
			atomic_store(&sh->bad, 1);
			return;
		}
	atomic_fetch_add(&sh->reads, 1);
	atomic_fetch_add(&sh->bytes_read, size);
}

static void *worker(void *arg)
{
	struct shared *sh = arg;
	uint64_t seed = (uint64_t)(uintptr_t)&seed ^ now_ns();
	uint8_t *buf = malloc(8 * PAGE);
	struct tier_chunk *held[4] = { NULL };
	uint32_t held_id[4] = { 0 }, held_ns[4] = { 0 };

	if (!buf)
		abort();
	while (!atomic_load(&sh->stop) && !atomic_load(&sh->bad)) {
		uint32_t i = rnd(&seed) % NKEYS, op = rnd(&seed) % 100;
		uint32_t ns = sh->ns[rnd(&seed) % 2];
		struct kvfs_key k = key_of(i);
		struct tier_chunk *c;

		if (op < 35) {
			do_publish(sh, ns, i, &seed, buf);
		} else if (op < 75) {
			int slot = (int)(rnd(&seed) % 2);

			if (tier_get(sh->t, ns, &k, &c) != 0)
				continue;
			verify(sh, ns, c, i, &seed, buf);
			/* Keep some chunks pinned across iterations. */
			if (held[slot]) {
				verify(sh, held_ns[slot], held[slot],
				       held_id[slot], &seed, buf);
				tier_put(sh->t, held[slot]);
			}
			held[slot] = c;
			held_id[slot] = i;
			held_ns[slot] = ns;
		} else if (op < 88) {
			struct kvfs_key chain[3];
			uint32_t found = 0, l1 = 0, l2 = 0;

			for (int j = 0; j < 3; j++)
				chain[j] = key_of((i + (uint32_t)j) % NKEYS);
			if (tier_lookup(sh->t, ns, chain, 3, 0, true, false,
					&found, &l1, &l2) != 0 ||
			    l1 != found || l2 != 0) {
				atomic_store(&sh->bad, 1);
				continue;
			}
			for (uint32_t j = 0; j < found; j++) {
				struct tier_info info;

				/* Pinned: must still be there. */
				if (tier_stat(sh->t, ns, &chain[j], &info) == 0 &&
				    info.size != size_of(id_of(&chain[j])))
					atomic_store(&sh->bad, 1);
			}
			for (uint32_t j = 0; j < found; j++)
				tier_unpin_key(sh->t, ns, &chain[j]);
		} else if (op < 94) {
			int rc = tier_unlink(sh->t, ns, &k);

			if (rc != 0 && rc != -ENOENT)
				atomic_store(&sh->bad, 1);
		} else if (op < 97) {
			bool on = rnd(&seed) % 3 == 0;

			(void)tier_set_user_pin(sh->t, ns, &k, on);
		} else {
			struct tier_info info;

			if (tier_stat(sh->t, ns, &k, &info) == 0 &&
			    tier_checksum(sh->t, ns, &k, info.gen,
					  &info.checksum) == 0) {
				size_t size = size_of(i);

				for (size_t j = 0; j < size; j++)
					buf[j] = byte_at(i, ns, j);
				if (info.checksum != hashkey_checksum(buf, size))
					atomic_store(&sh->bad, 1);
			}
		}
	}
	for (int s = 0; s < 4; s++)
		if (held[s])
			tier_put(sh->t, held[s]);
	free(buf);
	return NULL;
}

static void test_stress(void **state)
{
	struct shared sh;
	struct tier_config cfg;
	struct tier_stats st;
	pthread_t th[NTHREADS];
	char err[256];
	uint64_t t0;

	(void)state;
	memset(&sh, 0, sizeof(sh));
	tier_config_default(&cfg);
	/* 48 pages: ~20 chunks fit, NKEYS * 2 namespaces compete. */
	cfg.l1_size = 48 * PAGE;
	cfg.max_chunk = 8 * PAGE;
	cfg.policy = "s3fifo";
	cfg.on_gone = on_gone;
	cfg.on_gone_arg = &sh;
	assert_int_equal(tier_create(&cfg, &sh.t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(sh.t, "a", &sh.ns[0]), 0);
	assert_int_equal(tier_ns_create(sh.t, "b", &sh.ns[1]), 0);

	t0 = now_ns();
	for (int i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, worker, &sh), 0);
	while (now_ns() - t0 < RUN_NS && !atomic_load(&sh.bad))
		usleep(20000);
	atomic_store(&sh.stop, true);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&sh.bad), 0);

	tier_get_stats(sh.t, &st);
	printf("stress: %lu reads (%lu MB), %lu publishes, %lu evictions, "
	       "%lu EEXIST, %lu ENOSPC\n",
	       (unsigned long)sh.reads, (unsigned long)(sh.bytes_read >> 20),
	       (unsigned long)sh.publishes, (unsigned long)st.evictions,
	       (unsigned long)sh.eexist, (unsigned long)sh.enospc);
	assert_true(sh.reads > 1000);
	assert_true(sh.publishes > 1000);
	assert_true(st.evictions > 500);
	assert_int_equal(st.evictions, atomic_load(&sh.gone));
	assert_int_equal(st.publishes, sh.publishes);
	assert_int_equal(st.writers, 0);
	assert_int_equal(st.writer_bytes, 0);
	assert_true(st.l1_bytes <= st.l1_capacity);

	/* Quiet now: every chunk left is intact and unpinned (except user
	 * pins, which hold one ref). */
	for (int n = 0; n < 2; n++) {
		struct tier_dirent *d;
		size_t cnt;
		uint64_t seed = 1;
		uint8_t *buf = malloc(8 * PAGE);

		assert_non_null(buf);
		assert_int_equal(tier_ns_snapshot(sh.t, sh.ns[n], &d, &cnt), 0);
		for (size_t j = 0; j < cnt; j++) {
			struct tier_chunk *c;
			struct tier_info info;

			assert_int_equal(tier_stat(sh.t, sh.ns[n], &d[j].key,
						   &info), 0);
			assert_int_equal(info.refs, info.user_pin ? 1 : 0);
			assert_int_equal(tier_get(sh.t, sh.ns[n], &d[j].key, &c),
					 0);
			verify(&sh, sh.ns[n], c, id_of(&d[j].key), &seed, buf);
			tier_put(sh.t, c);
			(void)tier_set_user_pin(sh.t, sh.ns[n], &d[j].key,
						false);
		}
		assert_int_equal(atomic_load(&sh.bad), 0);
		free(d);
		free(buf);
	}
	/* With everything unpinned, the arena can be emptied by eviction:
	 * a max_chunk writer fits. */
	{
		struct tier_wr *w;

		assert_int_equal(tier_wr_begin(sh.t, sh.ns[0], NULL,
					       8 * PAGE, &w), 0);
		tier_wr_abort(sh.t, w);
	}
	tier_destroy(sh.t);
}

/* Writers of one key race, keyed and through temporaries: exactly one wins
 * each round, the others get EEXIST, and the winner's bytes are intact. */
struct race {
	struct tier *t;
	uint32_t ns;
	uint32_t round;
	pthread_barrier_t start, done;
	atomic_int wins, losses, bad, next_id;
};

static void *racer(void *arg)
{
	struct race *r = arg;
	uint8_t buf[3 * PAGE];
	uint32_t me = (uint32_t)atomic_fetch_add(&r->next_id, 1);

	for (uint32_t round = 0; round < 200; round++) {
		struct kvfs_key k = key_of(1000 + round);
		bool temp = (me + round) & 1; /* half use write-then-rename */
		struct tier_wr *w;
		int rc;

		for (size_t j = 0; j < sizeof(buf); j++)
			buf[j] = byte_at(1000 + round, r->ns, j);
		pthread_barrier_wait(&r->start);
		rc = tier_wr_begin(r->t, r->ns, temp ? NULL : &k, 0, &w);
		if (rc == 0) {
			rc = tier_wr_pwrite(r->t, w, buf, sizeof(buf), 0);
			if (rc == 0)
				rc = tier_wr_publish(r->t, w, temp ? &k : NULL);
			else
				tier_wr_abort(r->t, w);
		}
		if (rc == 0)
			atomic_fetch_add(&r->wins, 1);
		else if (rc == -EEXIST)
			atomic_fetch_add(&r->losses, 1);
		else
			atomic_store(&r->bad, 1);
		pthread_barrier_wait(&r->done);
	}
	return NULL;
}

static void test_publish_race(void **state)
{
	struct tier_config cfg;
	struct race r;
	pthread_t th[NTHREADS];
	char err[256];
	uint8_t *buf = malloc(8 * PAGE);

	(void)state;
	assert_non_null(buf);
	memset(&r, 0, sizeof(r));
	tier_config_default(&cfg);
	cfg.l1_size = 2048 * PAGE;
	cfg.max_chunk = 8 * PAGE;
	cfg.policy = "lru";
	assert_int_equal(tier_create(&cfg, &r.t, err, sizeof(err)), 0);
	assert_int_equal(tier_ns_create(r.t, "race", &r.ns), 0);
	pthread_barrier_init(&r.start, NULL, NTHREADS);
	pthread_barrier_init(&r.done, NULL, NTHREADS);
	for (int i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, racer, &r), 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&r.bad), 0);
	assert_int_equal(atomic_load(&r.wins), 200);
	assert_int_equal(atomic_load(&r.losses), 200 * (NTHREADS - 1));
	for (uint32_t round = 0; round < 200; round++) {
		struct kvfs_key k = key_of(1000 + round);
		struct tier_chunk *c;

		assert_int_equal(tier_get(r.t, r.ns, &k, &c), 0);
		assert_int_equal(tier_chunk_read(r.t, c, buf, 8 * PAGE, 0),
				 3 * PAGE);
		for (size_t j = 0; j < 3 * PAGE; j++)
			assert_int_equal(buf[j], byte_at(1000 + round, r.ns, j));
		tier_put(r.t, c);
	}
	pthread_barrier_destroy(&r.start);
	pthread_barrier_destroy(&r.done);
	tier_destroy(r.t);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stress),
		cmocka_unit_test(test_publish_race),
	};

	alarm(120);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
